//! The serde `Deserializer` that reads XDR from a byte slice, strictly and within limits.
//!
//! It owns the decoding rules (the crate doc's table) and the input-driven bounds of
//! [`Limits`]. It never allocates: strings and opaques are handed to visitors borrowed
//! from the input, and the only allocation a length prefix can cause is the one a
//! visitor makes from [`serde::de::SeqAccess::size_hint`], which is capped by the
//! input bytes left (every element but a zero-sized one takes at least one word). It
//! never accepts what a strict XDR encoder would not have written: non-zero padding,
//! a bool other than 0 or 1, an unknown union discriminant, bad UTF-8 are all errors.
//! It never skips data, so it cannot decode self-describing constructs
//! (`deserialize_any`).

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

use crate::Limits;
use crate::error::{Error, ErrorKind, Segment};
use crate::fixed_opaque::FIXED_OPAQUE_TOKEN;
use crate::ser::padding_len;

const WORD_BYTES: usize = 4;

pub(crate) struct Deserializer<'de> {
    /// The input not consumed yet.
    input: &'de [u8],
    input_len: usize,
    limits: Limits,
    depth_left: u32,
    /// Budget of array and map elements that consumed no input (`Vec<()>`), so that a
    /// 4-byte length cannot make the decoder spin through billions of empty elements.
    empty_elements_left: u32,
}

impl<'de> Deserializer<'de> {
    pub(crate) fn new(input: &'de [u8], limits: &Limits) -> Result<Self, Error> {
        if input.len() > limits.input_bytes_max {
            let kind = ErrorKind::InputTooLarge { length: input.len(), max: limits.input_bytes_max };
            return Err(Error::at_offset(kind, 0));
        }
        Ok(Deserializer {
            input,
            input_len: input.len(),
            limits: *limits,
            depth_left: limits.depth_max,
            empty_elements_left: limits.array_elements_max,
        })
    }

    /// The bytes after the value decoded so far.
    pub(crate) fn remainder(&self) -> &'de [u8] {
        self.input
    }

    /// Offset of the next unread byte from the start of the input.
    pub(crate) fn offset(&self) -> usize {
        self.input_len - self.input.len()
    }

    /// An error about the item that starts `back` bytes before the read position.
    #[cold]
    fn fail(&self, kind: ErrorKind, back: usize) -> Error {
        Error::at_offset(kind, self.offset() - back)
    }

    #[cold]
    fn eof(&self, needed: usize) -> Error {
        self.fail(ErrorKind::UnexpectedEof { needed, available: self.input.len() }, 0)
    }

    #[inline]
    fn take<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        match self.input.split_first_chunk::<N>() {
            Some((head, rest)) => {
                self.input = rest;
                Ok(*head)
            }
            None => Err(self.eof(N)),
        }
    }

    #[inline]
    fn word(&mut self) -> Result<u32, Error> {
        self.take::<WORD_BYTES>().map(u32::from_be_bytes)
    }

    /// Reads a length prefix and checks it against `max` before anything else.
    #[inline]
    fn length(&mut self, what: &'static str, max: u32) -> Result<u32, Error> {
        let length = self.word()?;
        if length > max {
            return Err(self.fail(ErrorKind::LengthOverLimit { what, length, max }, WORD_BYTES));
        }
        Ok(length)
    }

    /// Takes `len` bytes and their zero padding, borrowed from the input.
    #[inline]
    fn padded(&mut self, len: usize) -> Result<&'de [u8], Error> {
        let padded_len = len.saturating_add(padding_len(len));
        if padded_len > self.input.len() {
            return Err(self.eof(padded_len));
        }
        let (bytes, rest) = self.input.split_at(padded_len);
        let (data, padding) = bytes.split_at(len);
        if padding.iter().any(|&byte| byte != 0) {
            return Err(Error::at_offset(ErrorKind::NonZeroPadding, self.offset() + len));
        }
        self.input = rest;
        Ok(data)
    }

    #[inline]
    fn variable_opaque(&mut self) -> Result<&'de [u8], Error> {
        let length = self.length("opaque", self.limits.opaque_bytes_max)?;
        self.padded(length as usize)
    }

    #[inline]
    fn string(&mut self) -> Result<&'de str, Error> {
        let length = self.length("string", self.limits.string_bytes_max)?;
        let bytes = self.padded(length as usize)?;
        std::str::from_utf8(bytes).map_err(|err| {
            let back = bytes.len() + padding_len(bytes.len()) - err.valid_up_to();
            self.fail(ErrorKind::InvalidUtf8 { valid_up_to: err.valid_up_to() }, back)
        })
    }

    /// A 32-bit int narrowed to a smaller Rust integer, with a range check.
    fn narrow<T: TryFrom<i64>>(&mut self, signed: bool, target: &'static str) -> Result<T, Error> {
        let word = self.word()?;
        let value = if signed { i64::from(word as i32) } else { i64::from(word) };
        T::try_from(value).map_err(|_| self.fail(ErrorKind::IntegerOutOfRange { value, target }, WORD_BYTES))
    }

    #[inline]
    fn enter(&mut self) -> Result<(), Error> {
        match self.depth_left.checked_sub(1) {
            Some(depth_left) => {
                self.depth_left = depth_left;
                Ok(())
            }
            None => Err(self.fail(ErrorKind::TooDeep { max: self.limits.depth_max }, 0)),
        }
    }

    #[inline]
    fn leave(&mut self) {
        self.depth_left += 1;
    }

    /// Charges an array or map element that consumed no input against its budget.
    fn spend_empty_element(&mut self) -> Result<(), Error> {
        match self.empty_elements_left.checked_sub(1) {
            Some(left) => {
                self.empty_elements_left = left;
                Ok(())
            }
            None => {
                Err(self.fail(ErrorKind::TooManyEmptyElements { max: self.limits.array_elements_max }, 0))
            }
        }
    }

    /// Runs `visitor` over `n` elements (struct fields when `names` is given) and
    /// checks that it read them all.
    fn elements<V: Visitor<'de>>(
        &mut self,
        visitor: V,
        n: usize,
        names: Option<&'static [&'static str]>,
        variable: bool,
    ) -> Result<V::Value, Error> {
        self.enter()?;
        let mut access = Elements { de: &mut *self, n_left: n, idx: 0, names, variable };
        let result = visitor.visit_seq(&mut access);
        let n_left = access.n_left;
        let value = result.map_err(|err| err.or_offset(self.offset()))?;
        if n_left != 0 {
            let n_left = u32::try_from(n_left).unwrap_or(u32::MAX);
            return Err(self.fail(ErrorKind::ElementsLeft { n_left }, 0));
        }
        self.leave();
        Ok(value)
    }

    #[cold]
    fn not_self_describing(&self, method: &'static str) -> Error {
        self.fail(ErrorKind::NotSelfDescribing { method }, 0)
    }
}

