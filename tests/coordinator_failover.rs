//! The coordinator's failover on the real daemons (docs/failover.md, "One log for two
//! daemons"): the master candidates h1, h2 and h3 (127.0.0.2 to .4) run the coordinator
//! over its replicated WAL; only the leader listens on `LAVA_COORD_PORT`, and the worker
//! client finds it by trying the candidates in `LSF_MASTER_LIST` order. The host h0's
//! sbatchd issues the credentials.

mod util;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lava_coord_wire::{self as wire, Reply, task_state};
use lava_coordinator::client::{self, Client, ClientError, Endpoint};
use util::small_fs::SmallFs;
use util::{Cluster, Daemon, STARTUP_TIMEOUT, wait_until};

const CANDIDATES: [(&str, &str); 3] = [("h1", "127.0.0.2"), ("h2", "127.0.0.3"), ("h3", "127.0.0.4")];
const TASK_TIMEOUT: Duration = Duration::from_secs(120);
/// Long enough that a lease outlives a failover on a loaded machine.
const LEASE_MS: &str = "60000";

struct Rig {
    cluster: Cluster,
    port: u16,
    coordinators: BTreeMap<&'static str, Daemon>,
    _sbatchd: Daemon,
    /// The coordinators' `--snapshot-events` (40: compactions all the time).
    snapshot_events: &'static str,
}

impl Rig {
    fn new() -> Rig {
        let mut cluster = Cluster::with_hosts(&["h0", "h1", "h2", "h3"]);
        cluster.set_master_candidates(&["h1", "h2", "h3"]);
        let port = util::fixed_port();
        cluster.rewrite_lsf_conf("LAVA_COORD_PORT", &port.to_string());
        cluster.rewrite_lsf_conf("LAVA_COORD_REPL_PORT", &util::fixed_port().to_string());
        let sbatchd = cluster.start_sbatchd("h0");
        let socket = cluster.dir().join("run/lava.sock");
        wait_until("the credential socket", STARTUP_TIMEOUT, || socket.exists().then_some(()));
        Rig { cluster, port, coordinators: BTreeMap::new(), _sbatchd: sbatchd, snapshot_events: "40" }
    }

    fn start(&mut self, name: &'static str) {
        let args: Vec<&OsStr> = vec![
            "--host".as_ref(),
            name.as_ref(),
            "--lease-ms".as_ref(),
            LEASE_MS.as_ref(),
            "--snapshot-events".as_ref(),
            self.snapshot_events.as_ref(),
        ];
        let daemon =
            self.cluster.spawn("coordinator", &util::mbatchd_bin().with_file_name("coordinator"), &args);
        self.coordinators.insert(name, daemon);
    }

    fn kill(&mut self, name: &str) {
        self.coordinators.get_mut(name).expect("running").kill();
    }

    fn addr(&self, ip: &str) -> SocketAddr {
        format!("{ip}:{}", self.port).parse().expect("address")
    }

    /// The candidate other than `skip` whose coordinator port takes connections.
    fn serving_besides(&self, skip: Option<&str>) -> Option<&'static str> {
        CANDIDATES.iter().filter(|(name, _)| Some(*name) != skip).find_map(|(name, ip)| {
            TcpStream::connect_timeout(&self.addr(ip), Duration::from_millis(200)).ok().map(|_| *name)
        })
    }

    fn leader(&self) -> &'static str {
        wait_until("a candidate serves", Duration::from_secs(60), || self.serving_besides(None))
    }

    /// Every candidate, in list order: what workers and coordctl use.
    fn endpoint(&self) -> Endpoint {
        let addrs = CANDIDATES.iter().map(|(_, ip)| self.addr(ip)).collect();
        Endpoint::candidates(addrs, &self.cluster.dir().join("run/lava.sock"), util::CLUSTER_NAME)
    }

    /// Only candidate `name`.
    fn endpoint_of(&self, name: &str) -> Endpoint {
        let ip = CANDIDATES.iter().find(|(n, _)| *n == name).expect("a candidate").1;
        Endpoint::new(self.addr(ip), &self.cluster.dir().join("run/lava.sock"), util::CLUSTER_NAME)
    }

    fn log(&self, name: &str) -> String {
        self.coordinators[name].log()
    }
}

