//! The byte side of the shell: limits on what peers and files may make us
//! read, XDR encoding and decoding of messages, events and snapshots, and
//! frame headers.
//!
//! The limits follow one rule: a frame must be able to carry the largest
//! request `lava-batch-ll` accepts (a command of `COMMAND_BYTES_MAX` = 512 KiB
//! plus its environment), and an event record must be able to hold anything a
//! frame carried (JOB_NEW keeps the whole submission). Decoding never
//! allocates beyond these bounds because a length field said so
//! (docs/ARCHITECTURE.md, "One peer's bad input costs only that peer").

use lava_batch_ll::COMMAND_BYTES_MAX;
use lava_batch_wire::{self as wire, BATCH_VERSION};
use lava_mbd::{ClientReply, ToSbd};
use lava_xdr::Limits;
use lava_xdr::frame::{FrameHeader, FrameLimits};
use serde::Serialize;

/// Largest frame body accepted from or sent to any peer: 2 MiB, four times
/// the largest command plus room for its environment and the credential.
pub const FRAME_BYTES_MAX: u32 = 2 << 20;
/// Largest event record of `lsb.events`: 4 MiB, above anything one frame can carry.
pub const EVENT_BYTES_MAX: u32 = 4 << 20;
/// Largest snapshot accepted: the event log's default bound (4 GiB).
pub const SNAPSHOT_BYTES_MAX: u64 = lava_eventlog::SNAPSHOT_BYTES_MAX_DEFAULT;

/// The formats of mbatchd's records this build reads, oldest to current, as lava-eventlog's
/// content version in every segment and snapshot header of `lsb.events` and of a
/// candidate's replica log. Raise the current one with any change to how an event
/// ([`lava_mbd::Event`]), a snapshot ([`encode_snapshot`]) or lava-replog's records
/// encode, and keep reading the older ones only with code that converts them: a build
/// meeting a format it does not read stops at start, naming the file, instead of misreading
/// it (docs/operations.md, "Upgrading"). Format 0 is the files written before the format was
/// recorded, which have format 1's layout.
pub const LOG_FORMATS: std::ops::RangeInclusive<u32> = 0..=1;

/// Frame limits of every connection (the first frame decides what a
/// connection is, so there is one limit for all).
pub const FRAME_LIMITS: FrameLimits = FrameLimits { body_bytes_max: FRAME_BYTES_MAX };

/// XDR limits for message bodies: strings as long as the longest command.
pub const MESSAGE_LIMITS: Limits = Limits {
    input_bytes_max: FRAME_BYTES_MAX as usize,
    string_bytes_max: COMMAND_BYTES_MAX as u32,
    ..Limits::DEFAULT
};

/// XDR limits for event records.
pub const EVENT_LIMITS: Limits = Limits {
    input_bytes_max: EVENT_BYTES_MAX as usize,
    string_bytes_max: COMMAND_BYTES_MAX as u32,
    ..Limits::DEFAULT
};

/// XDR limits for snapshots: our own checksummed file, bounded by its size;
/// it holds one array element per job, so the count is bounded only by the input.
pub const SNAPSHOT_LIMITS: Limits = Limits {
    input_bytes_max: SNAPSHOT_BYTES_MAX as usize,
    string_bytes_max: COMMAND_BYTES_MAX as u32,
    array_elements_max: u32::MAX,
    ..Limits::DEFAULT
};

/// A snapshot file of `lsb.events`: the state ([`lava_mbd::MbdSnapshot`]), then
/// the submission environments of its finished jobs, which the state does not
/// hold, each distinct one once (`history::FinishedEnvs`; `brequeue` reads them
/// back). Recovery
/// decodes the state alone ([`decode_snapshot_state`]), so the environments
/// never reach memory on restart; a file without them (written before they
/// were kept) reads as having none.
pub fn encode_snapshot(state: &lava_mbd::MbdSnapshot, envs: &crate::history::FinishedEnvs) -> Vec<u8> {
    let mut bytes = encode(state);
    bytes.extend(encode(envs));
    bytes
}

