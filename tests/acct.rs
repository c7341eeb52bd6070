//! Accounting end to end: the real `mbatchd`, `sbatchd` and commands on loopback. Jobs
//! that exit 0, exit 3 and are killed leave one JOB_FINISH line each in
//! `logdir/lsb.acct` (LSF's format, `lava_batch_ll::acct`), which `bacct` reports; a
//! `kill -9` of mbatchd right after a finish still leaves exactly one record per job.

mod util;

use std::fs;
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use lava_batch_ll::acct::AcctRecord;
use util::{Cluster, Daemon, wait_until};

const JOB_TIMEOUT: Duration = Duration::from_secs(120);

fn bin(name: &str) -> PathBuf {
    util::mbatchd_bin().with_file_name(name)
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

struct Batch {
    cluster: Cluster,
    mbatchd: Daemon,
    _sbatchd: Daemon,
}

impl Batch {
    fn start() -> Batch {
        let mut cluster = Cluster::new();
        let mbatchd = cluster.start_mbatchd();
        let sbatchd = cluster.start_sbatchd("localhost");
        Batch { cluster, mbatchd, _sbatchd: sbatchd }
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        self.cluster.command(bin(program)).args(args).output().expect("run a command")
    }

    fn submit(&self, args: &[&str]) -> u32 {
        let out = self.run("bsub", args);
        assert!(out.status.success(), "bsub: {}", text(&out));
        util::submitted_job_id(&String::from_utf8_lossy(&out.stdout))
    }

    fn status(&self, job: u32) -> String {
        let out = self.run("bjobs", &["-a", "-noheader", &job.to_string()]);
        String::from_utf8_lossy(&out.stdout).split_whitespace().nth(2).unwrap_or_default().to_owned()
    }

    fn wait_status(&self, job: u32, want: &str) {
        wait_until(&format!("job {job} to reach {want}"), JOB_TIMEOUT, || {
            (self.status(job) == want).then_some(())
        });
    }

    fn acct_path(&self) -> PathBuf {
        self.cluster.event_log_dir().join("lsb.acct")
    }

    /// The records of lsb.acct, every line checked to be one.
    fn records(&self) -> Vec<AcctRecord> {
        let text = fs::read_to_string(self.acct_path()).unwrap_or_default();
        text.lines()
            .map(|line| AcctRecord::parse(line).expect("a valid line").expect("a JOB_FINISH line"))
            .collect()
    }

    /// Waits until lsb.acct holds a record of each of `jobs`.
    fn wait_records(&self, jobs: &[u32]) -> Vec<AcctRecord> {
        wait_until("lsb.acct records", JOB_TIMEOUT, || {
            let records = self.records();
            jobs.iter().all(|job| records.iter().any(|r| r.job_id == *job)).then_some(records)
        })
    }
}

#[test]
fn records_and_bacct() {
    // Goal: a DONE job, a job that exits 3 and a killed one each get one JOB_FINISH line with
    // their status, exit status, hosts, usage and LSF's termination reason (exitInfo); bacct's
    // summary, -l, -u, -q, -d, -C and -S report them.
    let batch = Batch::start();
    let done = batch.submit(&["-J", "ok", "sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]);
    let three = batch.submit(&["sh", "-c", "exit 3"]);
    let killed = batch.submit(&["sleep", "600"]);
    batch.wait_status(done, "DONE");
    batch.wait_status(three, "EXIT");
    batch.wait_status(killed, "RUN");
    let out = batch.run("bkill", &[&killed.to_string()]);
    assert!(out.status.success(), "bkill: {}", text(&out));
    batch.wait_status(killed, "EXIT");
    let records = batch.wait_records(&[done, three, killed]);
    assert_eq!(records.len(), 3, "{records:?}");
    let of = |job| records.iter().find(|r| r.job_id == job).expect("a record");
    let line = fs::read_to_string(batch.acct_path()).expect("lsb.acct");
    assert!(line.starts_with("\"JOB_FINISH\" \"10.1\" "), "{line}");
    assert!((of(done).is_done(), of(done).exit_status, of(done).job_name.as_str()) == (true, 0, "ok"));
    assert!(of(done).rusage.cpu_s() > 0.0 && of(done).rusage.maxrss_kb > 0.0, "{:?}", of(done).rusage);
    assert_eq!((of(three).is_done(), of(three).exit_status), (false, 3 << 8));
    assert_eq!(of(three).exec_hosts, ["localhost"]);
    assert!(!of(killed).is_done() && of(killed).exit_status & 0x7f != 0, "{:?}", of(killed));
    // LSF's exitInfo: TERM_OWNER (14) for the bkill, nothing for the jobs that ended on their own.
    assert_eq!((of(done).exit_info, of(three).exit_info, of(killed).exit_info), (0, 0, 14));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &fs::metadata(batch.acct_path()).expect("stat").permissions(),
    );
    assert_eq!(mode & 0o777, 0o644);

    let out = batch.run("bacct", &[]);
    let summary = text(&out);
    assert!(out.status.success(), "{summary}");
    assert!(
        summary.starts_with("Accounting information about jobs that are: \n  - submitted by users root, \n"),
        "{summary}"
    );
    assert!(
        summary.contains(" Total number of done jobs:       1      Total number of exited jobs:     2\n"),
        "{summary}"
    );
    let out = batch.run("bacct", &["-l", &three.to_string()]);
    let long = text(&out);
    assert!(
        long.contains(&format!(
            "Job <{three}>, User <root>, Project <default>, Status <EXIT>, Queue <normal>"
        )),
        "{long}"
    );
    assert!(long.contains("Completed <exit>."), "{long}");
    let out = batch.run("bacct", &["-l", &killed.to_string()]);
    let long_killed = text(&out);
    assert!(long_killed.contains("Completed <exit>; TERM_OWNER: job killed by owner."), "{long_killed}");
    assert!(
        long.contains("     CPU_T     WAIT     TURNAROUND   STATUS     HOG_FACTOR    MEM    SWAP\n"),
        "{long}"
    );
    let count = |args: &[&str]| {
        let out = batch.run("bacct", args);
        let t = text(&out);
        let done: usize = t
            .split("Total number of done jobs:")
            .nth(1)
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let exited: usize = t
            .split("Total number of exited jobs:")
            .nth(1)
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        done + exited
    };
    assert_eq!(count(&["-u", "all"]), 3);
    assert_eq!(count(&["-u", "nobody"]), 0);
    assert_eq!(count(&["-q", "normal"]), 3);
    assert_eq!(count(&["-d"]), 1);
    assert_eq!(count(&["-e", "-b"]), 2);
    assert_eq!(count(&["-C", "2099/1/1/00:00,"]), 0, "completed after 2099: none");
    assert_eq!(count(&["-C", "2000/1/1,."]), 3);
    assert_eq!(count(&["-S", "2000/1/1,."]), 3);
    let out = batch.run("bacct", &["-f", "/nonexistent/lsb.acct"]);
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));
}

