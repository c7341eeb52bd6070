//! The LSF surface workflow tools stop at when it is missing (issue 19), end
//! to end against the real `mbatchd` and `sbatchd` on loopback: every field of
//! `bjobs -o` (LSF 10.1's list) in columns and in `-json`, PSI/J's poll,
//! Snakemake's `bjobs -aJ '*<uuid>*'`, the configuration commands
//! Snakemake reads at start-up, and `bwait` in a script.
//!
//! The byte-exact layouts are pinned by the pure tests of `bins/commands`
//! (`fields.rs`, `format/`, ...); these tests check that the real daemons'
//! answers reach them and that the commands exit as LSF's do.

mod util;

use std::process::Output;
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

    fn run(&self, program: &str, args: &[&str]) -> Output {
        run(&self.cluster, program, args)
    }

    fn submit(&self, args: &[&str]) -> u32 {
        let out = self.run("bsub", args);
        util::submitted_job_id(&stdout(&out))
    }

    /// STAT of `job`, by `bjobs -o stat -noheader`.
    fn stat(&self, job: u32) -> String {
        stdout(&self.run("bjobs", &["-o", "stat", "-noheader", &job.to_string()])).trim().to_owned()
    }

    fn wait_for(&self, job: u32, states: &[&str]) -> String {
        wait_until(&format!("job {job} to reach {states:?}"), JOB_TIMEOUT, || {
            let stat = self.stat(job);
            states.contains(&stat.as_str()).then_some(stat)
        })
    }
}

