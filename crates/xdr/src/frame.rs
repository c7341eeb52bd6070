//! The frame codec: a fixed 20-byte header followed by a body, over a byte stream.
//!
//! The header is LavaLite's: five big-endian 32-bit fields, in this order —
//! `sequence`, `operation`, `version`, `length`, `status` (see
//! docs/protocols/README.md, "The 20-byte frame header").
//! `length` counts the body bytes that follow the header, never the header
//! itself. The body is opaque here: it is XDR for the batch, LIM-over-TCP and
//! coordinator protocols, possibly followed by an authentication trailer that
//! the transport crate adds and removes.
//!
//! Everything here is a pure function over `bytes` buffers: no I/O, no runtime.
//! A decoder never reserves memory because a length field asked for it: a body
//! longer than [`FrameLimits::body_bytes_max`] is an error before a single body
//! byte is buffered, and the caller is expected to drop the connection.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Size of the fixed frame header on the wire.
pub const HEADER_BYTES: usize = 20;

/// Default largest body a peer may send: 1 MiB, far above any job submission.
pub const BODY_BYTES_MAX_DEFAULT: u32 = 1 << 20;

/// The fixed header that precedes every frame body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameHeader {
    /// Sender-chosen sequence number; replies echo the request's.
    pub sequence: u32,
    /// Operation code of the protocol the frame belongs to.
    pub operation: u32,
    /// Protocol version; each protocol defines its own constant.
    pub version: u32,
    /// Number of body bytes after the header.
    pub length: u32,
    /// Reply status (0 in requests); LavaLite's "reserved" field.
    pub status: u32,
}

/// Bounds a decoder enforces before buffering a body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLimits {
    /// Largest accepted body, in bytes.
    pub body_bytes_max: u32,
}

impl Default for FrameLimits {
    fn default() -> Self {
        FrameLimits { body_bytes_max: BODY_BYTES_MAX_DEFAULT }
    }
}

/// One decoded frame: its header and exactly `header.length` body bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The header as received.
    pub header: FrameHeader,
    /// The body, `header.length` bytes long.
    pub body: Bytes,
}

/// Why a frame could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The header announced a body larger than the configured limit.
    #[error(
        "frame body of {length} bytes exceeds the limit of {max} bytes (operation {operation}, sequence {sequence})"
    )]
    BodyTooLarge {
        /// Announced body length.
        length: u32,
        /// Configured maximum.
        max: u32,
        /// Operation of the offending frame, for the log.
        operation: u32,
        /// Sequence of the offending frame, for the log.
        sequence: u32,
    },
    /// The frame carries a protocol version this peer does not speak.
    #[error("unsupported protocol version {got:#x} (operation {operation}); this peer speaks {expected:#x}")]
    VersionMismatch {
        /// Version in the header.
        got: u32,
        /// Version this peer speaks.
        expected: u32,
        /// Operation of the offending frame.
        operation: u32,
    },
    /// A datagram or buffer held a different number of bytes than its header said.
    #[error("frame length mismatch: header says {announced} body bytes, {actual} present")]
    LengthMismatch {
        /// Body length in the header.
        announced: u32,
        /// Body bytes actually present.
        actual: usize,
    },
    /// A buffer was shorter than the fixed header.
    #[error("short frame: {actual} bytes, the header alone is {HEADER_BYTES}")]
    Short {
        /// Bytes present.
        actual: usize,
    },
}

