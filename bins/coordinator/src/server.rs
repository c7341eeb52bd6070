//! The daemon: configuration, the WAL and its replay, the listener, one task
//! per connection, and the one closed event loop that steps the logic and
//! carries out its effects in the order `lava-coord-logic`'s crate doc makes
//! the contract ("The shell contract, in order").
//!
//! # Start-up order
//! 1. Load `lsf.conf` and `lsf.cluster` (`--envdir`, else `LSF_ENVDIR`) and the
//!    cluster key, refusing a missing or group/other-accessible key file.
//! 2. Open the WAL in `$LSB_SHAREDIR/<cluster>/coord` (a torn tail is cut off
//!    and logged) and rebuild the state: snapshot, then every later record.
//! 3. Step `Tick` with the current time: every lease that ran out while the
//!    coordinator was down is expired (and logged) before anything is served.
//! 4. Bind the listener (SO_REUSEADDR), then write `--port-file` and
//!    `--ready-file`: whoever reads them can connect and be served.
//! 5. Run the loop until SIGTERM/SIGINT (clean stop: everything durable, the
//!    WAL closed) or a WAL failure (stop at once, answering nothing more).
//!
//! # Connections
//! Each connection starts with HELLO: its credential (from the client's local
//! sbatchd) is verified with the cluster key — MAC, time window, single use —
//! and names the caller (uid, user) for every later request on it; anything
//! else first, or a credential that fails, is answered `ERR_AUTH` and the
//! connection closed. Frames are not sealed after that (see the crate doc,
//! Authentication). A connection task then reads frames as they come — a
//! client may pipeline — checks them (version, XDR, ll) and hands each, or
//! its refusal, to the loop in arrival order; a writer task sends the answers
//! back in that order, several per write when several are released together.
//! At most [`IN_FLIGHT_PER_CONNECTION_MAX`] requests of one connection wait
//! for their answers; beyond that its task stops reading.
//!
//! # The loop
//! Events: requests from the connection tasks, the 100 ms tick, a journal
//! helper thread that finished (appends durable, snapshot written), a stop
//! signal. On a wakeup the loop steps every request already queued (up to
//! 1024) one after the other. Each step's appends go to the journal's buffer
//! at once; its answer waits in the outbox behind the position of the last
//! append before it, and is released when `durable_through` reaches that
//! position. So does every other answer: a query's (it reads the live state,
//! which may hold changes not yet durable), STATS, and a refusal made by a
//! connection task; the outbox releases in the order the calls were taken. A group
//! commit is started after each batch of steps unless one is running, and again
//! as soon as one ends (after stepping the requests that queued meanwhile), so
//! one fsync covers every step appended while the previous one ran. Before it
//! starts one, the loop waits for the connections whose answers just went out
//! and that came back within a gather window last time ([`Pace`]), at most that
//! window (lava-shell's group commit, "Gathering before a commit"): with a few
//! workers one request outstanding each, one fsync then covers every worker's
//! request instead of one or two. A group of at most [`INLINE_EVENTS_MAX`]
//! events is made durable on the loop's thread. While many answers wait for a slow disk,
//! the loop takes no new requests ([`HELD_ANSWERS_MAX`]).
//!
//! A failed append (the step returns the error) or fsync (the journal's next
//! event is the error) ends the loop at once: nothing more is stepped and no
//! held answer is released (only a clean stop makes everything durable and
//! releases them). The crash points `coordinator.wal_appended` (after each
//! append), `coordinator.wal_durable` (a group commit ended, its answers not
//! yet released) and `coordinator.answer_written` (answers written to a
//! connection) sit at these boundaries; the simulation in `lava-coord-logic`
//! crashes its model of this loop at the same places.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use clap::Parser;
use lava_conf::{BaseConfig, LogMask};
use lava_coord_ll::{Caller, Limits, Request, UserName};
use lava_coord_logic::{ClientId, Coord, CoordConfig, Effect, Input, TICK_INTERVAL_MS};
use lava_coord_wire::{self as wire, COORD_VERSION, Reply};
use lava_net::gate::{AcceptBackoff, Gate, GateConfig, Pass, Source};
use lava_net::{
    AuthConfig, Authenticator, ClusterKey, ConnError, Credential, KeyRing, Timeouts, system_now_ms,
};
use lava_shell::readiness::Readiness;
use lava_shell::signals::{ShellSignal, Signals};
use lava_shell::startup;
use lava_xdr::frame::{Frame, FrameHeader, FrameLimits, decode_frame, encode_frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::MissedTickBehavior;

use crate::codec::{FRAME_LIMITS, MESSAGE_LIMITS};
use crate::counters::Counters;
use crate::journal::{self, Journal, JournalEvent};
use crate::replicated::{Outcome, Replication};
use crate::{Args, ShellError};

/// Capacity of the channel from the connection tasks to the loop.
pub const REQUESTS_QUEUED_MAX: usize = 4096;
/// Answers waiting for durability above which the loop takes no new request.
pub const HELD_ANSWERS_MAX: usize = 65_536;
/// A connection idle this long between requests is closed.
pub const CLIENT_IDLE_TIMEOUT_MS: u64 = 300_000;
/// Time given to the runtime's helper threads to end once the loop returned.
const RUNTIME_SHUTDOWN_MS: u64 = 5_000;

/// What the coordinator takes from the configuration files.
#[derive(Clone, Debug)]
pub struct ShellConfig {
    /// The address and port to listen on.
    pub listen: SocketAddr,
    /// The cluster key file.
    pub key_file: PathBuf,
    /// The WAL's folder: `$LSB_SHAREDIR/<cluster>/coord`.
    pub wal_dir: PathBuf,
    /// `LSF_LOG_MASK`.
    pub log_mask: LogMask,
    /// lsf.cluster's ClusterAdmins (user names).
    pub admins: Vec<String>,
    /// Where the metrics are served (`LAVA_METRICS_ADDR`, `LAVA_COORD_METRICS_PORT`; `None`: not).
    pub metrics: Option<SocketAddr>,
    /// With two master candidates or more: the replicated WAL among them (docs/failover.md).
    pub replication: Option<Replication>,
}

impl ShellConfig {
    /// Maps a loaded configuration; `port` overrides `LAVA_COORD_PORT`. With two master
    /// candidates or more, the coordinator runs as candidate `host` (else the candidate
    /// named as this machine) and listens on that candidate's address.
    pub fn from_base(
        conf: &BaseConfig,
        port: Option<u16>,
        host: Option<&str>,
    ) -> Result<ShellConfig, ShellError> {
        let wal_dir = conf.work_dir().join("coord");
        let candidates = conf.master_candidates();
        let (addr, replication) = if candidates.len() >= 2 {
            let (at, candidate) = this_candidate(&candidates, host)?;
            let addr = candidate.addr.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
            let mut addrs = Vec::with_capacity(candidates.len());
            for candidate in &candidates {
                let port = conf.lsf.coord_repl_port;
                let found = match candidate.addr {
                    Some(ip) => Some(SocketAddr::new(ip, port)),
                    None => std::net::ToSocketAddrs::to_socket_addrs(&(candidate.name.as_str(), port))
                        .ok()
                        .and_then(|mut found| found.next()),
                };
                let found = found.ok_or_else(|| {
                    ShellError::Config(format!(
                        "master candidate {}: no LAVA_ADDR in {} and the name does not resolve",
                        candidate.name,
                        conf.cluster.path.display()
                    ))
                })?;
                addrs.push((candidate.name.clone(), found));
            }
            let dir = wal_dir.join(&candidate.name);
            (addr, Some(Replication { id: at as u64 + 1, candidates: addrs, dir }))
        } else {
            let addr =
                conf.master_host().and_then(|host| host.addr).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
            (addr, None)
        };
        Ok(ShellConfig {
            listen: SocketAddr::new(addr, port.unwrap_or(conf.lsf.coord_port)),
            key_file: conf.lsf.cluster_key_file.clone(),
            wal_dir,
            log_mask: conf.lsf.log_mask,
            admins: conf.cluster.admins.clone(),
            metrics: conf.lsf.metrics_listen(conf.lsf.metrics_ports.coord),
            replication,
        })
    }
}

/// The candidate this coordinator runs as: `host` if given, else the one named as this
/// machine (its full or short name); with its rank from 0.
fn this_candidate<'a>(
    candidates: &[&'a lava_conf::ClusterHost],
    host: Option<&str>,
) -> Result<(usize, &'a lava_conf::ClusterHost), ShellError> {
    lava_conf::own_candidate(candidates, host).map(|at| (at, candidates[at])).map_err(ShellError::Config)
}

/// The whole program: parse the command line, [`run`], report an error.
pub fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            eprintln!("coordinator: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Starts the coordinator as `args` say and serves until stopped; see the module doc.
pub fn run(args: Args) -> Result<(), ShellError> {
    let envdir = args.envdir.clone().unwrap_or_else(lava_conf::envdir_from_env);
    let conf = BaseConfig::load(&envdir)?;
    let config = ShellConfig::from_base(&conf, args.port, args.host.as_deref())?;
    let key = ClusterKey::load(&config.key_file)?;
    init_logging(config.log_mask);
    tracing::info!(envdir = %envdir.display(), key_id = %key.id(), "coordinator starting");
    // Credentials are taken only if made for this cluster's coordinator.
    let audience = lava_net::Audience::new(lava_net::Audience::COORDINATOR, &conf.cluster_name);
    let auth =
        Arc::new(Authenticator::new(KeyRing::new(&key), AuthConfig::default()).with_audience(audience));
    let coord_config = CoordConfig {
        lease_duration_ms: args.lease_ms,
        payload_bytes_max: args.payload_bytes_max,
        admins: config.admins.clone(),
        submission_window_ms: args.submission_window_secs * 1000,
        submissions_per_owner_max: args.submissions_per_user_max,
        submissions_max: args.submissions_max,
        ..CoordConfig::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| ShellError::Runtime(format!("cannot start the async runtime: {error}")))?;
    if let Some(setting) = &config.replication {
        let result = runtime.block_on(serve_candidate(&args, &config, setting, auth, coord_config));
        runtime.shutdown_timeout(Duration::from_millis(RUNTIME_SHUTDOWN_MS));
        return result;
    }
    let log = journal::open(&config.wal_dir)?;
    let coord = journal::recover(&log, coord_config)?;
    let journal = Journal::new(log, args.snapshot_events);
    let result = runtime.block_on(serve(&args, &config, auth, journal, coord));
    runtime.shutdown_timeout(Duration::from_millis(RUNTIME_SHUTDOWN_MS));
    result
}

/// A master candidate: follow, lead while elected, and start again from the replica log
/// each time a leadership ends (crate::replicated), until stopped.
async fn serve_candidate(
    args: &Args,
    config: &ShellConfig,
    setting: &Replication,
    auth: Arc<Authenticator>,
    coord_config: CoordConfig,
) -> Result<(), ShellError> {
    for path in [&args.port_file, &args.ready_file].into_iter().flatten() {
        startup::remove_stale(path)?;
    }
    let mut signals = Signals::register()
        .map_err(|error| ShellError::Runtime(format!("cannot handle signals: {error}")))?;
    let mut readiness = Readiness::from_env();
    loop {
        let outcome = crate::replicated::serve(
            args,
            config,
            setting,
            Arc::clone(&auth),
            coord_config.clone(),
            &mut signals,
            &mut readiness,
        )
        .await?;
        match outcome {
            Outcome::Stopped => break,
            Outcome::Restart => {
                for path in [&args.port_file, &args.ready_file].into_iter().flatten() {
                    startup::remove_stale(path)?;
                }
            }
        }
    }
    tracing::info!("coordinator stopped");
    Ok(())
}

fn init_logging(mask: LogMask) {
    lava_sd::journald::init(mask.level_name());
}

/// One request as the loop receives it: checked by its connection task (or
/// refused there, still answered in order), with where its answer goes.
#[derive(Debug)]
pub(crate) struct Call {
    /// The connection, for the loop's pacing ([`Pace`]).
    pub(crate) conn: u64,
    pub(crate) to: Outbound,
    pub(crate) sequence: u32,
    pub(crate) what: CallKind,
}

#[derive(Debug)]
pub(crate) enum CallKind {
    /// A valid request from an authenticated caller: step it.
    Request { caller: Caller, request: Request },
    /// Refused by the connection task; answered in order behind the requests before it.
    Refused { reply: Reply, close: bool },
    /// STATS_QUERY: answered by the loop from the counters, in order like the others.
    Stats,
}

/// An answer on its way to a connection's writer: sequence, reply, close after it.
type Answer = (u32, Reply, bool);
/// The writer side of one connection.
pub(crate) type Outbound = mpsc::UnboundedSender<Answer>;

/// What the connection tasks share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) auth: Arc<Authenticator>,
    pub(crate) limits: Limits,
    /// The logic's configuration (for the administrator check of HELLO's answer).
    pub(crate) coord_config: CoordConfig,
    pub(crate) calls: mpsc::Sender<Call>,
    pub(crate) counters: Arc<Counters>,
    /// The next connection's number.
    pub(crate) next_conn: std::sync::atomic::AtomicU64,
}

async fn serve(
    args: &Args,
    config: &ShellConfig,
    auth: Arc<Authenticator>,
    mut journal: Journal,
    mut coord: Coord,
) -> Result<(), ShellError> {
    for path in [&args.port_file, &args.ready_file].into_iter().flatten() {
        startup::remove_stale(path)?;
    }
    // Contract step 1's end: expire by the current time before serving.
    let counters = Arc::new(Counters::default());
    let mut loop_state = Loop {
        outbox: VecDeque::new(),
        effects: Vec::new(),
        next_client: 1,
        counters: Arc::clone(&counters),
        pace: Pace::default(),
    };
    loop_state.step(&mut coord, &mut journal, Input::Tick, None)?;
    loop_state.settle(&coord, &mut journal)?;
    let (listener, bound) = startup::listen(config.listen)?;
    let mut signals = Signals::register()
        .map_err(|error| ShellError::Runtime(format!("cannot handle signals: {error}")))?;
    let (calls, mut inbox) = mpsc::channel(REQUESTS_QUEUED_MAX);
    let limits = Limits { payload_bytes_max: args.payload_bytes_max };
    let shared = Arc::new(Shared {
        auth,
        limits,
        coord_config: coord.config().clone(),
        calls,
        counters,
        next_conn: std::sync::atomic::AtomicU64::new(1),
    });
    let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
    let mut scrapes = lava_shell::metrics::start_for_loop(config.metrics)?;
    drop(shared);
    if let Some(path) = &args.port_file {
        startup::write_atomically(path, &format!("{}\n", bound.port()))?;
    }
    if let Some(path) = &args.ready_file {
        startup::write_atomically(path, "ready\n")?;
    }
    tracing::info!(%bound, tasks = coord.n_tasks(), "coordinator ready");
    // systemd (Type=notify): READY now, WATCHDOG from the tick, STOPPING on SIGTERM/SIGINT.
    let mut readiness = Readiness::from_env();
    readiness.ready(&format!("serving on {bound}"));
    let mut tick = tokio::time::interval(Duration::from_millis(TICK_INTERVAL_MS));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The last group commit found the disk full and none has succeeded since.
    let mut stalled = false;
    let result = loop {
        let taking = loop_state.outbox.len() < HELD_ANSWERS_MAX;
        let outcome = tokio::select! {
            signal = signals.next() => match signal {
                ShellSignal::Stop(name) => {
                    tracing::info!("{name}: stopping");
                    readiness.stopping(&format!("{name}: stopping"));
                    break Ok(());
                }
                ShellSignal::Reload => {
                    tracing::info!("SIGHUP: nothing to reload (the coordinator reads its configuration at start)");
                    Ok(())
                }
            },
            done = journal.next() => match done {
                Ok(JournalEvent::Durable(position)) => {
                    tracing::trace!(position, "durable");
                    if std::mem::take(&mut stalled) {
                        tracing::warn!(position, "the WAL is written again: held answers go out");
                    }
                    loop_state.release(&journal);
                    // Requests that arrived during that fsync join the next one
                    // (bigger groups, fewer fsyncs per request, no added wait).
                    let mut outcome = Ok(());
                    let mut n_taken = 0;
                    while outcome.is_ok() && taking && n_taken < CALLS_PER_WAKEUP_MAX {
                        let Ok(call) = inbox.try_recv() else { break };
                        outcome = loop_state.take(&mut coord, &mut journal, call, inbox.len());
                        n_taken += 1;
                    }
                    match outcome {
                        Ok(()) => loop_state.settle(&coord, &mut journal),
                        Err(error) => Err(error),
                    }
                }
                Ok(JournalEvent::SnapshotWritten { position, prune }) => {
                    tracing::info!(position, segments_removed = prune.removed_segments.len(), "snapshot written");
                    Ok(())
                }
                Ok(JournalEvent::SnapshotFailed(error)) => {
                    tracing::warn!("snapshot not written: {error}");
                    Ok(())
                }
                // The WAL's disk is full: answers wait (nothing is acknowledged before it
                // is durable) and the journal tries again every second.
                Ok(JournalEvent::NoSpace(error)) => {
                    // Once per stall, not once per retry.
                    if !std::mem::replace(&mut stalled, true) {
                        tracing::error!("{error}; answers wait until the WAL can be written (retried every second)");
                    }
                    Ok(())
                }
                Err(error) => Err(error),
            },
            call = inbox.recv(), if taking => match call {
                // Step this call and every call already queued behind it (up to
                // a bound), then start one fsync for all of them.
                Some(call) => {
                    let mut outcome = loop_state.take(&mut coord, &mut journal, call, inbox.len());
                    let mut n_taken = 1;
                    while outcome.is_ok() && n_taken < CALLS_PER_WAKEUP_MAX {
                        let Ok(call) = inbox.try_recv() else { break };
                        outcome = loop_state.take(&mut coord, &mut journal, call, inbox.len());
                        n_taken += 1;
                    }
                    match outcome {
                        Ok(()) => loop_state.settle(&coord, &mut journal),
                        Err(error) => Err(error),
                    }
                }
                None => Ok(()),
            },
            Some(scrape) = lava_shell::metrics::next_scrape(&mut scrapes) => {
                let stats = loop_state.stats(&coord, &journal, inbox.len());
                scrape.answer(crate::metrics::metrics(&stats, &journal.sync_stats()));
                Ok(())
            }
            _ = tick.tick() => {
                readiness.pet();
                loop_state.pace.forget_idle(std::time::Instant::now());
                match loop_state.step(&mut coord, &mut journal, Input::Tick, None) {
                    Ok(()) => loop_state.settle(&coord, &mut journal),
                    Err(error) => Err(error),
                }
            }
        };
        if let Err(error) = outcome {
            tracing::error!("{error}; stopping without answering anything more");
            break Err(error);
        }
    };
    accept.abort();
    result?;
    journal.sync_all().await?;
    loop_state.release(&journal);
    journal.close().await?;
    tracing::info!("coordinator stopped");
    Ok(())
}

/// Most calls stepped per wakeup of the loop before it looks at anything else.
pub(crate) const CALLS_PER_WAKEUP_MAX: usize = 1024;
/// Most events a group commit makes durable on the loop's own thread (more go to a
/// helper thread, so that the loop keeps stepping meanwhile).
const INLINE_EVENTS_MAX: u64 = 16;
/// A connection not heard from for this long is forgotten by the pacing.
const PACE_FORGET: Duration = Duration::from_secs(10);

/// One answer held until the WAL is durable through `barrier`.
struct Held {
    conn: u64,
    barrier: u64,
    to: Outbound,
    sequence: u32,
    reply: Reply,
    close: bool,
}

/// The loop's own state: the answers held for durability.
struct Loop {
    outbox: VecDeque<Held>,
    effects: Vec<Effect>,
    next_client: u64,
    counters: Arc<Counters>,
    pace: Pace,
}

/// Which connections the loop expects a request from soon, so that a group commit can
/// wait for them (lava-shell's group commit, "Gathering before a commit"): a connection
/// whose answers all went out less than two gather windows ago, and which last time sent
/// its next request within one window of its answers.
#[derive(Debug, Default)]
struct Pace {
    conns: std::collections::HashMap<u64, ConnPace>,
    /// Connections that may be expected (checked again by [`Pace::expected`]).
    returning: Vec<u64>,
}

#[derive(Debug, Default)]
struct ConnPace {
    /// Its requests taken whose answers have not gone out.
    held: u32,
    /// When its last answer went out, if none is held since.
    released_at: Option<Instant>,
    /// From its last answers to its next request, the last time.
    think: Duration,
    /// In [`Pace::returning`].
    returning: bool,
}

impl Pace {
    /// A request of `conn` was taken.
    fn arrived(&mut self, conn: u64, now: Instant) {
        let pace = self.conns.entry(conn).or_default();
        if let Some(at) = pace.released_at.take() {
            pace.think = now.saturating_duration_since(at);
        }
        pace.held += 1;
    }

    /// An answer to `conn` went out.
    fn answered(&mut self, conn: u64, now: Instant, window: Duration) {
        let Some(pace) = self.conns.get_mut(&conn) else { return };
        pace.held = pace.held.saturating_sub(1);
        if pace.held == 0 {
            pace.released_at = Some(now);
            if pace.think <= window && !pace.returning {
                pace.returning = true;
                self.returning.push(conn);
            }
        }
    }

    /// How many connections are expected to send a request soon.
    fn expected(&mut self, now: Instant, window: Duration) -> usize {
        let conns = &mut self.conns;
        self.returning.retain(|conn| {
            let Some(pace) = conns.get_mut(conn) else { return false };
            let waiting = pace.held == 0
                && pace.released_at.is_some_and(|at| now.saturating_duration_since(at) < window * 2);
            pace.returning = waiting;
            waiting
        });
        self.returning.len()
    }

    /// Forgets the connections not heard from for [`PACE_FORGET`] (closed ones among them).
    fn forget_idle(&mut self, now: Instant) {
        self.conns.retain(|_, pace| {
            pace.held > 0
                || pace.released_at.is_some_and(|at| now.saturating_duration_since(at) < PACE_FORGET)
        });
    }
}

impl Loop {
    /// Steps a request, or queues a connection task's refusal behind what came before it.
    /// `queued`: the calls still waiting in the channel (for the status).
    fn take(
        &mut self,
        coord: &mut Coord,
        journal: &mut Journal,
        call: Call,
        queued: usize,
    ) -> Result<(), ShellError> {
        let Call { conn, to, sequence, what } = call;
        self.pace.arrived(conn, Instant::now());
        match what {
            CallKind::Request { caller, request } => {
                let client = self.next_client;
                self.next_client += 1;
                let input = Input::Request { client: ClientId(client), caller, request };
                self.step(coord, journal, input, Some((client, conn, to, sequence)))
            }
            CallKind::Refused { reply, close } => {
                let barrier = journal.appended_through();
                self.hold(Held { conn, barrier, to, sequence, reply, close });
                Ok(())
            }
            CallKind::Stats => {
                let reply = Reply::Stats(wire::StatsReply { counters: self.stats(coord, journal, queued) });
                let barrier = journal.appended_through();
                self.hold(Held { conn, barrier, to, sequence, reply, close: false });
                Ok(())
            }
        }
    }

    /// Queues an answer behind the ones before it, counting a refusal.
    fn hold(&mut self, held: Held) {
        if let Reply::Error(error) = &held.reply {
            self.counters.refusal(error.code);
        }
        self.outbox.push_back(held);
    }

    /// STATS_REPLY's counters: the shell's, then the state now (the logic's read-only
    /// figures, the WAL's, the queues'); docs/coordinator.md lists them.
    fn stats(&self, coord: &Coord, journal: &Journal, queued: usize) -> Vec<wire::Counter> {
        let mut all = self.counters.snapshot();
        all.extend(state_gauges(coord));
        let log = journal.log_stats();
        let sync = journal.sync_stats();
        let (segment_bytes, segments, disk_bytes) = journal.disk_usage();
        let held = self.outbox.len() as u64;
        let gauges = [
            ("wal.appends", log.n_appends),
            ("wal.fsyncs", log.n_fsyncs),
            ("wal.group_commits", sync.count),
            ("wal.group_commit_us_mean", sync.total_us.checked_div(sync.count).unwrap_or(0)),
            ("wal.group_commit_us_max", sync.max_us),
            ("wal.events_per_group_commit", sync.events.checked_div(sync.count).unwrap_or(0)),
            ("wal.appended_through", journal.appended_through()),
            ("wal.durable_through", journal.durable_through()),
            ("wal.segment_bytes", segment_bytes),
            ("wal.segments", segments),
            ("wal.disk_bytes", disk_bytes),
            ("queue.requests_queued", queued as u64),
            ("queue.answers_held", held),
            ("queue.in_flight", queued as u64 + held),
        ];
        all.extend(gauges.into_iter().map(|(name, value)| (name.to_owned(), value)));
        all.into_iter().map(|(name, value)| wire::Counter { name, value }).collect()
    }

    /// Steps the logic and carries out its effects (contract steps 2 to 4):
    /// appends go to the journal's buffer, the answer waits in the outbox.
    fn step(
        &mut self,
        coord: &mut Coord,
        journal: &mut Journal,
        input: Input,
        mut answer: Option<(u64, u64, Outbound, u32)>,
    ) -> Result<(), ShellError> {
        let mut effects = std::mem::take(&mut self.effects);
        coord.step(system_now_ms(), input, &mut effects);
        let mut result = Ok(());
        for effect in effects.drain(..) {
            match effect {
                Effect::Append(event) => {
                    self.counters.event(event.name());
                    if let lava_coord_logic::Event::LeaseExpired { task, lease, expires_at_ms } = &event {
                        tracing::debug!(%task, %lease, expires_at_ms, "lease expired");
                    }
                    if let Err(error) = journal.append(&event) {
                        tracing::error!("appending {} failed: {error}", event.name());
                        result = Err(error);
                        break;
                    }
                }
                Effect::Respond { client, reply } => match answer.take() {
                    Some((id, conn, to, sequence)) if id == client.0 => {
                        let barrier = journal.appended_through();
                        self.hold(Held { conn, barrier, to, sequence, reply, close: false });
                    }
                    other => {
                        debug_assert!(false, "the logic answers only the request of its step");
                        answer = other;
                    }
                },
            }
        }
        self.effects = effects;
        result
    }

    /// After a batch of steps: commit them (unless a commit runs; its end
    /// starts the next) — at once, or once the connections whose answers just
    /// went out have sent their next request, within the gather window —, maybe
    /// a snapshot, and release what is durable. An error: the WAL stopped.
    fn settle(&mut self, coord: &Coord, journal: &mut Journal) -> Result<(), ShellError> {
        let expected = self.pace.expected(Instant::now(), journal.gather_window());
        journal.commit(expected, INLINE_EVENTS_MAX)?;
        journal.maybe_snapshot(coord);
        self.release(journal);
        Ok(())
    }

    /// Delivers, in order, every held answer whose WAL records are durable.
    fn release(&mut self, journal: &Journal) {
        let durable = journal.durable_through();
        if self.outbox.front().is_none_or(|held| held.barrier > durable) {
            return;
        }
        let (now, window) = (Instant::now(), journal.gather_window());
        while self.outbox.front().is_some_and(|held| held.barrier <= durable) {
            let held = self.outbox.pop_front().expect("checked just above");
            self.pace.answered(held.conn, now, window);
            // The client may have gone away; its answer is then dropped.
            let _gone = held.to.send((held.sequence, held.reply, held.close));
        }
    }
}

/// Connections at once, in all and per address, and the time to send HELLO (lava-net's
/// gate; docs/operations.md, "Connection limits").
pub const CONNECTIONS: GateConfig =
    GateConfig { total_max: 1024, per_source_max: 64, auth_deadline: Duration::from_secs(5) };
/// Largest frame accepted before HELLO succeeded (a HELLO is a credential, a few hundred bytes).
pub const HELLO_LIMITS: FrameLimits = FrameLimits { body_bytes_max: 4096 };

pub(crate) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let gate = Gate::new(CONNECTIONS);
    let mut backoff = AcceptBackoff::default();
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                if let Some(line) = backoff.succeeded() {
                    tracing::info!("{line}");
                }
                let pass = match gate.admit(Source::Ip(peer.ip())) {
                    Ok(pass) => pass,
                    Err(refusal) => {
                        shared.counters.connection_refused();
                        tracing::debug!(%peer, "connection refused: {refusal}");
                        continue;
                    }
                };
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::debug!(%peer, "TCP_NODELAY not set: {error}");
                }
                tokio::spawn(connection(stream, peer, pass, Arc::clone(&shared)));
            }
            Err(error) => {
                let (pause, line) = backoff.failed(&error);
                if let Some(line) = line {
                    tracing::warn!("{line}");
                }
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// Requests of one connection read but not yet answered, above which the
/// connection task stops reading (a client that pipelines without reading
/// its answers cannot make the coordinator hold more).
pub const IN_FLIGHT_PER_CONNECTION_MAX: usize = 256;

/// One connection: HELLO with a credential first, then requests, possibly
/// pipelined, answered in order by a writer task.
async fn connection(stream: TcpStream, peer: SocketAddr, mut pass: Pass, shared: Arc<Shared>) {
    shared.counters.connection_opened();
    let _open = OpenConnection(Arc::clone(&shared.counters));
    let conn = shared.next_conn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (read_half, write_half) = stream.into_split();
    let mut reader = FrameReader { stream: read_half, buf: BytesMut::with_capacity(HELLO_BUFFER_BYTES) };
    let mut writer = FrameWriter { stream: write_half, buf: BytesMut::with_capacity(HELLO_BUFFER_BYTES) };
    let hello = tokio::select! {
        caller = hello(&mut reader, &mut writer, peer, pass.auth_deadline(), &shared) => caller,
        () = pass.evicted() => {
            tracing::debug!(%peer, "closed before HELLO to make room for a newer connection");
            None
        }
    };
    let Some(caller) = hello else { return };
    pass.authenticated();
    tracing::debug!(%peer, %caller, "connection authenticated");
    let (to, answers) = mpsc::unbounded_channel();
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT_PER_CONNECTION_MAX));
    tokio::spawn(write_answers(writer, answers, Arc::clone(&in_flight), peer));
    loop {
        let idle = Duration::from_millis(CLIENT_IDLE_TIMEOUT_MS);
        let read = tokio::select! {
            read = reader.read_frame(&FRAME_LIMITS, idle) => read,
            // The loop this connection serves has ended (a candidate whose leadership
            // ended starts again with a new one): close, so that the client reconnects
            // and retries at once instead of waiting for an answer that cannot come.
            () = shared.calls.closed() => {
                tracing::debug!(%peer, "the loop ended: closing the connection");
                return;
            }
        };
        let frame = match read {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(ConnError::ReadTimeout { .. }) => {
                tracing::debug!(%peer, "idle connection closed");
                return;
            }
            Err(error) => {
                tracing::warn!(%peer, "{error}; closing the connection");
                return;
            }
        };
        match in_flight.acquire().await {
            Ok(permit) => permit.forget(),
            Err(_) => return, // the writer ended: the peer is gone
        }
        let sequence = frame.header.sequence;
        shared.counters.request(frame.header.operation);
        let (what, close) = match check(&frame.header, &frame.body, &shared.limits) {
            Ok(Some(request)) => (CallKind::Request { caller: caller.clone(), request }, false),
            Ok(None) => (CallKind::Stats, false),
            Err((error, close)) => {
                tracing::warn!(%peer, operation = frame.header.operation, "request refused: {error:?}");
                (CallKind::Refused { reply: Reply::Error(error), close }, close)
            }
        };
        if shared.calls.send(Call { conn, to: to.clone(), sequence, what }).await.is_err() {
            return; // the loop is stopping
        }
        if close {
            return;
        }
    }
}

