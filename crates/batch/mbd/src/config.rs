//! The configuration mbatchd's logic decides with: queues, hosts, cluster
//! administrators and the timing limits, as the shell read them from
//! `lsb.queues`, `lsb.hosts`, `lsf.cluster.NAME` and `lsb.params`.
//!
//! The logic never reads a file; it takes an [`MbdConfig`] value, checks it
//! once in [`crate::Mbd::new`], and keeps it for its lifetime.

use std::collections::BTreeSet;

use lava_batch_ll::{HostName, QueueName, UserName};

use crate::MbdError;

/// LSF's `CLEAN_PERIOD` default: finished jobs stay visible for an hour.
pub const CLEAN_PERIOD_MS_DEFAULT: u64 = 3_600_000;
/// How long mbatchd waits for a reply before it resends NEW_JOB or JOB_SIGNAL.
pub const RESEND_INTERVAL_MS_DEFAULT: u64 = 5_000;
/// LSF's `JOB_TERMINATE_INTERVAL` default: SIGINT, SIGTERM, SIGKILL 10 s apart.
pub const JOB_TERMINATE_INTERVAL_S_DEFAULT: u32 = 10;
/// LSF's `MAX_JOBID` default.
pub const MAX_JOB_ID_DEFAULT: u32 = 999_999;
/// LSF's `MAX_JOB_ARRAY_SIZE` default: the highest array index, and so the most elements.
pub const MAX_JOB_ARRAY_SIZE_DEFAULT: u32 = 1000;
/// The largest `MAX_JOB_ARRAY_SIZE` LavaCore accepts (LSF allows up to 2147483646): every
/// element is a job record in memory, and one JOB_NEW makes them all in one step.
pub const JOB_ARRAY_SIZE_MAX: u32 = 1_000_000;

/// One queue of `lsb.queues`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// `QUEUE_NAME`.
    pub name: QueueName,
    /// `PRIORITY`: jobs of a higher-priority queue are dispatched first.
    pub priority: u32,
    /// Whether this is the queue of jobs submitted without `-q` (`DEFAULT_QUEUE`).
    pub default: bool,
    /// `HOSTS`: where the queue's jobs may run; empty for every host.
    pub hosts: Vec<HostName>,
}

/// One execution host of the cluster (`lsf.cluster.NAME`, `lsb.hosts`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostConfig {
    /// The host's name.
    pub name: HostName,
    /// `MXJ`: job slots; `None` for the CPUs the host registers with.
    pub max_jobs: Option<u32>,
}

/// A cluster administrator (`ClusterAdmins`); root is always one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClusterAdmin {
    /// By uid.
    Uid(u32),
    /// By login name.
    User(UserName),
}

/// Everything the logic needs to know about the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MbdConfig {
    /// The cluster's name (`lsid`, SBD_REGISTER_ACK, MBD_START).
    pub cluster_name: String,
    /// The host mbatchd runs on.
    pub master_host: HostName,
    /// The queues, in `lsb.queues` order.
    pub queues: Vec<QueueConfig>,
    /// The execution hosts, in `lsf.cluster` order; dispatch tries them in this order.
    pub hosts: Vec<HostConfig>,
    /// Cluster administrators besides root.
    pub admins: Vec<ClusterAdmin>,
    /// How long a finished job stays in memory (`CLEAN_PERIOD`), ms.
    pub clean_period_ms: u64,
    /// How long to wait for NEW_JOB_REPLY or SIGNAL_REPLY before resending, ms.
    pub resend_interval_ms: u64,
    /// `JOB_TERMINATE_INTERVAL`, passed to sbatchd with every job, seconds.
    pub job_terminate_interval_s: u32,
    /// `MAX_JOBID`: the highest job id; submission is refused beyond it (never wraps).
    pub max_job_id: u32,
    /// `MAX_JOB_ARRAY_SIZE`: the highest index an array may have (so also its most elements).
    pub max_job_array_size: u32,
}

impl MbdConfig {
    /// A configuration with LSF's defaults and no queue or host yet.
    pub fn new(cluster_name: impl Into<String>, master_host: HostName) -> MbdConfig {
        MbdConfig {
            cluster_name: cluster_name.into(),
            master_host,
            queues: Vec::new(),
            hosts: Vec::new(),
            admins: Vec::new(),
            clean_period_ms: CLEAN_PERIOD_MS_DEFAULT,
            resend_interval_ms: RESEND_INTERVAL_MS_DEFAULT,
            job_terminate_interval_s: JOB_TERMINATE_INTERVAL_S_DEFAULT,
            max_job_id: MAX_JOB_ID_DEFAULT,
            max_job_array_size: MAX_JOB_ARRAY_SIZE_DEFAULT,
        }
    }

    /// Checks what the logic relies on: unique names, at most one default
    /// queue, queue hosts that exist, non-zero intervals.
    pub fn validate(&self) -> Result<(), MbdError> {
        let bad = |problem: String| Err(MbdError::Config(problem));
        let mut queue_names = BTreeSet::new();
        for queue in &self.queues {
            if !queue_names.insert(&queue.name) {
                return bad(format!("queue {} is defined twice", queue.name));
            }
        }
        if self.queues.iter().filter(|q| q.default).count() > 1 {
            return bad("more than one default queue".to_owned());
        }
        let mut host_names = BTreeSet::new();
        for host in &self.hosts {
            if !host_names.insert(&host.name) {
                return bad(format!("host {} is listed twice", host.name));
            }
        }
        for queue in &self.queues {
            if let Some(host) = queue.hosts.iter().find(|h| !host_names.contains(h)) {
                return bad(format!("queue {}: HOSTS names {host}, which is not a cluster host", queue.name));
            }
        }
        if self.resend_interval_ms == 0 {
            return bad("the resend interval is 0".to_owned());
        }
        if self.max_job_id == 0 {
            return bad("MAX_JOBID is 0".to_owned());
        }
        if !(1..=JOB_ARRAY_SIZE_MAX).contains(&self.max_job_array_size) {
            return bad(format!(
                "MAX_JOB_ARRAY_SIZE {} is outside 1 to {JOB_ARRAY_SIZE_MAX}",
                self.max_job_array_size
            ));
        }
        Ok(())
    }

    /// The queue called `name`.
    pub fn queue(&self, name: &QueueName) -> Option<&QueueConfig> {
        self.queues.iter().find(|q| &q.name == name)
    }

    /// The default queue, if one is marked.
    pub fn default_queue(&self) -> Option<&QueueConfig> {
        self.queues.iter().find(|q| q.default)
    }

    /// The host called `name`.
    pub fn host(&self, name: &HostName) -> Option<&HostConfig> {
        self.hosts.iter().find(|h| &h.name == name)
    }

    /// Whether `uid`/`user` administers the cluster (root always does).
    pub fn is_admin(&self, uid: u32, user: &UserName) -> bool {
        uid == 0
            || self.admins.iter().any(|admin| match admin {
                ClusterAdmin::Uid(admin_uid) => *admin_uid == uid,
                ClusterAdmin::User(name) => name == user,
            })
    }
}
