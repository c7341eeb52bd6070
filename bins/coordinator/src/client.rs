//! The blocking client of the coordinator and a small worker library, used by
//! `coordctl`, the integration tests and the benchmark. No async runtime: one
//! TCP connection per [`Client`].
//!
//! # Authentication
//! [`Client::connect`] asks the local sbatchd for a credential on its Unix
//! socket (`LAVA_CMD_SOCKET`; the batch commands' CREDENTIAL_REQUEST, see
//! [`fetch_credential`]): sbatchd learns the caller's uid from the kernel and
//! seals it with the cluster key, which the caller never reads. The client
//! sends the token as the connection's first frame (HELLO); the coordinator
//! verifies it and acts for that user on every later request of the
//! connection ([`Client::identity`]). A token is good once, within 30 s, so
//! each connection fetches its own.
//!
//! # Pipelining
//! [`Client::call`] sends one request and waits for its answer.
//! [`Client::pipeline`] sends several requests in one write and then reads
//! their answers, which come back in request order: fewer round trips, and
//! the coordinator can cover them all with one fsync.
//!
//! # Submitting exactly once
//! [`submit_once`] chooses a submission id ([`new_submission_id`], 128 random bits) and
//! sends SUBMIT_TASK_ONCE under it, reconnecting and sending it again with the same id
//! while the answer does not come (a connection closed or timed out, a failover, "try
//! again") until its retry period ends. The coordinator answers a repeated id with the task
//! the first attempt created, so the task exists once, whichever candidate answers
//! (docs/protocols/coordinator.md, "Submission ids"). [`Client::submit`] is the plain
//! SUBMIT_TASK: one attempt, and a lost answer leaves the caller unsure.
//!
//! A [`Worker`] pulls a task ([`Worker::pull`]), keeps its lease alive from a
//! background thread with its own connection ([`Worker::start_heartbeat`],
//! every third of the lease duration), and ends it with
//! [`Worker::complete`] or [`Worker::fail`]. If a heartbeat is refused the
//! lease is lost: [`Heartbeat::lost`] says so, and the worker should stop
//! working on the task (its completion would be refused anyway).

