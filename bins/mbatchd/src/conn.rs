//! One task per TCP connection: read frames, check them (`validate`), hand
//! what passed to the event loop over its bounded channel, and write back
//! what the loop sends over the connection's own channel.
//!
//! The first frame decides what a connection is (see the crate doc):
//! SBD_REGISTER makes it an sbatchd channel, anything else a command
//! connection. A task never touches the logic's state: it only talks to the
//! loop. A peer that sends something it must not (a frame over the limit or
//! cut short, an unknown version or operation, a body that does not decode, a
//! frame that fails authentication) is logged with its address and what was
//! wrong, counted, and loses its own connection; every other connection goes
//! on (docs/ARCHITECTURE.md, "One peer's bad input costs only that peer").

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lava_batch_ll::HostName;
use lava_batch_wire::{self as wire, BATCH_VERSION, Operation};
use lava_mbd::{Caller, ClientReply, ToSbd};
use lava_net::gate::{GateConfig, Pass, Reserver};
use lava_net::{AuthConn, Authenticator, ConnError, FramedConn, Timeouts, system_now_ms};
use lava_xdr::frame::{Frame, FrameHeader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};

use crate::codec::{FRAME_BYTES_MAX, FRAME_LIMITS, encode, encode_reply, encode_to_sbd, header};
use crate::counters::{Counters, Reject};
use crate::peek;
use crate::validate::{self, ClientCall, ReadQuery, Refusal, SbdMessage, SbdProblem};

/// The answer to a [`ReadQuery`] (the event loop builds it: `Shell::answer_read`).
#[derive(Debug)]
pub(crate) enum ReadReply {
    /// HOST_QUERY_REPLY.
    Hosts(wire::HostQueryReply),
    /// QUEUE_QUERY_REPLY.
    Queues(wire::QueueQueryReply),
    /// STATUS_QUERY_REPLY.
    Status(Box<wire::StatusReply>),
    /// RECONFIG_REPLY.
    Reconfig(wire::ReconfigReply),
    /// WAIT_QUERY_REPLY.
    Wait(wire::WaitQueryReply),
}

impl ReadReply {
    /// Its operation and encoded body.
    fn encode(&self) -> (Operation, Vec<u8>) {
        match self {
            ReadReply::Hosts(reply) => (Operation::HostQueryReply, encode(reply)),
            ReadReply::Queues(reply) => (Operation::QueueQueryReply, encode(reply)),
            ReadReply::Status(reply) => (Operation::StatusQueryReply, encode(reply.as_ref())),
            ReadReply::Reconfig(reply) => (Operation::ReconfigReply, encode(reply)),
            ReadReply::Wait(reply) => (Operation::WaitQueryReply, encode(reply)),
        }
    }
}

/// The shell's number for a connection, unique for the life of the process.
pub(crate) type ConnId = u64;

/// Time a command connection may take to send its next whole frame
/// (including idling between requests) before it is closed.
pub(crate) const CLIENT_READ_TIMEOUT_MS: u64 = 60_000;
/// Messages queued for one sbatchd before further ones are dropped (and
/// counted): delivery is best effort, the logic resends what matters.
pub(crate) const SBD_OUTBOX_MESSAGES_MAX: usize = 4096;
/// Messages to one sbatchd sent in one write at most.
const SBD_MESSAGES_PER_WRITE_MAX: usize = 64;
/// Read timeout of an sbatchd channel once registered: none. sbatchd may be
/// silent for as long as it runs nothing; a dead peer shows when TCP gives up
/// on a write, and a restarted one replaces its channel by registering again.
const SBD_CHANNEL_READ_TIMEOUT_MS: u64 = u64::MAX;

