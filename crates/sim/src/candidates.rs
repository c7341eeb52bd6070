//! Master candidates over `lava_replog::machine`, whatever their application: the part of
//! a replicated run that the replicated mbatchd (`replicated`) and the replicated
//! coordinator (`coordinator`) share (docs/failover.md, "How it is tested").
//!
//! - **A candidate** ([`Candidate`]) is a [`Machine`] while its process runs, a disk (the
//!   durable replica records and the newest snapshot of the application's state) and an
//!   inbox that fills while it is paused. [`Group`] holds the candidates, the cuts of their
//!   network, the fault intensities and what the checks remember.
//! - **The world** that plays them implements [`CandidateShell`]: its clock and queue, its
//!   randomness and trace, and what its application does with each step of the machine
//!   (an answer released or "not done", a leadership begun or ended, a drain's end). The
//!   functions here carry out the rest, in the machine's order: a drain's persists, sends,
//!   snapshots and commits ([`carry_out`]); crashes (between drains, and between any two
//!   steps of a drain, what was written and not yet durable keeping a prefix of its
//!   records: power lost before its fsync), restarts from the disk alone, pauses,
//!   partitions (one-way ones too), lost, duplicated and reordered consensus messages
//!   ([`event`], [`send`]). As in the daemons, a leader's `Persist` runs while it goes on
//!   (its followers may commit the entries first, and its answers go out before its own
//!   fsync ends), and every other candidate's completes on the spot.
//! - **Checked after every drain** ([`check`]): at most one leader per term; every answer
//!   released in a term by one candidate only; every entry committed anywhere is the same
//!   entry everywhere at its index ([`committed`]); a leader holds every entry
//!   acknowledged in an earlier term; a candidate whose state is the committed log (no proposal
//!   outstanding) has the same state as every other candidate had at the same applied
//!   index, however it got there.
//!
//! Every draw from the seed's generator happens here in a fixed order, so a seed means the
//! same run as long as the callers keep theirs.

use std::collections::{BTreeMap, BTreeSet};

use lava_replog::machine::{Application, HandOverPolicy, Machine, Step};
use lava_replog::record::Record;
use lava_replog::{Config, Placed, ReplicaId};

use crate::rng::Rng;
use crate::trace::Trace;

/// Master candidates in a replicated run.
pub const CANDIDATES: usize = 3;
/// The consensus tick (the shells' 100 ms timer).
pub const RAFT_TICK_MS: u64 = 100;

/// Events of the candidates.
#[derive(Debug)]
pub enum ReplEv {
    /// Every candidate's consensus tick.
    Tick,
    /// A candidate starts again from its disk.
    Restart(usize),
    /// A random candidate is paused, or resumed.
    FaultPause,
    /// A paused candidate runs again.
    Resume(usize),
    /// What candidate `c`'s incarnation `incarnation` wrote is durable (a leader's fsync
    /// ends).
    Synced { c: usize, incarnation: u64 },
    /// The network among candidates is cut anew.
    FaultPartition,
    /// A random candidate's disk fills up.
    FaultDiskFull,
    /// Candidate `c`'s disk has room again.
    DiskFreed(usize),
}

/// A snapshot of the application's state as a disk keeps it: index, term, bytes.
pub type KeptSnapshot = (u64, u64, Vec<u8>);

/// One master candidate: its process (the machine) and its disk.
pub struct Candidate<A, M, P> {
    /// The machine while the process runs.
    pub machine: Option<Machine<A, M>>,
    /// Starts so far; a client's connection belongs to one incarnation.
    pub incarnation: u64,
    /// Durable replica records.
    pub records: Vec<Record>,
    /// Records written and not yet durable, with their `Persist`'s ticket, oldest first.
    pub unsynced: Vec<(u64, Vec<Record>)>,
    /// The newest durable snapshot of the application's state (index, term, bytes).
    pub snapshot: Option<KeptSnapshot>,
    /// Stalled: no tick, frames wait in `inbox`.
    pub paused: bool,
    /// Frames that arrived while paused, in arrival order.
    pub inbox: Vec<P>,
    /// The disk is full: nothing is written until it has room again (`unsynced` then holds
    /// what waits, none of it on the disk), as lava-shell's `ReplicaLog` waits for room.
    pub disk_full: bool,
    /// A snapshot that waits for room, and how many `unsynced` writes came before it
    /// (nothing after it is written before it is).
    waiting_snapshot: Option<(usize, KeptSnapshot)>,
    /// The running process's hand-over of a full leadership (the mbatchd world's shell).
    pub hand_over: HandOverPolicy,
    /// The applied index whose state was last compared.
    dumped: u64,
}

