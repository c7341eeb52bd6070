//! lava-lim-logic: the LIM as a pure state machine (docs/protocols/lim.md; the original
//! document's sections 3, 4, 6 and 7, mapped in that page).
//!
//! # What it owns
//! [`Lim`]: one lim, master or slave. Without `LSF_MASTER_LIST` the master is the first host
//! of lsf.cluster's Host section (static, as spec section 10 and LavaLite 0.1.2's
//! `hostNo == 0`): [`Config::candidates`] is that one host and it is master from its first
//! step. With `LSF_MASTER_LIST` the role moves among the candidates (our extension of the
//! spec, docs/protocols/lim.md "Master election"):
//! - the first live candidate in list order beacons as master. A candidate of rank `r`
//!   (0 first) takes the role when no beacon from a candidate before it was accepted for
//!   [`Lim::takeover_wait_ms`] (0 for rank 0, so the first candidate is master from its first
//!   step, as today's single master; 3 beacon intervals plus `r - 1` more after that);
//! - a master that accepts a beacon from a candidate before it steps down and follows it
//!   ([`Effect::SteppedDown`]); one from a candidate after it is dropped (that one steps down
//!   on hearing ours);
//! - every other lim follows beacons from any candidate: the one it follows, or one before
//!   it in the list (it switches), or any while it follows none; it reports to the one it
//!   follows. The beacon's layout is the spec's: it names the master and its host number.
//! - **Master**: sends a beacon to every other configured host every `beacon_interval_ms`
//!   ([`Effect::SendToAll`]: one effect, the shell encodes the beacon once); records each
//!   host's last report; a host not heard from for 3 report intervals is
//!   unavailable ([`Effect::HostUnavailable`]); the next accepted report makes it available
//!   again. Its own load comes from [`Input::Sampled`].
//! - **Slave**: learns the master from its beacons (spec section 3): a beacon is accepted
//!   only from a candidate's configured address, naming that candidate and its host number,
//!   and reports go to that candidate's address. A valid beacon (re)validates the master and gives its TCP port; the slave
//!   then reports every `report_interval_ms` (the first report right after that beacon),
//!   stops after 3 missed beacon intervals ([`Effect::MasterLost`]) and resumes on the next
//!   valid beacon.
//! - **Status word** (`status0`, spec section 6, LavaLite's bit values re-exported from
//!   lava-lim-wire): every lim keeps its own host's word ([`Lim::status0`]): [`LIM_LOCKEDU`]
//!   while locked ([`Input::Lock`], `lsadmin limlock [-t]`, until [`Input::Unlock`] or the
//!   lock's time is up), [`LIM_BUSY`] plus bit `i` ([`LIM_BUSY_INDEX_MASK`]) for each load
//!   index `i` beyond its threshold ([`Config::thresholds`], judged on every
//!   [`Input::Sampled`]), else [`LIM_OK`]. A slave sends it in every report (a lock or unlock
//!   sends one at once); the master keeps each host's last reported word ([`HostState::status0`];
//!   [`HostState::status_word`] is [`LIM_UNAVAIL`] while the host is unavailable). Each change
//!   of the own word is an [`Effect::StatusChanged`]; each change of a host's reported word an
//!   [`Effect::HostStatus`] on the master.
//! - **Host facts** (CPUs, memory, swap: what `lshosts` prints; the spec's fixed load report
//!   has no room for them): the master asks a host's lim for them when the host becomes
//!   available ([`Effect::FetchHostInfo`]), keeps the answer ([`HostState::info`]), and after
//!   a failed question asks again with the first report [`HOST_INFO_RETRY_MS`] later.
//! - Admission: a datagram must come from the configured address (IP *and* port) of a
//!   configured host (one hash-map lookup, so a master of 10,000 hosts pays the same per
//!   datagram as one of three); a report's `hostNo` must be that host; a beacon must come
//!   from the master. Everything else is dropped and counted by [`DropReason`]; the shell reports its
//!   own decode failures through [`Input::Rejected`] so that all counters live here.
//! - Sequence numbers (serial-number arithmetic, RFC 1982 style on u32, so they wrap): a
//!   number equal to the last accepted one is a duplicate; one behind it (within half the
//!   sequence space, [`REORDER_WINDOW`]) is stale, a reordered or replayed datagram; only a
//!   number ahead is accepted, so an old datagram never overwrites newer load. Shells start
//!   their counters at the wall clock in milliseconds, so a restarted peer (at most one
//!   datagram per millisecond) continues ahead of its previous life. A peer whose counter
//!   went backwards anyway (its clock was stepped back) is refused until it is declared lost
//!   — 3 intervals — after which any number is accepted. What this assumes of the network:
//!   no datagram is delayed by more than 3 intervals (a datagram that old, arriving after
//!   its sender was declared lost, would be accepted).
//!
//! # The shell's contract
//! Feed every received datagram (decoded by lava-lim-wire, validated by lava-lim-ll with
//! [`Lim::context`]) as [`Input::Datagram`] with its source address, every refused one as
//! [`Input::Rejected`], a fresh load sample as [`Input::Sampled`], `lsadmin limlock` and
//! `limunlock` as [`Input::Lock`] and [`Input::Unlock`] (an [`Effect::LockRefused`] among the
//! effects is the refusal to report), the outcome of every
//! [`Effect::FetchHostInfo`] (and, on the master at start, its own host's facts) as
//! [`Input::HostInfo`], and [`Input::Tick`] no later than [`Lim::next_deadline_ms`]. Carry out the returned effects in order ([`Effect::Send`]:
//! encode and send one datagram; [`Effect::SendToAll`]: encode it once and send it to every
//! other configured host; the others: log). `now_ms` is a monotonic clock and never goes
//! backwards. Timeouts are applied at the start of every step, so a late tick delays only
//! the sends, never the judgement of a datagram.
//!
//! # What it never does
//! No clock, socket, randomness or logging; no byte encoding.

