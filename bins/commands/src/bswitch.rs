//! `bswitch`: move jobs to another queue.
//!
//! ```text
//! bswitch [-h] [-V] queue_name jobId | "jobId[index]" ...
//! ```
//!
//! mbatchd switches a pending job, or a running one whose start sbatchd has
//! accepted, to an open queue whose hosts the job may use, for its owner or an
//! administrator: `Job <N> is switched to queue <q>` on standard output, else
//! `Job <N>: why` on standard error (exit 255). LSF's `-q`, `-m`, `-u` and `-J`
//! selectors (and `0`) are not supported: name the jobs.

use std::process::ExitCode;

use lava_batch_wire::{JobControlAction, JobControlRequest};

use crate::args::{self, Item, OptSpec, Order};
use crate::term::{self, Term};

/// The usage text (standard error).
pub const USAGE: &str = "Usage: bswitch [-h] [-V] queue_name jobId | \"jobId[index]\" ...\n";

/// The options the command accepts; its man page (lava-man) is checked against them.
pub const SPECS: &[OptSpec] = &[OptSpec::flag("h"), OptSpec::flag("V")];

/// Parses the arguments: `Ok(None)` for `-h`/`-V` (already answered by the caller),
/// else the request; an error is the message to print (with the usage when `true`).
pub fn parse_args(args: &[String]) -> Result<Option<JobControlRequest>, (String, bool)> {
    let items = args::scan(args, SPECS, Order::Permute).map_err(|error| (error.0, true))?;
    let mut operands = Vec::new();
    for item in items {
        match item {
            Item::Operand(word) => operands.push(word),
            Item::Opt(_, _) => return Ok(None),
        }
    }
    let Some((queue, jobs)) = operands.split_first().filter(|(_, jobs)| !jobs.is_empty()) else {
        return Err(("a queue and at least one job must be named".to_owned(), true));
    };
    let jobs = crate::control::job_operands(jobs).map_err(|message| (message, false))?;
    Ok(Some(JobControlRequest { jobs, action: JobControlAction::Switch { queue: queue.clone() } }))
}

/// Runs `bswitch` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("bswitch", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    crate::control::run(term, "bswitch", USAGE, &args, parse_args(&args))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lava_batch_wire::WireJobRef;

    fn parse(args: &[&str]) -> Result<Option<JobControlRequest>, (String, bool)> {
        parse_args(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    // Goal: the first operand is the queue, the rest are jobs; errors before sending.
    #[test]
    fn queue_then_jobs() {
        let request = parse(&["night", "3", "4[2]"]).expect("valid").expect("a request");
        assert_eq!(
            request.jobs,
            vec![WireJobRef { job_id: 3, array_index: 0 }, WireJobRef { job_id: 4, array_index: 2 }]
        );
        assert_eq!(request.action, JobControlAction::Switch { queue: "night".into() });
        assert!(matches!(parse(&["night"]), Err((_, true))));
        assert!(matches!(parse(&[]), Err((_, true))));
        assert_eq!(parse(&["night", "x"]), Err(("x: Illegal job ID.".into(), false)));
        assert!(matches!(parse(&["-z", "night", "1"]), Err((_, true))));
        assert_eq!(parse(&["-h"]), Ok(None));
    }
}
