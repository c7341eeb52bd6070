//! lava-coord-wire: the bytes of the coordinator protocol
//! (docs/protocols/coordinator.md; the operator's view is docs/coordinator.md).
//!
//! # What it owns
//! - [`COORD_VERSION`], the version word of every coordinator frame header.
//! - [`Operation`]: one opcode per message, requests odd-numbered by pair with
//!   their answers (`SubmitTask` 1 → `SubmitTaskReply` 2, …), and
//!   [`Operation::RequestFailed`] for every refusal.
//! - [`Hello`] / [`HelloReply`]: the first exchange of every connection, in
//!   which the client presents a credential token from its local sbatchd
//!   (`lava_net::Credential`) and learns who the coordinator takes it for.
//! - One XDR struct per message: [`SubmitTask`] (the payload is XDR opaque),
//!   [`SubmitTaskOnce`] / [`SubmitTaskOnceReply`] (a submission carrying the
//!   client's [`SubmissionId`], so that its retry creates nothing),
//!   [`LeaseRequest`] / [`LeaseReply`] (an empty reply when nothing is
//!   schedulable), [`Heartbeat`] / [`LeaseExtended`], [`TaskOutcome`] for
//!   complete and fail / [`OutcomeReply`], the read-only queries
//!   ([`TaskQuery`], [`CountsReply`], [`WorkersReply`], [`LeasesReply`]),
//!   [`StatsReply`] (the daemon's counters, answered by its shell) and
//!   [`ErrorReply`] with the `ERR_*` codes.
//! - [`decode_request`]: opcode plus body to a [`Request`], and
//!   [`encode_body`] for anything of ours.
//!
//! Frames are `lava_xdr::frame`'s: the 20-byte header (sequence, operation,
//! version, length, status) then the XDR body, not sealed: the connection is
//! authenticated once, by the credential of its first frame ([`Hello`]).
//! A reply echoes the request's `sequence`; `RequestFailed` repeats its error
//! code in the header's `status`. A client may send its next request before
//! the previous answer arrived; answers come back in request order.
//!
//! # What it never does
//! Validation beyond XDR well-formedness (non-zero ids, worker names and the
//! payload bound are lava-coord-ll's), state, clocks, sockets.

#![deny(missing_docs)]

use serde::{Deserialize, Serialize};

/// Version word carried in every coordinator frame header.
pub const COORD_VERSION: u32 = 0x0001_0000;

/// Task state values of [`TaskInfo::state`] and [`OutcomeReply::state`].
pub mod task_state {
    /// Submitted, or returned after its lease expired; waiting for a worker.
    pub const WAITING: u32 = 0;
    /// Held by a worker under a valid lease.
    pub const LEASED: u32 = 1;
    /// Completed by the worker holding its lease (terminal).
    pub const COMPLETED: u32 = 2;
    /// Failed by the worker holding its lease (terminal).
    pub const FAILED: u32 = 3;

    /// The state's name, as `coordctl status` prints it.
    pub fn name(state: u32) -> &'static str {
        match state {
            WAITING => "WAITING",
            LEASED => "LEASED",
            COMPLETED => "COMPLETED",
            FAILED => "FAILED",
            _ => "UNKNOWN",
        }
    }
}

