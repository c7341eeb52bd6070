//! The cluster key: the secret every daemon of one cluster shares, read from a file that
//! only its owner may read.
//!
//! File format: the key as hexadecimal text (upper or lower case), at least
//! [`KEY_BYTES_MIN`] bytes (64 hex digits), optionally surrounded by whitespace such as a
//! final newline. `openssl rand -hex 32 > cluster.key && chmod 600 cluster.key` makes one,
//! and so does [`ClusterKey::generate_file`]. The file is refused unless it is a regular file
//! (symbolic links to one are followed) whose mode grants nothing to group or others.
//!
//! This module never writes the key anywhere but the file it creates, and never prints it:
//! `Debug` shows the [`KeyId`] only. It does not check the file's owner; installing the file
//! as root (or as the cluster administrator) is the operator's business.

use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Shortest accepted key: 32 bytes, the output size of SHA-256.
pub const KEY_BYTES_MIN: usize = 32;
/// Longest accepted key, in bytes; HMAC hashes longer keys anyway.
pub const KEY_BYTES_MAX: usize = 1024;
/// Size of the keys [`ClusterKey::generate_file`] writes, in bytes.
pub const KEY_BYTES_GENERATED: usize = 32;
/// Largest key file read: two hex digits per key byte plus room for whitespace.
const KEY_FILE_BYTES_MAX: u64 = 2 * KEY_BYTES_MAX as u64 + 64;
/// Permission bits that must be clear: anything granted to group or others.
const MODE_GROUP_OTHER_BITS: u32 = 0o077;
/// Domain label hashed with the key to derive its public id.
const KEY_ID_LABEL: &[u8] = b"lava-net key id v1\0";

/// Public 32-bit fingerprint of a key, sent in every authentication trailer so a receiver
/// picks the right key during a rotation. Derived from the key by SHA-256; reveals nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyId(pub u32);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:08x}", self.0)
    }
}

/// A key of the wrong size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a cluster key must hold {KEY_BYTES_MIN} to {KEY_BYTES_MAX} bytes, this one holds {bytes}")]
pub struct KeyLengthError {
    /// Bytes the key held.
    pub bytes: usize,
}

/// Why a key file could not be loaded or created. Every variant names the path.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file could not be opened or read.
    #[error("cluster key file {path}: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The path names a directory, device, FIFO or socket.
    #[error("cluster key file {path} is not a regular file (mode {mode:06o})")]
    NotRegularFile {
        /// The key file.
        path: PathBuf,
        /// Its full `st_mode`, file type included.
        mode: u32,
    },
    /// Group or others may read or write the file.
    #[error(
        "cluster key file {path} has mode {mode:04o}: group and others must have no access (chmod 600 {path})"
    )]
    Permissive {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file is too large to be a key file.
    #[error("cluster key file {path} (mode {mode:04o}) is larger than {KEY_FILE_BYTES_MAX} bytes")]
    FileTooLarge {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The text is not an even number of hex digits.
    #[error("cluster key file {path}: not hexadecimal at byte {offset} (mode {mode:04o})")]
    NotHex {
        /// The key file.
        path: PathBuf,
        /// Offset of the first bad character in the file (the length if the count is odd).
        offset: usize,
        /// Its permission bits.
        mode: u32,
    },
    /// The key is too short or too long.
    #[error("cluster key file {path} (mode {mode:04o}): {source}")]
    Length {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
        /// The size that was wrong.
        source: KeyLengthError,
    },
    /// The OS random source failed while generating a key.
    #[error("generating cluster key file {path}: no randomness available: {error}")]
    Random {
        /// The key file that was to be created.
        path: PathBuf,
        /// The random source's error.
        error: getrandom::Error,
    },
}

/// The cluster's shared secret, with its derived [`KeyId`].
pub struct ClusterKey {
    secret: Box<[u8]>,
    id: KeyId,
}

impl fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterKey").field("id", &self.id).finish_non_exhaustive()
    }
}

