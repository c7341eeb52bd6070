//! The on-disk byte layout: segment headers, record framing and snapshot headers.
//!
//! This module owns every byte offset of the format and nothing else: it encodes and
//! decodes fixed-size headers and record frames from byte slices, and never opens a
//! file. All integers are little-endian (the log is a local file, never sent over the
//! network). Every checksum is CRC-32 (IEEE, as computed by `crc32fast`).
//!
//! ## Segment file (`<name>.<NNNNNN>`)
//!
//! ```text
//! offset  bytes  field
//!      0      8  magic            b"LAVAELOG"
//!      8      4  format version   FORMAT_VERSION (1)
//!     12      4  header bytes     SEGMENT_HEADER_BYTES (64)
//!     16     16  log id           chosen once when the log is created
//!     32      8  segment number   equals the NNNNNN of the file name
//!     40      8  first position   position of the first record in this segment
//!     48      4  record bytes max largest payload the writer of this segment accepted
//!     52      4  content version  the owner's payload format (0: not recorded)
//!     56      4  reserved         zero
//!     60      4  header CRC-32    over bytes 0..60
//!     64      …  records, back to back, no padding
//! ```
//!
//! While a writer has the log open, the active (last) segment also ends in zero bytes:
//! space written ahead of the records (see `preallocate_bytes`), cut off on close.
//!
//! ## Record
//!
//! ```text
//! offset  bytes  field
//!      0      4  payload length n (at most the segment's record bytes max)
//!      4      4  CRC-32 over bytes 0..4 (the length) followed by the n payload bytes
//!      8      n  payload
//! ```
//!
//! The CRC covers the length, so a corrupted length field is detected like a corrupted
//! payload, and a run of zero bytes is never a valid record (the CRC of four zero bytes
//! is not zero), which is how zero-filled tails are told apart from records.
//!
//! ## Snapshot file (`<name>.snapshot.<20-digit position>`)
//!
//! ```text
//! offset  bytes  field
//!      0      8  magic            b"LAVASNAP"
//!      8      4  format version   FORMAT_VERSION (1)
//!     12      4  header bytes     SNAPSHOT_HEADER_BYTES (64)
//!     16     16  log id           the log the snapshot belongs to
//!     32      8  position         the snapshot covers every record up to and including it
//!     40      8  payload length   bytes after the header; the file is exactly that long
//!     48      4  payload CRC-32   over the payload
//!     52      4  content version  the owner's payload format (0: not recorded)
//!     56      4  reserved         zero
//!     60      4  header CRC-32    over bytes 0..60
//!     64      …  payload (the owner's state, opaque to the log)
//! ```
//!
//! The content version is the owner's ([`crate::Options::content_version`]): the log
//! never interprets payloads, but it refuses to hand back records or a snapshot written in
//! a payload format the owner says it does not read. Files written before the field
//! existed hold zero there, the bytes being reserved then.

use std::fmt;

/// Version of the segment and snapshot formats this crate reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// Magic at the start of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"LAVAELOG";
/// Magic at the start of every snapshot file.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"LAVASNAP";
/// Size of a segment file's header; records start at this offset.
pub const SEGMENT_HEADER_BYTES: usize = 64;
/// Size of a snapshot file's header; the payload starts at this offset.
pub const SNAPSHOT_HEADER_BYTES: usize = 64;
/// Size of a record's frame header (length and CRC) in front of its payload.
pub const RECORD_HEADER_BYTES: usize = 8;
/// Hard ceiling on a record payload, whatever an option or a segment header says:
/// a corrupted header can never make a reader allocate more than this for one record.
pub const RECORD_BYTES_LIMIT: u32 = 64 << 20;

/// Offset of the header CRC in both header kinds; the CRC covers everything before it.
const HEADER_CRC_OFFSET: usize = 60;

/// Sequence number of a record: 1 for the first record of a log, then +1 per record,
/// across segments, forever (pruning never renumbers).
///
/// `Position(0)` names "before the first record": a snapshot at position 0 covers
/// nothing, and waiting for position 0 to be durable returns at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position(pub u64);

impl Position {
    /// Position of the first record of every log.
    pub const FIRST: Position = Position(1);

