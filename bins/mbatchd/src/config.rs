//! From the cluster's configuration files ([`lava_conf::ClusterConfig`]) to
//! what the logic decides with ([`MbdConfig`]) and what the shell needs
//! ([`ShellConfig`]: where to listen, where the key and the log are).
//!
//! # Mapping
//! - cluster name: `lsf.shared` / `LAVA_CLUSTER_NAME`; master host: the first
//!   server host of `lsf.cluster` (LSF's rule).
//! - execution hosts: the server hosts of `lsf.cluster`, in file order (the
//!   dispatch order). Job slots (`MXJ` of `lsb.hosts`): the host's own row,
//!   else a row naming a host group it belongs to, else the `default` row;
//!   `!` is "the CPUs sbatchd registers with" (`None`), a number is that many
//!   slots, `-`/`()` or no row at all is unlimited (LSF's default).
//! - queues: `lsb.queues` in file order with `PRIORITY`; `HOSTS` with host
//!   groups expanded (`all` is every host); the default queue is the first of
//!   `DEFAULT_QUEUE` (or the queues marked `DEFAULT = y`).
//! - administrators: `ClusterAdmins` of `lsf.cluster`, by login name (root always is one).
//! - queue policies: `USERS` (user groups of `lsb.users` expanded), `QJOB_LIMIT`,
//!   `UJOB_LIMIT`, `PJOB_LIMIT` (in thousandths), `HJOB_LIMIT`, `RUNLIMIT`, `MEMLIMIT`, `EXCLUSIVE`, `FAIRSHARE`,
//!   `PRE_EXEC`, `POST_EXEC`, `LOCAL_MAX_PREEXEC_RETRY_ACTION`, `NICE`, and the resource limits
//!   `CPULIMIT DATALIMIT PROCESSLIMIT THREADLIMIT FILELIMIT CORELIMIT STACKLIMIT SWAPLIMIT`;
//!   host policies: `JL/U` and the scheduling thresholds (loadSched of the load index
//!   columns) of the same `lsb.hosts` row as `MXJ`; `-R`'s static
//!   facts: `type`, `model` and `RESOURCES` of `lsf.cluster`, the Boolean
//!   resources of `lsf.shared`.
//! - `CLEAN_PERIOD`, `JOB_TERMINATE_INTERVAL`, `MAX_JOBID`, `MBD_SLEEP_TIME`,
//!   `JOB_ACCEPT_INTERVAL`, `MAX_JOB_ARRAY_SIZE`, `MAX_PEND_JOBS`, `LAVA_MAX_JOB_BYTES`,
//!   `LOCAL_MAX_PREEXEC_RETRY` and `LOCAL_MAX_PREEXEC_RETRY_ACTION` of `lsb.params`; its `MAX_JOB_NUM` goes to the shell
//!   ([`ShellConfig::max_job_num`]): it concerns the event log.
//! - per-user limits: `MAX_JOBS` and `MAX_PEND_JOBS` of `lsb.users`' `User` rows; a
//!   row naming a user group of the `UserGroup` section (nested groups expanded, a
//!   group of `all` is every user) limits its members together, `default` every user
//!   without a row of their own. `JL/P` is read by lava-conf and not enforced.
//!
//! # Which host it is, and where it listens
//! mbatchd runs as one master candidate ([`this_candidate`]): `--host NAME`, else the
//! candidate named like this machine (its kernel host name or that name's first label),
//! else the only candidate. The candidates are lsf.conf's `LSF_MASTER_LIST`, or without it
//! the first server host of `lsf.cluster` alone — so a cluster without the key runs
//! mbatchd as today, whatever the machine's name. Its name is the master name it tells
//! sbatchds and commands. It listens on that host's `LAVA_ADDR` when `lsf.cluster` gives
//! one (test and single-machine clusters put 127.0.0.x there), else on every address
//! (0.0.0.0), as LSF's mbatchd does; the port is `LSB_MBD_PORT` unless the
//! command line overrides it (`--port 0` for an ephemeral port). Resolving the
//! master's name to pick one interface is deliberately not done: a name that
//! resolves to 127.0.1.1 (Debian's /etc/hosts) would make mbatchd unreachable
//! from other hosts.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use lava_batch_ll::{HostName, QueueName, UserName};
use lava_conf::{ClusterConfig, ClusterHost, LogMask, Members, Mxj, ResourceKind};
use lava_mbd::{
    ClusterAdmin, GroupLimit, HostConfig, LoadThreshold, MbdConfig, PreExecRetryAction, QueueConfig,
    QueueInteractive, QueueLimit, QueueResourceLimits, UserLimit, UserLimits,
};

