//! The control commands: `bmod`, `bswitch`, `btop`/`bbot`, `brequeue`, `brun`,
//! `bkill -r` on jobs
//! ([`Input::JobControl`](crate::Input::JobControl)) and `badmin hclose`,
//! `hopen`, `qclose`, `qopen`, `qact`, `qinact`
//! ([`Input::AdminControl`](crate::Input::AdminControl)), with the events
//! under LSF's names (JOB_MODIFY2, JOB_SWITCH, JOB_MOVE, JOB_REQUEUE, JOB_FORCE,
//! HOST_CTRL, QUEUE_CTRL) and LavaCore's JOB_FORCE_EXIT.
//!
//! # Jobs
//! Only the owner, root or a cluster administrator may change a job. Each job
//! named gets one answer line in LSF's words, made here:
//! - `bmod` changes a pending job's `-q -J -n -W -M -R` (the `-Xn` forms clear
//!   them); the changed submission is validated as a submission is, and a
//!   started job is refused (`Job has already started`). The `-R` string is
//!   kept as typed, as bsub's is (no resource-requirement parser is in
//!   `lava-batch-ll` yet).
//! - `bswitch` moves a pending job, or a started one whose start sbatchd
//!   accepted (its NEW_JOB is never sent again, so the snapshot sbatchd holds
//!   stays true), to another open queue whose HOSTS allow it. A job that
//!   changes queue goes back to arrival order in the new queue.
//! - `brequeue` puts a job back to PEND (PSUSP with `-H`) under its id. A
//!   DONE (`-d`) or EXIT (`-e`) job at once (JOB_REQUEUE): a finished job no
//!   longer holds its environment, so the shell reads it back from disk (the
//!   job's JOB_NEW, or the newest snapshot's copy) and passes it in
//!   ([`Input::Requeue`](crate::Input::Requeue)); the record carries it, so
//!   replay needs no file. A started job (`-r`) is killed through the signal
//!   pipeline of `signal` with one JOB_SIGNAL whose `requeue_hold` is the
//!   durable "requeue when it ends"; its run's FINISH then logs JOB_REQUEUE
//!   instead of DONE/EXIT (`pipeline`). A job cleaned from memory is unknown.
//! - `brun -m "host ..."` (administrators only) starts a pending job now on
//!   the hosts named, whatever the limits say (JOB_FORCE); `bkill -r` (the
//!   owner too) ends an unfinished job at once, without waiting for its host
//!   (JOB_FORCE_EXIT), and sends its run the kill, again whenever the host
//!   registers or reports that run (`pipeline`), until the job is cleaned, and
//!   on the timer until the host answers the kill or reports the run's end.
//! - `btop`/`bbot` move a pending job within its queue. The dispatch order of
//!   a queue's pending jobs is (order key, job id) (`Job::dispatch_key`; the
//!   pending index and `sched` walk it): without a move the key is
//!   [`arrival_key`], the job's submission number (`Job::submit_seq`: ids wrap,
//!   submission numbers do not) spaced by [`ARRIVAL_KEY_SPACING`]; a move logs
//!   the new key in JOB_MOVE, so replay needs no computation. As in LSF an
//!   administrator moves relative to every pending job of the queue (relative
//!   to the owner's jobs with `-u`), a user relative to his own jobs only. The key is placed half-way between its new
//!   neighbours; after about twenty moves into the very same gap the neighbours'
//!   keys meet and the job ties with its next neighbour, ordered by id.
//!
//! # Hosts and queues
//! Administrators only. A closed host takes no new job (`bhosts` shows
//! `closed_Adm`); a closed queue refuses submissions and switches (LSF's
//! `Queue has been closed`) but dispatches what it holds; an inactive queue
//! accepts jobs and dispatches none. The state is durable (HOST_CTRL,
//! QUEUE_CTRL; snapshots carry it), so a restart keeps it. Without names,
//! `hclose`/`hopen` act on the caller's host and the queue commands on the
//! default queue, as in LSF. An order that changes nothing logs nothing and is
//! answered as done. `mbdrestart` is the shell's (it restarts the process).

use std::collections::BTreeSet;

use lava_batch_ll::{HostName, JobRef, QueueName, SubmitSpec};
use lava_batch_wire as wire;
use serde::{Deserialize, Serialize};

