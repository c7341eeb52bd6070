//! `badmin`: the LSF command; everything is in `lava_commands::badmin`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::badmin::main()
}
