//! `bhist`: jobs' histories, told from mbatchd's event log (HISTORY_QUERY).
//!
//! ```text
//! bhist [-h] [-V] [-l] [-w] [-a | -d | -p | -r | -s ...] [-u user_name | -u all] [jobId | "jobId[index]" ...]
//! ```
//!
//! LSF's `bhist` reads `lsb.events` itself; LavaCore's log is mbatchd's own
//! (a private folder), so mbatchd reads it for the command and sends each
//! job's changes: time, resulting status and LSF's narrative line. Jobs
//! cleaned from mbatchd's memory are still told while their submission is in
//! the log (a snapshot lets the log drop older records).
//!
//! - Default: the caller's unfinished jobs; `-u user`/`-u all` other users';
//!   `-a` every state, `-d` finished, `-p` pending, `-r` running, `-s`
//!   suspended (several combine); named jobs are shown whatever their state.
//! - Without `-l`: `Summary of time in seconds spent in various states:` and
//!   one line per job: JOBID USER JOB_NAME PEND PSUSP RUN USUSP SSUSP UNKWN
//!   TOTAL (the name cut to 9 with LSF's leading `*`, never with `-w`). The time
//!   of the current state runs until now; DONE and EXIT count nothing.
//! - `-l`: per job `Job <N>, [Job Name <x>, ]User <u>, Project <p>, Command <c>`,
//!   one dated line per change (`Mon Nov 25 22:44:01: Submitted from host ...`),
//!   then the per-state summary as of the job's end (or now); wrapped like
//!   `bjobs -l` and separated by a line of dashes.
//!
//! `No matching job found` (standard error, exit 255) when nothing is shown;
//! a named job the log does not hold is reported as `Job <N> is not found` and
//! makes the exit status 255.

use std::process::ExitCode;

use jiff::tz::TimeZone;
use lava_batch_ll::JobStatus;
use lava_batch_wire::{self as wire, Operation, state_filter};

use crate::args::{self, Item, OptSpec, Order};
use crate::client::{self, Client};
use crate::format::{self, Wrap};
use crate::jobid;
use crate::term::{self, Term};

/// The usage text (standard error).
pub const USAGE: &str = "Usage: bhist [-h] [-V] [-l] [-w] [-a] [-d] [-p] [-r] [-s] [-u user_name | -u all]\n             \
     [jobId | \"jobId[index]\" ...]\n";

/// The heading of the summary table.
pub const SUMMARY_TITLE: &str = "Summary of time in seconds spent in various states:\n";
/// The summary table's header.
pub const SUMMARY_HEADER: &str =
    "JOBID   USER    JOB_NAME  PEND    PSUSP   RUN     USUSP   SSUSP   UNKWN   TOTAL\n";

/// The options the command accepts; its man page (lava-man) is checked against them.
pub const SPECS: &[OptSpec] = &[
    OptSpec::flag("h"),
    OptSpec::flag("V"),
    OptSpec::flag("l"),
    OptSpec::flag("w"),
    OptSpec::flag("a"),
    OptSpec::flag("d"),
    OptSpec::flag("p"),
    OptSpec::flag("r"),
    OptSpec::flag("s"),
    OptSpec::value("u"),
];

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// `-l`.
    pub long: bool,
    /// `-w`.
    pub wide: bool,
    /// The state filters given (`state_filter` values), empty for the default.
    pub filters: Vec<u32>,
    /// The query's first page.
    pub query: wire::HistoryQuery,
}

