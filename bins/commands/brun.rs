//! `brun`: the LSF command; everything is in `lava_commands::brun`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::brun::main()
}
