//! The `mxfsctl` binary: a thin `main` over `lava_mxfsd::ctl`.

fn main() -> std::process::ExitCode {
    lava_mxfsd::ctl::main()
}
