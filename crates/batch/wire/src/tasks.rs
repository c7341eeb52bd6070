//! The bodies of `blaunch`'s messages (opcodes 90 to 100): a task grant asked of the local
//! sbatchd, a task started by the task host's sbatchd, the task's output, end and signals
//! between `blaunch` and the task's shepherd, the job's signals forwarded by its first
//! host's sbatchd to the task hosts, and the tasks' resource usage reported to it
//! (docs/protocols/batch.md, "Parallel tasks").

use serde::{Deserialize, Serialize};

use crate::{EnvVar, ResourceUsage, WireJobRef};

/// The first bytes of a [`TaskGrant`]'s sealed data: nothing else sealed with the cluster
/// key starts with them (`LTG1` grants had no memory limit; they are no longer accepted).
pub const TASK_GRANT_MAGIC: [u8; 4] = *b"LTG2";
/// The first bytes of a [`TaskSignalOrder`]'s sealed data.
pub const TASK_SIGNAL_ORDER_MAGIC: [u8; 4] = *b"LTS1";
/// Largest TASK_JOB_SIGNAL body a task port reads.
pub const TASK_JOB_SIGNAL_BYTES_MAX: u32 = 4096;
/// Largest TASK_START body a task port reads (the environment is most of it).
pub const TASK_START_BYTES_MAX: u32 = 1 << 20;
/// Most output bytes one [`TaskOutput`] carries.
pub const TASK_OUTPUT_BYTES_MAX: u32 = 64 * 1024;
/// [`TaskOutput::stream`]: the task's standard output.
pub const TASK_STDOUT: u32 = 1;
/// [`TaskOutput::stream`]: the task's standard error.
pub const TASK_STDERR: u32 = 2;

/// TASK_GRANT_REQUEST (`blaunch` → local sbatchd): may the caller start a task of `job` on
/// `host`? The caller's uid comes from the kernel (SO_PEERCRED), never from this body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskGrantRequest {
    /// The caller's job (`LSB_JOBID`, `LSB_JOBINDEX`).
    pub job: WireJobRef,
    /// The host the task is to run on.
    pub host: String,
}

/// TASK_GRANT_REPLY: the grant, sealed with the cluster key ([`TaskGrant`] after
/// [`TASK_GRANT_MAGIC`], then lava-net's trailer); `blaunch` hands it on unchanged in
/// [`TaskStart::grant`]. Good once, within the authentication window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskGrantReply {
    /// The sealed grant.
    #[serde(with = "lava_xdr::opaque")]
    pub grant: Vec<u8>,
}

/// What a grant says: the job's sbatchd on `from_host` vouches that the job's user may
/// start one task of `job` on `to_host`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskGrant {
    /// The job.
    pub job: WireJobRef,
    /// The job's execution user.
    pub user: String,
    /// Their uid on the job's first host.
    pub uid: u32,
    /// Their primary gid there.
    pub gid: u32,
    /// The host whose sbatchd runs the job (and issued the grant).
    pub from_host: String,
    /// The only host whose sbatchd may start the task.
    pub to_host: String,
    /// The cluster.
    pub cluster: String,
    /// The job's memory limit (`bsub -M`) in KiB, 0 for none: the task shepherd holds each
    /// task's processes to it.
    pub mem_limit_kb: u64,
}

/// TASK_START (`blaunch` → the task host's sbatchd, first and only frame before the
/// answer): run `command` through `/bin/sh -c` as the grant's user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStart {
    /// [`TaskGrantReply::grant`].
    #[serde(with = "lava_xdr::opaque")]
    pub grant: Vec<u8>,
    /// The command line, as `blaunch` joined its words.
    pub command: String,
    /// The task's environment: `blaunch`'s own (the job's).
    pub env: Vec<EnvVar>,
    /// The working directory (`blaunch`'s); the user's home, then `/tmp`, when it does
    /// not exist on the task host.
    pub cwd: String,
}

/// TASK_STARTED: the task's process runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStarted {
    /// Its pid (and process group) on the task host.
    pub pid: i32,
    /// The task host.
    pub host: String,
}

/// TASK_OUTPUT: bytes the task wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskOutput {
    /// [`TASK_STDOUT`] or [`TASK_STDERR`].
    pub stream: u32,
    /// At most [`TASK_OUTPUT_BYTES_MAX`] bytes.
    #[serde(with = "lava_xdr::opaque")]
    pub data: Vec<u8>,
}

/// TASK_EXIT: how the task ended; nothing follows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskExit {
    /// Raw wait status, as `wait4` gave it.
    pub wait_status: i32,
    /// The task's resource usage (its process and the children it waited for).
    pub rusage: ResourceUsage,
}

/// TASK_SIGNAL: deliver `signal` (1 to 64) to the task's process group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSignal {
    /// The signal number.
    pub signal: u32,
}

/// TASK_JOB_SIGNAL (the job's first host's sbatchd → a task host's sbatchd, on its task
/// port): deliver a signal to every task of a job there. The order is sealed with the
/// cluster key ([`TaskSignalOrder`] after [`TASK_SIGNAL_ORDER_MAGIC`], then lava-net's
/// trailer), so only a daemon can give it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskJobSignal {
    /// The sealed order.
    #[serde(with = "lava_xdr::opaque")]
    pub order: Vec<u8>,
}

/// What a sealed signal order says: deliver `signal` to the tasks of `job` that run as
/// `uid` on `to_host`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSignalOrder {
    /// The job.
    pub job: WireJobRef,
    /// The job's execution user's uid (only task shepherds of that uid are signalled).
    pub uid: u32,
    /// The signal number (1 to 64).
    pub signal: u32,
    /// The job's first host, whose sbatchd gives the order.
    pub from_host: String,
    /// The only host whose sbatchd carries it out.
    pub to_host: String,
    /// The cluster.
    pub cluster: String,
}

/// TASK_JOB_SIGNAL_REPLY: the order was carried out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskJobSignalReply {
    /// How many tasks of the job run on the host (each was signalled).
    pub tasks: u32,
}

/// TASK_USAGE (`blaunch` → its local sbatchd, over the Unix socket): a task of the caller's
/// job has ended with this resource usage; it is added to the job's. The caller's uid comes
/// from the kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskUsage {
    /// The caller's job.
    pub job: WireJobRef,
    /// The task's host.
    pub host: String,
    /// The task's resource usage ([`TaskExit::rusage`]).
    pub rusage: ResourceUsage,
}

/// TASK_USAGE_REPLY: the usage is durable in the job's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskUsageReply {}
