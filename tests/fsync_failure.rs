//! A failed fsync under the real mbatchd (docs/operations.md, "A failed fsync"): the event
//! log's disk reports an I/O error on a flush. Nothing waiting for that flush is
//! acknowledged, mbatchd stops at once and says which file failed, and started again on a
//! healthy disk it holds every job it acknowledged; a `bsub` whose answer never came gets
//! its job from the restarted mbatchd by retrying the same request, once, not twice.
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

/// `bjobs -a -noheader` lines of the jobs named `name`.
fn jobs_named(cluster: &Cluster, name: &str) -> Vec<String> {
    let out = cluster.command(bin("bjobs")).args(["-a", "-noheader", "-J", name]).output().expect("bjobs");
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

// Goal: see the module doc. Method: mbatchd under the fault library, an sbatchd for the
// commands' credentials; five held jobs acknowledged; its flushes made to fail; a held
// `bsub -J late` started in the background with its default retries; mbatchd must exit on
// its own, with a failure status and a log naming the fsync; mbatchd started again (a new
// process, whose flushes succeed); the background bsub then exits 0 with a job id, `bjobs -J
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
    let late = cluster
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
