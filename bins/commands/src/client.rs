//! The blocking client of mbatchd that every command uses.
//!
//! # Where mbatchd is
//! The configuration is found as LSF finds it: `$LSF_ENVDIR/lsf.conf` (`/etc`
//! when unset), then `lsf.shared` and `lsf.cluster.<cluster>` ([`load_config`]).
//! mbatchd runs on the master host, the first server host of lsf.cluster; it
//! is reached at that host's `LAVA_ADDR` column if set, else at its resolved
//! name, on `LSB_MBD_PORT` ([`Endpoints::from_config`]).
//!
//! # One request, in order ([`Client::call`])
//! 1. Draw a [`wire::RequestId`] of 128 random bits, once for the whole
//!    logical request.
//! 2. Each attempt: connect to mbatchd over TCP (first, so that no token is
//!    spent while it is down); then connect to the local sbatchd's Unix socket
//!    (`LAVA_CMD_SOCKET`), send an empty CREDENTIAL_REQUEST frame and read the
//!    CREDENTIAL_REPLY (a fresh token each attempt: tokens are single-use).
//! 3. Send mbatchd one frame whose body is the XDR of
//!    [`wire::ClientRequest`] `{credential, request_id, body}`; read one reply
//!    frame: the expected reply, or REQUEST_FAILED with an [`wire::ErrorReply`].
//!
//! # Retry policy
//! An attempt is retried when a daemon cannot be reached (connection refused
//! or timed out, socket missing), when the connection breaks before the
//! answer, or when mbatchd answers `ERR_TRY_AGAIN` (it is starting or cannot
//! write its log). Every retry reuses the request id, so mbatchd answers a
//! submission it already logged with its first answer instead of creating a
//! second job, and signals the same jobs once. Delays start at
//! [`BACKOFF_DELAY_MS_INITIAL`] and double up to [`BACKOFF_DELAY_MS_MAX`], with
//! up to a quarter of random jitter so that many waiting commands do not
//! return in step. LSF's waiting line (`batch system daemon not responding
//! ... still trying`) is printed to standard error before the first retry and again every
//! [`WAITING_LINE_EVERY_SECS`] of retrying. A command that gives up prints LSF's words for
//! what failed first (`Connection refused by server`, `Timeout on connect call to server`:
//! openlava's `lsb_perror`), then which mbatchd and how long it tried
//! (docs/commands.md, "Talking to mbatchd").
//!
//! The bound ([`RetryPolicy::from_env`]):
//! - `LAVA_RETRY_SECS=N` (ours): give up after N seconds (0: a single attempt);
//! - `LSB_NTRIES=N` (LSF's): give up after N attempts; when it is set and
//!   `LAVA_RETRY_SECS` is not, there is no time bound (LSF's behaviour);
//! - neither: give up after [`RETRY_SECS_DEFAULT`] seconds (LSF retries forever,
//!   which hangs workflow tools; a bound lets them see an error and go on).
//!
//! Any other error (a refusal, an authentication failure, a malformed answer)
//! is final and reported at once.
//!
//! # Master candidates
//! With several candidates (`LSF_MASTER_LIST`), an attempt tries them in list order from
//! the one after the candidate whose connection last failed (a refused connection moves
//! on at once), and waits [`CANDIDATE_REPLY_TIMEOUT_MS`] rather than [`REPLY_TIMEOUT_MS`]
//! for a reply, so that a paused leader costs seconds, not a minute. A candidate that does
//! not lead answers `ERR_NOT_MASTER` naming the leader's host: the attempt goes there at
//! once, on the same port, whether or not that host is in the list (one such hop per
//! attempt; a second one counts as a failed attempt). `ERR_NO_MASTER` (no candidate leads:
//! an election, or no majority) is retried like an unreachable mbatchd, and its words are
//! what the command prints when it gives up.
//!
//! # Stale answers without a majority
//! A command that reads only (`bjobs`, `busers`, `bhosts`, `bqueues`, `badmin showstatus`) calls
//! [`Client::accept_stale`]: its JOB_QUERY, HOST_QUERY, QUEUE_QUERY and STATUS_QUERY frames
//! carry [`wire::REQUEST_ACCEPT_STALE`] in their header. A master candidate that has known
//! no leader for a while then answers from its last applied state, behind a STALE_STATE
//! frame; the client prints [`stale_warning`] once on standard error (standard output stays
//! as LSF prints it) and returns the answer. Writes never carry the flag, and a candidate
//! that knows a leader redirects as before (docs/operations.md, "Losing a majority").
//!
//! # Limits
//! A reply body may be up to [`REPLY_BODY_BYTES_MAX`] (a `bjobs -a` of a large
//! cluster); a credential reply up to [`CREDENTIAL_BODY_BYTES_MAX`]. A request
//! body larger than mbatchd accepts (the frame codec's default) is refused
//! here, before anything is sent, rather than retried in vain.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use lava_batch_wire::{self as wire, BATCH_VERSION, Operation};
use lava_conf::{BaseConfig, ConfError};
use lava_xdr::frame::{BODY_BYTES_MAX_DEFAULT, FrameHeader, HEADER_BYTES};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Default bound on retries, in seconds, when no variable sets one.
pub const RETRY_SECS_DEFAULT: u64 = 60;
/// Our variable bounding retries in seconds.
pub const RETRY_SECS_ENV: &str = "LAVA_RETRY_SECS";
/// LSF's variable bounding retries in attempts.
pub const NTRIES_ENV: &str = "LSB_NTRIES";
/// Longest wait for a TCP connection to mbatchd.
pub const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// Longest wait for any read or write of mbatchd's reply.
pub const REPLY_TIMEOUT_MS: u64 = 60_000;
/// The same with several master candidates: a paused leader's port still completes the
/// TCP handshake (the kernel does it), so a command gives up on it sooner and tries the
/// next candidate, where a new leader may serve (docs/failover.md).
pub const CANDIDATE_REPLY_TIMEOUT_MS: u64 = 5_000;
/// Longest wait for any read or write on the credential socket.
pub const CREDENTIAL_TIMEOUT_MS: u64 = 5_000;
/// First delay between two attempts.
pub const BACKOFF_DELAY_MS_INITIAL: u64 = 100;
/// Largest delay between two attempts.
pub const BACKOFF_DELAY_MS_MAX: u64 = 2_000;
/// Largest reply body accepted from mbatchd.
pub const REPLY_BODY_BYTES_MAX: u32 = 64 << 20;
/// Largest reply body accepted from the credential socket.
pub const CREDENTIAL_BODY_BYTES_MAX: u32 = 64 << 10;
/// Largest request body mbatchd accepts (the frame codec's default limit).
pub const REQUEST_BODY_BYTES_MAX: u32 = BODY_BYTES_MAX_DEFAULT;
/// LSF's line while mbatchd does not answer (Lava's lsb.comm.c), printed before retries.
pub const WAITING_MBD: &str = "batch system daemon not responding ... still trying\n";
/// The waiting line is printed again before a retry once this many seconds passed since it
/// was last printed: LSF prints it before each retry, and its retries after a refused
/// connection are `LSB_API_CONNTIMEOUT` apart (10 s by default); ours start sooner.
pub const WAITING_LINE_EVERY_SECS: u64 = 10;
/// Our line, in LSF's words for LIM, while the local sbatchd does not answer.
pub const WAITING_SBD: &str = "LSF daemon (sbatchd) not responding ... still trying\n";

