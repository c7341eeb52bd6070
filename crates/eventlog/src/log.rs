//! The event log handle: open (recovery and repair), group-committed appends and
//! durable waits, rotation, snapshots, pruning, and the bounds of a replay.
//!
//! ## Group commit: leader and followers
//!
//! `append` only encodes the record into an in-memory buffer (under a mutex, with its
//! CRC computed before the mutex is taken) and hands out the next position. Disk work
//! happens in *rounds*, and at most one round runs at a time. A thread that waits for a
//! position to become durable while no round runs becomes the leader: it takes the
//! whole buffer (every record appended so far, by any thread), writes it with a single
//! `write` call at the end of the active segment, calls `fdatasync` once, and wakes the
//! threads whose records that covered. Threads that wait while a round runs are
//! followers: those whose records are in the running round sleep until it ends; those
//! whose records arrived after it started sleep until the next round, and when the
//! running round ends its leader wakes exactly one of them to lead that next round,
//! which takes everything buffered meanwhile. So one fsync covers every append that
//! arrived while the previous fsync ran, and under load fsyncs run back to back.
//!
//! A dedicated syncer thread would do the same work but add a thread hand-off (two
//! context switches) to every durable append, even a lone one; it would also need a
//! shutdown protocol, and its I/O errors would have to be ferried back. With leaders, a
//! single appender does its own write and fsync with no hand-off at all, the error
//! surfaces on a thread that asked for durability, and dropping the log leaves no thread
//! behind. The two condition variables (one per round parity) keep a round's end from
//! waking the threads that wait for the next one.
//!
//! The buffer is bounded: an append that would take it past `buffer_bytes_max` first
//! writes it out (without fsync) or waits for the running round to take it.
//!
//! ## Failure
//!
//! If a write or fsync fails, the log stops: every later call returns
//! [`Error::Failed`]. After a failed fsync the kernel may already have dropped the dirty
//! pages, so retrying it could report success for data that never reached the disk;
//! only reopening, which rereads and repairs the tail, is safe.
//!
//! A full file system is the exception ([`Error::NoSpace`]): when writing a batch out or
//! creating the next segment fails with ENOSPC or EDQUOT, nothing has been fsynced and
//! nothing written counts, so the batch goes back into the buffer ahead of later appends
//! and the log keeps working: the caller of the durable wait gets the error and asks again
//! when it sees fit (appends keep buffering, past `buffer_bytes_max` if they must).
//! Preallocation that finds the disk full is skipped. Only ever a write is retried, never
//! an fsync.
//!
//! ## Preallocation
//!
//! The leader keeps `preallocate_bytes` (1 MiB by default) of zeros written ahead of the
//! active segment's end, so that record writes overwrite allocated blocks inside the
//! file. An fdatasync after such a write only flushes data; after a write that grows the
//! file it must also commit the new size and block allocation through the journal. On
//! the reference machine (ext4 on a virtual disk) that is ~110 µs against ~190 µs per
//! fsync of a 6.5 KiB batch, and 64 durable appenders went from ~90,000 to ~140,000
//! appends/s. The zeros are cut off when a segment is sealed and when the log is closed
//! (or dropped), so only a writer that died leaves them; the next open reports them as a
//! torn tail of kind [`TornKind::ZeroFill`] and cuts them off.
//!
//! The price: a file that grows is only ever seen, after a power cut, as a prefix of
//! what was written (ext4's ordered mode commits the new size after the data), while
//! overwritten pages may reach the disk in any order until the fsync completes. So a
//! power cut in the middle of an fsync of a multi-page batch can, rarely, leave a hole
//! in that (unacknowledged) batch with later records of the same batch intact; the
//! torn-tail rule then sees valid records after a bad one and refuses to open, naming
//! the file and offset. That is the safe direction (nothing acknowledged is lost or
//! skipped; an operator decides), but it is a refusal that `preallocate_bytes = 0`
//! would almost never produce.
//!
//! ## Rotation
//!
//! When the active segment has reached `segment_bytes_max`, the next round first cuts
//! its preallocated zeros off and makes it durable (it is sealed from then on and will
//! never be written again), creates the next segment durably under a temporary name
//! and renames it into place, then writes its batch there. Every sealed segment is therefore complete and fsynced before the
//! next one exists, which is why only the last segment can have a torn tail.

use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher, RandomState};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, Thread};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::dir::{self, Listing};
use crate::error::{Error, Result};
use crate::format::{
    LogId, Position, RECORD_BYTES_LIMIT, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES, SegmentHeader,
    encode_record, record_crc,
};
use crate::reader::{SegmentReader, Step, all_zero, find_valid_frame, open_segment};
use crate::replay::{Records, Replay, ResumePoint, SegmentMeta};
use crate::report::{OpenReport, PruneReport, RejectedSnapshot, Stats, TornKind, TornTail};
use crate::snapshot;

/// Default size at which the active segment is sealed and a new one started: 64 MiB.
pub const SEGMENT_BYTES_MAX_DEFAULT: u64 = 64 << 20;
/// Smallest accepted `segment_bytes_max` (tests use small segments to rotate often).
pub const SEGMENT_BYTES_MIN: u64 = 256;
/// Default largest record payload: 1 MiB, far above any event.
pub const RECORD_BYTES_MAX_DEFAULT: u32 = 1 << 20;
/// Default bound on appended bytes buffered in memory before they are written out: 4 MiB.
pub const BUFFER_BYTES_MAX_DEFAULT: usize = 4 << 20;
/// Default largest snapshot: 4 GiB.
pub const SNAPSHOT_BYTES_MAX_DEFAULT: u64 = 4 << 30;
/// Default zero-filled space kept ahead of the active segment's end: 1 MiB.
pub const PREALLOCATE_BYTES_DEFAULT: u64 = 1 << 20;
/// Longest accepted log name.
pub const NAME_BYTES_MAX: usize = 128;

