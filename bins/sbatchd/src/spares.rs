//! Spare state folders: job folders made durable ahead of need, so that a new job's first
//! record costs one flush instead of three (docs/batch.md, "Spare state folders").
//!
//! A spare is `state/.spare.<n>/` holding three empty files: `record.first`, `pid` and
//! `exit`. A thread of sbatchd ([`Spares::keep_filled`]) makes them in batches: it creates
//! the folders and files, fsyncs each folder, then `state/` once, and only then offers
//! them. A new job takes one ([`Spares::take`]) and renames it to the job's name; its first
//! record is then written in place into `record.first` with one fdatasync, and nothing
//! else is flushed: the folder and its files were durable already. Later records of the
//! job are written as always (`record` through a temporary file, crate::store).
//!
//! The rename itself is not flushed, so a crash of the machine may bring the folder back
//! under its spare name. [`classify`] recognises that at start: a spare-named folder that
//! holds a record is that job's folder, and is renamed back to its name. `record.first`
//! is only written into a folder that is the job's own, and is acted on (the reply to
//! mbatchd, the job's start) only after its fdatasync has returned; so one that does not
//! decode was cut short by a crash before anything relied on it, and counts as absent
//! (crate::store). A spare-named folder without a record that is not exactly as made
//! (three empty files) is removed.
//!
//! Should the thread fall behind, or fail (it logs and tries again), a new job's folder is
//! made as before, at its commit, with its flushes.

