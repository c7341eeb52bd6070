//! Connections: [`FramedConn`] reads and writes `lava_xdr::frame` frames over any async
//! byte stream under read, write and connect timeouts; [`AuthConn`] adds the cluster-key
//! trailer on the way out and checks it on the way in.
//!
//! Both are hand-written loops over a `BytesMut` (no codec framework): the frame decoder
//! refuses an oversized length from the header alone, so a peer never makes us buffer more
//! than [`FrameLimits::body_bytes_max`]. After any error the connection's state is unknown:
//! [`AuthConn`] drops its stream at once (the peer sees the close) and answers
//! [`ConnError::Closed`] from then on; a [`FramedConn`]'s owner should drop it likewise.
//!
//! [`FramedConn::read_frame`] is cancel-safe (bytes already read stay buffered); the write
//! methods are not, and must be awaited to completion or the connection dropped.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use lava_xdr::frame::{
    Frame, FrameError, FrameHeader, FrameLimits, HEADER_BYTES, decode_frame, encode_frame,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::auth::{AuthError, Authenticator, Nonce, system_now_ms};

/// Default time allowed to establish a TCP connection.
pub const CONNECT_TIMEOUT_MS_DEFAULT: u64 = 5_000;
/// Default time allowed for one whole frame to arrive once a read starts (includes idling).
pub const READ_TIMEOUT_MS_DEFAULT: u64 = 60_000;
/// Default time allowed to write and flush one frame.
pub const WRITE_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// Bytes asked of the socket per read when the buffer has no room left.
const READ_CHUNK_BYTES: usize = 8 * 1024;

/// The timeouts of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Limit on establishing a connection.
    pub connect_timeout_ms: u64,
    /// Limit on receiving one whole frame, counted from the call to `read_frame`.
    pub read_timeout_ms: u64,
    /// Limit on writing and flushing one frame.
    pub write_timeout_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect_timeout_ms: CONNECT_TIMEOUT_MS_DEFAULT,
            read_timeout_ms: READ_TIMEOUT_MS_DEFAULT,
            write_timeout_ms: WRITE_TIMEOUT_MS_DEFAULT,
        }
    }
}

