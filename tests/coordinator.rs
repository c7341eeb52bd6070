//! Integration tests of the real `coordinator` binary and `coordctl` on
//! loopback, with the real `sbatchd` of the host issuing the credentials that
//! authenticate every connection (docs/coordinator.md, "Authentication"): the full
//! cycle submit → lease → heartbeat → complete through `coordctl`; who may
//! connect and who may act under a lease, also as the unprivileged `nobody`
//! while the cluster key stays root's; `kill -9` during a 10,000-task run of
//! worker processes and restart (no task lost, none completed twice); a torn
//! WAL tail repaired at start (docs/coordinator.md, "The core loop").
//!
//! Each test has its own cluster folder and daemons (tests/util); every wait
//! is a bounded poll or a bounded read.

mod util;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use lava_coord_logic::Event;
use lava_coord_wire::{self as wire, COORD_VERSION, Reply, Request, task_state};
use lava_coordinator::client::{Client, Endpoint, fetch_credential};
use lava_net::{AuthConfig, Authenticator, ClusterKey, Credential, KeyRing, Nonce};
use lava_xdr::frame::{FrameHeader, HEADER_BYTES};
use util::{Cluster, Daemon, STARTUP_TIMEOUT, chmod, wait_until};

/// The unprivileged account used to test identities (present on every Debian system).
const NOBODY_UID: u32 = 65534;

fn coordctl_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_coordctl"))
}

/// The credential socket of the cluster's sbatchd (`LAVA_CMD_SOCKET`).
fn cmd_socket(cluster: &Cluster) -> PathBuf {
    cluster.dir().join("run/lava.sock")
}

/// Starts the host's sbatchd, which serves the credential socket (it needs no mbatchd for that).
fn start_sbatchd(cluster: &mut Cluster) -> Daemon {
    let ready = cluster.dir().join("run/sbatchd.ready");
    let _absent = std::fs::remove_file(&ready);
    let args: Vec<&OsStr> =
        vec!["--host".as_ref(), "localhost".as_ref(), "--ready-file".as_ref(), ready.as_ref()];
    let mut daemon = cluster.spawn("sbatchd", Path::new(env!("CARGO_BIN_EXE_sbatchd")), &args);
    wait_until("sbatchd's ready file", STARTUP_TIMEOUT, || {
        assert!(daemon.is_running(), "sbatchd exited early:\n{}", daemon.log());
        (ready.exists() && cmd_socket(cluster).exists()).then_some(())
    });
    daemon
}

fn endpoint(cluster: &Cluster, daemon: &Daemon) -> Endpoint {
    Endpoint::new(daemon.addr(), &cmd_socket(cluster), util::CLUSTER_NAME)
}

fn coordctl(cluster: &Cluster, args: &[&str], stdin: &[u8]) -> Output {
    run_coordctl(cluster, args, stdin, None)
}

/// Runs coordctl, as `nobody` when `uid` says so.
fn run_coordctl(cluster: &Cluster, args: &[&str], stdin: &[u8], uid: Option<u32>) -> Output {
    let mut command = cluster.command(coordctl_bin());
    command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(uid) = uid {
        command.uid(uid).gid(uid).current_dir("/tmp").env("HOME", "/tmp");
    }
    let mut child = command.spawn().expect("start coordctl");
    child.stdin.take().expect("piped stdin").write_all(stdin).expect("write stdin");
    child.wait_with_output().expect("coordctl runs")
}

