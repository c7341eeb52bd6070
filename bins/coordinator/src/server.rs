//! The daemon: configuration, the WAL and its replay, the listener, one task
//! per connection, and the one closed event loop that steps the logic and
//! carries out its effects (../shared/STYLE.md point 5).
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
//! # The loop
//! Events: a request from a connection task (with the channel its answer goes
//! back on), the 100 ms tick, a journal helper thread that finished (appends
//! durable, snapshot written), a stop signal. Each step's appends go to the
//! journal's buffer at once; its answer waits in the outbox behind the
//! position of the last append before it, and is released when
//! `durable_through` reaches that position. A `wait_durable` is started after
//! each step unless one is running, so one fsync covers every step appended
//! while the previous one ran (group commit). While many answers wait for a
//! slow disk, the loop takes no new requests ([`HELD_ANSWERS_MAX`]).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use lava_conf::{BaseConfig, LogMask};
use lava_coord_ll::{Limits, Request};
use lava_coord_logic::{ClientId, Coord, CoordConfig, Effect, Input, TICK_INTERVAL_MS};
use lava_coord_wire::{self as wire, COORD_VERSION, Reply};
use lava_net::{
    AuthConfig, AuthConn, Authenticator, ClusterKey, ConnError, FramedConn, KeyRing, Timeouts, system_now_ms,
};
use lava_xdr::frame::FrameHeader;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, oneshot};
use tokio::time::MissedTickBehavior;

use crate::codec::{FRAME_LIMITS, MESSAGE_LIMITS};
use crate::journal::{self, Journal, JournalEvent};
use crate::{Args, ShellError};

/// Connections the kernel queues before the coordinator accepts them.
const LISTEN_BACKLOG: u32 = 1024;
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
}

impl ShellConfig {
    /// Maps a loaded configuration; `port` overrides `LAVA_COORD_PORT`.
    pub fn from_base(conf: &BaseConfig, port: Option<u16>) -> ShellConfig {
        let addr = conf.master_host().and_then(|host| host.addr).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        ShellConfig {
            listen: SocketAddr::new(addr, port.unwrap_or(conf.lsf.coord_port)),
            key_file: conf.lsf.cluster_key_file.clone(),
            wal_dir: conf.work_dir().join("coord"),
            log_mask: conf.lsf.log_mask,
        }
    }
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
    let config = ShellConfig::from_base(&conf, args.port);
    let key = ClusterKey::load(&config.key_file)?;
    init_logging(config.log_mask);
    tracing::info!(envdir = %envdir.display(), key_id = %key.id(), "coordinator starting");
    let auth = Arc::new(Authenticator::new(KeyRing::new(&key), AuthConfig::default()));
    let coord_config = CoordConfig {
        lease_duration_ms: args.lease_ms,
        payload_bytes_max: args.payload_bytes_max,
        ..CoordConfig::default()
    };
    let log = journal::open(&config.wal_dir)?;
    let coord = journal::recover(&log, coord_config)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| ShellError::Runtime(format!("cannot start the async runtime: {error}")))?;
    let journal = Journal::new(log, args.snapshot_events);
    let result = runtime.block_on(serve(&args, &config, auth, journal, coord));
    runtime.shutdown_timeout(Duration::from_millis(RUNTIME_SHUTDOWN_MS));
    result
}

fn init_logging(mask: LogMask) {
    let level = mask.level_name();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // try_init fails only if a logger is already installed (a test); that one stays.
    let _installed = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(false)
        .with_writer(io::stderr)
        .try_init();
}

/// A request checked by its connection task, with where its answer goes.
#[derive(Debug)]
struct Call {
    request: Request,
    answer: oneshot::Sender<Reply>,
}

/// What the connection tasks share.
#[derive(Debug)]
struct Shared {
    auth: Arc<Authenticator>,
    limits: Limits,
    calls: mpsc::Sender<Call>,
}

