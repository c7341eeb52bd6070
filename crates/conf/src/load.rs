//! Loading a whole cluster's configuration from its envdir: [`BaseConfig`] (what every daemon
//! needs: lsf.conf, lsf.shared, lsf.cluster.NAME) and [`ClusterConfig`] (that plus the `lsb.*`
//! files of the batch system), with the checks that span files.
//!
//! # Where the files are (Lava's layout, which LSF also uses)
//! ```text
//! $LSF_ENVDIR/lsf.conf                                   required
//! $LSF_CONFDIR/lsf.shared                                required
//! $LSF_CONFDIR/lsf.cluster.<cluster>                     required
//! $LSB_CONFDIR/<cluster>/configdir/lsb.queues            required (mbatchd needs a queue)
//! $LSB_CONFDIR/<cluster>/configdir/lsb.params            optional: LSF's defaults
//! $LSB_CONFDIR/<cluster>/configdir/lsb.hosts             optional: no limits, no groups
//! $LSB_CONFDIR/<cluster>/configdir/lsb.users             optional: no groups, no limits
//! ```
//! LavaLite 0.1 kept the `lsb.*` files flat in `LSF_CONFDIR`; that layout is not read, but a
//! missing `lsb.queues` error says so when it finds one there.
//!
//! # The cluster name
//! `LAVA_CLUSTER_NAME` in lsf.conf if set (it must then be one of lsf.shared's clusters, when
//! lsf.shared lists any); otherwise the one cluster of lsf.shared's `Cluster` section. LSF picks
//! the cluster whose lsf.cluster file lists the local host; this crate knows no local host, so
//! several clusters without `LAVA_CLUSTER_NAME` is an error rather than a guess.
//!
//! # Checks across files
//! - hosts' models, types and resources are defined in lsf.shared;
//! - the ports of one host differ, and hosts sharing a `LAVA_ADDR` share no port;
//! - lsb.hosts rows name lsf.cluster hosts or host groups, groups name hosts or earlier groups,
//!   and no group is named like a host;
//! - queue `HOSTS` name lsf.cluster hosts or host groups;
//! - the default queues (see [`ClusterConfig::default_queues`]) exist.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::cluster::{ClusterHost, LsfCluster};
use crate::error::{ConfError, ErrorKind};
use crate::hosts::LsbHosts;
use crate::lsf_conf::{LsfConf, envdir_from_env};
use crate::params::LsbParams;
use crate::queues::{LsbQueues, Members, Queue};
use crate::shared::LsfShared;
use crate::users::LsbUsers;

/// What every daemon needs: lsf.conf, lsf.shared and this cluster's lsf.cluster file.
#[derive(Debug, Clone, PartialEq)]
pub struct BaseConfig {
    /// lsf.conf.
    pub lsf: LsfConf,
    /// The cluster's name.
    pub cluster_name: String,
    /// lsf.shared.
    pub shared: LsfShared,
    /// lsf.cluster.NAME.
    pub cluster: LsfCluster,
}

impl BaseConfig {
    /// Loads and checks lsf.conf, lsf.shared and lsf.cluster.NAME from `envdir`.
    pub fn load(envdir: &Path) -> Result<Self, ConfError> {
        let lsf = LsfConf::read(envdir)?;
        let shared = LsfShared::read(&lsf.shared_path())?;
        let cluster_name = cluster_name(&lsf, &shared)?;
        let cluster = LsfCluster::read(&lsf.cluster_path(&cluster_name)).map_err(|error| match error {
            ConfError::Missing { path, what, .. } => {
                let hint = match lsf.cluster_name {
                    Some(_) => format!("; lsf.conf's LAVA_CLUSTER_NAME names the cluster `{cluster_name}`"),
                    None => format!("; lsf.shared names the cluster `{cluster_name}`"),
                };
                ConfError::Missing { path, what, hint }
            }
            other => other,
        })?;
        check_hosts_against_shared(&cluster, &shared)?;
        check_ports(&cluster, &lsf)?;
        check_master_list(&lsf, &cluster)?;
        Ok(BaseConfig { lsf, cluster_name, shared, cluster })
    }

    /// The preferred master: the first of [`BaseConfig::master_candidates`].
    pub fn master_host(&self) -> Option<&ClusterHost> {
        self.master_candidates().into_iter().next()
    }

    /// The master candidates, most preferred first: `LSF_MASTER_LIST`'s hosts, or without
    /// it the first server host of lsf.cluster alone.
    pub fn master_candidates(&self) -> Vec<&ClusterHost> {
        master_candidates(&self.lsf, &self.cluster)
    }

