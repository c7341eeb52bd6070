//! The channel to mbatchd: one TCP connection at a time, every frame sealed with the
//! cluster key (lava-net [`AuthConn`]), re-established with backoff forever.
//!
//! On each connection sbatchd first sends SBD_REGISTER (host name, CPUs, pid) and waits for
//! SBD_REGISTER_ACK; only then does it report [`LinkEvent::Connected`], and it reports
//! [`LinkEvent::Disconnected`] when the connection ends for any reason. Reading and writing
//! run side by side on the two halves of the socket, so a large outgoing burst never stops
//! incoming ACKs. Frames are decoded (wire) and validated (ll) here; a frame that fails
//! authentication, has another version, an unexpected operation or a body that does not
//! decode is logged and costs the connection (the next one starts after a backoff delay).
//! While no connection is up, frames handed to the link are dropped: the logic resends
//! everything unacknowledged once [`LinkEvent::Connected`] arrives.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use lava_batch_ll::{self as ll, JobSpec};
use lava_batch_wire::{self as wire, BATCH_VERSION, Operation};
use lava_net::{
    AuthConn, Authenticator, Backoff, BackoffConfig, ConnError, FramedConn, TRAILER_BYTES, Timeouts,
};
use lava_xdr::frame::{Frame, FrameHeader, FrameLimits};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// Largest message body accepted from mbatchd (a NEW_JOB with a 512 KiB script and its
/// environment fits with room to spare).
pub const MBD_MESSAGE_BYTES_MAX: u32 = 4 << 20;
/// Decoding limits of mbatchd's messages: strings as long as the longest command.
pub const MBD_MESSAGE_LIMITS: lava_xdr::Limits = lava_xdr::Limits {
    input_bytes_max: MBD_MESSAGE_BYTES_MAX as usize,
    string_bytes_max: ll::COMMAND_BYTES_MAX as u32,
    ..lava_xdr::Limits::DEFAULT
};
/// Time allowed for the TCP handshake.
const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// Time allowed for SBD_REGISTER_ACK after SBD_REGISTER.
const REGISTER_TIMEOUT_MS: u64 = 10_000;
/// Time allowed for one frame to be written.
const WRITE_TIMEOUT_MS: u64 = 10_000;
/// Frames sent in one write at most.
const FRAMES_PER_WRITE_MAX: usize = 64;
/// An idle channel is normal (no jobs): a day without a frame only costs a reconnection.
const IDLE_READ_TIMEOUT_MS: u64 = 24 * 3600 * 1000;
/// First reconnect delay.
const RECONNECT_DELAY_MS_INITIAL: u64 = 100;
/// Longest reconnect delay (LavaLite retries every second; a little more after many failures).
const RECONNECT_DELAY_MS_MAX: u64 = 5_000;

/// A message from mbatchd, validated.
#[derive(Debug)]
pub enum FromMbd {
    /// BATCH_NEW_JOB.
    NewJob(Box<JobSpec>),
    /// BATCH_NEW_JOB_REPLY_ACK.
    NewJobReplyAck(lava_sbd::Ack),
    /// BATCH_JOB_EXECUTE_ACK.
    JobExecuteAck(lava_sbd::Ack),
    /// BATCH_JOB_FINISH_ACK.
    JobFinishAck(lava_sbd::Ack),
    /// BATCH_JOB_SIGNAL.
    JobSignal(wire::JobSignal),
    /// SBD_PEEK (`bpeek`, relayed by mbatchd; never seen by the logic).
    Peek(wire::SbdPeek),
}

/// What the link reports to the daemon's loop.
#[derive(Debug)]
pub enum LinkEvent {
    /// Registered with mbatchd.
    Connected,
    /// The connection ended.
    Disconnected,
    /// A message arrived.
    Message(FromMbd),
}

/// A message for mbatchd, already encoded.
#[derive(Debug)]
pub struct OutFrame {
    /// Its operation.
    pub operation: Operation,
    /// The XDR body.
    pub body: Vec<u8>,
}

impl OutFrame {
    /// Not a message: the link ends its connection here (after the frames handed over
    /// before it) and registers again, which lifts mbatchd's avoidance of this host for
    /// the jobs it refused.
    pub fn register_again() -> OutFrame {
        OutFrame { operation: Operation::SbdRegister, body: Vec::new() }
    }

    fn is_register_again(&self) -> bool {
        self.operation == Operation::SbdRegister
    }
}

/// Where mbatchd is and who we are.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// The hosts mbatchd may run on: the master candidates (`LSF_MASTER_LIST`, else the
    /// first server host), tried in order, the one that took the last registration first.
    pub masters: Vec<MbdHost>,
    /// `LSB_MBD_PORT`.
    pub port: u16,
    /// This host's name.
    pub host_name: String,
    /// CPUs this host offers.
    pub n_cpus: u32,
    /// The cluster key.
    pub auth: Arc<Authenticator>,
}

