//! The three-stage job pipeline (docs/protocols/batch.md, "The three stages of a
//! job"), as mbatchd answers sbatchd: NEW_JOB_REPLY, EXECUTE, FINISH.
//!
//! Every message is idempotent here. The rules, for a message from `host`
//! about job J:
//! - The message names an earlier dispatch of J (its dispatch number is below
//!   J's count of JOB_START events): that run ended, or J would not have been
//!   dispatched again, so it is treated as for a finished job: ACK only (the
//!   ACK echoes the message's dispatch number, so it settles that run on
//!   sbatchd and no other). A number above J's contradicts the log: ignored.
//! - J unknown (never existed or already cleaned) or finished: ACK only —
//!   DONE/EXIT dominate, and sbatchd may drop its record. A run that `bkill -r`
//!   ended (JOB_FORCE_EXIT) and that its host reports as started or executing
//!   is sent the kill with the ACK (`control`): the job stays EXIT and its run
//!   must not go on.
//! - J started on `host`: the stage's event if it adds anything (start accept
//!   once; EXECUTE metadata when it differs; FINISH once), then the ACK, which
//!   the shell sends only once the event is durable.
//! - J started on `host` with a `brequeue` kill asked for (`Job::requeue_hold`):
//!   its FINISH logs JOB_REQUEUE (back to PEND, or PSUSP) instead of the
//!   DONE/EXIT JOB_STATUS, then the ACK; the requeue counts a dispatch number,
//!   so later copies of that FINISH name an earlier run (ACK only).
//! - J pending, or started on another host: the message contradicts the log
//!   (a stale or confused sbatchd). Started/EXECUTE/FINISH get no ACK and no
//!   event — an ACK would confirm a run mbatchd does not know of — so the
//!   sender keeps resending and the anomaly stays visible; a Refused is ACKed
//!   (sbatchd only drops a record of a job it does not run).
//!
//! A refusal returns J to PEND with the host's reason and frees its slots; J
//! is not offered to that host again until it re-registers, and every later
//! copy of the refusal (sbatchd resends it until acknowledged) renews that.
//! This was written to close the race in which a late resend of an old
//! refusal hit a fresh dispatch of the same job to the same host, before
//! messages carried a dispatch number; the number now tells the two apart (a
//! copy of the old refusal names the old dispatch and gets only its ACK), and
//! the avoidance remains to stop a refuse/dispatch loop on a host that cannot
//! run the job. sbatchd, for its part, starts a new dispatch only once the
//! old one's refusal or FINISH is acknowledged.

use lava_batch_ll::{HostName, JobRef, JobStatus, NAME_BYTES_MAX, PATH_BYTES_MAX};
use lava_batch_wire as wire;

use crate::config::PreExecRetryAction;
use crate::effect::ToSbd;
use crate::event::{
    Event, ExecInfo, FinishRecord, JobExecuteRecord, JobRequeueRecord, JobStartAcceptRecord, JobStatusRecord,
    Requeued,
};
use crate::job::{REASON_PRE_EXEC, REASON_PRE_EXEC_LIMIT, s_to_ms, truncate};
use crate::machine::{Mbd, Step};

/// The exit value with which a pre-execution command ends its job at once instead of
/// sending it back to PEND (LSF's rule).
pub const PRE_EXEC_EXIT_NO_RETRY: u8 = 99;

/// Longest refusal message kept as a pending reason, in bytes.
pub const REFUSAL_REASON_BYTES_MAX: usize = 1024;

/// What a pipeline message's job reference names.
pub(crate) enum Target {
    /// Job id 0: not a job; the message is ignored.
    Invalid,
    /// No such job in memory (never existed, or cleaned).
    Unknown,
    /// A finished job.
    Finished(JobRef),
    /// An unfinished job.
    Live(JobRef),
}

impl Mbd {
    pub(crate) fn target(&self, job: wire::WireJobRef) -> Target {
        let Ok(job_ref) = lava_batch_ll::job_ref("job", job) else {
            return Target::Invalid;
        };
        match self.job(job_ref) {
            None => Target::Unknown,
            Some(j) if j.status.is_finished() => Target::Finished(job_ref),
            Some(_) => Target::Live(job_ref),
        }
    }

    /// The target of a pipeline message naming dispatch `seq`: a message of
    /// an earlier dispatch (that run ended, or mbatchd would not have
    /// dispatched the job again) is answered like one for a finished job, an
    /// ACK and nothing else; one naming a dispatch mbatchd never made
    /// contradicts the log and is ignored (`None`).
    fn run_target(&self, job: wire::WireJobRef, seq: u32) -> Option<Target> {
        match self.target(job) {
            Target::Live(id) => match seq.cmp(&self.store.live_job(id).dispatch_seq) {
                std::cmp::Ordering::Less => Some(Target::Finished(id)),
                std::cmp::Ordering::Equal => Some(Target::Live(id)),
                std::cmp::Ordering::Greater => None,
            },
            target => Some(target),
        }
    }

