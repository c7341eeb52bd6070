//! `bsub`: the LSF command; everything is in `lava_commands::bsub`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bsub::main()
}
