//! `bhist`: the LSF command; everything is in `lava_commands::bhist`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bhist::main()
}
