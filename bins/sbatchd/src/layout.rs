//! Where sbatchd keeps its files, and how a file is made durable.
//!
//! ```text
//! <work_dir>/sbd/<host>/                 root, 0711: the job's user must traverse it to reach
//!                                        its job script; nobody can list it
//!   sbatchd.lock                         flock: one sbatchd per host folder
//!   state/                               root, 0700
//!     <jobfile>/                         root, 0700, one per job; its shepherd holds an
//!                                        flock on this folder for its whole life
//!       record                           the lava-sbd JobRecord (see crate::store)
//!       record.first                     its first record, in a folder that was a spare
//!       record.noted                     a newer record, written without fsync (crate::store)
//!       pid                              pid, pgid, exec time of the job, shepherd's pid (durable)
//!       exit                             how the job ended, or why it never started (durable)
//!     .spare.<n>/                        root, 0700: a spare job folder, made durable ahead
//!                                        of need with empty record.first, pid, exit
//!                                        (crate::spares)
//!   jobs/                                root, 0711
//!     <jobfile>/                         the job's user, 0700, while the job runs
//!       job.sh                           the job's user, 0700: `#!/bin/sh` and the command
//!     .spare.<n>/                        root, 0700, empty: an ended job's folder, kept for
//!                                        the next job (crate::jobdirs)
//! ```
//!
//! `<jobfile>` is `<submit-epoch-s>.<jobid>`, with `.<index>` for an array element
//! (LavaLite's name). [`write_durable`] is the one way a
//! new file becomes durable: temporary file, fsync, rename, fsync of the folder. The
//! shepherd's `pid` and `exit` are the exception ([`write_shepherd_file`]): sbatchd creates
//! them empty with the job's folder, whose fsync makes them durable with the first record,
//! and the shepherd fills each in place with one fdatasync; an empty (or zero-filled, as a
//! crash before that fdatasync may leave it) file counts as absent
//! ([`read_shepherd_file`]).

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use lava_batch_ll::JobRef;

/// The job record inside a job's state folder.
pub const RECORD_FILE: &str = "record";
/// The job's noted record, when newer than `record` (written without fsync; see
/// `crate::store`).
pub const NOTED_FILE: &str = "record.noted";
/// The job's first record, written in place into a spare folder's empty file
/// (`crate::spares`); `record`, once written, is newer.
pub const FIRST_RECORD_FILE: &str = "record.first";
/// The job's pid, written durably by the shepherd before the job may execute.
pub const PID_FILE: &str = "pid";
/// The job's end, written durably by the shepherd before it exits.
pub const EXIT_FILE: &str = "exit";
/// The job script inside the job's folder.
pub const JOB_SCRIPT_FILE: &str = "job.sh";
/// Suffix of a file being written, before its rename.
pub const TEMPORARY_SUFFIX: &str = ".tmp";

/// Mode of the host folder and of `jobs/`: traversable, not listable.
const TRAVERSE_MODE: u32 = 0o711;
/// Mode of `state/` and of every job's state folder.
const PRIVATE_MODE: u32 = 0o700;

/// The folders of one sbatchd (one host).
#[derive(Clone, Debug)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The layout under `<work_dir>/sbd/<host>`.
    pub fn new(work_dir: &Path, host: &str) -> Layout {
        Layout { root: work_dir.join("sbd").join(host) }
    }

    /// `<work_dir>/sbd/<host>`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The single-instance lock file.
    pub fn daemon_lock(&self) -> PathBuf {
        self.root.join("sbatchd.lock")
    }

    /// `state/`, holding one folder per job.
    pub fn state_root(&self) -> PathBuf {
        self.root.join("state")
    }

    /// `jobs/`, holding one user-owned folder per job.
    pub fn jobs_root(&self) -> PathBuf {
        self.root.join("jobs")
    }

    /// `state/<jobfile>`.
    pub fn state_dir(&self, jobfile: &str) -> PathBuf {
        self.state_root().join(jobfile)
    }

    /// `jobs/<jobfile>`.
    pub fn job_dir(&self, jobfile: &str) -> PathBuf {
        self.jobs_root().join(jobfile)
    }

    /// Creates the folders that are missing and sets the modes of all of them. The folders
    /// above the host folder are created with the default mode; they must be traversable
    /// by job users.
    pub fn create(&self) -> io::Result<()> {
        if let Some(parent) = self.root.parent() {
            fs::create_dir_all(parent)?;
        }
        for (dir, mode) in [
            (self.root.clone(), TRAVERSE_MODE),
            (self.state_root(), PRIVATE_MODE),
            (self.jobs_root(), TRAVERSE_MODE),
        ] {
            match DirBuilder::new().mode(mode).create(&dir) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
                Err(err) => return Err(err),
            }
            fs::set_permissions(&dir, fs::Permissions::from_mode(mode))?;
        }
        for dir in [self.state_root(), self.jobs_root()] {
            // Best effort: only ext2/3/4 know the hint, and nothing depends on it.
            let _ = crate::sys::set_top_directory_hint(&dir);
        }
        Ok(())
    }
}

