//! The configuration mbatchd's logic decides with: queues, hosts, cluster
//! administrators, the timing limits and the per-user limits, as the shell read
//! them from `lsb.queues`, `lsb.hosts`, `lsf.cluster.NAME`, `lsb.params` and
//! `lsb.users`.
//!
//! The logic never reads a file; it takes an [`MbdConfig`] value, checks it
//! once in [`crate::Mbd::new`], and keeps it for its lifetime.

use std::collections::{BTreeMap, BTreeSet};

use lava_batch_ll::{HostName, QueueName, UserName};
use lava_batch_wire as wire;

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

/// LavaCore's `LAVA_MAX_JOB_BYTES` default: a submission (command or script,
/// environment, every other text) of at most 1 MiB.
pub const MAX_JOB_BYTES_DEFAULT: u64 = 1 << 20;

/// LavaCore's `LAVA_MAX_PEND_BYTES` default: one user's pending jobs hold at most 2 GiB
/// of submissions together.
pub const MAX_PEND_BYTES_DEFAULT: u64 = 2 << 30;

/// Our `JOB_ACCEPT_INTERVAL` default in [`MbdConfig::new`] is 0 (LSF's is 1, which
/// `lsb.params` gives when it does not set the key): a host may take several jobs per turn.
/// LSF's `MBD_SLEEP_TIME` default: a dispatch turn every minute besides the
/// turns that submissions and finishes start.
pub const MBD_SLEEP_TIME_MS_DEFAULT: u64 = 60_000;

/// A queue limit on `-W` or `-M` (`RUNLIMIT`, `MEMLIMIT`): the value a job
/// gets when it asks for none, and the most it may ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueLimit {
    /// Given to a job that asks for no limit; `None` gives it `max`.
    pub default: Option<u64>,
    /// The largest limit a job may ask for.
    pub max: u64,
}

impl QueueLimit {
    /// The limit a job runs with when it asked for `asked` (0: none).
    pub fn effective(limit: Option<&QueueLimit>, asked: u64) -> u64 {
        match limit {
            Some(limit) if asked == 0 => limit.default.unwrap_or(limit.max),
            _ => asked,
        }
    }
}

/// A queue's resource limits beyond `RUNLIMIT` and `MEMLIMIT` (docs/batch.md, "Resource
/// limits"): the ones with a default and a maximum, and the ones LSF gives one value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueResourceLimits {
    /// `CPULIMIT`, seconds.
    pub cpu_s: Option<QueueLimit>,
    /// `DATALIMIT`, KB.
    pub data_kb: Option<QueueLimit>,
    /// `PROCESSLIMIT`.
    pub processes: Option<QueueLimit>,
    /// `THREADLIMIT`.
    pub threads: Option<QueueLimit>,
    /// `FILELIMIT`, KB.
    pub file_kb: Option<u64>,
    /// `CORELIMIT`, KB.
    pub core_kb: Option<u64>,
    /// `STACKLIMIT`, KB.
    pub stack_kb: Option<u64>,
    /// `SWAPLIMIT`, KB.
    pub swap_kb: Option<u64>,
}

impl QueueResourceLimits {
    /// The limits a job of the queue runs with when it asked for `asked`: its own, else the
    /// queue's default, else the queue's maximum.
    pub fn effective(&self, asked: &wire::ResourceLimits) -> wire::ResourceLimits {
        either(&either(asked, &self.defaults()), &self.maxima())
    }

    /// Whether a job's own limits go beyond one of the queue's maxima.
    pub fn exceeded_by(&self, asked: &wire::ResourceLimits) -> bool {
        let max = self.maxima();
        let beyond =
            |asked: Option<u64>, max: Option<u64>| asked.zip(max).is_some_and(|(asked, max)| asked > max);
        let count = |n: Option<u32>| n.map(u64::from);
        beyond(asked.cpu_s, max.cpu_s)
            || beyond(asked.file_kb, max.file_kb)
            || beyond(asked.data_kb, max.data_kb)
            || beyond(asked.stack_kb, max.stack_kb)
            || beyond(asked.core_kb, max.core_kb)
            || beyond(asked.swap_kb, max.swap_kb)
            || beyond(count(asked.processes), count(max.processes))
            || beyond(count(asked.threads), count(max.threads))
    }