/// Decoding limits for replies: large enough for a command of
/// `lava_batch_ll::COMMAND_BYTES_MAX` in every job and millions of jobs.
pub const REPLY_LIMITS: lava_xdr::Limits = lava_xdr::Limits {
    input_bytes_max: REPLY_BODY_BYTES_MAX as usize,
    string_bytes_max: 1 << 20,
    opaque_bytes_max: 1 << 20,
    array_elements_max: 1 << 22,
    depth_max: lava_xdr::DEPTH_MAX_DEFAULT,
};

/// Why a request could not be answered.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The configuration could not be read.
    #[error("{0}")]
    Config(#[from] ConfError),
    /// An environment variable has a value that means nothing.
    #[error("{0}")]
    Setting(String),
    /// lsf.cluster lists no server host.
    #[error("lsf.cluster lists no server host to run mbatchd")]
    NoMaster,
    /// The master's name does not resolve.
    #[error("cannot resolve the master host `{host}`: {detail}")]
    Resolve {
        /// The master host's name.
        host: String,
        /// Why.
        detail: String,
    },
    /// A daemon stayed unreachable (or not ready) for the whole retry bound.
    #[error("{} (gave up after {} s)", failure.detail, waited.as_secs())]
    Unreachable {
        /// The last failure.
        failure: Failure,
        /// How long the command tried.
        waited: Duration,
    },
    /// mbatchd refused the request (REQUEST_FAILED, other than try-again).
    #[error("{}", .0.message)]
    Refused(wire::ErrorReply),
    /// The local sbatchd refused to issue a credential.
    #[error("the local sbatchd refused a credential: {0}")]
    Credential(String),
    /// An answer that does not follow the protocol (LSF's LSBE_PROTOCOL).
    #[error("Batch protocol error: {0}")]
    Protocol(String),
    /// No randomness for the request id.
    #[error("cannot draw a random request id: {0}")]
    Random(String),
}

/// Which daemon an attempt failed to reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Daemon {
    /// The local sbatchd's credential socket.
    Sbatchd,
    /// mbatchd.
    Mbatchd,
}

/// One failed attempt that may be retried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Which daemon.
    pub daemon: Daemon,
    /// What happened, as a sentence naming the daemon and its address.
    pub detail: String,
}

/// How long a request may be retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Give up once this much time has passed since the first attempt.
    pub time_bound: Option<Duration>,
    /// Give up after this many attempts.
    pub tries_max: Option<u32>,
}