/// Name prefix of a spare folder, in `state/` (crate::spares) and in `jobs/`
/// (crate::jobdirs); no job's folder name starts with a dot.
pub const SPARE_PREFIX: &str = ".spare.";

/// The name of spare folder `number`.
pub fn spare_name(number: u64) -> String {
    format!("{SPARE_PREFIX}{number}")
}

/// The number of the spare folder named `name`, if it is one.
pub fn spare_number(name: &str) -> Option<u64> {
    name.strip_prefix(SPARE_PREFIX)?.parse().ok()
}

/// `<submit-epoch-s>.<jobid>` or `<submit-epoch-s>.<jobid>.<index>`.
pub fn jobfile_name(submit_time_s: i64, job: JobRef) -> String {
    match job.index() {
        0 => format!("{submit_time_s}.{}", job.id()),
        index => format!("{submit_time_s}.{}.{index}", job.id()),
    }
}

/// Creates a private (0700) folder; an existing one is fine.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    create_new_private_dir(dir).map(|_| ())
}

/// Creates a private (0700) folder and says whether it did: false when it existed.
pub fn create_new_private_dir(dir: &Path) -> io::Result<bool> {
    match DirBuilder::new().mode(PRIVATE_MODE).create(dir) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(err) => Err(err),
    }
}

/// Writes `bytes` to `dir/name` through `dir/name.tmp` (mode 0600), fsyncs it and renames
/// it into place; the folder itself is not fsynced (see [`fsync_dir`]).
pub fn write_renamed(dir: &Path, name: &str, bytes: &[u8], sync: bool) -> io::Result<()> {
    let temporary = dir.join(format!("{name}{TEMPORARY_SUFFIX}"));
    let mut file = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&temporary)?;
    file.write_all(bytes)?;
    if sync {
        file.sync_all()?;
    }
    drop(file);
    fs::rename(&temporary, dir.join(name))
}

/// Makes the entries of `dir` (renames, creations, removals) durable.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The contract's durable write: temporary file, fsync, rename, fsync of the folder.
pub fn write_durable(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    write_renamed(dir, name, bytes, true)?;
    fsync_dir(dir)
}

/// Reads a small file; `Ok(None)` when it does not exist.
pub fn read_optional(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

/// The shepherd files sbatchd creates empty with a job's folder (see the module doc).
pub const SHEPHERD_FILES: [&str; 2] = [PID_FILE, EXIT_FILE];

/// Creates the empty shepherd files in a new job folder (made durable by the folder's
/// fsync that follows).
pub fn create_shepherd_files(dir: &Path) -> io::Result<()> {
    for name in SHEPHERD_FILES {
        let file =
            OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(dir.join(name))?;
        reserve_blocks(&file);
    }
    Ok(())
}

/// Bytes allocated ahead in each empty shepherd file: more than its one line.
const SHEPHERD_FILE_RESERVE_BYTES: i64 = 4096;

/// Allocates the blocks of an empty shepherd file ahead (its size stays 0), so that the
/// shepherd's in-place write of `pid` or `exit` needs no new block: a job ending while
/// the file system is full still has its exit recorded (docs/operations.md, "A full
/// disk"). Best effort: a file system without `fallocate`, or one already full, only
/// loses that guarantee.
pub fn reserve_blocks(file: &File) {
    let _ = crate::sys::allocate_keeping_size(file, SHEPHERD_FILE_RESERVE_BYTES);
}

/// The shepherd's durable write of `name` (`pid` or `exit`) in `dir`: in place into the
/// empty file sbatchd created, with one fdatasync; when there is none (a relaunch, whose
/// stale files were removed), a new file through [`write_durable`].
pub fn write_shepherd_file(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    write_shepherd_file_announced(dir, name, bytes, || {})
}

/// [`write_shepherd_file`], calling `written` once the bytes are in the file (where any
/// reader on this machine sees them) and before the flush that makes them durable.
pub fn write_shepherd_file_announced(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    written: impl FnOnce(),
) -> io::Result<()> {
    match OpenOptions::new().write(true).open(dir.join(name)) {
        Ok(mut file) => {
            // Usually empty, as its folder was made: a truncation of an empty file still
            // costs ext4 a truncate on the job's path.
            if file.metadata()?.len() > 0 {
                file.set_len(0)?;
            }
            file.write_all(bytes)?;
            written();
            file.sync_data()?;
            lava_crash::synced(&dir.join(name));
            Ok(())
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            write_durable(dir, name, bytes)?;
            lava_crash::synced(&dir.join(name));
            written();
            Ok(())
        }
        Err(err) => Err(err),
    }
}

/// Reads a shepherd file: `Ok(None)` when it does not exist or holds nothing yet (empty, or
/// only zero bytes: what a crash before the shepherd's fdatasync can leave).
pub fn read_shepherd_file(path: &Path) -> io::Result<Option<Vec<u8>>> {
    Ok(read_optional(path)?.filter(|bytes| bytes.iter().any(|byte| *byte != 0)))
}

/// Removes a file; a missing one is fine.
pub fn remove_optional(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    }
}

