//! One job's durable record and the transitions events make on it.
//!
//! [`Job::apply`] is the only code that changes a job. It checks every
//! event against the job first (an event that does not fit is an error naming
//! why, and the job is left untouched), so that replay of a damaged or
//! foreign log stops instead of building a state no live run could reach
//! (replay lets through, unapplied, only the late copies and duplicated
//! stages the protocol tells it to ignore: `replay`).
//! The module also knows how a job is shown (`bjobs`) and what a signal
//! action means for it.

use std::collections::BTreeMap;
use std::sync::Arc;

use lava_batch_ll::acct::{self, AcctRecord, AcctRusage};
use lava_batch_ll::{DependExpr, HostName, JobRef, JobStatus, QueueName, SubmitSpec, UserName};
use lava_batch_wire as wire;
use serde::{Deserialize, Serialize};

use crate::event::{
    Event, ExecInfo, FinishRecord, JobForceExitRecord, JobModifyRecord, JobNewRecord, JobRequeueRecord,
    JobSignalRecord, JobStartRecord, JobStatusRecord, Requeued,
};

/// LSF's reason for a pending job nothing else holds back.
pub const REASON_NEW_JOB: &str = "New job is waiting for scheduling";
/// LSF's reason for a PSUSP job (`bsub -H`, `bstop` while pending).
pub const REASON_USER_STOP_PENDING: &str = "The job was suspended by the user while pending";
/// LSF's reason for a job `brequeue` put back in PEND.
pub const REASON_REQUEUED: &str = "Job has been requeued";
/// LSF's reason for a USUSP job.
pub const REASON_USER_STOP: &str = "The job was suspended by user";
/// The reason of a job whose queue is no longer configured.
pub const REASON_NO_QUEUE: &str = "The queue of the job is no longer configured";
/// LSF's reason for a job back in PEND because a pre-execution command failed
/// (`PEND_JOB_PRE_EXEC`). Replay counts the JOB_STATUS records with it, as LSF does.
pub const REASON_PRE_EXEC: &str = "The job's pre-exec command exited with non-zero status";
/// The reason of a job held (PSUSP) because its pre-execution commands failed
/// `LOCAL_MAX_PREEXEC_RETRY` times (`LOCAL_MAX_PREEXEC_RETRY_ACTION=SUSPEND`); counted too.
pub const REASON_PRE_EXEC_LIMIT: &str =
    "The job's pre-exec command exited with non-zero status; the pre-exec retry limit is reached";
/// LSF's termination reason of a job sbatchd killed at its run limit (`bsub -W`).
pub const TERM_RUNLIMIT: &str = acct::TERM_RUNLIMIT.text;
/// LSF's termination reason of a job sbatchd killed over its memory limit (`bsub -M`).
pub const TERM_MEMLIMIT: &str = acct::TERM_MEMLIMIT.text;

/// The Linux signal numbers the logic gives a meaning to.
const SIGINT: u32 = 2;
const SIGKILL: u32 = 9;
const SIGTERM: u32 = 15;
const SIGCONT: u32 = 18;
const SIGSTOP: u32 = 19;
const SIGTSTP: u32 = 20;
/// Highest signal number accepted (Linux `SIGRTMAX`).
pub const SIGNAL_NUMBER_MAX: u32 = 64;

/// What a signal action does to a job's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalKind {
    /// Suspends: PEND → PSUSP, RUN → USUSP.
    Suspend,
    /// Resumes: PSUSP → PEND, USUSP → RUN.
    Resume,
    /// Ends the job: EXIT at once while pending, through FINISH once started.
    Terminate,
    /// Any other signal: delivered to a started job, no state change.
    Other,
}

impl SignalKind {
    /// The kind of `action`; `None` for a signal number outside 1..=64.
    pub fn of(action: wire::SignalAction) -> Option<SignalKind> {
        Some(match action {
            wire::SignalAction::Stop => SignalKind::Suspend,
            wire::SignalAction::Continue => SignalKind::Resume,
            wire::SignalAction::Terminate => SignalKind::Terminate,
            wire::SignalAction::Signal(SIGINT | SIGKILL | SIGTERM) => SignalKind::Terminate,
            wire::SignalAction::Signal(SIGSTOP | SIGTSTP) => SignalKind::Suspend,
            wire::SignalAction::Signal(SIGCONT) => SignalKind::Resume,
            wire::SignalAction::Signal(n) if (1..=SIGNAL_NUMBER_MAX).contains(&n) => SignalKind::Other,
            wire::SignalAction::Signal(_) => return None,
        })
    }

    /// The signal number recorded as the wait status of a job killed while pending.
    pub fn kill_signal(action: wire::SignalAction) -> i32 {
        match action {
            wire::SignalAction::Signal(n) => i32::try_from(n).unwrap_or(0),
            _ => SIGKILL as i32,
        }
    }
}

/// A signal intent not yet answered by sbatchd.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingSignal {
    /// Its sequence number.
    pub signal_seq: u32,
    /// The action.
    pub action: wire::SignalAction,
}

/// The pid and process group sbatchd reported in NEW_JOB_REPLY.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIds {
    /// Pid.
    pub pid: i32,
    /// Process group.
    pub pgid: i32,
}