/// Every operation of the coordinator protocol; the frame header's `operation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u32)]
pub enum Operation {
    /// Client → coordinator: submit a task ([`SubmitTask`]).
    SubmitTask = 1,
    /// Coordinator → client: the task id ([`SubmitTaskReply`]).
    SubmitTaskReply = 2,
    /// Worker → coordinator: give me a task ([`LeaseRequest`]).
    LeaseRequest = 3,
    /// Coordinator → worker: a lease, or none ([`LeaseReply`]).
    LeaseReply = 4,
    /// Worker → coordinator: I still work on it ([`Heartbeat`]).
    Heartbeat = 5,
    /// Coordinator → worker: the lease's new expiry ([`LeaseExtended`]).
    LeaseExtended = 6,
    /// Worker → coordinator: the task succeeded ([`TaskOutcome`]).
    CompleteTask = 7,
    /// Worker → coordinator: the task failed ([`TaskOutcome`]).
    FailTask = 8,
    /// Coordinator → worker: the outcome is recorded ([`OutcomeReply`]).
    OutcomeReply = 9,
    /// Operator → coordinator: one task ([`TaskQuery`]).
    TaskQuery = 10,
    /// Coordinator → operator: the task ([`TaskQueryReply`]).
    TaskQueryReply = 11,
    /// Operator → coordinator: tasks counted by state (empty body).
    CountsQuery = 12,
    /// Coordinator → operator: the counts ([`CountsReply`]).
    CountsReply = 13,
    /// Operator → coordinator: the workers seen (empty body).
    WorkersQuery = 14,
    /// Coordinator → operator: the workers ([`WorkersReply`]).
    WorkersReply = 15,
    /// Operator → coordinator: the valid leases (empty body).
    LeasesQuery = 16,
    /// Coordinator → operator: the leases ([`LeasesReply`]).
    LeasesReply = 17,
    /// Coordinator → client: the request was refused ([`ErrorReply`]).
    RequestFailed = 18,
    /// Client → coordinator, first frame of a connection: who I am ([`Hello`]).
    Hello = 19,
    /// Coordinator → client: the identity the credential proved ([`HelloReply`]).
    HelloReply = 20,
    /// Operator → coordinator: the daemon's counters (empty body); answered by the shell,
    /// never by the logic.
    StatsQuery = 21,
    /// Coordinator → operator: the counters ([`StatsReply`]).
    StatsReply = 22,
    /// Client → coordinator: submit a task under a submission id ([`SubmitTaskOnce`]).
    SubmitTaskOnce = 23,
    /// Coordinator → client: the task id, and whether the id was already recorded
    /// ([`SubmitTaskOnceReply`]).
    SubmitTaskOnceReply = 24,
}

impl Operation {
    /// Every operation, for exhaustive tests and counters.
    pub const ALL: [Operation; 24] = [
        Operation::SubmitTask,
        Operation::SubmitTaskReply,
        Operation::LeaseRequest,
        Operation::LeaseReply,
        Operation::Heartbeat,
        Operation::LeaseExtended,
        Operation::CompleteTask,
        Operation::FailTask,
        Operation::OutcomeReply,
        Operation::TaskQuery,
        Operation::TaskQueryReply,
        Operation::CountsQuery,
        Operation::CountsReply,
        Operation::WorkersQuery,
        Operation::WorkersReply,
        Operation::LeasesQuery,
        Operation::LeasesReply,
        Operation::RequestFailed,
        Operation::Hello,
        Operation::HelloReply,
        Operation::StatsQuery,
        Operation::StatsReply,
        Operation::SubmitTaskOnce,
        Operation::SubmitTaskOnceReply,
    ];

    /// The operation a header's opcode names, if any.
    pub fn from_code(code: u32) -> Option<Operation> {
        Operation::ALL.into_iter().find(|op| *op as u32 == code)
    }

