//! The event loop: one task owns all state (the master's logic while this node is the master,
//! the local locks, the connections' send queues); socket tasks only frame, authenticate,
//! decode and validate, and hand the result over as an [`Event`].
//!
//! # Mastering (docs/protocols/dlm.md, "Mastering and joining")
//! The lowest live node id is the master. A node looks for it by trying the nodes below its own
//! id, lowest first: a refused or timed-out connection, or a connection whose NODE_JOIN gets no
//! answer within a quarter of the node timeout (a hung node; skipped for a while), means that
//! node is down, so the next one is tried; a connection closed before the NODE_JOIN answer means
//! a live node that is not the master (yet), so the search starts over after a pause. When every lower node is down, this
//! node becomes the master: it starts lava-dlm-logic's [`Master`] (which rebuilds its table from
//! the survivors' reclaims before granting anything) with an epoch above every epoch it saw. A
//! master with lower node ids keeps probing them; when one answers as master, it steps down and
//! joins it (its connections close, so every node looks again).
//!
//! A node keeps its granted locks when its master goes (connection closed, or silent for half
//! the node timeout: the other half of its lease is left for the takeover) as long as its own
//! lease may still run — the send time of its last
//! acknowledged renewal plus the node timeout, which the master's lease cannot undercut. On
//! joining a new master it reclaims them (LOCK_GRANT with mode and token), passes on the
//! journal recoveries it knows to be pending (JOURNAL_RECOVER) and renews (LEASE_RENEW ends its
//! synchronisation); then releases that may have been lost go again, then waiting requests. A
//! lease that ran out, or a LEASE_EXPIRE naming this node, loses every lock (clients get LOST)
//! and the node joins again as a new incarnation (epoch 0).
//!
//! A master that has been without a quorum for the node timeout (it was cut off or stopped, and
//! the majority may have made another master meanwhile), or that is joined by a node carrying a
//! newer epoch, starts over: its own locks are lost and a new master life rebuilds the table
//! from whoever reclaims into it (a master that stepped in meanwhile steps down when it sees it).
//!
//! # Renewals to every peer
//! Every node sends LEASE_RENEW to every other configured node every `LAVA_MXFSD_RENEW_MS`
//! (lava-dlm-logic's [`Liveness`] says when and to whom, and keeps each peer's liveness from
//! the renewals heard). The renewal goes on a connection the two nodes already have: this node's
//! master connection (the renewal is then its lease, acknowledged by the master's logic); a
//! joined node's connection, from a master; otherwise a **peer link**, a connection between the
//! two that carries only LEASE_RENEW and LEASE_ACK: this node's own (opened at the renewal that
//! finds none), or one the peer opened (an accepted connection whose first message is a
//! LEASE_RENEW), used both ways. Every renewal is answered with LEASE_ACK on its connection
//! (from a node that is not the renewer's master: the node timeout, lock count 0). A master
//! hears its joined nodes' renewals as its logic's input and as liveness; the acknowledgements
//! of its own renewals are not its logic's business. A peer's death in this node's view is
//! logged and shown by `mxfsctl status`; only the master's logic declares deaths.
//!
//! # Files
//! This file holds the loop, its state and the handling of each event; beside it:
//! `server/sockets.rs` (the socket tasks), `server/mastering.rs` (finding, becoming and
//! leaving the master), `server/renewals.rs` (renewals to every peer), `server/status.rs`
//! (`mxfsctl status` and `locks`) and `server/client_io.rs` (the local clients' socket I/O).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use lava_dlm_ll::{DenyReason, Envelope, Epoch, LockId, LockMode, Message, NodeId, ResourceName};
use lava_dlm_logic::{
    Config, Effect, Input, Liveness, LivenessEffect, Master, NodeState, PeerState, Phase, is_down_conversion,
};
use lava_dlm_wire as wire;
use lava_net::gate::{AcceptBackoff, Gate, GateConfig, Pass, Source};
use lava_net::{AuthConfig, Authenticator, ClusterKey, KeyRing, Nonce, system_now_ms};
use lava_shell::readiness::Readiness;
use lava_shell::signals::{ShellSignal, Signals};
use lava_shell::startup;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::sync::mpsc;

use crate::client::{self, ErrorCode, Reply, Request};
use crate::counters::{Counters, REQUEST_KINDS, Refusal};
use crate::{Settings, epoch_file};

mod client_io;
mod mastering;
mod renewals;
mod sockets;
mod status;

use sockets::{accept_clients, accept_peers, deny_code, try_uplink};

/// Frames queued for one connection before it is considered stuck and closed.
const SEND_QUEUE_FRAMES_MAX: usize = 4096;
/// Events queued for the main loop.
const EVENT_QUEUE_MAX: usize = 4096;
/// Pause before the search for the master starts over after a live node refused to serve.
const RECONNECT_DELAY_MS: u64 = 300;
/// Longest wait for a TCP connect to another node.
const CONNECT_TIMEOUT_MS: u64 = 2_000;
/// How often a master with lower node ids looks whether one of them is back.
const PROBE_INTERVAL_MS: u64 = 1_000;
/// Delay before a failed recovery command is run again.
const RECOVERY_RETRY_MS: u64 = 5_000;
/// Longest the loop sleeps without looking at its timers.
const IDLE_WAKE_MS: u64 = 1_000;

enum Event {
    PeerUp { conn: u64, tx: mpsc::Sender<Vec<u8>> },
    PeerMessage { conn: u64, envelope: Envelope },
    PeerDown { conn: u64, reason: String },
    UplinkFailed { conn: u64, reason: String },
    ClientUp { client: u64, tx: mpsc::Sender<Vec<u8>>, uid: u32, may_lock: bool },
    ClientRequest { client: u64, request: Option<Request> },
    ClientDown { client: u64 },
    RecoveryDone { node: NodeId },
}

/// An accepted daemon connection.
struct Peer {
    tx: mpsc::Sender<Vec<u8>>,
    node: Option<NodeId>,
    /// A peer link (renewals only; see the module doc), bound to `node`.
    link: bool,
}

/// This node's own peer link to another node (odd connection ids, like the uplink's).
struct PeerLink {
    conn: u64,
    /// `None` while connecting.
    tx: Option<mpsc::Sender<Vec<u8>>>,
}

