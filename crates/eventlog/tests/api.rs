//! The public API: group commit under many threads, rotation, snapshots and pruning,
//! the writer lock, reopening, limits and I/O errors.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::sync::Arc;

use common::{NAME, numbered, options, payload, read_all, read_from, segment_path, small_segments};
use lava_eventlog::{Error, EventLog, Options, Position};

#[test]
fn many_threads_appending_durably_get_every_record_replayed_once_in_order() {
    // Goal: concurrent appenders sharing fsyncs (and rotations) lose, duplicate and
    // reorder nothing. Method: 16 threads each append_durable 150 tagged records into a
    // log with small segments; every returned position must be distinct, each thread's
    // positions increasing, and replay (before and after reopening) must yield exactly
    // the returned (position, payload) pairs in position order.
    const N_THREADS: usize = 16;
    const N_PER_THREAD: usize = 150;
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = EventLog::open(dir.path(), small_segments(4096)).expect("open");
    let log = Arc::new(log);
    let handles: Vec<_> = (0..N_THREADS)
        .map(|thread_idx| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                (0..N_PER_THREAD)
                    .map(|idx| {
                        let record = format!("thread {thread_idx} record {idx}").into_bytes();
                        (log.append_durable(&record).expect("append_durable"), record)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut expected = Vec::new();
    for handle in handles {
        let written = handle.join().expect("appender thread");
        assert!(written.windows(2).all(|pair| pair[0].0 < pair[1].0), "one thread's positions increase");
        expected.extend(written);
    }
    expected.sort();
    let positions: BTreeSet<Position> = expected.iter().map(|(position, _)| *position).collect();
    assert_eq!(positions.len(), N_THREADS * N_PER_THREAD, "no position handed out twice");
    assert_eq!(
        expected.last().map(|(position, _)| *position),
        Some(Position((N_THREADS * N_PER_THREAD) as u64))
    );

    let stats = log.stats();
    assert_eq!(stats.n_appends, (N_THREADS * N_PER_THREAD) as u64);
    assert!(stats.n_fsyncs <= stats.n_appends + 64, "{stats:?}");
    assert_eq!(read_all(&log), expected);
    let log = Arc::into_inner(log).expect("the threads are done");
    log.close().expect("close");
    let (log, report) = EventLog::open(dir.path(), small_segments(4096)).expect("reopen");
    assert!(report.n_segments > 1, "the small segments rotated");
    assert_eq!(read_all(&log), expected);
}

#[test]
fn appends_flushes_replays_snapshots_and_prunes_can_run_at_once() {
    // Goal: the rare paths (appends held back by a full buffer, replays and prunes that
    // take the files between rounds) neither deadlock nor lose records while durable
    // appends run. Method: 8 threads alternate plain and durable appends with a 256-byte
    // buffer and 512-byte segments, while another thread replays, snapshots and prunes
    // in a loop; at the end every record after the last snapshot must replay in order.
    const N_THREADS: usize = 8;
    const N_PER_THREAD: usize = 100;
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options { buffer_bytes_max: 256, ..small_segments(512) };
    let log = Arc::new(EventLog::open(dir.path(), opts).expect("open").0);
    let appenders: Vec<_> = (0..N_THREADS)
        .map(|thread_idx| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut written = Vec::new();
                for idx in 0..N_PER_THREAD {
                    let record = format!("thread {thread_idx} record {idx}").into_bytes();
                    let position = if idx % 2 == 0 {
                        log.append(&record).expect("append")
                    } else {
                        log.append_durable(&record).expect("append_durable")
                    };
                    written.push((position, record));
                }
                log.sync().expect("sync");
                written
            })
        })
        .collect();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let maintainer = {
        let (log, done) = (Arc::clone(&log), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut n_rounds = 0;
            while !done.load(std::sync::atomic::Ordering::Acquire) || n_rounds == 0 {
                let replay = log.replay().expect("replay");
                let first =
                    replay.snapshot.as_ref().map_or(Position::FIRST, |snapshot| snapshot.position.next());
                let records: Vec<_> = replay.records.collect::<Result<_, _>>().expect("records");
                assert!(
                    records.iter().enumerate().all(|(idx, (position, _))| position.0 == first.0 + idx as u64)
                );
                if let Some((last, _)) = records.last() {
                    log.write_snapshot(*last, b"state").expect("snapshot");
                    log.prune().expect("prune");
                }
                n_rounds += 1;
            }
        })
    };
    let mut expected = Vec::new();
    for appender in appenders {
        expected.extend(appender.join().expect("appender thread"));
    }
    done.store(true, std::sync::atomic::Ordering::Release);
    maintainer.join().expect("maintainer thread");
    expected.sort();
    assert_eq!(expected.len(), N_THREADS * N_PER_THREAD);
    let replay = log.replay().expect("replay");
    let first = replay.snapshot.map_or(1, |snapshot| snapshot.position.0 + 1);
    let records: Vec<_> = replay.records.collect::<Result<_, _>>().expect("records");
    assert_eq!(records, expected[first as usize - 1..].to_vec());
}