    /// The position right after this one.
    pub fn next(self) -> Position {
        Position(self.0.checked_add(1).expect("a u64 record counter never wraps"))
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The identity of a log, chosen when it is created and written into every segment and
/// snapshot header, so that a file of another log copied into the directory is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LogId(pub [u8; 16]);

impl fmt::Display for LogId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// The decoded header of a segment file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The log the segment belongs to.
    pub log_id: LogId,
    /// The segment's number, as in its file name.
    pub segment_number: u64,
    /// Position of the segment's first record (or of the next record, if it has none).
    pub first_position: Position,
    /// Largest payload the writer accepted; readers bound length fields by it.
    pub record_bytes_max: u32,
    /// The owner's payload format of its records (0: not recorded).
    pub content_version: u32,
}

/// The decoded header of a snapshot file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotHeader {
    /// The log the snapshot belongs to.
    pub log_id: LogId,
    /// Last record position the snapshot covers.
    pub position: Position,
    /// Payload bytes after the header.
    pub payload_bytes: u64,
    /// CRC-32 of the payload.
    pub payload_crc: u32,
    /// The owner's payload format (0: not recorded).
    pub content_version: u32,
}

/// Why a header could not be decoded; the caller adds the file path.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Fewer bytes than a header.
    #[error("header is {got} bytes, expected {expected}")]
    Short {
        /// Bytes available.
        got: usize,
        /// Bytes a header needs.
        expected: usize,
    },
    /// The magic does not match: not a file of this kind.
    #[error("bad magic {found:02x?}")]
    BadMagic {
        /// The first eight bytes found.
        found: [u8; 8],
    },
    /// The header's checksum does not match its bytes.
    #[error("header checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    BadChecksum {
        /// CRC stored in the header.
        stored: u32,
        /// CRC computed over the header bytes.
        computed: u32,
    },
    /// A format version this build does not read.
    #[error("unsupported format version {found} (this build reads version {FORMAT_VERSION})")]
    UnsupportedVersion {
        /// Version found in the header.
        found: u32,
    },
    /// A field holds a value the format forbids.
    #[error("invalid {field}: {value}")]
    InvalidField {
        /// Name of the field.
        field: &'static str,
        /// The offending value.
        value: u64,
    },
}

fn put_u32(buf: &mut [u8], offset: usize, value: u32) {
    buf[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

fn put_u64(buf: &mut [u8], offset: usize, value: u64) {
    buf[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}

/// Reads a little-endian u32 at `offset`; the caller has checked the slice is long enough.
pub(crate) fn get_u32(buf: &[u8], offset: usize) -> u32 {
    let mut bytes = [0u8; 4];
    bytes.copy_from_slice(&buf[offset..offset + 4]);
    u32::from_le_bytes(bytes)
}

fn get_u64(buf: &[u8], offset: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&buf[offset..offset + 8]);
    u64::from_le_bytes(bytes)
}

fn seal_header(buf: &mut [u8; 64]) {
    let crc = crc32fast::hash(&buf[..HEADER_CRC_OFFSET]);
    put_u32(buf, HEADER_CRC_OFFSET, crc);
}

/// Checks length, magic, checksum, version and header size common to both header kinds.
fn open_header<'a>(bytes: &'a [u8], magic: &[u8; 8], expected: usize) -> Result<&'a [u8], HeaderError> {
    if bytes.len() < expected {
        return Err(HeaderError::Short { got: bytes.len(), expected });
    }
    let header = &bytes[..expected];
    if &header[..8] != magic {
        let mut found = [0u8; 8];
        found.copy_from_slice(&header[..8]);
        return Err(HeaderError::BadMagic { found });
    }
    let stored = get_u32(header, HEADER_CRC_OFFSET);
    let computed = crc32fast::hash(&header[..HEADER_CRC_OFFSET]);
    if stored != computed {
        return Err(HeaderError::BadChecksum { stored, computed });
    }
    let version = get_u32(header, 8);
    if version != FORMAT_VERSION {
        return Err(HeaderError::UnsupportedVersion { found: version });
    }
    let header_bytes = get_u32(header, 12);
    if header_bytes as usize != expected {
        return Err(HeaderError::InvalidField { field: "header bytes", value: u64::from(header_bytes) });
    }
    Ok(header)
}

