//! `bbot`: the LSF command; everything is in `lava_commands::bbot`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bbot::main()
}