use crate::effect::ClientReply;
use crate::event::{
    Event, FinishRecord, HostCtrlRecord, JobChanges, JobForceExitRecord, JobForceRecord, JobModifyRecord,
    JobMoveRecord, JobRequeueRecord, JobSignalRecord, JobSwitchRecord, QueueCtrlAction, QueueCtrlRecord,
    Requeued,
};
use crate::input::{Caller, ClientId, LoggedSubmission};
use crate::job::Job;
use crate::machine::{Mbd, Step};

/// The wait status of a run `bkill -r` ended: killed by SIGKILL.
const SIGKILL: i32 = 9;

/// The spacing of arrival-order keys: room for about twenty halvings between two
/// neighbours before `btop`/`bbot` run out of distinct keys there.
pub(crate) const ARRIVAL_KEY_SPACING: i64 = 1 << 20;

/// The order key of a job that was never moved: its submission number, spaced.
/// (Without a wrap of the job ids, the submission number is the job id.)
pub(crate) fn arrival_key(submit_seq: u64) -> i64 {
    i64::try_from(submit_seq).unwrap_or(i64::MAX).saturating_mul(ARRIVAL_KEY_SPACING)
}

/// Closed hosts, closed and inactive queues: durable, changed only by
/// HOST_CTRL and QUEUE_CTRL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Control {
    pub(crate) closed_hosts: BTreeSet<HostName>,
    pub(crate) closed_queues: BTreeSet<QueueName>,
    pub(crate) inactive_queues: BTreeSet<QueueName>,
}

/// [`Control`] in a snapshot, each list sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlSnapshot {
    /// Hosts closed by `badmin hclose`.
    pub closed_hosts: Vec<HostName>,
    /// Queues closed by `badmin qclose`.
    pub closed_queues: Vec<QueueName>,
    /// Queues inactivated by `badmin qinact`.
    pub inactive_queues: Vec<QueueName>,
}

impl Control {
    pub(crate) fn from_snapshot(snapshot: ControlSnapshot) -> Control {
        Control {
            closed_hosts: snapshot.closed_hosts.into_iter().collect(),
            closed_queues: snapshot.closed_queues.into_iter().collect(),
            inactive_queues: snapshot.inactive_queues.into_iter().collect(),
        }
    }

    pub(crate) fn snapshot(&self) -> ControlSnapshot {
        ControlSnapshot {
            closed_hosts: self.closed_hosts.iter().cloned().collect(),
            closed_queues: self.closed_queues.iter().cloned().collect(),
            inactive_queues: self.inactive_queues.iter().cloned().collect(),
        }
    }

    pub(crate) fn apply_host(&mut self, record: &HostCtrlRecord) {
        if record.open {
            self.closed_hosts.remove(&record.host);
        } else {
            self.closed_hosts.insert(record.host.clone());
        }
    }

    pub(crate) fn apply_queue(&mut self, record: &QueueCtrlRecord) {
        let queue = record.queue.clone();
        match record.action {
            QueueCtrlAction::Open => self.closed_queues.remove(&queue),
            QueueCtrlAction::Close => self.closed_queues.insert(queue),
            QueueCtrlAction::Activate => self.inactive_queues.remove(&queue),
            QueueCtrlAction::Inactivate => self.inactive_queues.insert(queue),
        };
    }

    /// Whether `record` would change anything.
    fn queue_changes(&self, record: &QueueCtrlRecord) -> bool {
        match record.action {
            QueueCtrlAction::Open => self.closed_queues.contains(&record.queue),
            QueueCtrlAction::Close => !self.closed_queues.contains(&record.queue),
            QueueCtrlAction::Activate => self.inactive_queues.contains(&record.queue),
            QueueCtrlAction::Inactivate => !self.inactive_queues.contains(&record.queue),
        }
    }
}

/// LSF's message for a submission or switch to a closed queue.
pub(crate) fn queue_closed_message(queue: &QueueName) -> String {
    format!("{queue}: Queue has been closed")
}

