//! `bpeek`: the output a running job has written so far.
//!
//! ```text
//! bpeek [-h] [-V] [-f] [job_ID | "job_ID[index]"]
//! ```
//!
//! # How
//! `bpeek` asks mbatchd for the job (JOB_QUERY) and works out where its standard
//! output goes exactly as sbatchd does (`lava_sbd::run_spec`: the `-o` file with
//! `%J`/`%I` substituted, anchored at the execution directory; without `-o`, the
//! spool file `<home>/.lsbatch/<submit-time>.<id>[.<index>].out` of the job's
//! owner). As LSF does by default (`LSB_BPEEK_REMOTE_OUTPUT=N`), it reads that file
//! itself first, as the calling user, when the job runs on this host or the file is
//! visible here (a shared file system): the kernel's permissions decide, and `bpeek`
//! also refuses other users' jobs unless run by root. Otherwise (or first, with
//! `LSB_BPEEK_REMOTE_OUTPUT=Y`) it asks mbatchd with PEEK_JOB, which checks the caller
//! (owner or administrator) and relays the request to the execution host's sbatchd
//! (SBD_PEEK, outside the logic: nothing changes), which answers with at most
//! `PEEK_BYTES_MAX` bytes from the asked offset; `bpeek` asks again from the new
//! offset until it has everything. The relay shows standard output only.
//!
//! # Output
//! `<< output from stdout >>` and the output file's contents; when `-e` names
//! another file, `<< output from stderr >>` and that file. With `-f`, the output
//! file is followed like `tail -f` (new bytes shown as they are written, the job
//! polled once a second) until the job finishes.
//!
//! # Messages (standard error, exit 255)
//! - `Job <N> is not found` for an unknown job.
//! - `Job <N> : Not a running job` for a job pending or finished.
//! - `Job <N> : User permission denied` for another user's job.
//! - Without a job id, the caller's most recent running job; `No unfinished job found`
//!   when there is none.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use lava_batch_ll::{JobRef, JobStatus};
use lava_batch_wire::{self as wire, Operation, WireJobRef, state_filter};
use lava_sbd::run_spec::{decode_cwd, resolve_file, substitute_job};

use crate::args::{self, Item, OptSpec, Order, UsageError};
use crate::client::{self, Client};
use crate::host;
use crate::jobid::{self, JobTarget};
use crate::term::{self, Term};

/// The usage text (standard error).
pub const USAGE: &str = "Usage: bpeek [-h] [-V] [-f] [jobId | \"jobId[index]\"]\n";

/// The options the command accepts; its man page (lava-man) is checked against them.
pub const SPECS: &[OptSpec] = &[OptSpec::flag("h"), OptSpec::flag("V"), OptSpec::flag("f")];

/// Pause between two looks at a followed job.
const FOLLOW_INTERVAL: Duration = Duration::from_secs(1);

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invocation {
    /// `-h`.
    Help,
    /// `-V`.
    Version,
    /// Peek at a job (`None`: the most recent running one), following with `-f`.
    Peek {
        /// The job named.
        job: Option<WireJobRef>,
        /// `-f`.
        follow: bool,
    },
}

/// Parses `bpeek`'s arguments (without the program name).
pub fn parse_args(args: &[String]) -> Result<Invocation, UsageError> {
    let mut follow = false;
    let mut jobs = Vec::new();
    for item in args::scan(args, SPECS, Order::Permute)? {
        match item {
            Item::Opt("h", _) => return Ok(Invocation::Help),
            Item::Opt("V", _) => return Ok(Invocation::Version),
            Item::Opt(_, _) => follow = true,
            Item::Operand(word) => jobs.push(word),
        }
    }
    match jobs.as_slice() {
        [] => Ok(Invocation::Peek { job: None, follow }),
        [one] => match jobid::parse(one).map_err(UsageError)? {
            JobTarget::Job(job) => Ok(Invocation::Peek { job: Some(job), follow }),
            JobTarget::All => Err(UsageError(format!("{one}: Illegal job ID."))),
        },
        _ => Err(UsageError("only one job can be peeked at".to_owned())),
    }
}

