//! A full disk on the real daemons (issue 18, item 8; docs/operations.md, "A full
//! disk"): a job of an ordinary user fills the file system that holds mbatchd's event
//! log and sbatchd's records. Neither daemon exits: mbatchd refuses new jobs with a
//! message saying why, both keep answering, the running job keeps running, both come
//! back after `kill -9` while the disk is still full, and when space returns new jobs
//! are taken and run again.
//!
//! The state file system is a small tmpfs mounted for the test, which needs root (CI
//! runs as root); elsewhere the test says why it is skipped.

mod util;

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use util::small_fs::SmallFs;
use util::{Cluster, chmod, wait_until};

/// Longest a job or a daemon may take to reach a state (debug build, busy machine).
const TIMEOUT: Duration = Duration::from_secs(120);
/// The unprivileged account whose job fills the disk.
const NOBODY_UID: u32 = 65534;
/// What bsub says while mbatchd's disk is full (lava-mbd's `DISK_FULL_MESSAGE`).
const DISK_FULL: &str = "The file system of mbatchd's event log is full: new jobs are refused until space is freed. Job not submitted.";

fn bin(name: &str) -> PathBuf {
    util::mbatchd_bin().with_file_name(name)
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

struct Batch {
    cluster: Cluster,
}

impl Batch {
    fn run(&self, program: &str, args: &[&str]) -> Output {
        self.cluster.command(bin(program)).args(args).output().expect("run a command")
    }

    fn run_as_nobody(&self, program: &str, args: &[&str]) -> Output {
        self.cluster
            .command(bin(program))
            .args(args)
            .current_dir("/tmp")
            .env("HOME", "/tmp")
            .env("LAVA_RETRY_SECS", "0")
            .uid(NOBODY_UID)
            .gid(NOBODY_UID)
            .output()
            .expect("run a command as nobody")
    }

    fn status(&self, job: u32) -> String {
        let out = self.run("bjobs", &["-a", "-noheader", &job.to_string()]);
        String::from_utf8_lossy(&out.stdout).split_whitespace().nth(2).unwrap_or_default().to_owned()
    }

    fn wait_status(&self, job: u32, want: &str) {
        wait_until(&format!("job {job} to be {want}"), TIMEOUT, || (self.status(job) == want).then_some(()));
    }
}

// Goal: see the module doc. Method: LSB_SHAREDIR on a 16 MiB tmpfs, reserves of 2 MiB
// (LAVA_STATE_RESERVE_MB); nobody's job writes zeros into its LSB_JOBDIR until the disk
// refuses, says so in a file outside the tmpfs, and sleeps. Then: mbatchd says the disk
// is full, bsub is refused with the reason and exit 255, bjobs and bhosts answer, the
// job is RUN; sbatchd and mbatchd are each killed with SIGKILL and started again on the
// full disk and come back; the filler is deleted; both say there is room, and a new job
// runs to DONE while the first is killed and ends EXIT.
#[test]
fn a_job_filling_the_state_disk_stops_neither_daemon() {
    let mut cluster = Cluster::new();
    let work = cluster.dir().join("work");
    let Some(fs) = SmallFs::mount_or_skip(&work, "16m") else { return };
    cluster.rewrite_lsf_conf("LAVA_STATE_RESERVE_MB", "2");
    let mut mbatchd = cluster.start_mbatchd();
    let mut sbatchd = cluster.start_sbatchd("localhost");
    for folder in [cluster.dir(), &cluster.dir().join("run"), &cluster.envdir()] {
        chmod(folder, 0o755);
    }
    let outputs = cluster.dir().join("out");
    fs::create_dir_all(&outputs).expect("outputs");
    chmod(&outputs, 0o777);
    let mut batch = Batch { cluster };
    let filled = outputs.join("filled");
    let filler = format!(
        "dd if=/dev/zero of=\"$LSB_JOBDIR/fill\" bs=64k 2>/dev/null; echo \"$LSB_JOBDIR\" > {}; sleep 3600",
        filled.display()
    );
    let out_file = outputs.join("%J.out");
    let out_file = out_file.to_str().expect("utf-8");
    let submitted = batch.run_as_nobody("bsub", &["-o", out_file, &filler]);
    assert!(submitted.status.success(), "bsub: {}", text(&submitted));
    let filler_job = util::submitted_job_id(&String::from_utf8_lossy(&submitted.stdout));
    let job_dir = wait_until("the job to fill the disk", TIMEOUT, || {
        fs::read_to_string(&filled).ok().map(|dir| PathBuf::from(dir.trim()))
    });
    wait_until("mbatchd to find its disk full", TIMEOUT, || {
        mbatchd.log().contains("the event log's file system is full").then_some(())
    });

    // New work is refused, with the reason; queries are answered; the job runs on.
    let refused = batch.run_as_nobody("bsub", &["-o", out_file, "true"]);
    assert_eq!(refused.status.code(), Some(255), "{}", text(&refused));
    assert!(text(&refused).contains(DISK_FULL), "{}", text(&refused));
    assert_eq!(batch.status(filler_job), "RUN");
    let hosts = batch.run("bhosts", &[]);
    assert!(hosts.status.success() && text(&hosts).contains("localhost"), "bhosts: {}", text(&hosts));
    assert!(mbatchd.is_running() && sbatchd.is_running(), "both daemons serve on");

    // Both come back from SIGKILL on the full disk, and the job is still theirs.
    sbatchd.kill();
    let sbatchd = batch.cluster.start_sbatchd("localhost");
    mbatchd.kill();
    let mbatchd = batch.cluster.start_mbatchd();
    wait_until("the job to be RUN after both restarts", TIMEOUT, || {
        (batch.status(filler_job) == "RUN").then_some(())
    });
    let refused = batch.run_as_nobody("bsub", &["-o", out_file, "true"]);
    assert!(text(&refused).contains(DISK_FULL), "still full: {}", text(&refused));

    // Space returns: new jobs are taken and run; the filling job is killed.
    let before = fs.available();
    fs::remove_file(job_dir.join("fill")).expect("delete the filler");
    assert!(fs.available() > before);
    let taken = wait_until("bsub to be taken again", TIMEOUT, || {
        let out = batch.run_as_nobody("bsub", &["-o", out_file, "true"]);
        out.status.success().then(|| util::submitted_job_id(&String::from_utf8_lossy(&out.stdout)))
    });
    batch.wait_status(taken, "DONE");
    let killed = batch.run_as_nobody("bkill", &[&filler_job.to_string()]);
    assert!(killed.status.success(), "bkill: {}", text(&killed));
    batch.wait_status(filler_job, "EXIT");
    let (mbatchd_log, sbatchd_log) = (mbatchd.log(), sbatchd.log());
    assert!(mbatchd_log.contains("has room again"), "mbatchd:\n{mbatchd_log}");
    assert!(!mbatchd_log.contains("panicked") && !sbatchd_log.contains("panicked"));
    drop((mbatchd, sbatchd));
}