use crate::ShellError;

/// Deepest nesting of host groups followed (lava-conf only lets a group name
/// earlier groups, so this only guards against a configuration it let through).
const HOST_GROUP_DEPTH_MAX: usize = 64;

/// Everything mbatchd takes from the configuration.
#[derive(Clone, Debug)]
pub struct ShellConfig {
    /// What the logic decides with.
    pub mbd: MbdConfig,
    /// The address to listen on.
    pub listen_addr: IpAddr,
    /// The port to listen on (0: ephemeral).
    pub port: u16,
    /// The cluster key file (`LAVA_CLUSTER_KEY_FILE`).
    pub key_file: PathBuf,
    /// The folder of `lsb.events`: `$LSB_SHAREDIR/<cluster>/logdir`.
    pub event_log_dir: PathBuf,
    /// `MAX_JOB_NUM` of lsb.params: job finishes the event log holds before it is
    /// switched (a snapshot; `journal`'s module doc).
    pub max_job_num: u32,
    /// `LSF_LOG_MASK`.
    pub log_mask: LogMask,
    /// `LSF_LOGDIR`, where a detached mbatchd writes its log.
    pub daemon_log_dir: Option<PathBuf>,
    /// The master lim to poll for host availability (`None`: not configured).
    pub lim: Option<crate::lim_client::LimTarget>,
    /// `LAVA_STATE_RESERVE_MB`, in bytes: the space reserve beside the event log.
    pub state_reserve_bytes: u64,
    /// When `lsb.acct` is switched (lsb.params' `ACCT_ARCHIVE_*`, `MAX_ACCT_ARCHIVE_FILE`).
    pub acct_rule: crate::acct::AcctRule,
    /// Where the metrics are served (`LAVA_METRICS_ADDR`, `LAVA_MBD_METRICS_PORT`; `None`: not).
    pub metrics: Option<std::net::SocketAddr>,
    /// With two master candidates or more: the replicated log among them (docs/failover.md).
    pub replication: Option<Replication>,
}

/// mbatchd as one of several master candidates (`LSF_MASTER_LIST` with two names or more).
#[derive(Clone, Debug)]
pub struct Replication {
    /// This candidate's rank in `LSF_MASTER_LIST`, from 1.
    pub id: u64,
    /// Every candidate's name and replication address (`LAVA_ADDR`, else the name resolved,
    /// and `LAVA_MBD_REPL_PORT`), in `LSF_MASTER_LIST` order.
    pub candidates: Vec<(String, std::net::SocketAddr)>,
    /// This candidate's own folder under the log folder: `logdir/<candidate>`, so that
    /// candidates sharing `LSB_SHAREDIR` never share a file.
    pub dir: PathBuf,
}

/// The replicated log's setting for mbatchd as candidate `master`, if `LSF_MASTER_LIST`
/// names two candidates or more. A candidate without `LAVA_ADDR` is found by its name.
fn replication(
    conf: &ClusterConfig,
    master: &str,
    logdir: &std::path::Path,
) -> Result<Option<Replication>, ShellError> {
    let candidates = conf.master_candidates();
    if candidates.len() < 2 {
        return Ok(None);
    }
    let port = conf.lsf.mbd_repl_port;
    let mut addrs = Vec::with_capacity(candidates.len());
    let mut id = 0;
    for (at, candidate) in candidates.iter().enumerate() {
        if candidate.name.eq_ignore_ascii_case(master) {
            id = at as u64 + 1;
        }
        let addr = match candidate.addr {
            Some(ip) => std::net::SocketAddr::new(ip, port),
            None => std::net::ToSocketAddrs::to_socket_addrs(&(candidate.name.as_str(), port))
                .ok()
                .and_then(|mut found| found.next())
                .ok_or_else(|| {
                    ShellError::Config(format!(
                        "master candidate {}: no LAVA_ADDR in {} and the name does not resolve",
                        candidate.name,
                        conf.cluster.path.display()
                    ))
                })?,
        };
        addrs.push((candidate.name.clone(), addr));
    }
    Ok(Some(Replication { id, candidates: addrs, dir: logdir.join(master) }))
}

