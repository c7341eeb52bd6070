//! Golden bytes of the batch protocols: every body that mbatchd and sbatchd exchange, every
//! request and answer between the commands and mbatchd (with the `ClientRequest` envelope that
//! carries each request), and the 20-byte frame header around them.
//!
//! The wire is a contract with the other end, which may run an older or newer build (a rolling
//! upgrade, or the LavaLite numbering of spec section 3 that our opcodes 30–40 keep). A field
//! reordered in a struct, a type widened, an arm inserted into an enum or a change inside the XDR
//! codec would all still round-trip inside one build and so pass every other test; here they
//! change the bytes of a fixed value, and the test names the message and the first byte that
//! moved. Each golden is written one field per line with the field named in a comment, every
//! value is distinct so that two swapped fields show, and the golden bytes are also decoded back
//! to the value. The opcode of every `Operation` is pinned with its golden through one match
//! without a wildcard, so a new operation does not compile until it has a golden here.

use std::fmt::Debug;

use lava_batch_wire::*;
use lava_xdr::frame::{FrameHeader, FrameLimits, HEADER_BYTES, decode_exact};
use lava_xdr::golden::{assert_bytes, unhex};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Encodes `value` with the XDR codec every batch peer uses, compares with `golden`, and decodes
/// the golden bytes back to `value`.
fn check<T>(name: &str, value: &T, golden: &str)
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let encoded =
        lava_xdr::to_bytes(value).unwrap_or_else(|error| panic!("{name}: does not encode: {error}"));
    assert_bytes(name, &encoded, golden);
    let decoded: T = lava_xdr::from_bytes(&unhex(golden), &lava_xdr::Limits::DEFAULT)
        .unwrap_or_else(|error| panic!("{name}: the golden bytes do not decode: {error}"));
    assert_eq!(&decoded, value, "{name}: the golden bytes decode to another value");
}

/// The credential of every request's envelope below: three bytes, so that the opaque's padding shows.
const CREDENTIAL: [u8; 3] = [0xC0, 0xFF, 0xEE];
/// The request id of every request's envelope below.
const REQUEST_ID: RequestId = RequestId { high: 0x0102_0304_0506_0708, low: 0x1112_1314_1516_1718 };

/// A command's request as it travels: the body inside the [`ClientRequest`] envelope.
fn check_request<T>(name: &str, body: T, golden: &str)
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    check(name, &ClientRequest { credential: CREDENTIAL.to_vec(), request_id: REQUEST_ID, body }, golden);
}

fn job() -> WireJobRef {
    WireJobRef { job_id: 4242, array_index: 7 }
}

const MEM_LIMIT_KB: u64 = 0x1_0000_0002;

fn rusage() -> ResourceUsage {
    ResourceUsage { user_time_ms: 1500, system_time_ms: 250, max_rss_kb: 20480 }
}

/// Each operation's opcode and the golden test of its body. No wildcard: a new operation does
/// not compile until it is given its number and a golden here.
fn golden_of(op: Operation) -> (u32, fn()) {
    match op {
        Operation::SubmitJob => (1, submit_job),
        Operation::SubmitJobReply => (2, submit_job_reply),
        Operation::JobQuery => (3, job_query),
        Operation::JobQueryReply => (4, job_query_reply),
        Operation::SignalJobs => (5, signal_jobs),
        Operation::SignalJobsReply => (6, signal_jobs_reply),
        Operation::QueueQuery => (7, queue_query),
        Operation::QueueQueryReply => (8, queue_query_reply),
        Operation::HostQuery => (9, host_query),
        Operation::HostQueryReply => (10, host_query_reply),
        Operation::StatusQuery => (11, status_query),
        Operation::StatusQueryReply => (12, status_query_reply),
        Operation::Reconfig => (13, reconfig),
        Operation::ReconfigReply => (14, reconfig_reply),
        Operation::RequestFailed => (15, request_failed),
        Operation::CredentialRequest => (16, credential_request),
        Operation::CredentialReply => (17, credential_reply),
        Operation::SbdStatusQuery => (18, sbd_status_query),
        Operation::SbdStatusReply => (19, sbd_status_reply),
        Operation::SbdRegister => (20, sbd_register),
        Operation::SbdRegisterAck => (21, sbd_register_ack),
        Operation::NewJob => (30, new_job),
        Operation::NewJobReply => (31, new_job_reply),
        Operation::NewJobReplyAck => (32, job_ack),
        Operation::JobExecute => (33, job_execute),
        Operation::JobExecuteAck => (34, job_ack),
        Operation::JobFinish => (35, job_finish),
        Operation::JobFinishAck => (36, job_ack),
        Operation::JobSignal => (37, job_signal),
        Operation::JobSignalReply => (38, job_signal_reply),
        Operation::JobSignalMany => (39, reserved_without_body),
        Operation::JobSignalManyReply => (40, reserved_without_body),
        Operation::JobControl => (50, job_control),
        Operation::JobControlReply => (51, job_control_reply),
        Operation::AdminControl => (52, admin_control),
        Operation::AdminControlReply => (53, admin_control_reply),
        Operation::HistoryQuery => (54, history_query),
        Operation::HistoryQueryReply => (55, history_query_reply),
        Operation::StaleState => (56, stale_state),
        Operation::PeekJob => (70, peek_job),
        Operation::PeekJobReply => (71, peek_job_reply),
        Operation::SbdPeek => (72, sbd_peek),
        Operation::SbdPeekReply => (73, sbd_peek_reply),
        Operation::WaitQuery => (74, wait_query),
        Operation::WaitQueryReply => (75, wait_query_reply),
        Operation::InteractiveAttach => (80, interactive_attach),
        Operation::InteractiveAttachReply => (81, interactive_attach_reply),
        Operation::InteractiveData => (82, interactive_data),
        Operation::InteractiveWinsize => (83, interactive_winsize),
        Operation::InteractiveExit => (84, interactive_exit),
        Operation::InteractiveSignal => (85, interactive_signal),
        Operation::TaskGrantRequest => (90, task_grant_request),
        Operation::TaskGrantReply => (91, task_grant_reply),
        Operation::TaskStart => (92, task_start),
        Operation::TaskStarted => (93, task_started),
        Operation::TaskOutput => (94, task_output),
        Operation::TaskExit => (95, task_exit),
        Operation::TaskSignal => (96, task_signal),
        Operation::TaskJobSignal => (97, task_job_signal),
        Operation::TaskJobSignalReply => (98, task_job_signal_reply),
        Operation::TaskUsage => (99, task_usage),
        Operation::TaskUsageReply => (100, task_usage_reply),
    }
}

/// BATCH_JOB_SIGNAL_MANY and its reply: reserved by the spec ("future"), refused today, with no
/// body defined; only their numbers (39, 40) are pinned.
fn reserved_without_body() {}

// Goal: every operation the crate knows keeps its opcode and has a golden body. Method: walk
// `Operation::ALL`, compare each code with the number written in `golden_of` and run its golden;
// check that the mbd-sbd opcodes follow spec section 3's order from LavaLite's 30, and that
// `ALL` lists every operation once.
#[test]
fn every_operation_keeps_its_opcode_and_has_a_golden() {
    for op in Operation::ALL {
        let (code, golden) = golden_of(op);
        assert_eq!(op.code(), code, "{} changed its opcode", op.name());
        assert_eq!(Operation::from_code(code), Some(op), "{}", op.name());
        golden();
    }
    let spec_order = [
        Operation::NewJob,
        Operation::NewJobReply,
        Operation::NewJobReplyAck,
        Operation::JobExecute,
        Operation::JobExecuteAck,
        Operation::JobFinish,
        Operation::JobFinishAck,
        Operation::JobSignal,
        Operation::JobSignalReply,
        Operation::JobSignalMany,
        Operation::JobSignalManyReply,
    ];
    for (idx, op) in spec_order.into_iter().enumerate() {
        assert_eq!(op.code(), 30 + idx as u32, "{} is not in spec section 3's place", op.name());
    }
    let mut codes: Vec<u32> = Operation::ALL.iter().map(|op| op.code()).collect();
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(codes.len(), Operation::ALL.len(), "an opcode is listed twice");
}

