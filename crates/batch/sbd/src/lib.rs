//! lava-sbd: the logic of sbatchd, the execution daemon.
//!
//! This crate is the only code that changes job state on an execution host. It
//! is a deterministic state machine in the style of raft-rs and openraft: the
//! daemon's shell calls [`Sbd::step`] with the current time and one [`Input`]
//! (a validated message from mbatchd, a report about a process, a tick) and
//! carries out the [`Effect`]s it returns. It implements
//! docs/protocols/sbd-job-record.md ("spec section N" below: that page's map of the
//! original document's sections): the wire snapshot is used once to
//! derive a [`RunSpec`]; runtime truth is the [`JobRecord`] (pid, the ACK flags
//! `pid_acked`, `execute_acked`, `finish_acked`, `exit_status_valid`, the exit);
//! there is no state enum and no `*_sent` latch; every message is rebuilt from
//! the record each time it is sent; anything not acknowledged is resent.
//!
//! It never performs I/O, never reads a clock, never draws a random number and
//! never iterates a hash map: the same inputs give the same effects. It knows
//! nothing of files, processes, sockets or `getpwnam`; their results arrive as
//! inputs. It depends only on `lava-batch-wire`, `lava-batch-ll`, serde and
//! thiserror.
//!
//! Map: [`run_spec`] derives the runtime spec (cwd decoding, `%J`/`%I`);
//! [`record`] holds the durable record and rebuilds messages from it; `sbd`
//! is the state machine; [`invariants`] checks records and effect lists; [`tasks`] decides
//! who may start a parallel job's task (`blaunch`), a question that changes no state.
//!
//! # The shell contract
//!
//! The shell (bins/sbatchd) follows this procedure; the order of effects is the contract.
//!
//! 1. **Start.** Read every record file of the state directory and call
//!    [`Sbd::restore`]. A record that does not decode or fails
//!    [`invariants::check_record`] stops the daemon with an error naming the
//!    file: nothing is skipped silently.
//! 2. **Adopt.** For each job of [`Sbd::awaiting_adoption`] (pid still -1:
//!    sbatchd may have crashed between Launch and the pid report) look in the
//!    job directory for the pid file the shepherd writes before it executes the
//!    job. If there is a shepherd (alive, or gone after writing the exit
//!    status), feed [`Input::Spawned`] with the pid, pgid and start time it
//!    recorded; if there is no trace of one, feed [`Input::NotLaunched`] (the
//!    logic answers with a Launch: the job never started, so it cannot run
//!    twice). For each record that [`JobRecord::is_running`], re-attach to its
//!    shepherd. Whenever a shepherd's exit status is found, feed
//!    [`Input::Exited`] (duplicates are ignored).
//! 3. **Run.** Turn each event into an input (frame → `lava-batch-wire` →
//!    `lava-batch-ll` → [`Input`]), call [`Sbd::step`] with `now_ms` = wall-clock
//!    milliseconds since the Unix epoch (persisted times must stay comparable
//!    across restarts), then carry out the effects in their order, cut into the
//!    groups of [`commit_groups`] (the same function in sbatchd and in the
//!    simulation's shell, so the two cannot drift apart). A group is carried out
//!    whole before the next begins: first its record changes (Persist, Note,
//!    Remove) together, with one group commit for its Persists, then its other
//!    effects in their order. A group ends just after each Kill, so the one
//!    freedom this takes with the order is that a record change may run ahead of
//!    the Launches and Sends listed before it (it is made durable early, never
//!    late), but never ahead of a Kill: a signal is sent before the record saying
//!    it was handled is written ("Act, then record" below).
//!    - [`Effect::Persist`]: serialise the record, write it to a temporary file,
//!      fsync it, rename it over the job's record file, fsync the directory.
//!      The Persists of a group share one fsync (group commit), and every one is
//!      durable before any later effect of any kind takes effect: no Launch,
//!      Kill or Send ever runs ahead of the fact it rests on. (A new job's Launch
//!      may begin beside the commit, its shepherd forked and the job prepared,
//!      as long as the job cannot execute before the commit has returned:
//!      sbatchd holds it on a go pipe; docs/batch.md, "A new job's launch
//!      overlaps its record".)
//!    - [`Effect::Note`]: keep this record as the job's latest, and write it
//!      when convenient, without making it durable first and without waiting
//!      for it: later effects may run at once. A Note only ever adds facts a
//!      crash cannot lose (see "Noted facts" below). A later Persist of the
//!      job supersedes it; at restart the newest readable copy of a record
//!      wins, and a Note that a crash lost or damaged is simply absent.
//!    - [`Effect::Remove`]: delete the record file and the job directory.
//!    - [`Effect::Launch`]: start the job's shepherd with the [`RunSpec`]
//!      (setsid, setgroups/setgid/setuid to the exec user, umask, cwd, files,
//!      environment); the shepherd writes its pid file before it executes the
//!      job and its exit status before it exits. Later feed [`Input::Spawned`],
//!      or [`Input::SpawnFailed`] if no process could be started.
//!    - [`Effect::Kill`]: `killpg(pgid, signal)`; ESRCH is ignored (the exit
//!      report is on its way).
//!    - [`Effect::Send`]: encode the message and write it to the mbatchd
//!      connection. A failed write is a disconnection ([`Input::Disconnected`]),
//!      never a retry: resending is the logic's job.
//! 4. **Time and channel.** Feed [`Input::Tick`] every second (LavaLite's
//!    `SBD_OPERATION_TIMER`), [`Input::Connected`] once the channel to mbatchd is
//!    registered, [`Input::Disconnected`] when it closes; while disconnected the
//!    logic sends nothing, and on connection it resends everything unacknowledged.
//!
//! A crash at any point is safe: what was not durable is re-derived from the
//! records after restart, and mbatchd is idempotent towards resent messages.
//!
//! # Decisions where the specs are silent
//!
//! - **Noted facts** ([`Effect::Note`]): a record change is made durable
//!   before anything that rests on it, except where the fact is already
//!   durable elsewhere or losing it only repeats a message mbatchd answers
//!   idempotently. Those changes are noted, not persisted: the ACK flags
//!   (`pid_acked`, `execute_acked`, `finish_acked`: a lost flag makes sbatchd
//!   resend a message mbatchd already logged, which it acknowledges again,
//!   spec sections 3 and 4), the pid of Spawned (the shepherd's `pid` file is
//!   durable before the job may execute, and adoption reads it back), and the
//!   exit of Exited (the shepherd's `exit` file is durable before it exits,
//!   and adoption reads it back). A job's NEW_JOB record, refusals, held
//!   signals, signal numbers and kill sequences are always persisted. So a job
//!   that runs undisturbed costs one durable record write, not six.
//! - **The wire snapshot is dropped** once the [`RunSpec`] is derived (spec
//!   section 1.5 allows it): the record persists only the runtime spec, so
//!   `spec.cwd` is never persisted; `exec_home` is `spec.sub_home_dir`, the base
//!   of a relative cwd (spec section 2), and `exec_uid`/`exec_gid` come from the
//!   user lookup on this host. A uid-0 lookup for a non-root submitter is refused.
//! - **Resend timestamps are not in the record**: they live beside it in memory
//!   and are 0 after a restart, so everything eligible is resent at once.
//! - **FINISH waits for `pid_acked` only**, not for `execute_acked` (EXECUTE is
//!   virtual, FINISH dominates); EXECUTE stops being resent once FINISH is acked.
//! - **Refusals are records**: a failed user lookup (REFUSE_NO_USER) or a
//!   launch that fails before any pid (REFUSE_SETUP: the job goes back to PEND
//!   as in LavaLite) is persisted and its reply resent until acked. A NEW_JOB
//!   for a refused job with a higher dispatch number is a new dispatch, handled
//!   as below. A failure after the pid is
//!   known finishes the job (EXIT 127, FINISH_START_FAILED). At
//!   [`Config::records_max`] the oldest tombstones make room (see below); only a
//!   host full of live records refuses a job (REFUSE_HOST) without a record.
//! - **Tombstones**: a record whose FINISH (or refusal) is acked stays as a
//!   tombstone for [`Config::tombstone_retention_ms`] (24 h, as LavaLite) from
//!   its end (or refusal) time, answering a late duplicate NEW_JOB from the
//!   record instead of running the job again; a Tick then emits Remove. At
//!   [`Config::records_max`] a NEW_JOB first removes the oldest tombstones
//!   ([`TOMBSTONE_EVICTION_PERCENT`] of the limit at once): a busy host (100,000
//!   jobs a day fill the default limit) keeps taking work, and only its oldest
//!   tombstones, long past any duplicate NEW_JOB (mbatchd resends NEW_JOB only
//!   until it holds the reply), lose that protection.
//! - **Dispatch numbers** (docs/batch.md, "Dispatch numbers"): NEW_JOB
//!   carries the job's dispatch number, the record keeps it, every message
//!   rebuilt from the record echoes it and only an [`Ack`] naming it counts.
//!   A NEW_JOB with the record's number is a duplicate (answered from the
//!   record), with a lower one a stale copy (ignored), with a higher one a new
//!   dispatch (a refused job sent back, a requeued job): over a tombstone it
//!   is a fresh run (Remove of the old record and its directory, then the new
//!   record, then Launch; the signal numbers seen carry over, since mbatchd's
//!   grow across dispatches); while the old run still waits for the ACK of its
//!   FINISH or refusal, the new dispatch waits too: nothing is answered for
//!   it, the old run's messages are resent, mbatchd acknowledges them without
//!   acting (they name an older dispatch) and resends NEW_JOB.
//! - **Job ids wrap** at mbatchd's `MAX_JOBID`, so a record may be that of an
//!   older job that had the id: a NEW_JOB whose submission time differs from
//!   the record's is another job. Over a tombstone, the old record is removed
//!   (alone: its folder is named by the old submission time) and nothing else
//!   happens; mbatchd's resent NEW_JOB then starts the new job on a clean slate
//!   (a delay of one resend interval). An old run still waiting for an ACK has
//!   its messages resent first.
//! - **Signals**: `signal_seq` is taken to grow per job (mbatchd logs it). A
//!   signal for a job without pid is held durably, in sequence order, and
//!   delivered and answered right after Spawned (bounded by
//!   [`PENDING_SIGNALS_MAX`], beyond which the reply is EAGAIN). Once the process
//!   exists, a STOP or CONT not newer than the last one acted on is a
//!   duplicate or was overtaken, and any other signal not newer than the last
//!   one handled: it is answered `Delivered` again and never acted on. A kill
//!   is never overtaken (mbatchd keeps it pending beside newer STOPs and
//!   CONTs): a Terminate acts unless a kill is under way, which it joins.
//! - **Act, then record**: a signal is sent (Kill) before the record saying
//!   it was handled is persisted, never after, so a crash between the two
//!   repeats it (mbatchd resends the unanswered intent; a kill sequence
//!   re-sends its step) instead of losing it: repeating STOP, CONT or a step
//!   of a kill is harmless, losing a SIGCONT or a SIGKILL is not. Held
//!   signals stay in the record, on disk, until the Persist after their
//!   delivery; a crash in between leaves them to the next Tick or signal.
//! - **Kills** (Terminate, run limit, memory limit) run LSF's sequence from the
//!   record's [`KillSequence`]: SIGINT, SIGTERM after the job's terminate
//!   interval, SIGKILL after twice that; each step is persisted right after its
//!   Kill, so a restart resumes it. The job's finish reason is that of the kill
//!   once one has started (a crash between the first Kill and its Persist can
//!   leave it FINISH_NORMAL; the wait status still says how the job ended).
//!   The run limit counts wall-clock time since exec.
//!
//! # Panics
//!
//! [`Sbd::step`] panics when the shell contradicts the records (a second pid
//! for a job, a process report for a job it never launched, an exit before any
//! pid): that is a bug in the shell, not an operating condition. Anything
//! mbatchd sends, however stale or duplicated, is handled without panicking.