/// A job as mbatchd remembers it durably: a single job, or one element of an
/// array (`job.index() > 0`).
///
/// Its submission is kept in two shared parts: `spec` without the environment,
/// and `env`, the environment variables. The elements of an array share both
/// (one JOB_NEW makes them all), so a 10,000-element array holds one copy of
/// its submission, not 10,000; jobs submitted alike one after the other share them
/// too, and their names (`state::Shared`). The environment is kept only until the job
/// finishes: it is the largest part of a submission (`bsub` copies the user's
/// whole environment), NEW_JOB is the only thing that uses it, and a finished
/// job is never dispatched again. Dropping it in the transition to DONE or
/// EXIT, which live steps and replay both go through, keeps the two states
/// equal; JOB_NEW in the log still holds the whole submission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub(crate) job: JobRef,
    pub(crate) request_id: wire::RequestId,
    pub(crate) user_id: u32,
    pub(crate) group_id: u32,
    pub(crate) user: UserName,
    pub(crate) from_host: HostName,
    pub(crate) queue: QueueName,
    /// The submission without its environment; shared by an array's elements.
    #[serde(with = "shared")]
    pub(crate) spec: Arc<SubmitSpec>,
    /// The submission's environment until the job finishes; shared likewise.
    #[serde(with = "shared")]
    pub(crate) env: Arc<Vec<wire::EnvVar>>,
    /// `-w`, with each job it names resolved at submission (`depend`).
    pub(crate) dependency: Option<DependExpr<JobRef>>,
    /// Its submission number: the JOB_NEWs applied before its own, plus one (an
    /// array's elements share it). Job ids wrap at `MAX_JOBID` and reuse the ids of
    /// jobs no longer in memory, so "submitted before" is this number, never the id:
    /// arrival order, a retried `bkill 0`'s first selection, a dependency's target.
    pub(crate) submit_seq: u64,
    pub(crate) submit_time_ms: u64,
    pub(crate) status: JobStatus,
    /// The reason of the last JOB_STATUS, empty for the status's usual one.
    pub(crate) reason: String,
    /// Time of the last JOB_START or JOB_STATUS (finish time for a finished job).
    pub(crate) status_time_ms: u64,
    /// One entry per slot while started; kept after the finish for display.
    pub(crate) exec_hosts: Vec<HostName>,
    pub(crate) start_time_ms: Option<u64>,
    /// The dispatch number: JOB_START events applied so far (0 before the
    /// first), plus one for each run a `brequeue` kill ended (that run is over
    /// while the job waits to run again). NEW_JOB carries it, and a pipeline
    /// message naming a lower one comes from an earlier run (`pipeline`).
    pub(crate) dispatch_seq: u32,
    pub(crate) accepted: Option<ProcessIds>,
    pub(crate) exec: Option<Box<ExecInfo>>,
    /// The sequence number of the last signal intent.
    pub(crate) signal_seq: u32,
    /// Intents sent (or to be sent) to sbatchd and not yet answered, by sequence.
    pub(crate) pending_signals: Vec<PendingSignal>,
    /// Request ids of the signal requests that acted on this job.
    /// ... each with the last submission number given when it was first logged
    /// here, so a retried `bkill 0` selects no job submitted after its first attempt.
    pub(crate) signal_request_ids: BTreeMap<wire::RequestId, u64>,
    pub(crate) finish: Option<Box<FinishRecord>>,
    /// The dispatch order key `btop`/`bbot` set (JOB_MOVE); `None` for arrival
    /// order (see [`Job::dispatch_key`] and `control`).
    pub(crate) order_key: Option<i64>,
    /// How many times its pre-execution commands failed (the JOB_STATUS records with
    /// [`REASON_PRE_EXEC`] or [`REASON_PRE_EXEC_LIMIT`]): `LOCAL_MAX_PREEXEC_RETRY` bounds it.
    pub(crate) pre_exec_failures: u32,
    /// Set by a `brequeue` kill of this started job (JOB_SIGNAL `requeue_hold`):
    /// its run's FINISH requeues it, held when `Some(true)`. Not in the job's
    /// own encoding: only a started job has it, and a finished job's frozen
    /// encoding would grow by it (a snapshot lists it beside the jobs,
    /// `MbdSnapshot::requeue_kills`).
    #[serde(skip)]
    pub(crate) requeue_hold: Option<bool>,
    /// Set by the newest kill of this unfinished job (a JOB_SIGNAL that terminates) when
    /// someone other than its owner asked for it, root or an administrator: a run that
    /// ends killed then ends with LSF's TERM_ADMIN instead of TERM_OWNER
    /// ([`Job::kill_finish_reason`]). Not in the job's own encoding, as `requeue_hold`: a
    /// snapshot lists it beside the jobs (`MbdSnapshot::admin_kills`).
    #[serde(skip)]
    pub(crate) killed_by_admin: bool,
}

