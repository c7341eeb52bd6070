//! The batch protocol, spoken by hand over blocking sockets: [`FrameConn`]
//! (raw frames, for hostile input too), [`Client`] (a command: credential
//! sealed with the cluster key, one request at a time) and [`FakeSbd`] (an
//! sbatchd channel: every frame sealed and opened with the cluster key).
//!
//! Nothing here uses the daemons' code paths beyond the shared wire crates,
//! so a test sees exactly what a foreign peer would.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use lava_batch_wire::{self as wire, BATCH_VERSION, Operation};
use lava_net::{Authenticator, Credential, Nonce, system_now_ms};
use lava_xdr::frame::{Frame, FrameHeader, FrameLimits, decode_frame, encode_frame};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::IO_TIMEOUT;

/// Frame limit of the test peers: above anything mbatchd may send.
pub const TEST_FRAME_BYTES_MAX: u32 = 16 << 20;
/// XDR limits of the test peers.
pub const TEST_LIMITS: lava_xdr::Limits = lava_xdr::Limits {
    input_bytes_max: TEST_FRAME_BYTES_MAX as usize,
    string_bytes_max: 1 << 20,
    ..lava_xdr::Limits::DEFAULT
};

/// A request header of the batch protocol.
pub fn header(op: Operation, sequence: u32) -> FrameHeader {
    FrameHeader { sequence, operation: op.code(), version: BATCH_VERSION, length: 0, status: 0 }
}

/// XDR of `value`.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    lava_xdr::to_bytes(value).expect("encodes")
}

/// `bytes` decoded as `T`; panics naming `T` if they do not decode.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> T {
    lava_xdr::from_bytes(bytes, &TEST_LIMITS)
        .unwrap_or_else(|error| panic!("{} does not decode: {error}", std::any::type_name::<T>()))
}

/// One frame's bytes: header (with its length set) and body.
pub fn frame_bytes(header: FrameHeader, body: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_frame(header, body, &FrameLimits { body_bytes_max: TEST_FRAME_BYTES_MAX }, &mut out)
        .expect("frames");
    out.to_vec()
}

/// Frames over a blocking TCP connection, every read bounded by [`IO_TIMEOUT`].
#[derive(Debug)]
pub struct FrameConn {
    stream: TcpStream,
    buf: BytesMut,
}

impl FrameConn {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> FrameConn {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .unwrap_or_else(|error| panic!("connect to {addr}: {error}"));
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("set a read timeout");
        stream.set_write_timeout(Some(IO_TIMEOUT)).expect("set a write timeout");
        stream.set_nodelay(true).expect("set TCP_NODELAY");
        FrameConn { stream, buf: BytesMut::new() }
    }

    /// Sends bytes as they are (hostile input included).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// Sends one frame.
    pub fn send(&mut self, header: FrameHeader, body: &[u8]) {
        self.send_raw(&frame_bytes(header, body));
    }

    /// Closes the sending side (the peer reads end of file). A peer that has
    /// already closed and reset the connection (it may refuse a frame from its
    /// header alone) leaves nothing to shut down, which is not an error here.
    pub fn shutdown_write(&mut self) {
        match self.stream.shutdown(Shutdown::Write) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotConnected => {}
            Err(e) => panic!("shutdown: {e}"),
        }
    }

    /// The next frame, or `None` once the peer closed the connection (a reset
    /// counts as closed). Panics if nothing happens within [`IO_TIMEOUT`].
    pub fn recv(&mut self) -> Option<Frame> {
        let limits = FrameLimits { body_bytes_max: TEST_FRAME_BYTES_MAX };
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            if let Some(frame) = decode_frame(&mut self.buf, &limits).expect("the daemon sends valid frames")
            {
                return Some(frame);
            }
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    assert!(self.buf.is_empty(), "the daemon closed in the middle of a frame");
                    return None;
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(error) if error.kind() == ErrorKind::ConnectionReset => return None,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    assert!(Instant::now() < deadline, "no frame and no close within {IO_TIMEOUT:?}");
                }
                Err(error) => panic!("receive: {error}"),
            }
        }
    }

    /// Asserts that the daemon closes the connection, after at most the
    /// REQUEST_FAILED frames it may send first; returns those.
    pub fn expect_closed(&mut self) -> Vec<wire::ErrorReply> {
        let mut errors = Vec::new();
        while let Some(frame) = self.recv() {
            assert_eq!(
                frame.header.operation,
                Operation::RequestFailed.code(),
                "only REQUEST_FAILED may come before the close"
            );
            errors.push(decode(&frame.body));
        }
        errors
    }
}

