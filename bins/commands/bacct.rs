//! `bacct`: the LSF command; everything is in `lava_commands::bacct`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bacct::main()
}