/// Fault intensities of the candidates, drawn from the seed.
#[derive(Clone, Debug)]
pub struct ReplParams {
    /// Mean time between pauses, ms.
    pub pause_mean_ms: Option<u64>,
    /// Mean time between new cuts of the candidates' network, ms.
    pub partition_mean_ms: Option<u64>,
    /// Probability of a crash before each step of a drain.
    pub crash_in_drain_p: f64,
    /// Probability of a snapshot after a drain.
    pub compact_p: f64,
    /// Largest delay of a consensus message, ms.
    pub delay_max_ms: u64,
    /// Probability that a consensus message is lost, duplicated.
    pub drop_p: f64,
    pub duplicate_p: f64,
    /// The candidates' `log_bytes_floor` (lava-replog's `Config`): small ones make the
    /// coordinator's snapshots by weight happen (the mbatchd world snapshots at random).
    pub log_bytes_floor: u64,
    /// Mean time between windows in which a random candidate's disk is full, ms.
    pub disk_full_mean_ms: Option<u64>,
}

impl ReplParams {
    /// The intensities of one seed.
    pub fn draw(rng: &mut Rng) -> ReplParams {
        let sometimes =
            |rng: &mut Rng, p: f64, low: u64, high: u64| rng.chance(p).then(|| rng.range(low, high));
        ReplParams {
            pause_mean_ms: sometimes(rng, 0.5, 3_000, 20_000),
            partition_mean_ms: sometimes(rng, 0.6, 2_000, 20_000),
            crash_in_drain_p: *rng.pick(&[0.0, 0.0, 0.002, 0.01]),
            compact_p: *rng.pick(&[0.0, 0.01, 0.05]),
            delay_max_ms: *rng.pick(&[2, 20, 100]),
            drop_p: *rng.pick(&[0.0, 0.02, 0.1, 0.3]),
            duplicate_p: *rng.pick(&[0.0, 0.02, 0.1]),
            log_bytes_floor: *rng.pick(&[lava_replog::LOG_BYTES_FLOOR, 4096, 512]),
            disk_full_mean_ms: sometimes(rng, 0.4, 3_000, 20_000),
        }
    }
}

/// The candidates and what the checks remember.
pub struct Group<A, M, P> {
    /// The candidates, numbered from 0 here (their replica id is the number plus 1).
    pub cands: Vec<Candidate<A, M, P>>,
    /// Consensus messages from one candidate to another that are cut.
    pub blocked: BTreeSet<(usize, usize)>,
    /// Every committed entry: index -> (term, bytes; empty for a marker).
    pub committed: BTreeMap<u64, (u64, Vec<u8>)>,
    /// The state (hash of the application's state bytes) at each applied index, as first
    /// seen.
    pub dumps: BTreeMap<u64, u64>,
    /// term -> the candidate seen leading it.
    pub leaders: BTreeMap<u64, usize>,
    /// term -> the candidate that released an answer in it.
    pub ackers: BTreeMap<u64, usize>,
    /// term -> the highest index an answer released in it waited for: every committed
    /// entry up to it was acknowledged in that term, so every leader of a later term holds
    /// it (an entry of an earlier term committed late, in a later term, binds only the
    /// leaders after that one: a stale leader elected in between may lack it).
    pub acked: BTreeMap<u64, u64>,
    /// (candidate, term) already checked for holding every acknowledged entry.
    checked_leaders: BTreeSet<(usize, u64)>,
    /// Fault intensities.
    pub params: ReplParams,
    /// Answers a leader released before its own records were durable (its followers'
    /// acknowledgements made the majority).
    pub released_before_own_fsync: u64,
    /// Windows of a full disk.
    pub disk_fulls: u64,
    /// Transfers a full leader asked for (the mbatchd world's shell).
    pub hand_overs: u64,
}

impl<A: Application, M, P> Group<A, M, P> {
    /// [`CANDIDATES`] candidates with empty disks, not started.
    pub fn new(params: ReplParams) -> Group<A, M, P> {
        let cands = (0..CANDIDATES)
            .map(|_| Candidate {
                machine: None,
                incarnation: 0,
                records: Vec::new(),
                unsynced: Vec::new(),
                snapshot: None,
                paused: false,
                inbox: Vec::new(),
                disk_full: false,
                waiting_snapshot: None,
                hand_over: HandOverPolicy::default(),
                dumped: u64::MAX,
            })
            .collect();
        Group {
            cands,
            blocked: BTreeSet::new(),
            committed: BTreeMap::new(),
            dumps: BTreeMap::new(),
            leaders: BTreeMap::new(),
            ackers: BTreeMap::new(),
            acked: BTreeMap::new(),
            checked_leaders: BTreeSet::new(),
            params,
            released_before_own_fsync: 0,
            disk_fulls: 0,
            hand_overs: 0,
        }
    }

