//! lava-batch-wire: what bytes go on the wire for the batch system.
//!
//! This crate owns the opcodes and the XDR structures of two protocols that
//! share one frame format (the 20-byte header of `lava_xdr::frame`):
//!
//! - mbatchd ↔ sbatchd, as docs/protocols/batch.md lists them, with
//!   LavaLite's opcode numbers (30–40), plus the channel
//!   identification `SbdRegister`/`SbdRegisterAck` that names the host at the
//!   other end of a connection (it carries no job state, so restart recovery
//!   stays handshake-free: docs/protocols/sbd-job-record.md, "Restart");
//! - commands ↔ mbatchd (`bsub`, `bjobs`, `bkill`, …), each request wrapped in
//!   a [`ClientRequest`] carrying the caller's vouched credential and a request
//!   id the command chose, so that a retry is recognised, not repeated.
//!
//! It never validates meaning (that is `lava-batch-ll`), never changes job
//! state, never logs and never performs I/O. One struct per message; one
//! opcode per message; there is no generic status message.

#![deny(missing_docs)]

use serde::{Deserialize, Serialize};

mod tasks;
pub use tasks::*;

/// Version word carried in every batch frame header.
pub const BATCH_VERSION: u32 = 0x0001_0000;

/// Every operation of the batch protocols; the frame header's `operation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u32)]
pub enum Operation {
    /// Command → mbatchd: submit a job ([`SubmitRequest`]).
    SubmitJob = 1,
    /// mbatchd → command: the job was accepted ([`SubmitReply`]).
    SubmitJobReply = 2,
    /// Command → mbatchd: list jobs ([`JobQuery`]).
    JobQuery = 3,
    /// mbatchd → command: the jobs ([`JobQueryReply`]).
    JobQueryReply = 4,
    /// Command → mbatchd: signal jobs (`bkill`, `bstop`, `bresume`; [`SignalRequest`]).
    SignalJobs = 5,
    /// mbatchd → command: per-job outcomes ([`SignalReply`]).
    SignalJobsReply = 6,
    /// Command → mbatchd: list the queues (`bqueues`; [`QueueQuery`]).
    QueueQuery = 7,
    /// mbatchd → command: the queues ([`QueueQueryReply`]).
    QueueQueryReply = 8,
    /// Command → mbatchd: list the execution hosts (`bhosts`; [`HostQuery`]).
    HostQuery = 9,
    /// mbatchd → command: the hosts ([`HostQueryReply`]).
    HostQueryReply = 10,
    /// Command → mbatchd: the daemon's status and counters (`badmin showstatus`; [`StatusQuery`]).
    StatusQuery = 11,
    /// mbatchd → command: the status ([`StatusReply`]).
    StatusQueryReply = 12,
    /// Command → mbatchd: re-read the batch configuration (`badmin reconfig`; [`ReconfigRequest`]).
    Reconfig = 13,
    /// mbatchd → command: the outcome ([`ReconfigReply`]).
    ReconfigReply = 14,
    /// mbatchd → command: the request failed as a whole ([`ErrorReply`]).
    RequestFailed = 15,
    /// Command → local sbatchd, over its Unix socket: vouch for me (empty body).
    CredentialRequest = 16,
    /// Local sbatchd → command: a sealed credential ([`CredentialReply`]).
    CredentialReply = 17,
    /// Command → local sbatchd, over its Unix socket: its status and counters
    /// (`lsadmin sbdstatus`; [`SbdStatusQuery`]). Ours, not LSF's.
    SbdStatusQuery = 18,
    /// Local sbatchd → command: the status ([`SbdStatusReply`]).
    SbdStatusReply = 19,

    /// sbatchd → mbatchd: first frame on a connection, naming the host ([`SbdRegister`]).
    SbdRegister = 20,
    /// mbatchd → sbatchd: the channel is known ([`SbdRegisterAck`]).
    SbdRegisterAck = 21,

    /// MBD → SBD: dispatch a job ([`JobSpecs`]).
    NewJob = 30,
    /// SBD → MBD: the job was accepted (pid) or refused ([`NewJobReply`]).
    NewJobReply = 31,
    /// MBD → SBD: the start is durable in lsb.events ([`JobAck`]).
    NewJobReplyAck = 32,
    /// SBD → MBD: exec() happened; execution metadata ([`JobExecute`]).
    JobExecute = 33,
    /// MBD → SBD: the execution metadata is durable ([`JobAck`]).
    JobExecuteAck = 34,
    /// SBD → MBD: the job terminated ([`JobFinish`]).
    JobFinish = 35,
    /// MBD → SBD: the terminal state is durable ([`JobAck`]).
    JobFinishAck = 36,
    /// MBD → SBD: deliver a signal action ([`JobSignal`]).
    JobSignal = 37,
    /// SBD → MBD: what the signal did ([`JobSignalReply`]).
    JobSignalReply = 38,
    /// Reserved by the spec for a future batched signal; refused today.
    JobSignalMany = 39,
    /// Reserved by the spec for a future batched signal reply; refused today.
    JobSignalManyReply = 40,

    /// Command → mbatchd: change jobs (`bmod`, `bswitch`, `btop`, `bbot`,
    /// `brequeue`, `brun`, `bkill -r`; [`JobControlRequest`]).
    JobControl = 50,
    /// mbatchd → command: per-job outcomes ([`JobControlReply`]).
    JobControlReply = 51,
    /// Command → mbatchd: an administrator's order (`badmin hclose`, `qclose`,
    /// `mbdrestart`, …; [`AdminControlRequest`]).
    AdminControl = 52,
    /// mbatchd → command: per-name outcomes ([`AdminControlReply`]).
    AdminControlReply = 53,
    /// Command → mbatchd: jobs' histories from the event log (`bhist`; [`HistoryQuery`]).
    HistoryQuery = 54,
    /// mbatchd → command: one page of histories ([`HistoryReply`]).
    HistoryQueryReply = 55,
    /// A master candidate without a leader → command: the answer that follows in the next
    /// frame is this candidate's last applied state, not a master's ([`StaleState`]; asked
    /// for with [`REQUEST_ACCEPT_STALE`]). An extension (docs/protocols/batch.md).
    StaleState = 56,
    /// `bpeek`: a running job's output (commands → mbatchd).
    PeekJob = 70,
    /// The answer to [`Operation::PeekJob`].
    PeekJobReply = 71,
    /// mbatchd relays a `bpeek` to the execution host's sbatchd (never through the logic).
    SbdPeek = 72,
    /// sbatchd's answer to [`Operation::SbdPeek`].
    SbdPeekReply = 73,
    /// `bwait` → mbatchd: does this dependency expression hold now ([`WaitQuery`])? An
    /// extension (docs/protocols/batch.md, "bwait").
    WaitQuery = 74,
    /// mbatchd → `bwait`: whether it holds, and whether it still can ([`WaitQueryReply`]).
    WaitQueryReply = 75,

    /// `bsub -I`, `-Ip`, `-Is` → the execution host's sbatchd: attach this terminal to the
    /// job ([`InteractiveAttach`]; docs/protocols/batch.md, "Interactive jobs").
    InteractiveAttach = 80,
    /// sbatchd → `bsub`: attached, or why not ([`InteractiveAttachReply`]).
    InteractiveAttachReply = 81,
    /// Either way once attached: bytes of the job's standard input, output or error
    /// ([`InteractiveData`]).
    InteractiveData = 82,
    /// `bsub` → the job: the terminal's new size ([`InteractiveWinsize`]).
    InteractiveWinsize = 83,
    /// The job → `bsub`: the job has ended, its output is all sent ([`InteractiveExit`]).
    InteractiveExit = 84,
    /// `bsub -Ip` → the job: the user typed the terminal's interrupt, quit or suspend key (or
    /// resumed a suspended `bsub`); deliver this signal to the job's foreground process
    /// group ([`InteractiveSignal`]).
    InteractiveSignal = 85,
    /// `blaunch` → its local sbatchd, over the Unix socket: vouch that I may start a task of
    /// my job on a host ([`TaskGrantRequest`]; docs/protocols/batch.md, "Parallel tasks").
    TaskGrantRequest = 90,
    /// Local sbatchd → `blaunch`: the sealed grant ([`TaskGrantReply`]).
    TaskGrantReply = 91,
    /// `blaunch` → the task host's sbatchd (its task port): start this task ([`TaskStart`]).
    TaskStart = 92,
    /// Task shepherd → `blaunch`: the task runs ([`TaskStarted`]).
    TaskStarted = 93,
    /// Task shepherd → `blaunch`: output of the task ([`TaskOutput`]).
    TaskOutput = 94,
    /// Task shepherd → `blaunch`: the task has ended ([`TaskExit`]); the last frame.
    TaskExit = 95,
    /// `blaunch` → task shepherd: signal the task ([`TaskSignal`]).
    TaskSignal = 96,
    /// The job's first host's sbatchd → a task host's sbatchd: signal the job's tasks there
    /// ([`TaskJobSignal`]).
    TaskJobSignal = 97,
    /// Task host's sbatchd → the first host's: done ([`TaskJobSignalReply`]).
    TaskJobSignalReply = 98,
    /// `blaunch` → its local sbatchd: add a task's resource usage to the job's
    /// ([`TaskUsage`]).
    TaskUsage = 99,
    /// Local sbatchd → `blaunch`: added, durably ([`TaskUsageReply`]).
    TaskUsageReply = 100,
}