impl RetryPolicy {
    /// The policy `LAVA_RETRY_SECS` and `LSB_NTRIES` describe (see the module documentation).
    pub fn from_env() -> Result<RetryPolicy, String> {
        let retry_secs = std::env::var(RETRY_SECS_ENV).ok();
        let ntries = std::env::var(NTRIES_ENV).ok();
        RetryPolicy::from_values(retry_secs.as_deref(), ntries.as_deref())
    }

    /// The policy for these variable values (empty means unset).
    pub fn from_values(retry_secs: Option<&str>, ntries: Option<&str>) -> Result<RetryPolicy, String> {
        let number = |name: &str, text: &str| -> Result<u64, String> {
            text.trim().parse::<u64>().map_err(|_| format!("{name}={text}: not a whole number"))
        };
        let retry_secs =
            retry_secs.filter(|t| !t.is_empty()).map(|t| number(RETRY_SECS_ENV, t)).transpose()?;
        let ntries = ntries.filter(|t| !t.is_empty()).map(|t| number(NTRIES_ENV, t)).transpose()?;
        let time_bound = match (retry_secs, ntries) {
            (Some(secs), _) => Some(Duration::from_secs(secs)),
            (None, Some(_)) => None,
            (None, None) => Some(Duration::from_secs(RETRY_SECS_DEFAULT)),
        };
        let tries_max = ntries.map(|n| u32::try_from(n).unwrap_or(u32::MAX).max(1));
        Ok(RetryPolicy { time_bound, tries_max })
    }
}

/// Reads the configuration from `$LSF_ENVDIR` (or `/etc`).
pub fn load_config() -> Result<BaseConfig, ClientError> {
    Ok(BaseConfig::load(&lava_conf::envdir_from_env())?)
}

/// One request mbatchd answers at once, without a request id (`bhosts`, `bqueues`,
/// `badmin`):
/// loads the configuration and calls, printing a failure as every command does
/// (`COMMAND: problem` for the configuration, the error's own text for the call).
/// `None` after a failure.
pub fn read_from_mbatchd<Q: Serialize, R: DeserializeOwned>(
    term: &mut crate::term::Term,
    command: &str,
    (request, reply): (Operation, Operation),
    body: &Q,
) -> Option<R> {
    let config = match load_config() {
        Ok(config) => config,
        Err(error) => {
            term.err(&format!("{command}: {error}\n"));
            return None;
        }
    };
    let answer = Client::from_env(&config).and_then(|mut client| {
        // Only the read-only queries among them ask for it (`Client::attempt`).
        client.accept_stale();
        client.call(request, reply, body)
    });
    match answer {
        Ok(answer) => Some(answer),
        Err(error) => {
            term.err(&format!("{error}\n"));
            None
        }
    }
}

/// An LSF parameter that the environment may override: the variable if set,
/// else lsf.conf's key (LSF lets the environment override its `LSB_*` client
/// parameters).
pub fn lsf_param(config: &BaseConfig, name: &str) -> Option<String> {
    std::env::var(name).ok().or_else(|| config.lsf.get(name).map(str::to_owned))
}

/// Whether an LSF yes/no parameter is set to yes (`y`, `Y`, `yes`, `1`...).
pub fn is_yes(value: Option<&str>) -> bool {
    matches!(value.map(|v| v.trim().to_ascii_lowercase()).as_deref(), Some("y" | "yes" | "1" | "true"))
}

/// Where the daemons of a request are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoints {
    /// The master host's name, for messages.
    pub master: String,
    /// mbatchd's addresses, tried in order.
    pub mbd_addrs: Vec<SocketAddr>,
    /// The local sbatchd's credential socket.
    pub cmd_socket: PathBuf,
    /// The cluster's name: credentials are asked for its mbatchd.
    pub cluster: String,
}

impl Endpoints {
    /// The endpoints a configuration names: every master candidate's mbatchd address
    /// (`LSF_MASTER_LIST` order, else the first server host alone), so that a request
    /// reaches mbatchd on whichever candidate it runs. A candidate whose name does not
    /// resolve is skipped unless none resolves.
    pub fn from_config(config: &BaseConfig) -> Result<Endpoints, ClientError> {
        let candidates = config.master_candidates();
        let master = *candidates.first().ok_or(ClientError::NoMaster)?;
        let port = config.lsf.mbd_port;
        let mut mbd_addrs = Vec::new();
        let mut unresolved = None;
        for host in &candidates {
            match host.addr {
                Some(ip) => mbd_addrs.push(SocketAddr::new(ip, port)),
                None => match (host.name.as_str(), port).to_socket_addrs() {
                    Ok(addrs) => mbd_addrs.extend(addrs),
                    Err(error) => {
                        unresolved.get_or_insert(ClientError::Resolve {
                            host: host.name.clone(),
                            detail: error.to_string(),
                        });
                    }
                },
            }
        }
        // Candidates sharing an address (one machine) are tried once.
        let mut seen = Vec::new();
        mbd_addrs.retain(|addr| {
            let new = !seen.contains(addr);
            seen.push(*addr);
            new
        });
        if mbd_addrs.is_empty() {
            return Err(unresolved.unwrap_or(ClientError::Resolve {
                host: master.name.clone(),
                detail: "no address".to_owned(),
            }));
        }
        Ok(Endpoints {
            master: master.name.clone(),
            mbd_addrs,
            cmd_socket: config.lsf.cmd_socket.clone(),
            cluster: config.cluster_name.clone(),
        })
    }
}