    /// The opcode on the wire.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The protocol name, as logs print it.
    pub fn name(self) -> &'static str {
        match self {
            Operation::SubmitTask => "SUBMIT_TASK",
            Operation::SubmitTaskReply => "SUBMIT_TASK_REPLY",
            Operation::LeaseRequest => "LEASE_REQUEST",
            Operation::LeaseReply => "LEASE_REPLY",
            Operation::Heartbeat => "HEARTBEAT",
            Operation::LeaseExtended => "LEASE_EXTENDED",
            Operation::CompleteTask => "COMPLETE_TASK",
            Operation::FailTask => "FAIL_TASK",
            Operation::OutcomeReply => "OUTCOME_REPLY",
            Operation::TaskQuery => "TASK_QUERY",
            Operation::TaskQueryReply => "TASK_QUERY_REPLY",
            Operation::CountsQuery => "COUNTS_QUERY",
            Operation::CountsReply => "COUNTS_REPLY",
            Operation::WorkersQuery => "WORKERS_QUERY",
            Operation::WorkersReply => "WORKERS_REPLY",
            Operation::LeasesQuery => "LEASES_QUERY",
            Operation::LeasesReply => "LEASES_REPLY",
            Operation::RequestFailed => "REQUEST_FAILED",
            Operation::Hello => "HELLO",
            Operation::HelloReply => "HELLO_REPLY",
            Operation::StatsQuery => "STATS_QUERY",
            Operation::StatsReply => "STATS_REPLY",
            Operation::SubmitTaskOnce => "SUBMIT_TASK_ONCE",
            Operation::SubmitTaskOnceReply => "SUBMIT_TASK_ONCE_REPLY",
        }
    }
}

/// HELLO: the first frame of every connection. Nothing else is served on a
/// connection before it succeeded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// A token the local sbatchd issued for the caller (CREDENTIAL_REQUEST on
    /// `LAVA_CMD_SOCKET`); single-use, valid for the authentication window.
    #[serde(with = "lava_xdr::opaque")]
    pub credential: Vec<u8>,
}

/// HELLO_REPLY: who the coordinator takes the connection's caller for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloReply {
    /// The caller's uid, as the issuing sbatchd learned it from the kernel.
    pub uid: u32,
    /// The caller's user name.
    pub user: String,
    /// Whether the caller is a cluster administrator (root or lsf.cluster ClusterAdmins).
    pub admin: bool,
}

/// SUBMIT_TASK: a task's opaque payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitTask {
    /// What the worker is handed; the coordinator never looks inside.
    #[serde(with = "lava_xdr::opaque")]
    pub payload: Vec<u8>,
}

/// A submission id: 128 bits the client chooses once per task it means to submit
/// (at random) and repeats on every retry of that submission, on any candidate. Never
/// all zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SubmissionId {
    /// High 64 bits.
    pub high: u64,
    /// Low 64 bits.
    pub low: u64,
}

impl std::fmt::Display for SubmissionId {
    /// 32 hexadecimal digits, as logs and `coordctl` print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}{:016x}", self.high, self.low)
    }
}

/// SUBMIT_TASK_ONCE: a task's payload under the client's submission id. A retry with
/// the same id (by the same user, within the coordinator's window) is answered with the
/// task the first attempt created, and creates nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitTaskOnce {
    /// The submission id; the same on every retry.
    pub submission: SubmissionId,
    /// What the worker is handed; the coordinator never looks inside.
    #[serde(with = "lava_xdr::opaque")]
    pub payload: Vec<u8>,
}

/// SUBMIT_TASK_ONCE_REPLY: the task is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitTaskOnceReply {
    /// The task's id (never 0).
    pub task_id: u64,
    /// True when the submission id was already recorded: this is the task an earlier
    /// attempt created, and nothing was created now.
    pub repeated: bool,
}

/// SUBMIT_TASK_REPLY: the task is durable in the WAL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitTaskReply {
    /// The new task's id (never 0).
    pub task_id: u64,
}

/// LEASE_REQUEST: a worker pulls a task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRequest {
    /// The worker's name (lava-coord-ll bounds it).
    pub worker: String,
}

/// A granted lease, as the worker receives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseGrant {
    /// The task.
    pub task_id: u64,
    /// The lease; present it with every heartbeat, completion and failure.
    pub lease_id: u64,
    /// Absolute expiry, ms since the epoch by the coordinator's clock.
    pub expires_at_ms: u64,
    /// The task's payload.
    #[serde(with = "lava_xdr::opaque")]
    pub payload: Vec<u8>,
}

