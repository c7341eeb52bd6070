//! Replay: the records of a log, in position order, across segments, each checked.
//!
//! A [`Records`] iterator is bounded when it is made: it reads the segments and the byte
//! length of the last one as they were at that moment, so appends made while it runs
//! are not seen and a record being written is never read half-way. Every record's frame
//! and CRC are checked, every segment header is checked against the log's identity and
//! against the positions of the segment before it, and the first problem ends the
//! iteration with an error naming the file and offset; nothing is skipped. This module
//! never writes.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::format::{LogId, Position};
use crate::reader::{SegmentReader, Step, open_segment};
use crate::snapshot::Snapshot;

/// A segment as the log knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SegmentMeta {
    pub number: u64,
    pub first_position: Position,
    pub path: PathBuf,
}

/// Where a [`Records`] stopped: the position of the next record and where its frame
/// starts in its segment, so that a later [`crate::EventLog::replay_after`] reads on from
/// there instead of from the start of the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResumePoint {
    /// The next record's position.
    pub position: Position,
    pub(crate) segment: u64,
    pub(crate) offset: u64,
}

/// What replay starts from: the newest good snapshot (if any) and the records after it.
#[derive(Debug)]
pub struct Replay {
    /// The newest good snapshot; apply it first. `None` means start from an empty state.
    pub snapshot: Option<Snapshot>,
    /// The records after the snapshot (or all of them), in order.
    pub records: Records,
}

/// Iterator over `(position, payload)` of a log's records, in order; see the module doc.
/// After the first error it yields nothing more.
#[derive(Debug)]
pub struct Records {
    log_id: LogId,
    /// Segments still to read, oldest first; the last is read up to `last_limit`.
    segments: Vec<SegmentMeta>,
    segment_idx: usize,
    last_limit: u64,
    /// Position of the next record the reader will produce.
    cursor: Position,
    /// First position to hand out; earlier records of the first segment are skipped.
    from: Position,
    /// Exclusive end: the position the log's next append would have got.
    end: Position,
    reader: Option<SegmentReader>,
    done: bool,
    /// Where to start reading the first segment, when resuming ([`ResumePoint`]).
    start_offset: Option<u64>,
}

impl Records {
    /// Records `from..end` of `segments` (the segment holding `from` first).
    pub(crate) fn new(
        log_id: LogId,
        segments: Vec<SegmentMeta>,
        last_limit: u64,
        from: Position,
        end: Position,
    ) -> Records {
        assert!(!segments.is_empty(), "a log always has a segment");
        assert!(from <= end, "replay starts at or before the end");
        assert!(segments[0].first_position <= from, "the first segment holds `from`");
        let cursor = segments[0].first_position;
        Records {
            log_id,
            segments,
            segment_idx: 0,
            last_limit,
            cursor,
            from,
            end,
            reader: None,
            done: false,
            start_offset: None,
        }
    }

    /// Records `point.position..end`, the first segment read from `point`'s offset when it
    /// is that segment's (else from its start, skipping as [`Records::new`] does).
    pub(crate) fn resumed(
        log_id: LogId,
        segments: Vec<SegmentMeta>,
        last_limit: u64,
        point: ResumePoint,
        end: Position,
    ) -> Records {
        let mut records = Records::new(log_id, segments, last_limit, point.position, end);
        if records.segments[0].number == point.segment {
            records.start_offset = Some(point.offset);
            records.cursor = point.position;
        }
        records
    }

    /// Where this iteration stands, once it has read a record (`None` before, and after
    /// an error).
    pub fn resume_point(&self) -> Option<ResumePoint> {
        let reader = self.reader.as_ref()?;
        let segment = self.segments[self.segment_idx].number;
        Some(ResumePoint { position: self.cursor, segment, offset: reader.offset() })
    }

    /// The exclusive end of this replay: the last record it yields is just before it.
    pub fn end(&self) -> Position {
        self.end
    }

    fn open_current(&mut self) -> Result<()> {
        let meta = &self.segments[self.segment_idx];
        let segment = open_segment(&meta.path)?;
        let header = segment.header;
        if header.log_id != self.log_id {
            return Err(Error::ForeignFile {
                path: meta.path.clone(),
                expected: self.log_id,
                found: header.log_id,
            });
        }
        // Resuming, the cursor is past the segment's first position already.
        let first = if self.start_offset.is_some() { meta.first_position } else { self.cursor };
        if header.segment_number != meta.number || header.first_position != first {
            return Err(Error::Inconsistent {
                path: meta.path.clone(),
                reason: format!(
                    "header says segment {} starting at position {}; expected segment {} starting at {}",
                    header.segment_number, header.first_position, meta.number, first
                ),
            });
        }
        let is_last = self.segment_idx + 1 == self.segments.len();
        let limit = if is_last { self.last_limit } else { segment.file_bytes };
        if limit > segment.file_bytes {
            return Err(Error::Inconsistent {
                path: meta.path.clone(),
                reason: format!(
                    "file is {} bytes, shorter than the {limit} bytes it held",
                    segment.file_bytes
                ),
            });
        }
        let mut reader = SegmentReader::new(segment, limit);
        if let Some(offset) = self.start_offset.take() {
            if offset > limit {
                return Err(Error::Inconsistent {
                    path: meta.path.clone(),
                    reason: format!("resuming at byte {offset}, past the {limit} bytes it holds"),
                });
            }
            reader.skip_to(offset);
        }
        self.reader = Some(reader);
        Ok(())
    }

    fn step(&mut self) -> Result<Option<(Position, Vec<u8>)>> {
        loop {
            if self.cursor >= self.end {
                return Ok(None);
            }
            if self.reader.is_none() {
                self.open_current()?;
            }
            let reader = self.reader.as_mut().expect("opened just above");
            match reader.next_step()? {
                Step::Record { payload, .. } => {
                    let position = self.cursor;
                    self.cursor = position.next();
                    if position >= self.from {
                        return Ok(Some((position, payload.to_vec())));
                    }
                }
                Step::End => {
                    let path = reader.path().to_path_buf();
                    self.reader = None;
                    self.segment_idx += 1;
                    let Some(next) = self.segments.get(self.segment_idx) else {
                        return Err(Error::Inconsistent {
                            path,
                            reason: format!("log ends at position {}, expected {}", self.cursor, self.end),
                        });
                    };
                    if next.first_position != self.cursor {
                        return Err(Error::Inconsistent {
                            path: next.path.clone(),
                            reason: format!(
                                "segment starts at position {}, but the previous one ended before {}",
                                next.first_position, self.cursor
                            ),
                        });
                    }
                }
                Step::Bad { offset, problem } => {
                    return Err(Error::BadRecord { path: reader.path().to_path_buf(), offset, problem });
                }
            }
        }
    }
}

impl Iterator for Records {
    type Item = Result<(Position, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(error) => {
                self.done = true;
                self.reader = None;
                Some(Err(error))
            }
        }
    }
}
