//! `lsb.queues` as typed values, [`LsbQueues`]: one [`Queue`] per `Begin Queue` section.
//!
//! # Keys
//! | key | field | default |
//! |---|---|---|
//! | `QUEUE_NAME` (required) | [`Queue::name`] | |
//! | `PRIORITY` | [`Queue::priority`]: higher is scheduled first | 1 |
//! | `DESCRIPTION` | [`Queue::description`] | empty |
//! | `HOSTS` | [`Queue::hosts`]: `all`, or hosts and host groups (a `+N` preference suffix is accepted and dropped) | `all` |
//! | `USERS` | [`Queue::users`]: `all`, or users and user groups | `all` |
//! | `QJOB_LIMIT` | [`Queue::qjob_limit`]: job slots of the whole queue | unlimited |
//! | `UJOB_LIMIT` | [`Queue::ujob_limit`]: job slots per user | unlimited |
//! | `PJOB_LIMIT` | [`Queue::pjob_limit`]: job slots per processor of each host, 0 to [`PJOB_LIMIT_MAX`] (a fraction is allowed) | unlimited |
//! | `HJOB_LIMIT` | [`Queue::hjob_limit`]: job slots per host | unlimited |
//! | `RUNLIMIT` | [`Queue::run_limit_s`]: `[default] max`, each `[hours:]minutes` | none |
//! | `CPULIMIT` | [`Queue::cpu_limit_s`]: as `RUNLIMIT` (normalisation `/host` is refused) | none |
//! | `MEMLIMIT` | [`Queue::mem_limit_kb`]: `[default] max`, in `LSF_UNIT_FOR_LIMITS` unless a unit (`KB`, `MB`, `GB`, `TB`) follows the number | none |
//! | `DATALIMIT` | [`Queue::data_limit_kb`]: as `MEMLIMIT` | none |
//! | `PROCESSLIMIT` | [`Queue::process_limit`]: `[default] max`, each a whole number from 1 | none |
//! | `THREADLIMIT` | [`Queue::thread_limit`]: as `PROCESSLIMIT` | none |
//! | `FILELIMIT` | [`Queue::file_limit_kb`]: one amount, as `MEMLIMIT`'s | none |
//! | `CORELIMIT` | [`Queue::core_limit_kb`]: as `FILELIMIT` (0: no core files) | none |
//! | `STACKLIMIT` | [`Queue::stack_limit_kb`]: as `FILELIMIT` | none |
//! | `SWAPLIMIT` | [`Queue::swap_limit_kb`]: as `FILELIMIT` | none |
//! | `JOB_STARTER` | [`Queue::job_starter`]: a command line as `PRE_EXEC`'s, `%USRCMD` standing for the job | none |
//! | `PRE_EXEC` | [`Queue::pre_exec`]: a command line of at most [`HOOK_COMMAND_BYTES_MAX`] bytes, run before the job's `-E` | none |
//! | `POST_EXEC` | [`Queue::post_exec`]: as `PRE_EXEC`, run after the job's `-Ep` | none |
//! | `LOCAL_MAX_PREEXEC_RETRY_ACTION` | [`Queue::preexec_retry_action`]: `SUSPEND` or `EXIT`, overriding `lsb.params` | `lsb.params`'s |
//! | `NICE` | [`Queue::nice`]: -20 to 19 | 0 |
//! | `INTERACTIVE` | [`Queue::interactive`]: `YES`, `NO` or `ONLY` | `YES` |
//! | `EXCLUSIVE` | [`Queue::exclusive`]: `y` or `n` | `n` |
//! | `FAIRSHARE` | [`Queue::fairshare`]: `USER_SHARES[[user, shares] ...]`, `default` standing for every user not listed | none (first come, first served) |
//! | `DEFAULT` (ours) | [`Queue::default`]: `y` marks a default queue, for a cluster without `DEFAULT_QUEUE` in lsb.params | `n` |
//!
//! # Unknown keys
//! LSF logs unknown keys and carries on. We refuse them with an error naming file, line and key,
//! because a misspelt key (`PRIORTY`) silently ignored is a queue that behaves wrongly. The keys
//! that LSF defines but LavaCore does not implement ([`UNIMPLEMENTED_QUEUE_KEYS`], e.g.
//! `RUN_WINDOW`, `RES_REQ`, `ADMINISTRATORS`, per-load-index thresholds) are accepted, so an
//! existing LSF file loads, and handed back in [`Queue::unimplemented`] so the daemon can warn
//! that they have no effect.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{ConfError, ErrorKind};
use crate::fields::{
    Field, GROUP_NAME_BYTES_MAX, HOST_NAME_BYTES_MAX, Names, check_sections, hours_minutes_s, key_values,
    sections_named,
};
use crate::lex::read_text;
use crate::lsf_conf::LimitUnit;
use crate::section::{Entry, SectionFile};

