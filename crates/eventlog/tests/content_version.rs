//! The owner's payload format in every segment and snapshot header
//! ([`Options::content_version`]; docs/operations.md, "Upgrading"): a log written by an
//! older build is read and continued in a segment of the new format, and a file of a format
//! the owner does not read is refused whole, naming it, instead of being misread.

use std::path::Path;

use lava_eventlog::{Error, EventLog, Options, Position};

fn options(content_version: u32, oldest: u32) -> Options {
    Options { content_version, oldest_content_version: oldest, ..Options::new("log") }
}

fn records(log: &EventLog) -> Vec<Vec<u8>> {
    log.replay().expect("replay").records.map(|item| item.expect("record").1).collect()
}

/// The content version in each segment header of `dir`, in segment order (bytes 52..56,
/// little-endian: the format module's table).
fn segment_versions(dir: &Path) -> Vec<u32> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .expect("list")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| {
            path.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e.len() == 6 && e.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let bytes = std::fs::read(path).expect("read segment");
            u32::from_le_bytes(bytes[52..56].try_into().expect("a whole header"))
        })
        .collect()
}

// Goal: records an older build wrote (format 0: not recorded) are read by an owner that
// still reads that format, and what it appends goes to a new segment of its own format, so
// that each header names the format behind it; the next open reports both formats.
#[test]
fn an_older_log_is_read_and_continued_in_a_segment_of_the_new_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = EventLog::open(dir.path(), options(0, 0)).expect("open as the old build");
    log.append_durable(b"old 1").expect("append");
    log.append_durable(b"old 2").expect("append");
    log.close().expect("close");

    let (log, report) = EventLog::open(dir.path(), options(1, 0)).expect("open as the new build");
    assert_eq!(report.content_versions, (0, 0));
    assert_eq!(records(&log), [b"old 1".to_vec(), b"old 2".to_vec()]);
    log.append_durable(b"new 3").expect("append");
    log.close().expect("close");
    assert_eq!(segment_versions(dir.path()), [0, 1], "the new records start a segment of format 1");

    let (log, report) = EventLog::open(dir.path(), options(1, 0)).expect("reopen");
    assert_eq!(report.content_versions, (0, 1));
    assert!(report.findings().last().expect("a summary").text.ends_with("format versions 0 to 1"));
    assert_eq!(records(&log), [b"old 1".to_vec(), b"old 2".to_vec(), b"new 3".to_vec()]);
    log.close().expect("close");

    // A build that no longer reads format 0 refuses the log, naming the old segment.
    let refused = EventLog::open(dir.path(), options(2, 1)).expect_err("format 0 is not read");
    match &refused {
        Error::ContentVersion { path, found: 0, oldest: 1, newest: 2 } => {
            assert!(path.ends_with("log.000001"), "{}", path.display());
        }
        other => panic!("unexpected error: {other}"),
    }
    assert!(refused.to_string().contains("format version 0"), "{refused}");
}

// Goal: an empty segment of an older format is replaced, not sealed (a sealed segment is
// never empty): the log keeps one segment, of the new format, and its records.
#[test]
fn an_empty_segment_of_an_older_format_is_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    EventLog::open(dir.path(), options(0, 0)).expect("create as the old build").0.close().expect("close");
    let (log, _) = EventLog::open(dir.path(), options(1, 0)).expect("open as the new build");
    log.append_durable(b"first").expect("append");
    log.close().expect("close");
    assert_eq!(segment_versions(dir.path()), [1]);
    let (log, report) = EventLog::open(dir.path(), options(1, 1)).expect("reopen, reading format 1 only");
    assert_eq!(report.content_versions, (1, 1));
    assert_eq!(records(&log), [b"first".to_vec()]);
}

// Goal: a log written by a newer build (a format above the owner's) is refused by a writer
// and by a reader, and a snapshot of an unread format is refused too, not skipped for an
// older snapshot that would be misread the same way.
#[test]
fn a_newer_format_is_refused_by_writers_readers_and_at_snapshots() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = EventLog::open(dir.path(), options(2, 2)).expect("open as the newer build");
    let position = log.append_durable(b"new").expect("append");
    log.write_snapshot(position, b"state").expect("snapshot");
    log.close().expect("close");
    for refused in [
        EventLog::open(dir.path(), options(1, 0)).map(|_| ()),
        EventLog::open_read_only(dir.path(), options(1, 0)).map(|_| ()),
    ] {
        assert!(
            matches!(refused, Err(Error::ContentVersion { found: 2, oldest: 0, newest: 1, .. })),
            "{refused:?}"
        );
    }

    // Segments of a format read, a snapshot of one not read.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = EventLog::open(dir.path(), options(1, 1)).expect("open");
    let position = log.append_durable(b"one").expect("append");
    log.close().expect("close");
    let (log, _) = EventLog::open(dir.path(), options(2, 1)).expect("open as a build reading 1 and 2");
    log.write_snapshot(Position(position.0), b"state of format 2").expect("snapshot");
    log.close().expect("close");
    let refused = EventLog::open(dir.path(), options(1, 1)).map(|_| ());
    match refused {
        Err(Error::ContentVersion { path, found: 2, .. }) => {
            assert!(path.to_string_lossy().contains("snapshot"), "{}", path.display())
        }
        other => panic!("unexpected: {other:?}"),
    }
}

// Goal: options whose oldest format read is above the one written are refused.
#[test]
fn an_oldest_format_above_the_written_one_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(matches!(EventLog::open(dir.path(), options(1, 2)), Err(Error::InvalidOptions { .. })));
}
