//! Every crash point of every daemon (lava-crash's registry, `lava_crash::POINTS`), exercised
//! through the real binaries: for each point, a small workload runs with the point armed at
//! the start of each of its phases; the process that reaches it first dies there (SIGKILL from
//! itself), the harness restarts it at once, and the phase must still reach its goal. Each
//! point runs twice: as a plain `kill -9`, and as a power loss (the crashed process's writes
//! that no fsync covered are dropped before the restart; see lava-crash's crate doc). After
//! the workload, the invariants of docs/crash-points.md:
//! - batch (mbatchd, sbatchd, shepherd; mbatchd's points on master candidates with three of
//!   them, submitting until the point fires): every acknowledged `bsub` exists; every job ran
//!   exactly once (a shepherd killed before it released its job: never, and the job is
//!   EXIT) and ended DONE or EXIT with its true exit code; a `bstop`ped job's process is
//!   stopped, a `bresume`d one runs, a `bkill`ed one is gone;
//! - coordinator: every acknowledged submission exists, no task's outcome was acknowledged
//!   twice, and every acknowledged outcome is what the coordinator serves after a restart
//!   from its WAL (its candidate point with three candidates whose leader's flushes are
//!   slowed, submitting until the point fires);
//! - replica (the replicated log of mbatchd's and the coordinator's master candidates):
//!   three candidates of each daemon in turn, compacting every few entries, the point armed
//!   again after each crash; the batch and coordinator invariants above;
//! - mxfsd: no two holders of EX on one resource at once, across node crashes and takeovers.
//!
//! A point the workload never reaches fails its test: the registry cannot name a point no
//! test exercises, and `lava_crash::point!` cannot name a point outside the registry.
//! `LAVA_CRASH_JOBS=N` runs N jobs (tasks, lockers) per phase instead of the CI's few.

mod util;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use lava_mxfsd::client::Client;
use util::fsync_fault::FsyncFault;
use util::mxfsd::{HOSTS, spawn_node, write_cluster_file};
use util::{Cluster, Daemon, STARTUP_TIMEOUT, wait_until};

/// How long a phase may take to reach its goal, crashes and restarts included.
const PHASE_TIMEOUT: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(20);

/// Jobs, tasks or lockers per phase (`LAVA_CRASH_JOBS`).
fn workload_size() -> usize {
    std::env::var("LAVA_CRASH_JOBS").ok().and_then(|n| n.parse().ok()).filter(|n| *n > 0).unwrap_or(2)
}

fn bin(name: &str) -> PathBuf {
    util::mbatchd_bin().with_file_name(name)
}

/// The daemon under test and what it takes to start it again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Mbatchd,
    /// mbatchd on master candidate `host` (of `CANDIDATES`).
    Candidate {
        host: &'static str,
    },
    Sbatchd,
    Coordinator {
        port: u16,
    },
    /// The coordinator on master candidate `host` (of `CANDIDATES`).
    CoordinatorCandidate {
        host: &'static str,
    },
    Mxfsd {
        idx: usize,
    },
}

/// A cluster whose daemons inherit an armed crash point, and the loop that restarts
/// whichever of them crashes.
struct Rig {
    cluster: Cluster,
    point: &'static str,
    power_loss: bool,
    daemons: Vec<(Role, Daemon)>,
    /// Crashes so far.
    fired: usize,
    crash_dir: PathBuf,
    mxfsd_ports: Vec<u16>,
    /// The host sbatchd runs as.
    sbatchd_host: &'static str,
    /// `LSB_MBD_PORT` of the master candidates.
    mbd_port: u16,
    /// Arguments every master candidate (mbatchd's or the coordinator's) starts with, after
    /// the rig's own.
    candidate_args: Vec<&'static str>,
}

impl Rig {
    /// A cluster (of `hosts`) whose daemons spawned under the names in `armed` inherit
    /// `point` armed through a file (not yet created).
    fn new(hosts: &[&str], armed: &[&str], point: &'static str, power_loss: bool) -> Rig {
        let mut cluster = Cluster::with_hosts(hosts);
        let crash_dir = cluster.dir().join("crash");
        fs::create_dir_all(&crash_dir).expect("create the crash folder");
        for daemon in armed {
            cluster.set_daemon_env(daemon, lava_crash::ENV_AT, point);
            cluster.set_daemon_env(daemon, lava_crash::ENV_ARM, crash_dir.join("arm"));
            cluster.set_daemon_env(daemon, lava_crash::ENV_REPORT, crash_dir.join("report"));
            if power_loss {
                cluster.set_daemon_env(daemon, lava_crash::ENV_POWER_LOSS, crash_dir.join("images"));
            }
        }
        Rig {
            cluster,
            point,
            power_loss,
            daemons: Vec::new(),
            fired: 0,
            crash_dir,
            mxfsd_ports: Vec::new(),
            sbatchd_host: "localhost",
            mbd_port: 0,
            candidate_args: Vec::new(),
        }
    }