/// Runs a command of the suite in the cluster's folder.
fn run(cluster: &Cluster, program: &str, args: &[&str]) -> Output {
    cluster
        .command(util::mbatchd_bin().with_file_name(program))
        .args(args)
        .current_dir(cluster.dir())
        .env("TZ", "UTC0")
        .output()
        .expect("run a command")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}stderr:\n{}",
        out.status.code(),
        stdout(out),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The headers of LSF 10.1's `bjobs -o` fields, in LSF's order (the table
/// "Output fields for bjobs" of IBM's `bjobs -o` reference).
const LSF_HEADERS: &[&str] = &[
    "JOBID",
    "JOBINDEX",
    "STAT",
    "USER",
    "USER_GROUP",
    "QUEUE",
    "JOB_NAME",
    "JOB_DESCRIPTION",
    "PROJ_NAME",
    "APPLICATION",
    "SERVICE_CLASS",
    "JOB_GROUP",
    "JOB_PRIORITY",
    "RSVID",
    "ESUB",
    "KILL_REASON",
    "SUSPEND_REASON",
    "RESUME_REASON",
    "KILL_ISSUE_HOST",
    "SUSPEND_ISSUE_HOST",
    "RESUME_ISSUE_HOST",
    "DEPENDENCY",
    "PEND_REASON",
    "CHARGED_SAAP",
    "COMMAND",
    "PRE_EXEC_COMMAND",
    "POST_EXEC_COMMAND",
    "RESIZE_NOTIFICATION_COMMAND",
    "PIDS",
    "EXIT_CODE",
    "EXIT_REASON",
    "INTERACTIVE",
    "FROM_HOST",
    "FIRST_HOST",
    "EXEC_HOST",
    "NEXEC_HOST",
    "ASK_HOSTS",
    "ALLOC_SLOT",
    "NALLOC_SLOT",
    "HOST_FILE",
    "EXCLUSIVE",
    "NREQ_SLOT",
    "SUBMIT_TIME",
    "START_TIME",
    "ESTIMATED_START_TIME",
    "SPECIFIED_START_TIME",
    "SPECIFIED_TERMINATE_TIME",
    "TIME_LEFT",
    "FINISH_TIME",
    "ESTIMATED_RUN_TIME",
    "RU_UTIME",
    "RU_STIME",
    "%COMPLETE",
    "WARNING_ACTION",
    "ACTION_WARNING_TIME",
    "PENDSTATE",
    "PEND_TIME",
    "EPENDTIME",
    "IPENDTIME",
    "ESTIMATED_SIM_START_TIME",
    "EFFECTIVE_PLIMIT",
    "PLIMIT_REMAIN",
    "EFFECTIVE_EPLIMIT",
    "EPLIMIT_REMAIN",
    "CPU_USED",
    "RUN_TIME",
    "IDLE_FACTOR",
    "EXCEPTION_STATUS",
    "SLOTS",
    "MEM",
    "MAX_MEM",
    "AVG_MEM",
    "MEMLIMIT",
    "SWAP",
    "SWAPLIMIT",
    "GPU_NUM",
    "GPU_MODE",
    "J_EXCLUSIVE",
    "GPU_ALLOC",
    "NTHREADS",
    "HRUSAGE",
    "MIN_REQ_PROC",
    "MAX_REQ_PROC",
    "EFFECTIVE_RESREQ",
    "COMBINED_RESREQ",
    "NETWORK_REQ",
    "FILELIMIT",
    "CORELIMIT",
    "STACKLIMIT",
    "PROCESSLIMIT",
    "RUNTIMELIMIT",
    "PLIMIT",
    "EPLIMIT",
    "INPUT_FILE",
    "OUTPUT_FILE",
    "ERROR_FILE",
    "OUTPUT_DIR",
    "SUB_CWD",
    "EXEC_HOME",
    "EXEC_CWD",
    "LICPROJECT",
    "FORWARD_CLUSTER",
    "FORWARD_TIME",
    "SRCJOBID",
    "DSTJOBID",
    "SOURCE_CLUSTER",
    "ENERGY",
    "GPFSIO",
    "CPU_PEAK",
    "CPU_PEAK_EFFICIENCY",
    "MEM_EFFICIENCY",
    "AVERAGE_CPU_EFFICIENCY",
    "CPU_PEAK_REACHED_DURATION",
];

/// The value of `key` in the one record of a `bjobs -json` listing (values
/// without quotes).
fn json_value(listing: &str, key: &str) -> Option<String> {
    let needle = format!("      \"{key}\":\"");
    let start = listing.find(&needle)? + needle.len();
    let end = listing[start..].find('"')?;
    Some(listing[start..start + end].to_owned())
}

// Goal: every field of LSF 10.1's list is accepted by the real bjobs, by its
// name in any case, in columns (one header per field, `-` for no value) and
// in -json (one key per field, in LSF's order, `""` for no value); the values
// mbatchd knows reach them (a running job's id, state, queue, hosts, slots,
// limits, resource requirement and command).
#[test]
fn bjobs_o_prints_every_lsf_field() {
    let batch = Batch::start();
    let job = batch.submit(&[
        "-J",
        "every_field",
        "-W",
        "60",
        "-R",
        "span[hosts=1]",
        "-o",
        "/dev/null",
        "sleep",
        "300",
    ]);
    batch.wait_for(job, &["RUN"]);
    let id = job.to_string();

    let out = batch.run("bjobs", &["-o", "all", "-json", &id]);
    assert!(out.status.success(), "{}", text(&out));
    let listing = stdout(&out);
    let keys: Vec<&str> =
        listing.lines().filter_map(|line| line.strip_prefix("      \"")?.split('"').next()).collect();
    assert_eq!(keys, LSF_HEADERS, "{listing}");
    let expect = [
        ("JOBID", id.as_str()),
        ("STAT", "RUN"),
        ("QUEUE", "normal"),
        ("JOB_NAME", "every_field"),
        ("COMMAND", "sleep 300"),
        ("FIRST_HOST", "localhost"),
        ("EXEC_HOST", "localhost"),
        ("NEXEC_HOST", "1"),
        ("NALLOC_SLOT", "1"),
        ("SLOTS", "1"),
        ("PENDSTATE", "NOTPEND"),
        ("RUNTIMELIMIT", "60.0"),
        ("EFFECTIVE_RESREQ", "span[hosts=1]"),
        ("COMBINED_RESREQ", "span[hosts=1]"),
        ("EXIT_CODE", ""),
        ("KILL_REASON", ""),
        ("SUSPEND_REASON", ""),
        ("GPU_NUM", ""),
    ];
    for (key, value) in expect {
        assert_eq!(json_value(&listing, key).as_deref(), Some(value), "{key} in {listing}");
    }
    assert!(json_value(&listing, "TIME_LEFT").is_some_and(|left| left.ends_with(" L")), "{listing}");

    // Columns: each field by its own name, upper case as LSF accepts it too.
    for header in LSF_HEADERS {
        let out = batch.run("bjobs", &["-o", &format!("jobid: {header}:"), &id]);
        assert!(out.status.success(), "{header}: {}", text(&out));
        let said = stdout(&out);
        let lines: Vec<&str> = said.lines().collect();
        assert_eq!(lines.len(), 2, "{header}: {said}");
        assert!(lines[0].starts_with("JOBID   "), "{header}: {said}");
        let value = lines[1].get(8..).unwrap_or_default();
        assert!(!value.trim().is_empty(), "{header}: a value or `-`: {said}");
    }
    let out = batch.run("bjobs", &["-noheader", "-o", "all:8 delimiter='|'", &id]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(stdout(&out).trim_end().split('|').count(), LSF_HEADERS.len(), "{}", text(&out));
    let out = batch.run("bjobs", &["-o", "jobid bogus_field", &id]);
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));
}