/// Runs `call` on a connection to whichever candidate leads, reconnecting until it is
/// answered (a failover in between closes connections and times replies out).
fn until_answered<T>(endpoint: &Endpoint, mut call: impl FnMut(&mut Client) -> Result<T, ClientError>) -> T {
    wait_until("an answer from the leader", TASK_TIMEOUT, || {
        let mut client = Client::connect(endpoint).ok()?;
        call(&mut client).ok()
    })
}

/// Submits a task; its id once acknowledged. A submission whose answer was lost is not
/// retried (the protocol has no request id for it): `None`.
fn submit(endpoint: &Endpoint, payload: &str) -> Option<u64> {
    let mut client =
        wait_until("a connection to the leader", TASK_TIMEOUT, || Client::connect(endpoint).ok());
    client.submit(payload.as_bytes().to_vec()).ok()
}

/// Waits until the leader sees every candidate hold its log index.
fn all_caught_up(endpoint: &Endpoint) {
    wait_until("every candidate caught up", TASK_TIMEOUT, || {
        let stats: BTreeMap<String, u64> = until_answered(endpoint, |client| client.stats())
            .into_iter()
            .map(|counter| (counter.name, counter.value))
            .collect();
        let held: Vec<u64> =
            stats.iter().filter(|(name, _)| name.starts_with("candidate.")).map(|(_, v)| *v).collect();
        let last = stats.get("replica.last_index")?;
        (held.len() == 3 && held.iter().all(|v| v == last)).then_some(())
    });
}

/// What the workers saw acknowledged: for each task, the leases whose completion was
/// answered COMPLETED.
type Completions = Arc<Mutex<BTreeMap<u64, BTreeSet<u64>>>>;

/// A worker thread: leases and completes tasks until told to stop, reconnecting across
/// failovers and retrying a completion with the same lease.
fn worker(
    endpoint: Endpoint,
    name: String,
    stop: Arc<AtomicBool>,
    done: Completions,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut client: Option<Client> = None;
        let mut holding: Option<(u64, u64)> = None;
        while !stop.load(Ordering::Relaxed) {
            let Some(connected) = client.as_mut() else {
                client = Client::connect(&endpoint).ok();
                if client.is_none() {
                    std::thread::sleep(Duration::from_millis(100));
                }
                continue;
            };
            let outcome = match holding {
                None => connected.lease(&name).map(|grant| match grant {
                    Some(grant) => holding = Some((grant.task_id, grant.lease_id)),
                    None => std::thread::sleep(Duration::from_millis(50)),
                }),
                Some((task, lease)) => connected.complete(task, lease).map(|reply| {
                    assert_eq!(reply.state, task_state::COMPLETED, "task {task} under lease {lease}");
                    done.lock().expect("lock").entry(task).or_default().insert(lease);
                    holding = None;
                }),
            };
            match outcome {
                Ok(()) => {}
                Err(ClientError::Refused(error)) if error.code == wire::ERR_LEASE_LOST => holding = None,
                Err(_) => client = None,
            }
        }
    })
}

/// Every acknowledged task ends COMPLETED, each completed under one lease only.
fn all_completed_once(rig: &Rig, tasks: &[u64], done: &Completions) {
    let endpoint = rig.endpoint();
    for &task in tasks {
        wait_until("the task completed", TASK_TIMEOUT, || {
            let info = until_answered(&endpoint, |client| client.task(task));
            (info.state == task_state::COMPLETED).then_some(())
        });
    }
    for (task, leases) in done.lock().expect("lock").iter() {
        assert_eq!(leases.len(), 1, "task {task} completed under several leases: {leases:?}");
    }
}

/// One worker leases and completes until every task of `tasks` is COMPLETED, each under one
/// lease only ([`all_completed_once`]); then it stops.
fn one_worker_completes_all_once(rig: &Rig, endpoint: Endpoint, tasks: &[u64]) {
    let stop = Arc::new(AtomicBool::new(false));
    let done: Completions = Arc::default();
    let working = worker(endpoint, "w1".to_owned(), Arc::clone(&stop), Arc::clone(&done));
    all_completed_once(rig, tasks, &done);
    stop.store(true, Ordering::Relaxed);
    working.join().expect("the worker");
}

