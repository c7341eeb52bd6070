//! The batch system end to end: the real `mbatchd`, `sbatchd` and commands
//! (`bsub`, `bjobs`, `bkill`, `bstop`, `bresume`) on loopback, in a
//! throw-away cluster folder per test (see `util`).
//!
//! These tests check what a user sees (command output, job states, output
//! files) and the crash promises of docs/ARCHITECTURE.md ("What each daemon keeps"): a `kill -9`
//! of either daemon in the middle of work loses no job and runs none twice.

mod util;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use lava_batch_wire as wire;
use util::proto::{Client, request_id, submit_request};
use util::{Cluster, Daemon, EXIT_TIMEOUT, STARTUP_TIMEOUT, chmod, wait_until};

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
        Batch::start_in(Cluster::new())
    }

    /// Starts the daemons of `cluster`, whose configuration a test may have edited.
    fn start_in(mut cluster: Cluster) -> Batch {
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
        self.statuses(&job.to_string()).into_iter().next().unwrap_or_default()
    }

    /// The STAT column of every line of `bjobs -a JOB` (`ID`, `ID[INDEX]`).
    fn statuses(&self, job: &str) -> Vec<String> {
        let out = self.run("bjobs", &["-a", "-noheader", job]);
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines().filter_map(|line| line.split_whitespace().nth(2).map(str::to_owned)).collect()
    }

    /// A protocol client speaking for root, for what the commands cannot say yet.
    fn client(&self) -> Client {
        let mut client = Client::connect(self.cluster.mbd_addr(), self.cluster.authenticator());
        (client.user, client.uid) = ("root".to_owned(), 0);
        client
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

    /// The pid of `job`'s shepherd, from the `pid` file it wrote in its state folder
    /// (`<submit time>.<job id>`; spare folders, `.spare.<n>`, are not jobs').
    fn shepherd_of(&self, job: u32) -> u32 {
        let state = self.cluster.work_dir().join("sbd/localhost/state");
        let suffix = format!(".{job}");
        let is_jobs = |name: &str| !name.starts_with('.') && name.ends_with(&suffix);
        wait_until(&format!("job {job}'s pid file"), JOB_TIMEOUT, || {
            let folder = fs::read_dir(&state)
                .ok()?
                .flatten()
                .find(|entry| entry.file_name().to_str().is_some_and(is_jobs))?;
            let line = fs::read_to_string(folder.path().join("pid")).ok()?;
            line.split_whitespace().find_map(|field| field.strip_prefix("shepherd=")?.parse().ok())
        })
    }

    /// Lets `nobody` reach the configuration and the credential socket.
    fn allow_nobody(&self) {
        for folder in [self.dir(), &self.dir().join("run"), &self.cluster.envdir()] {
            chmod(folder, 0o755);
        }
    }

    /// Changes the cluster's `lsb.FILE` with `edit` and puts it in force (`badmin reconfig`).
    fn reconfigure(&self, file: &str, edit: impl FnOnce(String) -> String) {
        let path = self.cluster.envdir().join("lsbatch/lavacore/configdir").join(file);
        let original = fs::read_to_string(&path).expect("read the configuration file");
        fs::write(&path, edit(original)).expect("write the configuration file");
        let out = self.run("badmin", &["reconfig"]);
        assert!(out.status.success(), "badmin reconfig: {}", text(&out));
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
    printed_id(out)
}

/// The id in bsub's `Job <N> is submitted ...` line, whatever its exit status.
fn printed_id(out: &Output) -> u32 {
    util::submitted_job_id(&String::from_utf8_lossy(&out.stdout))
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
        (Some(255), "Close <h0> ...... Bad host name, host group name or cluster name\n".to_owned())
    );
}

// Goal: badmin reconfig puts a new queue (with its PJOB_LIMIT) in force at once; a broken lsb.queues
// is refused with its file and line and the running configuration stays; only
// an administrator may ask.
#[test]
fn badmin_reconfig_takes_a_new_queue_and_refuses_a_broken_file() {
    let batch = Batch::start();
    let queues = batch.cluster.envdir().join("lsbatch/lavacore/configdir/lsb.queues");
    let original = fs::read_to_string(&queues).expect("lsb.queues");
    let night = "\nBegin Queue\nQUEUE_NAME = night\nPRIORITY = 10\nPJOB_LIMIT = 0.5\nEnd Queue\n";
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
    let row = String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "));
    assert_eq!(row.as_deref(), Some("night 10 Open:Active - - 0.5 - 0 0 0 0"), "{}", text(&out));
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

// Goal: `badmin ckconfig` checks every file of the cluster without asking a daemon:
// LSF's `No errors found.` (and the -v summary) for etc/'s configuration; a negative
// or non-numeric MAX_JOB_NUM (lsb.params) or PJOB_LIMIT (lsb.queues) is named with
// file, line and key, then `There are fatal errors.`, exit 255.
// Method: no daemon runs; each bad value replaces one line of the file in turn.
#[test]
fn badmin_ckconfig_names_bad_limits_by_file_and_line() {
    let cluster = Cluster::new();
    let configdir = cluster.envdir().join("lsbatch/lavacore/configdir");
    let ckconfig = |args: &[&str]| {
        let out = cluster.command(bin("badmin")).arg("ckconfig").args(args).output().expect("run badmin");
        let [stdout, stderr] =
            [&out.stdout, &out.stderr].map(|bytes| String::from_utf8_lossy(bytes).into_owned());
        (out.status.code(), stdout, stderr)
    };
    let header = "\nChecking configuration files ...\n\n";
    assert_eq!(ckconfig(&[]), (Some(0), format!("{header}No errors found.\n"), String::new()));
    let (code, verbose, _) = ckconfig(&["-v"]);
    assert_eq!(code, Some(0));
    assert!(verbose.contains(": 3 queues, 1 hosts, MAX_JOB_NUM 10000\nNo errors found.\n"), "{verbose}");

    for (file, key, value) in [
        ("lsb.params", "MAX_JOB_NUM", "-1"),
        ("lsb.params", "MAX_JOB_NUM", "lots"),
        ("lsb.queues", "PJOB_LIMIT", "-0.5"),
        ("lsb.queues", "PJOB_LIMIT", "half"),
    ] {
        let path = configdir.join(file);
        let original = fs::read_to_string(&path).expect("read the file");
        // Put the key right after the first `Begin` line (the first section).
        let begin = original.lines().position(|line| line.starts_with("Begin ")).expect("a section");
        let mut lines: Vec<String> =
            original.lines().filter(|line| !line.trim_start().starts_with(key)).map(str::to_owned).collect();
        lines.insert(begin + 1, format!("{key} = {value}"));
        fs::write(&path, lines.join("\n") + "\n").expect("write the file");
        let (code, stdout, stderr) = ckconfig(&[]);
        let at = format!("{}:{}: `{key}`: bad number `{value}`", path.display(), begin + 2);
        assert_eq!((code, stdout.as_str()), (Some(255), ""), "{stderr}");
        assert!(stderr.starts_with(&format!("{header}{at}, expected ")), "{stderr}");
        assert!(stderr.ends_with("\n\nThere are fatal errors.\n"), "{stderr}");
        fs::write(&path, original).expect("restore the file");
    }
    assert_eq!(ckconfig(&[]).0, Some(0));
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
// permission message, non-zero exit), while root may kill nobody's, and the job
// then ends with LSF's TERM_ADMIN where root's own killed job has TERM_OWNER.
#[test]
fn jobs_run_as_their_submitter_and_only_owners_may_signal() {
    let batch = Batch::start();
    // nobody must reach the configuration, the credential socket and a place to write.
    batch.allow_nobody();
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

    // root killing nobody's job is an administrator's kill (LSF's TERM_ADMIN), its own
    // job's the owner's (TERM_OWNER), in `bjobs -o`, `bhist -l` and `bacct -l` alike.
    let theirs = submitted_id(&batch.run_as_nobody("bsub", &["-o", "/dev/null", "sleep", "300"]));
    batch.wait_status(theirs, "RUN");
    batch.run("bkill", &[&theirs.to_string()]);
    batch.wait_status(theirs, "EXIT");
    for (job, reason) in [
        (theirs, "TERM_ADMIN: job killed by root or LSF administrator"),
        (mine, "TERM_OWNER: job killed by owner"),
    ] {
        let out = batch.run("bjobs", &["-a", "-noheader", "-o", "exit_reason", &job.to_string()]);
        assert_eq!(text(&out).trim(), reason, "bjobs of job {job}");
        // The long forms wrap their lines: compared without white space.
        let squeezed = |text: &str| text.split_whitespace().collect::<String>();
        let out = batch.run("bhist", &["-l", &job.to_string()]);
        assert!(squeezed(&text(&out)).contains(&squeezed(reason)), "bhist of job {job}: {}", text(&out));
        let want = squeezed(&format!("Completed <exit>; {reason}."));
        wait_until(&format!("job {job} in bacct with {reason}"), JOB_TIMEOUT, || {
            let out = batch.run("bacct", &["-l", "-u", "all", &job.to_string()]);
            squeezed(&text(&out)).contains(&want).then_some(())
        });
    }
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
    assert_each_done_and_run_once(&batch, &jobs, &ledger);
}

/// Waits for `jobs` to finish and checks that each ended DONE and appended its id to
/// `ledger` exactly once, and that no other id is there.
fn assert_each_done_and_run_once(batch: &Batch, jobs: &[u32], ledger: &Path) {
    let states = batch.wait_all_finished(jobs);
    for job in jobs {
        assert_eq!(states.get(job).map(String::as_str), Some("DONE"), "job {job}");
    }
    let mut runs: BTreeMap<u32, u32> = BTreeMap::new();
    for line in fs::read_to_string(ledger).expect("ledger").lines() {
        *runs.entry(line.trim().parse().expect("a job id")).or_default() += 1;
    }
    for job in jobs {
        assert_eq!(runs.get(job), Some(&1), "job {job} ran {:?} times", runs.get(job));
    }
    assert_eq!(runs.len(), jobs.len(), "a job id that was never submitted ran");
}

// Goal: kill -9 of sbatchd in the middle of a stream of job starts runs no job twice and
// loses none: at any moment some new jobs have a spare folder renamed but no durable
// record yet, or a shepherd waiting for its go, and the restarted sbatchd settles each
// (docs/batch.md, "Spare state folders", "A new job's launch overlaps its record").
// Method: 300 jobs that each append their id to one file, two-slot host; sbatchd alone is
// killed twice, once a third and once two thirds of the jobs have run, and restarted at
// once; every job must end DONE with its id in the file exactly once.
#[test]
fn sbatchd_kill_9_in_a_300_job_workload_runs_each_job_once() {
    let mut batch = Batch::start();
    let ledger = batch.dir().join("ledger");
    let script = format!("echo $LSB_JOBID >> {}", ledger.display());
    let jobs: Vec<u32> = (0..300).map(|_| batch.submit(&[&script])).collect();
    for done in [100, 200] {
        wait_until(&format!("{done} jobs to have run"), JOB_TIMEOUT, || {
            let lines = fs::read_to_string(&ledger).unwrap_or_default().lines().count();
            (lines >= done).then_some(())
        });
        let mut sbatchd = batch.sbatchd.take().expect("sbatchd runs");
        kill_9(sbatchd.pid());
        sbatchd.kill(); // reaps it
        batch.start_sbatchd();
    }
    assert_each_done_and_run_once(&batch, &jobs, &ledger);
}

// Goal: kill -9 of sbatchd while jobs run loses nothing: the jobs keep running
// (their shepherds survive), and after sbatchd's restart their exit statuses
// still reach mbatchd — DONE for exit 0, EXIT for exit 3. The shepherd zygote
// notices that sbatchd is gone and exits on its own, without taking the
// shepherds it forked along. Method: SIGKILL to sbatchd alone (as the OOM
// killer or an operator's `kill -9 PID` sends it), not to its process group,
// so that only the zygote's own watch on its socket can end it.
#[test]
fn sbatchd_kill_9_while_jobs_run_still_reports_their_exits() {
    let mut batch = Batch::start();
    let good = batch.submit(&["sleep 3; exit 0"]);
    let bad = batch.submit(&["sleep 3; exit 3"]);
    batch.wait_status(good, "RUN");
    batch.wait_status(bad, "RUN");
    let mut sbatchd = batch.sbatchd.take().expect("sbatchd runs");
    let zygote = wait_until("sbatchd's shepherd zygote", STARTUP_TIMEOUT, || zygote_of(sbatchd.pid()));
    let shepherds = [batch.shepherd_of(good), batch.shepherd_of(bad)];
    assert!(shepherds.iter().all(|pid| parent_of(*pid) == Some(zygote)), "forked by the zygote");
    kill_9(sbatchd.pid());
    wait_until("the zygote to exit after sbatchd's death", EXIT_TIMEOUT, || {
        (!is_alive(zygote)).then_some(())
    });
    for shepherd in shepherds {
        assert!(is_alive(shepherd), "shepherd {shepherd} died with the zygote");
    }
    sbatchd.kill(); // reaps it (its process group is empty by now)
    std::thread::sleep(Duration::from_secs(4)); // the jobs end while no sbatchd runs
    batch.start_sbatchd();
    batch.wait_status(good, "DONE");
    batch.wait_status(bad, "EXIT");
    let long = batch.run("bjobs", &["-l", &bad.to_string()]);
    assert!(text(&long).contains("Exited with exit code 3"), "{}", text(&long));
}

// Goal: kill -9 of the shepherd zygote while jobs run costs nothing: the jobs'
// shepherds (the zygote's children) go on and report the real exit statuses,
// and the next job is started by a new zygote.
#[test]
fn zygote_kill_9_while_jobs_run_loses_nothing() {
    let batch = Batch::start();
    let good = batch.submit(&["sleep 2; exit 0"]);
    let bad = batch.submit(&["sleep 2; exit 3"]);
    batch.wait_status(good, "RUN");
    batch.wait_status(bad, "RUN");
    let sbatchd = batch.sbatchd.as_ref().expect("sbatchd runs").pid();
    let zygote = wait_until("sbatchd's shepherd zygote", STARTUP_TIMEOUT, || zygote_of(sbatchd));
    kill_9(zygote);
    batch.wait_status(good, "DONE");
    batch.wait_status(bad, "EXIT");
    let long = batch.run("bjobs", &["-l", &bad.to_string()]);
    assert!(text(&long).contains("Exited with exit code 3"), "{}", text(&long));
    let next = batch.submit(&["exit 5"]);
    batch.wait_status(next, "EXIT");
    let long = batch.run("bjobs", &["-l", &next.to_string()]);
    assert!(text(&long).contains("Exited with exit code 5"), "{}", text(&long));
    let replacement = wait_until("a new zygote", STARTUP_TIMEOUT, || zygote_of(sbatchd));
    assert_ne!(replacement, zygote);
}

/// `kill -9 PID` of one process (not its group).
fn kill_9(pid: u32) {
    let status = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().expect("kill");
    assert!(status.success(), "kill -9 {pid}");
}

/// The state letter and parent pid of `pid`, from /proc/PID/stat.
fn proc_state(pid: u32) -> Option<(char, u32)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.next()?.parse().ok()?))
}

