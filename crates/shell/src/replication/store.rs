//! What a master candidate keeps on its disk for the replicated log: the `lava-replog`
//! [`Record`]s, each one XDR-encoded as a record of a `lava-eventlog` log, and the
//! application's newest snapshot as that log's snapshot (docs/failover.md, "What each
//! candidate keeps").
//!
//! # Keeping a snapshot without losing what follows it
//! A `lava-eventlog` snapshot at position `p` means "replay starts after `p`", but the
//! replica's snapshot covers an *index* of the replicated log, and records written before
//! `p` may hold entries past that index and the newest term and vote. So
//! [`ReplicaLog::keep_snapshot`] first appends, durably, what must survive — the entries
//! after the snapshot's index and the newest [`Record::Hard`] — and only then writes the
//! snapshot at the position just before them and prunes. A crash between the two leaves
//! the old snapshot and every record, the copies included; the replacement rule of
//! [`lava_replog::record`] makes a repeated `Entries` record harmless.
//!
//! # Persisting while the loop goes on
//! A `Persist` is carried out one of two ways, both keeping the records in order in the one
//! log. [`ReplicaLog::persist`] returns once they are durable: a follower's way, which
//! acknowledges nothing before that anyway. [`ReplicaLog::start_persist`] appends them and
//! returns at once, an fsync runs on a blocking thread, and [`ReplicaLog::persisted`] says
//! which `Persist` is durable when it ends (one fsync covers everything appended before it
//! started; what was appended meanwhile gets the next): the leader's way, so that it takes
//! its followers' acknowledgements while its own fsync runs and commits on them
//! (docs/failover.md, "The candidates' link and disk").
//!
//! # A full disk
//! A candidate does not stop for a full disk (docs/operations.md, "A full disk"). When the
//! log cannot write for space, its records stay in the log's buffer, in order, and the
//! `Persist`s not yet durable wait with them: nothing that rests on them is reported to the
//! machine, so this candidate acknowledges none of those entries, votes for nobody and, as
//! the leader, commits only on its followers' word. The disk is tried again every
//! [`NO_SPACE_RETRY`] (not at every round), and once a write succeeds the waiting tickets
//! are reported in order as usual. One ERROR line says the log stalled, one WARN line that
//! it is written again; [`ReplicaLog::stalled`] tells the daemon. A snapshot that cannot be
//! kept ([`ReplicaLog::keep_snapshot`]) waits in memory, and the records of every `Persist`
//! started after it wait behind it without reaching the log (a restart must never find
//! them without the snapshot they follow): at the next try it is kept first, then they are
//! appended, in order. That try runs on a blocking thread whose handle the log holds, so a
//! caller's `select!` may drop [`ReplicaLog::persisted`]'s future at any point.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

use lava_eventlog::{EventLog, OpenReport, Options, Position, RECORD_BYTES_LIMIT};
use lava_replog::machine::{Application, Machine};
use lava_replog::record::{Record, StoredEntry};
use lava_xdr::Limits;
use serde::{Deserialize, Serialize};

/// Largest record of the replica log, bytes: an `Entries` record is split to fit it.
pub const RECORD_BYTES_MAX: u32 = if RECORD_BYTES_LIMIT < (64 << 20) { RECORD_BYTES_LIMIT } else { 64 << 20 };

/// How long the log waits after a write that found the disk full before it tries again.
pub const NO_SPACE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// A `persist` of at most this many entries is made durable on the calling thread
/// ([`ReplicaLog::persist`]).
pub const INLINE_PERSIST_ENTRIES_MAX: usize = 4;

/// XDR limits for reading the replica's own records and snapshot back.
const LIMITS: Limits = Limits {
    input_bytes_max: usize::MAX,
    opaque_bytes_max: u32::MAX,
    array_elements_max: u32::MAX,
    ..Limits::DEFAULT
};

/// The payload of the log's snapshot file: the application's snapshot and its place.
#[derive(Serialize, Deserialize)]
struct Kept {
    index: u64,
    term: u64,
    #[serde(with = "lava_xdr::opaque")]
    data: Vec<u8>,
}

