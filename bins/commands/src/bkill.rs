//! `bkill`, `bstop` and `bresume`: act on jobs. In Lava they are one program
//! that picks its action from its name; here they share this module.
//!
//! ```text
//! bkill   [-h] [-V] [-l] [-r | -s signal] [-u user | -u all] 0 | jobId | "jobId[index]" ...
//! bstop   [-h] [-V] [-u user | -u all] 0 | jobId | "jobId[index]" ...
//! bresume [-h] [-V] [-u user | -u all] 0 | jobId | "jobId[index]" ...
//! ```
//!
//! - `bkill` asks for LSF's kill (SIGINT, SIGTERM, SIGKILL spaced by
//!   JOB_TERMINATE_INTERVAL, carried out by sbatchd); `-s` sends one signal
//!   (see [`crate::signal`]: KILL, STOP and CONT are the kill, stop and resume
//!   actions); `-r` (LSF's forced removal) sends the same kill and has
//!   mbatchd mark the job EXIT at once, without waiting for its execution host
//!   (a JOB_CONTROL `ForceExit` instead of SIGNAL_JOBS; for a job whose host is
//!   down or whose kill does not end); `-l` lists the names.
//! - `bstop` suspends, `bresume` resumes.
//! - `0` is every unfinished job of the caller, or of `-u user` / `-u all`.
//! - `-J name`, `-q queue`, `-m host` (and `-u` alone) select jobs as LSF's do:
//!   with `0` every unfinished job that matches them all, without a job id the
//!   most recently submitted one (an array: all its elements); with job ids
//!   they are ignored. The command asks JOB_QUERY which jobs match, then
//!   signals those by id.
//!
//! One line per job, as Lava's cmd.sig.c and lsb.err.c word them: on standard
//! output `Job <N> is being terminated` (stopped, resumed, signaled); on
//! standard error `Job <N>: No matching job found`, `Job <N>: Job has already
//! finished`, `Job <N>: User permission denied`, `Job <N>: Job has not started
//! yet`. `0` with nothing to act on: `No unfinished job found`. The exit
//! status is 0 when at least one job was acted on and none failed, else 255.

use std::process::ExitCode;

use lava_batch_wire::{self as wire, Operation, SignalAction, SignalRequest, SignalRequestOutcome};

use crate::args::{self, Item, OptSpec, Order, UsageError};
use crate::client::{self, Client};
use crate::jobid;
use crate::signal;
use crate::term::{self, Term};

/// Which of the three commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `bkill`.
    Kill,
    /// `bstop`.
    Stop,
    /// `bresume`.
    Resume,
}

impl Mode {
    /// The command's name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Kill => "bkill",
            Mode::Stop => "bstop",
            Mode::Resume => "bresume",
        }
    }

    /// The usage text (standard error).
    pub fn usage(self) -> String {
        let options = match self {
            Mode::Kill => "[-h] [-V] [-l] [-r | -s sigval] [-u user_name | -u all]",
            Mode::Stop | Mode::Resume => "[-h] [-V] [-u user_name | -u all]",
        };
        let indent = " ".repeat("Usage: ".len() + self.name().len() + 1);
        format!("Usage: {} {options}\n{indent}[0 | jobId | \"jobId[index]\" ...]\n", self.name())
    }

    fn default_action(self) -> (SignalAction, &'static str) {
        match self {
            Mode::Kill => (SignalAction::Terminate, "terminated"),
            Mode::Stop => (SignalAction::Stop, "stopped"),
            Mode::Resume => (SignalAction::Continue, "resumed"),
        }
    }
}

/// The options the command accepts; its man page (lava-man) is checked against them.
pub const SPECS: &[OptSpec] = &[
    OptSpec::flag("h"),
    OptSpec::flag("V"),
    OptSpec::flag("l"),
    OptSpec::flag("r"),
    OptSpec::value("s"),
    OptSpec::value("u"),
    OptSpec::value("q"),
    OptSpec::value("m"),
    OptSpec::value("J"),
];

/// What to do to which jobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignalOrder {
    /// The request for mbatchd.
    pub request: SignalRequest,
    /// The verb of the success line.
    pub verb: &'static str,
    /// `-J`/`-q`/`-m` (or `-u` without job ids): the jobs are looked up first;
    /// `None` when job ids name them.
    pub select: Option<Selector>,
    /// `-r`: the jobs are removed at once (JOB_CONTROL `ForceExit`).
    pub force: bool,
}