/// What a connection task tells the event loop.
#[derive(Debug)]
pub(crate) enum ConnEvent {
    /// A checked command request; the answer goes to `reply`.
    Client { peer: SocketAddr, call: ClientCall, reply: oneshot::Sender<ClientReply> },
    /// An authenticated sbatchd of a configured host registered; `outbox` reaches it.
    SbdRegistered {
        conn: ConnId,
        peer: SocketAddr,
        host: HostName,
        n_cpus: u32,
        sbd_pid: u32,
        outbox: mpsc::Sender<ToSbd>,
        /// Where `bpeek` requests for this host go (see [`crate::peek`]).
        relay: mpsc::Sender<peek::Relay>,
    },
    /// A checked message from the sbatchd channel `conn` of `host`.
    SbdMessage { conn: ConnId, host: HostName, message: SbdMessage },
    /// The sbatchd channel `conn` of `host` is closed.
    SbdClosed { conn: ConnId, host: HostName },
    /// A checked HOST_QUERY (`bhosts`), QUEUE_QUERY (`bqueues`) or STATUS_QUERY
    /// (`badmin showstatus`): a read the loop answers at once.
    Read { query: ReadQuery, reply: oneshot::Sender<ReadReply> },
    /// A checked PEEK_JOB (`bpeek`): the loop says where to relay it, or answers it.
    Peek { caller: Caller, request: wire::PeekRequest, reply: oneshot::Sender<peek::Decision> },
    /// A checked read-only query sent to a master candidate without a leader, asking for a
    /// stale answer ([`refuse`]): the loop answers it from its last applied state, or
    /// refuses it as every request to a candidate that does not lead.
    StaleRead { query: StaleQuery, reply: oneshot::Sender<Result<StaleAnswer, wire::ErrorReply>> },
}

/// A read-only query a master candidate without a leader may answer from its state.
#[derive(Debug)]
pub(crate) enum StaleQuery {
    /// JOB_QUERY (`bjobs`).
    Jobs { caller: Caller, query: wire::JobQuery },
    /// HOST_QUERY, QUEUE_QUERY or STATUS_QUERY (never RECONFIG).
    Read(ReadQuery),
}

/// A stale answer: what it is made of (the STALE_STATE frame) and the answer itself.
#[derive(Debug)]
pub(crate) struct StaleAnswer {
    pub(crate) state: wire::StaleState,
    pub(crate) reply: StaleReply,
}

/// The answer of a [`StaleQuery`].
#[derive(Debug)]
pub(crate) enum StaleReply {
    /// JOB_QUERY_REPLY (or its refusal).
    Jobs(ClientReply),
    /// HOST_QUERY_REPLY, QUEUE_QUERY_REPLY or STATUS_QUERY_REPLY.
    Read(ReadReply),
}

/// The operations a master candidate without a leader answers from its state when the
/// request's header asks for it ([`wire::REQUEST_ACCEPT_STALE`]): the read-only queries.
fn stale_operation(code: u32) -> Option<Operation> {
    Operation::from_code(code).filter(|op| {
        matches!(
            op,
            Operation::JobQuery | Operation::HostQuery | Operation::QueueQuery | Operation::StatusQuery
        )
    })
}

/// What every connection task shares.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The cluster key, for sbatchd frames and user credentials (one replay cache).
    pub(crate) auth: Arc<Authenticator>,
    pub(crate) counters: Arc<Counters>,
    /// The server hosts of the cluster: the only names an sbatchd may register as.
    pub(crate) hosts: BTreeSet<HostName>,
    /// The event loop's input.
    pub(crate) events: mpsc::Sender<ConnEvent>,
    /// Set when mbatchd stops: connections waiting for a request close at once.
    pub(crate) stopping: watch::Sender<bool>,
    /// The event log, which `bhist`'s HISTORY_QUERY reads (`history`).
    pub(crate) log: Arc<lava_eventlog::EventLog>,
}

/// Connections at once, in all and per address, and the time a new one has to send its
/// first whole frame (lava-net's gate; docs/operations.md, "Connection limits"). A
/// connection authenticates with its first request that passes (an sbatchd's
/// SBD_REGISTER, a command's credential); until then it is the first to close when a cap
/// is reached.
pub(crate) const CONNECTIONS: GateConfig =
    GateConfig { total_max: 1024, per_source_max: 128, auth_deadline: Duration::from_secs(5) };

/// [`CONNECTIONS`] for a cluster of `n_hosts` server hosts: each host's sbatchd holds a
/// channel, so the total cap is 1,024 beyond one per host (5,000 hosts must not leave
/// the commands without room).
pub(crate) fn connections(n_hosts: usize) -> GateConfig {
    GateConfig { total_max: CONNECTIONS.total_max + n_hosts, ..CONNECTIONS }
}

