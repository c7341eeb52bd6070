//! Starting mbatchd: configuration, key, logging, detaching, the event log
//! and its replay, the listener, the port file; then the event loop.
//!
//! # Start-up order
//! 1. Load the configuration (`--envdir`, else `LSF_ENVDIR`, else /etc) and
//!    map it ([`crate::config`]); load the cluster key (`LAVA_CLUSTER_KEY_FILE`),
//!    refusing a missing or group/other-accessible file with an error naming it.
//!    These run before detaching, so their errors reach the terminal.
//! 2. Without `--foreground`, start again in the background (own process
//!    group, standard error to `LSF_LOGDIR/mbatchd.log.<master host>`) and return.
//! 3. Open `lsb.events` in `$LSB_SHAREDIR/<cluster>/logdir` (folders created
//!    0700) and rebuild the state from it (contract step 1).
//! 4. Bind the listener (SO_REUSEADDR, so a restart rebinds at once), register
//!    the signal handlers, step `Input::Start`, and only then write
//!    `--port-file`: whoever reads it can connect and be served.
//! 5. Run the event loop until a stop signal or a failure; after `badmin
//!    mbdrestart` the loop stops cleanly and the program `exec`s itself with the
//!    same arguments (same pid), starting again at step 1.
//!
//! # Under systemd (`Type=notify`)
//! When `NOTIFY_SOCKET` is set ([`lava_shell::readiness`]), mbatchd says `STATUS=`
//! while it replays the event log, `READY=1` at the moment it writes
//! `--port-file` (step 4: it serves), `WATCHDOG=1` from the event loop's
//! one-second tick at half of `WatchdogSec=` (a wedged loop stops petting and
//! systemd restarts it), `RELOADING=1` then `READY=1` around a SIGHUP, and
//! `STOPPING=1` on SIGTERM or SIGINT. Run it with `--foreground` there: the
//! detached child would not be the unit's main process.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use lava_conf::ClusterConfig;
use lava_eventlog::EventLog;
use lava_net::{AuthConfig, Authenticator, ClusterKey, KeyRing};
use lava_shell::readiness::Readiness;
use lava_shell::signals::Signals;
use lava_shell::startup::{self, PathError};
use tokio::sync::watch;

use crate::config::ShellConfig;
use crate::conn::Shared;
use crate::counters::Counters;
use crate::journal::{self, Journal, Recovered, SwitchRule};
use crate::logging::{self, LogFile};
use crate::shell::Shell;
use crate::{Args, ShellError};

/// Time given to the runtime's helper threads to end once the loop returned.
const RUNTIME_SHUTDOWN_MS: u64 = 5_000;

/// The whole program: parse the command line, [`run`], report an error.
pub fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            if tracing::dispatcher::has_been_set() {
                tracing::error!("{error}");
            } else {
                eprintln!("mbatchd: {error}");
            }
            ExitCode::FAILURE
        }
    }
}