impl<'de> de::Deserializer<'de> for &mut Deserializer<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Error> {
        Err(self.not_self_describing("deserialize_any"))
    }
    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.word()? {
            0 => visitor.visit_bool(false),
            1 => visitor.visit_bool(true),
            other => Err(self.fail(ErrorKind::InvalidBool(other), WORD_BYTES)),
        }
    }
    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i8(self.narrow(true, "i8")?)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i16(self.narrow(true, "i16")?)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i32(i32::from_be_bytes(self.take()?))
    }
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_i64(i64::from_be_bytes(self.take()?))
    }
    fn deserialize_i128<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Error> {
        Err(self.fail(ErrorKind::Unsupported("i128"), 0))
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u8(self.narrow(false, "u8")?)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u16(self.narrow(false, "u16")?)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u32(self.word()?)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_u64(u64::from_be_bytes(self.take()?))
    }
    fn deserialize_u128<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Error> {
        Err(self.fail(ErrorKind::Unsupported("u128"), 0))
    }
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_f32(f32::from_be_bytes(self.take()?))
    }
    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_f64(f64::from_be_bytes(self.take()?))
    }
    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let word = self.word()?;
        match char::from_u32(word) {
            Some(c) => visitor.visit_char(c),
            None => Err(self.fail(ErrorKind::InvalidChar(word), WORD_BYTES)),
        }
    }
    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(self.string()?)
    }
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(self.string()?)
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_bytes(self.variable_opaque()?)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_bytes(self.variable_opaque()?)
    }
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.word()? {
            0 => visitor.visit_none(),
            1 => {
                self.enter()?;
                let value = visitor.visit_some(&mut *self)?;
                self.leave();
                Ok(value)
            }
            other => Err(self.fail(ErrorKind::InvalidOptionFlag(other), WORD_BYTES)),
        }
    }
    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let n = self.length("array", self.limits.array_elements_max)?;
        self.elements(visitor, n as usize, None, true)
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        self.elements(visitor, len, None, false)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        if name == FIXED_OPAQUE_TOKEN {
            return visitor.visit_borrowed_bytes(self.padded(len)?);
        }
        self.elements(visitor, len, None, false)
    }
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let n = self.length("map", self.limits.array_elements_max)?;
        self.enter()?;
        let mut access = Entries { de: &mut *self, n_left: n, idx: 0, input_left_before: 0 };
        let result = visitor.visit_map(&mut access);
        let n_left = access.n_left;
        let value = result.map_err(|err| err.or_offset(self.offset()))?;
        if n_left != 0 {
            return Err(self.fail(ErrorKind::ElementsLeft { n_left }, 0));
        }
        self.leave();
        Ok(value)
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.elements(visitor, fields.len(), Some(fields), false)
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let discriminant = self.word()?;
        let Some(&arm) = variants.get(discriminant as usize) else {
            let kind =
                ErrorKind::InvalidDiscriminant { value: discriminant, union: name, n_arms: variants.len() };
            return Err(self.fail(kind, WORD_BYTES));
        };
        self.enter()?;
        let value = visitor.visit_enum(Union { de: &mut *self, discriminant, arm })?;
        self.leave();
        Ok(value)
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Error> {
        Err(self.not_self_describing("deserialize_identifier"))
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Error> {
        Err(self.not_self_describing("deserialize_ignored_any"))
    }
    fn is_human_readable(&self) -> bool {
        false
    }
}

