//! lava-mxfsd: the `mxfsd` lock manager daemon, the I/O shell around lava-dlm-logic
//! (docs/protocols/dlm.md), plus `mxfsctl` ([`ctl`]) and the client library
//! ([`client`]).
//!
//! `mxfsd [-d|--envdir DIR] [--host NAME] [--port PORT] [--socket PATH] [--ready-file PATH]`
//!
//! # What it does
//! - Loads lsf.conf and lsf.cluster.NAME. Node ids are the hosts' 1-based positions in the
//!   Host section; each host's DLM address is its `LAVA_ADDR` (else its name resolved) with its
//!   `LAVA_MXFSD_PORT` column (else lsf.conf's `LAVA_MXFSD_PORT`). `--port` overrides this
//!   host's port (0: any free port, reported in the ready file).
//! - **Mastering**: the lowest live node id is the lock master of every resource (the spec's
//!   single master). A node looks for it among the lower node ids (server.rs documents the
//!   search); when every lower node is down it becomes the master itself: it runs
//!   lava-dlm-logic's [`lava_dlm_logic::Master`], which first rebuilds the lock table from
//!   what the survivors reclaim, persists its epoch (`$LSB_SHAREDIR/<cluster>/mxfsd/<host>.epoch`,
//!   temporary file, fsync, rename, fsync of the folder; above every epoch it saw) before
//!   anything carrying the new epoch is sent, runs the journal recovery command, and serves
//!   the other nodes over TCP. A master with lower ids keeps probing them and steps down when
//!   one of them is master again.
//! - A node joins its master with NODE_JOIN, stamps every later message with the epoch the
//!   answer carries, and forwards its local clients' requests. Every `LAVA_MXFSD_RENEW_MS` every
//!   node sends LEASE_RENEW (its NODE_ALIVE too) to every other node — to its master on the
//!   connection it joined on (that renewal is its lease), to the others on a connection of
//!   their own between the two nodes, opened by whichever needs it first and used both ways —
//!   answered LEASE_ACK, and keeps each peer's liveness ([`lava_dlm_logic::Liveness`]: a peer
//!   silent for the node timeout is logged as dead and shown so by `mxfsctl status`; only the
//!   master acts on a death). When the master goes (connection closed, or silent for half the node
//!   timeout) the node keeps its clients' locks and reclaims them from the next master, as
//!   long as its lease may still run; a LEASE_EXPIRE naming it, or its lease running out
//!   without a master, loses every lock (clients get LOST) and it joins as a new incarnation.
//! - Every frame between daemons is the spec's 32-byte header, the payload and lava-net's
//!   60-byte authentication trailer (`seal_bytes` over header ‖ payload), inside the header's
//!   length. A frame that fails framing, authentication, decoding or validation closes its
//!   connection, with the reason logged; everyone else is served.
//! - Metrics (`metrics`): with `LAVA_MXFSD_METRICS_PORT` set, `mxfsctl status`'s counters
//!   under Prometheus names, answered by the loop at each scrape.
//! - Local clients use the Unix socket ([`client`] documents the protocol): lsf.conf's
//!   `LAVA_MXFSD_SOCKET`, default `mxfsd.sock` beside `LAVA_CMD_SOCKET`; `--socket` overrides.
//!   The caller's uid comes from SO_PEERCRED and is shown in `mxfsctl locks`. When a client's
//!   connection closes, its locks are released (flock(1) semantics).
//!
//! Our own lsf.conf keys: `LAVA_MXFSD_SOCKET`, `LAVA_MXFSD_NODE_TIMEOUT_MS` (default 15000),
//! `LAVA_MXFSD_RENEW_MS` (default 2000), `LAVA_MXFSD_BAST_TIMEOUT_MS` (default 10000: a
//! holder that neither downgrades nor releases that long after its BAST, while the waiter still
//! waits, has its lock revoked — its client gets LOST; locks taken by `mxfsctl lock` are held
//! until released and never revoked), `LAVA_MXFSD_RECOVERY_CMD` (run by `sh -c` with the dead
//! node id and journal slot as `$1` `$2`; until it exits 0 — retried every 5 s — the dead
//! node's locks stay fenced; default: the recovery is recorded in the log and done at once),
//! `LAVA_MXFSD_GROUP` (a group name or gid: when set, the socket is open to everyone (mode
//! 0666) and only root, mxfsd's own user and members of the group — by the caller's gid or
//! supplementary groups — may lock, convert or invalidate; anyone may ask STATUS and LOCKS;
//! unset: whoever can open the socket may lock), `LAVA_MXFSD_MAX_CLIENTS` (default 1024: a
//! client beyond it is answered "too many clients" and closed), `LAVA_MXFSD_CLIENT_TIMEOUT_MS`
//! (default 10000: a client that starts a request and does not finish it within this is
//! closed; idle clients holding locks are not).
//!
//! Not implemented yet: per-resource mastering, cancelling a timed-out
//! conversion without releasing the lock (a conversion that times out releases the lock).
//!
//! `--ready-file PATH`: once serving, writes `PORT\n` (the bound TCP port) there.

