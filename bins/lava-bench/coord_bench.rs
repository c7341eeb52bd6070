//! The `coord` benchmark: the real coordinator (the release binary next to `lava-bench`)
//! in a throw-away cluster ([`BenchCluster`]) with the host's real sbatchd issuing the
//! credential of every connection, driven through the worker-client library
//! (`lava_coordinator::client`), one connection per thread, every answer sent only after
//! its WAL records are durable.
//!
//! - **cycle**: workers each loop `submit → lease → heartbeat → complete` for `--secs`
//!   seconds; four durable WAL events per cycle. Two shapes, both run unless
//!   `--pipeline`/`--no-pipeline`/`--workers` pick one: **sequential**, 4 workers each
//!   sending one request per round trip (four per cycle), a small deployment; and
//!   **pipelined**, 16 workers each sending the heartbeat and completion of the task it
//!   holds together with its next submission and lease request, in one write, and reading
//!   the four answers (one round trip per cycle). When `beanstalkd` is on `PATH`, each
//!   shape is then run against it too, with its binlog fsynced after every write
//!   (`-f 0`): `put → reserve → touch → delete` over its text protocol, the same shape
//!   (`skipped` otherwise). `--rounds N` alternates N runs of each server per shape and
//!   compares their medians.
//! - **submit**: `--submitters` threads (64) each submit in a loop for `--secs` seconds, one
//!   request per round trip (`--submit-batch N`: N pipelined submissions per round trip).
//! - **restart**: a WAL of `--wal-entries` records (1,000,000) is written in-process by the
//!   real logic (`Coord::step` fed submissions, leases, heartbeats and completions, four
//!   events per task) and encoded with the daemon's own codec into the log opened by its own
//!   `journal::open`; no snapshot, so every record is replayed. Then the coordinator is
//!   spawned on it and the clock runs until a COUNTS query is answered.
//!
//! ```text
//! coord_cycle shape=sequential workers=4 pipelined=0 cycles=... secs=... cycles_per_s=...
//!     records_per_cycle=... fsyncs_per_cycle=... records_per_fsync=...
//!     server_cpu_us_per_cycle=... client_cpu_us_per_cycle=... commit_us_mean=...
//! beanstalkd_cycle shape=sequential workers=4 pipelined=0 ... (the same keys) binlog_fsync=every_write
//! coord_vs_beanstalkd shape=sequential workers=4 rounds=... coord_cycles_per_s=... beanstalkd_cycles_per_s=...
//!     ratio=... server_cpu_ratio=... (medians) lone_fsync_us=... loadavg=...
//! coord_submit submitters=64 batch=1 tasks=... secs=... tasks_per_s=... events_per_fsync=... server_cpu_us_per_task=...
//! coord_restart wal_entries=... log_bytes=... write_secs=... secs_to_serving=... tasks=...
//! ```
//!
//! The coordinator's records and fsyncs come from its STATS (`wal.appends`, `wal.fsyncs`)
//! before and after the run; beanstalkd's from its `stats` (`binlog-records-written`: with
//! `-f 0` each binlog write is followed by its own fsync). `events_per_fsync` of `submit`
//! comes from the coordinator's closing log line. The CPU figures (user plus system time of
//! the server's process from `/proc/PID/stat`, and of this one's client threads, per cycle)
//! say where the time goes on a machine shared with other work. `commit_us_mean` is the
//! coordinator's mean group commit during the run (STATS `wal.group_commit_us_mean`);
//! `lone_fsync_us` the median of 200 lone 100-byte writes each followed by `fdatasync`,
//! probed in the temporary folder before each round, and `loadavg` the 1-minute load
//! average at the end: the disk and the machine the ratio was measured on (docs/benchmarks.md,
//! "What bounds the ratio").
//!
//! Goals (issue 6): cycles_per_s ≥ 20,000; tasks_per_s ≥ 50,000; 10,000,000 WAL entries
//! serving within 5 s. Issue 21: the sequential shape at ≥ 2 × beanstalkd's figure of the
//! same run.

use std::fs;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use lava_coord_ll::{Caller, Limits, Payload, Request as LlRequest, UserName, WorkerName};
use lava_coord_logic::{ClientId, Coord, CoordConfig, Effect, Input};
use lava_coord_wire::{
    ErrorReply, Heartbeat, LeaseReply, LeaseRequest, Reply, Request, SubmitTask, TaskOutcome,
};
use lava_coordinator::client::{Client, Endpoint};
use lava_coordinator::codec::encode_into;
use lava_coordinator::journal;

