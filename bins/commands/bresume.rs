//! `bresume`: the LSF command; everything is in `lava_commands::bresume`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::bresume::main()
}
