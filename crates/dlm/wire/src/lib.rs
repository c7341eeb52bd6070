//! lava-dlm-wire: the bytes of the DLM protocol (docs/protocols/dlm.md).
//!
//! # What it owns
//! - The 32-byte `mxfs_dlm_msg_hdr` of the spec, byte-exact, network byte order
//!   ([`Header`]): magic `0x4D584653` ("MXFS"), version u16 (= [`DLM_VERSION`]), type u16,
//!   length u32 (the **whole** message: header, payload and authentication trailer), seq u32,
//!   sender u32, target u32 (0 = broadcast-originated), epoch u64.
//! - Every message type of the spec with its number (the numbering of the original
//!   mxfs implementation, docs/protocols/dlm.md) and a payload layout
//!   decided here ([`Message`]).
//! - Stream framing: the header's own `length` frames each message on the TCP stream between
//!   daemons ([`frame_len`]).
//! - Room for the authentication trailer (docs/protocols/README.md, "Authentication"):
//!   [`TRAILER_BYTES`] (60) opaque bytes after the payload, inside the stated length, so the header stays
//!   byte-exact. This crate never computes or checks it (lava-net's `seal_bytes` /
//!   `open_bytes` do, in the shell, over header ‖ payload); it only reserves and splits it.
//!
//! # Header
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | magic `0x4D584653` |
//! | 4 | 2 | version (1) |
//! | 6 | 2 | type |
//! | 8 | 4 | length: header + payload + trailer |
//! | 12 | 4 | seq |
//! | 16 | 4 | sender node id |
//! | 20 | 4 | target node id (0 = broadcast) |
//! | 24 | 8 | sender epoch |
//!
//! # Payloads (decided here; all integers big-endian, pads must be zero)
//! `resource` is always last: a u16 byte count (at most [`RESOURCE_BYTES_MAX`]) then the bytes.
//!
//! | type | message | payload | bytes |
//! |---|---|---|---|
//! | 1 | LOCK_REQ | lock_id u64, mode u8, pad u8×3, flags u32, resource | 18 + n |
//! | 2 | LOCK_GRANT | lock_id u64, token u64, mode u8, status u8, pad u16, resource | 22 + n |
//! | 3 | LOCK_DENY | as LOCK_GRANT (status = the error code) | 22 + n |
//! | 4 | LOCK_RELEASE | lock_id u64, resource | 10 + n |
//! | 5 | LOCK_CONVERT | as LOCK_REQ (flags include CONVERT) | 18 + n |
//! | 6 | LOCK_BAST | lock_id u64 (the holder's), requested mode u8, pad u8×3, resource | 14 + n |
//! | 7, 8, 9 | LEASE_RENEW / LEASE_ACK / LEASE_EXPIRE | duration_ms u64, lock_count u32, node u32 | 16 |
//! | 10, 11 | NODE_JOIN / NODE_LEAVE | port u16, name length u16 (≤ [`NODE_NAME_BYTES_MAX`]), name | 4 + n |
//! | 12 | NODE_ALIVE | (empty) | 0 |
//! | 13, 14 | JOURNAL_RECOVER / JOURNAL_DONE | dead node u32, journal slot u32 | 8 |
//! | 15 | CACHE_INVAL | range start u64, range length u64, resource | 18 + n |
//!
//! `lock_id` names one lock of the requesting node (the node picks it; the pair
//! (sender, lock_id) is the lock's owner at the master). Its top bit, [`LOCK_ID_NOREVOKE`],
//! marks a lock held until its holder releases it: BASTs are hints to it and the master never
//! revokes it for not answering one (every other lock is revoked, LOCK_DENY with
//! [`STATUS_REVOKED`], when its holder neither downgrades nor releases within the BAST
//! timeout). The bit is part of the id so that every message naming the lock carries it.
//! `token` of a grant is the fencing token (the master's epoch in the high 32 bits, a
//! per-epoch grant counter in the low 32).
//!
//! The lease fields, by message:
//! - LEASE_RENEW: `duration_ms` is how long the sender asks to be taken for alive from this
//!   renewal (its node timeout), `lock_count` the locks its clients hold granted, `node` the
//!   sender itself (whose lease it is). A renewal is also the sender's NODE_ALIVE.
//! - LEASE_ACK: `duration_ms` is the lease granted, how long the acknowledging node takes the
//!   renewer for alive from this renewal (its node timeout); `lock_count` the locks the renewer
//!   holds in the acknowledging node's lock table (the master's count; 0 from any other node);
//!   `node` the renewer.
//! - LEASE_EXPIRE: `node` is the node declared dead; `duration_ms` and `lock_count` are 0.
//!
//! A conversion is sent as LOCK_REQ (type 1) with [`FLAG_CONVERT`], as the spec has it; type 5
//! (LOCK_CONVERT, the same payload) is still decoded, and lava-dlm-ll takes it as a
//! conversion. NODE_ALIVE (type 12) keeps its number and its empty payload so that such a
//! frame decodes and is counted under its name, but no mxfsd sends it: the spec has it
//! piggybacked on lease renewal, and here LEASE_RENEW is the NODE_ALIVE (lava-dlm-ll refuses
//! a NODE_ALIVE frame alone).
//!
//! Mode, flags and status values are [`MODE_NL`]…, [`FLAG_NOQUEUE`]…, [`STATUS_OK`]…; their
//! meaning is checked by lava-dlm-ll, not here.
//!
//! # What it never does
//! Validation beyond well-formedness (mode ranges, flag meaning, names: lava-dlm-ll), state,
//! clocks, sockets, authentication.