async fn serve(
    args: &Args,
    config: &ShellConfig,
    auth: Arc<Authenticator>,
    mut journal: Journal,
    mut coord: Coord,
) -> Result<(), ShellError> {
    for path in [&args.port_file, &args.ready_file].into_iter().flatten() {
        remove_stale(path)?;
    }
    // Contract step 1's end: expire by the current time before serving.
    let mut loop_state = Loop { outbox: VecDeque::new(), effects: Vec::new(), next_client: 1 };
    loop_state.step(&mut coord, &mut journal, Input::Tick, None)?;
    let listener = bind(config.listen)?;
    let bound = listener.local_addr().map_err(|source| ShellError::Listen { addr: config.listen, source })?;
    let mut terminate = signal(SignalKind::terminate())
        .map_err(|error| ShellError::Runtime(format!("cannot handle signals: {error}")))?;
    let mut interrupt = signal(SignalKind::interrupt())
        .map_err(|error| ShellError::Runtime(format!("cannot handle signals: {error}")))?;
    let (calls, mut inbox) = mpsc::channel(REQUESTS_QUEUED_MAX);
    let limits = Limits { payload_bytes_max: args.payload_bytes_max };
    let shared = Arc::new(Shared { auth, limits, calls });
    let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
    drop(shared);
    if let Some(path) = &args.port_file {
        write_atomically(path, &format!("{}\n", bound.port()))?;
    }
    if let Some(path) = &args.ready_file {
        write_atomically(path, "ready\n")?;
    }
    tracing::info!(%bound, tasks = coord.n_tasks(), "coordinator ready");
    let mut tick = tokio::time::interval(Duration::from_millis(TICK_INTERVAL_MS));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let result = loop {
        let taking = loop_state.outbox.len() < HELD_ANSWERS_MAX;
        let outcome = tokio::select! {
            _ = terminate.recv() => { tracing::info!("SIGTERM: stopping"); break Ok(()); }
            _ = interrupt.recv() => { tracing::info!("SIGINT: stopping"); break Ok(()); }
            done = journal.next() => match done {
                Ok(JournalEvent::Durable(position)) => {
                    tracing::trace!(position, "durable");
                    loop_state.release(&journal);
                    journal.start_sync();
                    Ok(())
                }
                Ok(JournalEvent::SnapshotWritten { position, prune }) => {
                    tracing::info!(position, segments_removed = prune.removed_segments.len(), "snapshot written");
                    Ok(())
                }
                Ok(JournalEvent::SnapshotFailed(error)) => {
                    tracing::warn!("snapshot not written: {error}");
                    Ok(())
                }
                Err(error) => Err(error),
            },
            call = inbox.recv(), if taking => match call {
                Some(Call { request, answer }) => {
                    let client = loop_state.next_client;
                    loop_state.next_client += 1;
                    let input = Input::Request { client: ClientId(client), request };
                    loop_state.step(&mut coord, &mut journal, input, Some((client, answer)))
                }
                None => Ok(()),
            },
            _ = tick.tick() => loop_state.step(&mut coord, &mut journal, Input::Tick, None),
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

/// The loop's own state: the answers held for durability.
struct Loop {
    outbox: VecDeque<(u64, oneshot::Sender<Reply>, Reply)>,
    effects: Vec<Effect>,
    next_client: u64,
}

impl Loop {
    /// Steps the logic and carries out its effects (contract steps 2 to 4).
    fn step(
        &mut self,
        coord: &mut Coord,
        journal: &mut Journal,
        input: Input,
        mut answer: Option<(u64, oneshot::Sender<Reply>)>,
    ) -> Result<(), ShellError> {
        let mut effects = std::mem::take(&mut self.effects);
        coord.step(system_now_ms(), input, &mut effects);
        let mut result = Ok(());
        for effect in effects.drain(..) {
            match effect {
                Effect::Append(event) => {
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
                    Some((id, to)) if id == client.0 => {
                        self.outbox.push_back((journal.appended_through(), to, reply));
                    }
                    other => {
                        debug_assert!(false, "the logic answers only the request of its step");
                        answer = other;
                    }
                },
            }
        }
        self.effects = effects;
        result?;
        journal.start_sync();
        journal.maybe_snapshot(coord);
        self.release(journal);
        Ok(())
    }

    /// Delivers, in order, every held answer whose WAL records are durable.
    fn release(&mut self, journal: &Journal) {
        let durable = journal.durable_through();
        while self.outbox.front().is_some_and(|(barrier, _, _)| *barrier <= durable) {
            let (_, to, reply) = self.outbox.pop_front().expect("checked just above");
            // The client may have gone away; its answer is then dropped.
            let _gone = to.send(reply);
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::debug!(%peer, "TCP_NODELAY not set: {error}");
                }
                tokio::spawn(connection(stream, peer, Arc::clone(&shared)));
            }
            Err(error) => {
                tracing::warn!("accepting a connection failed: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// One connection: authenticated frames in, one answer per request, in order.
async fn connection(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>) {
    let timeouts = Timeouts { read_timeout_ms: CLIENT_IDLE_TIMEOUT_MS, ..Timeouts::default() };
    let mut conn = AuthConn::new(FramedConn::new(stream, FRAME_LIMITS, timeouts), Arc::clone(&shared.auth));
    loop {
        let frame = match conn.read_frame().await {
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
        let sequence = frame.header.sequence;
        let (reply, close) = match check(&frame.header, &frame.body, &shared.limits) {
            Ok(request) => {
                let (answer, answered) = oneshot::channel();
                if shared.calls.send(Call { request, answer }).await.is_err() {
                    return;
                }
                match answered.await {
                    Ok(reply) => (reply, false),
                    Err(_) => return, // the loop is stopping
                }
            }
            Err((reply, close)) => {
                tracing::warn!(%peer, operation = frame.header.operation, "request refused: {reply:?}");
                (reply, close)
            }
        };
        let header = FrameHeader {
            sequence,
            operation: reply.operation().code(),
            version: COORD_VERSION,
            length: 0,
            status: reply.status(),
        };
        if let Err(error) = conn.write_frame(header, &reply.encode_body()).await {
            tracing::debug!(%peer, "answer not delivered: {error}");
            return;
        }
        if close {
            return;
        }
    }
}

/// Version, operation, XDR (wire), then the fields (ll). The refusal says
/// whether the connection is to be closed after the answer.
fn check(header: &FrameHeader, body: &[u8], limits: &Limits) -> Result<Request, (Reply, bool)> {
    if let Err(error) = header.check_version(COORD_VERSION) {
        return Err((Reply::error(wire::ERR_UNSUPPORTED, error.to_string()), true));
    }
    let request = wire::decode_request(header.operation, body, &MESSAGE_LIMITS).map_err(|error| {
        let code = match error {
            wire::DecodeError::Operation { .. } => wire::ERR_UNSUPPORTED,
            wire::DecodeError::Body { .. } => wire::ERR_BAD_REQUEST,
        };
        (Reply::error(code, error.to_string()), true)
    })?;
    Request::validate(request, limits).map_err(|error| (Reply::error(error.code(), error.to_string()), false))
}

/// A listening socket with SO_REUSEADDR, so a restart rebinds its port at once.
fn bind(addr: SocketAddr) -> Result<TcpListener, ShellError> {
    let error = |source| ShellError::Listen { addr, source };
    let socket = if addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.map_err(error)?;
    socket.set_reuseaddr(true).map_err(error)?;
    socket.bind(addr).map_err(error)?;
    socket.listen(LISTEN_BACKLOG).map_err(error)
}

fn remove_stale(path: &Path) -> Result<(), ShellError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ShellError::Io { what: "remove the stale file", path: path.to_owned(), source }),
    }
}

/// Writes `text` to `path` atomically: a temporary file beside it, fsynced, renamed.
fn write_atomically(path: &Path, text: &str) -> Result<(), ShellError> {
    let mut temp = OsString::from(path.as_os_str());
    temp.push(".tmp");
    let temp = PathBuf::from(temp);
    let io_error = |what: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| ShellError::Io { what, path, source }
    };
    fs::write(&temp, text).map_err(io_error("write", &temp))?;
    File::open(&temp).and_then(|file| file.sync_all()).map_err(io_error("sync", &temp))?;
    fs::rename(&temp, path).map_err(io_error("rename into place", path))
}
