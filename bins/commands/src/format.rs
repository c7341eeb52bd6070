//! What `bjobs` prints, as pure functions of the jobs, a few switches and a
//! time zone (tests pass a fixed one; the command passes the system's).
//!
//! The layouts are Lava's `bjobs.c` and `cmd.job.c` (identical to classic LSF's):
//! - **default**: `%-7d %-7.7s %-5.5s %-10.10s %-11.11s %-11.11s %-10.10s %s`
//!   (JOBID, USER, STAT, QUEUE, FROM_HOST, EXEC_HOST, JOB_NAME, SUBMIT_TIME).
//!   Columns are cut to their width, except the job name, which keeps its
//!   *end* behind a `*` (`*-125_154)`): the end of a name usually tells jobs
//!   apart. EXEC_HOST is empty for a pending job and `   -   ` for a started
//!   one without hosts; each further host (one entry per slot) goes on its own
//!   line at column 45, or as `N*host` when `LSB_SHORT_HOSTLIST=1`.
//! - **`-w`**: the same columns, never cut, the hosts joined with `:`
//!   (`   -    ` for a pending job, so that every line has the same words).
//! - **`-p` alone**: LSF's pending header (no EXEC_HOST, wider QUEUE and
//!   FROM_HOST, an 18-column name), each job followed by its reason line
//!   (` New job is waiting for scheduling;`). Lava cuts the name to 20 with
//!   the star and prints 18 of it; we keep the star at 18.
//! - **`-l`**: the wrapped block. Text is streamed through LSF's `prtLine`
//!   rule: when the cursor reaches column 80 the line breaks and continues
//!   after 21 blanks (one leading blank of the continuation is dropped), so
//!   every line is at most 79 characters. Jobs are separated by a line of 78
//!   dashes; the output starts and ends with a blank line. The header names
//!   the `Dependency Condition`, the submission line the `Requested
//!   Resources`; RUNLIMIT and MEMLIMIT blocks follow the submission line; a
//!   job LavaCore ended gets LSF's `Completed <exit>; TERM_...` line.
//! - **`-W`**: the `-w` columns, then PROJ_NAME CPU_USED MEM SWAP PIDS
//!   START_TIME FINISH_TIME, times as `%m/%d-%H:%M:%S`, CPU_USED as
//!   `hhh:mm:ss.cc`, MEM in KB; `-` for what is not known (mbatchd learns the
//!   usage when the job ends; swap is not measured).
//! - **`-o "field[:[-][width][:unit]] ... [delimiter='c']"`**: LSF 9+'s
//!   custom format over the fields of [`FIELDS`] (LSF's names, aliases and
//!   recommended widths); `-` stands for an empty value; a width cuts the
//!   value (a job name keeps its end behind `*`), `-width` right-aligns,
//!   a unit (`KB` `MB` `GB` `TB`) applies to memory fields.
//! - **`-o ... -json`**: LSF's JSON object `{"COMMAND":"bjobs","JOBS":N,
//!   "RECORDS":[{...}]}`, keyed by the fields' upper-case headers, every value
//!   a string, `""` where the columns print `-`; a named job that is not found
//!   is an error record `{"ERROR":"Job <N> is not found"}` after the jobs, and
//!   `JOBS` counts every record.
//!
//! Times: SUBMIT_TIME and the times of `-o` are `%b %e %H:%M` (`Nov  5
//! 22:44`, the day padded with a blank as LSF prints it) in local time; an
//! actual FINISH_TIME of `-o` ends in ` L`, LSF's mark. The dated lines of `-l`
//! are `%a %b %e %H:%M:%S` (ctime's first 19 characters, as Lava prints the
//! submission line).

use std::borrow::Cow;
use std::fmt::Write as _;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use lava_batch_ll::JobStatus;
use lava_batch_wire::{self as wire, JobInfo};

use crate::fields::{self, FIELDS, FieldDef};
use crate::jobid;

/// The default header.
pub const HEADER: &str = "JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME\n";
/// The header of `bjobs -W`.
pub const HEADER_WIDE_FIELDS: &str = "JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   \
SUBMIT_TIME  PROJ_NAME CPU_USED MEM SWAP PIDS START_TIME FINISH_TIME\n";
/// The header of `bjobs -p` alone.
pub const HEADER_PENDING: &str =
    "JOBID   USER    STAT  QUEUE       FROM_HOST      JOB_NAME           SUBMIT_TIME\n";
/// The column where further execution hosts are printed, one per line.
pub const EXEC_HOST_COLUMN: usize = 45;
/// The column at which `-l` breaks a line (LSF's WIDTH).
pub const WRAP_WIDTH: usize = 80;
/// The blanks starting a continuation line of `-l`.
pub const WRAP_INDENT: usize = 21;
/// The line between two jobs of `-l`.
pub const LONG_SEPARATOR: &str =
    "------------------------------------------------------------------------------\n";

/// Which tabular layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Classic columns, cut to width.
    Default,
    /// `-w`: never cut.
    Wide,
    /// `-W`: never cut, with the usage columns and full times.
    WideFields,
    /// `-p` alone: the pending header.
    Pending,
}

/// Switches that change what the layouts print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    /// `LSB_SHORT_HOSTLIST=1`: `N*host` instead of one entry per slot.
    pub short_hostlist: bool,
    /// `-p`: a reason line under each pending job.
    pub pending_reasons: bool,
    /// `-s`: a reason line under each suspended job.
    pub suspend_reasons: bool,
    /// Print the header (not with `-noheader`).
    pub header: bool,
    /// The time of the listing, seconds since the epoch (RUN_TIME and
    /// PEND_TIME of unfinished jobs count up to it).
    pub now_s: i64,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            short_hostlist: false,
            pending_reasons: false,
            suspend_reasons: false,
            header: true,
            now_s: 0,
        }
    }
}

/// The STAT word of a status (LSF prints `ERROR` for bits it does not know).
pub fn status_name(bits: u32) -> &'static str {
    JobStatus::from_bits(bits).map_or("ERROR", JobStatus::as_str)
}

pub(crate) fn status(job: &JobInfo) -> Option<JobStatus> {
    JobStatus::from_bits(job.status)
}

pub(crate) fn is_pending(job: &JobInfo) -> bool {
    status(job).is_some_and(JobStatus::is_pending)
}

/// `text` cut to `width` characters.
pub fn cut(text: &str, width: usize) -> String {
    text.chars().take(width).collect()
}

/// LSF's TRUNC_STR: a text longer than `width` becomes `*` and its last `width - 1` characters.
pub fn truncate_star(text: &str, width: usize) -> Cow<'_, str> {
    let n_chars = text.chars().count();
    if n_chars <= width || width == 0 {
        return Cow::Borrowed(text);
    }
    let tail: String = text.chars().skip(n_chars - (width - 1)).collect();
    Cow::Owned(format!("*{tail}"))
}

