//! The `dlm` benchmark: two real mxfsd (the release binary next to `lava-bench`) on loopback in
//! a throw-away cluster folder ([`BenchCluster`]): `h1`, the lock master, and `h2`, a node that
//! forwards to it over TCP (authenticated frames). Clients use the client library
//! (`lava_mxfsd::client`) on each daemon's Unix socket, one connection per thread.
//!
//! - **uncontended**: a client locks EX and unlocks a resource nobody else uses, in a loop for
//!   `--secs` seconds, first on `h1` (`master=local`: the requester's node is the master), then
//!   on `h2` (`master=remote`: one TCP round trip to the master per call). Each call's round
//!   trip is timed; the median and the 99th percentile of the lock calls are reported. Run
//!   once with one client (the latency of a lone caller) and once with `--clients` clients at
//!   once, each on its own resource (the daemon's throughput for uncontended locks).
//! - **handoff**: `--clients` threads (8) on `h1` each loop lock EX / unlock on one shared
//!   resource for `--secs` seconds; every grant is a handoff. The spread of grants per client
//!   shows the FIFO queue at work (no client starved).
//!
//! Each line also gives the CPU time spent per pair (or handoff) during the measurement:
//! `daemon_cpu_us` by both mxfsd together, `client_cpu_us` by this process (the client
//! threads), user + system, from `/proc/PID/stat` (in ticks of 10 ms: over 3 s of two busy
//! cores, about 1 % of resolution). On a shared machine that is steadier than the rate.
//!
//! ```text
//! dlm_uncontended master=local clients=1 pairs=... secs=... pairs_per_s=... median_us=... p99_us=... unlock_median_us=... daemon_cpu_us=... client_cpu_us=...
//! dlm_uncontended master=remote clients=1 pairs=... (and the same keys)
//! dlm_uncontended master=local clients=8 pairs=... (and remote)
//! dlm_handoff clients=8 master=local handoffs=... secs=... handoffs_per_s=... min_per_client=... max_per_client=... daemon_cpu_us=... client_cpu_us=...
//! ```
//!
//! Goals (issue 5): ≥ 50,000 pairs/s with a local master, ≥ 15,000/s through a remote master,
//! median round trip ≤ 100 µs, ≥ 10,000 handoffs/s among 8 clients.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use lava_mxfsd::client::{Client, LockMode};

use crate::cluster::{BenchCluster, CLUSTER_NAME, process_cpu_secs, sibling_binary};

const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
const HOSTS: [&str; 2] = ["h1", "h2"];

#[derive(Debug)]
struct Options {
    what: String,
    secs: f64,
    clients: usize,
    keep: bool,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options { what: "all".to_owned(), secs: 3.0, clients: 8, keep: false };
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let mut value = |name: &str| iter.next().with_context(|| format!("{name} needs a value")).cloned();
        match arg.as_str() {
            "--what" => options.what = value("--what")?,
            "--secs" => options.secs = value("--secs")?.parse().context("--secs: a number of seconds")?,
            "--clients" => options.clients = value("--clients")?.parse().context("--clients: a number")?,
            "--keep" => options.keep = true,
            other => bail!(
                "unknown option '{other}' (lava-bench dlm [--what all|uncontended|handoff] [--secs S] \
                 [--clients N] [--keep])"
            ),
        }
    }
    if !["all", "uncontended", "handoff"].contains(&options.what.as_str()) {
        bail!("--what {}: expected all, uncontended or handoff", options.what);
    }
    if options.clients == 0 || options.secs <= 0.0 {
        bail!("--clients and --secs must be positive");
    }
    Ok(options)
}

/// A running mxfsd; its process group is killed when dropped.
struct Mxfsd {
    child: Child,
    socket: PathBuf,
    port: u16,
    log: PathBuf,
}

impl Drop for Mxfsd {
    fn drop(&mut self) {
        // SIGKILL to its process group, as the other benchmarks stop their daemons.
        let _killed = std::process::Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _reaped = self.child.wait();
    }
}