/// Counts a connection as open while it lives.
struct OpenConnection(Arc<Counters>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connection_closed();
    }
}

/// The first frame must be HELLO with a credential the cluster key verifies
/// (MAC, time window, single use); answers HELLO_REPLY and returns the
/// caller, or answers why not (ERR_AUTH) and returns `None`.
async fn hello(
    reader: &mut FrameReader,
    writer: &mut FrameWriter,
    peer: SocketAddr,
    within: Duration,
    shared: &Shared,
) -> Option<Caller> {
    let frame = match reader.read_frame(&HELLO_LIMITS, within).await {
        Ok(Some(frame)) => frame,
        Ok(None) => return None,
        Err(error) => {
            tracing::debug!(%peer, "{error} before HELLO; closing the connection");
            return None;
        }
    };
    shared.counters.request(frame.header.operation);
    let answer = authenticate(&frame.header, &frame.body, &shared.auth, system_now_ms());
    let reply = match &answer {
        Ok(caller) => Reply::Hello(wire::HelloReply {
            uid: caller.uid,
            user: caller.user.to_string(),
            admin: shared.coord_config.is_admin(caller),
        }),
        Err(error) => {
            shared.counters.refusal(error.code);
            tracing::warn!(%peer, operation = frame.header.operation, "connection refused: {error:?}");
            Reply::Error(error.clone())
        }
    };
    writer.push(frame.header.sequence, &reply);
    if let Err(error) = writer.flush().await {
        tracing::debug!(%peer, "HELLO answer not delivered: {error}");
        return None;
    }
    answer.ok()
}

