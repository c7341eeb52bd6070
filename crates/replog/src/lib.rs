//! lava-replog: the replicated log of the master candidates (docs/failover.md).
//!
//! It owns consensus among the hosts of `LSF_MASTER_LIST` over one ordered log of opaque
//! entries: which candidate leads, which entries are committed (held durably by a majority),
//! and in which order every candidate applies them. The consensus itself is tikv's raft-rs
//! ([`raft::RawNode`]), driven sans-IO: the caller hands in ticks, proposals and the
//! candidates' messages, and [`Replica::drain`] hands back [`Effect`]s to carry out **in the
//! order given** — make records durable, send messages, apply committed entries, restore a
//! snapshot. Recovery rebuilds a replica from the records it made durable
//! ([`Replica::recover`]), in the record format of [`record`].
//!
//! [`machine`] is the replicated state machine over the log, generic over the
//! application: a leader's answers held until their entries are committed, followers
//! applying committed entries, a leader's state rebuilt when its proposals die.
//!
//! mbatchd and the coordinator share this one component (docs/failover.md, "One log for
//! two daemons"): their entries are their event logs' records, their snapshots their
//! snapshots; neither logic crate ever sees consensus, only an ordered log.
//!
//! # What it never does
//! No I/O, no clock, no threads, no tokio: time is [`Replica::tick`], durability is the
//! caller's [`Effect::Persist`], the network is the caller's [`Effect::Send`] and
//! [`Replica::receive`]. No randomness: each candidate's election timeout is fixed by its
//! rank in `LSF_MASTER_LIST` ([`Config::election_ticks_of`]), so a seeded run repeats
//! exactly and the preferred candidate is the first to stand. It never interprets an
//! entry's bytes.
//!
//! # The caller's contract
//! 1. Carry out every effect of one [`Replica::drain`] in order, and all of them, before
//!    handing the replica anything else. A [`Effect::Persist`] *starts* making its records
//!    durable: they go to the log after every earlier `Persist`'s, and the effects after it
//!    do not wait for them (raft-rs's asynchronous persistence). Once its records, and every
//!    earlier `Persist`'s, are durable (written and fsynced), the caller hands its ticket to
//!    [`Replica::persisted`] and drains again; it may do so at once (a `Persist` carried out
//!    on the spot) or later, after other inputs. What must wait for the records, the replica
//!    holds back itself until then: a follower's acknowledgement, a vote, the leader's own
//!    count towards a majority, and every committed entry it holds (an `Apply` comes only
//!    once its entry is durable here). So a leader's entry can be committed by its
//!    followers' acknowledgements while its own fsync still runs ([`Replica::is_committed`]).
//!    A hard state that only moved the commit index is not persisted on its own: the commit
//!    index is volatile in raft (a restarted candidate learns it again from the leader) and
//!    what it names is durable on a majority already; it rides along with the next record.
//! 2. An entry counts as acknowledged only when it comes back as [`Effect::Apply`] with the
//!    index *and term* [`Replica::propose`] returned. An `Apply` at that index with another
//!    term means the proposal was lost with its leader's term: answer "not done, retry"
//!    (a client's retried request then meets its own deduplication in the application).
//! 3. On a restart, hand [`Replica::recover`] every record the candidate made durable, in
//!    order, and the newest snapshot the application kept; the committed entries after the
//!    snapshot come back as `Apply` effects of the first drains.

pub mod machine;
pub mod record;
mod store;

use raft::eraftpb::{ConfState, Entry, EntryType, HardState, Message, Snapshot};
use raft::{RawNode, StateRole};
use thiserror::Error;

use crate::record::{Record, StoredEntry};
use crate::store::Store;

/// A candidate's id: its rank in `LSF_MASTER_LIST`, 1 for the first (the preferred).
pub type ReplicaId = u64;

/// Largest message [`Replica::receive`] accepts, bytes: a bound on what a peer can make a
/// candidate decode (messages come only from authenticated candidates, but a bug must not
/// cost memory without bound).
pub const MESSAGE_BYTES_MAX: usize = 64 << 20;

/// [`Config::log_bytes_floor`]'s default: 64 MiB of entries (some 25,000 submissions with
/// a login environment each) before their weight alone makes a snapshot due.
pub const LOG_BYTES_FLOOR: u64 = 64 << 20;

