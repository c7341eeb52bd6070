//! `bstop`: the LSF command; everything is in `lava_commands::bstop`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bstop::main()
}