/// Checks a connection's first frame: HELLO, well-formed, with a credential
/// that verifies and names a valid user.
fn authenticate(
    header: &FrameHeader,
    body: &[u8],
    auth: &Authenticator,
    now_ms: u64,
) -> Result<Caller, wire::ErrorReply> {
    let refuse = |message: String| wire::ErrorReply { code: wire::ERR_AUTH, message };
    if let Err(error) = header.check_version(COORD_VERSION) {
        return Err(wire::ErrorReply { code: wire::ERR_UNSUPPORTED, message: error.to_string() });
    }
    let hello = match wire::decode_request(header.operation, body, &MESSAGE_LIMITS) {
        Ok(wire::Request::Hello(hello)) => hello,
        Ok(request) => {
            return Err(refuse(format!(
                "not authenticated: the first frame of a connection must be HELLO with a credential from \
                 the local sbatchd, not {}",
                request.operation().name()
            )));
        }
        Err(error) => {
            return Err(refuse(format!(
                "not authenticated: the first frame of a connection must be HELLO with a credential from \
                 the local sbatchd ({error})"
            )));
        }
    };
    let credential = Credential::verify(auth, &hello.credential, now_ms)
        .map_err(|error| refuse(format!("authentication failed: {error}")))?;
    let user = UserName::parse(&credential.username)
        .map_err(|error| refuse(format!("authentication failed: {error}")))?;
    Ok(Caller { uid: credential.uid, user })
}

