//! mbatchd as one of several master candidates (docs/failover.md, "mbatchd on the
//! candidates"): the event log is the candidates' replicated log, not a file of this host.
//!
//! With `LSF_MASTER_LIST` naming two candidates or more, every candidate runs mbatchd. Each
//! one keeps its replica log (`lsb.replica` in `logdir/<candidate>`, through
//! `lava_shell::replication::ReplicaLog`) and talks to the others on `LAVA_MBD_REPL_PORT`
//! (`lava_shell::replication::Link`). The shared `lava_replog::machine::Machine` decides;
//! this module carries out what it decides, in its order (the machine's contract):
//!
//! - **The leader serves.** Only between the machine's `Lead` and `Follow` does mbatchd
//!   listen on `LSB_MBD_PORT`: clients and sbatchds reach a follower's address and are
//!   refused, and try the next candidate (they try them in `LSF_MASTER_LIST` order). At
//!   `Lead` the state holds every committed event; the shell binds the port and steps
//!   `Input::Start`, as at any start.
//! - **Each event is proposed, each answer held.** The logic's `Append` becomes a proposal
//!   of the event's XDR bytes; each reply, message to an sbatchd, read answer or `lsb.acct`
//!   line is held by the machine and sent only when every event before it is committed —
//!   held durably by a majority — with the term it was proposed in. An answer whose events
//!   died with a term is not sent: the client's retry meets the logic's deduplication by
//!   request id, an sbatchd resends what is unacknowledged.
//! - **Followers apply.** Committed events reach the state through
//!   [`lava_mbd::Mbd::replay`], as a restart replays `lsb.events`; a leader's snapshot
//!   replaces the state. The machine hands them over as [`Deferred`] operations, which the
//!   shell applies to its state after each drain and before anything else.
//! - **A deposed leader starts again.** At `Follow` the state may hold events that were
//!   never committed, and the process holds connections only a leader keeps. mbatchd stops
//!   and starts again in the same process (as `badmin mbdrestart` does): it recovers from
//!   its replica log alone and follows. Crash-only: the same path as a `kill -9`.
//! - **Snapshots.** Every `--snapshot-events` applied events, or sooner when the applied
//!   entries held in memory outweigh the last snapshot (`Machine::log_outweighs_snapshot`),
//!   once no proposal is outstanding, the state is snapshotted into the replica log and the
//!   log compacted.
//!
//! - **Derived files.** Every candidate writes each committed event to its own `lsb.events`
//!   and each finish's `lsb.acct` line behind it, after commit, exactly once by replicated
//!   index ([`crate::derived`]; docs/failover.md, "What each candidate keeps").
//!
//! - **Stale answers without a majority.** A candidate that has known no leader for
//!   [`stale_after`] answers the read-only queries that ask for it (`bjobs`, `bhosts`,
//!   `bqueues`, `badmin showstatus`) from its state, marked ([`Replicated::stale_state`],
//!   `conn::refuse`; docs/failover.md, "Queries without a majority"). A follower's state
//!   holds the committed entries it applied and nothing else: entries reach it only through
//!   the machine's `Apply` of committed entries or a leader's snapshot, and a leader that
//!   loses its place starts again from its replica log before it answers anything.
//!
//! - **Seeding.** `mbatchd --seed-from DIR` ([`seed`]) makes a single master's state the
//!   snapshot at index 1 of an empty replica log, once, before the candidates first start
//!   (docs/failover.md, "Moving a single master to candidates").

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lava_mbd::{Event, Mbd, MbdConfig, Replayed};
use lava_net::{Authenticator, system_now_ms};
use lava_replog::Config;
use lava_replog::machine::{Application, HandOverPolicy, Machine, Step};
use lava_shell::replication::{Link, LinkConfig, ReplicaLog};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::ShellError;
use crate::codec::{EVENT_LIMITS, decode_snapshot_state};
use crate::config::Replication;
use crate::derived::Derived;
use crate::journal::Journal;