/// Writes lsf.cluster with h1 and h2 on 127.0.0.1 and the mxfsd ports known so far.
fn write_cluster(cluster: &BenchCluster, ports: &[u16]) -> anyhow::Result<()> {
    let mut rows = String::new();
    for (idx, host) in HOSTS.iter().enumerate() {
        let port = ports.get(idx).copied().unwrap_or(21_000 + idx as u16);
        // Hosts sharing an address need distinct ports in every column; nothing listens on
        // the LIM and SBD ones.
        let (lim_port, sbd_port) = (21_100 + idx, 21_200 + idx);
        rows.push_str(&format!("{host}  !  !  1  (cs linux)  127.0.0.1  {lim_port}  {sbd_port}  {port}\n"));
    }
    let path = cluster.envdir().join(format!("lsf.cluster.{CLUSTER_NAME}"));
    let text = format!(
        "# Written by lava-bench dlm.\n\
         Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\n\
         Begin Host\n\
         HOSTNAME  model  type  server  RESOURCES  LAVA_ADDR  LAVA_LIM_PORT  LAVA_SBD_PORT  LAVA_MXFSD_PORT\n\
         {rows}End Host\n"
    );
    fs::write(&path, text).with_context(|| format!("write {}", path.display()))
}

fn start(cluster: &BenchCluster, idx: usize) -> anyhow::Result<Mxfsd> {
    let host = HOSTS[idx];
    let socket = cluster.dir().join(format!("run/{host}.mxfsd.sock"));
    let ready = cluster.dir().join(format!("run/{host}.mxfsd.port"));
    let log = cluster.dir().join(format!("log/mxfsd.{host}.log"));
    let stderr = fs::File::create(&log).with_context(|| format!("create {}", log.display()))?;
    let child = cluster
        .command(sibling_binary("mxfsd")?)
        .args(["--host", host, "--port", "0"])
        .arg("--socket")
        .arg(&socket)
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::null())
        .stderr(stderr)
        .process_group(0)
        .spawn()
        .context("start mxfsd")?;
    let mut daemon = Mxfsd { child, socket, port: 0, log };
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if let Ok(text) = fs::read_to_string(&ready)
            && let Ok(port) = text.trim().parse::<u16>()
        {
            daemon.port = port;
            return Ok(daemon);
        }
        if daemon.child.try_wait()?.is_some() || Instant::now() > deadline {
            bail!("mxfsd {host} did not start:\n{}", fs::read_to_string(&daemon.log).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until `socket`'s status text satisfies `ready`.
fn wait_status(socket: &Path, what: &str, ready: impl Fn(&str) -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if let Ok(mut client) = Client::connect(socket)
            && let Ok(text) = client.status()
            && ready(&text)
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{what} not within {STARTUP_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the `dlm` benchmark; see the module doc.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let mut cluster = BenchCluster::new(None)?;
    if options.keep {
        cluster.keep();
    }
    write_cluster(&cluster, &[])?;
    let h1 = start(&cluster, 0)?;
    write_cluster(&cluster, &[h1.port])?;
    let h2 = start(&cluster, 1)?;
    wait_status(&h2.socket, "h2 joining h1", |text| text.contains("MASTER CONNECTION: joined"))?;
    wait_status(&h1.socket, "h1 serving", |text| text.contains("STATE: serving\n"))?;
    let secs = Duration::from_secs_f64(options.secs);
    let cpu = CpuMeter { daemons: [h1.child.id(), h2.child.id()] };
    if options.what != "handoff" {
        // One client: the round trip of a lone caller. Then `--clients` at once: throughput.
        for clients in [1, options.clients] {
            uncontended(&h1.socket, "local", clients, secs, &cpu)?;
            uncontended(&h2.socket, "remote", clients, secs, &cpu)?;
        }
    }
    if options.what != "uncontended" {
        handoff(&h1.socket, "local", options.clients, secs, &cpu)?;
    }
    drop((h2, h1));
    Ok(())
}

/// CPU seconds used so far by the daemons and by this process (the clients).
struct CpuMeter {
    daemons: [u32; 2],
}

impl CpuMeter {
    fn read(&self) -> anyhow::Result<(f64, f64)> {
        let mut daemons = 0.0;
        for pid in self.daemons {
            daemons += process_cpu_secs(pid)?.0;
        }
        Ok((daemons, process_cpu_secs(std::process::id())?.0))
    }

    /// `daemon_cpu_us=... client_cpu_us=...`: the CPU used since `before`, per one of `count`.
    fn per(&self, before: (f64, f64), count: u64) -> anyhow::Result<String> {
        let after = self.read()?;
        let per = |secs: f64| secs * 1e6 / count.max(1) as f64;
        Ok(format!(
            "daemon_cpu_us={:.1} client_cpu_us={:.1}",
            per(after.0 - before.0),
            per(after.1 - before.1)
        ))
    }
}

fn percentile(sorted: &[Duration], per_cent: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = (sorted.len() * per_cent / 100).min(sorted.len() - 1);
    sorted[idx].as_secs_f64() * 1e6
}

fn uncontended(
    socket: &Path,
    master: &str,
    clients: usize,
    secs: Duration,
    cpu: &CpuMeter,
) -> anyhow::Result<()> {
    // One thread per client, each on a resource of its own: nobody waits for anybody.
    let per_client = |idx: usize| -> anyhow::Result<(u64, Vec<Duration>, Vec<Duration>)> {
        let mut client = Client::connect(socket)?;
        let resource = format!("bench-uncontended-{master}-{idx}");
        // Warm-up: connections, allocations, the resource's first use.
        for _ in 0..200 {
            let grant = client.lock(&resource, LockMode::Ex, false, None)?;
            client.unlock(grant.handle)?;
        }
        let mut round_trips = Vec::with_capacity(1 << 20);
        let mut unlocks = Vec::with_capacity(1 << 20);
        let started = Instant::now();
        let mut pairs = 0u64;
        while started.elapsed() < secs {
            let before = Instant::now();
            let grant = client.lock(&resource, LockMode::Ex, false, None)?;
            let granted = Instant::now();
            client.unlock(grant.handle)?;
            unlocks.push(granted.elapsed());
            round_trips.push(granted - before);
            pairs += 1;
        }
        Ok((pairs, round_trips, unlocks))
    };
    let cpu_before = cpu.read()?;
    let started = Instant::now();
    let results: Vec<anyhow::Result<_>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..clients).map(|idx| scope.spawn(move || per_client(idx))).collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let (mut pairs, mut round_trips, mut unlocks) = (0, Vec::new(), Vec::new());
    for result in results {
        let (n, trips, unlock_trips) = result?;
        pairs += n;
        round_trips.extend(trips);
        unlocks.extend(unlock_trips);
    }
    round_trips.sort_unstable();
    unlocks.sort_unstable();
    println!(
        "dlm_uncontended master={master} clients={clients} pairs={pairs} secs={elapsed:.2} pairs_per_s={:.0} \
         median_us={:.1} p99_us={:.1} unlock_median_us={:.1} {}",
        pairs as f64 / elapsed,
        percentile(&round_trips, 50),
        percentile(&round_trips, 99),
        percentile(&unlocks, 50),
        cpu.per(cpu_before, pairs)?
    );
    Ok(())
}

fn handoff(
    socket: &Path,
    master: &str,
    clients: usize,
    secs: Duration,
    cpu: &CpuMeter,
) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(std::sync::Barrier::new(clients + 1));
    let mut threads = Vec::new();
    for _ in 0..clients {
        let (socket, stop, start) = (socket.to_owned(), Arc::clone(&stop), Arc::clone(&start));
        threads.push(std::thread::spawn(move || -> anyhow::Result<u64> {
            let mut client = Client::connect(&socket)?;
            start.wait();
            let mut grants = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let grant = client.lock("bench-handoff", LockMode::Ex, false, None)?;
                client.unlock(grant.handle)?;
                grants += 1;
            }
            Ok(grants)
        }));
    }
    start.wait();
    let cpu_before = cpu.read()?;
    let started = Instant::now();
    std::thread::sleep(secs);
    stop.store(true, Ordering::Relaxed);
    let mut per_client = Vec::new();
    for thread in threads {
        per_client.push(thread.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let handoffs: u64 = per_client.iter().sum();
    println!(
        "dlm_handoff clients={clients} master={master} handoffs={handoffs} secs={elapsed:.2} handoffs_per_s={:.0} \
         min_per_client={} max_per_client={} {}",
        handoffs as f64 / elapsed,
        per_client.iter().min().unwrap_or(&0),
        per_client.iter().max().unwrap_or(&0),
        cpu.per(cpu_before, handoffs)?
    );
    Ok(())
}
