//! lava-crash: the daemons' named crash points, the registry that lists them all, and
//! the power-loss model used when one fires.
//!
//! A crash point marks a boundary in a daemon's shell where the order of effects matters
//! (an event appended but not yet durable, a record durable but its signal not yet sent,
//! a reply written). [`point!`] names one; the name must be in [`POINTS`], the registry,
//! or the daemon does not compile. The crash-point test (`tests/crash_points.rs`) walks
//! [`POINTS`], so a new point cannot be left out of it.
//!
//! # Arming (debug builds only)
//! Debug builds, which is what the tests run, carry the points; a release build compiles
//! every [`point!`] to nothing. In a debug build a point costs one relaxed atomic load
//! until the environment arms one:
//! - `LAVA_CRASH_AT=name[:nth]` names the point, and which of its hits crashes (1 by default);
//! - `LAVA_CRASH_ARM=FILE` (optional) counts hits only while `FILE` exists, and the process
//!   that deletes it crashes: the test arms a point at the moment of its choosing, and of
//!   several processes that inherited the environment (sbatchd, its zygote, the shepherds)
//!   exactly one crashes per arming;
//! - `LAVA_CRASH_REPORT=FILE` (optional): the crashing process writes the point's name and
//!   its pid there first;
//! - `LAVA_CRASH_POWER_LOSS=FILE` (optional) makes the crash a power loss: before dying, the
//!   process writes to `FILE` the durable image of every file it registered (see below), and
//!   [`apply_power_loss`], run once the process is dead, puts each file back to that image.
//!
//! The crash itself is SIGKILL sent to the process by itself: no destructor, no buffered
//! write and no `atexit` handler runs, exactly as `kill -9`.
//!
//! # The power-loss model
//! A daemon registers the files whose durability it manages, at the moment they become
//! durable: [`synced_len`] for an append-only log (its first `len` bytes survive a power
//! loss), [`synced`] for a small file rewritten whole (its bytes now survive), and
//! [`unsynced`] for a file written without a flush (it survives only as far as an earlier
//! [`synced`] made it durable; with none, it is lost). At the crash, each registered file
//! is cut back to its image, or removed; [`removed`] forgets the files under a folder the
//! daemon deleted. Directory entries (creations, renames, removals) are taken as durable
//! with the data: the model drops every data write not followed by the file's own flush,
//! which is what an acknowledgement rests on. Files a process never registered are left
//! as they are, so a power loss crash drops the unflushed writes of the crashing process
//! only (other processes of the host keep theirs; a host-wide loss is out of its reach).
//!
//! # What it never does
//! It never changes behaviour while unarmed, never crashes a release build, and never
//! writes a file other than the three the environment names.

#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// One crash point: its name (`daemon.boundary`) and the boundary it marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// `daemon.boundary`; the daemon part names the process that crashes, or the component
    /// several daemons share (`replica`: the master candidates' replicated log, which
    /// mbatchd and the coordinator both carry).
    pub name: &'static str,
    /// What has happened and what has not when it fires.
    pub boundary: &'static str,
}

