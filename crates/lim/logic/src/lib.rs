//! lava-lim-logic: the LIM as a pure state machine (../shared/specs/lim-protocol.md, sections
//! 3, 4, 6 and 7).
//!
//! # What it owns
//! [`Lim`]: one lim, master or slave. The master is the first host of lsf.cluster's Host
//! section (static, no election, as spec section 10 and LavaLite 0.1.2's `hostNo == 0`).
//! - **Master**: sends a beacon to every other configured host every `beacon_interval_ms`;
//!   records each host's last report; a host not heard from for 3 report intervals is
//!   unavailable ([`Effect::HostUnavailable`]); the next accepted report makes it available
//!   again. Its own load comes from [`Input::Sampled`].
//! - **Slave**: learns the master from a valid beacon, reports every `report_interval_ms`
//!   (the first report right after the beacon that (re)validated the master), stops after 3
//!   missed beacon intervals ([`Effect::MasterLost`]) and resumes on the next valid beacon.
//! - Admission: a datagram must come from the configured address (IP *and* port) of a
//!   configured host; a report's `hostNo` must be that host; a beacon must come from the
//!   master. Everything else is dropped and counted by [`DropReason`]; the shell reports its
//!   own decode failures through [`Input::Rejected`] so that all counters live here.
//! - Sequence numbers (serial-number arithmetic, RFC 1982 style on u32): a number equal to the
//!   last accepted one is a duplicate; one at most [`REORDER_WINDOW`] behind is stale (a
//!   reordered datagram); anything else (ahead, or far behind: the peer restarted and its
//!   counter started again) is accepted. After a peer was declared lost any number is
//!   accepted. Shells start their counters at a value derived from the wall clock so that a
//!   restarted peer is unlikely to land inside the window.
//!
//! # The shell's contract
//! Feed every received datagram (decoded by lava-lim-wire, validated by lava-lim-ll with
//! [`Lim::context`]) as [`Input::Datagram`] with its source address, every refused one as
//! [`Input::Rejected`], a fresh load sample as [`Input::Sampled`], and [`Input::Tick`] no later
//! than [`Lim::next_deadline_ms`]. Carry out the returned effects in order ([`Effect::Send`]:
//! encode and send one datagram; the others: log). `now_ms` is a monotonic clock and never
//! goes backwards.
//!
//! # What it never does
//! No clock, socket, randomness or logging; no byte encoding.

#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::net::SocketAddr;

pub use lava_lim_ll::{Beacon, Context, LoadReport, LoadVector, Message};

/// Missed intervals after which a host (master side) or the master (slave side) is lost.
pub const MISSED_INTERVALS_MAX: u64 = 3;
/// How far behind the last accepted sequence number a datagram counts as reordered.
pub const REORDER_WINDOW: u32 = 1024;
/// Default beacon interval (spec section 8: every 4 s).
pub const BEACON_INTERVAL_MS_DEFAULT: u64 = 4_000;
/// Default report interval T (LavaLite 0.1.2 ticks every 5 s).
pub const REPORT_INTERVAL_MS_DEFAULT: u64 = 5_000;

/// One configured host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostConfig {
    /// Name as in lsf.cluster.
    pub name: String,
    /// The address its lim sends from and listens on; `None` if it could not be resolved
    /// (then nothing is accepted from it and nothing sent to it).
    pub addr: Option<SocketAddr>,
}

/// Everything a lim needs to know before it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Cluster name (at most 31 bytes).
    pub cluster: String,
    /// Hosts in lsf.cluster order; the first is the master.
    pub hosts: Vec<HostConfig>,
    /// Our index in `hosts`.
    pub me: u32,
    /// Master: interval between beacons.
    pub beacon_interval_ms: u64,
    /// Slave: interval between load reports (T).
    pub report_interval_ms: u64,
    /// The master's TCP query port, announced in beacons.
    pub tcp_port: u16,
    /// First sequence number this lim sends.
    pub initial_seqno: u32,
}