impl Job {
    /// A job as JOB_NEW creates it (the record moves in: replay has no other use
    /// for it), with the dependency `depend` resolved; for an array, the first
    /// element, which [`Job::element`] copies.
    /// What this job holds in memory while it is pending, for `LAVA_MAX_PEND_BYTES`: its
    /// submission's bytes (`SubmitSpec::submitted_bytes`, the environment included); an
    /// array element its share of the array's, since the elements share one copy.
    pub(crate) fn pending_bytes(&self) -> u64 {
        let env: usize = self.env.iter().map(|var| var.name.len() + 1 + var.value.len() + 1).sum();
        let bytes = self.spec.submitted_bytes() + env as u64;
        if self.job.index() == 0 {
            return bytes;
        }
        let elements = lava_batch_ll::ArraySpec::parse(&self.spec.request().job_name)
            .ok()
            .flatten()
            .map_or(1, |array| array.len().max(1));
        bytes.div_ceil(elements)
    }

    pub(crate) fn new(record: JobNewRecord, dependency: Option<DependExpr<JobRef>>, submit_seq: u64) -> Job {
        let mut spec = record.spec;
        let env = Arc::new(spec.take_environment());
        Job {
            job: record.job,
            request_id: record.request_id,
            user_id: record.user_id,
            group_id: record.group_id,
            user: record.user,
            from_host: record.from_host,
            queue: record.queue,
            spec: Arc::new(spec),
            env,
            dependency,
            submit_seq,
            submit_time_ms: record.submit_time_ms,
            status: if record.hold { JobStatus::Psusp } else { JobStatus::Pend },
            reason: String::new(),
            status_time_ms: record.submit_time_ms,
            exec_hosts: Vec::new(),
            start_time_ms: None,
            dispatch_seq: 0,
            accepted: None,
            exec: None,
            signal_seq: 0,
            pending_signals: Vec::new(),
            signal_request_ids: BTreeMap::new(),
            finish: None,
            order_key: None,
            pre_exec_failures: 0,
            requeue_hold: None,
            killed_by_admin: false,
        }
    }

    /// Element `job` of the same array: the same submission, shared.
    pub(crate) fn element(&self, job: JobRef) -> Job {
        Job { job, ..self.clone() }
    }

    /// Where the job stands among the pending jobs of its queue: dispatch (and
    /// `btop`/`bbot`) order them by (this key, id). Without a JOB_MOVE it is the
    /// arrival order (the submission number, not the id, which wraps), spaced so
    /// that moves can fit between neighbours.
    pub(crate) fn dispatch_key(&self) -> i64 {
        self.order_key.unwrap_or_else(|| crate::control::arrival_key(self.submit_seq))
    }

    /// Its submission number (see the field).
    pub fn submit_seq(&self) -> u64 {
        self.submit_seq
    }

    /// The job.
    pub fn job_ref(&self) -> JobRef {
        self.job
    }

    /// The request id of its submission.
    pub fn request_id(&self) -> wire::RequestId {
        self.request_id
    }

    /// Its status.
    pub fn status(&self) -> JobStatus {
        self.status
    }

    /// Its owner.
    pub fn user(&self) -> &UserName {
        &self.user
    }

    /// Its queue.
    pub fn queue(&self) -> &QueueName {
        &self.queue
    }

    /// Its execution hosts, one entry per slot (empty until dispatched).
    pub fn exec_hosts(&self) -> &[HostName] {
        &self.exec_hosts
    }

    /// Slots it holds while started.
    pub fn n_slots(&self) -> u32 {
        self.spec.n_slots()
    }

    /// Its current dispatch number (see the field: dispatches and requeue-ended runs).
    pub fn dispatch_seq(&self) -> u32 {
        self.dispatch_seq
    }

    /// The pid and process group of its committed start, if accepted.
    pub fn accepted(&self) -> Option<ProcessIds> {
        self.accepted
    }

    /// The execution metadata of its last committed EXECUTE.
    pub fn exec(&self) -> Option<&ExecInfo> {
        self.exec.as_deref()
    }

    /// Its unanswered signal intents, by sequence number.
    pub fn pending_signals(&self) -> &[PendingSignal] {
        &self.pending_signals
    }

    /// How it ended, once DONE or EXIT.
    pub fn finish(&self) -> Option<&FinishRecord> {
        self.finish.as_deref()
    }

    /// The host whose sbatchd runs the job, while it is started.
    pub(crate) fn run_host(&self) -> Option<&HostName> {
        if self.status.is_started() { self.exec_hosts.first() } else { None }
    }

    /// Whether the job is started on `host` (the sender of a pipeline message).
    pub(crate) fn is_started_on(&self, host: &HostName) -> bool {
        self.run_host() == Some(host)
    }

    /// Whether the job is, or is about to be, suspended: the newest
    /// unanswered STOP or CONT decides; without one, the status.
    pub(crate) fn suspend_target(&self) -> bool {
        let newest = self.pending_signals.iter().rev().find_map(|p| match SignalKind::of(p.action) {
            Some(SignalKind::Suspend) => Some(true),
            Some(SignalKind::Resume) => Some(false),
            _ => None,
        });
        newest.unwrap_or(matches!(self.status, JobStatus::Ususp | JobStatus::Ssusp | JobStatus::Psusp))
    }