use std::io::{BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use lava_batch_wire as batch;
use lava_conf::BaseConfig;
use lava_coord_wire::{self as wire, COORD_VERSION, Reply, Request};
use lava_xdr::frame::{FrameHeader, HEADER_BYTES, encode_frame};

use crate::codec::{FRAME_LIMITS, MESSAGE_LIMITS};

/// Time allowed to connect, and for one answer to arrive.
pub const IO_TIMEOUT_MS: u64 = 30_000;
/// Time allowed for the local sbatchd's credential answer.
pub const CREDENTIAL_TIMEOUT_MS: u64 = 5_000;
/// Largest credential answer accepted from the local sbatchd.
pub const CREDENTIAL_REPLY_BYTES_MAX: u32 = 64 << 10;
/// With several master candidates: time allowed to connect to one, and for one answer
/// (a paused leader's kernel still completes the handshake; its successor answers).
pub const CANDIDATE_REPLY_TIMEOUT_MS: u64 = 5_000;
/// Pause between two empty lease requests of [`Worker::pull`].
pub const PULL_RETRY_MS: u64 = 100;
/// First pause before [`submit_once`] sends a submission again; it doubles up to
/// [`SUBMIT_RETRY_PAUSE_MAX_MS`].
pub const SUBMIT_RETRY_PAUSE_MS: u64 = 100;
/// Longest pause between two attempts of [`submit_once`].
pub const SUBMIT_RETRY_PAUSE_MAX_MS: u64 = 1_000;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The configuration could not be loaded.
    #[error("configuration: {0}")]
    Config(String),
    /// No credential from the local sbatchd.
    #[error("no credential from the local sbatchd at {}: {reason}", socket.display())]
    Credential {
        /// The credential socket (`LAVA_CMD_SOCKET`).
        socket: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The connection failed.
    #[error("connection to {addr}: {source}")]
    Io {
        /// The coordinator.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A frame was malformed.
    #[error("bad answer from {addr}: {reason}")]
    Protocol {
        /// The coordinator.
        addr: SocketAddr,
        /// What was wrong.
        reason: String,
    },
    /// The coordinator refused the request (or, with `ERR_AUTH`, the connection).
    #[error("{}", .0.message)]
    Refused(wire::ErrorReply),
}

impl ClientError {
    /// The wire error code if the coordinator refused the request.
    pub fn code(&self) -> Option<u32> {
        match self {
            ClientError::Refused(error) => Some(error.code),
            _ => None,
        }
    }
}

/// Where the coordinator is, and where the local credential socket is.
///
/// With several master candidates (`LSF_MASTER_LIST`), the coordinator runs on each and
/// only the leader listens: [`Client::connect`] tries them in list order, starting after
/// the last one that failed (shared by the clones of an endpoint), each with
/// [`CANDIDATE_REPLY_TIMEOUT_MS`] to connect and to answer.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The coordinator's address (the first candidate's with several).
    pub addr: SocketAddr,
    /// The local sbatchd's credential socket (`LAVA_CMD_SOCKET`).
    pub cmd_socket: PathBuf,
    /// The cluster's name: credentials are asked for its coordinator.
    pub cluster: String,
    /// Every candidate's address in `LSF_MASTER_LIST` order (just `addr` with one).
    pub candidates: Vec<SocketAddr>,
    /// The candidate to try first.
    first: Arc<std::sync::atomic::AtomicUsize>,
}

impl Endpoint {
    /// From the configuration in `envdir` (else `LSF_ENVDIR`): `LAVA_COORD_PORT`
    /// on the master host's `LAVA_ADDR` (else 127.0.0.1), and `LAVA_CMD_SOCKET`.
    /// Nothing here reads the cluster key.
    pub fn from_config(envdir: Option<&Path>) -> Result<Endpoint, ClientError> {
        let envdir = envdir.map(Path::to_owned).unwrap_or_else(lava_conf::envdir_from_env);
        let conf = BaseConfig::load(&envdir).map_err(|error| ClientError::Config(error.to_string()))?;
        let port = conf.lsf.coord_port;
        let candidates = conf.master_candidates();
        if candidates.len() >= 2 {
            let mut addrs = Vec::with_capacity(candidates.len());
            for candidate in candidates {
                let addr = match candidate.addr {
                    Some(ip) => Some(SocketAddr::new(ip, port)),
                    None => std::net::ToSocketAddrs::to_socket_addrs(&(candidate.name.as_str(), port))
                        .ok()
                        .and_then(|mut found| found.next()),
                };
                addrs.push(addr.ok_or_else(|| {
                    ClientError::Config(format!(
                        "master candidate {}: no LAVA_ADDR and the name does not resolve",
                        candidate.name
                    ))
                })?);
            }
            return Ok(Endpoint::candidates(addrs, &conf.lsf.cmd_socket, &conf.cluster_name));
        }
        let ip = conf.master_host().and_then(|host| host.addr).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        Ok(Endpoint::new(SocketAddr::new(ip, port), &conf.lsf.cmd_socket, &conf.cluster_name))
    }

    /// At `addr`, with credentials for the coordinator of `cluster` from `cmd_socket`.
    pub fn new(addr: SocketAddr, cmd_socket: &Path, cluster: &str) -> Endpoint {
        Endpoint::candidates(vec![addr], cmd_socket, cluster)
    }

    /// At whichever of `candidates` (not empty, in `LSF_MASTER_LIST` order) leads.
    pub fn candidates(candidates: Vec<SocketAddr>, cmd_socket: &Path, cluster: &str) -> Endpoint {
        assert!(!candidates.is_empty(), "an endpoint has an address");
        Endpoint {
            addr: candidates[0],
            cmd_socket: cmd_socket.to_owned(),
            cluster: cluster.to_owned(),
            candidates,
            first: Arc::default(),
        }
    }

    /// The time allowed to connect and for each answer.
    fn timeout(&self) -> Duration {
        Duration::from_millis(if self.candidates.len() > 1 {
            CANDIDATE_REPLY_TIMEOUT_MS
        } else {
            IO_TIMEOUT_MS
        })
    }
}

/// Asks the local sbatchd at `socket` for a fresh credential token for the
/// calling process's user, good only at the coordinator of `cluster` (the batch
/// commands' CREDENTIAL_REQUEST in the batch header, answered CREDENTIAL_REPLY or
/// REQUEST_FAILED).
pub fn fetch_credential(socket: &Path, cluster: &str) -> Result<Vec<u8>, ClientError> {
    let fail = |reason: String| ClientError::Credential { socket: socket.to_owned(), reason };
    let io = |error: std::io::Error| fail(error.to_string());
    let mut stream = UnixStream::connect(socket).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            fail(format!("{error} (is sbatchd running on this host?)"))
        }
        _ => fail(error.to_string()),
    })?;
    let timeout = Some(Duration::from_millis(CREDENTIAL_TIMEOUT_MS));
    stream.set_read_timeout(timeout).and_then(|()| stream.set_write_timeout(timeout)).map_err(io)?;
    let audience = batch::CredentialRequest {
        audience_kind: batch::AUDIENCE_COORDINATOR,
        audience_cluster: cluster.to_owned(),
    };
    let body = lava_xdr::to_bytes(&audience).map_err(|error| fail(error.to_string()))?;
    let request = FrameHeader {
        sequence: 1,
        operation: batch::Operation::CredentialRequest.code(),
        version: batch::BATCH_VERSION,
        length: u32::try_from(body.len()).map_err(|error| fail(error.to_string()))?,
        status: 0,
    };
    let mut frame = Vec::with_capacity(HEADER_BYTES + body.len());
    request.write(&mut frame);
    frame.extend_from_slice(&body);
    stream.write_all(&frame).map_err(io)?;
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).map_err(io)?;
    let header = FrameHeader::parse(&head).map_err(|error| fail(error.to_string()))?;
    header.check_version(batch::BATCH_VERSION).map_err(|error| fail(error.to_string()))?;
    if header.length > CREDENTIAL_REPLY_BYTES_MAX {
        return Err(fail(format!("an answer of {} bytes is over the limit", header.length)));
    }
    let mut body = vec![0u8; header.length as usize];
    stream.read_exact(&mut body).map_err(io)?;
    let limits = lava_xdr::Limits::DEFAULT;
    match batch::Operation::from_code(header.operation) {
        Some(batch::Operation::CredentialReply) => {
            let reply: batch::CredentialReply = lava_xdr::from_bytes(&body, &limits)
                .map_err(|error| fail(format!("malformed CREDENTIAL_REPLY: {error}")))?;
            Ok(reply.token)
        }
        Some(batch::Operation::RequestFailed) => {
            let error: batch::ErrorReply = lava_xdr::from_bytes(&body, &limits)
                .map_err(|error| fail(format!("malformed REQUEST_FAILED: {error}")))?;
            Err(fail(format!("refused: {}", error.message)))
        }
        _ => Err(fail(format!("unexpected answer operation {}", header.operation))),
    }
}

