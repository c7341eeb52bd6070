//! lava-shepherd: the per-job shepherd (see `lava_sbatchd::shepherd`), and with `--zygote`
//! the long-lived process sbatchd keeps to fork each job's shepherd from (see
//! `lava_sbatchd::zygote`), and with `--peek` the reader of one job's output for `bpeek`,
//! run as the job's user (see `lava_sbatchd::peek`). A program of its own, not a mode of sbatchd, so that the
//! zygote (and a shepherd started by hand) is a small single-threaded process: it links no
//! async runtime, logging stack or argument parser.

fn main() -> std::process::ExitCode {
    lava_sbatchd::shepherd::main()
}