/// LEASE_REPLY: a lease, or `None` when nothing is schedulable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseReply {
    /// The lease granted, if any.
    pub lease: Option<LeaseGrant>,
}

/// HEARTBEAT: extend a lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// The task.
    pub task_id: u64,
    /// The lease held on it.
    pub lease_id: u64,
}

/// LEASE_EXTENDED: the lease's new absolute expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseExtended {
    /// The task.
    pub task_id: u64,
    /// The lease.
    pub lease_id: u64,
    /// New absolute expiry, ms since the epoch.
    pub expires_at_ms: u64,
}

/// COMPLETE_TASK and FAIL_TASK: the worker's outcome under its lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskOutcome {
    /// The task.
    pub task_id: u64,
    /// The lease held on it.
    pub lease_id: u64,
}

/// OUTCOME_REPLY: the outcome is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeReply {
    /// The task.
    pub task_id: u64,
    /// Its state now ([`task_state::COMPLETED`] or [`task_state::FAILED`]).
    pub state: u32,
}

/// TASK_QUERY: one task by id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskQuery {
    /// The task.
    pub task_id: u64,
}

/// One task as an operator sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskInfo {
    /// The task.
    pub task_id: u64,
    /// One of [`task_state`]'s values.
    pub state: u32,
    /// The current lease (LEASED) or the lease that ended it (COMPLETED, FAILED); 0 otherwise.
    pub lease_id: u64,
    /// The worker of that lease; empty otherwise.
    pub worker: String,
    /// The current lease's absolute expiry; 0 when not leased.
    pub expires_at_ms: u64,
    /// Leases granted on this task so far.
    pub n_leases: u32,
    /// Completions and failures refused on this task (TaskCancelled records).
    pub n_refused: u32,
    /// Payload size in bytes.
    pub payload_bytes: u32,
    /// The user who submitted it.
    pub owner: String,
    /// That user's uid.
    pub owner_uid: u32,
    /// The user holding (LEASED) or who ended (COMPLETED, FAILED) its lease; empty otherwise.
    pub holder: String,
}

/// TASK_QUERY_REPLY.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskQueryReply {
    /// The task.
    pub task: TaskInfo,
}

/// COUNTS_REPLY: tasks by state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountsReply {
    /// WAITING tasks.
    pub waiting: u64,
    /// LEASED tasks.
    pub leased: u64,
    /// COMPLETED tasks.
    pub completed: u64,
    /// FAILED tasks.
    pub failed: u64,
}

/// One counter of [`StatsReply`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counter {
    /// Its name (`requests.SUBMIT_TASK`, `wal.fsyncs`, …; docs/coordinator.md lists them).
    pub name: String,
    /// Its value.
    pub value: u64,
}

/// STATS_REPLY: the daemon's counters and gauges, in a stable order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsReply {
    /// The counters.
    pub counters: Vec<Counter>,
}

/// One worker of [`WorkersReply`] (advisory, soft state).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// The worker's name.
    pub name: String,
    /// When it was last heard from (lease request or heartbeat), ms since the epoch.
    pub last_seen_ms: u64,
    /// Valid leases it holds.
    pub n_leases: u32,
}

/// WORKERS_REPLY, by name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkersReply {
    /// The workers.
    pub workers: Vec<WorkerInfo>,
}

/// One valid lease of [`LeasesReply`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseInfo {
    /// The task.
    pub task_id: u64,
    /// The lease.
    pub lease_id: u64,
    /// Its worker.
    pub worker: String,
    /// The user the lease was granted to.
    pub user: String,
    /// Absolute expiry, ms since the epoch.
    pub expires_at_ms: u64,
}

/// LEASES_REPLY, by task id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeasesReply {
    /// The leases.
    pub leases: Vec<LeaseInfo>,
}

/// REQUEST_FAILED: why a request was refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// One of the `ERR_*` codes.
    pub code: u32,
    /// A sentence for the operator.
    pub message: String,
}