/// Whether `pid` runs (exists and is no zombie).
fn is_alive(pid: u32) -> bool {
    proc_state(pid).is_some_and(|(state, _)| !matches!(state, 'Z' | 'X'))
}

/// The parent of a live `pid`.
fn parent_of(pid: u32) -> Option<u32> {
    proc_state(pid).filter(|(state, _)| !matches!(state, 'Z' | 'X')).map(|(_, parent)| parent)
}

/// The live shepherd zygote of the sbatchd `sbatchd`: its child running `lava-shepherd`.
fn zygote_of(sbatchd: u32) -> Option<u32> {
    fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let comm = fs::read_to_string(entry.path().join("comm")).ok()?;
        (parent_of(pid) == Some(sbatchd) && comm.trim() == "lava-shepherd").then_some(pid)
    })
}

/// A one-host cluster whose host takes 8 jobs (MXJ), whatever its CPUs.
fn eight_slot_cluster() -> Cluster {
    let cluster = Cluster::new();
    cluster.write_file(
        "etc/lsbatch/lavacore/configdir/lsb.hosts",
        "Begin Host\nHOST_NAME  MXJ  JL/U  r1m\ndefault    8    ()    ()\nEnd Host\n",
    );
    cluster
}

/// A job command that marks `dir/started.I` and waits for `dir/release.I`
/// (I = its LSB_JOBINDEX), then prints its index.
fn gated_command(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        "touch {dir}/started.$LSB_JOBINDEX; \
         while [ ! -e {dir}/release.$LSB_JOBINDEX ]; do sleep 0.05; done; \
         echo index $LSB_JOBINDEX"
    )
}

// Goal: `bsub -J "name[1-6]%2"` makes one job of six elements, of which never
// more than two run at once, each with its own LSB_JOBINDEX and %I output file.
// Method: every element waits for its own release file; the test releases the
// running ones one at a time and, at every stage, sees at most two started and
// unreleased, and two running as long as enough elements remain.
#[test]
fn an_array_runs_at_most_its_limit_with_its_indexes() {
    let batch = Batch::start_in(eight_slot_cluster());
    let dir = batch.dir().join("array");
    fs::create_dir_all(&dir).expect("create the job folder");
    let out_pattern = dir.join("out.%I");
    let out = batch
        .run("bsub", &["-J", "six[1-6]%2", "-o", out_pattern.to_str().expect("utf-8"), &gated_command(&dir)]);
    let job = submitted_id(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("Job <{job}> is submitted to default queue <normal>.\n")
    );
    let started =
        |dir: &Path| (1..=6).filter(|i| dir.join(format!("started.{i}")).exists()).collect::<Vec<u32>>();
    let mut released: Vec<u32> = Vec::new();
    while released.len() < 6 {
        let remaining = 6 - released.len();
        let running = wait_until("two elements (or all that remain) to start", JOB_TIMEOUT, || {
            let running: Vec<u32> = started(&dir).into_iter().filter(|i| !released.contains(i)).collect();
            (running.len() >= remaining.min(2)).then_some(running)
        });
        assert!(running.len() <= 2, "more than two elements run at once: {running:?}");
        let statuses = batch.statuses(&job.to_string());
        assert_eq!(statuses.len(), 6, "bjobs ID lists every element: {statuses:?}");
        assert!(statuses.iter().filter(|s| *s == "RUN").count() <= 2, "{statuses:?}");
        let next = running[0];
        fs::write(dir.join(format!("release.{next}")), "").expect("release an element");
        let element = format!("{job}[{next}]");
        wait_until(&format!("{element} to finish"), JOB_TIMEOUT, || {
            (batch.statuses(&element) == ["DONE"]).then_some(())
        });
        released.push(next);
    }
    for index in 1..=6 {
        let written =
            fs::read_to_string(dir.join(format!("out.{index}"))).expect("the %I output file exists");
        assert!(written.contains(&format!("index {index}")), "out.{index}: {written}");
    }
}

