//! lava-lim: the `lim` daemon, the I/O shell around lava-lim-logic
//! (docs/protocols/lim.md).
//!
//! `lim [-d|--envdir DIR] [--host NAME] [--ready-file PATH]`
//!
//! # What it does
//! - Loads lsf.conf and lsf.cluster.NAME; finds its own host (`--host`, else the kernel's host
//!   name) and every host's LIM address: `LAVA_ADDR` (else the name resolved) with the
//!   per-host `LAVA_LIM_PORT`, else `LSF_LIM_PORT`. The master candidates are
//!   `LSF_MASTER_LIST`'s hosts (else the first server host alone); the logic elects among
//!   them (docs/protocols/lim.md, "Master election").
//! - Binds UDP on its own address (asking the kernel for a [`RECEIVE_BUFFER_BYTES`] receive
//!   buffer) and TCP on its query port (per-host `LAVA_LIM_PORT`, else `LAVA_LIM_TCP_PORT`);
//!   the master announces its TCP port in beacons. A candidate must bind it; any other lim
//!   that cannot keeps running (the master then does not learn its CPUs and memory).
//! - One closed loop: when the socket is readable, up to [`RECEIVE_BATCH_MAX`] datagrams are
//!   taken without waiting, each decoded (lava-lim-wire), validated (lava-lim-ll) and fed to
//!   the logic with its source address (refused ones as `Input::Rejected(reason)`, logged);
//!   the load is sampled from /proc every second ([`load`]); `Input::Tick` is fed at the
//!   logic's deadline; effects are carried out in order (send datagrams — a beacon is encoded
//!   once for all hosts —, ask a host's lim for its facts, log).
//! - Host facts: `Effect::FetchHostInfo` of its own host (a candidate taking the master
//!   role) is answered at once from [`load::host_info`]; for another host it asks that
//!   host's lim on its TCP port (`LIM_TCP_HOST_INFO`, at
//!   most [`HOST_INFO_FETCHES_MAX`] at once, [`HOST_INFO_TIMEOUT_MS`] each) in a task that
//!   feeds the answer back as `Input::HostInfo`.
//! - TCP queries (one frame in, one frame out, per connection, any number of requests):
//!   every lim answers `LIM_TCP_HOST_INFO` about its own host; the master also answers
//!   `LIM_TCP_CLUSTER_INFO`, `LIM_TCP_HOST_LOAD`, `LIM_TCP_HOSTS_INFO` and `LIM_TCP_STATUS`
//!   (drop counters), which a slave refuses with status `TCP_STATUS_REFUSED`. Every lim also
//!   answers `LIM_TCP_ADMIN_STATUS` (ours, `lsadmin showstatus`): its role, the master, the
//!   hosts by status (master) and every counter: the logic's accepted and dropped datagrams
//!   and this shell's [`ShellCounters`].
//! - `LIM_TCP_LOCK` (ours, `lsadmin limlock [-t]` and `limunlock`): accepted only from a
//!   privileged source port (root) on this host itself (its own address or loopback); the
//!   request goes to the main loop as `Input::Lock`/`Input::Unlock`, whose refusal (`Host is
//!   already locked`, `Host is not locked`) or the new status word is the answer. The lock
//!   lives in memory: a restarted lim is unlocked.
//! - Load thresholds: this host's columns `r15s` … `mem` of lsf.cluster's `Host` section
//!   ([`lava_lim_logic::Thresholds`]); the logic judges each sample against them.
//! - Metrics ([`metrics`]): with `LAVA_LIM_METRICS_PORT` set, `lsadmin showstatus`'s figures
//!   under Prometheus names, read under the state's lock at each scrape.
//!
//! Our own lsf.conf keys: `LAVA_LIM_BEACON_INTERVAL_MS` (default 4000) and
//! `LAVA_LIM_REPORT_INTERVAL_MS` (default 5000).
//!
//! `--ready-file PATH`: once the sockets are bound, writes `UDP_PORT TCP_PORT\n` there
//! (temporary file then rename; TCP_PORT is 0 on a slave that could not bind its TCP port).

#![deny(missing_docs)]

