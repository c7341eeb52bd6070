//! The signal pipeline of specs/mbd-sbd-protocol.md section 5: `bkill`,
//! `bstop`, `bresume` requests and sbatchd's SIGNAL_REPLY.
//!
//! Intent and result are logged separately. On a pending job mbatchd acts
//! alone: JOB_SIGNAL then JOB_STATUS (STOP: PEND → PSUSP, CONT: PSUSP → PEND,
//! kill: EXIT at once, as LSF does); any other signal is refused with
//! `NotStarted` (LSF: only kill, stop and resume act on pending jobs). On a
//! started job JOB_SIGNAL records the intent with the job's next signal
//! sequence number and BATCH_JOB_SIGNAL carries it, once the start is accepted
//! (before that sbatchd may not know the job); the reply logs JOB_SIGACT and,
//! for a delivered STOP or CONT, the resulting JOB_STATUS (USUSP, RUN). A kill
//! ends through the FINISH stage. Replies for a sequence number that is no
//! longer pending (older, superseded, duplicate) are ignored; unanswered
//! intents are resent on Tick and when the host registers.
//!
//! Only the owner, root or a cluster administrator may signal a job. A retried
//! request (same request id) acts on no job twice: the jobs whose JOB_SIGNAL
//! carries the id answer `Accepted` again, and `bkill 0` retried selects the
//! same jobs as the first attempt did.

use lava_batch_ll::{HostName, JobRef, JobStatus};
use lava_batch_wire as wire;

use crate::effect::ClientReply;
use crate::event::{Event, FinishRecord, JobSigactRecord, JobSignalRecord, JobStatusRecord};
use crate::input::{Caller, ClientId};
use crate::job::SignalKind;
use crate::machine::{Mbd, Step};
use crate::pipeline::Target;

impl Mbd {
    pub(crate) fn signal_request(
        &mut self,
        step: &mut Step,
        client: ClientId,
        request_id: wire::RequestId,
        caller: &Caller,
        request: &wire::SignalRequest,
    ) {
        let Some(kind) = SignalKind::of(request.action) else {
            let reply =
                ClientReply::error(wire::ERR_BAD_REQUEST, format!("{:?}: Bad signal", request.action));
            return self.reply(step, client, reply);
        };
        let targets: Vec<wire::WireJobRef> = if request.all_jobs {
            self.all_jobs_of(caller, request, request_id)
        } else {
            request.jobs.clone()
        };
        let admin = self.config.is_admin(caller.uid, &caller.user);
        let results = targets
            .into_iter()
            .map(|job| wire::SignalResult {
                job,
                outcome: self.signal_job(step, request_id, caller, admin, job, (kind, request.action)),
            })
            .collect();
        self.reply(step, client, ClientReply::Signal(wire::SignalReply { results }));
    }

    /// `bkill 0`: the unfinished jobs of the `-u` user (the caller by
    /// default, everyone for `all`), in job-id order; for a retry, the jobs
    /// the first attempt acted on.
    fn all_jobs_of(
        &self,
        caller: &Caller,
        request: &wire::SignalRequest,
        request_id: wire::RequestId,
    ) -> Vec<wire::WireJobRef> {
        let unfinished = self.store.jobs.values().filter(|j| !j.status.is_finished());
        let retried: Vec<wire::WireJobRef> = unfinished
            .clone()
            .filter(|j| j.signal_request_ids.contains(&request_id))
            .map(|j| j.job.to_wire())
            .collect();
        if !retried.is_empty() {
            return retried;
        }
        unfinished
            .filter(|j| match request.user.as_str() {
                "" => j.user == caller.user,
                "all" => true,
                name => j.user.as_str() == name,
            })
            .map(|j| j.job.to_wire())
            .collect()
    }

