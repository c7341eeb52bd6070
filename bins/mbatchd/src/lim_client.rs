//! mbatchd's view of host liveness and load: a task that polls the master
//! lim's TCP query port (`LIM_TCP_HOST_LOAD` and `LIM_TCP_HOSTS_INFO`,
//! lava-lim-wire) and hands the event loop each change of a host's
//! availability, stepped as [`lava_mbd::Input::HostAvailability`], and each
//! change of its load indices, static facts (CPUs, memory, swap) and status
//! word (LIM §6 `status0`: locked by `lsadmin limlock`, busy beyond a load
//! threshold), stepped as [`lava_mbd::Input::HostLoad`] for `-R` and for
//! eligibility (both transient: never logged).
//!
//! # The status word
//! A host is unavailable when lim's reply says so (`status`) or its word has
//! `LIM_UNAVAIL`; otherwise any lock bit (`LIM_LOCKEDU`, `LIM_LOCKEDW`,
//! `LIM_LOCKEDM`) makes it [`LimFacts::locked`] and `LIM_BUSY` makes it
//! [`LimFacts::busy`]: placement sends it no new job and `bhosts` shows
//! `closed_Lock` or `closed_Busy`.
//!
//! # Where and how often
//! The master lim is one of the master candidates (`LSF_MASTER_LIST`, else the
//! first server host of `lsf.cluster`), each at its `LAVA_ADDR` (else its
//! resolved name) and its `LAVA_LIM_PORT` (else `LAVA_LIM_TCP_PORT`), as
//! `lsload` finds it: the one that answered last is asked first, then the
//! others in list order, until one answers as master. It is asked every lim report
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
use lava_mbd::LimFacts;
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

/// One master candidate's lim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimHost {
    /// Its host name, for the log and late resolution.
    pub name: String,
    /// Its address, when `LAVA_ADDR` gives one (else the name is resolved at each poll).
    pub addr: Option<SocketAddr>,
    /// Its TCP query port.
    pub port: u16,
}

impl LimHost {
    fn resolve(&self) -> Result<SocketAddr, String> {
        match self.addr {
            Some(addr) => Ok(addr),
            None => (self.name.as_str(), self.port)
                .to_socket_addrs()
                .ok()
                .and_then(|mut addrs| addrs.next())
                .ok_or_else(|| format!("cannot resolve the master lim host `{}`", self.name)),
        }
    }
}

/// Where the master lim may be and how often to ask it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimTarget {
    /// The master candidates' lims, most preferred first.
    pub candidates: Vec<LimHost>,
    /// Time between two queries.
    pub interval_ms: u64,
}

impl LimTarget {
    /// The master candidates' lims of `conf`, or `None` when `lsf.cluster` lists no server
    /// host or `LAVA_LIM_REPORT_INTERVAL_MS` is not a positive number.
    pub fn from_cluster(conf: &ClusterConfig) -> Option<LimTarget> {
        let candidates: Vec<LimHost> = conf
            .master_candidates()
            .into_iter()
            .map(|host| {
                let port = host.lim_tcp_port(&conf.lsf);
                LimHost { name: host.name.clone(), addr: host.addr.map(|ip| SocketAddr::new(ip, port)), port }
            })
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let interval_ms = match conf.lsf.get("LAVA_LIM_REPORT_INTERVAL_MS") {
            None | Some("") => POLL_INTERVAL_MS_DEFAULT,
            Some(text) => text.trim().parse::<u64>().ok().filter(|ms| *ms > 0)?,
        };
        Some(LimTarget { candidates, interval_ms })
    }
}

/// One change lim's answers showed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum LimUpdate {
    /// A host became available (`true`) or unavailable.
    Availability(HostName, bool),
    /// A host's load indices or static facts changed.
    Load(HostName, Box<LimFacts>),
}

/// The loop's end: the changes the task found, in order.
#[derive(Debug, Default)]
pub(crate) struct LimUpdates {
    changes: Option<mpsc::Receiver<LimUpdate>>,
}

impl LimUpdates {
    /// Takes every change waiting now, without blocking.
    pub(crate) fn drain(&mut self) -> Vec<LimUpdate> {
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
    facts: BTreeMap<HostName, LimFacts>,
}

impl View {
    /// The changes that make the view `unavailable` (hosts not in it are available).
    pub(crate) fn update(&mut self, unavailable: BTreeSet<HostName>) -> Vec<LimUpdate> {
        let mut changes: Vec<LimUpdate> = self
            .unavailable
            .difference(&unavailable)
            .map(|h| LimUpdate::Availability(h.clone(), true))
            .collect();
        changes.extend(
            unavailable.difference(&self.unavailable).map(|h| LimUpdate::Availability(h.clone(), false)),
        );
        self.unavailable = unavailable;
        changes
    }

