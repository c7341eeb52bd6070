//! From a frame's body to a logic input: XDR decoding (wire), the credential
//! check, and the structural checks of `lava-batch-ll` (docs/protocols/README.md,
//! "The layers"), each failure naming the field and what was wrong.
//!
//! Pure functions: no socket, no state, the clock passed in. The connection
//! tasks call them; only inputs that passed reach the event loop.
//!
//! `lava-batch-ll` validates submissions (`SubmitSpec`); for the other
//! messages it offers the primitives (`job_ref`, `check_text`, the name types)
//! and this module applies them field by field. The logic re-checks the job
//! references it looks up (it ignores job id 0), so these checks bound what
//! reaches the durable records rather than decide anything.

use lava_batch_ll::{
    COMMAND_BYTES_MAX, HostName, LlError, NAME_BYTES_MAX, PATH_BYTES_MAX, SubmitSpec, UserName, check_text,
    job_ref,
};
use lava_batch_wire::{self as wire, Operation};
use lava_mbd::{Caller, ClientId, Input};
use lava_net::{Authenticator, Credential};
use serde::de::DeserializeOwned;

use crate::codec::MESSAGE_LIMITS;
use crate::counters::Reject;

/// A command request that passed every check, with its vouched caller.
#[derive(Debug)]
pub(crate) enum ClientCall {
    /// SUBMIT_JOB.
    Submit { request_id: wire::RequestId, caller: Caller, spec: Box<SubmitSpec> },
    /// JOB_QUERY.
    Query { caller: Caller, query: wire::JobQuery },
    /// SIGNAL_JOBS.
    Signal { request_id: wire::RequestId, caller: Caller, request: wire::SignalRequest },
    /// JOB_CONTROL (`bmod`, `bswitch`, `btop`, `bbot`; `brequeue` until its
    /// environments are read).
    JobControl { request_id: wire::RequestId, caller: Caller, request: wire::JobControlRequest },
    /// JOB_CONTROL of `brequeue`, once the connection's task read the named jobs'
    /// environments back from the disk (`history::submissions`).
    Requeue {
        request_id: wire::RequestId,
        caller: Caller,
        request: wire::JobControlRequest,
        submissions: Vec<lava_mbd::LoggedSubmission>,
    },
    /// ADMIN_CONTROL (`badmin hclose|…|mbdrestart`; the loop serves `mbdrestart` itself).
    AdminControl { caller: Caller, request: wire::AdminControlRequest },
}

impl ClientCall {
    /// The logic's input, answering to `client`.
    pub(crate) fn into_input(self, client: ClientId) -> Input {
        match self {
            ClientCall::Submit { request_id, caller, spec } => {
                Input::Submit { client, request_id, caller, spec }
            }
            ClientCall::Query { caller, query } => Input::Query { client, caller, query },
            ClientCall::Signal { request_id, caller, request } => {
                Input::Signal { client, request_id, caller, request }
            }
            ClientCall::JobControl { request_id, caller, request } => {
                Input::JobControl { client, request_id, caller, request }
            }
            ClientCall::Requeue { request_id, caller, request, submissions } => {
                Input::Requeue { client, request_id, caller, request, submissions }
            }
            ClientCall::AdminControl { caller, request } => Input::AdminControl { client, caller, request },
        }
    }

    /// Who asked, for the log.
    pub(crate) fn caller(&self) -> &Caller {
        match self {
            ClientCall::Submit { caller, .. }
            | ClientCall::Query { caller, .. }
            | ClientCall::Signal { caller, .. }
            | ClientCall::JobControl { caller, .. }
            | ClientCall::Requeue { caller, .. }
            | ClientCall::AdminControl { caller, .. } => caller,
        }
    }
}

/// Why a command request is refused: the REQUEST_FAILED to send, the counter,
/// and whether the connection is closed after it (it is when the request was
/// not even well-formed; a refused credential or field leaves it open).
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) code: u32,
    pub(crate) message: String,
    pub(crate) reason: Reject,
    pub(crate) close: bool,
}

impl Refusal {
    fn invalid(error: LlError) -> Refusal {
        Refusal {
            code: wire::ERR_BAD_REQUEST,
            message: format!("bad request: {error}"),
            reason: Reject::Invalid,
            close: false,
        }
    }
}