    /// Whether a signal of `kind` would change anything: a STOP of a job not
    /// (about to be) stopped, a CONT of one that is, any other signal.
    pub(crate) fn signal_acts(&self, kind: SignalKind) -> bool {
        match kind {
            SignalKind::Suspend => !self.suspend_target(),
            SignalKind::Resume => self.suspend_target(),
            SignalKind::Terminate | SignalKind::Other => true,
        }
    }

    /// The submission as `bsub` sent it, without its environment.
    pub fn spec(&self) -> &SubmitSpec {
        &self.spec
    }

    /// The environment variables NEW_JOB carries; empty once the job finished.
    pub fn env(&self) -> &[wire::EnvVar] {
        &self.env
    }

    /// The name `bjobs` shows: `-J`, else the command cut to a name's length;
    /// for an array element `name[index]`, as LSF shows it.
    pub(crate) fn job_name(&self) -> String {
        let request = self.spec.request();
        if self.job.index() != 0 {
            let base = request.job_name.split('[').next().unwrap_or_default();
            return format!("{base}[{}]", self.job.index());
        }
        if request.job_name.is_empty() {
            truncate(&request.command, lava_batch_ll::NAME_BYTES_MAX)
        } else {
            request.job_name.clone()
        }
    }

    /// Applies one event about this job; on error the job is unchanged.
    /// `last_submission` is the last submission number given when the event was logged.
    pub(crate) fn apply(&mut self, event: &Event, last_submission: u64) -> Result<(), String> {
        match event {
            Event::JobStart(r) => self.apply_start(r),
            Event::JobStartAccept(r) => {
                if !self.status.is_started() {
                    return Err(format!("accept of a {} job", self.status));
                }
                if self.accepted.is_some() {
                    return Err("start accepted twice".to_owned());
                }
                self.accepted = Some(ProcessIds { pid: r.pid, pgid: r.pgid });
                Ok(())
            }
            Event::JobExecute(r) => {
                if !self.status.is_started() {
                    return Err(format!("execute of a {} job", self.status));
                }
                self.exec = Some(Box::new(r.exec.clone()));
                Ok(())
            }
            Event::JobSignal(r) => self.apply_signal(r, last_submission),
            Event::JobSigact(r) => {
                if !self.status.is_started() {
                    return Err(format!("signal answer for a {} job", self.status));
                }
                let before = self.pending_signals.len();
                self.pending_signals.retain(|p| p.signal_seq != r.signal_seq);
                if self.pending_signals.len() == before {
                    return Err(format!("signal {} is not pending", r.signal_seq));
                }
                Ok(())
            }
            Event::JobStatus(r) => self.apply_status(r),
            Event::JobModify(r) => self.apply_modify(r),
            Event::JobSwitch(r) => {
                if self.status.is_finished() {
                    return Err(format!("switch of a {} job", self.status));
                }
                if self.queue != r.queue {
                    self.queue = r.queue.clone();
                    self.order_key = None;
                }
                Ok(())
            }
            Event::JobMove(r) => {
                if !self.status.is_pending() {
                    return Err(format!("move of a {} job", self.status));
                }
                self.order_key = Some(r.order_key);
                Ok(())
            }
            Event::JobRequeue(r) => self.apply_requeue(r),
            Event::JobForce(r) => {
                self.apply_start(&JobStartRecord {
                    job: r.job,
                    exec_hosts: r.exec_hosts.clone(),
                    time_ms: r.time_ms,
                })?;
                self.signal_request_ids.entry(r.request_id).or_insert(self.submit_seq);
                Ok(())
            }
            Event::JobForceExit(r) => self.apply_force_exit(r),
            Event::MbdStart(_)
            | Event::JobNew(_)
            | Event::JobClean(_)
            | Event::HostCtrl(_)
            | Event::QueueCtrl(_) => Err(format!("{} is not a transition of a job", event.name())),
        }
    }

    /// JOB_MODIFY2: the changed submission must still be a valid one.
    fn apply_modify(&mut self, r: &JobModifyRecord) -> Result<(), String> {
        if !self.status.is_pending() {
            return Err(format!("modify of a {} job", self.status));
        }
        self.spec = std::sync::Arc::new(crate::control::modified_spec(self, &r.changes)?);
        if let Some(queue) = r.changes.queue.as_ref().filter(|queue| **queue != self.queue) {
            self.queue = queue.clone();
            self.order_key = None;
        }
        Ok(())
    }