#![deny(missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

pub use lava_lim_ll::{
    Beacon, Context, LIM_BUSY, LIM_BUSY_INDEX_MASK, LIM_LOCKED_MASK, LIM_LOCKEDU, LIM_NIDX, LIM_OK,
    LIM_UNAVAIL, LoadReport, LoadVector, Message,
};

/// Missed intervals after which a host (master side) or the master (slave side) is lost.
pub const MISSED_INTERVALS_MAX: u64 = 3;
/// How far behind the last accepted sequence number a datagram counts as reordered: half
/// the sequence space (RFC 1982 serial-number comparison), so only a number *ahead* of the
/// last accepted one is new.
pub const REORDER_WINDOW: u32 = 1 << 31;
/// Default beacon interval (spec section 8: every 4 s).
pub const BEACON_INTERVAL_MS_DEFAULT: u64 = 4_000;
/// After a failed [`Effect::FetchHostInfo`], how long before the master asks again.
pub const HOST_INFO_RETRY_MS: u64 = 60_000;
/// Default report interval T (LavaLite 0.1.2 ticks every 5 s).
pub const REPORT_INTERVAL_MS_DEFAULT: u64 = 5_000;

/// Load indices (spec section 5's order) where a *lower* value means a busier host: `it`,
/// `tmp`, `swp`, `mem` (LSF's decreasing indices). Such an index is beyond its threshold
/// below it; the others (`r15s r1m r15m ut pg io ls`) above it.
pub const DECREASING: [bool; LIM_NIDX] =
    [false, false, false, false, false, false, false, true, true, true, true];

/// This host's load thresholds (lsf.cluster's `Host` section columns `r15s` … `mem`), in the
/// units the indices have (`ut` a fraction of 1, `it` minutes, `tmp swp mem` MB).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Thresholds(pub [Option<f32>; LIM_NIDX]);

impl Thresholds {
    /// No threshold: the host is never busy.
    pub const NONE: Thresholds = Thresholds([None; LIM_NIDX]);