#[test]
fn one_record_after_kill_9() {
    // Goal: mbatchd killed with SIGKILL right after jobs finish (its writer may not have
    // written their records) writes each missing record at restart, and none twice.
    let mut batch = Batch::start();
    let jobs: Vec<u32> = (0..3).map(|_| batch.submit(&["true"])).collect();
    for job in &jobs {
        batch.wait_status(*job, "DONE");
    }
    batch.mbatchd.kill();
    // Take some of the records away, as if the writer had not reached them.
    let text = fs::read_to_string(batch.acct_path()).unwrap_or_default();
    let kept: String = text.lines().take(1).map(|line| format!("{line}\n")).collect();
    fs::write(batch.acct_path(), kept).expect("rewrite lsb.acct");
    batch.mbatchd = batch.cluster.start_mbatchd();
    let records = batch.wait_records(&jobs);
    for job in &jobs {
        assert_eq!(records.iter().filter(|r| r.job_id == *job).count(), 1, "{records:?}");
    }
    // A later finish after the restart is recorded as well, once.
    let late = batch.submit(&["true"]);
    batch.wait_status(late, "DONE");
    let records = batch.wait_records(&[late]);
    assert_eq!(records.len(), 4, "{records:?}");
    batch.mbatchd.kill();
    batch.mbatchd = batch.cluster.start_mbatchd();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(batch.records().len(), 4, "a restart writes nothing twice");
}