/// A request id for tests: `n` in the low half.
pub fn request_id(n: u64) -> wire::RequestId {
    wire::RequestId { high: 0x7e57_0000_0000_0000, low: n }
}

/// A submission of `command` to the default queue, as `bsub command` sends it from localhost.
pub fn submit_request(command: &str) -> wire::SubmitRequest {
    wire::SubmitRequest {
        command: command.to_owned(),
        cwd: "/tmp".into(),
        home_dir: "/tmp".into(),
        n_slots: 1,
        from_host: "localhost".into(),
        umask: 0o022,
        env: vec![wire::EnvVar { name: "PATH".into(), value: "/usr/bin:/bin".into() }],
        ..wire::SubmitRequest::default()
    }
}

/// `bjobs -u all -a`: every job in memory.
pub fn query_all() -> wire::JobQuery {
    wire::JobQuery {
        jobs: vec![],
        user: "all".into(),
        state_filter: wire::state_filter::ALL,
        queue: String::new(),
        host: String::new(),
        job_name: String::new(),
        after_job: 0,
        after_index: 0,
    }
}

/// A command connection that vouches for its user with credentials sealed by
/// the cluster key (as the local daemon would), one request at a time.
#[derive(Debug)]
pub struct Client {
    /// The connection (public for tests that send something odd on it).
    pub conn: FrameConn,
    auth: Arc<Authenticator>,
    /// The user the credentials name.
    pub user: String,
    /// Their uid.
    pub uid: u32,
    sequence: u32,
}

impl Client {
    /// Connects to `addr` as `alice` (uid 1000) of localhost, sealing with `auth`.
    pub fn connect(addr: SocketAddr, auth: Arc<Authenticator>) -> Client {
        Client { conn: FrameConn::connect(addr), auth, user: "alice".into(), uid: 1000, sequence: 0 }
    }

    /// A fresh credential (each is good once).
    pub fn credential(&self) -> Vec<u8> {
        Credential {
            uid: self.uid,
            gid: 100,
            username: self.user.clone(),
            hostname: "localhost".into(),
            issued_at_ms: system_now_ms(),
            nonce: Nonce::fresh().expect("a nonce"),
            audience: lava_net::Audience::new(lava_net::Audience::MBATCHD, super::CLUSTER_NAME),
        }
        .seal(&self.auth)
        .expect("the credential seals")
    }

    /// Sends `body` as operation `op` with `credential` and returns the answer
    /// frame; asserts that it echoes the request's sequence.
    pub fn request_with<T: Serialize>(
        &mut self,
        op: Operation,
        credential: Vec<u8>,
        request_id: wire::RequestId,
        body: T,
    ) -> Frame {
        self.sequence += 1;
        let request = wire::ClientRequest { credential, request_id, body };
        self.conn.send(header(op, self.sequence), &encode(&request));
        let frame = self.conn.recv().expect("an answer, not a close");
        assert_eq!(frame.header.sequence, self.sequence, "the answer echoes the request's sequence");
        assert_eq!(frame.header.version, BATCH_VERSION);
        frame
    }

    /// Sends a request with a fresh credential and decodes the answer:
    /// `Ok` for `expected_op`, `Err` for REQUEST_FAILED.
    pub fn call<T: Serialize, R: DeserializeOwned>(
        &mut self,
        op: Operation,
        expected_op: Operation,
        request_id: wire::RequestId,
        body: T,
    ) -> Result<R, wire::ErrorReply> {
        let credential = self.credential();
        let frame = self.request_with(op, credential, request_id, body);
        answer(&frame, expected_op)
    }

    /// SUBMIT_JOB.
    pub fn submit(
        &mut self,
        request_id: wire::RequestId,
        request: wire::SubmitRequest,
    ) -> Result<wire::SubmitReply, wire::ErrorReply> {
        self.call(Operation::SubmitJob, Operation::SubmitJobReply, request_id, request)
    }

    /// JOB_QUERY.
    pub fn query(&mut self, query: wire::JobQuery) -> Result<wire::JobQueryReply, wire::ErrorReply> {
        self.call(Operation::JobQuery, Operation::JobQueryReply, request_id(0), query)
    }

