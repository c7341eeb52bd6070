//! [`Space`]: whether a daemon's state file system has room, and the reserve that gives
//! the daemon room of its own when it has none (docs/operations.md, "A full disk").
//!
//! A stateful daemon (mbatchd, sbatchd) keeps a *reserve file*, `.lava-reserve` in its
//! state folder: `LAVA_STATE_RESERVE_MB` of zeros written and fsynced at start. Its state
//! file system can still fill up, with a job's output, a log, another program: then the
//! daemon is *full*. It releases the reserve (deletes the file), which gives its own
//! records that much room; it refuses new work (each daemon says how) while it goes on
//! serving queries and every job it already has. When the file system has room again, it
//! writes the reserve back and is no longer full.
//!
//! The daemon asks [`Space::check`] every second, and tells [`Space::no_space`] about a
//! write that failed with ENOSPC or EDQUOT. Full is entered when the free space (what an
//! unprivileged writer could use: `f_bavail`) falls below [`Space::low_mark`] or a write
//! fails for space; it is left when the free space reaches the reserve plus twice the low
//! mark, so that writing the reserve back does not make the daemon full again at once.
//! Each change is reported once ([`Change`]); the daemon logs it.
//!
//! This component never decides what "new work" is, and never deletes anything but its
//! own reserve file.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The reserve file's name inside the daemon's state folder.
pub const RESERVE_FILE: &str = ".lava-reserve";
/// The low mark when the reserve is small (or none): below this much free space the
/// daemon is full whatever its reserve.
pub const LOW_MARK_MIN: u64 = 256 << 10;
/// Bytes written per call while writing the reserve.
const CHUNK_BYTES: usize = 1 << 20;

/// A change of [`Space::is_full`], to log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The daemon became full: `available` bytes were free, and the reserve (`released`
    /// bytes) was given back to the file system for the daemon's own records.
    Full {
        /// Free bytes when it was found full.
        available: u64,
        /// The reserve released (0: there was none).
        released: u64,
    },
    /// Space returned: `available` bytes are free and the reserve is written again.
    Room {
        /// Free bytes before the reserve was written back.
        available: u64,
    },
}

/// The state file system of one daemon; see the module doc.
#[derive(Debug)]
pub struct Space {
    dir: PathBuf,
    reserve_bytes: u64,
    /// The reserve file exists, whole and fsynced.
    reserved: bool,
    full: bool,
}

