//! `bparams [-h] [-V] [-a] [-l]`: lsb.params' values in effect.
//!
//! - Default (LSF 10's four lines): `Default Queues:  normal`, `MBD_SLEEP_TIME
//!   used for calculations:  60 seconds`, `Job Checking Interval:  30 seconds`,
//!   `Job Accepting Interval:  60 seconds` (JOB_ACCEPT_INTERVAL turns of
//!   MBD_SLEEP_TIME).
//! - `-l`: OpenLava's long layout (`bparams.c`'s `printLong`), each parameter
//!   LavaCore has under its sentence, e.g. `The interval for dispatching jobs by
//!   master batch daemon:` then `    MBD_SLEEP_TIME = 60 (seconds)` and a blank
//!   line.
//! - `-a`: every parameter in effect as `badmin showconf` prints it:
//!   `lsb.params configuration at <date>` then `    KEY = value` lines.
//!
//! The values are read from lsb.params as mbatchd loads it (LSF's defaults for
//! what the file leaves out); mbatchd is not asked (see [`crate::showconf`]).

use std::process::ExitCode;

use jiff::tz::TimeZone;
use lava_conf::LsbParams;

use crate::format::long_date;
use crate::showconf::lsb_params_values;
use crate::term::{self, Term};

/// The usage text (standard error).
pub const USAGE: &str = "Usage: bparams [-h] [-V] [-a] [-l]\n";

/// The default listing.
pub fn short(params: &LsbParams, default_queues: &[String]) -> String {
    format!(
        "Default Queues:  {}\nMBD_SLEEP_TIME used for calculations:  {} seconds\n\
         Job Checking Interval:  {} seconds\nJob Accepting Interval:  {} seconds\n",
        default_queues.join(" "),
        params.mbd_sleep_time_s,
        params.sbd_sleep_time_s,
        u64::from(params.job_accept_interval) * u64::from(params.mbd_sleep_time_s),
    )
}

/// The `-l` listing.
pub fn long(params: &LsbParams, default_queues: &[String]) -> String {
    let mut out = String::new();
    out.push_str("System default queues for automatic queue selection:\n");
    out.push_str(&format!(" {:>16} = {}\n\n", "DEFAULT_QUEUE", default_queues.join(" ")));
    let blocks: [(&str, String); 9] = [
        (
            "The interval for dispatching jobs by master batch daemon:",
            format!("MBD_SLEEP_TIME = {} (seconds)", params.mbd_sleep_time_s),
        ),
        (
            "The interval for checking jobs by slave batch daemon:",
            format!("SBD_SLEEP_TIME = {} (seconds)", params.sbd_sleep_time_s),
        ),
        (
            "The interval for a host to accept two batch jobs:",
            format!("JOB_ACCEPT_INTERVAL = {} (* MBD_SLEEP_TIME)", params.job_accept_interval),
        ),
        (
            "The amount of time during which finished jobs are kept in core:",
            format!("CLEAN_PERIOD = {} (seconds)", params.clean_period_s),
        ),
        (
            "The maximum number of finished jobs that can be stored in current events file:",
            format!("MAX_JOB_NUM = {}", params.max_job_num),
        ),
        (
            "The default project assigned to jobs:",
            format!("{:>15} = {}", "DEFAULT_PROJECT", params.default_project),
        ),
        (
            "The interval to terminate a job:",
            format!("JOB_TERMINATE_INTERVAL = {} ", params.job_terminate_interval_s),
        ),
        (
            "The maximum number of jobs in a job array:",
            format!("MAX_JOB_ARRAY_SIZE = {}", params.max_job_array_size),
        ),
        ("The Maximum JobId defined in the system:", format!("MAX_JOBID = {}", params.max_jobid)),
    ];
    for (sentence, value) in blocks {
        out.push_str(&format!("{sentence}\n    {value}\n\n"));
    }
    if let Some(max) = params.max_pend_jobs {
        out.push_str(&format!(
            "The maximum number of pending jobs of a user:\n    MAX_PEND_JOBS = {max}\n\n"
        ));
    }
    out
}

/// The `-a` listing.
pub fn all(params: &LsbParams, default_queues: &[String], now_s: i64, tz: &TimeZone) -> String {
    let mut out = format!("lsb.params configuration at {}\n", long_date(now_s, tz));
    for (key, value) in lsb_params_values(params, default_queues) {
        if !value.trim().is_empty() {
            out.push_str(&format!("    {key} = {value}\n"));
        }
    }
    out
}

/// Runs `bparams` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("bparams", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let (mut long_format, mut all_format) = (false, false);
    for arg in &args {
        match arg.as_str() {
            "-h" => {
                term.err(USAGE);
                return true;
            }
            "-V" => {
                term.err(term::VERSION_LINE);
                return true;
            }
            "-l" => long_format = true,
            "-a" => all_format = true,
            "-al" | "-la" => (long_format, all_format) = (true, true),
            other => {
                let what = other.strip_prefix('-').map_or_else(
                    || format!("bparams: extra operand `{other}`"),
                    |letters| format!("bparams: illegal option -- {letters}"),
                );
                term.err(&format!("{what}\n{USAGE}"));
                return false;
            }
        }
    }
    let config = match lava_conf::ClusterConfig::load(&lava_conf::envdir_from_env()) {
        Ok(config) => config,
        Err(error) => {
            term.err(&format!("bparams: {error}\n"));
            return false;
        }
    };
    let text = if all_format {
        all(&config.params, &config.default_queues, jiff::Timestamp::now().as_second(), &TimeZone::system())
    } else if long_format {
        long(&config.params, &config.default_queues)
    } else {
        short(&config.params, &config.default_queues)
    };
    term.out(&text);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: LSF 10's four lines by default; OpenLava's sentences with `-l`;
    // `KEY = value` lines with `-a`; LSF's defaults where lsb.params is silent.
    #[test]
    fn layouts() {
        let params = LsbParams { mbd_sleep_time_s: 10, job_accept_interval: 2, ..LsbParams::default() };
        let queues = ["normal".to_owned(), "short".to_owned()];
        assert_eq!(
            short(&params, &queues),
            "Default Queues:  normal short\nMBD_SLEEP_TIME used for calculations:  10 seconds\n\
             Job Checking Interval:  30 seconds\nJob Accepting Interval:  20 seconds\n"
        );
        let long_text = long(&params, &queues);
        assert!(long_text.starts_with(
            "System default queues for automatic queue selection:\n    DEFAULT_QUEUE = normal short\n\n\
             The interval for dispatching jobs by master batch daemon:\n    MBD_SLEEP_TIME = 10 (seconds)\n\n"
        ));
        assert!(long_text.contains("The Maximum JobId defined in the system:\n    MAX_JOBID = 999999\n\n"));
        assert!(long_text.contains("    DEFAULT_PROJECT = default\n"));
        let all_text = all(&params, &queues, 0, &TimeZone::UTC);
        assert!(all_text.starts_with("lsb.params configuration at Thu Jan  1 00:00:00 1970\n"));
        assert!(all_text.contains("\n    CLEAN_PERIOD = 3600\n"), "{all_text}");
        assert!(all_text.contains("\n    DEFAULT_QUEUE = normal short\n"), "{all_text}");
    }
}