/// How a log is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// File name prefix of the log's files (`lsb.events`, `coordinator.wal`); several
    /// logs can share a directory under different names.
    pub name: String,
    /// Size at which the active segment is sealed and the next one started. A segment
    /// can exceed it by one batch: rotation happens between batches.
    pub segment_bytes_max: u64,
    /// Largest record payload `append` accepts. Readers bound length fields by the value
    /// recorded in each segment's header, so changing it does not break old segments.
    pub record_bytes_max: u32,
    /// Appended bytes buffered before an append writes them out without waiting for a
    /// durable wait to do it.
    pub buffer_bytes_max: usize,
    /// Largest snapshot written or read.
    pub snapshot_bytes_max: u64,
    /// A writer open creates the directory and an empty log when there is none.
    pub create_if_missing: bool,
    /// Zero bytes written ahead of the active segment's end, so that appends overwrite
    /// allocated blocks and an fdatasync does not also have to commit a new file size
    /// and block allocation (on ext4 that halves its latency). 0 disables it. The zeros
    /// are cut off when a segment is sealed or the log closed.
    pub preallocate_bytes: u64,
    /// The owner's payload format, written in every segment and snapshot header this
    /// handle creates (0: the owner keeps none, and nothing is checked).
    pub content_version: u32,
    /// The oldest payload format the owner reads. Open refuses a log holding a segment or
    /// a snapshot of another format ([`Error::ContentVersion`]) instead of handing its
    /// bytes to an owner that would misread them; the owner learns what it holds from
    /// [`OpenReport::content_versions`]. Format 0 (files written before the format was
    /// recorded) is read only when this is 0.
    pub oldest_content_version: u32,
}

impl Options {
    /// Default options for a log named `name`.
    pub fn new(name: impl Into<String>) -> Options {
        Options {
            name: name.into(),
            segment_bytes_max: SEGMENT_BYTES_MAX_DEFAULT,
            record_bytes_max: RECORD_BYTES_MAX_DEFAULT,
            buffer_bytes_max: BUFFER_BYTES_MAX_DEFAULT,
            snapshot_bytes_max: SNAPSHOT_BYTES_MAX_DEFAULT,
            create_if_missing: true,
            preallocate_bytes: PREALLOCATE_BYTES_DEFAULT,
            content_version: 0,
            oldest_content_version: 0,
        }
    }

    /// Whether the owner reads payloads of format `found`.
    fn reads_content_version(&self, found: u32) -> bool {
        (self.oldest_content_version..=self.content_version).contains(&found)
    }

    /// The error for a file of payload format `found`, if the owner does not read it.
    fn check_content_version(&self, path: &Path, found: u32) -> Result<()> {
        if self.reads_content_version(found) {
            return Ok(());
        }
        Err(Error::ContentVersion {
            path: path.to_path_buf(),
            found,
            oldest: self.oldest_content_version,
            newest: self.content_version,
        })
    }

    fn validate(&self) -> Result<()> {
        let invalid = |reason: String| Err(Error::InvalidOptions { reason });
        let name = &self.name;
        if name.is_empty() || name.len() > NAME_BYTES_MAX || name == "." || name == ".." {
            return invalid(format!("name {name:?} must be 1 to {NAME_BYTES_MAX} bytes and not . or .."));
        }
        if name.contains(['/', '\0']) {
            return invalid(format!("name {name:?} must not contain '/' or NUL"));
        }
        if self.segment_bytes_max < SEGMENT_BYTES_MIN {
            return invalid(format!(
                "segment_bytes_max {} is below {SEGMENT_BYTES_MIN}",
                self.segment_bytes_max
            ));
        }
        if self.oldest_content_version > self.content_version {
            return invalid(format!(
                "oldest_content_version {} is above content_version {}",
                self.oldest_content_version, self.content_version
            ));
        }
        if self.record_bytes_max > RECORD_BYTES_LIMIT {
            return invalid(format!(
                "record_bytes_max {} is above {RECORD_BYTES_LIMIT}",
                self.record_bytes_max
            ));
        }
        Ok(())
    }
}

/// What never changes after open.
#[derive(Debug)]
struct Config {
    dir: PathBuf,
    log_id: LogId,
    options: Options,
    writable: bool,
}

/// Appends and rounds, under the state mutex.
#[derive(Debug)]
struct State {
    /// Encoded records not yet handed to the OS, positions `written_end..next`.
    pending: Vec<u8>,
    /// An empty buffer kept to swap with `pending`, so that rounds do not allocate.
    spare: Vec<u8>,
    /// Position the next append gets.
    next: u64,
    /// Records before this position have been written to the file.
    written_end: u64,
    /// Records before this position are durable.
    durable_end: u64,
    /// A round is running (its leader owns `Io`).
    io_busy: bool,
    /// Threads sleeping in `wait_durable` until the running round ends.
    waiters: Vec<Waiter>,
    /// The failure that stopped the log.
    failure: Option<Arc<Error>>,
    /// The newest good snapshot.
    snapshot: Option<Position>,
    n_appends: u64,
    n_fsyncs: u64,
}

/// A thread sleeping in `wait_durable`, woken by the leader of the round that ends.
#[derive(Debug)]
struct Waiter {
    /// The position it waits for.
    position: u64,
    thread: Thread,
    /// `SIGNAL_WAITING` until the leader sets it, then why it was woken.
    signal: Arc<AtomicU8>,
}

/// The waiter has not been woken yet (a wake-up seen in this state is spurious).
const SIGNAL_WAITING: u8 = 0;
/// The waiter's position is durable; it returns without taking the state mutex.
const SIGNAL_DURABLE: u8 = 1;
/// The waiter must look again under the mutex: it is to lead the next round, or the log
/// stopped.
const SIGNAL_RECHECK: u8 = 2;

