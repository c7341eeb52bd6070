//! `bsub`: submit a job.
//!
//! ```text
//! bsub [-h] [-V] [-H] [-K] [-x] [-q queue] [-J name] [-P project] [-m "host ..."]
//!      [-n slots] [-R res_req] [-w dependency] [-b begin_time] [-E pre_exec]
//!      [-L login_shell] [-env "none" | "all, ..." | "VAR[=value], ..."]
//!      [-i file] [-o file | -oo file] [-e file | -eo file] [-cwd dir]
//!      [-W [hh:]mm] [-M mem] [-N] [-B] [-r] [-u mail] [command [argument ...]]
//! ```
//!
//! # The command
//! With arguments after the options, the command line is those arguments
//! joined with blanks, quoted as LSF's `CopyCommand` quotes them (see
//! [`command_line`]). With none, the job script is read from standard input
//! (`bsub < script`, with LSF's `bsub> ` prompt on a terminal): its leading
//! `#BSUB` lines supply options, which options on the command line override
//! field by field, and the whole script is the command (run by `/bin/sh` on the
//! execution host). Scanning for `#BSUB` stops at the first line that is
//! neither blank nor a comment; a `#BSUB` line ending in `\` continues on the
//! next line; an unknown option in a `#BSUB` line is an error, as in LSF.
//!
//! # `bsub job_script`
//! With `LSB_BSUB_PARSE_SCRIPT=Y` (environment, else lsf.conf; the shipped
//! lsf.conf sets it), a command line of one operand naming a readable text file
//! ([`read_script_file`]) is a job script, as in LSF 10: its `#BSUB` lines are
//! options wherever they stand (LSF's example has one after the commands),
//! which the command line overrides as for `bsub < script`. A file the user may
//! not execute (PSI/J's mode 0644 `script.job`) is submitted as a piped script
//! is, its text the command; an executable one is still submitted as the
//! command named, so that its own `#!` interpreter runs it. Anything else (a
//! binary, a folder, no such file, several operands) is a command, as without
//! the parameter.
//!
//! # Values
//! - `-W [hh:]mm`: run limit, sent in seconds.
//! - `-M mem`: memory limit in `LSF_UNIT_FOR_LIMITS` (MB in the shipped lsf.conf, KB
//!   without the key), or with a unit suffix `K`/`KB`, `M`/`MB`, `G`/`GB`, `T`/`TB` (any case, powers of
//!   1024, decimals allowed: `1.5G`); sent in KiB, rounded up.
//! - `-n N` or `-n min,max`: slots (the minimum is asked for).
//! - `-m "h1 h2"`: candidate hosts.
//! - `-cwd dir`: the job's working directory (relative to the current one).
//!   The current directory otherwise. Either is sent relative to the home
//!   directory when inside it, as LSF does.
//! - `-R res_req`, `-w dependency`, `-J "name[1-10]"`: sent as typed; mbatchd
//!   parses and judges them (a bad one is refused with its message). Several
//!   `-R` are merged into one string as LSF merges them
//!   ([`lava_batch_ll::resreq::merge`]); `-R` on the command line replaces the
//!   script's `#BSUB -R` (merged among themselves) as a whole.
//! - `-x`: exclusive use of the hosts. `-H`: submitted held (PSUSP).
//! - `-b [[[YYYY:][MM:]DD:]hh:]mm`: not dispatched before that local time (the
//!   next such time; see [`crate::begin`]); sent in seconds since the epoch, and
//!   confirmed on standard error as `Job will be scheduled after <ctime>`.
//! - `-L shell`: the job runs under that shell as a login shell (an absolute path).
//! - `-E command`: a pre-execution command run on the execution host before the job (after
//!   the queue's `PRE_EXEC`); when it exits non-zero the job goes back to PEND (exit 99: the
//!   job exits). `-Ep command`: a post-execution command run there after the job (before the
//!   queue's `POST_EXEC`), with `LSB_JOBEXIT_STAT`; its exit does not change the job's.
//!   An empty command is refused (`Bad pre-execution command`, `Bad post-execution command`).
//! - `-env`: which submission variables the job gets ([`crate::envspec`]);
//!   all of them without it.
//! - `-K`: wait for the job and exit with its exit code ([`crate::bsubk`]); not
//!   with a job array (`Job array doesn't support -K option`, as Lava).
//! - Accepted and ignored, with a warning: `-N`, `-B`, `-u` (mail), `-r`.
//! - `-c [hh:]mm`, `-F -D -S -C -v size` (as `-M`; `-C 0` allowed), `-p N`, `-T N`: the
//!   job's own resource limits (docs/batch.md, "Resource limits"), sent as
//!   `SubmitRequest::limits` (none when no such option is given).
//! - Other LSF options (`-t`, `-G`...) are refused as not supported
//!   rather than silently ignored.
//! - `LSB_DEFAULTQUEUE` and `LSB_DEFAULTPROJECT` supply `-q` and `-P` when not given.
//!
//! # Messages (standard output, or standard error with `BSUB_STDERR=y`)
//! - `Job <ID> is submitted to queue <QUEUE>.` (with `-q`, or a queue that is
//!   not the default) or `Job <ID> is submitted to default queue <QUEUE>.`;
//!   `BSUB_QUIET=y` prints nothing, `BSUB_QUIET2=y` only the job id.
//! - Failures on standard error end with `. Job not submitted.`, as in Lava's
//!   cmd.sub.c: `nosuch: No such queue. Job not submitted.`
//! - Exit status 0 on success, 255 otherwise (usage errors too); `-h` and
//!   `-V` exit 0. With `-K`, the job's exit code.

use std::io::{IsTerminal, Read, Write};
use std::path::Path;
use std::process::ExitCode;

use jiff::Zoned;
use lava_batch_ll::resreq;
use lava_batch_wire::{self as wire, Operation, SubmitRequest};
use lava_conf::LimitUnit;

use crate::args::{self, Item, OptSpec, Order, UsageError};
use crate::begin::{self, BeginSpec};
use crate::bsubk;
use crate::client::{self, Client};
use crate::envspec::{self, EnvSpec};
use crate::host;
use crate::term::{self, Term};