/// The submission `job` would have after `changes`, or why it cannot.
pub(crate) fn modified_spec(job: &Job, changes: &JobChanges) -> Result<SubmitSpec, String> {
    let mut request = job.spec.request().clone();
    if let Some(queue) = &changes.queue {
        request.queue = queue.to_string();
    }
    if let Some(name) = &changes.job_name {
        request.job_name = name.clone();
    }
    if let Some(n_slots) = changes.n_slots {
        request.n_slots = n_slots;
    }
    if let Some(limit) = changes.run_limit_s {
        request.run_limit_s = limit;
    }
    if let Some(limit) = changes.mem_limit_kb {
        request.mem_limit_kb = limit;
    }
    if let Some(res_req) = &changes.res_req {
        request.res_req = res_req.clone();
    }
    SubmitSpec::try_from(request).map_err(|error| error.to_string())
}

/// What `brequeue` asks for (see [`wire::JobControlAction::Requeue`]).
#[derive(Clone, Copy, Debug)]
struct RequeueFlags {
    done: bool,
    exit: bool,
    running: bool,
    pending: bool,
    hold: bool,
}

/// One job's answer line.
fn line(job: wire::WireJobRef, done: bool, message: String) -> wire::JobControlResult {
    wire::JobControlResult { job, done, message }
}

fn job_name(job: wire::WireJobRef) -> String {
    if job.array_index == 0 { job.job_id.to_string() } else { format!("{}[{}]", job.job_id, job.array_index) }
}

fn refused(job: wire::WireJobRef, why: &str) -> wire::JobControlResult {
    line(job, false, format!("Job <{}>: {why}", job_name(job)))
}

impl Mbd {
    /// `bmod`, `bswitch`, `btop`, `bbot`: one answer line per job named.
    pub(crate) fn job_control(
        &mut self,
        step: &mut Step,
        client: ClientId,
        request_id: wire::RequestId,
        caller: &Caller,
        request: &wire::JobControlRequest,
        requeue: Option<(wire::RequestId, &[LoggedSubmission])>,
    ) {
        let admin = self.config.is_admin(caller.uid, &caller.user);
        if let wire::JobControlAction::Run { hosts } = &request.action {
            // `brun` names one job, never a whole array (LSF's rule).
            let results = request
                .jobs
                .iter()
                .map(|job| self.force_run(step, request_id, caller, admin, *job, hosts))
                .collect();
            return self.reply(step, client, ClientReply::JobControl(wire::JobControlReply { results }));
        }
        // A job id that names an array stands for its elements, as with `bkill`.
        let named: Vec<wire::WireJobRef> = request
            .jobs
            .iter()
            .flat_map(|job| match self.store.refs_of(job.job_id).as_slice() {
                [first, ..] if job.array_index == 0 && first.index() != 0 => {
                    self.store.refs_of(job.job_id).into_iter().map(JobRef::to_wire).collect()
                }
                _ => vec![*job],
            })
            .collect();
        let results = named
            .into_iter()
            .map(|job| match request.action {
                wire::JobControlAction::ForceExit => self.force_exit(step, request_id, caller, admin, job),
                _ => self.control_job(step, caller, admin, job, &request.action, requeue),
            })
            .collect();
        self.reply(step, client, ClientReply::JobControl(wire::JobControlReply { results }));
    }