/// A connection-less client: every [`Client::call`] opens its own connections.
#[derive(Debug)]
pub struct Client {
    endpoints: Endpoints,
    retry: RetryPolicy,
    sequence: u32,
    /// The candidate the next attempt starts from: the one after the last that failed.
    first_candidate: usize,
    /// Read-only queries take a candidate's stale answer ([`Client::accept_stale`]).
    accept_stale: bool,
    /// The stale answers' warning was printed.
    stale_warned: bool,
}

/// How one attempt ended, short of success.
enum AttemptError {
    /// Try again (same request id, fresh credential).
    Retry(Failure),
    /// Report and stop.
    Fatal(ClientError),
    /// The candidate reached does not lead; `host` (at `to`) does.
    Redirect {
        /// The candidate that answered.
        from: SocketAddr,
        /// The leader's host name, as the candidate named it.
        host: String,
        /// Its mbatchd address.
        to: SocketAddr,
    },
}

impl From<ClientError> for AttemptError {
    fn from(error: ClientError) -> Self {
        AttemptError::Fatal(error)
    }
}

impl Client {
    /// A client of the daemons at `endpoints`.
    pub fn new(endpoints: Endpoints, retry: RetryPolicy) -> Client {
        Client { endpoints, retry, sequence: 0, first_candidate: 0, accept_stale: false, stale_warned: false }
    }

    /// Read-only queries (JOB_QUERY, HOST_QUERY, QUEUE_QUERY, STATUS_QUERY) of this client take
    /// the answer of a master candidate without a leader from its last applied state, with a
    /// warning on standard error (see the module documentation); other requests never do.
    pub fn accept_stale(&mut self) {
        self.accept_stale = true;
    }

    /// A client of the daemons `config` names, with the retry policy of the environment.
    pub fn from_env(config: &BaseConfig) -> Result<Client, ClientError> {
        let retry = RetryPolicy::from_env().map_err(ClientError::Setting)?;
        Ok(Client::new(Endpoints::from_config(config)?, retry))
    }

    /// Sends `body` as operation `request` and returns the `reply` it gets,
    /// retrying as the module documentation describes.
    pub fn call<Q: Serialize, R: DeserializeOwned>(
        &mut self,
        request: Operation,
        reply: Operation,
        body: &Q,
    ) -> Result<R, ClientError> {
        let request_id = random_request_id()?;
        let mut jitter = Jitter(request_id.low | 1);
        let started = Instant::now();
        let deadline = self.retry.time_bound.map(|bound| started + bound);
        let mut delay_ms = BACKOFF_DELAY_MS_INITIAL;
        // When each daemon's waiting line was last printed.
        let mut noticed: (Option<Instant>, Option<Instant>) = (None, None);
        let mut n_tries: u32 = 0;
        loop {
            n_tries = n_tries.saturating_add(1);
            let failure = match self.attempt(request, reply, request_id, body, deadline, None) {
                Ok(answer) => return Ok(answer),
                Err(AttemptError::Fatal(error)) => return Err(error),
                Err(AttemptError::Retry(failure)) => failure,
                Err(AttemptError::Redirect { to, .. }) => {
                    match self.attempt(request, reply, request_id, body, deadline, Some(to)) {
                        Ok(answer) => return Ok(answer),
                        Err(AttemptError::Fatal(error)) => return Err(error),
                        Err(AttemptError::Retry(failure)) => failure,
                        Err(AttemptError::Redirect { from, host, .. }) => Failure {
                            daemon: Daemon::Mbatchd,
                            detail: format!(
                                "mbatchd at {from} is not the master either: it names {host} as the master"
                            ),
                        },
                    }
                }
            };
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let out_of_tries = self.retry.tries_max.is_some_and(|max| n_tries >= max);
            if out_of_tries || remaining == Some(Duration::ZERO) {
                return Err(ClientError::Unreachable { failure, waited: started.elapsed() });
            }
            let (last, line) = match failure.daemon {
                Daemon::Mbatchd => (&mut noticed.0, WAITING_MBD),
                Daemon::Sbatchd => (&mut noticed.1, WAITING_SBD),
            };
            let due = last.is_none_or(|at| at.elapsed() >= Duration::from_secs(WAITING_LINE_EVERY_SECS));
            let notice = due.then(|| {
                *last = Some(Instant::now());
                line
            });
            if let Some(line) = notice {
                let _ = io::stderr().lock().write_all(line.as_bytes());
            }
            let pause = Duration::from_millis(delay_ms + jitter.below(delay_ms / 4 + 1));
            std::thread::sleep(remaining.map_or(pause, |left| pause.min(left)));
            delay_ms = (delay_ms * 2).min(BACKOFF_DELAY_MS_MAX);
        }
    }

