//! `bsub -K`: wait for the submitted job and exit with its exit code.
//!
//! After the submission line, `bsub -K` prints on standard error (the job's
//! own messages' channel in LSF's interactive modes, so that standard output
//! keeps only `Job <N> is submitted ...`):
//!
//! ```text
//! <<Waiting for dispatch ...>>
//! <<Starting on HOST>>
//! <<Job is finished>>
//! ```
//!
//! and exits with the job's exit code: 0 for DONE, the exit code `bjobs`
//! shows for EXIT (128 + the signal for a job killed by one), 126 with
//! `<<Terminated while pending>>` for a job that ended without starting, as
//! LSF does. It polls mbatchd with JOB_QUERY (the ordinary client, with its
//! retries), quickly at first and then once a second.
//!
//! # Ctrl-C
//! LSF kills the job when a waiting `bsub -K` is interrupted. LavaCore has no
//! unsafe code to install a signal handler, so `bsub -K` starts a watcher: a
//! copy of itself in its own process group (the terminal's SIGINT does not
//! reach it), whose standard input is a pipe from `bsub`. When `bsub` ends
//! normally it writes `done` to the pipe first; when it is killed (Ctrl-C,
//! SIGTERM, hangup) the pipe closes without `done`, and the watcher asks
//! mbatchd to kill the job (SIGNAL_JOBS, LSF's kill sequence), as `bkill` would,
//! with the same user's credential. The watcher is selected by the variable
//! [`WATCH_ENV`] in its own environment only.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, ExitCode, Stdio};
use std::time::Duration;

use lava_batch_ll::JobStatus;
use lava_batch_wire::{self as wire, Operation, state_filter};

use crate::bsub::Done;
use crate::client::{self, Client};
use crate::term::Term;

/// The variable that makes `bsub` a watcher of the job it names.
pub const WATCH_ENV: &str = "LAVA_BSUB_K_WATCH";
/// Set for the watcher of `bsub -Ip`/`-Is` on a terminal: it keeps the terminal's settings
/// and puts them back if `bsub` is killed while the terminal is raw.
const WATCH_TTY_ENV: &str = "LAVA_BSUB_WATCH_TTY";
/// What a tty-guarding watcher says once it holds the terminal's settings.
const TTY_SAVED: &[u8] = b"r";
/// What `bsub` writes to its watcher when it ends normally.
const RELEASE: &[u8] = b"done";
/// First pause between two polls.
const POLL_MS_FIRST: u64 = 100;
/// Longest pause between two polls.
const POLL_MS_MAX: u64 = 1000;
/// `bsub -K`'s exit code for a job that ended without starting (LSF's).
pub const EXIT_TERMINATED_PENDING: u8 = 126;

/// The watcher's pipe; dropping it (any normal return) releases the watcher.
pub(crate) struct Watcher(Option<ChildStdin>);

impl Drop for Watcher {
    fn drop(&mut self) {
        if let Some(mut pipe) = self.0.take() {
            let _ = pipe.write_all(RELEASE);
        }
    }
}

fn start_watcher(term: &mut Term, job_id: u32) -> Watcher {
    start_watcher_guarding(term, job_id, false)
}

/// Starts the watcher of job `job_id`; with `guard_tty`, it first saves the settings of the
/// controlling terminal (returning once it has) and restores them if `bsub` dies.
pub(crate) fn start_watcher_guarding(term: &mut Term, job_id: u32, guard_tty: bool) -> Watcher {
    let child = std::env::current_exe().and_then(|exe| {
        let mut command = Command::new(exe);
        command.env(WATCH_ENV, job_id.to_string()).stdin(Stdio::piped()).process_group(0);
        if guard_tty {
            command.env(WATCH_TTY_ENV, "1").stdout(Stdio::piped());
        } else {
            command.env_remove(WATCH_TTY_ENV).stdout(Stdio::null());
        }
        command.spawn()
    });
    match child {
        Ok(mut child) => {
            if let Some(mut said) = child.stdout.take() {
                let mut byte = [0u8; 1];
                let _ = said.read(&mut byte);
            }
            Watcher(child.stdin.take())
        }
        Err(error) => {
            term.err(&format!(
                "bsub: warning: cannot watch for Ctrl-C ({error}); it will not kill the job\n"
            ));
            Watcher(None)
        }
    }
}