pub mod load;
pub mod metrics;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use bytes::BytesMut;
use clap::Parser;
use lava_conf::{BaseConfig, LogMask};
use lava_lim_logic::{
    Config, DropReason, Effect, HostConfig, HostInfo, HostStatus, Input, Lim, Outgoing, Thresholds,
};
use lava_lim_wire as wire;
use lava_net::gate::{AcceptBackoff, Gate, GateConfig, Pass, Source};
use lava_shell::readiness::Readiness;
use lava_shell::signals::{ShellSignal, Signals};
use lava_shell::startup;
use lava_xdr::frame::{FrameHeader, FrameLimits, decode_frame, encode_frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{Semaphore, mpsc, oneshot};

/// Interval between two load samples.
pub const SAMPLE_INTERVAL_MS: u64 = 1_000;
/// Longest a TCP query connection may stay idle.
pub const QUERY_IDLE_TIMEOUT_MS: u64 = 10_000;
/// Query connections at once (lava-net's gate: the oldest that has not yet sent a whole
/// query makes room first), and from one address.
pub const QUERY_CONNECTIONS: GateConfig =
    GateConfig { total_max: 256, per_source_max: 16, auth_deadline: Duration::from_secs(5) };
/// Largest TCP query frame body accepted (requests have empty bodies).
pub const QUERY_BODY_BYTES_MAX: u32 = 4096;
/// Longest a host-info question may take (connect, ask, answer).
pub const HOST_INFO_TIMEOUT_MS: u64 = 2_000;
/// Most host-info questions in flight at once.
pub const HOST_INFO_FETCHES_MAX: usize = 32;
/// Most datagrams taken from the socket before timers get their turn.
pub const RECEIVE_BATCH_MAX: usize = 256;
/// Receive buffer asked of the kernel for the UDP socket (capped by `net.core.rmem_max`):
/// room for a few thousand reports while a beacon round or a query keeps the loop busy.
pub const RECEIVE_BUFFER_BYTES: usize = 4 << 20;

/// What the shell counts (the logic counts accepted and dropped datagrams). Shared by the main
/// loop, the host-info tasks and the query tasks, hence atomics.
#[derive(Debug, Default)]
pub struct ShellCounters {
    /// Datagrams that decoded as a master beacon.
    pub received_beacon: AtomicU64,
    /// Datagrams that decoded as a load report.
    pub received_load_report: AtomicU64,
    /// Beacon datagrams handed to the kernel (one per host per round).
    pub sent_beacon: AtomicU64,
    /// Load-report datagrams handed to the kernel.
    pub sent_load_report: AtomicU64,
    /// Datagrams the kernel refused to send (full buffer, unreachable).
    pub send_failed: AtomicU64,
    /// TCP queries answered, by operation (`LIM_TCP_CLUSTER_INFO`..`LIM_TCP_ADMIN_STATUS`).
    pub queries: [AtomicU64; QUERY_KINDS.len()],
    /// TCP queries refused (unknown operation, wrong version, a master query to a slave).
    pub queries_refused: AtomicU64,
    /// Query connections refused at the gate (too many from one address, or in all).
    pub connections_refused: AtomicU64,
    /// Host-fact questions asked of other lims.
    pub host_info_asked: AtomicU64,
    /// Host-fact questions that failed (unreachable, timeout, bad or foreign answer).
    pub host_info_failed: AtomicU64,
}

/// TCP query operations counted by [`ShellCounters::queries`], with their counter names.
pub const QUERY_KINDS: [(u32, &str); 6] = [
    (wire::LIM_TCP_CLUSTER_INFO, "cluster_info"),
    (wire::LIM_TCP_HOST_LOAD, "host_load"),
    (wire::LIM_TCP_STATUS, "status"),
    (wire::LIM_TCP_HOST_INFO, "host_info"),
    (wire::LIM_TCP_HOSTS_INFO, "hosts_info"),
    (wire::LIM_TCP_ADMIN_STATUS, "admin_status"),
];

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Every counter of `lsadmin showstatus`, in a stable order: datagrams received by operation,
/// accepted, dropped by reason, sent by kind, TCP queries by kind, host-fact questions.
pub fn admin_counters(lim: &Lim, shell: &ShellCounters) -> Vec<(String, u64)> {
    let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let mut out = vec![
        ("datagrams.received.beacon".to_owned(), get(&shell.received_beacon)),
        ("datagrams.received.load_report".to_owned(), get(&shell.received_load_report)),
        ("datagrams.accepted".to_owned(), lim.n_accepted()),
    ];
    for (reason, n) in lim.drop_counts() {
        let name = reason.name().trim_start_matches("drop_");
        out.push((format!("datagrams.dropped.{name}"), n));
    }
    out.push(("datagrams.sent.beacon".to_owned(), get(&shell.sent_beacon)));
    out.push(("datagrams.sent.load_report".to_owned(), get(&shell.sent_load_report)));
    out.push(("datagrams.send_failed".to_owned(), get(&shell.send_failed)));
    for ((_, name), counter) in QUERY_KINDS.iter().zip(&shell.queries) {
        out.push((format!("queries.{name}"), get(counter)));
    }
    out.push(("queries.refused".to_owned(), get(&shell.queries_refused)));
    out.push(("connections.refused".to_owned(), get(&shell.connections_refused)));
    out.push(("host_info.asked".to_owned(), get(&shell.host_info_asked)));
    out.push(("host_info.failed".to_owned(), get(&shell.host_info_failed)));
    out
}

/// lim's command line.
#[derive(Clone, Debug, Parser)]
#[command(name = "lim", version, about = "LavaCore's load information manager")]
pub struct Args {
    /// Folder holding lsf.conf (default: $LSF_ENVDIR, else /etc).
    #[arg(short = 'd', long, value_name = "DIR")]
    pub envdir: Option<PathBuf>,
    /// This host's name in lsf.cluster (default: the kernel's host name).
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// Once serving, write `UDP_PORT TCP_PORT` to this file.
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
}

/// Runs lim with this process's arguments.
pub fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lim: {error:#}");
            ExitCode::FAILURE
        }
    }
}

struct Setup {
    lim: Lim,
    my_addr: SocketAddr,
    /// Every host's TCP query address (`None`: unresolved), ours included.
    tcp_addrs: Vec<Option<SocketAddr>>,
    host_meta: Vec<(String, String, bool)>,
    /// Where the metrics are served (`LAVA_METRICS_ADDR`, `LAVA_LIM_METRICS_PORT`; `None`: not).
    metrics: Option<SocketAddr>,
}