/// Why a connection failed. Every variant but `Closed` is the reason it was dropped.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The TCP handshake did not finish in time.
    #[error("connecting to {addr} timed out after {timeout_ms} ms")]
    ConnectTimeout {
        /// The peer.
        addr: SocketAddr,
        /// The limit.
        timeout_ms: u64,
    },
    /// The TCP connection was refused or failed.
    #[error("connecting to {addr}: {source}")]
    Connect {
        /// The peer.
        addr: SocketAddr,
        /// The underlying error.
        source: io::Error,
    },
    /// Every reconnect attempt failed.
    #[error("gave up connecting after {attempts} attempts: {last}")]
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        last: Box<ConnError>,
    },
    /// No whole frame arrived in time.
    #[error("no complete frame within the read timeout of {timeout_ms} ms")]
    ReadTimeout {
        /// The limit.
        timeout_ms: u64,
    },
    /// A frame could not be written in time.
    #[error("frame not written within the write timeout of {timeout_ms} ms")]
    WriteTimeout {
        /// The limit.
        timeout_ms: u64,
    },
    /// The peer closed the connection part-way through a frame.
    #[error("peer closed the connection in the middle of a frame ({buffered_bytes} bytes buffered)")]
    ClosedMidFrame {
        /// Bytes of the partial frame.
        buffered_bytes: usize,
    },
    /// The caller refused a frame on its header ([`FramedConn::read_frame_reserving`]).
    #[error("frame refused: {0}")]
    Refused(String),
    /// A socket error.
    #[error("connection I/O: {0}")]
    Io(#[from] io::Error),
    /// An oversized frame (from the header alone).
    #[error("bad frame: {0}")]
    Frame(#[from] FrameError),
    /// A frame failed authentication.
    #[error("frame refused: {0}")]
    Auth(#[from] AuthError),
    /// No nonce could be drawn to seal a frame.
    #[error("no randomness for a nonce: {0}")]
    Random(getrandom::Error),
    /// The connection was already dropped after an earlier error.
    #[error("the connection was closed after an earlier error")]
    Closed,
}

/// Frames over a byte stream, with limits and timeouts.
#[derive(Debug)]
pub struct FramedConn<S> {
    stream: S,
    read_buf: BytesMut,
    write_buf: BytesMut,
    limits: FrameLimits,
    timeouts: Timeouts,
}

impl FramedConn<TcpStream> {
    /// Connects to `addr` within the connect timeout, with Nagle's algorithm off
    /// (requests are small and latency-bound).
    pub async fn connect(
        addr: SocketAddr,
        limits: FrameLimits,
        timeouts: Timeouts,
    ) -> Result<FramedConn<TcpStream>, ConnError> {
        let timeout_ms = timeouts.connect_timeout_ms;
        let stream = timeout(Duration::from_millis(timeout_ms), TcpStream::connect(addr))
            .await
            .map_err(|_| ConnError::ConnectTimeout { addr, timeout_ms })?
            .map_err(|source| ConnError::Connect { addr, source })?;
        stream.set_nodelay(true).map_err(|source| ConnError::Connect { addr, source })?;
        Ok(FramedConn::new(stream, limits, timeouts))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> FramedConn<S> {
    /// Wraps an established stream.
    pub fn new(stream: S, limits: FrameLimits, timeouts: Timeouts) -> FramedConn<S> {
        FramedConn { stream, read_buf: BytesMut::new(), write_buf: BytesMut::new(), limits, timeouts }
    }

    /// The stream, e.g. for its addresses.
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// Receives the next frame; `Ok(None)` when the peer closed cleanly between frames.
    pub async fn read_frame(&mut self) -> Result<Option<Frame>, ConnError> {
        let timeout_ms = self.timeouts.read_timeout_ms;
        timeout(Duration::from_millis(timeout_ms), self.read_frame_untimed())
            .await
            .map_err(|_| ConnError::ReadTimeout { timeout_ms })?
    }

    /// [`read_frame`](Self::read_frame), calling `reserve` with the frame's header as soon
    /// as it has arrived and before any more of the frame is taken in: an error refuses
    /// the frame ([`ConnError::Refused`]). A daemon reserves the announced length of a
    /// first frame of its pre-authentication budget with it (lava-net's gate).
    pub async fn read_frame_reserving(
        &mut self,
        reserve: impl FnOnce(&FrameHeader) -> Result<(), String>,
    ) -> Result<Option<Frame>, ConnError> {
        let timeout_ms = self.timeouts.read_timeout_ms;
        let read = async {
            while self.read_buf.len() < HEADER_BYTES {
                if self.stream.read_buf(&mut self.read_buf).await? == 0 {
                    return match self.read_buf.len() {
                        0 => Ok(None),
                        buffered_bytes => Err(ConnError::ClosedMidFrame { buffered_bytes }),
                    };
                }
            }
            let header = FrameHeader::parse(&self.read_buf)?;
            header.check_length(&self.limits)?;
            reserve(&header).map_err(ConnError::Refused)?;
            self.read_frame_untimed().await
        };
        timeout(Duration::from_millis(timeout_ms), read)
            .await
            .map_err(|_| ConnError::ReadTimeout { timeout_ms })?
    }

    async fn read_frame_untimed(&mut self) -> Result<Option<Frame>, ConnError> {
        loop {
            if let Some(frame) = decode_frame(&mut self.read_buf, &self.limits)? {
                return Ok(Some(frame));
            }
            if self.read_buf.capacity() == self.read_buf.len() {
                self.read_buf.reserve(READ_CHUNK_BYTES);
            }
            if self.stream.read_buf(&mut self.read_buf).await? == 0 {
                return match self.read_buf.len() {
                    0 => Ok(None),
                    buffered_bytes => Err(ConnError::ClosedMidFrame { buffered_bytes }),
                };
            }
        }
    }

    /// Sends one frame; `header.length` is set from `body`.
    pub async fn write_frame(&mut self, header: FrameHeader, body: &[u8]) -> Result<(), ConnError> {
        self.write_frames(&[(header, body)]).await
    }

    /// Sends frames in one write (the peer may then read them together); each header's
    /// `length` is set from its body. Nothing is sent when one of them does not encode.
    pub async fn write_frames(&mut self, frames: &[(FrameHeader, &[u8])]) -> Result<(), ConnError> {
        self.write_buf.clear();
        for (header, body) in frames {
            encode_frame(*header, body, &self.limits, &mut self.write_buf)?;
        }
        let timeout_ms = self.timeouts.write_timeout_ms;
        let (stream, bytes) = (&mut self.stream, &self.write_buf);
        let write = async move {
            stream.write_all(bytes).await?;
            stream.flush().await
        };
        timeout(Duration::from_millis(timeout_ms), write)
            .await
            .map_err(|_| ConnError::WriteTimeout { timeout_ms })??;
        Ok(())
    }
}

/// A [`FramedConn`] whose frames carry the cluster-key trailer. The first failure of any
/// kind drops the stream, closing the connection.
#[derive(Debug)]
pub struct AuthConn<S> {
    conn: Option<FramedConn<S>>,
    auth: Arc<Authenticator>,
    clock: fn() -> u64,
}

impl<S: AsyncRead + AsyncWrite + Unpin> AuthConn<S> {
    /// Authenticates `conn` with `auth` (shared, for one replay cache per daemon) and the
    /// system clock.
    pub fn new(conn: FramedConn<S>, auth: Arc<Authenticator>) -> AuthConn<S> {
        AuthConn { conn: Some(conn), auth, clock: system_now_ms }
    }

    /// Replaces the clock (ms since the Unix epoch) used to seal and to check windows.
    pub fn with_clock(self, clock: fn() -> u64) -> AuthConn<S> {
        AuthConn { clock, ..self }
    }

    /// Whether the connection is still open.
    pub fn is_open(&self) -> bool {
        self.conn.is_some()
    }

    /// Receives and authenticates the next frame. The frame returned holds the payload only,
    /// and its header's `length` is the payload's. `Ok(None)` when the peer closed cleanly.
    pub async fn read_frame(&mut self) -> Result<Option<Frame>, ConnError> {
        let conn = self.conn.as_mut().ok_or(ConnError::Closed)?;
        let result = match conn.read_frame().await {
            Ok(Some(frame)) => match self.auth.open(&frame, (self.clock)()) {
                Ok(payload) => {
                    let length = u32::try_from(payload.len()).expect("payload is shorter than the frame");
                    Ok(Some(Frame { header: FrameHeader { length, ..frame.header }, body: payload }))
                }
                Err(err) => Err(ConnError::Auth(err)),
            },
            other => other,
        };
        if !matches!(result, Ok(Some(_))) {
            self.conn = None;
        }
        result
    }

    /// Seals `payload` with a fresh nonce and the clock, and sends it after `header`.
    pub async fn write_frame(&mut self, header: FrameHeader, payload: &[u8]) -> Result<(), ConnError> {
        self.write_frames(&[(header, payload)]).await
    }

    /// Seals and sends frames in one write ([`FramedConn::write_frames`]).
    pub async fn write_frames(&mut self, frames: &[(FrameHeader, &[u8])]) -> Result<(), ConnError> {
        let conn = self.conn.as_mut().ok_or(ConnError::Closed)?;
        let sealed: Result<Vec<bytes::Bytes>, ConnError> = frames
            .iter()
            .map(|(header, payload)| {
                let nonce = Nonce::fresh().map_err(ConnError::Random)?;
                Ok(self.auth.seal(*header, payload, (self.clock)(), nonce)?)
            })
            .collect();
        let result = match sealed {
            Ok(bodies) => {
                let frames: Vec<(FrameHeader, &[u8])> =
                    frames.iter().zip(&bodies).map(|((header, _), body)| (*header, body.as_ref())).collect();
                conn.write_frames(&frames).await
            }
            Err(err) => Err(err),
        };
        if result.is_err() {
            self.conn = None;
        }
        result
    }
}
