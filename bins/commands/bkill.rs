//! `bkill`: the LSF command; everything is in `lava_commands::bkill`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bkill::main()
}