/// Writes a connection's answers in the order the loop released them,
/// many per write when several are ready; closes after an answer marked so.
async fn write_answers(
    mut writer: FrameWriter,
    mut answers: mpsc::UnboundedReceiver<Answer>,
    in_flight: Arc<Semaphore>,
    peer: SocketAddr,
) {
    while let Some(first) = answers.recv().await {
        let mut close = false;
        let mut n = 0;
        let mut next = Some(first);
        while let Some((sequence, reply, closing)) = next {
            writer.push(sequence, &reply);
            n += 1;
            if closing {
                close = true;
                break;
            }
            next = answers.try_recv().ok();
        }
        if let Err(error) = writer.flush().await {
            tracing::debug!(%peer, "answer not delivered: {error}");
            break;
        }
        in_flight.add_permits(n);
        if close {
            break;
        }
    }
    // The reader learns that the peer is gone at its next permit.
    in_flight.close();
}

/// Bytes read at once from a connection.
const READ_CHUNK_BYTES: usize = 16 << 10;
/// A new connection's first buffers, before HELLO: a stranger costs little.
const HELLO_BUFFER_BYTES: usize = 512;

/// The reading half of a connection: whole frames, within the limits.
struct FrameReader {
    stream: OwnedReadHalf,
    buf: BytesMut,
}

