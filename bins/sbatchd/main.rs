//! sbatchd: the execution daemon (and, hidden, the per-job shepherd). Everything is in the
//! `lava-sbatchd` library.

fn main() -> std::process::ExitCode {
    lava_sbatchd::main()
}