#![deny(missing_docs)]

/// "MXFS".
pub const DLM_MAGIC: u32 = 0x4D58_4653;
/// The protocol version this crate speaks.
pub const DLM_VERSION: u16 = 1;
/// Size of `mxfs_dlm_msg_hdr`.
pub const HEADER_BYTES: usize = 32;
/// Size of the authentication trailer (lava-net's `TRAILER_BYTES`): key id, timestamp, nonce, MAC.
pub const TRAILER_BYTES: usize = 60;
/// Longest resource name on the wire.
pub const RESOURCE_BYTES_MAX: usize = 255;
/// Longest node name on the wire (the original's `char[64]`).
pub const NODE_NAME_BYTES_MAX: usize = 64;
/// Longest payload of any message (LOCK_GRANT with the longest resource).
pub const PAYLOAD_BYTES_MAX: usize = 22 + 2 + RESOURCE_BYTES_MAX;
/// Longest whole message; a header announcing more is refused before anything is buffered.
pub const FRAME_BYTES_MAX: usize = HEADER_BYTES + PAYLOAD_BYTES_MAX + TRAILER_BYTES;
/// Shortest whole message: a header, no payload, a trailer.
pub const FRAME_BYTES_MIN: usize = HEADER_BYTES + TRAILER_BYTES;

/// Message type numbers.
pub mod msg_type {
    /// LOCK_REQ.
    pub const LOCK_REQ: u16 = 1;
    /// LOCK_GRANT.
    pub const LOCK_GRANT: u16 = 2;
    /// LOCK_DENY.
    pub const LOCK_DENY: u16 = 3;
    /// LOCK_RELEASE.
    pub const LOCK_RELEASE: u16 = 4;
    /// LOCK_CONVERT.
    pub const LOCK_CONVERT: u16 = 5;
    /// LOCK_BAST.
    pub const LOCK_BAST: u16 = 6;
    /// LEASE_RENEW.
    pub const LEASE_RENEW: u16 = 7;
    /// LEASE_ACK.
    pub const LEASE_ACK: u16 = 8;
    /// LEASE_EXPIRE.
    pub const LEASE_EXPIRE: u16 = 9;
    /// NODE_JOIN.
    pub const NODE_JOIN: u16 = 10;
    /// NODE_LEAVE.
    pub const NODE_LEAVE: u16 = 11;
    /// NODE_ALIVE.
    pub const NODE_ALIVE: u16 = 12;
    /// JOURNAL_RECOVER.
    pub const JOURNAL_RECOVER: u16 = 13;
    /// JOURNAL_DONE.
    pub const JOURNAL_DONE: u16 = 14;
    /// CACHE_INVAL.
    pub const CACHE_INVAL: u16 = 15;
}