// Goal: `bkill "ID[INDEX]"` ends one element and leaves the others running;
// `bkill ID` then ends every element.
#[test]
fn bkill_ends_one_element_or_the_whole_array() {
    let batch = Batch::start_in(eight_slot_cluster());
    let job = batch.submit(&["-J", "k[1-3]", "sleep", "300"]);
    let id = job.to_string();
    wait_until("every element to run", JOB_TIMEOUT, || (batch.statuses(&id) == ["RUN"; 3]).then_some(()));
    let out = batch.run("bkill", &[&format!("{job}[2]")]);
    assert!(out.status.success(), "bkill failed: {}", text(&out));
    wait_until("element 2 to end", JOB_TIMEOUT, || {
        (batch.statuses(&id) == ["RUN", "EXIT", "RUN"]).then_some(())
    });
    let out = batch.run("bkill", &[&id]);
    assert!(out.status.success(), "bkill failed: {}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("Job <{job}> is being terminated\n"),
        "one line"
    );
    wait_until("every element to end", JOB_TIMEOUT, || (batch.statuses(&id) == ["EXIT"; 3]).then_some(()));
}

// Goal: a dependency chain A → B (done(A)) → C (ended(B)) runs in order, B
// waiting with LSF's reason until A is DONE, C running after B ended EXIT; a
// dependency on a job that does not exist is refused with LSF's message and
// submits nothing. (Submitted through the protocol: `bsub -w` is the submit
// command's part.)
#[test]
fn a_dependency_chain_runs_in_order_and_a_missing_job_is_refused() {
    let batch = Batch::start_in(eight_slot_cluster());
    let dir = batch.dir().join("chain");
    fs::create_dir_all(&dir).expect("create the job folder");
    let mut client = batch.client();
    let mut submit = |n: u64, command: String, dependency: &str| {
        let request = wire::SubmitRequest { dependency: dependency.to_owned(), ..submit_request(&command) };
        client.submit(request_id(n), request)
    };
    let a = submit(1, format!("while [ ! -e {0}/release ]; do sleep 0.05; done", dir.display()), "")
        .expect("A is submitted")
        .job_id;
    let b = submit(2, "exit 3".to_owned(), &format!("done({a})")).expect("B is submitted").job_id;
    let c = submit(3, "true".to_owned(), &format!("ended({b})")).expect("C is submitted").job_id;
    let refused = submit(4, "true".to_owned(), "done(999999)").expect_err("no such job");
    assert_eq!(refused.message, "done(999999): No matching job found");
    batch.wait_status(a, "RUN");
    let reply = batch.client().query(wire::JobQuery {
        jobs: vec![wire::WireJobRef { job_id: b, array_index: 0 }],
        ..util::proto::query_all()
    });
    let reason = reply.expect("bjobs answers").jobs.first().map(|info| info.reason.clone());
    assert_eq!(reason.as_deref(), Some("Job dependency condition not satisfied"));
    assert_eq!((batch.status(b), batch.status(c)), ("PEND".to_owned(), "PEND".to_owned()));
    fs::write(dir.join("release"), "").expect("release A");
    batch.wait_status(a, "DONE");
    batch.wait_status(b, "EXIT");
    batch.wait_status(c, "DONE");
    let out = batch.run("bjobs", &["-a", "-noheader", "-u", "all"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3, "the refused job was not submitted");
}

/// `(exit code, standard output, standard error)` of a command.
fn said(out: &Output) -> (Option<i32>, String, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// Goal: badmin hclose/qclose/qinact act at once, are for administrators only,
// and survive `badmin mbdrestart` (which restarts mbatchd from its log); hopen,
// qopen and qact undo them.
#[test]
fn closed_hosts_and_queues_survive_mbdrestart() {
    let batch = Batch::start();
    batch.allow_nobody();
    let out = batch.run_as_nobody("badmin", &["hclose", "localhost"]);
    assert_eq!(
        said(&out),
        (Some(255), String::new(), "Close <localhost> ...... User permission denied\n".into())
    );
    let out = batch.run("badmin", &["hclose"]);
    assert_eq!(said(&out), (Some(0), "Close <localhost> ...... done\n".into(), String::new()));
    let out = batch.run("bhosts", &["-w"]);
    assert!(text(&out).contains("closed_Adm"), "{}", text(&out));
    let held = batch.submit(&["true"]);
    let out = batch.run("badmin", &["qclose", "normal"]);
    assert_eq!(said(&out), (Some(0), "Queue <normal> is closed\n".into(), String::new()));
    assert!(text(&batch.run("bqueues", &["normal"])).contains(" Closed:Active "));
    let out = batch.run("bsub", &["true"]);
    assert_eq!(said(&out).0, Some(255));
    assert!(text(&out).contains("normal: Queue has been closed. Job not submitted."), "{}", text(&out));
    let out = batch.run_as_nobody("badmin", &["mbdrestart"]);
    assert_eq!(said(&out), (Some(255), String::new(), "User permission denied\n".into()));
    let pid = batch.mbatchd.as_ref().expect("mbatchd").pid();
    let out = batch.run("badmin", &["mbdrestart"]);
    assert_eq!(
        said(&out),
        (
            Some(0),
            "Checking configuration files ...\nNo errors found.\n\nMBD restart initiated\n".into(),
            String::new()
        )
    );
    // The same process (exec) replays its log and serves again: still closed.
    wait_until("mbatchd to be ready again", STARTUP_TIMEOUT, || {
        (batch.mbatchd.as_ref().expect("mbatchd").log().matches("mbatchd ready").count() == 2).then_some(())
    });
    assert_eq!(batch.mbatchd.as_ref().expect("mbatchd").pid(), pid);
    // (`unreach` until sbatchd registers again, then `closed_Adm`.)
    wait_until("the host to show closed_Adm again", STARTUP_TIMEOUT, || {
        text(&batch.run("bhosts", &["-w"])).contains("closed_Adm").then_some(())
    });
    assert!(text(&batch.run("bsub", &["true"])).contains("Queue has been closed"));
    assert_eq!(batch.status(held), "PEND");
    // Open the queue but make it inactive: jobs are accepted and wait.
    assert!(batch.run("badmin", &["qopen"]).status.success());
    let out = batch.run("badmin", &["qinact", "normal"]);
    assert_eq!(said(&out), (Some(0), "Queue <normal> is inactivated\n".into(), String::new()));
    assert!(text(&batch.run("bqueues", &["normal"])).contains(" Open:Inact "));
    let waiting = batch.submit(&["true"]);
    assert!(batch.run("badmin", &["hopen", "localhost"]).status.success());
    assert_eq!((batch.status(held), batch.status(waiting)), ("PEND".into(), "PEND".into()));
    let out = batch.run("badmin", &["qact", "normal"]);
    assert_eq!(said(&out), (Some(0), "Queue <normal> is activated\n".into(), String::new()));
    batch.wait_status(held, "DONE");
    batch.wait_status(waiting, "DONE");
}

// Goal: brequeue -e runs a job that ended EXIT again under the same id, with
// LSF's message, until it ends DONE; another user may not requeue it, and a
// job that is not finished or not known is refused.
#[test]
fn brequeue_runs_an_exit_job_again() {
    let batch = Batch::start();
    batch.allow_nobody();
    let marker = batch.dir().join("first-run-done");
    let script = format!("test -e {0} || {{ touch {0}; exit 3; }}", marker.to_str().expect("utf-8"));
    let job = batch.submit(&[&script]);
    batch.wait_status(job, "EXIT");
    let id = job.to_string();
    let out = batch.run("brequeue", &["-d", &id]);
    assert_eq!(
        said(&out),
        (Some(255), String::new(), format!("Job <{id}>: Job is EXIT; requeue it with -e or -a\n"))
    );
    let out = batch.run_as_nobody("brequeue", &["-e", &id]);
    assert_eq!(said(&out), (Some(255), String::new(), format!("Job <{id}>: User permission denied\n")));
    let out = batch.run("brequeue", &["-e", "999999"]);
    assert_eq!(said(&out), (Some(255), String::new(), "Job <999999>: No matching job found\n".into()));
    let out = batch.run("brequeue", &[&id]);
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));
    let out = batch.run("brequeue", &["-e", &id]);
    assert_eq!(said(&out), (Some(0), format!("Job <{id}> is being requeued\n"), String::new()));
    batch.wait_status(job, "DONE");
    assert!(marker.exists());
    let history: String = text(&batch.run("bhist", &["-l", &id])).split_whitespace().collect();
    assert!(history.contains("Jobrequeuedbyuseroradministrator<root>;"), "{history}");
}

// Goal: brequeue -r kills a running job and runs it again under the same id
// until it ends DONE; bhist tells the requeue kill, the killed run and the
// requeue; -J selects the job by name as bkill does, and another user's job is
// refused. Then -d -H without a job id holds the (most recent) DONE job, which
// bresume releases to run again.
#[test]
fn brequeue_r_runs_a_running_job_again() {
    let batch = Batch::start();
    batch.allow_nobody();
    let marker = batch.dir().join("first-run-started");
    let script = format!("test -e {0} || {{ touch {0}; sleep 600; }}", marker.to_str().expect("utf-8"));
    let job = batch.submit(&["-J", "again", &script]);
    batch.wait_status(job, "RUN");
    wait_until("the first run to start its sleep", JOB_TIMEOUT, || marker.exists().then_some(()));
    let id = job.to_string();
    let out = batch.run_as_nobody("brequeue", &["-r", &id]);
    assert_eq!(said(&out), (Some(255), String::new(), format!("Job <{id}>: User permission denied\n")));
    let out = batch.run("brequeue", &["-J", "nosuchname"]);
    assert_eq!(said(&out), (Some(255), String::new(), "No matching job found\n".into()));
    let out = batch.run("brequeue", &["-r", "-J", "again"]);
    assert_eq!(said(&out), (Some(0), format!("Job <{id}> is being requeued\n"), String::new()));
    batch.wait_status(job, "DONE");
    let history: String = text(&batch.run("bhist", &["-l", &id])).split_whitespace().collect();
    assert!(history.contains("Signal<REQUEUE_PEND>requestedbyuseroradministrator<root>;"), "{history}");
    assert!(history.contains("Jobhasbeenrequeued;"), "{history}");
    assert!(history.contains("Donesuccessfully."), "{history}");
    // Without a job id, the caller's most recent job the options select; -H holds it.
    let out = batch.run("brequeue", &["-d", "-H"]);
    assert_eq!(said(&out), (Some(0), format!("Job <{id}> is being requeued\n"), String::new()));
    batch.wait_status(job, "PSUSP");
    assert!(batch.run("bresume", &[&id]).status.success());
    batch.wait_status(job, "DONE");
}

