//! The WAL `coord.wal`: opening it, rebuilding the state from it (shell
//! contract step 1), appending with group commit (step 3), and snapshots
//! (step 5). Adapted from mbatchd's journal, which has the same shape.
//!
//! # Files
//! The WAL lives in `$LSB_SHAREDIR/<cluster>/coord` (created with mode 0700),
//! as `lava-eventlog` segments named `coord.wal.*`, its snapshots and its
//! writer lock; a second coordinator on the same folder is refused by the lock.
//!
//! # Group commit
//! [`Journal::append`] hands an encoded event to the log's buffer and returns
//! at once. [`Journal::start_sync`] starts one `wait_durable` on a blocking
//! thread for the newest appended position, unless one is already running;
//! while it runs, the event loop keeps stepping and appending, and when it
//! ends ([`JournalEvent::Durable`]) the next one covers everything appended
//! meanwhile — many steps, one fsync. The shell holds each step's messages
//! until [`Journal::durable_through`] reaches the last append before them.
//!
//! # Snapshots
//! Every `--snapshot-events` events, [`Journal::maybe_snapshot`] encodes
//! [`Coord::snapshot`] (which covers every event appended so far) and a blocking
//! thread writes it with `write_snapshot` (which first waits until those events
//! are durable) and then prunes the segments it covers.

use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::sync::Arc;

use lava_coord_logic::{Coord, CoordConfig, CoordSnapshot, Event};
use lava_eventlog::{EventLog, OpenReport, Options, Position, PruneReport};
use tokio::task::JoinHandle;

use crate::ShellError;
use crate::codec::{EVENT_BYTES_MAX, EVENT_LIMITS, SNAPSHOT_BYTES_MAX, SNAPSHOT_LIMITS, encode, encode_into};

/// The WAL's name.
pub const EVENT_LOG_NAME: &str = "coord.wal";

/// What the group commits cost, for the status: rounds of `wait_durable` the loop waited
/// for, their wall time, and the events they made durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncStats {
    /// Group commits finished.
    pub count: u64,
    /// Their total time, in µs.
    pub total_us: u64,
    /// The longest, in µs.
    pub max_us: u64,
    /// Events they made durable.
    pub events: u64,
}

/// Opens (creating if needed) the event log in `dir` and logs what opening
/// found: a torn tail that was cut off, rejected snapshots, leftover files.
pub fn open(dir: &Path) -> Result<Arc<EventLog>, ShellError> {
    // The parents (LSB_SHAREDIR/<cluster>) are shared with the other daemons:
    // only the WAL's own folder is private.
    if let Some(parent) = dir.parent() {
        DirBuilder::new().recursive(true).mode(0o755).create(parent).map_err(|source| ShellError::Io {
            what: "create the work folder",
            path: parent.to_owned(),
            source,
        })?;
    }
    DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .or_else(|error| match error.kind() {
            std::io::ErrorKind::AlreadyExists => Ok(()),
            _ => Err(error),
        })
        .map_err(|source| ShellError::Io { what: "create the WAL folder", path: dir.to_owned(), source })?;
    let mut options = Options::new(EVENT_LOG_NAME);
    options.record_bytes_max = EVENT_BYTES_MAX;
    options.snapshot_bytes_max = SNAPSHOT_BYTES_MAX;
    let (log, report) = EventLog::open(dir, options)?;
    log_open_report(dir, &report);
    Ok(Arc::new(log))
}

fn log_open_report(dir: &Path, report: &OpenReport) {
    for finding in report.findings() {
        if finding.warning {
            tracing::warn!(dir = %dir.display(), "WAL {EVENT_LOG_NAME}: {}", finding.text);
        } else {
            tracing::info!(dir = %dir.display(), "WAL {EVENT_LOG_NAME}: {}", finding.text);
        }
    }
}