    /// Whether candidate `c` runs.
    pub fn is_up(&self, c: usize) -> bool {
        self.cands[c].machine.is_some()
    }

    /// Candidate `c`'s incarnation.
    pub fn incarnation(&self, c: usize) -> u64 {
        self.cands[c].incarnation
    }

    /// Whether candidate `c` runs, is not paused and serves.
    pub fn is_serving(&self, c: usize) -> bool {
        let cand = &self.cands[c];
        !cand.paused && cand.machine.as_ref().is_some_and(Machine::is_serving)
    }

    /// The first candidate that runs, is not paused and serves.
    pub fn serving(&self) -> Option<usize> {
        (0..CANDIDATES).find(|&c| self.is_serving(c))
    }

    /// The highest committed index.
    pub fn top(&self) -> u64 {
        self.committed.keys().next_back().copied().unwrap_or(0)
    }

    /// One candidate serves with nothing outstanding, and every candidate is up, running
    /// and has applied every committed entry.
    pub fn settled(&self) -> bool {
        let top = self.top();
        self.serving().is_some_and(|c| {
            let m = self.cands[c].machine.as_ref().expect("serving");
            m.outstanding() == 0 && m.held() == 0
        }) && self.cands.iter().all(|c| {
            !c.paused && c.inbox.is_empty() && c.machine.as_ref().is_some_and(|m| m.applied() == top)
        })
    }

    /// For a failure report; `extra` adds what the application's shell keeps per candidate.
    pub fn describe(&self, extra: impl Fn(usize) -> String) -> String {
        let mut out = format!("candidates (blocked {:?}):\n", self.blocked);
        for (k, c) in self.cands.iter().enumerate() {
            match &c.machine {
                Some(m) => {
                    out += &format!(
                        "  candidate {}: {:?} serving {} applied {} outstanding {} held {} paused {} durable {} unsynced {} disk full {}{}\n",
                        k + 1,
                        m.view(),
                        m.is_serving(),
                        m.applied(),
                        m.outstanding(),
                        m.held(),
                        c.paused,
                        m.replica().durable_index(),
                        c.unsynced.len(),
                        c.disk_full,
                        extra(k)
                    )
                }
                None => out += &format!("  candidate {}: down\n", k + 1),
            }
        }
        out
    }

    /// The committed log's entries (markers left out), in order.
    pub fn committed_log(&self) -> Vec<Vec<u8>> {
        self.committed.values().filter(|(_, data)| !data.is_empty()).map(|(_, d)| d.clone()).collect()
    }
}

/// A 64-bit FNV-1a hash of a state's bytes.
pub fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// The world that plays the candidates: what is its own, and what its application does
/// with the machine's steps. The functions of this module do the rest.
pub trait CandidateShell {
    /// The application under the machine.
    type App: Application;
    /// An answer the machine holds.
    type Answer;
    /// A frame for a candidate (kept in its inbox while it is paused).
    type Packet;

    /// The candidates.
    fn group(&self) -> &Group<Self::App, Self::Answer, Self::Packet>;
    /// The candidates, to change them.
    fn group_mut(&mut self) -> &mut Group<Self::App, Self::Answer, Self::Packet>;
    /// The seed's generator.
    fn rng(&mut self) -> &mut Rng;
    /// The run's fingerprint and trace.
    fn trace(&mut self) -> &mut Trace;
    /// The virtual time, ms since the epoch.
    fn now_ms(&self) -> u64;
    /// Faults have stopped.
    fn healing(&self) -> bool;
    /// A broken property: the run fails, naming the seed.
    fn fail(&self, problem: String) -> !;
    /// Schedules a candidates' event `delay_ms` from now.
    fn schedule(&mut self, delay_ms: u64, ev: ReplEv);
    /// Schedules the arrival at candidate `to` of a consensus message from `from`.
    fn schedule_raft(&mut self, delay_ms: u64, from: usize, to: usize, message: Vec<u8>);
    /// A frame put on the wire.
    fn count_sent(&mut self);
    /// A frame lost (cut, dropped, or for a candidate that is down).
    fn count_lost(&mut self);