// Goal: bmod, bswitch, btop and bbot change pending jobs with LSF's messages;
// only the owner or an administrator may, and a started job is refused.
#[test]
fn bmod_bswitch_btop_bbot_change_pending_jobs() {
    let batch = Batch::start();
    batch.allow_nobody();
    batch.reconfigure("lsb.queues", |queues| {
        format!("{queues}\nBegin Queue\nQUEUE_NAME = night\nPRIORITY = 10\nEnd Queue\n")
    });
    assert!(batch.run("badmin", &["hclose", "localhost"]).status.success());
    let jobs: Vec<u32> = (0..3).map(|_| batch.submit(&["sleep", "300"])).collect();
    let [first, second, third] = [jobs[0], jobs[1], jobs[2]];
    let out = batch.run("bmod", &["-J", "renamed", "-W", "10", "-M", "100000", &first.to_string()]);
    assert_eq!(
        said(&out),
        (Some(0), format!("Parameters of job <{first}> are being changed\n"), String::new())
    );
    let listing = batch.run("bjobs", &["-w", &first.to_string()]);
    assert!(text(&listing).contains(" renamed "), "{}", text(&listing));
    let out = batch.run_as_nobody("bmod", &["-Wn", &first.to_string()]);
    assert_eq!(said(&out), (Some(255), String::new(), format!("Job <{first}>: User permission denied\n")));
    let out = batch.run("bmod", &["-q", "nosuch", &first.to_string()]);
    assert_eq!(said(&out), (Some(255), String::new(), format!("Job <{first}>: nosuch: No such queue\n")));
    let out = batch.run("bmod", &["-W", "never", &first.to_string()]);
    assert_eq!(
        said(&out),
        (Some(255), String::new(), "never: Bad RUNLIMIT specification. Job not modified.\n".into())
    );
    let out = batch.run("bswitch", &["night", &second.to_string()]);
    assert_eq!(
        said(&out),
        (Some(0), format!("Job <{second}> is switched to queue <night>\n"), String::new())
    );
    let listing = batch.run("bjobs", &["-w", &second.to_string()]);
    assert!(text(&listing).contains(" night "), "{}", text(&listing));
    let out = batch.run("btop", &[&third.to_string()]);
    assert_eq!(
        said(&out),
        (Some(0), format!("Job <{third}> has been moved to position 1 from top.\n"), String::new())
    );
    let out = batch.run("bbot", &[&third.to_string(), "2"]);
    assert_eq!(
        said(&out),
        (Some(0), format!("Job <{third}> has been moved to position 2 from bottom.\n"), String::new())
    );
    let out = batch.run_as_nobody("btop", &[&third.to_string()]);
    assert_eq!(said(&out), (Some(255), String::new(), format!("Job <{third}>: User permission denied\n")));
    let out = batch.run("bswitch", &["normal", "999999"]);
    assert_eq!(said(&out), (Some(255), String::new(), "Job <999999>: No matching job found\n".into()));
    // bhist -l tells the changes (compared without blanks: -l wraps at 80 columns).
    let history =
        text(&batch.run("bhist", &["-l", &first.to_string(), &second.to_string(), &third.to_string()]));
    let packed: String = history.split_whitespace().collect();
    for told in [
        "Parameters of Job are changed by user or administrator <root>: Job name changes to : renamed;",
        "Switched to Queue <night> by user or administrator <root>;",
        "Job moved to position 1 relative to <top> by user or administrator <root>;",
    ] {
        assert!(packed.contains(&told.split_whitespace().collect::<String>()), "no {told:?} in:\n{history}");
    }
    // Started jobs: bmod and btop refuse.
    assert!(batch.run("badmin", &["hopen", "localhost"]).status.success());
    batch.wait_status(third, "RUN");
    let out = batch.run("bmod", &["-n", "2", &third.to_string()]);
    assert_eq!(said(&out), (Some(255), String::new(), format!("Job <{third}>: Job has already started\n")));
    let out = batch.run("btop", &[&third.to_string()]);
    assert_eq!(said(&out), (Some(255), String::new(), format!("Job <{third}>: Job has already started\n")));
    for job in jobs {
        batch.run("bkill", &[&job.to_string()]);
    }
}

// Goal: lsb.params MAX_JOB_NUM drives the switch of the event log (a snapshot, then
// pruning): no switch while fewer jobs finished, one once MAX_JOB_NUM did, with the
// value `badmin reconfig` put in force; mbatchd restarted (kill -9) from the switched
// log shows the same jobs in the same states.
// Method: etc/'s MAX_JOB_NUM 10000 (and the default --snapshot-events, far above the
// events of this test): one job done, no snapshot file; reconfig to MAX_JOB_NUM 2, a
// second job done, wait (bounded) for the snapshot file; `bjobs -a -u all` before and
// after the restart.
#[test]
fn max_job_num_switches_the_event_log() {
    let mut batch = Batch::start();
    let log_dir = batch.cluster.event_log_dir();
    let has_snapshot = || {
        fs::read_dir(&log_dir)
            .expect("the event log folder")
            .filter_map(Result::ok)
            .any(|entry| entry.file_name().to_string_lossy().contains("snap"))
    };
    let first = batch.submit(&["-o", "/dev/null", "true"]);
    batch.wait_all_finished(&[first]);
    assert!(!has_snapshot(), "no switch before MAX_JOB_NUM jobs finished");
    batch.reconfigure("lsb.params", |params| {
        let kept: Vec<&str> =
            params.lines().filter(|line| !line.trim_start().starts_with("MAX_JOB_NUM")).collect();
        kept.join("\n").replace("Begin Parameters", "Begin Parameters\nMAX_JOB_NUM = 2")
    });
    let second = batch.submit(&["-o", "/dev/null", "exit 3"]);
    batch.wait_all_finished(&[first, second]);
    wait_until("a snapshot file", JOB_TIMEOUT, || has_snapshot().then_some(()));
    let before = batch.all_jobs();
    assert!(before.contains(" DONE ") && before.contains(" EXIT "), "{before}");

    batch.mbatchd.take().expect("mbatchd runs").kill();
    batch.restart_mbatchd();
    assert_eq!(batch.all_jobs(), before, "the state replayed from the snapshot and the events after it");
    assert_eq!(batch.stat_and_exit_code(second), "EXIT 3");
}

// Goal: bhist tells a finished job's life from the event log, in the summary
// and -l layouts, also once mbatchd cleaned the job from memory; an unknown
// job is reported and fails.
#[test]
fn bhist_tells_finished_jobs_even_after_cleaning() {
    let batch = Batch::start();
    batch.reconfigure("lsb.params", |params| {
        let kept: Vec<&str> =
            params.lines().filter(|line| !line.trim_start().starts_with("CLEAN_PERIOD")).collect();
        kept.join("\n").replace("Begin Parameters", "Begin Parameters\nCLEAN_PERIOD = 1")
    });
    let done = batch.submit(&["true"]);
    let failed = batch.submit(&["exit 3"]);
    batch.wait_all_finished(&[done, failed]);
    wait_until("both jobs to be cleaned", JOB_TIMEOUT, || {
        let out = batch.run("bjobs", &[&done.to_string(), &failed.to_string()]);
        (text(&out).matches("is not found").count() == 2).then_some(())
    });
    let out = batch.run("bhist", &["-l", &done.to_string(), &failed.to_string()]);
    let long = text(&out);
    assert!(out.status.success(), "{long}");
    for line in [
        format!("Job <{done}>, User <root>, Project <default>, Command <true>"),
        ": Submitted from host <".to_owned(),
        ": Dispatched to <localhost>;".to_owned(),
        ": Starting (Pid ".to_owned(),
        ": Done successfully. The CPU time used is ".to_owned(),
        ": Exited with exit code 3. The CPU time used is ".to_owned(),
        "Summary of time in seconds spent in various states by ".to_owned(),
    ] {
        assert!(long.contains(&line), "no {line:?} in:\n{long}");
    }
    let out = batch.run("bhist", &["-a"]);
    let summary = text(&out);
    assert!(
        summary.starts_with(
            "Summary of time in seconds spent in various states:\nJOBID   USER    JOB_NAME  PEND"
        ),
        "{summary}"
    );
    assert!(summary.contains(&format!("\n{done:<7} root    true ")), "{summary}");
    // The default is unfinished jobs: none.
    let out = batch.run("bhist", &[]);
    assert_eq!(said(&out), (Some(255), String::new(), "No matching job found\n".into()));
    let out = batch.run("bhist", &["999999"]);
    assert_eq!(said(&out), (Some(255), String::new(), "Job <999999> is not found\n".into()));
}

// ---------------------------------------------------------------------------
// bsub's options end to end (issue 7): -K, the job's environment and files,
// -L and -E, limits, bad input, bpeek.
// ---------------------------------------------------------------------------

impl Batch {
    /// `bsub ARGS` with `script` on standard input.
    fn run_with_stdin(&self, program: &str, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .cluster
            .command(bin(program))
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start a command");
        child.stdin.take().expect("piped").write_all(stdin.as_bytes()).expect("write stdin");
        child.wait_with_output().expect("command output")
    }

