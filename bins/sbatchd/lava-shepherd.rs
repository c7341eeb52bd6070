//! lava-shepherd: the per-job shepherd sbatchd starts (see `lava_sbatchd::shepherd`). A
//! program of its own, not a mode of sbatchd, so that each job's start loads only the
//! shepherd's code: it links no async runtime, logging stack or argument parser.

fn main() -> std::process::ExitCode {
    lava_sbatchd::shepherd::main()
}
