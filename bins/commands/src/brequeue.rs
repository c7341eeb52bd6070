//! `brequeue`: run jobs again under their ids, as LSF's does.
//!
//! ```text
//! brequeue [-h] [-V] [-a | -d | -e | -r | -p] [-H] [-J job_name] [-u user_name | -u all]
//!          [0 | jobId | "jobId[index]" ...]
//! ```
//!
//! Without a status option, as with `-r`, a running or suspended job (RUN,
//! USUSP, SSUSP) is killed through the signal pipeline and, when its run ends,
//! goes back to PEND under the same id instead of ending EXIT; `-d` requeues
//! DONE jobs, `-e` EXIT jobs, `-a` all three kinds, `-p` pending (PEND, PSUSP)
//! jobs. `-H` puts the requeued job in PSUSP (held) instead of PEND. A requeued
//! job goes after every job of its queue, as LSF orders it by its requeue time,
//! and keeps its submission, environment included (docs/batch.md, "Requeue").
//! Only the owner, root or a cluster administrator may requeue a job.
//!
//! Jobs are selected as `bkill` selects them ([`crate::bkill::selected_jobs`]):
//! job ids name jobs (an array id stands for its elements, `ID[i]` for one) and
//! then `-J`/`-u` are ignored; without ids, the most recently submitted job
//! (of the caller, or of `-u user|all`, named `-J name`) that the status
//! options select, as LSF's default is, and with job id `0` every such job.
//! Each job answers `Job <N> is being requeued` on standard output, or `Job
//! <N>: why` on standard error; nothing selected is `No matching job found`.
//! The exit status is 0 only when every job was requeued, else 255.

use std::process::ExitCode;

use lava_batch_ll::JobStatus;
use lava_batch_wire::{self as wire, JobControlAction, JobControlRequest};

use crate::args::{self, Item, OptSpec, Order};
use crate::bkill::Selector;
use crate::client::{self, Client};
use crate::term::{self, Term};

/// The usage text (standard error).
pub const USAGE: &str =
    "Usage: brequeue [-h] [-V] [-a | -d | -e | -r | -p] [-H] [-J job_name] [-u user_name | -u all]
                [0 | jobId | \"jobId[index]\" ...]
";

/// The options the command accepts; its man page (lava-man) is checked against them.
pub const SPECS: &[OptSpec] = &[
    OptSpec::flag("h"),
    OptSpec::flag("V"),
    OptSpec::flag("d"),
    OptSpec::flag("e"),
    OptSpec::flag("a"),
    OptSpec::flag("r"),
    OptSpec::flag("H"),
    OptSpec::flag("p"),
    OptSpec::value("J"),
    OptSpec::value("u"),
];

/// What the command line asks for: the request, and, when no job id names
/// the jobs, how to select them first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequeueOrder {
    /// The request (its jobs filled in by the selection, when there is one).
    pub request: JobControlRequest,
    /// `-J`/`-u` or `0` without job ids.
    pub select: Option<Selection>,
}

/// How jobs are selected without job ids (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// `-J`.
    pub selector: Selector,
    /// `-u`: empty for the caller, `all`, or a user name.
    pub user: String,
    /// Job id `0`: every matching job, not only the most recent one.
    pub all_jobs: bool,
}