/// A job script on one line, as LSF shows it (`#BSUB -J x;echo hi`): its
/// non-blank lines joined with `;`. A multi-line name or command would
/// otherwise break the one-line-per-job layouts that tools parse.
pub fn one_line(text: &str) -> Cow<'_, str> {
    if !text.contains(['\n', '\r']) {
        return Cow::Borrowed(text);
    }
    let lines: Vec<&str> =
        text.lines().map(|line| line.trim_end_matches('\r')).filter(|line| !line.trim().is_empty()).collect();
    Cow::Owned(lines.join(";"))
}

/// The job name as bjobs shows it, on one line; an array element's name ends in `[index]`.
pub fn display_name(job: &JobInfo) -> Cow<'_, str> {
    let name = one_line(&job.job_name);
    if job.job.array_index == 0 {
        return name;
    }
    let base = name.split('[').next().unwrap_or_default();
    Cow::Owned(format!("{base}[{}]", job.job.array_index))
}

/// The execution hosts as listed: one entry per slot, or `N*host` (first-seen order).
pub fn host_list(hosts: &[String], short: bool) -> Cow<'_, [String]> {
    if !short || hosts.len() <= 1 {
        return Cow::Borrowed(hosts);
    }
    let mut counted: Vec<(&str, usize)> = Vec::new();
    for host in hosts {
        match counted.iter_mut().find(|(name, _)| *name == host) {
            Some(entry) => entry.1 += 1,
            None => counted.push((host, 1)),
        }
    }
    Cow::Owned(counted.into_iter().map(|(host, n)| format!("{n}*{host}")).collect())
}

/// SUBMIT_TIME of one listing, formatted once per local minute: a listing of
/// many jobs submitted together would otherwise convert the same minute to
/// the time zone once per job.
struct MinuteTimes<'a> {
    tz: &'a TimeZone,
    /// Seconds since the epoch where the cached local minute starts and ends.
    start: i64,
    end: i64,
    text: String,
}

impl<'a> MinuteTimes<'a> {
    fn new(tz: &'a TimeZone) -> MinuteTimes<'a> {
        MinuteTimes { tz, start: 0, end: 0, text: String::new() }
    }

    /// [`short_time`] of `seconds`.
    fn get(&mut self, seconds: i64) -> &str {
        if !(self.start..self.end).contains(&seconds) {
            match Timestamp::from_second(seconds) {
                Ok(instant) => {
                    let local = instant.to_zoned(self.tz.clone());
                    self.text = local.strftime("%b %e %H:%M").to_string();
                    // Time zones change their offset on whole minutes, so the
                    // whole local minute shares this text.
                    self.start = seconds - i64::from(local.second());
                    self.end = self.start + 60;
                }
                Err(_) => {
                    self.text = "-".to_owned();
                    (self.start, self.end) = (seconds, seconds + 1);
                }
            }
        }
        &self.text
    }
}

fn local_time(seconds: i64, tz: &TimeZone, pattern: &str) -> String {
    match Timestamp::from_second(seconds) {
        Ok(instant) => instant.to_zoned(tz.clone()).strftime(pattern).to_string(),
        Err(_) => "-".to_owned(),
    }
}

/// SUBMIT_TIME: `Nov 25 22:44`, `Nov  5 22:44` (the day padded with a blank, as LSF prints it).
pub fn short_time(seconds: i64, tz: &TimeZone) -> String {
    local_time(seconds, tz, "%b %e %H:%M")
}

/// A time of `-W`: `11/25-22:44:01`.
pub fn wide_time(seconds: i64, tz: &TimeZone) -> String {
    local_time(seconds, tz, "%m/%d-%H:%M:%S")
}

/// The date of a `-l` line: `Mon Nov 25 22:44:01`.
pub fn event_time(seconds: i64, tz: &TimeZone) -> String {
    local_time(seconds, tz, "%a %b %e %H:%M:%S")
}

/// A full date as LSF's daemons print it: `Thu Nov 26 03:45:00 2026`.
pub fn long_date(seconds: i64, tz: &TimeZone) -> String {
    local_time(seconds, tz, "%a %b %e %H:%M:%S %Y")
}

/// A reason line (` New job is waiting for scheduling;`), empty when there is no reason.
fn reason_line(reason: &str) -> String {
    let reason = reason.trim();
    if reason.is_empty() {
        return String::new();
    }
    let end = if reason.ends_with(';') { "" } else { ";" };
    format!(" {reason}{end}\n")
}

/// The default, `-w`, `-W` and `-p` layouts.
pub fn table(jobs: &[JobInfo], layout: Layout, style: &Style, tz: &TimeZone) -> String {
    let mut out = String::with_capacity(jobs.len() * 96);
    if style.header && !jobs.is_empty() {
        out.push_str(match layout {
            Layout::Pending => HEADER_PENDING,
            Layout::WideFields => HEADER_WIDE_FIELDS,
            Layout::Default | Layout::Wide => HEADER,
        });
    }
    let mut times = MinuteTimes::new(tz);
    for job in jobs {
        row(&mut out, job, layout, style, &mut times);
        let state = status(job);
        let pending = state.is_some_and(JobStatus::is_pending);
        let suspended = matches!(state, Some(JobStatus::Psusp | JobStatus::Ususp | JobStatus::Ssusp));
        if (style.pending_reasons && pending) || (style.suspend_reasons && suspended) {
            out.push_str(&reason_line(&job.reason));
        }
    }
    out
}

// Writing into a String cannot fail: the `let _ = write!(...)` below ignore
// an error that does not exist. `{:<7.7}` pads to 7 characters and cuts to 7.
fn row(out: &mut String, job: &JobInfo, layout: Layout, style: &Style, times: &mut MinuteTimes<'_>) {
    let id = job.job.job_id;
    let stat = status_name(job.status);
    let name = display_name(job);
    let pending = is_pending(job);
    let hosts = host_list(&job.exec_hosts, style.short_hostlist);
    match layout {
        Layout::Pending => {
            let _ = writeln!(
                out,
                "{id:<7} {:<7.7} {stat:<5.5} {:<11.11} {:<14.14} {:<18} {}",
                job.user_name,
                job.queue,
                job.from_host,
                truncate_star(&name, 18),
                times.get(job.submit_time),
            );
        }
        Layout::Wide | Layout::WideFields => {
            let exec = match () {
                () if pending => Cow::Borrowed("   -    "),
                () if hosts.is_empty() => Cow::Borrowed("   -   "),
                () => Cow::Owned(hosts.join(":")),
            };
            let _ = write!(
                out,
                "{id:<7} {:<7} {stat:<5.5} {:<10} {:<11} {exec:<11} {name:<10} ",
                job.user_name, job.queue, job.from_host,
            );
            if layout == Layout::Wide {
                out.push_str(times.get(job.submit_time));
            } else {
                out.push_str(&wide_time(job.submit_time, times.tz));
                out.push_str(&usage_columns(job, times.tz));
            }
            out.push('\n');
        }
        Layout::Default => {
            let first = match hosts.first() {
                _ if pending => "",
                None => "   -   ",
                Some(host) => host,
            };
            let _ = writeln!(
                out,
                "{id:<7} {:<7.7} {stat:<5.5} {:<10.10} {:<11.11} {first:<11.11} {:<10} {}",
                job.user_name,
                job.queue,
                job.from_host,
                truncate_star(&name, 10),
                times.get(job.submit_time),
            );
            if !pending {
                for host in hosts.iter().skip(1) {
                    let _ = writeln!(out, "{:EXEC_HOST_COLUMN$}{host}", "");
                }
            }
        }
    }
}

/// The columns `-W` adds: PROJ_NAME CPU_USED MEM SWAP PIDS START_TIME
/// FINISH_TIME, `-` where the job has no value (the usage is known once the
/// job has finished; LavaCore does not sample swap).
fn usage_columns(job: &JobInfo, tz: &TimeZone) -> String {
    let dash = |text: String| if text.is_empty() { "-".to_owned() } else { text };
    let cpu = cpu_ms(job).map_or_else(|| "-".to_owned(), cpu_time_hms);
    let mem = match job.rusage.max_rss_kb {
        0 => "-".to_owned(),
        kb => kb.to_string(),
    };
    let pids = if job.pid > 0 { job.pid.to_string() } else { "-".to_owned() };
    let time = |seconds: i64| if seconds == 0 { "-".to_owned() } else { wide_time(seconds, tz) };
    format!(
        " {:<10} {cpu:<12} {mem:<6} {:<6} {pids} {} {}",
        dash(job.project.clone()),
        "-",
        time(job.start_time),
        time(job.end_time)
    )
}

/// Text streamed through LSF's line-breaking rule (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct Wrap {
    pub(crate) out: String,
    cursor: usize,
}

