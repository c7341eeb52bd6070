//! The records of `lsb.events`: every durable change of mbatchd's state.
//!
//! An [`Event`] is both what [`crate::Mbd::step`] decided and what replay
//! feeds back: the logic changes durable state only by applying events, so
//! the log is, by construction, a complete account of it. Names follow LSF's
//! event types (JOB_NEW, JOB_START, JOB_START_ACCEPT, JOB_EXECUTE, JOB_SIGNAL,
//! JOB_SIGACT, JOB_STATUS, JOB_CLEAN, MBD_START; and, for the control commands
//! of `control`, HOST_CTRL, QUEUE_CTRL, JOB_MODIFY2, JOB_SWITCH, JOB_MOVE,
//! JOB_REQUEUE, JOB_FORCE of `brun` and LavaCore's JOB_FORCE_EXIT of `bkill -r`;
//! docs/protocols/batch.md, "The event log and replay"). All times are
//! milliseconds since the epoch as the shell supplied them; the shell encodes the records
//! with XDR into `lava-eventlog`, so no field is a map or an untagged value.

use lava_batch_ll::{HostName, JobRef, JobStatus, QueueName, SubmitSpec, UserName};
use lava_batch_wire as wire;
use serde::{Deserialize, Serialize};

/// One record of `lsb.events`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// mbatchd started (after replay); changes no job.
    MbdStart(MbdStartRecord),
    /// A job was submitted.
    JobNew(Box<JobNewRecord>),
    /// The scheduler dispatched a job: PEND → RUN on its execution hosts.
    JobStart(JobStartRecord),
    /// sbatchd's NEW_JOB_REPLY (Started) is committed: the job has a pid.
    JobStartAccept(JobStartAcceptRecord),
    /// sbatchd's EXECUTE metadata is committed; never a state change.
    JobExecute(JobExecuteRecord),
    /// A signal was requested: the intent, before any result.
    JobSignal(JobSignalRecord),
    /// sbatchd answered a signal intent; the intent is settled.
    JobSigact(JobSigactRecord),
    /// The job's status changed; the terminal statuses carry the finish.
    JobStatus(JobStatusRecord),
    /// A finished job was dropped from memory after `CLEAN_PERIOD`.
    JobClean(JobCleanRecord),
    /// `badmin hclose` / `hopen`: a host closed to new jobs, or opened again.
    HostCtrl(HostCtrlRecord),
    /// `badmin qclose` / `qopen` / `qact` / `qinact`.
    QueueCtrl(QueueCtrlRecord),
    /// `bmod`: a pending job's submission options changed.
    JobModify(Box<JobModifyRecord>),
    /// `bswitch`: a job moved to another queue.
    JobSwitch(JobSwitchRecord),
    /// `btop` / `bbot`: a pending job's place in its queue changed.
    JobMove(JobMoveRecord),
    /// `brequeue`: a finished job, or a started one its requeue kill ended,
    /// goes back to PEND (or PSUSP).
    JobRequeue(Box<JobRequeueRecord>),
    /// `brun`: an administrator started a pending job on the hosts named
    /// (PEND → RUN, as JOB_START does, whatever the limits say).
    JobForce(JobForceRecord),
    /// `bkill -r`: an unfinished job is EXIT at once, without waiting for its
    /// host (LavaCore's record; LSF logs a JOB_SIGNAL and a JOB_STATUS).
    JobForceExit(JobForceExitRecord),
}

impl Event {
    /// The job the event is about, `None` for [`Event::MbdStart`].
    pub fn job(&self) -> Option<JobRef> {
        match self {
            Event::MbdStart(_) => None,
            Event::JobNew(r) => Some(r.job),
            Event::JobStart(r) => Some(r.job),
            Event::JobStartAccept(r) => Some(r.job),
            Event::JobExecute(r) => Some(r.job),
            Event::JobSignal(r) => Some(r.job),
            Event::JobSigact(r) => Some(r.job),
            Event::JobStatus(r) => Some(r.job),
            Event::JobClean(r) => Some(r.job),
            Event::HostCtrl(_) | Event::QueueCtrl(_) => None,
            Event::JobModify(r) => Some(r.job),
            Event::JobSwitch(r) => Some(r.job),
            Event::JobMove(r) => Some(r.job),
            Event::JobRequeue(r) => Some(r.job),
            Event::JobForce(r) => Some(r.job),
            Event::JobForceExit(r) => Some(r.job),
        }
    }

