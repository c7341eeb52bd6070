//! SBD_PEEK: the output a running job has written so far, for `bpeek` (relayed by
//! mbatchd, which checked that the caller owns the job or administers the cluster).
//!
//! Any job whose process was started and whose record sbatchd still holds can be read
//! (mbatchd only relays peeks at started jobs). The answer is at most
//! `wire::PEEK_BYTES_MAX` bytes of the job's standard output file
//! (the `-o` file, else the spool file; see [`crate::launch::standard_files`]) from the
//! asked offset. sbatchd runs as root, so it only reads a regular file that the job's
//! user owns, opened without following a symbolic link at its last component: a job
//! submitted with `-o /etc/shadow` (or that replaces its output with a link) cannot make
//! sbatchd read a file its user could not.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

use lava_batch_wire as wire;
use lava_sbd::JobRecord;

use crate::launch;

fn refusal(code: u32, message: String) -> wire::PeekReply {
    wire::PeekReply { code, message, data: Vec::new(), next_offset: 0 }
}

/// The answer to `request` for the job's record (`None`: sbatchd holds no such job) and
/// its job file name.
pub fn answer(record: Option<(&JobRecord, &str)>, request: &wire::PeekRequest) -> wire::PeekReply {
    let job = request.job;
    let shown = if job.array_index == 0 {
        job.job_id.to_string()
    } else {
        format!("{}[{}]", job.job_id, job.array_index)
    };
    // A finished job's record stays (as a tombstone) for a day: `bpeek -f` gets the last
    // bytes a job wrote just before it ended.
    let Some((record, jobfile)) = record.filter(|(record, _)| record.is_spawned()) else {
        return refusal(wire::PEEK_NOT_RUNNING, format!("Job <{shown}> : Not a running job"));
    };
    let (stdout, _, _) = launch::standard_files(&record.run_spec, jobfile);
    match read_owned(&stdout, record.run_spec.exec_uid, request.offset) {
        Ok(data) => {
            let next_offset = request.offset + data.len() as u64;
            wire::PeekReply { code: wire::PEEK_OK, message: String::new(), data, next_offset }
        }
        Err(problem) => {
            refusal(wire::PEEK_FAILED, format!("Job <{shown}> : cannot read {stdout}: {problem}"))
        }
    }
}

/// Up to `PEEK_BYTES_MAX` bytes of `path` from `offset`, if it is a regular file owned by
/// `uid` (a file not created yet reads as empty).
fn read_owned(path: &str, uid: u32, offset: u64) -> Result<Vec<u8>, String> {
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path);
    let mut file: File = match file {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error.to_string()),
    };
    let meta = file.metadata().map_err(|error| error.to_string())?;
    if !meta.is_file() || (meta.uid() != uid && uid != 0) {
        return Err("not a regular file owned by the job's user".to_owned());
    }
    let mut data = Vec::new();
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.take(u64::from(wire::PEEK_BYTES_MAX)).read_to_end(&mut data))
        .map_err(|error| error.to_string())?;
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a file of the user is read from the offset, bounded; a missing file is
    // empty; a link or another user's file is refused.
    #[test]
    fn only_the_users_regular_files_are_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("out");
        std::fs::write(&path, "hello world").expect("write");
        let me = std::fs::metadata(&path).expect("stat").uid();
        let text = |p: &std::path::Path, uid, offset| read_owned(p.to_str().expect("utf-8"), uid, offset);
        assert_eq!(text(&path, me, 6), Ok(b"world".to_vec()));
        assert_eq!(text(&dir.path().join("none"), me, 0), Ok(Vec::new()));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).expect("symlink");
        assert!(text(&link, me, 0).is_err());
        if me == 0 {
            assert!(text(&path, 12345, 0).is_err(), "another user's file");
        }
        std::fs::write(&path, vec![b'x'; wire::PEEK_BYTES_MAX as usize + 10]).expect("write");
        assert_eq!(text(&path, me, 0).map(|d| d.len()), Ok(wire::PEEK_BYTES_MAX as usize));
    }
}