/// The elements of a struct, tuple or array, handed to a visitor one by one.
struct Elements<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    n_left: usize,
    idx: usize,
    /// Field names, for a struct.
    names: Option<&'static [&'static str]>,
    /// A variable-length array, whose empty elements are charged to the budget.
    variable: bool,
}

impl Elements<'_, '_> {
    #[cold]
    fn locate(&self, err: Error, idx: usize) -> Error {
        let segment = match self.names {
            Some(names) => Segment::Field(names.get(idx).copied().unwrap_or("?")),
            None => Segment::Index(idx),
        };
        err.or_offset(self.de.offset()).within(segment)
    }
}

impl<'de> de::SeqAccess<'de> for Elements<'_, 'de> {
    type Error = Error;

    #[inline]
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        if self.n_left == 0 {
            return Ok(None);
        }
        self.n_left -= 1;
        let idx = self.idx;
        self.idx += 1;
        let input_left_before = self.de.input.len();
        match seed.deserialize(&mut *self.de) {
            Ok(value) => {
                if self.variable && self.de.input.len() == input_left_before {
                    self.de.spend_empty_element().map_err(|err| self.locate(err, idx))?;
                }
                Ok(Some(value))
            }
            Err(err) => Err(self.locate(err, idx)),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        // Visitors preallocate from this: never more elements than words left.
        Some(self.n_left.min(self.de.input.len() / WORD_BYTES))
    }
}

/// The entries of a map: a variable-length array of (key, value) pairs.
struct Entries<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    n_left: u32,
    idx: usize,
    input_left_before: usize,
}

impl Entries<'_, '_> {
    #[cold]
    fn locate(&self, err: Error, part: &'static str) -> Error {
        err.or_offset(self.de.offset()).within(Segment::Field(part)).within(Segment::Index(self.idx))
    }
}

impl<'de> de::MapAccess<'de> for Entries<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        if self.n_left == 0 {
            return Ok(None);
        }
        self.n_left -= 1;
        self.input_left_before = self.de.input.len();
        seed.deserialize(&mut *self.de).map(Some).map_err(|err| self.locate(err, "key"))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let value = seed.deserialize(&mut *self.de).map_err(|err| self.locate(err, "value"))?;
        if self.de.input.len() == self.input_left_before {
            self.de.spend_empty_element().map_err(|err| self.locate(err, "value"))?;
        }
        self.idx += 1;
        Ok(value)
    }

    fn size_hint(&self) -> Option<usize> {
        Some((self.n_left as usize).min(self.de.input.len() / WORD_BYTES))
    }
}

/// A union whose discriminant is read and known valid; the arm comes next.
struct Union<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    discriminant: u32,
    arm: &'static str,
}

impl Union<'_, '_> {
    #[cold]
    fn locate(&self, err: Error) -> Error {
        err.or_offset(self.de.offset()).within(Segment::Arm(self.arm))
    }
}

impl<'de> de::EnumAccess<'de> for Union<'_, 'de> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), Error> {
        let deserializer: de::value::U32Deserializer<Error> = self.discriminant.into_deserializer();
        match seed.deserialize(deserializer) {
            Ok(value) => Ok((value, self)),
            Err(err) => Err(self.locate(err)),
        }
    }
}

impl<'de> de::VariantAccess<'de> for Union<'_, 'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        Ok(())
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        seed.deserialize(&mut *self.de).map_err(|err| self.locate(err))
    }
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_tuple(&mut *self.de, len, visitor).map_err(|err| self.locate(err))
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_struct(&mut *self.de, self.arm, fields, visitor)
            .map_err(|err| self.locate(err))
    }
}