    /// `brun -m "host ..." job`: an administrator starts a pending job now on
    /// the hosts named, as many slots on each as it has CPUs (LSF's rule), in
    /// the order named; the queue, user and host limits, closed hosts and
    /// queues and lim's loads are not asked. JOB_FORCE is a dispatch like
    /// JOB_START: NEW_JOB goes out once it is durable and is resent as any
    /// dispatch's is. The answer lines are `brun`'s own, LSF's words.
    fn force_run(
        &mut self,
        step: &mut Step,
        request_id: wire::RequestId,
        caller: &Caller,
        admin: bool,
        wjob: wire::WireJobRef,
        hosts: &[String],
    ) -> wire::JobControlResult {
        let failed = |why: &str| line(wjob, false, format!("Failed to run the job: {why}"));
        let whole_array = wjob.array_index == 0
            && self.store.refs_of(wjob.job_id).first().is_some_and(|first| first.index() != 0);
        let Some(job) = JobRef::new(wjob.job_id, wjob.array_index)
            .and_then(|id| self.store.job(id))
            .map(std::borrow::Cow::into_owned)
        else {
            return failed(if whole_array { "Cannot operate on job array" } else { "No matching job found" });
        };
        if !admin {
            return failed("User permission denied");
        }
        let forced = || line(wjob, true, format!("Job <{}> is being forced to run.", job_name(wjob)));
        if job.signal_request_ids.contains_key(&request_id) {
            // A retry whose first answer was lost: the same answer, no second run.
            return forced();
        }
        match job.status {
            lava_batch_ll::JobStatus::Pend => {}
            status if status.is_finished() => return failed("Job has already finished"),
            status if status.is_started() => return failed("Job has already started"),
            _ => return failed("Operation not supported for a suspended job"),
        }
        let mut named: Vec<HostName> = Vec::new();
        for name in hosts {
            let Some(host) = self.config.hosts.iter().find(|h| h.name.as_str() == name) else {
                return failed("Bad host name, host group name or cluster name");
            };
            if !named.contains(&host.name) {
                named.push(host.name.clone());
            }
        }
        // Each host offers its CPUs (its MXJ when set, 1 when it has not
        // registered yet); the job takes its slots from them in order.
        let mut exec_hosts = Vec::with_capacity(job.n_slots() as usize);
        for host in &named {
            let offered = self.links.hosts.get(host).map_or(1, |link| self.capacity(host, link)).max(1);
            let wanted = job.n_slots() as usize - exec_hosts.len();
            exec_hosts.extend(std::iter::repeat_n(host.clone(), wanted.min(offered as usize)));
        }
        if exec_hosts.len() < job.n_slots() as usize {
            return failed("Too many processors requested");
        }
        let first = exec_hosts[0].clone();
        let record = JobForceRecord {
            job: job.job,
            exec_hosts,
            request_id,
            requester: caller.user.clone(),
            time_ms: step.now_ms,
        };
        self.record(step, Event::JobForce(record));
        self.send_new_job(step, job.job, &first);
        forced()
    }

    /// `bkill -r`: the job's owner, root or an administrator ends an unfinished
    /// job at once (JOB_FORCE_EXIT: EXIT, LSF's TERM_FORCE_OWNER or
    /// TERM_FORCE_ADMIN) and its run, if it has one, is sent the kill as
    /// `bkill`'s (best effort: the job stays EXIT whatever its host says; the
    /// kill goes again whenever the host registers or reports the run,
    /// `pipeline`, and on the timer until the host answers it, `sched`). The
    /// answer lines are `bkill`'s.
    fn force_exit(
        &mut self,
        step: &mut Step,
        request_id: wire::RequestId,
        caller: &Caller,
        admin: bool,
        wjob: wire::WireJobRef,
    ) -> wire::JobControlResult {
        let Some(job) = JobRef::new(wjob.job_id, wjob.array_index)
            .and_then(|id| self.store.job(id))
            .map(std::borrow::Cow::into_owned)
        else {
            return refused(wjob, "No matching job found");
        };
        let terminated = || line(wjob, true, format!("Job <{}> is being terminated", job_name(wjob)));
        if job.signal_request_ids.contains_key(&request_id) {
            return terminated();
        }
        let owner = job.user_id == caller.uid;
        if !admin && !owner {
            return refused(wjob, "User permission denied");
        }
        if job.status.is_finished() {
            return refused(wjob, "Job has already finished");
        }
        let finish_reason = if owner && !admin { wire::FINISH_FORCE_OWNER } else { wire::FINISH_FORCE_ADMIN };
        let signal_seq = job.signal_seq.wrapping_add(1);
        let record = JobForceExitRecord {
            job: job.job,
            signal_seq,
            requester_uid: caller.uid,
            requester: caller.user.clone(),
            request_id,
            finish: FinishRecord {
                wait_status: SIGKILL,
                finish_reason,
                end_time_ms: step.now_ms,
                rusage: wire::ResourceUsage::default(),
                pid: job.accepted.map_or(0, |ids| ids.pid),
            },
            time_ms: step.now_ms,
        };
        self.record(step, Event::JobForceExit(record));
        if let Some(host) = job.run_host().filter(|host| job.accepted.is_some() && self.is_connected(host)) {
            self.kill_forced_run(step, host, job.job, None);
        }
        step.dispatch = true;
        terminated()
    }