impl ClusterKey {
    /// Wraps key bytes held in memory (tests, or a key delivered by other means).
    pub fn from_bytes(secret: &[u8]) -> Result<ClusterKey, KeyLengthError> {
        if !(KEY_BYTES_MIN..=KEY_BYTES_MAX).contains(&secret.len()) {
            return Err(KeyLengthError { bytes: secret.len() });
        }
        let digest = Sha256::new().chain_update(KEY_ID_LABEL).chain_update(secret).finalize();
        let id = KeyId(u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]));
        Ok(ClusterKey { secret: secret.into(), id })
    }

    /// Reads and checks a key file; see the module doc for the format and the rules.
    ///
    /// The checks are made on the opened file (not the path), so the file read is the
    /// file checked. It is opened non-blocking so that a FIFO is refused, not waited on.
    pub fn load(path: impl AsRef<Path>) -> Result<ClusterKey, KeyError> {
        let path = path.as_ref();
        let io_error = |source| KeyError::Io { path: path.to_owned(), source };
        let file =
            OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(io_error)?;
        let metadata = file.metadata().map_err(io_error)?;
        if !metadata.file_type().is_file() {
            return Err(KeyError::NotRegularFile { path: path.to_owned(), mode: metadata.mode() });
        }
        let mode = metadata.mode() & 0o7777;
        if mode & MODE_GROUP_OTHER_BITS != 0 {
            return Err(KeyError::Permissive { path: path.to_owned(), mode });
        }
        let mut text = Vec::new();
        file.take(KEY_FILE_BYTES_MAX + 1).read_to_end(&mut text).map_err(io_error)?;
        if text.len() as u64 > KEY_FILE_BYTES_MAX {
            return Err(KeyError::FileTooLarge { path: path.to_owned(), mode });
        }
        let secret =
            decode_hex(&text).map_err(|offset| KeyError::NotHex { path: path.to_owned(), offset, mode })?;
        ClusterKey::from_bytes(&secret).map_err(|source| KeyError::Length {
            path: path.to_owned(),
            mode,
            source,
        })
    }

    /// Creates a new key file with mode 0600 holding [`KEY_BYTES_GENERATED`] random bytes,
    /// then loads it back. Refuses to overwrite an existing file: replacing a key is a
    /// rotation (see [`crate::KeyRing`]), never an accident.
    pub fn generate_file(path: impl AsRef<Path>) -> Result<ClusterKey, KeyError> {
        let path = path.as_ref();
        let mut secret = [0u8; KEY_BYTES_GENERATED];
        getrandom::fill(&mut secret).map_err(|error| KeyError::Random { path: path.to_owned(), error })?;
        let mut text: String = secret.iter().map(|byte| format!("{byte:02x}")).collect();
        text.push('\n');
        let io_error = |source| KeyError::Io { path: path.to_owned(), source };
        let mut file =
            OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(io_error)?;
        file.write_all(text.as_bytes()).map_err(io_error)?;
        file.sync_all().map_err(io_error)?;
        ClusterKey::load(path)
    }

    /// The key's public fingerprint.
    pub fn id(&self) -> KeyId {
        self.id
    }

    /// The secret bytes, for the HMAC only.
    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }
}

