//! The `mxfsd` binary: a thin `main` over the `lava-mxfsd` library (see its crate documentation).

fn main() -> std::process::ExitCode {
    lava_mxfsd::main()
}
