//! The serde `Serializer` that writes XDR into a growable byte buffer.
//!
//! It owns the encoding rules of every type (see the table in the crate doc) and
//! nothing else: it never reads, never checks decoding limits (the peer enforces its
//! own), and never writes a partial value — [`serialize_into`] truncates the buffer
//! back to where it started when serialization fails. Variable-length arrays and maps
//! get their count by back-patching a placeholder word, so iterators of unknown length
//! serialize too.

use bytes::BytesMut;
use serde::Serialize;
use serde::ser::{self, SerializeMap, SerializeSeq, SerializeStruct, SerializeTuple};

use crate::error::{Error, ErrorKind, Segment};
use crate::fixed_opaque::FIXED_OPAQUE_TOKEN;

/// Initial capacity of the buffer [`crate::to_bytes`] allocates: one job submission fits.
pub const ENCODE_BUFFER_INITIAL_BYTES: usize = 256;

const PADDING: [u8; 3] = [0; 3];

/// Number of zero bytes that pad `len` bytes to a multiple of four.
#[inline]
pub(crate) fn padding_len(len: usize) -> usize {
    len.wrapping_neg() & 3
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for Vec<u8> {}
    impl Sealed for bytes::BytesMut {}
}

/// A buffer the serializer can append to and back-patch: `Vec<u8>` or `BytesMut`.
pub trait Output: sealed::Sealed {
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]);
    /// Bytes in the buffer so far.
    fn written(&self) -> usize;
    /// Overwrites the four bytes at `at`, which were written before.
    fn patch(&mut self, at: usize, word: [u8; 4]);
    /// Drops everything after the first `len` bytes.
    fn rewind(&mut self, len: usize);
}

impl Output for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
    #[inline]
    fn written(&self) -> usize {
        self.len()
    }
    #[inline]
    fn patch(&mut self, at: usize, word: [u8; 4]) {
        self[at..at + 4].copy_from_slice(&word);
    }
    #[inline]
    fn rewind(&mut self, len: usize) {
        self.truncate(len);
    }
}

impl Output for BytesMut {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
    #[inline]
    fn written(&self) -> usize {
        self.len()
    }
    #[inline]
    fn patch(&mut self, at: usize, word: [u8; 4]) {
        self[at..at + 4].copy_from_slice(&word);
    }
    #[inline]
    fn rewind(&mut self, len: usize) {
        self.truncate(len);
    }
}

/// Appends the XDR encoding of `value` to `out` and returns the number of bytes written.
///
/// On error `out` is left exactly as it was.
pub fn serialize_into<T, O>(value: &T, out: &mut O) -> Result<usize, Error>
where
    T: ?Sized + Serialize,
    O: Output,
{
    let start = out.written();
    let result = value.serialize(&mut Serializer { out: &mut *out, fixed_opaque_next: false });
    match result {
        Ok(()) => Ok(out.written() - start),
        Err(err) => {
            out.rewind(start);
            Err(err)
        }
    }
}

pub(crate) struct Serializer<'o, O: Output> {
    out: &'o mut O,
    /// Set by the fixed-opaque newtype: the next `serialize_bytes` writes no length.
    fixed_opaque_next: bool,
}

impl<O: Output> Serializer<'_, O> {
    #[inline]
    fn word(&mut self, word: u32) {
        self.out.put(&word.to_be_bytes());
    }

    #[inline]
    fn padded(&mut self, bytes: &[u8]) {
        self.out.put(bytes);
        self.out.put(&PADDING[..padding_len(bytes.len())]);
    }

    #[inline]
    fn length_prefixed(&mut self, bytes: &[u8]) -> Result<(), Error> {
        let length =
            u32::try_from(bytes.len()).map_err(|_| Error::new(ErrorKind::LengthOverflow(bytes.len())))?;
        self.word(length);
        self.padded(bytes);
        Ok(())
    }
}

/// The state of one compound value being serialized.
pub(crate) struct Compound<'a, 'o, O: Output> {
    ser: &'a mut Serializer<'o, O>,
    /// Where the placeholder count of a variable-length array or map sits.
    count_at: Option<usize>,
    n_elements: u32,
    /// The union arm this compound is the body of, for error paths.
    arm: Option<&'static str>,
}

impl<'a, 'o, O: Output> Compound<'a, 'o, O> {
    fn fixed(ser: &'a mut Serializer<'o, O>, arm: Option<&'static str>) -> Self {
        Compound { ser, count_at: None, n_elements: 0, arm }
    }

    fn counted(ser: &'a mut Serializer<'o, O>) -> Self {
        let count_at = ser.out.written();
        ser.word(0);
        Compound { ser, count_at: Some(count_at), n_elements: 0, arm: None }
    }