#![deny(missing_docs)]

pub mod client;
mod counters;
pub mod ctl;
mod epoch_file;
mod metrics;
mod server;
mod sys;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Parser;
use lava_conf::{BaseConfig, LogMask};
use lava_dlm_logic::{
    BAST_TIMEOUT_MS_DEFAULT, LEASE_RENEW_MS_DEFAULT, NODE_TIMEOUT_MS_DEFAULT, NodeConfig, NodeId,
};

/// File name of the default client socket, in `LAVA_CMD_SOCKET`'s folder.
pub const SOCKET_FILE_NAME: &str = "mxfsd.sock";

/// mxfsd's command line.
#[derive(Clone, Debug, Parser)]
#[command(name = "mxfsd", version, about = "LavaCore's distributed lock manager")]
pub struct Args {
    /// Folder holding lsf.conf (default: $LSF_ENVDIR, else /etc).
    #[arg(short = 'd', long, value_name = "DIR")]
    pub envdir: Option<PathBuf>,
    /// This host's name in lsf.cluster (default: the kernel's host name).
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// TCP port to bind instead of the configured one (0: any free port).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// The local client socket instead of LAVA_MXFSD_SOCKET.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Once serving, write the TCP port to this file.
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
}

/// Everything the shell needs, read from the configuration.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub me: NodeId,
    /// Where the metrics are served (`LAVA_METRICS_ADDR`, `LAVA_MXFSD_METRICS_PORT`; `None`: not).
    pub metrics: Option<SocketAddr>,
    pub my_name: String,
    pub nodes: Vec<NodeConfig>,
    /// Every node's DLM address (`None`: its name does not resolve; it counts as unreachable).
    pub addrs: std::collections::BTreeMap<NodeId, Option<SocketAddr>>,
    pub listen_addr: SocketAddr,
    pub socket_path: PathBuf,
    pub epoch_path: PathBuf,
    pub key_file: PathBuf,
    pub node_timeout_ms: u64,
    pub lease_renew_ms: u64,
    /// `LAVA_MXFSD_BAST_TIMEOUT_MS`: how long a holder has to answer a BAST.
    pub bast_timeout_ms: u64,
    pub recovery_cmd: Option<String>,
    pub ready_file: Option<PathBuf>,
    /// `LAVA_MXFSD_GROUP` as a gid: members may lock (besides root and mxfsd's own user).
    pub lock_group: Option<u32>,
    /// `LAVA_MXFSD_MAX_CLIENTS`: client connections served at once.
    pub max_clients: usize,
    /// `LAVA_MXFSD_CLIENT_TIMEOUT_MS`: the most a client may take to finish a request it began.
    pub client_timeout_ms: u64,
}

/// The gid of `group`: a number, or a name in /etc/group.
fn group_id(group: &str) -> anyhow::Result<u32> {
    if let Ok(gid) = group.parse::<u32>() {
        return Ok(gid);
    }
    let text = std::fs::read_to_string("/etc/group").context("read /etc/group")?;
    text.lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.len() >= 3 && fields[0] == group).then(|| fields[2].parse::<u32>().ok()).flatten()
        })
        .with_context(|| format!("lsf.conf: LAVA_MXFSD_GROUP={group}: no such group in /etc/group"))
}

/// The client socket path configured in `conf`: `LAVA_MXFSD_SOCKET`, else `mxfsd.sock`
/// beside `LAVA_CMD_SOCKET`.
pub fn socket_path(conf: &lava_conf::LsfConf) -> PathBuf {
    match conf.get("LAVA_MXFSD_SOCKET") {
        Some(path) if !path.is_empty() => {
            let path = PathBuf::from(path);
            if path.is_relative() {
                conf.path().parent().map_or(path.clone(), |envdir| envdir.join(&path))
            } else {
                path
            }
        }
        _ => conf
            .cmd_socket
            .parent()
            .map_or_else(|| PathBuf::from(SOCKET_FILE_NAME), |d| d.join(SOCKET_FILE_NAME)),
    }
}