/// How a replica is set up.
#[derive(Clone, Debug)]
pub struct Config {
    /// This candidate's rank, `1..=candidates`.
    pub id: ReplicaId,
    /// How many candidates there are (`LSF_MASTER_LIST`'s length); their ids are
    /// `1..=candidates`.
    pub candidates: u64,
    /// Ticks between a leader's heartbeats.
    pub heartbeat_ticks: usize,
    /// Ticks without a leader before the first candidate stands for election; candidate `k`
    /// waits `(k - 1) * rank_step_ticks` more ([`Config::election_ticks_of`]).
    pub election_ticks: usize,
    /// Extra ticks per rank.
    pub rank_step_ticks: usize,
    /// Most bytes of entries in one append message.
    pub max_append_bytes: u64,
    /// Most append messages in flight to one follower.
    pub max_inflight: usize,
    /// The entries held in memory since the newest snapshot may weigh this much before a
    /// snapshot is due whatever their number, or as much as the snapshot if it is larger
    /// ([`machine::Machine::log_outweighs_snapshot`]).
    pub log_bytes_floor: u64,
}

impl Config {
    /// The defaults for candidate `id` of `candidates`: a heartbeat every tick, the first
    /// election after 10 ticks, 4 more per rank (with the shell's 100 ms tick: a failover
    /// starts 1 s after the last heartbeat from a dead leader).
    pub fn new(id: ReplicaId, candidates: u64) -> Config {
        Config {
            id,
            candidates,
            heartbeat_ticks: 1,
            election_ticks: 10,
            rank_step_ticks: 4,
            max_append_bytes: 1 << 20,
            log_bytes_floor: LOG_BYTES_FLOOR,
            max_inflight: 256,
        }
    }

    /// Candidate `id`'s fixed election timeout, in ticks.
    pub fn election_ticks_of(&self, id: ReplicaId) -> usize {
        self.election_ticks + (id.saturating_sub(1) as usize) * self.rank_step_ticks
    }
}

/// What went wrong setting a replica up or recovering it.
#[derive(Debug, Error)]
pub enum Error {
    /// The configuration names an impossible candidate set.
    #[error("candidate {id} of {candidates}: ids run from 1 to the number of candidates (LSF_MASTER_LIST)")]
    BadId { id: ReplicaId, candidates: u64 },
    /// The durable records do not form a log (a gap, an entry before the snapshot it
    /// follows, a term going back): the folder was damaged or mixed with another's.
    #[error("record {record}: {what}")]
    Damaged { record: usize, what: String },
    /// raft-rs refused the state it was handed.
    #[error("consensus core: {0}")]
    Raft(#[from] raft::Error),
}

/// Why a proposal was not taken.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum Refused {
    /// This candidate does not lead; `leader` is the one it believes leads, if any.
    #[error("not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<ReplicaId> },
}

/// Why a message from a peer was dropped.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum BadMessage {
    /// Over [`MESSAGE_BYTES_MAX`].
    #[error("message of {0} bytes is over the limit")]
    TooLarge(usize),
    /// Not a raft message.
    #[error("undecodable message: {0}")]
    Undecodable(String),
    /// From a candidate that does not exist, or for another one.
    #[error("message from {from} to {to}: not a candidate's message for this one")]
    Misaddressed { from: u64, to: u64 },
}

/// Something the caller must carry out, in the order [`Replica::drain`] returned them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Make these records durable (append, fsync), in order, after every earlier
    /// `Persist`'s; then hand `ticket` to [`Replica::persisted`]. Later effects do not wait.
    Persist { ticket: u64, records: Vec<Record> },
    /// Send this message to candidate `to`; it may be lost, duplicated or delayed.
    Send { to: ReplicaId, message: Vec<u8> },
    /// A committed entry: apply it to the application's state. Entries come in index order
    /// with no gap; an empty `data` is the leader's own marker and carries nothing.
    Apply { index: u64, term: u64, data: Vec<u8> },
    /// A snapshot of the application's state through `index`, received from the leader
    /// because this candidate was too far behind: keep it durably as the application's
    /// newest snapshot (with its index and term), then replace the application's state with
    /// it. The `Persist` of [`Record::Installed`] that follows must start after it is kept.
    Restore { index: u64, term: u64, data: Vec<u8> },
    /// A majority confirmed this leader after [`Replica::read_index`]`(ctx)`: nothing newer
    /// than `index` was committed then by anyone, so an answer from the state once it has
    /// applied `index` is not stale (and not the answer of a deposed leader).
    Confirmed { ctx: u64, index: u64 },
}