    /// The application of a candidate that starts, before its disk is loaded.
    fn new_app(&self) -> Self::App;
    /// The bytes whose hash stands for the application's state (the committed log's
    /// meaning), after the application's own invariants hold; `Err` names what broke.
    fn state_bytes(app: &Self::App) -> Result<Vec<u8>, String>;
    /// Drains candidate `c`'s machine and carries out its steps (with [`carry_out`]).
    fn drain(&mut self, c: usize);
    /// Candidate `c`'s consensus tick has been given to its machine: drain (and step the
    /// application's own timer where the shell ties it to this tick).
    fn ticked(&mut self, c: usize);
    /// A frame for candidate `c`, which runs and is not paused.
    fn deliver_running(&mut self, c: usize, packet: Self::Packet);
    /// Candidate `c`'s process died: close what it held open (its machine is gone already).
    fn crashed(&mut self, c: usize);
    /// An entry committed for the first time anywhere.
    fn first_commit(&mut self, c: usize, index: u64, term: u64, data: &[u8]);
    /// Candidate `c` releases an answer: it is acknowledged now.
    fn release(&mut self, c: usize, answer: Self::Answer);
    /// Candidate `c` answers "not done" (its events may never commit).
    fn not_done(&mut self, c: usize, answer: Self::Answer);
    /// Candidate `c` leads `term` from this drain on.
    fn lead(&mut self, c: usize, term: u64);
    /// Candidate `c` stopped leading `term`.
    fn follow(&mut self, c: usize, term: u64, leader: Option<ReplicaId>);
}

/// How a drain's steps were carried out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    /// The candidate crashed before one of them (the rest never happened).
    pub crashed: bool,
    /// A `Lead` was among them.
    pub lead: bool,
    /// A `Follow` was among them.
    pub follow: bool,
}

/// Carries out candidate `c`'s `steps` in order; a crash may strike before any of them (a
/// `Persist` then keeps a prefix of its records).
pub fn carry_out<S: CandidateShell + ?Sized>(
    shell: &mut S,
    c: usize,
    steps: Vec<Step<S::Answer>>,
) -> Carried {
    let crash_p = if shell.healing() { 0.0 } else { shell.group().params.crash_in_drain_p };
    let mut carried = Carried::default();
    for step in steps {
        if shell.rng().chance(crash_p) {
            if let Step::Persist { ticket, records } = step {
                shell.group_mut().cands[c].unsynced.push((ticket, records));
            }
            crash(shell, c, "inside a drain");
            carried.crashed = true;
            return carried;
        }
        match step {
            Step::Persist { ticket, records } => {
                for record in &records {
                    shell.trace().mix_bytes(&crate::codec::to_record(record));
                }
                let cand = &mut shell.group_mut().cands[c];
                cand.unsynced.push((ticket, records));
                let leading = cand.machine.as_ref().is_some_and(|m| m.view().is_leader);
                if cand.disk_full {
                    // Waits for room, whoever writes it (`ReplEv::DiskFreed`).
                } else if leading {
                    let incarnation = cand.incarnation;
                    let delay = shell.rng().range(0, 3);
                    shell.schedule(delay, ReplEv::Synced { c, incarnation });
                } else {
                    sync(shell, c);
                }
            }
            Step::Send { to, message } => send(shell, c, (to - 1) as usize, message),
            Step::KeepSnapshot { index, term, data } => {
                let cand = &mut shell.group_mut().cands[c];
                if cand.disk_full {
                    // It waits for room, and every write after it waits behind it.
                    let before = cand.waiting_snapshot.as_ref().map_or(cand.unsynced.len(), |(at, _)| *at);
                    cand.waiting_snapshot = Some((before, (index, term, data)));
                    continue;
                }
                // Keeping a snapshot makes everything written before it durable.
                sync(shell, c);
                let now = shell.now_ms();
                shell.trace().line(now, || format!("candidate {}: leader's snapshot at {index}", c + 1));
                shell.group_mut().cands[c].snapshot = Some((index, term, data));
            }
            Step::Applied { index, term, data } => committed(shell, c, index, term, data),
            Step::Release { answer, after } => {
                if let Some(gate) = after {
                    let group = shell.group_mut();
                    if group.cands[c].machine.as_ref().is_some_and(|m| m.replica().persisting()) {
                        group.released_before_own_fsync += 1;
                    }
                    committed_through(shell, c, gate.index);
                    released_in(shell, c, gate);
                }
                shell.release(c, answer);
            }
            Step::NotDone(answer) => shell.not_done(c, answer),
            Step::Lead { term } => {
                carried.lead = true;
                shell.lead(c, term);
            }
            Step::Follow { term, leader } => {
                carried.follow = true;
                shell.follow(c, term, leader);
            }
        }
    }
    carried
}

