//! `brequeue`: run finished jobs again under their ids.
//!
//! ```text
//! brequeue [-h] [-V] [-d] [-e] [-a] jobId | "jobId[index]" ...
//! ```
//!
//! mbatchd puts a DONE (`-d`) or EXIT (`-e`) job, or either (`-a`), back to
//! PEND for its owner or an administrator; it is dispatched again with the
//! same job id: `Job <N> is being requeued` on standard output, else
//! `Job <N>: why` on standard error (exit 255). A job id naming an array
//! stands for its elements, `ID[i]` for one. LSF's `-r` (and its default,
//! requeueing running jobs) is not supported, nor `-H`, `-p`, `-J`, `-u` or
//! job id `0`: name the finished jobs and say which statuses to requeue.

use std::process::ExitCode;

use lava_batch_wire::{JobControlAction, JobControlRequest};

use crate::args::{self, Item, OptSpec, Order};
use crate::term::{self, Term};

/// The usage text (standard error).
pub const USAGE: &str = "Usage: brequeue [-h] [-V] [-d] [-e] [-a] jobId | \"jobId[index]\" ...\n";

const SPECS: &[OptSpec] =
    &[OptSpec::flag("h"), OptSpec::flag("V"), OptSpec::flag("d"), OptSpec::flag("e"), OptSpec::flag("a")];

/// Parses the arguments: `Ok(None)` for `-h`/`-V` (already answered by the caller),
/// else the request; an error is the message to print (with the usage when `true`).
pub fn parse_args(args: &[String]) -> Result<Option<JobControlRequest>, (String, bool)> {
    let items = args::scan(args, SPECS, Order::Permute).map_err(|error| (error.0, true))?;
    let (mut done, mut exit) = (false, false);
    let mut operands = Vec::new();
    for item in items {
        match item {
            Item::Operand(word) => operands.push(word),
            Item::Opt("d", _) => done = true,
            Item::Opt("e", _) => exit = true,
            Item::Opt("a", _) => (done, exit) = (true, true),
            Item::Opt(_, _) => return Ok(None),
        }
    }
    if !done && !exit {
        let message = "requeueing running jobs (-r) is not supported; use -d, -e or -a for finished jobs";
        return Err((message.to_owned(), true));
    }
    if operands.is_empty() {
        return Err(("at least one job must be named".to_owned(), true));
    }
    let jobs = crate::control::job_operands(&operands).map_err(|message| (message, false))?;
    Ok(Some(JobControlRequest { jobs, action: JobControlAction::Requeue { done, exit } }))
}

/// Runs `brequeue` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("brequeue", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    crate::control::run(term, "brequeue", USAGE, &args, parse_args(&args))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lava_batch_wire::WireJobRef;

    fn parse(args: &[&str]) -> Result<Option<JobControlRequest>, (String, bool)> {
        parse_args(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    fn action(request: Result<Option<JobControlRequest>, (String, bool)>) -> JobControlAction {
        request.expect("valid").expect("a request").action
    }

    // Goal: -d, -e and -a select the statuses; the jobs are named; errors before sending.
    #[test]
    fn statuses_then_jobs() {
        let request = parse(&["-e", "3", "4[2]"]).expect("valid").expect("a request");
        assert_eq!(
            request.jobs,
            vec![WireJobRef { job_id: 3, array_index: 0 }, WireJobRef { job_id: 4, array_index: 2 }]
        );
        assert_eq!(request.action, JobControlAction::Requeue { done: false, exit: true });
        assert_eq!(action(parse(&["-d", "3"])), JobControlAction::Requeue { done: true, exit: false });
        assert_eq!(action(parse(&["-d", "-e", "3"])), JobControlAction::Requeue { done: true, exit: true });
        assert_eq!(action(parse(&["3", "-a"])), JobControlAction::Requeue { done: true, exit: true });
        assert!(matches!(parse(&["3"]), Err((_, true))));
        assert!(matches!(parse(&["-e"]), Err((_, true))));
        assert_eq!(parse(&["-e", "x"]), Err(("x: Illegal job ID.".into(), false)));
        assert_eq!(parse(&["-e", "0"]), Err(("0: Illegal job ID.".into(), false)));
        assert!(matches!(parse(&["-r", "1"]), Err((_, true))));
        assert_eq!(parse(&["-h"]), Ok(None));
    }
}
