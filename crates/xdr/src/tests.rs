//! Unit tests of the codec: exact bytes for every type, and every way decoding refuses input.

use std::collections::BTreeMap;
use std::fmt::Debug;

use bytes::BytesMut;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::{Error, ErrorKind, Limits, from_bytes, from_bytes_prefix, serialize_into, to_bytes};

/// Encodes `value`, compares with `expected`, decodes it back, and checks that every
/// strict prefix of the encoding is refused and that a trailing word is refused.
#[track_caller]
fn check<T>(value: T, expected: &[u8])
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let bytes = to_bytes(&value).expect("encodes");
    assert_eq!(bytes, expected, "encoding of {value:?}");
    let back: T = from_bytes(&bytes, &Limits::default()).expect("decodes");
    assert_eq!(back, value);
    for cut in 0..bytes.len() {
        let err = from_bytes::<T>(&bytes[..cut], &Limits::default()).expect_err("truncated input");
        assert!(matches!(err.kind(), ErrorKind::UnexpectedEof { .. }), "cut at {cut}: {err}");
    }
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0; 4]);
    let err = from_bytes::<T>(&longer, &Limits::default()).expect_err("trailing word");
    assert_eq!(err.kind(), &ErrorKind::TrailingBytes { count: 4 });
    assert_eq!(err.offset(), Some(bytes.len()));
}

/// Decodes `bytes` as `T` with `limits` and checks the error's kind, path and offset.
#[track_caller]
fn check_err_with<T>(bytes: &[u8], limits: &Limits, kind: ErrorKind, path: &str, offset: usize)
where
    T: DeserializeOwned + Debug,
{
    let err = from_bytes::<T>(bytes, limits).expect_err("must be refused");
    assert_eq!(err.kind(), &kind, "{err}");
    assert_eq!(err.path().to_string(), path, "{err}");
    assert_eq!(err.offset(), Some(offset), "{err}");
}

#[track_caller]
fn check_err<T: DeserializeOwned + Debug>(bytes: &[u8], kind: ErrorKind, path: &str, offset: usize) {
    check_err_with::<T>(bytes, &Limits::default(), kind, path, offset);
}

/// Big-endian words, for writing expected bytes compactly.
fn words(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|word| word.to_be_bytes()).collect()
}

