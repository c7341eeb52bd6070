//! The socket tasks of the event loop ([`super`]): the daemon port's accept loop behind
//! lava-net's gate, the connection to the master (the uplink), each peer connection's reader,
//! and the local client socket's accept loop with its access check. They only frame,
//! authenticate, decode and validate, and hand the result to the loop as an [`Event`]; they
//! own no state.

use super::*;

/// Daemon connections at once, in all and per address, and the time a new one has to send
/// its first authenticated frame (lava-net's gate; docs/operations.md, "Connection limits").
pub(super) const PEER_CONNECTIONS: GateConfig =
    GateConfig { total_max: 256, per_source_max: 32, auth_deadline: Duration::from_secs(5) };

/// Accepts daemon connections (even connection ids); a node that is not the master closes
/// them when they ask to join.
pub(super) async fn accept_peers(
    listener: TcpListener,
    auth: Arc<Authenticator>,
    counters: Arc<Counters>,
    events: mpsc::Sender<Event>,
) {
    let mut next_conn = 1u64;
    let gate = Gate::new(PEER_CONNECTIONS);
    let mut backoff = AcceptBackoff::default();
    loop {
        match listener.accept().await {
            Ok((stream, from)) => {
                if let Some(line) = backoff.succeeded() {
                    tracing::info!("{line}");
                }
                let pass = match gate.admit(Source::Ip(from.ip())) {
                    Ok(pass) => pass,
                    Err(refusal) => {
                        counters.refused(Refusal::Gate);
                        tracing::debug!(%from, "daemon connection refused: {refusal}");
                        continue;
                    }
                };
                let _nodelay = stream.set_nodelay(true);
                next_conn += 1;
                tokio::spawn(run_peer(
                    stream,
                    next_conn * 2,
                    Some(pass),
                    Arc::clone(&auth),
                    Arc::clone(&counters),
                    events.clone(),
                ));
            }
            Err(error) => {
                let (pause, line) = backoff.failed(&error);
                if let Some(line) = line {
                    tracing::warn!("daemon port: {line}");
                }
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// One attempt to reach a candidate master (odd connection ids): connect, then run the
/// connection until it ends; a failed connect is reported as such.
pub(super) async fn try_uplink(
    addr: Option<SocketAddr>,
    conn: u64,
    auth: Arc<Authenticator>,
    counters: Arc<Counters>,
    events: mpsc::Sender<Event>,
) {
    let Some(addr) = addr else {
        let _gone = events.send(Event::UplinkFailed { conn, reason: "no address".to_owned() }).await;
        return;
    };
    let connect = tokio::time::timeout(Duration::from_millis(CONNECT_TIMEOUT_MS), TcpStream::connect(addr));
    match connect.await {
        Ok(Ok(stream)) => {
            let _nodelay = stream.set_nodelay(true);
            run_peer(stream, conn, None, auth, counters, events).await;
        }
        Ok(Err(error)) => {
            let _gone = events.send(Event::UplinkFailed { conn, reason: format!("{addr}: {error}") }).await;
        }
        Err(_) => {
            let _gone = events.send(Event::UplinkFailed { conn, reason: format!("{addr}: timed out") }).await;
        }
    }
}

/// Runs one daemon connection: a writer task sends what the main loop queues; this task
/// frames by the header's length, authenticates, decodes and validates what arrives. The
/// first failure ends the connection and is reported with its reason. An accepted
/// connection (`pass`) must send its first authenticated frame within the gate's deadline,
/// and is closed first to make room until it has.
pub(super) async fn run_peer(
    stream: TcpStream,
    conn: u64,
    pass: Option<Pass>,
    auth: Arc<Authenticator>,
    counters: Arc<Counters>,
    events: mpsc::Sender<Event>,
) {
    counters.peer_connection();
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
    let reason = read_peer(&mut reader, conn, pass, &auth, &counters, &events).await;
    writer_task.abort();
    let _gone = events.send(Event::PeerDown { conn, reason }).await;
}

pub(super) async fn read_peer(
    reader: &mut tokio::net::tcp::OwnedReadHalf,
    conn: u64,
    mut pass: Option<Pass>,
    auth: &Authenticator,
    counters: &Counters,
    events: &mpsc::Sender<Event>,
) -> String {
    // Grows with the bytes received (a stranger costs little).
    let mut buffer: Vec<u8> = Vec::with_capacity(1024);
    let mut chunk = vec![0u8; 16 * 1024];
    let deadline = pass.as_ref().map(|pass| tokio::time::Instant::now() + pass.auth_deadline());
    let mut authenticated = pass.is_none();
    loop {
        loop {
            let length = match wire::frame_len(&buffer) {
                Ok(Some(length)) => length,
                Ok(None) => break,
                Err(error) => {
                    counters.refused(Refusal::of(&error));
                    return format!("bad frame: {error}");
                }
            };
            let frame: Vec<u8> = buffer.drain(..length).collect();
            if let Err(error) = auth.open_bytes(&frame, system_now_ms()) {
                counters.refused(Refusal::Auth);
                return format!("authentication failed: {error}");
            }
            if !authenticated {
                // Its place is kept from now on, for as long as the connection lives.
                authenticated = true;
                if let Some(pass) = &pass {
                    pass.authenticated();
                }
            }
            let (header, message) = match wire::decode(&frame) {
                Ok(decoded) => decoded,
                Err(error) => {
                    counters.refused(Refusal::of(&error));
                    return format!("bad frame: {error}");
                }
            };
            counters.received(message.msg_type());
            let envelope = match Envelope::from_wire(&header, &message) {
                Ok(envelope) => envelope,
                Err(error) => {
                    counters.refused(Refusal::Invalid);
                    return format!("invalid {}: {error}", message.name());
                }
            };
            if events.send(Event::PeerMessage { conn, envelope }).await.is_err() {
                return "shutting down".to_owned();
            }
        }
        let read = match (deadline, pass.as_mut()) {
            (Some(deadline), Some(pass)) if !authenticated => tokio::select! {
                read = tokio::time::timeout_at(deadline, reader.read(&mut chunk)) => match read {
                    Ok(read) => read,
                    Err(_) => {
                        counters.refused(Refusal::Gate);
                        return "no authenticated frame in time".to_owned();
                    }
                },
                () = pass.evicted() => {
                    counters.refused(Refusal::Gate);
                    return "closed before authenticating to make room".to_owned();
                }
            },
            _ => reader.read(&mut chunk).await,
        };
        match read {
            Ok(0) => return "closed by the peer".to_owned(),
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            Err(error) => return format!("read failed: {error}"),
        }
    }
}

pub(super) async fn accept_clients(listener: UnixListener, events: mpsc::Sender<Event>, access: Arc<Access>) {
    let mut next_client = 0u64;
    let mut backoff = AcceptBackoff::default();
    loop {
        match listener.accept().await {
            Ok((mut stream, _)) => {
                if let Some(line) = backoff.succeeded() {
                    tracing::info!("client socket: {line}");
                }
                let active = access.active.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let slot = ClientSlot(Arc::clone(&access));
                if active >= access.max_clients {
                    access.counters.too_many_clients();
                    tracing::warn!(max = access.max_clients, "too many clients; connection refused");
                    let refusal = Reply::Error {
                        code: ErrorCode::Unavailable,
                        message: format!("too many clients (LAVA_MXFSD_MAX_CLIENTS={})", access.max_clients),
                    };
                    tokio::spawn(async move {
                        let _sent = stream.write_all(&client::frame(&refusal.encode())).await;
                        drop(slot);
                    });
                    continue;
                }
                next_client += 1;
                access.counters.client_connection();
                tokio::spawn(client_io::run_client(stream, next_client, events.clone(), slot));
            }
            Err(error) => {
                let (pause, line) = backoff.failed(&error);
                if let Some(line) = line {
                    tracing::warn!("client socket: {line}");
                }
                tokio::time::sleep(pause).await;
            }
        }
    }
}

pub(super) fn deny_code(reason: DenyReason) -> ErrorCode {
    match reason {
        DenyReason::WouldBlock => ErrorCode::WouldBlock,
        DenyReason::NotHeld => ErrorCode::NotHeld,
        DenyReason::Deadlock => ErrorCode::Deadlock,
        DenyReason::Invalid => ErrorCode::Invalid,
        DenyReason::Revoked => ErrorCode::Lost,
    }
}
