//! `lsb.acct`, the accounting log: one JOB_FINISH line per finished job in LSF's text
//! format (`lava_batch_ll::acct`), in the event log's folder (`$LSB_SHAREDIR/<cluster>/logdir`),
//! as LSF keeps it.
//!
//! # Derived, never the truth
//! The event log is the truth; `lsb.acct` is derived from it. The loop takes a job's
//! record from the logic when it appends the JOB_STATUS that made the job DONE or EXIT
//! and hands it to the writer thread ([`AcctLog`]) only once that event is durable
//! ("act, then record; durable, then acknowledge"): a record is never written for a
//! finish the log could lose. The writer appends whatever has arrived, then fsyncs
//! (`fdatasync`), then switches the file if it is due; it never blocks the loop. So a
//! record lags its event by one group commit plus one write and fsync, and a crash of
//! mbatchd (or of the machine) can lose the newest records.
//!
//! # Rebuilt at start, idempotent
//! At start, after replay, [`reconcile`] compares the records of every finished job
//! still in memory (`CLEAN_PERIOD`) with the records in `lsb.acct` and its switched
//! files (newest first, down to the file whose oldest record ends before the oldest such
//! job), keyed by job id, array index and end time, and appends the missing ones, oldest
//! end first, before mbatchd serves. A record is therefore written exactly once even
//! when mbatchd dies between the event and the record. A job cleaned from memory before
//! its record was written (only if `lsb.acct` could not be written for `CLEAN_PERIOD`) is
//! not rebuilt; a record whose end time falls in a file older than the one the scan stops
//! at is not looked for.
//!
//! # Switching (lsb.params)
//! `ACCT_ARCHIVE_SIZE` (KB): once the file is larger after a write, `lsb.acct` becomes
//! `lsb.acct.1` (the older ones shift to `.2`, `.3`, ...) and the next record starts a new
//! file. `ACCT_ARCHIVE_AGE` (days): the same once the file's first record is that old.
//! `MAX_ACCT_ARCHIVE_FILE`: switched files beyond that number are deleted. The file is
//! created with mode 0644; the folder stays mbatchd's (0700), so `bacct` reads it as root.
//!
//! # A full disk
//! A failed write or fsync is logged once and tried again every second with the same
//! lines (those written in part are not written twice: the file is cut back to its
//! length before the batch); nothing is dropped while mbatchd runs. Writing,
//! retrying and switching are [`crate::textlog`]'s, shared with the `lsb.events`
//! text view.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use crate::textlog;

use lava_batch_ll::acct::AcctRecord;

/// The file's name, as LSF names it.
pub const ACCT_NAME: &str = "lsb.acct";

/// When `lsb.acct` is switched and how many switched files are kept (lsb.params).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AcctRule {
    /// `ACCT_ARCHIVE_SIZE`, bytes.
    pub max_bytes: Option<u64>,
    /// `ACCT_ARCHIVE_AGE`, seconds.
    pub max_age_s: Option<u64>,
    /// `MAX_ACCT_ARCHIVE_FILE`.
    pub max_files: Option<u32>,
}

impl AcctRule {
    /// The rule of lsb.params.
    pub fn of(params: &lava_conf::LsbParams) -> AcctRule {
        AcctRule {
            max_bytes: params.acct_archive_size_kb.map(|kb| kb.saturating_mul(1024)),
            max_age_s: params.acct_archive_age_days.map(|days| u64::from(days) * 86_400),
            max_files: params.max_acct_archive_file,
        }
    }
}

/// The path of `lsb.acct` in `dir`, or of its switched file `n` (`lsb.acct.n`) for `n > 0`.
pub fn acct_path(dir: &Path, n: u32) -> PathBuf {
    textlog::path(dir, ACCT_NAME, n)
}

/// The records of a file, in order; unreadable lines are skipped and counted.
fn read_records(path: &Path) -> io::Result<(Vec<AcctRecord>, usize)> {
    let text = match fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(error) => return Err(error),
    };
    let mut records = Vec::new();
    let mut bad = 0;
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        match AcctRecord::parse(line) {
            Ok(Some(record)) => records.push(record),
            Ok(None) => {}
            Err(_) => bad += 1,
        }
    }
    Ok((records, bad))
}

