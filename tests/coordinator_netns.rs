//! The coordinator's failover across real network stacks (issue 20; docs/failover.md, "One
//! log for two daemons"): six hosts in network namespaces (`util::netns`, 10.81.0.1-6/24).
//! The master candidates c1, c2 and c3 (`LSF_MASTER_LIST`) run the coordinator and an
//! sbatchd; the worker hosts w1 and w2 run an sbatchd (their credentials) and two pull
//! workers each (`coordctl work`, which records every completion acknowledged); the client
//! host cl runs an sbatchd and a submitter that runs `coordctl submit --id ID` without
//! pause, each submission under an id of its own that the test keeps.
//!
//! On one cluster, each fault while the load runs: (a) `kill -9` of the leader's host
//! daemons, then (d) their restart (the candidate comes back from its disk and follows);
//! (b) the leader's cable pulled, a `coordctl submit` on its own host, then the cable
//! plugged back; (c) `SIGSTOP` of the leader's coordinator for longer than an election, a
//! submission sent to its address alone, then `SIGCONT`. At the end: a submission that was
//! never answered is sent again under its id until it is; then the tasks are exactly the
//! ids submitted (a retry across a failover never made a second task), each is COMPLETED,
//! no task's completion was acknowledged twice, and what the cut-off and the paused old
//! leaders were handed was never acknowledged and never made a task (sent again under its
//! id afterwards, it is new).
//!
//! Where namespaces cannot be created the test prints `skipped: REASON` and passes; the
//! loopback version is `tests/coordinator_failover.rs`.

mod util;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use util::netns::{Netns, exec_in as in_ns};
use util::{Cluster, Daemon, STARTUP_TIMEOUT, wait_until};

const NS_PREFIX: &str = "lavacoo";
const SUBNET: &str = "10.81.0";
const HOSTS: [&str; 6] = ["c1", "c2", "c3", "w1", "w2", "cl"];
const CANDIDATES: usize = 3;
const WORKER_HOSTS: [usize; 2] = [3, 4];
const CLIENT: usize = 5;
/// Generous bound on a failover and on each wait for progress (the machine is noisy).
const FAILOVER_BOUND: Duration = Duration::from_secs(60);
/// Tasks completed after each fault before the next one (the load goes on).
const PROGRESS: usize = 20;
/// A lease lost with its worker's connection is leased again after this long.
const LEASE_MS: &str = "4000";

fn bin(name: &str) -> PathBuf {
    util::mbatchd_bin().with_file_name(name)
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

fn signal(pid: &str, name: &str) {
    let status = Command::new("kill").args([name, pid]).status().expect("kill");
    assert!(status.success(), "kill {name} {pid}");
}

/// One simulated host: its namespace, its configuration and its daemons by name.
struct Host {
    name: &'static str,
    ns: String,
    envdir: PathBuf,
    daemons: BTreeMap<&'static str, Daemon>,
}

/// What the submitter shares with the test: every id it used, with its payload, and the
/// task each answered one was given.
#[derive(Default)]
struct Load {
    stop: AtomicBool,
    sent: Mutex<Vec<String>>,
    answered: Mutex<BTreeMap<String, u64>>,
    /// Submissions whose retry found the task an earlier attempt had created.
    repeated: std::sync::atomic::AtomicUsize,
}

/// Fields drop in order: the workers and daemons, then the folder, then the namespaces.
struct Rig {
    workers: Vec<Child>,
    hosts: Vec<Host>,
    cluster: Cluster,
    netns: Netns,
    coord_port: u16,
    records: PathBuf,
}

impl Drop for Rig {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            let _gone = worker.kill();
            let _reaped = worker.wait();
        }
    }
}

