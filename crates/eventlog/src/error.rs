//! The crate's one error type: every operating error names the directory or file, and,
//! for damaged data, the byte offset an operator has to look at.
//!
//! This module only describes failures; it never decides how to handle them.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crate::format::{FrameProblem, HeaderError, LogId, Position};

/// Everything that can go wrong opening, writing or reading an event log.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system call failed.
    #[error("{operation} {path}: {source}")]
    Io {
        /// What was being done ("open", "write", "fsync", ...).
        operation: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Another process (or another handle in this one) holds the log open for writing.
    #[error(
        "event log {name} in {dir} is already open for writing by another writer (lock file {lock_path} is held)"
    )]
    Locked {
        /// The log's directory.
        dir: PathBuf,
        /// The log's name.
        name: String,
        /// The lock file that is held.
        lock_path: PathBuf,
    },
    /// A read-only open found no log in the directory.
    #[error("no event log named {name} in {dir}")]
    NotFound {
        /// The directory searched.
        dir: PathBuf,
        /// The log name looked for.
        name: String,
    },
    /// The options are unusable.
    #[error("invalid event log options: {reason}")]
    InvalidOptions {
        /// What is wrong with them.
        reason: String,
    },
    /// A record in the middle of the log is damaged and good records follow it: the log
    /// cannot be trusted past this point and is not opened. Nothing is skipped.
    #[error(
        "corrupt record in {path} at byte offset {offset} ({problem}), followed by valid data at offset {next_valid_offset}; refusing to skip it"
    )]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// Byte offset of the damaged record's frame within the file.
        offset: u64,
        /// What is wrong with the frame.
        problem: FrameProblem,
        /// Byte offset of the first valid record frame found after it.
        next_valid_offset: u64,
    },
    /// Replay met a damaged record: in a sealed segment (one a later segment follows,
    /// so the damage cannot be a torn tail), or in a file changed behind the log's back.
    #[error("damaged record in {path} at byte offset {offset} ({problem}); refusing to skip it")]
    BadRecord {
        /// The segment file.
        path: PathBuf,
        /// Byte offset of the damaged record's frame within the file.
        offset: u64,
        /// What is wrong with the frame.
        problem: FrameProblem,
    },
    /// A segment or snapshot holds payloads in a format its owner does not read (written by
    /// a newer build, or by one too old for this build to read): refused whole, before
    /// anything of it is handed over to be misread.
    #[error(
        "{path} holds records in format version {found}, and this build reads versions {oldest} to {newest}: open it with the build that wrote it, or see the upgrade notes (docs/operations.md, \"Upgrading\")"
    )]
    ContentVersion {
        /// The segment or snapshot file.
        path: PathBuf,
        /// The content version in its header.
        found: u32,
        /// The oldest version the owner reads.
        oldest: u32,
        /// The version the owner writes (the newest it reads).
        newest: u32,
    },
    /// A segment or snapshot header is damaged or of another format.
    #[error("bad header in {path}: {problem}")]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// What is wrong with the header.
        #[source]
        problem: HeaderError,
    },
    /// A file carries another log's identity.
    #[error("{path} belongs to log {found}, not to log {expected}")]
    ForeignFile {
        /// The file.
        path: PathBuf,
        /// The identity of the log being opened.
        expected: LogId,
        /// The identity in the file's header.
        found: LogId,
    },
    /// The segments on disk do not form one unbroken sequence of records.
    #[error("inconsistent segments in {path}: {reason}")]
    Inconsistent {
        /// The file where the inconsistency shows.
        path: PathBuf,
        /// What does not fit.
        reason: String,
    },
    /// Records the log must hold are gone (no snapshot covers the missing start, or a
    /// snapshot claims records the log does not have).
    #[error("missing records in {dir}: {reason}")]
    MissingRecords {
        /// The log's directory.
        dir: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// A snapshot that was usable when the log was opened is damaged now.
    #[error("snapshot {path} is unusable: {reason}")]
    BadSnapshot {
        /// The snapshot file.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
    /// A record is larger than the log accepts.
    #[error("record of {bytes} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge {
        /// Size of the payload offered.
        bytes: usize,
        /// The configured limit.
        max: u32,
    },
    /// A snapshot is larger than the log accepts (`snapshot_bytes_max`).
    #[error("snapshot of {bytes} bytes exceeds the limit of {max} bytes")]
    SnapshotTooLarge {
        /// Size of the snapshot offered.
        bytes: u64,
        /// The configured limit.
        max: u64,
    },
    /// A position that has not been appended yet was named.
    #[error("position {position} has not been appended (next position is {next})")]
    NotAppended {
        /// The position asked for.
        position: Position,
        /// The position the next append will get.
        next: Position,
    },
    /// Records before a position were pruned and can no longer be replayed.
    #[error("position {requested} was pruned; the oldest record on disk is {first_available}")]
    Pruned {
        /// The position asked for.
        requested: Position,
        /// The oldest position still on disk.
        first_available: Position,
    },
    /// A snapshot older than the newest one was offered.
    #[error("snapshot at position {position} is older than the newest snapshot at {newest}")]
    SnapshotNotNewer {
        /// The position offered.
        position: Position,
        /// The newest snapshot's position.
        newest: Position,
    },
    /// A write was attempted on a log opened read-only.
    #[error("event log in {dir} is open read-only")]
    ReadOnly {
        /// The log's directory.
        dir: PathBuf,
    },
    /// The file system holding the log is full (ENOSPC, or EDQUOT for a quota) while
    /// writing records out or starting the next segment, before any fsync: nothing
    /// written is counted, the records stay buffered in order, and the log keeps
    /// working. The next durable wait tries again; the caller decides when (a daemon
    /// waits for space instead of spinning).
    #[error("{operation} {path}: no space left on the file system holding the event log: {source}")]
    NoSpace {
        /// What was being done ("write", "create", ...).
        operation: &'static str,
        /// The file it was done to.
        path: PathBuf,
        /// The OS error (ENOSPC or EDQUOT).
        #[source]
        source: io::Error,
    },
    /// An earlier write or fsync failed, so what the disk holds is unknown (a failed
    /// fsync cannot be retried safely); the log accepts no more writes. Reopening it
    /// repairs the tail.
    #[error("event log in {dir} stopped after an earlier I/O failure: {cause}")]
    Failed {
        /// The log's directory.
        dir: PathBuf,
        /// The failure that stopped it.
        #[source]
        cause: Arc<Error>,
    },
}

impl Error {
    /// Builds an [`Error::Io`]; used as `.map_err(Error::io("fsync", &path))`.
    pub(crate) fn io(operation: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { operation, path, source }
    }
}

impl Error {
    /// Whether this is [`Error::NoSpace`]: the log still works and a later durable wait
    /// retries.
    pub fn is_no_space(&self) -> bool {
        matches!(self, Error::NoSpace { .. })
    }

    /// Turns an [`Error::Io`] whose OS error says the file system is full into
    /// [`Error::NoSpace`]; any other error is returned as it is. Only for calls before
    /// any fsync of the log's data (a failed fsync is never retried).
    pub(crate) fn no_space_before_fsync(self) -> Error {
        match self {
            Error::Io { operation, path, source } if is_full(&source) => {
                Error::NoSpace { operation, path, source }
            }
            other => other,
        }
    }
}

/// Whether an OS error says the file system (or the user's quota) is full.
pub(crate) fn is_full(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded)
}

/// Short form used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