    /// The job the event finishes and its final status (DONE or EXIT), if it
    /// finishes one: a JOB_STATUS with its finish, or a JOB_FORCE_EXIT.
    pub fn finishes(&self) -> Option<(JobRef, JobStatus)> {
        match self {
            Event::JobStatus(r) if r.finish.is_some() => Some((r.job, r.status)),
            Event::JobForceExit(r) => Some((r.job, JobStatus::Exit)),
            _ => None,
        }
    }

    /// LSF's name of the event type, as `bhist` and logs print it.
    pub fn name(&self) -> &'static str {
        match self {
            Event::MbdStart(_) => "MBD_START",
            Event::JobNew(_) => "JOB_NEW",
            Event::JobStart(_) => "JOB_START",
            Event::JobStartAccept(_) => "JOB_START_ACCEPT",
            Event::JobExecute(_) => "JOB_EXECUTE",
            Event::JobSignal(_) => "JOB_SIGNAL",
            Event::JobSigact(_) => "JOB_SIGACT",
            Event::JobStatus(_) => "JOB_STATUS",
            Event::JobClean(_) => "JOB_CLEAN",
            Event::HostCtrl(_) => "HOST_CTRL",
            Event::QueueCtrl(_) => "QUEUE_CTRL",
            Event::JobModify(_) => "JOB_MODIFY2",
            Event::JobSwitch(_) => "JOB_SWITCH",
            Event::JobMove(_) => "JOB_MOVE",
            Event::JobRequeue(_) => "JOB_REQUEUE",
            Event::JobForce(_) => "JOB_FORCE",
            Event::JobForceExit(_) => "JOB_FORCE_EXIT",
        }
    }
}

/// MBD_START.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MbdStartRecord {
    /// When mbatchd opened for business.
    pub time_ms: u64,
    /// The host it runs on.
    pub master_host: HostName,
    /// The cluster's name.
    pub cluster_name: String,
}

/// JOB_NEW: everything of the submission, as vouched for and resolved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobNewRecord {
    /// The job id mbatchd assigned.
    pub job: JobRef,
    /// The command's request id; a retry with it gets this job back.
    pub request_id: wire::RequestId,
    /// The submitting user's uid, as vouched for by the credential.
    pub user_id: u32,
    /// The submitting user's primary gid, as vouched for.
    pub group_id: u32,
    /// The submitting user's name, as vouched for.
    pub user: UserName,
    /// The host the job was submitted from, as vouched for.
    pub from_host: HostName,
    /// The queue, resolved (the default queue when `-q` was not given).
    pub queue: QueueName,
    /// When mbatchd accepted the submission.
    pub submit_time_ms: u64,
    /// `-H`: the job starts held (PSUSP).
    pub hold: bool,
    /// The validated submission.
    pub spec: SubmitSpec,
}

/// JOB_START: the dispatch decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobStartRecord {
    /// The job.
    pub job: JobRef,
    /// Execution hosts, one entry per slot (LSF's convention); the first runs the job.
    pub exec_hosts: Vec<HostName>,
    /// Dispatch time.
    pub time_ms: u64,
}

/// JOB_START_ACCEPT: NEW_JOB_REPLY (Started) committed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobStartAcceptRecord {
    /// The job.
    pub job: JobRef,
    /// The job's pid.
    pub pid: i32,
    /// The job's process group.
    pub pgid: i32,
    /// When mbatchd committed the reply.
    pub time_ms: u64,
}

/// The execution metadata of a job, from BATCH_JOB_EXECUTE.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecInfo {
    /// Pid of the job's process.
    pub pid: i32,
    /// Process group of the job.
    pub pgid: i32,
    /// Uid the job runs as.
    pub exec_uid: u32,
    /// User the job runs as.
    pub exec_user: String,
    /// Home directory of that user.
    pub exec_home: String,
    /// Absolute working directory.
    pub exec_cwd: String,
    /// When the job's process started, as sbatchd reported it.
    pub exec_time_ms: u64,
}

impl ExecInfo {
    /// Whether `other` describes the same execution; the timestamp is not
    /// part of the identity, so a resent EXECUTE with a fresh time logs nothing.
    pub fn same_execution(&self, other: &ExecInfo) -> bool {
        (self.pid, self.pgid, self.exec_uid, &self.exec_user, &self.exec_home, &self.exec_cwd)
            == (other.pid, other.pgid, other.exec_uid, &other.exec_user, &other.exec_home, &other.exec_cwd)
    }
}