    fn control_job(
        &mut self,
        step: &mut Step,
        caller: &Caller,
        admin: bool,
        wjob: wire::WireJobRef,
        action: &wire::JobControlAction,
        requeue: Option<(wire::RequestId, &[LoggedSubmission])>,
    ) -> wire::JobControlResult {
        let Some(job) = JobRef::new(wjob.job_id, wjob.array_index)
            .and_then(|id| self.store.job(id))
            .map(std::borrow::Cow::into_owned)
        else {
            return refused(wjob, "No matching job found");
        };
        if !admin && job.user_id != caller.uid {
            return refused(wjob, "User permission denied");
        }
        if job.status.is_finished() && !matches!(action, wire::JobControlAction::Requeue { .. }) {
            return refused(wjob, "Job has already finished");
        }
        match action {
            wire::JobControlAction::Modify(modify) => self.modify(step, caller, &job, modify),
            wire::JobControlAction::Switch { queue } => self.switch(step, caller, &job, queue),
            wire::JobControlAction::Move { to_top, position, owner_list } => {
                self.move_job(step, caller, admin && !owner_list, &job, *to_top, *position)
            }
            // Answered by `force_run` and `force_exit` before they get here.
            wire::JobControlAction::Run { .. } | wire::JobControlAction::ForceExit => {
                refused(wjob, "Bad request")
            }
            wire::JobControlAction::Requeue { done, exit, running, pending, hold } => {
                let flags = RequeueFlags {
                    done: *done,
                    exit: *exit,
                    running: *running,
                    pending: *pending,
                    hold: *hold,
                };
                self.requeue(step, caller, &job, flags, requeue)
            }
        }
    }

    /// The configured queue named `name`, or the answer line refusing it.
    fn open_queue(&self, wjob: wire::WireJobRef, name: &str) -> Result<QueueName, wire::JobControlResult> {
        let queue = self
            .config
            .queues
            .iter()
            .find(|queue| queue.name.as_str() == name)
            .ok_or_else(|| refused(wjob, &format!("{name}: No such queue")))?;
        if self.store.control.closed_queues.contains(&queue.name) {
            return Err(refused(wjob, &queue_closed_message(&queue.name)));
        }
        Ok(queue.name.clone())
    }

    /// Whether `job` may run on some host of `queue` (its `-m` hosts, or a started
    /// job's execution hosts, against the queue's HOSTS).
    fn queue_allows(&self, job: &Job, queue: &QueueName) -> bool {
        let queue_hosts = self.config.queue(queue).map(|q| q.hosts.as_slice()).unwrap_or_default();
        if queue_hosts.is_empty() {
            return true;
        }
        if job.status.is_started() {
            return job.exec_hosts.iter().all(|host| queue_hosts.contains(host));
        }
        job.spec.hosts().is_empty() || job.spec.hosts().iter().any(|host| queue_hosts.contains(host))
    }

    fn modify(
        &mut self,
        step: &mut Step,
        caller: &Caller,
        job: &Job,
        modify: &wire::JobModify,
    ) -> wire::JobControlResult {
        let wjob = job.job.to_wire();
        if !job.status.is_pending() {
            return refused(wjob, "Job has already started");
        }
        let queue = match &modify.queue {
            Some(name) => match self.open_queue(wjob, name) {
                Ok(queue) => Some(queue),
                Err(answer) => return answer,
            },
            None => None,
        };
        if let Some(queue) = queue.as_ref().filter(|queue| !self.queue_allows(job, queue)) {
            return refused(wjob, &format!("{queue}: Host or host group is not used by the queue"));
        }
        let changes = JobChanges {
            queue,
            job_name: modify.job_name.clone(),
            n_slots: modify.n_slots,
            run_limit_s: modify.run_limit_s,
            mem_limit_kb: modify.mem_limit_kb,
            res_req: modify.res_req.clone(),
        };
        let spec = match modified_spec(job, &changes) {
            Ok(spec) => spec,
            Err(problem) => return refused(wjob, &format!("Bad argument: {problem}")),
        };
        // The changed job must be one its queue would accept from its owner: the
        // same conditions (USERS, limits, -x, -R) as at submission.
        let target = changes.queue.as_ref().unwrap_or(&job.queue);
        if let Some(queue) = self.config.queue(target)
            && let Err(message) = self.check_policy(queue, &job.user, &spec)
        {
            return refused(wjob, message);
        }
        let record =
            JobModifyRecord { job: job.job, changes, requester: caller.user.clone(), time_ms: step.now_ms };
        self.record(step, Event::JobModify(Box::new(record)));
        step.dispatch = true;
        line(wjob, true, format!("Parameters of job <{}> are being changed", job_name(wjob)))
    }