/// LSF's job selectors of `bkill`/`bstop`/`bresume`; empty fields match any job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    /// `-J`.
    pub job_name: String,
    /// `-q`.
    pub queue: String,
    /// `-m`.
    pub host: String,
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invocation {
    /// `-h`.
    Help,
    /// `-V`.
    Version,
    /// `bkill -l`.
    ListSignals,
    /// Act on jobs.
    Signal(SignalOrder),
}

/// Why the arguments cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BkillError {
    /// Syntax: message and usage.
    Usage(UsageError),
    /// A value: the message alone (`12x: Illegal job ID.`).
    Value(String),
}

/// Parses the arguments of `mode` (without the program name).
pub fn parse_args(mode: Mode, args: &[String]) -> Result<Invocation, BkillError> {
    let usage = |message: String| BkillError::Usage(UsageError(message));
    let items = args::scan(args, SPECS, Order::Permute).map_err(BkillError::Usage)?;
    let (mut action, mut verb) = mode.default_action();
    let mut user = String::new();
    let mut signal_given = false;
    let mut force = false;
    let mut selector = Selector::default();
    let mut operands = Vec::new();
    for item in items {
        match item {
            Item::Operand(word) => operands.push(word),
            Item::Opt("h", _) => return Ok(Invocation::Help),
            Item::Opt("V", _) => return Ok(Invocation::Version),
            Item::Opt(name @ ("l" | "r" | "s"), _) if mode != Mode::Kill => {
                return Err(usage(format!("illegal option -- {name}")));
            }
            Item::Opt("l", _) => return Ok(Invocation::ListSignals),
            Item::Opt("r", _) => force = true,
            Item::Opt("s", value) => {
                let number = signal::parse(&value.unwrap_or_default()).map_err(BkillError::Value)?;
                (action, verb) = signal::action(number);
                signal_given = true;
            }
            Item::Opt("u", value) => {
                user = value
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| usage("option -u needs a user".to_owned()))?;
            }
            Item::Opt(name @ ("J" | "q" | "m"), value) => {
                let value = value
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| usage(format!("option -{name} needs a value")))?;
                match name {
                    "J" => selector.job_name = value,
                    "q" => selector.queue = value,
                    _ => selector.host = value,
                }
            }
            Item::Opt(name, _) => return Err(usage(format!("illegal option -- {name}"))),
        }
    }
    let selecting = selector != Selector::default() || !user.is_empty();
    if force && signal_given {
        return Err(usage("-r and -s cannot be combined".to_owned()));
    }
    if operands.is_empty() && !selecting {
        return Err(usage("Job ID or 0 must be specified".to_owned()));
    }
    let (jobs, all_jobs) = if operands.is_empty() {
        (Vec::new(), false)
    } else {
        jobid::parse_all(&operands).map_err(BkillError::Value)?
    };
    // As in LSF, `0` among other ids means every job; named jobs ignore the selectors.
    let jobs = if all_jobs { Vec::new() } else { jobs };
    // Selectors pick the jobs when no id names them: with `0` only if there is a
    // selector besides `-u` (`-u user 0` is mbatchd's own `0`), without `0` always.
    let select = (jobs.is_empty() && (!all_jobs || selector != Selector::default())).then_some(selector);
    let request = SignalRequest { jobs, all_jobs, user, action };
    Ok(Invocation::Signal(SignalOrder { request, verb, select, force }))
}

/// The jobs `select` picks (see the module doc) among those of `user` (`-u`: empty
/// for the caller, `all`) that JOB_QUERY's `state_filter` and then `keep` accept:
/// every one with `all_jobs` (job id `0`), else the most recently submitted one
/// (an array: its elements); empty when none. `brequeue` selects the same way.
pub fn selected_jobs(
    client: &mut Client,
    (user, all_jobs): (&str, bool),
    state_filter: u32,
    select: &Selector,
    keep: impl Fn(&wire::JobInfo) -> bool,
) -> Result<Vec<wire::WireJobRef>, client::ClientError> {
    let query = wire::JobQuery {
        jobs: Vec::new(),
        user: user.to_owned(),
        state_filter,
        queue: select.queue.clone(),
        host: select.host.clone(),
        job_name: select.job_name.clone(),
        after_job: 0,
        after_index: 0,
    };
    let infos: Vec<wire::JobInfo> =
        crate::bjobs::all_pages(client, query)?.into_iter().filter(|info| keep(info)).collect();
    let mut jobs: Vec<wire::WireJobRef> = infos.iter().map(|info| info.job).collect();
    if !all_jobs {
        // The most recently submitted: by submission time, then id (ids wrap at
        // MAX_JOBID, so the highest id alone is not the newest job).
        let last =
            infos.iter().max_by_key(|info| (info.submit_time, info.job.job_id)).map(|info| info.job.job_id);
        jobs.retain(|job| Some(job.job_id) == last);
    }
    Ok(jobs)
}

