//! Golden bytes of the DLM protocol between mxfsd daemons: the 32-byte `mxfs_dlm_msg_hdr` in
//! network byte order, the payload of each of the 15 message types, the authentication trailer's
//! place after the payload (inside the header's length), and the stream framing that the header's
//! length drives.
//!
//! The header is byte-exact by the spec (magic, version, type, length, seq, sender, target,
//! epoch at offsets 0, 4, 6, 8, 12, 16, 20, 24), and the payload layouts are the crate's own
//! decision; both are a contract with the other daemons, which may run another build. This codec is
//! written by hand, field by field, so a reordered write, a wrong width or a forgotten pad would
//! still round-trip through its own reader; the goldens below catch it and name the field (one per
//! line, named in its comment). Values are distinct so that swapped fields show, and each golden is
//! decoded back. An exhaustive match over `Message` and a scan of every `u16` type number keep the
//! list complete: a new message type cannot be added without a golden here.

use lava_dlm_wire::*;
use lava_xdr::golden::{assert_bytes, unhex};

/// The envelope of every message below.
const ENVELOPE: Envelope = Envelope { seq: 1001, sender: 3, target: 1, epoch: 0x0000_0007_0000_0009 };

/// The authentication trailer of the sealed messages below: the bytes 0, 1, …, 59 (the codec
/// never looks inside it).
fn trailer() -> [u8; TRAILER_BYTES] {
    std::array::from_fn(|idx| idx as u8)
}

/// Encodes `message` without its trailer, compares with `golden` (header and payload); then
/// decodes the golden bytes followed by a trailer back to the header and the message.
fn check(name: &str, message: Message, golden: &str) {
    assert_eq!(message.name(), name, "the message's spec name");
    assert_bytes(name, &encode_unsealed(ENVELOPE, &message), golden);
    let mut sealed = unhex(golden);
    sealed.extend_from_slice(&trailer());
    let (header, decoded) =
        decode(&sealed).unwrap_or_else(|error| panic!("{name}: the golden message does not decode: {error}"));
    let expected_header = Header {
        msg_type: message.msg_type(),
        length: sealed.len() as u32,
        seq: ENVELOPE.seq,
        sender: ENVELOPE.sender,
        target: ENVELOPE.target,
        epoch: ENVELOPE.epoch,
    };
    assert_eq!(header, expected_header, "{name}: the golden header decodes to another header");
    assert_eq!(decoded, message, "{name}: the golden payload decodes to another message");
}

const LOCK_ID: u64 = 0x1122_3344_5566_7788;

fn inode() -> Vec<u8> {
    b"inode:42".to_vec()
}

/// One message of each type, in the spec's order.
fn samples() -> Vec<Message> {
    let lease = LeaseMsg { duration_ms: 5000, lock_count: 12, node: 3 };
    let journal = JournalMsg { node: 2, slot: 5 };
    vec![
        Message::LockReq(LockReq { lock_id: LOCK_ID, mode: MODE_PR, flags: FLAG_NOQUEUE, resource: inode() }),
        Message::LockGrant(LockResp {
            lock_id: LOCK_ID,
            token: 0x0000_0007_0000_0015,
            mode: MODE_PR,
            status: STATUS_OK,
            resource: inode(),
        }),
        Message::LockDeny(LockResp {
            lock_id: LOCK_ID + 1,
            token: 0,
            mode: MODE_EX,
            status: STATUS_WOULD_BLOCK,
            resource: b"ag:3".to_vec(),
        }),
        Message::LockRelease(LockRelease { lock_id: LOCK_ID, resource: inode() }),
        Message::LockConvert(LockReq {
            lock_id: LOCK_ID,
            mode: MODE_EX,
            flags: FLAG_NOQUEUE | FLAG_CONVERT,
            resource: inode(),
        }),
        Message::LockBast(Bast { lock_id: 0x99AA_BBCC_DDEE_FF00, mode: MODE_PW, resource: inode() }),
        Message::LeaseRenew(lease),
        Message::LeaseAck(lease),
        Message::LeaseExpire(LeaseMsg { duration_ms: 15000, lock_count: 0, node: 2 }),
        Message::NodeJoin(NodeMsg { port: 7600, name: b"node-a".to_vec() }),
        Message::NodeLeave(NodeMsg { port: 7601, name: b"node-bb".to_vec() }),
        Message::NodeAlive,
        Message::JournalRecover(journal),
        Message::JournalDone(journal),
        Message::CacheInval(CacheInval { start: 0x1000, length: 0x1_0000_0000, resource: inode() }),
    ]
}