/// The usage text (standard error).
pub const USAGE: &str = "\
Usage: bsub [-h] [-V] [-H] [-I | -Ip | -Is | -K] [-x] [-N] [-B] [-r]
            [-q queue_name] [-J job_name] [-P project_name]
            [-m \"host_name ...\"] [-n num_processors] [-R \"res_req\"]
            [-w \"dependency_expression\"] [-b [[[year:]month:]day:]hour:minute]
            [-E \"pre_exec_command\"] [-Ep \"post_exec_command\"] [-L login_shell] [-env \"none\" | \"all, ...\" | \"var[=value], ...\"]
            [-i input_file] [-o out_file | -oo out_file] [-e err_file | -eo err_file]
            [-cwd \"working_dir\"] [-W [hour:]minute] [-M mem_limit] [-u mail_user]
            [command [argument ...]]
";

/// Bit of `file_flags` for `-oo`.
pub const FILE_FLAG_TRUNCATE_OUTPUT: u32 = 1;
/// Bit of `file_flags` for `-eo`.
pub const FILE_FLAG_TRUNCATE_ERROR: u32 = 2;

/// The options the command accepts; its man page (lava-man) is checked against them.
pub const SPECS: &[OptSpec] = &[
    OptSpec::flag("h"),
    OptSpec::flag("V"),
    OptSpec::flag("H"),
    OptSpec::value("q"),
    OptSpec::value("J"),
    OptSpec::value("P"),
    OptSpec::value("m"),
    OptSpec::value("n"),
    OptSpec::value("nnodes"),
    OptSpec::value("i"),
    OptSpec::value("o"),
    OptSpec::value("oo"),
    OptSpec::value("e"),
    OptSpec::value("eo"),
    OptSpec::value("cwd"),
    OptSpec::value("W"),
    OptSpec::value("M"),
    OptSpec::value("c"),
    OptSpec::value("F"),
    OptSpec::value("D"),
    OptSpec::value("S"),
    OptSpec::value("C"),
    OptSpec::value("v"),
    OptSpec::value("p"),
    OptSpec::value("T"),
    OptSpec::value("R"),
    OptSpec::value("w"),
    OptSpec::value("b"),
    OptSpec::value("E"),
    OptSpec::value("Ep"),
    OptSpec::value("L"),
    OptSpec::value("env"),
    OptSpec::flag("K"),
    OptSpec::flag("x"),
    // Accepted and ignored.
    OptSpec::value("u"),
    OptSpec::flag("N"),
    OptSpec::flag("B"),
    OptSpec::flag("r"),
    // LSF options LavaCore does not implement: named so the error says so.
    OptSpec::value("t"),
    OptSpec::value("G"),
    OptSpec::value("k"),
    OptSpec::value("sp"),
    OptSpec::value("a"),
    OptSpec::value("f"),
    OptSpec::value("X"),
    OptSpec::value("is"),
    OptSpec::value("app"),
    OptSpec::value("g"),
    OptSpec::value("sla"),
    OptSpec::value("ext"),
    OptSpec::value("jsdl"),
    OptSpec::flag("I"),
    OptSpec::flag("Ip"),
    OptSpec::flag("Is"),
    OptSpec::flag("Zs"),
];

const IGNORED: &[&str] = &["u", "N", "B", "r"];

/// An output or error file and whether it is truncated (`-oo`, `-eo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileOption {
    /// The path as given (`%J` is expanded on the execution host).
    pub path: String,
    /// Overwrite rather than append.
    pub truncate: bool,
}

/// What the options ask for; `None` is "not given" so that a script's
/// `#BSUB` lines can fill it in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubmitOptions {
    /// `-q`.
    pub queue: Option<String>,
    /// `-J`.
    pub job_name: Option<String>,
    /// `-P`.
    pub project: Option<String>,
    /// `-m`, split on blanks.
    pub hosts: Option<Vec<String>>,
    /// `-n`.
    pub n_slots: Option<u32>,
    /// `-i`.
    pub input: Option<String>,
    /// `-o` / `-oo`.
    pub output: Option<FileOption>,
    /// `-e` / `-eo`.
    pub error: Option<FileOption>,
    /// `-cwd`.
    pub cwd: Option<String>,
    /// `-W`, seconds.
    pub run_limit_s: Option<u64>,
    /// `-M`, as written (its unit depends on lsf.conf).
    pub mem_limit: Option<String>,
    /// `-c`, seconds.
    pub cpu_limit_s: Option<u64>,
    /// `-F -D -S -C -v`, as written (their unit depends on lsf.conf), by option letter.
    pub size_limits: Vec<(char, String)>,
    /// `-p`.
    pub process_limit: Option<u32>,
    /// `-T`.
    pub thread_limit: Option<u32>,
    /// `-H`.
    pub hold: bool,
    /// `-R`, as typed (several merged).
    pub res_req: Option<String>,
    /// `-w`, as typed.
    pub dependency: Option<String>,
    /// `-x`.
    pub exclusive: bool,
    /// `-L`.
    pub login_shell: Option<String>,
    /// `-E`.
    pub pre_exec: Option<String>,
    /// `-Ep`.
    pub post_exec: Option<String>,
    /// `-b`, checked; resolved against the clock when the request is built.
    pub begin: Option<(String, BeginSpec)>,
    /// `-env`.
    pub env: Option<EnvSpec>,
    /// `-K`.
    pub wait: bool,
    /// `-I`, `-Ip`, `-Is` (the last given).
    pub interactive: Option<crate::interactive::Mode>,
    /// Options accepted and ignored, as `-u me@x`, for the warning.
    pub ignored: Vec<String>,
}

impl SubmitOptions {
    /// These options, completed by `fallback` wherever these are silent
    /// (command line over `#BSUB`).
    pub fn or(self, fallback: SubmitOptions) -> SubmitOptions {
        let mut ignored = fallback.ignored;
        ignored.extend(self.ignored);
        SubmitOptions {
            queue: self.queue.or(fallback.queue),
            job_name: self.job_name.or(fallback.job_name),
            project: self.project.or(fallback.project),
            hosts: self.hosts.or(fallback.hosts),
            n_slots: self.n_slots.or(fallback.n_slots),
            input: self.input.or(fallback.input),
            output: self.output.or(fallback.output),
            error: self.error.or(fallback.error),
            cwd: self.cwd.or(fallback.cwd),
            run_limit_s: self.run_limit_s.or(fallback.run_limit_s),
            mem_limit: self.mem_limit.or(fallback.mem_limit),
            cpu_limit_s: self.cpu_limit_s.or(fallback.cpu_limit_s),
            size_limits: {
                // Each size limit of the command line over the script's of the same letter.
                let mut limits = fallback.size_limits;
                limits.retain(|(letter, _)| self.size_limits.iter().all(|(mine, _)| mine != letter));
                limits.extend(self.size_limits);
                limits
            },
            process_limit: self.process_limit.or(fallback.process_limit),
            thread_limit: self.thread_limit.or(fallback.thread_limit),
            hold: self.hold || fallback.hold,
            res_req: self.res_req.or(fallback.res_req),
            dependency: self.dependency.or(fallback.dependency),
            exclusive: self.exclusive || fallback.exclusive,
            login_shell: self.login_shell.or(fallback.login_shell),
            pre_exec: self.pre_exec.or(fallback.pre_exec),
            post_exec: self.post_exec.or(fallback.post_exec),
            begin: self.begin.or(fallback.begin),
            env: self.env.or(fallback.env),
            wait: self.wait || fallback.wait,
            interactive: self.interactive.or(fallback.interactive),
            ignored,
        }
    }

    fn apply(&mut self, name: &str, value: Option<String>) -> Result<(), BsubError> {
        let value = value.unwrap_or_default();
        let file = |truncate| Some(FileOption { path: value.clone(), truncate });
        match name {
            "H" => self.hold = true,
            "K" => self.wait = true,
            "I" => self.interactive = Some(crate::interactive::Mode::Plain),
            "Ip" => self.interactive = Some(crate::interactive::Mode::Pty),
            "Is" => self.interactive = Some(crate::interactive::Mode::Shell),
            "x" => self.exclusive = true,
            "q" => self.queue = Some(value),
            "J" => self.job_name = Some(value),
            "R" => {
                // LSF merges several -R of one submission into one string (resreq::merge).
                let merged = match self.res_req.take() {
                    Some(before) => resreq::merge(&[&before, &value])
                        .map_err(|_| BsubError::Value(resreq::BAD_RESREQ_MESSAGE.to_owned()))?,
                    None => value,
                };
                self.res_req = Some(merged);
            }
            "w" => self.dependency = Some(value),
            "E" => self.pre_exec = Some(nonempty(value, "Bad pre-execution command")?),
            "Ep" => self.post_exec = Some(nonempty(value, "Bad post-execution command")?),
            "L" => {
                if !value.starts_with('/') {
                    return Err(BsubError::Value(format!(
                        "{value}: The login shell must be an absolute path"
                    )));
                }
                self.login_shell = Some(value);
            }
            "b" => {
                let spec = begin::parse_begin(&value).map_err(BsubError::Value)?;
                self.begin = Some((value, spec));
            }
            "env" => self.env = Some(envspec::parse_env(&value).map_err(BsubError::Value)?),
            "P" => self.project = Some(value),
            "m" => self.hosts = Some(value.split_whitespace().map(str::to_owned).collect()),
            "n" => self.n_slots = Some(parse_slots(&value).map_err(BsubError::Value)?),
            // LSF's whole-node count (PSI/J writes `#BSUB -nnodes 1`): one node is LavaCore's
            // span[hosts=1]; more cannot be placed by -R alone.
            "nnodes" => match value.trim() {
                "1" => self.apply("R", Some("span[hosts=1]".to_owned()))?,
                _ => {
                    return Err(BsubError::Value(format!(
                        "{value}: Bad number of nodes (LavaCore takes -nnodes 1; use -n and -R \"span[ptile=N]\")"
                    )));
                }
            },
            "i" => self.input = Some(value),
            "o" => self.output = file(false),
            "oo" => self.output = file(true),
            "e" => self.error = file(false),
            "eo" => self.error = file(true),
            "cwd" => self.cwd = Some(value),
            "W" => self.run_limit_s = Some(parse_run_limit(&value).map_err(BsubError::Value)?),
            "c" => self.cpu_limit_s = Some(parse_cpu_limit(&value).map_err(BsubError::Value)?),
            "F" | "D" | "S" | "C" | "v" => {
                let letter = name.chars().next().unwrap_or('v');
                self.size_limits.retain(|(other, _)| *other != letter);
                self.size_limits.push((letter, value));
            }
            "p" => {
                self.process_limit =
                    Some(parse_count_limit(&value, "PROCESSLIMIT").map_err(BsubError::Value)?)
            }
            "T" => {
                self.thread_limit = Some(parse_count_limit(&value, "THREADLIMIT").map_err(BsubError::Value)?)
            }
            "M" => self.mem_limit = Some(value),
            ignored if IGNORED.contains(&ignored) => {
                let shown =
                    if value.is_empty() { format!("-{ignored}") } else { format!("-{ignored} {value}") };
                self.ignored.push(shown);
            }
            unsupported => {
                return Err(BsubError::Usage(UsageError(format!(
                    "option -{unsupported} is not supported by LavaCore"
                ))));
            }
        }
        Ok(())
    }
}

/// `value` unless it is blank: `VALUE: problem` otherwise.
fn nonempty(value: String, problem: &str) -> Result<String, BsubError> {
    if value.trim().is_empty() { Err(BsubError::Value(format!("{value}: {problem}"))) } else { Ok(value) }
}

/// Why a submission stopped before reaching mbatchd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BsubError {
    /// The syntax is wrong: message and usage.
    Usage(UsageError),
    /// A value is wrong: `VALUE: problem. Job not submitted.`
    Value(String),
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invocation {
    /// `-h`.
    Help,
    /// `-V`.
    Version,
    /// Submit: the options and the command line, `None` to read a script.
    Submit(Box<SubmitOptions>, Option<String>),
}

/// Parses `bsub`'s arguments (without the program name).
pub fn parse_args(args: &[String]) -> Result<Invocation, BsubError> {
    let items = args::scan(args, SPECS, Order::StopAtFirstOperand).map_err(BsubError::Usage)?;
    let mut options = SubmitOptions::default();
    let mut command = Vec::new();
    for item in items {
        match item {
            Item::Opt("h", _) => return Ok(Invocation::Help),
            Item::Opt("V", _) => return Ok(Invocation::Version),
            Item::Opt(name, value) => options.apply(name, value)?,
            Item::Operand(word) => command.push(word),
        }
    }
    let command = if command.is_empty() { None } else { Some(command_line(&command)) };
    Ok(Invocation::Submit(Box::new(options), command))
}

/// A job script's `#BSUB` options, and whether it has a command at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Script {
    /// The embedded options.
    pub options: SubmitOptions,
    /// Whether a line other than blanks and comments exists.
    pub has_command: bool,
}

/// Reads the `#BSUB` lines at the top of `script` (see the module documentation).
pub fn parse_script(script: &str) -> Result<Script, BsubError> {
    scan_script(script, true)
}

/// Reads the `#BSUB` lines of a job script named on the command line
/// (`LSB_BSUB_PARSE_SCRIPT=Y`): wherever they are, as LSF's documentation of
/// `bsub job_script` shows (a `#BSUB` line after the commands still counts).
pub fn parse_job_script_file(script: &str) -> Result<Script, BsubError> {
    scan_script(script, false)
}

fn scan_script(script: &str, stop_at_command: bool) -> Result<Script, BsubError> {
    let mut options = SubmitOptions::default();
    let mut has_command = false;
    let mut lines = script.lines().enumerate();
    while let Some((line_idx, line)) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            continue;
        }
        let Some(comment) = trimmed.strip_prefix('#') else {
            has_command = true;
            if stop_at_command {
                break;
            }
            continue;
        };
        let Some(directive) = comment.trim_start().strip_prefix("BSUB") else { continue };
        let mut directive = directive.trim_start().to_owned();
        if !directive.starts_with('-') {
            continue;
        }
        while directive.ends_with('\\') {
            directive.pop();
            match lines.next() {
                Some((_, next)) => directive.push_str(next),
                None => break,
            }
        }
        let line_no = line_idx + 1;
        let in_line = |message: String| format!("{message} (#BSUB line {line_no})");
        let words = args::split_words(&directive).map_err(|e| BsubError::Usage(UsageError(in_line(e))))?;
        let items = args::scan(&words, SPECS, Order::Permute)
            .map_err(|UsageError(message)| BsubError::Usage(UsageError(in_line(message))))?;
        for item in items {
            match item {
                Item::Opt(name @ ("h" | "V"), _) => {
                    return Err(BsubError::Usage(UsageError(in_line(format!(
                        "option -{name} in a job script"
                    )))));
                }
                Item::Opt(name, value) => options.apply(name, value).map_err(|error| match error {
                    BsubError::Usage(UsageError(message)) => BsubError::Usage(UsageError(in_line(message))),
                    value => value,
                })?,
                Item::Operand(word) => {
                    return Err(BsubError::Usage(UsageError(in_line(format!("unexpected word `{word}`")))));
                }
            }
        }
    }
    Ok(Script { options, has_command })
}