/// Every crash point of every daemon. [`point!`] refuses a name missing here at compile
/// time; a name here that no workload reaches fails the crash-point test.
pub const POINTS: &[Point] = &[
    Point {
        name: "mbatchd.event_appended",
        boundary: "an event is appended to lsb.events and not yet durable; nothing resting on it has left",
    },
    Point {
        name: "mbatchd.events_durable",
        boundary: "a group commit has made the turn's events durable; the answers and messages held behind them are not yet released",
    },
    Point { name: "mbatchd.reply_written", boundary: "a reply has been written to a command's connection" },
    Point {
        name: "mbatchd.acknowledged_before_own_fsync",
        boundary: "a leading master candidate released an answer on its followers' acknowledgements (handed to its connection, perhaps not yet written); its own records of that entry are not yet known durable",
    },
    Point {
        name: "mbatchd.sbd_message_written",
        boundary: "a message has been written to an sbatchd's connection",
    },
    Point {
        name: "sbatchd.records_committed",
        boundary: "a batch of job records is durable; the effects after it (launch, signal, messages) are not yet carried out",
    },
    Point {
        name: "sbatchd.job_released",
        boundary: "a job's record is durable and its shepherd has been told to run it",
    },
    Point {
        name: "sbatchd.signal_sent",
        boundary: "a signal has been sent to a job's process group; the record saying so is not yet durable",
    },
    Point {
        name: "sbatchd.message_written",
        boundary: "a message has been written to the connection to mbatchd",
    },
    Point {
        name: "sbatchd.noted_written",
        boundary: "noted records (acknowledgement flags, pid, exit) are written without a flush",
    },
    Point {
        name: "shepherd.pid_flushed",
        boundary: "the shepherd's pid file is durable; the job has not been released to run",
    },
    Point {
        name: "shepherd.exit_flushed",
        boundary: "the shepherd's exit file is durable (sbatchd was told as it was written); the shepherd has not exited",
    },
    Point {
        name: "coordinator.wal_appended",
        boundary: "a request's event is appended to the WAL and not yet durable",
    },
    Point {
        name: "coordinator.wal_durable",
        boundary: "a group commit has made the WAL durable; the answers behind it are not yet sent",
    },
    Point {
        name: "coordinator.answer_written",
        boundary: "an answer has been written to a client's connection",
    },
    Point {
        name: "coordinator.acknowledged_before_own_fsync",
        boundary: "a leading coordinator candidate released an answer on its followers' acknowledgements and its loop has turned since (the answer's writer has run); its own records of that entry are not yet known durable",
    },
    Point {
        name: "replica.records_appended",
        boundary: "records are appended to a master candidate's replica log, not yet durable; nothing that rests on them is carried out",
    },
    Point {
        name: "replica.records_durable",
        boundary: "a master candidate's replica records (entries, its term and vote) are durable; the acknowledgement, vote or count towards a majority held behind them is not yet carried out",
    },
    Point {
        name: "replica.snapshot_kept",
        boundary: "a master candidate's snapshot (its own compaction's, or one received from the leader) is durable and the records before it are removed; what follows it (the compaction's record, a received snapshot's restore) is not yet carried out",
    },
    Point {
        name: "mxfsd.epoch_durable",
        boundary: "a new epoch is durable in the epoch file; no peer or client has been told",
    },
    Point { name: "mxfsd.grant_sent", boundary: "a lock grant has been handed to its holder's connection" },
    Point {
        name: "mxfsd.recovery_started",
        boundary: "the master has started the journal recovery of a dead node; its locks are still held",
    },
    Point {
        name: "mxfsd.recovery_done",
        boundary: "the journal recovery of a dead node has finished; its locks are not yet released",
    },
];

/// Whether `name` is in [`POINTS`] (usable in constants: [`point!`] checks it at compile time).
pub const fn registered(name: &str) -> bool {
    let mut idx = 0;
    while idx < POINTS.len() {
        if str_eq(POINTS[idx].name, name) {
            return true;
        }
        idx += 1;
    }
    false
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut idx = 0;
    while idx < a.len() {
        if a[idx] != b[idx] {
            return false;
        }
        idx += 1;
    }
    true
}

/// The points of one daemon (`prefix` is the part of the name before the dot).
pub fn points_of(prefix: &str) -> impl Iterator<Item = &'static Point> + '_ {
    POINTS.iter().filter(move |point| point.name.split_once('.').is_some_and(|(daemon, _)| daemon == prefix))
}

/// Marks crash point `$name` (a string literal registered in [`POINTS`]): crashes the
/// process here when the environment arms it in a debug build; see the crate doc.
#[macro_export]
macro_rules! point {
    ($name:literal) => {{
        const _: () = assert!($crate::registered($name), concat!("not in lava_crash::POINTS: ", $name));
        $crate::reached($name)
    }};
}

/// The environment variable naming the armed point (`name[:nth]`).
pub const ENV_AT: &str = "LAVA_CRASH_AT";
/// The environment variable naming the arm file.
pub const ENV_ARM: &str = "LAVA_CRASH_ARM";
/// The environment variable naming the report file.
pub const ENV_REPORT: &str = "LAVA_CRASH_REPORT";
/// The environment variable naming the power-loss image file.
pub const ENV_POWER_LOSS: &str = "LAVA_CRASH_POWER_LOSS";

const UNKNOWN: u8 = 0;
const UNARMED: u8 = 1;
const ARMED: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
static HITS: AtomicU64 = AtomicU64::new(0);
static ARMING: Mutex<Option<Arming>> = Mutex::new(None);
/// Durable images by path; filled only when a power-loss crash is armed.
static IMAGES: Mutex<BTreeMap<PathBuf, Image>> = Mutex::new(BTreeMap::new());

#[derive(Debug, Clone)]
struct Arming {
    name: String,
    nth: u64,
    arm_file: Option<PathBuf>,
    report: Option<PathBuf>,
    power_loss: Option<PathBuf>,
}

/// What survives a power loss of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Image {
    /// Its first bytes, this many.
    Len(u64),
    /// Exactly these bytes.
    Bytes(Vec<u8>),
    /// Nothing: the file is lost.
    Absent,
}

