//! Transport tests over real loopback sockets: an authenticated echo server run by
//! `serve`, one well-behaved client, and one misbehaving client per test. Each bad frame
//! must be refused with its own error, cost the bad client its connection, and leave the
//! good client served.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use lava_net::{
    AuthConfig, AuthConn, AuthError, Authenticator, Backoff, BackoffConfig, ClusterKey, ConnError,
    FramedConn, KeyRing, Nonce, PeerCred, Timeouts, peer_cred, reconnect, serve, system_now_ms,
};
use lava_xdr::frame::{FrameError, FrameHeader, FrameLimits};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::timeout;

const CLUSTER_KEY_BYTE: u8 = 0x42;
const BODY_BYTES_MAX: u32 = 4096;
/// Bound on any single wait in these tests; nothing should come close.
const TEST_WAIT_MS_MAX: u64 = 5_000;

fn authenticator(key_byte: u8) -> Arc<Authenticator> {
    let key = ClusterKey::from_bytes(&[key_byte; 32]).expect("32-byte key");
    Arc::new(Authenticator::new(KeyRing::new(&key), AuthConfig::default()))
}

fn limits() -> FrameLimits {
    FrameLimits { body_bytes_max: BODY_BYTES_MAX }
}

fn timeouts() -> Timeouts {
    Timeouts { connect_timeout_ms: 1_000, read_timeout_ms: TEST_WAIT_MS_MAX, write_timeout_ms: 1_000 }
}

fn request(sequence: u32) -> FrameHeader {
    FrameHeader { sequence, operation: 7, version: 1, length: 0, status: 0 }
}

async fn within<T>(future: impl Future<Output = T>) -> T {
    timeout(Duration::from_millis(TEST_WAIT_MS_MAX), future).await.expect("test step timed out")
}

