//! Crash recovery: torn tails are cut off and reported, damage followed by good data
//! refuses to open with the file and offset, nothing is ever skipped.

mod common;

use std::fs;

use common::{
    NAME, numbered, options, payload, read_all, record_offsets, segment_path, small_segments, write_log,
};
use lava_eventlog::{Error, EventLog, FrameProblem, Position, TornKind};

const N_RECORDS: usize = 5;
const PAYLOAD_BYTES: usize = 20;

fn payloads() -> Vec<Vec<u8>> {
    (0..N_RECORDS).map(|idx| payload(idx, PAYLOAD_BYTES)).collect()
}

/// The bytes of a cleanly closed one-segment log holding `payloads()`.
fn pristine_segment() -> Vec<u8> {
    let dir = tempfile::tempdir().expect("tempdir");
    write_log(dir.path(), &payloads());
    fs::read(segment_path(dir.path(), 1)).expect("read segment")
}

/// A fresh directory whose only file is segment 1 holding `bytes`.
fn dir_with_segment(bytes: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(segment_path(dir.path(), 1), bytes).expect("write segment");
    dir
}

#[test]
fn cutting_the_last_record_at_every_byte_truncates_to_the_previous_record() {
    // Goal: a power cut at any point of the last record's write leaves a log that opens,
    // loses exactly that record, reports the torn bytes, and works afterwards. Method:
    // for every cut point within the last record, write the truncated segment to a fresh
    // directory; open read-only (reports, changes nothing), then as the writer (cuts
    // off), append a new record, replay, reopen and replay again.
    let bytes = pristine_segment();
    let all = payloads();
    let offsets = record_offsets(&all);
    let (last_start, end) = (offsets[N_RECORDS - 1], offsets[N_RECORDS]);
    assert_eq!(bytes.len() as u64, end);
    let survivors = &all[..N_RECORDS - 1];
    for cut in last_start..end {
        let dir = dir_with_segment(&bytes[..cut as usize]);
        let torn_bytes = cut - last_start;
        let expected_kind =
            if torn_bytes < 8 { TornKind::TruncatedHeader } else { TornKind::TruncatedPayload };

        let (reader, report) = EventLog::open_read_only(dir.path(), options()).expect("read-only open");
        assert_eq!(report.next_position, Position(N_RECORDS as u64), "cut {cut}");
        match &report.torn_tail {
            None => assert_eq!(torn_bytes, 0, "cut {cut} must be reported"),
            Some(torn) => {
                assert_eq!(
                    (torn.offset, torn.bytes, torn.kind, torn.truncated),
                    (last_start, torn_bytes, expected_kind, false)
                );
            }
        }
        assert_eq!(read_all(&reader), numbered(1, survivors), "cut {cut}");
        drop(reader);
        assert_eq!(
            fs::metadata(segment_path(dir.path(), 1)).expect("stat").len(),
            cut,
            "read-only never repairs"
        );

        let (log, report) = EventLog::open(dir.path(), options()).expect("writer open");
        assert_eq!(report.next_position, Position(N_RECORDS as u64), "cut {cut}");
        match &report.torn_tail {
            None => assert_eq!(torn_bytes, 0, "cut {cut} must be reported"),
            Some(torn) => {
                assert_eq!(
                    (torn.offset, torn.bytes, torn.kind, torn.truncated),
                    (last_start, torn_bytes, expected_kind, true)
                );
                assert!(torn.to_string().contains(&segment_path(dir.path(), 1).display().to_string()));
            }
        }
        assert_eq!(fs::metadata(segment_path(dir.path(), 1)).expect("stat").len(), last_start);
        let fresh = payload(99, 33);
        assert_eq!(log.append_durable(&fresh).expect("append after repair"), Position(N_RECORDS as u64));
        let mut expected = numbered(1, survivors);
        expected.push((Position(N_RECORDS as u64), fresh));
        assert_eq!(read_all(&log), expected, "cut {cut}");
        log.close().expect("close");

        let (log, report) = EventLog::open(dir.path(), options()).expect("reopen");
        assert_eq!(report.torn_tail, None);
        assert_eq!(read_all(&log), expected, "cut {cut} after reopen");
    }
}

