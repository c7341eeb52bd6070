//! `bjobs`: the LSF command; everything is in `lava_commands::bjobs`.
//!
//! mimalloc, as in mbatchd: a listing of 100,000 jobs decodes and frees about
//! two million small strings, which glibc's allocator makes a tenth of the
//! command's time (`lava-bench bjobs`).

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    lava_commands::bjobs::main()
}
