//! The local client protocol on mxfsd's Unix socket, and [`Client`], the blocking Rust client
//! library over it.
//!
//! # Framing
//! Every message in either direction is a u32 big-endian body length (at most
//! [`CLIENT_BODY_BYTES_MAX`]) followed by the body; the body's first byte is its kind. All
//! integers are big-endian. One request is answered before the next is read; notifications
//! may arrive at any time between answers.
//!
//! | kind | direction | body after the kind byte |
//! |---|---|---|
//! | 1 LOCK | request | mode u8, flags u8 (bit 0 NOQUEUE, bit 1 NOREVOKE), timeout_ms u32 (0: wait forever), resource (rest, UTF-8) |
//! | 2 CONVERT | request | handle u64, mode u8, flags u8, timeout_ms u32 |
//! | 3 UNLOCK | request | handle u64 |
//! | 4 STATUS | request | — |
//! | 5 LOCKS | request | resource (rest; empty: all) |
//! | 6 CACHE_INVAL | request | handle u64 (a granted lock), start u64, length u64: tell every other holder of the resource (on any node) to drop that byte range from its cache |
//! | 0x80 OK | answer | — |
//! | 0x81 GRANTED | answer | handle u64, mode u8, token u64 |
//! | 0x82 TEXT | answer | UTF-8 text |
//! | 0x8F ERROR | answer | code u8 ([`ErrorCode`]), UTF-8 message |
//! | 0x90 BAST | notification | handle u64, blocked mode u8 |
//! | 0x91 CACHE_INVAL | notification | handle u64, start u64, length u64 |
//! | 0x92 LOST | notification | handle u64 (the lock is gone: its node was declared dead or lost its master past its lease, or the lock was revoked) |
//!
//! A handle is the daemon's lock id. The caller's uid comes from the kernel (SO_PEERCRED);
//! when the connection closes, every lock it holds or waits for is released.
//!
//! A BAST asks the holder to downgrade (CONVERT) or release (UNLOCK) within the cluster's BAST
//! timeout (`LAVA_MXFSD_BAST_TIMEOUT_MS`); a holder that does neither while the waiter still
//! waits has its lock revoked: LOST, the lock is released. A LOCK with NOREVOKE is held until
//! released: its BASTs are hints and it is never revoked (`mxfsctl lock`, whose command cannot
//! downgrade).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

pub use lava_dlm_ll::LockMode;
use rustix::event::{PollFd, PollFlags};

/// Largest body in either direction.
pub const CLIENT_BODY_BYTES_MAX: usize = 64 * 1024;

/// Request kinds.
pub mod kind {
    /// LOCK.
    pub const LOCK: u8 = 1;
    /// CONVERT.
    pub const CONVERT: u8 = 2;
    /// UNLOCK.
    pub const UNLOCK: u8 = 3;
    /// STATUS.
    pub const STATUS: u8 = 4;
    /// LOCKS.
    pub const LOCKS: u8 = 5;
    /// CACHE_INVAL request.
    pub const CACHE_INVAL_REQUEST: u8 = 6;
    /// OK.
    pub const OK: u8 = 0x80;
    /// GRANTED.
    pub const GRANTED: u8 = 0x81;
    /// TEXT.
    pub const TEXT: u8 = 0x82;
    /// ERROR.
    pub const ERROR: u8 = 0x8F;
    /// BAST notification.
    pub const BAST: u8 = 0x90;
    /// CACHE_INVAL notification.
    pub const CACHE_INVAL: u8 = 0x91;
    /// LOST notification.
    pub const LOST: u8 = 0x92;
}

/// Flag bit: deny instead of waiting.
pub const FLAG_NOQUEUE: u8 = 1;
/// Flag bit of LOCK: held until released, never revoked for an unanswered BAST.
pub const FLAG_NOREVOKE: u8 = 2;

