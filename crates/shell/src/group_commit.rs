//! [`GroupCommit`]: the appending side of a `lava-eventlog` log as a daemon's event loop
//! drives it. mbatchd's `lsb.events` and the coordinator's WAL both go through it; each
//! daemon's `journal.rs` keeps what is its own (opening, recovery, the event encoding, when
//! a snapshot is due and what it holds, the crash points).
//!
//! # Group commit
//! [`GroupCommit::append`] hands one encoded record to the log's buffer and returns at once
//! with its position. [`GroupCommit::start_sync`] starts one `wait_durable` on a blocking
//! thread for the newest appended position, unless one is already running; while it runs,
//! the event loop keeps stepping and appending, and when it ends ([`Finished::Durable`],
//! from [`GroupCommit::next`]) the loop starts the next one, which covers everything
//! appended meanwhile — many steps, one fsync. The shell holds each step's messages until
//! [`GroupCommit::durable_through`] reaches the last append before them.
//!
//! # Small commits on the caller's thread
//! [`GroupCommit::sync_small`] makes the appended records durable on the calling thread
//! when they are few (a bound the caller gives) and no sync runs: for a small group commit
//! the hand-off to a helper thread and the wake-up when it ends cost more than the loop
//! could do meanwhile (docs/benchmarks.md, "Small group commits on the loop").
//!
//! # Gathering before a commit
//! When each client sends its next request only once its last answer came back (a few
//! workers, one request outstanding each), a commit started at the first arrival covers
//! one request and the others arrive while it runs, to wait for the next: about two
//! fsyncs per round of requests, each request waiting up to two of them.
//! [`GroupCommit::commit`] takes the caller's count of clients it expects back soon (those
//! whose answers just went out): while some are expected, it waits for them, at most a
//! gather window after the first record not yet committed ([`GATHER_FACTOR`] times the commits' recent mean time,
//! at most [`GATHER_MAX`]; no wait when that is under [`GATHER_MIN`]), on a precise timer (a timerfd; tokio's timers
//! tick in milliseconds). When nobody more is expected, or the window ended
//! ([`GroupCommit::next`] watches the timer), it commits: on the caller's thread when the
//! records are few (as [`GroupCommit::sync_small`]: nobody is left to step meanwhile),
//! else on a helper thread. One fsync then covers every client's request of the round
//! (docs/benchmarks.md, "Few sequential workers, and beanstalkd beside them").
//!
//! # Snapshots
//! [`GroupCommit::start_snapshot`] runs, on a blocking thread and one at a time, the
//! caller's preparation of the snapshot's bytes (which may read the log), then
//! `write_snapshot` (which first waits until the covered records are durable), then
//! `prune`; [`Finished::SnapshotWritten`] or [`Finished::SnapshotFailed`] reports its end.
//! When a snapshot is due, and what it holds, is the daemon's business.
//!
//! # A full disk
//! When the file system holding the log is full, a group commit cannot write its records
//! (lava-eventlog's `Error::NoSpace`): they stay buffered, in order, and nothing held
//! behind them is released. [`GroupCommit::next`] reports [`Finished::NoSpace`] once per
//! failed attempt and tries again by itself every [`NO_SPACE_RETRY`] (no round starts
//! meanwhile, so nothing spins); the first commit that succeeds reports
//! [`Finished::Durable`] as usual. The daemon meanwhile refuses new work (docs/operations.md,
//! "A full disk").
//!
//! # Errors and crash points
//! An [`Error`] from an append or an fsync means the log stopped: the daemon must stop too,
//! sending nothing that rests on it. A failed snapshot is not an error (the log itself may
//! be fine; if not, the next append or fsync says so). The component marks no crash point;
//! the daemon marks its own: after [`append`](GroupCommit::append) returns, after
//! [`next`](GroupCommit::next) returns [`Finished::Durable`], after
//! [`sync_small`](GroupCommit::sync_small) or [`commit`](GroupCommit::commit) returns
//! true, and in the `on_durable` callback
//! of [`sync_all`](GroupCommit::sync_all) and [`close`](GroupCommit::close) — each before
//! anything held behind those records is released.

use std::fmt;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lava_eventlog::{EventLog, Position, PruneReport};
use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};
use tokio::task::JoinHandle;

/// Why the log's appending side must stop.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The log failed (append, fsync, close); it accepts nothing more.
    #[error(transparent)]
    Log(#[from] lava_eventlog::Error),
    /// A helper thread panicked or was cancelled.
    #[error("event log helper thread: {0}")]
    Helper(#[source] tokio::task::JoinError),
}

/// Why a snapshot was not written. Its text is the underlying error's alone.
#[derive(Debug)]
pub enum SnapshotError<E> {
    /// The daemon's preparation of the snapshot's bytes failed.
    Prepare(E),
    /// Writing the snapshot or pruning the log failed.
    Log(lava_eventlog::Error),
}

impl<E: fmt::Display> fmt::Display for SnapshotError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Prepare(error) => error.fmt(f),
            SnapshotError::Log(error) => error.fmt(f),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for SnapshotError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SnapshotError::Prepare(_) => None,
            SnapshotError::Log(error) => std::error::Error::source(error),
        }
    }
}

