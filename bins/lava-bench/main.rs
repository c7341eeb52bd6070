//! lava-bench: LavaCore's benchmarks, one subcommand per area.
//!
//! Every result is one line on stdout, `NAME key=value key=value ...`, so that
//! figures can be collected by scripts and recorded in docs/ with the command
//! that produced them. Timing goals live here and never in tests: the machines
//! that run the tests are shared and noisy.

mod eventlog_bench;
mod xdr_bench;

use std::process::ExitCode;

const USAGE: &str = "usage: lava-bench <xdr|eventlog> [options]\n\
    \n  xdr        XDR encode/decode of a job-submission struct\
    \n  eventlog   durable appends with concurrent appenders, and replay";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((area, rest)) = args.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let result = match area.as_str() {
        "xdr" => xdr_bench::run(rest),
        "eventlog" => eventlog_bench::run(rest),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        other => {
            eprintln!("lava-bench: unknown subcommand '{other}'\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("lava-bench {area}: {err:#}");
            ExitCode::FAILURE
        }
    }
}
