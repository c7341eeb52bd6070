//! What mbatchd's two text logs share, `lsb.acct` ([`crate::acct`]) and the
//! `lsb.events` text view ([`crate::events_view`]): both are derived from the event
//! log, written by a thread of their own that never blocks the loop, appended in
//! batches and made durable (`fdatasync`), retried every second while the disk
//! refuses them, and switched as LSF switches its logs.
//!
//! # Files
//! `NAME` in the event log's folder is the current file; switching renames it to
//! `NAME.1` (the older ones shift to `.2`, `.3`, ...; those beyond the kept number
//! are deleted) and the next batch starts a new `NAME`. The binary event log's own
//! files are `lsb.events.<six digits or more>`, `lsb.events.snapshot.*` and
//! `lsb.events.lock`: a switched text file never takes such a name
//! ([`SWITCHED_MAX`]).
//!
//! # A failed write
//! A batch that could not be written in full is cut back (the file is truncated to
//! its length before the batch), so that its retry writes no line twice.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// The highest number a switched file gets: five digits at most, so that
/// `lsb.events.N` never looks like a segment of the binary log (six digits or more).
pub const SWITCHED_MAX: u32 = 99_999;

/// The path of file `name` in `dir`, or of its switched file `n` (`name.n`) for `n > 0`.
pub fn path(dir: &Path, name: &str, n: u32) -> PathBuf {
    if n == 0 { dir.join(name) } else { dir.join(format!("{name}.{n}")) }
}

/// Opens `path` for appending, creating it with mode 0644.
pub fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().append(true).create(true).mode(0o644).open(path)
}

/// Appends `batch` to `path` and makes it durable; returns the file's new length. On
/// failure the file is cut back to its length before the batch.
pub fn append_durably(path: &Path, batch: &str) -> io::Result<u64> {
    let mut file = open_append(path)?;
    let before = file.metadata()?.len();
    let written = file.write_all(batch.as_bytes()).and_then(|()| file.sync_data());
    if let Err(error) = written {
        let _ = file.set_len(before);
        return Err(error);
    }
    Ok(before + batch.len() as u64)
}

/// Switches `name` in `dir`: `name` becomes `name.1`, the older files one up, those
/// beyond `max_files` (and [`SWITCHED_MAX`]) deleted; the folder is then synced.
/// Nothing happens when `name` does not exist.
pub fn switch(dir: &Path, name: &str, max_files: Option<u32>) -> io::Result<()> {
    if !path(dir, name, 0).exists() {
        return Ok(());
    }
    let keep = max_files.unwrap_or(SWITCHED_MAX).min(SWITCHED_MAX);
    let mut highest = 0;
    while highest < SWITCHED_MAX && path(dir, name, highest + 1).exists() {
        highest += 1;
    }
    for n in (1..=highest).rev() {
        if n + 1 > keep {
            fs::remove_file(path(dir, name, n))?;
        } else {
            fs::rename(path(dir, name, n), path(dir, name, n + 1))?;
        }
    }
    if keep == 0 {
        fs::remove_file(path(dir, name, 0))?;
    } else {
        fs::rename(path(dir, name, 0), path(dir, name, 1))?;
    }
    File::open(dir)?.sync_all()
}

/// The least time between two batches of a text log's writer ([`serve`]): each batch costs
/// two fsyncs (the text and, for the view, its progress file), and a busy master commits
/// hundreds of small groups a second. These files are derived, never the truth, so they
/// may trail the event log by this much (docs/operations.md, "The lsb.events text view").
pub const PACE: Duration = Duration::from_millis(20);

/// The writer thread's loop: waits for items, takes every item that has arrived and
/// hands them to `apply` in one batch; while `apply` fails, logs once and tries again
/// every second with the items it left in the batch (and those arrived meanwhile): an
/// `apply` that takes items out keeps what they carried itself. Returns when every
/// sender is gone and the last batch is applied.
/// Batches follow each other [`PACE`] apart at least: an item after a quiet spell is
/// written at once, a busy log gathers what comes meanwhile into one write and one fsync.
pub fn serve<T>(what: &str, items: &mpsc::Receiver<T>, mut apply: impl FnMut(&mut Vec<T>) -> io::Result<()>) {
    let mut batch = Vec::new();
    let mut failing = false;
    let mut last_batch: Option<std::time::Instant> = None;
    while let Ok(item) = items.recv() {
        batch.push(item);
        if let Some(wait) =
            last_batch.and_then(|at| (at + PACE).checked_duration_since(std::time::Instant::now()))
        {
            std::thread::sleep(wait);
        }
        batch.extend(items.try_iter());
        loop {
            match apply(&mut batch) {
                Ok(()) => {
                    if failing {
                        tracing::warn!("{what} is written again");
                        failing = false;
                    }
                    break;
                }
                Err(error) => {
                    if !failing {
                        tracing::error!("writing {what} failed: {error}; tried again every second");
                        failing = true;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                    batch.extend(items.try_iter());
                }
            }
        }
        batch.clear();
        last_batch = Some(std::time::Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switch_shifts_and_keeps_the_limit() {
        // Goal: a switch renames NAME to NAME.1, shifts the older ones up and deletes
        // those beyond the kept number; a missing NAME switches nothing.
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        for (n, text) in [(0, "c"), (1, "b"), (2, "a")] {
            fs::write(path(d, "log", n), text).expect("write");
        }
        switch(d, "log", Some(2)).expect("switch");
        assert!(!path(d, "log", 0).exists());
        assert_eq!(fs::read_to_string(path(d, "log", 1)).expect("read"), "c");
        assert_eq!(fs::read_to_string(path(d, "log", 2)).expect("read"), "b");
        assert!(!path(d, "log", 3).exists(), "beyond the limit: deleted");
        switch(d, "log", Some(2)).expect("nothing to switch");
        assert_eq!(fs::read_to_string(path(d, "log", 1)).expect("read"), "c");
    }

    #[test]
    fn append_returns_the_new_length() {
        // Goal: batches are appended in order and the length reported is the file's.
        let dir = tempfile::tempdir().expect("tempdir");
        let file = path(dir.path(), "log", 0);
        assert_eq!(append_durably(&file, "a\n").expect("append"), 2);
        assert_eq!(append_durably(&file, "bc\n").expect("append"), 5);
        assert_eq!(fs::read_to_string(&file).expect("read"), "a\nbc\n");
    }
}