impl Operation {
    /// Every operation, for exhaustive tests and counters.
    pub const ALL: [Operation; 62] = [
        Operation::CredentialRequest,
        Operation::CredentialReply,
        Operation::SbdStatusQuery,
        Operation::SbdStatusReply,
        Operation::SubmitJob,
        Operation::SubmitJobReply,
        Operation::JobQuery,
        Operation::JobQueryReply,
        Operation::SignalJobs,
        Operation::SignalJobsReply,
        Operation::QueueQuery,
        Operation::QueueQueryReply,
        Operation::HostQuery,
        Operation::HostQueryReply,
        Operation::StatusQuery,
        Operation::StatusQueryReply,
        Operation::Reconfig,
        Operation::ReconfigReply,
        Operation::RequestFailed,
        Operation::SbdRegister,
        Operation::SbdRegisterAck,
        Operation::NewJob,
        Operation::NewJobReply,
        Operation::NewJobReplyAck,
        Operation::JobExecute,
        Operation::JobExecuteAck,
        Operation::JobFinish,
        Operation::JobFinishAck,
        Operation::JobSignal,
        Operation::JobSignalReply,
        Operation::JobSignalMany,
        Operation::JobSignalManyReply,
        Operation::JobControl,
        Operation::JobControlReply,
        Operation::AdminControl,
        Operation::AdminControlReply,
        Operation::HistoryQuery,
        Operation::HistoryQueryReply,
        Operation::StaleState,
        Operation::PeekJob,
        Operation::PeekJobReply,
        Operation::SbdPeek,
        Operation::SbdPeekReply,
        Operation::WaitQuery,
        Operation::WaitQueryReply,
        Operation::InteractiveAttach,
        Operation::InteractiveAttachReply,
        Operation::InteractiveData,
        Operation::InteractiveWinsize,
        Operation::InteractiveExit,
        Operation::InteractiveSignal,
        Operation::TaskGrantRequest,
        Operation::TaskGrantReply,
        Operation::TaskStart,
        Operation::TaskStarted,
        Operation::TaskOutput,
        Operation::TaskExit,
        Operation::TaskSignal,
        Operation::TaskJobSignal,
        Operation::TaskJobSignalReply,
        Operation::TaskUsage,
        Operation::TaskUsageReply,
    ];

    /// The operation a header's opcode names, if any.
    pub fn from_code(code: u32) -> Option<Operation> {
        Operation::ALL.into_iter().find(|op| *op as u32 == code)
    }

    /// The opcode on the wire.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The protocol name, as logs and counters print it.
    pub fn name(self) -> &'static str {
        match self {
            Operation::SubmitJob => "SUBMIT_JOB",
            Operation::SubmitJobReply => "SUBMIT_JOB_REPLY",
            Operation::JobQuery => "JOB_QUERY",
            Operation::JobQueryReply => "JOB_QUERY_REPLY",
            Operation::SignalJobs => "SIGNAL_JOBS",
            Operation::SignalJobsReply => "SIGNAL_JOBS_REPLY",
            Operation::QueueQuery => "QUEUE_QUERY",
            Operation::QueueQueryReply => "QUEUE_QUERY_REPLY",
            Operation::HostQuery => "HOST_QUERY",
            Operation::HostQueryReply => "HOST_QUERY_REPLY",
            Operation::StatusQuery => "STATUS_QUERY",
            Operation::StatusQueryReply => "STATUS_QUERY_REPLY",
            Operation::Reconfig => "RECONFIG",
            Operation::ReconfigReply => "RECONFIG_REPLY",
            Operation::RequestFailed => "REQUEST_FAILED",
            Operation::CredentialRequest => "CREDENTIAL_REQUEST",
            Operation::CredentialReply => "CREDENTIAL_REPLY",
            Operation::SbdStatusQuery => "SBD_STATUS_QUERY",
            Operation::SbdStatusReply => "SBD_STATUS_REPLY",
            Operation::SbdRegister => "SBD_REGISTER",
            Operation::SbdRegisterAck => "SBD_REGISTER_ACK",
            Operation::NewJob => "BATCH_NEW_JOB",
            Operation::NewJobReply => "BATCH_NEW_JOB_REPLY",
            Operation::NewJobReplyAck => "BATCH_NEW_JOB_REPLY_ACK",
            Operation::JobExecute => "BATCH_JOB_EXECUTE",
            Operation::JobExecuteAck => "BATCH_JOB_EXECUTE_ACK",
            Operation::JobFinish => "BATCH_JOB_FINISH",
            Operation::JobFinishAck => "BATCH_JOB_FINISH_ACK",
            Operation::JobSignal => "BATCH_JOB_SIGNAL",
            Operation::JobSignalReply => "BATCH_JOB_SIGNAL_REPLY",
            Operation::JobSignalMany => "BATCH_JOB_SIGNAL_MANY",
            Operation::JobSignalManyReply => "BATCH_JOB_SIGNAL_MANY_REPLY",
            Operation::JobControl => "JOB_CONTROL",
            Operation::JobControlReply => "JOB_CONTROL_REPLY",
            Operation::AdminControl => "ADMIN_CONTROL",
            Operation::AdminControlReply => "ADMIN_CONTROL_REPLY",
            Operation::HistoryQuery => "HISTORY_QUERY",
            Operation::HistoryQueryReply => "HISTORY_QUERY_REPLY",
            Operation::StaleState => "STALE_STATE",
            Operation::PeekJob => "PEEK_JOB",
            Operation::PeekJobReply => "PEEK_JOB_REPLY",
            Operation::SbdPeek => "SBD_PEEK",
            Operation::SbdPeekReply => "SBD_PEEK_REPLY",
            Operation::WaitQuery => "WAIT_QUERY",
            Operation::WaitQueryReply => "WAIT_QUERY_REPLY",
            Operation::InteractiveAttach => "INTERACTIVE_ATTACH",
            Operation::InteractiveAttachReply => "INTERACTIVE_ATTACH_REPLY",
            Operation::InteractiveData => "INTERACTIVE_DATA",
            Operation::InteractiveWinsize => "INTERACTIVE_WINSIZE",
            Operation::InteractiveExit => "INTERACTIVE_EXIT",
            Operation::InteractiveSignal => "INTERACTIVE_SIGNAL",
            Operation::TaskGrantRequest => "TASK_GRANT_REQUEST",
            Operation::TaskGrantReply => "TASK_GRANT_REPLY",
            Operation::TaskStart => "TASK_START",
            Operation::TaskStarted => "TASK_STARTED",
            Operation::TaskOutput => "TASK_OUTPUT",
            Operation::TaskExit => "TASK_EXIT",
            Operation::TaskSignal => "TASK_SIGNAL",
            Operation::TaskJobSignal => "TASK_JOB_SIGNAL",
            Operation::TaskJobSignalReply => "TASK_JOB_SIGNAL_REPLY",
            Operation::TaskUsage => "TASK_USAGE",
            Operation::TaskUsageReply => "TASK_USAGE_REPLY",
        }
    }
}

/// A job as the protocol names it: the job id and, for array elements, the
/// index (0 for a job that is not an array element).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WireJobRef {
    /// Job id, as `bsub` printed it.
    pub job_id: u32,
    /// Array index; 0 when the job is not an array element.
    pub array_index: u32,
}

/// One `NAME=value` of the job's environment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvVar {
    /// Variable name.
    pub name: String,
    /// Variable value.
    pub value: String,
}

// ---------------------------------------------------------------------------
// mbatchd <-> sbatchd
// ---------------------------------------------------------------------------

