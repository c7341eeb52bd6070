//! The `e2e` benchmark: trivial jobs through a real one-host cluster, from the first
//! submission to the last DONE.
//!
//! A fresh cluster with the release mbatchd and sbatchd (host `localhost`, `MXJ` from
//! `--mxj`: `!` is the repository's default, one slot per CPU; a number raises it, which
//! suits jobs that do nothing). One warm-up job is run to DONE first, unmeasured (sbatchd
//! is then registered and the binaries are in the page cache). Then `--connections` threads
//! submit `--jobs` jobs of `bsub -o /dev/null /bin/true` (the workload of
//! [`crate::client::true_job`]) as fast as mbatchd answers, while the main thread asks
//! mbatchd every `--poll-ms` about the lowest job ids not yet seen finished (a JOB_QUERY
//! naming up to [`QUERY_JOBS_MAX`] jobs, so no answer grows with the backlog). The clock
//! runs from the first submission to the poll that sees the last job finished.
//!
//! ```text
//! e2e jobs=10000 secs=... jobs_per_s=... slots=2 mxj=! connections=32 submit_secs=... failed=0 candidates=1 mbd_cpu_s=... leader_cpu_s=... sbd_cpu_s=... shepherd_cpu_s=...
//! ```
//!
//! The CPU seconds are those the daemons used during the measured part (`/proc/PID/stat`).
//! `shepherd_cpu_s` is that of the shepherds with their jobs, and of the shepherd zygote
//! that forks them: the zygote (sbatchd's child) with the shepherds it reaped, plus any
//! zygote sbatchd reaped meanwhile (the same accounting as when sbatchd executed each
//! shepherd itself and reaped it; the zygote's own share is the fork that sbatchd's
//! spawn used to cost). `sbd_cpu_s` is sbatchd alone.
//!
//! With `--candidates N` (N ≥ 2) mbatchd runs on N master candidates on loopback
//! addresses (docs/failover.md), as in `lava-bench failover`: the jobs go to the leader, and
//! every submission, start and finish is acknowledged only once a majority holds it
//! durably. `mbd_cpu_s` is then the sum over the candidates, `leader_cpu_s` the leader's.
//!
//! Goals: `jobs_per_s` ≥ 500; with 3 candidates, within 10 % of the single master's
//! figure (issue 20).

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use lava_batch_ll::JobStatus;
use lava_batch_wire as wire;

use crate::client::{self, Connection, User};
use crate::cluster::BenchCluster;

/// Jobs submitted, by default.
const JOBS_DEFAULT: usize = 10_000;
/// Concurrent submitting connections, by default.
const CONNECTIONS_DEFAULT: usize = 32;
/// Interval of the finish poll, by default.
const POLL_MS_DEFAULT: u64 = 100;
/// Jobs named in one poll query at most.
const QUERY_JOBS_MAX: u32 = 256;
/// Longest the whole run may take before the bench gives up.
const RUN_TIMEOUT: Duration = Duration::from_secs(900);

struct Options {
    jobs: usize,
    connections: usize,
    poll_ms: u64,
    /// `MXJ` of the host; `None` is `!`.
    mxj: Option<u32>,
    /// Master candidates; 1 is the single master.
    candidates: usize,
    keep: bool,
}

const USAGE: &str = "options: --jobs N, --connections C, --poll-ms MS, --mxj N|!, --candidates N, --keep (keep the cluster folder)";

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        jobs: JOBS_DEFAULT,
        connections: CONNECTIONS_DEFAULT,
        poll_ms: POLL_MS_DEFAULT,
        mxj: None,
        candidates: 1,
        keep: false,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        if flag == "--keep" {
            options.keep = true;
            continue;
        }
        let value = args.next().with_context(|| format!("{flag} needs a value ({USAGE})"))?;
        let bad = || format!("{flag}: cannot parse '{value}'");
        match flag.as_str() {
            "--jobs" => options.jobs = value.parse().with_context(bad)?,
            "--connections" => options.connections = value.parse().with_context(bad)?,
            "--poll-ms" => options.poll_ms = value.parse().with_context(bad)?,
            "--mxj" if value == "!" => options.mxj = None,
            "--mxj" => options.mxj = Some(value.parse().with_context(bad)?),
            "--candidates" => options.candidates = value.parse().with_context(bad)?,
            other => bail!("unknown option '{other}' ({USAGE})"),
        }
    }
    ensure!(options.connections >= 1 && options.jobs >= options.connections, "need 1 ≤ connections ≤ jobs");
    ensure!(options.mxj != Some(0), "--mxj must be at least 1");
    ensure!(options.candidates >= 1, "--candidates must be at least 1");
    Ok(options)
}

