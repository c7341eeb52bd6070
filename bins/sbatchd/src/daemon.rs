//! The daemon: start-up (configuration, host, key, records, adoption), the one event loop,
//! and the executor of the logic's effects.
//!
//! # The event loop
//! One closed `Event` type: a link event (registered, lost, a message), a shepherd event
//! (its `pid` file is ready, it is gone), a tick. The loop waits for one event, takes
//! whatever else is already queued (up to [`EVENT_BATCH_MAX`]), steps the logic once per
//! event, and then carries out the effects of the whole batch.
//!
//! # Carrying out effects (lava-sbd's shell contract, with group commit)
//! All Persist and Remove effects of a batch are made durable first (the last one per job
//! wins; [`crate::store::Store::commit`]), then the other effects run in their order. So
//! every Persist is durable before any effect that follows it, as the contract requires; a
//! fact may become durable a little earlier than its step's turn, never later, and nothing
//! is ever acted on or reported before the fact it rests on is on disk. Inputs that acting
//! produces (a shepherd that could not be started) are stepped and carried out in turn.
//!
//! A Note (lava-sbd's "Noted facts") is only remembered as the job's latest record; at each
//! tick the noted records are written without fsync ([`crate::store::Store::write_noted`]),
//! and at a clean stop they are made durable. A job that runs undisturbed so costs one
//! durable record (its NEW_JOB) and one plain write, against six durable writes before.
//!
//! # Under systemd (`Type=notify`)
//! When `NOTIFY_SOCKET` is set ([`lava_shell::readiness`]), sbatchd says `READY=1` when it writes
//! its ready file (records loaded, jobs adopted, the credential socket listening; mbatchd may
//! still be unreachable: `STATUS=` follows the link to mbatchd), `WATCHDOG=1` from the loop's one-second tick
//! at half of `WatchdogSec=` (so a wedged loop is restarted by systemd; the jobs keep running
//! under their shepherds and are adopted), and `STOPPING=1` on SIGTERM or SIGINT. SIGHUP
//! reloads nothing: sbatchd logs to standard error (or the journal) and reads its
//! configuration once at start, so it only says so (`RELOADING=1`, then `READY=1`); a changed
//! lsf.conf or lsf.cluster takes a restart, which the running jobs survive.
//!
//! # One thread for the loop and the sockets
//! The loop, the link to mbatchd, the credential socket and the shepherd watchers share the
//! main thread (tokio's current-thread runtime); only the launcher and the spares keeper
//! have threads of their own. A frame or a shepherd's byte so wakes the thread that acts on
//! it, instead of a worker thread that then wakes the loop: on the two-CPU hosts measured,
//! 15 fewer context switches per job and 15 % more jobs per second with two slots
//! (docs/benchmarks.md, "sbatchd on one thread"). A commit's fsyncs hold the sockets for
//! their duration (a millisecond or so): what arrives meanwhile waits in the kernel's
//! buffers, and the loop could not have acted on it before the commit anyway. Each turn
//! yields once before it takes events, so the frames the previous turn handed to the link
//! are written before the next commit.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lava_batch_ll::{JobRef, UserName};
use lava_batch_wire as wire;
use lava_conf::{BaseConfig, LogMask};
use lava_net::{AuthConfig, Authenticator, ClusterKey, KeyRing};
use lava_sbd::{Effect, Execution, Hooks, Input, JobRecord, RunSpec, Sbd, ToMbd, UserInfo};
use lava_shell::readiness::Readiness;
use lava_shell::signals::{ShellSignal, Signals};
use lava_shell::space::{Change, Space};
use tokio::sync::mpsc;

use crate::handoff::{ExitFile, PidFile};
use crate::jobdirs::JobDirs;
use crate::layout::{self, EXIT_FILE, Layout, PID_FILE};
use crate::link::{self, FromMbd, LinkConfig, LinkEvent, MbdHost, OutFrame};
use crate::procfs::{self, boot_id, process_start_ticks};
use crate::shepherd::{ENDED_BYTE, GO_BYTE};
use crate::status::{JobPhases, LoopCounters, SocketCounters, StatusRequest};
use crate::store::{self, NewFolder, Store, StoreOp};
use crate::{Error, LOST_WAIT_STATUS, credential, launch, sys, zygote};

/// Interval of the logic's Tick (LavaLite's `SBD_OPERATION_TIMER`).
pub const TICK_INTERVAL_MS: u64 = 1_000;
/// Events handled before their effects are carried out together.
pub const EVENT_BATCH_MAX: usize = 256;
/// Queue of events from the link.
const LINK_EVENTS_MAX: usize = 4096;
/// Queue of events from the shepherd watchers.
const WATCH_EVENTS_MAX: usize = 4096;
/// Queue of frames for mbatchd.
const OUT_FRAMES_MAX: usize = 4096;
/// Queue of launches (and job folder releases) for the launcher thread.
const LAUNCH_QUEUE_MAX: usize = 4096;
/// Status queries waiting for the loop.
const STATUS_QUERIES_MAX: usize = 64;
/// How often an adopted shepherd that has not yet written its `pid` file is looked at.
const ADOPT_POLL_MS: u64 = 10;
/// How often a shepherd that cannot be watched with a pidfd is looked at.
const GONE_POLL_MS: u64 = 100;

/// What the command line says.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The folder holding lsf.conf (else `LSF_ENVDIR`, else /etc).
    pub envdir: Option<PathBuf>,
    /// This host's name (else `LAVA_HOST`, else the short host name).
    pub host: Option<String>,
    /// Written once the credential socket listens.
    pub ready_file: Option<PathBuf>,
}

/// Everything that happens to the daemon.
#[derive(Debug)]
enum Event {
    Link(LinkEvent),
    Watch(WatchEvent),
    /// An interactive job's terminal went away ([`crate::interactive`]).
    TerminalLost(JobRef),
    Tick,
}

/// What the launcher and the shepherd watchers report; `launch` tells a current shepherd
/// from an earlier one.
#[derive(Debug)]
enum WatchEvent {
    /// The launcher could not start it.
    LaunchFailed { job: JobRef, launch: u64, message: String },
    /// The `pid` file is durable, or the shepherd gave up (or died) before one existed.
    Ready { job: JobRef, launch: u64 },
    /// The job has ended and its shepherd has written `exit` (it is still flushing it).
    Ended { job: JobRef, launch: u64 },
    /// The shepherd has ended.
    Gone { job: JobRef, launch: u64 },
}

/// How a watcher learns that the `pid` file question is settled.
enum ReadyWait {
    /// Already settled.
    Known,
    /// The shepherd's notification pipe.
    Pipe(OwnedFd),
    /// Look at the state folder until `pid` exists or the shepherd's lock is free.
    Poll(PathBuf),
}

/// How a watcher learns that the shepherd has ended.
enum GoneWait {
    /// The pidfd the zygote opened on the shepherd it forked (and the job's state folder,
    /// to watch the lock should the pidfd fail).
    Pidfd(OwnedFd, PathBuf),
    /// An adopted shepherd (or one whose start the zygote did not confirm, or without a
    /// pidfd): its pid from the `pid` file (else its lock polled), confirmed by its lock.
    Adopted(PathBuf),
}

/// The shell's own view of a job.
#[derive(Debug)]
struct Tracked {
    jobfile: String,
    /// The revision of the job's last record written (see [`crate::store`]).
    revision: u64,
    /// The current shepherd's launch number, while one is watched.
    launch: Option<u64>,
}

/// What the launcher thread is asked to do, in order.
enum LauncherRequest {
    /// Carry out a Launch effect; with the read end of the job's go pipe when its record is
    /// being made durable meanwhile.
    /// `interactive`: the record's interactive bits (docs/protocols/batch.md, "Interactive jobs").
    Launch {
        job: JobRef,
        launch: u64,
        run_spec: Box<RunSpec>,
        interactive: u32,
        hooks: Hooks,
        execution: Box<Execution>,
        jobfile: String,
        go: Option<OwnedFd>,
    },
    /// The job has ended: its folder `jobs/<jobfile>/` becomes a spare
    /// ([`crate::jobdirs`]).
    Release { jobfile: String },
}

