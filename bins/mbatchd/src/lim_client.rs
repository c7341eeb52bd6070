//! mbatchd's view of host liveness: a task that polls the master lim's TCP
//! query port (`LIM_TCP_HOST_LOAD`, lava-lim-wire) and hands the event loop
//! each change of a host's availability, which the loop steps as
//! [`lava_mbd::Input::HostAvailability`] (transient: never logged).
//!
//! # Where and how often
//! The master lim is the first server host of `lsf.cluster`, at its
//! `LAVA_ADDR` (else its resolved name) and its `LAVA_LIM_PORT` (else
//! `LAVA_LIM_TCP_PORT`), as `lsload` finds it. It is asked every lim report
//! interval (`LAVA_LIM_REPORT_INTERVAL_MS` of `lsf.conf`, default 5000 ms):
//! lim cannot know more often than that. Each query has a timeout of one
//! interval (at least [`QUERY_TIMEOUT_MS_MIN`]).
//!
//! # When lim cannot be asked
//! A lim that does not answer (down, not the master, a bad reply) is *no
//! information*, not "every host is down": every host marked unavailable is
//! made available again, so the cluster keeps scheduling on what sbatchd
//! connections show. This is logged once when it starts and once when lim
//! answers again, never per poll.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use lava_batch_ll::HostName;
use lava_conf::ClusterConfig;
use lava_lim_wire as wire;
use lava_xdr::frame::{FrameHeader, HEADER_BYTES};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// lim's report interval when `lsf.conf` does not set `LAVA_LIM_REPORT_INTERVAL_MS`.
pub const POLL_INTERVAL_MS_DEFAULT: u64 = 5_000;
/// Shortest timeout of one query.
pub const QUERY_TIMEOUT_MS_MIN: u64 = 1_000;
/// Largest reply accepted (10,000 hosts take about 1 MiB).
pub const REPLY_BYTES_MAX: u32 = 16 << 20;
/// Changes queued for the loop before the task waits for it.
const CHANGES_QUEUED_MAX: usize = 4096;

/// Where the master lim is and how often to ask it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimTarget {
    /// The master lim's host name, for the log and late resolution.
    pub master: String,
    /// Its address, when `LAVA_ADDR` gives one (else the name is resolved at each poll).
    pub addr: Option<SocketAddr>,
    /// Its TCP query port.
    pub port: u16,
    /// Time between two queries.
    pub interval_ms: u64,
}

impl LimTarget {
    /// The master lim of `conf`, or `None` when `lsf.cluster` lists no server
    /// host or `LAVA_LIM_REPORT_INTERVAL_MS` is not a positive number.
    pub fn from_cluster(conf: &ClusterConfig) -> Option<LimTarget> {
        let master = conf.master_host()?;
        let port = master.lim_tcp_port(&conf.lsf);
        let interval_ms = match conf.lsf.get("LAVA_LIM_REPORT_INTERVAL_MS") {
            None | Some("") => POLL_INTERVAL_MS_DEFAULT,
            Some(text) => text.trim().parse::<u64>().ok().filter(|ms| *ms > 0)?,
        };
        Some(LimTarget {
            master: master.name.clone(),
            addr: master.addr.map(|ip| SocketAddr::new(ip, port)),
            port,
            interval_ms,
        })
    }

    fn resolve(&self) -> Result<SocketAddr, String> {
        match self.addr {
            Some(addr) => Ok(addr),
            None => (self.master.as_str(), self.port)
                .to_socket_addrs()
                .ok()
                .and_then(|mut addrs| addrs.next())
                .ok_or_else(|| format!("cannot resolve the master lim host `{}`", self.master)),
        }
    }
}

/// The loop's end: the availability changes the task found, in order.
#[derive(Debug, Default)]
pub(crate) struct LimUpdates {
    changes: Option<mpsc::Receiver<(HostName, bool)>>,
}

impl LimUpdates {
    /// Takes every change waiting now, without blocking.
    pub(crate) fn drain(&mut self) -> Vec<(HostName, bool)> {
        let mut out = Vec::new();
        if let Some(changes) = self.changes.as_mut() {
            while let Ok(change) = changes.try_recv() {
                out.push(change);
            }
        }
        out
    }
}

/// Starts the polling task (inside the runtime) for the execution `hosts`.
pub(crate) fn spawn(target: LimTarget, hosts: BTreeSet<HostName>) -> LimUpdates {
    let (tx, rx) = mpsc::channel(CHANGES_QUEUED_MAX);
    tokio::spawn(poll(target, hosts, tx));
    LimUpdates { changes: Some(rx) }
}

/// lim's view as the loop last heard it, and the changes a fresh view makes.
#[derive(Debug, Default)]
pub(crate) struct View {
    unavailable: BTreeSet<HostName>,
}

