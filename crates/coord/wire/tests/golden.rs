//! Golden bytes of the coordinator protocol: the XDR body of every opcode's message, request or
//! answer, in both arms where a message has two (a lease or none), and one whole frame showing
//! that a refusal repeats its error code in the header's status.
//!
//! Workers, `coordctl` and the coordinator may run different builds, and the spec leaves the
//! bytes to us, so nothing but this file says what they are. A reordered field, a widened id, a
//! renumbered opcode or a change inside the XDR codec would still round-trip within one build and
//! pass every other test; here it moves a byte of a fixed value, and the failure names the message
//! and the golden line (one field per line, named in its comment). Values are distinct so that
//! swapped fields show, and every golden is decoded back through the crate's own request and answer
//! decoders. The opcode of every `Operation` is pinned with its golden through one match without a
//! wildcard, so a new opcode does not compile until it has a golden here.

use lava_coord_wire::*;
use lava_xdr::frame::{FrameHeader, FrameLimits, decode_exact};
use lava_xdr::golden::{assert_bytes, unhex};

const LIMITS: lava_xdr::Limits = lava_xdr::Limits::DEFAULT;

/// Encodes `request` with the crate's encoder, compares with `golden`, and decodes the golden
/// bytes back through `decode_request` under opcode `code`.
fn check_request(code: u32, request: Request, golden: &str) {
    let name = request.operation().name();
    assert_eq!(request.operation().code(), code, "{name} changed its opcode");
    assert_bytes(name, &request.encode_body(), golden);
    let decoded = decode_request(code, &unhex(golden), &LIMITS)
        .unwrap_or_else(|error| panic!("{name}: the golden body does not decode: {error}"));
    assert_eq!(decoded, request, "{name}: the golden body decodes to another request");
}

/// The same for an answer, through `decode_reply`; its header status is 0 except for a refusal.
fn check_reply(code: u32, reply: Reply, golden: &str) {
    let name = reply.operation().name();
    assert_eq!(reply.operation().code(), code, "{name} changed its opcode");
    assert_bytes(name, &reply.encode_body(), golden);
    let decoded = decode_reply(code, &unhex(golden), &LIMITS)
        .unwrap_or_else(|error| panic!("{name}: the golden body does not decode: {error}"));
    assert_eq!(decoded, reply, "{name}: the golden body decodes to another answer");
    match &reply {
        Reply::Error(error) => assert_eq!(reply.status(), error.code, "{name}: header status"),
        _ => assert_eq!(reply.status(), 0, "{name}: header status"),
    }
}

const TASK_ID: u64 = 0x0000_0000_0000_0101;
const LEASE_ID: u64 = 0x0000_0002_0000_0003;
const EXPIRES_AT_MS: u64 = 1_700_000_005_000;

/// Each operation's opcode and the golden test of its body. No wildcard: a new operation does
/// not compile until it is given its number and a golden here.
fn golden_of(op: Operation) -> (u32, fn()) {
    match op {
        Operation::SubmitTask => (1, submit_task),
        Operation::SubmitTaskReply => (2, submit_task_reply),
        Operation::LeaseRequest => (3, lease_request),
        Operation::LeaseReply => (4, lease_reply),
        Operation::Heartbeat => (5, heartbeat),
        Operation::LeaseExtended => (6, lease_extended),
        Operation::CompleteTask => (7, complete_task),
        Operation::FailTask => (8, fail_task),
        Operation::OutcomeReply => (9, outcome_reply),
        Operation::TaskQuery => (10, task_query),
        Operation::TaskQueryReply => (11, task_query_reply),
        Operation::CountsQuery => (12, counts_query),
        Operation::CountsReply => (13, counts_reply),
        Operation::WorkersQuery => (14, workers_query),
        Operation::WorkersReply => (15, workers_reply),
        Operation::LeasesQuery => (16, leases_query),
        Operation::LeasesReply => (17, leases_reply),
        Operation::RequestFailed => (18, request_failed),
        Operation::Hello => (19, hello),
        Operation::HelloReply => (20, hello_reply),
        Operation::StatsQuery => (21, stats_query),
        Operation::StatsReply => (22, stats_reply),
        Operation::SubmitTaskOnce => (23, submit_task_once),
        Operation::SubmitTaskOnceReply => (24, submit_task_once_reply),
    }
}