// Goal: the 20-byte frame header keeps LavaLite's five big-endian words in their order
// (sequence, operation, version, length, status), `length` counts the body only, and a whole
// frame is the header then the XDR body. Method: write a header and a whole BATCH_NEW_JOB_REPLY_ACK
// frame, compare with the goldens, parse them back.
#[test]
fn frame_header() {
    let header = FrameHeader {
        sequence: 0x0102_0304,
        operation: Operation::RequestFailed.code(),
        version: BATCH_VERSION,
        length: 20,
        status: ERR_TRY_AGAIN,
    };
    let golden = r##"
        01020304                                    # sequence = 0x1020304
        0000000f                                    # operation (REQUEST_FAILED) = 15
        00010000                                    # version (BATCH_VERSION) = 0x10000
        00000014                                    # length = 20
        00000006                                    # status (ERR_TRY_AGAIN) = 6
    "##;
    let mut written = Vec::new();
    header.write(&mut written);
    assert_bytes("frame header", &written, golden);
    assert_eq!(written.len(), HEADER_BYTES);
    assert_eq!(FrameHeader::parse(&unhex(golden)), Ok(header));

    let ack = JobAck { job: job(), dispatch_seq: 3 };
    let body = lava_xdr::to_bytes(&ack).expect("a JobAck encodes");
    let header = FrameHeader {
        sequence: 77,
        operation: Operation::NewJobReplyAck.code(),
        version: BATCH_VERSION,
        length: body.len() as u32,
        status: 0,
    };
    let mut frame = Vec::new();
    header.write(&mut frame);
    frame.extend_from_slice(&body);
    let golden = r##"
        0000004d                                    # header.sequence = 77
        00000020                                    # header.operation (BATCH_NEW_JOB_REPLY_ACK) = 32
        00010000                                    # header.version (BATCH_VERSION) = 0x10000
        0000000c                                    # header.length (body bytes) = 12
        00000000                                    # header.status = 0
        00001092                                    # body.job.job_id = 4242
        00000007                                    # body.job.array_index = 7
        00000003                                    # body.dispatch_seq = 3
    "##;
    assert_bytes("BATCH_NEW_JOB_REPLY_ACK frame", &frame, golden);
    let decoded = decode_exact(&unhex(golden), &FrameLimits::default()).expect("the golden frame decodes");
    assert_eq!(decoded.header, header);
    let back: JobAck = lava_xdr::from_bytes(&decoded.body, &lava_xdr::Limits::DEFAULT).expect("body decodes");
    assert_eq!(back, ack);
}

// ---------------------------------------------------------------------------
// mbatchd <-> sbatchd
// ---------------------------------------------------------------------------

// Goal: BATCH_NEW_JOB's dispatch snapshot keeps its 31 fields in order, the limits as XDR
// optional data. Method: golden of a
// snapshot with two hosts and two environment variables (one with an empty value).
#[test]
fn new_job() {
    let specs = JobSpecs {
        job: job(),
        submit_time: 1_700_000_001,
        dispatch_time: 1_700_000_123,
        dispatch_seq: 3,
        user_id: 1001,
        group_id: 100,
        user_name: "alice".into(),
        queue: "normal".into(),
        job_name: "sim".into(),
        command: "sleep 1".into(),
        from_host: "hostA".into(),
        cwd: "/tmp".into(),
        sub_home_dir: "/home/alice".into(),
        input_file: String::new(),
        output_file: "out.%J".into(),
        error_file: "err".into(),
        file_flags: 2,
        n_slots: 4,
        exec_hosts: vec!["hostB".into(), "hostC".into()],
        umask: 0o022,
        run_limit_s: 3600,
        mem_limit_kb: MEM_LIMIT_KB,
        terminate_interval_s: 10,
        project: "proj".into(),
        login_shell: "/bin/bash".into(),
        pre_exec: "true".into(),
        env: vec![
            EnvVar { name: "PATH".into(), value: "/bin".into() },
            EnvVar { name: "LSB_X".into(), value: String::new() },
        ],
        post_exec: "post".into(),
        queue_pre_exec: "qpre".into(),
        queue_post_exec: String::new(),
        nice: -5,
        limits: ResourceLimits {
            cpu_s: Some(5400),
            core_kb: Some(0),
            processes: Some(8),
            ..ResourceLimits::default()
        },
        job_starter: "time".into(),
    };
    let golden = r##"
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        000000006553f101                            # submit_time = 1700000001
        000000006553f17b                            # dispatch_time = 1700000123
        00000003                                    # dispatch_seq = 3
        000003e9                                    # user_id = 1001
        00000064                                    # group_id = 100
        00000005 616c696365 000000                  # user_name = "alice"
        00000006 6e6f726d616c 0000                  # queue = "normal"
        00000003 73696d 00                          # job_name = "sim"
        00000007 736c6565702031 00                  # command = "sleep 1"
        00000005 686f737441 000000                  # from_host = "hostA"
        00000004 2f746d70                           # cwd = "/tmp"
        0000000b 2f686f6d652f616c696365 00          # sub_home_dir = "/home/alice"
        00000000                                    # input_file = ""
        00000006 6f75742e254a 0000                  # output_file = "out.%J"
        00000003 657272 00                          # error_file = "err"
        00000002                                    # file_flags = 2
        00000004                                    # n_slots = 4
        00000002                                    # exec_hosts: 2 elements
        00000005 686f737442 000000                  # exec_hosts[0] = "hostB"
        00000005 686f737443 000000                  # exec_hosts[1] = "hostC"
        00000012                                    # umask = 18
        0000000000000e10                            # run_limit_s = 3600
        0000000100000002                            # mem_limit_kb = 0x100000002
        0000000a                                    # terminate_interval_s = 10
        00000004 70726f6a                           # project = "proj"
        00000009 2f62696e2f62617368 000000          # login_shell = "/bin/bash"
        00000004 74727565                           # pre_exec = "true"
        00000002                                    # env: 2 elements
        00000004 50415448                           # env[0].name = "PATH"
        00000004 2f62696e                           # env[0].value = "/bin"
        00000005 4c53425f58 000000                  # env[1].name = "LSB_X"
        00000000                                    # env[1].value = ""
        00000004 706f7374                           # post_exec = "post"
        00000004 71707265                           # queue_pre_exec = "qpre"
        00000000                                    # queue_post_exec = ""
        fffffffb                                    # nice = -5
        00000001 0000000000001518                   # limits.cpu_s = Some(5400)
        00000000                                    # limits.file_kb = None
        00000000                                    # limits.data_kb = None
        00000000                                    # limits.stack_kb = None
        00000001 0000000000000000                   # limits.core_kb = Some(0)
        00000000                                    # limits.swap_kb = None
        00000001 00000008                           # limits.processes = Some(8)
        00000000                                    # limits.threads = None
        00000004 74696d65                           # job_starter = "time"
    "##;
    check("BATCH_NEW_JOB", &specs, golden);
}

// Goal: BATCH_NEW_JOB_REPLY's two arms keep their discriminants (Started 0, Refused 1) and fields.
// Method: one golden per arm; the match below has no wildcard, so a new arm needs a golden.
#[test]
fn new_job_reply() {
    let started = NewJobReply {
        job: job(),
        dispatch_seq: 3,
        outcome: NewJobOutcome::Started { pid: 31337, pgid: 31336, job_status: 4 },
    };
    let refused = NewJobReply {
        job: WireJobRef { job_id: 4243, array_index: 0 },
        dispatch_seq: 1,
        outcome: NewJobOutcome::Refused { code: REFUSE_SETUP, message: "no cwd".into() },
    };
    for reply in [started, refused] {
        let (arm, golden) = match reply.outcome {
            NewJobOutcome::Started { .. } => ("Started", STARTED),
            NewJobOutcome::Refused { .. } => ("Refused", REFUSED),
        };
        check(&format!("BATCH_NEW_JOB_REPLY {arm}"), &reply, golden);
    }
    const STARTED: &str = r##"
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        00000003                                    # dispatch_seq = 3
        00000000                                    # outcome: arm Started
        00007a69                                    # outcome.pid = 31337
        00007a68                                    # outcome.pgid = 31336
        00000004                                    # outcome.job_status = 4
    "##;
    const REFUSED: &str = r##"
        00001093                                    # job.job_id = 4243
        00000000                                    # job.array_index = 0
        00000001                                    # dispatch_seq = 1
        00000001                                    # outcome: arm Refused
        00000002                                    # outcome.code = 2
        00000006 6e6f20637764 0000                  # outcome.message = "no cwd"
    "##;
}

// Goal: the three ACKs (NEW_JOB_REPLY_ACK, EXECUTE_ACK, FINISH_ACK) share one layout: the job
// and the dispatch number. Method: golden of one JobAck.
#[test]
fn job_ack() {
    let golden = r##"
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        00000003                                    # dispatch_seq = 3
    "##;
    check("BATCH_*_ACK", &JobAck { job: job(), dispatch_seq: 3 }, golden);
}

// Goal: BATCH_JOB_EXECUTE keeps its fields in order. Method: golden of one message.
#[test]
fn job_execute() {
    let execute = JobExecute {
        job: job(),
        dispatch_seq: 3,
        pid: 31337,
        pgid: 31336,
        exec_uid: 1001,
        exec_user: "alice".into(),
        exec_home: "/home/alice".into(),
        exec_cwd: "/tmp/w".into(),
        exec_time: 1_700_000_124,
    };
    let golden = r##"
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        00000003                                    # dispatch_seq = 3
        00007a69                                    # pid = 31337
        00007a68                                    # pgid = 31336
        000003e9                                    # exec_uid = 1001
        00000005 616c696365 000000                  # exec_user = "alice"
        0000000b 2f686f6d652f616c696365 00          # exec_home = "/home/alice"
        00000006 2f746d702f77 0000                  # exec_cwd = "/tmp/w"
        000000006553f17c                            # exec_time = 1700000124
    "##;
    check("BATCH_JOB_EXECUTE", &execute, golden);
}