    /// The [`LIM_BUSY_INDEX_MASK`] bits of the valid indices of `load` beyond their threshold:
    /// above it, or below it for a [`DECREASING`] index. Equal is not beyond.
    pub fn busy_bits(&self, load: &LoadVector) -> u32 {
        let n_valid = usize::from(load.n_valid).min(LIM_NIDX);
        let mut bits = 0;
        for (idx, threshold) in self.0.iter().enumerate().take(n_valid) {
            let Some(threshold) = *threshold else { continue };
            let value = load.values[idx];
            let beyond = if DECREASING[idx] { value < threshold } else { value > threshold };
            if beyond {
                bits |= 1 << idx;
            }
        }
        bits
    }
}

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
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Cluster name (at most 31 bytes).
    pub cluster: String,
    /// Hosts in lsf.cluster order.
    pub hosts: Vec<HostConfig>,
    /// The master candidates as host indexes, most preferred first (`LSF_MASTER_LIST`;
    /// without it the first server host alone). Never empty.
    pub candidates: Vec<u32>,
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
    /// Our own host's load thresholds (busy beyond them).
    pub thresholds: Thresholds,
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
    /// A beacon from a host that is not a candidate or that this lim does not follow (a
    /// candidate after the one it follows or is), or any datagram this role never receives.
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
    /// Master: the answer to [`Effect::FetchHostInfo`] (`None`: the host's lim could not be
    /// asked or did not answer in time); also how the shell gives the master its own host's
    /// facts (host 0) at start.
    HostInfo {
        /// Host index.
        host: u32,
        /// The facts.
        info: Option<HostInfo>,
    },
    /// `lsadmin limlock [-t]`: lock this lim's host for `duration_ms` (`None`: until
    /// unlocked). Refused ([`Effect::LockRefused`]) when it is locked already.
    Lock {
        /// How long; `None`: until [`Input::Unlock`].
        duration_ms: Option<u64>,
    },
    /// `lsadmin limunlock`. Refused ([`Effect::LockRefused`]) when it is not locked.
    Unlock,
}

/// Why [`Input::Lock`] or [`Input::Unlock`] changed nothing (LSF's `ls_lockhost` and
/// `ls_unlockhost` errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockRefusal {
    /// A lock while locked.
    AlreadyLocked,
    /// An unlock while not locked.
    NotLocked,
}

impl LockRefusal {
    /// LSF's words for it.
    pub fn text(self) -> &'static str {
        match self {
            LockRefusal::AlreadyLocked => "Host is already locked",
            LockRefusal::NotLocked => "Host is not locked",
        }
    }
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
    /// Send the same datagram to every configured host but ourselves that has an address.
    SendToAll {
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
    /// Master: ask this host's lim for its [`HostInfo`] (TCP, `LIM_TCP_HOST_INFO`) and feed
    /// the outcome back as [`Input::HostInfo`]. Emitted when a host becomes available, and
    /// again with its first report [`HOST_INFO_RETRY_MS`] after a failed attempt.
    FetchHostInfo(u32),
    /// Slave: a valid beacon (re)established the master.
    MasterFound {
        /// Master's name.
        master: String,
        /// Master's TCP query port.
        tcp_port: u16,
    },
    /// Slave: 3 beacon intervals passed without a beacon; reporting stops.
    MasterLost,
    /// A candidate took the master role: it beacons from now on, and every host is
    /// unavailable until it reports (its own host at its next sample).
    BecameMaster,
    /// A master heard a candidate before it in `LSF_MASTER_LIST` and follows it now (a
    /// [`Effect::MasterFound`] follows).
    SteppedDown {
        /// The candidate's host index.
        to: u32,
    },
    /// This lim's own status word changed (lock, unlock, a lock's time up, a threshold
    /// crossed); the new word.
    StatusChanged {
        /// The new word.
        status0: u32,
    },
    /// Master: a host reported a status word other than its last one.
    HostStatus {
        /// Host index.
        host: u32,
        /// The word it reported.
        status0: u32,
    },
    /// [`Input::Lock`] or [`Input::Unlock`] was refused; nothing changed.
    LockRefused(LockRefusal),
}

/// Availability of a host as the master sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostStatus {
    /// Reporting.
    Ok,
    /// Never reported, or missed 3 report intervals.
    Unavailable,
}

/// A host's static facts (what `lshosts` prints), which the spec's fixed load report has no
/// room for: the master asks each host's lim for them over TCP ([`Effect::FetchHostInfo`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostInfo {
    /// Processors.
    pub ncpus: u32,
    /// Physical memory, MB.
    pub maxmem_mb: u32,
    /// Swap space, MB.
    pub maxswp_mb: u32,
}