    /// JOB_REQUEUE: a finished job, or a started one whose requeue kill ended
    /// its run, is pending (or held) again, as if never dispatched (its
    /// dispatch number stays, so the next JOB_START gives a higher one); a
    /// finished job gets its environment back from the record.
    fn apply_requeue(&mut self, r: &JobRequeueRecord) -> Result<(), String> {
        match &r.requeued {
            Requeued::Finished { env, .. } => {
                if !self.status.is_finished() {
                    return Err(format!("requeue of a {} job", self.status));
                }
                self.env = Arc::new(env.clone());
            }
            Requeued::Pending { .. } => {
                if !self.status.is_pending() {
                    return Err(format!("requeue -p of a {} job", self.status));
                }
            }
            Requeued::Killed(_) => {
                if !self.status.is_started() || self.requeue_hold != Some(r.hold) {
                    return Err(format!("requeue of a {} job not killed to be requeued so", self.status));
                }
                // The run is over: its late messages (a FINISH resent until
                // acknowledged) name a lower dispatch number from now on.
                self.dispatch_seq = self.dispatch_seq.wrapping_add(1);
            }
        }
        self.status = if r.hold { JobStatus::Psusp } else { JobStatus::Pend };
        self.reason = if r.hold { String::new() } else { REASON_REQUEUED.to_owned() };
        self.status_time_ms = r.time_ms;
        self.exec_hosts.clear();
        self.start_time_ms = None;
        self.accepted = None;
        self.exec = None;
        self.finish = None;
        self.pending_signals.clear();
        self.requeue_hold = None;
        self.killed_by_admin = false;
        self.order_key = Some(r.order_key);
        if let Some(request_id) = r.request_id {
            // Kept with the signal requests (`Job::signal_request_ids`); the
            // submission number only matters to a `bkill 0`, which a requeue is not.
            self.signal_request_ids.entry(request_id).or_insert(self.submit_seq);
        }
        Ok(())
    }

    /// JOB_FORCE_EXIT: EXIT now, the kill counted as this job's newest signal
    /// intent (settled: nothing waits for its answer) and its request id kept.
    fn apply_force_exit(&mut self, r: &JobForceExitRecord) -> Result<(), String> {
        if self.status.is_finished() {
            return Err(format!("forced exit of a {} job", self.status));
        }
        if r.signal_seq != self.signal_seq.wrapping_add(1) {
            return Err(format!("signal sequence {} after {}", r.signal_seq, self.signal_seq));
        }
        if !matches!(r.finish.finish_reason, wire::FINISH_FORCE_OWNER | wire::FINISH_FORCE_ADMIN) {
            return Err(format!("forced exit with finish reason {}", r.finish.finish_reason));
        }
        self.signal_seq = r.signal_seq;
        self.signal_request_ids.entry(r.request_id).or_insert(self.submit_seq);
        self.status = JobStatus::Exit;
        self.reason.clear();
        self.status_time_ms = r.time_ms;
        self.finish = Some(Box::new(r.finish.clone()));
        self.requeue_hold = None;
        self.killed_by_admin = false;
        self.pending_signals.clear();
        self.env = Arc::new(Vec::new());
        Ok(())
    }

    /// The host a `bkill -r` left a run on: the first execution host of a job
    /// that JOB_FORCE_EXIT ended after its dispatch. Its kill is sent again
    /// whenever that host shows up, until the job is cleaned.
    pub(crate) fn force_killed_on(&self) -> Option<&HostName> {
        let forced = self
            .finish
            .as_ref()
            .is_some_and(|f| matches!(f.finish_reason, wire::FINISH_FORCE_OWNER | wire::FINISH_FORCE_ADMIN));
        if forced && self.start_time_ms.is_some() { self.exec_hosts.first() } else { None }
    }

    fn apply_start(&mut self, r: &JobStartRecord) -> Result<(), String> {
        if self.status != JobStatus::Pend {
            return Err(format!("dispatch of a {} job", self.status));
        }
        if r.exec_hosts.len() != self.spec.n_slots() as usize {
            return Err(format!("{} execution slots for a {}-slot job", r.exec_hosts.len(), self.n_slots()));
        }
        self.status = JobStatus::Run;
        self.reason.clear();
        self.status_time_ms = r.time_ms;
        self.exec_hosts = r.exec_hosts.clone();
        self.start_time_ms = Some(r.time_ms);
        self.dispatch_seq = self.dispatch_seq.wrapping_add(1);
        self.accepted = None;
        self.exec = None;
        Ok(())
    }

    fn apply_signal(&mut self, r: &JobSignalRecord, last_submission: u64) -> Result<(), String> {
        if self.status.is_finished() {
            return Err(format!("signal of a {} job", self.status));
        }
        if r.signal_seq != self.signal_seq.wrapping_add(1) {
            return Err(format!("signal sequence {} after {}", r.signal_seq, self.signal_seq));
        }
        let Some(kind) = SignalKind::of(r.action) else {
            return Err(format!("{:?} is not a signal", r.action));
        };
        if r.requeue_hold.is_some() && (kind != SignalKind::Terminate || !self.status.is_started()) {
            return Err(format!("requeue kill {:?} of a {} job", r.action, self.status));
        }
        self.signal_seq = r.signal_seq;
        if kind == SignalKind::Terminate {
            // The newest kill decides whether the run's end requeues the job, and whom
            // LSF's termination reason names.
            self.requeue_hold = r.requeue_hold;
            self.killed_by_admin = r.requester_uid != self.user_id;
        }
        if let Some(request_id) = r.request_id {
            self.signal_request_ids.entry(request_id).or_insert(last_submission);
        }
        if !self.signal_acts(kind) {
            // A STOP of a job that is (or is about to be) stopped, a CONT of
            // one that is not: logged only so that the request id is known.
            return Ok(());
        }
        // A pending job's intent is settled by the JOB_STATUS its step logs
        // right after it; it stays unanswered only when a crash tore the step
        // between the two records, and Start settles it then
        // (`Mbd::settle_torn_steps`). A started job's intent waits for
        // sbatchd. A newer intent supersedes the older ones it makes moot,
        // which bounds the list: one STOP/CONT, one kill, one per other signal.
        if self.status.is_pending() {
            self.pending_signals.push(PendingSignal { signal_seq: r.signal_seq, action: r.action });
        } else if self.status.is_started() {
            self.pending_signals.retain(|p| match (kind, SignalKind::of(p.action)) {
                (SignalKind::Terminate, _) => false,
                (
                    SignalKind::Suspend | SignalKind::Resume,
                    Some(SignalKind::Suspend | SignalKind::Resume),
                ) => false,
                (SignalKind::Other, _) => p.action != r.action,
                _ => true,
            });
            self.pending_signals.push(PendingSignal { signal_seq: r.signal_seq, action: r.action });
        }
        Ok(())
    }

