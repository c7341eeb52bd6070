//! `bacct`: accounting of finished jobs, read from `lsb.acct` (LSF's JOB_FINISH records,
//! `lava_batch_ll::acct`, which mbatchd writes in `$LSB_SHAREDIR/<cluster>/logdir`).
//!
//! ```text
//! bacct [-h] [-V] [-b | -l] [-d] [-e] [-u user_name | -u all] [-q queue_name]
//!       [-C time0,time1] [-S time0,time1] [-f logfile] [jobId ...]
//! ```
//!
//! - Default: the caller's finished jobs; `-u user`/`-u all` other users'; `-q` one
//!   queue's; `-d` only DONE, `-e` only EXIT; `-C` jobs completed, `-S` jobs submitted,
//!   within `time0,time1` (each `[[[year/]month/]day/]hour:minute`, `[year/]month/day`, or
//!   `.` for now; a missing side is open); job ids select those jobs, whoever owns them.
//! - Output: LSF's `Accounting information about jobs that are:` block naming the
//!   selection, a line of dashes, then the `SUMMARY:` (counts, CPU, wait, turnaround, hog
//!   factor, run time, throughput, first and last time). `-b` prints the same brief
//!   report (LavaCore has nothing more to leave out); `-l` first prints each job
//!   (`Job <N>, User <u>, Project <p>, Status <DONE>, Queue <q>, Command <c>`, the
//!   submission, dispatch and completion lines, and the `CPU_T WAIT TURNAROUND STATUS
//!   HOG_FACTOR MEM SWAP` line), wrapped as `bjobs -l`.
//! - `-f file` reads that file instead of `lsb.acct` (switched files are read only so).
//!   With several master candidates, the default is the newest of the candidates' own
//!   copies found on this host, `logdir/<candidate>/lsb.acct`.
//!
//! An unreadable file is reported (`bacct: <file>: <reason>`) with exit status 255;
//! no matching job prints `No matching job found` after the block, exit status 0. The
//! log folder is mbatchd's (mode 0700): users other than root need a copy and `-f`.

use std::fmt::Write as _;
use std::path::PathBuf;

use jiff::tz::TimeZone;
use lava_batch_ll::acct::AcctRecord;

use crate::args::{self, Item, OptSpec, Order};
use crate::format::{self, Wrap};
use crate::host;
use crate::term::{self, Term};

/// The usage text (standard error).
pub const USAGE: &str = "Usage: bacct [-h] [-V] [-b | -l] [-d] [-e] [-u user_name | -u all] [-q queue_name]\n             \
     [-C time0,time1] [-S time0,time1] [-f logfile] [jobId ...]\n";

/// The line under the selection block and between jobs.
pub const DASHES: &str = "------------------------------------------------------------------------------\n";

/// The options `bacct` takes.
pub const SPECS: &[OptSpec] = &[
    OptSpec::flag("h"),
    OptSpec::flag("V"),
    OptSpec::flag("b"),
    OptSpec::flag("l"),
    OptSpec::flag("d"),
    OptSpec::flag("e"),
    OptSpec::value("u"),
    OptSpec::value("q"),
    OptSpec::value("C"),
    OptSpec::value("S"),
    OptSpec::value("f"),
];

/// A time window, seconds since the epoch, each side open when `None`.
pub type Window = (Option<i64>, Option<i64>);

/// What the command line asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `-l`.
    pub long: bool,
    /// `-d`.
    pub done_only: bool,
    /// `-e`.
    pub exit_only: bool,
    /// `-u`: `None` for the caller, `Some("all")` for everybody.
    pub user: Option<String>,
    /// `-q`.
    pub queue: Option<String>,
    /// `-C`.
    pub completed: Option<Window>,
    /// `-S`.
    pub submitted: Option<Window>,
    /// `-f`.
    pub file: Option<PathBuf>,
    /// Job ids named.
    pub jobs: Vec<u32>,
}