/// JOB_EXECUTE: execution metadata committed; metadata only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobExecuteRecord {
    /// The job.
    pub job: JobRef,
    /// The metadata.
    pub exec: ExecInfo,
    /// When mbatchd committed it.
    pub time_ms: u64,
}

/// JOB_SIGNAL: a signal intent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSignalRecord {
    /// The job.
    pub job: JobRef,
    /// The job's signal sequence number, one more than the previous intent's.
    pub signal_seq: u32,
    /// What was asked.
    pub action: wire::SignalAction,
    /// Who asked (uid, vouched).
    pub requester_uid: u32,
    /// Who asked (name, vouched).
    pub requester: UserName,
    /// The request's id, so a retried request signals no job twice.
    pub request_id: Option<wire::RequestId>,
    /// `brequeue` of a started job (LSF's SIG_KILL_REQUEUE): the kill's run,
    /// once its FINISH arrives, ends in JOB_REQUEUE instead of DONE or EXIT;
    /// `Some(true)` with `-H` (the job is then held). `None` for any other
    /// signal; a later kill without it cancels the requeue.
    pub requeue_hold: Option<bool>,
    /// When it was asked.
    pub time_ms: u64,
}

/// JOB_SIGACT: sbatchd's answer to a signal intent; settles it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSigactRecord {
    /// The job.
    pub job: JobRef,
    /// The intent answered.
    pub signal_seq: u32,
    /// What sbatchd did.
    pub outcome: wire::SignalOutcome,
    /// When mbatchd committed the answer.
    pub time_ms: u64,
}

/// How a job ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishRecord {
    /// Raw wait status (a signal number in the low bits for a job killed while pending).
    pub wait_status: i32,
    /// One of `wire::FINISH_*`.
    pub finish_reason: u32,
    /// When the job ended (sbatchd's clock, or mbatchd's for a pending job).
    pub end_time_ms: u64,
    /// Resource usage.
    pub rusage: wire::ResourceUsage,
    /// The pid that ended, 0 for a job that never started.
    pub pid: i32,
}

/// JOB_STATUS: the resulting state of a transition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobStatusRecord {
    /// The job.
    pub job: JobRef,
    /// The new status.
    pub status: JobStatus,
    /// Why, for `bjobs -l`; empty for the status's usual reason.
    pub reason: String,
    /// When mbatchd decided it.
    pub time_ms: u64,
    /// Present exactly for DONE and EXIT.
    pub finish: Option<FinishRecord>,
}

/// JOB_CLEAN.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobCleanRecord {
    /// The job.
    pub job: JobRef,
    /// When it was dropped.
    pub time_ms: u64,
}

/// HOST_CTRL: an administrator closed or opened a host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCtrlRecord {
    /// The host.
    pub host: HostName,
    /// `hopen` (true) or `hclose` (false).
    pub open: bool,
    /// Who asked.
    pub requester: UserName,
    /// When.
    pub time_ms: u64,
}

/// What a QUEUE_CTRL did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueCtrlAction {
    /// `qopen`: the queue accepts submissions again.
    Open,
    /// `qclose`: the queue refuses submissions.
    Close,
    /// `qact`: the queue's jobs are dispatched again.
    Activate,
    /// `qinact`: the queue's jobs are not dispatched.
    Inactivate,
}

/// QUEUE_CTRL: an administrator opened, closed, activated or inactivated a queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueCtrlRecord {
    /// The queue.
    pub queue: QueueName,
    /// What was done.
    pub action: QueueCtrlAction,
    /// Who asked.
    pub requester: UserName,
    /// When.
    pub time_ms: u64,
}

/// The submission options `bmod` changed; `None` keeps a field. Removal (`-Wn`)
/// is the empty or zero value, as on the wire.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobChanges {
    /// `-q`: the queue, resolved.
    pub queue: Option<QueueName>,
    /// `-J`.
    pub job_name: Option<String>,
    /// `-n` (0: one slot).
    pub n_slots: Option<u32>,
    /// `-W`, seconds.
    pub run_limit_s: Option<u64>,
    /// `-M`, KiB.
    pub mem_limit_kb: Option<u64>,
    /// `-R`.
    pub res_req: Option<String>,
}

/// JOB_MODIFY2 (LSF's name): a pending job's options changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobModifyRecord {
    /// The job.
    pub job: JobRef,
    /// The changes.
    pub changes: JobChanges,
    /// Who asked.
    pub requester: UserName,
    /// When.
    pub time_ms: u64,
}