/// The keys of a `Queue` section that LavaCore reads.
pub const QUEUE_KEYS: [&str; 28] = [
    "QUEUE_NAME",
    "PRIORITY",
    "DESCRIPTION",
    "HOSTS",
    "USERS",
    "QJOB_LIMIT",
    "UJOB_LIMIT",
    "PJOB_LIMIT",
    "HJOB_LIMIT",
    "RUNLIMIT",
    "MEMLIMIT",
    "CPULIMIT",
    "DATALIMIT",
    "PROCESSLIMIT",
    "THREADLIMIT",
    "FILELIMIT",
    "CORELIMIT",
    "STACKLIMIT",
    "SWAPLIMIT",
    "JOB_STARTER",
    "PRE_EXEC",
    "POST_EXEC",
    "LOCAL_MAX_PREEXEC_RETRY_ACTION",
    "NICE",
    "INTERACTIVE",
    "EXCLUSIVE",
    "DEFAULT",
    "FAIRSHARE",
];

/// LSF queue keys that are accepted but have no effect in LavaCore.
pub const UNIMPLEMENTED_QUEUE_KEYS: [&str; 31] = [
    "ADMINISTRATORS",
    "PROCLIMIT",
    "RUN_WINDOW",
    "DISPATCH_WINDOW",
    "REQUEUE_EXIT_VALUES",
    "RES_REQ",
    "SLOT_RESERVE",
    "BACKFILL",
    "NEW_JOB_SCHED_DELAY",
    "JOB_ACCEPT_INTERVAL",
    "IGNORE_DEADLINE",
    "RESUME_COND",
    "STOP_COND",
    "JOB_CONTROLS",
    "TERMINATE_WHEN",
    "CHKPNT",
    "RERUNNABLE",
    "MIG",
    "POLICIES",
    "USER_SHARES",
    "R15S",
    "R1M",
    "R15M",
    "UT",
    "PG",
    "IO",
    "LS",
    "IT",
    "TMP",
    "SWP",
    "MEM",
];

/// The largest `PJOB_LIMIT` accepted: job slots per processor (LSF sets no bound; one keeps
/// the slots of a host, `PJOB_LIMIT` × CPUs, a whole number of job slots).
pub const PJOB_LIMIT_MAX: f64 = 1_000_000.0;

/// Who or where: everyone/every host, or a list of names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Members {
    /// `all`.
    All,
    /// The names listed, in order.
    Named(Vec<String>),
}

/// A limit with an optional default below its maximum (`LIMIT = [default] max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimit {
    /// The limit a job gets when it asks for none; `None` means the maximum.
    pub default: Option<u64>,
    /// The largest limit a job may have.
    pub max: u64,
}

/// Whether a queue takes interactive jobs (`INTERACTIVE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interactive {
    /// Batch and interactive jobs (`YES`).
    Yes,
    /// Batch jobs only (`NO`).
    No,
    /// Interactive jobs only (`ONLY`).
    Only,
}

/// One queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Queue {
    /// `QUEUE_NAME`.
    pub name: String,
    /// `PRIORITY`.
    pub priority: u32,
    /// `DESCRIPTION`.
    pub description: String,
    /// `HOSTS`.
    pub hosts: Members,
    /// `USERS`.
    pub users: Members,
    /// `QJOB_LIMIT`.
    pub qjob_limit: Option<u32>,
    /// `UJOB_LIMIT`.
    pub ujob_limit: Option<u32>,
    /// `PJOB_LIMIT`.
    pub pjob_limit: Option<f64>,
    /// `HJOB_LIMIT`.
    pub hjob_limit: Option<u32>,
    /// `RUNLIMIT`, in seconds.
    pub run_limit_s: Option<QueueLimit>,
    /// `CPULIMIT`, in seconds.
    pub cpu_limit_s: Option<QueueLimit>,
    /// `MEMLIMIT`, in kilobytes.
    pub mem_limit_kb: Option<QueueLimit>,
    /// `DATALIMIT`, in kilobytes.
    pub data_limit_kb: Option<QueueLimit>,
    /// `PROCESSLIMIT`: processes of a job at once.
    pub process_limit: Option<QueueLimit>,
    /// `THREADLIMIT`: threads of a job at once.
    pub thread_limit: Option<QueueLimit>,
    /// `FILELIMIT`, in kilobytes.
    pub file_limit_kb: Option<u64>,
    /// `CORELIMIT`, in kilobytes.
    pub core_limit_kb: Option<u64>,
    /// `STACKLIMIT`, in kilobytes.
    pub stack_limit_kb: Option<u64>,
    /// `SWAPLIMIT`, in kilobytes.
    pub swap_limit_kb: Option<u64>,
    /// `JOB_STARTER`.
    pub job_starter: Option<String>,
    /// `PRE_EXEC`.
    pub pre_exec: Option<String>,
    /// `POST_EXEC`.
    pub post_exec: Option<String>,
    /// `LOCAL_MAX_PREEXEC_RETRY_ACTION`; `None` to follow `lsb.params`.
    pub preexec_retry_action: Option<PreExecRetryAction>,
    /// `NICE`.
    pub nice: i32,
    /// `INTERACTIVE`.
    pub interactive: Interactive,
    /// `EXCLUSIVE`.
    pub exclusive: bool,
    /// `DEFAULT` (ours).
    pub default: bool,
    /// `FAIRSHARE = USER_SHARES[...]`: shares by user name (or `default`), in file order.
    pub fairshare: Option<Vec<(String, u32)>>,
    /// LSF keys given but not implemented, by upper-case key.
    pub unimplemented: BTreeMap<String, Entry>,
    /// The line of `Begin Queue`.
    pub line: u32,
    /// The line of each key read, by upper-case key, for errors found later.
    pub lines: BTreeMap<String, u32>,
}