    fn switch(&mut self, step: &mut Step, caller: &Caller, job: &Job, name: &str) -> wire::JobControlResult {
        let wjob = job.job.to_wire();
        let queue = match self.open_queue(wjob, name) {
            Ok(queue) => queue,
            Err(answer) => return answer,
        };
        if job.status.is_started() && job.accepted.is_none() {
            return refused(wjob, "Job is being dispatched; switch it once it has started");
        }
        if !self.queue_allows(job, &queue) {
            return refused(wjob, &format!("{queue}: Host or host group is not used by the queue"));
        }
        if let Some(config) = self.config.queue(&queue)
            && let Err(message) = self.check_policy(config, &job.user, &job.spec)
        {
            return refused(wjob, message);
        }
        if job.queue != queue {
            let record = JobSwitchRecord {
                job: job.job,
                queue: queue.clone(),
                requester: caller.user.clone(),
                time_ms: step.now_ms,
            };
            self.record(step, Event::JobSwitch(record));
            step.dispatch = true;
        }
        line(wjob, true, format!("Job <{}> is switched to queue <{queue}>", job_name(wjob)))
    }

    /// `btop`/`bbot`: relative to every pending job of the queue when `all_jobs`
    /// (an administrator without `-u`), else to the owner's.
    fn move_job(
        &mut self,
        step: &mut Step,
        caller: &Caller,
        all_jobs: bool,
        job: &Job,
        to_top: bool,
        position: u32,
    ) -> wire::JobControlResult {
        let wjob = job.job.to_wire();
        if !job.status.is_pending() {
            return refused(wjob, "Job has already started");
        }
        // Every other pending job of the queue, in dispatch order, and those the
        // caller moves relative to (an administrator: all; a user: his own).
        let mut others: Vec<(i64, JobRef, bool)> = self
            .store
            .live_jobs()
            .filter(|(id, other)| *id != job.job && other.queue == job.queue && other.status.is_pending())
            .map(|(id, other)| (other.dispatch_key(), id, all_jobs || other.user_id == job.user_id))
            .collect();
        others.sort_unstable();
        let relevant: Vec<usize> = (0..others.len()).filter(|idx| others[*idx].2).collect();
        let skip = position.max(1).saturating_sub(1) as usize;
        let slot = if to_top { skip.min(relevant.len()) } else { relevant.len().saturating_sub(skip) };
        // Place the job before the relevant job at `slot`, or after the last one.
        let key = match (relevant.get(slot), relevant.last()) {
            (Some(&before), _) => {
                let hi = others[before].0;
                let lo = before.checked_sub(1).map_or(hi - 2 * ARRIVAL_KEY_SPACING, |idx| others[idx].0);
                lo + (hi - lo) / 2
            }
            (None, Some(&last)) => {
                let lo = others[last].0;
                let hi = others.get(last + 1).map_or(lo + 2 * ARRIVAL_KEY_SPACING, |next| next.0);
                lo + (hi - lo) / 2
            }
            (None, None) => job.dispatch_key(),
        };
        let shown = if to_top { slot + 1 } else { relevant.len() - slot + 1 };
        if key != job.dispatch_key() {
            let record = JobMoveRecord {
                job: job.job,
                order_key: key,
                to_top,
                position,
                requester: caller.user.clone(),
                time_ms: step.now_ms,
            };
            self.record(step, Event::JobMove(record));
        }
        let from = if to_top { "top" } else { "bottom" };
        line(wjob, true, format!("Job <{}> has been moved to position {shown} from {from}.", job_name(wjob)))
    }