// RFC 4506 section 7: `file` and its `filetype` union.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
enum FileType {
    Text,
    Data { creator: String },
    Exec { interpretor: String },
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct File {
    filename: String,
    #[serde(rename = "type")]
    kind: FileType,
    owner: String,
    #[serde(with = "crate::opaque")]
    data: Vec<u8>,
}

// Goal: the RFC's worked example encodes to its exact 48 bytes and back.
// Method: the expected bytes are the RFC's table, copied row by row.
#[test]
fn rfc4506_section7_file_example() {
    let file = File {
        filename: "sillyprog".into(),
        kind: FileType::Exec { interpretor: "lisp".into() },
        owner: "john".into(),
        data: b"(quit)".to_vec(),
    };
    #[rustfmt::skip]
    let expected: [u8; 48] = [
        0x00, 0x00, 0x00, 0x09, // length of filename = 9
        0x73, 0x69, 0x6c, 0x6c, // "sill"
        0x79, 0x70, 0x72, 0x6f, // "ypro"
        0x67, 0x00, 0x00, 0x00, // "g" and 3 zero bytes of fill
        0x00, 0x00, 0x00, 0x02, // filekind is EXEC = 2
        0x00, 0x00, 0x00, 0x04, // length of interpretor = 4
        0x6c, 0x69, 0x73, 0x70, // "lisp"
        0x00, 0x00, 0x00, 0x04, // length of owner = 4
        0x6a, 0x6f, 0x68, 0x6e, // "john"
        0x00, 0x00, 0x00, 0x06, // length of file data = 6
        0x28, 0x71, 0x75, 0x69, // "(qui"
        0x74, 0x29, 0x00, 0x00, // "t)" and 2 zero bytes of fill
    ];
    check(file, &expected);
}

// Goal: errors inside a union arm name the field, the arm and the offset.
// Method: corrupt the first byte of the RFC example's interpretor, then its discriminant.
#[test]
fn rfc_example_errors_name_the_arm() {
    let file = File {
        filename: "sillyprog".into(),
        kind: FileType::Exec { interpretor: "lisp".into() },
        owner: "john".into(),
        data: b"(quit)".to_vec(),
    };
    let good = to_bytes(&file).expect("encodes");
    let mut bad_arm = good.clone();
    bad_arm[24] = 0xff;
    check_err::<File>(&bad_arm, ErrorKind::InvalidUtf8 { valid_up_to: 0 }, "type<Exec>.interpretor", 24);
    let mut bad_discriminant = good;
    bad_discriminant[19] = 3;
    let kind = ErrorKind::InvalidDiscriminant { value: 3, union: "FileType", n_arms: 3 };
    check_err::<File>(&bad_discriminant, kind, "type", 16);
}

// Goal: every integer width maps to the 4- or 8-byte XDR int it is documented to.
// Method: `check` each width at a sign or range edge, against hand-written bytes.
#[test]
fn integers() {
    check(-1i32, &[0xff; 4]);
    check(0x0102_0304u32, &[1, 2, 3, 4]);
    check(-2i64, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]);
    check(u64::MAX - 1, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]);
    check(-2i8, &[0xff, 0xff, 0xff, 0xfe]);
    check(i16::MIN, &[0xff, 0xff, 0x80, 0x00]);
    check(200u8, &[0, 0, 0, 200]);
    check(u16::MAX, &[0, 0, 0xff, 0xff]);
    check('é', &[0, 0, 0, 0xe9]);
}

// Goal: a 32-bit value that does not fit the narrow target type is refused, with its value.
// Method: one word just outside each narrow type's range, and a surrogate for `char`.
#[test]
fn narrow_integers_are_range_checked() {
    check_err::<u8>(&words(&[256]), ErrorKind::IntegerOutOfRange { value: 256, target: "u8" }, "", 0);
    check_err::<i8>(&words(&[128]), ErrorKind::IntegerOutOfRange { value: 128, target: "i8" }, "", 0);
    let value = -32769;
    check_err::<i16>(
        &(value as i32).to_be_bytes(),
        ErrorKind::IntegerOutOfRange { value, target: "i16" },
        "",
        0,
    );
    check_err::<u16>(&[0xff; 4], ErrorKind::IntegerOutOfRange { value: 0xffff_ffff, target: "u16" }, "", 0);
    check_err::<char>(&words(&[0xd800]), ErrorKind::InvalidChar(0xd800), "", 0);
}

// Goal: bools are 0 or 1 on the wire; anything else is refused.
// Method: both values round-trip; 2 and 256 are refused at their own word.
#[test]
fn bools() {
    check(false, &[0, 0, 0, 0]);
    check(true, &[0, 0, 0, 1]);
    check_err::<bool>(&words(&[2]), ErrorKind::InvalidBool(2), "", 0);
    check_err::<(u32, bool)>(&words(&[0, 0x100]), ErrorKind::InvalidBool(0x100), "[1]", 4);
}

// Goal: floats are IEEE 754 big-endian and every bit pattern survives, NaN included.
// Method: known encodings of 1.5 and -2.0; a NaN with a payload decodes bit for bit.
#[test]
fn floats() {
    check(1.5f32, &[0x3f, 0xc0, 0, 0]);
    check(-2.0f64, &[0xc0, 0, 0, 0, 0, 0, 0, 0]);
    let nan_bits = 0x7ff8_0000_dead_beefu64;
    let decoded: f64 = from_bytes(&nan_bits.to_be_bytes(), &Limits::default()).expect("any bits");
    assert_eq!(decoded.to_bits(), nan_bits);
}