/// Mode NL (null).
pub const MODE_NL: u8 = 0;
/// Mode CR (concurrent read).
pub const MODE_CR: u8 = 1;
/// Mode CW (concurrent write).
pub const MODE_CW: u8 = 2;
/// Mode PR (protected read).
pub const MODE_PR: u8 = 3;
/// Mode PW (protected write).
pub const MODE_PW: u8 = 4;
/// Mode EX (exclusive).
pub const MODE_EX: u8 = 5;
/// Flag: deny instead of queueing when the lock cannot be granted at once.
pub const FLAG_NOQUEUE: u32 = 1 << 0;
/// Flag: convert the requester's existing lock `lock_id` to the new mode.
pub const FLAG_CONVERT: u32 = 1 << 1;
/// Status of a grant.
pub const STATUS_OK: u8 = 0;
/// Deny: NOQUEUE and not grantable now.
pub const STATUS_WOULD_BLOCK: u8 = 1;
/// Deny: a conversion of a lock the requester does not hold.
pub const STATUS_NOT_HELD: u8 = 2;
/// Deny: a conversion that would deadlock with another queued conversion.
pub const STATUS_DEADLOCK: u8 = 3;
/// Deny: the request is malformed for the master's state (e.g. a duplicate lock id).
pub const STATUS_INVALID: u8 = 4;
/// Deny of a granted lock: the master takes it back, its holder having neither downgraded nor
/// released it within the BAST timeout (an extension: the spec has no revocation).
pub const STATUS_REVOKED: u8 = 5;
/// The top bit of a `lock_id`: the lock is held until released and never revoked (see the
/// crate doc).
pub const LOCK_ID_NOREVOKE: u64 = 1 << 63;

/// The decoded `mxfs_dlm_msg_hdr` (magic and version are constants, checked on decode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Message type ([`msg_type`]).
    pub msg_type: u16,
    /// Whole message length, header + payload + trailer.
    pub length: u32,
    /// Sender's sequence number.
    pub seq: u32,
    /// Sender's node id.
    pub sender: u32,
    /// Target node id; 0 for broadcast-originated messages.
    pub target: u32,
    /// Sender's epoch.
    pub epoch: u64,
}

/// The fields of a header the sender chooses (type and length follow from the message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Sender's sequence number.
    pub seq: u32,
    /// Sender's node id.
    pub sender: u32,
    /// Target node id; 0 for broadcast.
    pub target: u32,
    /// Sender's epoch.
    pub epoch: u64,
}

/// LOCK_REQ and LOCK_CONVERT payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockReq {
    /// The requester's lock id.
    pub lock_id: u64,
    /// Requested mode.
    pub mode: u8,
    /// `FLAG_*` bits.
    pub flags: u32,
    /// Resource name bytes.
    pub resource: Vec<u8>,
}

/// LOCK_GRANT and LOCK_DENY payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockResp {
    /// The requester's lock id.
    pub lock_id: u64,
    /// Fencing token of a grant (0 in a deny).
    pub token: u64,
    /// Granted mode (of a deny: the requested one).
    pub mode: u8,
    /// `STATUS_*`.
    pub status: u8,
    /// Resource name bytes.
    pub resource: Vec<u8>,
}

/// LOCK_RELEASE payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockRelease {
    /// The releaser's lock id.
    pub lock_id: u64,
    /// Resource name bytes.
    pub resource: Vec<u8>,
}

/// LOCK_BAST payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bast {
    /// The holder's lock id that blocks a waiter.
    pub lock_id: u64,
    /// The mode the blocked waiter asks for.
    pub mode: u8,
    /// Resource name bytes.
    pub resource: Vec<u8>,
}

/// LEASE_RENEW / LEASE_ACK / LEASE_EXPIRE payload (the crate doc says what each field is in
/// each of the three).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseMsg {
    /// RENEW: how long the sender asks to be taken for alive; ACK: the lease granted (how long
    /// the acknowledging node takes the renewer for alive); EXPIRE: 0.
    pub duration_ms: u64,
    /// RENEW: the sender's granted locks; ACK: the renewer's locks in the acknowledging node's
    /// table (0 at a node that is not its master); EXPIRE: 0.
    pub lock_count: u32,
    /// RENEW: the sender; ACK: the renewer; EXPIRE: the node declared dead.
    pub node: u32,
}

/// NODE_JOIN / NODE_LEAVE payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeMsg {
    /// The node's DLM port.
    pub port: u16,
    /// The node's name bytes.
    pub name: Vec<u8>,
}