/// Starts sbatchd and runs it until SIGTERM or SIGINT.
pub fn run(options: Options) -> Result<(), Error> {
    let envdir = options.envdir.clone().unwrap_or_else(lava_conf::envdir_from_env);
    let config = BaseConfig::load(&envdir)?;
    init_logging(config.lsf.log_mask);
    let readiness = Readiness::from_env();
    let host = decide_host(&options, &config)?;
    let masters: Vec<MbdHost> = config
        .master_candidates()
        .into_iter()
        .map(|host| MbdHost { name: host.name.clone(), addr: host.addr })
        .collect();
    if masters.is_empty() {
        return Err(Error::Other(format!(
            "{} lists no server host to run mbatchd",
            config.cluster.path.display()
        )));
    }
    let key = ClusterKey::load(&config.lsf.cluster_key_file)?;
    let auth = Arc::new(Authenticator::new(KeyRing::new(&key), AuthConfig::default()));
    if sys::effective_uid() != 0 {
        tracing::warn!("not running as root: only jobs of this daemon's own user can be started");
    }
    let layout = Layout::new(&config.work_dir(), &host);
    layout.create().map_err(|source| Error::Io { path: layout.root().to_path_buf(), source })?;
    let daemon_lock = lock_daemon(&layout)?;
    let space = Space::open(layout.root(), config.lsf.state_reserve_mb << 20)
        .map_err(|source| Error::Io { path: layout.root().to_path_buf(), source })?;
    let store = Store::new(layout.clone());
    let loaded = store.load()?;
    let mut tracked = BTreeMap::new();
    let mut records = Vec::with_capacity(loaded.len());
    for (jobfile, revision, record) in loaded {
        tracked.insert(record.job, Tracked { jobfile, revision, launch: None });
        records.push(record);
    }
    let n_records = records.len();
    let sbd = Sbd::restore(lava_sbd::Config::default(), records).map_err(|violation| {
        Error::Other(format!("job records in {}: {violation}", layout.state_root().display()))
    })?;
    let exe =
        std::env::current_exe().map_err(|source| Error::Io { path: "/proc/self/exe".into(), source })?;
    // Every job is started through the shepherd installed beside sbatchd: without it
    // each dispatch would be refused, so refuse to start instead, saying where it looked.
    let shepherd = crate::launch::shepherd_program(&exe);
    if !shepherd.is_file() {
        return Err(Error::Other(format!(
            "the job shepherd {} is missing: install it beside sbatchd",
            shepherd.display()
        )));
    }
    let link_config = LinkConfig {
        masters,
        port: config.lsf.mbd_port,
        host_name: host.clone(),
        n_cpus: std::thread::available_parallelism()
            .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX)),
        auth: Arc::clone(&auth),
    };
    tracing::info!(
        host = %host,
        mbatchd = %format!("{} port {}", link_config.master_names(), config.lsf.mbd_port),
        state = %layout.root().display(),
        records = n_records,
        "sbatchd starting"
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Io { path: "tokio runtime".into(), source })?;
    let socket_path = config.lsf.cmd_socket.clone();
    let (cluster, task_port, task_exe) = (config.cluster_name.clone(), config.lsf.res_port, exe.clone());
    let task_addresses =
        config.cluster.hosts.iter().filter_map(|entry| Some((entry.name.to_string(), entry.addr?))).collect();
    let forwarder = crate::tasks::Forwarder::new(Arc::clone(&auth), task_port, task_addresses);
    crate::launch::set_lsf_dirs(&config.lsf.bindir, &config.lsf.serverdir);
    let result = runtime.block_on(async move {
        let (link_tx, link_rx) = mpsc::channel(LINK_EVENTS_MAX);
        let (watch_tx, watch_rx) = mpsc::channel(WATCH_EVENTS_MAX);
        let (out_tx, out_rx) = mpsc::channel(OUT_FRAMES_MAX);
        let (status_tx, status_rx) = mpsc::channel(STATUS_QUERIES_MAX);
        let (attach_tx, attach_rx) = mpsc::channel(STATUS_QUERIES_MAX);
        let (lost_tx, lost_rx) = mpsc::channel(WATCH_EVENTS_MAX);
        start_attach_port(&config, &host, &key, attach_tx, lost_tx).await;
        let (grant_tx, grant_rx) = mpsc::channel(STATUS_QUERIES_MAX);
        let socket_counters = Arc::new(SocketCounters::default());
        let serving = match credential::bind(&socket_path) {
            Ok(Some(listener)) => {
                let context = credential::Context {
                    auth: Arc::clone(&auth),
                    host: host.clone(),
                    status: status_tx,
                    counters: Arc::clone(&socket_counters),
                    cluster: cluster.clone(),
                    grants: grant_tx,
                };
                tokio::spawn(credential::serve(listener, context));
                tracing::info!(socket = %socket_path.display(), "credential socket listening");
                true
            }
            Ok(None) => {
                tracing::warn!(socket = %socket_path.display(), "another daemon serves the credential socket");
                false
            }
            Err(source) => return Err(Error::Io { path: socket_path.clone(), source }),
        };
        let (launch_tx, launch_rx) = std::sync::mpsc::sync_channel(LAUNCH_QUEUE_MAX);
        let jobs_root = layout.jobs_root();
        let job_dirs = JobDirs::open(&jobs_root).map_err(|source| Error::Io { path: jobs_root, source })?;
        let launcher_layout = layout.clone();
        let launcher_events = watch_tx.clone();
        let runtime_handle = tokio::runtime::Handle::current();
        std::thread::Builder::new()
            .name("sbatchd-launch".to_owned())
            .spawn(move || {
                launcher(&exe, &launcher_layout, job_dirs, launch_rx, &launcher_events, &runtime_handle)
            })
            .map_err(|source| Error::Io { path: "launcher thread".into(), source })?;
        let spares = store.spares();
        std::thread::Builder::new()
            .name("sbatchd-spares".to_owned())
            .spawn(move || spares.keep_filled())
            .map_err(|source| Error::Io { path: "spares thread".into(), source })?;
        let mut daemon = Daemon {
            sbd,
            store,
            layout,
            tracked,
            noted: BTreeMap::new(),
            next_launch: 0,
            inputs: Vec::new(),
            out_tx,
            watch_tx,
            launcher: launch_tx,
            counters: LoopCounters::new(now_ms() as i64 / 1000),
            socket_counters,
            host: host.clone(),
            master_name: link_config.master_names(),
            started_at: now_ms() as i64 / 1000,
            peeks: crate::peek::Peeks::new(shepherd),
            space,
            disk_full: false,
            forwarder,
            cluster: cluster.clone(),
        };
        if daemon.space.is_full() {
            daemon.log_space_change(&Change::Full { available: daemon.space.available().unwrap_or(0), released: 0 });
            let mut effects = Vec::new();
            daemon.tell_disk_full(&mut effects);
            debug_assert!(effects.is_empty(), "DiskFull only sets a flag");
        }
        daemon.adopt_all().await?;
        if let Some(ready) = &options.ready_file {
            write_ready_file(ready)?;
        }
        let status = format!("serving host {host}; connecting to mbatchd at {}", link_config.master_names());
        readiness.ready(&status);
        tokio::spawn(link::run(link_config, link_tx, out_rx));
        let metrics_addr = config.lsf.metrics_listen(config.lsf.metrics_ports.sbd);
        let scrapes = lava_shell::metrics::start_for_loop(metrics_addr)
            .map_err(|error| Error::Io { path: format!("metrics address {}", error.addr).into(), source: error.error })?;
        if let Some(listener) = crate::tasks::bind(task_port) {
            let context = crate::tasks::PortContext {
                auth: Arc::clone(&auth),
                host: host.clone(),
                cluster: cluster.clone(),
                shepherd: crate::launch::shepherd_program(&task_exe),
            };
            tokio::spawn(crate::tasks::serve(listener, context));
        }
        let result = daemon
            .event_loop(link_rx, watch_rx, (status_rx, grant_rx), (attach_rx, lost_rx), scrapes, readiness)
            .await;
        if serving {
            let _ = std::fs::remove_file(&socket_path);
        }
        result
    });
    runtime.shutdown_timeout(Duration::from_millis(500));
    drop(daemon_lock);
    result
}