fn settings(args: &Args) -> anyhow::Result<(Settings, LogMask)> {
    let envdir = args.envdir.clone().unwrap_or_else(lava_conf::envdir_from_env);
    let base = BaseConfig::load(&envdir)
        .with_context(|| format!("load the configuration from {}", envdir.display()))?;
    let my_name = match &args.host {
        Some(name) => name.clone(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .context("read the host name")?
            .trim()
            .to_owned(),
    };
    let hosts = &base.cluster.hosts;
    let Some(me_idx) = hosts.iter().position(|host| host.name.eq_ignore_ascii_case(&my_name)) else {
        bail!("host `{my_name}` is not in {}", base.cluster.path.display());
    };
    let addr_of = |idx: usize| -> anyhow::Result<SocketAddr> {
        let host = &hosts[idx];
        let port = host.mxfsd_tcp_port(&base.lsf);
        match host.addr {
            Some(ip) => Ok(SocketAddr::new(ip, port)),
            None => (host.name.as_str(), port)
                .to_socket_addrs()
                .ok()
                .and_then(|mut addrs| addrs.next())
                .with_context(|| format!("cannot resolve host `{}`", host.name)),
        }
    };
    let millis = |key: &str, default: u64| -> anyhow::Result<u64> {
        match base.lsf.get(key) {
            None | Some("") => Ok(default),
            Some(text) => match text.parse::<u64>() {
                Ok(value) if value > 0 => Ok(value),
                _ => bail!("lsf.conf: {key}={text} is not a positive number of milliseconds"),
            },
        }
    };
    let nodes = hosts
        .iter()
        .enumerate()
        .map(|(idx, host)| {
            let id = u32::try_from(idx + 1).ok().and_then(NodeId::new).context("too many hosts")?;
            if host.name.len() > lava_dlm_ll::NODE_NAME_BYTES_MAX {
                bail!("host name `{}` is longer than 64 bytes", host.name);
            }
            Ok(NodeConfig { id, name: host.name.clone(), slot: idx as u32 })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut listen_addr = addr_of(me_idx)?;
    if let Some(port) = args.port {
        listen_addr.set_port(port);
    }
    let addrs = nodes.iter().enumerate().map(|(idx, node)| (node.id, addr_of(idx).ok())).collect();
    let settings = Settings {
        me: nodes[me_idx].id,
        metrics: base.lsf.metrics_listen(base.lsf.metrics_ports.mxfsd),
        my_name: hosts[me_idx].name.clone(),
        addrs,
        listen_addr,
        socket_path: args.socket.clone().unwrap_or_else(|| socket_path(&base.lsf)),
        epoch_path: base
            .lsf
            .work_dir(&base.cluster_name)
            .join("mxfsd")
            .join(format!("{}.epoch", hosts[me_idx].name)),
        key_file: base.lsf.cluster_key_file.clone(),
        node_timeout_ms: millis("LAVA_MXFSD_NODE_TIMEOUT_MS", NODE_TIMEOUT_MS_DEFAULT)?,
        lease_renew_ms: millis("LAVA_MXFSD_RENEW_MS", LEASE_RENEW_MS_DEFAULT)?,
        bast_timeout_ms: millis("LAVA_MXFSD_BAST_TIMEOUT_MS", BAST_TIMEOUT_MS_DEFAULT)?,
        recovery_cmd: base
            .lsf
            .get("LAVA_MXFSD_RECOVERY_CMD")
            .filter(|cmd| !cmd.is_empty())
            .map(str::to_owned),
        ready_file: args.ready_file.clone(),
        lock_group: match base.lsf.get("LAVA_MXFSD_GROUP") {
            None | Some("") => None,
            Some(group) => Some(group_id(group)?),
        },
        max_clients: match base.lsf.get("LAVA_MXFSD_MAX_CLIENTS") {
            None | Some("") => 1024,
            Some(text) => match text.parse::<usize>() {
                Ok(value) if value > 0 => value,
                _ => bail!("lsf.conf: LAVA_MXFSD_MAX_CLIENTS={text} is not a positive number of clients"),
            },
        },
        client_timeout_ms: millis("LAVA_MXFSD_CLIENT_TIMEOUT_MS", 10_000)?,
        nodes,
    };
    if settings.lease_renew_ms >= settings.node_timeout_ms {
        bail!("lsf.conf: LAVA_MXFSD_RENEW_MS must be below LAVA_MXFSD_NODE_TIMEOUT_MS");
    }
    Ok((settings, base.lsf.log_mask))
}

/// Runs mxfsd with this process's arguments.
pub fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mxfsd: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Loads the configuration and serves until SIGTERM or SIGINT.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (settings, mask) = settings(&args)?;
    // To the journal under systemd, else to standard error.
    lava_sd::journald::init(mask.level_name());
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("start tokio")?;
    runtime.block_on(server::serve(settings))
}
