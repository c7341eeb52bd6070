//! `brun` and `bkill -r` against the real `mbatchd` and `sbatchd` on loopback
//! (see `util`): a forced run that the limits would keep pending, a forced end
//! of a job whose sbatchd was killed with `kill -9`, and the refusals, each
//! with LSF's words and exit status.

mod util;

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use util::{Cluster, Daemon, wait_until};

/// Longest a job in these tests may take to reach a state (debug build, busy machine).
const JOB_TIMEOUT: Duration = Duration::from_secs(120);
/// The unprivileged account used to test identities (present on every Debian system).
const NOBODY_UID: u32 = 65534;

/// A cluster with mbatchd and the sbatchd the commands ask for credentials running.
struct Force {
    cluster: Cluster,
    mbatchd: Daemon,
    /// Kept so that it runs (and is stopped) with the test.
    _sbatchd: Daemon,
}

impl Force {
    fn start() -> Force {
        let mut cluster = Cluster::new();
        let mbatchd = cluster.start_mbatchd();
        let _sbatchd = cluster.start_sbatchd("localhost");
        Force { cluster, mbatchd, _sbatchd }
    }

    /// Runs a command of the suite as root.
    fn run(&self, program: &str, args: &[&str]) -> Output {
        self.cluster.command(bin(program)).args(args).output().expect("run a command")
    }

    /// Runs a command of the suite as the user `nobody`.
    fn run_as_nobody(&self, program: &str, args: &[&str]) -> Output {
        self.cluster
            .command(bin(program))
            .args(args)
            .current_dir("/tmp")
            .env("HOME", "/tmp")
            .uid(NOBODY_UID)
            .gid(NOBODY_UID)
            .output()
            .expect("run a command as nobody")
    }

    /// `bsub ARGS` as root, asserting success; returns the job id.
    fn submit(&self, args: &[&str]) -> u32 {
        let out = self.run("bsub", args);
        assert!(out.status.success(), "bsub failed: {}", text(&out));
        util::submitted_job_id(&String::from_utf8_lossy(&out.stdout))
    }

    /// The STAT column of `bjobs -a ID`.
    fn status(&self, job: u32) -> String {
        let out = self.run("bjobs", &["-a", "-noheader", &job.to_string()]);
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines().find_map(|line| line.split_whitespace().nth(2).map(str::to_owned)).unwrap_or_default()
    }

    fn wait_status(&self, job: u32, want: &str) {
        let mut last = String::new();
        wait_until(&format!("job {job} to reach {want} (last seen {last:?})"), JOB_TIMEOUT, || {
            last = self.status(job);
            (last == want).then_some(())
        });
    }

    fn dir(&self) -> &Path {
        self.cluster.dir()
    }
}

fn bin(name: &str) -> PathBuf {
    util::mbatchd_bin().with_file_name(name)
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Asserts a command failed as LSF's do: exit 255, `stderr` on standard error, nothing on standard output.
#[track_caller]
fn assert_refused(out: &Output, stderr: &str) {
    assert_eq!(out.status.code(), Some(255), "{}", text(out));
    assert_eq!(String::from_utf8_lossy(&out.stderr), stderr, "{}", text(out));
    assert!(out.stdout.is_empty(), "{}", text(out));
}

fn is_alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
        !matches!(state, Some("Z" | "X"))
    })
}

