//! lava-batch-ll: how a batch message maps to internal structures.
//!
//! The logic-adapter layer (docs/protocols/README.md, "The layers"):
//! it turns `lava-batch-wire` structures into validated domain values
//! (`JobRef`, `HostName`, `QueueName`, `UserName`, [`JobSpec`], [`JobStatus`])
//! and parses the little languages a submission carries: job arrays in the job
//! name ([`ArraySpec`]) and dependency expressions ([`DependExpr`]). It rejects what is structurally wrong with an error that names the field.
//!
//! It never mutates job state, never logs, never performs I/O and never makes a
//! lifecycle decision: everything here is a pure function of its input.
//!
//! The logic crates (`lava-mbd`, `lava-sbd`) take from it what it validates:
//! submissions ([`SubmitSpec`], [`JobSpec`]), job references, names, statuses
//! and the parsed `-R`, array and `-w` languages. They also use
//! `lava-batch-wire`'s structures directly: the mbatchd-sbatchd messages they
//! receive other than NEW_JOB and the ACKs (NEW_JOB_REPLY, EXECUTE, FINISH and
//! JOB_SIGNAL_REPLY reach `lava-mbd`, JOB_SIGNAL reaches `lava-sbd`, each
//! checking with [`job_ref`] the job reference it looks up), the commands'
//! queries and signal, control and admin requests (mbatchd's shell checks
//! their fields with this crate's primitives first), every message and reply
//! they build, and plain wire values kept in their events and records (request
//! ids, signal actions and outcomes, resource usage, environment variables).

#![deny(missing_docs)]

use std::fmt;

use lava_batch_wire as wire;

pub mod acct;
mod array;
mod control;
mod depend;
pub mod lsf_line;
mod names;
pub mod resreq;
mod serde_impls;
mod spec;
mod status;

pub use array::{ARRAY_RANGES_MAX, ArrayError, ArraySpec, IndexRange, running_max_of};
pub use control::{check_admin_control, check_history_query, check_job_control};
pub use depend::{
    CmpOp, CondKind, Condition, DEPEND_CONDITIONS_MAX, DEPEND_NESTING_MAX, DependExpr, DependSyntaxError,
    JobSelector,
};
pub use names::{HostName, JobRef, QueueName, UserName};
pub use resreq::{BAD_RESREQ_MESSAGE, HostFacts, ResReq, ResReqError};
pub use serde_impls::SUBMISSION_FORMAT_3;
pub use spec::{JobSpec, SubmitSpec};
pub use status::JobStatus;

/// Longest name (host, queue, user, job name, project) accepted, in bytes.
pub const NAME_BYTES_MAX: usize = 255;
/// Longest path accepted, in bytes (Linux PATH_MAX).
pub const PATH_BYTES_MAX: usize = 4096;
/// Longest command or job script accepted, in bytes.
pub const COMMAND_BYTES_MAX: usize = 512 * 1024;
/// Most environment variables a job may carry.
pub const ENV_VARS_MAX: usize = 4096;
/// Most slots one job may ask for.
pub const SLOTS_MAX: u32 = 65_536;

/// A structural error in a message, naming the field and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct LlError {
    /// Dotted path of the offending field, e.g. `spec.queue`.
    pub field: String,
    /// What was wrong with it.
    pub problem: String,
}

impl LlError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, problem: impl fmt::Display) -> LlError {
        LlError { field: field.into(), problem: problem.to_string() }
    }
}

/// Checks a free-text field: bounded, no NUL byte (it reaches C strings and files).
pub fn check_text(field: &str, value: &str, bytes_max: usize) -> Result<(), LlError> {
    text_problem(value, bytes_max).map_err(|problem| LlError::new(field, problem))
}

/// What [`check_text`] finds wrong with `value`, without naming a field: callers that
/// check many values (every variable of an environment) build the field's name only for
/// a value that fails, since formatting a name per value costs more than the check.
pub(crate) fn text_problem(value: &str, bytes_max: usize) -> Result<(), String> {
    if value.len() > bytes_max {
        return Err(format!("{} bytes, at most {bytes_max} allowed", value.len()));
    }
    if value.contains('\0') {
        return Err("contains a NUL byte".to_owned());
    }
    Ok(())
}

/// Converts a wire job reference.
pub fn job_ref(field: &str, job: wire::WireJobRef) -> Result<JobRef, LlError> {
    JobRef::new(job.job_id, job.array_index).ok_or_else(|| LlError::new(field, "job id 0 is not a job"))
}