fn setup(args: &Args) -> anyhow::Result<(Setup, LogMask)> {
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
    let Some(me) = hosts.iter().position(|host| host.name.eq_ignore_ascii_case(&my_name)) else {
        bail!("host `{my_name}` is not in {}", base.cluster.path.display());
    };
    let interval = |key: &str, default: u64| -> anyhow::Result<u64> {
        match base.lsf.get(key) {
            None | Some("") => Ok(default),
            Some(text) => match text.parse::<u64>() {
                Ok(value) if value > 0 => Ok(value),
                _ => bail!("lsf.conf: {key}={text} is not a positive number of milliseconds"),
            },
        }
    };
    let host_configs: Vec<HostConfig> = hosts
        .iter()
        .map(|host| {
            let port = host.lim_udp_port(&base.lsf);
            let addr = match host.addr {
                Some(ip) => Some(SocketAddr::new(ip, port)),
                None => (host.name.as_str(), port).to_socket_addrs().ok().and_then(|mut addrs| addrs.next()),
            };
            HostConfig { name: host.name.clone(), addr }
        })
        .collect();
    let Some(my_addr) = host_configs[me].addr else {
        bail!("cannot resolve this host's address `{my_name}`")
    };
    let tcp_port = hosts[me].lim_tcp_port(&base.lsf);
    let candidates: Vec<u32> = base
        .master_candidates()
        .iter()
        .filter_map(|candidate| hosts.iter().position(|host| host.name == candidate.name))
        .map(|idx| idx as u32)
        .collect();
    if candidates.is_empty() {
        bail!("{} lists no server host to be master", base.cluster.path.display());
    }
    let tcp_addrs = hosts
        .iter()
        .zip(&host_configs)
        .map(|(host, config)| {
            config.addr.map(|addr| SocketAddr::new(addr.ip(), host.lim_tcp_port(&base.lsf)))
        })
        .collect();
    let initial_seqno = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u32);
    let mut thresholds = Thresholds::NONE;
    for (idx, index) in lava_conf::LOAD_INDICES.iter().enumerate() {
        thresholds.0[idx] = hosts[me].thresholds.get(*index).map(|value| *value as f32);
    }
    let config = Config {
        cluster: base.cluster_name.clone(),
        hosts: host_configs,
        candidates,
        me: me as u32,
        beacon_interval_ms: interval(
            "LAVA_LIM_BEACON_INTERVAL_MS",
            lava_lim_logic::BEACON_INTERVAL_MS_DEFAULT,
        )?,
        report_interval_ms: interval(
            "LAVA_LIM_REPORT_INTERVAL_MS",
            lava_lim_logic::REPORT_INTERVAL_MS_DEFAULT,
        )?,
        tcp_port,
        initial_seqno,
        thresholds,
    };
    if lava_lim_ll::encode_fixed::<{ wire::CLUSTER_FIELD_BYTES }>(&config.cluster).is_none()
        || config
            .hosts
            .iter()
            .any(|h| lava_lim_ll::encode_fixed::<{ wire::HOSTNAME_FIELD_BYTES }>(&h.name).is_none())
    {
        bail!("the cluster name must be 1..31 bytes and host names 1..63 bytes");
    }
    let host_meta = hosts
        .iter()
        .map(|h| (h.host_type.clone().unwrap_or_default(), h.model.clone().unwrap_or_default(), h.server))
        .collect();
    let metrics = base.lsf.metrics_listen(base.lsf.metrics_ports.lim);
    Ok((Setup { lim: Lim::new(config), my_addr, tcp_addrs, host_meta, metrics }, base.lsf.log_mask))
}

/// Loads the configuration and serves until killed.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (setup, mask) = setup(&args)?;
    lava_sd::journald::init(mask.level_name());
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("start tokio")?;
    let ready_file = args.ready_file.clone();
    runtime.block_on(serve(setup, ready_file, args))
}

/// What carrying out effects needs: the UDP socket, and how to ask hosts for their facts.
struct Io {
    udp: UdpSocket,
    tcp_addrs: Arc<Vec<Option<SocketAddr>>>,
    names: Arc<Vec<String>>,
    /// Host-info answers back to the main loop.
    answers: mpsc::UnboundedSender<(u32, Option<HostInfo>)>,
    /// Bounds the host-info questions in flight (a master of 10,000 hosts asks them all when
    /// it starts).
    fetch_slots: Arc<Semaphore>,
    /// The shell's counters.
    counters: Arc<ShellCounters>,
    /// This host's own facts, the answer to a `FetchHostInfo` of itself.
    own_info: HostInfo,
}

