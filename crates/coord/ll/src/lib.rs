//! lava-coord-ll: from the coordinator's wire structs ([`lava_coord_wire`]) to
//! validated domain values.
//!
//! # What it owns
//! - The newtypes [`TaskId`] and [`LeaseId`] (never 0: 0 means "none" on the
//!   wire) and [`WorkerName`] (1 to [`WORKER_NAME_BYTES_MAX`] bytes of
//!   `[A-Za-z0-9._@:-]`, so it prints safely in logs and tables).
//! - [`UserName`] (1 to [`USER_NAME_BYTES_MAX`] printable ASCII bytes, no
//!   space) and [`Caller`]: who sent a request, as the connection's credential
//!   proved it (the shell verified the credential; this crate only checks the
//!   name's shape).
//! - [`Payload`]: a task's opaque bytes, at most the configured
//!   [`Limits::payload_bytes_max`].
//! - [`SubmissionId`]: the client's 128-bit id of a submission, never all zero.
//! - [`Request`]: a validated request, built by [`Request::validate`], whose
//!   errors ([`LlError`]) name the field and map to a wire error code.
//!
//! # What it never does
//! No state, no clock, no I/O, no tokio; it never decides whether a task or a
//! lease exists (that is lava-coord-logic's, from WAL-derived state).

#![deny(missing_docs)]

use std::fmt;
use std::num::NonZeroU64;

use lava_coord_wire as wire;
use serde::{Deserialize, Serialize};

/// Longest worker name, in bytes.
pub const WORKER_NAME_BYTES_MAX: usize = 64;
/// Longest user name, in bytes (the credential's own limit).
pub const USER_NAME_BYTES_MAX: usize = 256;
/// Default largest payload: 1 MiB.
pub const PAYLOAD_BYTES_MAX_DEFAULT: u32 = 1 << 20;

/// Bounds a request must respect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted payload, in bytes.
    pub payload_bytes_max: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { payload_bytes_max: PAYLOAD_BYTES_MAX_DEFAULT }
    }
}

