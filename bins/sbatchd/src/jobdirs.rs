//! The job folders, `jobs/<jobfile>/` (`LSB_JOBDIR`), and their reuse.
//!
//! A job's folder holds its `job.sh` while the job runs. As LSF does with its job file, the
//! folder goes when the job has ended: sbatchd no longer needs it once the job's end is
//! known. Creating a folder costs a spread inode allocation on ext4 (the `+T` hint of
//! `jobs/`, see crate::layout; about 0.15 ms of CPU per `mkdir` on the benchmark machine,
//! docs/benchmarks.md), so an ended job's folder is kept as a *spare*, `jobs/.spare.<n>/`,
//! and the next job's folder is a spare renamed into place. At most [`SPARES_MAX`] spares
//! are kept; beyond that an ended job's folder is deleted.
//!
//! Nothing here is durable state: a crash may leave spares half cleaned or a job's folder
//! behind, and [`JobDirs::open`] cleans the spares again at start. The job's record never
//! depends on its folder (a relaunch writes `job.sh` again).
//!
//! # Handing a folder from one user to another
//! While a job runs its folder and `job.sh` belong to the job's user (0700). When the job
//! ends the folder is first given back to root (0700), so that a process the job left
//! behind can no longer reach or add anything in it, and then emptied, `job.sh` included:
//! the next job always gets a new `job.sh`, never a file the previous user could have kept
//! open to read the next user's script through.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::layout::{self, JOB_SCRIPT_FILE, SPARE_PREFIX};
use crate::sys;

/// Spare folders kept at most.
pub const SPARES_MAX: usize = 64;
/// Mode of a job's folder (its user's) and of a spare (root's).
const FOLDER_MODE: u32 = 0o700;
/// Mode of `job.sh` (the job's user's).
const SCRIPT_MODE: u32 = 0o700;

/// The job folders under `jobs/` and the spares among them.
#[derive(Debug)]
pub struct JobDirs {
    root: PathBuf,
    /// Numbers of the spares ready for reuse.
    spares: Vec<u64>,
    /// The number the next spare gets.
    next: u64,
    /// Whether sbatchd runs as root (and can hand folders to other users).
    as_root: bool,
}