// Goal: PSI/J's poll works unchanged: `bjobs -o "JOBID STAT EXIT_REASON
// KILL_REASON SUSPEND_REASON" -json -a IDS` gives one record per job with
// those keys, a killed job EXIT with LSF's TERM_OWNER reason, a finished one DONE.
#[test]
fn psij_poll_reads_every_job() {
    let batch = Batch::start();
    let done = batch.submit(&["-o", "/dev/null", "true"]);
    let killed = batch.submit(&["-o", "/dev/null", "sleep", "300"]);
    batch.wait_for(done, &["DONE"]);
    batch.wait_for(killed, &["RUN"]);
    assert!(batch.run("bkill", &[&killed.to_string()]).status.success());
    batch.wait_for(killed, &["EXIT"]);
    let (done_id, killed_id) = (done.to_string(), killed.to_string());
    let out = batch.run(
        "bjobs",
        &["-o", "JOBID STAT EXIT_REASON KILL_REASON SUSPEND_REASON", "-json", "-a", &done_id, &killed_id],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "{{\n  \"COMMAND\":\"bjobs\",\n  \"JOBS\":2,\n  \"RECORDS\":[\n    {{\n      \"JOBID\":\"{done}\",\n      \
             \"STAT\":\"DONE\",\n      \"EXIT_REASON\":\"\",\n      \"KILL_REASON\":\"\",\n      \
             \"SUSPEND_REASON\":\"\"\n    }},\n    {{\n      \"JOBID\":\"{killed}\",\n      \"STAT\":\"EXIT\",\n      \
             \"EXIT_REASON\":\"TERM_OWNER: job killed by owner\",\n      \"KILL_REASON\":\"\",\n      \
             \"SUSPEND_REASON\":\"\"\n    }}\n  ]\n}}\n"
        )
    );
}