/// Why a request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// NOQUEUE and the lock is held in a conflicting mode.
    WouldBlock = 1,
    /// Not granted within the timeout.
    Timeout = 2,
    /// The handle names no lock of this connection.
    NotHeld = 3,
    /// The conversion would deadlock.
    Deadlock = 4,
    /// The request is malformed or invalid.
    Invalid = 5,
    /// The lock master cannot be reached.
    Unavailable = 6,
    /// The lock was lost (master connection lost, node fenced).
    Lost = 7,
    /// The caller may not lock (`LAVA_MXFSD_GROUP`).
    PermissionDenied = 8,
}

impl ErrorCode {
    /// The code of a byte.
    pub fn from_byte(byte: u8) -> ErrorCode {
        match byte {
            1 => ErrorCode::WouldBlock,
            2 => ErrorCode::Timeout,
            3 => ErrorCode::NotHeld,
            4 => ErrorCode::Deadlock,
            6 => ErrorCode::Unavailable,
            7 => ErrorCode::Lost,
            8 => ErrorCode::PermissionDenied,
            _ => ErrorCode::Invalid,
        }
    }
}

/// A request, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// LOCK.
    Lock {
        /// Resource name.
        resource: String,
        /// Mode.
        mode: LockMode,
        /// Deny rather than wait.
        noqueue: bool,
        /// Held until released: never revoked for an unanswered BAST.
        norevoke: bool,
        /// 0: wait forever.
        timeout_ms: u32,
    },
    /// CONVERT.
    Convert {
        /// Lock handle.
        handle: u64,
        /// New mode.
        mode: LockMode,
        /// Deny rather than wait.
        noqueue: bool,
        /// 0: wait forever.
        timeout_ms: u32,
    },
    /// UNLOCK.
    Unlock {
        /// Lock handle.
        handle: u64,
    },
    /// STATUS.
    Status,
    /// LOCKS.
    Locks {
        /// Only this resource, if given.
        resource: Option<String>,
    },
    /// CACHE_INVAL: the other holders of the lock's resource drop `start..start + length`.
    CacheInval {
        /// A granted lock of this connection.
        handle: u64,
        /// First byte.
        start: u64,
        /// Bytes.
        length: u64,
    },
}

/// An answer or notification, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// OK.
    Ok,
    /// GRANTED.
    Granted {
        /// Lock handle.
        handle: u64,
        /// Mode granted.
        mode: LockMode,
        /// Fencing token.
        token: u64,
    },
    /// TEXT.
    Text(String),
    /// ERROR.
    Error {
        /// Why.
        code: ErrorCode,
        /// A message for people.
        message: String,
    },
    /// BAST notification: a waiter is blocked by this lock.
    Bast {
        /// Lock handle.
        handle: u64,
        /// The mode the waiter wants.
        mode: LockMode,
    },
    /// CACHE_INVAL notification.
    CacheInval {
        /// Lock handle on the resource.
        handle: u64,
        /// First byte.
        start: u64,
        /// Bytes.
        length: u64,
    },
    /// LOST notification.
    Lost {
        /// Lock handle.
        handle: u64,
    },
}

impl Reply {
    /// Whether this is a notification (not an answer to a request).
    pub fn is_notification(&self) -> bool {
        matches!(self, Reply::Bast { .. } | Reply::CacheInval { .. } | Reply::Lost { .. })
    }
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn mode_at(bytes: &[u8], at: usize) -> Option<LockMode> {
    LockMode::ALL.get(usize::from(*bytes.get(at)?)).copied()
}

fn text(bytes: &[u8]) -> Option<String> {
    String::from_utf8(bytes.to_vec()).ok()
}

impl Request {
    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let flag = |noqueue: bool| if noqueue { FLAG_NOQUEUE } else { 0 };
        let mut out = Vec::new();
        match self {
            Request::Lock { resource, mode, noqueue, norevoke, timeout_ms } => {
                let flags = flag(*noqueue) | if *norevoke { FLAG_NOREVOKE } else { 0 };
                out.extend_from_slice(&[kind::LOCK, mode.to_wire(), flags]);
                out.extend_from_slice(&timeout_ms.to_be_bytes());
                out.extend_from_slice(resource.as_bytes());
            }
            Request::Convert { handle, mode, noqueue, timeout_ms } => {
                out.push(kind::CONVERT);
                out.extend_from_slice(&handle.to_be_bytes());
                out.extend_from_slice(&[mode.to_wire(), flag(*noqueue)]);
                out.extend_from_slice(&timeout_ms.to_be_bytes());
            }
            Request::Unlock { handle } => {
                out.push(kind::UNLOCK);
                out.extend_from_slice(&handle.to_be_bytes());
            }
            Request::Status => out.push(kind::STATUS),
            Request::Locks { resource } => {
                out.push(kind::LOCKS);
                out.extend_from_slice(resource.as_deref().unwrap_or("").as_bytes());
            }
            Request::CacheInval { handle, start, length } => {
                out.push(kind::CACHE_INVAL_REQUEST);
                out.extend_from_slice(&handle.to_be_bytes());
                out.extend_from_slice(&start.to_be_bytes());
                out.extend_from_slice(&length.to_be_bytes());
            }
        }
        out
    }

