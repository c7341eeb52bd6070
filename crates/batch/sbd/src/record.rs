//! The durable per-job record (`struct sbd_job` of the original design;
//! docs/protocols/sbd-job-record.md, "The record")
//! and the protocol messages rebuilt from it.
//!
//! A record holds facts only: the runtime spec, the pid once known, the four
//! ACK flags, the exit, the progress of a kill and a refusal. Every pipeline
//! stage and every resend eligibility is a function of these facts (spec
//! section 4); nothing here says "sent". Messages are rebuilt from the record
//! each time they are sent and never cached (spec section 1.5).

use lava_batch_ll::{JobRef, JobStatus};
use lava_batch_wire as wire;
use serde::{Deserialize, Serialize};

use crate::RunSpec;

/// The pid (and pgid) of a job whose process is not known yet.
pub const PID_NONE: i32 = -1;

/// One job as sbatchd holds it; also its durable form, written whole on every
/// change (the shell serialises it; [`crate::Sbd::restore`] reads it back).
///
/// The fields are public for the shell and the tests to read; only
/// [`crate::Sbd`] changes them (the shell receives copies).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job.
    pub job: JobRef,
    /// The dispatch this record runs (`JobSpecs::dispatch_seq`), echoed in
    /// every message rebuilt from it; only ACKs naming it count.
    pub dispatch_seq: u32,
    /// The runtime spec derived at creation; never changed afterwards.
    pub run_spec: Box<RunSpec>,
    /// Pid of the job's process, [`PID_NONE`] until the shell reports it.
    pub pid: i32,
    /// Process group of the job, [`PID_NONE`] until the shell reports it.
    pub pgid: i32,
    /// When the job's process started, ms since the epoch; 0 until known.
    pub exec_time_ms: u64,
    /// mbatchd logged the NEW_JOB_REPLY (the pid, or the refusal).
    pub pid_acked: bool,
    /// mbatchd logged the EXECUTE metadata.
    pub execute_acked: bool,
    /// mbatchd logged the FINISH; the record is now a tombstone.
    pub finish_acked: bool,
    /// The job's exit has been captured.
    pub exit_status_valid: bool,
    /// Raw wait status, valid with `exit_status_valid`.
    pub wait_status: i32,
    /// Why the job ended (`wire::FINISH_*`), valid with `exit_status_valid`.
    pub finish_reason: u32,
    /// When the job ended, ms since the epoch, valid with `exit_status_valid`.
    pub end_time_ms: u64,
    /// Resource usage, valid with `exit_status_valid`.
    pub rusage: wire::ResourceUsage,
    /// The kill sequence under way, if any; persisted so a restart resumes it.
    pub kill: Option<KillSequence>,
    /// Highest signal sequence number handled; an equal or lower one is a duplicate.
    pub signal_seq_last: Option<u32>,
    /// Sequence number of the last STOP or CONT acted on: they supersede each
    /// other, so an older one arriving after it was overtaken and is not acted
    /// on. Tracked apart from `signal_seq_last` because mbatchd keeps a kill
    /// pending beside newer STOPs and CONTs, and its resend may come after them.
    pub suspend_seq_last: Option<u32>,
    /// Signals that arrived before the pid was known, delivered (and answered)
    /// right after the process starts; at most [`crate::PENDING_SIGNALS_MAX`].
    pub pending_signals: Vec<PendingSignal>,
    /// Set when sbatchd will not run this dispatch; the job never started.
    pub refusal: Option<Refusal>,
    /// The interactive bits of the dispatch's `file_flags` (`wire::submit_flags`:
    /// `INTERACTIVE`, `PTY`, `PTY_SHELL`), 0 for a batch job. Last, so that a record of an
    /// earlier format reads as 0 (crate `lava-sbatchd`'s store appends the word).
    pub interactive: u32,
    /// The pre- and post-execution commands besides `run_spec.pre_exec`, from the
    /// snapshot; never changed. After `interactive`, so that an older record file reads
    /// as one without them (sbatchd's `store`).
    pub hooks: Hooks,
    /// The resource usage of the job's ended `blaunch` tasks (docs/protocols/batch.md,
    /// "Parallel tasks"), added up ([`crate::tasks::add_usage`]); the job's finish reports
    /// its own plus this. Last, so that an older record file reads as zero usage.
    pub task_rusage: wire::ResourceUsage,
    /// How the job's processes start and are held (the queue's job starter, niceness and
    /// resource limits), from the snapshot; never changed. Last, so that an older record
    /// file reads as a job without them.
    pub execution: Execution,
}

/// How the job's processes start and are held (docs/batch.md, "Resource limits" and "Job
/// starters"): the queue's `JOB_STARTER`, `NICE` and the resource limits beyond `-W` and
/// `-M`. The shepherd starts the job through the starter, with the niceness and the
/// per-process limits set before the job executes; the logic enforces the whole job's
/// limits from the usage the shell measures ([`crate::Input::Usage`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Execution {
    /// Niceness of the job's processes (-20 to 19).
    pub nice: i32,
    /// The limits.
    pub limits: wire::ResourceLimits,
    /// The queue's `JOB_STARTER`, empty for none.
    pub job_starter: String,
}