/// Appends to `lsb.acct` in `dir` the records of `finished` it lacks (see the module
/// doc) and makes them durable; returns how many were appended.
pub fn reconcile(dir: &Path, finished: &[AcctRecord]) -> io::Result<usize> {
    let missing = missing_lines(dir, finished, BTreeSet::new())?;
    if missing.is_empty() {
        return Ok(0);
    }
    let count = missing.lines().count();
    textlog::append_durably(&acct_path(dir, 0), &missing)?;
    Ok(count)
}

/// The lines of the records of `finished` that neither `lsb.acct` in `dir` (see the module
/// doc) nor `present` (keys about to be written) holds.
fn missing_lines(
    dir: &Path,
    finished: &[AcctRecord],
    mut present: BTreeSet<(u32, u32, i64)>,
) -> io::Result<String> {
    let Some(oldest) = finished.iter().map(|record| record.event_time).min() else {
        return Ok(String::new());
    };
    for n in 0.. {
        let path = acct_path(dir, n);
        if n > 0 && !path.exists() {
            break;
        }
        let (records, bad) = read_records(&path)?;
        if bad > 0 {
            tracing::warn!(path = %path.display(), bad, "lines of lsb.acct that are no JOB_FINISH record");
        }
        let first = records.first().map(|record| record.event_time);
        present.extend(records.iter().map(AcctRecord::key));
        if first.is_some_and(|first| first < oldest) {
            break;
        }
    }
    Ok(finished.iter().filter(|record| !present.contains(&record.key())).map(AcctRecord::to_line).collect())
}

/// What the writer thread is handed, in order.
#[derive(Debug)]
enum Item {
    /// A durable finish's record line.
    Line(String),
    /// The records of a state that replaced the state the lines came from (a master
    /// candidate caught up by its leader's snapshot): those `lsb.acct` lacks are appended,
    /// as [`reconcile`] does at start, after every line handed over before.
    Reconcile(Vec<AcctRecord>),
}

/// The writer thread's end of `lsb.acct`, owned by the loop (see the module doc).
#[derive(Debug)]
pub struct AcctLog {
    lines: Option<mpsc::Sender<Item>>,
    thread: Option<JoinHandle<()>>,
}

impl AcctLog {
    /// Starts the writer of `lsb.acct` in `dir` with switching rule `rule`.
    pub fn start(dir: PathBuf, rule: AcctRule) -> io::Result<AcctLog> {
        let (lines, receiver) = mpsc::channel();
        let mut writer = Writer::new(dir, rule);
        let thread =
            std::thread::Builder::new().name("lsb.acct".into()).spawn(move || writer.run(&receiver))?;
        Ok(AcctLog { lines: Some(lines), thread: Some(thread) })
    }

    /// Hands a durable finish's record line to the writer.
    pub fn write(&self, line: String) {
        if let Some(lines) = &self.lines
            && lines.send(Item::Line(line)).is_err()
        {
            tracing::error!("the lsb.acct writer is gone: a record is left to the next start");
        }
    }

    /// Hands the writer the finished jobs of a state that replaced the one the lines came
    /// from: it appends the records `lsb.acct` lacks, after the lines handed over before.
    pub fn reconcile(&self, finished: Vec<AcctRecord>) {
        if let Some(lines) = &self.lines
            && lines.send(Item::Reconcile(finished)).is_err()
        {
            tracing::error!("the lsb.acct writer is gone: records are left to the next start");
        }
    }

    /// Lets the writer write what it has and waits for it (a clean stop).
    pub fn close(mut self) {
        drop(self.lines.take());
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the lsb.acct writer panicked");
        }
    }
}

/// The writer thread's state.
struct Writer {
    dir: PathBuf,
    rule: AcctRule,
    /// When the current file's first record ended (its age for `ACCT_ARCHIVE_AGE`).
    first_time: Option<i64>,
}

impl Writer {
    fn new(dir: PathBuf, rule: AcctRule) -> Writer {
        let first_time = fs::read_to_string(acct_path(&dir, 0))
            .ok()
            .and_then(|text| text.lines().find_map(|line| AcctRecord::parse(line).ok().flatten()))
            .map(|record| record.event_time);
        Writer { dir, rule, first_time }
    }