/// Where a proposal was placed: it is acknowledged when an `Apply` with this index and
/// term comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    pub index: u64,
    pub term: u64,
}

/// The replica's view, for status and for routing clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    pub id: ReplicaId,
    pub term: u64,
    pub leader: Option<ReplicaId>,
    pub is_leader: bool,
    pub commit: u64,
    pub applied: u64,
    pub last_index: u64,
}

/// One candidate's replica of the log.
pub struct Replica {
    node: RawNode<Store>,
    config: Config,
    applied: u64,
    /// The term and vote of the newest `Hard` record handed out for persistence (or
    /// recovered).
    durable_vote: (u64, u64),
    /// The ticket of the last `Persist` handed out, and of the last one made durable.
    persist_out: u64,
    persist_done: u64,
    /// The number of the newest raft ready handled.
    last_ready: u64,
    /// Messages waiting for the `Persist` whose ticket they name (raft's persisted
    /// messages: a follower's acknowledgements, votes), in ticket order.
    waiting: std::collections::VecDeque<(u64, Vec<Effect>)>,
    /// Messages [`Replica::persisted`] let go, for the next drain.
    released: Vec<Effect>,
}

impl Replica {
    /// A brand-new candidate: empty log, every candidate a voter.
    pub fn new(config: Config) -> Result<Replica, Error> {
        Replica::recover(config, Vec::new(), None)
    }

    /// Rebuilds a candidate from the records it made durable (in the order made durable)
    /// and the newest snapshot the application kept (`(index, term, data)`), as
    /// [`record::rebuild`] reads them. The application's state must be the snapshot's (or
    /// empty without one): the committed entries after it come back as `Apply` effects.
    pub fn recover(
        config: Config,
        records: Vec<Record>,
        snapshot: Option<(u64, u64, Vec<u8>)>,
    ) -> Result<Replica, Error> {
        if config.id == 0 || config.id > config.candidates {
            return Err(Error::BadId { id: config.id, candidates: config.candidates });
        }
        let voters: Vec<u64> = (1..=config.candidates).collect();
        let rebuilt = record::rebuild(records, snapshot.as_ref().map(|s| (s.0, s.1)))?;
        let mut store = Store::new(ConfState::from((voters, Vec::<u64>::new())));
        if let Some((index, term, data)) = snapshot {
            store.install(index, term, data);
        }
        store.append(&rebuilt.entries.iter().map(to_entry).collect::<Vec<_>>());
        store.set_hard_state(HardState {
            term: rebuilt.term,
            vote: rebuilt.vote,
            commit: rebuilt.commit.max(store.snapshot_index()).min(store.last()),
            ..HardState::default()
        });
        let applied = store.snapshot_index();

        let timeout = config.election_ticks_of(config.id);
        let raft_config = raft::Config {
            id: config.id,
            election_tick: config.election_ticks,
            heartbeat_tick: config.heartbeat_ticks,
            min_election_tick: timeout,
            max_election_tick: timeout + 1,
            applied,
            max_size_per_msg: config.max_append_bytes,
            max_inflight_msgs: config.max_inflight,
            check_quorum: true,
            // A moved commit index rides on the next append or heartbeat instead of a
            // round of its own: followers apply a little later (they serve nothing that
            // waits for it), and every round costs each candidate two messages and two
            // wake-ups fewer (docs/benchmarks.md, ninth session: 10 % less mbatchd CPU).
            skip_bcast_commit: true,
            pre_vote: true,
            ..raft::Config::default()
        };
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let node = RawNode::new(&raft_config, store, &logger)?;
        Ok(Replica {
            node,
            config,
            applied,
            durable_vote: (rebuilt.term, rebuilt.vote),
            persist_out: 0,
            persist_done: 0,
            last_ready: 0,
            waiting: std::collections::VecDeque::new(),
            released: Vec::new(),
        })
    }