/// How long a group commit that found the disk full waits before trying again.
pub const NO_SPACE_RETRY: Duration = Duration::from_secs(1);

/// The shortest gather window of [`GroupCommit::commit`]: when commits take less than
/// this on average, it does not wait for anyone (company saves little there, and the wait
/// and its timer cost more).
pub const GATHER_MIN: Duration = Duration::from_micros(50);
/// The gather window of [`GroupCommit::commit`] in commits' mean times: a round's
/// turnaround (answers out, next requests in) is about one commit long on a fast disk, so a
/// window of one commit split the rounds (docs/benchmarks.md, "What bounds the ratio").
pub const GATHER_FACTOR: u32 = 2;
/// The longest gather window of [`GroupCommit::commit`]: a slow disk does not make
/// records wait longer than this for company.
pub const GATHER_MAX: Duration = Duration::from_millis(2);

/// What a helper thread finished, as [`GroupCommit::next`] reports it.
#[derive(Debug)]
pub enum Finished<E> {
    /// Every record up to and including this position is durable.
    Durable(u64),
    /// The file system holding the log is full: nothing appended since
    /// [`GroupCommit::durable_through`] is durable yet; the records stay buffered and
    /// [`GroupCommit::next`] tries again after [`NO_SPACE_RETRY`].
    NoSpace(lava_eventlog::Error),
    /// A snapshot covering records up to this position was written, then the log pruned.
    SnapshotWritten {
        /// The last position the snapshot covers.
        position: u64,
        /// What pruning removed.
        prune: PruneReport,
    },
    /// Preparing or writing a snapshot, or pruning, failed; the log itself may still be
    /// fine (if it is not, the next append or fsync says so).
    SnapshotFailed(SnapshotError<E>),
}

/// What the group commits cost: every `wait_durable` that ended, on a helper thread or on
/// the caller's ([`GroupCommit::sync_small`]), from its start to its end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncStats {
    /// Group commits that ended.
    pub count: u64,
    /// Their total time, in µs.
    pub total_us: u64,
    /// The longest, in µs.
    pub max_us: u64,
    /// Records they made durable.
    pub events: u64,
    /// Their times by bucket, for the metrics' histogram.
    pub buckets: crate::metrics::LatencyBuckets,
}

/// The running snapshot: its preparation, write and prune.
type SnapshotTask<E> = JoinHandle<Result<(u64, PruneReport), SnapshotError<E>>>;

/// The appending side of an open, replayed log; see the module doc. `E` is what the
/// daemon's snapshot preparation fails with ([`std::convert::Infallible`] when it cannot;
/// its text is logged when [`close`](Self::close) finds the snapshot failed).
#[derive(Debug)]
pub struct GroupCommit<E> {
    log: Arc<EventLog>,
    /// The position of the last record appended (0: none yet).
    appended_through: u64,
    /// Every record up to this position is durable.
    durable_through: u64,
    /// The running `wait_durable`, returning the position it made durable.
    sync: Option<JoinHandle<Result<u64, lava_eventlog::Error>>>,
    /// When the running `wait_durable` started, and the durable position before it.
    sync_started: Option<(Instant, u64)>,
    /// The running snapshot.
    snapshot: Option<SnapshotTask<E>>,
    /// The disk was full at the last attempt: no round starts before this instant.
    retry_at: Option<tokio::time::Instant>,
    /// A full disk found on the caller's thread ([`sync_small`](Self::sync_small)), for
    /// [`next`](Self::next) to report.
    no_space: Option<lava_eventlog::Error>,
    /// The encoding buffer, reused by every append.
    record: Vec<u8>,
    stats: SyncStats,
    /// When the first record appended since the last commit started was appended.
    first_pending_at: Option<Instant>,
    /// The gather timer of [`commit`](Self::commit) (`None`: not made yet, or the system
    /// refused one: then nothing waits), and the instant it is armed for.
    gather: Option<GatherTimer>,
    /// The commits' mean time, smoothed (µs), for the gather window.
    commit_us_mean: u64,
    /// The longest gather window ([`GATHER_MAX`] unless set).
    gather_max: Duration,
    /// [`commit`](Self::commit)'s last bound of records made durable on the caller's thread.
    inline_max: u64,
}

/// A timerfd, watched by the runtime, armed for one instant at a time. Tokio's pipe
/// receiver carries it: that wants only a non-blocking descriptor that `read(2)` and
/// epoll serve, which a timerfd is (and it needs no unsafe code).
#[derive(Debug)]
struct GatherTimer {
    fd: tokio::net::unix::pipe::Receiver,
    armed: Option<Instant>,
}

impl GatherTimer {
    /// A new timer, disarmed; `None` if the system refuses one (then nothing waits).
    fn new() -> Option<GatherTimer> {
        let flags = TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC;
        let fd: OwnedFd = rustix::time::timerfd_create(TimerfdClockId::Monotonic, flags).ok()?;
        tokio::runtime::Handle::try_current().ok()?;
        let fd = tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(fd).ok()?;
        Some(GatherTimer { fd, armed: None })
    }