/// Why the replica log could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The event log underneath failed (it names the file).
    #[error("replica log: {0}")]
    Log(#[from] lava_eventlog::Error),
    /// A record or the snapshot does not decode: damage the checksums did not catch, or
    /// a file of another kind.
    #[error("replica log {what} at position {position}: {error}")]
    Decode {
        /// `record` or `snapshot`.
        what: &'static str,
        /// Its position in the log.
        position: u64,
        /// The decoder's finding.
        error: lava_xdr::Error,
    },
    /// The blocking thread doing the I/O went away (the runtime is shutting down).
    #[error("replica log: the I/O thread stopped")]
    Stopped,
    /// The records wait behind a snapshot not yet kept for a full disk (the module doc).
    #[error("replica log: waiting for room on its disk to keep a snapshot")]
    WaitingForRoom,
}

/// What a restart hands to [`lava_replog::Replica::recover`].
#[derive(Debug, Default)]
pub struct Recovered {
    /// Every record after the newest snapshot, in the order made durable.
    pub records: Vec<Record>,
    /// The application's newest snapshot: `(index, term, data)`.
    pub snapshot: Option<(u64, u64, Vec<u8>)>,
}

/// A candidate's durable replica log.
pub struct ReplicaLog {
    log: Arc<EventLog>,
    /// The newest `Hard` record written, copied forward at each snapshot.
    last_hard: Option<Record>,
    /// Persists started ([`ReplicaLog::start_persist`]) and not yet reported durable: their
    /// tickets and the position of their last record, oldest first.
    in_flight: VecDeque<(u64, Position)>,
    /// The fsync running on a blocking thread, through the position it returns.
    sync: Option<tokio::task::JoinHandle<Result<Position, lava_eventlog::Error>>>,
    /// The last write found the disk full: when the next try is due (see the module doc).
    retry_at: Option<tokio::time::Instant>,
    /// The stall was logged (and its end is to be).
    stalled_logged: bool,
    /// A snapshot that could not be kept for a full disk: kept at the next try, before
    /// anything that followed it reaches the log (`held`).
    pending_snapshot: Option<PendingSnapshot>,
    /// The try of `pending_snapshot` running on a blocking thread: held here, not in the
    /// future of [`ReplicaLog::persisted`], so that a caller's `select!` dropping that future
    /// loses neither the snapshot nor what waits behind it.
    keeping: Option<tokio::task::JoinHandle<(PendingSnapshot, Result<(), StoreError>)>>,
    /// The records of the `Persist`s started after `pending_snapshot`, with their tickets,
    /// in order: appended once it is kept.
    held: Vec<(Option<u64>, Vec<Record>)>,
}

/// A [`ReplicaLog::keep_snapshot`] waiting for room.
struct PendingSnapshot {
    index: u64,
    term: u64,
    data: Vec<u8>,
    tail: Vec<StoredEntry>,
}

impl StoreError {
    /// The disk was full (the records wait; see [`ReplicaLog`]'s module doc).
    pub fn is_no_space(&self) -> bool {
        match self {
            StoreError::Log(error) => error.is_no_space(),
            StoreError::WaitingForRoom => true,
            _ => false,
        }
    }
}

impl ReplicaLog {
    /// Opens (creating if missing) the replica log `name` in `dir` and reads back what a
    /// restart needs. `formats`: the oldest and the current format of the application's
    /// entries and snapshots, and of lava-replog's records around them (lava-eventlog's
    /// content version: a log of a format outside them is refused, naming the file).
    pub fn open(
        dir: &Path,
        name: &str,
        formats: std::ops::RangeInclusive<u32>,
    ) -> Result<(ReplicaLog, Recovered, OpenReport), StoreError> {
        let mut options = Options::new(name);
        options.record_bytes_max = RECORD_BYTES_MAX;
        options.oldest_content_version = *formats.start();
        options.content_version = *formats.end();
        let (log, report) = EventLog::open(dir, options)?;
        let replay = log.replay()?;
        let snapshot = match replay.snapshot {
            Some(snapshot) => {
                let kept: Kept = lava_xdr::from_bytes(&snapshot.bytes, &LIMITS).map_err(|error| {
                    StoreError::Decode { what: "snapshot", position: snapshot.position.0, error }
                })?;
                Some((kept.index, kept.term, kept.data))
            }
            None => None,
        };
        let mut records = Vec::new();
        let mut last_hard = None;
        for item in replay.records {
            let (position, bytes) = item?;
            let record: Record = lava_xdr::from_bytes(&bytes, &LIMITS)
                .map_err(|error| StoreError::Decode { what: "record", position: position.0, error })?;
            if matches!(record, Record::Hard { .. }) {
                last_hard = Some(record.clone());
            }
            records.push(record);
        }
        let log = ReplicaLog {
            log: Arc::new(log),
            last_hard,
            in_flight: VecDeque::new(),
            sync: None,
            retry_at: None,
            stalled_logged: false,
            pending_snapshot: None,
            keeping: None,
            held: Vec::new(),
        };
        Ok((log, Recovered { records, snapshot }, report))
    }