#[test]
fn flipping_any_bit_of_a_middle_record_refuses_to_open_naming_file_and_offset() {
    // Goal: damage to a record that good records follow is never taken for a torn tail
    // and never skipped. Method: flip each bit of the middle record in turn and open the
    // copy, as the writer and read-only; both must fail with the segment's path and the
    // record's offset, and the writer must leave the file untouched.
    let bytes = pristine_segment();
    let offsets = record_offsets(&payloads());
    let middle = N_RECORDS / 2;
    let (start, end) = (offsets[middle], offsets[middle + 1]);
    for bit in start * 8..end * 8 {
        let mut damaged = bytes.clone();
        damaged[(bit / 8) as usize] ^= 1 << (bit % 8);
        let dir = dir_with_segment(&damaged);
        let expected_path = segment_path(dir.path(), 1);
        for read_only in [false, true] {
            let result = if read_only {
                EventLog::open_read_only(dir.path(), options())
            } else {
                EventLog::open(dir.path(), options())
            };
            match result {
                Err(Error::Corrupt { path, offset, next_valid_offset, .. }) => {
                    assert_eq!((path, offset), (expected_path.clone(), start), "bit {bit}");
                    assert_eq!(next_valid_offset, end, "bit {bit}: the next record is the valid data found");
                }
                other => panic!("bit {bit} (read_only {read_only}): expected Corrupt, got {other:?}"),
            }
        }
        assert_eq!(fs::read(&expected_path).expect("read"), damaged, "a refused log is left as it was");
    }
}

#[test]
fn flipping_any_bit_of_the_last_record_is_a_torn_tail() {
    // Goal: damage confined to the last record, with nothing valid after it, is a torn
    // tail: cut off and reported, the records before it kept. Method: flip each bit of
    // the last record in turn, open as the writer, check the report and the replay.
    let bytes = pristine_segment();
    let all = payloads();
    let offsets = record_offsets(&all);
    let (start, end) = (offsets[N_RECORDS - 1], offsets[N_RECORDS]);
    for bit in start * 8..end * 8 {
        let mut damaged = bytes.clone();
        damaged[(bit / 8) as usize] ^= 1 << (bit % 8);
        let dir = dir_with_segment(&damaged);
        let (log, report) = EventLog::open(dir.path(), options()).expect("a torn tail opens");
        let torn = report.torn_tail.expect("the damage is reported");
        assert_eq!((torn.offset, torn.bytes, torn.truncated), (start, end - start, true), "bit {bit}");
        assert!(
            matches!(
                torn.kind,
                TornKind::ChecksumMismatch | TornKind::LengthOverLimit | TornKind::TruncatedPayload
            ),
            "bit {bit}: {:?}",
            torn.kind
        );
        assert_eq!(read_all(&log), numbered(1, &all[..N_RECORDS - 1]), "bit {bit}");
    }
}

#[test]
fn zero_filled_tail_is_torn_and_cut_off() {
    // Goal: zeros after the last record (blocks allocated but never written before a
    // crash) are a torn tail of kind ZeroFill. Method: append 4 KiB of zeros to a clean
    // segment and open it.
    let mut bytes = pristine_segment();
    let clean_bytes = bytes.len() as u64;
    bytes.extend(std::iter::repeat_n(0u8, 4096));
    let dir = dir_with_segment(&bytes);
    let (log, report) = EventLog::open(dir.path(), options()).expect("open");
    let torn = report.torn_tail.expect("zeros are reported");
    assert_eq!((torn.offset, torn.bytes, torn.kind), (clean_bytes, 4096, TornKind::ZeroFill));
    assert_eq!(read_all(&log), numbered(1, &payloads()));
}