impl Wrap {
    pub(crate) fn put(&mut self, text: &str) {
        if text.starts_with('\n') {
            self.cursor = 0;
        }
        let mut chars = text.chars();
        while let Some(mut c) = chars.next() {
            if self.cursor == WRAP_WIDTH {
                self.out.push('\n');
                self.out.extend(std::iter::repeat_n(' ', WRAP_INDENT));
                self.cursor = WRAP_INDENT + 1;
                if c == ' ' {
                    match chars.next() {
                        Some(next) => c = next,
                        None => return,
                    }
                }
            }
            self.out.push(c);
            if c == '\n' {
                self.cursor = 0;
            }
            self.cursor += 1;
        }
    }
}

/// The `-l` layout.
pub fn long(jobs: &[JobInfo], style: &Style, tz: &TimeZone) -> String {
    let mut wrap = Wrap::default();
    for (job_idx, job) in jobs.iter().enumerate() {
        if job_idx > 0 {
            wrap.put(LONG_SEPARATOR);
        }
        long_job(&mut wrap, job, style, tz);
    }
    if !jobs.is_empty() {
        wrap.put("\n");
    }
    wrap.out
}

/// `CWD <...>` as LSF shows it: `$HOME` for the home, `$HOME/rel` inside it.
pub(crate) fn cwd_shown(cwd: &str) -> String {
    match cwd {
        "" => "$HOME".to_owned(),
        absolute if absolute.starts_with('/') => absolute.to_owned(),
        relative => format!("$HOME/{relative}"),
    }
}

fn long_job(wrap: &mut Wrap, job: &JobInfo, style: &Style, tz: &TimeZone) {
    let state = status(job);
    let name = display_name(job);
    wrap.put(&format!("\nJob <{}>,", jobid::display(job.job)));
    // mbatchd names an unnamed job after its command (cut to a name's length).
    if !name.is_empty() && !job.command.starts_with(&job.job_name) {
        wrap.put(&format!(" Job Name <{name}>,"));
    }
    wrap.put(&format!(" User <{}>,", job.user_name));
    wrap.put(&format!(" Project <{}>,", job.project));
    wrap.put(&format!(" Status <{}>, Queue <{}>,", status_name(job.status), job.queue));
    if !job.dependency.is_empty() {
        wrap.put(&format!(" Dependency Condition <{}>,", job.dependency));
    }
    wrap.put(&format!(" Command <{}>\n", one_line(&job.command)));

    wrap.put(&format!("{}: Submitted from host <{}>", event_time(job.submit_time, tz), job.from_host));
    wrap.put(&format!(", CWD <{}>", cwd_shown(&job.cwd)));
    if !job.output_file.is_empty() {
        wrap.put(&format!(", Output File <{}>", job.output_file));
    }
    if !job.error_file.is_empty() {
        wrap.put(&format!(", Error File <{}>", job.error_file));
    }
    if job.n_slots > 1 {
        wrap.put(&format!(", {} Processors Requested", job.n_slots));
    }
    if !job.res_req.is_empty() {
        wrap.put(&format!(", Requested Resources <{}>", job.res_req));
    }
    if !job.pre_exec.is_empty() {
        wrap.put(&format!(", Pre-execute Command <{}>", job.pre_exec));
    }
    if !job.post_exec.is_empty() {
        wrap.put(&format!(", Post-execute Command <{}>", job.post_exec));
    }
    wrap.put(";\n");
    limits(wrap, job);

    let pending = state.is_some_and(JobStatus::is_pending);
    if job.start_time != 0 && !pending && !job.exec_hosts.is_empty() {
        let verb = if job.pid > 0 { "Started on" } else { "Dispatched to" };
        wrap.put(&format!("{}: {verb}", event_time(job.start_time, tz)));
        if job.exec_hosts.len() > 1 {
            wrap.put(&format!(" {} Hosts/Processors", job.exec_hosts.len()));
        }
        for host in host_list(&job.exec_hosts, style.short_hostlist).iter() {
            wrap.put(&format!(" <{host}>"));
        }
        if !job.exec_cwd.is_empty() {
            wrap.put(&format!(", Execution CWD <{}>", job.exec_cwd));
        }
        wrap.put(";\n");
    }

    if let Some(JobStatus::Done | JobStatus::Exit) = state {
        wrap.put(&format!("{}: ", event_time(job.end_time, tz)));
        wrap.put(&match (state, job.exit_code) {
            (Some(JobStatus::Done), _) => "Done successfully.".to_owned(),
            (_, 0) => "Exited.".to_owned(),
            (_, code) => format!("Exited with exit code {code}."),
        });
        let cpu_ms = job.rusage.user_time_ms + job.rusage.system_time_ms;
        wrap.put(&match () {
            () if job.exec_hosts.is_empty() => "\n".to_owned(),
            () if cpu_ms == 0 => " The CPU time used is unknown.\n".to_owned(),
            () => format!(" The CPU time used is {:.1} seconds.\n", cpu_ms as f64 / 1000.0),
        });
    }
    if !exit_reason(job).is_empty() {
        wrap.put(&format!("{}: Completed <exit>; {}.\n", event_time(job.end_time, tz), exit_reason(job)));
    }
    match state {
        Some(JobStatus::Pend | JobStatus::Psusp) => {
            wrap.put("\n PENDING REASONS:\n");
            wrap.put(&reason_line(&job.reason));
        }
        Some(JobStatus::Ssusp | JobStatus::Ususp) => {
            wrap.put("\n SUSPENDING REASONS:\n");
            wrap.put(&reason_line(&job.reason));
        }
        _ => {}
    }
}