/// JOURNAL_RECOVER / JOURNAL_DONE payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalMsg {
    /// The dead node.
    pub node: u32,
    /// Its journal slot.
    pub slot: u32,
}

/// CACHE_INVAL payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheInval {
    /// First byte of the range.
    pub start: u64,
    /// Bytes in the range.
    pub length: u64,
    /// Resource name bytes.
    pub resource: Vec<u8>,
}

/// One message of the spec, by type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// LOCK_REQ.
    LockReq(LockReq),
    /// LOCK_GRANT.
    LockGrant(LockResp),
    /// LOCK_DENY.
    LockDeny(LockResp),
    /// LOCK_RELEASE.
    LockRelease(LockRelease),
    /// LOCK_CONVERT: decoded; mxfsd sends a conversion as LOCK_REQ with [`FLAG_CONVERT`].
    LockConvert(LockReq),
    /// LOCK_BAST.
    LockBast(Bast),
    /// LEASE_RENEW.
    LeaseRenew(LeaseMsg),
    /// LEASE_ACK.
    LeaseAck(LeaseMsg),
    /// LEASE_EXPIRE.
    LeaseExpire(LeaseMsg),
    /// NODE_JOIN.
    NodeJoin(NodeMsg),
    /// NODE_LEAVE.
    NodeLeave(NodeMsg),
    /// NODE_ALIVE: decoded; mxfsd never sends it (LEASE_RENEW carries it).
    NodeAlive,
    /// JOURNAL_RECOVER.
    JournalRecover(JournalMsg),
    /// JOURNAL_DONE.
    JournalDone(JournalMsg),
    /// CACHE_INVAL.
    CacheInval(CacheInval),
}

impl Message {
    /// The type number of this message.
    pub fn msg_type(&self) -> u16 {
        use msg_type::*;
        match self {
            Message::LockReq(_) => LOCK_REQ,
            Message::LockGrant(_) => LOCK_GRANT,
            Message::LockDeny(_) => LOCK_DENY,
            Message::LockRelease(_) => LOCK_RELEASE,
            Message::LockConvert(_) => LOCK_CONVERT,
            Message::LockBast(_) => LOCK_BAST,
            Message::LeaseRenew(_) => LEASE_RENEW,
            Message::LeaseAck(_) => LEASE_ACK,
            Message::LeaseExpire(_) => LEASE_EXPIRE,
            Message::NodeJoin(_) => NODE_JOIN,
            Message::NodeLeave(_) => NODE_LEAVE,
            Message::NodeAlive => NODE_ALIVE,
            Message::JournalRecover(_) => JOURNAL_RECOVER,
            Message::JournalDone(_) => JOURNAL_DONE,
            Message::CacheInval(_) => CACHE_INVAL,
        }
    }

    /// The spec's name of this message's type.
    pub fn name(&self) -> &'static str {
        type_name(self.msg_type()).expect("every message has a known type")
    }
}

/// The spec's name of a type number, `None` when unknown.
pub fn type_name(msg_type: u16) -> Option<&'static str> {
    const NAMES: [&str; 15] = [
        "LOCK_REQ",
        "LOCK_GRANT",
        "LOCK_DENY",
        "LOCK_RELEASE",
        "LOCK_CONVERT",
        "LOCK_BAST",
        "LEASE_RENEW",
        "LEASE_ACK",
        "LEASE_EXPIRE",
        "NODE_JOIN",
        "NODE_LEAVE",
        "NODE_ALIVE",
        "JOURNAL_RECOVER",
        "JOURNAL_DONE",
        "CACHE_INVAL",
    ];
    usize::from(msg_type).checked_sub(1).and_then(|idx| NAMES.get(idx)).copied()
}