    fn dir(&self) -> PathBuf {
        self.cluster.dir().to_owned()
    }

    /// Arms the point: the next process to reach it crashes.
    fn arm(&self) {
        fs::write(self.crash_dir.join("arm"), "").expect("create the arm file");
    }

    /// Arms the point `crashes` times in turn, each time calling `step` (one request of the
    /// workload) until the point has fired once more, at most `steps_max` times per crash.
    fn crash_repeatedly(&mut self, crashes: usize, steps_max: usize, mut step: impl FnMut(&mut Rig)) {
        for crash in 0..crashes {
            self.arm();
            for _ in 0..steps_max {
                if self.fired > crash {
                    break;
                }
                step(self);
            }
            let (point, power_loss) = (self.point, self.power_loss);
            assert!(
                self.fired > crash,
                "{point} (power loss: {power_loss}) was never reached by the workload"
            );
            eprintln!("{point}: crash {} reached", crash + 1);
        }
        self.disarm();
    }

    /// Ends the workload's crashes: waits a little for a point reached on a timer (a
    /// second's tick) if none fired yet, then removes the arm file.
    fn disarm(&mut self) {
        let until = Instant::now() + Duration::from_secs(3);
        while self.fired == 0 && Instant::now() < until {
            self.supervise();
            std::thread::sleep(POLL);
        }
        let _absent = fs::remove_file(self.crash_dir.join("arm"));
    }

    fn start(&mut self, role: Role) {
        let daemon = match role {
            Role::Mbatchd => self.cluster.start_mbatchd(),
            Role::Candidate { host } => {
                let port = self.mbd_port.to_string();
                let port_file = self.dir().join(format!("run/mbatchd.{host}.port"));
                let _stale = fs::remove_file(&port_file);
                let mut args: Vec<&std::ffi::OsStr> = vec![
                    "--foreground".as_ref(),
                    "--host".as_ref(),
                    host.as_ref(),
                    "--port".as_ref(),
                    port.as_ref(),
                    "--port-file".as_ref(),
                    port_file.as_ref(),
                ];
                args.extend(self.candidate_args.iter().map(std::ffi::OsStr::new));
                let mut daemon = self.cluster.spawn("mbatchd", &util::mbatchd_bin(), &args);
                daemon.wait_for_port_file(&port_file, STARTUP_TIMEOUT);
                daemon
            }
            Role::Sbatchd => self.cluster.start_sbatchd(self.sbatchd_host),
            Role::Coordinator { port } => {
                let daemon = self.cluster.start_coordinator(port, &["--lease-ms", "1000"]);
                let port = daemon.port();
                self.daemons.push((Role::Coordinator { port }, daemon));
                return;
            }
            Role::CoordinatorCandidate { host } => {
                let mut args: Vec<&std::ffi::OsStr> =
                    vec!["--host".as_ref(), host.as_ref(), "--lease-ms".as_ref(), "1000".as_ref()];
                args.extend(self.candidate_args.iter().map(std::ffi::OsStr::new));
                self.cluster.spawn("coordinator", &bin("coordinator"), &args)
            }
            Role::Mxfsd { idx } => {
                let port = self.mxfsd_ports.get(idx).copied().unwrap_or(0);
                let node = spawn_node(&mut self.cluster, idx, port);
                if self.mxfsd_ports.len() == idx {
                    self.mxfsd_ports.push(node.port);
                    write_cluster_file(&self.cluster, &self.mxfsd_ports);
                }
                node.daemon
            }
        };
        self.daemons.push((role, daemon));
    }

    /// One turn of the restart loop: a crashed process is reaped, its power loss applied,
    /// and restarted if it is one of the daemons; a daemon that died otherwise fails the test.
    fn supervise(&mut self) {
        let report = self.crash_dir.join("report");
        if let Some((name, pid)) = fs::read_to_string(&report).ok().and_then(|text| {
            let (name, pid) = text.trim().split_once(' ')?;
            Some((name.to_owned(), pid.parse::<u32>().ok()?))
        }) {
            assert_eq!(name, self.point, "a point other than the armed one fired");
            let crashed = self.daemons.iter().position(|(_, daemon)| daemon.pid() == pid);
            let role = crashed.map(|idx| {
                let (role, mut daemon) = self.daemons.remove(idx);
                wait_until("the crashed daemon to die", STARTUP_TIMEOUT, || {
                    (!daemon.is_running()).then_some(())
                });
                daemon.kill();
                role
            });
            if role.is_none() {
                let proc = PathBuf::from(format!("/proc/{pid}"));
                wait_until("the crashed process to die", STARTUP_TIMEOUT, || {
                    let state = fs::read_to_string(proc.join("stat")).unwrap_or_default();
                    (state.is_empty() || state.contains(") Z ")).then_some(())
                });
            }
            let images = self.crash_dir.join("images");
            if self.power_loss {
                lava_crash::apply_power_loss(&images).expect("the power-loss images apply");
                fs::remove_file(&images).expect("remove the images");
            }
            fs::remove_file(&report).expect("remove the report");
            eprintln!(
                "{}: crashed {}",
                self.point,
                role.map_or("a shepherd".to_owned(), |role| format!("{role:?}"))
            );
            self.fired += 1;
            if let Some(role) = role {
                self.start(role);
            }
        }
        for (role, daemon) in &mut self.daemons {
            assert!(daemon.is_running(), "{role:?} died without a crash point:\n{}", daemon.log());
        }
    }