/// What a field's value may depend on besides the job.
#[derive(Clone, Copy, Debug)]
pub struct CellContext<'a> {
    /// The switches of the listing.
    pub style: &'a Style,
    /// The time zone of the times.
    pub tz: &'a TimeZone,
    /// The unit of a memory field (`max_mem:10:MB`), else LSF's automatic one.
    pub unit: Option<MemUnit>,
}

/// The RUNLIMIT and MEMLIMIT blocks of `-l`, each after a blank line, then a
/// blank line; nothing when the job has no limit.
fn limits(wrap: &mut Wrap, job: &JobInfo) {
    if job.run_limit_s > 0 {
        wrap.put(&format!("\n RUNLIMIT\n {:.1} min\n", job.run_limit_s as f64 / 60.0));
    }
    if job.mem_limit_kb > 0 {
        wrap.put(&format!("\n MEMLIMIT\n {:>6}\n", limit_memory(job.mem_limit_kb)));
    }
    if job.run_limit_s > 0 || job.mem_limit_kb > 0 {
        wrap.put("\n");
    }
}

/// A memory limit as `-l` and `bqueues -l` print it: `512 K`, `100 M`, `2 G`
/// (the largest unit that divides it exactly).
pub fn limit_memory(kb: u64) -> String {
    match kb {
        kb if kb % (1 << 20) == 0 => format!("{} G", kb >> 20),
        kb if kb % (1 << 10) == 0 => format!("{} M", kb >> 10),
        kb => format!("{kb} K"),
    }
}

/// A unit of a memory field: `KB`, `MB`, `GB`, `TB` (or `K`, `M`, `G`, `T`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemUnit {
    /// Kilobytes.
    Kb,
    /// Megabytes.
    Mb,
    /// Gigabytes.
    Gb,
    /// Terabytes.
    Tb,
}

impl MemUnit {
    fn parse(text: &str) -> Option<MemUnit> {
        match text.to_ascii_uppercase().as_str() {
            "KB" | "K" => Some(MemUnit::Kb),
            "MB" | "M" => Some(MemUnit::Mb),
            "GB" | "G" => Some(MemUnit::Gb),
            "TB" | "T" => Some(MemUnit::Tb),
            _ => None,
        }
    }

    fn kb(self) -> u64 {
        match self {
            MemUnit::Kb => 1,
            MemUnit::Mb => 1 << 10,
            MemUnit::Gb => 1 << 20,
            MemUnit::Tb => 1 << 30,
        }
    }

    fn name(self) -> &'static str {
        match self {
            MemUnit::Kb => "KB",
            MemUnit::Mb => "MB",
            MemUnit::Gb => "GB",
            MemUnit::Tb => "TB",
        }
    }
}

/// A memory amount as bjobs prints it: in `unit` (`1.5 GB`, one decimal
/// unless whole), else in LSF's automatic unit (`512 Kbytes`, `12 Mbytes`,
/// `1.5 Gbytes`); empty for 0 (unknown).
pub fn memory(kb: u64, unit: Option<MemUnit>) -> String {
    let number = |value: f64| {
        if value.fract() == 0.0 { format!("{value:.0}") } else { format!("{value:.1}") }
    };
    match unit {
        _ if kb == 0 => String::new(),
        Some(unit) => format!("{} {}", number(kb as f64 / unit.kb() as f64), unit.name()),
        None if kb < 1 << 10 => format!("{kb} Kbytes"),
        None if kb < 1 << 20 => format!("{} Mbytes", kb >> 10),
        None => format!("{} Gbytes", number(((kb as f64) / f64::from(1 << 20) * 10.0).round() / 10.0)),
    }
}

/// CPU time as `-W` prints it: `hhh:mm:ss.cc`.
pub fn cpu_time_hms(ms: u64) -> String {
    let (hours, rest_ms) = (ms / 3_600_000, ms % 3_600_000);
    format!("{hours:03}:{:02}:{:02}.{:02}", rest_ms / 60_000, rest_ms % 60_000 / 1000, rest_ms % 1000 / 10)
}

/// CPU time of a finished job in milliseconds; `None` before (mbatchd learns
/// the usage when the job ends).
pub(crate) fn cpu_ms(job: &JobInfo) -> Option<u64> {
    status(job)
        .is_some_and(JobStatus::is_finished)
        .then_some(job.rusage.user_time_ms + job.rusage.system_time_ms)
}

/// EXIT_REASON: LSF's `TERM_*` text for why LavaCore ended the job; empty when
/// the job ended on its own (or is not finished).
pub fn exit_reason(job: &JobInfo) -> &'static str {
    if status(job) != Some(JobStatus::Exit) {
        return "";
    }
    match job.finish_reason {
        wire::FINISH_RUN_LIMIT => "TERM_RUNLIMIT: job killed after reaching LSF run time limit",
        wire::FINISH_MEM_LIMIT => "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit",
        wire::FINISH_KILLED => "TERM_OWNER: job killed by owner",
        _ => "",
    }
}

/// RUN_TIME in seconds: from the start to the finish, or to `now_s` while the
/// job runs; 0 for a job that never started.
pub(crate) fn run_seconds(job: &JobInfo, now_s: i64) -> i64 {
    match (job.start_time, job.end_time) {
        (0, _) => 0,
        (start, 0) => (now_s - start).max(0),
        (start, end) => (end - start).max(0),
    }
}

/// PEND_TIME in seconds: from the submission to the start, or to `now_s` (to
/// the finish for a job that ended without starting).
pub(crate) fn pend_seconds(job: &JobInfo, now_s: i64) -> i64 {
    let until = match (job.start_time, job.end_time) {
        (0, 0) => now_s,
        (0, end) => end,
        (start, _) => start,
    };
    (until - job.submit_time).max(0)
}

/// A time of `-o`: `Nov  5 22:44`, empty for none.
pub(crate) fn custom_time(seconds: i64, tz: &TimeZone) -> String {
    if seconds == 0 { String::new() } else { short_time(seconds, tz) }
}

/// The widest column `-o` allows (LSF's).
pub const WIDTH_MAX: usize = 4096;

/// One column of `-o`.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The field.
    pub field: &'static FieldDef,
    /// A fixed width (`stat:5`), else as wide as the widest value.
    pub width: Option<usize>,
    /// `stat:-5`: right-justified.
    pub right: bool,
    /// `max_mem::GB`: the unit of a memory field.
    pub unit: Option<MemUnit>,
}

/// A parsed `-o` specification.
#[derive(Debug, Clone)]
pub struct CustomFormat {
    /// Columns in order.
    pub columns: Vec<Column>,
    /// `delimiter='c'`: columns joined by it, unpadded.
    pub delimiter: Option<String>,
}