    /// The defaults of the limits that have one (`CPULIMIT`, `DATALIMIT`, `PROCESSLIMIT`,
    /// `THREADLIMIT`), as `bqueues -l` shows them.
    pub fn defaults(&self) -> wire::ResourceLimits {
        self.of_ranges(|limit| limit.default)
    }

    /// The queue's maxima, as `bqueues -l` shows them.
    pub fn maxima(&self) -> wire::ResourceLimits {
        wire::ResourceLimits {
            file_kb: self.file_kb,
            stack_kb: self.stack_kb,
            core_kb: self.core_kb,
            swap_kb: self.swap_kb,
            ..self.of_ranges(|limit| Some(limit.max))
        }
    }

    /// `pick` of each limit that has a default and a maximum; the others none.
    fn of_ranges(&self, pick: impl Fn(QueueLimit) -> Option<u64>) -> wire::ResourceLimits {
        let count =
            |limit: Option<QueueLimit>| limit.and_then(&pick).map(|n| u32::try_from(n).unwrap_or(u32::MAX));
        wire::ResourceLimits {
            cpu_s: self.cpu_s.and_then(&pick),
            data_kb: self.data_kb.and_then(&pick),
            processes: count(self.processes),
            threads: count(self.threads),
            ..wire::ResourceLimits::default()
        }
    }
}

/// Each limit of `first`, else `second`'s.
fn either(first: &wire::ResourceLimits, second: &wire::ResourceLimits) -> wire::ResourceLimits {
    wire::ResourceLimits {
        cpu_s: first.cpu_s.or(second.cpu_s),
        file_kb: first.file_kb.or(second.file_kb),
        data_kb: first.data_kb.or(second.data_kb),
        stack_kb: first.stack_kb.or(second.stack_kb),
        core_kb: first.core_kb.or(second.core_kb),
        swap_kb: first.swap_kb.or(second.swap_kb),
        processes: first.processes.or(second.processes),
        threads: first.threads.or(second.threads),
    }
}

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
    /// `USERS`: who may submit to the queue; `None` for everyone.
    pub users: Option<Vec<UserName>>,
    /// `QJOB_LIMIT`: slots the queue's started jobs may hold.
    pub qjob_limit: Option<u32>,
    /// `UJOB_LIMIT`: slots one user's started jobs of the queue may hold.
    pub ujob_limit: Option<u32>,
    /// `PJOB_LIMIT`, in thousandths of a job slot per CPU: the queue's started jobs may hold
    /// PJOB_LIMIT × (the host's CPUs) slots on one host, rounded up (LSF's rule).
    pub pjob_limit_milli: Option<u32>,
    /// `HJOB_LIMIT`: slots the queue's started jobs may hold on one host.
    pub hjob_limit: Option<u32>,
    /// `RUNLIMIT`, seconds: the default and the maximum of `-W`.
    pub run_limit_s: Option<QueueLimit>,
    /// `MEMLIMIT`, KB: the default and the maximum of `-M`.
    pub mem_limit_kb: Option<QueueLimit>,
    /// `CPULIMIT`, `PROCESSLIMIT`, `CORELIMIT` and the other resource limits.
    pub limits: QueueResourceLimits,
    /// `EXCLUSIVE = y`: the queue accepts `bsub -x`.
    pub exclusive: bool,
    /// `FAIRSHARE = USER_SHARES[[user, shares] ...]`: the shares by user
    /// (`default` for every user not listed); `None` for first come, first served.
    pub fairshare: Option<Vec<(String, u32)>>,
    /// `DESCRIPTION`, for `bqueues -l`; empty for none.
    pub description: String,
    /// `NICE` (-20 to 19): the niceness the queue's jobs run at.
    pub nice: i32,
    /// `PRE_EXEC`: run on the execution host before the job's own `-E`; empty for none.
    pub pre_exec: String,
    /// `POST_EXEC`: run on the execution host after the job's own `-Ep`; empty for none.
    pub post_exec: String,
    /// `JOB_STARTER`: the command line the queue's jobs run through; empty for none.
    pub job_starter: String,
    /// `INTERACTIVE`: whether the queue takes interactive jobs, batch jobs, or both.
    pub interactive: QueueInteractive,
    /// `LOCAL_MAX_PREEXEC_RETRY_ACTION` of the queue, overriding `lsb.params`'s.
    pub preexec_retry_action: Option<PreExecRetryAction>,
}

