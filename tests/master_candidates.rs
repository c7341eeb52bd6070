//! mbatchd on any master candidate (docs/failover.md; docs/operations.md, "mbatchd's host
//! dies"): with `LSF_MASTER_LIST="h1 h2"`, mbatchd runs as the candidate `--host` names and
//! listens on that host's address (h1 127.0.0.2, h2 127.0.0.3; the execution host h0
//! 127.0.0.1), and the commands and sbatchd find it by trying the candidates in order.
//!
//! mbatchd starts on h2 (h1 has none): `bsub` from h0 reaches it past h1's refused
//! connection, sbatchd registers with it, the job ends DONE. Then mbatchd is killed (-9) and
//! started on h1 over the same event log (one machine here; real hosts would restore it):
//! sbatchd registers with h1 by itself, `bjobs` still shows the first job DONE, a new job
//! runs DONE. `mbatchd --host h0` (not a candidate) refuses to start, naming the list.

mod util;

use std::process::Output;
use std::time::Duration;

use util::{Cluster, STARTUP_TIMEOUT, submitted_job_id, wait_until};

const JOB_TIMEOUT: Duration = Duration::from_secs(60);

fn run(cluster: &Cluster, name: &str, args: &[&str]) -> Output {
    let bin = util::mbatchd_bin().with_file_name(name);
    cluster.command(bin).args(args).output().unwrap_or_else(|e| panic!("run {name}: {e}"))
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

fn submit(cluster: &Cluster) -> u32 {
    let out = run(cluster, "bsub", &["-m", "h0", "true"]);
    assert!(out.status.success(), "bsub: {}", text(&out));
    submitted_job_id(&String::from_utf8_lossy(&out.stdout))
}

fn wait_done(cluster: &Cluster, job: u32) {
    wait_until(&format!("job {job} DONE"), JOB_TIMEOUT, || {
        let out = run(cluster, "bjobs", &["-a", "-noheader", &job.to_string()]);
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        (line.split_whitespace().nth(2) == Some("DONE")).then_some(())
    });
}

#[test]
fn mbatchd_runs_on_any_candidate_and_is_found() {
    let mut cluster = Cluster::with_hosts(&["h0", "h1", "h2"]);
    cluster.write_file(
        "etc/lsf.cluster.lavacore",
        "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
         HOSTNAME model type server RESOURCES LAVA_ADDR\n\
         h0 ! ! 1 (cs linux) 127.0.0.1\nh1 ! ! 1 (cs linux) 127.0.0.2\nh2 ! ! 1 (cs linux) 127.0.0.3\nEnd Host\n",
    );
    cluster.rewrite_lsf_conf("LSF_MASTER_LIST", "\"h1 h2\"");

    let refused = run(&cluster, "mbatchd", &["--foreground", "--port", "0", "--host", "h0"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("--host h0: not a master candidate (LSF_MASTER_LIST: h1 h2)"),
        "{}",
        text(&refused)
    );

    let mut mbatchd = cluster.start_mbatchd_with(&["--host", "h2"]);
    let _sbatchd = cluster.start_sbatchd("h0");
    let first = submit(&cluster);
    wait_done(&cluster, first);

    mbatchd.kill();
    let _mbatchd = cluster.start_mbatchd_with(&["--host", "h1"]);
    wait_until("sbatchd registers with mbatchd on h1", STARTUP_TIMEOUT, || {
        let out = run(&cluster, "bhosts", &["h0"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)?
            .split_whitespace()
            .nth(1)
            .filter(|s| *s == "ok")?;
        Some(())
    });
    let out = run(&cluster, "bjobs", &["-a", "-noheader", &first.to_string()]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).split_whitespace().nth(2),
        Some("DONE"),
        "{}",
        text(&out)
    );
    let second = submit(&cluster);
    wait_done(&cluster, second);
}