impl FrameReader {
    /// The next frame within `limits`; `Ok(None)` when the peer closed between frames. The
    /// whole frame must arrive `within` this time, however its bytes trickle in; the
    /// buffer grows with the bytes received, never with the length a header announces.
    async fn read_frame(
        &mut self,
        limits: &FrameLimits,
        within: Duration,
    ) -> Result<Option<Frame>, ConnError> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(frame) = decode_frame(&mut self.buf, limits)? {
                return Ok(Some(frame));
            }
            if self.buf.capacity() - self.buf.len() < READ_CHUNK_BYTES / 4 {
                self.buf.reserve(READ_CHUNK_BYTES);
            }
            let timeout_ms = u64::try_from(within.as_millis()).unwrap_or(u64::MAX);
            let read = tokio::time::timeout_at(deadline, self.stream.read_buf(&mut self.buf));
            if read.await.map_err(|_| ConnError::ReadTimeout { timeout_ms })?? == 0 {
                return match self.buf.len() {
                    0 => Ok(None),
                    buffered_bytes => Err(ConnError::ClosedMidFrame { buffered_bytes }),
                };
            }
        }
    }
}

/// The writing half of a connection: answers encoded into one buffer, then written.
struct FrameWriter {
    stream: OwnedWriteHalf,
    buf: BytesMut,
}

