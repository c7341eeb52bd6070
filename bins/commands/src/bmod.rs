//! `bmod`: change the submission options of a pending job.
//!
//! ```text
//! bmod [-h] [-V] [-q queue | -qn] [-J name | -Jn] [-n slots | -nn]
//!      [-W [hh:]mm | -Wn] [-M mem | -Mn] [-R res_req | -Rn] jobId | "jobId[index]"
//! ```
//!
//! Each option takes the value `bsub` would (the same parsers: `-W` in
//! minutes or `hh:mm`, `-M` in `LSF_UNIT_FOR_LIMITS` or with a unit); the
//! `-Xn` form clears the option (`-qn` is refused: a job always has a queue).
//! mbatchd changes only pending jobs, for their owner or an administrator, and
//! answers `Parameters of job <N> are being changed` (standard output) or
//! `Job <N>: why` (standard error, exit 255). The `-R` string travels as typed;
//! mbatchd validates it as it validates `bsub -R`.

use std::process::ExitCode;

use lava_batch_wire::{self as wire, JobControlAction, JobControlRequest};
use lava_conf::LimitUnit;

use crate::args::{self, Item, OptSpec, Order, UsageError};
use crate::bsub::{parse_mem_limit_kb, parse_run_limit, parse_slots};
use crate::client;
use crate::term::{self, Term};

/// The usage text (standard error).
pub const USAGE: &str = "Usage: bmod [-h] [-V] [-q queue_name] [-J job_name | -Jn] [-n num_processors | -nn]\n            \
     [-W [hour:]minute | -Wn] [-M mem_limit | -Mn] [-R \"res_req\" | -Rn]\n            jobId | \"jobId[index]\"\n";

/// The options the command accepts; its man page (lava-man) is checked against them.
pub const SPECS: &[OptSpec] = &[
    OptSpec::flag("h"),
    OptSpec::flag("V"),
    OptSpec::value("q"),
    OptSpec::flag("qn"),
    OptSpec::value("J"),
    OptSpec::flag("Jn"),
    OptSpec::value("n"),
    OptSpec::flag("nn"),
    OptSpec::value("W"),
    OptSpec::flag("Wn"),
    OptSpec::value("M"),
    OptSpec::flag("Mn"),
    OptSpec::value("R"),
    OptSpec::flag("Rn"),
];

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invocation {
    /// `-h`.
    Help,
    /// `-V`.
    Version,
    /// Change a job.
    Modify(JobControlRequest),
}

/// Why the arguments cannot be used: syntax (printed with the usage) or a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BmodError {
    /// Syntax.
    Usage(UsageError),
    /// A value, with LSF's message.
    Value(String),
}

/// Parses the arguments (without the program name); `-M` numbers are in `unit`.
pub fn parse_args(args: &[String], unit: LimitUnit) -> Result<Invocation, BmodError> {
    let usage = |message: &str| BmodError::Usage(UsageError(message.to_owned()));
    let items = args::scan(args, SPECS, Order::Permute).map_err(BmodError::Usage)?;
    let mut modify = wire::JobModify::default();
    let mut operands = Vec::new();
    for item in items {
        match item {
            Item::Operand(word) => operands.push(word),
            Item::Opt("h", _) => return Ok(Invocation::Help),
            Item::Opt("V", _) => return Ok(Invocation::Version),
            Item::Opt("qn", _) => return Err(usage("-qn: a job always has a queue; name one with -q")),
            Item::Opt("q", value) => modify.queue = value,
            Item::Opt("J", value) => modify.job_name = value,
            Item::Opt("Jn", _) => modify.job_name = Some(String::new()),
            Item::Opt("n", value) => {
                modify.n_slots = Some(parse_slots(&value.unwrap_or_default()).map_err(BmodError::Value)?)
            }
            Item::Opt("nn", _) => modify.n_slots = Some(0),
            Item::Opt("W", value) => {
                modify.run_limit_s =
                    Some(parse_run_limit(&value.unwrap_or_default()).map_err(BmodError::Value)?)
            }
            Item::Opt("Wn", _) => modify.run_limit_s = Some(0),
            Item::Opt("M", value) => {
                let kb = parse_mem_limit_kb(&value.unwrap_or_default(), unit).map_err(BmodError::Value)?;
                modify.mem_limit_kb = Some(kb);
            }
            Item::Opt("Mn", _) => modify.mem_limit_kb = Some(0),
            Item::Opt("R", value) => modify.res_req = value,
            Item::Opt("Rn", _) => modify.res_req = Some(String::new()),
            Item::Opt(name, _) => return Err(usage(&format!("illegal option -- {name}"))),
        }
    }
    let jobs = crate::control::job_operands(&operands).map_err(BmodError::Value)?;
    if jobs.len() != 1 {
        return Err(usage("exactly one job must be named"));
    }
    if modify == wire::JobModify::default() {
        return Err(usage("no option to change was given"));
    }
    Ok(Invocation::Modify(JobControlRequest { jobs, action: JobControlAction::Modify(modify) }))
}