/// Parses the arguments: `Ok(None)` for `-h`/`-V`.
pub fn parse_args(args: &[String]) -> Result<Option<Options>, (String, bool)> {
    let items = args::scan(args, SPECS, Order::Permute).map_err(|error| (error.0, true))?;
    let (mut long, mut wide, mut filters, mut user, mut operands) =
        (false, false, Vec::new(), String::new(), vec![]);
    for item in items {
        match item {
            Item::Operand(word) => operands.push(word),
            Item::Opt("h" | "V", _) => return Ok(None),
            Item::Opt("l", _) => long = true,
            Item::Opt("w", _) => wide = true,
            Item::Opt("a", _) => filters.push(state_filter::ALL),
            Item::Opt("d", _) => filters.push(state_filter::DONE),
            Item::Opt("p", _) => filters.push(state_filter::PENDING),
            Item::Opt("r", _) => filters.push(state_filter::RUNNING),
            Item::Opt("s", _) => filters.push(state_filter::SUSPENDED),
            Item::Opt(_, value) => {
                user = value.filter(|v| !v.is_empty()).ok_or(("option -u needs a user".to_owned(), true))?
            }
        }
    }
    let (jobs, all) = jobid::parse_all(&operands).map_err(|message| (message, false))?;
    let jobs = if all { Vec::new() } else { jobs };
    let state_filter = match filters.as_slice() {
        [] => state_filter::UNFINISHED,
        [one] => *one,
        _ => state_filter::ALL,
    };
    let query = wire::HistoryQuery { jobs, user, state_filter, after_job: 0 };
    Ok(Some(Options { long, wide, filters, query }))
}

/// Whether a job whose last status is `status` passes any of `filters` (several
/// were given: mbatchd sent every state).
fn passes(status: Option<JobStatus>, filters: &[u32]) -> bool {
    let Some(status) = status else { return true };
    filters.len() < 2
        || filters.iter().any(|filter| match *filter {
            state_filter::ALL => true,
            state_filter::DONE => status.is_finished(),
            state_filter::PENDING => status.is_pending(),
            state_filter::RUNNING => matches!(status, JobStatus::Run | JobStatus::Unknown),
            _ => matches!(status, JobStatus::Psusp | JobStatus::Ususp | JobStatus::Ssusp),
        })
}

/// The last status of a history.
fn last_status(job: &wire::JobHistory) -> Option<JobStatus> {
    job.entries.iter().rev().find(|e| e.status != 0).and_then(|e| JobStatus::from_bits(e.status))
}

/// Seconds spent in PEND, PSUSP, RUN, USUSP, SSUSP, UNKWN and their total, as of
/// `now_ms` for a job still in its state; and the time the count ends.
pub fn state_seconds(job: &wire::JobHistory, now_ms: u64) -> ([u64; 7], u64) {
    let mut ms = [0u64; 6];
    let changes: Vec<(u64, u32)> =
        job.entries.iter().filter(|e| e.status != 0).map(|e| (e.time_ms, e.status)).collect();
    let mut end = now_ms;
    for (idx, (since, bits)) in changes.iter().enumerate() {
        let until = changes.get(idx + 1).map_or(now_ms, |next| next.0);
        let slot = match JobStatus::from_bits(*bits) {
            Some(JobStatus::Pend) => 0,
            Some(JobStatus::Psusp) => 1,
            Some(JobStatus::Run) => 2,
            Some(JobStatus::Ususp) => 3,
            Some(JobStatus::Ssusp) => 4,
            Some(JobStatus::Unknown) => 5,
            _ => {
                end = *since;
                continue;
            }
        };
        ms[slot] += until.saturating_sub(*since);
    }
    let mut seconds = [0u64; 7];
    for (slot, value) in ms.iter().enumerate() {
        seconds[slot] = value / 1000;
    }
    seconds[6] = seconds[..6].iter().sum();
    (seconds, end)
}

/// The job's name as the summary shows it: `-J`, else the command, on one line.
fn shown_name(job: &wire::JobHistory) -> String {
    format::one_line(if job.job_name.is_empty() { &job.command } else { &job.job_name }).into_owned()
}

/// The summary table (no `-l`).
pub fn format_summary(jobs: &[wire::JobHistory], wide: bool, now_ms: u64) -> String {
    let mut out = format!("{SUMMARY_TITLE}{SUMMARY_HEADER}");
    for job in jobs {
        let ([pend, psusp, run, ususp, ssusp, unkwn, total], _) = state_seconds(job, now_ms);
        let name =
            if wide { shown_name(job) } else { format::truncate_star(&shown_name(job), 9).into_owned() };
        let user =
            if wide { job.user_name.clone() } else { format::truncate_star(&job.user_name, 7).into_owned() };
        out.push_str(&format!(
            "{:<7} {user:<7} {name:<9} {pend:<7} {psusp:<7} {run:<7} {ususp:<7} {ssusp:<7} {unkwn:<7} {total}\n",
            jobid::display(job.job)
        ));
    }
    out
}