    /// SIGNAL_JOBS.
    pub fn signal(
        &mut self,
        request_id: wire::RequestId,
        request: wire::SignalRequest,
    ) -> Result<wire::SignalReply, wire::ErrorReply> {
        self.call(Operation::SignalJobs, Operation::SignalJobsReply, request_id, request)
    }
}

/// Decodes an answer frame: `Ok` for `expected_op`, `Err` for REQUEST_FAILED.
pub fn answer<R: DeserializeOwned>(frame: &Frame, expected_op: Operation) -> Result<R, wire::ErrorReply> {
    match Operation::from_code(frame.header.operation) {
        Some(op) if op == expected_op => Ok(decode(&frame.body)),
        Some(Operation::RequestFailed) => {
            let error: wire::ErrorReply = decode(&frame.body);
            assert_eq!(
                frame.header.status, error.code,
                "REQUEST_FAILED repeats its code in the header status"
            );
            Err(error)
        }
        other => panic!("expected {} or REQUEST_FAILED, got {other:?}", expected_op.name()),
    }
}

/// An sbatchd channel, every frame sealed with the cluster key both ways.
#[derive(Debug)]
pub struct FakeSbd {
    /// The connection (public for tests that send something odd on it).
    pub conn: FrameConn,
    auth: Arc<Authenticator>,
    /// The host it registered as.
    pub host: String,
    sequence: u32,
}

impl FakeSbd {
    /// Connects to `addr` and sends SBD_REGISTER for `host`; does not wait for the answer.
    pub fn connect(addr: SocketAddr, auth: Arc<Authenticator>, host: &str, n_cpus: u32) -> FakeSbd {
        let mut sbd = FakeSbd { conn: FrameConn::connect(addr), auth, host: host.to_owned(), sequence: 0 };
        let register = wire::SbdRegister { host_name: host.to_owned(), n_cpus, sbd_pid: std::process::id() };
        sbd.send(Operation::SbdRegister, &register);
        sbd
    }

    /// Connects, registers, and returns the channel with mbatchd's SBD_REGISTER_ACK.
    pub fn register(
        addr: SocketAddr,
        auth: Arc<Authenticator>,
        host: &str,
        n_cpus: u32,
    ) -> (FakeSbd, wire::SbdRegisterAck) {
        let mut sbd = FakeSbd::connect(addr, auth, host, n_cpus);
        let ack = sbd.expect(Operation::SbdRegisterAck);
        (sbd, ack)
    }

    /// The sealed body of `payload` under `header` (for tests that tamper with it).
    pub fn seal(&self, header: FrameHeader, payload: &[u8]) -> Bytes {
        self.auth.seal(header, payload, system_now_ms(), Nonce::fresh().expect("a nonce")).expect("seals")
    }

    /// Sends `body` as operation `op`, sealed.
    pub fn send<T: Serialize>(&mut self, op: Operation, body: &T) {
        self.sequence += 1;
        let header = header(op, self.sequence);
        let sealed = self.seal(header, &encode(body));
        self.conn.send(header, &sealed);
    }

    /// The next message from mbatchd, authenticated: its operation and payload;
    /// `None` once mbatchd closed the channel.
    pub fn recv(&mut self) -> Option<(Operation, Bytes)> {
        let frame = self.conn.recv()?;
        assert_eq!(frame.header.version, BATCH_VERSION);
        let payload =
            self.auth.open(&frame, system_now_ms()).expect("mbatchd seals every frame of the channel");
        let op = Operation::from_code(frame.header.operation).expect("a known operation");
        Some((op, payload))
    }

    /// Waits for a message of operation `op` and decodes it. Resends of
    /// BATCH_NEW_JOB and BATCH_JOB_SIGNAL on the way are skipped (mbatchd
    /// resends them while unanswered); anything else is a failure.
    pub fn expect<T: DeserializeOwned>(&mut self, op: Operation) -> T {
        loop {
            let (got, payload) =
                self.recv().unwrap_or_else(|| panic!("channel closed while waiting for {}", op.name()));
            if got == op {
                return decode(&payload);
            }
            assert!(
                matches!(got, Operation::NewJob | Operation::JobSignal),
                "expected {}, got {}",
                op.name(),
                got.name()
            );
        }
    }
}
