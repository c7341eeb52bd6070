//! `bhosts`: the LSF command; everything is in `lava_commands::bhosts`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bhosts::main()
}