/// The frame or its body was malformed, or a field is invalid (the message names it).
pub const ERR_BAD_REQUEST: u32 = 1;
/// Unknown protocol version or operation.
pub const ERR_UNSUPPORTED: u32 = 2;
/// The payload is larger than the configured maximum.
pub const ERR_PAYLOAD_TOO_LARGE: u32 = 3;
/// No task has this id.
pub const ERR_UNKNOWN_TASK: u32 = 4;
/// The lease is not the task's valid lease (expired, superseded, never granted):
/// the worker must stop working on the task.
pub const ERR_LEASE_LOST: u32 = 5;
/// The task already ended with the other outcome.
pub const ERR_TASK_FINISHED: u32 = 6;
/// The coordinator cannot accept the request now (its WAL failed, it is stopping).
pub const ERR_TRY_AGAIN: u32 = 7;
/// The connection is not authenticated: no HELLO yet, or its credential was
/// refused (forged, expired, replayed, another cluster's key).
pub const ERR_AUTH: u32 = 8;
/// The caller may not do this (another user's lease; see docs/coordinator.md).
pub const ERR_PERMISSION: u32 = 9;

/// A decoded request, before lava-coord-ll's validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// HELLO (only as a connection's first frame).
    Hello(Hello),
    /// SUBMIT_TASK.
    Submit(SubmitTask),
    /// SUBMIT_TASK_ONCE.
    SubmitOnce(SubmitTaskOnce),
    /// LEASE_REQUEST.
    Lease(LeaseRequest),
    /// HEARTBEAT.
    Heartbeat(Heartbeat),
    /// COMPLETE_TASK.
    Complete(TaskOutcome),
    /// FAIL_TASK.
    Fail(TaskOutcome),
    /// TASK_QUERY.
    Task(TaskQuery),
    /// COUNTS_QUERY.
    Counts,
    /// WORKERS_QUERY.
    Workers,
    /// LEASES_QUERY.
    Leases,
    /// STATS_QUERY.
    Stats,
}

impl Request {
    /// The opcode of this request.
    pub fn operation(&self) -> Operation {
        match self {
            Request::Hello(_) => Operation::Hello,
            Request::Submit(_) => Operation::SubmitTask,
            Request::SubmitOnce(_) => Operation::SubmitTaskOnce,
            Request::Lease(_) => Operation::LeaseRequest,
            Request::Heartbeat(_) => Operation::Heartbeat,
            Request::Complete(_) => Operation::CompleteTask,
            Request::Fail(_) => Operation::FailTask,
            Request::Task(_) => Operation::TaskQuery,
            Request::Counts => Operation::CountsQuery,
            Request::Workers => Operation::WorkersQuery,
            Request::Leases => Operation::LeasesQuery,
            Request::Stats => Operation::StatsQuery,
        }
    }

    /// The XDR body of this request.
    pub fn encode_body(&self) -> Vec<u8> {
        match self {
            Request::Hello(m) => encode_body(m),
            Request::Submit(m) => encode_body(m),
            Request::SubmitOnce(m) => encode_body(m),
            Request::Lease(m) => encode_body(m),
            Request::Heartbeat(m) => encode_body(m),
            Request::Complete(m) | Request::Fail(m) => encode_body(m),
            Request::Task(m) => encode_body(m),
            Request::Counts | Request::Workers | Request::Leases | Request::Stats => Vec::new(),
        }
    }
}