// Goal: every operation the crate knows keeps its opcode and has a golden body. Method: walk
// `Operation::ALL`, compare each code with the number written in `golden_of`, run its golden, and
// check that `ALL` lists every operation once.
#[test]
fn every_operation_keeps_its_opcode_and_has_a_golden() {
    for op in Operation::ALL {
        let (code, golden) = golden_of(op);
        assert_eq!(op.code(), code, "{} changed its opcode", op.name());
        assert_eq!(Operation::from_code(code), Some(op), "{}", op.name());
        golden();
    }
    let mut codes: Vec<u32> = Operation::ALL.iter().map(|op| op.code()).collect();
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(codes.len(), Operation::ALL.len(), "an opcode is listed twice");
}

// Goal: a whole frame is the common 20-byte header (sequence, operation, version, body length,
// status) then the XDR body, and REQUEST_FAILED repeats its error code in the header's status.
// Method: write the frame of a refusal as the coordinator does, compare with the golden, decode it.
#[test]
fn frame_of_a_refusal() {
    let reply = Reply::error(ERR_LEASE_LOST, "lease lost");
    let body = reply.encode_body();
    let header = FrameHeader {
        sequence: 9,
        operation: reply.operation().code(),
        version: COORD_VERSION,
        length: body.len() as u32,
        status: reply.status(),
    };
    let mut frame = Vec::new();
    header.write(&mut frame);
    frame.extend_from_slice(&body);
    let golden = r##"
        00000009                                    # header.sequence = 9
        00000012                                    # header.operation (REQUEST_FAILED) = 18
        00010000                                    # header.version (COORD_VERSION) = 0x10000
        00000014                                    # header.length (body bytes) = 20
        00000005                                    # header.status (the error code, ERR_LEASE_LOST) = 5
        00000005                                    # body.code (ERR_LEASE_LOST) = 5
        0000000a 6c65617365206c6f7374 0000          # body.message = "lease lost"
    "##;
    assert_bytes("REQUEST_FAILED frame", &frame, golden);
    let decoded = decode_exact(&unhex(golden), &FrameLimits::default()).expect("the golden frame decodes");
    assert_eq!(decoded.header, header);
    assert_eq!(decode_reply(decoded.header.operation, &decoded.body, &LIMITS), Ok(reply));
}

// Goal: HELLO's credential is an XDR opaque (length, bytes, zero padding). Method: golden.
#[test]
fn hello() {
    let golden = r##"
        00000005 deadbeef01 000000                  # credential = 5 bytes
    "##;
    check_request(19, Request::Hello(Hello { credential: vec![0xDE, 0xAD, 0xBE, 0xEF, 0x01] }), golden);
}

// Goal: HELLO_REPLY keeps its layout. Method: golden.
#[test]
fn hello_reply() {
    let golden = r##"
        000003e9                                    # uid = 1001
        00000005 616c696365 000000                  # user = "alice"
        00000001                                    # admin = true
    "##;
    check_reply(20, Reply::Hello(HelloReply { uid: 1001, user: "alice".into(), admin: true }), golden);
}

// Goal: SUBMIT_TASK's payload is an XDR opaque. Method: golden.
#[test]
fn submit_task() {
    let golden = r##"
        00000005 6a6f623a37 000000                  # payload = 5 bytes
    "##;
    check_request(1, Request::Submit(SubmitTask { payload: b"job:7".to_vec() }), golden);
}

// Goal: SUBMIT_TASK_REPLY is the task id as an unsigned hyper. Method: golden.
#[test]
fn submit_task_reply() {
    let golden = r##"
        0000000000000101                            # task_id = 257
    "##;
    check_reply(2, Reply::Submitted(SubmitTaskReply { task_id: TASK_ID }), golden);
}

// Goal: SUBMIT_TASK_ONCE is the submission id (two unsigned hypers, high first), then the
// payload as an XDR opaque. Method: golden.
#[test]
fn submit_task_once() {
    let golden = r##"
        0123456789abcdef                            # submission.high
        fedcba9876543210                            # submission.low
        00000005 6a6f623a38 000000                  # payload = 5 bytes
    "##;
    let submission = SubmissionId { high: 0x0123_4567_89ab_cdef, low: 0xfedc_ba98_7654_3210 };
    check_request(23, Request::SubmitOnce(SubmitTaskOnce { submission, payload: b"job:8".to_vec() }), golden);
    assert_eq!(submission.to_string(), "0123456789abcdeffedcba9876543210");
}