/// This node's connection to the master it joined, or to a candidate.
struct Uplink {
    conn: u64,
    node: NodeId,
    /// `None` while connecting.
    tx: Option<mpsc::Sender<Vec<u8>>>,
    /// The epoch the master gave us; `None` until its NODE_JOIN answer.
    joined: Option<Epoch>,
    master_epoch_seen: Epoch,
    join_sent_ms: u64,
    last_heard_ms: u64,
}

struct ClientConn {
    tx: mpsc::Sender<Vec<u8>>,
    uid: u32,
    /// Root, mxfsd's own user, or a member of `LAVA_MXFSD_GROUP` (or no group configured).
    may_lock: bool,
}

/// Who may use the client socket, and how many at once.
struct Access {
    group: Option<u32>,
    own_uid: u32,
    max_clients: usize,
    client_timeout: Duration,
    active: std::sync::atomic::AtomicUsize,
    counters: Arc<Counters>,
}

impl Access {
    /// Whether the caller may lock: see `LAVA_MXFSD_GROUP` in the crate doc.
    fn may_lock(&self, cred: &lava_net::PeerCred) -> bool {
        let Some(group) = self.group else { return true };
        if cred.uid == 0 || cred.uid == self.own_uid || cred.gid == group {
            return true;
        }
        // Supplementary groups: the kernel's view of the calling process.
        let Some(pid) = cred.pid else { return false };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
        status
            .lines()
            .find_map(|line| line.strip_prefix("Groups:"))
            .is_some_and(|groups| groups.split_whitespace().any(|gid| gid.parse::<u32>() == Ok(group)))
    }
}

/// Counts a client connection while it lives.
struct ClientSlot(Arc<Access>);

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A request of a local client not answered yet.
struct Pending {
    deadline_ms: Option<u64>,
    mode: LockMode,
    noqueue: bool,
    convert: bool,
    /// Not (or no longer) at a master: asked after the next join.
    resend: bool,
}

struct LocalLock {
    client: u64,
    resource: ResourceName,
    /// Held mode (or, while not granted yet, the one asked for).
    mode: LockMode,
    token: Option<u64>,
    pending: Option<Pending>,
}

impl LocalLock {
    /// The mode to reclaim from a new master: the one the client relies on.
    fn reclaim_mode(&self) -> LockMode {
        match &self.pending {
            Some(Pending { convert: true, mode, .. }) if is_down_conversion(self.mode, *mode) => *mode,
            _ => self.mode,
        }
    }
}

struct State {
    settings: Settings,
    auth: Arc<Authenticator>,
    counters: Arc<Counters>,
    origin: Instant,
    events: mpsc::Sender<Event>,
    master: Option<Master>,
    peers: BTreeMap<u64, Peer>,
    node_conns: BTreeMap<NodeId, u64>,
    uplink: Option<Uplink>,
    next_uplink_conn: u64,
    /// The next node to try while looking for the master.
    candidate: NodeId,
    next_attempt_ms: u64,
    backlog: Vec<Message>,
    clients: BTreeMap<u64, ClientConn>,
    locks: BTreeMap<u64, LocalLock>,
    next_lock: u64,
    seq: u32,
    master_inbox: VecDeque<(Option<u64>, Input)>,
    local_inbox: VecDeque<Message>,
    /// Renewals to every peer and their liveness, in this node's view.
    liveness: Liveness,
    /// This node's own peer links, by peer.
    links: BTreeMap<NodeId, PeerLink>,
    /// The epoch of this incarnation's last join (0: none; a new incarnation).
    prev_epoch: Epoch,
    /// The largest epoch any master showed us (a new master goes above it).
    max_epoch_seen: Epoch,
    /// Until when the master's lease on this node runs at the least.
    lease_until_ms: u64,
    /// Send times of LEASE_RENEWs not acknowledged yet.
    renews_in_flight: VecDeque<u64>,
    /// The master epoch whose synchronisation was acknowledged.
    synced_epoch: Option<Epoch>,
    sync_pending: bool,
    /// Journal recoveries heard of and not done (this node's previous incarnation's from a
    /// fresh join on): passed on to a new master.
    recoveries: BTreeSet<NodeId>,
    /// LOCK_RELEASEs not known to have reached the master: (send time, lock, resource).
    released: Vec<(u64, u64, ResourceName)>,
    /// Locks reclaimed from a new master and not answered yet.
    reclaiming: BTreeSet<u64>,
    /// Nodes that took a connection but did not answer NODE_JOIN (hung, stopped), skipped by
    /// the search until the given time.
    unresponsive: BTreeMap<NodeId, u64>,
    /// This master had a quorum since it started (or restarted).
    had_quorum: bool,
    /// Since when this master has been without a quorum.
    quorum_lost_at_ms: Option<u64>,
}