    fn signal_job(
        &mut self,
        step: &mut Step,
        request_id: wire::RequestId,
        caller: &Caller,
        admin: bool,
        job: wire::WireJobRef,
        (kind, action): (SignalKind, wire::SignalAction),
    ) -> wire::SignalRequestOutcome {
        use wire::SignalRequestOutcome as Outcome;
        let id = match self.target(job) {
            Target::Invalid | Target::Unknown => return Outcome::NotFound,
            Target::Finished => {
                let owner = self.store.jobs.get(&job.job_id).is_some_and(|j| j.user_id == caller.uid);
                return if admin || owner { Outcome::AlreadyFinished } else { Outcome::PermissionDenied };
            }
            Target::Live(id) => id,
        };
        let job = &self.store.jobs[&id];
        if !admin && job.user_id != caller.uid {
            return Outcome::PermissionDenied;
        }
        if job.signal_request_ids.contains(&request_id) {
            return Outcome::Accepted;
        }
        let job_ref = job.job;
        let intent = JobSignalRecord {
            job: job_ref,
            signal_seq: job.signal_seq.wrapping_add(1),
            action,
            requester_uid: caller.uid,
            requester: caller.user.clone(),
            request_id: Some(request_id),
            time_ms: step.now_ms,
        };
        let now_ms = step.now_ms;
        if job.status.is_pending() {
            let result = match (kind, job.status) {
                (SignalKind::Other, _) => return Outcome::NotStarted,
                (SignalKind::Suspend, JobStatus::Pend) => {
                    Some(status_change(job_ref, JobStatus::Psusp, now_ms))
                }
                (SignalKind::Resume, JobStatus::Psusp) => {
                    Some(status_change(job_ref, JobStatus::Pend, now_ms))
                }
                (SignalKind::Terminate, _) => {
                    Some(self.killed_while_pending(job_ref, SignalKind::kill_signal(action), now_ms))
                }
                // STOP of a PSUSP job, CONT of a PEND job: already so.
                _ => None,
            };
            if let Some(result) = result {
                step.dispatch |= result.status == JobStatus::Pend;
                self.record(step, Event::JobSignal(intent));
                self.record(step, Event::JobStatus(result));
            }
            return Outcome::Accepted;
        }
        let already = match kind {
            SignalKind::Suspend => job.suspend_target(),
            SignalKind::Resume => !job.suspend_target(),
            SignalKind::Terminate | SignalKind::Other => false,
        };
        if !already {
            self.record(step, Event::JobSignal(intent));
            let host_connected = self.store.jobs[&id].run_host().is_some_and(|host| self.is_connected(host));
            if host_connected {
                self.send_signals(step, id, |sent| sent.is_none());
            }
        }
        Outcome::Accepted
    }

    /// JOB_STATUS EXIT of a pending job killed by `signal`.
    pub(crate) fn killed_while_pending(&self, job: JobRef, signal: i32, now_ms: u64) -> JobStatusRecord {
        let finish = FinishRecord {
            wait_status: signal & 0x7f,
            finish_reason: wire::FINISH_KILLED,
            end_time_ms: now_ms,
            rusage: wire::ResourceUsage::default(),
            pid: 0,
        };
        JobStatusRecord {
            job,
            status: JobStatus::Exit,
            reason: String::new(),
            time_ms: now_ms,
            finish: Some(finish),
        }
    }

    pub(crate) fn signal_reply(&mut self, step: &mut Step, host: &HostName, msg: &wire::JobSignalReply) {
        let Target::Live(id) = self.target(msg.job) else {
            return;
        };
        let job = &self.store.jobs[&id];
        let Some(pending) = job.pending_signals.iter().find(|p| p.signal_seq == msg.signal_seq) else {
            return;
        };
        if !job.is_started_on(host) {
            return;
        }
        let job_ref = job.job;
        let result = match (msg.outcome, SignalKind::of(pending.action), job.status) {
            (wire::SignalOutcome::Delivered, Some(SignalKind::Suspend), JobStatus::Run) => {
                Some(JobStatus::Ususp)
            }
            (
                wire::SignalOutcome::Delivered,
                Some(SignalKind::Resume),
                JobStatus::Ususp | JobStatus::Ssusp,
            ) => Some(JobStatus::Run),
            _ => None,
        };
        let answer = JobSigactRecord {
            job: job_ref,
            signal_seq: msg.signal_seq,
            outcome: msg.outcome,
            time_ms: step.now_ms,
        };
        self.record(step, Event::JobSigact(answer));
        if let Some(status) = result {
            self.record(step, Event::JobStatus(status_change(job_ref, status, step.now_ms)));
        }
    }
}

/// A JOB_STATUS with the status's usual reason.
fn status_change(job: JobRef, status: JobStatus, now_ms: u64) -> JobStatusRecord {
    JobStatusRecord { job, status, reason: String::new(), time_ms: now_ms, finish: None }
}
