//! The invariants of a record and of an effect list, checked by
//! [`crate::Sbd::check_invariants`], by [`crate::Sbd::restore`] on every record
//! read back, and by tests and the simulation through [`check_effects`].

use std::collections::BTreeMap;

use lava_batch_ll::{self as ll, JobRef};
use lava_batch_wire as wire;

use crate::{Effect, JobRecord, PENDING_SIGNALS_MAX, PID_NONE, ToMbd};

/// A broken invariant: a bug in the logic, a shell that broke the contract, or a
/// damaged record on disk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job {job}: {problem}")]
pub struct Violation {
    /// The job concerned.
    pub job: JobRef,
    /// What is wrong.
    pub problem: String,
}

fn ensure(job: JobRef, holds: bool, problem: &str) -> Result<(), Violation> {
    if holds { Ok(()) } else { Err(Violation { job, problem: problem.to_owned() }) }
}

/// Checks one record on its own (before it is written and after it is read).
pub fn check_record(record: &JobRecord) -> Result<(), Violation> {
    let job = record.job;
    let cwd = &record.run_spec.exec_cwd;
    ensure(job, cwd.starts_with('/'), "exec_cwd is not an absolute path")?;
    ensure(job, record.pid == PID_NONE || record.pid > 0, "pid is neither -1 nor a process")?;
    ensure(job, (record.pid > 0) == (record.pgid > 0), "pid and pgid disagree on being known")?;
    ensure(job, !record.execute_acked || record.pid_acked, "execute_acked without pid_acked")?;
    ensure(job, !record.execute_acked || record.is_spawned(), "execute_acked without a pid")?;
    ensure(job, !record.finish_acked || record.exit_status_valid, "finish_acked without exit_status_valid")?;
    ensure(job, !record.finish_acked || record.pid_acked, "finish_acked without pid_acked")?;
    ensure(job, !record.exit_status_valid || record.is_spawned(), "an exit without a pid")?;
    ensure(
        job,
        !record.pid_acked || record.is_spawned() || record.refusal.is_some(),
        "pid_acked with no reply",
    )?;
    ensure(job, record.refusal.is_none() || !record.is_spawned(), "a refused job has a pid")?;
    ensure(job, record.pending_signals.len() <= PENDING_SIGNALS_MAX, "too many pending signals")?;
    // Signals are held until the process exists, and on disk a little longer:
    // between the Persist of the pid and the Persist after their delivery.
    ensure(
        job,
        record.pending_signals.is_empty() || (record.refusal.is_none() && !record.exit_status_valid),
        "pending signals of a refused or ended job",
    )?;
    let seq_last = record.signal_seq_last;
    ensure(
        job,
        record.suspend_seq_last.is_none_or(|s| seq_last.is_some_and(|last| s <= last)),
        "suspend_seq_last above signal_seq_last",
    )?;
    ensure(
        job,
        record.pending_signals.iter().all(|p| seq_last.is_some_and(|last| p.signal_seq <= last)),
        "a pending signal above signal_seq_last",
    )?;
    ensure(
        job,
        record.pending_signals.windows(2).all(|w| w[0].signal_seq < w[1].signal_seq),
        "pending signals out of sequence order",
    )?;
    if let Some(kill) = record.kill {
        ensure(job, record.is_spawned(), "a kill sequence without a pid")?;
        ensure(
            job,
            (1..=kill.signals().len()).contains(&(kill.n_signals_sent as usize)),
            "a kill sequence with no signal sent or more than its signals",
        )?;
    }
    Ok(())
}

/// Checks that `effects`, carried out in order over the records the shell
/// already holds in `durable` (persisted, or noted: a noted fact is durable
/// elsewhere or harmless to lose, see the crate doc), never act or report before
/// the Persist or Note of the fact they rest on; `durable` is updated by the
/// Persist, Note and Remove effects, as the shell's records would be.
///
/// Rules: a Launch needs a record without pid; a Kill one with that pgid;
/// NEW_JOB_REPLY, EXECUTE and FINISH must equal the message rebuilt from the
/// record, EXECUTE and FINISH only once `pid_acked` is recorded; a `Delivered`
/// signal reply needs the sequence number recorded, `AlreadyFinished` the exit;
/// a Remove only removes a tombstone; a Note never creates a record and changes
/// nothing but what [`noted_change`] allows.
pub fn check_effects(durable: &mut BTreeMap<JobRef, JobRecord>, effects: &[Effect]) -> Result<(), Violation> {
    for effect in effects {
        match effect {
            Effect::Persist(job, record) => {
                ensure(*job, record.job == *job, "persisted under another job's name")?;
                check_record(record)?;
                durable.insert(*job, record.clone());
            }
            Effect::Note(job, record) => {
                ensure(*job, record.job == *job, "noted under another job's name")?;
                check_record(record)?;
                let before = durable.get(job);
                ensure(*job, before.is_some(), "a Note of a job with no persisted record")?;
                let allowed = before.is_some_and(|before| noted_change(before, record));
                ensure(*job, allowed, "a Note changes more than ACK flags, the pid or the exit")?;
                durable.insert(*job, record.clone());
            }
            Effect::Remove(job) => {
                let tombstone = durable.remove(job).is_some_and(|r| r.is_tombstone());
                ensure(*job, tombstone, "removed a record that is not a durable tombstone")?;
            }
            Effect::Launch { job, run_spec } => {
                let record = durable.get(job);
                let ok = record.is_some_and(|r| r.is_awaiting_spawn() && r.run_spec == *run_spec);
                ensure(*job, ok, "Launch without a durable, unspawned record of that run spec")?;
            }
            Effect::Kill { job, pgid, .. } => {
                let ok = durable.get(job).is_some_and(|r| r.is_spawned() && r.pgid == *pgid);
                ensure(*job, ok, "Kill of a process group no durable record holds")?;
            }
            Effect::Send(message) => check_send(durable, message)?,
        }
    }
    Ok(())
}