/// BATCH_NEW_JOB: the dispatch snapshot mbatchd sends. sbatchd keeps it
/// immutable and derives its runtime spec from it once (docs/protocols/sbd-job-record.md,
/// "From the dispatch to the run spec").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpecs {
    /// The job.
    pub job: WireJobRef,
    /// Submission time, seconds since the epoch.
    pub submit_time: i64,
    /// Dispatch time, seconds since the epoch.
    pub dispatch_time: i64,
    /// The dispatch number: how many times mbatchd has dispatched the job,
    /// this dispatch included (1 for the first). sbatchd echoes it in every
    /// pipeline message of the run it starts, mbatchd in every ACK, so a
    /// message of an earlier run of the same job is never taken for one of
    /// this run (docs/batch.md, "Dispatch numbers").
    pub dispatch_seq: u32,
    /// Submitting user's uid, as vouched for at submission.
    pub user_id: u32,
    /// Submitting user's primary gid, as vouched for at submission.
    pub group_id: u32,
    /// Submitting user's name.
    pub user_name: String,
    /// Queue the job was dispatched from.
    pub queue: String,
    /// Job name (`-J`), or the command when none was given.
    pub job_name: String,
    /// The command line or script body, run by `/bin/sh -c`.
    pub command: String,
    /// Host the job was submitted from.
    pub from_host: String,
    /// Submission working directory (`-cwd` or the caller's cwd); may be relative to the home.
    pub cwd: String,
    /// Submitting user's home directory on the submission host.
    pub sub_home_dir: String,
    /// `-i` file, empty for /dev/null.
    pub input_file: String,
    /// `-o`/`-oo` file, empty for LSF's default.
    pub output_file: String,
    /// `-e`/`-eo` file, empty to follow the output file.
    pub error_file: String,
    /// Bit 0: truncate the output file (`-oo`); bit 1: truncate the error file (`-eo`).
    pub file_flags: u32,
    /// Slots the job holds (`-n`).
    pub n_slots: u32,
    /// Hosts the job was dispatched to, the first is where it starts.
    pub exec_hosts: Vec<String>,
    /// File-creation mask of the submitting process.
    pub umask: u32,
    /// Run limit in seconds (`-W`), 0 for none.
    pub run_limit_s: u64,
    /// Resident memory limit in KiB (`-M`), 0 for none.
    pub mem_limit_kb: u64,
    /// Interval between SIGINT, SIGTERM and SIGKILL of a kill (JOB_TERMINATE_INTERVAL).
    pub terminate_interval_s: u32,
    /// Project name (`-P`).
    pub project: String,
    /// `-L`: the login shell that runs the job, empty for `/bin/sh`.
    pub login_shell: String,
    /// `-E`: the pre-execution command, empty for none.
    pub pre_exec: String,
    /// The submission environment plus LSF's job variables.
    pub env: Vec<EnvVar>,
    /// `-Ep`: the post-execution command, empty for none.
    pub post_exec: String,
    /// The queue's `PRE_EXEC` (lsb.queues) at dispatch, run before `pre_exec`; empty for none.
    pub queue_pre_exec: String,
    /// The queue's `POST_EXEC` at dispatch, run after `post_exec`; empty for none.
    pub queue_post_exec: String,
    /// The queue's `NICE` at dispatch: the job's processes run at this niceness.
    pub nice: i32,
    /// The limits the job runs with beyond `run_limit_s` and `mem_limit_kb`: its own, else
    /// its queue's default, else its queue's maximum (docs/batch.md, "Resource limits").
    pub limits: ResourceLimits,
    /// The queue's `JOB_STARTER` at dispatch, empty for none: the command line the job runs
    /// through (docs/batch.md, "Job starters").
    pub job_starter: String,
}

/// LSF's per-job resource limits other than the run limit (`-W`) and the memory limit
/// (`-M`), which have fields of their own: what the lsb.queues keys `CPULIMIT FILELIMIT
/// DATALIMIT STACKLIMIT CORELIMIT SWAPLIMIT PROCESSLIMIT THREADLIMIT` set. `None` is no
/// limit; 0 is a limit (`CORELIMIT = 0`: no core files).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceLimits {
    /// CPU time, seconds: of the whole job (sbatchd sums its processes), and of each
    /// process (`RLIMIT_CPU`, soft).
    pub cpu_s: Option<u64>,
    /// Size of a file a process writes, KiB (`RLIMIT_FSIZE`).
    pub file_kb: Option<u64>,
    /// Data segment of a process, KiB (`RLIMIT_DATA`).
    pub data_kb: Option<u64>,
    /// Stack of a process, KiB (`RLIMIT_STACK`).
    pub stack_kb: Option<u64>,
    /// Core file of a process, KiB (`RLIMIT_CORE`).
    pub core_kb: Option<u64>,
    /// Virtual memory of the whole job, KiB (sbatchd sums its processes).
    pub swap_kb: Option<u64>,
    /// Processes of the job at once.
    pub processes: Option<u32>,
    /// Threads of the job at once, over all its processes.
    pub threads: Option<u32>,
}

impl ResourceLimits {
    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        *self != ResourceLimits::default()
    }
}

/// BATCH_NEW_JOB_REPLY: sbatchd accepted (with the pid) or refused the job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewJobReply {
    /// The job.
    pub job: WireJobRef,
    /// The dispatch answered ([`JobSpecs::dispatch_seq`]).
    pub dispatch_seq: u32,
    /// What happened.
    pub outcome: NewJobOutcome,
}

/// The arms of a [`NewJobReply`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NewJobOutcome {
    /// The job's process exists.
    Started {
        /// Pid of the job's process (the shepherd's child).
        pid: i32,
        /// Process group of the job.
        pgid: i32,
        /// Job status bits as sbatchd sets them (RUN).
        job_status: u32,
    },
    /// sbatchd will not run the job; mbatchd returns it to PEND with the reason.
    Refused {
        /// Machine-readable reason code ([`REFUSE_NO_USER`], …).
        code: u32,
        /// What was wrong, for `bjobs -l`.
        message: String,
    },
}

/// The execution user does not exist on the host.
pub const REFUSE_NO_USER: u32 = 1;
/// The working directory or job files could not be prepared.
pub const REFUSE_SETUP: u32 = 2;
/// The host is shutting down or out of resources.
pub const REFUSE_HOST: u32 = 3;
/// A pre-execution command (the queue's `PRE_EXEC`, then `bsub -E`) exited non-zero, so the job
/// was not run: the code is this base plus the command's exit value (0 to 255; a command
/// killed by a signal counts as 128 plus the signal, as `sh` reports it). See
/// [`pre_exec_exit`].
pub const REFUSE_PRE_EXEC_BASE: u32 = 0x100;

/// The exit value of the pre-execution command that a refusal `code` reports, if it reports one
/// ([`REFUSE_PRE_EXEC_BASE`]).
pub fn pre_exec_exit(code: u32) -> Option<u8> {
    code.checked_sub(REFUSE_PRE_EXEC_BASE).and_then(|exit| u8::try_from(exit).ok())
}

/// BATCH_*_ACK: mbatchd confirms that the event for this stage is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobAck {
    /// The job.
    pub job: WireJobRef,
    /// The dispatch of the message acknowledged ([`JobSpecs::dispatch_seq`]).
    pub dispatch_seq: u32,
}

/// BATCH_JOB_EXECUTE: exec() happened; metadata only, never a state change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobExecute {
    /// The job.
    pub job: WireJobRef,
    /// The dispatch this run belongs to ([`JobSpecs::dispatch_seq`]).
    pub dispatch_seq: u32,
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
    /// Absolute working directory the job runs in.
    pub exec_cwd: String,
    /// When the job's process started, seconds since the epoch.
    pub exec_time: i64,
}

/// Resource usage of a finished job's process group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceUsage {
    /// User CPU time, milliseconds.
    pub user_time_ms: u64,
    /// System CPU time, milliseconds.
    pub system_time_ms: u64,
    /// Peak resident set size, KiB.
    pub max_rss_kb: u64,
}

/// BATCH_JOB_FINISH: the job terminated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFinish {
    /// The job.
    pub job: WireJobRef,
    /// The dispatch this run belongs to ([`JobSpecs::dispatch_seq`]).
    pub dispatch_seq: u32,
    /// Pid of the job's process.
    pub pid: i32,
    /// Raw wait status (as `waitpid` returns it).
    pub wait_status: i32,
    /// Why sbatchd ended the job, if it did ([`FINISH_NORMAL`], …).
    pub finish_reason: u32,
    /// When the job ended, seconds since the epoch.
    pub end_time: i64,
    /// Resource usage of the job.
    pub rusage: ResourceUsage,
}