#[test]
fn one_fsync_covers_everything_buffered() {
    // Goal: waiting on the last of many buffered appends costs one fsync, and earlier
    // positions are durable with it. Method: append 100 records, wait on the last, check
    // the fsync count, then wait on an earlier one (no new fsync).
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = EventLog::open(dir.path(), options()).expect("open");
    let positions: Vec<Position> =
        (0..100).map(|idx| log.append(&payload(idx, 50)).expect("append")).collect();
    assert_eq!(log.stats().durable_end, Position::FIRST);
    log.wait_durable(positions[99]).expect("wait");
    log.wait_durable(positions[3]).expect("wait");
    let stats = log.stats();
    assert_eq!((stats.n_fsyncs, stats.durable_end), (1, Position(101)));
    assert!(matches!(
        log.wait_durable(Position(101)),
        Err(Error::NotAppended { position: Position(101), next: Position(101) })
    ));
    log.wait_durable(Position(0)).expect("position 0 is always durable");
}

#[test]
fn write_out_puts_buffered_records_in_the_file_without_an_fsync() {
    // Goal: `write_out` writes what is buffered to the file, where a reader (and the next
    // start after the process dies) finds it, without an fsync and without making it
    // durable; a later durable wait fsyncs it although nothing is left to write. Method:
    // append, write out, read the folder with a read-only log, then wait durable.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = EventLog::open(dir.path(), options()).expect("open");
    assert!(!log.write_out().expect("nothing buffered"), "nothing to write");
    let positions: Vec<Position> = (0..5).map(|idx| log.append(&payload(idx, 50)).expect("append")).collect();
    assert!(log.write_out().expect("write out"));
    assert!(!log.write_out().expect("write out again"), "written already");
    let stats = log.stats();
    assert_eq!((stats.n_fsyncs, stats.durable_end), (0, Position::FIRST), "written, not durable");
    let (reader, _) = EventLog::open_read_only(dir.path(), options()).expect("open read-only");
    assert_eq!(read_all(&reader).len(), 5, "a reader sees the written records");
    log.wait_durable(positions[4]).expect("wait");
    let stats = log.stats();
    assert_eq!((stats.n_fsyncs, stats.durable_end), (1, Position(6)), "the fsync covers what was written");
}

#[test]
fn rotation_spreads_records_over_segments_and_replay_crosses_them() {
    // Goal: segments rotate at the size limit, carry their first position, and replay
    // from any position crosses segment boundaries; a reopened log continues the
    // numbering. Method: append 60 records durably one by one into 300-byte segments,
    // check the files, replay from several positions, reopen, append, replay all.
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = small_segments(300);
    let all: Vec<Vec<u8>> = (0..60).map(|idx| payload(idx, 40)).collect();
    let (log, _) = EventLog::open(dir.path(), opts.clone()).expect("open");
    for record in &all {
        log.append_durable(record).expect("append");
    }
    // 64-byte header + 48-byte records: five records reach 304 >= 300, so each segment
    // holds five records and segment n starts at position 5n - 4.
    for number in 1..=12u64 {
        let bytes = fs::read(segment_path(dir.path(), number)).expect("segment exists");
        assert_eq!(bytes.len(), 64 + 5 * 48, "segment {number}");
        assert_eq!(u64::from_le_bytes(bytes[40..48].try_into().expect("8 bytes")), 5 * number - 4);
    }
    assert!(!segment_path(dir.path(), 13).exists());
    for from in [1u64, 5, 6, 7, 30, 59, 60, 61] {
        assert_eq!(read_from(&log, Position(from)), numbered(from, &all[from as usize - 1..]), "from {from}");
    }
    assert!(matches!(log.replay_from(Position(62)), Err(Error::NotAppended { .. })));
    log.close().expect("close");

    let (log, report) = EventLog::open(dir.path(), opts).expect("reopen");
    assert_eq!((report.n_segments, report.next_position), (12, Position(61)));
    assert_eq!(log.append_durable(b"after reopen").expect("append"), Position(61));
    assert!(segment_path(dir.path(), 13).exists(), "the full segment was sealed before this record");
    let mut expected = numbered(1, &all);
    expected.push((Position(61), b"after reopen".to_vec()));
    assert_eq!(read_all(&log), expected);
}

