//! The `scale` benchmark: one real mbatchd driving `--hosts` simulated execution hosts of
//! `--slots` slots each.
//!
//! The cluster is a bench cluster ([`BenchCluster`]) whose `lsf.cluster` also names the
//! simulated hosts, `simNNNNN`, each at its own loopback address (127.1.x.y, so that
//! mbatchd's per-address connection cap sees one sbatchd per address, as in a real
//! cluster). The local host runs the real sbatchd with no slots: the commands (`bjobs`,
//! `bhosts`) take their credentials from its socket. No lim runs: mbatchd then counts
//! every host as available (bins/mbatchd/src/lim_client.rs, "When lim cannot be asked").
//!
//! Each simulated host is a task of this process speaking the real mbatchd ↔ sbatchd
//! protocol (docs/protocols/batch.md) with the crates' encoders: frames sealed with the
//! cluster key (lava-net's `AuthConn`), SBD_REGISTER first, a NEW_JOB answered with a pid
//! from a record the host keeps (a copy of a dispatch it knows is answered from the
//! record, never run again), EXECUTE and FINISH once the reply is acknowledged (FINISH
//! after `--run-time` seconds, 0 by default), every unacknowledged message resent every
//! second and at once after each registration, and reconnection with a short randomised
//! delay when the channel drops. The hosts count what they ran: a job launched twice, or
//! acknowledged finished twice, is an error.
//!
//! Phases, each printing one line:
//!
//! 1. `scale_register`: every host registers; mbatchd's RSS before and after, per host.
//!    `scale_bhosts`: the wall time of the real `bhosts` (median of 3), its line count checked.
//! 2. `scale_throughput`: `--submitters` connections submit `--jobs` jobs of
//!    [`crate::client::true_job`] while the hosts run them; from the first submission to
//!    the last FINISH_ACK: jobs/s, mbatchd's CPU per job (`/proc/PID/stat`).
//! 3. `scale_pending`: the default queue made inactive (`badmin qinact`), `--pending`
//!    jobs submitted and left pending; mbatchd's RSS per pending job; the wall time of the
//!    real `bjobs -u all` to its last line.
//! 4. `scale_storm`: the queue activated again; once a tenth of the pending jobs are done
//!    (under load), mbatchd is killed with SIGKILL and started again on the same port;
//!    the time from the restart until every host is registered again, and until every
//!    job is finished. Then `scale_check`: every job of phases 2 and 4 was launched once
//!    and acknowledged finished once by the hosts, and mbatchd shows each one DONE.
//!
//! ```text
//! scale_register hosts=1000 slots=16 secs=... rss_before_kib=... rss_after_kib=... rss_per_host_kib=...
//! scale_bhosts hosts=1000 lines=1002 median_ms=... min_ms=...
//! scale_throughput hosts=1000 slots=16 jobs=100000 run_time_s=0 submitters=16 secs=... jobs_per_s=... submit_secs=... mbd_cpu_s=... mbd_cpu_us_per_job=...
//! scale_pending jobs=... secs=... rss_before_kib=... rss_after_kib=... rss_per_job_bytes=... bjobs_ms=... bjobs_lines=...
//! scale_storm hosts=1000 reregister_secs=... drain_secs=... registrations=...
//! scale_check jobs=... launched_once=... done=... twice=0 lost=0
//! ```
//!
//! `--check` makes a lost job or a job run twice an error (tests/scale_storm.rs).
//! Goals (issue 21): ≥ 10,000 jobs/s at 1,000 × 16, ≥ 5,000 at 5,000 × 16; ≤ 16 KiB per
//! host; `bhosts` ≤ 100 ms at 5,000 hosts; every host registered again ≤ 10 s.

use std::collections::HashMap;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use lava_batch_ll::JobStatus;
use lava_batch_wire::{self as wire, BATCH_VERSION, Operation};
use lava_net::{AuthConn, Authenticator, ConnError, FramedConn, Timeouts, system_now_ms};
use lava_xdr::frame::{FrameHeader, FrameLimits};
use serde::Serialize;
use tokio::net::TcpSocket;

use crate::client::{self, Connection, User, quantile};
use crate::cluster::{BenchCluster, Daemon, sibling_binary};

const USAGE: &str = "options: --hosts N (1000), --slots N (16), --jobs N (100000), --pending N (= jobs), \
     --run-time SECS (0), --submitters N (16), --threads N (1: the simulated hosts' runtime), \
     --no-storm, --check, --keep";