/// One authenticated connection to the coordinator.
#[derive(Debug)]
pub struct Client {
    endpoint: Endpoint,
    stream: BufReader<TcpStream>,
    sequence: u32,
    buf: BytesMut,
    identity: wire::HelloReply,
}

impl Client {
    /// Connects to `endpoint` with a fresh credential from the local sbatchd.
    /// With several candidates, tries each once in list order from the one after the last
    /// that failed (a fresh credential each); the last one's error if none answers.
    pub fn connect(endpoint: &Endpoint) -> Result<Client, ClientError> {
        let n = endpoint.candidates.len();
        let first = endpoint.first.load(Ordering::Relaxed) % n;
        let mut last_error = None;
        for at in (0..n).map(|k| (first + k) % n) {
            let attempt = Client::open_at(endpoint, endpoint.candidates[at]).and_then(|stream| {
                let credential = fetch_credential(&endpoint.cmd_socket, &endpoint.cluster)?;
                Client::hello(endpoint, stream, credential)
            });
            match attempt {
                Ok(client) => {
                    endpoint.first.store(at, Ordering::Relaxed);
                    return Ok(client);
                }
                Err(error @ (ClientError::Io { .. } | ClientError::Protocol { .. })) if n > 1 => {
                    endpoint.first.store((at + 1) % n, Ordering::Relaxed);
                    last_error = Some(error);
                }
                Err(error) => return Err(error),
            }
        }
        Err(last_error.expect("an endpoint has an address"))
    }

    /// Connects to `endpoint` presenting `credential` as it is (tests use it
    /// to present forged and replayed tokens).
    pub fn connect_with_credential(endpoint: &Endpoint, credential: Vec<u8>) -> Result<Client, ClientError> {
        let stream = Client::open(endpoint)?;
        Client::hello(endpoint, stream, credential)
    }