/// What one answer says about the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Not started yet.
    Pending,
    /// Started on this host.
    Started(String),
    /// Finished.
    Finished {
        /// `bsub -K`'s exit code.
        code: u8,
        /// The host it started on, `None` if it never started.
        started_on: Option<String>,
    },
}

/// Reads a job's state from its [`wire::JobInfo`].
pub fn seen(job: &wire::JobInfo) -> Seen {
    let status = JobStatus::from_bits(job.status);
    let host = job.exec_hosts.first().cloned().filter(|_| job.start_time > 0);
    match status {
        Some(JobStatus::Done) => Seen::Finished { code: 0, started_on: host },
        Some(JobStatus::Exit) if host.is_none() => {
            Seen::Finished { code: EXIT_TERMINATED_PENDING, started_on: None }
        }
        Some(JobStatus::Exit) => Seen::Finished {
            code: u8::try_from(job.exit_code.clamp(0, 255)).unwrap_or(255),
            started_on: host,
        },
        Some(s) if s.is_started() => Seen::Started(host.unwrap_or_default()),
        _ => Seen::Pending,
    }
}

/// The controlling terminal and its settings now.
fn saved_terminal() -> Option<(std::fs::File, rustix::termios::Termios)> {
    let file = std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty").ok()?;
    let settings = rustix::termios::tcgetattr(&file).ok()?;
    Some((file, settings))
}

/// JOB_QUERY of job `job_id` alone, in any state.
pub(crate) fn job_query(job_id: u32) -> wire::JobQuery {
    wire::JobQuery {
        jobs: vec![wire::WireJobRef { job_id, array_index: 0 }],
        user: String::new(),
        state_filter: state_filter::ALL,
        queue: String::new(),
        host: String::new(),
        job_name: String::new(),
        after_job: 0,
        after_index: 0,
    }
}

/// Polls job `job_id` until it has finished; its `bsub -K` exit code.
pub(crate) fn wait_for_end(term: &mut Term, client: &mut Client, job_id: u32) -> Done {
    let query = job_query(job_id);
    loop {
        match client.call::<_, wire::JobQueryReply>(Operation::JobQuery, Operation::JobQueryReply, &query) {
            Ok(reply) => match reply.jobs.iter().find(|job| job.job.job_id == job_id).map(seen) {
                Some(Seen::Finished { code, .. }) => return Done::Waited(code),
                Some(_) => {}
                None => return Done::Plain(false),
            },
            Err(error) => {
                term.err(&format!("{error}\n"));
                return Done::Plain(false);
            }
        }
        std::thread::sleep(Duration::from_millis(POLL_MS_MAX));
    }
}

/// Waits for job `job_id` as the module documentation describes.
pub fn wait_for(term: &mut Term, client: &mut Client, job_id: u32) -> Done {
    term.err("<<Waiting for dispatch ...>>\n");
    let _watcher = start_watcher(term, job_id);
    let query = job_query(job_id);
    let mut announced = false;
    let mut pause_ms = POLL_MS_FIRST;
    loop {
        let reply: wire::JobQueryReply =
            match client.call(Operation::JobQuery, Operation::JobQueryReply, &query) {
                Ok(reply) => reply,
                Err(error) => {
                    term.err(&format!("{error}\n"));
                    return Done::Plain(false);
                }
            };
        let Some(job) = reply.jobs.iter().find(|job| job.job.job_id == job_id) else {
            term.err(&format!("Job <{job_id}> is not found\n"));
            return Done::Plain(false);
        };
        let mut announce = |term: &mut Term, host: &str| {
            if !announced {
                term.err(&format!("<<Starting on {host}>>\n"));
                announced = true;
            }
        };
        match seen(job) {
            Seen::Pending => {}
            Seen::Started(host) => announce(term, &host),
            Seen::Finished { code, started_on: Some(host) } => {
                announce(term, &host);
                term.err("<<Job is finished>>\n");
                return Done::Waited(code);
            }
            Seen::Finished { code, started_on: None } => {
                term.err("<<Terminated while pending>>\n");
                return Done::Waited(code);
            }
        }
        std::thread::sleep(Duration::from_millis(pause_ms));
        pause_ms = (pause_ms * 2).min(POLL_MS_MAX);
    }
}

