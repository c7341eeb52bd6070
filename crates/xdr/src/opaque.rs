//! `#[serde(with = "lava_xdr::opaque")]`: a byte field encoded as XDR variable-length opaque.
//!
//! Without it serde sees `Vec<u8>` as an array of `u8`, which XDR encodes as one
//! 4-byte int per byte. With it the field is `opaque data<>`: a u32 length, the bytes,
//! zero padding to a multiple of four. It works for `Vec<u8>`, `Box<[u8]>` and the
//! zero-copy `&'de [u8]` (add `#[serde(borrow)]`). This module owns only that mapping;
//! limits are checked by the deserializer.
//!
//! ```
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Blob {
//!     #[serde(with = "lava_xdr::opaque")]
//!     data: Vec<u8>,
//! }
//! let bytes = lava_xdr::to_bytes(&Blob { data: vec![1, 2, 3] }).expect("encodes");
//! assert_eq!(bytes, [0, 0, 0, 3, 1, 2, 3, 0]);
//! ```

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, Visitor};
use serde::ser::Serializer;

/// Serializes `bytes` as variable-length opaque.
pub fn serialize<S, B>(bytes: &B, serializer: S) -> Result<S::Ok, S::Error>
where
    S: Serializer,
    B: ?Sized + AsRef<[u8]>,
{
    serializer.serialize_bytes(bytes.as_ref())
}

/// Deserializes variable-length opaque into anything built from a borrowed byte slice.
pub fn deserialize<'de, D, B>(deserializer: D) -> Result<B, D::Error>
where
    D: Deserializer<'de>,
    B: From<&'de [u8]>,
{
    deserializer.deserialize_bytes(OpaqueVisitor(PhantomData))
}

struct OpaqueVisitor<B>(PhantomData<B>);

impl<'de, B: From<&'de [u8]>> Visitor<'de> for OpaqueVisitor<B> {
    type Value = B;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("variable-length opaque data")
    }

    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<B, E> {
        Ok(B::from(v))
    }
}