/// An answer, as the coordinator sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// HELLO_REPLY.
    Hello(HelloReply),
    /// SUBMIT_TASK_REPLY.
    Submitted(SubmitTaskReply),
    /// SUBMIT_TASK_ONCE_REPLY.
    SubmittedOnce(SubmitTaskOnceReply),
    /// LEASE_REPLY.
    Lease(LeaseReply),
    /// LEASE_EXTENDED.
    Extended(LeaseExtended),
    /// OUTCOME_REPLY.
    Outcome(OutcomeReply),
    /// TASK_QUERY_REPLY.
    Task(TaskQueryReply),
    /// COUNTS_REPLY.
    Counts(CountsReply),
    /// WORKERS_REPLY.
    Workers(WorkersReply),
    /// LEASES_REPLY.
    Leases(LeasesReply),
    /// STATS_REPLY.
    Stats(StatsReply),
    /// REQUEST_FAILED.
    Error(ErrorReply),
}

impl Reply {
    /// A REQUEST_FAILED with `code` (one of the `ERR_*`) and `message`.
    pub fn error(code: u32, message: impl Into<String>) -> Reply {
        Reply::Error(ErrorReply { code, message: message.into() })
    }

    /// The opcode of this answer.
    pub fn operation(&self) -> Operation {
        match self {
            Reply::Hello(_) => Operation::HelloReply,
            Reply::Submitted(_) => Operation::SubmitTaskReply,
            Reply::SubmittedOnce(_) => Operation::SubmitTaskOnceReply,
            Reply::Lease(_) => Operation::LeaseReply,
            Reply::Extended(_) => Operation::LeaseExtended,
            Reply::Outcome(_) => Operation::OutcomeReply,
            Reply::Task(_) => Operation::TaskQueryReply,
            Reply::Counts(_) => Operation::CountsReply,
            Reply::Workers(_) => Operation::WorkersReply,
            Reply::Leases(_) => Operation::LeasesReply,
            Reply::Stats(_) => Operation::StatsReply,
            Reply::Error(_) => Operation::RequestFailed,
        }
    }

    /// The header status of this answer: the error code for REQUEST_FAILED, else 0.
    pub fn status(&self) -> u32 {
        match self {
            Reply::Error(error) => error.code,
            _ => 0,
        }
    }

    /// The XDR body of this answer.
    pub fn encode_body(&self) -> Vec<u8> {
        match self {
            Reply::Hello(m) => encode_body(m),
            Reply::Submitted(m) => encode_body(m),
            Reply::SubmittedOnce(m) => encode_body(m),
            Reply::Lease(m) => encode_body(m),
            Reply::Extended(m) => encode_body(m),
            Reply::Outcome(m) => encode_body(m),
            Reply::Task(m) => encode_body(m),
            Reply::Counts(m) => encode_body(m),
            Reply::Workers(m) => encode_body(m),
            Reply::Leases(m) => encode_body(m),
            Reply::Stats(m) => encode_body(m),
            Reply::Error(m) => encode_body(m),
        }
    }
}

/// Why a body did not decode as the message its opcode names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The opcode is not a request (or not an answer, for [`decode_reply`]).
    #[error("operation {operation} is not a coordinator {expected}")]
    Operation {
        /// The header's opcode.
        operation: u32,
        /// "request" or "answer".
        expected: &'static str,
    },
    /// The body is not well-formed XDR for the operation.
    #[error("malformed {operation} body: {reason}")]
    Body {
        /// The operation's name.
        operation: &'static str,
        /// What the XDR decoder said (field path and byte offset).
        reason: String,
    },
}

/// Encodes any message of this protocol. Our types use only what the XDR codec
/// supports, so failure is a programmer error.
pub fn encode_body<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    lava_xdr::to_bytes(value).expect("coordinator wire types always encode to XDR")
}

fn decode<'a, T: Deserialize<'a>>(
    op: Operation,
    body: &'a [u8],
    limits: &lava_xdr::Limits,
) -> Result<T, DecodeError> {
    lava_xdr::from_bytes(body, limits)
        .map_err(|error| DecodeError::Body { operation: op.name(), reason: error.to_string() })
}

fn empty(op: Operation, body: &[u8]) -> Result<(), DecodeError> {
    if body.is_empty() {
        Ok(())
    } else {
        Err(DecodeError::Body {
            operation: op.name(),
            reason: format!("{} bytes where none belong", body.len()),
        })
    }
}