impl JobDirs {
    /// The job folders under `jobs_root`, with the spares an earlier sbatchd left, each
    /// cleaned again (a crash may have cut a cleaning short).
    pub fn open(jobs_root: &Path) -> io::Result<JobDirs> {
        let mut dirs = JobDirs {
            root: jobs_root.to_path_buf(),
            spares: Vec::new(),
            next: 0,
            as_root: sys::effective_uid() == 0,
        };
        for entry in fs::read_dir(jobs_root)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(number) = name.to_str().and_then(|name| name.strip_prefix(SPARE_PREFIX)) else {
                continue;
            };
            let path = entry.path();
            match number.parse::<u64>() {
                Ok(number) if dirs.spares.len() < SPARES_MAX && entry.file_type()?.is_dir() => {
                    dirs.make_spare(&path)?;
                    dirs.spares.push(number);
                    dirs.next = dirs.next.max(number + 1);
                }
                _ => layout::remove_dir_optional(&path).or_else(|_| layout::remove_optional(&path))?,
            }
        }
        Ok(dirs)
    }

    /// Spare folders ready now.
    pub fn spares(&self) -> usize {
        self.spares.len()
    }

    /// Makes `jobs/<jobfile>/` the job's folder, owned by `uid`:`gid`, holding `job.sh`
    /// with `script`; a spare is taken when there is one, and a folder left from an earlier
    /// launch of the job is cleaned and reused. Returns the folder.
    pub fn prepare(&mut self, jobfile: &str, script: &str, uid: u32, gid: u32) -> io::Result<PathBuf> {
        self.prepare_with(jobfile, script, &[], uid, gid)
    }

    /// [`JobDirs::prepare`], with `extra` files (name, contents) written beside the script
    /// the same way, readable by all (a parallel job's host file, `LSB_DJOB_HOSTFILE`).
    pub fn prepare_with(
        &mut self,
        jobfile: &str,
        script: &str,
        extra: &[(&str, &[u8])],
        uid: u32,
        gid: u32,
    ) -> io::Result<PathBuf> {
        let dir = self.root.join(jobfile);
        match fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => self.make_spare(&dir)?,
            Ok(_) => fs::remove_file(&dir)?,
            Err(err) if err.kind() == io::ErrorKind::NotFound => match self.spares.pop() {
                Some(number) => fs::rename(self.spare_path(number), &dir)?,
                None => layout::create_private_dir(&dir)?,
            },
            Err(err) => return Err(err),
        }
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(SCRIPT_MODE)
            .custom_flags(libc::O_NOFOLLOW)
            .open(dir.join(JOB_SCRIPT_FILE))?;
        file.write_all(script.as_bytes())?;
        if self.as_root {
            std::os::unix::fs::fchown(&file, Some(uid), Some(gid))?;
        }
        file.set_permissions(fs::Permissions::from_mode(SCRIPT_MODE))?;
        drop(file);
        for (name, contents) in extra {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .custom_flags(libc::O_NOFOLLOW)
                .open(dir.join(name))?;
            file.write_all(contents)?;
            if self.as_root {
                std::os::unix::fs::fchown(&file, Some(uid), Some(gid))?;
            }
        }
        if self.as_root {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))?;
        }
        fs::set_permissions(&dir, fs::Permissions::from_mode(FOLDER_MODE))?;
        Ok(dir)
    }

    /// The job has ended and no longer needs `jobs/<jobfile>/`: it becomes a spare, or is
    /// deleted when [`SPARES_MAX`] spares are kept already. A missing folder is fine.
    pub fn release(&mut self, jobfile: &str) -> io::Result<()> {
        let dir = self.root.join(jobfile);
        match fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return layout::remove_optional(&dir),
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(err) => return Err(err),
        }
        if self.spares.len() >= SPARES_MAX {
            return layout::remove_dir_optional(&dir);
        }
        self.make_spare(&dir)?;
        let number = self.next;
        self.next += 1;
        fs::rename(&dir, self.spare_path(number))?;
        self.spares.push(number);
        Ok(())
    }

    fn spare_path(&self, number: u64) -> PathBuf {
        self.root.join(layout::spare_name(number))
    }

    /// Gives `dir` back to root and empties it (module doc).
    fn make_spare(&self, dir: &Path) -> io::Result<()> {
        if self.as_root {
            std::os::unix::fs::chown(dir, Some(0), Some(0))?;
        }
        fs::set_permissions(dir, fs::Permissions::from_mode(FOLDER_MODE))?;
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            // Not following symbolic links: a link is removed, never what it names.
            if entry.file_type()?.is_dir() {
                layout::remove_dir_optional(&entry.path())?;
            } else {
                layout::remove_optional(&entry.path())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn inode(path: &Path) -> u64 {
        fs::metadata(path).expect("stat").ino()
    }

    fn names(dir: &Path) -> Vec<std::ffi::OsString> {
        let mut names: Vec<_> =
            fs::read_dir(dir).expect("list").map(|e| e.expect("entry").file_name()).collect();
        names.sort();
        names
    }

    // Goal: an ended job's folder serves the next job (the same folder, renamed: no new
    // allocation), given back to root and emptied in between, with a new job.sh (never the
    // old user's file); a folder comes from mkdir while no spare is left.
    #[test]
    fn a_released_folder_serves_the_next_job() {
        let top = tempfile::tempdir().expect("tempdir");
        let mut dirs = JobDirs::open(top.path()).expect("open");
        let user = if dirs.as_root { 65534 } else { sys::effective_uid() };
        let one = dirs.prepare("1.1", "#!/bin/sh\necho one\n", user, user).expect("prepare");
        assert_eq!(fs::metadata(&one).expect("stat").uid(), user, "the folder is the job user's");
        assert_eq!(fs::metadata(one.join(JOB_SCRIPT_FILE)).expect("stat").uid(), user, "and job.sh");
        let folder = inode(&one);
        let old_script = one.join("kept-open-by-the-old-job");
        fs::hard_link(one.join(JOB_SCRIPT_FILE), &old_script).expect("a second name for the old job.sh");
        fs::create_dir(one.join("sub")).expect("a folder the job left");
        fs::write(one.join("sub/f"), b"x").expect("a file in it");
        std::os::unix::fs::symlink("/etc", one.join("link")).expect("a link the job left");
        let held = fs::File::open(one.join(JOB_SCRIPT_FILE)).expect("the old job keeps job.sh open");
        dirs.release("1.1").expect("release");
        assert!(!one.exists(), "the ended job's folder is gone from its name");
        assert_eq!(dirs.spares(), 1);
        let spare = top.path().join(format!("{SPARE_PREFIX}0"));
        assert_eq!(fs::metadata(&spare).expect("stat").uid(), sys::effective_uid(), "a spare is root's");
        assert!(names(&spare).is_empty(), "a spare is empty");
        assert!(Path::new("/etc/passwd").exists(), "the link was removed, not followed");

        let two = dirs.prepare("2.2", "#!/bin/sh\necho two\n", 0, 0).expect("prepare");
        assert_eq!(inode(&two), folder, "the spare was renamed into place");
        assert_eq!(fs::read_to_string(two.join(JOB_SCRIPT_FILE)).expect("read"), "#!/bin/sh\necho two\n");
        assert_eq!(names(&two), vec![std::ffi::OsString::from(JOB_SCRIPT_FILE)], "only the new script");
        let old = std::os::unix::fs::MetadataExt::ino(&held.metadata().expect("fstat"));
        assert_ne!(inode(&two.join(JOB_SCRIPT_FILE)), old, "a new job.sh, not the one the old job holds");
        let mode = fs::metadata(two.join(JOB_SCRIPT_FILE)).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, SCRIPT_MODE);
        assert_eq!(dirs.spares(), 0);
        let three = dirs.prepare("3.3", "#!/bin/sh\n", 0, 0).expect("prepare without a spare");
        assert_ne!(inode(&three), folder);
        // Releasing twice, or a folder that is not there, is fine.
        dirs.release("3.3").expect("release");
        dirs.release("3.3").expect("release again");
        dirs.release("9.9").expect("release of nothing");
        assert_eq!(dirs.spares(), 1);
    }

    // Goal: a relaunch of a job whose folder is still there reuses it, emptied, with a new
    // job.sh.
    #[test]
    fn a_relaunch_reuses_the_jobs_own_folder() {
        let top = tempfile::tempdir().expect("tempdir");
        let mut dirs = JobDirs::open(top.path()).expect("open");
        let first = dirs.prepare("1.1", "#!/bin/sh\necho first\n", 0, 0).expect("prepare");
        fs::write(first.join("left-behind"), b"x").expect("a file the first attempt left");
        let again = dirs.prepare("1.1", "#!/bin/sh\necho again\n", 0, 0).expect("prepare again");
        assert_eq!(again, first);
        assert_eq!(names(&again), vec![std::ffi::OsString::from(JOB_SCRIPT_FILE)]);
        assert_eq!(fs::read_to_string(again.join(JOB_SCRIPT_FILE)).expect("read"), "#!/bin/sh\necho again\n");
    }

    // Goal: spares survive a restart (found and cleaned again by open), junk with the spare
    // prefix is removed, and no more than SPARES_MAX are kept.
    #[test]
    fn spares_are_found_again_and_bounded() {
        let top = tempfile::tempdir().expect("tempdir");
        let mut dirs = JobDirs::open(top.path()).expect("open");
        for id in 0..SPARES_MAX + 3 {
            dirs.prepare(&format!("1.{id}"), "#!/bin/sh\n", 0, 0).expect("prepare");
        }
        for id in 0..SPARES_MAX + 3 {
            dirs.release(&format!("1.{id}")).expect("release");
        }
        assert_eq!(dirs.spares(), SPARES_MAX);
        assert_eq!(names(top.path()).len(), SPARES_MAX, "the folders beyond the bound were deleted");
        let spare = top.path().join(format!("{SPARE_PREFIX}0"));
        fs::write(spare.join("junk"), b"x").expect("junk in a spare (a cleaning cut short)");
        fs::write(top.path().join(format!("{SPARE_PREFIX}bad")), b"x").expect("junk with the prefix");
        let mut again = JobDirs::open(top.path()).expect("open again");
        assert_eq!(again.spares(), SPARES_MAX);
        assert!(!spare.join("junk").exists(), "spares are cleaned at open");
        assert!(!top.path().join(format!("{SPARE_PREFIX}bad")).exists());
        let reused = again.prepare("2.1", "#!/bin/sh\n", 0, 0).expect("prepare");
        assert!(reused.is_dir());
        assert_eq!(again.spares(), SPARES_MAX - 1);
    }
}
