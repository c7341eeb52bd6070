//! The link among master candidates: each candidate's replication port, over which the
//! consensus messages of `lava-replog` travel (docs/failover.md, "The candidates' link").
//!
//! - One outgoing TCP connection per other candidate, opened when there is something to
//!   send and opened again, with backoff, after any failure. Messages wait in a bounded
//!   queue per candidate; when the queue is full or the candidate cannot be reached they
//!   are dropped and counted: the consensus protocol resends what matters, and a dead
//!   candidate must never cost the others memory.
//! - A listener that takes connections only from the candidates' addresses, through a
//!   `lava-net` gate (caps per source and in total, a deadline to authenticate, a budget
//!   for what unauthenticated connections may announce). Every frame is sealed with the
//!   cluster key like every daemon-to-daemon frame; the first bad one closes its
//!   connection and nothing else.
//! - Frames carry one message each: operation [`MESSAGE_OPERATION`], version
//!   [`LINK_VERSION`], the message as the body. Each message names its sender and its
//!   addressee inside, which `lava_replog::Replica::receive` checks.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lava_net::gate::{Gate, GateConfig, Source};
use lava_net::{AuthConn, Authenticator, Backoff, BackoffConfig, FramedConn, Timeouts, system_now_ms};
use lava_replog::ReplicaId;
use lava_xdr::frame::{FrameHeader, FrameLimits};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The operation code of a frame carrying one consensus message.
pub const MESSAGE_OPERATION: u32 = 1;
/// The version of the candidates' link.
pub const LINK_VERSION: u32 = 1;
/// Messages waiting for one candidate before more are dropped.
pub const QUEUE_MAX: usize = 4096;
/// Messages received and not yet taken by the daemon before more are dropped.
pub const INCOMING_MAX: usize = 8192;
/// Most frames written to one candidate in one write.
const BATCH_MAX: usize = 256;

/// How the link is set up.
#[derive(Clone)]
pub struct LinkConfig {
    /// This candidate's id (its rank in `LSF_MASTER_LIST`, from 1).
    pub id: ReplicaId,
    /// Every candidate's replication address, in `LSF_MASTER_LIST` order (candidate `k` is
    /// at `candidates[k - 1]`; this candidate's own entry is where it listens).
    pub candidates: Vec<SocketAddr>,
    /// The cluster key's sealer and opener.
    pub auth: Arc<Authenticator>,
    /// The listener's caps.
    pub gate: GateConfig,
    /// Time to open a connection to a candidate.
    pub connect_timeout: Duration,
}

impl LinkConfig {
    /// The link of a daemon on the master candidates (mbatchd's and the coordinator's):
    /// candidate `id` of `candidates`, at most 64 connections in all and 8 per address
    /// (docs/operations.md, "Connection limits"), 1 s to open a connection to a candidate.
    pub fn for_candidates(
        id: ReplicaId,
        candidates: Vec<SocketAddr>,
        auth: Arc<Authenticator>,
    ) -> LinkConfig {
        LinkConfig {
            id,
            candidates,
            auth,
            gate: GateConfig { total_max: 64, per_source_max: 8, ..GateConfig::DEFAULT },
            connect_timeout: Duration::from_secs(1),
        }
    }
}

/// The link's counters, for the daemon's status and metrics.
#[derive(Debug, Default)]
pub struct LinkCounters {
    /// Messages written to a candidate's connection.
    pub sent: AtomicU64,
    /// Messages dropped before sending: queue full, candidate unreachable, write failed.
    pub send_dropped: AtomicU64,
    /// Messages received from candidates.
    pub received: AtomicU64,
    /// Messages received but dropped because the daemon had not taken the earlier ones.
    pub receive_dropped: AtomicU64,
    /// Connections opened to candidates.
    pub connects: AtomicU64,
    /// Failed attempts to open one.
    pub connect_failures: AtomicU64,
    /// Connections refused or closed: not from a candidate's address, over a cap, not
    /// authenticated in time, a bad frame.
    pub refused: AtomicU64,
}

/// A running link; dropping it stops its tasks and closes its connections.
pub struct Link {
    outgoing: Vec<Option<mpsc::Sender<Vec<u8>>>>,
    incoming: mpsc::Receiver<Vec<u8>>,
    counters: Arc<LinkCounters>,
    tasks: Vec<JoinHandle<()>>,
}

