//! `brun`: an administrator forces a pending job to run now.
//!
//! ```text
//! brun [-h] [-V] [-f] -m "host_name ..." jobId | "jobId[index]"
//! ```
//!
//! mbatchd starts the job at once on the hosts named, as many slots on each as
//! it has CPUs, in the order named, whatever the queue, user and host limits,
//! a closed host or queue, or the hosts' loads say (JOB_FORCE;
//! docs/commands.md). Only root and the `ClusterAdmins` of lsb.params may.
//! Lava's `brun.c` and lsb.err.c word the outcome: `Job <N> is being forced to
//! run.` on standard output (exit 0), else `Failed to run the job: why` on
//! standard error (exit 255): `No matching job found`, `User permission
//! denied`, `Job has already started`, `Job has already finished`, `Operation
//! not supported for a suspended job` (PSUSP, USUSP, SSUSP), `Bad host name,
//! host group name or cluster name`, `Too many processors requested` (the hosts
//! have fewer CPUs than the job slots), `Cannot operate on job array` (an
//! array's id without an index). `-f` (run without being suspended by run
//! windows or load thresholds) is accepted: LavaCore suspends no job on its own.
//! `-b` (restart a checkpointed job from the beginning) is not supported.

use std::process::ExitCode;

use lava_batch_wire::{JobControlAction, JobControlRequest};

use crate::args::{self, Item, OptSpec, Order};
use crate::term::{self, Term};

/// The usage text (standard error).
pub const USAGE: &str = "Usage: brun [-h] [-V] [-f] -m \"host_name ...\" jobId | \"jobId[index]\"\n";

/// The options the command accepts; its man page (lava-man) is checked against them.
pub const SPECS: &[OptSpec] =
    &[OptSpec::flag("h"), OptSpec::flag("V"), OptSpec::flag("f"), OptSpec::value("m")];

/// Parses the arguments: `Ok(None)` for `-h`/`-V` (already answered by the caller),
/// else the request; an error is the message to print (with the usage when `true`).
pub fn parse_args(args: &[String]) -> term::Parsed<JobControlRequest> {
    let items = args::scan(args, SPECS, Order::Permute).map_err(|error| (error.0, true))?;
    let mut operands = Vec::new();
    let mut hosts: Vec<String> = Vec::new();
    for item in items {
        match item {
            Item::Operand(word) => operands.push(word),
            Item::Opt("f", _) => {}
            Item::Opt("m", value) => {
                hosts.extend(value.unwrap_or_default().split_whitespace().map(str::to_owned))
            }
            Item::Opt(_, _) => return Ok(None),
        }
    }
    if hosts.is_empty() {
        return Err(("-m \"host_name ...\" must be given".to_owned(), true));
    }
    let [job] = operands.as_slice() else {
        return Err(("one job must be named".to_owned(), true));
    };
    let jobs = crate::control::job_operands(std::slice::from_ref(job)).map_err(|message| (message, false))?;
    Ok(Some(JobControlRequest { jobs, action: JobControlAction::Run { hosts } }))
}

/// Runs `brun` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("brun", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    crate::control::run(term, "brun", USAGE, &args, parse_args(&args))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lava_batch_wire::WireJobRef;

    fn parse(args: &[&str]) -> term::Parsed<JobControlRequest> {
        parse_args(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    // Goal: -m takes a quoted list of hosts (or several -m), one job is named;
    // every other form is refused before anything is sent.
    #[test]
    fn hosts_then_one_job() {
        let request =
            parse(&["-m", "hostA hostB", "-m", "hostC", "7[2]"]).expect("valid").expect("a request");
        assert_eq!(request.jobs, vec![WireJobRef { job_id: 7, array_index: 2 }]);
        let hosts = ["hostA", "hostB", "hostC"].map(str::to_owned).to_vec();
        assert_eq!(request.action, JobControlAction::Run { hosts });
        assert!(parse(&["-f", "-m", "hostA", "3"]).expect("valid").is_some());
        assert!(matches!(parse(&["3"]), Err((_, true))), "no -m");
        assert!(matches!(parse(&["-m", " ", "3"]), Err((_, true))), "no host in -m");
        assert!(matches!(parse(&["-m", "hostA"]), Err((_, true))), "no job");
        assert!(matches!(parse(&["-m", "hostA", "3", "4"]), Err((_, true))), "two jobs");
        assert_eq!(parse(&["-m", "hostA", "x"]), Err(("x: Illegal job ID.".into(), false)));
        assert_eq!(parse(&["-m", "hostA", "0"]), Err(("0: Illegal job ID.".into(), false)));
        assert!(matches!(parse(&["-b", "-m", "hostA", "3"]), Err((_, true))));
        assert_eq!(parse(&["-h"]), Ok(None));
        assert_eq!(parse(&["-V"]), Ok(None));
    }
}
