//! `lsb.params` as typed values, [`LsbParams`]: the batch system's cluster-wide parameters, from
//! its one `Parameters` section.
//!
//! | key | field | default (LSF's) |
//! |---|---|---|
//! | `DEFAULT_QUEUE` | [`LsbParams::default_queue`]: queues a job without `-q` goes to, tried in order | none |
//! | `MBD_SLEEP_TIME` | [`LsbParams::mbd_sleep_time_s`]: the dispatch interval, at least 1 | 60 |
//! | `SBD_SLEEP_TIME` | [`LsbParams::sbd_sleep_time_s`]: sbatchd's job-check interval, at least 1 | 30 |
//! | `JOB_TERMINATE_INTERVAL` | [`LsbParams::job_terminate_interval_s`]: between SIGINT, SIGTERM and SIGKILL of `bkill` | 10 |
//! | `CLEAN_PERIOD` | [`LsbParams::clean_period_s`]: how long a finished job stays in memory | 3600 |
//! | `MAX_JOB_NUM` | [`LsbParams::max_job_num`]: job finishes the event log holds before mbatchd switches it (writes a snapshot and prunes what it covers), at least 1 | 1000 |
//! | `MAX_JOBID` | [`LsbParams::max_jobid`]: job ids wrap after it; 999999 to 2147483646 | 999999 |
//! | `JOB_ACCEPT_INTERVAL` | [`LsbParams::job_accept_interval`]: dispatch turns (of `MBD_SLEEP_TIME`) a host waits after taking a job; 0 = no wait | 1 |
//! | `DEFAULT_PROJECT` | [`LsbParams::default_project`] | `default` |
//! | `MAX_JOB_ARRAY_SIZE` | [`LsbParams::max_job_array_size`]: 1 to `MAX_JOBID` | 1000 |
//! | `MAX_PEND_JOBS` | [`LsbParams::max_pend_jobs`]: pending (PEND, PSUSP) jobs no user may exceed; a user's own `MAX_PEND_JOBS` of `lsb.users` may only lower it | unlimited |
//! | `LAVA_MAX_JOB_BYTES` (LavaCore's) | [`LsbParams::max_job_bytes`]: the largest submission (command or script, environment, every other text), bytes | 1048576 |
//! | `ACCT_ARCHIVE_SIZE` | [`LsbParams::acct_archive_size_kb`]: `lsb.acct` is switched to `lsb.acct.1` once larger, KB | no limit |
//! | `ACCT_ARCHIVE_AGE` | [`LsbParams::acct_archive_age_days`]: `lsb.acct` is switched once older, days | no limit |
//! | `MAX_ACCT_ARCHIVE_FILE` | [`LsbParams::max_acct_archive_file`]: switched files kept (`lsb.acct.1` newest), older ones deleted | all kept |
//! | `LOCAL_MAX_PREEXEC_RETRY` | [`LsbParams::local_max_preexec_retry`]: how many times a job's pre-execution commands may fail before `LOCAL_MAX_PREEXEC_RETRY_ACTION` applies, 1 to 2147483646 | unlimited |
//! | `LOCAL_MAX_PREEXEC_RETRY_ACTION` | [`LsbParams::preexec_retry_action`]: `SUSPEND` (the job is held, PSUSP) or `EXIT` | `SUSPEND` |
//! | `LAVA_MAX_PEND_BYTES` (LavaCore's) | [`LsbParams::max_pend_bytes`]: what one user's pending jobs may hold together (their submissions' bytes, an array's shared once), bytes | 2147483648 |
//!
//! Unknown keys are errors naming file and line; LSF keys LavaCore does not implement
//! ([`UNIMPLEMENTED_PARAMS_KEYS`]) are accepted and returned in [`LsbParams::unimplemented`].
//! The file itself is optional: without it every default applies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::ConfError;
use crate::fields::{Field, GROUP_NAME_BYTES_MAX, check_sections, key_values, sections_named};
use crate::lex::read_text;
use crate::queues::PreExecRetryAction;
use crate::section::{Entry, SectionFile};

