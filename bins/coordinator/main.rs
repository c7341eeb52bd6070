//! The `coordinator` binary: a thin `main` over the `lava-coordinator` library.

fn main() -> std::process::ExitCode {
    lava_coordinator::main()
}