// Goal: Snakemake's status query works unchanged: `bjobs -noheader -o 'jobid
// stat' -aJ '*<uuid>*'` (the short options bundled, `*` on both sides) finds
// the jobs whose names hold the uuid, finished ones too, and no other.
#[test]
fn bjobs_j_matches_a_star_anywhere() {
    let batch = Batch::start();
    let uuid = "0c5a9f7e-2b1d-4c6e-9d2a-1f0e3b4c5d6e";
    let first = batch.submit(&["-J", &format!("snakejob.a.1.{uuid}.sh"), "-o", "/dev/null", "true"]);
    let second = batch.submit(&["-J", &format!("snakejob.b.2.{uuid}.sh"), "-o", "/dev/null", "sleep", "300"]);
    let other = batch.submit(&["-J", "snakejob.c.3.other.sh", "-o", "/dev/null", "sleep", "300"]);
    batch.wait_for(first, &["DONE"]);
    let pattern = format!("*{uuid}*");
    let out = batch.run("bjobs", &["-noheader", "-o", "jobid stat", "-aJ", &pattern]);
    assert!(out.status.success(), "{}", text(&out));
    let listing = stdout(&out);
    let ids: Vec<u32> =
        listing.lines().filter_map(|line| line.split_whitespace().next()?.parse().ok()).collect();
    assert_eq!(ids, vec![first, second], "{listing}");
    assert!(listing.starts_with(&format!("{first} DONE\n")), "{listing}");
    // A star in the middle, and one at the end only.
    let out = batch.run("bjobs", &["-noheader", "-o", "jobid", "-a", "-J", "snakejob.*.other.sh"]);
    assert_eq!(stdout(&out), format!("{other}\n"), "{}", text(&out));
    let out = batch.run("bjobs", &["-noheader", "-o", "jobid", "-J", "snakejob.c*"]);
    assert_eq!(stdout(&out), format!("{other}\n"), "{}", text(&out));
    // Nothing matches: LSF's message, exit 0 (LSB_BJOBS_CONSISTENT_EXIT_CODE=N).
    let out = batch.run("bjobs", &["-noheader", "-o", "jobid", "-aJ", "*no-such-uuid*"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "No job found\n");
}

/// The configuration as Snakemake's LSF executor reads it at start-up:
/// `badmin showconf mbd` split into `KEY = value` pairs after its first line
/// (a line without ` = ` would crash it), the cluster name as the first word of
/// `lsclusters`' second line, then `$LSF_CONFDIR/lsbatch/<cluster>/configdir/lsb.params`
/// opened for DEFAULT_QUEUE.
fn snakemake_config(cluster: &Cluster) -> std::collections::BTreeMap<String, String> {
    let out = run(cluster, "badmin", &["showconf", "mbd"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = stdout(&out);
    let mut lines = said.trim().split('\n');
    let title = lines.next().unwrap_or_default();
    assert!(title.starts_with("MBD configuration at "), "{said}");
    let mut config = std::collections::BTreeMap::new();
    for line in lines {
        let parts: Vec<&str> = line.trim().split(" = ").collect();
        assert!(parts.len() >= 2, "a line Snakemake cannot split: {line:?} in\n{said}");
        config.insert(parts[0].to_owned(), parts[1].to_owned());
    }
    let out = run(cluster, "lsclusters", &[]);
    assert!(out.status.success(), "{}", text(&out));
    let name =
        stdout(&out).split('\n').nth(1).and_then(|line| line.split_whitespace().next()).map(str::to_owned);
    config.insert("LSF_CLUSTER".to_owned(), name.unwrap_or_default());
    let params = std::path::Path::new(&config["LSF_CONFDIR"])
        .join("lsbatch")
        .join(&config["LSF_CLUSTER"])
        .join("configdir/lsb.params");
    let text =
        std::fs::read_to_string(&params).unwrap_or_else(|error| panic!("{}: {error}", params.display()));
    if let Some(line) = text.lines().find(|line| line.trim_start().starts_with("DEFAULT_QUEUE")) {
        let value = line.split_once('=').map(|(_, value)| value.split('#').next().unwrap_or("").trim());
        config.insert("DEFAULT_QUEUE_FILE".to_owned(), value.unwrap_or_default().to_owned());
    }
    config
}

// Goal: Snakemake's start-up works: showconf gives LSB_SHAREDIR and
// LSF_CONFDIR (the cluster's own folders, absolute), lsclusters the cluster's
// name, and the lsb.params they point to is the cluster's, whose DEFAULT_QUEUE
// showconf shows too; `lsadmin showconf lim` has lsf.conf's values and not
// lsb.params'; a daemon is not needed for any of them.
#[test]
fn showconf_and_lsclusters_give_snakemake_its_configuration() {
    let cluster = Cluster::new();
    let config = snakemake_config(&cluster);
    assert_eq!(config["LSF_CLUSTER"], util::CLUSTER_NAME);
    assert_eq!(std::path::Path::new(&config["LSF_CONFDIR"]), cluster.envdir());
    assert_eq!(
        config.get("LSB_SHAREDIR").map(String::as_str),
        cluster.lsf_conf_value("LSB_SHAREDIR").as_deref()
    );
    assert_eq!(config["DEFAULT_QUEUE"], config["DEFAULT_QUEUE_FILE"]);
    assert_eq!(
        config["LSF_UNIT_FOR_LIMITS"], "MB",
        "the shipped lsf.conf says MB, as LSF's installer writes it"
    );

    let out = run(&cluster, "lsadmin", &["showconf", "lim"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = stdout(&out);
    assert!(said.starts_with("LIM configuration at "), "{said}");
    assert!(said.contains(&format!("\n    LSF_CONFDIR = {}\n", cluster.envdir().display())), "{said}");
    assert!(!said.contains("DEFAULT_QUEUE"), "{said}");

    let out = run(&cluster, "badmin", &["showconf", "sbd"]);
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));
    let out = run(&cluster, "lsclusters", &["no_such_cluster"]);
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "no_such_cluster: Unknown cluster name\n");
}

// Goal: lsclusters in LSF's layout: `unavail` and the configured master while
// no lim answers, `ok` and the master lim's name once it does; `-w` and the
// cluster's own name as an operand work.
#[test]
fn lsclusters_reports_the_master_lim() {
    let mut cluster = Cluster::new();
    let header = "CLUSTER_NAME   STATUS   MASTER_HOST               ADMIN    HOSTS  SERVERS\n";
    let out = run(&cluster, "lsclusters", &[]);
    assert_eq!(
        stdout(&out),
        format!("{header}lavacore       unavail  localhost                  root        1        1\n"),
        "{}",
        text(&out)
    );
    let port = util::fixed_port().to_string();
    cluster.rewrite_lsf_conf("LSF_LIM_PORT", &port);
    cluster.rewrite_lsf_conf("LAVA_LIM_TCP_PORT", &port);
    let _lim = cluster.start_lim("localhost");
    let listing = wait_until("lsclusters to see the master lim", JOB_TIMEOUT, || {
        let said = stdout(&run(&cluster, "lsclusters", &["-w", util::CLUSTER_NAME]));
        said.contains(" ok ").then_some(said)
    });
    assert_eq!(
        listing,
        format!("{header}lavacore       ok       localhost                  root        1        1\n")
    );
}

// Goal: bparams reads the cluster's lsb.params: the default queue and the
// intervals in LSF 10's four lines, OpenLava's long sentences with -l, the
// `KEY = value` lines with -a; an unknown option is a usage error.
#[test]
fn bparams_shows_lsb_params() {
    let cluster = Cluster::new();
    let out = run(&cluster, "bparams", &[]);
    assert!(out.status.success(), "{}", text(&out));
    let said = stdout(&out);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 4, "{said}");
    assert!(
        lines[0].starts_with("Default Queues:  ") && lines[0].len() > "Default Queues:  ".len(),
        "{said}"
    );
    assert!(lines[1].starts_with("MBD_SLEEP_TIME used for calculations:  "), "{said}");
    let config = snakemake_config(&cluster);
    assert_eq!(lines[0], format!("Default Queues:  {}", config["DEFAULT_QUEUE"]), "{said}");
    let out = run(&cluster, "bparams", &["-l"]);
    assert!(
        stdout(&out).contains("The interval for dispatching jobs by master batch daemon:\n"),
        "{}",
        text(&out)
    );
    let out = run(&cluster, "bparams", &["-a"]);
    assert!(stdout(&out).starts_with("lsb.params configuration at "), "{}", text(&out));
    assert!(
        stdout(&out).contains(&format!("\n    MBD_SLEEP_TIME = {}\n", config["MBD_SLEEP_TIME"])),
        "{}",
        text(&out)
    );
    let out = run(&cluster, "bparams", &["-x"]);
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));
}