impl ShellConfig {
    /// Maps a loaded configuration for mbatchd running as candidate `host` (see
    /// [`this_candidate`]); `port` overrides `LSB_MBD_PORT`.
    pub fn from_cluster(
        conf: &ClusterConfig,
        port: Option<u16>,
        host: Option<&str>,
    ) -> Result<ShellConfig, ShellError> {
        let master = this_candidate(conf, host)?;
        let mbd = mbd_config(conf, &master.name)?;
        let logdir = conf.work_dir().join("logdir");
        let replication = replication(conf, &master.name, &logdir)?;
        Ok(ShellConfig {
            replication,
            mbd,
            listen_addr: master.addr.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            port: port.unwrap_or(conf.lsf.mbd_port),
            key_file: conf.lsf.cluster_key_file.clone(),
            event_log_dir: conf.work_dir().join("logdir"),
            max_job_num: conf.params.max_job_num,
            log_mask: conf.lsf.log_mask,
            daemon_log_dir: conf.lsf.logdir.clone(),
            lim: crate::lim_client::LimTarget::from_cluster(conf),
            metrics: conf.lsf.metrics_listen(conf.lsf.metrics_ports.mbd),
            state_reserve_bytes: conf.lsf.state_reserve_mb << 20,
            acct_rule: crate::acct::AcctRule::of(&conf.params),
        })
    }
}

fn host_name(conf: &ClusterConfig, name: &str) -> Result<HostName, ShellError> {
    HostName::parse("HOSTNAME", name).map_err(|error| {
        ShellError::Config(format!("{}: host {name:?}: {error}", conf.cluster.path.display()))
    })
}

/// The master candidate this mbatchd is: `host` if given (it must be a candidate), else the
/// candidate named like this machine, else the only candidate (module doc).
pub fn this_candidate<'a>(
    conf: &'a ClusterConfig,
    host: Option<&str>,
) -> Result<&'a ClusterHost, ShellError> {
    let candidates = conf.master_candidates();
    match host {
        None if candidates.len() == 1 => Ok(candidates[0]),
        None if candidates.is_empty() => {
            Err(ShellError::Config(format!("{} lists no server host", conf.cluster.path.display())))
        }
        _ => lava_conf::own_candidate(&candidates, host).map(|at| candidates[at]).map_err(ShellError::Config),
    }
}