impl FrameWriter {
    /// Encodes one answer frame into the buffer.
    fn push(&mut self, sequence: u32, reply: &Reply) {
        let header = FrameHeader {
            sequence,
            operation: reply.operation().code(),
            version: COORD_VERSION,
            length: 0,
            status: reply.status(),
        };
        let encoded = encode_frame(header, &reply.encode_body(), &FRAME_LIMITS, &mut self.buf);
        if let Err(error) = encoded {
            // Our answers are bounded below the frame limit; say so rather than send nothing.
            tracing::error!("answer not encodable: {error}");
            let refusal =
                Reply::error(wire::ERR_TRY_AGAIN, format!("the answer could not be encoded: {error}"));
            let header =
                FrameHeader { operation: refusal.operation().code(), status: refusal.status(), ..header };
            let _small = encode_frame(header, &refusal.encode_body(), &FRAME_LIMITS, &mut self.buf);
        }
    }

    /// Writes everything pushed, within the write timeout.
    async fn flush(&mut self) -> Result<(), ConnError> {
        let timeout_ms = Timeouts::default().write_timeout_ms;
        let write = self.stream.write_all(&self.buf);
        tokio::time::timeout(Duration::from_millis(timeout_ms), write)
            .await
            .map_err(|_| ConnError::WriteTimeout { timeout_ms })??;
        self.buf.clear();
        lava_crash::point!("coordinator.answer_written");
        Ok(())
    }
}