impl FrameHeader {
    /// Reads a header from the first [`HEADER_BYTES`] of `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<FrameHeader, FrameError> {
        if bytes.len() < HEADER_BYTES {
            return Err(FrameError::Short { actual: bytes.len() });
        }
        let mut buf = &bytes[..HEADER_BYTES];
        Ok(FrameHeader {
            sequence: buf.get_u32(),
            operation: buf.get_u32(),
            version: buf.get_u32(),
            length: buf.get_u32(),
            status: buf.get_u32(),
        })
    }

    /// Appends the header's 20 bytes to `dst`.
    pub fn write(&self, dst: &mut impl BufMut) {
        dst.put_u32(self.sequence);
        dst.put_u32(self.operation);
        dst.put_u32(self.version);
        dst.put_u32(self.length);
        dst.put_u32(self.status);
    }

    /// Checks the header's version against the one this peer speaks.
    pub fn check_version(&self, expected: u32) -> Result<(), FrameError> {
        if self.version == expected {
            Ok(())
        } else {
            Err(FrameError::VersionMismatch { got: self.version, expected, operation: self.operation })
        }
    }

    /// Checks the announced body length against `limits`.
    pub fn check_length(&self, limits: &FrameLimits) -> Result<(), FrameError> {
        if self.length > limits.body_bytes_max {
            return Err(FrameError::BodyTooLarge {
                length: self.length,
                max: limits.body_bytes_max,
                operation: self.operation,
                sequence: self.sequence,
            });
        }
        Ok(())
    }
}

/// Appends one frame to `dst`: the header (with `length` set from `body`) then the body.
///
/// Fails only when the body exceeds `limits`, so that a peer never sends what
/// the other side is bound to refuse.
pub fn encode_frame(
    header: FrameHeader,
    body: &[u8],
    limits: &FrameLimits,
    dst: &mut BytesMut,
) -> Result<(), FrameError> {
    let length = u32::try_from(body.len()).unwrap_or(u32::MAX);
    let header = FrameHeader { length, ..header };
    header.check_length(limits)?;
    dst.reserve(HEADER_BYTES + body.len());
    header.write(dst);
    dst.put_slice(body);
    Ok(())
}

/// The least a stream buffer grows by while a frame is incomplete ([`decode_frame`]).
pub const FRAME_GROWTH_MIN_BYTES: usize = 16 * 1024;

/// Takes one complete frame off the front of a stream buffer.
///
/// Returns `Ok(None)` when `src` does not yet hold a whole frame (nothing is
/// consumed); the caller reads more bytes and calls again. An announced body
/// over the limit is an error as soon as the header is complete.
pub fn decode_frame(src: &mut BytesMut, limits: &FrameLimits) -> Result<Option<Frame>, FrameError> {
    if src.len() < HEADER_BYTES {
        return Ok(None);
    }
    let header = FrameHeader::parse(src)?;
    header.check_length(limits)?;
    let total = HEADER_BYTES + header.length as usize;
    if src.len() < total {
        // Room grows with the bytes received (at most doubling what is held), never to the
        // announced length at once: a peer that announces a large frame and sends little
        // of it costs little.
        src.reserve((total - src.len()).min(src.len().max(FRAME_GROWTH_MIN_BYTES)));
        return Ok(None);
    }
    let mut whole = src.split_to(total);
    whole.advance(HEADER_BYTES);
    Ok(Some(Frame { header, body: whole.freeze() }))
}