/// Runs `bmod` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("bmod", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let unit = match client::load_config() {
        Ok(config) => config.lsf.unit_for_limits,
        Err(error) => {
            term.err(&format!("bmod: {error}\n"));
            return false;
        }
    };
    match parse_args(&args, unit) {
        Ok(Invocation::Help) => {
            term.err(USAGE);
            true
        }
        Ok(Invocation::Version) => {
            term.err(term::VERSION_LINE);
            true
        }
        Ok(Invocation::Modify(request)) => crate::control::send(term, &request),
        Err(BmodError::Usage(UsageError(message))) => {
            term.err(&format!("bmod: {message}\n{USAGE}"));
            false
        }
        Err(BmodError::Value(message)) => {
            term.err(&format!("{message}. Job not modified.\n"));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Invocation, BmodError> {
        parse_args(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>(), LimitUnit::Mb)
    }

    fn modify(args: &[&str]) -> wire::JobModify {
        match parse(args) {
            Ok(Invocation::Modify(JobControlRequest { action: JobControlAction::Modify(m), jobs })) => {
                assert_eq!(jobs, vec![wire::WireJobRef { job_id: 5, array_index: 0 }]);
                m
            }
            other => panic!("{args:?}: {other:?}"),
        }
    }

    // Goal: each option maps to its change with bsub's units; -Xn clears.
    #[test]
    fn options_become_changes() {
        let m =
            modify(&["-q", "night", "-J", "x", "-n", "4", "-W", "1:30", "-M", "2", "-R", "select[ok]", "5"]);
        assert_eq!(
            m,
            wire::JobModify {
                queue: Some("night".into()),
                job_name: Some("x".into()),
                n_slots: Some(4),
                run_limit_s: Some(90 * 60),
                mem_limit_kb: Some(2 * 1024),
                res_req: Some("select[ok]".into()),
            }
        );
        let cleared = modify(&["-Wn", "-Mn", "-Rn", "-Jn", "-nn", "5"]);
        assert_eq!(
            cleared,
            wire::JobModify {
                queue: None,
                job_name: Some(String::new()),
                n_slots: Some(0),
                run_limit_s: Some(0),
                mem_limit_kb: Some(0),
                res_req: Some(String::new()),
            }
        );
    }

    // Goal: bad command lines are refused before anything is sent.
    #[test]
    fn bad_arguments() {
        let usage = |args: &[&str]| matches!(parse(args), Err(BmodError::Usage(_)));
        assert!(usage(&["5"]));
        assert!(usage(&["-W", "10"]));
        assert!(usage(&["-W", "10", "5", "6"]));
        assert!(usage(&["-qn", "5"]));
        assert!(usage(&["-x", "5"]));
        assert_eq!(
            parse(&["-W", "abc", "5"]),
            Err(BmodError::Value("abc: Bad RUNLIMIT specification".into()))
        );
        assert_eq!(parse(&["-n", "0", "5"]), Err(BmodError::Value("0: Bad number of processors".into())));
        assert_eq!(parse(&["-W", "10", "x5"]), Err(BmodError::Value("x5: Illegal job ID.".into())));
        assert_eq!(parse(&["-W", "10", "0"]), Err(BmodError::Value("0: Illegal job ID.".into())));
        assert_eq!(parse(&["-h"]), Ok(Invocation::Help));
    }
}