    /// `brequeue`: a DONE job when `done`, an EXIT job when `exit`, goes back to
    /// PEND (PSUSP when `hold`) with the environment the shell read back for it
    /// (`submissions`; one of another submission is never used); a started job
    /// when `running` is killed through the signal pipeline, and its run's
    /// FINISH requeues it (`pipeline`).
    fn requeue(
        &mut self,
        step: &mut Step,
        caller: &Caller,
        job: &Job,
        flags: RequeueFlags,
        requeue: Option<(wire::RequestId, &[LoggedSubmission])>,
    ) -> wire::JobControlResult {
        let (request_id, submissions) = requeue.map_or((None, &[][..]), |(id, found)| (Some(id), found));
        let wjob = job.job.to_wire();
        let requeued = || line(wjob, true, format!("Job <{}> is being requeued", job_name(wjob)));
        let record = |requeued| JobRequeueRecord {
            job: job.job,
            hold: flags.hold,
            order_key: self.requeue_key(&job.queue),
            requeued,
            request_id,
            time_ms: step.now_ms,
        };
        // A retry of a request already carried out (its answer was lost): the
        // same answer, nothing done twice, whatever the job became since.
        if request_id.is_some_and(|id| job.signal_request_ids.contains_key(&id)) {
            return requeued();
        }
        if job.status.is_pending() {
            if !flags.pending {
                return refused(wjob, "Job has not started yet");
            }
            let record = record(Requeued::Pending { requester: caller.user.clone() });
            self.record(step, Event::JobRequeue(Box::new(record)));
            step.dispatch = true;
            return requeued();
        }
        if job.status.is_started() {
            return match self.requeue_started(step, caller, job, flags, request_id) {
                Ok(()) => requeued(),
                Err(why) => refused(wjob, why),
            };
        }
        let selected = if job.status == lava_batch_ll::JobStatus::Done { flags.done } else { flags.exit };
        if !selected {
            let (status, flag) =
                if job.status == lava_batch_ll::JobStatus::Done { ("DONE", "-d") } else { ("EXIT", "-e") };
            return refused(wjob, &format!("Job is {status}; requeue it with {flag} or -a"));
        }
        let Some(submission) = submissions
            .iter()
            .find(|s| s.job.id() == job.job.id() && s.job.index() == 0 && s.request_id == job.request_id)
        else {
            return refused(wjob, "The job's submission is no longer on disk; it cannot be requeued");
        };
        let record =
            record(Requeued::Finished { env: submission.env.clone(), requester: caller.user.clone() });
        self.record(step, Event::JobRequeue(Box::new(record)));
        step.dispatch = true;
        requeued()
    }

    /// The order key of a job requeued into `queue` now: after every other job
    /// of the queue (pending or held) and every job submitted so far, before
    /// the next job submitted (LSF dispatches a requeued job by its requeue
    /// time); half-way into the gap, so that later requeues fit after it.
    pub(crate) fn requeue_key(&self, queue: &QueueName) -> i64 {
        let next_arrival = arrival_key(self.store.last_submission.saturating_add(1));
        let last = self
            .store
            .live_jobs()
            .filter(|(_, other)| other.queue == *queue && other.status.is_pending())
            .map(|(_, other)| other.dispatch_key())
            .fold(arrival_key(self.store.last_submission), i64::max);
        if last < next_arrival { last + (next_arrival - last + 1) / 2 } else { last + ARRIVAL_KEY_SPACING }
    }

