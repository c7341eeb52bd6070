//! The job records on disk: their file format, loading them all at start, and the group
//! commit that makes a batch of Persist and Remove effects durable.
//!
//! A record file is `LVSBDREC` (8 bytes), the format version (u32, big-endian), the
//! record's revision (u64, big-endian: the shell counts every record it writes for a job,
//! so of two copies the higher revision is the newer), the CRC-32 of the body (u32,
//! big-endian), then the body: the XDR encoding of the `lava_sbd::JobRecord`. The checksum
//! turns a damaged file into an error naming the file rather than a record that decodes to
//! something else. Version 3 files (before the revision) are read as revision 0.
//!
//! [`Store::commit`] carries out a batch: every record is written to `record.tmp`,
//! fsynced, renamed over `record`, and its folder is fsynced; a new job folder also makes
//! `state/` fsynced. The records of one batch are written by a few threads at once, which
//! lets the file system put their fsyncs in one journal commit.
//!
//! Noted records (lava-sbd's `Effect::Note`: facts a crash cannot lose) are written by
//! [`Store::write_noted`] to `record.noted`, in place, with no fsync at all, and never over
//! `record`:
//! a crash of the machine may lose or damage that file, never the durable record. At
//! start, [`Store::load`] takes `record.noted` instead of `record` when it is readable, of
//! the same job and dispatch, and of a higher revision; an unreadable one is logged and
//! ignored (what it said is re-derived: mbatchd answers the resent messages, the
//! shepherd's files give the pid and the exit back).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lava_sbd::{JobRecord, invariants};

use crate::Error;
use crate::layout::{self, Layout, NOTED_FILE, RECORD_FILE, TEMPORARY_SUFFIX};

/// First bytes of every record file.
pub const RECORD_MAGIC: &[u8; 8] = b"LVSBDREC";
/// The record format written by this build (2: the run spec carries `-L` and `-E`;
/// 3: the record carries its dispatch number; 4: the header carries the revision).
pub const RECORD_VERSION: u32 = 4;
/// The oldest format read (its header has no revision).
const RECORD_VERSION_READ_MIN: u32 = 3;
/// Bytes before the XDR body: magic, version, revision, checksum.
const RECORD_HEADER_BYTES: usize = 8 + 4 + 8 + 4;
/// The same, in version 3.
const RECORD_HEADER_BYTES_V3: usize = 8 + 4 + 4;
/// Largest record file read (a record holds the job's environment and command).
pub const RECORD_BYTES_MAX: usize = 16 << 20;
/// Decoding limits of a record: strings as long as the longest command.
pub const RECORD_LIMITS: lava_xdr::Limits = lava_xdr::Limits {
    input_bytes_max: RECORD_BYTES_MAX,
    string_bytes_max: lava_batch_ll::COMMAND_BYTES_MAX as u32,
    ..lava_xdr::Limits::DEFAULT
};
/// Threads writing the records of one batch at most.
const COMMIT_THREADS_MAX: usize = 4;

/// Encodes a record file of revision `revision`.
pub fn encode_record(record: &JobRecord, revision: u64) -> Vec<u8> {
    let body = lava_xdr::to_bytes(record).expect("a job record always encodes (no unsupported types)");
    let mut bytes = Vec::with_capacity(RECORD_HEADER_BYTES + body.len());
    bytes.extend_from_slice(RECORD_MAGIC);
    bytes.extend_from_slice(&RECORD_VERSION.to_be_bytes());
    bytes.extend_from_slice(&revision.to_be_bytes());
    bytes.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    bytes.extend_from_slice(&body);
    bytes
}

