//! The seeded simulation of the replicated coordinator (docs/failover.md, "How it is
//! tested"): three master candidates running the real lava-coord-logic over
//! `lava_replog::machine`, submitters (SUBMIT_TASK_ONCE retried under the same id across
//! failovers) and pull workers that find the leader, take tasks under leases, complete
//! them or die holding them; crashes (between any two steps), pauses, partitions (one-way
//! ones too), lost, duplicated and reordered frames, power loss of unsynced writes; every
//! property checked after every step (crate `coordinator` module).
//!
//! `LAVA_SIM_COORD_SEED=N` runs seed N alone; `LAVA_SIM_COORD_SEEDS=N` runs N seeds from
//! `LAVA_SIM_COORD_SEED_START` (default 0); `LAVA_SIM_TRACE=1` prints every event.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use lava_sim::{CoordStats, Failure, Options, check_coordinator};

/// Seeds CI runs by default (see docs/failover.md for the time they take).
const SEEDS_DEFAULT: u64 = 300;
const FAILURES_SHOWN_MAX: usize = 5;
const RUNNERS_MAX: usize = 4;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

fn add(total: &mut CoordStats, one: &CoordStats) {
    total.n_tasks += one.n_tasks;
    total.n_crashes += one.n_crashes;
    total.n_deposed += one.n_deposed;
    total.n_leads += one.n_leads;
    total.n_not_done += one.n_not_done;
    total.n_expired += one.n_expired;
    total.n_repeated += one.n_repeated;
    total.n_snapshots += one.n_snapshots;
}

// Goal: with the coordinator replicated, no acknowledged task, submission id, grant or
// outcome is lost, a submission id never makes a second task, a finished task is never
// handed out again, no two workers hold a task under unexpired leases, at most one leader
// per term acknowledges, and every candidate's replay yields the same state, under every
// fault, for a fixed budget of seeds. Method: as `replicated_seeds` in tests/replicated.rs.
#[test]
fn replicated_coordinator_seeds() {
    let options = Options::from_env();
    let (start, count) = match env_u64("LAVA_SIM_COORD_SEED") {
        Some(seed) => (seed, 1),
        None => (
            env_u64("LAVA_SIM_COORD_SEED_START").unwrap_or(0),
            env_u64("LAVA_SIM_COORD_SEEDS").unwrap_or(SEEDS_DEFAULT),
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
    let totals = Mutex::new(CoordStats::default());
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
                    match check_coordinator(seed, &options) {
                        Ok(outcome) => {
                            add(&mut totals.lock().unwrap_or_else(PoisonError::into_inner), &outcome.stats);
                        }
                        Err(failure) => failures.lock().unwrap_or_else(PoisonError::into_inner).push(failure),
                    }
                }
            });
        }
    });
    let n_run = n_run.into_inner();
    let elapsed = started.elapsed().as_secs_f64();
    let t = totals.into_inner().unwrap_or_else(PoisonError::into_inner);
    eprintln!(
        "lava-sim replicated coordinator: {n_run} seeds from {start} in {elapsed:.2} s on {n_runners} runners: {} tasks, {} leases expired, {} candidate crashes, {} leaderships, {} deposed leaders restarted, {} answers not done, {} repeated submissions, {} snapshots",
        t.n_tasks,
        t.n_expired,
        t.n_crashes,
        t.n_leads,
        t.n_deposed,
        t.n_not_done,
        t.n_repeated,
        t.n_snapshots
    );
    let mut failures = failures.into_inner().unwrap_or_else(PoisonError::into_inner);
    if !failures.is_empty() {
        failures.sort_by_key(|f| f.seed);
        let report: Vec<String> = failures.iter().map(ToString::to_string).collect();
        panic!("{} of {n_run} seeds failed:\n{}", failures.len(), report.join("\n"));
    }
    // The runs must have done something: tasks, failovers, expiries, leaders that lost
    // proposals, submissions answered from an earlier attempt.
    if n_run >= 50 {
        assert!(t.n_tasks > n_run, "the runs created only {} tasks in {n_run} seeds", t.n_tasks);
        assert!(t.n_leads > 2 * n_run, "only {} leaderships in {n_run} seeds: few failovers", t.n_leads);
        assert!(t.n_not_done > 0, "no leader ever lost a proposal in {n_run} seeds");
        assert!(t.n_deposed > 0, "no deposed leader ever started again in {n_run} seeds");
        assert!(t.n_expired > 0, "no lease ever expired in {n_run} seeds");
        assert!(
            t.n_repeated > 0,
            "no submission id was ever answered from an earlier attempt in {n_run} seeds"
        );
    }
}

// Goal: a run of the replicated coordinator is a pure function of its seed.
#[test]
fn replicated_coordinator_same_seed_same_trace() {
    let options = Options { trace: false, ..Options::from_env() };
    for seed in [3, 77] {
        let first = check_coordinator(seed, &options).unwrap_or_else(|f| panic!("{f}"));
        let second = check_coordinator(seed, &options).unwrap_or_else(|f| panic!("{f}"));
        assert_eq!(first, second, "seed {seed} is not deterministic");
    }
}