/// The `-l` layout.
pub fn format_long(jobs: &[wire::JobHistory], now_ms: u64, tz: &TimeZone) -> String {
    let mut wrap = Wrap::default();
    for (idx, job) in jobs.iter().enumerate() {
        if idx > 0 {
            wrap.put(format::LONG_SEPARATOR);
        }
        let name =
            if job.job_name.is_empty() { String::new() } else { format!("Job Name <{}>, ", job.job_name) };
        let project = if job.project.is_empty() { "default" } else { &job.project };
        wrap.put(&format!(
            "\nJob <{}>, {name}User <{}>, Project <{project}>, Command <{}>\n",
            jobid::display(job.job),
            job.user_name,
            format::one_line(&job.command)
        ));
        for entry in &job.entries {
            let when = format::event_time((entry.time_ms / 1000) as i64, tz);
            wrap.put(&format!("{when}: {}\n", entry.text));
        }
        let ([pend, psusp, run, ususp, ssusp, unkwn, total], end_ms) = state_seconds(job, now_ms);
        wrap.put(&format!(
            "\nSummary of time in seconds spent in various states by  {}\n",
            format::event_time((end_ms / 1000) as i64, tz)
        ));
        wrap.put("  PEND     PSUSP    RUN      USUSP    SSUSP    UNKWN    TOTAL\n");
        wrap.put(&format!("  {pend:<8} {psusp:<8} {run:<8} {ususp:<8} {ssusp:<8} {unkwn:<8} {total}\n\n"));
    }
    wrap.out
}