use std::fs::{self, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::layout::{self, EXIT_FILE, FIRST_RECORD_FILE, PID_FILE};

/// The files of a spare, all empty.
pub const SPARE_FILES: [&str; 3] = [FIRST_RECORD_FILE, PID_FILE, EXIT_FILE];
/// Below this many spares the thread makes more.
pub const SPARES_LOW: usize = 16;
/// The thread fills the pool up to this many.
pub const SPARES_HIGH: usize = 48;
/// Folders fsynced at once by the thread.
const FSYNC_THREADS: usize = 4;
/// Pause before the thread tries again after a failure.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// The pool of spare state folders of one host.
#[derive(Debug)]
pub struct Spares {
    state_root: PathBuf,
    /// Names of durable spares, ready to be taken.
    ready: Mutex<Vec<String>>,
    /// Signalled when the pool runs low.
    low: Condvar,
    /// The number of the next spare made.
    next: AtomicU64,
    /// fsyncs made, shared with the store's count.
    fsyncs: Arc<AtomicU64>,
}

impl Spares {
    /// An empty pool for `state_root`, counting its fsyncs in `fsyncs`.
    pub fn new(state_root: PathBuf, fsyncs: Arc<AtomicU64>) -> Spares {
        Spares {
            state_root,
            ready: Mutex::new(Vec::new()),
            low: Condvar::new(),
            next: AtomicU64::new(0),
            fsyncs,
        }
    }

    /// Offers the spares found at start ([`classify`]); new ones are numbered after them.
    pub fn adopt(&self, found: Vec<(u64, String)>) {
        let next = found.iter().map(|(n, _)| n + 1).max().unwrap_or(0);
        self.next.fetch_max(next, Ordering::Relaxed);
        self.lock().extend(found.into_iter().map(|(_, name)| name));
    }

    /// Takes a spare (its name in `state/`), if one is ready; wakes the thread when the
    /// pool runs low.
    pub fn take(&self) -> Option<String> {
        let mut ready = self.lock();
        let taken = ready.pop();
        if ready.len() < SPARES_LOW {
            self.low.notify_one();
        }
        taken
    }

    /// Spares ready now.
    pub fn n_ready(&self) -> usize {
        self.lock().len()
    }

    /// The thread's loop (never returns): whenever fewer than [`SPARES_LOW`] spares are
    /// ready, makes enough to have [`SPARES_HIGH`]; a failure is logged, and tried again
    /// after a pause.
    pub fn keep_filled(&self) {
        loop {
            let wanted = {
                let mut ready = self.lock();
                while ready.len() >= SPARES_LOW {
                    ready = self.low.wait(ready).unwrap_or_else(|poisoned| poisoned.into_inner());
                }
                SPARES_HIGH - ready.len()
            };
            match self.make(wanted) {
                Ok(made) => self.lock().extend(made),
                Err(err) => {
                    tracing::warn!(
                        folder = %self.state_root.display(),
                        "cannot make spare job folders: {err}; new jobs make their own meanwhile"
                    );
                    std::thread::sleep(RETRY_PAUSE);
                }
            }
        }
    }

    /// Makes `n` spares durable (see the module doc) and returns their names.
    pub fn make(&self, n: usize) -> io::Result<Vec<String>> {
        let mut names = Vec::with_capacity(n);
        for _ in 0..n {
            let name = layout::spare_name(self.next.fetch_add(1, Ordering::Relaxed));
            let dir = self.state_root.join(&name);
            if !layout::create_new_private_dir(&dir)? {
                // Left by something else: not ours to use.
                continue;
            }
            for file in SPARE_FILES {
                let opened =
                    OpenOptions::new().write(true).create_new(true).mode(0o600).open(dir.join(file))?;
                if layout::SHEPHERD_FILES.contains(&file) {
                    layout::reserve_blocks(&opened);
                }
            }
            names.push(name);
        }
        let n_threads = names.len().clamp(1, FSYNC_THREADS);
        let results: Vec<io::Result<()>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..n_threads)
                .map(|first| {
                    let names = &names;
                    scope.spawn(move || {
                        names
                            .iter()
                            .skip(first)
                            .step_by(n_threads)
                            .try_for_each(|name| layout::fsync_dir(&self.state_root.join(name)))
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| worker.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        results.into_iter().collect::<io::Result<()>>()?;
        layout::fsync_dir(&self.state_root)?;
        self.fsyncs.fetch_add(names.len() as u64 + 1, Ordering::Relaxed);
        Ok(names)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.ready.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What a spare-named folder found at start is.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// A spare as made, with its number: it can be offered again.
    Spare(u64),
    /// Anything else without a record (a spare cut short, or used by a launch whose
    /// record never became durable): to be removed.
    Leftover,
}

/// Classifies a spare-named folder that holds no record (the caller has looked for one):
/// a spare exactly as made — its files, all empty, and nothing else — or a leftover.
pub fn classify(dir: &Path, name: &str) -> io::Result<Found> {
    let Some(number) = layout::spare_number(name) else { return Ok(Found::Leftover) };
    let mut n_files = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let file_name = entry.file_name();
        let known = SPARE_FILES.iter().any(|file| file_name == *file);
        if !known || !entry.file_type()?.is_file() || entry.metadata()?.len() != 0 {
            return Ok(Found::Leftover);
        }
        n_files += 1;
    }
    Ok(if n_files == SPARE_FILES.len() { Found::Spare(number) } else { Found::Leftover })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: make gives durable, numbered spares of three empty files; take hands them out
    // until none is left; classify accepts exactly such a folder and calls anything else a
    // leftover; adopt numbers new spares after the ones found.
    #[test]
    fn spares_are_made_taken_and_recognised() {
        let top = tempfile::tempdir().expect("tempdir");
        let root = top.path().to_path_buf();
        let fsyncs = Arc::new(AtomicU64::new(0));
        let spares = Spares::new(root.clone(), Arc::clone(&fsyncs));
        let made = spares.make(3).expect("make");
        assert_eq!(made, vec![".spare.0", ".spare.1", ".spare.2"]);
        assert_eq!(fsyncs.load(Ordering::Relaxed), 4, "each folder, then state/");
        for name in &made {
            assert_eq!(
                classify(&root.join(name), name).expect("classify"),
                Found::Spare(layout::spare_number(name).expect("numbered"))
            );
        }
        spares.adopt(vec![(7, ".spare.7".to_owned())]);
        assert_eq!(spares.take().as_deref(), Some(".spare.7"));
        assert_eq!(spares.take(), None, "made spares are offered by keep_filled, not by make");
        assert_eq!(spares.make(1).expect("make"), vec![".spare.8"]);

        let written = root.join(".spare.0");
        fs::write(written.join(PID_FILE), b"x").expect("write");
        assert_eq!(classify(&written, ".spare.0").expect("classify"), Found::Leftover);
        let short = root.join(".spare.1");
        fs::remove_file(short.join(EXIT_FILE)).expect("rm");
        assert_eq!(classify(&short, ".spare.1").expect("classify"), Found::Leftover);
        let extra = root.join(".spare.2");
        fs::write(extra.join("other"), b"").expect("write");
        assert_eq!(classify(&extra, ".spare.2").expect("classify"), Found::Leftover);
        let badly_named = root.join(".spare.x");
        fs::create_dir(&badly_named).expect("mkdir");
        assert_eq!(classify(&badly_named, ".spare.x").expect("classify"), Found::Leftover);
    }

    // Goal: a failure to make spares offers none and stops nothing: the thread tries again
    // after its pause and fills the pool once the folder is usable. Method: a state folder
    // that does not exist yet, made a moment after the thread has started.
    #[test]
    fn the_thread_tries_again_after_a_failure() {
        let top = tempfile::tempdir().expect("tempdir");
        let root = top.path().join("state");
        let spares = Arc::new(Spares::new(root.clone(), Arc::new(AtomicU64::new(0))));
        assert_eq!(spares.make(1).map_err(|err| err.kind()), Err(io::ErrorKind::NotFound));
        let filler = Arc::clone(&spares);
        std::thread::spawn(move || filler.keep_filled());
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(spares.n_ready(), 0);
        assert_eq!(spares.take(), None, "nothing is offered after a failure");
        fs::create_dir(&root).expect("mkdir");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while spares.n_ready() < SPARES_HIGH {
            assert!(std::time::Instant::now() < deadline, "the pool was not filled after the failure");
            std::thread::sleep(Duration::from_millis(5));
        }
        let names: Vec<String> = fs::read_dir(&root)
            .expect("list")
            .map(|entry| entry.expect("entry").file_name().into_string().expect("utf-8"))
            .collect();
        assert!(
            names.iter().all(|name| classify(&root.join(name), name).expect("classify") != Found::Leftover)
        );
    }

    // Goal: keep_filled refills the pool when a take leaves it low, without being asked
    // otherwise. Method: the real loop in a thread on a temporary folder.
    #[test]
    fn the_pool_is_refilled_when_low() {
        let top = tempfile::tempdir().expect("tempdir");
        let spares = Arc::new(Spares::new(top.path().to_path_buf(), Arc::new(AtomicU64::new(0))));
        let filler = Arc::clone(&spares);
        std::thread::spawn(move || filler.keep_filled());
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while spares.n_ready() < SPARES_HIGH {
            assert!(std::time::Instant::now() < deadline, "the pool was not filled");
            std::thread::sleep(Duration::from_millis(5));
        }
        let taken: Vec<String> = (0..SPARES_HIGH - SPARES_LOW + 1).filter_map(|_| spares.take()).collect();
        assert_eq!(taken.len(), SPARES_HIGH - SPARES_LOW + 1);
        while spares.n_ready() < SPARES_HIGH {
            assert!(std::time::Instant::now() < deadline, "the pool was not refilled");
            std::thread::sleep(Duration::from_millis(5));
        }
        let on_disk = fs::read_dir(top.path()).expect("list").count();
        assert_eq!(on_disk, SPARES_HIGH + taken.len(), "taken spares stay where they are until renamed");
    }
}