    /// `$LSB_SHAREDIR/<cluster>`, under which daemons keep their durable state.
    pub fn work_dir(&self) -> PathBuf {
        self.lsf.work_dir(&self.cluster_name)
    }
}

/// The whole configuration of a cluster: [`BaseConfig`] plus the batch system's `lsb.*` files.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// lsf.conf.
    pub lsf: LsfConf,
    /// The cluster's name.
    pub cluster_name: String,
    /// lsf.shared.
    pub shared: LsfShared,
    /// lsf.cluster.NAME.
    pub cluster: LsfCluster,
    /// lsb.params (defaults if absent).
    pub params: LsbParams,
    /// lsb.queues.
    pub queues: LsbQueues,
    /// lsb.hosts (empty if absent).
    pub hosts: LsbHosts,
    /// lsb.users (empty if absent).
    pub users: LsbUsers,
    /// The default queues, in the order a job without `-q` tries them: lsb.params'
    /// `DEFAULT_QUEUE` if set; otherwise the queues marked `DEFAULT = y`, in file order;
    /// otherwise a queue named `default` if there is one; otherwise none.
    pub default_queues: Vec<String>,
}

impl ClusterConfig {
    /// Loads and checks every file of the cluster whose lsf.conf is in `envdir`.
    pub fn load(envdir: &Path) -> Result<Self, ConfError> {
        let BaseConfig { lsf, cluster_name, shared, cluster } = BaseConfig::load(envdir)?;
        let configdir = lsf.lsb_configdir(&cluster_name);
        let queues_path = configdir.join("lsb.queues");
        let queues = match LsbQueues::read(&queues_path, lsf.unit_for_limits)? {
            Some(queues) => queues,
            None => {
                let flat = lsf.confdir.join("lsb.queues");
                let hint = if flat.exists() {
                    format!(
                        "; found {} instead (LavaLite 0.1's layout): move the lsb.* files to {}",
                        flat.display(),
                        configdir.display()
                    )
                } else {
                    String::new()
                };
                return Err(ConfError::Missing { path: queues_path, what: "the lsb.queues file", hint });
            }
        };
        let params = LsbParams::read(&configdir.join("lsb.params"))?.unwrap_or_default();
        let hosts = LsbHosts::read(&configdir.join("lsb.hosts"))?.unwrap_or_default();
        let users = LsbUsers::read(&configdir.join("lsb.users"))?.unwrap_or_default();
        check_batch_hosts(&hosts, &cluster)?;
        check_queue_hosts(&queues, &hosts, &cluster)?;
        let default_queues = default_queues(&params, &queues)?;
        Ok(ClusterConfig { lsf, cluster_name, shared, cluster, params, queues, hosts, users, default_queues })
    }

    /// [`ClusterConfig::load`] from the envdir named by this process's `LSF_ENVDIR`.
    pub fn load_from_env() -> Result<Self, ConfError> {
        Self::load(&envdir_from_env())
    }

    /// The first default queue, where a job submitted without `-q` goes.
    pub fn default_queue(&self) -> Option<&Queue> {
        self.default_queues.first().and_then(|name| self.queues.queue(name))
    }

    /// The queue called `name`.
    pub fn queue(&self, name: &str) -> Option<&Queue> {
        self.queues.queue(name)
    }

    /// The preferred master: the first of [`ClusterConfig::master_candidates`].
    pub fn master_host(&self) -> Option<&ClusterHost> {
        self.master_candidates().into_iter().next()
    }

    /// The master candidates, most preferred first: `LSF_MASTER_LIST`'s hosts, or without
    /// it the first server host of lsf.cluster alone.
    pub fn master_candidates(&self) -> Vec<&ClusterHost> {
        master_candidates(&self.lsf, &self.cluster)
    }

    /// `$LSB_CONFDIR/<cluster>/configdir`.
    pub fn lsb_configdir(&self) -> PathBuf {
        self.lsf.lsb_configdir(&self.cluster_name)
    }

    /// `$LSB_SHAREDIR/<cluster>`, under which daemons keep their durable state.
    pub fn work_dir(&self) -> PathBuf {
        self.lsf.work_dir(&self.cluster_name)
    }

