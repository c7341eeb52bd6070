//! The `-l` layout of `bjobs`, and LSF's line-wrapping rule it prints through
//! (`bhist -l` and `bacct -l` print through it too).
//!
//! Text is streamed through LSF's `prtLine` rule (`Wrap`): when the cursor
//! reaches column 80 the line breaks and continues after 21 blanks (one
//! leading blank of the continuation is dropped), so every line is at most 79
//! characters. Jobs are separated by a line of 78 dashes; the output starts
//! and ends with a blank line. The header names the `Dependency Condition`,
//! the submission line the `Requested Resources`; RUNLIMIT and MEMLIMIT blocks
//! follow the submission line; a job LavaCore ended gets LSF's
//! `Completed <exit>; TERM_...` line.

use jiff::tz::TimeZone;
use lava_batch_ll::JobStatus;
use lava_batch_wire::JobInfo;

use super::{
    Style, display_name, event_time, exit_reason, host_list, limit_blocks, one_line, reason_line, status,
    status_name,
};
use crate::jobid;

/// The column at which `-l` breaks a line (LSF's WIDTH).
pub const WRAP_WIDTH: usize = 80;
/// The blanks starting a continuation line of `-l`.
pub const WRAP_INDENT: usize = 21;
/// The line between two jobs of `-l`.
pub const LONG_SEPARATOR: &str =
    "------------------------------------------------------------------------------\n";

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

/// The limit blocks of `-l` ([`limit_blocks`]), then a blank line; nothing when the job
/// has no limit.
fn limits(wrap: &mut Wrap, job: &JobInfo) {
    let blocks = limit_blocks(job.run_limit_s, job.mem_limit_kb, &job.limits);
    if !blocks.is_empty() {
        wrap.put(&blocks);
        wrap.put("\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::fixture::{check, job, utc};
    use lava_batch_wire::{self as wire, ResourceUsage};

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
}