async fn serve(setup: Setup, ready_file: Option<PathBuf>, args: Args) -> anyhow::Result<()> {
    let Setup { lim, my_addr, tcp_addrs, host_meta, metrics } = setup;
    let me = lim.config().me as usize;
    let udp = UdpSocket::bind(my_addr).await.with_context(|| format!("bind UDP {my_addr}"))?;
    if let Err(error) = rustix::net::sockopt::set_socket_recv_buffer_size(&udp, RECEIVE_BUFFER_BYTES) {
        tracing::warn!(%error, "cannot enlarge the UDP receive buffer");
    }
    // Every lim answers host-info questions on its TCP port; the master also answers the
    // commands' queries there, so for the master the port is a must.
    let listener = match tcp_addrs[me] {
        None => None,
        Some(addr) => match TcpListener::bind(addr).await {
            Ok(listener) => Some(listener),
            Err(error) if lim.config().candidates.contains(&(me as u32)) => {
                return Err(error).with_context(|| format!("bind TCP {addr}"));
            }
            Err(error) => {
                tracing::warn!(%addr, %error, "cannot bind the TCP query port: the master will not learn this host's CPUs and memory");
                None
            }
        },
    };
    let tcp_port = listener.as_ref().and_then(|l| l.local_addr().ok()).map_or(0, |a| a.port());
    let own_info = load::host_info();
    let names: Vec<String> = lim.config().hosts.iter().map(|host| host.name.clone()).collect();
    if let Some(path) = &ready_file {
        startup::write_atomically(path, &format!("{} {tcp_port}\n", my_addr.port()))?;
    }
    tracing::info!(%my_addr, tcp_port, master = lim.is_master(), "lim ready");
    // systemd (Type=notify): READY now, WATCHDOG from each load sample (every second).
    let mut readiness = Readiness::from_env();
    readiness.ready(&format!("serving on {my_addr}, TCP port {tcp_port}"));
    // SIGTERM and SIGINT keep their default action: lim has nothing to finish.
    let mut signals = Signals::hangup_only().context("install the SIGHUP handler")?;
    let shared = Arc::new(Mutex::new(lim));
    let counters = Arc::new(ShellCounters::default());
    let origin = Instant::now();
    if let Some(addr) = metrics {
        let (shared, counters) = (Arc::clone(&shared), Arc::clone(&counters));
        lava_shell::metrics::start(
            addr,
            lava_shell::metrics::FromFn(move || {
                metrics::metrics(&shared.lock().unwrap_or_else(PoisonError::into_inner), &counters)
            }),
        )?;
    }
    let (control, mut control_rx) = mpsc::unbounded_channel::<Control>();
    if let Some(listener) = listener {
        let host_ips = tcp_addrs.iter().flatten().map(SocketAddr::ip).collect();
        let context = Arc::new(QueryContext {
            args,
            host_ips,
            meta: host_meta,
            name: names[me].clone(),
            own_info,
            origin,
            counters: Arc::clone(&counters),
            own_ip: my_addr.ip(),
            control,
        });
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let gate = Gate::new(QUERY_CONNECTIONS);
            let mut backoff = AcceptBackoff::default();
            loop {
                match listener.accept().await {
                    Ok((stream, peer)) => {
                        if let Some(line) = backoff.succeeded() {
                            tracing::info!("{line}");
                        }
                        match gate.admit(Source::Ip(peer.ip())) {
                            Ok(pass) => {
                                let (shared, context) = (Arc::clone(&shared), Arc::clone(&context));
                                tokio::spawn(answer_queries(stream, pass, shared, context));
                            }
                            Err(refusal) => {
                                bump(&context.counters.connections_refused);
                                tracing::debug!(%peer, "query connection refused: {refusal}");
                            }
                        }
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
        });
    }
    let (answers, mut answers_rx) = mpsc::unbounded_channel();
    let io = Io {
        udp,
        tcp_addrs: Arc::new(tcp_addrs),
        names: Arc::new(names),
        answers,
        fetch_slots: Arc::new(Semaphore::new(HOST_INFO_FETCHES_MAX)),
        counters,
        own_info,
    };
    let mut sampler = load::Sampler::default();
    let mut last_sample = Instant::now();
    let mut next_sample_ms = 0u64;
    let mut buffer = vec![0u8; wire::DATAGRAM_BYTES_MAX + 1];
    loop {
        let now_ms = origin.elapsed().as_millis() as u64;
        let deadline_ms = {
            let mut lim = shared.lock().unwrap_or_else(PoisonError::into_inner);
            if now_ms >= next_sample_ms {
                let elapsed = last_sample.elapsed();
                last_sample = Instant::now();
                let effects = lim.step(now_ms, Input::Sampled(sampler.sample(elapsed)));
                carry_out(&io, &lim, effects);
                next_sample_ms = now_ms + SAMPLE_INTERVAL_MS;
                readiness.pet();
            }
            let effects = lim.step(now_ms, Input::Tick);
            carry_out(&io, &lim, effects);
            lim.next_deadline_ms().min(next_sample_ms)
        };
        let sleep = Duration::from_millis(deadline_ms.saturating_sub(now_ms));
        tokio::select! {
            ready = io.udp.readable() => {
                ready.context("wait for datagrams")?;
                let now_ms = origin.elapsed().as_millis() as u64;
                let mut lim = shared.lock().unwrap_or_else(PoisonError::into_inner);
                receive_batch(&io, &mut lim, &mut buffer, now_ms);
            }
            Some((host, info)) = answers_rx.recv() => {
                let now_ms = origin.elapsed().as_millis() as u64;
                let mut lim = shared.lock().unwrap_or_else(PoisonError::into_inner);
                let effects = lim.step(now_ms, Input::HostInfo { host, info });
                carry_out(&io, &lim, effects);
            }
            Some(Control { input, answer }) = control_rx.recv() => {
                let now_ms = origin.elapsed().as_millis() as u64;
                let mut lim = shared.lock().unwrap_or_else(PoisonError::into_inner);
                let effects = lim.step(now_ms, input);
                let refused = effects.iter().find_map(|effect| match effect {
                    Effect::LockRefused(refusal) => Some(refusal.text().to_owned()),
                    _ => None,
                });
                carry_out(&io, &lim, effects);
                let _asker_gone = answer.send(match refused {
                    Some(text) => Err(text),
                    None => Ok(lim.status0()),
                });
            }
            () = tokio::time::sleep(sleep) => {}
            signal = signals.next() => match signal {
                ShellSignal::Reload => {
                    tracing::info!("SIGHUP: nothing to reload (lim reads its configuration at start; restart it)");
                }
                ShellSignal::Stop(_) => unreachable!("lim leaves SIGTERM and SIGINT their default action"),
            },
        }
    }
}

/// Asks the lim at `addr` for its host's facts (`LIM_TCP_HOST_INFO`); `None` if it cannot be
/// reached, does not answer within [`HOST_INFO_TIMEOUT_MS`], answers badly or names another
/// host.
async fn fetch_host_info(addr: SocketAddr, name: &str) -> Result<HostInfo, String> {
    let ask = async {
        let mut stream = TcpStream::connect(addr).await.map_err(|error| format!("connect: {error}"))?;
        let mut request = Vec::new();
        FrameHeader {
            sequence: 1,
            operation: wire::LIM_TCP_HOST_INFO,
            version: wire::LIM_VERSION,
            length: 0,
            status: 0,
        }
        .write(&mut request);
        stream.write_all(&request).await.map_err(|error| format!("send: {error}"))?;
        let mut head = [0u8; lava_xdr::frame::HEADER_BYTES];
        stream.read_exact(&mut head).await.map_err(|error| format!("receive: {error}"))?;
        let header = FrameHeader::parse(&head).map_err(|error| error.to_string())?;
        if header.status != wire::TCP_STATUS_OK || header.length > QUERY_BODY_BYTES_MAX {
            return Err(format!("refused (status {}, {} bytes)", header.status, header.length));
        }
        let mut body = vec![0u8; header.length as usize];
        stream.read_exact(&mut body).await.map_err(|error| format!("receive: {error}"))?;
        let limits = lava_xdr::Limits { input_bytes_max: body.len().max(1), ..lava_xdr::Limits::default() };
        let reply: wire::HostInfoReply =
            lava_xdr::from_bytes(&body, &limits).map_err(|error| format!("bad reply: {error}"))?;
        if !reply.name.eq_ignore_ascii_case(name) {
            return Err(format!("the lim there is `{}`", reply.name));
        }
        Ok(HostInfo { ncpus: reply.ncpus, maxmem_mb: reply.maxmem_mb, maxswp_mb: reply.maxswp_mb })
    };
    match tokio::time::timeout(Duration::from_millis(HOST_INFO_TIMEOUT_MS), ask).await {
        Ok(result) => result,
        Err(_) => Err(format!("no answer within {HOST_INFO_TIMEOUT_MS} ms")),
    }
}

/// Receives and feeds every datagram waiting on the socket, at most [`RECEIVE_BATCH_MAX`]
/// (so that timers still run under a flood), all stamped `now_ms`.
fn receive_batch(io: &Io, lim: &mut Lim, buffer: &mut [u8], now_ms: u64) {
    for _ in 0..RECEIVE_BATCH_MAX {
        let (n_bytes, from) = match io.udp.try_recv_from(buffer) {
            Ok(received) => received,
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(error) => {
                // E.g. an ICMP error queued on the socket: nothing to read, keep serving.
                tracing::debug!(%error, "receive failed");
                return;
            }
        };
        let input = match wire::decode_datagram(&buffer[..n_bytes]) {
            Err(error) => {
                tracing::info!(%from, %error, "datagram dropped");
                Input::Rejected(decode_reason(&error))
            }
            Ok(datagram) => {
                bump(match datagram.message {
                    wire::Message::Beacon(_) => &io.counters.received_beacon,
                    wire::Message::LoadReport(_) => &io.counters.received_load_report,
                });
                match lava_lim_ll::Message::from_wire(&datagram.message, lim.context()) {
                    Ok(message) => Input::Datagram { from, message },
                    Err(error) => {
                        tracing::info!(%from, %error, "datagram dropped");
                        Input::Rejected(match error {
                            lava_lim_ll::LlError::WrongCluster { .. } => DropReason::WrongCluster,
                            _ => DropReason::Malformed,
                        })
                    }
                }
            }
        };
        let effects = lim.step(now_ms, input);
        if !effects.is_empty() {
            carry_out(io, lim, effects);
        }
    }
}

fn decode_reason(error: &wire::DecodeError) -> DropReason {
    match error {
        wire::DecodeError::Short { .. } => DropReason::Short,
        wire::DecodeError::Oversized { .. } => DropReason::Oversized,
        wire::DecodeError::WrongVersion { .. } => DropReason::WrongVersion,
        wire::DecodeError::LengthMismatch { .. } => DropReason::LengthMismatch,
        wire::DecodeError::UnknownOpcode { .. } => DropReason::UnknownOpcode,
        wire::DecodeError::Malformed { .. } => DropReason::Malformed,
    }
}

/// The bytes of an outgoing datagram; `None` if a name does not fit its field (lim refuses
/// such a configuration at start-up, so this does not happen).
fn encode(sequence: u32, message: Outgoing) -> Option<Vec<u8>> {
    let message = match message {
        Outgoing::Beacon(beacon) => wire::Message::Beacon(beacon.to_wire()?),
        Outgoing::LoadReport(report) => wire::Message::LoadReport(report.to_wire()),
    };
    Some(wire::encode_datagram(sequence, &message))
}

/// Sends one datagram. UDP: a full socket buffer or an unreachable peer loses it, which the
/// protocol tolerates (3 missed intervals).
fn send(io: &Io, bytes: &[u8], to: SocketAddr, sent: &AtomicU64) {
    match io.udp.try_send_to(bytes, to) {
        Ok(_) => bump(sent),
        Err(error) => {
            bump(&io.counters.send_failed);
            tracing::debug!(%to, %error, "send failed");
        }
    }
}

/// The counter of sent datagrams of this kind.
fn sent_counter<'a>(io: &'a Io, message: &Outgoing) -> &'a AtomicU64 {
    match message {
        Outgoing::Beacon(_) => &io.counters.sent_beacon,
        Outgoing::LoadReport(_) => &io.counters.sent_load_report,
    }
}