    /// `bjobs -o "stat exit_code" -noheader ID`: the status and exit code.
    fn stat_and_exit_code(&self, job: u32) -> String {
        let out = self.run("bjobs", &["-a", "-o", "stat exit_code", "-noheader", &job.to_string()]);
        String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// Every job mbatchd knows, as `bjobs -a -u all` lists them.
    fn all_jobs(&self) -> String {
        text(&self.run("bjobs", &["-a", "-u", "all"]))
    }

    /// Waits until the file at `path` contains `want`; returns its text.
    fn wait_file_contains(&self, path: &Path, want: &str) -> String {
        wait_until(&format!("{} to contain {want:?}", path.display()), JOB_TIMEOUT, || {
            fs::read_to_string(path).ok().filter(|text| text.contains(want))
        })
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

// Goal: bsub -K prints LSF's three messages and exits with the job's exit
// code: 0 for a DONE job, 3 for a job that exits 3.
#[test]
fn bsub_k_waits_and_exits_with_the_jobs_exit_code() {
    let batch = Batch::start();
    let done = batch.run("bsub", &["-K", "exit 0"]);
    let job = submitted_id(&done);
    assert_eq!(done.status.code(), Some(0), "{}", text(&done));
    assert_eq!(
        String::from_utf8_lossy(&done.stderr),
        "<<Waiting for dispatch ...>>\n<<Starting on localhost>>\n<<Job is finished>>\n"
    );
    assert_eq!(batch.status(job), "DONE");
    let failed = batch.run("bsub", &["-K", "-q", "normal", "exit 3"]);
    let job = printed_id(&failed);
    assert_eq!(failed.status.code(), Some(3), "{}", text(&failed));
    assert!(String::from_utf8_lossy(&failed.stderr).ends_with("<<Job is finished>>\n"), "{}", text(&failed));
    assert_eq!(batch.stat_and_exit_code(job), "EXIT 3");
}

// Goal: interrupting a waiting bsub -K (Ctrl-C: SIGINT) kills its job, as LSF does.
#[test]
fn interrupting_bsub_k_kills_the_job() {
    use std::io::BufRead;
    use std::os::unix::process::ExitStatusExt;
    let batch = Batch::start();
    let mut waiting = batch
        .cluster
        .command(bin("bsub"))
        .args(["-K", "sleep 600"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start bsub -K");
    let mut line = String::new();
    std::io::BufReader::new(waiting.stdout.take().expect("piped")).read_line(&mut line).expect("read");
    let job = util::submitted_job_id(&line);
    batch.wait_status(job, "RUN");
    let kill = std::process::Command::new("kill").args(["-INT", &waiting.id().to_string()]).status();
    assert!(kill.expect("run kill").success());
    let status = waiting.wait().expect("bsub -K ends");
    assert_eq!(status.signal(), Some(2), "{status:?}");
    batch.wait_status(job, "EXIT");
}

// Goal: the job sees LSF's variables and the submission environment as -env
// selects it; %J and %I are substituted in -o, -e and -i; #BSUB lines in a
// script on standard input give options, the command line overriding them.
#[test]
fn the_job_environment_and_files_are_lsfs() {
    let batch = Batch::start();
    let dir = batch.dir();
    fs::write(dir.join("in.0"), "from-input\n").expect("write the input file");
    let script = format!(
        "#!/bin/sh\n#BSUB -J from-script\n#BSUB -q nosuch\n#BSUB -o {out}\n#BSUB -e {err}\n#BSUB -i {inp}\n\
         env | grep -E '^(LSB_|LS_SUBCWD|KEPT|DROPPED|SET_BY_ENV)' | sort\nread line; echo \"stdin=$line\"\n\
         echo to-stderr >&2\n",
        out = path_str(&dir.join("out.%J")),
        err = path_str(&dir.join("err.%J")),
        inp = path_str(&dir.join("in.%I")),
    );
    let out = batch
        .cluster
        .command(bin("bsub"))
        .args([
            "-q",
            "normal",
            "-P",
            "proj",
            "-cwd",
            path_str(dir),
            "-env",
            "all, ~DROPPED, SET_BY_ENV=v-$KEPT",
        ])
        .env("KEPT", "kept-value")
        .env("DROPPED", "dropped-value")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().expect("piped").write_all(script.as_bytes())?;
            child.wait_with_output()
        })
        .expect("bsub runs");
    let job = submitted_id(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("Job <{job}> is submitted to queue <normal>.\n")
    );
    batch.wait_status(job, "DONE");
    let written = fs::read_to_string(dir.join(format!("out.{job}"))).expect("the output file");
    for want in [
        format!("LSB_JOBID={job}\n"),
        "LSB_JOBNAME=from-script\n".to_owned(),
        "LSB_QUEUE=normal\n".to_owned(),
        "LSB_HOSTS=localhost\n".to_owned(),
        "LSB_MCPU_HOSTS=localhost 1\n".to_owned(),
        "LSB_JOBINDEX=0\n".to_owned(),
        "LSB_PROJECT_NAME=proj\n".to_owned(),
        format!("LS_SUBCWD={}\n", dir.display()),
        "KEPT=kept-value\n".to_owned(),
        "SET_BY_ENV=v-kept-value\n".to_owned(),
        "stdin=from-input\n".to_owned(),
    ] {
        assert!(written.contains(&want), "{want:?} missing from:\n{written}");
    }
    assert!(written.lines().any(|line| line.starts_with("LSB_SUB_HOST=") && line.len() > 13), "{written}");
    assert!(!written.contains("DROPPED"), "{written}");
    let errors = fs::read_to_string(dir.join(format!("err.{job}"))).expect("the error file");
    assert_eq!(errors, "to-stderr\n");
}

// Goal: a plain simple command, which sbatchd executes without a shell, behaves as it
// would through sh: its own pid in LSB_JOBPID, PWD the working directory, the job's
// PATH searched, and a missing command answered as sh answers it (exit 127).
#[test]
fn a_simple_command_runs_as_through_the_shell() {
    let batch = Batch::start();
    let dir = batch.dir();
    let out = dir.join("env.out");
    let job = batch.submit(&["-cwd", path_str(dir), "-o", path_str(&out), "env"]);
    batch.wait_status(job, "DONE");
    let written = fs::read_to_string(&out).expect("the output file");
    let value = |name: &str| written.lines().find_map(|line| line.strip_prefix(&format!("{name}=")));
    assert!(value("LSB_JOBPID").is_some_and(|pid| pid.parse::<u32>().is_ok_and(|pid| pid > 1)), "{written}");
    assert_eq!(value("PWD"), Some(path_str(dir)), "{written}");
    assert_eq!(written.lines().filter(|line| line.starts_with("LSB_JOBPID=")).count(), 1, "{written}");
    let missing_out = dir.join("missing.out");
    let missing = batch.submit(&["-o", path_str(&missing_out), "no-such-command-lavacore", "-x"]);
    batch.wait_status(missing, "EXIT");
    assert_eq!(batch.stat_and_exit_code(missing), "EXIT 127");
    let written = fs::read_to_string(&missing_out).expect("the output file");
    assert!(written.contains("sh: no-such-command-lavacore: not found\n"), "{written}");
}

// Goal: a job started through the shepherd zygote (which blocks SIGCHLD for its own
// loop) gets the signal state any process expects: nothing blocked, no ordinary signal
// ignored (SIGPIPE and SIGCHLD included), and only standard input, output and error
// open (no descriptor of the zygote, of sbatchd or of another job). Method: the job
// reads its own /proc status and fd folder. (glibc's two internal real-time signals,
// 32 and 33, may show as ignored: glibc's posix_spawn ignores them in the child it
// starts, and an ignored signal stays ignored across exec; so it was when sbatchd
// executed every shepherd, and they are not signals a job is sent.)
#[test]
fn a_job_starts_with_no_blocked_signals_and_no_stray_descriptors() {
    let batch = Batch::start();
    let out = batch.dir().join("status.out");
    let job = batch.submit(&["-o", path_str(&out), "cat /proc/self/status; ls /proc/self/fd"]);
    batch.wait_status(job, "DONE");
    let written = fs::read_to_string(&out).expect("the output file");
    let mask = |name: &str| written.lines().find_map(|line| line.strip_prefix(&format!("{name}:\t")));
    assert_eq!(mask("SigBlk"), Some("0000000000000000"), "{written}");
    let ignored = mask("SigIgn").and_then(|hex| u64::from_str_radix(hex, 16).ok()).expect("SigIgn");
    let glibc_internal = (1u64 << (32 - 1)) | (1u64 << (33 - 1));
    assert_eq!(ignored & !glibc_internal, 0, "{written}");
    // `ls` lists its own descriptors: 0, 1, 2 and the one it reads the folder with.
    let fds: Vec<&str> = written.lines().filter(|line| line.parse::<u32>().is_ok()).collect();
    assert_eq!(fds, ["0", "1", "2", "3"], "{written}");
}

// Goal: bsub -b confirms the begin time on standard error, as LSF's ctime.
#[test]
fn bsub_b_confirms_the_begin_time() {
    let batch = Batch::start();
    let out = batch
        .cluster
        .command(bin("bsub"))
        .args(["-b", "2030:1:1:00:00", "true"])
        .env("TZ", "UTC")
        .output()
        .expect("bsub runs");
    let job = submitted_id(&out);
    assert_eq!(
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (
            format!("Job <{job}> is submitted to default queue <normal>.\n"),
            "Job will be scheduled after Tue Jan  1 00:00:00 2030\n".to_owned()
        )
    );
}

// Goal: -L runs the job under that shell as a login shell; -E runs before the
// job as its user, in its directory; a pre-execution command that exits 99 ends
// the job EXIT 99 without running it (LSF's rule), its output in the job's file.
#[test]
fn login_shell_and_pre_execution_command() {
    let batch = Batch::start();
    let dir = batch.dir();
    let out_file = dir.join("login.out");
    let job = batch.submit(&[
        "-L",
        "/bin/bash",
        "-cwd",
        path_str(dir),
        "-E",
        "echo pre-$LSB_JOBID > pre.out",
        "-o",
        path_str(&out_file),
        "shopt -q login_shell && echo login-shell; cat pre.out",
    ]);
    batch.wait_status(job, "DONE");
    let written = fs::read_to_string(&out_file).expect("the output file");
    assert!(written.contains("login-shell\n"), "{written}");
    assert!(written.contains(&format!("pre-{job}\n")), "{written}");
    let marker = dir.join("should-not-exist");
    let failed_out = dir.join("failed.out");
    let job = batch.submit(&[
        "-E",
        "echo checking; exit 99",
        "-o",
        path_str(&failed_out),
        "touch",
        path_str(&marker),
    ]);
    batch.wait_status(job, "EXIT");
    assert_eq!(batch.stat_and_exit_code(job), "EXIT 99");
    assert!(!marker.exists(), "the job ran although its pre-execution command failed");
    let written = fs::read_to_string(&failed_out).expect("the output file");
    assert_eq!(written, "checking\n");
}

// Goal: a pre-execution command that exits non-zero sends the job back to PEND with
// LSF's pending reason, and it is dispatched again, up to LOCAL_MAX_PREEXEC_RETRY
// attempts; then (LSF's default action, SUSPEND) it is held in PSUSP and never ran;
// bhist shows each requeue. With LOCAL_MAX_PREEXEC_RETRY_ACTION=EXIT in the queue the
// job ends EXIT with the pre-exec's exit code instead.
#[test]
fn a_failing_pre_exec_requeues_the_job_up_to_the_retry_limit() {
    let batch = Batch::start();
    batch.reconfigure("lsb.params", |text| {
        text.replace("End Parameters", "LOCAL_MAX_PREEXEC_RETRY = 3\nEnd Parameters")
    });
    let dir = batch.dir();
    let attempts = dir.join("attempts");
    let marker = dir.join("ran");
    let pre = format!("echo $LSB_JOBID >> {}; exit 4", attempts.display());
    let job = batch.submit(&["-E", &pre, "touch", path_str(&marker)]);
    batch.wait_status(job, "PSUSP");
    let tries = fs::read_to_string(&attempts).expect("the attempts file");
    assert_eq!(tries, format!("{job}\n{job}\n{job}\n"), "three attempts, then held");
    assert!(!marker.exists(), "the job ran although its pre-execution command failed");
    let long = text(&batch.run("bjobs", &["-l", &job.to_string()]));
    assert!(long.contains("The job's pre-exec command exited with non-zero status"), "{long}");
    // bjobs -l and bhist -l wrap their lines at 79 columns (21-blank continuations).
    let unwrap = |text: String| text.replace(&format!("\n{}", " ".repeat(21)), "");
    assert!(unwrap(long.clone()).contains(&format!("Pre-execute Command <{pre}>")), "{long}");
    let history = unwrap(text(&batch.run("bhist", &["-l", &job.to_string()])));
    let requeues =
        history.matches("Pending: The job's pre-exec command exited with non-zero status;").count();
    assert_eq!(requeues, 2, "{history}");
    assert!(history.contains("Suspended: The job's pre-exec command exited with non-zero"), "{history}");

    batch.reconfigure("lsb.queues", |text| {
        text.replacen(
            "QUEUE_NAME   = normal\n",
            "QUEUE_NAME   = normal\nLOCAL_MAX_PREEXEC_RETRY_ACTION = EXIT\n",
            1,
        )
    });
    let job = batch.submit(&["-E", "exit 6", "true"]);
    batch.wait_status(job, "EXIT");
    assert_eq!(batch.stat_and_exit_code(job), "EXIT 6");
}

// Goal: the queue's PRE_EXEC, the job's -E, the job, its -Ep and the queue's POST_EXEC
// run in LSF's order, each as the job's user (nobody here); the post-execution commands
// see LSB_JOBEXIT_STAT (the job's wait status); a failing post-execution command leaves
// the job's own end (DONE, or EXIT with the job's code); bqueues -l shows the queue's
// commands and bjobs -o the job's.
#[test]
fn hooks_run_in_lsf_order_as_the_user() {
    let batch = Batch::start();
    batch.allow_nobody();
    let shared = batch.dir().join("shared");
    fs::create_dir_all(&shared).expect("create a shared folder");
    chmod(&shared, 0o777);
    let trace = shared.join("trace");
    let step = |name: &str| {
        format!("echo {name} $(id -un) $LSB_JOBID ${{LSB_JOBEXIT_STAT:--}} >> {}", trace.display())
    };
    let (qpre, qpost) = (step("qpre"), format!("{}; exit 1", step("qpost")));
    batch.reconfigure("lsb.queues", |text| {
        text.replacen(
            "QUEUE_NAME   = normal\n",
            &format!("QUEUE_NAME   = normal\nPRE_EXEC = {qpre}\nPOST_EXEC = {qpost}\n"),
            1,
        )
    });
    let queues = text(&batch.run("bqueues", &["-l", "normal"]));
    assert!(queues.contains(&format!("PRE_EXEC:  {qpre}\nPOST_EXEC:  {qpost}\n")), "{queues}");

    let submit = |code: u32| {
        let job_cmd = format!("{}; exit {code}", step("job"));
        let out = batch.run_as_nobody(
            "bsub",
            &["-o", "/dev/null", "-E", &step("pre"), "-Ep", &format!("{}; exit 2", step("post")), &job_cmd],
        );
        submitted_id(&out)
    };
    let done = submit(0);
    batch.wait_status(done, "DONE");
    let failed = submit(3);
    batch.wait_status(failed, "EXIT");
    assert_eq!(batch.stat_and_exit_code(failed), "EXIT 3");
    let fields =
        text(&batch.run("bjobs", &["-a", "-noheader", "-o", "post_exec_command", &done.to_string()]));
    assert_eq!(fields.trim(), format!("{}; exit 2", step("post")));
    let want: String = [(done, 0), (failed, 768)]
        .iter()
        .map(|(job, status)| {
            format!(
                "qpre nobody {job} -\npre nobody {job} -\njob nobody {job} -\n\
                 post nobody {job} {status}\nqpost nobody {job} {status}\n"
            )
        })
        .collect();
    let seen = wait_until("the post-execution commands of both jobs", JOB_TIMEOUT, || {
        fs::read_to_string(&trace).ok().filter(|text| text.lines().count() >= 10)
    });
    assert_eq!(seen, want);
}

// Goal: bad pre- and post-execution settings are refused where they are written:
// an empty -E or -Ep by bsub (LSF's message, exit 255, nothing submitted), a bad
// LOCAL_MAX_PREEXEC_RETRY_ACTION or LOCAL_MAX_PREEXEC_RETRY by badmin ckconfig naming
// the file and line.
#[test]
fn bad_hook_settings_are_refused() {
    let batch = Batch::start();
    for (option, message) in [("-E", "Bad pre-execution command"), ("-Ep", "Bad post-execution command")] {
        let out = batch.run("bsub", &[option, " ", "true"]);
        assert_eq!(out.status.code(), Some(255), "{}", text(&out));
        assert!(text(&out).contains(&format!(" : {message}. Job not submitted.")), "{}", text(&out));
    }
    let configdir = batch.cluster.envdir().join("lsbatch/lavacore/configdir");
    for (file, section_end, line, problem) in [
        (
            "lsb.queues",
            "QUEUE_NAME   = normal\n",
            "LOCAL_MAX_PREEXEC_RETRY_ACTION = RETRY",
            "`LOCAL_MAX_PREEXEC_RETRY_ACTION`: bad value `RETRY`, expected `SUSPEND` or `EXIT`",
        ),
        (
            "lsb.params",
            "Begin Parameters\n",
            "LOCAL_MAX_PREEXEC_RETRY = 0",
            "`LOCAL_MAX_PREEXEC_RETRY`: bad number `0`, expected a whole number from 1 to 2147483646",
        ),
    ] {
        let path = configdir.join(file);
        let original = fs::read_to_string(&path).expect("read the file");
        let edited = original.replacen(section_end, &format!("{section_end}{line}\n"), 1);
        let number = edited.lines().position(|l| l == line).expect("the line") + 1;
        fs::write(&path, edited).expect("write the file");
        let out = batch.run("badmin", &["ckconfig"]);
        assert_eq!(out.status.code(), Some(255), "{}", text(&out));
        let at = format!("{}:{number}: {problem}", path.display());
        assert!(text(&out).contains(&at), "{}", text(&out));
        fs::write(&path, original).expect("restore the file");
    }
}

// Goal: sbatchd enforces -M on the resident memory of the job's process group
// and -W on its run time: each job ends EXIT, killed by LSF's signal sequence,
// and bjobs -l shows LSF's termination reason.
#[test]
fn jobs_over_their_memory_or_run_limit_end_exit() {
    let batch = Batch::start();
    // 100 MB resident in a child of the job's shell, against a 20 MB limit (the shipped
    // lsf.conf's LSF_UNIT_FOR_LIMITS=MB).
    let memory = batch.submit(&["-M", "20", "perl -e '$x = \"a\" x 100_000_000; sleep 300'; true"]);
    let run_time = batch.submit(&["-W", "1", "sleep 600"]);
    batch.wait_status(memory, "EXIT");
    batch.wait_status(run_time, "EXIT");
    let memory_end = batch.stat_and_exit_code(memory);
    let run_end = batch.stat_and_exit_code(run_time);
    assert!(memory_end.starts_with("EXIT ") && memory_end != "EXIT 0", "{memory_end}");
    assert!(run_end.starts_with("EXIT ") && run_end != "EXIT 0", "{run_end}");
    // bjobs -l wraps at 80 columns: compare without blanks.
    let squeezed = |job: u32| -> String {
        text(&batch.run("bjobs", &["-l", &job.to_string()])).chars().filter(|c| !c.is_whitespace()).collect()
    };
    let memory_long = squeezed(memory);
    assert!(
        memory_long.contains("Completed<exit>;TERM_MEMLIMIT:jobkilledafterreachingLSFmemoryusagelimit."),
        "{memory_long}"
    );
    let run_long = squeezed(run_time);
    assert!(
        run_long.contains("Completed<exit>;TERM_RUNLIMIT:jobkilledafterreachingLSFruntimelimit."),
        "{run_long}"
    );
}

// Goal: a queue's NICE, resource limits and job starter hold its jobs on the real daemons:
// the job's process runs at the queue's niceness with the per-process limits the shepherd
// set (CPU time, file, core, stack and data sizes, in LSF_UNIT_FOR_LIMITS); a process
// writing over FILELIMIT dies of SIGXFSZ; a job over a whole-job limit (virtual memory,
// processes, threads) is killed by sbatchd and ends EXIT with LSF's reason; a command and a
// script each run through JOB_STARTER; bqueues -l shows them.
#[test]
fn queue_settings_hold_the_jobs() {
    let cluster = Cluster::new();
    cluster.write_file(
        "etc/lsbatch/lavacore/configdir/lsb.queues",
        "Begin Queue\nQUEUE_NAME = normal\nPRIORITY = 30\nEnd Queue\n\
         Begin Queue\nQUEUE_NAME = held\nPRIORITY = 30\nNICE = 5\nCPULIMIT = 1\nFILELIMIT = 2\n\
         CORELIMIT = 0\nSTACKLIMIT = 16\nDATALIMIT = 1024\nEnd Queue\n\
         Begin Queue\nQUEUE_NAME = vmem\nPRIORITY = 30\nSWAPLIMIT = 1\nEnd Queue\n\
         Begin Queue\nQUEUE_NAME = procs\nPRIORITY = 30\nPROCESSLIMIT = 2\nEnd Queue\n\
         Begin Queue\nQUEUE_NAME = threads\nPRIORITY = 30\nTHREADLIMIT = 2\nEnd Queue\n\
         Begin Queue\nQUEUE_NAME = started\nPRIORITY = 30\n\
         JOB_STARTER = /bin/sh -c \"echo starter $LSB_JOBID; %USRCMD\"\nEnd Queue\n",
    );
    let batch = Batch::start_in(cluster);
    let out = batch.dir().join("limits.out");
    let out_arg = out.to_str().expect("a UTF-8 path");
    let held =
        batch.submit(&["-q", "held", "-o", out_arg, "cat /proc/self/limits; cut -d' ' -f19 /proc/self/stat"]);
    let big = batch.dir().join("big");
    let write = format!("dd if=/dev/zero of={} bs=1M count=4", big.display());
    let too_big = batch.submit(&["-q", "held", "-o", "/dev/null", &write]);
    let two = "sleep 300 & sleep 300 & wait";
    let vmem = batch.submit(&["-q", "vmem", "-o", "/dev/null", "sleep 300"]);
    let procs = batch.submit(&["-q", "procs", "-o", "/dev/null", two]);
    let threads = batch.submit(&["-q", "threads", "-o", "/dev/null", two]);
    let started_out = batch.dir().join("started.out");
    let started_arg = started_out.to_str().expect("a UTF-8 path");
    let command = batch.submit(&["-q", "started", "-o", started_arg, "echo command"]);
    let script = submitted_id(&batch.run_with_stdin(
        "bsub",
        &["-q", "started", "-o", started_arg],
        "#!/bin/sh\necho script line 1\necho script line 2\n",
    ));
    // A job's own limits (bsub -c -F -C -p): the shepherd sets them; beyond the queue's
    // maximum they are refused.
    let own_out = batch.dir().join("own.out");
    let own_arg = own_out.to_str().expect("a UTF-8 path");
    let own =
        batch.submit(&["-c", "2", "-F", "1", "-C", "0", "-p", "5", "-o", own_arg, "cat /proc/self/limits"]);
    let refused = batch.run("bsub", &["-q", "held", "-c", "5", "true"]);
    assert_eq!(refused.status.code(), Some(255), "{}", text(&refused));
    assert!(
        text(&refused).contains("Cannot exceed queue's hard limit(s). Job not submitted."),
        "{}",
        text(&refused)
    );
    let ended = batch.wait_all_finished(&[held, too_big, vmem, procs, threads, command, script, own]);
    let own_seen = fs::read_to_string(&own_out).expect("the job's output");
    let own_limit = |name: &str| -> Vec<String> {
        let line = own_seen
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("{name}: {own_seen}"));
        line[name.len()..].split_whitespace().take(2).map(str::to_owned).collect()
    };
    assert_eq!(own_limit("Max cpu time")[0], "120", "{own_seen}");
    assert_eq!(own_limit("Max file size"), ["1048576", "1048576"], "{own_seen}");
    assert_eq!(own_limit("Max core file size"), ["0", "0"], "{own_seen}");
    let long: String =
        text(&batch.run("bjobs", &["-l", &own.to_string()])).chars().filter(|c| !c.is_whitespace()).collect();
    assert!(long.contains("CPULIMIT2.0min"), "{long}");
    assert!(long.contains("FILELIMITCORELIMITPROCESSLIMIT1M0K5"), "{long}");
    assert_eq!((ended[&command].as_str(), ended[&script].as_str()), ("DONE", "DONE"), "{ended:?}");
    let through = fs::read_to_string(&started_out).expect("the started jobs' output");
    let job_lines = |job: u32, lines: &[&str]| {
        let start = format!("starter {job}\n");
        let at = through.find(&start).unwrap_or_else(|| panic!("job {job}: {through}"));
        let after = &through[at + start.len()..];
        lines.iter().all(|line| after.lines().any(|seen| seen == *line))
    };
    assert!(job_lines(command, &["command"]), "{through}");
    assert!(job_lines(script, &["script line 1", "script line 2"]), "{through}");
    assert_eq!(ended[&held], "DONE", "{ended:?}");
    let seen = fs::read_to_string(&out).expect("the job's output");
    let limit = |name: &str| -> Vec<String> {
        let line =
            seen.lines().find(|line| line.starts_with(name)).unwrap_or_else(|| panic!("{name}: {seen}"));
        line[name.len()..].split_whitespace().take(2).map(str::to_owned).collect()
    };
    assert_eq!(limit("Max cpu time")[0], "60", "{seen}");
    assert_eq!(limit("Max file size"), ["2097152", "2097152"], "{seen}");
    assert_eq!(limit("Max core file size"), ["0", "0"], "{seen}");
    assert_eq!(limit("Max stack size"), ["16777216", "16777216"], "{seen}");
    assert_eq!(limit("Max data size"), ["1073741824", "1073741824"], "{seen}");
    assert_eq!(seen.lines().last(), Some("5"), "the niceness: {seen}");
    // SIGXFSZ (25) ended dd at 2 MB: exit code 128 + 25.
    assert_eq!(batch.stat_and_exit_code(too_big), "EXIT 153");
    assert_eq!(fs::metadata(&big).expect("dd's file").len(), 2 << 20);
    let squeezed = |job: u32| -> String {
        text(&batch.run("bjobs", &["-l", &job.to_string()])).chars().filter(|c| !c.is_whitespace()).collect()
    };
    for (job, reason) in [
        (vmem, "TERM_SWAP:jobkilledafterreachingLSFswapusagelimit."),
        (procs, "TERM_PROCESSLIMIT:jobkilledafterreachingLSFprocesslimit."),
        (threads, "TERM_THREADLIMIT:jobkilledafterreachingLSFthreadlimit."),
    ] {
        assert_eq!(ended[&job], "EXIT", "{ended:?}");
        let long = squeezed(job);
        assert!(long.contains(&format!("Completed<exit>;{reason}")), "{long}");
    }
    let queue = text(&batch.run("bqueues", &["-l", "held"]));
    assert!(queue.contains("\n CPULIMIT\n 1.0 min\n"), "{queue}");
    assert!(
        queue.contains(
            "\n FILELIMIT DATALIMIT STACKLIMIT CORELIMIT\n    2 M       1 G      16 M        0 K\n"
        ),
        "{queue}"
    );
    assert!(queue.contains("PRIO NICE"), "{queue}");
    let started = text(&batch.run("bqueues", &["-l", "started"]));
    assert!(started.contains("JOB_STARTER:  /bin/sh -c \"echo starter $LSB_JOBID; %USRCMD\"\n"), "{started}");
}

// Goal: bad values and options are refused with LSF's messages and exit 255,
// and nothing is submitted.
#[test]
fn bad_bsub_input_is_refused_and_submits_nothing() {
    let batch = Batch::start();
    let refused = |args: &[&str], stdin: &str, want: &str| {
        let out = batch.run_with_stdin("bsub", args, stdin);
        assert_eq!(out.status.code(), Some(255), "{args:?}: {}", text(&out));
        assert!(String::from_utf8_lossy(&out.stderr).starts_with(want), "{args:?}: {}", text(&out));
        assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out));
    };
    refused(&["-b", "24:00", "true"], "", "24:00: Bad time specification. Job not submitted.\n");
    refused(&["-b", "2:30:08:00", "true"], "", "2:30:08:00: Bad time specification. Job not submitted.\n");
    refused(&["-W", "1:xx", "true"], "", "1:xx: Bad RUNLIMIT specification. Job not submitted.\n");
    refused(&["-M", "lots", "true"], "", "lots: Bad MEMLIMIT specification. Job not submitted.\n");
    refused(
        &["-L", "bash", "true"],
        "",
        "bash: The login shell must be an absolute path. Job not submitted.\n",
    );
    refused(&["-env", "none, X", "true"], "", "none, X: Bad -env specification");
    refused(&["-Z", "true"], "", "bsub: illegal option -- Z\nUsage: bsub");
    refused(&["-I", "-K", "true"], "", "-K and -I, -Ip, -Is cannot be used together. Job not submitted.\n");
    refused(
        &["-K", "-J", "arr[1-2]", "true"],
        "",
        "Job array doesn't support -K option. Job not submitted.\n",
    );
    refused(&[], "#!/bin/sh\n#BSUB -Z\ntrue\n", "bsub: illegal option -- Z (#BSUB line 2)\nUsage: bsub");
    refused(&[], "#BSUB -W soon\ntrue\n", "soon: Bad RUNLIMIT specification. Job not submitted.\n");
    let listing = batch.all_jobs();
    assert_eq!(listing, "No job found\n", "{listing}");
}

