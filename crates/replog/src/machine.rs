//! The replicated state machine over the log (docs/failover.md, "The replicated state
//! machine"): one component for every daemon whose state is an ordered log of its own events
//! (mbatchd today, the coordinator next), generic over the application.
//!
//! The application keeps its logic as it is: on the leader it steps its logic, which
//! applies each event to its state as it chooses it; the shell hands each event's bytes to
//! [`Machine::propose`] instead of appending it to a local log, and each answer the step
//! produced (a reply to a client, a message to an execution host) to [`Machine::hold`].
//! An answer is released ([`Step::Release`]) only when the last event proposed before it
//! is committed at the same index **and term** (held durably by a majority, which may be
//! the two followers while the leader's own fsync still runs) — or, with no event outstanding,
//! once a majority confirmed this candidate still leads (raft's read index: a heartbeat
//! round, [`crate::Replica::read_index`]) and the state applied what was committed then, so a
//! deposed leader that does not know it yet answers nothing from its stale state; on a follower, committed entries
//! are applied to the application's state through [`Application::apply`]. The layer never
//! knows what an event means: [`Application`] gives apply, snapshot and restore.
//!
//! The leader's state runs ahead of the log: it holds the events it proposed, committed or
//! not. When that can no longer be trusted — the leader lost its leadership with proposals
//! outstanding, saw an entry it proposed replaced (an `Apply` at its index with another
//! term), or a proposal was refused — the machine rebuilds the application's state from its
//! newest snapshot and the committed log (a leader that still leads the term of its
//! outstanding proposals, refused while it hands over, keeps them and rebuilds through them:
//! `Machine::refused`), and every answer held behind a proposal becomes
//! [`Step::NotDone`]: its events may or may not be committed later, so the caller answers
//! "not done" (a command retries with the same request id and meets the application's own
//! deduplication; an execution host resends what is unacknowledged).
//!
//! # The caller's contract, in order
//! 1. **Start.** [`Machine::recover`] with every record the candidate made durable (in
//!    order) and the application's newest durable snapshot; the machine loads the snapshot
//!    into the application (or an empty state) and the committed entries after it come
//!    back through [`Application::apply`] in the first drains.
//! 2. **Inputs.** [`Machine::tick`] on the shell's timer, [`Machine::receive`] for each
//!    message of another candidate; then [`Machine::drain`].
//! 3. **Serve only as a ready leader.** Step the application's logic only between
//!    [`Step::Lead`] and the next [`Step::Follow`] ([`Machine::is_serving`]); elsewhere
//!    answer "not leader" (with [`Machine::leader`] as the hint). At `Lead` the state holds
//!    every committed entry, all of the leader's predecessors' included: the application
//!    does what it does at a start (mbatchd steps `Start`) and serves. At `Follow` it stops
//!    serving and closes what only a leader keeps (execution hosts' channels).
//! 4. **A step's effects.** Each event, in order, to [`Machine::propose`]; then each answer,
//!    in order, to [`Machine::hold`]. Then [`Machine::drain`].
//! 5. **Carry out every [`Step`] of a drain in order, all of them, before handing the
//!    machine anything else**: [`Step::Persist`] starts making its records durable, after
//!    every earlier one's; the steps after it do not wait for it, and once its records are
//!    durable (written and fsynced) the caller hands its ticket to [`Machine::persisted`]
//!    and drains — at once, or later between other inputs (what must wait for the disk,
//!    the machine holds back itself); [`Step::KeepSnapshot`] makes the leader's snapshot the
//!    application's newest durable one before the `Persist` that follows it starts;
//!    [`Step::Send`] to a candidate;
//!    [`Step::Release`] sends the answer (it is acknowledged now: durable on a majority);
//!    [`Step::NotDone`] answers "not done" (or drops it: the peer retries).
//! 6. **Snapshots.** [`Machine::compact`] when the application wants one (it succeeds only
//!    when no proposal is outstanding, so the state is exactly the committed log through
//!    the applied index): keep its data durably as the newest snapshot first, after the
//!    records of every `Persist` started, then persist its record.
//! 7. **Stopping.** Before a clean stop, wait until every `Persist` is durable (then
//!    [`crate::Replica::commit_record`] may be kept too).
//!
//! Durable, then acknowledged: nothing is released before a majority holds its entry
//! durably, and nothing this candidate sends leaves before the records it depends on are
//! durable here (the order of the steps).

use std::collections::VecDeque;

use crate::record::Record;
use crate::{BadMessage, Config, Effect, Error, Placed, Refused, Replica, ReplicaId, View};

/// The application whose state the log replicates.
pub trait Application {
    /// Applies a committed entry's bytes (never an empty entry: those are the leader's
    /// markers). An entry the application cannot apply is its own fatal error: it notes it
    /// and its shell stops the daemon after the drain.
    fn apply(&mut self, index: u64, data: &[u8]);
    /// The application's state as snapshot bytes.
    fn snapshot(&self) -> Vec<u8>;
    /// Replaces the state with a snapshot's, or with the empty state (`None`).
    fn restore(&mut self, snapshot: Option<&[u8]>);
}