    /// Arms the timer to fire at `at`; false if the system refused.
    fn arm(&mut self, at: Instant) -> bool {
        let wait = at.saturating_duration_since(Instant::now()).max(Duration::from_micros(1));
        let spec = Itimerspec {
            it_interval: Timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: Timespec {
                tv_sec: i64::try_from(wait.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(wait.subsec_nanos()),
            },
        };
        let armed = rustix::time::timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &spec).is_ok();
        self.armed = armed.then_some(at);
        armed
    }

    /// Disarms the timer (a firing already pending is drained and ignored by `fired`).
    fn disarm(&mut self) {
        if self.armed.take().is_some() {
            let zero = Timespec { tv_sec: 0, tv_nsec: 0 };
            let spec = Itimerspec { it_interval: zero, it_value: zero };
            let _disarmed = rustix::time::timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &spec);
        }
    }

    /// Completes when the armed instant has passed; pending while disarmed.
    async fn fired(&mut self) {
        loop {
            let Some(at) = self.armed else { return std::future::pending().await };
            if Instant::now() >= at {
                self.armed = None;
                return;
            }
            if self.fd.readable().await.is_err() {
                // The runtime stopped watching it: the instant is all that is left.
                self.armed = None;
                return;
            }
            // Drains the expiration count (8 bytes); a stale firing is then ignored above.
            let mut expirations = [0u8; 8];
            if let Err(error) = self.fd.try_read(&mut expirations)
                && error.kind() != std::io::ErrorKind::WouldBlock
            {
                self.armed = None;
                return;
            }
        }
    }
}

