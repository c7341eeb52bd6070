//! `bwait`: the LSF command; everything is in `lava_commands::bwait`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bwait::main()
}