/// Bytes the first frames of connections that have not authenticated may announce, in all
/// (lava-net's gate: a first frame reserves its length before it is read, evicting the
/// oldest unauthenticated connections holding a reservation when it does not fit). A
/// command's first request carries its credential, so this bounds what strangers can make
/// mbatchd hold at once, whatever the number of sources.
pub(crate) const PRE_AUTH_BYTES_MAX: usize = 64 << 20;

/// Serves one accepted connection until it closes.
pub(crate) async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    conn: ConnId,
    mut pass: Pass,
    shared: Arc<Shared>,
) {
    let timeouts = Timeouts { read_timeout_ms: SBD_CHANNEL_READ_TIMEOUT_MS, ..Timeouts::default() };
    let mut framed = FramedConn::new(stream, FRAME_LIMITS, timeouts);
    let within = pass.auth_deadline();
    let first = tokio::select! {
        first = read_frame(&mut framed, &shared, peer, Some((within, pass.reserver()))) => first,
        () = pass.evicted() => {
            tracing::debug!(%peer, "closed before its first request to make room for a newer connection");
            shared.counters.reject(Reject::Evicted);
            None
        }
    };
    let Some(first) = first else { return };
    if first.header.operation == Operation::SbdRegister.code() {
        sbd_channel(framed, first, peer, conn, &pass, &shared).await;
    } else {
        command_connection(framed, first, peer, &mut pass, &shared).await;
    }
}

/// Serves one connection accepted while this master candidate does not lead: reads its
/// first frame under the same limits as any first frame (deadline, pre-authentication
/// budget), answers it with `refusal` (ERR_NOT_MASTER naming the leader, or ERR_NO_MASTER)
/// and closes. Nothing else is handed to the loop: a follower serves no one
/// (docs/protocols/batch.md, "Where LavaCore differs"), with one exception: when the
/// candidate has known no leader for a while (`stale`, [`crate::replicated::stale_after`])
/// and the first frame is a read-only query whose header accepts a stale answer, the query
/// is checked as the leader checks it (credential included) and answered from the
/// candidate's last applied state, behind a STALE_STATE frame ([`stale_read`]).
pub(crate) async fn refuse(
    stream: TcpStream,
    peer: SocketAddr,
    mut pass: Pass,
    shared: Arc<Shared>,
    refusal: wire::ErrorReply,
    stale: bool,
) {
    let mut framed = FramedConn::new(stream, FRAME_LIMITS, Timeouts::default());
    let within = pass.auth_deadline();
    let first = tokio::select! {
        first = read_frame(&mut framed, &shared, peer, Some((within, pass.reserver()))) => first,
        () = pass.evicted() => None,
    };
    let Some(first) = first else { return };
    if stale
        && first.header.status & wire::REQUEST_ACCEPT_STALE != 0
        && first.header.check_version(BATCH_VERSION).is_ok()
        && let Some(op) = stale_operation(first.header.operation)
    {
        stale_read(framed, &first, op, peer, &shared).await;
        return;
    }
    let body = encode(&refusal);
    let reply = header(Operation::RequestFailed, first.header.sequence, refusal.code);
    // sbatchd reads mbatchd's frames authenticated; a command reads them plain.
    let written = if first.header.operation == Operation::SbdRegister.code() {
        AuthConn::new(framed, Arc::clone(&shared.auth)).write_frame(reply, &body).await
    } else {
        framed.write_frame(reply, &body).await
    };
    if let Err(error) = written {
        tracing::debug!(%peer, "cannot send the not-master answer: {error}");
    }
}

