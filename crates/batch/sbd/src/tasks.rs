//! Who may start a task of a parallel job (`blaunch`; docs/protocols/batch.md, "Parallel
//! tasks"): a pure decision over the job's record, asked by the shell when a caller on this
//! host wants a grant for a task on some host of the job.
//!
//! It changes nothing: the tasks themselves are the shell's process bookkeeping (each lives
//! exactly as long as the `blaunch` connection that started it; see bins/sbatchd, module
//! `tasks`), so no record, effect or restart rule is involved. Only the tasks' resource
//! usage, once they end, reaches the job's record (`Input::TaskUsage`, asked after
//! [`may_report_usage`]; summed by [`add_usage`]).

use lava_batch_ll::JobRef;
use lava_batch_wire as wire;

use crate::JobRecord;

/// What a grant names, taken from the job's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskGrantFacts {
    /// The job's execution user.
    pub user: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// The job's memory limit (`bsub -M`), KiB, 0 for none: each task is held to it.
    pub mem_limit_kb: u64,
}

/// Why a task grant is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskRefusal {
    /// This host runs no such job (it is not the job's first host, or the job is gone).
    NoSuchJob(JobRef),
    /// The job has not started yet, or has ended.
    NotRunning(JobRef),
    /// The caller is neither the job's user nor root.
    NotOwner {
        /// The job.
        job: JobRef,
        /// The caller's uid.
        uid: u32,
    },
    /// The host is not one of the job's allocation.
    HostNotAllocated {
        /// The job.
        job: JobRef,
        /// The host asked for.
        host: String,
    },
}

impl std::fmt::Display for TaskRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskRefusal::NoSuchJob(job) => write!(f, "Job <{job}> is not running on this host"),
            TaskRefusal::NotRunning(job) => write!(f, "Job <{job}> is not running"),
            TaskRefusal::NotOwner { job, uid } => {
                write!(f, "User (uid {uid}) is not the owner of job <{job}>")
            }
            TaskRefusal::HostNotAllocated { job, host } => {
                write!(f, "Host <{host}> is not allocated to job <{job}>")
            }
        }
    }
}

/// Whether the process of `uid` on this host may start a task of `job` on `host`: the job
/// runs here (launched, its end not captured; its pid may not be known yet, since the job's
/// process may run before the shepherd's report arrives), `uid` is its execution user or root,
/// and `host` is one of the job's execution hosts.
pub fn may_start_task(
    record: Option<&JobRecord>,
    job: JobRef,
    uid: u32,
    host: &str,
) -> Result<TaskGrantFacts, TaskRefusal> {
    let record = callers_job(record, job, uid)?;
    let spec = &record.run_spec;
    if !spec.exec_hosts.iter().any(|allocated| allocated.as_str() == host) {
        return Err(TaskRefusal::HostNotAllocated { job, host: host.to_owned() });
    }
    Ok(TaskGrantFacts {
        user: spec.exec_user.as_str().to_owned(),
        uid: spec.exec_uid,
        gid: spec.exec_gid,
        mem_limit_kb: spec.mem_limit_kb,
    })
}

/// Whether the process of `uid` on this host may add a task's resource usage to `job`:
/// the job runs here (as for [`may_start_task`]) and `uid` is its user or root. The usage
/// is the caller's word (`blaunch` runs as the job's user): a user can only add to their
/// own job's usage, never take from it or touch another's.
pub fn may_report_usage(record: Option<&JobRecord>, job: JobRef, uid: u32) -> Result<(), TaskRefusal> {
    callers_job(record, job, uid).map(|_| ())
}

/// The job's record when it runs here and `uid` is its execution user or root.
fn callers_job(record: Option<&JobRecord>, job: JobRef, uid: u32) -> Result<&JobRecord, TaskRefusal> {
    let record = record.ok_or(TaskRefusal::NoSuchJob(job))?;
    // Launched and not ended: the job's process may run (and call blaunch) before the
    // shepherd's pid report has reached the logic.
    if record.refusal.is_some() || record.exit_status_valid || record.is_tombstone() {
        return Err(TaskRefusal::NotRunning(job));
    }
    if uid != 0 && uid != record.run_spec.exec_uid {
        return Err(TaskRefusal::NotOwner { job, uid });
    }
    Ok(record)
}

/// Two usages together: CPU times added, and the peak memory as the sum of the peaks (the
/// tasks of a parallel job run side by side, as LSF adds its hosts' memory).
pub fn add_usage(a: wire::ResourceUsage, b: wire::ResourceUsage) -> wire::ResourceUsage {
    wire::ResourceUsage {
        user_time_ms: a.user_time_ms.saturating_add(b.user_time_ms),
        system_time_ms: a.system_time_ms.saturating_add(b.system_time_ms),
        max_rss_kb: a.max_rss_kb.saturating_add(b.max_rss_kb),
    }
}