    /// The hosts whose facts differ from the last ones sent.
    pub(crate) fn update_facts(&mut self, facts: BTreeMap<HostName, LimFacts>) -> Vec<LimUpdate> {
        let mut changes = Vec::new();
        for (host, new) in facts {
            if self.facts.get(&host) != Some(&new) {
                changes.push(LimUpdate::Load(host.clone(), Box::new(new.clone())));
                self.facts.insert(host, new);
            }
        }
        changes
    }
}

/// Each execution host's load (when it reported) and static facts (when its lim answered).
pub(crate) fn facts_in(
    loads: &wire::HostLoadReply,
    statics: Option<&wire::HostsInfoReply>,
    hosts: &BTreeSet<HostName>,
) -> BTreeMap<HostName, LimFacts> {
    let by_name: BTreeMap<&str, &HostName> = hosts.iter().map(|h| (h.as_str(), h)).collect();
    let mut out = BTreeMap::new();
    for load in &loads.hosts {
        let Some(host) = by_name.get(load.name.as_str()) else { continue };
        let available = load.status == wire::HOST_STATUS_OK && load.status0 & wire::LIM_UNAVAIL == 0;
        let reported = load.nidx as usize >= wire::LIM_NIDX && available;
        let known = statics.and_then(|reply| reply.hosts.iter().find(|h| h.name == load.name));
        out.insert(
            (*host).clone(),
            LimFacts {
                load: reported.then_some(load.li),
                ncpus: known.map_or(0, |h| h.ncpus),
                maxmem_mb: known.map_or(0, |h| h.maxmem_mb),
                maxswp_mb: known.map_or(0, |h| h.maxswp_mb),
                locked: available && load.status0 & wire::LIM_LOCKED_MASK != 0,
                busy: available && load.status0 & wire::LIM_BUSY != 0,
            },
        );
    }
    out
}

/// The execution hosts a HOST_LOAD reply marks unavailable (`status`, or `LIM_UNAVAIL` in
/// the status word).
pub(crate) fn unavailable_in(reply: &wire::HostLoadReply, hosts: &BTreeSet<HostName>) -> BTreeSet<HostName> {
    let by_name: BTreeMap<&str, &HostName> = hosts.iter().map(|h| (h.as_str(), h)).collect();
    reply
        .hosts
        .iter()
        .filter(|host| host.status != wire::HOST_STATUS_OK || host.status0 & wire::LIM_UNAVAIL != 0)
        .filter_map(|host| by_name.get(host.name.as_str()).map(|h| (*h).clone()))
        .collect()
}

/// Asks the candidate that answered last (`current`), then the others in list order, until
/// one answers as master; `current` becomes that one. Each candidate has `timeout`.
async fn ask<T: serde::de::DeserializeOwned>(
    target: &LimTarget,
    current: &mut usize,
    operation: u32,
    timeout: Duration,
) -> Result<T, String> {
    let n = target.candidates.len();
    let order = std::iter::once(*current).chain((0..n).filter(|idx| idx != current));
    let mut misses = Vec::new();
    for idx in order {
        let host = &target.candidates[idx];
        let answer = match tokio::time::timeout(timeout, query(host, operation)).await {
            Ok(answer) => answer,
            Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
        };
        match answer {
            Ok(reply) => {
                *current = idx;
                return Ok(reply);
            }
            Err(why) => misses.push(format!("{}: {why}", host.name)),
        }
    }
    Err(misses.join("; "))
}

async fn poll(target: LimTarget, hosts: BTreeSet<HostName>, tx: mpsc::Sender<LimUpdate>) {
    let mut view = View::default();
    let mut reachable: Option<bool> = None;
    let mut current = 0usize;
    let mut answered: Option<usize> = None;
    let period = Duration::from_millis(target.interval_ms);
    let mut interval = tokio::time::interval(period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let timeout = Duration::from_millis(target.interval_ms.max(QUERY_TIMEOUT_MS_MIN));
    loop {
        interval.tick().await;
        let answer = ask(&target, &mut current, wire::LIM_TCP_HOST_LOAD, timeout).await;
        let mut changes = Vec::new();
        let unavailable = match answer {
            Ok(reply) => {
                if reachable != Some(true) || answered != Some(current) {
                    let master = &target.candidates[current].name;
                    tracing::info!(%master, "master lim answers: host availability follows it");
                }
                reachable = Some(true);
                answered = Some(current);
                // Static facts are a second question; without them the loads still count.
                let host = &target.candidates[current];
                let statics = tokio::time::timeout(timeout, query(host, wire::LIM_TCP_HOSTS_INFO)).await;
                let statics: Option<wire::HostsInfoReply> = statics.ok().and_then(Result::ok);
                changes.extend(view.update_facts(facts_in(&reply, statics.as_ref(), &hosts)));
                unavailable_in(&reply, &hosts)
            }
            Err(why) => {
                if reachable != Some(false) {
                    tracing::warn!(
                        "no master lim can be asked ({why}); every host counts as available until one answers"
                    );
                }
                reachable = Some(false);
                BTreeSet::new()
            }
        };
        changes.extend(view.update(unavailable));
        for change in changes {
            if tx.send(change).await.is_err() {
                return; // the loop is gone: mbatchd is stopping
            }
        }
    }
}

/// One query (`LIM_TCP_HOST_LOAD`, `LIM_TCP_HOSTS_INFO`) and its decoded reply.
async fn query<T: serde::de::DeserializeOwned>(host: &LimHost, operation: u32) -> Result<T, String> {
    let addr = host.resolve()?;
    let io = |error: std::io::Error| format!("{addr}: {error}");
    let mut stream = TcpStream::connect(addr).await.map_err(io)?;
    let mut request = Vec::with_capacity(HEADER_BYTES);
    FrameHeader { sequence: 1, operation, version: wire::LIM_VERSION, length: 0, status: 0 }
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
        assert_eq!(
            view.update(unavailable_in(&reply, &hosts)),
            vec![LimUpdate::Availability(host("h1"), false)]
        );
        assert_eq!(view.update(unavailable_in(&reply, &hosts)), vec![]);
        assert_eq!(view.update(BTreeSet::new()), vec![LimUpdate::Availability(host("h1"), true)]);
        assert_eq!(view.update(BTreeSet::new()), vec![]);
    }

    // Goal: a reporting host's loads and its static facts reach the logic once per change;
    // a host that never reported has no load, a client host is ignored.
    #[test]
    fn facts_report_changes_only() {
        let hosts: BTreeSet<HostName> = [host("h0"), host("h1")].into();
        let mut reporting = load("h0", wire::HOST_STATUS_OK);
        reporting.nidx = wire::LIM_NIDX as u32;
        reporting.li[10] = 2048.0;
        let reply = wire::HostLoadReply { hosts: vec![reporting.clone(), load("h1", 1), load("client", 0)] };
        let statics = wire::HostsInfoReply {
            hosts: vec![wire::HostStatic {
                name: "h0".into(),
                host_type: String::new(),
                model: String::new(),
                server: true,
                ncpus: 4,
                maxmem_mb: 8000,
                maxswp_mb: 1000,
            }],
        };
        let facts = facts_in(&reply, Some(&statics), &hosts);
        let h0 = LimFacts {
            load: Some(reporting.li),
            ncpus: 4,
            maxmem_mb: 8000,
            maxswp_mb: 1000,
            locked: false,
            busy: false,
        };
        let h1 = LimFacts { load: None, ncpus: 0, maxmem_mb: 0, maxswp_mb: 0, locked: false, busy: false };
        assert_eq!(facts, BTreeMap::from([(host("h0"), h0.clone()), (host("h1"), h1.clone())]));
        let mut view = View::default();
        assert_eq!(
            view.update_facts(facts.clone()),
            vec![LimUpdate::Load(host("h0"), Box::new(h0)), LimUpdate::Load(host("h1"), Box::new(h1))]
        );
        assert_eq!(view.update_facts(facts), vec![]);
    }

    // Goal: the status word reaches the logic: a lock bit makes the host locked, LIM_BUSY
    // busy, each change once; LIM_UNAVAIL in the word is unavailable (and neither locked nor
    // busy, its bits being stale).
    #[test]
    fn status_word_makes_hosts_locked_busy_or_unavailable() {
        let hosts: BTreeSet<HostName> = [host("h0"), host("h1"), host("h2")].into();
        let mut locked = load("h0", wire::HOST_STATUS_OK);
        locked.status0 = wire::LIM_LOCKEDU;
        let mut busy = load("h1", wire::HOST_STATUS_OK);
        busy.status0 = wire::LIM_BUSY | 1 << 1;
        let mut gone = load("h2", wire::HOST_STATUS_OK);
        gone.status0 = wire::LIM_UNAVAIL | wire::LIM_LOCKEDU;
        let reply = wire::HostLoadReply { hosts: vec![locked, busy, gone] };
        let facts = facts_in(&reply, None, &hosts);
        let flags: Vec<(bool, bool)> = facts.values().map(|f| (f.locked, f.busy)).collect();
        assert_eq!(flags, vec![(true, false), (false, true), (false, false)]);
        assert_eq!(unavailable_in(&reply, &hosts), [host("h2")].into());
        let mut view = View::default();
        assert_eq!(view.update_facts(facts.clone()).len(), 3);
        assert_eq!(view.update_facts(facts), vec![]);
        let mut unlocked = reply.clone();
        unlocked.hosts[0].status0 = wire::LIM_OK;
        let changes = view.update_facts(facts_in(&unlocked, None, &hosts));
        assert!(
            matches!(changes.as_slice(), [LimUpdate::Load(h, f)] if *h == host("h0") && !f.locked),
            "{changes:?}"
        );
    }
}
