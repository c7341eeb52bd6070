//! The gate of a listening socket: which connections are let in, and what happens when
//! `accept()` fails. One component for every daemon's listener, so that each defence is
//! written once (docs/operations.md, "Connection limits").
//!
//! - **Caps.** At most [`GateConfig::per_source_max`] connections from one source (an IP
//!   address on TCP, a uid on a Unix socket) and [`GateConfig::total_max`] in all. Over a
//!   cap, the oldest connection that has not authenticated yet is evicted to make room (of
//!   that source when the source is at its cap, of any source when the gate is full; its
//!   [`Pass::evicted`] resolves), so that idle sockets never lock out clients and daemons
//!   that authenticate, not even those sharing the idler's address. Only when every
//!   connection in the way has authenticated is a newcomer refused.
//! - **Bytes before authentication** ([`Gate::with_pre_auth_budget`]): the frames that
//!   unauthenticated connections have announced, together, may not exceed a budget; a
//!   connection reserves its first frame's length ([`Pass::reserve`]) before reading it, the
//!   oldest unauthenticated connections holding a reservation are evicted to make room, and
//!   a frame larger than the whole budget is refused. Memory already grows only with the
//!   bytes received; the budget bounds what many connections can make a daemon hold at once.
//! - **A deadline to authenticate**: [`GateConfig::auth_deadline`] is the time a connection
//!   has to call [`Pass::authenticated`]; the daemon bounds its first read by it
//!   ([`Pass::auth_deadline`]).
//! - **A rate per source** ([`RateQuota`]): requests beyond a source's rate wait their turn.
//! - **Accept failures** (out of descriptors, most often) back off instead of spinning:
//!   [`AcceptBackoff`] doubles a pause from 10 ms to 1 s and says what to log once per burst
//!   of failures, not once per attempt.
//!
//! It owns no socket and spawns nothing: the daemon asks [`Gate::admit`] for each accepted
//! connection and keeps the [`Pass`] for as long as the connection lives (dropping it frees
//! the place).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

/// Where a connection comes from, for the per-source cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// A TCP peer's address.
    Ip(IpAddr),
    /// A Unix-socket peer's uid.
    Uid(u32),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Ip(ip) => write!(f, "{ip}"),
            Source::Uid(uid) => write!(f, "uid {uid}"),
        }
    }
}

/// The limits of one gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateConfig {
    /// Connections at once, in all.
    pub total_max: usize,
    /// Connections at once from one source.
    pub per_source_max: usize,
    /// Time a connection has to authenticate.
    pub auth_deadline: Duration,
}

impl GateConfig {
    /// 1,024 connections, 64 per source, 5 s to authenticate.
    pub const DEFAULT: GateConfig =
        GateConfig { total_max: 1024, per_source_max: 64, auth_deadline: Duration::from_secs(5) };
}

/// Why a connection was not let in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Its source holds [`GateConfig::per_source_max`] connections already.
    #[error("{from} holds {max} connections already (the most one source may)")]
    PerSource {
        /// The source.
        from: Source,
        /// Its cap.
        max: usize,
    },
    /// Every place is taken by an authenticated connection.
    #[error("{max} connections are open, all authenticated (the most this daemon serves)")]
    Full {
        /// The total cap.
        max: usize,
    },
    /// The bytes announced before authentication would exceed the budget, and no other
    /// unauthenticated connection holds any to give up.
    #[error(
        "a first frame of {bytes} bytes does not fit the {max} bytes all unauthenticated connections may hold"
    )]
    PreAuthBudget {
        /// What was asked for.
        bytes: usize,
        /// The budget.
        max: usize,
    },
}

/// An unauthenticated connection: its source, the sender that evicts it, and the bytes
/// it reserved of the pre-authentication budget.
#[derive(Debug)]
struct Waiting {
    source: Source,
    evict: watch::Sender<bool>,
    bytes: usize,
}

#[derive(Debug, Default)]
struct State {
    next_id: u64,
    total: usize,
    by_source: HashMap<Source, usize>,
    /// Unauthenticated connections, oldest first.
    waiting: BTreeMap<u64, Waiting>,
    /// Bytes the unauthenticated connections reserved, in all.
    pre_auth_bytes: usize,
    evictions: u64,
    refusals: u64,
}