/// Decodes a request body by its header opcode, within `limits`.
pub fn decode_request(
    operation: u32,
    body: &[u8],
    limits: &lava_xdr::Limits,
) -> Result<Request, DecodeError> {
    let not_request = DecodeError::Operation { operation, expected: "request" };
    let op = Operation::from_code(operation).ok_or(not_request.clone())?;
    Ok(match op {
        Operation::Hello => Request::Hello(decode(op, body, limits)?),
        Operation::SubmitTask => Request::Submit(decode(op, body, limits)?),
        Operation::SubmitTaskOnce => Request::SubmitOnce(decode(op, body, limits)?),
        Operation::LeaseRequest => Request::Lease(decode(op, body, limits)?),
        Operation::Heartbeat => Request::Heartbeat(decode(op, body, limits)?),
        Operation::CompleteTask => Request::Complete(decode(op, body, limits)?),
        Operation::FailTask => Request::Fail(decode(op, body, limits)?),
        Operation::TaskQuery => Request::Task(decode(op, body, limits)?),
        Operation::CountsQuery => empty(op, body).map(|()| Request::Counts)?,
        Operation::WorkersQuery => empty(op, body).map(|()| Request::Workers)?,
        Operation::LeasesQuery => empty(op, body).map(|()| Request::Leases)?,
        Operation::StatsQuery => empty(op, body).map(|()| Request::Stats)?,
        _ => return Err(not_request),
    })
}