#[test]
fn replay_after_reads_on_where_an_earlier_replay_stopped_across_appends_and_rotation() {
    // Goal: a follower of the log (mbatchd's lsb.events view) reads each record once: a
    // replay resumed at the point where the previous one stopped yields exactly the
    // records appended since, also when the segment it stopped in has been sealed and
    // others started. Method: 300-byte segments (five 48-byte records each); append in
    // bursts of 1, 3, 7 and 13 records, after each burst resume the previous replay and
    // compare with the burst; a point from a replay of position 1 resumes a fresh one too.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = EventLog::open(dir.path(), small_segments(300)).expect("open");
    let all: Vec<Vec<u8>> = (0..24).map(|idx| payload(idx, 40)).collect();
    let mut point = None;
    let mut next = 0usize;
    for burst in [1usize, 3, 7, 13] {
        for record in &all[next..next + burst] {
            log.append_durable(record).expect("append");
        }
        let mut records = match point {
            Some(point) => log.replay_after(point).expect("resume"),
            None => log.replay_from(Position::FIRST).expect("replay"),
        };
        let got: Vec<(Position, Vec<u8>)> =
            records.by_ref().map(|record| record.expect("a record")).collect();
        assert_eq!(got, numbered(next as u64 + 1, &all[next..next + burst]), "burst of {burst}");
        next += burst;
        point = records.resume_point();
        assert_eq!(point.map(|point| point.position), Some(Position(next as u64 + 1)));
    }
    // Nothing new: an empty replay that still knows where it stands.
    let mut records = log.replay_after(point.expect("a point")).expect("resume");
    assert_eq!(records.next().map(|record| record.is_ok()), None);
}

#[test]
fn snapshot_then_prune_then_replay_from_the_snapshot() {
    // Goal: replay hands over the newest snapshot then only the records after it; prune
    // removes exactly the segments and snapshots the newest snapshot makes useless; all
    // of it survives a reopen. Method: 60 records in 5-record segments, snapshots at 23
    // and 42, replay, prune, check files and errors, reopen and replay again.
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = small_segments(300);
    let all: Vec<Vec<u8>> = (0..60).map(|idx| payload(idx, 40)).collect();
    let (log, _) = EventLog::open(dir.path(), opts.clone()).expect("open");
    for record in &all {
        log.append_durable(record).expect("append");
    }
    log.write_snapshot(Position(23), b"state after 23").expect("snapshot 23");
    assert!(matches!(
        log.write_snapshot(Position(61), b"too far"),
        Err(Error::NotAppended { position: Position(61), .. })
    ));
    log.write_snapshot(Position(42), b"state after 42").expect("snapshot 42");
    assert!(matches!(
        log.write_snapshot(Position(30), b"older"),
        Err(Error::SnapshotNotNewer { position: Position(30), newest: Position(42) })
    ));

    let replay = log.replay().expect("replay");
    let snapshot = replay.snapshot.expect("a snapshot");
    assert_eq!((snapshot.position, snapshot.bytes.as_slice()), (Position(42), &b"state after 42"[..]));
    let records: Vec<_> = replay.records.collect::<Result<_, _>>().expect("records");
    assert_eq!(records, numbered(43, &all[42..]));

    let pruned = log.prune().expect("prune");
    // Segments hold 1-5, 6-10, ..., 41-45: the first eight end at or before 42.
    assert_eq!(
        pruned.removed_segments,
        (1..=8).map(|number| segment_path(dir.path(), number)).collect::<Vec<_>>()
    );
    assert_eq!(pruned.removed_snapshots, vec![dir.path().join(format!("{NAME}.snapshot.{:020}", 23))]);
    assert!(matches!(
        log.replay_from(Position(40)),
        Err(Error::Pruned { requested: Position(40), first_available: Position(41) })
    ));
    assert_eq!(read_from(&log, Position(41)), numbered(41, &all[40..]));
    assert_eq!(log.prune().expect("prune again"), Default::default());
    log.close().expect("close");

    let (log, report) = EventLog::open(dir.path(), opts).expect("reopen");
    assert_eq!((report.snapshot_position, report.first_position), (Some(Position(42)), Position(41)));
    let replay = log.replay().expect("replay");
    assert_eq!(replay.snapshot.expect("snapshot").position, Position(42));
    assert_eq!(replay.records.collect::<Result<Vec<_>, _>>().expect("records"), numbered(43, &all[42..]));
}