/// Why a datagram was dropped; each has a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropReason {
    /// Shorter than the header.
    Short,
    /// Longer than any LIM datagram.
    Oversized,
    /// Unknown protocol version.
    WrongVersion,
    /// Header length differs from the payload.
    LengthMismatch,
    /// Unknown operation.
    UnknownOpcode,
    /// Payload malformed or invalid (XDR, strings, nidx, values, host index).
    Malformed,
    /// Another cluster's beacon.
    WrongCluster,
    /// Source address is not a configured host's lim.
    UnknownSource,
    /// `hostNo` differs from the host at the source address.
    WrongHostNo,
    /// A beacon from a host that is not the master, or any datagram this role never receives.
    NotMaster,
    /// Same sequence number as the last accepted.
    Duplicate,
    /// Sequence number slightly behind the last accepted (reordered).
    Stale,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 12] = [
        DropReason::Short,
        DropReason::Oversized,
        DropReason::WrongVersion,
        DropReason::LengthMismatch,
        DropReason::UnknownOpcode,
        DropReason::Malformed,
        DropReason::WrongCluster,
        DropReason::UnknownSource,
        DropReason::WrongHostNo,
        DropReason::NotMaster,
        DropReason::Duplicate,
        DropReason::Stale,
    ];

    /// Counter name, e.g. `drop_short`.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Short => "drop_short",
            DropReason::Oversized => "drop_oversized",
            DropReason::WrongVersion => "drop_wrong_version",
            DropReason::LengthMismatch => "drop_length_mismatch",
            DropReason::UnknownOpcode => "drop_unknown_opcode",
            DropReason::Malformed => "drop_malformed",
            DropReason::WrongCluster => "drop_wrong_cluster",
            DropReason::UnknownSource => "drop_unknown_source",
            DropReason::WrongHostNo => "drop_wrong_host_no",
            DropReason::NotMaster => "drop_not_master",
            DropReason::Duplicate => "drop_duplicate",
            DropReason::Stale => "drop_stale",
        }
    }
}

/// An input of [`Lim::step`].
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// Time passed.
    Tick,
    /// A valid datagram from `from`.
    Datagram {
        /// Source address.
        from: SocketAddr,
        /// The validated message.
        message: Message,
    },
    /// The shell refused a datagram (decode or validation failure).
    Rejected(DropReason),
    /// A fresh sample of this host's load.
    Sampled(LoadVector),
}

/// An outgoing message.
#[derive(Clone, Debug, PartialEq)]
pub enum Outgoing {
    /// A master beacon.
    Beacon(Beacon),
    /// A load report.
    LoadReport(LoadReport),
}

/// An effect of [`Lim::step`], to carry out in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Send one datagram with header sequence `sequence` to `to`.
    Send {
        /// Destination.
        to: SocketAddr,
        /// Header sequence.
        sequence: u32,
        /// Payload.
        message: Outgoing,
    },
    /// A datagram was dropped (log it at debug level).
    Dropped(DropReason),
    /// Master: the host missed 3 report intervals.
    HostUnavailable(u32),
    /// Master: the host reports again.
    HostAvailable(u32),
    /// Slave: a valid beacon (re)established the master.
    MasterFound {
        /// Master's name.
        master: String,
        /// Master's TCP query port.
        tcp_port: u16,
    },
    /// Slave: 3 beacon intervals passed without a beacon; reporting stops.
    MasterLost,
}

/// Availability of a host as the master sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostStatus {
    /// Reporting.
    Ok,
    /// Never reported, or missed 3 report intervals.
    Unavailable,
}

/// What the master knows about one host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostState {
    /// Availability.
    pub status: HostStatus,
    /// Last reported `status0`.
    pub status0: u32,
    /// Last reported load.
    pub load: LoadVector,
    /// When the last report was accepted.
    pub last_report_ms: Option<u64>,
    last_seqno: Option<u32>,
}

/// One lim; see the crate documentation.
#[derive(Debug)]
pub struct Lim {
    config: Config,
    hosts: Vec<HostState>,
    own_load: LoadVector,
    next_seqno: u32,
    next_send_ms: Option<u64>,
    // Slave side.
    master_valid: bool,
    last_beacon_ms: u64,
    last_beacon_seqno: Option<u32>,
    master_tcp_port: Option<u16>,
    // Counters.
    drops: BTreeMap<DropReason, u64>,
    n_accepted: u64,
}

