//! `bpeek` relayed: PEEK_JOB from a command, SBD_PEEK to the execution host's sbatchd.
//!
//! A peek changes no state, so it never goes through the logic or the event log:
//! 1. The command connection decodes and authenticates PEEK_JOB (`validate::peek_request`)
//!    and asks the event loop ([`crate::conn::ConnEvent::Peek`]) where the job runs.
//! 2. The loop ([`decide`]) reads its in-memory state: the job must exist and have started
//!    (running, suspended, or finished: `bpeek -f` reads the last bytes after the end),
//!    and the caller must own it or administer the cluster; then it hands back the relay
//!    of the sbatchd channel of the job's first host.
//! 3. The connection sends a [`Relay`] over that relay; the channel's task gives it a peek
//!    id, writes SBD_PEEK, and routes the SBD_PEEK_REPLY with that id back (see
//!    `conn::sbd_channel`). sbatchd reads at most `wire::PEEK_BYTES_MAX` bytes of the job's
//!    output file from the asked offset.
//! 4. The connection writes PEEK_JOB_REPLY. No answer within [`PEEK_TIMEOUT_MS`] (or a
//!    channel that closed) is a `PEEK_FAILED` reply saying so.

use std::net::SocketAddr;
use std::time::Duration;

use lava_batch_ll::{HostName, JobRef};
use lava_batch_wire::{self as wire, Operation};
use lava_mbd::{Caller, Mbd};
use lava_net::{FramedConn, system_now_ms};
use lava_xdr::frame::Frame;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use crate::codec::{encode, header};
use crate::conn::{ConnEvent, Shared};
use crate::validate;

/// Longest a command waits for the execution host's answer.
pub(crate) const PEEK_TIMEOUT_MS: u64 = 15_000;
/// Peeks in flight on one sbatchd channel.
pub(crate) const RELAYS_QUEUED_MAX: usize = 64;

/// One peek on its way to an sbatchd, with where its answer goes.
#[derive(Debug)]
pub(crate) struct Relay {
    /// What to ask.
    pub(crate) request: wire::PeekRequest,
    /// Where the answer goes.
    pub(crate) reply: oneshot::Sender<wire::PeekReply>,
}

/// The relay of one sbatchd channel, or the answer when there is nothing to relay.
pub(crate) type Decision = Result<mpsc::Sender<Relay>, wire::PeekReply>;

/// A reply without output.
pub(crate) fn refusal(code: u32, message: String) -> wire::PeekReply {
    wire::PeekReply { code, message, data: Vec::new(), next_offset: 0 }
}

/// Step 2 of the module documentation, on the loop's state.
pub(crate) fn decide(
    mbd: &Mbd,
    relay_of: impl Fn(&HostName) -> Option<mpsc::Sender<Relay>>,
    caller: &Caller,
    request: &wire::PeekRequest,
) -> Decision {
    let shown = if request.job.array_index == 0 {
        request.job.job_id.to_string()
    } else {
        format!("{}[{}]", request.job.job_id, request.job.array_index)
    };
    let job = JobRef::new(request.job.job_id, request.job.array_index).and_then(|job| mbd.job(job));
    let Some(job) = job else {
        return Err(refusal(wire::PEEK_NOT_FOUND, format!("Job <{shown}> is not found")));
    };
    if job.user() != &caller.user && !mbd.config().is_admin(caller.uid, &caller.user) {
        return Err(refusal(wire::PEEK_DENIED, format!("Job <{shown}> : User permission denied")));
    }
    // A finished job too (it started: it has hosts): `bpeek -f` fetches the last bytes
    // after seeing the job end; `bpeek` itself says a finished job is not running.
    let Some(host) = job.exec_hosts().first().filter(|_| !job.status().is_pending()) else {
        return Err(refusal(wire::PEEK_NOT_RUNNING, format!("Job <{shown}> : Not a running job")));
    };
    relay_of(host).ok_or_else(|| {
        refusal(wire::PEEK_FAILED, format!("Job <{shown}> : the sbatchd of {host} is not connected"))
    })
}

/// Serves one PEEK_JOB frame on a command connection; `false` when the connection is
/// to close.
pub(crate) async fn serve(
    framed: &mut FramedConn<TcpStream>,
    frame: &Frame,
    peer: SocketAddr,
    shared: &Shared,
) -> bool {
    let sequence = frame.header.sequence;
    let (caller, request) = match validate::peek_request(&frame.body, &shared.auth, system_now_ms()) {
        Ok(checked) => checked,
        Err(refusal) => {
            tracing::warn!(%peer, "PEEK_JOB refused: {}", refusal.message);
            shared.counters.reject(refusal.reason);
            let error = wire::ErrorReply { code: refusal.code, message: refusal.message };
            let written = framed
                .write_frame(header(Operation::RequestFailed, sequence, error.code), &encode(&error))
                .await;
            return written.is_ok() && !refusal.close;
        }
    };
    let (decided_to, decided) = oneshot::channel();
    let event = ConnEvent::Peek { caller, request: request.clone(), reply: decided_to };
    if shared.events.send(event).await.is_err() {
        return false;
    }
    let Ok(decision) = decided.await else { return false };
    let reply = match decision {
        Ok(relay) => relay_to_sbd(relay, request).await,
        Err(reply) => reply,
    };
    match framed.write_frame(header(Operation::PeekJobReply, sequence, 0), &encode(&reply)).await {
        Ok(()) => true,
        Err(error) => {
            tracing::debug!(%peer, "PEEK_JOB_REPLY not delivered: {error}");
            false
        }
    }
}

async fn relay_to_sbd(relay: mpsc::Sender<Relay>, request: wire::PeekRequest) -> wire::PeekReply {
    let failed = |why: &str| refusal(wire::PEEK_FAILED, why.to_owned());
    let (reply_to, reply) = oneshot::channel();
    if relay.try_send(Relay { request, reply: reply_to }).is_err() {
        return failed("the execution host's channel is busy or closing; try again");
    }
    match tokio::time::timeout(Duration::from_millis(PEEK_TIMEOUT_MS), reply).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(_)) => failed("the execution host's channel closed before it answered"),
        Err(_) => failed("the execution host did not answer in time"),
    }
}
