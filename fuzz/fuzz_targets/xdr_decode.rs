//! Fuzz target: arbitrary bytes into the XDR decoder and the frame decoder.
//!
//! Beyond "never panics", it checks the decoder's strictness: a job submission that
//! decodes must re-encode to exactly the input bytes (XDR has one encoding per value
//! and the decoder refuses every other one), and every frame taken off a stream
//! buffer must respect the body limit.
#![no_main]

use bytes::BytesMut;
use lava_xdr::frame::{FrameLimits, decode_exact, decode_frame};
use lava_xdr::{Limits, from_bytes, to_bytes};
use libfuzzer_sys::fuzz_target;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, PartialEq)]
enum Dependency {
    None,
    Done(u64),
    Ended { job_id: u64, exit_code: i32 },
    Expression(String),
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Resource<'a> {
    name: &'a str,
    amount: f64,
    exclusive: bool,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Submit<'a> {
    options: u32,
    priority: i16,
    n_processors: (u8, u16),
    submit_time: i64,
    job_name: String,
    #[serde(borrow)]
    queue: &'a str,
    command: String,
    ask_hosts: Vec<String>,
    #[serde(borrow)]
    resources: Vec<Resource<'a>>,
    dependency: Dependency,
    output_file: Option<String>,
    signal: Option<char>,
    #[serde(with = "lava_xdr::fixed_opaque")]
    nonce: [u8; 6],
    #[serde(borrow, with = "lava_xdr::opaque")]
    script: &'a [u8],
    limits: [i32; 3],
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    if let Ok(submit) = from_bytes::<Submit<'_>>(data, &limits) {
        let again = to_bytes(&submit).expect("a decoded value re-encodes");
        assert_eq!(again, data, "accepted input is canonical");
    }
    let _ = from_bytes::<Vec<Dependency>>(data, &limits);
    let _ = from_bytes::<(Option<Vec<u32>>, String)>(data, &limits);

    let frame_limits = FrameLimits { body_bytes_max: 4096 };
    let _ = decode_exact(data, &frame_limits);
    let mut stream = BytesMut::from(data);
    while let Ok(Some(frame)) = decode_frame(&mut stream, &frame_limits) {
        assert!(frame.body.len() <= 4096);
        assert_eq!(frame.body.len(), frame.header.length as usize);
    }
});