/// Parses the arguments: `Ok(None)` for `-h`/`-V` (answered by the caller),
/// else the order; an error is the message to print (with the usage when `true`).
pub fn parse_args(args: &[String]) -> Result<Option<RequeueOrder>, (String, bool)> {
    let items = args::scan(args, SPECS, Order::Permute).map_err(|error| (error.0, true))?;
    let (mut done, mut exit, mut running, mut pending, mut hold) = (false, false, false, false, false);
    let (mut selector, mut user) = (Selector::default(), String::new());
    let mut operands = Vec::new();
    for item in items {
        match item {
            Item::Operand(word) => operands.push(word),
            Item::Opt("d", _) => done = true,
            Item::Opt("e", _) => exit = true,
            Item::Opt("r", _) => running = true,
            Item::Opt("a", _) => (done, exit, running) = (true, true, true),
            Item::Opt("H", _) => hold = true,
            Item::Opt("p", _) => pending = true,
            Item::Opt(name @ ("J" | "u"), value) => {
                let value = value
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| (format!("option -{name} needs a value"), true))?;
                if name == "J" {
                    selector.job_name = value;
                } else {
                    user = value;
                }
            }
            Item::Opt(_, _) => return Ok(None),
        }
    }
    if !done && !exit && !pending {
        // LSF's default: running and suspended jobs.
        running = true;
    }
    let (jobs, all_jobs) = if operands.is_empty() {
        (Vec::new(), false)
    } else {
        crate::jobid::parse_all(&operands).map_err(|m| (m, false))?
    };
    let select = (all_jobs || jobs.is_empty()).then_some(Selection { selector, user, all_jobs });
    let jobs = if select.is_some() { Vec::new() } else { jobs };
    let action = JobControlAction::Requeue { done, exit, running, pending, hold };
    Ok(Some(RequeueOrder { request: JobControlRequest { jobs, action }, select }))
}

/// Whether `-d`/`-e`/`-r`/`-p` of `action` select a job shown with status bits `status`.
pub fn selects(action: &JobControlAction, status: u32) -> bool {
    let JobControlAction::Requeue { done, exit, running, pending, .. } = *action else { return false };
    match JobStatus::from_bits(status) {
        Some(JobStatus::Done) => done,
        Some(JobStatus::Exit) => exit,
        Some(JobStatus::Run | JobStatus::Ususp | JobStatus::Ssusp) => running,
        Some(JobStatus::Pend | JobStatus::Psusp) => pending,
        _ => false,
    }
}