    fn next_sequence(&mut self) -> u32 {
        self.sequence = self.sequence.wrapping_add(1);
        self.sequence
    }

    fn attempt<Q: Serialize, R: DeserializeOwned>(
        &mut self,
        request: Operation,
        reply: Operation,
        request_id: wire::RequestId,
        body: &Q,
        deadline: Option<Instant>,
        redirected: Option<SocketAddr>,
    ) -> Result<R, AttemptError> {
        // mbatchd first: while it is down, no token is spent; and the token
        // is as fresh as possible when it travels.
        let (mut stream, address) = match redirected {
            Some(to) => self.connect_leader(to)?,
            None => self.connect_mbd(deadline)?,
        };
        let credential = self.fetch_credential()?;
        let envelope = wire::ClientRequest { credential, request_id, body };
        let payload = lava_xdr::to_bytes(&envelope)
            .map_err(|error| ClientError::Protocol(format!("cannot encode the request: {error}")))?;
        if payload.len() > REQUEST_BODY_BYTES_MAX as usize {
            return Err(AttemptError::Fatal(ClientError::Protocol(format!(
                "the request is {} bytes, more than the {REQUEST_BODY_BYTES_MAX} bytes mbatchd accepts \
                 (is the job script or the environment that large?)",
                payload.len()
            ))));
        }
        // Should this attempt fail from here on, the next starts from the next candidate.
        let listed = self.endpoints.mbd_addrs.iter().position(|a| *a == address);
        let at = listed.unwrap_or(self.first_candidate);
        if listed.is_some() {
            self.first_candidate = (at + 1) % self.endpoints.mbd_addrs.len();
        }
        let mbd_failure = |error: &io::Error| {
            AttemptError::Retry(Failure {
                daemon: Daemon::Mbatchd,
                detail: format!("Lost the connection to mbatchd at {address}: {}", describe_io(error, false)),
            })
        };
        let sequence = self.next_sequence();
        let stale_ok = self.accept_stale && is_read_only(request);
        let flags = if stale_ok { wire::REQUEST_ACCEPT_STALE } else { 0 };
        write_frame_with_status(&mut stream, request, sequence, flags, &payload)
            .map_err(|e| mbd_failure(&e))?;
        let read = |stream: &mut TcpStream| {
            read_frame(stream, REPLY_BODY_BYTES_MAX).map_err(|error| match error {
                FrameReadError::Io(error) => mbd_failure(&error),
                FrameReadError::Protocol(detail) => AttemptError::Fatal(ClientError::Protocol(detail)),
            })
        };
        let (mut header, mut answer) = read(&mut stream)?;
        if header.operation == Operation::StaleState.code() {
            if !stale_ok {
                return Err(AttemptError::Fatal(ClientError::Protocol(format!(
                    "mbatchd at {address} answered {} with a stale state it was not asked for",
                    request.name()
                ))));
            }
            let state: wire::StaleState = decode(&answer, Operation::StaleState)?;
            (header, answer) = read(&mut stream)?;
            if !std::mem::replace(&mut self.stale_warned, true) {
                let _ = io::stderr().lock().write_all(stale_warning(&state).as_bytes());
            }
        }
        self.first_candidate = at;
        match Operation::from_code(header.operation) {
            Some(op) if op == reply => Ok(decode(&answer, reply)?),
            Some(Operation::RequestFailed) => {
                let error: wire::ErrorReply = decode(&answer, Operation::RequestFailed)?;
                if error.code == wire::ERR_TRY_AGAIN {
                    Err(AttemptError::Retry(Failure {
                        daemon: Daemon::Mbatchd,
                        detail: format!("mbatchd at {address} is not ready: {}", error.message),
                    }))
                } else if error.code == wire::ERR_NO_MASTER {
                    Err(AttemptError::Retry(Failure {
                        daemon: Daemon::Mbatchd,
                        detail: format!("LSF is down: mbatchd at {address} answers {}", error.message),
                    }))
                } else if error.code == wire::ERR_NOT_MASTER {
                    // "HOST IP"; a bare host name is resolved.
                    let (host, ip) = match error.message.split_once(' ') {
                        Some((host, ip)) => (host.to_owned(), ip.parse::<std::net::IpAddr>().ok()),
                        None => (error.message.clone(), None),
                    };
                    let named = match ip {
                        Some(ip) => Ok(Some(SocketAddr::new(ip, address.port()))),
                        None => (host.as_str(), address.port()).to_socket_addrs().map(|mut a| a.next()),
                    };
                    match named {
                        Ok(Some(to)) => Err(AttemptError::Redirect { from: address, host, to }),
                        Ok(None) => Err(AttemptError::Retry(Failure {
                            daemon: Daemon::Mbatchd,
                            detail: format!(
                                "mbatchd at {address} names {host} as the master, which has no address"
                            ),
                        })),
                        Err(resolve) => Err(AttemptError::Retry(Failure {
                            daemon: Daemon::Mbatchd,
                            detail: format!(
                                "mbatchd at {address} names {host} as the master, which does not resolve: {resolve}"
                            ),
                        })),
                    }
                } else {
                    Err(AttemptError::Fatal(ClientError::Refused(error)))
                }
            }
            _ => Err(AttemptError::Fatal(ClientError::Protocol(format!(
                "mbatchd answered {} with operation {}",
                request.name(),
                header.operation
            )))),
        }
    }

