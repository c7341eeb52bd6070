//! The `restart` benchmark: how long the real mbatchd takes, from spawn, to answer the first
//! `bjobs` on an event log of 1,000,000 events, and how much memory the replayed state
//! holds.
//!
//! The log is written in-process by the real logic, not by submitting 200,000 jobs over
//! the network: `lava_mbd::Mbd::step` is fed what a live mbatchd would be fed (MBD_START;
//! a host registering with [`SLOTS`] CPUs; then, in rounds, [`SLOTS`] submissions of
//! [`crate::client::true_job`] (`/bin/true` with a 2 KiB login environment), each job's
//! NEW_JOB_REPLY, EXECUTE and FINISH), and every event it appends is encoded with mbatchd's
//! own codec (`lava_mbatchd::codec`) into the log opened by mbatchd's own
//! `journal::open`. That gives five events per job (JOB_NEW, JOB_START, JOB_START_ACCEPT,
//! JOB_EXECUTE, JOB_STATUS DONE). At the end the host disconnects and `--pending` more
//! jobs are submitted, which stay pending (one JOB_NEW each), so that `bjobs -u all` has
//! something to show. The numbers are chosen so the log holds exactly `--events` events.
//! No snapshot is written, so mbatchd replays every event. Event times lie in the ten
//! minutes before the run, so nothing is old enough for `CLEAN_PERIOD` (an hour) to clean.
//!
//! Then the release mbatchd is spawned on the log, and the clock runs until its port file
//! appears and a JOB_QUERY `bjobs -u all` (every user, unfinished jobs) is answered; its
//! resident memory is read from `/proc/<pid>/status` right after. A second mbatchd on an
//! empty log of an identical cluster gives the baseline memory, so that the memory per
//! finished job counts only what the jobs cost. Finally `bjobs -u all -a` (every job) is
//! timed, and whether mbatchd could answer it at all.
//!
//! The log was just written, so replay reads it from the page cache: the figure is the CPU
//! cost of a restart, not the disk's.
//!
//! ```text
//! restart_log events=1000000 jobs=... finished=... pending=... log_bytes=... secs=...
//! restart events=1000000 jobs=... secs_to_port=... secs_to_first_bjobs=... rss_kb=... baseline_rss_kb=... rss_bytes_per_finished_job=... cpu_s=...
//! restart_bjobs_all jobs=... secs=... pages=... shown=... answered=yes|no(...)
//! ```
//!
//! Goals: `secs_to_first_bjobs` ≤ 2; `rss_bytes_per_finished_job` ≤ 1024.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use lava_batch_ll::{HostName, JobStatus, SubmitSpec, UserName};
use lava_batch_wire as wire;
use lava_conf::ClusterConfig;
use lava_mbatchd::config::ShellConfig;
use lava_mbd::{Caller, ClientId, Effect, Input, Mbd};
use lava_net::system_now_ms;

use crate::client::{self, Connection, User};
use crate::cluster::{BenchCluster, Daemon, HOST};

/// Events in the log, by default.
const EVENTS_DEFAULT: u64 = 1_000_000;
/// Jobs left pending at the end, by default (with 1 MBD_START and 5 events per finished
/// job, 999 makes the total a round million).
const PENDING_DEFAULT: u64 = 999;
/// CPUs of the simulated host: jobs run in rounds of this many.
const SLOTS: u32 = 100;
/// Events per finished job.
const EVENTS_PER_JOB: u64 = 5;
/// Longest mbatchd may take to start on the log.
const START_TIMEOUT: Duration = Duration::from_secs(600);
/// Interval of the port-file poll: the resolution of the measurement.
const POLL_INTERVAL: Duration = Duration::from_millis(1);
/// How long before the run the simulated history starts.
const HISTORY_MS: u64 = 10 * 60 * 1000;

struct Options {
    events: u64,
    pending: u64,
    keep: bool,
}

const USAGE: &str = "options: --events N, --pending N, --keep (keep the cluster folder with its log)";

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options { events: EVENTS_DEFAULT, pending: PENDING_DEFAULT, keep: false };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        if flag == "--keep" {
            options.keep = true;
            continue;
        }
        let target = match flag.as_str() {
            "--events" => &mut options.events,
            "--pending" => &mut options.pending,
            other => bail!("unknown option '{other}' ({USAGE})"),
        };
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        *target = value.parse().with_context(|| format!("{flag} {value}: not a count"))?;
    }
    let finished_events = options.events.checked_sub(1 + options.pending).context("--pending too large")?;
    ensure!(
        finished_events % EVENTS_PER_JOB == 0,
        "events - 1 - pending must be a multiple of {EVENTS_PER_JOB} (one MBD_START, five events per finished job)"
    );
    Ok(options)
}

