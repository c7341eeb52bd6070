//! `brequeue`: the LSF command; everything is in `lava_commands::brequeue`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::brequeue::main()
}