/// Starts mbatchd as `args` say and serves until stopped; see the module doc.
pub fn run(args: Args) -> Result<(), ShellError> {
    let envdir = envdir(&args);
    let conf = ClusterConfig::load(&envdir)?;
    let config = ShellConfig::from_cluster(&conf, args.port, args.host.as_deref())?;
    if let Some(from) = &args.seed_from {
        let Some(setting) = &config.replication else {
            return Err(ShellError::Config(format!(
                "--seed-from {}: only a master candidate has a replicated log to seed (LSF_MASTER_LIST names fewer \
                 than 2 hosts)",
                from.display()
            )));
        };
        let said = crate::replicated::seed(setting, config.mbd.clone(), from)?;
        println!("{said}");
        return Ok(());
    }
    let key = ClusterKey::load(&config.key_file)?;
    if !args.foreground {
        return detach(&args, &config);
    }
    let log_file = logging::init(config.log_mask, args.log_file.as_deref())?;
    for warning in conf.unimplemented_warnings() {
        tracing::warn!("{warning}");
    }
    tracing::info!(
        envdir = %envdir.display(),
        cluster = %config.mbd.cluster_name,
        master = %config.mbd.master_host,
        key_id = %key.id(),
        "mbatchd starting"
    );
    let readiness = Readiness::from_env();
    if let Some(interval) = readiness.watchdog_interval() {
        tracing::info!(interval_ms = interval.as_millis(), "systemd watchdog armed");
    }
    // Credentials are taken only if made for this cluster's mbatchd.
    let audience = lava_net::Audience::new(lava_net::Audience::MBATCHD, config.mbd.cluster_name.as_str());
    let auth =
        Arc::new(Authenticator::new(KeyRing::new(&key), AuthConfig::default()).with_audience(audience));
    // The candidates' link seals daemon frames, which carry no user's credential.
    let link_auth = Arc::new(Authenticator::new(KeyRing::new(&key), AuthConfig::default()));
    let state_dir = state_dir(&config);
    readiness.status(&format!("replaying the event log in {}", state_dir.display()));
    let log = journal::open(&state_dir)?;
    let recovered = journal::recover(&log, config.mbd.clone())?;
    let rebuilt = crate::acct::reconcile(&state_dir, &recovered.mbd.finished_acct_records())
        .map_err(PathError::at("write lsb.acct in", &state_dir))?;
    if rebuilt > 0 {
        tracing::warn!(
            rebuilt,
            "lsb.acct lacked records of finished jobs (mbatchd stopped before writing them): appended"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| ShellError::Runtime(format!("cannot start the async runtime: {error}")))?;
    let result =
        runtime.block_on(serve(&args, &config, [auth, link_auth], log, recovered, log_file, readiness));
    runtime.shutdown_timeout(Duration::from_millis(RUNTIME_SHUTDOWN_MS));
    match result? {
        Some((port, leader_seen_at_ms)) => Err(restart(&args, port, leader_seen_at_ms)),
        None => Ok(()),
    }
}

/// `badmin mbdrestart`, once the loop stopped cleanly and the log is closed: the same
/// program replaces this one (same pid, so a supervisor or systemd sees no exit),
/// with the same arguments but in the foreground (this process already is where it
/// runs) and on the port it was bound to (so `--port 0` keeps its port); it replays
/// the log as any start does. Returns only on failure.
fn restart(args: &Args, port: u16, leader_seen_at_ms: Option<u64>) -> ShellError {
    tracing::info!("badmin mbdrestart: starting mbatchd again");
    let mut again: Vec<OsString> = vec!["--foreground".into(), "--port".into(), port.to_string().into()];
    again.extend(["--snapshot-events".into(), args.snapshot_events.to_string().into()]);
    if let Some(ms) = leader_seen_at_ms {
        again.extend(["--leader-seen-at-ms".into(), ms.to_string().into()]);
    }
    if let Some(host) = &args.host {
        again.extend(["--host".into(), host.into()]);
    }
    for (flag, path) in
        [("--envdir", &args.envdir), ("--port-file", &args.port_file), ("--log-file", &args.log_file)]
    {
        if let Some(path) = path {
            again.extend([OsString::from(flag), path.clone().into_os_string()]);
        }
    }
    let error = match std::env::current_exe() {
        Ok(exe) => Command::new(exe).args(again).exec(),
        Err(error) => error,
    };
    ShellError::Runtime(format!("badmin mbdrestart: cannot start mbatchd again: {error}"))
}

/// Where this mbatchd keeps `lsb.events`, `lsb.acct` and the text view: the log folder,
/// or on a master candidate its own folder under it (crate::replicated).
fn state_dir(config: &ShellConfig) -> PathBuf {
    match &config.replication {
        Some(replication) => replication.dir.clone(),
        None => config.event_log_dir.clone(),
    }
}

/// The configuration folder: `--envdir`, else `LSF_ENVDIR`, else /etc.
fn envdir(args: &Args) -> std::path::PathBuf {
    args.envdir.clone().unwrap_or_else(lava_conf::envdir_from_env)
}

async fn serve(
    args: &Args,
    config: &ShellConfig,
    [auth, link_auth]: [Arc<Authenticator>; 2],
    log: Arc<EventLog>,
    recovered: Recovered,
    log_file: Option<LogFile>,
    readiness: Readiness,
) -> Result<Option<(u16, Option<u64>)>, ShellError> {
    if let Some(path) = &args.port_file {
        startup::remove_stale(path)?;
    }
    let addr = SocketAddr::new(config.listen_addr, config.port);
    // Every master candidate listens on the port they share; one that does not lead
    // answers each request with the leader's name (conn::refuse), so clients find it.
    if config.replication.is_some() && config.port == 0 {
        return Err(ShellError::Config(
            "a master candidate needs a fixed LSB_MBD_PORT (port 0 is for a single master)".into(),
        ));
    }
    let (listener, bound) = startup::listen(addr)?;
    let signals = Signals::register()
        .map_err(|error| ShellError::Runtime(format!("cannot handle signals: {error}")))?;
    let hosts = config.mbd.hosts.iter().map(|host| host.name.clone()).collect();
    let counters = Arc::new(Counters::default());
    let history_log = Arc::clone(&log);
    let view_log = Arc::clone(&log);
    let rule = SwitchRule { max_job_num: config.max_job_num, snapshot_events: args.snapshot_events };
    let journal = Journal::new(log, rule, recovered.backlog);
    let state_dir = state_dir(config);
    let space = lava_shell::space::Space::open(&state_dir, config.state_reserve_bytes)
        .map_err(PathError::at("watch the free space of", &state_dir))?;
    let (repl, mbd) = match &config.replication {
        Some(setting) => {
            let (repl, mbd) = crate::replicated::Replicated::open(
                setting,
                config.mbd.clone(),
                link_auth,
                args.snapshot_events,
                args.leader_seen_at_ms,
                &journal,
            )?;
            (Some(repl), mbd)
        }
        None => (None, recovered.mbd),
    };
    let mut shell = Shell::new(mbd, journal, space, Some(listener), addr, |events| Shared {
        auth,
        counters,
        hosts,
        events,
        stopping: watch::channel(false).0,
        log: history_log,
    });
    shell.reconfig_from(envdir(args));
    if let Some(repl) = repl {
        shell.replicate(repl);
    }
    let acct = crate::acct::AcctLog::start(state_dir.clone(), config.acct_rule)
        .map_err(PathError::at("start the writer of lsb.acct in", &state_dir))?;
    shell.account_to(acct);
    let view = crate::events_view::EventsView::start(state_dir.clone(), view_log, config.max_job_num)
        .map_err(PathError::at("start the lsb.events text view in", &state_dir))?;
    shell.view_events(view);
    shell.serve_metrics(config.metrics)?;
    shell.start()?;
    match &config.lim {
        Some(target) => {
            let hosts = config.mbd.hosts.iter().map(|host| host.name.clone()).collect();
            shell.follow_lim(crate::lim_client::spawn(target.clone(), hosts));
        }
        None => tracing::warn!("no master lim configured: every host counts as available"),
    }
    if let Some(path) = &args.port_file {
        startup::write_atomically(path, &format!("{}\n", bound.port()))?;
    }
    tracing::info!(%bound, "mbatchd ready");
    readiness.ready(&format!("serving on {bound}"));
    let restart = shell.run(signals, log_file, readiness).await?;
    Ok(restart.map(|leader_seen_at_ms| (bound.port(), leader_seen_at_ms)))
}

/// Starts this program again with `--foreground`, in its own process group,
/// logging to `LSF_LOGDIR/mbatchd.log.<master host>` (`--log-file`, with
/// standard error there too for what is written before the logger starts or
/// by a panic; nowhere without `LSF_LOGDIR`), and returns.
fn detach(args: &Args, config: &ShellConfig) -> Result<(), ShellError> {
    let exe = std::env::current_exe().map_err(|source| {
        PathError::new("find the mbatchd executable", PathBuf::from("/proc/self/exe"), source)
    })?;
    let log_path = match &args.log_file {
        Some(path) => Some(path.clone()),
        None => config
            .daemon_log_dir
            .as_ref()
            .map(|dir| dir.join(format!("mbatchd.log.{}", config.mbd.master_host))),
    };
    let stderr = match &log_path {
        Some(path) => {
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir).map_err(PathError::at("create the log folder", dir))?;
            }
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|source| PathError::new("open the log file", path.clone(), source))?;
            Stdio::from(file)
        }
        None => Stdio::null(),
    };
    let mut command = Command::new(&exe);
    command.args(std::env::args_os().skip(1)).arg("--foreground");
    if let (Some(path), None) = (&log_path, &args.log_file) {
        command.arg("--log-file").arg(path);
    }
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .process_group(0)
        .spawn()
        .map_err(|source| PathError::new("start mbatchd in the background from", exe, source))?;
    match &log_path {
        Some(path) => eprintln!(
            "mbatchd: running in the background as pid {}, logging to {}",
            child.id(),
            path.display()
        ),
        None => eprintln!(
            "mbatchd: running in the background as pid {}; LSF_LOGDIR is not set, so its log is discarded \
             (use --foreground to see it)",
            child.id()
        ),
    }
    Ok(())
}
