//! `bjobs`: the LSF command; everything is in `lava_commands::bjobs`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bjobs::main()
}