// Goal: SUBMIT_TASK_ONCE_REPLY is the task id, then whether the id was already recorded.
// Method: golden.
#[test]
fn submit_task_once_reply() {
    let golden = r##"
        0000000000000101                            # task_id = 257
        00000001                                    # repeated = true
    "##;
    check_reply(24, Reply::SubmittedOnce(SubmitTaskOnceReply { task_id: TASK_ID, repeated: true }), golden);
}

// Goal: LEASE_REQUEST keeps its layout. Method: golden.
#[test]
fn lease_request() {
    let golden = r##"
        00000004 772d3031                           # worker = "w-01"
    "##;
    check_request(3, Request::Lease(LeaseRequest { worker: "w-01".into() }), golden);
}

// Goal: LEASE_REPLY is XDR optional data: a granted lease after the flag 1, or the flag 0 alone
// when nothing is schedulable. Method: one golden per arm.
#[test]
fn lease_reply() {
    let grant = LeaseGrant {
        task_id: TASK_ID,
        lease_id: LEASE_ID,
        expires_at_ms: EXPIRES_AT_MS,
        payload: b"job:7".to_vec(),
    };
    let golden = r##"
        00000001                                    # lease: Some
        0000000000000101                            # lease.task_id = 257
        0000000200000003                            # lease.lease_id = 0x200000003
        0000018bcfe57b88                            # lease.expires_at_ms = 1700000005000
        00000005 6a6f623a37 000000                  # lease.payload = 5 bytes
    "##;
    check_reply(4, Reply::Lease(LeaseReply { lease: Some(grant) }), golden);
    let golden = r##"
        00000000                                    # lease: None
    "##;
    check_reply(4, Reply::Lease(LeaseReply { lease: None }), golden);
}

// Goal: HEARTBEAT keeps its layout. Method: golden.
#[test]
fn heartbeat() {
    let golden = r##"
        0000000000000101                            # task_id = 257
        0000000200000003                            # lease_id = 0x200000003
    "##;
    check_request(5, Request::Heartbeat(Heartbeat { task_id: TASK_ID, lease_id: LEASE_ID }), golden);
}

// Goal: LEASE_EXTENDED keeps its layout. Method: golden.
#[test]
fn lease_extended() {
    let extended =
        LeaseExtended { task_id: TASK_ID, lease_id: LEASE_ID, expires_at_ms: EXPIRES_AT_MS + 30_000 };
    let golden = r##"
        0000000000000101                            # task_id = 257
        0000000200000003                            # lease_id = 0x200000003
        0000018bcfe5f0b8                            # expires_at_ms = 1700000035000
    "##;
    check_reply(6, Reply::Extended(extended), golden);
}

// Goal: COMPLETE_TASK keeps its layout. Method: golden.
#[test]
fn complete_task() {
    let golden = r##"
        0000000000000101                            # task_id = 257
        0000000200000003                            # lease_id = 0x200000003
    "##;
    check_request(7, Request::Complete(TaskOutcome { task_id: TASK_ID, lease_id: LEASE_ID }), golden);
}

// Goal: FAIL_TASK has COMPLETE_TASK's layout under its own opcode. Method: golden.
#[test]
fn fail_task() {
    let golden = r##"
        0000000000000102                            # task_id = 258
        0000000200000004                            # lease_id = 0x200000004
    "##;
    check_request(8, Request::Fail(TaskOutcome { task_id: TASK_ID + 1, lease_id: LEASE_ID + 1 }), golden);
}

// Goal: OUTCOME_REPLY keeps its layout. Method: golden.
#[test]
fn outcome_reply() {
    let golden = r##"
        0000000000000102                            # task_id = 258
        00000003                                    # state (FAILED) = 3
    "##;
    check_reply(9, Reply::Outcome(OutcomeReply { task_id: TASK_ID + 1, state: task_state::FAILED }), golden);
}

// Goal: TASK_QUERY keeps its layout. Method: golden.
#[test]
fn task_query() {
    let golden = r##"
        0000000000000101                            # task_id = 257
    "##;
    check_request(10, Request::Task(TaskQuery { task_id: TASK_ID }), golden);
}