/// Where the master is with asking a host for its [`HostInfo`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fetch {
    /// Nothing asked (or the answer came).
    Idle,
    /// Asked; the shell will feed [`Input::HostInfo`].
    InFlight,
    /// The last attempt failed; ask again with the first report accepted from this time on.
    RetryAt(u64),
}

/// What the master knows about one host.
#[derive(Clone, Debug, PartialEq)]
pub struct HostState {
    /// Availability.
    pub status: HostStatus,
    /// Last reported `status0` (kept while the host is unavailable; see
    /// [`HostState::status_word`]).
    pub status0: u32,
    /// Last reported load.
    pub load: LoadVector,
    /// When the last report was accepted.
    pub last_report_ms: Option<u64>,
    /// The host's static facts, once its lim told them.
    pub info: Option<HostInfo>,
    last_seqno: Option<u32>,
    fetch: Fetch,
}

impl HostState {
    /// The host's status word as the master answers it: [`LIM_UNAVAIL`] while unavailable
    /// (the last report's bits are stale), else the last reported `status0`.
    pub fn status_word(&self) -> u32 {
        match self.status {
            HostStatus::Ok => self.status0,
            HostStatus::Unavailable => LIM_UNAVAIL,
        }
    }
}

/// One lim; see the crate documentation.
#[derive(Debug)]
pub struct Lim {
    config: Config,
    /// Configured address → host index (the first host when two share one).
    by_addr: HashMap<SocketAddr, u32>,
    hosts: Vec<HostState>,
    /// Master: no available host can time out before this (a lower bound, so that only a
    /// deadline that may have passed costs a scan of every host).
    next_scan_ms: u64,
    own_load: LoadVector,
    /// Our own host's status word, as last computed.
    own_status0: u32,
    /// Locked until then (`u64::MAX`: until unlocked); `None`: not locked.
    locked_until: Option<u64>,
    next_seqno: u32,
    next_send_ms: Option<u64>,
    /// The master: this lim itself, or the candidate it follows (valid beacons); `None`
    /// while it follows nobody.
    master: Option<u32>,
    /// Our rank in [`Config::candidates`], if we are one.
    rank: Option<usize>,
    /// Candidate: when a beacon from a candidate before us was last accepted (or when we
    /// started); we take the master role [`Lim::takeover_wait_ms`] after it.
    better_heard_ms: Option<u64>,
    // Slave side.
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
        assert!(
            !config.candidates.is_empty()
                && config.candidates.iter().all(|&c| (c as usize) < config.hosts.len()),
            "the master candidates must be configured hosts"
        );
        let rank = config.candidates.iter().position(|&c| c == config.me);
        assert!(config.beacon_interval_ms > 0 && config.report_interval_ms > 0, "intervals must be positive");
        let hosts = (0..config.hosts.len())
            .map(|_| HostState {
                status: HostStatus::Unavailable,
                status0: 0,
                load: LoadVector::EMPTY,
                last_report_ms: None,
                info: None,
                last_seqno: None,
                fetch: Fetch::Idle,
            })
            .collect();
        let mut by_addr = HashMap::with_capacity(config.hosts.len());
        for (idx, host) in config.hosts.iter().enumerate() {
            if let Some(addr) = host.addr {
                by_addr.entry(addr).or_insert(idx as u32);
            }
        }
        Lim {
            next_seqno: config.initial_seqno,
            by_addr,
            next_scan_ms: u64::MAX,
            config,
            hosts,
            own_load: LoadVector::EMPTY,
            own_status0: LIM_OK,
            locked_until: None,
            next_send_ms: None,
            master: None,
            rank,
            better_heard_ms: None,
            last_beacon_ms: 0,
            last_beacon_seqno: None,
            master_tcp_port: None,
            drops: BTreeMap::new(),
            n_accepted: 0,
        }
    }

    /// Whether this lim is the master now.
    pub fn is_master(&self) -> bool {
        self.master == Some(self.config.me)
    }

    /// The master's host index: this lim's own, the candidate it follows, or `None` while it
    /// follows nobody.
    pub fn master(&self) -> Option<u32> {
        self.master
    }

    /// Candidate: how long after the last beacon from a candidate before it (or its start)
    /// this lim takes the master role: 0 for the first candidate, 3 beacon intervals for
    /// the second, one beacon interval more for each later one. `None` for a non-candidate.
    pub fn takeover_wait_ms(&self) -> Option<u64> {
        let rank = self.rank? as u64;
        Some(match rank {
            0 => 0,
            _ => self.master_timeout_ms() + (rank - 1) * self.config.beacon_interval_ms,
        })
    }

    fn rank_of(&self, host: u32) -> Option<usize> {
        self.config.candidates.iter().position(|&c| c == host)
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

    /// The master's name: the one this lim is or follows, else the first candidate (the
    /// configured master).
    pub fn master_name(&self) -> &str {
        let idx = self.master.unwrap_or(self.config.candidates[0]);
        &self.config.hosts[idx as usize].name
    }

    /// Slave: whether a valid master is known (reports are being sent).
    pub fn master_valid(&self) -> bool {
        self.master.is_some_and(|m| m != self.config.me)
    }

    /// Slave: the TCP port the last valid beacon announced.
    pub fn master_tcp_port(&self) -> Option<u16> {
        self.master_tcp_port
    }

    /// Our own host's status word (what our reports carry; see the crate documentation).
    pub fn status0(&self) -> u32 {
        self.own_status0
    }

    /// Until when our host is locked (`Some(u64::MAX)`: until unlocked; `None`: not locked).
    pub fn locked_until(&self) -> Option<u64> {
        self.locked_until
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
        let mut deadline = match self.next_send_ms {
            Some(at) => at,
            // A master that has not beaconed yet beacons at its first step.
            None if self.is_master() => 0,
            None => u64::MAX,
        };
        if !self.is_master()
            && let Some(wait) = self.takeover_wait_ms()
        {
            // A candidate that has not stepped yet takes its start at its first step.
            deadline = deadline.min(self.better_heard_ms.map_or(0, |at| at + wait + 1));
        }
        if let Some(until) = self.locked_until.filter(|until| *until != u64::MAX) {
            deadline = deadline.min(until);
        }
        if self.is_master() {
            deadline = deadline.min(self.next_scan_ms);
        } else if self.master_valid() {
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
        // Timeouts first, so that a datagram is judged against the state at `now_ms` even
        // when the shell ticks late.
        self.expire(now_ms, &mut effects);
        match input {
            Input::Tick => {}
            Input::Rejected(reason) => self.drop(reason, &mut effects),
            Input::Sampled(load) => {
                self.own_load = load;
                if self.is_master() {
                    let own = &mut self.hosts[self.config.me as usize];
                    own.load = load;
                    own.status = HostStatus::Ok;
                    own.last_report_ms = Some(now_ms);
                }
                self.refresh_status(&mut effects);
            }
            Input::Lock { duration_ms } => {
                if self.locked_until.is_some() {
                    effects.push(Effect::LockRefused(LockRefusal::AlreadyLocked));
                } else {
                    self.locked_until =
                        Some(duration_ms.map_or(u64::MAX, |ms| now_ms.saturating_add(ms).min(u64::MAX - 1)));
                    self.status_changed_by_hand(now_ms, &mut effects);
                }
            }
            Input::Unlock => {
                if self.locked_until.take().is_some() {
                    self.status_changed_by_hand(now_ms, &mut effects);
                } else {
                    effects.push(Effect::LockRefused(LockRefusal::NotLocked));
                }
            }
            Input::HostInfo { host, info } => {
                let master = self.is_master();
                if let Some(state) = self.hosts.get_mut(host as usize).filter(|_| master) {
                    match info {
                        Some(info) => {
                            state.info = Some(info);
                            state.fetch = Fetch::Idle;
                        }
                        None => state.fetch = Fetch::RetryAt(now_ms + HOST_INFO_RETRY_MS),
                    }
                }
            }
            Input::Datagram { from, message } => self.receive(now_ms, from, message, &mut effects),
        }
        self.send_due(now_ms, &mut effects);
        effects
    }

    /// Recomputes our own status word; an [`Effect::StatusChanged`] if it changed.
    fn refresh_status(&mut self, effects: &mut Vec<Effect>) {
        let mut word = LIM_OK;
        if self.locked_until.is_some() {
            word |= LIM_LOCKEDU;
        }
        let busy = self.config.thresholds.busy_bits(&self.own_load);
        if busy != 0 {
            word |= LIM_BUSY | busy;
        }
        if word != self.own_status0 {
            self.own_status0 = word;
            if self.is_master() {
                self.hosts[self.config.me as usize].status0 = word;
            }
            effects.push(Effect::StatusChanged { status0: word });
        }
    }

    /// A lock was taken or released: the new word, and a slave that is reporting tells the
    /// master at once rather than at its next report.
    fn status_changed_by_hand(&mut self, now_ms: u64, effects: &mut Vec<Effect>) {
        self.refresh_status(effects);
        if self.master_valid() {
            self.next_send_ms = Some(now_ms);
        }
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
        let Some(&source_idx) = self.by_addr.get(&from) else {
            return self.drop(DropReason::UnknownSource, effects);
        };
        let source_idx = source_idx as usize;
        match message {
            Message::LoadReport(report) => {
                if !self.is_master() {
                    return self.drop(DropReason::NotMaster, effects);
                }
                if report.host_idx as usize != source_idx || source_idx == self.config.me as usize {
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
                let status_changed = host.status0 != report.status0;
                host.status0 = report.status0;
                host.load = report.load;
                let became_available = host.status == HostStatus::Unavailable;
                let ask = match host.fetch {
                    Fetch::InFlight => false,
                    Fetch::Idle => became_available,
                    Fetch::RetryAt(at) => became_available || now_ms >= at,
                };
                if ask {
                    host.fetch = Fetch::InFlight;
                }
                if became_available {
                    host.status = HostStatus::Ok;
                    effects.push(Effect::HostAvailable(report.host_idx));
                    self.next_scan_ms = self.next_scan_ms.min(now_ms + self.host_timeout_ms() + 1);
                }
                if status_changed {
                    effects.push(Effect::HostStatus { host: report.host_idx, status0: report.status0 });
                }
                if ask {
                    effects.push(Effect::FetchHostInfo(report.host_idx));
                }
                self.n_accepted += 1;
            }
            Message::Beacon(beacon) => self.beacon(now_ms, source_idx as u32, beacon, effects),
        }
    }

    /// A beacon from the configured address of host `source`: followed, switched to,
    /// stepped down for, or dropped (see the crate documentation).
    fn beacon(&mut self, now_ms: u64, source: u32, beacon: Beacon, effects: &mut Vec<Effect>) {
        let Some(rank) = self.rank_of(source) else {
            return self.drop(DropReason::NotMaster, effects);
        };
        if source == self.config.me
            || beacon.host_idx != source
            || beacon.master != self.config.hosts[source as usize].name
        {
            return self.drop(DropReason::NotMaster, effects);
        }
        let better_than_me = self.rank.is_some_and(|mine| rank < mine);
        let follows = match self.master {
            // A master gives way only to a candidate before it.
            Some(m) if m == self.config.me => better_than_me,
            Some(m) => m == source || self.rank_of(m).is_none_or(|current| rank < current),
            None => true,
        };
        if !follows {
            return self.drop(DropReason::NotMaster, effects);
        }
        let same = self.master == Some(source);
        let last = if same { self.last_beacon_seqno } else { None };
        if let Some(reason) = sequence_verdict(last, beacon.seqno) {
            return self.drop(reason, effects);
        }
        if better_than_me {
            self.better_heard_ms = Some(now_ms);
        }
        if self.is_master() {
            self.step_down(source, effects);
        }
        self.last_beacon_seqno = Some(beacon.seqno);
        self.last_beacon_ms = now_ms;
        self.master_tcp_port = Some(beacon.tcp_port);
        self.n_accepted += 1;
        if !same {
            self.master = Some(source);
            self.next_send_ms = Some(now_ms);
            effects.push(Effect::MasterFound { master: beacon.master, tcp_port: beacon.tcp_port });
        }
    }

    /// The master gives the role to `to`: its host table is forgotten (a master it becomes
    /// again starts from reports, as a restarted one does).
    fn step_down(&mut self, to: u32, effects: &mut Vec<Effect>) {
        for host in &mut self.hosts {
            host.status = HostStatus::Unavailable;
            host.last_seqno = None;
            host.fetch = Fetch::Idle;
        }
        self.next_scan_ms = u64::MAX;
        effects.push(Effect::SteppedDown { to });
    }

    /// A candidate takes the master role: beacons at once, every other host unavailable
    /// until it reports, its own host's facts asked for.
    fn take_over(&mut self, effects: &mut Vec<Effect>) {
        let me = self.config.me;
        if self.master_valid() {
            effects.push(Effect::MasterLost);
        }
        self.master = Some(me);
        self.last_beacon_seqno = None;
        self.master_tcp_port = None;
        self.next_send_ms = None;
        self.next_scan_ms = u64::MAX;
        // Its own host is available from its next load sample on (as at a master's start).
        self.hosts[me as usize].fetch = Fetch::InFlight;
        effects.push(Effect::BecameMaster);
        effects.push(Effect::FetchHostInfo(me));
    }

    /// Master: hosts silent for 3 report intervals become unavailable. Slave: the master
    /// is lost after 3 beacon intervals without a beacon, and reporting stops.
    /// Both: a lock whose time is up is released.
    fn expire(&mut self, now_ms: u64, effects: &mut Vec<Effect>) {
        if self.locked_until.is_some_and(|until| until != u64::MAX && now_ms >= until) {
            self.locked_until = None;
            self.status_changed_by_hand(now_ms, effects);
        }
        if self.is_master() {
            if now_ms >= self.next_scan_ms {
                self.scan_hosts(now_ms, effects);
            }
            return;
        }
        if self.master_valid() && now_ms > self.last_beacon_ms + self.master_timeout_ms() {
            self.master = None;
            self.next_send_ms = None;
            effects.push(Effect::MasterLost);
        }
        if let Some(wait) = self.takeover_wait_ms() {
            let since = *self.better_heard_ms.get_or_insert(now_ms);
            // Rank 0 waits for nothing: it is master from its first step.
            if wait == 0 || now_ms > since + wait {
                self.take_over(effects);
            }
        }
    }

    /// Sends what is due at `now_ms`: the master's beacon, a slave's report.
    fn send_due(&mut self, now_ms: u64, effects: &mut Vec<Effect>) {
        if self.is_master() {
            if self.next_send_ms.is_none_or(|at| now_ms >= at) {
                self.next_send_ms = Some(now_ms + self.config.beacon_interval_ms);
                let seqno = self.take_seqno();
                let beacon = Beacon {
                    cluster: self.config.cluster.clone(),
                    master: self.master_name().to_owned(),
                    host_idx: self.config.me,
                    seqno,
                    tcp_port: self.config.tcp_port,
                };
                effects.push(Effect::SendToAll { sequence: seqno, message: Outgoing::Beacon(beacon) });
            }
            return;
        }
        if let Some(master) = self.master.filter(|_| self.master_valid())
            && self.next_send_ms.is_some_and(|at| now_ms >= at)
            && let Some(to) = self.config.hosts[master as usize].addr
        {
            self.next_send_ms = Some(now_ms + self.config.report_interval_ms);
            let seqno = self.take_seqno();
            let report = LoadReport {
                host_idx: self.config.me,
                seqno,
                status0: self.own_status0,
                load: self.own_load,
            };
            effects.push(Effect::Send { to, sequence: seqno, message: Outgoing::LoadReport(report) });
        }
    }
}

impl Lim {
    /// Master: marks every available host silent for more than 3 report intervals
    /// unavailable, and computes when the next one can time out.
    fn scan_hosts(&mut self, now_ms: u64, effects: &mut Vec<Effect>) {
        let timeout_ms = self.host_timeout_ms();
        let mut next = u64::MAX;
        let me = self.config.me as usize;
        for (idx, host) in self.hosts.iter_mut().enumerate() {
            if idx == me || host.status != HostStatus::Ok {
                continue;
            }
            let Some(last) = host.last_report_ms else { continue };
            if now_ms > last + timeout_ms {
                host.status = HostStatus::Unavailable;
                effects.push(Effect::HostUnavailable(idx as u32));
            } else {
                next = next.min(last + timeout_ms + 1);
            }
        }
        self.next_scan_ms = next;
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
