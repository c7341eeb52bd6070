//! What opening, pruning and running a log found and did, for the caller to log.
//!
//! These are plain data: this module never acts on them, and the crate never logs
//! (it has no logger); the daemon shell writes them to its journal.

use std::fmt;
use std::path::PathBuf;

use crate::format::{FrameProblem, LogId, Position};

/// What [`EventLog::open`](crate::EventLog::open) and
/// [`EventLog::open_read_only`](crate::EventLog::open_read_only) found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenReport {
    /// The directory held no log, and a new, empty one was created.
    pub created: bool,
    /// The log's identity.
    pub log_id: LogId,
    /// Segment files on disk after opening.
    pub n_segments: usize,
    /// Oldest record position still on disk (earlier ones were pruned behind a snapshot).
    pub first_position: Position,
    /// The position the next append gets; the last record is the one before it.
    pub next_position: Position,
    /// The newest good snapshot, which [`replay`](crate::EventLog::replay) starts from.
    pub snapshot_position: Option<Position>,
    /// A torn last record that was found (and, for a writer, cut off).
    pub torn_tail: Option<TornTail>,
    /// Snapshots newer than the one chosen that could not be used, and why.
    pub rejected_snapshots: Vec<RejectedSnapshot>,
    /// Temporary files of interrupted segment or snapshot creations, removed by a writer.
    pub removed_temp_files: Vec<PathBuf>,
}

/// The remains of a last write that a crash interrupted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// The segment file.
    pub path: PathBuf,
    /// Byte offset where the valid records end and the torn bytes begin.
    pub offset: u64,
    /// Bytes from `offset` to the end of the file.
    pub bytes: u64,
    /// What the first torn frame looked like.
    pub kind: TornKind,
    /// The torn bytes were cut off the file (writer); false for a read-only open, which
    /// never changes the log and simply stops reading at `offset`.
    pub truncated: bool,
}

/// Shape of a torn tail, by what the first bad frame looked like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TornKind {
    /// Fewer bytes than a record header remain.
    TruncatedHeader,
    /// The length field announces more than the record size limit.
    LengthOverLimit,
    /// The payload runs past the end of the file.
    TruncatedPayload,
    /// The last record's CRC does not match.
    ChecksumMismatch,
    /// Nothing but zero bytes: preallocated space that a writer which did not close had
    /// not used yet (the usual case after a crash), or blocks whose data never reached
    /// the disk. Records written into that space and never made durable are gone, which
    /// is allowed: they were never acknowledged.
    ZeroFill,
}

impl From<FrameProblem> for TornKind {
    fn from(problem: FrameProblem) -> TornKind {
        match problem {
            FrameProblem::TruncatedHeader => TornKind::TruncatedHeader,
            FrameProblem::LengthOverLimit => TornKind::LengthOverLimit,
            FrameProblem::TruncatedPayload => TornKind::TruncatedPayload,
            FrameProblem::ChecksumMismatch => TornKind::ChecksumMismatch,
        }
    }
}

impl fmt::Display for TornTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "torn tail in {} at byte offset {}: {} bytes ({:?}) {}",
            self.path.display(),
            self.offset,
            self.bytes,
            self.kind,
            if self.truncated { "cut off" } else { "left in place, not read" }
        )
    }
}

/// A snapshot file that was not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedSnapshot {
    /// The snapshot file.
    pub path: PathBuf,
    /// Why it was not used.
    pub reason: String,
}

/// What [`EventLog::prune`](crate::EventLog::prune) removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Segment files deleted because the newest snapshot covers all their records.
    pub removed_segments: Vec<PathBuf>,
    /// Snapshot files deleted because a newer snapshot exists.
    pub removed_snapshots: Vec<PathBuf>,
}

/// Counters of a log since it was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Records appended through this handle.
    pub n_appends: u64,
    /// fsync (fdatasync) calls made on segment files.
    pub n_fsyncs: u64,
    /// The position the next append gets.
    pub next_position: Position,
    /// Every record before this position is durable.
    pub durable_end: Position,
    /// The newest good snapshot.
    pub snapshot_position: Option<Position>,
}