use crate::cluster::{BenchCluster, CLUSTER_NAME, sibling_binary};

const STARTUP_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug)]
struct Options {
    what: String,
    /// `--workers`; `None`: each shape's own count.
    workers: Option<usize>,
    submitters: usize,
    secs: f64,
    wal_entries: u64,
    /// `--pipeline` / `--no-pipeline`; `None`: both shapes.
    pipeline: Option<bool>,
    submit_batch: usize,
    /// `cycle`: runs of each server per shape, alternated (medians compared).
    rounds: usize,
    keep: bool,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        what: "all".into(),
        workers: None,
        submitters: 64,
        secs: 5.0,
        wal_entries: 1_000_000,
        pipeline: None,
        submit_batch: 1,
        rounds: 1,
        keep: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--workers" => options.workers = Some(value()?.parse()?),
            "--submitters" => options.submitters = value()?.parse()?,
            "--secs" => options.secs = value()?.parse()?,
            "--wal-entries" => options.wal_entries = value()?.parse()?,
            "--pipeline" => options.pipeline = Some(true),
            "--no-pipeline" => options.pipeline = Some(false),
            "--keep" => options.keep = true,
            "--rounds" => options.rounds = value()?.parse::<usize>()?.max(1),
            "--submit-batch" => options.submit_batch = value()?.parse::<usize>()?.max(1),
            "cycle" | "submit" | "restart" | "all" => options.what = arg.clone(),
            other => bail!(
                "unknown option {other}; usage: lava-bench coord [cycle|submit|restart|all] \
                 [--workers N] [--submitters N] [--secs S] [--wal-entries N] [--pipeline|--no-pipeline] \
                 [--submit-batch N] [--rounds N] [--keep]"
            ),
        }
    }
    Ok(options)
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let all = options.what == "all";
    if all || options.what == "cycle" {
        cycle(&options)?;
    }
    if all || options.what == "submit" {
        submit(&options)?;
    }
    if all || options.what == "restart" {
        restart(&options)?;
    }
    Ok(())
}

/// A coordinator process in its own group, killed when dropped.
struct Coordinator {
    child: Option<Child>,
    log: PathBuf,
}

