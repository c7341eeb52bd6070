//! Host liveness in scheduling, end to end on loopback: two logical hosts h0
//! (master: lim, mbatchd, sbatchd) and h1 (lim, sbatchd), each with its own
//! ports (lsf.cluster's per-host columns) and short lim intervals. mbatchd
//! polls the master lim; when h1's lim stops, bhosts shows h1 `unavail`, a
//! job for h1 stays PEND and h1's running job shows UNKWN; when it comes back,
//! everything is `ok`/RUN again.

mod util;

use std::process::Output;
use std::time::{Duration, Instant};

use util::{Cluster, fixed_port, wait_until};

const REPORT_MS: u64 = 300;
const BEACON_MS: u64 = 300;
/// Longest a state change may take to show (debug build, busy 2-core machine).
const CHANGE_TIMEOUT: Duration = Duration::from_secs(60);

fn run(cluster: &Cluster, program: &str, args: &[&str]) -> Output {
    let bin = util::mbatchd_bin().with_file_name(program);
    cluster.command(bin).args(args).output().expect("run a command")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The STATUS column of `bhosts` for `host`.
fn host_status(cluster: &Cluster, host: &str) -> String {
    let out = stdout(&run(cluster, "bhosts", &[]));
    out.lines()
        .find(|line| line.split_whitespace().next() == Some(host))
        .and_then(|line| line.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_owned()
}

/// The STAT column of `bjobs -a ID`.
fn job_status(cluster: &Cluster, job: u32) -> String {
    let out = stdout(&run(cluster, "bjobs", &["-a", "-noheader", &job.to_string()]));
    out.split_whitespace().nth(2).unwrap_or_default().to_owned()
}

fn wait_host(cluster: &Cluster, host: &str, want: &str) {
    let mut last = String::new();
    wait_until(&format!("bhosts to show {host} {want}"), CHANGE_TIMEOUT, || {
        last = host_status(cluster, host);
        (last == want).then_some(())
    });
}

fn wait_job(cluster: &Cluster, job: u32, want: &[&str]) -> String {
    wait_until(&format!("job {job} to reach {want:?}"), CHANGE_TIMEOUT, || {
        let status = job_status(cluster, job);
        want.contains(&status.as_str()).then_some(status)
    })
}

fn submit(cluster: &Cluster, args: &[&str]) -> u32 {
    let out = run(cluster, "bsub", args);
    assert!(out.status.success(), "bsub failed: {}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    util::submitted_job_id(&stdout(&out))
}

// Goal: lim's view reaches scheduling: a host whose lim stops is `unavail`
// in bhosts, gets no new job, and its running job shows UNKWN (nothing is
// logged for it); when its lim is back, the host is `ok`, the job RUN and
// the pending one is dispatched.
#[test]
fn a_host_whose_lim_stops_is_unavail_and_its_jobs_unkwn() {
    let hosts = ["h0", "h1"];
    let mut cluster = Cluster::with_hosts(&hosts);
    let rows: String = hosts
        .iter()
        .map(|h| {
            format!("{h} ! ! 1 (cs linux) 127.0.0.1 {} {} {}\n", fixed_port(), fixed_port(), fixed_port())
        })
        .collect();
    cluster.write_file(
        "etc/lsf.cluster.lavacore",
        &format!(
            "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
             HOSTNAME model type server RESOURCES LAVA_ADDR LAVA_LIM_PORT LAVA_SBD_PORT LAVA_MXFSD_PORT\n{rows}End Host\n"
        ),
    );
    cluster.rewrite_lsf_conf("LAVA_LIM_BEACON_INTERVAL_MS", &BEACON_MS.to_string());
    cluster.rewrite_lsf_conf("LAVA_LIM_REPORT_INTERVAL_MS", &REPORT_MS.to_string());
    let _lim0 = cluster.start_lim("h0");
    let mut lim1 = cluster.start_lim("h1");
    let _mbatchd = cluster.start_mbatchd();
    let envdir0 = cluster.envdir();
    let _sbd0 = cluster.start_sbatchd_in("h0", &envdir0);
    let envdir1 = cluster.host_envdir("h1");
    let _sbd1 = cluster.start_sbatchd_in("h1", &envdir1);

    wait_host(&cluster, "h0", "ok");
    wait_host(&cluster, "h1", "ok");
    let running = submit(&cluster, &["-m", "h1", "sleep", "120"]);
    wait_job(&cluster, running, &["RUN"]);

    lim1.kill();
    let stopped = Instant::now();
    wait_host(&cluster, "h1", "unavail");
    eprintln!("h1 unavail {:?} after its lim stopped", stopped.elapsed());
    wait_job(&cluster, running, &["UNKWN"]);
    assert_eq!(host_status(&cluster, "h0"), "ok");
    let pending = submit(&cluster, &["-m", "h1", "sleep", "1"]);
    // Several polls of lim later, it is still waiting.
    std::thread::sleep(Duration::from_millis(5 * REPORT_MS));
    assert_eq!(job_status(&cluster, pending), "PEND");
    assert_eq!(host_status(&cluster, "h1"), "unavail");

    let _lim1 = cluster.start_lim("h1");
    wait_host(&cluster, "h1", "ok");
    wait_job(&cluster, running, &["RUN"]);
    wait_job(&cluster, pending, &["RUN", "DONE"]);

    let out = run(&cluster, "bkill", &[&running.to_string()]);
    assert!(out.status.success(), "bkill: {}", String::from_utf8_lossy(&out.stderr));
    wait_job(&cluster, running, &["EXIT"]);
    wait_job(&cluster, pending, &["DONE"]);
}