#[test]
fn garbage_with_a_valid_record_inside_is_corruption() {
    // Goal: the forward search finds a valid record hidden after junk, wherever it
    // starts. Method: after the clean records, write 5 junk bytes then a valid frame
    // copied from the log, and open.
    let bytes = pristine_segment();
    let offsets = record_offsets(&payloads());
    let mut damaged = bytes.clone();
    damaged.extend_from_slice(b"junk!");
    damaged.extend_from_slice(&bytes[offsets[0] as usize..offsets[1] as usize]);
    let dir = dir_with_segment(&damaged);
    match EventLog::open(dir.path(), options()) {
        Err(Error::Corrupt { offset, next_valid_offset, problem, .. }) => {
            assert_eq!((offset, next_valid_offset), (bytes.len() as u64, bytes.len() as u64 + 5));
            assert_eq!(problem, FrameProblem::LengthOverLimit);
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn damage_in_a_sealed_segment_stops_replay_with_file_and_offset() {
    // Goal: sealed segments are checked when replayed; a damaged or cut record there
    // ends the replay with an error naming the file and offset, after yielding exactly
    // the records before it. Method: write a log over several segments, flip a byte of
    // segment 1's second record, replay; then cut segment 1 short and replay.
    let dir = tempfile::tempdir().expect("tempdir");
    let all: Vec<Vec<u8>> = (0..40).map(|idx| payload(idx, 30)).collect();
    let (log, _) = EventLog::open(dir.path(), small_segments(300)).expect("open");
    for record in &all {
        log.append_durable(record).expect("append");
    }
    log.close().expect("close");
    let first_segment = segment_path(dir.path(), 1);
    let pristine = fs::read(&first_segment).expect("read");
    let second_record = record_offsets(&all[..1])[1];

    let mut damaged = pristine.clone();
    damaged[second_record as usize + 10] ^= 0x40;
    fs::write(&first_segment, &damaged).expect("write");
    let (log, report) =
        EventLog::open(dir.path(), small_segments(300)).expect("only the last segment is scanned");
    assert_eq!(report.torn_tail, None);
    let results: Vec<_> = log.replay_from(Position::FIRST).expect("replay").collect();
    assert_eq!(results.len(), 2, "one record, then the error, then nothing");
    assert_eq!(results[0].as_ref().expect("first record is good"), &(Position(1), all[0].clone()));
    match &results[1] {
        Err(Error::BadRecord { path, offset, problem }) => {
            assert_eq!(
                (path, *offset, *problem),
                (&first_segment, second_record, FrameProblem::ChecksumMismatch)
            );
        }
        other => panic!("expected BadRecord, got {other:?}"),
    }
    drop(log);

    fs::write(&first_segment, &pristine[..pristine.len() - 3]).expect("write");
    let (log, _) = EventLog::open(dir.path(), small_segments(300)).expect("open");
    let last = log.replay_from(Position::FIRST).expect("replay").last().expect("something");
    assert!(
        matches!(&last, Err(Error::BadRecord { path, problem: FrameProblem::TruncatedPayload, .. }) if *path == first_segment),
        "{last:?}"
    );
}

#[test]
fn a_missing_or_foreign_segment_refuses_to_open() {
    // Goal: segments that do not form one log are refused, naming the file. Method:
    // remove a middle segment; then put a segment of another log in its place.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = EventLog::open(dir.path(), small_segments(300)).expect("open");
    for idx in 0..40 {
        log.append_durable(&payload(idx, 30)).expect("append");
    }
    log.close().expect("close");
    let second = segment_path(dir.path(), 2);
    let saved = fs::read(&second).expect("read");
    fs::remove_file(&second).expect("remove");
    match EventLog::open(dir.path(), small_segments(300)) {
        Err(Error::Inconsistent { path, reason }) => {
            assert_eq!(path, segment_path(dir.path(), 3));
            assert!(reason.contains("segment 2 is missing"), "{reason}");
        }
        other => panic!("expected Inconsistent, got {other:?}"),
    }

    let other_dir = tempfile::tempdir().expect("tempdir");
    let (other, _) = EventLog::open(other_dir.path(), small_segments(300)).expect("open");
    for idx in 0..40 {
        other.append_durable(&payload(idx, 30)).expect("append");
    }
    other.close().expect("close");
    fs::copy(segment_path(other_dir.path(), 2), &second).expect("copy");
    assert!(matches!(
        EventLog::open(dir.path(), small_segments(300)),
        Err(Error::ForeignFile { path, .. }) if path == second
    ));
    fs::write(&second, saved).expect("restore");
    EventLog::open(dir.path(), small_segments(300)).expect("the restored log opens");
}

#[test]
fn leftover_temporary_files_are_removed_and_reported() {
    // Goal: a crash while creating a segment or snapshot leaves only a `.tmp` file, which
    // the next writer removes and reports, and a reader ignores. Method: plant two
    // temporary files next to a log and open it both ways.
    let dir = tempfile::tempdir().expect("tempdir");
    write_log(dir.path(), &payloads());
    let segment_temp = dir.path().join(format!("{NAME}.000002.tmp"));
    let snapshot_temp = dir.path().join(format!("{NAME}.snapshot.00000000000000000003.tmp"));
    fs::write(&segment_temp, b"half a header").expect("write");
    fs::write(&snapshot_temp, b"").expect("write");
    let (_reader, report) = EventLog::open_read_only(dir.path(), options()).expect("read-only open");
    assert!(report.removed_temp_files.is_empty());
    let (log, report) = EventLog::open(dir.path(), options()).expect("open");
    assert_eq!(report.removed_temp_files, vec![segment_temp.clone(), snapshot_temp.clone()]);
    assert!(!segment_temp.exists() && !snapshot_temp.exists());
    assert_eq!(read_all(&log), numbered(1, &payloads()));
}

#[test]
fn a_crashed_writers_preallocated_space_is_a_zero_fill_tail() {
    // Goal: the image a writer leaves when it dies (durable records followed by its
    // preallocated zeros, with or without a half-written record in them) opens with a
    // reported torn tail and every durable record; a reader of the live log sees the
    // same without changing anything. Method: copy the live writer's segment (the page
    // cache view a crash leaves) into fresh directories, once as is and once with half
    // a record written into the zeros, and open the copies; open the live log read-only.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = EventLog::open(dir.path(), options()).expect("open");
    let all = payloads();
    for record in &all {
        log.append_durable(record).expect("append");
    }
    let live = fs::read(segment_path(dir.path(), 1)).expect("read");
    let end = record_offsets(&all)[N_RECORDS];
    let zeros = live.len() as u64 - end;
    assert!(zeros > 0 && live[end as usize..].iter().all(|&byte| byte == 0), "space is preallocated");

    let (reader, report) = EventLog::open_read_only(dir.path(), options()).expect("reader of a live log");
    let torn = report.torn_tail.expect("the zeros are reported");
    assert_eq!((torn.offset, torn.bytes, torn.kind, torn.truncated), (end, zeros, TornKind::ZeroFill, false));
    assert_eq!(read_all(&reader), numbered(1, &all));

    let crashed = dir_with_segment(&live);
    let (log_copy, report) = EventLog::open(crashed.path(), options()).expect("open the crash image");
    let torn = report.torn_tail.expect("the zeros are reported");
    assert_eq!((torn.offset, torn.bytes, torn.kind, torn.truncated), (end, zeros, TornKind::ZeroFill, true));
    assert_eq!(read_all(&log_copy), numbered(1, &all));

    let mut half_written = live.clone();
    let extra = payload(77, 100);
    half_written[end as usize..end as usize + 4].copy_from_slice(&(extra.len() as u32).to_le_bytes());
    half_written[end as usize + 8..end as usize + 58].copy_from_slice(&extra[..50]);
    let crashed = dir_with_segment(&half_written);
    let (log_copy, report) = EventLog::open(crashed.path(), options()).expect("open the crash image");
    let torn = report.torn_tail.expect("the half record is reported");
    assert_eq!((torn.offset, torn.bytes, torn.kind), (end, zeros, TornKind::ChecksumMismatch));
    assert_eq!(read_all(&log_copy), numbered(1, &all));
    log.close().expect("close");
    assert_eq!(
        fs::metadata(segment_path(dir.path(), 1)).expect("stat").len(),
        end,
        "close cuts the zeros off"
    );
}
