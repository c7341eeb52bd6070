//! The codec's one error type: what went wrong, where in the value, and at which byte.
//!
//! An [`Error`] is an [`ErrorKind`] plus the field path (`resources[3].name`) and the
//! byte offset at which decoding stopped. The path costs nothing while decoding
//! succeeds: no frame pushes anything on the way down; each compound (struct, tuple,
//! sequence, map, union arm) appends its own segment to an error as it travels back up,
//! so a path is only ever built for a value that failed. Errors are boxed so that every
//! `Result` on the hot path stays two words wide. This module never decides when to
//! fail; the serializer and deserializer do.

use std::fmt;

/// What went wrong, without the where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// The input ended inside a value.
    #[error("input ends early: {needed} more bytes needed, {available} left")]
    UnexpectedEof {
        /// Bytes the current item needs.
        needed: usize,
        /// Bytes left in the input.
        available: usize,
    },
    /// A padding byte after a string or opaque was not zero.
    #[error("non-zero padding byte after string or opaque")]
    NonZeroPadding,
    /// A `bool` was neither 0 nor 1.
    #[error("bool must be 0 or 1, got {0}")]
    InvalidBool(u32),
    /// The flag of an optional-data (`Option`) was neither 0 (absent) nor 1 (present).
    #[error("optional-data flag must be 0 (absent) or 1 (present), got {0}")]
    InvalidOptionFlag(u32),
    /// A union (`enum`) discriminant named no variant.
    #[error("discriminant {value} of union {union} names no arm (it has {n_arms})")]
    InvalidDiscriminant {
        /// The discriminant read.
        value: u32,
        /// The Rust name of the enum.
        union: &'static str,
        /// Number of arms it has.
        n_arms: usize,
    },
    /// A string was not UTF-8.
    #[error("string is not UTF-8 (valid up to byte {valid_up_to})")]
    InvalidUtf8 {
        /// Length of the valid prefix.
        valid_up_to: usize,
    },
    /// An unsigned int was not a Unicode scalar value, so not a `char`.
    #[error("{0:#x} is not a Unicode scalar value")]
    InvalidChar(u32),
    /// A 32-bit int does not fit the narrower Rust integer it decodes into.
    #[error("integer {value} out of range for {target}")]
    IntegerOutOfRange {
        /// The value on the wire.
        value: i64,
        /// The Rust type expected.
        target: &'static str,
    },
    /// A length prefix exceeds the configured limit.
    #[error("{what} length {length} exceeds the limit of {max}")]
    LengthOverLimit {
        /// `"string"`, `"opaque"`, `"array"` or `"map"`.
        what: &'static str,
        /// The announced length.
        length: u32,
        /// The configured maximum.
        max: u32,
    },
    /// The whole input is larger than the configured limit.
    #[error("input of {length} bytes exceeds the limit of {max} bytes")]
    InputTooLarge {
        /// Input length.
        length: usize,
        /// The configured maximum.
        max: usize,
    },
    /// Values nest deeper than the configured limit.
    #[error("values nest deeper than the limit of {max}")]
    TooDeep {
        /// The configured maximum.
        max: u32,
    },
    /// Elements that take no bytes on the wire (`Vec<()>`) exceeded their budget.
    #[error("more than {max} zero-byte array elements in one input")]
    TooManyEmptyElements {
        /// The budget, equal to the array element limit.
        max: u32,
    },
    /// Bytes were left after the top-level value.
    #[error("{count} trailing bytes after the value")]
    TrailingBytes {
        /// How many bytes are left.
        count: usize,
    },
    /// A visitor stopped reading an array, tuple or map before its end.
    #[error("{n_left} elements left unread")]
    ElementsLeft {
        /// Elements not read.
        n_left: u32,
    },
    /// The type asked for a self-describing operation; XDR carries no type information.
    #[error(
        "{method} is not supported: XDR is not self-describing (untagged/internally tagged enums, flatten and ignored fields need it)"
    )]
    NotSelfDescribing {
        /// The serde method called.
        method: &'static str,
    },
    /// A Rust type XDR has no encoding for.
    #[error("{0} has no XDR encoding")]
    Unsupported(&'static str),
    /// A string, opaque or array is longer than a u32 length can say.
    #[error("length {0} does not fit the 32-bit length prefix")]
    LengthOverflow(usize),
    /// A message from a `Serialize` or `Deserialize` implementation.
    #[error("{0}")]
    Custom(String),
}

/// One step of a path from the top-level value to the failing one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment {
    /// A named struct field.
    Field(&'static str),
    /// An element of an array, tuple or map.
    Index(usize),
    /// The arm of a union, by the enum variant's name.
    Arm(&'static str),
}

/// The field path of an error, outermost first when displayed (`resources[3].name`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Path {
    // Innermost first: segments are appended while the error unwinds.
    inner_first: Vec<Segment>,
}

impl Path {
    /// The segments, outermost first.
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.inner_first.iter().rev()
    }

    /// True for an error in the top-level value itself.
    pub fn is_empty(&self) -> bool {
        self.inner_first.is_empty()
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (idx, segment) in self.segments().enumerate() {
            match segment {
                Segment::Field(name) if idx == 0 => f.write_str(name)?,
                Segment::Field(name) => write!(f, ".{name}")?,
                Segment::Index(element_idx) => write!(f, "[{element_idx}]")?,
                Segment::Arm(name) => write!(f, "<{name}>")?,
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Detail {
    kind: ErrorKind,
    path: Path,
    offset: Option<usize>,
}

/// A failed encode or decode: the kind, the field path and the byte offset.
///
/// Displays as `kind (at path, byte N)`, e.g.
/// `bool must be 0 or 1, got 7 (at resources[3].exclusive, byte 52)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", DisplayDetail(.0))]
pub struct Error(Box<Detail>);

struct DisplayDetail<'a>(&'a Detail);

impl fmt::Display for DisplayDetail<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Detail { kind, path, offset } = self.0;
        write!(f, "{kind}")?;
        match (path.is_empty(), offset) {
            (true, None) => Ok(()),
            (true, Some(offset)) => write!(f, " (at byte {offset})"),
            (false, None) => write!(f, " (at {path})"),
            (false, Some(offset)) => write!(f, " (at {path}, byte {offset})"),
        }
    }
}

impl Error {
    /// An error of `kind` with no location yet.
    #[cold]
    pub fn new(kind: ErrorKind) -> Error {
        Error(Box::new(Detail { kind, path: Path::default(), offset: None }))
    }

    #[cold]
    pub(crate) fn at_offset(kind: ErrorKind, offset: usize) -> Error {
        Error(Box::new(Detail { kind, path: Path::default(), offset: Some(offset) }))
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    /// Where in the value: empty for the top-level value.
    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// The input offset at which decoding stopped; `None` for encoding errors.
    pub fn offset(&self) -> Option<usize> {
        self.0.offset
    }

    /// Adds the segment of the enclosing compound (called while unwinding).
    #[cold]
    pub(crate) fn within(mut self, segment: Segment) -> Error {
        self.0.path.inner_first.push(segment);
        self
    }

    /// Records the offset unless an inner frame already did.
    #[cold]
    pub(crate) fn or_offset(mut self, offset: usize) -> Error {
        self.0.offset.get_or_insert(offset);
        self
    }
}

impl serde::ser::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Error {
        Error::new(ErrorKind::Custom(msg.to_string()))
    }
}

impl serde::de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Error {
        Error::new(ErrorKind::Custom(msg.to_string()))
    }
}