    /// One tick of the caller's clock (the shell's 100 ms timer). A replica that is not
    /// the leader counts no election time while it is behind its own snapshot (see
    /// `behind_own_snapshot`).
    pub fn tick(&mut self) {
        if self.behind_own_snapshot() && self.node.raft.state != StateRole::Leader {
            return;
        }
        self.node.tick();
    }

    /// Whether this replica's store holds a snapshot beyond what raft-rs counts applied: a
    /// snapshot installed from the leader whose records are not yet known durable (raft-rs
    /// counts applied only what is durable here; a full disk keeps it so for as long as it
    /// lasts). raft-rs reads the entries after its applied
    /// index from the store when it campaigns (for configuration changes), finds them
    /// compacted and stops the process. So until the records are durable this replica does
    /// not campaign: its election timer stands still and a leader's transfer to it
    /// (`MsgTimeoutNow`) is dropped. A candidate that cannot write its log has no business
    /// leading anyway; the others elect one of them. Found by the replicated mbatchd's
    /// simulation with full disks.
    fn behind_own_snapshot(&self) -> bool {
        self.node.raft.raft_log.applied < self.node.store().snapshot_index()
    }

    /// Asks the candidates to confirm this leader (raft's read index, a heartbeat round):
    /// [`Effect::Confirmed`] with `ctx` comes back once a majority answered. Only the
    /// leader asks; a confirmation never comes to a leader cut off from its majority.
    pub fn read_index(&mut self, ctx: u64) -> Result<(), Refused> {
        if self.node.raft.state != StateRole::Leader {
            return Err(Refused::NotLeader { leader: self.leader() });
        }
        self.node.read_index(ctx.to_be_bytes().to_vec());
        Ok(())
    }

    /// Proposes an entry. Only the leader takes one; it is acknowledged once it comes back
    /// as an `Apply` with the returned place.
    pub fn propose(&mut self, data: Vec<u8>) -> Result<Placed, Refused> {
        if self.node.raft.state != StateRole::Leader {
            return Err(Refused::NotLeader { leader: self.leader() });
        }
        self.node.propose(Vec::new(), data).map_err(|_| Refused::NotLeader { leader: self.leader() })?;
        let index = self.node.raft.raft_log.last_index();
        Ok(Placed { index, term: self.node.raft.term })
    }

    /// A message from another candidate, as [`Effect::Send`] produced it there.
    pub fn receive(&mut self, bytes: &[u8]) -> Result<(), BadMessage> {
        if bytes.len() > MESSAGE_BYTES_MAX {
            return Err(BadMessage::TooLarge(bytes.len()));
        }
        let message: Message =
            protobuf::Message::parse_from_bytes(bytes).map_err(|e| BadMessage::Undecodable(e.to_string()))?;
        if message.from == 0 || message.from > self.config.candidates || message.to != self.config.id {
            return Err(BadMessage::Misaddressed { from: message.from, to: message.to });
        }
        if message.get_msg_type() == raft::eraftpb::MessageType::MsgTimeoutNow && self.behind_own_snapshot() {
            // See `behind_own_snapshot`: the leader gives up the transfer after an election
            // timeout and goes on leading.
            return Ok(());
        }
        // raft-rs refuses only local message types arriving from outside; drop them too.
        self.node.step(message).map_err(|e| BadMessage::Undecodable(e.to_string()))
    }

    /// The application took a snapshot of its state through `index` (which it applied):
    /// entries through it may be forgotten, and a follower too far behind gets `data`.
    /// The caller keeps the snapshot durably first (as the application's newest, with
    /// its index and term), then persists the returned record.
    pub fn compact(&mut self, index: u64, data: Vec<u8>) -> Option<Record> {
        if index > self.applied || index <= self.node.store().snapshot_index() {
            return None;
        }
        let term = self.node.store().term_of(index)?;
        self.node.mut_store().compact_to(index, term, data);
        Some(Record::Compacted { index, term })
    }