impl Lim {
    /// A lim that has heard nothing yet. Panics if `config.me` is not a host index.
    pub fn new(config: Config) -> Lim {
        assert!((config.me as usize) < config.hosts.len(), "our host index must be configured");
        assert!(config.beacon_interval_ms > 0 && config.report_interval_ms > 0, "intervals must be positive");
        let hosts = (0..config.hosts.len())
            .map(|_| HostState {
                status: HostStatus::Unavailable,
                status0: 0,
                load: LoadVector::EMPTY,
                last_report_ms: None,
                last_seqno: None,
            })
            .collect();
        Lim {
            next_seqno: config.initial_seqno,
            config,
            hosts,
            own_load: LoadVector::EMPTY,
            next_send_ms: None,
            master_valid: false,
            last_beacon_ms: 0,
            last_beacon_seqno: None,
            master_tcp_port: None,
            drops: BTreeMap::new(),
            n_accepted: 0,
        }
    }

    /// Whether this lim is the master (first configured host).
    pub fn is_master(&self) -> bool {
        self.config.me == 0
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What lava-lim-ll validates datagrams against.
    pub fn context(&self) -> Context<'_> {
        Context { cluster: &self.config.cluster, n_hosts: self.config.hosts.len() as u32 }
    }

    /// The cluster's name.
    pub fn cluster_name(&self) -> &str {
        &self.config.cluster
    }

    /// The master's name (the first configured host).
    pub fn master_name(&self) -> &str {
        &self.config.hosts[0].name
    }

    /// Slave: whether a valid master is known (reports are being sent).
    pub fn master_valid(&self) -> bool {
        self.master_valid
    }

    /// Slave: the TCP port the last valid beacon announced.
    pub fn master_tcp_port(&self) -> Option<u16> {
        self.master_tcp_port
    }

    /// Master: every host's state, in lsf.cluster order (index = host index).
    pub fn hosts(&self) -> &[HostState] {
        &self.hosts
    }

    /// Drops by reason, zeros included, in [`DropReason::ALL`] order.
    pub fn drop_counts(&self) -> Vec<(DropReason, u64)> {
        DropReason::ALL
            .iter()
            .map(|&reason| (reason, self.drops.get(&reason).copied().unwrap_or(0)))
            .collect()
    }

    /// Datagrams accepted so far.
    pub fn n_accepted(&self) -> u64 {
        self.n_accepted
    }

    /// The latest time by which [`Input::Tick`] must be fed (`u64::MAX`: nothing pending).
    pub fn next_deadline_ms(&self) -> u64 {
        let mut deadline = self.next_send_ms.unwrap_or(u64::MAX);
        if self.is_master() {
            for (idx, host) in self.hosts.iter().enumerate() {
                if idx != 0
                    && host.status == HostStatus::Ok
                    && let Some(last) = host.last_report_ms
                {
                    deadline = deadline.min(last + self.host_timeout_ms() + 1);
                }
            }
        } else if self.master_valid {
            deadline = deadline.min(self.last_beacon_ms + self.master_timeout_ms() + 1);
        }
        deadline
    }

    fn host_timeout_ms(&self) -> u64 {
        MISSED_INTERVALS_MAX * self.config.report_interval_ms
    }

    fn master_timeout_ms(&self) -> u64 {
        MISSED_INTERVALS_MAX * self.config.beacon_interval_ms
    }

    /// Advances the machine; returns the effects to carry out in order.
    pub fn step(&mut self, now_ms: u64, input: Input) -> Vec<Effect> {
        let mut effects = Vec::new();
        match input {
            Input::Tick => {}
            Input::Rejected(reason) => self.drop(reason, &mut effects),
            Input::Sampled(load) => {
                self.own_load = load;
                if self.is_master() {
                    let own = &mut self.hosts[0];
                    own.load = load;
                    own.status = HostStatus::Ok;
                    own.last_report_ms = Some(now_ms);
                }
            }
            Input::Datagram { from, message } => self.receive(now_ms, from, message, &mut effects),
        }
        self.on_time(now_ms, &mut effects);
        effects
    }

    fn drop(&mut self, reason: DropReason, effects: &mut Vec<Effect>) {
        *self.drops.entry(reason).or_insert(0) += 1;
        effects.push(Effect::Dropped(reason));
    }

    fn take_seqno(&mut self) -> u32 {
        let seqno = self.next_seqno;
        self.next_seqno = seqno.wrapping_add(1);
        seqno
    }