/// Runs `bhist` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("bhist", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let options = match term::options(term, "bhist", USAGE, &args, parse_args(&args)) {
        Ok(options) => options,
        Err(ok) => return ok,
    };
    let mut client = match client::load_config().and_then(|config| Client::from_env(&config)) {
        Ok(client) => client,
        Err(error) => {
            term.err(&format!("{error}\n"));
            return false;
        }
    };
    let mut query = options.query.clone();
    let mut jobs = Vec::new();
    let mut not_found = Vec::new();
    loop {
        let page: wire::HistoryReply =
            match client.call(Operation::HistoryQuery, Operation::HistoryQueryReply, &query) {
                Ok(page) => page,
                Err(error) => {
                    term.err(&format!("{error}\n"));
                    return false;
                }
            };
        jobs.extend(page.jobs.into_iter().filter(|job| passes(last_status(job), &options.filters)));
        not_found.extend(page.not_found);
        if page.next_after == 0 {
            break;
        }
        query.after_job = page.next_after;
    }
    for job in &not_found {
        term.err(&format!("Job <{}> is not found\n", jobid::display(*job)));
    }
    if jobs.is_empty() {
        if not_found.is_empty() {
            term.err("No matching job found\n");
        }
        return false;
    }
    let now_ms = jiff::Timestamp::now().as_millisecond().max(0) as u64;
    if options.long {
        term.out(&format_long(&jobs, now_ms, &TimeZone::system()));
    } else {
        term.out(&format_summary(&jobs, options.wide, now_ms));
    }
    not_found.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_700_000_000_000;

    fn entry(offset_s: u64, status: Option<JobStatus>, text: &str) -> wire::HistoryEntry {
        wire::HistoryEntry {
            time_ms: T + offset_s * 1000,
            status: status.map_or(0, JobStatus::bits),
            text: text.into(),
        }
    }

    fn history() -> wire::JobHistory {
        wire::JobHistory {
            job: wire::WireJobRef { job_id: 12, array_index: 0 },
            user_name: "alice".into(),
            job_name: String::new(),
            command: "sleep 100".into(),
            project: String::new(),
            entries: vec![
                entry(0, Some(JobStatus::Pend), "Submitted from host <h>, to Queue <normal>, CWD <w>;"),
                entry(3, Some(JobStatus::Run), "Dispatched to <h>;"),
                entry(3, None, "Starting (Pid 42);"),
                entry(13, Some(JobStatus::Ususp), "Suspended by the user or administrator <alice>;"),
                entry(15, Some(JobStatus::Run), "Resumed by the user or administrator <alice>;"),
                entry(45, Some(JobStatus::Done), "Done successfully. The CPU time used is 0.1 seconds;"),
            ],
        }
    }

    // Goal: seconds per state from the status changes; nothing after DONE.
    #[test]
    fn seconds_per_state() {
        assert_eq!(state_seconds(&history(), T + 99_000), ([3, 0, 40, 2, 0, 0, 45], T + 45_000));
        let mut running = history();
        running.entries.truncate(3);
        assert_eq!(state_seconds(&running, T + 10_500), ([3, 0, 7, 0, 0, 0, 10], T + 10_500));
    }

    // Goal: LSF's summary columns, the name cut with its star unless -w.
    #[test]
    fn summary_layout() {
        let text = format_summary(&[history()], false, T + 99_000);
        assert_eq!(
            text,
            "Summary of time in seconds spent in various states:\n\
             JOBID   USER    JOB_NAME  PEND    PSUSP   RUN     USUSP   SSUSP   UNKWN   TOTAL\n\
             12      alice   sleep 100 3       0       40      2       0       0       45\n"
        );
        let mut named = history();
        named.job_name = "a_rather_long_name".into();
        assert!(format_summary(&[named.clone()], false, T).contains(" *ong_name "));
        assert!(format_summary(&[named], true, T).contains(" a_rather_long_name "));
    }

    // Goal: -l prints the header, one dated line per change and the summary as of the end.
    #[test]
    fn long_layout() {
        let text = format_long(&[history()], T + 99_000, &TimeZone::UTC);
        let expected = "\nJob <12>, User <alice>, Project <default>, Command <sleep 100>\n\
             Tue Nov 14 22:13:20: Submitted from host <h>, to Queue <normal>, CWD <w>;\n\
             Tue Nov 14 22:13:23: Dispatched to <h>;\n\
             Tue Nov 14 22:13:23: Starting (Pid 42);\n\
             Tue Nov 14 22:13:33: Suspended by the user or administrator <alice>;\n\
             Tue Nov 14 22:13:35: Resumed by the user or administrator <alice>;\n\
             Tue Nov 14 22:14:05: Done successfully. The CPU time used is 0.1 seconds;\n\
             \n\
             Summary of time in seconds spent in various states by  Tue Nov 14 22:14:05\n\
             \x20 PEND     PSUSP    RUN      USUSP    SSUSP    UNKWN    TOTAL\n\
             \x20 3        0        40       2        0        0        45\n\n";
        assert_eq!(text, expected);
    }

    // Goal: options map to the query; bad ones are refused before sending.
    #[test]
    fn options() {
        let parse = |args: &[&str]| parse_args(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        let options = parse(&["-l", "-u", "all", "-d"]).expect("valid").expect("options");
        assert!(options.long);
        assert_eq!((options.query.user.as_str(), options.query.state_filter), ("all", state_filter::DONE));
        let several = parse(&["-p", "-r"]).expect("valid").expect("options");
        assert_eq!(several.query.state_filter, state_filter::ALL);
        assert!(passes(Some(JobStatus::Run), &several.filters));
        assert!(!passes(Some(JobStatus::Done), &several.filters));
        let named = parse(&["3", "4[1]"]).expect("valid").expect("options");
        assert_eq!(named.query.jobs.len(), 2);
        assert!(matches!(parse(&["-u"]), Err((_, true))));
        assert!(matches!(parse(&["-x"]), Err((_, true))));
        assert_eq!(parse(&["x3"]), Err(("x3: Illegal job ID.".into(), false)));
    }
}
