//! Reading segment files: headers, records one by one through a large buffer, and the
//! recovery scan that tells a torn tail from corruption in the middle.
//!
//! The rule, applied to the last segment when a log is opened: records are read in
//! order until one does not check out (truncated header, length above the limit,
//! payload past the end of the file, or CRC mismatch). From the byte after that bad
//! frame's start, every offset to the end of the file is tried as the start of a record;
//! if any offset holds a frame whose length fits and whose CRC matches, good data
//! follows the bad record, and the log is corrupt in the middle: opening fails with the
//! file and the bad record's offset. If none does, the bad bytes are a torn tail, the
//! remains of a write a power cut interrupted, or the zeros of preallocated space a
//! writer left when it died. A torn tail holds no
//! acknowledged record, because a record is acknowledged only after the fsync that
//! covers it, and everything before the tail was covered by earlier fsyncs.
//!
//! Reads never allocate by what a length field says: a length is first bounded by the
//! segment's record limit (itself bounded by [`RECORD_BYTES_LIMIT`]) and by the bytes
//! left in the file. This module never writes.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::{
    FrameProblem, RECORD_BYTES_LIMIT, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES, SegmentHeader, check_frame,
    get_u32,
};

/// Size of the read buffer of a segment reader; large reads keep replay off the syscall path.
pub(crate) const READ_BUFFER_BYTES: usize = 1 << 20;
/// Offsets tried per window by the forward search after a bad record.
const SEARCH_WINDOW_BYTES: u64 = 4 << 20;
/// Chunk size of the zero check.
const ZERO_CHECK_CHUNK_BYTES: u64 = 1 << 20;

/// A segment file opened for reading, with its decoded header and its length.
#[derive(Debug)]
pub(crate) struct OpenSegment {
    pub file: File,
    pub path: PathBuf,
    pub header: SegmentHeader,
    pub file_bytes: u64,
}

/// Opens a segment file read-only and decodes its header.
pub(crate) fn open_segment(path: &Path) -> Result<OpenSegment> {
    let file = File::open(path).map_err(Error::io("open segment", path))?;
    let file_bytes = file.metadata().map_err(Error::io("stat segment", path))?.len();
    let mut bytes = [0u8; SEGMENT_HEADER_BYTES];
    let available = usize::try_from(file_bytes).unwrap_or(usize::MAX).min(SEGMENT_HEADER_BYTES);
    file.read_exact_at(&mut bytes[..available], 0).map_err(Error::io("read segment header", path))?;
    let header = SegmentHeader::decode(&bytes[..available])
        .map_err(|problem| Error::BadHeader { path: path.to_path_buf(), problem })?;
    Ok(OpenSegment { file, path: path.to_path_buf(), header, file_bytes })
}

/// One step of a [`SegmentReader`].
#[derive(Debug)]
pub(crate) enum Step<'a> {
    /// A valid record whose frame starts at `offset`.
    Record { offset: u64, payload: &'a [u8] },
    /// The reader reached its limit exactly at a record boundary.
    End,
    /// The frame at `offset` does not check out.
    Bad { offset: u64, problem: FrameProblem },
}

/// Reads the records of one segment, in order, up to a byte limit.
#[derive(Debug)]
pub(crate) struct SegmentReader {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    /// Bytes `buf[start..end]` are the file's bytes from `offset` on.
    start: usize,
    end: usize,
    offset: u64,
    limit: u64,
    record_bytes_max: u32,
}

impl SegmentReader {
    /// Reads the records of `segment` between its header and `limit` (a byte offset).
    pub(crate) fn new(segment: OpenSegment, limit: u64) -> SegmentReader {
        assert!(limit >= SEGMENT_HEADER_BYTES as u64, "the limit lies past the header");
        assert!(limit <= segment.file_bytes, "the limit lies within the file");
        SegmentReader {
            file: segment.file,
            path: segment.path,
            buf: Vec::new(),
            start: 0,
            end: 0,
            offset: SEGMENT_HEADER_BYTES as u64,
            limit,
            record_bytes_max: segment.header.record_bytes_max.min(RECORD_BYTES_LIMIT),
        }
    }

    /// The byte offset of the next record's frame.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Starts reading at `offset`, the start of a record's frame that an earlier reader of
    /// the same segment reached (nothing read yet).
    pub(crate) fn skip_to(&mut self, offset: u64) {
        debug_assert!(self.end == 0 && offset >= self.offset && offset <= self.limit);
        self.offset = offset;
    }

    /// The file being read.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Gives the file back, e.g. for the forward search after a bad record.
    pub(crate) fn into_file(self) -> File {
        self.file
    }