/// The job ended on its own (or by a signal from outside LavaCore).
pub const FINISH_NORMAL: u32 = 0;
/// sbatchd killed the job at its run limit (`-W`).
pub const FINISH_RUN_LIMIT: u32 = 1;
/// sbatchd killed the job over its memory limit (`-M`).
pub const FINISH_MEM_LIMIT: u32 = 2;
/// The job was killed on request (`bkill`).
pub const FINISH_KILLED: u32 = 3;
/// The job could not be started after it was accepted (exec failed).
pub const FINISH_START_FAILED: u32 = 4;
/// `bkill -r` by the job's owner: mbatchd ended the job without waiting for
/// its host (LSF's TERM_FORCE_OWNER).
pub const FINISH_FORCE_OWNER: u32 = 5;
/// `bkill -r` by root or a cluster administrator (LSF's TERM_FORCE_ADMIN).
pub const FINISH_FORCE_ADMIN: u32 = 6;
/// The job never ran: a pre-execution command exited 99, or failed once too often with
/// `LOCAL_MAX_PREEXEC_RETRY_ACTION=EXIT` (mbatchd's records and `bjobs`; sbatchd reports a
/// pre-execution failure as a refusal, [`REFUSE_PRE_EXEC_BASE`]).
pub const FINISH_PRE_EXEC: u32 = 7;
/// The job was killed on request (`bkill`) of root or an administrator, not of its owner
/// (LSF's TERM_ADMIN): mbatchd's records and `bjobs` only; sbatchd reports such a kill as
/// [`FINISH_KILLED`], and mbatchd, which knows who asked, records this instead.
pub const FINISH_KILLED_ADMIN: u32 = 8;
/// sbatchd killed the job over its CPU time limit (LSF's TERM_CPULIMIT), or one of its
/// processes died of `SIGXCPU` at its own.
pub const FINISH_CPU_LIMIT: u32 = 9;
/// sbatchd killed the job over its process limit (LSF's TERM_PROCESSLIMIT).
pub const FINISH_PROCESS_LIMIT: u32 = 10;
/// sbatchd killed the job over its virtual memory limit (LSF's TERM_SWAP).
pub const FINISH_SWAP_LIMIT: u32 = 11;
/// sbatchd killed the job over its thread limit (LSF's TERM_THREADLIMIT).
pub const FINISH_THREAD_LIMIT: u32 = 12;

/// A signal action, as `bkill`/`bstop`/`bresume` request it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SignalAction {
    /// Suspend the job (SIGSTOP to the process group).
    Stop,
    /// Resume the job (SIGCONT to the process group).
    Continue,
    /// LSF's kill: SIGINT, then SIGTERM, then SIGKILL, spaced by the terminate interval.
    Terminate,
    /// Deliver one signal by number (`bkill -s`).
    Signal(u32),
}

/// BATCH_JOB_SIGNAL: mbatchd asks sbatchd to act on a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSignal {
    /// The job.
    pub job: WireJobRef,
    /// mbatchd's sequence number for this job's signals; replies echo it.
    pub signal_seq: u32,
    /// What to do.
    pub action: SignalAction,
}

/// BATCH_JOB_SIGNAL_REPLY: what the signal did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSignalReply {
    /// The job.
    pub job: WireJobRef,
    /// The sequence number of the [`JobSignal`] answered.
    pub signal_seq: u32,
    /// The outcome.
    pub outcome: SignalOutcome,
}

/// Outcome of a [`JobSignal`] on the execution host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SignalOutcome {
    /// The action was carried out.
    Delivered,
    /// sbatchd holds no such job.
    NoSuchJob,
    /// The job has already terminated; its FINISH is on its way.
    AlreadyFinished,
    /// The kernel refused the signal (errno).
    Failed(i32),
}

/// SBD_REGISTER: names the execution host at the other end of a connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SbdRegister {
    /// The host's name as lsf.cluster lists it.
    pub host_name: String,
    /// CPUs the host offers (slots when lsb.hosts says `!`).
    pub n_cpus: u32,
    /// sbatchd's process id, for the log.
    pub sbd_pid: u32,
}

/// SBD_REGISTER_ACK: mbatchd knows the channel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SbdRegisterAck {
    /// Cluster name.
    pub cluster_name: String,
    /// mbatchd's host name.
    pub master_name: String,
}

// ---------------------------------------------------------------------------
// commands <-> mbatchd
// ---------------------------------------------------------------------------

/// Envelope of every command request: who asks, and which attempt this is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRequest<T> {
    /// A credential sealed by the caller's local daemon (see `lava-net`).
    #[serde(with = "lava_xdr::opaque")]
    pub credential: Vec<u8>,
    /// Chosen by the command once per logical request and reused on every
    /// retry; mbatchd answers a repeated id with its first answer.
    pub request_id: RequestId,
    /// The request itself.
    pub body: T,
}

/// [`CredentialRequest::audience_kind`] of a credential for mbatchd (`lava_net::Audience::MBATCHD`).
pub const AUDIENCE_MBATCHD: u32 = 1;
/// [`CredentialRequest::audience_kind`] of a credential for the coordinator.
pub const AUDIENCE_COORDINATOR: u32 = 2;
/// [`CredentialRequest::audience_kind`] of a credential for an sbatchd (`bsub -I`'s attach).
pub const AUDIENCE_SBATCHD: u32 = 3;

/// Body of CREDENTIAL_REQUEST: the daemon the credential is for (`lava_net::Audience`);
/// sbatchd seals it into the token, and any other daemon refuses the token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialRequest {
    /// The kind of daemon (`lava_net::Audience::MBATCHD`, `COORDINATOR`).
    pub audience_kind: u32,
    /// Its cluster's name.
    pub audience_cluster: String,
}

/// CREDENTIAL_REPLY: the local daemon read the caller's uid and gid from the
/// kernel (SO_PEERCRED) and sealed them with the cluster key; the command
/// passes the token on unchanged in its next [`ClientRequest`]. A token is
/// single-use and valid only within the authentication window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialReply {
    /// The sealed credential (`lava_net::Credential::seal`).
    #[serde(with = "lava_xdr::opaque")]
    pub token: Vec<u8>,
}

/// A request id: 128 random bits chosen by the command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequestId {
    /// High 64 bits.
    pub high: u64,
    /// Low 64 bits.
    pub low: u64,
}

/// SUBMIT_JOB: what `bsub` asks for. (`Default` is an empty request, which
/// validation refuses for its empty command: a base for fixtures.)
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitRequest {
    /// `-q`; empty for the default queue.
    pub queue: String,
    /// `-J`; empty for none.
    pub job_name: String,
    /// The command line or the script read from standard input.
    pub command: String,
    /// Working directory (`-cwd`, else the caller's).
    pub cwd: String,
    /// The caller's home directory.
    pub home_dir: String,
    /// `-i`.
    pub input_file: String,
    /// `-o` / `-oo`.
    pub output_file: String,
    /// `-e` / `-eo`.
    pub error_file: String,
    /// Bit 0: `-oo`; bit 1: `-eo`.
    pub file_flags: u32,
    /// `-n`; 0 means 1.
    pub n_slots: u32,
    /// `-m`: candidate hosts, empty for any.
    pub hosts: Vec<String>,
    /// `-P`; empty for the default project.
    pub project: String,
    /// `-W`, seconds; 0 for none.
    pub run_limit_s: u64,
    /// `-M`, KiB; 0 for none.
    pub mem_limit_kb: u64,
    /// `-H`: submit held (PSUSP).
    pub hold: bool,
    /// `-R`: the resource requirement string as typed; empty for none.
    pub res_req: String,
    /// `-w`: the dependency expression as typed; empty for none.
    pub dependency: String,
    /// `-x`: the job wants its hosts to itself.
    pub exclusive: bool,
    /// `-L`: the login shell that runs the job, empty for `/bin/sh`.
    pub login_shell: String,
    /// `-E`: a pre-execution command run on the execution host before the job; empty for none.
    pub pre_exec: String,
    /// `-b`: not dispatched before this time, seconds since the epoch; 0 for no such limit.
    pub begin_time: i64,
    /// The submitting host.
    pub from_host: String,
    /// The caller's umask.
    pub umask: u32,
    /// The caller's environment.
    pub env: Vec<EnvVar>,
    /// `-Ep`: a post-execution command run on the execution host after the job; empty for none.
    pub post_exec: String,
    /// `-c -F -D -S -C -v -p -T`: the job's own resource limits; `None` when none is given
    /// (boxed: most jobs have none, and a pending job's submission stays small).
    pub limits: Option<Box<ResourceLimits>>,
}

/// SUBMIT_JOB_REPLY.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitReply {
    /// The new job's id.
    pub job_id: u32,
    /// The queue it went to.
    pub queue: String,
    /// Whether that queue is the default one (`bsub` says "default queue").
    pub default_queue: bool,
}