/// Which jobs a queue takes (`INTERACTIVE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueInteractive {
    /// `YES` (LSF's default): batch and interactive jobs.
    #[default]
    Yes,
    /// `NO`: batch jobs only ("Queue does not accept interactive jobs").
    No,
    /// `ONLY`: interactive jobs only ("Queue only accepts interactive jobs").
    Only,
}

/// What happens to a job whose pre-execution commands failed `LOCAL_MAX_PREEXEC_RETRY`
/// times (`LOCAL_MAX_PREEXEC_RETRY_ACTION`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PreExecRetryAction {
    /// `SUSPEND` (LSF's default): the job is held (PSUSP) until `bresume`.
    #[default]
    Suspend,
    /// `EXIT`: the job ends EXIT with the last pre-execution command's exit value.
    Exit,
}

impl QueueConfig {
    /// Its scheduling policies, as `bqueues -l` names them (`wire::QUEUE_POLICY_*`).
    pub fn policies(&self) -> u32 {
        let bit = |set: bool, bit: u32| if set { bit } else { 0 };
        bit(self.fairshare.is_some(), wire::QUEUE_POLICY_FAIRSHARE)
            | bit(self.exclusive, wire::QUEUE_POLICY_EXCLUSIVE)
            | bit(self.interactive == QueueInteractive::No, wire::QUEUE_POLICY_NO_INTERACTIVE)
            | bit(self.interactive == QueueInteractive::Only, wire::QUEUE_POLICY_ONLY_INTERACTIVE)
    }

    /// A queue with no limit, no user list and no fairshare.
    pub fn new(name: QueueName, priority: u32) -> QueueConfig {
        QueueConfig {
            name,
            priority,
            default: false,
            hosts: Vec::new(),
            users: None,
            qjob_limit: None,
            ujob_limit: None,
            pjob_limit_milli: None,
            hjob_limit: None,
            run_limit_s: None,
            mem_limit_kb: None,
            limits: QueueResourceLimits::default(),
            exclusive: false,
            fairshare: None,
            description: String::new(),
            nice: 0,
            pre_exec: String::new(),
            post_exec: String::new(),
            job_starter: String::new(),
            interactive: QueueInteractive::Yes,
            preexec_retry_action: None,
        }
    }

    /// The slots `PJOB_LIMIT` leaves the queue on a host with `n_cpus` CPUs (0 counts as
    /// one, as in LSF): the limit times the CPUs, rounded up; `None` without the limit.
    pub fn cpu_slot_limit(&self, n_cpus: u32) -> Option<u32> {
        let milli = u64::from(self.pjob_limit_milli?);
        let slots = (milli * u64::from(n_cpus.max(1))).div_ceil(1000);
        Some(u32::try_from(slots).unwrap_or(u32::MAX))
    }

    /// Whether `user` may submit to the queue.
    pub fn admits(&self, user: &UserName) -> bool {
        self.users.as_ref().is_none_or(|users| users.contains(user))
    }

    /// The fairshare shares of `user`: its own entry, else `default`'s, else 0.
    pub fn shares(&self, user: &UserName) -> u32 {
        let Some(shares) = &self.fairshare else { return 0 };
        let find = |name: &str| shares.iter().find(|(n, _)| n == name).map(|(_, s)| *s);
        find(user.as_str()).or_else(|| find("default")).unwrap_or(0)
    }
}

/// One execution host of the cluster (`lsf.cluster.NAME`, `lsb.hosts`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostConfig {
    /// The host's name.
    pub name: HostName,
    /// `MXJ`: job slots; `None` for the CPUs the host registers with.
    pub max_jobs: Option<u32>,
    /// `JL/U`: slots one user's jobs may hold on the host.
    pub user_job_limit: Option<u32>,
    /// The host type of `lsf.cluster` (`type` in `-R`), if given.
    pub host_type: Option<String>,
    /// The host model of `lsf.cluster` (`model` in `-R`), if given.
    pub model: Option<String>,
    /// The boolean resources of `lsf.cluster`'s `RESOURCES` column.
    pub resources: Vec<String>,
    /// lsb.hosts' scheduling thresholds (loadSched), by load index in lim's order
    /// (`lava_batch_ll::resreq::LOAD_INDEX_NAMES`): no job is dispatched to the host while
    /// an index is beyond its threshold ([`HostConfig::beyond_load_sched`]).
    pub load_sched: [Option<LoadThreshold>; 11],
}