// Goal: strings are length, bytes and zero padding to a multiple of four.
// Method: lengths 0, 4 (no padding), 5 (three bytes) and a two-byte UTF-8 character.
#[test]
fn strings() {
    check(String::new(), &[0, 0, 0, 0]);
    check("abcd".to_string(), &[0, 0, 0, 4, b'a', b'b', b'c', b'd']);
    check("abcde".to_string(), &[0, 0, 0, 5, b'a', b'b', b'c', b'd', b'e', 0, 0, 0]);
    check("é".to_string(), &[0, 0, 0, 2, 0xc3, 0xa9, 0, 0]);
}

// Goal: a non-zero padding byte is refused, at the offset where the padding starts.
// Method: a dirty pad after a top-level string, a tuple's string, and an opaque field.
#[test]
fn nonzero_padding_is_refused() {
    check_err::<String>(&[0, 0, 0, 1, b'a', 0, 1, 0], ErrorKind::NonZeroPadding, "", 5);
    check_err::<(u32, String)>(
        &[0, 0, 0, 9, 0, 0, 0, 3, b'a', b'b', b'c', 7],
        ErrorKind::NonZeroPadding,
        "[1]",
        11,
    );
    #[derive(Deserialize, Debug)]
    struct Blob {
        #[serde(with = "crate::opaque")]
        _data: Vec<u8>,
    }
    check_err::<Blob>(&[0, 0, 0, 2, 1, 2, 0, 9], ErrorKind::NonZeroPadding, "_data", 6);
}

// Goal: invalid UTF-8 is refused at the first bad byte.
// Method: "a" then a broken two-byte sequence.
#[test]
fn invalid_utf8_is_refused() {
    check_err::<String>(&[0, 0, 0, 3, b'a', 0xc3, 0x28, 0], ErrorKind::InvalidUtf8 { valid_up_to: 1 }, "", 5);
}

// Goal: `&str` and `&[u8]` decode without copying: they point into the input.
// Method: compare the decoded slices' addresses with the input's.
#[test]
fn borrowed_strings_and_opaque_point_into_the_input() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct View<'a> {
        name: &'a str,
        #[serde(borrow, with = "crate::opaque")]
        data: &'a [u8],
    }
    let bytes = to_bytes(&View { name: "host1", data: &[9, 8, 7] }).expect("encodes");
    assert_eq!(bytes, [0, 0, 0, 5, b'h', b'o', b's', b't', b'1', 0, 0, 0, 0, 0, 0, 3, 9, 8, 7, 0]);
    let view: View<'_> = from_bytes(&bytes, &Limits::default()).expect("decodes");
    assert_eq!(view.name.as_ptr(), bytes[4..].as_ptr());
    assert_eq!(view.data.as_ptr(), bytes[16..].as_ptr());
}

// Goal: the two opaque helpers and the plain byte array encode as documented.
// Method: one struct with each, against hand-written bytes.
#[test]
fn opaque_fixed_and_variable() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Opaques {
        #[serde(with = "crate::fixed_opaque")]
        fixed: [u8; 5],
        #[serde(with = "crate::fixed_opaque")]
        word: [u8; 4],
        #[serde(with = "crate::opaque")]
        variable: Vec<u8>,
        plain: [u8; 2],
    }
    let value = Opaques { fixed: [1, 2, 3, 4, 5], word: [6, 7, 8, 9], variable: vec![0xaa], plain: [3, 4] };
    #[rustfmt::skip]
    let expected = [
        1, 2, 3, 4, 5, 0, 0, 0, // fixed opaque[5], padded
        6, 7, 8, 9,             // fixed opaque[4], no padding
        0, 0, 0, 1, 0xaa, 0, 0, 0, // variable opaque
        0, 0, 0, 3, 0, 0, 0, 4, // [u8; 2] without helper: two ints
    ];
    check(value, &expected);
}