#![deny(missing_docs)]

mod sbd;

pub mod invariants;
pub mod record;
pub mod run_spec;
pub mod tasks;

use lava_batch_ll::{JobRef, JobSpec};
use lava_batch_wire as wire;

pub use invariants::Violation;
pub use record::{
    Execution, Hooks, JobRecord, KillSequence, MeasuredLimit, PID_NONE, PendingSignal, Refusal,
};
pub use run_spec::RunSpec;
pub use sbd::{DISK_FULL_REFUSAL, Sbd};

/// Default interval between resends of an unacknowledged message (LavaLite's
/// `SBD_RESEND_ACK_TIMEOUT`).
pub const RESEND_INTERVAL_MS_DEFAULT: u64 = 1_000;
/// Default time a tombstone is kept to recognise a late duplicate NEW_JOB
/// (LavaLite prunes finished state after 24 h).
pub const TOMBSTONE_RETENTION_MS_DEFAULT: u64 = 24 * 3600 * 1000;
/// Default number of job records (tombstones included) sbatchd holds at most.
pub const RECORDS_MAX_DEFAULT: usize = 100_000;
/// At the records limit, the share of it (per cent) removed from the oldest tombstones.
pub const TOMBSTONE_EVICTION_PERCENT: usize = 1;
/// Signals held per job until its process exists.
pub const PENDING_SIGNALS_MAX: usize = 8;
/// Highest signal number accepted in `SignalAction::Signal` (Linux `SIGRTMAX`).
pub const SIGNAL_NUMBER_MAX: u32 = 64;
/// Wait status reported for a job whose command could not be started after
/// its process existed: exit status 127, as `sh` reports an exec failure.
pub const START_FAILED_WAIT_STATUS: i32 = 127 << 8;