pub(crate) async fn serve(settings: Settings) -> anyhow::Result<()> {
    let key = ClusterKey::load(&settings.key_file)
        .with_context(|| format!("load the cluster key {}", settings.key_file.display()))?;
    let auth = Arc::new(Authenticator::new(KeyRing::new(&key), AuthConfig::default()));
    // Refuse to start on an unreadable epoch file rather than after a takeover.
    epoch_file::load(&settings.epoch_path)?;
    let listener = TcpListener::bind(settings.listen_addr)
        .await
        .with_context(|| format!("bind TCP {}", settings.listen_addr))?;
    let port = listener.local_addr().context("the bound address")?.port();
    let socket_path = settings.socket_path.clone();
    if let Some(folder) = socket_path.parent() {
        std::fs::create_dir_all(folder).with_context(|| format!("create {}", folder.display()))?;
    }
    match std::fs::remove_file(&socket_path) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error).with_context(|| format!("remove {}", socket_path.display())),
    }
    let unix = UnixListener::bind(&socket_path).with_context(|| format!("bind {}", socket_path.display()))?;
    if settings.lock_group.is_some() {
        // Everyone may connect (STATUS, LOCKS); the daemon decides who may lock.
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&socket_path, std::fs::Permissions::from_mode(0o666))
            .with_context(|| format!("chmod {}", socket_path.display()))?;
    }
    let own_uid = {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata("/proc/self").context("read /proc/self")?.uid()
    };
    let counters = Arc::new(Counters::default());
    let access = Arc::new(Access {
        group: settings.lock_group,
        own_uid,
        max_clients: settings.max_clients,
        client_timeout: Duration::from_millis(settings.client_timeout_ms),
        active: std::sync::atomic::AtomicUsize::new(0),
        counters: Arc::clone(&counters),
    });
    let (events, mut events_rx) = mpsc::channel(EVENT_QUEUE_MAX);
    let origin = Instant::now();
    let lowest = settings.nodes.iter().map(|node| node.id).min().expect("this node is configured");
    let mut state = State {
        auth: Arc::clone(&auth),
        counters: Arc::clone(&counters),
        origin,
        events: events.clone(),
        master: None,
        peers: BTreeMap::new(),
        node_conns: BTreeMap::new(),
        uplink: None,
        next_uplink_conn: 1,
        candidate: lowest,
        next_attempt_ms: 0,
        backlog: Vec::new(),
        clients: BTreeMap::new(),
        locks: BTreeMap::new(),
        // Lock ids of a new incarnation never meet the previous one's (the epoch fences them
        // anyway; distinct ids keep the logs readable).
        next_lock: system_now_ms() << 16,
        seq: 0,
        master_inbox: VecDeque::new(),
        local_inbox: VecDeque::new(),
        liveness: Liveness::new(
            settings.me,
            settings.nodes.iter().map(|node| node.id),
            settings.node_timeout_ms,
            settings.lease_renew_ms,
            origin.elapsed().as_millis() as u64 + 1,
        ),
        links: BTreeMap::new(),
        prev_epoch: Epoch(0),
        max_epoch_seen: Epoch(0),
        lease_until_ms: 0,
        renews_in_flight: VecDeque::new(),
        synced_epoch: None,
        sync_pending: false,
        recoveries: BTreeSet::new(),
        released: Vec::new(),
        reclaiming: BTreeSet::new(),
        unresponsive: BTreeMap::new(),
        had_quorum: false,
        quorum_lost_at_ms: None,
        settings: settings.clone(),
    };
    tokio::spawn(accept_peers(listener, Arc::clone(&auth), Arc::clone(&counters), events.clone()));
    tokio::spawn(accept_clients(unix, events.clone(), access));
    // The lowest node is the master from the start; the others look for it.
    state.seek_master(state.now_ms())?;
    if let Some(path) = &settings.ready_file {
        startup::write_atomically(path, &format!("{port}\n"))?;
    }
    tracing::info!(
        node = %settings.me,
        host = %settings.my_name,
        port,
        socket = %socket_path.display(),
        master = state.is_master(),
        epoch = %state.master.as_ref().map_or(Epoch(0), Master::epoch),
        "mxfsd ready"
    );
    // systemd (Type=notify): READY now, WATCHDOG from the loop (woken at least every second).
    let mut readiness = Readiness::from_env();
    readiness.ready(&format!("node {} serving on port {port}", settings.me));
    let mut signals = Signals::register().context("install the signal handlers")?;
    let mut scrapes = lava_shell::metrics::start_for_loop(settings.metrics)?;
    // One timer, moved only when the next deadline changes (not a new one per event).
    // Deadlines are whole milliseconds of `state`'s clock, turned into instants from one
    // fixed base, so the same deadline is always the same instant.
    let (base_instant, base_ms) = (tokio::time::Instant::now(), state.now_ms());
    let timer = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(timer);
    loop {
        let now_ms = state.now_ms();
        state.timers(now_ms)?;
        state.pump()?;
        readiness.pet();
        // At least once a second, so that the watchdog is petted while nothing happens:
        // at the next whole second, which stays the same for a whole second so that
        // the timer is not moved on every turn of a busy loop.
        let deadline_ms = state.next_deadline_ms(now_ms).min((now_ms / 1_000 + 1) * 1_000);
        let wake = base_instant + Duration::from_millis(deadline_ms.saturating_sub(base_ms));
        if timer.deadline() != wake {
            timer.as_mut().reset(wake);
        }
        tokio::select! {
            event = events_rx.recv() => {
                let Some(event) = event else { break };
                state.event(event);
                // Take whatever else is already queued before looking at the timers again.
                while let Ok(event) = events_rx.try_recv() {
                    state.event(event);
                    state.pump()?;
                }
            }
            () = &mut timer => {}
            Some(scrape) = lava_shell::metrics::next_scrape(&mut scrapes) => {
                scrape.answer(crate::metrics::metrics(state.counters.snapshot().into_iter().chain(state.gauges())));
            }
            signal = signals.next() => match signal {
                ShellSignal::Stop(_) => break,
                ShellSignal::Reload => {
                    tracing::info!("SIGHUP: nothing to reload (mxfsd reads its configuration at start; restart it)");
                }
            },
        }
        state.pump()?;
    }
    readiness.stopping("stopping");
    state.shutdown().await;
    let _gone = std::fs::remove_file(&socket_path);
    tracing::info!("mxfsd stopped");
    Ok(())
}

impl State {
    fn now_ms(&self) -> u64 {
        // Never 0, so that "at or before now" comparisons with a zero start behave.
        self.origin.elapsed().as_millis() as u64 + 1
    }

    fn is_master(&self) -> bool {
        self.master.is_some()
    }

    fn lowest(&self) -> NodeId {
        self.settings.nodes.iter().map(|node| node.id).min().expect("this node is configured")
    }

    /// The node this node takes as its master now, if any.
    fn current_master(&self) -> Option<NodeId> {
        if self.is_master() {
            return Some(self.settings.me);
        }
        self.uplink.as_ref().filter(|uplink| uplink.joined.is_some()).map(|uplink| uplink.node)
    }

    fn next_deadline_ms(&self, now_ms: u64) -> u64 {
        let mut deadline = now_ms + IDLE_WAKE_MS;
        if let Some(master) = &self.master {
            deadline = deadline.min(master.next_deadline_ms());
        }
        if let Some(since) = self.quorum_lost_at_ms {
            deadline = deadline.min(since + self.settings.node_timeout_ms);
        }
        deadline = deadline.min(self.liveness.next_deadline_ms());
        if let Some(uplink) = &self.uplink {
            if uplink.joined.is_some() {
                deadline = deadline.min(uplink.last_heard_ms + self.silence_ms());
            } else {
                deadline = deadline.min(uplink.join_sent_ms + self.join_wait_ms());
            }
        } else if self.seeking() {
            deadline = deadline.min(self.next_attempt_ms);
        }
        if !self.is_master() && self.prev_epoch != Epoch(0) && self.current_master().is_none() {
            deadline = deadline.min(self.lease_until_ms);
        }
        for lock in self.locks.values() {
            if let Some(Pending { deadline_ms: Some(at), .. }) = lock.pending {
                deadline = deadline.min(at);
            }
        }
        deadline
    }