// Goal: fixed arrays have no length; variable arrays have a u32 count.
// Method: arrays, a tuple with a void, and nested, empty and non-empty vectors.
#[test]
fn arrays() {
    check([7u16, 8, 9], &words(&[7, 8, 9]));
    check((1u32, true, ()), &words(&[1, 1]));
    check(vec![5u32, 6], &words(&[2, 5, 6]));
    check(Vec::<String>::new(), &words(&[0]));
    check(vec![vec![1u32], vec![]], &words(&[2, 1, 1, 0]));
}

// Goal: unions encode the variant index then the arm; unit arms are void.
// Method: one value of each variant shape; an unknown discriminant; an error in an arm.
#[test]
fn unions() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    enum Reply {
        Ok,
        Queued(u32),
        Moved(u32, bool),
        Failed { code: i32, reason: String },
    }
    check(Reply::Ok, &words(&[0]));
    check(Reply::Queued(42), &words(&[1, 42]));
    check(Reply::Moved(3, true), &words(&[2, 3, 1]));
    check(Reply::Failed { code: -1, reason: String::new() }, &words(&[3, 0xffff_ffff, 0]));
    let kind = ErrorKind::InvalidDiscriminant { value: 4, union: "Reply", n_arms: 4 };
    check_err::<Reply>(&words(&[4]), kind, "", 0);
    check_err::<Reply>(&words(&[2, 3, 5]), ErrorKind::InvalidBool(5), "<Moved>[1]", 8);
}

// Goal: optional-data is a bool flag, then the value when present; void is no bytes.
// Method: absent, present, nested; unit and unit struct; a flag of 2.
#[test]
fn options_and_void() {
    check(None::<u32>, &words(&[0]));
    check(Some(9u32), &words(&[1, 9]));
    check(Some(None::<u32>), &words(&[1, 0]));
    check((), &[]);
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Marker;
    check(Marker, &[]);
    check_err::<Option<u32>>(&words(&[2, 9]), ErrorKind::InvalidOptionFlag(2), "", 0);
}

// Goal: maps are arrays of (key, value) pairs; errors name the entry and its side.
// Method: a two-entry BTreeMap, then the same bytes with a bad value in entry 1.
#[test]
fn maps() {
    let map: BTreeMap<u32, bool> = [(1, true), (2, false)].into_iter().collect();
    check(map, &words(&[2, 1, 1, 2, 0]));
    check_err::<BTreeMap<u32, bool>>(&words(&[2, 1, 1, 2, 3]), ErrorKind::InvalidBool(3), "[1].value", 16);
}

// Goal: a deep error names the whole path, and the display shows it with the offset.
// Method: a bad bool in the second element of a vector of structs.
#[test]
fn nested_error_names_the_full_path() {
    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Resource {
        name: String,
        exclusive: bool,
    }
    #[derive(Deserialize, Debug)]
    #[allow(dead_code)]
    struct Job {
        id: u32,
        resources: Vec<Resource>,
    }
    // id, count, resources[0] = ("", false), resources[1] = ("", 7)
    let bytes = words(&[1, 2, 0, 0, 0, 7]);
    check_err::<Job>(&bytes, ErrorKind::InvalidBool(7), "resources[1].exclusive", 20);
    let err = from_bytes::<Job>(&bytes, &Limits::default()).expect_err("bad bool");
    assert_eq!(err.to_string(), "bool must be 0 or 1, got 7 (at resources[1].exclusive, byte 20)");
}