    fn element<T: ?Sized + Serialize>(&mut self, segment: Segment, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.ser).map_err(|err| self.locate(err, segment))
    }

    fn count_one(&mut self) -> Result<(), Error> {
        self.n_elements = self
            .n_elements
            .checked_add(1)
            .ok_or_else(|| Error::new(ErrorKind::LengthOverflow((u32::MAX as usize).saturating_add(1))))?;
        Ok(())
    }

    #[cold]
    fn locate(&self, err: Error, segment: Segment) -> Error {
        let err = err.within(segment);
        match self.arm {
            Some(arm) => err.within(Segment::Arm(arm)),
            None => err,
        }
    }

    fn finish(self) -> Result<(), Error> {
        if let Some(at) = self.count_at {
            self.ser.out.patch(at, self.n_elements.to_be_bytes());
        }
        Ok(())
    }
}

impl<'a, 'o, O: Output> ser::Serializer for &'a mut Serializer<'o, O> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'a, 'o, O>;
    type SerializeTuple = Compound<'a, 'o, O>;
    type SerializeTupleStruct = Compound<'a, 'o, O>;
    type SerializeTupleVariant = Compound<'a, 'o, O>;
    type SerializeMap = Compound<'a, 'o, O>;
    type SerializeStruct = Compound<'a, 'o, O>;
    type SerializeStructVariant = Compound<'a, 'o, O>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.word(u32::from(v));
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.serialize_i32(i32::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.serialize_i32(i32::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_i128(self, _v: i128) -> Result<(), Error> {
        Err(Error::new(ErrorKind::Unsupported("i128")))
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.serialize_u32(u32::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.serialize_u32(u32::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.word(v);
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_u128(self, _v: u128) -> Result<(), Error> {
        Err(Error::new(ErrorKind::Unsupported("u128")))
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.out.put(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.serialize_u32(u32::from(v))
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.length_prefixed(v.as_bytes())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        if std::mem::take(&mut self.fixed_opaque_next) {
            self.padded(v);
            Ok(())
        } else {
            self.length_prefixed(v)
        }
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.word(0);
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), Error> {
        self.word(1);
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        index: u32,
        _variant: &'static str,
    ) -> Result<(), Error> {
        self.word(index);
        Ok(())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        if name == FIXED_OPAQUE_TOKEN {
            self.fixed_opaque_next = true;
            let result = value.serialize(&mut *self);
            self.fixed_opaque_next = false;
            result
        } else {
            value.serialize(self)
        }
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.word(index);
        value.serialize(self).map_err(|err| err.within(Segment::Arm(variant)))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        if let Some(len) = len.filter(|&len| u32::try_from(len).is_err()) {
            return Err(Error::new(ErrorKind::LengthOverflow(len)));
        }
        Ok(Compound::counted(self))
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Ok(Compound::fixed(self, None))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Ok(Compound::fixed(self, None))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        self.word(index);
        Ok(Compound::fixed(self, Some(variant)))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        self.serialize_seq(len)
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct, Error> {
        Ok(Compound::fixed(self, None))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        self.word(index);
        Ok(Compound::fixed(self, Some(variant)))
    }
    fn is_human_readable(&self) -> bool {
        false
    }
}

impl<O: Output> SerializeSeq for Compound<'_, '_, O> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        self.element(Segment::Index(self.n_elements as usize), value)?;
        self.count_one()
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

impl<O: Output> SerializeTuple for Compound<'_, '_, O> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

impl<O: Output> ser::SerializeTupleStruct for Compound<'_, '_, O> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

impl<O: Output> ser::SerializeTupleVariant for Compound<'_, '_, O> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

impl<O: Output> SerializeMap for Compound<'_, '_, O> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), Error> {
        key.serialize(&mut *self.ser)
            .map_err(|err| err.within(Segment::Field("key")).within(Segment::Index(self.n_elements as usize)))
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.ser).map_err(|err| {
            err.within(Segment::Field("value")).within(Segment::Index(self.n_elements as usize))
        })?;
        self.count_one()
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

impl<O: Output> SerializeStruct for Compound<'_, '_, O> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        self.element(Segment::Field(key), value)
    }
    fn skip_field(&mut self, key: &'static str) -> Result<(), Error> {
        Err(skipped_field(key))
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

impl<O: Output> ser::SerializeStructVariant for Compound<'_, '_, O> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        self.element(Segment::Field(key), value)
    }
    fn skip_field(&mut self, key: &'static str) -> Result<(), Error> {
        Err(skipped_field(key))
    }
    fn end(self) -> Result<(), Error> {
        self.finish()
    }
}

/// XDR fields are positional: a field left out (`skip_serializing_if`) would shift
/// every later one, so it is refused rather than silently misencoded.
#[cold]
fn skipped_field(key: &'static str) -> Error {
    Error::new(ErrorKind::Unsupported("a conditionally skipped field (skip_serializing_if)"))
        .within(Segment::Field(key))
}
