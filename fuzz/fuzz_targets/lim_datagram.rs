//! Fuzz target: arbitrary bytes as a received LIM datagram, through the same two steps as
//! lim's receive path: lava-lim-wire's `decode_datagram`, then lava-lim-ll's validation.
//!
//! Beyond "never panics", it checks what lim relies on: a datagram that decodes is exactly
//! one the encoder produces (same bytes back but for the ignored `reserved` header word, so
//! the layout has one encoding), its size is
//! the operation's fixed size, and a message that passes validation maps back to the same
//! wire message (up to the unused `li` slots, which validation zeroes).
#![no_main]

use lava_lim_ll::{Context, Message as LlMessage};
use lava_lim_wire::{self as wire, Message, decode_datagram, encode_datagram};
use libfuzzer_sys::fuzz_target;

const CONTEXT: Context<'static> = Context { cluster: "lavacore", n_hosts: 3 };

fuzz_target!(|data: &[u8]| {
    let Ok(datagram) = decode_datagram(data) else {
        return;
    };
    // The header's `reserved` word is ignored on receipt (future flags) and sent as 0.
    let mut canonical = data.to_vec();
    canonical[16..20].fill(0);
    assert_eq!(encode_datagram(datagram.sequence, &datagram.message), canonical, "one encoding per datagram");
    let expected = lava_xdr::frame::HEADER_BYTES
        + match datagram.message {
            Message::Beacon(_) => wire::BEACON_PAYLOAD_BYTES,
            Message::LoadReport(_) => wire::LOAD_REPORT_PAYLOAD_BYTES,
        };
    assert_eq!(data.len(), expected);
    let Ok(validated) = LlMessage::from_wire(&datagram.message, CONTEXT) else {
        return;
    };
    match (&validated, &datagram.message) {
        (LlMessage::Beacon(beacon), Message::Beacon(original)) => {
            assert!(beacon.host_idx < CONTEXT.n_hosts);
            assert_eq!(beacon.cluster, CONTEXT.cluster);
            assert_eq!(beacon.to_wire().as_ref(), Some(original), "a valid beacon maps back unchanged");
        }
        (LlMessage::LoadReport(report), Message::LoadReport(original)) => {
            assert!(report.host_idx < CONTEXT.n_hosts);
            let n_valid = usize::from(report.load.n_valid);
            assert!(n_valid <= wire::LIM_NIDX);
            assert!(report.load.values[..n_valid].iter().all(|v| v.is_finite() && *v >= 0.0));
            let back = report.to_wire();
            assert_eq!(
                (back.host_no, back.seq_no, back.status0, back.nidx),
                (original.host_no, original.seq_no, original.status0, original.nidx)
            );
            assert_eq!(back.li[..n_valid], original.li[..n_valid]);
            assert!(back.li[n_valid..].iter().all(|v| *v == 0.0));
        }
        _ => panic!("validation changed the operation"),
    }
});
