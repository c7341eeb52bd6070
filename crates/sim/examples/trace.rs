//! Prints the trace of one seed: `cargo run -p lava-sim --example trace -- SEED`.

use lava_sim::{Options, check};

fn main() -> std::process::ExitCode {
    let seed = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let options = Options { trace: true, ..Options::from_env() };
    match check(seed, &options) {
        Ok(outcome) => {
            eprintln!("seed {seed} passed: {:?}", outcome.stats);
            std::process::ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("{failure}");
            std::process::ExitCode::FAILURE
        }
    }
}