/// Parses the arguments (`now` and `tz` resolve the times): `Ok(None)` for `-h`/`-V`.
pub fn parse_args(args: &[String], now: i64, tz: &TimeZone) -> Result<Option<Options>, (String, bool)> {
    let items = args::scan(args, SPECS, Order::Permute).map_err(|error| (error.0, true))?;
    let mut options = Options::default();
    for item in items {
        match item {
            Item::Operand(word) => {
                let id = word.parse().map_err(|_| (format!("{word}: Illegal job ID"), false))?;
                options.jobs.push(id);
            }
            Item::Opt("h" | "V", _) => return Ok(None),
            Item::Opt("b", _) => {}
            Item::Opt("l", _) => options.long = true,
            Item::Opt("d", _) => options.done_only = true,
            Item::Opt("e", _) => options.exit_only = true,
            Item::Opt(flag, value) => {
                let value =
                    value.filter(|v| !v.is_empty()).ok_or((format!("option -{flag} needs a value"), true))?;
                match flag {
                    "u" => options.user = Some(value),
                    "q" => options.queue = Some(value),
                    "C" => options.completed = Some(parse_window(&value, now, tz).map_err(|e| (e, false))?),
                    "S" => options.submitted = Some(parse_window(&value, now, tz).map_err(|e| (e, false))?),
                    _ => options.file = Some(PathBuf::from(value)),
                }
            }
        }
    }
    Ok(Some(options))
}

/// `time0,time1` (either side may be empty; one time alone is `time0,` ... as LSF: a
/// single time means from then to now).
pub fn parse_window(text: &str, now: i64, tz: &TimeZone) -> Result<Window, String> {
    let bad = || format!("{text}: Bad time specification");
    let (first, second) = text.split_once(',').unwrap_or((text, "."));
    let side = |part: &str| -> Result<Option<i64>, String> {
        if part.is_empty() { Ok(None) } else { parse_time(part, now, tz).map(Some).ok_or_else(bad) }
    };
    Ok((side(first)?, side(second)?))
}

/// One LSF time: `.`, `hh:mm`, `dd/hh:mm`, `mm/dd/hh:mm`, `yyyy/mm/dd/hh:mm`, `mm/dd`,
/// `yyyy/mm/dd` (00:00), missing parts taken from now.
pub fn parse_time(text: &str, now: i64, tz: &TimeZone) -> Option<i64> {
    if text == "." {
        return Some(now);
    }
    let today = jiff::Timestamp::from_second(now).ok()?.to_zoned(tz.clone());
    let parts: Vec<&str> = text.split('/').collect();
    let (date, clock): (&[&str], Option<&str>) = match parts.split_last() {
        Some((last, rest)) if last.contains(':') => (rest, Some(last)),
        _ => (&parts[..], None),
    };
    let (hour, minute) = match clock {
        Some(clock) => {
            let (h, m) = clock.split_once(':')?;
            (h.parse::<i8>().ok()?, m.parse::<i8>().ok()?)
        }
        None => (0, 0),
    };
    let numbers: Vec<i32> = date.iter().map(|p| p.parse().ok()).collect::<Option<_>>()?;
    let (year, month, day) = match numbers.as_slice() {
        [] if clock.is_some() => (today.year(), today.month(), today.day()),
        [day] if clock.is_some() => (today.year(), today.month(), i8::try_from(*day).ok()?),
        [month, day] => (today.year(), i8::try_from(*month).ok()?, i8::try_from(*day).ok()?),
        [year, month, day] => {
            (i16::try_from(*year).ok()?, i8::try_from(*month).ok()?, i8::try_from(*day).ok()?)
        }
        _ => return None,
    };
    let civil = jiff::civil::DateTime::new(year, month, day, hour, minute, 0, 0).ok()?;
    Some(civil.to_zoned(tz.clone()).ok()?.timestamp().as_second())
}

fn within(window: Option<Window>, t: i64) -> bool {
    window.is_none_or(|(from, to)| from.is_none_or(|from| t >= from) && to.is_none_or(|to| t <= to))
}

/// The records `options` selects; `caller` is the user name `-u` defaults to.
pub fn select<'a>(records: &'a [AcctRecord], options: &Options, caller: &str) -> Vec<&'a AcctRecord> {
    records
        .iter()
        .filter(|r| {
            if !options.jobs.is_empty() {
                return options.jobs.contains(&r.job_id);
            }
            let user_ok = match options.user.as_deref() {
                Some("all") => true,
                Some(user) => r.user_name == user,
                None => r.user_name == caller,
            };
            user_ok
                && options.queue.as_ref().is_none_or(|q| &r.queue == q)
                && (!options.done_only || r.is_done())
                && (!options.exit_only || !r.is_done())
                && within(options.completed, r.event_time)
                && within(options.submitted, r.submit_time)
        })
        .collect()
}