fn payloads(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|at| format!("{prefix}-{at}")).collect()
}

// Goal: the coordinator survives its leader's death. A host that is no candidate is
// refused, naming the list. One candidate alone of three never
// serves; with all three, workers lease and complete continuously while the leader is
// killed (-9); another candidate takes over with every acknowledged task, a lease granted
// by the dead leader is still good for its completion, and the killed candidate returns
// from its disk alone and catches up (the cluster goes on after the second leader dies
// only because it did). Every acknowledged task ends COMPLETED under one lease only.
#[test]
fn the_coordinator_survives_its_leaders_death_and_the_dead_candidate_returns() {
    let mut rig = Rig::new();
    let stranger = rig
        .cluster
        .command(util::mbatchd_bin().with_file_name("coordinator"))
        .args(["--host", "h0"])
        .output()
        .expect("run the coordinator");
    let said = String::from_utf8_lossy(&stranger.stderr);
    assert!(!stranger.status.success());
    assert!(said.contains("--host h0: not a master candidate (LSF_MASTER_LIST: h1 h2 h3)"), "{said}");
    rig.start("h3");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(rig.serving_besides(None), None, "h3 alone is no majority of three");
    rig.start("h1");
    rig.start("h2");
    let first = rig.leader();
    let endpoint = rig.endpoint();

    // A lease taken from the first leader, completed after it died.
    let kept = until_answered(&endpoint, |client| client.submit(b"kept".to_vec()));
    let kept_lease =
        until_answered(&endpoint, |client| client.lease("keeper")).expect("the only waiting task is granted");
    assert_eq!(kept_lease.task_id, kept);

    let stop = Arc::new(AtomicBool::new(false));
    let done: Completions = Arc::default();
    let workers: Vec<_> = (0..2)
        .map(|at| worker(rig.endpoint(), format!("w{at}"), Arc::clone(&stop), Arc::clone(&done)))
        .collect();
    let mut tasks: Vec<u64> = payloads("a", 20).iter().filter_map(|p| submit(&endpoint, p)).collect();

    rig.kill(first);
    tasks.extend(payloads("b", 20).iter().filter_map(|p| submit(&endpoint, p)));
    let second = rig.leader();
    assert_ne!(second, first);
    let reply = until_answered(&endpoint, |client| client.complete(kept, kept_lease.lease_id));
    assert_eq!(reply.state, task_state::COMPLETED, "the lease outlived its leader");
    all_completed_once(&rig, &tasks, &done);

    rig.start(first);
    tasks.extend(payloads("c", 10).iter().filter_map(|p| submit(&endpoint, p)));
    all_completed_once(&rig, &tasks, &done);
    // The returned candidate catches up: the leader sees it hold the leader's index.
    all_caught_up(&endpoint);
    rig.kill(second);
    let third = rig.leader();
    assert_ne!(third, second);
    tasks.extend(payloads("d", 10).iter().filter_map(|p| submit(&endpoint, p)));
    all_completed_once(&rig, &tasks, &done);
    // coordctl status names the roles, as badmin showstatus does for mbatchd.
    let status = rig
        .cluster
        .command(util::mbatchd_bin().with_file_name("coordctl"))
        .arg("status")
        .output()
        .expect("run coordctl");
    let said = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{said}{}", String::from_utf8_lossy(&status.stderr));
    assert!(said.contains("Master candidates: 3 (term "), "{said}");
    let leader_line = said.lines().find(|line| line.contains(" leader ")).unwrap_or_else(|| panic!("{said}"));
    assert_eq!(leader_line.split_whitespace().next(), Some(third), "{said}");
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().expect("the worker ends");
    }
    eprintln!("leaders: {first}, then {second}, then {third}; {} tasks acknowledged", tasks.len());
}