    /// One sentence per LSF setting present in the files but not implemented by LavaCore,
    /// `path:line: ...`, for a daemon to log as warnings at start-up.
    pub fn unimplemented_warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        let mut warn = |path: &Path, line: Option<u32>, what: String| {
            let place = match line {
                Some(line) => format!("{}:{line}", path.display()),
                None => path.display().to_string(),
            };
            warnings.push(format!("{place}: {what} has no effect in LavaCore"));
        };
        for section in &self.cluster.unimplemented_sections {
            warn(&self.cluster.path, None, format!("section `{section}`"));
        }
        for host in &self.cluster.hosts {
            for column in host.unimplemented.keys() {
                warn(
                    &self.cluster.path,
                    Some(host.line),
                    format!("column `{column}` of host `{}`", host.name),
                );
            }
        }
        for queue in &self.queues.queues {
            for (key, entry) in &queue.unimplemented {
                warn(&self.queues.path, Some(entry.line), format!("key `{key}` of queue `{}`", queue.name));
            }
        }
        if let Some(path) = &self.params.path {
            for (key, entry) in &self.params.unimplemented {
                warn(path, Some(entry.line), format!("key `{key}`"));
            }
        }
        if let Some(path) = &self.hosts.path {
            for section in &self.hosts.unimplemented_sections {
                warn(path, None, format!("section `{section}`"));
            }
            for host in self.hosts.hosts.iter().chain(self.hosts.default.as_ref()) {
                for column in host.unimplemented.keys() {
                    warn(path, Some(host.line), format!("column `{column}` of host `{}`", host.name));
                }
                // A host's jobs are never suspended for its load: only loadSched is applied.
                for (index, threshold) in &host.thresholds {
                    if threshold.stop.is_some() {
                        let what = format!(
                            "the stop threshold (loadStop) of column `{index}` of host `{}`",
                            host.name
                        );
                        warn(path, Some(host.line), what);
                    }
                }
            }
        }
        if let Some(path) = &self.users.path {
            for group in &self.users.groups {
                for column in group.unimplemented.keys() {
                    warn(path, Some(group.line), format!("column `{column}` of user group `{}`", group.name));
                }
            }
            for user in self.users.users.iter().chain(self.users.default.as_ref()) {
                if user.jl_p.is_some() {
                    warn(path, Some(user.line), format!("column `JL/P` of user `{}`", user.name));
                }
            }
        }
        warnings
    }
}

fn cluster_name(lsf: &LsfConf, shared: &LsfShared) -> Result<String, ConfError> {
    if let Some(name) = &lsf.cluster_name {
        if !shared.clusters.is_empty() && !shared.clusters.contains(name) {
            let line = lsf.file().entry("LAVA_CLUSTER_NAME").map_or(1, |entry| entry.line);
            return Err(ConfError::at(
                lsf.path(),
                line,
                ErrorKind::UnknownName {
                    key: "LAVA_CLUSTER_NAME".to_string(),
                    name: name.clone(),
                    expected: format!("a cluster of {}'s `Cluster` section", shared.path.display()),
                },
            ));
        }
        return Ok(name.clone());
    }
    match &shared.clusters[..] {
        [name] => Ok(name.clone()),
        [] => Err(ConfError::file(
            &shared.path,
            ErrorKind::Conflict(
                "no cluster name: the file has no `Cluster` section listing one, and lsf.conf sets no \
                 `LAVA_CLUSTER_NAME`"
                    .to_string(),
            ),
        )),
        names => Err(ConfError::file(
            &shared.path,
            ErrorKind::Conflict(format!(
                "the `Cluster` section lists {} clusters; set `LAVA_CLUSTER_NAME` in lsf.conf to say which one \
                 this is",
                names.len()
            )),
        )),
    }
}

/// lsf.conf's key naming the master candidates (LSF's), most preferred first.
pub const MASTER_LIST_KEY: &str = "LSF_MASTER_LIST";

/// `LSF_MASTER_LIST`'s hosts (checked at load), or the first server host.
fn master_candidates<'a>(lsf: &LsfConf, cluster: &'a LsfCluster) -> Vec<&'a ClusterHost> {
    match lsf.get(MASTER_LIST_KEY).filter(|list| !list.trim().is_empty()) {
        Some(list) => list.split_whitespace().filter_map(|name| cluster.host(name)).collect(),
        None => cluster.master_candidates().take(1).collect(),
    }
}

