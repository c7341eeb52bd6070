//! The daemon's command line; see the crate doc.

use std::path::PathBuf;

use clap::Parser;

/// Events between two snapshots, unless `--snapshot-events` says otherwise.
pub const SNAPSHOT_EVENTS_DEFAULT: u64 = 100_000;

/// coordinator's command line.
#[derive(Clone, Debug, Parser)]
#[command(name = "coordinator", version, about = "LavaCore's WAL-backed, lease-based task coordinator")]
pub struct Args {
    /// Folder holding lsf.conf (default: $LSF_ENVDIR, else /etc).
    #[arg(short = 'd', long, value_name = "DIR")]
    pub envdir: Option<PathBuf>,
    /// TCP port instead of lsf.conf's LAVA_COORD_PORT; 0 lets the kernel choose.
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// Once serving, write the bound port (one decimal line) here, atomically.
    #[arg(long, value_name = "PATH")]
    pub port_file: Option<PathBuf>,
    /// Once serving, write "ready" here, atomically.
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
    /// Lease duration (and extension by each heartbeat), in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = lava_coord_logic::config::LEASE_DURATION_MS_DEFAULT,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub lease_ms: u64,
    /// Largest task payload accepted, in bytes (at most 4 MiB).
    #[arg(long, value_name = "BYTES", default_value_t = lava_coord_ll::PAYLOAD_BYTES_MAX_DEFAULT,
          value_parser = clap::value_parser!(u32).range(0..=i64::from(crate::codec::PAYLOAD_BYTES_MAX_LIMIT)))]
    pub payload_bytes_max: u32,
    /// With two master candidates or more in LSF_MASTER_LIST: run as this candidate
    /// (default: the candidate named as this machine).
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// Write a snapshot of the state after this many WAL events.
    #[arg(long, value_name = "N", default_value_t = SNAPSHOT_EVENTS_DEFAULT,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub snapshot_events: u64,
    /// Recognise a retried submission's id (coordctl submit, SUBMIT_TASK_ONCE) for at least
    /// this many seconds after its task was created.
    #[arg(long, value_name = "SECS", default_value_t = lava_coord_logic::config::SUBMISSION_WINDOW_MS_DEFAULT / 1000,
          value_parser = clap::value_parser!(u64).range(1..=86_400 * 365))]
    pub submission_window_secs: u64,
    /// Submission ids remembered per user; past it, the user's oldest is forgotten.
    #[arg(long, value_name = "N", default_value_t = lava_coord_logic::config::SUBMISSIONS_PER_OWNER_MAX_DEFAULT,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub submissions_per_user_max: u32,
    /// Submission ids remembered for all users; a new one past it is refused "try again".
    #[arg(long, value_name = "N", default_value_t = lava_coord_logic::config::SUBMISSIONS_MAX_DEFAULT,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub submissions_max: u32,
}
