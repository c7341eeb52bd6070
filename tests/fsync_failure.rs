//! A failed fsync under the real daemons (docs/operations.md, "A failed fsync"): the disk
//! reports an I/O error on a flush. Nothing waiting for that flush is acknowledged, the
//! daemon stops at once and says which file failed, and started again on a healthy disk it
//! holds everything it acknowledged: mbatchd every job (a `bsub` whose answer never came
//! gets its job by retrying the same request, once), sbatchd every job it took (the job it
//! could not record runs once, when mbatchd sends it again), the coordinator every task (a
//! submission retried with its id gets one task).
//!
//! The fault is injected with `util::fsync_fault` (an `LD_PRELOAD` library whose `fdatasync`
//! and `fsync` fail with EIO on demand).

mod util;

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;

use util::fsync_fault::FsyncFault;
use util::{Cluster, wait_until};

/// Longest mbatchd or a command may take to reach a state (debug build, busy machine).
const TIMEOUT: Duration = Duration::from_secs(120);

fn bin(name: &str) -> PathBuf {
    util::mbatchd_bin().with_file_name(name)
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The lines of `bjobs -a -noheader <args>`.
fn bjobs(cluster: &Cluster, args: &[&str]) -> Vec<String> {
    let out = cluster.command(bin("bjobs")).args(["-a", "-noheader"]).args(args).output().expect("bjobs");
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

/// `bjobs -a -noheader` lines of the jobs named `name`.
fn jobs_named(cluster: &Cluster, name: &str) -> Vec<String> {
    bjobs(cluster, &["-J", name])
}

// Goal: see the module doc. Method: mbatchd under the fault library, an sbatchd for the
// commands' credentials; five held jobs acknowledged; its flushes made to fail; a held
// `bsub -J late` started in the background with its default retries; mbatchd must exit on
// its own, with a failure status and a log naming the fsync, the bsub still waiting for an
// answer; mbatchd started again (a new process, whose flushes succeed); the background bsub then exits 0 with a job id, `bjobs -J
// late` lists exactly that one job, and the five acknowledged ones are all there.
#[test]
fn a_failed_fsync_acknowledges_nothing_after_it() {
    let mut cluster = Cluster::new();
    let Some(fault) = FsyncFault::install(&mut cluster, "mbatchd") else { return };
    let mut mbatchd = cluster.start_mbatchd();
    let _sbatchd = cluster.start_sbatchd("localhost");

    let mut acknowledged = Vec::new();
    for _ in 0..5 {
        let out = cluster.command(bin("bsub")).args(["-H", "-J", "early", "true"]).output().expect("bsub");
        assert!(out.status.success(), "bsub before the fault: {}", text(&out));
        acknowledged.push(util::submitted_job_id(&String::from_utf8_lossy(&out.stdout)));
    }

    fault.fail(mbatchd.pid());
    let mut late = cluster
        .command(bin("bsub"))
        .args(["-H", "-J", "late", "true"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the late bsub");
    let status = mbatchd.wait_exit(TIMEOUT);
    let said = mbatchd.log();
    assert!(!status.success(), "mbatchd went on after a failed fsync ({status}):\n{said}");
    assert!(said.contains("fsync") && said.contains("lsb.events"), "the failure names the file:\n{said}");
    assert!(!said.contains("panicked"), "{said}");

    assert!(late.try_wait().expect("try_wait").is_none(), "the late bsub was answered, durable nowhere");
    let _mbatchd = cluster.start_mbatchd();
    let late = late.wait_with_output().expect("the late bsub ends");
    assert!(
        late.status.success(),
        "the late bsub's retry is answered by the restarted mbatchd: {}",
        text(&late)
    );
    let late_id = util::submitted_job_id(&String::from_utf8_lossy(&late.stdout));
    let listed = wait_until("bjobs to answer", TIMEOUT, || {
        let lines = jobs_named(&cluster, "late");
        (!lines.is_empty()).then_some(lines)
    });
    assert_eq!(listed.len(), 1, "one job for the late bsub, not two: {listed:?}");
    assert!(listed[0].starts_with(&late_id.to_string()), "{listed:?} is job {late_id}");
    let early = jobs_named(&cluster, "early");
    for id in &acknowledged {
        assert!(
            early.iter().any(|line| line.split_whitespace().next() == Some(&id.to_string())),
            "acknowledged job {id} kept: {early:?}"
        );
    }
    assert_eq!(early.len(), acknowledged.len(), "{early:?}");
}

/// The status word `bjobs` shows for `job`.
fn status(cluster: &Cluster, job: u32) -> String {
    let lines = bjobs(cluster, &[&job.to_string()]);
    lines.first().and_then(|line| line.split_whitespace().nth(2)).unwrap_or_default().to_owned()
}

// Goal: a failed fsync of sbatchd's job records stops sbatchd, naming the file, before the
// job it could not record runs; started again on a healthy disk it takes the job mbatchd
// sends again, which then runs exactly once; the jobs before it are untouched.
// Method: sbatchd under the fault library; two jobs, each appending its id to a file, run to
// DONE; sbatchd's flushes made to fail and a third job submitted: sbatchd exits with a
// failure naming the I/O error; started again (a new process); the third job ends DONE
// and the file holds each job's id once.
#[test]
fn a_failed_fsync_of_sbatchds_records_runs_nothing_twice() {
    let mut cluster = Cluster::new();
    let Some(fault) = FsyncFault::install(&mut cluster, "sbatchd") else { return };
    let _mbatchd = cluster.start_mbatchd();
    let mut sbatchd = cluster.start_sbatchd("localhost");
    let ran = cluster.dir().join("ran");
    let submit = |cluster: &Cluster| {
        let script = format!("echo $LSB_JOBID >> {}", ran.display());
        let out = cluster.command(bin("bsub")).args(["sh", "-c", &script]).output().expect("bsub");
        assert!(out.status.success(), "bsub: {}", text(&out));
        util::submitted_job_id(&String::from_utf8_lossy(&out.stdout))
    };
    let wait_done = |cluster: &Cluster, job: u32| {
        wait_until(&format!("job {job} DONE"), TIMEOUT, || (status(cluster, job) == "DONE").then_some(()));
    };
    let mut jobs = vec![submit(&cluster), submit(&cluster)];
    for job in &jobs {
        wait_done(&cluster, *job);
    }

    fault.fail(sbatchd.pid());
    jobs.push(submit(&cluster));
    let stopped = sbatchd.wait_exit(TIMEOUT);
    let said = sbatchd.log();
    assert!(!stopped.success(), "sbatchd went on after a failed fsync ({stopped}):\n{said}");
    assert!(said.contains("Input/output error"), "the failure is named:\n{said}");
    assert!(!said.contains("panicked"), "{said}");

    let _sbatchd = cluster.start_sbatchd("localhost");
    for job in &jobs {
        wait_done(&cluster, *job);
    }
    let record = std::fs::read_to_string(&ran).expect("the run record");
    for job in &jobs {
        let runs = record.lines().filter(|line| line.trim() == job.to_string()).count();
        assert_eq!(runs, 1, "job {job} ran {runs} times:\n{record}");
    }
}

/// `coordctl args…` with `stdin`, started (not waited for).
fn coordctl(cluster: &Cluster, args: &[&str], stdin: &[u8]) -> std::process::Child {
    let mut child = cluster
        .command(bin("coordctl"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start coordctl");
    std::io::Write::write_all(&mut child.stdin.take().expect("piped stdin"), stdin).expect("write stdin");
    child
}

/// `coordctl args…`'s standard output, which must succeed.
fn coordctl_ok(cluster: &Cluster, args: &[&str], stdin: &[u8]) -> String {
    let out = coordctl(cluster, args, stdin).wait_with_output().expect("coordctl runs");
    assert!(out.status.success(), "coordctl {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

// Goal: a failed fsync of the coordinator's WAL stops it, naming the file, with nothing that
// waited for the flush answered; started again on a healthy disk it has every task it
// acknowledged, and a submission whose answer never came gets its task by its retry (same
// submission id), once.
// Method: the coordinator under the fault library; three tasks submitted; its flushes made
// to fail and `coordctl submit` started in the background (its default retries); the
// coordinator exits with a failure naming the I/O error, the submit still waiting for an
// answer; started again on the same port (a new process); the background submit prints task 4, and the coordinator holds four
// waiting tasks.
#[test]
fn a_failed_fsync_of_the_coordinators_wal_acknowledges_nothing_after_it() {
    let mut cluster = Cluster::new();
    let Some(fault) = FsyncFault::install(&mut cluster, "coordinator") else { return };
    let _sbatchd = cluster.start_sbatchd("localhost");
    let mut coordinator = cluster.start_coordinator(0, &[]);
    for n in 1..=3 {
        assert_eq!(coordctl_ok(&cluster, &["submit", "-"], b"early").trim(), n.to_string());
    }

    fault.fail(coordinator.pid());
    let late = coordctl(&cluster, &["submit", "-"], b"late");
    let stopped = coordinator.wait_exit(TIMEOUT);
    let said = coordinator.log();
    assert!(!stopped.success(), "the coordinator went on after a failed fsync ({stopped}):\n{said}");
    assert!(said.contains("Input/output error"), "the failure is named:\n{said}");
    assert!(!said.contains("panicked"), "{said}");

    let mut late = late;
    assert!(late.try_wait().expect("try_wait").is_none(), "the late submit was answered, durable nowhere");
    let _coordinator = cluster.start_coordinator(coordinator.port(), &[]);
    let late = late.wait_with_output().expect("the late submit ends");
    assert!(late.status.success(), "the late submit's retry is answered: {}", text(&late));
    assert_eq!(String::from_utf8_lossy(&late.stdout).trim(), "4", "{}", text(&late));
    let summary = coordctl_ok(&cluster, &["status"], b"");
    assert_eq!(summary.lines().next(), Some("WAITING 4 LEASED 0 COMPLETED 0 FAILED 0"), "{summary}");
}