    fn open(endpoint: &Endpoint) -> Result<TcpStream, ClientError> {
        Client::open_at(endpoint, endpoint.addr)
    }

    fn open_at(endpoint: &Endpoint, addr: SocketAddr) -> Result<TcpStream, ClientError> {
        let io = |source| ClientError::Io { addr, source };
        let timeout = endpoint.timeout();
        let stream = TcpStream::connect_timeout(&addr, timeout).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        Ok(stream)
    }

    fn hello(endpoint: &Endpoint, stream: TcpStream, credential: Vec<u8>) -> Result<Client, ClientError> {
        // Errors name the candidate this connection reached.
        let mut endpoint = endpoint.clone();
        if let Ok(peer) = stream.peer_addr() {
            endpoint.addr = peer;
        }
        let mut client = Client {
            endpoint,
            stream: BufReader::with_capacity(16 << 10, stream),
            sequence: 0,
            buf: BytesMut::new(),
            identity: wire::HelloReply { uid: u32::MAX, user: String::new(), admin: false },
        };
        match client.call(&Request::Hello(wire::Hello { credential }))? {
            Reply::Hello(identity) => {
                client.identity = identity;
                Ok(client)
            }
            other => Err(client.unexpected(&other)),
        }
    }

    /// Who the coordinator takes this connection's caller for.
    pub fn identity(&self) -> &wire::HelloReply {
        &self.identity
    }

    /// Sends `request` and returns the answer; a REQUEST_FAILED is [`ClientError::Refused`].
    pub fn call(&mut self, request: &Request) -> Result<Reply, ClientError> {
        let mut answers = self.pipeline(std::slice::from_ref(request))?;
        answers.pop().expect("one answer per request").map_err(ClientError::Refused)
    }

    /// Sends every request in one write, then reads their answers in order.
    /// The outer error is the connection's (it is unusable then); each inner
    /// one is that request's refusal.
    pub fn pipeline(
        &mut self,
        requests: &[Request],
    ) -> Result<Vec<Result<Reply, wire::ErrorReply>>, ClientError> {
        let addr = self.endpoint.addr;
        let io = |source| ClientError::Io { addr, source };
        let protocol = |reason: String| ClientError::Protocol { addr, reason };
        self.buf.clear();
        let first = self.sequence.wrapping_add(1);
        for request in requests {
            self.sequence = self.sequence.wrapping_add(1);
            let header = FrameHeader {
                sequence: self.sequence,
                operation: request.operation().code(),
                version: COORD_VERSION,
                length: 0,
                status: 0,
            };
            encode_frame(header, &request.encode_body(), &FRAME_LIMITS, &mut self.buf)
                .map_err(|error| protocol(error.to_string()))?;
        }
        self.stream.get_mut().write_all(&self.buf).map_err(io)?;
        let mut answers = Vec::with_capacity(requests.len());
        for i in 0..requests.len() {
            let expected = first.wrapping_add(i as u32);
            let mut head = [0u8; HEADER_BYTES];
            self.stream.read_exact(&mut head).map_err(io)?;
            let header = FrameHeader::parse(&head).map_err(|error| protocol(error.to_string()))?;
            if header.length > FRAME_LIMITS.body_bytes_max {
                return Err(protocol(format!("answer of {} bytes is over the limit", header.length)));
            }
            let mut body = vec![0u8; header.length as usize];
            self.stream.read_exact(&mut body).map_err(io)?;
            if header.sequence != expected {
                return Err(protocol(format!("answer to sequence {}, expected {expected}", header.sequence)));
            }
            header.check_version(COORD_VERSION).map_err(|error| protocol(error.to_string()))?;
            match wire::decode_reply(header.operation, &body, &MESSAGE_LIMITS) {
                Ok(Reply::Error(error)) => answers.push(Err(error)),
                Ok(reply) => answers.push(Ok(reply)),
                Err(error) => return Err(protocol(error.to_string())),
            }
        }
        Ok(answers)
    }

    fn unexpected(&self, reply: &Reply) -> ClientError {
        ClientError::Protocol { addr: self.endpoint.addr, reason: format!("unexpected answer {reply:?}") }
    }