    pub(crate) fn new_job_reply(&mut self, step: &mut Step, host: &HostName, reply: &wire::NewJobReply) {
        let ack = ToSbd::NewJobReplyAck(wire::JobAck { job: reply.job, dispatch_seq: reply.dispatch_seq });
        let id = match self.run_target(reply.job, reply.dispatch_seq) {
            None | Some(Target::Invalid) => return,
            Some(Target::Unknown) => return self.send(step, host, ack),
            Some(Target::Finished(id)) => {
                self.send(step, host, ack);
                if matches!(reply.outcome, wire::NewJobOutcome::Started { .. }) {
                    self.kill_forced_run(step, host, id, Some(reply.dispatch_seq));
                }
                return;
            }
            Some(Target::Live(id)) => id,
        };
        let job = self.store.live_job(id);
        let awaiting_reply = job.is_started_on(host) && job.accepted.is_none();
        match &reply.outcome {
            wire::NewJobOutcome::Started { pid, pgid, .. } => {
                if !job.is_started_on(host) {
                    return;
                }
                if awaiting_reply {
                    let record =
                        JobStartAcceptRecord { job: job.job, pid: *pid, pgid: *pgid, time_ms: step.now_ms };
                    self.record(step, Event::JobStartAccept(record));
                }
                self.send(step, host, ack);
                if awaiting_reply {
                    // Intents asked for before the start was accepted go out now.
                    self.send_signals(step, id, |_| true);
                }
            }
            wire::NewJobOutcome::Refused { code, message } => {
                if awaiting_reply {
                    match wire::pre_exec_exit(*code) {
                        Some(exit) => self.pre_exec_failed(step, id, exit),
                        None => self.refused(step, id, host, message),
                    }
                } else if wire::pre_exec_exit(*code).is_some() {
                    // A copy of a pre-execution failure already handled: the host
                    // may run the job again (LSF retries it anywhere), and the
                    // copy names the old dispatch, so it cannot be taken for a
                    // failure of a new one.
                } else {
                    // A copy of a refusal already handled: `host` resends it
                    // until the ACK reaches it, so more copies may be on their
                    // way, and one arriving after a fresh dispatch of the job
                    // to `host` would be taken for a refusal of that dispatch
                    // (found by lava-sim: `host` had registered again, which
                    // had lifted the avoidance, and the job went back to it on
                    // the same connection as the copies). So the copy keeps
                    // the job off `host` until `host` registers again, as the
                    // first one did.
                    self.links.avoid.entry(id).or_default().insert(host.clone());
                }
                self.send(step, host, ack);
            }
        }
    }

    /// Job `id`, started on `host` and not accepted, was refused there.
    fn refused(&mut self, step: &mut Step, id: JobRef, host: &HostName, message: &str) {
        let job_ref = self.store.live_job(id).job;
        let reason = format!(
            "The job was refused by the execution host <{host}>: {}",
            truncate(message, REFUSAL_REASON_BYTES_MAX)
        );
        let pend = JobStatusRecord {
            job: job_ref,
            status: JobStatus::Pend,
            reason,
            time_ms: step.now_ms,
            finish: None,
        };
        self.record(step, Event::JobStatus(pend));
        self.links.avoid.entry(id).or_default().insert(host.clone());
        // Intents the refusal leaves unanswered now apply to the pending job:
        // a kill ends it, a STOP holds it. JOB_STATUS PEND kept that intent
        // unanswered, so a crash between the two records loses nothing.
        self.settle_pending_intent(step, id);
        step.dispatch = true;
    }