/// Each message's type number, its spec name and its golden. No wildcard: a new message type
/// does not compile until it is given its number and a golden here.
fn golden_of(message: &Message) -> (u16, &'static str, &'static str) {
    match message {
        Message::LockReq(_) => (1, "LOCK_REQ", LOCK_REQ),
        Message::LockGrant(_) => (2, "LOCK_GRANT", LOCK_GRANT),
        Message::LockDeny(_) => (3, "LOCK_DENY", LOCK_DENY),
        Message::LockRelease(_) => (4, "LOCK_RELEASE", LOCK_RELEASE),
        Message::LockConvert(_) => (5, "LOCK_CONVERT", LOCK_CONVERT),
        Message::LockBast(_) => (6, "LOCK_BAST", LOCK_BAST),
        Message::LeaseRenew(_) => (7, "LEASE_RENEW", LEASE_RENEW),
        Message::LeaseAck(_) => (8, "LEASE_ACK", LEASE_ACK),
        Message::LeaseExpire(_) => (9, "LEASE_EXPIRE", LEASE_EXPIRE),
        Message::NodeJoin(_) => (10, "NODE_JOIN", NODE_JOIN),
        Message::NodeLeave(_) => (11, "NODE_LEAVE", NODE_LEAVE),
        Message::NodeAlive => (12, "NODE_ALIVE", NODE_ALIVE),
        Message::JournalRecover(_) => (13, "JOURNAL_RECOVER", JOURNAL_RECOVER),
        Message::JournalDone(_) => (14, "JOURNAL_DONE", JOURNAL_DONE),
        Message::CacheInval(_) => (15, "CACHE_INVAL", CACHE_INVAL),
    }
}

// Goal: every message type keeps its number (1 to 15 in the order the spec lists them, the
// original implementation's numbering) and its golden bytes, and the codec knows no other type.
// Method: run each sample through the exhaustive match above and its golden; then ask
// `type_name` about every u16 and collect the numbers it knows.
#[test]
fn every_message_type_keeps_its_number_and_its_bytes() {
    let mut pinned = Vec::new();
    for message in samples() {
        let (msg_type, name, golden) = golden_of(&message);
        assert_eq!(message.msg_type(), msg_type, "{name} changed its type number");
        check(name, message, golden);
        pinned.push(msg_type);
    }
    assert_eq!(pinned, (1..=15).collect::<Vec<u16>>(), "the spec lists 15 types, numbered in its order");
    let known: Vec<u16> = (0..=u16::MAX).filter(|msg_type| type_name(*msg_type).is_some()).collect();
    assert_eq!(known, pinned, "the codec knows a type number that has no golden here");
}

// Goal: the header is the spec's `mxfs_dlm_msg_hdr` byte for byte: 32 bytes, network byte
// order, each field at the spec's offset with the spec's width. Method: write a header whose
// every byte says which field it belongs to, compare with the golden, parse it back.
#[test]
fn header() {
    let header = Header {
        msg_type: msg_type::CACHE_INVAL,
        length: 150,
        seq: 0xA1A2_A3A4,
        sender: 0xB1B2_B3B4,
        target: 0xC1C2_C3C4,
        epoch: 0xD1D2_D3D4_D5D6_D7D8,
    };
    let golden = r##"
        4d584653                                    # magic (offset 0, 4 bytes) = "MXFS"
        0001                                        # version (offset 4, 2 bytes) = 1
        000f                                        # type (offset 6, 2 bytes) = 15 (CACHE_INVAL)
        00000096                                    # length (offset 8, 4 bytes) = 150
        a1a2a3a4                                    # seq (offset 12, 4 bytes)
        b1b2b3b4                                    # sender (offset 16, 4 bytes)
        c1c2c3c4                                    # target (offset 20, 4 bytes)
        d1d2d3d4d5d6d7d8                            # epoch (offset 24, 8 bytes)
    "##;
    let mut written = Vec::new();
    header.write(&mut written);
    assert_bytes("mxfs_dlm_msg_hdr", &written, golden);
    assert_eq!(written.len(), HEADER_BYTES);
    assert_eq!((HEADER_BYTES, DLM_MAGIC, DLM_VERSION), (32, 0x4D58_4653, 1));
    assert_eq!(Header::parse(&unhex(golden)), Ok(header));
}