/// The logic's configuration for mbatchd running as candidate `master`; see the module
/// doc for the mapping.
pub fn mbd_config(conf: &ClusterConfig, master: &str) -> Result<MbdConfig, ShellError> {
    let master = this_candidate(conf, Some(master))?;
    let mut config = MbdConfig::new(conf.cluster_name.clone(), host_name(conf, &master.name)?);
    let servers: Vec<&str> =
        conf.cluster.hosts.iter().filter(|host| host.server).map(|host| host.name.as_str()).collect();
    for name in &servers {
        let cluster_host = conf.cluster.host(name);
        config.hosts.push(HostConfig {
            name: host_name(conf, name)?,
            max_jobs: max_jobs(conf, name),
            user_job_limit: batch_host(conf, name).and_then(|row| row.jl_u),
            host_type: cluster_host.and_then(|h| h.host_type.clone()),
            model: cluster_host.and_then(|h| h.model.clone()),
            resources: cluster_host.map(|h| h.resources.clone()).unwrap_or_default(),
            load_sched: load_sched(batch_host(conf, name)),
        });
    }
    config.resources = conf
        .shared
        .resources
        .iter()
        .filter(|resource| resource.kind == ResourceKind::Boolean)
        .map(|resource| resource.name.clone())
        .collect();
    let default_queue = conf.default_queue().map(|queue| queue.name.as_str());
    for queue in &conf.queues.queues {
        let name = QueueName::parse("QUEUE_NAME", &queue.name).map_err(|error| {
            ShellError::Config(format!("{}: queue {:?}: {error}", conf.queues.path.display(), queue.name))
        })?;
        let hosts = match &queue.hosts {
            Members::All => Vec::new(),
            Members::Named(names) => {
                let mut expanded = Vec::new();
                for member in names {
                    expand_host(conf, &servers, member, 0, &mut expanded).map_err(|problem| {
                        ShellError::Config(format!(
                            "{}: queue {}: HOSTS: {problem}",
                            conf.queues.path.display(),
                            queue.name
                        ))
                    })?;
                }
                let mut seen = BTreeSet::new();
                expanded.retain(|host| seen.insert(host.clone()));
                expanded.into_iter().map(|host| host_name(conf, &host)).collect::<Result<Vec<_>, _>>()?
            }
        };
        let limit = |limit: Option<lava_conf::QueueLimit>| {
            limit.map(|limit| QueueLimit { default: limit.default, max: limit.max })
        };
        config.queues.push(QueueConfig {
            default: default_queue == Some(queue.name.as_str()),
            hosts,
            users: queue_users(conf, queue)?,
            qjob_limit: queue.qjob_limit,
            ujob_limit: queue.ujob_limit,
            pjob_limit_milli: queue.pjob_limit.map(pjob_limit_milli),
            hjob_limit: queue.hjob_limit,
            run_limit_s: limit(queue.run_limit_s),
            mem_limit_kb: limit(queue.mem_limit_kb),
            limits: QueueResourceLimits {
                cpu_s: limit(queue.cpu_limit_s),
                data_kb: limit(queue.data_limit_kb),
                processes: limit(queue.process_limit),
                threads: limit(queue.thread_limit),
                file_kb: queue.file_limit_kb,
                core_kb: queue.core_limit_kb,
                stack_kb: queue.stack_limit_kb,
                swap_kb: queue.swap_limit_kb,
            },
            exclusive: queue.exclusive,
            fairshare: queue.fairshare.clone(),
            description: queue.description.clone(),
            nice: queue.nice,
            pre_exec: queue.pre_exec.clone().unwrap_or_default(),
            post_exec: queue.post_exec.clone().unwrap_or_default(),
            job_starter: queue.job_starter.clone().unwrap_or_default(),
            interactive: match queue.interactive {
                lava_conf::Interactive::Yes => QueueInteractive::Yes,
                lava_conf::Interactive::No => QueueInteractive::No,
                lava_conf::Interactive::Only => QueueInteractive::Only,
            },
            preexec_retry_action: queue.preexec_retry_action.map(retry_action),
            ..QueueConfig::new(name, queue.priority)
        });
    }
    for admin in &conf.cluster.admins {
        let user = UserName::parse("Administrators", admin).map_err(|error| {
            ShellError::Config(format!("{}: ClusterAdmins: {error}", conf.cluster.path.display()))
        })?;
        config.admins.push(ClusterAdmin::User(user));
    }
    config.clean_period_ms = u64::from(conf.params.clean_period_s) * 1000;
    config.job_terminate_interval_s = conf.params.job_terminate_interval_s;
    config.max_job_id = conf.params.max_jobid;
    config.mbd_sleep_time_ms = u64::from(conf.params.mbd_sleep_time_s.max(1)) * 1000;
    // The loop runs the turns its steps want, paced by their cost (`shell`, "Dispatch turns").
    config.deferred_dispatch = true;
    config.job_accept_interval = conf.params.job_accept_interval;
    config.max_job_array_size = conf.params.max_job_array_size;
    config.max_pend_jobs = conf.params.max_pend_jobs;
    config.max_job_bytes = conf.params.max_job_bytes;
    config.max_pend_bytes = conf.params.max_pend_bytes;
    config.local_max_preexec_retry = conf.params.local_max_preexec_retry;
    config.preexec_retry_action = retry_action(conf.params.preexec_retry_action);
    config.default_project = conf.params.default_project.clone();
    // LSF: `-R` amounts are in MB unless LSF_UNIT_FOR_LIMITS names a larger unit.
    config.resreq_unit_mb = (conf.lsf.unit_for_limits.kb() >> 10).max(1);
    config.user_limits = user_limits(conf)?;
    config.validate()?;
    Ok(config)
}

/// `LOCAL_MAX_PREEXEC_RETRY_ACTION` as the logic names it.
fn retry_action(action: lava_conf::PreExecRetryAction) -> PreExecRetryAction {
    match action {
        lava_conf::PreExecRetryAction::Suspend => PreExecRetryAction::Suspend,
        lava_conf::PreExecRetryAction::Exit => PreExecRetryAction::Exit,
    }
}