// Goal: brun starts a job that a closed host keeps pending on the host named,
// and it ends DONE; bhist tells the forced run; a job that has started or
// finished is refused, as are a user who is not an administrator, an unknown
// job, an unknown host and bad command lines, each with LSF's message and exit
// status 255.
#[test]
fn brun_runs_a_job_a_closed_host_keeps_pending() {
    let force = Force::start();
    let closed = force.run("badmin", &["hclose", "localhost"]);
    assert!(closed.status.success(), "{}", text(&closed));
    let job = force.submit(&["sleep 1"]);
    let id = job.to_string();
    assert_eq!(force.status(job), "PEND");
    assert_refused(
        &force.run_as_nobody("brun", &["-m", "localhost", &id]),
        "Failed to run the job: User permission denied\n",
    );
    assert_refused(
        &force.run("brun", &["-m", "nohost", &id]),
        "Failed to run the job: Bad host name, host group name or cluster name\n",
    );
    assert_refused(
        &force.run("brun", &["-m", "localhost", "99999"]),
        "Failed to run the job: No matching job found\n",
    );
    assert_refused(&force.run("brun", &["-m", "localhost", "12x"]), "brun: 12x: Illegal job ID.\n");
    for args in [&[id.as_str()][..], &["-m", "localhost"], &["-m", "localhost", &id, &id], &["-b", &id]] {
        let out = force.run("brun", args);
        assert_eq!(out.status.code(), Some(255), "brun {args:?}: {}", text(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains("Usage: brun"), "{}", text(&out));
    }
    assert_eq!(force.status(job), "PEND", "no refusal started it");

    let out = force.run("brun", &["-m", "localhost", &id]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("Job <{job}> is being forced to run.\n"));
    force.wait_status(job, "DONE");
    assert_refused(
        &force.run("brun", &["-m", "localhost", &id]),
        "Failed to run the job: Job has already finished\n",
    );
    let history = force.run("bhist", &["-l", &id]);
    assert!(
        text(&history).contains("Job is forced to run by user or administrator <root>"),
        "{}",
        text(&history)
    );

    let long = force.submit(&["sleep 600"]);
    let out = force.run("brun", &["-m", "localhost", &long.to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    force.wait_status(long, "RUN");
    assert_refused(
        &force.run("brun", &["-m", "localhost", &long.to_string()]),
        "Failed to run the job: Job has already started\n",
    );
    // The host is still closed: a job nobody forces stays pending.
    let waiting = force.submit(&["sleep 1"]);
    assert_eq!(force.status(waiting), "PEND");
    let killed = force.run("bkill", &[&long.to_string(), &waiting.to_string()]);
    assert!(killed.status.success(), "{}", text(&killed));
}

// Goal: bkill -r of a running job whose sbatchd was killed with kill -9 shows it
// EXIT at once (TERM_FORCE_ADMIN); when that sbatchd starts again the job stays
// EXIT, its process is killed and it is not run again; a restart of mbatchd
// (replay) keeps it EXIT. Bad requests are refused with bkill's words. Two
// hosts on this machine: the commands ask h0's sbatchd for their credential,
// the job runs on h1.
#[test]
fn bkill_r_ends_a_job_whose_sbatchd_is_dead() {
    let mut cluster = Cluster::with_hosts(&["h0", "h1"]);
    let mbatchd = cluster.start_mbatchd();
    let envdir0 = cluster.envdir();
    let sbd0 = cluster.start_sbatchd_in("h0", &envdir0);
    let envdir1 = cluster.host_envdir("h1");
    let mut sbd1 = cluster.start_sbatchd_in("h1", &envdir1);
    let mut force = Force { cluster, mbatchd, _sbatchd: sbd0 };

    let runs = force.dir().join("runs");
    let pid_file = force.dir().join("job.pid");
    let script = format!("echo run >> {}; echo $$ > {}; exec sleep 600", runs.display(), pid_file.display());
    let job = force.submit(&["-m", "h1", &script]);
    let id = job.to_string();
    force.wait_status(job, "RUN");
    let pid: u32 = wait_until("the job's pid file", JOB_TIMEOUT, || {
        fs::read_to_string(&pid_file).ok().and_then(|text| text.trim().parse().ok())
    });
    let status = std::process::Command::new("kill").args(["-9", &sbd1.pid().to_string()]).status();
    assert!(status.expect("kill").success(), "kill -9 sbatchd");
    sbd1.wait_exit(util::EXIT_TIMEOUT);
    assert!(is_alive(pid), "the job outlives its sbatchd");

    let out = force.run("bkill", &["-r", &id]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("Job <{job}> is being terminated\n"));
    assert_eq!(force.status(job), "EXIT", "EXIT at once, the host being down");
    let long = force.run("bjobs", &["-l", &id]);
    assert!(text(&long).contains("TERM_FORCE_ADMIN"), "{}", text(&long));
    assert_refused(&force.run("bkill", &["-r", &id]), &format!("Job <{job}>: Job has already finished\n"));
    assert_refused(&force.run("bkill", &["-r", "99999"]), "Job <99999>: No matching job found\n");
    let both = force.run("bkill", &["-r", "-s", "KILL", &id]);
    assert_eq!(both.status.code(), Some(255), "{}", text(&both));
    assert!(
        String::from_utf8_lossy(&both.stderr).contains("-r and -s cannot be combined"),
        "{}",
        text(&both)
    );

    let _sbd1 = force.cluster.start_sbatchd_in("h1", &envdir1);
    wait_until("the forced job's process to be killed", JOB_TIMEOUT, || (!is_alive(pid)).then_some(()));
    // What h1's sbatchd then reports of the killed run must not bring the job back.
    let later = force.submit(&["-m", "h1", "sleep 1"]);
    force.wait_status(later, "DONE");
    assert_eq!(force.status(job), "EXIT");

    force.mbatchd.kill();
    force.mbatchd = force.cluster.start_mbatchd();
    assert_eq!(force.status(job), "EXIT", "replay keeps it EXIT");
    let long = force.run("bjobs", &["-l", &id]);
    assert!(text(&long).contains("TERM_FORCE_ADMIN"), "{}", text(&long));
    assert_eq!(fs::read_to_string(&runs).expect("the job's runs"), "run\n", "run once, never again");
}

// Goal: the owner's bkill -r of a pending job ends it at once (TERM_FORCE_OWNER);
// another user's is refused.
#[test]
fn bkill_r_of_a_pending_job_by_its_owner() {
    let force = Force::start();
    let closed = force.run("badmin", &["hclose", "localhost"]);
    assert!(closed.status.success(), "{}", text(&closed));
    let out = force.run_as_nobody("bsub", &["sleep 1"]);
    assert!(out.status.success(), "{}", text(&out));
    let job = util::submitted_job_id(&String::from_utf8_lossy(&out.stdout));
    let id = job.to_string();
    let other = force.submit(&["sleep 1"]);
    assert_refused(
        &force.run_as_nobody("bkill", &["-r", &other.to_string()]),
        &format!("Job <{other}>: User permission denied\n"),
    );
    let out = force.run_as_nobody("bkill", &["-r", &id]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(force.status(job), "EXIT");
    let long = force.run("bjobs", &["-l", &id]);
    assert!(text(&long).contains("TERM_FORCE_OWNER"), "{}", text(&long));
    assert_eq!(force.status(other), "PEND");
}
