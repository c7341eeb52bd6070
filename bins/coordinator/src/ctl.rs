//! `coordctl`: the command-line client of the coordinator.
//!
//! ```text
//! coordctl [--envdir DIR] [--addr HOST:PORT] submit [--id HEX] [--file F | -]   # prints the task id
//! coordctl lease --worker NAME [--wait SECS]     # "TASK LEASE EXPIRES_AT_MS" line, then the payload
//! coordctl heartbeat TASK LEASE                  # prints the new expiry (ms since the epoch)
//! coordctl complete TASK LEASE
//! coordctl fail TASK LEASE
//! coordctl status [TASK]                       # without TASK: counts by state, the master
//!                                              # candidates' roles (if several), then Counters:
//! coordctl workers
//! coordctl whoami                                # the user the coordinator takes us for
//! ```
//!
//! `submit` sends the task under a submission id (`--id`, else 128 random bits chosen
//! once) and, while no answer comes, sends it again under the same id for up to
//! `LAVA_RETRY_SECS` seconds (60 by default; 0: one attempt), across candidates: the task
//! is created once (docs/protocols/coordinator.md, "Submission ids").
//!
//! Exit status: 0 on success; 1 when the coordinator refused the request or
//! could not be reached (the reason on standard error); 3 when `lease` got no
//! task within `--wait`. `lease` writes the payload's bytes unchanged after
//! its first line, so a shell worker reads the line, then the rest.
//! Every connection is authenticated with a credential from the local
//! sbatchd (`LAVA_CMD_SOCKET`), so any user of a cluster host may run it;
//! the cluster key is never read (see the crate doc, Authentication).
//!
//! A hidden `work` subcommand is a whole worker loop in one process, for the
//! integration tests: it pulls, heartbeats once, completes (or fails every
//! `--fail-every`-th task), and appends `TASK LEASE STATE` to `--record` for
//! each outcome the coordinator acknowledged; it reconnects while the
//! coordinator is away (up to `--retry-secs`) and ends after `--idle` seconds
//! without a task.

use std::io::{self, Read, Write};

use lava_coord_wire as wire;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use lava_coord_wire::task_state;

use crate::client::{self, Client, ClientError, Endpoint, Worker};

/// How long `submit` keeps sending its submission again while no answer comes, unless
/// `LAVA_RETRY_SECS` says otherwise.
pub const SUBMIT_RETRY_SECS_DEFAULT: u64 = 60;

/// `--id`: 1 to 32 hexadecimal digits (dashes ignored), not all zero.
pub fn parse_submission_id(text: &str) -> Result<wire::SubmissionId, String> {
    let digits: String = text.chars().filter(|c| *c != '-').collect();
    if digits.is_empty() || digits.len() > 32 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("{text:?} is not 1 to 32 hexadecimal digits"));
    }
    let value = u128::from_str_radix(&digits, 16).map_err(|error| format!("{text:?}: {error}"))?;
    if value == 0 {
        return Err("a submission id must not be 0".to_owned());
    }
    Ok(wire::SubmissionId { high: (value >> 64) as u64, low: value as u64 })
}

/// `LAVA_RETRY_SECS` (whole seconds), else [`SUBMIT_RETRY_SECS_DEFAULT`].
fn retry_period() -> Result<Duration, ClientError> {
    match std::env::var("LAVA_RETRY_SECS") {
        Err(_) => Ok(Duration::from_secs(SUBMIT_RETRY_SECS_DEFAULT)),
        Ok(text) => text.trim().parse::<u64>().map(Duration::from_secs).map_err(|_| {
            ClientError::Config(format!("LAVA_RETRY_SECS={text:?} is not a whole number of seconds"))
        }),
    }
}

/// Exit status of `lease` when no task came.
pub const EXIT_NO_TASK: u8 = 3;