    /// Runs `commands` to their end while restarting crashed daemons; their outputs.
    fn run_all(&mut self, commands: Vec<Command>) -> Vec<Output> {
        let mut children: Vec<Option<Child>> = commands
            .into_iter()
            .map(|mut command| {
                Some(command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start a command"))
            })
            .collect();
        let mut outputs: Vec<Option<Output>> = children.iter().map(|_| None).collect();
        let deadline = Instant::now() + PHASE_TIMEOUT;
        while outputs.iter().any(Option::is_none) {
            self.supervise();
            for (child, output) in children.iter_mut().zip(outputs.iter_mut()) {
                if output.is_none()
                    && let Some(running) = child.as_mut()
                    && running.try_wait().expect("try_wait").is_some()
                {
                    *output = Some(child.take().expect("checked").wait_with_output().expect("collect"));
                }
            }
            assert!(
                Instant::now() < deadline,
                "{}: commands still running after {PHASE_TIMEOUT:?}",
                self.point
            );
            std::thread::sleep(POLL);
        }
        outputs.into_iter().map(|output| output.expect("every command ended")).collect()
    }

    /// Waits, restarting crashed daemons, until `probe` says the goal is reached.
    fn wait<T>(&mut self, what: &str, mut probe: impl FnMut(&Rig) -> Option<T>) -> T {
        let deadline = Instant::now() + PHASE_TIMEOUT;
        loop {
            self.supervise();
            if let Some(value) = probe(self) {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "{} (power loss: {}): {what} not reached within {PHASE_TIMEOUT:?}",
                self.point,
                self.power_loss
            );
            std::thread::sleep(POLL);
        }
    }

    fn command(&self, program: &str) -> Command {
        self.cluster.command(bin(program))
    }

    /// A command for a probe inside [`Rig::wait`]: it gives up soon while a daemon is down
    /// (the loop restarts it between probes).
    fn probe(&self, program: &str) -> Command {
        let mut command = self.command(program);
        command.env("LAVA_RETRY_SECS", "2");
        command
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn assert_success(output: &Output, what: &str) {
    assert!(output.status.success(), "{what} failed: {}", String::from_utf8_lossy(&output.stderr));
}

// ----- batch: mbatchd, sbatchd, the shepherd -----

/// Whether a process state (see [`process_state`]) is what a signal should have left.
type ProcessCheck = fn(Option<char>) -> bool;

/// The state letter of `/proc/PID/stat` (`R`, `S`, `T`...), `None` once the process is gone.
fn process_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = stat.rsplit_once(") ")?.1.chars().next()?;
    (state != 'Z').then_some(state)
}

/// `bjobs -a` as `id -> (STAT, EXIT_CODE)`.
fn jobs(rig: &Rig) -> BTreeMap<u32, (String, String)> {
    let out =
        rig.probe("bjobs").args(["-a", "-noheader", "-o", "jobid stat exit_code"]).output().expect("bjobs");
    stdout(&out)
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            Some((
                fields.first()?.parse().ok()?,
                (fields.get(1)?.to_string(), fields.get(2).unwrap_or(&"-").to_string()),
            ))
        })
        .collect()
}

fn stat_of(rig: &Rig, job: u32) -> Option<String> {
    jobs(rig).remove(&job).map(|(stat, _)| stat)
}