// Goal: a leader paused (SIGSTOP) longer than an election takes is replaced, and once
// resumed acknowledges nothing: a submission sent to it while paused is never answered
// with a task (it is answered "try again" or its connection closes), and the resumed
// coordinator starts again and follows. Clients that reach its port — which the kernel
// still answers — give up on it after the candidates' reply timeout.
#[test]
fn a_paused_coordinator_leader_acknowledges_nothing_once_resumed() {
    let mut rig = Rig::new();
    for (name, _) in CANDIDATES {
        rig.start(name);
    }
    let endpoint = rig.endpoint();
    let mut acknowledged = vec![until_answered(&endpoint, |client| client.submit(b"first".to_vec()))];
    // Once resumed, the old leader takes the stale request or the new leader's messages
    // first (the loop's order among ready inputs is not fixed): several rounds, so that a
    // leader answering before its entries commit is caught whichever comes first.
    let mut step_downs: BTreeMap<&str, usize> = BTreeMap::new();
    for round in 0..3 {
        let paused = rig.leader();
        let mut stale = Client::connect(&rig.endpoint_of(paused)).expect("a connection to the leader");
        let pid = rig.coordinators[paused].pid().to_string();
        let signal = |name: &str| {
            let status = std::process::Command::new("kill").args([name, &pid]).status().expect("kill");
            assert!(status.success(), "kill {name} {pid}");
        };
        signal("-STOP");
        let sent = std::thread::spawn(move || stale.submit(b"sent to the paused leader".to_vec()));
        wait_until("another candidate serves", Duration::from_secs(60), || rig.serving_besides(Some(paused)));
        acknowledged
            .push(until_answered(&endpoint, |client| client.submit(format!("after {round}").into_bytes())));
        signal("-CONT");
        let answer = sent.join().expect("the client thread ends");
        assert!(answer.is_err(), "round {round}: the paused leader {paused} acknowledged a task: {answer:?}");
        // Closed once it starts again, not left open until the client gives up.
        let timed_out = matches!(&answer, Err(ClientError::Io { source, .. })
            if matches!(source.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
        assert!(!timed_out, "round {round}: {paused} kept the connection without an answer: {answer:?}");
        let count = step_downs.entry(paused).or_default();
        *count += 1;
        let expected = *count;
        // It steps down and starts again in the same process, as the same candidate.
        wait_until("the resumed leader steps down and starts again", TASK_TIMEOUT, || {
            let log = rig.log(paused);
            let stepped = log.matches("no longer the leader: starting again to follow").count() >= expected;
            (stepped && log.matches("replicated WAL opened").count() > expected).then_some(())
        });
        let log = rig.log(paused);
        assert!(rig.coordinators.get_mut(paused).expect("started").is_running(), "{log}");
    }
    // Every acknowledged task is there on the leader, and nothing else was made.
    let counts = until_answered(&endpoint, |client| client.counts());
    assert_eq!(counts.waiting, acknowledged.len() as u64, "{counts:?}");
    for task in acknowledged {
        let info = until_answered(&endpoint, |client| client.task(task));
        assert_eq!(info.state, task_state::WAITING);
    }
}

/// A one-connection TCP relay in front of `leader` that loses the answer to the first
/// submission (SUBMIT_TASK_ONCE's, or a plain SUBMIT_TASK's): it forwards the client's frames and the leader's answers until that
/// answer arrives, then kills the leader (-9) and closes the client's connection without
/// it. Returns the relay's address and, once it has seen it, the answer it dropped.
fn losing_relay(leader: SocketAddr, leader_pid: u32) -> (SocketAddr, std::thread::JoinHandle<Reply>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the relay");
    let addr = listener.local_addr().expect("the relay's address");
    let relay = std::thread::spawn(move || {
        let (mut client, _) = listener.accept().expect("the client connects");
        drop(listener);
        let mut server = TcpStream::connect(leader).expect("the relay connects to the leader");
        let (mut up_from, mut up_to) =
            (client.try_clone().expect("clone"), server.try_clone().expect("clone"));
        std::thread::spawn(move || {
            let _ended = std::io::copy(&mut up_from, &mut up_to);
        });
        loop {
            let mut head = [0u8; lava_xdr::frame::HEADER_BYTES];
            server.read_exact(&mut head).expect("an answer from the leader");
            let header = lava_xdr::frame::FrameHeader::parse(&head).expect("a header");
            let mut body = vec![0u8; header.length as usize];
            server.read_exact(&mut body).expect("the answer's body");
            let submitted = [wire::Operation::SubmitTaskOnceReply, wire::Operation::SubmitTaskReply];
            if submitted.iter().any(|op| op.code() == header.operation) {
                let status = std::process::Command::new("kill")
                    .args(["-9", &leader_pid.to_string()])
                    .status()
                    .expect("kill");
                assert!(status.success(), "kill -9 {leader_pid}");
                let _closed = client.shutdown(std::net::Shutdown::Both);
                return wire::decode_reply(header.operation, &body, &lava_xdr::Limits::DEFAULT)
                    .expect("decodes");
            }
            client.write_all(&head).and_then(|()| client.write_all(&body)).expect("forward an answer");
        }
    });
    (addr, relay)
}

// Goal: a submission whose answer is lost in a failover is created once. The worker
// library's `submit_once` reaches the leader through a relay that drops the answer (the
// task is committed: the leader answers only then) and kills the leader (-9); the library
// connects again, to the next candidate, with the same submission id, and the new leader
// answers the task the dead one created, marked repeated. With snapshots every 40 events
// (the id is older than the last one), the killed candidate back from its disk and the
// second leader killed in turn, the third leadership still answers that task. Exactly one
// task exists for the id, and every other submission too is created once.
#[test]
fn a_submission_whose_answer_is_lost_in_a_failover_is_created_once() {
    let mut rig = Rig::new();
    for (name, _) in CANDIDATES {
        rig.start(name);
    }
    let endpoint = rig.endpoint();
    let retry = Duration::from_secs(120);
    let once = |payload: &str| {
        let id = client::new_submission_id().expect("an id");
        client::submit_once(&endpoint, id, payload.as_bytes(), retry).expect("submitted").task_id
    };
    let mut tasks: Vec<u64> = (0..30).map(|at| once(&format!("before-{at}"))).collect();

    let first = rig.leader();
    let ip = CANDIDATES.iter().find(|(name, _)| *name == first).expect("a candidate").1;
    let (relay, dropped) = losing_relay(rig.addr(ip), rig.coordinators[first].pid());
    // The relay first, then the candidates: the retry goes on to the next address.
    let mut addrs = vec![relay];
    addrs.extend(CANDIDATES.iter().map(|(_, ip)| rig.addr(ip)));
    let through_relay =
        Endpoint::candidates(addrs, &rig.cluster.dir().join("run/lava.sock"), util::CLUSTER_NAME);
    let id = client::new_submission_id().expect("an id");
    let answer =
        client::submit_once(&through_relay, id, b"lost answer", retry).expect("submitted in the end");
    let lost = match dropped.join().expect("the relay ends") {
        Reply::SubmittedOnce(reply) => reply,
        Reply::Submitted(reply) => wire::SubmitTaskOnceReply { task_id: reply.task_id, repeated: false },
        other => panic!("the relay dropped {other:?}"),
    };
    assert!(!lost.repeated, "the first attempt created the task: {lost:?}");
    assert_eq!(answer.task_id, lost.task_id, "the retry got the task the lost answer named");
    assert!(answer.repeated, "the new leader recognised the id: {answer:?}");
    rig.kill(first);
    let second = rig.leader();
    assert_ne!(second, first);
    tasks.push(answer.task_id);
    // Past the next snapshot, with the dead candidate back from its disk.
    tasks.extend((0..45).map(|at| once(&format!("after-{at}"))));
    rig.start(first);
    all_caught_up(&endpoint);
    rig.kill(second);
    let third = rig.leader();
    assert_ne!(third, second);
    let again = client::submit_once(&endpoint, id, b"lost answer", retry).expect("answered");
    assert_eq!((again.task_id, again.repeated), (answer.task_id, true), "leaders {first}, {second}, {third}");
    let counts = until_answered(&endpoint, |client| client.counts());
    assert_eq!(counts.waiting, tasks.len() as u64, "{counts:?}");
    let mut sorted = tasks.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), tasks.len(), "a task id answered twice: {tasks:?}");
    let info = until_answered(&endpoint, |client| client.task(answer.task_id));
    assert_eq!(info.payload_bytes, b"lost answer".len() as u32);
}