/// Signal numbers the logic sends (Linux numbering; sbatchd runs on Linux).
pub mod signal {
    /// Hangup: the first signal of the kill of an interactive job whose terminal is gone.
    pub const SIGHUP: i32 = 1;
    /// Interrupt: the first signal of a kill.
    pub const SIGINT: i32 = 2;
    /// Kill: the last signal of a kill.
    pub const SIGKILL: i32 = 9;
    /// Terminate: the second signal of a kill.
    pub const SIGTERM: i32 = 15;
    /// Continue (`bresume`).
    pub const SIGCONT: i32 = 18;
    /// CPU time limit exceeded: the first signal of the kill over a CPU limit.
    pub const SIGXCPU: i32 = 24;
    /// Stop (`bstop`).
    pub const SIGSTOP: i32 = 19;
}

/// errno values a signal reply can carry.
pub mod errno {
    /// Too many signals are waiting for the job's process to start.
    pub const EAGAIN: i32 = 11;
    /// Not a signal number.
    pub const EINVAL: i32 = 22;
}

/// How long a started interactive job waits for `bsub`'s terminal to attach before it is
/// killed (its `bsub` is gone: docs/protocols/batch.md, "Interactive jobs").
pub const ATTACH_WAIT_MS: u64 = 60_000;

/// Settings of the logic; the shell fills them from lsf.conf.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Resend an unacknowledged message after this long.
    pub resend_interval_ms: u64,
    /// Keep a tombstone this long before removing the record.
    pub tombstone_retention_ms: u64,
    /// Refuse a new job (REFUSE_HOST) when this many records are held.
    pub records_max: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            resend_interval_ms: RESEND_INTERVAL_MS_DEFAULT,
            tombstone_retention_ms: TOMBSTONE_RETENTION_MS_DEFAULT,
            records_max: RECORDS_MAX_DEFAULT,
        }
    }
}

