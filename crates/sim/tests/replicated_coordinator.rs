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

use lava_sim::{CoordStats, Options, check_coordinator, run_seeds};

/// Seeds CI runs by default (see docs/failover.md for the time they take).
const SEEDS_DEFAULT: u64 = 300;

fn add(total: &mut CoordStats, one: &CoordStats) {
    total.n_tasks += one.n_tasks;
    total.n_crashes += one.n_crashes;
    total.n_deposed += one.n_deposed;
    total.n_released_before_own_fsync += one.n_released_before_own_fsync;
    total.n_disk_fulls += one.n_disk_fulls;
    total.n_leads += one.n_leads;
    total.n_not_done += one.n_not_done;
    total.n_expired += one.n_expired;
    total.n_repeated += one.n_repeated;
    total.n_snapshots += one.n_snapshots;
    total.n_snapshots_by_weight += one.n_snapshots_by_weight;
}

// Goal: with the coordinator replicated, no acknowledged task, submission id, grant or
// outcome is lost, a submission id never makes a second task, a finished task is never
// handed out again, no two workers hold a task under unexpired leases, at most one leader
// per term acknowledges, and every candidate's replay yields the same state, under every
// fault, for a fixed budget of seeds. Method: as `replicated_seeds` in tests/replicated.rs.
#[test]
fn replicated_coordinator_seeds() {
    let options = Options::from_env();
    let runs = run_seeds("LAVA_SIM_COORD", SEEDS_DEFAULT, &options, |seed| check_coordinator(seed, &options));
    let n_run = runs.n_run;
    let mut t = CoordStats::default();
    for outcome in &runs.outcomes {
        add(&mut t, &outcome.stats);
    }
    eprintln!(
        "lava-sim replicated coordinator: {}: {} tasks, {} leases expired, {} candidate crashes, {} leaderships, {} deposed leaders restarted, {} answers released before the leader's own fsync, {} answers not done, {} repeated submissions, {} snapshots ({} by weight), {} full disks",
        runs.summary(),
        t.n_tasks,
        t.n_expired,
        t.n_crashes,
        t.n_leads,
        t.n_deposed,
        t.n_released_before_own_fsync,
        t.n_not_done,
        t.n_repeated,
        t.n_snapshots,
        t.n_snapshots_by_weight,
        t.n_disk_fulls
    );
    // The runs must have done something: tasks, failovers, expiries, leaders that lost
    // proposals, submissions answered from an earlier attempt, answers released on the
    // followers' acknowledgements while the leader's own fsync ran.
    if n_run >= 50 {
        assert!(t.n_tasks > n_run, "the runs created only {} tasks in {n_run} seeds", t.n_tasks);
        assert!(t.n_leads > 2 * n_run, "only {} leaderships in {n_run} seeds: few failovers", t.n_leads);
        assert!(t.n_not_done > 0, "no leader ever lost a proposal in {n_run} seeds");
        assert!(t.n_deposed > 0, "no deposed leader ever started again in {n_run} seeds");
        assert!(
            t.n_released_before_own_fsync > 0,
            "no leader ever answered on its followers' acknowledgements alone in {n_run} seeds"
        );
        assert!(t.n_snapshots_by_weight > 0, "no snapshot was ever due by weight in {n_run} seeds");
        assert!(t.n_expired > 0, "no lease ever expired in {n_run} seeds");
        assert!(t.n_disk_fulls > 0, "no candidate's disk was ever full in {n_run} seeds");
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