// Goal: each length limit is enforced from the prefix alone, before the bytes are read.
// Method: tiny limits, and prefixes one over them with no data behind.
#[test]
fn length_limits() {
    let limits =
        Limits { string_bytes_max: 3, opaque_bytes_max: 2, array_elements_max: 1, ..Limits::default() };
    let kind = ErrorKind::LengthOverLimit { what: "string", length: 4, max: 3 };
    check_err_with::<String>(&words(&[4, 0]), &limits, kind, "", 0);
    let kind = ErrorKind::LengthOverLimit { what: "array", length: 2, max: 1 };
    check_err_with::<Vec<u32>>(&words(&[2, 0, 0]), &limits, kind, "", 0);
    let kind = ErrorKind::LengthOverLimit { what: "map", length: 2, max: 1 };
    check_err_with::<BTreeMap<u32, u32>>(&words(&[2]), &limits, kind, "", 0);
    #[derive(Deserialize, Debug)]
    struct Blob {
        #[serde(with = "crate::opaque")]
        _data: Vec<u8>,
    }
    let kind = ErrorKind::LengthOverLimit { what: "opaque", length: 3, max: 2 };
    check_err_with::<Blob>(&words(&[3, 0]), &limits, kind, "_data", 0);
    let small = Limits { input_bytes_max: 4, ..Limits::default() };
    check_err_with::<u64>(&[0; 8], &small, ErrorKind::InputTooLarge { length: 8, max: 4 }, "", 0);
}

// Goal: a length the input cannot hold is refused as early end of input, not allocated.
// Method: string lengths past the input (with the limit lifted), an array count past it.
#[test]
fn lengths_beyond_the_input_are_refused() {
    check_err::<String>(&words(&[100, 0]), ErrorKind::UnexpectedEof { needed: 100, available: 4 }, "", 4);
    let huge = Limits { string_bytes_max: u32::MAX, ..Limits::default() };
    let kind = ErrorKind::UnexpectedEof { needed: 0xffff_fff0, available: 0 };
    check_err_with::<String>(&words(&[0xffff_fff0]), &huge, kind, "", 4);
    let kind = ErrorKind::UnexpectedEof { needed: 8, available: 0 };
    check_err::<Vec<u64>>(&words(&[60_000]), kind, "[0]", 4);
}

// Goal: nesting is bounded, so a recursive type cannot overflow the stack.
// Method: a linked list with depth_max 4: two nodes decode, a longer chain is refused.
#[test]
fn depth_is_limited() {
    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Node {
        next: Option<Box<Node>>,
    }
    let limits = Limits { depth_max: 4, ..Limits::default() };
    let two = Node { next: Some(Box::new(Node { next: None })) };
    let bytes = to_bytes(&two).expect("encodes");
    assert_eq!(from_bytes::<Node>(&bytes, &limits).expect("shallow"), two);
    let deep = words(&[1, 1, 1, 1, 0]);
    let err = from_bytes::<Node>(&deep, &limits).expect_err("too deep");
    assert_eq!(err.kind(), &ErrorKind::TooDeep { max: 4 });
    assert_eq!(err.path().to_string(), "next.next");
}

// Goal: empty elements cannot make a few bytes cost billions of iterations.
// Method: arrays of `()` whose counts add up past the per-input budget.
#[test]
fn empty_elements_are_budgeted() {
    let limits = Limits { array_elements_max: 10, ..Limits::default() };
    let ok: Vec<Vec<()>> = from_bytes(&words(&[2, 5, 5]), &limits).expect("within budget");
    assert_eq!(ok.iter().map(Vec::len).sum::<usize>(), 10);
    let err = from_bytes::<Vec<Vec<()>>>(&words(&[2, 10, 1]), &limits).expect_err("over budget");
    assert_eq!(err.kind(), &ErrorKind::TooManyEmptyElements { max: 10 });
    assert_eq!(err.path().to_string(), "[1][0]");
}

// Goal: trailing bytes are refused by from_bytes and handed back by from_bytes_prefix.
// Method: three words decoded as one u32, and a single stray byte.
#[test]
fn trailing_bytes_and_prefix_decoding() {
    let bytes = words(&[7, 8, 9]);
    check_err::<u32>(&bytes, ErrorKind::TrailingBytes { count: 8 }, "", 4);
    let (first, rest): (u32, &[u8]) = from_bytes_prefix(&bytes, &Limits::default()).expect("prefix");
    assert_eq!((first, rest), (7, &bytes[4..]));
    check_err::<u32>(&[0, 0, 0, 1, 0], ErrorKind::TrailingBytes { count: 1 }, "", 4);
}

