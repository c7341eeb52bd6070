//! The event loop: one task owns all state (the master's logic when this host is the master,
//! the local locks, the connections' send queues); socket tasks only frame, authenticate,
//! decode and validate, and hand the result over as an [`Event`].

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use lava_dlm_ll::{DenyReason, Envelope, Epoch, LockId, LockMode, Message, NodeId, ResourceName};
use lava_dlm_logic::{Config, Effect, Input, Master, NodeState};
use lava_dlm_wire as wire;
use lava_net::{AuthConfig, Authenticator, ClusterKey, KeyRing, Nonce, system_now_ms};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::mpsc;

use crate::client::{self, CLIENT_BODY_BYTES_MAX, ErrorCode, Reply, Request};
use crate::{Settings, epoch_file};

/// Frames queued for one connection before it is considered stuck and closed.
const SEND_QUEUE_FRAMES_MAX: usize = 4096;
/// Events queued for the main loop.
const EVENT_QUEUE_MAX: usize = 4096;
/// Delay between two attempts to reach the master.
const RECONNECT_DELAY_MS: u64 = 300;
/// Longest wait for a TCP connect to the master.
const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// Delay before a failed recovery command is run again.
const RECOVERY_RETRY_MS: u64 = 5_000;
/// Longest the loop sleeps without looking at its timers.
const IDLE_WAKE_MS: u64 = 1_000;

enum Event {
    PeerUp { conn: u64, tx: mpsc::Sender<Vec<u8>> },
    PeerMessage { conn: u64, envelope: Envelope },
    PeerDown { conn: u64, reason: String },
    ClientUp { client: u64, tx: mpsc::Sender<Vec<u8>>, uid: u32 },
    ClientRequest { client: u64, request: Option<Request> },
    ClientDown { client: u64 },
    RecoveryDone { node: NodeId },
}

struct Peer {
    tx: mpsc::Sender<Vec<u8>>,
    node: Option<NodeId>,
}

/// This node's link to the master (on a node that is not the master).
struct Uplink {
    conn: u64,
    tx: mpsc::Sender<Vec<u8>>,
    /// The epoch the master gave us; `None` until its NODE_JOIN answer.
    joined: Option<Epoch>,
    master_epoch_seen: Epoch,
}

struct ClientConn {
    tx: mpsc::Sender<Vec<u8>>,
    uid: u32,
}

struct Pending {
    deadline_ms: Option<u64>,
}

struct LocalLock {
    client: u64,
    resource: ResourceName,
    mode: LockMode,
    token: Option<u64>,
    pending: Option<Pending>,
}

struct State {
    settings: Settings,
    auth: Arc<Authenticator>,
    origin: Instant,
    events: mpsc::Sender<Event>,
    master: Option<Master>,
    peers: BTreeMap<u64, Peer>,
    node_conns: BTreeMap<NodeId, u64>,
    uplink: Option<Uplink>,
    backlog: Vec<Message>,
    clients: BTreeMap<u64, ClientConn>,
    locks: BTreeMap<u64, LocalLock>,
    next_lock: u64,
    seq: u32,
    master_inbox: VecDeque<(Option<u64>, Input)>,
    local_inbox: VecDeque<Message>,
    next_renew_ms: u64,
}