/// The keys of `Parameters` that LavaCore reads.
pub const PARAMS_KEYS: [&str; 18] = [
    "DEFAULT_QUEUE",
    "MBD_SLEEP_TIME",
    "SBD_SLEEP_TIME",
    "JOB_TERMINATE_INTERVAL",
    "CLEAN_PERIOD",
    "MAX_JOB_NUM",
    "MAX_JOBID",
    "JOB_ACCEPT_INTERVAL",
    "DEFAULT_PROJECT",
    "MAX_JOB_ARRAY_SIZE",
    "MAX_PEND_JOBS",
    "LAVA_MAX_JOB_BYTES",
    "LAVA_MAX_PEND_BYTES",
    "ACCT_ARCHIVE_SIZE",
    "ACCT_ARCHIVE_AGE",
    "MAX_ACCT_ARCHIVE_FILE",
    "LOCAL_MAX_PREEXEC_RETRY",
    "LOCAL_MAX_PREEXEC_RETRY_ACTION",
];

/// LSF `Parameters` keys that are accepted but have no effect in LavaCore.
pub const UNIMPLEMENTED_PARAMS_KEYS: [&str; 13] = [
    "DEFAULT_HOST_SPEC",
    "MAX_SBD_FAIL",
    "MAX_SCHED_STAY",
    "MAX_USER_PRIORITY",
    "JOB_PRIORITY_OVER_TIME",
    "HIST_HOURS",
    "PG_SUSP_IT",
    "DISABLE_UACCT_MAP",
    "JOB_DEP_LAST_SUB",
    "SHARED_RESOURCE_UPDATE_FACTOR",
    "MAX_JOBINFO_QUERY_PERIOD",
    "MAX_PREEXEC_RETRY",
    "REMOTE_MAX_PREEXEC_RETRY",
];

/// The largest `LOCAL_MAX_PREEXEC_RETRY` (LSF: below 2147483647, which means unlimited).
pub const LOCAL_MAX_PREEXEC_RETRY_MAX: u32 = 2_147_483_646;
/// LSF's default `MAX_JOBID`, also the smallest allowed.
pub const MAX_JOBID_DEFAULT: u32 = 999_999;
/// LSF's largest allowed `MAX_JOBID`.
pub const MAX_JOBID_MAX: u32 = 2_147_483_646;
/// LavaCore's default `LAVA_MAX_PEND_BYTES`: 2 GiB per user.
pub const MAX_PEND_BYTES_DEFAULT: u64 = 2 << 30;
/// LavaCore's default `LAVA_MAX_JOB_BYTES`: 1 MiB.
pub const MAX_JOB_BYTES_DEFAULT: u64 = 1 << 20;
/// The smallest `LAVA_MAX_JOB_BYTES` accepted: room for a command and a small environment.
pub const MAX_JOB_BYTES_MIN: u64 = 4096;

/// The contents of `lsb.params`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LsbParams {
    /// The file, if there was one.
    pub path: Option<PathBuf>,
    /// `DEFAULT_QUEUE`.
    pub default_queue: Vec<String>,
    /// `MBD_SLEEP_TIME`.
    pub mbd_sleep_time_s: u32,
    /// `SBD_SLEEP_TIME`.
    pub sbd_sleep_time_s: u32,
    /// `JOB_TERMINATE_INTERVAL`.
    pub job_terminate_interval_s: u32,
    /// `CLEAN_PERIOD`.
    pub clean_period_s: u32,
    /// `MAX_JOB_NUM`.
    pub max_job_num: u32,
    /// `MAX_JOBID`.
    pub max_jobid: u32,
    /// `JOB_ACCEPT_INTERVAL`, in dispatch turns.
    pub job_accept_interval: u32,
    /// `DEFAULT_PROJECT`.
    pub default_project: String,
    /// `MAX_JOB_ARRAY_SIZE`.
    pub max_job_array_size: u32,
    /// `MAX_PEND_JOBS`: `None` for unlimited (LSF's default).
    pub max_pend_jobs: Option<u32>,
    /// `LAVA_MAX_JOB_BYTES`.
    pub max_job_bytes: u64,
    /// `LAVA_MAX_PEND_BYTES`.
    pub max_pend_bytes: u64,
    /// `ACCT_ARCHIVE_SIZE`, KB: `None` for no limit.
    pub acct_archive_size_kb: Option<u64>,
    /// `ACCT_ARCHIVE_AGE`, days: `None` for no limit.
    pub acct_archive_age_days: Option<u32>,
    /// `MAX_ACCT_ARCHIVE_FILE`: `None` to keep every switched file.
    pub max_acct_archive_file: Option<u32>,
    /// LSF keys given but not implemented, by upper-case key.
    pub unimplemented: BTreeMap<String, Entry>,
    /// `LOCAL_MAX_PREEXEC_RETRY`; `None` for unlimited.
    pub local_max_preexec_retry: Option<u32>,
    /// `LOCAL_MAX_PREEXEC_RETRY_ACTION`.
    pub preexec_retry_action: PreExecRetryAction,
    /// The line of each key read, by upper-case key, for errors found later.
    pub lines: BTreeMap<String, u32>,
}