/// Which jobs a [`JobQuery`] or [`SignalRequest`] selects by state.
pub mod state_filter {
    /// Unfinished jobs (bjobs' default).
    pub const UNFINISHED: u32 = 0;
    /// All jobs, including recently finished ones (`-a`).
    pub const ALL: u32 = 1;
    /// Finished jobs only (`-d`).
    pub const DONE: u32 = 2;
    /// Pending jobs only (`-p`).
    pub const PENDING: u32 = 3;
    /// Running jobs only (`-r`).
    pub const RUNNING: u32 = 4;
    /// Suspended jobs only (`-s`).
    pub const SUSPENDED: u32 = 5;
}

/// JOB_QUERY: what `bjobs` asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobQuery {
    /// Explicit jobs; when non-empty the state filter is ignored (LSF shows
    /// a named job whatever its state).
    pub jobs: Vec<WireJobRef>,
    /// `-u`: empty for the caller, `all` for everyone, else a user name.
    pub user: String,
    /// One of [`state_filter`].
    pub state_filter: u32,
    /// `-q`; empty for any.
    pub queue: String,
    /// `-m`; empty for any.
    pub host: String,
    /// `-J`; empty for any.
    pub job_name: String,
    /// Paging: only jobs with a larger id; 0 from the first. A command sets it to
    /// the `next_after` of the previous answer until that is 0.
    pub after_job: u32,
    /// Paging within a job array: with a non-zero `after_job`, only the elements of
    /// that array above this index (and the jobs after it); 0 resumes after the
    /// whole id. Set from `next_after_index`.
    pub after_index: u32,
}

/// JOB_QUERY_REPLY: one page of the answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobQueryReply {
    /// The selected jobs, in job-id order.
    pub jobs: Vec<JobInfo>,
    /// Ids asked for explicitly that do not exist.
    pub not_found: Vec<WireJobRef>,
    /// 0 when this page ends the answer; else the id of its last job, to be asked
    /// for as `after_job` (mbatchd cuts an answer into pages that fit a frame).
    pub next_after: u32,
    /// With `next_after`: the array index of the page's last job, to be asked for as
    /// `after_index` (0 when the page ended with a whole job or array).
    pub next_after_index: u32,
}

/// One job as `bjobs` shows it (`Default`: an empty record, for tests and fixtures).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobInfo {
    /// The job.
    pub job: WireJobRef,
    /// Owner.
    pub user_name: String,
    /// Job status bits (LavaLite values: PEND 0x01 … DONE 0x40).
    pub status: u32,
    /// Queue.
    pub queue: String,
    /// Submission host.
    pub from_host: String,
    /// Execution hosts, one entry per slot.
    pub exec_hosts: Vec<String>,
    /// Job name.
    pub job_name: String,
    /// Command.
    pub command: String,
    /// Project.
    pub project: String,
    /// Submission working directory.
    pub cwd: String,
    /// Absolute execution directory once known.
    pub exec_cwd: String,
    /// `-o` file.
    pub output_file: String,
    /// `-e` file.
    pub error_file: String,
    /// Slots.
    pub n_slots: u32,
    /// Submission time.
    pub submit_time: i64,
    /// Dispatch time, 0 if never dispatched.
    pub start_time: i64,
    /// Finish time, 0 if not finished.
    pub end_time: i64,
    /// Pid, 0 if not known.
    pub pid: i32,
    /// Exit code for EXIT jobs (wait status decoded as LSF shows it).
    pub exit_code: i32,
    /// Pending or suspending reason, empty when none.
    pub reason: String,
    /// Resource usage once finished.
    pub rusage: ResourceUsage,
    /// Why a finished job ended: one of [`FINISH_NORMAL`], [`FINISH_RUN_LIMIT`], … (bjobs'
    /// EXIT_REASON); [`FINISH_NORMAL`] while unfinished.
    pub finish_reason: u32,
    /// `-R` as submitted; empty for none.
    pub res_req: String,
    /// `-w` as submitted; empty for none.
    pub dependency: String,
    /// `-W`, seconds; 0 for none.
    pub run_limit_s: u64,
    /// `-M`, KiB; 0 for none.
    pub mem_limit_kb: u64,
    /// `-E` as submitted; empty for none.
    pub pre_exec: String,
    /// `-Ep` as submitted; empty for none.
    pub post_exec: String,
    /// The resource limits beyond `-W` and `-M` the job runs with (as
    /// [`JobSpecs::limits`], from its queue's configuration as it is now).
    pub limits: ResourceLimits,
}

/// SIGNAL_JOBS: what `bkill`, `bstop` and `bresume` ask for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalRequest {
    /// The jobs; empty together with `all_jobs` for `bkill 0`.
    pub jobs: Vec<WireJobRef>,
    /// `0` was given: every job of `user` (the caller by default).
    pub all_jobs: bool,
    /// `-u`; empty for the caller.
    pub user: String,
    /// The action.
    pub action: SignalAction,
}

/// SIGNAL_JOBS_REPLY: one outcome per selected job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalReply {
    /// Outcomes, in the order the jobs were named (or job-id order for `0`).
    pub results: Vec<SignalResult>,
}

/// The outcome for one job of a [`SignalRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalResult {
    /// The job.
    pub job: WireJobRef,
    /// What happened.
    pub outcome: SignalRequestOutcome,
}

/// What mbatchd did with one job of a [`SignalRequest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SignalRequestOutcome {
    /// The signal is logged and on its way.
    Accepted,
    /// No such job.
    NotFound,
    /// The caller neither owns the job nor administers the cluster.
    PermissionDenied,
    /// The job has already finished.
    AlreadyFinished,
    /// The signal only makes sense for a started job and this one is pending
    /// (LSF: "Job has not started yet"; only kill, stop and resume act on
    /// pending jobs).
    NotStarted,
}

/// HOST_QUERY: what `bhosts` asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostQuery {
    /// The hosts to show, by name; empty for every execution host.
    pub hosts: Vec<String>,
}

/// HOST_QUERY_REPLY.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostQueryReply {
    /// The selected hosts, in `lsf.cluster` order.
    pub hosts: Vec<HostInfo>,
    /// Names asked for that are not execution hosts of the cluster.
    pub not_found: Vec<String>,
}

/// [`HostInfo::status`]: the host takes jobs.
pub const HOST_OK: u32 = 0;
/// [`HostInfo::status`]: the master lim marked the host unavailable.
pub const HOST_UNAVAIL: u32 = 1;
/// [`HostInfo::status`]: lim sees the host, but its sbatchd is not connected.
pub const HOST_UNREACH: u32 = 2;
/// [`HostInfo::status`]: every job slot of the host is in use.
pub const HOST_CLOSED_FULL: u32 = 3;
/// [`HostInfo::status`]: an exclusive job runs on the host (LSF's `closed_Excl`).
pub const HOST_CLOSED_EXCL: u32 = 5;
/// [`HostInfo::status`]: the host's lim is locked (`lsadmin limlock`; LSF's `closed_Lock`).
pub const HOST_CLOSED_LOCK: u32 = 6;
/// [`HostInfo::status`]: a load index of the host is beyond its lsf.cluster threshold (lim
/// reports it `busy`; LSF's `closed_Busy`).
pub const HOST_CLOSED_BUSY: u32 = 7;
/// [`HostInfo::max_slots`]: no limit (`MXJ` `-`, or no `lsb.hosts` row).
pub const HOST_SLOTS_UNLIMITED: u32 = u32::MAX;

/// One execution host as `bhosts` shows it. Job counts are in slots, as LSF counts them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfo {
    /// The host's name.
    pub name: String,
    /// One of [`HOST_OK`], [`HOST_UNAVAIL`], [`HOST_UNREACH`], [`HOST_CLOSED_FULL`],
    /// [`HOST_CLOSED_ADM`], [`HOST_CLOSED_EXCL`], [`HOST_CLOSED_LOCK`],
    /// [`HOST_CLOSED_BUSY`]; the command prints LSF's word for it
    /// (`closed` for every closed state, the reason with `-w` and `-l`).
    pub status: u32,
    /// Job slots (`MXJ`, else the CPUs sbatchd registered with); 0 when not yet
    /// known, [`HOST_SLOTS_UNLIMITED`] for no limit.
    pub max_slots: u32,
    /// Slots held by started, unfinished jobs.
    pub n_jobs: u32,
    /// Slots of running jobs.
    pub n_run: u32,
    /// Slots of jobs suspended by the system.
    pub n_ssusp: u32,
    /// Slots of jobs suspended by a user.
    pub n_ususp: u32,
    /// Reserved slots (no reservation yet: always 0).
    pub n_reserved: u32,
    /// `JL/U`: job slots per user on the host; [`HOST_SLOTS_UNLIMITED`] for no limit.
    pub user_slot_limit: u32,
}