/// One listener's admission state; cheap to clone (shared).
#[derive(Clone, Debug)]
pub struct Gate {
    config: GateConfig,
    /// [`Gate::with_pre_auth_budget`] (None: no budget).
    pre_auth_bytes_max: Option<usize>,
    state: Arc<Mutex<State>>,
}

/// A connection's place behind the gate; dropping it frees the place.
#[derive(Debug)]
pub struct Pass {
    gate: Gate,
    id: u64,
    source: Source,
    evicted: watch::Receiver<bool>,
}

/// What a gate has done so far, for status counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GateStats {
    /// Connections open now.
    pub open: usize,
    /// Of those, not yet authenticated.
    pub unauthenticated: usize,
    /// Bytes those reserved of the pre-authentication budget.
    pub pre_auth_bytes: usize,
    /// Unauthenticated connections evicted to make room.
    pub evictions: u64,
    /// Connections refused.
    pub refusals: u64,
}

impl Gate {
    /// A gate with these limits (each cap at least 1).
    pub fn new(config: GateConfig) -> Gate {
        let config = GateConfig {
            total_max: config.total_max.max(1),
            per_source_max: config.per_source_max.max(1),
            ..config
        };
        Gate { config, pre_auth_bytes_max: None, state: Arc::new(Mutex::new(State::default())) }
    }

    /// The same gate with a budget of `bytes` for the frames of unauthenticated
    /// connections together (see the module doc).
    pub fn with_pre_auth_budget(self, bytes: usize) -> Gate {
        Gate { pre_auth_bytes_max: Some(bytes), ..self }
    }

    /// Its limits.
    pub fn config(&self) -> GateConfig {
        self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lets a connection from `source` in, evicting the oldest unauthenticated connection
    /// if the gate is full, or says why not.
    pub fn admit(&self, source: Source) -> Result<Pass, Refusal> {
        let mut state = self.lock();
        // An evicted connection frees its place when it drops its pass; the newcomer is
        // counted at once, so the counts may exceed a cap for that moment.
        let from_source = state.by_source.get(&source).copied().unwrap_or(0);
        if from_source >= self.config.per_source_max {
            let oldest =
                state.waiting.iter().find(|(_, waiting)| waiting.source == source).map(|(id, _)| *id);
            let Some(oldest) = oldest else {
                state.refusals += 1;
                return Err(Refusal::PerSource { from: source, max: self.config.per_source_max });
            };
            state.evict(oldest);
        } else if state.total >= self.config.total_max {
            let Some(oldest) = state.waiting.keys().next().copied() else {
                state.refusals += 1;
                return Err(Refusal::Full { max: self.config.total_max });
            };
            state.evict(oldest);
        }
        state.next_id += 1;
        let id = state.next_id;
        state.total += 1;
        *state.by_source.entry(source).or_default() += 1;
        let (evict, evicted) = watch::channel(false);
        state.waiting.insert(id, Waiting { source, evict, bytes: 0 });
        Ok(Pass { gate: self.clone(), id, source, evicted })
    }

    /// What it has done so far.
    pub fn stats(&self) -> GateStats {
        let state = self.lock();
        GateStats {
            open: state.total,
            unauthenticated: state.waiting.len(),
            pre_auth_bytes: state.pre_auth_bytes,
            evictions: state.evictions,
            refusals: state.refusals,
        }
    }
}

impl State {
    fn evict(&mut self, id: u64) {
        if let Some(waiting) = self.stop_waiting(id) {
            let _closed = waiting.evict.send(true);
            self.evictions += 1;
        }
    }

    /// Takes connection `id` off the unauthenticated list, giving its reservation back.
    fn stop_waiting(&mut self, id: u64) -> Option<Waiting> {
        let waiting = self.waiting.remove(&id)?;
        self.pre_auth_bytes -= waiting.bytes;
        Some(waiting)
    }
}

impl Pass {
    /// The connection authenticated: it is never evicted to make room, and what it
    /// reserved of the pre-authentication budget is given back.
    pub fn authenticated(&self) {
        self.gate.lock().stop_waiting(self.id);
    }

