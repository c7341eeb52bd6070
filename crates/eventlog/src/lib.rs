//! lava-eventlog: the append-only, checksummed, group-committed log under mbatchd's
//! `lsb.events` and the coordinator's WAL.
//!
//! ## What it owns
//!
//! A directory of numbered segment files holding framed records (length, CRC-32,
//! payload), each record identified by its [`Position`] (1, 2, 3, ... across segments,
//! never reused). It owns appending with group commit, waiting for durability,
//! rotation into segments, snapshot files, pruning, replay, crash recovery and the
//! single-writer lock.
//!
//! ## Modules
//!
//! - `format`: the byte layout of segment headers, records and snapshot headers (read
//!   it for the on-disk format); pure functions over byte slices.
//! - `dir`: file names, directory listing and fsync, the writer lock, durable creation.
//! - `reader`: reading records through a buffer, and the torn-tail versus corruption scan.
//! - `log`: [`EventLog`] itself: open and repair, append, group commit, rotation,
//!   snapshots, pruning.
//! - `replay`: the [`Records`] iterator.
//! - `snapshot`: snapshot files.
//! - `report`: what open and prune found, for the caller to log.
//! - `error`: the one [`Error`] type.
//!
//! ## Contract with the owner
//!
//! 1. Open with [`EventLog::open`] and log every finding of the [`OpenReport`] (a torn
//!    tail that was cut off, rejected snapshots, removed temporary files).
//! 2. Call [`EventLog::replay`]: apply the snapshot if there is one, then every record, in
//!    order; stop on the first error (it names the file and byte offset).
//! 3. For each event: [`append`](EventLog::append) it, then
//!    [`wait_durable`](EventLog::wait_durable) on its position, and only then send
//!    whatever acknowledges it (docs/ARCHITECTURE.md, "Acknowledgement follows
//!    durability"). Many threads may do this at once;
//!    they share fsyncs.
//! 4. From time to time, [`write_snapshot`](EventLog::write_snapshot) the state as of the
//!    last applied position, then [`prune`](EventLog::prune).
//! 5. If any call returns [`Error::Failed`], stop: the log accepts nothing more until it
//!    is reopened.
//!
//! ## What it never does
//!
//! - It never skips a record: a damaged record followed by good data is an error naming
//!   the file and byte offset; only a torn last write (nothing valid after it) is cut
//!   off, and that is reported.
//! - It never allocates because a length field said so: lengths are bounded by the
//!   record limit and the file size first.
//! - It never interprets payloads, never logs, never starts a thread, and does not
//!   depend on tokio: it sits below the daemon shells and uses std threads' primitives.
//! - It never retries a failed fsync.

#![deny(missing_docs)]

mod dir;
mod error;
mod format;
mod log;
mod reader;
mod replay;
mod report;
mod snapshot;

pub use error::{Error, Result};
pub use format::{
    FORMAT_VERSION, FrameProblem, HeaderError, LogId, Position, RECORD_BYTES_LIMIT, RECORD_HEADER_BYTES,
    SEGMENT_HEADER_BYTES, SNAPSHOT_HEADER_BYTES,
};
pub use log::{
    BUFFER_BYTES_MAX_DEFAULT, EventLog, NAME_BYTES_MAX, Options, PREALLOCATE_BYTES_DEFAULT,
    RECORD_BYTES_MAX_DEFAULT, SEGMENT_BYTES_MAX_DEFAULT, SEGMENT_BYTES_MIN, SNAPSHOT_BYTES_MAX_DEFAULT,
};
pub use replay::{Records, Replay, ResumePoint};
pub use report::{Finding, OpenReport, PruneReport, RejectedSnapshot, Stats, TornKind, TornTail};
pub use snapshot::Snapshot;