/// QUEUE_QUERY: what `bqueues` asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueQuery {
    /// The queues to show, by name; empty for every queue.
    pub queues: Vec<String>,
}

/// QUEUE_QUERY_REPLY.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueQueryReply {
    /// The selected queues, highest priority first (`lsb.queues` order among equals).
    pub queues: Vec<QueueInfo>,
    /// Names asked for that are not queues of the cluster.
    pub not_found: Vec<String>,
}

/// One queue as `bqueues` shows it. Job counts are in slots, as LSF counts them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueInfo {
    /// `QUEUE_NAME`.
    pub name: String,
    /// `PRIORITY`.
    pub priority: u32,
    /// Whether jobs submitted without `-q` go here.
    pub default: bool,
    /// `HOSTS`: where its jobs may run; empty for every host.
    pub hosts: Vec<String>,
    /// Slots of its unfinished jobs (pending, running and suspended).
    pub n_jobs: u32,
    /// Slots of its pending jobs (PEND and PSUSP, as LSF counts them).
    pub n_pend: u32,
    /// Slots of its running jobs (RUN, and UNKWN: running as far as mbatchd knows).
    pub n_run: u32,
    /// Slots of its suspended started jobs (USUSP, SSUSP).
    pub n_susp: u32,
    /// `badmin qclose`: the queue refuses submissions.
    pub closed: bool,
    /// `badmin qinact`: the queue dispatches nothing.
    pub inactive: bool,
    /// `NICE`.
    pub nice: i32,
    /// `DESCRIPTION`; empty for none.
    pub description: String,
    /// `USERS`: who may submit; empty for every user.
    pub users: Vec<String>,
    /// `QJOB_LIMIT`: job slots of the queue; [`QUEUE_UNLIMITED`] for none.
    pub max_slots: u32,
    /// `UJOB_LIMIT` (JL/U); [`QUEUE_UNLIMITED`] for none.
    pub user_slot_limit: u32,
    /// `PJOB_LIMIT` (JL/P), in thousandths of a job slot per CPU (it may be a
    /// fraction); [`QUEUE_UNLIMITED`] for none.
    pub processor_slot_limit_milli: u32,
    /// `HJOB_LIMIT` (JL/H); [`QUEUE_UNLIMITED`] for none.
    pub host_slot_limit: u32,
    /// `RUNLIMIT`, seconds; 0 for none.
    pub run_limit_s: u64,
    /// `MEMLIMIT`, KiB; 0 for none.
    pub mem_limit_kb: u64,
    /// Slots of its jobs suspended by the system (SSUSP).
    pub n_ssusp: u32,
    /// Slots of its jobs suspended by a user while running (USUSP).
    pub n_ususp: u32,
    /// Reserved slots (no reservation yet: always 0).
    pub n_reserved: u32,
    /// `PRE_EXEC`; empty for none.
    pub pre_exec: String,
    /// `POST_EXEC`; empty for none.
    pub post_exec: String,
    /// The queue's maximum resource limits (`CPULIMIT`, `FILELIMIT`, ...).
    pub limits: ResourceLimits,
    /// `JOB_STARTER`; empty for none.
    pub job_starter: String,
    /// The queue's scheduling policies, `QUEUE_POLICY_*` bits (`bqueues -l`'s `SCHEDULING
    /// POLICIES:` line).
    pub policies: u32,
    /// The defaults of the limits that have one (`RUNLIMIT`, seconds; 0 for none).
    pub default_run_limit_s: u64,
    /// `MEMLIMIT`'s default, KiB; 0 for none.
    pub default_mem_limit_kb: u64,
    /// The defaults of the other limits that have one (`CPULIMIT`, `DATALIMIT`,
    /// `PROCESSLIMIT`, `THREADLIMIT`).
    pub default_limits: ResourceLimits,
}

/// [`QueueInfo::policies`]: `FAIRSHARE` is set.
pub const QUEUE_POLICY_FAIRSHARE: u32 = 1;
/// [`QueueInfo::policies`]: `EXCLUSIVE = y`.
pub const QUEUE_POLICY_EXCLUSIVE: u32 = 2;
/// [`QueueInfo::policies`]: `INTERACTIVE = NO`.
pub const QUEUE_POLICY_NO_INTERACTIVE: u32 = 4;
/// [`QueueInfo::policies`]: `INTERACTIVE = ONLY`.
pub const QUEUE_POLICY_ONLY_INTERACTIVE: u32 = 8;

/// A [`QueueInfo`] limit that is not set.
pub const QUEUE_UNLIMITED: u32 = u32::MAX;

impl Default for QueueInfo {
    /// An unnamed, open and active queue with no job, no limit and no restriction.
    fn default() -> QueueInfo {
        QueueInfo {
            name: String::new(),
            priority: 0,
            default: false,
            hosts: Vec::new(),
            n_jobs: 0,
            n_pend: 0,
            n_run: 0,
            n_susp: 0,
            closed: false,
            inactive: false,
            nice: 0,
            description: String::new(),
            users: Vec::new(),
            max_slots: QUEUE_UNLIMITED,
            user_slot_limit: QUEUE_UNLIMITED,
            processor_slot_limit_milli: QUEUE_UNLIMITED,
            host_slot_limit: QUEUE_UNLIMITED,
            run_limit_s: 0,
            mem_limit_kb: 0,
            n_ssusp: 0,
            n_ususp: 0,
            n_reserved: 0,
            pre_exec: String::new(),
            post_exec: String::new(),
            limits: ResourceLimits::default(),
            job_starter: String::new(),
            policies: 0,
            default_run_limit_s: 0,
            default_mem_limit_kb: 0,
            default_limits: ResourceLimits::default(),
        }
    }
}

/// STATUS_QUERY: what `badmin showstatus` asks for (no fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusQuery {}

/// STATUS_QUERY_REPLY: mbatchd's view of the cluster and its own counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReply {
    /// The cluster's name.
    pub cluster_name: String,
    /// The master host's name.
    pub master_name: String,
    /// mbatchd's pid.
    pub pid: u32,
    /// When this mbatchd started, in seconds since the epoch.
    pub started_at: i64,
    /// Execution hosts by `bhosts` status: ok, closed, unreach, unavail.
    pub hosts: [u32; 4],
    /// Jobs in memory by state: pending (PEND), running (RUN), suspended (PSUSP,
    /// USUSP, SSUSP), finished (DONE, EXIT, not yet cleaned).
    pub jobs: [u32; 4],
    /// Users with unfinished jobs.
    pub active_users: u32,
    /// The daemon's counters by name (frames by operation, refusals by reason,
    /// event log appends, fsyncs and their latency, queue depths), sorted by name.
    pub counters: Vec<StatusCounter>,
}

/// RECONFIG: what `badmin reconfig` asks for (no fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconfigRequest {}

/// RECONFIG_REPLY: whether the new configuration is in force.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconfigReply {
    /// The new configuration was taken; when false the running one stays.
    pub applied: bool,
    /// What was wrong (file, line, problem), or what changed.
    pub message: String,
}

/// One named counter of [`StatusReply`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCounter {
    /// Its name, e.g. `frames.SUBMIT_JOB` or `log.fsyncs`.
    pub name: String,
    /// Its value.
    pub value: u64,
}

/// SBD_STATUS_QUERY: what `lsadmin sbdstatus` asks the local sbatchd (no fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SbdStatusQuery {}

/// SBD_STATUS_REPLY: the local sbatchd's view of its link and its counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SbdStatusReply {
    /// The host this sbatchd serves.
    pub host: String,
    /// The master host's name (where mbatchd runs).
    pub master_name: String,
    /// sbatchd's pid.
    pub pid: u32,
    /// When this sbatchd started, in seconds since the epoch.
    pub started_at: i64,
    /// Whether mbatchd acknowledged the registration on the current connection.
    pub connected: bool,
    /// Since when the link is in its current state (connected or not), seconds since the epoch.
    pub link_since: i64,
    /// The counters by name (jobs by phase, messages sent and resent by operation, record
    /// persists and fsyncs, shepherds, link, credentials), in a stable order.
    pub counters: Vec<StatusCounter>,
}

/// PEEK_JOB: what `bpeek` asks for: the job's standard output from `offset` on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeekRequest {
    /// The job.
    pub job: WireJobRef,
    /// First byte wanted (0 from the start; `bpeek -f` asks again from where it got).
    pub offset: u64,
}

/// SBD_PEEK: mbatchd asks the execution host's sbatchd for a [`PeekRequest`] it checked
/// (the job runs there, the caller owns it or administers the cluster).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SbdPeek {
    /// Chosen by mbatchd per channel; the reply echoes it.
    pub peek_id: u64,
    /// What was asked.
    pub request: PeekRequest,
}