    /// Before reading a frame of `bytes` from a connection that has not authenticated:
    /// reserves them of the gate's pre-authentication budget (replacing what it reserved
    /// before), evicting the oldest other unauthenticated connections that hold a
    /// reservation until they fit, or says why not. Always granted to an authenticated
    /// connection, and by a gate without a budget.
    pub fn reserve(&self, bytes: usize) -> Result<(), Refusal> {
        self.reserver().reserve(bytes)
    }

    /// A handle that reserves for this connection ([`Pass::reserve`]) while the pass is
    /// borrowed elsewhere (waiting for [`Pass::evicted`]).
    pub fn reserver(&self) -> Reserver {
        Reserver { gate: self.gate.clone(), id: self.id }
    }

    /// Whether it still waits to authenticate.
    pub fn is_authenticated(&self) -> bool {
        !self.gate.lock().waiting.contains_key(&self.id)
    }

    /// The time it has to authenticate.
    pub fn auth_deadline(&self) -> Duration {
        self.gate.config.auth_deadline
    }

    /// Its source.
    pub fn source(&self) -> Source {
        self.source
    }

    /// Resolves when the gate evicts this connection to make room for a newer one; the
    /// daemon then closes it. Never resolves for an authenticated connection.
    pub async fn evicted(&mut self) {
        if self.evicted.wait_for(|evicted| *evicted).await.is_err() {
            // The sender is gone: the connection authenticated, or the pass is being dropped.
            std::future::pending::<()>().await;
        }
    }
}

/// Reserves of a gate's pre-authentication budget for one connection; see
/// [`Pass::reserve`].
#[derive(Clone, Debug)]
pub struct Reserver {
    gate: Gate,
    id: u64,
}

impl Reserver {
    /// [`Pass::reserve`].
    pub fn reserve(&self, bytes: usize) -> Result<(), Refusal> {
        let Some(max) = self.gate.pre_auth_bytes_max else { return Ok(()) };
        let mut state = self.gate.lock();
        let Some(held) = state.waiting.get(&self.id).map(|waiting| waiting.bytes) else { return Ok(()) };
        if bytes > max {
            state.refusals += 1;
            return Err(Refusal::PreAuthBudget { bytes, max });
        }
        state.pre_auth_bytes -= held;
        while state.pre_auth_bytes + bytes > max {
            let oldest = state
                .waiting
                .iter()
                .find(|(id, waiting)| **id != self.id && waiting.bytes > 0)
                .map(|(id, _)| *id);
            match oldest {
                Some(oldest) => state.evict(oldest),
                // Not reached (every other reservation gone, `bytes <= max` fits), but
                // a refusal is the safe answer should the counts ever disagree.
                None => {
                    state.pre_auth_bytes += held;
                    state.refusals += 1;
                    return Err(Refusal::PreAuthBudget { bytes, max });
                }
            }
        }
        state.pre_auth_bytes += bytes;
        state.waiting.get_mut(&self.id).expect("checked above").bytes = bytes;
        Ok(())
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        state.stop_waiting(self.id);
        state.total -= 1;
        if let Some(count) = state.by_source.get_mut(&self.source) {
            *count -= 1;
            if *count == 0 {
                state.by_source.remove(&self.source);
            }
        }
    }
}

/// A rate per source (a token bucket each): [`RateQuota::delay`] says how long a request
/// must wait for its turn, so that a source asking faster than its rate slows only itself
/// (sbatchd's credential socket: credentials issued per uid).
#[derive(Debug)]
pub struct RateQuota {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<Source, (f64, std::time::Instant)>>,
}

/// Sources a quota remembers at most; idle full buckets are forgotten beyond it.
const QUOTA_SOURCES_MAX: usize = 4096;

impl RateQuota {
    /// `per_second` sustained, up to `burst` at once (each at least 1).
    pub fn new(per_second: u32, burst: u32) -> RateQuota {
        RateQuota {
            per_second: f64::from(per_second.max(1)),
            burst: f64::from(burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one request's turn for `source` at `now`: how long it must wait first (zero
    /// within the burst). The turn is reserved, so requests waiting together queue up.
    pub fn delay(&self, source: Source, now: std::time::Instant) -> Duration {
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() >= QUOTA_SOURCES_MAX && !buckets.contains_key(&source) {
            let (per_second, burst) = (self.per_second, self.burst);
            buckets.retain(|_, (tokens, at)| {
                *tokens + now.saturating_duration_since(*at).as_secs_f64() * per_second < burst
            });
        }
        let (tokens, at) = buckets.entry(source).or_insert((self.burst, now));
        let refill = now.saturating_duration_since(*at).as_secs_f64() * self.per_second;
        *tokens = (*tokens + refill).min(self.burst) - 1.0;
        *at = now;
        if *tokens >= 0.0 { Duration::ZERO } else { Duration::from_secs_f64(-*tokens / self.per_second) }
    }
}

/// The pause after each failed `accept()`: 10 ms doubling to 1 s, back to nothing at the
/// first success. It says what to log once per burst of failures.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    failures: u64,
    pause: Duration,
}

/// The first pause after a failed accept.
const ACCEPT_PAUSE_FIRST: Duration = Duration::from_millis(10);
/// The longest pause between accepts while they fail.
const ACCEPT_PAUSE_MAX: Duration = Duration::from_secs(1);

impl AcceptBackoff {
    /// An accept failed with `error`: how long to pause, and a line to log if this failure
    /// starts a burst (later ones of the burst log nothing).
    pub fn failed(&mut self, error: &std::io::Error) -> (Duration, Option<String>) {
        self.failures += 1;
        self.pause =
            if self.pause.is_zero() { ACCEPT_PAUSE_FIRST } else { (self.pause * 2).min(ACCEPT_PAUSE_MAX) };
        let line = (self.failures == 1).then(|| {
            format!("accept failed: {error}; pausing between attempts (up to {ACCEPT_PAUSE_MAX:?}) until it works again")
        });
        (self.pause, line)
    }

    /// An accept worked: a line to log if it ends a burst of failures.
    pub fn succeeded(&mut self) -> Option<String> {
        let failures = std::mem::take(&mut self.failures);
        self.pause = Duration::ZERO;
        (failures > 0).then(|| format!("accept works again after {failures} failed attempts"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(total_max: usize, per_source_max: usize) -> Gate {
        Gate::new(GateConfig { total_max, per_source_max, auth_deadline: Duration::from_secs(1) })
    }

    fn ip(last: u8) -> Source {
        Source::Ip(IpAddr::from([127, 0, 0, last]))
    }

    #[tokio::test]
    async fn a_source_at_its_cap_makes_room_with_its_own_oldest_idle_connection() {
        let gate = gate(10, 2);
        let a = gate.admit(ip(1)).expect("first");
        a.authenticated();
        let mut idle = gate.admit(ip(1)).expect("second");
        let _other = gate.admit(ip(2)).expect("another source");
        let newcomer = gate.admit(ip(1)).expect("the source's idle connection makes room");
        tokio::time::timeout(Duration::from_secs(1), idle.evicted()).await.expect("evicted");
        drop(idle);
        newcomer.authenticated();
        assert_eq!(
            gate.admit(ip(1)).expect_err("at its cap, all authenticated"),
            Refusal::PerSource { from: ip(1), max: 2 }
        );
        let _still = gate.admit(ip(2)).expect("other sources still come in");
        drop(a);
        let _again = gate.admit(ip(1)).expect("a place of its own freed");
        assert_eq!((gate.stats().evictions, gate.stats().refusals), (1, 1));
    }

    // Goal: the frames unauthenticated connections announce share one budget: a
    // reservation that does not fit evicts the oldest other connection holding one (not
    // an idle one, not an authenticated one), authenticating gives the bytes back, a
    // frame larger than the budget is refused, and a gate without budget grants all.
    #[tokio::test]
    async fn unauthenticated_frames_share_a_byte_budget() {
        let gate = Gate::new(GateConfig::DEFAULT).with_pre_auth_budget(100);
        let _idle = gate.admit(ip(1)).expect("idle");
        let mut first = gate.admit(ip(2)).expect("first");
        let second = gate.admit(ip(3)).expect("second");
        first.reserve(60).expect("fits");
        second.reserve(40).expect("fits exactly");
        assert_eq!(gate.stats().pre_auth_bytes, 100);
        let third = gate.admit(ip(4)).expect("third");
        third.reserve(30).expect("the oldest reservation makes room");
        tokio::time::timeout(Duration::from_secs(1), first.evicted()).await.expect("first evicted");
        assert_eq!(gate.stats().pre_auth_bytes, 70);
        second.authenticated();
        assert_eq!(gate.stats().pre_auth_bytes, 30, "authenticating gives the bytes back");
        second.reserve(1_000).expect("an authenticated connection reserves nothing");
        assert!(matches!(third.reserve(101), Err(Refusal::PreAuthBudget { bytes: 101, max: 100 })));
        third.reserve(10).expect("a new reservation replaces the old one");
        assert_eq!(gate.stats().pre_auth_bytes, 10);
        drop(third);
        assert_eq!(gate.stats().pre_auth_bytes, 0);
        let unbounded = Gate::new(GateConfig::DEFAULT).admit(ip(5)).expect("admitted");
        unbounded.reserve(usize::MAX).expect("no budget, no limit");
    }

    #[tokio::test]
    async fn a_full_gate_evicts_the_oldest_unauthenticated_connection() {
        let gate = gate(3, 3);
        let mut oldest = gate.admit(ip(1)).expect("1");
        let daemon = gate.admit(ip(2)).expect("2");
        daemon.authenticated();
        let _idle = gate.admit(ip(1)).expect("3");
        let _newcomer = gate.admit(ip(3)).expect("the oldest unauthenticated makes room");
        tokio::time::timeout(Duration::from_secs(1), oldest.evicted()).await.expect("evicted");
        assert_eq!(gate.stats().evictions, 1);
        drop(oldest);
        assert_eq!(gate.stats().open, 3);
    }

    #[tokio::test]
    async fn authenticated_connections_are_never_evicted() {
        let gate = gate(2, 2);
        let mut a = gate.admit(ip(1)).expect("a");
        a.authenticated();
        let b = gate.admit(ip(2)).expect("b");
        b.authenticated();
        assert_eq!(gate.admit(ip(3)).expect_err("full, all authenticated"), Refusal::Full { max: 2 });
        assert!(tokio::time::timeout(Duration::from_millis(50), a.evicted()).await.is_err());
        assert!(a.is_authenticated());
    }

    #[test]
    fn a_quota_delays_only_the_source_beyond_its_rate() {
        let quota = RateQuota::new(10, 5);
        let now = std::time::Instant::now();
        for _ in 0..5 {
            assert_eq!(quota.delay(ip(1), now), Duration::ZERO, "within the burst");
        }
        assert_eq!(quota.delay(ip(1), now), Duration::from_millis(100), "one beyond: a tenth of a second");
        assert_eq!(quota.delay(ip(1), now), Duration::from_millis(200), "turns queue up");
        assert_eq!(quota.delay(ip(2), now), Duration::ZERO, "another source is not slowed");
        let later = now + Duration::from_secs(1);
        assert_eq!(quota.delay(ip(1), later), Duration::ZERO, "the bucket refills");
    }

    #[test]
    fn accept_failures_back_off_and_log_once_per_burst() {
        let mut backoff = AcceptBackoff::default();
        let error = std::io::Error::from_raw_os_error(libc::EMFILE);
        let (first, line) = backoff.failed(&error);
        assert_eq!(first, Duration::from_millis(10));
        assert!(line.expect("the burst's first failure is logged").contains("accept failed"));
        let pauses: Vec<Duration> = (0..10)
            .map(|_| backoff.failed(&error))
            .map(|(pause, line)| {
                assert!(line.is_none(), "a burst logs once");
                pause
            })
            .collect();
        assert_eq!(pauses[0], Duration::from_millis(20));
        assert_eq!(*pauses.last().expect("ten"), Duration::from_secs(1));
        assert!(backoff.succeeded().expect("the end of a burst is logged").contains("11 failed"));
        assert_eq!(backoff.succeeded(), None);
        assert_eq!(backoff.failed(&error).0, Duration::from_millis(10), "a new burst starts small");
    }
}