/// The files a job writes: standard output, and standard error when it is another file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputFiles {
    /// Standard output.
    pub stdout: String,
    /// Standard error, `None` when it goes to the output file.
    pub stderr: Option<String>,
}

/// Where `job`'s output goes, as sbatchd decides it (see `lava_sbd::run_spec` and
/// sbatchd's launch module), with `owner_home` the owner's home directory.
pub fn output_files(job: &wire::JobInfo, owner_home: &str) -> Option<OutputFiles> {
    let job_ref = JobRef::new(job.job.job_id, job.job.array_index)?;
    let cwd = if job.exec_cwd.is_empty() { decode_cwd(owner_home, &job.cwd) } else { job.exec_cwd.clone() };
    let file = |path: &str| resolve_file(&cwd, &substitute_job(path, job_ref));
    let spool = |suffix: &str| {
        let index =
            if job.job.array_index == 0 { String::new() } else { format!(".{}", job.job.array_index) };
        format!(
            "{}/.lsbatch/{}.{}{index}.{suffix}",
            owner_home.trim_end_matches('/'),
            job.submit_time,
            job.job.job_id
        )
    };
    let stdout = if job.output_file.is_empty() { spool("out") } else { file(&job.output_file) };
    let stderr = match (job.error_file.as_str(), job.output_file.as_str()) {
        ("", "") => Some(spool("err")),
        ("", _) => None,
        (path, _) => Some(file(path)).filter(|path| *path != stdout),
    };
    Some(OutputFiles { stdout, stderr })
}

/// Runs `bpeek` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("bpeek", |term, args| match parse_args(&args) {
        Ok(Invocation::Help) => {
            term.err(USAGE);
            true
        }
        Ok(Invocation::Version) => {
            term.err(term::VERSION_LINE);
            true
        }
        Ok(Invocation::Peek { job, follow }) => peek(term, job, follow),
        Err(UsageError(message)) => {
            term.err(&format!("bpeek: {message}\n"));
            term.err(USAGE);
            false
        }
    })
}

fn query(client: &mut Client, job: Option<WireJobRef>) -> Result<wire::JobQueryReply, String> {
    let request = wire::JobQuery {
        jobs: job.into_iter().collect(),
        user: String::new(),
        state_filter: if job.is_some() { state_filter::ALL } else { state_filter::RUNNING },
        queue: String::new(),
        host: String::new(),
        job_name: String::new(),
        after_job: 0,
        after_index: 0,
    };
    client.call(Operation::JobQuery, Operation::JobQueryReply, &request).map_err(|error| error.to_string())
}

fn is_running(job: &wire::JobInfo) -> bool {
    JobStatus::from_bits(job.status).is_some_and(JobStatus::is_started)
}

/// The job to peek at, or the message saying why there is none.
fn find_job(client: &mut Client, job: Option<WireJobRef>) -> Result<wire::JobInfo, String> {
    let reply = query(client, job)?;
    let Some(wanted) = job else {
        let latest = reply.jobs.into_iter().filter(is_running).max_by_key(|j| (j.submit_time, j.job.job_id));
        return latest.ok_or_else(|| "No unfinished job found".to_owned());
    };
    let shown = jobid::display(wanted);
    let Some(info) = reply.jobs.into_iter().find(|j| j.job == wanted) else {
        return Err(format!("Job <{shown}> is not found"));
    };
    if !is_running(&info) {
        return Err(format!("Job <{shown}> : Not a running job"));
    }
    Ok(info)
}

/// The caller's user name and uid, from `/proc/self/status` and `/etc/passwd`.
fn caller() -> (Option<u32>, Option<String>) {
    let uid = host::ProcStatus::read().uid;
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    (uid, uid.and_then(|uid| host::passwd_name(&passwd, uid)))
}