/// Removes a folder and everything in it (symbolic links are removed, never followed); a
/// missing one is fine.
pub fn remove_dir_optional(path: &Path) -> io::Result<()> {
    match fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: job file names follow LavaLite's `<submit>.<id>[.<index>]`.
    #[test]
    fn jobfile_names() {
        let plain = JobRef::new(42, 0).expect("job");
        let element = JobRef::new(42, 7).expect("job");
        assert_eq!(jobfile_name(1_700_000_000, plain), "1700000000.42");
        assert_eq!(jobfile_name(1_700_000_000, element), "1700000000.42.7");
    }

    // Goal: a durable write leaves exactly the final file, and the layout's folders get
    // their modes even when they existed with others.
    #[test]
    fn durable_write_and_folder_modes() {
        let top = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(top.path(), "node1");
        fs::create_dir_all(layout.state_root()).expect("mkdir");
        fs::set_permissions(layout.state_root(), fs::Permissions::from_mode(0o755)).expect("chmod");
        layout.create().expect("create");
        let mode = |p: &Path| fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(layout.root()), 0o711);
        assert_eq!(mode(&layout.state_root()), 0o700);
        assert_eq!(mode(&layout.jobs_root()), 0o711);
        let dir = layout.state_dir("1.1");
        create_private_dir(&dir).expect("mkdir");
        write_durable(&dir, "pid", b"hello").expect("write");
        assert_eq!(read_optional(&dir.join("pid")).expect("read"), Some(b"hello".to_vec()));
        assert!(!dir.join("pid.tmp").exists());
        assert_eq!(read_optional(&dir.join("exit")).expect("read"), None);
    }

    // Goal: the shepherd files are filled in place when sbatchd created them (a shorter
    // content leaves no tail of a longer one), written anew when it did not, and read as
    // absent while empty or zero-filled.
    #[test]
    fn shepherd_files_in_place_or_anew() {
        let top = tempfile::tempdir().expect("tempdir");
        let dir = top.path();
        create_shepherd_files(dir).expect("create");
        for name in SHEPHERD_FILES {
            assert_eq!(read_shepherd_file(&dir.join(name)).expect("read"), None, "{name}");
        }
        let inode =
            |name: &str| std::os::unix::fs::MetadataExt::ino(&fs::metadata(dir.join(name)).expect("stat"));
        let before = inode(PID_FILE);
        write_shepherd_file(dir, PID_FILE, b"v1 pid=5").expect("write");
        assert_eq!(inode(PID_FILE), before, "written in place");
        assert_eq!(read_shepherd_file(&dir.join(PID_FILE)).expect("read"), Some(b"v1 pid=5".to_vec()));
        write_shepherd_file(dir, PID_FILE, b"v1").expect("rewrite shorter");
        assert_eq!(
            read_shepherd_file(&dir.join(PID_FILE)).expect("read"),
            Some(b"v1".to_vec()),
            "no tail left"
        );
        fs::write(dir.join(EXIT_FILE), [0u8; 40]).expect("zeros");
        assert_eq!(read_shepherd_file(&dir.join(EXIT_FILE)).expect("read"), None);
        fs::remove_file(dir.join(EXIT_FILE)).expect("rm");
        write_shepherd_file(dir, EXIT_FILE, b"v1 exited").expect("write anew");
        assert_eq!(read_shepherd_file(&dir.join(EXIT_FILE)).expect("read"), Some(b"v1 exited".to_vec()));
        assert!(!dir.join("exit.tmp").exists());
    }
}