/// A read-only query to a master candidate without a leader, asking for a stale answer: checked
/// as the leader checks it, answered by the loop from the candidate's last applied state as a
/// STALE_STATE frame then the answer (or refused, should a leader have appeared meanwhile),
/// and the connection closed (docs/protocols/batch.md, "Where LavaCore differs").
async fn stale_read(
    mut framed: FramedConn<TcpStream>,
    frame: &Frame,
    op: Operation,
    peer: SocketAddr,
    shared: &Shared,
) {
    let sequence = frame.header.sequence;
    let checked = if op == Operation::JobQuery {
        validate::client_request(op, &frame.body, &shared.auth, system_now_ms()).and_then(|call| match call {
            ClientCall::Query { caller, query } => Ok(StaleQuery::Jobs { caller, query }),
            other => Err(Refusal {
                code: wire::ERR_UNSUPPORTED,
                message: format!("JOB_QUERY checked as {other:?}"),
                reason: Reject::Operation,
                close: true,
            }),
        })
    } else {
        validate::read_query(op, &frame.body, &shared.auth, system_now_ms()).map(StaleQuery::Read)
    };
    let query = match checked {
        Ok(query) => query,
        Err(refusal) => {
            tracing::warn!(%peer, "{} refused: {}", op.name(), refusal.message);
            shared.counters.reject(refusal.reason);
            let _ =
                write_reply(&mut framed, sequence, &ClientReply::error(refusal.code, refusal.message)).await;
            return;
        }
    };
    let (reply_to, reply) = oneshot::channel();
    if shared.events.send(ConnEvent::StaleRead { query, reply: reply_to }).await.is_err() {
        return;
    }
    let Ok(answer) = reply.await else { return };
    let written = match answer {
        Err(refusal) => {
            let body = encode(&refusal);
            framed.write_frame(header(Operation::RequestFailed, sequence, refusal.code), &body).await
        }
        Ok(StaleAnswer { state, reply }) => {
            tracing::debug!(%peer, applied = state.applied_index, "{} answered from this candidate's state", op.name());
            let marker = encode(&state);
            match framed.write_frame(header(Operation::StaleState, sequence, 0), &marker).await {
                Err(error) => Err(error),
                Ok(()) => match reply {
                    StaleReply::Jobs(reply) => write_reply(&mut framed, sequence, &reply).await,
                    StaleReply::Read(reply) => {
                        let (reply_op, body) = reply.encode();
                        if body.len() > FRAME_BYTES_MAX as usize {
                            let message = format!(
                                "the answer is {} bytes, more than a frame may carry; name fewer hosts or queues",
                                body.len()
                            );
                            write_reply(
                                &mut framed,
                                sequence,
                                &ClientReply::error(wire::ERR_REJECTED, message),
                            )
                            .await
                        } else {
                            framed.write_frame(header(reply_op, sequence, 0), &body).await
                        }
                    }
                },
            }
        }
    };
    if let Err(error) = written {
        tracing::debug!(%peer, "stale answer not delivered: {error}");
    }
}

/// Reads the next frame of a command connection, or the first of any connection (`first`:
/// within that time, its length reserved of the gate's pre-authentication budget), else
/// within [`CLIENT_READ_TIMEOUT_MS`]; the whole frame must arrive in that time. `None`
/// when the connection is to be dropped (closed by the peer, bad frame, no room in the
/// budget, timeout, mbatchd stopping), after logging why.
async fn read_frame(
    framed: &mut FramedConn<TcpStream>,
    shared: &Shared,
    peer: SocketAddr,
    first: Option<(Duration, Reserver)>,
) -> Option<Frame> {
    let mut stopping = shared.stopping.subscribe();
    let is_first = first.is_some();
    let within = first.as_ref().map_or(Duration::from_millis(CLIENT_READ_TIMEOUT_MS), |(within, _)| *within);
    let reserve = |header: &lava_xdr::frame::FrameHeader| match first {
        Some((_, reserver)) => {
            reserver.reserve(header.length as usize).map_err(|refusal| refusal.to_string())
        }
        None => Ok(()),
    };
    let read = tokio::time::timeout(within, framed.read_frame_reserving(reserve));
    let read = tokio::select! {
        read = read => read,
        _ = stopping.wait_for(|stopping| *stopping) => return None,
    };
    match read {
        Ok(Ok(Some(frame))) => {
            shared.counters.frame(frame.header.operation);
            Some(frame)
        }
        Ok(Ok(None)) => {
            tracing::debug!(%peer, "connection closed by the peer");
            None
        }
        Ok(Err(error @ ConnError::Refused(_))) => {
            // Strangers can cause this at will: not logged above debug.
            tracing::debug!(%peer, "{error}; closing the connection");
            shared.counters.reject(Reject::Refused);
            None
        }
        Ok(Err(error)) => {
            tracing::warn!(%peer, "{error}; closing the connection");
            shared.counters.reject(Reject::Frame);
            None
        }
        Err(_) if is_first => {
            tracing::debug!(%peer, "no complete first frame within {within:?}; closing the connection");
            shared.counters.reject(Reject::Timeout);
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "idle for {CLIENT_READ_TIMEOUT_MS} ms; closing the connection");
            None
        }
    }
}

