//! The `lim` binary: a thin `main` over the `lava-lim` library (see its crate documentation).

fn main() -> std::process::ExitCode {
    lava_lim::main()
}