/// LSF's block naming what is selected, ending with the dashes.
pub fn heading(options: &Options, caller: &str) -> String {
    let mut out = String::from("Accounting information about jobs that are: \n");
    if options.jobs.is_empty() {
        match options.user.as_deref() {
            Some("all") => out.push_str("  - submitted by all users.\n"),
            Some(user) => out.push_str(&format!("  - submitted by users {user}, \n")),
            None => out.push_str(&format!("  - submitted by users {caller}, \n")),
        }
    } else {
        out.push_str("  - submitted by all users.\n");
    }
    out.push_str("  - accounted on all projects.\n");
    out.push_str(match (options.done_only, options.exit_only) {
        (true, false) => "  - completed normally.\n",
        (false, true) => "  - exited.\n",
        _ => "  - completed normally or exited\n",
    });
    out.push_str("  - executed on all hosts.\n");
    match &options.queue {
        Some(queue) => out.push_str(&format!("  - submitted to queues {queue}, \n")),
        None => out.push_str("  - submitted to all queues.\n"),
    }
    out.push_str("  - accounted on all service classes.\n");
    out.push_str(DASHES);
    out
}

fn cpu(r: &AcctRecord) -> f64 {
    r.rusage.cpu_s()
}

fn wait(r: &AcctRecord) -> i64 {
    if r.start_time > 0 {
        (r.start_time - r.submit_time).max(0)
    } else {
        (r.event_time - r.submit_time).max(0)
    }
}

fn turnaround(r: &AcctRecord) -> i64 {
    (r.event_time - r.submit_time).max(0)
}

fn hog(r: &AcctRecord) -> f64 {
    let t = turnaround(r);
    if t > 0 { cpu(r) / t as f64 } else { 0.0 }
}

fn expansion(r: &AcctRecord) -> f64 {
    let run = r.run_time_s();
    if run > 0 { turnaround(r) as f64 / run as f64 } else { 0.0 }
}

/// LSF's memory figure of `-l`: `5M`, `512K`, `1.5G`; `0M` when unknown.
fn mem(kb: i64) -> String {
    match kb {
        kb if kb <= 0 => "0M".to_owned(),
        kb if kb < 1024 => format!("{kb}K"),
        kb if kb < 1024 * 1024 => format!("{}M", kb / 1024),
        kb => format!("{:.1}G", kb as f64 / (1024.0 * 1024.0)),
    }
}

