//! The `mbatchd` binary: a thin `main` over the `lava-mbatchd` library, which
//! holds the whole daemon (see its crate documentation).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    lava_mbatchd::main()
}