pub(crate) async fn serve(settings: Settings) -> anyhow::Result<()> {
    let key = ClusterKey::load(&settings.key_file)
        .with_context(|| format!("load the cluster key {}", settings.key_file.display()))?;
    let auth = Arc::new(Authenticator::new(KeyRing::new(&key), AuthConfig::default()));
    let is_master = settings.me == settings.master;
    let master = if is_master {
        let durable = epoch_file::load(&settings.epoch_path)?;
        let config = Config {
            me: settings.me,
            port: settings.listen_addr.port(),
            nodes: settings.nodes.clone(),
            node_timeout_ms: settings.node_timeout_ms,
            lease_renew_ms: settings.lease_renew_ms,
        };
        Some(Master::new(config, durable))
    } else {
        None
    };
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
    let (events, mut events_rx) = mpsc::channel(EVENT_QUEUE_MAX);
    let origin = Instant::now();
    let mut state = State {
        auth: Arc::clone(&auth),
        origin,
        events: events.clone(),
        master,
        peers: BTreeMap::new(),
        node_conns: BTreeMap::new(),
        uplink: None,
        backlog: Vec::new(),
        clients: BTreeMap::new(),
        locks: BTreeMap::new(),
        // Lock ids of a new incarnation never meet the previous one's (the epoch fences them
        // anyway; distinct ids keep the logs readable).
        next_lock: system_now_ms() << 16,
        seq: 0,
        master_inbox: VecDeque::new(),
        local_inbox: VecDeque::new(),
        next_renew_ms: 0,
        settings: settings.clone(),
    };
    if state.master.is_some() {
        state.master_inbox.push_back((None, Input::Start));
        state.pump()?;
    }
    tokio::spawn(accept_peers(listener, Arc::clone(&auth), events.clone(), is_master));
    tokio::spawn(accept_clients(unix, events.clone()));
    if !is_master {
        tokio::spawn(connect_master(settings.master_addr, Arc::clone(&auth), events.clone()));
    }
    if let Some(path) = &settings.ready_file {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, format!("{port}\n")).with_context(|| format!("write {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("rename to {}", path.display()))?;
    }
    tracing::info!(
        node = %settings.me,
        host = %settings.my_name,
        port,
        socket = %socket_path.display(),
        master = is_master,
        epoch = %state.master.as_ref().map_or(Epoch(0), Master::epoch),
        "mxfsd ready"
    );
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("install the SIGTERM handler")?;
    loop {
        let now_ms = state.now_ms();
        state.timers(now_ms);
        state.pump()?;
        let deadline_ms = state.next_deadline_ms(now_ms);
        let sleep = Duration::from_millis(deadline_ms.saturating_sub(now_ms));
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
            () = tokio::time::sleep(sleep) => {}
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
        state.pump()?;
    }
    state.shutdown().await;
    let _gone = std::fs::remove_file(&socket_path);
    tracing::info!("mxfsd stopped");
    Ok(())
}

/// Accepts daemon connections; a node that is not the master takes none (no takeover yet).
async fn accept_peers(
    listener: TcpListener,
    auth: Arc<Authenticator>,
    events: mpsc::Sender<Event>,
    is_master: bool,
) {
    let mut next_conn = 1u64;
    loop {
        match listener.accept().await {
            Ok((stream, from)) => {
                if !is_master {
                    tracing::info!(%from, "connection refused: this node is not the lock master");
                    continue;
                }
                let _nodelay = stream.set_nodelay(true);
                next_conn += 1;
                tokio::spawn(run_peer(stream, next_conn * 2, Arc::clone(&auth), events.clone()));
            }
            Err(error) => tracing::warn!(%error, "accept failed"),
        }
    }
}

/// Keeps a connection to the master up: connect, run it until it ends, wait, again.
async fn connect_master(addr: std::net::SocketAddr, auth: Arc<Authenticator>, events: mpsc::Sender<Event>) {
    let mut next_conn = 0u64;
    loop {
        let connect =
            tokio::time::timeout(Duration::from_millis(CONNECT_TIMEOUT_MS), TcpStream::connect(addr));
        match connect.await {
            Ok(Ok(stream)) => {
                let _nodelay = stream.set_nodelay(true);
                next_conn += 1;
                // Odd ids for the uplink, even ones for accepted connections.
                run_peer(stream, next_conn * 2 + 1, Arc::clone(&auth), events.clone()).await;
            }
            Ok(Err(error)) => tracing::debug!(%addr, %error, "master unreachable"),
            Err(_) => tracing::debug!(%addr, "master connect timed out"),
        }
        if events.is_closed() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(RECONNECT_DELAY_MS)).await;
    }
}

/// Runs one daemon connection: a writer task sends what the main loop queues; this task
/// frames by the header's length, authenticates, decodes and validates what arrives. The
/// first failure ends the connection and is reported with its reason.
async fn run_peer(stream: TcpStream, conn: u64, auth: Arc<Authenticator>, events: mpsc::Sender<Event>) {
    let (mut reader, mut writer) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(SEND_QUEUE_FRAMES_MAX);
    if events.send(Event::PeerUp { conn, tx }).await.is_err() {
        return;
    }
    let writer_task = tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            if writer.write_all(&frame).await.is_err() {
                break;
            }
        }
        let _closed = writer.shutdown().await;
    });
    let reason = read_peer(&mut reader, conn, &auth, &events).await;
    writer_task.abort();
    let _gone = events.send(Event::PeerDown { conn, reason }).await;
}

