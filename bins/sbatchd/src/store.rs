//! The job records on disk: their file format, loading them all at start, and the group
//! commit that makes a batch of Persist and Remove effects durable.
//!
//! A record file is `LVSBDREC` (8 bytes), the format version (u32, big-endian), the
//! record's revision (u64, big-endian: the shell counts every record it writes for a job,
//! so of two copies the higher revision is the newer), the CRC-32 of the body (u32,
//! big-endian), then the body: the XDR encoding of the `lava_sbd::JobRecord`. The checksum
//! turns a damaged file into an error naming the file rather than a record that decodes to
//! something else. Version 3 files (before the revision) are read as revision 0; the bodies
//! of older versions, which lack the record's last fields, are read with those fields empty
//! (`interactive` 0 before version 5, no hooks before 6, no task usage before 7).
//!
//! [`Store::commit`] carries out a batch: every record is written to `record.tmp`,
//! fsynced, renamed over `record`, and its folder is fsynced; a new job folder also makes
//! `state/` fsynced. The records of one batch are written by a few threads at once, which
//! lets the file system put their fsyncs in one journal commit.
//!
//! A new job's folder is a spare when one is ready ([`crate::spares`]): renamed to the
//! job's name, its first record written in place into `record.first` with one fdatasync,
//! and nothing else flushed. Without a spare it is made at the commit (`mkdir`, its empty
//! shepherd files, the record, then the folder and `state/` fsynced). Either way it may be
//! made ahead of its commit ([`Store::create_folder`], so that the job's launch can start
//! meanwhile); its first record is then a [`StoreOp::Create`]. Until the commit the folder
//! holds no record, which [`Store::load`] treats as never made.
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
use crate::layout::{
    self, FIRST_RECORD_FILE, Layout, NOTED_FILE, RECORD_FILE, SPARE_PREFIX, TEMPORARY_SUFFIX,
};
use crate::spares::{self, Found, Spares};

/// First bytes of every record file.
pub const RECORD_MAGIC: &[u8; 8] = b"LVSBDREC";
/// The record format written by this build (2: the run spec carries `-L` and `-E`;
/// 3: the record carries its dispatch number; 4: the header carries the revision; 5: the
/// record ends with its interactive bits; 6: then with its hooks, `JobRecord::hooks`; 7: then
/// with its tasks' resource usage, `JobRecord::task_rusage`; 8: then with its niceness,
/// resource limits and job starter, `JobRecord::execution`).
pub const RECORD_VERSION: u32 = 8;
/// The first format whose header carries the revision.
const RECORD_VERSION_REVISION: u32 = 4;
/// The first format whose body ends with the interactive word.
const RECORD_VERSION_INTERACTIVE: u32 = 5;
/// The first format whose body ends with the hooks.
const RECORD_VERSION_HOOKS: u32 = 6;
/// The XDR of [`lava_sbd::Hooks::default`]: three empty strings, each a zero length.
const EMPTY_HOOKS_XDR: [u8; 12] = [0; 12];
/// The first format whose body ends with the tasks' usage.
const RECORD_VERSION_TASK_USAGE: u32 = 7;
/// The XDR of a zero `ResourceUsage`: three u64.
const ZERO_USAGE_XDR: [u8; 24] = [0; 24];
/// The XDR of [`lava_sbd::Execution::default`]: niceness 0, eight absent limits and an
/// empty job starter, each a zero word.
const NO_EXECUTION_XDR: [u8; 40] = [0; 40];
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
        RECORD_VERSION_REVISION..=RECORD_VERSION if bytes.len() >= RECORD_HEADER_BYTES => {
            let mut revision = [0u8; 8];
            revision.copy_from_slice(&bytes[12..20]);
            (u64::from_be_bytes(revision), 20)
        }
        RECORD_VERSION_REVISION..=RECORD_VERSION => {
            return Err("not a job record (truncated header)".to_owned());
        }
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
    // Before version 5 the record had no `interactive` word at its end (it reads as 0),
    // before version 6 no hooks (they read as empty commands), before 7 no task usage,
    // before 8 no niceness and limits.
    let extended;
    let body = if version < RECORD_VERSION {
        let interactive: &[u8] = if version < RECORD_VERSION_INTERACTIVE { &[0u8; 4] } else { &[] };
        let hooks: &[u8] = if version < RECORD_VERSION_HOOKS { &EMPTY_HOOKS_XDR } else { &[] };
        let usage: &[u8] = if version < RECORD_VERSION_TASK_USAGE { &ZERO_USAGE_XDR } else { &[] };
        extended = [body, interactive, hooks, usage, &NO_EXECUTION_XDR[..]].concat();
        &extended[..]
    } else {
        body
    };
    let record: JobRecord = lava_xdr::from_bytes(body, &RECORD_LIMITS).map_err(|err| err.to_string())?;
    invariants::check_record(&record).map_err(|violation| violation.to_string())?;
    Ok((revision, record))
}