/// An authenticated echo server; every connection's error is reported on `errors`.
struct EchoServer {
    addr: SocketAddr,
    errors: mpsc::UnboundedReceiver<ConnError>,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

async fn start_server() -> EchoServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    let auth = authenticator(CLUSTER_KEY_BYTE);
    let (errors_tx, errors) = mpsc::unbounded_channel();
    let (shutdown, shutdown_rx) = oneshot::channel::<()>();
    let handler = move |stream: TcpStream, _peer: SocketAddr| {
        let mut conn = AuthConn::new(FramedConn::new(stream, limits(), timeouts()), Arc::clone(&auth));
        let errors_tx = errors_tx.clone();
        async move {
            loop {
                match conn.read_frame().await {
                    Ok(Some(frame)) => {
                        let reply = FrameHeader { status: 1, ..frame.header };
                        if conn.write_frame(reply, &frame.body).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(err) => {
                        assert!(!conn.is_open(), "the first failure closes the connection");
                        let _ = errors_tx.send(err);
                        return;
                    }
                }
            }
        }
    };
    let task = tokio::spawn(serve(listener, handler, async {
        let _ = shutdown_rx.await;
    }));
    EchoServer { addr, errors, shutdown, task }
}

async fn good_client(addr: SocketAddr) -> AuthConn<TcpStream> {
    let conn = FramedConn::connect(addr, limits(), timeouts()).await.expect("connect");
    AuthConn::new(conn, authenticator(CLUSTER_KEY_BYTE))
}

/// Sends one request on the good connection and checks the echo.
async fn assert_served(client: &mut AuthConn<TcpStream>, sequence: u32) {
    let payload = format!("request {sequence}");
    within(client.write_frame(request(sequence), payload.as_bytes())).await.expect("write");
    let reply = within(client.read_frame()).await.expect("read").expect("a reply, not a close");
    assert_eq!((reply.header.sequence, reply.header.status), (sequence, 1));
    assert_eq!(reply.body, Bytes::from(payload));
}

/// The peer closed this connection: a clean end of stream or a reset.
async fn assert_closed(conn: &mut FramedConn<TcpStream>) {
    match within(conn.read_frame()).await {
        Ok(None) | Err(ConnError::Io(_)) => {}
        other => panic!("expected the server to close the connection, got {other:?}"),
    }
}

/// Sends `bad` (header, body) on a fresh unauthenticated connection and checks that the
/// server reports an error matching `expected`, closes that connection, and still serves
/// the good client before and after.
async fn check_refused(
    bad: (FrameHeader, Bytes),
    wire_limits: FrameLimits,
    expected: fn(&ConnError) -> bool,
) {
    let mut server = start_server().await;
    let mut good = good_client(server.addr).await;
    assert_served(&mut good, 1).await;
    let mut attacker = FramedConn::connect(server.addr, wire_limits, timeouts()).await.expect("connect");
    within(attacker.write_frame(bad.0, &bad.1)).await.expect("write bad frame");
    let err = within(server.errors.recv()).await.expect("server reports the error");
    assert!(expected(&err), "unexpected error: {err}");
    assert_closed(&mut attacker).await;
    assert_served(&mut good, 2).await;
    assert_served(&mut good, 3).await;
}

/// A frame sealed by `sender` at `at_ms`.
fn sealed(sender: &Authenticator, at_ms: u64) -> (FrameHeader, Bytes) {
    let nonce = Nonce::fresh().expect("nonce");
    (request(99), sender.seal(request(99), b"bad payload", at_ms, nonce).expect("seal"))
}

fn flip_bit(body: &Bytes, byte_idx: usize) -> Bytes {
    let mut copy = body.to_vec();
    copy[byte_idx] ^= 0x01;
    Bytes::from(copy)
}

// Goal: one flipped payload bit is refused as a bad MAC and only that connection closes.
// Method: seal correctly, flip the first payload bit, send raw.
#[tokio::test]
async fn tampered_payload_is_refused() {
    let (header, body) = sealed(&authenticator(CLUSTER_KEY_BYTE), system_now_ms());
    check_refused((header, flip_bit(&body, 0)), limits(), |err| {
        matches!(err, ConnError::Auth(AuthError::BadMac { .. }))
    })
    .await;
}

// Goal: one flipped header bit (the operation) is refused as a bad MAC.
// Method: seal for operation 7, send the same body under operation 6.
#[tokio::test]
async fn tampered_header_is_refused() {
    let (header, body) = sealed(&authenticator(CLUSTER_KEY_BYTE), system_now_ms());
    let tampered = FrameHeader { operation: header.operation ^ 1, ..header };
    check_refused((tampered, body), limits(), |err| matches!(err, ConnError::Auth(AuthError::BadMac { .. })))
        .await;
}

// Goal: one flipped MAC bit is refused as a bad MAC. Method: flip the body's last byte.
#[tokio::test]
async fn tampered_mac_is_refused() {
    let (header, body) = sealed(&authenticator(CLUSTER_KEY_BYTE), system_now_ms());
    let last_idx = body.len() - 1;
    check_refused((header, flip_bit(&body, last_idx)), limits(), |err| {
        matches!(err, ConnError::Auth(AuthError::BadMac { .. }))
    })
    .await;
}

// Goal: a frame sealed with another cluster key is refused, naming the unknown key id.
// Method: the attacker seals with a key of 0x24 bytes, the server holds 0x42 bytes.
#[tokio::test]
async fn wrong_key_is_refused() {
    let stranger = authenticator(0x24);
    check_refused(sealed(&stranger, system_now_ms()), limits(), |err| {
        matches!(err, ConnError::Auth(AuthError::UnknownKey { .. }))
    })
    .await;
}

// Goal: frames sealed a minute ahead of or behind the server's clock are refused as
// future and stale (the window is 30 s). Method: seal at now ± 60 s by the system clock.
#[tokio::test]
async fn future_and_stale_frames_are_refused() {
    let sender = authenticator(CLUSTER_KEY_BYTE);
    check_refused(sealed(&sender, system_now_ms() + 60_000), limits(), |err| {
        matches!(err, ConnError::Auth(AuthError::Future { .. }))
    })
    .await;
    check_refused(sealed(&sender, system_now_ms() - 60_000), limits(), |err| {
        matches!(err, ConnError::Auth(AuthError::Stale { .. }))
    })
    .await;
}

// Goal: a body too short for a trailer is refused as malformed.
// Method: a 5-byte body with no trailer at all.
#[tokio::test]
async fn malformed_trailer_is_refused() {
    check_refused((request(5), Bytes::from_static(b"short")), limits(), |err| {
        matches!(err, ConnError::Auth(AuthError::Malformed { body_bytes: 5 }))
    })
    .await;
}

// Goal: frames sent together in one write (write_frames) each arrive sealed, in order, and
// are served one by one; a batch with one frame over the limit sends nothing at all.
#[tokio::test]
async fn frames_written_together_arrive_in_order() {
    let server = start_server().await;
    let mut client = good_client(server.addr).await;
    let payloads = ["first", "second", "third"];
    let frames: Vec<(FrameHeader, &[u8])> =
        payloads.iter().enumerate().map(|(i, p)| (request(10 + i as u32), p.as_bytes())).collect();
    within(client.write_frames(&frames)).await.expect("write");
    for (i, payload) in payloads.iter().enumerate() {
        let reply = within(client.read_frame()).await.expect("read").expect("a reply");
        assert_eq!((reply.header.sequence, reply.body), (10 + i as u32, Bytes::from(*payload)));
    }
    let too_big = vec![0u8; BODY_BYTES_MAX as usize + 1];
    let mut raw = FramedConn::connect(server.addr, limits(), timeouts()).await.expect("connect");
    let batch: [(FrameHeader, &[u8]); 2] = [(request(20), b"fine"), (request(21), &too_big)];
    assert!(matches!(within(raw.write_frames(&batch)).await, Err(ConnError::Frame(_))));
    assert_served(&mut client, 30).await;
}

// Goal: a frame over the server's limit is refused from its header.
// Method: the attacker's own limit is larger, so it sends 5000 bytes to a 4096 limit.
#[tokio::test]
async fn oversized_frame_is_refused() {
    let big = (request(6), Bytes::from(vec![0u8; 5000]));
    check_refused(big, FrameLimits { body_bytes_max: 1 << 20 }, |err| {
        matches!(err, ConnError::Frame(FrameError::BodyTooLarge { length: 5000, max: BODY_BYTES_MAX, .. }))
    })
    .await;
}

// Goal: the same sealed bytes sent twice are refused the second time, even on another
// connection (the replay cache is per server, not per connection); shutdown closes the rest.
// Method: send a valid frame on connection A (echoed), the same bytes on connection B.
#[tokio::test]
async fn replayed_frame_is_refused_across_connections() {
    let mut server = start_server().await;
    let mut good = good_client(server.addr).await;
    assert_served(&mut good, 1).await;
    let (header, body) = sealed(&authenticator(CLUSTER_KEY_BYTE), system_now_ms());
    let mut first = FramedConn::connect(server.addr, limits(), timeouts()).await.expect("connect");
    within(first.write_frame(header, &body)).await.expect("write");
    let echoed = within(first.read_frame()).await.expect("read").expect("echo");
    assert_eq!(echoed.body.len(), b"bad payload".len() + lava_net::TRAILER_BYTES);
    let mut replayer = FramedConn::connect(server.addr, limits(), timeouts()).await.expect("connect");
    within(replayer.write_frame(header, &body)).await.expect("write");
    let err = within(server.errors.recv()).await.expect("server reports the error");
    assert!(matches!(err, ConnError::Auth(AuthError::Replay { .. })), "{err}");
    assert_closed(&mut replayer).await;
    assert_served(&mut good, 2).await;

    server.shutdown.send(()).expect("server still running");
    within(server.task).await.expect("serve returns");
    assert!(matches!(within(good.read_frame()).await, Ok(None) | Err(ConnError::Io(_))));
}

// Goal: a peer that starts a frame and stalls is cut off by the read timeout.
// Method: 10 of the 20 header bytes, then silence; a 100 ms read timeout.
#[tokio::test]
async fn read_timeout_fires() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let mut client = TcpStream::connect(listener.local_addr().expect("addr")).await.expect("connect");
    let (stream, _) = listener.accept().await.expect("accept");
    client.write_all(&[0u8; 10]).await.expect("write");
    let short = Timeouts { read_timeout_ms: 100, ..timeouts() };
    let mut conn = FramedConn::new(stream, limits(), short);
    let err = within(conn.read_frame()).await.expect_err("timeout");
    assert!(matches!(err, ConnError::ReadTimeout { timeout_ms: 100 }), "{err}");
}