/// A host mbatchd may run on.
#[derive(Clone, Debug)]
pub struct MbdHost {
    /// Its name in lsf.cluster.
    pub name: String,
    /// Its address when lsf.cluster gives one (`LAVA_ADDR`), else the name is resolved.
    pub addr: Option<IpAddr>,
}

impl LinkConfig {
    /// The candidates' names, for the log and the status query.
    pub fn master_names(&self) -> String {
        self.masters.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(" ")
    }
}

fn frame_limits() -> FrameLimits {
    FrameLimits { body_bytes_max: MBD_MESSAGE_BYTES_MAX + TRAILER_BYTES as u32 }
}

fn timeouts() -> Timeouts {
    Timeouts {
        connect_timeout_ms: CONNECT_TIMEOUT_MS,
        read_timeout_ms: IDLE_READ_TIMEOUT_MS,
        write_timeout_ms: WRITE_TIMEOUT_MS,
    }
}

fn header(operation: Operation, sequence: u32) -> FrameHeader {
    FrameHeader { sequence, operation: operation.code(), version: BATCH_VERSION, length: 0, status: 0 }
}

/// Decodes and validates a frame from mbatchd.
pub fn decode(frame: &Frame) -> Result<FromMbd, String> {
    if frame.header.version != BATCH_VERSION {
        return Err(format!(
            "protocol version {:#x}, this sbatchd speaks {BATCH_VERSION:#x}",
            frame.header.version
        ));
    }
    let operation = Operation::from_code(frame.header.operation)
        .ok_or_else(|| format!("unknown operation {}", frame.header.operation))?;
    let body = &frame.body[..];
    let xdr = |err: lava_xdr::Error| format!("{}: {err}", operation.name());
    let ack = |body: &[u8]| -> Result<lava_sbd::Ack, String> {
        let ack: wire::JobAck = lava_xdr::from_bytes(body, &MBD_MESSAGE_LIMITS).map_err(xdr)?;
        lava_sbd::Ack::from_wire(ack).map_err(|err| format!("{}: {err}", operation.name()))
    };
    match operation {
        Operation::NewJob => {
            let specs: wire::JobSpecs = lava_xdr::from_bytes(body, &MBD_MESSAGE_LIMITS).map_err(xdr)?;
            let spec = JobSpec::try_from(specs).map_err(|err| format!("{}: {err}", operation.name()))?;
            Ok(FromMbd::NewJob(Box::new(spec)))
        }
        Operation::NewJobReplyAck => Ok(FromMbd::NewJobReplyAck(ack(body)?)),
        Operation::JobExecuteAck => Ok(FromMbd::JobExecuteAck(ack(body)?)),
        Operation::JobFinishAck => Ok(FromMbd::JobFinishAck(ack(body)?)),
        Operation::JobSignal => {
            Ok(FromMbd::JobSignal(lava_xdr::from_bytes(body, &MBD_MESSAGE_LIMITS).map_err(xdr)?))
        }
        Operation::SbdPeek => {
            let peek: wire::SbdPeek = lava_xdr::from_bytes(body, &MBD_MESSAGE_LIMITS).map_err(xdr)?;
            ll::job_ref("peek.job", peek.request.job)
                .map_err(|err| format!("{}: {err}", operation.name()))?;
            Ok(FromMbd::Peek(peek))
        }
        other => Err(format!("unexpected operation {} from mbatchd", other.name())),
    }
}

type Half<S> = AuthConn<S>;

/// Keeps a registered channel to mbatchd up until `out` closes (the daemon stops).
pub async fn run(config: LinkConfig, events: mpsc::Sender<LinkEvent>, mut out: mpsc::Receiver<OutFrame>) {
    let backoff_config =
        BackoffConfig { delay_ms_initial: RECONNECT_DELAY_MS_INITIAL, delay_ms_max: RECONNECT_DELAY_MS_MAX };
    let seed = u64::from(std::process::id()) ^ lava_net::system_now_ms();
    let mut backoff =
        Backoff::from_entropy(backoff_config).unwrap_or_else(|_| Backoff::new(backoff_config, seed));
    let mut sequence = 0u32;
    let mut failures = 0u32;
    let mut current = 0usize;
    loop {
        match connect_any(&config, &mut current, &mut sequence).await {
            Ok((reader, writer, ack)) => {
                backoff.reset();
                failures = 0;
                tracing::info!(cluster = %ack.cluster_name, master = %ack.master_name, "registered with mbatchd");
                // Frames queued for an earlier connection: the logic resends what matters.
                while out.try_recv().is_ok() {}
                if events.send(LinkEvent::Connected).await.is_err() {
                    return;
                }
                let reason = tokio::select! {
                    reason = read_loop(reader, &events) => reason,
                    reason = write_loop(writer, &mut out, &mut sequence) => reason,
                };
                match reason {
                    None => return,
                    Some(reason) => tracing::warn!("connection to mbatchd lost: {reason}"),
                }
                if events.send(LinkEvent::Disconnected).await.is_err() {
                    return;
                }
            }
            Err(err) => {
                failures += 1;
                // Loud once, then quiet while mbatchd stays away.
                if failures == 1 {
                    tracing::warn!("cannot register with mbatchd: {err}; retrying");
                } else {
                    tracing::debug!(failures, "cannot register with mbatchd: {err}");
                }
            }
        }
        let sleep = tokio::time::sleep(Duration::from_millis(backoff.next_delay_ms()));
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                frame = out.recv() => if frame.is_none() { return },
            }
        }
    }
}