// Goal: BATCH_JOB_FINISH keeps its fields and the resource usage in order. Method: golden of one message.
#[test]
fn job_finish() {
    let finish = JobFinish {
        job: job(),
        dispatch_seq: 3,
        pid: 31337,
        wait_status: 256,
        finish_reason: FINISH_RUN_LIMIT,
        end_time: 1_700_003_724,
        rusage: rusage(),
    };
    let golden = r##"
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        00000003                                    # dispatch_seq = 3
        00007a69                                    # pid = 31337
        00000100                                    # wait_status = 256
        00000001                                    # finish_reason = 1
        000000006553ff8c                            # end_time = 1700003724
        00000000000005dc                            # rusage.user_time_ms = 1500
        00000000000000fa                            # rusage.system_time_ms = 250
        0000000000005000                            # rusage.max_rss_kb = 20480
    "##;
    check("BATCH_JOB_FINISH", &finish, golden);
}

// Goal: BATCH_JOB_SIGNAL keeps its layout and every signal action its discriminant. Method: one
// golden per arm of `SignalAction`; the match has no wildcard, so a new arm needs a golden.
#[test]
fn job_signal() {
    let actions =
        [SignalAction::Stop, SignalAction::Continue, SignalAction::Terminate, SignalAction::Signal(10)];
    for action in actions {
        let signal = JobSignal { job: job(), signal_seq: 5, action };
        let golden = match action {
            SignalAction::Stop => STOP,
            SignalAction::Continue => CONTINUE,
            SignalAction::Terminate => TERMINATE,
            SignalAction::Signal(_) => SIGNAL,
        };
        check(&format!("BATCH_JOB_SIGNAL {action:?}"), &signal, golden);
    }
    const STOP: &str = r##"
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        00000005                                    # signal_seq = 5
        00000000                                    # action: arm Stop
    "##;
    const CONTINUE: &str = r##"
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        00000005                                    # signal_seq = 5
        00000001                                    # action: arm Continue
    "##;
    const TERMINATE: &str = r##"
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        00000005                                    # signal_seq = 5
        00000002                                    # action: arm Terminate
    "##;
    const SIGNAL: &str = r##"
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        00000005                                    # signal_seq = 5
        00000003                                    # action: arm Signal
        0000000a                                    # action.0 (signal number) = 10
    "##;
}

// Goal: BATCH_JOB_SIGNAL_REPLY keeps its layout and every outcome its discriminant. Method: one
// golden per arm of `SignalOutcome`; the match has no wildcard, so a new arm needs a golden.
#[test]
fn job_signal_reply() {
    let outcomes = [
        SignalOutcome::Delivered,
        SignalOutcome::NoSuchJob,
        SignalOutcome::AlreadyFinished,
        SignalOutcome::Failed(1),
    ];
    for outcome in outcomes {
        let reply = JobSignalReply { job: job(), signal_seq: 5, outcome };
        let golden = match outcome {
            SignalOutcome::Delivered => DELIVERED,
            SignalOutcome::NoSuchJob => NO_SUCH_JOB,
            SignalOutcome::AlreadyFinished => ALREADY_FINISHED,
            SignalOutcome::Failed(_) => FAILED,
        };
        check(&format!("BATCH_JOB_SIGNAL_REPLY {outcome:?}"), &reply, golden);
    }
    const DELIVERED: &str = r##"
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        00000005                                    # signal_seq = 5
        00000000                                    # outcome: arm Delivered
    "##;
    const NO_SUCH_JOB: &str = r##"
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        00000005                                    # signal_seq = 5
        00000001                                    # outcome: arm NoSuchJob
    "##;
    const ALREADY_FINISHED: &str = r##"
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        00000005                                    # signal_seq = 5
        00000002                                    # outcome: arm AlreadyFinished
    "##;
    const FAILED: &str = r##"
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        00000005                                    # signal_seq = 5
        00000003                                    # outcome: arm Failed
        00000001                                    # outcome.0 (errno) = 1
    "##;
}

// Goal: SBD_REGISTER keeps its layout. Method: golden of one message.
#[test]
fn sbd_register() {
    let register = SbdRegister { host_name: "hostB".into(), n_cpus: 16, sbd_pid: 2121 };
    let golden = r##"
        00000005 686f737442 000000                  # host_name = "hostB"
        00000010                                    # n_cpus = 16
        00000849                                    # sbd_pid = 2121
    "##;
    check("SBD_REGISTER", &register, golden);
}

// Goal: SBD_REGISTER_ACK keeps its layout. Method: golden of one message.
#[test]
fn sbd_register_ack() {
    let ack = SbdRegisterAck { cluster_name: "lava".into(), master_name: "hostA".into() };
    let golden = r##"
        00000004 6c617661                           # cluster_name = "lava"
        00000005 686f737441 000000                  # master_name = "hostA"
    "##;
    check("SBD_REGISTER_ACK", &ack, golden);
}

// Goal: SBD_PEEK (mbatchd relays a checked `bpeek` to sbatchd) keeps its layout. Method: golden.
#[test]
fn sbd_peek() {
    let peek = SbdPeek { peek_id: 77, request: PeekRequest { job: job(), offset: 65536 } };
    let golden = r##"
        000000000000004d                            # peek_id = 77
        00001092                                    # request.job.job_id = 4242
        00000007                                    # request.job.array_index = 7
        0000000000010000                            # request.offset = 65536
    "##;
    check("SBD_PEEK", &peek, golden);
}

// Goal: SBD_PEEK_REPLY keeps its layout, with an empty opaque. Method: golden of a failed read.
#[test]
fn sbd_peek_reply() {
    let reply = SbdPeekReply {
        peek_id: 77,
        reply: PeekReply { code: PEEK_FAILED, message: "EIO".into(), data: Vec::new(), next_offset: 65536 },
    };
    let golden = r##"
        000000000000004d                            # peek_id = 77
        00000004                                    # reply.code = 4
        00000003 45494f 00                          # reply.message = "EIO"
        00000000                                    # reply.data = 0 bytes
        0000000000010000                            # reply.next_offset = 65536
    "##;
    check("SBD_PEEK_REPLY", &reply, golden);
}

// ---------------------------------------------------------------------------
// bsub -I <-> the execution host's sbatchd
// ---------------------------------------------------------------------------

// Goal: INTERACTIVE_ATTACH keeps its layout: the credential first (as in a command's
// envelope), then the job and the terminal's size. Method: golden.
#[test]
fn interactive_attach() {
    let attach = InteractiveAttach { credential: CREDENTIAL.to_vec(), job: job(), rows: 24, cols: 80 };
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        00001092                                    # job.job_id = 4242
        00000007                                    # job.array_index = 7
        00000018                                    # rows = 24
        00000050                                    # cols = 80
    "##;
    check("INTERACTIVE_ATTACH", &attach, golden);
}

// Goal: INTERACTIVE_ATTACH_REPLY keeps its layout. Method: golden of a refusal.
#[test]
fn interactive_attach_reply() {
    let reply = InteractiveAttachReply { code: ATTACH_DENIED, message: "EIO".into() };
    let golden = r##"
        00000003                                    # code = 3 (ATTACH_DENIED)
        00000003 45494f 00                          # message = "EIO"
    "##;
    check("INTERACTIVE_ATTACH_REPLY", &reply, golden);
}

// Goal: INTERACTIVE_DATA keeps its layout. Method: golden of two bytes of standard error.
#[test]
fn interactive_data() {
    let data = InteractiveData { stream: STREAM_STDERR, data: b"ok".to_vec() };
    let golden = r##"
        00000002                                    # stream = 2 (stderr)
        00000002 6f6b 0000                          # data = "ok"
    "##;
    check("INTERACTIVE_DATA", &data, golden);
}

fn interactive_signal() {
    let golden = r##"
        00000002                                    # signal = SIGINT
    "##;
    check("INTERACTIVE_SIGNAL", &InteractiveSignal { signal: 2 }, golden);
}

// Goal: INTERACTIVE_WINSIZE keeps its layout. Method: golden.
#[test]
fn interactive_winsize() {
    let size = InteractiveWinsize { rows: 50, cols: 132 };
    let golden = r##"
        00000032                                    # rows = 50
        00000084                                    # cols = 132
    "##;
    check("INTERACTIVE_WINSIZE", &size, golden);
}

// Goal: INTERACTIVE_EXIT keeps its layout. Method: golden of exit status 3.
#[test]
fn interactive_exit() {
    let exit = InteractiveExit { wait_status: 3 << 8 };
    let golden = r##"
        00000300                                    # wait_status = 0x300 (exit 3)
    "##;
    check("INTERACTIVE_EXIT", &exit, golden);
}