/// coordctl's command line.
#[derive(Debug, Parser)]
#[command(name = "coordctl", version, about = "Talk to the LavaCore coordinator")]
pub struct CtlArgs {
    /// Folder holding lsf.conf (default: $LSF_ENVDIR, else /etc).
    #[arg(short = 'd', long, value_name = "DIR", global = true)]
    pub envdir: Option<PathBuf>,
    /// The coordinator's address instead of the configuration's.
    #[arg(long, value_name = "HOST:PORT", global = true)]
    pub addr: Option<SocketAddr>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Submit a task whose payload is the file's bytes, or standard input ("-", the default).
    Submit {
        /// The submission id: 1 to 32 hexadecimal digits (dashes ignored, so a UUID will
        /// do), not all zero. Running submit again with the same id and payload answers
        /// the task the first run created instead of creating another. Default: 128
        /// random bits, kept across this run's retries.
        #[arg(long, value_name = "HEX", value_parser = parse_submission_id)]
        id: Option<wire::SubmissionId>,
        /// The payload file; "-" for standard input.
        #[arg(long, short = 'f', value_name = "F")]
        file: Option<PathBuf>,
        /// "-": read standard input.
        #[arg(value_name = "-")]
        dash: Option<String>,
    },
    /// Pull a task for a worker.
    Lease {
        /// The worker's name.
        #[arg(long, value_name = "NAME")]
        worker: String,
        /// Keep asking for this many seconds while nothing is schedulable.
        #[arg(long, value_name = "SECS", default_value_t = 0.0)]
        wait: f64,
    },
    /// Extend a lease.
    Heartbeat {
        /// The task.
        task: u64,
        /// The lease.
        lease: u64,
    },
    /// Complete a task under its lease.
    Complete {
        /// The task.
        task: u64,
        /// The lease.
        lease: u64,
    },
    /// Fail a task under its lease.
    Fail {
        /// The task.
        task: u64,
        /// The lease.
        lease: u64,
    },
    /// Counts by state, or one task.
    Status {
        /// The task.
        task: Option<u64>,
    },
    /// The workers seen and their valid leases.
    Workers,
    /// The user name and uid the coordinator takes this caller for.
    Whoami,
    /// A worker loop recording acknowledged outcomes (for tests).
    #[command(hide = true)]
    Work {
        /// The worker's name.
        #[arg(long, value_name = "NAME")]
        worker: String,
        /// Append `TASK LEASE STATE` here for each acknowledged outcome.
        #[arg(long, value_name = "FILE")]
        record: PathBuf,
        /// Stop after this many seconds without a task.
        #[arg(long, value_name = "SECS", default_value_t = 2.0)]
        idle: f64,
        /// Keep reconnecting this long while the coordinator is away.
        #[arg(long, value_name = "SECS", default_value_t = 60.0)]
        retry_secs: f64,
        /// Fail (instead of complete) the tasks whose id is a multiple of N (0: never).
        #[arg(long, value_name = "N", default_value_t = 0)]
        fail_every: u64,
    },
}

