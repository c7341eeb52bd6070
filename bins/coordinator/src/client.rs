//! The blocking client of the coordinator and a small worker library, used by
//! `coordctl`, the integration tests and (later) the benchmark. No async
//! runtime: one TCP connection, one request at a time, every frame sealed
//! with the cluster key and every answer's seal checked.
//!
//! A [`Worker`] pulls a task ([`Worker::pull`]), keeps its lease alive from a
//! background thread with its own connection ([`Worker::start_heartbeat`],
//! every third of the lease duration), and ends it with
//! [`Worker::complete`] or [`Worker::fail`]. If a heartbeat is refused the
//! lease is lost: [`Heartbeat::lost`] says so, and the worker should stop
//! working on the task (its completion would be refused anyway).

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use lava_conf::BaseConfig;
use lava_coord_wire::{self as wire, COORD_VERSION, Reply, Request};
use lava_net::{AuthConfig, Authenticator, ClusterKey, KeyRing, Nonce, system_now_ms};
use lava_xdr::frame::{Frame, FrameHeader, HEADER_BYTES, encode_frame};

use crate::codec::{FRAME_LIMITS, MESSAGE_LIMITS};

/// Time allowed to connect, and for one answer to arrive.
pub const IO_TIMEOUT_MS: u64 = 30_000;
/// Pause between two empty lease requests of [`Worker::pull`].
pub const PULL_RETRY_MS: u64 = 100;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The configuration or the key could not be loaded.
    #[error("configuration: {0}")]
    Config(String),
    /// The connection failed.
    #[error("connection to {addr}: {source}")]
    Io {
        /// The coordinator.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A frame was malformed or failed authentication.
    #[error("bad answer from {addr}: {reason}")]
    Protocol {
        /// The coordinator.
        addr: SocketAddr,
        /// What was wrong.
        reason: String,
    },
    /// The coordinator refused the request.
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

/// Where the coordinator is, and the key to talk to it.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Its address.
    pub addr: SocketAddr,
    /// The cluster key.
    pub auth: Arc<Authenticator>,
}

impl Endpoint {
    /// From the configuration in `envdir` (else `LSF_ENVDIR`): `LAVA_COORD_PORT`
    /// on the master host's `LAVA_ADDR` (else 127.0.0.1), the cluster key file.
    pub fn from_config(envdir: Option<&Path>) -> Result<Endpoint, ClientError> {
        let envdir = envdir.map(Path::to_owned).unwrap_or_else(lava_conf::envdir_from_env);
        let conf = BaseConfig::load(&envdir).map_err(|error| ClientError::Config(error.to_string()))?;
        let ip = conf.master_host().and_then(|host| host.addr).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let key = ClusterKey::load(&conf.lsf.cluster_key_file)
            .map_err(|error| ClientError::Config(error.to_string()))?;
        Ok(Endpoint::new(SocketAddr::new(ip, conf.lsf.coord_port), &key))
    }

    /// At `addr`, with `key`.
    pub fn new(addr: SocketAddr, key: &ClusterKey) -> Endpoint {
        Endpoint { addr, auth: Arc::new(Authenticator::new(KeyRing::new(key), AuthConfig::default())) }
    }
}

/// One connection to the coordinator.
#[derive(Debug)]
pub struct Client {
    endpoint: Endpoint,
    stream: TcpStream,
    sequence: u32,
    buf: BytesMut,
}

impl Client {
    /// Connects to `endpoint`.
    pub fn connect(endpoint: &Endpoint) -> Result<Client, ClientError> {
        let addr = endpoint.addr;
        let io = |source| ClientError::Io { addr, source };
        let timeout = Duration::from_millis(IO_TIMEOUT_MS);
        let stream = TcpStream::connect_timeout(&addr, timeout).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        Ok(Client { endpoint: endpoint.clone(), stream, sequence: 0, buf: BytesMut::new() })
    }

    /// Sends `request` and returns the answer; a REQUEST_FAILED is [`ClientError::Refused`].
    pub fn call(&mut self, request: &Request) -> Result<Reply, ClientError> {
        let addr = self.endpoint.addr;
        let io = |source| ClientError::Io { addr, source };
        let protocol = |reason: String| ClientError::Protocol { addr, reason };
        self.sequence = self.sequence.wrapping_add(1);
        let header = FrameHeader {
            sequence: self.sequence,
            operation: request.operation().code(),
            version: COORD_VERSION,
            length: 0,
            status: 0,
        };
        let nonce = Nonce::random().map_err(|error| protocol(format!("no randomness: {error}")))?;
        let body = self
            .endpoint
            .auth
            .seal(header, &request.encode_body(), system_now_ms(), nonce)
            .map_err(|error| protocol(error.to_string()))?;
        self.buf.clear();
        encode_frame(header, &body, &FRAME_LIMITS, &mut self.buf)
            .map_err(|error| protocol(error.to_string()))?;
        self.stream.write_all(&self.buf).map_err(io)?;
        let mut head = [0u8; HEADER_BYTES];
        self.stream.read_exact(&mut head).map_err(io)?;
        let header = FrameHeader::parse(&head).map_err(|error| protocol(error.to_string()))?;
        if header.length > FRAME_LIMITS.body_bytes_max {
            return Err(protocol(format!("answer of {} bytes is over the limit", header.length)));
        }
        let mut body = vec![0u8; header.length as usize];
        self.stream.read_exact(&mut body).map_err(io)?;
        let frame = Frame { header, body: body.into() };
        let payload =
            self.endpoint.auth.open(&frame, system_now_ms()).map_err(|error| protocol(error.to_string()))?;
        if header.sequence != self.sequence {
            return Err(protocol(format!(
                "answer to sequence {}, expected {}",
                header.sequence, self.sequence
            )));
        }
        header.check_version(COORD_VERSION).map_err(|error| protocol(error.to_string()))?;
        match wire::decode_reply(header.operation, &payload, &MESSAGE_LIMITS) {
            Ok(Reply::Error(error)) => Err(ClientError::Refused(error)),
            Ok(reply) => Ok(reply),
            Err(error) => Err(protocol(error.to_string())),
        }
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