/// Decodes, authenticates and validates one command request of operation `op`.
pub(crate) fn client_request(
    op: Operation,
    body: &[u8],
    auth: &Authenticator,
    now_ms: u64,
) -> Result<ClientCall, Refusal> {
    match op {
        Operation::SubmitJob => {
            let request = decode_request::<wire::SubmitRequest>(op, body)?;
            let caller = caller(auth, &request.credential, now_ms)?;
            let spec = SubmitSpec::try_from(request.body).map_err(Refusal::invalid)?;
            Ok(ClientCall::Submit { request_id: request.request_id, caller, spec: Box::new(spec) })
        }
        Operation::JobQuery => {
            let request = decode_request::<wire::JobQuery>(op, body)?;
            let caller = caller(auth, &request.credential, now_ms)?;
            check_query(&request.body).map_err(Refusal::invalid)?;
            Ok(ClientCall::Query { caller, query: request.body })
        }
        Operation::SignalJobs => {
            let request = decode_request::<wire::SignalRequest>(op, body)?;
            let caller = caller(auth, &request.credential, now_ms)?;
            check_signal(&request.body).map_err(Refusal::invalid)?;
            Ok(ClientCall::Signal { request_id: request.request_id, caller, request: request.body })
        }
        Operation::JobControl => {
            let request = decode_request::<wire::JobControlRequest>(op, body)?;
            let caller = caller(auth, &request.credential, now_ms)?;
            lava_batch_ll::check_job_control(&request.body).map_err(Refusal::invalid)?;
            Ok(ClientCall::JobControl { request_id: request.request_id, caller, request: request.body })
        }
        Operation::AdminControl => {
            let request = decode_request::<wire::AdminControlRequest>(op, body)?;
            let caller = caller(auth, &request.credential, now_ms)?;
            lava_batch_ll::check_admin_control(&request.body).map_err(Refusal::invalid)?;
            Ok(ClientCall::AdminControl { caller, request: request.body })
        }
        other => Err(Refusal {
            code: wire::ERR_UNSUPPORTED,
            message: format!("operation {} is not a request mbatchd serves", other.name()),
            reason: Reject::Operation,
            close: true,
        }),
    }
}

/// A read mbatchd answers from memory at once: `bhosts`, `bqueues`, `badmin showstatus`.
#[derive(Debug)]
pub(crate) enum ReadQuery {
    /// HOST_QUERY.
    Hosts(wire::HostQuery),
    /// QUEUE_QUERY.
    Queues(wire::QueueQuery),
    /// STATUS_QUERY.
    Status,
    /// RECONFIG (`badmin reconfig`): who asks; the loop checks that it is an administrator.
    Reconfig(Caller),
    /// WAIT_QUERY (`bwait`): who asks (a job name means the caller's job), and the question.
    Wait(Caller, wire::WaitQuery),
}

/// The operation of a [`ReadQuery`] frame, if `code` is one.
pub(crate) fn read_operation(code: u32) -> Option<Operation> {
    Operation::from_code(code).filter(|op| {
        matches!(
            op,
            Operation::HostQuery
                | Operation::QueueQuery
                | Operation::StatusQuery
                | Operation::Reconfig
                | Operation::WaitQuery
        )
    })
}

/// Decodes and authenticates a HOST_QUERY, QUEUE_QUERY, STATUS_QUERY, RECONFIG or WAIT_QUERY:
/// any user may ask.
pub(crate) fn read_query(
    op: Operation,
    body: &[u8],
    auth: &Authenticator,
    now_ms: u64,
) -> Result<ReadQuery, Refusal> {
    let check_names = |what: &str, names: &[String]| {
        for (idx, name) in names.iter().enumerate() {
            check_text(&format!("{what}[{idx}]"), name, NAME_BYTES_MAX).map_err(Refusal::invalid)?;
        }
        Ok::<(), Refusal>(())
    };
    if op == Operation::Reconfig {
        let request = decode_request::<wire::ReconfigRequest>(op, body)?;
        return Ok(ReadQuery::Reconfig(caller(auth, &request.credential, now_ms)?));
    }
    if op == Operation::StatusQuery {
        let request = decode_request::<wire::StatusQuery>(op, body)?;
        caller(auth, &request.credential, now_ms)?;
        return Ok(ReadQuery::Status);
    }
    if op == Operation::WaitQuery {
        let request = decode_request::<wire::WaitQuery>(op, body)?;
        let caller = caller(auth, &request.credential, now_ms)?;
        check_text("wait_query.condition", &request.body.condition, PATH_BYTES_MAX)
            .map_err(Refusal::invalid)?;
        return Ok(ReadQuery::Wait(caller, request.body));
    }
    if op == Operation::QueueQuery {
        let request = decode_request::<wire::QueueQuery>(op, body)?;
        caller(auth, &request.credential, now_ms)?;
        check_names("queue_query.queues", &request.body.queues)?;
        return Ok(ReadQuery::Queues(request.body));
    }
    let request = decode_request::<wire::HostQuery>(Operation::HostQuery, body)?;
    caller(auth, &request.credential, now_ms)?;
    check_names("host_query.hosts", &request.body.hosts)?;
    Ok(ReadQuery::Hosts(request.body))
}

