//! Multi-host deployment (issue 8): the whole suite installed by `scripts/install` and run
//! on three hosts as it would run on real nodes, each host a network namespace with its own
//! address (10.78.0.1-3/24, see `util::netns`) and every daemon on its default port.
//!
//! - `scripts/install --no-build` (with the binaries this test run built) installs once into
//!   a temporary prefix, configuration folder and state folder; it makes the cluster key.
//!   The administrator's edits then go into the installed configuration: `lsf.cluster`
//!   lists h0 (the master), h1 and h2 with their namespace addresses, the lim intervals are
//!   shortened (300 ms) and every host takes at most 2 jobs (`MXJ`), so that 12 jobs must
//!   spread whatever this machine's CPU count.
//! - Every host gets that configuration, as real nodes get a copy of `/etc/lavacore`; since
//!   the namespaces share one file system, each copy names the host's own state folder
//!   (`LSB_SHAREDIR`), log folder and credential socket (`LAVA_CMD_SOCKET`, beside which
//!   mxfsd's socket goes), where real nodes would have the same paths on their own disks.
//!   The cluster key is not copied: every copy names the one installed key, which is what a
//!   real cluster shares.
//! - lim, sbatchd and mxfsd run on every host, mbatchd and the coordinator on h0, all from
//!   the installed `sbin/`; the commands are the installed `bin/` ones, run inside a host's
//!   namespace with that host's configuration (so with its sbatchd's credential socket).
//!
//! Then: 12 jobs submitted from h1 (not the master) all end DONE, on more than one host;
//! `mxfsctl lock` on one resource from h1 and h2 at once: both run, one after the other; a
//! coordinator task submitted from h1 is leased and completed by a worker on h2; two jobs
//! pinned to h2 (`bsub -m h2`) are running when h2's cable is pulled (the bridge end of its
//! veth set down): bhosts shows h2 `unavail`, bjobs those jobs `UNKWN`; they are let go and
//! end while h2 is cut off, and 6 jobs submitted meanwhile run on h0 and h1 only; the cable
//! is plugged back: h2 is `ok` again, its two jobs are DONE (their ends reached mbatchd
//! after the reconnection), 6 more jobs end DONE, and every one of the 26 jobs ran exactly
//! once (each appends its id and `LSB_HOSTS` to a shared file) and ends DONE in `bjobs -a`.
//!
//! Where namespaces cannot be created (not root, no `ip`, a sandbox refusing it) the test
//! prints `skipped: REASON` and passes. Daemons are killed (their guards) and the namespaces
//! deleted (their guard) however the test ends; the folder is kept when it fails.

mod util;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use util::netns::Netns;
use util::{Cluster, Daemon, STARTUP_TIMEOUT, wait_until};

const HOSTS: [&str; 3] = ["h0", "h1", "h2"];
const SUBNET: &str = "10.78.0";
/// Prefix of every namespace this test creates: `lavadepl<pid>-<role>`.
const NS_PREFIX: &str = "lavadepl";
/// lim's report and beacon interval here.
const LIM_INTERVAL_MS: u64 = 300;
/// Longest the cluster may take to show a change (lim's deadline, mbatchd polling the
/// master lim, a dispatch turn) on a busy 2-core machine running a debug build. A bound on
/// waiting, not a performance goal.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest a batch of short jobs may take to end DONE (same remark).
const JOBS_TIMEOUT: Duration = Duration::from_secs(90);
/// The submitting host (not the master).
const SUBMITTER: usize = 1;
/// The host whose cable is pulled.
const CUT: usize = 2;

/// Runs `cmd` with `args`, panicking with its output unless it succeeds.
fn checked(mut cmd: Command, what: &str) -> Output {
    let output = cmd.stdin(Stdio::null()).output().unwrap_or_else(|error| panic!("{what}: {error}"));
    assert!(output.status.success(), "{what} failed:\n{}", describe(&output));
    output
}