fn get_log_id(header: &[u8]) -> LogId {
    let mut id = [0u8; 16];
    id.copy_from_slice(&header[16..32]);
    LogId(id)
}

impl SegmentHeader {
    /// Encodes the header into its 64 bytes.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_BYTES] {
        assert!(self.first_position >= Position::FIRST, "records are numbered from 1");
        assert!(self.record_bytes_max <= RECORD_BYTES_LIMIT, "record bytes max above the hard limit");
        let mut buf = [0u8; SEGMENT_HEADER_BYTES];
        buf[..8].copy_from_slice(&SEGMENT_MAGIC);
        put_u32(&mut buf, 8, FORMAT_VERSION);
        put_u32(&mut buf, 12, SEGMENT_HEADER_BYTES as u32);
        buf[16..32].copy_from_slice(&self.log_id.0);
        put_u64(&mut buf, 32, self.segment_number);
        put_u64(&mut buf, 40, self.first_position.0);
        put_u32(&mut buf, 48, self.record_bytes_max);
        put_u32(&mut buf, 52, self.content_version);
        seal_header(&mut buf);
        buf
    }

    /// Decodes and checks a header from the first bytes of a segment file.
    pub fn decode(bytes: &[u8]) -> Result<SegmentHeader, HeaderError> {
        let header = open_header(bytes, &SEGMENT_MAGIC, SEGMENT_HEADER_BYTES)?;
        let first_position = get_u64(header, 40);
        if first_position == 0 {
            return Err(HeaderError::InvalidField { field: "first position", value: 0 });
        }
        let record_bytes_max = get_u32(header, 48);
        if record_bytes_max > RECORD_BYTES_LIMIT {
            return Err(HeaderError::InvalidField {
                field: "record bytes max",
                value: u64::from(record_bytes_max),
            });
        }
        Ok(SegmentHeader {
            log_id: get_log_id(header),
            segment_number: get_u64(header, 32),
            first_position: Position(first_position),
            record_bytes_max,
            content_version: get_u32(header, 52),
        })
    }
}

impl SnapshotHeader {
    /// Encodes the header of a snapshot of `payload`.
    pub fn for_payload(
        log_id: LogId,
        position: Position,
        payload: &[u8],
        content_version: u32,
    ) -> SnapshotHeader {
        SnapshotHeader {
            log_id,
            position,
            payload_bytes: payload.len() as u64,
            payload_crc: crc32fast::hash(payload),
            content_version,
        }
    }

    /// Encodes the header into its 64 bytes.
    pub fn encode(&self) -> [u8; SNAPSHOT_HEADER_BYTES] {
        let mut buf = [0u8; SNAPSHOT_HEADER_BYTES];
        buf[..8].copy_from_slice(&SNAPSHOT_MAGIC);
        put_u32(&mut buf, 8, FORMAT_VERSION);
        put_u32(&mut buf, 12, SNAPSHOT_HEADER_BYTES as u32);
        buf[16..32].copy_from_slice(&self.log_id.0);
        put_u64(&mut buf, 32, self.position.0);
        put_u64(&mut buf, 40, self.payload_bytes);
        put_u32(&mut buf, 48, self.payload_crc);
        put_u32(&mut buf, 52, self.content_version);
        seal_header(&mut buf);
        buf
    }

    /// Decodes and checks a header from the first bytes of a snapshot file.
    pub fn decode(bytes: &[u8]) -> Result<SnapshotHeader, HeaderError> {
        let header = open_header(bytes, &SNAPSHOT_MAGIC, SNAPSHOT_HEADER_BYTES)?;
        Ok(SnapshotHeader {
            log_id: get_log_id(header),
            position: Position(get_u64(header, 32)),
            payload_bytes: get_u64(header, 40),
            payload_crc: get_u32(header, 48),
            content_version: get_u32(header, 52),
        })
    }
}

/// CRC of a record: over its little-endian length, then its payload.
pub fn record_crc(payload: &[u8]) -> u32 {
    let length = u32::try_from(payload.len()).expect("payload lengths are checked against the record limit");
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&length.to_le_bytes());
    hasher.update(payload);
    hasher.finalize()
}

