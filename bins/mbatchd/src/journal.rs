//! `lsb.events`: opening the log, rebuilding the state from it (shell contract
//! step 1), appending with group commit (step 3), and snapshots (step 7).
//!
//! # Files
//! The log lives in `$LSB_SHAREDIR/<cluster>/logdir` (created with mode 0700),
//! as `lava-eventlog` segments named `lsb.events.*`, its snapshots and its
//! writer lock; a second mbatchd on the same folder is refused by the lock.
//!
//! # Group commit
//! The machinery is `lava-shell`'s [`GroupCommit`], shared with the coordinator's
//! WAL; [`Journal`] adds the event encoding, the switch rule and the crash points.
//! [`Journal::append`] hands an encoded event to the log's buffer and returns
//! at once. [`Journal::start_sync`] starts one `wait_durable` on a blocking
//! thread for the newest appended position, unless one is already running;
//! while it runs, the event loop keeps stepping and appending, and when it
//! ends ([`JournalEvent::Durable`]) the next one covers everything appended
//! meanwhile — many steps, one fsync. The shell holds each step's messages
//! until [`Journal::durable_through`] reaches the last append before them.
//! A turn that appended only a few events ([`INLINE_SYNC_EVENTS_MAX`]) while no
//! sync runs makes them durable on the loop's own thread ([`Journal::sync_small`]):
//! there is little to overlap with, and the hand-off to a helper thread and back
//! costs two wake-ups on the chain of every job.
//!
//! # Crash points
//! `mbatchd.event_appended` after each append returns; `mbatchd.events_durable`
//! after a group commit of the loop ([`Journal::next`], [`Journal::sync_small`])
//! made events durable, before the shell releases what was held behind them.
//!
//! # Snapshots: switching the log
//! LSF's mbatchd switches `lsb.events` (starts a new file, the old one kept
//! aside) once it holds the events of `MAX_JOB_NUM` (lsb.params) finished jobs.
//! Ours does the same with its one mechanism, a snapshot: when the log holds,
//! beyond its newest snapshot, `MAX_JOB_NUM` job finishes (JOB_STATUS to DONE
//! or EXIT) or `--snapshot-events` events of any kind (a bound for a log that
//! grows without finishes), [`Journal::maybe_snapshot`] takes [`Mbd::snapshot`]
//! (which covers every event appended so far) and a blocking thread reads the
//! finished jobs' environments back from the disk (`history::finished_envs`,
//! for `brequeue`), encodes both (`codec::encode_snapshot`; recovery reads the
//! state alone), writes them with `write_snapshot` (which first waits until
//! those events are durable) and then prunes the segments it covers.
//! A snapshot copies the whole state on the loop and encodes it on a helper thread, so
//! with a large state (many pending or kept jobs) a due switch also waits, after a
//! snapshot that took [`SNAPSHOT_PACE_FROM`] or more, [`SNAPSHOT_PACE`] times as long
//! as that one took (the rule is checked again at each step, so at the next tick at the
//! latest): snapshots then take at most about a fifth of the time, and replay after a
//! crash reads correspondingly more records.
//! [`SwitchRule`] is that decision and [`Backlog`] what it counts; replay
//! counts the backlog of the log it reads, so a restart does not forget the
//! finishes logged before it, and `badmin reconfig` sets a new `MAX_JOB_NUM`
//! ([`Journal::set_max_job_num`]).

use std::path::Path;
use std::sync::Arc;

use lava_eventlog::{EventLog, Options};
use lava_mbd::{Event, IgnoredEvent, Mbd, MbdConfig, MbdSnapshot, Replayed};
use lava_shell::group_commit::{self, Finished, GroupCommit, SyncStats};
use lava_shell::startup;

use crate::ShellError;
use crate::codec::{
    EVENT_BYTES_MAX, EVENT_LIMITS, SNAPSHOT_BYTES_MAX, decode_snapshot_state, encode_into, encode_snapshot,
};

/// Snapshots that took at least this long make the next due one wait ("Snapshots" above).
const SNAPSHOT_PACE_FROM: std::time::Duration = std::time::Duration::from_millis(50);
/// The wait after such a snapshot, in multiples of its duration.
const SNAPSHOT_PACE: u32 = 4;

