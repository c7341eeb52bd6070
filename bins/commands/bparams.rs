//! `bparams`: the LSF command; everything is in `lava_commands::bparams`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bparams::main()
}
