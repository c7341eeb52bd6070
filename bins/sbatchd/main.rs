//! sbatchd: the execution daemon (its per-job shepherd is the `lava-shepherd` program).
//! Everything is in the `lava-sbatchd` library.

fn main() -> std::process::ExitCode {
    lava_sbatchd::main()
}