/// LSF's `SUMMARY:` of the selected jobs (which must not be empty).
pub fn summary(jobs: &[&AcctRecord], tz: &TimeZone) -> String {
    let n = jobs.len() as f64;
    let done = jobs.iter().filter(|r| r.is_done()).count();
    let fold = |f: &dyn Fn(&AcctRecord) -> f64| {
        let values: Vec<f64> = jobs.iter().map(|r| f(r)).collect();
        let total: f64 = values.iter().sum();
        let max = values.iter().copied().fold(f64::MIN, f64::max);
        let min = values.iter().copied().fold(f64::MAX, f64::min);
        (total, total / n, max, min)
    };
    let (cpu_t, cpu_a, cpu_max, cpu_min) = fold(&cpu);
    let (wait_t, wait_a, wait_max, wait_min) = fold(&|r| wait(r) as f64);
    let (_, turn_a, turn_max, turn_min) = fold(&|r| turnaround(r) as f64);
    let (_, hog_a, hog_max, hog_min) = fold(&hog);
    let (_, exp_a, exp_max, exp_min) = fold(&expansion);
    let (run_t, run_a, run_max, run_min) = fold(&|r| r.run_time_s() as f64);
    let first = jobs.iter().map(|r| r.submit_time).min().unwrap_or(0);
    let last = jobs.iter().map(|r| r.event_time).max().unwrap_or(0);
    let hours = (last - first).max(0) as f64 / 3600.0;
    let throughput = if hours > 0.0 { n / hours } else { 0.0 };
    let mut out = String::new();
    let w = &mut out;
    let _ = writeln!(w, "\nSUMMARY:      ( time unit: second ) ");
    let _ = writeln!(
        w,
        " Total number of done jobs:{done:>8}      Total number of exited jobs:{:>6}",
        jobs.len() - done
    );
    let _ = writeln!(w, " Total CPU time consumed:{cpu_t:>10.1}      Average CPU time consumed:{cpu_a:>8.1}");
    let _ = writeln!(
        w,
        " Maximum CPU time of a job:{cpu_max:>8.1}      Minimum CPU time of a job:{cpu_min:>8.1}"
    );
    let _ = writeln!(w, " Total wait time in queues:{wait_t:>8.1}");
    let _ = writeln!(w, " Average wait time in queue:{wait_a:>7.1}");
    let _ = writeln!(
        w,
        " Maximum wait time in queue:{wait_max:>7.1}      Minimum wait time in queue:{wait_min:>7.1}"
    );
    let _ = writeln!(w, " Average turnaround time:{:>10} (seconds/job)", turn_a.round() as i64);
    let _ = writeln!(
        w,
        " Maximum turnaround time:{:>10}      Minimum turnaround time:{:>10}",
        turn_max as i64, turn_min as i64
    );
    let _ = writeln!(w, " Average hog factor of a job:{hog_a:>6.2} ( cpu time / turnaround time )");
    let _ = writeln!(
        w,
        " Maximum hog factor of a job:{hog_max:>6.2}      Minimum hog factor of a job:{hog_min:>6.2}"
    );
    let _ = writeln!(w, " Average expansion factor of a job:{exp_a:>6.2} ( turnaround time / run time )");
    let _ = writeln!(
        w,
        " Maximum expansion factor of a job:{exp_max:>6.2}      Minimum expansion factor of a job:{exp_min:>6.2}"
    );
    let _ = writeln!(
        w,
        " Total Run time consumed:{:>10}      Average Run time consumed:{:>10}",
        run_t as i64,
        run_a.round() as i64
    );
    let _ = writeln!(
        w,
        " Maximum Run time of a job:{:>8}      Minimum Run time of a job:{:>8}",
        run_max as i64, run_min as i64
    );
    let _ = writeln!(w, " Total throughput:{throughput:>17.2} (jobs/hour)  during{hours:>8.2} hours");
    let _ = writeln!(
        w,
        " Beginning time:       {}      Ending time:          {}",
        format::short_time(first, tz),
        format::short_time(last, tz)
    );
    out
}

/// One job of `-l`.
pub fn long_job(r: &AcctRecord, tz: &TimeZone) -> String {
    let mut wrap = Wrap::default();
    let status = if r.is_done() { "DONE" } else { "EXIT" };
    let id = if r.idx > 0 { format!("{}[{}]", r.job_id, r.idx) } else { r.job_id.to_string() };
    let name = if r.job_name.is_empty() || r.job_name == r.command {
        String::new()
    } else {
        format!("Job Name <{}>, ", r.job_name)
    };
    wrap.put(&format!(
        "\nJob <{id}>, {name}User <{}>, Project <{}>, Status <{status}>, Queue <{}>, Command <{}>\n",
        r.user_name,
        r.project_name,
        r.queue,
        format::one_line(&r.command)
    ));
    let mut submitted = format!(
        "{}: Submitted from host <{}>, CWD <{}>",
        format::event_time(r.submit_time, tz),
        r.from_host,
        format::cwd_shown(&r.cwd)
    );
    for (what, file) in
        [("Input File", &r.in_file), ("Output File", &r.out_file), ("Error File", &r.err_file)]
    {
        if !file.is_empty() {
            let _ = write!(submitted, ", {what} <{file}>");
        }
    }
    wrap.put(&format!("\n{submitted};\n"));
    if r.start_time > 0 {
        let hosts = format::host_list(&r.exec_hosts, false)
            .iter()
            .map(|h| format!("<{h}>"))
            .collect::<Vec<_>>()
            .join(", ");
        wrap.put(&format!("\n{}: Dispatched to {hosts};\n", format::event_time(r.start_time, tz)));
    }
    let end = if r.is_done() { "done" } else { "exit" };
    // LSF names why it ended a job after the state: `Completed <exit>; TERM_OWNER: ...`.
    let why = lava_batch_ll::acct::TermReason::of_value(r.exit_info)
        .map_or(String::new(), |reason| format!("; {}", reason.text));
    wrap.put(&format!("\n{}: Completed <{end}>{why}.\n", format::event_time(r.event_time, tz)));
    let mut out = wrap.out;
    out.push_str("\nAccounting information about this job:\n");
    out.push_str("     CPU_T     WAIT     TURNAROUND   STATUS     HOG_FACTOR    MEM    SWAP\n");
    let _ = writeln!(
        out,
        "{:>10.2} {:>8} {:>14} {:>8} {:>14.4} {:>6} {:>7}",
        cpu(r),
        wait(r),
        turnaround(r),
        end,
        hog(r),
        mem(r.max_rmem_kb),
        mem(r.max_rswap_kb)
    );
    out.push_str(DASHES);
    out
}