/// The replica log's name in the candidate's folder.
pub const REPLICA_LOG_NAME: &str = "lsb.replica";
/// The replicated log's clock: one tick every 100 ms (the first candidate stands for
/// election after 10 ticks without a leader, each later one 4 ticks more).
pub const REPLICA_TICK: Duration = Duration::from_millis(100);

/// How long a candidate must have known no leader before it answers queries from its own
/// state (marked stale): twice the longest election timeout among `n` candidates (3.6 s
/// for three), so that an election after a leader's death, or a start, is waited out by
/// the commands' retries and a stale answer means that no majority is up and connected.
pub(crate) fn stale_after(n: usize) -> Duration {
    let config = Config::new(1, n as u64);
    let ticks = config.election_ticks_of(n as u64);
    REPLICA_TICK * 2 * u32::try_from(ticks).unwrap_or(u32::MAX / 2)
}

/// A candidate starts a sync of its `lsb.events` at most once in this time
/// ([`Replicated::after_drains`]): nothing is acknowledged on it (the replica log is what is
/// acknowledged), only the `lsb.acct` lines and the text view follow it, and a crash
/// before it is made good from the replica log ([`crate::derived`]); between two syncs each
/// turn's events are written to the file without one. On one disk shared by
/// several candidates every flush of a derived file delays the replica logs' own fsyncs,
/// which every acknowledgement waits for: at 20 ms apart (until 2026-11-28) a durable
/// submission over one connection took 1.2–1.25 ms (median), at 500 ms 1.0–1.14 ms, and
/// mbatchd's CPU in `lava-bench e2e --candidates 3` fell by 8–16 % (docs/benchmarks.md).
/// `lsb.acct` and the text view trail the committed log by this much at most.
const DERIVED_SYNC_PACE: Duration = Duration::from_millis(500);

/// Messages from candidates taken in one turn of the loop at most.
const MESSAGES_TURN_MAX: usize = 1024;

/// `mbatchd --seed-from DIR` (docs/failover.md, "Moving a single master to candidates"):
/// the state the event log in `from` replays to becomes the snapshot at index 1, term 1, of
/// this candidate's replica log, which must be empty (refused otherwise, naming it). Every
/// candidate seeded from the same log holds the same entry 1; a candidate left empty can
/// never be elected by seeded ones (its log is behind) and is caught up by snapshot.
/// Returns what it did, for the operator.
pub(crate) fn seed(
    setting: &Replication,
    config: MbdConfig,
    from: &std::path::Path,
) -> Result<String, ShellError> {
    if !from.is_dir() {
        return Err(ShellError::Replica(format!("--seed-from {}: no such folder", from.display())));
    }
    let log = crate::journal::open(from)?;
    let recovered = crate::journal::recover(&log, config)?;
    let state = recovered.mbd.snapshot();
    let data = crate::codec::encode_snapshot_state(&state);
    drop(log);
    lava_shell::startup::create_private_dir(&setting.dir, "create the candidate's folder")?;
    let (mut replica, found, _report) =
        ReplicaLog::open(&setting.dir, REPLICA_LOG_NAME, crate::codec::LOG_FORMATS)
            .map_err(|error| ShellError::Replica(format!("{}: {error}", setting.dir.display())))?;
    if found.snapshot.is_some() || !found.records.is_empty() {
        return Err(ShellError::Replica(format!(
            "--seed-from {}: the replicated log in {} is not empty: a candidate is seeded once, before the \
             candidates first start",
            from.display(),
            setting.dir.display()
        )));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| ShellError::Runtime(format!("cannot start the async runtime: {error}")))?;
    runtime.block_on(async {
        replica
            .keep_snapshot(1, 1, data, Vec::new())
            .await
            .map_err(|error| ShellError::Replica(error.to_string()))?;
        replica
            .persist(vec![
                lava_replog::record::Record::Installed { index: 1, term: 1 },
                lava_replog::record::Record::Hard { term: 1, vote: 0, commit: 1 },
            ])
            .await
            .map_err(|error| ShellError::Replica(error.to_string()))
    })?;
    Ok(format!(
        "{}: seeded from {}: last job id {}",
        setting.dir.display(),
        from.display(),
        recovered.mbd.last_job_id()
    ))
}