impl Execution {
    /// The job starter, niceness and limits of a dispatch snapshot.
    pub fn of(specs: &wire::JobSpecs) -> Execution {
        Execution { nice: specs.nice, limits: specs.limits, job_starter: specs.job_starter.clone() }
    }
}

/// A limit measured on the whole job ([`JobRecord::measured_limits`]): the limit in the unit
/// of its reading (`None`: not set), the finish reason of a kill over it, and the reading of a
/// sample it applies to.
pub type MeasuredLimit = (Option<u64>, u32, fn(&crate::UsageSample) -> u64);

/// The commands run around a job besides its `-E` (`RunSpec::pre_exec`), in LSF's order:
/// the queue's `PRE_EXEC`, `-E`, the job, `-Ep`, the queue's `POST_EXEC`
/// (docs/batch.md, "Pre- and post-execution commands"). Empty for none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hooks {
    /// The queue's `PRE_EXEC`.
    pub queue_pre_exec: String,
    /// `-Ep`.
    pub post_exec: String,
    /// The queue's `POST_EXEC`.
    pub queue_post_exec: String,
}

impl Hooks {
    /// The hooks of a dispatch snapshot.
    pub fn of(specs: &wire::JobSpecs) -> Hooks {
        Hooks {
            queue_pre_exec: specs.queue_pre_exec.clone(),
            post_exec: specs.post_exec.clone(),
            queue_post_exec: specs.queue_post_exec.clone(),
        }
    }
}

/// LSF's kill: SIGINT, then SIGTERM after the terminate interval, then SIGKILL
/// after twice the interval, all counted from `started_ms`; over a CPU limit
/// `SIGXCPU` comes first, one interval before SIGINT ([`KillSequence::signals`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KillSequence {
    /// Finish reason the job gets (`wire::FINISH_KILLED`, `FINISH_RUN_LIMIT`, `FINISH_MEM_LIMIT`).
    pub reason: u32,
    /// When SIGINT was sent, ms since the epoch.
    pub started_ms: u64,
    /// Signals of the sequence sent so far, from 1 to the length of its
    /// [`KillSequence::signals`].
    pub n_signals_sent: u32,
}

impl KillSequence {
    /// The signals of the kill, in order, one terminate interval apart (the first may
    /// have been another: a lost terminal's kill starts with SIGHUP).
    pub fn signals(&self) -> &'static [i32] {
        use crate::signal::{SIGINT, SIGKILL, SIGTERM, SIGXCPU};
        if self.reason == wire::FINISH_CPU_LIMIT {
            &[SIGXCPU, SIGINT, SIGTERM, SIGKILL]
        } else {
            &[SIGINT, SIGTERM, SIGKILL]
        }
    }
}

/// A signal held until the job's process exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingSignal {
    /// mbatchd's sequence number, echoed by the reply.
    pub signal_seq: u32,
    /// The action.
    pub action: wire::SignalAction,
}

/// Why sbatchd will not run a dispatch; mbatchd returns the job to PEND.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// `wire::REFUSE_*`.
    pub code: u32,
    /// What was wrong, for `bjobs -l`.
    pub message: String,
    /// When the job was refused, ms since the epoch.
    pub refused_ms: u64,
}

impl JobRecord {
    /// A record as creation leaves it: no pid, every ACK flag false.
    pub(crate) fn created(
        job: JobRef,
        dispatch_seq: u32,
        run_spec: RunSpec,
        refusal: Option<Refusal>,
        hooks: Hooks,
    ) -> JobRecord {
        JobRecord {
            job,
            dispatch_seq,
            run_spec: Box::new(run_spec),
            pid: PID_NONE,
            pgid: PID_NONE,
            exec_time_ms: 0,
            pid_acked: false,
            execute_acked: false,
            finish_acked: false,
            exit_status_valid: false,
            wait_status: 0,
            finish_reason: wire::FINISH_NORMAL,
            end_time_ms: 0,
            rusage: wire::ResourceUsage::default(),
            kill: None,
            signal_seq_last: None,
            suspend_seq_last: None,
            pending_signals: Vec::new(),
            refusal,
            interactive: 0,
            hooks,
            task_rusage: wire::ResourceUsage::default(),
            execution: Execution::default(),
        }
    }

    /// Whether the job is interactive (`bsub -I`, `-Ip`, `-Is`).
    pub fn is_interactive(&self) -> bool {
        self.interactive & wire::submit_flags::INTERACTIVE != 0
    }

    /// Whether the interactive job runs on a pseudo-terminal (`-Ip`, `-Is`).
    pub fn wants_pty(&self) -> bool {
        self.interactive & wire::submit_flags::PTY != 0
    }

    /// The job's process has been reported (`pid >= 0`).
    pub fn is_spawned(&self) -> bool {
        self.pid >= 0
    }

    /// Launched (or about to be) but no process reported yet: after a restart
    /// the shell must look for its shepherd.
    pub fn is_awaiting_spawn(&self) -> bool {
        !self.is_spawned() && self.refusal.is_none()
    }