/// The files, owned by the leader of the running round.
#[derive(Debug)]
struct Io {
    /// Every segment on disk, oldest first; the last is the active one.
    segments: Vec<SegmentMeta>,
    /// The active segment, open for writing (None when read-only).
    active: Option<File>,
    /// Bytes of the active segment holding valid records; the next write goes here.
    last_end: u64,
    /// Length of the active segment file: `last_end` plus preallocated zeros.
    allocated_end: u64,
    /// Bytes were written to the active segment since its last fsync.
    dirty: bool,
    /// The content version in the active segment's header: records of another are never
    /// appended to it (the next write starts a segment of the handle's own first).
    active_content_version: u32,
}

/// Zeros written by [`write_zeros`], one piece at a time: a log preallocates a segment's
/// next stretch every few hundred kilobytes of records, and a fresh zeroed buffer of its
/// size for each was page faults and kernel zeroing on the commit path.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// Writes zeros into `file` from offset `from` up to `to`.
fn write_zeros(file: &File, from: u64, to: u64) -> std::io::Result<()> {
    let mut at = from;
    while at < to {
        let piece = (to - at).min(ZEROS.len() as u64);
        file.write_all_at(&ZEROS[..piece as usize], at)?;
        at += piece;
    }
    Ok(())
}

impl Io {
    /// Writes a batch (positions from `batch_first` on) to the end of the log, rotating
    /// first if the active segment is full, then fsyncs if asked. Returns the number of
    /// fsyncs made.
    fn write_batch(
        &mut self,
        config: &Config,
        batch: &[u8],
        batch_first: Position,
        sync: bool,
    ) -> Result<u64> {
        let mut n_fsyncs = 0;
        if !batch.is_empty() {
            if self.active_content_version != config.options.content_version {
                n_fsyncs += self.start_own_segment(config, batch_first)?;
            } else if self.last_end >= config.options.segment_bytes_max {
                n_fsyncs += self.rotate(config, batch_first)?;
            }
            let path = &self.segments.last().expect("a log always has a segment").path;
            let file = self.active.as_ref().expect("only a writer writes");
            if let Err(error) = file.write_all_at(batch, self.last_end) {
                // A full file system: part of the batch may be in the file past
                // `last_end`, counted nowhere; the retry writes over it, and a crash
                // before then leaves a torn tail that the next open cuts off.
                if let Ok(metadata) = file.metadata() {
                    self.allocated_end = self.allocated_end.max(metadata.len());
                }
                return Err(Error::io("write", path)(error).no_space_before_fsync());
            }
            self.last_end += batch.len() as u64;
            self.allocated_end = self.allocated_end.max(self.last_end);
            self.dirty = true;
            let preallocate_bytes = config.options.preallocate_bytes;
            if preallocate_bytes > 0 && self.allocated_end - self.last_end < preallocate_bytes / 2 {
                let target = (self.last_end + preallocate_bytes).min(config.options.segment_bytes_max);
                if target > self.allocated_end {
                    match write_zeros(file, self.allocated_end, target) {
                        Ok(()) => self.allocated_end = target,
                        // Preallocation only makes fsyncs cheaper: on a full file system
                        // the log goes on without it (what it managed to write is zeros
                        // past the records, cut off like any preallocated space).
                        Err(error) if crate::error::is_full(&error) => {
                            if let Ok(metadata) = file.metadata() {
                                self.allocated_end = self.allocated_end.max(metadata.len());
                            }
                        }
                        Err(error) => return Err(Error::io("preallocate", path)(error)),
                    }
                }
            }
        }
        if sync && self.dirty {
            let path = &self.segments.last().expect("a log always has a segment").path;
            let file = self.active.as_ref().expect("only a writer writes");
            file.sync_data().map_err(Error::io("fsync", path))?;
            lava_crash::synced_len(path, self.last_end);
            self.dirty = false;
            n_fsyncs += 1;
        }
        Ok(n_fsyncs)
    }

    /// Cuts the preallocated zeros off the active segment and makes it durable.
    fn trim(&mut self) -> Result<u64> {
        let path = &self.segments.last().expect("a log always has a segment").path;
        let file = self.active.as_ref().expect("only a writer trims");
        if self.allocated_end > self.last_end {
            file.set_len(self.last_end).map_err(Error::io("truncate preallocated space", path))?;
            self.allocated_end = self.last_end;
            self.dirty = true;
        }
        if !self.dirty {
            return Ok(0);
        }
        // sync_all: the file size changed, and a sealed segment must be complete on disk.
        file.sync_all().map_err(Error::io("fsync", path))?;
        lava_crash::synced_len(path, self.last_end);
        self.dirty = false;
        Ok(1)
    }

    /// The active segment was written in another content version (by an older build):
    /// records of this handle's go to a segment of their own, so that every header names
    /// the format of the records behind it. An active segment without records is replaced
    /// by one of this version instead of sealed (a sealed segment is never empty).
    fn start_own_segment(&mut self, config: &Config, first: Position) -> Result<u64> {
        let last = self.segments.last().expect("a log always has a segment");
        if first > last.first_position {
            return self.rotate(config, first);
        }
        let header = SegmentHeader {
            log_id: config.log_id,
            segment_number: last.number,
            first_position: first,
            record_bytes_max: config.options.record_bytes_max,
            content_version: config.options.content_version,
        };
        let file_name = dir::segment_file_name(&config.options.name, last.number);
        let file = dir::create_durably(&config.dir, &file_name, &[&header.encode()])
            .map_err(Error::no_space_before_fsync)?;
        self.active = Some(file);
        self.last_end = SEGMENT_HEADER_BYTES as u64;
        self.allocated_end = self.last_end;
        self.dirty = false;
        self.active_content_version = config.options.content_version;
        Ok(1)
    }