/// A load threshold of lsb.hosts: a finite number (so that equality of configurations is
/// an equivalence).
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct LoadThreshold(f32);

impl Eq for LoadThreshold {}

impl LoadThreshold {
    /// `value` as a threshold; `None` when it is not a finite number.
    pub fn new(value: f64) -> Option<LoadThreshold> {
        // Load indices are f32 in lim's reports: the threshold is compared in their precision.
        let value = value as f32;
        value.is_finite().then_some(LoadThreshold(value))
    }

    /// The threshold.
    pub fn value(self) -> f32 {
        self.0
    }
}

impl HostConfig {
    /// The first load index of `load` beyond its scheduling threshold, LSF's way: above it
    /// for an index that grows with load (`r15s` to `ls`), below it for one that falls
    /// (`it`, `tmp`, `swp`, `mem`).
    pub fn beyond_load_sched(&self, load: &[f32; 11]) -> Option<usize> {
        (0..load.len()).find(|&idx| {
            self.load_sched[idx].is_some_and(|threshold| {
                let threshold = threshold.value();
                if idx < lava_batch_ll::resreq::INCREASING_LOADS {
                    load[idx] > threshold
                } else {
                    load[idx] < threshold
                }
            })
        })
    }

    /// A host with `max_jobs` slots and nothing else configured.
    pub fn new(name: HostName, max_jobs: Option<u32>) -> HostConfig {
        HostConfig {
            name,
            max_jobs,
            user_job_limit: None,
            host_type: None,
            model: None,
            resources: Vec::new(),
            load_sched: [None; 11],
        }
    }
}

/// The limits of one row of `lsb.users`' `User` section; `None` is unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserLimit {
    /// `MAX_JOBS`: job slots the running and suspended jobs (RUN, USUSP, SSUSP,
    /// UNKWN) may hold across the cluster; over it, jobs stay pending.
    pub max_jobs: Option<u32>,
    /// `MAX_PEND_JOBS`: pending jobs (PEND and PSUSP, an array's elements each
    /// counted); over it, submissions are refused.
    pub max_pend_jobs: Option<u32>,
}

/// A row of `lsb.users` naming a user group: its limits hold for the members'
/// jobs together (LSF's meaning of a group row without `@`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupLimit {
    /// The group's name, for messages.
    pub name: String,
    /// Its members, groups expanded; `None` for every user (a group of `all`).
    pub members: Option<BTreeSet<UserName>>,
    /// The limits.
    pub limit: UserLimit,
}

impl GroupLimit {
    /// Whether `user` is a member.
    pub fn contains(&self, user: &UserName) -> bool {
        self.members.as_ref().is_none_or(|members| members.contains(user))
    }
}

/// The per-user limits of `lsb.users` (`MAX_JOBS`, `MAX_PEND_JOBS`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserLimits {
    /// Rows naming one user.
    pub users: BTreeMap<UserName, UserLimit>,
    /// The `default` row: every user without a row of their own.
    pub default: UserLimit,
    /// Rows naming a user group, in file order.
    pub groups: Vec<GroupLimit>,
}

impl UserLimits {
    /// The row that holds for `user` alone: their own, else `default`.
    pub fn of(&self, user: &UserName) -> UserLimit {
        self.users.get(user).copied().unwrap_or(self.default)
    }