fn ok_stdout(output: &Output) -> String {
    assert!(output.status.success(), "coordctl failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).expect("utf-8 output")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The `name value` lines under `Counters:` in `coordctl status` output.
fn counters(text: &str) -> BTreeMap<String, u64> {
    let (_, section) = text.split_once("Counters:\n").unwrap_or_else(|| panic!("no Counters: in {text}"));
    section
        .lines()
        .map(|line| {
            let (name, value) = line.split_once(' ').unwrap_or_else(|| panic!("not `name value`: {line}"));
            (name.to_owned(), value.parse().unwrap_or_else(|_| panic!("not a number: {line}")))
        })
        .collect()
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
    let _sbatchd = start_sbatchd(&mut cluster);
    let _daemon = cluster.start_coordinator(0, &[]);
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
    assert!(stderr(&wrong).contains("not valid"), "{wrong:?}");
    assert_eq!(ok_stdout(&coordctl(&cluster, &["complete", "1", "1"], b"")).trim(), "task 1 COMPLETED");
    let status = ok_stdout(&coordctl(&cluster, &["status", "1"], b""));
    assert!(status.starts_with("TASK 1 STATE COMPLETED LEASE 1 WORKER w1 "), "{status}");
    assert!(status.contains("REFUSED 1"), "{status}");
    assert!(status.trim_end().ends_with("OWNER root OWNER_UID 0 HOLDER root"), "{status}");
    let summary = ok_stdout(&coordctl(&cluster, &["status"], b""));
    assert_eq!(summary.lines().next(), Some("WAITING 0 LEASED 0 COMPLETED 1 FAILED 0"), "{summary}");
    // The counters after the summary moved by what this test did: seven coordctl runs (one
    // connection and one HELLO each), one refused completion, five WAL records.
    let counters = counters(&summary);
    for (name, expected) in [
        ("requests.HELLO", 7),
        ("requests.SUBMIT_TASK", 0),
        ("requests.SUBMIT_TASK_ONCE", 1),
        ("requests.LEASE_REQUEST", 1),
        ("requests.HEARTBEAT", 1),
        ("requests.COMPLETE_TASK", 2),
        ("requests.TASK_QUERY", 1),
        ("requests.COUNTS_QUERY", 1),
        ("requests.STATS_QUERY", 1),
        ("requests.FAIL_TASK", 0),
        ("refusals.lease_lost", 1),
        ("refusals.auth", 0),
        ("connections.accepted", 7),
        ("wal.events.TaskCreatedOnce", 1),
        ("wal.events.LeaseGranted", 1),
        ("wal.events.LeaseExtended", 1),
        ("wal.events.TaskCompleted", 1),
        // The refused completion is recorded too (the task's REFUSED count).
        ("wal.events.TaskCancelled", 1),
        ("leases.granted", 1),
        ("leases.expired", 0),
        ("leases.valid", 0),
        ("tasks.completed", 1),
        ("tasks.total", 1),
        ("workers.known", 1),
        ("submissions.held", 1),
        ("wal.appends", 5),
        ("wal.appended_through", 5),
        ("wal.durable_through", 5),
        ("queue.answers_held", 0),
    ] {
        assert_eq!(counters.get(name), Some(&expected), "{name} in {summary}");
    }
    let commits = counters["wal.group_commits"];
    assert!((1..=5).contains(&commits), "{summary}");
    assert!(counters["wal.fsyncs"] >= commits, "{summary}");
    assert!(counters["wal.events_per_group_commit"] >= 1, "{summary}");
    assert!(counters["wal.group_commit_us_max"] >= counters["wal.group_commit_us_mean"], "{summary}");
    assert!(counters["wal.segments"] >= 1 && counters["wal.segment_bytes"] > 0, "{summary}");
    assert!(counters["connections.open"] >= 1, "{summary}");
    let workers = ok_stdout(&coordctl(&cluster, &["workers"], b""));
    assert!(workers.lines().any(|line| line.starts_with("w1 ")), "{workers}");
    let none = coordctl(&cluster, &["lease", "--worker", "w1", "--wait", "0.3"], b"");
    assert_eq!(none.status.code(), Some(3));
    let unknown = coordctl(&cluster, &["status", "99"], b"");
    assert_eq!(unknown.status.code(), Some(1));
}

/// Sends raw frames on a fresh TCP connection and returns every answer until
/// the coordinator closes it (bounded by the read timeout).
fn raw_exchange(daemon: &Daemon, frames: &[(Request, u32)]) -> Vec<(FrameHeader, Reply)> {
    let mut stream = TcpStream::connect(daemon.addr()).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let mut bytes = Vec::new();
    for (request, sequence) in frames {
        let body = request.encode_body();
        let header = FrameHeader {
            sequence: *sequence,
            operation: request.operation().code(),
            version: COORD_VERSION,
            length: body.len() as u32,
            status: 0,
        };
        header.write(&mut bytes);
        bytes.extend_from_slice(&body);
    }
    stream.write_all(&bytes).expect("send");
    let mut answers = Vec::new();
    loop {
        let mut head = [0u8; HEADER_BYTES];
        if stream.read_exact(&mut head).is_err() {
            return answers;
        }
        let header = FrameHeader::parse(&head).expect("a header");
        let mut body = vec![0u8; header.length as usize];
        stream.read_exact(&mut body).expect("a body");
        let reply =
            wire::decode_reply(header.operation, &body, &lava_xdr::Limits::DEFAULT).expect("an answer");
        answers.push((header, reply));
    }
}

fn refusal(result: Result<Client, lava_coordinator::client::ClientError>) -> wire::ErrorReply {
    match result {
        Err(lava_coordinator::client::ClientError::Refused(error)) => error,
        Err(other) => panic!("not a refusal: {other}"),
        Ok(client) => panic!("accepted as {:?}", client.identity()),
    }
}

// Goal: nothing is served without a valid credential, and each refusal says
// why. Method: a request before HELLO, a HELLO with garbage, a token whose
// uid was changed, a token sealed with another cluster's key, and a good
// token presented twice (the second time is a replay); each is answered
// ERR_AUTH and its connection closed, while the coordinator keeps serving a
// good client, which pipelines requests on one connection.
#[test]
fn connections_without_a_valid_credential_are_refused() {
    let mut cluster = Cluster::new();
    let _sbatchd = start_sbatchd(&mut cluster);
    let daemon = cluster.start_coordinator(0, &[]);
    let endpoint = endpoint(&cluster, &daemon);

    let answers = raw_exchange(&daemon, &[(Request::Counts, 1), (Request::Counts, 2)]);
    assert_eq!(answers.len(), 1, "one refusal, then the connection closes: {answers:?}");
    let (header, Reply::Error(error)) = &answers[0] else { panic!("{answers:?}") };
    assert_eq!((header.sequence, error.code), (1, wire::ERR_AUTH));
    assert!(error.message.contains("first frame of a connection must be HELLO"), "{}", error.message);

    let garbage = refusal(Client::connect_with_credential(&endpoint, b"not a credential".to_vec()));
    assert_eq!(garbage.code, wire::ERR_AUTH);
    assert!(garbage.message.starts_with("authentication failed"), "{}", garbage.message);

    let mut forged = fetch_credential(&cmd_socket(&cluster), util::CLUSTER_NAME).expect("a token");
    forged[4..8].copy_from_slice(&12_345u32.to_be_bytes()); // claim another uid
    let error = refusal(Client::connect_with_credential(&endpoint, forged));
    assert!(error.message.contains("authentication failed"), "{}", error.message);

    let other_key = ClusterKey::from_bytes(&[7; 32]).expect("a key");
    let other = Authenticator::new(KeyRing::new(&other_key), AuthConfig::default());
    let foreign = Credential {
        uid: 0,
        gid: 0,
        username: "root".into(),
        hostname: "localhost".into(),
        issued_at_ms: lava_net::system_now_ms(),
        nonce: Nonce::fresh().expect("randomness"),
        audience: lava_net::Audience::new(lava_net::Audience::COORDINATOR, util::CLUSTER_NAME),
    }
    .seal(&other)
    .expect("sealed");
    let error = refusal(Client::connect_with_credential(&endpoint, foreign));
    assert!(error.message.contains("authentication failed"), "{}", error.message);

    let token = fetch_credential(&cmd_socket(&cluster), util::CLUSTER_NAME).expect("a token");
    let first = Client::connect_with_credential(&endpoint, token.clone()).expect("a fresh token is accepted");
    assert_eq!((first.identity().uid, first.identity().user.as_str()), (0, "root"));
    assert!(first.identity().admin);
    let replayed = refusal(Client::connect_with_credential(&endpoint, token));
    assert_eq!(replayed.code, wire::ERR_AUTH);
    assert!(replayed.message.contains("replay"), "{}", replayed.message);

    // A second HELLO on an authenticated connection is a bad request, not a new identity.
    let mut client = Client::connect(&endpoint).expect("connects");
    let again = client.call(&Request::Hello(wire::Hello { credential: vec![] })).expect_err("refused");
    assert_eq!(again.code(), Some(wire::ERR_BAD_REQUEST));
    // Pipelined requests are answered in order, each after its WAL record is durable.
    let requests: Vec<Request> =
        (0..50).map(|i| Request::Submit(wire::SubmitTask { payload: vec![i as u8] })).collect();
    let answers = client.pipeline(&requests).expect("answers");
    let ids: Vec<u64> = answers
        .into_iter()
        .map(|answer| match answer {
            Ok(Reply::Submitted(reply)) => reply.task_id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ids, (1..=50).collect::<Vec<u64>>());
    // The status counts every refusal under its code: five HELLOs refused, one second HELLO.
    let stats: BTreeMap<String, u64> =
        client.stats().expect("the counters").into_iter().map(|c| (c.name, c.value)).collect();
    for (name, expected) in [
        ("refusals.auth", 5),
        ("refusals.bad_request", 1),
        ("requests.SUBMIT_TASK", 50),
        ("requests.STATS_QUERY", 1),
        ("wal.events.TaskCreated", 50),
        ("wal.appends", 50),
        ("tasks.waiting", 50),
        ("queue.answers_held", 0),
    ] {
        assert_eq!(stats.get(name), Some(&expected), "{name} in {stats:?}");
    }
    assert!((1..=50).contains(&stats["wal.group_commits"]), "{stats:?}");
}

// Goal: the cluster key stays root's (mode 0600) and an unprivileged user
// works with coordctl all the same, as themselves; only the user a lease was
// granted to (or an administrator) may act under it. Method: as `nobody`:
// the key cannot be read, `whoami` says nobody, a submission is owned by
// nobody; nobody may not heartbeat or complete root's lease (ERR_PERMISSION),
// root (an administrator) may complete nobody's.
#[test]
fn an_unprivileged_user_works_without_the_key_and_only_on_their_own_leases() {
    let mut cluster = Cluster::new();
    let _sbatchd = start_sbatchd(&mut cluster);
    let _daemon = cluster.start_coordinator(0, &[]);
    let key_mode = std::fs::metadata(cluster.key_path()).expect("the key file").permissions().mode();
    assert_eq!(key_mode & 0o777, 0o600);
    // nobody must reach the configuration and the credential socket (not the key).
    for folder in [cluster.dir().to_owned(), cluster.dir().join("run"), cluster.envdir()] {
        chmod(&folder, 0o755);
    }
    let cat = cluster
        .command("cat")
        .arg(cluster.key_path())
        .uid(NOBODY_UID)
        .gid(NOBODY_UID)
        .output()
        .expect("run cat as nobody");
    assert!(!cat.status.success(), "nobody read the cluster key");

    let nobody = |args: &[&str], stdin: &[u8]| run_coordctl(&cluster, args, stdin, Some(NOBODY_UID));
    assert_eq!(ok_stdout(&nobody(&["whoami"], b"")).trim(), "nobody uid 65534");
    assert_eq!(ok_stdout(&coordctl(&cluster, &["whoami"], b"")).trim(), "root uid 0 (cluster administrator)");
    assert_eq!(ok_stdout(&nobody(&["submit", "-"], b"from nobody")).trim(), "1");
    assert_eq!(ok_stdout(&coordctl(&cluster, &["submit", "-"], b"from root")).trim(), "2");
    let status = ok_stdout(&nobody(&["status", "1"], b""));
    assert!(status.contains("OWNER nobody OWNER_UID 65534 HOLDER -"), "{status}");

    // root leases task 1; nobody may not act under root's lease.
    let leased = ok_stdout(&coordctl(&cluster, &["lease", "--worker", "rootworker"], b""));
    assert!(leased.starts_with("1 1 "), "{leased}");
    for verb in ["heartbeat", "complete", "fail"] {
        let denied = nobody(&[verb, "1", "1"], b"");
        assert_eq!(denied.status.code(), Some(1), "{verb}");
        assert!(
            stderr(&denied).contains("permission denied: nobody (uid 65534)"),
            "{verb}: {}",
            stderr(&denied)
        );
    }
    assert!(ok_stdout(&coordctl(&cluster, &["status", "1"], b"")).contains("STATE LEASED"));
    // nobody leases task 2 (root's); root, an administrator, may complete it for them.
    let leased = ok_stdout(&nobody(&["lease", "--worker", "nobodyworker"], b""));
    assert!(leased.starts_with("2 2 "), "{leased}");
    assert_eq!(ok_stdout(&coordctl(&cluster, &["complete", "2", "2"], b"")).trim(), "task 2 COMPLETED");
    let status = ok_stdout(&nobody(&["status", "2"], b""));
    assert!(status.contains("OWNER root OWNER_UID 0 HOLDER nobody"), "{status}");
    assert_eq!(ok_stdout(&coordctl(&cluster, &["complete", "1", "1"], b"")).trim(), "task 1 COMPLETED");
}

/// Every `TaskCompleted` / `TaskFailed` of the WAL in `dir`, as (task, lease, state), in log order.
fn terminal_events(dir: &Path) -> Vec<(u64, u64, u32)> {
    let log = lava_coordinator::journal::open(dir).expect("open the WAL");
    let replay = log.replay().expect("replay");
    assert!(replay.snapshot.is_none(), "the test keeps every record (no snapshot)");
    let mut out = Vec::new();
    for record in replay.records {
        let (_, bytes) = record.expect("a record");
        let event: Event =
            lava_xdr::from_bytes(&bytes, &lava_coordinator::codec::EVENT_LIMITS).expect("an event");
        match event {
            Event::TaskCompleted { task, lease } => {
                out.push((task.get(), lease.get(), task_state::COMPLETED))
            }
            Event::TaskFailed { task, lease } => out.push((task.get(), lease.get(), task_state::FAILED)),
            _ => {}
        }
    }
    out
}

/// Reads the complete `TASK LEASE STATE` lines of a worker's record (the
/// worker may be writing the next one).
fn read_record(path: &Path) -> Vec<(u64, u64, u32)> {
    let mut text = std::fs::read_to_string(path).unwrap_or_default();
    text.truncate(text.rfind('\n').map_or(0, |end| end + 1));
    text.lines()
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let state = match fields[2] {
                "COMPLETED" => task_state::COMPLETED,
                "FAILED" => task_state::FAILED,
                other => panic!("state {other} in {}", path.display()),
            };
            (fields[0].parse().expect("task"), fields[1].parse().expect("lease"), state)
        })
        .collect()
}

// Goal: kill -9 of the coordinator during a 10,000-task run of worker
// processes, then a restart: no task is lost, none is completed twice, and
// every outcome a worker was told about is the one recorded. Method: 10,000
// tasks submitted pipelined; 6 `coordctl work` processes (lease, heartbeat,
// complete — or fail every 7th task) each append what was acknowledged to
// their own record; SIGKILL once 3,000 outcomes are recorded; restart on the
// same port (leases held at the crash expire after 1 s); the workers reconnect
// and drain. Then: the WAL holds exactly one TaskCompleted or TaskFailed per
// task (no snapshot prunes it), every recorded (task, lease, state) is the
// WAL's and the status query's, no task is recorded twice, and at most one
// outcome per worker is durable but unacknowledged (its answer died with the
// process).
#[test]
fn kill_9_during_10000_tasks_of_worker_processes_loses_and_repeats_nothing() {
    const N_TASKS: u64 = 10_000;
    const N_WORKERS: usize = 6;
    let mut cluster = Cluster::new();
    let _sbatchd = start_sbatchd(&mut cluster);
    let args = ["--lease-ms", "1000", "--snapshot-events", "100000000"];
    let mut daemon = cluster.start_coordinator(0, &args);
    let port = daemon.port();
    let mut client = Client::connect(&endpoint(&cluster, &daemon)).expect("connects");
    for chunk in 0..N_TASKS / 500 {
        let requests: Vec<Request> = (0..500)
            .map(|i| {
                Request::Submit(wire::SubmitTask { payload: format!("task {}", chunk * 500 + i).into() })
            })
            .collect();
        for answer in client.pipeline(&requests).expect("submitted") {
            assert!(matches!(answer, Ok(Reply::Submitted(_))), "{answer:?}");
        }
    }
    drop(client);
    let records: Vec<PathBuf> =
        (0..N_WORKERS).map(|w| cluster.dir().join(format!("run/worker{w}.rec"))).collect();
    let mut workers: Vec<Child> = records
        .iter()
        .enumerate()
        .map(|(w, record)| {
            cluster
                .command(coordctl_bin())
                .args(["work", "--worker", &format!("worker{w}"), "--idle", "3", "--fail-every", "7"])
                .arg("--record")
                .arg(record)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a worker")
        })
        .collect();
    let recorded = || records.iter().map(|path| read_record(path).len()).sum::<usize>();
    wait_until("3,000 recorded outcomes", Duration::from_secs(120), || (recorded() >= 3_000).then_some(()));
    daemon.kill();
    let at_kill = recorded();
    let daemon = cluster.start_coordinator(port, &args);
    for (w, worker) in workers.iter_mut().enumerate() {
        let status = wait_until(&format!("worker {w} to finish"), Duration::from_secs(180), || {
            worker.try_wait().expect("try_wait")
        });
        let mut errors = String::new();
        let _read = worker.stderr.take().expect("piped").read_to_string(&mut errors);
        assert!(status.success(), "worker {w}: {status}: {errors}");
    }
    let mut acknowledged: BTreeMap<u64, (u64, u32)> = BTreeMap::new();
    for path in &records {
        for (task, lease, state) in read_record(path) {
            assert!(acknowledged.insert(task, (lease, state)).is_none(), "task {task} acknowledged twice");
        }
    }
    assert!(acknowledged.len() > at_kill, "the workers went on after the restart");

    let mut client = Client::connect(&endpoint(&cluster, &daemon)).expect("connects");
    let counts = client.counts().expect("counts");
    assert_eq!((counts.waiting, counts.leased, counts.completed + counts.failed), (0, 0, N_TASKS));
    let queries: Vec<Request> =
        (1..=N_TASKS).map(|task_id| Request::Task(wire::TaskQuery { task_id })).collect();
    for (i, answer) in client.pipeline(&queries).expect("answers").into_iter().enumerate() {
        let task = i as u64 + 1;
        let Ok(Reply::Task(wire::TaskQueryReply { task: info })) = answer else {
            panic!("task {task}: {answer:?}")
        };
        let want = if task.is_multiple_of(7) { task_state::FAILED } else { task_state::COMPLETED };
        assert_eq!(info.state, want, "task {task}");
        if let Some((lease, state)) = acknowledged.get(&task) {
            assert_eq!((info.lease_id, info.state), (*lease, *state), "task {task}");
        }
    }
    let unacknowledged = N_TASKS as usize - acknowledged.len();
    assert!(unacknowledged <= N_WORKERS, "{unacknowledged} outcomes durable but never acknowledged");
    drop(client);
    let mut daemon = daemon;
    assert!(daemon.terminate().success());
    let events = terminal_events(&cluster.work_dir().join("coord"));
    let mut in_wal: BTreeMap<u64, (u64, u32)> = BTreeMap::new();
    for (task, lease, state) in events {
        assert!(in_wal.insert(task, (lease, state)).is_none(), "task {task} ended twice in the WAL");
    }
    assert_eq!(in_wal.len() as u64, N_TASKS);
    for (task, outcome) in &acknowledged {
        assert_eq!(in_wal.get(task), Some(outcome), "task {task}");
    }
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
    let _sbatchd = start_sbatchd(&mut cluster);
    let mut daemon = cluster.start_coordinator(0, &[]);
    let port = daemon.port();
    let mut client = Client::connect(&endpoint(&cluster, &daemon)).expect("connects");
    for payload in ["a", "b", "c"] {
        client.submit(payload.as_bytes().to_vec()).expect("submitted");
    }
    daemon.kill();
    tear_last_record(&wal_segment(&cluster));
    let daemon = cluster.start_coordinator(port, &[]);
    let log = daemon.log();
    assert!(log.contains("torn tail"), "{log}");
    let mut client = Client::connect(&endpoint(&cluster, &daemon)).expect("connects");
    assert_eq!(client.task(2).expect("task 2").state, task_state::WAITING);
    let missing = client.task(3).expect_err("task 3 was torn off");
    assert_eq!(missing.code(), Some(wire::ERR_UNKNOWN_TASK));
    assert_eq!(client.submit(b"again".to_vec()).expect("submitted"), 3);
}

// Goal: a submission whose answer was lost in a crash is created once: coordctl sends it
// again under the same submission id once the coordinator is back, and gets the task the
// first attempt created (the id came back from the WAL, and from a snapshot after a clean
// restart); a later run with the same `--id` gets it too, with another payload it is
// refused, and a bad `--id` is refused naming it. Method: the crash point
// `coordinator.wal_durable` (the submission's record is durable, its answer not yet
// sent) armed just before `coordctl submit --id`; the test restarts the coordinator on its
// port while coordctl retries.
#[test]
fn a_submission_whose_answer_died_with_the_coordinator_is_created_once() {
    let mut cluster = Cluster::new();
    let _sbatchd = start_sbatchd(&mut cluster);
    let crash_dir = cluster.dir().join("crash");
    std::fs::create_dir_all(&crash_dir).expect("create the crash folder");
    let (arm, report) = (crash_dir.join("arm"), crash_dir.join("report"));
    cluster.set_daemon_env("coordinator", lava_crash::ENV_AT, "coordinator.wal_durable");
    cluster.set_daemon_env("coordinator", lava_crash::ENV_ARM, &arm);
    cluster.set_daemon_env("coordinator", lava_crash::ENV_REPORT, &report);
    let args = ["--snapshot-events", "2"];
    let mut daemon = cluster.start_coordinator(0, &args);
    let port = daemon.port();
    assert_eq!(ok_stdout(&coordctl(&cluster, &["submit", "-"], b"first")).trim(), "1");

    let id = "0123456789abcdef-0123456789abcdef";
    std::fs::write(&arm, "").expect("arm the crash point");
    let mut submit = cluster.command(coordctl_bin());
    submit.args(["submit", "--id", id, "-"]).env("LAVA_RETRY_SECS", "120");
    let mut submit = submit
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start coordctl submit");
    submit.stdin.take().expect("piped").write_all(b"once").expect("write the payload");
    let said =
        wait_until("the crash point to fire", STARTUP_TIMEOUT, || std::fs::read_to_string(&report).ok());
    assert!(said.starts_with("coordinator.wal_durable "), "{said}");
    wait_until("the coordinator to die", STARTUP_TIMEOUT, || (!daemon.is_running()).then_some(()));
    daemon.kill();
    let mut daemon = cluster.start_coordinator(port, &args);
    let out = submit.wait_with_output().expect("coordctl ends");
    assert_eq!(ok_stdout(&out).trim(), "2", "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("coordctl: submission 0123456789abcdef0123456789abcdef had already created task 2"),
        "the retry was recognised: {}",
        stderr(&out)
    );

    // A clean restart: the id comes back from the snapshot (one every two records).
    assert!(daemon.terminate().success());
    let _daemon = cluster.start_coordinator(port, &args);
    let again = coordctl(&cluster, &["submit", "--id", id, "-"], b"once");
    assert_eq!(ok_stdout(&again).trim(), "2", "{}", stderr(&again));
    let other = coordctl(&cluster, &["submit", "--id", id, "-"], b"another payload");
    assert_eq!(other.status.code(), Some(1), "{other:?}");
    assert!(stderr(&other).contains("already created task 2 with another payload"), "{}", stderr(&other));
    for bad in ["0", "xyz", "123456789012345678901234567890123"] {
        // Refused before any input is read: nothing on standard input.
        let refused = coordctl(&cluster, &["submit", "--id", bad, "--file", "/dev/null"], b"");
        assert!(!refused.status.success(), "--id {bad}");
        assert!(stderr(&refused).contains("--id"), "--id {bad}: {}", stderr(&refused));
    }
    let summary = ok_stdout(&coordctl(&cluster, &["status"], b""));
    assert_eq!(summary.lines().next(), Some("WAITING 2 LEASED 0 COMPLETED 0 FAILED 0"), "{summary}");
    let counters = counters(&summary);
    assert_eq!(counters.get("submissions.held"), Some(&2), "{summary}");
}

// Goal: hostile submission ids get clear refusals and bounded memory. A SUBMIT_TASK_ONCE
// whose body is cut is refused naming the operation (and its connection closed); an id of
// zero is refused naming the field; with at most 2 ids per user and 3 in all, root's third
// id pushes out its first (which then makes a new task), another user's new id past the
// total is refused "try again" naming the bound and when to retry, while the ids held are
// still answered and root, at its own bound, may go on.
#[test]
fn submission_ids_are_checked_and_their_window_is_bounded() {
    let mut cluster = Cluster::new();
    let _sbatchd = start_sbatchd(&mut cluster);
    let daemon = cluster.start_coordinator(0, &["--submissions-max", "3", "--submissions-per-user-max", "2"]);
    let endpoint = endpoint(&cluster, &daemon);

    let token = fetch_credential(&cmd_socket(&cluster), util::CLUSTER_NAME).expect("a token");
    let mut stream = TcpStream::connect(daemon.addr()).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let mut bytes = Vec::new();
    let hello = Request::Hello(wire::Hello { credential: token }).encode_body();
    let frames =
        [(wire::Operation::Hello.code(), hello), (wire::Operation::SubmitTaskOnce.code(), vec![0, 0, 0, 1])];
    for (sequence, (operation, body)) in frames.iter().enumerate() {
        let header = FrameHeader {
            sequence: sequence as u32 + 1,
            operation: *operation,
            version: COORD_VERSION,
            length: body.len() as u32,
            status: 0,
        };
        header.write(&mut bytes);
        bytes.extend_from_slice(body);
    }
    stream.write_all(&bytes).expect("send");
    let mut answers = Vec::new();
    let mut head = [0u8; HEADER_BYTES];
    while stream.read_exact(&mut head).is_ok() {
        let header = FrameHeader::parse(&head).expect("a header");
        let mut body = vec![0u8; header.length as usize];
        stream.read_exact(&mut body).expect("a body");
        answers.push(
            wire::decode_reply(header.operation, &body, &lava_xdr::Limits::DEFAULT).expect("an answer"),
        );
    }
    assert_eq!(answers.len(), 2, "HELLO's answer, the refusal, then the connection closes: {answers:?}");
    let Reply::Error(error) = &answers[1] else { panic!("{answers:?}") };
    assert_eq!(error.code, wire::ERR_BAD_REQUEST);
    assert!(error.message.contains("malformed SUBMIT_TASK_ONCE body"), "{}", error.message);

    let mut client = Client::connect(&endpoint).expect("connects");
    let zero = wire::SubmissionId { high: 0, low: 0 };
    let refused = client.submit_under(zero, b"x".to_vec()).expect_err("a zero id");
    assert_eq!(refused.code(), Some(wire::ERR_BAD_REQUEST));
    assert!(refused.to_string().contains("submission id must not be 0"), "{refused}");

    let id = |low| wire::SubmissionId { high: 7, low };
    let mut root =
        |low: u64| client.submit_under(id(low), format!("root {low}").into_bytes()).expect("submitted");
    assert_eq!((root(1).task_id, root(2).task_id, root(3).task_id), (1, 2, 3));
    assert_eq!((root(2).task_id, root(2).repeated), (2, true));
    let first_again = root(1);
    assert_eq!((first_again.task_id, first_again.repeated), (4, false), "root's first id was pushed out");
    // root holds ids 3 and 1 (tasks 3, 4); nobody's first fills the total of 3.
    let nobody = |hex: &str| {
        let mut command = cluster.command(coordctl_bin());
        command
            .args(["submit", "--id", hex, "-"])
            .env("LAVA_RETRY_SECS", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .uid(NOBODY_UID)
            .gid(NOBODY_UID)
            .current_dir("/tmp")
            .env("HOME", "/tmp");
        let mut child = command.spawn().expect("start coordctl");
        child.stdin.take().expect("piped").write_all(hex.as_bytes()).expect("write the payload");
        child.wait_with_output().expect("coordctl runs")
    };
    assert_eq!(ok_stdout(&nobody("a1")).trim(), "5");
    let full = nobody("a2");
    assert_eq!(full.status.code(), Some(1), "{full:?}");
    assert!(
        stderr(&full)
            .contains("the coordinator holds 3 submission ids of the last 600 s, its most: retry in"),
        "{}",
        stderr(&full)
    );
    let held = nobody("a1");
    assert_eq!(ok_stdout(&held).trim(), "5", "{}", stderr(&held));
    assert!(stderr(&held).contains("had already created task 5"), "{}", stderr(&held));
    let replaced = root(9);
    assert_eq!((replaced.task_id, replaced.repeated), (6, false), "root at its own bound goes on");
    let summary = ok_stdout(&coordctl(&cluster, &["status"], b""));
    assert_eq!(counters(&summary).get("submissions.held"), Some(&3), "{summary}");
    assert_eq!(summary.lines().next(), Some("WAITING 6 LEASED 0 COMPLETED 0 FAILED 0"), "{summary}");
}