/// What candidate `c` wrote is durable now (nothing while its disk is full), a snapshot
/// that waited for room kept, and its machine hears so (at the next drain's start: the
/// caller drains).
pub fn sync<S: CandidateShell + ?Sized>(shell: &mut S, c: usize) {
    let cand = &mut shell.group_mut().cands[c];
    if cand.disk_full {
        return;
    }
    if let Some((_, snapshot)) = cand.waiting_snapshot.take() {
        // Its records before and after it are all written now: the order does not matter.
        cand.snapshot = Some(snapshot);
    }
    let Some(&(ticket, _)) = cand.unsynced.last() else { return };
    for (_, records) in std::mem::take(&mut cand.unsynced) {
        cand.records.extend(records);
    }
    if let Some(machine) = cand.machine.as_mut() {
        machine.persisted(ticket);
    }
}

/// The leader `c` released an answer behind entry `index`, committed before it applied it
/// perhaps (its followers held it durably first): the entries through it are committed.
fn committed_through<S: CandidateShell + ?Sized>(shell: &mut S, c: usize, index: u64) {
    for at in shell.group().top() + 1..=index {
        let replica = shell.group().cands[c].machine.as_ref().expect("running").replica();
        let (Some(term), Some(data)) = (replica.term_at(at), replica.entry_at(at)) else {
            shell.fail(format!("candidate {}: released behind entry {index} and lacks entry {at}", c + 1));
        };
        committed(shell, c, at, term, data);
    }
}

/// An answer released behind the proposal `gate`: the only candidate acknowledging in its
/// term.
fn released_in<S: CandidateShell + ?Sized>(shell: &mut S, c: usize, gate: Placed) {
    let group = shell.group_mut();
    if let Some(&other) = group.ackers.get(&gate.term)
        && other != c
    {
        shell.fail(format!("candidates {} and {} both acknowledged in term {}", other + 1, c + 1, gate.term));
    }
    group.ackers.insert(gate.term, c);
    let through = group.acked.entry(gate.term).or_insert(0);
    *through = (*through).max(gate.index);
}

/// A snapshot of candidate `c` with probability `compact_p` (when its machine allows one);
/// a crash between the snapshot and its record loses the record only.
pub fn maybe_compact<S: CandidateShell + ?Sized>(shell: &mut S, c: usize) {
    let p = shell.group().params.compact_p;
    if !shell.rng().chance(p) {
        return;
    }
    compact(shell, c);
}

/// A snapshot of candidate `c`, when its machine allows one (see [`maybe_compact`]).
pub fn compact<S: CandidateShell + ?Sized>(shell: &mut S, c: usize) {
    // None on a full disk: the daemons make it and write it once there is room, which
    // the replica log's own seeded test covers (tests/replica_full_disk.rs); here it waits.
    if shell.group().cands[c].machine.is_none() || shell.group().cands[c].disk_full {
        return;
    }
    // The snapshot is kept after every record written (the daemons' logs are in order).
    sync(shell, c);
    let Some(machine) = shell.group_mut().cands[c].machine.as_mut() else { return };
    let Some(compaction) = machine.compact() else { return };
    // The daemons keep the entries after the snapshot beside it: the log must hold them.
    if let Err(error) = machine.replica().entries_after(compaction.index) {
        shell.fail(format!(
            "candidate {}: no entries after its snapshot at {}: {error}",
            c + 1,
            compaction.index
        ));
    }
    let now = shell.now_ms();
    shell.trace().line(now, || format!("candidate {}: snapshot through {}", c + 1, compaction.index));
    let cand = &mut shell.group_mut().cands[c];
    cand.snapshot = Some((compaction.index, compaction.term, compaction.data));
    let crash_p = shell.group().params.crash_in_drain_p;
    if !shell.rng().chance(crash_p) {
        shell.group_mut().cands[c].records.push(compaction.record);
    } else {
        crash(shell, c, "after a snapshot, before its record");
    }
}

/// A consensus message from `from` to `to`: cut, lost, duplicated, delayed.
pub fn send<S: CandidateShell + ?Sized>(shell: &mut S, from: usize, to: usize, message: Vec<u8>) {
    shell.count_sent();
    shell.trace().mix_bytes(&message);
    let params = shell.group().params.clone();
    if shell.group().blocked.contains(&(from, to)) || shell.rng().chance(params.drop_p) {
        shell.count_lost();
        return;
    }
    let copies = if shell.rng().chance(params.duplicate_p) { 2 } else { 1 };
    for _ in 0..copies {
        let delay = shell.rng().range(1, params.delay_max_ms);
        shell.schedule_raft(delay, from, to, message.clone());
    }
}