/// Shell contract step 1: the newest snapshot (if any) and every event after
/// it, applied in log order. The first record that does not read, decode or
/// apply stops recovery with an error naming its position (a damaged record
/// is named by file and byte offset by the log itself); nothing is skipped.
pub fn recover(log: &EventLog, config: CoordConfig) -> Result<Coord, ShellError> {
    let dir = log.dir().to_owned();
    let replay = log.replay()?;
    let snapshot_position = replay.snapshot.as_ref().map(|snapshot| snapshot.position.0);
    let mut coord = match replay.snapshot {
        Some(snapshot) => {
            let position = snapshot.position.0;
            let problem = |problem: String| ShellError::Replay {
                dir: dir.clone(),
                what: "snapshot",
                position,
                problem,
            };
            let state: CoordSnapshot = lava_xdr::from_bytes(&snapshot.bytes, &SNAPSHOT_LIMITS)
                .map_err(|error| problem(format!("does not decode: {error}")))?;
            Coord::from_snapshot(config, state).map_err(|error| problem(error.to_string()))?
        }
        None => Coord::new(config),
    };
    let mut n_events = 0u64;
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
        coord.apply_owned(event).map_err(|error| problem(error.to_string()))?;
        n_events += 1;
    }
    tracing::info!(
        snapshot = snapshot_position,
        events = n_events,
        tasks = coord.n_tasks(),
        "state rebuilt from the WAL"
    );
    // The state hash reads every task (a second or so for millions): only when asked for.
    if tracing::enabled!(tracing::Level::DEBUG) {
        tracing::debug!(
            state_hash = format_args!("{:016x}", coord.state_hash()),
            "state rebuilt from the WAL"
        );
    }
    Ok(coord)
}

/// What a helper thread of the journal finished.
#[derive(Debug)]
pub enum JournalEvent {
    /// Every event up to and including this position is durable.
    Durable(u64),
    /// A snapshot covering events up to this position was written, then the log pruned.
    SnapshotWritten {
        /// The last position the snapshot covers.
        position: u64,
        /// What pruning removed.
        prune: PruneReport,
    },
    /// Writing a snapshot or pruning failed; the log itself may still be fine
    /// (if it is not, the next append or fsync says so and stops the daemon).
    SnapshotFailed(lava_eventlog::Error),
}

/// The appending side of the WAL; see the module doc.
#[derive(Debug)]
pub struct Journal {
    log: Arc<EventLog>,
    /// The position of the last event appended (0: none yet).
    appended_through: u64,
    /// Every event up to this position is durable.
    durable_through: u64,
    /// The running `wait_durable`, returning the position it made durable.
    sync: Option<JoinHandle<Result<u64, lava_eventlog::Error>>>,
    snapshot_events: u64,
    events_since_snapshot: u64,
    /// The running snapshot write and prune.
    snapshot: Option<JoinHandle<Result<(u64, PruneReport), lava_eventlog::Error>>>,
    /// The encoding buffer, reused by every append.
    record: Vec<u8>,
    /// When the running `wait_durable` started, and the durable position before it.
    sync_started: Option<(std::time::Instant, u64)>,
    sync_stats: SyncStats,
}

impl Journal {
    /// The journal of an open, replayed log: everything in it counts as
    /// durable. A snapshot is written every `snapshot_events` events.
    pub fn new(log: Arc<EventLog>, snapshot_events: u64) -> Journal {
        assert!(snapshot_events > 0, "the command line refuses a snapshot interval of 0");
        let end = log.stats().next_position.0 - 1;
        Journal {
            log,
            appended_through: end,
            durable_through: end,
            sync: None,
            snapshot_events,
            events_since_snapshot: 0,
            snapshot: None,
            record: Vec::new(),
            sync_started: None,
            sync_stats: SyncStats::default(),
        }
    }

    /// Encodes and appends one event (not yet durable). An error means the
    /// log stopped: the caller must stop too (shell contract step 5).
    pub fn append(&mut self, event: &Event) -> Result<(), ShellError> {
        self.record.clear();
        encode_into(event, &mut self.record);
        let position = self.log.append(&self.record)?;
        assert_eq!(position.0, self.appended_through + 1, "positions are handed out in order, one writer");
        self.appended_through = position.0;
        self.events_since_snapshot += 1;
        lava_crash::point!("coordinator.wal_appended");
        Ok(())
    }

    /// The position of the last event appended (0 when the log is empty).
    pub fn appended_through(&self) -> u64 {
        self.appended_through
    }

    /// Every event up to this position is durable.
    pub fn durable_through(&self) -> u64 {
        self.durable_through
    }

    /// Starts making the appended events durable, unless that is already
    /// running (its end starts the next round) or there is nothing to do.
    pub fn start_sync(&mut self) {
        if self.sync.is_some() || self.appended_through <= self.durable_through {
            return;
        }
        let log = Arc::clone(&self.log);
        let target = self.appended_through;
        self.sync_started = Some((std::time::Instant::now(), self.durable_through));
        self.sync =
            Some(tokio::task::spawn_blocking(move || log.wait_durable(Position(target)).map(|()| target)));
    }