/// The batch workload; `armed` says which daemon inherits the point.
fn batch_workload(point: &'static str, power_loss: bool) {
    let daemon = point.split_once('.').expect("daemon.boundary").0;
    let armed = if daemon == "mbatchd" { "mbatchd" } else { "sbatchd" };
    let mut rig = Rig::new(&["localhost"], &[armed], point, power_loss);
    rig.start(Role::Mbatchd);
    rig.start(Role::Sbatchd);
    let dir = rig.dir();
    let ledger = dir.join("ledger");
    let long_pid = dir.join("long.pid");
    // The shepherd's points are reached only as jobs start and end: the first phase.
    let arm_later = daemon != "shepherd";

    // 1. Short jobs, half of them failing with exit code 3.
    rig.arm();
    let n = workload_size();
    let scripts: Vec<(String, u32)> = (0..n)
        .map(|i| {
            let code = if i % 2 == 1 { 3 } else { 0 };
            (format!("echo $LSB_JOBID >> {}; exit {code}", ledger.display()), code)
        })
        .collect();
    let submits = scripts
        .iter()
        .map(|(script, _)| {
            let mut command = rig.command("bsub");
            command.args(["-o", "/dev/null", script]);
            command
        })
        .collect();
    let outputs = rig.run_all(submits);
    let mut want: BTreeMap<u32, u32> = BTreeMap::new();
    for (output, (_, code)) in outputs.iter().zip(&scripts) {
        assert_success(output, "bsub");
        want.insert(util::submitted_job_id(&stdout(output)), *code);
    }
    rig.wait("the short jobs to finish", |rig| {
        let jobs = jobs(rig);
        want.keys()
            .all(|job| jobs.get(job).is_some_and(|(stat, _)| stat == "DONE" || stat == "EXIT"))
            .then_some(())
    });
    if !arm_later {
        rig.disarm();
    }

    // 2. A long job, started.
    if arm_later {
        rig.arm();
    }
    let script =
        format!("echo $LSB_JOBID >> {}; echo $$ > {}; exec sleep 600", ledger.display(), long_pid.display());
    let output = rig.run_all(vec![{
        let mut command = rig.command("bsub");
        command.args(["-o", "/dev/null", &script]);
        command
    }]);
    assert_success(&output[0], "bsub");
    let long = util::submitted_job_id(&stdout(&output[0]));
    let pid: u32 = rig.wait("the long job to run", |rig| {
        let pid = fs::read_to_string(&long_pid).ok()?.trim().parse().ok()?;
        (stat_of(rig, long).as_deref() == Some("RUN") && process_state(pid).is_some()).then_some(pid)
    });

    // 3-5. Stop, resume, kill: each answered signal takes effect.
    let steps: [(&str, &str, ProcessCheck); 3] = [
        ("bstop", "USUSP", |state| state == Some('T')),
        ("bresume", "RUN", |state| state.is_some_and(|state| state != 'T')),
        ("bkill", "EXIT", |state| state.is_none()),
    ];
    for (program, stat, process_ok) in steps {
        if arm_later {
            rig.arm();
        }
        let output = rig.run_all(vec![{
            let mut command = rig.command(program);
            command.arg(long.to_string());
            command
        }]);
        assert_success(&output[0], program);
        rig.wait(&format!("{program} to take effect (job {stat}, process state)"), |rig| {
            (stat_of(rig, long).as_deref() == Some(stat) && process_ok(process_state(pid))).then_some(())
        });
    }
    rig.disarm();

    assert!(rig.fired > 0, "{point} (power loss: {power_loss}) was never reached by the workload");
    let final_jobs = jobs(&rig);
    let mut runs: BTreeMap<u32, usize> = BTreeMap::new();
    for line in fs::read_to_string(&ledger).unwrap_or_default().lines() {
        *runs.entry(line.trim().parse().expect("a job id")).or_default() += 1;
    }
    want.insert(long, 0);
    for (job, code) in &want {
        let (stat, exit_code) =
            final_jobs.get(job).unwrap_or_else(|| panic!("{point}: acknowledged job {job} is gone"));
        let ran = runs.get(job).copied().unwrap_or(0);
        if daemon == "shepherd" && ran == 0 {
            assert_eq!(stat, "EXIT", "{point}: job {job} never ran (its shepherd died first) and is {stat}");
            continue;
        }
        assert_eq!(ran, 1, "{point} (power loss: {power_loss}): job {job} ran {ran} times");
        if *job == long {
            assert_eq!(stat, "EXIT", "{point}: the killed job");
        } else if *code == 0 {
            assert_eq!(stat, "DONE", "{point}: job {job}");
        } else {
            assert_eq!((stat.as_str(), exit_code.as_str()), ("EXIT", "3"), "{point}: job {job}");
        }
    }
    assert!(runs.keys().all(|job| want.contains_key(job)), "{point}: a job nobody submitted ran: {runs:?}");
}

/// mbatchd's points that only a leading master candidate reaches.
const CANDIDATE_POINTS: [&str; 1] = ["mbatchd.acknowledged_before_own_fsync"];

/// The master candidates h1, h2, h3 (`LSF_MASTER_LIST`) and their loopback addresses; the
/// execution host is h0 (127.0.0.1).
const CANDIDATES: [(&str, &str); 3] = [("h1", "127.0.0.2"), ("h2", "127.0.0.3"), ("h3", "127.0.0.4")];