    /// A fresh token from the local sbatchd for a daemon of kind `audience_kind` of this
    /// cluster (`bsub -I` attaches to the execution host's sbatchd with
    /// `wire::AUDIENCE_SBATCHD`).
    pub fn credential_for(&mut self, audience_kind: u32) -> Result<Vec<u8>, ClientError> {
        self.fetch_credential_for(audience_kind).map_err(|error| match error {
            AttemptError::Fatal(error) => error,
            AttemptError::Retry(failure) => ClientError::Unreachable { failure, waited: Duration::ZERO },
            AttemptError::Redirect { host, .. } => {
                ClientError::Protocol(format!("the local sbatchd named {host} as the master"))
            }
        })
    }

    /// Step 2 of the module documentation: a fresh token from the local sbatchd.
    fn fetch_credential(&mut self) -> Result<Vec<u8>, AttemptError> {
        self.fetch_credential_for(wire::AUDIENCE_MBATCHD)
    }

    fn fetch_credential_for(&mut self, audience_kind: u32) -> Result<Vec<u8>, AttemptError> {
        let path = self.endpoints.cmd_socket.clone();
        let failure = |error: &io::Error| {
            let detail = format!(
                "Cannot connect to the local sbatchd at {}: {}",
                path.display(),
                describe_io(error, true)
            );
            if error.kind() == io::ErrorKind::PermissionDenied {
                AttemptError::Fatal(ClientError::Credential(detail))
            } else {
                AttemptError::Retry(Failure { daemon: Daemon::Sbatchd, detail })
            }
        };
        let mut stream = UnixStream::connect(&path).map_err(|e| failure(&e))?;
        let timeout = Some(Duration::from_millis(CREDENTIAL_TIMEOUT_MS));
        stream
            .set_read_timeout(timeout)
            .and_then(|()| stream.set_write_timeout(timeout))
            .map_err(|e| failure(&e))?;
        let sequence = self.next_sequence();
        let audience =
            wire::CredentialRequest { audience_kind, audience_cluster: self.endpoints.cluster.clone() };
        let body = lava_xdr::to_bytes(&audience).expect("a credential request encodes");
        write_frame(&mut stream, Operation::CredentialRequest, sequence, &body).map_err(|e| failure(&e))?;
        let (header, body) =
            read_frame(&mut stream, CREDENTIAL_BODY_BYTES_MAX).map_err(|error| match error {
                FrameReadError::Io(error) => failure(&error),
                FrameReadError::Protocol(detail) => AttemptError::Fatal(ClientError::Protocol(detail)),
            })?;
        match Operation::from_code(header.operation) {
            Some(Operation::CredentialReply) => {
                let reply: wire::CredentialReply = decode(&body, Operation::CredentialReply)?;
                Ok(reply.token)
            }
            Some(Operation::RequestFailed) => {
                let error: wire::ErrorReply = decode(&body, Operation::RequestFailed)?;
                if error.code == wire::ERR_TRY_AGAIN {
                    Err(AttemptError::Retry(Failure {
                        daemon: Daemon::Sbatchd,
                        detail: format!(
                            "the local sbatchd at {} is not ready: {}",
                            path.display(),
                            error.message
                        ),
                    }))
                } else {
                    Err(AttemptError::Fatal(ClientError::Credential(error.message)))
                }
            }
            _ => Err(AttemptError::Fatal(ClientError::Protocol(format!(
                "the local sbatchd answered a credential request with operation {}",
                header.operation
            )))),
        }
    }

    /// Connects to the leader a candidate named, with a candidate's reply timeout.
    fn connect_leader(&self, to: SocketAddr) -> Result<(TcpStream, SocketAddr), AttemptError> {
        let failure = |error: io::Error| {
            AttemptError::Retry(Failure {
                daemon: Daemon::Mbatchd,
                detail: format!(
                    "{}: cannot connect to mbatchd at {to} (the master)",
                    describe_io(&error, true)
                ),
            })
        };
        let stream =
            TcpStream::connect_timeout(&to, Duration::from_millis(CONNECT_TIMEOUT_MS)).map_err(failure)?;
        let io_timeout = Some(Duration::from_millis(CANDIDATE_REPLY_TIMEOUT_MS));
        stream
            .set_nodelay(true)
            .and_then(|()| stream.set_read_timeout(io_timeout))
            .and_then(|()| stream.set_write_timeout(io_timeout))
            .map_err(failure)?;
        Ok((stream, to))
    }