/// The contents of `lsb.queues`.
#[derive(Debug, Clone, PartialEq)]
pub struct LsbQueues {
    /// The file.
    pub path: PathBuf,
    /// The queues, in file order.
    pub queues: Vec<Queue>,
}

impl LsbQueues {
    /// Reads the file at `path`; returns `Ok(None)` if it does not exist. `unit` is
    /// `LSF_UNIT_FOR_LIMITS`.
    pub fn read(path: &Path, unit: LimitUnit) -> Result<Option<Self>, ConfError> {
        match read_text(path)? {
            Some(text) => Self::parse(path, &text, unit).map(Some),
            None => Ok(None),
        }
    }

    /// Parses `text`; `path` names the file in errors.
    pub fn parse(path: &Path, text: &str, unit: LimitUnit) -> Result<Self, ConfError> {
        Self::from_file(&SectionFile::parse(path, text)?, unit)
    }

    /// Gives meaning to a parsed `lsb.queues`.
    pub fn from_file(file: &SectionFile, unit: LimitUnit) -> Result<Self, ConfError> {
        check_sections(file, &[], &["QUEUE"], &[])?;
        let path = file.path();
        let mut names = Names::default();
        let mut queues = Vec::new();
        for section in sections_named(file, "Queue") {
            let (entries, unimplemented) = key_values(path, section, &QUEUE_KEYS, &UNIMPLEMENTED_QUEUE_KEYS)?;
            let field = |key: &str| entries.get(key).map(|entry| Field::of_entry(path, entry));
            let name_field = field("QUEUE_NAME").ok_or_else(|| {
                ConfError::at(
                    path,
                    section.line,
                    ErrorKind::MissingKey { section: section.name.clone(), key: "QUEUE_NAME".to_string() },
                )
            })?;
            let name = name_field.name("queue", GROUP_NAME_BYTES_MAX)?;
            names.add(path, "queue", &name, name_field.line)?;

            let count = |key| field(key).map_or(Ok(None), |field| field.optional_integer(0u32, u32::MAX));
            let text = |key| {
                field(key).filter(|field| !field.is_default()).map(|field| field.value.text().to_string())
            };
            let queue = Queue {
                priority: field("PRIORITY").map_or(Ok(1), |field| field.integer(0u32, u32::MAX))?,
                description: text("DESCRIPTION").unwrap_or_default(),
                hosts: field("HOSTS").map_or(Ok(Members::All), |field| members(field, "host", true))?,
                users: field("USERS").map_or(Ok(Members::All), |field| members(field, "user", false))?,
                qjob_limit: count("QJOB_LIMIT")?,
                ujob_limit: count("UJOB_LIMIT")?,
                pjob_limit: match field("PJOB_LIMIT") {
                    Some(field) if !field.is_default() => Some(pjob_limit(&field)?),
                    _ => None,
                },
                hjob_limit: count("HJOB_LIMIT")?,
                run_limit_s: field("RUNLIMIT").map_or(Ok(None), |field| limit(field, time_limit_s))?,
                cpu_limit_s: field("CPULIMIT").map_or(Ok(None), |field| limit(field, time_limit_s))?,
                mem_limit_kb: field("MEMLIMIT")
                    .map_or(Ok(None), |field| limit(field, |text| memory_kb(text, unit)))?,
                data_limit_kb: field("DATALIMIT")
                    .map_or(Ok(None), |field| limit(field, |text| memory_kb(text, unit)))?,
                process_limit: field("PROCESSLIMIT").map_or(Ok(None), |field| limit(field, count_limit))?,
                thread_limit: field("THREADLIMIT").map_or(Ok(None), |field| limit(field, count_limit))?,
                file_limit_kb: size_limit(field("FILELIMIT"), unit)?,
                core_limit_kb: size_limit(field("CORELIMIT"), unit)?,
                stack_limit_kb: size_limit(field("STACKLIMIT"), unit)?,
                swap_limit_kb: size_limit(field("SWAPLIMIT"), unit)?,
                job_starter: field("JOB_STARTER").map_or(Ok(None), |field| hook_command(&field))?,
                pre_exec: field("PRE_EXEC").map_or(Ok(None), |field| hook_command(&field))?,
                post_exec: field("POST_EXEC").map_or(Ok(None), |field| hook_command(&field))?,
                preexec_retry_action: field("LOCAL_MAX_PREEXEC_RETRY_ACTION")
                    .map_or(Ok(None), |field| PreExecRetryAction::of_field(&field))?,
                nice: field("NICE").map_or(Ok(0), |field| field.integer(-20i32, 19))?,
                interactive: match field("INTERACTIVE") {
                    Some(field) if !field.is_default() => match field.text().to_ascii_uppercase().as_str() {
                        "YES" | "Y" => Interactive::Yes,
                        "NO" | "N" => Interactive::No,
                        "ONLY" => Interactive::Only,
                        _ => return Err(field.bad_value("`YES`, `NO` or `ONLY`")),
                    },
                    _ => Interactive::Yes,
                },
                exclusive: yes_no(field("EXCLUSIVE"))?,
                default: yes_no(field("DEFAULT"))?,
                fairshare: field("FAIRSHARE")
                    .filter(|field| !field.is_default())
                    .map(fairshare)
                    .transpose()?,
                unimplemented,
                line: section.line,
                lines: entries.iter().map(|(key, entry)| (key.clone(), entry.line)).collect(),
                name,
            };
            queues.push(queue);
        }
        if queues.is_empty() {
            return Err(ConfError::file(path, ErrorKind::MissingSection { section: "Queue".to_string() }));
        }
        Ok(LsbQueues { path: path.to_path_buf(), queues })
    }

