//! The command line: `mbatchd [-d|--envdir DIR] [--host NAME] [--port PORT] [--port-file PATH]
//! [--foreground] [--log-file PATH] [--snapshot-events N] [--seed-from DIR]`.
//!
//! Everything else comes from the configuration files (`lsf.conf` and the
//! files it names), as for LSF's mbatchd; the flags only say where those are
//! and what a test or a supervisor needs to override.

use std::path::PathBuf;

use clap::Parser;

/// Events between two snapshots of the state, unless `--snapshot-events` says otherwise.
pub const SNAPSHOT_EVENTS_DEFAULT: u64 = 100_000;

/// mbatchd's command line.
#[derive(Clone, Debug, Parser)]
#[command(name = "mbatchd", version, about = "LavaCore's master batch daemon: scheduler and state authority")]
pub struct Args {
    /// Folder holding lsf.conf (default: $LSF_ENVDIR, else /etc).
    #[arg(short = 'd', long, value_name = "DIR")]
    pub envdir: Option<PathBuf>,
    /// The master candidate this mbatchd runs as (one of lsf.conf's LSF_MASTER_LIST; default:
    /// the candidate named like this machine, or the only one).
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// TCP port to listen on instead of lsf.conf's LSB_MBD_PORT; 0 lets the
    /// kernel choose one (read it from --port-file).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Once ready to serve, write the bound TCP port (one decimal line) to
    /// this file, atomically (temporary file, then rename).
    #[arg(long, value_name = "PATH")]
    pub port_file: Option<PathBuf>,
    /// Stay attached to the terminal and log to standard error; without it,
    /// mbatchd starts itself again in the background, logging to
    /// LSF_LOGDIR/mbatchd.log.HOST.
    #[arg(long)]
    pub foreground: bool,
    /// Log to this file (appending) instead of standard error; SIGHUP reopens
    /// it, so that logrotate can move it away.
    #[arg(long, value_name = "PATH")]
    pub log_file: Option<PathBuf>,
    /// Write a snapshot of the state to the event log's folder after this many events,
    /// besides after lsb.params' MAX_JOB_NUM job finishes (whichever comes first).
    #[arg(long, value_name = "N", default_value_t = SNAPSHOT_EVENTS_DEFAULT,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub snapshot_events: u64,
    /// On a master candidate whose replicated log is empty: make the state the event log in
    /// DIR (a single master's logdir) replays to this candidate's log, then exit. Run it on
    /// every candidate, from the same lsb.events, before any of them starts
    /// (docs/failover.md, "Moving a single master to candidates").
    #[arg(long, value_name = "DIR")]
    pub seed_from: Option<PathBuf>,
    /// Given by mbatchd to itself when it starts again (`badmin mbdrestart`, a master
    /// candidate deposed): when the process before last knew a master, in milliseconds since
    /// the epoch, for the stale answers' "last in contact with a master".
    #[arg(long, value_name = "MS", hide = true)]
    pub leader_seen_at_ms: Option<u64>,
}