impl Link {
    /// Starts the link: `listener` is bound to this candidate's replication address.
    pub fn start(config: LinkConfig, listener: TcpListener) -> Link {
        let counters = Arc::new(LinkCounters::default());
        let (incoming_tx, incoming) = mpsc::channel(INCOMING_MAX);
        let limits =
            FrameLimits { body_bytes_max: (lava_replog::MESSAGE_BYTES_MAX + lava_net::TRAILER_BYTES) as u32 };
        let mut tasks = Vec::new();
        let mut outgoing = Vec::new();
        for (at, addr) in config.candidates.iter().enumerate() {
            if at as u64 + 1 == config.id {
                outgoing.push(None);
                continue;
            }
            let (tx, rx) = mpsc::channel(QUEUE_MAX);
            outgoing.push(Some(tx));
            tasks.push(tokio::spawn(send_to(*addr, rx, config.clone(), limits, Arc::clone(&counters))));
        }
        let allowed: HashSet<IpAddr> = config.candidates.iter().map(|a| a.ip()).collect();
        tasks.push(tokio::spawn(listen(
            listener,
            allowed,
            config,
            limits,
            incoming_tx,
            Arc::clone(&counters),
        )));
        Link { outgoing, incoming, counters, tasks }
    }

    /// Queues `message` for candidate `to` (an [`lava_replog::Effect::Send`]); never waits.
    pub fn send(&self, to: ReplicaId, message: Vec<u8>) {
        let queue = usize::try_from(to)
            .ok()
            .and_then(|to| self.outgoing.get(to.checked_sub(1)?))
            .and_then(|q| q.as_ref());
        match queue.map(|queue| queue.try_send(message)) {
            Some(Ok(())) => {}
            _ => {
                self.counters.send_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The next message from a candidate, for `lava_replog::Replica::receive`.
    pub async fn recv(&mut self) -> Vec<u8> {
        match self.incoming.recv().await {
            Some(message) => message,
            // The listener task holds the sender for the link's whole life.
            None => std::future::pending().await,
        }
    }

    /// A message already received, if any, without waiting: a daemon takes every message
    /// waiting before it drains its replica, so that one fsync covers them all.
    pub fn try_recv(&mut self) -> Option<Vec<u8>> {
        self.incoming.try_recv().ok()
    }

    /// The link's counters.
    pub fn counters(&self) -> &LinkCounters {
        &self.counters
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// One candidate's outgoing side: connect when there is something to send, write what is
/// queued, drop it when the candidate cannot be reached (then wait a backoff delay before
/// trying again, dropping what comes meanwhile).
async fn send_to(
    addr: SocketAddr,
    mut queue: mpsc::Receiver<Vec<u8>>,
    config: LinkConfig,
    limits: FrameLimits,
    counters: Arc<LinkCounters>,
) {
    let seed = addr.port() as u64 ^ (config.id << 32) ^ system_now_ms();
    let mut backoff = Backoff::new(BackoffConfig { delay_ms_initial: 50, delay_ms_max: 2_000 }, seed);
    let timeouts =
        Timeouts { connect_timeout_ms: config.connect_timeout.as_millis() as u64, ..Timeouts::default() };
    let mut conn: Option<AuthConn<tokio::net::TcpStream>> = None;
    let mut quiet_until: Option<Instant> = None;
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let own = config.candidates[config.id as usize - 1].ip();
    while let Some(first) = queue.recv().await {
        batch.push(first);
        while batch.len() < BATCH_MAX {
            match queue.try_recv() {
                Ok(message) => batch.push(message),
                Err(_) => break,
            }
        }
        if conn.is_none() && quiet_until.is_none_or(|until| Instant::now() >= until) {
            match connect_from(own, addr, config.connect_timeout).await {
                Ok(stream) => {
                    let framed = FramedConn::new(stream, limits, timeouts);
                    counters.connects.fetch_add(1, Ordering::Relaxed);
                    conn = Some(AuthConn::new(framed, Arc::clone(&config.auth)));
                    backoff.reset();
                    quiet_until = None;
                }
                Err(error) => {
                    counters.connect_failures.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(%addr, %error, "cannot reach a master candidate");
                    quiet_until = Some(Instant::now() + Duration::from_millis(backoff.next_delay_ms()));
                }
            }
        }
        let n = batch.len() as u64;
        let Some(open) = conn.as_mut() else {
            counters.send_dropped.fetch_add(n, Ordering::Relaxed);
            batch.clear();
            continue;
        };
        let header = FrameHeader {
            sequence: 0,
            operation: MESSAGE_OPERATION,
            version: LINK_VERSION,
            length: 0,
            status: 0,
        };
        let frames: Vec<(FrameHeader, &[u8])> = batch.iter().map(|m| (header, m.as_slice())).collect();
        match open.write_frames(&frames).await {
            Ok(()) => {
                counters.sent.fetch_add(n, Ordering::Relaxed);
            }
            Err(error) => {
                tracing::debug!(%addr, %error, "lost the connection to a master candidate");
                counters.send_dropped.fetch_add(n, Ordering::Relaxed);
                conn = None;
            }
        }
        batch.clear();
    }
}

/// A connection to `addr` from this candidate's own address (`own`, port chosen by the
/// system), so that the other side sees the address it knows this candidate by — on a
/// host with several addresses, or several candidates on one machine.
async fn connect_from(
    own: IpAddr,
    addr: SocketAddr,
    timeout: Duration,
) -> std::io::Result<tokio::net::TcpStream> {
    let socket = match own {
        IpAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        IpAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    if !own.is_unspecified() {
        socket.bind(SocketAddr::new(own, 0))?;
    }
    let stream = tokio::time::timeout(timeout, socket.connect(addr))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, format!("connecting to {addr}")))??;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// The listening side: candidates' addresses only, through the gate, each connection on
/// its own task, owned here, so that stopping the link closes them all.
async fn listen(
    listener: TcpListener,
    allowed: HashSet<IpAddr>,
    config: LinkConfig,
    limits: FrameLimits,
    incoming: mpsc::Sender<Vec<u8>>,
    counters: Arc<LinkCounters>,
) {
    let gate = Gate::new(config.gate).with_pre_auth_budget(2 * lava_replog::MESSAGE_BYTES_MAX);
    let mut accept_backoff = lava_net::gate::AcceptBackoff::default();
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                accept_backoff.succeeded();
                accepted
            }
            Err(error) => {
                let (delay, _) = accept_backoff.failed(&error);
                tokio::time::sleep(delay).await;
                continue;
            }
        };
        if !allowed.contains(&peer.ip()) {
            counters.refused.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%peer, "refused a connection to the replication port: not a master candidate's address");
            continue;
        }
        let pass = match gate.admit(Source::Ip(peer.ip())) {
            Ok(pass) => pass,
            Err(refusal) => {
                counters.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%peer, %refusal, "refused a connection to the replication port");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let auth = Arc::clone(&config.auth);
        let incoming = incoming.clone();
        let counters = Arc::clone(&counters);
        connections.spawn(async move {
            if let Err(why) = receive_from(stream, pass, auth, limits, &incoming, &counters).await {
                counters.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%peer, %why, "closed a connection to the replication port");
            }
        });
    }
}

/// One candidate's incoming connection: the first frame authenticated within the gate's
/// deadline, then every frame until the candidate closes it. `Err` says why it was cut.
async fn receive_from(
    stream: tokio::net::TcpStream,
    mut pass: lava_net::gate::Pass,
    auth: Arc<Authenticator>,
    limits: FrameLimits,
    incoming: &mpsc::Sender<Vec<u8>>,
    counters: &LinkCounters,
) -> Result<(), String> {
    let mut framed = FramedConn::new(stream, limits, Timeouts::default());
    let reserver = pass.reserver();
    let deadline = pass.auth_deadline();
    let first = tokio::select! {
        read = tokio::time::timeout(
            deadline,
            framed.read_frame_reserving(|header| reserver.reserve(header.length as usize).map_err(|r| r.to_string())),
        ) => read.map_err(|_| "no authenticated frame before the deadline".to_string())?,
        () = pass.evicted() => return Err("evicted before authenticating".into()),
    };
    let Some(frame) = first.map_err(|e| e.to_string())? else { return Ok(()) };
    let payload = auth.open(&frame, system_now_ms()).map_err(|e| e.to_string())?;
    pass.authenticated();
    deliver(frame.header, payload.to_vec(), incoming, counters)?;
    let mut conn = AuthConn::new(framed, auth);
    loop {
        match conn.read_frame().await {
            Ok(Some(frame)) => deliver(frame.header, frame.body.to_vec(), incoming, counters)?,
            Ok(None) => return Ok(()),
            Err(lava_net::ConnError::ReadTimeout { .. }) => return Ok(()),
            Err(error) => return Err(error.to_string()),
        }
    }
}

fn deliver(
    header: FrameHeader,
    message: Vec<u8>,
    incoming: &mpsc::Sender<Vec<u8>>,
    counters: &LinkCounters,
) -> Result<(), String> {
    header.check_version(LINK_VERSION).map_err(|e| e.to_string())?;
    if header.operation != MESSAGE_OPERATION {
        return Err(format!("operation {} is not a replication message", header.operation));
    }
    counters.received.fetch_add(1, Ordering::Relaxed);
    match incoming.try_send(message) {
        Ok(()) => Ok(()),
        Err(mpsc::error::TrySendError::Full(_)) => {
            counters.receive_dropped.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        Err(mpsc::error::TrySendError::Closed(_)) => Err("the link is stopping".into()),
    }
}