/// The passwd entry of the job's user on this host, looked up by the shell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    /// Uid.
    pub uid: u32,
    /// Primary gid.
    pub gid: u32,
    /// Home directory.
    pub home: String,
    /// Login shell.
    pub shell: String,
}

/// Everything that can happen to sbatchd's logic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// BATCH_NEW_JOB, with the shell's lookup of the user (`Err` says why it failed).
    NewJob {
        /// The validated dispatch snapshot (boxed: it is by far the largest input).
        spec: Box<JobSpec>,
        /// The user's passwd entry on this host.
        user: Result<UserInfo, String>,
    },
    /// Whether the host's state file system is full (the shell watches it; never
    /// persisted): while it is, a NEW_JOB that would start a new run is refused with
    /// REFUSE_HOST and no record ([`DISK_FULL_REFUSAL`]); every job already on the host
    /// goes on. Not full until the shell says otherwise.
    DiskFull {
        /// Whether it is full.
        full: bool,
    },
    /// BATCH_NEW_JOB_REPLY_ACK.
    NewJobReplyAck(Ack),
    /// BATCH_JOB_EXECUTE_ACK.
    JobExecuteAck(Ack),
    /// BATCH_JOB_FINISH_ACK.
    JobFinishAck(Ack),
    /// BATCH_JOB_SIGNAL.
    JobSignal(wire::JobSignal),
    /// The job's process exists (after a Launch, or found at restart).
    Spawned {
        /// The job.
        job: JobRef,
        /// Pid of the job's process.
        pid: i32,
        /// Its process group.
        pgid: i32,
        /// When it started, ms since the epoch.
        exec_time_ms: u64,
    },
    /// The job could not be started. Before any pid: the job is refused
    /// (REFUSE_SETUP) and mbatchd returns it to PEND, as LavaLite does for a
    /// failed launch. After a pid: the job finishes with FINISH_START_FAILED.
    SpawnFailed {
        /// The job.
        job: JobRef,
        /// What failed, for `bjobs -l`.
        message: String,
    },
    /// The job's pre-execution commands (the queue's `PRE_EXEC`, then `-E`) ran before
    /// any job process existed and one exited non-zero: the dispatch is refused with
    /// `wire::REFUSE_PRE_EXEC_BASE` plus `exit`, and mbatchd returns the job to PEND.
    PreExecFailed {
        /// The job.
        job: JobRef,
        /// The failing command's exit value (128 plus the signal when killed).
        exit: u8,
    },
    /// At restart, for a job of [`Sbd::awaiting_adoption`]: no shepherd was
    /// ever started, so the job may be launched.
    NotLaunched {
        /// The job.
        job: JobRef,
    },
    /// The job's process group ended.
    Exited {
        /// The job.
        job: JobRef,
        /// Raw wait status.
        wait_status: i32,
        /// Resource usage of the job.
        rusage: wire::ResourceUsage,
        /// When it ended, ms since the epoch.
        end_time_ms: u64,
    },
    /// A measurement of what the job's processes use now, for its limits.
    Usage {
        /// The job.
        job: JobRef,
        /// What was measured.
        usage: UsageSample,
    },
    /// The channel to mbatchd is up (registered).
    Connected,
    /// The channel to mbatchd is down.
    Disconnected,
    /// `bsub`'s terminal is attached to the interactive job (docs/protocols/batch.md,
    /// "Interactive jobs"). Held in memory only: after a restart nothing is attached.
    TerminalAttached {
        /// The job.
        job: JobRef,
    },
    /// The attached terminal went away (`bsub` ended or its connection was lost) before
    /// the job ended: the job is killed, starting with SIGHUP, and ends EXIT.
    TerminalLost {
        /// The job.
        job: JobRef,
    },
    /// A `blaunch` task of the job ended with this resource usage (TASK_USAGE, asked by
    /// the job's own user: the shell checks with [`tasks::may_report_usage`] first). It is
    /// added to the record's `task_rusage`, durably, while the job runs; ignored otherwise.
    TaskUsage {
        /// The job.
        job: JobRef,
        /// The task's usage.
        rusage: wire::ResourceUsage,
    },
    /// Time passed: resends, kill sequences, run limits, pruning.
    Tick,
}

