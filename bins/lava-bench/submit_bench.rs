//! The `submit` benchmark: durable job submissions to a real mbatchd, then the wall time
//! of the real `bsub` command.
//!
//! 1. `submit_durable`: a fresh cluster with mbatchd only (no sbatchd registers, so every
//!    job stays pending and only submission is measured). `--connections` threads each
//!    open one command connection and submit `--jobs / --connections` jobs one after the
//!    other, each with a fresh credential sealed with the cluster key (what the local
//!    sbatchd would hand `bsub`) and the workload of [`crate::client::true_job`]
//!    (`/bin/true` with a 2 KiB login environment). An answered SUBMIT_JOB means its
//!    JOB_NEW is on disk: mbatchd sends no answer before the fsync covering its event.
//!    Throughput is counted from the first request to the last answer; latency is per
//!    request.
//! 2. `submit_bsub`: a fresh cluster with mbatchd and sbatchd (whose credential socket
//!    `bsub` needs; it runs the jobs too), then `--bsub-runs` sequential runs of the real
//!    `bsub -o /dev/null /bin/true`, each timed from spawn to exit.
//!
//! ```text
//! submit_durable connections=32 jobs=20000 request_bytes=... secs=... jobs_per_s=... latency_us_p50=... latency_us_p99=...
//! submit_bsub runs=200 median_ms=... p99_ms=... min_ms=...
//! ```
//!
//! Goals: `jobs_per_s` ≥ 10,000; `median_ms` ≤ 5.

use std::process::Stdio;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use lava_batch_wire as wire;

use crate::client::{self, Connection, User, quantile};
use crate::cluster::{BenchCluster, sibling_binary};

/// Concurrent connections, by default.
const CONNECTIONS_DEFAULT: usize = 32;
/// Jobs submitted in all, by default.
const JOBS_DEFAULT: usize = 20_000;
/// Sequential `bsub` runs, by default.
const BSUB_RUNS_DEFAULT: usize = 200;

struct Options {
    connections: usize,
    jobs: usize,
    bsub_runs: usize,
}

const USAGE: &str = "options: --connections C, --jobs N, --bsub-runs R (0 skips submit_bsub)";

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options =
        Options { connections: CONNECTIONS_DEFAULT, jobs: JOBS_DEFAULT, bsub_runs: BSUB_RUNS_DEFAULT };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let target = match flag.as_str() {
            "--connections" => &mut options.connections,
            "--jobs" => &mut options.jobs,
            "--bsub-runs" => &mut options.bsub_runs,
            other => bail!("unknown option '{other}' ({USAGE})"),
        };
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        *target = value.parse().with_context(|| format!("{flag} {value}: not a count"))?;
    }
    ensure!(options.connections >= 1 && options.jobs >= options.connections, "need 1 ≤ connections ≤ jobs");
    Ok(options)
}

/// Runs the benchmark with `args`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    submit_durable(&options)?;
    if options.bsub_runs > 0 {
        submit_bsub(options.bsub_runs)?;
    }
    Ok(())
}

fn submit_durable(options: &Options) -> anyhow::Result<()> {
    let mut cluster = BenchCluster::new(None)?;
    let mbatchd = cluster.start_mbatchd(&[])?;
    let request = client::true_job();
    let request_bytes = lava_xdr::to_bytes(&request)?.len();
    let submitted = submit_parallel(&cluster, request, options.jobs, options.connections)?;
    let mut latencies_us = submitted.latencies_us;
    latencies_us.sort_unstable();
    println!(
        "submit_durable connections={} jobs={} request_bytes={request_bytes} secs={:.3} jobs_per_s={:.0} \
         latency_us_p50={} latency_us_p99={}",
        options.connections,
        options.jobs,
        submitted.secs,
        options.jobs as f64 / submitted.secs,
        quantile(&latencies_us, 0.5),
        quantile(&latencies_us, 0.99),
    );
    drop(mbatchd);
    Ok(())
}

/// What [`submit_parallel`] measured.
pub struct Submitted {
    /// Per request, in no particular order.
    pub latencies_us: Vec<u32>,
    /// From the first request to the last answer.
    pub secs: f64,
}

/// Submits `jobs` copies of `request` to the cluster's running mbatchd over `connections`
/// connections at once, each with a fresh credential of the current user; returns when
/// every submission is answered (durable).
pub fn submit_parallel(
    cluster: &BenchCluster,
    request: wire::SubmitRequest,
    jobs: usize,
    connections: usize,
) -> anyhow::Result<Submitted> {
    submit_parallel_to(cluster.mbd_addr()?, cluster.authenticator()?, request, jobs, connections)
}

/// [`submit_parallel`] to the mbatchd at `addr` (a master candidate that leads).
pub fn submit_parallel_to(
    addr: std::net::SocketAddr,
    auth: Arc<lava_net::Authenticator>,
    request: wire::SubmitRequest,
    jobs: usize,
    connections: usize,
) -> anyhow::Result<Submitted> {
    let user = User::current()?;
    let request = Arc::new(request);
    let start = Arc::new(Barrier::new(connections + 1));
    let mut workers = Vec::new();
    for connection_idx in 0..connections {
        // The first connections take one job more when the division leaves a remainder.
        let n_jobs = jobs / connections + usize::from(connection_idx < jobs % connections);
        let mut connection = Connection::connect(addr, Arc::clone(&auth), user.clone())?;
        let (start, request) = (Arc::clone(&start), Arc::clone(&request));
        workers.push(std::thread::spawn(move || -> anyhow::Result<(Vec<u32>, Instant)> {
            let mut latencies_us = Vec::with_capacity(n_jobs);
            start.wait();
            for request_idx in 0..n_jobs {
                let sent = Instant::now();
                connection.submit(client::request_id(connection_idx, request_idx), &request)?;
                latencies_us.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
            }
            Ok((latencies_us, Instant::now()))
        }));
    }
    start.wait();
    let started = Instant::now();
    let mut latencies_us = Vec::with_capacity(jobs);
    let mut last_answer = started;
    for worker in workers {
        let (latencies, finished) =
            worker.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
        latencies_us.extend(latencies);
        last_answer = last_answer.max(finished);
    }
    Ok(Submitted { latencies_us, secs: (last_answer - started).as_secs_f64() })
}

fn submit_bsub(runs: usize) -> anyhow::Result<()> {
    let mut cluster = BenchCluster::new(None)?;
    let _mbatchd = cluster.start_mbatchd(&[])?;
    let _sbatchd = cluster.start_sbatchd()?;
    let bsub = sibling_binary("bsub")?;
    let mut wall_ms = Vec::with_capacity(runs);
    // One unmeasured run: the first start of a binary pays for reading it from disk.
    for run_idx in 0..=runs {
        let started = Instant::now();
        let out = cluster
            .command(&bsub)
            .args(["-o", "/dev/null", "/bin/true"])
            .current_dir("/tmp")
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .output()
            .context("run bsub")?;
        let elapsed = started.elapsed();
        if !out.status.success() || !out.stdout.starts_with(b"Job <") {
            bail!(
                "bsub failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if run_idx > 0 {
            wall_ms.push(elapsed.as_secs_f64() * 1e3);
        }
    }
    wall_ms.sort_by(f64::total_cmp);
    println!(
        "submit_bsub runs={runs} median_ms={:.2} p99_ms={:.2} min_ms={:.2}",
        quantile(&wall_ms, 0.5),
        quantile(&wall_ms, 0.99),
        wall_ms[0]
    );
    // Let the last jobs finish before the cluster (and its sbatchd) is torn down.
    std::thread::sleep(Duration::from_millis(200));
    Ok(())
}