// ---------------------------------------------------------------------------
// blaunch <-> sbatchd (docs/protocols/batch.md, "Parallel tasks")
// ---------------------------------------------------------------------------

fn task_grant_request() {
    let golden = r##"
        00001092 00000007                           # job = 4242[7]
        00000002 6831 0000                          # host = "h1"
    "##;
    check("TASK_GRANT_REQUEST", &TaskGrantRequest { job: job(), host: "h1".into() }, golden);
}

fn task_grant_reply() {
    let golden = r##"
        00000003 c0ffee 00                          # grant = 3 bytes
    "##;
    check("TASK_GRANT_REPLY", &TaskGrantReply { grant: vec![0xc0, 0xff, 0xee] }, golden);
}

// The grant's sealed data (not an opcode of its own): magic and trailer around it are lava-net's.
#[test]
fn task_grant() {
    let grant = TaskGrant {
        job: job(),
        user: "ann".into(),
        uid: 1000,
        gid: 100,
        from_host: "h0".into(),
        to_host: "h1".into(),
        cluster: "c".into(),
        mem_limit_kb: MEM_LIMIT_KB,
    };
    let golden = r##"
        00001092 00000007                           # job = 4242[7]
        00000003 616e6e 00                          # user = "ann"
        000003e8                                    # uid = 1000
        00000064                                    # gid = 100
        00000002 6830 0000                          # from_host = "h0"
        00000002 6831 0000                          # to_host = "h1"
        00000001 63 000000                          # cluster = "c"
        0000000100000002                            # mem_limit_kb
    "##;
    check("TaskGrant", &grant, golden);
}

fn task_job_signal() {
    let golden = r##"
        00000003 c0ffee 00                          # order = 3 bytes
    "##;
    check("TASK_JOB_SIGNAL", &TaskJobSignal { order: vec![0xc0, 0xff, 0xee] }, golden);
}

// The signal order's sealed data (not an opcode of its own).
#[test]
fn task_signal_order() {
    let order = TaskSignalOrder {
        job: job(),
        uid: 1000,
        signal: 19,
        from_host: "h0".into(),
        to_host: "h1".into(),
        cluster: "c".into(),
    };
    let golden = r##"
        00001092 00000007                           # job = 4242[7]
        000003e8                                    # uid = 1000
        00000013                                    # signal = SIGSTOP
        00000002 6830 0000                          # from_host = "h0"
        00000002 6831 0000                          # to_host = "h1"
        00000001 63 000000                          # cluster = "c"
    "##;
    check("TaskSignalOrder", &order, golden);
}

fn task_job_signal_reply() {
    let golden = r##"
        00000002                                    # tasks = 2
    "##;
    check("TASK_JOB_SIGNAL_REPLY", &TaskJobSignalReply { tasks: 2 }, golden);
}

fn task_usage() {
    let golden = r##"
        00001092 00000007                           # job = 4242[7]
        00000002 6831 0000                          # host = "h1"
        00000000000005dc                            # rusage.user_time_ms = 1500
        00000000000000fa                            # rusage.system_time_ms = 250
        0000000000005000                            # rusage.max_rss_kb = 20480
    "##;
    check("TASK_USAGE", &TaskUsage { job: job(), host: "h1".into(), rusage: rusage() }, golden);
}

fn task_usage_reply() {
    check("TASK_USAGE_REPLY", &TaskUsageReply {}, "");
}

fn task_start() {
    let start = TaskStart {
        grant: vec![0xc0, 0xff, 0xee],
        command: "id".into(),
        env: vec![EnvVar { name: "A".into(), value: "b".into() }],
        cwd: "/".into(),
    };
    let golden = r##"
        00000003 c0ffee 00                          # grant = 3 bytes
        00000002 6964 0000                          # command = "id"
        00000001                                    # env: 1 entry
        00000001 41 000000                          # env[0].name = "A"
        00000001 62 000000                          # env[0].value = "b"
        00000001 2f 000000                          # cwd = "/"
    "##;
    check("TASK_START", &start, golden);
}

fn task_started() {
    let golden = r##"
        00000457                                    # pid = 1111
        00000002 6831 0000                          # host = "h1"
    "##;
    check("TASK_STARTED", &TaskStarted { pid: 1111, host: "h1".into() }, golden);
}

fn task_output() {
    let golden = r##"
        00000002                                    # stream = TASK_STDERR
        00000002 6869 0000                          # data = "hi"
    "##;
    check("TASK_OUTPUT", &TaskOutput { stream: TASK_STDERR, data: b"hi".to_vec() }, golden);
}

fn task_exit() {
    let golden = r##"
        00000100                                    # wait_status = exit 1
        00000000000005dc                            # rusage.user_time_ms = 1500
        00000000000000fa                            # rusage.system_time_ms = 250
        0000000000005000                            # rusage.max_rss_kb = 20480
    "##;
    check("TASK_EXIT", &TaskExit { wait_status: 256, rusage: rusage() }, golden);
}

fn task_signal() {
    let golden = r##"
        0000000f                                    # signal = SIGTERM
    "##;
    check("TASK_SIGNAL", &TaskSignal { signal: 15 }, golden);
}

// ---------------------------------------------------------------------------
// commands <-> mbatchd (and the local sbatchd)
// ---------------------------------------------------------------------------

// Goal: the envelope of every command request is the credential (XDR opaque), the request id
// (high then low) and then the body, with nothing between. Method: golden of an envelope around
// an empty body; every request below repeats these three lines.
#[test]
fn client_request_envelope() {
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        0102030405060708                            # request_id.high = 0x102030405060708
        1112131415161718                            # request_id.low = 0x1112131415161718
    "##;
    check_request("ClientRequest", StatusQuery {}, golden);
}

// Goal: SUBMIT_JOB keeps its 25 fields in order, the job's limits last as XDR optional data.
// Method: golden of a request in its envelope.
#[test]
fn submit_job() {
    let submit = SubmitRequest {
        queue: "normal".into(),
        job_name: "sim".into(),
        command: "sleep 1".into(),
        cwd: "/tmp".into(),
        home_dir: "/home/alice".into(),
        input_file: "in".into(),
        output_file: "out.%J".into(),
        error_file: String::new(),
        file_flags: 1,
        n_slots: 2,
        hosts: vec!["hostB".into()],
        project: "proj".into(),
        run_limit_s: 600,
        mem_limit_kb: MEM_LIMIT_KB,
        hold: true,
        res_req: "mem>1".into(),
        dependency: "done(1)".into(),
        exclusive: false,
        login_shell: String::new(),
        pre_exec: "true".into(),
        begin_time: 1_700_000_500,
        from_host: "hostA".into(),
        umask: 0o022,
        env: vec![EnvVar { name: "HOME".into(), value: "/home/alice".into() }],
        post_exec: "post".into(),
        limits: Some(Box::new(ResourceLimits { cpu_s: Some(60), ..ResourceLimits::default() })),
    };
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        0102030405060708                            # request_id.high = 0x102030405060708
        1112131415161718                            # request_id.low = 0x1112131415161718
        00000006 6e6f726d616c 0000                  # body.queue = "normal"
        00000003 73696d 00                          # body.job_name = "sim"
        00000007 736c6565702031 00                  # body.command = "sleep 1"
        00000004 2f746d70                           # body.cwd = "/tmp"
        0000000b 2f686f6d652f616c696365 00          # body.home_dir = "/home/alice"
        00000002 696e 0000                          # body.input_file = "in"
        00000006 6f75742e254a 0000                  # body.output_file = "out.%J"
        00000000                                    # body.error_file = ""
        00000001                                    # body.file_flags = 1
        00000002                                    # body.n_slots = 2
        00000001                                    # body.hosts: 1 element
        00000005 686f737442 000000                  # body.hosts[0] = "hostB"
        00000004 70726f6a                           # body.project = "proj"
        0000000000000258                            # body.run_limit_s = 600
        0000000100000002                            # body.mem_limit_kb = 0x100000002
        00000001                                    # body.hold = true
        00000005 6d656d3e31 000000                  # body.res_req = "mem>1"
        00000007 646f6e65283129 00                  # body.dependency = "done(1)"
        00000000                                    # body.exclusive = false
        00000000                                    # body.login_shell = ""
        00000004 74727565                           # body.pre_exec = "true"
        000000006553f2f4                            # body.begin_time = 1700000500
        00000005 686f737441 000000                  # body.from_host = "hostA"
        00000012                                    # body.umask = 18
        00000001                                    # body.env: 1 element
        00000004 484f4d45                           # body.env[0].name = "HOME"
        0000000b 2f686f6d652f616c696365 00          # body.env[0].value = "/home/alice"
        00000004 706f7374                           # body.post_exec = "post"
        00000001                                    # body.limits: present
        00000001 000000000000003c                   # body.limits.cpu_s = Some(60)
        00000000                                    # body.limits.file_kb = None
        00000000                                    # body.limits.data_kb = None
        00000000                                    # body.limits.stack_kb = None
        00000000                                    # body.limits.core_kb = None
        00000000                                    # body.limits.swap_kb = None
        00000000                                    # body.limits.processes = None
        00000000                                    # body.limits.threads = None
    "##;
    check_request("SUBMIT_JOB", submit, golden);
}