impl Default for LsbParams {
    fn default() -> Self {
        LsbParams {
            path: None,
            default_queue: Vec::new(),
            mbd_sleep_time_s: 60,
            sbd_sleep_time_s: 30,
            job_terminate_interval_s: 10,
            clean_period_s: 3600,
            max_job_num: 1000,
            max_jobid: MAX_JOBID_DEFAULT,
            job_accept_interval: 1,
            default_project: "default".to_string(),
            max_job_array_size: 1000,
            max_pend_jobs: None,
            max_job_bytes: MAX_JOB_BYTES_DEFAULT,
            max_pend_bytes: MAX_PEND_BYTES_DEFAULT,
            acct_archive_size_kb: None,
            acct_archive_age_days: None,
            max_acct_archive_file: None,
            local_max_preexec_retry: None,
            preexec_retry_action: PreExecRetryAction::Suspend,
            unimplemented: BTreeMap::new(),
            lines: BTreeMap::new(),
        }
    }
}

impl LsbParams {
    /// Reads the file at `path`; returns `Ok(None)` if it does not exist.
    pub fn read(path: &Path) -> Result<Option<Self>, ConfError> {
        match read_text(path)? {
            Some(text) => Self::parse(path, &text).map(Some),
            None => Ok(None),
        }
    }

