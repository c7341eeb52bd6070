//! Integration tests of the real `coordinator` binary and `coordctl` on
//! loopback: the full cycle submit → lease → heartbeat → complete through
//! `coordctl`; `kill -9` during a run of worker threads and restart (no task
//! lost, none completed twice, acknowledged outcomes kept); a torn WAL tail
//! repaired at start (../shared/specs/coordinator-core-loop.md section 8).
//!
//! Each test has its own cluster folder and daemon (tests/util); every wait is
//! a bounded poll or a bounded read.

mod util;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lava_coord_wire::{self as wire, task_state};
use lava_coordinator::client::{Client, Endpoint, Worker};
use util::{Cluster, Daemon, STARTUP_TIMEOUT, wait_until};

fn coordinator_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_coordinator"))
}

fn coordctl_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_coordctl"))
}

/// Starts the coordinator with `extra` arguments on `port` (0 the first time),
/// waits for its ready file, and writes its port to `lsf.conf`.
fn start(cluster: &mut Cluster, port: u16, extra: &[&str]) -> Daemon {
    let port_file = cluster.dir().join("run/coordinator.port");
    let ready_file = cluster.dir().join("run/coordinator.ready");
    let port = port.to_string();
    let mut args: Vec<&OsStr> = vec![
        "--port".as_ref(),
        port.as_ref(),
        "--port-file".as_ref(),
        port_file.as_ref(),
        "--ready-file".as_ref(),
        ready_file.as_ref(),
    ];
    args.extend(extra.iter().map(OsStr::new));
    for stale in [&port_file, &ready_file] {
        let _absent = std::fs::remove_file(stale);
    }
    let mut daemon = cluster.spawn("coordinator", &coordinator_bin(), &args);
    let port = daemon.wait_for_port_file(&port_file, STARTUP_TIMEOUT);
    wait_until("the ready file", STARTUP_TIMEOUT, || ready_file.exists().then_some(()));
    cluster.rewrite_lsf_conf("LAVA_COORD_PORT", &port.to_string());
    daemon
}

fn endpoint(cluster: &Cluster, daemon: &Daemon) -> Endpoint {
    Endpoint::new(daemon.addr(), &cluster.key())
}

