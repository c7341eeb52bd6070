//! `bpeek`: the LSF command; everything is in `lava_commands::bpeek`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bpeek::main()
}