/// The state of a snapshot file (see [`encode_snapshot`]), without the environments.
pub fn decode_snapshot_state(bytes: &[u8]) -> Result<lava_mbd::MbdSnapshot, lava_xdr::Error> {
    lava_xdr::from_bytes_prefix(bytes, &SNAPSHOT_LIMITS).map(|(state, _)| state)
}

/// The state and the finished jobs' environments of a snapshot file (see [`encode_snapshot`]).
pub fn decode_snapshot(
    bytes: &[u8],
) -> Result<(lava_mbd::MbdSnapshot, crate::history::FinishedEnvs), lava_xdr::Error> {
    let (state, rest) = lava_xdr::from_bytes_prefix(bytes, &SNAPSHOT_LIMITS)?;
    let envs =
        if rest.is_empty() { Default::default() } else { lava_xdr::from_bytes(rest, &SNAPSHOT_LIMITS)? };
    Ok((state, envs))
}

/// Encodes one of our own values. Our wire and event types use only what the
/// XDR codec supports, so failure is a programmer error.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    lava_xdr::to_bytes(value).expect("the batch wire and event types always encode to XDR")
}

/// Appends the encoding of one of our own values to `out` (see [`encode`]).
pub fn encode_into<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    lava_xdr::serialize_into(value, out).expect("the batch wire and event types always encode to XDR");
}

/// The header of a frame mbatchd sends: the batch version, `status` 0 except
/// in REQUEST_FAILED, where it repeats the error code (LavaLite's reply status).
pub fn header(op: wire::Operation, sequence: u32, status: u32) -> FrameHeader {
    FrameHeader { sequence, operation: op.code(), version: BATCH_VERSION, length: 0, status }
}

/// The body of a message to sbatchd.
pub fn encode_to_sbd(msg: &ToSbd) -> Vec<u8> {
    match msg {
        ToSbd::RegisterAck(ack) => encode(ack),
        ToSbd::NewJob(specs) => encode(specs.as_ref()),
        ToSbd::NewJobReplyAck(ack) | ToSbd::JobExecuteAck(ack) | ToSbd::JobFinishAck(ack) => encode(ack),
        ToSbd::JobSignal(signal) => encode(signal),
    }
}

/// The body of an answer to a command, and the header status that goes with it.
pub fn encode_reply(reply: &ClientReply) -> (Vec<u8>, u32) {
    match reply {
        ClientReply::Submit(reply) => (encode(reply), 0),
        ClientReply::JobQuery(reply) => (encode(reply), 0),
        ClientReply::Signal(reply) => (encode(reply), 0),
        ClientReply::Error(error) => (encode(error), error.code),
        ClientReply::JobControl(reply) => (encode(reply), 0),
        ClientReply::AdminControl(reply) => (encode(reply), 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a submission as large as ll allows fits a frame, and its JOB_NEW
    // fits an event record, so no valid request can be refused by a limit.
    // Method: encode a request with a command of COMMAND_BYTES_MAX bytes and
    // decode it back with MESSAGE_LIMITS.
    #[test]
    fn the_largest_command_fits_a_frame_and_decodes() {
        let request = wire::SubmitRequest {
            command: "x".repeat(COMMAND_BYTES_MAX),
            cwd: "/tmp".into(),
            home_dir: "/home/alice".into(),
            n_slots: 1,
            from_host: "localhost".into(),
            umask: 0o022,
            ..wire::SubmitRequest::default()
        };
        let bytes = encode(&request);
        assert!(bytes.len() < FRAME_BYTES_MAX as usize);
        assert!((FRAME_BYTES_MAX as usize) < EVENT_BYTES_MAX as usize);
        let back: wire::SubmitRequest = lava_xdr::from_bytes(&bytes, &MESSAGE_LIMITS).expect("decodes");
        assert_eq!(back, request);
    }
}
