//! The WAL `coord.wal`: opening it, rebuilding the state from it (shell
//! contract step 1), appending with group commit (step 3), and snapshots
//! (step 5). The machinery is `lava-shell`'s [`GroupCommit`], shared with mbatchd's
//! `lsb.events`; [`Journal`] adds the event encoding, the snapshot interval and the
//! crash points.
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
//! [`Journal::commit`] is how the loop starts one: it first waits a short while for the
//! connections whose answers just went out (lava-shell's group commit, "Gathering before
//! a commit"), and makes a small group durable on the loop's own thread.
//!
//! # Snapshots
//! Every `--snapshot-events` events, [`Journal::maybe_snapshot`] encodes
//! [`Coord::snapshot`] (which covers every event appended so far) and a blocking
//! thread writes it with `write_snapshot` (which first waits until those events
//! are durable) and then prunes the segments it covers.
//!
//! # Crash points
//! `coordinator.wal_appended` after each append returns; `coordinator.wal_durable`
//! after each group commit made events durable ([`Journal::next`], [`Journal::commit`]
//! when it returns true, and each of the
//! commits [`Journal::sync_all`] and [`Journal::close`] wait for), before the answers
//! held behind them are released.

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;

use lava_coord_logic::{Coord, CoordConfig, CoordSnapshot, Event};
use lava_eventlog::{EventLog, Options};
use lava_shell::group_commit::{self, Finished, GroupCommit};
use lava_shell::startup;

use crate::ShellError;
use crate::codec::{EVENT_BYTES_MAX, EVENT_LIMITS, SNAPSHOT_BYTES_MAX, encode, encode_into};

/// The WAL's name.
pub const EVENT_LOG_NAME: &str = "coord.wal";

/// What the group commits cost, for the status: rounds of `wait_durable` the loop waited
/// for, their wall time, and the events they made durable.
pub use lava_shell::group_commit::SyncStats;

