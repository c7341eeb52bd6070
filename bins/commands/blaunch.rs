//! `blaunch`: the LSF command; everything is in `lava_commands::blaunch`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::blaunch::main()
}