// Goal: TASK_QUERY_REPLY and its `TaskInfo` keep their layout. Method: golden.
#[test]
fn task_query_reply() {
    let task = TaskInfo {
        task_id: TASK_ID,
        state: task_state::LEASED,
        lease_id: LEASE_ID,
        worker: "w-01".into(),
        expires_at_ms: EXPIRES_AT_MS,
        n_leases: 2,
        n_refused: 1,
        payload_bytes: 5,
        owner: "bob".into(),
        owner_uid: 1002,
        holder: "alice".into(),
    };
    let golden = r##"
        0000000000000101                            # task.task_id = 257
        00000001                                    # task.state (LEASED) = 1
        0000000200000003                            # task.lease_id = 0x200000003
        00000004 772d3031                           # task.worker = "w-01"
        0000018bcfe57b88                            # task.expires_at_ms = 1700000005000
        00000002                                    # task.n_leases = 2
        00000001                                    # task.n_refused = 1
        00000005                                    # task.payload_bytes = 5
        00000003 626f62 00                          # task.owner = "bob"
        000003ea                                    # task.owner_uid = 1002
        00000005 616c696365 000000                  # task.holder = "alice"
    "##;
    check_reply(11, Reply::Task(TaskQueryReply { task }), golden);
}

// Goal: COUNTS_QUERY has an empty body. Method: golden.
#[test]
fn counts_query() {
    check_request(12, Request::Counts, "");
}

// Goal: COUNTS_REPLY keeps its layout. Method: golden.
#[test]
fn counts_reply() {
    let golden = r##"
        0000000000000004                            # waiting = 4
        0000000000000003                            # leased = 3
        0000000000000002                            # completed = 2
        0000000000000001                            # failed = 1
    "##;
    check_reply(13, Reply::Counts(CountsReply { waiting: 4, leased: 3, completed: 2, failed: 1 }), golden);
}

// Goal: WORKERS_QUERY has an empty body. Method: golden.
#[test]
fn workers_query() {
    check_request(14, Request::Workers, "");
}

// Goal: WORKERS_REPLY keeps its layout. Method: golden.
#[test]
fn workers_reply() {
    let worker = WorkerInfo { name: "w-01".into(), last_seen_ms: 1_700_000_004_000, n_leases: 2 };
    let golden = r##"
        00000001                                    # workers: 1 element
        00000004 772d3031                           # workers[0].name = "w-01"
        0000018bcfe577a0                            # workers[0].last_seen_ms = 1700000004000
        00000002                                    # workers[0].n_leases = 2
    "##;
    check_reply(15, Reply::Workers(WorkersReply { workers: vec![worker] }), golden);
}

// Goal: LEASES_QUERY has an empty body. Method: golden.
#[test]
fn leases_query() {
    check_request(16, Request::Leases, "");
}

// Goal: LEASES_REPLY keeps its layout. Method: golden.
#[test]
fn leases_reply() {
    let lease = LeaseInfo {
        task_id: TASK_ID,
        lease_id: LEASE_ID,
        worker: "w-01".into(),
        user: "alice".into(),
        expires_at_ms: EXPIRES_AT_MS,
    };
    let golden = r##"
        00000001                                    # leases: 1 element
        0000000000000101                            # leases[0].task_id = 257
        0000000200000003                            # leases[0].lease_id = 0x200000003
        00000004 772d3031                           # leases[0].worker = "w-01"
        00000005 616c696365 000000                  # leases[0].user = "alice"
        0000018bcfe57b88                            # leases[0].expires_at_ms = 1700000005000
    "##;
    check_reply(17, Reply::Leases(LeasesReply { leases: vec![lease] }), golden);
}

// Goal: REQUEST_FAILED keeps its layout, with the `ERR_*` code first. Method: golden.
#[test]
fn request_failed() {
    let golden = r##"
        00000005                                    # code (ERR_LEASE_LOST) = 5
        0000000a 6c65617365206c6f7374 0000          # message = "lease lost"
    "##;
    check_reply(18, Reply::error(ERR_LEASE_LOST, "lease lost"), golden);
}

// Goal: STATS_QUERY has an empty body. Method: golden.
#[test]
fn stats_query() {
    check_request(21, Request::Stats, "");
}

// Goal: STATS_REPLY keeps its layout. Method: golden.
#[test]
fn stats_reply() {
    let golden = r##"
        00000001                                    # counters: 1 element
        0000000a 77616c2e6673796e6373 0000          # counters[0].name = "wal.fsyncs"
        000000000000002a                            # counters[0].value = 42
    "##;
    check_reply(
        22,
        Reply::Stats(StatsReply { counters: vec![Counter { name: "wal.fsyncs".into(), value: 42 }] }),
        golden,
    );
}