// Goal: bpeek shows what a running job has written so far, read here or relayed
// by mbatchd from the execution host (bounded answers, in order); -f follows it
// until the job ends; a finished or unknown job gets LSF's message.
#[test]
fn bpeek_shows_a_running_jobs_output() {
    let batch = Batch::start();
    let dir = batch.dir();
    let out_file = dir.join("peek.%J");
    let gate = dir.join("gate");
    let job = batch.submit(&[
        "-o",
        path_str(&out_file),
        &format!("echo first-line; while [ ! -e {} ]; do sleep 0.2; done; echo second-line", path_str(&gate)),
    ]);
    batch.wait_status(job, "RUN");
    batch.wait_file_contains(&dir.join(format!("peek.{job}")), "first-line");
    let out = batch.run("bpeek", &[&job.to_string()]);
    assert_eq!(
        (out.status.code(), text(&out)),
        (Some(0), "<< output from stdout >>\nfirst-line\n".to_owned())
    );
    // The same through mbatchd's relay to the execution host's sbatchd (PEEK_JOB, SBD_PEEK),
    // which bpeek uses for a job on another host whose files are not shared.
    let remote = |args: &[&str]| {
        batch
            .cluster
            .command(bin("bpeek"))
            .args(args)
            .env("LSB_BPEEK_REMOTE_OUTPUT", "y")
            .output()
            .expect("bpeek")
    };
    let out = remote(&[&job.to_string()]);
    assert_eq!(
        (out.status.code(), text(&out)),
        (Some(0), "<< output from stdout >>\nfirst-line\n".to_owned())
    );
    let out = remote(&["99999"]);
    assert_eq!((out.status.code(), text(&out)), (Some(255), "Job <99999> is not found\n".to_owned()));
    // Two followers, reading here and through the relay; the gate opens once both
    // have shown the first line (so the job is surely still running when they start).
    let follow = |remote: bool| {
        use std::io::BufRead;
        let mut command = batch.cluster.command(bin("bpeek"));
        if remote {
            command.env("LSB_BPEEK_REMOTE_OUTPUT", "y");
        }
        let mut child = command
            .args(["-f", &job.to_string()])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start bpeek -f");
        let mut reader = std::io::BufReader::new(child.stdout.take().expect("piped"));
        let mut seen = String::new();
        while !seen.ends_with("first-line\n") {
            assert!(reader.read_line(&mut seen).expect("read bpeek -f") > 0, "bpeek -f ended early: {seen}");
        }
        (child, reader, seen)
    };
    let followers = [follow(false), follow(true)];
    fs::write(&gate, "").expect("open the gate");
    for (mut child, mut reader, mut seen) in followers {
        use std::io::Read;
        reader.read_to_string(&mut seen).expect("read bpeek -f");
        assert!(child.wait().expect("bpeek -f ends with the job").success(), "{seen}");
        assert_eq!(seen, "<< output from stdout >>\nfirst-line\nsecond-line\n");
    }
    batch.wait_status(job, "DONE");
    let out = batch.run("bpeek", &[&job.to_string()]);
    assert_eq!((out.status.code(), text(&out)), (Some(255), format!("Job <{job}> : Not a running job\n")));
    let out = remote(&[&job.to_string()]);
    assert_eq!((out.status.code(), text(&out)), (Some(255), format!("Job <{job}> : Not a running job\n")));
    let out = batch.run("bpeek", &["99999"]);
    assert_eq!((out.status.code(), text(&out)), (Some(255), "Job <99999> is not found\n".to_owned()));
    // A long output comes through the relay in several bounded answers, in order.
    let long_out = dir.join("long.out");
    let long = batch.submit(&[
        "-o",
        path_str(&long_out),
        &format!("seq 1 200000; while [ ! -e {} ]; do sleep 0.2; done", path_str(&dir.join("gate2"))),
    ]);
    batch.wait_status(long, "RUN");
    batch.wait_file_contains(&long_out, "\n200000\n");
    let out = remote(&[&long.to_string()]);
    let expected: String = (1..=200_000).map(|n| format!("{n}\n")).collect();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stdout) == format!("<< output from stdout >>\n{expected}"),
        "the relayed output differs ({} bytes)",
        out.stdout.len()
    );
    fs::write(dir.join("gate2"), "").expect("open the second gate");
    batch.wait_status(long, "DONE");
}