impl Rig {
    fn spawn(&mut self, idx: usize, daemon: &'static str) {
        let host = &self.hosts[idx];
        let (name, ns, envdir) = (host.name, host.ns.clone(), host.envdir.clone());
        let ready = self.cluster.dir().join(format!("run/{daemon}.{name}.ready"));
        let _stale = std::fs::remove_file(&ready);
        let program = bin(daemon);
        let mut args: Vec<&OsStr> =
            vec!["netns".as_ref(), "exec".as_ref(), ns.as_ref(), program.as_os_str(), "--host".as_ref()];
        args.push(name.as_ref());
        match daemon {
            "coordinator" => args.extend::<[&OsStr; 4]>([
                "--lease-ms".as_ref(),
                LEASE_MS.as_ref(),
                "--snapshot-events".as_ref(),
                "200".as_ref(),
            ]),
            _ => args.extend::<[&OsStr; 4]>([
                "--envdir".as_ref(),
                envdir.as_os_str(),
                "--ready-file".as_ref(),
                ready.as_os_str(),
            ]),
        }
        let mut process = self.cluster.spawn(daemon, Path::new("ip"), &args);
        wait_until(&format!("{daemon} on {name} started"), STARTUP_TIMEOUT, || {
            assert!(process.is_running(), "{daemon} on {name} exited:\n{}", process.log());
            let started = match daemon {
                "coordinator" => process.log().contains("replicated WAL opened"),
                _ => ready.exists(),
            };
            started.then_some(())
        });
        self.hosts[idx].daemons.insert(daemon, process);
    }

    /// A host's daemons: an sbatchd everywhere (the credentials), the coordinator on the
    /// candidates.
    fn start_host(&mut self, idx: usize) {
        self.spawn(idx, "sbatchd");
        if idx < CANDIDATES {
            self.spawn(idx, "coordinator");
        }
    }

    fn coordctl(&self, idx: usize) -> Command {
        let host = &self.hosts[idx];
        in_ns(&host.ns, &host.envdir, &bin("coordctl"))
    }