    /// Everything the replica has for the caller now, in the order to carry it out.
    pub fn drain(&mut self) -> Vec<Effect> {
        let mut effects = std::mem::take(&mut self.released);
        while self.node.has_ready() {
            let mut ready = self.node.ready();
            let number = ready.number();
            self.last_ready = number;
            // A leader's appends leave before its own entries are durable (raft thesis
            // 10.2.1); every other message is among the persisted ones below.
            sends(&mut self.node, &mut effects, ready.take_messages());
            for read in ready.take_read_states() {
                if let Ok(bytes) = <[u8; 8]>::try_from(&read.request_ctx[..]) {
                    effects.push(Effect::Confirmed { ctx: u64::from_be_bytes(bytes), index: read.index });
                }
            }
            let mut records: Vec<Record> = Vec::new();
            let snapshot = ready.snapshot().clone();
            if !snapshot.is_empty() {
                let meta = snapshot.get_metadata();
                let (index, term) = (meta.index, meta.term);
                let data = snapshot.data.to_vec();
                self.node.mut_store().install(index, term, data.clone());
                effects.push(Effect::Restore { index, term, data });
                records.push(Record::Installed { index, term });
                self.applied = self.applied.max(index);
            }
            // Committed entries come only once they are durable here (raft-rs hands out
            // entries through min(commit, persisted)).
            self.applies(&mut effects, ready.take_committed_entries());
            let entries = ready.take_entries();
            if !entries.is_empty() {
                self.node.mut_store().append(&entries);
                records.push(Record::Entries(entries.iter().map(from_entry).collect()));
            }
            if let Some(hard) = ready.hs() {
                self.node.mut_store().set_hard_state(hard.clone());
            }
            // The term and vote must be durable before anything is sent that depends on
            // them; the commit index need not be (it is known again from the leader after a
            // restart, and what it names is already durable on a majority). So a hard state
            // that only moved the commit costs no fsync of its own: it rides along with the
            // next record made durable anyway.
            let hard = self.node.store().hard_state();
            if (hard.term, hard.vote) != self.durable_vote || (!records.is_empty() && ready.hs().is_some()) {
                self.durable_vote = (hard.term, hard.vote);
                records.push(Record::Hard { term: hard.term, vote: hard.vote, commit: hard.commit });
            }
            if !records.is_empty() {
                effects.push(Effect::Persist { ticket: number, records });
                self.persist_out = number;
            }
            let mut after = Vec::new();
            sends(&mut self.node, &mut after, ready.take_persisted_messages());
            self.node.advance_append_async(ready);
            if self.persist_done >= self.persist_out {
                // Nothing of this ready or before it waits for a disk.
                effects.append(&mut after);
                self.node.on_persist_ready(number);
            } else if !after.is_empty() {
                self.waiting.push_back((self.persist_out, after));
            }
            self.advance_apply();
        }
        effects
    }

    /// Tells raft-rs what the caller applied (a snapshot received counts once durable).
    fn advance_apply(&mut self) {
        let log = &self.node.raft.raft_log;
        let through = self.applied.min(log.committed).min(log.persisted);
        if through > log.applied {
            self.node.advance_apply_to(through);
        }
    }

    /// The records of the `Persist` with this ticket, and of every one before it, are
    /// durable: what waited for them goes in the next drain (a follower's acknowledgements,
    /// votes; on the leader, its own count towards a majority, and the committed entries it
    /// now holds durably).
    pub fn persisted(&mut self, ticket: u64) {
        if ticket <= self.persist_done || ticket > self.persist_out {
            return;
        }
        self.persist_done = ticket;
        // With nothing left outstanding, every ready so far is durable, the ones that had
        // nothing to persist included.
        let number = if ticket == self.persist_out { self.last_ready } else { ticket };
        self.node.on_persist_ready(number);
        while self.waiting.front().is_some_and(|(after, _)| *after <= ticket) {
            let (_, mut messages) = self.waiting.pop_front().expect("checked just above");
            self.released.append(&mut messages);
        }
        self.advance_apply();
    }

    /// The last entry of this replica's log known durable here (reported through
    /// [`Replica::persisted`]).
    pub fn durable_index(&self) -> u64 {
        self.node.raft.raft_log.persisted
    }

    /// Whether a `Persist` handed out is not yet reported durable ([`Replica::persisted`]).
    pub fn persisting(&self) -> bool {
        self.persist_done < self.persist_out
    }

    /// Whether the entry placed at `placed` is committed (held durably by a majority,
    /// which need not include this candidate yet) with that term.
    pub fn is_committed(&self, placed: Placed) -> bool {
        self.node.raft.raft_log.committed >= placed.index && self.term_at(placed.index) == Some(placed.term)
    }