/// Which of `candidates` (`LSF_MASTER_LIST` order) a daemon on a master candidate runs as:
/// `host` if given (its `--host`; it must be one of them), else the one named like this
/// machine (its full host name, then its short one). Its rank from 0, or the sentence that
/// says why none.
pub fn own_candidate(candidates: &[&ClusterHost], host: Option<&str>) -> Result<usize, String> {
    let names = || candidates.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(" ");
    let find = |name: &str| candidates.iter().position(|c| c.name.eq_ignore_ascii_case(name));
    match host {
        Some(name) => find(name)
            .ok_or_else(|| format!("--host {name}: not a master candidate (LSF_MASTER_LIST: {})", names())),
        None => {
            let machine = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            let machine = machine.trim();
            let short = machine.split('.').next().unwrap_or(machine);
            find(machine).or_else(|| find(short)).ok_or_else(|| {
                format!(
                    "this machine ({machine}) is none of the master candidates (LSF_MASTER_LIST: {}); name one with --host",
                    names()
                )
            })
        }
    }
}

/// Every name of `LSF_MASTER_LIST` is a server host of lsf.cluster, named once.
fn check_master_list(lsf: &LsfConf, cluster: &LsfCluster) -> Result<(), ConfError> {
    let Some(entry) = lsf.file().entry(MASTER_LIST_KEY) else { return Ok(()) };
    let mut seen: Vec<&str> = Vec::new();
    for name in entry.value.split_whitespace() {
        let at = |kind| ConfError::at(lsf.file().path(), entry.line, kind);
        match cluster.host(name) {
            Some(host) if host.server => {}
            _ => {
                return Err(at(ErrorKind::UnknownName {
                    key: MASTER_LIST_KEY.to_owned(),
                    name: name.to_owned(),
                    expected: format!("a server host of {}", cluster.path.display()),
                }));
            }
        }
        if seen.iter().any(|other| other.eq_ignore_ascii_case(name)) {
            return Err(at(ErrorKind::Conflict(format!("{MASTER_LIST_KEY} names `{name}` twice"))));
        }
        seen.push(name);
    }
    Ok(())
}

fn check_hosts_against_shared(cluster: &LsfCluster, shared: &LsfShared) -> Result<(), ConfError> {
    let shared_name = shared.path.display();
    for host in &cluster.hosts {
        let unknown = |key: &str, name: &str, expected: String| {
            ConfError::at(
                &cluster.path,
                host.line,
                ErrorKind::UnknownName { key: key.to_string(), name: name.to_string(), expected },
            )
        };
        if let Some(model) = host.model.as_ref().filter(|model| shared.host_model(model).is_none()) {
            return Err(unknown("model", model, format!("a model of {shared_name}'s `HostModel` section")));
        }
        if let Some(host_type) =
            host.host_type.as_ref().filter(|host_type| !shared.host_types.contains(host_type))
        {
            return Err(unknown("type", host_type, format!("a type of {shared_name}'s `HostType` section")));
        }
        if let Some(resource) = host.resources.iter().find(|resource| shared.resource(resource).is_none()) {
            return Err(unknown(
                "RESOURCES",
                resource,
                format!("a resource of {shared_name}'s `Resource` section"),
            ));
        }
    }
    Ok(())
}

/// The ports of one host must differ, and hosts sharing an address must not share a port.
fn check_ports(cluster: &LsfCluster, lsf: &LsfConf) -> Result<(), ConfError> {
    // (address, protocol, port) → the host that took it, for hosts with an explicit address.
    let mut taken: BTreeMap<(IpAddr, &str, u16), &str> = BTreeMap::new();
    for host in &cluster.hosts {
        let tcp = [
            ("LIM TCP", host.lim_tcp_port(lsf)),
            ("sbatchd", host.sbd_tcp_port(lsf)),
            ("mxfsd", host.mxfsd_tcp_port(lsf)),
            ("mbatchd", lsf.mbd_port),
            ("coordinator", lsf.coord_port),
        ];
        for (idx, (daemon, port)) in tcp.iter().enumerate() {
            if let Some((other, _)) = tcp[..idx].iter().find(|(_, other_port)| other_port == port) {
                return Err(ConfError::at(
                    &cluster.path,
                    host.line,
                    ErrorKind::Conflict(format!(
                        "host `{}` would run its {other} and its {daemon} on the same TCP port {port}",
                        host.name
                    )),
                ));
            }
        }
        let Some(addr) = host.addr else { continue };
        let mine = [
            ("UDP", "LIM", host.lim_udp_port(lsf)),
            ("TCP", "LIM", host.lim_tcp_port(lsf)),
            ("TCP", "sbatchd", host.sbd_tcp_port(lsf)),
            ("TCP", "mxfsd", host.mxfsd_tcp_port(lsf)),
        ];
        for (protocol, daemon, port) in mine {
            // One host never clashes with itself here: its TCP ports were found distinct above,
            // and its LIM UDP port is keyed apart from its TCP ports.
            if let Some(other) = taken.insert((addr, protocol, port), host.name.as_str()) {
                return Err(ConfError::at(
                    &cluster.path,
                    host.line,
                    ErrorKind::Conflict(format!(
                        "hosts `{other}` and `{}` share address {addr} and {protocol} port {port} (this host's \
                         {daemon}); give each logical host its own LAVA_LIM_PORT, LAVA_SBD_PORT and \
                         LAVA_MXFSD_PORT",
                        host.name
                    )),
                ));
            }
        }
    }
    Ok(())
}