    /// Parses `text`; `path` names the file in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfError> {
        Self::from_file(&SectionFile::parse(path, text)?)
    }

    /// Gives meaning to a parsed `lsb.params`.
    pub fn from_file(file: &SectionFile) -> Result<Self, ConfError> {
        check_sections(file, &["PARAMETERS"], &[], &[])?;
        let path = file.path();
        let mut params = LsbParams { path: Some(path.to_path_buf()), ..LsbParams::default() };
        let Some(section) = sections_named(file, "Parameters").next() else {
            return Ok(params);
        };
        let (entries, unimplemented) = key_values(path, section, &PARAMS_KEYS, &UNIMPLEMENTED_PARAMS_KEYS)?;
        let field = |key: &str| entries.get(key).map(|entry| Field::of_entry(path, entry));
        let number = |key: &str, default: u32, min: u32, max: u32| match field(key) {
            Some(field) if !field.is_default() => field.integer(min, max),
            _ => Ok(default),
        };
        let defaults = LsbParams::default();
        if let Some(field) = field("DEFAULT_QUEUE") {
            params.default_queue = field.names("queue", GROUP_NAME_BYTES_MAX, false)?;
        }
        params.mbd_sleep_time_s = number("MBD_SLEEP_TIME", defaults.mbd_sleep_time_s, 1, u32::MAX)?;
        params.sbd_sleep_time_s = number("SBD_SLEEP_TIME", defaults.sbd_sleep_time_s, 1, u32::MAX)?;
        params.job_terminate_interval_s =
            number("JOB_TERMINATE_INTERVAL", defaults.job_terminate_interval_s, 0, u32::MAX)?;
        params.clean_period_s = number("CLEAN_PERIOD", defaults.clean_period_s, 0, u32::MAX)?;
        params.max_job_num = number("MAX_JOB_NUM", defaults.max_job_num, 1, u32::MAX)?;
        params.max_jobid = number("MAX_JOBID", defaults.max_jobid, MAX_JOBID_DEFAULT, MAX_JOBID_MAX)?;
        params.job_accept_interval =
            number("JOB_ACCEPT_INTERVAL", defaults.job_accept_interval, 0, u32::MAX)?;
        if let Some(field) = field("DEFAULT_PROJECT").filter(|field| !field.is_default()) {
            params.default_project = field.name("project", GROUP_NAME_BYTES_MAX)?;
        }
        params.max_job_array_size =
            number("MAX_JOB_ARRAY_SIZE", defaults.max_job_array_size, 1, params.max_jobid)?;
        params.max_pend_jobs = match field("MAX_PEND_JOBS") {
            Some(field) => field.optional_integer(0, u32::MAX)?,
            None => None,
        };
        params.max_job_bytes = match field("LAVA_MAX_JOB_BYTES") {
            Some(field) if !field.is_default() => field.integer(MAX_JOB_BYTES_MIN, u64::from(u32::MAX))?,
            _ => defaults.max_job_bytes,
        };
        params.max_pend_bytes = match field("LAVA_MAX_PEND_BYTES") {
            Some(field) if !field.is_default() => field.integer(MAX_JOB_BYTES_MIN, u64::MAX)?,
            _ => defaults.max_pend_bytes,
        };
        params.acct_archive_size_kb = match field("ACCT_ARCHIVE_SIZE") {
            Some(field) if !field.is_default() => Some(field.integer(1, u64::MAX)?),
            _ => None,
        };
        params.acct_archive_age_days = match field("ACCT_ARCHIVE_AGE") {
            Some(field) if !field.is_default() => Some(field.integer(1, u32::MAX)?),
            _ => None,
        };
        params.max_acct_archive_file = match field("MAX_ACCT_ARCHIVE_FILE") {
            Some(field) if !field.is_default() => Some(field.integer(1, u32::MAX)?),
            _ => None,
        };
        params.local_max_preexec_retry = match field("LOCAL_MAX_PREEXEC_RETRY") {
            Some(field) if !field.is_default() => Some(field.integer(1, LOCAL_MAX_PREEXEC_RETRY_MAX)?),
            _ => None,
        };
        if let Some(field) = field("LOCAL_MAX_PREEXEC_RETRY_ACTION") {
            params.preexec_retry_action =
                PreExecRetryAction::of_field(&field)?.unwrap_or(defaults.preexec_retry_action);
        }
        params.unimplemented = unimplemented;
        params.lines = entries.iter().map(|(key, entry)| (key.clone(), entry.line)).collect();
        Ok(params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LsbParams, String> {
        LsbParams::parse(Path::new("lsb.params"), text).map_err(|error| error.to_string())
    }

    #[test]
    fn lsf_defaults() {
        // Goal: an empty Parameters section and a file with no section both give LSF's defaults.
        // Method: parse both and compare with the documented values.
        for text in ["Begin Parameters\nEnd Parameters\n", "# empty\n"] {
            let params = parse(text).expect("valid");
            assert_eq!(params.default_queue, Vec::<String>::new());
            assert_eq!((params.mbd_sleep_time_s, params.sbd_sleep_time_s), (60, 30));
            assert_eq!((params.job_terminate_interval_s, params.clean_period_s), (10, 3600));
            assert_eq!(
                (params.max_job_num, params.max_jobid, params.max_job_array_size),
                (1000, 999_999, 1000)
            );
            assert_eq!(params.job_accept_interval, 1);
            assert_eq!(params.default_project, "default");
            assert_eq!((params.max_pend_jobs, params.max_job_bytes), (None, 1 << 20));
        }
    }

    #[test]
    fn every_key_is_read() {
        // Goal: each key lands in its field; an unimplemented LSF key is kept aside.
        // Method: a Parameters section setting every key.
        let params = parse(
            "Begin Parameters\nDEFAULT_QUEUE = normal short\nMBD_SLEEP_TIME = 2\nSBD_SLEEP_TIME = 3\n\
             JOB_TERMINATE_INTERVAL = 4\nCLEAN_PERIOD = 5\nMAX_JOB_NUM = 6\nMAX_JOBID = 2000000\n\
             JOB_ACCEPT_INTERVAL = 0\nDEFAULT_PROJECT = proj1\nMAX_JOB_ARRAY_SIZE = 5000\nMAX_SBD_FAIL = 3\n\
             MAX_PEND_JOBS = 100\nLAVA_MAX_JOB_BYTES = 65536\nACCT_ARCHIVE_SIZE = 10\nACCT_ARCHIVE_AGE = 2\n\
             MAX_ACCT_ARCHIVE_FILE = 3\nEnd Parameters\n",
        )
        .expect("valid");
        assert_eq!(params.default_queue, ["normal", "short"]);
        assert_eq!(
            (params.acct_archive_size_kb, params.acct_archive_age_days, params.max_acct_archive_file),
            (Some(10), Some(2), Some(3))
        );
        assert_eq!((params.mbd_sleep_time_s, params.sbd_sleep_time_s), (2, 3));
        assert_eq!((params.job_terminate_interval_s, params.clean_period_s), (4, 5));
        assert_eq!((params.max_job_num, params.max_jobid, params.max_job_array_size), (6, 2_000_000, 5000));
        assert_eq!(params.job_accept_interval, 0);
        assert_eq!(params.default_project, "proj1");
        assert!(params.unimplemented.contains_key("MAX_SBD_FAIL"));
        assert_eq!((params.max_pend_jobs, params.max_job_bytes), (Some(100), 65536));
        assert_eq!(params.lines.get("DEFAULT_QUEUE"), Some(&2));
    }

    #[test]
    fn errors_name_file_line_and_key() {
        // Goal: bad and out-of-range values and unknown keys are refused with file, line, key.
        // Method: one bad line per case, on line 2.
        let one = |line: &str| parse(&format!("Begin Parameters\n{line}\nEnd Parameters\n"));
        assert_eq!(
            one("MBD_SLEEP_TIME = 0").expect_err("zero"),
            "lsb.params:2: `MBD_SLEEP_TIME`: bad number `0`, expected a whole number from 1 to 4294967295"
        );
        assert_eq!(
            one("LOCAL_MAX_PREEXEC_RETRY = 0").expect_err("retry"),
            "lsb.params:2: `LOCAL_MAX_PREEXEC_RETRY`: bad number `0`, expected a whole number from 1 to 2147483646"
        );
        assert_eq!(
            one("LOCAL_MAX_PREEXEC_RETRY_ACTION = stop").expect_err("action"),
            "lsb.params:2: `LOCAL_MAX_PREEXEC_RETRY_ACTION`: bad value `stop`, expected `SUSPEND` or `EXIT`"
        );
        let retry = one("LOCAL_MAX_PREEXEC_RETRY = 3").expect("valid");
        assert_eq!(
            (retry.local_max_preexec_retry, retry.preexec_retry_action),
            (Some(3), PreExecRetryAction::Suspend)
        );
        let exit = one("LOCAL_MAX_PREEXEC_RETRY_ACTION = EXIT").expect("valid");
        assert_eq!(
            (exit.local_max_preexec_retry, exit.preexec_retry_action),
            (None, PreExecRetryAction::Exit)
        );
        assert_eq!(
            one("MAX_JOBID = 10").expect_err("small"),
            "lsb.params:2: `MAX_JOBID`: bad number `10`, expected a whole number from 999999 to 2147483646"
        );
        assert_eq!(
            one("MAX_JOB_ARRAY_SIZE = 1000000").expect_err("array"),
            "lsb.params:2: `MAX_JOB_ARRAY_SIZE`: bad number `1000000`, expected a whole number from 1 to 999999"
        );
        for bad in ["0", "-5", "many"] {
            assert_eq!(
                one(&format!("MAX_JOB_NUM = {bad}")).expect_err("MAX_JOB_NUM"),
                format!(
                    "lsb.params:2: `MAX_JOB_NUM`: bad number `{bad}`, expected a whole number from 1 to 4294967295"
                )
            );
        }
        assert_eq!(
            one("CLEAN_PERIOD = 1h").expect_err("unit"),
            "lsb.params:2: `CLEAN_PERIOD`: bad number `1h`, expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            one("MAX_PEND_JOBS = lots").expect_err("pend"),
            "lsb.params:2: `MAX_PEND_JOBS`: bad number `lots`, expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            one("LAVA_MAX_JOB_BYTES = 100").expect_err("bytes"),
            "lsb.params:2: `LAVA_MAX_JOB_BYTES`: bad number `100`, expected a whole number from 4096 to 4294967295"
        );
        assert_eq!(one("MAX_PEND_JOBS = -").expect("unlimited").max_pend_jobs, None);
        assert_eq!(
            one("SLEEP = 1").expect_err("unknown"),
            "lsb.params:2: unknown key `SLEEP` in section `Parameters`"
        );
        assert_eq!(
            parse("Begin Parameters\nEnd Parameters\nBegin Parameters\nEnd Parameters\n").expect_err("twice"),
            "lsb.params:3: section `Parameters` is already defined at line 1"
        );
    }
}
