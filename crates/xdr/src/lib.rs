//! lava-xdr: the XDR (RFC 4506) codec as a serde `Serializer`/`Deserializer`, and the
//! frame codec that carries XDR bodies.
//!
//! # What it owns
//! - [`to_bytes`] / [`serialize_into`]: any `Serialize` value to XDR bytes.
//! - [`from_bytes`] / [`from_bytes_prefix`]: XDR bytes to any `Deserialize` value,
//!   strictly, within [`Limits`], borrowing `&str` and `&[u8]` from the input.
//! - [`opaque`] and [`fixed_opaque`]: serde `with` helpers for XDR's two opaque types.
//! - [`Error`]: one error type naming the kind, the field path and the byte offset.
//! - [`frame`]: the 20-byte frame header and length-bounded frame reader/writer.
//!
//! # What it never does
//! - It never allocates because a length field asked for it. Strings and opaques are
//!   checked against their limit and against the input left before they are touched;
//!   an array's count only reaches a visitor's `with_capacity` capped by the input words
//!   left. The decoder itself allocates nothing on success.
//! - It never accepts what a strict encoder would not write: non-zero padding, a bool or
//!   optional-data flag other than 0/1, an unknown union arm, invalid UTF-8, an
//!   out-of-range narrow integer, trailing bytes after the value ([`from_bytes`]).
//! - It never guesses types: XDR is not self-describing, so `deserialize_any` (and the
//!   serde features built on it: untagged and internally tagged enums, `flatten`,
//!   ignoring unknown fields) is a clear [`ErrorKind::NotSelfDescribing`] error.
//! - No I/O, no async runtime, no clock.
//!
//! # How Rust types map to XDR
//! | Rust (serde) | XDR | bytes |
//! |---|---|---|
//! | `i32` | int | 4 |
//! | `u32` | unsigned int | 4 |
//! | `i8`, `i16` | int (sign-extended); decode range-checks | 4 |
//! | `u8`, `u16` | unsigned int; decode range-checks | 4 |
//! | `char` | unsigned int holding the scalar value; decode checks it | 4 |
//! | `i64` / `u64` | hyper / unsigned hyper | 8 |
//! | `i128` / `u128` | none: [`ErrorKind::Unsupported`] | — |
//! | `f32` / `f64` | float / double, IEEE 754 big-endian (any bit pattern decodes) | 4 / 8 |
//! | `bool` | bool: 0 or 1, anything else is an error | 4 |
//! | `String`, `&str` | string: u32 length, UTF-8 bytes, zero padding | 4 + n + pad |
//! | `Vec<u8>` etc. with [`opaque`] | variable-length opaque | 4 + n + pad |
//! | `[u8; N]` with [`fixed_opaque`] | fixed-length opaque, no length | N + pad |
//! | tuples, `[T; N]`, tuple structs | fixed-length array: elements, no length | Σ |
//! | `Vec<T>`, slices, sets (serde seq) | variable-length array: u32 count, elements | 4 + Σ |
//! | maps | variable-length array of (key, value) pairs | 4 + Σ |
//! | structs | struct: fields in declaration order, no names | Σ |
//! | enums | discriminated union: u32 discriminant = variant index, then the arm | 4 + arm |
//! | unit variants, `()`, unit structs | void | 0 |
//! | `Option<T>` | optional-data: bool flag, then the value if 1 | 4 (+ T) |
//! | newtype structs | the inner value | — |
//!
//! Decisions worth knowing:
//! - A plain `[u8; N]` or `Vec<u8>` is an array of `u8`, i.e. one 4-byte int per byte;
//!   use the [`fixed_opaque`] / [`opaque`] helpers for XDR opaque data.
//! - An enum's discriminant is its serde variant index (declaration order from 0), not
//!   the Rust `= value`: an XDR enum with sparse values (`OK = 0, ERR = 100`) needs a
//!   hand-written `Serialize`/`Deserialize` over a `u32`. Do not `#[serde(skip)]` enum
//!   variants: serde numbers them differently on the two sides.
//! - Maps encode as arrays of pairs in the map's iteration order: use `BTreeMap` when
//!   the bytes must be deterministic. Duplicate keys on decode follow the map type's
//!   `Deserialize` (the standard maps keep the last).
//! - `skip_serializing_if` is refused when it skips (fields are positional).
//! - Encoding enforces no [`Limits`]: a peer checks its own on decode.
//!
//! # Limits
//! [`Limits`] bounds the input size, string and opaque lengths, array and map counts,
//! nesting depth (so a recursive type cannot overflow the stack) and the number of
//! array elements that take no bytes (`Vec<()>`), so that a 4-byte count cannot make
//! the decoder spin.
#![deny(missing_docs)]

