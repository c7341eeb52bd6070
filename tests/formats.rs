//! What the query commands print, end to end: the real `mbatchd`, `sbatchd`
//! and commands (`bsub`, `bjobs`, `bkill`, `bqueues`, `bhosts`) on loopback,
//! in a throw-away cluster folder per test (see `util`).
//!
//! The byte-exact layouts are pinned by the pure tests of `bins/commands`
//! (`format/`, `bhosts.rs`, `bqueues.rs`); these tests check that what the
//! daemons report reaches those layouts: the loop a workflow tool runs
//! (Snakemake's, Nextflow's or dask-jobqueue's LSF executors: submit a script
//! on standard input, read the id from `Job <N> is submitted`, poll
//! `bjobs -o "jobid stat exit_code" -noheader`, cancel with `bkill`), counts
//! that agree between `bjobs`, `bqueues` and `bhosts`, the long formats, and
//! the refusals of bad requests.

mod util;

use std::io::Write;
use std::process::{Output, Stdio};
use std::time::Duration;

use util::{Cluster, Daemon, wait_until};

/// Longest a job in these tests may take to reach a state (debug build, busy machine).
const JOB_TIMEOUT: Duration = Duration::from_secs(120);

/// A one-host cluster with mbatchd and sbatchd running.
struct Batch {
    cluster: Cluster,
    _daemons: [Daemon; 2],
}

impl Batch {
    fn start() -> Batch {
        let mut cluster = Cluster::new();
        let mbatchd = cluster.start_mbatchd();
        let sbatchd = cluster.start_sbatchd("localhost");
        Batch { cluster, _daemons: [mbatchd, sbatchd] }
    }

    /// Runs a command of the suite with `stdin` as its standard input.
    fn run_with_input(&self, program: &str, args: &[&str], stdin: &str) -> Output {
        let mut child = self
            .cluster
            .command(util::mbatchd_bin().with_file_name(program))
            .args(args)
            .current_dir(self.cluster.dir())
            .env("TZ", "UTC0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a command");
        child.stdin.take().expect("a pipe").write_all(stdin.as_bytes()).expect("write standard input");
        child.wait_with_output().expect("run a command")
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        self.run_with_input(program, args, "")
    }

    /// `bsub < script`, as a workflow tool does it; returns the id parsed from
    /// LSF's `Job <N> is submitted ...` line.
    fn submit_script(&self, script: &str) -> u32 {
        submitted_id(&self.run_with_input("bsub", &[], script))
    }

    /// The poll of a workflow tool: `bjobs -o "jobid stat exit_code" -noheader ID`.
    fn poll(&self, job: u32) -> String {
        let out = self.run("bjobs", &["-o", "jobid stat exit_code", "-noheader", &job.to_string()]);
        assert!(out.status.success(), "bjobs failed: {}", text(&out));
        stdout(&out).trim_end().to_owned()
    }