    /// Makes `records` durable, in order (an [`lava_replog::Effect::Persist`]): appended,
    /// then fsynced. Returns once they are on disk. Records holding at most
    /// [`INLINE_PERSIST_ENTRIES_MAX`] entries are written on the calling thread (the
    /// caller's loop waits for that fsync anyway: the hand-off to a blocking thread and
    /// back would cost two wake-ups of every small round); larger ones on a blocking
    /// thread, so that the runtime's other tasks go on meanwhile.
    ///
    /// Before the calling thread blocks in that fsync, the runtime's tasks already woken
    /// run once: among them the link's writers with the messages the same drain sent just
    /// before, which are then on the wire while this candidate fsyncs (a leader that
    /// persists this way, as it did before [`ReplicaLog::start_persist`], lets its appends
    /// reach the followers first: docs/failover.md, "The candidates' link and disk").
    ///
    /// Every record started before is durable too then (the log is in order), but their
    /// persists are still reported by [`ReplicaLog::persisted`]: these records carry no
    /// ticket that could cover them (a compaction's record), and a ticket never reported
    /// would hold back for good what the machine keeps behind it (a follower's every answer).
    /// A full disk is an error here (the records stay buffered, and the next fsync that
    /// succeeds makes them durable).
    pub async fn persist(&mut self, records: Vec<Record>) -> Result<(), StoreError> {
        self.persist_as(None, records).await
    }

    /// [`ReplicaLog::persist`] of the `Persist` with `ticket`, if any: on a full disk the
    /// ticket waits with the records and [`ReplicaLog::persisted`] reports it once they
    /// are durable.
    async fn persist_as(&mut self, ticket: Option<u64>, records: Vec<Record>) -> Result<(), StoreError> {
        if self.behind_snapshot() {
            self.held.push((ticket, records));
            return Err(StoreError::WaitingForRoom);
        }
        self.note_hard(&records);
        let n_entries: usize = records
            .iter()
            .map(|record| match record {
                Record::Entries(entries) => entries.len(),
                _ => 0,
            })
            .sum();
        let (last, durable) = if n_entries <= INLINE_PERSIST_ENTRIES_MAX {
            tokio::task::yield_now().await;
            append_durably(&self.log, records)?
        } else {
            let log = Arc::clone(&self.log);
            blocking(move || append_durably(&log, records)).await?
        };
        let Some(position) = last else { return Ok(()) };
        match durable {
            Ok(()) => {
                lava_crash::point!("replica.records_durable");
                if ticket.is_some() {
                    // The caller reports this ticket, which covers every earlier one.
                    while self.in_flight.front().is_some_and(|(_, p)| *p <= position) {
                        self.in_flight.pop_front();
                    }
                }
                self.written_again();
                Ok(())
            }
            Err(error) if error.is_no_space() => {
                if let Some(ticket) = ticket {
                    self.in_flight.push_back((ticket, position));
                }
                self.stall(&error);
                Err(StoreError::Log(error))
            }
            Err(error) => Err(StoreError::Log(error)),
        }
    }