/// Something the caller carries out, in the order [`Machine::drain`] returned them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step<M> {
    /// Make these records durable (append, fsync) after every earlier `Persist`'s, then
    /// hand `ticket` to [`Machine::persisted`]; later steps do not wait for it.
    Persist { ticket: u64, records: Vec<Record> },
    /// Send this message to candidate `to`.
    Send { to: ReplicaId, message: Vec<u8> },
    /// The leader's snapshot replaced the application's state (loaded already): keep it
    /// durably as the newest snapshot, with its index and term.
    KeepSnapshot { index: u64, term: u64, data: Vec<u8> },
    /// The committed entry at `index` is in the application's state now (applied here, or
    /// chosen here as the leader): for status and for checks; nothing to carry out.
    Applied { index: u64, term: u64, data: Vec<u8> },
    /// An answer whose events are committed: send it. `after` is the last proposal it
    /// waited for (its term is the term in which this candidate acknowledges), `None` for
    /// an answer that waited only for a majority to confirm the leadership.
    Release { answer: M, after: Option<Placed> },
    /// An answer whose events may never be committed: answer "not done" or drop it.
    NotDone(M),
    /// This candidate leads `term` and its state holds every committed entry: serve.
    Lead { term: u64 },
    /// This candidate stopped leading: stop serving; `leader` is the one it knows of.
    Follow { term: u64, leader: Option<ReplicaId> },
}

/// A snapshot taken by [`Machine::compact`]: keep `data` durably as the newest snapshot
/// (with `index` and `term`), then persist `record`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compaction {
    pub index: u64,
    pub term: u64,
    pub data: Vec<u8>,
    pub record: Record,
}

/// What an answer waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gate {
    /// The last proposal before it, committed with its term.
    Entry(Placed),
    /// With no proposal outstanding: a majority confirming this leader (read index `ctx`),
    /// and the state applied through the index confirmed.
    Read(u64),
}

/// An answer waiting.
struct Held<M> {
    gate: Gate,
    answer: M,
}

/// How often a full leader asks again for the transfer raft gave up on (as often as the
/// shells try a full disk again).
pub const HAND_OVER_RETRY_MS: u64 = 1_000;

/// When a leader whose disk is full hands its leadership over (docs/failover.md, "A full
/// disk on a candidate"): the one policy of mbatchd's shell and of the simulation's. While
/// full it asks ([`Machine::hand_over`]) at once and then every [`HAND_OVER_RETRY_MS`], as
/// long as it leads in the term it first asked in; elected again during the same stretch
/// of a full disk it keeps the leadership, so full candidates never hand it back and forth
/// for good. A disk with room again ends the stretch. A process starts with a new policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandOverPolicy {
    /// The term of this stretch's first transfer asked for.
    asked_in: Option<u64>,
    /// No transfer is asked for before this time (the caller's monotonic ms).
    next_at_ms: u64,
}

impl HandOverPolicy {
    /// One turn of the shell with its disk `full` at `now_ms` (any monotonic clock in ms):
    /// maybe asks `machine` to hand over (drain next). Returns the candidate asked for, the
    /// first time in this stretch only (for the shell to say so once).
    pub fn turn<A: Application, M>(
        &mut self,
        machine: &mut Machine<A, M>,
        full: bool,
        now_ms: u64,
    ) -> Option<ReplicaId> {
        if !full {
            self.asked_in = None;
            return None;
        }
        let term = machine.view().term;
        if !machine.is_serving()
            || self.asked_in.is_some_and(|asked| asked != term)
            || now_ms < self.next_at_ms
        {
            return None;
        }
        self.next_at_ms = now_ms + HAND_OVER_RETRY_MS;
        let to = machine.hand_over()?;
        self.asked_in.replace(term).is_none().then_some(to)
    }
}

/// The replicated state machine of one candidate.
pub struct Machine<A, M> {
    replica: Replica,
    app: A,
    /// The last entry applied (or covered by the snapshot), and its term.
    applied: u64,
    applied_term: u64,
    /// Proposals not yet applied, in index order (all in `leading`'s term).
    pending: VecDeque<Placed>,
    held: VecDeque<Held<M>>,
    /// The last read-index request (`ctx`) and whether it has been sent: answers held
    /// within one drain share one confirmation round.
    next_read: u64,
    read_sent: bool,
    /// Confirmed reads: ctx -> the commit index confirmed (until their answers go).
    confirmed: std::collections::BTreeMap<u64, u64>,
    /// Answers ready for the next drain (held behind nothing, or gone bad).
    out: Vec<Step<M>>,
    /// The term this candidate leads, as last seen, and whether it serves in it.
    leading: Option<u64>,
    serving: bool,
    /// A proposal was refused after the application applied its event: rebuild.
    broken: bool,
}