    /// Whether candidate `idx`'s coordinator port takes a connection from the client host
    /// within a second (only a leader listens; a paused one's kernel still answers).
    fn listens(&self, idx: usize) -> bool {
        let probe = format!("exec 3<>/dev/tcp/{}/{}", self.netns.addr(idx), self.coord_port);
        Command::new("ip")
            .args(["netns", "exec", &self.hosts[CLIENT].ns, "timeout", "1", "bash", "-c", &probe])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    fn leader_besides(&self, skip: Option<usize>) -> usize {
        wait_until("a candidate serves", FAILOVER_BOUND, || {
            (0..CANDIDATES).filter(|idx| Some(*idx) != skip).find(|idx| self.listens(*idx))
        })
    }

    /// Every `TASK LEASE STATE` line the workers recorded.
    fn completions(&self) -> Vec<(u64, u64, String)> {
        let mut all = Vec::new();
        for entry in std::fs::read_dir(&self.records).expect("read the records") {
            let mut text = std::fs::read_to_string(entry.expect("an entry").path()).unwrap_or_default();
            text.truncate(text.rfind('\n').map_or(0, |end| end + 1));
            for line in text.lines() {
                let fields: Vec<&str> = line.split(' ').collect();
                all.push((
                    fields[0].parse().expect("task"),
                    fields[1].parse().expect("lease"),
                    fields[2].to_owned(),
                ));
            }
        }
        all
    }

    /// Waits until `PROGRESS` more completions were acknowledged: the load goes on.
    fn progress(&self, what: &str) {
        let before = self.completions().len();
        wait_until(&format!("{PROGRESS} more tasks completed after {what}"), FAILOVER_BOUND, || {
            (self.completions().len() >= before + PROGRESS).then_some(())
        });
    }

    fn coordinator_pid(&self, idx: usize) -> String {
        self.hosts[idx].daemons["coordinator"].pid().to_string()
    }

    /// `coordctl submit --id ID` of `payload` from host `idx`, retrying `retry_secs`.
    fn submit(&self, idx: usize, id: &str, payload: &str, retry_secs: u32) -> Output {
        let mut command = self.coordctl(idx);
        command.env("LAVA_RETRY_SECS", retry_secs.to_string()).args(["submit", "--id", id, "--file"]);
        let file = self.cluster.dir().join(format!("payloads/{id}"));
        std::fs::write(&file, payload).expect("write a payload");
        command.arg(&file).output().expect("run coordctl submit")
    }
}

/// The id and payload of the `n`th submission of `what`.
fn id_of(what: u64, n: u64) -> String {
    format!("{what:x}{n:016x}")
}

fn start_submitter(rig: &Rig, load: &Arc<Load>) -> std::thread::JoinHandle<()> {
    let client = &rig.hosts[CLIENT];
    let (ns, envdir, dir) = (client.ns.clone(), client.envdir.clone(), rig.cluster.dir().to_owned());
    let load = Arc::clone(load);
    std::thread::spawn(move || {
        let mut n = 0;
        while !load.stop.load(Ordering::SeqCst) {
            n += 1;
            let id = id_of(1, n);
            let file = dir.join(format!("payloads/{id}"));
            std::fs::write(&file, &id).expect("write a payload");
            load.sent.lock().expect("lock").push(id.clone());
            let out = in_ns(&ns, &envdir, &bin("coordctl"))
                .env("LAVA_RETRY_SECS", "90")
                .args(["submit", "--id", &id, "--file"])
                .arg(&file)
                .output()
                .expect("run coordctl submit");
            if out.status.success() {
                let task = String::from_utf8_lossy(&out.stdout).trim().parse().expect("a task id");
                load.answered.lock().expect("lock").insert(id, task);
                if String::from_utf8_lossy(&out.stderr).contains("had already created") {
                    load.repeated.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    })
}

fn build(netns: Netns) -> Rig {
    let cluster = Cluster::with_hosts(&HOSTS);
    let rows: String = HOSTS
        .iter()
        .enumerate()
        .map(|(idx, host)| format!("{host} ! ! 1 (cs linux) {}\n", netns.addr(idx)))
        .collect();
    cluster.write_file(
        "etc/lsf.cluster.lavacore",
        &format!(
            "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
             HOSTNAME model type server RESOURCES LAVA_ADDR\n{rows}End Host\n"
        ),
    );
    cluster.rewrite_lsf_conf("LSF_MASTER_LIST", "\"c1 c2 c3\"");
    let coord_port = util::fixed_port();
    cluster.rewrite_lsf_conf("LAVA_COORD_PORT", &coord_port.to_string());
    cluster.rewrite_lsf_conf("LAVA_COORD_REPL_PORT", &util::fixed_port().to_string());
    let hosts = HOSTS
        .iter()
        .enumerate()
        .map(|(idx, name)| Host {
            name,
            ns: netns.hosts[idx].clone(),
            envdir: cluster.host_envdir(name),
            daemons: BTreeMap::new(),
        })
        .collect();
    let records = cluster.dir().join("records");
    std::fs::create_dir_all(&records).expect("create records/");
    std::fs::create_dir_all(cluster.dir().join("payloads")).expect("create payloads/");
    Rig { workers: Vec::new(), hosts, cluster, netns, coord_port, records }
}

// Goal: see the module doc.
#[test]
fn the_coordinator_fails_over_under_load_across_network_namespaces() {
    let started = Instant::now();
    let netns = match Netns::create(NS_PREFIX, &HOSTS, SUBNET) {
        Ok(netns) => netns,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            return;
        }
    };
    let mut rig = build(netns);
    for idx in 0..HOSTS.len() {
        rig.start_host(idx);
    }
    let leader = rig.leader_besides(None);
    eprintln!("first leader: {}", HOSTS[leader]);
    for idx in WORKER_HOSTS {
        for k in 0..2 {
            let name = format!("{}-{k}", HOSTS[idx]);
            let record = rig.records.join(format!("{name}.rec"));
            let worker = rig
                .coordctl(idx)
                .args(["work", "--worker", &name, "--idle", "600", "--retry-secs", "120", "--record"])
                .arg(&record)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a worker");
            rig.workers.push(worker);
        }
    }
    let load = Arc::new(Load::default());
    let submitter = start_submitter(&rig, &load);
    rig.progress("the start");

    // (a) The leader's host daemons killed (-9); (d) then started again.
    for daemon in rig.hosts[leader].daemons.values_mut() {
        daemon.kill();
    }
    rig.hosts[leader].daemons.clear();
    let new = rig.leader_besides(Some(leader));
    eprintln!("case a: {} took over from {}", HOSTS[new], HOSTS[leader]);
    rig.progress("case a");
    rig.start_host(leader);
    rig.progress("case d");

    // (b) The leader's cable pulled: a submission on its own host is never acknowledged.
    let leader = rig.leader_besides(None);
    rig.netns.set_cable(leader, false).expect("pull the leader's cable");
    let new = rig.leader_besides(Some(leader));
    eprintln!("case b: {} took over from {}", HOSTS[new], HOSTS[leader]);
    let isolated = id_of(2, 1);
    let out = rig.submit(leader, &isolated, &isolated, 8);
    assert!(!out.status.success(), "the cut-off old leader acknowledged a task: {}", text(&out));
    eprintln!("case b: the submission on the cut-off host: {}", text(&out).trim());
    rig.netns.set_cable(leader, true).expect("plug the cable back");
    rig.progress("case b");

    // (c) The leader's coordinator paused beyond an election, a submission sent to it
    // alone, then resumed: it acknowledges nothing and starts again to follow.
    let leader = rig.leader_besides(None);
    let pid = rig.coordinator_pid(leader);
    signal(&pid, "-STOP");
    let new = rig.leader_besides(Some(leader));
    eprintln!("case c: {} took over from {}", HOSTS[new], HOSTS[leader]);
    let direct = id_of(3, 1);
    let file = rig.cluster.dir().join(format!("payloads/{direct}"));
    std::fs::write(&file, &direct).expect("write a payload");
    let addr = format!("{}:{}", rig.netns.addr(leader), rig.coord_port);
    let sent = rig
        .coordctl(CLIENT)
        .env("LAVA_RETRY_SECS", "12")
        .args(["--addr", &addr, "submit", "--id", &direct, "--file"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start coordctl submit");
    std::thread::sleep(Duration::from_secs(2));
    signal(&pid, "-CONT");
    let out = sent.wait_with_output().expect("coordctl ends");
    assert!(!out.status.success(), "the resumed old leader acknowledged a task: {}", text(&out));
    eprintln!("case c: the submission to the resumed old leader: {}", text(&out).trim());
    let resumed = rig.hosts[leader].daemons.get_mut("coordinator").expect("running");
    wait_until("the resumed leader starts again to follow", FAILOVER_BOUND, || {
        resumed.log().contains("no longer the leader: starting again to follow").then_some(())
    });
    assert!(resumed.is_running(), "{}", resumed.log());
    rig.progress("case c");

    load.stop.store(true, Ordering::SeqCst);
    submitter.join().expect("the submitter ends");
    // What was never answered is sent again under its id until it is.
    let sent: Vec<String> = load.sent.lock().expect("lock").clone();
    let mut answered = load.answered.lock().expect("lock").clone();
    for id in &sent {
        if !answered.contains_key(id) {
            let out = rig.submit(CLIENT, id, id, 90);
            assert!(out.status.success(), "{id}: {}", text(&out));
            answered
                .insert(id.clone(), String::from_utf8_lossy(&out.stdout).trim().parse().expect("a task id"));
        }
    }
    // The old leaders' submissions were never made: sent again, they are new.
    for id in [&isolated, &direct] {
        let out = rig.submit(CLIENT, id, id, 90);
        assert!(out.status.success(), "{id}: {}", text(&out));
        assert!(!text(&out).contains("had already created"), "an old leader created {id}: {}", text(&out));
        answered.insert(id.clone(), String::from_utf8_lossy(&out.stdout).trim().parse().expect("a task id"));
    }
    let tasks: BTreeSet<u64> = answered.values().copied().collect();
    assert_eq!(tasks.len(), answered.len(), "two ids answered with one task");
    // Exactly the ids' tasks exist, every one COMPLETED.
    let mut last = String::new();
    wait_until("every task completed", FAILOVER_BOUND * 2, || {
        let out =
            rig.coordctl(CLIENT).env("LAVA_RETRY_SECS", "5").arg("status").output().expect("coordctl status");
        last = text(&out);
        let want = format!("WAITING 0 LEASED 0 COMPLETED {} FAILED 0", answered.len());
        (String::from_utf8_lossy(&out.stdout).lines().next() == Some(&want)).then_some(())
    });
    assert!(last.contains("COMPLETED"), "{last}");
    let completions = rig.completions();
    let mut once: BTreeMap<u64, u64> = BTreeMap::new();
    for (task, lease, state) in &completions {
        assert_eq!(state, "COMPLETED");
        assert!(tasks.contains(task), "task {task} completed, no id answered it");
        assert!(once.insert(*task, *lease).is_none(), "task {task} completed twice: {completions:?}");
    }
    eprintln!(
        "coordinator_netns: {} submissions ({} answered at first, {} of them by a retry that found its \
         task), {} completions recorded, {:.0} s",
        sent.len(),
        load.answered.lock().expect("lock").len(),
        load.repeated.load(Ordering::SeqCst),
        completions.len(),
        started.elapsed().as_secs_f64()
    );
}