/// The whole program.
pub fn main() -> ExitCode {
    let args = CtlArgs::parse();
    match run(args) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("coordctl: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: CtlArgs) -> Result<ExitCode, ClientError> {
    let mut endpoint = Endpoint::from_config(args.envdir.as_deref())?;
    if let Some(addr) = args.addr {
        // That address alone, also when the configuration names master candidates.
        endpoint = Endpoint::new(addr, &endpoint.cmd_socket, &endpoint.cluster);
    }
    let mut out = io::stdout().lock();
    let write_error = |error: io::Error| ClientError::Config(format!("standard output: {error}"));
    match args.command {
        Command::Submit { id, file, dash } => {
            let payload = match (file, dash) {
                (Some(path), _) if path.as_os_str() != "-" => std::fs::read(&path).map_err(|error| {
                    ClientError::Config(format!("cannot read {}: {error}", path.display()))
                })?,
                (_, Some(dash)) if dash != "-" => {
                    return Err(ClientError::Config(format!(
                        "unexpected argument {dash:?}; use --file F or -"
                    )));
                }
                _ => {
                    let mut bytes = Vec::new();
                    io::stdin()
                        .read_to_end(&mut bytes)
                        .map_err(|error| ClientError::Config(format!("standard input: {error}")))?;
                    bytes
                }
            };
            let submission = match id {
                Some(id) => id,
                None => client::new_submission_id()?,
            };
            let reply = client::submit_once(&endpoint, submission, &payload, retry_period()?)?;
            if reply.repeated {
                eprintln!("coordctl: submission {submission} had already created task {}", reply.task_id);
            }
            writeln!(out, "{}", reply.task_id).map_err(write_error)?;
        }
        Command::Lease { worker, wait } => {
            let wait = Duration::try_from_secs_f64(wait.max(0.0))
                .map_err(|error| ClientError::Config(format!("--wait: {error}")))?;
            let mut worker = Worker::connect(&endpoint, &worker)?;
            match worker.pull(wait)? {
                Some(lease) => {
                    writeln!(out, "{} {} {}", lease.task_id, lease.lease_id, lease.expires_at_ms)
                        .and_then(|()| out.write_all(&lease.payload))
                        .and_then(|()| out.flush())
                        .map_err(write_error)?;
                }
                None => {
                    eprintln!("coordctl: no task to lease");
                    return Ok(ExitCode::from(EXIT_NO_TASK));
                }
            }
        }
        Command::Heartbeat { task, lease } => {
            let expires_at_ms = Client::connect(&endpoint)?.heartbeat(task, lease)?;
            writeln!(out, "{expires_at_ms}").map_err(write_error)?;
        }
        Command::Complete { task, lease } => {
            let reply = Client::connect(&endpoint)?.complete(task, lease)?;
            writeln!(out, "task {} {}", reply.task_id, task_state::name(reply.state)).map_err(write_error)?;
        }
        Command::Fail { task, lease } => {
            let reply = Client::connect(&endpoint)?.fail(task, lease)?;
            writeln!(out, "task {} {}", reply.task_id, task_state::name(reply.state)).map_err(write_error)?;
        }
        Command::Status { task: Some(task) } => {
            let info = Client::connect(&endpoint)?.task(task)?;
            writeln!(
                out,
                "TASK {} STATE {} LEASE {} WORKER {} EXPIRES_AT_MS {} LEASES {} REFUSED {} PAYLOAD_BYTES {} \
                 OWNER {} OWNER_UID {} HOLDER {}",
                info.task_id,
                task_state::name(info.state),
                info.lease_id,
                if info.worker.is_empty() { "-" } else { &info.worker },
                info.expires_at_ms,
                info.n_leases,
                info.n_refused,
                info.payload_bytes,
                info.owner,
                info.owner_uid,
                if info.holder.is_empty() { "-" } else { &info.holder }
            )
            .map_err(write_error)?;
        }
        Command::Status { task: None } => {
            let mut client = Client::connect(&endpoint)?;
            let counts = client.counts()?;
            writeln!(
                out,
                "WAITING {} LEASED {} COMPLETED {} FAILED {}",
                counts.waiting, counts.leased, counts.completed, counts.failed
            )
            .map_err(write_error)?;
            let counters = client.stats()?;
            write!(out, "{}", candidates_block(&counters)).map_err(write_error)?;
            // After the one-line summary (which scripts read as before): one `name value` line each.
            writeln!(out, "Counters:").map_err(write_error)?;
            for counter in counters {
                writeln!(out, "{} {}", counter.name, counter.value).map_err(write_error)?;
            }
        }
        Command::Workers => {
            let workers = Client::connect(&endpoint)?.workers()?;
            writeln!(out, "{:<24} {:>7} {:>15}", "WORKER", "LEASES", "LAST_SEEN_MS").map_err(write_error)?;
            for worker in workers {
                writeln!(out, "{:<24} {:>7} {:>15}", worker.name, worker.n_leases, worker.last_seen_ms)
                    .map_err(write_error)?;
            }
        }
        Command::Whoami => {
            let client = Client::connect(&endpoint)?;
            let me = client.identity();
            let role = if me.admin { " (cluster administrator)" } else { "" };
            writeln!(out, "{} uid {}{role}", me.user, me.uid).map_err(write_error)?;
        }
        Command::Work { worker, record, idle, retry_secs, fail_every } => {
            let seconds = |what: &str, secs: f64| {
                Duration::try_from_secs_f64(secs.max(0.0))
                    .map_err(|error| ClientError::Config(format!("{what}: {error}")))
            };
            let work = WorkLoop {
                endpoint,
                worker,
                idle: seconds("--idle", idle)?,
                retry: seconds("--retry-secs", retry_secs)?,
                fail_every,
            };
            let n = work.run(&record)?;
            writeln!(out, "{n} outcomes acknowledged").map_err(write_error)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The hidden `work` subcommand; see the module doc.
struct WorkLoop {
    endpoint: Endpoint,
    worker: String,
    idle: Duration,
    retry: Duration,
    fail_every: u64,
}

impl WorkLoop {
    /// A connection, retried every 50 ms while the coordinator is away, up to `retry`.
    fn connect(&self) -> Result<Client, ClientError> {
        let deadline = Instant::now() + self.retry;
        loop {
            match Client::connect(&self.endpoint) {
                Ok(client) => return Ok(client),
                Err(error @ ClientError::Io { .. }) if Instant::now() < deadline => {
                    let _retry = error;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Works until `idle` passes without a task; returns the outcomes acknowledged.
    fn run(&self, record: &Path) -> Result<u64, ClientError> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(record)
            .map_err(|error| ClientError::Config(format!("cannot open {}: {error}", record.display())))?;
        let mut client = self.connect()?;
        let mut last_task = Instant::now();
        let mut n = 0;
        loop {
            let step = self.one(&mut client);
            match step {
                Ok(Some((task, lease, state))) => {
                    last_task = Instant::now();
                    if let Some(state) = state {
                        // Only after the acknowledgement: the record lists what the coordinator confirmed.
                        writeln!(file, "{task} {lease} {}", task_state::name(state))
                            .and_then(|()| file.flush())
                            .map_err(|error| ClientError::Config(format!("{}: {error}", record.display())))?;
                        n += 1;
                    }
                }
                Ok(None) => {
                    if last_task.elapsed() >= self.idle {
                        return Ok(n);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                // The coordinator went away (killed, restarting, a leader deposed: "try
                // again"): whatever was in flight is unknown, so nothing is recorded;
                // reconnect and go on.
                Err(ClientError::Io { .. } | ClientError::Protocol { .. }) => {
                    client = self.connect()?;
                    last_task = Instant::now();
                }
                Err(error) if error.code() == Some(lava_coord_wire::ERR_TRY_AGAIN) => {
                    client = self.connect()?;
                    last_task = Instant::now();
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// One task: lease, heartbeat, outcome. `Ok(None)`: no task; the state is
    /// `None` when the lease was lost on the way.
    fn one(&self, client: &mut Client) -> Result<Option<(u64, u64, Option<u32>)>, ClientError> {
        let Some(grant) = client.lease(&self.worker)? else { return Ok(None) };
        let (task, lease) = (grant.task_id, grant.lease_id);
        let lost = |error: ClientError| match error.code() {
            Some(lava_coord_wire::ERR_LEASE_LOST) => Ok(Some((task, lease, None))),
            _ => Err(error),
        };
        if let Err(error) = client.heartbeat(task, lease) {
            return lost(error);
        }
        let outcome = if self.fail_every > 0 && task % self.fail_every == 0 {
            client.fail(task, lease)
        } else {
            client.complete(task, lease)
        };
        match outcome {
            Ok(reply) => Ok(Some((task, lease, Some(reply.state)))),
            Err(error) => lost(error),
        }
    }
}

/// With master candidates (the leader's `candidate.<rank>.<name>` counters), as `badmin
/// showstatus` shows mbatchd's: the term, the commit index, and each candidate's role and
/// the log index it holds as the leader knows it. Empty for a single coordinator.
fn candidates_block(counters: &[wire::Counter]) -> String {
    let counter = |name: &str| counters.iter().find(|c| c.name == name).map(|c| c.value);
    let candidates: Vec<(u64, &str, u64)> = counters
        .iter()
        .filter_map(|c| {
            let (rank, name) = c.name.strip_prefix("candidate.")?.split_once('.')?;
            Some((rank.parse().ok()?, name, c.value))
        })
        .collect();
    if candidates.is_empty() {
        return String::new();
    }
    let leader = counter("replica.leader").unwrap_or(0);
    let mut out = format!(
        "Master candidates: {} (term {}, commit index {})\n",
        candidates.len(),
        counter("replica.term").unwrap_or(0),
        counter("replica.commit_index").unwrap_or(0),
    );
    for (rank, name, held) in candidates {
        let role = if rank == leader { "leader" } else { "follower" };
        out.push_str(&format!("  {name:<20} {role:<9} log index {held}\n"));
    }
    out
}
