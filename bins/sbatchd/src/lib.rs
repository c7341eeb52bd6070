//! lava-sbatchd: sbatchd, the execution daemon's I/O shell around `lava-sbd`, and the
//! per-job shepherd.
//!
//! sbatchd owns execution reality on one host: it receives jobs from mbatchd, starts each
//! under a shepherd process, and reports pid, execution metadata and exit, resending until
//! mbatchd acknowledges. Every decision is `lava-sbd`'s; this crate follows that crate's
//! shell contract literally: decode (lava-batch-wire) → validate (lava-batch-ll) → step →
//! carry out the effects in order, every Persist durable before anything that follows it.
//! It also serves the local credential socket through which user commands prove who they
//! are.
//!
//! It never decides a job's fate itself (no state enum, no resend timer of its own), never
//! trusts a uid a client states (SO_PEERCRED only), and never runs a job whose pid was not
//! durably recorded first.
//!
//! # Running it
//! `sbatchd [--envdir DIR] [--host NAME] [--ready-file PATH]`, as root. The configuration is
//! read from `DIR` (else `LSF_ENVDIR`, else /etc). The host name is `--host`, else
//! `LAVA_HOST`, else the short host name, and must be listed in lsf.cluster. mbatchd runs
//! on the first server host of lsf.cluster, at its `LAVA_ADDR` (else its resolved name) and
//! `LSB_MBD_PORT`. The ready file (the daemon's pid) is written once the credential socket
//! listens, before mbatchd is reachable. SIGTERM or SIGINT stops sbatchd; jobs keep running
//! under their shepherds and a later sbatchd adopts them (the shepherd zygote, sbatchd's
//! only child process, sees sbatchd's end of their socket close and exits by itself). SIGHUP reloads nothing (it is
//! logged; see [`daemon`] for what sbatchd tells systemd). A systemd unit must therefore say
//! `KillMode=process` (as LavaLite's does), or stopping the service kills every job.
//!
//! # On disk
//! See [`layout`]: `<work_dir>/sbd/<host>/state/<jobfile>/{record,record.first,record.noted,pid,exit}`
//! (new jobs' folders made ahead of need as `state/.spare.<n>/`, [`spares`]) and
//! `<work_dir>/sbd/<host>/jobs/<jobfile>/job.sh` ([`jobdirs`]); the record format is in
//! [`store`], the handoff files' in [`handoff`].
//!
//! # The shepherd
//! One per job, in a new session of its own, forked by sbatchd's shepherd zygote (one
//! long-lived `lava-shepherd --zygote` per sbatchd, the small program installed next to
//! sbatchd; see [`zygote`]): see [`shepherd`] for its protocol with sbatchd, and [`launch`] for
//! the job's process, environment and standard files (output without `-o` goes to
//! `<home>/.lsbatch/<jobfile>.out` and `.err`). The zygote exits when sbatchd does; the
//! shepherds do not.
//!
//! # Restart and adoption
//! At start every record is loaded (a damaged one stops the daemon, naming the file), then
//! `lava_sbd::Sbd::restore`. For a job whose pid was not recorded: a live shepherd (its lock
//! is held) is watched until it writes `pid`; otherwise `pid` present → `Spawned` (then its
//! exit), `exit` with a failure → `SpawnFailed`, no trace → `NotLaunched`. For a running job
//! the live shepherd is re-attached (pidfd), or its `exit` file is read. A shepherd gone
//! without an `exit` file (killed with SIGKILL, or the machine rebooted) makes the job
//! *lost*: it is reported as killed by SIGKILL ([`LOST_WAIT_STATUS`], no resource usage),
//! and its process group is killed first when its leader is provably still the job's
//! process (same boot id and start time), so the report is true.
//!
//! # Signals
//! Stop, continue, a signal by number and each step of a kill go to the job's whole process
//! group (`killpg`). When the leader of a job being killed (bkill, run or memory limit)
//! ends, whatever is left of its group is killed with SIGKILL, so that killing a job kills
//! all of it, including children that ignore SIGINT as a shell's background jobs do.
//! Resident memory of jobs with `bsub -M` is sampled every tick for the logic's limit.
//!
//! # Map
//! [`daemon`] (start-up, event loop, effect executor), [`link`] (mbatchd channel),
//! [`credential`] (local socket and its status query), [`status`] (the status counters), [`metrics`] (the same under Prometheus names, `LAVA_SBD_METRICS_PORT`), [`store`] (records, group commit), [`spares`] (job folders made ahead of need), [`jobdirs`] (the job folders under `jobs/`), [`launch`] (job script,
//! plan, shepherd start), [`shepherd`], [`zygote`] (the process shepherds are forked from), [`handoff`] (file formats), [`layout`] (paths,
//! durable writes), [`procfs`] (process identity and memory), [`peek`] (`bpeek`'s
//! SBD_PEEK, answered outside the logic), [`interactive`] (`bsub -I`'s attach port and
//! relay) and [`relay`] (the shepherd's side of it), [`tasks`] (`blaunch`'s grants, task
//! port and task shepherd), [`sys`] (the only unsafe code).

#![deny(missing_docs)]

pub mod credential;
pub mod daemon;
pub mod handoff;
pub mod interactive;
pub mod jobdirs;
pub mod launch;
pub mod layout;
pub mod link;
pub mod metrics;
pub mod peek;
pub mod procfs;
pub mod relay;
pub mod shepherd;
pub mod spares;
pub mod status;
pub mod store;
pub mod sys;
pub mod tasks;
pub mod zygote;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Wait status reported for a lost job (shepherd gone without recording the end): killed
/// by SIGKILL, as `waitpid` would report it.
pub const LOST_WAIT_STATUS: i32 = libc::SIGKILL;

/// Why sbatchd could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration files.
    #[error(transparent)]
    Config(#[from] lava_conf::ConfError),
    /// The cluster key file.
    #[error(transparent)]
    Key(#[from] lava_net::KeyError),
    /// This host is not one of the cluster's.
    #[error("host `{host}` is not listed in {path}; give the right one with --host or LAVA_HOST")]
    HostNotInCluster {
        /// The name this sbatchd would use.
        host: String,
        /// The lsf.cluster file.
        path: PathBuf,
    },
    /// Another sbatchd serves this host.
    #[error("another sbatchd holds {path}: one sbatchd per host")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// A job record that cannot be read back.
    #[error("job record {path}: {problem}")]
    Record {
        /// The record file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A file or system operation failed.
    #[error("{path}: {source}")]
    Io {
        /// What it was about.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Anything else, said in a sentence.
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// Whether a write failed because the file system (or a quota) is full: sbatchd waits
    /// for space then, instead of stopping.
    pub fn is_no_space(&self) -> bool {
        matches!(self, Error::Io { source, .. } if lava_shell::space::is_full(source))
    }
}

/// The command line.
#[derive(Debug, Parser)]
#[command(name = "sbatchd", version, about = "LavaCore sbatchd: runs the cluster's jobs on this host")]
pub struct Args {
    /// Folder holding lsf.conf (default: $LSF_ENVDIR, else /etc).
    #[arg(long, value_name = "DIR")]
    pub envdir: Option<PathBuf>,
    /// This host's name as lsf.cluster lists it (default: $LAVA_HOST, else the short host name).
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// File written (with sbatchd's pid) once the credential socket listens.
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
}

/// The whole program: `main` of the `sbatchd` binary.
pub fn main() -> ExitCode {
    let args = Args::parse();
    let options = daemon::Options { envdir: args.envdir, host: args.host, ready_file: args.ready_file };
    match daemon::run(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sbatchd: {err}");
            ExitCode::FAILURE
        }
    }
}
