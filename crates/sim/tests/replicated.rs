//! The seeded simulation of the replicated mbatchd (docs/failover.md, "How it is tested"):
//! three master candidates running the real lava-mbd logic over `lava_replog::machine`,
//! sbatchds and commands that find the leader, crashes (between any two steps), pauses,
//! partitions (one-way ones too), lost, duplicated and reordered frames, power loss of
//! unsynced writes; every property checked after every step (crate `replicated` module).
//!
//! `LAVA_SIM_REPL_SEED=N` runs seed N alone; `LAVA_SIM_REPL_SEEDS=N` runs N seeds from
//! `LAVA_SIM_REPL_SEED_START` (default 0); `LAVA_SIM_TRACE=1` prints every event.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use lava_sim::{Failure, Options, check_replicated};

/// Seeds CI runs by default (see docs/failover.md for the time they take).
const SEEDS_DEFAULT: u64 = 150;
const FAILURES_SHOWN_MAX: usize = 5;
const RUNNERS_MAX: usize = 4;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

// Goal: with mbatchd replicated, no acknowledged job is lost, no job runs twice, at most one
// leader per term acknowledges, and every candidate's replay yields the same state, under
// every fault, for a fixed budget of seeds. Method: as `sim_seeds` in tests/sim.rs.
#[test]
fn replicated_seeds() {
    let options = Options::from_env();
    let (start, count) = match env_u64("LAVA_SIM_REPL_SEED") {
        Some(seed) => (seed, 1),
        None => (
            env_u64("LAVA_SIM_REPL_SEED_START").unwrap_or(0),
            env_u64("LAVA_SIM_REPL_SEEDS").unwrap_or(SEEDS_DEFAULT),
        ),
    };
    let end = start.saturating_add(count);
    let n_runners = if options.trace {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get()).min(RUNNERS_MAX)
    };
    let started = Instant::now();
    let next_seed = AtomicU64::new(start);
    let n_run = AtomicU64::new(0);
    let totals = Mutex::new((0u64, 0u64, 0u64, 0u64));
    let failures: Mutex<Vec<Failure>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..n_runners {
            scope.spawn(|| {
                loop {
                    let seed = next_seed.fetch_add(1, Ordering::Relaxed);
                    let enough =
                        failures.lock().unwrap_or_else(PoisonError::into_inner).len() >= FAILURES_SHOWN_MAX;
                    if seed >= end || enough {
                        return;
                    }
                    n_run.fetch_add(1, Ordering::Relaxed);
                    match check_replicated(seed, &options) {
                        Ok(outcome) => {
                            let mut t = totals.lock().unwrap_or_else(PoisonError::into_inner);
                            t.0 += outcome.stats.n_jobs;
                            t.1 += outcome.stats.n_mbd_crashes;
                            t.2 += outcome.stats.n_leads;
                            t.3 += outcome.stats.n_not_done;
                        }
                        Err(failure) => failures.lock().unwrap_or_else(PoisonError::into_inner).push(failure),
                    }
                }
            });
        }
    });
    let n_run = n_run.into_inner();
    let elapsed = started.elapsed().as_secs_f64();
    let (n_jobs, n_crashes, n_leads, n_not_done) =
        totals.into_inner().unwrap_or_else(PoisonError::into_inner);
    eprintln!(
        "lava-sim replicated: {n_run} seeds from {start} in {elapsed:.2} s on {n_runners} runners: {n_jobs} jobs, {n_crashes} candidate crashes, {n_leads} leaderships, {n_not_done} answers not done"
    );
    let mut failures = failures.into_inner().unwrap_or_else(PoisonError::into_inner);
    if !failures.is_empty() {
        failures.sort_by_key(|f| f.seed);
        let report: Vec<String> = failures.iter().map(ToString::to_string).collect();
        panic!("{} of {n_run} seeds failed:\n{}", failures.len(), report.join("\n"));
    }
    // The runs must have done something: jobs, failovers, and leaders that lost proposals.
    if n_run >= 50 {
        assert!(n_jobs > n_run, "the runs created only {n_jobs} jobs in {n_run} seeds");
        assert!(n_leads > 2 * n_run, "only {n_leads} leaderships in {n_run} seeds: few failovers");
        assert!(n_not_done > 0, "no leader ever lost a proposal in {n_run} seeds");
    }
}

// Goal: a replicated run is a pure function of its seed.
#[test]
fn replicated_same_seed_same_trace() {
    let options = Options { trace: false, ..Options::from_env() };
    for seed in [3, 77] {
        let first = check_replicated(seed, &options).unwrap_or_else(|f| panic!("{f}"));
        let second = check_replicated(seed, &options).unwrap_or_else(|f| panic!("{f}"));
        assert_eq!(first, second, "seed {seed} is not deterministic");
    }
}