    /// Submits a task; returns its id once it is durable.
    pub fn submit(&mut self, payload: Vec<u8>) -> Result<u64, ClientError> {
        match self.call(&Request::Submit(wire::SubmitTask { payload }))? {
            Reply::Submitted(reply) => Ok(reply.task_id),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Submits a task under `submission` (SUBMIT_TASK_ONCE): the new task, or the one an
    /// earlier attempt with the same id created (`repeated`), once it is durable.
    pub fn submit_under(
        &mut self,
        submission: wire::SubmissionId,
        payload: Vec<u8>,
    ) -> Result<wire::SubmitTaskOnceReply, ClientError> {
        match self.call(&Request::SubmitOnce(wire::SubmitTaskOnce { submission, payload }))? {
            Reply::SubmittedOnce(reply) => Ok(reply),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Asks for a lease for `worker`; `None` when nothing is schedulable.
    pub fn lease(&mut self, worker: &str) -> Result<Option<wire::LeaseGrant>, ClientError> {
        match self.call(&Request::Lease(wire::LeaseRequest { worker: worker.to_owned() }))? {
            Reply::Lease(reply) => Ok(reply.lease),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Extends a lease; returns its new expiry.
    pub fn heartbeat(&mut self, task_id: u64, lease_id: u64) -> Result<u64, ClientError> {
        match self.call(&Request::Heartbeat(wire::Heartbeat { task_id, lease_id }))? {
            Reply::Extended(reply) => Ok(reply.expires_at_ms),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Completes a task under its lease.
    pub fn complete(&mut self, task_id: u64, lease_id: u64) -> Result<wire::OutcomeReply, ClientError> {
        match self.call(&Request::Complete(wire::TaskOutcome { task_id, lease_id }))? {
            Reply::Outcome(reply) => Ok(reply),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Fails a task under its lease.
    pub fn fail(&mut self, task_id: u64, lease_id: u64) -> Result<wire::OutcomeReply, ClientError> {
        match self.call(&Request::Fail(wire::TaskOutcome { task_id, lease_id }))? {
            Reply::Outcome(reply) => Ok(reply),
            other => Err(self.unexpected(&other)),
        }
    }

    /// One task.
    pub fn task(&mut self, task_id: u64) -> Result<wire::TaskInfo, ClientError> {
        match self.call(&Request::Task(wire::TaskQuery { task_id }))? {
            Reply::Task(reply) => Ok(reply.task),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Tasks counted by state.
    pub fn counts(&mut self) -> Result<wire::CountsReply, ClientError> {
        match self.call(&Request::Counts)? {
            Reply::Counts(reply) => Ok(reply),
            other => Err(self.unexpected(&other)),
        }
    }

    /// The daemon's counters (STATS_QUERY), as `(name, value)` in the daemon's order.
    pub fn stats(&mut self) -> Result<Vec<wire::Counter>, ClientError> {
        match self.call(&Request::Stats)? {
            Reply::Stats(reply) => Ok(reply.counters),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Workers seen.
    pub fn workers(&mut self) -> Result<Vec<wire::WorkerInfo>, ClientError> {
        match self.call(&Request::Workers)? {
            Reply::Workers(reply) => Ok(reply.workers),
            other => Err(self.unexpected(&other)),
        }
    }

    /// Valid leases.
    pub fn leases(&mut self) -> Result<Vec<wire::LeaseInfo>, ClientError> {
        match self.call(&Request::Leases)? {
            Reply::Leases(reply) => Ok(reply.leases),
            other => Err(self.unexpected(&other)),
        }
    }
}

/// A new submission id: 128 random bits from the kernel (never all zero).
pub fn new_submission_id() -> Result<wire::SubmissionId, ClientError> {
    loop {
        let mut bytes = [0u8; 16];
        if getrandom::fill(&mut bytes).is_err() {
            std::fs::File::open("/dev/urandom").and_then(|mut file| file.read_exact(&mut bytes)).map_err(
                |error| ClientError::Config(format!("no random bytes for a submission id: {error}")),
            )?;
        }
        let (high, low) = bytes.split_at(8);
        let id = wire::SubmissionId {
            high: u64::from_be_bytes(high.try_into().expect("8 bytes")),
            low: u64::from_be_bytes(low.try_into().expect("8 bytes")),
        };
        if id.high != 0 || id.low != 0 {
            return Ok(id);
        }
    }
}

/// Submits `payload` exactly once under `submission` (see the module doc): connects to
/// whichever candidate leads and sends SUBMIT_TASK_ONCE, and while no answer comes (the
/// connection failed, closed or timed out, or the coordinator said "try again") connects
/// again and sends the same id, until `retry` has passed since the first attempt; then the
/// last error. A refusal other than "try again" is returned at once.
pub fn submit_once(
    endpoint: &Endpoint,
    submission: wire::SubmissionId,
    payload: &[u8],
    retry: Duration,
) -> Result<wire::SubmitTaskOnceReply, ClientError> {
    let deadline = Instant::now() + retry;
    let mut pause = Duration::from_millis(SUBMIT_RETRY_PAUSE_MS);
    loop {
        let attempt = Client::connect(endpoint)
            .and_then(|mut client| client.submit_under(submission, payload.to_vec()));
        let error = match attempt {
            Ok(reply) => return Ok(reply),
            Err(error @ (ClientError::Io { .. } | ClientError::Protocol { .. })) => error,
            Err(error) if error.code() == Some(wire::ERR_TRY_AGAIN) => error,
            Err(error) => return Err(error),
        };
        let now = Instant::now();
        if now >= deadline {
            return Err(error);
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(SUBMIT_RETRY_PAUSE_MAX_MS));
    }
}

/// A pull worker: a name and a connection.
#[derive(Debug)]
pub struct Worker {
    name: String,
    client: Client,
    endpoint: Endpoint,
}

/// A lease held by a [`Worker`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The task.
    pub task_id: u64,
    /// The lease.
    pub lease_id: u64,
    /// Its expiry when granted, ms since the epoch.
    pub expires_at_ms: u64,
    /// The task's payload.
    pub payload: Vec<u8>,
}

impl Worker {
    /// Connects a worker called `name`.
    pub fn connect(endpoint: &Endpoint, name: &str) -> Result<Worker, ClientError> {
        Ok(Worker { name: name.to_owned(), client: Client::connect(endpoint)?, endpoint: endpoint.clone() })
    }

    /// Asks for a task until one is granted or `wait` has passed (`None` then).
    pub fn pull(&mut self, wait: Duration) -> Result<Option<Lease>, ClientError> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(grant) = self.client.lease(&self.name)? {
                return Ok(Some(Lease {
                    task_id: grant.task_id,
                    lease_id: grant.lease_id,
                    expires_at_ms: grant.expires_at_ms,
                    payload: grant.payload,
                }));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(PULL_RETRY_MS).min(deadline - Instant::now()));
        }
    }

    /// Heartbeats `lease` every `interval` from a background thread with its
    /// own connection, until the handle is stopped or dropped or a heartbeat is refused.
    pub fn start_heartbeat(&self, lease: &Lease, interval: Duration) -> Heartbeat {
        let (stop, stopped) = mpsc::channel::<()>();
        let lost = Arc::new(AtomicBool::new(false));
        let (endpoint, task_id, lease_id, flag) =
            (self.endpoint.clone(), lease.task_id, lease.lease_id, Arc::clone(&lost));
        let thread = std::thread::spawn(move || {
            let mut client = None;
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                if client.is_none() {
                    client = Client::connect(&endpoint).ok();
                }
                let Some(connection) = client.as_mut() else { continue };
                match connection.heartbeat(task_id, lease_id) {
                    Ok(_) => {}
                    Err(ClientError::Refused(_)) => {
                        flag.store(true, Ordering::SeqCst);
                        return;
                    }
                    // A broken connection is retried at the next interval.
                    Err(_) => client = None,
                }
            }
        });
        Heartbeat { stop: Some(stop), thread: Some(thread), lost }
    }

    /// Completes the task of `lease`.
    pub fn complete(&mut self, lease: &Lease) -> Result<wire::OutcomeReply, ClientError> {
        self.client.complete(lease.task_id, lease.lease_id)
    }

    /// Fails the task of `lease`.
    pub fn fail(&mut self, lease: &Lease) -> Result<wire::OutcomeReply, ClientError> {
        self.client.fail(lease.task_id, lease.lease_id)
    }

    /// The worker's connection, for anything else.
    pub fn client(&mut self) -> &mut Client {
        &mut self.client
    }
}

/// A running background heartbeat; stopped when dropped.
#[derive(Debug)]
pub struct Heartbeat {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    lost: Arc<AtomicBool>,
}

impl Heartbeat {
    /// Whether a heartbeat was refused: the lease is lost.
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // A panic in the heartbeat thread only means no more heartbeats.
            let _joined = thread.join();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.shutdown();
    }
}