// Goal: an sbatchd installed without its job shepherd refuses to start and says
// where it looked, instead of refusing every job it is sent.
// Method: copy the sbatchd binary alone into an empty folder and start it there.
#[test]
fn sbatchd_without_its_shepherd_refuses_to_start() {
    let mut cluster = Cluster::new();
    let lonely = cluster.dir().join("lonely");
    fs::create_dir_all(&lonely).expect("create the folder");
    let sbatchd = lonely.join("sbatchd");
    fs::copy(util::mbatchd_bin().with_file_name("sbatchd"), &sbatchd).expect("copy sbatchd");
    let host = cluster.hosts()[0].clone();
    let mut daemon = cluster.spawn("sbatchd", &sbatchd, &["--host".as_ref(), host.as_ref()]);
    let status = daemon.wait_exit(Duration::from_secs(20));
    assert!(!status.success(), "sbatchd started without its shepherd");
    let expected = format!("the job shepherd {} is missing", lonely.join("lava-shepherd").display());
    assert!(daemon.log().contains(&expected), "{}", daemon.log());
}

// Goal: bkill's LSF selectors: `-J name` without a job id ends the most recent
// job of that name, `-J name 0` every one, `-q queue 0` every job of the queue;
// a selector that matches nothing says so and fails; job ids beside a selector
// ignore it.
#[test]
fn bkill_selects_jobs_by_name_and_queue() {
    let batch = Batch::start();
    let held = |name: &str| batch.submit(&["-H", "-J", name, "sleep", "300"]);
    let (first, second, other) = (held("sel"), held("sel"), held("other"));
    let out = batch.run("bkill", &["-J", "sel"]);
    assert_eq!(said(&out), (Some(0), format!("Job <{second}> is being terminated\n"), String::new()));
    batch.wait_status(second, "EXIT");
    assert_eq!((batch.status(first), batch.status(other)), ("PSUSP".to_owned(), "PSUSP".to_owned()));
    let out = batch.run("bkill", &["-J", "sel", "0"]);
    assert_eq!(said(&out), (Some(0), format!("Job <{first}> is being terminated\n"), String::new()));
    let out = batch.run("bkill", &["-J", "sel", "0"]);
    assert_eq!(said(&out), (Some(255), String::new(), "No unfinished job found\n".to_owned()));
    let out = batch.run("bkill", &["-J", "nosuch", &other.to_string()]);
    assert_eq!(said(&out).0, Some(0), "a job id ignores -J");
    batch.wait_status(other, "EXIT");
    let last = held("q");
    let out = batch.run("bkill", &["-q", "normal", "0"]);
    assert_eq!(said(&out), (Some(0), format!("Job <{last}> is being terminated\n"), String::new()));
}