/// mbatchd's points: on master candidates for [`CANDIDATE_POINTS`], else one mbatchd.
fn mbatchd_workload(point: &'static str, power_loss: bool) {
    if CANDIDATE_POINTS.contains(&point) {
        candidates_workload(point, power_loss, 1, &[])
    } else {
        batch_workload(point, power_loss)
    }
}

/// A cluster of the execution host h0 (sbatchd) and the master candidates h1–h3, whose
/// daemons spawned under the names in `armed` inherit `point`; nothing started yet.
fn candidates_rig(armed: &[&str], point: &'static str, power_loss: bool) -> Rig {
    let mut rig = Rig::new(&["h0", "h1", "h2", "h3"], armed, point, power_loss);
    let list: Vec<&str> = CANDIDATES.iter().map(|(name, _)| *name).collect();
    rig.cluster.set_master_candidates(&list);
    rig.sbatchd_host = "h0";
    rig
}

/// Three master candidates (started with `args` too) and an execution host: `bsub` one job
/// at a time until the point fires (and the harness restarts the candidate it fired in),
/// `crashes` times, each time armed again; a few more jobs after. Every acknowledged job ends
/// DONE, having run exactly once, and no other job runs.
fn candidates_workload(point: &'static str, power_loss: bool, crashes: usize, args: &[&'static str]) {
    let mut rig = candidates_rig(&["mbatchd"], point, power_loss);
    rig.candidate_args = args.to_vec();
    rig.mbd_port = util::fixed_port();
    rig.cluster.rewrite_lsf_conf("LSB_MBD_PORT", &rig.mbd_port.to_string());
    rig.cluster.rewrite_lsf_conf("LAVA_MBD_REPL_PORT", &util::fixed_port().to_string());
    for (host, _) in CANDIDATES {
        rig.start(Role::Candidate { host });
    }
    rig.start(Role::Sbatchd);
    let ledger = rig.dir().join("ledger");
    let submit = |rig: &mut Rig| {
        let mut command = rig.command("bsub");
        command.args(["-m", "h0", "-o", "/dev/null", &format!("echo $LSB_JOBID >> {}", ledger.display())]);
        let output = rig.run_all(vec![command]);
        assert_success(&output[0], "bsub");
        util::submitted_job_id(&stdout(&output[0]))
    };
    let mut want = BTreeSet::new();
    // Some answers go out before the leader's own fsync ends: the point
    // `mbatchd.acknowledged_before_own_fsync` fired after 8 to 78 submissions one at a time
    // on the 2-core development machine.
    rig.crash_repeatedly(crashes, 1000, |rig| {
        want.insert(submit(rig));
    });
    eprintln!("{point} (power loss: {power_loss}): {} submissions", want.len());
    for _ in 0..workload_size() {
        want.insert(submit(&mut rig));
    }
    rig.wait("every acknowledged job to be DONE", |rig| {
        let jobs = jobs(rig);
        want.iter().all(|job| jobs.get(job).is_some_and(|(stat, _)| stat == "DONE")).then_some(())
    });
    let mut runs: BTreeMap<u32, usize> = BTreeMap::new();
    for line in fs::read_to_string(&ledger).unwrap_or_default().lines() {
        *runs.entry(line.trim().parse().expect("a job id")).or_default() += 1;
    }
    for job in &want {
        let ran = runs.get(job).copied().unwrap_or(0);
        assert_eq!(ran, 1, "{point} (power loss: {power_loss}): job {job} ran {ran} times");
    }
    assert!(runs.keys().all(|job| want.contains(job)), "{point}: a job nobody submitted ran: {runs:?}");
}

fn run_points(daemon: &str, power_loss: bool, workload: fn(&'static str, bool)) {
    let points: Vec<&'static str> = lava_crash::points_of(daemon).map(|point| point.name).collect();
    assert!(!points.is_empty(), "no crash point registered for {daemon}");
    for point in points {
        eprintln!("crash point {point} (power loss: {power_loss})");
        workload(point, power_loss);
    }
}

#[test]
fn mbatchd_crash_points() {
    run_points("mbatchd", false, mbatchd_workload);
}

#[test]
fn mbatchd_crash_points_with_power_loss() {
    run_points("mbatchd", true, mbatchd_workload);
}

#[test]
fn sbatchd_crash_points() {
    run_points("sbatchd", false, batch_workload);
}

#[test]
fn sbatchd_crash_points_with_power_loss() {
    run_points("sbatchd", true, batch_workload);
}

#[test]
fn shepherd_crash_points() {
    run_points("shepherd", false, batch_workload);
    run_points("shepherd", true, batch_workload);
}

// ----- the coordinator -----

/// `TASK LEASE STATE` lines a `coordctl work` recorded (a torn last line is ignored).
fn worker_record(path: &Path) -> Vec<(u64, u64, String)> {
    let mut text = fs::read_to_string(path).unwrap_or_default();
    text.truncate(text.rfind('\n').map_or(0, |end| end + 1));
    text.lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            (fields[0].parse().expect("task"), fields[1].parse().expect("lease"), fields[2].to_owned())
        })
        .collect()
}