    /// The queue called `name`.
    pub fn queue(&self, name: &str) -> Option<&Queue> {
        self.queues.iter().find(|queue| queue.name == name)
    }
}

/// The longest `PRE_EXEC` or `POST_EXEC` command line, in bytes (LSF's limit on a command
/// path, 4094 characters).
pub const HOOK_COMMAND_BYTES_MAX: usize = 4094;

/// `PRE_EXEC` / `POST_EXEC`: a command line for `/bin/sh -c`; `None` when empty.
fn hook_command(field: &Field<'_>) -> Result<Option<String>, ConfError> {
    if field.is_default() {
        return Ok(None);
    }
    let command = field.value.text().trim();
    if command.len() > HOOK_COMMAND_BYTES_MAX {
        return Err(field.bad_value(format!("a command line of at most {HOOK_COMMAND_BYTES_MAX} bytes")));
    }
    if command.chars().any(|c| c.is_control() && c != '\t') {
        return Err(field.bad_value("a command line without control characters"));
    }
    Ok((!command.is_empty()).then(|| command.to_owned()))
}

/// `LOCAL_MAX_PREEXEC_RETRY_ACTION` (`lsb.queues`, `lsb.params`): what happens to a job whose
/// pre-execution commands failed `LOCAL_MAX_PREEXEC_RETRY` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreExecRetryAction {
    /// `SUSPEND` (LSF's default): the job is held (PSUSP).
    Suspend,
    /// `EXIT`: the job ends EXIT with the last pre-execution command's exit value.
    Exit,
}

impl PreExecRetryAction {
    /// The value of `field`; `None` when left empty.
    pub(crate) fn of_field(field: &Field<'_>) -> Result<Option<PreExecRetryAction>, ConfError> {
        if field.is_default() {
            return Ok(None);
        }
        match field.text().to_ascii_uppercase().as_str() {
            "SUSPEND" => Ok(Some(PreExecRetryAction::Suspend)),
            "EXIT" => Ok(Some(PreExecRetryAction::Exit)),
            _ => Err(field.bad_value("`SUSPEND` or `EXIT`")),
        }
    }
}

/// `PJOB_LIMIT`: a number from 0 to [`PJOB_LIMIT_MAX`].
fn pjob_limit(field: &Field<'_>) -> Result<f64, ConfError> {
    field
        .float(0.0)
        .ok()
        .filter(|value| *value <= PJOB_LIMIT_MAX)
        .ok_or_else(|| field.bad_number(format!("a number from 0 to {PJOB_LIMIT_MAX}")))
}