    /// The record limit lengths are checked against.
    pub(crate) fn record_bytes_max(&self) -> u32 {
        self.record_bytes_max
    }

    /// Reads the next record, or says why there is none.
    pub(crate) fn next_step(&mut self) -> Result<Step<'_>> {
        let remaining = self.limit - self.offset;
        if remaining == 0 {
            return Ok(Step::End);
        }
        let offset = self.offset;
        if remaining < RECORD_HEADER_BYTES as u64 {
            return Ok(Step::Bad { offset, problem: FrameProblem::TruncatedHeader });
        }
        self.fill(RECORD_HEADER_BYTES)?;
        let length = get_u32(&self.buf[self.start..self.end], 0);
        if length > self.record_bytes_max {
            return Ok(Step::Bad { offset, problem: FrameProblem::LengthOverLimit });
        }
        let total = RECORD_HEADER_BYTES + length as usize;
        if total as u64 > remaining {
            return Ok(Step::Bad { offset, problem: FrameProblem::TruncatedPayload });
        }
        self.fill(total)?;
        let frame_start = self.start;
        match check_frame(&self.buf[frame_start..self.end], remaining, self.record_bytes_max) {
            Ok(checked) => debug_assert_eq!(checked, length, "the frame checked is the frame measured"),
            Err(problem) => return Ok(Step::Bad { offset, problem }),
        }
        self.start += total;
        self.offset += total as u64;
        Ok(Step::Record {
            offset,
            payload: &self.buf[frame_start + RECORD_HEADER_BYTES..frame_start + total],
        })
    }

    /// Makes sure `buf[start..end]` holds at least `need` bytes (which the caller has
    /// checked lie before the limit).
    fn fill(&mut self, need: usize) -> Result<()> {
        if self.end - self.start >= need {
            return Ok(());
        }
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        // Never more than what is left before the limit: a reader that catches up on a
        // few new records (the text view after each commit) must not zero a whole buffer.
        let left = usize::try_from(self.limit - self.offset).unwrap_or(usize::MAX);
        let size = need.max(READ_BUFFER_BYTES.min(left));
        if self.buf.len() < size {
            self.buf.resize(size, 0);
        }
        while self.end < need {
            let file_offset = self.offset + self.end as u64;
            let room = (self.buf.len() - self.end) as u64;
            let want = room.min(self.limit - file_offset) as usize;
            let n_read = self
                .file
                .read_at(&mut self.buf[self.end..self.end + want], file_offset)
                .map_err(Error::io("read segment", &self.path))?;
            if n_read == 0 {
                return Err(Error::Io {
                    operation: "read segment",
                    path: self.path.clone(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("file ended at byte {file_offset}, before the {} bytes it held", self.limit),
                    ),
                });
            }
            self.end += n_read;
        }
        Ok(())
    }
}

/// Looks for a valid record frame starting anywhere in `from..file_bytes`; returns the
/// offset of the first one. Memory is bounded by one window plus one largest record.
pub(crate) fn find_valid_frame(
    file: &File,
    path: &Path,
    from: u64,
    file_bytes: u64,
    record_bytes_max: u32,
) -> Result<Option<u64>> {
    let overlap = RECORD_HEADER_BYTES as u64 + u64::from(record_bytes_max);
    let mut buf = Vec::new();
    let mut base = from;
    while base + RECORD_HEADER_BYTES as u64 <= file_bytes {
        let window_end = file_bytes.min(base + SEARCH_WINDOW_BYTES + overlap);
        buf.resize((window_end - base) as usize, 0);
        file.read_exact_at(&mut buf, base).map_err(Error::io("read segment", path))?;
        let candidates_end = (base + SEARCH_WINDOW_BYTES).min(file_bytes - RECORD_HEADER_BYTES as u64 + 1);
        for candidate in base..candidates_end {
            let relative = (candidate - base) as usize;
            if check_frame(&buf[relative..], file_bytes - candidate, record_bytes_max).is_ok() {
                return Ok(Some(candidate));
            }
        }
        base += SEARCH_WINDOW_BYTES;
    }
    Ok(None)
}

/// Whether every byte of `from..file_bytes` is zero.
pub(crate) fn all_zero(file: &File, path: &Path, from: u64, file_bytes: u64) -> Result<bool> {
    let mut buf = Vec::new();
    let mut offset = from;
    while offset < file_bytes {
        let chunk = (file_bytes - offset).min(ZERO_CHECK_CHUNK_BYTES) as usize;
        buf.resize(chunk, 0);
        file.read_exact_at(&mut buf, offset).map_err(Error::io("read segment", path))?;
        if buf.iter().any(|&byte| byte != 0) {
            return Ok(false);
        }
        offset += chunk as u64;
    }
    Ok(true)
}
