//! lava-bench: LavaCore's benchmarks, one subcommand per area.
//!
//! Every result is one line on stdout, `NAME key=value key=value ...`, so that
//! figures can be collected by scripts and recorded in docs/ with the command
//! that produced them. Timing goals live here and never in tests: the machines
//! that run the tests are shared and noisy.

mod bjobs_bench;
mod client;
mod cluster;
mod coord_bench;
mod dlm_bench;
mod e2e_bench;
mod eventlog_bench;
mod failover_bench;
mod lim_bench;
mod ports;
mod restart_bench;
mod scale_bench;
mod sched_bench;
mod submit_bench;
mod xdr_bench;

use std::process::ExitCode;

const USAGE: &str = "usage: lava-bench <xdr|eventlog|submit|e2e|restart|sched|scale|bjobs|coord|lim|dlm|failover> [options]\n\
    \n  xdr        XDR encode/decode of a job-submission struct\
    \n  eventlog   durable appends with concurrent appenders, and replay\
    \n  submit     durable submissions to a real mbatchd; wall time of the real bsub\
    \n  e2e        trivial jobs through a real one-host cluster, submit to DONE (--candidates 3: replicated mbatchd)\
    \n  restart    mbatchd's start on a 1,000,000-event log: time to the first bjobs, memory\
    \n  sched      one dispatch turn of mbatchd's logic: 100,000 pending jobs with -R, 1,000 hosts\
    \n  scale      one real mbatchd driving thousands of simulated hosts: jobs/s, memory, bhosts/bjobs, a reconnect storm\
    \n  bjobs      the real `bjobs -u all` with 100,000 pending jobs in the system: wall time to its last line\
    \n  coord      the coordinator: submit→lease→heartbeat→complete cycles, submissions, restart on a large WAL\
    \n  lim        a master lim fed by 10,000 simulated hosts: ingest rate, loss, memory, lsload query\
    \n  dlm        mxfsd: uncontended lock+unlock (local and remote master), EX handoff among 8 clients\
    \n  failover   3 master candidates: kill -9 of the leader to the first bsub answered; durable submissions";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((area, rest)) = args.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let result = match area.as_str() {
        "xdr" => xdr_bench::run(rest),
        "eventlog" => eventlog_bench::run(rest),
        "submit" => submit_bench::run(rest),
        "e2e" => e2e_bench::run(rest),
        "restart" => restart_bench::run(rest),
        "sched" => sched_bench::run(rest),
        "scale" => scale_bench::run(rest),
        "bjobs" => bjobs_bench::run(rest),
        "coord" => coord_bench::run(rest),
        "lim" => lim_bench::run(rest),
        "dlm" => dlm_bench::run(rest),
        "failover" => failover_bench::run(rest),
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
