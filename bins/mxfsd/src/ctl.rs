//! `mxfsctl`: the command-line client of mxfsd.
//!
//! - `mxfsctl lock RESOURCE MODE [--noqueue] [--timeout S] -- COMMAND…` takes the lock, runs
//!   COMMAND while holding it (like flock(1)), releases it and exits with COMMAND's exit code
//!   (128 + the signal number when it was killed). If the lock cannot be had it prints why
//!   and exits 1 without running COMMAND. The lock is held until released (NOREVOKE): a
//!   running command cannot downgrade, so BASTs do not revoke it; waiters wait for the command.
//! - `mxfsctl status`: the master, this node, epochs, leases (the node table on the master),
//!   the peers' liveness as this node sees it, the counters.
//! - `mxfsctl locks [RESOURCE]`: holders and waiters with their modes.
//!
//! The socket is `--socket PATH`, else lsf.conf's (see [`crate::socket_path`]).

use std::os::unix::process::ExitStatusExt as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use clap::{Parser, Subcommand};
use lava_dlm_ll::LockMode;

use crate::client::{Client, ClientError, Reply};

/// How often `mxfsctl lock` looks for a lost-lock notification while its command runs.
const LOST_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// mxfsctl's command line.
#[derive(Clone, Debug, Parser)]
#[command(name = "mxfsctl", version, about = "Lock, and look at, mxfsd's distributed locks")]
pub struct CtlArgs {
    /// Folder holding lsf.conf (default: $LSF_ENVDIR, else /etc).
    #[arg(short = 'd', long, value_name = "DIR", global = true)]
    pub envdir: Option<PathBuf>,
    /// mxfsd's client socket (default: from lsf.conf).
    #[arg(long, value_name = "PATH", global = true)]
    pub socket: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: CtlCommand,
}

/// mxfsctl's subcommands.
#[derive(Clone, Debug, Subcommand)]
pub enum CtlCommand {
    /// Hold a lock while a command runs.
    Lock {
        /// The resource name.
        resource: String,
        /// NL, CR, CW, PR, PW or EX.
        mode: String,
        /// Fail at once instead of waiting when the lock is held in a conflicting mode.
        #[arg(long)]
        noqueue: bool,
        /// Give up after this many seconds of waiting.
        #[arg(long, value_name = "S")]
        timeout: Option<f64>,
        /// The command to run, after `--`.
        #[arg(required = true, last = true)]
        command: Vec<String>,
    },
    /// Show the master, the nodes, epochs and leases, the peers' liveness.
    Status,
    /// Show holders and waiters.
    Locks {
        /// Only this resource.
        resource: Option<String>,
    },
}

/// Runs mxfsctl with this process's arguments.
pub fn main() -> ExitCode {
    let args = CtlArgs::parse();
    match run(args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("mxfsctl: {message}");
            ExitCode::FAILURE
        }
    }
}

fn connect(args: &CtlArgs) -> Result<Client, String> {
    let path = match &args.socket {
        Some(path) => path.clone(),
        None => {
            let envdir = args.envdir.clone().unwrap_or_else(lava_conf::envdir_from_env);
            let conf = lava_conf::LsfConf::read(&envdir).map_err(|error| error.to_string())?;
            crate::socket_path(&conf)
        }
    };
    Client::connect(&path).map_err(|error| format!("{error}: is mxfsd running on this host?"))
}

fn run(args: CtlArgs) -> Result<ExitCode, String> {
    let mut client = connect(&args)?;
    match args.command {
        CtlCommand::Lock { resource, mode, noqueue, timeout, command } => {
            let Some(mode) = LockMode::parse(&mode) else {
                return Err(format!("{mode}: not a lock mode (NL, CR, CW, PR, PW or EX)"));
            };
            let timeout = match timeout {
                Some(seconds) if seconds.is_finite() && seconds > 0.0 => {
                    Some(Duration::from_secs_f64(seconds))
                }
                Some(seconds) => {
                    return Err(format!("--timeout {seconds}: not a positive number of seconds"));
                }
                None => None,
            };
            let grant =
                client.lock_until_released(&resource, mode, noqueue, timeout).map_err(
                    |error| match error {
                        ClientError::Refused { message, .. } => format!("{resource}: {message}"),
                        other => format!("{resource}: {other}"),
                    },
                )?;
            let mut child = Command::new(&command[0])
                .args(&command[1..])
                .spawn()
                .map_err(|error| format!("{}: {error}", command[0]))?;
            // While the command runs, watch for the lock being lost (the master
            // declared this node dead, or mxfsd went away): the command is then no
            // longer protected, so it is stopped at once rather than left running
            // unguarded, and mxfsctl fails.
            let status = loop {
                if let Some(status) = child.try_wait().map_err(|error| format!("{}: {error}", command[0]))? {
                    break status;
                }
                let lost = match client.next_notification(LOST_POLL_INTERVAL) {
                    Ok(Some(Reply::Lost { handle })) => (handle == grant.handle).then(|| "lost".to_owned()),
                    Ok(_) => None,
                    Err(error) => Some(format!("no longer guaranteed ({error})")),
                };
                if let Some(why) = lost {
                    eprintln!("mxfsctl: {resource}: lock {why}; stopping {}", command[0]);
                    let _already_gone = child.kill();
                    let _reaped = child.wait();
                    return Ok(ExitCode::FAILURE);
                }
            };
            // Releasing explicitly reports a lock lost meanwhile; closing the socket would do too.
            if let Err(error) = client.unlock(grant.handle) {
                eprintln!("mxfsctl: {resource}: release: {error}");
            }
            let code = match (status.code(), status.signal()) {
                (Some(code), _) => code,
                (None, Some(signal)) => 128 + signal,
                (None, None) => 1,
            };
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
        }
        CtlCommand::Status => {
            print!("{}", client.status().map_err(|error| error.to_string())?);
            Ok(ExitCode::SUCCESS)
        }
        CtlCommand::Locks { resource } => {
            print!("{}", client.locks(resource.as_deref()).map_err(|error| error.to_string())?);
            Ok(ExitCode::SUCCESS)
        }
    }
}