/// Decodes and checks a record file: its revision and the record; the error says what is
/// wrong (the caller names the file).
pub fn decode_record(bytes: &[u8]) -> Result<(u64, JobRecord), String> {
    if bytes.len() > RECORD_BYTES_MAX {
        return Err(format!("{} bytes, more than the {RECORD_BYTES_MAX} a record may have", bytes.len()));
    }
    if bytes.len() < RECORD_HEADER_BYTES_V3 || &bytes[..8] != RECORD_MAGIC {
        return Err("not a job record (bad magic)".to_owned());
    }
    let word = |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let version = word(8);
    let (revision, crc_at) = match version {
        RECORD_VERSION_READ_MIN => (0, 12),
        RECORD_VERSION if bytes.len() >= RECORD_HEADER_BYTES => {
            let mut revision = [0u8; 8];
            revision.copy_from_slice(&bytes[12..20]);
            (u64::from_be_bytes(revision), 20)
        }
        RECORD_VERSION => return Err("not a job record (truncated header)".to_owned()),
        _ => {
            return Err(format!(
                "record format version {version}; this sbatchd reads versions \
                 {RECORD_VERSION_READ_MIN} to {RECORD_VERSION}"
            ));
        }
    };
    let body = &bytes[crc_at + 4..];
    if crc32fast::hash(body) != word(crc_at) {
        return Err("checksum mismatch: the file is damaged".to_owned());
    }
    let record: JobRecord = lava_xdr::from_bytes(body, &RECORD_LIMITS).map_err(|err| err.to_string())?;
    invariants::check_record(&record).map_err(|violation| violation.to_string())?;
    Ok((revision, record))
}

/// The record of the job folder `dir` with its revision: the newer of `record` and
/// `record.noted` ([`newest`]; a noted record left aside is logged); `None` without a
/// `record`. An unreadable `record` is an error naming the file.
pub fn read_newest(dir: &Path) -> Result<Option<(u64, JobRecord)>, Error> {
    let path = dir.join(RECORD_FILE);
    let io_error = |source| Error::Io { path: path.clone(), source };
    let Some(bytes) = layout::read_optional(&path).map_err(io_error)? else { return Ok(None) };
    let durable = decode_record(&bytes).map_err(|problem| Error::Record { path: path.clone(), problem })?;
    let noted_path = dir.join(NOTED_FILE);
    let noted = match layout::read_optional(&noted_path) {
        Ok(bytes) => bytes.map(|bytes| decode_record(&bytes)),
        Err(err) => Some(Err(err.to_string())),
    };
    let (newest, ignored) = newest(durable, noted);
    if let Some(problem) = ignored {
        tracing::warn!(
            file = %noted_path.display(),
            "ignoring a noted record ({problem}): its facts come back from mbatchd's answers and \
             the shepherd's files"
        );
    }
    Ok(Some(newest))
}

/// The newer of a job's durable record and its noted one (see the module doc): the
/// noted one when it decodes, is of the same job and dispatch, and has a higher revision.
/// Says why a noted record that exists was not taken, for the log.
pub fn newest(
    durable: (u64, JobRecord),
    noted: Option<Result<(u64, JobRecord), String>>,
) -> ((u64, JobRecord), Option<String>) {
    match noted {
        None => (durable, None),
        Some(Err(problem)) => (durable, Some(problem)),
        Some(Ok((revision, record))) => {
            let same_run = record.job == durable.1.job && record.dispatch_seq == durable.1.dispatch_seq;
            if same_run && revision > durable.0 { ((revision, record), None) } else { (durable, None) }
        }
    }
}

/// One change of the durable records.
#[derive(Debug)]
pub enum StoreOp {
    /// Write this record file into `state/<jobfile>/record`.
    Persist {
        /// The job's folder name.
        jobfile: String,
        /// The encoded record.
        bytes: Vec<u8>,
    },
    /// Delete `state/<jobfile>` and `jobs/<jobfile>`.
    Remove {
        /// The job's folder name.
        jobfile: String,
    },
    /// A Remove followed by a Persist of the same job in one batch (a new
    /// dispatch replacing a finished run): delete both folders, with the old
    /// run's shepherd files, then write the new record. A crash in between
    /// leaves a folder without a record, which [`Store::load`] deletes: the
    /// outcome of the Remove alone.
    Replace {
        /// The job's folder name.
        jobfile: String,
        /// The encoded record.
        bytes: Vec<u8>,
    },
}

impl StoreOp {
    /// This operation followed by `next`, of the same job, as one operation:
    /// the last one wins, except that a Persist after a Remove replaces.
    pub fn then(self, next: StoreOp) -> StoreOp {
        match (self, next) {
            (StoreOp::Remove { .. } | StoreOp::Replace { .. }, StoreOp::Persist { jobfile, bytes }) => {
                StoreOp::Replace { jobfile, bytes }
            }
            (_, next) => next,
        }
    }
}