fn coordctl(cluster: &Cluster, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = cluster
        .command(coordctl_bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start coordctl");
    child.stdin.take().expect("piped stdin").write_all(stdin).expect("write stdin");
    child.wait_with_output().expect("coordctl runs")
}

fn ok_stdout(output: &Output) -> String {
    assert!(output.status.success(), "coordctl failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).expect("utf-8 output")
}

/// The first segment of the WAL.
fn wal_segment(cluster: &Cluster) -> PathBuf {
    cluster.work_dir().join("coord").join("coord.wal.000001")
}

// Goal: a task goes through its whole life with coordctl alone, as a shell
// worker would drive it, and refusals are clear. Method: submit from stdin,
// lease (first line then payload), heartbeat, complete, status, workers; a
// completion with a wrong lease and an unknown task fail with exit status 1.
#[test]
fn submit_lease_heartbeat_complete_through_coordctl() {
    let mut cluster = Cluster::new();
    let _daemon = start(&mut cluster, 0, &[]);
    let id = ok_stdout(&coordctl(&cluster, &["submit", "-"], b"hello payload"));
    assert_eq!(id.trim(), "1");
    let leased = ok_stdout(&coordctl(&cluster, &["lease", "--worker", "w1"], b""));
    let (line, payload) = leased.split_once('\n').expect("a first line");
    let fields: Vec<&str> = line.split(' ').collect();
    assert_eq!(&fields[..2], ["1", "1"], "{line}");
    assert_eq!(payload, "hello payload");
    let expires: u64 = fields[2].parse().expect("an expiry");
    let extended = ok_stdout(&coordctl(&cluster, &["heartbeat", "1", "1"], b""));
    assert!(extended.trim().parse::<u64>().expect("an expiry") >= expires);
    let wrong = coordctl(&cluster, &["complete", "1", "7"], b"");
    assert_eq!(wrong.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("not valid"), "{wrong:?}");
    assert_eq!(ok_stdout(&coordctl(&cluster, &["complete", "1", "1"], b"")).trim(), "task 1 COMPLETED");
    let status = ok_stdout(&coordctl(&cluster, &["status", "1"], b""));
    assert!(status.starts_with("TASK 1 STATE COMPLETED LEASE 1 WORKER w1 "), "{status}");
    assert!(status.contains("REFUSED 1"), "{status}");
    assert_eq!(
        ok_stdout(&coordctl(&cluster, &["status"], b"")).trim(),
        "WAITING 0 LEASED 0 COMPLETED 1 FAILED 0"
    );
    let workers = ok_stdout(&coordctl(&cluster, &["workers"], b""));
    assert!(workers.lines().any(|line| line.starts_with("w1 ")), "{workers}");
    let none = coordctl(&cluster, &["lease", "--worker", "w1", "--wait", "0.3"], b"");
    assert_eq!(none.status.code(), Some(3));
    let unknown = coordctl(&cluster, &["status", "99"], b"");
    assert_eq!(unknown.status.code(), Some(1));
}

// Goal: kill -9 during a run loses nothing acknowledged and completes no task
// twice; leases held at the crash expire after the restart and their tasks
// are done by others. Method: 400 tasks, 4 worker threads pulling and
// completing (every 7th failing), SIGKILL after about 150 outcomes, restart,
// check every acknowledged outcome, drain the rest, check the totals.
#[test]
fn kill_9_and_restart_keeps_every_acknowledged_task() {
    const N_TASKS: u64 = 400;
    let mut cluster = Cluster::new();
    let mut daemon = start(&mut cluster, 0, &["--lease-ms", "1000", "--snapshot-events", "300"]);
    let port = daemon.port();
    let mut client = Client::connect(&endpoint(&cluster, &daemon)).expect("connects");
    for i in 0..N_TASKS {
        assert_eq!(client.submit(format!("task {i}").into_bytes()).expect("submitted"), i + 1);
    }
    let acknowledged: Arc<Mutex<Vec<(u64, u32)>>> = Arc::default();
    let mut threads = Vec::new();
    for w in 0..4 {
        let (endpoint, acknowledged) = (endpoint(&cluster, &daemon), Arc::clone(&acknowledged));
        threads.push(std::thread::spawn(move || {
            let Ok(mut worker) = Worker::connect(&endpoint, &format!("worker{w}")) else { return };
            while let Ok(Some(lease)) = worker.pull(Duration::from_millis(500)) {
                let heartbeat = worker.start_heartbeat(&lease, Duration::from_millis(300));
                let result =
                    if lease.task_id % 7 == 0 { worker.fail(&lease) } else { worker.complete(&lease) };
                heartbeat.stop();
                match result {
                    Ok(reply) => acknowledged.lock().expect("lock").push((reply.task_id, reply.state)),
                    Err(_) => return,
                }
            }
        }));
    }
    wait_until("150 outcomes", Duration::from_secs(60), || {
        (acknowledged.lock().expect("lock").len() >= 150).then_some(())
    });
    daemon.kill();
    for thread in threads {
        thread.join().expect("worker thread");
    }
    let acknowledged = acknowledged.lock().expect("lock").clone();
    let distinct: BTreeSet<u64> = acknowledged.iter().map(|(task, _)| *task).collect();
    assert_eq!(distinct.len(), acknowledged.len(), "no task acknowledged twice");

    let daemon = start(&mut cluster, port, &["--lease-ms", "1000"]);
    let mut client = Client::connect(&endpoint(&cluster, &daemon)).expect("connects");
    for (task, state) in &acknowledged {
        assert_eq!(client.task(*task).expect("task exists").state, *state, "task {task}");
    }
    let counts = client.counts().expect("counts");
    assert_eq!(counts.waiting + counts.leased + counts.completed + counts.failed, N_TASKS);
    // Drain: leases held at the crash expire within about a second.
    let mut worker = Worker::connect(&endpoint(&cluster, &daemon), "drainer").expect("connects");
    let mut drained = 0;
    while let Some(lease) = worker.pull(Duration::from_secs(3)).expect("pull") {
        assert!(!distinct.contains(&lease.task_id), "task {} was already finished", lease.task_id);
        worker.complete(&lease).expect("completes");
        drained += 1;
    }
    let counts = client.counts().expect("counts");
    assert_eq!((counts.waiting, counts.leased), (0, 0));
    assert_eq!(counts.completed + counts.failed, N_TASKS);
    // An outcome can be durable while its answer was lost with the process:
    // at most one in flight per worker thread, never more.
    let unacknowledged = N_TASKS as usize - acknowledged.len() - drained;
    assert!(unacknowledged <= 4, "{unacknowledged} outcomes neither acknowledged nor drained");
    assert!(client.leases().expect("leases").is_empty());
}

/// Cuts the file at its last non-zero byte, which belongs to the last record
/// (only the zero-filled preallocation follows it): that record is torn.
fn tear_last_record(path: &Path) -> u64 {
    let bytes = std::fs::read(path).expect("read the segment");
    let last = bytes.iter().rposition(|byte| *byte != 0).expect("the segment holds records");
    let file = std::fs::OpenOptions::new().write(true).open(path).expect("open the segment");
    file.set_len(last as u64).expect("truncate");
    file.sync_all().expect("sync");
    last as u64
}

// Goal: a torn last WAL record (a crash in the middle of a write) is cut off
// at start, reported, and the coordinator serves the state before it.
// Method: submit three tasks, kill -9, cut the last record's final bytes,
// restart: tasks 1 and 2 are there, task 3 is unknown, the log names the torn tail,
// and the next submission gets id 3 again.
#[test]
fn torn_wal_tail_is_repaired_at_start() {
    let mut cluster = Cluster::new();
    let mut daemon = start(&mut cluster, 0, &[]);
    let port = daemon.port();
    let mut client = Client::connect(&endpoint(&cluster, &daemon)).expect("connects");
    for payload in ["a", "b", "c"] {
        client.submit(payload.as_bytes().to_vec()).expect("submitted");
    }
    daemon.kill();
    tear_last_record(&wal_segment(&cluster));
    let daemon = start(&mut cluster, port, &[]);
    let log = daemon.log();
    assert!(log.contains("torn tail"), "{log}");
    let mut client = Client::connect(&endpoint(&cluster, &daemon)).expect("connects");
    assert_eq!(client.task(2).expect("task 2").state, task_state::WAITING);
    let missing = client.task(3).expect_err("task 3 was torn off");
    assert_eq!(missing.code(), Some(wire::ERR_UNKNOWN_TASK));
    assert_eq!(client.submit(b"again".to_vec()).expect("submitted"), 3);
}