// Goal: a FAIRSHARE queue dispatches by the users' shares, not by arrival:
// with one slot, nobody (3 shares) goes before root (1 share) although root's
// jobs came first, and after each of its jobs ends the next is chosen again by
// shares over started slots.
#[test]
fn fairshare_dispatches_by_shares_not_arrival() {
    let cluster = Cluster::new();
    cluster.write_file(
        "etc/lsbatch/lavacore/configdir/lsb.hosts",
        "Begin Host\nHOST_NAME  MXJ  JL/U  r1m\ndefault    1    ()    ()\nEnd Host\n",
    );
    let queues = cluster.envdir().join("lsbatch/lavacore/configdir/lsb.queues");
    let config = fs::read_to_string(&queues).expect("read lsb.queues").replacen(
        "# FAIRSHARE  = USER_SHARES[[alice, 3] [default, 1]]",
        "FAIRSHARE  = USER_SHARES[[nobody, 3] [root, 1]]",
        1,
    );
    assert!(config.contains("FAIRSHARE  = USER_SHARES[[nobody, 3]"), "etc's lsb.queues changed");
    fs::write(&queues, config).expect("write lsb.queues");
    let batch = Batch::start_in(cluster);
    batch.allow_nobody();
    assert!(batch.run("badmin", &["hclose", "localhost"]).status.success());
    let (a, b) = (batch.submit(&["sleep", "300"]), batch.submit(&["sleep", "300"]));
    // nobody's jobs need a place to write their output.
    let shared = batch.dir().join("shared");
    fs::create_dir_all(&shared).expect("create a shared folder");
    chmod(&shared, 0o777);
    let out = shared.join("%J.out");
    let out = out.to_str().expect("utf-8");
    let as_nobody = || submitted_id(&batch.run_as_nobody("bsub", &["-o", out, "sleep", "300"]));
    let (c, d) = (as_nobody(), as_nobody());
    assert!(batch.run("badmin", &["hopen", "localhost"]).status.success());
    for (job, waiting) in [(c, [a, b, d]), (d, [a, b, b]), (a, [b, b, b])] {
        batch.wait_status(job, "RUN");
        for other in waiting {
            assert_eq!(batch.status(other), "PEND", "job {other} started before {job}");
        }
        assert!(batch.run("bkill", &[&job.to_string()]).status.success());
        batch.wait_status(job, "EXIT");
    }
    batch.wait_status(b, "RUN");
}
