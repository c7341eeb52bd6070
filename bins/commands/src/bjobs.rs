//! `bjobs`: list jobs.
//!
//! ```text
//! bjobs [-h] [-V] [-w | -W | -l] [-a] [-d] [-p] [-r] [-s] [-noheader]
//!       [-o "fields" [-json]] [-u user | -u all] [-q queue] [-m host]
//!       [-J name] [-P project] [jobId | "jobId[index]" ...]
//! ```
//!
//! # Selection
//! Without job ids: the caller's unfinished jobs (`-u` for another user or
//! `all`); `-a` adds recently finished jobs; `-d`, `-p`, `-r`, `-s` keep
//! finished, pending, running, suspended jobs (several of them: their union).
//! `-q`, `-m`, `-J` (`*` anywhere in the name, as in LSF 10: `-J '*abc*'`; never
//! inside an array index) and `-P` narrow further.
//! Named jobs are shown whatever their state and owner. `0` is no restriction.
//!
//! # Layout
//! See [`crate::format`](mod@crate::format): the classic columns, `-w`, `-W`, `-p` alone, `-l`,
//! `-o`, `-o ... -json` (`-json` without `-o` changes nothing, as in LSF; with
//! `-noheader` it is refused); `-noheader` drops the header. `LSB_SHORT_HOSTLIST=1` (environment or
//! lsf.conf) shows hosts as `N*host`. Times are in the local time zone (`TZ`).
//!
//! `LSB_BJOBS_FORMAT` (environment or lsf.conf) is the `-o` of a listing
//! that asks for no layout of its own, as in LSF.
//!
//! # Messages and exit status
//! - A named job that is not shown: `Job <N> is not found` (standard error);
//!   with `-o ... -json`, LSF's error record `{"ERROR":"Job <N> is not found"}`
//!   in `RECORDS` instead (after the jobs, counted in `JOBS`), and nothing on
//!   standard error.
//! - Nothing to show without names: `No unfinished job found`, `No job found`
//!   (`-a`, or several state options), `No DONE/EXIT job found`, `No pending
//!   job found`, `No running job found`, `No suspended job found`, each
//!   followed by ` in queue <q>` or ` on host/group <h>` when `-q`/`-m`
//!   narrowed the search (Lava's cmd.err.c), on standard error.
//! - Exit status as LSF's default (`LSB_BJOBS_CONSISTENT_EXIT_CODE=N`, IBM's
//!   lsf.conf reference): 255 when a named job was not found or the request
//!   failed, else 0, even when nothing was found. With
//!   `LSB_BJOBS_CONSISTENT_EXIT_CODE=Y` (environment or lsf.conf), finding no
//!   job at all is also 255.

use std::process::ExitCode;

use jiff::tz::TimeZone;
use lava_batch_ll::JobStatus;
use lava_batch_wire::{self as wire, JobInfo, JobQuery, Operation, WireJobRef, state_filter};

use crate::args::{self, Item, OptSpec, Order, UsageError};
use crate::client::{self, Client};
use crate::format::{self, CustomFormat, Layout, Style};
use crate::jobid;
use crate::term::{self, Term};