/// Longest any phase may take before the bench gives up.
const PHASE_TIMEOUT: Duration = Duration::from_secs(900);
/// How often an unacknowledged message is resent (sbatchd's rule).
const RESEND_INTERVAL: Duration = Duration::from_secs(1);
/// Decoding limits of mbatchd's messages.
const MBD_LIMITS: lava_xdr::Limits =
    lava_xdr::Limits { input_bytes_max: 4 << 20, string_bytes_max: 1 << 20, ..lava_xdr::Limits::DEFAULT };

#[derive(Clone, Debug)]
struct Options {
    hosts: usize,
    slots: u32,
    jobs: usize,
    pending: usize,
    run_time: Duration,
    submitters: usize,
    threads: usize,
    storm: bool,
    check: bool,
    keep: bool,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options {
        hosts: 1000,
        slots: 16,
        jobs: 100_000,
        pending: usize::MAX,
        run_time: Duration::ZERO,
        submitters: 16,
        threads: 1,
        storm: true,
        check: false,
        keep: false,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--check" => options.check = true,
            "--no-storm" => options.storm = false,
            "--keep" => options.keep = true,
            _ => {
                let value = args.next().with_context(|| format!("{flag} needs a value ({USAGE})"))?;
                let bad = || format!("{flag}: cannot parse '{value}'");
                match flag.as_str() {
                    "--hosts" => options.hosts = value.parse().with_context(bad)?,
                    "--slots" => options.slots = value.parse().with_context(bad)?,
                    "--jobs" => options.jobs = value.parse().with_context(bad)?,
                    "--pending" => options.pending = value.parse().with_context(bad)?,
                    "--submitters" => options.submitters = value.parse().with_context(bad)?,
                    "--threads" => options.threads = value.parse().with_context(bad)?,
                    "--run-time" => {
                        let secs: f64 = value.parse().with_context(bad)?;
                        ensure!(secs.is_finite() && secs >= 0.0, "--run-time must be 0 or more seconds");
                        options.run_time = Duration::from_secs_f64(secs);
                    }
                    other => bail!("unknown option '{other}' ({USAGE})"),
                }
            }
        }
    }
    if options.pending == usize::MAX {
        options.pending = options.jobs;
    }
    ensure!((1..=60_000).contains(&options.hosts), "--hosts must be 1 to 60000");
    ensure!(options.slots >= 1, "--slots must be at least 1");
    ensure!(options.submitters >= 1 && options.jobs >= options.submitters, "need 1 ≤ submitters ≤ jobs");
    ensure!(options.threads >= 1, "--threads must be at least 1");
    Ok(options)
}

/// The name and address of simulated host `idx`.
fn sim_host(idx: usize) -> (String, Ipv4Addr) {
    let idx = u32::try_from(idx).expect("at most 60000 hosts");
    (format!("sim{idx:05}"), Ipv4Addr::new(127, 1, (idx / 250) as u8, (idx % 250 + 1) as u8))
}

/// What the simulated hosts saw, shared with the bench's thread.
struct Tracker {
    /// Launches by job id (a job is launched when a host makes its record).
    launches: Vec<AtomicU8>,
    /// FINISH_ACKs by job id.
    finishes: Vec<AtomicU8>,
    n_finished: AtomicUsize,
    /// Anything a correct mbatchd never makes a host see (a second launch, a second
    /// FINISH_ACK, a job id beyond the bench's, a refused frame): counted and described.
    problems: std::sync::Mutex<Vec<String>>,
    /// Hosts registered now.
    registered: AtomicUsize,
    /// Registrations in all.
    registrations: AtomicU64,
    /// Per host: when it last registered (ms since the epoch).
    registered_at_ms: Vec<AtomicU64>,
    stop: AtomicBool,
}

impl Tracker {
    fn new(n_hosts: usize, n_jobs: usize) -> Tracker {
        Tracker {
            launches: (0..n_jobs).map(|_| AtomicU8::new(0)).collect(),
            finishes: (0..n_jobs).map(|_| AtomicU8::new(0)).collect(),
            n_finished: AtomicUsize::new(0),
            problems: std::sync::Mutex::new(Vec::new()),
            registered: AtomicUsize::new(0),
            registrations: AtomicU64::new(0),
            registered_at_ms: (0..n_hosts).map(|_| AtomicU64::new(0)).collect(),
            stop: AtomicBool::new(false),
        }
    }