    /// Polls until the job's STAT is one of `states`; returns the whole line.
    fn wait_for(&self, job: u32, states: &[&str]) -> String {
        let mut last = String::new();
        wait_until(&format!("job {job} to reach {states:?}"), JOB_TIMEOUT, || {
            last = self.poll(job);
            states.contains(&last.split_whitespace().nth(1).unwrap_or_default()).then(|| last.clone())
        })
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn text(out: &Output) -> String {
    format!("{}{}", stdout(out), String::from_utf8_lossy(&out.stderr))
}

fn submitted_id(out: &Output) -> u32 {
    assert!(out.status.success(), "bsub failed: {}", text(out));
    util::submitted_job_id(&stdout(out))
}

// Goal: the loop of a workflow tool works unchanged: a script on standard
// input with #BSUB lines, the id parsed from bsub's line, `bjobs -o "jobid
// stat exit_code" -noheader` polled until DONE or EXIT (with `-` for the exit
// code of a DONE job and the code of an EXIT one), `bkill` of a running job
// seen as EXIT with LSF's TERM_OWNER reason in `-o ... -json`.
#[test]
fn workflow_tool_loop_submits_polls_and_cancels() {
    let batch = Batch::start();
    let ok = batch.submit_script("#!/bin/sh\n#BSUB -J wf_ok\n#BSUB -o /dev/null\necho hello\n");
    assert_eq!(batch.wait_for(ok, &["DONE", "EXIT"]), format!("{ok} DONE -"));
    let failing = batch.submit_script("#BSUB -J wf_fail\n#BSUB -o /dev/null\nexit 3\n");
    assert_eq!(batch.wait_for(failing, &["DONE", "EXIT"]), format!("{failing} EXIT 3"));

    // RUN is mbatchd's dispatch; the kill is meant for a job whose process runs (a job
    // killed while it is still being launched ends without LSF's kill reason).
    let running = batch.cluster.dir().join("wf_long.running");
    let long = batch.submit_script(&format!(
        "#BSUB -J wf_long\n#BSUB -o /dev/null\ntouch {}\nsleep 300\n",
        running.display()
    ));
    batch.wait_for(long, &["RUN"]);
    wait_until("the job's process to run", Duration::from_secs(60), || running.exists().then_some(()));
    let out = batch.run("bkill", &[&long.to_string()]);
    assert_eq!(stdout(&out), format!("Job <{long}> is being terminated\n"), "{}", text(&out));
    let line = batch.wait_for(long, &["DONE", "EXIT"]);
    assert!(line.starts_with(&format!("{long} EXIT ")), "{line}");

    let out = batch.run("bjobs", &["-o", "jobid job_name stat exit_reason", "-json", &long.to_string()]);
    assert_eq!(
        stdout(&out),
        format!(
            "{{\n  \"COMMAND\":\"bjobs\",\n  \"JOBS\":1,\n  \"RECORDS\":[\n    {{\n      \"JOBID\":\"{long}\",\n      \
             \"JOB_NAME\":\"wf_long\",\n      \"STAT\":\"EXIT\",\n      \
             \"EXIT_REASON\":\"TERM_OWNER: job killed by owner\"\n    }}\n  ]\n}}\n"
        ),
        "{}",
        text(&out)
    );
}

// Goal: the counts agree: a running job and a held one are RUN and PSUSP in
// bjobs, NJOBS 2 / PEND 1 / RUN 1 in bqueues (PSUSP is pending, as in LSF),
// and one running slot on the host in bhosts; the long formats show them.
#[test]
fn bjobs_bqueues_and_bhosts_count_the_same_jobs() {
    let batch = Batch::start();
    let running = submitted_id(&batch.run("bsub", &["-o", "/dev/null", "sleep", "300"]));
    batch.wait_for(running, &["RUN"]);
    let held = submitted_id(&batch.run("bsub", &["-H", "-J", "held", "-o", "/dev/null", "true"]));

    let out = batch.run("bjobs", &["-u", "all", "-o", "jobid stat queue", "-noheader"]);
    assert_eq!(stdout(&out), format!("{running} RUN   normal\n{held} PSUSP normal\n"), "{}", text(&out));

    let out = batch.run("bqueues", &["normal"]);
    let row = stdout(&out).lines().nth(1).map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "));
    assert_eq!(row.as_deref(), Some("normal 30 Open:Active - - - - 2 1 1 0"), "{}", text(&out));
    let out = batch.run("bqueues", &["-l", "normal"]);
    let long = stdout(&out);
    assert!(long.starts_with("\nQUEUE: normal\n") && long.contains("This is the default queue."), "{long}");
    assert!(long.contains("\nUSERS: all\nHOSTS:  all\n"), "{long}");

    let out = batch.run("bhosts", &["-w"]);
    let row =
        stdout(&out).lines().nth(1).map(|line| line.split_whitespace().skip(4).collect::<Vec<_>>().join(" "));
    assert_eq!(row.as_deref(), Some("1 1 0 0 0"), "NJOBS RUN SSUSP USUSP RSV: {}", text(&out));
    let out = batch.run("bhosts", &["-l", "localhost"]);
    assert!(stdout(&out).starts_with("HOST  localhost\nSTATUS           CPUF"), "{}", text(&out));

    let out = batch.run("bjobs", &["-l", &held.to_string()]);
    let long = stdout(&out);
    assert!(long.contains(&format!("Job <{held}>, Job Name <held>, User <")), "{long}");
    assert!(long.contains("Status <PSUSP>") && long.contains(" PENDING REASONS:\n"), "{long}");
    let out = batch.run("bjobs", &["-W", "-u", "all"]);
    let wide = stdout(&out);
    assert!(wide.starts_with(wide_header()), "{wide}");
    assert_eq!(wide.lines().count(), 3, "{wide}");

    for job in [running, held] {
        assert!(batch.run("bkill", &[&job.to_string()]).status.success());
        batch.wait_for(job, &["EXIT"]);
    }
}

fn wide_header() -> &'static str {
    "JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME  PROJ_NAME CPU_USED MEM \
     SWAP PIDS START_TIME FINISH_TIME\n"
}

// Goal: bad requests are refused with LSF's words and exit status 255, and
// an unknown job among known ones is named while the known ones are listed
// (in `-json`, as an error record).
#[test]
fn bad_requests_are_refused() {
    let batch = Batch::start();
    let job = submitted_id(&batch.run("bsub", &["-o", "/dev/null", "true"]));
    batch.wait_for(job, &["DONE"]);

    let out = batch.run("bjobs", &["-o", "jobid stat", "-noheader", &job.to_string(), "999999"]);
    assert_eq!(
        (out.status.code(), stdout(&out), String::from_utf8_lossy(&out.stderr).into_owned()),
        (Some(255), format!("{job} DONE\n"), "Job <999999> is not found\n".to_owned())
    );
    // With -json the unknown job is LSF's error record, after the known one, and the
    // exit status is the same.
    let out = batch.run("bjobs", &["-o", "jobid stat", "-json", &job.to_string(), "999999"]);
    assert_eq!(
        (out.status.code(), stdout(&out), String::from_utf8_lossy(&out.stderr).into_owned()),
        (
            Some(255),
            format!(
                "{{\n  \"COMMAND\":\"bjobs\",\n  \"JOBS\":2,\n  \"RECORDS\":[\n    {{\n      \
                 \"JOBID\":\"{job}\",\n      \"STAT\":\"DONE\"\n    }},\n    {{\n      \
                 \"ERROR\":\"Job <999999> is not found\"\n    }}\n  ]\n}}\n"
            ),
            String::new()
        )
    );
    let out = batch.run("bjobs", &["-o", "jobid bogus"]);
    assert_eq!(out.status.code(), Some(255));
    assert_eq!(text(&out), "bogus: Illegal field name in the output format\n");
    let out = batch.run("bjobs", &["-o", "stat", "-json", "-noheader"]);
    assert_eq!(out.status.code(), Some(255));
    assert!(text(&out).starts_with("bjobs: -json cannot be combined with -noheader\n"), "{}", text(&out));
    let out = batch.run("bjobs", &["-l", "-W"]);
    assert_eq!(out.status.code(), Some(255));
    let out = batch.run("bqueues", &["nosuch"]);
    assert_eq!((out.status.code(), text(&out)), (Some(255), "nosuch: No such queue\n".to_owned()));
    let out = batch.run("bhosts", &["-l", "nosuch"]);
    assert_eq!(
        (out.status.code(), text(&out)),
        (Some(255), "nosuch: Bad host name, host group name or cluster name\n".to_owned())
    );
    let out = batch.run("bjobs", &["-p"]);
    assert_eq!((out.status.code(), text(&out)), (Some(0), "No pending job found\n".to_owned()));
}

// Goal: what `badmin` closes shows in the listings: `closed` in bhosts and
// `closed_Adm` with -w and -l; `Closed:Active` and `Open:Inact` in bqueues
// and bqueues -l.
#[test]
fn closed_hosts_and_queues_show_in_the_listings() {
    let batch = Batch::start();
    assert!(batch.run("badmin", &["hclose", "localhost"]).status.success());
    let word = |args: &[&str], line: usize, column: usize| {
        let out = batch.run(args[0], &args[1..]);
        let listing = stdout(&out);
        listing
            .lines()
            .nth(line)
            .and_then(|l| l.split_whitespace().nth(column))
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(word(&["bhosts"], 1, 1), "closed");
    assert_eq!(word(&["bhosts", "-w"], 1, 1), "closed_Adm");
    assert_eq!(word(&["bhosts", "-l"], 2, 0), "closed_Adm");
    assert!(batch.run("badmin", &["qclose", "normal"]).status.success());
    assert_eq!(word(&["bqueues", "normal"], 1, 2), "Closed:Active");
    assert!(batch.run("badmin", &["qopen", "normal"]).status.success());
    assert!(batch.run("badmin", &["qinact", "normal"]).status.success());
    let out = batch.run("bqueues", &["-l", "normal"]);
    let long = stdout(&out);
    let values = long.lines().skip_while(|line| !line.starts_with("PRIO NICE STATUS")).nth(1);
    assert_eq!(values.and_then(|line| line.split_whitespace().nth(2)), Some("Open:Inact"), "{long}");
}