fn describe(output: &Output) -> String {
    format!(
        "status {}\n--- stdout ---\n{}--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Sets `KEY=value` in the lsf.conf at `path` (replacing the key's line, or appending one).
fn set_conf(path: &Path, key: &str, value: &str) {
    let text = fs::read_to_string(path).expect("read lsf.conf");
    let prefix = format!("{key}=");
    let mut found = false;
    let mut lines: Vec<String> = text
        .lines()
        .map(|line| {
            if line.starts_with(&prefix) {
                found = true;
                format!("{key}={value}")
            } else {
                line.to_owned()
            }
        })
        .collect();
    if !found {
        lines.push(format!("{key}={value}"));
    }
    fs::write(path, lines.join("\n") + "\n").expect("write lsf.conf");
}

/// Copies the folder tree `from` to `to`, leaving out the file named `skip`.
fn copy_tree(from: &Path, to: &Path, skip: &Path) {
    fs::create_dir_all(to).expect("create a folder");
    for entry in fs::read_dir(from).expect("read a folder") {
        let entry = entry.expect("an entry");
        if entry.path() == skip {
            continue;
        }
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a type").is_dir() {
            copy_tree(&entry.path(), &target, skip);
        } else {
            fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

/// The installation shared by every host.
struct Site {
    sbin: PathBuf,
    bin: PathBuf,
    confdir: PathBuf,
}

/// One host: its namespace and its copy of the configuration.
struct Host {
    name: &'static str,
    ns: String,
    envdir: PathBuf,
}

impl Host {
    /// `ip netns exec NS env LSF_ENVDIR=... PROGRAM` (each execs the next).
    fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns, "env"])
            .arg(format!("LSF_ENVDIR={}", self.envdir.display()))
            .arg(program)
            .stdin(Stdio::null());
        cmd
    }

    /// A daemon of `site` on this host (its pid is the program's: `ip` and `env` exec it).
    fn spawn(&self, cluster: &mut Cluster, daemon: &str, sbin: &Path, args: &[&OsStr]) -> Daemon {
        let program = sbin.join(daemon);
        let envdir = format!("LSF_ENVDIR={}", self.envdir.display());
        let mut all: Vec<&OsStr> =
            vec!["netns".as_ref(), "exec".as_ref(), self.ns.as_ref(), "env".as_ref(), envdir.as_ref()];
        all.push(program.as_os_str());
        all.extend_from_slice(args);
        cluster.spawn(&format!("{daemon}-{}", self.name), Path::new("ip"), &all)
    }
}

/// Installs the suite under `top` and writes the administrator's configuration.
fn install(top: &Path, netns: &Netns) -> Site {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_mbatchd")).parent().expect("a binary has a folder");
    let site =
        Site { sbin: top.join("usr/sbin"), bin: top.join("usr/bin"), confdir: top.join("etc/lavacore") };
    let mut cmd = Command::new(util::repo_root().join("scripts/install"));
    cmd.arg("--no-build")
        .arg("--bindir-from")
        .arg(bin_dir)
        .arg("--prefix")
        .arg(top.join("usr"))
        .arg("--confdir")
        .arg(&site.confdir)
        .arg("--statedir")
        .arg(top.join("var/lib/lavacore"))
        .arg("--logdir")
        .arg(top.join("var/log/lavacore"));
    checked(cmd, "scripts/install");

    let rows: String = HOSTS
        .iter()
        .enumerate()
        .map(|(idx, host)| format!("{host}  !  !  1  (cs linux)  {}  -  -  -\n", netns.addr(idx)))
        .collect();
    fs::write(
        site.confdir.join("lsf.cluster.lavacore"),
        format!(
            "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
             HOSTNAME  model  type  server  RESOURCES  LAVA_ADDR  LAVA_LIM_PORT  LAVA_SBD_PORT  LAVA_MXFSD_PORT\n\
             {rows}End Host\n"
        ),
    )
    .expect("write lsf.cluster");
    let conf = site.confdir.join("lsf.conf");
    set_conf(&conf, "LAVA_LIM_REPORT_INTERVAL_MS", &LIM_INTERVAL_MS.to_string());
    set_conf(&conf, "LAVA_LIM_BEACON_INTERVAL_MS", &LIM_INTERVAL_MS.to_string());
    set_conf(&conf, "LSF_LOG_MASK", "LOG_INFO");
    // Every copy of the configuration names the one installed key.
    set_conf(&conf, "LAVA_CLUSTER_KEY_FILE", &site.confdir.join("lava.cluster.key").display().to_string());
    let hosts_file = site.confdir.join("lsbatch/lavacore/configdir/lsb.hosts");
    let text = fs::read_to_string(&hosts_file).expect("read lsb.hosts");
    let text = text.replace("default    !    ()    ()", "default    2    ()    ()");
    assert!(text.contains("default    2"), "lsb.hosts has no default line to edit:\n{text}");
    fs::write(&hosts_file, text).expect("write lsb.hosts");
    site
}

/// Host `idx`'s copy of the installed configuration with its own folders and sockets.
fn host_setup(top: &Path, site: &Site, netns: &Netns, idx: usize) -> Host {
    let name = HOSTS[idx];
    let root = top.join("hosts").join(name);
    let envdir = root.join("etc/lavacore");
    copy_tree(&site.confdir, &envdir, &site.confdir.join("lava.cluster.key"));
    let conf = envdir.join("lsf.conf");
    for (key, folder) in [("LSB_SHAREDIR", "var/lib/lavacore"), ("LSF_LOGDIR", "var/log/lavacore")] {
        fs::create_dir_all(root.join(folder)).expect("create a host folder");
        set_conf(&conf, key, &root.join(folder).display().to_string());
    }
    fs::create_dir_all(root.join("run")).expect("create the run folder");
    set_conf(&conf, "LAVA_CMD_SOCKET", &root.join("run/lava.sock").display().to_string());
    Host { name, ns: netns.hosts[idx].clone(), envdir }
}

/// Starts a daemon and waits (bounded) for the file it writes once ready.
fn start(cluster: &mut Cluster, site: &Site, host: &Host, daemon: &str, extra: &[&str]) -> Daemon {
    let ready = cluster.dir().join(format!("run/{daemon}.{}.ready", host.name));
    let _absent = fs::remove_file(&ready);
    let mut args: Vec<&OsStr> = extra.iter().map(OsStr::new).collect();
    let flag = if daemon == "mbatchd" { "--port-file" } else { "--ready-file" };
    args.extend([OsStr::new(flag), ready.as_os_str()]);
    let mut proc = host.spawn(cluster, daemon, &site.sbin, &args);
    wait_until(&format!("{daemon} on {} ready", host.name), STARTUP_TIMEOUT, || {
        assert!(proc.is_running(), "{daemon} on {} exited:\n{}", host.name, proc.log());
        ready.exists().then_some(())
    });
    proc
}

/// Runs the installed command `name` on `host`.
fn run(site: &Site, host: &Host, name: &str, args: &[&str]) -> Output {
    host.command(&site.bin.join(name)).args(args).output().expect("run a command")
}

/// The STATUS column of `bhosts` on `host`, by host name.
fn bhosts(site: &Site, host: &Host) -> BTreeMap<String, String> {
    let output = run(site, host, "bhosts", &[]);
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            Some((fields.next()?.to_owned(), fields.next()?.to_owned()))
        })
        .collect()
}

