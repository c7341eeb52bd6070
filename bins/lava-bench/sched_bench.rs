//! The `sched` benchmark: one dispatch turn of mbatchd's logic (`lava_mbd::Mbd`, no
//! sockets, no disk) over `--jobs` (100,000) pending jobs and `--hosts` (1,000) hosts of
//! `--slots` (8) slots each, every host with lim's loads and static facts.
//!
//! The state is built in-process: MBD_START, every host registering, its load report
//! (deterministic pseudo-random loads), then the jobs' JOB_NEW events applied as replay
//! applies them (so that no turn runs while they arrive). The jobs cycle through
//! [`REQUIREMENTS`] (select and order sections, an rusage, a span, one that no host
//! satisfies, none) and 50 users. The measured step is the periodic turn, a tick
//! `MBD_SLEEP_TIME` after the start: it decides every pending job, logs a JOB_START and
//! builds a NEW_JOB for each one that starts, and stops once no slot is free (the jobs it
//! did not reach get their pending reasons when `bjobs` asks).
//! Each of `--runs` (5) runs steps a fresh copy of the same state.
//!
//! Before the turns, `sched_memory` gives what the logic's state costs per pending job
//! (this process's `VmRSS` before and after the JOB_NEWs are applied, with the system's
//! allocator) and the inline sizes of a job and of its submission: the share of mbatchd's
//! RSS per pending job (`lava-bench scale`) that is the state itself.
//!
//! - **free**: every slot is free, so the turn starts the jobs that fit until none is;
//! - **full**: the same turn once every slot is taken (the state after a first turn): it
//!   starts nothing.
//!
//! ```text
//! sched_memory jobs=100000 rss_before_kib=... rss_after_kib=... rss_per_job_bytes=... job_struct_bytes=... spec_struct_bytes=...
//! sched_pass mode=free jobs=100000 hosts=1000 slots=8 started=... reasons=... cpu_ms_min=... cpu_ms_median=... wall_ms_min=... wall_ms_median=...
//! sched_pass mode=full jobs=100000 hosts=1000 slots=8 started=0 reasons=... cpu_ms_min=... cpu_ms_median=... wall_ms_min=... wall_ms_median=...
//! ```
//!
//! CPU time is the measuring thread's (`/proc/thread-self/schedstat`): on a shared machine
//! it is the figure to compare; wall time shows what the neighbours cost.
//!
//! ```text
//! ```
//!
//! Goal (issue 7): one pass over 100,000 pending jobs and 1,000 hosts with select/order
//! requirements in ≤ 50 ms.

use std::hint::black_box;
use std::time::Instant;

use anyhow::{Context, bail};
use lava_batch_ll::{HostName, JobRef, QueueName, SubmitSpec, UserName};
use lava_mbd::event::JobNewRecord;
use lava_mbd::{Effect, Event, HostConfig, Input, LimFacts, Mbd, MbdConfig, QueueConfig};

/// The requirement strings the jobs cycle through, with the slots each job asks for.
const REQUIREMENTS: [(&str, u32); 8] = [
    ("select[mem>2000] order[r15s:pg]", 1),
    ("select[ncpus>=8 && r1m<3] order[-mem]", 1),
    ("select[type==LINUX64 || mem>6000] order[ut]", 1),
    ("rusage[mem=100] order[mem]", 1),
    ("select[mem>1000000]", 1),
    ("span[hosts=1] order[r15s]", 2),
    ("", 1),
    ("select[swp>100 && !(ls>20)]", 1),
];
/// Distinct submitting users.
const N_USERS: u32 = 50;
/// The start of the benchmark's clock.
const T0_MS: u64 = 1_700_000_000_000;

struct Options {
    n_jobs: u32,
    n_hosts: u32,
    n_slots: u32,
    n_runs: usize,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options { n_jobs: 100_000, n_hosts: 1_000, n_slots: 8, n_runs: 5 };
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().with_context(|| format!("{flag} needs a value"))?;
        let number = || value.parse::<u32>().with_context(|| format!("{flag}: {value} is not a number"));
        match flag.as_str() {
            "--jobs" => options.n_jobs = number()?,
            "--hosts" => options.n_hosts = number()?,
            "--slots" => options.n_slots = number()?,
            "--runs" => options.n_runs = number()?.max(1) as usize,
            other => bail!("unknown option {other} (--jobs N --hosts N --slots N --runs N)"),
        }
    }
    Ok(options)
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let state = build(&options)?;
    let tick_ms = T0_MS + MbdConfig::new("bench", host(0)).mbd_sleep_time_ms;
    let (started, free) = time_turn(&state, tick_ms, options.n_runs)?;
    report("free", &options, &state, started, &free);
    let mut full_state = state.clone();
    full_state.step(tick_ms, Input::Tick, &mut Vec::new());
    let (started, full) = time_turn(&full_state, tick_ms * 2 - T0_MS, options.n_runs)?;
    report("full", &options, &full_state, started, &full);
    Ok(())
}

/// Wall and CPU times of one run, ms.
struct Times {
    wall_ms: Vec<f64>,
    cpu_ms: Vec<f64>,
}

/// This thread's time on a CPU so far, ns (`/proc/thread-self/schedstat`, first field):
/// the machines this runs on are shared, and wall time alone would measure the neighbours.
fn thread_cpu_ns() -> anyhow::Result<u64> {
    let text =
        std::fs::read_to_string("/proc/thread-self/schedstat").context("/proc/thread-self/schedstat")?;
    text.split_whitespace().next().and_then(|ns| ns.parse().ok()).context("schedstat's first field")
}