    /// Whether no row limits `MAX_JOBS` (dispatch then counts nothing per user).
    pub fn no_job_limits(&self) -> bool {
        self.default.max_jobs.is_none()
            && self.users.values().all(|limit| limit.max_jobs.is_none())
            && self.groups.iter().all(|group| group.limit.max_jobs.is_none())
    }
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
    /// `MAX_JOBID`: the highest job id; the next one after it is 1 again, skipping
    /// the ids still in memory (`state`).
    pub max_job_id: u32,
    /// `MBD_SLEEP_TIME`, ms: the longest time between two dispatch turns (load
    /// changes and begin times are seen at these turns at the latest).
    pub mbd_sleep_time_ms: u64,
    /// The boolean resources of `lsf.shared` that `-R` may name.
    pub resources: Vec<String>,
    /// Whether the turns that steps start (a submission, a finish, a registration:
    /// `sched`) are left to the shell: such a step only notes that a turn is wanted
    /// ([`crate::Mbd::turn_wanted`]) and the shell steps [`crate::Input::Dispatch`] when
    /// it chooses, so that one turn serves every step of a busy moment (mbatchd: after
    /// each turn of its loop, paced by what turns cost). `false`: every such step ends
    /// with its turn.
    pub deferred_dispatch: bool,
    /// `JOB_ACCEPT_INTERVAL`: after a host takes a job, it takes no other for this many
    /// `MBD_SLEEP_TIME`s (0: no wait; several jobs per turn).
    pub job_accept_interval: u32,
    /// `MAX_JOB_ARRAY_SIZE`: the highest index an array may have (so also its most elements).
    pub max_job_array_size: u32,
    /// `MAX_PEND_JOBS` of `lsb.params`: the pending jobs no user may exceed (a
    /// user's own `MAX_PEND_JOBS` may only lower it); `None` for unlimited.
    pub max_pend_jobs: Option<u32>,
    /// The per-user and per-group limits of `lsb.users`.
    pub user_limits: UserLimits,
    /// `LAVA_MAX_JOB_BYTES` of `lsb.params` (LavaCore's): the largest submission,
    /// in bytes (`SubmitSpec::submitted_bytes`).
    pub max_job_bytes: u64,
    /// `LAVA_MAX_PEND_BYTES` of `lsb.params` (LavaCore's): what one user's pending jobs
    /// may hold together, in bytes (`Job::pending_bytes`).
    pub max_pend_bytes: u64,
    /// MB in the unit of a memory amount written without one in `-R` (`mem`, `swp`):
    /// 1, or `LSF_UNIT_FOR_LIMITS` when that is larger than MB (1024 for GB), as in LSF.
    pub resreq_unit_mb: u64,
    /// `LOCAL_MAX_PREEXEC_RETRY` of `lsb.params`: how many times a job's pre-execution
    /// commands may fail before `LOCAL_MAX_PREEXEC_RETRY_ACTION` applies; `None` for
    /// unlimited (LSF's default).
    pub local_max_preexec_retry: Option<u32>,
    /// `LOCAL_MAX_PREEXEC_RETRY_ACTION` of `lsb.params` (a queue's own wins).
    pub preexec_retry_action: PreExecRetryAction,
    /// `DEFAULT_PROJECT` of `lsb.params`: the project of a job submitted without `-P`,
    /// written into its JOB_NEW unless it is LSF's own `default`.
    pub default_project: String,
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
            mbd_sleep_time_ms: MBD_SLEEP_TIME_MS_DEFAULT,
            resources: Vec::new(),
            deferred_dispatch: false,
            job_accept_interval: 0,
            max_job_array_size: MAX_JOB_ARRAY_SIZE_DEFAULT,
            max_pend_jobs: None,
            user_limits: UserLimits::default(),
            max_job_bytes: MAX_JOB_BYTES_DEFAULT,
            max_pend_bytes: MAX_PEND_BYTES_DEFAULT,
            resreq_unit_mb: 1,
            local_max_preexec_retry: None,
            preexec_retry_action: PreExecRetryAction::Suspend,
            default_project: crate::job::DEFAULT_PROJECT.to_owned(),
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
        if self.max_job_bytes == 0 {
            return bad("LAVA_MAX_JOB_BYTES is 0".to_owned());
        }
        if self.mbd_sleep_time_ms == 0 {
            return bad("MBD_SLEEP_TIME is 0".to_owned());
        }
        if !(1..=JOB_ARRAY_SIZE_MAX).contains(&self.max_job_array_size) {
            return bad(format!(
                "MAX_JOB_ARRAY_SIZE {} is outside 1 to {JOB_ARRAY_SIZE_MAX}",
                self.max_job_array_size
            ));
        }
        Ok(())
    }

    /// What happens to a job of `queue` once its pre-execution commands failed
    /// `LOCAL_MAX_PREEXEC_RETRY` times: the queue's action, else `lsb.params`'s.
    pub fn preexec_retry_action(&self, queue: &QueueName) -> PreExecRetryAction {
        self.queue(queue).and_then(|q| q.preexec_retry_action).unwrap_or(self.preexec_retry_action)
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