/// A command connection: one answer per request, in order, each echoing the
/// request's sequence.
async fn command_connection(
    mut framed: FramedConn<TcpStream>,
    first: Frame,
    peer: SocketAddr,
    pass: &mut Pass,
    shared: &Shared,
) {
    let mut next = Some(first);
    loop {
        let frame = match next.take() {
            Some(frame) => frame,
            None if !pass.is_authenticated() => {
                let read = tokio::select! {
                    read = read_frame(&mut framed, shared, peer, None) => read,
                    () = pass.evicted() => {
                        shared.counters.reject(Reject::Evicted);
                        None
                    }
                };
                match read {
                    Some(frame) => frame,
                    None => return,
                }
            }
            None => match read_frame(&mut framed, shared, peer, None).await {
                Some(frame) => frame,
                None => return,
            },
        };
        let sequence = frame.header.sequence;
        if frame.header.operation == Operation::HistoryQuery.code()
            && frame.header.check_version(BATCH_VERSION).is_ok()
        {
            if history_query(&mut framed, &frame, peer, shared).await {
                continue;
            }
            return;
        }
        if frame.header.operation == Operation::PeekJob.code()
            && frame.header.check_version(BATCH_VERSION).is_ok()
        {
            if peek::serve(&mut framed, &frame, peer, shared).await {
                continue;
            }
            return;
        }
        if let Some(op) = validate::read_operation(frame.header.operation)
            && frame.header.check_version(BATCH_VERSION).is_ok()
        {
            if read_query(&mut framed, &frame, op, peer, shared).await {
                continue;
            }
            return;
        }
        let call = match command(&frame, shared) {
            Ok(call) => {
                pass.authenticated();
                with_logged_submissions(call, shared).await.map_err(Ok)
            }
            Err(refusal) => Err(Err(refusal)),
        };
        let (reply, close) = match call {
            Err(Ok(reply)) => (reply, false),
            Ok(call) => {
                tracing::debug!(%peer, user = %call.caller().user, operation = frame.header.operation, "request");
                let (reply_to, reply) = oneshot::channel();
                if shared.events.send(ConnEvent::Client { peer, call, reply: reply_to }).await.is_err() {
                    return;
                }
                match reply.await {
                    Ok(reply) => (reply, false),
                    // The loop dropped the request: it is stopping.
                    Err(_) => return,
                }
            }
            Err(Err(refusal)) => {
                tracing::warn!(%peer, operation = frame.header.operation, "request refused: {}", refusal.message);
                shared.counters.reject(refusal.reason);
                (ClientReply::error(refusal.code, refusal.message), refusal.close)
            }
        };
        if let Err(error) = write_reply(&mut framed, sequence, &reply).await {
            tracing::debug!(%peer, "answer not delivered: {error}");
            return;
        }
        if close {
            return;
        }
    }
}

/// Answers one HOST_QUERY or QUEUE_QUERY frame; `false` when the connection is
/// to close. `bhosts` and `bqueues` read the state in memory: they confirm nothing
/// a client asked to change, so their answer does not wait for the log (unlike
/// every other answer).
async fn read_query(
    framed: &mut FramedConn<TcpStream>,
    frame: &Frame,
    op: Operation,
    peer: SocketAddr,
    shared: &Shared,
) -> bool {
    let sequence = frame.header.sequence;
    let query = match validate::read_query(op, &frame.body, &shared.auth, system_now_ms()) {
        Ok(query) => query,
        Err(refusal) => {
            tracing::warn!(%peer, "{} refused: {}", op.name(), refusal.message);
            shared.counters.reject(refusal.reason);
            let reply = ClientReply::error(refusal.code, refusal.message);
            return write_reply(framed, sequence, &reply).await.is_ok() && !refusal.close;
        }
    };
    let (reply_to, reply) = oneshot::channel();
    if shared.events.send(ConnEvent::Read { query, reply: reply_to }).await.is_err() {
        return false;
    }
    let Ok(reply) = reply.await else { return false };
    let (reply_op, body) = reply.encode();
    if body.len() > FRAME_BYTES_MAX as usize {
        let message = format!(
            "the answer is {} bytes, more than a frame may carry; name fewer hosts or queues",
            body.len()
        );
        return write_reply(framed, sequence, &ClientReply::error(wire::ERR_REJECTED, message)).await.is_ok();
    }
    match framed.write_frame(header(reply_op, sequence, 0), &body).await {
        Ok(()) => true,
        Err(error) => {
            tracing::debug!(%peer, "answer not delivered: {error}");
            false
        }
    }
}