// Goal: a full disk stops no coordinator candidate (docs/failover.md, "A full disk on a
// candidate"): a follower whose replica log finds its disk full stays up while the two
// others commit every submission; once space returns it catches up, and with the third
// candidate killed the coordinator commits on it. Every acknowledged task ends COMPLETED
// under one lease.
// Method: h2's folder (`work/coord/h2`) on an 8 MiB tmpfs kept full by a file that takes
// whatever h2 frees; no compaction in the test's time (a follower that must be caught up
// by a snapshot while its disk is full stops); tasks of 32 KiB submitted until h2 logs that
// its replica log waits for room; the file deleted; every candidate caught up; the third
// candidate killed; one more task; a worker completes them all.
#[test]
fn a_coordinator_followers_full_disk_stops_nothing_and_it_catches_up() {
    let mut rig = Rig::new();
    rig.snapshot_events = "1000000";
    let folder = rig.cluster.work_dir().join("coord/h2");
    std::fs::create_dir_all(&folder).expect("create h2's folder");
    let Some(disk) = SmallFs::mount_or_skip(&folder, "8m") else { return };
    for (name, _) in CANDIDATES {
        rig.start(name);
    }
    let leader = rig.leader();
    assert_ne!(leader, "h2", "h1 stands for election first; h2 must follow for this test");
    let endpoint = rig.endpoint();
    let payload = "x".repeat(32 << 10);
    let mut tasks: Vec<u64> = Vec::new();
    let filler = disk.keep_full("filler");
    let stalled = "acknowledges nothing more until its replica log can be written";
    wait_until("h2's replica log waits for room", TASK_TIMEOUT, || {
        // Each one acknowledged: committed by the two other candidates.
        tasks.push(submit(&endpoint, &payload).expect("a submission acknowledged"));
        let h2 = rig.coordinators.get_mut("h2").expect("h2");
        assert!(h2.is_running(), "h2 stopped on a full disk:\n{}", h2.log());
        h2.log().contains(stalled).then_some(())
    });
    tasks.push(submit(&endpoint, &payload).expect("a submission acknowledged"));
    filler.free();
    all_caught_up(&endpoint);
    assert!(rig.log("h2").contains("the replica log is written again"), "{}", rig.log("h2"));
    let other = if leader == "h1" { "h3" } else { "h1" };
    rig.kill(other);
    // A majority is the leader and h2 now.
    tasks.push(submit(&endpoint, "after").expect("a submission acknowledged"));
    one_worker_completes_all_once(&rig, endpoint, &tasks);
    eprintln!("{} tasks, h2 stalled after {} of them", tasks.len(), tasks.len() - 2);
}