impl Coordinator {
    fn spawn(cluster: &BenchCluster) -> anyhow::Result<(Coordinator, PathBuf)> {
        let port_file = cluster.dir().join("coord.port");
        let log = cluster.dir().join("log/coordinator.bench.log");
        let stderr = fs::File::create(&log).with_context(|| format!("create {}", log.display()))?;
        let child = Command::new(sibling_binary("coordinator")?)
            .arg("--envdir")
            .arg(cluster.envdir())
            .args(["--port", "0", "--port-file"])
            .arg(&port_file)
            // The closing line (appends and fsyncs) is at info level.
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .process_group(0)
            .spawn()
            .context("spawn the coordinator")?;
        Ok((Coordinator { child: Some(child), log }, port_file))
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls the port file, then COUNTS, until answered.
    fn wait_serving(&mut self, port_file: &Path, cmd_socket: &Path) -> anyhow::Result<Endpoint> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Ok(text) = fs::read_to_string(port_file)
                && let Ok(port) = text.trim().parse::<u16>()
            {
                let endpoint = Endpoint::new(
                    SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
                    cmd_socket,
                    CLUSTER_NAME,
                );
                if let Ok(mut client) = Client::connect(&endpoint)
                    && client.counts().is_ok()
                {
                    return Ok(endpoint);
                }
            }
            let exited = self.child.as_mut().is_none_or(|child| !matches!(child.try_wait(), Ok(None)));
            if exited {
                bail!("the coordinator exited before serving:\n{}", self.log());
            }
            if Instant::now() > deadline {
                bail!("the coordinator did not serve within {STARTUP_TIMEOUT:?}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _already_dead = child.kill();
            let _reaped = child.wait();
        }
    }
}

/// The credential socket of the cluster's sbatchd.
fn cmd_socket(cluster: &BenchCluster) -> PathBuf {
    cluster.dir().join("run/lava.sock")
}

/// A cluster with its sbatchd (credentials) and a coordinator, serving.
struct Running {
    _cluster: BenchCluster,
    _sbatchd: crate::cluster::Daemon,
    coordinator: Coordinator,
    endpoint: Endpoint,
}

fn start() -> anyhow::Result<Running> {
    let mut cluster = BenchCluster::new(None)?;
    let sbatchd = cluster.start_sbatchd()?;
    let (mut coordinator, port_file) = Coordinator::spawn(&cluster)?;
    let endpoint = coordinator.wait_serving(&port_file, &cmd_socket(&cluster))?;
    Ok(Running { _cluster: cluster, _sbatchd: sbatchd, coordinator, endpoint })
}

/// CPU seconds (user + system, all threads) a process used so far, from `/proc/PID/stat`.
fn cpu_secs(pid: &str) -> f64 {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { return f64::NAN };
    // The fields after the command name (in parentheses, may hold blanks); utime and stime
    // are fields 14 and 15 of proc(5), 12 and 13 here, in clock ticks of 1/100 s.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks = |idx: usize| fields.get(idx).and_then(|field| field.parse::<f64>().ok()).unwrap_or(f64::NAN);
    (ticks(11) + ticks(12)) / 100.0
}

impl Coordinator {
    fn pid(&self) -> String {
        self.child.as_ref().map_or_else(String::new, |child| child.id().to_string())
    }
}

/// The WAL records per fsync, from the coordinator's closing log line (after SIGTERM).
fn events_per_fsync(coordinator: &mut Coordinator) -> String {
    if let Some(child) = coordinator.child.as_mut() {
        let _sent = Command::new("kill").args(["-s", "TERM", &child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let log = coordinator.log();
    let field = |line: &str, name: &str| -> Option<f64> {
        let at = line.find(&format!("{name}="))? + name.len() + 1;
        line[at..].split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    };
    log.lines()
        .rev()
        .find(|line| line.contains("closing the event log"))
        .and_then(|line| Some(field(line, "appends")? / field(line, "fsyncs")?.max(1.0)))
        .map_or_else(|| "?".to_owned(), |ratio| format!("{ratio:.1}"))
}

/// Runs `threads` copies of `body` (each returns how many tasks it finished) for `secs`.
fn run_threads(
    threads: usize,
    secs: f64,
    endpoint: &Endpoint,
    body: fn(&mut Client, usize, &AtomicBool) -> anyhow::Result<u64>,
) -> anyhow::Result<(u64, f64)> {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (stop, done, endpoint) = (Arc::clone(&stop), Arc::clone(&done), endpoint.clone());
            std::thread::spawn(move || -> anyhow::Result<()> {
                let mut client = Client::connect(&endpoint)?;
                let n = body(&mut client, i, &stop)?;
                done.fetch_add(n, Ordering::Relaxed);
                Ok(())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for handle in handles {
        handle.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
    }
    Ok((done.load(Ordering::Relaxed), started.elapsed().as_secs_f64()))
}

/// One shape of the cycle benchmark: how many workers, and whether each pipelines.
#[derive(Clone, Copy, Debug)]
struct Shape {
    workers: usize,
    pipelined: bool,
}

impl Shape {
    fn name(self) -> &'static str {
        if self.pipelined { "pipelined" } else { "sequential" }
    }
}

/// The shapes `cycle` runs: the one the options name, else both defaults.
fn shapes(options: &Options) -> Vec<Shape> {
    match (options.workers, options.pipeline) {
        (None, None) => vec![
            Shape { workers: SEQUENTIAL_WORKERS, pipelined: false },
            Shape { workers: PIPELINED_WORKERS, pipelined: true },
        ],
        (workers, pipeline) => {
            let pipelined = pipeline.unwrap_or(true);
            let default = if pipelined { PIPELINED_WORKERS } else { SEQUENTIAL_WORKERS };
            vec![Shape { workers: workers.unwrap_or(default), pipelined }]
        }
    }
}

/// The few-sequential-workers shape: workers, one request outstanding each.
const SEQUENTIAL_WORKERS: usize = 4;
/// The pipelined shape's workers.
const PIPELINED_WORKERS: usize = 16;

/// What one cycle run measured.
struct CycleRun {
    cycles: u64,
    secs: f64,
    server_cpu_s: f64,
    client_cpu_s: f64,
    /// Records the server made durable, and its fsyncs, during the run.
    records: f64,
    fsyncs: f64,
    /// The coordinator's mean group commit (write and fdatasync) during the run, in µs.
    commit_us: Option<f64>,
}

impl CycleRun {
    fn rate(&self) -> f64 {
        self.cycles as f64 / self.secs
    }

    fn print(&self, name: &str, shape: Shape, extra: &str) {
        let cycles = self.cycles as f64;
        print!(
            "{name} shape={} workers={} pipelined={} cycles={} secs={:.2} cycles_per_s={:.0} \
             records_per_cycle={:.2} fsyncs_per_cycle={:.3} records_per_fsync={:.1} \
             server_cpu_us_per_cycle={:.1} client_cpu_us_per_cycle={:.1}{extra}",
            shape.name(),
            shape.workers,
            u8::from(shape.pipelined),
            self.cycles,
            self.secs,
            self.rate(),
            self.records / cycles,
            self.fsyncs / cycles,
            self.records / self.fsyncs.max(1.0),
            self.server_cpu_s * 1e6 / cycles,
            self.client_cpu_s * 1e6 / cycles,
        );
        if let Some(us) = self.commit_us {
            print!(" commit_us_mean={us:.0}");
        }
        println!();
    }
}

fn cycle(options: &Options) -> anyhow::Result<()> {
    let beanstalkd = beanstalkd_binary();
    for shape in shapes(options) {
        // Alternated, so that both servers meet the same moments of a shared machine.
        let (mut ours, mut theirs, mut disk) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..options.rounds {
            disk.push(lone_fsync_us()?);
            let run = coord_cycle(options, shape)?;
            run.print("coord_cycle", shape, "");
            ours.push(run);
            match &beanstalkd {
                None => println!("beanstalkd_cycle shape={} skipped (no beanstalkd on PATH)", shape.name()),
                Some(binary) => {
                    let run = beanstalkd_cycle(binary, options, shape)?;
                    run.print("beanstalkd_cycle", shape, " binlog_fsync=every_write");
                    theirs.push(run);
                }
            }
        }
        if theirs.is_empty() {
            continue;
        }
        let median = |runs: &[CycleRun], figure: fn(&CycleRun) -> f64| {
            let mut values: Vec<f64> = runs.iter().map(figure).collect();
            values.sort_by(f64::total_cmp);
            values[values.len() / 2]
        };
        let rate = |run: &CycleRun| run.rate();
        let cpu = |run: &CycleRun| run.server_cpu_s / run.cycles as f64;
        disk.sort_by(f64::total_cmp);
        println!(
            "coord_vs_beanstalkd shape={} workers={} rounds={} coord_cycles_per_s={:.0} \
             beanstalkd_cycles_per_s={:.0} ratio={:.2} server_cpu_ratio={:.2} lone_fsync_us={:.0} \
             loadavg={}",
            shape.name(),
            shape.workers,
            options.rounds,
            median(&ours, rate),
            median(&theirs, rate),
            median(&ours, rate) / median(&theirs, rate),
            median(&ours, cpu) / median(&theirs, cpu),
            disk[disk.len() / 2],
            load_average(),
        );
    }
    Ok(())
}

/// The WAL's figures so far, from the coordinator's STATS.
struct WalCounters {
    appends: f64,
    fsyncs: f64,
    /// Group commits, and their total time in µs.
    commits: f64,
    commit_us: f64,
}

/// The WAL's appends, fsyncs and group commits so far, from the coordinator's STATS.
fn wal_counters(client: &mut Client) -> anyhow::Result<WalCounters> {
    let stats = client.stats()?;
    let get = |name: &str| {
        stats
            .iter()
            .find(|counter| counter.name == name)
            .map(|counter| counter.value as f64)
            .with_context(|| format!("STATS has {name}"))
    };
    let commits = get("wal.group_commits")?;
    Ok(WalCounters {
        appends: get("wal.appends")?,
        fsyncs: get("wal.fsyncs")?,
        commits,
        commit_us: get("wal.group_commit_us_mean")? * commits,
    })
}

/// The median time of a lone 100-byte write and `fdatasync` into preallocated space of a
/// file in the temporary folder (where both servers keep their logs), in µs: how slow the
/// disk is right now, which decides how much group commit is worth against beanstalkd's
/// fsync per record.
fn lone_fsync_us() -> anyhow::Result<f64> {
    use std::io::Write;
    use std::os::unix::fs::FileExt;
    const ROUNDS: u64 = 200;
    const RECORD: [u8; 100] = [7; 100];
    let dir = tempfile::Builder::new().prefix("lavacore-bench-fsync-").tempdir()?;
    let mut file = fs::File::create(dir.path().join("probe"))?;
    file.write_all(&vec![0; (ROUNDS as usize + 1) * RECORD.len()])?;
    file.sync_all()?;
    let mut times = Vec::with_capacity(ROUNDS as usize);
    for i in 0..ROUNDS {
        let started = Instant::now();
        file.write_at(&RECORD, i * RECORD.len() as u64)?;
        file.sync_data()?;
        times.push(started.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// The 1-minute load average (`/proc/loadavg`), or `?`.
fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

fn coord_cycle(options: &Options, shape: Shape) -> anyhow::Result<CycleRun> {
    let running = start()?;
    let endpoint = running.endpoint.clone();
    let sequential = |client: &mut Client, i: usize, stop: &AtomicBool| -> anyhow::Result<u64> {
        let name = format!("bench-worker-{i}");
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            client.submit(vec![7; 64])?;
            let grant =
                client.lease(&name)?.context("a task was submitted just before; the lease is empty")?;
            client.heartbeat(grant.task_id, grant.lease_id)?;
            client.complete(grant.task_id, grant.lease_id)?;
            n += 1;
        }
        Ok(n)
    };
    let pipelined = |client: &mut Client, i: usize, stop: &AtomicBool| -> anyhow::Result<u64> {
        let name = format!("bench-worker-{i}");
        let submit = Request::Submit(SubmitTask { payload: vec![7; 64] });
        let lease = Request::Lease(LeaseRequest { worker: name });
        let grant_of = |answer: Option<Result<Reply, ErrorReply>>| match answer {
            Some(Ok(Reply::Lease(LeaseReply { lease: Some(grant) }))) => Ok(grant),
            other => {
                Err(anyhow::anyhow!("expected a lease (each worker submits before it leases): {other:?}"))
            }
        };
        let mut answers = client.pipeline(&[submit.clone(), lease.clone()])?;
        let mut grant = grant_of(answers.pop())?;
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            let held = TaskOutcome { task_id: grant.task_id, lease_id: grant.lease_id };
            let heartbeat = Request::Heartbeat(Heartbeat { task_id: held.task_id, lease_id: held.lease_id });
            let batch = [heartbeat, Request::Complete(held), submit.clone(), lease.clone()];
            let mut answers = client.pipeline(&batch)?.into_iter();
            match (answers.next(), answers.next(), answers.next()) {
                (
                    Some(Ok(Reply::Extended(_))),
                    Some(Ok(Reply::Outcome(_))),
                    Some(Ok(Reply::Submitted(_))),
                ) => {}
                other => bail!("unexpected answers {other:?}"),
            }
            grant = grant_of(answers.next())?;
            n += 1;
        }
        Ok(n)
    };
    let body = if shape.pipelined { pipelined } else { sequential };
    let mut probe = Client::connect(&endpoint)?;
    let before = wal_counters(&mut probe)?;
    let (server_cpu, client_cpu) = (cpu_secs(&running.coordinator.pid()), cpu_secs("self"));
    let (cycles, secs) = run_threads(shape.workers, options.secs, &endpoint, body)?;
    let server_cpu_s = cpu_secs(&running.coordinator.pid()) - server_cpu;
    let client_cpu_s = cpu_secs("self") - client_cpu;
    let after = wal_counters(&mut probe)?;
    let counts = probe.counts()?;
    if counts.completed != cycles {
        bail!("{cycles} cycles finished but the coordinator counts {} completed", counts.completed);
    }
    Ok(CycleRun {
        cycles,
        secs,
        server_cpu_s,
        client_cpu_s,
        records: after.appends - before.appends,
        fsyncs: after.fsyncs - before.fsyncs,
        commit_us: Some((after.commit_us - before.commit_us) / (after.commits - before.commits).max(1.0)),
    })
}

/// `beanstalkd` on `PATH`, if installed.
fn beanstalkd_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("beanstalkd")).find(|candidate| candidate.is_file())
}

/// A beanstalkd process with its binlog in a temporary folder, killed when dropped.
struct Beanstalkd {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Beanstalkd {
    /// Starts `binary` on a free loopback port with its binlog fsynced after every write
    /// (`-f 0`), and waits until it accepts a connection.
    fn spawn(binary: &Path) -> anyhow::Result<Beanstalkd> {
        let dir = tempfile::Builder::new().prefix("lavacore-bench-beanstalkd-").tempdir()?;
        let port = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port();
        let addr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        let child = Command::new(binary)
            .args(["-l", "127.0.0.1", "-p", &port.to_string(), "-f", "0", "-b"])
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .with_context(|| format!("spawn {}", binary.display()))?;
        let mut server = Beanstalkd { child, addr, _dir: dir };
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while std::net::TcpStream::connect(addr).is_err() {
            if !matches!(server.child.try_wait(), Ok(None)) {
                bail!("beanstalkd exited before listening on {addr}");
            }
            if Instant::now() > deadline {
                bail!("beanstalkd did not listen on {addr} within {STARTUP_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        server.child.try_wait()?;
        Ok(server)
    }
}

impl Drop for Beanstalkd {
    fn drop(&mut self) {
        let _already_dead = self.child.kill();
        let _reaped = self.child.wait();
    }
}

/// One blocking connection to beanstalkd, speaking its text protocol.
struct Beanstalk {
    stream: std::io::BufReader<std::net::TcpStream>,
    out: Vec<u8>,
    line: String,
}

impl Beanstalk {
    fn connect(addr: SocketAddr) -> anyhow::Result<Beanstalk> {
        let stream = std::net::TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(Beanstalk { stream: std::io::BufReader::new(stream), out: Vec::new(), line: String::new() })
    }

    /// Queues `put` of a 64-byte job (priority 0, no delay, 60 s to run).
    fn put(&mut self) {
        self.out.extend_from_slice(b"put 0 0 60 64\r\n");
        self.out.extend_from_slice(&[b'7'; 64]);
        self.out.extend_from_slice(b"\r\n");
    }

    fn command(&mut self, line: &str) {
        self.out.extend_from_slice(line.as_bytes());
        self.out.extend_from_slice(b"\r\n");
    }

    /// Sends what was queued, in one write.
    fn send(&mut self) -> anyhow::Result<()> {
        use std::io::Write;
        self.stream.get_mut().write_all(&self.out)?;
        self.out.clear();
        Ok(())
    }

    /// Reads one answer line; fails unless it starts with `expect`. Returns the words after it.
    fn answer(&mut self, expect: &str) -> anyhow::Result<Vec<String>> {
        use std::io::BufRead;
        self.line.clear();
        if self.stream.read_line(&mut self.line)? == 0 {
            bail!("beanstalkd closed the connection");
        }
        let mut words = self.line.split_whitespace();
        if words.next() != Some(expect) {
            bail!("beanstalkd answered {:?}, expected {expect}", self.line.trim_end());
        }
        Ok(words.map(str::to_owned).collect())
    }

    /// Reads `RESERVED <id> <bytes>` and the job's body; returns the id.
    fn reserved(&mut self) -> anyhow::Result<u64> {
        use std::io::Read;
        let words = self.answer("RESERVED")?;
        let (Some(id), Some(bytes)) = (words.first(), words.get(1)) else {
            bail!("RESERVED without id and size: {:?}", self.line);
        };
        let mut body = vec![0; bytes.parse::<usize>()? + 2];
        self.stream.read_exact(&mut body)?;
        Ok(id.parse()?)
    }

    /// One `stats` figure.
    fn stat(&mut self, name: &str) -> anyhow::Result<f64> {
        use std::io::Read;
        self.command("stats");
        self.send()?;
        let words = self.answer("OK")?;
        let bytes: usize = words.first().context("OK without a size")?.parse()?;
        let mut body = vec![0; bytes + 2];
        self.stream.read_exact(&mut body)?;
        let text = String::from_utf8_lossy(&body);
        let prefix = format!("{name}: ");
        text.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .context(format!("beanstalkd's stats have no {name}"))?
            .trim()
            .parse()
            .context(format!("beanstalkd's {name}"))
    }
}

/// The same cycle on beanstalkd: put → reserve → touch → delete, one command per round
/// trip (sequential), or the touch and delete of the job held sent with the next put and
/// reserve in one write (pipelined). Its binlog is fsynced after every write (`-f 0`); the
/// records of a cycle are the put and the delete (reserve and touch are not logged), and
/// each is one fsync: `binlog-records-written` counts both.
fn beanstalkd_cycle(binary: &Path, options: &Options, shape: Shape) -> anyhow::Result<CycleRun> {
    let server = Beanstalkd::spawn(binary)?;
    let pid = server.child.id().to_string();
    let addr = server.addr;
    let mut probe = Beanstalk::connect(addr)?;
    let records = probe.stat("binlog-records-written")?;
    let (server_cpu, client_cpu) = (cpu_secs(&pid), cpu_secs("self"));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..shape.workers)
        .map(|_| {
            let (stop, done) = (Arc::clone(&stop), Arc::clone(&done));
            std::thread::spawn(move || -> anyhow::Result<()> {
                let mut conn = Beanstalk::connect(addr)?;
                let mut n = 0;
                if shape.pipelined {
                    conn.put();
                    conn.command("reserve");
                    conn.send()?;
                    conn.answer("INSERTED")?;
                    let mut held = conn.reserved()?;
                    while !stop.load(Ordering::Relaxed) {
                        conn.command(&format!("touch {held}"));
                        conn.command(&format!("delete {held}"));
                        conn.put();
                        conn.command("reserve");
                        conn.send()?;
                        conn.answer("TOUCHED")?;
                        conn.answer("DELETED")?;
                        conn.answer("INSERTED")?;
                        held = conn.reserved()?;
                        n += 1;
                    }
                } else {
                    while !stop.load(Ordering::Relaxed) {
                        conn.put();
                        conn.send()?;
                        conn.answer("INSERTED")?;
                        conn.command("reserve");
                        conn.send()?;
                        let id = conn.reserved()?;
                        conn.command(&format!("touch {id}"));
                        conn.send()?;
                        conn.answer("TOUCHED")?;
                        conn.command(&format!("delete {id}"));
                        conn.send()?;
                        conn.answer("DELETED")?;
                        n += 1;
                    }
                }
                done.fetch_add(n, Ordering::Relaxed);
                Ok(())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(options.secs));
    stop.store(true, Ordering::Relaxed);
    for handle in handles {
        handle.join().map_err(|_| anyhow::anyhow!("a beanstalkd client thread panicked"))??;
    }
    let secs = started.elapsed().as_secs_f64();
    let server_cpu_s = cpu_secs(&pid) - server_cpu;
    let client_cpu_s = cpu_secs("self") - client_cpu;
    let written = probe.stat("binlog-records-written")? - records;
    let deleted = probe.stat("cmd-delete")?;
    let cycles = done.load(Ordering::Relaxed);
    if deleted < cycles as f64 {
        bail!("{cycles} cycles finished but beanstalkd counts {deleted} deletes");
    }
    // `-f 0`: each binlog write is followed by its own fsync.
    Ok(CycleRun {
        cycles,
        secs,
        server_cpu_s,
        client_cpu_s,
        records: written,
        fsyncs: written,
        commit_us: None,
    })
}

fn submit(options: &Options) -> anyhow::Result<()> {
    let mut running = start()?;
    let endpoint = running.endpoint.clone();
    let batch = options.submit_batch;
    SUBMIT_BATCH.store(batch, Ordering::Relaxed);
    let body = |client: &mut Client, _: usize, stop: &AtomicBool| -> anyhow::Result<u64> {
        let batch = SUBMIT_BATCH.load(Ordering::Relaxed);
        let requests = vec![Request::Submit(SubmitTask { payload: vec![7; 64] }); batch];
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            if batch == 1 {
                client.submit(vec![7; 64])?;
            } else {
                for answer in client.pipeline(&requests)? {
                    if !matches!(answer, Ok(Reply::Submitted(_))) {
                        bail!("unexpected answer {answer:?}");
                    }
                }
            }
            n += batch as u64;
        }
        Ok(n)
    };
    let server_cpu = cpu_secs(&running.coordinator.pid());
    let (tasks, secs) = run_threads(options.submitters, options.secs, &endpoint, body)?;
    let server_cpu = cpu_secs(&running.coordinator.pid()) - server_cpu;
    let counts = Client::connect(&endpoint)?.counts()?;
    if counts.waiting != tasks {
        bail!("{tasks} submissions answered but the coordinator has {} waiting", counts.waiting);
    }
    let per_fsync = events_per_fsync(&mut running.coordinator);
    println!(
        "coord_submit submitters={} batch={batch} tasks={tasks} secs={secs:.2} tasks_per_s={:.0} \
         events_per_fsync={per_fsync} server_cpu_us_per_task={:.1}",
        options.submitters,
        tasks as f64 / secs,
        server_cpu * 1e6 / tasks as f64,
    );
    Ok(())
}

/// `--submit-batch`, for the submitters' plain function bodies.
static SUBMIT_BATCH: AtomicUsize = AtomicUsize::new(1);

/// Writes `entries` WAL records with the real logic and the daemon's codec; returns the
/// number of tasks and the log's size.
fn write_wal(dir: &Path, entries: u64) -> anyhow::Result<(u64, u64)> {
    let log = journal::open(dir)?;
    let mut coord = Coord::new(CoordConfig::default());
    let worker = WorkerName::parse("bench-worker").context("worker name")?;
    let payload = Payload::new(vec![7; 64], &Limits::default()).context("payload")?;
    // Times in the last minutes, leases far in the future: nothing expires at restart.
    let mut now = lava_net::system_now_ms() - 600_000;
    let mut effects = Vec::new();
    let mut record = Vec::new();
    let mut written = 0u64;
    let mut tasks = 0u64;
    let mut step =
        |coord: &mut Coord, now: u64, request: LlRequest, written: &mut u64| -> anyhow::Result<u64> {
            effects.clear();
            let caller = Caller { uid: 0, user: UserName::parse("root").expect("a valid name") };
            coord.step(now, Input::Request { client: ClientId(1), caller, request }, &mut effects);
            let mut reply_task = 0;
            for effect in &effects {
                match effect {
                    Effect::Append(event) => {
                        record.clear();
                        encode_into(event, &mut record);
                        log.append(&record)?;
                        *written += 1;
                        reply_task = event.task().get();
                    }
                    Effect::Respond { reply: lava_coord_wire::Reply::Lease(reply), .. } => {
                        return Ok(reply.lease.as_ref().map_or(0, |grant| grant.lease_id));
                    }
                    Effect::Respond { .. } => {}
                }
            }
            Ok(reply_task)
        };
    while written < entries {
        now += 1;
        let left = entries - written;
        let task = step(&mut coord, now, LlRequest::Submit { payload: payload.clone() }, &mut written)?;
        tasks += 1;
        if left < 4 {
            continue;
        }
        let lease = step(&mut coord, now, LlRequest::Lease { worker: worker.clone() }, &mut written)?;
        let lease_ref = lava_coord_ll::LeaseRef {
            task: lava_coord_ll::TaskId::new("task", task)?,
            lease: lava_coord_ll::LeaseId::new("lease", lease)?,
        };
        step(&mut coord, now, LlRequest::Heartbeat(lease_ref), &mut written)?;
        step(
            &mut coord,
            now,
            LlRequest::Finish { lease: lease_ref, outcome: lava_coord_ll::Outcome::Completed },
            &mut written,
        )?;
    }
    let log = Arc::try_unwrap(log).map_err(|_| anyhow::anyhow!("the log is still shared"))?;
    log.close()?;
    let bytes =
        fs::read_dir(dir)?.flatten().filter_map(|entry| entry.metadata().ok()).map(|meta| meta.len()).sum();
    Ok((tasks, bytes))
}

fn restart(options: &Options) -> anyhow::Result<()> {
    let mut cluster = BenchCluster::new(None)?;
    if options.keep {
        cluster.keep();
    }
    let _sbatchd = cluster.start_sbatchd()?;
    let wal_dir = cluster.dir().join("work").join(CLUSTER_NAME).join("coord");
    let started = Instant::now();
    let (tasks, log_bytes) = write_wal(&wal_dir, options.wal_entries)?;
    let write_secs = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let (mut coordinator, port_file) = Coordinator::spawn(&cluster)?;
    let endpoint = coordinator.wait_serving(&port_file, &cmd_socket(&cluster))?;
    let secs = started.elapsed().as_secs_f64();
    let counts = Client::connect(&endpoint)?.counts()?;
    let total = counts.waiting + counts.leased + counts.completed + counts.failed;
    if total != tasks {
        bail!("{tasks} tasks written but the coordinator counts {total}");
    }
    println!(
        "coord_restart wal_entries={} log_bytes={log_bytes} write_secs={write_secs:.2} secs_to_serving={secs:.2} tasks={tasks}",
        options.wal_entries
    );
    Ok(())
}