/// The watcher's `main` (see the module documentation): `job` is [`WATCH_ENV`]'s value.
pub fn watch(job: &str) -> ExitCode {
    let mut term = Term::new();
    let tty = std::env::var_os(WATCH_TTY_ENV).is_some().then(saved_terminal).flatten();
    if std::env::var_os(WATCH_TTY_ENV).is_some() {
        let mut out = std::io::stdout();
        let _ = out.write_all(TTY_SAVED).and_then(|()| out.flush());
    }
    let mut said = Vec::new();
    let _ = std::io::stdin().lock().take(RELEASE.len() as u64).read_to_end(&mut said);
    if said == RELEASE {
        return ExitCode::SUCCESS;
    }
    if let Some((file, settings)) = tty {
        let _ = rustix::termios::tcsetattr(&file, rustix::termios::OptionalActions::Now, &settings);
    }
    let Ok(job_id) = job.parse::<u32>() else { return term.exit(false) };
    let request = wire::SignalRequest {
        jobs: vec![wire::WireJobRef { job_id, array_index: 0 }],
        all_jobs: false,
        user: String::new(),
        action: wire::SignalAction::Terminate,
    };
    let result = client::load_config().map_err(|e| e.to_string()).and_then(|config| {
        let mut client = Client::from_env(&config).map_err(|e| e.to_string())?;
        client
            .call::<_, wire::SignalReply>(Operation::SignalJobs, Operation::SignalJobsReply, &request)
            .map_err(|e| e.to_string())
    });
    match result {
        Ok(_) => term.exit(true),
        Err(error) => {
            term.err(&format!("bsub: cannot kill job <{job_id}> after an interrupt: {error}\n"));
            term.exit(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(status: JobStatus, start_time: i64, exit_code: i32) -> wire::JobInfo {
        wire::JobInfo {
            job: wire::WireJobRef { job_id: 1, array_index: 0 },
            user_name: "u".into(),
            status: status.bits(),
            queue: "normal".into(),
            from_host: "h".into(),
            exec_hosts: if start_time > 0 { vec!["n1".into(), "n2".into()] } else { vec![] },
            job_name: "j".into(),
            command: "c".into(),
            project: "default".into(),
            n_slots: 1,
            submit_time: 1,
            start_time,
            exit_code,
            ..wire::JobInfo::default()
        }
    }

    // Goal: the exit code is 0 for DONE, the job's for EXIT, 126 for a job that
    // never started; a started job is announced on its first host.
    #[test]
    fn states_and_exit_codes() {
        assert_eq!(seen(&job(JobStatus::Pend, 0, 0)), Seen::Pending);
        assert_eq!(seen(&job(JobStatus::Psusp, 0, 0)), Seen::Pending);
        assert_eq!(seen(&job(JobStatus::Run, 5, 0)), Seen::Started("n1".into()));
        assert_eq!(seen(&job(JobStatus::Ususp, 5, 0)), Seen::Started("n1".into()));
        assert_eq!(
            seen(&job(JobStatus::Done, 5, 0)),
            Seen::Finished { code: 0, started_on: Some("n1".into()) }
        );
        assert_eq!(
            seen(&job(JobStatus::Exit, 5, 3)),
            Seen::Finished { code: 3, started_on: Some("n1".into()) }
        );
        assert_eq!(
            seen(&job(JobStatus::Exit, 5, 300)),
            Seen::Finished { code: 255, started_on: Some("n1".into()) }
        );
        assert_eq!(seen(&job(JobStatus::Exit, 0, 130)), Seen::Finished { code: 126, started_on: None });
    }
}
