//! lava-lim: the `lim` daemon, the I/O shell around lava-lim-logic
//! (../shared/specs/lim-protocol.md).
//!
//! `lim [-d|--envdir DIR] [--host NAME] [--ready-file PATH]`
//!
//! # What it does
//! - Loads lsf.conf and lsf.cluster.NAME; finds its own host (`--host`, else the kernel's host
//!   name) and every host's LIM address: `LAVA_ADDR` (else the name resolved) with the
//!   per-host `LAVA_LIM_PORT`, else `LSF_LIM_PORT`. The first host is the master.
//! - Binds UDP on its own address; the master also binds the TCP query port (per-host
//!   `LAVA_LIM_PORT`, else `LAVA_LIM_TCP_PORT`) and announces it in beacons.
//! - One closed loop: datagrams are decoded (lava-lim-wire), validated (lava-lim-ll) and fed
//!   to the logic with their source address; refused ones are fed as
//!   `Input::Rejected(reason)` and logged; the load is sampled from /proc every second
//!   ([`load`]); `Input::Tick` is fed at the logic's deadline; effects are carried out in
//!   order (send datagrams, log).
//! - TCP queries (one frame in, one frame out, per connection, any number of requests):
//!   `LIM_TCP_CLUSTER_INFO`, `LIM_TCP_HOST_LOAD`, `LIM_TCP_STATUS` (drop counters).
//!   A slave refuses them with status `TCP_STATUS_REFUSED`.
//!
//! Our own lsf.conf keys: `LAVA_LIM_BEACON_INTERVAL_MS` (default 4000) and
//! `LAVA_LIM_REPORT_INTERVAL_MS` (default 5000).
//!
//! `--ready-file PATH`: once both sockets are bound, writes `UDP_PORT TCP_PORT\n` there
//! (temporary file then rename; TCP_PORT is 0 on a slave).

#![deny(missing_docs)]

pub mod load;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use bytes::BytesMut;
use clap::Parser;
use lava_conf::{BaseConfig, LogMask};
use lava_lim_logic::{Config, DropReason, Effect, HostConfig, HostStatus, Input, Lim, Outgoing};
use lava_lim_wire as wire;
use lava_xdr::frame::{FrameHeader, FrameLimits, decode_frame, encode_frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// Interval between two load samples.
pub const SAMPLE_INTERVAL_MS: u64 = 1_000;
/// Longest a TCP query connection may stay idle.
pub const QUERY_IDLE_TIMEOUT_MS: u64 = 10_000;
/// Largest TCP query frame body accepted (requests have empty bodies).
pub const QUERY_BODY_BYTES_MAX: u32 = 4096;

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
    tcp_addr: Option<SocketAddr>,
    host_meta: Vec<(String, String, bool)>,
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
    let tcp_port = hosts[0].lim_tcp_port(&base.lsf);
    let tcp_addr = (me == 0).then(|| SocketAddr::new(my_addr.ip(), tcp_port));
    let initial_seqno = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u32);
    let config = Config {
        cluster: base.cluster_name.clone(),
        hosts: host_configs,
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
    Ok((Setup { lim: Lim::new(config), my_addr, tcp_addr, host_meta }, base.lsf.log_mask))
}

/// Loads the configuration and serves until killed.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (setup, mask) = setup(&args)?;
    let level = mask.level_name();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    // The log goes to standard error, like the other daemons' (standard output is not a log).
    let _installed = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("start tokio")?;
    runtime.block_on(serve(setup, args.ready_file))
}