    /// Starts making `records` durable (a `Persist` with this `ticket`): they are appended
    /// after everything before them and an fsync starts on a blocking thread unless one
    /// runs; [`ReplicaLog::persisted`] reports the ticket once they are durable.
    pub fn start_persist(&mut self, ticket: u64, records: Vec<Record>) -> Result<(), StoreError> {
        if self.behind_snapshot() {
            self.held.push((Some(ticket), records));
            return Ok(());
        }
        self.note_hard(&records);
        if let Some(position) = append_all(&self.log, records)? {
            self.in_flight.push_back((ticket, position));
        }
        if self.sync.is_none() && self.retry_at.is_none() {
            self.start_sync();
        }
        Ok(())
    }

    /// Waits for the running fsync (pending forever while none runs, so that a loop may
    /// select on it; cancel safe) and returns the ticket of the newest persist it made
    /// durable, `None` when [`ReplicaLog::persist`] had covered them already. The next
    /// fsync starts for what was appended meanwhile. After a full disk it waits for the
    /// next try and makes it; a try that finds the disk still full returns `None` (the
    /// module doc).
    pub async fn persisted(&mut self) -> Result<Option<u64>, StoreError> {
        if self.sync.is_none() {
            if self.keeping.is_none() {
                let Some(at) = self.retry_at else { return std::future::pending().await };
                tokio::time::sleep_until(at).await;
                self.retry_at = None;
                if let Some(snapshot) = self.pending_snapshot.take() {
                    self.keeping = Some(self.spawn_keep(snapshot));
                }
            }
            if let Some(keeping) = self.keeping.as_mut() {
                let ended = keeping.await;
                self.keeping = None;
                let (snapshot, kept) = ended.map_err(|_| StoreError::Stopped)?;
                match kept {
                    // A newer snapshot came meanwhile: it is kept first, at once.
                    Ok(()) if self.pending_snapshot.is_some() => {
                        self.retry_at = Some(tokio::time::Instant::now());
                        return Ok(None);
                    }
                    Ok(()) => self.append_held()?,
                    Err(error) if error.is_no_space() => {
                        self.wait_for_room(snapshot, &error);
                        return Ok(None);
                    }
                    Err(error) => return Err(error),
                }
            }
            // No await between the held records' append and this: a future dropped there
            // would leave them with no fsync to report them, and `persisted` pending for good.
            self.start_sync();
        }
        let Some(sync) = self.sync.as_mut() else { return Ok(None) };
        let ended = sync.await;
        self.sync = None;
        let position = match ended.map_err(|_| StoreError::Stopped)? {
            Ok(position) => position,
            Err(error) if error.is_no_space() => {
                self.stall(&error);
                return Ok(None);
            }
            Err(error) => return Err(StoreError::Log(error)),
        };
        self.written_again();
        let mut ticket = None;
        while let Some(&(t, p)) = self.in_flight.front()
            && p <= position
        {
            ticket = Some(t);
            self.in_flight.pop_front();
        }
        if ticket.is_some() {
            lava_crash::point!("replica.records_durable");
        }
        self.start_sync();
        Ok(ticket)
    }

    /// Waits until every persist started is durable; the ticket of the newest, if any was
    /// still to report. For a clean stop: on a full disk it ends with the records still
    /// waiting ([`ReplicaLog::stalled`]).
    pub async fn flush(&mut self) -> Result<Option<u64>, StoreError> {
        let mut newest = None;
        while self.sync.is_some() || self.keeping.is_some() {
            newest = self.persisted().await?.or(newest);
        }
        Ok(newest)
    }

    /// Whether the log is waiting for room on its disk (the module doc).
    pub fn stalled(&self) -> bool {
        self.retry_at.is_some() || self.behind_snapshot()
    }

    /// Whether records wait behind a snapshot not yet kept for a full disk.
    fn behind_snapshot(&self) -> bool {
        self.pending_snapshot.is_some() || self.keeping.is_some()
    }

    /// A write found the disk full: the next try in [`NO_SPACE_RETRY`]; logged once.
    fn stall(&mut self, error: &dyn std::fmt::Display) {
        if !self.stalled_logged {
            tracing::error!(
                "{error}; this candidate acknowledges nothing more until its replica log can be written (tried again every second)"
            );
            self.stalled_logged = true;
        }
        self.retry_at = Some(tokio::time::Instant::now() + NO_SPACE_RETRY);
    }