/// What `bsub job_script` finds at its one operand with `LSB_BSUB_PARSE_SCRIPT=Y`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScriptFile {
    /// A text file the user may not execute (PSI/J's mode 0644 `script.job`): its
    /// text is the job script, as with `bsub < file`.
    Body(String),
    /// An executable text file: its `#BSUB` lines count, and it is run as the command
    /// named (so its own `#!` interpreter runs it).
    Executable(String),
}

/// The job script at `path` (relative to the current directory), or `None` when
/// the operand is to be run as a command: not a regular file, unreadable, or
/// binary (a NUL byte, or not UTF-8; LSF: "an ASCII text file and not a binary
/// file"). A script over the command size limit is an error.
pub fn read_script_file(path: &Path) -> Result<Option<ScriptFile>, String> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else { return Ok(None) };
    if !meta.is_file() {
        return Ok(None);
    }
    let limit = lava_batch_ll::COMMAND_BYTES_MAX;
    let mut bytes = Vec::new();
    let Ok(file) = std::fs::File::open(path) else { return Ok(None) };
    if file.take(limit as u64 + 1).read_to_end(&mut bytes).is_err() {
        return Ok(None);
    }
    if bytes.len() > limit {
        return Err(format!("The job script is longer than {limit} bytes"));
    }
    if bytes.contains(&0) {
        return Ok(None);
    }
    let Ok(text) = String::from_utf8(bytes) else { return Ok(None) };
    Ok(Some(if meta.permissions().mode() & 0o111 != 0 {
        ScriptFile::Executable(text)
    } else {
        ScriptFile::Body(text)
    }))
}

/// The one operand of `args` when the command line has exactly one (`bsub
/// [options] job_script`).
fn sole_operand(args: &[String]) -> Option<String> {
    let items = args::scan(args, SPECS, Order::StopAtFirstOperand).ok()?;
    let mut operands = items.into_iter().filter_map(|item| match item {
        Item::Operand(word) => Some(word),
        Item::Opt(..) => None,
    });
    let first = operands.next()?;
    operands.next().is_none().then_some(first)
}

