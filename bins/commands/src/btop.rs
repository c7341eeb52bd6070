//! `btop` and `bbot`: move a pending job within its queue.
//!
//! ```text
//! btop [-h] [-V] [-u] jobId | "jobId[index]" [position]
//! bbot [-h] [-V] [-u] jobId | "jobId[index]" [position]
//! ```
//!
//! `btop` places the job at `position` (1 by default: first) counted from the
//! top of its queue's pending jobs, `bbot` from the bottom. As in LSF, a user
//! moves his job relative to his own pending jobs only, an administrator
//! relative to every job of the queue (with `-u`, relative to the owner's jobs;
//! a user's `-u` changes nothing); the dispatch order follows. The answer
//! is `Job <N> has been moved to position P from top.` (or `bottom`), or
//! `Job <N>: why` on standard error (exit 255).

use std::process::ExitCode;

use lava_batch_wire::{JobControlAction, JobControlRequest};

use crate::args::{self, Item, OptSpec, Order};
use crate::term::{self, Term};

/// The options the command accepts; its man page (lava-man) is checked against them.
pub const SPECS: &[OptSpec] = &[OptSpec::flag("h"), OptSpec::flag("V"), OptSpec::flag("u")];

/// The command's usage (standard error); `to_top` picks `btop` or `bbot`.
pub fn usage(to_top: bool) -> String {
    let name = if to_top { "btop" } else { "bbot" };
    format!("Usage: {name} [-h] [-V] [-u] jobId | \"jobId[index]\" [position]\n")
}

/// Parses the arguments: `Ok(None)` for `-h`/`-V`, else the request; an error is
/// the message to print (with the usage when `true`).
pub fn parse_args(to_top: bool, args: &[String]) -> Result<Option<JobControlRequest>, (String, bool)> {
    let items = args::scan(args, SPECS, Order::Permute).map_err(|error| (error.0, true))?;
    let mut operands = Vec::new();
    let mut owner_list = false;
    for item in items {
        match item {
            Item::Operand(word) => operands.push(word),
            Item::Opt("u", _) => owner_list = true,
            Item::Opt(_, _) => return Ok(None),
        }
    }
    let (job, position) = match operands.as_slice() {
        [job] => (job, 1),
        [job, position] => {
            let position = position.parse::<u32>().ok().filter(|p| *p >= 1).ok_or_else(|| {
                (format!("{position}: Invalid position; it must be a positive integer"), false)
            })?;
            (job, position)
        }
        _ => return Err(("one job and at most one position must be named".to_owned(), true)),
    };
    let jobs = crate::control::job_operands(std::slice::from_ref(job)).map_err(|message| (message, false))?;
    Ok(Some(JobControlRequest { jobs, action: JobControlAction::Move { to_top, position, owner_list } }))
}

/// Runs `btop` (`to_top`) or `bbot` with this process's arguments.
pub fn run_main(to_top: bool) -> ExitCode {
    let name = if to_top { "btop" } else { "bbot" };
    term::main_with(name, |term: &mut Term, args: Vec<String>| {
        crate::control::run(term, name, &usage(to_top), &args, parse_args(to_top, &args))
    })
}

/// Runs `btop` with this process's arguments.
pub fn main() -> ExitCode {
    run_main(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lava_batch_wire::WireJobRef;

    fn parse(to_top: bool, args: &[&str]) -> Result<Option<JobControlRequest>, (String, bool)> {
        parse_args(to_top, &args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    // Goal: a job and an optional position (1 by default); errors before sending.
    #[test]
    fn job_and_position() {
        let request = parse(true, &["7"]).expect("valid").expect("request");
        assert_eq!(request.jobs, vec![WireJobRef { job_id: 7, array_index: 0 }]);
        assert_eq!(request.action, JobControlAction::Move { to_top: true, position: 1, owner_list: false });
        let request = parse(false, &["-u", "7", "3"]).expect("valid").expect("request");
        assert_eq!(request.action, JobControlAction::Move { to_top: false, position: 3, owner_list: true });
        assert!(matches!(parse(true, &["7", "0"]), Err((_, false))));
        assert!(matches!(parse(true, &["7", "x"]), Err((_, false))));
        assert!(matches!(parse(true, &[]), Err((_, true))));
        assert!(matches!(parse(true, &["1", "2", "3"]), Err((_, true))));
        assert_eq!(parse(true, &["0"]), Err(("0: Illegal job ID.".into(), false)));
        assert_eq!(usage(false), "Usage: bbot [-h] [-V] [-u] jobId | \"jobId[index]\" [position]\n");
    }
}