    fn run(&mut self, items: &mpsc::Receiver<Item>) {
        textlog::serve(ACCT_NAME, items, |batch| {
            let mut text = String::new();
            for item in batch.iter() {
                match item {
                    Item::Line(line) => text.push_str(line),
                    Item::Reconcile(finished) => {
                        let present = text
                            .lines()
                            .filter_map(|line| AcctRecord::parse(line).ok().flatten())
                            .map(|record| record.key())
                            .collect();
                        let missing = missing_lines(&self.dir, finished, present)?;
                        if !missing.is_empty() {
                            tracing::warn!(
                                records = missing.lines().count(),
                                "lsb.acct lacked records of the finished jobs of a snapshot: appended"
                            );
                        }
                        text.push_str(&missing);
                    }
                }
            }
            if text.is_empty() { Ok(()) } else { self.append(&text) }
        });
    }

    /// Appends `batch` durably, then switches the file if it is due.
    fn append(&mut self, batch: &str) -> io::Result<()> {
        let size = textlog::append_durably(&acct_path(&self.dir, 0), batch)?;
        if self.first_time.is_none() {
            self.first_time =
                batch.lines().find_map(|line| AcctRecord::parse(line).ok().flatten()).map(|r| r.event_time);
        }
        let now = lava_net::system_now_ms() as i64 / 1000;
        let too_big = self.rule.max_bytes.is_some_and(|max| size > max);
        let too_old = self
            .rule
            .max_age_s
            .zip(self.first_time)
            .is_some_and(|(age, first)| now.saturating_sub(first) >= age as i64);
        if too_big || too_old {
            self.switch()?;
        }
        Ok(())
    }

    /// `lsb.acct` → `lsb.acct.1`, the older ones one up, those beyond the limit deleted.
    fn switch(&mut self) -> io::Result<()> {
        textlog::switch(&self.dir, ACCT_NAME, self.rule.max_files)?;
        self.first_time = None;
        tracing::info!(dir = %self.dir.display(), "lsb.acct switched to lsb.acct.1");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::Duration;

    fn record(job_id: u32, end: i64) -> AcctRecord {
        let line = concat!(
            r#""JOB_FINISH" "10.1" 100 1 0 33554432 1 50 0 0 60 "root" "normal" "" "" "" "h" "/" "" "" """#,
            r#" "50.1" 0 1 "h" 64 1.0 "" "true" 0.000000 0.000000 0 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1"#,
            r#" -1 -1 -1 -1 "" "default" 0 1 "" "" 0 0 0 "" """#
        );
        let mut record = AcctRecord::parse(line).expect("valid").expect("a record");
        record.job_id = job_id;
        record.event_time = end;
        record
    }

    #[test]
    fn reconcile_appends_only_what_is_missing() {
        // Goal: at start, a finished job's record is appended once, whatever lsb.acct,
        // lsb.acct.1 already hold; a second reconcile appends nothing.
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(acct_path(dir.path(), 1), record(1, 100).to_line()).expect("write");
        fs::write(acct_path(dir.path(), 0), record(2, 200).to_line()).expect("write");
        let finished = [record(1, 100), record(2, 200), record(3, 300)];
        assert_eq!(reconcile(dir.path(), &finished).expect("reconcile"), 1);
        assert_eq!(reconcile(dir.path(), &finished).expect("reconcile"), 0);
        let (records, bad) = read_records(&acct_path(dir.path(), 0)).expect("read");
        assert_eq!(bad, 0);
        assert_eq!(records.iter().map(|r| r.job_id).collect::<Vec<_>>(), [2, 3]);
    }

    #[test]
    fn size_switch_and_archive_limit() {
        // Goal: ACCT_ARCHIVE_SIZE switches lsb.acct to lsb.acct.1 (older files shift up)
        // and MAX_ACCT_ARCHIVE_FILE deletes those beyond it.
        let dir = tempfile::tempdir().expect("tempdir");
        let rule = AcctRule { max_bytes: Some(10), max_age_s: None, max_files: Some(2) };
        let log = AcctLog::start(dir.path().to_owned(), rule).expect("start");
        for job in 1..=4 {
            log.write(record(job, 100 + i64::from(job)).to_line());
            // One record per batch, so that each write switches.
            std::thread::sleep(Duration::from_millis(100));
        }
        log.close();
        assert!(!acct_path(dir.path(), 0).exists(), "the current file was switched");
        let ids = |n| read_records(&acct_path(dir.path(), n)).expect("read").0[0].job_id;
        assert_eq!((ids(1), ids(2)), (4, 3));
        assert!(!acct_path(dir.path(), 3).exists(), "MAX_ACCT_ARCHIVE_FILE=2 keeps two");
    }
}
