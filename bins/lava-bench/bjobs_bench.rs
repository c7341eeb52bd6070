//! The `bjobs` benchmark: the wall time of the real `bjobs -u all`, from spawn until its
//! whole listing is read and it has exited, with `--jobs` jobs in the system.
//!
//! A fresh one-host cluster whose host takes no jobs (`MXJ 0` in `lsb.hosts`) runs mbatchd
//! and sbatchd (whose credential socket the commands need); `--jobs` jobs of
//! [`crate::client::true_job`] are submitted over `--connections` connections (see
//! [`crate::submit_bench::submit_parallel`]) and all stay pending. Then:
//!
//! 1. `bjobs_query`: the JOB_QUERY pages of `bjobs -u all` asked in-process over one
//!    connection, `--runs` times: mbatchd's share of the work (selection, encoding, paging)
//!    without the command's formatting.
//! 2. `bjobs_all`: `--runs` runs of the real `bjobs -u all`, standard output read to the
//!    end through a pipe, each timed from spawn to exit; its lines are counted and must be
//!    the header plus one line per job. The CPU time of `bjobs` (user + system, from
//!    lava-bench's reaped children) and of mbatchd during each run are medians too: the
//!    wall time of a shared machine is noisy, the CPU time much less so.
//!
//! ```text
//! bjobs_setup jobs=100000 connections=32 submit_secs=...
//! bjobs_query jobs=100000 runs=5 pages=... median_ms=... min_ms=...
//! bjobs_all jobs=100000 runs=5 lines=100001 bytes=... median_ms=... min_ms=... max_ms=... bjobs_cpu_ms=... mbatchd_cpu_ms=...
//! bjobs_memory jobs=100000 rss_empty_kib=... rss_live_kib=... rss_replayed_kib=... live_bytes_per_job=... replayed_bytes_per_job=...
//! ```
//!
//! 3. `bjobs_memory`: mbatchd's RSS before the submissions, after them (live), and after a
//!    `kill -9` and restart has rebuilt the same jobs from the log (replayed), per job; each
//!    read once it has settled (a snapshot of the state may still be under way).
//!
//! Goal: `bjobs_all median_ms` ≤ 500.

use std::io::Read;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail, ensure};

use crate::client::{self, Connection, User, quantile};
use crate::cluster::{BenchCluster, Daemon, process_cpu_secs, sibling_binary};
use crate::submit_bench::submit_parallel;

/// Jobs in the system, by default.
const JOBS_DEFAULT: usize = 100_000;
/// Concurrent submitting connections, by default.
const CONNECTIONS_DEFAULT: usize = 32;
/// Timed runs of each measurement, by default.
const RUNS_DEFAULT: usize = 5;

struct Options {
    jobs: usize,
    connections: usize,
    runs: usize,
}

const USAGE: &str = "options: --jobs N, --connections C, --runs R";

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options { jobs: JOBS_DEFAULT, connections: CONNECTIONS_DEFAULT, runs: RUNS_DEFAULT };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let target = match flag.as_str() {
            "--jobs" => &mut options.jobs,
            "--connections" => &mut options.connections,
            "--runs" => &mut options.runs,
            other => bail!("unknown option '{other}' ({USAGE})"),
        };
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        *target = value.parse().with_context(|| format!("{flag} {value}: not a count"))?;
    }
    ensure!(options.connections >= 1 && options.jobs >= options.connections, "need 1 ≤ connections ≤ jobs");
    ensure!(options.runs >= 1, "need at least one run");
    Ok(options)
}

/// Runs the benchmark with `args`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let mut cluster = BenchCluster::new(Some(0))?;
    // A million jobs in the system need ids past LSF's default MAX_JOBID of 999,999.
    cluster.set_lsb_param("MAX_JOBID", "99999999")?;
    // No switch of the event log while the jobs arrive: each one writes the whole backlog
    // into a new text view (docs/operations.md), gigabytes over a million pending jobs.
    cluster.set_lsb_param("MAX_JOB_NUM", "1000000000")?;
    let mut mbatchd = cluster.start_mbatchd(&[])?;
    let _sbatchd = cluster.start_sbatchd()?;
    let rss_empty_kib = mbatchd.rss_kb()?;
    let submitted = submit_parallel(&cluster, client::true_job(), options.jobs, options.connections)?;
    println!(
        "bjobs_setup jobs={} connections={} submit_secs={:.3}",
        options.jobs, options.connections, submitted.secs
    );
    query_only(&cluster, &options)?;
    bjobs_all(&cluster, &mbatchd, &options)?;
    // mbatchd's memory for the pending jobs as submitted, and as rebuilt from the log by
    // a restart: what the state costs, apart from what the submissions left behind.
    let rss_live_kib = settled_rss_kib(&mbatchd)?;
    mbatchd.kill();
    let mut mbatchd = cluster.start_mbatchd(&[])?;
    let mut connection =
        Connection::connect(cluster.mbd_addr()?, cluster.authenticator()?, User::current()?)?;
    connection.query(&client::query_jobs(Vec::new()))?;
    let rss_replayed_kib = settled_rss_kib(&mbatchd)?;
    let per_job = |kib: u64| kib.saturating_sub(rss_empty_kib) as f64 * 1024.0 / options.jobs as f64;
    println!(
        "bjobs_memory jobs={} rss_empty_kib={rss_empty_kib} rss_live_kib={rss_live_kib} rss_replayed_kib={rss_replayed_kib} \
         live_bytes_per_job={:.0} replayed_bytes_per_job={:.0}",
        options.jobs,
        per_job(rss_live_kib),
        per_job(rss_replayed_kib),
    );
    mbatchd.kill();
    Ok(())
}