/// Decodes, authenticates and checks a HISTORY_QUERY (`bhist`): any user may ask.
pub(crate) fn history_query(
    body: &[u8],
    auth: &Authenticator,
    now_ms: u64,
) -> Result<(Caller, wire::HistoryQuery), Refusal> {
    let request = decode_request::<wire::HistoryQuery>(Operation::HistoryQuery, body)?;
    let caller = caller(auth, &request.credential, now_ms)?;
    lava_batch_ll::check_history_query(&request.body).map_err(Refusal::invalid)?;
    Ok((caller, request.body))
}

/// Decodes and authenticates a PEEK_JOB (`bpeek`): who asks, and for what.
pub(crate) fn peek_request(
    body: &[u8],
    auth: &Authenticator,
    now_ms: u64,
) -> Result<(Caller, wire::PeekRequest), Refusal> {
    let request = decode_request::<wire::PeekRequest>(Operation::PeekJob, body)?;
    let caller = caller(auth, &request.credential, now_ms)?;
    check_job_refs("peek.job", std::slice::from_ref(&request.body.job)).map_err(Refusal::invalid)?;
    Ok((caller, request.body))
}

fn decode_request<T: DeserializeOwned>(
    op: Operation,
    body: &[u8],
) -> Result<wire::ClientRequest<T>, Refusal> {
    lava_xdr::from_bytes(body, &MESSAGE_LIMITS).map_err(|error| Refusal {
        code: wire::ERR_BAD_REQUEST,
        message: format!("malformed {} request: {error}", op.name()),
        reason: Reject::Body,
        close: true,
    })
}

/// The caller a credential vouches for (never a uid the client states).
fn caller(auth: &Authenticator, token: &[u8], now_ms: u64) -> Result<Caller, Refusal> {
    let refuse =
        |message: String| Refusal { code: wire::ERR_AUTH, message, reason: Reject::Credential, close: false };
    let credential = Credential::verify(auth, token, now_ms)
        .map_err(|error| refuse(format!("authentication failed: {error}")))?;
    let user = UserName::parse("credential.username", &credential.username)
        .map_err(|error| refuse(format!("authentication failed: {error}")))?;
    let host = HostName::parse("credential.hostname", &credential.hostname)
        .map_err(|error| refuse(format!("authentication failed: {error}")))?;
    Ok(Caller { uid: credential.uid, gid: credential.gid, user, host })
}

fn check_job_refs(field: &str, jobs: &[wire::WireJobRef]) -> Result<(), LlError> {
    for (idx, job) in jobs.iter().enumerate() {
        job_ref(&format!("{field}[{idx}]"), *job)?;
    }
    Ok(())
}

fn check_query(query: &wire::JobQuery) -> Result<(), LlError> {
    check_job_refs("query.jobs", &query.jobs)?;
    check_text("query.user", &query.user, NAME_BYTES_MAX)?;
    check_text("query.queue", &query.queue, NAME_BYTES_MAX)?;
    check_text("query.host", &query.host, NAME_BYTES_MAX)?;
    check_text("query.job_name", &query.job_name, NAME_BYTES_MAX)
}

fn check_signal(request: &wire::SignalRequest) -> Result<(), LlError> {
    check_job_refs("signal.jobs", &request.jobs)?;
    check_text("signal.user", &request.user, NAME_BYTES_MAX)
}

/// A valid SBD_REGISTER: the host it names (not yet checked against the cluster).
pub(crate) fn sbd_register(payload: &[u8]) -> Result<(wire::SbdRegister, HostName), (Reject, String)> {
    let register: wire::SbdRegister = lava_xdr::from_bytes(payload, &MESSAGE_LIMITS)
        .map_err(|error| (Reject::Body, format!("malformed SBD_REGISTER: {error}")))?;
    let host = HostName::parse("sbd_register.host_name", &register.host_name)
        .map_err(|error| (Reject::Invalid, format!("bad SBD_REGISTER: {error}")))?;
    Ok((register, host))
}