// Goal: the authentication trailer's place: right after the payload, inside the header's
// length, and the codec only splits it off. Method: golden of a whole sealed JOURNAL_DONE;
// `encode` with the trailer must produce it, `split_trailer` must cut it after the payload.
#[test]
fn trailer_follows_the_payload_inside_the_length() {
    let message = Message::JournalDone(JournalMsg { node: 2, slot: 5 });
    let golden = r##"
        4d584653                                    # header.magic = "MXFS"
        0001                                        # header.version = 1 (u16)
        000e                                        # header.type = 14 (JOURNAL_DONE, u16)
        00000064                                    # header.length = 100 (header 32 + payload 8 + trailer 60)
        000003e9                                    # header.seq = 1001
        00000003                                    # header.sender = 3
        00000001                                    # header.target = 1
        0000000700000009                            # header.epoch = 0x700000009
        00000002                                    # payload.node (dead) = 2
        00000005                                    # payload.slot = 5
        000102030405060708090a0b0c0d0e0f            # trailer[0..16]
        101112131415161718191a1b1c1d1e1f            # trailer[16..32]
        202122232425262728292a2b2c2d2e2f            # trailer[32..48]
        303132333435363738393a3b                    # trailer[48..60]
    "##;
    let sealed = encode(ENVELOPE, &message, &trailer());
    assert_bytes("sealed JOURNAL_DONE", &sealed, golden);
    assert_eq!(TRAILER_BYTES, 60);
    let (signed, trailer_bytes) = split_trailer(&sealed).expect("the golden splits");
    assert_bytes("JOURNAL_DONE", signed, JOURNAL_DONE);
    assert_eq!(trailer_bytes, trailer());
    assert_eq!(decode(&sealed).map(|(_header, message)| message), Ok(message));
}

// Goal: stream framing: the header's length alone frames each message on the TCP stream; a
// buffer shorter than a header or than its message yields "not yet", and a bad header is an error
// as soon as the header is complete. Method: `frame_len` over every prefix of two golden messages
// back to back, and over a header with a wrong magic.
#[test]
fn stream_framing_follows_the_header_length() {
    let mut first = unhex(LOCK_REQ);
    first.extend_from_slice(&trailer());
    let mut second = unhex(NODE_ALIVE);
    second.extend_from_slice(&trailer());
    let stream = [first.clone(), second.clone()].concat();
    for end in 0..first.len() {
        assert_eq!(frame_len(&stream[..end]), Ok(None), "a prefix of {end} bytes is not a whole message");
    }
    for end in first.len()..=stream.len() {
        assert_eq!(frame_len(&stream[..end]), Ok(Some(first.len())));
    }
    assert_eq!(frame_len(&second), Ok(Some(HEADER_BYTES + TRAILER_BYTES)));
    let mut bad = second.clone();
    bad[0] = b'X';
    assert_eq!(frame_len(&bad[..HEADER_BYTES]), Err(DecodeError::WrongMagic { got: 0x5858_4653 }));
}

// Goal: the bytes of what mxfsd sends in the cases that have no type of their own: a conversion
// is a LOCK_REQ (type 1) with the CONVERT flag, not a LOCK_CONVERT (type 5); a revocation is a
// LOCK_DENY with status REVOKED (5); a lock held until released has the top bit of its lock id
// set. Method: goldens of the three, decoded back.
#[test]
fn conversion_revocation_and_norevoke_lock_ids() {
    let conversion = Message::LockReq(LockReq {
        lock_id: LOCK_ID,
        mode: MODE_EX,
        flags: FLAG_NOQUEUE | FLAG_CONVERT,
        resource: inode(),
    });
    let revocation = Message::LockDeny(LockResp {
        lock_id: LOCK_ID,
        token: 0,
        mode: MODE_EX,
        status: STATUS_REVOKED,
        resource: inode(),
    });
    let held = Message::LockReq(LockReq {
        lock_id: LOCK_ID_NOREVOKE | LOCK_ID,
        mode: MODE_EX,
        flags: 0,
        resource: inode(),
    });
    assert_eq!((STATUS_REVOKED, LOCK_ID_NOREVOKE), (5, 0x8000_0000_0000_0000));
    check("LOCK_REQ", conversion, CONVERSION_AS_LOCK_REQ);
    check("LOCK_DENY", revocation, REVOCATION);
    check("LOCK_REQ", held, NOREVOKE_LOCK_REQ);
}