/// JOB_SWITCH: a job moved to another queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSwitchRecord {
    /// The job.
    pub job: JobRef,
    /// The new queue.
    pub queue: QueueName,
    /// Who asked.
    pub requester: UserName,
    /// When.
    pub time_ms: u64,
}

/// JOB_MOVE: a pending job's dispatch order key changed (`btop`, `bbot`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobMoveRecord {
    /// The job.
    pub job: JobRef,
    /// The new order key (see `control`): pending jobs of a queue are
    /// dispatched by (order key, id).
    pub order_key: i64,
    /// `btop` (true) or `bbot`.
    pub to_top: bool,
    /// The position asked for, counted from the top or the bottom.
    pub position: u32,
    /// Who asked.
    pub requester: UserName,
    /// When.
    pub time_ms: u64,
}

/// JOB_REQUEUE: a job is back in PEND (PSUSP with `brequeue -H`) at the end of
/// its queue, to be dispatched again under the same id: a DONE or EXIT job that
/// `brequeue` named, a started job whose `brequeue` kill (JOB_SIGNAL with
/// `requeue_hold`) ended its run, or a pending job (`brequeue -p`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRequeueRecord {
    /// The job.
    pub job: JobRef,
    /// `-H`: held (PSUSP) instead of PEND.
    pub hold: bool,
    /// The job's new dispatch order key (see `control`): after every job of its
    /// queue at the requeue, as LSF dispatches a requeued job by its requeue time.
    pub order_key: i64,
    /// What was requeued.
    pub requeued: Requeued,
    /// The `brequeue` request that asked (none for the end of a run a
    /// `brequeue -r` kill asked to requeue: that request is the kill's): kept on
    /// the job, so that the command's retry of a request whose answer was lost
    /// requeues nothing twice.
    pub request_id: Option<wire::RequestId>,
    /// When.
    pub time_ms: u64,
}

/// What a JOB_REQUEUE put back in the queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Requeued {
    /// A finished job. It no longer holds its environment, so the record
    /// carries it (mbatchd's shell read it back from disk: the job's JOB_NEW,
    /// or the snapshot's copy once JOB_NEW was pruned); replay restores the
    /// job without reading anything else.
    Finished {
        /// The submission's environment.
        env: Vec<wire::EnvVar>,
        /// Who asked.
        requester: UserName,
    },
    /// A started job whose requeue kill ended its run (sbatchd's FINISH): how
    /// that run ended. The job kept its environment.
    Killed(FinishRecord),
    /// A pending (PEND or PSUSP) job that `brequeue -p` sent to the end of its queue.
    Pending {
        /// Who asked.
        requester: UserName,
    },
}

/// JOB_FORCE (LSF's name): `brun` started a pending job on the hosts an
/// administrator named. Applied as a JOB_START is (a new dispatch number, RUN
/// on `exec_hosts`); the queue, user and host limits were not asked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobForceRecord {
    /// The job.
    pub job: JobRef,
    /// Execution hosts, one entry per slot; the first runs the job.
    pub exec_hosts: Vec<HostName>,
    /// The `brun` request's id, kept on the job so that a retry whose first
    /// answer was lost is answered again, not refused as already started.
    pub request_id: wire::RequestId,
    /// Who asked.
    pub requester: UserName,
    /// When.
    pub time_ms: u64,
}

/// JOB_FORCE_EXIT: `bkill -r` ended an unfinished job at once. One record does
/// what LSF logs in two (the kill's JOB_SIGNAL, the EXIT's JOB_STATUS), so no
/// crash can keep the one without the other. The kill itself is sent to the
/// execution host as `bkill`'s is, best effort: the job is finished whatever
/// the host says later (`pipeline`, `control`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobForceExitRecord {
    /// The job.
    pub job: JobRef,
    /// The kill's signal sequence number, one more than the previous intent's.
    pub signal_seq: u32,
    /// Who asked (uid, vouched).
    pub requester_uid: u32,
    /// Who asked (name, vouched).
    pub requester: UserName,
    /// The request's id, so that a retry answers again and ends nothing twice.
    pub request_id: wire::RequestId,
    /// The finish: `wire::FINISH_FORCE_OWNER` or `FINISH_FORCE_ADMIN`, the
    /// run's pid if it had one, no resource usage.
    pub finish: FinishRecord,
    /// When.
    pub time_ms: u64,
}