    /// Seals the active segment (trim, fsync) and creates the next one at `first`.
    fn rotate(&mut self, config: &Config, first: Position) -> Result<u64> {
        let n_fsyncs = self.trim()?;
        let last = self.segments.last().expect("a log always has a segment");
        assert!(first > last.first_position, "a sealed segment is never empty");
        let number = last.number + 1;
        let header = SegmentHeader {
            log_id: config.log_id,
            segment_number: number,
            first_position: first,
            record_bytes_max: config.options.record_bytes_max,
            content_version: config.options.content_version,
        };
        let file_name = dir::segment_file_name(&config.options.name, number);
        // The next segment is a new file: a full file system leaves the log as it was
        // (the sealed segment stays active until the retry), and a failed fsync of the
        // new file loses nothing the log had counted.
        let file = dir::create_durably(&config.dir, &file_name, &[&header.encode()])
            .map_err(Error::no_space_before_fsync)?;
        self.segments.push(SegmentMeta { number, first_position: first, path: config.dir.join(file_name) });
        self.active = Some(file);
        self.last_end = SEGMENT_HEADER_BYTES as u64;
        self.allocated_end = self.last_end;
        self.active_content_version = config.options.content_version;
        Ok(n_fsyncs)
    }
}

/// An append-only event log; see the crate documentation. Share it between threads
/// with an `Arc`: every method takes `&self`.
#[derive(Debug)]
pub struct EventLog {
    config: Config,
    state: Mutex<State>,
    /// Signalled when a round ends, for the rare callers that need the files to themselves.
    idle: Condvar,
    /// Signalled when the buffer is taken or a round ends, for appends held back by a
    /// full buffer.
    space: Condvar,
    io: Mutex<Io>,
    /// Serialises snapshot writes, pruning and the start of a replay, so that a replay
    /// never picks a snapshot that pruning is deleting.
    snapshots: Mutex<()>,
    /// The single-writer lock, held for the handle's life (None when read-only).
    _lock: Option<File>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().expect("a thread panicked while holding an event log lock")
}

fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar.wait(guard).expect("a thread panicked while holding an event log lock")
}

/// What recovery found on disk.
struct Recovered {
    log_id: LogId,
    segments: Vec<SegmentMeta>,
    last_end: u64,
    next: Position,
    snapshot: Option<Position>,
    torn_tail: Option<TornTail>,
    rejected_snapshots: Vec<RejectedSnapshot>,
    created: bool,
    /// The oldest and newest content versions of the segments and the snapshot read.
    content_versions: (u32, u32),
    /// The content version of the last segment.
    last_content_version: u32,
}

/// The result of scanning the last segment.
struct TailScan {
    n_records: u64,
    valid_end: u64,
    torn_tail: Option<TornTail>,
}

/// Reads the last segment to its end; see the reader module for the torn-tail rule.
fn scan_last_segment(path: &Path) -> Result<TailScan> {
    let segment = open_segment(path)?;
    let file_bytes = segment.file_bytes;
    let mut reader = SegmentReader::new(segment, file_bytes);
    let mut n_records = 0;
    let mut valid_end = SEGMENT_HEADER_BYTES as u64;
    loop {
        match reader.next_step()? {
            Step::Record { offset, payload } => {
                n_records += 1;
                valid_end = offset + (RECORD_HEADER_BYTES + payload.len()) as u64;
            }
            Step::End => return Ok(TailScan { n_records, valid_end, torn_tail: None }),
            Step::Bad { offset, problem } => {
                assert_eq!(offset, valid_end, "a bad frame starts where the last good one ended");
                let record_bytes_max = reader.record_bytes_max();
                let file = reader.into_file();
                // Zeros never hold a valid frame, so a zero tail needs no forward search
                // (a crashed writer leaves its preallocated space behind).
                let kind = if all_zero(&file, path, offset, file_bytes)? {
                    TornKind::ZeroFill
                } else {
                    if let Some(next_valid_offset) =
                        find_valid_frame(&file, path, offset + 1, file_bytes, record_bytes_max)?
                    {
                        return Err(Error::Corrupt {
                            path: path.to_path_buf(),
                            offset,
                            problem,
                            next_valid_offset,
                        });
                    }
                    problem.into()
                };
                let torn_tail = TornTail {
                    path: path.to_path_buf(),
                    offset,
                    bytes: file_bytes - offset,
                    kind,
                    truncated: false,
                };
                return Ok(TailScan { n_records, valid_end, torn_tail: Some(torn_tail) });
            }
        }
    }
}

/// A fresh identity for a new log. It only has to differ between logs, so it hashes the
/// time, the pid and the directory with std's randomly keyed SipHash.
fn new_log_id(dir: &Path) -> LogId {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_nanos());
    let mut id = [0u8; 16];
    for (half_idx, half) in id.chunks_mut(8).enumerate() {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_usize(half_idx);
        hasher.write_u128(nanos);
        hasher.write_u32(std::process::id());
        hasher.write(dir.as_os_str().as_encoded_bytes());
        half.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    LogId(id)
}

/// Creates an empty log: segment 1, starting at position 1.
fn create_log(dir: &Path, options: &Options) -> Result<(Recovered, File)> {
    let log_id = new_log_id(dir);
    let header = SegmentHeader {
        log_id,
        segment_number: 1,
        first_position: Position::FIRST,
        record_bytes_max: options.record_bytes_max,
        content_version: options.content_version,
    };
    let file_name = dir::segment_file_name(&options.name, 1);
    let file = dir::create_durably(dir, &file_name, &[&header.encode()])?;
    let recovered = Recovered {
        log_id,
        segments: vec![SegmentMeta { number: 1, first_position: Position::FIRST, path: dir.join(file_name) }],
        last_end: SEGMENT_HEADER_BYTES as u64,
        next: Position::FIRST,
        snapshot: None,
        torn_tail: None,
        rejected_snapshots: Vec::new(),
        created: true,
        content_versions: (options.content_version, options.content_version),
        last_content_version: options.content_version,
    };
    Ok((recovered, file))
}