type Reader = Half<tokio::io::Join<tokio::net::tcp::OwnedReadHalf, tokio::io::Sink>>;
type Writer = Half<tokio::io::Join<tokio::io::Empty, tokio::net::tcp::OwnedWriteHalf>>;

async fn resolve(host: &MbdHost, port: u16) -> Result<SocketAddr, String> {
    if let Some(ip) = host.addr {
        return Ok(SocketAddr::new(ip, port));
    }
    let mut addrs = tokio::net::lookup_host((host.name.as_str(), port))
        .await
        .map_err(|err| format!("cannot resolve mbatchd's host {}: {err}", host.name))?;
    addrs.next().ok_or_else(|| format!("mbatchd's host {} has no address", host.name))
}

/// Registers with mbatchd on the candidate that took the last registration (`current`),
/// else on the others in order; `current` becomes the one that took it.
async fn connect_any(
    config: &LinkConfig,
    current: &mut usize,
    sequence: &mut u32,
) -> Result<(Reader, Writer, wire::SbdRegisterAck), String> {
    let n = config.masters.len();
    let mut misses = Vec::new();
    for idx in std::iter::once(*current).chain((0..n).filter(|idx| idx != current)) {
        match connect(&config.masters[idx], config, sequence).await {
            Ok(connected) => {
                *current = idx;
                return Ok(connected);
            }
            Err(Miss::Failed(why)) => misses.push(why),
            Err(Miss::NotMaster(leader)) => {
                // A candidate that does not lead names the one that does: go there at
                // once (one hop; a second refusal counts as a miss).
                let listed = config.masters.iter().position(|m| m.name == leader.name);
                let host = listed.map_or_else(|| leader.clone(), |at| config.masters[at].clone());
                match connect(&host, config, sequence).await {
                    Ok(connected) => {
                        *current = listed.unwrap_or(idx);
                        return Ok(connected);
                    }
                    Err(Miss::Failed(why)) => misses.push(why),
                    Err(Miss::NotMaster(other)) => misses
                        .push(format!("{}, named as the master, names {} in turn", leader.name, other.name)),
                }
            }
        }
    }
    Err(misses.join("; "))
}

/// Why one registration did not take.
enum Miss {
    /// The candidate could not be reached, or answered wrongly.
    Failed(String),
    /// The candidate does not lead; the named host does (`ERR_NOT_MASTER`).
    NotMaster(MbdHost),
}

impl From<String> for Miss {
    fn from(why: String) -> Miss {
        Miss::Failed(why)
    }
}