impl<A: Application, M> Machine<A, M> {
    /// A candidate restarting from its durable records and the application's newest
    /// snapshot (both empty for a new one); `app` is loaded with the snapshot here.
    pub fn recover(
        config: Config,
        mut app: A,
        records: Vec<Record>,
        snapshot: Option<(u64, u64, Vec<u8>)>,
    ) -> Result<Machine<A, M>, Error> {
        let (applied, applied_term) = snapshot.as_ref().map_or((0, 0), |s| (s.0, s.1));
        app.restore(snapshot.as_ref().map(|s| &s.2[..]));
        let replica = Replica::recover(config, records, snapshot)?;
        Ok(Machine {
            replica,
            app,
            applied,
            applied_term,
            pending: VecDeque::new(),
            held: VecDeque::new(),
            next_read: 0,
            read_sent: true,
            confirmed: std::collections::BTreeMap::new(),
            out: Vec::new(),
            leading: None,
            serving: false,
            broken: false,
        })
    }

    /// The application (its state: committed entries, and on the leader its own
    /// proposals).
    pub fn app(&self) -> &A {
        &self.app
    }

    /// The application, to step its logic (only while [`Machine::is_serving`]).
    pub fn app_mut(&mut self) -> &mut A {
        &mut self.app
    }

    /// The replica under the machine, for status and checks.
    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// The replica's view.
    pub fn view(&self) -> View {
        self.replica.view()
    }

    /// Whether this candidate leads and serves (between `Lead` and `Follow`).
    pub fn is_serving(&self) -> bool {
        self.serving
    }

    /// The leader this candidate knows of, for a "not leader, try X" answer.
    pub fn leader(&self) -> Option<ReplicaId> {
        self.replica.view().leader
    }

    /// The last entry in the application's committed state.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Whether a snapshot is due by weight ([`Replica::log_outweighs_snapshot`] through
    /// the applied index), whatever the number of entries since the last.
    pub fn log_outweighs_snapshot(&self) -> bool {
        self.replica.log_outweighs_snapshot(self.applied)
    }

    /// Hands the leadership to a caught-up follower ([`Replica::hand_over`]); drain next.
    pub fn hand_over(&mut self) -> Option<ReplicaId> {
        self.replica.hand_over()
    }

    /// Proposals not yet committed (the leader's state runs ahead of the log by these).
    pub fn outstanding(&self) -> usize {
        self.pending.len()
    }

    /// Answers held behind a proposal.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The records of the `Persist` with this ticket, and of every one before it, are
    /// durable; drain next.
    pub fn persisted(&mut self, ticket: u64) {
        self.replica.persisted(ticket);
    }

    /// One tick of the shell's clock.
    pub fn tick(&mut self) {
        self.replica.tick();
    }

    /// A message from another candidate.
    pub fn receive(&mut self, bytes: &[u8]) -> Result<(), BadMessage> {
        self.replica.receive(bytes)
    }

