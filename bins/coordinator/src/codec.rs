//! The byte side of the shell: limits on what peers and files may make us
//! read, and XDR encoding of events and snapshots. A frame must carry the
//! largest payload the coordinator accepts plus the authentication trailer;
//! an event record must hold anything a frame carried.

use lava_coord_ll::PAYLOAD_BYTES_MAX_DEFAULT;
use lava_coord_logic::CoordSnapshot;
use lava_xdr::Limits;
use lava_xdr::frame::FrameLimits;
use serde::Serialize;

/// Largest payload `--payload-bytes-max` may set: 4 MiB.
pub const PAYLOAD_BYTES_MAX_LIMIT: u32 = 4 << 20;
/// Largest frame body accepted from or sent to any peer: the largest payload
/// plus room for the rest of the message and the 60-byte trailer.
pub const FRAME_BYTES_MAX: u32 = PAYLOAD_BYTES_MAX_LIMIT + (64 << 10);
/// Largest WAL record: above anything a frame can carry.
pub const EVENT_BYTES_MAX: u32 = FRAME_BYTES_MAX + (64 << 10);
/// Largest snapshot accepted: the event log's default bound (4 GiB).
pub const SNAPSHOT_BYTES_MAX: u64 = lava_eventlog::SNAPSHOT_BYTES_MAX_DEFAULT;

/// The formats of the coordinator's records this build reads, oldest to current, as
/// lava-eventlog's content version in every segment and snapshot header of the WAL and of a
/// candidate's replica log. Raise the current one with any change to how an event, a
/// snapshot ([`CoordSnapshot`]) or lava-replog's records encode, and keep reading older
/// ones only with code that converts them: a build meeting a format it does not read stops
/// at start, naming the file (docs/operations.md, "Upgrading"). Format 0 is the files
/// written before the format was recorded, which have format 1's layout.
pub const LOG_FORMATS: std::ops::RangeInclusive<u32> = 0..=1;

/// Frame limits of every connection.
pub const FRAME_LIMITS: FrameLimits = FrameLimits { body_bytes_max: FRAME_BYTES_MAX };

/// XDR limits for message bodies.
pub const MESSAGE_LIMITS: Limits = Limits {
    input_bytes_max: FRAME_BYTES_MAX as usize,
    opaque_bytes_max: PAYLOAD_BYTES_MAX_LIMIT,
    ..Limits::DEFAULT
};

/// XDR limits for WAL records.
pub const EVENT_LIMITS: Limits = Limits {
    input_bytes_max: EVENT_BYTES_MAX as usize,
    opaque_bytes_max: PAYLOAD_BYTES_MAX_LIMIT,
    ..Limits::DEFAULT
};

/// XDR limits for snapshots: our own checksummed file, one element per task.
pub const SNAPSHOT_LIMITS: Limits = Limits {
    input_bytes_max: SNAPSHOT_BYTES_MAX as usize,
    opaque_bytes_max: PAYLOAD_BYTES_MAX_LIMIT,
    array_elements_max: u32::MAX,
    ..Limits::DEFAULT
};

const _: () = assert!(PAYLOAD_BYTES_MAX_DEFAULT <= PAYLOAD_BYTES_MAX_LIMIT);

/// A snapshot as written before submission ids (2026-11-28): no `submissions` list.
#[derive(serde::Deserialize)]
struct SnapshotWithoutSubmissions {
    last_task_id: u64,
    last_lease_id: u64,
    tasks: Vec<lava_coord_logic::Task>,
}

/// Decodes a snapshot (a WAL's or a replica log's) within [`SNAPSHOT_LIMITS`]: the current
/// layout, else the layout written before submission ids, read with an empty window.
pub fn decode_snapshot(bytes: &[u8]) -> Result<CoordSnapshot, lava_xdr::Error> {
    lava_xdr::from_bytes::<CoordSnapshot>(bytes, &SNAPSHOT_LIMITS).or_else(
        |error| match lava_xdr::from_bytes::<SnapshotWithoutSubmissions>(bytes, &SNAPSHOT_LIMITS) {
            Ok(old) => Ok(CoordSnapshot {
                last_task_id: old.last_task_id,
                last_lease_id: old.last_lease_id,
                tasks: old.tasks,
                submissions: Vec::new(),
            }),
            Err(_) => Err(error),
        },
    )
}

/// Encodes one of our own values; our types only use what XDR supports.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    lava_xdr::to_bytes(value).expect("coordinator events and snapshots always encode to XDR")
}

/// Appends the encoding of one of our own values to `out` (see [`encode`]).
pub fn encode_into<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) {
    lava_xdr::serialize_into(value, out).expect("coordinator events and snapshots always encode to XDR");
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a snapshot written before submission ids (no window list) still loads, with an
    // empty window, and today's layout round-trips with its list; bytes that are neither
    // are refused with the current layout's error.
    #[test]
    fn snapshots_without_submission_ids_still_load() {
        #[derive(serde::Serialize)]
        struct Before {
            last_task_id: u64,
            last_lease_id: u64,
            tasks: Vec<lava_coord_logic::Task>,
        }
        let mut coord = lava_coord_logic::Coord::new(lava_coord_logic::CoordConfig::default());
        let caller =
            lava_coord_ll::Caller { uid: 7, user: lava_coord_ll::UserName::parse("u").expect("a name") };
        let submission = lava_coord_ll::SubmissionId::new(lava_coord_wire::SubmissionId { high: 1, low: 2 })
            .expect("non-zero");
        let payload = lava_coord_ll::Payload::new(vec![1], &lava_coord_ll::Limits::default()).expect("small");
        let input = lava_coord_logic::Input::Request {
            client: lava_coord_logic::ClientId(1),
            caller,
            request: lava_coord_ll::Request::SubmitOnce { submission, payload },
        };
        coord.step(1_000, input, &mut Vec::new());
        let now = coord.snapshot();
        assert_eq!(now.submissions.len(), 1);
        assert_eq!(decode_snapshot(&encode(&now)).expect("today's layout"), now);
        let before = Before { last_task_id: 1, last_lease_id: 0, tasks: now.tasks.clone() };
        let loaded = decode_snapshot(&encode(&before)).expect("the layout before submission ids");
        assert_eq!(loaded, CoordSnapshot { submissions: Vec::new(), ..now });
        assert!(decode_snapshot(&[0, 0, 0]).is_err());
    }
}