/// Group commits of at most this many events are made on the loop's thread
/// ([`Journal::sync_small`]).
pub const INLINE_SYNC_EVENTS_MAX: u64 = 4;

/// The log's name, as LSF names mbatchd's event file.
pub const EVENT_LOG_NAME: &str = "lsb.events";

/// Opens (creating if needed) the event log in `dir` and logs what opening
/// found: a torn tail that was cut off, rejected snapshots, leftover files.
pub fn open(dir: &Path) -> Result<Arc<EventLog>, ShellError> {
    startup::create_private_dir(dir, "create the event log folder")?;
    let mut options = Options::new(EVENT_LOG_NAME);
    options.record_bytes_max = EVENT_BYTES_MAX;
    options.snapshot_bytes_max = SNAPSHOT_BYTES_MAX;
    options.oldest_content_version = *crate::codec::LOG_FORMATS.start();
    options.content_version = *crate::codec::LOG_FORMATS.end();
    let (log, report) = EventLog::open(dir, options)?;
    startup::log_open_report(dir, &report, &format!("event log {EVENT_LOG_NAME}"));
    Ok(Arc::new(log))
}

/// When the log is switched (see the module doc): a snapshot is due once the log
/// holds, beyond its newest snapshot, `max_job_num` job finishes or
/// `snapshot_events` events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchRule {
    /// `MAX_JOB_NUM` of lsb.params (at least 1).
    pub max_job_num: u32,
    /// `--snapshot-events` (at least 1).
    pub snapshot_events: u64,
}

impl SwitchRule {
    /// Whether a log holding `backlog` beyond its newest snapshot is due a switch.
    pub fn is_due(&self, backlog: &Backlog) -> bool {
        backlog.n_finished >= u64::from(self.max_job_num) || backlog.n_events >= self.snapshot_events
    }
}

/// What the log holds beyond its newest snapshot, as [`SwitchRule`] counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Events of any kind.
    pub n_events: u64,
    /// Job finishes: JOB_STATUS records to DONE or EXIT, JOB_FORCE_EXIT records.
    pub n_finished: u64,
}

impl Backlog {
    /// Counts one more event of the log; `finishes`: it finishes a job
    /// ([`Event::finishes`]).
    pub fn add(&mut self, finishes: bool) {
        self.n_events += 1;
        self.n_finished += u64::from(finishes);
    }
}

/// The state rebuilt by [`recover`], and what the log holds beyond its snapshot.
#[derive(Debug)]
pub struct Recovered {
    /// The state.
    pub mbd: Mbd,
    /// The events replayed after the snapshot.
    pub backlog: Backlog,
    /// The events replay ignored.
    pub ignored: IgnoredEvents,
}

/// The logged events replay ignored ([`Replayed::Ignored`]: an event after
/// DONE/EXIT, a duplicated stage), counted, with the first one and its position.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IgnoredEvents {
    /// How many.
    pub count: u64,
    /// The first one, with its record's position.
    pub first: Option<(u64, IgnoredEvent)>,
}

/// Shell contract step 1: the newest snapshot (if any) and every event after
/// it, replayed in log order ([`Mbd::replay`]). The first record that does not
/// read, decode or replay stops recovery with an error naming its position (a
/// damaged record is named by file and byte offset by the log itself). An
/// event the logic ignores (after its job's DONE/EXIT, or a duplicated stage:
/// the protocol's replay rules) changed nothing and is no reason to stop: they
/// are counted, and one warning names how many and the first one.
pub fn recover(log: &EventLog, config: MbdConfig) -> Result<Recovered, ShellError> {
    let dir = log.dir().to_owned();
    let replay = log.replay()?;
    let snapshot_position = replay.snapshot.as_ref().map(|snapshot| snapshot.position.0);
    let mut mbd = match replay.snapshot {
        Some(snapshot) => {
            let position = snapshot.position.0;
            let problem = |problem: String| ShellError::Replay {
                dir: dir.clone(),
                what: "snapshot",
                position,
                problem,
            };
            let state: MbdSnapshot = decode_snapshot_state(&snapshot.bytes)
                .map_err(|error| problem(format!("does not decode: {error}")))?;
            Mbd::from_snapshot(config, state).map_err(|error| problem(error.to_string()))?
        }
        None => Mbd::new(config)?,
    };
    let mut backlog = Backlog::default();
    let mut ignored = IgnoredEvents::default();
    for record in replay.records {
        let (position, payload) = record?;
        let problem = |problem: String| ShellError::Replay {
            dir: dir.clone(),
            what: "record",
            position: position.0,
            problem,
        };
        let event: Event = lava_xdr::from_bytes(&payload, &EVENT_LIMITS)
            .map_err(|error| problem(format!("does not decode as an event: {error}")))?;
        backlog.add(event.finishes().is_some());
        // Replay has no further use for the event: its submission moves into the job.
        if let Replayed::Ignored(what) = mbd.replay(event).map_err(|error| problem(error.to_string()))? {
            ignored.count += 1;
            ignored.first.get_or_insert((position.0, what));
        }
    }
    if let Some((position, first)) = &ignored.first {
        tracing::warn!(
            ignored = ignored.count,
            first_position = position,
            first_job = %first.job,
            first_event = first.event,
            "replay ignored {} logged event(s) that their job's state already settles (after DONE/EXIT, \
             or a duplicated stage); the first, at position {position}: {first}",
            ignored.count
        );
    }
    tracing::info!(
        snapshot = snapshot_position,
        events = backlog.n_events,
        finished = backlog.n_finished,
        last_job_id = mbd.last_job_id(),
        "state rebuilt from the event log"
    );
    Ok(Recovered { mbd, backlog, ignored })
}