/// Every candidate starts; the consensus clock and the faults begin.
pub fn boot<S: CandidateShell + ?Sized>(shell: &mut S) {
    for c in 0..CANDIDATES {
        restart(shell, c);
    }
    shell.schedule(RAFT_TICK_MS, ReplEv::Tick);
    let params = shell.group().params.clone();
    if let Some(mean) = params.pause_mean_ms {
        let delay = shell.rng().exponential_ms(mean);
        shell.schedule(delay, ReplEv::FaultPause);
    }
    if let Some(mean) = params.partition_mean_ms {
        let delay = shell.rng().exponential_ms(mean);
        shell.schedule(delay, ReplEv::FaultPartition);
    }
    if let Some(mean) = params.disk_full_mean_ms {
        let delay = shell.rng().exponential_ms(mean);
        shell.schedule(delay, ReplEv::FaultDiskFull);
    }
}

/// The events of the candidates.
pub fn event<S: CandidateShell + ?Sized>(shell: &mut S, ev: ReplEv) {
    let now = shell.now_ms();
    match ev {
        ReplEv::Tick => {
            shell.trace().mix(30);
            for c in 0..CANDIDATES {
                let cand = &mut shell.group_mut().cands[c];
                if cand.paused {
                    continue;
                }
                if let Some(m) = cand.machine.as_mut() {
                    m.tick();
                    shell.ticked(c);
                }
            }
            shell.schedule(RAFT_TICK_MS, ReplEv::Tick);
        }
        ReplEv::Restart(c) => {
            shell.trace().mix(31);
            restart(shell, c);
        }
        ReplEv::FaultPause => {
            if shell.healing() {
                return;
            }
            shell.trace().mix(32);
            let c = shell.rng().index(CANDIDATES);
            if !shell.group().cands[c].paused {
                let duration = shell.rng().range(200, 6_000);
                shell.trace().line(now, || format!("candidate {}: paused for {duration} ms", c + 1));
                shell.group_mut().cands[c].paused = true;
                shell.schedule(duration, ReplEv::Resume(c));
            }
            if let Some(mean) = shell.group().params.pause_mean_ms {
                let delay = shell.rng().exponential_ms(mean);
                shell.schedule(delay, ReplEv::FaultPause);
            }
        }
        ReplEv::Resume(c) => resume(shell, c),
        ReplEv::Synced { c, incarnation } => {
            let cand = &shell.group().cands[c];
            if cand.incarnation != incarnation
                || cand.machine.is_none()
                || cand.disk_full
                || (cand.unsynced.is_empty() && cand.waiting_snapshot.is_none())
            {
                return;
            }
            if cand.paused {
                // A stalled process hears of its fsync when it runs again.
                shell.schedule(RAFT_TICK_MS, ReplEv::Synced { c, incarnation });
                return;
            }
            shell.trace().mix(34);
            sync(shell, c);
            shell.drain(c);
        }
        ReplEv::FaultPartition => {
            if shell.healing() {
                return;
            }
            shell.trace().mix(33);
            let mut blocked = BTreeSet::new();
            let rng = shell.rng();
            match rng.below(4) {
                0 => {}
                1 => {
                    let cut = rng.index(CANDIDATES);
                    for other in (0..CANDIDATES).filter(|&o| o != cut) {
                        blocked.insert((cut, other));
                        blocked.insert((other, cut));
                    }
                }
                _ => {
                    for from in 0..CANDIDATES {
                        for to in (0..CANDIDATES).filter(|&t| t != from) {
                            if rng.chance(0.3) {
                                blocked.insert((from, to));
                            }
                        }
                    }
                }
            }
            shell.trace().line(now, || format!("candidates' network: cut {blocked:?}"));
            shell.group_mut().blocked = blocked;
            if let Some(mean) = shell.group().params.partition_mean_ms {
                let delay = shell.rng().exponential_ms(mean);
                shell.schedule(delay, ReplEv::FaultPartition);
            }
        }
        ReplEv::FaultDiskFull => {
            if shell.healing() {
                return;
            }
            shell.trace().mix(35);
            let c = shell.rng().index(CANDIDATES);
            let cand = &shell.group().cands[c];
            // A paused process hears of its earlier writes' fsync later: no window then.
            if !cand.disk_full && !cand.paused {
                // What was written before the disk filled is on it; nothing is after.
                sync(shell, c);
                let duration = shell.rng().range(500, 10_000);
                shell.trace().line(now, || format!("candidate {}: disk full for {duration} ms", c + 1));
                let group = shell.group_mut();
                group.cands[c].disk_full = true;
                group.disk_fulls += 1;
                shell.schedule(duration, ReplEv::DiskFreed(c));
                if shell.group().is_up(c) {
                    shell.drain(c);
                }
            }
            if let Some(mean) = shell.group().params.disk_full_mean_ms {
                let delay = shell.rng().exponential_ms(mean);
                shell.schedule(delay, ReplEv::FaultDiskFull);
            }
        }
        ReplEv::DiskFreed(c) => {
            if !shell.group().cands[c].disk_full {
                return;
            }
            shell.trace().mix(36);
            let cand = &mut shell.group_mut().cands[c];
            cand.disk_full = false;
            let incarnation = cand.incarnation;
            shell.trace().line(now, || format!("candidate {}: disk has room again", c + 1));
            // What waited is written now, and the process hears so when it runs.
            shell.schedule(0, ReplEv::Synced { c, incarnation });
        }
    }
}