    /// The process exists and its exit has not been captured.
    pub fn is_running(&self) -> bool {
        self.is_spawned() && !self.exit_status_valid
    }

    /// The limits measured on the whole job (the shell's `/proc` readings,
    /// [`crate::Input::Usage`]) rather than set per process, in LSF's order of checks:
    /// memory (`-M`), CPU time, virtual memory, processes, threads. Each is its limit in
    /// the unit of its reading (`None`: not set), the finish reason of a kill over it, and
    /// the reading of a [`crate::UsageSample`] it applies to.
    pub fn measured_limits(&self) -> [MeasuredLimit; 5] {
        let limits = &self.execution.limits;
        [
            (Some(self.run_spec.mem_limit_kb).filter(|kb| *kb > 0), wire::FINISH_MEM_LIMIT, |u| u.rss_kb),
            (limits.cpu_s.map(|s| s.saturating_mul(1000)), wire::FINISH_CPU_LIMIT, |u| u.cpu_ms),
            (limits.swap_kb, wire::FINISH_SWAP_LIMIT, |u| u.vm_kb),
            (limits.processes.map(u64::from), wire::FINISH_PROCESS_LIMIT, |u| u.processes.into()),
            (limits.threads.map(u64::from), wire::FINISH_THREAD_LIMIT, |u| u.threads.into()),
        ]
    }

    /// Whether the job has a limit measured on the whole job ([`JobRecord::measured_limits`]).
    pub fn has_measured_limit(&self) -> bool {
        self.measured_limits().iter().any(|(limit, _, _)| limit.is_some())
    }

    /// Nothing is left to say to mbatchd: FINISH, or the refusal, was acked.
    /// The record is kept only to recognise a late duplicate NEW_JOB.
    pub fn is_tombstone(&self) -> bool {
        self.finish_acked || (self.refusal.is_some() && self.pid_acked)
    }

    /// Since when the record is a tombstone, ms since the epoch.
    pub fn tombstone_since_ms(&self) -> Option<u64> {
        match &self.refusal {
            _ if self.finish_acked => Some(self.end_time_ms),
            Some(refusal) if self.pid_acked => Some(refusal.refused_ms),
            _ => None,
        }
    }

    /// NEW_JOB_REPLY must be (re)sent: there is something to reply and no ACK.
    pub fn reply_due(&self) -> bool {
        !self.pid_acked && (self.is_spawned() || self.refusal.is_some())
    }

    /// EXECUTE must be (re)sent: after the stage-1 barrier, until acked or
    /// until FINISH is acked (FINISH dominates).
    pub fn execute_due(&self) -> bool {
        self.pid_acked && self.is_spawned() && !self.execute_acked && !self.finish_acked
    }

    /// FINISH must be (re)sent: after the stage-1 barrier, without waiting for
    /// the EXECUTE ACK (EXECUTE is virtual), until acked.
    pub fn finish_due(&self) -> bool {
        self.exit_status_valid && self.pid_acked && !self.finish_acked
    }

    /// BATCH_NEW_JOB_REPLY rebuilt from the record; `None` while there is
    /// nothing to reply.
    pub fn new_job_reply(&self) -> Option<wire::NewJobReply> {
        let outcome = match &self.refusal {
            Some(refusal) => {
                wire::NewJobOutcome::Refused { code: refusal.code, message: refusal.message.clone() }
            }
            None if self.is_spawned() => wire::NewJobOutcome::Started {
                pid: self.pid,
                pgid: self.pgid,
                job_status: JobStatus::Run.bits(),
            },
            None => return None,
        };
        Some(wire::NewJobReply { job: self.job.to_wire(), dispatch_seq: self.dispatch_seq, outcome })
    }

    /// BATCH_JOB_EXECUTE rebuilt from the record; `None` before the process exists.
    pub fn execute_message(&self) -> Option<wire::JobExecute> {
        self.is_spawned().then(|| wire::JobExecute {
            job: self.job.to_wire(),
            dispatch_seq: self.dispatch_seq,
            pid: self.pid,
            pgid: self.pgid,
            exec_uid: self.run_spec.exec_uid,
            exec_user: self.run_spec.exec_user.as_str().to_owned(),
            exec_home: self.run_spec.exec_home.clone(),
            exec_cwd: self.run_spec.exec_cwd.clone(),
            exec_time: seconds(self.exec_time_ms),
        })
    }

    /// BATCH_JOB_FINISH rebuilt from the record; `None` before the exit is captured.
    pub fn finish_message(&self) -> Option<wire::JobFinish> {
        self.exit_status_valid.then(|| wire::JobFinish {
            job: self.job.to_wire(),
            dispatch_seq: self.dispatch_seq,
            pid: self.pid,
            wait_status: self.wait_status,
            finish_reason: self.finish_reason,
            end_time: seconds(self.end_time_ms),
            rusage: self.rusage,
        })
    }
}

/// Milliseconds since the epoch as the wire's seconds.
fn seconds(time_ms: u64) -> i64 {
    i64::try_from(time_ms / 1000).unwrap_or(i64::MAX)
}
