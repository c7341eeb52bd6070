//! `#[serde(with = "lava_xdr::fixed_opaque")]`: a `[u8; N]` field encoded as XDR `opaque x[N]`.
//!
//! Without it serde sees `[u8; N]` as a tuple of N `u8`, which XDR encodes as N
//! 4-byte ints. With it the field is the N bytes themselves plus zero padding to a
//! multiple of four, with no length prefix. Serde has no "fixed bytes" call, so the
//! helper marks the value with a private newtype name that this crate's serializer
//! and deserializer recognise; any other serde format sees an ordinary newtype of
//! bytes (or a tuple of N bytes) and round-trips it too.
//!
//! ```
//! #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
//! struct Digest {
//!     #[serde(with = "lava_xdr::fixed_opaque")]
//!     md5: [u8; 5],
//! }
//! let bytes = lava_xdr::to_bytes(&Digest { md5: [1, 2, 3, 4, 5] }).expect("encodes");
//! assert_eq!(bytes, [1, 2, 3, 4, 5, 0, 0, 0]);
//! let back: Digest = lava_xdr::from_bytes(&bytes, &lava_xdr::Limits::default()).expect("decodes");
//! assert_eq!(back.md5, [1, 2, 3, 4, 5]);
//! ```

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{Serialize, Serializer};

/// The newtype name that tells this crate's codec "fixed-length opaque follows".
pub(crate) const FIXED_OPAQUE_TOKEN: &str = "\u{0}lava_xdr::fixed_opaque";

/// Serializes `bytes` as fixed-length opaque of `N` bytes.
pub fn serialize<S: Serializer, const N: usize>(bytes: &[u8; N], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_newtype_struct(FIXED_OPAQUE_TOKEN, &Raw(bytes))
}

/// Deserializes fixed-length opaque of `N` bytes.
pub fn deserialize<'de, D: Deserializer<'de>, const N: usize>(deserializer: D) -> Result<[u8; N], D::Error> {
    deserializer.deserialize_tuple_struct(FIXED_OPAQUE_TOKEN, N, FixedVisitor::<N>)
}

struct Raw<'a>(&'a [u8]);

impl Serialize for Raw<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

struct FixedVisitor<const N: usize>;

impl<'de, const N: usize> Visitor<'de> for FixedVisitor<N> {
    type Value = [u8; N];

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{N} bytes of fixed-length opaque data")
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<[u8; N], E> {
        <[u8; N]>::try_from(v).map_err(|_| E::invalid_length(v.len(), &self))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<[u8; N], A::Error> {
        let mut bytes = [0u8; N];
        for (idx, byte) in bytes.iter_mut().enumerate() {
            *byte = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(idx, &self))?;
        }
        Ok(bytes)
    }
}