async fn read_peer(
    reader: &mut tokio::net::tcp::OwnedReadHalf,
    conn: u64,
    auth: &Authenticator,
    events: &mpsc::Sender<Event>,
) -> String {
    let mut buffer: Vec<u8> = Vec::with_capacity(wire::FRAME_BYTES_MAX * 4);
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        loop {
            let length = match wire::frame_len(&buffer) {
                Ok(Some(length)) => length,
                Ok(None) => break,
                Err(error) => return format!("bad frame: {error}"),
            };
            let frame: Vec<u8> = buffer.drain(..length).collect();
            if let Err(error) = auth.open_bytes(&frame, system_now_ms()) {
                return format!("authentication failed: {error}");
            }
            let (header, message) = match wire::decode(&frame) {
                Ok(decoded) => decoded,
                Err(error) => return format!("bad frame: {error}"),
            };
            let envelope = match Envelope::from_wire(&header, &message) {
                Ok(envelope) => envelope,
                Err(error) => return format!("invalid {}: {error}", message.name()),
            };
            if events.send(Event::PeerMessage { conn, envelope }).await.is_err() {
                return "shutting down".to_owned();
            }
        }
        match reader.read(&mut chunk).await {
            Ok(0) => return "closed by the peer".to_owned(),
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            Err(error) => return format!("read failed: {error}"),
        }
    }
}

async fn accept_clients(listener: UnixListener, events: mpsc::Sender<Event>) {
    let mut next_client = 0u64;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                next_client += 1;
                tokio::spawn(run_client(stream, next_client, events.clone()));
            }
            Err(error) => tracing::warn!(%error, "client accept failed"),
        }
    }
}

async fn run_client(stream: UnixStream, client: u64, events: mpsc::Sender<Event>) {
    let uid = match lava_net::peer_cred(&stream) {
        Ok(cred) => cred.uid,
        Err(error) => {
            tracing::warn!(%error, "no peer credentials; client refused");
            return;
        }
    };
    let (mut reader, mut writer) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(SEND_QUEUE_FRAMES_MAX);
    if events.send(Event::ClientUp { client, tx, uid }).await.is_err() {
        return;
    }
    let writer_task = tokio::spawn(async move {
        while let Some(body) = rx.recv().await {
            if writer.write_all(&client::frame(&body)).await.is_err() {
                break;
            }
        }
    });
    loop {
        let mut length = [0u8; 4];
        if reader.read_exact(&mut length).await.is_err() {
            break;
        }
        let length = u32::from_be_bytes(length) as usize;
        if length > CLIENT_BODY_BYTES_MAX {
            break;
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).await.is_err() {
            break;
        }
        let request = Request::decode(&body);
        let malformed = request.is_none();
        if events.send(Event::ClientRequest { client, request }).await.is_err() || malformed {
            break;
        }
    }
    writer_task.abort();
    let _gone = events.send(Event::ClientDown { client }).await;
}

fn deny_code(reason: DenyReason) -> ErrorCode {
    match reason {
        DenyReason::WouldBlock => ErrorCode::WouldBlock,
        DenyReason::NotHeld => ErrorCode::NotHeld,
        DenyReason::Deadlock => ErrorCode::Deadlock,
        DenyReason::Invalid => ErrorCode::Invalid,
    }
}

impl State {
    fn now_ms(&self) -> u64 {
        // Never 0, so that "at or before now" comparisons with a zero start behave.
        self.origin.elapsed().as_millis() as u64 + 1
    }

    fn is_master(&self) -> bool {
        self.master.is_some()
    }

    fn next_deadline_ms(&self, now_ms: u64) -> u64 {
        let mut deadline = now_ms + IDLE_WAKE_MS;
        if let Some(master) = &self.master {
            deadline = deadline.min(master.next_deadline_ms());
        }
        if self.uplink.as_ref().is_some_and(|uplink| uplink.joined.is_some()) {
            deadline = deadline.min(self.next_renew_ms);
        }
        for lock in self.locks.values() {
            if let Some(Pending { deadline_ms: Some(at) }) = lock.pending {
                deadline = deadline.min(at);
            }
        }
        deadline
    }