#[test]
fn a_damaged_newest_snapshot_falls_back_or_refuses() {
    // Goal: a damaged snapshot is never handed over: an older one is used (and the
    // rejection reported) when the records after it still exist, and opening fails when
    // they were pruned. Method: snapshots at 10 and 20 without pruning, damage 20's
    // payload, reopen; then prune behind a new snapshot, damage it, reopen.
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = small_segments(256);
    let (log, _) = EventLog::open(dir.path(), opts.clone()).expect("open");
    for idx in 0..30 {
        log.append_durable(&payload(idx, 40)).expect("append");
    }
    log.write_snapshot(Position(10), b"ten").expect("snapshot");
    log.write_snapshot(Position(20), b"twenty").expect("snapshot");
    log.close().expect("close");
    let newest = dir.path().join(format!("{NAME}.snapshot.{:020}", 20));
    let mut bytes = fs::read(&newest).expect("read");
    *bytes.last_mut().expect("payload") ^= 1;
    fs::write(&newest, &bytes).expect("write");

    let (log, report) = EventLog::open(dir.path(), opts.clone()).expect("falls back");
    assert_eq!(report.snapshot_position, Some(Position(10)));
    assert_eq!(report.rejected_snapshots.len(), 1);
    assert_eq!(report.rejected_snapshots[0].path, newest);
    assert!(report.rejected_snapshots[0].reason.contains("checksum"), "{:?}", report.rejected_snapshots);
    let replay = log.replay().expect("replay");
    assert_eq!(replay.snapshot.expect("snapshot").bytes, b"ten");
    assert_eq!(replay.records.count(), 20);

    log.write_snapshot(Position(25), b"twenty-five").expect("snapshot");
    log.prune().expect("prune");
    log.close().expect("close");
    let newest = dir.path().join(format!("{NAME}.snapshot.{:020}", 25));
    fs::write(&newest, b"not a snapshot").expect("write");
    assert!(matches!(EventLog::open(dir.path(), opts), Err(Error::MissingRecords { .. })));
}

