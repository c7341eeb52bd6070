//! Integration tests of the real `mbatchd` binary on loopback: the job
//! pipeline with a fake sbatchd (docs/protocols/batch.md, "The three stages of a job"),
//! restart after `kill -9` ("The event log and replay"), bad input from hostile
//! peers and the cluster key's permissions (docs/ARCHITECTURE.md, "Architecture invariants").
//!
//! Each test has its own cluster folder and daemon (tests/util); every wait is
//! a bounded poll or a bounded read.

mod util;

use lava_batch_wire::{self as wire, BATCH_VERSION, Operation};
use lava_net::{AuthConfig, Authenticator, ClusterKey, Credential, KeyRing, Nonce, system_now_ms};
use lava_xdr::frame::FrameHeader;
use std::sync::Arc;

use util::proto::{Client, FakeSbd, FrameConn, encode, header, query_all, request_id, submit_request};
use util::{Cluster, EXIT_TIMEOUT, STARTUP_TIMEOUT, chmod, wait_until};

/// LavaLite's job status bits.
const STATUS_PEND: u32 = 0x01;
const STATUS_RUN: u32 = 0x04;
const STATUS_DONE: u32 = 0x40;

/// An authenticator with a key that is not the cluster's.
fn foreign_authenticator() -> Arc<Authenticator> {
    let key = ClusterKey::from_bytes(&[0x5a; 32]).expect("a key");
    Arc::new(Authenticator::new(KeyRing::new(&key), AuthConfig::default()))
}

fn job_ids(reply: &wire::JobQueryReply) -> Vec<u32> {
    reply.jobs.iter().map(|job| job.job.job_id).collect()
}

// Goal: a job goes through the whole pipeline of docs/protocols/batch.md
// ("The three stages of a job") against the real daemon, each stage acknowledged, and the client
// sees it DONE; a SIGTERM then stops mbatchd cleanly.
// Method: port 0 and the port file; a fake sbatchd registers with the cluster
// key; a fake client with a sealed credential submits; the fake sbatchd
// answers NEW_JOB, sends EXECUTE and FINISH, and checks every ACK.
#[test]
fn a_job_runs_through_new_job_execute_and_finish() {
    let mut cluster = Cluster::new();
    let mut mbatchd = cluster.start_mbatchd();
    assert_ne!(mbatchd.port(), 0);
    assert_eq!(cluster.lsf_conf_value("LSB_MBD_PORT"), Some(mbatchd.port().to_string()));

    let (mut sbd, ack) = FakeSbd::register(mbatchd.addr(), cluster.authenticator(), "localhost", 4);
    assert_eq!(ack.cluster_name, util::CLUSTER_NAME);
    assert_eq!(ack.master_name, "localhost");

    let mut client = Client::connect(mbatchd.addr(), cluster.authenticator());
    let submitted = client.submit(request_id(1), submit_request("echo hello")).expect("submission accepted");
    assert_eq!(submitted.queue, "normal");
    assert!(submitted.default_queue);
    let job = wire::WireJobRef { job_id: submitted.job_id, array_index: 0 };

    let specs: wire::JobSpecs = sbd.expect(Operation::NewJob);
    assert_eq!(specs.job, job);
    assert_eq!(specs.command, "echo hello");
    assert_eq!((specs.user_id, specs.user_name.as_str()), (1000, "alice"));
    assert_eq!(specs.exec_hosts, vec!["localhost".to_owned()]);
    assert_eq!(specs.dispatch_seq, 1);

    let started = wire::NewJobOutcome::Started { pid: 4242, pgid: 4242, job_status: STATUS_RUN };
    sbd.send(Operation::NewJobReply, &wire::NewJobReply { job, dispatch_seq: 1, outcome: started });
    let ack: wire::JobAck = sbd.expect(Operation::NewJobReplyAck);
    assert_eq!((ack.job, ack.dispatch_seq), (job, 1));

    let execute = wire::JobExecute {
        job,
        dispatch_seq: 1,
        pid: 4242,
        pgid: 4242,
        exec_uid: 1000,
        exec_user: "alice".into(),
        exec_home: "/tmp".into(),
        exec_cwd: "/tmp".into(),
        exec_time: (system_now_ms() / 1000) as i64,
    };
    sbd.send(Operation::JobExecute, &execute);
    let ack: wire::JobAck = sbd.expect(Operation::JobExecuteAck);
    assert_eq!(ack.job, job);

    let running = client.query(query_all()).expect("query");
    assert_eq!(running.jobs.len(), 1);
    assert_eq!(running.jobs[0].status, STATUS_RUN);
    assert_eq!(running.jobs[0].pid, 4242);

    let finish = wire::JobFinish {
        job,
        dispatch_seq: 1,
        pid: 4242,
        wait_status: 0,
        finish_reason: wire::FINISH_NORMAL,
        end_time: (system_now_ms() / 1000) as i64,
        rusage: wire::ResourceUsage::default(),
    };
    sbd.send(Operation::JobFinish, &finish);
    let ack: wire::JobAck = sbd.expect(Operation::JobFinishAck);
    assert_eq!(ack.job, job);

    let done = client.query(query_all()).expect("query");
    assert_eq!(job_ids(&done), vec![job.job_id]);
    assert_eq!(done.jobs[0].status, STATUS_DONE, "{:?}", done.jobs[0]);

    let status = mbatchd.terminate();
    assert!(status.success(), "SIGTERM stops mbatchd cleanly: {status}\n{}", mbatchd.log());
}