    /// Lease expiry (master), renewals (node), client timeouts.
    fn timers(&mut self, now_ms: u64) {
        if let Some(master) = &self.master
            && master.next_deadline_ms() <= now_ms
        {
            self.master_inbox.push_back((None, Input::Tick));
        }
        if let Some(Uplink { joined: Some(_), .. }) = self.uplink
            && now_ms >= self.next_renew_ms
        {
            self.next_renew_ms = now_ms + self.settings.lease_renew_ms;
            let lock_count = self.locks.values().filter(|lock| lock.token.is_some()).count() as u32;
            let renew = Message::LeaseRenew { duration_ms: self.settings.node_timeout_ms, lock_count };
            self.send_to_master(renew);
        }
        let expired: Vec<u64> = self
            .locks
            .iter()
            .filter(
                |(_, lock)| matches!(lock.pending, Some(Pending { deadline_ms: Some(at) }) if at <= now_ms),
            )
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
            self.send_to_master(Message::Release { lock: LockId(id), resource: lock.resource });
        }
    }

    fn event(&mut self, event: Event) {
        match event {
            Event::PeerUp { conn, tx } => {
                if self.is_master() {
                    self.peers.insert(conn, Peer { tx, node: None });
                } else {
                    tracing::info!(master = %self.settings.master_addr, "connected to the master; joining");
                    self.uplink = Some(Uplink { conn, tx, joined: None, master_epoch_seen: Epoch(0) });
                    let join = Message::NodeJoin {
                        name: self.settings.my_name.clone(),
                        port: self.settings.listen_addr.port(),
                    };
                    self.send_uplink(Epoch(0), join);
                }
            }
            Event::PeerMessage { conn, envelope } => {
                if self.is_master() {
                    self.on_peer_message(conn, envelope);
                } else {
                    self.on_uplink_message(conn, envelope);
                }
            }
            Event::PeerDown { conn, reason } => {
                if let Some(peer) = self.peers.remove(&conn) {
                    tracing::info!(conn, node = ?peer.node.map(NodeId::get), %reason, "daemon connection closed");
                    if let Some(node) = peer.node
                        && self.node_conns.get(&node) == Some(&conn)
                    {
                        self.node_conns.remove(&node);
                    }
                }
                if self.uplink.as_ref().is_some_and(|uplink| uplink.conn == conn) {
                    self.lose_master(&format!("master connection closed: {reason}"));
                }
            }
            Event::ClientUp { client, tx, uid } => {
                self.clients.insert(client, ClientConn { tx, uid });
            }
            Event::ClientRequest { client, request } => match request {
                Some(request) => self.client_request(client, request),
                None => tracing::info!(client, "malformed client request; connection closed"),
            },
            Event::ClientDown { client } => {
                self.clients.remove(&client);
                let owned: Vec<u64> =
                    self.locks.iter().filter(|(_, lock)| lock.client == client).map(|(id, _)| *id).collect();
                for id in owned {
                    let lock = self.locks.remove(&id).expect("listed above");
                    self.send_to_master(Message::Release { lock: LockId(id), resource: lock.resource });
                }
            }
            Event::RecoveryDone { node } => self.master_inbox.push_back((None, Input::RecoveryDone { node })),
        }
    }

    /// A message from another daemon, at the master.
    fn on_peer_message(&mut self, conn: u64, envelope: Envelope) {
        let Some(peer) = self.peers.get(&conn) else { return };
        let joining = matches!(envelope.message, Message::NodeJoin { .. });
        let bound_elsewhere = peer.node.is_some_and(|node| node != envelope.sender);
        if bound_elsewhere || (peer.node.is_none() && !joining) {
            tracing::info!(conn, sender = %envelope.sender, "message from a node this connection does not belong to; closed");
            self.peers.remove(&conn);
            return;
        }
        self.master_inbox.push_back((Some(conn), Input::Message(envelope)));
    }

    /// A message from the master, at a node.
    fn on_uplink_message(&mut self, conn: u64, envelope: Envelope) {
        let Some(uplink) = self.uplink.as_mut().filter(|uplink| uplink.conn == conn) else { return };
        if envelope.sender != self.settings.master {
            tracing::info!(sender = %envelope.sender, "message from a node that is not the master; connection closed");
            return self.lose_master("a non-master spoke on the master connection");
        }
        if envelope.epoch < uplink.master_epoch_seen {
            tracing::info!(got = %envelope.epoch, seen = %uplink.master_epoch_seen, "stale epoch from the master; connection closed");
            return self.lose_master("stale epoch from the master");
        }
        uplink.master_epoch_seen = envelope.epoch;
        if let Message::NodeJoin { .. } = envelope.message {
            uplink.joined = Some(envelope.epoch);
            self.next_renew_ms = 0;
            tracing::info!(epoch = %envelope.epoch, "joined the lock master");
            for message in std::mem::take(&mut self.backlog) {
                self.send_to_master(message);
            }
            return;
        }
        if let Message::LeaseExpire { node } = envelope.message
            && node == self.settings.me
        {
            return self.lose_master("the master declared this node dead");
        }
        self.local_inbox.push_back(envelope.message);
    }

    /// The master is gone for this node: every local lock is lost; reconnect follows.
    fn lose_master(&mut self, why: &str) {
        tracing::warn!(why, n_locks = self.locks.len(), "lost the lock master; local locks fail");
        self.uplink = None;
        self.backlog.clear();
        for (id, lock) in std::mem::take(&mut self.locks) {
            let reply = if lock.pending.is_some() {
                Reply::Error { code: ErrorCode::Unavailable, message: format!("lock master lost: {why}") }
            } else {
                Reply::Lost { handle: id }
            };
            self.reply(lock.client, reply);
        }
    }

    fn send_uplink(&mut self, epoch: Epoch, message: Message) {
        let Some(uplink) = &self.uplink else { return };
        let tx = uplink.tx.clone();
        if !self.send_frame(&tx, self.settings.master, epoch, &message) {
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
        let mut bytes = wire::encode_unsealed(envelope, &message.to_wire());
        let nonce = match Nonce::random() {
            Ok(nonce) => nonce,
            Err(error) => {
                tracing::error!(%error, "no random nonce; frame not sent");
                return true;
            }
        };
        let trailer = self.auth.seal_bytes(&bytes, system_now_ms(), nonce);
        bytes.extend_from_slice(&trailer);
        !matches!(tx.try_send(bytes), Err(mpsc::error::TrySendError::Full(_)))
    }

    /// Sends a request of a local client to the master (itself, or over the uplink).
    fn send_to_master(&mut self, message: Message) {
        if let Some(master) = &self.master {
            let envelope = Envelope {
                seq: 0,
                sender: self.settings.me,
                target: Some(self.settings.me),
                epoch: master.epoch(),
                message,
            };
            self.master_inbox.push_back((None, Input::Message(envelope)));
            return;
        }
        match self.uplink.as_ref().map(|uplink| uplink.joined) {
            Some(Some(epoch)) => self.send_uplink(epoch, message),
            Some(None) => self.backlog.push(message),
            None => {} // the caller already failed the client (no master connection)
        }
    }

    /// Steps the master and delivers local messages until nothing is left to do.
    fn pump(&mut self) -> anyhow::Result<()> {
        loop {
            if let Some((conn, input)) = self.master_inbox.pop_front() {
                let now_ms = self.now_ms();
                let master = self.master.as_mut().expect("only a master has a master inbox");
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
                    tracing::info!(%epoch, "epoch persisted");
                }
                Effect::Send { to, epoch, message } => {
                    if to == self.settings.me {
                        self.local_inbox.push_back(message);
                    } else if let Some(conn) = self.node_conns.get(&to).copied()
                        && let Some(peer) = self.peers.get(&conn)
                    {
                        let tx = peer.tx.clone();
                        if !self.send_frame(&tx, to, epoch, &message) {
                            tracing::warn!(node = %to, "send queue full; connection closed");
                            self.peers.remove(&conn);
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
                        self.node_conns.insert(node, conn);
                    }
                }
                Effect::NodeDead { node } => {
                    tracing::warn!(%node, "node declared dead: lease expired or restarted; its locks are fenced")
                }
                Effect::NodeRecovered { node } => {
                    tracing::info!(%node, "journal recovery done; the dead node's locks are released")
                }
                Effect::NodeLeft { node } => tracing::info!(%node, "node left"),
            }
        }
        Ok(())
    }

    fn run_recovery(&mut self, node: NodeId, slot: u32) {
        let Some(command) = self.settings.recovery_cmd.clone() else {
            tracing::info!(%node, slot, "journal recovery recorded (no LAVA_MXFSD_RECOVERY_CMD configured)");
            self.master_inbox.push_back((None, Input::RecoveryDone { node }));
            return;
        };
        tracing::info!(%node, slot, %command, "journal recovery started");
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
        if let Some(conn) = self.clients.get(&client) {
            // A client that stops reading loses its answers; its locks are freed when it goes.
            let _full = conn.tx.try_send(reply.encode());
        }
    }

    /// A message from the master to this node's clients.
    fn on_master_message(&mut self, message: Message) {
        match message {
            Message::Grant { lock, mode, token, .. } => {
                let Some(local) = self.locks.get_mut(&lock.0) else { return };
                if local.pending.take().is_some() {
                    local.mode = mode;
                    local.token = Some(token);
                    let client = local.client;
                    self.reply(client, Reply::Granted { handle: lock.0, mode, token });
                }
            }
            Message::Deny { lock, reason, .. } => {
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
            Message::LeaseExpire { node } => tracing::warn!(%node, "node declared dead by the master"),
            Message::JournalRecover { node, slot } => tracing::info!(%node, slot, "journal recovery claimed"),
            Message::JournalDone { node, slot } => tracing::info!(%node, slot, "journal recovery done"),
            Message::LeaseAck { .. } => {}
            other => tracing::debug!(message = other.to_wire().name(), "unexpected message from the master"),
        }
    }

    fn error(&self, client: u64, code: ErrorCode, message: impl Into<String>) {
        self.reply(client, Reply::Error { code, message: message.into() });
    }

    fn master_reachable(&self) -> bool {
        self.is_master() || self.uplink.is_some()
    }

    fn client_request(&mut self, client: u64, request: Request) {
        let now_ms = self.now_ms();
        let deadline = |timeout_ms: u32| (timeout_ms > 0).then(|| now_ms + u64::from(timeout_ms));
        match request {
            Request::Lock { resource, mode, noqueue, timeout_ms } => {
                let resource = match ResourceName::parse(&resource) {
                    Ok(resource) => resource,
                    Err(error) => {
                        return self.error(client, ErrorCode::Invalid, format!("bad resource name: {error}"));
                    }
                };
                if !self.master_reachable() {
                    return self.error(client, ErrorCode::Unavailable, "the lock master is not reachable");
                }
                self.next_lock += 1;
                let id = self.next_lock;
                let pending = Some(Pending { deadline_ms: deadline(timeout_ms) });
                self.locks
                    .insert(id, LocalLock { client, resource: resource.clone(), mode, token: None, pending });
                self.send_to_master(Message::Lock {
                    lock: LockId(id),
                    resource,
                    mode,
                    noqueue,
                    convert: false,
                });
            }
            Request::Convert { handle, mode, noqueue, timeout_ms } => {
                let Some(local) = self.locks.get_mut(&handle).filter(|local| local.client == client) else {
                    return self.error(client, ErrorCode::NotHeld, format!("no lock with handle {handle}"));
                };
                if local.token.is_none() || local.pending.is_some() {
                    return self.error(client, ErrorCode::Invalid, "the lock has a request in progress");
                }
                local.pending = Some(Pending { deadline_ms: deadline(timeout_ms) });
                let resource = local.resource.clone();
                self.send_to_master(Message::Lock {
                    lock: LockId(handle),
                    resource,
                    mode,
                    noqueue,
                    convert: true,
                });
            }
            Request::Unlock { handle } => {
                if self.locks.get(&handle).is_none_or(|local| local.client != client) {
                    return self.error(client, ErrorCode::NotHeld, format!("no lock with handle {handle}"));
                }
                let local = self.locks.remove(&handle).expect("checked above");
                self.send_to_master(Message::Release { lock: LockId(handle), resource: local.resource });
                self.reply(client, Reply::Ok);
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

    fn node_name(&self, node: NodeId) -> &str {
        self.settings.nodes.iter().find(|n| n.id == node).map_or("?", |n| n.name.as_str())
    }

    fn status_text(&self) -> String {
        let mut out = String::new();
        let master = self.settings.master;
        let _ = writeln!(out, "MASTER: {} (node {master})", self.node_name(master));
        let _ = writeln!(out, "THIS NODE: {} (node {})", self.settings.my_name, self.settings.me);
        if let Some(logic) = &self.master {
            let _ = writeln!(out, "EPOCH: {}", logic.epoch());
            let _ = writeln!(out, "{:<6}{:<20}{:<12}{:<8}{:>6}", "NODE", "HOST", "STATUS", "EPOCH", "LOCKS");
            for node in logic.nodes() {
                let status = match node.state {
                    NodeState::Alive { .. } => "ok",
                    NodeState::Absent => "unavail",
                    NodeState::Recovering => "recovering",
                };
                let _ = writeln!(
                    out,
                    "{:<6}{:<20}{:<12}{:<8}{:>6}",
                    node.id.get(),
                    node.name,
                    status,
                    node.epoch.0,
                    node.n_locks
                );
            }
        } else {
            let link = match &self.uplink {
                Some(Uplink { joined: Some(epoch), .. }) => format!("joined, epoch {epoch}"),
                Some(_) => "connected, joining".to_owned(),
                None => "not connected".to_owned(),
            };
            let _ = writeln!(out, "MASTER CONNECTION: {link}");
            let n_granted = self.locks.values().filter(|lock| lock.token.is_some()).count();
            let _ =
                writeln!(out, "LOCAL LOCKS: {n_granted} granted, {} waiting", self.locks.len() - n_granted);
            let _ = writeln!(
                out,
                "(the node table is kept by the master: run mxfsctl status on {})",
                self.node_name(master)
            );
        }
        out
    }

    fn locks_text(&self, only: Option<&str>) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{:<24}{:<6}{:<22}{:<6}STATE", "RESOURCE", "NODE", "LOCK", "MODE");
        if let Some(logic) = &self.master {
            for resource in logic.resources() {
                if only.is_some_and(|name| name != resource.name.as_str()) {
                    continue;
                }
                for holder in &resource.granted {
                    let state = match (holder.fenced, holder.converting_to) {
                        (true, _) => "fenced".to_owned(),
                        (false, Some(to)) => format!("converting->{to}"),
                        (false, None) => "granted".to_owned(),
                    };
                    let _ = writeln!(
                        out,
                        "{:<24}{:<6}{:<22}{:<6}{state}",
                        resource.name,
                        holder.node.get(),
                        holder.lock.0,
                        holder.mode
                    );
                }
                for waiter in &resource.waiting {
                    let _ = writeln!(
                        out,
                        "{:<24}{:<6}{:<22}{:<6}waiting",
                        resource.name,
                        waiter.node.get(),
                        waiter.lock.0,
                        waiter.mode
                    );
                }
            }
        } else {
            for (id, lock) in &self.locks {
                if only.is_some_and(|name| name != lock.resource.as_str()) {
                    continue;
                }
                let state = match (lock.token, &lock.pending) {
                    (Some(_), Some(_)) => "converting",
                    (Some(_), None) => "granted",
                    (None, _) => "waiting",
                };
                let uid = self.clients.get(&lock.client).map_or(0, |c| c.uid);
                let _ = writeln!(
                    out,
                    "{:<24}{:<6}{:<22}{:<6}{state} (uid {uid})",
                    lock.resource,
                    self.settings.me.get(),
                    id,
                    lock.mode
                );
            }
            let _ = writeln!(
                out,
                "(this node's locks only; the whole table is on the master {})",
                self.node_name(self.settings.master)
            );
        }
        out
    }

    /// Orderly exit: a node leaves the cluster so that its locks are released without fencing.
    async fn shutdown(&mut self) {
        if let Some(Uplink { joined: Some(epoch), tx, .. }) = &self.uplink {
            let (epoch, tx) = (*epoch, tx.clone());
            let leave = Message::NodeLeave {
                name: self.settings.my_name.clone(),
                port: self.settings.listen_addr.port(),
            };
            self.send_frame(&tx, self.settings.master, epoch, &leave);
            // Give the writer a moment to flush the NODE_LEAVE.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