// Goal: reconnect gives up after its attempts on a closed port, and connects once the
// port listens, resetting the backoff. Method: millisecond delays, seeded jitter.
#[tokio::test]
async fn reconnect_retries_then_connects() {
    let addr = TcpListener::bind("127.0.0.1:0").await.expect("bind").local_addr().expect("addr");
    let config = BackoffConfig { delay_ms_initial: 2, delay_ms_max: 20 };
    let mut backoff = Backoff::new(config, 1);
    let err = within(reconnect(addr, limits(), timeouts(), &mut backoff, 3)).await.expect_err("closed port");
    assert!(
        matches!(&err, ConnError::GaveUp { attempts: 3, last } if matches!(**last, ConnError::Connect { .. }))
    );
    assert_eq!(backoff.attempt(), 2, "two delays between three attempts");

    let listen_later = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let listener = TcpListener::bind(addr).await.expect("rebind the same port");
        listener.accept().await.expect("accept")
    });
    let conn = within(reconnect(addr, limits(), timeouts(), &mut backoff, 100)).await.expect("connects");
    assert_eq!(conn.get_ref().peer_addr().expect("peer"), addr);
    assert_eq!(backoff.attempt(), 0, "reset after success");
    within(listen_later).await.expect("listener task");
}

// Goal: SO_PEERCRED reports this very process. Method: a Unix listener in a temp dir;
// our uid/gid come from a file this process created there.
#[tokio::test]
async fn peer_credentials_name_this_process() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("lava.sock");
    let listener = UnixListener::bind(&path).expect("bind unix socket");
    let _client = UnixStream::connect(&path).await.expect("connect");
    let (server_side, _) = within(listener.accept()).await.expect("accept");
    let owner = std::fs::metadata(&path).expect("stat socket");
    let cred = peer_cred(&server_side).expect("SO_PEERCRED");
    assert_eq!(cred, PeerCred { uid: owner.uid(), gid: owner.gid(), pid: Some(std::process::id()) });
}