/// Polls bhosts on `host` until every `(host, status)` of `want` shows.
fn wait_bhosts(site: &Site, host: &Host, want: &[(&str, &str)]) {
    let mut last = BTreeMap::new();
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while Instant::now() < deadline {
        last = bhosts(site, host);
        if want.iter().all(|(h, s)| last.get(*h).is_some_and(|now| now == s)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("bhosts on {} never showed {want:?}; last: {last:?}", host.name);
}

/// Submits `count` jobs from `host` with the bsub options `extra`; each appends `ID HOST` to
/// `record`, then runs `then`.
fn submit(
    site: &Site,
    host: &Host,
    shared: &Path,
    record: &Path,
    count: usize,
    extra: &[&str],
    then: &str,
) -> Vec<u32> {
    (0..count)
        .map(|_| {
            let command = format!("echo \"$LSB_JOBID $LSB_HOSTS\" >> {}; {then}", record.display());
            let out_file = shared.join("job.%J.out");
            let mut args = vec!["-o", out_file.to_str().expect("utf-8")];
            args.extend_from_slice(extra);
            args.push(&command);
            let output = run(site, host, "bsub", &args);
            assert!(output.status.success(), "bsub on {}:\n{}", host.name, describe(&output));
            let stdout = String::from_utf8_lossy(&output.stdout);
            stdout
                .split_once("Job <")
                .and_then(|(_, rest)| rest.split_once('>'))
                .and_then(|(id, _)| id.parse().ok())
                .unwrap_or_else(|| panic!("bsub printed no job id: {stdout}"))
        })
        .collect()
}

/// The STAT of every job in `bjobs -w -a -u all` on `host`.
fn job_states(site: &Site, host: &Host) -> BTreeMap<u32, String> {
    let output = run(site, host, "bjobs", &["-w", "-a", "-u", "all", "-noheader"]);
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let id = fields.next()?.parse().ok()?;
            let _user = fields.next()?;
            Some((id, fields.next()?.to_owned()))
        })
        .collect()
}