/// `bsub job_script` under `LSB_BSUB_PARSE_SCRIPT=Y`: the options completed by the
/// script's `#BSUB` lines and the command to submit, or `None` to submit the
/// command line as it is.
fn job_script_submission(
    args: &[String],
    options: &SubmitOptions,
) -> Result<Option<(SubmitOptions, String)>, BsubError> {
    let enabled = client::load_config()
        .ok()
        .is_some_and(|config| client::is_yes(client::lsf_param(&config, "LSB_BSUB_PARSE_SCRIPT").as_deref()));
    let Some(operand) = sole_operand(args).filter(|_| enabled) else { return Ok(None) };
    let (text, command) = match read_script_file(Path::new(&operand)).map_err(BsubError::Value)? {
        None => return Ok(None),
        Some(ScriptFile::Executable(text)) => (text, command_line(&[operand])),
        Some(ScriptFile::Body(text)) => {
            let command = text.clone();
            (text, command)
        }
    };
    let script = parse_job_script_file(&text)?;
    if !script.has_command {
        return Err(BsubError::Value("No command is specified in the script file".to_owned()));
    }
    Ok(Some((options.clone().or(script.options), command)))
}

/// The command line of `args`, quoted as LSF's `CopyCommand` does: the first
/// word as is; a later word containing a blank is wrapped in `'...'` if it
/// holds `"` or `$`, else in `"..."`; in other words the characters
/// `" ' \ ( )` are escaped with a backslash, and a word starting with `$` is
/// wrapped in `'...'` (kept literal, as the user quoted it).
pub fn command_line(args: &[String]) -> String {
    let mut line = String::new();
    for (idx, arg) in args.iter().enumerate() {
        if idx == 0 {
            line.push_str(arg);
            continue;
        }
        line.push(' ');
        if arg.contains(' ') {
            if arg.contains('"') || arg.contains('$') {
                line.push('\'');
                line.push_str(arg);
                line.push('\'');
            } else {
                line.push('"');
                line.push_str(arg);
                line.push('"');
            }
        } else if arg.starts_with('$') && !arg.contains(['"', '\'', '\\', '(', ')']) {
            line.push('\'');
            line.push_str(arg);
            line.push('\'');
        } else {
            for c in arg.chars() {
                if matches!(c, '"' | '\'' | '\\' | '(' | ')') {
                    line.push('\\');
                }
                line.push(c);
            }
        }
    }
    line
}

/// `-W [hh:]mm` in seconds.
pub fn parse_run_limit(text: &str) -> Result<u64, String> {
    parse_minutes_limit(text, "RUNLIMIT")
}

/// `-c [hh:]mm` in seconds (LSF's normalisation to a host, `/host`, is not supported).
pub fn parse_cpu_limit(text: &str) -> Result<u64, String> {
    parse_minutes_limit(text, "CPULIMIT")
}

/// `-p` and `-T`: a count of at least 1.
pub fn parse_count_limit(text: &str, key: &str) -> Result<u32, String> {
    text.parse::<u32>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("{text}: {key} value should be a positive integer"))
}

/// `-F -D -S -C -v size` in KiB, as `-M` (a number in `unit` or with its own unit); `-C` may
/// be 0 (no core files).
pub fn parse_size_limit_kb(letter: char, text: &str, unit: LimitUnit) -> Result<u64, String> {
    let key = match letter {
        'F' => "FILELIMIT",
        'D' => "DATALIMIT",
        'S' => "STACKLIMIT",
        'C' => "CORELIMIT",
        _ => "SWAPLIMIT",
    };
    let bad = || format!("{text}: {key} value should be a positive integer");
    if letter == 'C' && text.bytes().all(|b| b == b'0') && !text.is_empty() {
        return Ok(0);
    }
    parse_amount_kb(text, unit).ok_or_else(bad)
}

/// `[hh:]mm` limits (`-W`, `-c`) in seconds, at least a minute.
fn parse_minutes_limit(text: &str, key: &str) -> Result<u64, String> {
    let bad = || format!("{text}: Bad {key} specification");
    let number = |part: &str| -> Result<u64, String> {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        part.parse::<u64>().map_err(|_| bad())
    };
    let minutes = match text.split_once(':') {
        Some((hours, minutes)) => number(hours)?
            .checked_mul(60)
            .and_then(|m| m.checked_add(number(minutes).ok()?))
            .ok_or_else(bad)?,
        None => number(text)?,
    };
    match minutes.checked_mul(60) {
        Some(0) | None => Err(bad()),
        Some(seconds) => Ok(seconds),
    }
}

/// `-M mem` in KiB: a number in `unit`, or with its own unit suffix.
pub fn parse_mem_limit_kb(text: &str, unit: LimitUnit) -> Result<u64, String> {
    parse_amount_kb(text, unit).ok_or_else(|| format!("{text}: Bad MEMLIMIT specification"))
}

/// An amount of memory of at least 1 KiB, in KiB: a number in `unit`, or with its own unit
/// suffix (decimals allowed, rounded up).
fn parse_amount_kb(text: &str, unit: LimitUnit) -> Option<u64> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let unit = if suffix.is_empty() { unit } else { LimitUnit::from_name(suffix)? };
    if number.is_empty() || number.starts_with('.') || number.matches('.').count() > 1 {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    let kb = (value * unit.kb() as f64).ceil();
    (1.0..=u64::MAX as f64).contains(&kb).then_some(kb as u64)
}

/// `-n N` or `-n min,max` (the minimum is asked for).
pub fn parse_slots(text: &str) -> Result<u32, String> {
    let bad = || format!("{text}: Bad number of processors");
    let min = text.split_once(',').map_or(text, |(min, max)| if max.is_empty() { "" } else { min });
    let parse = |part: &str| part.parse::<u32>().ok().filter(|n| *n >= 1).ok_or_else(bad);
    if let Some((_, max)) = text.split_once(',')
        && parse(max)? < parse(min)?
    {
        return Err(bad());
    }
    parse(min)
}

/// What a submission takes from its surroundings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Surroundings {
    /// The current directory.
    pub current_dir: String,
    /// The home directory.
    pub home_dir: String,
    /// This host, as the cluster names it.
    pub from_host: String,
    /// The file-creation mask.
    pub umask: u32,
    /// The environment.
    pub env: Vec<wire::EnvVar>,
    /// `LSF_UNIT_FOR_LIMITS`.
    pub unit: LimitUnit,
    /// `LSB_DEFAULTQUEUE`.
    pub default_queue: Option<String>,
    /// `LSB_DEFAULTPROJECT`.
    pub default_project: Option<String>,
    /// The local time now, for `-b`.
    pub now: Zoned,
}

