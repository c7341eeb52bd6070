//! Per-user and per-cluster limits on the real daemons (issue 18, item 7), with
//! LSF's names: `MAX_PEND_JOBS` (lsb.params, lsb.users), `MAX_JOBS` (lsb.users)
//! and LavaCore's `LAVA_MAX_JOB_BYTES` and `LAVA_MAX_PEND_BYTES` (lsb.params). Two users: root and
//! `nobody` (present on every Debian system), each running the real commands.

mod util;

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use util::{Cluster, Daemon, chmod, wait_until};

/// Longest a job in these tests may take to reach a state (debug build, busy machine).
const JOB_TIMEOUT: Duration = Duration::from_secs(120);
/// The unprivileged account used as a second user.
const NOBODY_UID: u32 = 65534;
/// LSF's refusal of a submission over `MAX_PEND_JOBS`, as bsub prints it.
const NOBODY_OVER: &str = "User <nobody>: Pending job threshold reached. Job not submitted.\n";

fn bin(name: &str) -> PathBuf {
    util::mbatchd_bin().with_file_name(name)
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A one-host cluster of 4 slots with mbatchd and sbatchd running, whose
/// configuration files and folders `nobody` can read.
struct Batch {
    cluster: Cluster,
    _mbatchd: Daemon,
    _sbatchd: Daemon,
}

impl Batch {
    /// Starts the daemons after writing `lsb.users` and adding `params` to lsb.params.
    fn start(users: &str, params: &str) -> Batch {
        let mut cluster = Cluster::new();
        cluster.write_file(
            "etc/lsbatch/lavacore/configdir/lsb.hosts",
            "Begin Host\nHOST_NAME  MXJ  JL/U  r1m\ndefault    4    ()    ()\nEnd Host\n",
        );
        cluster.write_file("etc/lsbatch/lavacore/configdir/lsb.users", users);
        let path = cluster.envdir().join("lsbatch/lavacore/configdir/lsb.params");
        let original = fs::read_to_string(&path).expect("lsb.params");
        fs::write(&path, original.replace("End Parameters", &format!("{params}End Parameters")))
            .expect("lsb.params");
        let mbatchd = cluster.start_mbatchd();
        let sbatchd = cluster.start_sbatchd("localhost");
        for folder in [cluster.dir(), &cluster.dir().join("run"), &cluster.envdir()] {
            chmod(folder, 0o755);
        }
        Batch { cluster, _mbatchd: mbatchd, _sbatchd: sbatchd }
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        self.cluster.command(bin(program)).args(args).output().expect("run a command")
    }

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

    /// The id bsub printed, asserting success.
    fn accepted(out: &Output) -> u32 {
        assert!(out.status.success(), "bsub failed: {}", text(out));
        util::submitted_job_id(&String::from_utf8_lossy(&out.stdout))
    }

    /// The STAT column of `bjobs -a ID`.
    fn status(&self, job: u32) -> String {
        let out = self.run("bjobs", &["-a", "-noheader", &job.to_string()]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace().nth(2).unwrap_or_default().to_owned()
    }

    fn wait_status(&self, job: u32, want: &str) {
        let deadline = std::time::Instant::now() + JOB_TIMEOUT;
        loop {
            if self.status(job) == want {
                return;
            }
            if std::time::Instant::now() > deadline {
                let long = self.run("bjobs", &["-l", &job.to_string()]);
                panic!("job {job} never reached {want}:\n{}", text(&long));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Writes `lsb.FILE` and puts it in force (`badmin reconfig`).
    fn reconfigure(&self, file: &str, contents: &str) {
        let path = self.cluster.envdir().join("lsbatch/lavacore/configdir").join(file);
        fs::write(&path, contents).expect("write the configuration file");
        let out = self.run("badmin", &["reconfig"]);
        assert!(out.status.success(), "badmin reconfig: {}", text(&out));
    }
}

fn users(rows: &str) -> String {
    format!("Begin User\nUSER_NAME  MAX_JOBS  JL/P  MAX_PEND_JOBS\n{rows}End User\n")
}

/// A job command that waits for `gate` to exist.
fn gated(gate: &Path) -> String {
    format!("while [ ! -e {} ]; do sleep 0.05; done", gate.display())
}

// Goal: a user at MAX_PEND_JOBS (lsb.users) is refused with LSF's words and bsub's
// exit code 255, while another user still submits; a pending job of hers that goes
// makes room again; badmin reconfig puts lower limits in force (lsb.users, then the
// lsb.params value that holds for every user), leaving the jobs already pending alone.
#[test]
fn a_user_over_max_pend_jobs_is_refused_while_another_user_still_submits() {
    let batch = Batch::start(&users("nobody  -  -  2\ndefault  -  -  -\n"), "");
    let held = ["-H", "sleep", "1"];
    let first = Batch::accepted(&batch.run_as_nobody("bsub", &held));
    Batch::accepted(&batch.run_as_nobody("bsub", &held));
    let over = batch.run_as_nobody("bsub", &held);
    assert_eq!(over.status.code(), Some(255), "{}", text(&over));
    assert_eq!(String::from_utf8_lossy(&over.stderr), NOBODY_OVER);
    assert!(over.stdout.is_empty(), "nothing submitted: {}", text(&over));
    // root goes on, as often as it likes.
    for _ in 0..3 {
        Batch::accepted(&batch.run("bsub", &held));
    }
    // One of nobody's pending jobs goes: she submits again.
    let out = batch.run_as_nobody("bkill", &[&first.to_string()]);
    assert!(out.status.success(), "bkill: {}", text(&out));
    batch.wait_status(first, "EXIT");
    Batch::accepted(&batch.run_as_nobody("bsub", &held));
    assert_eq!(String::from_utf8_lossy(&batch.run_as_nobody("bsub", &held).stderr), NOBODY_OVER);

    // lsb.users lowered to 1: her two pending jobs stay, and she is still refused.
    batch.reconfigure("lsb.users", &users("nobody  -  -  1\n"));
    assert_eq!(String::from_utf8_lossy(&batch.run_as_nobody("bsub", &held).stderr), NOBODY_OVER);
    let listed = batch.run("bjobs", &["-u", "nobody", "-noheader"]);
    assert_eq!(String::from_utf8_lossy(&listed.stdout).lines().count(), 2, "{}", text(&listed));
    // lsb.params' MAX_PEND_JOBS holds for every user: root has 3 pending jobs.
    let params_path = batch.cluster.envdir().join("lsbatch/lavacore/configdir/lsb.params");
    let params = fs::read_to_string(&params_path).expect("lsb.params");
    batch.reconfigure("lsb.params", &params.replace("End Parameters", "MAX_PEND_JOBS = 3\nEnd Parameters"));
    let root_over = batch.run("bsub", &held);
    assert_eq!(root_over.status.code(), Some(255), "{}", text(&root_over));
    assert_eq!(
        String::from_utf8_lossy(&root_over.stderr),
        "User <root>: Pending job threshold reached. Job not submitted.\n"
    );
}

// Goal: a user at MAX_JOBS (lsb.users) has her further jobs PEND with LSF's reason in
// `bjobs -p` while a free slot is there and another user's job runs in it; they run
// when her running job ends.
#[test]
fn a_user_over_max_jobs_has_jobs_pending_with_the_reason_until_slots_free() {
    let batch = Batch::start(&users("nobody  1  -  -\n"), "");
    let gates = batch.cluster.dir().join("gates");
    fs::create_dir_all(&gates).expect("gates");
    // The jobs write their output there (nobody has no home directory).
    chmod(&gates, 0o777);
    let out = gates.join("%J.out");
    let out = out.to_str().expect("utf-8");
    let (gate_a, gate_b, gate_root) = (gates.join("a"), gates.join("b"), gates.join("root"));
    let a = Batch::accepted(&batch.run_as_nobody("bsub", &["-o", out, &gated(&gate_a)]));
    let b = Batch::accepted(&batch.run_as_nobody("bsub", &["-o", out, &gated(&gate_b)]));
    batch.wait_status(a, "RUN");
    let reason = "The user has reached his/her job slot limit";
    wait_until("bjobs -p to show the user's limit", JOB_TIMEOUT, || {
        let out = batch.run_as_nobody("bjobs", &["-p"]);
        String::from_utf8_lossy(&out.stdout).contains(reason).then_some(())
    });
    let long = batch.run_as_nobody("bjobs", &["-l", &b.to_string()]);
    assert!(text(&long).contains(reason), "bjobs -l: {}", text(&long));
    assert_eq!(batch.status(b), "PEND");
    // The host has free slots: root's job runs beside nobody's.
    let root_job = Batch::accepted(&batch.run("bsub", &["-o", out, &gated(&gate_root)]));
    batch.wait_status(root_job, "RUN");
    assert_eq!(batch.status(b), "PEND");
    fs::write(&gate_a, "").expect("release a");
    batch.wait_status(a, "DONE");
    batch.wait_status(b, "RUN");
    fs::write(&gate_b, "").expect("release b");
    fs::write(&gate_root, "").expect("release root's job");
    batch.wait_status(b, "DONE");
    batch.wait_status(root_job, "DONE");
}

// Goal: a submission larger than LAVA_MAX_JOB_BYTES (lsb.params) is refused with a
// message naming its size and the limit, bsub exits 255 and nothing is submitted; a
// job of normal size is taken.
#[test]
fn an_oversized_job_is_refused_with_a_clear_message() {
    let batch = Batch::start(&users("default  -  -  -\n"), "LAVA_MAX_JOB_BYTES = 65536\n");
    let big = "x".repeat(100_000);
    let out =
        batch.cluster.command(bin("bsub")).args(["-H", "true"]).env("BIG", &big).output().expect("bsub");
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.starts_with("Job too large: the submission (command or script, environment and options) is "),
        "{said}"
    );
    assert!(
        said.ends_with(
            " bytes, above the limit of 65536 bytes (LAVA_MAX_JOB_BYTES in lsb.params). Job not submitted.\n"
        ),
        "{said}"
    );
    let size: u64 = said
        .split(" is ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a size in {said}"));
    assert!(size > 100_000, "the size counts the environment: {size}");
    let listed = batch.run("bjobs", &["-a", "-u", "all", "-noheader"]);
    assert!(listed.stdout.is_empty(), "nothing was submitted: {}", text(&listed));
    Batch::accepted(&batch.run("bsub", &["-H", "true"]));
}

// Attack (issue 18, item 7): one user submits held jobs with a 900 KB environment each, to
// make mbatchd hold them (100 of them took it from 22 MB to 146 MB). Goal: with
// LAVA_MAX_PEND_BYTES at 8 MiB her submissions are refused once her pending jobs hold that
// much, with LSF's threshold words and the sizes; mbatchd's memory grows by about the
// bound, not by what she sends; another user still submits. She sends 108 MB; the
// allocator keeps some of what passed through (from 13 to 33 MB over the bound in
// repeated runs), so the assertion sits where "follows the bound" and "follows what is
// sent" are far apart: under half of what she sent.
#[test]
fn one_users_pending_jobs_are_bounded_in_bytes() {
    let batch = Batch::start(&users("default  -  -  -\n"), "LAVA_MAX_PEND_BYTES = 8388608\n");
    let rss = || util::hostile::rss_kib(batch._mbatchd.pid());
    let before = rss();
    // 8 variables of 112,500 bytes: one variable may not pass 128 KiB (MAX_ARG_STRLEN).
    let part = "y".repeat(112_500);
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..120 {
        let mut bsub = batch.cluster.command(bin("bsub"));
        for n in 0..8 {
            bsub.env(format!("BIG{n}"), &part);
        }
        let out = bsub
            .args(["-H", "true"])
            .current_dir("/tmp")
            .env("HOME", "/tmp")
            .uid(NOBODY_UID)
            .gid(NOBODY_UID)
            .output()
            .expect("bsub as nobody");
        if out.status.success() {
            accepted += 1;
            continue;
        }
        assert_eq!(out.status.code(), Some(255), "{}", text(&out));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.starts_with("User <nobody>: Pending job threshold reached (the user's pending jobs hold "),
            "{said}"
        );
        assert!(said.contains("LAVA_MAX_PEND_BYTES, 8388608). Job not submitted."), "{said}");
        refused += 1;
    }
    assert_eq!((accepted, refused), (9, 111), "9 jobs of 900 KB fit in 8 MiB");
    let grown = rss().saturating_sub(before);
    // 120 x 900 KB were sent (108 MB); 9 of them are held (8 MB).
    assert!(grown < 48 * 1024, "mbatchd grew by {grown} KiB");
    Batch::accepted(&batch.run("bsub", &["-H", "true"]));
}