// Goal: SUBMIT_JOB_REPLY keeps its layout. Method: golden of one reply.
#[test]
fn submit_job_reply() {
    let reply = SubmitReply { job_id: 4242, queue: "normal".into(), default_queue: true };
    let golden = r##"
        00001092                                    # job_id = 4242
        00000006 6e6f726d616c 0000                  # queue = "normal"
        00000001                                    # default_queue = true
    "##;
    check("SUBMIT_JOB_REPLY", &reply, golden);
}

// Goal: JOB_QUERY keeps its layout. Method: golden of a request in its envelope.
#[test]
fn job_query() {
    let query = JobQuery {
        jobs: vec![job()],
        user: "all".into(),
        state_filter: state_filter::ALL,
        queue: "normal".into(),
        host: "hostB".into(),
        job_name: "sim".into(),
        after_job: 4000,
        after_index: 3,
    };
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        0102030405060708                            # request_id.high = 0x102030405060708
        1112131415161718                            # request_id.low = 0x1112131415161718
        00000001                                    # body.jobs: 1 element
        00001092                                    # body.jobs[0].job_id = 4242
        00000007                                    # body.jobs[0].array_index = 7
        00000003 616c6c 00                          # body.user = "all"
        00000001                                    # body.state_filter = 1
        00000006 6e6f726d616c 0000                  # body.queue = "normal"
        00000005 686f737442 000000                  # body.host = "hostB"
        00000003 73696d 00                          # body.job_name = "sim"
        00000fa0                                    # body.after_job = 4000
        00000003                                    # body.after_index = 3
    "##;
    check_request("JOB_QUERY", query, golden);
}

// Goal: JOB_QUERY_REPLY and its `JobInfo` (31 fields) keep their layout. Method: golden of a page
// with one job and one id not found.
#[test]
fn job_query_reply() {
    let info = JobInfo {
        job: job(),
        user_name: "alice".into(),
        status: 4,
        queue: "normal".into(),
        from_host: "hostA".into(),
        exec_hosts: vec!["hostB".into(), "hostC".into()],
        job_name: "sim".into(),
        command: "sleep 1".into(),
        project: "proj".into(),
        cwd: "/tmp".into(),
        exec_cwd: "/tmp/w".into(),
        output_file: "out.%J".into(),
        error_file: "err".into(),
        n_slots: 2,
        submit_time: 1_700_000_001,
        start_time: 1_700_000_123,
        end_time: 1_700_003_724,
        pid: 31337,
        exit_code: -2,
        reason: "held".into(),
        rusage: rusage(),
        finish_reason: FINISH_KILLED,
        res_req: "mem>1".into(),
        dependency: "done(1)".into(),
        run_limit_s: 600,
        mem_limit_kb: MEM_LIMIT_KB,
        pre_exec: "pre".into(),
        post_exec: String::new(),
        limits: ResourceLimits { threads: Some(64), ..ResourceLimits::default() },
    };
    let reply = JobQueryReply {
        jobs: vec![info],
        not_found: vec![WireJobRef { job_id: 9999, array_index: 0 }],
        next_after: 4242,
        next_after_index: 7,
    };
    let golden = r##"
        00000001                                    # jobs: 1 element
        00001092                                    # jobs[0].job.job_id = 4242
        00000007                                    # jobs[0].job.array_index = 7
        00000005 616c696365 000000                  # jobs[0].user_name = "alice"
        00000004                                    # jobs[0].status = 4
        00000006 6e6f726d616c 0000                  # jobs[0].queue = "normal"
        00000005 686f737441 000000                  # jobs[0].from_host = "hostA"
        00000002                                    # jobs[0].exec_hosts: 2 elements
        00000005 686f737442 000000                  # jobs[0].exec_hosts[0] = "hostB"
        00000005 686f737443 000000                  # jobs[0].exec_hosts[1] = "hostC"
        00000003 73696d 00                          # jobs[0].job_name = "sim"
        00000007 736c6565702031 00                  # jobs[0].command = "sleep 1"
        00000004 70726f6a                           # jobs[0].project = "proj"
        00000004 2f746d70                           # jobs[0].cwd = "/tmp"
        00000006 2f746d702f77 0000                  # jobs[0].exec_cwd = "/tmp/w"
        00000006 6f75742e254a 0000                  # jobs[0].output_file = "out.%J"
        00000003 657272 00                          # jobs[0].error_file = "err"
        00000002                                    # jobs[0].n_slots = 2
        000000006553f101                            # jobs[0].submit_time = 1700000001
        000000006553f17b                            # jobs[0].start_time = 1700000123
        000000006553ff8c                            # jobs[0].end_time = 1700003724
        00007a69                                    # jobs[0].pid = 31337
        fffffffe                                    # jobs[0].exit_code = -2
        00000004 68656c64                           # jobs[0].reason = "held"
        00000000000005dc                            # jobs[0].rusage.user_time_ms = 1500
        00000000000000fa                            # jobs[0].rusage.system_time_ms = 250
        0000000000005000                            # jobs[0].rusage.max_rss_kb = 20480
        00000003                                    # jobs[0].finish_reason = 3
        00000005 6d656d3e31 000000                  # jobs[0].res_req = "mem>1"
        00000007 646f6e65283129 00                  # jobs[0].dependency = "done(1)"
        0000000000000258                            # jobs[0].run_limit_s = 600
        0000000100000002                            # jobs[0].mem_limit_kb = 0x100000002
        00000003 707265 00                          # jobs[0].pre_exec = "pre"
        00000000                                    # jobs[0].post_exec = ""
        00000000                                    # jobs[0].limits.cpu_s = None
        00000000                                    # jobs[0].limits.file_kb = None
        00000000                                    # jobs[0].limits.data_kb = None
        00000000                                    # jobs[0].limits.stack_kb = None
        00000000                                    # jobs[0].limits.core_kb = None
        00000000                                    # jobs[0].limits.swap_kb = None
        00000000                                    # jobs[0].limits.processes = None
        00000001 00000040                           # jobs[0].limits.threads = Some(64)
        00000001                                    # not_found: 1 element
        0000270f                                    # not_found[0].job_id = 9999
        00000000                                    # not_found[0].array_index = 0
        00001092                                    # next_after = 4242
        00000007                                    # next_after_index = 7
    "##;
    check("JOB_QUERY_REPLY", &reply, golden);
}

// Goal: SIGNAL_JOBS keeps its layout. Method: golden of a request in its envelope.
#[test]
fn signal_jobs() {
    let request = SignalRequest {
        jobs: vec![job(), WireJobRef { job_id: 4243, array_index: 0 }],
        all_jobs: false,
        user: "bob".into(),
        action: SignalAction::Signal(15),
    };
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        0102030405060708                            # request_id.high = 0x102030405060708
        1112131415161718                            # request_id.low = 0x1112131415161718
        00000002                                    # body.jobs: 2 elements
        00001092                                    # body.jobs[0].job_id = 4242
        00000007                                    # body.jobs[0].array_index = 7
        00001093                                    # body.jobs[1].job_id = 4243
        00000000                                    # body.jobs[1].array_index = 0
        00000000                                    # body.all_jobs = false
        00000003 626f62 00                          # body.user = "bob"
        00000003                                    # body.action: arm Signal
        0000000f                                    # body.action.0 (signal number) = 15
    "##;
    check_request("SIGNAL_JOBS", request, golden);
}

// Goal: SIGNAL_JOBS_REPLY keeps its layout and every `SignalRequestOutcome` its discriminant.
// Method: one golden with one result per arm, in declaration order; the match has no wildcard,
// so a new arm needs a place in the golden.
#[test]
fn signal_jobs_reply() {
    let outcomes = [
        SignalRequestOutcome::Accepted,
        SignalRequestOutcome::NotFound,
        SignalRequestOutcome::PermissionDenied,
        SignalRequestOutcome::AlreadyFinished,
        SignalRequestOutcome::NotStarted,
    ];
    for (idx, outcome) in outcomes.iter().enumerate() {
        let arm = match outcome {
            SignalRequestOutcome::Accepted => 0,
            SignalRequestOutcome::NotFound => 1,
            SignalRequestOutcome::PermissionDenied => 2,
            SignalRequestOutcome::AlreadyFinished => 3,
            SignalRequestOutcome::NotStarted => 4,
        };
        assert_eq!(arm, idx);
    }
    let results = outcomes
        .into_iter()
        .enumerate()
        .map(|(idx, outcome)| SignalResult {
            job: WireJobRef {
                job_id: 4242 + idx as u32,
                array_index: if idx == 0 { 7 } else { idx as u32 - 1 },
            },
            outcome,
        })
        .collect();
    let golden = r##"
        00000005                                    # results: 5 elements
        00001092                                    # results[0].job.job_id = 4242
        00000007                                    # results[0].job.array_index = 7
        00000000                                    # results[0].outcome: arm Accepted
        00001093                                    # results[1].job.job_id = 4243
        00000000                                    # results[1].job.array_index = 0
        00000001                                    # results[1].outcome: arm NotFound
        00001094                                    # results[2].job.job_id = 4244
        00000001                                    # results[2].job.array_index = 1
        00000002                                    # results[2].outcome: arm PermissionDenied
        00001095                                    # results[3].job.job_id = 4245
        00000002                                    # results[3].job.array_index = 2
        00000003                                    # results[3].outcome: arm AlreadyFinished
        00001096                                    # results[4].job.job_id = 4246
        00000003                                    # results[4].job.array_index = 3
        00000004                                    # results[4].outcome: arm NotStarted
    "##;
    check("SIGNAL_JOBS_REPLY", &SignalReply { results }, golden);
}