/// Runs the benchmark with `args`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let mut cluster = BenchCluster::new(options.mxj)?;
    if options.keep {
        cluster.keep();
    }
    let (mbatchds, addr, leader) = if options.candidates >= 2 {
        let candidates = cluster.candidates(options.candidates)?;
        let daemons: Vec<_> = candidates
            .iter()
            .map(|(name, _)| cluster.start_candidate(name))
            .collect::<anyhow::Result<_>>()?;
        let leader = crate::failover_bench::leader(&candidates)?;
        (daemons, candidates[leader].1, leader)
    } else {
        (vec![cluster.start_mbatchd(&[])?], cluster.mbd_addr()?, 0)
    };
    let sbatchd = cluster.start_sbatchd()?;
    let mbd_cpu = || -> anyhow::Result<(f64, f64)> {
        let (mut all, mut lead) = (0.0, 0.0);
        for (at, daemon) in mbatchds.iter().enumerate() {
            let (cpu, _) = daemon.cpu_secs()?;
            all += cpu;
            if at == leader {
                lead = cpu;
            }
        }
        Ok((all, lead))
    };
    let auth = cluster.authenticator()?;
    let user = User::current()?;
    let request = Arc::new(client::true_job());

    let mut poller = Connection::connect(addr, Arc::clone(&auth), user.clone())?;
    let warm_up = poller.submit(client::request_id(usize::MAX >> 32, 0), &request)?;
    let mut warm_up_tracker = Tracker::new(warm_up, warm_up);
    let deadline = Instant::now() + RUN_TIMEOUT;
    while !warm_up_tracker.poll(&mut poller)? {
        ensure!(Instant::now() < deadline, "the warm-up job did not finish within {RUN_TIMEOUT:?}");
        std::thread::sleep(Duration::from_millis(options.poll_ms));
    }
    ensure!(warm_up_tracker.n_failed == 0, "the warm-up job ended in EXIT: the cluster cannot run jobs");

    // mbatchd gives ids in order and nobody else submits: the bench's jobs are the next ones.
    let first = warm_up + 1;
    let last = warm_up + u32::try_from(options.jobs)?;
    let start = Arc::new(Barrier::new(options.connections + 1));
    let mut workers = Vec::new();
    for connection_idx in 0..options.connections {
        let n_jobs = options.jobs / options.connections
            + usize::from(connection_idx < options.jobs % options.connections);
        let mut connection = Connection::connect(addr, Arc::clone(&auth), user.clone())?;
        let (start, request) = (Arc::clone(&start), Arc::clone(&request));
        workers.push(std::thread::spawn(move || -> anyhow::Result<Instant> {
            start.wait();
            for request_idx in 0..n_jobs {
                connection.submit(client::request_id(connection_idx, request_idx), &request)?;
            }
            Ok(Instant::now())
        }));
    }
    let mbd_cpu_before = mbd_cpu()?;
    let sbd_cpu_before = sbatchd.cpu_secs()?;
    let zygote_cpu_before = sbatchd.live_children_cpu_secs()?;
    start.wait();
    let started = Instant::now();
    let mut tracker = Tracker::new(first, last);
    loop {
        std::thread::sleep(Duration::from_millis(options.poll_ms));
        if tracker.poll(&mut poller)? {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "jobs still unfinished after {RUN_TIMEOUT:?}: {}",
            tracker.frontier
        );
    }
    let secs = started.elapsed().as_secs_f64();
    let (mbd_cpu, sbd_cpu) = (mbd_cpu()?, sbatchd.cpu_secs()?);
    let zygote_cpu = sbatchd.live_children_cpu_secs()?;
    let mut submitted = started;
    for worker in workers {
        let done = worker.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
        submitted = submitted.max(done);
    }
    let n_cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let (slots, mxj) = match options.mxj {
        Some(mxj) => (mxj as usize, mxj.to_string()),
        None => (n_cpus, "!".to_owned()),
    };
    println!(
        "e2e jobs={} secs={secs:.2} jobs_per_s={:.0} slots={slots} mxj={mxj} connections={} submit_secs={:.2} \
         failed={} candidates={} mbd_cpu_s={:.2} leader_cpu_s={:.2} sbd_cpu_s={:.2} shepherd_cpu_s={:.2}",
        options.jobs,
        options.jobs as f64 / secs,
        options.connections,
        (submitted - started).as_secs_f64(),
        tracker.n_failed,
        options.candidates,
        mbd_cpu.0 - mbd_cpu_before.0,
        mbd_cpu.1 - mbd_cpu_before.1,
        sbd_cpu.0 - sbd_cpu_before.0,
        (sbd_cpu.1 + zygote_cpu) - (sbd_cpu_before.1 + zygote_cpu_before),
    );
    Ok(())
}

/// Which of the jobs `first..=last` are finished, learnt by querying the lowest ids not
/// yet seen finished (dispatch goes by job id, so those are the ones finishing next).
struct Tracker {
    /// Every job below this one is finished.
    frontier: u32,
    last: u32,
    /// Finished jobs above the frontier.
    finished: BTreeSet<u32>,
    n_failed: usize,
}

impl Tracker {
    fn new(first: u32, last: u32) -> Tracker {
        Tracker { frontier: first, last, finished: BTreeSet::new(), n_failed: 0 }
    }

    /// One query; returns whether every job is finished.
    fn poll(&mut self, connection: &mut Connection) -> anyhow::Result<bool> {
        let window_end = self.last.min(self.frontier.saturating_add(QUERY_JOBS_MAX - 1));
        let jobs = (self.frontier..=window_end)
            .filter(|id| !self.finished.contains(id))
            .map(|job_id| wire::WireJobRef { job_id, array_index: 0 })
            .collect();
        let reply = connection.query(&client::query_jobs(jobs))?;
        for info in &reply.jobs {
            match JobStatus::from_bits(info.status) {
                Some(JobStatus::Done) => {}
                Some(JobStatus::Exit) => self.n_failed += 1,
                _ => continue,
            }
            self.finished.insert(info.job.job_id);
        }
        while self.finished.remove(&self.frontier) {
            self.frontier += 1;
        }
        Ok(self.frontier > self.last)
    }
}