/// The coordinator's points that only a leading master candidate reaches.
const COORDINATOR_CANDIDATE_POINTS: [&str; 1] = ["coordinator.acknowledged_before_own_fsync"];

/// The coordinator's points: on master candidates for [`COORDINATOR_CANDIDATE_POINTS`], else
/// one coordinator.
fn coordinator_workload(point: &'static str, power_loss: bool) {
    if COORDINATOR_CANDIDATE_POINTS.contains(&point) {
        coordinator_candidates_workload(point, power_loss)
    } else {
        single_coordinator_workload(point, power_loss)
    }
}

/// `coordctl submit` of an empty task; its id once acknowledged.
fn coordctl_submit(rig: &mut Rig) -> Option<u64> {
    let mut command = rig.command("coordctl");
    command.args(["submit", "--file", "/dev/null"]);
    let output = rig.run_all(vec![command]).remove(0);
    output.status.success().then(|| stdout(&output).trim().parse().expect("a task id"))
}

/// Two `coordctl work` processes that record what they were acknowledged, run until idle
/// (restarting crashed daemons meanwhile); the records' paths.
fn coordctl_workers(rig: &mut Rig) -> Vec<PathBuf> {
    let records: Vec<PathBuf> = (0..2).map(|w| rig.dir().join(format!("worker{w}.rec"))).collect();
    let workers = records
        .iter()
        .enumerate()
        .map(|(w, record)| {
            let mut command = rig.command("coordctl");
            command.args(["work", "--worker", &format!("w{w}"), "--idle", "3", "--retry-secs", "60"]);
            command.arg("--record").arg(record);
            command
        })
        .collect();
    for output in rig.run_all(workers) {
        assert_success(&output, "coordctl work");
    }
    records
}

/// Every submission in `submitted` is COMPLETED, and no outcome in the workers' `records`
/// was acknowledged twice or differs from what the coordinator serves.
fn coordinator_check(rig: &Rig, submitted: &BTreeSet<u64>, records: &[PathBuf]) {
    let (point, power_loss) = (rig.point, rig.power_loss);
    let mut acknowledged: BTreeMap<u64, (u64, String)> = BTreeMap::new();
    for path in records {
        for (task, lease, state) in worker_record(path) {
            assert!(
                acknowledged.insert(task, (lease, state)).is_none(),
                "{point}: task {task} acknowledged twice"
            );
        }
    }
    for task in submitted {
        let output = rig.probe("coordctl").args(["status", &task.to_string()]).output().expect("coordctl");
        assert_success(&output, &format!("{point}: status of acknowledged task {task}"));
        let text = stdout(&output);
        let fields: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(fields.get(3), Some(&"COMPLETED"), "{point} (power loss: {power_loss}): {text}");
        if let Some((lease, state)) = acknowledged.get(task) {
            assert_eq!(
                (fields[5], fields[3]),
                (lease.to_string().as_str(), state.as_str()),
                "{point}: {text}"
            );
        }
    }
}