    fn receive(&mut self, now_ms: u64, from: SocketAddr, message: Message, effects: &mut Vec<Effect>) {
        let Some(source_idx) = self.config.hosts.iter().position(|host| host.addr == Some(from)) else {
            return self.drop(DropReason::UnknownSource, effects);
        };
        match message {
            Message::LoadReport(report) => {
                if !self.is_master() {
                    return self.drop(DropReason::NotMaster, effects);
                }
                if report.host_idx as usize != source_idx || source_idx == 0 {
                    return self.drop(DropReason::WrongHostNo, effects);
                }
                let host = &self.hosts[source_idx];
                let last = if host.status == HostStatus::Ok { host.last_seqno } else { None };
                if let Some(reason) = sequence_verdict(last, report.seqno) {
                    return self.drop(reason, effects);
                }
                let host = &mut self.hosts[source_idx];
                host.last_seqno = Some(report.seqno);
                host.last_report_ms = Some(now_ms);
                host.status0 = report.status0;
                host.load = report.load;
                if host.status == HostStatus::Unavailable {
                    host.status = HostStatus::Ok;
                    effects.push(Effect::HostAvailable(report.host_idx));
                }
                self.n_accepted += 1;
            }
            Message::Beacon(beacon) => {
                if self.is_master()
                    || source_idx != 0
                    || beacon.host_idx != 0
                    || beacon.master != self.master_name()
                {
                    return self.drop(DropReason::NotMaster, effects);
                }
                let last = if self.master_valid { self.last_beacon_seqno } else { None };
                if let Some(reason) = sequence_verdict(last, beacon.seqno) {
                    return self.drop(reason, effects);
                }
                self.last_beacon_seqno = Some(beacon.seqno);
                self.last_beacon_ms = now_ms;
                self.master_tcp_port = Some(beacon.tcp_port);
                self.n_accepted += 1;
                if !self.master_valid {
                    self.master_valid = true;
                    self.next_send_ms = Some(now_ms);
                    effects.push(Effect::MasterFound { master: beacon.master, tcp_port: beacon.tcp_port });
                }
            }
        }
    }

    fn on_time(&mut self, now_ms: u64, effects: &mut Vec<Effect>) {
        if self.is_master() {
            for idx in 1..self.hosts.len() {
                let timeout_ms = self.host_timeout_ms();
                let host = &mut self.hosts[idx];
                if host.status == HostStatus::Ok
                    && host.last_report_ms.is_some_and(|last| now_ms > last + timeout_ms)
                {
                    host.status = HostStatus::Unavailable;
                    effects.push(Effect::HostUnavailable(idx as u32));
                }
            }
            if self.next_send_ms.is_none_or(|at| now_ms >= at) {
                self.next_send_ms = Some(now_ms + self.config.beacon_interval_ms);
                let seqno = self.take_seqno();
                let beacon = Beacon {
                    cluster: self.config.cluster.clone(),
                    master: self.master_name().to_owned(),
                    host_idx: 0,
                    seqno,
                    tcp_port: self.config.tcp_port,
                };
                for host in &self.config.hosts[1..] {
                    if let Some(to) = host.addr {
                        effects.push(Effect::Send {
                            to,
                            sequence: seqno,
                            message: Outgoing::Beacon(beacon.clone()),
                        });
                    }
                }
            }
            return;
        }
        if self.master_valid && now_ms > self.last_beacon_ms + self.master_timeout_ms() {
            self.master_valid = false;
            self.next_send_ms = None;
            effects.push(Effect::MasterLost);
        }
        if self.master_valid
            && self.next_send_ms.is_some_and(|at| now_ms >= at)
            && let Some(to) = self.config.hosts[0].addr
        {
            self.next_send_ms = Some(now_ms + self.config.report_interval_ms);
            let seqno = self.take_seqno();
            let report = LoadReport { host_idx: self.config.me, seqno, status0: 0, load: self.own_load };
            effects.push(Effect::Send { to, sequence: seqno, message: Outgoing::LoadReport(report) });
        }
    }
}

/// Whether a datagram with sequence `seqno` is refused after `last` was accepted.
fn sequence_verdict(last: Option<u32>, seqno: u32) -> Option<DropReason> {
    let last = last?;
    let behind = last.wrapping_sub(seqno);
    if behind == 0 {
        Some(DropReason::Duplicate)
    } else if behind <= REORDER_WINDOW {
        Some(DropReason::Stale)
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