impl Space {
    /// Watches the file system of `dir` with a reserve of `reserve_bytes`, writing the
    /// reserve now when there is room for it (and starting full when there is not). An
    /// error is one that is not about space (the folder cannot be reached).
    pub fn open(dir: &Path, reserve_bytes: u64) -> io::Result<Space> {
        let mut space = Space { dir: dir.to_owned(), reserve_bytes, reserved: false, full: false };
        let path = space.reserve_path();
        // A reserve left by an earlier run counts only if it is whole.
        match fs::metadata(&path) {
            Ok(metadata) if metadata.len() == reserve_bytes && reserve_bytes > 0 => space.reserved = true,
            Ok(_) => fs::remove_file(&path)?,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        if !space.reserved && space.available()? >= space.room_mark() {
            match space.write_reserve() {
                Ok(()) => {}
                // Someone else took the room meanwhile: no reserve, full from the start.
                Err(error) if is_full(&error) => {}
                Err(error) => return Err(error),
            }
        }
        let available = space.available()?;
        if !space.reserved && reserve_bytes > 0 {
            // No room for the reserve: full from the start.
            space.full = true;
        } else if available < space.low_mark() {
            // Full with a reserve left by an earlier run: it is released now, as at any
            // other moment the daemon finds itself full.
            space.become_full(available);
        }
        Ok(space)
    }

    /// Whether the daemon is full (see the module doc).
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// The reserve's size in bytes.
    pub fn reserve_bytes(&self) -> u64 {
        self.reserve_bytes
    }

    /// Free space below which the daemon is full: half the reserve, at least
    /// [`LOW_MARK_MIN`].
    pub fn low_mark(&self) -> u64 {
        (self.reserve_bytes / 2).max(LOW_MARK_MIN)
    }

    /// Free space at which a full daemon writes its reserve back.
    fn room_mark(&self) -> u64 {
        self.reserve_bytes + 2 * self.low_mark()
    }

    /// Free bytes of the file system for an unprivileged writer.
    pub fn available(&self) -> io::Result<u64> {
        let stat = rustix::fs::statvfs(&self.dir).map_err(io::Error::from)?;
        Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
    }

    /// Looks at the free space (every second): becomes full below the low mark, and has
    /// room again once the reserve could be written back. A failed `statvfs` changes
    /// nothing (it is logged by the caller, from the error).
    pub fn check(&mut self) -> io::Result<Option<Change>> {
        let available = self.available()?;
        if !self.full {
            if available < self.low_mark() {
                return Ok(Some(self.become_full(available)));
            }
            return Ok(None);
        }
        if available < self.room_mark() {
            return Ok(None);
        }
        match self.write_reserve() {
            Ok(()) => {
                self.full = false;
                Ok(Some(Change::Room { available }))
            }
            // Someone else took the room meanwhile: still full, try again next time.
            Err(error) if is_full(&error) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// A write of the daemon failed for space: it is full now (if it was not already),
    /// and its reserve is released.
    pub fn no_space(&mut self) -> Option<Change> {
        if self.full && !self.reserved {
            return None;
        }
        let available = self.available().unwrap_or(0);
        Some(self.become_full(available))
    }

    fn become_full(&mut self, available: u64) -> Change {
        self.full = true;
        let released = if self.reserved {
            match fs::remove_file(self.reserve_path()) {
                Ok(()) => {
                    self.reserved = false;
                    self.reserve_bytes
                }
                Err(error) => {
                    tracing::warn!(
                        "cannot release the space reserve {}: {error}",
                        self.reserve_path().display()
                    );
                    0
                }
            }
        } else {
            0
        };
        Change::Full { available, released }
    }

    fn reserve_path(&self) -> PathBuf {
        self.dir.join(RESERVE_FILE)
    }

    /// Writes the reserve file (zeros, then fsync); removes what it wrote if that fails.
    fn write_reserve(&mut self) -> io::Result<()> {
        if self.reserve_bytes == 0 {
            return Ok(());
        }
        let path = self.reserve_path();
        let result = (|| {
            let mut file =
                OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&path)?;
            let zeros = vec![0u8; CHUNK_BYTES];
            let mut left = self.reserve_bytes;
            while left > 0 {
                let n = left.min(CHUNK_BYTES as u64) as usize;
                file.write_all(&zeros[..n])?;
                left -= n as u64;
            }
            file.sync_all()
        })();
        match result {
            Ok(()) => {
                self.reserved = true;
                Ok(())
            }
            Err(error) => {
                let _ = fs::remove_file(&path);
                Err(error)
            }
        }
    }
}

/// Whether an I/O error says the file system (or the user's quota) is full.
pub fn is_full(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: with room, the reserve is written at once and the daemon is not full; a write
    // failing for space makes it full and releases the reserve exactly once; a check with
    // room writes the reserve back. Method: a reserve of 64 KiB on the test's temporary
    // folder (which has far more room than the marks), driven through no_space and check.
    #[test]
    fn the_reserve_is_released_when_full_and_written_back_with_room() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut space = Space::open(dir.path(), 64 << 10).expect("opens");
        let reserve = dir.path().join(RESERVE_FILE);
        assert!(!space.is_full());
        assert_eq!(fs::metadata(&reserve).expect("written").len(), 64 << 10);
        assert_eq!(space.check().expect("statvfs"), None, "room: nothing changes");

        let Some(Change::Full { released, .. }) = space.no_space() else { panic!("becomes full") };
        assert_eq!(released, 64 << 10);
        assert!(space.is_full() && !reserve.exists());
        assert_eq!(space.no_space(), None, "reported once");

        assert!(matches!(space.check().expect("statvfs"), Some(Change::Room { .. })));
        assert!(!space.is_full());
        assert_eq!(fs::metadata(&reserve).expect("written back").len(), 64 << 10);

        // A reopen keeps a whole reserve and replaces a cut one.
        drop(space);
        let space = Space::open(dir.path(), 64 << 10).expect("reopens");
        assert!(!space.is_full());
        assert_eq!(fs::metadata(&reserve).expect("kept").len(), 64 << 10);
        drop(space);
        fs::write(&reserve, b"cut").expect("cut");
        let space = Space::open(dir.path(), 64 << 10).expect("reopens");
        assert!(!space.is_full());
        assert_eq!(fs::metadata(&reserve).expect("rewritten").len(), 64 << 10);
    }
}
