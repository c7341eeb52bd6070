//! The log's directory: file names, listing, the single-writer lock, and the durable
//! file-creation protocol (temporary file, fsync, rename, directory fsync).
//!
//! Files of a log named `NAME` in its directory:
//!
//! ```text
//! NAME.lock                         advisory lock held by the one writer (empty file)
//! NAME.000001, NAME.000002, ...     segments, numbered from 1, at least six digits
//! NAME.snapshot.<20 digits>         snapshots, by the last position they cover
//! NAME.<segment or snapshot>.tmp    a file being created; removed by the next writer open
//! ```
//!
//! A segment or snapshot only ever appears under its final name complete and fsynced
//! (it is written under the `.tmp` name, fsynced, renamed, and the directory fsynced),
//! so a crash while creating one leaves at most a `.tmp` file behind. Other files in the
//! directory are left alone. This module never reads records.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::Position;

/// Digits of a segment number in a file name (more appear once numbers outgrow them).
pub(crate) const SEGMENT_DIGITS: usize = 6;
/// Digits of a snapshot position in a file name.
pub(crate) const SNAPSHOT_DIGITS: usize = 20;
const TEMP_SUFFIX: &str = ".tmp";
const SNAPSHOT_INFIX: &str = "snapshot.";

/// File name of segment `number`.
pub(crate) fn segment_file_name(name: &str, number: u64) -> String {
    format!("{name}.{number:0width$}", width = SEGMENT_DIGITS)
}

/// File name of the snapshot covering records up to `position`.
pub(crate) fn snapshot_file_name(name: &str, position: Position) -> String {
    format!("{name}.{SNAPSHOT_INFIX}{:0width$}", position.0, width = SNAPSHOT_DIGITS)
}

/// File name of the single-writer lock.
pub(crate) fn lock_file_name(name: &str) -> String {
    format!("{name}.lock")
}

/// Name under which a file is written before it is renamed into place.
pub(crate) fn temp_file_name(final_name: &str) -> String {
    format!("{final_name}{TEMP_SUFFIX}")
}

/// The log's files found in its directory.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// Segments by number, ascending.
    pub segments: Vec<(u64, PathBuf)>,
    /// Snapshots by position, ascending.
    pub snapshots: Vec<(Position, PathBuf)>,
    /// Leftovers of interrupted file creations.
    pub temps: Vec<PathBuf>,
}

enum Entry {
    Segment(u64),
    Snapshot(Position),
    Temp,
}

fn all_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit())
}

fn classify(file_name: &str, name: &str) -> Option<Entry> {
    let rest = file_name.strip_prefix(name)?.strip_prefix('.')?;
    if let Some(stem) = rest.strip_suffix(TEMP_SUFFIX) {
        let inner = format!("{name}.{stem}");
        return match classify(&inner, name) {
            Some(Entry::Segment(_) | Entry::Snapshot(_)) => Some(Entry::Temp),
            _ => None,
        };
    }
    if all_digits(rest) && rest.len() >= SEGMENT_DIGITS {
        return rest.parse().ok().map(Entry::Segment);
    }
    let digits = rest.strip_prefix(SNAPSHOT_INFIX)?;
    if all_digits(digits) && digits.len() == SNAPSHOT_DIGITS {
        return digits.parse().ok().map(|position| Entry::Snapshot(Position(position)));
    }
    None
}

/// Lists the log's segments, snapshots and temporary files in `dir`.
pub(crate) fn list(dir: &Path, name: &str) -> Result<Listing> {
    let mut listing = Listing::default();
    for entry in fs::read_dir(dir).map_err(Error::io("list directory", dir))? {
        let entry = entry.map_err(Error::io("list directory", dir))?;
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else { continue };
        match classify(file_name, name) {
            Some(Entry::Segment(number)) => listing.segments.push((number, entry.path())),
            Some(Entry::Snapshot(position)) => listing.snapshots.push((position, entry.path())),
            Some(Entry::Temp) => listing.temps.push(entry.path()),
            None => {}
        }
    }
    listing.segments.sort();
    listing.snapshots.sort();
    listing.temps.sort();
    for pair in listing.segments.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(Error::Inconsistent {
                path: pair[1].1.clone(),
                reason: format!("two files hold segment {} ({})", pair[0].0, pair[0].1.display()),
            });
        }
    }
    Ok(listing)
}

/// Makes the directory's entries (created, renamed, removed files) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    let handle = File::open(dir).map_err(Error::io("open directory", dir))?;
    handle.sync_all().map_err(Error::io("fsync directory", dir))
}

/// Creates `dir/final_name` holding `parts`, durably and atomically: written under a
/// temporary name, fsynced, renamed, then the directory fsynced. Returns the file, open
/// for writing, so that a new segment can be appended to without reopening it.
pub(crate) fn create_durably(dir: &Path, final_name: &str, parts: &[&[u8]]) -> Result<File> {
    let temp_path = dir.join(temp_file_name(final_name));
    let final_path = dir.join(final_name);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp_path)
        .map_err(Error::io("create", &temp_path))?;
    for part in parts {
        file.write_all(part).map_err(Error::io("write", &temp_path))?;
    }
    file.sync_all().map_err(Error::io("fsync", &temp_path))?;
    fs::rename(&temp_path, &final_path).map_err(Error::io("rename into place", &final_path))?;
    sync_dir(dir)?;
    lava_crash::synced_len(&final_path, parts.iter().map(|part| part.len() as u64).sum());
    Ok(file)
}

/// Takes the single-writer lock of log `name` in `dir`, or says who holds it.
///
/// The lock is an advisory `flock`-style lock (std's `File::try_lock`) on `NAME.lock`,
/// released when the returned file is closed, including when the process dies, so a
/// crashed writer never leaves a stale lock behind.
pub(crate) fn lock(dir: &Path, name: &str) -> Result<File> {
    let lock_path = dir.join(lock_file_name(name));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(Error::io("open lock file", &lock_path))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => {
            Err(Error::Locked { dir: dir.to_path_buf(), name: name.to_string(), lock_path })
        }
        Err(TryLockError::Error(source)) => Err(Error::Io { operation: "lock", path: lock_path, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_the_classifier() {
        // Goal: every file name this module produces is recognised as what it is, and
        // foreign names are ignored. Method: classify generated and hand-written names.
        let name = "lsb.events";
        assert!(matches!(classify(&segment_file_name(name, 3), name), Some(Entry::Segment(3))));
        assert!(matches!(
            classify(&segment_file_name(name, 12_345_678), name),
            Some(Entry::Segment(12_345_678))
        ));
        assert!(matches!(
            classify(&snapshot_file_name(name, Position(77)), name),
            Some(Entry::Snapshot(Position(77)))
        ));
        assert!(matches!(classify(&temp_file_name(&segment_file_name(name, 3)), name), Some(Entry::Temp)));
        for foreign in ["lsb.events", "lsb.events.lock", "lsb.events.12", "other.000001", "lsb.events.x.tmp"]
        {
            assert!(classify(foreign, name).is_none(), "{foreign} should be ignored");
        }
    }
}