    fn apply_status(&mut self, r: &JobStatusRecord) -> Result<(), String> {
        let (from, to) = (self.status, r.status);
        let allowed = match from {
            JobStatus::Pend => matches!(to, JobStatus::Psusp | JobStatus::Exit),
            JobStatus::Psusp => matches!(to, JobStatus::Pend | JobStatus::Exit),
            JobStatus::Done | JobStatus::Exit => false,
            _started => match to {
                JobStatus::Pend => self.accepted.is_none(),
                // A dispatch whose pre-execution commands failed once too often is held.
                JobStatus::Psusp => self.accepted.is_none() && r.reason == REASON_PRE_EXEC_LIMIT,
                JobStatus::Done | JobStatus::Exit => true,
                other => other != from,
            },
        };
        if !allowed {
            return Err(format!("status {from} → {to}"));
        }
        if to.is_finished() != r.finish.is_some() {
            return Err(format!("status {to} with finish {:?}", r.finish.is_some()));
        }
        self.status = to;
        self.reason = r.reason.clone();
        self.status_time_ms = r.time_ms;
        if to.is_finished() {
            self.finish = r.finish.clone().map(Box::new);
            self.requeue_hold = None;
            self.killed_by_admin = false;
            // A finished job is never dispatched again, and nothing shows its
            // environment: most of its memory goes (see `Job`).
            self.env = Arc::new(Vec::new());
        }
        if to.is_finished() || from.is_pending() {
            // DONE/EXIT dominate; a pending job's new status answers its intent.
            self.pending_signals.clear();
        }
        if to.is_pending()
            && from.is_started()
            && matches!(r.reason.as_str(), REASON_PRE_EXEC | REASON_PRE_EXEC_LIMIT)
        {
            self.pre_exec_failures = self.pre_exec_failures.saturating_add(1);
        }
        if to.is_pending() && from.is_started() {
            // A refused dispatch: the job is as if never dispatched. The one
            // intent that still acts on the pending job (a kill, or a STOP)
            // stays unanswered until the JOB_STATUS that the refusal's step
            // logs next answers it — or Start, if a crash tore the step.
            self.exec_hosts.clear();
            self.start_time_ms = None;
            self.exec = None;
            self.requeue_hold = None;
            let follow_up = self.pending_follow_up();
            self.pending_signals = follow_up.into_iter().collect();
        }
        Ok(())
    }

    /// The unanswered intent that still changes this pending job's status,
    /// and the status it leads to: the first kill (EXIT), else the newest
    /// STOP or CONT if it is not already so (PSUSP, PEND).
    pub(crate) fn pending_follow_up(&self) -> Option<PendingSignal> {
        if let Some(kill) =
            self.pending_signals.iter().find(|p| SignalKind::of(p.action) == Some(SignalKind::Terminate))
        {
            return Some(*kill);
        }
        let newest =
            self.pending_signals.iter().rev().find(|p| {
                matches!(SignalKind::of(p.action), Some(SignalKind::Suspend | SignalKind::Resume))
            })?;
        let changes = match SignalKind::of(newest.action) {
            Some(SignalKind::Suspend) => self.status == JobStatus::Pend,
            _ => self.status == JobStatus::Psusp,
        };
        changes.then_some(*newest)
    }