/// Whether `after` differs from `before` only by facts a crash cannot lose: ACK
/// flags set, the pid of a job that had none (the shepherd's durable `pid` file
/// holds it), the exit of a job that had none (its durable `exit` file holds it,
/// and the held signals it makes moot).
pub fn noted_change(before: &JobRecord, after: &JobRecord) -> bool {
    let mut rebuilt = after.clone();
    let flags_kept = |b: bool, a: bool| !b || a;
    if !(flags_kept(before.pid_acked, after.pid_acked)
        && flags_kept(before.execute_acked, after.execute_acked)
        && flags_kept(before.finish_acked, after.finish_acked)
        && flags_kept(before.exit_status_valid, after.exit_status_valid))
    {
        return false;
    }
    (rebuilt.pid_acked, rebuilt.execute_acked, rebuilt.finish_acked) =
        (before.pid_acked, before.execute_acked, before.finish_acked);
    if !before.is_spawned() {
        (rebuilt.pid, rebuilt.pgid, rebuilt.exec_time_ms) = (before.pid, before.pgid, before.exec_time_ms);
    }
    if !before.exit_status_valid {
        rebuilt.exit_status_valid = false;
        (rebuilt.wait_status, rebuilt.finish_reason) = (before.wait_status, before.finish_reason);
        (rebuilt.end_time_ms, rebuilt.rusage) = (before.end_time_ms, before.rusage);
        if after.exit_status_valid {
            rebuilt.pending_signals.clone_from(&before.pending_signals);
        }
    }
    rebuilt == *before
}

fn check_send(durable: &BTreeMap<JobRef, JobRecord>, message: &ToMbd) -> Result<(), Violation> {
    let Some(job) = ll::job_ref("job", message.job()).ok() else {
        return Ok(()); // only a NoSuchJob signal reply can name a job that is not one
    };
    let record = durable.get(&job);
    match message {
        ToMbd::NewJobReply(reply) => {
            let capacity_refusal = record.is_none()
                && matches!(reply.outcome, wire::NewJobOutcome::Refused { code: wire::REFUSE_HOST, .. });
            let ok = capacity_refusal || record.and_then(JobRecord::new_job_reply).as_ref() == Some(reply);
            ensure(job, ok, "NEW_JOB_REPLY does not match the durable record")
        }
        ToMbd::JobExecute(execute) => {
            let ok = record.is_some_and(|r| r.pid_acked && r.execute_message().as_ref() == Some(execute));
            ensure(job, ok, "EXECUTE before pid_acked is durable, or unlike the durable record")
        }
        ToMbd::JobFinish(finish) => {
            let ok = record.is_some_and(|r| r.pid_acked && r.finish_message().as_ref() == Some(finish));
            ensure(job, ok, "FINISH before the exit and pid_acked are durable, or unlike the record")
        }
        ToMbd::JobSignalReply(reply) => match reply.outcome {
            wire::SignalOutcome::Delivered => {
                let seq_durable =
                    |r: &JobRecord| r.signal_seq_last.is_some_and(|last| reply.signal_seq <= last);
                let ok = record.is_some_and(|r| r.is_spawned() && seq_durable(r));
                ensure(job, ok, "Delivered before the signal's sequence number is durable")
            }
            wire::SignalOutcome::AlreadyFinished => {
                let ok = record.is_some_and(|r| r.exit_status_valid);
                ensure(job, ok, "AlreadyFinished before the exit is durable")
            }
            wire::SignalOutcome::NoSuchJob | wire::SignalOutcome::Failed(_) => Ok(()),
        },
    }
}
