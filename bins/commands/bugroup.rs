//! `bugroup`: the LSF command; everything is in `lava_commands::groups`.

use std::process::ExitCode;

fn main() -> ExitCode {
    lava_commands::groups::bugroup_main()
}