impl<E: fmt::Display + Send + 'static> GroupCommit<E> {
    /// The appending side of an open, replayed log: everything in it counts as durable.
    pub fn new(log: Arc<EventLog>) -> GroupCommit<E> {
        let end = log.stats().next_position.0 - 1;
        GroupCommit {
            log,
            appended_through: end,
            durable_through: end,
            sync: None,
            sync_started: None,
            snapshot: None,
            retry_at: None,
            no_space: None,
            record: Vec::new(),
            stats: SyncStats::default(),
            first_pending_at: None,
            gather: None,
            commit_us_mean: 0,
            gather_max: GATHER_MAX,
            inline_max: 0,
        }
    }

    /// Appends one record (not yet durable), which `encode` writes into an empty buffer,
    /// and returns its position. An error means the log stopped: the caller must stop too.
    pub fn append(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> Result<u64, Error> {
        self.record.clear();
        encode(&mut self.record);
        let position = self.log.append(&self.record)?;
        assert_eq!(position.0, self.appended_through + 1, "positions are handed out in order, one writer");
        self.appended_through = position.0;
        if self.first_pending_at.is_none() {
            self.first_pending_at = Some(Instant::now());
        }
        Ok(position.0)
    }

    /// The position of the last record appended (0 when the log is empty).
    pub fn appended_through(&self) -> u64 {
        self.appended_through
    }

    /// Every record up to this position is durable.
    pub fn durable_through(&self) -> u64 {
        self.durable_through
    }

    /// What the group commits cost so far.
    pub fn stats(&self) -> SyncStats {
        self.stats
    }

    /// The log, to read (its folder, its own counters); appending goes through `self`.
    pub fn log(&self) -> &EventLog {
        &self.log
    }

    /// Whether the last group commit found the disk full (and none has succeeded since).
    pub fn is_stalled(&self) -> bool {
        self.retry_at.is_some()
    }

    /// Whether a snapshot is being prepared, written or pruned.
    pub fn snapshot_running(&self) -> bool {
        self.snapshot.is_some()
    }

    /// Starts making the appended records durable on a blocking thread, unless that is
    /// already running (its end, reported by [`next`](Self::next), is when to start the
    /// next round) or there is nothing to do.
    pub fn start_sync(&mut self) {
        if self.sync.is_some() || self.retry_at.is_some() || self.appended_through <= self.durable_through {
            return;
        }
        self.committing();
        let log = Arc::clone(&self.log);
        let target = self.appended_through;
        self.sync_started = Some((Instant::now(), self.durable_through));
        self.sync =
            Some(tokio::task::spawn_blocking(move || log.wait_durable(Position(target)).map(|()| target)));
    }

    /// Makes the appended records durable on the calling thread, when they are at most
    /// `events_max` and no sync is running; says whether it did. The caller then waits for
    /// the fsync itself instead of handing it to a helper thread and being woken when it
    /// ends: for a small group commit the two hand-offs cost more than the loop could do
    /// meanwhile (docs/benchmarks.md, "Small group commits on the loop"). Counted in
    /// [`stats`](Self::stats) like any group commit.
    pub fn sync_small(&mut self, events_max: u64) -> Result<bool, Error> {
        let pending = self.appended_through.saturating_sub(self.durable_through);
        if self.sync.is_some() || self.retry_at.is_some() || pending == 0 || pending > events_max {
            return Ok(false);
        }
        self.committing();
        let started = (Instant::now(), self.durable_through);
        let target = self.appended_through;
        match self.log.wait_durable(Position(target)) {
            Ok(()) => {}
            Err(error) if error.is_no_space() => {
                self.stall();
                self.no_space = Some(error);
                return Ok(false);
            }
            Err(error) => return Err(error.into()),
        }
        self.synced(target, Some(started));
        Ok(true)
    }

    /// Makes the appended records durable now or soon, for a daemon whose clients each
    /// wait for their answer before they send again (see the module doc, "Gathering
    /// before a commit"). `expected`: how many clients the caller expects to send a request
    /// soon (those whose answers just went out); while that is more than 0, no commit
    /// starts before the gather window after the first record not yet committed has
    /// passed ([`next`](Self::next) then starts it). Otherwise it commits now: on the
    /// calling thread when at most `inline_max` records wait and no sync runs (returns
    /// true, like [`sync_small`](Self::sync_small): the caller releases what they held),
    /// else on a helper thread. Nothing happens while a sync runs: its end, reported by
    /// [`next`](Self::next), is when to call this again.
    pub fn commit(&mut self, expected: usize, inline_max: u64) -> Result<bool, Error> {
        self.inline_max = inline_max;
        if self.sync.is_some() || self.retry_at.is_some() || self.appended_through <= self.durable_through {
            return Ok(false);
        }
        let window = self.gather_window();
        if expected > 0
            && !window.is_zero()
            && let Some(first) = self.first_pending_at
        {
            let until = first + window;
            if Instant::now() < until {
                if self.gather.is_none() {
                    self.gather = GatherTimer::new();
                }
                if let Some(timer) = self.gather.as_mut()
                    && (timer.armed == Some(until) || timer.arm(until))
                {
                    return Ok(false);
                }
            }
        }
        self.commit_now()
    }

    /// Commits what was appended: on this thread when few, else on a helper thread.
    fn commit_now(&mut self) -> Result<bool, Error> {
        if self.sync_small(self.inline_max)? {
            return Ok(true);
        }
        self.start_sync();
        Ok(false)
    }

    /// How long [`commit`](Self::commit) waits for expected clients at most:
    /// [`GATHER_FACTOR`] times the recent mean time of a commit, at most [`GATHER_MAX`]; zero (no waiting) while that mean is
    /// under [`GATHER_MIN`] or no commit was timed yet. Waiting that long
    /// for a client costs the records already there about what the client would wait if
    /// it came just after the commit started.
    pub fn gather_window(&self) -> Duration {
        let mean = Duration::from_micros(self.commit_us_mean);
        if mean < GATHER_MIN {
            // Commits this cheap gain little from company (tmpfs, a fast cache): none waits.
            return Duration::ZERO;
        }
        (mean * GATHER_FACTOR).min(self.gather_max)
    }

    /// Sets the longest gather window (default [`GATHER_MAX`]): for tests, which check
    /// what happens inside a window and need it longer than any pause of a loaded machine.
    pub fn set_gather_max(&mut self, max: Duration) {
        self.gather_max = max;
    }

    /// Takes `time` as the commits' mean time so far (the next commits refine it): for a
    /// daemon that knows its disk before the first commit, and for tests.
    pub fn assume_commit_time(&mut self, time: Duration) {
        self.commit_us_mean = u64::try_from(time.as_micros()).unwrap_or(u64::MAX);
    }

    /// A commit starts: what was waiting is no longer, and the gather timer is not needed.
    fn committing(&mut self) {
        self.first_pending_at = None;
        if let Some(timer) = self.gather.as_mut() {
            timer.disarm();
        }
    }

    /// The disk was full: no round starts before [`NO_SPACE_RETRY`] has passed.
    fn stall(&mut self) {
        self.retry_at = Some(tokio::time::Instant::now() + NO_SPACE_RETRY);
    }

    /// A `wait_durable` through `target` ended: durable, and counted.
    fn synced(&mut self, target: u64, started: Option<(Instant, u64)>) {
        if let Some((started, from)) = started {
            let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            let stats = &mut self.stats;
            stats.count += 1;
            stats.total_us = stats.total_us.saturating_add(us);
            stats.max_us = stats.max_us.max(us);
            stats.buckets.observe(us);
            stats.events += target.saturating_sub(from);
            // A mean over the last few commits (7/8 of the old, 1/8 of the new).
            self.commit_us_mean =
                if self.commit_us_mean == 0 { us } else { (self.commit_us_mean * 7 + us) / 8 };
        }
        self.durable_through = self.durable_through.max(target);
    }

    /// Starts a snapshot covering every record appended so far (`position`, which must be
    /// [`appended_through`](Self::appended_through)), on a blocking thread: `prepare`
    /// makes its bytes (it may read the log), then they are written with `write_snapshot`
    /// (which first waits until those records are durable) and the log is pruned.
    /// [`next`](Self::next) reports the end.
    ///
    /// # Panics
    /// If a snapshot is running ([`snapshot_running`](Self::snapshot_running): one at a
    /// time), or `position` is not the last appended.
    pub fn start_snapshot<F>(&mut self, position: u64, prepare: F)
    where
        F: FnOnce(&EventLog) -> Result<Vec<u8>, E> + Send + 'static,
    {
        assert!(self.snapshot.is_none(), "one snapshot at a time");
        assert_eq!(position, self.appended_through, "a snapshot covers every record appended");
        let log = Arc::clone(&self.log);
        self.snapshot = Some(tokio::task::spawn_blocking(move || {
            let bytes = prepare(&log).map_err(SnapshotError::Prepare)?;
            log.write_snapshot(Position(position), &bytes).map_err(SnapshotError::Log)?;
            let prune = log.prune().map_err(SnapshotError::Log)?;
            Ok((position, prune))
        }));
    }

    /// The next thing a helper thread finished; pending while none runs (so it can sit in
    /// a `select!` beside the loop's other sources, and is cancel safe: a dropped call
    /// loses nothing). A failed fsync is an error: the daemon must stop.
    /// A full disk is [`Finished::NoSpace`], after which `next` itself starts the next
    /// attempt once [`NO_SPACE_RETRY`] has passed.
    pub async fn next(&mut self) -> Result<Finished<E>, Error> {
        if let Some(error) = self.no_space.take() {
            return Ok(Finished::NoSpace(error));
        }
        loop {
            tokio::select! {
                synced = join(&mut self.sync) => {
                    let started = self.sync_started.take();
                    return match synced? {
                        Ok(target) => {
                            self.synced(target, started);
                            Ok(Finished::Durable(target))
                        }
                        Err(error) if error.is_no_space() => {
                            self.stall();
                            Ok(Finished::NoSpace(error))
                        }
                        Err(error) => Err(error.into()),
                    };
                }
                written = join(&mut self.snapshot) => return Ok(match written? {
                    Ok((position, prune)) => Finished::SnapshotWritten { position, prune },
                    Err(error) => Finished::SnapshotFailed(error),
                }),
                () = retry(self.retry_at) => {
                    self.retry_at = None;
                    self.start_sync();
                }
                () = gather_ended(&mut self.gather) => {
                    // The window passed before every expected client came: commit now.
                    if self.commit_now()? {
                        return Ok(Finished::Durable(self.durable_through));
                    }
                    if let Some(error) = self.no_space.take() {
                        return Ok(Finished::NoSpace(error));
                    }
                }
            }
        }
    }

    /// Makes every appended record durable (for a clean stop): waits for the running sync,
    /// if any, then runs one more for what was appended meanwhile. `on_durable` is called
    /// with the position after each of them made records durable.
    pub async fn sync_all(&mut self, mut on_durable: impl FnMut(u64)) -> Result<(), Error> {
        if let Some(target) = self.wait_sync().await? {
            on_durable(target);
        }
        // A stop tries once more even when the disk was full a moment ago.
        self.retry_at = None;
        self.start_sync();
        if let Some(target) = self.wait_sync().await? {
            on_durable(target);
        }
        Ok(())
    }

    /// Waits for the running sync, if any, and counts it; returns the position it made
    /// durable.
    async fn wait_sync(&mut self) -> Result<Option<u64>, Error> {
        if self.sync.is_none() {
            return Ok(None);
        }
        let target = join(&mut self.sync).await??;
        let started = self.sync_started.take();
        self.synced(target, started);
        Ok(Some(target))
    }

    /// Waits for a running snapshot (logging whether it was written), makes everything
    /// durable ([`sync_all`](Self::sync_all), with `on_durable`), and closes the log on a
    /// blocking thread (trimming preallocated space and releasing the writer lock).
    pub async fn close(mut self, on_durable: impl FnMut(u64)) -> Result<(), Error> {
        if self.snapshot.is_some() {
            match join(&mut self.snapshot).await? {
                Ok((position, _)) => tracing::info!(position, "snapshot written"),
                Err(error) => tracing::warn!("snapshot not written: {error}"),
            }
        }
        self.sync_all(on_durable).await?;
        let stats = self.log.stats();
        tracing::info!(appends = stats.n_appends, fsyncs = stats.n_fsyncs, "closing the event log");
        let log = self.log;
        let closed = tokio::task::spawn_blocking(move || match Arc::try_unwrap(log) {
            Ok(log) => log.close(),
            // Unreachable after the joins above; syncing is then the best left to do.
            Err(log) => log.sync(),
        });
        closed.await.map_err(Error::Helper)??;
        Ok(())
    }
}