/// Appends one framed record (length, CRC, payload) to `out`, with a CRC computed
/// beforehand by [`record_crc`] (so that it can be computed outside any lock).
pub fn encode_record(out: &mut Vec<u8>, payload: &[u8], crc: u32) {
    debug_assert_eq!(crc, record_crc(payload), "the CRC belongs to this payload");
    let length = u32::try_from(payload.len()).expect("payload lengths are checked against the record limit");
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
}

/// How a record frame failed to check out at some offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameProblem {
    /// Fewer than [`RECORD_HEADER_BYTES`] bytes remain.
    TruncatedHeader,
    /// The length field is above the record size limit.
    LengthOverLimit,
    /// The payload extends past the end of the data.
    TruncatedPayload,
    /// The stored CRC does not match the length and payload.
    ChecksumMismatch,
}

impl fmt::Display for FrameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FrameProblem::TruncatedHeader => "truncated record header",
            FrameProblem::LengthOverLimit => "length field above the record size limit",
            FrameProblem::TruncatedPayload => "payload runs past the end of the file",
            FrameProblem::ChecksumMismatch => "checksum mismatch",
        })
    }
}

/// Checks the record frame at the start of `bytes`, where `remaining` is how many bytes
/// of the file are left from that point (`bytes` may be a shorter window, but then it
/// must hold at least `RECORD_HEADER_BYTES + record_bytes_max` bytes).
/// Returns the payload length of a valid record.
pub fn check_frame(bytes: &[u8], remaining: u64, record_bytes_max: u32) -> Result<u32, FrameProblem> {
    if remaining < RECORD_HEADER_BYTES as u64 || bytes.len() < RECORD_HEADER_BYTES {
        return Err(FrameProblem::TruncatedHeader);
    }
    let length = get_u32(bytes, 0);
    if length > record_bytes_max {
        return Err(FrameProblem::LengthOverLimit);
    }
    let total = RECORD_HEADER_BYTES + length as usize;
    if (total as u64) > remaining || total > bytes.len() {
        return Err(FrameProblem::TruncatedPayload);
    }
    let stored = get_u32(bytes, 4);
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&bytes[..4]);
    hasher.update(&bytes[RECORD_HEADER_BYTES..total]);
    if hasher.finalize() != stored {
        return Err(FrameProblem::ChecksumMismatch);
    }
    Ok(length)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_header_round_trips_and_detects_every_bit_flip() {
        // Goal: a segment header decodes to what was encoded, and any single-bit change
        // is refused. Method: encode one header, decode it, then flip each bit in turn.
        let header = SegmentHeader {
            log_id: LogId(*b"0123456789abcdef"),
            segment_number: 7,
            first_position: Position(1234),
            record_bytes_max: 1 << 20,
            content_version: 3,
        };
        let bytes = header.encode();
        assert_eq!(SegmentHeader::decode(&bytes), Ok(header));
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes;
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(SegmentHeader::decode(&flipped).is_err(), "bit {bit} flip went unnoticed");
        }
        assert_eq!(SegmentHeader::decode(&bytes[..10]), Err(HeaderError::Short { got: 10, expected: 64 }));
    }

    #[test]
    fn snapshot_header_round_trips() {
        // Goal: a snapshot header decodes to what was encoded. Method: encode, decode, compare.
        let header = SnapshotHeader::for_payload(LogId([9; 16]), Position(42), b"state", 2);
        assert_eq!(SnapshotHeader::decode(&header.encode()), Ok(header));
    }

    #[test]
    fn record_frames_check_out_and_zeros_never_do() {
        // Goal: a framed record is valid, its truncations and a zero run are not.
        // Method: frame a payload, check it whole, cut, and check eight zero bytes.
        let mut frame = Vec::new();
        encode_record(&mut frame, b"hello", record_crc(b"hello"));
        assert_eq!(check_frame(&frame, frame.len() as u64, 100), Ok(5));
        assert_eq!(check_frame(&frame[..7], 7, 100), Err(FrameProblem::TruncatedHeader));
        assert_eq!(check_frame(&frame[..10], 10, 100), Err(FrameProblem::TruncatedPayload));
        assert_eq!(check_frame(&frame, frame.len() as u64, 4), Err(FrameProblem::LengthOverLimit));
        assert_eq!(check_frame(&[0u8; 8], 8, 100), Err(FrameProblem::ChecksumMismatch));
    }
}