fn carry_out(io: &Io, lim: &Lim, effects: Vec<Effect>) {
    for effect in effects {
        match effect {
            Effect::Send { to, sequence, message } => {
                let sent = sent_counter(io, &message);
                if let Some(bytes) = encode(sequence, message) {
                    send(io, &bytes, to, sent);
                }
            }
            Effect::SendToAll { sequence, message } => {
                let sent = sent_counter(io, &message);
                let Some(bytes) = encode(sequence, message) else { continue };
                let me = lim.config().me as usize;
                for (idx, host) in lim.config().hosts.iter().enumerate() {
                    if let Some(to) = host.addr.filter(|_| idx != me) {
                        send(io, &bytes, to, sent);
                    }
                }
            }
            Effect::Dropped(reason) => tracing::debug!(reason = reason.name(), "dropped"),
            Effect::HostUnavailable(idx) => {
                tracing::warn!(host = %lim.config().hosts[idx as usize].name, "host unavailable")
            }
            Effect::HostAvailable(idx) => {
                tracing::info!(host = %lim.config().hosts[idx as usize].name, "host available")
            }
            Effect::FetchHostInfo(host) if host == lim.config().me => {
                // Our own facts, fed like any host's answer.
                let _main_loop_alive = io.answers.send((host, Some(io.own_info)));
            }
            Effect::FetchHostInfo(host) => {
                let (slots, answers) = (Arc::clone(&io.fetch_slots), io.answers.clone());
                let (addrs, names) = (Arc::clone(&io.tcp_addrs), Arc::clone(&io.names));
                let counters = Arc::clone(&io.counters);
                bump(&counters.host_info_asked);
                tokio::spawn(async move {
                    let name = &names[host as usize];
                    let info = match addrs[host as usize] {
                        None => Err("no address".to_owned()),
                        Some(addr) => {
                            let _slot = slots.acquire().await;
                            fetch_host_info(addr, name).await
                        }
                    };
                    let info = match info {
                        Ok(info) => Some(info),
                        Err(error) => {
                            bump(&counters.host_info_failed);
                            tracing::debug!(host = %name, %error, "cannot learn the host's CPUs and memory");
                            None
                        }
                    };
                    let _main_loop_gone = answers.send((host, info));
                });
            }
            Effect::MasterFound { master, tcp_port } => tracing::info!(%master, tcp_port, "master found"),
            Effect::MasterLost => tracing::warn!("master lost: 3 beacons missed, reporting stops"),
            Effect::BecameMaster => tracing::warn!("this lim is the master now (LSF_MASTER_LIST)"),
            Effect::SteppedDown { to } => tracing::warn!(
                master = %lim.config().hosts[to as usize].name,
                "a candidate before this one in LSF_MASTER_LIST beacons: it is the master"
            ),
            Effect::StatusChanged { status0 } => tracing::info!(
                status0 = format_args!("{status0:#010x}"),
                locked = status0 & wire::LIM_LOCKEDU != 0,
                busy = status0 & wire::LIM_BUSY != 0,
                "this host's status changed"
            ),
            Effect::HostStatus { host, status0 } => tracing::info!(
                host = %lim.config().hosts[host as usize].name,
                status0 = format_args!("{status0:#010x}"),
                locked = status0 & wire::LIM_LOCKED_MASK != 0,
                busy = status0 & wire::LIM_BUSY != 0,
                "host status changed"
            ),
            Effect::LockRefused(refusal) => tracing::info!("lock request refused: {}", refusal.text()),
        }
    }
}