/// Why a request was refused; every variant names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlError {
    /// The submission id was all zero (a client that forgot to choose one).
    #[error("submission id must not be 0 (choose 128 random bits once per task and repeat them on retries)")]
    ZeroSubmission,
    /// An id field was 0.
    #[error("{field} must not be 0")]
    ZeroId {
        /// The field.
        field: &'static str,
    },
    /// The worker name is empty, too long or holds a character outside `[A-Za-z0-9._@:-]`.
    #[error("worker name {name:?} is invalid: {reason}")]
    WorkerName {
        /// The name as sent (cut to a printable length).
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The user name is empty, too long or holds a space, a control or a non-ASCII character.
    #[error("user name {name:?} is invalid: {reason}")]
    UserName {
        /// The name as sent (cut to a printable length).
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A HELLO after the connection's first frame.
    #[error("HELLO is only valid as the first frame of a connection")]
    HelloAgain,
    /// STATS_QUERY: the shell answers it from its own counters; it never reaches the logic.
    #[error("STATS_QUERY is answered by the daemon's shell, not validated into a logic request")]
    ShellQuery,
    /// The payload exceeds the configured maximum.
    #[error("payload of {bytes} bytes exceeds the maximum of {max} bytes")]
    PayloadTooLarge {
        /// Its size.
        bytes: usize,
        /// The maximum.
        max: u32,
    },
}

impl LlError {
    /// The wire error code that answers this refusal.
    pub fn code(&self) -> u32 {
        match self {
            LlError::PayloadTooLarge { .. } => wire::ERR_PAYLOAD_TOO_LARGE,
            LlError::ZeroId { .. }
            | LlError::ZeroSubmission
            | LlError::WorkerName { .. }
            | LlError::UserName { .. }
            | LlError::HelloAgain
            | LlError::ShellQuery => wire::ERR_BAD_REQUEST,
        }
    }
}

/// A task id (1, 2, 3, … in submission order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskId(NonZeroU64);

/// A lease id (1, 2, 3, … in grant order, never reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LeaseId(NonZeroU64);

macro_rules! id_type {
    ($name:ident) => {
        impl $name {
            /// The id `value`, or an error naming `field` when it is 0.
            pub fn new(field: &'static str, value: u64) -> Result<$name, LlError> {
                NonZeroU64::new(value).map($name).ok_or(LlError::ZeroId { field })
            }

            /// The id on the wire.
            pub fn get(self) -> u64 {
                self.0.get()
            }

            /// The id after this one.
            pub fn next(self) -> $name {
                $name(self.0.checked_add(1).expect("64-bit ids are never exhausted"))
            }

            /// The first id.
            pub const FIRST: $name = $name(NonZeroU64::MIN);
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(TaskId);
id_type!(LeaseId);

/// A worker's name; see the crate doc for the rule.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WorkerName(String);

impl WorkerName {
    /// Checks `name`.
    pub fn parse(name: &str) -> Result<WorkerName, LlError> {
        let refuse = |reason| {
            let shown: String = name.chars().take(WORKER_NAME_BYTES_MAX).collect();
            Err(LlError::WorkerName { name: shown, reason })
        };
        if name.is_empty() {
            return refuse("it is empty");
        }
        if name.len() > WORKER_NAME_BYTES_MAX {
            return refuse("it is longer than 64 bytes");
        }
        if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._@:-".contains(&b)) {
            return refuse("only letters, digits and . _ @ : - are allowed");
        }
        Ok(WorkerName(name.to_owned()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A user's login name; see the crate doc for the rule.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct UserName(String);

impl UserName {
    /// Checks `name`.
    pub fn parse(name: &str) -> Result<UserName, LlError> {
        let refuse = |reason| {
            let shown: String = name.chars().take(64).collect();
            Err(LlError::UserName { name: shown, reason })
        };
        if name.is_empty() {
            return refuse("it is empty");
        }
        if name.len() > USER_NAME_BYTES_MAX {
            return refuse("it is longer than 256 bytes");
        }
        if !name.bytes().all(|b| b.is_ascii_graphic()) {
            return refuse("only printable ASCII without spaces is allowed");
        }
        Ok(UserName(name.to_owned()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UserName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who sent a request: the uid and name a credential vouched for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Caller {
    /// The uid, as the issuing sbatchd learned it from the kernel.
    pub uid: u32,
    /// The login name on the issuing host.
    pub user: UserName,
}

impl fmt::Display for Caller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (uid {})", self.user, self.uid)
    }
}

/// A task's payload, within the configured bound.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Payload(#[serde(with = "lava_xdr::opaque")] Vec<u8>);

impl Payload {
    /// Checks `bytes` against `limits`.
    pub fn new(bytes: Vec<u8>, limits: &Limits) -> Result<Payload, LlError> {
        if bytes.len() > limits.payload_bytes_max as usize {
            return Err(LlError::PayloadTooLarge { bytes: bytes.len(), max: limits.payload_bytes_max });
        }
        Ok(Payload(bytes))
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it is empty (an empty payload is allowed).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A submission id: the 128 bits a client chose for one task it submits, repeated on
/// every retry of that submission (docs/protocols/coordinator.md, "Submission ids").
/// Never all zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SubmissionId {
    high: u64,
    low: u64,
}

impl SubmissionId {
    /// The id on the wire, or [`LlError::ZeroSubmission`].
    pub fn new(id: wire::SubmissionId) -> Result<SubmissionId, LlError> {
        if id.high == 0 && id.low == 0 {
            return Err(LlError::ZeroSubmission);
        }
        Ok(SubmissionId { high: id.high, low: id.low })
    }

    /// The id as the wire carries it.
    pub fn to_wire(self) -> wire::SubmissionId {
        wire::SubmissionId { high: self.high, low: self.low }
    }
}

impl fmt::Display for SubmissionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.to_wire().fmt(f)
    }
}

/// A lease as a worker names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseRef {
    /// The task.
    pub task: TaskId,
    /// The lease on it.
    pub lease: LeaseId,
}

impl LeaseRef {
    fn from_wire(task_id: u64, lease_id: u64) -> Result<LeaseRef, LlError> {
        Ok(LeaseRef { task: TaskId::new("task_id", task_id)?, lease: LeaseId::new("lease_id", lease_id)? })
    }
}

/// What the worker reports when it ends a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Outcome {
    /// COMPLETE_TASK.
    Completed,
    /// FAIL_TASK.
    Failed,
}

/// A validated request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Submit a task.
    Submit {
        /// Its payload.
        payload: Payload,
    },
    /// Submit a task once: a retry with the same id (same owner, within the window) is
    /// answered with the task the first attempt created.
    SubmitOnce {
        /// The client's id of this submission.
        submission: SubmissionId,
        /// Its payload.
        payload: Payload,
    },
    /// A worker pulls a task.
    Lease {
        /// The worker.
        worker: WorkerName,
    },
    /// A worker extends its lease.
    Heartbeat(LeaseRef),
    /// A worker ends its task.
    Finish {
        /// The lease it holds.
        lease: LeaseRef,
        /// Completed or failed.
        outcome: Outcome,
    },
    /// One task.
    QueryTask(TaskId),
    /// Tasks counted by state.
    QueryCounts,
    /// Workers seen.
    QueryWorkers,
    /// Valid leases.
    QueryLeases,
}

impl Request {
    /// Validates a decoded wire request.
    pub fn validate(request: wire::Request, limits: &Limits) -> Result<Request, LlError> {
        Ok(match request {
            wire::Request::Hello(_) => return Err(LlError::HelloAgain),
            wire::Request::Stats => return Err(LlError::ShellQuery),
            wire::Request::Submit(m) => Request::Submit { payload: Payload::new(m.payload, limits)? },
            wire::Request::SubmitOnce(m) => Request::SubmitOnce {
                submission: SubmissionId::new(m.submission)?,
                payload: Payload::new(m.payload, limits)?,
            },
            wire::Request::Lease(m) => Request::Lease { worker: WorkerName::parse(&m.worker)? },
            wire::Request::Heartbeat(m) => Request::Heartbeat(LeaseRef::from_wire(m.task_id, m.lease_id)?),
            wire::Request::Complete(m) => Request::Finish {
                lease: LeaseRef::from_wire(m.task_id, m.lease_id)?,
                outcome: Outcome::Completed,
            },
            wire::Request::Fail(m) => Request::Finish {
                lease: LeaseRef::from_wire(m.task_id, m.lease_id)?,
                outcome: Outcome::Failed,
            },
            wire::Request::Task(m) => Request::QueryTask(TaskId::new("task_id", m.task_id)?),
            wire::Request::Counts => Request::QueryCounts,
            wire::Request::Workers => Request::QueryWorkers,
            wire::Request::Leases => Request::QueryLeases,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: each structural rule is enforced and names its field; valid input passes.
    #[test]
    fn validation_names_the_field() {
        let limits = Limits { payload_bytes_max: 4 };
        let ok = Request::validate(wire::Request::Submit(wire::SubmitTask { payload: vec![1; 4] }), &limits);
        assert!(matches!(ok, Ok(Request::Submit { payload }) if payload.len() == 4));
        let err = Request::validate(wire::Request::Submit(wire::SubmitTask { payload: vec![1; 5] }), &limits)
            .expect_err("too large");
        assert_eq!(err, LlError::PayloadTooLarge { bytes: 5, max: 4 });
        assert_eq!(err.code(), wire::ERR_PAYLOAD_TOO_LARGE);
        let hb = |task_id, lease_id| wire::Request::Heartbeat(wire::Heartbeat { task_id, lease_id });
        assert_eq!(Request::validate(hb(0, 1), &limits), Err(LlError::ZeroId { field: "task_id" }));
        assert_eq!(Request::validate(hb(1, 0), &limits), Err(LlError::ZeroId { field: "lease_id" }));
        let lease = Request::validate(hb(1, 2), &limits).expect("valid");
        assert_eq!(
            lease,
            Request::Heartbeat(LeaseRef {
                task: TaskId::new("t", 1).expect("1"),
                lease: LeaseId::new("l", 2).expect("2")
            })
        );
        let worker = |name: &str| wire::Request::Lease(wire::LeaseRequest { worker: name.into() });
        assert!(Request::validate(worker("node-1.example:7@x_y"), &limits).is_ok());
        for bad in ["", "has space", "tab\t", "ü", &"w".repeat(65)] {
            let err = Request::validate(worker(bad), &limits).expect_err(bad);
            assert!(matches!(err, LlError::WorkerName { .. }), "{bad:?}");
            assert_eq!(err.code(), wire::ERR_BAD_REQUEST);
        }
        assert!(UserName::parse("nobody").is_ok());
        for bad in ["", "a b", "tab\t", "ü", &"u".repeat(257)] {
            assert!(matches!(UserName::parse(bad), Err(LlError::UserName { .. })), "{bad:?}");
        }
        let once = |high, low, bytes| {
            wire::Request::SubmitOnce(wire::SubmitTaskOnce {
                submission: wire::SubmissionId { high, low },
                payload: vec![1; bytes],
            })
        };
        let err = Request::validate(once(0, 0, 1), &limits).expect_err("zero id");
        assert_eq!(err, LlError::ZeroSubmission);
        assert_eq!(err.code(), wire::ERR_BAD_REQUEST);
        assert!(err.to_string().contains("submission id must not be 0"), "{err}");
        let err = Request::validate(once(0, 1, 5), &limits).expect_err("too large");
        assert_eq!(err, LlError::PayloadTooLarge { bytes: 5, max: 4 });
        for (high, low) in [(0, 1), (1, 0), (u64::MAX, u64::MAX)] {
            let Ok(Request::SubmitOnce { submission, .. }) = Request::validate(once(high, low, 4), &limits)
            else {
                panic!("({high}, {low}) is a valid id");
            };
            assert_eq!(submission.to_wire(), wire::SubmissionId { high, low });
        }
        let hello = wire::Request::Hello(wire::Hello { credential: vec![] });
        assert_eq!(Request::validate(hello, &limits), Err(LlError::HelloAgain));
        let fail = wire::Request::Fail(wire::TaskOutcome { task_id: 3, lease_id: 4 });
        assert!(matches!(
            Request::validate(fail, &limits),
            Ok(Request::Finish { outcome: Outcome::Failed, .. })
        ));
    }
}