/// Completes when the gather timer, if armed, fired; pending forever otherwise.
async fn gather_ended(timer: &mut Option<GatherTimer>) {
    match timer {
        Some(timer) => timer.fired().await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`; pending forever when there is no retry to wait for.
async fn retry(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Awaits the task in `task`, if any (pending forever otherwise), and clears it.
async fn join<T>(task: &mut Option<JoinHandle<T>>) -> Result<T, Error> {
    let Some(handle) = task.as_mut() else {
        return std::future::pending().await;
    };
    let result = handle.await;
    *task = None;
    result.map_err(Error::Helper)
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::path::Path;

    use lava_eventlog::{EventLog, Options, SEGMENT_BYTES_MIN};

    use super::*;

    const NAME: &str = "test.log";
    /// The tests' bound on a snapshot's size.
    const SNAPSHOT_BYTES_MAX: u64 = 1024;

    /// A writable log in `dir`, whose segments rotate at the smallest size allowed.
    fn open(dir: &Path) -> Arc<EventLog> {
        let mut options = Options::new(NAME);
        options.segment_bytes_max = SEGMENT_BYTES_MIN;
        options.preallocate_bytes = 0;
        options.snapshot_bytes_max = SNAPSHOT_BYTES_MAX;
        let (log, _report) = EventLog::open(dir, options).expect("the log opens");
        Arc::new(log)
    }

    /// Appends `n` records of 64 bytes, each filled with its position's low byte.
    fn append<E: fmt::Display + Send + 'static>(commit: &mut GroupCommit<E>, n: u64) {
        for _ in 0..n {
            let byte = (commit.appended_through() + 1) as u8;
            commit.append(|record| record.extend_from_slice(&[byte; 64])).expect("appends");
        }
    }

    /// A position and the bytes stored there.
    type Stored = (u64, Vec<u8>);

    /// The newest snapshot of the log in `dir`, and every record after it.
    fn reopen(dir: &Path) -> (Option<Stored>, Vec<Stored>) {
        let log = open(dir);
        let replay = log.replay().expect("replays");
        let snapshot = replay.snapshot.map(|snapshot| (snapshot.position.0, snapshot.bytes));
        let records = replay.records.map(|record| record.expect("reads")).map(|(p, bytes)| (p.0, bytes));
        (snapshot, records.collect())
    }

    // Goal: appends return at once with their positions; one background wait makes every
    // record appended before it started durable with one fsync, and the records appended
    // while it runs count as durable only after the next round, which the caller starts when
    // it ends (the first round's fsync may have covered them on disk already).
    // Method: 3 appends, a sync, 2 appends during it (start_sync then does nothing), then the
    // second round; the positions, the fsyncs and the statistics after each.
    #[tokio::test(flavor = "current_thread")]
    async fn one_fsync_covers_every_append_before_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut commit = GroupCommit::<Infallible>::new(open(dir.path()));
        assert_eq!((commit.appended_through(), commit.durable_through()), (0, 0));
        let fsyncs = commit.log().stats().n_fsyncs;
        append(&mut commit, 3);
        assert_eq!((commit.appended_through(), commit.durable_through()), (3, 0));
        commit.start_sync();
        append(&mut commit, 2);
        commit.start_sync();
        let Finished::Durable(position) = commit.next().await.expect("no failure") else {
            panic!("only a sync runs")
        };
        assert_eq!((position, commit.durable_through()), (3, 3), "the round covers what came before it");
        assert_eq!(commit.log().stats().n_fsyncs, fsyncs + 1, "three appends, one fsync");
        assert_eq!((commit.stats().count, commit.stats().events), (1, 3));

        commit.start_sync();
        let Finished::Durable(position) = commit.next().await.expect("no failure") else {
            panic!("only a sync runs")
        };
        assert_eq!((position, commit.durable_through()), (5, 5));
        assert!(commit.log().stats().n_fsyncs <= fsyncs + 2, "none if the first round wrote them too");
        let stats = commit.stats();
        assert_eq!((stats.count, stats.events), (2, 5));
        assert!(stats.max_us <= stats.total_us);
        commit.start_sync();
        assert!(commit.sync.is_none(), "nothing left to make durable");
        commit.close(|_| panic!("nothing was left to make durable")).await.expect("closes");
        let (_, records) = reopen(dir.path());
        assert_eq!(records.iter().map(|(position, _)| *position).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
        assert_eq!(records[3].1, [4; 64]);
    }

    // Goal: sync_small makes at most its bound of records durable on the calling thread,
    // counted like any group commit; more records, none, or a sync already running leave
    // it to start_sync.
    // Method: a bound of 2: 2 records (made durable), none pending, 3 records (left), one
    // more while a background sync runs (left), then the last once it ended.
    #[tokio::test(flavor = "current_thread")]
    async fn sync_small_takes_at_most_its_bound_and_only_when_no_sync_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut commit = GroupCommit::<Infallible>::new(open(dir.path()));
        append(&mut commit, 2);
        assert!(commit.sync_small(2).expect("no failure"));
        assert_eq!(commit.durable_through(), 2);
        assert_eq!((commit.stats().count, commit.stats().events), (1, 2));
        assert!(!commit.sync_small(2).expect("no failure"), "nothing is pending");

        append(&mut commit, 3);
        assert!(!commit.sync_small(2).expect("no failure"), "over the bound");
        assert_eq!(commit.durable_through(), 2);
        commit.start_sync();
        append(&mut commit, 1);
        assert!(!commit.sync_small(2).expect("no failure"), "a sync is running");
        let Finished::Durable(position) = commit.next().await.expect("no failure") else {
            panic!("only a sync runs")
        };
        assert_eq!(position, 5);
        assert!(commit.sync_small(2).expect("no failure"), "the last record, once the sync ended");
        assert_eq!(commit.durable_through(), 6);
        assert_eq!((commit.stats().count, commit.stats().events), (3, 6));
        commit.close(|_| {}).await.expect("closes");
    }

    // Goal: commit() commits at once, on the caller's thread, when nobody is expected and
    // the records are few; with more than its bound it starts a helper-thread sync; while
    // clients are expected it waits, and next() commits once the gather window passed;
    // nothing starts while a sync runs.
    // Method: the four cases in turn on one log, with the positions and statistics after each.
    #[tokio::test(flavor = "current_thread")]
    async fn commit_gathers_while_clients_are_expected() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut commit = GroupCommit::<Infallible>::new(open(dir.path()));
        append(&mut commit, 2);
        assert!(commit.commit(0, 4).expect("no failure"), "nobody expected, 2 records: on this thread");
        assert_eq!(commit.durable_through(), 2);

        append(&mut commit, 5);
        assert!(!commit.commit(0, 4).expect("no failure"), "over the bound: a helper thread");
        assert!(commit.sync.is_some());
        append(&mut commit, 1);
        assert!(!commit.commit(0, 4).expect("no failure"), "a sync runs");
        let Finished::Durable(position) = commit.next().await.expect("no failure") else {
            panic!("only a sync runs")
        };
        assert_eq!(position, 7);
        assert!(commit.commit(0, 4).expect("no failure"), "the record appended during the sync");
        assert_eq!(commit.durable_through(), 8);

        // The window counts from the append just before; a second, so that no pause of a
        // loaded machine between two statements ends it early.
        commit.set_gather_max(Duration::from_secs(1));
        commit.assume_commit_time(Duration::from_secs(1));
        assert_eq!(commit.gather_window(), Duration::from_secs(1));
        append(&mut commit, 1);
        assert!(!commit.commit(3, 4).expect("no failure"), "clients are expected: it waits");
        assert_eq!(commit.durable_through(), 8);
        assert!(commit.sync.is_none(), "no sync started while gathering");
        let Finished::Durable(position) = commit.next().await.expect("no failure") else {
            panic!("the gather window ends")
        };
        assert_eq!((position, commit.durable_through()), (9, 9), "committed when the window passed");
        assert_eq!(commit.stats().count, 4);
        commit.set_gather_max(GATHER_MAX);
        commit.assume_commit_time(GATHER_MAX);
        assert_eq!(commit.gather_window(), GATHER_MAX, "the window is at most GATHER_MAX by default");

        commit.assume_commit_time(GATHER_MIN / 2);
        assert_eq!(commit.gather_window(), Duration::ZERO, "commits this cheap wait for nobody");
        append(&mut commit, 1);
        assert!(commit.commit(3, 4).expect("no failure"), "committed at once though clients are expected");
        commit.close(|_| {}).await.expect("closes");
    }

    // Goal: a snapshot is prepared (reading the log), written and the covered segments
    // pruned on a helper thread, one at a time, and reported by next(); the records after
    // it are what a reopened log replays beyond it.
    // Method: 5 group commits of 4 records of 64 bytes (a segment of 256 bytes each), a
    // snapshot at 20 whose preparation reads the log's statistics, 2 records more, close,
    // reopen.
    #[tokio::test(flavor = "current_thread")]
    async fn a_snapshot_is_written_and_the_log_pruned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut commit = GroupCommit::<Infallible>::new(open(dir.path()));
        for _ in 0..4 {
            append(&mut commit, 4);
            assert!(commit.sync_small(4).expect("no failure"));
        }
        append(&mut commit, 4);
        commit.start_sync();
        assert!(!commit.snapshot_running());
        commit.start_snapshot(20, |log| {
            Ok(format!("state through {}", log.stats().next_position.0 - 1).into())
        });
        assert!(commit.snapshot_running());
        let (mut durable, mut written) = (false, None);
        while !durable || written.is_none() {
            match commit.next().await.expect("no failure") {
                Finished::Durable(position) => durable = position == 20,
                Finished::SnapshotWritten { position, prune } => written = Some((position, prune)),
                Finished::SnapshotFailed(error) => panic!("snapshot failed: {error}"),
                Finished::NoSpace(error) => panic!("the test's disk is not full: {error}"),
            }
        }
        assert!(!commit.snapshot_running());
        let (position, prune) = written.expect("written");
        assert_eq!(position, 20);
        assert!(!prune.removed_segments.is_empty(), "the segments it covers are removed");
        assert!(prune.removed_segments.iter().all(|path| !path.exists()));
        append(&mut commit, 2);
        commit.close(|_| {}).await.expect("closes");

        let (snapshot, records) = reopen(dir.path());
        assert_eq!(snapshot, Some((20, b"state through 20".to_vec())));
        assert_eq!(records.iter().map(|(position, _)| *position).collect::<Vec<_>>(), [21, 22]);
    }

    // Goal: a snapshot that fails is reported, not an error, with the underlying error's
    // text, whether its preparation failed or the log refused it; the log goes on.
    // Method: a preparation that fails, then a snapshot over the log's size limit.
    #[tokio::test(flavor = "current_thread")]
    async fn a_failed_snapshot_is_reported_and_the_log_goes_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut commit = GroupCommit::<String>::new(open(dir.path()));
        append(&mut commit, 1);
        commit.start_snapshot(1, |_| Err("no environments".to_owned()));
        let Finished::SnapshotFailed(error) = commit.next().await.expect("no failure") else {
            panic!("only a snapshot runs")
        };
        assert!(matches!(&error, SnapshotError::Prepare(text) if text == "no environments"));
        assert_eq!(error.to_string(), "no environments");

        let too_large = vec![0; SNAPSHOT_BYTES_MAX as usize + 1];
        commit.start_snapshot(1, move |_| Ok(too_large));
        let Finished::SnapshotFailed(error) = commit.next().await.expect("no failure") else {
            panic!("only a snapshot runs")
        };
        let SnapshotError::Log(inner) = &error else { panic!("the log refused it: {error}") };
        assert_eq!(error.to_string(), inner.to_string());
        append(&mut commit, 1);
        assert!(commit.sync_small(4).expect("the log goes on"));
        commit.close(|_| {}).await.expect("closes");
        assert_eq!(reopen(dir.path()).0, None);
    }

    // Goal: sync_all waits for the running sync, then makes what was appended meanwhile
    // durable, calling on_durable after each; close waits for a running snapshot, makes
    // everything durable and releases the log (it reopens) with every record in it.
    // Method: a sync running with one more record behind it, sync_all; then a snapshot and
    // an append not yet durable, close, reopen.
    #[tokio::test(flavor = "current_thread")]
    async fn sync_all_and_close_leave_everything_durable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut commit = GroupCommit::<Infallible>::new(open(dir.path()));
        append(&mut commit, 2);
        commit.start_sync();
        append(&mut commit, 1);
        let mut seen = Vec::new();
        commit.sync_all(|position| seen.push(position)).await.expect("no failure");
        assert_eq!(seen, [2, 3], "the running round, then the one for the record behind it");
        assert_eq!(commit.durable_through(), 3);
        assert_eq!(commit.stats().count, 2);

        commit.start_snapshot(3, |_| Ok(b"three".to_vec()));
        append(&mut commit, 1);
        let mut seen = Vec::new();
        commit.close(|position| seen.push(position)).await.expect("closes");
        assert_eq!(seen, [4]);
        let (snapshot, records) = reopen(dir.path());
        assert_eq!(snapshot, Some((3, b"three".to_vec())), "close waited for the snapshot");
        assert_eq!(records.iter().map(|(position, _)| *position).collect::<Vec<_>>(), [4]);
    }

    // Goal: a log reopened with records in it starts with all of them appended and durable.
    #[tokio::test(flavor = "current_thread")]
    async fn a_reopened_log_counts_as_durable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut commit = GroupCommit::<Infallible>::new(open(dir.path()));
        append(&mut commit, 3);
        commit.close(|_| {}).await.expect("closes");
        let commit = GroupCommit::<Infallible>::new(open(dir.path()));
        assert_eq!((commit.appended_through(), commit.durable_through()), (3, 3));
    }

    // Goal: a full disk stalls the group commit without stopping it: next() reports
    // NoSpace once per attempt, no round starts before the retry time (nothing spins),
    // sync_small does nothing meanwhile, and once space returns the retry that next()
    // starts by itself makes everything durable. Method: a log on a 256 KiB tmpfs (root
    // only; skipped elsewhere) filled by another file, 400 records of 64 bytes appended
    // past its segment, the filler deleted after the first NoSpace. Paused tokio time
    // would not pause the disk, so the test waits one real retry interval.
    #[tokio::test(flavor = "current_thread")]
    async fn a_full_disk_stalls_the_group_commit_until_space_returns() {
        let parent = tempfile::tempdir().expect("tempdir");
        let mount = parent.path().join("fs");
        std::fs::create_dir(&mount).expect("mkdir");
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
            .arg(&mount)
            .status()
            .is_ok_and(|status| status.success());
        if !mounted {
            eprintln!(
                "a_full_disk_stalls_the_group_commit_until_space_returns: skipped: cannot mount a tmpfs"
            );
            return;
        }
        struct Unmount<'a>(&'a Path);
        impl Drop for Unmount<'_> {
            fn drop(&mut self) {
                let _ = std::process::Command::new("umount").arg("-l").arg(self.0).status();
            }
        }
        let _unmount = Unmount(&mount);
        let mut commit = GroupCommit::<Infallible>::new(open(&mount));
        append(&mut commit, 4);
        assert!(commit.sync_small(8).expect("room at first"));
        let filler = mount.join("filler");
        {
            use std::io::Write;
            let mut file = std::fs::File::create(&filler).expect("filler");
            while file.write_all(&[0xAA; 4096]).is_ok() {}
        }
        append(&mut commit, 400);
        commit.start_sync();
        let Finished::NoSpace(error) = commit.next().await.expect("not an error") else {
            panic!("the full disk is reported")
        };
        assert!(error.is_no_space());
        assert!(commit.is_stalled());
        assert!(!commit.sync_small(1_000).expect("no error"), "no commit while stalled");
        commit.start_sync();
        assert!(commit.sync.is_none(), "no round starts before the retry time");
        assert_eq!(commit.durable_through(), 4);
        std::fs::remove_file(&filler).expect("space returns");
        let Finished::Durable(position) = commit.next().await.expect("not an error") else {
            panic!("the retry succeeds")
        };
        assert_eq!((position, commit.durable_through()), (404, 404));
        assert!(!commit.is_stalled());
        commit.close(|_| {}).await.expect("closes");
        let (_, records) = reopen(&mount);
        assert_eq!(records.len(), 404, "every record, once");
    }
}