/// Why bytes were refused; each variant is a reason the shell logs and counts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than the 32-byte header.
    #[error("short message: {actual} bytes, the header alone is {HEADER_BYTES}")]
    Short {
        /// Bytes present.
        actual: usize,
    },
    /// Magic other than "MXFS".
    #[error("wrong magic {got:#010x}, expected {DLM_MAGIC:#010x}")]
    WrongMagic {
        /// Magic in the header.
        got: u32,
    },
    /// Version other than [`DLM_VERSION`].
    #[error("unknown DLM version {got}, this daemon speaks {DLM_VERSION}")]
    UnknownVersion {
        /// Version in the header.
        got: u16,
    },
    /// Type not in the spec.
    #[error("unknown DLM message type {got}")]
    UnknownType {
        /// Type in the header.
        got: u16,
    },
    /// The header's length cannot hold a header and a trailer.
    #[error("length {announced} is below the minimum {FRAME_BYTES_MIN} (header + trailer)")]
    LengthTooSmall {
        /// Length in the header.
        announced: u32,
    },
    /// The header's length is over [`FRAME_BYTES_MAX`].
    #[error("oversized message: length {announced}, at most {FRAME_BYTES_MAX}")]
    Oversized {
        /// Length in the header.
        announced: u32,
    },
    /// The header's length differs from the bytes given.
    #[error("length mismatch: header says {announced} bytes, {actual} present")]
    LengthMismatch {
        /// Length in the header.
        announced: u32,
        /// Bytes present.
        actual: usize,
    },
    /// The payload does not fit its type's layout.
    #[error("malformed {msg_type} payload: {reason}")]
    Malformed {
        /// The type's name.
        msg_type: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
}

impl Header {
    /// Writes the 32 header bytes.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&DLM_MAGIC.to_be_bytes());
        out.extend_from_slice(&DLM_VERSION.to_be_bytes());
        out.extend_from_slice(&self.msg_type.to_be_bytes());
        out.extend_from_slice(&self.length.to_be_bytes());
        out.extend_from_slice(&self.seq.to_be_bytes());
        out.extend_from_slice(&self.sender.to_be_bytes());
        out.extend_from_slice(&self.target.to_be_bytes());
        out.extend_from_slice(&self.epoch.to_be_bytes());
    }

    /// Parses and checks the header at the start of `bytes`, in this order: short, magic,
    /// version, type, length below the minimum, length over the maximum.
    pub fn parse(bytes: &[u8]) -> Result<Header, DecodeError> {
        let Some(head) = bytes.get(..HEADER_BYTES) else {
            return Err(DecodeError::Short { actual: bytes.len() });
        };
        let mut reader = Reader { bytes: head, msg_type: "header" };
        let magic = reader.u32().expect("32 bytes present");
        let version = reader.u16().expect("32 bytes present");
        let msg_type = reader.u16().expect("32 bytes present");
        let length = reader.u32().expect("32 bytes present");
        let seq = reader.u32().expect("32 bytes present");
        let sender = reader.u32().expect("32 bytes present");
        let target = reader.u32().expect("32 bytes present");
        let epoch = reader.u64().expect("32 bytes present");
        if magic != DLM_MAGIC {
            return Err(DecodeError::WrongMagic { got: magic });
        }
        if version != DLM_VERSION {
            return Err(DecodeError::UnknownVersion { got: version });
        }
        if type_name(msg_type).is_none() {
            return Err(DecodeError::UnknownType { got: msg_type });
        }
        if (length as usize) < FRAME_BYTES_MIN {
            return Err(DecodeError::LengthTooSmall { announced: length });
        }
        if length as usize > FRAME_BYTES_MAX {
            return Err(DecodeError::Oversized { announced: length });
        }
        Ok(Header { msg_type, length, seq, sender, target, epoch })
    }
}

/// Stream framing: `Ok(None)` while `buffer` holds less than a header or less than the
/// header's length; `Ok(Some(n))` when its first `n` bytes are one whole message; an error
/// as soon as the header is refused (before any payload is waited for).
pub fn frame_len(buffer: &[u8]) -> Result<Option<usize>, DecodeError> {
    if buffer.len() < HEADER_BYTES {
        return Ok(None);
    }
    let header = Header::parse(buffer)?;
    let length = header.length as usize;
    Ok((buffer.len() >= length).then_some(length))
}

/// Encodes header and payload, with the header's length counting the [`TRAILER_BYTES`] the
/// caller appends next (the trailer authenticates exactly these bytes).
pub fn encode_unsealed(envelope: Envelope, message: &Message) -> Vec<u8> {
    let mut payload = Vec::with_capacity(PAYLOAD_BYTES_MAX);
    write_payload(message, &mut payload);
    assert!(payload.len() <= PAYLOAD_BYTES_MAX, "payload over the limit: the builder checked the sizes");
    let length = HEADER_BYTES + payload.len() + TRAILER_BYTES;
    let header = Header {
        msg_type: message.msg_type(),
        length: u32::try_from(length).expect("bounded by FRAME_BYTES_MAX"),
        seq: envelope.seq,
        sender: envelope.sender,
        target: envelope.target,
        epoch: envelope.epoch,
    };
    let mut out = Vec::with_capacity(length);
    header.write(&mut out);
    out.extend_from_slice(&payload);
    out
}

