//! Running a budget of seeds for the test files: which seeds (from the environment), on
//! how many runner threads, and the failures reported in seed order, each with the command
//! that reruns it. Each run is single-threaded and a pure function of its seed, so the
//! split among runners changes no result.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use crate::{Failure, Options};

/// Failures collected before the runners stop taking seeds.
const FAILURES_SHOWN_MAX: usize = 5;
/// Runner threads at most.
const RUNNERS_MAX: usize = 4;

/// What a budget of seeds that all passed did.
#[derive(Debug)]
pub struct SeedRuns<T> {
    /// The first seed.
    pub start: u64,
    /// Seeds run.
    pub n_run: u64,
    /// Runner threads.
    pub n_runners: usize,
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// Each seed's outcome, in no particular order.
    pub outcomes: Vec<T>,
}

impl<T> SeedRuns<T> {
    /// `"N seeds from S in T s on R runners"`, for the test's summary line.
    pub fn summary(&self) -> String {
        format!(
            "{} seeds from {} in {:.2} s on {} runners",
            self.n_run, self.start, self.elapsed_s, self.n_runners
        )
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

/// Runs `check` over the seeds the environment asks for: `{prefix}_SEED=N` alone, else
/// `{prefix}_SEEDS` (default `default_count`) from `{prefix}_SEED_START` (default 0); one
/// runner when tracing (a trace is only readable from one). Panics with every failure
/// collected (at most five), in seed order.
pub fn run_seeds<T: Send>(
    prefix: &str,
    default_count: u64,
    options: &Options,
    check: impl Fn(u64) -> Result<T, Failure> + Sync,
) -> SeedRuns<T> {
    let (start, count) = match env_u64(&format!("{prefix}_SEED")) {
        Some(seed) => (seed, 1),
        None => (
            env_u64(&format!("{prefix}_SEED_START")).unwrap_or(0),
            env_u64(&format!("{prefix}_SEEDS")).unwrap_or(default_count),
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
    let outcomes: Mutex<Vec<T>> = Mutex::new(Vec::new());
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
                    match check(seed) {
                        Ok(outcome) => outcomes.lock().unwrap_or_else(PoisonError::into_inner).push(outcome),
                        Err(failure) => failures.lock().unwrap_or_else(PoisonError::into_inner).push(failure),
                    }
                }
            });
        }
    });
    let n_run = n_run.into_inner();
    let mut failures = failures.into_inner().unwrap_or_else(PoisonError::into_inner);
    if !failures.is_empty() {
        failures.sort_by_key(|f| f.seed);
        let report: Vec<String> = failures.iter().map(ToString::to_string).collect();
        panic!("{} of {n_run} seeds failed:\n{}", failures.len(), report.join("\n"));
    }
    SeedRuns {
        start,
        n_run,
        n_runners,
        elapsed_s: started.elapsed().as_secs_f64(),
        outcomes: outcomes.into_inner().unwrap_or_else(PoisonError::into_inner),
    }
}