// Goal: QUEUE_QUERY keeps its layout. Method: golden of a request in its envelope.
#[test]
fn queue_query() {
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        0102030405060708                            # request_id.high = 0x102030405060708
        1112131415161718                            # request_id.low = 0x1112131415161718
        00000002                                    # body.queues: 2 elements
        00000006 6e6f726d616c 0000                  # body.queues[0] = "normal"
        00000005 73686f7274 000000                  # body.queues[1] = "short"
    "##;
    check_request("QUEUE_QUERY", QueueQuery { queues: vec!["normal".into(), "short".into()] }, golden);
}

// Goal: QUEUE_QUERY_REPLY and its `QueueInfo` (24 fields) keep their layout. Method: golden of
// one queue and one name not found.
#[test]
fn queue_query_reply() {
    let queue = QueueInfo {
        name: "normal".into(),
        priority: 30,
        default: true,
        hosts: vec!["hostB".into()],
        n_jobs: 9,
        n_pend: 4,
        n_run: 3,
        n_susp: 2,
        closed: false,
        inactive: true,
        nice: -5,
        description: "Default".into(),
        users: vec!["alice".into(), "bob".into()],
        max_slots: QUEUE_UNLIMITED,
        user_slot_limit: 8,
        processor_slot_limit_milli: 1500,
        host_slot_limit: 6,
        run_limit_s: 7200,
        mem_limit_kb: 1_048_576,
        n_ssusp: 1,
        n_ususp: 5,
        n_reserved: 0,
        pre_exec: "/bin/true".into(),
        post_exec: String::new(),
        limits: ResourceLimits { swap_kb: Some(2048), ..ResourceLimits::default() },
        job_starter: String::new(),
        policies: QUEUE_POLICY_FAIRSHARE | QUEUE_POLICY_NO_INTERACTIVE,
        default_run_limit_s: 600,
        default_mem_limit_kb: 0,
        default_limits: ResourceLimits { processes: Some(2), ..ResourceLimits::default() },
    };
    let reply = QueueQueryReply { queues: vec![queue], not_found: vec!["nosuch".into()] };
    let golden = r##"
        00000001                                    # queues: 1 element
        00000006 6e6f726d616c 0000                  # queues[0].name = "normal"
        0000001e                                    # queues[0].priority = 30
        00000001                                    # queues[0].default = true
        00000001                                    # queues[0].hosts: 1 element
        00000005 686f737442 000000                  # queues[0].hosts[0] = "hostB"
        00000009                                    # queues[0].n_jobs = 9
        00000004                                    # queues[0].n_pend = 4
        00000003                                    # queues[0].n_run = 3
        00000002                                    # queues[0].n_susp = 2
        00000000                                    # queues[0].closed = false
        00000001                                    # queues[0].inactive = true
        fffffffb                                    # queues[0].nice = -5
        00000007 44656661756c74 00                  # queues[0].description = "Default"
        00000002                                    # queues[0].users: 2 elements
        00000005 616c696365 000000                  # queues[0].users[0] = "alice"
        00000003 626f62 00                          # queues[0].users[1] = "bob"
        ffffffff                                    # queues[0].max_slots = 0xffffffff
        00000008                                    # queues[0].user_slot_limit = 8
        000005dc                                    # queues[0].processor_slot_limit_milli = 1500
        00000006                                    # queues[0].host_slot_limit = 6
        0000000000001c20                            # queues[0].run_limit_s = 7200
        0000000000100000                            # queues[0].mem_limit_kb = 1048576
        00000001                                    # queues[0].n_ssusp = 1
        00000005                                    # queues[0].n_ususp = 5
        00000000                                    # queues[0].n_reserved = 0
        00000009 2f62696e2f74727565 000000          # queues[0].pre_exec = "/bin/true"
        00000000                                    # queues[0].post_exec = ""
        00000000                                    # queues[0].limits.cpu_s = None
        00000000                                    # queues[0].limits.file_kb = None
        00000000                                    # queues[0].limits.data_kb = None
        00000000                                    # queues[0].limits.stack_kb = None
        00000000                                    # queues[0].limits.core_kb = None
        00000001 0000000000000800                   # queues[0].limits.swap_kb = Some(2048)
        00000000                                    # queues[0].limits.processes = None
        00000000                                    # queues[0].limits.threads = None
        00000000                                    # queues[0].job_starter = ""
        00000005                                    # queues[0].policies = FAIRSHARE | NO_INTERACTIVE
        0000000000000258                            # queues[0].default_run_limit_s = 600
        0000000000000000                            # queues[0].default_mem_limit_kb = 0
        00000000                                    # queues[0].default_limits.cpu_s = None
        00000000                                    # queues[0].default_limits.file_kb = None
        00000000                                    # queues[0].default_limits.data_kb = None
        00000000                                    # queues[0].default_limits.stack_kb = None
        00000000                                    # queues[0].default_limits.core_kb = None
        00000000                                    # queues[0].default_limits.swap_kb = None
        00000001 00000002                           # queues[0].default_limits.processes = Some(2)
        00000000                                    # queues[0].default_limits.threads = None
        00000001                                    # not_found: 1 element
        00000006 6e6f73756368 0000                  # not_found[0] = "nosuch"
    "##;
    check("QUEUE_QUERY_REPLY", &reply, golden);
}

// Goal: HOST_QUERY keeps its layout. Method: golden of a request in its envelope.
#[test]
fn host_query() {
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        0102030405060708                            # request_id.high = 0x102030405060708
        1112131415161718                            # request_id.low = 0x1112131415161718
        00000002                                    # body.hosts: 2 elements
        00000005 686f737442 000000                  # body.hosts[0] = "hostB"
        00000005 686f737443 000000                  # body.hosts[1] = "hostC"
    "##;
    check_request("HOST_QUERY", HostQuery { hosts: vec!["hostB".into(), "hostC".into()] }, golden);
}

// Goal: HOST_QUERY_REPLY and its `HostInfo` keep their layout. Method: golden of one host and
// one name not found.
#[test]
fn host_query_reply() {
    let host = HostInfo {
        name: "hostB".into(),
        status: HOST_CLOSED_ADM,
        max_slots: 16,
        n_jobs: 6,
        n_run: 3,
        n_ssusp: 2,
        n_ususp: 1,
        n_reserved: 0,
        user_slot_limit: HOST_SLOTS_UNLIMITED,
    };
    let reply = HostQueryReply { hosts: vec![host], not_found: vec!["hostZ".into()] };
    let golden = r##"
        00000001                                    # hosts: 1 element
        00000005 686f737442 000000                  # hosts[0].name = "hostB"
        00000004                                    # hosts[0].status = 4
        00000010                                    # hosts[0].max_slots = 16
        00000006                                    # hosts[0].n_jobs = 6
        00000003                                    # hosts[0].n_run = 3
        00000002                                    # hosts[0].n_ssusp = 2
        00000001                                    # hosts[0].n_ususp = 1
        00000000                                    # hosts[0].n_reserved = 0
        ffffffff                                    # hosts[0].user_slot_limit = 0xffffffff
        00000001                                    # not_found: 1 element
        00000005 686f73745a 000000                  # not_found[0] = "hostZ"
    "##;
    check("HOST_QUERY_REPLY", &reply, golden);
}

// Goal: STATUS_QUERY is the envelope around an empty body. Method: golden.
#[test]
fn status_query() {
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        0102030405060708                            # request_id.high = 0x102030405060708
        1112131415161718                            # request_id.low = 0x1112131415161718
    "##;
    check_request("STATUS_QUERY", StatusQuery {}, golden);
}