// Goal: types that need a self-describing format fail clearly instead of misparsing.
// Method: an untagged enum (deserialize_any) and IgnoredAny.
#[test]
fn self_describing_constructs_are_refused() {
    #[derive(Deserialize, Debug)]
    #[serde(untagged)]
    #[allow(dead_code)]
    enum Either {
        Number(u32),
        Text(String),
    }
    let err = from_bytes::<Either>(&words(&[1]), &Limits::default()).expect_err("untagged");
    assert_eq!(err.kind(), &ErrorKind::NotSelfDescribing { method: "deserialize_any" });
    let err = from_bytes::<serde::de::IgnoredAny>(&words(&[1]), &Limits::default()).expect_err("ignored");
    assert_eq!(err.kind(), &ErrorKind::NotSelfDescribing { method: "deserialize_ignored_any" });
}

// Goal: a visitor that stops before the end of an array is an error, not a silent shift.
// Method: a hand-written Deserialize that reads only the first element of a sequence.
#[test]
fn elements_left_unread_are_refused() {
    #[derive(Debug)]
    struct FirstOnly;
    impl<'de> Deserialize<'de> for FirstOnly {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = FirstOnly;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an array")
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<FirstOnly, A::Error> {
                    let _first: Option<u32> = seq.next_element()?;
                    Ok(FirstOnly)
                }
            }
            deserializer.deserialize_seq(V)
        }
    }
    check_err::<FirstOnly>(&words(&[3, 1, 2, 3]), ErrorKind::ElementsLeft { n_left: 2 }, "", 8);
}

// Goal: encoding errors name their path and leave the output buffer untouched.
// Method: a u128 inside a vector of structs; a field skipped by skip_serializing_if.
#[test]
fn encoding_errors_are_located_and_leave_no_partial_output() {
    #[derive(Serialize)]
    struct Wide {
        small: u32,
        big: u128,
    }
    let mut out = vec![0xee];
    let err = serialize_into(&vec![Wide { small: 1, big: 2 }], &mut out).expect_err("u128");
    assert_eq!(err.kind(), &ErrorKind::Unsupported("u128"));
    assert_eq!(err.path().to_string(), "[0].big");
    assert_eq!(err.offset(), None);
    assert_eq!(out, [0xee]);

    #[derive(Serialize)]
    struct Sparse {
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<u32>,
    }
    assert!(to_bytes(&Sparse { note: Some(1) }).is_ok());
    let err = to_bytes(&Sparse { note: None }).expect_err("skipped field");
    assert_eq!(err.path().to_string(), "note");
}

// Goal: a sequence of unknown length gets its count back-patched; BytesMut works as output.
// Method: a filtered iterator (no exact size) serialized after a byte already in the buffer.
#[test]
fn unknown_length_sequences_and_bytes_mut_output() {
    struct Evens(u32);
    impl Serialize for Evens {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.collect_seq((0..self.0).filter(|n| n % 2 == 0))
        }
    }
    let mut out = BytesMut::from(&[0xaa][..]);
    let written = serialize_into(&Evens(5), &mut out).expect("encodes");
    assert_eq!(written, 16);
    assert_eq!(&out[..], &[&[0xaa][..], &words(&[3, 0, 2, 4])].concat()[..]);
}

// Goal: the error's Display reads well at the top level and without an offset.
// Method: compare the rendered strings.
#[test]
fn error_display() {
    let err = from_bytes::<bool>(&words(&[2]), &Limits::default()).expect_err("bad bool");
    assert_eq!(err.to_string(), "bool must be 0 or 1, got 2 (at byte 0)");
    let err: Error = serde::ser::Error::custom("plain");
    assert_eq!(err.to_string(), "plain");
}