/// What a running job's processes (its process group) use at one moment, as the shell
/// reads it from `/proc` ([`Input::Usage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageSample {
    /// Resident memory, KiB.
    pub rss_kb: u64,
    /// Virtual memory, KiB.
    pub vm_kb: u64,
    /// CPU time, user and system, of the processes and of their children they waited for, ms.
    pub cpu_ms: u64,
    /// Processes.
    pub processes: u32,
    /// Threads, over all the processes.
    pub threads: u32,
}

/// A validated BATCH_*_ACK: the job and the dispatch whose message it acknowledges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    /// The job.
    pub job: JobRef,
    /// The dispatch number the acknowledged message carried.
    pub dispatch_seq: u32,
}

impl Ack {
    /// The ACK as received, validated (`Err` names the bad field).
    pub fn from_wire(ack: wire::JobAck) -> Result<Ack, lava_batch_ll::LlError> {
        Ok(Ack { job: lava_batch_ll::job_ref("ack.job", ack.job)?, dispatch_seq: ack.dispatch_seq })
    }
}

/// What the shell must do, in order (see the crate documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Make this record durable (temp file, fsync, rename, directory fsync).
    Persist(JobRef, JobRecord),
    /// Keep this record as the job's latest and write it when convenient; it
    /// need not be durable before later effects (see "Noted facts").
    Note(JobRef, JobRecord),
    /// Delete the job's record.
    Remove(JobRef),
    /// Start the job's shepherd.
    Launch {
        /// The job.
        job: JobRef,
        /// How to run it.
        run_spec: Box<RunSpec>,
    },
    /// `killpg(pgid, signal)`.
    Kill {
        /// The job.
        job: JobRef,
        /// Its process group.
        pgid: i32,
        /// The signal number.
        signal: i32,
    },
    /// Send a message to mbatchd.
    Send(ToMbd),
}