/// Waits until every job of `jobs` is DONE (panics on EXIT or on timeout).
fn wait_done(site: &Site, host: &Host, jobs: &[u32]) {
    let mut last = BTreeMap::new();
    let deadline = Instant::now() + JOBS_TIMEOUT;
    while Instant::now() < deadline {
        last = job_states(site, host);
        for job in jobs {
            assert_ne!(last.get(job).map(String::as_str), Some("EXIT"), "job {job} failed: {last:?}");
        }
        if jobs.iter().all(|job| last.get(job).is_some_and(|stat| stat == "DONE")) {
            return;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!("jobs {jobs:?} not all DONE; last bjobs: {last:?}");
}

/// The record: how many times each job ran, and the hosts each ran on.
fn ran(record: &Path) -> BTreeMap<u32, Vec<String>> {
    let mut out: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for line in fs::read_to_string(record).unwrap_or_default().lines() {
        let (id, host) = line.split_once(' ').unwrap_or_else(|| panic!("a bad record line: {line:?}"));
        out.entry(id.parse().expect("a job id")).or_default().push(host.trim().to_owned());
    }
    out
}

/// The hosts `jobs` ran on, checking that each ran exactly once.
fn hosts_of(record: &Path, jobs: &[u32]) -> BTreeSet<String> {
    let ran = ran(record);
    jobs.iter()
        .map(|job| match ran.get(job).map(Vec::as_slice) {
            Some([host]) => host.clone(),
            other => panic!("job {job} ran {other:?} (want exactly once); record: {ran:?}"),
        })
        .collect()
}

/// Whether mxfsd on `host` joined a master (`mxfsctl status`).
fn mxfsd_joined(site: &Site, host: &Host) -> Option<()> {
    let output = run(site, host, "mxfsctl", &["status"]);
    String::from_utf8_lossy(&output.stdout).contains("MASTER CONNECTION: joined").then_some(())
}

// Goal: the installed suite on three namespaced hosts: jobs from a non-master host spread
// and end DONE; mxfsd locks and coordinator tasks work across hosts; a host whose network
// goes down is unavail, new jobs avoid it, it comes back, and no job is lost or run twice.
#[test]
fn installed_suite_on_three_network_namespaces() {
    let netns = match Netns::create(NS_PREFIX, &HOSTS, SUBNET) {
        Ok(netns) => netns,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            return;
        }
    };
    // Declared after `netns`: its daemons are killed before the namespaces are deleted.
    let mut cluster = Cluster::with_hosts(&HOSTS);
    let top = cluster.dir().join("site");
    let site = install(&top, &netns);
    let hosts: Vec<Host> = (0..HOSTS.len()).map(|idx| host_setup(&top, &site, &netns, idx)).collect();
    let shared = cluster.dir().join("shared");
    fs::create_dir_all(&shared).expect("create the shared folder");
    let record = shared.join("ran");

    let mut daemons: Vec<Daemon> = Vec::new();
    for host in &hosts {
        daemons.push(start(&mut cluster, &site, host, "lim", &["--host", host.name]));
    }
    daemons.push(start(&mut cluster, &site, &hosts[0], "mbatchd", &["--foreground"]));
    for host in &hosts {
        daemons.push(start(&mut cluster, &site, host, "sbatchd", &["--host", host.name]));
    }
    // mxfsd nodes look for the master among the lower ids: start them in id order.
    for host in &hosts {
        daemons.push(start(&mut cluster, &site, host, "mxfsd", &["--host", host.name]));
    }
    daemons.push(start(&mut cluster, &site, &hosts[0], "coordinator", &[]));

    let submitter = &hosts[SUBMITTER];
    wait_bhosts(&site, submitter, &[("h0", "ok"), ("h1", "ok"), ("h2", "ok")]);

    // 1. Jobs from a non-master host spread over the hosts and all end DONE.
    let first = submit(&site, submitter, &shared, &record, 12, &[], "sleep 1");
    wait_done(&site, submitter, &first);
    let used = hosts_of(&record, &first);
    eprintln!("12 jobs ran on {used:?}");
    assert!(used.len() > 1, "the jobs did not spread: all ran on {used:?}");

    // 2. mxfsd: h1 and h2 lock one resource at once; both commands run, one after the other.
    for host in &hosts[1..] {
        wait_until(&format!("mxfsd on {} joined the master", host.name), SETTLE_TIMEOUT, || {
            mxfsd_joined(&site, host)
        });
    }
    let trace = shared.join("lock-trace");
    let lockers: Vec<_> = hosts[1..]
        .iter()
        .map(|host| {
            let script = format!(
                "echo in {name} >> {t}; sleep 0.5; echo out {name} >> {t}",
                name = host.name,
                t = trace.display()
            );
            host.command(&site.bin.join("mxfsctl"))
                .args(["lock", "deploy-test", "EX", "--timeout", "60", "--", "sh", "-c", &script])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start mxfsctl")
        })
        .collect();
    for child in lockers {
        let output = child.wait_with_output().expect("wait for mxfsctl");
        assert!(output.status.success(), "mxfsctl lock:\n{}", describe(&output));
    }
    let trace = fs::read_to_string(&trace).expect("read the lock trace");
    let lines: Vec<&str> = trace.lines().collect();
    assert_eq!(lines.len(), 4, "{trace}");
    assert!(
        lines[0].starts_with("in ") && lines[1] == lines[0].replacen("in", "out", 1),
        "the holders overlapped:\n{trace}"
    );
    assert!(lines[2].starts_with("in ") && lines[3] == lines[2].replacen("in", "out", 1), "{trace}");
    assert_ne!(lines[0], lines[2], "both hosts held the lock:\n{trace}");

    // 3. The coordinator (on h0): a task submitted on h1, leased and completed on h2.
    let mut submit_task = hosts[1].command(&site.bin.join("coordctl"));
    submit_task.args(["submit", "-"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = submit_task.spawn().expect("start coordctl submit");
    {
        use std::io::Write as _;
        child.stdin.take().expect("stdin").write_all(b"deploy payload").expect("write the payload");
    }
    let output = child.wait_with_output().expect("coordctl submit");
    assert!(output.status.success(), "coordctl submit on h1:\n{}", describe(&output));
    let task = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let output = run(&site, &hosts[2], "coordctl", &["lease", "--worker", "worker-h2", "--wait", "30"]);
    assert!(output.status.success(), "coordctl lease on h2:\n{}", describe(&output));
    let leased = String::from_utf8_lossy(&output.stdout).into_owned();
    let (line, payload) = leased.split_once('\n').expect("a lease line");
    let fields: Vec<&str> = line.split(' ').collect();
    assert_eq!(fields[0], task, "{leased}");
    assert_eq!(payload, "deploy payload");
    let output = run(&site, &hosts[2], "coordctl", &["complete", fields[0], fields[1]]);
    assert!(output.status.success(), "coordctl complete on h2:\n{}", describe(&output));
    let output = run(&site, &hosts[1], "coordctl", &["status", &task]);
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("COMPLETED"),
        "task {task} seen from h1:\n{}",
        describe(&output)
    );

    // 4. h2's cable is pulled while two jobs run there (each waits for the file `release`,
    // for at most 2 minutes): h2 is unavail, its jobs UNKWN; released, they end while h2 is
    // cut off; the jobs submitted meanwhile avoid it.
    let cut = HOSTS[CUT];
    let release = shared.join("release");
    let ended = shared.join("pinned-ended");
    let wait_release = format!(
        "for i in $(seq 600); do [ -e {} ] && break; sleep 0.2; done; echo $LSB_JOBID >> {}",
        release.display(),
        ended.display()
    );
    let pinned = submit(&site, submitter, &shared, &record, 2, &["-m", cut], &wait_release);
    wait_until("the pinned jobs running on h2", JOBS_TIMEOUT, || {
        let states = job_states(&site, submitter);
        let ran = ran(&record);
        pinned
            .iter()
            .all(|job| states.get(job).is_some_and(|stat| stat == "RUN") && ran.contains_key(job))
            .then_some(())
    });
    assert_eq!(hosts_of(&record, &pinned), BTreeSet::from([cut.to_owned()]));
    netns.set_cable(CUT, false).expect("pull h2's cable");
    wait_bhosts(&site, submitter, &[("h0", "ok"), ("h1", "ok"), (cut, "unavail")]);
    let states = job_states(&site, submitter);
    for job in &pinned {
        assert_eq!(states.get(job).map(String::as_str), Some("UNKWN"), "job {job} on the cut-off {cut}");
    }
    fs::write(&release, "").expect("release the pinned jobs");
    wait_until("the pinned jobs to end on the cut-off h2", JOBS_TIMEOUT, || {
        let text = fs::read_to_string(&ended).unwrap_or_default();
        (text.lines().count() == pinned.len()).then_some(())
    });
    let second = submit(&site, submitter, &shared, &record, 6, &[], "sleep 1");
    wait_done(&site, submitter, &second);
    let used = hosts_of(&record, &second);
    eprintln!("with {cut} cut off, 6 jobs ran on {used:?}");
    assert!(!used.contains(cut), "a job ran on the unreachable {cut}: {used:?}");

    // 5. The cable is back: h2 is ok again, the jobs that ended while it was cut off are
    // DONE, and nothing was lost or run twice.
    netns.set_cable(CUT, true).expect("plug h2's cable back");
    wait_bhosts(&site, submitter, &[("h0", "ok"), ("h1", "ok"), (cut, "ok")]);
    wait_done(&site, submitter, &pinned);
    let third = submit(&site, submitter, &shared, &record, 6, &[], "sleep 1");
    wait_done(&site, submitter, &third);
    eprintln!("after {cut} came back, 6 jobs ran on {:?}", hosts_of(&record, &third));
    let all: Vec<u32> = first.iter().chain(&pinned).chain(&second).chain(&third).copied().collect();
    let ran = ran(&record);
    assert_eq!(ran.len(), all.len(), "jobs ran that nobody submitted, or some never ran: {ran:?}");
    hosts_of(&record, &all);
    let states = job_states(&site, submitter);
    for job in &all {
        assert_eq!(states.get(job).map(String::as_str), Some("DONE"), "job {job}: {states:?}");
    }
    for daemon in &mut daemons {
        assert!(daemon.is_running(), "a daemon died during the test:\n{}", daemon.log());
    }
}