    /// Decodes a body; `None` when malformed.
    pub fn decode(body: &[u8]) -> Option<Request> {
        let (&kind, rest) = body.split_first()?;
        Some(match kind {
            kind::LOCK => Request::Lock {
                mode: mode_at(rest, 0)?,
                noqueue: *rest.get(1)? & FLAG_NOQUEUE != 0,
                norevoke: *rest.get(1)? & FLAG_NOREVOKE != 0,
                timeout_ms: u32_at(rest, 2)?,
                resource: text(rest.get(6..)?)?,
            },
            kind::CONVERT if rest.len() == 14 => Request::Convert {
                handle: u64_at(rest, 0)?,
                mode: mode_at(rest, 8)?,
                noqueue: rest[9] & FLAG_NOQUEUE != 0,
                timeout_ms: u32_at(rest, 10)?,
            },
            kind::UNLOCK if rest.len() == 8 => Request::Unlock { handle: u64_at(rest, 0)? },
            kind::STATUS if rest.is_empty() => Request::Status,
            kind::LOCKS => {
                let resource = text(rest)?;
                Request::Locks { resource: (!resource.is_empty()).then_some(resource) }
            }
            kind::CACHE_INVAL_REQUEST if rest.len() == 24 => Request::CacheInval {
                handle: u64_at(rest, 0)?,
                start: u64_at(rest, 8)?,
                length: u64_at(rest, 16)?,
            },
            _ => return None,
        })
    }
}

impl Reply {
    /// Encodes the body.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Reply::Ok => out.push(kind::OK),
            Reply::Granted { handle, mode, token } => {
                out.push(kind::GRANTED);
                out.extend_from_slice(&handle.to_be_bytes());
                out.push(mode.to_wire());
                out.extend_from_slice(&token.to_be_bytes());
            }
            Reply::Text(text) => {
                out.push(kind::TEXT);
                out.extend_from_slice(text.as_bytes());
            }
            Reply::Error { code, message } => {
                out.extend_from_slice(&[kind::ERROR, *code as u8]);
                out.extend_from_slice(message.as_bytes());
            }
            Reply::Bast { handle, mode } => {
                out.push(kind::BAST);
                out.extend_from_slice(&handle.to_be_bytes());
                out.push(mode.to_wire());
            }
            Reply::CacheInval { handle, start, length } => {
                out.push(kind::CACHE_INVAL);
                out.extend_from_slice(&handle.to_be_bytes());
                out.extend_from_slice(&start.to_be_bytes());
                out.extend_from_slice(&length.to_be_bytes());
            }
            Reply::Lost { handle } => {
                out.push(kind::LOST);
                out.extend_from_slice(&handle.to_be_bytes());
            }
        }
        out
    }

    /// Decodes a body; `None` when malformed.
    pub fn decode(body: &[u8]) -> Option<Reply> {
        let (&kind, rest) = body.split_first()?;
        Some(match kind {
            kind::OK => Reply::Ok,
            kind::GRANTED => {
                Reply::Granted { handle: u64_at(rest, 0)?, mode: mode_at(rest, 8)?, token: u64_at(rest, 9)? }
            }
            kind::TEXT => Reply::Text(text(rest)?),
            kind::ERROR => {
                Reply::Error { code: ErrorCode::from_byte(*rest.first()?), message: text(&rest[1..])? }
            }
            kind::BAST => Reply::Bast { handle: u64_at(rest, 0)?, mode: mode_at(rest, 8)? },
            kind::CACHE_INVAL => Reply::CacheInval {
                handle: u64_at(rest, 0)?,
                start: u64_at(rest, 8)?,
                length: u64_at(rest, 16)?,
            },
            kind::LOST => Reply::Lost { handle: u64_at(rest, 0)? },
            _ => return None,
        })
    }
}