    /// Job `id`, started and not accepted, did not run: its pre-execution commands
    /// failed with exit value `exit` (docs/batch.md, "Pre- and post-execution commands").
    /// As in LSF: exit 99 ends it EXIT; otherwise it goes back to PEND with
    /// [`REASON_PRE_EXEC`], to be dispatched again (the host is not avoided), until
    /// `LOCAL_MAX_PREEXEC_RETRY` failures, after which `LOCAL_MAX_PREEXEC_RETRY_ACTION`
    /// holds it (PSUSP, [`REASON_PRE_EXEC_LIMIT`]) or ends it EXIT with that exit value.
    fn pre_exec_failed(&mut self, step: &mut Step, id: JobRef, exit: u8) {
        let job = self.store.live_job(id);
        let failures = job.pre_exec_failures.saturating_add(1);
        let limit_reached = self.config.local_max_preexec_retry.is_some_and(|limit| failures >= limit);
        let action = self.config.preexec_retry_action(&job.queue);
        let ends = exit == PRE_EXEC_EXIT_NO_RETRY || (limit_reached && action == PreExecRetryAction::Exit);
        let (status, reason, finish) = if ends {
            let finish = FinishRecord {
                wait_status: i32::from(exit) << 8,
                finish_reason: wire::FINISH_PRE_EXEC,
                end_time_ms: step.now_ms,
                rusage: wire::ResourceUsage::default(),
                pid: 0,
            };
            (JobStatus::Exit, String::new(), Some(finish))
        } else if limit_reached {
            (JobStatus::Psusp, REASON_PRE_EXEC_LIMIT.to_owned(), None)
        } else {
            (JobStatus::Pend, REASON_PRE_EXEC.to_owned(), None)
        };
        let record = JobStatusRecord { job: job.job, status, reason, time_ms: step.now_ms, finish };
        self.record(step, Event::JobStatus(record));
        if !ends {
            // As after a refusal: an intent left unanswered now applies to the
            // pending job (a kill ends it, a STOP holds it).
            self.settle_pending_intent(step, id);
        }
        step.dispatch = true;
    }

    pub(crate) fn job_execute(&mut self, step: &mut Step, host: &HostName, msg: &wire::JobExecute) {
        let ack = ToSbd::JobExecuteAck(wire::JobAck { job: msg.job, dispatch_seq: msg.dispatch_seq });
        let id = match self.run_target(msg.job, msg.dispatch_seq) {
            None | Some(Target::Invalid) => return,
            Some(Target::Unknown) => return self.send(step, host, ack),
            Some(Target::Finished(id)) => {
                self.send(step, host, ack);
                return self.kill_forced_run(step, host, id, Some(msg.dispatch_seq));
            }
            Some(Target::Live(id)) => id,
        };
        let job = self.store.live_job(id);
        if !job.is_started_on(host) {
            return;
        }
        let exec = ExecInfo {
            pid: msg.pid,
            pgid: msg.pgid,
            exec_uid: msg.exec_uid,
            exec_user: truncate(&msg.exec_user, NAME_BYTES_MAX),
            exec_home: truncate(&msg.exec_home, PATH_BYTES_MAX),
            exec_cwd: truncate(&msg.exec_cwd, PATH_BYTES_MAX),
            exec_time_ms: s_to_ms(msg.exec_time),
        };
        if !job.exec.as_ref().is_some_and(|known| known.same_execution(&exec)) {
            let record = JobExecuteRecord { job: job.job, exec, time_ms: step.now_ms };
            self.record(step, Event::JobExecute(record));
        }
        self.send(step, host, ack);
    }

    pub(crate) fn job_finish(&mut self, step: &mut Step, host: &HostName, msg: &wire::JobFinish) {
        let ack = ToSbd::JobFinishAck(wire::JobAck { job: msg.job, dispatch_seq: msg.dispatch_seq });
        let id = match self.run_target(msg.job, msg.dispatch_seq) {
            None | Some(Target::Invalid) => return,
            Some(Target::Unknown) => return self.send(step, host, ack),
            Some(Target::Finished(id)) => {
                self.forced_kill_answered(host, id, None, Some(msg.dispatch_seq));
                return self.send(step, host, ack);
            }
            Some(Target::Live(id)) => id,
        };
        let job = self.store.live_job(id);
        if !job.is_started_on(host) {
            return;
        }
        // Finished even if its start was never accepted: FINISH dominates,
        // and a later NEW_JOB_REPLY for it only gets an ACK.
        let status = if msg.wait_status == 0 { JobStatus::Done } else { JobStatus::Exit };
        let end_time_ms = if msg.end_time > 0 { s_to_ms(msg.end_time) } else { step.now_ms };
        // sbatchd reports every kill on request alike; this side knows who asked.
        let finish_reason = match msg.finish_reason {
            wire::FINISH_KILLED => job.kill_finish_reason(),
            reason => reason,
        };
        let finish = FinishRecord {
            wait_status: msg.wait_status,
            finish_reason,
            end_time_ms,
            rusage: msg.rusage,
            pid: msg.pid,
        };
        // A run that a `brequeue` kill was asked for goes back to the queue,
        // however it ended (it may have ended before the kill reached it).
        let event = match job.requeue_hold {
            Some(hold) => Event::JobRequeue(Box::new(JobRequeueRecord {
                job: job.job,
                hold,
                order_key: self.requeue_key(&job.queue),
                requeued: Requeued::Killed(finish),
                request_id: None,
                time_ms: step.now_ms,
            })),
            None => Event::JobStatus(JobStatusRecord {
                job: job.job,
                status,
                reason: String::new(),
                time_ms: step.now_ms,
                finish: Some(finish),
            }),
        };
        self.record(step, event);
        self.send(step, host, ack);
        step.dispatch = true;
    }
}
