//! `btop`: the LSF command; everything is in `lava_commands::btop`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::btop::main()
}