/// The record of the job folder `dir` with its revision: the newer of `record` and
/// `record.noted` ([`newest`]; a noted record left aside is logged); `None` without a
/// `record`. An unreadable `record` is an error naming the file.
pub fn read_newest(dir: &Path) -> Result<Option<(u64, JobRecord)>, Error> {
    let Some(durable) = read_durable(dir)? else { return Ok(None) };
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

/// The durable record of the job folder `dir`: `record`, else the first record written in
/// place into a spare's `record.first` ([`crate::spares`]). An empty `record.first`, or one
/// that does not decode (its write was cut short by a crash before anything relied on it),
/// counts as absent; an unreadable `record` is an error naming the file.
fn read_durable(dir: &Path) -> Result<Option<(u64, JobRecord)>, Error> {
    let path = dir.join(RECORD_FILE);
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    if let Some(bytes) = layout::read_optional(&path).map_err(io_error(&path))? {
        return decode_record(&bytes).map(Some).map_err(|problem| Error::Record { path, problem });
    }
    let first = dir.join(FIRST_RECORD_FILE);
    match layout::read_optional(&first).map_err(io_error(&first))? {
        None => Ok(None),
        Some(bytes) if bytes.is_empty() => Ok(None),
        Some(bytes) => match decode_record(&bytes) {
            Ok(found) => Ok(Some(found)),
            Err(problem) => {
                tracing::warn!(
                    file = %first.display(),
                    "ignoring a first record cut short by a crash ({problem}): nothing was done on it"
                );
                Ok(None)
            }
        },
    }
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
    /// Write the first record of a job whose folder [`Store::create_folder`] has just made
    /// (the shell turns a Persist into this after merging a batch's operations), as a
    /// Persist that makes the folder would: into a spare's `record.first`, or through
    /// `record` with the folder and `state/` fsynced.
    Create {
        /// The job's folder name.
        jobfile: String,
        /// The encoded record.
        bytes: Vec<u8>,
        /// How the folder was made.
        folder: NewFolder,
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
    /// the last one wins, except that a Persist after a Remove replaces, and one after a
    /// Create is still the Create (of the newer record).
    pub fn then(self, next: StoreOp) -> StoreOp {
        match (self, next) {
            (StoreOp::Remove { .. } | StoreOp::Replace { .. }, StoreOp::Persist { jobfile, bytes }) => {
                StoreOp::Replace { jobfile, bytes }
            }
            (StoreOp::Create { jobfile, folder, .. }, StoreOp::Persist { bytes, .. }) => {
                StoreOp::Create { jobfile, bytes, folder }
            }
            (_, next) => next,
        }
    }
}

/// How a job's folder came to be, for the write of its first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewFolder {
    /// It existed already.
    Existing,
    /// A spare renamed to the job's name: durable, with an empty `record.first`.
    Spare,
    /// Made now (`mkdir` and empty shepherd files), durable with the first record.
    Made,
}

/// The records of one host.
#[derive(Debug, Clone)]
pub struct Store {
    layout: Layout,
    /// fsyncs made by [`Store::commit`] and by the spares' thread (files and folders), for
    /// the status query.
    fsyncs: Arc<AtomicU64>,
    /// Spare job folders ([`crate::spares`]).
    spares: Arc<Spares>,
}

impl Store {
    /// The records under `layout`.
    pub fn new(layout: Layout) -> Store {
        let fsyncs = Arc::new(AtomicU64::new(0));
        let spares = Arc::new(Spares::new(layout.state_root(), Arc::clone(&fsyncs)));
        Store { layout, fsyncs, spares }
    }

    /// The pool of spare job folders, for the thread that keeps it filled.
    pub fn spares(&self) -> Arc<Spares> {
        Arc::clone(&self.spares)
    }

    /// fsyncs made so far by [`Store::commit`]: two per record written through `record`
    /// (the file, its folder), one per first record written into a spare, one for `state/`
    /// when a job folder was made or removed; and by the spares' thread, one per spare and
    /// one per batch of them.
    pub fn n_fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }

    /// Makes the folder of a job, ahead of the commit that writes its first record
    /// ([`StoreOp::Create`]): a spare renamed to the job's name when one is ready, else a new
    /// folder with its empty shepherd files; [`NewFolder::Existing`], with nothing done, when
    /// the folder exists. Nothing of it is durable, as the job's, before that commit.
    pub fn create_folder(&self, jobfile: &str) -> Result<NewFolder, Error> {
        let dir = self.layout.state_dir(jobfile);
        let io_error = |source| Error::Io { path: dir.clone(), source };
        // Job folders are made or renamed only by the daemon's commits and this call, one
        // operation per job at a time, so nothing can appear in between.
        if fs::symlink_metadata(&dir).is_ok() {
            return Ok(NewFolder::Existing);
        }
        if let Some(spare) = self.spares.take() {
            let from = self.layout.state_root().join(&spare);
            match fs::rename(&from, &dir) {
                Ok(()) => return Ok(NewFolder::Spare),
                Err(err) => tracing::warn!(folder = %from.display(), "cannot use a spare job folder: {err}"),
            }
        }
        if !layout::create_new_private_dir(&dir).map_err(io_error)? {
            return Ok(NewFolder::Existing);
        }
        layout::create_shepherd_files(&dir).map_err(io_error)?;
        Ok(NewFolder::Made)
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
        let names = self.settle_spares(names)?;
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

    /// At start, each spare-named folder among `names` (the folders of `state/`) is a job's
    /// folder whose rename a crash undid (it holds a record: it is renamed back), a spare as
    /// made (offered again), or a leftover (removed); see [`crate::spares`]. Returns the
    /// job folders' names, sorted. A record whose job's folder also exists is an error
    /// naming the file: only a folder that did not exist is ever made from a spare.
    fn settle_spares(&self, names: Vec<String>) -> Result<Vec<String>, Error> {
        let root = self.layout.state_root();
        let mut jobs = Vec::with_capacity(names.len());
        let mut found = Vec::new();
        let mut changed = false;
        for name in names {
            if !name.starts_with(SPARE_PREFIX) {
                jobs.push(name);
                continue;
            }
            let dir = root.join(&name);
            let io_error = |source| Error::Io { path: dir.clone(), source };
            if let Some((_, record)) = read_newest(&dir)? {
                let jobfile = layout::jobfile_name(record.run_spec.submit_time_s, record.job);
                let target = self.layout.state_dir(&jobfile);
                if fs::symlink_metadata(&target).is_ok() {
                    let problem =
                        format!("the record is job {} whose folder {jobfile} exists too", record.job);
                    return Err(Error::Record { path: dir.join(FIRST_RECORD_FILE), problem });
                }
                tracing::info!(folder = %dir.display(), job = %record.job, "renaming a job's folder back from its spare name");
                fs::rename(&dir, &target).map_err(io_error)?;
                jobs.push(jobfile);
                changed = true;
                continue;
            }
            match spares::classify(&dir, &name).map_err(io_error)? {
                Found::Spare(number) => found.push((number, name)),
                Found::Leftover => {
                    tracing::info!(folder = %dir.display(), "removing a spare job folder that is not as made");
                    layout::remove_dir_optional(&dir).map_err(io_error)?;
                    changed = true;
                }
            }
        }
        if changed {
            layout::fsync_dir(&root).map_err(|source| Error::Io { path: root.clone(), source })?;
        }
        self.spares.adopt(found);
        jobs.sort();
        Ok(jobs)
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
                let folder = self.create_folder(jobfile)?;
                self.write_first_record(jobfile, bytes, folder)
            }
            StoreOp::Create { jobfile, bytes, folder } => self.write_first_record(jobfile, bytes, *folder),
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

    /// Writes a record durably into the folder made as `folder` says (see the module doc);
    /// says whether `state/` must be fsynced for it (a folder made now). A made folder's
    /// empty shepherd files are durable with the record by the folder's fsync; the shepherd
    /// fills them in place (one flush each instead of two).
    fn write_first_record(&self, jobfile: &str, bytes: &[u8], folder: NewFolder) -> Result<bool, Error> {
        let dir = self.layout.state_dir(jobfile);
        if folder == NewFolder::Spare {
            let path = dir.join(FIRST_RECORD_FILE);
            let write = || -> std::io::Result<()> {
                let mut file = fs::OpenOptions::new().write(true).open(&path)?;
                std::io::Write::write_all(&mut file, bytes)?;
                file.sync_data()
            };
            write().map_err(|source| Error::Io { path: path.clone(), source })?;
            lava_crash::synced(&path);
            self.fsyncs.fetch_add(1, Ordering::Relaxed);
            return Ok(false);
        }
        layout::write_durable(&dir, RECORD_FILE, bytes)
            .map_err(|source| Error::Io { path: dir.join(RECORD_FILE), source })?;
        lava_crash::synced(&dir.join(RECORD_FILE));
        self.fsyncs.fetch_add(2, Ordering::Relaxed);
        Ok(folder == NewFolder::Made)
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
                Ok(()) => lava_crash::unsynced(&path),
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
            lava_crash::removed(&dir);
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
    use lava_sbd::{Effect, Hooks, Input, Sbd, UserInfo};

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
            post_exec: String::new(),
            queue_pre_exec: String::new(),
            queue_post_exec: String::new(),
            nice: 0,
            limits: wire::ResourceLimits::default(),
            job_starter: String::new(),
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

    /// A store in a new host folder under a temporary folder (kept while the first value
    /// lives).
    fn new_store() -> (tempfile::TempDir, Layout, Store) {
        let top = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(top.path(), "node1");
        layout.create().expect("layout");
        let store = Store::new(layout.clone());
        (top, layout, store)
    }

    // Goal: a record with the longest command round-trips with its revision; a damaged
    // byte, another magic or version are errors that say what is wrong; a version 3 file
    // (no revision) is still read, as revision 0, and each older body (without the fields
    // its version came before) as a record without them.
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
        future[11] = 9;
        assert!(decode_record(&future).expect_err("version").contains("version 9"));
        // Older bodies: version 7 without the niceness, limits and job starter, 6 without the
        // task usage too, 5 without the hooks too, versions 3 and 4 without the interactive
        // word too, each under its own checksum.
        let execution = lava_sbd::Execution {
            nice: -3,
            limits: wire::ResourceLimits { core_kb: Some(0), processes: Some(4), ..Default::default() },
            job_starter: "time %USRCMD".into(),
        };
        let with_limits = encode_record(&JobRecord { execution: execution.clone(), ..record.clone() }, 7);
        assert_eq!(decode_record(&with_limits).expect("v8").1.execution, execution);
        let older = |bytes: &[u8], version: u8, trailing: usize| {
            let body = &bytes[24..bytes.len() - trailing];
            let mut file = bytes[..20].to_vec();
            file[11] = version;
            file.extend_from_slice(&crc32fast::hash(body).to_be_bytes());
            file.extend_from_slice(body);
            file
        };
        let task_rusage = wire::ResourceUsage { user_time_ms: 1, system_time_ms: 2, max_rss_kb: 3 };
        let with_usage = encode_record(&JobRecord { task_rusage, ..record.clone() }, 7);
        let version7 = older(&with_usage, 7, NO_EXECUTION_XDR.len());
        assert_eq!(decode_record(&version7), Ok((7, JobRecord { task_rusage, ..record.clone() })));
        let hooks = Hooks { post_exec: "post".into(), ..Hooks::default() };
        let with_hooks = encode_record(&JobRecord { hooks, ..record.clone() }, 7);
        let version6 = older(&with_hooks, 6, ZERO_USAGE_XDR.len() + NO_EXECUTION_XDR.len());
        assert_eq!(decode_record(&version6).expect("v6").1.hooks.post_exec, "post");
        let version5 =
            older(&bytes, 5, EMPTY_HOOKS_XDR.len() + ZERO_USAGE_XDR.len() + NO_EXECUTION_XDR.len());
        assert_eq!(decode_record(&version5), Ok((7, record.clone())));
        let v5_body = &version5[24..];
        let old_body = &v5_body[..v5_body.len() - 4];
        let old_crc = crc32fast::hash(old_body).to_be_bytes();
        let mut version3 = bytes[..12].to_vec();
        version3[11] = 3;
        version3.extend_from_slice(&old_crc);
        version3.extend_from_slice(old_body);
        assert_eq!(decode_record(&version3), Ok((0, record.clone())));
        let mut version4 = bytes[..20].to_vec();
        version4[11] = 4;
        version4.extend_from_slice(&old_crc);
        version4.extend_from_slice(old_body);
        assert_eq!(decode_record(&version4), Ok((7, record.clone())));
        let interactive = JobRecord { interactive: wire::submit_flags::INTERACTIVE, ..record };
        assert_eq!(decode_record(&encode_record(&interactive, 8)), Ok((8, interactive)));
    }

    // Goal: at load the noted record wins only when it is readable, of the same run, and
    // newer; a damaged one is left aside (with the reason), never an error.
    #[test]
    fn a_noted_record_wins_only_when_newer_and_sound() {
        let (_top, layout, store) = new_store();
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
        let (_top, layout, store) = new_store();
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

    /// Makes `n` spares in `store`'s pool and offers them, as its thread would.
    fn ready_spares(store: &Store, n: usize) -> Vec<String> {
        let spares = store.spares();
        let made = spares.make(n).expect("make spares");
        spares.adopt(
            made.iter().map(|name| (layout::spare_number(name).expect("numbered"), name.clone())).collect(),
        );
        made
    }

    // Goal: a new job's folder is a spare when one is ready: renamed to the job's name, its
    // first record written into `record.first` with one flush and nothing else, read back
    // by load; a later record goes to `record`, which wins. Without a spare the folder is
    // made as before; an existing folder is left as it is.
    #[test]
    fn a_new_job_takes_a_spare_folder() {
        let (_top, layout, store) = new_store();
        ready_spares(&store, 1);
        let first = record(1);
        let jobfile = layout::jobfile_name(first.run_spec.submit_time_s, first.job);
        assert_eq!(store.create_folder(&jobfile).expect("folder"), NewFolder::Spare);
        assert_eq!(store.create_folder(&jobfile).expect("folder"), NewFolder::Existing);
        let before = store.n_fsyncs();
        let create = StoreOp::Create {
            jobfile: jobfile.clone(),
            bytes: encode_record(&first, 1),
            folder: NewFolder::Spare,
        };
        store.commit(&[create]).expect("commit");
        assert_eq!(store.n_fsyncs(), before + 1, "the record's own flush, nothing else");
        let dir = layout.state_dir(&jobfile);
        assert!(!dir.join(RECORD_FILE).exists());
        assert_eq!(store.load().expect("load"), vec![(jobfile.clone(), 1, first.clone())]);
        let started = JobRecord { pid: 5, pgid: 5, exec_time_ms: 1, ..first.clone() };
        store
            .commit(&[StoreOp::Persist { jobfile: jobfile.clone(), bytes: encode_record(&started, 2) }])
            .expect("commit");
        assert_eq!(store.load().expect("load"), vec![(jobfile.clone(), 2, started)]);
        // No spare left: the folder is made at the commit, with `state/` flushed.
        let other = record(2);
        let other_jobfile = layout::jobfile_name(other.run_spec.submit_time_s, other.job);
        let before = store.n_fsyncs();
        store
            .commit(&[StoreOp::Persist { jobfile: other_jobfile.clone(), bytes: encode_record(&other, 1) }])
            .expect("commit");
        assert_eq!(store.n_fsyncs(), before + 3, "record, folder, state/");
        assert!(layout.state_dir(&other_jobfile).join(RECORD_FILE).exists());
        assert_eq!(store.load().expect("load").len(), 2);
    }

    // Goal: a spare that cannot be renamed (here: gone from under the pool) is logged and
    // the job's folder is made as without spares; the spare is not offered again.
    #[test]
    fn a_spare_that_cannot_be_used_falls_back_to_a_new_folder() {
        let (_top, layout, store) = new_store();
        let spares = ready_spares(&store, 1);
        fs::remove_dir_all(layout.state_root().join(&spares[0])).expect("rm the spare");
        let job = record(1);
        let jobfile = layout::jobfile_name(job.run_spec.submit_time_s, job.job);
        assert_eq!(store.create_folder(&jobfile).expect("folder"), NewFolder::Made);
        assert!(layout.state_dir(&jobfile).join(layout::PID_FILE).exists(), "with its shepherd files");
        assert_eq!(store.spares().n_ready(), 0);
    }

    // Goal: at start, a spare-named folder holding a record (its rename undone by a crash)
    // is renamed back to its job's name; spares as made are offered again and numbered
    // after; other spare-named leftovers are removed; a job folder whose only record is a
    // `record.first` cut short is removed like any folder without a record; a record in a
    // spare-named folder whose job's folder also exists stops the load, naming the file.
    #[test]
    fn load_settles_spare_folders_after_a_crash() {
        let (_top, layout, store) = new_store();
        let spares = ready_spares(&store, 5);
        let job = record(1);
        let jobfile = layout::jobfile_name(job.run_spec.submit_time_s, job.job);
        assert_eq!(store.create_folder(&jobfile).expect("folder"), NewFolder::Spare);
        let create = StoreOp::Create {
            jobfile: jobfile.clone(),
            bytes: encode_record(&job, 1),
            folder: NewFolder::Spare,
        };
        store.commit(&[create]).expect("commit");
        let taken = spares.last().expect("the pool hands out its last").clone();
        fs::rename(layout.state_dir(&jobfile), layout.state_root().join(&taken)).expect("undo the rename");
        fs::write(layout.state_root().join(&spares[0]).join(layout::PID_FILE), b"junk").expect("write");
        let torn = record(3);
        let torn_jobfile = layout::jobfile_name(torn.run_spec.submit_time_s, torn.job);
        assert_eq!(store.create_folder(&torn_jobfile).expect("folder"), NewFolder::Spare);
        fs::write(layout.state_dir(&torn_jobfile).join(FIRST_RECORD_FILE), &encode_record(&torn, 1)[..30])
            .expect("a write cut short");

        let restarted = Store::new(layout.clone());
        assert_eq!(restarted.load().expect("load"), vec![(jobfile.clone(), 1, job.clone())]);
        assert!(!layout.state_root().join(&taken).exists(), "renamed back");
        assert!(!layout.state_root().join(&spares[0]).exists(), "a used spare is removed");
        assert!(!layout.state_dir(&torn_jobfile).exists(), "a record cut short is no record");
        assert_eq!(restarted.spares().n_ready(), 2, "the two untouched spares");
        assert_eq!(restarted.spares().make(1).expect("make"), vec![".spare.3"]);

        // The job's folder exists, and a spare-named folder claims the same job.
        let claim = layout.state_root().join(".spare.9");
        fs::create_dir(&claim).expect("mkdir");
        fs::write(claim.join(FIRST_RECORD_FILE), encode_record(&job, 1)).expect("write");
        let err = Store::new(layout.clone()).load().expect_err("two folders for one job");
        assert!(err.to_string().contains(".spare.9"), "{err}");
    }

    // Goal: a Persist after a Remove of the same job merges into a Replace, which deletes
    // the old run's files (shepherd files beside the record, the job folder) before it
    // writes the new record; any other sequence keeps the last operation.
    #[test]
    fn replace_deletes_the_old_runs_files_then_writes_the_record() {
        let (_top, layout, store) = new_store();
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
