//! sbatchd's side of interactive jobs (`bsub -I`, `-Ip`, `-Is`; docs/protocols/batch.md,
//! "Interactive jobs"): the attach port and the relay between `bsub` and the job's shepherd.
//!
//! sbatchd listens on its host's `LSB_SBD_PORT` (lsf.cluster's `LAVA_SBD_PORT` for the host
//! when given), at the host's `LAVA_ADDR` when it has one. A connection's first frame must be
//! INTERACTIVE_ATTACH within the gate's deadline, of at most [`ATTACH_BODY_BYTES_MAX`]
//! bytes; its credential must be sealed for this cluster's sbatchd and name the job's owner
//! (the uid the job runs as). The loop then decides ([`decide`]): the job must be an
//! interactive job running here, and no terminal may have attached to it before (one attach
//! per job); it marks the job attached in the logic (`Input::TerminalAttached`). Any refusal is
//! answered with INTERACTIVE_ATTACH_REPLY and the connection closed; the job is not touched.
//!
//! Once attached, sbatchd connects to the shepherd's attach socket ([`crate::relay`]) and
//! relays: from `bsub` only INTERACTIVE_DATA on standard input and INTERACTIVE_WINSIZE, each
//! decoded (bounded) before it goes on; from the shepherd its frames as they are. The end:
//! INTERACTIVE_EXIT from the shepherd is the normal one. If `bsub`'s side closes, fails or
//! sends anything else first, the terminal is lost: the loop steps `Input::TerminalLost` and
//! the logic kills the job, which ends EXIT.
//!
//! The port goes through lava-net's gate ([`CONNECTIONS`]): at most 256 connections, 16 per
//! source address, the oldest unauthenticated one evicted to make room, and 10 s to present
//! a credential that passes; accept failures back off.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lava_batch_ll::JobRef;
use lava_batch_wire::{self as wire, Operation};
use lava_net::gate::{AcceptBackoff, Gate, GateConfig, Pass, Source};
use lava_net::{Authenticator, Credential};
use lava_sbd::Sbd;
use lava_xdr::frame::{FrameHeader, HEADER_BYTES};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::{mpsc, oneshot};

use crate::relay;

/// Longest INTERACTIVE_ATTACH body: a credential (under 900 bytes) and four words.
pub const ATTACH_BODY_BYTES_MAX: u32 = 2048;
/// The attach port's gate: connections at once, per source, and the time to authenticate
/// (to send an INTERACTIVE_ATTACH whose credential passes).
pub const CONNECTIONS: GateConfig =
    GateConfig { total_max: 256, per_source_max: 16, auth_deadline: Duration::from_secs(10) };

/// What the loop is asked about an attach: may `uid` attach to `job`?
#[derive(Debug)]
pub struct AttachRequest {
    /// The job.
    pub job: JobRef,
    /// The uid the credential proved.
    pub uid: u32,
    /// The answer: the job's state folder, or the refusal's code and message.
    pub reply: oneshot::Sender<Result<PathBuf, (u32, String)>>,
}

/// The loop's decision on an attach (the caller steps `TerminalAttached` on `Ok`).
pub fn decide(
    sbd: &Sbd,
    state_dir: Option<PathBuf>,
    job: JobRef,
    uid: u32,
) -> Result<PathBuf, (u32, String)> {
    let not_found = || (wire::ATTACH_NOT_FOUND, format!("Job <{job}>: no such interactive job on this host"));
    let record = sbd.job(job).filter(|record| record.is_interactive()).ok_or_else(not_found)?;
    if record.run_spec.exec_uid != uid {
        return Err((wire::ATTACH_DENIED, format!("Job <{job}>: User permission denied")));
    }
    if record.exit_status_valid || record.kill.is_some() {
        return Err((wire::ATTACH_NOT_FOUND, format!("Job <{job}> has ended")));
    }
    if !record.is_running() {
        return Err((wire::ATTACH_NOT_READY, format!("Job <{job}> has not started yet")));
    }
    if sbd.was_attached(job) {
        return Err((wire::ATTACH_BUSY, format!("Job <{job}>: a terminal is attached already")));
    }
    state_dir.ok_or_else(not_found)
}

/// What the connections need.
#[derive(Clone)]
pub struct Context {
    /// Checks credentials made for this cluster's sbatchd.
    pub auth: Arc<Authenticator>,
    /// Attach requests for the loop.
    pub attach: mpsc::Sender<AttachRequest>,
    /// Jobs whose terminal was lost, for the loop.
    pub lost: mpsc::Sender<JobRef>,
}

