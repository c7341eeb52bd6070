//! Layout, typed-error and property tests of the codec.

use proptest::prelude::*;

use super::*;

const TRAILER: [u8; TRAILER_BYTES] = [0xAB; TRAILER_BYTES];

fn envelope() -> Envelope {
    Envelope { seq: 7, sender: 2, target: 1, epoch: 0x0102_0304_0506_0708 }
}

fn lock_req() -> Message {
    Message::LockReq(LockReq {
        lock_id: 9,
        mode: MODE_EX,
        flags: FLAG_NOQUEUE,
        resource: b"counter".to_vec(),
    })
}

// Goal: the header is byte-exact as the spec draws it (network byte order, length counting
// header, payload and trailer), and the LOCK_REQ payload has the documented layout.
#[test]
fn header_and_lock_req_are_byte_exact() {
    let bytes = encode(envelope(), &lock_req(), &TRAILER);
    assert_eq!(bytes.len(), 32 + 18 + 7 + 60);
    assert_eq!(
        &bytes[..32],
        &[
            0x4D, 0x58, 0x46, 0x53, 0, 1, 0, 1, 0, 0, 0, 117, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0, 1, 1, 2, 3, 4,
            5, 6, 7, 8
        ]
    );
    assert_eq!(
        &bytes[32..57],
        &[0, 0, 0, 0, 0, 0, 0, 9, 5, 0, 0, 0, 0, 0, 0, 1, 0, 7, b'c', b'o', b'u', b'n', b't', b'e', b'r']
    );
    assert_eq!(&bytes[57..], &TRAILER);
    let (header, message) = decode(&bytes).expect("decodes");
    assert_eq!(
        header,
        Header { msg_type: 1, length: 117, seq: 7, sender: 2, target: 1, epoch: 0x0102_0304_0506_0708 }
    );
    assert_eq!(message, lock_req());
    let (signed, trailer) = split_trailer(&bytes).expect("splits");
    assert_eq!((signed.len(), trailer), (57, &TRAILER[..]));
}

// Goal: every payload size matches the table of the crate doc.
#[test]
fn payload_sizes_match_the_documented_table() {
    let resource = b"r".to_vec();
    let cases: Vec<(Message, usize)> = vec![
        (lock_req(), 18 + 7),
        (
            Message::LockGrant(LockResp {
                lock_id: 1,
                token: 2,
                mode: 3,
                status: 0,
                resource: resource.clone(),
            }),
            23,
        ),
        (
            Message::LockDeny(LockResp {
                lock_id: 1,
                token: 0,
                mode: 3,
                status: 1,
                resource: resource.clone(),
            }),
            23,
        ),
        (Message::LockRelease(LockRelease { lock_id: 1, resource: resource.clone() }), 11),
        (
            Message::LockConvert(LockReq {
                lock_id: 1,
                mode: 1,
                flags: FLAG_CONVERT,
                resource: resource.clone(),
            }),
            19,
        ),
        (Message::LockBast(Bast { lock_id: 1, mode: 5, resource: resource.clone() }), 15),
        (Message::LeaseRenew(LeaseMsg { duration_ms: 1, lock_count: 2, node: 3 }), 16),
        (Message::LeaseAck(LeaseMsg { duration_ms: 1, lock_count: 2, node: 3 }), 16),
        (Message::LeaseExpire(LeaseMsg { duration_ms: 1, lock_count: 2, node: 3 }), 16),
        (Message::NodeJoin(NodeMsg { port: 6883, name: b"h1".to_vec() }), 6),
        (Message::NodeLeave(NodeMsg { port: 6883, name: b"h1".to_vec() }), 6),
        (Message::NodeAlive, 0),
        (Message::JournalRecover(JournalMsg { node: 2, slot: 1 }), 8),
        (Message::JournalDone(JournalMsg { node: 2, slot: 1 }), 8),
        (Message::CacheInval(CacheInval { start: 0, length: 4096, resource }), 19),
    ];
    for (idx, (message, payload_bytes)) in cases.into_iter().enumerate() {
        assert_eq!(usize::from(message.msg_type()), idx + 1, "types are numbered 1..=15 in spec order");
        let bytes = encode(envelope(), &message, &TRAILER);
        assert_eq!(bytes.len(), HEADER_BYTES + payload_bytes + TRAILER_BYTES, "{}", message.name());
        assert_eq!(decode(&bytes).expect("decodes").1, message);
    }
}