/// Encodes a whole message: [`encode_unsealed`] followed by `trailer`.
pub fn encode(envelope: Envelope, message: &Message, trailer: &[u8; TRAILER_BYTES]) -> Vec<u8> {
    let mut out = encode_unsealed(envelope, message);
    out.extend_from_slice(trailer);
    out
}

/// Splits a whole message into the authenticated part (header ‖ payload) and the trailer,
/// after checking the header and that its length is exactly `frame.len()`.
pub fn split_trailer(frame: &[u8]) -> Result<(&[u8], &[u8]), DecodeError> {
    let header = Header::parse(frame)?;
    if header.length as usize != frame.len() {
        return Err(DecodeError::LengthMismatch { announced: header.length, actual: frame.len() });
    }
    Ok(frame.split_at(frame.len() - TRAILER_BYTES))
}

/// Decodes one whole message (header, payload, trailer; the trailer is not interpreted:
/// authenticate `frame` with lava-net's `open_bytes` first).
pub fn decode(frame: &[u8]) -> Result<(Header, Message), DecodeError> {
    let (signed, _trailer) = split_trailer(frame)?;
    let header = Header::parse(signed).expect("checked by split_trailer");
    let payload = &signed[HEADER_BYTES..];
    let message = read_payload(header.msg_type, payload)?;
    Ok((header, message))
}

fn put_resource(out: &mut Vec<u8>, resource: &[u8]) {
    assert!(resource.len() <= RESOURCE_BYTES_MAX, "resource over {RESOURCE_BYTES_MAX} bytes");
    out.extend_from_slice(&(resource.len() as u16).to_be_bytes());
    out.extend_from_slice(resource);
}

fn write_payload(message: &Message, out: &mut Vec<u8>) {
    match message {
        Message::LockReq(req) | Message::LockConvert(req) => {
            out.extend_from_slice(&req.lock_id.to_be_bytes());
            out.extend_from_slice(&[req.mode, 0, 0, 0]);
            out.extend_from_slice(&req.flags.to_be_bytes());
            put_resource(out, &req.resource);
        }
        Message::LockGrant(resp) | Message::LockDeny(resp) => {
            out.extend_from_slice(&resp.lock_id.to_be_bytes());
            out.extend_from_slice(&resp.token.to_be_bytes());
            out.extend_from_slice(&[resp.mode, resp.status, 0, 0]);
            put_resource(out, &resp.resource);
        }
        Message::LockRelease(release) => {
            out.extend_from_slice(&release.lock_id.to_be_bytes());
            put_resource(out, &release.resource);
        }
        Message::LockBast(bast) => {
            out.extend_from_slice(&bast.lock_id.to_be_bytes());
            out.extend_from_slice(&[bast.mode, 0, 0, 0]);
            put_resource(out, &bast.resource);
        }
        Message::LeaseRenew(lease) | Message::LeaseAck(lease) | Message::LeaseExpire(lease) => {
            out.extend_from_slice(&lease.duration_ms.to_be_bytes());
            out.extend_from_slice(&lease.lock_count.to_be_bytes());
            out.extend_from_slice(&lease.node.to_be_bytes());
        }
        Message::NodeJoin(node) | Message::NodeLeave(node) => {
            assert!(node.name.len() <= NODE_NAME_BYTES_MAX, "node name over {NODE_NAME_BYTES_MAX} bytes");
            out.extend_from_slice(&node.port.to_be_bytes());
            out.extend_from_slice(&(node.name.len() as u16).to_be_bytes());
            out.extend_from_slice(&node.name);
        }
        Message::NodeAlive => {}
        Message::JournalRecover(journal) | Message::JournalDone(journal) => {
            out.extend_from_slice(&journal.node.to_be_bytes());
            out.extend_from_slice(&journal.slot.to_be_bytes());
        }
        Message::CacheInval(inval) => {
            out.extend_from_slice(&inval.start.to_be_bytes());
            out.extend_from_slice(&inval.length.to_be_bytes());
            put_resource(out, &inval.resource);
        }
    }
}