// Goal: what mbatchd acknowledged survives `kill -9` (replay of lsb.events):
// every job is there after a restart, job ids continue without reuse, and a
// retried submission (same request id) gets its first answer, not a new job.
// Method: three acknowledged submissions, SIGKILL, restart on the same port,
// then query, retry the second request id, and submit a fourth job.
#[test]
fn acknowledged_jobs_survive_kill_9_and_ids_continue() {
    let mut cluster = Cluster::new();
    let mut mbatchd = cluster.start_mbatchd();
    let mut client = Client::connect(mbatchd.addr(), cluster.authenticator());
    let mut first_ids = Vec::new();
    for n in 1..=3 {
        let reply = client.submit(request_id(n), submit_request(&format!("sleep {n}"))).expect("accepted");
        first_ids.push(reply.job_id);
    }
    drop(client);
    mbatchd.kill();

    let mbatchd = cluster.start_mbatchd();
    let mut client = Client::connect(mbatchd.addr(), cluster.authenticator());
    let jobs = client.query(query_all()).expect("query");
    assert_eq!(job_ids(&jobs), first_ids);
    assert!(jobs.jobs.iter().all(|job| job.status == STATUS_PEND), "{:?}", jobs.jobs);
    assert_eq!(jobs.jobs[1].command, "sleep 2");

    let retried = client.submit(request_id(2), submit_request("sleep 2")).expect("a retry is answered");
    assert_eq!(retried.job_id, first_ids[1], "the retry gets the job of its first attempt");
    let fourth = client.submit(request_id(4), submit_request("sleep 4")).expect("accepted");
    assert!(fourth.job_id > *first_ids.iter().max().expect("three ids"), "ids are never reused");
    assert_eq!(job_ids(&client.query(query_all()).expect("query")).len(), 4);
}

// Goal: concurrent clients each get their own job ids (no id twice), and
// every acknowledged job is durable, though their appends share fsyncs.
// Method: 4 threads × 10 submissions on their own connections; kill -9;
// restart; the 40 jobs are all there.
#[test]
fn concurrent_submissions_are_all_acknowledged_and_durable() {
    const N_CLIENTS: u64 = 4;
    const N_JOBS_PER_CLIENT: u64 = 10;
    let mut cluster = Cluster::new();
    let mut mbatchd = cluster.start_mbatchd();
    let addr = mbatchd.addr();
    let clients: Vec<_> = (0..N_CLIENTS)
        .map(|client_idx| {
            let auth = cluster.authenticator();
            std::thread::spawn(move || {
                let mut client = Client::connect(addr, auth);
                (0..N_JOBS_PER_CLIENT)
                    .map(|n| {
                        let id = request_id(client_idx * 100 + n);
                        client.submit(id, submit_request("true")).expect("accepted").job_id
                    })
                    .collect::<Vec<u32>>()
            })
        })
        .collect();
    let mut ids: Vec<u32> =
        clients.into_iter().flat_map(|client| client.join().expect("a client thread")).collect();
    ids.sort_unstable();
    let expected: Vec<u32> = (1..=(N_CLIENTS * N_JOBS_PER_CLIENT) as u32).collect();
    assert_eq!(ids, expected, "every submission got its own id");
    mbatchd.kill();

    let mbatchd = cluster.start_mbatchd();
    let mut client = Client::connect(mbatchd.addr(), cluster.authenticator());
    assert_eq!(job_ids(&client.query(query_all()).expect("query")), expected);
}

