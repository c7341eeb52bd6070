//! The simulation tests CI runs: a fixed budget of seeds, and determinism.
//!
//! `LAVA_SIM_SEED=N` runs seed N alone; `LAVA_SIM_SEEDS=N` runs N seeds from
//! `LAVA_SIM_SEED_START` (default 0); `LAVA_SIM_TRACE=1` prints every event;
//! `LAVA_SIM_REORDER=1` lets frames of one connection overtake each other.
//! A failure names its seed and the command that reproduces it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use lava_sim::{Failure, Options, check};

/// Seeds CI runs by default: about 11 s of a debug build on two idle cores
/// (one run takes about 10 ms in debug, under 2 ms in release; see the crate doc).
const SEEDS_DEFAULT: u64 = 2_000;
/// Failures collected before the runners stop taking seeds.
const FAILURES_SHOWN_MAX: usize = 5;
/// Runner threads at most; each seed still runs alone in one thread.
const RUNNERS_MAX: usize = 4;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

// Goal: the real mbd and sbd logic keep every invariant and converge under
// every fault the simulation injects, for a fixed budget of seeds.
// Method: runner threads take seeds in turn (each run is single-threaded and
// a pure function of its seed, so the split changes no result); failures are
// reported in seed order, each with the command that reruns it.
#[test]
fn sim_seeds() {
    let options = Options::from_env();
    let (start, count) = match env_u64("LAVA_SIM_SEED") {
        Some(seed) => (seed, 1),
        None => {
            (env_u64("LAVA_SIM_SEED_START").unwrap_or(0), env_u64("LAVA_SIM_SEEDS").unwrap_or(SEEDS_DEFAULT))
        }
    };
    let end = start.saturating_add(count);
    // A trace is only readable from one runner.
    let n_runners = if options.trace {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get()).min(RUNNERS_MAX)
    };
    let started = Instant::now();
    let next_seed = AtomicU64::new(start);
    let n_run = AtomicU64::new(0);
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
                    if let Err(failure) = check(seed, &options) {
                        failures.lock().unwrap_or_else(PoisonError::into_inner).push(failure);
                    }
                }
            });
        }
    });
    let n_run = n_run.into_inner();
    let elapsed = started.elapsed().as_secs_f64();
    eprintln!(
        "lava-sim: {n_run} seeds from {start} in {elapsed:.2} s on {n_runners} runners ({:.0} seeds/s)",
        n_run as f64 / elapsed
    );
    let mut failures = failures.into_inner().unwrap_or_else(PoisonError::into_inner);
    if !failures.is_empty() {
        failures.sort_by_key(|f| f.seed);
        let report: Vec<String> = failures.iter().map(ToString::to_string).collect();
        panic!("{} of {n_run} seeds failed:\n{}", failures.len(), report.join("\n"));
    }
}

// Goal: a run is a pure function of its seed. Method: run a few seeds twice
// and compare the fingerprints of everything that happened; different seeds
// give different runs.
#[test]
fn same_seed_same_trace() {
    let options = Options { trace: false, ..Options::from_env() };
    let mut hashes = Vec::new();
    for seed in [1, 42, 4242] {
        let first = check(seed, &options).unwrap_or_else(|f| panic!("{f}"));
        let second = check(seed, &options).unwrap_or_else(|f| panic!("{f}"));
        assert_eq!(first, second, "seed {seed} is not deterministic");
        hashes.push(first.trace_hash);
    }
    hashes.dedup();
    assert_eq!(hashes.len(), 3, "three seeds gave the same run");
}

// Goal: the budget exercises `bkill -r` and `brequeue -r`, not just their code
// paths in principle. Method: a few dozen seeds end jobs by force and requeue
// runs (every property of each run is checked as in `sim_seeds`).
#[test]
fn forced_exits_and_requeues_happen() {
    let options = Options { trace: false, ..Options::from_env() };
    let (mut n_forced, mut n_requeues) = (0, 0);
    for seed in 0..40 {
        let outcome = check(seed, &options).unwrap_or_else(|f| panic!("{f}"));
        n_forced += outcome.stats.n_forced_exits;
        n_requeues += outcome.stats.n_requeues;
    }
    assert!(n_forced > 0, "no bkill -r ended a job in 40 seeds");
    assert!(n_requeues > 0, "no brequeue -r requeued a run in 40 seeds");
}