    /// Connects to the first mbatchd address that accepts, within the deadline.
    fn connect_mbd(&self, deadline: Option<Instant>) -> Result<(TcpStream, SocketAddr), AttemptError> {
        let mut last = None;
        let addrs = &self.endpoints.mbd_addrs;
        let reply_timeout_ms = if addrs.len() > 1 { CANDIDATE_REPLY_TIMEOUT_MS } else { REPLY_TIMEOUT_MS };
        let start = self.first_candidate % addrs.len().max(1);
        for address in addrs[start..].iter().chain(&addrs[..start]) {
            let left = deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(Instant::now()));
            let timeout = Duration::from_millis(CONNECT_TIMEOUT_MS).min(left).max(Duration::from_millis(50));
            match TcpStream::connect_timeout(address, timeout) {
                Ok(stream) => {
                    let io_timeout = Some(Duration::from_millis(reply_timeout_ms));
                    let setup = stream
                        .set_nodelay(true)
                        .and_then(|()| stream.set_read_timeout(io_timeout))
                        .and_then(|()| stream.set_write_timeout(io_timeout));
                    match setup {
                        Ok(()) => return Ok((stream, *address)),
                        Err(error) => last = Some((error, *address)),
                    }
                }
                Err(error) => last = Some((error, *address)),
            }
        }
        let (error, address) = last.expect("Endpoints::from_config keeps at least one address");
        Err(AttemptError::Retry(Failure {
            daemon: Daemon::Mbatchd,
            detail: format!("{}: cannot connect to mbatchd at {address}", describe_io(&error, true)),
        }))
    }
}

fn decode<R: DeserializeOwned>(body: &[u8], op: Operation) -> Result<R, ClientError> {
    lava_xdr::from_bytes(body, &REPLY_LIMITS)
        .map_err(|error| ClientError::Protocol(format!("malformed {} body: {error}", op.name())))
}

/// LSF's words for what went wrong on a connection (lsb.err.c), or the system's.
fn describe_io(error: &io::Error, connecting: bool) -> String {
    match error.kind() {
        io::ErrorKind::ConnectionRefused => "Connection refused by server".to_owned(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock if connecting => {
            "Timeout on connect call to server".to_owned()
        }
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => "Communication timeout".to_owned(),
        io::ErrorKind::UnexpectedEof => "Connection closed by server before the answer".to_owned(),
        io::ErrorKind::ConnectionReset => "Connection reset by server".to_owned(),
        io::ErrorKind::NotFound => "No such file or directory".to_owned(),
        _ => error.to_string(),
    }
}

/// Whether `op` is a read-only query that may take a stale answer ([`Client::accept_stale`]).
fn is_read_only(op: Operation) -> bool {
    matches!(op, Operation::JobQuery | Operation::HostQuery | Operation::QueueQuery | Operation::StatusQuery)
}

/// The warning printed once on standard error when a master candidate without a leader
/// answered from its last applied state: which candidate, the log index of that state, and
/// how long ago it last knew a master.
pub fn stale_warning(state: &wire::StaleState) -> String {
    let index = if state.applied_index >= state.commit_index {
        format!("commit index {}", state.applied_index)
    } else {
        format!("log index {} of commit index {}", state.applied_index, state.commit_index)
    };
    let contact = if state.leader_seen_ms_ago == wire::STALE_NEVER {
        format!("not in contact with a master since it started {} s ago", state.up_ms / 1000)
    } else {
        format!("last in contact with a master {} s ago", state.leader_seen_ms_ago / 1000)
    };
    format!(
        "Warning: no master: answered by master candidate {} from its last applied state ({index}), {contact}; \
         it may be out of date\n",
        state.host
    )
}

/// Writes one frame (header and body in a single write).
pub fn write_frame(stream: &mut impl Write, op: Operation, sequence: u32, body: &[u8]) -> io::Result<()> {
    write_frame_with_status(stream, op, sequence, 0, body)
}

/// Writes one frame whose header's `status` word is `status` (a request's flags:
/// [`wire::REQUEST_ACCEPT_STALE`]).
pub fn write_frame_with_status(
    stream: &mut impl Write,
    op: Operation,
    sequence: u32,
    status: u32,
    body: &[u8],
) -> io::Result<()> {
    let length = u32::try_from(body.len()).map_err(|_| io::Error::other("frame body over 4 GiB"))?;
    let header = FrameHeader { sequence, operation: op.code(), version: BATCH_VERSION, length, status };
    let mut frame = Vec::with_capacity(HEADER_BYTES + body.len());
    header.write(&mut frame);
    frame.extend_from_slice(body);
    stream.write_all(&frame)?;
    stream.flush()
}

/// Why a frame could not be read.
#[derive(Debug)]
pub enum FrameReadError {
    /// The connection failed or closed (retryable).
    Io(io::Error),
    /// The bytes do not follow the protocol (final).
    Protocol(String),
}

/// Reads one frame, refusing a body longer than `body_bytes_max` before reading it.
pub fn read_frame(
    stream: &mut impl Read,
    body_bytes_max: u32,
) -> Result<(FrameHeader, Vec<u8>), FrameReadError> {
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).map_err(FrameReadError::Io)?;
    let header = FrameHeader::parse(&head).expect("the buffer holds a whole header");
    header.check_version(BATCH_VERSION).map_err(|error| FrameReadError::Protocol(error.to_string()))?;
    if header.length > body_bytes_max {
        return Err(FrameReadError::Protocol(format!(
            "answer of {} bytes exceeds the limit of {body_bytes_max} bytes (operation {})",
            header.length, header.operation
        )));
    }
    let mut body = Vec::new();
    stream.take(u64::from(header.length)).read_to_end(&mut body).map_err(FrameReadError::Io)?;
    if body.len() != header.length as usize {
        return Err(FrameReadError::Io(io::ErrorKind::UnexpectedEof.into()));
    }
    Ok((header, body))
}