/// Listens on this host's sbatchd port for `bsub -I`'s attaches ([`crate::interactive`]). A
/// port that cannot be bound (another sbatchd of a test cluster on this machine holds it) is
/// logged: interactive jobs then cannot attach here, and everything else goes on.
async fn start_attach_port(
    config: &BaseConfig,
    host: &str,
    key: &ClusterKey,
    attach: mpsc::Sender<crate::interactive::AttachRequest>,
    lost: mpsc::Sender<JobRef>,
) {
    let Some(entry) = config.cluster.host(host) else { return };
    let port = entry.sbd_tcp_port(&config.lsf);
    let ip = entry.addr.unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
    let address = std::net::SocketAddr::new(ip, port);
    match tokio::net::TcpListener::bind(address).await {
        Ok(listener) => {
            let audience = lava_net::Audience::new(lava_net::Audience::SBATCHD, config.cluster_name.as_str());
            let auth = Arc::new(
                Authenticator::new(KeyRing::new(key), AuthConfig::default()).with_audience(audience),
            );
            let context = crate::interactive::Context { auth, attach, lost };
            tokio::spawn(crate::interactive::serve(listener, context));
            tracing::info!(%address, "attach port for interactive jobs listening");
        }
        Err(error) => tracing::warn!(%address, "cannot listen for interactive jobs' terminals: {error}"),
    }
}

/// Queues SBD_PEEK_REPLY; a full or closed queue drops it (mbatchd's peek then times out).
fn send_peek_reply(out_tx: &mpsc::Sender<OutFrame>, peek_id: u64, reply: wire::PeekReply) {
    let body =
        lava_xdr::to_bytes(&wire::SbdPeekReply { peek_id, reply }).expect("protocol messages always encode");
    if out_tx.try_send(OutFrame { operation: wire::Operation::SbdPeekReply, body }).is_err() {
        tracing::debug!(peek_id, "SBD_PEEK_REPLY dropped: the link's queue is full or closed");
    }
}

/// `LSF_LOG_MASK` as a tracing level; `RUST_LOG` overrides it. To the journal when standard
/// error is connected to it, else to standard error.
fn init_logging(mask: LogMask) {
    let level = mask.level_name();
    if lava_sd::journald::try_init(level) {
        return;
    }
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

/// `--host`, else `LAVA_HOST`, else the short host name; it must be a host of lsf.cluster.
fn decide_host(options: &Options, config: &BaseConfig) -> Result<String, Error> {
    let name = match (&options.host, std::env::var("LAVA_HOST")) {
        (Some(host), _) => host.clone(),
        (None, Ok(host)) if !host.is_empty() => host,
        _ => {
            let full = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map_err(|source| Error::Io { path: "/proc/sys/kernel/hostname".into(), source })?;
            full.trim().split('.').next().unwrap_or_default().to_owned()
        }
    };
    match config.cluster.host(&name) {
        Some(host) => Ok(host.name.clone()),
        None => Err(Error::HostNotInCluster { host: name, path: config.cluster.path.clone() }),
    }
}

/// One sbatchd per host folder.
fn lock_daemon(layout: &Layout) -> Result<std::fs::File, Error> {
    let path = layout.daemon_lock();
    let io_error = |source| Error::Io { path: path.clone(), source };
    let file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(&path).map_err(io_error)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked { path }),
        Err(std::fs::TryLockError::Error(source)) => Err(Error::Io { path, source }),
    }
}

fn write_ready_file(path: &Path) -> Result<(), Error> {
    let io_error = |source| Error::Io { path: path.to_path_buf(), source };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name =
        path.file_name().ok_or_else(|| Error::Other(format!("{} is not a file name", path.display())))?;
    let pid_line = format!("{}\n", std::process::id());
    layout::write_renamed(dir, &name.to_string_lossy(), pid_line.as_bytes(), false).map_err(io_error)
}

fn now_ms() -> u64 {
    lava_net::system_now_ms()
}

/// The running daemon: the logic and the shell's state around it.
struct Daemon {
    sbd: Sbd,
    store: Store,
    layout: Layout,
    tracked: BTreeMap<JobRef, Tracked>,
    /// Noted records not written yet (the latest per job).
    noted: BTreeMap<JobRef, JobRecord>,
    next_launch: u64,
    /// Inputs produced while carrying out effects.
    inputs: Vec<Input>,
    out_tx: mpsc::Sender<OutFrame>,
    watch_tx: mpsc::Sender<WatchEvent>,
    launcher: std::sync::mpsc::SyncSender<LauncherRequest>,
    /// What the loop counts, for the status query.
    counters: LoopCounters,
    /// What the credential socket counts.
    socket_counters: Arc<SocketCounters>,
    /// This host's name.
    host: String,
    /// The master host's name.
    master_name: String,
    /// When this sbatchd started, seconds since the epoch.
    started_at: i64,
    /// `bpeek`'s readers (run as the job's user, off the loop).
    peeks: crate::peek::Peeks,
    /// The state file system and its space reserve (the module doc's "A full disk").
    space: Space,
    /// What the logic was last told of the state file system (`Input::DiskFull`).
    disk_full: bool,
    /// Takes the jobs' signals to their `blaunch` tasks on other hosts ([`crate::tasks`]).
    forwarder: crate::tasks::Forwarder,
    /// The cluster's name.
    cluster: String,
}