    fn applies(&mut self, effects: &mut Vec<Effect>, entries: Vec<Entry>) {
        for entry in entries {
            self.applied = entry.index;
            if entry.get_entry_type() == EntryType::EntryNormal {
                effects.push(Effect::Apply {
                    index: entry.index,
                    term: entry.term,
                    data: entry.data.to_vec(),
                });
            }
        }
    }

    /// The candidate this one believes leads, if any.
    pub fn leader(&self) -> Option<ReplicaId> {
        match self.node.raft.leader_id {
            0 => None,
            id => Some(id),
        }
    }

    /// The hard state as a record whose commit index is the one this replica knows now (at
    /// most its last entry made durable). The commit index is otherwise made
    /// durable only beside other records; a caller that stops once every `Persist` is
    /// carried out keeps this one, so that its next start applies everything it knew
    /// committed instead of waiting for a leader to say so again (a deposed leader answers
    /// stale queries from that state). A committed index is committed for good: persisting
    /// it is always safe. Its term and vote are the newest handed out: take it once every
    /// `Persist` is durable.
    pub fn commit_record(&self) -> Record {
        let hard = self.node.store().hard_state();
        let durable = self.node.store().last().min(self.node.raft.raft_log.persisted);
        Record::Hard { term: hard.term, vote: hard.vote, commit: hard.commit.min(durable) }
    }

    /// This replica's view (term, leader, commit and applied indexes).
    pub fn view(&self) -> View {
        View {
            id: self.config.id,
            term: self.node.raft.term,
            leader: self.leader(),
            is_leader: self.node.raft.state == StateRole::Leader,
            commit: self.node.raft.raft_log.committed,
            applied: self.applied,
            last_index: self.node.raft.raft_log.last_index(),
        }
    }

    /// The term of the entry at `index` in this replica's log (including entries not yet
    /// handed out for persistence), if it holds it (raft-rs answers 0 for an index it does
    /// not hold; real terms start at 1); the snapshot's index answers with its term.
    pub fn term_at(&self, index: u64) -> Option<u64> {
        self.node.raft.raft_log.term(index).ok().filter(|&t| t != 0)
    }

    /// The data of the entry at `index`, if this replica's log still holds it.
    pub fn entry_at(&self, index: u64) -> Option<Vec<u8>> {
        let entries =
            self.node.raft.raft_log.entries(index, 1, raft::GetEntriesContext::empty(false)).ok()?;
        entries.first().filter(|e| e.index == index).map(|e| e.data.to_vec())
    }

    /// Every entry this replica's log holds after `index` (those [`Replica::compact`] keeps),
    /// for the caller to carry past the snapshot it keeps (docs/failover.md, "What each
    /// candidate keeps"). Call it between drains; the entries not yet durable are among
    /// them, so the caller's log must take the copies after every `Persist` started.
    /// An error (the log no longer holds them) must stop the compaction: a snapshot kept
    /// without them would lose entries this candidate acknowledged.
    pub fn entries_after(&self, index: u64) -> Result<Vec<record::StoredEntry>, Error> {
        let last = self.node.raft.raft_log.last_index();
        if index >= last {
            return Ok(Vec::new());
        }
        let context = raft::GetEntriesContext::empty(false);
        let from = (index + 1).max(self.node.raft.raft_log.first_index());
        let entries = self.node.raft.raft_log.entries(from, u64::MAX, context)?;
        Ok(entries.iter().map(from_entry).collect())
    }

    /// Hands the leadership to a follower, for a leader that cannot go on well (its disk is
    /// full): raft's leadership transfer, to the follower with the lowest rank among those
    /// that hold every entry this leader holds and were heard from within the last election
    /// timeout. Only when such followers are a majority of the candidates on their own: the
    /// one chosen must be elected without this candidate's vote, which a full disk cannot
    /// record, or the cluster would lose a leader it could keep. Returns the follower asked,
    /// `None` when none may be (or this candidate does not lead). While the transfer runs
    /// the leader takes no proposal ([`Refused::NotLeader`]); raft-rs abandons it after an
    /// election timeout if the follower does not take over.
    pub fn hand_over(&mut self) -> Option<ReplicaId> {
        if self.node.raft.state != StateRole::Leader {
            return None;
        }
        let last = self.node.raft.raft_log.last_index();
        let me = self.config.id;
        let ready: Vec<ReplicaId> = (1..=self.config.candidates)
            .filter(|&id| id != me)
            .filter(|&id| self.node.raft.prs().get(id).is_some_and(|p| p.matched == last && p.recent_active))
            .collect();
        if (ready.len() as u64) < self.config.candidates / 2 + 1 {
            return None;
        }
        let to = ready[0];
        self.node.transfer_leader(to);
        Some(to)
    }

