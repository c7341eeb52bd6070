//! The batch system end to end: the real `mbatchd`, `sbatchd` and commands
//! (`bsub`, `bjobs`, `bkill`, `bstop`, `bresume`) on loopback, in a
//! throw-away cluster folder per test (see `util`).
//!
//! These tests check what a user sees (command output, job states, output
//! files) and the crash promises of ../shared/DESIGN.md section 6: a `kill -9`
//! of either daemon in the middle of work loses no job and runs none twice.

mod util;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use util::{Cluster, Daemon, STARTUP_TIMEOUT, chmod, wait_until};

/// Longest a job in these tests may take to reach a state (debug build, busy machine).
const JOB_TIMEOUT: Duration = Duration::from_secs(120);
/// The unprivileged account used to test identities (present on every Debian system).
const NOBODY_UID: u32 = 65534;

/// A one-host cluster with mbatchd and sbatchd running.
struct Batch {
    cluster: Cluster,
    mbatchd: Option<Daemon>,
    sbatchd: Option<Daemon>,
}

impl Batch {
    fn start() -> Batch {
        let mut cluster = Cluster::new();
        let mbatchd = cluster.start_mbatchd();
        let mut batch = Batch { cluster, mbatchd: Some(mbatchd), sbatchd: None };
        batch.start_sbatchd();
        batch
    }

    fn start_sbatchd(&mut self) {
        let ready = self.cluster.dir().join("run/sbatchd.ready");
        let _absent = fs::remove_file(&ready);
        let args: Vec<&OsStr> =
            vec!["--host".as_ref(), "localhost".as_ref(), "--ready-file".as_ref(), ready.as_ref()];
        let mut daemon = self.cluster.spawn("sbatchd", Path::new(env!("CARGO_BIN_EXE_sbatchd")), &args);
        wait_until("sbatchd's ready file", STARTUP_TIMEOUT, || {
            assert!(daemon.is_running(), "sbatchd exited early:\n{}", daemon.log());
            ready.exists().then_some(())
        });
        self.sbatchd = Some(daemon);
    }

    fn restart_mbatchd(&mut self) {
        self.mbatchd = Some(self.cluster.start_mbatchd());
    }

    /// Runs a command of the suite as root and returns its output.
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

    /// `bsub ARGS`, asserting success; returns the job id.
    fn submit(&self, args: &[&str]) -> u32 {
        submitted_id(&self.run("bsub", args))
    }

    /// The STAT column of `bjobs -a ID`.
    fn status(&self, job: u32) -> String {
        let out = self.run("bjobs", &["-a", "-noheader", &job.to_string()]);
        String::from_utf8_lossy(&out.stdout).split_whitespace().nth(2).unwrap_or_default().to_owned()
    }

    /// Waits until the job shows `want`.
    fn wait_status(&self, job: u32, want: &str) {
        let mut last = String::new();
        wait_until(&format!("job {job} to reach {want} (last seen {last:?})"), JOB_TIMEOUT, || {
            last = self.status(job);
            (last == want).then_some(())
        });
    }