/// Prefixes `body` with its length.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&u32::try_from(body.len()).expect("bodies are small").to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be used.
    #[error("mxfsd socket {path}: {source}")]
    Io {
        /// The socket path.
        path: String,
        /// The error.
        source: io::Error,
    },
    /// The daemon refused the request.
    #[error("{message}")]
    Refused {
        /// Why.
        code: ErrorCode,
        /// The daemon's message.
        message: String,
    },
    /// The daemon answered something unexpected.
    #[error("mxfsd sent an unexpected answer: {0}")]
    Protocol(String),
}

/// A granted lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The handle to convert or unlock it with.
    pub handle: u64,
    /// Mode held.
    pub mode: LockMode,
    /// Fencing token (epoch in the high 32 bits).
    pub token: u64,
}

/// A blocking connection to the local mxfsd.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    path: String,
    notifications: VecDeque<Reply>,
    /// Bytes read and not consumed yet (an answer usually comes in one read).
    inbox: Vec<u8>,
}

impl Client {
    /// Connects to the socket at `path`.
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(path)
            .map_err(|source| ClientError::Io { path: path.display().to_string(), source })?;
        Ok(Client {
            stream,
            path: path.display().to_string(),
            notifications: VecDeque::new(),
            inbox: Vec::with_capacity(4096),
        })
    }

    fn io(&self, source: io::Error) -> ClientError {
        ClientError::Io { path: self.path.clone(), source }
    }

    /// Waits until the socket has something to read (data, end of file or an error), at most
    /// `timeout` (`None`: as long as it takes); a timeout is an [`io::ErrorKind::TimedOut`] error.
    ///
    /// Waiting in poll(2) for POLLIN rather than in a blocking read(2) is what keeps a call at
    /// one wake-up: a reader blocked in read(2) on a Unix socket is also woken each time the
    /// daemon takes in a request this socket sent (the kernel signals the freed send space on
    /// the same wait queue), only to find nothing to read and sleep again; poll(2) waiting for
    /// POLLIN alone is not woken by that.
    fn wait_readable(&self, timeout: Option<Duration>) -> Result<(), ClientError> {
        // A timeout too large for a timespec is as good as none.
        let timeout = timeout.and_then(|t| rustix::event::Timespec::try_from(t).ok());
        loop {
            let mut fds = [PollFd::new(&self.stream, PollFlags::IN)];
            match rustix::event::poll(&mut fds, timeout.as_ref()) {
                Ok(0) => return Err(self.io(io::Error::from(io::ErrorKind::TimedOut))),
                Ok(_) => return Ok(()),
                Err(rustix::io::Errno::INTR) => {}
                Err(errno) => return Err(self.io(errno.into())),
            }
        }
    }

    /// Reads until the inbox holds `n` bytes, waiting at most `timeout` for each read.
    fn fill(&mut self, n: usize, timeout: Option<Duration>) -> Result<(), ClientError> {
        let mut chunk = [0u8; 4096];
        while self.inbox.len() < n {
            self.wait_readable(timeout)?;
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "mxfsd closed the connection");
                    return Err(self.io(eof));
                }
                Ok(got) => self.inbox.extend_from_slice(&chunk[..got]),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(self.io(error)),
            }
        }
        Ok(())
    }

    /// The next answer or notification, waiting at most `timeout` for each part of it.
    fn read_reply(&mut self, timeout: Option<Duration>) -> Result<Reply, ClientError> {
        self.fill(4, timeout)?;
        let length = u32::from_be_bytes(self.inbox[..4].try_into().expect("4 bytes")) as usize;
        if length > CLIENT_BODY_BYTES_MAX {
            return Err(ClientError::Protocol(format!("answer of {length} bytes")));
        }
        self.fill(4 + length, timeout)?;
        let reply = Reply::decode(&self.inbox[4..4 + length]);
        self.inbox.drain(..4 + length);
        reply.ok_or_else(|| ClientError::Protocol("malformed answer".to_owned()))
    }

    /// Sends `request` and returns its answer; notifications met meanwhile are kept for
    /// [`Client::next_notification`]. An ERROR answer is [`ClientError::Refused`].
    pub fn call(&mut self, request: &Request) -> Result<Reply, ClientError> {
        if let Err(error) = self.stream.write_all(&frame(&request.encode())) {
            return Err(self.refusal_left_behind().unwrap_or_else(|| self.io(error)));
        }
        loop {
            match self.read_reply(None)? {
                reply if reply.is_notification() => self.notifications.push_back(reply),
                Reply::Error { code, message } => return Err(ClientError::Refused { code, message }),
                reply => return Ok(reply),
            }
        }
    }

    /// After a failed write: the refusal the daemon sent before it closed the connection, if
    /// one is waiting to be read. The daemon answers a client beyond `LAVA_MXFSD_MAX_CLIENTS`
    /// with "too many clients" and closes at once, possibly before the first request is sent,
    /// which then fails with a broken pipe while the reason is in the receive queue.
    fn refusal_left_behind(&mut self) -> Option<ClientError> {
        match self.read_reply(Some(Duration::ZERO)) {
            Ok(Reply::Error { code, message }) => Some(ClientError::Refused { code, message }),
            _ => None,
        }
    }

    fn granted(reply: Reply) -> Result<Grant, ClientError> {
        match reply {
            Reply::Granted { handle, mode, token } => Ok(Grant { handle, mode, token }),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// Locks `resource` in `mode`: waits (at most `timeout`, if given), or with `noqueue`
    /// fails at once with [`ErrorCode::WouldBlock`] when it cannot be granted now. The holder
    /// must answer a BAST ([`Client::next_notification`]) by converting or unlocking within the
    /// cluster's BAST timeout, or the lock is revoked (a LOST notification).
    pub fn lock(
        &mut self,
        resource: &str,
        mode: LockMode,
        noqueue: bool,
        timeout: Option<Duration>,
    ) -> Result<Grant, ClientError> {
        self.lock_with(resource, mode, noqueue, false, timeout)
    }

    /// [`Client::lock`], for a lock held until released: BASTs are only hints to it and it is
    /// never revoked for not answering them (as `mxfsctl lock` holds its locks).
    pub fn lock_until_released(
        &mut self,
        resource: &str,
        mode: LockMode,
        noqueue: bool,
        timeout: Option<Duration>,
    ) -> Result<Grant, ClientError> {
        self.lock_with(resource, mode, noqueue, true, timeout)
    }

    fn lock_with(
        &mut self,
        resource: &str,
        mode: LockMode,
        noqueue: bool,
        norevoke: bool,
        timeout: Option<Duration>,
    ) -> Result<Grant, ClientError> {
        let timeout_ms = timeout.map_or(0, |t| u32::try_from(t.as_millis()).unwrap_or(u32::MAX).max(1));
        let request = Request::Lock { resource: resource.to_owned(), mode, noqueue, norevoke, timeout_ms };
        Self::granted(self.call(&request)?)
    }

    /// Converts the lock `handle` to `mode` (up or down).
    pub fn convert(
        &mut self,
        handle: u64,
        mode: LockMode,
        noqueue: bool,
        timeout: Option<Duration>,
    ) -> Result<Grant, ClientError> {
        let timeout_ms = timeout.map_or(0, |t| u32::try_from(t.as_millis()).unwrap_or(u32::MAX).max(1));
        Self::granted(self.call(&Request::Convert { handle, mode, noqueue, timeout_ms })?)
    }

    /// Releases the lock `handle`.
    pub fn unlock(&mut self, handle: u64) -> Result<(), ClientError> {
        match self.call(&Request::Unlock { handle })? {
            Reply::Ok => Ok(()),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// Tells every other holder of the resource of lock `handle` (on this node and the others,
    /// through the master) to drop `start..start + length` from its cache: they receive a
    /// CACHE_INVAL notification for their own handle. This connection must hold the lock.
    pub fn cache_inval(&mut self, handle: u64, start: u64, length: u64) -> Result<(), ClientError> {
        match self.call(&Request::CacheInval { handle, start, length })? {
            Reply::Ok => Ok(()),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// The daemon's status text.
    pub fn status(&mut self) -> Result<String, ClientError> {
        match self.call(&Request::Status)? {
            Reply::Text(text) => Ok(text),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// The lock table text, of one resource or all.
    pub fn locks(&mut self, resource: Option<&str>) -> Result<String, ClientError> {
        match self.call(&Request::Locks { resource: resource.map(str::to_owned) })? {
            Reply::Text(text) => Ok(text),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// The next BAST, CACHE_INVAL or LOST notification, waiting at most `timeout`
    /// (`None`: no notification within it).
    pub fn next_notification(&mut self, timeout: Duration) -> Result<Option<Reply>, ClientError> {
        if let Some(reply) = self.notifications.pop_front() {
            return Ok(Some(reply));
        }
        match self.read_reply(Some(timeout)) {
            Ok(reply) if reply.is_notification() => Ok(Some(reply)),
            Ok(other) => Err(ClientError::Protocol(format!("{other:?}"))),
            Err(ClientError::Io { source, .. })
                if matches!(source.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) =>
            {
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: every request and answer round-trips through its encoding.
    #[test]
    fn bodies_round_trip() {
        let requests = [
            Request::Lock {
                resource: "counter".to_owned(),
                mode: LockMode::Ex,
                noqueue: true,
                norevoke: false,
                timeout_ms: 5,
            },
            Request::Lock {
                resource: "counter".to_owned(),
                mode: LockMode::Pr,
                noqueue: false,
                norevoke: true,
                timeout_ms: 0,
            },
            Request::Convert { handle: 7, mode: LockMode::Pr, noqueue: false, timeout_ms: 0 },
            Request::Unlock { handle: 7 },
            Request::Status,
            Request::Locks { resource: None },
            Request::Locks { resource: Some("r".to_owned()) },
            Request::CacheInval { handle: 7, start: 4096, length: 512 },
        ];
        for request in requests {
            assert_eq!(Request::decode(&request.encode()), Some(request));
        }
        let replies = [
            Reply::Ok,
            Reply::Granted { handle: 1, mode: LockMode::Cw, token: 1 << 32 | 5 },
            Reply::Text("x".to_owned()),
            Reply::Error { code: ErrorCode::Timeout, message: "late".to_owned() },
            Reply::Bast { handle: 2, mode: LockMode::Ex },
            Reply::CacheInval { handle: 2, start: 3, length: 4 },
            Reply::Lost { handle: 9 },
        ];
        for reply in replies {
            assert_eq!(Reply::decode(&reply.encode()), Some(reply));
        }
        assert_eq!(Request::decode(&[kind::LOCK, 9, 0, 0, 0, 0, 0]), None);
        assert_eq!(Request::decode(&[]), None);
    }

    // Goal: a client the daemon turned away before its first request went out gets the
    // daemon's reason, not a broken pipe. Method: a listener standing in for mxfsd accepts,
    // sends a "too many clients" refusal and closes before the client writes; the client's
    // STATUS call must fail with that refusal.
    #[test]
    fn refusal_sent_before_the_request_is_reported() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let path = dir.path().join("mxfsd.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let mut client = Client::connect(&path).expect("connect");
        let (mut daemon_side, _) = listener.accept().expect("accept");
        let refusal = Reply::Error { code: ErrorCode::Unavailable, message: "too many clients".to_owned() };
        daemon_side.write_all(&frame(&refusal.encode())).expect("refusal sent");
        drop(daemon_side);
        match client.status() {
            Err(ClientError::Refused { code: ErrorCode::Unavailable, message }) => {
                assert_eq!(message, "too many clients")
            }
            other => panic!("expected the refusal, got {other:?}"),
        }
    }
}