async fn serve(setup: Setup, ready_file: Option<PathBuf>) -> anyhow::Result<()> {
    let Setup { lim, my_addr, tcp_addr, host_meta } = setup;
    let udp = UdpSocket::bind(my_addr).await.with_context(|| format!("bind UDP {my_addr}"))?;
    let listener = match tcp_addr {
        Some(addr) => Some(TcpListener::bind(addr).await.with_context(|| format!("bind TCP {addr}"))?),
        None => None,
    };
    let tcp_port = listener.as_ref().and_then(|l| l.local_addr().ok()).map_or(0, |a| a.port());
    if let Some(path) = &ready_file {
        write_atomically(path, &format!("{} {tcp_port}\n", my_addr.port()))?;
    }
    tracing::info!(%my_addr, tcp_port, master = lim.is_master(), "lim ready");
    let shared = Arc::new(Mutex::new(lim));
    let origin = Instant::now();
    if let Some(listener) = listener {
        let shared = Arc::clone(&shared);
        let meta = Arc::new(host_meta);
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        tokio::spawn(answer_queries(stream, Arc::clone(&shared), Arc::clone(&meta), origin));
                    }
                    Err(error) => tracing::warn!(%error, "accept failed"),
                }
            }
        });
    }
    let mut sampler = load::Sampler::default();
    let mut last_sample = Instant::now();
    let mut next_sample_ms = 0u64;
    let mut buffer = vec![0u8; wire::DATAGRAM_BYTES_MAX + 1];
    loop {
        let now_ms = origin.elapsed().as_millis() as u64;
        let mut inputs = Vec::new();
        if now_ms >= next_sample_ms {
            let elapsed = last_sample.elapsed();
            last_sample = Instant::now();
            inputs.push(Input::Sampled(sampler.sample(elapsed)));
            next_sample_ms = now_ms + SAMPLE_INTERVAL_MS;
        }
        inputs.push(Input::Tick);
        let deadline_ms = {
            let mut lim = shared.lock().unwrap_or_else(PoisonError::into_inner);
            for input in inputs {
                let effects = lim.step(now_ms, input);
                carry_out(&udp, &lim, effects);
            }
            lim.next_deadline_ms().min(next_sample_ms)
        };
        let sleep = Duration::from_millis(deadline_ms.saturating_sub(now_ms));
        tokio::select! {
            received = udp.recv_from(&mut buffer) => {
                let (n_bytes, from) = received.context("receive a datagram")?;
                let now_ms = origin.elapsed().as_millis() as u64;
                let mut lim = shared.lock().unwrap_or_else(PoisonError::into_inner);
                let input = match wire::decode_datagram(&buffer[..n_bytes]) {
                    Err(error) => {
                        tracing::info!(%from, %error, "datagram dropped");
                        Input::Rejected(decode_reason(&error))
                    }
                    Ok(datagram) => match lava_lim_ll::Message::from_wire(&datagram.message, lim.context()) {
                        Ok(message) => Input::Datagram { from, message },
                        Err(error) => {
                            tracing::info!(%from, %error, "datagram dropped");
                            Input::Rejected(match error {
                                lava_lim_ll::LlError::WrongCluster { .. } => DropReason::WrongCluster,
                                _ => DropReason::Malformed,
                            })
                        }
                    },
                };
                let effects = lim.step(now_ms, input);
                carry_out(&udp, &lim, effects);
            }
            () = tokio::time::sleep(sleep) => {}
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

fn carry_out(udp: &UdpSocket, lim: &Lim, effects: Vec<Effect>) {
    for effect in effects {
        match effect {
            Effect::Send { to, sequence, message } => {
                let message = match message {
                    Outgoing::Beacon(beacon) => match beacon.to_wire() {
                        Some(beacon) => wire::Message::Beacon(beacon),
                        None => continue, // names were checked at start-up
                    },
                    Outgoing::LoadReport(report) => wire::Message::LoadReport(report.to_wire()),
                };
                // UDP: a full socket buffer or an unreachable peer loses this datagram,
                // which the protocol tolerates (3 missed intervals).
                if let Err(error) = udp.try_send_to(&wire::encode_datagram(sequence, &message), to) {
                    tracing::debug!(%to, %error, "send failed");
                }
            }
            Effect::Dropped(reason) => tracing::debug!(reason = reason.name(), "dropped"),
            Effect::HostUnavailable(idx) => {
                tracing::warn!(host = %lim.config().hosts[idx as usize].name, "host unavailable")
            }
            Effect::HostAvailable(idx) => {
                tracing::info!(host = %lim.config().hosts[idx as usize].name, "host available")
            }
            Effect::MasterFound { master, tcp_port } => tracing::info!(%master, tcp_port, "master found"),
            Effect::MasterLost => tracing::warn!("master lost: 3 beacons missed, reporting stops"),
        }
    }
}

async fn answer_queries(
    mut stream: TcpStream,
    shared: Arc<Mutex<Lim>>,
    meta: Arc<Vec<(String, String, bool)>>,
    origin: Instant,
) {
    let limits = FrameLimits { body_bytes_max: QUERY_BODY_BYTES_MAX };
    let mut buffer = BytesMut::with_capacity(256);
    loop {
        let frame = match decode_frame(&mut buffer, &limits) {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                let read = tokio::time::timeout(
                    Duration::from_millis(QUERY_IDLE_TIMEOUT_MS),
                    stream.read_buf(&mut buffer),
                )
                .await;
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
        let (status, body) = {
            let lim = shared.lock().unwrap_or_else(PoisonError::into_inner);
            let now_ms = origin.elapsed().as_millis() as u64;
            reply(&lim, &meta, frame.header, now_ms)
        };
        let header = FrameHeader { status, length: 0, ..frame.header };
        let mut out = BytesMut::new();
        let big = FrameLimits { body_bytes_max: u32::MAX };
        if encode_frame(header, &body, &big, &mut out).is_err() || stream.write_all(&out).await.is_err() {
            return;
        }
    }
}

fn reply(lim: &Lim, meta: &[(String, String, bool)], header: FrameHeader, now_ms: u64) -> (u32, Vec<u8>) {
    if header.version != wire::LIM_VERSION || !lim.is_master() {
        return (wire::TCP_STATUS_REFUSED, Vec::new());
    }
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
                    status0: state.status0,
                    nidx: u32::from(state.load.n_valid),
                    li: state.load.values,
                    age_ms: state.last_report_ms.map_or(u64::MAX, |at| now_ms.saturating_sub(at)),
                })
                .collect();
            lava_xdr::to_bytes(&wire::HostLoadReply { hosts })
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

fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("rename to {}", path.display()))?;
    Ok(())
}