/// The records of one host.
#[derive(Debug, Clone)]
pub struct Store {
    layout: Layout,
    /// fsyncs made by [`Store::commit`] (files and folders), for the status query.
    fsyncs: Arc<AtomicU64>,
}

impl Store {
    /// The records under `layout`.
    pub fn new(layout: Layout) -> Store {
        Store { layout, fsyncs: Arc::new(AtomicU64::new(0)) }
    }

    /// fsyncs made so far by [`Store::commit`]: two per record written (the file, its folder)
    /// and one for `state/` when a job folder was created or removed.
    pub fn n_fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }

    /// Reads every record, in folder-name order, with its revision: the newer of `record`
    /// and `record.noted` ([`newest`]). A folder without a record (a creation cut short by
    /// a crash: nothing of it was durable, nothing was reported) and leftover temporary
    /// files are deleted; a record that does not decode, or whose folder is not named after
    /// it, stops the daemon with an error naming the file; a noted record that does not
    /// decode is logged and left aside.
    pub fn load(&self) -> Result<Vec<(String, u64, JobRecord)>, Error> {
        let root = self.layout.state_root();
        let io_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        let mut names: Vec<String> = Vec::new();
        for entry in fs::read_dir(&root).map_err(io_error(&root))? {
            let entry = entry.map_err(io_error(&root))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().map_err(io_error(&entry.path()))?.is_dir() {
                names.push(name);
            }
        }
        names.sort();
        let mut records = Vec::new();
        for jobfile in names {
            let dir = self.layout.state_dir(&jobfile);
            let path = dir.join(RECORD_FILE);
            layout::remove_optional(&dir.join(format!("{RECORD_FILE}{TEMPORARY_SUFFIX}")))
                .map_err(io_error(&dir))?;
            let Some((revision, record)) = read_newest(&dir)? else {
                tracing::info!(folder = %dir.display(), "removing a job folder without a record");
                layout::remove_dir_optional(&dir).map_err(io_error(&dir))?;
                layout::remove_dir_optional(&self.layout.job_dir(&jobfile))
                    .map_err(io_error(&self.layout.job_dir(&jobfile)))?;
                continue;
            };
            let expected = layout::jobfile_name(record.run_spec.submit_time_s, record.job);
            if expected != jobfile {
                let problem = format!("the record is job {} whose folder would be {expected}", record.job);
                return Err(Error::Record { path, problem });
            }
            records.push((jobfile, revision, record));
        }
        Ok(records)
    }

    /// Makes every operation durable (see the module doc). On error the daemon must stop:
    /// it can no longer keep the contract that facts are durable before they are acted on.
    pub fn commit(&self, ops: &[StoreOp]) -> Result<(), Error> {
        if ops.is_empty() {
            return Ok(());
        }
        let n_threads = ops.len().min(COMMIT_THREADS_MAX);
        let results: Vec<Result<bool, Error>> = if n_threads <= 1 {
            vec![self.apply_each(ops.iter())]
        } else {
            std::thread::scope(|scope| {
                let workers: Vec<_> = (0..n_threads)
                    .map(|first| {
                        scope.spawn(move || self.apply_each(ops.iter().skip(first).step_by(n_threads)))
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|worker| worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
                    .collect()
            })
        };
        let mut root_changed = false;
        for result in results {
            root_changed |= result?;
        }
        if root_changed {
            let root = self.layout.state_root();
            layout::fsync_dir(&root).map_err(|source| Error::Io { path: root, source })?;
            self.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Applies operations one after the other; says whether `state/` itself changed.
    fn apply_each<'a>(&self, ops: impl Iterator<Item = &'a StoreOp>) -> Result<bool, Error> {
        let mut root_changed = false;
        for op in ops {
            root_changed |= self.apply(op)?;
        }
        Ok(root_changed)
    }

    fn apply(&self, op: &StoreOp) -> Result<bool, Error> {
        match op {
            StoreOp::Persist { jobfile, bytes } => {
                let dir = self.layout.state_dir(jobfile);
                let io_error = |source| Error::Io { path: dir.join(RECORD_FILE), source };
                let created = !dir.exists();
                if created {
                    layout::create_private_dir(&dir).map_err(io_error)?;
                    // Durable with the record by the folder's fsync below; the shepherd
                    // fills them in place (one flush each instead of two).
                    layout::create_shepherd_files(&dir).map_err(io_error)?;
                }
                layout::write_durable(&dir, RECORD_FILE, bytes).map_err(io_error)?;
                self.fsyncs.fetch_add(2, Ordering::Relaxed);
                Ok(created)
            }
            StoreOp::Remove { jobfile } => {
                self.remove_folders(jobfile)?;
                Ok(true)
            }
            StoreOp::Replace { jobfile, bytes } => {
                self.remove_folders(jobfile)?;
                self.apply(&StoreOp::Persist { jobfile: jobfile.clone(), bytes: bytes.clone() })?;
                Ok(true)
            }
        }
    }

    /// Writes noted records (`jobfile`, encoded record) to their `record.noted` files, in
    /// place and without fsync (see the module doc). A job whose folder is gone is skipped.
    /// A write that fails is logged, naming the file, and the others go on: a noted record
    /// is one a crash may lose anyway, so failing to write one breaks no promise (its facts
    /// come back as the module doc says), and the daemon keeps serving. Returns how many
    /// writes failed.
    pub fn write_noted(&self, noted: &[(String, Vec<u8>)]) -> usize {
        let mut failed = 0;
        for (jobfile, bytes) in noted {
            let path = self.layout.state_dir(jobfile).join(NOTED_FILE);
            // In place, no temporary file: a write cut short fails the checksum and is
            // ignored at load like any damaged noted record.
            match fs::write(&path, bytes) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => {
                    failed += 1;
                    tracing::error!(
                        file = %path.display(),
                        "cannot write a noted record: {err}; a restart would resend what it noted"
                    );
                }
            }
        }
        failed
    }

    /// Deletes `state/<jobfile>` and `jobs/<jobfile>`.
    fn remove_folders(&self, jobfile: &str) -> Result<(), Error> {
        for dir in [self.layout.state_dir(jobfile), self.layout.job_dir(jobfile)] {
            layout::remove_dir_optional(&dir).map_err(|source| Error::Io { path: dir.clone(), source })?;
        }
        Ok(())
    }

    /// The path of a job's record, for messages.
    pub fn record_path(&self, jobfile: &str) -> PathBuf {
        self.layout.state_dir(jobfile).join(RECORD_FILE)
    }
}

#[cfg(test)]
mod tests {
    use lava_batch_ll::JobSpec;
    use lava_batch_wire as wire;
    use lava_sbd::{Effect, Input, Sbd, UserInfo};

    use super::*;

    /// The record lava-sbd persists for a new job.
    fn record(id: u32) -> JobRecord {
        let specs = wire::JobSpecs {
            job: wire::WireJobRef { job_id: id, array_index: 0 },
            submit_time: 1_700_000_000,
            dispatch_time: 1_700_000_001,
            dispatch_seq: 1,
            user_id: 1000,
            group_id: 100,
            user_name: "alice".into(),
            queue: "normal".into(),
            job_name: "j".into(),
            command: "x".repeat(lava_batch_ll::COMMAND_BYTES_MAX),
            from_host: "h".into(),
            cwd: "/w".into(),
            sub_home_dir: "/home/alice".into(),
            input_file: String::new(),
            output_file: String::new(),
            error_file: String::new(),
            file_flags: 0,
            n_slots: 1,
            exec_hosts: vec!["h".into()],
            umask: 0o022,
            run_limit_s: 0,
            mem_limit_kb: 0,
            terminate_interval_s: 0,
            project: String::new(),
            login_shell: String::new(),
            pre_exec: String::new(),
            env: vec![],
        };
        let user = UserInfo { uid: 1000, gid: 100, home: "/home/alice".into(), shell: "/bin/sh".into() };
        let spec = Box::new(JobSpec::try_from(specs).expect("valid"));
        let mut effects = Vec::new();
        Sbd::new(lava_sbd::Config::default()).step(1, Input::NewJob { spec, user: Ok(user) }, &mut effects);
        match effects.into_iter().next() {
            Some(Effect::Persist(_, record)) => record,
            other => panic!("expected a Persist, got {other:?}"),
        }
    }

    // Goal: a record with the longest command round-trips with its revision; a damaged
    // byte, another magic or version are errors that say what is wrong; a version 3 file
    // (no revision) is still read, as revision 0.
    #[test]
    fn record_files_round_trip_and_refuse_damage() {
        let record = record(1);
        let bytes = encode_record(&record, 7);
        assert_eq!(decode_record(&bytes), Ok((7, record.clone())));
        let mut damaged = bytes.clone();
        *damaged.last_mut().expect("body") ^= 1;
        assert!(decode_record(&damaged).expect_err("damaged").contains("checksum"));
        assert!(decode_record(b"LVSBDREX\0\0\0\x01\0\0\0\0").expect_err("magic").contains("magic"));
        assert!(decode_record(&bytes[..18]).expect_err("short").contains("truncated"));
        let mut future = bytes.clone();
        future[11] = 5;
        assert!(decode_record(&future).expect_err("version").contains("version 5"));
        let mut version3 = bytes[..12].to_vec();
        version3[11] = 3;
        version3.extend_from_slice(&bytes[20..]);
        assert_eq!(decode_record(&version3), Ok((0, record)));
    }

    // Goal: at load the noted record wins only when it is readable, of the same run, and
    // newer; a damaged one is left aside (with the reason), never an error.
    #[test]
    fn a_noted_record_wins_only_when_newer_and_sound() {
        let top = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(top.path(), "node1");
        layout.create().expect("layout");
        let store = Store::new(layout.clone());
        let durable = record(1);
        let jobfile = layout::jobfile_name(durable.run_spec.submit_time_s, durable.job);
        store
            .commit(&[StoreOp::Persist { jobfile: jobfile.clone(), bytes: encode_record(&durable, 2) }])
            .expect("commit");
        let acked = JobRecord { pid: 5, pgid: 5, exec_time_ms: 1, pid_acked: true, ..durable.clone() };
        let load = |noted: &[u8]| {
            fs::write(layout.state_dir(&jobfile).join(NOTED_FILE), noted).expect("write");
            store.load().expect("load")
        };
        assert_eq!(load(&encode_record(&acked, 3)), vec![(jobfile.clone(), 3, acked.clone())]);
        // Older than the durable record (a Persist came after it): the durable one.
        assert_eq!(load(&encode_record(&acked, 1)), vec![(jobfile.clone(), 2, durable.clone())]);
        // Another dispatch's record left behind: the durable one.
        let other_run = JobRecord { dispatch_seq: 9, ..acked.clone() };
        assert_eq!(load(&encode_record(&other_run, 5)), vec![(jobfile.clone(), 2, durable.clone())]);
        // Damaged or empty, as a machine crash may leave it: the durable one.
        assert_eq!(load(b""), vec![(jobfile.clone(), 2, durable.clone())]);
        let mut damaged = encode_record(&acked, 3);
        *damaged.last_mut().expect("body") ^= 1;
        assert_eq!(load(&damaged), vec![(jobfile.clone(), 2, durable.clone())]);
        // write_noted writes the file; a job whose folder is gone is skipped.
        fs::remove_file(layout.state_dir(&jobfile).join(NOTED_FILE)).expect("rm");
        let gone = (String::from("1700000000.99"), encode_record(&acked, 1));
        assert_eq!(store.write_noted(&[(jobfile.clone(), encode_record(&acked, 4)), gone]), 0);
        assert_eq!(store.load().expect("load"), vec![(jobfile.clone(), 4, acked.clone())]);
        // A write that fails (here: a folder where the file should be) is counted and
        // logged, the other writes go on, and load still takes the durable record.
        let other = record(2);
        let other_jobfile = layout::jobfile_name(other.run_spec.submit_time_s, other.job);
        store
            .commit(&[StoreOp::Persist { jobfile: other_jobfile.clone(), bytes: encode_record(&other, 1) }])
            .expect("commit");
        fs::remove_file(layout.state_dir(&jobfile).join(NOTED_FILE)).expect("rm");
        fs::create_dir(layout.state_dir(&jobfile).join(NOTED_FILE)).expect("mkdir in the way");
        let other_acked = JobRecord { pid_acked: true, pid: 6, pgid: 6, exec_time_ms: 1, ..other.clone() };
        let writes = [
            (jobfile.clone(), encode_record(&acked, 5)),
            (other_jobfile.clone(), encode_record(&other_acked, 2)),
        ];
        assert_eq!(store.write_noted(&writes), 1);
        assert_eq!(store.load().expect("load"), vec![(jobfile, 2, durable), (other_jobfile, 2, other_acked)]);
    }

    // Goal: load finds committed records, cleans up a folder without a record, and stops
    // (naming the file) at a damaged record; Remove deletes both folders of a job.
    #[test]
    fn load_commit_and_remove() {
        let top = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(top.path(), "node1");
        layout.create().expect("layout");
        let store = Store::new(layout.clone());
        let (one, two) = (record(1), record(2));
        let jobfile = |r: &JobRecord| layout::jobfile_name(r.run_spec.submit_time_s, r.job);
        let ops = [&one, &two]
            .map(|r| StoreOp::Persist { jobfile: jobfile(r), bytes: encode_record(r, 1) })
            .into_iter()
            .collect::<Vec<_>>();
        store.commit(&ops).expect("commit");
        fs::create_dir(layout.state_dir("1700000000.9")).expect("mkdir");
        let loaded = store.load().expect("load");
        assert_eq!(loaded, vec![(jobfile(&one), 1, one.clone()), (jobfile(&two), 1, two.clone())]);
        assert!(!layout.state_dir("1700000000.9").exists(), "the empty folder was removed");

        store.commit(&[StoreOp::Remove { jobfile: jobfile(&two) }]).expect("remove");
        assert_eq!(store.load().expect("load").len(), 1);
        fs::write(store.record_path(&jobfile(&one)), b"garbage").expect("write");
        let err = store.load().expect_err("damaged record");
        assert!(err.to_string().contains(&store.record_path(&jobfile(&one)).display().to_string()), "{err}");
    }

    // Goal: a Persist after a Remove of the same job merges into a Replace, which deletes
    // the old run's files (shepherd files beside the record, the job folder) before it
    // writes the new record; any other sequence keeps the last operation.
    #[test]
    fn replace_deletes_the_old_runs_files_then_writes_the_record() {
        let top = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(top.path(), "node1");
        layout.create().expect("layout");
        let store = Store::new(layout.clone());
        let old = record(1);
        let jobfile = layout::jobfile_name(old.run_spec.submit_time_s, old.job);
        store
            .commit(&[StoreOp::Persist { jobfile: jobfile.clone(), bytes: encode_record(&old, 1) }])
            .expect("old");
        fs::write(layout.state_dir(&jobfile).join("pid"), b"4242").expect("pid file");
        fs::create_dir_all(layout.job_dir(&jobfile)).expect("job folder");
        let new = JobRecord { dispatch_seq: 2, ..old };
        let remove = || StoreOp::Remove { jobfile: jobfile.clone() };
        let persist =
            |r: &JobRecord| StoreOp::Persist { jobfile: jobfile.clone(), bytes: encode_record(r, 1) };
        assert!(matches!(persist(&new).then(remove()), StoreOp::Remove { .. }));
        let op = remove().then(persist(&new)).then(persist(&new));
        assert!(matches!(op, StoreOp::Replace { .. }), "{op:?}");
        store.commit(&[op]).expect("replace");
        // The new folder has its own, empty, shepherd files: the old run's pid is gone.
        let pid = layout::read_shepherd_file(&layout.state_dir(&jobfile).join("pid")).expect("read");
        assert_eq!(pid, None, "the old run's pid file is gone");
        assert!(!layout.job_dir(&jobfile).exists(), "the old run's job folder is gone");
        assert_eq!(store.load().expect("load"), vec![(jobfile.clone(), 1, new)]);
    }
}