/// The usage text (standard error).
pub const USAGE: &str = "\
Usage: bjobs [-h] [-V] [-w | -W | -l] [-a] [-d] [-p] [-s] [-r] [-noheader]
             [-m host_name] [-q queue_name] [-u user_name | -u all]
             [-P project_name] [-J name_spec]
             [-o \"field_name[:[-][width][:unit]] ... [delimiter='c']\" [-json]]
             [jobId | \"jobId[index]\" ...]
";

/// The options the command accepts; its man page (lava-man) is checked against them.
pub const SPECS: &[OptSpec] = &[
    OptSpec::flag("h"),
    OptSpec::flag("V"),
    OptSpec::flag("a"),
    OptSpec::flag("d"),
    OptSpec::flag("p"),
    OptSpec::flag("r"),
    OptSpec::flag("s"),
    OptSpec::flag("l"),
    OptSpec::flag("w"),
    OptSpec::flag("W"),
    OptSpec::flag("json"),
    OptSpec::flag("noheader"),
    OptSpec::value("u"),
    OptSpec::value("q"),
    OptSpec::value("m"),
    OptSpec::value("J"),
    OptSpec::value("P"),
    OptSpec::value("o"),
];

/// What `bjobs` was asked.
#[derive(Clone, Debug, Default)]
pub struct BjobsOptions {
    /// Named jobs, in order, without repeats.
    pub jobs: Vec<WireJobRef>,
    /// `-a`.
    pub all: bool,
    /// `-d`.
    pub done: bool,
    /// `-p`.
    pub pending: bool,
    /// `-r`.
    pub running: bool,
    /// `-s`.
    pub suspended: bool,
    /// `-u`.
    pub user: Option<String>,
    /// `-q`.
    pub queue: Option<String>,
    /// `-m`.
    pub host: Option<String>,
    /// `-J`.
    pub job_name: Option<String>,
    /// `-P`.
    pub project: Option<String>,
    /// `-l`.
    pub long: bool,
    /// `-w`.
    pub wide: bool,
    /// `-W`.
    pub wide_fields: bool,
    /// `-json` (with `-o`).
    pub json: bool,
    /// `-noheader`.
    pub noheader: bool,
    /// `-o`.
    pub format: Option<CustomFormat>,
}

/// What the command line asks for.
#[derive(Clone, Debug)]
pub enum Invocation {
    /// `-h`.
    Help,
    /// `-V`.
    Version,
    /// List jobs.
    List(Box<BjobsOptions>),
}

/// Why the arguments cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BjobsError {
    /// Syntax: message and usage.
    Usage(UsageError),
    /// A value: the message alone (`12x: Illegal job ID.`).
    Value(String),
}

/// Parses `bjobs`'s arguments (without the program name).
pub fn parse_args(args: &[String]) -> Result<Invocation, BjobsError> {
    let items = args::scan(args, SPECS, Order::Permute).map_err(BjobsError::Usage)?;
    let mut options = BjobsOptions::default();
    let mut operands = Vec::new();
    for item in items {
        let (name, value) = match item {
            Item::Operand(word) => {
                operands.push(word);
                continue;
            }
            Item::Opt(name, value) => (name, value),
        };
        let text = || -> Result<String, BjobsError> {
            match value.clone() {
                Some(text) if !text.is_empty() => Ok(text),
                _ => Err(BjobsError::Usage(UsageError(format!("option -{name} needs a non-empty value")))),
            }
        };
        match name {
            "h" => return Ok(Invocation::Help),
            "V" => return Ok(Invocation::Version),
            "a" => options.all = true,
            "d" => options.done = true,
            "p" => options.pending = true,
            "r" => options.running = true,
            "s" => options.suspended = true,
            "l" => options.long = true,
            "w" => options.wide = true,
            "W" => options.wide_fields = true,
            "json" => options.json = true,
            "noheader" => options.noheader = true,
            "u" => options.user = Some(text()?),
            "q" => options.queue = Some(text()?),
            "m" => options.host = Some(text()?),
            "J" => options.job_name = Some(text()?),
            "P" => options.project = Some(text()?),
            "o" => options.format = Some(format::parse_custom(&text()?).map_err(BjobsError::Value)?),
            other => unreachable!("option -{other} is in SPECS but not handled"),
        }
    }
    if options.long && (options.wide || options.wide_fields || options.format.is_some()) {
        return Err(BjobsError::Usage(UsageError("-l cannot be combined with -w, -W or -o".to_owned())));
    }
    if options.json && options.noheader {
        return Err(BjobsError::Usage(UsageError("-json cannot be combined with -noheader".to_owned())));
    }
    let (jobs, all) = jobid::parse_all(&operands).map_err(BjobsError::Value)?;
    // As in LSF, `0` among the ids means no restriction by id.
    options.jobs = if all { Vec::new() } else { jobs };
    Ok(Invocation::List(Box::new(options)))
}

/// `LSB_BJOBS_FORMAT` (environment, else lsf.conf): the custom format of a
/// listing that asks for no layout of its own (no `-o`, `-l`, `-w`, `-W`), as
/// in LSF; an empty value is no format.
pub fn apply_default_format(options: &mut BjobsOptions, format: Option<String>) -> Result<(), String> {
    let Some(format) = format.filter(|format| !format.trim().is_empty()) else {
        return Ok(());
    };
    if options.format.is_none() && !(options.long || options.wide || options.wide_fields) {
        options.format = Some(format::parse_custom(format.trim().trim_matches('"'))?);
    }
    Ok(())
}

fn state_flags(options: &BjobsOptions) -> Vec<u32> {
    [
        (options.done, state_filter::DONE),
        (options.pending, state_filter::PENDING),
        (options.running, state_filter::RUNNING),
        (options.suspended, state_filter::SUSPENDED),
    ]
    .into_iter()
    .filter_map(|(set, filter)| set.then_some(filter))
    .collect()
}

/// Every page of the answer to `query` (mbatchd cuts long answers; see
/// `JobQueryReply::next_after`), in job-id order.
pub(crate) fn all_pages(client: &mut Client, query: JobQuery) -> Result<Vec<JobInfo>, client::ClientError> {
    let mut jobs = Vec::new();
    each_page(client, query, |page| {
        jobs.extend(page);
        true
    })?;
    Ok(jobs)
}

/// Hands each page of the answer to `query` to `page`, in job-id order, until the last
/// one or until `page` returns false.
fn each_page(
    client: &mut Client,
    mut query: JobQuery,
    mut page: impl FnMut(Vec<JobInfo>) -> bool,
) -> Result<(), client::ClientError> {
    loop {
        let reply: wire::JobQueryReply =
            client.call(Operation::JobQuery, Operation::JobQueryReply, &query)?;
        // A page that does not move the resume point on would be asked for forever.
        let next = (reply.next_after, reply.next_after_index);
        if !page(reply.jobs) || next.0 == 0 || next == (query.after_job, query.after_index) {
            return Ok(());
        }
        (query.after_job, query.after_index) = next;
    }
}

/// Pages mbatchd's answer may be ahead of the listing by (see [`stream_table`]).
const PAGES_AHEAD: usize = 2;

/// The table listings (default, `-w`, `-W`, `-p`, `-s`) of every matching job when no job
/// is named, printed page by page: a thread asks mbatchd for the next page while this one
/// prints, so bjobs and mbatchd work at once (with a million jobs their times would
/// otherwise add up), the first lines appear at once, and bjobs holds a few pages, not the
/// whole answer. The lines are those of [`render`] for the whole answer: the header once,
/// before the first job. False when the query failed (an error after some pages ends the
/// listing there) or, with `LSB_BJOBS_CONSISTENT_EXIT_CODE`, when nothing matched.
fn stream_table(term: &mut Term, client: Client, options: &BjobsOptions, listing: &Listing) -> bool {
    let (pages, received) = std::sync::mpsc::sync_channel::<Vec<JobInfo>>(PAGES_AHEAD);
    let query = query(options);
    let mut shown = 0usize;
    let fetched = std::thread::scope(|scope| {
        let fetcher = scope.spawn(move || {
            let mut client = client;
            each_page(&mut client, query, |page| pages.send(page).is_ok())
        });
        let mut page_options = options.clone();
        for page in received {
            let jobs: Vec<JobInfo> = page.into_iter().filter(|job| keep(options, job)).collect();
            if jobs.is_empty() {
                continue;
            }
            term.out(&render(&jobs, &[], &page_options, listing.short_hostlist, listing.now_s, &listing.tz));
            page_options.noheader = true;
            shown += jobs.len();
        }
        fetcher.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    if let Err(error) = fetched {
        term.err(&format!("{error}\n"));
        return false;
    }
    if shown == 0 {
        term.err(&nothing_found(options));
    }
    !(listing.consistent_exit && shown == 0)
}

/// What every listing of one `bjobs` shares beyond its options.
struct Listing {
    short_hostlist: bool,
    now_s: i64,
    tz: TimeZone,
    /// `LSB_BJOBS_CONSISTENT_EXIT_CODE=Y`: an empty selection exits 255.
    consistent_exit: bool,
}

/// The query for `options`: one state filter on the wire; a union of several
/// is asked as "all" and narrowed by [`keep`].
pub fn query(options: &BjobsOptions) -> JobQuery {
    let flags = state_flags(options);
    let filter = match flags.as_slice() {
        [] if options.all => state_filter::ALL,
        [] => state_filter::UNFINISHED,
        [one] => *one,
        _ => state_filter::ALL,
    };
    JobQuery {
        jobs: options.jobs.clone(),
        user: options.user.clone().unwrap_or_default(),
        state_filter: filter,
        queue: options.queue.clone().unwrap_or_default(),
        host: options.host.clone().unwrap_or_default(),
        job_name: options.job_name.clone().unwrap_or_default(),
        after_job: 0,
        after_index: 0,
    }
}

/// Whether a job of the reply is shown (the filters mbatchd does not apply).
pub fn keep(options: &BjobsOptions, job: &JobInfo) -> bool {
    if options.project.as_ref().is_some_and(|project| job.project != *project) {
        return false;
    }
    let flags = state_flags(options);
    if flags.len() <= 1 || !options.jobs.is_empty() {
        return true;
    }
    let status = JobStatus::from_bits(job.status);
    flags.iter().any(|filter| match *filter {
        state_filter::DONE => status.is_some_and(JobStatus::is_finished),
        state_filter::PENDING => status.is_some_and(JobStatus::is_pending),
        state_filter::RUNNING => status == Some(JobStatus::Run),
        _ => matches!(status, Some(JobStatus::Psusp | JobStatus::Ususp | JobStatus::Ssusp)),
    })
}

/// Whether the listing is LSF's JSON object (`-o ... -json`, `-l` not given).
pub fn is_json(options: &BjobsOptions) -> bool {
    options.json && options.format.is_some() && !options.long
}

/// LSF's message for a named job that is not shown.
pub fn not_found_message(job: WireJobRef) -> String {
    format!("Job <{}> is not found", jobid::display(job))
}

/// The listing of `jobs` as `options` ask; `not_found` (named jobs not shown) becomes
/// error records of the JSON listing, and is left to the caller otherwise.
/// `now_s` is the time of the listing (RUN_TIME, PEND_TIME).
pub fn render(
    jobs: &[JobInfo],
    not_found: &[WireJobRef],
    options: &BjobsOptions,
    short_hostlist: bool,
    now_s: i64,
    tz: &TimeZone,
) -> String {
    let style = Style {
        short_hostlist,
        pending_reasons: options.pending,
        suspend_reasons: options.suspended,
        header: !options.noheader,
        now_s,
    };
    if options.long {
        return format::long(jobs, &style, tz);
    }
    if let Some(custom) = &options.format {
        if is_json(options) {
            let errors: Vec<String> = not_found.iter().map(|job| not_found_message(*job)).collect();
            return format::custom_json(jobs, &errors, custom, &style, tz);
        }
        return format::custom(jobs, custom, &style, tz);
    }
    let pending_alone =
        options.pending && !(options.all || options.done || options.running || options.suspended);
    let layout = match () {
        () if options.wide_fields => Layout::WideFields,
        () if pending_alone => Layout::Pending,
        () if options.wide => Layout::Wide,
        () => Layout::Default,
    };
    format::table(jobs, layout, &style, tz)
}

/// The line for an empty selection without names.
pub fn nothing_found(options: &BjobsOptions) -> String {
    let flags = state_flags(options);
    let what = match flags.as_slice() {
        [] if options.all => "No job found",
        [] => "No unfinished job found",
        [state_filter::DONE] => "No DONE/EXIT job found",
        [state_filter::PENDING] => "No pending job found",
        [state_filter::RUNNING] => "No running job found",
        [state_filter::SUSPENDED] => "No suspended job found",
        _ => "No job found",
    };
    let mut line = what.to_owned();
    if let Some(queue) = &options.queue {
        line.push_str(&format!(" in queue <{queue}>"));
    }
    if let Some(host) = &options.host {
        line.push_str(&format!(" on host/group <{host}>"));
    }
    line.push('\n');
    line
}

/// The named jobs that the listing does not show.
pub fn missing(named: &[WireJobRef], shown: &[JobInfo]) -> Vec<WireJobRef> {
    named
        .iter()
        .filter(|wanted| {
            !shown.iter().any(|job| {
                job.job.job_id == wanted.job_id
                    && (wanted.array_index == 0 || job.job.array_index == wanted.array_index)
            })
        })
        .copied()
        .collect()
}

/// Runs `bjobs` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("bjobs", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let options = match parse_args(&args) {
        Ok(Invocation::Help) => {
            term.err(USAGE);
            return true;
        }
        Ok(Invocation::Version) => {
            term.err(term::VERSION_LINE);
            return true;
        }
        Ok(Invocation::List(options)) => *options,
        Err(BjobsError::Usage(UsageError(message))) => {
            term.err(&format!("bjobs: {message}\n"));
            term.err(USAGE);
            return false;
        }
        Err(BjobsError::Value(message)) => {
            term.err(&format!("{message}\n"));
            return false;
        }
    };
    let config = match client::load_config() {
        Ok(config) => config,
        Err(error) => {
            term.err(&format!("bjobs: {error}\n"));
            return false;
        }
    };
    let mut options = options;
    if let Err(message) = apply_default_format(&mut options, client::lsf_param(&config, "LSB_BJOBS_FORMAT")) {
        term.err(&format!("LSB_BJOBS_FORMAT: {message}\n"));
        return false;
    }
    let listing = Listing {
        short_hostlist: client::lsf_param(&config, "LSB_SHORT_HOSTLIST").is_some_and(|v| v.trim() == "1"),
        now_s: jiff::Timestamp::now().as_second(),
        tz: TimeZone::system(),
        consistent_exit: client::is_yes(
            client::lsf_param(&config, "LSB_BJOBS_CONSISTENT_EXIT_CODE").as_deref(),
        ),
    };
    let client = match Client::from_env(&config) {
        Ok(mut client) => {
            // Without a majority of master candidates, the last applied state, with a warning.
            client.accept_stale();
            client
        }
        Err(error) => {
            term.err(&format!("{error}\n"));
            return false;
        }
    };
    if options.jobs.is_empty() && !options.long && options.format.is_none() {
        return stream_table(term, client, &options, &listing);
    }
    let mut client = client;
    let jobs = match all_pages(&mut client, query(&options)) {
        Ok(jobs) => jobs,
        Err(error) => {
            term.err(&format!("{error}\n"));
            return false;
        }
    };
    let jobs: Vec<JobInfo> = jobs.into_iter().filter(|job| keep(&options, job)).collect();
    let missing = missing(&options.jobs, &jobs);
    term.out(&render(&jobs, &missing, &options, listing.short_hostlist, listing.now_s, &listing.tz));
    if !is_json(&options) {
        for job in &missing {
            term.err(&format!("{}\n", not_found_message(*job)));
        }
    }
    if jobs.is_empty() && options.jobs.is_empty() {
        term.err(&nothing_found(&options));
    }
    missing.is_empty() && !(listing.consistent_exit && jobs.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    fn options(args: &[&str]) -> BjobsOptions {
        match parse_args(&strings(args)) {
            Ok(Invocation::List(options)) => *options,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    // Goal: options, bundles and job ids in any order reach the query.
    #[test]
    fn options_make_the_query() {
        let parsed = options(&["-aw", "-u", "all", "-q", "normal", "12", "13[2]", "-J", "sim*", "12"]);
        assert!(parsed.all && parsed.wide && !parsed.long);
        assert_eq!(
            query(&parsed),
            JobQuery {
                jobs: vec![
                    WireJobRef { job_id: 12, array_index: 0 },
                    WireJobRef { job_id: 13, array_index: 2 }
                ],
                user: "all".to_owned(),
                state_filter: state_filter::ALL,
                queue: "normal".to_owned(),
                host: String::new(),
                job_name: "sim*".to_owned(),
                after_job: 0,
                after_index: 0,
            }
        );
        assert_eq!(query(&options(&[])).state_filter, state_filter::UNFINISHED);
        assert_eq!(query(&options(&["-p"])).state_filter, state_filter::PENDING);
        assert_eq!(query(&options(&["-d"])).state_filter, state_filter::DONE);
        assert_eq!(query(&options(&["-r"])).state_filter, state_filter::RUNNING);
        assert_eq!(query(&options(&["-s"])).state_filter, state_filter::SUSPENDED);
        assert_eq!(query(&options(&["-p", "-r"])).state_filter, state_filter::ALL);
        assert_eq!(query(&options(&["0"])).jobs, vec![]);
        assert_eq!(query(&options(&["5", "0"])).jobs, vec![]);
        assert!(options(&["-noheader", "-o", "stat"]).format.is_some());
    }

    // Goal: syntax errors are usage errors; bad ids and formats are value errors.
    #[test]
    fn bad_arguments() {
        let usage = |args: &[&str]| matches!(parse_args(&strings(args)), Err(BjobsError::Usage(_)));
        assert!(usage(&["-l", "-w"]));
        assert!(usage(&["-x"]));
        assert!(usage(&["-u"]));
        assert!(usage(&["-q", ""]));
        assert_eq!(
            parse_args(&strings(&["12x"])).map(|_| ()),
            Err(BjobsError::Value("12x: Illegal job ID.".to_owned()))
        );
        assert!(matches!(parse_args(&strings(&["-o", "bogus"])), Err(BjobsError::Value(_))));
        assert!(matches!(parse_args(&strings(&["-h"])), Ok(Invocation::Help)));
    }

    fn info(id: u32, status: JobStatus, project: &str) -> JobInfo {
        JobInfo {
            job: WireJobRef { job_id: id, array_index: 0 },
            user_name: "u".to_owned(),
            status: status.bits(),
            queue: "normal".to_owned(),
            from_host: "vm".to_owned(),
            job_name: "j".to_owned(),
            command: "j".to_owned(),
            project: project.to_owned(),
            n_slots: 1,
            ..JobInfo::default()
        }
    }

    // Goal: unions of state options and -P are applied here.
    #[test]
    fn local_filters() {
        let both = options(&["-p", "-r"]);
        assert!(keep(&both, &info(1, JobStatus::Pend, "default")));
        assert!(keep(&both, &info(2, JobStatus::Run, "default")));
        assert!(!keep(&both, &info(3, JobStatus::Done, "default")));
        let project = options(&["-P", "p1"]);
        assert!(keep(&project, &info(1, JobStatus::Run, "p1")));
        assert!(!keep(&project, &info(2, JobStatus::Run, "default")));
    }

    // Goal: the empty-selection line names the selection, as LSF's do.
    #[test]
    fn nothing_found_lines() {
        assert_eq!(nothing_found(&options(&[])), "No unfinished job found\n");
        assert_eq!(nothing_found(&options(&["-a"])), "No job found\n");
        assert_eq!(nothing_found(&options(&["-d"])), "No DONE/EXIT job found\n");
        assert_eq!(nothing_found(&options(&["-p"])), "No pending job found\n");
        assert_eq!(
            nothing_found(&options(&["-r", "-q", "night"])),
            "No running job found in queue <night>\n"
        );
        assert_eq!(
            nothing_found(&options(&["-s", "-m", "h1"])),
            "No suspended job found on host/group <h1>\n"
        );
        assert_eq!(nothing_found(&options(&["-p", "-s"])), "No job found\n");
    }

    // Goal: a named job counts as shown by id (an array id covers its elements).
    #[test]
    fn missing_named_jobs() {
        let named = vec![WireJobRef { job_id: 1, array_index: 0 }, WireJobRef { job_id: 2, array_index: 0 }];
        let shown = vec![info(1, JobStatus::Run, "default")];
        assert_eq!(missing(&named, &shown), vec![WireJobRef { job_id: 2, array_index: 0 }]);
    }

    // Goal: LSB_BJOBS_FORMAT is the format of a listing without a layout
    // option; -o, -l, -w and -W win over it; a bad one is an error.
    #[test]
    fn default_format_from_lsf_conf() {
        let with = |args: &[&str], format: Option<&str>| {
            let mut parsed = options(args);
            apply_default_format(&mut parsed, format.map(str::to_owned)).map(|()| parsed)
        };
        let jobs = vec![info(1, JobStatus::Pend, "default")];
        let utc = TimeZone::UTC;
        let listing = |parsed: &BjobsOptions| render(&jobs, &[], parsed, false, 0, &utc);
        let set = with(&[], Some("\"jobid stat\"")).expect("a valid format");
        assert_eq!(listing(&set), "JOBID STAT\n1     PEND\n");
        let json = with(&["-json"], Some("stat")).expect("a valid format");
        assert!(listing(&json).contains("\"STAT\":\"PEND\""));
        assert_eq!(listing(&with(&["-o", "user"], Some("stat")).expect("valid")), "USER\nu\n");
        assert!(listing(&with(&["-w"], Some("stat")).expect("valid")).starts_with(format::HEADER));
        assert!(listing(&with(&[], Some("  ")).expect("empty is none")).starts_with(format::HEADER));
        assert!(with(&[], Some("bogus")).is_err());
    }

    // Goal: a named job that is not found is an error record of the -json listing only;
    // the other layouts leave its message to standard error (the caller).
    #[test]
    fn not_found_jobs_in_json() {
        let jobs = vec![info(1, JobStatus::Pend, "default")];
        let utc = TimeZone::UTC;
        let missing = [WireJobRef { job_id: 9, array_index: 0 }];
        let json = options(&["-o", "jobid stat", "-json", "1", "9"]);
        assert!(is_json(&json));
        let listing = render(&jobs, &missing, &json, false, 0, &utc);
        assert!(listing.contains("  \"JOBS\":2,\n"), "{listing}");
        assert!(listing.contains("      \"ERROR\":\"Job <9> is not found\"\n"), "{listing}");
        let columns = options(&["-o", "jobid stat", "1", "9"]);
        assert!(!is_json(&columns));
        assert_eq!(render(&jobs, &missing, &columns, false, 0, &utc), "JOBID STAT\n1     PEND\n");
        assert!(!is_json(&options(&["-json", "-l"])));
    }

    // Goal: the layout follows the options (-p alone, -w, -l, -o, -noheader).
    #[test]
    fn layout_choice() {
        let jobs = vec![info(1, JobStatus::Pend, "default")];
        let utc = TimeZone::UTC;
        assert!(render(&jobs, &[], &options(&["-p"]), false, 0, &utc).starts_with(format::HEADER_PENDING));
        assert!(render(&jobs, &[], &options(&["-p", "-a"]), false, 0, &utc).starts_with(format::HEADER));
        assert!(render(&jobs, &[], &options(&["-w"]), false, 0, &utc).contains("   -    "));
        assert!(render(&jobs, &[], &options(&["-l"]), false, 0, &utc).starts_with("\nJob <1>,"));
        assert_eq!(
            render(&jobs, &[], &options(&["-noheader", "-o", "jobid stat"]), false, 0, &utc),
            "1 PEND\n"
        );
        assert!(render(&jobs, &[], &options(&["-noheader"]), false, 0, &utc).starts_with("1       u"));
    }
}