// Goal: a restart rebuilds the state from a snapshot plus the events logged
// after it (shell contract step 7), and pruning keeps the log replayable.
// Method: a snapshot every 3 events; 7 submissions; wait (bounded) for a
// snapshot file; kill -9; restart with the default interval; every job is back.
#[test]
fn a_restart_replays_a_snapshot_and_the_events_after_it() {
    let mut cluster = Cluster::new();
    let mut mbatchd = cluster.start_mbatchd_with(&["--snapshot-events", "3"]);
    let mut client = Client::connect(mbatchd.addr(), cluster.authenticator());
    for n in 1..=7 {
        client.submit(request_id(n), submit_request("true")).expect("accepted");
    }
    let log_dir = cluster.event_log_dir();
    wait_until("a snapshot file", STARTUP_TIMEOUT, || {
        std::fs::read_dir(&log_dir)
            .expect("the event log folder")
            .filter_map(Result::ok)
            .any(|entry| entry.file_name().to_string_lossy().contains("snap"))
            .then_some(())
    });
    drop(client);
    mbatchd.kill();

    let mbatchd = cluster.start_mbatchd();
    let mut client = Client::connect(mbatchd.addr(), cluster.authenticator());
    assert_eq!(job_ids(&client.query(query_all()).expect("query")), (1..=7).collect::<Vec<u32>>());
    assert_eq!(client.submit(request_id(8), submit_request("true")).expect("accepted").job_id, 8);
}

// Goal: bad input costs only the connection that sent it: each hostile peer
// is closed (or answered REQUEST_FAILED), and a well-behaved client on
// another connection is served afterwards by the same, still running, daemon.
// Method: one connection per kind of bad input, checked one after the other;
// then a good submission and query; then the daemon's log names the problems.
#[test]
fn bad_input_costs_only_its_own_connection() {
    let mut cluster = Cluster::new();
    let mut mbatchd = cluster.start_mbatchd();
    let addr = mbatchd.addr();

    // Random bytes (a fixed xorshift sequence), then end of file.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: Vec<u8> = (0..512)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let mut conn = FrameConn::connect(addr);
    conn.send_raw(&noise);
    conn.shutdown_write();
    conn.expect_closed();

    // A frame cut short: the header announces 100 bytes, 10 come, then end of file.
    let mut conn = FrameConn::connect(addr);
    let whole = util::proto::frame_bytes(header(Operation::SubmitJob, 1), &[0u8; 100]);
    conn.send_raw(&whole[..30]);
    conn.shutdown_write();
    assert!(conn.expect_closed().is_empty(), "a truncated frame gets no answer");

    // A hostile length: 4 GiB announced; refused from the header alone.
    let mut conn = FrameConn::connect(addr);
    let hostile = FrameHeader { length: 0xffff_fff0, ..header(Operation::SubmitJob, 1) };
    let mut bytes = Vec::new();
    for word in [hostile.sequence, hostile.operation, hostile.version, hostile.length, hostile.status] {
        bytes.extend_from_slice(&word.to_be_bytes());
    }
    conn.send_raw(&bytes);
    assert!(conn.expect_closed().is_empty(), "an oversized frame gets no answer");

    // An unknown protocol version: answered, then closed.
    let mut conn = FrameConn::connect(addr);
    conn.send(
        FrameHeader { version: BATCH_VERSION + 0x0001_0000, ..header(Operation::JobQuery, 7) },
        &[0; 8],
    );
    let errors = conn.expect_closed();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].code, wire::ERR_UNSUPPORTED);
    assert!(errors[0].message.contains("version"), "{}", errors[0].message);

    // An unknown operation: answered, then closed.
    let mut conn = FrameConn::connect(addr);
    conn.send(FrameHeader { operation: 999, ..header(Operation::JobQuery, 8) }, &[0; 8]);
    let errors = conn.expect_closed();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].code, wire::ERR_UNSUPPORTED);

    // A body that does not decode: answered, then closed.
    let mut conn = FrameConn::connect(addr);
    conn.send(header(Operation::SubmitJob, 9), &[0xff; 7]);
    let errors = conn.expect_closed();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].code, wire::ERR_BAD_REQUEST);

    // A forged credential: refused with ERR_AUTH; the connection stays usable
    // and serves the same request with a genuine credential.
    let mut client = Client::connect(addr, cluster.authenticator());
    let forged = Credential {
        uid: 0,
        gid: 0,
        username: "root".into(),
        hostname: "localhost".into(),
        issued_at_ms: system_now_ms(),
        nonce: Nonce::fresh().expect("a nonce"),
        audience: lava_net::Audience::new(lava_net::Audience::MBATCHD, util::CLUSTER_NAME),
    }
    .seal(&foreign_authenticator())
    .expect("seals");
    let frame = client.request_with(Operation::SubmitJob, forged, request_id(1), submit_request("id"));
    let refused = util::proto::answer::<wire::SubmitReply>(&frame, Operation::SubmitJobReply)
        .expect_err("a forged credential is refused");
    assert_eq!(refused.code, wire::ERR_AUTH);
    assert!(refused.message.contains("authentication failed"), "{}", refused.message);
    let accepted = client.submit(request_id(1), submit_request("id")).expect("the genuine retry is served");

    // SBD_REGISTER sealed with a foreign key: closed without an answer.
    let mut sbd = FakeSbd::connect(addr, foreign_authenticator(), "localhost", 4);
    assert!(sbd.conn.expect_closed().is_empty());

    // SBD_REGISTER of a host that is not in the cluster: closed.
    let mut sbd = FakeSbd::connect(addr, cluster.authenticator(), "intruder", 4);
    assert!(sbd.conn.expect_closed().is_empty());

    // A registered channel, then a frame whose MAC was altered: closed.
    let (mut sbd, _ack) = FakeSbd::register(addr, cluster.authenticator(), "localhost", 4);
    let finish = wire::JobFinish {
        job: wire::WireJobRef { job_id: accepted.job_id, array_index: 0 },
        dispatch_seq: 1,
        pid: 1,
        wait_status: 0,
        finish_reason: wire::FINISH_NORMAL,
        end_time: 0,
        rusage: wire::ResourceUsage::default(),
    };
    let frame_header = header(Operation::JobFinish, 2);
    let mut sealed = sbd.seal(frame_header, &encode(&finish)).to_vec();
    *sealed.last_mut().expect("a trailer") ^= 0x01;
    sbd.conn.send(frame_header, &sealed);
    // The channel may carry this host's NEW_JOB before the close.
    while let Some(frame) = sbd.conn.recv() {
        assert_eq!(frame.header.operation, Operation::NewJob.code());
    }

    // Everyone else is still served, by the same daemon.
    assert!(mbatchd.is_running(), "mbatchd is still running:\n{}", mbatchd.log());
    let mut client = Client::connect(addr, cluster.authenticator());
    let second = client.submit(request_id(2), submit_request("true")).expect("a good client is served");
    assert_eq!(job_ids(&client.query(query_all()).expect("query")), vec![accepted.job_id, second.job_id]);
    let (_sbd, ack) = FakeSbd::register(addr, cluster.authenticator(), "localhost", 4);
    assert_eq!(ack.cluster_name, util::CLUSTER_NAME);

    let log = mbatchd.log();
    for expected in
        ["exceeds the limit", "unsupported protocol version", "unknown operation 999", "bad MAC", "intruder"]
    {
        assert!(log.contains(expected), "the log names {expected:?}:\n{log}");
    }
}