/// `PJOB_LIMIT` in thousandths of a slot per CPU, as the logic counts it; lava-conf bounds
/// it by `PJOB_LIMIT_MAX`, so it fits.
fn pjob_limit_milli(slots_per_cpu: f64) -> u32 {
    debug_assert!((0.0..=lava_conf::PJOB_LIMIT_MAX).contains(&slots_per_cpu), "checked by lava-conf");
    // In range by the bound above: at most 10^9 thousandths.
    (slots_per_cpu * 1000.0).round() as u32
}

/// The scheduling thresholds (loadSched) of an lsb.hosts row, by load index in lim's order.
fn load_sched(row: Option<&lava_conf::BatchHost>) -> [Option<LoadThreshold>; 11] {
    let mut thresholds = [None; 11];
    for (idx, name) in lava_batch_ll::resreq::LOAD_INDEX_NAMES.iter().enumerate() {
        thresholds[idx] = row
            .and_then(|row| row.thresholds.get(*name))
            .and_then(|threshold| threshold.sched)
            .and_then(LoadThreshold::new);
    }
    thresholds
}

/// The `lsb.hosts` row of a host: its own, else its group's, else `default`.
fn batch_host<'a>(conf: &'a ClusterConfig, host: &str) -> Option<&'a lava_conf::BatchHost> {
    let hosts = &conf.hosts;
    let row = hosts.hosts.iter().find(|row| row.name.eq_ignore_ascii_case(host)).or_else(|| {
        hosts
            .hosts
            .iter()
            .find(|row| hosts.group(&row.name).is_some() && group_contains(conf, &row.name, host, 0))
    });
    row.or(hosts.default.as_ref())
}

/// `USERS` of a queue: `None` for everyone, else the users named, user groups of
/// `lsb.users` expanded (a group of `all` is everyone).
fn queue_users(conf: &ClusterConfig, queue: &lava_conf::Queue) -> Result<Option<Vec<UserName>>, ShellError> {
    let Members::Named(names) = &queue.users else { return Ok(None) };
    let mut users = Vec::new();
    let mut pending: Vec<(&str, usize)> = names.iter().map(|name| (name.as_str(), 0)).collect();
    while let Some((name, depth)) = pending.pop() {
        match conf.users.group(name) {
            Some(_) if depth > HOST_GROUP_DEPTH_MAX => {}
            Some(group) if group.members.iter().any(|m| m == "all") => return Ok(None),
            Some(group) => pending.extend(group.members.iter().map(|m| (m.as_str(), depth + 1))),
            None => users.push(UserName::parse("USERS", name).map_err(|error| {
                ShellError::Config(format!(
                    "{}: queue {}: USERS: {error}",
                    conf.queues.path.display(),
                    queue.name
                ))
            })?),
        }
    }
    users.sort();
    users.dedup();
    Ok(Some(users))
}

/// The `User` rows of `lsb.users`; see the module doc.
fn user_limits(conf: &ClusterConfig) -> Result<UserLimits, ShellError> {
    let users = &conf.users;
    let path = users.path.as_ref().map_or_else(|| "lsb.users".to_owned(), |p| p.display().to_string());
    let limit =
        |row: &lava_conf::BatchUser| UserLimit { max_jobs: row.max_jobs, max_pend_jobs: row.max_pend_jobs };
    let mut limits = UserLimits {
        default: users.default.as_ref().map(limit).unwrap_or_default(),
        ..UserLimits::default()
    };
    for row in &users.users {
        if users.group(&row.name).is_some() {
            let members = group_members(conf, &row.name)
                .map_err(|problem| ShellError::Config(format!("{path}:{}: {problem}", row.line)))?;
            limits.groups.push(GroupLimit { name: row.name.clone(), members, limit: limit(row) });
        } else {
            let user = UserName::parse("USER_NAME", &row.name)
                .map_err(|error| ShellError::Config(format!("{path}:{}: {error}", row.line)))?;
            limits.users.insert(user, limit(row));
        }
    }
    Ok(limits)
}

/// The users of user group `group` of `lsb.users`, nested groups expanded; `None`
/// when it (or a group in it) has `all`.
fn group_members(conf: &ClusterConfig, group: &str) -> Result<Option<BTreeSet<UserName>>, String> {
    let mut members = BTreeSet::new();
    let mut pending: Vec<(&str, usize)> = vec![(group, 0)];
    while let Some((name, depth)) = pending.pop() {
        match conf.users.group(name) {
            Some(_) if depth > HOST_GROUP_DEPTH_MAX => {
                return Err(format!("user group {group}: groups nested deeper than {HOST_GROUP_DEPTH_MAX}"));
            }
            Some(found) if found.members.iter().any(|m| m == "all") => return Ok(None),
            Some(found) => pending.extend(found.members.iter().map(|m| (m.as_str(), depth + 1))),
            None => {
                members.insert(
                    UserName::parse("GROUP_MEMBER", name)
                        .map_err(|error| format!("user group {group}: {error}"))?,
                );
            }
        }
    }
    Ok(Some(members))
}