/// A message of an sbatchd channel, decoded and checked.
#[derive(Debug)]
pub(crate) enum SbdMessage {
    NewJobReply(wire::NewJobReply),
    JobExecute(wire::JobExecute),
    JobFinish(wire::JobFinish),
    JobSignalReply(wire::JobSignalReply),
}

impl SbdMessage {
    /// The logic's input, from `host`.
    pub(crate) fn into_input(self, host: HostName) -> Input {
        match self {
            SbdMessage::NewJobReply(reply) => Input::NewJobReply { host, reply },
            SbdMessage::JobExecute(msg) => Input::JobExecute { host, msg },
            SbdMessage::JobFinish(msg) => Input::JobFinish { host, msg },
            SbdMessage::JobSignalReply(msg) => Input::JobSignalReply { host, msg },
        }
    }
}

/// What is wrong with an sbatchd frame.
#[derive(Debug)]
pub(crate) enum SbdProblem {
    /// Not an operation sbatchd sends on its channel: the channel is closed.
    Operation(String),
    /// The body does not decode: the channel is closed.
    Body(String),
    /// Well-formed but structurally invalid: the message is dropped.
    Invalid(LlError),
}

/// Decodes and checks one (authenticated) frame of an sbatchd channel.
pub(crate) fn sbd_message(op_code: u32, payload: &[u8]) -> Result<SbdMessage, SbdProblem> {
    fn decode<T: DeserializeOwned>(op: Operation, payload: &[u8]) -> Result<T, SbdProblem> {
        lava_xdr::from_bytes(payload, &MESSAGE_LIMITS)
            .map_err(|error| SbdProblem::Body(format!("malformed {}: {error}", op.name())))
    }
    let op = Operation::from_code(op_code);
    let message = match op {
        Some(op @ Operation::NewJobReply) => SbdMessage::NewJobReply(decode(op, payload)?),
        Some(op @ Operation::JobExecute) => SbdMessage::JobExecute(decode(op, payload)?),
        Some(op @ Operation::JobFinish) => SbdMessage::JobFinish(decode(op, payload)?),
        Some(op @ Operation::JobSignalReply) => SbdMessage::JobSignalReply(decode(op, payload)?),
        Some(op) => {
            return Err(SbdProblem::Operation(format!(
                "{} is not sent by sbatchd on its channel",
                op.name()
            )));
        }
        None => return Err(SbdProblem::Operation(format!("unknown operation {op_code}"))),
    };
    check_sbd_message(&message).map_err(SbdProblem::Invalid)?;
    Ok(message)
}