// The goldens, one per message type: header (with this file's envelope) then payload, without the
// trailer. Payload integers are big-endian; pads are zero; a resource is a u16 count then its bytes.

const LOCK_REQ: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    0001                                        # header.type = 1 (LOCK_REQ, u16)
    00000076                                    # header.length = 118 (header 32 + payload 26 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    1122334455667788                            # payload.lock_id = 0x1122334455667788
    03                                          # payload.mode (PR) = 3
    000000                                      # payload.pad (3 zero bytes)
    00000001                                    # payload.flags (NOQUEUE) = 1
    0008                                        # payload.resource length = 8 (u16)
    696e6f64653a3432                            # payload.resource = "inode:42"
"##;

const LOCK_GRANT: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    0002                                        # header.type = 2 (LOCK_GRANT, u16)
    0000007a                                    # header.length = 122 (header 32 + payload 30 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    1122334455667788                            # payload.lock_id = 0x1122334455667788
    0000000700000015                            # payload.token (epoch 7, grant 21) = 0x700000015
    03                                          # payload.mode (PR) = 3
    00                                          # payload.status (OK) = 0
    0000                                        # payload.pad (2 zero bytes)
    0008                                        # payload.resource length = 8 (u16)
    696e6f64653a3432                            # payload.resource = "inode:42"
"##;

const LOCK_DENY: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    0003                                        # header.type = 3 (LOCK_DENY, u16)
    00000076                                    # header.length = 118 (header 32 + payload 26 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    1122334455667789                            # payload.lock_id = 0x1122334455667789
    0000000000000000                            # payload.token = 0
    05                                          # payload.mode (EX) = 5
    01                                          # payload.status (WOULD_BLOCK) = 1
    0000                                        # payload.pad (2 zero bytes)
    0004                                        # payload.resource length = 4 (u16)
    61673a33                                    # payload.resource = "ag:3"
"##;

const LOCK_RELEASE: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    0004                                        # header.type = 4 (LOCK_RELEASE, u16)
    0000006e                                    # header.length = 110 (header 32 + payload 18 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    1122334455667788                            # payload.lock_id = 0x1122334455667788
    0008                                        # payload.resource length = 8 (u16)
    696e6f64653a3432                            # payload.resource = "inode:42"
"##;

/// Type 5 keeps its number and the LOCK_REQ payload so that it decodes (lava-dlm-ll takes it as
/// a conversion), but mxfsd no longer sends it: a conversion goes as LOCK_REQ with the CONVERT
/// flag, as the spec has it (`CONVERSION_AS_LOCK_REQ` below pins those bytes).
const LOCK_CONVERT: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    0005                                        # header.type = 5 (LOCK_CONVERT, u16)
    00000076                                    # header.length = 118 (header 32 + payload 26 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    1122334455667788                            # payload.lock_id = 0x1122334455667788
    05                                          # payload.mode (EX) = 5
    000000                                      # payload.pad (3 zero bytes)
    00000003                                    # payload.flags (NOQUEUE | CONVERT) = 3
    0008                                        # payload.resource length = 8 (u16)
    696e6f64653a3432                            # payload.resource = "inode:42"
"##;

const LOCK_BAST: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    0006                                        # header.type = 6 (LOCK_BAST, u16)
    00000072                                    # header.length = 114 (header 32 + payload 22 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    99aabbccddeeff00                            # payload.lock_id (the holder's) = 0x99aabbccddeeff00
    04                                          # payload.mode (PW, requested) = 4
    000000                                      # payload.pad (3 zero bytes)
    0008                                        # payload.resource length = 8 (u16)
    696e6f64653a3432                            # payload.resource = "inode:42"
"##;

const LEASE_RENEW: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    0007                                        # header.type = 7 (LEASE_RENEW, u16)
    0000006c                                    # header.length = 108 (header 32 + payload 16 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    0000000000001388                            # payload.duration_ms = 5000
    0000000c                                    # payload.lock_count = 12
    00000003                                    # payload.node = 3
"##;

const LEASE_ACK: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    0008                                        # header.type = 8 (LEASE_ACK, u16)
    0000006c                                    # header.length = 108 (header 32 + payload 16 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    0000000000001388                            # payload.duration_ms = 5000
    0000000c                                    # payload.lock_count = 12
    00000003                                    # payload.node = 3
"##;