/// Runs `brequeue` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("brequeue", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let (mut request, selection) = match parse_args(&args) {
        Ok(Some(RequeueOrder { request, select: Some(selection) })) => (request, selection),
        parsed => {
            let parsed = parsed.map(|order| order.map(|order| order.request));
            return crate::control::run(term, "brequeue", USAGE, &args, parsed);
        }
    };
    let selected =
        client::load_config().and_then(|config| Client::from_env(&config)).and_then(|mut client| {
            let who = (selection.user.as_str(), selection.all_jobs);
            crate::bkill::selected_jobs(
                &mut client,
                who,
                wire::state_filter::ALL,
                &selection.selector,
                |info| selects(&request.action, info.status),
            )
        });
    match selected {
        Ok(jobs) if jobs.is_empty() => {
            term.err("No matching job found\n");
            false
        }
        Ok(jobs) => {
            request.jobs = jobs;
            crate::control::send(term, &request)
        }
        Err(error) => {
            term.err(&format!("{error}\n"));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lava_batch_wire::WireJobRef;

    type Parsed = Result<Option<RequeueOrder>, (String, bool)>;

    fn parse(args: &[&str]) -> Parsed {
        parse_args(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    fn order(args: &[&str]) -> RequeueOrder {
        parse(args).expect("valid").expect("an order")
    }

    fn action(args: &[&str]) -> JobControlAction {
        order(args).request.action
    }

    fn requeue(done: bool, exit: bool, running: bool, hold: bool) -> JobControlAction {
        JobControlAction::Requeue { done, exit, running, pending: false, hold }
    }

    // Goal: LSF's status options: running jobs by default and with -r, -d DONE,
    // -e EXIT, -a all three; -H holds; the jobs are named in order.
    #[test]
    fn statuses_then_jobs() {
        let named = order(&["-e", "3", "4[2]"]);
        assert_eq!(
            named.request.jobs,
            vec![WireJobRef { job_id: 3, array_index: 0 }, WireJobRef { job_id: 4, array_index: 2 }]
        );
        assert_eq!(named.select, None);
        assert_eq!(named.request.action, requeue(false, true, false, false));
        assert_eq!(action(&["3"]), requeue(false, false, true, false));
        assert_eq!(action(&["-r", "3"]), requeue(false, false, true, false));
        assert_eq!(action(&["-d", "3"]), requeue(true, false, false, false));
        assert_eq!(action(&["-d", "-e", "3"]), requeue(true, true, false, false));
        assert_eq!(action(&["-d", "-r", "3"]), requeue(true, false, true, false));
        assert_eq!(action(&["3", "-a"]), requeue(true, true, true, false));
        assert_eq!(action(&["-H", "3"]), requeue(false, false, true, true));
        assert_eq!(action(&["-e", "-H", "3"]), requeue(false, true, false, true));
        let pending =
            JobControlAction::Requeue { done: false, exit: false, running: false, pending: true, hold: true };
        assert_eq!(action(&["-p", "-H", "3"]), pending);
        assert_eq!(parse(&["-h"]), Ok(None));
        assert_eq!(parse(&["-V"]), Ok(None));
    }

    // Goal: -J, -u and job id 0 select as bkill does: without ids the most
    // recent matching job, with 0 all of them; named jobs ignore the selectors.
    #[test]
    fn selectors_as_bkill() {
        let select = |name: &str, user: &str, all_jobs| {
            let selector = Selector { job_name: name.to_owned(), ..Selector::default() };
            Some(Selection { selector, user: user.to_owned(), all_jobs })
        };
        let last = order(&["-J", "sim"]);
        assert_eq!((last.request.jobs.clone(), last.select), (vec![], select("sim", "", false)));
        assert_eq!(order(&["-u", "alice"]).select, select("", "alice", false));
        assert_eq!(order(&["-u", "all", "0"]).select, select("", "all", true));
        assert_eq!(order(&["-J", "sim", "-u", "all", "0", "7"]).select, select("sim", "all", true));
        assert_eq!(order(&["0"]).select, select("", "", true));
        // LSF's default without ids: the caller's most recent job.
        assert_eq!(order(&[]).select, select("", "", false));
        assert_eq!(order(&["-e"]).select, select("", "", false));
        let named = order(&["-u", "all", "7"]);
        assert_eq!(
            (named.request.jobs, named.select),
            (vec![WireJobRef { job_id: 7, array_index: 0 }], None)
        );
    }

    // Goal: the usage text LSF's brequeue prints, two lines on standard error.
    #[test]
    fn usage_is_lsfs() {
        assert_eq!(
            USAGE,
            "Usage: brequeue [-h] [-V] [-a | -d | -e | -r | -p] [-H] [-J job_name] [-u user_name | -u all]\n                [0 | jobId | \"jobId[index]\" ...]\n"
        );
    }

    // Goal: bad command lines are refused before anything is sent: an empty
    // -J/-u, an unknown option, a bad job id.
    #[test]
    fn bad_command_lines() {
        assert!(matches!(parse(&["-J"]), Err((_, true))));
        assert_eq!(parse(&["-u", "", "3"]), Err(("option -u needs a value".into(), true)));
        assert!(matches!(parse(&["-x", "3"]), Err((_, true))));
        assert_eq!(parse(&["-e", "x"]), Err(("x: Illegal job ID.".into(), false)));
    }

    // Goal: the status options decide which selected jobs are kept.
    #[test]
    fn status_options_filter_the_selection() {
        let bits = |status: JobStatus| status.bits();
        let running = requeue(false, false, true, false);
        assert!(selects(&running, bits(JobStatus::Run)));
        assert!(selects(&running, bits(JobStatus::Ususp)));
        assert!(selects(&running, bits(JobStatus::Ssusp)));
        assert!(!selects(&running, bits(JobStatus::Done)));
        assert!(!selects(&running, bits(JobStatus::Pend)));
        let pending = JobControlAction::Requeue {
            done: false,
            exit: false,
            running: false,
            pending: true,
            hold: false,
        };
        assert!(selects(&pending, bits(JobStatus::Pend)) && selects(&pending, bits(JobStatus::Psusp)));
        assert!(!selects(&pending, bits(JobStatus::Run)));
        let finished = requeue(true, true, false, false);
        assert!(selects(&finished, bits(JobStatus::Exit)) && selects(&finished, bits(JobStatus::Done)));
        assert!(!selects(&finished, bits(JobStatus::Run)));
        assert!(!selects(&requeue(false, true, false, false), bits(JobStatus::Done)));
    }
}