/// Checks the segments and snapshots on disk, scans the last segment and, for a writer,
/// cuts off its torn tail.
fn recover(dir: &Path, options: &Options, listing: &Listing, writable: bool) -> Result<Recovered> {
    assert!(!listing.segments.is_empty(), "recovery needs a segment");
    let mut log_id = None;
    let mut segments: Vec<SegmentMeta> = Vec::with_capacity(listing.segments.len());
    let mut versions: Option<(u32, u32)> = None;
    let mut last_content_version = 0;
    let mut note_version = |found: u32| {
        let (oldest, newest) = versions.get_or_insert((found, found));
        *oldest = (*oldest).min(found);
        *newest = (*newest).max(found);
    };
    for (number, path) in &listing.segments {
        let header = open_segment(path)?.header;
        options.check_content_version(path, header.content_version)?;
        note_version(header.content_version);
        last_content_version = header.content_version;
        if header.segment_number != *number {
            return Err(Error::Inconsistent {
                path: path.clone(),
                reason: format!("header says segment {}, file name says {number}", header.segment_number),
            });
        }
        let expected = *log_id.get_or_insert(header.log_id);
        if header.log_id != expected {
            return Err(Error::ForeignFile { path: path.clone(), expected, found: header.log_id });
        }
        if let Some(previous) = segments.last() {
            if *number != previous.number + 1 {
                return Err(Error::Inconsistent {
                    path: path.clone(),
                    reason: format!("segment {} is missing", previous.number + 1),
                });
            }
            if header.first_position <= previous.first_position {
                return Err(Error::Inconsistent {
                    path: path.clone(),
                    reason: format!(
                        "starts at position {}, not after the previous segment's start {}",
                        header.first_position, previous.first_position
                    ),
                });
            }
        }
        segments.push(SegmentMeta {
            number: *number,
            first_position: header.first_position,
            path: path.clone(),
        });
    }
    let log_id = log_id.expect("at least one segment was read");
    let last = segments.last().expect("at least one segment was read");

    let scan = scan_last_segment(&last.path)?;
    let mut torn_tail = scan.torn_tail;
    if writable {
        // Cut the torn bytes off, and make the surviving records durable: a previous
        // writer that crashed may have left them in the page cache only, and the caller
        // is about to act on them.
        let file =
            OpenOptions::new().write(true).open(&last.path).map_err(Error::io("open segment", &last.path))?;
        if let Some(torn) = torn_tail.as_mut() {
            file.set_len(scan.valid_end).map_err(Error::io("truncate torn tail", &last.path))?;
            torn.truncated = true;
        }
        file.sync_all().map_err(Error::io("fsync", &last.path))?;
        lava_crash::synced_len(&last.path, file.metadata().map_err(Error::io("stat", &last.path))?.len());
    }
    let next = Position(last.first_position.0 + scan.n_records);

    let mut snapshot = None;
    let mut rejected_snapshots = Vec::new();
    for (position, path) in listing.snapshots.iter().rev() {
        match snapshot::verify(path, log_id, *position, options.snapshot_bytes_max) {
            Ok(found) => {
                // A good snapshot of a format the owner does not read is no damage to skip
                // over: an older one would be misread the same way.
                options.check_content_version(path, found)?;
                note_version(found);
                snapshot = Some(*position);
                break;
            }
            Err(error) => {
                rejected_snapshots.push(RejectedSnapshot { path: path.clone(), reason: error.to_string() })
            }
        }
    }
    let first_available = segments[0].first_position;
    match snapshot {
        Some(position) if position >= next => {
            return Err(Error::MissingRecords {
                dir: dir.to_path_buf(),
                reason: format!("snapshot at position {position}, but the log ends before position {next}"),
            });
        }
        Some(position) if first_available > position.next() => {
            return Err(Error::MissingRecords {
                dir: dir.to_path_buf(),
                reason: format!(
                    "snapshot at position {position}, but the oldest record is {first_available}"
                ),
            });
        }
        None if first_available != Position::FIRST => {
            return Err(Error::MissingRecords {
                dir: dir.to_path_buf(),
                reason: format!(
                    "no usable snapshot ({} rejected), and the oldest record is {first_available}",
                    rejected_snapshots.len()
                ),
            });
        }
        _ => {}
    }
    Ok(Recovered {
        log_id,
        segments,
        last_end: scan.valid_end,
        next,
        snapshot,
        torn_tail,
        rejected_snapshots,
        created: false,
        content_versions: versions.expect("at least one segment was read"),
        last_content_version,
    })
}

impl EventLog {
    /// Opens the log `options.name` in `dir` for writing, creating it if it is missing
    /// (and `options.create_if_missing`), repairing a torn last record, and taking the
    /// single-writer lock. A second writer gets [`Error::Locked`].
    ///
    /// Open reads every segment header and scans the last segment; the records of
    /// sealed segments are checked when they are replayed.
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<(EventLog, OpenReport)> {
        options.validate()?;
        let dir = dir.as_ref().to_path_buf();
        if !dir.exists() {
            if !options.create_if_missing {
                return Err(Error::NotFound { dir, name: options.name });
            }
            fs::create_dir_all(&dir).map_err(Error::io("create directory", &dir))?;
            let parent =
                dir.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
            dir::sync_dir(parent)?;
        }
        let lock_file = dir::lock(&dir, &options.name)?;
        let listing = dir::list(&dir, &options.name)?;
        let mut removed_temp_files = Vec::new();
        for temp in &listing.temps {
            fs::remove_file(temp).map_err(Error::io("remove leftover temporary file", temp))?;
            removed_temp_files.push(temp.clone());
        }
        if !removed_temp_files.is_empty() {
            dir::sync_dir(&dir)?;
        }
        let (recovered, active) = if listing.segments.is_empty() {
            if !listing.snapshots.is_empty() {
                return Err(Error::MissingRecords {
                    dir,
                    reason: format!("{} snapshot(s) but no segment", listing.snapshots.len()),
                });
            }
            if !options.create_if_missing {
                return Err(Error::NotFound { dir, name: options.name });
            }
            create_log(&dir, &options)?
        } else {
            let recovered = recover(&dir, &options, &listing, true)?;
            let path = &recovered.segments.last().expect("recovery keeps a segment").path;
            let file = OpenOptions::new().write(true).open(path).map_err(Error::io("open segment", path))?;
            (recovered, file)
        };
        Ok(EventLog::assemble(dir, options, recovered, Some(active), Some(lock_file), removed_temp_files))
    }