fn check_sbd_message(message: &SbdMessage) -> Result<(), LlError> {
    match message {
        SbdMessage::NewJobReply(reply) => {
            job_ref("new_job_reply.job", reply.job)?;
            if let wire::NewJobOutcome::Refused { message, .. } = &reply.outcome {
                // The logic truncates the reason it keeps; only NUL bytes are refused here.
                check_text("new_job_reply.outcome.message", message, COMMAND_BYTES_MAX)?;
            }
            Ok(())
        }
        SbdMessage::JobExecute(msg) => {
            job_ref("job_execute.job", msg.job)?;
            check_text("job_execute.exec_user", &msg.exec_user, NAME_BYTES_MAX)?;
            check_text("job_execute.exec_home", &msg.exec_home, PATH_BYTES_MAX)?;
            check_text("job_execute.exec_cwd", &msg.exec_cwd, PATH_BYTES_MAX)
        }
        SbdMessage::JobFinish(msg) => job_ref("job_finish.job", msg.job).map(|_| ()),
        SbdMessage::JobSignalReply(msg) => job_ref("job_signal_reply.job", msg.job).map(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use lava_net::{Audience, AuthConfig, ClusterKey, KeyRing, Nonce};

    const NOW_MS: u64 = 1_700_000_000_000;

    fn authenticator(byte: u8) -> Authenticator {
        let key = ClusterKey::from_bytes(&[byte; 32]).expect("key");
        Authenticator::new(KeyRing::new(&key), AuthConfig::default())
            .with_audience(Audience::new(Audience::MBATCHD, "lavacore"))
    }

    fn token(auth: &Authenticator, nonce: u8) -> Vec<u8> {
        let credential = Credential {
            uid: 1000,
            gid: 100,
            username: "alice".into(),
            hostname: "localhost".into(),
            issued_at_ms: NOW_MS,
            nonce: Nonce([nonce; 16]),
            audience: Audience::new(Audience::MBATCHD, "lavacore"),
        };
        credential.seal(auth).expect("seals")
    }

    fn query_body(credential: Vec<u8>, jobs: Vec<wire::WireJobRef>) -> Vec<u8> {
        let query = wire::JobQuery {
            jobs,
            user: String::new(),
            state_filter: 0,
            queue: String::new(),
            host: String::new(),
            job_name: String::new(),
            after_job: 0,
            after_index: 0,
        };
        crate::codec::encode(&wire::ClientRequest {
            credential,
            request_id: wire::RequestId { high: 1, low: 2 },
            body: query,
        })
    }

    // Goal: `bwait`'s WAIT_QUERY is a read any authenticated user may ask; a condition
    // longer than a `bsub -w` expression may be is refused naming the field, without closing
    // the connection; a forged credential is refused; garbage closes the connection.
    #[test]
    fn wait_queries_are_checked_like_requests() {
        let auth = authenticator(1);
        let body = |credential: Vec<u8>, condition: String| {
            crate::codec::encode(&wire::ClientRequest {
                credential,
                request_id: wire::RequestId { high: 1, low: 2 },
                body: wire::WaitQuery { condition, registered: 0 },
            })
        };
        assert_eq!(read_operation(Operation::WaitQuery.code()), Some(Operation::WaitQuery));
        match read_query(Operation::WaitQuery, &body(token(&auth, 1), "done(1)".into()), &auth, NOW_MS) {
            Ok(ReadQuery::Wait(caller, query)) => {
                assert_eq!((caller.user.as_str(), query.condition.as_str()), ("alice", "done(1)"))
            }
            other => panic!("{other:?}"),
        }
        let long = "x".repeat(PATH_BYTES_MAX + 1);
        let refused = read_query(Operation::WaitQuery, &body(token(&auth, 2), long), &auth, NOW_MS)
            .expect_err("too long");
        assert_eq!(
            (refused.code, refused.reason, refused.close),
            (wire::ERR_BAD_REQUEST, Reject::Invalid, false)
        );
        assert!(refused.message.contains("wait_query.condition"), "{}", refused.message);
        let forged =
            read_query(Operation::WaitQuery, &body(token(&authenticator(2), 3), "1".into()), &auth, NOW_MS)
                .expect_err("another key");
        assert_eq!((forged.code, forged.close), (wire::ERR_AUTH, false));
        let garbage = read_query(Operation::WaitQuery, &[1, 2, 3], &auth, NOW_MS).expect_err("garbage");
        assert_eq!((garbage.code, garbage.close), (wire::ERR_BAD_REQUEST, true));
    }

    // Goal: each way a command request can be wrong gets its own code and
    // counter, and only a malformed one closes the connection.
    // Method: one request per defect against one authenticator.
    #[test]
    fn command_refusals_name_what_was_wrong() {
        let auth = authenticator(1);
        let good = client_request(Operation::JobQuery, &query_body(token(&auth, 1), vec![]), &auth, NOW_MS)
            .expect("a good query passes");
        assert_eq!(good.caller().user.as_str(), "alice");

        let forged = client_request(
            Operation::JobQuery,
            &query_body(token(&authenticator(2), 2), vec![]),
            &auth,
            NOW_MS,
        )
        .expect_err("a credential sealed with another key");
        assert_eq!((forged.code, forged.reason, forged.close), (wire::ERR_AUTH, Reject::Credential, false));

        let replayed_token = token(&auth, 3);
        client_request(Operation::JobQuery, &query_body(replayed_token.clone(), vec![]), &auth, NOW_MS)
            .expect("first use");
        let replay = client_request(Operation::JobQuery, &query_body(replayed_token, vec![]), &auth, NOW_MS)
            .expect_err("a credential is good once");
        assert_eq!(replay.code, wire::ERR_AUTH);

        let zero = wire::WireJobRef { job_id: 0, array_index: 0 };
        let invalid =
            client_request(Operation::JobQuery, &query_body(token(&auth, 4), vec![zero]), &auth, NOW_MS)
                .expect_err("job 0");
        assert_eq!(
            (invalid.code, invalid.reason, invalid.close),
            (wire::ERR_BAD_REQUEST, Reject::Invalid, false)
        );
        assert!(invalid.message.contains("query.jobs[0]"), "{}", invalid.message);

        let garbage = client_request(Operation::SubmitJob, &[1, 2, 3], &auth, NOW_MS).expect_err("garbage");
        assert_eq!(
            (garbage.code, garbage.reason, garbage.close),
            (wire::ERR_BAD_REQUEST, Reject::Body, true)
        );

        let reply_op =
            client_request(Operation::SubmitJobReply, &[], &auth, NOW_MS).expect_err("not a request");
        assert_eq!((reply_op.code, reply_op.close), (wire::ERR_UNSUPPORTED, true));
    }

    fn envelope<T: serde::Serialize>(credential: Vec<u8>, body: T) -> Vec<u8> {
        crate::codec::encode(&wire::ClientRequest {
            credential,
            request_id: wire::RequestId { high: 1, low: 3 },
            body,
        })
    }

    // Goal: the control requests (bmod & co., badmin, bhist) pass lava-batch-ll's
    // checks or are refused as invalid, leaving the connection open.
    #[test]
    fn control_requests_are_checked() {
        let auth = authenticator(1);
        let job = |job_id| wire::WireJobRef { job_id, array_index: 0 };
        let switch = |jobs| wire::JobControlRequest {
            jobs,
            action: wire::JobControlAction::Switch { queue: "night".into() },
        };
        let good = client_request(
            Operation::JobControl,
            &envelope(token(&auth, 10), switch(vec![job(4)])),
            &auth,
            NOW_MS,
        )
        .expect("a good switch passes");
        assert!(matches!(good, ClientCall::JobControl { .. }));
        let bad = client_request(
            Operation::JobControl,
            &envelope(token(&auth, 11), switch(vec![job(0)])),
            &auth,
            NOW_MS,
        )
        .expect_err("job 0");
        assert_eq!((bad.code, bad.reason, bad.close), (wire::ERR_BAD_REQUEST, Reject::Invalid, false));
        assert!(bad.message.contains("control.jobs[0]"), "{}", bad.message);

        let restart =
            |names: Vec<String>| wire::AdminControlRequest { action: wire::AdminAction::MbdRestart, names };
        let good = client_request(
            Operation::AdminControl,
            &envelope(token(&auth, 12), restart(vec![])),
            &auth,
            NOW_MS,
        )
        .expect("mbdrestart passes");
        assert!(matches!(good, ClientCall::AdminControl { .. }));
        let bad = client_request(
            Operation::AdminControl,
            &envelope(token(&auth, 13), restart(vec!["x".into()])),
            &auth,
            NOW_MS,
        )
        .expect_err("mbdrestart with names");
        assert_eq!((bad.code, bad.reason), (wire::ERR_BAD_REQUEST, Reject::Invalid));

        let query = wire::HistoryQuery { jobs: vec![], user: String::new(), state_filter: 0, after_job: 0 };
        let (caller, _) =
            history_query(&envelope(token(&auth, 14), query.clone()), &auth, NOW_MS).expect("passes");
        assert_eq!(caller.user.as_str(), "alice");
        let bad = history_query(
            &envelope(token(&auth, 15), wire::HistoryQuery { state_filter: 77, ..query }),
            &auth,
            NOW_MS,
        )
        .expect_err("bad filter");
        assert_eq!(bad.reason, Reject::Invalid);
        let garbage = history_query(&[9, 9], &auth, NOW_MS).expect_err("garbage");
        assert_eq!((garbage.reason, garbage.close), (Reject::Body, true));
    }

    // Goal: sbatchd frames of the wrong operation or shape close the channel,
    // a structurally invalid one is only dropped.
    #[test]
    fn sbd_problems_are_told_apart() {
        assert!(matches!(sbd_message(Operation::NewJob.code(), &[]), Err(SbdProblem::Operation(_))));
        assert!(matches!(sbd_message(999, &[]), Err(SbdProblem::Operation(_))));
        assert!(matches!(sbd_message(Operation::JobFinish.code(), &[0; 3]), Err(SbdProblem::Body(_))));
        let finish = wire::JobFinish {
            job: wire::WireJobRef { job_id: 0, array_index: 0 },
            dispatch_seq: 1,
            pid: 1,
            wait_status: 0,
            finish_reason: wire::FINISH_NORMAL,
            end_time: 0,
            rusage: wire::ResourceUsage::default(),
        };
        let body = crate::codec::encode(&finish);
        assert!(matches!(sbd_message(Operation::JobFinish.code(), &body), Err(SbdProblem::Invalid(_))));
        let finish = wire::JobFinish { job: wire::WireJobRef { job_id: 7, array_index: 0 }, ..finish };
        let body = crate::codec::encode(&finish);
        assert!(matches!(sbd_message(Operation::JobFinish.code(), &body), Ok(SbdMessage::JobFinish(_))));
    }
}