/// PEEK_JOB_REPLY (and, with the peek id, SBD_PEEK_REPLY's body).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeekReply {
    /// One of the `PEEK_*` codes.
    pub code: u32,
    /// Why, for the codes other than [`PEEK_OK`].
    pub message: String,
    /// At most [`PEEK_BYTES_MAX`] bytes of the output file from the asked offset.
    #[serde(with = "lava_xdr::opaque")]
    pub data: Vec<u8>,
    /// The offset after `data`.
    pub next_offset: u64,
}

/// SBD_PEEK_REPLY.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SbdPeekReply {
    /// The [`SbdPeek::peek_id`] answered.
    pub peek_id: u64,
    /// The answer.
    pub reply: PeekReply,
}

/// Most output bytes one [`PeekReply`] carries.
pub const PEEK_BYTES_MAX: u32 = 256 * 1024;
/// [`PeekReply::code`]: `data` is the output.
pub const PEEK_OK: u32 = 0;
/// [`PeekReply::code`]: no such job.
pub const PEEK_NOT_FOUND: u32 = 1;
/// [`PeekReply::code`]: the job is not running (pending or finished).
pub const PEEK_NOT_RUNNING: u32 = 2;
/// [`PeekReply::code`]: the caller neither owns the job nor administers the cluster.
pub const PEEK_DENIED: u32 = 3;
/// [`PeekReply::code`]: the output could not be read (`message` says why).
pub const PEEK_FAILED: u32 = 4;

// ---------------------------------------------------------------------------
// bwait <-> mbatchd (docs/protocols/batch.md, "bwait")
// ---------------------------------------------------------------------------

/// WAIT_QUERY: `bwait -w`'s condition, asked again until it holds or never can.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitQuery {
    /// A dependency expression as `bsub -w` takes it; after the first answer, the
    /// [`WaitQueryReply::condition`] it gave (every job named by id).
    pub condition: String,
    /// 0 for the first question; then the [`WaitQueryReply::registered`] of the first answer.
    pub registered: u64,
}

/// WAIT_QUERY_REPLY.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitQueryReply {
    /// One of the `WAIT_*` codes.
    pub code: u32,
    /// Why, for [`WAIT_REFUSED`] (LSF's wording of a `bsub -w` refusal).
    pub message: String,
    /// The condition with each job its first question named by name or id resolved to the
    /// job id meant then: what every later question sends.
    pub condition: String,
    /// The submission number the condition was registered at: a job submitted after it is
    /// never one it names (ids wrap). Every later question sends it back.
    pub registered: u64,
}

/// [`WaitQueryReply::code`]: the condition holds.
pub const WAIT_HOLDS: u32 = 0;
/// [`WaitQueryReply::code`]: it does not hold yet, and still can.
pub const WAIT_NOT_YET: u32 = 1;
/// [`WaitQueryReply::code`]: it does not hold and never will (a job it needs DONE ended EXIT).
pub const WAIT_NEVER: u32 = 2;
/// [`WaitQueryReply::code`]: refused: a syntax error, or a job that is not known.
pub const WAIT_REFUSED: u32 = 3;

// ---------------------------------------------------------------------------
// bsub -I/-Ip/-Is <-> the execution host's sbatchd (docs/protocols/batch.md, "Interactive jobs")
// ---------------------------------------------------------------------------

/// Bits of `file_flags` ([`SubmitRequest`], [`JobSpecs`]) beyond the two truncation bits:
/// the job is interactive, the mark mbatchd keeps in the job's JOB_NEW (so replay knows it)
/// and hands to sbatchd in BATCH_NEW_JOB. LSF's `SUB_INTERACTIVE`, `SUB_PTY`,
/// `SUB_PTY_SHELL`.
pub mod submit_flags {
    /// `-oo`: truncate the output file.
    pub const TRUNCATE_OUTPUT: u32 = 0b0_0001;
    /// `-eo`: truncate the error file.
    pub const TRUNCATE_ERROR: u32 = 0b0_0010;
    /// `-I`, `-Ip`, `-Is`: the job's standard streams go to `bsub`'s terminal.
    pub const INTERACTIVE: u32 = 0b0_0100;
    /// `-Ip`, `-Is`: through a pseudo-terminal on the execution host.
    pub const PTY: u32 = 0b0_1000;
    /// `-Is`: the pseudo-terminal in shell mode (`bsub`'s terminal fully raw).
    pub const PTY_SHELL: u32 = 0b1_0000;
    /// Every bit defined.
    pub const ALL: u32 = 0b1_1111;
}

/// Most bytes one [`InteractiveData`] carries.
pub const INTERACTIVE_DATA_BYTES_MAX: u32 = 16 * 1024;
/// Longest frame body of the interactive messages (a data frame and its fields, or an
/// attach with its credential).
pub const INTERACTIVE_BODY_BYTES_MAX: u32 = INTERACTIVE_DATA_BYTES_MAX + 64;

/// INTERACTIVE_ATTACH: the first frame `bsub` sends to the execution host's sbatchd
/// (`LSB_SBD_PORT`, or the host's `LAVA_SBD_PORT`), on a connection of its own.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractiveAttach {
    /// A credential for this cluster's sbatchd (`AUDIENCE_SBATCHD`), sealed by `bsub`'s
    /// local sbatchd: the job's owner only may attach.
    #[serde(with = "lava_xdr::opaque")]
    pub credential: Vec<u8>,
    /// The job.
    pub job: WireJobRef,
    /// The terminal's rows and columns (0 when `bsub`'s input is no terminal).
    pub rows: u32,
    /// Columns.
    pub cols: u32,
}

/// [`InteractiveAttachReply::code`]: attached; data follows.
pub const ATTACH_OK: u32 = 0;
/// [`InteractiveAttachReply::code`]: the credential was refused.
pub const ATTACH_AUTH: u32 = 1;
/// [`InteractiveAttachReply::code`]: no such interactive job runs on this host (or not yet).
pub const ATTACH_NOT_FOUND: u32 = 2;
/// [`InteractiveAttachReply::code`]: the caller does not own the job.
pub const ATTACH_DENIED: u32 = 3;
/// [`InteractiveAttachReply::code`]: a terminal is attached already (one attach per job).
pub const ATTACH_BUSY: u32 = 4;
/// [`InteractiveAttachReply::code`]: the job has not started yet; try again.
pub const ATTACH_NOT_READY: u32 = 5;

/// INTERACTIVE_ATTACH_REPLY.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractiveAttachReply {
    /// [`ATTACH_OK`], or why not.
    pub code: u32,
    /// What went wrong, for `bsub` to print.
    pub message: String,
}

/// [`InteractiveData::stream`]: the job's standard input (from `bsub`).
pub const STREAM_STDIN: u32 = 0;
/// [`InteractiveData::stream`]: the job's standard output (or its pseudo-terminal).
pub const STREAM_STDOUT: u32 = 1;
/// [`InteractiveData::stream`]: the job's standard error (`-I` only).
pub const STREAM_STDERR: u32 = 2;

/// INTERACTIVE_DATA: bytes of one stream; on [`STREAM_STDIN`] no bytes means end of input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractiveData {
    /// [`STREAM_STDIN`], [`STREAM_STDOUT`] or [`STREAM_STDERR`].
    pub stream: u32,
    /// At most [`INTERACTIVE_DATA_BYTES_MAX`] bytes.
    #[serde(with = "lava_xdr::opaque")]
    pub data: Vec<u8>,
}

/// INTERACTIVE_WINSIZE: the terminal's size changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractiveWinsize {
    /// Rows.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
}

/// INTERACTIVE_SIGNAL: a signal for the job's foreground process group (`bsub -Ip`'s
/// Ctrl-C, Ctrl-\, Ctrl-Z, and the SIGCONT when `bsub` is resumed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractiveSignal {
    /// The signal number (1 to 64).
    pub signal: u32,
}

/// INTERACTIVE_EXIT: the job's process has ended and all its output was sent before this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InteractiveExit {
    /// The wait status, as `waitpid` reports it.
    pub wait_status: i32,
}

/// REQUEST_FAILED: the request as a whole was refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// One of the `ERR_*` codes.
    pub code: u32,
    /// The message the command prints, LSF's wording where LSF has one.
    pub message: String,
}