    /// What is wrong with this job's record, if anything (see [`crate::Mbd::check_invariants`]).
    pub(crate) fn check(&self) -> Result<(), String> {
        let fail = |what: &str| Err(format!("job {}: {what}", self.job));
        let is_array =
            lava_batch_ll::ArraySpec::parse(&self.spec.request().job_name).is_ok_and(|a| a.is_some());
        if (self.job.index() != 0) != is_array {
            return fail("array index does not match the job name");
        }
        if !self.spec.request().env.is_empty() {
            return fail("environment kept inside the submission");
        }
        if self.submit_seq == 0 {
            return fail("no submission number");
        }
        if self.status.is_finished() && !self.env.is_empty() {
            return fail("finished with its environment");
        }
        if self.status.is_pending() {
            if !self.exec_hosts.is_empty() || self.accepted.is_some() || self.exec.is_some() {
                return fail("pending with execution state");
            }
            // Only a torn step leaves a pending job's intent unanswered (the
            // live state never shows one after a step: Mbd::check_invariants),
            // and then exactly one that still changes its status.
            if self.pending_signals.len() > 1
                || (!self.pending_signals.is_empty() && self.pending_follow_up().is_none())
            {
                return fail("pending with unanswered signals");
            }
        }
        if self.status.is_started() && self.exec_hosts.len() != self.n_slots() as usize {
            return fail("started without one execution host per slot");
        }
        if self.status.is_finished() != self.finish.is_some() {
            return fail("finish record does not match the status");
        }
        if self.requeue_hold.is_some() && !self.status.is_started() {
            return fail("marked for requeue while not started");
        }
        if self.killed_by_admin && self.status.is_finished() {
            return fail("finished with a kill still marked as an administrator's");
        }
        if self.status.is_finished() && !self.pending_signals.is_empty() {
            return fail("finished with unanswered signals");
        }
        if self.status.is_started() != self.start_time_ms.is_some() && !self.status.is_finished() {
            return fail("start time does not match the status");
        }
        let seqs: Vec<u32> = self.pending_signals.iter().map(|p| p.signal_seq).collect();
        if seqs.windows(2).any(|w| w[0] >= w[1]) || seqs.last().is_some_and(|last| *last > self.signal_seq) {
            return fail("unanswered signals out of sequence");
        }
        let n_suspend_resume = self
            .pending_signals
            .iter()
            .filter(|p| matches!(SignalKind::of(p.action), Some(SignalKind::Suspend | SignalKind::Resume)))
            .count();
        if n_suspend_resume > 1 {
            return fail("more than one unanswered STOP/CONT");
        }
        Ok(())
    }

    /// The finish reason of a run that ended killed on request (sbatchd's
    /// `wire::FINISH_KILLED`), or of this pending job's kill: whom its newest kill names.
    pub(crate) fn kill_finish_reason(&self) -> u32 {
        if self.killed_by_admin { wire::FINISH_KILLED_ADMIN } else { wire::FINISH_KILLED }
    }

    /// The reason `bjobs -l` shows: for pending and suspended jobs, and LSF's
    /// termination reason for an EXIT job sbatchd killed at a limit.
    pub(crate) fn shown_reason(&self, queue_configured: bool) -> String {
        let usual = match self.status {
            JobStatus::Exit => {
                return match self.finish.as_ref().map(|f| f.finish_reason) {
                    Some(
                        reason @ (wire::FINISH_RUN_LIMIT
                        | wire::FINISH_MEM_LIMIT
                        | wire::FINISH_CPU_LIMIT
                        | wire::FINISH_PROCESS_LIMIT
                        | wire::FINISH_SWAP_LIMIT
                        | wire::FINISH_THREAD_LIMIT),
                    ) => acct::TermReason::of_finish(reason).map(|r| r.text.to_owned()).unwrap_or_default(),
                    _ => String::new(),
                };
            }
            JobStatus::Pend if !queue_configured => REASON_NO_QUEUE,
            JobStatus::Pend => REASON_NEW_JOB,
            JobStatus::Psusp => REASON_USER_STOP_PENDING,
            JobStatus::Ususp | JobStatus::Ssusp => REASON_USER_STOP,
            _ => return String::new(),
        };
        if self.reason.is_empty() { usual.to_owned() } else { self.reason.clone() }
    }

    /// The JOB_FINISH record of `lsb.acct` for this job, once it is DONE or EXIT
    /// (`lava_batch_ll::acct`); `None` before. Resource usage is unavailable (-1) for a
    /// job that never started.
    pub fn acct_record(&self) -> Option<AcctRecord> {
        let finish = self.finish.as_ref()?;
        let request = self.spec.request();
        let started = self.start_time_ms.is_some();
        let submit_time = ms_to_s(self.submit_time_ms);
        let ru = finish.rusage;
        let rusage = if started {
            AcctRusage {
                utime_s: ru.user_time_ms as f64 / 1000.0,
                stime_s: ru.system_time_ms as f64 / 1000.0,
                maxrss_kb: ru.max_rss_kb as f64,
            }
        } else {
            AcctRusage::UNAVAILABLE
        };
        let job_file = match self.job.index() {
            0 => format!("{submit_time}.{}", self.job.id()),
            index => format!("{submit_time}.{}.{index}", self.job.id()),
        };
        Some(AcctRecord {
            event_time: ms_to_s(finish.end_time_ms),
            job_id: self.job.id(),
            user_id: self.user_id,
            options: acct::options_of(request),
            num_processors: self.n_slots(),
            submit_time,
            begin_time: request.begin_time,
            term_time: 0,
            start_time: self.start_time_ms.map_or(0, ms_to_s),
            user_name: self.user.to_string(),
            queue: self.queue.to_string(),
            res_req: request.res_req.clone(),
            depend_cond: request.dependency.clone(),
            pre_exec_cmd: request.pre_exec.clone(),
            from_host: self.from_host.to_string(),
            cwd: request.cwd.clone(),
            in_file: request.input_file.clone(),
            out_file: request.output_file.clone(),
            err_file: request.error_file.clone(),
            job_file,
            asked_hosts: request.hosts.clone(),
            exec_hosts: self.exec_hosts.iter().map(ToString::to_string).collect(),
            j_status: self.status.bits(),
            host_factor: 1.0,
            job_name: self.job_name(),
            command: request.command.clone(),
            rusage,
            mail_user: String::new(),
            project_name: project(request),
            exit_status: finish.wait_status,
            max_num_processors: self.n_slots(),
            login_shell: request.login_shell.clone(),
            idx: self.job.index(),
            max_rmem_kb: if started { i64::try_from(ru.max_rss_kb).unwrap_or(i64::MAX) } else { 0 },
            max_rswap_kb: 0,
            run_limit_s: i64::try_from(request.run_limit_s).unwrap_or(i64::MAX),
            exit_info: match self.status {
                JobStatus::Exit => acct::TermReason::of_finish(finish.finish_reason).map_or(0, |r| r.value),
                _ => 0,
            },
        })
    }