    /// A master silent this long is taken for dead: half the node timeout, so that the other
    /// half of this node's lease is left to find the next master and reclaim the locks.
    fn silence_ms(&self) -> u64 {
        self.settings.node_timeout_ms / 2
    }

    /// How long a candidate that took the connection may take to answer NODE_JOIN.
    fn join_wait_ms(&self) -> u64 {
        (self.settings.node_timeout_ms / 4).max(self.settings.lease_renew_ms)
    }

    /// Whether this node looks for a master: always without one, and as a master while a lower
    /// node might come back.
    fn seeking(&self) -> bool {
        !self.is_master() || self.settings.me > self.lowest()
    }

    /// Lease expiry and rebuild (master), renewals to every peer and their liveness, master
    /// silence (node), the lease of a node without a master, the search for the master, client
    /// timeouts.
    fn timers(&mut self, now_ms: u64) -> anyhow::Result<()> {
        if let Some(master) = &self.master
            && master.next_deadline_ms() <= now_ms
        {
            self.master_inbox.push_back((None, Input::Tick));
        }
        if let Some(master) = &self.master {
            // A master without a quorum for a node timeout cannot tell whether the majority
            // made another master meanwhile: its table may be stale and its own locks fenced.
            // It starts over (once per loss of the quorum); the nodes reclaim into the new table.
            if master.has_quorum() {
                self.had_quorum = true;
                self.quorum_lost_at_ms = None;
            } else if self.had_quorum {
                let since = *self.quorum_lost_at_ms.get_or_insert(now_ms);
                if now_ms >= since + self.settings.node_timeout_ms {
                    tracing::warn!("no quorum for the node timeout; starting over with a new lock table");
                    self.had_quorum = false;
                    self.quorum_lost_at_ms = None;
                    self.restart_master();
                }
            }
        }
        if let Some(uplink) = &self.uplink {
            let timeout = self.settings.node_timeout_ms;
            if uplink.joined.is_some() && now_ms >= uplink.last_heard_ms + self.silence_ms() {
                self.lose_master("the master was silent for half the node timeout");
            } else if uplink.joined.is_none()
                && uplink.tx.is_some()
                && now_ms >= uplink.join_sent_ms + self.join_wait_ms()
            {
                // It accepts connections but does not answer (hung, stopped): as good as down.
                tracing::info!(node = %uplink.node, "no answer to NODE_JOIN; trying the next node");
                let (node, next) = (uplink.node, NodeId::new(uplink.node.get() + 1).expect("not zero"));
                self.unresponsive.insert(node, now_ms + 2 * timeout);
                self.uplink = None;
                self.candidate = next;
                self.next_attempt_ms = now_ms;
            }
        }
        for effect in self.liveness.tick(now_ms) {
            self.liveness_effect(effect);
        }
        if !self.is_master()
            && self.prev_epoch != Epoch(0)
            && self.current_master().is_none()
            && now_ms >= self.lease_until_ms
        {
            self.fence_out("the lease ran out without a master");
        }
        if self.uplink.is_none() && self.seeking() && now_ms >= self.next_attempt_ms {
            self.seek_master(now_ms)?;
        }
        let expired: Vec<u64> = self
            .locks
            .iter()
            .filter(|(_, lock)| {
                matches!(lock.pending, Some(Pending { deadline_ms: Some(at), .. }) if at <= now_ms)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            let lock = self.locks.remove(&id).expect("listed above");
            let message = if lock.token.is_some() {
                "timed out waiting for the conversion; the lock was released"
            } else {
                "timed out waiting for the lock"
            };
            self.reply(lock.client, Reply::Error { code: ErrorCode::Timeout, message: message.to_owned() });
            self.release(id, lock.resource);
        }
        Ok(())
    }

    /// Asks again every request that is not (or no longer) at a master.
    fn resend_pending(&mut self) {
        let mut again = Vec::new();
        for (id, lock) in &mut self.locks {
            if let Some(pending) = &mut lock.pending
                && pending.resend
            {
                pending.resend = false;
                again.push(Message::Lock {
                    lock: LockId(*id),
                    resource: lock.resource.clone(),
                    mode: pending.mode,
                    noqueue: pending.noqueue,
                    convert: pending.convert,
                });
            }
        }
        for message in again {
            self.send_to_master(message);
        }
    }

    fn event(&mut self, event: Event) {
        match event {
            Event::PeerUp { conn, tx } => {
                if let Some(uplink) = self.uplink.as_mut().filter(|uplink| uplink.conn == conn) {
                    tracing::info!(node = %uplink.node, "connected to a candidate master; joining");
                    uplink.tx = Some(tx);
                    self.send_join();
                } else if let Some(node) = self.link_node(conn) {
                    tracing::debug!(%node, conn, "peer link open");
                    self.links.get_mut(&node).expect("found above").tx = Some(tx);
                    // The peer hears from this node at once.
                    self.renew(node);
                } else if conn % 2 == 0 {
                    self.peers.insert(conn, Peer { tx, node: None, link: false });
                }
            }
            Event::PeerMessage { conn, envelope } => {
                let accepted_link = self.peers.get(&conn).is_some_and(|peer| {
                    peer.link
                        || (peer.node.is_none() && matches!(envelope.message, Message::LeaseRenew { .. }))
                });
                if self.uplink.as_ref().is_some_and(|uplink| uplink.conn == conn) {
                    self.on_uplink_message(envelope);
                } else if self.link_node(conn).is_some() || accepted_link {
                    self.on_peer_link_message(conn, envelope);
                } else if self.is_master() {
                    self.on_peer_message(conn, envelope);
                } else if self.peers.remove(&conn).is_some() {
                    tracing::info!(conn, sender = %envelope.sender, "connection from a node closed: this node is not the lock master");
                }
            }
            Event::PeerDown { conn, reason } => {
                if let Some(node) = self.link_node(conn) {
                    tracing::debug!(%node, conn, %reason, "peer link closed; opened again at the next renewal");
                    self.links.remove(&node);
                }
                if let Some(peer) = self.peers.remove(&conn) {
                    tracing::info!(conn, node = ?peer.node.map(NodeId::get), %reason, "daemon connection closed");
                    if let Some(node) = peer.node
                        && self.node_conns.get(&node) == Some(&conn)
                    {
                        self.node_conns.remove(&node);
                    }
                }
                if let Some(uplink) = self.uplink.as_ref().filter(|uplink| uplink.conn == conn) {
                    if uplink.joined.is_some() {
                        self.lose_master(&format!("master connection closed: {reason}"));
                    } else {
                        // A live node that is not the master (yet): look again shortly.
                        tracing::debug!(node = %uplink.node, %reason, "candidate refused to serve");
                        self.drop_uplink(self.now_ms() + RECONNECT_DELAY_MS);
                    }
                }
            }
            Event::UplinkFailed { conn, reason } => {
                if let Some(node) = self.link_node(conn) {
                    tracing::debug!(%node, %reason, "no peer link; tried again at the next renewal");
                    self.links.remove(&node);
                }
                if let Some(uplink) = self.uplink.as_ref().filter(|uplink| uplink.conn == conn) {
                    // That node is down: the next one is tried at once.
                    tracing::debug!(node = %uplink.node, %reason, "candidate master unreachable");
                    let next = NodeId::new(uplink.node.get() + 1).expect("not zero");
                    self.uplink = None;
                    self.candidate = next;
                    self.next_attempt_ms = 0;
                }
            }
            Event::ClientUp { client, tx, uid, may_lock } => {
                self.clients.insert(client, ClientConn { tx, uid, may_lock });
            }
            Event::ClientRequest { client, request } => match request {
                Some(request) => self.client_request(client, request),
                None => {
                    self.counters.client_request(REQUEST_KINDS.len() - 1);
                    tracing::info!(client, "malformed client request; connection closed");
                }
            },
            Event::ClientDown { client } => {
                self.clients.remove(&client);
                let owned: Vec<u64> =
                    self.locks.iter().filter(|(_, lock)| lock.client == client).map(|(id, _)| *id).collect();
                for id in owned {
                    let lock = self.locks.remove(&id).expect("listed above");
                    self.release(id, lock.resource);
                }
            }
            Event::RecoveryDone { node } => {
                lava_crash::point!("mxfsd.recovery_done");
                if self.is_master() {
                    self.master_inbox.push_back((None, Input::RecoveryDone { node }));
                }
            }
        }
    }

    /// The peer whose link (this node's own) is connection `conn`.
    fn link_node(&self, conn: u64) -> Option<NodeId> {
        self.links.iter().find(|(_, link)| link.conn == conn).map(|(node, _)| *node)
    }

    /// NODE_JOIN to the candidate: with this incarnation's last epoch to reclaim its locks
    /// (a master probing a lower node: its own epoch), with 0 as a new incarnation.
    fn send_join(&mut self) {
        let now_ms = self.now_ms();
        if let Some(master) = &self.master {
            self.prev_epoch = master.epoch();
        } else if self.prev_epoch != Epoch(0) && now_ms >= self.lease_until_ms {
            self.fence_out("the lease ran out before a new master was found");
        }
        let epoch = self.prev_epoch;
        let join =
            Message::NodeJoin { name: self.settings.my_name.clone(), port: self.settings.listen_addr.port() };
        let Some(uplink) = self.uplink.as_mut() else { return };
        uplink.join_sent_ms = now_ms;
        self.renews_in_flight.clear();
        self.sync_pending = false;
        self.send_uplink(epoch, join);
    }

    /// A message from another daemon, at the master.
    fn on_peer_message(&mut self, conn: u64, envelope: Envelope) {
        let Some(peer) = self.peers.get(&conn) else { return };
        if let Message::NodeJoin { .. } = envelope.message
            && let Some(master) = &self.master
            && master.phase() == Phase::Serving
            && envelope.epoch > master.epoch()
        {
            // A master with a newer epoch ran while this one was cut off (stopped, partitioned):
            // this table is stale and this node's own locks were fenced there.
            tracing::warn!(sender = %envelope.sender, epoch = %envelope.epoch, ours = %master.epoch(), "a newer master ran meanwhile; starting over with a new lock table");
            self.max_epoch_seen = self.max_epoch_seen.max(envelope.epoch);
            self.restart_master();
            return;
        }
        let joining = matches!(envelope.message, Message::NodeJoin { .. });
        let bound_elsewhere = peer.node.is_some_and(|node| node != envelope.sender);
        if bound_elsewhere || (peer.node.is_none() && !joining) {
            self.counters.refused(Refusal::Stranger);
            tracing::info!(conn, sender = %envelope.sender, "message from a node this connection does not belong to; closed");
            self.peers.remove(&conn);
            return;
        }
        match envelope.message {
            // The node acknowledges this node's own renewal: nothing for the logic.
            Message::LeaseAck { .. } if peer.node.is_some() => return,
            // A joined node's lease renewal is also its liveness.
            Message::LeaseRenew { .. } if peer.node.is_some() => self.heard_renewal(envelope.sender),
            _ => {}
        }
        self.master_inbox.push_back((Some(conn), Input::Message(envelope)));
    }

    /// A message on the uplink, from the master (or the candidate).
    fn on_uplink_message(&mut self, envelope: Envelope) {
        let now_ms = self.now_ms();
        let me = self.settings.me;
        let Some(uplink) = self.uplink.as_mut() else { return };
        if envelope.sender != uplink.node {
            self.counters.refused(Refusal::Stranger);
            tracing::info!(sender = %envelope.sender, "message from another node on the master connection; closed");
            return self.lose_master("a stranger spoke on the master connection");
        }
        if envelope.epoch < uplink.master_epoch_seen {
            self.counters.refused(Refusal::StaleEpoch);
            tracing::info!(got = %envelope.epoch, seen = %uplink.master_epoch_seen, "stale epoch from the master; connection closed");
            return self.lose_master("stale epoch from the master");
        }
        uplink.master_epoch_seen = envelope.epoch;
        uplink.last_heard_ms = now_ms;
        self.max_epoch_seen = self.max_epoch_seen.max(envelope.epoch);
        match envelope.message {
            Message::NodeJoin { .. } => {
                if uplink.joined == Some(envelope.epoch) {
                    return;
                }
                self.step_down();
                self.joined(envelope.epoch);
            }
            Message::LeaseExpire { node } if node == me && self.master.is_some() => {
                // A lower node, cut off from us and still serving its old table, refuses this
                // master's probe: it is not our master; it starts over when it notices that it
                // lacks a quorum, and the next probe finds that.
                tracing::info!(node = %envelope.sender, "a lower node refused this master's probe");
                self.drop_uplink(now_ms + PROBE_INTERVAL_MS);
            }
            Message::LeaseExpire { node } if node == me => {
                self.fence_out("the master declared this node dead");
                self.lose_master("the master declared this node dead");
            }
            Message::LeaseRenew { .. } if uplink.joined.is_some() => {
                // The master's renewal to this node (not this node's lease): its liveness.
                let (master, epoch) = (uplink.node, uplink.joined.expect("checked"));
                self.heard_renewal(master);
                let ack = self.peer_ack(master);
                self.send_uplink(epoch, ack);
            }
            message if uplink.joined.is_some() => self.local_inbox.push_back(message),
            _ => {}
        }
    }

    fn send_uplink(&mut self, epoch: Epoch, message: Message) {
        let Some(uplink) = &self.uplink else { return };
        let (Some(tx), node) = (uplink.tx.clone(), uplink.node) else { return };
        if matches!(message, Message::LeaseRenew { .. }) {
            self.renews_in_flight.push_back(self.now_ms());
        }
        if !self.send_frame(&tx, node, epoch, &message) {
            self.lose_master("send queue to the master is full");
        }
    }
    /// Seals and queues one frame; false when the connection's queue is full.
    fn send_frame(
        &mut self,
        tx: &mpsc::Sender<Vec<u8>>,
        to: NodeId,
        epoch: Epoch,
        message: &Message,
    ) -> bool {
        self.seq = self.seq.wrapping_add(1);
        let envelope = wire::Envelope {
            seq: self.seq,
            sender: self.settings.me.get(),
            target: to.get(),
            epoch: epoch.0,
        };
        let message = message.to_wire();
        let mut bytes = wire::encode_unsealed(envelope, &message);
        let nonce = match Nonce::fresh() {
            Ok(nonce) => nonce,
            Err(error) => {
                tracing::error!(%error, "no random nonce; frame not sent");
                return true;
            }
        };
        let trailer = self.auth.seal_bytes(&bytes, system_now_ms(), nonce);
        bytes.extend_from_slice(&trailer);
        let queued = tx.try_send(bytes);
        if queued.is_ok() {
            self.counters.sent(message.msg_type());
        }
        !matches!(queued, Err(mpsc::error::TrySendError::Full(_)))
    }

    /// Sends LOCK_RELEASE and remembers it until a later renewal is acknowledged: a lost
    /// connection may have lost it, and it goes again after the next join.
    fn release(&mut self, id: u64, resource: ResourceName) {
        if !self.is_master() {
            self.released.push((self.now_ms(), id, resource.clone()));
        }
        self.send_to_master(Message::Release { lock: LockId(id), resource });
    }

    /// Steps the master and delivers local messages until nothing is left to do.
    fn pump(&mut self) -> anyhow::Result<()> {
        loop {
            if let Some((conn, input)) = self.master_inbox.pop_front() {
                let now_ms = self.now_ms();
                let Some(master) = self.master.as_mut() else { continue };
                let effects = master.step(now_ms, input);
                self.carry_out(conn, effects)?;
                continue;
            }
            if let Some(message) = self.local_inbox.pop_front() {
                self.on_master_message(message);
                continue;
            }
            return Ok(());
        }
    }

    /// The logic's effects, in order (see lava-dlm-logic's shell contract).
    fn carry_out(&mut self, conn: Option<u64>, effects: Vec<Effect>) -> anyhow::Result<()> {
        for effect in effects {
            match effect {
                Effect::PersistEpoch(epoch) => {
                    epoch_file::store(&self.settings.epoch_path, epoch)
                        .context("persist the epoch (refusing to send with an epoch not on disk)")?;
                    lava_crash::synced(&self.settings.epoch_path);
                    lava_crash::point!("mxfsd.epoch_durable");
                    tracing::info!(%epoch, "epoch persisted");
                }
                Effect::Send { to, epoch, message } => {
                    if matches!(message, Message::Bast { .. }) {
                        self.counters.bast();
                    }
                    if to == self.settings.me {
                        self.local_inbox.push_back(message);
                        continue;
                    }
                    // A node that has not joined is answered on the connection it spoke on.
                    let route =
                        self.node_conns.get(&to).copied().or(conn.filter(|c| self.peers.contains_key(c)));
                    if let Some(route) = route
                        && let Some(peer) = self.peers.get(&route)
                    {
                        let tx = peer.tx.clone();
                        if !self.send_frame(&tx, to, epoch, &message) {
                            tracing::warn!(node = %to, "send queue full; connection closed");
                            self.peers.remove(&route);
                            self.node_conns.remove(&to);
                        }
                    } else {
                        tracing::debug!(node = %to, message = message.to_wire().name(), "no connection; not sent");
                    }
                }
                Effect::RunRecovery { node, slot } => self.run_recovery(node, slot),
                Effect::Drop { from, reason } => {
                    tracing::info!(node = %from, reason = %reason.describe(), "message dropped");
                    if reason.closes_connection()
                        && let Some(conn) = conn
                    {
                        self.peers.remove(&conn);
                        if self.node_conns.get(&from) == Some(&conn) {
                            self.node_conns.remove(&from);
                        }
                    }
                }
                Effect::NodeJoined { node, epoch } => {
                    tracing::info!(%node, %epoch, "node joined");
                    if let Some(conn) = conn
                        && let Some(peer) = self.peers.get_mut(&conn)
                    {
                        peer.node = Some(node);
                        if let Some(old) = self.node_conns.insert(node, conn)
                            && old != conn
                        {
                            // What still arrives on the node's previous connection is not taken.
                            self.peers.remove(&old);
                        }
                    }
                }
                Effect::NodeDead { node } => {
                    tracing::warn!(%node, "node declared dead: lease expired, restarted or not back after a takeover; its locks are fenced")
                }
                Effect::NodeRecovered { node } => tracing::info!(%node, "journal recovery done"),
                Effect::NodeLeft { node } => tracing::info!(%node, "node left"),
                Effect::RebuildDone => tracing::info!("lock table rebuilt; serving"),
                Effect::Revoked { node, lock, resource } => {
                    self.counters.bast_timeout();
                    tracing::warn!(%node, lock = lock.0, %resource, bast_timeout_ms = self.settings.bast_timeout_ms, "BAST not answered in time; lock revoked");
                }
            }
        }
        Ok(())
    }

    fn run_recovery(&mut self, node: NodeId, slot: u32) {
        let Some(command) = self.settings.recovery_cmd.clone() else {
            tracing::info!(%node, slot, "journal recovery recorded (no LAVA_MXFSD_RECOVERY_CMD configured)");
            lava_crash::point!("mxfsd.recovery_started");
            lava_crash::point!("mxfsd.recovery_done");
            self.master_inbox.push_back((None, Input::RecoveryDone { node }));
            return;
        };
        tracing::info!(%node, slot, %command, "journal recovery started");
        lava_crash::point!("mxfsd.recovery_started");
        let events = self.events.clone();
        tokio::task::spawn_blocking(move || {
            loop {
                let status = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(&command)
                    .arg("mxfsd-recovery")
                    .arg(node.to_string())
                    .arg(slot.to_string())
                    .stdin(std::process::Stdio::null())
                    .status();
                match status {
                    Ok(status) if status.success() => break,
                    Ok(status) => tracing::error!(%node, slot, %status, "journal recovery failed; retrying"),
                    Err(error) => {
                        tracing::error!(%node, slot, %error, "journal recovery did not start; retrying")
                    }
                }
                std::thread::sleep(Duration::from_millis(RECOVERY_RETRY_MS));
            }
            let _gone = events.blocking_send(Event::RecoveryDone { node });
        });
    }

    fn reply(&self, client: u64, reply: Reply) {
        if let Reply::Error { code, .. } = &reply {
            self.counters.client_error(*code);
        }
        if let Some(conn) = self.clients.get(&client) {
            // A client that stops reading loses its answers; its locks are freed when it goes.
            let _full = conn.tx.try_send(reply.encode());
        }
    }

    /// A message from the master (itself, or over the uplink) to this node.
    fn on_master_message(&mut self, message: Message) {
        match message {
            Message::Grant { lock, mode, token, .. } => {
                let Some(local) = self.locks.get_mut(&lock.0) else { return };
                if self.reclaiming.remove(&lock.0) {
                    // A new master's answer to a reclaim: the same lock, a token of its epoch.
                    local.mode = mode;
                    local.token = Some(token);
                    return;
                }
                let answers_pending = local.pending.as_ref().is_some_and(|pending| pending.mode == mode);
                if !answers_pending {
                    return; // a repeated answer
                }
                local.pending = None;
                local.mode = mode;
                local.token = Some(token);
                let client = local.client;
                self.reply(client, Reply::Granted { handle: lock.0, mode, token });
                lava_crash::point!("mxfsd.grant_sent");
            }
            Message::Deny { lock, reason: DenyReason::Revoked, .. } => {
                // The master took the lock back (its BAST was not answered in time): the client
                // is told, and the lock is released.
                self.reclaiming.remove(&lock.0);
                let Some(local) = self.locks.remove(&lock.0) else { return };
                self.counters.lock_revoked();
                tracing::warn!(lock = lock.0, resource = %local.resource, "lock revoked by the master: BAST not answered in time");
                let reply = if local.pending.is_some() {
                    Reply::Error {
                        code: ErrorCode::Lost,
                        message: "lock revoked: its BAST was not answered in time".to_owned(),
                    }
                } else {
                    Reply::Lost { handle: lock.0 }
                };
                self.reply(local.client, reply);
                self.release(lock.0, local.resource);
            }
            Message::Deny { lock, reason, .. } => {
                if self.reclaiming.remove(&lock.0) {
                    // The new master refused the reclaim: the lock is lost.
                    let Some(local) = self.locks.remove(&lock.0) else { return };
                    tracing::warn!(lock = lock.0, resource = %local.resource, "a new master refused a reclaimed lock; lost");
                    let reply = if local.pending.is_some() {
                        Reply::Error {
                            code: ErrorCode::Lost,
                            message: "lock lost at the master's takeover".to_owned(),
                        }
                    } else {
                        Reply::Lost { handle: lock.0 }
                    };
                    self.reply(local.client, reply);
                    self.release(lock.0, local.resource);
                    return;
                }
                let Some(local) = self.locks.get_mut(&lock.0) else { return };
                if local.pending.take().is_none() {
                    return;
                }
                let client = local.client;
                if local.token.is_none() {
                    self.locks.remove(&lock.0);
                }
                self.reply(
                    client,
                    Reply::Error { code: deny_code(reason), message: reason.describe().to_owned() },
                );
            }
            Message::Bast { lock, mode, .. } => {
                if let Some(local) = self.locks.get(&lock.0).filter(|local| local.token.is_some()) {
                    self.reply(local.client, Reply::Bast { handle: lock.0, mode });
                }
            }
            Message::CacheInval { resource, start, length } => {
                for (id, local) in &self.locks {
                    if local.resource == resource && local.token.is_some() {
                        self.reply(local.client, Reply::CacheInval { handle: *id, start, length });
                    }
                }
            }
            Message::LeaseAck { .. } => {
                if std::mem::take(&mut self.sync_pending) {
                    self.synced_epoch = self.uplink.as_ref().and_then(|uplink| uplink.joined);
                }
                if let Some(sent) = self.renews_in_flight.pop_front() {
                    self.lease_until_ms = self.lease_until_ms.max(sent + self.settings.node_timeout_ms);
                    self.released.retain(|(at, _, _)| *at >= sent);
                }
            }
            Message::LeaseExpire { node } => tracing::warn!(%node, "node declared dead by the master"),
            Message::JournalRecover { node, slot } => {
                tracing::info!(%node, slot, "journal recovery claimed");
                self.recoveries.insert(node);
            }
            Message::JournalDone { node, slot } => {
                tracing::info!(%node, slot, "journal recovery done");
                self.recoveries.remove(&node);
            }
            other => tracing::debug!(message = other.to_wire().name(), "unexpected message from the master"),
        }
    }

    fn error(&self, client: u64, code: ErrorCode, message: impl Into<String>) {
        self.reply(client, Reply::Error { code, message: message.into() });
    }

    fn client_request(&mut self, client: u64, request: Request) {
        let kind = match request {
            Request::Lock { .. } => 0,
            Request::Convert { .. } => 1,
            Request::Unlock { .. } => 2,
            Request::CacheInval { .. } => 3,
            Request::Status => 4,
            Request::Locks { .. } => 5,
        };
        self.counters.client_request(kind);
        let locking =
            matches!(request, Request::Lock { .. } | Request::Convert { .. } | Request::CacheInval { .. });
        if locking && let Some(conn) = self.clients.get(&client).filter(|conn| !conn.may_lock) {
            let message =
                format!("uid {} may not lock: not root, not mxfsd's user, not in LAVA_MXFSD_GROUP", conn.uid);
            return self.error(client, ErrorCode::PermissionDenied, message);
        }
        let now_ms = self.now_ms();
        let deadline = |timeout_ms: u32| (timeout_ms > 0).then(|| now_ms + u64::from(timeout_ms));
        match request {
            Request::Lock { resource, mode, noqueue, norevoke, timeout_ms } => {
                let resource = match ResourceName::parse(&resource) {
                    Ok(resource) => resource,
                    Err(error) => {
                        return self.error(client, ErrorCode::Invalid, format!("bad resource name: {error}"));
                    }
                };
                self.next_lock += 1;
                // A lock held until released says so in the top bit of its id.
                let id = self.next_lock | if norevoke { LockId::NOREVOKE } else { 0 };
                let pending = Some(Pending {
                    deadline_ms: deadline(timeout_ms),
                    mode,
                    noqueue,
                    convert: false,
                    resend: false,
                });
                self.locks
                    .insert(id, LocalLock { client, resource: resource.clone(), mode, token: None, pending });
                self.request(id);
            }
            Request::Convert { handle, mode, noqueue, timeout_ms } => {
                let Some(local) = self.locks.get_mut(&handle).filter(|local| local.client == client) else {
                    return self.error(client, ErrorCode::NotHeld, format!("no lock with handle {handle}"));
                };
                if local.token.is_none() || local.pending.is_some() || self.reclaiming.contains(&handle) {
                    return self.error(client, ErrorCode::Invalid, "the lock has a request in progress");
                }
                local.pending = Some(Pending {
                    deadline_ms: deadline(timeout_ms),
                    mode,
                    noqueue,
                    convert: true,
                    resend: false,
                });
                self.request(handle);
            }
            Request::Unlock { handle } => {
                if self.locks.get(&handle).is_none_or(|local| local.client != client) {
                    return self.error(client, ErrorCode::NotHeld, format!("no lock with handle {handle}"));
                }
                let local = self.locks.remove(&handle).expect("checked above");
                self.release(handle, local.resource);
                self.reply(client, Reply::Ok);
            }
            Request::CacheInval { handle, start, length } => {
                let Some(local) =
                    self.locks.get(&handle).filter(|local| local.client == client && local.token.is_some())
                else {
                    return self.error(
                        client,
                        ErrorCode::NotHeld,
                        format!("no granted lock with handle {handle}"),
                    );
                };
                let resource = local.resource.clone();
                // The other holders on this node are told here; the master tells the other nodes.
                for (id, other) in &self.locks {
                    if *id != handle && other.resource == resource && other.token.is_some() {
                        self.reply(other.client, Reply::CacheInval { handle: *id, start, length });
                    }
                }
                self.reply(client, Reply::Ok);
                self.send_to_master(Message::CacheInval { resource, start, length });
            }
            Request::Status => {
                let text = self.status_text();
                self.reply(client, Reply::Text(text));
            }
            Request::Locks { resource } => {
                let text = self.locks_text(resource.as_deref());
                self.reply(client, Reply::Text(text));
            }
        }
    }

    /// Sends the pending request of lock `id` to the master, or keeps it for the next join
    /// (requests wait while the master is being found or rebuilt).
    fn request(&mut self, id: u64) {
        let lock = &self.locks[&id];
        let pending = lock.pending.as_ref().expect("a request is pending");
        let message = Message::Lock {
            lock: LockId(id),
            resource: lock.resource.clone(),
            mode: pending.mode,
            noqueue: pending.noqueue,
            convert: pending.convert,
        };
        if !self.send_to_master(message)
            && let Some(pending) = self.locks.get_mut(&id).and_then(|lock| lock.pending.as_mut())
        {
            pending.resend = true;
        }
    }

    /// Sends a message of this node to the master (itself, or over the uplink, or the backlog
    /// while joining); false when there is no master connection at all.
    fn send_to_master(&mut self, message: Message) -> bool {
        if let Some(master) = &self.master {
            let envelope = Envelope {
                seq: 0,
                sender: self.settings.me,
                target: Some(self.settings.me),
                epoch: master.epoch(),
                message,
            };
            self.master_inbox.push_back((None, Input::Message(envelope)));
            return true;
        }
        match self.uplink.as_ref().map(|uplink| (uplink.joined, uplink.tx.is_some())) {
            Some((Some(epoch), _)) => {
                self.send_uplink(epoch, message);
                true
            }
            Some((None, true)) => {
                self.backlog.push(message);
                true
            }
            _ => false,
        }
    }

    fn node_name(&self, node: NodeId) -> &str {
        self.settings.nodes.iter().find(|n| n.id == node).map_or("?", |n| n.name.as_str())
    }

    /// Orderly exit: a node leaves the cluster so that its locks are released without fencing.
    async fn shutdown(&mut self) {
        if let Some(Uplink { joined: Some(epoch), tx: Some(tx), node, .. }) = &self.uplink {
            let (epoch, tx, node) = (*epoch, tx.clone(), *node);
            let leave = Message::NodeLeave {
                name: self.settings.my_name.clone(),
                port: self.settings.listen_addr.port(),
            };
            self.send_frame(&tx, node, epoch, &leave);
            // Give the writer a moment to flush the NODE_LEAVE.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