/// A paused candidate runs again and takes the frames that waited.
pub fn resume<S: CandidateShell + ?Sized>(shell: &mut S, c: usize) {
    let cand = &mut shell.group_mut().cands[c];
    if !cand.paused {
        return;
    }
    cand.paused = false;
    let inbox = std::mem::take(&mut cand.inbox);
    let now = shell.now_ms();
    shell.trace().line(now, || format!("candidate {}: resumed, {} frames waiting", c + 1, inbox.len()));
    for packet in inbox {
        deliver(shell, c, packet);
    }
}

/// Faults stop: every candidate runs, the candidates' network is whole.
pub fn heal<S: CandidateShell + ?Sized>(shell: &mut S) {
    let group = shell.group_mut();
    group.blocked.clear();
    group.params.drop_p = 0.0;
    group.params.duplicate_p = 0.0;
    for c in 0..CANDIDATES {
        event(shell, ReplEv::DiskFreed(c));
        resume(shell, c);
        if !shell.group().is_up(c) {
            shell.schedule(0, ReplEv::Restart(c));
        }
    }
}

/// Candidate `c`'s process dies; it restarts from its disk after a while.
pub fn crash<S: CandidateShell + ?Sized>(shell: &mut S, c: usize, when: &str) {
    let now = shell.now_ms();
    shell.trace().line(now, || format!("candidate {}: CRASH {when}", c + 1));
    // Power lost too: of what was written and not yet durable, a prefix survives; nothing
    // of what waits for room, nor what waits behind a snapshot that does.
    let cand = &mut shell.group_mut().cands[c];
    let written =
        if cand.disk_full { 0 } else { cand.waiting_snapshot.take().map_or(usize::MAX, |(at, _)| at) };
    cand.waiting_snapshot = None;
    let unsynced: Vec<Record> = std::mem::take(&mut cand.unsynced)
        .into_iter()
        .take(written)
        .flat_map(|(_, records)| records)
        .collect();
    let keep = shell.rng().range(0, unsynced.len() as u64) as usize;
    let cand = &mut shell.group_mut().cands[c];
    cand.records.extend(unsynced.into_iter().take(keep));
    cand.machine = None;
    cand.paused = false;
    cand.inbox.clear();
    shell.crashed(c);
    let downtime = if shell.healing() { 0 } else { shell.rng().range(100, 8_000) };
    shell.schedule(downtime, ReplEv::Restart(c));
}

/// Candidate `c` starts from its disk alone (a no-op while it runs), then drains.
pub fn restart<S: CandidateShell + ?Sized>(shell: &mut S, c: usize) {
    if shell.group().is_up(c) {
        return;
    }
    start(shell, c);
}

/// Candidate `c`'s process starts (again) from its disk alone, its machine replaced if it
/// runs, then drains.
pub fn start<S: CandidateShell + ?Sized>(shell: &mut S, c: usize) {
    let app = shell.new_app();
    let log_bytes_floor = shell.group().params.log_bytes_floor;
    // A running candidate stops cleanly first: its writes end, and it keeps the commit index
    // it knows, as the daemons do (lava-replog's `commit_record`); on a full disk what
    // waited for room is lost with the process, and no commit record is written.
    sync(shell, c);
    let cand = &mut shell.group_mut().cands[c];
    if cand.disk_full {
        cand.unsynced.clear();
        cand.waiting_snapshot = None;
    } else if let Some(machine) = &cand.machine {
        cand.records.push(machine.replica().commit_record());
    }
    cand.hand_over = HandOverPolicy::default();
    cand.incarnation += 1;
    cand.dumped = u64::MAX;
    let config = Config { log_bytes_floor, ..Config::new(c as u64 + 1, CANDIDATES as u64) };
    let machine = match Machine::recover(config, app, cand.records.clone(), cand.snapshot.clone()) {
        Ok(machine) => machine,
        Err(error) => shell.fail(format!("candidate {} does not recover from its own disk: {error}", c + 1)),
    };
    let view = machine.view();
    shell.group_mut().cands[c].machine = Some(machine);
    let now = shell.now_ms();
    shell.trace().line(now, || format!("candidate {}: start {view:?}", c + 1));
    shell.drain(c);
}

