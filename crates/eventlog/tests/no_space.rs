//! A full file system under the log (docs/operations.md, "A full disk"): the log keeps
//! every record appended, in order, reports [`Error::NoSpace`] from the durable wait while
//! the disk is full, and makes them durable once space returns; nothing is lost, nothing
//! is doubled, and a reopen reads exactly what was appended.
//!
//! The test mounts a small tmpfs, which needs root (CI runs as root); elsewhere it says
//! why it is skipped.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use lava_eventlog::{Error, EventLog, Options, SEGMENT_BYTES_MIN};

/// A tmpfs of `size` mounted on a fresh folder, unmounted when dropped.
struct SmallFs {
    _parent: tempfile::TempDir,
    path: PathBuf,
}

impl SmallFs {
    fn mount(size: &str) -> Result<SmallFs, String> {
        let parent = tempfile::tempdir().map_err(|error| format!("tempdir: {error}"))?;
        let path = parent.path().join("fs");
        fs::create_dir(&path).map_err(|error| format!("mkdir: {error}"))?;
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0755"), "tmpfs"])
            .arg(&path)
            .output()
            .map_err(|error| format!("mount: {error}"))?;
        if !output.status.success() {
            return Err(format!("mount -t tmpfs: {}", String::from_utf8_lossy(&output.stderr).trim()));
        }
        Ok(SmallFs { _parent: parent, path })
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// Fills the file system holding `dir` with `dir/filler`, until a write fails.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut file = fs::File::create(&path).expect("filler");
    let block = vec![0xAAu8; 4096];
    while file.write_all(&block).is_ok() {}
    let _ = file.sync_all();
    path
}

fn open(dir: &Path, preallocate_bytes: u64) -> EventLog {
    let mut options = Options::new("full.log");
    options.segment_bytes_max = SEGMENT_BYTES_MIN.max(16 << 10);
    options.preallocate_bytes = preallocate_bytes;
    EventLog::open(dir, options).expect("the log opens").0
}

fn payload(n: u64) -> Vec<u8> {
    let mut bytes = n.to_be_bytes().to_vec();
    bytes.resize(200, n as u8);
    bytes
}

// Goal: a full disk stops durability, never the log: appends go on, the durable wait says
// NoSpace (and keeps saying it, without stopping the log, while the disk stays full), and
// once space returns one wait makes every record durable; a reopen reads all of them, in
// order, once. Method: on a 512 KiB tmpfs, with and without preallocation (so both the
// record write and the creation of the next segment meet the full disk), append and sync
// until the disk is filled by another file, append 150 more records (past a segment and the preallocated space) through the failures,
// delete the filler, sync, reopen and read.
#[test]
fn a_full_disk_delays_durability_and_loses_nothing() {
    for preallocate_bytes in [0, 64 << 10] {
        let fs = match SmallFs::mount("512k") {
            Ok(fs) => fs,
            Err(reason) => {
                eprintln!("a_full_disk_delays_durability_and_loses_nothing: skipped: {reason}");
                return;
            }
        };
        let log = open(&fs.path, preallocate_bytes);
        let mut appended = 0u64;
        for _ in 0..20 {
            appended += 1;
            log.append_durable(&payload(appended)).expect("room at first");
        }
        let filler = fill(&fs.path);
        let mut refusals = 0;
        for _ in 0..150 {
            appended += 1;
            let position = log.append(&payload(appended)).expect("appends never fail for a full disk");
            assert_eq!(position.0, appended, "positions stay dense");
            match log.wait_durable(position) {
                Ok(()) => {}
                Err(error) => {
                    assert!(error.is_no_space(), "only NoSpace, never a stopped log: {error}");
                    assert!(matches!(error, Error::NoSpace { .. }));
                    refusals += 1;
                }
            }
        }
        assert!(refusals > 0, "the filled disk refused some writes (preallocate {preallocate_bytes})");
        fs::remove_file(&filler).expect("space returns");
        log.sync().expect("durable once space returned");
        log.close().expect("closes");

        let log = open(&fs.path, preallocate_bytes);
        let replay = log.replay().expect("replays");
        let read: Vec<Vec<u8>> = replay.records.map(|record| record.expect("reads").1).collect();
        let expected: Vec<Vec<u8>> = (1..=appended).map(payload).collect();
        assert_eq!(read.len(), expected.len(), "every record, once");
        assert!(read == expected, "in order, intact");
    }
}

// Goal: `write_out` (records written without an fsync, so that they outlive a killed
// process) meets a full disk as `wait_durable` does: it says NoSpace, the log is not
// stopped, the records stay buffered in order; once space returns, the next `write_out`
// writes them, and a reopen reads each once. A read-only log refuses it. Method: on a
// 512 KiB tmpfs, 20 durable records, the disk filled, 60 records appended (12 KiB: more
// than the page the segment's last write may still have room in), `write_out` twice
// while full, the filler deleted, `write_out`, sync, reopen and read.
#[test]
fn write_out_on_a_full_disk_keeps_the_records_for_the_next_one() {
    let fs = match SmallFs::mount("512k") {
        Ok(fs) => fs,
        Err(reason) => {
            eprintln!("write_out_on_a_full_disk_keeps_the_records_for_the_next_one: skipped: {reason}");
            return;
        }
    };
    let log = open(&fs.path, 0);
    let mut appended = 0u64;
    for _ in 0..20 {
        appended += 1;
        log.append_durable(&payload(appended)).expect("room at first");
    }
    let filler = fill(&fs.path);
    for _ in 0..60 {
        appended += 1;
        log.append(&payload(appended)).expect("appends never fail for a full disk");
    }
    for attempt in 1..=2 {
        let error = log.write_out().expect_err("a full disk refuses the write");
        assert!(error.is_no_space(), "attempt {attempt}: only NoSpace, never a stopped log: {error}");
    }
    fs::remove_file(&filler).expect("space returns");
    assert!(log.write_out().expect("room again"), "the buffered records are written");
    assert!(!log.write_out().expect("nothing left"), "nothing is written twice");
    log.sync().expect("durable");
    log.close().expect("closes");

    let mut options = Options::new("full.log");
    options.segment_bytes_max = SEGMENT_BYTES_MIN.max(16 << 10);
    let (reader, _) = EventLog::open_read_only(&fs.path, options).expect("opens read-only");
    let replay = reader.replay().expect("replays");
    let read: Vec<Vec<u8>> = replay.records.map(|record| record.expect("reads").1).collect();
    let expected: Vec<Vec<u8>> = (1..=appended).map(payload).collect();
    assert!(
        read == expected,
        "every record, once, in order ({} read, {} appended)",
        read.len(),
        expected.len()
    );
    let refused = reader.write_out().expect_err("a read-only log writes nothing");
    assert!(matches!(refused, Error::ReadOnly { .. }), "{refused}");
}