    /// Opens the log for reading only (for tools such as `bhist`, possibly while the
    /// writer runs): no lock, no repair, no temporary-file cleanup. A torn tail is
    /// reported and reading stops before it. Appends and snapshots return
    /// [`Error::ReadOnly`].
    pub fn open_read_only(dir: impl AsRef<Path>, options: Options) -> Result<(EventLog, OpenReport)> {
        options.validate()?;
        let dir = dir.as_ref().to_path_buf();
        if !dir.is_dir() {
            return Err(Error::NotFound { dir, name: options.name });
        }
        let listing = dir::list(&dir, &options.name)?;
        if listing.segments.is_empty() {
            return Err(Error::NotFound { dir, name: options.name });
        }
        let recovered = recover(&dir, &options, &listing, false)?;
        Ok(EventLog::assemble(dir, options, recovered, None, None, Vec::new()))
    }

    fn assemble(
        dir: PathBuf,
        options: Options,
        recovered: Recovered,
        active: Option<File>,
        lock_file: Option<File>,
        removed_temp_files: Vec<PathBuf>,
    ) -> (EventLog, OpenReport) {
        let report = OpenReport {
            created: recovered.created,
            log_id: recovered.log_id,
            n_segments: recovered.segments.len(),
            first_position: recovered.segments[0].first_position,
            next_position: recovered.next,
            snapshot_position: recovered.snapshot,
            torn_tail: recovered.torn_tail,
            rejected_snapshots: recovered.rejected_snapshots,
            removed_temp_files,
            content_versions: recovered.content_versions,
        };
        let writable = active.is_some();
        let next = recovered.next.0;
        let state = State {
            pending: Vec::new(),
            spare: Vec::new(),
            next,
            written_end: next,
            durable_end: next,
            io_busy: false,
            waiters: Vec::new(),
            failure: None,
            snapshot: recovered.snapshot,
            n_appends: 0,
            n_fsyncs: 0,
        };
        let io = Io {
            segments: recovered.segments,
            active,
            last_end: recovered.last_end,
            allocated_end: recovered.last_end,
            dirty: false,
            active_content_version: recovered.last_content_version,
        };
        let log = EventLog {
            config: Config { dir, log_id: recovered.log_id, options, writable },
            state: Mutex::new(state),
            idle: Condvar::new(),
            space: Condvar::new(),
            io: Mutex::new(io),
            snapshots: Mutex::new(()),
            _lock: lock_file,
        };
        (log, report)
    }

    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.config.dir
    }

    /// The log's identity.
    pub fn log_id(&self) -> LogId {
        self.config.log_id
    }

    /// Counters since open, and the current positions.
    pub fn stats(&self) -> Stats {
        let state = lock(&self.state);
        Stats {
            n_appends: state.n_appends,
            n_fsyncs: state.n_fsyncs,
            next_position: Position(state.next),
            durable_end: Position(state.durable_end),
            snapshot_position: state.snapshot,
        }
    }

    fn failed(&self, cause: &Arc<Error>) -> Error {
        Error::Failed { dir: self.config.dir.clone(), cause: Arc::clone(cause) }
    }

    fn check_writable(&self) -> Result<()> {
        if self.config.writable { Ok(()) } else { Err(Error::ReadOnly { dir: self.config.dir.clone() }) }
    }

    /// Appends a record to the buffer and returns its position. The record is not
    /// durable until [`wait_durable`](Self::wait_durable) returns for its position (or a
    /// later one). Safe to call from many threads at once; positions are handed out in
    /// the order records enter the buffer, which is the order they are written in.
    pub fn append(&self, payload: &[u8]) -> Result<Position> {
        self.check_writable()?;
        let max = self.config.options.record_bytes_max;
        if payload.len() > max as usize {
            return Err(Error::RecordTooLarge { bytes: payload.len(), max });
        }
        let crc = record_crc(payload);
        let framed_bytes = RECORD_HEADER_BYTES + payload.len();
        let mut state = lock(&self.state);
        loop {
            if let Some(cause) = &state.failure {
                return Err(self.failed(cause));
            }
            let fits = state.pending.len() + framed_bytes <= self.config.options.buffer_bytes_max;
            if state.pending.is_empty() || fits {
                break;
            }
            if state.io_busy {
                state = wait(&self.space, state);
            } else {
                let (returned, result) = self.run_round(state, false, |_| Ok(()));
                state = returned;
                match result {
                    // A full file system: the buffer grows past its bound rather than
                    // refuse a record; the next durable wait tries the disk again.
                    Err(error) if error.is_no_space() => break,
                    result => result?,
                }
            }
        }
        encode_record(&mut state.pending, payload, crc);
        let position = Position(state.next);
        state.next += 1;
        state.n_appends += 1;
        Ok(position)
    }

    /// Returns once the record at `position`, and every record before it, is on disk
    /// (written and fdatasync'ed). Concurrent callers share fsyncs; see the module doc.
    pub fn wait_durable(&self, position: Position) -> Result<()> {
        let mut state = lock(&self.state);
        if position.0 >= state.next {
            return Err(Error::NotAppended { position, next: Position(state.next) });
        }
        loop {
            if let Some(cause) = &state.failure {
                return Err(self.failed(cause));
            }
            if position.0 < state.durable_end {
                return Ok(());
            }
            if !state.io_busy {
                let (returned, result) = self.run_round(state, true, |_| Ok(()));
                state = returned;
                result?;
                continue;
            }
            // A round is running: sleep until its leader wakes us, either because our
            // record is durable (then return without touching the mutex, so that the
            // threads one fsync covers do not wake up only to queue on it) or to lead
            // the next round.
            let signal = Arc::new(AtomicU8::new(SIGNAL_WAITING));
            state.waiters.push(Waiter {
                position: position.0,
                thread: thread::current(),
                signal: Arc::clone(&signal),
            });
            drop(state);
            loop {
                match signal.load(Ordering::Acquire) {
                    SIGNAL_WAITING => thread::park(),
                    SIGNAL_DURABLE => return Ok(()),
                    _ => break,
                }
            }
            state = lock(&self.state);
        }
    }

    /// Appends a record and waits until it is durable.
    pub fn append_durable(&self, payload: &[u8]) -> Result<Position> {
        let position = self.append(payload)?;
        self.wait_durable(position)?;
        Ok(position)
    }

    /// Writes the records buffered so far to the file without an fsync, and says whether it
    /// did: they then outlive the process (a `kill -9`), not the machine, and readers of
    /// the file see them. Nothing happens while a round is running (it writes what it took;
    /// what was appended since waits for the next round) or when nothing is buffered.
    pub fn write_out(&self) -> Result<bool> {
        self.check_writable()?;
        let state = lock(&self.state);
        if let Some(cause) = &state.failure {
            return Err(self.failed(cause));
        }
        if state.io_busy || state.pending.is_empty() {
            return Ok(false);
        }
        let (_state, result) = self.run_round(state, false, |_| Ok(()));
        result.map(|()| true)
    }

    /// Makes every record appended so far durable.
    pub fn sync(&self) -> Result<()> {
        let next = lock(&self.state).next;
        if next == Position::FIRST.0 {
            return Ok(());
        }
        self.wait_durable(Position(next - 1))
    }

    /// Makes everything durable and closes the log, releasing the writer lock. Dropping
    /// the log instead writes buffered records without an fsync and cannot report errors.
    pub fn close(self) -> Result<()> {
        if self.config.writable {
            self.sync()?;
            self.with_files(Io::trim)?;
        }
        Ok(())
    }

    /// Runs one round as its leader: takes the buffer, writes it, fsyncs if `sync`, then
    /// runs `after` while still owning the files. Write and fsync failures stop the log;
    /// a failure of `after` is only returned.
    fn run_round<'a, R>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        sync: bool,
        after: impl FnOnce(&mut Io) -> Result<R>,
    ) -> (MutexGuard<'a, State>, Result<R>) {
        assert!(!state.io_busy, "one round at a time");
        assert!(state.failure.is_none(), "a stopped log runs no rounds");
        state.io_busy = true;
        let mut batch = std::mem::take(&mut state.spare);
        std::mem::swap(&mut batch, &mut state.pending);
        let batch_first = Position(state.written_end);
        let batch_end = state.next;
        if !batch.is_empty() {
            self.space.notify_all();
        }
        drop(state);

        let outcome = {
            let mut io = lock(&self.io);
            io.write_batch(&self.config, &batch, batch_first, sync).map(|n_fsyncs| (n_fsyncs, after(&mut io)))
        };

        let mut state = lock(&self.state);
        state.io_busy = false;
        if matches!(&outcome, Err(error) if error.is_no_space()) {
            // Nothing of the batch counts as written: it goes back in front of what
            // was appended meanwhile, in order, and the next round writes it again.
            batch.extend_from_slice(&state.pending);
            state.pending = batch;
        } else {
            batch.clear();
            state.spare = batch;
        }
        let result = match outcome {
            Ok((n_fsyncs, result)) => {
                assert!(batch_end >= state.written_end, "rounds never move backwards");
                state.written_end = batch_end;
                if sync {
                    state.durable_end = batch_end;
                }
                state.n_fsyncs += n_fsyncs;
                result
            }
            Err(error) if error.is_no_space() => Err(error),
            Err(error) => {
                let cause = Arc::new(error);
                state.failure = Some(Arc::clone(&cause));
                Err(self.failed(&cause))
            }
        };
        // Wake the waiters: first one not covered (if any), to lead the next round at
        // once, then those whose records are now durable. Everyone, if the log stopped.
        let mut wake = Vec::new();
        if state.failure.is_some() {
            wake.extend(state.waiters.drain(..).map(|waiter| (waiter, SIGNAL_RECHECK)));
        } else {
            let durable_end = state.durable_end;
            let (covered, uncovered): (Vec<Waiter>, Vec<Waiter>) =
                state.waiters.drain(..).partition(|waiter| waiter.position < durable_end);
            state.waiters = uncovered;
            if !state.waiters.is_empty() {
                wake.push((state.waiters.remove(0), SIGNAL_RECHECK));
            }
            wake.extend(covered.into_iter().map(|waiter| (waiter, SIGNAL_DURABLE)));
        }
        drop(state);
        self.idle.notify_all();
        self.space.notify_all();
        for (waiter, signal) in wake {
            waiter.signal.store(signal, Ordering::Release);
            waiter.thread.unpark();
        }
        let state = lock(&self.state);
        (state, result)
    }

    /// Owns the files for `work`, after writing out the buffer (without fsync). Returns
    /// what `work` returned and the exclusive end position of what is in the files.
    fn with_files<R>(&self, work: impl FnOnce(&mut Io) -> Result<R>) -> Result<(R, Position)> {
        let mut state = lock(&self.state);
        if !self.config.writable {
            let end = Position(state.next);
            drop(state);
            let mut io = lock(&self.io);
            return work(&mut io).map(|result| (result, end));
        }
        loop {
            if let Some(cause) = &state.failure {
                return Err(self.failed(cause));
            }
            if !state.io_busy {
                break;
            }
            state = wait(&self.idle, state);
        }
        // The end must be the one of this round's batch: once run_round has let go
        // of the state lock, another round may already have written (and rotated)
        // past what `work` saw of the files.
        let end = Position(state.next);
        let (_state, result) = self.run_round(state, false, work);
        result.map(|result| (result, end))
    }

    /// Records from `from` on, as they are now; see [`Records`].
    fn records_from(&self, from: Position) -> Result<Records> {
        let from = from.max(Position::FIRST);
        let ((segments, last_limit), end) = self.with_files(|io| Ok((io.segments.clone(), io.last_end)))?;
        let first_available = segments[0].first_position;
        if from < first_available {
            return Err(Error::Pruned { requested: from, first_available });
        }
        if from > end {
            return Err(Error::NotAppended { position: from, next: end });
        }
        let holder_idx = segments.partition_point(|segment| segment.first_position <= from) - 1;
        let segments = segments[holder_idx..].to_vec();
        Ok(Records::new(self.config.log_id, segments, last_limit, from, end))
    }

    /// Replay for recovery: the newest good snapshot, then every record after it. Records
    /// appended before this call are included (buffered ones are written out first).
    pub fn replay(&self) -> Result<Replay> {
        let _snapshots = lock(&self.snapshots);
        let position = lock(&self.state).snapshot;
        let snapshot = match position {
            Some(position) => Some(snapshot::read(
                &self.config.dir.join(dir::snapshot_file_name(&self.config.options.name, position)),
                self.config.log_id,
                position,
                self.config.options.snapshot_bytes_max,
            )?),
            None => None,
        };
        let from = position.map_or(Position::FIRST, Position::next);
        let records = self.records_from(from)?;
        Ok(Replay { snapshot, records })
    }

    /// Every record from `from` on (for history tools), ignoring snapshots. Fails with
    /// [`Error::Pruned`] if `from` was pruned.
    pub fn replay_from(&self, from: Position) -> Result<Records> {
        self.records_from(from)
    }

    /// The records from `point` on (where an earlier [`Records`] stopped:
    /// [`Records::resume_point`]), read from the byte where that one stopped rather than
    /// from the start of its segment, so that a follower of the log does not read its
    /// segment again at each turn. Fails as [`replay_from`](Self::replay_from) does.
    pub fn replay_after(&self, point: ResumePoint) -> Result<Records> {
        let from = point.position.max(Position::FIRST);
        let ((segments, last_limit), end) = self.with_files(|io| Ok((io.segments.clone(), io.last_end)))?;
        let first_available = segments[0].first_position;
        if from < first_available {
            return Err(Error::Pruned { requested: from, first_available });
        }
        if from > end {
            return Err(Error::NotAppended { position: from, next: end });
        }
        let holder_idx = segments.partition_point(|segment| segment.first_position <= from) - 1;
        let segments = segments[holder_idx..].to_vec();
        Ok(Records::resumed(
            self.config.log_id,
            segments,
            last_limit,
            ResumePoint { position: from, ..point },
            end,
        ))
    }

    /// Stores the owner's state after applying every record up to and including
    /// `position`. It first waits until that record is durable (a snapshot must never
    /// get ahead of the log), then writes the snapshot durably. Replay starts from the
    /// newest snapshot; [`prune`](Self::prune) then frees the segments it covers. A full
    /// file system is [`Error::NoSpace`]: nothing of the snapshot was kept, and the call may
    /// be repeated.
    pub fn write_snapshot(&self, position: Position, bytes: &[u8]) -> Result<()> {
        self.check_writable()?;
        let max = self.config.options.snapshot_bytes_max;
        if bytes.len() as u64 > max {
            return Err(Error::SnapshotTooLarge { bytes: bytes.len() as u64, max });
        }
        let _snapshots = lock(&self.snapshots);
        {
            let state = lock(&self.state);
            if position.0 >= state.next {
                return Err(Error::NotAppended { position, next: Position(state.next) });
            }
            if let Some(newest) = state.snapshot.filter(|newest| position < *newest) {
                return Err(Error::SnapshotNotNewer { position, newest });
            }
        }
        if position.0 > 0 {
            self.wait_durable(position)?;
        }
        snapshot::write(
            &self.config.dir,
            &self.config.options.name,
            self.config.log_id,
            position,
            bytes,
            self.config.options.content_version,
        )
        // A snapshot is written whole under a temporary name: on a full file system nothing
        // of it counts, and writing it again later is safe.
        .map_err(Error::no_space_before_fsync)?;
        lock(&self.state).snapshot = Some(position);
        Ok(())
    }

    /// Deletes the segments whose records are all covered by the newest snapshot (never
    /// the active segment), and the snapshots older than it.
    pub fn prune(&self) -> Result<PruneReport> {
        self.check_writable()?;
        let _snapshots = lock(&self.snapshots);
        let Some(covered) = lock(&self.state).snapshot else {
            return Ok(PruneReport::default());
        };
        let dir = &self.config.dir;
        let (removed_segments, _) = self.with_files(|io| {
            let mut removed = Vec::new();
            while io.segments.len() > 1 && io.segments[1].first_position <= covered.next() {
                let path = io.segments[0].path.clone();
                fs::remove_file(&path).map_err(Error::io("remove pruned segment", &path))?;
                io.segments.remove(0);
                removed.push(path);
            }
            Ok(removed)
        })?;
        let mut removed_snapshots = Vec::new();
        for (position, path) in dir::list(dir, &self.config.options.name)?.snapshots {
            if position < covered {
                fs::remove_file(&path).map_err(Error::io("remove old snapshot", &path))?;
                removed_snapshots.push(path);
            }
        }
        if !removed_segments.is_empty() || !removed_snapshots.is_empty() {
            dir::sync_dir(dir)?;
        }
        Ok(PruneReport { removed_segments, removed_snapshots })
    }
}

impl Drop for EventLog {
    fn drop(&mut self) {
        // Hand buffered records to the OS so that a clean exit keeps them (the page cache
        // outlives the process). Errors cannot be reported from here; `close` reports
        // them. The records were never promised durable, so nothing acknowledged is lost.
        let Ok(state) = self.state.get_mut() else { return };
        if !self.config.writable || state.failure.is_some() {
            return;
        }
        let batch = std::mem::take(&mut state.pending);
        let batch_first = Position(state.written_end);
        if let Ok(io) = self.io.get_mut() {
            let _ignored = io.write_batch(&self.config, &batch, batch_first, false);
            if let Some(file) = io.active.as_ref().filter(|_| io.allocated_end > io.last_end) {
                let _ignored = file.set_len(io.last_end);
            }
        }
    }
}
