//! The simulation tests CI runs: a fixed budget of seeds, and determinism.
//!
//! `LAVA_SIM_SEED=N` runs seed N alone; `LAVA_SIM_SEEDS=N` runs N seeds from
//! `LAVA_SIM_SEED_START` (default 0); `LAVA_SIM_TRACE=1` prints every event;
//! `LAVA_SIM_REORDER=1` lets frames of one connection overtake each other.
//! A failure names its seed and the command that reproduces it.

use lava_sim::{Options, check, run_seeds};

/// Seeds CI runs by default: about 11 s of a debug build on two idle cores
/// (one run takes about 10 ms in debug, under 2 ms in release; see the crate doc).
const SEEDS_DEFAULT: u64 = 2_000;

// Goal: the real mbd and sbd logic keep every invariant and converge under
// every fault the simulation injects, for a fixed budget of seeds.
// Method: runner threads take seeds in turn (each run is single-threaded and
// a pure function of its seed, so the split changes no result); failures are
// reported in seed order, each with the command that reruns it.
#[test]
fn sim_seeds() {
    let options = Options::from_env();
    let runs = run_seeds("LAVA_SIM", SEEDS_DEFAULT, &options, |seed| check(seed, &options));
    eprintln!("lava-sim: {} ({:.0} seeds/s)", runs.summary(), runs.n_run as f64 / runs.elapsed_s);
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

// Goal: the budget exercises the rare paths, not just their code in principle: `bkill -r`
// and `brequeue -r`, and sbatchd's kills at the limits it measures (`-M`, the queues'
// CPULIMIT, whose kill begins with SIGXCPU, and PROCESSLIMIT). Method: a few dozen seeds,
// run once, end jobs by force, requeue runs and end jobs at a limit (every property of each
// run is checked as in `sim_seeds`).
#[test]
fn rare_paths_happen() {
    let options = Options { trace: false, ..Options::from_env() };
    let (mut n_forced, mut n_requeues, mut n_over, mut n_kills) = (0, 0, 0, 0);
    for seed in 0..40 {
        let outcome = check(seed, &options).unwrap_or_else(|f| panic!("{f}"));
        n_forced += outcome.stats.n_forced_exits;
        n_requeues += outcome.stats.n_requeues;
        n_over += outcome.stats.n_usage_over;
        n_kills += outcome.stats.n_limit_kills;
    }
    eprintln!("limit kills: {n_over} measurements over a limit, {n_kills} jobs killed at one");
    assert!(n_forced > 0, "no bkill -r ended a job in 40 seeds");
    assert!(n_requeues > 0, "no brequeue -r requeued a run in 40 seeds");
    assert!(n_over > 0 && n_kills > 0, "{n_over} measurements over a limit, {n_kills} jobs killed at one");
}
