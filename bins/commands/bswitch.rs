//! `bswitch`: the LSF command; everything is in `lava_commands::bswitch`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bswitch::main()
}