    /// The job as `bjobs` shows it; `queue` is its queue's configuration, if it has one.
    pub(crate) fn info(&self, queue: Option<&crate::QueueConfig>) -> wire::JobInfo {
        let request = self.spec.request();
        let finish = self.finish.as_ref();
        wire::JobInfo {
            job: self.job.to_wire(),
            user_name: self.user.to_string(),
            status: self.status.bits(),
            queue: self.queue.to_string(),
            from_host: self.from_host.to_string(),
            exec_hosts: self.exec_hosts.iter().map(ToString::to_string).collect(),
            job_name: self.job_name(),
            command: request.command.clone(),
            project: project(request),
            cwd: request.cwd.clone(),
            exec_cwd: self.exec.as_ref().map(|e| e.exec_cwd.clone()).unwrap_or_default(),
            output_file: request.output_file.clone(),
            error_file: request.error_file.clone(),
            n_slots: self.n_slots(),
            submit_time: ms_to_s(self.submit_time_ms),
            start_time: self.start_time_ms.map_or(0, ms_to_s),
            end_time: finish.map_or(0, |f| ms_to_s(f.end_time_ms)),
            pid: self.accepted.map(|p| p.pid).or(self.exec.as_ref().map(|e| e.pid)).unwrap_or(0),
            exit_code: match finish {
                Some(f) if self.status == JobStatus::Exit => exit_code(f.wait_status),
                _ => 0,
            },
            reason: self.shown_reason(queue.is_some()),
            rusage: finish.map(|f| f.rusage).unwrap_or_default(),
            finish_reason: finish.map_or(wire::FINISH_NORMAL, |f| f.finish_reason),
            res_req: request.res_req.clone(),
            dependency: request.dependency.clone(),
            run_limit_s: request.run_limit_s,
            mem_limit_kb: request.mem_limit_kb,
            pre_exec: request.pre_exec.clone(),
            post_exec: request.post_exec.clone(),
            limits: resource_limits(queue, request),
        }
    }
}

/// The resource limits beyond `-W` and `-M` a job of `queue` submitted with `request` runs
/// with: each its own (`bsub -c -F -D -S -C -v -p -T`), else the queue's default, else the
/// queue's maximum.
pub(crate) fn resource_limits(
    queue: Option<&crate::QueueConfig>,
    request: &wire::SubmitRequest,
) -> wire::ResourceLimits {
    let asked = request.limits.as_deref().copied().unwrap_or_default();
    queue.map_or(asked, |queue| queue.limits.effective(&asked))
}

/// LSF's default project, of a job submitted without `-P` when lsb.params sets no other.
pub(crate) const DEFAULT_PROJECT: &str = "default";

/// The project name: `-P` (or lsb.params' `DEFAULT_PROJECT`, written in at submission),
/// else LSF's `default`.
pub(crate) fn project(request: &wire::SubmitRequest) -> String {
    if request.project.is_empty() { DEFAULT_PROJECT.to_owned() } else { request.project.clone() }
}

/// The exit code LSF shows for a wait status: the exit status, or 128 + the signal.
pub fn exit_code(wait_status: i32) -> i32 {
    let signal = wait_status & 0x7f;
    if signal == 0 { (wait_status >> 8) & 0xff } else { 128 + signal }
}

/// Milliseconds since the epoch as the wire's seconds.
pub(crate) fn ms_to_s(ms: u64) -> i64 {
    i64::try_from(ms / 1000).unwrap_or(i64::MAX)
}

/// The wire's seconds as milliseconds; a time before the epoch is the epoch.
pub(crate) fn s_to_ms(s: i64) -> u64 {
    u64::try_from(s).unwrap_or(0).saturating_mul(1000)
}

/// `text` cut to at most `bytes_max` bytes at a character boundary, NULs dropped.
pub(crate) fn truncate(text: &str, bytes_max: usize) -> String {
    let mut out = String::new();
    for c in text.chars().filter(|c| *c != '\0') {
        if out.len() + c.len_utf8() > bytes_max {
            break;
        }
        out.push(c);
    }
    out
}

/// Serde for a shared part of a job: written as the value, read into a fresh
/// `Arc` (a snapshot's elements are shared again by `Store::from_snapshot`).
mod shared {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<T: Serialize, S: Serializer>(
        value: &Arc<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        value.as_ref().serialize(serializer)
    }

    pub(super) fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Arc<T>, D::Error> {
        T::deserialize(deserializer).map(Arc::new)
    }
}