/// Three coordinator candidates on h1–h3 (h0's sbatchd issues the credentials). The
/// leader's flushes are slowed (`FsyncFault::slow`), so its followers' acknowledgements
/// commit each submission before its own fsync ends: submissions one at a time until the
/// point fires in the leader (and the harness restarts it), a few more, then workers. Every
/// acknowledged submission ends COMPLETED, each outcome acknowledged once.
fn coordinator_candidates_workload(point: &'static str, power_loss: bool) {
    let mut rig = candidates_rig(&["coordinator"], point, power_loss);
    let Some(fault) = FsyncFault::install(&mut rig.cluster, "coordinator") else { return };
    let port = util::fixed_port();
    rig.cluster.rewrite_lsf_conf("LAVA_COORD_PORT", &port.to_string());
    rig.cluster.rewrite_lsf_conf("LAVA_COORD_REPL_PORT", &util::fixed_port().to_string());
    rig.start(Role::Sbatchd);
    for (host, _) in CANDIDATES {
        rig.start(Role::CoordinatorCandidate { host });
    }
    let leader = rig.wait("a coordinator candidate to lead", |_| {
        CANDIDATES.iter().find_map(|(host, ip)| {
            let addr: std::net::SocketAddr = format!("{ip}:{port}").parse().expect("an address");
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok().map(|_| *host)
        })
    });
    let leader_pid = rig
        .daemons
        .iter()
        .find(|(role, _)| *role == Role::CoordinatorCandidate { host: leader })
        .expect("the leader runs")
        .1
        .pid();
    fault.slow(leader_pid, Duration::from_millis(300));
    let mut submitted = BTreeSet::new();
    rig.arm();
    for _ in 0..50 {
        let task = coordctl_submit(&mut rig);
        // The submission the leader crashed after is acknowledged all the same (its answer
        // was written before the crash; a retry under the same id gets the same task).
        assert!(task.is_some() || rig.fired == 0, "{point}: the submission it crashed after failed");
        submitted.extend(task);
        if rig.fired > 0 {
            break;
        }
    }
    rig.disarm();
    fault.heal(leader_pid);
    assert!(rig.fired > 0, "{point} (power loss: {power_loss}) was never reached by the workload");
    eprintln!("{point}: reached after {} submissions", submitted.len());
    for _ in 0..workload_size() * 2 {
        submitted.extend(coordctl_submit(&mut rig));
    }
    let records = coordctl_workers(&mut rig);
    coordinator_check(&rig, &submitted, &records);
}

fn single_coordinator_workload(point: &'static str, power_loss: bool) {
    let mut rig = Rig::new(&["localhost"], &["coordinator"], point, power_loss);
    rig.start(Role::Sbatchd);
    rig.start(Role::Coordinator { port: 0 });
    let n = workload_size() * 2;

    rig.arm();
    let submits = (0..n)
        .map(|_| {
            let mut command = rig.command("coordctl");
            command.args(["submit", "--file", "/dev/null"]);
            command
        })
        .collect();
    let submitted: BTreeSet<u64> = rig
        .run_all(submits)
        .iter()
        .filter(|output| output.status.success())
        .map(|output| stdout(output).trim().parse().expect("a task id"))
        .collect();

    rig.arm();
    let records = coordctl_workers(&mut rig);
    rig.disarm();
    assert!(rig.fired > 0, "{point} (power loss: {power_loss}) was never reached by the workload");

    // A clean restart: what is served now comes from the WAL.
    let idx =
        rig.daemons.iter().position(|(role, _)| matches!(role, Role::Coordinator { .. })).expect("running");
    let (role, mut daemon) = rig.daemons.remove(idx);
    assert!(daemon.terminate().success(), "the coordinator stops cleanly");
    rig.start(role);
    coordinator_check(&rig, &submitted, &records);
}

#[test]
fn coordinator_crash_points() {
    run_points("coordinator", false, coordinator_workload);
    run_points("coordinator", true, coordinator_workload);
}

// ----- mxfsd -----

fn mxfsd_socket(cluster: &Cluster, idx: usize) -> PathBuf {
    cluster.dir().join(format!("run/{}.sock", HOSTS[idx]))
}

/// `n` lockers per node, each holding EX on one resource for a moment and logging when it
/// held it; a locker whose node crashed under it may fail (its interval is not counted).
fn lockers(rig: &Rig, n: usize, log: &Path) -> Vec<Command> {
    let script = format!("s=$(date +%s%N); sleep 0.05; e=$(date +%s%N); echo \"$s $e\" >> {}", log.display());
    (0..n * HOSTS.len())
        .map(|i| {
            let mut command = rig.command("mxfsctl");
            command.arg("--socket").arg(mxfsd_socket(&rig.cluster, i % HOSTS.len()));
            command.args(["lock", "R", "EX", "--", "sh", "-c", &script]);
            command
        })
        .collect()
}