async fn connect(
    host: &MbdHost,
    config: &LinkConfig,
    sequence: &mut u32,
) -> Result<(Reader, Writer, wire::SbdRegisterAck), Miss> {
    let addr = resolve(host, config.port).await?;
    let stream = tokio::time::timeout(Duration::from_millis(CONNECT_TIMEOUT_MS), TcpStream::connect(addr))
        .await
        .map_err(|_| format!("connecting to {addr} timed out"))?
        .map_err(|err| format!("connecting to {addr}: {err}"))?;
    stream.set_nodelay(true).map_err(|err| format!("{addr}: {err}"))?;
    let (read_half, write_half) = stream.into_split();
    let mut reader = AuthConn::new(
        FramedConn::new(tokio::io::join(read_half, tokio::io::sink()), frame_limits(), timeouts()),
        Arc::clone(&config.auth),
    );
    let mut writer = AuthConn::new(
        FramedConn::new(tokio::io::join(tokio::io::empty(), write_half), frame_limits(), timeouts()),
        Arc::clone(&config.auth),
    );
    let register = wire::SbdRegister {
        host_name: config.host_name.clone(),
        n_cpus: config.n_cpus,
        sbd_pid: std::process::id(),
    };
    let body = lava_xdr::to_bytes(&register).expect("SBD_REGISTER always encodes");
    *sequence = sequence.wrapping_add(1);
    writer
        .write_frame(header(Operation::SbdRegister, *sequence), &body)
        .await
        .map_err(|err| format!("{addr}: sending SBD_REGISTER: {err}"))?;
    let frame = tokio::time::timeout(Duration::from_millis(REGISTER_TIMEOUT_MS), reader.read_frame())
        .await
        .map_err(|_| format!("{addr}: no SBD_REGISTER_ACK within {REGISTER_TIMEOUT_MS} ms"))?
        .map_err(|err| format!("{addr}: waiting for SBD_REGISTER_ACK: {err}"))?
        .ok_or_else(|| format!("{addr}: mbatchd closed the connection before SBD_REGISTER_ACK"))?;
    if frame.header.version == BATCH_VERSION && frame.header.operation == Operation::RequestFailed.code() {
        let refusal: wire::ErrorReply = lava_xdr::from_bytes(&frame.body, &MBD_MESSAGE_LIMITS)
            .map_err(|err| format!("{addr}: REQUEST_FAILED: {err}"))?;
        return Err(match refusal.code {
            wire::ERR_NOT_MASTER => Miss::NotMaster(match refusal.message.split_once(' ') {
                Some((name, ip)) => MbdHost { name: name.to_owned(), addr: ip.parse().ok() },
                None => MbdHost { name: refusal.message, addr: None },
            }),
            _ => Miss::Failed(format!("{addr}: {}", refusal.message)),
        });
    }
    if frame.header.version != BATCH_VERSION || frame.header.operation != Operation::SbdRegisterAck.code() {
        return Err(Miss::Failed(format!(
            "{addr}: expected SBD_REGISTER_ACK, got operation {} version {:#x}",
            frame.header.operation, frame.header.version
        )));
    }
    let ack = lava_xdr::from_bytes(&frame.body, &MBD_MESSAGE_LIMITS)
        .map_err(|err| format!("{addr}: SBD_REGISTER_ACK: {err}"))?;
    Ok((reader, writer, ack))
}

/// Reads until the connection fails; `None` when the daemon is stopping.
async fn read_loop<S: AsyncRead + AsyncWrite + Unpin>(
    mut reader: Half<S>,
    events: &mpsc::Sender<LinkEvent>,
) -> Option<String> {
    loop {
        // The daemon's room first, then the frame: a message read is never dropped with
        // this future when the write side ends the connection first (`read_frame` keeps a
        // partial frame in the reader).
        let Ok(room) = events.reserve().await else { return None };
        let frame = match reader.read_frame().await {
            Ok(Some(frame)) => frame,
            Ok(None) => return Some("mbatchd closed the connection".to_owned()),
            Err(ConnError::Auth(err)) => return Some(format!("frame refused: {err}")),
            Err(err) => return Some(err.to_string()),
        };
        match decode(&frame) {
            Ok(message) => room.send(LinkEvent::Message(message)),
            Err(problem) => {
                tracing::error!(operation = frame.header.operation, "bad frame from mbatchd: {problem}");
                return Some(format!("bad frame: {problem}"));
            }
        }
    }
}

/// Writes what the daemon hands over until a write fails; `None` when the daemon is stopping.
/// The frames handed over together (at most [`FRAMES_PER_WRITE_MAX`]) go in one write, so
/// that mbatchd reads them together and logs them in one group commit (an EXECUTE and the
/// FINISH of a job that has already ended, typically).
async fn write_loop<S: AsyncRead + AsyncWrite + Unpin>(
    mut writer: Half<S>,
    out: &mut mpsc::Receiver<OutFrame>,
    sequence: &mut u32,
) -> Option<String> {
    let mut batch = Vec::with_capacity(FRAMES_PER_WRITE_MAX);
    loop {
        if out.recv_many(&mut batch, FRAMES_PER_WRITE_MAX).await == 0 {
            return None;
        }
        let again = batch.iter().position(OutFrame::is_register_again);
        let frames: Vec<(FrameHeader, &[u8])> = batch[..again.unwrap_or(batch.len())]
            .iter()
            .map(|frame| {
                *sequence = sequence.wrapping_add(1);
                (header(frame.operation, *sequence), frame.body.as_slice())
            })
            .collect();
        if let Err(err) = writer.write_frames(&frames).await {
            let names: Vec<&str> = batch.iter().map(|frame| frame.operation.name()).collect();
            return Some(format!("sending {}: {err}", names.join(", ")));
        }
        lava_crash::point!("sbatchd.message_written");
        if again.is_some() {
            // What followed the marker is dropped like any frame of a closed connection:
            // the logic resends what is unacknowledged once registered again.
            return Some("registering again (the state file system has room again)".to_owned());
        }
        batch.clear();
    }
}
