//! Snapshot files: the owner's state as of a position, written durably and checked
//! completely before it is used.
//!
//! The log treats a snapshot's bytes as opaque: it stores them with a header (see the
//! format module) and gives them back. A snapshot is checked whole (header, identity,
//! size, payload CRC) before it is chosen at open and again when it is read for replay,
//! so a damaged snapshot is never handed to the owner. This module never touches
//! segments.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::dir;
use crate::error::{Error, Result};
use crate::format::{LogId, Position, SNAPSHOT_HEADER_BYTES, SnapshotHeader};

/// Chunk size used to checksum a snapshot without holding it in memory.
const VERIFY_CHUNK_BYTES: usize = 1 << 20;

/// A snapshot handed back for replay: the owner's state after applying every record up
/// to and including `position`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Last record position the state covers.
    pub position: Position,
    /// The bytes the owner wrote.
    pub bytes: Vec<u8>,
}

/// Writes a snapshot durably (temporary file, fsync, rename, directory fsync) and
/// returns its path.
pub(crate) fn write(
    dir_path: &Path,
    name: &str,
    log_id: LogId,
    position: Position,
    bytes: &[u8],
    content_version: u32,
) -> Result<PathBuf> {
    let header = SnapshotHeader::for_payload(log_id, position, bytes, content_version).encode();
    let file_name = dir::snapshot_file_name(name, position);
    dir::create_durably(dir_path, &file_name, &[&header, bytes])?;
    Ok(dir_path.join(file_name))
}

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::BadSnapshot { path: path.to_path_buf(), reason: reason.into() }
}

/// Opens a snapshot and checks its header against what its name and the log say.
fn open_checked(
    path: &Path,
    log_id: LogId,
    position: Position,
    bytes_max: u64,
) -> Result<(File, SnapshotHeader)> {
    let mut file = File::open(path).map_err(Error::io("open snapshot", path))?;
    let file_bytes = file.metadata().map_err(Error::io("stat snapshot", path))?.len();
    let mut header_bytes = [0u8; SNAPSHOT_HEADER_BYTES];
    let available = usize::try_from(file_bytes).unwrap_or(usize::MAX).min(SNAPSHOT_HEADER_BYTES);
    file.read_exact(&mut header_bytes[..available]).map_err(Error::io("read snapshot", path))?;
    let header = SnapshotHeader::decode(&header_bytes[..available])
        .map_err(|problem| Error::BadHeader { path: path.to_path_buf(), problem })?;
    if header.log_id != log_id {
        return Err(Error::ForeignFile { path: path.to_path_buf(), expected: log_id, found: header.log_id });
    }
    if header.position != position {
        return Err(bad(
            path,
            format!("header says position {}, file name says {position}", header.position),
        ));
    }
    if header.payload_bytes > bytes_max {
        return Err(bad(path, format!("{} bytes, above the limit of {bytes_max}", header.payload_bytes)));
    }
    let expected_bytes = SNAPSHOT_HEADER_BYTES as u64 + header.payload_bytes;
    if file_bytes != expected_bytes {
        return Err(bad(path, format!("file is {file_bytes} bytes, header says {expected_bytes}")));
    }
    Ok((file, header))
}

/// Checks a snapshot completely without loading it whole; its content version.
pub(crate) fn verify(path: &Path, log_id: LogId, position: Position, bytes_max: u64) -> Result<u32> {
    let (mut file, header) = open_checked(path, log_id, position, bytes_max)?;
    let mut hasher = crc32fast::Hasher::new();
    let mut chunk = vec![0u8; VERIFY_CHUNK_BYTES];
    let mut left = header.payload_bytes;
    while left > 0 {
        let n_bytes = left.min(VERIFY_CHUNK_BYTES as u64) as usize;
        file.read_exact(&mut chunk[..n_bytes]).map_err(Error::io("read snapshot", path))?;
        hasher.update(&chunk[..n_bytes]);
        left -= n_bytes as u64;
    }
    let computed = hasher.finalize();
    if computed != header.payload_crc {
        return Err(bad(
            path,
            format!(
                "payload checksum mismatch (stored {:#010x}, computed {computed:#010x})",
                header.payload_crc
            ),
        ));
    }
    Ok(header.content_version)
}

/// Reads and checks a snapshot.
pub(crate) fn read(path: &Path, log_id: LogId, position: Position, bytes_max: u64) -> Result<Snapshot> {
    let (mut file, header) = open_checked(path, log_id, position, bytes_max)?;
    let payload_bytes = usize::try_from(header.payload_bytes)
        .map_err(|_| bad(path, "payload does not fit in this machine's memory"))?;
    // The size was checked against the limit and the file's length before allocating.
    let mut bytes = vec![0u8; payload_bytes];
    file.read_exact(&mut bytes).map_err(Error::io("read snapshot", path))?;
    let computed = crc32fast::hash(&bytes);
    if computed != header.payload_crc {
        return Err(bad(
            path,
            format!(
                "payload checksum mismatch (stored {:#010x}, computed {computed:#010x})",
                header.payload_crc
            ),
        ));
    }
    Ok(Snapshot { position, bytes })
}