    /// `brequeue -r` of a started job: the kill intent that requeues it when
    /// its run ends (JOB_SIGNAL with `requeue_hold`), sent as `bkill`'s is.
    /// Asked again while that kill is on its way, it logs nothing more; a
    /// retry of the same request (its id, kept on the job as `bkill`'s are)
    /// kills no later run.
    fn requeue_started(
        &mut self,
        step: &mut Step,
        caller: &Caller,
        job: &Job,
        flags: RequeueFlags,
        request_id: Option<wire::RequestId>,
    ) -> Result<(), &'static str> {
        if !flags.running {
            return Err("Job has not finished; requeue a running job with -r or -a");
        }
        if job.accepted.is_none() {
            return Err("Job is being dispatched; requeue it once it has started");
        }
        if job.requeue_hold == Some(flags.hold) {
            return Ok(());
        }
        let intent = JobSignalRecord {
            job: job.job,
            signal_seq: job.signal_seq.wrapping_add(1),
            action: wire::SignalAction::Terminate,
            requester_uid: caller.uid,
            requester: caller.user.clone(),
            request_id,
            requeue_hold: Some(flags.hold),
            time_ms: step.now_ms,
        };
        self.record(step, Event::JobSignal(intent));
        let id = job.job;
        if self.store.live_job(id).run_host().is_some_and(|host| self.is_connected(host)) {
            self.send_signals(step, id, |sent| sent.is_none());
        }
        Ok(())
    }

    /// `badmin hclose|hopen|qclose|qopen|qact|qinact`: one answer line per host or queue.
    pub(crate) fn admin_control(
        &mut self,
        step: &mut Step,
        client: ClientId,
        caller: &Caller,
        request: &wire::AdminControlRequest,
    ) {
        let admin = self.config.is_admin(caller.uid, &caller.user);
        let results = match request.action {
            wire::AdminAction::HostClose | wire::AdminAction::HostOpen => {
                let open = request.action == wire::AdminAction::HostOpen;
                let names = if request.names.is_empty() {
                    vec![caller.host.to_string()]
                } else {
                    request.names.clone()
                };
                names.iter().map(|name| self.host_ctrl(step, caller, admin, name, open)).collect()
            }
            wire::AdminAction::MbdRestart => {
                let message = "mbdrestart is carried out by mbatchd's shell, not its logic".to_owned();
                return self.reply(step, client, ClientReply::error(wire::ERR_UNSUPPORTED, message));
            }
            action => {
                let action = match action {
                    wire::AdminAction::QueueOpen => QueueCtrlAction::Open,
                    wire::AdminAction::QueueClose => QueueCtrlAction::Close,
                    wire::AdminAction::QueueActivate => QueueCtrlAction::Activate,
                    _ => QueueCtrlAction::Inactivate,
                };
                let names = if request.names.is_empty() {
                    self.config.default_queue().map(|q| vec![q.name.to_string()]).unwrap_or_default()
                } else {
                    request.names.clone()
                };
                names.iter().map(|name| self.queue_ctrl(step, caller, admin, name, action)).collect()
            }
        };
        self.reply(step, client, ClientReply::AdminControl(wire::AdminControlReply { results }));
    }

    fn host_ctrl(
        &mut self,
        step: &mut Step,
        caller: &Caller,
        admin: bool,
        name: &str,
        open: bool,
    ) -> wire::AdminResult {
        let verb = if open { "Open" } else { "Close" };
        let answer = |done: bool, what: &str| wire::AdminResult {
            name: name.to_owned(),
            done,
            message: format!("{verb} <{name}> ...... {what}"),
        };
        let Some(host) = self.config.hosts.iter().find(|h| h.name.as_str() == name).map(|h| h.name.clone())
        else {
            return answer(false, "Bad host name, host group name or cluster name");
        };
        if !admin {
            return answer(false, "User permission denied");
        }
        if self.store.control.closed_hosts.contains(&host) == open {
            let record = HostCtrlRecord { host, open, requester: caller.user.clone(), time_ms: step.now_ms };
            self.record(step, Event::HostCtrl(record));
            step.dispatch |= open;
        }
        answer(true, "done")
    }

    fn queue_ctrl(
        &mut self,
        step: &mut Step,
        caller: &Caller,
        admin: bool,
        name: &str,
        action: QueueCtrlAction,
    ) -> wire::AdminResult {
        let answer = |done: bool, message: String| wire::AdminResult { name: name.to_owned(), done, message };
        let Some(queue) = self.config.queues.iter().find(|q| q.name.as_str() == name).map(|q| q.name.clone())
        else {
            return answer(false, format!("Queue <{name}>: No such queue"));
        };
        if !admin {
            return answer(false, format!("Queue <{name}>: User permission denied"));
        }
        let record = QueueCtrlRecord { queue, action, requester: caller.user.clone(), time_ms: step.now_ms };
        if self.store.control.queue_changes(&record) {
            self.record(step, Event::QueueCtrl(record));
            step.dispatch |= action == QueueCtrlAction::Activate;
        }
        let done = match action {
            QueueCtrlAction::Open => "opened",
            QueueCtrlAction::Close => "closed",
            QueueCtrlAction::Activate => "activated",
            QueueCtrlAction::Inactivate => "inactivated",
        };
        answer(true, format!("Queue <{name}> is {done}"))
    }

    /// Whether an administrator closed `host` (`badmin hclose`).
    pub fn host_closed(&self, host: &HostName) -> bool {
        self.store.control.closed_hosts.contains(host)
    }

    /// Whether an administrator closed `queue` (`badmin qclose`).
    pub fn queue_closed(&self, queue: &QueueName) -> bool {
        self.store.control.closed_queues.contains(queue)
    }

    /// Whether an administrator inactivated `queue` (`badmin qinact`).
    pub fn queue_inactive(&self, queue: &QueueName) -> bool {
        self.store.control.inactive_queues.contains(queue)
    }
}