/// mbatchd's RSS once it has settled: a snapshot of the whole state (every
/// `--snapshot-events` events) may still be copying and encoding when the last job is
/// in, and what it holds is not the jobs' cost. Read each second until two readings a
/// second apart are within 1 % (at most 60 s).
fn settled_rss_kib(mbatchd: &Daemon) -> anyhow::Result<u64> {
    let mut last = mbatchd.rss_kb()?;
    for _ in 0..60 {
        std::thread::sleep(std::time::Duration::from_secs(1));
        let now = mbatchd.rss_kb()?;
        if now.abs_diff(last) * 100 <= last {
            return Ok(now);
        }
        last = now;
    }
    Ok(last)
}

fn query_only(cluster: &BenchCluster, options: &Options) -> anyhow::Result<()> {
    let mut connection =
        Connection::connect(cluster.mbd_addr()?, cluster.authenticator()?, User::current()?)?;
    let (mut times_ms, mut n_pages) = (Vec::with_capacity(options.runs), 0);
    for _ in 0..options.runs {
        let started = Instant::now();
        let mut query = client::query_all_users(false);
        let (mut n_jobs, mut pages) = (0, 0);
        loop {
            let reply = connection.query(&query)?;
            n_jobs += reply.jobs.len();
            pages += 1;
            if reply.next_after == 0 {
                break;
            }
            (query.after_job, query.after_index) = (reply.next_after, reply.next_after_index);
        }
        times_ms.push(started.elapsed().as_secs_f64() * 1e3);
        ensure!(n_jobs == options.jobs, "the query showed {n_jobs} jobs of {}", options.jobs);
        n_pages = pages;
    }
    times_ms.sort_by(f64::total_cmp);
    println!(
        "bjobs_query jobs={} runs={} pages={n_pages} median_ms={:.1} min_ms={:.1}",
        options.jobs,
        options.runs,
        quantile(&times_ms, 0.5),
        times_ms[0]
    );
    Ok(())
}

fn bjobs_all(cluster: &BenchCluster, mbatchd: &Daemon, options: &Options) -> anyhow::Result<()> {
    let bjobs = Arc::new(sibling_binary("bjobs")?);
    let (mut times_ms, mut n_lines, mut n_bytes) = (Vec::with_capacity(options.runs), 0, 0);
    let (mut bjobs_cpu_ms, mut mbatchd_cpu_ms) = (Vec::new(), Vec::new());
    let cpu_ms = || -> anyhow::Result<(f64, f64)> {
        let reaped = process_cpu_secs(std::process::id())?.1;
        Ok((reaped * 1e3, mbatchd.cpu_secs()?.0 * 1e3))
    };
    // One unmeasured run: the first start of a binary pays for reading it from disk.
    for run_idx in 0..=options.runs {
        let cpu_before = cpu_ms()?;
        let started = Instant::now();
        let mut child = cluster
            .command(bjobs.as_ref())
            .args(["-u", "all"])
            .current_dir("/tmp")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("run bjobs")?;
        let mut listing = Vec::new();
        child.stdout.take().context("bjobs's standard output")?.read_to_end(&mut listing)?;
        let out = child.wait_with_output().context("wait for bjobs")?;
        let elapsed = started.elapsed();
        if !out.status.success() {
            bail!("bjobs failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
        }
        n_lines = listing.iter().filter(|b| **b == b'\n').count();
        n_bytes = listing.len();
        ensure!(n_lines == options.jobs + 1, "bjobs printed {n_lines} lines for {} jobs", options.jobs);
        let cpu_after = cpu_ms()?;
        if run_idx > 0 {
            times_ms.push(elapsed.as_secs_f64() * 1e3);
            bjobs_cpu_ms.push(cpu_after.0 - cpu_before.0);
            mbatchd_cpu_ms.push(cpu_after.1 - cpu_before.1);
        }
    }
    for figures in [&mut times_ms, &mut bjobs_cpu_ms, &mut mbatchd_cpu_ms] {
        figures.sort_by(f64::total_cmp);
    }
    println!(
        "bjobs_all jobs={} runs={} lines={n_lines} bytes={n_bytes} median_ms={:.1} min_ms={:.1} max_ms={:.1} \
         bjobs_cpu_ms={:.0} mbatchd_cpu_ms={:.0}",
        options.jobs,
        options.runs,
        quantile(&times_ms, 0.5),
        times_ms[0],
        times_ms[times_ms.len() - 1],
        quantile(&bjobs_cpu_ms, 0.5),
        quantile(&mbatchd_cpu_ms, 0.5),
    );
    Ok(())
}