fn yes_no(field: Option<Field<'_>>) -> Result<bool, ConfError> {
    match field {
        Some(field) if !field.is_default() => field.yes_no(),
        _ => Ok(false),
    }
}

/// `all` or a list of names; `all` must stand alone. For hosts, a `+N` preference is dropped.
fn members(field: Field<'_>, what: &str, is_host: bool) -> Result<Members, ConfError> {
    let words: Vec<&str> = field.value.words().collect();
    if words.is_empty() || words == ["all"] {
        return Ok(Members::All);
    }
    let mut names = Vec::with_capacity(words.len());
    for word in words {
        let name = if is_host { strip_preference(word) } else { word };
        crate::fields::check_name(name, &format!("{what} or group"), HOST_NAME_BYTES_MAX, true).map_err(
            |expected| {
                field.error(ErrorKind::BadValue {
                    key: field.key.to_string(),
                    value: word.to_string(),
                    expected: if word == "all" {
                        "`all` alone, or a list of names".to_string()
                    } else {
                        expected
                    },
                })
            },
        )?;
        names.push(name.to_string());
    }
    Ok(Members::Named(names))
}

/// `host+2` → `host`: LSF's host preference, which LavaCore does not use.
fn strip_preference(word: &str) -> &str {
    match word.rsplit_once('+') {
        Some((name, level)) if !level.is_empty() && level.bytes().all(|byte| byte.is_ascii_digit()) => name,
        _ => word,
    }
}

/// `USER_SHARES[[user, shares] [default, 1] ...]`: at least one entry, each user once,
/// shares a whole number of at least 1.
fn fairshare(field: Field<'_>) -> Result<Vec<(String, u32)>, ConfError> {
    let expected =
        "`USER_SHARES[[user, shares] ...]` with each user (or `default`) once and shares of at least 1";
    let text: String = field.text().split_whitespace().collect();
    let Some(body) = text.strip_prefix("USER_SHARES[").and_then(|rest| rest.strip_suffix(']')) else {
        return Err(field.bad_value(expected));
    };
    let mut shares: Vec<(String, u32)> = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let Some((entry, after)) = rest.strip_prefix('[').and_then(|r| r.split_once(']')) else {
            return Err(field.bad_value(expected));
        };
        let Some((user, count)) = entry.split_once(',') else {
            return Err(field.bad_value(expected));
        };
        let count: u32 = count.parse().ok().filter(|n| *n >= 1).ok_or_else(|| field.bad_value(expected))?;
        let named = crate::fields::check_name(user, "user", GROUP_NAME_BYTES_MAX, false).is_ok();
        if !named || shares.iter().any(|(u, _)| u == user) {
            return Err(field.bad_value(expected));
        }
        shares.push((user.to_string(), count));
        rest = after;
    }
    if shares.is_empty() {
        return Err(field.bad_value(expected));
    }
    Ok(shares)
}

/// `[default] max`, each converted by `convert` (which returns what was expected on failure).
fn limit(
    field: Field<'_>,
    convert: impl Fn(&str) -> Result<u64, String>,
) -> Result<Option<QueueLimit>, ConfError> {
    if field.is_default() {
        return Ok(None);
    }
    let values = field
        .value
        .words()
        .map(|word| {
            convert(word).map_err(|expected| {
                field.error(ErrorKind::BadNumber {
                    key: field.key.to_string(),
                    value: word.to_string(),
                    expected,
                })
            })
        })
        .collect::<Result<Vec<u64>, ConfError>>()?;
    match values[..] {
        [max] => Ok(Some(QueueLimit { default: None, max })),
        [default, max] if default <= max => Ok(Some(QueueLimit { default: Some(default), max })),
        [_, _] => Err(field.bad_value("a default no larger than the maximum")),
        _ => Err(field.bad_value("`[default] maximum`: one or two values")),
    }
}

/// `FILELIMIT`, `CORELIMIT`, `STACKLIMIT`, `SWAPLIMIT`: one amount (LSF has no default for
/// these), as `MEMLIMIT`'s.
fn size_limit(field: Option<Field<'_>>, unit: LimitUnit) -> Result<Option<u64>, ConfError> {
    let Some(field) = field else { return Ok(None) };
    match limit(field, |text| memory_kb(text, unit))? {
        Some(QueueLimit { default: Some(_), .. }) => Err(field.bad_value("one amount")),
        limit => Ok(limit.map(|limit| limit.max)),
    }
}

/// `PROCESSLIMIT`, `THREADLIMIT`: a count of at least 1.
fn count_limit(text: &str) -> Result<u64, String> {
    text.parse::<u32>()
        .ok()
        .filter(|n| *n >= 1)
        .map(u64::from)
        .ok_or_else(|| format!("a whole number from 1 to {}", u32::MAX))
}