/// What the machine did to the application, for the shell to do to its state.
#[derive(Debug)]
pub(crate) enum Op {
    /// Replace the state with a snapshot's (`None`: the empty state).
    Restore(Option<Vec<u8>>),
    /// Replay a committed event.
    Apply { index: u64, data: Vec<u8> },
}

/// The machine's application: the operations on mbatchd's state, queued for the shell
/// (which owns the state), and the snapshot bytes the shell prepares before a compaction.
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    ops: Vec<Op>,
    snapshot: Vec<u8>,
}

impl Application for Deferred {
    fn apply(&mut self, index: u64, data: &[u8]) {
        self.ops.push(Op::Apply { index, data: data.to_vec() });
    }

    fn snapshot(&self) -> Vec<u8> {
        self.snapshot.clone()
    }

    fn restore(&mut self, snapshot: Option<&[u8]>) {
        // Whatever was queued before is replaced by this state.
        self.ops.clear();
        self.ops.push(Op::Restore(snapshot.map(<[u8]>::to_vec)));
    }
}

/// What the replicated log hands the loop.
#[derive(Debug)]
pub(crate) enum ReplInput {
    Tick,
    Message(Vec<u8>),
    /// The leader's fsync ended: the newest `Persist` it made durable, if not reported yet.
    Persisted(Result<Option<u64>, lava_shell::replication::StoreError>),
}

/// The replicated log of this candidate: the machine, its disk and its link.
pub(crate) struct Replicated<M> {
    pub(crate) machine: Machine<Deferred, M>,
    log: ReplicaLog,
    link: Link,
    tick: Interval,
    candidates: Vec<(String, SocketAddr)>,
    config: MbdConfig,
    /// Applied events between two snapshots (`--snapshot-events`).
    snapshot_every: u64,
    /// The index of the newest snapshot.
    snapshot_index: u64,
    /// What this candidate's `lsb.events` holds of the log ([`crate::derived`]).
    pub(crate) derived: Derived,
    /// When this mbatchd opened the log.
    started: Instant,
    /// The last turn this candidate knew a leader (itself included), if any since it started.
    leader_seen: Option<Instant>,
    /// Since when it knows no leader (`None` while it knows one).
    no_leader_since: Option<Instant>,
    /// When the last sync of `lsb.events` was asked for.
    derived_synced: Option<Instant>,
    /// A compaction found the disk full: none is tried before this.
    compact_retry_at: Option<Instant>,
    /// The leadership hand-over of a full leader ([`Replicated::hand_over_if_full`]).
    hand_over: HandOverPolicy,
}

impl<M> std::fmt::Debug for Replicated<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replicated").field("view", &self.machine.view()).finish_non_exhaustive()
    }
}

