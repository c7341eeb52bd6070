//! The decoder never allocates because a length field asked for it.
//!
//! A counting global allocator records, per thread, the largest single allocation
//! made while a decode runs. Hostile inputs announce huge lengths followed by a few
//! bytes; the largest allocation must stay within what the input bytes could
//! legitimately fill, whatever the announced length.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;

use lava_xdr::{Limits, from_bytes};
use proptest::prelude::*;
use serde::Deserialize;

/// Slack for the allocations a failed decode makes for its error (box, path, message).
const ERROR_SLACK_BYTES: usize = 256;

struct Counting;

thread_local! {
    // Const-initialised cells without destructors: reading them never allocates,
    // so they are safe to touch from inside the allocator.
    static TRACKING: Cell<bool> = const { Cell::new(false) };
    static PEAK_BYTES: Cell<usize> = const { Cell::new(0) };
    static N_ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn record(size: usize) {
    let _ = TRACKING.try_with(|tracking| {
        if tracking.get() {
            let _ = PEAK_BYTES.try_with(|peak| peak.set(peak.get().max(size)));
            let _ = N_ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: every method forwards to the system allocator with the caller's arguments
// unchanged; the bookkeeping only touches thread-local cells and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: same contract as our caller's: `layout` has non-zero size.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was returned by `System` for this `layout`, as our caller promises.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        // SAFETY: `ptr` and `layout` come from `System` via us; `new_size` is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Decodes `input` as `T` and returns (largest single allocation, number of allocations).
fn measure<'de, T: Deserialize<'de> + Debug>(input: &'de [u8], limits: &Limits) -> (usize, usize) {
    PEAK_BYTES.with(|peak| peak.set(0));
    N_ALLOCATIONS.with(|n| n.set(0));
    TRACKING.with(|tracking| tracking.set(true));
    let result = from_bytes::<T>(input, limits);
    TRACKING.with(|tracking| tracking.set(false));
    drop(result);
    (PEAK_BYTES.with(Cell::get), N_ALLOCATIONS.with(Cell::get))
}

/// Asserts the largest allocation is within `per_word_bytes` for each 4-byte word of
/// input (the most a valid input of that size could need) plus the error slack.
#[track_caller]
fn check_bound<'de, T: Deserialize<'de> + Debug>(input: &'de [u8], limits: &Limits, per_word_bytes: usize) {
    let (peak, _) = measure::<T>(input, limits);
    let bound = input.len() / 4 * per_word_bytes + ERROR_SLACK_BYTES;
    assert!(
        peak <= bound,
        "{}: peak allocation {peak} bytes over bound {bound} for {} input bytes",
        std::any::type_name::<T>(),
        input.len()
    );
}

#[derive(Deserialize, Debug)]
#[allow(dead_code)]
struct Blob {
    #[serde(with = "lava_xdr::opaque")]
    data: Vec<u8>,
}

/// Every hostile-length case against every container type we decode.
fn check_all(input: &[u8], limits: &Limits) {
    check_bound::<String>(input, limits, 4);
    check_bound::<Blob>(input, limits, 4);
    check_bound::<Vec<u32>>(input, limits, 4);
    check_bound::<Vec<u64>>(input, limits, 8);
    check_bound::<Vec<String>>(input, limits, size_of::<String>());
    check_bound::<Vec<Vec<u8>>>(input, limits, size_of::<Vec<u8>>());
    check_bound::<BTreeMap<u32, String>>(input, limits, 64);
    // hashbrown rounds its table up to a power of two of 8/7 the capacity: allow for it.
    check_bound::<HashMap<u32, u32>>(input, limits, 4 * size_of::<(u32, u32)>());
}

fn hostile(length: u32, tail_bytes: usize) -> Vec<u8> {
    let mut input = length.to_be_bytes().to_vec();
    input.resize(4 + tail_bytes, 0);
    input
}

// Goal: a huge length prefix followed by a few bytes allocates no more than those bytes
// could legitimately fill.
// Method: every container type, with limits off (u32::MAX) and at their defaults.
#[test]
fn huge_length_prefixes_do_not_drive_allocation() {
    let unlimited = Limits {
        string_bytes_max: u32::MAX,
        opaque_bytes_max: u32::MAX,
        array_elements_max: u32::MAX,
        ..Limits::default()
    };
    for limits in [unlimited, Limits::default()] {
        for length in [0xffff_fff0, 0x7fff_ffff, 65_536, 4_096] {
            for tail_bytes in [0, 4, 8, 60] {
                check_all(&hostile(length, tail_bytes), &limits);
            }
        }
    }
}

// Goal: a successful zero-copy decode makes no allocation at all.
// Method: count allocations while decoding a (&str, u32).
#[test]
fn borrowed_decoding_allocates_nothing() {
    let input = [0, 0, 0, 2, b'o', b'k', 0, 0, 0, 0, 0, 7];
    let (peak, n) = measure::<(&str, u32)>(&input, &Limits::default());
    assert_eq!((peak, n), (0, 0));
}

proptest! {
    // Goal: no input at all, hostile or random, makes an allocation beyond the bound.
    // Method: random bytes, half of them starting with a large length prefix.
    #[test]
    fn arbitrary_input_stays_within_the_bound(
        prefix in prop_oneof![Just(None), (60_000u32..).prop_map(Some)],
        body in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut input = prefix.map(|length| length.to_be_bytes().to_vec()).unwrap_or_default();
        input.extend_from_slice(&body);
        check_all(&input, &Limits::default());
    }
}
