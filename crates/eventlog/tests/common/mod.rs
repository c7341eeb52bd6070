//! Helpers shared by the integration tests: small-segment options, recognisable
//! payloads, byte offsets of records, and reading a log back whole.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use lava_eventlog::{EventLog, Options, Position, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};

/// Name of the log in every test.
pub const NAME: &str = "test.events";

/// Options with the default limits.
pub fn options() -> Options {
    Options::new(NAME)
}

/// Options whose segments rotate after `segment_bytes_max` bytes.
pub fn small_segments(segment_bytes_max: u64) -> Options {
    Options { segment_bytes_max, ..Options::new(NAME) }
}

/// A printable payload for record `idx`, `len` bytes long. Printable ASCII makes every
/// 4-byte window a length above any record limit, so no valid frame can hide in a payload.
pub fn payload(idx: usize, len: usize) -> Vec<u8> {
    let mut bytes = format!("record-{idx:06}-").into_bytes();
    while bytes.len() < len {
        bytes.push(b'a' + (bytes.len() % 26) as u8);
    }
    bytes.truncate(len);
    bytes
}

/// Path of segment `number` of the test log in `dir`.
pub fn segment_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{NAME}.{number:06}"))
}

/// Byte offsets where each record of a single segment starts, plus the end offset.
pub fn record_offsets(payloads: &[Vec<u8>]) -> Vec<u64> {
    let mut offsets = vec![SEGMENT_HEADER_BYTES as u64];
    for payload in payloads {
        let last = *offsets.last().expect("starts non-empty");
        offsets.push(last + (RECORD_HEADER_BYTES + payload.len()) as u64);
    }
    offsets
}

/// Every record from `from` on, panicking on a replay error.
pub fn read_from(log: &EventLog, from: Position) -> Vec<(Position, Vec<u8>)> {
    log.replay_from(from)
        .expect("replay starts")
        .collect::<Result<Vec<_>, _>>()
        .expect("replay reads every record")
}

/// Every record of the log.
pub fn read_all(log: &EventLog) -> Vec<(Position, Vec<u8>)> {
    read_from(log, Position::FIRST)
}

/// `(position, payload)` pairs numbered from `first`.
pub fn numbered(first: u64, payloads: &[Vec<u8>]) -> Vec<(Position, Vec<u8>)> {
    payloads
        .iter()
        .enumerate()
        .map(|(idx, payload)| (Position(first + idx as u64), payload.clone()))
        .collect()
}

/// Creates a log in `dir` holding `payloads` in one segment, closed cleanly.
pub fn write_log(dir: &Path, payloads: &[Vec<u8>]) {
    let (log, _report) = EventLog::open(dir, options()).expect("open a fresh log");
    for payload in payloads {
        log.append(payload).expect("append");
    }
    log.close().expect("close");
}