fn check_batch_hosts(hosts: &LsbHosts, cluster: &LsfCluster) -> Result<(), ConfError> {
    let Some(path) = &hosts.path else { return Ok(()) };
    let cluster_name = cluster.path.display();
    for group in &hosts.groups {
        if cluster.host(&group.name).is_some() {
            return Err(ConfError::at(
                path,
                group.line,
                ErrorKind::Conflict(format!(
                    "host group `{}` has the name of a host of {cluster_name}",
                    group.name
                )),
            ));
        }
    }
    for (group_idx, group) in hosts.groups.iter().enumerate() {
        for member in &group.members {
            let earlier_group = hosts.groups[..group_idx].iter().any(|earlier| &earlier.name == member);
            if member != "all" && cluster.host(member).is_none() && !earlier_group {
                return Err(ConfError::at(
                    path,
                    group.line,
                    ErrorKind::UnknownName {
                        key: "GROUP_MEMBER".to_string(),
                        name: member.clone(),
                        expected: format!("a host of {cluster_name}, a host group defined above, or `all`"),
                    },
                ));
            }
        }
    }
    for host in &hosts.hosts {
        if cluster.host(&host.name).is_none() && hosts.group(&host.name).is_none() {
            return Err(ConfError::at(
                path,
                host.line,
                ErrorKind::UnknownName {
                    key: "HOST_NAME".to_string(),
                    name: host.name.clone(),
                    expected: format!("a host of {cluster_name}, a host group, or `default`"),
                },
            ));
        }
    }
    Ok(())
}

fn check_queue_hosts(queues: &LsbQueues, hosts: &LsbHosts, cluster: &LsfCluster) -> Result<(), ConfError> {
    for queue in &queues.queues {
        let Members::Named(names) = &queue.hosts else { continue };
        if let Some(name) =
            names.iter().find(|name| cluster.host(name).is_none() && hosts.group(name).is_none())
        {
            let line = queue.lines.get("HOSTS").copied().unwrap_or(queue.line);
            return Err(ConfError::at(
                &queues.path,
                line,
                ErrorKind::UnknownName {
                    key: "HOSTS".to_string(),
                    name: name.clone(),
                    expected: format!("a host of {} or a host group of lsb.hosts", cluster.path.display()),
                },
            ));
        }
    }
    Ok(())
}

fn default_queues(params: &LsbParams, queues: &LsbQueues) -> Result<Vec<String>, ConfError> {
    let marked = queues.queues.iter().filter(|queue| queue.default);
    if params.default_queue.is_empty() {
        let mut names: Vec<String> = marked.map(|queue| queue.name.clone()).collect();
        if names.is_empty() && queues.queue("default").is_some() {
            names.push("default".to_string());
        }
        return Ok(names);
    }
    let params_path = params.path.clone().unwrap_or_default();
    let line = params.lines.get("DEFAULT_QUEUE").copied().unwrap_or(1);
    if let Some(name) = params.default_queue.iter().find(|name| queues.queue(name).is_none()) {
        return Err(ConfError::at(
            &params_path,
            line,
            ErrorKind::UnknownName {
                key: "DEFAULT_QUEUE".to_string(),
                name: name.clone(),
                expected: format!("a queue of {}", queues.path.display()),
            },
        ));
    }
    if let Some(queue) = marked.into_iter().find(|queue| !params.default_queue.contains(&queue.name)) {
        return Err(ConfError::at(
            &queues.path,
            queue.lines.get("DEFAULT").copied().unwrap_or(queue.line),
            ErrorKind::Conflict(format!(
                "queue `{}` is marked `DEFAULT = y` but `DEFAULT_QUEUE` in {} does not list it",
                queue.name,
                params_path.display()
            )),
        ));
    }
    Ok(params.default_queue.clone())
}