/// Serves the attach port until sbatchd stops.
pub async fn serve(listener: TcpListener, context: Context) {
    let gate = Gate::new(CONNECTIONS);
    let mut backoff = AcceptBackoff::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                let (pause, line) = backoff.failed(&error);
                if let Some(line) = line {
                    tracing::warn!("attach port: {line}");
                }
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        if let Some(line) = backoff.succeeded() {
            tracing::info!("attach port: {line}");
        }
        let pass = match gate.admit(Source::Ip(peer.ip())) {
            Ok(pass) => pass,
            Err(refusal) => {
                tracing::info!(%peer, "attach port: connection refused: {refusal}");
                continue;
            }
        };
        let context = context.clone();
        tokio::spawn(async move {
            if let Err(problem) = handle(stream, &context, pass).await {
                tracing::info!(%peer, "attach refused: {problem}");
            }
        });
    }
}

/// Refuses an attach: the reply, then the connection closes.
async fn refuse(stream: &mut TcpStream, code: u32, message: String) -> Result<(), String> {
    let reply = wire::InteractiveAttachReply { code, message: message.clone() };
    let _ = write_frame(stream, Operation::InteractiveAttachReply, &relay::encode(&reply)).await;
    let _ = stream.shutdown().await;
    Err(message)
}

/// One connection, holding its place at the gate (`pass`) while it lasts.
async fn handle(mut stream: TcpStream, context: &Context, mut pass: Pass) -> Result<(), String> {
    let _ = stream.set_nodelay(true);
    let deadline = pass.auth_deadline();
    let first = tokio::select! {
        first = tokio::time::timeout(deadline, read_frame(&mut stream, ATTACH_BODY_BYTES_MAX)) => first,
        () = pass.evicted() => return Err("evicted to make room for another connection".to_owned()),
    };
    let first = first
        .map_err(|_| "no INTERACTIVE_ATTACH in time".to_owned())?
        .map_err(|error| format!("first frame: {error}"))?;
    let attach: wire::InteractiveAttach = match first {
        (Operation::InteractiveAttach, body) => {
            let limits = lava_xdr::Limits {
                input_bytes_max: ATTACH_BODY_BYTES_MAX as usize,
                ..lava_xdr::Limits::DEFAULT
            };
            match lava_xdr::from_bytes(&body, &limits) {
                Ok(attach) => attach,
                Err(error) => {
                    return refuse(
                        &mut stream,
                        wire::ATTACH_NOT_FOUND,
                        format!("malformed INTERACTIVE_ATTACH: {error}"),
                    )
                    .await;
                }
            }
        }
        (operation, _) => return Err(format!("first frame is {}, not INTERACTIVE_ATTACH", operation.name())),
    };
    let credential = match Credential::verify(&context.auth, &attach.credential, lava_net::system_now_ms()) {
        Ok(credential) => credential,
        Err(error) => {
            return refuse(&mut stream, wire::ATTACH_AUTH, format!("authentication failed: {error}")).await;
        }
    };
    pass.authenticated();
    let Some(job) = JobRef::new(attach.job.job_id, attach.job.array_index) else {
        return refuse(&mut stream, wire::ATTACH_NOT_FOUND, "job id 0".to_owned()).await;
    };
    let (reply, answer) = oneshot::channel();
    if context.attach.send(AttachRequest { job, uid: credential.uid, reply }).await.is_err() {
        return Err("sbatchd is stopping".to_owned());
    }
    let state_dir = match answer.await {
        Ok(Ok(dir)) => dir,
        Ok(Err((code, message))) => return refuse(&mut stream, code, message).await,
        Err(_) => return Err("sbatchd is stopping".to_owned()),
    };
    // The job is attached in the logic from here: failing to reach its shepherd loses it.
    let shepherd = match connect_shepherd(&state_dir).await {
        Ok(shepherd) => shepherd,
        Err(error) => {
            let _ = context.lost.send(job).await;
            return refuse(
                &mut stream,
                wire::ATTACH_NOT_FOUND,
                format!("Job <{job}>: its shepherd cannot be reached: {error}"),
            )
            .await;
        }
    };
    let ok = wire::InteractiveAttachReply { code: wire::ATTACH_OK, message: String::new() };
    write_frame(&mut stream, Operation::InteractiveAttachReply, &relay::encode(&ok))
        .await
        .map_err(|error| error.to_string())?;
    tracing::info!(%job, user = %credential.username, from = %credential.hostname, "terminal attached");
    let (mut from_bsub, mut to_bsub) = stream.into_split();
    let (mut from_job, mut to_job) = shepherd.into_split();
    if attach.rows > 0 && attach.cols > 0 {
        let size = wire::InteractiveWinsize { rows: attach.rows, cols: attach.cols };
        let _ = write_frame(&mut to_job, Operation::InteractiveWinsize, &relay::encode(&size)).await;
    }
    let up = async {
        loop {
            let (operation, body) = match read_frame(&mut from_bsub, wire::INTERACTIVE_BODY_BYTES_MAX).await {
                Ok(frame) => frame,
                Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
                    return "bsub went away".to_owned();
                }
                Err(error) => return error.to_string(),
            };
            let well_formed = match operation {
                Operation::InteractiveData => {
                    lava_xdr::from_bytes::<wire::InteractiveData>(&body, &relay::LIMITS)
                        .is_ok_and(|data| data.stream == wire::STREAM_STDIN)
                }
                Operation::InteractiveWinsize => {
                    lava_xdr::from_bytes::<wire::InteractiveWinsize>(&body, &relay::LIMITS).is_ok()
                }
                Operation::InteractiveSignal => {
                    lava_xdr::from_bytes::<wire::InteractiveSignal>(&body, &relay::LIMITS)
                        .is_ok_and(|signal| (1..=64).contains(&signal.signal))
                }
                _ => false,
            };
            if !well_formed {
                return format!("a bad {} from bsub", operation.name());
            }
            if write_frame(&mut to_job, operation, &body).await.is_err() {
                // The shepherd has stopped reading: the job has ended and its end is on its
                // way down; nothing more goes up.
                return std::future::pending::<String>().await;
            }
        }
    };
    let down = async {
        loop {
            let (operation, body) = read_frame(&mut from_job, wire::INTERACTIVE_BODY_BYTES_MAX).await?;
            write_frame(&mut to_bsub, operation, &body).await?;
            if operation == Operation::InteractiveExit {
                let _ = to_bsub.shutdown().await;
                return Ok::<(), std::io::Error>(());
            }
        }
    };
    tokio::select! {
        biased;
        result = down => match result {
            Ok(()) => tracing::debug!(%job, "interactive job ended; its output is delivered"),
            Err(error) => tracing::warn!(%job, "the job's shepherd closed the terminal: {error}"),
        },
        why = up => {
            tracing::warn!(%job, "terminal lost ({why}): the job is killed");
            let _ = context.lost.send(job).await;
        }
    }
    Ok(())
}