/// Steps the periodic turn on `runs` fresh copies of `state`: the jobs started and each run's times.
fn time_turn(state: &Mbd, tick_ms: u64, runs: usize) -> anyhow::Result<(usize, Times)> {
    let mut times = Times { wall_ms: Vec::with_capacity(runs), cpu_ms: Vec::with_capacity(runs) };
    let mut started = 0;
    for _ in 0..runs {
        let mut mbd = state.clone();
        let mut effects = Vec::new();
        let (begin, begin_cpu_ns) = (Instant::now(), thread_cpu_ns()?);
        mbd.step(tick_ms, Input::Tick, &mut effects);
        times.cpu_ms.push((thread_cpu_ns()? - begin_cpu_ns) as f64 / 1e6);
        times.wall_ms.push(begin.elapsed().as_secs_f64() * 1000.0);
        started = effects.iter().filter(|e| matches!(e, Effect::Append(Event::JobStart(_)))).count();
        black_box(&mbd);
    }
    times.wall_ms.sort_by(f64::total_cmp);
    times.cpu_ms.sort_by(f64::total_cmp);
    Ok((started, times))
}

fn report(mode: &str, options: &Options, state: &Mbd, started: usize, times: &Times) {
    let pending = state.cluster_counts().jobs[0] as usize;
    let median = |values: &[f64]| values[values.len() / 2];
    println!(
        "sched_pass mode={mode} jobs={} hosts={} slots={} started={started} reasons={} cpu_ms_min={:.1} cpu_ms_median={:.1} wall_ms_min={:.1} wall_ms_median={:.1}",
        options.n_jobs,
        options.n_hosts,
        options.n_slots,
        pending - started,
        times.cpu_ms[0],
        median(&times.cpu_ms),
        times.wall_ms[0],
        median(&times.wall_ms),
    );
}

fn host(idx: u32) -> HostName {
    HostName::parse("bench", &format!("h{idx:05}")).expect("valid host name")
}

/// A deterministic pseudo-random number in [0, 1) for (host, salt).
fn noise(idx: u32, salt: u32) -> f32 {
    let mut x = u64::from(idx).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ u64::from(salt).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    (x >> 40) as f32 / (1u64 << 24) as f32
}

fn build(options: &Options) -> anyhow::Result<Mbd> {
    let queue = QueueName::parse("bench", "normal").expect("valid queue name");
    let mut config = MbdConfig::new("bench", host(0));
    config.queues = vec![QueueConfig { default: true, ..QueueConfig::new(queue.clone(), 30) }];
    // The turn is what is measured: no NEW_JOB of an earlier turn is due for a resend.
    config.resend_interval_ms = 3_600_000;
    for idx in 0..options.n_hosts {
        let mut host = HostConfig::new(host(idx), Some(options.n_slots));
        host.host_type = Some(if idx % 3 == 0 { "LINUX64" } else { "LINUXARM" }.to_owned());
        config.hosts.push(host);
    }
    let mut mbd = Mbd::new(config).context("the bench configuration")?;
    let mut effects = Vec::new();
    mbd.step(T0_MS, Input::Start, &mut effects);
    for idx in 0..options.n_hosts {
        mbd.step(T0_MS, Input::HostRegistered { host: host(idx), n_cpus: 8 }, &mut effects);
        let mut li = [0.0f32; 11];
        for (position, value) in li.iter_mut().enumerate() {
            *value = noise(idx, position as u32) * 4.0;
        }
        li[3] = noise(idx, 3); // ut
        li[6] = (noise(idx, 6) * 30.0).floor(); // ls
        li[9] = noise(idx, 9) * 2_000.0; // swp, MB
        li[10] = 500.0 + noise(idx, 10) * 7_500.0; // mem, MB
        let facts = LimFacts {
            load: Some(li),
            ncpus: 8,
            maxmem_mb: 8_000,
            maxswp_mb: 2_000,
            locked: false,
            busy: false,
        };
        mbd.step(T0_MS, Input::HostLoad { host: host(idx), facts: Box::new(facts) }, &mut effects);
    }
    let rss_before_kib = crate::cluster::rss_kib(std::process::id())?;
    let users: Vec<UserName> = (0..N_USERS)
        .map(|n| UserName::parse("bench", &format!("user{n}")).expect("valid user name"))
        .collect();
    for id in 1..=options.n_jobs {
        let (res_req, n_slots) = REQUIREMENTS[id as usize % REQUIREMENTS.len()];
        let mut request = crate::client::true_job();
        request.res_req = res_req.to_owned();
        request.n_slots = n_slots;
        let record = JobNewRecord {
            job: JobRef::new(id, 0).context("job ids start at 1")?,
            request_id: lava_batch_wire::RequestId { high: 0, low: u64::from(id) },
            user_id: 1000 + id % N_USERS,
            group_id: 1000,
            user: users[(id % N_USERS) as usize].clone(),
            from_host: host(0),
            queue: queue.clone(),
            submit_time_ms: T0_MS,
            hold: false,
            spec: SubmitSpec::try_from(request).context("a valid submission")?,
        };
        mbd.apply_owned(Event::JobNew(Box::new(record))).context("JOB_NEW applies")?;
    }
    let rss_after_kib = crate::cluster::rss_kib(std::process::id())?;
    println!(
        "sched_memory jobs={} rss_before_kib={rss_before_kib} rss_after_kib={rss_after_kib} rss_per_job_bytes={:.0} \
         job_struct_bytes={} spec_struct_bytes={}",
        options.n_jobs,
        rss_after_kib.saturating_sub(rss_before_kib) as f64 * 1024.0 / f64::from(options.n_jobs.max(1)),
        std::mem::size_of::<lava_mbd::Job>(),
        std::mem::size_of::<SubmitSpec>(),
    );
    Ok(mbd)
}