fn mxfsd_workload(point: &'static str, power_loss: bool) {
    let armed: Vec<String> = HOSTS.iter().map(|host| format!("mxfsd-{host}")).collect();
    let armed: Vec<&str> = armed.iter().map(String::as_str).collect();
    let mut rig = Rig::new(&HOSTS, &armed, point, power_loss);
    rig.cluster.rewrite_lsf_conf("LAVA_MXFSD_RENEW_MS", "200");
    rig.cluster.rewrite_lsf_conf("LAVA_MXFSD_NODE_TIMEOUT_MS", "1500");
    write_cluster_file(&rig.cluster, &[]);
    for idx in 0..HOSTS.len() {
        rig.start(Role::Mxfsd { idx });
    }
    let held = rig.dir().join("held.log");
    let joined = |rig: &Rig| {
        (1..HOSTS.len()).all(|idx| {
            Client::connect(&mxfsd_socket(&rig.cluster, idx))
                .ok()
                .and_then(|mut client| client.status().ok())
                .is_some_and(|text| text.contains("MASTER CONNECTION: joined"))
        })
    };
    rig.wait("the nodes to join", |rig| joined(rig).then_some(()));

    // 1. Lockers on every node.
    rig.arm();
    let n = workload_size();
    let _outputs = rig.run_all(lockers(&rig, n, &held));
    // 2. A node dies (kill -9, not a crash point) and comes back: recovery, new epochs.
    rig.arm();
    let idx = rig.daemons.iter().position(|(role, _)| *role == Role::Mxfsd { idx: 2 }).expect("h3 runs");
    let (role, mut daemon) = rig.daemons.remove(idx);
    daemon.kill();
    rig.wait("h3 to be declared dead", |rig| {
        (0..2)
            .filter_map(|idx| Client::connect(&mxfsd_socket(&rig.cluster, idx)).ok()?.status().ok())
            .any(|text| {
                text.lines()
                    .any(|line| line.split_whitespace().nth(1) == Some("h3") && line.contains("unavail"))
            })
            .then_some(())
    });
    rig.start(role);
    rig.wait("the nodes to join again", |rig| joined(rig).then_some(()));
    // 3. Lockers again.
    rig.arm();
    let _outputs = rig.run_all(lockers(&rig, n, &held));
    rig.disarm();
    assert!(rig.fired > 0, "{point} (power loss: {power_loss}) was never reached by the workload");

    let mut intervals: Vec<(u128, u128)> = fs::read_to_string(&held)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let (start, end) = line.split_once(' ')?;
            Some((start.parse().ok()?, end.parse().ok()?))
        })
        .collect();
    intervals.sort();
    assert!(!intervals.is_empty(), "{point}: no locker held R");
    for pair in intervals.windows(2) {
        assert!(
            pair[0].1 <= pair[1].0,
            "{point} (power loss: {power_loss}): two holders of EX on R at once: {pair:?}"
        );
    }
}

#[test]
fn mxfsd_crash_points() {
    run_points("mxfsd", false, mxfsd_workload);
    run_points("mxfsd", true, mxfsd_workload);
}

// ----- the replicated log that mbatchd's and the coordinator's candidates share -----

/// Crashes per replica point and daemon: each armed again after the last, so that the
/// point fires in leaders and followers, and in candidates just started again.
const REPLICA_CRASHES: usize = 3;

/// Compactions every few entries, so that snapshots are made all the time and a candidate
/// started again catches up from the leader's snapshot.
const FREQUENT_SNAPSHOTS: [&str; 2] = ["--snapshot-events", "4"];

/// The replica log's points, in mbatchd's candidates, then in the coordinator's.
fn replica_workload(point: &'static str, power_loss: bool) {
    candidates_workload(point, power_loss, REPLICA_CRASHES, &FREQUENT_SNAPSHOTS);
    coordinator_replica_workload(point, power_loss);
}

/// Three coordinator candidates (h0's sbatchd issues the credentials): submissions one at a
/// time until the point fires, [`REPLICA_CRASHES`] times, a few more, then workers, armed
/// once more. Every acknowledged submission ends COMPLETED, each outcome acknowledged once.
fn coordinator_replica_workload(point: &'static str, power_loss: bool) {
    let mut rig = candidates_rig(&["coordinator"], point, power_loss);
    rig.candidate_args = FREQUENT_SNAPSHOTS.to_vec();
    rig.cluster.rewrite_lsf_conf("LAVA_COORD_PORT", &util::fixed_port().to_string());
    rig.cluster.rewrite_lsf_conf("LAVA_COORD_REPL_PORT", &util::fixed_port().to_string());
    rig.start(Role::Sbatchd);
    for (host, _) in CANDIDATES {
        rig.start(Role::CoordinatorCandidate { host });
    }
    let mut submitted = BTreeSet::new();
    rig.crash_repeatedly(REPLICA_CRASHES, 200, |rig| submitted.extend(coordctl_submit(rig)));
    for _ in 0..workload_size() * 2 {
        submitted.extend(coordctl_submit(&mut rig));
    }
    rig.arm();
    let records = coordctl_workers(&mut rig);
    rig.disarm();
    coordinator_check(&rig, &submitted, &records);
}

#[test]
fn replica_crash_points() {
    run_points("replica", false, replica_workload);
}

#[test]
fn replica_crash_points_with_power_loss() {
    run_points("replica", true, replica_workload);
}

/// Every daemon named in the registry has a test above.
#[test]
fn every_registered_daemon_has_a_workload() {
    let known = ["mbatchd", "sbatchd", "shepherd", "coordinator", "mxfsd", "replica"];
    for point in lava_crash::POINTS {
        let daemon = point.name.split_once('.').expect("daemon.boundary").0;
        assert!(known.contains(&daemon), "{}: no crash-point workload for {daemon}", point.name);
    }
}