/// The whole report.
pub fn report(records: &[AcctRecord], options: &Options, caller: &str, tz: &TimeZone) -> String {
    let jobs = select(records, options, caller);
    let mut out = heading(options, caller);
    if jobs.is_empty() {
        out.push_str("\nNo matching job found\n");
        return out;
    }
    if options.long {
        for job in &jobs {
            out.push_str(&long_job(job, tz));
        }
    }
    out.push_str(&summary(&jobs, tz));
    out
}

/// Runs `bacct` with this process's arguments.
pub fn main() -> std::process::ExitCode {
    term::main_with("bacct", run)
}

/// The `lsb.acct` read without `-f`: `logdir/lsb.acct`, or with several master candidates
/// (`LSF_MASTER_LIST`), where each candidate's mbatchd writes its own copy in
/// `logdir/<candidate>/` (docs/failover.md), the most recently written of those found on
/// this host (every candidate writes the same lines; a follower may trail the leader).
fn default_acct_path(config: &lava_conf::BaseConfig) -> std::path::PathBuf {
    let logdir = config.work_dir().join("logdir");
    let candidates = config.master_candidates();
    if candidates.len() < 2 {
        return logdir.join("lsb.acct");
    }
    candidates
        .iter()
        .map(|host| logdir.join(&host.name).join("lsb.acct"))
        .filter_map(|path| Some((std::fs::metadata(&path).ok()?.modified().ok()?, path)))
        .max_by_key(|(modified, _)| *modified)
        .map_or_else(|| logdir.join("lsb.acct"), |(_, path)| path)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let tz = TimeZone::system();
    let now = jiff::Timestamp::now().as_second();
    let options = match term::options(term, "bacct", USAGE, &args, parse_args(&args, now, &tz)) {
        Ok(options) => options,
        Err(ok) => return ok,
    };
    let path = match &options.file {
        Some(path) => path.clone(),
        None => match crate::client::load_config() {
            Ok(config) => default_acct_path(&config),
            Err(error) => {
                term.err(&format!("bacct: {error}\n"));
                return false;
            }
        },
    };
    let text = match std::fs::read(&path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && options.file.is_none() => String::new(),
        Err(error) => {
            term.err(&format!("bacct: {}: {error}\n", path.display()));
            return false;
        }
    };
    let records: Vec<AcctRecord> =
        text.lines().filter_map(|line| AcctRecord::parse(line).ok().flatten()).collect();
    let uid = host::ProcStatus::read().uid;
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let caller = uid.and_then(|uid| host::passwd_name(&passwd, uid)).unwrap_or_default();
    term.out(&report(&records, &options, &caller, &tz));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use lava_batch_ll::acct::AcctRusage;

    fn rec(job_id: u32, user: &str, done: bool, submit: i64, start: i64, end: i64) -> AcctRecord {
        let line = concat!(
            r#""JOB_FINISH" "10.1" 1 1 0 0 1 0 0 0 0 "u" "normal" "" "" "" "hostS" "/tmp" "" "" "" "f" 0 1 "hostA""#,
            r#" 64 1.0 "" "sleep 1" 0.5 0.25 2048 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1"#,
            r#" "" "default" 0 1 "" "" 0 2048 0 "" """#
        );
        let mut r = AcctRecord::parse(line).expect("valid").expect("record");
        r.job_id = job_id;
        r.user_name = user.into();
        r.j_status = if done { 64 } else { 32 };
        (r.submit_time, r.start_time, r.event_time) = (submit, start, end);
        r.rusage = AcctRusage { utime_s: 0.5, stime_s: 0.25, maxrss_kb: 2048.0 };
        r
    }

    #[test]
    fn summary_layout() {
        // Goal: LSF's SUMMARY lines, widths and all.
        let utc = TimeZone::UTC;
        let a = rec(1, "alice", true, 1_700_000_000, 1_700_000_010, 1_700_000_040);
        let b = rec(2, "alice", false, 1_700_000_000, 1_700_000_020, 1_700_000_100);
        let text = summary(&[&a, &b], &utc);
        assert!(
            text.contains(" Total number of done jobs:       1      Total number of exited jobs:     1\n"),
            "{text}"
        );
        assert!(
            text.contains(" Total CPU time consumed:       1.5      Average CPU time consumed:     0.8\n"),
            "{text}"
        );
        assert!(text.contains(" Total wait time in queues:    30.0\n"), "{text}");
        assert!(text.contains(" Average turnaround time:        70 (seconds/job)\n"), "{text}");
        assert!(
            text.contains(" Maximum turnaround time:       100      Minimum turnaround time:        40\n"),
            "{text}"
        );
        assert!(
            text.contains(" Total Run time consumed:       110      Average Run time consumed:        55\n"),
            "{text}"
        );
    }

    #[test]
    fn selection_and_heading() {
        // Goal: -u, -q, -d/-e, -C and -S select as LSF; the heading names the user.
        let utc = TimeZone::UTC;
        let records = [
            rec(1, "alice", true, 100, 110, 200),
            rec(2, "bob", false, 100, 110, 300),
            rec(3, "alice", false, 150, 160, 400),
        ];
        let ids = |o: &Options| select(&records, o, "alice").iter().map(|r| r.job_id).collect::<Vec<_>>();
        assert_eq!(ids(&Options::default()), [1, 3]);
        assert_eq!(ids(&Options { user: Some("all".into()), ..Options::default() }), [1, 2, 3]);
        assert_eq!(ids(&Options { done_only: true, ..Options::default() }), [1]);
        assert_eq!(ids(&Options { completed: Some((Some(250), None)), ..Options::default() }), [3]);
        assert_eq!(ids(&Options { submitted: Some((None, Some(120))), ..Options::default() }), [1]);
        assert_eq!(ids(&Options { jobs: vec![2], ..Options::default() }), [2]);
        assert_eq!(ids(&Options { queue: Some("other".into()), ..Options::default() }), Vec::<u32>::new());
        assert!(heading(&Options::default(), "alice").contains("  - submitted by users alice, \n"));
        let text =
            report(&records, &Options { queue: Some("x".into()), ..Options::default() }, "alice", &utc);
        assert!(text.ends_with("\nNo matching job found\n"), "{text}");
    }

    #[test]
    fn long_layout() {
        // Goal: -l's job block and its accounting line (gc3pie and LSF's layout).
        let utc = TimeZone::UTC;
        let text = long_job(&rec(7, "alice", true, 1_700_000_000, 1_700_000_050, 1_700_000_117), &utc);
        assert!(
            text.starts_with(
                "\nJob <7>, User <alice>, Project <default>, Status <DONE>, Queue <normal>, Comman\n"
            ),
            "{text}"
        );
        assert!(text.contains(": Dispatched to <hostA>;\n"), "{text}");
        assert!(text.contains(": Completed <done>.\n"), "{text}");
        assert!(text.contains("     CPU_T     WAIT     TURNAROUND   STATUS     HOG_FACTOR    MEM    SWAP\n"));
        assert!(
            text.contains("      0.75       50            117     done         0.0064     2M      0M\n"),
            "{text}"
        );
    }

    #[test]
    fn times() {
        // Goal: LSF's time forms.
        let utc = TimeZone::UTC;
        let now = 1_700_000_000; // 2023-11-14 22:13:20 UTC
        assert_eq!(parse_time(".", now, &utc), Some(now));
        assert_eq!(parse_time("22:00", now, &utc), Some(1_699_999_200));
        assert_eq!(parse_time("2023/11/14/22:00", now, &utc), Some(1_699_999_200));
        assert_eq!(parse_time("11/14", now, &utc), Some(1_699_920_000));
        assert_eq!(parse_window("11/14,", now, &utc), Ok((Some(1_699_920_000), None)));
        assert!(parse_window("x,y", now, &utc).is_err());
    }
}