// Goal: STATUS_QUERY_REPLY keeps its layout; its two count arrays are fixed-length (no count
// word). Method: golden of one reply.
#[test]
fn status_query_reply() {
    let reply = StatusReply {
        cluster_name: "lava".into(),
        master_name: "hostA".into(),
        pid: 4001,
        started_at: 1_700_000_000,
        hosts: [5, 1, 2, 3],
        jobs: [10, 20, 30, 40],
        active_users: 7,
        counters: vec![StatusCounter { name: "log.fsyncs".into(), value: 99 }],
    };
    let golden = r##"
        00000004 6c617661                           # cluster_name = "lava"
        00000005 686f737441 000000                  # master_name = "hostA"
        00000fa1                                    # pid = 4001
        000000006553f100                            # started_at = 1700000000
        00000005                                    # hosts[0] (ok; a fixed array: no count) = 5
        00000001                                    # hosts[1] (closed; a fixed array: no count) = 1
        00000002                                    # hosts[2] (unreach; a fixed array: no count) = 2
        00000003                                    # hosts[3] (unavail; a fixed array: no count) = 3
        0000000a                                    # jobs[0] (pending) = 10
        00000014                                    # jobs[1] (running) = 20
        0000001e                                    # jobs[2] (suspended) = 30
        00000028                                    # jobs[3] (finished) = 40
        00000007                                    # active_users = 7
        00000001                                    # counters: 1 element
        0000000a 6c6f672e6673796e6373 0000          # counters[0].name = "log.fsyncs"
        0000000000000063                            # counters[0].value = 99
    "##;
    check("STATUS_QUERY_REPLY", &reply, golden);
}

// Goal: RECONFIG is the envelope around an empty body. Method: golden.
#[test]
fn reconfig() {
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        0102030405060708                            # request_id.high = 0x102030405060708
        1112131415161718                            # request_id.low = 0x1112131415161718
    "##;
    check_request("RECONFIG", ReconfigRequest {}, golden);
}

// Goal: RECONFIG_REPLY keeps its layout. Method: golden of a refused reconfiguration.
#[test]
fn reconfig_reply() {
    let reply = ReconfigReply { applied: false, message: "lsb.queues:3: bad".into() };
    let golden = r##"
        00000000                                    # applied = false
        00000011 6c73622e7175657565733a333a20626164 000000  # message = "lsb.queues:3: bad"
    "##;
    check("RECONFIG_REPLY", &reply, golden);
}

// Goal: STALE_STATE keeps its layout. Method: golden of a follower's state, never in contact.
#[test]
fn stale_state() {
    let state = StaleState {
        host: "h3".into(),
        applied_index: 41,
        commit_index: 42,
        leader_seen_ms_ago: STALE_NEVER,
        up_ms: 0x1_0000_0003,
    };
    let golden = r##"
        00000002 6833 0000                          # host = "h3"
        00000000 00000029                           # applied_index = 41
        00000000 0000002a                           # commit_index = 42
        ffffffff ffffffff                           # leader_seen_ms_ago = STALE_NEVER
        00000001 00000003                           # up_ms
    "##;
    check("STALE_STATE", &state, golden);
}

// Goal: REQUEST_FAILED keeps its layout. Method: golden of one refusal.
#[test]
fn request_failed() {
    let error = ErrorReply { code: ERR_TRY_AGAIN, message: "try again".into() };
    let golden = r##"
        00000006                                    # code = 6
        00000009 74727920616761696e 000000          # message = "try again"
    "##;
    check("REQUEST_FAILED", &error, golden);
}

// Goal: CREDENTIAL_REQUEST (command to the local sbatchd) has an empty body. Method: the unit
// value encodes to no bytes and no bytes decode to it.
#[test]
fn credential_request() {
    let golden = r##"
        00000002                                    # audience_kind = the coordinator
        00000004 6c617661                           # audience_cluster = "lava"
    "##;
    check(
        "CREDENTIAL_REQUEST",
        &CredentialRequest { audience_kind: 2, audience_cluster: "lava".to_owned() },
        golden,
    );
}

// Goal: CREDENTIAL_REPLY's token is an XDR opaque (length, bytes, zero padding). Method: golden
// of a five-byte token.
#[test]
fn credential_reply() {
    let golden = r##"
        00000005 0102030405 000000                  # token = 5 bytes
    "##;
    check("CREDENTIAL_REPLY", &CredentialReply { token: vec![1, 2, 3, 4, 5] }, golden);
}

// Goal: SBD_STATUS_QUERY (to the local sbatchd, without an envelope) has an empty body. Method: golden.
#[test]
fn sbd_status_query() {
    check("SBD_STATUS_QUERY", &SbdStatusQuery {}, "");
}

// Goal: SBD_STATUS_REPLY keeps its layout. Method: golden with a counter above 32 bits.
#[test]
fn sbd_status_reply() {
    let reply = SbdStatusReply {
        host: "hostB".into(),
        master_name: "hostA".into(),
        pid: 2121,
        started_at: 1_700_000_010,
        connected: true,
        link_since: 1_700_000_020,
        counters: vec![
            StatusCounter { name: "jobs.run".into(), value: 3 },
            StatusCounter { name: "msgs.resent".into(), value: 0x1_0000_0000 },
        ],
    };
    let golden = r##"
        00000005 686f737442 000000                  # host = "hostB"
        00000005 686f737441 000000                  # master_name = "hostA"
        00000849                                    # pid = 2121
        000000006553f10a                            # started_at = 1700000010
        00000001                                    # connected = true
        000000006553f114                            # link_since = 1700000020
        00000002                                    # counters: 2 elements
        00000008 6a6f62732e72756e                   # counters[0].name = "jobs.run"
        0000000000000003                            # counters[0].value = 3
        0000000b 6d7367732e726573656e74 00          # counters[1].name = "msgs.resent"
        0000000100000000                            # counters[1].value = 0x100000000
    "##;
    check("SBD_STATUS_REPLY", &reply, golden);
}

// Goal: JOB_CONTROL keeps its layout and every `JobControlAction` arm its discriminant and
// fields, with `bmod`'s optional fields as XDR optional data. Method: golden of a `bmod` request
// in its envelope (both Some and None fields), then one golden per other arm alone; the match has
// no wildcard, so a new arm needs a golden.
#[test]
fn job_control() {
    let modify = JobModify {
        queue: Some("short".into()),
        job_name: None,
        n_slots: Some(8),
        run_limit_s: None,
        mem_limit_kb: Some(2048),
        res_req: Some(String::new()),
    };
    let request = JobControlRequest { jobs: vec![job()], action: JobControlAction::Modify(modify.clone()) };
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        0102030405060708                            # request_id.high = 0x102030405060708
        1112131415161718                            # request_id.low = 0x1112131415161718
        00000001                                    # body.jobs: 1 element
        00001092                                    # body.jobs[0].job_id = 4242
        00000007                                    # body.jobs[0].array_index = 7
        00000000                                    # body.action: arm Modify
        00000001                                    # body.action.0.queue: Some
        00000005 73686f7274 000000                  # body.action.0.queue = "short"
        00000000                                    # body.action.0.job_name: None
        00000001                                    # body.action.0.n_slots: Some
        00000008                                    # body.action.0.n_slots = 8
        00000000                                    # body.action.0.run_limit_s: None
        00000001                                    # body.action.0.mem_limit_kb: Some
        0000000000000800                            # body.action.0.mem_limit_kb = 2048
        00000001                                    # body.action.0.res_req: Some
        00000000                                    # body.action.0.res_req = ""
    "##;
    check_request("JOB_CONTROL", request, golden);
    let actions = [
        JobControlAction::Modify(modify),
        JobControlAction::Switch { queue: "short".into() },
        JobControlAction::Move { to_top: true, position: 2, owner_list: false },
        JobControlAction::Requeue { done: true, exit: false, running: true, pending: false, hold: true },
        JobControlAction::Run { hosts: vec!["hostA".into()] },
        JobControlAction::ForceExit,
    ];
    for action in &actions {
        let golden = match action {
            JobControlAction::Modify(_) => continue, // pinned inside the whole request above
            JobControlAction::Switch { .. } => SWITCH,
            JobControlAction::Move { .. } => MOVE,
            JobControlAction::Requeue { .. } => REQUEUE,
            JobControlAction::Run { .. } => RUN,
            JobControlAction::ForceExit => FORCE_EXIT,
        };
        check(&format!("JOB_CONTROL {action:?}"), action, golden);
    }
    const SWITCH: &str = r##"
        00000001                                    # action: arm Switch
        00000005 73686f7274 000000                  # action.queue = "short"
    "##;
    const MOVE: &str = r##"
        00000002                                    # action: arm Move
        00000001                                    # action.to_top = true
        00000002                                    # action.position = 2
        00000000                                    # action.owner_list = false
    "##;
    const REQUEUE: &str = r##"
        00000003                                    # action: arm Requeue
        00000001                                    # action.done = true
        00000000                                    # action.exit = false
        00000001                                    # action.running = true
        00000000                                    # action.pending = false
        00000001                                    # action.hold = true
    "##;
    const RUN: &str = r##"
        00000004                                    # action: arm Run
        00000001                                    # action.hosts: 1 element
        00000005 686f737441 000000                  # action.hosts[0] = "hostA"
    "##;
    const FORCE_EXIT: &str = r##"
        00000005                                    # action: arm ForceExit
    "##;
}