/// A lock or unlock for the main loop, and where its answer goes: the refusal's text, or the
/// host's status word after it.
struct Control {
    input: Input,
    answer: oneshot::Sender<Result<u32, String>>,
}

/// What the query answers need besides the machine.
struct QueryContext {
    /// The command line, for `lsadmin reconfig` (check the configuration, restart).
    args: Args,
    /// The addresses of the cluster's hosts (who may ask for a reconfiguration).
    host_ips: Vec<std::net::IpAddr>,
    /// Per host: type, model, server.
    meta: Vec<(String, String, bool)>,
    /// Our host's name.
    name: String,
    /// Our host's facts.
    own_info: HostInfo,
    /// The machine's clock origin.
    origin: Instant,
    /// The shell's counters.
    counters: Arc<ShellCounters>,
    /// This lim's own address (a lock request must come from this host).
    own_ip: std::net::IpAddr,
    /// Lock and unlock requests to the main loop.
    control: mpsc::UnboundedSender<Control>,
}

/// Answers the queries of one connection. Each whole query must arrive within its deadline
/// (the gate's few seconds for the first, [`QUERY_IDLE_TIMEOUT_MS`] for each later one),
/// however its bytes trickle in; a connection the gate evicts before its first query closes.
async fn answer_queries(
    mut stream: TcpStream,
    mut pass: Pass,
    shared: Arc<Mutex<Lim>>,
    context: Arc<QueryContext>,
) {
    let limits = FrameLimits { body_bytes_max: QUERY_BODY_BYTES_MAX };
    let mut buffer = BytesMut::with_capacity(256);
    let mut deadline = tokio::time::Instant::now() + pass.auth_deadline();
    loop {
        let frame = match decode_frame(&mut buffer, &limits) {
            Ok(Some(frame)) => {
                // A whole query: the connection speaks the protocol and keeps its place.
                pass.authenticated();
                deadline = tokio::time::Instant::now() + Duration::from_millis(QUERY_IDLE_TIMEOUT_MS);
                frame
            }
            Ok(None) => {
                let read = tokio::select! {
                    read = tokio::time::timeout_at(deadline, stream.read_buf(&mut buffer)) => read,
                    () = pass.evicted() => return,
                };
                match read {
                    Ok(Ok(n)) if n > 0 => continue,
                    _ => return,
                }
            }
            Err(error) => {
                tracing::info!(%error, "query connection dropped");
                return;
            }
        };
        if frame.header.operation == wire::LIM_TCP_RECONFIG {
            let peer = stream.peer_addr().ok();
            let verdict = reconfig_check(peer, &context);
            let answer =
                wire::ReconfigReply { applied: verdict.is_ok(), message: verdict.err().unwrap_or_default() };
            let body = lava_xdr::to_bytes(&answer).unwrap_or_default();
            let header = FrameHeader { status: wire::TCP_STATUS_OK, length: 0, ..frame.header };
            let mut out = BytesMut::new();
            let big = FrameLimits { body_bytes_max: u32::MAX };
            let sent =
                encode_frame(header, &body, &big, &mut out).is_ok() && stream.write_all(&out).await.is_ok();
            if answer.applied {
                let _flushed = stream.shutdown().await;
                restart_in_place(sent);
            }
            tracing::warn!(?peer, "lsadmin reconfig refused: {}", answer.message);
            return;
        }
        if frame.header.operation == wire::LIM_TCP_LOCK {
            let answer = lock_request(stream.peer_addr().ok(), &frame.body, &context).await;
            if !answer.done {
                tracing::info!("lsadmin limlock/limunlock refused: {}", answer.message);
            }
            let body = lava_xdr::to_bytes(&answer).unwrap_or_default();
            let header = FrameHeader { status: wire::TCP_STATUS_OK, length: 0, ..frame.header };
            let mut out = BytesMut::new();
            let big = FrameLimits { body_bytes_max: u32::MAX };
            if encode_frame(header, &body, &big, &mut out).is_err() || stream.write_all(&out).await.is_err() {
                return;
            }
            continue;
        }
        let (status, body) = {
            let lim = shared.lock().unwrap_or_else(PoisonError::into_inner);
            let now_ms = context.origin.elapsed().as_millis() as u64;
            reply(&lim, &context, frame.header, now_ms)
        };
        let counters = &context.counters;
        match QUERY_KINDS.iter().position(|(operation, _)| *operation == frame.header.operation) {
            Some(kind) if status == wire::TCP_STATUS_OK => bump(&counters.queries[kind]),
            _ => bump(&counters.queries_refused),
        }
        let header = FrameHeader { status, length: 0, ..frame.header };
        let mut out = BytesMut::new();
        let big = FrameLimits { body_bytes_max: u32::MAX };
        if encode_frame(header, &body, &big, &mut out).is_err() || stream.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// `lsadmin limlock` / `limunlock` (`LIM_TCP_LOCK`): only root (a privileged source port) on
/// this host itself may lock it, as LSF's `limlock` locks only the local host; the main loop
/// steps the request and answers with the refusal or the new status word.
async fn lock_request(peer: Option<SocketAddr>, body: &[u8], context: &QueryContext) -> wire::LockReply {
    let refuse = |message: String| wire::LockReply { done: false, message, status0: 0 };
    let Some(peer) = peer else { return refuse("no peer address".to_owned()) };
    if peer.port() >= 1024 {
        return refuse("Permission denied: only root may lock or unlock a host's LIM".to_owned());
    }
    if peer.ip() != context.own_ip && !peer.ip().is_loopback() {
        return refuse(format!(
            "Permission denied: {} is not this host; limlock locks the local host",
            peer.ip()
        ));
    }
    let limits = lava_xdr::Limits { input_bytes_max: body.len().max(1), ..lava_xdr::Limits::default() };
    let request: wire::LockRequest = match lava_xdr::from_bytes(body, &limits) {
        Ok(request) => request,
        Err(error) => return refuse(format!("bad request: {error}")),
    };
    let input = if request.lock {
        let duration_ms = (request.duration_s > 0).then(|| u64::from(request.duration_s) * 1_000);
        Input::Lock { duration_ms }
    } else {
        Input::Unlock
    };
    let (answer, answered) = oneshot::channel();
    if context.control.send(Control { input, answer }).is_err() {
        return refuse("lim is stopping".to_owned());
    }
    match answered.await {
        Ok(Ok(status0)) => wire::LockReply { done: true, message: String::new(), status0 },
        Ok(Err(message)) => refuse(message),
        Err(_) => refuse("lim is stopping".to_owned()),
    }
}

/// Whether `peer` may have this lim reconfigured, and whether the configuration loads:
/// only root on a host of the cluster may ask (a privileged source port from a host
/// address, as LSF's own daemons once checked), and a broken file keeps this lim running.
fn reconfig_check(peer: Option<SocketAddr>, context: &QueryContext) -> Result<(), String> {
    let Some(peer) = peer else { return Err("no peer address".to_owned()) };
    if peer.port() >= 1024 {
        return Err("permission denied: lsadmin reconfig must be run by root".to_owned());
    }
    if !context.host_ips.contains(&peer.ip()) {
        return Err(format!("permission denied: {} is not a host of the cluster", peer.ip()));
    }
    setup(&context.args).map(|_| ()).map_err(|error| format!("{error:#}"))
}

/// `lsadmin reconfig`: this lim execs itself with the same command line, so that it reads
/// the configuration from scratch (LSF's lsadmin reconfig restarts the lims); under systemd
/// it says RELOADING first and the new image says READY. Returns only if exec failed.
fn restart_in_place(answered: bool) {
    use std::os::unix::process::CommandExt;
    tracing::info!(answered, "lsadmin reconfig: restarting to read the configuration");
    // Not the loop's Readiness (this runs in a query task): the same notifications, from the
    // environment again.
    Readiness::from_env().reloading("lsadmin reconfig: restarting");
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => {
            tracing::error!(%error, "cannot find this program to restart it");
            return;
        }
    };
    let error = std::process::Command::new(exe).args(std::env::args_os().skip(1)).exec();
    tracing::error!(%error, "cannot restart lim");
}

fn reply(lim: &Lim, context: &QueryContext, header: FrameHeader, now_ms: u64) -> (u32, Vec<u8>) {
    if header.version != wire::LIM_VERSION {
        return (wire::TCP_STATUS_REFUSED, Vec::new());
    }
    if header.operation == wire::LIM_TCP_HOST_INFO {
        let info = context.own_info;
        let answer = wire::HostInfoReply {
            name: context.name.clone(),
            ncpus: info.ncpus,
            maxmem_mb: info.maxmem_mb,
            maxswp_mb: info.maxswp_mb,
        };
        return match lava_xdr::to_bytes(&answer) {
            Ok(body) => (wire::TCP_STATUS_OK, body),
            Err(_) => (wire::TCP_STATUS_REFUSED, Vec::new()),
        };
    }
    if header.operation == wire::LIM_TCP_ADMIN_STATUS {
        let (mut hosts_ok, mut hosts_unavail) = (0, 0);
        if lim.is_master() {
            for host in lim.hosts() {
                match host.status {
                    HostStatus::Ok => hosts_ok += 1,
                    HostStatus::Unavailable => hosts_unavail += 1,
                }
            }
        }
        let answer = wire::AdminStatusReply {
            host: context.name.clone(),
            master: lim.is_master(),
            master_name: lim.master_name().to_owned(),
            master_heard: lim.is_master() || lim.master_valid(),
            hosts_ok,
            hosts_unavail,
            counters: admin_counters(lim, &context.counters),
        };
        return match lava_xdr::to_bytes(&answer) {
            Ok(body) => (wire::TCP_STATUS_OK, body),
            Err(_) => (wire::TCP_STATUS_REFUSED, Vec::new()),
        };
    }
    if !lim.is_master() {
        return (wire::TCP_STATUS_REFUSED, Vec::new());
    }
    let meta = &context.meta;
    let encoded = match header.operation {
        wire::LIM_TCP_CLUSTER_INFO => lava_xdr::to_bytes(&wire::ClusterInfoReply {
            cluster: lim.cluster_name().to_owned(),
            master: lim.master_name().to_owned(),
        }),
        wire::LIM_TCP_HOST_LOAD => {
            let hosts = lim
                .hosts()
                .iter()
                .zip(&lim.config().hosts)
                .zip(meta)
                .map(|((state, config), (host_type, model, server))| wire::HostLoad {
                    name: config.name.clone(),
                    host_type: host_type.clone(),
                    model: model.clone(),
                    server: *server,
                    status: if state.status == HostStatus::Ok {
                        wire::HOST_STATUS_OK
                    } else {
                        wire::HOST_STATUS_UNAVAIL
                    },
                    status0: state.status_word(),
                    nidx: u32::from(state.load.n_valid),
                    li: state.load.values,
                    age_ms: state.last_report_ms.map_or(u64::MAX, |at| now_ms.saturating_sub(at)),
                })
                .collect();
            lava_xdr::to_bytes(&wire::HostLoadReply { hosts })
        }
        wire::LIM_TCP_HOSTS_INFO => {
            let hosts = lim
                .hosts()
                .iter()
                .zip(&lim.config().hosts)
                .zip(meta)
                .map(|((state, config), (host_type, model, server))| {
                    let info = state.info.unwrap_or(HostInfo { ncpus: 0, maxmem_mb: 0, maxswp_mb: 0 });
                    wire::HostStatic {
                        name: config.name.clone(),
                        host_type: host_type.clone(),
                        model: model.clone(),
                        server: *server,
                        ncpus: info.ncpus,
                        maxmem_mb: info.maxmem_mb,
                        maxswp_mb: info.maxswp_mb,
                    }
                })
                .collect();
            lava_xdr::to_bytes(&wire::HostsInfoReply { hosts })
        }
        wire::LIM_TCP_STATUS => {
            let mut counters: Vec<(String, u64)> =
                lim.drop_counts().into_iter().map(|(reason, n)| (reason.name().to_owned(), n)).collect();
            counters.push(("accepted".to_owned(), lim.n_accepted()));
            lava_xdr::to_bytes(&wire::StatusReply { master: lim.is_master(), counters })
        }
        _ => return (wire::TCP_STATUS_REFUSED, Vec::new()),
    };
    match encoded {
        Ok(body) => (wire::TCP_STATUS_OK, body),
        Err(_) => (wire::TCP_STATUS_REFUSED, Vec::new()),
    }
}