/// The request for `options` and `command`.
pub fn build_request(
    options: &SubmitOptions,
    command: String,
    around: &Surroundings,
) -> Result<SubmitRequest, String> {
    let cwd = match &options.cwd {
        Some(dir) if dir.starts_with('/') => dir.clone(),
        Some(dir) => format!("{}/{dir}", around.current_dir.trim_end_matches('/')),
        None => around.current_dir.clone(),
    };
    let mem_limit_kb =
        options.mem_limit.as_deref().map(|m| parse_mem_limit_kb(m, around.unit)).transpose()?;
    let mut limits = wire::ResourceLimits {
        cpu_s: options.cpu_limit_s,
        processes: options.process_limit,
        threads: options.thread_limit,
        ..wire::ResourceLimits::default()
    };
    for (letter, text) in &options.size_limits {
        let kb = Some(parse_size_limit_kb(*letter, text, around.unit)?);
        match letter {
            'F' => limits.file_kb = kb,
            'D' => limits.data_kb = kb,
            'S' => limits.stack_kb = kb,
            'C' => limits.core_kb = kb,
            _ => limits.swap_kb = kb,
        }
    }
    if options.wait && options.job_name.as_deref().is_some_and(|name| name.contains('[')) {
        return Err("Job array doesn't support -K option".to_owned());
    }
    if options.interactive.is_some() && options.wait {
        return Err("-K and -I, -Ip, -Is cannot be used together".to_owned());
    }
    if options.interactive.is_some() && options.job_name.as_deref().is_some_and(|name| name.contains('[')) {
        return Err("Job array doesn't support -I, -Ip, -Is options".to_owned());
    }
    let begin_time = match &options.begin {
        Some((text, spec)) => spec.resolve(&around.now).ok_or_else(|| begin::bad_time(text))?,
        None => 0,
    };
    let env = options.env.as_ref().map_or_else(|| around.env.clone(), |spec| spec.select(&around.env));
    let output = options.output.clone();
    let error = options.error.clone();
    let file_flags = output.as_ref().map_or(0, |f| if f.truncate { FILE_FLAG_TRUNCATE_OUTPUT } else { 0 })
        | error.as_ref().map_or(0, |f| if f.truncate { FILE_FLAG_TRUNCATE_ERROR } else { 0 })
        | options.interactive.map_or(0, crate::interactive::Mode::flags);
    Ok(SubmitRequest {
        queue: options.queue.clone().or_else(|| around.default_queue.clone()).unwrap_or_default(),
        job_name: options.job_name.clone().unwrap_or_default(),
        command,
        cwd: host::cwd_for_submission(&cwd, &around.home_dir),
        home_dir: around.home_dir.clone(),
        input_file: options.input.clone().unwrap_or_default(),
        output_file: output.map(|f| f.path).unwrap_or_default(),
        error_file: error.map(|f| f.path).unwrap_or_default(),
        file_flags,
        n_slots: options.n_slots.unwrap_or(0),
        hosts: options.hosts.clone().unwrap_or_default(),
        project: options.project.clone().or_else(|| around.default_project.clone()).unwrap_or_default(),
        run_limit_s: options.run_limit_s.unwrap_or(0),
        mem_limit_kb: mem_limit_kb.unwrap_or(0),
        hold: options.hold,
        res_req: options.res_req.clone().unwrap_or_default(),
        dependency: options.dependency.clone().unwrap_or_default(),
        exclusive: options.exclusive,
        login_shell: options.login_shell.clone().unwrap_or_default(),
        pre_exec: options.pre_exec.clone().unwrap_or_default(),
        post_exec: options.post_exec.clone().unwrap_or_default(),
        begin_time,
        from_host: around.from_host.clone(),
        umask: around.umask,
        env,
        limits: limits.any().then(|| Box::new(limits)),
    })
}

/// The success line for a reply.
pub fn submitted_line(reply: &wire::SubmitReply, default_queue: bool) -> String {
    let default = if default_queue { "default " } else { "" };
    format!("Job <{}> is submitted to {default}queue <{}>.\n", reply.job_id, reply.queue)
}

/// Runs `bsub` with this process's arguments.
pub fn main() -> ExitCode {
    if let Ok(job) = std::env::var(bsubk::WATCH_ENV) {
        return bsubk::watch(&job);
    }
    let mut term = Term::new();
    match run(&mut term) {
        Done::Plain(ok) => term.exit(ok),
        Done::Waited(code) => ExitCode::from(code),
    }
}

/// How `bsub` ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    /// Success or failure: exit 0 or 255.
    Plain(bool),
    /// `-K`: the job's exit code.
    Waited(u8),
}

impl From<bool> for Done {
    fn from(ok: bool) -> Done {
        Done::Plain(ok)
    }
}

fn not_submitted(term: &mut Term, message: &str) -> bool {
    term.err(&format!("{message}. Job not submitted.\n"));
    false
}

fn run(term: &mut Term) -> Done {
    let args = match term::arguments() {
        Ok(args) => args,
        Err(message) => return not_submitted(term, &message).into(),
    };
    let (options, command) = match parse_args(&args) {
        Ok(Invocation::Help) => {
            term.err(USAGE);
            return Done::Plain(true);
        }
        Ok(Invocation::Version) => {
            term.err(term::VERSION_LINE);
            return Done::Plain(true);
        }
        Ok(Invocation::Submit(options, Some(command))) => match job_script_submission(&args, &options) {
            Ok(Some(submission)) => submission,
            Ok(None) => (*options, command),
            Err(error) => return report(term, error).into(),
        },
        Ok(Invocation::Submit(options, None)) => match read_script(term) {
            Ok(script) => match parse_script(&script) {
                Ok(Script { has_command: false, .. }) => {
                    let message = if std::io::stdin().is_terminal() {
                        "No command is specified"
                    } else {
                        "No command is specified in the script file"
                    };
                    return not_submitted(term, message).into();
                }
                Ok(Script { options: embedded, .. }) => (options.or(embedded), script),
                Err(error) => return report(term, error).into(),
            },
            Err(message) => return not_submitted(term, &message).into(),
        },
        Err(error) => return report(term, error).into(),
    };
    submit(term, options, command)
}

fn report(term: &mut Term, error: BsubError) -> bool {
    match error {
        BsubError::Usage(UsageError(message)) => {
            term.err(&format!("bsub: {message}\n"));
            term.err(USAGE);
            false
        }
        BsubError::Value(message) => not_submitted(term, &message),
    }
}