/// What a helper thread of the journal finished: every event up to a position is
/// durable, a snapshot was written (with what pruning removed), or writing one failed
/// (the log itself may still be fine; if it is not, the next append or fsync says so and
/// stops the daemon). A failed snapshot reads as its error's text.
pub type JournalEvent = Finished<String>;

/// The appending side of `lsb.events`; see the module doc.
#[derive(Debug)]
pub struct Journal {
    /// Appends, group commits and snapshots; `String`: why `history::finished_envs` failed.
    commit: GroupCommit<String>,
    rule: SwitchRule,
    /// What the log holds beyond the newest snapshot started.
    backlog: Backlog,
    /// How far the `lsb.events` text view got: a snapshot waits for it before the
    /// log prunes what it covers (`events_view`).
    view: Option<Arc<crate::events_view::Progress>>,
    /// When the snapshot being written was started.
    snapshot_started: Option<std::time::Instant>,
    /// A due snapshot waits until then ("Snapshots" above).
    next_snapshot_at: Option<std::time::Instant>,
}

impl From<group_commit::Error> for ShellError {
    fn from(error: group_commit::Error) -> ShellError {
        match error {
            group_commit::Error::Log(error) => ShellError::Log(error),
            helper @ group_commit::Error::Helper(_) => ShellError::Runtime(helper.to_string()),
        }
    }
}

impl Journal {
    /// The journal of an open, replayed log holding `backlog` beyond its
    /// snapshot: everything in it counts as durable. A snapshot is written when
    /// `rule` says it is due.
    pub fn new(log: Arc<EventLog>, rule: SwitchRule, backlog: Backlog) -> Journal {
        assert!(rule.snapshot_events > 0, "the command line refuses a snapshot interval of 0");
        assert!(rule.max_job_num > 0, "lava-conf refuses a MAX_JOB_NUM of 0");
        Journal {
            commit: GroupCommit::new(log),
            rule,
            backlog,
            view: None,
            snapshot_started: None,
            next_snapshot_at: None,
        }
    }

    /// Encodes and appends one event (not yet durable). An error means the
    /// log stopped: the caller must stop too (shell contract step 5).
    pub fn append(&mut self, event: &Event) -> Result<(), ShellError> {
        self.commit.append(|record| encode_into(event, record))?;
        self.backlog.add(event.finishes().is_some());
        lava_crash::point!("mbatchd.event_appended");
        Ok(())
    }

    /// Appends an event already encoded (`bytes`, its XDR encoding, as [`Journal::append`]
    /// would write it); `finishes` says whether it finishes a job ([`Event::finishes`]).
    /// A master candidate appends its committed entries so (`crate::derived`).
    pub fn append_encoded(&mut self, bytes: &[u8], finishes: bool) -> Result<(), ShellError> {
        self.commit.append(|record| record.extend_from_slice(bytes))?;
        self.backlog.add(finishes);
        lava_crash::point!("mbatchd.event_appended");
        Ok(())
    }

