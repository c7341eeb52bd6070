//! Scheduling end to end: the real `mbatchd` and `sbatchd` of a one-host
//! cluster whose host has the resources `cs` and `linux` (tests/util), with
//! queues that limit slots, users and run limits. The `-R` submissions go
//! through a protocol client (to read mbatchd's own answer); the other
//! submissions and every display go through the real commands.

mod util;

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use util::proto::{Client, request_id, submit_request};
use util::{Cluster, Daemon, STARTUP_TIMEOUT, wait_until};

/// Longest a job may take to reach a state (debug build, busy machine).
const JOB_TIMEOUT: Duration = Duration::from_secs(120);

fn bin(name: &str) -> PathBuf {
    util::mbatchd_bin().with_file_name(name)
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The cluster with its daemons; they stop when it is dropped.
struct Sched {
    cluster: Cluster,
    _daemons: Vec<Daemon>,
}

impl Sched {
    fn start() -> Sched {
        let mut cluster = Cluster::new();
        cluster.write_file(
            "etc/lsbatch/lavacore/configdir/lsb.hosts",
            "Begin Host\nHOST_NAME MXJ\nlocalhost 8\nEnd Host\n",
        );
        cluster.write_file(
            "etc/lsbatch/lavacore/configdir/lsb.queues",
            "Begin Queue\nQUEUE_NAME = normal\nPRIORITY = 30\nRUNLIMIT = 10 60\nMEMLIMIT = 100000\nEnd Queue\n\
             Begin Queue\nQUEUE_NAME = small\nPRIORITY = 30\nQJOB_LIMIT = 1\nEnd Queue\n\
             Begin Queue\nQUEUE_NAME = staff\nPRIORITY = 30\nUSERS = alice\nEnd Queue\n",
        );
        let mbatchd = cluster.start_mbatchd();
        let ready = cluster.dir().join("run/sbatchd.ready");
        let args: Vec<&OsStr> =
            vec!["--host".as_ref(), "localhost".as_ref(), "--ready-file".as_ref(), ready.as_ref()];
        let mut sbatchd = cluster.spawn("sbatchd", Path::new(env!("CARGO_BIN_EXE_sbatchd")), &args);
        wait_until("sbatchd's ready file", STARTUP_TIMEOUT, || {
            assert!(sbatchd.is_running(), "sbatchd exited early:\n{}", sbatchd.log());
            ready.exists().then_some(())
        });
        Sched { cluster, _daemons: vec![mbatchd, sbatchd] }
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        self.cluster.command(bin(program)).args(args).output().expect("run a command")
    }

    /// A protocol client submitting as root (the job runs as the caller).
    fn client(&self) -> Client {
        let mut client = Client::connect(self.cluster.mbd_addr(), self.cluster.authenticator());
        client.user = "root".into();
        client.uid = 0;
        client
    }

    /// `bjobs -l ID` once it shows `wanted`.
    fn wait_for(&self, id: u32, wanted: &str) -> String {
        let id = id.to_string();
        wait_until(&format!("job {id} to show {wanted:?}"), JOB_TIMEOUT, || {
            let out = text(&self.run("bjobs", &["-l", &id]));
            out.contains(wanted).then_some(out)
        })
    }
}

/// The job id of `bsub`'s `Job <N> is submitted ...`.
fn submitted_id(out: &Output) -> u32 {
    assert!(out.status.success(), "bsub failed: {}", text(out));
    util::submitted_job_id(&String::from_utf8_lossy(&out.stdout))
}

// Goal: `-R select` chooses the host that has what it asks and refuses the
// others, showing LSF's pending reason; a queue slot limit holds a job with its
// reason in `bjobs -l`; malformed or unknown `-R`, a user outside USERS and
// -W/-M above the queue's limits are refused with LSF's messages, a non-zero
// exit, and no job.
#[test]
fn resource_selection_limits_and_refusals() {
    let sched = Sched::start();
    let mut client = sched.client();
    let mut chosen = submit_request("sleep 60");
    chosen.res_req = "select[cs && hostname==localhost] order[r15s]".into();
    let chosen = client.submit(request_id(1), chosen).expect("a satisfiable -R is accepted").job_id;
    let mut refused = submit_request("sleep 60");
    refused.res_req = "select[!cs]".into();
    let refused =
        client.submit(request_id(2), refused).expect("an unsatisfiable -R is still accepted").job_id;
    let shown = sched.wait_for(chosen, "Status <RUN>");
    assert!(shown.contains("localhost"), "{shown}");
    let shown = sched.wait_for(refused, "PENDING REASONS:");
    assert!(shown.contains(" Job's resource requirements not satisfied: 1 host;"), "{shown}");

    // QJOB_LIMIT = 1: the second job of `small` waits for the first.
    let first = submitted_id(&sched.run("bsub", &["-q", "small", "sleep", "60"]));
    sched.wait_for(first, "Status <RUN>");
    let second = submitted_id(&sched.run("bsub", &["-q", "small", "sleep", "60"]));
    let shown = sched.wait_for(second, "PENDING REASONS:");
    assert!(shown.contains(" The queue has reached its job slot limit;"), "{shown}");

    // Refusals: nothing is submitted.
    for (n, res_req) in [(3, "select[cs"), (4, "select[gpu]"), (5, "span[hosts=2]")] {
        let mut bad = submit_request("true");
        bad.res_req = res_req.into();
        let error = client.submit(request_id(n), bad).expect_err(res_req);
        assert_eq!(error.message, "Bad resource requirement syntax", "{res_req}");
    }
    let refusals: [(&[&str], &str); 3] = [
        (&["-q", "staff", "true"], "User cannot use the queue. Job not submitted."),
        (&["-W", "120", "true"], "Cannot exceed queue's hard limit(s). Job not submitted."),
        (&["-M", "200000", "true"], "Cannot exceed queue's hard limit(s). Job not submitted."),
    ];
    for (args, message) in refusals {
        let out = sched.run("bsub", args);
        assert!(!out.status.success(), "{args:?} was accepted: {}", text(&out));
        assert!(text(&out).contains(message), "{args:?}: {}", text(&out));
    }
    let listed = text(&sched.run("bjobs", &["-u", "all", "-a", "-noheader"]));
    assert_eq!(listed.lines().count(), 4, "only the four accepted jobs exist:\n{listed}");
    let out = sched.run("bkill", &["-u", "all", "0"]);
    assert!(out.status.success(), "{}", text(&out));
    let _kept = fs::metadata(sched.cluster.dir()).expect("the cluster folder stays until the end");
}
