//! `lsinfo`: the LSF command; everything is in `lava_commands::lsinfo`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::lsinfo::main()
}
