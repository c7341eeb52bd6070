//! The WAL records: every durable change of the coordinator's state. See the
//! crate doc for what `TaskCancelled` and `LeaseExpired` mean. Times are ms
//! since the epoch as the shell supplied them; the shell encodes the records
//! with XDR, so variants are only ever appended, never reordered, and fields
//! never change. (The last change of fields, adding the users of `owner`,
//! `holder` and `by`, was made before any WAL was kept: 2026-11-26.)

use lava_coord_ll::{Caller, LeaseId, Outcome, Payload, SubmissionId, TaskId, WorkerName};
use serde::{Deserialize, Serialize};

/// One WAL record.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Event {
    /// A task was submitted; it is WAITING.
    TaskCreated {
        /// Its id (the previous task's plus one).
        task: TaskId,
        /// Its payload.
        payload: Payload,
        /// When it was accepted.
        created_at_ms: u64,
        /// Who submitted it.
        owner: Caller,
    },
    /// A WAITING task was leased to a worker; it is LEASED.
    LeaseGranted {
        /// The task.
        task: TaskId,
        /// The new lease (the previous lease id plus one).
        lease: LeaseId,
        /// The worker.
        worker: WorkerName,
        /// The user the worker runs as: only they (or an administrator) may
        /// heartbeat, complete or fail under this lease.
        holder: Caller,
        /// Absolute expiry.
        expires_at_ms: u64,
    },
    /// The task's valid lease got a later expiry.
    LeaseExtended {
        /// The task.
        task: TaskId,
        /// Its current lease.
        lease: LeaseId,
        /// The new absolute expiry.
        expires_at_ms: u64,
    },
    /// The holder of the valid lease completed the task (terminal).
    TaskCompleted {
        /// The task.
        task: TaskId,
        /// The lease it was completed under.
        lease: LeaseId,
    },
    /// The holder of the valid lease failed the task (terminal).
    TaskFailed {
        /// The task.
        task: TaskId,
        /// The lease it was failed under.
        lease: LeaseId,
    },
    /// A completion or failure under a lease that is not the task's valid one
    /// was refused; the task's state is unchanged.
    TaskCancelled {
        /// The task.
        task: TaskId,
        /// The lease the worker presented.
        lease: LeaseId,
        /// What it tried to report.
        outcome: Outcome,
        /// Who tried.
        by: Caller,
    },
    /// The valid lease reached its expiry; the task is WAITING again.
    LeaseExpired {
        /// The task.
        task: TaskId,
        /// The lease revoked.
        lease: LeaseId,
        /// The expiry that passed (the lease's recorded expiry).
        expires_at_ms: u64,
    },
    /// A task was submitted under a submission id (SUBMIT_TASK_ONCE); it is WAITING, and
    /// the pair (owner uid, submission id) enters the submission window. Added
    /// 2026-11-28, after `TaskCreated`'s arm, so earlier WALs replay unchanged.
    TaskCreatedOnce {
        /// Its id (the previous task's plus one).
        task: TaskId,
        /// Its payload.
        payload: Payload,
        /// When it was accepted.
        created_at_ms: u64,
        /// Who submitted it.
        owner: Caller,
        /// The client's id of the submission.
        submission: SubmissionId,
    },
}

impl Event {
    /// The task the event is about.
    pub fn task(&self) -> TaskId {
        match self {
            Event::TaskCreated { task, .. }
            | Event::LeaseGranted { task, .. }
            | Event::LeaseExtended { task, .. }
            | Event::TaskCompleted { task, .. }
            | Event::TaskFailed { task, .. }
            | Event::TaskCancelled { task, .. }
            | Event::LeaseExpired { task, .. }
            | Event::TaskCreatedOnce { task, .. } => *task,
        }
    }

    /// The record's name, as logs print it.
    pub fn name(&self) -> &'static str {
        match self {
            Event::TaskCreated { .. } => "TaskCreated",
            Event::LeaseGranted { .. } => "LeaseGranted",
            Event::LeaseExtended { .. } => "LeaseExtended",
            Event::TaskCompleted { .. } => "TaskCompleted",
            Event::TaskFailed { .. } => "TaskFailed",
            Event::TaskCancelled { .. } => "TaskCancelled",
            Event::LeaseExpired { .. } => "LeaseExpired",
            Event::TaskCreatedOnce { .. } => "TaskCreatedOnce",
        }
    }
}
