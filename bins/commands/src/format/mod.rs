//! What `bjobs` prints, as pure functions of the jobs, a few switches and a
//! time zone (tests pass a fixed one; the command passes the system's). The
//! layouts are Lava's `bjobs.c` and `cmd.job.c` (identical to classic LSF's),
//! one module each:
//! - [`table`](mod@table): the one-line-per-job layouts, default, `-w`, `-W` and `-p`.
//! - [`long`](mod@long): the `-l` block and LSF's line-wrapping rule, which `bhist -l`
//!   and `bacct -l` share.
//! - [`custom`](mod@custom): `-o` and `-o ... -json` over the fields of [`crate::fields`].
//!
//! This module holds what every layout words the same way: the STAT word, job
//! names and host lists, times, memory amounts, CPU time and exit reasons.
//! Its items and the layouts' are all reachable as `format::NAME`.
//!
//! Times: SUBMIT_TIME and the times of `-o` are `%b %e %H:%M` (`Nov  5
//! 22:44`, the day padded with a blank as LSF prints it) in local time; an
//! actual FINISH_TIME of `-o` ends in ` L`, LSF's mark. The dated lines of `-l`
//! are `%a %b %e %H:%M:%S` (ctime's first 19 characters, as Lava prints the
//! submission line).

use std::borrow::Cow;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use lava_batch_ll::JobStatus;
use lava_batch_wire::{JobInfo, ResourceLimits};

pub mod custom;
#[cfg(test)]
mod fixture;
pub mod long;
pub mod table;

pub(crate) use custom::custom_time;
pub use custom::{
    CellContext, Column, CustomFormat, WIDTH_MAX, custom, custom_json, json_string, parse_custom,
};
pub use long::{LONG_SEPARATOR, WRAP_INDENT, WRAP_WIDTH, long};
pub(crate) use long::{Wrap, cwd_shown};
pub use table::{EXEC_HOST_COLUMN, HEADER, HEADER_PENDING, HEADER_WIDE_FIELDS, Layout, table};

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

/// The limit blocks of `bjobs -l` and `bqueues -l`, each after a blank line: `CPULIMIT` and
/// `RUNLIMIT`, each a header line over its value in minutes, then one row of the size and
/// count limits that are set, headers over values, in LSF's order (`FILELIMIT DATALIMIT
/// STACKLIMIT CORELIMIT MEMLIMIT SWAPLIMIT PROCESSLIMIT THREADLIMIT`). Empty when no limit
/// is set.
pub fn limit_blocks(run_limit_s: u64, mem_limit_kb: u64, limits: &ResourceLimits) -> String {
    let minutes = |s: u64| format!("{:.1} min", s as f64 / 60.0);
    let mut out = String::new();
    let times = [("CPULIMIT", limits.cpu_s), ("RUNLIMIT", Some(run_limit_s).filter(|s| *s > 0))];
    for (name, seconds) in times {
        if let Some(seconds) = seconds {
            out.push_str(&format!("\n {name}\n {}\n", minutes(seconds)));
        }
    }
    let size = |kb: Option<u64>| kb.map(limit_memory);
    let count = |n: Option<u32>| n.map(|n| n.to_string());
    let row: Vec<(&str, String)> = [
        ("FILELIMIT", size(limits.file_kb)),
        ("DATALIMIT", size(limits.data_kb)),
        ("STACKLIMIT", size(limits.stack_kb)),
        ("CORELIMIT", size(limits.core_kb)),
        ("MEMLIMIT", size(Some(mem_limit_kb).filter(|kb| *kb > 0))),
        ("SWAPLIMIT", size(limits.swap_kb)),
        ("PROCESSLIMIT", count(limits.processes)),
        ("THREADLIMIT", count(limits.threads)),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.map(|value| (name, value)))
    .collect();
    if !row.is_empty() {
        let cells = |cell: &dyn Fn(&str, &str) -> String| {
            row.iter().map(|(name, value)| cell(name, value)).collect::<Vec<_>>().join(" ")
        };
        let width = |name: &str, value: &str| name.len().max(format!("{value:>6}").len());
        let headers = cells(&|name, value| format!("{name:<w$}", w = width(name, value)));
        let values = cells(&|name, value| format!("{:<w$}", format!("{value:>6}"), w = width(name, value)));
        out.push_str(&format!("\n {}\n {}\n", headers.trim_end(), values.trim_end()));
    }
    out
}

/// A memory limit as `-l` and `bqueues -l` print it: `512 K`, `100 M`, `2 G`
/// (the largest unit that divides it exactly; 0 is `0 K`).
pub fn limit_memory(kb: u64) -> String {
    match kb {
        0 => "0 K".to_owned(),
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

    pub(crate) fn name(self) -> &'static str {
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
    lava_batch_ll::acct::TermReason::of_finish(job.finish_reason).map_or("", |reason| reason.text)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::fixture::{SUBMIT, check, job, utc};

    // Goal: the limit blocks are LSF's: CPULIMIT and RUNLIMIT each a header over minutes
    // (what tools such as DIRAC read: the line after the header, its first word in
    // minutes), the other limits one row in LSF's order, a value under its header, only
    // the limits set, and a core limit of 0 shown (it forbids core files).
    #[test]
    fn limit_blocks_in_lsf_order() {
        assert_eq!(limit_blocks(0, 0, &ResourceLimits::default()), "");
        assert_eq!(limit_blocks(0, 102_400, &ResourceLimits::default()), "\n MEMLIMIT\n  100 M\n");
        let limits = ResourceLimits {
            cpu_s: Some(5400),
            core_kb: Some(0),
            file_kb: Some(1 << 20),
            processes: Some(8),
            threads: Some(64),
            ..ResourceLimits::default()
        };
        assert_eq!(
            limit_blocks(600, 512, &limits),
            "\n CPULIMIT\n 90.0 min\n\
             \n RUNLIMIT\n 10.0 min\n\
             \n FILELIMIT CORELIMIT MEMLIMIT PROCESSLIMIT THREADLIMIT\n\
             \x20   1 G       0 K     512 K        8           64\n"
        );
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