/// Tells the shepherd of an interactive job no terminal will come (its job is being killed
/// before any attached): a connection to its attach socket, closed at once, which the relay
/// takes as a terminal come and gone, so the job's end is not held for an attach.
pub fn hang_up(state_dir: &std::path::Path) {
    if let Ok(dir) = std::fs::File::open(state_dir) {
        // No socket (the relay took its one connection already, or the job has ended): nothing to do.
        let _ = std::os::unix::net::UnixStream::connect(relay::socket_path(dir.as_raw_fd()));
    }
}

async fn connect_shepherd(state_dir: &std::path::Path) -> std::io::Result<UnixStream> {
    let dir = std::fs::File::open(state_dir)?;
    let stream = UnixStream::connect(relay::socket_path(dir.as_raw_fd())).await;
    drop(dir);
    stream
}

/// One frame: header and body in one write.
async fn write_frame(
    to: &mut (impl AsyncWrite + Unpin),
    operation: Operation,
    body: &[u8],
) -> std::io::Result<()> {
    let mut frame = Vec::with_capacity(HEADER_BYTES + body.len());
    relay::write_frame(&mut frame, operation, body)?;
    to.write_all(&frame).await
}

/// One frame of at most `body_max` body bytes, refused from its header when longer.
async fn read_frame(
    from: &mut (impl AsyncRead + Unpin),
    body_max: u32,
) -> std::io::Result<(Operation, Vec<u8>)> {
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let mut head = [0u8; HEADER_BYTES];
    from.read_exact(&mut head).await?;
    let header = FrameHeader::parse(&head).map_err(|error| invalid(error.to_string()))?;
    header.check_version(wire::BATCH_VERSION).map_err(|error| invalid(error.to_string()))?;
    if header.length > body_max {
        return Err(invalid(format!("a frame of {} bytes, over {body_max}", header.length)));
    }
    let operation = Operation::from_code(header.operation)
        .ok_or_else(|| invalid(format!("operation {}", header.operation)))?;
    let mut body = vec![0u8; header.length as usize];
    from.read_exact(&mut body).await?;
    Ok((operation, body))
}