impl<M> Replicated<M> {
    /// Opens the candidate's replica log, recovers the machine from it, binds the
    /// replication port and starts the link; returns the state the log's snapshot holds
    /// (the committed events after it come back through the first drains).
    pub(crate) fn open(
        setting: &Replication,
        config: MbdConfig,
        auth: Arc<Authenticator>,
        snapshot_every: u64,
        leader_seen_at_ms: Option<u64>,
        journal: &Journal,
    ) -> Result<(Replicated<M>, Mbd), ShellError> {
        lava_shell::startup::create_private_dir(&setting.dir, "create the candidate's folder")?;
        let (log, recovered, report) =
            ReplicaLog::open(&setting.dir, REPLICA_LOG_NAME, crate::codec::LOG_FORMATS)
                .map_err(|error| ShellError::Replica(format!("{}: {error}", setting.dir.display())))?;
        lava_shell::startup::log_open_report(&setting.dir, &report, "replica log");
        let snapshot_index = recovered.snapshot.as_ref().map_or(0, |s| s.0);
        let mut derived = Derived::open(&setting.dir, journal.appended_through())?;
        let mut install_at_start = false;
        if let Some((index, _, data)) = recovered.snapshot.as_ref().filter(|s| s.0 > derived.written()) {
            // Kept, but not recorded in lsb.events before the last stop (crate::derived).
            derived.installed(*index, data, journal);
            install_at_start = true;
        }
        let n = setting.candidates.len() as u64;
        let machine = Machine::recover(
            Config::new(setting.id, n),
            Deferred::default(),
            recovered.records,
            recovered.snapshot,
        )
        .map_err(|error| ShellError::Replica(format!("{}: {error}", setting.dir.display())))?;
        let addrs: Vec<SocketAddr> = setting.candidates.iter().map(|(_, addr)| *addr).collect();
        let own = addrs[setting.id as usize - 1];
        let std_listener = std::net::TcpListener::bind(own)
            .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
            .map_err(|error| ShellError::Replica(format!("replication port {own}: {error}")))?;
        let listener = tokio::net::TcpListener::from_std(std_listener)
            .map_err(|error| ShellError::Replica(format!("replication port {own}: {error}")))?;
        let link = Link::start(LinkConfig::for_candidates(setting.id, addrs, auth), listener);
        let mut tick = tokio::time::interval(REPLICA_TICK);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut replicated = Replicated {
            machine,
            log,
            link,
            tick,
            candidates: setting.candidates.clone(),
            config: config.clone(),
            snapshot_every: snapshot_every.max(1),
            snapshot_index,
            derived,
            started: Instant::now(),
            // The process before this one (`exec`) knew a master then.
            leader_seen: leader_seen_at_ms.and_then(|at_ms| {
                Instant::now().checked_sub(Duration::from_millis(system_now_ms().saturating_sub(at_ms)))
            }),
            no_leader_since: Some(Instant::now()),
            derived_synced: None,
            compact_retry_at: None,
            hand_over: HandOverPolicy::default(),
        };
        let mut mbd = Mbd::new(config)?;
        replicated.apply_ops(&mut mbd, false)?;
        if install_at_start {
            // The state is the snapshot's now (its entries come in the first drains).
            let rebuilt =
                crate::acct::reconcile(&setting.dir, &mbd.finished_acct_records()).map_err(|error| {
                    ShellError::Replica(format!("{}: lsb.acct: {error}", setting.dir.display()))
                })?;
            if rebuilt > 0 {
                tracing::warn!(
                    rebuilt,
                    "lsb.acct lacked records of the finished jobs of a snapshot: appended"
                );
            }
        }
        tracing::info!(
            candidate = setting.id,
            candidates = n,
            snapshot = snapshot_index,
            "replicated event log opened: following until elected"
        );
        Ok((replicated, mbd))
    }

    /// The next tick, message from a candidate, or end of the leader's fsync.
    pub(crate) async fn next(&mut self) -> ReplInput {
        tokio::select! {
            _ = self.tick.tick() => ReplInput::Tick,
            message = self.link.recv() => ReplInput::Message(message),
            persisted = self.log.persisted() => ReplInput::Persisted(persisted),
        }
    }

    /// Hands the input to the machine, and every message already waiting after it (up to
    /// [`MESSAGES_TURN_MAX`]), so that the drain that follows makes them durable with one
    /// fsync (a follower receives one append per leader's turn).
    pub(crate) fn input(&mut self, input: ReplInput) -> Result<(), ShellError> {
        match input {
            ReplInput::Tick => self.machine.tick(),
            ReplInput::Message(bytes) => self.receive(&bytes),
            ReplInput::Persisted(persisted) => {
                if let Some(ticket) = persisted.map_err(|error| ShellError::Replica(error.to_string()))? {
                    self.machine.persisted(ticket);
                }
            }
        }
        self.take_waiting();
        Ok(())
    }