/// Answers one HISTORY_QUERY frame (`bhist`) from the event log, read on a blocking
/// thread (`history`); `false` when the connection is to close.
async fn history_query(
    framed: &mut FramedConn<TcpStream>,
    frame: &Frame,
    peer: SocketAddr,
    shared: &Shared,
) -> bool {
    let sequence = frame.header.sequence;
    let reply = match validate::history_query(&frame.body, &shared.auth, system_now_ms()) {
        Ok((caller, query)) => {
            let log = Arc::clone(&shared.log);
            match tokio::task::spawn_blocking(move || crate::history::answer(&log, query, &caller)).await {
                Ok(Ok(reply)) => {
                    let body = encode(&reply);
                    if body.len() <= FRAME_BYTES_MAX as usize {
                        return match framed
                            .write_frame(header(Operation::HistoryQueryReply, sequence, 0), &body)
                            .await
                        {
                            Ok(()) => true,
                            Err(error) => {
                                tracing::debug!(%peer, "answer not delivered: {error}");
                                false
                            }
                        };
                    }
                    let message = format!(
                        "the answer is {} bytes, more than a frame may carry; name fewer jobs",
                        body.len()
                    );
                    ClientReply::error(wire::ERR_REJECTED, message)
                }
                Ok(Err(problem)) => {
                    tracing::warn!(%peer, "HISTORY_QUERY: {problem}");
                    ClientReply::error(wire::ERR_TRY_AGAIN, problem)
                }
                Err(error) => {
                    tracing::error!(%peer, "HISTORY_QUERY: the reading thread failed: {error}");
                    return false;
                }
            }
        }
        Err(refusal) => {
            tracing::warn!(%peer, "HISTORY_QUERY refused: {}", refusal.message);
            shared.counters.reject(refusal.reason);
            if refusal.close {
                let _ =
                    write_reply(framed, sequence, &ClientReply::error(refusal.code, refusal.message)).await;
                return false;
            }
            ClientReply::error(refusal.code, refusal.message)
        }
    };
    write_reply(framed, sequence, &reply).await.is_ok()
}

/// A `brequeue` JOB_CONTROL with the environments of the jobs it names, read
/// back from the disk on a blocking thread (`history::submissions`: the newest
/// snapshot and the JOB_NEW records): the logic needs the environment a
/// finished job no longer holds. A `brequeue` of running or pending jobs
/// only (no `-d`/`-e`) needs none and reads nothing. Any other call is
/// returned as it is.
async fn with_logged_submissions(call: ClientCall, shared: &Shared) -> Result<ClientCall, ClientReply> {
    let ClientCall::JobControl { request_id, caller, request } = call else { return Ok(call) };
    let wire::JobControlAction::Requeue { done, exit, .. } = request.action else {
        return Ok(ClientCall::JobControl { request_id, caller, request });
    };
    if !done && !exit {
        return Ok(ClientCall::Requeue { request_id, caller, request, submissions: Vec::new() });
    }
    let ids: BTreeSet<u32> = request.jobs.iter().map(|job| job.job_id).collect();
    let log = Arc::clone(&shared.log);
    let read = tokio::task::spawn_blocking(move || crate::history::submissions(&log, &ids)).await;
    match read {
        Ok(Ok(submissions)) => Ok(ClientCall::Requeue { request_id, caller, request, submissions }),
        Ok(Err(problem)) => Err(ClientReply::error(wire::ERR_TRY_AGAIN, problem)),
        Err(error) => {
            Err(ClientReply::error(wire::ERR_TRY_AGAIN, format!("the reading thread failed: {error}")))
        }
    }
}

