//! `lsclusters`: the LSF command; everything is in `lava_commands::lsclusters`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::lsclusters::main()
}