/// The line for one job's outcome, and whether it succeeded (success lines go
/// to standard output, the others to standard error).
pub fn outcome_line(result: &wire::SignalResult, verb: &str) -> (bool, String) {
    let job = jobid::display(result.job);
    match result.outcome {
        SignalRequestOutcome::Accepted => (true, format!("Job <{job}> is being {verb}\n")),
        SignalRequestOutcome::NotFound => (false, format!("Job <{job}>: No matching job found\n")),
        SignalRequestOutcome::PermissionDenied => (false, format!("Job <{job}>: User permission denied\n")),
        SignalRequestOutcome::AlreadyFinished => (false, format!("Job <{job}>: Job has already finished\n")),
        SignalRequestOutcome::NotStarted => (false, format!("Job <{job}>: Job has not started yet\n")),
    }
}

/// The outcomes as LSF prints them: an array named by its id alone (or selected by
/// `0`) gets one line, not one per element — accepted when the action was accepted
/// for any element, else the first element's refusal.
pub fn per_array(request: &SignalRequest, results: &[wire::SignalResult]) -> Vec<wire::SignalResult> {
    let whole =
        |job_id: u32| request.all_jobs || request.jobs.contains(&wire::WireJobRef { job_id, array_index: 0 });
    let mut shown: Vec<wire::SignalResult> = Vec::new();
    for result in results {
        if result.job.array_index == 0 || !whole(result.job.job_id) {
            shown.push(result.clone());
            continue;
        }
        let array = wire::WireJobRef { job_id: result.job.job_id, array_index: 0 };
        match shown.iter_mut().find(|line| line.job == array) {
            Some(line) if result.outcome == SignalRequestOutcome::Accepted => line.outcome = result.outcome,
            Some(_) => {}
            None => shown.push(wire::SignalResult { job: array, outcome: result.outcome }),
        }
    }
    shown
}

/// Runs `mode` with this process's arguments.
pub fn run_main(mode: Mode) -> ExitCode {
    let mut term = Term::new();
    let ok = run(&mut term, mode);
    term.exit(ok)
}

/// Runs `bkill` with this process's arguments.
pub fn main() -> ExitCode {
    run_main(Mode::Kill)
}