/// A frame for candidate `c`: kept while it is paused, lost while it is down.
pub fn deliver<S: CandidateShell + ?Sized>(shell: &mut S, c: usize, packet: S::Packet) {
    let cand = &mut shell.group_mut().cands[c];
    if cand.machine.is_none() {
        shell.count_lost();
        return;
    }
    if cand.paused {
        cand.inbox.push(packet);
        return;
    }
    shell.deliver_running(c, packet);
}

/// A consensus message from candidate `from` reaches candidate `c` (running): the machine
/// takes it, then a drain.
pub fn receive<S: CandidateShell + ?Sized>(shell: &mut S, c: usize, from: usize, bytes: &[u8]) {
    let m = shell.group_mut().cands[c].machine.as_mut().expect("up");
    if let Err(error) = m.receive(bytes) {
        shell.fail(format!("candidate {} refused candidate {}'s message: {error}", c + 1, from + 1));
    }
    shell.drain(c);
}

/// An entry is in candidate `c`'s state: the same entry as everywhere else at its index;
/// the first time anywhere, the shell hears of it.
pub fn committed<S: CandidateShell + ?Sized>(shell: &mut S, c: usize, index: u64, term: u64, data: Vec<u8>) {
    match shell.group().committed.get(&index) {
        Some((t, d)) if (*t, d) != (term, &data) => shell.fail(format!(
            "candidate {} applied entry {index} of term {term}, where term {t} was committed",
            c + 1
        )),
        Some(_) => {}
        None => {
            let top = shell.group().top();
            if index != top + 1 {
                shell.fail(format!("entry {index} committed first at candidate {}, after {top}", c + 1));
            }
            if !data.is_empty() {
                shell.first_commit(c, index, term, &data);
            }
            shell.group_mut().committed.insert(index, (term, data));
        }
    }
}

/// The checks after a drain of candidate `c`.
pub fn check<S: CandidateShell + ?Sized>(shell: &mut S, c: usize) {
    let Some(machine) = shell.group().cands[c].machine.as_ref() else { return };
    let view = machine.view();
    // The state equals every other candidate's at the same applied index.
    let applied = machine.applied();
    if machine.outstanding() == 0 && shell.group().cands[c].dumped != applied {
        let hash = match S::state_bytes(machine.app()) {
            Ok(bytes) => fingerprint(&bytes),
            Err(problem) => shell.fail(format!("candidate {}: {problem}", c + 1)),
        };
        let group = shell.group_mut();
        group.cands[c].dumped = applied;
        match group.dumps.get(&applied) {
            Some(&first) if first != hash => shell.fail(format!(
                "candidate {}: its state at applied index {applied} differs from the state another candidate had there",
                c + 1
            )),
            Some(_) => {}
            None => {
                group.dumps.insert(applied, hash);
            }
        }
    }
    if !view.is_leader {
        return;
    }
    match shell.group().leaders.get(&view.term) {
        Some(&other) if other != c => {
            shell.fail(format!("two leaders in term {}: candidates {} and {}", view.term, other + 1, c + 1))
        }
        Some(_) => {}
        None => {
            let now = shell.now_ms();
            shell.trace().line(now, || format!("candidate {} leads term {}", c + 1, view.term));
            shell.group_mut().leaders.insert(view.term, c);
        }
    }
    if !shell.group_mut().checked_leaders.insert((c, view.term)) {
        return;
    }
    // Every entry acknowledged in an earlier term is in this leader's log.
    let group = shell.group();
    let through = group.acked.range(..view.term).map(|(_, &index)| index).max().unwrap_or(0);
    let replica = group.cands[c].machine.as_ref().expect("up").replica();
    let base = replica.snapshot_index();
    if base >= through {
        return;
    }
    for (&index, (term, data)) in group.committed.range(base + 1..=through) {
        if replica.term_at(index) != Some(*term) || replica.entry_at(index).as_ref() != Some(data) {
            shell.fail(format!(
                "candidate {} leads term {} without acknowledged entry {index} (term {term}); it holds term {:?}",
                c + 1,
                view.term,
                replica.term_at(index)
            ));
        }
    }
}
