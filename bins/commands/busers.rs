//! `busers`: the LSF command; everything is in `lava_commands::busers`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::busers::main()
}