fn peek(term: &mut Term, job: Option<WireJobRef>, follow: bool) -> bool {
    let config = match client::load_config() {
        Ok(config) => config,
        Err(error) => {
            term.err(&format!("bpeek: {error}\n"));
            return false;
        }
    };
    let mut client = match Client::from_env(&config) {
        Ok(client) => client,
        Err(error) => {
            term.err(&format!("{error}\n"));
            return false;
        }
    };
    let info = match find_job(&mut client, job) {
        Ok(info) => info,
        Err(message) => {
            term.err(&format!("{message}\n"));
            return false;
        }
    };
    let shown = jobid::display(info.job);
    let source = match choose_source(&config, &info) {
        Ok(source) => source,
        Err(message) => {
            term.err(&format!("{message}\n"));
            return false;
        }
    };
    term.out("<< output from stdout >>\n");
    let mut offset = match show(term, &mut client, &source, info.job, 0) {
        Ok(offset) => offset,
        Err(message) => {
            term.err(&format!("{message}\n"));
            return false;
        }
    };
    if !follow {
        if let Source::Local(OutputFiles { stderr: Some(stderr), .. }) = &source {
            term.out("\n<< output from stderr >>\n");
            if let Err(message) = show_from(term, stderr, 0) {
                term.err(&format!("Job <{shown}> : {message}\n"));
                return false;
            }
        }
        return true;
    }
    loop {
        std::thread::sleep(FOLLOW_INTERVAL);
        let still_running = match query(&mut client, Some(info.job)) {
            Ok(reply) => reply.jobs.iter().any(|j| j.job == info.job && is_running(j)),
            Err(message) => {
                term.err(&format!("{message}\n"));
                return false;
            }
        };
        match show(term, &mut client, &source, info.job, offset) {
            Ok(next) => offset = next,
            // The job ended between the two questions: its output is complete.
            Err(_) if !still_running => return true,
            Err(message) => {
                term.err(&format!("{message}\n"));
                return false;
            }
        }
        if !still_running {
            return true;
        }
    }
}

/// Where the output is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Here, from these files.
    Local(OutputFiles),
    /// Through mbatchd from the execution host's sbatchd (PEEK_JOB): standard output only.
    Remote,
}