const LEASE_EXPIRE: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    0009                                        # header.type = 9 (LEASE_EXPIRE, u16)
    0000006c                                    # header.length = 108 (header 32 + payload 16 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    0000000000003a98                            # payload.duration_ms = 15000
    00000000                                    # payload.lock_count = 0
    00000002                                    # payload.node = 2
"##;

const NODE_JOIN: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    000a                                        # header.type = 10 (NODE_JOIN, u16)
    00000066                                    # header.length = 102 (header 32 + payload 10 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    1db0                                        # payload.port = 7600
    0006                                        # payload.name length = 6 (u16)
    6e6f64652d61                                # payload.name = "node-a"
"##;

const NODE_LEAVE: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    000b                                        # header.type = 11 (NODE_LEAVE, u16)
    00000067                                    # header.length = 103 (header 32 + payload 11 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    1db1                                        # payload.port = 7601
    0007                                        # payload.name length = 7 (u16)
    6e6f64652d6262                              # payload.name = "node-bb"
"##;

/// Type 12 keeps its number and its empty payload so that such a frame decodes and is counted
/// under its name, but no mxfsd sends it: NODE_ALIVE is carried on LEASE_RENEW (a renewal says
/// its sender is alive), and lava-dlm-ll refuses a NODE_ALIVE frame alone.
const NODE_ALIVE: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    000c                                        # header.type = 12 (NODE_ALIVE, u16)
    0000005c                                    # header.length = 92 (header 32 + payload 0 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    # (no payload)
"##;

const JOURNAL_RECOVER: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    000d                                        # header.type = 13 (JOURNAL_RECOVER, u16)
    00000064                                    # header.length = 100 (header 32 + payload 8 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    00000002                                    # payload.node (dead) = 2
    00000005                                    # payload.slot = 5
"##;

const JOURNAL_DONE: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    000e                                        # header.type = 14 (JOURNAL_DONE, u16)
    00000064                                    # header.length = 100 (header 32 + payload 8 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    00000002                                    # payload.node (dead) = 2
    00000005                                    # payload.slot = 5
"##;

const CACHE_INVAL: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    000f                                        # header.type = 15 (CACHE_INVAL, u16)
    00000076                                    # header.length = 118 (header 32 + payload 26 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    0000000000001000                            # payload.start = 4096
    0000000100000000                            # payload.length = 0x100000000
    0008                                        # payload.resource length = 8 (u16)
    696e6f64653a3432                            # payload.resource = "inode:42"
"##;

const CONVERSION_AS_LOCK_REQ: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    0001                                        # header.type = 1 (LOCK_REQ, u16): not 5
    00000076                                    # header.length = 118 (header 32 + payload 26 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    1122334455667788                            # payload.lock_id = 0x1122334455667788
    05                                          # payload.mode (EX) = 5
    000000                                      # payload.pad (3 zero bytes)
    00000003                                    # payload.flags (NOQUEUE | CONVERT) = 3
    0008                                        # payload.resource length = 8 (u16)
    696e6f64653a3432                            # payload.resource = "inode:42"
"##;

const REVOCATION: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    0003                                        # header.type = 3 (LOCK_DENY, u16)
    0000007a                                    # header.length = 122 (header 32 + payload 30 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    1122334455667788                            # payload.lock_id (the revoked lock) = 0x1122334455667788
    0000000000000000                            # payload.token = 0
    05                                          # payload.mode (EX, the mode held) = 5
    05                                          # payload.status (REVOKED) = 5
    0000                                        # payload.pad (2 zero bytes)
    0008                                        # payload.resource length = 8 (u16)
    696e6f64653a3432                            # payload.resource = "inode:42"
"##;

const NOREVOKE_LOCK_REQ: &str = r##"
    4d584653                                    # header.magic = "MXFS"
    0001                                        # header.version = 1 (u16)
    0001                                        # header.type = 1 (LOCK_REQ, u16)
    00000076                                    # header.length = 118 (header 32 + payload 26 + trailer 60)
    000003e9                                    # header.seq = 1001
    00000003                                    # header.sender = 3
    00000001                                    # header.target = 1
    0000000700000009                            # header.epoch = 0x700000009
    9122334455667788                            # payload.lock_id = NOREVOKE (top bit) | 0x1122334455667788
    05                                          # payload.mode (EX) = 5
    000000                                      # payload.pad (3 zero bytes)
    00000000                                    # payload.flags = 0
    0008                                        # payload.resource length = 8 (u16)
    696e6f64653a3432                            # payload.resource = "inode:42"
"##;