mod de;
mod error;
pub mod fixed_opaque;
pub mod frame;
#[cfg(feature = "golden")]
pub mod golden;
pub mod opaque;
mod ser;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use error::{Error, ErrorKind, Path, Segment};
pub use ser::{ENCODE_BUFFER_INITIAL_BYTES, Output, serialize_into};

/// Default largest input [`from_bytes`] accepts: the frame codec's largest body, 1 MiB.
pub const INPUT_BYTES_MAX_DEFAULT: usize = frame::BODY_BYTES_MAX_DEFAULT as usize;
/// Default longest string: 64 KiB, above any name, command line or path LSF allows.
pub const STRING_BYTES_MAX_DEFAULT: u32 = 64 * 1024;
/// Default longest variable-length opaque: 1 MiB, the whole input.
pub const OPAQUE_BYTES_MAX_DEFAULT: u32 = 1 << 20;
/// Default largest array or map count: 64 Ki elements.
pub const ARRAY_ELEMENTS_MAX_DEFAULT: u32 = 64 * 1024;
/// Default deepest nesting of arrays, structs, unions and optional data.
pub const DEPTH_MAX_DEFAULT: u32 = 64;

/// Bounds the decoder enforces on untrusted input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest whole input, in bytes.
    pub input_bytes_max: usize,
    /// Longest string, in bytes (before padding).
    pub string_bytes_max: u32,
    /// Longest variable-length opaque, in bytes (before padding).
    pub opaque_bytes_max: u32,
    /// Largest count of a variable-length array or map; also the budget, per input,
    /// of array elements that occupy no bytes.
    pub array_elements_max: u32,
    /// Deepest nesting of compound values (structs, tuples, arrays, maps, unions,
    /// optional data).
    pub depth_max: u32,
}

impl Limits {
    /// The default limits, usable in `const` context.
    pub const DEFAULT: Limits = Limits {
        input_bytes_max: INPUT_BYTES_MAX_DEFAULT,
        string_bytes_max: STRING_BYTES_MAX_DEFAULT,
        opaque_bytes_max: OPAQUE_BYTES_MAX_DEFAULT,
        array_elements_max: ARRAY_ELEMENTS_MAX_DEFAULT,
        depth_max: DEPTH_MAX_DEFAULT,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Encodes `value` into a new buffer.
pub fn to_bytes<T: ?Sized + Serialize>(value: &T) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(ENCODE_BUFFER_INITIAL_BYTES);
    serialize_into(value, &mut out)?;
    Ok(out)
}

/// Decodes exactly one value from `input`: bytes left after it are an error.
pub fn from_bytes<'de, T: Deserialize<'de>>(input: &'de [u8], limits: &Limits) -> Result<T, Error> {
    let (value, rest) = from_bytes_prefix(input, limits)?;
    if !rest.is_empty() {
        let kind = ErrorKind::TrailingBytes { count: rest.len() };
        return Err(Error::at_offset(kind, input.len() - rest.len()));
    }
    Ok(value)
}

/// Decodes one value from the front of `input` and returns it with the bytes after it.
///
/// `limits.input_bytes_max` applies to the whole of `input`.
pub fn from_bytes_prefix<'de, T: Deserialize<'de>>(
    input: &'de [u8],
    limits: &Limits,
) -> Result<(T, &'de [u8]), Error> {
    let mut deserializer = de::Deserializer::new(input, limits)?;
    match T::deserialize(&mut deserializer) {
        Ok(value) => Ok((value, deserializer.remainder())),
        Err(err) => Err(err.or_offset(deserializer.offset())),
    }
}