    fn problem(&self, text: String) {
        let mut problems = self.problems.lock().expect("not poisoned");
        if problems.len() < 20 {
            problems.push(text);
        }
    }

    fn slot<'a>(&self, table: &'a [AtomicU8], job_id: u32) -> Option<&'a AtomicU8> {
        let slot = table.get(job_id as usize);
        if slot.is_none() {
            self.problem(format!("job {job_id} is beyond the bench's jobs"));
        }
        slot
    }

    /// Hosts whose last registration came after `since_ms`.
    fn registered_since(&self, since_ms: u64) -> usize {
        self.registered_at_ms.iter().filter(|at| at.load(Ordering::Relaxed) > since_ms).count()
    }
}

/// Runs the benchmark with `args`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let hosts: Vec<(String, Ipv4Addr)> = (0..options.hosts).map(sim_host).collect();
    let mut cluster = BenchCluster::new(Some(0))?;
    if options.keep {
        cluster.keep();
    }
    cluster.add_hosts(&hosts, options.slots)?;
    cluster.set_lsb_param("MAX_JOBID", "99999999")?;
    let mut mbatchd = cluster.start_mbatchd(&[])?;
    let _sbatchd = cluster.start_sbatchd()?;
    let addr = cluster.mbd_addr()?;
    let auth = cluster.authenticator()?;
    let user = User::current()?;
    // Job ids: the bench's jobs are 1..=jobs+pending (nobody else submits).
    let tracker = Arc::new(Tracker::new(options.hosts, options.jobs + options.pending + 1));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.threads)
        .enable_all()
        .build()
        .context("the simulated hosts' runtime")?;

    // 1. Registration.
    let rss_before = mbatchd.rss_kb()?;
    let started = Instant::now();
    for (idx, (name, ip)) in hosts.iter().enumerate() {
        let host = SimHost {
            idx,
            name: name.clone(),
            ip: *ip,
            mbd: addr,
            auth: Arc::clone(&auth),
            slots: options.slots,
            run_time: options.run_time,
            tracker: Arc::clone(&tracker),
        };
        runtime.spawn(host.run());
    }
    wait_until(&mbatchd, "every host registered", || {
        tracker.registered.load(Ordering::Relaxed) == options.hosts
    })?;
    let register_secs = started.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(500));
    let rss_after = mbatchd.rss_kb()?;
    println!(
        "scale_register hosts={} slots={} secs={register_secs:.2} rss_before_kib={rss_before} rss_after_kib={rss_after} \
         rss_per_host_kib={:.1}",
        options.hosts,
        options.slots,
        rss_after.saturating_sub(rss_before) as f64 / options.hosts as f64
    );
    let (bhosts_ms, bhosts_lines) = time_command(&cluster, "bhosts", &[], 3)?;
    ensure!(
        bhosts_lines == options.hosts + 2,
        "bhosts printed {bhosts_lines} lines for {} hosts",
        options.hosts
    );
    println!(
        "scale_bhosts hosts={} lines={bhosts_lines} median_ms={:.1} min_ms={:.1}",
        options.hosts,
        quantile(&bhosts_ms, 0.5),
        bhosts_ms[0]
    );

    // 2. Sustained throughput, submission to DONE.
    let cpu_before = mbatchd.cpu_secs()?.0;
    let started = Instant::now();
    let submitted = submit(&cluster, &user, 1, options.jobs, options.submitters)?;
    wait_until(&mbatchd, "every job finished", || {
        tracker.n_finished.load(Ordering::Relaxed) >= options.jobs
    })?;
    let secs = started.elapsed().as_secs_f64();
    let mbd_cpu = mbatchd.cpu_secs()?.0 - cpu_before;
    println!(
        "scale_throughput hosts={} slots={} jobs={} run_time_s={} submitters={} secs={secs:.2} jobs_per_s={:.0} \
         submit_secs={submitted:.2} mbd_cpu_s={mbd_cpu:.2} mbd_cpu_us_per_job={:.0}",
        options.hosts,
        options.slots,
        options.jobs,
        options.run_time.as_secs_f64(),
        options.submitters,
        options.jobs as f64 / secs,
        mbd_cpu * 1e6 / options.jobs as f64,
    );

    // 3. Pending jobs.
    if options.pending > 0 {
        let mut admin = Connection::connect(addr, Arc::clone(&auth), user.clone())?;
        queue_control(&mut admin, wire::AdminAction::QueueInactivate)?;
        drop(admin);
        let rss_before = mbatchd.rss_kb()?;
        let started = Instant::now();
        submit(&cluster, &user, 2, options.pending, options.submitters)?;
        let secs = started.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_millis(500));
        let rss_after = mbatchd.rss_kb()?;
        let (bjobs_ms, bjobs_lines) = time_command(&cluster, "bjobs", &["-u", "all"], 1)?;
        ensure!(
            bjobs_lines == options.pending + 1,
            "bjobs printed {bjobs_lines} lines for {} pending jobs",
            options.pending
        );
        println!(
            "scale_pending jobs={} secs={secs:.2} rss_before_kib={rss_before} rss_after_kib={rss_after} \
             rss_per_job_bytes={:.0} bjobs_ms={:.0} bjobs_lines={bjobs_lines}",
            options.pending,
            rss_after.saturating_sub(rss_before) as f64 * 1024.0 / options.pending as f64,
            bjobs_ms[0],
        );

        // 4. The reconnect storm under load.
        let total = options.jobs + options.pending;
        let started = Instant::now();
        // A new connection: mbatchd closes one idle for a minute, as submitting may take.
        let mut admin = Connection::connect(addr, Arc::clone(&auth), user.clone())?;
        queue_control(&mut admin, wire::AdminAction::QueueActivate)?;
        drop(admin);
        let mut storm = None;
        if options.storm {
            let under_load = options.jobs + options.pending / 10;
            wait_until(&mbatchd, "a tenth of the pending jobs finished", || {
                tracker.n_finished.load(Ordering::Relaxed) >= under_load
            })?;
            mbatchd.kill();
            let killed_ms = system_now_ms();
            let finished_at_kill = tracker.n_finished.load(Ordering::Relaxed);
            let registrations_before = tracker.registrations.load(Ordering::Relaxed);
            mbatchd = cluster.start_mbatchd(&[])?;
            let restarted = Instant::now();
            wait_until(&mbatchd, "every host registered again", || {
                tracker.registered_since(killed_ms) == options.hosts
            })?;
            let reregister_secs = restarted.elapsed().as_secs_f64();
            storm = Some((
                reregister_secs,
                finished_at_kill,
                tracker.registrations.load(Ordering::Relaxed) - registrations_before,
            ));
        }
        wait_until(&mbatchd, "every job finished", || tracker.n_finished.load(Ordering::Relaxed) >= total)?;
        let drain_secs = started.elapsed().as_secs_f64();
        match storm {
            Some((reregister_secs, finished_at_kill, registrations)) => println!(
                "scale_storm hosts={} pending={} reregister_secs={reregister_secs:.2} finished_at_kill={finished_at_kill} \
                 registrations={registrations} drain_secs={drain_secs:.2} drain_jobs_per_s={:.0}",
                options.hosts,
                options.pending,
                options.pending as f64 / drain_secs,
            ),
            None => println!(
                "scale_drain hosts={} pending={} drain_secs={drain_secs:.2} drain_jobs_per_s={:.0}",
                options.hosts,
                options.pending,
                options.pending as f64 / drain_secs
            ),
        }
    }
    tracker.stop.store(true, Ordering::Relaxed);
    check(&cluster, &tracker, &user, &options)?;
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}