    /// Starts a snapshot if `snapshot_events` events were appended since the
    /// last one and none is being written.
    pub fn maybe_snapshot(&mut self, coord: &Coord) {
        if self.snapshot.is_some()
            || self.events_since_snapshot < self.snapshot_events
            || self.appended_through == 0
        {
            return;
        }
        self.events_since_snapshot = 0;
        let bytes = encode(&coord.snapshot());
        let position = self.appended_through;
        let log = Arc::clone(&self.log);
        tracing::debug!(position, bytes = bytes.len(), "writing a snapshot");
        self.snapshot = Some(tokio::task::spawn_blocking(move || {
            log.write_snapshot(Position(position), &bytes)?;
            let prune = log.prune()?;
            Ok((position, prune))
        }));
    }

    /// The next thing a helper thread finished; pending while none runs.
    /// A failed fsync is an error: the daemon must stop.
    pub async fn next(&mut self) -> Result<JournalEvent, ShellError> {
        tokio::select! {
            synced = join(&mut self.sync) => {
                let target = synced??;
                self.synced(target);
                Ok(JournalEvent::Durable(target))
            }
            written = join(&mut self.snapshot) => match written? {
                Ok((position, prune)) => Ok(JournalEvent::SnapshotWritten { position, prune }),
                Err(error) => Ok(JournalEvent::SnapshotFailed(error)),
            },
        }
    }

    /// A `wait_durable` through `target` ended: durable, and counted.
    fn synced(&mut self, target: u64) {
        if let Some((started, from)) = self.sync_started.take() {
            let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            let stats = &mut self.sync_stats;
            stats.count += 1;
            stats.total_us = stats.total_us.saturating_add(us);
            stats.max_us = stats.max_us.max(us);
            stats.events += target.saturating_sub(from);
        }
        self.durable_through = self.durable_through.max(target);
        lava_crash::point!("coordinator.wal_durable");
    }

    /// What the group commits cost so far.
    pub fn sync_stats(&self) -> SyncStats {
        self.sync_stats
    }

    /// The event log's own figures: appends and fsyncs through this handle.
    pub fn log_stats(&self) -> lava_eventlog::Stats {
        self.log.stats()
    }

    /// The WAL on disk: (bytes of its segment files, how many there are, bytes of all its
    /// files: segments, snapshots, the lock). Preallocated space counts. A file that vanishes
    /// meanwhile (pruned) is skipped.
    pub fn disk_usage(&self) -> (u64, u64, u64) {
        let Ok(entries) = std::fs::read_dir(self.log.dir()) else { return (0, 0, 0) };
        let (mut segment_bytes, mut segments, mut all_bytes) = (0u64, 0u64, 0u64);
        let prefix = format!("{EVENT_LOG_NAME}.");
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            all_bytes += meta.len();
            let name = entry.file_name();
            let is_segment = name
                .to_str()
                .and_then(|name| name.strip_prefix(&prefix))
                .is_some_and(|number| !number.is_empty() && number.bytes().all(|byte| byte.is_ascii_digit()));
            if is_segment {
                segment_bytes += meta.len();
                segments += 1;
            }
        }
        (segment_bytes, segments, all_bytes)
    }

    /// Makes every appended event durable (for a clean stop).
    pub async fn sync_all(&mut self) -> Result<(), ShellError> {
        if self.sync.is_some() {
            let target = join(&mut self.sync).await??;
            self.synced(target);
        }
        self.start_sync();
        if self.sync.is_some() {
            let target = join(&mut self.sync).await??;
            self.synced(target);
        }
        Ok(())
    }

    /// Waits for a running snapshot, makes everything durable, and closes the
    /// log (trimming preallocated space and releasing the writer lock).
    pub async fn close(mut self) -> Result<(), ShellError> {
        if self.snapshot.is_some() {
            match join(&mut self.snapshot).await? {
                Ok((position, _)) => tracing::info!(position, "snapshot written"),
                Err(error) => tracing::warn!("snapshot not written: {error}"),
            }
        }
        self.sync_all().await?;
        let stats = self.log.stats();
        tracing::info!(appends = stats.n_appends, fsyncs = stats.n_fsyncs, "closing the event log");
        let log = self.log;
        let closed = tokio::task::spawn_blocking(move || match Arc::try_unwrap(log) {
            Ok(log) => log.close(),
            // Unreachable after the joins above; syncing is then the best left to do.
            Err(log) => log.sync(),
        });
        closed.await.map_err(|error| ShellError::Runtime(format!("event log helper thread: {error}")))??;
        Ok(())
    }
}

/// Awaits the task in `task`, if any (pending forever otherwise), and clears it.
async fn join<T>(task: &mut Option<JoinHandle<T>>) -> Result<T, ShellError> {
    let Some(handle) = task.as_mut() else {
        return std::future::pending().await;
    };
    let result = handle.await;
    *task = None;
    result.map_err(|error| ShellError::Runtime(format!("event log helper thread: {error}")))
}