/// Decodes a buffer that must hold exactly one frame (a datagram, a record).
pub fn decode_exact(bytes: &[u8], limits: &FrameLimits) -> Result<Frame, FrameError> {
    let header = FrameHeader::parse(bytes)?;
    header.check_length(limits)?;
    let actual = bytes.len() - HEADER_BYTES;
    if actual != header.length as usize {
        return Err(FrameError::LengthMismatch { announced: header.length, actual });
    }
    Ok(Frame { header, body: Bytes::copy_from_slice(&bytes[HEADER_BYTES..]) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(operation: u32) -> FrameHeader {
        FrameHeader { sequence: 7, operation, version: 1, length: 0, status: 0 }
    }

    // Goal: the header is the five big-endian words in LavaLite's order.
    #[test]
    fn header_layout_is_five_big_endian_words() {
        let mut dst = BytesMut::new();
        encode_frame(header(30), &[0xAA, 0xBB, 0xCC, 0xDD], &FrameLimits::default(), &mut dst)
            .expect("small body");
        assert_eq!(
            &dst[..],
            &[0, 0, 0, 7, 0, 0, 0, 30, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 0, 0xAA, 0xBB, 0xCC, 0xDD]
        );
    }

    // Goal: a peer that announces a large frame and sends little of it makes the buffer
    // grow with what it sent, not to the announced size (issue 18: 1,000 connections
    // announcing 2 MiB each grew mbatchd to 2.3 GB); a frame sent whole still decodes, with
    // the buffer at most about twice its size.
    #[test]
    fn an_announced_length_reserves_nothing_beyond_the_bytes_received() {
        let limits = FrameLimits { body_bytes_max: 4 << 20 };
        let mut src = BytesMut::new();
        FrameHeader { length: 4 << 20, ..header(1) }.write(&mut src);
        src.extend_from_slice(&[0u8; 100]);
        assert!(decode_frame(&mut src, &limits).expect("within the limit").is_none());
        assert!(src.capacity() < 64 << 10, "reserved {} bytes for 120 received", src.capacity());
        let body = vec![7u8; 4 << 20];
        let mut wire = BytesMut::new();
        encode_frame(header(2), &body, &limits, &mut wire).expect("encode");
        let mut src = BytesMut::new();
        let mut decoded = None;
        for chunk in wire.chunks(8 << 10) {
            src.extend_from_slice(chunk);
            if let Some(frame) = decode_frame(&mut src, &limits).expect("well-formed") {
                decoded = Some(frame);
            }
        }
        assert_eq!(decoded.expect("the whole frame").body.len(), body.len());
    }

    // Goal: a stream split at every byte boundary yields the same frames.
    #[test]
    fn stream_decoding_survives_any_split() {
        let limits = FrameLimits::default();
        let mut wire = BytesMut::new();
        encode_frame(header(1), b"first", &limits, &mut wire).expect("encode");
        encode_frame(header(2), b"", &limits, &mut wire).expect("encode");
        encode_frame(header(3), b"third body", &limits, &mut wire).expect("encode");
        for cut in 0..=wire.len() {
            let mut src = BytesMut::new();
            let mut got = Vec::new();
            for chunk in [&wire[..cut], &wire[cut..]] {
                src.extend_from_slice(chunk);
                while let Some(frame) = decode_frame(&mut src, &limits).expect("valid stream") {
                    got.push((frame.header.operation, frame.body));
                }
            }
            assert!(src.is_empty());
            let ops: Vec<u32> = got.iter().map(|(op, _)| *op).collect();
            assert_eq!(ops, vec![1, 2, 3], "cut at {cut}");
            assert_eq!(&got[2].1[..], b"third body");
        }
    }

    // Goal: a hostile length is refused from the header alone, before any buffering.
    #[test]
    fn hostile_length_is_refused_from_the_header() {
        let limits = FrameLimits { body_bytes_max: 64 };
        let mut src = BytesMut::new();
        FrameHeader { length: u32::MAX, ..header(9) }.write(&mut src);
        let err = decode_frame(&mut src, &limits).expect_err("too large");
        assert!(matches!(err, FrameError::BodyTooLarge { length: u32::MAX, max: 64, operation: 9, .. }));
        assert!(src.capacity() < 1024, "no allocation was driven by the length field");
        let mut dst = BytesMut::new();
        assert!(encode_frame(header(9), &[0u8; 65], &limits, &mut dst).is_err());
    }

    // Goal: exact decoding rejects short buffers and length disagreements.
    #[test]
    fn exact_decoding_checks_the_length() {
        let limits = FrameLimits::default();
        assert_eq!(decode_exact(&[0; 19], &limits), Err(FrameError::Short { actual: 19 }));
        let mut buf = BytesMut::new();
        encode_frame(header(4), b"abcd", &limits, &mut buf).expect("encode");
        assert_eq!(decode_exact(&buf, &limits).expect("exact").body, Bytes::from_static(b"abcd"));
        buf.extend_from_slice(b"x");
        assert_eq!(decode_exact(&buf, &limits), Err(FrameError::LengthMismatch { announced: 4, actual: 5 }));
    }

    // Goal: a version other than ours is named in the error.
    #[test]
    fn version_mismatch_is_reported() {
        let h = FrameHeader { version: 2, ..header(5) };
        assert_eq!(
            h.check_version(1),
            Err(FrameError::VersionMismatch { got: 2, expected: 1, operation: 5 })
        );
        assert_eq!(header(5).check_version(1), Ok(()));
    }
}
