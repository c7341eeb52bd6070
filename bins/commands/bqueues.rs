//! `bqueues`: the LSF command; everything is in `lava_commands::bqueues`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bqueues::main()
}