    /// A write succeeded: logged once after a full disk.
    fn written_again(&mut self) {
        if std::mem::take(&mut self.stalled_logged) {
            tracing::warn!("the replica log is written again: this candidate acknowledges again");
        }
    }

    /// Carries out a machine's `Persist` step the way its role wants (the module doc): the
    /// leader starts it and goes on (its end comes from [`ReplicaLog::persisted`], for
    /// [`Machine::persisted`]); every other candidate makes the records durable here and
    /// now and tells the machine at once.
    pub async fn persist_step<A: Application, M>(
        &mut self,
        machine: &mut Machine<A, M>,
        ticket: u64,
        records: Vec<Record>,
    ) -> Result<(), StoreError> {
        if machine.view().is_leader || self.stalled() {
            // While the disk is full every candidate waits for the next try the same way.
            return self.start_persist(ticket, records);
        }
        match self.persist_as(Some(ticket), records).await {
            Ok(()) => machine.persisted(ticket),
            // Reported by `persisted` once written (the module doc).
            Err(error) if error.is_no_space() => {}
            Err(error) => return Err(error),
        }
        Ok(())
    }

    /// A clean stop: waits until every persist started is durable, tells the machine, then
    /// keeps what this candidate knows committed for its next start (lava-replog's
    /// `commit_record`). Every step of the machine's drains must be carried out by then.
    pub async fn stop<A: Application, M>(&mut self, machine: &mut Machine<A, M>) -> Result<(), StoreError> {
        if let Some(ticket) = self.flush().await? {
            machine.persisted(ticket);
        }
        if self.stalled() {
            // The commit record only spares the next start a wait for the leader; what was
            // not written is this candidate's loss alone, as at a crash.
            tracing::warn!("stopping with records not written for a full disk");
            return Ok(());
        }
        self.persist(vec![machine.replica().commit_record()]).await
    }

    fn start_sync(&mut self) {
        let Some(&(_, position)) = self.in_flight.back() else { return };
        let log = Arc::clone(&self.log);
        self.sync = Some(tokio::task::spawn_blocking(move || log.wait_durable(position).map(|()| position)));
    }

    fn note_hard(&mut self, records: &[Record]) {
        if let Some(hard) = records.iter().rev().find(|r| matches!(r, Record::Hard { .. })) {
            self.last_hard = Some(hard.clone());
        }
    }

    /// Keeps the application's snapshot through `index` (of `term`) as the newest, with
    /// `tail`, the entries the replica holds after `index` (none for a snapshot received
    /// from the leader): see the module doc for the order. Older segments and snapshots
    /// are removed. On a full disk it returns at once and the snapshot waits, with every
    /// persist after it (the module doc, "A full disk").
    pub async fn keep_snapshot(
        &mut self,
        index: u64,
        term: u64,
        data: Vec<u8>,
        tail: Vec<StoredEntry>,
    ) -> Result<(), StoreError> {
        let snapshot = PendingSnapshot { index, term, data, tail };
        if self.behind_snapshot() {
            // A newer snapshot replaces the one waiting; what was held behind that one
            // still follows, in order.
            self.pending_snapshot = Some(snapshot);
            return Ok(());
        }
        let (snapshot, kept) = self.spawn_keep(snapshot).await.map_err(|_| StoreError::Stopped)?;
        match kept {
            Err(error) if error.is_no_space() => {
                tracing::warn!(
                    index,
                    "the snapshot waits for room: it is kept before anything that follows it"
                );
                self.wait_for_room(snapshot, &error);
                Ok(())
            }
            other => other,
        }
    }