/// Version, operation, XDR (wire), then the fields (ll); `None` for STATS_QUERY, which the
/// shell answers itself. The refusal says whether the connection is to be closed after the
/// answer.
fn check(
    header: &FrameHeader,
    body: &[u8],
    limits: &Limits,
) -> Result<Option<Request>, (wire::ErrorReply, bool)> {
    let refuse = |code: u32, message: String| wire::ErrorReply { code, message };
    if let Err(error) = header.check_version(COORD_VERSION) {
        return Err((refuse(wire::ERR_UNSUPPORTED, error.to_string()), true));
    }
    let request = wire::decode_request(header.operation, body, &MESSAGE_LIMITS).map_err(|error| {
        let code = match error {
            wire::DecodeError::Operation { .. } => wire::ERR_UNSUPPORTED,
            wire::DecodeError::Body { .. } => wire::ERR_BAD_REQUEST,
        };
        (refuse(code, error.to_string()), true)
    })?;
    if request == wire::Request::Stats {
        return Ok(None);
    }
    Request::validate(request, limits)
        .map(Some)
        .map_err(|error| (refuse(error.code(), error.to_string()), false))
}

/// The gauges of the logic's state that a single coordinator and a candidate both report
/// (STATS, `coordctl status`, the metrics).
pub(crate) fn state_gauges(coord: &Coord) -> impl Iterator<Item = (String, u64)> {
    let counts = coord.task_counts();
    [
        ("tasks.waiting", counts[wire::task_state::WAITING as usize]),
        ("tasks.leased", counts[wire::task_state::LEASED as usize]),
        ("tasks.completed", counts[wire::task_state::COMPLETED as usize]),
        ("tasks.failed", counts[wire::task_state::FAILED as usize]),
        ("tasks.total", coord.n_tasks() as u64),
        ("leases.valid", coord.n_valid_leases() as u64),
        ("workers.known", coord.n_workers_known() as u64),
        ("submissions.held", coord.n_submissions_held() as u64),
    ]
    .into_iter()
    .map(|(name, value): (&str, u64)| (name.to_owned(), value))
}

#[cfg(test)]
mod tests {
    use lava_coord_ll::{Caller, Limits, Payload, Request, UserName};
    use lava_coord_logic::{Coord, CoordConfig};
    use lava_coord_wire::{self as wire, Reply};
    use lava_eventlog::{EventLog, Options};
    use tokio::sync::mpsc;

    use std::time::Duration;

    use super::{Answer, Call, CallKind, Loop};
    use crate::journal::{self, EVENT_LOG_NAME, Journal, JournalEvent};

    fn caller() -> Caller {
        Caller { uid: 1000, user: UserName::parse("alice").expect("valid") }
    }

    fn submit(bytes: usize) -> CallKind {
        let payload = Payload::new(vec![7; bytes], &Limits::default()).expect("under the ll limit");
        CallKind::Request { caller: caller(), request: Request::Submit { payload } }
    }

    fn new_loop() -> Loop {
        Loop {
            outbox: Default::default(),
            effects: Vec::new(),
            next_client: 1,
            counters: Default::default(),
            pace: Default::default(),
        }
    }

    fn answers(from: &mut mpsc::UnboundedReceiver<Answer>) -> Vec<(u32, Reply)> {
        std::iter::from_fn(|| from.try_recv().ok()).map(|(sequence, reply, _)| (sequence, reply)).collect()
    }