/// Runs the benchmark with `args`.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let user = User::current()?;

    let baseline_rss_kb = {
        let mut empty = BenchCluster::new(None)?;
        let (mbatchd, _) = start_and_query(&mut empty, &user)?;
        mbatchd.rss_kb()?
    };

    let mut cluster = BenchCluster::new(None)?;
    if options.keep {
        cluster.keep();
    }
    let history = write_log(&cluster, &options)?;
    let (mbatchd, timing) = start_and_query(&mut cluster, &user)?;
    let rss_kb = mbatchd.rss_kb()?;
    let (cpu_s, _) = mbatchd.cpu_secs()?;
    ensure!(
        timing.n_jobs_answered == options.pending as usize,
        "bjobs -u all showed {} jobs, {} are pending",
        timing.n_jobs_answered,
        options.pending
    );
    let n_jobs = history.n_finished + options.pending;
    let per_job = (rss_kb.saturating_sub(baseline_rss_kb) * 1024) as f64 / history.n_finished as f64;
    println!(
        "restart events={} jobs={n_jobs} secs_to_port={:.3} secs_to_first_bjobs={:.3} rss_kb={rss_kb} \
         baseline_rss_kb={baseline_rss_kb} rss_bytes_per_finished_job={per_job:.0} cpu_s={cpu_s:.2}",
        options.events, timing.secs_to_port, timing.secs_to_answer,
    );

    let mut connection = Connection::connect(cluster.mbd_addr()?, cluster.authenticator()?, user)?;
    let asked = Instant::now();
    // `bjobs -u all -a`: every page of the answer, as bjobs asks for them.
    let mut query = client::query_all_users(true);
    let (mut n_pages, mut n_shown) = (0, 0);
    let answered = loop {
        match connection.query(&query) {
            Ok(reply) => {
                n_pages += 1;
                n_shown += reply.jobs.len();
                if reply.next_after == 0 {
                    break "yes".to_owned();
                }
                (query.after_job, query.after_index) = (reply.next_after, reply.next_after_index);
            }
            Err(error) => break format!("no({})", error.to_string().replace(' ', "_")),
        }
    };
    println!(
        "restart_bjobs_all jobs={n_jobs} secs={:.3} pages={n_pages} shown={n_shown} answered={answered}",
        asked.elapsed().as_secs_f64()
    );
    drop(mbatchd);
    Ok(())
}

/// What [`write_log`] wrote.
struct History {
    n_finished: u64,
}

/// Writes the log of the module doc into `cluster`'s event log folder.
fn write_log(cluster: &BenchCluster, options: &Options) -> anyhow::Result<History> {
    let started = Instant::now();
    let conf = ClusterConfig::load(&cluster.envdir())?;
    let shell_config = ShellConfig::from_cluster(&conf, Some(0), None)?;
    let log = lava_mbatchd::journal::open(&shell_config.event_log_dir)?;
    let mut mbd = Mbd::new(shell_config.mbd.clone())?;
    let host = HostName::parse("host", HOST)?;
    let caller = Caller { uid: 1000, gid: 100, user: UserName::parse("user", "alice")?, host: host.clone() };
    let spec = SubmitSpec::try_from(client::true_job())?;
    let mut now_ms = system_now_ms() - HISTORY_MS;
    let n_finished = (options.events - 1 - options.pending) / EVENTS_PER_JOB;
    // Milliseconds the simulated clock advances per round, so the history spans HISTORY_MS at most.
    let round_ms = (HISTORY_MS / 2 / n_finished.div_ceil(u64::from(SLOTS)).max(1)).max(1);

    let mut writer = LogWriter { log: &log, effects: Vec::new(), buffer: Vec::new(), n_events: 0 };
    let mut n_submitted = 0u64;
    let mut submit = |mbd: &mut Mbd, writer: &mut LogWriter<'_>, now_ms: u64| -> anyhow::Result<u32> {
        n_submitted += 1;
        let input = Input::Submit {
            client: ClientId(n_submitted),
            request_id: wire::RequestId { high: 0x7265_7374, low: n_submitted },
            caller: caller.clone(),
            spec: Box::new(spec.clone()),
        };
        writer.step(mbd, now_ms, input)?;
        Ok(mbd.last_job_id())
    };
    writer.step(&mut mbd, now_ms, Input::Start)?;
    writer.step(&mut mbd, now_ms, Input::HostRegistered { host: host.clone(), n_cpus: SLOTS })?;
    let mut n_done = 0u64;
    while n_done < n_finished {
        let round = (n_finished - n_done).min(u64::from(SLOTS));
        let mut ids = Vec::with_capacity(round as usize);
        for _ in 0..round {
            ids.push(submit(&mut mbd, &mut writer, now_ms)?);
        }
        now_ms += round_ms;
        for id in ids {
            let job = wire::WireJobRef { job_id: id, array_index: 0 };
            let pid = i32::try_from(10_000 + id % 100_000)?;
            let started = wire::NewJobOutcome::Started { pid, pgid: pid, job_status: JobStatus::Run.bits() };
            let inputs = [
                Input::NewJobReply {
                    host: host.clone(),
                    reply: wire::NewJobReply { job, dispatch_seq: 1, outcome: started },
                },
                Input::JobExecute {
                    host: host.clone(),
                    msg: wire::JobExecute {
                        job,
                        dispatch_seq: 1,
                        pid,
                        pgid: pid,
                        exec_uid: caller.uid,
                        exec_user: caller.user.to_string(),
                        exec_home: "/home/alice".to_owned(),
                        exec_cwd: "/home/alice/projects/sim".to_owned(),
                        exec_time: i64::try_from(now_ms / 1000)?,
                    },
                },
                Input::JobFinish {
                    host: host.clone(),
                    msg: wire::JobFinish {
                        job,
                        dispatch_seq: 1,
                        pid,
                        wait_status: 0,
                        finish_reason: wire::FINISH_NORMAL,
                        end_time: i64::try_from(now_ms / 1000)?,
                        rusage: wire::ResourceUsage { user_time_ms: 1, system_time_ms: 1, max_rss_kb: 1200 },
                    },
                },
            ];
            for input in inputs {
                writer.step(&mut mbd, now_ms, input)?;
            }
        }
        n_done += round;
        now_ms += round_ms;
    }
    writer.step(&mut mbd, now_ms, Input::HostDisconnected { host })?;
    for _ in 0..options.pending {
        submit(&mut mbd, &mut writer, now_ms)?;
    }
    ensure!(writer.n_events == options.events, "wrote {} events, not {}", writer.n_events, options.events);
    let n_events = writer.n_events;
    drop(writer);
    let log = Arc::try_unwrap(log).map_err(|_| anyhow::anyhow!("the log is still shared"))?;
    log.close()?;
    let mut log_bytes = 0;
    for entry in std::fs::read_dir(&shell_config.event_log_dir)? {
        log_bytes += entry?.metadata()?.len();
    }
    println!(
        "restart_log events={n_events} jobs={} finished={n_finished} pending={} log_bytes={log_bytes} secs={:.2}",
        n_finished + options.pending,
        options.pending,
        started.elapsed().as_secs_f64()
    );
    Ok(History { n_finished })
}

