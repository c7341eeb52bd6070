//! The signal pipeline (docs/protocols/batch.md, "Signals"): `bkill`,
//! `bstop`, `bresume` requests and sbatchd's SIGNAL_REPLY.
//!
//! Intent and result are logged separately. On a pending job mbatchd acts
//! alone: JOB_SIGNAL then JOB_STATUS (STOP: PEND → PSUSP, CONT: PSUSP → PEND,
//! kill: EXIT at once, as LSF does); any other signal is refused with
//! `NotStarted` (LSF: only kill, stop and resume act on pending jobs). On a
//! started job JOB_SIGNAL records the intent with the job's next signal
//! sequence number and BATCH_JOB_SIGNAL carries it, once the start is accepted
//! (before that sbatchd may not know the job); the reply logs, for a
//! delivered STOP or CONT, the resulting JOB_STATUS (USUSP, RUN), then the
//! JOB_SIGACT that settles the intent (in that order: see the crate doc's
//! "Torn steps"). A kill
//! ends through the FINISH stage. Replies for a sequence number that is no
//! longer pending (older, superseded, duplicate) are ignored; unanswered
//! intents are resent on Tick and when the host registers.
//!
//! `brequeue` of a started job (`control`) uses the same pipeline: a kill
//! intent whose JOB_SIGNAL carries `requeue_hold`.
//!
//! Only the owner, root or a cluster administrator may signal a job. A retried
//! request (same request id) acts on no job twice: the jobs whose JOB_SIGNAL
//! carries the id answer `Accepted` again, and `bkill 0` retried selects the
//! same jobs as the first attempt did. So that this holds for every attempt,
//! however late, a request logs JOB_SIGNAL on each live job it names even
//! when it changes nothing there (a STOP of a stopped job).

use lava_batch_ll::{HostName, JobRef, JobStatus};
use lava_batch_wire as wire;