    /// On the leader, the highest index each candidate is known to hold (this one's own: its
    /// last index), in candidate order; `None` on a follower, which does not track them.
    pub fn progress(&self) -> Option<Vec<(ReplicaId, u64)>> {
        if self.node.raft.state != StateRole::Leader {
            return None;
        }
        let last = self.node.raft.raft_log.last_index();
        let prs = self.node.raft.prs();
        Some(
            (1..=self.config.candidates)
                .map(|id| {
                    let held = if id == self.config.id { last } else { prs.get(id).map_or(0, |p| p.matched) };
                    (id, held)
                })
                .collect(),
        )
    }

    /// The index through which the log is held as a snapshot.
    pub fn snapshot_index(&self) -> u64 {
        self.node.store().snapshot_index()
    }

    /// The newest snapshot the log holds (`None` before the first): its index and data.
    pub fn snapshot(&self) -> Option<(u64, &[u8])> {
        let store = self.node.store();
        (store.snapshot_index() > 0).then(|| (store.snapshot_index(), store.snapshot_data()))
    }

    /// Bytes of the entries held in memory after the snapshot (their data).
    pub fn log_bytes(&self) -> u64 {
        self.node.store().entry_bytes()
    }

    /// Whether the entries held in memory after the snapshot through `applied` weigh more
    /// than the snapshot and more than [`Config::log_bytes_floor`]: a snapshot through
    /// `applied` is then due, however few entries there are. Memory follows the state, not
    /// the traffic since the last snapshot, and such a snapshot never costs more bytes to
    /// write than the log it replaces. (Entries past `applied` do not count: a snapshot could not
    /// drop them.)
    pub fn log_outweighs_snapshot(&self, applied: u64) -> bool {
        let store = self.node.store();
        store.entry_bytes_through(applied) >= self.config.log_bytes_floor.max(store.snapshot_bytes())
    }
}

/// The messages to send, as effects. A snapshot is reported delivered as soon as it is handed
/// out: the caller's network gives no receipt, and if it was lost, the leader's next probe
/// finds the follower still behind and sends another (otherwise the leader would wait for a
/// report forever and never replicate to that follower again).
fn sends(node: &mut RawNode<Store>, effects: &mut Vec<Effect>, messages: Vec<Message>) {
    for message in messages {
        let to = message.to;
        if message.get_msg_type() == raft::eraftpb::MessageType::MsgSnapshot {
            node.report_snapshot(to, raft::SnapshotStatus::Finish);
        }
        // A raft message always encodes; a failure would be a bug in the generated code.
        let bytes = protobuf::Message::write_to_bytes(&message).expect("raft message encodes");
        effects.push(Effect::Send { to, message: bytes });
    }
}

fn to_entry(stored: &StoredEntry) -> Entry {
    Entry {
        entry_type: kind_of(stored.kind),
        index: stored.index,
        term: stored.term,
        data: stored.data.clone().into(),
        ..Entry::default()
    }
}

fn from_entry(entry: &Entry) -> StoredEntry {
    StoredEntry {
        index: entry.index,
        term: entry.term,
        kind: entry.get_entry_type() as u32,
        data: entry.data.to_vec(),
    }
}

fn kind_of(kind: u32) -> EntryType {
    match kind {
        1 => EntryType::EntryConfChange,
        2 => EntryType::EntryConfChangeV2,
        _ => EntryType::EntryNormal,
    }
}

/// A raft-rs snapshot carrying the application's `data` at `index`.
pub(crate) fn snapshot_of(index: u64, term: u64, conf: &ConfState, data: &[u8]) -> Snapshot {
    let mut snapshot = Snapshot { data: data.to_vec().into(), ..Snapshot::default() };
    let meta = snapshot.mut_metadata();
    meta.index = index;
    meta.term = term;
    meta.set_conf_state(conf.clone());
    snapshot
}