/// Parses `-o "field[:[-][width][:unit]] ... [delimiter='c']"`.
pub fn parse_custom(spec: &str) -> Result<CustomFormat, String> {
    let mut text = spec.to_owned();
    let mut delimiter = None;
    if let Some(start) = text.find("delimiter=") {
        let rest = &text[start + "delimiter=".len()..];
        let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"');
        let (value, consumed) = match quote {
            Some(q) => {
                let end =
                    rest[1..].find(q).ok_or_else(|| format!("{spec}: unbalanced quote after delimiter="))?;
                (rest[1..1 + end].to_owned(), end + 2)
            }
            None => {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                (rest[..end].to_owned(), end)
            }
        };
        delimiter = Some(value);
        text.replace_range(start..start + "delimiter=".len() + consumed, " ");
    }
    let mut columns = Vec::new();
    for token in text.split_whitespace() {
        match token.split_once(':') {
            // `all[:width]`: every field, each with that width (LSF 10.1 FP14).
            Some((all, width)) if all.eq_ignore_ascii_case("all") => {
                for field in FIELDS {
                    columns.push(parse_column(&format!("{}:{width}", field.names[0]))?);
                }
            }
            None if token.eq_ignore_ascii_case("all") => {
                columns.extend(FIELDS.iter().map(|field| Column {
                    field,
                    width: None,
                    right: false,
                    unit: None,
                }));
            }
            _ => columns.push(parse_column(token)?),
        }
    }
    if columns.is_empty() {
        return Err(format!("{spec}: no field in the output format"));
    }
    Ok(CustomFormat { columns, delimiter })
}

fn parse_column(token: &str) -> Result<Column, String> {
    let mut parts = token.splitn(3, ':');
    let name = parts.next().unwrap_or_default();
    let field =
        fields::find(name).ok_or_else(|| format!("{name}: Illegal field name in the output format"))?;
    let (width, right) = match parts.next() {
        None => (None, false),
        Some(width) => {
            let (right, digits) = match width.strip_prefix('-') {
                Some(digits) => (true, digits),
                None => (false, width),
            };
            // `field:` is LSF's recommended width (none for the few fields
            // without one); a width is 1 to 4096, as in LSF.
            let width = if digits.is_empty() {
                Some(field.width).filter(|width| *width > 0)
            } else {
                Some(
                    digits
                        .parse::<usize>()
                        .ok()
                        .filter(|w| (1..=WIDTH_MAX).contains(w))
                        .ok_or_else(|| format!("{token}: Illegal width in the output format"))?,
                )
            };
            (width, right)
        }
    };
    let unit = match parts.next() {
        None => None,
        Some(_) if !field.memory => {
            return Err(format!("{token}: A unit prefix is only allowed for memory fields"));
        }
        Some(unit) => Some(
            MemUnit::parse(unit)
                .ok_or_else(|| format!("{token}: Illegal unit prefix in the output format"))?,
        ),
    };
    Ok(Column { field, width, right, unit })
}

fn cell_value(column: &Column, job: &JobInfo, style: &Style, tz: &TimeZone) -> String {
    (column.field.value)(job, &CellContext { style, tz, unit: column.unit })
}