impl View {
    /// The changes that make the view `unavailable` (hosts not in it are available).
    pub(crate) fn update(&mut self, unavailable: BTreeSet<HostName>) -> Vec<(HostName, bool)> {
        let mut changes: Vec<(HostName, bool)> =
            self.unavailable.difference(&unavailable).map(|h| (h.clone(), true)).collect();
        changes.extend(unavailable.difference(&self.unavailable).map(|h| (h.clone(), false)));
        self.unavailable = unavailable;
        changes
    }
}

/// The execution hosts a HOST_LOAD reply marks unavailable.
pub(crate) fn unavailable_in(reply: &wire::HostLoadReply, hosts: &BTreeSet<HostName>) -> BTreeSet<HostName> {
    let by_name: BTreeMap<&str, &HostName> = hosts.iter().map(|h| (h.as_str(), h)).collect();
    reply
        .hosts
        .iter()
        .filter(|host| host.status != wire::HOST_STATUS_OK)
        .filter_map(|host| by_name.get(host.name.as_str()).map(|h| (*h).clone()))
        .collect()
}

async fn poll(target: LimTarget, hosts: BTreeSet<HostName>, tx: mpsc::Sender<(HostName, bool)>) {
    let mut view = View::default();
    let mut reachable: Option<bool> = None;
    let period = Duration::from_millis(target.interval_ms);
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let timeout = Duration::from_millis(target.interval_ms.max(QUERY_TIMEOUT_MS_MIN));
    loop {
        interval.tick().await;
        let answer = match tokio::time::timeout(timeout, query(&target)).await {
            Ok(answer) => answer,
            Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
        };
        let unavailable = match answer {
            Ok(reply) => {
                if reachable != Some(true) {
                    tracing::info!(master = %target.master, "master lim answers: host availability follows it");
                }
                reachable = Some(true);
                unavailable_in(&reply, &hosts)
            }
            Err(why) => {
                if reachable != Some(false) {
                    tracing::warn!(
                        master = %target.master,
                        "master lim cannot be asked ({why}); every host counts as available until it answers"
                    );
                }
                reachable = Some(false);
                BTreeSet::new()
            }
        };
        for change in view.update(unavailable) {
            if tx.send(change).await.is_err() {
                return; // the loop is gone: mbatchd is stopping
            }
        }
    }
}

/// One `LIM_TCP_HOST_LOAD` query.
async fn query(target: &LimTarget) -> Result<wire::HostLoadReply, String> {
    let addr = target.resolve()?;
    let io = |error: std::io::Error| format!("{addr}: {error}");
    let mut stream = TcpStream::connect(addr).await.map_err(io)?;
    let mut request = Vec::with_capacity(HEADER_BYTES);
    FrameHeader {
        sequence: 1,
        operation: wire::LIM_TCP_HOST_LOAD,
        version: wire::LIM_VERSION,
        length: 0,
        status: 0,
    }
    .write(&mut request);
    stream.write_all(&request).await.map_err(io)?;
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).await.map_err(io)?;
    let header = FrameHeader::parse(&head).map_err(|error| error.to_string())?;
    header.check_version(wire::LIM_VERSION).map_err(|error| error.to_string())?;
    if header.status != wire::TCP_STATUS_OK {
        return Err(format!("{addr} is not the master lim (status {})", header.status));
    }
    if header.length > REPLY_BYTES_MAX {
        return Err(format!("a reply of {} bytes is too large", header.length));
    }
    let mut body = vec![0u8; header.length as usize];
    stream.read_exact(&mut body).await.map_err(io)?;
    let limits = lava_xdr::Limits { input_bytes_max: body.len().max(1), ..lava_xdr::Limits::default() };
    lava_xdr::from_bytes(&body, &limits).map_err(|error| format!("bad reply: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str) -> HostName {
        HostName::parse("test", name).expect("valid host name")
    }

    fn load(name: &str, status: u32) -> wire::HostLoad {
        wire::HostLoad {
            name: name.into(),
            host_type: String::new(),
            model: String::new(),
            server: true,
            status,
            status0: 0,
            nidx: 0,
            li: [0.0; wire::LIM_NIDX],
            age_ms: 0,
        }
    }

    // Goal: only changes are reported, unavailable hosts that are not
    // execution hosts are ignored, and "no information" makes every host available.
    #[test]
    fn view_reports_changes_only() {
        let hosts: BTreeSet<HostName> = [host("h0"), host("h1")].into();
        let reply = wire::HostLoadReply {
            hosts: vec![load("h0", wire::HOST_STATUS_OK), load("h1", 1), load("client", 1)],
        };
        let mut view = View::default();
        assert_eq!(view.update(unavailable_in(&reply, &hosts)), vec![(host("h1"), false)]);
        assert_eq!(view.update(unavailable_in(&reply, &hosts)), vec![]);
        assert_eq!(view.update(BTreeSet::new()), vec![(host("h1"), true)]);
        assert_eq!(view.update(BTreeSet::new()), vec![]);
    }
}
