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

use std::path::Path;
use std::sync::Arc;

use lava_eventlog::{EventLog, OpenReport, Options, Position, RECORD_BYTES_LIMIT};
use lava_replog::record::{Record, StoredEntry};
use lava_xdr::Limits;
use serde::{Deserialize, Serialize};

/// Largest record of the replica log, bytes: an `Entries` record is split to fit it.
pub const RECORD_BYTES_MAX: u32 = if RECORD_BYTES_LIMIT < (64 << 20) { RECORD_BYTES_LIMIT } else { 64 << 20 };

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
    /// The newest `Hard` record made durable, copied forward at each snapshot.
    last_hard: Option<Record>,
}

impl ReplicaLog {
    /// Opens (creating if missing) the replica log `name` in `dir` and reads back what a
    /// restart needs.
    pub fn open(dir: &Path, name: &str) -> Result<(ReplicaLog, Recovered, OpenReport), StoreError> {
        let mut options = Options::new(name);
        options.record_bytes_max = RECORD_BYTES_MAX;
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
        Ok((ReplicaLog { log: Arc::new(log), last_hard }, Recovered { records, snapshot }, report))
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
    /// before — a leader's appends, which raft lets leave before the leader's own entries
    /// are durable. They are on the wire while this candidate fsyncs, so the followers'
    /// fsyncs overlap the leader's instead of following it (docs/failover.md, "The
    /// candidates' link and disk").
    pub async fn persist(&mut self, records: Vec<Record>) -> Result<(), StoreError> {
        if let Some(hard) = records.iter().rev().find(|r| matches!(r, Record::Hard { .. })) {
            self.last_hard = Some(hard.clone());
        }
        let n_entries: usize = records
            .iter()
            .map(|record| match record {
                Record::Entries(entries) => entries.len(),
                _ => 0,
            })
            .sum();
        if n_entries <= INLINE_PERSIST_ENTRIES_MAX {
            tokio::task::yield_now().await;
            return append_durably(&self.log, records);
        }
        let log = Arc::clone(&self.log);
        blocking(move || append_durably(&log, records)).await
    }

    /// Keeps the application's snapshot through `index` (of `term`) as the newest, with
    /// `tail`, the entries the replica holds after `index` (none for a snapshot received
    /// from the leader): see the module doc for the order. Older segments and snapshots
    /// are removed.
    pub async fn keep_snapshot(
        &mut self,
        index: u64,
        term: u64,
        data: Vec<u8>,
        tail: Vec<StoredEntry>,
    ) -> Result<(), StoreError> {
        let log = Arc::clone(&self.log);
        let mut carried: Vec<Record> = Vec::new();
        if !tail.is_empty() {
            carried.push(Record::Entries(tail));
        }
        carried.extend(self.last_hard.clone());
        blocking(move || {
            let before = Position(log.stats().next_position.0 - 1);
            append_durably(&log, carried)?;
            let payload = lava_xdr::to_bytes(&Kept { index, term, data }).expect("a snapshot encodes");
            log.write_snapshot(before, &payload)?;
            log.prune()?;
            Ok(())
        })
        .await
    }

    /// The log's counters (appends, fsyncs, positions).
    pub fn stats(&self) -> lava_eventlog::Stats {
        self.log.stats()
    }
}

fn append_durably(log: &EventLog, records: Vec<Record>) -> Result<(), StoreError> {
    let mut last = None;
    for record in split(records, RECORD_BYTES_MAX as usize - 1024) {
        let bytes = lava_xdr::to_bytes(&record).expect("a replica record encodes");
        last = Some(log.append(&bytes)?);
    }
    if let Some(position) = last {
        log.wait_durable(position)?;
    }
    Ok(())
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
        let (mut log, recovered, _) = ReplicaLog::open(dir.path(), "replica").expect("open");
        assert!(recovered.records.is_empty() && recovered.snapshot.is_none());
        let first = vec![
            Record::Entries(vec![entry(1, 1, 10), entry(2, 1, 10), entry(3, 1, 10)]),
            Record::Hard { term: 1, vote: 1, commit: 2 },
        ];
        log.persist(first.clone()).await.expect("persist");
        drop(log);

        let (mut log, recovered, _) = ReplicaLog::open(dir.path(), "replica").expect("reopen");
        assert_eq!(recovered.records, first);
        log.keep_snapshot(2, 1, b"state at 2".to_vec(), vec![entry(3, 1, 10)]).await.expect("snapshot");
        log.persist(vec![Record::Compacted { index: 2, term: 1 }]).await.expect("persist");
        drop(log);

        let (_, recovered, report) = ReplicaLog::open(dir.path(), "replica").expect("reopen");
        assert_eq!(recovered.snapshot, Some((2, 1, b"state at 2".to_vec())));
        let rebuilt = lava_replog::record::rebuild(recovered.records, Some((2, 1))).expect("rebuild");
        assert_eq!(rebuilt.entries, vec![entry(3, 1, 10)]);
        assert_eq!((rebuilt.term, rebuilt.vote, rebuilt.commit), (1, 1, 2));
        assert_eq!(report.n_segments, 1, "the snapshot let the old records go");
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