/// Decodes an answer body by its header opcode, within `limits` (the clients' side).
pub fn decode_reply(operation: u32, body: &[u8], limits: &lava_xdr::Limits) -> Result<Reply, DecodeError> {
    let not_answer = DecodeError::Operation { operation, expected: "answer" };
    let op = Operation::from_code(operation).ok_or(not_answer.clone())?;
    Ok(match op {
        Operation::HelloReply => Reply::Hello(decode(op, body, limits)?),
        Operation::SubmitTaskReply => Reply::Submitted(decode(op, body, limits)?),
        Operation::SubmitTaskOnceReply => Reply::SubmittedOnce(decode(op, body, limits)?),
        Operation::LeaseReply => Reply::Lease(decode(op, body, limits)?),
        Operation::LeaseExtended => Reply::Extended(decode(op, body, limits)?),
        Operation::OutcomeReply => Reply::Outcome(decode(op, body, limits)?),
        Operation::TaskQueryReply => Reply::Task(decode(op, body, limits)?),
        Operation::CountsReply => Reply::Counts(decode(op, body, limits)?),
        Operation::WorkersReply => Reply::Workers(decode(op, body, limits)?),
        Operation::LeasesReply => Reply::Leases(decode(op, body, limits)?),
        Operation::StatsReply => Reply::Stats(decode(op, body, limits)?),
        Operation::RequestFailed => Reply::Error(decode(op, body, limits)?),
        _ => return Err(not_answer),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: lava_xdr::Limits = lava_xdr::Limits::DEFAULT;

    // Goal: opcodes are distinct and round-trip through their codes.
    #[test]
    fn opcodes_round_trip() {
        for op in Operation::ALL {
            assert_eq!(Operation::from_code(op.code()), Some(op), "{}", op.name());
        }
        assert_eq!(Operation::from_code(0), None);
        assert_eq!(Operation::from_code(25), None);
    }

    // Goal: every request and answer survives encode → decode, and the payload
    // is XDR opaque (4-byte length, bytes, zero padding), not one word per byte.
    #[test]
    fn messages_round_trip_and_payload_is_opaque() {
        let submit = Request::Submit(SubmitTask { payload: b"abcde".to_vec() });
        let body = submit.encode_body();
        assert_eq!(body, [0, 0, 0, 5, b'a', b'b', b'c', b'd', b'e', 0, 0, 0]);
        let requests = [
            Request::Hello(Hello { credential: vec![1, 2, 3] }),
            submit,
            Request::SubmitOnce(SubmitTaskOnce {
                submission: SubmissionId { high: 1, low: u64::MAX },
                payload: b"xy".to_vec(),
            }),
            Request::Lease(LeaseRequest { worker: "w1".into() }),
            Request::Heartbeat(Heartbeat { task_id: 1, lease_id: 2 }),
            Request::Complete(TaskOutcome { task_id: 3, lease_id: 4 }),
            Request::Fail(TaskOutcome { task_id: 5, lease_id: 6 }),
            Request::Task(TaskQuery { task_id: 7 }),
            Request::Counts,
            Request::Workers,
            Request::Leases,
            Request::Stats,
        ];
        for request in requests {
            let back = decode_request(request.operation().code(), &request.encode_body(), &LIMITS);
            assert_eq!(back, Ok(request));
        }
        let grant = LeaseGrant { task_id: 1, lease_id: 2, expires_at_ms: 3, payload: vec![9] };
        let replies = [
            Reply::Hello(HelloReply { uid: 65534, user: "nobody".into(), admin: false }),
            Reply::Submitted(SubmitTaskReply { task_id: 1 }),
            Reply::SubmittedOnce(SubmitTaskOnceReply { task_id: 2, repeated: true }),
            Reply::Lease(LeaseReply { lease: Some(grant) }),
            Reply::Lease(LeaseReply { lease: None }),
            Reply::Extended(LeaseExtended { task_id: 1, lease_id: 2, expires_at_ms: 3 }),
            Reply::Outcome(OutcomeReply { task_id: 1, state: task_state::COMPLETED }),
            Reply::Counts(CountsReply { waiting: 1, leased: 2, completed: 3, failed: 4 }),
            Reply::Workers(WorkersReply {
                workers: vec![WorkerInfo { name: "w".into(), last_seen_ms: 5, n_leases: 1 }],
            }),
            Reply::Leases(LeasesReply {
                leases: vec![LeaseInfo {
                    task_id: 1,
                    lease_id: 2,
                    worker: "w".into(),
                    user: "u".into(),
                    expires_at_ms: 3,
                }],
            }),
            Reply::Stats(StatsReply { counters: vec![Counter { name: "wal.fsyncs".into(), value: 7 }] }),
            Reply::error(ERR_LEASE_LOST, "lease 2 of task 1 is not valid"),
        ];
        for reply in replies {
            let back = decode_reply(reply.operation().code(), &reply.encode_body(), &LIMITS);
            assert_eq!(back, Ok(reply));
        }
    }

    // Goal: malformed bodies and wrong opcodes are typed errors naming the operation.
    #[test]
    fn malformed_bodies_are_errors() {
        let err = decode_request(Operation::Heartbeat.code(), &[0, 0, 0, 1], &LIMITS).expect_err("short");
        assert!(matches!(err, DecodeError::Body { operation: "HEARTBEAT", .. }), "{err}");
        let err = decode_request(Operation::CountsQuery.code(), &[0], &LIMITS).expect_err("stray byte");
        assert!(matches!(err, DecodeError::Body { operation: "COUNTS_QUERY", .. }));
        let err = decode_request(Operation::LeaseReply.code(), &[], &LIMITS).expect_err("an answer");
        assert_eq!(err, DecodeError::Operation { operation: 4, expected: "request" });
        assert!(decode_reply(Operation::SubmitTask.code(), &[], &LIMITS).is_err());
        // Arbitrary bytes never panic.
        let mut state = 0x9e37_79b9u32;
        for len in 0..64usize {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (state >> 24) as u8
                })
                .collect();
            for op in Operation::ALL {
                let _ = decode_request(op.code(), &bytes, &LIMITS);
                let _ = decode_reply(op.code(), &bytes, &LIMITS);
            }
        }
    }
}