// Goal (docs/failover.md, "What each candidate keeps"): on the real daemons a snapshot is
// also due by weight: with compactions by count out of reach, entries that outweigh
// lava-replog's floor (64 MiB) make the leader compact behind a snapshot, and every
// candidate, killed (-9) and started again, comes back from its snapshot and log with
// every acknowledged task, each then completed once.
// Method: `--snapshot-events 1000000`; tasks of 1 MiB less 1 KiB submitted until the
// leader logs a compaction (at 64 MiB: about 65 of them); all three killed and started;
// a worker completes every task.
#[test]
fn entries_that_outweigh_the_floor_make_a_snapshot_every_candidate_comes_back_from() {
    let mut rig = Rig::new();
    rig.snapshot_events = "1000000";
    for (name, _) in CANDIDATES {
        rig.start(name);
    }
    let leader = rig.leader();
    let endpoint = rig.endpoint();
    let payload = "w".repeat((1 << 20) - 1024);
    let compacted = "replicated WAL compacted behind a snapshot";
    let mut tasks: Vec<u64> = Vec::new();
    wait_until("the leader to compact by weight", TASK_TIMEOUT, || {
        tasks.push(submit(&endpoint, &payload).expect("a submission acknowledged"));
        rig.log(leader).contains(compacted).then_some(())
    });
    let mib = tasks.len();
    assert!(mib >= 63, "compacted by weight after {mib} MiB of entries, below the floor");
    for (name, _) in CANDIDATES {
        rig.kill(name);
    }
    for (name, _) in CANDIDATES {
        rig.start(name);
    }
    rig.leader();
    all_caught_up(&endpoint);
    one_worker_completes_all_once(&rig, endpoint, &tasks);
    eprintln!("compacted by weight after {mib} tasks of 1 MiB");
}