/// Reads the job script from standard input, prompting on a terminal.
fn read_script(term: &mut Term) -> Result<String, String> {
    let limit = lava_batch_ll::COMMAND_BYTES_MAX;
    let stdin = std::io::stdin();
    let mut bytes = Vec::new();
    if stdin.is_terminal() {
        let mut line = String::new();
        loop {
            term.out("bsub> ");
            line.clear();
            match stdin.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => bytes.extend_from_slice(line.as_bytes()),
                Err(error) => return Err(format!("cannot read the job script: {error}")),
            }
            if bytes.len() > limit {
                break;
            }
        }
        let _ = std::io::stdout().flush();
    } else {
        stdin
            .lock()
            .take(limit as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| format!("cannot read the job script: {error}"))?;
    }
    if bytes.len() > limit {
        return Err(format!("The job script is longer than {limit} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "The job script is not valid UTF-8 text".to_owned())
}

fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

fn submit(term: &mut Term, options: SubmitOptions, command: String) -> Done {
    let config = match client::load_config() {
        Ok(config) => config,
        Err(error) => return not_submitted(term, &error.to_string()).into(),
    };
    let status = host::ProcStatus::read();
    let Some(home_dir) = host::home_dir(env_value("HOME").as_deref(), status.uid, Path::new("/etc/passwd"))
    else {
        return not_submitted(term, "Cannot find the home directory (set HOME)").into();
    };
    let current_dir = match std::env::current_dir() {
        Ok(dir) => match dir.into_os_string().into_string() {
            Ok(dir) => dir,
            Err(_) => return not_submitted(term, "The current directory is not valid UTF-8").into(),
        },
        Err(error) => {
            return not_submitted(term, &format!("Cannot get the current directory: {error}")).into();
        }
    };
    let around = Surroundings {
        current_dir,
        home_dir,
        from_host: host::host_name(env_value("LAVA_HOST").as_deref()),
        umask: status.umask.unwrap_or(host::UMASK_DEFAULT),
        env: host::environment(),
        unit: config.lsf.unit_for_limits,
        default_queue: env_value("LSB_DEFAULTQUEUE"),
        default_project: env_value("LSB_DEFAULTPROJECT"),
        now: Zoned::now(),
    };
    let request = match build_request(&options, command, &around) {
        Ok(request) => request,
        Err(message) => return not_submitted(term, &message).into(),
    };
    for ignored in &options.ignored {
        term.err(&format!("bsub: warning: {ignored} is not supported by LavaCore and is ignored\n"));
    }
    let mut client = match Client::from_env(&config) {
        Ok(client) => client,
        Err(error) => return not_submitted(term, &error.to_string()).into(),
    };
    let reply: wire::SubmitReply =
        match client.call(Operation::SubmitJob, Operation::SubmitJobReply, &request) {
            Ok(reply) => reply,
            Err(error) => return not_submitted(term, &error.to_string()).into(),
        };
    // A queue taken from LSB_DEFAULTQUEUE is the user's default queue.
    let default_queue = reply.default_queue || (options.queue.is_none() && around.default_queue.is_some());
    let input_file = options.input.is_some();
    if client::is_yes(env_value("BSUB_QUIET").as_deref()) {
        return match options.interactive {
            Some(mode) => crate::interactive::run(term, &config, &mut client, reply.job_id, mode, input_file),
            None if options.wait => bsubk::wait_for(term, &mut client, reply.job_id),
            None => Done::Plain(true),
        };
    }
    let line = if client::is_yes(env_value("BSUB_QUIET2").as_deref()) {
        format!("{}\n", reply.job_id)
    } else {
        submitted_line(&reply, default_queue)
    };
    say(term, &line);
    if request.begin_time > 0 {
        // Standard error, as Lava's bsub prints it.
        let at = begin::ctime(request.begin_time, around.now.time_zone());
        term.err(&format!("Job will be scheduled after {at}\n"));
    }
    if let Some(mode) = options.interactive {
        return crate::interactive::run(term, &config, &mut client, reply.job_id, mode, input_file);
    }
    if options.wait {
        return bsubk::wait_for(term, &mut client, reply.job_id);
    }
    Done::Plain(true)
}

/// Prints a bsub message where `BSUB_STDERR` says.
pub(crate) fn say(term: &mut Term, line: &str) {
    if client::is_yes(env_value("BSUB_STDERR").as_deref()) {
        term.err(line);
    } else {
        term.out(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    fn submit_args(args: &[&str]) -> (SubmitOptions, Option<String>) {
        match parse_args(&strings(args)) {
            Ok(Invocation::Submit(options, command)) => (*options, command),
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn usage_error(args: &[&str]) -> String {
        match parse_args(&strings(args)) {
            Err(BsubError::Usage(UsageError(message))) => message,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    // Goal: every supported option lands in its field; the command is the rest.
    #[test]
    fn options_and_command() {
        let (options, command) = submit_args(&[
            "-q", "short", "-J", "name", "-oo", "out.%J", "-e", "err", "-i", "in", "-cwd", "/tmp", "-n", "4",
            "-m", "h1 h2", "-P", "proj", "-W", "1:30", "-M", "2G", "-H", "sleep", "-n", "5",
        ]);
        assert_eq!(
            options,
            SubmitOptions {
                queue: Some("short".to_owned()),
                job_name: Some("name".to_owned()),
                project: Some("proj".to_owned()),
                hosts: Some(strings(&["h1", "h2"])),
                n_slots: Some(4),
                input: Some("in".to_owned()),
                output: Some(FileOption { path: "out.%J".to_owned(), truncate: true }),
                error: Some(FileOption { path: "err".to_owned(), truncate: false }),
                cwd: Some("/tmp".to_owned()),
                run_limit_s: Some(5400),
                mem_limit: Some("2G".to_owned()),
                hold: true,
                ..SubmitOptions::default()
            }
        );
        assert_eq!(command.as_deref(), Some("sleep -n 5"));
        assert_eq!(submit_args(&[]).1, None);
        assert_eq!(parse_args(&strings(&["-h", "x"])), Ok(Invocation::Help));
        assert_eq!(parse_args(&strings(&["-V"])), Ok(Invocation::Version));
    }

    // Goal: bad syntax is a usage error; unsupported LSF options say so; bad
    // values name the value.
    #[test]
    fn bad_options() {
        assert_eq!(usage_error(&["-Z", "x"]), "illegal option -- Z");
        assert_eq!(usage_error(&["-q"]), "option requires an argument -- q");
        assert_eq!(usage_error(&["-IZ", "x"]), "illegal option -- Z");
        let (options, _) = submit_args(&["-I", "-Is", "x"]);
        assert_eq!(options.interactive, Some(crate::interactive::Mode::Shell));
        let (options, _) = submit_args(&["-Ip", "x"]);
        assert_eq!(options.interactive, Some(crate::interactive::Mode::Pty));
        assert_eq!(usage_error(&["-t", "12:00", "x"]), "option -t is not supported by LavaCore");
        assert_eq!(
            parse_args(&strings(&["-W", "1:xx", "x"])),
            Err(BsubError::Value("1:xx: Bad RUNLIMIT specification".to_owned()))
        );
        assert_eq!(
            parse_args(&strings(&["-n", "0", "x"])),
            Err(BsubError::Value("0: Bad number of processors".to_owned()))
        );
        let (options, _) = submit_args(&["-J", "arr[1-10]%2", "x"]);
        assert_eq!(options.job_name.as_deref(), Some("arr[1-10]%2"), "an array travels in the name");
        let value_error = |args: &[&str]| match parse_args(&strings(args)) {
            Err(BsubError::Value(message)) => message,
            other => panic!("{args:?}: {other:?}"),
        };
        assert_eq!(value_error(&["-b", "25:00", "x"]), "25:00: Bad time specification");
        assert_eq!(value_error(&["-L", "bash", "x"]), "bash: The login shell must be an absolute path");
        assert_eq!(value_error(&["-E", " ", "x"]), " : Bad pre-execution command");
        assert_eq!(value_error(&["-Ep", "", "x"]), ": Bad post-execution command");
        assert!(value_error(&["-env", "none, A", "x"]).starts_with("none, A: Bad -env specification"));
    }

    // Goal: the mail options are accepted, remembered for the warning, and do
    // not change the request.
    #[test]
    fn ignored_options_are_remembered() {
        let (options, _) = submit_args(&["-R", "span[hosts=1]", "-N", "-u", "me@x", "true"]);
        assert_eq!(options.ignored, strings(&["-N", "-u me@x"]));
        assert_eq!(options.res_req.as_deref(), Some("span[hosts=1]"));
    }

    // Goal: several -R merge into one string as LSF merges them (Snakemake passes
    // `-R rusage[mem=M] -R span[hosts=1]`), in #BSUB lines too; two that cannot be
    // merged stop the submission with LSF's words.
    // Goal: PSI/J's `#BSUB -nnodes 1` is one host (span[hosts=1], merged with -R); a count
    // LavaCore cannot place is refused naming it; `-nnodes` is not `-n nodes`.
    #[test]
    fn nnodes_one_is_one_host() {
        let (options, _) = submit_args(&["-nnodes", "1", "-n", "2", "-R", "rusage[mem=10]", "x"]);
        assert_eq!(options.res_req.as_deref(), Some("rusage[mem=10] span[hosts=1]"));
        assert_eq!(options.n_slots, Some(2));
        let script = parse_script("#BSUB -nnodes 1\n#BSUB -n 1\nrun\n").expect("script");
        assert_eq!(script.options.res_req.as_deref(), Some("span[hosts=1]"));
        assert!(matches!(
            parse_args(&strings(&["-nnodes", "2", "x"])),
            Err(BsubError::Value(message)) if message.starts_with("2: Bad number of nodes")
        ));
    }

    #[test]
    fn several_res_reqs_merge() {
        let (options, _) =
            submit_args(&["-R", "rusage[mem=1000]", "-R", "span[hosts=1]", "-R", "mem>10", "x"]);
        assert_eq!(options.res_req.as_deref(), Some("select[mem>10] rusage[mem=1000] span[hosts=1]"));
        let script =
            parse_script("#BSUB -R \"rusage[mem=2GB]\"\n#BSUB -R \"select[cs]\"\nrun\n").expect("script");
        assert_eq!(script.options.res_req.as_deref(), Some("select[cs] rusage[mem=2GB]"));
        assert_eq!(
            parse_args(&strings(&["-R", "span[hosts=1]", "-R", "span[ptile=2]", "x"])),
            Err(BsubError::Value("Bad resource requirement syntax".to_owned()))
        );
    }

    // Goal: -R, -w, -J arrays, -x, -L, -E, -b, -K and -env reach the request as
    // LSF means them; -R and -w travel as typed.
    #[test]
    fn scheduling_options_reach_the_request() {
        let (options, command) = submit_args(&[
            "-R",
            "select[mem>100] rusage[mem=10]",
            "-w",
            "done(12) && ended(\"a*\")",
            "-J",
            "arr[1-10]%2",
            "-x",
            "-L",
            "/bin/bash",
            "-E",
            "test -d /scratch",
            "-Ep",
            "echo $LSB_JOBEXIT_STAT >> /tmp/st",
            "-b",
            "13:30",
            "-env",
            "none",
            "true",
        ]);
        assert!(!options.wait && submit_args(&["-K", "true"]).0.wait);
        let request = build_request(&options, command.expect("given"), &around()).expect("valid");
        assert_eq!(request.res_req, "select[mem>100] rusage[mem=10]");
        assert_eq!(request.dependency, "done(12) && ended(\"a*\")");
        assert_eq!(request.job_name, "arr[1-10]%2");
        assert!(request.exclusive);
        assert_eq!(request.login_shell, "/bin/bash");
        assert_eq!(request.pre_exec, "test -d /scratch");
        assert_eq!(request.post_exec, "echo $LSB_JOBEXIT_STAT >> /tmp/st");
        let expected: Zoned = "2027-01-31T13:30:00[UTC]".parse().expect("valid");
        assert_eq!(request.begin_time, expected.timestamp().as_second());
        assert!(request.env.is_empty());

        let (options, _) = submit_args(&["-env", "all, ~PATH, X=1", "true"]);
        let request = build_request(&options, "true".to_owned(), &around()).expect("valid");
        assert_eq!(request.env, vec![wire::EnvVar { name: "X".to_owned(), value: "1".to_owned() }]);
        let (options, _) = submit_args(&["-K", "-J", "a[1-2]", "true"]);
        assert_eq!(
            build_request(&options, "true".to_owned(), &around()),
            Err("Job array doesn't support -K option".to_owned())
        );
        let (options, _) = submit_args(&["-b", "2:30:10:00", "true"]);
        assert_eq!(
            build_request(&options, "true".to_owned(), &around()),
            Err("2:30:10:00: Bad time specification".to_owned())
        );
    }

    // Goal: arguments are joined and quoted as LSF's CopyCommand does.
    #[test]
    fn command_line_quoting() {
        let line = |args: &[&str]| command_line(&strings(args));
        assert_eq!(line(&["sleep", "30"]), "sleep 30");
        assert_eq!(line(&["echo hi; echo there"]), "echo hi; echo there");
        assert_eq!(line(&["sh", "-c", "echo a b"]), "sh -c \"echo a b\"");
        assert_eq!(line(&["sh", "-c", "echo \"a b\""]), "sh -c 'echo \"a b\"'");
        assert_eq!(line(&["sh", "-c", "echo $HOME now"]), "sh -c 'echo $HOME now'");
        assert_eq!(line(&["echo", "$HOME"]), "echo '$HOME'");
        assert_eq!(line(&["echo", "it's", "(x)", "a\\b"]), "echo it\\'s \\(x\\) a\\\\b");
        assert_eq!(line(&["grep", "*.txt"]), "grep *.txt");
    }

    // Goal: #BSUB lines at the top give options; scanning stops at the first
    // command; quotes, comments and continuations work; unknown options fail.
    #[test]
    fn script_options() {
        let script = "#!/bin/bash\n\
                      # a comment\n\
                      #BSUB -J dask-worker\n\
                      #BSUB -e /logs/worker-%J.err\n\
                      #BSUB -P \"my project\"   # trailing comment\n\
                      #BSUB -n 4 \\\n\
                      \x20   -R \"span[hosts=1]\"\n\
                      #BSUB -M 1024\n\
                      #BSUB -W 00:30\n\
                      \n\
                      echo start\n\
                      #BSUB -q ignored_after_the_first_command\n";
        let parsed = parse_script(script).expect("valid script");
        assert!(parsed.has_command);
        let options = parsed.options;
        assert_eq!(options.job_name.as_deref(), Some("dask-worker"));
        assert_eq!(
            options.error,
            Some(FileOption { path: "/logs/worker-%J.err".to_owned(), truncate: false })
        );
        assert_eq!(options.project.as_deref(), Some("my project"));
        assert_eq!(options.n_slots, Some(4));
        assert_eq!(options.res_req.as_deref(), Some("span[hosts=1]"));
        assert_eq!(options.mem_limit.as_deref(), Some("1024"));
        assert_eq!(options.run_limit_s, Some(1800));
        assert_eq!(options.queue, None);

        assert_eq!(parse_script("#BSUB -q x\n# only comments\n").map(|s| s.has_command), Ok(false));
        assert_eq!(
            parse_script("#BSUBX -q x\n#BSUB not-an-option\ntrue\n").map(|s| s.options.queue),
            Ok(None)
        );
        assert_eq!(
            parse_script("#BSUB -Z\ntrue\n"),
            Err(BsubError::Usage(UsageError("illegal option -- Z (#BSUB line 1)".to_owned())))
        );
        assert!(matches!(parse_script("#BSUB -q a b\ntrue\n"), Err(BsubError::Usage(_))));
        assert!(matches!(parse_script("#BSUB -W soon\ntrue\n"), Err(BsubError::Value(_))));
    }

    // Goal: a job script named on the command line (LSB_BSUB_PARSE_SCRIPT) has its
    // #BSUB lines read wherever they are, as LSF's `bsub job_script` example shows.
    #[test]
    fn job_script_file_reads_every_bsub_line() {
        let script = "#!/bin/sh\n#BSUB -n 2\nmyjob1 arg1\nmyjob2 arg2\n#BSUB -P myproj\n";
        let parsed = parse_job_script_file(script).expect("LSF's example");
        assert!(parsed.has_command);
        assert_eq!((parsed.options.n_slots, parsed.options.project.as_deref()), (Some(2), Some("myproj")));
        assert_eq!(parse_script(script).expect("piped").options.project, None);
        assert!(!parse_job_script_file("#BSUB -q x\n\n# nothing\n").expect("empty").has_command);
    }

    // Goal: which files are job scripts: readable text files; a mode 0644 one is a
    // body, an executable one keeps being run as a command; binaries, folders and
    // missing files are left to run as commands.
    #[test]
    fn script_files_are_told_apart() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("lava-bsub-script-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a folder");
        let write = |name: &str, bytes: &[u8], mode: u32| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            path
        };
        let text = "#!/bin/bash\n#BSUB -J psij\necho hi\n";
        assert_eq!(
            read_script_file(&write("script.job", text.as_bytes(), 0o644)),
            Ok(Some(ScriptFile::Body(text.to_owned())))
        );
        assert_eq!(
            read_script_file(&write("run.sh", text.as_bytes(), 0o755)),
            Ok(Some(ScriptFile::Executable(text.to_owned())))
        );
        assert_eq!(read_script_file(&write("prog", b"\x7fELF\x02\x01\x00\x00", 0o644)), Ok(None));
        assert_eq!(read_script_file(&write("latin1", b"caf\xe9\n", 0o644)), Ok(None));
        assert_eq!(read_script_file(&dir), Ok(None));
        assert_eq!(read_script_file(&dir.join("missing")), Ok(None));
        let big = vec![b'x'; lava_batch_ll::COMMAND_BYTES_MAX + 1];
        assert!(read_script_file(&write("big", &big, 0o644)).is_err());
        assert_eq!(sole_operand(&strings(&["-q", "a", "script.job"])).as_deref(), Some("script.job"));
        assert_eq!(sole_operand(&strings(&["-q", "a", "sleep", "10"])), None);
        assert_eq!(sole_operand(&strings(&["-q", "a"])), None);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    // Goal: the command line overrides #BSUB field by field.
    #[test]
    fn command_line_overrides_the_script() {
        let (cmdline, _) = submit_args(&["-q", "fast", "-o", "cli.out"]);
        let script = parse_script("#BSUB -q slow\n#BSUB -oo script.out\n#BSUB -J named\n#BSUB -H\ntrue\n")
            .expect("valid")
            .options;
        let merged = cmdline.or(script);
        assert_eq!(merged.queue.as_deref(), Some("fast"));
        assert_eq!(merged.output, Some(FileOption { path: "cli.out".to_owned(), truncate: false }));
        assert_eq!(merged.job_name.as_deref(), Some("named"));
        assert!(merged.hold);
    }

    // Goal: -W is [hh:]mm in seconds; zero and junk are refused.
    #[test]
    fn run_limits() {
        assert_eq!(parse_run_limit("30"), Ok(1800));
        assert_eq!(parse_run_limit("1:30"), Ok(5400));
        assert_eq!(parse_run_limit("00:30"), Ok(1800));
        assert_eq!(parse_run_limit("2:00"), Ok(7200));
        for bad in ["0", "0:00", "", ":30", "1:", "1:2:3", "-5", "1.5", "abc"] {
            assert!(parse_run_limit(bad).is_err(), "{bad}");
        }
    }

    // Goal: -M follows LSF_UNIT_FOR_LIMITS without a suffix, its suffix otherwise.
    #[test]
    fn memory_limits() {
        assert_eq!(parse_mem_limit_kb("1024", LimitUnit::Kb), Ok(1024));
        assert_eq!(parse_mem_limit_kb("1024", LimitUnit::Mb), Ok(1024 * 1024));
        assert_eq!(parse_mem_limit_kb("2G", LimitUnit::Kb), Ok(2 * 1024 * 1024));
        assert_eq!(parse_mem_limit_kb("512MB", LimitUnit::Kb), Ok(512 * 1024));
        assert_eq!(parse_mem_limit_kb("512mb", LimitUnit::Gb), Ok(512 * 1024));
        assert_eq!(parse_mem_limit_kb("1.5G", LimitUnit::Kb), Ok(1536 * 1024));
        assert_eq!(parse_mem_limit_kb("0.5", LimitUnit::Kb), Ok(1));
        for bad in ["", "0", "G", "2X", "1.2.3", ".5", "-1", "1 G"] {
            assert!(parse_mem_limit_kb(bad, LimitUnit::Kb).is_err(), "{bad}");
        }
    }

    // Goal: LSF's per-job resource limits reach the request: -c in [hh:]mm, sizes (-F -D -S
    // -C -v) in LSF_UNIT_FOR_LIMITS or their own unit, -C 0 kept (no core files), counts
    // (-p -T); a repeated letter is the last one's; none given sends none; a bad value is
    // refused with LSF's words.
    #[test]
    fn resource_limits() {
        let (options, command) = submit_args(&[
            "-c", "1:30", "-F", "2", "-D", "1G", "-S", "8", "-C", "0", "-v", "64KB", "-p", "4", "-T", "16",
            "-F", "3", "true",
        ]);
        let request = build_request(&options, command.expect("given"), &around()).expect("valid");
        let expected = wire::ResourceLimits {
            cpu_s: Some(90 * 60),
            file_kb: Some(3 * 1024),
            data_kb: Some(1 << 20),
            stack_kb: Some(8 * 1024),
            core_kb: Some(0),
            swap_kb: Some(64),
            processes: Some(4),
            threads: Some(16),
        };
        assert_eq!(request.limits.as_deref(), Some(&expected));
        let (options, command) = submit_args(&["true"]);
        assert_eq!(build_request(&options, command.expect("given"), &around()).expect("valid").limits, None);
        let (options, command) = submit_args(&["-F", "0", "true"]);
        assert_eq!(
            build_request(&options, command.expect("given"), &around()),
            Err("0: FILELIMIT value should be a positive integer".to_owned())
        );
        assert_eq!(parse_cpu_limit("soon"), Err("soon: Bad CPULIMIT specification".to_owned()));
        assert_eq!(parse_cpu_limit("10/hostA"), Err("10/hostA: Bad CPULIMIT specification".to_owned()));
        assert_eq!(
            parse_count_limit("0", "PROCESSLIMIT"),
            Err("0: PROCESSLIMIT value should be a positive integer".to_owned())
        );
        assert_eq!(parse_size_limit_kb('C', "00", LimitUnit::Mb), Ok(0));
        assert!(parse_size_limit_kb('C', "-1", LimitUnit::Mb).is_err());
    }

    // Goal: -n takes N or min,max.
    #[test]
    fn slots() {
        assert_eq!(parse_slots("4"), Ok(4));
        assert_eq!(parse_slots("2,8"), Ok(2));
        for bad in ["0", "", "x", "8,2", "2,", ",2", "-1"] {
            assert!(parse_slots(bad).is_err(), "{bad}");
        }
    }

    fn around() -> Surroundings {
        Surroundings {
            current_dir: "/home/alice/work".to_owned(),
            home_dir: "/home/alice".to_owned(),
            from_host: "vm".to_owned(),
            umask: 0o022,
            env: vec![wire::EnvVar { name: "PATH".to_owned(), value: "/bin".to_owned() }],
            unit: LimitUnit::Mb,
            default_queue: None,
            default_project: None,
            now: "2027-01-31T12:00:00[UTC]".parse().expect("valid time"),
        }
    }

    // Goal: the request carries every option, the cwd relative to the home,
    // -M in KiB per LSF_UNIT_FOR_LIMITS, and the -oo/-eo bits.
    #[test]
    fn requests_are_built_from_options() {
        let (options, command) = submit_args(&["-oo", "o", "-eo", "e", "-M", "100", "-cwd", "sub", "true"]);
        let request = build_request(&options, command.expect("given"), &around()).expect("valid");
        assert_eq!(request.cwd, "work/sub");
        assert_eq!(request.home_dir, "/home/alice");
        assert_eq!(request.mem_limit_kb, 100 * 1024);
        assert_eq!(request.file_flags, FILE_FLAG_TRUNCATE_OUTPUT | FILE_FLAG_TRUNCATE_ERROR);
        assert_eq!((request.queue.as_str(), request.n_slots, request.hold), ("", 0, false));
        assert_eq!(request.env.len(), 1);

        let defaults = Surroundings {
            default_queue: Some("night".to_owned()),
            default_project: Some("p1".to_owned()),
            ..around()
        };
        let (options, _) = submit_args(&["-cwd", "/scratch", "true"]);
        let request = build_request(&options, "true".to_owned(), &defaults).expect("valid");
        assert_eq!((request.queue.as_str(), request.project.as_str()), ("night", "p1"));
        assert_eq!(request.cwd, "/scratch");
        let (options, _) = submit_args(&["-M", "lots", "true"]);
        assert_eq!(
            build_request(&options, "true".to_owned(), &around()),
            Err("lots: Bad MEMLIMIT specification".to_owned())
        );
    }

    // Goal: LSF's two success lines.
    #[test]
    fn success_lines() {
        let reply = wire::SubmitReply { job_id: 7, queue: "normal".to_owned(), default_queue: true };
        assert_eq!(submitted_line(&reply, true), "Job <7> is submitted to default queue <normal>.\n");
        assert_eq!(submitted_line(&reply, false), "Job <7> is submitted to queue <normal>.\n");
    }
}