    /// Proposes an event the application applied to its state as it chose it. Refused when
    /// this candidate does not serve; a refusal of a serving leader (it lost its
    /// leadership within the step) also marks the state for a rebuild: it holds the event.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<Placed, Refused> {
        if !self.serving || self.broken {
            self.broken |= self.serving;
            return Err(Refused::NotLeader { leader: self.leader() });
        }
        match self.replica.propose(data) {
            Ok(placed) => {
                self.pending.push_back(placed);
                Ok(placed)
            }
            Err(refused) => {
                self.broken = true;
                Err(refused)
            }
        }
    }

    /// Holds an answer until every event proposed before it is committed; with none
    /// outstanding, until a majority confirms this candidate still leads (a round of
    /// heartbeats) and the state holds what was committed then: a deposed leader that does
    /// not know it yet never answers from its stale state.
    pub fn hold(&mut self, answer: M) {
        if self.broken || !self.serving {
            self.out.push(Step::NotDone(answer));
            return;
        }
        let gate = match self.pending.back() {
            Some(&placed) => Gate::Entry(placed),
            None => {
                if self.read_sent {
                    self.next_read += 1;
                    self.read_sent = false;
                }
                Gate::Read(self.next_read)
            }
        };
        self.held.push_back(Held { gate, answer });
    }

    /// Takes a snapshot of the application through the applied index and lets the log
    /// forget what it covers; `None` while proposals are outstanding (the state is then
    /// ahead of the log) or when nothing new was applied.
    pub fn compact(&mut self) -> Option<Compaction> {
        if !self.pending.is_empty() || self.broken {
            return None;
        }
        let data = self.app.snapshot();
        let record = self.replica.compact(self.applied, data.clone())?;
        let Record::Compacted { index, term } = record else { return None };
        Some(Compaction { index, term, data, record })
    }

    /// Everything to carry out now, in order (the module's contract, step 5).
    pub fn drain(&mut self) -> Vec<Step<M>> {
        let mut steps = std::mem::take(&mut self.out);
        if self.broken {
            self.refused(&mut steps);
        }
        if !self.read_sent {
            self.read_sent = true;
            if self.replica.read_index(self.next_read).is_err() {
                // No longer the leader: the next drain's role change answers "not done".
            }
        }
        for effect in self.replica.drain() {
            match effect {
                Effect::Persist { ticket, records } => steps.push(Step::Persist { ticket, records }),
                Effect::Send { to, message } => steps.push(Step::Send { to, message }),
                Effect::Restore { index, term, data } => {
                    // A leader's snapshot replaces everything, proposals included.
                    self.pending.clear();
                    self.not_done_all(&mut steps);
                    self.app.restore(Some(&data));
                    self.applied = index;
                    self.applied_term = term;
                    steps.push(Step::KeepSnapshot { index, term, data });
                }
                Effect::Apply { index, term, data } => self.apply(&mut steps, index, term, data),
                Effect::Confirmed { ctx, index } => {
                    self.confirmed.insert(ctx, index);
                    self.release(&mut steps);
                }
            }
        }
        // The leader's entries may be committed by its followers before they are durable
        // (and applied) here.
        self.release(&mut steps);
        self.roles(&mut steps);
        steps
    }

    fn apply(&mut self, steps: &mut Vec<Step<M>>, index: u64, term: u64, data: Vec<u8>) {
        match self.pending.front().copied() {
            Some(mine) if mine.index == index && mine.term == term => {
                // The application applied it when it chose it.
                self.pending.pop_front();
            }
            Some(mine) if mine.index <= index || !data.is_empty() => {
                // Our entry at this index was replaced (or another entry arrived among our
                // proposals): every proposal from here on is dead, and the state holds them.
                self.abandon(steps);
                self.apply_to_app(index, &data);
            }
            _ => self.apply_to_app(index, &data),
        }
        self.applied = index;
        self.applied_term = term;
        steps.push(Step::Applied { index, term, data });
        self.release(steps);
    }

    /// Releases the held answers, in order, whose gates are passed: an entry gate at or
    /// below the applied index (still held, so its term matched: else `abandon` took it),
    /// a read gate confirmed through an index the state has applied.
    fn release(&mut self, steps: &mut Vec<Step<M>>) {
        while let Some(first) = self.held.front() {
            let after = match first.gate {
                Gate::Entry(placed) if placed.index <= self.applied || self.replica.is_committed(placed) => {
                    Some(placed)
                }
                Gate::Read(ctx) if self.confirmed.get(&ctx).is_some_and(|&i| i <= self.applied) => None,
                _ => break,
            };
            let held = self.held.pop_front().expect("front exists");
            steps.push(Step::Release { answer: held.answer, after });
        }
        // Confirmations no held answer waits for any more.
        let oldest = self.held.iter().find_map(|h| match h.gate {
            Gate::Read(ctx) => Some(ctx),
            Gate::Entry(_) => None,
        });
        self.confirmed.retain(|&ctx, _| oldest.is_some_and(|o| ctx >= o));
    }

    fn apply_to_app(&mut self, index: u64, data: &[u8]) {
        if !data.is_empty() {
            self.app.apply(index, data);
        }
    }

    /// Every outstanding proposal is dead or unknown: the answers behind them are "not
    /// done", and the state goes back to the snapshot plus the committed log.
    fn abandon(&mut self, steps: &mut Vec<Step<M>>) {
        self.not_done_all(steps);
        if !self.pending.is_empty() || self.broken {
            self.pending.clear();
            self.broken = false;
            self.rebuild(self.applied);
        }
    }

    /// A proposal was refused after the application applied its event. A candidate that
    /// still leads the term of its outstanding proposals (raft-rs refuses proposals while
    /// it hands the leadership over) keeps them: they are in its log and commit as it
    /// leads, and some may be committed already by its followers while its own disk lags
    /// (a full one holds them back for as long as it lasts). So the state is rebuilt
    /// through them, without the refused events, and they stay outstanding; the answers
    /// held are "not done" all the same (their clients retry and meet the state that holds
    /// them). Rebuilt through the applied index only, this leader would serve from a state
    /// lacking entries its followers committed, and log their events a second time
    /// (found by the replicated mbatchd's simulation with full disks: a job's DONE twice).
    /// raft-rs refuses from the moment the shell asks for the transfer, between steps, so
    /// the proposals kept are whole steps. Otherwise, as [`Machine::abandon`].
    fn refused(&mut self, steps: &mut Vec<Step<M>>) {
        let view = self.replica.view();
        if !(view.is_leader && self.leading == Some(view.term)) {
            return self.abandon(steps);
        }
        self.not_done_all(steps);
        self.broken = false;
        let through = self.pending.back().map_or(self.applied, |placed| placed.index);
        self.rebuild(through);
    }

    fn not_done_all(&mut self, steps: &mut Vec<Step<M>>) {
        steps.extend(self.held.drain(..).map(|held| Step::NotDone(held.answer)));
        self.confirmed.clear();
    }

    /// The application's state from the newest snapshot and the entries after it through
    /// `through`: the applied index, or a leader's last outstanding proposal (the replica
    /// holds them: it forgets only what a snapshot of this machine covers).
    fn rebuild(&mut self, through: u64) {
        // The replica's snapshot is the application's newest (kept once, there).
        let base = match self.replica.snapshot() {
            Some((index, data)) => {
                self.app.restore(Some(data));
                index
            }
            None => {
                self.app.restore(None);
                0
            }
        };
        for index in base + 1..=through {
            match self.replica.entry_at(index) {
                Some(data) => self.apply_to_app(index, &data),
                None => unreachable!("entry {index} after the snapshot at {base} is in the log"),
            }
        }
    }

    /// Notices a change of leadership after a drain.
    fn roles(&mut self, steps: &mut Vec<Step<M>>) {
        let view = self.replica.view();
        let now = view.is_leader.then_some(view.term);
        if self.leading.is_some() && self.leading != now {
            let term = self.leading.take().expect("checked");
            if !self.pending.is_empty() || !self.held.is_empty() || self.broken {
                self.abandon(steps);
            }
            self.read_sent = true;
            if std::mem::take(&mut self.serving) {
                steps.push(Step::Follow { term, leader: view.leader });
            }
        }
        if now.is_some() && self.leading.is_none() {
            self.leading = now;
        }
        // Ready once this term's first entry (the leader's marker) is applied: every entry
        // of earlier terms is then in the state.
        if let Some(term) = self.leading
            && !self.serving
            && self.applied_term == term
        {
            self.serving = true;
            steps.push(Step::Lead { term });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An application whose state is the list of entries it holds.
    #[derive(Default)]
    struct List(Vec<u8>);

    impl Application for List {
        fn apply(&mut self, _index: u64, data: &[u8]) {
            self.0.extend_from_slice(data);
        }
        fn snapshot(&self) -> Vec<u8> {
            self.0.clone()
        }
        fn restore(&mut self, snapshot: Option<&[u8]>) {
            self.0 = snapshot.map(<[u8]>::to_vec).unwrap_or_default();
        }
    }

    type M3 = Vec<Machine<List, &'static str>>;

    fn three() -> M3 {
        (1..=3)
            .map(|id| {
                Machine::recover(Config::new(id, 3), List::default(), Vec::new(), None).expect("config")
            })
            .collect()
    }

    /// Delivers every message among the candidates not cut off until quiet; returns the
    /// released and not-done answers of each.
    fn settle(ms: &mut M3, cut: &[u64]) -> Vec<(u64, Step<&'static str>)> {
        settle_lagging(ms, cut, &[]).0
    }

    /// [`settle`], the persists of the candidates in `lagging` never reported durable (a
    /// full disk); also the last ticket it kept from being reported.
    fn settle_lagging(
        ms: &mut M3,
        cut: &[u64],
        lagging: &[u64],
    ) -> (Vec<(u64, Step<&'static str>)>, Option<u64>) {
        let mut seen = Vec::new();
        let mut withheld = None;
        for _ in 0..50 {
            let mut mail = Vec::new();
            // A persist reported durable lets held messages out in the next drain.
            let mut persisted = false;
            for (k, m) in ms.iter_mut().enumerate() {
                let mut durable = None;
                for step in m.drain() {
                    match step {
                        Step::Persist { ticket, .. } => durable = Some(ticket),
                        Step::Send { to, message } => mail.push((k as u64 + 1, to, message)),
                        s @ (Step::Release { .. }
                        | Step::NotDone(_)
                        | Step::Lead { .. }
                        | Step::Follow { .. }) => seen.push((k as u64 + 1, s)),
                        _ => {}
                    }
                }
                match durable {
                    Some(ticket) if lagging.contains(&(k as u64 + 1)) => withheld = Some(ticket),
                    Some(ticket) => {
                        m.persisted(ticket);
                        persisted = true;
                    }
                    None => {}
                }
            }
            if mail.is_empty() && !persisted {
                break;
            }
            for (from, to, message) in mail {
                if !cut.contains(&from) && !cut.contains(&to) {
                    ms[(to - 1) as usize].receive(&message).expect("a candidate's message");
                }
            }
        }
        (seen, withheld)
    }

    fn tick_all(ms: &mut M3, cut: &[u64], ticks: usize) -> Vec<(u64, Step<&'static str>)> {
        let mut seen = Vec::new();
        for _ in 0..ticks {
            for m in ms.iter_mut() {
                m.tick();
            }
            seen.extend(settle(ms, cut));
        }
        seen
    }

    #[test]
    fn an_answer_waits_for_its_entry_and_followers_apply_it() {
        let mut ms = three();
        let seen = tick_all(&mut ms, &[], 12);
        assert!(seen.contains(&(1, Step::Lead { term: 1 })), "{seen:?}");
        assert!(ms[0].is_serving());
        ms[0].app_mut().0.push(7);
        ms[0].propose(vec![7]).expect("leader");
        ms[0].hold("job 7 accepted");
        assert_eq!(ms[0].held(), 1);
        let seen = settle(&mut ms, &[]);
        let gate = Placed { index: 2, term: 1 };
        assert_eq!(seen, vec![(1, Step::Release { answer: "job 7 accepted", after: Some(gate) })]);
        tick_all(&mut ms, &[], 2);
        for m in &ms {
            assert_eq!(m.app().0, vec![7]);
        }
        // Nothing outstanding: an answer goes at once.
        ms[0].hold("query");
        assert_eq!(settle(&mut ms, &[]), vec![(1, Step::Release { answer: "query", after: None })]);
    }

    // Goal: one proposal costs each candidate one fsync (its entries, with the term and
    // vote), never a second one for the commit index alone; a candidate restarted from
    // records whose commit lags learns the rest from the leader, and one that kept its
    // commit record at its stop applies it all by itself.
    #[test]
    fn a_moved_commit_index_alone_costs_no_fsync() {
        /// Drains and delivers until quiet, keeping what each candidate made durable;
        /// returns how many `Persist` steps each carried out and whether "five" went out.
        fn run(ms: &mut M3, durable: &mut [Vec<Record>]) -> ([usize; 3], bool) {
            let (mut persists, mut released) = ([0usize; 3], false);
            for _ in 0..20 {
                let mut mail = Vec::new();
                for (k, m) in ms.iter_mut().enumerate() {
                    let mut done = None;
                    for step in m.drain() {
                        match step {
                            Step::Persist { ticket, records } => {
                                persists[k] += 1;
                                durable[k].extend(records);
                                done = Some(ticket);
                            }
                            Step::Send { to, message } => mail.push((to, message)),
                            Step::Release { answer: "five", .. } => released = true,
                            _ => {}
                        }
                    }
                    if let Some(ticket) = done {
                        m.persisted(ticket);
                    }
                }
                for (to, message) in mail {
                    ms[(to - 1) as usize].receive(&message).expect("a candidate's message");
                }
            }
            (persists, released)
        }
        let mut ms = three();
        let mut durable: Vec<Vec<Record>> = vec![Vec::new(); 3];
        for _ in 0..12 {
            ms.iter_mut().for_each(Machine::tick);
            run(&mut ms, &mut durable);
        }
        assert!(ms[0].is_serving());
        ms[0].app_mut().0.push(5);
        ms[0].propose(vec![5]).expect("leader");
        ms[0].hold("five");
        let (persists, released) = run(&mut ms, &mut durable);
        assert!(released);
        assert_eq!(persists, [1, 1, 1], "one fsync per candidate for one proposal");
        // The followers learn the commit from the next heartbeat, and write nothing for it.
        ms.iter_mut().for_each(Machine::tick);
        let (persists, _) = run(&mut ms, &mut durable);
        assert_eq!(persists, [0, 0, 0], "a moved commit index alone costs no fsync");
        assert_eq!(ms[2].app().0, vec![5]);
        // Candidate 3 restarts from what it made durable: its commit lags (it never wrote
        // the commit of entry 2), yet the leader's heartbeats bring it to the same state.
        let records = std::mem::take(&mut durable[2]);
        let Some(Record::Hard { commit, .. }) =
            records.iter().rev().find(|r| matches!(r, Record::Hard { .. }))
        else {
            panic!("no hard state in {records:?}")
        };
        assert!(*commit < 2, "the commit of entry 2 was not made durable on its own");
        // With the commit record a clean stop keeps (`Replica::commit_record`), a restart
        // applies entry 2 at once, before any message of the leader.
        let mut kept = records.clone();
        kept.push(ms[2].replica().commit_record());
        let mut alone: Machine<List, &str> =
            Machine::recover(Config::new(3, 3), List::default(), kept, None).expect("recover");
        alone.drain();
        assert_eq!(alone.app().0, vec![5], "applied through the commit it kept");
        ms[2] = Machine::recover(Config::new(3, 3), List::default(), records, None).expect("recover");
        tick_all(&mut ms, &[], 4);
        assert_eq!(ms[2].app().0, vec![5]);
    }

    // Goal: a snapshot comes due by weight once the applied entries held in memory weigh
    // as much as the floor and as the last snapshot, on the leader and on a follower; a
    // snapshot through the applied index clears it; entries not applied yet never count.
    // Method: three candidates with a 1 KiB floor; 100-byte entries.
    #[test]
    fn the_log_in_memory_is_bounded_by_the_snapshot_it_would_be() {
        let mut ms: M3 = (1..=3)
            .map(|id| {
                let config = Config { log_bytes_floor: 1024, ..Config::new(id, 3) };
                Machine::recover(config, List::default(), Vec::new(), None).expect("config")
            })
            .collect();
        tick_all(&mut ms, &[], 12);
        let propose = |ms: &mut M3, n: usize| {
            for _ in 0..n {
                ms[0].app_mut().0.extend_from_slice(&[1; 100]);
                ms[0].propose(vec![1; 100]).expect("leader");
            }
            tick_all(ms, &[], 2);
        };
        propose(&mut ms, 10);
        assert_eq!(ms[0].replica().log_bytes(), 1000);
        assert!(!ms[0].log_outweighs_snapshot() && !ms[1].log_outweighs_snapshot(), "1,000 bytes < 1 KiB");
        propose(&mut ms, 1);
        assert!(ms[0].log_outweighs_snapshot() && ms[1].log_outweighs_snapshot(), "1,100 bytes >= 1 KiB");
        // A snapshot of 1,100 bytes: the next one is due when as much was applied again.
        let compaction = ms[1].compact().expect("a follower snapshots what it applied");
        assert_eq!(compaction.data.len(), 1100);
        assert_eq!(ms[1].replica().log_bytes(), 0);
        assert!(!ms[1].log_outweighs_snapshot());
        propose(&mut ms, 10);
        assert!(!ms[1].log_outweighs_snapshot(), "1,000 bytes < the 1,100-byte snapshot");
        propose(&mut ms, 1);
        assert!(ms[1].log_outweighs_snapshot());
        // Entries not applied do not count: a snapshot could not drop them.
        assert!(ms[0].log_outweighs_snapshot(), "2,200 applied bytes, no snapshot on the leader");
        ms[0].compact().expect("nothing outstanding");
        ms[0].app_mut().0.extend_from_slice(&[2; 5000]);
        ms[0].propose(vec![2; 5000]).expect("leader");
        tick_all(&mut ms, &[2, 3], 1);
        assert_eq!(ms[0].replica().log_bytes(), 5000);
        assert!(!ms[0].log_outweighs_snapshot(), "5,000 bytes held, none of them applied");
    }

    #[test]
    fn a_cut_off_leader_answers_not_done_and_forgets_what_was_never_committed() {
        let mut ms = three();
        tick_all(&mut ms, &[], 12);
        ms[0].app_mut().0.push(1);
        ms[0].propose(vec![1]).expect("leader");
        ms[0].hold("one");
        settle(&mut ms, &[]);
        // Cut candidate 1 off: what it proposes now cannot commit.
        ms[0].app_mut().0.push(2);
        ms[0].propose(vec![2]).expect("still believes it leads");
        ms[0].hold("two");
        let seen = tick_all(&mut ms, &[1], 40);
        assert!(seen.contains(&(1, Step::NotDone("two"))), "{seen:?}");
        assert!(seen.contains(&(1, Step::Follow { term: 1, leader: None })), "{seen:?}");
        assert!(!seen.iter().any(|s| matches!(s, (_, Step::Release { answer: "two", .. }))));
        assert_eq!(ms[0].app().0, vec![1], "rebuilt from the committed log");
        let new_leader = ms.iter().position(|m| m.is_serving()).expect("the others elect one");
        assert_ne!(new_leader, 0);
        // Healed: the old leader follows and applies the new leader's entries.
        ms[new_leader].app_mut().0.push(3);
        ms[new_leader].propose(vec![3]).expect("leader");
        tick_all(&mut ms, &[], 20);
        for m in &ms {
            assert_eq!(m.app().0, vec![1, 3]);
        }
    }

    #[test]
    fn a_cut_off_leader_answers_nothing_from_its_state_without_a_majority() {
        let mut ms = three();
        tick_all(&mut ms, &[], 12);
        assert!(ms[0].is_serving());
        // Nothing outstanding, but the leader is cut off: it cannot confirm it still leads.
        ms[0].hold("bjobs");
        let seen = tick_all(&mut ms, &[1], 40);
        assert!(!seen.iter().any(|s| matches!(s, (1, Step::Release { .. }))), "{seen:?}");
        assert!(seen.contains(&(1, Step::NotDone("bjobs"))), "{seen:?}");
    }

    #[test]
    fn a_refused_leader_keeps_the_entries_its_followers_committed_while_its_disk_lagged() {
        // Goal: a leader whose own disk holds its entries back (full) while its followers
        // commit them, and which then has a proposal refused (it is handing its leadership
        // over), serves from a state that holds those entries, without the refused one, and
        // applies none of them twice once its disk catches up. Before, the state went back
        // to the applied entries alone: the leader served without what was committed.
        let mut ms = three();
        tick_all(&mut ms, &[], 12);
        assert!(ms[0].is_serving());
        for v in [1u8, 2] {
            ms[0].app_mut().0.push(v);
            ms[0].propose(vec![v]).expect("leader");
        }
        ms[0].hold("one and two");
        let (seen, withheld) = settle_lagging(&mut ms, &[], &[1]);
        assert!(
            seen.iter().any(|s| matches!(s, (1, Step::Release { answer: "one and two", .. }))),
            "{seen:?}"
        );
        assert_eq!(ms[0].applied(), ms[0].view().commit - 2, "committed by the followers, not applied here");
        assert_eq!(ms[0].hand_over(), Some(2));
        ms[0].app_mut().0.push(3);
        assert!(ms[0].propose(vec![3]).is_err(), "refused while handing over");
        ms[0].hold("three");
        let steps = ms[0].drain();
        assert!(steps.iter().any(|s| matches!(s, Step::NotDone("three"))), "{steps:?}");
        assert_eq!(ms[0].app().0, vec![1, 2], "the committed entries, not the refused one");
        assert_eq!(ms[0].outstanding(), 2);
        // The transfer never reaches candidate 2; the leader's disk has room again.
        ms[0].persisted(withheld.expect("the leader's records waited"));
        settle(&mut ms, &[2, 3]);
        assert_eq!((ms[0].app().0.clone(), ms[0].outstanding()), (vec![1, 2], 0), "each applied once");
    }

    #[test]
    fn a_candidate_behind_its_own_snapshot_does_not_campaign() {
        // Goal: a follower that took a leader's snapshot its full disk cannot make durable
        // does not campaign when the leader goes (raft-rs would read the entries after its
        // applied index, find them compacted and stop the process), and does once the
        // snapshot is durable.
        let mut ms = three();
        tick_all(&mut ms, &[], 12);
        assert!(ms[0].is_serving());
        for v in 1..=3u8 {
            ms[0].app_mut().0.push(v);
            ms[0].propose(vec![v]).expect("leader");
        }
        tick_all(&mut ms, &[3], 2);
        ms[0].compact().expect("caught up");
        let mut withheld = None;
        for _ in 0..5 {
            for m in &mut ms {
                m.tick();
            }
            withheld = settle_lagging(&mut ms, &[], &[3]).1.or(withheld);
        }
        assert_eq!(ms[2].app().0, vec![1, 2, 3], "candidate 3 took the leader's snapshot");
        // The leader and candidate 2 are gone; candidate 3's election time would run out.
        // A campaign (pre-vote) shows as requests sent to both.
        let requests = |m: &mut Machine<List, &'static str>| {
            let mut sent = 0;
            for _ in 0..60 {
                m.tick();
                sent += m.drain().iter().filter(|s| matches!(s, Step::Send { .. })).count();
            }
            sent
        };
        assert_eq!(requests(&mut ms[2]), 0, "no campaign while behind its snapshot");
        ms[2].persisted(withheld.expect("candidate 3's records waited"));
        assert!(requests(&mut ms[2]) > 0, "a campaign once durable");
    }

    #[test]
    fn compaction_waits_for_the_state_to_match_the_log_and_snapshots_catch_up() {
        let mut ms = three();
        tick_all(&mut ms, &[], 12);
        for v in 1..=3u8 {
            ms[0].app_mut().0.push(v);
            ms[0].propose(vec![v]).expect("leader");
        }
        assert!(ms[0].compact().is_none(), "proposals outstanding");
        tick_all(&mut ms, &[3], 2);
        let compaction = ms[0].compact().expect("caught up");
        assert_eq!(compaction.data, vec![1, 2, 3]);
        tick_all(&mut ms, &[], 10);
        assert_eq!(ms[2].app().0, vec![1, 2, 3], "the lagging candidate got the snapshot");
    }

    // Goal: a leader that cannot go on (its disk is full) hands the leadership to a
    // caught-up follower, which leads next and takes proposals; it does so only when the
    // caught-up followers are a majority by themselves, since the full leader could not
    // record its vote for the new one.
    // Method: three candidates; the third cut off for over an election timeout: no hand-over
    // (the second alone is no majority); the cut healed and an entry committed: the leader
    // hands over to the second, which leads in the next rounds while the first follows.
    #[test]
    fn a_leader_hands_over_only_to_followers_that_elect_one_without_it() {
        let mut ms = three();
        tick_all(&mut ms, &[], 12);
        assert!(ms[0].is_serving());
        tick_all(&mut ms, &[3], 12);
        assert_eq!(ms[0].hand_over(), None, "the second candidate alone cannot elect itself");
        tick_all(&mut ms, &[], 3);
        ms[0].app_mut().0.push(1);
        ms[0].propose(vec![1]).expect("leader");
        settle(&mut ms, &[]);
        assert_eq!(ms[1].hand_over(), None, "only a leader hands over");
        assert_eq!(ms[0].hand_over(), Some(2));
        let seen = tick_all(&mut ms, &[], 2);
        assert!(seen.iter().any(|(id, step)| *id == 1 && matches!(step, Step::Follow { .. })), "{seen:?}");
        assert!(seen.iter().any(|(id, step)| *id == 2 && matches!(step, Step::Lead { .. })), "{seen:?}");
        assert!(ms[1].is_serving() && !ms[0].is_serving());
        ms[1].app_mut().0.push(2);
        ms[1].propose(vec![2]).expect("the new leader takes proposals");
        tick_all(&mut ms, &[], 2);
        for m in &ms {
            assert_eq!(m.app().0, vec![1, 2]);
        }
    }
}