fn run(term: &mut Term, mode: Mode) -> bool {
    let args = match term::arguments() {
        Ok(args) => args,
        Err(message) => {
            term.err(&format!("{}: {message}\n", mode.name()));
            return false;
        }
    };
    let mut order = match parse_args(mode, &args) {
        Ok(Invocation::Help) => {
            term.err(&mode.usage());
            return true;
        }
        Ok(Invocation::Version) => {
            term.err(term::VERSION_LINE);
            return true;
        }
        Ok(Invocation::ListSignals) => {
            term.out(&signal::names_line());
            return true;
        }
        Ok(Invocation::Signal(order)) => order,
        Err(BkillError::Usage(UsageError(message))) => {
            term.err(&format!("{}: {message}\n", mode.name()));
            term.err(&mode.usage());
            return false;
        }
        Err(BkillError::Value(message)) => {
            term.err(&format!("{message}\n"));
            return false;
        }
    };
    let mut forced: Option<Vec<wire::JobControlResult>> = None;
    let reply: wire::SignalReply =
        match client::load_config().and_then(|config| Client::from_env(&config)).and_then(|mut client| {
            // `-r` names its jobs by id: `0` is looked up as the selectors are.
            let select = order
                .select
                .clone()
                .or_else(|| (order.force && order.request.all_jobs).then(Selector::default));
            if let Some(select) = &select {
                let who = (order.request.user.as_str(), order.request.all_jobs);
                order.request.jobs =
                    selected_jobs(&mut client, who, wire::state_filter::UNFINISHED, select, |_| true)?;
                order.request.all_jobs = false;
                if order.request.jobs.is_empty() {
                    return Ok(wire::SignalReply { results: Vec::new() });
                }
            }
            if order.force {
                let request = wire::JobControlRequest {
                    jobs: order.request.jobs.clone(),
                    action: wire::JobControlAction::ForceExit,
                };
                let reply: wire::JobControlReply =
                    client.call(Operation::JobControl, Operation::JobControlReply, &request)?;
                forced = Some(reply.results);
                return Ok(wire::SignalReply { results: Vec::new() });
            }
            client.call(Operation::SignalJobs, Operation::SignalJobsReply, &order.request)
        }) {
            Ok(reply) => reply,
            Err(error) => {
                term.err(&format!("{error}\n"));
                return false;
            }
        };
    if let Some(results) = forced.filter(|results| !results.is_empty()) {
        return crate::control::print(term, &results);
    }
    if reply.results.is_empty() {
        term.err("No unfinished job found\n");
        return false;
    }
    let mut n_failed = 0;
    for result in &per_array(&order.request, &reply.results) {
        let (ok, line) = outcome_line(result, order.verb);
        if ok {
            term.out(&line);
        } else {
            n_failed += 1;
            term.err(&line);
        }
    }
    n_failed == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use lava_batch_wire::WireJobRef;

    // Goal: `bkill ID` of an array answers one line for the array, as LSF does,
    // while `bkill "ID[i]"` and plain jobs keep their own lines.
    #[test]
    fn an_array_named_by_its_id_gets_one_line() {
        let job = |job_id, array_index| WireJobRef { job_id, array_index };
        let result = |job, outcome| wire::SignalResult { job, outcome };
        let request = SignalRequest {
            jobs: vec![job(7, 0), job(8, 2), job(9, 0)],
            all_jobs: false,
            user: String::new(),
            action: wire::SignalAction::Terminate,
        };
        let results = [
            result(job(7, 1), SignalRequestOutcome::AlreadyFinished),
            result(job(7, 2), SignalRequestOutcome::Accepted),
            result(job(8, 2), SignalRequestOutcome::Accepted),
            result(job(9, 0), SignalRequestOutcome::NotFound),
        ];
        let lines: Vec<String> =
            per_array(&request, &results).iter().map(|r| outcome_line(r, "terminated").1).collect();
        assert_eq!(
            lines,
            [
                "Job <7> is being terminated\n",
                "Job <8[2]> is being terminated\n",
                "Job <9>: No matching job found\n"
            ]
        );
        let finished = [result(job(7, 1), SignalRequestOutcome::AlreadyFinished)];
        let lines: Vec<String> =
            per_array(&request, &finished).iter().map(|r| outcome_line(r, "terminated").1).collect();
        assert_eq!(lines, ["Job <7>: Job has already finished\n"]);
    }

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    fn order(mode: Mode, args: &[&str]) -> SignalOrder {
        match parse_args(mode, &strings(args)) {
            Ok(Invocation::Signal(order)) => order,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn job(job_id: u32) -> WireJobRef {
        WireJobRef { job_id, array_index: 0 }
    }

    // Goal: each command's default action and verb; -s maps through signal names.
    #[test]
    fn actions_and_verbs() {
        let kill = order(Mode::Kill, &["12", "13", "12"]);
        assert_eq!(kill.request.jobs, vec![job(12), job(13)]);
        assert_eq!((kill.request.action, kill.verb), (SignalAction::Terminate, "terminated"));
        let stop = order(Mode::Stop, &["5"]);
        assert_eq!((stop.request.action, stop.verb), (SignalAction::Stop, "stopped"));
        let resume = order(Mode::Resume, &["5"]);
        assert_eq!((resume.request.action, resume.verb), (SignalAction::Continue, "resumed"));
        let usr1 = order(Mode::Kill, &["-s", "USR1", "5"]);
        assert_eq!((usr1.request.action, usr1.verb), (SignalAction::Signal(10), "signaled"));
        let stop_signal = order(Mode::Kill, &["-s", "SIGSTOP", "5"]);
        assert_eq!((stop_signal.request.action, stop_signal.verb), (SignalAction::Stop, "stopped"));
        let forced = order(Mode::Kill, &["-r", "5"]);
        assert_eq!(forced.request.action, SignalAction::Terminate);
    }

    // Goal: `0` is all jobs (of -u), whatever else is named.
    #[test]
    fn zero_is_every_job() {
        let all = order(Mode::Kill, &["-u", "all", "0", "7"]);
        assert_eq!(
            all.request,
            SignalRequest {
                jobs: vec![],
                all_jobs: true,
                user: "all".to_owned(),
                action: SignalAction::Terminate
            }
        );
    }

    // Goal: -J/-q/-m (and -u alone) select jobs with 0 or without ids, and are
    // ignored beside job ids, as in LSF.
    #[test]
    fn selectors() {
        let picked = |args: &[&str]| {
            let order = order(Mode::Kill, args);
            (order.select, order.request.all_jobs, order.request.jobs)
        };
        let by_name = Selector { job_name: "sim".into(), ..Selector::default() };
        assert_eq!(picked(&["-J", "sim", "0"]), (Some(by_name.clone()), true, vec![]));
        assert_eq!(picked(&["-J", "sim"]), (Some(by_name), false, vec![]));
        let where_ = Selector { queue: "normal".into(), host: "h1".into(), ..Selector::default() };
        assert_eq!(picked(&["-q", "normal", "-m", "h1"]), (Some(where_), false, vec![]));
        assert_eq!(picked(&["-u", "bob"]), (Some(Selector::default()), false, vec![]));
        assert_eq!(picked(&["-u", "bob", "0"]), (None, true, vec![]));
        assert_eq!(picked(&["-J", "sim", "12"]), (None, false, vec![job(12)]));
    }

    // Goal: the errors LSF gives, as usage or value errors.
    #[test]
    fn bad_arguments() {
        let usage =
            |mode, args: &[&str]| matches!(parse_args(mode, &strings(args)), Err(BkillError::Usage(_)));
        assert!(usage(Mode::Kill, &[]));
        assert!(usage(Mode::Kill, &["-r", "-s", "9", "1"]));
        assert!(usage(Mode::Stop, &["-s", "9", "1"]));
        assert!(usage(Mode::Resume, &["-l"]));
        assert!(usage(Mode::Kill, &["-q"]));
        assert!(usage(Mode::Kill, &["-Z", "1"]));
        assert_eq!(
            parse_args(Mode::Kill, &strings(&["-s", "BOGUS", "1"])),
            Err(BkillError::Value("BOGUS: Illegal signal value".to_owned()))
        );
        assert_eq!(
            parse_args(Mode::Kill, &strings(&["x1"])),
            Err(BkillError::Value("x1: Illegal job ID.".to_owned()))
        );
        assert_eq!(parse_args(Mode::Kill, &strings(&["-l"])), Ok(Invocation::ListSignals));
    }

    // Goal: one line per outcome, in LSF's words.
    #[test]
    fn outcome_lines() {
        let line = |outcome, verb| outcome_line(&wire::SignalResult { job: job(9), outcome }, verb);
        assert_eq!(
            line(SignalRequestOutcome::Accepted, "terminated"),
            (true, "Job <9> is being terminated\n".into())
        );
        assert_eq!(
            line(SignalRequestOutcome::Accepted, "resumed"),
            (true, "Job <9> is being resumed\n".into())
        );
        assert_eq!(
            line(SignalRequestOutcome::NotFound, "x"),
            (false, "Job <9>: No matching job found\n".into())
        );
        assert_eq!(
            line(SignalRequestOutcome::PermissionDenied, "x"),
            (false, "Job <9>: User permission denied\n".into())
        );
        assert_eq!(
            line(SignalRequestOutcome::AlreadyFinished, "x"),
            (false, "Job <9>: Job has already finished\n".into())
        );
        assert_eq!(
            line(SignalRequestOutcome::NotStarted, "x"),
            (false, "Job <9>: Job has not started yet\n".into())
        );
        let element = wire::SignalResult {
            job: WireJobRef { job_id: 9, array_index: 2 },
            outcome: SignalRequestOutcome::Accepted,
        };
        assert_eq!(outcome_line(&element, "stopped").1, "Job <9[2]> is being stopped\n");
    }

    // Goal: each command's usage names itself and its options.
    #[test]
    fn usages() {
        assert!(Mode::Kill.usage().starts_with("Usage: bkill [-h] [-V] [-l] [-r | -s sigval]"));
        assert!(Mode::Stop.usage().starts_with("Usage: bstop [-h] [-V] [-u user_name | -u all]\n"));
        assert!(Mode::Resume.usage().contains("\n               [0 | jobId"));
    }
}