/// Checks one command frame: version, operation, then `validate`.
fn command(frame: &Frame, shared: &Shared) -> Result<ClientCall, Refusal> {
    if let Err(error) = frame.header.check_version(BATCH_VERSION) {
        let message = error.to_string();
        return Err(Refusal { code: wire::ERR_UNSUPPORTED, message, reason: Reject::Version, close: true });
    }
    let Some(op) = Operation::from_code(frame.header.operation) else {
        let message = format!("unknown operation {}", frame.header.operation);
        return Err(Refusal { code: wire::ERR_UNSUPPORTED, message, reason: Reject::Operation, close: true });
    };
    validate::client_request(op, &frame.body, &shared.auth, system_now_ms())
}

/// Sends an answer; one too large for a frame becomes a REQUEST_FAILED saying so.
async fn write_reply(
    framed: &mut FramedConn<TcpStream>,
    sequence: u32,
    reply: &ClientReply,
) -> Result<(), ConnError> {
    let (mut body, mut status) = encode_reply(reply);
    let mut op = reply.operation();
    if body.len() > FRAME_BYTES_MAX as usize {
        let error = wire::ErrorReply {
            code: wire::ERR_REJECTED,
            message: format!(
                "the answer is {} bytes, more than the {FRAME_BYTES_MAX} bytes a frame may carry; select fewer jobs",
                body.len()
            ),
        };
        tracing::warn!("{}", error.message);
        (body, status, op) = (encode(&error), error.code, Operation::RequestFailed);
    }
    framed.write_frame(header(op, sequence, status), &body).await?;
    lava_crash::point!("mbatchd.reply_written");
    Ok(())
}