/// Polls `done` every 10 ms until it holds; fails if mbatchd exits or [`PHASE_TIMEOUT`] passes.
fn wait_until(mbatchd: &Daemon, what: &str, mut done: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + PHASE_TIMEOUT;
    while !done() {
        ensure!(Instant::now() < deadline, "not {what} within {PHASE_TIMEOUT:?}");
        ensure!(
            std::path::Path::new(&format!("/proc/{}", mbatchd.pid())).exists(),
            "mbatchd exited while waiting for {what}:\n{}",
            mbatchd.log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Submits `n_jobs` jobs over `connections` connections; returns the seconds it took.
/// `phase` keeps the request ids of the bench's phases apart.
fn submit(
    cluster: &BenchCluster,
    user: &User,
    phase: usize,
    n_jobs: usize,
    connections: usize,
) -> anyhow::Result<f64> {
    let (addr, auth) = (cluster.mbd_addr()?, cluster.authenticator()?);
    let request = Arc::new(client::true_job());
    let started = Instant::now();
    let mut workers = Vec::new();
    for connection_idx in 0..connections {
        let n = n_jobs / connections + usize::from(connection_idx < n_jobs % connections);
        let mut connection = Connection::connect(addr, Arc::clone(&auth), user.clone())?;
        let request = Arc::clone(&request);
        workers.push(std::thread::spawn(move || -> anyhow::Result<()> {
            for request_idx in 0..n {
                connection.submit(client::request_id(phase << 16 | connection_idx, request_idx), &request)?;
            }
            Ok(())
        }));
    }
    for worker in workers {
        worker.join().map_err(|_| anyhow::anyhow!("a submitting thread panicked"))??;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// `badmin qact` or `qinact` of the default queue, over `connection`.
fn queue_control(connection: &mut Connection, action: wire::AdminAction) -> anyhow::Result<()> {
    let request = wire::AdminControlRequest { action, names: vec!["normal".to_owned()] };
    let reply: wire::AdminControlReply = connection.call(
        Operation::AdminControl,
        Operation::AdminControlReply,
        client::request_id(0xffff, action as usize),
        &request,
    )?;
    ensure!(reply.results.iter().all(|result| result.done), "{action:?} refused: {:?}", reply.results);
    Ok(())
}

/// Runs the real `program args` `runs` times (after one unmeasured run), its output read
/// to the end; returns the sorted wall times in ms and the line count of the last run.
fn time_command(
    cluster: &BenchCluster,
    program: &str,
    args: &[&str],
    runs: usize,
) -> anyhow::Result<(Vec<f64>, usize)> {
    let path = sibling_binary(program)?;
    let mut times_ms = Vec::new();
    let mut n_lines = 0;
    for run_idx in 0..=runs {
        let started = Instant::now();
        let mut child = cluster
            .command(&path)
            .args(args)
            .current_dir("/tmp")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("run {program}"))?;
        let mut out = Vec::new();
        child.stdout.take().context("standard output")?.read_to_end(&mut out)?;
        let status = child.wait_with_output().with_context(|| format!("wait for {program}"))?;
        let elapsed = started.elapsed();
        ensure!(
            status.status.success(),
            "{program} failed ({}): {}",
            status.status,
            String::from_utf8_lossy(&status.stderr)
        );
        n_lines = out.iter().filter(|byte| **byte == b'\n').count();
        if run_idx > 0 {
            times_ms.push(elapsed.as_secs_f64() * 1e3);
        }
    }
    times_ms.sort_by(f64::total_cmp);
    Ok((times_ms, n_lines))
}

/// Every job launched once and finished once at the hosts, and DONE at mbatchd.
fn check(cluster: &BenchCluster, tracker: &Tracker, user: &User, options: &Options) -> anyhow::Result<()> {
    let total = options.jobs + options.pending;
    let mut connection = Connection::connect(cluster.mbd_addr()?, cluster.authenticator()?, user.clone())?;
    let mut query = client::query_all_users(true);
    let mut n_done = 0;
    let mut not_done = Vec::new();
    loop {
        let reply = connection.query(&query)?;
        for info in &reply.jobs {
            if JobStatus::from_bits(info.status) == Some(JobStatus::Done) {
                n_done += 1;
            } else if not_done.len() < 10 {
                not_done.push(format!("job {} has status {:#x}", info.job.job_id, info.status));
            }
        }
        if reply.next_after == 0 {
            break;
        }
        (query.after_job, query.after_index) = (reply.next_after, reply.next_after_index);
    }
    let jobs = 1..=total;
    let launched_once = jobs.clone().filter(|id| tracker.launches[*id].load(Ordering::Relaxed) == 1).count();
    let finished_once = jobs.filter(|id| tracker.finishes[*id].load(Ordering::Relaxed) == 1).count();
    let problems = tracker.problems.lock().expect("not poisoned").clone();
    println!(
        "scale_check jobs={total} launched_once={launched_once} finished_once={finished_once} mbd_done={n_done} \
         problems={}",
        problems.len()
    );
    let good = launched_once == total && finished_once == total && n_done == total && problems.is_empty();
    if !good {
        let message = format!(
            "not every job ran and ended exactly once: {} launched once, {} finished once, {} DONE of {total}; \
             problems: {problems:?}; at mbatchd: {not_done:?}",
            launched_once, finished_once, n_done
        );
        if options.check {
            bail!(message);
        }
        eprintln!("scale: {message}");
    }
    Ok(())
}

/// One simulated execution host.
struct SimHost {
    idx: usize,
    name: String,
    ip: Ipv4Addr,
    mbd: SocketAddr,
    auth: Arc<Authenticator>,
    slots: u32,
    run_time: Duration,
    tracker: Arc<Tracker>,
}

/// A job's record at a simulated host (sbd-job-record.md, reduced to what the bench needs).
#[derive(Debug)]
struct Record {
    dispatch_seq: u32,
    /// When the job's process ends.
    ends_at: Instant,
    reply_acked: bool,
    execute_acked: bool,
    /// When its due messages were last sent.
    sent_at: Option<Instant>,
}

type Reader = AuthConn<tokio::io::Join<tokio::net::tcp::OwnedReadHalf, tokio::io::Sink>>;
type Writer = AuthConn<tokio::io::Join<tokio::io::Empty, tokio::net::tcp::OwnedWriteHalf>>;

/// Frames waiting to be written, sealed in one write.
#[derive(Default)]
struct Out {
    frames: Vec<(FrameHeader, Vec<u8>)>,
    sequence: u32,
}

impl Out {
    fn push<T: Serialize>(&mut self, operation: Operation, body: &T) {
        self.sequence = self.sequence.wrapping_add(1);
        let header = FrameHeader {
            sequence: self.sequence,
            operation: operation.code(),
            version: BATCH_VERSION,
            length: 0,
            status: 0,
        };
        self.frames.push((header, lava_xdr::to_bytes(body).expect("a message encodes")));
    }

    async fn flush(&mut self, writer: &mut Writer) -> Result<(), ConnError> {
        if self.frames.is_empty() {
            return Ok(());
        }
        let frames: Vec<(FrameHeader, &[u8])> =
            self.frames.iter().map(|(header, body)| (*header, body.as_slice())).collect();
        let result = writer.write_frames(&frames).await;
        self.frames.clear();
        result
    }
}

impl SimHost {
    async fn run(self) {
        let mut records: HashMap<u32, Record> = HashMap::new();
        // Jobs finished and acknowledged: a NEW_JOB copy of one is answered from here.
        let mut tombstones: HashMap<u32, u32> = HashMap::new();
        let mut out = Out::default();
        let mut failures = 0u32;
        while !self.tracker.stop.load(Ordering::Relaxed) {
            match self.connect(&mut out).await {
                Ok((mut reader, mut writer)) => {
                    failures = 0;
                    self.tracker.registered.fetch_add(1, Ordering::Relaxed);
                    self.tracker.registrations.fetch_add(1, Ordering::Relaxed);
                    self.tracker.registered_at_ms[self.idx].store(system_now_ms(), Ordering::Relaxed);
                    let why =
                        self.serve(&mut reader, &mut writer, &mut out, &mut records, &mut tombstones).await;
                    self.tracker.registered.fetch_sub(1, Ordering::Relaxed);
                    // The reason is not reported: a reconnect storm ends every channel at once.
                    let _why = why;
                }
                Err(_) => failures += 1,
            }
            out.frames.clear();
            // sbatchd's backoff: 100 ms growing to a few seconds, randomised.
            let ceiling_ms = (100u64 << failures.min(5)).min(3_000);
            let jitter = (system_now_ms() ^ (self.idx as u64).wrapping_mul(0x9e37_79b9)) % ceiling_ms;
            tokio::time::sleep(Duration::from_millis(ceiling_ms / 2 + jitter / 2)).await;
        }
    }

    async fn connect(&self, out: &mut Out) -> Result<(Reader, Writer), String> {
        let socket = TcpSocket::new_v4().map_err(|error| error.to_string())?;
        socket.bind(SocketAddr::new(self.ip.into(), 0)).map_err(|error| error.to_string())?;
        let stream = tokio::time::timeout(Duration::from_secs(5), socket.connect(self.mbd))
            .await
            .map_err(|_| "connect timed out".to_owned())?
            .map_err(|error| error.to_string())?;
        stream.set_nodelay(true).map_err(|error| error.to_string())?;
        let (read_half, write_half) = stream.into_split();
        let limits = FrameLimits { body_bytes_max: 8 << 20 };
        let timeouts = Timeouts { read_timeout_ms: 24 * 3600 * 1000, ..Timeouts::default() };
        let mut reader = AuthConn::new(
            FramedConn::new(tokio::io::join(read_half, tokio::io::sink()), limits, timeouts),
            Arc::clone(&self.auth),
        );
        let mut writer = AuthConn::new(
            FramedConn::new(tokio::io::join(tokio::io::empty(), write_half), limits, timeouts),
            Arc::clone(&self.auth),
        );
        let register = wire::SbdRegister { host_name: self.name.clone(), n_cpus: self.slots, sbd_pid: 1 };
        out.frames.clear();
        out.push(Operation::SbdRegister, &register);
        out.flush(&mut writer).await.map_err(|error| error.to_string())?;
        let frame = tokio::time::timeout(Duration::from_secs(30), reader.read_frame())
            .await
            .map_err(|_| "no SBD_REGISTER_ACK".to_owned())?
            .map_err(|error| error.to_string())?
            .ok_or("closed before SBD_REGISTER_ACK")?;
        if frame.header.operation != Operation::SbdRegisterAck.code() {
            return Err(format!("expected SBD_REGISTER_ACK, got operation {}", frame.header.operation));
        }
        Ok((reader, writer))
    }

    /// Carries one registered channel until it fails.
    async fn serve(
        &self,
        reader: &mut Reader,
        writer: &mut Writer,
        out: &mut Out,
        records: &mut HashMap<u32, Record>,
        tombstones: &mut HashMap<u32, u32>,
    ) -> Result<(), String> {
        // At once after registration: everything unacknowledged.
        self.resend(out, records, None);
        out.flush(writer).await.map_err(|error| error.to_string())?;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                frame = reader.read_frame() => {
                    let frame = frame.map_err(|error| error.to_string())?.ok_or("mbatchd closed the channel")?;
                    self.handle(frame.header.operation, &frame.body, out, records, tombstones)?;
                }
                _ = tick.tick() => {
                    if self.tracker.stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    self.resend(out, records, Some(Instant::now()));
                }
            }
            out.flush(writer).await.map_err(|error| error.to_string())?;
        }
    }

    /// Queues every message due: all unacknowledged ones (`now` = `None`: just registered),
    /// or those last sent a resend interval ago, and the FINISH of jobs that just ended.
    fn resend(&self, out: &mut Out, records: &mut HashMap<u32, Record>, now: Option<Instant>) {
        let clock = now.unwrap_or_else(Instant::now);
        for (job_id, record) in records.iter_mut() {
            let due = match (now, record.sent_at) {
                (None, _) | (_, None) => true,
                (Some(now), Some(sent)) => now.duration_since(sent) >= RESEND_INTERVAL,
            };
            let just_ended =
                record.reply_acked && record.ends_at <= clock && record.sent_at < Some(record.ends_at);
            if !due && !just_ended {
                continue;
            }
            self.queue_due(out, *job_id, record, clock);
            record.sent_at = Some(clock);
        }
    }

    /// Queues the messages a record owes mbatchd, in stage order.
    fn queue_due(&self, out: &mut Out, job_id: u32, record: &Record, now: Instant) {
        let job = wire::WireJobRef { job_id, array_index: 0 };
        let seq = record.dispatch_seq;
        if !record.reply_acked {
            out.push(Operation::NewJobReply, &started_reply(job, seq));
            return;
        }
        let ended = record.ends_at <= now;
        if !record.execute_acked {
            out.push(Operation::JobExecute, &execute(job, seq));
        }
        if ended {
            out.push(Operation::JobFinish, &finish(job, seq));
        }
    }

    fn handle(
        &self,
        operation: u32,
        body: &[u8],
        out: &mut Out,
        records: &mut HashMap<u32, Record>,
        tombstones: &mut HashMap<u32, u32>,
    ) -> Result<(), String> {
        let decode_ack = |body: &[u8]| -> Result<wire::JobAck, String> {
            lava_xdr::from_bytes(body, &MBD_LIMITS).map_err(|error| format!("an ACK: {error}"))
        };
        match Operation::from_code(operation) {
            Some(Operation::NewJob) => {
                let spec: wire::JobSpecs =
                    lava_xdr::from_bytes(body, &MBD_LIMITS).map_err(|error| format!("NEW_JOB: {error}"))?;
                let (job_id, seq) = (spec.job.job_id, spec.dispatch_seq);
                if tombstones.get(&job_id) == Some(&seq) {
                    // A copy of a dispatch that ran and ended: answered from the record.
                    out.push(Operation::NewJobReply, &started_reply(spec.job, seq));
                    return Ok(());
                }
                match records.get_mut(&job_id) {
                    Some(record) if record.dispatch_seq == seq => {
                        self.queue_due(out, job_id, record, Instant::now());
                        record.sent_at = Some(Instant::now());
                    }
                    Some(record) => {
                        self.tracker.problem(format!(
                            "{}: NEW_JOB of job {job_id} dispatch {seq} while dispatch {} runs",
                            self.name, record.dispatch_seq
                        ));
                    }
                    None => {
                        if let Some(launches) = self.tracker.slot(&self.tracker.launches, job_id)
                            && launches.fetch_add(1, Ordering::Relaxed) > 0
                        {
                            self.tracker
                                .problem(format!("{}: job {job_id} launched a second time", self.name));
                        }
                        let now = Instant::now();
                        let record = Record {
                            dispatch_seq: seq,
                            ends_at: now + self.run_time,
                            reply_acked: false,
                            execute_acked: false,
                            sent_at: Some(now),
                        };
                        out.push(Operation::NewJobReply, &started_reply(spec.job, seq));
                        records.insert(job_id, record);
                    }
                }
            }
            Some(Operation::NewJobReplyAck) => {
                let ack = decode_ack(body)?;
                if let Some(record) = records.get_mut(&ack.job.job_id)
                    && record.dispatch_seq == ack.dispatch_seq
                    && !record.reply_acked
                {
                    record.reply_acked = true;
                    let now = Instant::now();
                    self.queue_due(out, ack.job.job_id, record, now);
                    record.sent_at = Some(now);
                }
            }
            Some(Operation::JobExecuteAck) => {
                let ack = decode_ack(body)?;
                if let Some(record) = records.get_mut(&ack.job.job_id)
                    && record.dispatch_seq == ack.dispatch_seq
                {
                    record.execute_acked = true;
                }
            }
            Some(Operation::JobFinishAck) => {
                let ack = decode_ack(body)?;
                let job_id = ack.job.job_id;
                if records.get(&job_id).is_some_and(|record| record.dispatch_seq == ack.dispatch_seq) {
                    records.remove(&job_id);
                    tombstones.insert(job_id, ack.dispatch_seq);
                    if let Some(finishes) = self.tracker.slot(&self.tracker.finishes, job_id)
                        && finishes.fetch_add(1, Ordering::Relaxed) > 0
                    {
                        self.tracker.problem(format!("{}: job {job_id} finished a second time", self.name));
                    }
                    self.tracker.n_finished.fetch_add(1, Ordering::Relaxed);
                }
            }
            Some(Operation::JobSignal) => {
                let signal: wire::JobSignal = lava_xdr::from_bytes(body, &MBD_LIMITS)
                    .map_err(|error| format!("JOB_SIGNAL: {error}"))?;
                let outcome = if records.contains_key(&signal.job.job_id) {
                    wire::SignalOutcome::Delivered
                } else if tombstones.contains_key(&signal.job.job_id) {
                    wire::SignalOutcome::AlreadyFinished
                } else {
                    wire::SignalOutcome::NoSuchJob
                };
                let reply = wire::JobSignalReply { job: signal.job, signal_seq: signal.signal_seq, outcome };
                out.push(Operation::JobSignalReply, &reply);
            }
            other => return Err(format!("unexpected operation {other:?} ({operation}) from mbatchd")),
        }
        Ok(())
    }
}

fn started_reply(job: wire::WireJobRef, dispatch_seq: u32) -> wire::NewJobReply {
    let pid = i32::try_from(job.job_id % 4_000_000 + 100).expect("fits");
    wire::NewJobReply {
        job,
        dispatch_seq,
        outcome: wire::NewJobOutcome::Started { pid, pgid: pid, job_status: JobStatus::Run.bits() },
    }
}

fn execute(job: wire::WireJobRef, dispatch_seq: u32) -> wire::JobExecute {
    let pid = i32::try_from(job.job_id % 4_000_000 + 100).expect("fits");
    wire::JobExecute {
        job,
        dispatch_seq,
        pid,
        pgid: pid,
        exec_uid: 0,
        exec_user: "root".to_owned(),
        exec_home: "/root".to_owned(),
        exec_cwd: "/tmp".to_owned(),
        exec_time: (system_now_ms() / 1000) as i64,
    }
}

fn finish(job: wire::WireJobRef, dispatch_seq: u32) -> wire::JobFinish {
    let pid = i32::try_from(job.job_id % 4_000_000 + 100).expect("fits");
    wire::JobFinish {
        job,
        dispatch_seq,
        pid,
        wait_status: 0,
        finish_reason: wire::FINISH_NORMAL,
        end_time: (system_now_ms() / 1000) as i64,
        rusage: wire::ResourceUsage::default(),
    }
}
