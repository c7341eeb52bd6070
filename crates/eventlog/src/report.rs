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
    /// The oldest and the newest payload format ([`crate::Options::content_version`]) among
    /// the segments and the snapshot the log holds: what the owner may meet in a replay.
    pub content_versions: (u32, u32),
}

/// One thing [`OpenReport::findings`] tells the daemon's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// Worth a warning (a record or snapshot was lost), else information.
    pub warning: bool,
    /// The text.
    pub text: String,
}

impl OpenReport {
    /// What opening found, in order, as lines for the daemon's log: a new log, a torn
    /// tail (a zero fill is information: the preallocated space of a writer that did
    /// not close, the usual state after a crash; anything else is a warning, although
    /// the cut record was never durable), rejected snapshots, removed temporary files,
    /// and last what the log now holds.
    pub fn findings(&self) -> Vec<Finding> {
        let info = |text: String| Finding { warning: false, text };
        let warn = |text: String| Finding { warning: true, text };
        let mut found = Vec::new();
        if self.created {
            found.push(info("created a new, empty log".to_owned()));
        }
        match &self.torn_tail {
            Some(torn) if torn.kind == TornKind::ZeroFill => found.push(info(torn.to_string())),
            Some(torn) => found.push(warn(format!("{torn}; the cut record was never durable"))),
            None => {}
        }
        for rejected in &self.rejected_snapshots {
            found.push(warn(format!("snapshot {} not used: {}", rejected.path.display(), rejected.reason)));
        }
        for removed in &self.removed_temp_files {
            found.push(info(format!("removed the leftover temporary file {}", removed.display())));
        }
        let snapshot = self.snapshot_position.map_or("none".to_owned(), |p| p.0.to_string());
        let formats = match self.content_versions {
            (0, 0) => String::new(),
            (oldest, newest) if oldest == newest => format!(", format version {newest}"),
            (oldest, newest) => format!(", format versions {oldest} to {newest}"),
        };
        found.push(info(format!(
            "opened: {} segments, records {}..{}, snapshot at {snapshot}{formats}",
            self.n_segments, self.first_position.0, self.next_position.0
        )));
        found
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the findings come in order, a zero-fill tail and removed temporary files
    // are information, a torn record and a rejected snapshot are warnings, and the
    // last line says what the log holds.
    #[test]
    fn findings_name_what_opening_found() {
        let torn = |kind| TornTail { path: "seg".into(), offset: 8, bytes: 4, kind, truncated: true };
        let report = OpenReport {
            created: true,
            log_id: LogId([1; 16]),
            n_segments: 2,
            first_position: Position(1),
            next_position: Position(9),
            snapshot_position: Some(Position(5)),
            torn_tail: Some(torn(TornKind::ZeroFill)),
            rejected_snapshots: vec![RejectedSnapshot { path: "snap".into(), reason: "bad crc".into() }],
            removed_temp_files: vec!["tmp".into()],
            content_versions: (0, 0),
        };
        let found = report.findings();
        let flags: Vec<bool> = found.iter().map(|f| f.warning).collect();
        assert_eq!(flags, [false, false, true, false, false]);
        assert_eq!(found[2].text, "snapshot snap not used: bad crc");
        assert_eq!(found[4].text, "opened: 2 segments, records 1..9, snapshot at 5");
        let crc = OpenReport { torn_tail: Some(torn(TornKind::ChecksumMismatch)), ..report };
        assert!(
            crc.findings()[1].warning && crc.findings()[1].text.ends_with("the cut record was never durable")
        );
    }
}