/// Opens (creating if needed) the event log in `dir` and logs what opening
/// found: a torn tail that was cut off, rejected snapshots, leftover files.
pub fn open(dir: &Path) -> Result<Arc<EventLog>, ShellError> {
    startup::create_private_dir(dir, "create the WAL folder")?;
    let mut options = Options::new(EVENT_LOG_NAME);
    options.record_bytes_max = EVENT_BYTES_MAX;
    options.snapshot_bytes_max = SNAPSHOT_BYTES_MAX;
    options.oldest_content_version = *crate::codec::LOG_FORMATS.start();
    options.content_version = *crate::codec::LOG_FORMATS.end();
    let (log, report) = EventLog::open(dir, options)?;
    startup::log_open_report(dir, &report, &format!("WAL {EVENT_LOG_NAME}"));
    Ok(Arc::new(log))
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
            let state: CoordSnapshot = crate::codec::decode_snapshot(&snapshot.bytes)
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

/// What a helper thread of the journal finished: every event up to a position is
/// durable, a snapshot was written (with what pruning removed), or writing one failed
/// (the log itself may still be fine; if it is not, the next append or fsync says so and
/// stops the daemon). Making a snapshot's bytes cannot fail here (`Infallible`).
pub type JournalEvent = Finished<Infallible>;

/// The appending side of the WAL; see the module doc.
#[derive(Debug)]
pub struct Journal {
    /// Appends, group commits and snapshots.
    commit: GroupCommit<Infallible>,
    snapshot_events: u64,
    events_since_snapshot: u64,
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
    /// The journal of an open, replayed log: everything in it counts as
    /// durable. A snapshot is written every `snapshot_events` events.
    pub fn new(log: Arc<EventLog>, snapshot_events: u64) -> Journal {
        assert!(snapshot_events > 0, "the command line refuses a snapshot interval of 0");
        Journal { commit: GroupCommit::new(log), snapshot_events, events_since_snapshot: 0 }
    }

    /// Encodes and appends one event (not yet durable). An error means the
    /// log stopped: the caller must stop too (shell contract step 5).
    pub fn append(&mut self, event: &Event) -> Result<(), ShellError> {
        self.commit.append(|record| encode_into(event, record))?;
        self.events_since_snapshot += 1;
        lava_crash::point!("coordinator.wal_appended");
        Ok(())
    }

    /// The position of the last event appended (0 when the log is empty).
    pub fn appended_through(&self) -> u64 {
        self.commit.appended_through()
    }

    /// Every event up to this position is durable.
    pub fn durable_through(&self) -> u64 {
        self.commit.durable_through()
    }

    /// Starts making the appended events durable, unless that is already
    /// running (its end starts the next round) or there is nothing to do.
    pub fn start_sync(&mut self) {
        self.commit.start_sync();
    }

    /// Makes the appended events durable now or soon (lava-shell's
    /// [`GroupCommit::commit`]): while `expected` connections are expected to send a
    /// request soon, waits for them up to the gather window; then commits on this thread
    /// when at most `inline_max` events wait (returns true: the answers held behind them
    /// may go), else on a helper thread, whose end [`next`](Self::next) reports. An error
    /// means the log stopped: the caller must stop too.
    pub fn commit(&mut self, expected: usize, inline_max: u64) -> Result<bool, ShellError> {
        let durable = self.commit.commit(expected, inline_max)?;
        if durable {
            lava_crash::point!("coordinator.wal_durable");
        }
        Ok(durable)
    }

    /// How long [`commit`](Self::commit) waits for expected connections at most (zero
    /// while commits are cheaper than lava-shell's `GATHER_MIN`).
    pub fn gather_window(&self) -> std::time::Duration {
        self.commit.gather_window()
    }

    /// Takes `time` as the commits' mean time so far (tests: a gather window whatever the
    /// disk).
    #[cfg(test)]
    pub fn assume_commit_time(&mut self, time: std::time::Duration) {
        self.commit.assume_commit_time(time);
    }

    /// Sets the longest gather window (tests: longer than any pause of a loaded machine).
    #[cfg(test)]
    pub fn set_gather_max(&mut self, max: std::time::Duration) {
        self.commit.set_gather_max(max);
    }

    /// Starts a snapshot if `snapshot_events` events were appended since the
    /// last one and none is being written.
    pub fn maybe_snapshot(&mut self, coord: &Coord) {
        let position = self.commit.appended_through();
        if self.commit.snapshot_running()
            || self.events_since_snapshot < self.snapshot_events
            || position == 0
        {
            return;
        }
        self.events_since_snapshot = 0;
        let bytes = encode(&coord.snapshot());
        tracing::debug!(position, bytes = bytes.len(), "writing a snapshot");
        self.commit.start_snapshot(position, move |_| Ok(bytes));
    }

    /// The next thing a helper thread finished; pending while none runs.
    /// A failed fsync is an error: the daemon must stop.
    pub async fn next(&mut self) -> Result<JournalEvent, ShellError> {
        let finished = self.commit.next().await?;
        if let Finished::Durable(_) = finished {
            lava_crash::point!("coordinator.wal_durable");
        }
        Ok(finished)
    }

    /// What the group commits cost so far.
    pub fn sync_stats(&self) -> SyncStats {
        self.commit.stats()
    }

    /// The event log's own figures: appends and fsyncs through this handle.
    pub fn log_stats(&self) -> lava_eventlog::Stats {
        self.commit.log().stats()
    }

    /// The WAL on disk: (bytes of its segment files, how many there are, bytes of all its
    /// files: segments, snapshots, the lock). Preallocated space counts. A file that vanishes
    /// meanwhile (pruned) is skipped.
    pub fn disk_usage(&self) -> (u64, u64, u64) {
        let Ok(entries) = std::fs::read_dir(self.commit.log().dir()) else { return (0, 0, 0) };
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
        self.commit.sync_all(|_| lava_crash::point!("coordinator.wal_durable")).await?;
        Ok(())
    }

    /// Waits for a running snapshot, makes everything durable, and closes the
    /// log (trimming preallocated space and releasing the writer lock).
    pub async fn close(self) -> Result<(), ShellError> {
        self.commit.close(|_| lava_crash::point!("coordinator.wal_durable")).await?;
        Ok(())
    }
}