    /// Starts keeping `snapshot` on a blocking thread (the module doc gives the order); the
    /// thread gives it back with how that went, so that one that found the disk full waits
    /// without being copied.
    fn spawn_keep(
        &self,
        mut snapshot: PendingSnapshot,
    ) -> tokio::task::JoinHandle<(PendingSnapshot, Result<(), StoreError>)> {
        let log = Arc::clone(&self.log);
        let mut carried: Vec<Record> = Vec::new();
        if !snapshot.tail.is_empty() {
            carried.push(Record::Entries(snapshot.tail.clone()));
        }
        carried.extend(self.last_hard.clone());
        tokio::task::spawn_blocking(move || {
            let before = Position(log.stats().next_position.0 - 1);
            let kept = append_durably(&log, carried).and_then(|(_, durable)| {
                durable?;
                let kept = Kept {
                    index: snapshot.index,
                    term: snapshot.term,
                    data: std::mem::take(&mut snapshot.data),
                };
                let payload = lava_xdr::to_bytes(&kept).expect("a snapshot encodes");
                snapshot.data = kept.data;
                log.write_snapshot(before, &payload)?;
                log.prune()?;
                lava_crash::point!("replica.snapshot_kept");
                Ok(())
            });
            (snapshot, kept)
        })
    }

    /// A snapshot found the disk full: it waits, and everything after it behind it.
    /// (A newer snapshot that came while it was tried replaces it.)
    fn wait_for_room(&mut self, snapshot: PendingSnapshot, error: &StoreError) {
        self.stall(error);
        self.pending_snapshot.get_or_insert(snapshot);
    }

    /// The snapshot that waited for room is kept: appends what was held behind it, in
    /// order (their tickets reported once an fsync covers them).
    fn append_held(&mut self) -> Result<(), StoreError> {
        for (ticket, records) in std::mem::take(&mut self.held) {
            self.note_hard(&records);
            if let Some(position) = append_all(&self.log, records)?
                && let Some(ticket) = ticket
            {
                self.in_flight.push_back((ticket, position));
            }
        }
        Ok(())
    }

    /// The log's counters (appends, fsyncs, positions).
    pub fn stats(&self) -> lava_eventlog::Stats {
        self.log.stats()
    }
}

/// Appends `records` and waits until they are durable: the position of the last, and how
/// the wait ended (a full disk leaves them appended, waiting in the log's buffer).
fn append_durably(
    log: &EventLog,
    records: Vec<Record>,
) -> Result<(Option<Position>, Result<(), lava_eventlog::Error>), StoreError> {
    let last = append_all(log, records)?;
    let durable = last.map_or(Ok(()), |position| log.wait_durable(position));
    Ok((last, durable))
}

/// Appends `records` (split to fit a log record); the position of the last.
fn append_all(log: &EventLog, records: Vec<Record>) -> Result<Option<Position>, StoreError> {
    let mut last = None;
    for record in split(records, RECORD_BYTES_MAX as usize - 1024) {
        let bytes = lava_xdr::to_bytes(&record).expect("a replica record encodes");
        last = Some(log.append(&bytes)?);
    }
    if last.is_some() {
        lava_crash::point!("replica.records_appended");
    }
    Ok(last)
}