/// Steps the logic and appends what it decided, encoded as mbatchd encodes it.
struct LogWriter<'a> {
    log: &'a lava_eventlog::EventLog,
    effects: Vec<Effect>,
    buffer: Vec<u8>,
    n_events: u64,
}

impl LogWriter<'_> {
    fn step(&mut self, mbd: &mut Mbd, now_ms: u64, input: Input) -> anyhow::Result<()> {
        mbd.step(now_ms, input, &mut self.effects);
        for effect in self.effects.drain(..) {
            if let Effect::Append(event) = effect {
                self.buffer.clear();
                lava_mbatchd::codec::encode_into(&event, &mut self.buffer);
                self.log.append(&self.buffer)?;
                self.n_events += 1;
            }
        }
        Ok(())
    }
}

/// How long mbatchd took to serve.
struct Timing {
    secs_to_port: f64,
    secs_to_answer: f64,
    n_jobs_answered: usize,
}

/// Spawns mbatchd on `cluster` and times it until `bjobs -u all` is answered.
fn start_and_query(cluster: &mut BenchCluster, user: &User) -> anyhow::Result<(Daemon, Timing)> {
    let spawned = Instant::now();
    // No snapshot during the run: it would only add work after the answer. (With lsb.params'
    // MAX_JOB_NUM of 1000 a real log never holds this many finishes without one; here the
    // log was written in one go, so the switch would start at once.)
    cluster.set_lsb_param("MAX_JOB_NUM", "1000000000")?;
    let (mut mbatchd, port_file) = cluster.spawn_mbatchd(&["--snapshot-events", "1000000000"])?;
    let port = loop {
        if let Ok(text) = std::fs::read_to_string(&port_file)
            && let Ok(port) = text.trim().parse::<u16>()
        {
            break port;
        }
        if !mbatchd.is_running() {
            bail!("mbatchd exited during its start:\n{}", mbatchd.log());
        }
        ensure!(spawned.elapsed() < START_TIMEOUT, "mbatchd not serving within {START_TIMEOUT:?}");
        std::thread::sleep(POLL_INTERVAL);
    };
    let secs_to_port = spawned.elapsed().as_secs_f64();
    cluster.port_known(port)?;
    let mut connection = Connection::connect(cluster.mbd_addr()?, cluster.authenticator()?, user.clone())?;
    let reply = connection.query(&client::query_all_users(false))?;
    let secs_to_answer = spawned.elapsed().as_secs_f64();
    Ok((mbatchd, Timing { secs_to_port, secs_to_answer, n_jobs_answered: reply.jobs.len() }))
}