    /// Waits until every job of `jobs` is DONE or EXIT; returns each one's status.
    fn wait_all_finished(&self, jobs: &[u32]) -> BTreeMap<u32, String> {
        wait_until("every job to finish", JOB_TIMEOUT * 3, || {
            let out = self.run("bjobs", &["-a", "-noheader", "-u", "all"]);
            let text = String::from_utf8_lossy(&out.stdout);
            let states: BTreeMap<u32, String> = text
                .lines()
                .filter_map(|line| {
                    let mut cols = line.split_whitespace();
                    let id = cols.next()?.parse().ok()?;
                    Some((id, cols.nth(1)?.to_owned()))
                })
                .collect();
            jobs.iter()
                .all(|job| matches!(states.get(job).map(String::as_str), Some("DONE" | "EXIT")))
                .then_some(states)
        })
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

fn submitted_id(out: &Output) -> u32 {
    assert!(out.status.success(), "bsub failed: {}", text(out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .strip_prefix("Job <")
        .and_then(|rest| rest.split('>').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("bsub printed no job id: {stdout}"))
}

// Goal: the simplest life of a job — submitted, run, DONE — with its output
// in the -o file and LSF's message from bsub.
#[test]
fn a_job_runs_to_done_and_writes_its_output() {
    let batch = Batch::start();
    let out_file = batch.dir().join("hello.out");
    // One argument holding the whole command line: the execution host's shell
    // expands it, so the job sees its own LSB_JOBID.
    let out = batch.run("bsub", &["-o", out_file.to_str().expect("utf-8"), "echo hello $LSB_JOBID"]);
    let job = submitted_id(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("Job <{job}> is submitted to default queue <normal>.\n")
    );
    batch.wait_status(job, "DONE");
    let written = fs::read_to_string(&out_file).expect("the output file exists");
    assert!(written.contains(&format!("hello {job}")), "output file: {written}");
    // badmin showstatus: the job counted as finished, the submission frame, the
    // event log's fsyncs, the one server ok.
    let out = batch.run("badmin", &["showstatus"]);
    assert!(out.status.success(), "badmin failed: {}", text(&out));
    let status = String::from_utf8_lossy(&out.stdout).into_owned();
    let value = |label: &str| -> u64 {
        let line = status.lines().find(|line| line.trim_start().starts_with(label));
        let line = line.unwrap_or_else(|| panic!("no {label} in:\n{status}"));
        line.split_whitespace().last().and_then(|v| v.parse().ok()).expect("a number")
    };
    assert_eq!((value("Finished:"), value("Ok:")), (1, 1), "{status}");
    assert!(value("frames.SUBMIT_JOB") >= 1 && value("log.fsyncs") >= 1, "{status}");
    let out = batch.run("badmin", &["hclose", "h0"]);
    assert_eq!(
        (out.status.code(), text(&out)),
        (Some(255), "badmin: hclose is not supported by LavaCore yet\n".to_owned())
    );
}

// Goal: badmin reconfig puts a new queue in force at once; a broken lsb.queues
// is refused with its file and line and the running configuration stays; only
// an administrator may ask.
#[test]
fn badmin_reconfig_takes_a_new_queue_and_refuses_a_broken_file() {
    let batch = Batch::start();
    let queues = batch.cluster.envdir().join("lsbatch/lavacore/configdir/lsb.queues");
    let original = fs::read_to_string(&queues).expect("lsb.queues");
    let night = "\nBegin Queue\nQUEUE_NAME = night\nPRIORITY = 10\nEnd Queue\n";
    fs::write(&queues, format!("{original}{night}")).expect("write lsb.queues");
    let out = batch.run("badmin", &["reconfig"]);
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned()),
        (
            Some(0),
            "Checking configuration files ...\nNo errors found.\n\nReconfiguration initiated\n".to_owned()
        ),
        "{}",
        text(&out)
    );
    let out = batch.run("bqueues", &["night"]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("\nnight "),
        "{}",
        text(&out)
    );
    let job = submitted_id(&batch.run("bsub", &["-q", "night", "true"]));
    batch.wait_status(job, "DONE");
    // A broken file: refused with file and line, and `night` stays.
    fs::write(
        &queues,
        format!("{original}{night}Begin Queue\nQUEUE_NAME = bad\nPRIORITY = high\nEnd Queue\n"),
    )
    .expect("write lsb.queues");
    let out = batch.run("badmin", &["reconfig"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(255), "{said}");
    assert!(said.contains("lsb.queues:") && said.ends_with("There are fatal errors.\n"), "{said}");
    assert!(batch.run("bqueues", &["night"]).status.success());
    // Only an administrator.
    let out = batch.run_as_nobody("badmin", &["reconfig"]);
    assert_eq!(out.status.code(), Some(255));
    assert!(text(&out).contains("User permission denied."), "{}", text(&out));
}

// Goal: an unknown queue is refused with LSF's message, a non-zero exit, and
// no job is created.
#[test]
fn an_unknown_queue_is_refused() {
    let batch = Batch::start();
    let out = batch.run("bsub", &["-q", "nosuch", "true"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("nosuch: No such queue. Job not submitted."), "{}", text(&out));
    let listing = batch.run("bjobs", &["-a", "-u", "all"]);
    assert!(!String::from_utf8_lossy(&listing.stdout).contains("nosuch"));
}

// Goal: bstop and bresume move a running job between RUN and USUSP, and bkill
// ends it in EXIT; the messages are LSF's.
#[test]
fn stop_resume_and_kill_a_running_job() {
    let batch = Batch::start();
    let job = batch.submit(&["sleep", "300"]);
    batch.wait_status(job, "RUN");
    let id = job.to_string();
    let out = batch.run("bstop", &[&id]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("Job <{job}> is being stopped"));
    batch.wait_status(job, "USUSP");
    let out = batch.run("bresume", &[&id]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("Job <{job}> is being resumed"));
    batch.wait_status(job, "RUN");
    let out = batch.run("bkill", &[&id]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("Job <{job}> is being terminated"));
    batch.wait_status(job, "EXIT");
}

// Goal: a job held at submission (bstop of a pending job) is PSUSP and
// bresume releases it; a pending job killed ends EXIT without running.
#[test]
fn pending_jobs_can_be_held_released_and_killed() {
    let batch = Batch::start();
    // Fill the host so that the next jobs stay pending.
    let slots = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let fillers: Vec<u32> = (0..slots).map(|_| batch.submit(&["sleep", "300"])).collect();
    for filler in &fillers {
        batch.wait_status(*filler, "RUN");
    }
    let marker = batch.dir().join("ran");
    let held = batch.submit(&["touch", marker.to_str().expect("utf-8")]);
    assert_eq!(batch.status(held), "PEND");
    batch.run("bstop", &[&held.to_string()]);
    batch.wait_status(held, "PSUSP");
    // bqueues counts the slots of the default queue as LSF does: the fillers
    // RUN, the held job PEND (PSUSP is a pending state, the jobs `bjobs -p`
    // lists; NJOBS PEND RUN SUSP are the last columns).
    let out = batch.run("bqueues", &["normal"]);
    assert!(out.status.success(), "bqueues failed: {}", text(&out));
    let listing = String::from_utf8_lossy(&out.stdout).into_owned();
    let row: Vec<&str> =
        listing.lines().nth(1).map(|line| line.split_whitespace().collect()).unwrap_or_default();
    let want = [slots + 1, 1, slots, 0].map(|n| n.to_string());
    let want: Vec<&str> = want.iter().map(String::as_str).collect();
    assert_eq!(
        (row.first().copied(), &row[row.len().saturating_sub(4)..]),
        (Some("normal"), &want[..]),
        "{listing}"
    );
    let out = batch.run("bqueues", &["nosuch"]);
    assert_eq!((out.status.code(), text(&out)), (Some(255), "nosuch: No such queue\n".to_owned()));
    batch.run("bresume", &[&held.to_string()]);
    batch.wait_status(held, "PEND");
    let doomed = batch.submit(&["touch", marker.to_str().expect("utf-8")]);
    batch.run("bkill", &[&doomed.to_string()]);
    batch.wait_status(doomed, "EXIT");
    batch.run("bkill", &["0"]);
    batch.wait_all_finished(&fillers);
    assert_ne!(batch.status(doomed), "DONE");
}

// Goal: identity comes from the kernel, not from the client: a job submitted
// by `nobody` runs as uid 65534, and `nobody` may not kill root's job (LSF's
// permission message, non-zero exit), while root may kill nobody's.
#[test]
fn jobs_run_as_their_submitter_and_only_owners_may_signal() {
    let batch = Batch::start();
    // nobody must reach the configuration, the credential socket and a place to write.
    for folder in [batch.dir(), &batch.dir().join("run"), &batch.cluster.envdir()] {
        chmod(folder, 0o755);
    }
    let shared = batch.dir().join("shared");
    fs::create_dir_all(&shared).expect("create a shared folder");
    chmod(&shared, 0o777);
    let out_file = shared.join("whoami.out");
    let out = batch.run_as_nobody("bsub", &["-o", out_file.to_str().expect("utf-8"), "id", "-u"]);
    let theirs = submitted_id(&out);
    batch.wait_status(theirs, "DONE");
    assert_eq!(fs::read_to_string(&out_file).expect("output").trim(), NOBODY_UID.to_string());

    let mine = batch.submit(&["sleep", "300"]);
    batch.wait_status(mine, "RUN");
    let out = batch.run_as_nobody("bkill", &[&mine.to_string()]);
    assert!(!out.status.success());
    assert!(text(&out).contains(&format!("Job <{mine}>: User permission denied")), "{}", text(&out));
    assert_eq!(batch.status(mine), "RUN");
    batch.run("bkill", &[&mine.to_string()]);
    batch.wait_status(mine, "EXIT");
}

// Goal: kill -9 of mbatchd in the middle of a 500-job workload loses no
// acknowledged job and runs none twice. Method: every job appends its id to
// one file; after mbatchd's restart every job reaches DONE and every id
// appears exactly once.
#[test]
fn mbatchd_kill_9_in_a_500_job_workload_loses_and_repeats_nothing() {
    let mut batch = Batch::start();
    let ledger = batch.dir().join("ledger");
    let script = format!("echo $LSB_JOBID >> {}", ledger.display());
    let mut jobs = Vec::new();
    for n in 0..500 {
        if n == 250 {
            batch.mbatchd.take().expect("mbatchd runs").kill();
            batch.restart_mbatchd();
        }
        jobs.push(batch.submit(&[&script]));
    }
    let states = batch.wait_all_finished(&jobs);
    for job in &jobs {
        assert_eq!(states.get(job).map(String::as_str), Some("DONE"), "job {job}");
    }
    let mut runs: BTreeMap<u32, u32> = BTreeMap::new();
    for line in fs::read_to_string(&ledger).expect("ledger").lines() {
        *runs.entry(line.trim().parse().expect("a job id")).or_default() += 1;
    }
    for job in &jobs {
        assert_eq!(runs.get(job), Some(&1), "job {job} ran {:?} times", runs.get(job));
    }
    assert_eq!(runs.len(), jobs.len(), "a job id that was never submitted ran");
}

// Goal: kill -9 of sbatchd while jobs run loses nothing: the jobs keep running
// (their shepherds survive), and after sbatchd's restart their exit statuses
// still reach mbatchd — DONE for exit 0, EXIT for exit 3.
#[test]
fn sbatchd_kill_9_while_jobs_run_still_reports_their_exits() {
    let mut batch = Batch::start();
    let good = batch.submit(&["sleep 2; exit 0"]);
    let bad = batch.submit(&["sleep 2; exit 3"]);
    batch.wait_status(good, "RUN");
    batch.wait_status(bad, "RUN");
    batch.sbatchd.take().expect("sbatchd runs").kill();
    std::thread::sleep(Duration::from_secs(3)); // the jobs end while no sbatchd runs
    batch.start_sbatchd();
    batch.wait_status(good, "DONE");
    batch.wait_status(bad, "EXIT");
    let long = batch.run("bjobs", &["-l", &bad.to_string()]);
    assert!(text(&long).contains("Exited with exit code 3"), "{}", text(&long));
}
