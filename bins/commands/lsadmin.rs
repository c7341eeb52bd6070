//! `lsadmin`: the LSF command; everything is in `lava_commands::lsadmin`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::lsadmin::main()
}