// Goal: each malformed shape gets its own typed error, checked in the documented order.
#[test]
fn malformed_messages_are_typed_errors() {
    let good = encode(envelope(), &lock_req(), &TRAILER);
    assert_eq!(decode(&good[..20]), Err(DecodeError::Short { actual: 20 }));
    let mut bad = good.clone();
    bad[0] = 0;
    assert_eq!(decode(&bad), Err(DecodeError::WrongMagic { got: 0x0058_4653 }));
    let mut bad = good.clone();
    bad[5] = 2;
    assert_eq!(decode(&bad), Err(DecodeError::UnknownVersion { got: 2 }));
    let mut bad = good.clone();
    bad[7] = 16;
    assert_eq!(decode(&bad), Err(DecodeError::UnknownType { got: 16 }));
    let mut bad = good.clone();
    bad[7] = 0;
    assert_eq!(decode(&bad), Err(DecodeError::UnknownType { got: 0 }));
    let mut bad = good.clone();
    bad[8..12].copy_from_slice(&40u32.to_be_bytes());
    assert_eq!(decode(&bad), Err(DecodeError::LengthTooSmall { announced: 40 }));
    let mut bad = good.clone();
    bad[8..12].copy_from_slice(&100_000u32.to_be_bytes());
    assert_eq!(decode(&bad), Err(DecodeError::Oversized { announced: 100_000 }));
    assert_eq!(decode(&good[..116]), Err(DecodeError::LengthMismatch { announced: 117, actual: 116 }));
    let mut bad = good.clone();
    bad[41] = 1; // a pad byte after the mode
    assert_eq!(
        decode(&bad),
        Err(DecodeError::Malformed { msg_type: "LOCK_REQ", reason: "padding is not zero" })
    );
    let mut bad = good.clone();
    bad[49] = 8; // resource length 8, 7 bytes present before the trailer
    assert!(matches!(decode(&bad), Err(DecodeError::Malformed { msg_type: "LOCK_REQ", .. })));
    let mut bad = good.clone();
    bad[49] = 6; // resource length 6: one stray byte
    assert_eq!(
        decode(&bad),
        Err(DecodeError::Malformed { msg_type: "LOCK_REQ", reason: "stray bytes after the payload" })
    );
}

