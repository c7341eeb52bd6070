//! `bmod`: the LSF command; everything is in `lava_commands::bmod`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bmod::main()
}