// Goal: JOB_CONTROL_REPLY keeps its layout. Method: golden of two results.
#[test]
fn job_control_reply() {
    let reply = JobControlReply {
        results: vec![
            JobControlResult { job: job(), done: true, message: "changed".into() },
            JobControlResult {
                job: WireJobRef { job_id: 4243, array_index: 0 },
                done: false,
                message: "not pending".into(),
            },
        ],
    };
    let golden = r##"
        00000002                                    # results: 2 elements
        00001092                                    # results[0].job.job_id = 4242
        00000007                                    # results[0].job.array_index = 7
        00000001                                    # results[0].done = true
        00000007 6368616e676564 00                  # results[0].message = "changed"
        00001093                                    # results[1].job.job_id = 4243
        00000000                                    # results[1].job.array_index = 0
        00000000                                    # results[1].done = false
        0000000b 6e6f742070656e64696e67 00          # results[1].message = "not pending"
    "##;
    check("JOB_CONTROL_REPLY", &reply, golden);
}

// Goal: ADMIN_CONTROL keeps its layout and every `AdminAction` its discriminant. Method: golden
// of a request in its envelope, then each action alone (one word, its declaration index); the
// match has no wildcard, so a new action needs a golden.
#[test]
fn admin_control() {
    let request = AdminControlRequest {
        action: AdminAction::QueueInactivate,
        names: vec!["normal".into(), "short".into()],
    };
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        0102030405060708                            # request_id.high = 0x102030405060708
        1112131415161718                            # request_id.low = 0x1112131415161718
        00000005                                    # body.action: arm QueueInactivate
        00000002                                    # body.names: 2 elements
        00000006 6e6f726d616c 0000                  # body.names[0] = "normal"
        00000005 73686f7274 000000                  # body.names[1] = "short"
    "##;
    check_request("ADMIN_CONTROL", request, golden);
    let actions = [
        AdminAction::HostClose,
        AdminAction::HostOpen,
        AdminAction::QueueClose,
        AdminAction::QueueOpen,
        AdminAction::QueueActivate,
        AdminAction::QueueInactivate,
        AdminAction::MbdRestart,
    ];
    for action in actions {
        let golden = match action {
            AdminAction::HostClose => "00000000",
            AdminAction::HostOpen => "00000001",
            AdminAction::QueueClose => "00000002",
            AdminAction::QueueOpen => "00000003",
            AdminAction::QueueActivate => "00000004",
            AdminAction::QueueInactivate => "00000005",
            AdminAction::MbdRestart => "00000006",
        };
        check(&format!("ADMIN_CONTROL {action:?}"), &action, golden);
    }
}

// Goal: ADMIN_CONTROL_REPLY keeps its layout. Method: golden of two results.
#[test]
fn admin_control_reply() {
    let reply = AdminControlReply {
        results: vec![
            AdminResult { name: "normal".into(), done: true, message: "inactivated".into() },
            AdminResult { name: "short".into(), done: false, message: "no such queue".into() },
        ],
    };
    let golden = r##"
        00000002                                    # results: 2 elements
        00000006 6e6f726d616c 0000                  # results[0].name = "normal"
        00000001                                    # results[0].done = true
        0000000b 696e616374697661746564 00          # results[0].message = "inactivated"
        00000005 73686f7274 000000                  # results[1].name = "short"
        00000000                                    # results[1].done = false
        0000000d 6e6f2073756368207175657565 000000  # results[1].message = "no such queue"
    "##;
    check("ADMIN_CONTROL_REPLY", &reply, golden);
}

// Goal: HISTORY_QUERY keeps its layout. Method: golden of a request in its envelope (no explicit jobs).
#[test]
fn history_query() {
    let query = HistoryQuery {
        jobs: Vec::new(),
        user: "bob".into(),
        state_filter: state_filter::DONE,
        after_job: 100,
    };
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        0102030405060708                            # request_id.high = 0x102030405060708
        1112131415161718                            # request_id.low = 0x1112131415161718
        00000000                                    # body.jobs: 0 elements
        00000003 626f62 00                          # body.user = "bob"
        00000002                                    # body.state_filter = 2
        00000064                                    # body.after_job = 100
    "##;
    check_request("HISTORY_QUERY", query, golden);
}

// Goal: HISTORY_QUERY_REPLY, `JobHistory` and `HistoryEntry` keep their layout. Method: golden
// of one job with two entries and one id not found.
#[test]
fn history_query_reply() {
    let history = JobHistory {
        job: job(),
        user_name: "alice".into(),
        job_name: "sim".into(),
        command: "sleep 1".into(),
        project: "proj".into(),
        entries: vec![
            HistoryEntry { time_ms: 1_700_000_001_000, status: 1, text: "Submitted".into() },
            HistoryEntry { time_ms: 1_700_000_123_456, status: 0, text: "Note".into() },
        ],
    };
    let reply = HistoryReply {
        jobs: vec![history],
        not_found: vec![WireJobRef { job_id: 9999, array_index: 0 }],
        next_after: 4242,
    };
    let golden = r##"
        00000001                                    # jobs: 1 element
        00001092                                    # jobs[0].job.job_id = 4242
        00000007                                    # jobs[0].job.array_index = 7
        00000005 616c696365 000000                  # jobs[0].user_name = "alice"
        00000003 73696d 00                          # jobs[0].job_name = "sim"
        00000007 736c6565702031 00                  # jobs[0].command = "sleep 1"
        00000004 70726f6a                           # jobs[0].project = "proj"
        00000002                                    # jobs[0].entries: 2 elements
        0000018bcfe56be8                            # jobs[0].entries[0].time_ms = 1700000001000
        00000001                                    # jobs[0].entries[0].status = 1
        00000009 5375626d6974746564 000000          # jobs[0].entries[0].text = "Submitted"
        0000018bcfe74a40                            # jobs[0].entries[1].time_ms = 1700000123456
        00000000                                    # jobs[0].entries[1].status = 0
        00000004 4e6f7465                           # jobs[0].entries[1].text = "Note"
        00000001                                    # not_found: 1 element
        0000270f                                    # not_found[0].job_id = 9999
        00000000                                    # not_found[0].array_index = 0
        00001092                                    # next_after = 4242
    "##;
    check("HISTORY_QUERY_REPLY", &reply, golden);
}

// Goal: PEEK_JOB keeps its layout. Method: golden of a request in its envelope.
#[test]
fn peek_job() {
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        0102030405060708                            # request_id.high = 0x102030405060708
        1112131415161718                            # request_id.low = 0x1112131415161718
        00001092                                    # body.job.job_id = 4242
        00000007                                    # body.job.array_index = 7
        0000000000010000                            # body.offset = 65536
    "##;
    check_request("PEEK_JOB", PeekRequest { job: job(), offset: 65536 }, golden);
}

// Goal: WAIT_QUERY keeps its layout: the condition's text, then the registration. Method:
// golden of an 8-byte condition (no padding).
#[test]
fn wait_query() {
    let golden = r##"
        00000003 c0ffee 00                          # credential = 3 bytes
        0102030405060708                            # request_id.high = 0x102030405060708
        1112131415161718                            # request_id.low = 0x1112131415161718
        00000008 646f6e6528343229                   # body.condition = "done(42)"
        0000000000000309                            # body.registered = 777
    "##;
    check_request("WAIT_QUERY", WaitQuery { condition: "done(42)".into(), registered: 777 }, golden);
}

// Goal: WAIT_QUERY_REPLY keeps its layout. Method: golden with a code other than 0 and texts
// that need padding.
#[test]
fn wait_query_reply() {
    let reply = WaitQueryReply {
        code: WAIT_NEVER,
        message: "x!".into(),
        condition: "exit(5)".into(),
        registered: 778,
    };
    let golden = r##"
        00000002                                    # code = WAIT_NEVER
        00000002 7821 0000                          # message = "x!"
        00000007 65786974283529 00                  # condition = "exit(5)"
        000000000000030a                            # registered = 778
    "##;
    check("WAIT_QUERY_REPLY", &reply, golden);
}

// Goal: PEEK_JOB_REPLY keeps its layout; the output is an XDR opaque. Method: golden of six bytes
// of output.
#[test]
fn peek_job_reply() {
    let reply =
        PeekReply { code: PEEK_OK, message: String::new(), data: b"hello\n".to_vec(), next_offset: 65542 };
    let golden = r##"
        00000000                                    # code = 0
        00000000                                    # message = ""
        00000006 68656c6c6f0a 0000                  # data = 6 bytes
        0000000000010006                            # next_offset = 65542
    "##;
    check("PEEK_JOB_REPLY", &reply, golden);
}
