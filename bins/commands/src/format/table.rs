//! The one-line-per-job layouts of `bjobs`:
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
//! - **`-W`**: the `-w` columns, then PROJ_NAME CPU_USED MEM SWAP PIDS
//!   START_TIME FINISH_TIME, times as `%m/%d-%H:%M:%S`, CPU_USED as
//!   `hhh:mm:ss.cc`, MEM in KB; `-` for what is not known (mbatchd learns the
//!   usage when the job ends; swap is not measured).

use std::borrow::Cow;
use std::fmt::Write as _;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use lava_batch_ll::JobStatus;
use lava_batch_wire::JobInfo;

use super::{
    Style, cpu_ms, cpu_time_hms, display_name, host_list, is_pending, reason_line, status, status_name,
    truncate_star, wide_time,
};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::fixture::{SUBMIT, check, job, utc};
    use crate::format::short_time;
    use lava_batch_wire::ResourceUsage;

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
}