/// A bounds-checked big-endian cursor over a payload.
struct Reader<'a> {
    bytes: &'a [u8],
    msg_type: &'static str,
}

impl<'a> Reader<'a> {
    fn malformed(&self, reason: &'static str) -> DecodeError {
        DecodeError::Malformed { msg_type: self.msg_type, reason }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.bytes.len() < n {
            return Err(self.malformed("payload too short for its type"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn zeros(&mut self, n: usize) -> Result<(), DecodeError> {
        if self.take(n)?.iter().any(|byte| *byte != 0) {
            return Err(self.malformed("padding is not zero"));
        }
        Ok(())
    }

    fn bytes_u16(&mut self, max: usize, what: &'static str) -> Result<Vec<u8>, DecodeError> {
        let n = usize::from(self.u16()?);
        if n > max {
            return Err(self.malformed(what));
        }
        Ok(self.take(n)?.to_vec())
    }

    fn resource(&mut self) -> Result<Vec<u8>, DecodeError> {
        self.bytes_u16(RESOURCE_BYTES_MAX, "resource longer than 255 bytes")
    }

    fn finish(self) -> Result<(), DecodeError> {
        if !self.bytes.is_empty() {
            return Err(self.malformed("stray bytes after the payload"));
        }
        Ok(())
    }
}

fn read_payload(msg_type: u16, payload: &[u8]) -> Result<Message, DecodeError> {
    use msg_type::*;
    let name = type_name(msg_type).expect("the header check refused unknown types");
    let mut reader = Reader { bytes: payload, msg_type: name };
    let r = &mut reader;
    let message = match msg_type {
        LOCK_REQ | LOCK_CONVERT => {
            let lock_id = r.u64()?;
            let mode = r.u8()?;
            r.zeros(3)?;
            let flags = r.u32()?;
            let req = LockReq { lock_id, mode, flags, resource: r.resource()? };
            if msg_type == LOCK_REQ { Message::LockReq(req) } else { Message::LockConvert(req) }
        }
        LOCK_GRANT | LOCK_DENY => {
            let lock_id = r.u64()?;
            let token = r.u64()?;
            let mode = r.u8()?;
            let status = r.u8()?;
            r.zeros(2)?;
            let resp = LockResp { lock_id, token, mode, status, resource: r.resource()? };
            if msg_type == LOCK_GRANT { Message::LockGrant(resp) } else { Message::LockDeny(resp) }
        }
        LOCK_RELEASE => Message::LockRelease(LockRelease { lock_id: r.u64()?, resource: r.resource()? }),
        LOCK_BAST => {
            let lock_id = r.u64()?;
            let mode = r.u8()?;
            r.zeros(3)?;
            Message::LockBast(Bast { lock_id, mode, resource: r.resource()? })
        }
        LEASE_RENEW | LEASE_ACK | LEASE_EXPIRE => {
            let lease = LeaseMsg { duration_ms: r.u64()?, lock_count: r.u32()?, node: r.u32()? };
            match msg_type {
                LEASE_RENEW => Message::LeaseRenew(lease),
                LEASE_ACK => Message::LeaseAck(lease),
                _ => Message::LeaseExpire(lease),
            }
        }
        NODE_JOIN | NODE_LEAVE => {
            let port = r.u16()?;
            let name = r.bytes_u16(NODE_NAME_BYTES_MAX, "node name longer than 64 bytes")?;
            let node = NodeMsg { port, name };
            if msg_type == NODE_JOIN { Message::NodeJoin(node) } else { Message::NodeLeave(node) }
        }
        NODE_ALIVE => Message::NodeAlive,
        JOURNAL_RECOVER | JOURNAL_DONE => {
            let journal = JournalMsg { node: r.u32()?, slot: r.u32()? };
            if msg_type == JOURNAL_RECOVER {
                Message::JournalRecover(journal)
            } else {
                Message::JournalDone(journal)
            }
        }
        CACHE_INVAL => {
            Message::CacheInval(CacheInval { start: r.u64()?, length: r.u64()?, resource: r.resource()? })
        }
        _ => unreachable!("type_name accepted only the types above"),
    };
    reader.finish()?;
    Ok(message)
}

#[cfg(test)]
mod tests;