/// Decodes hex text after trimming surrounding whitespace; the error is the offset of the
/// first bad byte in `text`.
fn decode_hex(text: &[u8]) -> Result<Vec<u8>, usize> {
    let start = text.iter().position(|byte| !byte.is_ascii_whitespace()).unwrap_or(text.len());
    let digits = text[start..].trim_ascii_end();
    let nibble = |idx: usize| -> Result<u8, usize> {
        let digit = *digits.get(idx).ok_or(start + idx)?;
        (digit as char).to_digit(16).map(|value| value as u8).ok_or(start + idx)
    };
    (0..digits.len().div_ceil(2))
        .map(|pair_idx| Ok((nibble(2 * pair_idx)? << 4) | nibble(2 * pair_idx + 1)?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const HEX_KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF\n";

    fn write_key(dir: &Path, text: &str, mode: u32) -> PathBuf {
        let path = dir.join("cluster.key");
        std::fs::write(&path, text).expect("write key file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    // Goal: a key readable by group/others is refused with an error naming path and mode;
    // 0600 and 0400 are accepted. Method: the same file under three modes.
    #[test]
    fn permissive_mode_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write_key(dir.path(), HEX_KEY, 0o644);
        let err = ClusterKey::load(&path).expect_err("0644 must be refused");
        assert!(matches!(err, KeyError::Permissive { mode: 0o644, .. }), "{err}");
        let message = err.to_string();
        assert!(message.contains("0644") && message.contains(&path.display().to_string()), "{message}");
        for mode in [0o600, 0o400] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            let key = ClusterKey::load(&path).expect("owner-only key accepted");
            assert_eq!(key.secret()[0..2], [0x00, 0x11]);
            assert_eq!(key.secret()[31], 0xff);
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o620)).expect("chmod");
        assert!(matches!(ClusterKey::load(&path), Err(KeyError::Permissive { mode: 0o620, .. })));
    }

    // Goal: directories, short keys, odd or non-hex text and missing files are refused.
    // Method: one malformed input each; check the variant and the offset reported.
    #[test]
    fn malformed_key_files_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(matches!(ClusterKey::load(dir.path()), Err(KeyError::NotRegularFile { .. })));
        assert!(matches!(ClusterKey::load(dir.path().join("absent")), Err(KeyError::Io { .. })));
        let path = write_key(dir.path(), "abcd\n", 0o600);
        let err = ClusterKey::load(&path).expect_err("too short");
        assert!(matches!(err, KeyError::Length { source: KeyLengthError { bytes: 2 }, .. }), "{err}");
        write_key(dir.path(), &format!("  {}", HEX_KEY.replacen('a', "g", 1)), 0o600);
        assert!(matches!(ClusterKey::load(&path), Err(KeyError::NotHex { offset: 22, .. })));
        write_key(dir.path(), &HEX_KEY[1..], 0o600);
        assert!(matches!(ClusterKey::load(&path), Err(KeyError::NotHex { offset: 63, .. })));
        write_key(dir.path(), &"00".repeat(KEY_BYTES_MAX + 100), 0o600);
        assert!(matches!(ClusterKey::load(&path), Err(KeyError::FileTooLarge { .. })));
    }

    // Goal: a generated key file has mode 0600, loads back to the same key, and is never
    // overwritten. Method: generate twice at one path.
    #[test]
    fn generated_key_file_is_private_and_never_overwritten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("cluster.key");
        let key = ClusterKey::generate_file(&path).expect("generate");
        let mode = std::fs::metadata(&path).expect("stat").mode() & 0o777;
        assert_eq!(mode & MODE_GROUP_OTHER_BITS, 0, "mode {mode:o}");
        assert_eq!(ClusterKey::load(&path).expect("load").id(), key.id());
        assert!(matches!(ClusterKey::generate_file(&path), Err(KeyError::Io { .. })));
        assert_eq!(ClusterKey::load(&path).expect("load").id(), key.id(), "file unchanged");
    }

    // Goal: the key id is a stable function of the key and Debug never shows the secret;
    // a 31-byte key is refused. Method: three in-memory keys.
    #[test]
    fn key_id_is_stable_and_debug_is_redacted() {
        let a = ClusterKey::from_bytes(&[7u8; 32]).expect("key");
        let b = ClusterKey::from_bytes(&[7u8; 32]).expect("key");
        let c = ClusterKey::from_bytes(&[8u8; 32]).expect("key");
        assert_eq!(a.id(), b.id());
        assert_ne!(a.id(), c.id());
        assert!(!format!("{a:?}").contains("7, 7"));
        assert_eq!(ClusterKey::from_bytes(&[0u8; 31]).map(|key| key.id()), Err(KeyLengthError { bytes: 31 }));
    }
}