    /// Hands the machine every message from a candidate already waiting (up to
    /// [`MESSAGES_TURN_MAX`]). Before a turn's drains on the leader, so that the answers of
    /// what the followers acknowledged meanwhile are released before the turn's own fsync,
    /// not after it.
    pub(crate) fn take_waiting(&mut self) {
        for _ in 0..MESSAGES_TURN_MAX {
            let Some(bytes) = self.link.try_recv() else { break };
            self.receive(&bytes);
        }
    }

    /// A message from a candidate; one the machine refuses is logged and dropped.
    fn receive(&mut self, bytes: &[u8]) {
        if let Err(error) = self.machine.receive(bytes) {
            tracing::warn!("replication message dropped: {error}");
        }
    }

    /// Applies what the machine did to the application to `mbd`, in order; `word`: each
    /// event's text view line is noted for `lsb.events` ([`crate::derived`]).
    pub(crate) fn apply_ops(&mut self, mbd: &mut Mbd, word: bool) -> Result<(), ShellError> {
        for op in std::mem::take(&mut self.machine.app_mut().ops) {
            match op {
                Op::Restore(None) => *mbd = Mbd::new(self.config.clone())?,
                Op::Restore(Some(bytes)) => {
                    let state = decode_snapshot_state(&bytes).map_err(|error| {
                        ShellError::Replica(format!("a snapshot does not decode: {error}"))
                    })?;
                    *mbd = Mbd::from_snapshot(self.config.clone(), state)?;
                }
                Op::Apply { index, data } => {
                    let event: Event = lava_xdr::from_bytes(&data, &EVENT_LIMITS).map_err(|error| {
                        ShellError::Replica(format!("entry {index} does not decode as an event: {error}"))
                    })?;
                    let finished = event.finishes().map(|(job, _)| job);
                    if word {
                        self.derived.note_line(index, crate::events_view::line(&event));
                    }
                    let replayed = mbd
                        .replay(event)
                        .map_err(|error| ShellError::Replica(format!("entry {index}: {error}")))?;
                    if let Some(job) = finished {
                        let line = mbd.job(job).and_then(|job| job.acct_record());
                        self.derived.note_finish(index, line.map(|record| record.to_line()));
                    }
                    if let Replayed::Ignored(what) = replayed {
                        tracing::debug!(index, "committed event changed nothing: {what}");
                    }
                }
            }
        }
        Ok(())
    }