/// A `bwait` running in the background, killed if the test ends first.
struct Waiting(Option<std::process::Child>);

impl Waiting {
    /// Its exit status once it has ended.
    fn ended(&mut self) -> Option<std::process::ExitStatus> {
        self.0.as_mut().and_then(|child| child.try_wait().expect("try_wait"))
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `frames.WAIT_QUERY` of `badmin showstatus`: the questions `bwait` asked.
fn wait_questions(cluster: &Cluster) -> u64 {
    let status = stdout(&run(cluster, "badmin", &["showstatus"]));
    status
        .lines()
        .find(|line| line.trim_start().starts_with("frames.WAIT_QUERY"))
        .and_then(|line| line.split_whitespace().last())
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

// Goal: `bwait` (LSF 10.1) against the real daemons. It waits for `done(first)` while that
// job runs; a newer job taking the name `first` after bwait's first answer does not change
// what it waits for; mbatchd killed (-9) and started again meanwhile is waited out; when
// the job ends DONE bwait exits 0 without a word while the newer job still runs. A condition
// that can never hold, a syntax error and an unknown job each end bwait with 255 and the
// message; a usage error too, before anything is asked.
#[test]
fn bwait_waits_for_a_condition_across_a_master_restart() {
    let mut cluster = Cluster::new();
    let mut mbatchd = cluster.start_mbatchd();
    let _sbatchd = cluster.start_sbatchd("localhost");
    let gate = cluster.dir().join("gate");
    let script = format!("while [ ! -e {} ]; do sleep 0.1; done", gate.display());
    let first =
        util::submitted_job_id(&stdout(&run(&cluster, "bsub", &["-J", "first", "-o", "/dev/null", &script])));
    let before = wait_questions(&cluster);
    let mut waiting = Waiting(Some(
        cluster
            .command(util::mbatchd_bin().with_file_name("bwait"))
            .args(["-w", "done(first)", "-r", "10"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start bwait"),
    ));
    // A second question means the first was answered: the name is resolved.
    wait_until("bwait's second question", JOB_TIMEOUT, || {
        (wait_questions(&cluster) >= before + 2).then_some(())
    });
    let newer = util::submitted_job_id(&stdout(&run(
        &cluster,
        "bsub",
        &["-J", "first", "-o", "/dev/null", "sleep 600"],
    )));
    mbatchd.kill();
    mbatchd = cluster.start_mbatchd();
    std::thread::sleep(Duration::from_secs(1));
    assert!(waiting.ended().is_none(), "bwait waits while job {first} runs");
    std::fs::write(&gate, "").expect("open the gate");
    let code = wait_until("bwait to end", JOB_TIMEOUT, || waiting.ended()).code();
    let out = waiting.0.take().expect("bwait").wait_with_output().expect("bwait's output");
    assert_eq!(
        (code, stdout(&out), String::from_utf8_lossy(&out.stderr).into_owned()),
        (Some(0), String::new(), String::new())
    );
    let stat = |job: u32| {
        stdout(&run(&cluster, "bjobs", &["-o", "stat", "-noheader", &job.to_string()])).trim().to_owned()
    };
    assert_eq!(stat(first), "DONE");
    let newer_stat = stat(newer);
    assert!(["PEND", "RUN"].contains(&newer_stat.as_str()), "not waited for: the newer job is {newer_stat}");

    for (condition, said) in [
        (format!("exit({first})"), "Wait condition is never satisfied\n"),
        ("done(".to_owned(), "Dependency condition syntax error\n"),
        ("done(99999)".to_owned(), "No matching job found\n"),
    ] {
        let out = run(&cluster, "bwait", &["-w", &condition]);
        assert_eq!(
            (out.status.code(), String::from_utf8_lossy(&out.stderr).as_ref()),
            (Some(255), said),
            "{condition}"
        );
    }
    let out = run(&cluster, "bwait", &["-w", "done(1)", "-t", "0"]);
    assert_eq!(out.status.code(), Some(255), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("between 1 and 525600"), "{}", text(&out));
    let out = run(&cluster, "bkill", &[&newer.to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    drop(mbatchd);
}