/// The frame was malformed or its body did not decode.
pub const ERR_BAD_REQUEST: u32 = 1;
/// The credential was missing, forged, stale or replayed.
pub const ERR_AUTH: u32 = 2;
/// The named queue does not exist.
pub const ERR_NO_QUEUE: u32 = 3;
/// The request is valid but not allowed (queue closed, limits).
pub const ERR_REJECTED: u32 = 4;
/// The operation is not supported by this mbatchd.
pub const ERR_UNSUPPORTED: u32 = 5;
/// mbatchd is starting or cannot write its log; try again.
pub const ERR_TRY_AGAIN: u32 = 6;
/// This master candidate does not lead; the message is the host name of the candidate
/// that does, a space and its IP address (same `LSB_MBD_PORT`). An extension (docs/protocols/batch.md).
pub const ERR_NOT_MASTER: u32 = 7;
/// No master candidate leads (an election is under way, or no majority of the candidates
/// is up and connected); the message says which. An extension (docs/protocols/batch.md).
pub const ERR_NO_MASTER: u32 = 8;

/// A flag of a request's frame header `status` word (0 otherwise in requests): the command
/// takes a read-only query's answer from a master candidate that has had no leader for a
/// while, from its last applied state, marked by a [`Operation::StaleState`] frame before
/// the answer. Only JOB_QUERY, HOST_QUERY, QUEUE_QUERY and STATUS_QUERY may carry it. An
/// extension (docs/protocols/batch.md).
pub const REQUEST_ACCEPT_STALE: u32 = 1;

/// STALE_STATE: what the answer that follows it is made of, for the command's warning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleState {
    /// The master candidate that answers (its name in `LSF_MASTER_LIST`).
    pub host: String,
    /// The replicated log's index the state holds every committed entry through (and no
    /// entry that is not committed).
    pub applied_index: u64,
    /// The commit index this candidate knows (at least `applied_index`).
    pub commit_index: u64,
    /// Milliseconds since this candidate last knew a leader; [`STALE_NEVER`] when it has
    /// known none since it started.
    pub leader_seen_ms_ago: u64,
    /// Milliseconds since this mbatchd started.
    pub up_ms: u64,
}

/// [`StaleState::leader_seen_ms_ago`] of a candidate that has known no leader since it started.
pub const STALE_NEVER: u64 = u64::MAX;

/// [`HostInfo::status`]: an administrator closed the host (`badmin hclose`).
pub const HOST_CLOSED_ADM: u32 = 4;

// ---------------------------------------------------------------------------
// job and administrator control, history (opcodes 50-55)
// ---------------------------------------------------------------------------

/// JOB_CONTROL: what `bmod`, `bswitch`, `btop`, `bbot`, `brequeue`, `brun` and
/// `bkill -r` ask for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobControlRequest {
    /// The jobs, in the order named.
    pub jobs: Vec<WireJobRef>,
    /// What to do to each.
    pub action: JobControlAction,
}

/// The arms of a [`JobControlRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobControlAction {
    /// `bmod`: change submission options of a pending job.
    Modify(JobModify),
    /// `bswitch`: move the job to another queue.
    Switch {
        /// The queue.
        queue: String,
    },
    /// `btop` / `bbot`: change the job's place among the pending jobs of its queue.
    Move {
        /// `btop` (counted from the top) or `bbot` (from the bottom).
        to_top: bool,
        /// 1 for the very top (bottom).
        position: u32,
        /// `-u`: an administrator moves the job relative to its owner's jobs only
        /// (a user always does).
        owner_list: bool,
    },
    /// `brequeue`: a job goes back to PEND to run again (same id); a started
    /// one is killed first and requeued when its run ends.
    Requeue {
        /// `-d`: DONE jobs are requeued.
        done: bool,
        /// `-e`: EXIT jobs are requeued.
        exit: bool,
        /// `-r` (LSF's default): RUN, USUSP and SSUSP jobs are killed and requeued.
        running: bool,
        /// `-p`: PEND and PSUSP jobs go to the end of their queue.
        pending: bool,
        /// `-H`: the requeued job is held (PSUSP) instead of PEND.
        hold: bool,
    },
    /// `brun -m "host ..."`: an administrator starts a pending job now on
    /// these hosts, whatever the queue, user and host limits say.
    Run {
        /// The hosts, as typed (one slot per CPU of each, LSF's rule).
        hosts: Vec<String>,
    },
    /// `bkill -r`: the job is killed as `bkill` kills it and marked EXIT at
    /// once, without waiting for its execution host to report the end.
    ForceExit,
}

/// `bmod`'s changes; `None` leaves a field as it is. The `-Xn` forms (remove
/// the option) are the empty or zero value: `-Jn` is `Some("")`, `-Wn` `Some(0)`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobModify {
    /// `-q`.
    pub queue: Option<String>,
    /// `-J` / `-Jn`.
    pub job_name: Option<String>,
    /// `-n` / `-nn` (0: back to 1 slot).
    pub n_slots: Option<u32>,
    /// `-W` / `-Wn`, seconds.
    pub run_limit_s: Option<u64>,
    /// `-M` / `-Mn`, KiB.
    pub mem_limit_kb: Option<u64>,
    /// `-R` / `-Rn`.
    pub res_req: Option<String>,
}

/// JOB_CONTROL_REPLY: one outcome per job, in the order named.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobControlReply {
    /// The outcomes.
    pub results: Vec<JobControlResult>,
}

/// The outcome for one job of a [`JobControlRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobControlResult {
    /// The job.
    pub job: WireJobRef,
    /// Whether the change was made (logged).
    pub done: bool,
    /// The line the command prints, LSF's wording (without the newline).
    pub message: String,
}

/// What an [`AdminControlRequest`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdminAction {
    /// `badmin hclose`.
    HostClose,
    /// `badmin hopen`.
    HostOpen,
    /// `badmin qclose`.
    QueueClose,
    /// `badmin qopen`.
    QueueOpen,
    /// `badmin qact`.
    QueueActivate,
    /// `badmin qinact`.
    QueueInactivate,
    /// `badmin mbdrestart`.
    MbdRestart,
}

/// ADMIN_CONTROL: an administrator's order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminControlRequest {
    /// What to do.
    pub action: AdminAction,
    /// The hosts or queues; empty for every one (and for `mbdrestart`).
    pub names: Vec<String>,
}

/// ADMIN_CONTROL_REPLY: one outcome per host or queue (one for `mbdrestart`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminControlReply {
    /// The outcomes.
    pub results: Vec<AdminResult>,
}

/// The outcome for one name of an [`AdminControlRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminResult {
    /// The host or queue.
    pub name: String,
    /// Whether the order was carried out.
    pub done: bool,
    /// The line the command prints, LSF's wording (without the newline).
    pub message: String,
}

/// HISTORY_QUERY: what `bhist` asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryQuery {
    /// Explicit jobs; when non-empty the user and state filters are ignored.
    pub jobs: Vec<WireJobRef>,
    /// `-u`: empty for the caller, `all` for everyone, else a user name.
    pub user: String,
    /// One of [`state_filter`], applied to each job's last state in the log.
    pub state_filter: u32,
    /// Paging: only jobs with a larger id; 0 from the first.
    pub after_job: u32,
}

/// HISTORY_QUERY_REPLY: one page of histories.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryReply {
    /// The jobs, in job-id order.
    pub jobs: Vec<JobHistory>,
    /// Ids asked for explicitly that the log does not hold.
    pub not_found: Vec<WireJobRef>,
    /// 0 when this page ends the answer; else the id to ask for as `after_job`.
    pub next_after: u32,
}

/// One job's history, as the event log tells it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobHistory {
    /// The job.
    pub job: WireJobRef,
    /// Owner.
    pub user_name: String,
    /// `-J`, empty when none was given.
    pub job_name: String,
    /// The command.
    pub command: String,
    /// `-P`, empty for the default project.
    pub project: String,
    /// Every recorded change, oldest first.
    pub entries: Vec<HistoryEntry>,
}

/// One change of a [`JobHistory`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// When, in milliseconds since the epoch.
    pub time_ms: u64,
    /// The job status bits from then on; 0 when the status did not change.
    pub status: u32,
    /// The narrative line `bhist -l` prints after the time.
    pub text: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: opcodes keep LavaLite's numbers for the spec's enum and round-trip.
    #[test]
    fn opcodes_match_the_spec_and_round_trip() {
        assert_eq!(Operation::NewJob.code(), 30);
        assert_eq!(Operation::JobSignalManyReply.code(), 40);
        assert_eq!((Operation::PeekJob.code(), Operation::SbdPeekReply.code()), (70, 73));
        for op in Operation::ALL {
            assert_eq!(Operation::from_code(op.code()), Some(op), "{}", op.name());
        }
        assert_eq!(Operation::from_code(0), None);
        assert_eq!(Operation::from_code(41), None);
        assert_eq!(Operation::JobControl.code(), 50);
        assert_eq!(Operation::HistoryQueryReply.code(), 55);
        assert_eq!(Operation::StaleState.code(), 56);
        assert_eq!(Operation::from_code(57), None);
    }
}
