//! The `failover` benchmark: mbatchd on three master candidates over the replicated event
//! log (docs/failover.md), on loopback addresses (h1 127.0.0.2, h2 .3, h3 .4; the execution
//! host's sbatchd, which `bsub` needs for its credential, on 127.0.0.1).
//!
//! 1. `failover_round`, `--rounds` times: the candidate that serves is killed (-9) and the
//!    real `bsub -H /bin/true` is started at once; the figure is the time from the kill to
//!    `bsub`'s exit with its job acknowledged by the new leader (the command's own retries
//!    included, as a user meets them). The killed candidate is started again and catches
//!    up before the next round.
//! 2. `submit_replicated`: `--jobs` durable submissions over `--connections` connections to
//!    the leader, as `lava-bench submit` measures a single master: each answer means a
//!    majority of candidates hold the JOB_NEW durably.
//!
//! ```text
//! failover_round round=1 killed=h1 leader=h2 ms=...
//! failover rounds=5 min_ms=... median_ms=... max_ms=...
//! submit_replicated candidates=3 connections=32 jobs=20000 secs=... jobs_per_s=... latency_us_p50=... latency_us_p99=...
//! ```
//!
//! Goals (issue 20): `median_ms` ≤ 5,000 with the default timeouts; `jobs_per_s` ≥ 10,000.

use std::net::{SocketAddr, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};

use crate::client::{self, quantile};
use crate::cluster::{BenchCluster, Daemon, sibling_binary};

const ROUNDS_DEFAULT: usize = 5;
const JOBS_DEFAULT: usize = 20_000;
const CONNECTIONS_DEFAULT: usize = 32;
/// Longest wait for a candidate to serve.
const LEAD_TIMEOUT: Duration = Duration::from_secs(30);

struct Options {
    rounds: usize,
    jobs: usize,
    connections: usize,
}

const USAGE: &str = "options: --rounds R, --jobs N (0 skips submit_replicated), --connections C";

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options =
        Options { rounds: ROUNDS_DEFAULT, jobs: JOBS_DEFAULT, connections: CONNECTIONS_DEFAULT };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let target = match flag.as_str() {
            "--rounds" => &mut options.rounds,
            "--jobs" => &mut options.jobs,
            "--connections" => &mut options.connections,
            other => bail!("unknown option '{other}' ({USAGE})"),
        };
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        *target = value.parse().with_context(|| format!("{flag} {value}: not a count"))?;
    }
    ensure!(options.connections >= 1, "need at least one connection");
    Ok(options)
}

/// The candidate that serves, once one does: the one whose command port answers a
/// bodiless STATUS_QUERY other than with "not the master" or "no master".
pub(crate) fn leader(candidates: &[(String, SocketAddr)]) -> anyhow::Result<usize> {
    let deadline = Instant::now() + LEAD_TIMEOUT;
    let serves = |addr: &SocketAddr| -> Option<bool> {
        use std::io::{Read, Write};
        let mut stream = TcpStream::connect_timeout(addr, Duration::from_millis(100)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
        let mut frame = Vec::new();
        for word in [1, lava_batch_wire::Operation::StatusQuery.code(), lava_batch_wire::BATCH_VERSION, 0, 0]
        {
            frame.extend_from_slice(&u32::to_be_bytes(word));
        }
        stream.write_all(&frame).ok()?;
        let mut header = [0u8; 20];
        stream.read_exact(&mut header).ok()?;
        let status = u32::from_be_bytes(header[16..20].try_into().ok()?);
        Some(status != lava_batch_wire::ERR_NOT_MASTER && status != lava_batch_wire::ERR_NO_MASTER)
    };
    loop {
        for (at, (_, addr)) in candidates.iter().enumerate() {
            if serves(addr) == Some(true) {
                return Ok(at);
            }
        }
        ensure!(Instant::now() < deadline, "no candidate serves within {LEAD_TIMEOUT:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the benchmark with `args`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let mut cluster = BenchCluster::new(None)?;
    let candidates = cluster.candidates(3)?;
    let mut daemons: Vec<Daemon> =
        candidates.iter().map(|(name, _)| cluster.start_candidate(name)).collect::<anyhow::Result<_>>()?;
    let _sbatchd = cluster.start_sbatchd()?;
    let bsub = sibling_binary("bsub")?;
    let submit = |cluster: &BenchCluster| -> anyhow::Result<()> {
        let out = cluster
            .command(&bsub)
            .args(["-H", "/bin/true"])
            .current_dir("/tmp")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .context("run bsub")?;
        if !out.status.success() {
            bail!("bsub failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    };
    leader(&candidates)?;
    submit(&cluster)?;
    let mut failover_ms = Vec::with_capacity(options.rounds);
    for round in 1..=options.rounds {
        let killed = leader(&candidates)?;
        daemons[killed].kill();
        let t0 = Instant::now();
        submit(&cluster)?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let now = leader(&candidates)?;
        println!(
            "failover_round round={round} killed={} leader={} ms={ms:.0}",
            candidates[killed].0, candidates[now].0
        );
        failover_ms.push(ms);
        daemons[killed] = cluster.start_candidate(&candidates[killed].0)?;
        // Let the returning candidate catch up before its turn to be killed may come.
        std::thread::sleep(Duration::from_secs(2));
    }
    if !failover_ms.is_empty() {
        failover_ms.sort_by(f64::total_cmp);
        println!(
            "failover rounds={} min_ms={:.0} median_ms={:.0} max_ms={:.0}",
            failover_ms.len(),
            failover_ms[0],
            quantile(&failover_ms, 0.5),
            failover_ms[failover_ms.len() - 1]
        );
    }
    if options.jobs > 0 {
        let at = leader(&candidates)?;
        let submitted = crate::submit_bench::submit_parallel_to(
            candidates[at].1,
            cluster.authenticator()?,
            client::true_job(),
            options.jobs,
            options.connections,
        )?;
        let mut latencies_us = submitted.latencies_us;
        latencies_us.sort_unstable();
        println!(
            "submit_replicated candidates=3 connections={} jobs={} secs={:.3} jobs_per_s={:.0} latency_us_p50={} \
             latency_us_p99={}",
            options.connections,
            options.jobs,
            submitted.secs,
            options.jobs as f64 / submitted.secs,
            quantile(&latencies_us, 0.5),
            quantile(&latencies_us, 0.99),
        );
    }
    Ok(())
}