impl Daemon {
    async fn event_loop(
        &mut self,
        mut link_rx: mpsc::Receiver<LinkEvent>,
        mut watch_rx: mpsc::Receiver<WatchEvent>,
        (mut status_rx, mut grant_rx): (
            mpsc::Receiver<StatusRequest>,
            mpsc::Receiver<crate::tasks::TaskQuery>,
        ),
        (mut attach_rx, mut lost_rx): (
            mpsc::Receiver<crate::interactive::AttachRequest>,
            mpsc::Receiver<JobRef>,
        ),
        mut scrapes: Option<mpsc::Receiver<lava_shell::metrics::Scrape>>,
        mut readiness: Readiness,
    ) -> Result<(), Error> {
        let mut signals =
            Signals::register().map_err(|source| Error::Io { path: "signal handler".into(), source })?;
        let mut tick = tokio::time::interval(Duration::from_millis(TICK_INTERVAL_MS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stop = loop {
            // The frames the last batch handed to the link, and the sockets and pipes that
            // became ready meanwhile, are served before the next batch's commit can block
            // the thread: a receive that finds an event waiting does not yield.
            tokio::task::yield_now().await;
            let mut events = Vec::new();
            tokio::select! {
                signal = signals.next() => match signal {
                    ShellSignal::Stop(name) => break name,
                    ShellSignal::Reload => {
                        readiness.reloading("SIGHUP");
                        tracing::info!(
                            "SIGHUP: nothing to reload (sbatchd logs to stderr or the journal and reads its \
                             configuration at start; restart it to apply changes, its jobs keep running)"
                        );
                        readiness.ready("serving (SIGHUP: nothing to reload)");
                        continue;
                    }
                },
                Some(request) = status_rx.recv() => {
                    // The asker may have gone; nothing to do then.
                    let _ = request.send(self.status_reply());
                    continue;
                }
                Some(query) = grant_rx.recv() => {
                    self.answer_task_query(query).await?;
                    continue;
                }
                Some(scrape) = lava_shell::metrics::next_scrape(&mut scrapes) => {
                    scrape.answer(crate::metrics::metrics(&self.status_reply(), &self.counters));
                    continue;
                }
                Some(request) = attach_rx.recv() => {
                    self.answer_attach(request).await?;
                    continue;
                }
                Some(job) = lost_rx.recv() => events.push(Event::TerminalLost(job)),
                Some(event) = link_rx.recv() => events.push(Event::Link(event)),
                Some(event) = watch_rx.recv() => events.push(Event::Watch(event)),
                _ = tick.tick() => events.push(Event::Tick),
            }
            while events.len() < EVENT_BATCH_MAX {
                match link_rx.try_recv() {
                    Ok(event) => events.push(Event::Link(event)),
                    Err(_) => break,
                }
            }
            while events.len() < EVENT_BATCH_MAX {
                match watch_rx.try_recv() {
                    Ok(event) => events.push(Event::Watch(event)),
                    Err(_) => break,
                }
            }
            let ticked = events.iter().any(|event| matches!(event, Event::Tick));
            for event in &events {
                match event {
                    Event::Link(LinkEvent::Connected) => readiness.status("connected to mbatchd"),
                    Event::Link(LinkEvent::Disconnected) => {
                        readiness.status("mbatchd unreachable; reconnecting (jobs go on)")
                    }
                    _ => {}
                }
            }
            let mut effects = Vec::new();
            for event in events {
                self.handle(event, &mut effects)?;
            }
            self.carry_out(effects).await?;
            if ticked {
                self.write_noted();
                readiness.pet();
            }
        };
        self.persist_noted()?;
        tracing::info!("{stop}: sbatchd stopping; running jobs stay with their shepherds");
        readiness.stopping(&format!("{stop}: stopping; jobs stay with their shepherds"));
        Ok(())
    }

    /// One step of the logic. When the input is the job's end (its process has ended, or
    /// it never started), the job's folder under `jobs/` is released: as LSF removes a job's
    /// file when the job finishes, nothing needs it any more (a relaunch writes it again).
    fn step(&mut self, input: Input, effects: &mut Vec<Effect>) {
        let ended = match &input {
            Input::Exited { job, .. } | Input::SpawnFailed { job, .. } => Some(*job),
            _ => None,
        };
        self.sbd.step(now_ms(), input, effects);
        if let Some(tracked) = ended.and_then(|job| self.tracked.get(&job)) {
            let jobfile = tracked.jobfile.clone();
            // Fails only when the launcher has stopped, i.e. while sbatchd stops; the
            // folder then waits for the job's removal.
            let _ = self.launcher.send(LauncherRequest::Release { jobfile });
        }
    }

    fn handle(&mut self, event: Event, effects: &mut Vec<Effect>) -> Result<(), Error> {
        match event {
            Event::Tick => {
                self.sample_usage(effects);
                match self.space.check() {
                    Ok(Some(change)) => self.log_space_change(&change),
                    Ok(None) => {}
                    Err(error) => tracing::debug!("statvfs of {}: {error}", self.layout.root().display()),
                }
                self.tell_disk_full(effects);
                self.step(Input::Tick, effects);
            }
            Event::TerminalLost(job) => self.step(Input::TerminalLost { job }, effects),
            Event::Link(LinkEvent::Connected) => {
                self.counters.on_link(true, now_ms() as i64 / 1000);
                self.step(Input::Connected, effects)
            }
            Event::Link(LinkEvent::Disconnected) => {
                self.counters.on_link(false, now_ms() as i64 / 1000);
                self.step(Input::Disconnected, effects)
            }
            Event::Link(LinkEvent::Message(FromMbd::Peek(peek))) => self.answer_peek(&peek),
            Event::Link(LinkEvent::Message(message)) => {
                let input = match message {
                    FromMbd::NewJob(spec) => {
                        let user = lookup_user(spec.user());
                        Input::NewJob { spec, user }
                    }
                    FromMbd::NewJobReplyAck(job) => Input::NewJobReplyAck(job),
                    FromMbd::JobExecuteAck(job) => Input::JobExecuteAck(job),
                    FromMbd::JobFinishAck(job) => Input::JobFinishAck(job),
                    FromMbd::JobSignal(signal) => Input::JobSignal(signal),
                    FromMbd::Peek(_) => unreachable!("answered above, outside the logic"),
                };
                self.step(input, effects);
            }
            Event::Watch(WatchEvent::LaunchFailed { job, launch, message }) => {
                if self.is_current(job, launch) {
                    if let Some(tracked) = self.tracked.get_mut(&job) {
                        tracked.launch = None;
                    }
                    tracing::warn!(%job, "cannot launch the job: {message}");
                    self.step(Input::SpawnFailed { job, message }, effects);
                }
            }
            Event::Watch(WatchEvent::Ready { job, launch }) => {
                if self.is_current(job, launch) {
                    self.on_ready(job, effects)?;
                }
            }
            Event::Watch(WatchEvent::Ended { job, launch }) => {
                if self.is_current(job, launch) {
                    self.on_ended(job, effects)?;
                }
            }
            Event::Watch(WatchEvent::Gone { job, launch }) => {
                if self.is_current(job, launch) {
                    if let Some(tracked) = self.tracked.get_mut(&job) {
                        tracked.launch = None;
                    }
                    self.on_gone(job, effects)?;
                }
            }
        }
        Ok(())
    }

    /// Feeds what its processes use now for every running job with a limit measured on the
    /// whole job (`bsub -M`, the queue's `CPULIMIT`, `SWAPLIMIT`, `PROCESSLIMIT`,
    /// `THREADLIMIT`); the logic starts the kill when a job is over one.
    fn sample_usage(&mut self, effects: &mut Vec<Effect>) {
        let limited: Vec<(JobRef, i32)> = self
            .sbd
            .jobs()
            .filter(|record| record.is_running() && record.pgid > 1 && record.has_measured_limit())
            .map(|record| (record.job, record.pgid))
            .collect();
        if limited.is_empty() {
            return;
        }
        let usage = procfs::group_usage(&limited.iter().map(|(_, pgid)| *pgid).collect());
        for (job, pgid) in limited {
            if let Some(usage) = usage.get(&pgid) {
                self.step(Input::Usage { job, usage: *usage }, effects);
            }
        }
    }

    /// SBD_PEEK: decide what to read here, then have a reader running as the job's user
    /// read it, off the loop ([`crate::peek`]); the answer is queued when it comes (best
    /// effort: a full queue to mbatchd drops it and the command times out).
    fn answer_peek(&mut self, peek: &wire::SbdPeek) {
        let request = &peek.request;
        let record = JobRef::new(request.job.job_id, request.job.array_index).and_then(|job| {
            let record = self.sbd.job(job)?;
            let tracked = self.tracked.get(&job)?;
            Some((record, tracked.jobfile.as_str()))
        });
        let read = match crate::peek::decide(record, request) {
            Ok(read) => read,
            Err(reply) => return send_peek_reply(&self.out_tx, peek.peek_id, reply),
        };
        let Some(slot) = self.peeks.slot(read.uid) else {
            let reply = read.failed("too many peeks in progress on this host; try again");
            return send_peek_reply(&self.out_tx, peek.peek_id, reply);
        };
        let (peeks, out_tx, peek_id) = (self.peeks.clone(), self.out_tx.clone(), peek.peek_id);
        tokio::spawn(async move {
            let reply = peeks.read(&read).await;
            drop(slot);
            send_peek_reply(&out_tx, peek_id, reply);
        });
    }

    /// The credential socket's task questions ([`crate::tasks`]): a grant is decided from
    /// the job's record; a task's usage is added to the job's record and answered once
    /// durable (or refused, as a grant would be).
    async fn answer_task_query(&mut self, query: crate::tasks::TaskQuery) -> Result<(), Error> {
        match query {
            crate::tasks::TaskQuery::Grant(query) => {
                let facts = lava_sbd::tasks::may_start_task(
                    self.sbd.job(query.job),
                    query.job,
                    query.uid,
                    &query.host,
                );
                let _ = query.answer.send(facts);
            }
            crate::tasks::TaskQuery::Usage(report) => {
                let allowed =
                    lava_sbd::tasks::may_report_usage(self.sbd.job(report.job), report.job, report.uid);
                if allowed.is_ok() {
                    let mut effects = Vec::new();
                    self.step(Input::TaskUsage { job: report.job, rusage: report.rusage }, &mut effects);
                    self.carry_out(effects).await?;
                }
                let _ = report.answer.send(allowed.map_err(|refusal| refusal.to_string()));
            }
        }
        Ok(())
    }

    /// INTERACTIVE_ATTACH, checked by [`crate::interactive`]: may this user attach to this
    /// job now? On yes, the logic marks it attached.
    async fn answer_attach(&mut self, request: crate::interactive::AttachRequest) -> Result<(), Error> {
        let answer =
            crate::interactive::decide(&self.sbd, self.state_dir(request.job), request.job, request.uid);
        if answer.is_ok() {
            let mut effects = Vec::new();
            self.step(Input::TerminalAttached { job: request.job }, &mut effects);
            self.carry_out(effects).await?;
        }
        // The asker may have gone; the job then loses its terminal at the next frame.
        let _ = request.reply.send(answer);
        Ok(())
    }

    fn is_current(&self, job: JobRef, launch: u64) -> bool {
        self.tracked.get(&job).is_some_and(|tracked| tracked.launch == Some(launch))
    }

    fn state_dir(&self, job: JobRef) -> Option<PathBuf> {
        self.tracked.get(&job).map(|tracked| self.layout.state_dir(&tracked.jobfile))
    }

    /// The shepherd settled the pid question: report the process, or why there is none.
    fn on_ready(&mut self, job: JobRef, effects: &mut Vec<Effect>) -> Result<(), Error> {
        let awaiting = self.sbd.job(job).is_some_and(|record| record.is_awaiting_spawn());
        let Some(dir) = self.state_dir(job).filter(|_| awaiting) else { return Ok(()) };
        if let Some(pid) = read_pid_file(&dir)? {
            tracing::debug!(%job, pid = pid.pid, "job started");
            self.step(
                Input::Spawned { job, pid: pid.pid, pgid: pid.pgid, exec_time_ms: pid.exec_time_ms },
                effects,
            );
            return Ok(());
        }
        let input = match read_exit_file(&dir)? {
            Some(ExitFile::Failed { message, .. }) => Input::SpawnFailed { job, message },
            Some(ExitFile::PreExecFailed { exit, .. }) => {
                tracing::info!(%job, exit, "the job's pre-execution command failed; the job was not run");
                Input::PreExecFailed { job, exit }
            }
            Some(ExitFile::Exited { .. }) => {
                Input::SpawnFailed { job, message: "the shepherd reported an exit without a pid".to_owned() }
            }
            None if self.sbd.awaiting_adoption().any(|adopted| adopted == job) => Input::NotLaunched { job },
            None => {
                Input::SpawnFailed { job, message: "the shepherd ended before it started the job".to_owned() }
            }
        };
        if let Input::SpawnFailed { message, .. } = &input {
            tracing::warn!(%job, "job could not be started: {message}");
        }
        self.step(input, effects);
        Ok(())
    }

    /// The shepherd has ended: report the job's end from its `exit` file. Its lock is
    /// checked first, so that a watcher's mistake can never make a live job look lost.
    fn on_gone(&mut self, job: JobRef, effects: &mut Vec<Effect>) -> Result<(), Error> {
        let Some(dir) = self.state_dir(job) else { return Ok(()) };
        if !self.sbd.job(job).is_some_and(|record| record.is_running()) {
            return Ok(());
        }
        if launch::shepherd_alive(&dir).map_err(|source| Error::Io { path: dir.clone(), source })?
            == Some(true)
        {
            tracing::debug!(%job, "the shepherd still holds its lock; watching it again");
            let launch = self.new_launch(job);
            self.watch(job, launch, ReadyWait::Known, GoneWait::Adopted(dir));
            return Ok(());
        }
        self.finish_from_files(job, effects)
    }

    /// The shepherd says the job has ended and `exit` is written: report the end now, while
    /// the shepherd makes the file durable (crate::shepherd, step 5). The shepherd still
    /// holds its lock; its end (Gone) follows and finds the job no longer running.
    fn on_ended(&mut self, job: JobRef, effects: &mut Vec<Effect>) -> Result<(), Error> {
        let Some(dir) = self.state_dir(job) else { return Ok(()) };
        if !self.sbd.job(job).is_some_and(|record| record.is_running()) {
            return Ok(());
        }
        if read_exit_file(&dir)?.is_none() {
            tracing::warn!(%job, "the shepherd said the job ended but wrote no exit file; waiting for it to end");
            return Ok(());
        }
        self.finish_from_files(job, effects)
    }

    /// For a running job whose shepherd is gone (and can never come back): Exited from the
    /// `exit` file, a start failure, or, with no file, a lost job.
    ///
    /// When a kill (bkill, run or memory limit) was under way, the rest of the job's process
    /// group goes with its leader (SIGKILL): killing a job kills all of it, including
    /// children that ignore SIGINT, as a non-interactive shell's background jobs do.
    fn finish_from_files(&mut self, job: JobRef, effects: &mut Vec<Effect>) -> Result<(), Error> {
        let Some(dir) = self.state_dir(job) else { return Ok(()) };
        if let Some(record) = self.sbd.job(job).filter(|record| record.kill.is_some() && record.pgid > 1) {
            match sys::kill_group(record.pgid, libc::SIGKILL) {
                Ok(()) => tracing::debug!(%job, pgid = record.pgid, "killed what was left of the job"),
                Err(err) if err.raw_os_error() == Some(libc::ESRCH) => {}
                Err(err) => {
                    tracing::warn!(%job, pgid = record.pgid, "cannot kill the rest of the job: {err}")
                }
            }
        }
        let input = match read_exit_file(&dir)? {
            Some(ExitFile::Exited { wait_status, end_time_ms, rusage }) => {
                tracing::debug!(%job, wait_status, "job ended");
                Input::Exited { job, wait_status, rusage, end_time_ms }
            }
            Some(ExitFile::Failed { message, .. }) => {
                tracing::warn!(%job, "job could not be started: {message}");
                Input::SpawnFailed { job, message }
            }
            Some(ExitFile::PreExecFailed { exit, .. }) => {
                if self.sbd.job(job).is_some_and(|record| record.is_spawned()) {
                    // Cannot happen: the pre-execution commands run before any pid.
                    Input::SpawnFailed {
                        job,
                        message: "the shepherd reported a pre-execution failure after the pid".into(),
                    }
                } else {
                    Input::PreExecFailed { job, exit }
                }
            }
            None => self.lost(job, &dir)?,
        };
        self.step(input, effects);
        Ok(())
    }

    /// The shepherd vanished without recording the job's end (killed, or the machine
    /// restarted). The job is reported killed by SIGKILL, and if its process is still the
    /// one the shepherd started (same boot, same start time) its group is killed first, so
    /// that the report is true.
    fn lost(&mut self, job: JobRef, dir: &Path) -> Result<Input, Error> {
        if let Some(pid) = read_pid_file(dir)? {
            let same_boot = !pid.boot_id.is_empty() && boot_id().is_ok_and(|now| now == pid.boot_id);
            let same_process = pid.start_ticks != 0
                && process_start_ticks(pid.pid).is_ok_and(|ticks| ticks == pid.start_ticks);
            if same_boot && same_process {
                tracing::warn!(%job, pgid = pid.pgid, "killing the process group of a job whose shepherd vanished");
                if let Err(err) = sys::kill_group(pid.pgid, libc::SIGKILL) {
                    tracing::debug!(%job, "killpg: {err}");
                }
            }
        }
        tracing::warn!(%job, "the job's shepherd vanished without recording its end; reported killed (SIGKILL)");
        Ok(Input::Exited {
            job,
            wait_status: LOST_WAIT_STATUS,
            rusage: lava_batch_wire::ResourceUsage::default(),
            end_time_ms: now_ms(),
        })
    }

    /// Contract step 2 after a restart: find every job's shepherd.
    async fn adopt_all(&mut self) -> Result<(), Error> {
        let awaiting: Vec<JobRef> = self.sbd.awaiting_adoption().collect();
        let running: Vec<JobRef> =
            self.sbd.jobs().filter(|record| record.is_running()).map(|r| r.job).collect();
        let mut effects = Vec::new();
        for job in awaiting {
            self.adopt_unspawned(job, &mut effects)?;
        }
        for job in running {
            self.adopt_running(job, &mut effects)?;
        }
        self.carry_out(effects).await
    }

    /// A job launched (or about to be) whose pid was not recorded before the restart.
    fn adopt_unspawned(&mut self, job: JobRef, effects: &mut Vec<Effect>) -> Result<(), Error> {
        let Some(dir) = self.state_dir(job) else { return Ok(()) };
        let alive = launch::shepherd_alive(&dir).map_err(|source| Error::Io { path: dir.clone(), source })?;
        if alive == Some(true) {
            tracing::info!(%job, "adopting a live shepherd that has not reported the job's pid yet");
            let launch = self.new_launch(job);
            self.watch(job, launch, ReadyWait::Poll(dir.clone()), GoneWait::Adopted(dir));
            return Ok(());
        }
        // No shepherd lives, and none can appear: the files are final.
        match read_pid_file(&dir)? {
            Some(pid) => {
                tracing::info!(%job, pid = pid.pid, "the job started before the restart");
                self.step(
                    Input::Spawned { job, pid: pid.pid, pgid: pid.pgid, exec_time_ms: pid.exec_time_ms },
                    effects,
                );
                self.finish_from_files(job, effects)?;
            }
            None => match read_exit_file(&dir)? {
                Some(ExitFile::Failed { message, .. }) => {
                    self.step(Input::SpawnFailed { job, message }, effects)
                }
                Some(ExitFile::PreExecFailed { exit, .. }) => {
                    self.step(Input::PreExecFailed { job, exit }, effects)
                }
                _ => {
                    tracing::info!(%job, "the job was never started; launching it");
                    self.step(Input::NotLaunched { job }, effects);
                }
            },
        }
        Ok(())
    }

    /// A job with a pid and no exit yet.
    fn adopt_running(&mut self, job: JobRef, effects: &mut Vec<Effect>) -> Result<(), Error> {
        let Some(dir) = self.state_dir(job) else { return Ok(()) };
        let alive = launch::shepherd_alive(&dir).map_err(|source| Error::Io { path: dir.clone(), source })?;
        if alive == Some(true) {
            tracing::info!(%job, "re-attached to the job's shepherd");
            let launch = self.new_launch(job);
            self.watch(job, launch, ReadyWait::Known, GoneWait::Adopted(dir));
            Ok(())
        } else {
            self.finish_from_files(job, effects)
        }
    }

    fn new_launch(&mut self, job: JobRef) -> u64 {
        self.next_launch += 1;
        let launch = self.next_launch;
        if let Some(tracked) = self.tracked.get_mut(&job) {
            tracked.launch = Some(launch);
        }
        launch
    }

    /// Carries out effects in the groups of [`lava_sbd::commit_groups`] (lava-sbd's shell
    /// contract, step 3: each group's record changes in one commit, then its other effects
    /// in order; a signal is sent before the record that says so), then the inputs acting
    /// produced.
    async fn carry_out(&mut self, mut effects: Vec<Effect>) -> Result<(), Error> {
        loop {
            for group in lava_sbd::commit_groups(std::mem::take(&mut effects)) {
                self.carry_out_group(group).await?;
            }
            if self.inputs.is_empty() {
                return Ok(());
            }
            for input in std::mem::take(&mut self.inputs) {
                self.step(input, &mut effects);
            }
        }
    }

    /// One group of [`lava_sbd::commit_groups`]: its record changes made durable together
    /// (the launches among them started beside the commit, held by their go pipes), then
    /// its other effects in their order.
    async fn carry_out_group(&mut self, mut effects: Vec<Effect>) -> Result<(), Error> {
        let mut ops = self.store_ops(&effects);
        let go_pipes = self.launch_early(&mut effects, &mut ops)?;
        if !ops.is_empty() {
            let started = std::time::Instant::now();
            self.commit_waiting_for_space(&ops).await?;
            let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            let persists = ops.iter().filter(|op| !matches!(op, StoreOp::Remove { .. })).count() as u64;
            self.counters.on_commit(persists, ops.len() as u64 - persists, micros);
            lava_crash::point!("sbatchd.records_committed");
        }
        for mut go in go_pipes {
            // The record is durable: the job may run. A shepherd that is gone (its
            // start failed) leaves no reader; its failure arrives on its own.
            let _ = go.write_all(&[GO_BYTE]);
            lava_crash::point!("sbatchd.job_released");
        }
        for effect in effects {
            match effect {
                Effect::Persist(..) | Effect::Note(..) => {}
                Effect::Remove(job) => self.counters.forget(job.to_wire()),
                Effect::Launch { job, run_spec } => self.launch(job, run_spec, None),
                Effect::Kill { job, pgid, signal } => {
                    let unattached = self.sbd.job(job).is_some_and(|record| record.is_interactive())
                        && !self.sbd.was_attached(job);
                    if let (true, Some(dir)) = (unattached, self.state_dir(job)) {
                        crate::interactive::hang_up(&dir);
                    }
                    match sys::kill_group(pgid, signal) {
                        Ok(()) => tracing::debug!(%job, pgid, signal, "signalled"),
                        Err(err) if err.raw_os_error() == Some(libc::ESRCH) => {}
                        Err(err) => tracing::warn!(%job, pgid, signal, "cannot signal the job: {err}"),
                    }
                    // The job's `blaunch` tasks on its other hosts get it too.
                    if let Some(record) = self.sbd.job(job) {
                        let spec = &record.run_spec;
                        let hosts: Vec<&str> = spec.exec_hosts.iter().map(|host| host.as_str()).collect();
                        if hosts.iter().any(|host| *host != self.host) {
                            self.forwarder.forward(
                                job,
                                spec.exec_uid,
                                signal,
                                &self.host,
                                &hosts,
                                &self.cluster,
                            );
                        }
                    }
                    lava_crash::point!("sbatchd.signal_sent");
                }
                Effect::Send(message) => self.send(message).await,
            }
        }
        Ok(())
    }

    /// Commits `ops`; a commit that fails for space is tried again every second until it
    /// succeeds (the module doc's "A full disk"): nothing after it may run before it is
    /// durable, and each attempt writes every record whole again. The reserve is released
    /// at the first failure, so the next attempt normally succeeds at once.
    async fn commit_waiting_for_space(&mut self, ops: &[StoreOp]) -> Result<(), Error> {
        let mut attempts = 0u64;
        loop {
            match self.store.commit(ops) {
                Ok(()) => {
                    if attempts > 0 {
                        tracing::warn!(attempts, "job records written again after waiting for space");
                    }
                    return Ok(());
                }
                Err(error) if error.is_no_space() => {
                    attempts += 1;
                    if let Some(change) = self.space.no_space() {
                        // The reserve is free now: try again at once. The logic hears of
                        // it at the next tick (it is not stepped while its effects are
                        // being carried out).
                        self.log_space_change(&change);
                        continue;
                    }
                    if attempts == 1 {
                        tracing::error!("{error}: the job records wait for space (tried again every second)");
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Tells the logic when the state file system became full or has room again (it
    /// refuses new runs while full); once there is room, sbatchd registers with mbatchd
    /// again, so that the jobs it refused meanwhile may come back to this host.
    fn tell_disk_full(&mut self, effects: &mut Vec<Effect>) {
        let full = self.space.is_full();
        if full != self.disk_full {
            self.disk_full = full;
            self.step(Input::DiskFull { full }, effects);
            if !full {
                // Dropped only when the link is gone, which a registration replaces anyway.
                let _ = self.out_tx.try_send(OutFrame::register_again());
            }
        }
    }

    fn log_space_change(&self, change: &Change) {
        let dir = self.layout.root().display();
        match change {
            Change::Full { available, released } => tracing::error!(
                %dir,
                available,
                released,
                "the state file system is full: new jobs are refused; running jobs go on"
            ),
            Change::Room { available } => {
                tracing::warn!(%dir, available, "the state file system has room again: new jobs are taken")
            }
        }
    }

    /// The batch's record changes, one per job ([`StoreOp::then`]: the last one wins, a
    /// Persist after a Remove replaces the job's folders); also keeps the shell's job
    /// table in step with the records.
    fn store_ops(&mut self, effects: &[Effect]) -> Vec<StoreOp> {
        let mut ops: Vec<StoreOp> = Vec::new();
        let mut op_of: BTreeMap<JobRef, usize> = BTreeMap::new();
        for effect in effects {
            let (job, op) = match effect {
                Effect::Persist(job, record) => {
                    let jobfile = layout::jobfile_name(record.run_spec.submit_time_s, *job);
                    let tracked = self.tracked.entry(*job).or_insert_with(|| Tracked {
                        jobfile: jobfile.clone(),
                        revision: 0,
                        launch: None,
                    });
                    tracked.jobfile = jobfile.clone();
                    tracked.revision += 1;
                    self.noted.remove(job);
                    (
                        *job,
                        StoreOp::Persist { jobfile, bytes: store::encode_record(record, tracked.revision) },
                    )
                }
                Effect::Note(job, record) => {
                    self.noted.insert(*job, record.clone());
                    continue;
                }
                Effect::Remove(job) => {
                    self.noted.remove(job);
                    let Some(tracked) = self.tracked.remove(job) else {
                        tracing::error!(%job, "Remove for a job without a folder");
                        continue;
                    };
                    (*job, StoreOp::Remove { jobfile: tracked.jobfile })
                }
                _ => continue,
            };
            match op_of.get(&job) {
                Some(&idx) => {
                    let earlier =
                        std::mem::replace(&mut ops[idx], StoreOp::Remove { jobfile: String::new() });
                    ops[idx] = earlier.then(op);
                }
                None => {
                    op_of.insert(job, ops.len());
                    ops.push(op);
                }
            }
        }
        ops
    }

    /// Writes the noted records, without fsync (see the module doc), each under its next
    /// revision; a failed write is logged by the store and never stops the daemon.
    fn write_noted(&mut self) {
        let mut writes = Vec::with_capacity(self.noted.len());
        for (job, record) in std::mem::take(&mut self.noted) {
            let Some(tracked) = self.tracked.get_mut(&job) else { continue };
            tracked.revision += 1;
            writes.push((tracked.jobfile.clone(), store::encode_record(&record, tracked.revision)));
        }
        if !writes.is_empty() {
            self.store.write_noted(&writes);
            lava_crash::point!("sbatchd.noted_written");
        }
    }

    /// At a clean stop: the noted records become durable, so that a restart resends nothing
    /// mbatchd has already acknowledged.
    fn persist_noted(&mut self) -> Result<(), Error> {
        let effects: Vec<Effect> = std::mem::take(&mut self.noted)
            .into_iter()
            .map(|(job, record)| Effect::Persist(job, record))
            .collect();
        let ops = self.store_ops(&effects);
        self.store.commit(&ops)
    }

    /// Starts, before the batch's commit, the launch of each new job whose first record the
    /// batch writes (docs/batch.md, "A new job's launch overlaps its record"): its folder is
    /// made now ([`Store::create_folder`]), its Persist becomes a [`StoreOp::Create`], and
    /// the launch is handed to the launcher with the read end of a go pipe. The shepherd
    /// forks the job's process but lets it execute only after `g` on that pipe, which the
    /// caller writes once the commit has returned; should the commit fail, the pipes close
    /// unwritten and the shepherds leave no trace ([`crate::shepherd`], step 3). The
    /// launches taken are removed from `effects`; any other (a job whose folder exists: a
    /// relaunch, a new dispatch replacing a finished run) is carried out after the commit.
    /// Returns the go pipes' write ends.
    fn launch_early(&mut self, effects: &mut Vec<Effect>, ops: &mut [StoreOp]) -> Result<Vec<File>, Error> {
        let mut go_pipes = Vec::new();
        let mut kept = Vec::with_capacity(effects.len());
        for effect in effects.drain(..) {
            let Effect::Launch { job, run_spec } = effect else {
                kept.push(effect);
                continue;
            };
            let jobfile = layout::jobfile_name(run_spec.submit_time_s, job);
            let persist =
                ops.iter_mut().find(|op| matches!(op, StoreOp::Persist { jobfile: f, .. } if *f == jobfile));
            let folder = match persist {
                Some(_) => self.store.create_folder(&jobfile)?,
                None => NewFolder::Existing,
            };
            let (Some(op), NewFolder::Spare | NewFolder::Made) = (persist, folder) else {
                kept.push(Effect::Launch { job, run_spec });
                continue;
            };
            if let StoreOp::Persist { jobfile, bytes } = op {
                *op = StoreOp::Create {
                    jobfile: std::mem::take(jobfile),
                    bytes: std::mem::take(bytes),
                    folder,
                };
            }
            let (go_read, go_write) =
                std::io::pipe().map_err(|source| Error::Io { path: "go pipe".into(), source })?;
            self.launch(job, run_spec, Some(OwnedFd::from(go_read)));
            go_pipes.push(File::from(OwnedFd::from(go_write)));
        }
        *effects = kept;
        Ok(go_pipes)
    }

    /// Hands the launch to the launcher thread: the main loop never waits for a process to
    /// start. The Launch's record is durable already, or is being made durable and `go`
    /// keeps the job from executing until it is; nothing later in the batch depends on
    /// the shepherd existing (only Spawned, which the shepherd itself triggers, does).
    fn launch(&mut self, job: JobRef, run_spec: Box<RunSpec>, go: Option<OwnedFd>) {
        self.counters.launches += 1;
        let jobfile = layout::jobfile_name(run_spec.submit_time_s, job);
        let launch = self.new_launch(job);
        let interactive = self.sbd.job(job).map_or(0, |record| record.interactive);
        // The record holds the hooks, the job starter, the niceness and the limits (the
        // Launch carries the run spec only).
        let hooks = self.sbd.job(job).map(|record| record.hooks.clone()).unwrap_or_default();
        let execution =
            Box::new(self.sbd.job(job).map(|record| record.execution.clone()).unwrap_or_default());
        let request =
            LauncherRequest::Launch { job, launch, run_spec, interactive, hooks, execution, jobfile, go };
        if self.launcher.send(request).is_err() {
            let message = "the launcher thread has stopped".to_owned();
            tracing::error!(%job, "cannot launch the job: {message}");
            self.inputs.push(Input::SpawnFailed { job, message });
        }
    }

    async fn send(&mut self, message: ToMbd) {
        let operation = message.operation();
        self.counters.on_send(operation, message.job());
        let body = match &message {
            ToMbd::NewJobReply(m) => lava_xdr::to_bytes(m),
            ToMbd::JobExecute(m) => lava_xdr::to_bytes(m),
            ToMbd::JobFinish(m) => lava_xdr::to_bytes(m),
            ToMbd::JobSignalReply(m) => lava_xdr::to_bytes(m),
        }
        .expect("protocol messages always encode");
        // Only fails when the link is gone, which happens only while stopping.
        let _ = self.out_tx.send(OutFrame { operation, body }).await;
    }

    /// The answer to a status query, from the loop's own state.
    fn status_reply(&self) -> lava_batch_wire::SbdStatusReply {
        let shepherds = self.tracked.values().filter(|tracked| tracked.launch.is_some()).count() as u64;
        lava_batch_wire::SbdStatusReply {
            host: self.host.clone(),
            master_name: self.master_name.clone(),
            pid: std::process::id(),
            started_at: self.started_at,
            connected: self.counters.connected,
            link_since: self.counters.link_since,
            counters: crate::status::counters(
                JobPhases::of(self.sbd.jobs()),
                shepherds,
                &self.counters,
                self.store.n_fsyncs(),
                &self.socket_counters,
            ),
        }
    }

    fn watch(&self, job: JobRef, launch: u64, ready: ReadyWait, gone: GoneWait) {
        tokio::spawn(watch(self.watch_tx.clone(), job, launch, ready, gone));
    }
}

/// How often the launcher thread, when idle, looks whether the shepherd zygote has died
/// (to reap and log it; a new one starts at the next launch).
const ZYGOTE_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The launcher thread: carries out Launch effects one after the other through the
/// shepherd zygote it owns ([`crate::zygote`]: one request and answer at a time), reports a
/// failed start to the loop, and has each new shepherd watched. sbatchd reaps no shepherd:
/// they are the zygote's children, and the zygote reaps them. It also owns the job folders
/// ([`crate::jobdirs`]), so a folder released by one job and taken by the next never races.
fn launcher(
    exe: &Path,
    layout: &Layout,
    mut job_dirs: JobDirs,
    requests: std::sync::mpsc::Receiver<LauncherRequest>,
    events: &mpsc::Sender<WatchEvent>,
    runtime: &tokio::runtime::Handle,
) {
    let mut zygote = zygote::Client::new(launch::shepherd_program(exe), layout.state_root());
    loop {
        let (job, launch, run_spec, interactive, hooks, execution, jobfile, go) = match requests
            .recv_timeout(ZYGOTE_CHECK_INTERVAL)
        {
            Ok(LauncherRequest::Launch {
                job,
                launch,
                run_spec,
                interactive,
                hooks,
                execution,
                jobfile,
                go,
            }) => (job, launch, run_spec, interactive, hooks, execution, jobfile, go),
            Ok(LauncherRequest::Release { jobfile }) => {
                if let Err(err) = job_dirs.release(&jobfile) {
                    let folder = layout.job_dir(&jobfile);
                    tracing::warn!(folder = %folder.display(), "cannot release an ended job's folder: {err}");
                }
                continue;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                zygote.check();
                continue;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
        };
        let launched =
            launch::JobToLaunch { job, spec: &run_spec, interactive, hooks: &hooks, execution: &execution };
        let started = match launch::start(&mut zygote, &mut job_dirs, layout, launched, &jobfile, go) {
            Ok(started) => started,
            Err(message) => {
                if events.blocking_send(WatchEvent::LaunchFailed { job, launch, message }).is_err() {
                    return;
                }
                continue;
            }
        };
        let dir = layout.state_dir(&jobfile);
        let gone = match started.shepherd {
            Some((_, Some(pidfd))) => GoneWait::Pidfd(pidfd, dir),
            Some((pid, None)) => {
                tracing::warn!(%job, pid, "no pidfd for the shepherd; watching its lock instead");
                GoneWait::Adopted(dir)
            }
            None => GoneWait::Adopted(dir),
        };
        runtime.spawn(watch(events.clone(), job, launch, ReadyWait::Pipe(started.notify), gone));
    }
}

fn lookup_user(user: &UserName) -> Result<UserInfo, String> {
    match sys::lookup_user(user.as_str()) {
        Ok(Some(account)) => {
            Ok(UserInfo { uid: account.uid, gid: account.gid, home: account.home, shell: account.shell })
        }
        Ok(None) => Err("no such user on this host".to_owned()),
        Err(err) => Err(format!("cannot look the user up: {err}")),
    }
}

fn read_pid_file(dir: &Path) -> Result<Option<PidFile>, Error> {
    let path = dir.join(PID_FILE);
    let Some(bytes) =
        layout::read_shepherd_file(&path).map_err(|source| Error::Io { path: path.clone(), source })?
    else {
        return Ok(None);
    };
    PidFile::parse(&path, &bytes).map(Some).map_err(|err| Error::Other(err.to_string()))
}

fn read_exit_file(dir: &Path) -> Result<Option<ExitFile>, Error> {
    let path = dir.join(EXIT_FILE);
    let Some(bytes) =
        layout::read_shepherd_file(&path).map_err(|source| Error::Io { path: path.clone(), source })?
    else {
        return Ok(None);
    };
    ExitFile::parse(&path, &bytes).map(Some).map_err(|err| Error::Other(err.to_string()))
}

/// Follows one shepherd: first until its `pid` question is settled, then until it ends.
async fn watch(events: mpsc::Sender<WatchEvent>, job: JobRef, launch: u64, ready: ReadyWait, gone: GoneWait) {
    let mut pipe = None;
    match ready {
        ReadyWait::Known => {}
        ReadyWait::Pipe(fd) => {
            pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(fd).ok();
            if next_byte(pipe.as_ref()).await.is_none() {
                pipe = None;
            }
            if events.send(WatchEvent::Ready { job, launch }).await.is_err() {
                return;
            }
        }
        ReadyWait::Poll(dir) => {
            let no_pid =
                |dir: &Path| layout::read_shepherd_file(&dir.join(PID_FILE)).ok().flatten().is_none();
            while no_pid(&dir) && launch::shepherd_alive(&dir).ok() == Some(Some(true)) {
                tokio::time::sleep(Duration::from_millis(ADOPT_POLL_MS)).await;
            }
            if events.send(WatchEvent::Ready { job, launch }).await.is_err() {
                return;
            }
        }
    }
    // The shepherd's word that `exit` is written comes before the shepherd ends (see
    // crate::shepherd, step 5); end-of-file means it ended (or died) without one.
    if next_byte(pipe.as_ref()).await == Some(ENDED_BYTE)
        && events.send(WatchEvent::Ended { job, launch }).await.is_err()
    {
        return;
    }
    drop(pipe);
    match gone {
        GoneWait::Pidfd(fd, dir) => {
            if let Err(err) = sys::wait_readable(fd).await {
                tracing::error!(%job, "cannot watch the shepherd's pidfd: {err}; watching its lock");
                wait_lock(&dir).await;
            }
        }
        GoneWait::Adopted(dir) => wait_adopted(&dir).await,
    }
    let _ = events.send(WatchEvent::Gone { job, launch }).await;
}

/// The next byte on the notification pipe; `None` at end-of-file, on an error, or without
/// a pipe.
async fn next_byte(pipe: Option<&tokio::net::unix::pipe::Receiver>) -> Option<u8> {
    let pipe = pipe?;
    let mut byte = [0u8; 1];
    loop {
        pipe.readable().await.ok()?;
        match pipe.try_read(&mut byte) {
            Ok(1) => return Some(byte[0]),
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
            _ => return None,
        }
    }
}

/// An adopted shepherd: a pidfd on the pid it recorded in the `pid` file, trusted only once
/// its lock shows it still lives (so the pid cannot have been reused); otherwise (no `pid`
/// file yet) its lock is polled.
async fn wait_adopted(dir: &Path) {
    let pid = read_pid_file(dir).ok().flatten().map(|pid| pid.shepherd);
    if let Some(pidfd) = pid.and_then(|pid| sys::pidfd_open(pid).ok()) {
        match launch::shepherd_alive(dir) {
            Ok(Some(true)) => {
                if sys::wait_readable(pidfd).await.is_ok() {
                    return;
                }
            }
            Ok(_) => return,
            Err(_) => {}
        }
    }
    wait_lock(dir).await;
}

/// Polls the shepherd's lock until it is free (the shepherd has ended).
async fn wait_lock(dir: &Path) {
    while launch::shepherd_alive(dir).ok() == Some(Some(true)) {
        tokio::time::sleep(Duration::from_millis(GONE_POLL_MS)).await;
    }
}