/// An sbatchd channel: authenticate SBD_REGISTER, then carry messages both
/// ways until either side closes it (the loop closes it by dropping `outbox`).
async fn sbd_channel(
    framed: FramedConn<TcpStream>,
    first: Frame,
    peer: SocketAddr,
    conn: ConnId,
    pass: &Pass,
    shared: &Shared,
) {
    if let Err(error) = first.header.check_version(BATCH_VERSION) {
        tracing::warn!(%peer, "SBD_REGISTER refused: {error}; closing the connection");
        shared.counters.reject(Reject::Version);
        return;
    }
    let payload = match shared.auth.open(&first, system_now_ms()) {
        Ok(payload) => payload,
        Err(error) => {
            tracing::warn!(%peer, "SBD_REGISTER refused: {error}; closing the connection");
            shared.counters.reject(Reject::SbdAuth);
            return;
        }
    };
    let (register, host) = match validate::sbd_register(&payload) {
        Ok(registered) => registered,
        Err((reason, message)) => {
            tracing::warn!(%peer, "{message}; closing the connection");
            shared.counters.reject(reason);
            return;
        }
    };
    if !shared.hosts.contains(&host) {
        tracing::warn!(%peer, %host, "SBD_REGISTER names a host that is not a server host of the cluster; closing");
        shared.counters.reject(Reject::UnknownHost);
        return;
    }
    pass.authenticated();
    let mut channel = AuthConn::new(framed, Arc::clone(&shared.auth));
    let (outbox, mut inbox) = mpsc::channel(SBD_OUTBOX_MESSAGES_MAX);
    let (relay, mut relays) = mpsc::channel(peek::RELAYS_QUEUED_MAX);
    let registered = ConnEvent::SbdRegistered {
        conn,
        peer,
        host: host.clone(),
        n_cpus: register.n_cpus,
        sbd_pid: register.sbd_pid,
        outbox,
        relay,
    };
    if shared.events.send(registered).await.is_err() {
        return;
    }
    let mut sequence: u32 = 0;
    // bpeek requests relayed to this sbatchd, by peek id, waiting for SBD_PEEK_REPLY.
    let mut peeks: std::collections::BTreeMap<u64, oneshot::Sender<wire::PeekReply>> = Default::default();
    let mut next_peek: u64 = 1;
    let mut messages = Vec::with_capacity(SBD_MESSAGES_PER_WRITE_MAX);
    loop {
        tokio::select! {
            Some(peek::Relay { request, reply }) = relays.recv() => {
                let peek_id = next_peek;
                next_peek += 1;
                peeks.retain(|_, waiting| !waiting.is_closed());
                peeks.insert(peek_id, reply);
                sequence = sequence.wrapping_add(1);
                let body = encode(&wire::SbdPeek { peek_id, request });
                if let Err(error) = channel.write_frame(header(Operation::SbdPeek, sequence, 0), &body).await {
                    tracing::warn!(%peer, %host, "cannot send SBD_PEEK: {error}; closing");
                    break;
                }
            }
            // The messages released together (a FINISH_ACK and the NEW_JOB of the job
            // dispatched in its place, typically) go in one write, so that sbatchd reads
            // and steps them together.
            received = inbox.recv_many(&mut messages, SBD_MESSAGES_PER_WRITE_MAX) => {
                if received == 0 {
                    tracing::debug!(%peer, %host, "channel closed by mbatchd");
                    break;
                }
                let bodies: Vec<(FrameHeader, Vec<u8>)> = messages
                    .iter()
                    .map(|message| {
                        sequence = sequence.wrapping_add(1);
                        (header(message.operation(), sequence, 0), encode_to_sbd(message))
                    })
                    .collect();
                let frames: Vec<(FrameHeader, &[u8])> =
                    bodies.iter().map(|(header, body)| (*header, body.as_slice())).collect();
                if let Err(error) = channel.write_frames(&frames).await {
                    let names: Vec<&str> = messages.iter().map(|message| message.operation().name()).collect();
                    tracing::warn!(%peer, %host, "cannot send {}: {error}; closing", names.join(", "));
                    break;
                }
                lava_crash::point!("mbatchd.sbd_message_written");
                messages.clear();
            }
            frame = channel.read_frame() => match frame {
                Ok(Some(frame)) => {
                    shared.counters.frame(frame.header.operation);
                    if let Err(error) = frame.header.check_version(BATCH_VERSION) {
                        tracing::warn!(%peer, %host, "{error}; closing the channel");
                        shared.counters.reject(Reject::Version);
                        break;
                    }
                    if frame.header.operation == Operation::SbdPeekReply.code() {
                        match lava_xdr::from_bytes::<wire::SbdPeekReply>(&frame.body, &crate::codec::MESSAGE_LIMITS) {
                            Ok(answer) => {
                                if let Some(waiting) = peeks.remove(&answer.peek_id) {
                                    let _gone = waiting.send(answer.reply);
                                }
                            }
                            Err(error) => {
                                tracing::warn!(%peer, %host, "malformed SBD_PEEK_REPLY: {error}; closing the channel");
                                shared.counters.reject(Reject::Body);
                                break;
                            }
                        }
                        continue;
                    }
                    match validate::sbd_message(frame.header.operation, &frame.body) {
                        Ok(message) => {
                            let event = ConnEvent::SbdMessage { conn, host: host.clone(), message };
                            if shared.events.send(event).await.is_err() {
                                break;
                            }
                        }
                        Err(SbdProblem::Invalid(error)) => {
                            tracing::warn!(%peer, %host, "dropped an invalid message: {error}");
                            shared.counters.reject(Reject::Invalid);
                        }
                        Err(SbdProblem::Operation(problem)) => {
                            tracing::warn!(%peer, %host, "{problem}; closing the channel");
                            shared.counters.reject(Reject::Operation);
                            break;
                        }
                        Err(SbdProblem::Body(problem)) => {
                            tracing::warn!(%peer, %host, "{problem}; closing the channel");
                            shared.counters.reject(Reject::Body);
                            break;
                        }
                    }
                }
                Ok(None) => {
                    tracing::debug!(%peer, %host, "sbatchd closed its channel");
                    break;
                }
                Err(ConnError::Auth(error)) => {
                    tracing::warn!(%peer, %host, "frame refused: {error}; closing the channel");
                    shared.counters.reject(Reject::SbdAuth);
                    break;
                }
                Err(error) => {
                    tracing::warn!(%peer, %host, "{error}; closing the channel");
                    shared.counters.reject(Reject::Frame);
                    break;
                }
            }
        }
    }
    drop(channel);
    // The loop may be stopping; then nobody needs to hear of the close.
    let _closed = shared.events.send(ConnEvent::SbdClosed { conn, host }).await;
}