/// The records with every `Entries` record cut into pieces of about `budget` bytes at most
/// (consecutive pieces rebuild to the same log: each piece replaces only what follows it).
/// The entries are moved, not copied.
fn split(records: Vec<Record>, budget: usize) -> Vec<Record> {
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        let Record::Entries(entries) = record else {
            out.push(record);
            continue;
        };
        let mut piece: Vec<StoredEntry> = Vec::new();
        let mut bytes = 0;
        for entry in entries {
            let size = entry.data.len() + 32;
            if !piece.is_empty() && bytes + size > budget {
                out.push(Record::Entries(std::mem::take(&mut piece)));
                bytes = 0;
            }
            bytes += size;
            piece.push(entry);
        }
        if !piece.is_empty() {
            out.push(Record::Entries(piece));
        }
    }
    out
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work).await.map_err(|_| StoreError::Stopped)?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64, size: usize) -> StoredEntry {
        StoredEntry { index, term, kind: 0, data: vec![index as u8; size] }
    }

    // Goal: what was persisted comes back after a reopen, and a kept snapshot carries the
    // entries past its index and the newest term and vote forward, so a restart rebuilds
    // the same log from the snapshot and the records after it.
    #[tokio::test]
    async fn records_and_snapshots_survive_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut log, recovered, _) = ReplicaLog::open(dir.path(), "replica", 1..=1).expect("open");
        assert!(recovered.records.is_empty() && recovered.snapshot.is_none());
        let first = vec![
            Record::Entries(vec![entry(1, 1, 10), entry(2, 1, 10), entry(3, 1, 10)]),
            Record::Hard { term: 1, vote: 1, commit: 2 },
        ];
        log.persist(first.clone()).await.expect("persist");
        drop(log);

        let (mut log, recovered, _) = ReplicaLog::open(dir.path(), "replica", 1..=1).expect("reopen");
        assert_eq!(recovered.records, first);
        log.keep_snapshot(2, 1, b"state at 2".to_vec(), vec![entry(3, 1, 10)]).await.expect("snapshot");
        log.persist(vec![Record::Compacted { index: 2, term: 1 }]).await.expect("persist");
        drop(log);

        let (_, recovered, report) = ReplicaLog::open(dir.path(), "replica", 1..=1).expect("reopen");
        assert_eq!(recovered.snapshot, Some((2, 1, b"state at 2".to_vec())));
        let rebuilt = lava_replog::record::rebuild(recovered.records, Some((2, 1))).expect("rebuild");
        assert_eq!(rebuilt.entries, vec![entry(3, 1, 10)]);
        assert_eq!((rebuilt.term, rebuilt.vote, rebuilt.commit), (1, 1, 2));
        assert_eq!(report.n_segments, 1, "the snapshot let the old records go");
    }

    // Goal: persists started while the loop goes on are reported in order, once durable,
    // each ticket once, those overtaken by a persist made durable on the spot included;
    // what a reopen reads back is every record, in the order started.
    #[tokio::test]
    async fn persists_started_are_reported_once_durable_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut log, _, _) = ReplicaLog::open(dir.path(), "replica", 1..=1).expect("open");
        let hard = |commit| Record::Hard { term: 1, vote: 1, commit };
        log.start_persist(3, vec![Record::Entries(vec![entry(1, 1, 10)]), hard(0)]).expect("start");
        log.start_persist(5, vec![Record::Entries(vec![entry(2, 1, 10)])]).expect("start");
        let mut reported = Vec::new();
        while reported.last() != Some(&5) {
            reported.extend(log.persisted().await.expect("fsync"));
        }
        assert!(reported == vec![3, 5] || reported == vec![5], "{reported:?}");
        // Nothing runs now: `persisted` waits forever.
        let idle = tokio::time::timeout(std::time::Duration::from_millis(20), log.persisted()).await;
        assert!(idle.is_err(), "no fsync runs, none ends");
        // Started, then overtaken by a persist without a ticket made durable on the spot (a
        // compaction's record): the started one is still reported, or the machine would hold
        // back what waits for it for good.
        log.start_persist(7, vec![Record::Entries(vec![entry(3, 1, 10)])]).expect("start");
        log.persist(vec![hard(3)]).await.expect("persist");
        assert_eq!(log.flush().await.expect("flush"), Some(7), "reported although overtaken");
        drop(log);
        let (_, recovered, _) = ReplicaLog::open(dir.path(), "replica", 1..=1).expect("reopen");
        let rebuilt = lava_replog::record::rebuild(recovered.records, None).expect("rebuild");
        assert_eq!(rebuilt.entries, vec![entry(1, 1, 10), entry(2, 1, 10), entry(3, 1, 10)]);
        assert_eq!(rebuilt.commit, 3);
    }

    // Goal: an Entries record larger than a log record is cut into pieces that rebuild to
    // the same entries.
    #[test]
    fn a_large_entries_record_is_split_into_pieces_that_rebuild_the_same() {
        let entries: Vec<StoredEntry> = (1..=7).map(|i| entry(i, 1, 300)).collect();
        let pieces = split(vec![Record::Entries(entries.clone())], 1000);
        assert_eq!(pieces.len(), 3, "{pieces:?}");
        for piece in &pieces {
            assert!(lava_xdr::to_bytes(piece).expect("encodes").len() <= 1000);
        }
        let rebuilt = lava_replog::record::rebuild(pieces, None).expect("rebuild");
        assert_eq!(rebuilt.entries, entries);
    }
}