/// 128 random bits from the kernel.
pub fn random_request_id() -> Result<wire::RequestId, ClientError> {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        std::fs::File::open("/dev/urandom")
            .and_then(|mut file| file.read_exact(&mut bytes))
            .map_err(|error| ClientError::Random(error.to_string()))?;
    }
    let (high, low) = bytes.split_at(8);
    Ok(wire::RequestId {
        high: u64::from_be_bytes(high.try_into().expect("8 bytes")),
        low: u64::from_be_bytes(low.try_into().expect("8 bytes")),
    })
}

/// A tiny xorshift for backoff jitter, seeded from the request id.
struct Jitter(u64);

impl Jitter {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the retry bound follows LAVA_RETRY_SECS, LSB_NTRIES and the default.
    #[test]
    fn retry_policy_from_variables() {
        let policy = |secs, tries| RetryPolicy::from_values(secs, tries);
        let default = Some(Duration::from_secs(RETRY_SECS_DEFAULT));
        assert_eq!(policy(None, None), Ok(RetryPolicy { time_bound: default, tries_max: None }));
        assert_eq!(policy(Some(""), Some("")), Ok(RetryPolicy { time_bound: default, tries_max: None }));
        assert_eq!(
            policy(Some("5"), None),
            Ok(RetryPolicy { time_bound: Some(Duration::from_secs(5)), tries_max: None })
        );
        assert_eq!(policy(None, Some("3")), Ok(RetryPolicy { time_bound: None, tries_max: Some(3) }));
        assert_eq!(policy(None, Some("0")), Ok(RetryPolicy { time_bound: None, tries_max: Some(1) }));
        assert_eq!(
            policy(Some("0"), Some("9")),
            Ok(RetryPolicy { time_bound: Some(Duration::ZERO), tries_max: Some(9) })
        );
        assert!(policy(Some("soon"), None).is_err());
    }

    // Goal: a frame written is the frame read; a body over the limit is refused
    // from the header; a short body is an I/O error (retryable), a wrong
    // version a protocol error (final).
    #[test]
    fn frames_round_trip_and_limits_hold() {
        let mut buf = Vec::new();
        write_frame(&mut buf, Operation::SubmitJob, 7, b"body").expect("to a vector");
        let (header, body) = read_frame(&mut buf.as_slice(), 16).expect("whole frame");
        assert_eq!((header.sequence, header.operation, header.length), (7, 1, 4));
        assert_eq!(body, b"body");
        assert!(matches!(read_frame(&mut buf.as_slice(), 3), Err(FrameReadError::Protocol(_))));
        assert!(matches!(read_frame(&mut &buf[..22], 16), Err(FrameReadError::Io(_))));
        let mut other_version = buf.clone();
        other_version[11] ^= 1;
        assert!(matches!(read_frame(&mut other_version.as_slice(), 16), Err(FrameReadError::Protocol(_))));
    }

    // Goal: request ids are random (two draws differ).
    #[test]
    fn request_ids_are_random() {
        let first = random_request_id().expect("kernel randomness");
        let second = random_request_id().expect("kernel randomness");
        assert_ne!(first, second);
    }

    // Goal: the stale warning names the candidate, the log index of its state and how old its
    // last contact with a master is (or that it had none since it started).
    #[test]
    fn stale_warning_words() {
        let mut state = wire::StaleState {
            host: "h3".into(),
            applied_index: 57,
            commit_index: 57,
            leader_seen_ms_ago: 42_500,
            up_ms: 90_000,
        };
        assert_eq!(
            stale_warning(&state),
            "Warning: no master: answered by master candidate h3 from its last applied state (commit index 57), \
             last in contact with a master 42 s ago; it may be out of date\n"
        );
        state.applied_index = 55;
        state.leader_seen_ms_ago = wire::STALE_NEVER;
        let said = stale_warning(&state);
        assert!(said.contains("(log index 55 of commit index 57)"), "{said}");
        assert!(said.contains("not in contact with a master since it started 90 s ago"), "{said}");
        assert!(is_read_only(Operation::JobQuery) && !is_read_only(Operation::SubmitJob));
        assert!(!is_read_only(Operation::Reconfig) && !is_read_only(Operation::AdminControl));
    }

    // Goal: yes/no parameters read as LSF's.
    #[test]
    fn yes_values() {
        assert!(is_yes(Some("y")) && is_yes(Some("Y")) && is_yes(Some(" yes ")));
        assert!(!is_yes(None) && !is_yes(Some("n")) && !is_yes(Some("")));
    }
}