/// The `-o` layout: `-` for a value the job does not have.
pub fn custom(jobs: &[JobInfo], format: &CustomFormat, style: &Style, tz: &TimeZone) -> String {
    let cell = |column: &Column, text: String| {
        let text = if text.is_empty() { "-".to_owned() } else { text };
        match column.width {
            Some(width) if column.field.names[0] == "job_name" => truncate_star(&text, width).into_owned(),
            Some(width) => cut(&text, width),
            None => text,
        }
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    if style.header && !jobs.is_empty() {
        let header = |column: &Column| {
            let header = column.field.header();
            column.width.map_or_else(|| header.clone(), |w| cut(&header, w))
        };
        rows.push(format.columns.iter().map(header).collect());
    }
    for job in jobs {
        rows.push(format.columns.iter().map(|c| cell(c, cell_value(c, job, style, tz))).collect());
    }
    let widths: Vec<usize> = format
        .columns
        .iter()
        .enumerate()
        .map(|(idx, column)| {
            column.width.unwrap_or_else(|| rows.iter().map(|row| row[idx].chars().count()).max().unwrap_or(0))
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let line = match &format.delimiter {
            Some(delimiter) => row.join(delimiter),
            None => {
                let cells: Vec<String> = row
                    .iter()
                    .zip(&format.columns)
                    .zip(&widths)
                    .map(
                        |((text, column), width)| {
                            if column.right { format!("{text:>width$}") } else { format!("{text:<width$}") }
                        },
                    )
                    .collect();
                cells.join(" ").trim_end().to_owned()
            }
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `text` as a JSON string, quotes included.
pub fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The `-o ... -json` layout, LSF's: an object naming the command, the number
/// of records and one record per job, keyed by the fields' headers, every value a
/// string (`""` for none; widths do not apply), then one `ERROR` record per
/// message of `errors` (a named job that is not found).
pub fn custom_json(
    jobs: &[JobInfo],
    errors: &[String],
    format: &CustomFormat,
    style: &Style,
    tz: &TimeZone,
) -> String {
    // One record is its (key, value) pairs, in order.
    let job_records = jobs.iter().map(|job| {
        format
            .columns
            .iter()
            .map(|column| (column.field.header(), cell_value(column, job, style, tz)))
            .collect()
    });
    let error_records = errors.iter().map(|message| vec![("ERROR".to_owned(), message.clone())]);
    let records: Vec<Vec<(String, String)>> = job_records.chain(error_records).collect();
    let mut out = format!("{{\n  \"COMMAND\":\"bjobs\",\n  \"JOBS\":{},\n  \"RECORDS\":[\n", records.len());
    for (record_idx, record) in records.iter().enumerate() {
        out.push_str("    {\n");
        for (field_idx, (key, value)) in record.iter().enumerate() {
            let end = if field_idx + 1 < record.len() { "," } else { "" };
            out.push_str(&format!("      \"{key}\":{}{end}\n", json_string(value)));
        }
        out.push_str(if record_idx + 1 < records.len() { "    },\n" } else { "    }\n" });
    }
    out.push_str("  ]\n}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lava_batch_wire::{ResourceUsage, WireJobRef};

    // Times in these tests: 2024-11-25 22:44:01 UTC is 1_732_574_641.
    const SUBMIT: i64 = 1_732_574_641;

    fn utc() -> TimeZone {
        TimeZone::UTC
    }

    fn job(id: u32, status: JobStatus) -> JobInfo {
        JobInfo {
            job: WireJobRef { job_id: id, array_index: 0 },
            user_name: "cloudsd".to_owned(),
            status: status.bits(),
            queue: "normal".to_owned(),
            from_host: "vm".to_owned(),
            exec_hosts: if status.is_pending() { vec![] } else { vec!["vm".to_owned()] },
            job_name: "sleep 30".to_owned(),
            command: "sleep 30".to_owned(),
            project: "default".to_owned(),
            cwd: "work".to_owned(),
            exec_cwd: if status.is_pending() { String::new() } else { "/home/cloudsd/work".to_owned() },
            n_slots: 1,
            submit_time: SUBMIT,
            start_time: if status.is_pending() { 0 } else { SUBMIT + 1 },
            end_time: if status.is_finished() { SUBMIT + 31 } else { 0 },
            pid: if status.is_pending() { 0 } else { 4242 },
            reason: if status.is_pending() {
                "New job is waiting for scheduling".to_owned()
            } else {
                String::new()
            },
            ..JobInfo::default()
        }
    }

    fn check(got: String, expected: &str) {
        assert_eq!(got, expected, "\n--- got ---\n{got}--- expected ---\n{expected}");
    }

    // Goal: the default layout is LSF's byte for byte: widths, cut columns,
    // the starred job name, an empty EXEC_HOST for pending jobs, extra hosts on
    // continuation lines at column 45.
    #[test]
    fn default_layout_is_lsfs() {
        let mut long_name = job(1234567, JobStatus::Run);
        long_name.user_name = "delhommet".to_owned();
        long_name.job_name = "snakejob.pfam_parallel.162.sh".to_owned();
        long_name.queue = "verylongqueuename".to_owned();
        long_name.exec_hosts = vec!["it-c01b11".to_owned(), "it-c01b11".to_owned(), "it-c05b10".to_owned()];
        let jobs = vec![job(1, JobStatus::Run), job(3, JobStatus::Psusp), long_name];
        let continuation = |host: &str| format!("{:45}{host}\n", "");
        check(
            table(&jobs, Layout::Default, &Style::default(), &utc()),
            &("JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME\n\
               1       cloudsd RUN   normal     vm          vm          sleep 30   Nov 25 22:44\n\
               3       cloudsd PSUSP normal     vm                      sleep 30   Nov 25 22:44\n\
               1234567 delhomm RUN   verylongqu vm          it-c01b11   *el.162.sh Nov 25 22:44\n"
                .to_owned()
                + &continuation("it-c01b11")
                + &continuation("it-c05b10")),
        );
    }

    // Goal: -noheader drops the header only; LSB_SHORT_HOSTLIST compresses hosts.
    #[test]
    fn noheader_and_short_host_list() {
        let mut parallel = job(7, JobStatus::Run);
        parallel.exec_hosts = ["a", "a", "b", "a"].iter().map(|h| h.to_string()).collect();
        let style = Style { header: false, short_hostlist: true, ..Style::default() };
        check(
            table(&[parallel], Layout::Default, &style, &utc()),
            &format!(
                "7       cloudsd RUN   normal     vm          3*a         sleep 30   Nov 25 22:44\n{:45}1*b\n",
                ""
            ),
        );
    }

    // Goal: -w never cuts, joins hosts with `:` and marks pending jobs with `-`.
    #[test]
    fn wide_layout_never_cuts() {
        let mut running = job(5183028, JobStatus::Run);
        running.user_name = "pluskal_long".to_owned();
        running.exec_hosts = vec!["it-c01b11".to_owned(), "it-c01b11".to_owned()];
        running.job_name = "/lab/x/snakejob.pfam_parallel.162.sh".to_owned();
        let pending = job(8, JobStatus::Pend);
        check(
            table(&[running, pending], Layout::Wide, &Style::default(), &utc()),
            "JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME\n\
             5183028 pluskal_long RUN   normal     vm          it-c01b11:it-c01b11 \
             /lab/x/snakejob.pfam_parallel.162.sh Nov 25 22:44\n\
             8       cloudsd PEND  normal     vm             -        sleep 30   Nov 25 22:44\n",
        );
    }

    // Goal: -p alone has LSF's pending header and a reason line per job.
    #[test]
    fn pending_layout_with_reasons() {
        let mut named = job(2, JobStatus::Pend);
        named.job_name = "a_rather_long_pending_job_name".to_owned();
        let style = Style { pending_reasons: true, ..Style::default() };
        check(
            table(&[job(1, JobStatus::Pend), named], Layout::Pending, &style, &utc()),
            "JOBID   USER    STAT  QUEUE       FROM_HOST      JOB_NAME           SUBMIT_TIME\n\
             1       cloudsd PEND  normal      vm             sleep 30           Nov 25 22:44\n\
             \x20New job is waiting for scheduling;\n\
             2       cloudsd PEND  normal      vm             *_pending_job_name Nov 25 22:44\n\
             \x20New job is waiting for scheduling;\n",
        );
    }

    // Goal: -l prints LSF's block: header line, submission line, start line,
    // the finish line with CPU time; dashes between jobs; lines wrapped at 79
    // characters with 21 blanks of indent.
    #[test]
    fn long_layout_of_finished_and_pending_jobs() {
        let mut done = job(1, JobStatus::Done);
        done.rusage = ResourceUsage { user_time_ms: 60, system_time_ms: 40, max_rss_kb: 0 };
        done.output_file = "out.%J".to_owned();
        let pending = job(2, JobStatus::Pend);
        check(
            long(&[done, pending], &Style::default(), &utc()),
            "\n\
             Job <1>, User <cloudsd>, Project <default>, Status <DONE>, Queue <normal>, Comm\n\
             \x20                    and <sleep 30>\n\
             Mon Nov 25 22:44:01: Submitted from host <vm>, CWD <$HOME/work>, Output File <o\n\
             \x20                    ut.%J>;\n\
             Mon Nov 25 22:44:02: Started on <vm>, Execution CWD </home/cloudsd/work>;\n\
             Mon Nov 25 22:44:32: Done successfully. The CPU time used is 0.1 seconds.\n\
             ------------------------------------------------------------------------------\n\
             \n\
             Job <2>, User <cloudsd>, Project <default>, Status <PEND>, Queue <normal>, Comm\n\
             \x20                    and <sleep 30>\n\
             Mon Nov 25 22:44:01: Submitted from host <vm>, CWD <$HOME/work>;\n\
             \n\
             \x20PENDING REASONS:\n\
             \x20New job is waiting for scheduling;\n\
             \n",
        );
    }

    // Goal: an exited, named, parallel job: Job Name, processors, hosts, exit code.
    #[test]
    fn long_layout_of_an_exited_parallel_job() {
        let mut exited = job(3, JobStatus::Exit);
        exited.job_name = "myjob".to_owned();
        exited.command = "exit 3".to_owned();
        exited.cwd = "/scratch".to_owned();
        exited.n_slots = 2;
        exited.exec_hosts = vec!["h1".to_owned(), "h2".to_owned()];
        exited.exit_code = 3;
        check(
            long(&[exited], &Style::default(), &utc()),
            "\n\
             Job <3>, Job Name <myjob>, User <cloudsd>, Project <default>, Status <EXIT>, Qu\n\
             \x20                    eue <normal>, Command <exit 3>\n\
             Mon Nov 25 22:44:01: Submitted from host <vm>, CWD </scratch>, 2 Processors Req\n\
             \x20                    uested;\n\
             Mon Nov 25 22:44:02: Started on 2 Hosts/Processors <h1> <h2>, Execution CWD </h\n\
             \x20                    ome/cloudsd/work>;\n\
             Mon Nov 25 22:44:32: Exited with exit code 3. The CPU time used is unknown.\n\
             \n",
        );
    }

    // Goal: the wrap rule drops one leading blank of a continuation and never
    // prints past column 79, whatever the text.
    #[test]
    fn wrapping_rule() {
        let mut wrap = Wrap::default();
        wrap.put("\n");
        wrap.put(&"x".repeat(79));
        wrap.put(" y");
        assert_eq!(wrap.out, format!("\n{}\n{}y", "x".repeat(79), " ".repeat(WRAP_INDENT)));
        let mut wrap = Wrap::default();
        wrap.put(&format!("\n{}", "z".repeat(300)));
        assert!(wrap.out.lines().all(|line| line.chars().count() <= 79));
    }

    // Goal: -o prints the asked fields; widths, alignment, delimiter and
    // -noheader work; unknown fields are refused.
    #[test]
    fn custom_format() {
        let mut exited = job(12, JobStatus::Exit);
        exited.exit_code = 2;
        let jobs = vec![job(11, JobStatus::Run), exited];
        let spec = parse_custom("jobid stat exit_code").expect("valid");
        check(
            custom(&jobs, &spec, &Style::default(), &utc()),
            "JOBID STAT EXIT_CODE\n11    RUN  -\n12    EXIT 2\n",
        );
        let spec = parse_custom("stat").expect("valid");
        check(custom(&jobs, &spec, &Style { header: false, ..Style::default() }, &utc()), "RUN\nEXIT\n");
        let spec = parse_custom("jobid:-6 name:4 delimiter=','").expect("valid");
        check(custom(&jobs, &spec, &Style::default(), &utc()), "JOBID,JOB_\n11,* 30\n12,* 30\n");
        let spec = parse_custom("jobid:-6 name:4").expect("valid");
        check(custom(&jobs, &spec, &Style::default(), &utc()), " JOBID JOB_\n    11 * 30\n    12 * 30\n");
        let spec = parse_custom("id: user: submit_time").expect("valid");
        assert_eq!(spec.columns[0].width, Some(7));
        assert!(custom(&jobs, &spec, &Style::default(), &utc()).contains("Nov 25 22:44"));
        assert!(parse_custom("jobid bogus").is_err());
        assert!(parse_custom("jobid:x").is_err());
        assert!(parse_custom("").is_err());
    }

    // Goal: -W adds LSF's usage columns after the wide ones, times as
    // mm/dd-hh:mm:ss, `-` for what a pending job does not have yet.
    #[test]
    fn wide_fields_layout() {
        let mut done = job(1, JobStatus::Done);
        done.rusage = ResourceUsage { user_time_ms: 3_723_000, system_time_ms: 570, max_rss_kb: 6395 };
        let pending = job(2, JobStatus::Pend);
        check(
            table(&[done, pending], Layout::WideFields, &Style::default(), &utc()),
            "JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME  \
             PROJ_NAME CPU_USED MEM SWAP PIDS START_TIME FINISH_TIME\n\
             1       cloudsd DONE  normal     vm          vm          sleep 30   11/25-22:44:01 \
             default    001:02:03.57 6395   -      4242 11/25-22:44:02 11/25-22:44:32\n\
             2       cloudsd PEND  normal     vm             -        sleep 30   11/25-22:44:01 \
             default    -            -      -      - - -\n",
        );
    }

    // Goal: the LSF fields workflow tools ask for, with `-` for empty values,
    // the ` L` of an actual finish time, exit code and reason only for EXIT,
    // the pending reason only for pending jobs, array elements as `name[idx]`
    // with their index, and memory in LSF's units or the one asked for.
    #[test]
    fn custom_format_fields() {
        let mut killed = job(12, JobStatus::Exit);
        killed.exit_code = 130;
        killed.finish_reason = wire::FINISH_KILLED;
        killed.rusage.max_rss_kb = 3 * 1024;
        killed.dependency = "done(11)".to_owned();
        let mut element = job(13, JobStatus::Pend);
        element.job.array_index = 4;
        element.job_name = "arr[1-10]".to_owned();
        element.mem_limit_kb = 2 * 1024 * 1024;
        element.run_limit_s = 90;
        let jobs = vec![job(11, JobStatus::Done), killed, element];
        let spec = parse_custom(
            "jobid jobindex job_name stat exit_code exit_reason pend_reason finish_time dependency max_mem:-8:MB memlimit runtimelimit",
        )
        .expect("valid");
        check(
            custom(&jobs, &spec, &Style::default(), &utc()),
            "JOBID JOBINDEX JOB_NAME STAT EXIT_CODE EXIT_REASON                     PEND_REASON                       \
             FINISH_TIME    DEPENDENCY  MAX_MEM MEMLIMIT RUNTIMELIMIT\n\
             11    0        sleep 30 DONE -         -                               -                                 \
             Nov 25 22:44 L -                 - -        -\n\
             12    0        sleep 30 EXIT 130       TERM_OWNER: job killed by owner -                                 \
             Nov 25 22:44 L done(11)       3 MB -        -\n\
             13    4        arr[4]   PEND -         -                               New job is waiting for scheduling \
             -              -                 - 2 Gbytes 1.5\n",
        );
        let style = Style { now_s: SUBMIT + 100, ..Style::default() };
        let spec = parse_custom("jobid run_time pend_time delimiter=','").expect("valid");
        check(
            custom(
                &[job(1, JobStatus::Run), job(2, JobStatus::Pend), job(3, JobStatus::Done)],
                &spec,
                &style,
                &utc(),
            ),
            "JOBID,RUN_TIME,PEND_TIME\n1,99 second(s),1\n2,0 second(s),100\n3,30 second(s),1\n",
        );
        assert_eq!(parse_custom("all").expect("valid").columns.len(), FIELDS.len());
        let all = parse_custom("all:8").expect("valid");
        assert!(all.columns.iter().all(|column| column.width == Some(8)));
        assert!(parse_custom("stat::GB").is_err(), "a unit on a field that is not memory");
        assert!(parse_custom("mem::XB").is_err(), "an unknown unit");
        assert_eq!(memory(512, None), "512 Kbytes");
        assert_eq!(memory(1536 * 1024, None), "1.5 Gbytes");
        assert_eq!(memory(1536, Some(MemUnit::Mb)), "1.5 MB");
        assert_eq!(memory(0, Some(MemUnit::Gb)), "");
    }

    // Goal: -o ... -json is LSF's object: COMMAND, JOBS, RECORDS keyed by
    // the headers, every value a string, "" where the columns print `-`,
    // widths ignored, text escaped.
    #[test]
    fn custom_json_layout() {
        let mut exited = job(12, JobStatus::Exit);
        exited.exit_code = 2;
        exited.command = "echo \"a\\b\"".to_owned();
        let spec = parse_custom("jobid stat:2 exit_code cmd").expect("valid");
        check(
            custom_json(&[job(11, JobStatus::Run), exited], &[], &spec, &Style::default(), &utc()),
            "{\n\
             \x20 \"COMMAND\":\"bjobs\",\n\
             \x20 \"JOBS\":2,\n\
             \x20 \"RECORDS\":[\n\
             \x20   {\n\
             \x20     \"JOBID\":\"11\",\n\
             \x20     \"STAT\":\"RUN\",\n\
             \x20     \"EXIT_CODE\":\"\",\n\
             \x20     \"COMMAND\":\"sleep 30\"\n\
             \x20   },\n\
             \x20   {\n\
             \x20     \"JOBID\":\"12\",\n\
             \x20     \"STAT\":\"EXIT\",\n\
             \x20     \"EXIT_CODE\":\"2\",\n\
             \x20     \"COMMAND\":\"echo \\\"a\\\\b\\\"\"\n\
             \x20   }\n\
             \x20 ]\n\
             }\n",
        );
        check(
            custom_json(&[], &[], &spec, &Style::default(), &utc()),
            "{\n  \"COMMAND\":\"bjobs\",\n  \"JOBS\":0,\n  \"RECORDS\":[\n  ]\n}\n",
        );
    }

    // Goal: a named job that is not found is LSF's error record in -json: after the
    // jobs, with the message under ERROR alone, counted in JOBS (also when no job is found).
    #[test]
    fn custom_json_error_records() {
        let spec = parse_custom("jobid stat").expect("valid");
        let errors = ["Job <99> is not found".to_owned(), "Job <7[3]> is not found".to_owned()];
        check(
            custom_json(&[job(11, JobStatus::Run)], &errors, &spec, &Style::default(), &utc()),
            "{\n\
             \x20 \"COMMAND\":\"bjobs\",\n\
             \x20 \"JOBS\":3,\n\
             \x20 \"RECORDS\":[\n\
             \x20   {\n\
             \x20     \"JOBID\":\"11\",\n\
             \x20     \"STAT\":\"RUN\"\n\
             \x20   },\n\
             \x20   {\n\
             \x20     \"ERROR\":\"Job <99> is not found\"\n\
             \x20   },\n\
             \x20   {\n\
             \x20     \"ERROR\":\"Job <7[3]> is not found\"\n\
             \x20   }\n\
             \x20 ]\n\
             }\n",
        );
        check(
            custom_json(&[], &errors[..1], &spec, &Style::default(), &utc()),
            "{\n  \"COMMAND\":\"bjobs\",\n  \"JOBS\":1,\n  \"RECORDS\":[\n    {\n      \"ERROR\":\"Job <99> is not found\"\n    }\n  ]\n}\n",
        );
    }

    // Goal: -l shows the dependency, the resource requirement, the limits
    // block and LSF's `Completed <exit>; TERM_...` line of a job LavaCore ended.
    #[test]
    fn long_layout_of_a_limited_job_killed_at_its_run_limit() {
        let mut limited = job(5, JobStatus::Exit);
        limited.command = "sleep 600".to_owned();
        limited.job_name = "sleep 600".to_owned();
        limited.dependency = "done(4)".to_owned();
        limited.res_req = "rusage[mem=100]".to_owned();
        limited.run_limit_s = 60;
        limited.mem_limit_kb = 512;
        limited.exit_code = 143;
        limited.finish_reason = wire::FINISH_RUN_LIMIT;
        check(
            long(&[limited], &Style::default(), &utc()),
            "\n\
             Job <5>, User <cloudsd>, Project <default>, Status <EXIT>, Queue <normal>, Depe\n\
             \x20                    ndency Condition <done(4)>, Command <sleep 600>\n\
             Mon Nov 25 22:44:01: Submitted from host <vm>, CWD <$HOME/work>, Requested Reso\n\
             \x20                    urces <rusage[mem=100]>;\n\
             \n\
             \x20RUNLIMIT\n\
             \x201.0 min\n\
             \n\
             \x20MEMLIMIT\n\
             \x20 512 K\n\
             \n\
             Mon Nov 25 22:44:02: Started on <vm>, Execution CWD </home/cloudsd/work>;\n\
             Mon Nov 25 22:44:32: Exited with exit code 143. The CPU time used is unknown.\n\
             Mon Nov 25 22:44:32: Completed <exit>; TERM_RUNLIMIT: job killed after reaching\n\
             \x20                    LSF run time limit.\n\
             \n",
        );
    }

    // Goal: the per-minute cache of SUBMIT_TIME gives what short_time gives,
    // across minute boundaries, backwards, and in a zone whose offset is not
    // whole hours.
    #[test]
    fn minute_cache_matches_short_time() {
        let tz = TimeZone::fixed(jiff::tz::offset(5));
        let india = TimeZone::get("Asia/Kolkata").unwrap_or_else(|_| tz.clone());
        for zone in [utc(), tz, india] {
            let mut times = MinuteTimes::new(&zone);
            for seconds in
                [SUBMIT, SUBMIT + 18, SUBMIT + 19, SUBMIT + 80, SUBMIT - 1, SUBMIT, 0, SUBMIT + 86_400]
            {
                assert_eq!(times.get(seconds), short_time(seconds, &zone), "{seconds} in {zone:?}");
            }
        }
    }

    // Goal: array elements list as LSF lists them: JOBID the array's id, the
    // name `name[index]` (cut from its start behind `*` when long), `-l`
    // naming `Job <id[index]>`.
    #[test]
    fn array_elements_in_the_listings() {
        let element = |index: u32, status: JobStatus| {
            let mut element = job(40, status);
            element.job.array_index = index;
            element.job_name = "sweep[1-100]".to_owned();
            element
        };
        check(
            table(
                &[element(1, JobStatus::Run), element(100, JobStatus::Pend)],
                Layout::Default,
                &Style::default(),
                &utc(),
            ),
            "JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME\n\
             40      cloudsd RUN   normal     vm          vm          sweep[1]   Nov 25 22:44\n\
             40      cloudsd PEND  normal     vm                      sweep[100] Nov 25 22:44\n",
        );
        let mut long_name = element(7, JobStatus::Pend);
        long_name.job_name = "parameter_sweep[1-100]".to_owned();
        assert!(table(&[long_name], Layout::Default, &Style::default(), &utc()).contains(" *_sweep[7] "));
        assert!(
            long(&[element(3, JobStatus::Run)], &Style::default(), &utc())
                .starts_with("\nJob <40[3]>, Job Name <sweep[3]>,")
        );
    }

    // Goal: the small helpers behave as LSF's.
    #[test]
    fn helpers() {
        assert_eq!(truncate_star("/lab/solexa/snake.el.208.sh", 10), "*el.208.sh");
        assert_eq!(truncate_star("short", 10), "short");
        assert_eq!(status_name(0x4), "RUN");
        assert_eq!(status_name(0x3), "ERROR");
        assert_eq!(event_time(SUBMIT - 20 * 86_400, &utc()), "Tue Nov  5 22:44:01");
        assert_eq!(short_time(SUBMIT - 20 * 86_400, &utc()), "Nov  5 22:44");
        let mut element = job(4, JobStatus::Run);
        element.job.array_index = 2;
        element.job_name = "arr[1-5]".to_owned();
        assert_eq!(display_name(&element), "arr[2]");
        assert_eq!(one_line("#BSUB -J x\n\necho hi\r\n"), "#BSUB -J x;echo hi");
        assert_eq!(one_line("sleep 30"), "sleep 30");
    }
}
