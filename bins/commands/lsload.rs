//! `lsload`: the LSF command; everything is in `lava_commands::lim`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::lim::lsload_main()
}