fn time_limit_s(text: &str) -> Result<u64, String> {
    if text.contains('/') {
        return Err(
            "`[hours:]minutes`; normalisation to a host or model (`/name`) is not supported".to_string()
        );
    }
    hours_minutes_s(text).ok_or_else(|| "`[hours:]minutes`".to_string())
}

fn memory_kb(text: &str, unit: LimitUnit) -> Result<u64, String> {
    let expected = || "a whole number, optionally followed by `KB`, `MB`, `GB` or `TB`".to_string();
    let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    let number: u64 = digits.parse().map_err(|_| expected())?;
    let unit = if suffix.is_empty() { unit } else { LimitUnit::from_name(suffix).ok_or_else(expected)? };
    number.checked_mul(unit.kb()).ok_or_else(|| "a smaller number".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<LsbQueues, String> {
        LsbQueues::parse(Path::new("lsb.queues"), text, LimitUnit::Kb).map_err(|error| error.to_string())
    }

    fn queue(body: &str) -> Result<Queue, String> {
        let mut queues = parse(&format!("Begin Queue\nQUEUE_NAME = q\n{body}\nEnd Queue\n"))?;
        Ok(queues.queues.remove(0))
    }

    #[test]
    fn defaults_of_a_bare_queue() {
        // Goal: a queue with only a name has every documented default.
        // Method: parse it and compare the whole struct.
        let queue = queue("").expect("valid");
        let expected = Queue {
            name: "q".into(),
            priority: 1,
            description: String::new(),
            hosts: Members::All,
            users: Members::All,
            qjob_limit: None,
            ujob_limit: None,
            pjob_limit: None,
            hjob_limit: None,
            run_limit_s: None,
            cpu_limit_s: None,
            mem_limit_kb: None,
            data_limit_kb: None,
            process_limit: None,
            thread_limit: None,
            file_limit_kb: None,
            core_limit_kb: None,
            stack_limit_kb: None,
            swap_limit_kb: None,
            job_starter: None,
            pre_exec: None,
            post_exec: None,
            preexec_retry_action: None,
            nice: 0,
            interactive: Interactive::Yes,
            exclusive: false,
            default: false,
            fairshare: None,
            unimplemented: BTreeMap::new(),
            line: 1,
            lines: BTreeMap::from([("QUEUE_NAME".to_string(), 2)]),
        };
        assert_eq!(queue, expected);
    }

    #[test]
    fn every_key_is_read() {
        // Goal: each key lands in its field with its unit converted.
        // Method: one queue setting every key, then compare fields.
        let queue = queue(
            "PRIORITY = 40\nDESCRIPTION = For normal low priority jobs.\nHOSTS = hostA+2 group1\n\
             USERS = (alice bob)\nQJOB_LIMIT = 100\nUJOB_LIMIT = 10\nPJOB_LIMIT = 1.5\nHJOB_LIMIT = 4\n\
             RUNLIMIT = 30 2:00\nCPULIMIT = 90\nMEMLIMIT = 1000 2GB\nJOB_STARTER = /bin/sh -c \"ulimit -c 0; %USRCMD\"\n\
             PRE_EXEC = /bin/true\nPOST_EXEC = /bin/echo done\nNICE = -5\nINTERACTIVE = no\nEXCLUSIVE = Y\nDEFAULT = y\n\
             RUN_WINDOW = 5:19:00-1:8:30\nr1m = 0.7/2.0",
        )
        .expect("valid");
        assert_eq!(queue.priority, 40);
        assert_eq!(queue.description, "For normal low priority jobs.");
        assert_eq!(queue.hosts, Members::Named(vec!["hostA".into(), "group1".into()]));
        assert_eq!(queue.users, Members::Named(vec!["alice".into(), "bob".into()]));
        assert_eq!((queue.qjob_limit, queue.ujob_limit, queue.hjob_limit), (Some(100), Some(10), Some(4)));
        assert_eq!(queue.pjob_limit, Some(1.5));
        assert_eq!(queue.run_limit_s, Some(QueueLimit { default: Some(1800), max: 7200 }));
        assert_eq!(queue.cpu_limit_s, Some(QueueLimit { default: None, max: 5400 }));
        assert_eq!(queue.mem_limit_kb, Some(QueueLimit { default: Some(1000), max: 2 * 1024 * 1024 }));
        assert_eq!(queue.job_starter.as_deref(), Some("/bin/sh -c \"ulimit -c 0; %USRCMD\""));
        assert_eq!(queue.pre_exec.as_deref(), Some("/bin/true"));
        assert_eq!(queue.post_exec.as_deref(), Some("/bin/echo done"));
        assert_eq!(queue.nice, -5);
        assert_eq!(queue.interactive, Interactive::No);
        assert!(queue.exclusive && queue.default);
        let unimplemented: Vec<&str> = queue.unimplemented.keys().map(String::as_str).collect();
        assert_eq!(unimplemented, ["R1M", "RUN_WINDOW"]);
        assert_eq!(queue.lines.get("NICE"), Some(&17));
    }

    #[test]
    fn resource_limits_are_read_in_their_units() {
        // Goal: the per-job resource limits land in their fields: sizes in KB or in the unit
        // written after the number, counts as counts, 0 kept as a limit (no core files).
        // Method: one queue setting each, then compare fields.
        let queue = queue(
            "DATALIMIT = 100 2MB
PROCESSLIMIT = 4 8
THREADLIMIT = 64
FILELIMIT = 1GB
CORELIMIT = 0
             STACKLIMIT = 8192
SWAPLIMIT = 3MB",
        )
        .expect("valid");
        assert_eq!(queue.data_limit_kb, Some(QueueLimit { default: Some(100), max: 2048 }));
        assert_eq!(queue.process_limit, Some(QueueLimit { default: Some(4), max: 8 }));
        assert_eq!(queue.thread_limit, Some(QueueLimit { default: None, max: 64 }));
        assert_eq!(
            (queue.file_limit_kb, queue.core_limit_kb, queue.stack_limit_kb, queue.swap_limit_kb),
            (Some(1024 * 1024), Some(0), Some(8192), Some(3072))
        );
        assert!(queue.unimplemented.is_empty());
    }

    #[test]
    fn bad_resource_limits_name_file_line_and_key() {
        // Goal: a limit that cannot be meant is refused with where and why, not read as
        // another value: a default over its maximum, two amounts where LSF takes one, a
        // process count of 0 or a word.
        // Method: one queue each, the error's text.
        let cases = [
            ("PROCESSLIMIT = 9 8", "a default no larger than the maximum"),
            ("CORELIMIT = 0 10", "one amount"),
            ("PROCESSLIMIT = 0", "a whole number from 1"),
            ("THREADLIMIT = many", "a whole number from 1"),
            ("FILELIMIT = 10XB", "`KB`, `MB`, `GB` or `TB`"),
        ];
        for (body, expected) in cases {
            let error = queue(body).expect_err(body);
            assert!(error.starts_with("lsb.queues:3:"), "{body}: {error}");
            assert!(error.contains(body.split(' ').next().expect("key")), "{body}: {error}");
            assert!(error.contains(expected), "{body}: {error}");
        }
    }

    #[test]
    fn fairshare_user_shares() {
        // Goal: FAIRSHARE reads LSF's USER_SHARES list, blanks anywhere; a malformed one names
        // file, line and key.
        let fair = queue("FAIRSHARE = USER_SHARES[[alice, 3] [ default,1 ]]").expect("valid");
        assert_eq!(fair.fairshare, Some(vec![("alice".to_string(), 3), ("default".to_string(), 1)]));
        let expected = "expected `USER_SHARES[[user, shares] ...]` with each user (or `default`) once and shares of at least 1";
        for bad in [
            "USER_SHARES[]",
            "USER_SHARES[[alice]]",
            "USER_SHARES[[alice, 0]]",
            "SHARES[[a, 1]]",
            "USER_SHARES[[a, 1] [a, 2]]",
            "USER_SHARES[[a b, 1]",
        ] {
            let error = queue(&format!("FAIRSHARE = {bad}")).expect_err(bad);
            assert!(
                error.starts_with("lsb.queues:3: `FAIRSHARE`: bad value") && error.ends_with(expected),
                "{error}"
            );
        }
    }

    #[test]
    fn memlimit_follows_lsf_unit_for_limits() {
        // Goal: a MEMLIMIT without a unit is in LSF_UNIT_FOR_LIMITS.
        // Method: parse the same file with MB as the unit.
        let queues = LsbQueues::parse(
            Path::new("lsb.queues"),
            "Begin Queue\nQUEUE_NAME = q\nMEMLIMIT = 3\nEnd Queue\n",
            LimitUnit::Mb,
        )
        .expect("valid");
        assert_eq!(queues.queues[0].mem_limit_kb, Some(QueueLimit { default: None, max: 3072 }));
    }

    // Goal: the hooks and the retry action are read; bad values are refused naming the file,
    // line and key: an unknown action, an over-long or control-character command.
    #[test]
    fn pre_and_post_exec() {
        let q = queue("PRE_EXEC = /bin/check >> /tmp/pre.out\nPOST_EXEC = echo done\nLOCAL_MAX_PREEXEC_RETRY_ACTION = exit")
            .expect("valid");
        assert_eq!(q.pre_exec.as_deref(), Some("/bin/check >> /tmp/pre.out"));
        assert_eq!(q.post_exec.as_deref(), Some("echo done"));
        assert_eq!(q.preexec_retry_action, Some(PreExecRetryAction::Exit));
        assert_eq!(queue("").expect("valid").preexec_retry_action, None);
        assert_eq!(
            queue("LOCAL_MAX_PREEXEC_RETRY_ACTION = RETRY").expect_err("action"),
            "lsb.queues:3: `LOCAL_MAX_PREEXEC_RETRY_ACTION`: bad value `RETRY`, expected `SUSPEND` or `EXIT`"
        );
        let long = "x".repeat(HOOK_COMMAND_BYTES_MAX + 1);
        let error = queue(&format!("POST_EXEC = {long}")).expect_err("long");
        assert!(
            error.starts_with("lsb.queues:3: `POST_EXEC`: bad value")
                && error.ends_with("at most 4094 bytes"),
            "{error}"
        );
    }

    #[test]
    fn errors_name_file_line_and_key() {
        // Goal: each bad key is refused with file, line and key, and says what was expected.
        // Method: one bad line per case (the bad line is line 3 of each file).
        assert_eq!(
            queue("PRIORTY = 30").expect_err("typo"),
            "lsb.queues:3: unknown key `PRIORTY` in section `Queue`"
        );
        assert_eq!(
            queue("PRIORITY = high").expect_err("number"),
            "lsb.queues:3: `PRIORITY`: bad number `high`, expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            queue("NICE = 40").expect_err("nice"),
            "lsb.queues:3: `NICE`: bad number `40`, expected a whole number from -20 to 19"
        );
        assert_eq!(
            queue("RUNLIMIT = 10/hostA").expect_err("normalised"),
            "lsb.queues:3: `RUNLIMIT`: bad number `10/hostA`, expected `[hours:]minutes`; \
             normalisation to a host or model (`/name`) is not supported"
        );
        assert_eq!(
            queue("RUNLIMIT = 60 30").expect_err("order"),
            "lsb.queues:3: `RUNLIMIT`: bad value `60 30`, expected a default no larger than the maximum"
        );
        assert_eq!(
            queue("MEMLIMIT = 1 2 3").expect_err("three"),
            "lsb.queues:3: `MEMLIMIT`: bad value `1 2 3`, expected `[default] maximum`: one or two values"
        );
        assert_eq!(
            queue("MEMLIMIT = 5XB").expect_err("unit"),
            "lsb.queues:3: `MEMLIMIT`: bad number `5XB`, expected a whole number, optionally followed by `KB`, `MB`, `GB` or `TB`"
        );
        assert_eq!(
            queue("PJOB_LIMIT = -1").expect_err("negative"),
            "lsb.queues:3: `PJOB_LIMIT`: bad number `-1`, expected a number from 0 to 1000000"
        );
        assert_eq!(
            queue("PJOB_LIMIT = many").expect_err("not a number"),
            "lsb.queues:3: `PJOB_LIMIT`: bad number `many`, expected a number from 0 to 1000000"
        );
        assert_eq!(
            queue("PJOB_LIMIT = 2000000").expect_err("too large"),
            "lsb.queues:3: `PJOB_LIMIT`: bad number `2000000`, expected a number from 0 to 1000000"
        );
        assert_eq!(
            queue("EXCLUSIVE = maybe").expect_err("bool"),
            "lsb.queues:3: `EXCLUSIVE`: bad value `maybe`, expected `y` or `n`"
        );
        assert_eq!(
            queue("INTERACTIVE = sometimes").expect_err("interactive"),
            "lsb.queues:3: `INTERACTIVE`: bad value `sometimes`, expected `YES`, `NO` or `ONLY`"
        );
        assert_eq!(
            queue("HOSTS = all hostA").expect_err("all"),
            "lsb.queues:3: `HOSTS`: bad value `all`, expected `all` alone, or a list of names"
        );
        assert_eq!(
            parse("Begin Queue\nPRIORITY = 1\nEnd Queue\n").expect_err("no name"),
            "lsb.queues:1: section `Queue` has no `QUEUE_NAME`"
        );
        assert_eq!(
            parse("Begin Queue\nQUEUE_NAME = a\nEnd Queue\nBegin Queue\nQUEUE_NAME = a\nEnd Queue\n")
                .expect_err("twice"),
            "lsb.queues:5: queue `a` is already defined at line 2"
        );
        assert_eq!(
            parse("# nothing\n").expect_err("no queue"),
            "lsb.queues: the file has no `Queue` section"
        );
        assert_eq!(
            parse("Begin Queues\nEnd Queues\n").expect_err("section"),
            "lsb.queues:1: unknown section `Queues`"
        );
    }
}
