//! `bbot`: move a pending job towards the bottom of its queue; see [`crate::btop`].

use std::process::ExitCode;

/// Runs `bbot` with this process's arguments.
pub fn main() -> ExitCode {
    crate::btop::run_main(false)
}