    /// After the drains of a turn: the snapshot a candidate was caught up by is recorded in
    /// `lsb.events` once it can be, `lsb.events` switches (a snapshot of the state) only when
    /// the state is exactly what it holds (nothing outstanding, nothing to record), and its
    /// appended events are made durable ([`crate::derived`]).
    pub(crate) fn after_drains(&mut self, mbd: &Mbd, journal: &mut Journal) -> Result<(), ShellError> {
        self.derived.install_pending(journal)?;
        if !self.derived.installing()
            && self.machine.outstanding() == 0
            && self.derived.written() == self.machine.applied()
        {
            journal.maybe_snapshot(mbd);
        }
        // `lsb.events` is derived from the replica log, which is the durable truth: its
        // fsyncs are gathered, at most one starting per `DERIVED_SYNC_PACE` (the loop's
        // ticks bring the last of a burst), instead of one in every committed round. In
        // between, what the turn appended is written to the file, so that a process that
        // dies loses none of it (a machine that dies loses the unsynced part, which the
        // next start rewrites from the replica log) and `bhist` shows it at once.
        let now = Instant::now();
        if self.derived_synced.is_none_or(|at| now.saturating_duration_since(at) >= DERIVED_SYNC_PACE) {
            journal.start_sync();
            self.derived_synced = Some(now);
        } else {
            match journal.write_out() {
                Ok(()) => {}
                // On a full disk the events stay buffered, in order, for the next sync, which
                // waits for room as a single master's does (docs/operations.md, "A full disk").
                Err(error) if error.is_no_space() => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// The leader's snapshot `data` at `index` replaced the state (a `KeepSnapshot` step):
    /// `lsb.events` records it, and `lsb.acct` gets the records of its finished jobs it lacks
    /// instead of the lines still waiting, which were of finishes the snapshot holds
    /// ([`crate::derived`]).
    pub(crate) fn installed(
        &mut self,
        index: u64,
        data: &[u8],
        journal: &Journal,
        acct_held: &mut std::collections::VecDeque<(u64, String)>,
        acct: Option<&crate::acct::AcctLog>,
    ) -> Result<(), ShellError> {
        self.derived.installed(index, data, journal);
        if let Some(acct) = acct {
            acct_held.clear();
            let state = decode_snapshot_state(data)
                .map_err(|error| ShellError::Replica(format!("a snapshot does not decode: {error}")))?;
            acct.reconcile(Mbd::from_snapshot(self.config.clone(), state)?.finished_acct_records());
        }
        Ok(())
    }

    /// A `Persist` step: the leader starts it and goes on, so that its followers'
    /// acknowledgements may commit the entries while its own fsync runs ([`Replicated::next`]
    /// reports the end); every other candidate makes the records durable at once.
    pub(crate) async fn persist_step(
        &mut self,
        ticket: u64,
        records: Vec<lava_replog::record::Record>,
    ) -> Result<(), ShellError> {
        let Replicated { log, machine, .. } = self;
        log.persist_step(machine, ticket, records)
            .await
            .map_err(|error| ShellError::Replica(error.to_string()))
    }

    /// A clean stop: waits until every `Persist` started is durable, then keeps what this
    /// candidate knows committed for its next start (lava-replog's `commit_record`).
    pub(crate) async fn stop(&mut self) -> Result<(), ShellError> {
        let Replicated { log, machine, .. } = self;
        log.stop(machine).await.map_err(|error| ShellError::Replica(error.to_string()))
    }

    /// Keeps the leader's snapshot as the newest (a `KeepSnapshot` step).
    pub(crate) async fn keep_snapshot(
        &mut self,
        index: u64,
        term: u64,
        data: Vec<u8>,
    ) -> Result<(), ShellError> {
        self.snapshot_index = index;
        self.log
            .keep_snapshot(index, term, data, Vec::new())
            .await
            .map_err(|error| ShellError::Replica(error.to_string()))
    }

    /// Sends a message to a candidate (a `Send` step).
    pub(crate) fn send(&self, to: u64, message: Vec<u8>) {
        self.link.send(to, message);
    }

    /// Takes a snapshot of `mbd` when `--snapshot-events` events were applied since the
    /// last, or the applied entries held in memory outweigh it, and no proposal is
    /// outstanding: kept durably first, then its record.
    /// `lsb.events` is brought to a checkpoint first, so that the entries past it stay in
    /// the replica log ([`crate::derived`]).
    pub(crate) async fn maybe_compact(&mut self, mbd: &Mbd, journal: &mut Journal) -> Result<(), ShellError> {
        // Outstanding proposals first: the weight is summed over the entries not applied.
        // None while the disk is full: a snapshot needs room too.
        if self.machine.outstanding() > 0
            || self.derived.installing()
            || self.log.stalled()
            || self.compact_retry_at.is_some_and(|at| Instant::now() < at)
        {
            return Ok(());
        }
        let due = self.machine.applied() >= self.snapshot_index + self.snapshot_every
            || self.machine.log_outweighs_snapshot();
        if !due {
            return Ok(());
        }
        match self.derived.checkpoint(journal).await {
            Ok(()) => {}
            // Compacted later, with room again: the replica log keeps every entry meanwhile.
            Err(error) if error.is_no_space() => {
                self.compaction_waits_for_room(&error);
                return Ok(());
            }
            Err(error) => return Err(error),
        }
        self.machine.app_mut().snapshot = crate::codec::encode_snapshot_state(&mbd.snapshot());
        let Some(compaction) = self.machine.compact() else { return Ok(()) };
        self.machine.app_mut().snapshot = Vec::new();
        let tail =
            self.machine.replica().entries_after(compaction.index).map_err(|error| {
                ShellError::Replica(format!("compaction at {}: {error}", compaction.index))
            })?;
        let kept =
            match self.log.keep_snapshot(compaction.index, compaction.term, compaction.data, tail).await {
                Ok(()) => self.log.persist(vec![compaction.record]).await,
                Err(error) => Err(error),
            };
        match kept {
            Ok(()) => tracing::info!(index = compaction.index, "replicated log compacted behind a snapshot"),
            // Made all the same: a snapshot that found the disk full waits in the log, its
            // record behind it, and a record that did waits in the log's buffer; both are
            // written, in order, once there is room (lava-shell's `ReplicaLog`).
            Err(error) if error.is_no_space() => tracing::warn!(
                index = compaction.index,
                "replicated log compacted behind a snapshot, written once its disk has room"
            ),
            Err(error) => return Err(ShellError::Replica(error.to_string())),
        }
        self.compact_retry_at = None;
        self.snapshot_index = compaction.index;
        Ok(())
    }

    /// A leader whose disk is full (`full`: its replica log waits for room, or its file
    /// system fell below the reserve) hands the leadership to a caught-up follower, so that
    /// two healthy candidates serve new jobs instead of a leader that refuses them
    /// (docs/failover.md, "A full disk on a candidate"), when lava-replog's
    /// [`HandOverPolicy`] says so (the simulation's shell follows the same policy). lava-replog
    /// hands over only when the caught-up followers can elect one without this candidate's
    /// vote.
    pub(crate) fn hand_over_if_full(&mut self, full: bool) {
        let now_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if let Some(to) = self.hand_over.turn(&mut self.machine, full, now_ms) {
            tracing::warn!(
                to = self.name_of(to).unwrap_or("?"),
                "the event log's disk is full: the leadership goes to a caught-up candidate"
            );
        }
    }

    /// Whether the replica log waits for room on its disk (nothing it holds back is
    /// acknowledged meanwhile: lava-shell's `ReplicaLog`).
    pub(crate) fn stalled(&self) -> bool {
        self.log.stalled()
    }

    /// A compaction found the disk full: tried again in a second; said once until one is made.
    fn compaction_waits_for_room(&mut self, error: &dyn std::fmt::Display) {
        if self.compact_retry_at.is_none() {
            tracing::warn!("replicated log not compacted, tried again every second: {error}");
        }
        self.compact_retry_at = Some(Instant::now() + lava_shell::replication::NO_SPACE_RETRY);
    }

    /// When this candidate last knew a leader, in milliseconds since the epoch (handed to the
    /// process that replaces it).
    pub(crate) fn leader_seen_at_ms(&self) -> Option<u64> {
        let ago = self.leader_seen?.elapsed();
        Some(system_now_ms().saturating_sub(u64::try_from(ago.as_millis()).unwrap_or(u64::MAX)))
    }

    /// After a turn's drains: notes whether this candidate knows a leader now.
    pub(crate) fn note_leader(&mut self) {
        let now = Instant::now();
        if self.machine.leader().is_some() {
            self.leader_seen = Some(now);
            self.no_leader_since = None;
        } else {
            self.no_leader_since.get_or_insert(now);
        }
    }

    /// What a stale answer is made of, when this candidate may give one: it has known no
    /// leader for [`stale_after`] (a candidate that knows one redirects to it instead). The
    /// state then holds exactly the committed entries applied through `applied_index`
    /// (see the module doc).
    pub(crate) fn stale_state(&self, now: Instant) -> Option<lava_batch_wire::StaleState> {
        let since = self.no_leader_since?;
        if self.machine.leader().is_some()
            || now.saturating_duration_since(since) < stale_after(self.n_candidates())
        {
            return None;
        }
        let view = self.machine.view();
        let ms = |earlier: Instant| {
            u64::try_from(now.saturating_duration_since(earlier).as_millis()).unwrap_or(u64::MAX)
        };
        Some(lava_batch_wire::StaleState {
            host: self.name_of(view.id).unwrap_or("?").to_owned(),
            applied_index: self.machine.applied(),
            commit_index: view.commit,
            leader_seen_ms_ago: self.leader_seen.map_or(lava_batch_wire::STALE_NEVER, ms),
            up_ms: ms(self.started),
        })
    }

    /// The address of candidate `id` (where its replication port listens).
    pub(crate) fn addr_of(&self, id: u64) -> Option<std::net::IpAddr> {
        self.candidates.get(usize::try_from(id).ok()?.checked_sub(1)?).map(|(_, addr)| addr.ip())
    }

    /// How many master candidates there are.
    pub(crate) fn n_candidates(&self) -> usize {
        self.candidates.len()
    }

    /// The name of candidate `id`.
    pub(crate) fn name_of(&self, id: u64) -> Option<&str> {
        self.candidates.get(usize::try_from(id).ok()?.checked_sub(1)?).map(|(name, _)| name.as_str())
    }

    /// On the leader, the log index each candidate holds, as `candidate.<rank>.<name>`
    /// counters (`badmin showstatus` prints them as the candidates' block).
    /// A candidate that does not lead knows only its own (a stale `badmin showstatus`).
    pub(crate) fn candidates(&self) -> Vec<(String, u64)> {
        let view = self.machine.view();
        let progress = self.machine.replica().progress().unwrap_or_else(|| vec![(view.id, view.last_index)]);
        progress
            .into_iter()
            .filter_map(|(id, held)| Some((format!("candidate.{id}.{}", self.name_of(id)?), held)))
            .collect()
    }

    /// The gauges `badmin showstatus` and the metrics show.
    pub(crate) fn gauges(&self) -> Vec<(&'static str, u64)> {
        let view = self.machine.view();
        let counters = self.link.counters();
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let log = self.log.stats();
        vec![
            ("replica.candidate", view.id),
            ("replica.candidates", self.n_candidates() as u64),
            ("replica.term", view.term),
            ("replica.leader", view.leader.unwrap_or(0)),
            ("replica.serving", u64::from(self.machine.is_serving())),
            ("replica.commit_index", view.commit),
            ("replica.applied_index", view.applied),
            ("replica.last_index", view.last_index),
            ("replica.snapshot_index", self.snapshot_index),
            ("replica.outstanding", self.machine.outstanding() as u64),
            ("replica.held_answers", self.machine.held() as u64),
            ("replica.log_fsyncs", log.n_fsyncs),
            ("replica.link_sent", load(&counters.sent)),
            ("replica.link_send_dropped", load(&counters.send_dropped)),
            ("replica.link_received", load(&counters.received)),
            ("replica.link_refused", load(&counters.refused)),
        ]
    }

    /// Takes the machine's next steps.
    pub(crate) fn drain(&mut self) -> Vec<Step<M>> {
        self.machine.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a candidate answers stale only after twice the longest election timeout of the
    // list: 3.6 s for three candidates, 5.2 s for five.
    #[test]
    fn stale_answers_wait_out_an_election() {
        assert_eq!(stale_after(3), Duration::from_millis(3_600));
        assert_eq!(stale_after(5), Duration::from_millis(5_200));
    }
}