impl Effect {
    /// Whether this is a record change (Persist, Note, Remove), made in a group's commit.
    pub fn is_record_change(&self) -> bool {
        matches!(self, Effect::Persist(..) | Effect::Note(..) | Effect::Remove(..))
    }
}

/// Cuts `effects` into the groups a shell carries out one after another (the shell
/// contract, step 3): each group ends just after a Kill, or at the end of the list. A
/// shell makes a group's record changes first (its Persists in one group commit), then
/// carries out the group's other effects in their order.
pub fn commit_groups(effects: Vec<Effect>) -> Vec<Vec<Effect>> {
    let mut groups = Vec::new();
    let mut group = Vec::with_capacity(effects.len());
    for effect in effects {
        let ends = matches!(effect, Effect::Kill { .. });
        group.push(effect);
        if ends {
            groups.push(std::mem::take(&mut group));
        }
    }
    if !group.is_empty() {
        groups.push(group);
    }
    groups
}

/// A message sbatchd sends to mbatchd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToMbd {
    /// BATCH_NEW_JOB_REPLY.
    NewJobReply(wire::NewJobReply),
    /// BATCH_JOB_EXECUTE.
    JobExecute(wire::JobExecute),
    /// BATCH_JOB_FINISH.
    JobFinish(wire::JobFinish),
    /// BATCH_JOB_SIGNAL_REPLY.
    JobSignalReply(wire::JobSignalReply),
}

impl ToMbd {
    /// The frame operation carrying this message.
    pub fn operation(&self) -> wire::Operation {
        match self {
            ToMbd::NewJobReply(_) => wire::Operation::NewJobReply,
            ToMbd::JobExecute(_) => wire::Operation::JobExecute,
            ToMbd::JobFinish(_) => wire::Operation::JobFinish,
            ToMbd::JobSignalReply(_) => wire::Operation::JobSignalReply,
        }
    }

    /// The job the message is about.
    pub fn job(&self) -> wire::WireJobRef {
        match self {
            ToMbd::NewJobReply(m) => m.job,
            ToMbd::JobExecute(m) => m.job,
            ToMbd::JobFinish(m) => m.job,
            ToMbd::JobSignalReply(m) => m.job,
        }
    }
}