    // Goal: an answer leaves only once the WAL is durable through the last event appended
    // before it (the logic's shell contract, step 3), also when it appended nothing itself:
    // a query that reads a change not yet durable, the shell's STATS, and a refusal all wait
    // behind the submission before them, and come out in request order.
    // Method: the loop's own `take`/`settle`/`release` on a real WAL in a temporary folder;
    // the group commit is awaited by hand.
    #[tokio::test(flavor = "current_thread")]
    async fn reads_and_refusals_wait_behind_the_append_before_them() {
        let dir = tempfile::tempdir().expect("temporary folder");
        let mut journal = Journal::new(journal::open(&dir.path().join("coord")).expect("WAL"), 1_000_000);
        let mut coord = Coord::new(CoordConfig::default());
        let mut shell = new_loop();
        let (to, mut written) = mpsc::unbounded_channel();
        let calls = [
            submit(3),
            CallKind::Request { caller: caller(), request: Request::QueryCounts },
            CallKind::Stats,
            CallKind::Refused {
                reply: Reply::error(wire::ERR_BAD_REQUEST, "bad field".to_owned()),
                close: false,
            },
        ];
        for (sequence, what) in (1..).zip(calls) {
            shell
                .take(&mut coord, &mut journal, Call { conn: 1, to: to.clone(), sequence, what }, 0)
                .expect("stepped");
        }
        shell.release(&journal);
        journal.start_sync();
        assert_eq!((journal.appended_through(), journal.durable_through()), (1, 0));
        assert_eq!(answers(&mut written), [], "nothing leaves before TaskCreated is durable");
        assert_eq!(shell.outbox.iter().map(|held| held.barrier).collect::<Vec<_>>(), [1, 1, 1, 1]);

        let Ok(JournalEvent::Durable(1)) = journal.next().await else { panic!("the group commit ends") };
        shell.release(&journal);
        let out = answers(&mut written);
        assert_eq!(out.iter().map(|(sequence, _)| *sequence).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(out[0].1, Reply::Submitted(wire::SubmitTaskReply { task_id: 1 }));
        assert_eq!(
            out[1].1,
            Reply::Counts(wire::CountsReply { waiting: 1, leased: 0, completed: 0, failed: 0 }),
            "the query read the live state, which already held the task"
        );
        assert!(matches!(out[2].1, Reply::Stats(_)));
        assert!(matches!(&out[3].1, Reply::Error(error) if error.code == wire::ERR_BAD_REQUEST));
        assert!(shell.outbox.is_empty());
    }

    // Goal: a group commit waits for the connections whose answers just went out (they
    // send again soon) and then covers their requests too, made durable on the loop's
    // thread; with nobody expected it commits at once; an expected connection that does not
    // come back delays the others only until the gather window ends (journal.next()).
    // Method: the loop's take/settle on a real WAL; connections 1 and 2, one submission
    // each at a time.
    #[tokio::test(flavor = "current_thread")]
    async fn a_commit_waits_for_the_connections_expected_back() {
        let dir = tempfile::tempdir().expect("temporary folder");
        let mut journal = Journal::new(journal::open(&dir.path().join("coord")).expect("WAL"), 1_000_000);
        let mut coord = Coord::new(CoordConfig::default());
        let mut shell = new_loop();
        let (to, mut written) = mpsc::unbounded_channel();
        let take = |shell: &mut Loop, coord: &mut Coord, journal: &mut Journal, conn, sequence| {
            let call = Call { conn, to: to.clone(), sequence, what: submit(1) };
            shell.take(coord, journal, call, 0).expect("stepped");
            shell.settle(coord, journal).expect("committed");
        };
        // A window of a second from each append, longer than any pause of a loaded machine
        // between the statements that check the waits below.
        journal.set_gather_max(Duration::from_secs(1));
        journal.assume_commit_time(Duration::from_secs(1));
        take(&mut shell, &mut coord, &mut journal, 1, 1);
        assert_eq!(journal.durable_through(), 1, "nobody else expected: committed at once");
        journal.assume_commit_time(Duration::from_secs(1));
        assert_eq!(answers(&mut written).len(), 1);

        take(&mut shell, &mut coord, &mut journal, 2, 2);
        assert_eq!(journal.durable_through(), 1, "connection 1 was just answered: waited for");
        assert_eq!(answers(&mut written), []);
        take(&mut shell, &mut coord, &mut journal, 1, 3);
        assert_eq!(journal.durable_through(), 3, "connection 1 came back: one commit for both");
        let out = answers(&mut written);
        assert_eq!(out.iter().map(|(sequence, _)| *sequence).collect::<Vec<_>>(), [2, 3]);

        take(&mut shell, &mut coord, &mut journal, 2, 4);
        assert_eq!(journal.durable_through(), 3, "connection 1 is expected back");
        let Ok(JournalEvent::Durable(4)) = journal.next().await else {
            panic!("the gather window ends and the commit covers the waiting submission")
        };
        shell.release(&journal);
        assert_eq!(answers(&mut written).iter().map(|(sequence, _)| *sequence).collect::<Vec<_>>(), [4]);
    }

    // Goal: when an append fails, the step's answer is never queued (the caller stops the
    // daemon; shell contract step 4), and an answer held before it stays held.
    // Method: a WAL whose records may hold 64 bytes, a submission whose TaskCreated is larger.
    #[tokio::test(flavor = "current_thread")]
    async fn a_failed_append_leaves_its_answer_unsent() {
        let dir = tempfile::tempdir().expect("temporary folder");
        let mut options = Options::new(EVENT_LOG_NAME);
        options.record_bytes_max = 64;
        let (log, _report) = EventLog::open(dir.path(), options).expect("WAL");
        let mut journal = Journal::new(std::sync::Arc::new(log), 1_000_000);
        let mut coord = Coord::new(CoordConfig::default());
        let mut shell = new_loop();
        let (to, mut written) = mpsc::unbounded_channel();
        shell
            .take(&mut coord, &mut journal, Call { conn: 1, to: to.clone(), sequence: 1, what: submit(1) }, 0)
            .expect("fits");
        let failed =
            shell.take(&mut coord, &mut journal, Call { conn: 1, to, sequence: 2, what: submit(200) }, 0);
        assert!(failed.is_err(), "a record over the WAL's limit fails the append");
        assert_eq!(shell.outbox.len(), 1, "only the first submission's answer is held");
        assert_eq!(journal.appended_through(), 1);
        assert_eq!(answers(&mut written), []);
    }
}