#[test]
fn a_second_writer_is_refused_naming_the_directory() {
    // Goal: only one writer at a time; readers are never blocked; the lock goes with the
    // handle. Method: open a writer, try a second writer, open a reader, drop the first
    // writer, open again.
    let dir = tempfile::tempdir().expect("tempdir");
    let (writer, _) = EventLog::open(dir.path(), options()).expect("first writer");
    writer.append_durable(b"one").expect("append");
    match EventLog::open(dir.path(), options()) {
        Err(error @ Error::Locked { .. }) => {
            let message = error.to_string();
            assert!(message.contains(&dir.path().display().to_string()), "{message}");
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    let (reader, _) = EventLog::open_read_only(dir.path(), options()).expect("reader");
    assert_eq!(read_all(&reader), vec![(Position(1), b"one".to_vec())]);
    assert!(matches!(reader.append(b"x"), Err(Error::ReadOnly { .. })));
    assert!(matches!(reader.write_snapshot(Position(1), b"x"), Err(Error::ReadOnly { .. })));
    assert!(matches!(reader.prune(), Err(Error::ReadOnly { .. })));
    drop(writer);
    let (writer, _) = EventLog::open(dir.path(), options()).expect("the lock was released");
    assert_eq!(writer.append(b"two").expect("append"), Position(2));
}

#[test]
fn reopening_after_a_clean_close_or_a_drop_keeps_every_record() {
    // Goal: a clean close keeps everything and reopens without findings; a drop without
    // close still hands buffered records to the OS. Method: create, append, close,
    // reopen and check the report; append without waiting, drop, reopen, replay.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, report) = EventLog::open(dir.path(), options()).expect("create");
    assert!(report.created);
    assert_eq!((report.next_position, report.n_segments), (Position::FIRST, 1));
    let all: Vec<Vec<u8>> = (0..10).map(|idx| payload(idx, 25)).collect();
    for record in &all {
        log.append(record).expect("append");
    }
    log.close().expect("close");

    let (log, report) = EventLog::open(dir.path(), options()).expect("reopen");
    assert!(!report.created);
    assert_eq!(report.log_id, log.log_id());
    assert_eq!((report.next_position, report.torn_tail.clone()), (Position(11), None));
    assert!(report.rejected_snapshots.is_empty() && report.removed_temp_files.is_empty());
    assert_eq!(read_all(&log), numbered(1, &all));
    assert_eq!(log.append(b"buffered only").expect("append"), Position(11));
    drop(log);

    let (log, report) = EventLog::open(dir.path(), options()).expect("reopen");
    assert_eq!(report.next_position, Position(12));
    assert_eq!(read_all(&log).last(), Some(&(Position(11), b"buffered only".to_vec())));
    assert_eq!(read_all(&log).len(), 11);
}

#[test]
fn a_full_buffer_is_written_out_without_a_durable_wait() {
    // Goal: the append buffer is bounded: once full, appends write it out themselves.
    // Method: a 200-byte buffer, 50 appends of 40-byte records and no wait; a reader
    // must already find most of them in the segment file.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = EventLog::open(dir.path(), Options { buffer_bytes_max: 200, ..options() }).expect("open");
    for idx in 0..50 {
        log.append(&payload(idx, 40)).expect("append");
    }
    let (reader, _) = EventLog::open_read_only(dir.path(), options()).expect("a reader sees the file");
    let on_disk = reader.stats().next_position.0 - 1;
    assert!(on_disk >= 46, "only the last partial buffer may be held back: {on_disk} records written");
    assert_eq!(log.stats().n_fsyncs, 0);
    assert_eq!(read_all(&log).len(), 50);
}

#[test]
fn replay_sees_what_was_appended_before_it_and_nothing_after() {
    // Goal: a replay is bounded when it starts (buffered records included), so appends
    // during it are not read half-written. Method: append, start a replay, append more,
    // drain the replay.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = EventLog::open(dir.path(), options()).expect("open");
    for idx in 0..5 {
        log.append(&payload(idx, 10)).expect("append");
    }
    let records = log.replay_from(Position::FIRST).expect("replay");
    assert_eq!(records.end(), Position(6));
    for idx in 5..10 {
        log.append_durable(&payload(idx, 10)).expect("append");
    }
    assert_eq!(records.count(), 5);
    assert_eq!(read_all(&log).len(), 10);
}

#[test]
fn limits_and_io_errors_are_typed_and_name_the_path() {
    // Goal: bad input and failing system calls give typed errors naming what failed.
    // Method: oversized record, invalid options, a log directory below a regular file,
    // a read-only open of nothing, a writer open with creation disabled.
    let dir = tempfile::tempdir().expect("tempdir");
    let limited = Options { record_bytes_max: 100, snapshot_bytes_max: 10, ..options() };
    let (log, _) = EventLog::open(dir.path(), limited).expect("open");
    assert!(matches!(log.append(&[0u8; 101]), Err(Error::RecordTooLarge { bytes: 101, max: 100 })));
    assert!(matches!(
        log.write_snapshot(Position(0), &[0u8; 11]),
        Err(Error::SnapshotTooLarge { bytes: 11, max: 10 })
    ));
    log.append_durable(&[0u8; 100]).expect("exactly the limit");
    log.append_durable(b"").expect("an empty record");
    assert_eq!(read_all(&log).last(), Some(&(Position(2), Vec::new())));

    for bad in [
        Options::new(""),
        Options::new("a/b"),
        Options { segment_bytes_max: 10, ..options() },
        Options { record_bytes_max: u32::MAX, ..options() },
    ] {
        assert!(matches!(EventLog::open(dir.path(), bad), Err(Error::InvalidOptions { .. })));
    }

    let file = dir.path().join("a-file");
    fs::write(&file, b"").expect("write");
    let below_file = file.join("log");
    match EventLog::open(&below_file, options()) {
        Err(error @ Error::Io { operation: "create directory", .. }) => {
            assert!(error.to_string().contains(&below_file.display().to_string()), "{error}");
        }
        other => panic!("expected an Io error, got {other:?}"),
    }
    let missing = dir.path().join("missing");
    assert!(matches!(EventLog::open_read_only(&missing, options()), Err(Error::NotFound { .. })));
    let no_create = Options { create_if_missing: false, ..options() };
    assert!(matches!(EventLog::open(&missing, no_create), Err(Error::NotFound { .. })));
    assert!(!missing.exists());
}

mod model {
    //! Property test: random appends, syncs, reopens, snapshots and prunes against a
    //! plain vector of payloads.

    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Append(usize),
        AppendDurable(usize),
        Close,
        Drop,
        SnapshotAndPrune,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0usize..120).prop_map(Op::Append),
            4 => (0usize..120).prop_map(Op::AppendDurable),
            1 => Just(Op::Close),
            1 => Just(Op::Drop),
            1 => Just(Op::SnapshotAndPrune),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn the_log_matches_a_vector_model(ops in proptest::collection::vec(op(), 1..40)) {
            // Goal: whatever the sequence of operations, the log holds exactly what was
            // appended, numbered in order, and replay from the snapshot is consistent.
            // Method: apply random operations to a log with small segments and to a
            // vector, and compare the replay with the model after every operation.
            let dir = tempfile::tempdir().expect("tempdir");
            let opts = small_segments(512);
            let mut log = EventLog::open(dir.path(), opts.clone()).expect("open").0;
            let mut model: Vec<Vec<u8>> = Vec::new();
            let mut snapshot: Option<u64> = None;
            for op in ops {
                match op {
                    Op::Append(len) | Op::AppendDurable(len) => {
                        let record = payload(model.len(), len);
                        let position = if matches!(op, Op::Append(_)) {
                            log.append(&record).expect("append")
                        } else {
                            log.append_durable(&record).expect("append_durable")
                        };
                        model.push(record);
                        prop_assert_eq!(position, Position(model.len() as u64));
                    }
                    Op::Close | Op::Drop => {
                        if matches!(op, Op::Close) {
                            log.close().expect("close");
                        } else {
                            drop(log);
                        }
                        let (reopened, report) = EventLog::open(dir.path(), opts.clone()).expect("reopen");
                        prop_assert_eq!(report.torn_tail, None);
                        prop_assert_eq!(report.next_position, Position(model.len() as u64 + 1));
                        log = reopened;
                    }
                    Op::SnapshotAndPrune => {
                        if !model.is_empty() {
                            let position = model.len() as u64;
                            log.write_snapshot(Position(position), &position.to_le_bytes()).expect("snapshot");
                            log.prune().expect("prune");
                            snapshot = Some(position);
                        }
                    }
                }
                let replay = log.replay().expect("replay");
                let from = match replay.snapshot {
                    Some(found) => {
                        prop_assert_eq!(Some(found.position.0), snapshot);
                        prop_assert_eq!(found.bytes, found.position.0.to_le_bytes().to_vec());
                        found.position.0 + 1
                    }
                    None => {
                        prop_assert_eq!(snapshot, None);
                        1
                    }
                };
                let records: Vec<_> = replay.records.collect::<Result<_, _>>().expect("records");
                prop_assert_eq!(records, numbered(from, &model[from as usize - 1..]));
            }
        }
    }
}