/// Reads the environment once; returns whether some point is armed.
fn armed() -> bool {
    if !cfg!(debug_assertions) {
        return false;
    }
    match STATE.load(Ordering::Relaxed) {
        UNARMED => false,
        ARMED => true,
        _ => {
            let arming = from_env();
            let state = if arming.is_some() { ARMED } else { UNARMED };
            *lock(&ARMING) = arming;
            STATE.store(state, Ordering::Relaxed);
            state == ARMED
        }
    }
}

fn from_env() -> Option<Arming> {
    let at = std::env::var(ENV_AT).ok().filter(|value| !value.is_empty())?;
    let (name, nth) = match at.split_once(':') {
        Some((name, nth)) => (name.to_owned(), nth.parse::<u64>().ok().filter(|nth| *nth > 0).unwrap_or(1)),
        None => (at, 1),
    };
    let path = |key: &str| std::env::var_os(key).filter(|value| !value.is_empty()).map(PathBuf::from);
    Some(Arming {
        name,
        nth,
        arm_file: path(ENV_ARM),
        report: path(ENV_REPORT),
        power_loss: path(ENV_POWER_LOSS),
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn power_loss_armed() -> bool {
    armed() && lock(&ARMING).as_ref().is_some_and(|arming| arming.power_loss.is_some())
}

/// The crash variables of this process's environment, for a child started with a cleared
/// environment that must still inherit an armed point (sbatchd's shepherd zygote). Empty in
/// a release build.
pub fn inherited_env() -> Vec<(&'static str, std::ffi::OsString)> {
    if !cfg!(debug_assertions) {
        return Vec::new();
    }
    [ENV_AT, ENV_ARM, ENV_REPORT, ENV_POWER_LOSS]
        .into_iter()
        .filter_map(|key| std::env::var_os(key).map(|value| (key, value)))
        .collect()
}

/// Crash point `name` was reached; use [`point!`], which checks the name.
#[inline]
pub fn reached(name: &'static str) {
    if cfg!(debug_assertions) && STATE.load(Ordering::Relaxed) != UNARMED && armed() {
        reached_armed(name);
    }
}

#[cold]
fn reached_armed(name: &'static str) {
    let Some(arming) = lock(&ARMING).clone() else { return };
    if arming.name != name {
        return;
    }
    if let Some(arm_file) = &arming.arm_file
        && !arm_file.exists()
    {
        return;
    }
    if HITS.fetch_add(1, Ordering::Relaxed) + 1 < arming.nth {
        return;
    }
    if let Some(arm_file) = &arming.arm_file
        && fs::remove_file(arm_file).is_err()
    {
        // Another process took this arming.
        return;
    }
    crash(&arming, name);
}

fn crash(arming: &Arming, name: &str) -> ! {
    // Held until the end: no thread registers a newer image while the old ones are saved.
    let images = lock(&IMAGES);
    if let Some(report) = &arming.report {
        // Whole or absent: a supervisor polling the report must never read it half written
        // (it would take the crash for a death without a crash point).
        let partial = report.with_extension("partial");
        if fs::write(&partial, format!("{name} {}\n", std::process::id())).is_ok() {
            let _ = fs::rename(&partial, report);
        }
    }
    if let Some(path) = &arming.power_loss {
        let _ = fs::write(path, encode_images(&images));
    }
    let _ = io::stderr().write_all(format!("lava-crash: crashing at {name}\n").as_bytes());
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    // SIGKILL cannot be caught; should it somehow not arrive, never go on.
    std::process::abort()
}

/// Power loss: the first `len` bytes of the append-only file `path` are durable.
pub fn synced_len(path: &Path, len: u64) {
    if power_loss_armed() {
        lock(&IMAGES).insert(path.to_owned(), Image::Len(len));
    }
}

/// Power loss: the bytes `path` holds now are durable (read back only when armed).
pub fn synced(path: &Path) {
    if power_loss_armed() {
        let image = match fs::read(path) {
            Ok(bytes) => Image::Bytes(bytes),
            Err(_) => Image::Absent,
        };
        lock(&IMAGES).insert(path.to_owned(), image);
    }
}

/// Power loss: `path` was written without a flush; it keeps only what an earlier
/// [`synced`] made durable, and is lost without one.
pub fn unsynced(path: &Path) {
    if power_loss_armed() {
        lock(&IMAGES).entry(path.to_owned()).or_insert(Image::Absent);
    }
}

/// Power loss: the folder `dir` (or file) was removed; forget what was registered under it.
pub fn removed(dir: &Path) {
    if power_loss_armed() {
        lock(&IMAGES).retain(|path, _| !path.starts_with(dir));
    }
}

fn encode_images(images: &BTreeMap<PathBuf, Image>) -> String {
    let mut out = String::new();
    for (path, image) in images {
        let path = path.display();
        let _ = match image {
            Image::Len(len) => writeln!(out, "len {len} {path}"),
            Image::Absent => writeln!(out, "absent - {path}"),
            Image::Bytes(bytes) => {
                let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
                writeln!(out, "bytes {} {path}", if hex.is_empty() { "-" } else { &hex })
            }
        };
    }
    out
}

/// Puts every file named in the power-loss image file `images` (written by a crashed
/// process) back to its durable image. Run it once the process is dead. Returns how many
/// files it changed.
pub fn apply_power_loss(images: &Path) -> io::Result<usize> {
    let text = fs::read_to_string(images)?;
    let mut changed = 0;
    for (idx, line) in text.lines().enumerate() {
        let bad = || {
            io::Error::new(io::ErrorKind::InvalidData, format!("{}:{}: {line:?}", images.display(), idx + 1))
        };
        let mut fields = line.splitn(3, ' ');
        let (Some(kind), Some(value), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            return Err(bad());
        };
        let path = Path::new(path);
        match kind {
            "len" => {
                let len: u64 = value.parse().map_err(|_| bad())?;
                match fs::OpenOptions::new().write(true).open(path) {
                    Ok(file) if file.metadata()?.len() > len => {
                        file.set_len(len)?;
                        changed += 1;
                    }
                    Ok(_) => {}
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                    Err(error) => return Err(error),
                }
            }
            "absent" => match fs::remove_file(path) {
                Ok(()) => changed += 1,
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            },
            "bytes" => {
                let bytes = if value == "-" { Vec::new() } else { unhex(value).ok_or_else(bad)? };
                if fs::read(path).ok().as_deref() != Some(&bytes[..])
                    && path.parent().is_some_and(Path::exists)
                {
                    fs::write(path, &bytes)?;
                    changed += 1;
                }
            }
            _ => return Err(bad()),
        }
    }
    Ok(changed)
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|idx| u8::from_str_radix(text.get(idx..idx + 2)?, 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_is_named_daemon_dot_boundary_and_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for point in POINTS {
            let (daemon, boundary) = point.name.split_once('.').expect("daemon.boundary");
            assert!(!daemon.is_empty() && !boundary.is_empty(), "{}", point.name);
            assert!(seen.insert(point.name), "{} twice", point.name);
            assert!(registered(point.name));
        }
        assert!(!registered("mbatchd.nowhere"));
        assert_eq!(points_of("shepherd").count(), 2);
    }

    #[test]
    fn images_round_trip_through_the_file_and_are_applied() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let log = dir.path().join("log");
        let record = dir.path().join("record");
        let noted = dir.path().join("noted");
        let empty = dir.path().join("empty");
        fs::write(&log, b"0123456789").expect("write");
        fs::write(&record, b"new").expect("write");
        fs::write(&noted, b"lost").expect("write");
        fs::write(&empty, b"later").expect("write");
        let images = BTreeMap::from([
            (log.clone(), Image::Len(4)),
            (record.clone(), Image::Bytes(b"old".to_vec())),
            (noted.clone(), Image::Absent),
            (empty.clone(), Image::Bytes(Vec::new())),
        ]);
        let file = dir.path().join("images");
        fs::write(&file, encode_images(&images)).expect("write");
        assert_eq!(apply_power_loss(&file).expect("apply"), 4);
        assert_eq!(fs::read(&log).expect("read"), b"0123");
        assert_eq!(fs::read(&record).expect("read"), b"old");
        assert!(!noted.exists());
        assert_eq!(fs::read(&empty).expect("read"), b"");
        assert_eq!(apply_power_loss(&file).expect("apply again"), 0, "applying twice changes nothing more");
    }

    #[test]
    fn a_broken_image_file_names_its_line() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let file = dir.path().join("images");
        fs::write(&file, "len 4 /x\nlen four /y\n").expect("write");
        let error = apply_power_loss(&file).expect_err("refused");
        assert!(error.to_string().contains(":2:"), "{error}");
    }

    #[test]
    fn unarmed_points_do_nothing() {
        // The test process has no LAVA_CRASH_AT: reaching a point returns.
        point!("mbatchd.event_appended");
        synced_len(Path::new("/nonexistent"), 1);
        assert!(lock(&IMAGES).is_empty(), "nothing is registered while unarmed");
    }
}