use crate::effect::ClientReply;
use crate::event::{Event, FinishRecord, JobSigactRecord, JobSignalRecord, JobStatusRecord};
use crate::input::{Caller, ClientId};
use crate::job::{Job, SignalKind};
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
            request.jobs.iter().flat_map(|job| self.expand(*job, true)).collect()
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
    /// the first attempt selected that are still unfinished.
    ///
    /// A retry recomputes that selection: the jobs submitted up to the last
    /// submission number given when the first attempt logged its JOB_SIGNALs (not
    /// the job id: ids wrap, so a later job may have a lower id). Taking only the
    /// jobs whose JOB_SIGNAL carries the id would miss those whose records a
    /// crash tore off the first attempt's step, and they would never be
    /// signalled (found by lava-sim: a `bresume 0` left a held job PSUSP
    /// for ever).
    fn all_jobs_of(
        &self,
        caller: &Caller,
        request: &wire::SignalRequest,
        request_id: wire::RequestId,
    ) -> Vec<wire::WireJobRef> {
        let first_attempt_last = self
            .store
            .index
            .signal_requests
            .range((request_id, JobRef::MIN)..=(request_id, JobRef::MAX))
            .map(|(_, last_submission)| *last_submission)
            .min();
        self.store
            .live_jobs()
            .map(|(_, j)| j)
            .filter(|j| first_attempt_last.is_none_or(|last| j.submit_seq <= last))
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
            Target::Finished(job) => {
                let Some(finished) = self.store.job(job) else { return Outcome::NotFound };
                // A retry of the request whose kill finished the job: its answer was lost
                // (a crash after the log, before the reply), and it is given again.
                if finished.signal_request_ids.contains_key(&request_id) {
                    return Outcome::Accepted;
                }
                let owner = finished.user_id == caller.uid;
                return if admin || owner { Outcome::AlreadyFinished } else { Outcome::PermissionDenied };
            }
            Target::Live(id) => id,
        };
        let job = self.store.live_job(id);
        if !admin && job.user_id != caller.uid {
            return Outcome::PermissionDenied;
        }
        if job.signal_request_ids.contains_key(&request_id) {
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
            requeue_hold: None,
            time_ms: step.now_ms,
        };
        if job.status.is_pending() && kind == SignalKind::Other {
            return Outcome::NotStarted;
        }
        // JOB_SIGNAL is logged even when the action changes nothing (a STOP
        // of a stopped job): the request id must be known on every job the
        // request named, or a late copy of an earlier attempt of it — the
        // command gave up on that connection and retried, and the retry found
        // nothing to do — would act after a later request (found by lava-sim:
        // a stale `bstop` stopped a job that `bresume 0` had released).
        let acts = job.signal_acts(kind);
        self.record(step, Event::JobSignal(intent));
        if !acts {
            return Outcome::Accepted;
        }
        if self.store.live_job(id).status.is_pending() {
            // STOP: PEND → PSUSP, CONT: PSUSP → PEND, a kill: EXIT at once.
            self.settle_pending_intent(step, id);
            return Outcome::Accepted;
        }
        let host_connected = self.store.live_job(id).run_host().is_some_and(|host| self.is_connected(host));
        if host_connected {
            self.send_signals(step, id, |sent| sent.is_none());
        }
        Outcome::Accepted
    }

    /// JOB_STATUS EXIT of pending job `job` killed by `signal`.
    pub(crate) fn killed_while_pending(job: &Job, signal: i32, now_ms: u64) -> JobStatusRecord {
        let finish = FinishRecord {
            wait_status: signal & 0x7f,
            finish_reason: job.kill_finish_reason(),
            end_time_ms: now_ms,
            rusage: wire::ResourceUsage::default(),
            pid: 0,
        };
        JobStatusRecord {
            job: job.job,
            status: JobStatus::Exit,
            reason: String::new(),
            time_ms: now_ms,
            finish: Some(finish),
        }
    }

    pub(crate) fn signal_reply(&mut self, step: &mut Step, host: &HostName, msg: &wire::JobSignalReply) {
        let id = match self.target(msg.job) {
            Target::Live(id) => id,
            Target::Finished(id) => return self.forced_kill_answered(host, id, Some(msg.signal_seq), None),
            Target::Invalid | Target::Unknown => return,
        };
        let job = self.store.live_job(id);
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
        // The result first, then the answer that settles the intent: a crash
        // between the two records leaves the intent unanswered, so it is sent
        // again and sbatchd's second answer logs the missing JOB_SIGACT. The
        // other order would settle the intent and lose the status (a job
        // shown running while stopped, which `bresume` then takes for
        // running; lava-sim found the like for a pending job).
        if let Some(status) = result {
            self.record(step, Event::JobStatus(status_change(job_ref, status, step.now_ms)));
        }
        self.record(step, Event::JobSigact(answer));
    }

    /// Answers the unanswered intent of pending job `id` with the JOB_STATUS
    /// it leads to (EXIT for a kill, PSUSP for a STOP, PEND for a CONT); one
    /// is there only right after the record that left it unanswered in the
    /// same step, or after a crash that tore that step.
    pub(crate) fn settle_pending_intent(&mut self, step: &mut Step, id: JobRef) {
        let job = self.store.live_job(id);
        if !job.status.is_pending() {
            return;
        }
        let Some(intent) = job.pending_follow_up() else { return };
        let record = match SignalKind::of(intent.action) {
            Some(SignalKind::Terminate) => {
                Self::killed_while_pending(job, SignalKind::kill_signal(intent.action), step.now_ms)
            }
            Some(SignalKind::Suspend) => status_change(job.job, JobStatus::Psusp, step.now_ms),
            _ => status_change(job.job, JobStatus::Pend, step.now_ms),
        };
        step.dispatch |= record.status == JobStatus::Pend;
        self.record(step, Event::JobStatus(record));
    }

    /// Start: completes every step a crash tore between a pending job's
    /// JOB_SIGNAL (or a refusal's JOB_STATUS PEND) and the JOB_STATUS that
    /// answers it. lava-eventlog makes each record durable on its own, so a
    /// crash may keep any prefix of a step's records.
    pub(crate) fn settle_torn_steps(&mut self, step: &mut Step) {
        let torn: Vec<JobRef> = self
            .store
            .live_jobs()
            .filter(|(_, job)| job.status.is_pending() && !job.pending_signals.is_empty())
            .map(|(id, _)| id)
            .collect();
        for id in torn {
            self.settle_pending_intent(step, id);
        }
    }
}

/// A JOB_STATUS with the status's usual reason.
fn status_change(job: JobRef, status: JobStatus, now_ms: u64) -> JobStatusRecord {
    JobStatusRecord { job, status, reason: String::new(), time_ms: now_ms, finish: None }
}