// Goal: a second registration of a host replaces its channel (at most one
// live channel per host, shell contract step 6): the old one is closed.
#[test]
fn a_second_registration_closes_the_first_channel() {
    let mut cluster = Cluster::new();
    let mbatchd = cluster.start_mbatchd();
    let (mut first, _ack) = FakeSbd::register(mbatchd.addr(), cluster.authenticator(), "localhost", 2);
    let (_second, ack) = FakeSbd::register(mbatchd.addr(), cluster.authenticator(), "localhost", 2);
    assert_eq!(ack.master_name, "localhost");
    assert!(first.recv().is_none(), "the older channel is closed");
}

// Goal: mbatchd refuses to start with a cluster key that group or others can
// read, and the error names the file (docs/operations.md, "The cluster key").
#[test]
fn refuses_a_key_file_others_can_read() {
    let mut cluster = Cluster::new();
    chmod(&cluster.key_path(), 0o644);
    let port_file = cluster.dir().join("run/mbatchd.port");
    let mut mbatchd = cluster.spawn(
        "mbatchd",
        &util::mbatchd_bin(),
        &[
            "--foreground".as_ref(),
            "--port".as_ref(),
            "0".as_ref(),
            "--port-file".as_ref(),
            port_file.as_ref(),
        ],
    );
    let status = mbatchd.wait_exit(EXIT_TIMEOUT);
    assert!(!status.success());
    let log = mbatchd.log();
    let key_path = cluster.key_path().display().to_string();
    assert!(log.contains(&key_path) && log.contains("0644"), "the error names the file and its mode:\n{log}");
    assert!(!port_file.exists(), "a refused start never says it is ready");
}

// Goal: a second mbatchd on the same event log is refused by the log's
// writer lock, and the first one keeps serving.
#[test]
fn a_second_mbatchd_on_the_same_log_is_refused() {
    let mut cluster = Cluster::new();
    let mut first = cluster.start_mbatchd();
    let port_file = cluster.dir().join("run/second.port");
    let mut second = cluster.spawn(
        "mbatchd",
        &util::mbatchd_bin(),
        &[
            "--foreground".as_ref(),
            "--port".as_ref(),
            "0".as_ref(),
            "--port-file".as_ref(),
            port_file.as_ref(),
        ],
    );
    let status = second.wait_exit(EXIT_TIMEOUT);
    assert!(!status.success());
    assert!(second.log().contains("already open for writing"), "{}", second.log());
    assert!(first.is_running());
    let mut client = Client::connect(first.addr(), cluster.authenticator());
    client.query(query_all()).expect("the first mbatchd still serves");
}