    /// Snapshots wait (up to `events_view::SNAPSHOT_WAIT`) for the text view to
    /// word what they cover before the log prunes it.
    pub fn wait_for_view(&mut self, view: Arc<crate::events_view::Progress>) {
        self.view = Some(view);
    }

    /// `badmin reconfig`: the `MAX_JOB_NUM` of lsb.params from now on (at least 1).
    pub fn set_max_job_num(&mut self, max_job_num: u32) {
        assert!(max_job_num > 0, "lava-conf refuses a MAX_JOB_NUM of 0");
        self.rule.max_job_num = max_job_num;
    }

    /// The position of the last event appended (0 when the log is empty).
    pub fn appended_through(&self) -> u64 {
        self.commit.appended_through()
    }

    /// How long the group commits took so far, for `badmin showstatus`.
    pub fn sync_latency(&self) -> SyncStats {
        self.commit.stats()
    }

    /// The event log's own counters (appends, fsyncs, positions).
    pub fn log_stats(&self) -> lava_eventlog::Stats {
        self.commit.log().stats()
    }

    /// Every event up to this position is durable.
    pub fn durable_through(&self) -> u64 {
        self.commit.durable_through()
    }

    /// The log's folder.
    pub fn log_dir(&self) -> &Path {
        self.commit.log().dir()
    }

    /// Starts making the appended events durable, unless that is already
    /// running (its end starts the next round) or there is nothing to do.
    pub fn start_sync(&mut self) {
        self.commit.start_sync();
    }

    /// Writes the events appended so far to the log's file without an fsync (a master
    /// candidate's `lsb.events` between two paced syncs, `crate::replicated`): they outlive
    /// a `kill -9`, and `bhist` reads them.
    pub fn write_out(&self) -> Result<(), ShellError> {
        self.commit.log().write_out()?;
        Ok(())
    }

    /// Makes the appended events durable on the calling thread, when they are at most
    /// [`INLINE_SYNC_EVENTS_MAX`] and no sync is running; says whether it did. The loop
    /// then waits for the fsync itself instead of handing it to a helper thread and being
    /// woken when it ends: for a small group commit the two hand-offs cost more than the
    /// loop could do meanwhile (docs/benchmarks.md, "Small group commits on the loop").
    pub fn sync_small(&mut self) -> Result<bool, ShellError> {
        let synced = self.commit.sync_small(INLINE_SYNC_EVENTS_MAX)?;
        if synced {
            lava_crash::point!("mbatchd.events_durable");
        }
        Ok(synced)
    }

    /// Writes `bytes` (a snapshot file's encoding) now as the state after every event up to
    /// `position`, unless a snapshot is being written (then says `false`: try again once it
    /// ended). A master candidate caught up by its leader's snapshot records the new state
    /// so (`crate::derived`); waits until `position` is durable first.
    pub fn write_snapshot_now(&mut self, position: u64, bytes: &[u8]) -> Result<bool, ShellError> {
        if self.commit.snapshot_running() {
            return Ok(false);
        }
        self.commit.log().write_snapshot(lava_eventlog::Position(position), bytes)?;
        self.backlog = Backlog::default();
        Ok(true)
    }

    /// Starts a snapshot if the log is due a switch ([`SwitchRule`]) and none
    /// is being written.
    pub fn maybe_snapshot(&mut self, mbd: &Mbd) {
        let position = self.commit.appended_through();
        if self.commit.snapshot_running() || !self.rule.is_due(&self.backlog) || position == 0 {
            return;
        }
        let now = std::time::Instant::now();
        if self.next_snapshot_at.is_some_and(|at| now < at) {
            return;
        }
        self.snapshot_started = Some(now);
        self.backlog = Backlog::default();
        let snapshot = mbd.snapshot();
        tracing::info!(position, "switching the event log: writing a snapshot");
        let view = self.view.clone();
        self.commit.start_snapshot(position, move |log| {
            if let Some(view) = view
                && !view.wait_for(position, crate::events_view::SNAPSHOT_WAIT)
            {
                tracing::error!(
                    position,
                    reached = view.reached(),
                    "the lsb.events text view is behind the snapshot: records it lacks may be pruned"
                );
            }
            // The finished jobs' environments go to disk with the snapshot
            // before the log prunes their JOB_NEW (`history::finished_envs`).
            let envs = crate::history::finished_envs(log, &snapshot)?;
            let bytes = encode_snapshot(&snapshot, &envs);
            tracing::debug!(position, bytes = bytes.len(), "writing a snapshot");
            Ok(bytes)
        });
    }