/// The files when they can be read here (LSF's default order: local first), else
/// mbatchd's relay when the job runs on another host; the relay first with
/// `LSB_BPEEK_REMOTE_OUTPUT=Y`.
fn choose_source(config: &lava_conf::BaseConfig, info: &wire::JobInfo) -> Result<Source, String> {
    if client::is_yes(client::lsf_param(config, "LSB_BPEEK_REMOTE_OUTPUT").as_deref()) {
        return Ok(Source::Remote);
    }
    let shown = jobid::display(info.job);
    let (uid, name) = caller();
    let own = name.as_deref() == Some(info.user_name.as_str());
    if uid != Some(0) && !own {
        return Err(format!("Job <{shown}> : User permission denied"));
    }
    if !own {
        // Root peeking at another user's job: the path is that user's to choose (a folder
        // of it may be a link anywhere), so it is never opened here as root; the execution
        // host's sbatchd reads it as the job's user (docs/operations.md, "bpeek and users'
        // paths").
        return Ok(Source::Remote);
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let files =
        host::passwd_home_by_name(&passwd, &info.user_name).and_then(|home| output_files(info, &home));
    let here = host::host_name(std::env::var("LAVA_HOST").ok().as_deref());
    let runs_here = info.exec_hosts.first().is_some_and(|first| *first == here);
    match files {
        Some(files) if runs_here || Path::new(&files.stdout).exists() => Ok(Source::Local(files)),
        _ => Ok(Source::Remote),
    }
}

/// Prints the output from `offset` on; returns the offset after it, or the message.
fn show(
    term: &mut Term,
    client: &mut Client,
    source: &Source,
    job: WireJobRef,
    offset: u64,
) -> Result<u64, String> {
    match source {
        Source::Local(files) => show_from(term, &files.stdout, offset)
            .map_err(|message| format!("Job <{}> : {message}", jobid::display(job))),
        Source::Remote => {
            let mut offset = offset;
            loop {
                let request = wire::PeekRequest { job, offset };
                let reply: wire::PeekReply = client
                    .call(Operation::PeekJob, Operation::PeekJobReply, &request)
                    .map_err(|error| error.to_string())?;
                if reply.code != wire::PEEK_OK {
                    return Err(reply.message);
                }
                term.out(&String::from_utf8_lossy(&reply.data));
                if reply.data.is_empty() || reply.next_offset <= offset {
                    return Ok(offset);
                }
                offset = reply.next_offset;
            }
        }
    }
}

/// Prints `path` from byte `offset` on; returns the offset after what was printed.
/// A file not yet created shows nothing; only a regular file is read (opened without
/// waiting, so a FIFO or a device named like the output is refused, never read).
fn show_from(term: &mut Term, path: &str, offset: u64) -> Result<u64, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(Path::new(path));
    let mut file = match opened {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(offset),
        Err(error) => return Err(format!("cannot read {path}: {error}")),
    };
    if !file.metadata().map_err(|error| format!("cannot read {path}: {error}"))?.is_file() {
        return Err(format!("cannot read {path}: not a regular file"));
    }
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.read_to_end(&mut bytes))
        .map_err(|error| format!("cannot read {path}: {error}"))?;
    term.out(&String::from_utf8_lossy(&bytes));
    Ok(offset + bytes.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    // Goal: -f, one job id, none; bad ids and two ids are usage errors.
    #[test]
    fn arguments() {
        assert_eq!(
            parse_args(&strings(&["-f", "12"])),
            Ok(Invocation::Peek { job: Some(WireJobRef { job_id: 12, array_index: 0 }), follow: true })
        );
        assert_eq!(parse_args(&strings(&[])), Ok(Invocation::Peek { job: None, follow: false }));
        assert_eq!(parse_args(&strings(&["x1"])), Err(UsageError("x1: Illegal job ID.".to_owned())));
        assert_eq!(parse_args(&strings(&["0"])), Err(UsageError("0: Illegal job ID.".to_owned())));
        assert!(parse_args(&strings(&["1", "2"])).is_err());
        assert_eq!(parse_args(&strings(&["-z"])), Err(UsageError("illegal option -- z".to_owned())));
    }

    fn info(output: &str, error: &str, exec_cwd: &str) -> wire::JobInfo {
        wire::JobInfo {
            job: WireJobRef { job_id: 42, array_index: 3 },
            user_name: "alice".into(),
            status: JobStatus::Run.bits(),
            queue: "normal".into(),
            from_host: "h".into(),
            exec_hosts: vec!["n1".into()],
            job_name: "j".into(),
            command: "c".into(),
            project: "default".into(),
            cwd: "work".into(),
            exec_cwd: exec_cwd.into(),
            output_file: output.into(),
            error_file: error.into(),
            n_slots: 1,
            submit_time: 1_700_000_000,
            start_time: 1_700_000_001,
            pid: 9,
            ..wire::JobInfo::default()
        }
    }

    // Goal: the files are the ones sbatchd writes: %J/%I substituted and anchored
    // at the execution directory; the owner's spool files without -o.
    #[test]
    fn files_follow_sbatchds_rules() {
        let files = |o: &str, e: &str, cwd: &str| output_files(&info(o, e, cwd), "/home/alice").expect("job");
        assert_eq!(
            files("", "", "/x"),
            OutputFiles {
                stdout: "/home/alice/.lsbatch/1700000000.42.3.out".into(),
                stderr: Some("/home/alice/.lsbatch/1700000000.42.3.err".into()),
            }
        );
        assert_eq!(files("o.%J.%I", "", "/x"), OutputFiles { stdout: "/x/o.42.3".into(), stderr: None });
        assert_eq!(
            files("o", "/e.%J", ""),
            OutputFiles { stdout: "/home/alice/work/o".into(), stderr: Some("/e.42".into()) }
        );
        assert_eq!(files("/same", "/same", "/x").stderr, None);
    }
}