/// `MXJ` of a host; see the module doc.
fn max_jobs(conf: &ClusterConfig, host: &str) -> Option<u32> {
    match batch_host(conf, host).map(|row| row.mxj) {
        Some(Mxj::Cpus) => None,
        Some(Mxj::Slots(n)) => Some(n),
        Some(Mxj::Unlimited) | None => Some(u32::MAX),
    }
}

fn group_contains(conf: &ClusterConfig, group: &str, host: &str, depth: usize) -> bool {
    let Some(group) = conf.hosts.group(group) else { return false };
    depth < HOST_GROUP_DEPTH_MAX
        && group.members.iter().any(|member| {
            member == "all"
                || member.eq_ignore_ascii_case(host)
                || group_contains(conf, member, host, depth + 1)
        })
}

/// Appends the server hosts `member` (a host, a host group or `all`) stands for.
fn expand_host(
    conf: &ClusterConfig,
    servers: &[&str],
    member: &str,
    depth: usize,
    out: &mut Vec<String>,
) -> Result<(), String> {
    if depth > HOST_GROUP_DEPTH_MAX {
        return Err(format!("host groups nested deeper than {HOST_GROUP_DEPTH_MAX} at {member}"));
    }
    if member == "all" {
        out.extend(servers.iter().map(|host| (*host).to_owned()));
    } else if let Some(group) = conf.hosts.group(member) {
        for inner in &group.members {
            expand_host(conf, servers, inner, depth + 1, out)?;
        }
    } else if let Some(host) = servers.iter().find(|host| host.eq_ignore_ascii_case(member)) {
        out.push((*host).to_owned());
    } else if conf.cluster.host(member).is_some() {
        return Err(format!("{member} is not a server host (server 0 in lsf.cluster), it cannot run jobs"));
    } else {
        return Err(format!("{member} is neither a host of lsf.cluster nor a host group of lsb.hosts"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::fs;
    use std::path::Path;

    /// Writes a small cluster: hosts m (master), a, b, c (client only);
    /// lsb.hosts with the given body; lsb.queues with the given body.
    fn cluster(dir: &Path, lsb_hosts: &str, lsb_queues: &str) -> ClusterConfig {
        fs::write(dir.join("lsf.conf"), "LSB_SHAREDIR=work\nLAVA_CLUSTER_KEY_FILE=key\nLSB_MBD_PORT=7001\n")
            .expect("lsf.conf");
        fs::write(dir.join("lsf.shared"), "Begin Cluster\nClusterName\nt\nEnd Cluster\n")
            .expect("lsf.shared");
        fs::write(
            dir.join("lsf.cluster.t"),
            "Begin ClusterAdmins\nAdministrators = admin1 admin2\nEnd ClusterAdmins\n\
             Begin Host\nHOSTNAME model type server LAVA_ADDR\n\
             m ! ! 1 127.0.0.1\na ! ! 1 -\nb ! ! 1 -\nc ! ! 0 -\nEnd Host\n",
        )
        .expect("lsf.cluster");
        let configdir = dir.join("lsbatch/t/configdir");
        fs::create_dir_all(&configdir).expect("configdir");
        fs::write(configdir.join("lsb.hosts"), lsb_hosts).expect("lsb.hosts");
        fs::write(configdir.join("lsb.queues"), lsb_queues).expect("lsb.queues");
        fs::write(
            configdir.join("lsb.params"),
            "Begin Parameters\nDEFAULT_QUEUE = normal\nCLEAN_PERIOD = 60\nMAX_JOBID = 1000000\nEnd Parameters\n",
        )
        .expect("lsb.params");
        ClusterConfig::load(dir).expect("the test cluster loads")
    }

    fn host(name: &str) -> HostName {
        HostName::parse("test", name).expect("host name")
    }

    // Goal: MXJ comes from the host's row, else its group's row, else the
    // default row; `!` means the registered CPUs; client-only hosts are not
    // execution hosts; groups in HOSTS are expanded; params and admins map.
    #[test]
    fn maps_hosts_queues_admins_and_params() {
        let dir = tempfile::tempdir().expect("tempdir");
        let conf = cluster(
            dir.path(),
            "Begin Host\nHOST_NAME MXJ\nm 2\ngrp 3\ndefault !\nEnd Host\n\
             Begin HostGroup\nGROUP_NAME GROUP_MEMBER\ngrp (a)\nEnd HostGroup\n",
            "Begin Queue\nQUEUE_NAME = normal\nPRIORITY = 30\nEnd Queue\n\
             Begin Queue\nQUEUE_NAME = small\nPRIORITY = 40\nHOSTS = grp m\nEnd Queue\n",
        );
        let shell = ShellConfig::from_cluster(&conf, Some(0), None).expect("maps");
        let mbd = &shell.mbd;
        assert_eq!(mbd.cluster_name, "t");
        assert_eq!(mbd.master_host, host("m"));
        let hosts: Vec<(&str, Option<u32>)> =
            mbd.hosts.iter().map(|h| (h.name.as_str(), h.max_jobs)).collect();
        assert_eq!(hosts, vec![("m", Some(2)), ("a", Some(3)), ("b", None)]);
        assert_eq!(mbd.queues[0].name.as_str(), "normal");
        assert!(mbd.queues[0].default && mbd.queues[0].hosts.is_empty());
        assert_eq!(mbd.queues[1].hosts, vec![host("a"), host("m")]);
        assert!(!mbd.queues[1].default);
        assert_eq!(mbd.admins.len(), 2);
        assert_eq!(mbd.clean_period_ms, 60_000);
        assert_eq!(mbd.max_job_id, 1_000_000);
        assert_eq!(shell.listen_addr, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(shell.port, 0);
        assert!(shell.event_log_dir.ends_with("work/t/logdir"), "{}", shell.event_log_dir.display());
    }

    // Goal: the scheduling policies reach the logic: USERS with lsb.users groups expanded,
    // the queue limits, FAIRSHARE, JL/U by the same row as MXJ, type/model/RESOURCES of
    // lsf.cluster and the Boolean resources of lsf.shared, MBD_SLEEP_TIME.
    #[test]
    fn maps_scheduling_policies() {
        let dir = tempfile::tempdir().expect("tempdir");
        let conf_dir = dir.path();
        let configdir = conf_dir.join("lsbatch/t/configdir");
        fs::create_dir_all(&configdir).expect("configdir");
        fs::write(
            configdir.join("lsb.users"),
            "Begin UserGroup\nGROUP_NAME GROUP_MEMBER\nstaff (carol dave)\nEnd UserGroup\n",
        )
        .expect("lsb.users");
        let conf = cluster(
            conf_dir,
            "Begin Host\nHOST_NAME MXJ JL/U r1m mem\nm 2 1 0.7/2.0 100\ndefault ! () () ()\nEnd Host\n",
            "Begin Queue\nQUEUE_NAME = normal\nUSERS = alice staff\nQJOB_LIMIT = 10\nUJOB_LIMIT = 2\n\
             HJOB_LIMIT = 3\nPJOB_LIMIT = 0.25\nRUNLIMIT = 10 60\nMEMLIMIT = 100\nEXCLUSIVE = y\n\
             CPULIMIT = 1 2\nDATALIMIT = 10\nPROCESSLIMIT = 4\nTHREADLIMIT = 2 16\nFILELIMIT = 1\n\
             CORELIMIT = 0\nSTACKLIMIT = 2\nSWAPLIMIT = 3\n\
             FAIRSHARE = USER_SHARES[[alice, 2] [default, 1]]\nEnd Queue\n",
        );
        let mbd = mbd_config(&conf, "m").expect("maps");
        let queue = &mbd.queues[0];
        let names: Vec<&str> = queue.users.as_ref().expect("a list").iter().map(UserName::as_str).collect();
        assert_eq!(names, ["alice", "carol", "dave"]);
        assert_eq!((queue.qjob_limit, queue.ujob_limit, queue.hjob_limit), (Some(10), Some(2), Some(3)));
        assert_eq!(queue.pjob_limit_milli, Some(250));
        assert_eq!(queue.run_limit_s, Some(QueueLimit { default: Some(600), max: 3600 }));
        assert_eq!(queue.mem_limit_kb, Some(QueueLimit { default: None, max: 100 }));
        let limit = |default, max| Some(QueueLimit { default, max });
        assert_eq!(
            queue.limits,
            QueueResourceLimits {
                cpu_s: limit(Some(60), 120),
                data_kb: limit(None, 10),
                processes: limit(None, 4),
                threads: limit(Some(2), 16),
                file_kb: Some(1),
                core_kb: Some(0),
                stack_kb: Some(2),
                swap_kb: Some(3),
            }
        );
        assert!(queue.exclusive);
        assert_eq!(queue.fairshare, Some(vec![("alice".to_owned(), 2), ("default".to_owned(), 1)]));
        assert_eq!(mbd.hosts[0].user_job_limit, Some(1));
        assert_eq!(mbd.hosts[1].user_job_limit, None);
        let mut sched = [None; 11];
        (sched[1], sched[10]) = (LoadThreshold::new(0.7), LoadThreshold::new(100.0));
        assert_eq!((mbd.hosts[0].load_sched, mbd.hosts[1].load_sched), (sched, [None; 11]));
        assert_eq!(mbd.mbd_sleep_time_ms, 60_000);
        assert_eq!(mbd.job_accept_interval, 1, "LSF's default when lsb.params does not set it");
    }

    // Goal: the limits of lsb.params and lsb.users reach the logic: MAX_PEND_JOBS and
    // LAVA_MAX_JOB_BYTES; MAX_JOBS and MAX_PEND_JOBS per user, for `default`, and for a
    // user group (nested groups expanded; a group of `all` is every user).
    #[test]
    fn maps_user_limits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let conf_dir = dir.path();
        let configdir = conf_dir.join("lsbatch/t/configdir");
        fs::create_dir_all(&configdir).expect("configdir");
        fs::write(
            configdir.join("lsb.users"),
            "Begin UserGroup\nGROUP_NAME GROUP_MEMBER\nteam (carol)\nstaff (team dave)\neveryone (all)\n\
             End UserGroup\nBegin User\nUSER_NAME MAX_JOBS JL/P MAX_PEND_JOBS\nalice 2 - 5\nstaff 4 - -\n\
             everyone - - 1000\ndefault 8 - 20\nEnd User\n",
        )
        .expect("lsb.users");
        let mut conf = cluster(
            conf_dir,
            "Begin Host\nHOST_NAME MXJ\ndefault !\nEnd Host\n",
            "Begin Queue\nQUEUE_NAME = normal\nEnd Queue\n",
        );
        conf.params.max_pend_jobs = Some(50);
        conf.params.max_job_bytes = 65536;
        let mbd = mbd_config(&conf, "m").expect("maps");
        assert_eq!((mbd.max_pend_jobs, mbd.max_job_bytes), (Some(50), 65536));
        let limits = &mbd.user_limits;
        let user = |name: &str| UserName::parse("test", name).expect("user");
        assert_eq!(limits.of(&user("alice")), UserLimit { max_jobs: Some(2), max_pend_jobs: Some(5) });
        assert_eq!(limits.of(&user("bob")), UserLimit { max_jobs: Some(8), max_pend_jobs: Some(20) });
        let groups: Vec<(&str, Option<Vec<&str>>, UserLimit)> = limits
            .groups
            .iter()
            .map(|g| {
                let members = g.members.as_ref().map(|m| m.iter().map(UserName::as_str).collect());
                (g.name.as_str(), members, g.limit)
            })
            .collect();
        assert_eq!(
            groups,
            vec![
                ("staff", Some(vec!["carol", "dave"]), UserLimit { max_jobs: Some(4), max_pend_jobs: None }),
                ("everyone", None, UserLimit { max_jobs: None, max_pend_jobs: Some(1000) }),
            ]
        );
    }

    // Goal: a queue that names a client-only host is refused with the queue named.
    #[test]
    fn a_queue_on_a_client_host_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let conf = cluster(
            dir.path(),
            "Begin Host\nHOST_NAME MXJ\ndefault !\nEnd Host\n",
            "Begin Queue\nQUEUE_NAME = normal\nPRIORITY = 30\nHOSTS = c\nEnd Queue\n",
        );
        let error = mbd_config(&conf, "m").expect_err("c cannot run jobs").to_string();
        assert!(error.contains("queue normal") && error.contains("not a server host"), "{error}");
    }
}
