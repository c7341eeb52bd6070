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
/// recorded, which have format 1's layout. Format 2's snapshots begin with
/// [`SNAPSHOT_FORMAT_2`] and list the administrators' kills (`MbdSnapshot::admin_kills`);
/// a snapshot without the mark is read in format 1's layout, with none. Format 3's stored
/// submissions (in JOB_NEW and in the snapshots' jobs) begin with
/// `lava_batch_ll::SUBMISSION_FORMAT_3` and end with the job's own resource limits; one
/// without the mark is read in format 2's layout, as a submission without limits.
pub const LOG_FORMATS: std::ops::RangeInclusive<u32> = 0..=3;

/// The first word of a snapshot in format 2 or later: no snapshot of format 1 begins with
/// it, since a format 1 snapshot begins with its last job id, at most `MAX_JOBID`'s bound
/// (2147483646). It makes the bytes say their layout wherever they travel (a file, or a
/// snapshot a leader sends to a candidate).
pub const SNAPSHOT_FORMAT_2: u32 = 0xFFFF_0002;

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
    let mut bytes = encode_snapshot_state(state);
    bytes.extend(encode(envs));
    bytes
}

/// The state alone, as a snapshot file begins: the format's mark, then the state (what a
/// candidate's replica log keeps, and a leader sends).
pub fn encode_snapshot_state(state: &lava_mbd::MbdSnapshot) -> Vec<u8> {
    let mut bytes = encode(&SNAPSHOT_FORMAT_2);
    encode_into(state, &mut bytes);
    bytes
}

/// The state of a snapshot file (see [`encode_snapshot`]), without the environments.
pub fn decode_snapshot_state(bytes: &[u8]) -> Result<lava_mbd::MbdSnapshot, lava_xdr::Error> {
    decode_state(bytes).map(|(state, _)| state)
}

/// The state at the start of `bytes`, in the layout its mark names, and the bytes after it.
fn decode_state(bytes: &[u8]) -> Result<(lava_mbd::MbdSnapshot, &[u8]), lava_xdr::Error> {
    match bytes.split_first_chunk::<4>() {
        Some((mark, rest)) if u32::from_be_bytes(*mark) == SNAPSHOT_FORMAT_2 => {
            lava_xdr::from_bytes_prefix(rest, &SNAPSHOT_LIMITS)
        }
        _ => lava_xdr::from_bytes_prefix::<lava_mbd::MbdSnapshotFormat1>(bytes, &SNAPSHOT_LIMITS)
            .map(|(state, rest)| (state.into(), rest)),
    }
}

/// The state and the finished jobs' environments of a snapshot file (see [`encode_snapshot`]).
pub fn decode_snapshot(
    bytes: &[u8],
) -> Result<(lava_mbd::MbdSnapshot, crate::history::FinishedEnvs), lava_xdr::Error> {
    let (state, rest) = decode_state(bytes)?;
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

    /// A state with job 1 running on `h1` and killed by root (an administrator's kill
    /// waiting for its run's end), and job 2 pending.
    fn state_with_an_admin_kill() -> lava_mbd::MbdSnapshot {
        use lava_batch_ll::{HostName, SubmitSpec, UserName};
        use lava_mbd::{Caller, ClientId, Input, Mbd};
        let mut mbd = Mbd::new(crate::journal::tests_support::config()).expect("valid config");
        let host = HostName::parse("test", "h1").expect("host");
        let caller = |name: &str, uid| Caller {
            uid,
            gid: 100,
            user: UserName::parse("test", name).expect("user"),
            host: host.clone(),
        };
        let mut effects = Vec::new();
        mbd.step(1_000, Input::HostRegistered { host: host.clone(), n_cpus: 1 }, &mut effects);
        let request = wire::SubmitRequest {
            command: "sleep 60".into(),
            cwd: "/tmp".into(),
            home_dir: "/home/alice".into(),
            n_slots: 1,
            from_host: "h1".into(),
            ..wire::SubmitRequest::default()
        };
        for low in [1, 2] {
            let spec = Box::new(SubmitSpec::try_from(request.clone()).expect("valid submission"));
            let request_id = wire::RequestId { high: 1, low };
            let submit =
                Input::Submit { client: ClientId(1), request_id, caller: caller("alice", 1000), spec };
            mbd.step(2_000, submit, &mut effects);
        }
        let job = wire::WireJobRef { job_id: 1, array_index: 0 };
        let outcome = wire::NewJobOutcome::Started { pid: 42, pgid: 42, job_status: 0x04 };
        let reply = wire::NewJobReply { job, dispatch_seq: 1, outcome };
        mbd.step(3_000, Input::NewJobReply { host: host.clone(), reply }, &mut effects);
        let request = wire::SignalRequest {
            jobs: vec![job],
            all_jobs: false,
            user: String::new(),
            action: wire::SignalAction::Terminate,
        };
        let kill = Input::Signal {
            client: ClientId(2),
            request_id: wire::RequestId { high: 2, low: 1 },
            caller: caller("root", 0),
            request,
        };
        mbd.step(4_000, kill, &mut effects);
        let state = mbd.snapshot();
        assert_eq!(state.admin_kills.len(), 1, "job 1's kill is root's");
        state
    }

    // Goal: a snapshot says its layout: format 2's begin with their mark and keep the
    // administrators' kills, and a snapshot of format 1 (no mark, no list) still loads,
    // with no administrator's kill and everything else as it was, environments included;
    // a mark followed by what is no state is refused.
    // Method: one state encoded in today's layout, and in format 1's with a serializer of
    // that layout's fields; both decoded.
    #[test]
    fn snapshots_of_format_1_still_load_and_format_2_keeps_the_admin_kills() {
        #[derive(Serialize)]
        struct Format1<'a> {
            last_job_id: u32,
            last_submission: u64,
            jobs: &'a [Box<lava_mbd::Job>],
            retired_requests: &'a [lava_mbd::RetiredRequest],
            control: &'a lava_mbd::ControlSnapshot,
            requeue_kills: &'a [lava_mbd::RequeueKill],
            env_as_previous: &'a [lava_batch_ll::JobRef],
        }
        let state = state_with_an_admin_kill();
        let envs = crate::history::FinishedEnvs::default();
        let bytes = encode_snapshot(&state, &envs);
        assert_eq!(bytes[..4], SNAPSHOT_FORMAT_2.to_be_bytes());
        assert_eq!(decode_snapshot(&bytes).expect("today's layout"), (state.clone(), envs.clone()));
        assert_eq!(decode_snapshot_state(&encode_snapshot_state(&state)).expect("the state alone"), state);

        let old = Format1 {
            last_job_id: state.last_job_id,
            last_submission: state.last_submission,
            jobs: &state.jobs,
            retired_requests: &state.retired_requests,
            control: &state.control,
            requeue_kills: &state.requeue_kills,
            env_as_previous: &state.env_as_previous,
        };
        let mut old_bytes = encode(&old);
        old_bytes.extend(encode(&envs));
        let loaded = decode_snapshot(&old_bytes).expect("format 1's layout");
        let without = lava_mbd::MbdSnapshot { admin_kills: Vec::new(), ..state };
        assert_eq!(loaded, (without, envs));

        let mut bad = SNAPSHOT_FORMAT_2.to_be_bytes().to_vec();
        bad.extend([0, 0, 0]);
        assert!(decode_snapshot(&bad).is_err());
    }
}
