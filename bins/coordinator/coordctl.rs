//! The `coordctl` binary: a thin `main` over `lava_coordinator::ctl`.

fn main() -> std::process::ExitCode {
    lava_coordinator::ctl::main()
}