// Goal: stream framing waits for a header, refuses a bad header at once, and then waits for
// exactly the announced length.
#[test]
fn stream_framing_follows_the_header_length() {
    let one = encode(envelope(), &lock_req(), &TRAILER);
    let mut stream = one.clone();
    stream.extend_from_slice(&encode(envelope(), &Message::NodeAlive, &TRAILER));
    assert_eq!(frame_len(&stream[..31]), Ok(None));
    assert_eq!(frame_len(&stream[..116]), Ok(None));
    assert_eq!(frame_len(&stream), Ok(Some(117)));
    assert_eq!(frame_len(&stream[117..]), Ok(Some(92)));
    let mut bad = one;
    bad[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(frame_len(&bad[..32]), Err(DecodeError::Oversized { announced: u32::MAX }));
}

fn resources() -> impl Strategy<Value = Vec<u8>> + Clone {
    proptest::collection::vec(any::<u8>(), 0..=RESOURCE_BYTES_MAX)
}

fn messages() -> impl Strategy<Value = Message> {
    let req = (any::<u64>(), any::<u8>(), any::<u32>(), resources())
        .prop_map(|(lock_id, mode, flags, resource)| LockReq { lock_id, mode, flags, resource });
    let resp = (any::<u64>(), any::<u64>(), any::<u8>(), any::<u8>(), resources()).prop_map(
        |(lock_id, token, mode, status, resource)| LockResp { lock_id, token, mode, status, resource },
    );
    let lease = (any::<u64>(), any::<u32>(), any::<u32>())
        .prop_map(|(duration_ms, lock_count, node)| LeaseMsg { duration_ms, lock_count, node });
    let node = (any::<u16>(), proptest::collection::vec(any::<u8>(), 0..=NODE_NAME_BYTES_MAX))
        .prop_map(|(port, name)| NodeMsg { port, name });
    let journal = (any::<u32>(), any::<u32>()).prop_map(|(node, slot)| JournalMsg { node, slot });
    prop_oneof![
        req.clone().prop_map(Message::LockReq),
        resp.clone().prop_map(Message::LockGrant),
        resp.prop_map(Message::LockDeny),
        (any::<u64>(), resources())
            .prop_map(|(lock_id, resource)| Message::LockRelease(LockRelease { lock_id, resource })),
        req.prop_map(Message::LockConvert),
        (any::<u64>(), any::<u8>(), resources())
            .prop_map(|(lock_id, mode, resource)| Message::LockBast(Bast { lock_id, mode, resource })),
        lease.clone().prop_map(Message::LeaseRenew),
        lease.clone().prop_map(Message::LeaseAck),
        lease.prop_map(Message::LeaseExpire),
        node.clone().prop_map(Message::NodeJoin),
        node.prop_map(Message::NodeLeave),
        Just(Message::NodeAlive),
        journal.clone().prop_map(Message::JournalRecover),
        journal.prop_map(Message::JournalDone),
        (any::<u64>(), any::<u64>(), resources()).prop_map(|(start, length, resource)| Message::CacheInval(
            CacheInval { start, length, resource }
        )),
    ]
}

proptest! {
    // Goal: every generated message round-trips with any envelope, and its stated length is
    // the whole encoding.
    #[test]
    fn round_trip(seq in any::<u32>(), sender in any::<u32>(), target in any::<u32>(), epoch in any::<u64>(), message in messages()) {
        let envelope = Envelope { seq, sender, target, epoch };
        let bytes = encode(envelope, &message, &TRAILER);
        prop_assert!(bytes.len() <= FRAME_BYTES_MAX);
        prop_assert_eq!(frame_len(&bytes), Ok(Some(bytes.len())));
        let (header, decoded) = decode(&bytes).expect("an encoded message decodes");
        prop_assert_eq!(header, Header { msg_type: message.msg_type(), length: bytes.len() as u32, seq, sender, target, epoch });
        prop_assert_eq!(decoded, message);
    }

    // Goal: arbitrary bytes are decoded or refused with a typed error, never a panic, and an
    // accepted message re-encodes to the same bytes (one encoding per message).
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..500)) {
        let _ = frame_len(&bytes);
        if let Ok((header, message)) = decode(&bytes) {
            let envelope = Envelope { seq: header.seq, sender: header.sender, target: header.target, epoch: header.epoch };
            let trailer: [u8; TRAILER_BYTES] = bytes[bytes.len() - TRAILER_BYTES..].try_into().expect("60 bytes");
            prop_assert_eq!(encode(envelope, &message, &trailer), bytes);
        }
    }

    // Goal: the same for inputs that pass the header checks, so that every payload decoder
    // sees arbitrary bytes.
    #[test]
    fn plausible_headers_never_panic(msg_type in 1u16..=15, payload in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut bytes = Vec::new();
        let length = (HEADER_BYTES + payload.len() + TRAILER_BYTES) as u32;
        Header { msg_type, length, seq: 1, sender: 1, target: 0, epoch: 1 }.write(&mut bytes);
        bytes.extend_from_slice(&payload);
        bytes.extend_from_slice(&TRAILER);
        match decode(&bytes) {
            Ok((_, message)) => prop_assert_eq!(encode(Envelope { seq: 1, sender: 1, target: 0, epoch: 1 }, &message, &TRAILER), bytes),
            Err(DecodeError::Malformed { .. }) | Err(DecodeError::Oversized { .. }) => {}
            Err(other) => prop_assert!(false, "header was well-formed: {other}"),
        }
    }
}