    /// The next thing a helper thread finished; pending while none runs.
    /// A failed fsync is an error: the daemon must stop.
    pub async fn next(&mut self) -> Result<JournalEvent, ShellError> {
        let finished = self.commit.next().await?;
        match &finished {
            Finished::Durable(_) => lava_crash::point!("mbatchd.events_durable"),
            Finished::SnapshotWritten { .. } | Finished::SnapshotFailed(_) => {
                let took = self.snapshot_started.take().map(|started| started.elapsed());
                self.next_snapshot_at = took
                    .filter(|took| *took >= SNAPSHOT_PACE_FROM)
                    .map(|took| std::time::Instant::now() + took * SNAPSHOT_PACE);
            }
            _ => {}
        }
        Ok(finished)
    }

    /// Makes every appended event durable (for a clean stop). No crash point here:
    /// `mbatchd.events_durable` marks the loop's group commits ([`Journal::next`],
    /// [`Journal::sync_small`]), not a clean stop's.
    pub async fn sync_all(&mut self) -> Result<(), ShellError> {
        self.commit.sync_all(|_| {}).await?;
        Ok(())
    }

    /// Waits for a running snapshot, makes everything durable, and closes the
    /// log (trimming preallocated space and releasing the writer lock).
    pub async fn close(self) -> Result<(), ShellError> {
        self.commit.close(|_| {}).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use lava_mbd::{Effect, Input};

    use super::tests_support::config;

    /// A rule that switches every `snapshot_events` events and never on finishes.
    fn every(snapshot_events: u64) -> SwitchRule {
        SwitchRule { max_job_num: u32::MAX, snapshot_events }
    }

    /// Steps MBD_START into the journal, as the shell does.
    fn start(mbd: &mut Mbd, journal: &mut Journal, now_ms: u64) {
        let mut effects = Vec::new();
        mbd.step(now_ms, Input::Start, &mut effects);
        for effect in effects {
            let Effect::Append(event) = effect else { panic!("MBD_START only appends") };
            journal.append(&event).expect("appends");
        }
        journal.start_sync();
        journal.maybe_snapshot(mbd);
    }

    // Goal: appends become durable through one background wait that covers
    // every step appended before it ends; a snapshot is written every N
    // events; a reopened log replays the snapshot plus the events after it.
    // Method: three starts with a snapshot every two events, then recover.
    #[tokio::test(flavor = "current_thread")]
    async fn group_commit_snapshot_and_recovery() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log_dir = dir.path().join("logdir");
        let log = open(&log_dir).expect("opens");
        let Recovered { mut mbd, backlog, .. } = recover(&log, config()).expect("an empty log recovers");
        assert_eq!(backlog, Backlog::default());
        let mut journal = Journal::new(log, every(2), backlog);
        start(&mut mbd, &mut journal, 1_000);
        start(&mut mbd, &mut journal, 2_000);
        assert_eq!(journal.appended_through(), 2);
        let mut snapshot_position = None;
        while journal.durable_through() < 2 || snapshot_position.is_none() {
            match journal.next().await.expect("no failure") {
                JournalEvent::Durable(position) => {
                    assert!(position <= journal.appended_through());
                    journal.start_sync();
                }
                JournalEvent::SnapshotWritten { position, .. } => snapshot_position = Some(position),
                JournalEvent::SnapshotFailed(error) => panic!("snapshot failed: {error}"),
                JournalEvent::NoSpace(error) => panic!("the test's disk is not full: {error}"),
            }
        }
        assert_eq!(snapshot_position, Some(2));
        start(&mut mbd, &mut journal, 3_000);
        journal.close().await.expect("closes");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&log_dir).expect("stat").permissions(),
        );
        assert_eq!(mode & 0o777, 0o700);

        let log = open(&log_dir).expect("reopens");
        assert_eq!(log.stats().snapshot_position, Some(lava_eventlog::Position(2)));
        let recovered = recover(&log, config()).expect("recovers");
        assert_eq!(recovered.mbd.snapshot(), mbd.snapshot());
        assert_eq!(recovered.backlog, Backlog { n_events: 1, n_finished: 0 });
        assert_eq!(Journal::new(log, every(2), recovered.backlog).appended_through(), 3);
    }

    // Goal: a turn's few events are made durable on the calling thread and counted like
    // any group commit; more events, or a sync already running, leave it to start_sync.
    // Method: 4 events (made durable inline), nothing pending, 5 events (left), then one
    // event while a background sync runs (left).
    #[tokio::test(flavor = "current_thread")]
    async fn small_group_commits_are_made_on_the_calling_thread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = open(&dir.path().join("logdir")).expect("opens");
        let Recovered { backlog, .. } = recover(&log, config()).expect("an empty log recovers");
        let mut journal = Journal::new(log, every(u64::MAX), backlog);
        let event = status_event(lava_batch_ll::JobStatus::Run);
        let append = |journal: &mut Journal, n: u64| {
            for _ in 0..n {
                journal.append(&event).expect("appends");
            }
        };
        append(&mut journal, INLINE_SYNC_EVENTS_MAX);
        assert!(journal.sync_small().expect("no failure"));
        assert_eq!(journal.durable_through(), INLINE_SYNC_EVENTS_MAX);
        assert_eq!(journal.sync_latency().count, 1);
        assert!(!journal.sync_small().expect("no failure"), "nothing is pending");

        append(&mut journal, INLINE_SYNC_EVENTS_MAX + 1);
        assert!(!journal.sync_small().expect("no failure"), "too many for the loop's thread");
        assert_eq!(journal.durable_through(), INLINE_SYNC_EVENTS_MAX);
        journal.start_sync();
        append(&mut journal, 1);
        assert!(!journal.sync_small().expect("no failure"), "a sync is running");
        let JournalEvent::Durable(position) = journal.next().await.expect("no failure") else {
            panic!("only a sync runs")
        };
        assert_eq!(position, 2 * INLINE_SYNC_EVENTS_MAX + 1);
        assert!(journal.sync_small().expect("no failure"), "the last event, once the sync ended");
        assert_eq!(journal.durable_through(), journal.appended_through());
        assert_eq!(journal.sync_latency().count, 3);
        journal.close().await.expect("closes");
    }

    // Goal: recovery goes through a log holding events the protocol's replay rules
    // ignore (a duplicated start accept, a second FINISH after DONE) instead of
    // refusing to start: the state is the live one, the events are counted (in the
    // backlog too, as the log holds them), and the first is kept with its position.
    // Method: a job run to DONE by the logic, its events appended with a copy of the
    // JOB_START_ACCEPT and of the JOB_STATUS DONE after each original; recover.
    #[test]
    fn recovery_counts_the_events_replay_ignores_and_goes_on() {
        use lava_batch_ll::{HostName, SubmitSpec, UserName};
        use lava_batch_wire as wire;
        use lava_mbd::{Caller, ClientId, IgnoredWhy};

        let dir = tempfile::tempdir().expect("tempdir");
        let log = open(&dir.path().join("logdir")).expect("opens");
        let mut mbd = Mbd::new(config()).expect("valid config");
        let host = HostName::parse("test", "h1").expect("host");
        let user = UserName::parse("test", "alice").expect("user");
        let caller = Caller { uid: 1000, gid: 100, user, host: host.clone() };
        let request = wire::SubmitRequest {
            command: "true".into(),
            cwd: "/tmp".into(),
            home_dir: "/tmp".into(),
            n_slots: 1,
            from_host: "h1".into(),
            ..wire::SubmitRequest::default()
        };
        let spec = Box::new(SubmitSpec::try_from(request).expect("valid submission"));
        let job = wire::WireJobRef { job_id: 1, array_index: 0 };
        let outcome = wire::NewJobOutcome::Started { pid: 42, pgid: 42, job_status: 0x04 };
        let finish = wire::JobFinish {
            job,
            dispatch_seq: 1,
            pid: 42,
            wait_status: 0,
            finish_reason: wire::FINISH_NORMAL,
            end_time: 3,
            rusage: wire::ResourceUsage::default(),
        };
        let inputs = [
            Input::HostRegistered { host: host.clone(), n_cpus: 1 },
            Input::Submit {
                client: ClientId(1),
                request_id: wire::RequestId { high: 1, low: 1 },
                caller,
                spec,
            },
            Input::NewJobReply {
                host: host.clone(),
                reply: wire::NewJobReply { job, dispatch_seq: 1, outcome },
            },
            Input::JobFinish { host, msg: finish },
        ];
        let mut first_copy = None;
        for (n, input) in (1..).zip(inputs) {
            let mut effects = Vec::new();
            mbd.step(n * 1_000, input, &mut effects);
            for effect in effects {
                let Effect::Append(event) = effect else { continue };
                let bytes = crate::codec::encode(&event);
                log.append(&bytes).expect("appends");
                if matches!(event, Event::JobStartAccept(_) | Event::JobStatus(_)) {
                    let position = log.append(&bytes).expect("appends");
                    first_copy.get_or_insert(position.0);
                }
            }
        }
        log.sync().expect("syncs");

        let recovered = recover(&log, config()).expect("recovers");
        assert!(recovered.mbd.same_durable_state(&mbd));
        let job = recovered.mbd.job(lava_batch_ll::JobRef::new(1, 0).expect("job 1")).expect("job 1");
        assert_eq!(job.status(), lava_batch_ll::JobStatus::Done);
        assert_eq!(recovered.backlog, Backlog { n_events: 6, n_finished: 2 });
        assert_eq!(recovered.ignored.count, 2);
        let (position, first) = recovered.ignored.first.expect("the first is kept");
        assert_eq!(Some(position), first_copy);
        assert_eq!((first.event, first.why), ("JOB_START_ACCEPT", IgnoredWhy::DuplicateStage));
    }

    /// JOB_STATUS of job 1 to `status`, with a finish when it is DONE or EXIT.
    fn status_event(status: lava_batch_ll::JobStatus) -> Event {
        let finish = status.is_finished().then(|| lava_mbd::event::FinishRecord {
            wait_status: 0,
            finish_reason: lava_batch_wire::FINISH_NORMAL,
            end_time_ms: 2_000,
            rusage: lava_batch_wire::ResourceUsage::default(),
            pid: 42,
        });
        Event::JobStatus(lava_mbd::event::JobStatusRecord {
            job: lava_batch_ll::JobRef::new(1, 0).expect("job 1"),
            status,
            reason: String::new(),
            time_ms: 2_000,
            finish,
        })
    }

    // Goal: the backlog counts every event and, as finishes, exactly the JOB_STATUS
    // records to DONE or EXIT; the log is due a switch at MAX_JOB_NUM finishes or at
    // --snapshot-events events, whichever comes first, and not before.
    // Method: count a few events, then ask the rule at and below each bound.
    #[test]
    fn max_job_num_finishes_or_snapshot_events_switch_the_log() {
        use lava_batch_ll::JobStatus;
        let mut backlog = Backlog::default();
        for status in [JobStatus::Run, JobStatus::Done, JobStatus::Ssusp, JobStatus::Exit] {
            backlog.add(status_event(status).finishes().is_some());
        }
        assert_eq!(backlog, Backlog { n_events: 4, n_finished: 2 });
        let rule = |max_job_num, snapshot_events| SwitchRule { max_job_num, snapshot_events };
        assert!(rule(2, 100).is_due(&backlog), "MAX_JOB_NUM finishes");
        assert!(!rule(3, 100).is_due(&backlog), "one finish short");
        assert!(rule(1000, 4).is_due(&backlog), "--snapshot-events events");
        assert!(!rule(1000, 5).is_due(&backlog), "one event short");
        assert!(!rule(1, 1).is_due(&Backlog::default()), "an empty backlog never");
    }
}

/// What the tests of the journal and of the history share.
#[cfg(test)]
pub(crate) mod tests_support {
    use lava_batch_ll::{HostName, QueueName};
    use lava_mbd::{HostConfig, MbdConfig, QueueConfig};

    /// One host `h1` and the default queue `normal`.
    pub(crate) fn config() -> MbdConfig {
        let host = HostName::parse("test", "h1").expect("host");
        let mut config = MbdConfig::new("t", host.clone());
        let queue = QueueName::parse("test", "normal").expect("queue");
        config.queues.push(QueueConfig { default: true, ..QueueConfig::new(queue, 30) });
        config.hosts.push(HostConfig::new(host, None));
        config
    }
}
