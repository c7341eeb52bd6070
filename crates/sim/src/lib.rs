//! lava-sim: a deterministic simulation of a whole batch cluster — one
//! mbatchd and up to four sbatchd — running the real logic crates
//! (`lava-mbd`, `lava-sbd`) on a virtual network, virtual disks and a virtual
//! clock, in one thread, as a pure function of a 64-bit seed
//! (docs/ARCHITECTURE.md, "Tests and benchmarks"; seeded and bounded, a failing seed
//! reproduces exactly, after TigerBeetle's VOPR).
//!
//! **Architecture Invariant:** the simulator owns no protocol logic. It only
//! plays the shells exactly as the logic crates' contracts prescribe (carry
//! out effects in order, hold mbatchd's messages until their records are
//! durable, persist sbatchd's records before acting, adopt shepherds after a
//! restart) and injects faults around them. Every decision about a job is
//! made by `lava-mbd` or `lava-sbd`; if the simulation needs a decision the
//! contracts do not describe, the contract is missing something.
//!
//! # What is simulated
//! - **mbatchd's shell** (`mbd_shell`): `lsb.events` as a list of XDR
//!   records with a durable prefix; group commit (an fsync at a random moment
//!   covers everything appended so far); every SendSbd and Reply held, in
//!   order, until the records appended before it are durable; restart = a
//!   fresh `Mbd` (or `Mbd::from_snapshot` of the newest snapshot, written at
//!   some quiescent points) fed the durable records through `apply`, then
//!   `Start`; channels registered and closed as contract step 6 says.
//! - **sbatchd's shell** (`sbd_shell`): one XDR record file per job; a
//!   Persist is a write then an fsync that takes virtual time, and nothing
//!   after it happens before it is durable; restart = `Sbd::restore` from the
//!   durable records, then adoption (`Spawned`, `NotLaunched`, `Exited`).
//! - **Shepherds and jobs** (`process`): a Launch starts a process that
//!   runs for a random time and exits 0 or non-zero; it survives sbatchd
//!   crashes; it obeys SIGSTOP, SIGCONT, SIGINT, SIGTERM (which it may
//!   ignore) and SIGKILL as the kernel does. Half the jobs with a durable kill
//!   intent run until a signal ends them, so a kill that never arrives shows
//!   as a run that never converges instead of hiding behind a natural exit.
//! - **Commands** (`client`): users submit jobs (random queue, 1–2 slots,
//!   some held, some with a run limit), list them and stop, resume and kill
//!   them, or requeue them with `brequeue -r` (the run killed, the job run
//!   again: the oracle then checks the killed run's finish against its real
//!   process and lets the job run once more); a request whose answer does not
//!   come is retried with the same request id on a new connection, while the
//!   old attempt may still arrive late; every user ends with `bresume 0`.
//! - **Bytes**: every message is a real batch frame (header + XDR body)
//!   decoded on arrival through `lava-batch-wire` and `lava-batch-ll`, every
//!   event and record real XDR (`codec`): encoding bugs show.
//!
//! # The fault model
//! Each seed draws its own intensities (`params`), so some runs stress one
//! fault and others all of them:
//! - frames lost, duplicated, delayed (up to ten times the usual delay);
//!   frames of one sbatchd connection keep their order, as TCP keeps them,
//!   unless [`Options::reorder_within_connection`]; frames of a dead
//!   connection are never delivered; commands' connections are independent,
//!   so a late attempt may overtake anything;
//! - partitions of a host's link for a while: the connection dies, each end
//!   notices after its own delay (`HostDisconnected`, `Disconnected`), and
//!   sbatchd reconnects and registers again once it can;
//! - crashes of mbatchd at any moment, in particular between an append and
//!   its fsync; the unsynced tail is lost, or a random prefix of it survives
//!   (the page cache wrote it), at record granularity;
//! - crashes of any sbatchd at any moment, including between a record's
//!   write and its fsync (the write is lost or survives) and right before any
//!   effect (between a Persist and the Send or Launch that follows it);
//! - user lookups that fail on the execution host, shepherds that cannot
//!   start (the job is refused and dispatched again);
//! - windows in which mbatchd's disk is full: no group commit succeeds until
//!   the window ends (everything held behind the buffered records waits), the
//!   logic refuses new submissions (`Input::DiskFull`, stepped after `Start`
//!   when mbatchd starts on a full disk), and crashes during the window lose
//!   the unsynced tail as above.
//!
//! After the fault phase the cluster heals: partitions end, the disk has room, crashed daemons
//! restart, the network stops losing and duplicating, lookups and launches
//! stop failing; after the network settles every sbatchd reconnects once (a
//! job refused by every host it may use waits for a registration, lava-mbd's
//! documented choice). The run then goes on until everything converged, or
//! fails after `world::HEAL_MS_MAX` of virtual time.
//!
//! # What is checked
//! After every step: `Mbd::check_invariants`, `Sbd::check_invariants` and
//! `lava_sbd::invariants::check_effects` against the durable records. On the
//! wire: no EXECUTE or FINISH leaves an sbatchd before mbatchd's
//! JOB_START_ACCEPT of that very process is durable; every ACK mbatchd emits
//! confirms an event of the state it decided on, and leaves only once that
//! event is durable; a Started reply names the process that runs; EXECUTE
//! never changes a job's state; a durable DONE or EXIT never changes. Always:
//! no job has two processes, or runs twice (LSF semantics: a refused and
//! redispatched job still runs at most once); a request id never creates a
//! second job and a retried submission gets the same job; a kill answered
//! Accepted is durable. At every quiescent point (durable log = appended log)
//! the replayed durable log equals mbatchd's live state, and at every restart
//! the replay equals the oracle's durable state. At the end: every job
//! reached DONE or EXIT exactly once, as its process really ended (DONE for
//! wait status 0, the pid and wait status reported), a job that never ran
//! ended EXIT because it was killed, every sbatchd record is settled
//! (finish acknowledged, or an acknowledged refusal), and the final log
//! replays to the final state.
//!
//! The test `same_seed_same_trace` runs seeds twice and compares the 64-bit
//! fingerprint of everything that happened (every event, every byte on a
//! wire or a disk): a run is a pure function of its seed.
//!
//! # Reproducing a failure
//! A failing run panics with its seed and the command that reruns it alone:
//! `LAVA_SIM_SEED=12345 cargo test -p lava-sim --release -- sim_seeds`; add
//! `LAVA_SIM_TRACE=1` to print every event, or run
//! `cargo run -p lava-sim --release --example trace -- 12345`.
//! `LAVA_SIM_SEEDS=N` runs N seeds from `LAVA_SIM_SEED_START` (default 0).
//!
//! # Budget
//! One run is 20–60 s of faults, then healing, for 3–14 jobs on 1–4 hosts: a
//! few thousand steps, about 10 ms in a debug build and under 2 ms in release
//! (measured on the 2-core build machine: about 95 seeds/s per core in debug,
//! 590 in release). `sim_seeds` runs 2,000 seeds by default, spread over the
//! cores (each seed in one thread): about 11 s in debug on two idle cores,
//! 20 s when the machine is busy; 300,000 seeds passed in release.
//!
//! # Known gaps
//! - `LAVA_SIM_REORDER=1` still fails on about 1 seed in 1,000: a NEW_JOB
//!   copy delayed longer than the tombstone is kept (short here, 24 h in
//!   sbatchd) finds no record and runs the job again. Messages now carry the
//!   job's dispatch number, which closed the other failure it used to show (an
//!   ACK or refusal of one dispatch, overtaken by the next dispatch of the job
//!   to the same host, taken for that dispatch's); the late NEW_JOB needs a
//!   memory beyond the tombstone (for example the highest dispatch number seen
//!   per job, kept longer than the record).
//! - A shepherd starts atomically here: the real one can be forked and not yet
//!   have written its pid file when a restarted sbatchd looks for it.
//! - Hosts never reboot (processes die only by signal or on their own), no
//!   numbered `bkill -s` is sent, and there is no lim. What sbatchd measures of a job
//!   (`Usage`) is one reading over every limit at a random moment of some runs
//!   (`usage_over_p`), never a gradual one: it starts the kill of the job's first limit
//!   (`-M` of some submissions, the `short` queue's CPULIMIT, the `night` queue's
//!   PROCESSLIMIT).
//!
//! # The replicated mbatchd
//! [`run_replicated`] plays the same cluster with mbatchd replicated among three master
//! candidates (`lava_replog::machine` over the real lava-mbd logic), with crashes, pauses
//! and partitions of the candidates on top of the faults above (module `replicated`,
//! docs/failover.md, "How it is tested"; `tests/replicated.rs`, `LAVA_SIM_REPL_SEED=N`).
//! Its disk is the candidates' replica records (a `Persist` in progress keeps a prefix of
//! them at a crash) instead of `lsb.events`. A candidate's disk fills up now and then: while
//! it is full nothing of its is written (its `Persist`s and a snapshot from the leader wait,
//! its own compactions are put off), a full leader hands its leadership over as mbatchd's
//! shell does (lava-replog's `HandOverPolicy`), and a serving candidate's logic is told
//! (`Input::DiskFull`, on its timer and after `Start` at `Lead`): it refuses new jobs while
//! full.
//!
//! # The replicated coordinator
//! [`run_coordinator`] plays the coordinator replicated among three master candidates
//! (`lava_replog::machine` over the real lava-coord-logic) with a shell that does what
//! `bins/coordinator/src/replicated.rs` does, submitters that retry SUBMIT_TASK_ONCE under
//! one id across failovers and pull workers that take tasks under leases, complete them or
//! die holding them (module `coordinator`, docs/failover.md, "The replicated coordinator
//! simulation"; `tests/replicated_coordinator.rs`, `LAVA_SIM_COORD_SEED=N`). Its candidates'
//! disks fill up as the replicated mbatchd's do; a full coordinator leader neither hands
//! over nor refuses anything, as the daemon. The candidates'
//! part of both replicated runs — disks, machines, faults, drains and the checks that hold
//! for any application — is module `candidates`.
//!
//! # Map
//! `world` (clock, queue, network, faults, phases), `mbd_shell`, `candidates`, `replicated`,
//! `coordinator`, `sbd_shell`, `process`, `client`, `oracle` (the checks), `codec`,
//! `params`, `rng`, `trace`.

#![deny(missing_docs)]

mod candidates;
mod client;
mod codec;
mod coordinator;
mod mbd_shell;
mod oracle;
mod params;
mod process;
mod replicated;
mod rng;
mod sbd_shell;
mod seeds;
mod trace;
mod world;

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

pub use coordinator::CoordStats;
pub use seeds::{SeedRuns, run_seeds};
pub use world::Stats;

/// How a run is observed; none of it changes what happens in the run, save
/// `reorder_within_connection`, which widens the fault model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Print every event to stderr (`LAVA_SIM_TRACE=1`).
    pub trace: bool,
    /// Let frames of one connection overtake each other (`LAVA_SIM_REORDER=1`).
    /// Off by default: the shells talk over TCP, and a NEW_JOB delayed past
    /// the tombstone's retention would run the job again (see "Known gaps").
    pub reorder_within_connection: bool,
}

impl Options {
    /// The options the environment asks for.
    pub fn from_env() -> Options {
        let on = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
        Options { trace: on("LAVA_SIM_TRACE"), reorder_within_connection: on("LAVA_SIM_REORDER") }
    }
}

/// The result of a run that passed every check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// The fingerprint of everything that happened.
    pub trace_hash: u64,
    /// Counters.
    pub stats: Stats,
}

/// A run that broke a property (or panicked in a logic crate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The seed that reproduces it.
    pub seed: u64,
    /// Which simulation failed.
    pub kind: Kind,
    /// What broke.
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {} failed: {}\n  reproduce with: {}",
            self.seed,
            self.message,
            match self.kind {
                Kind::Single => repro_command(self.seed),
                Kind::Replicated => repro_command_replicated(self.seed),
                Kind::Coordinator => repro_command_coordinator(self.seed),
            }
        )
    }
}

/// The command that reruns `seed` alone.
pub fn repro_command(seed: u64) -> String {
    format!(
        "LAVA_SIM_SEED={seed} cargo test -p lava-sim --release -- sim_seeds (add LAVA_SIM_TRACE=1 for the trace)"
    )
}

/// The simulations of this crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One mbatchd (`check`).
    Single,
    /// The replicated mbatchd (`check_replicated`).
    Replicated,
    /// The replicated coordinator (`check_coordinator`).
    Coordinator,
}

/// The command that reruns `seed` of the replicated coordinator's simulation alone.
pub fn repro_command_coordinator(seed: u64) -> String {
    format!(
        "LAVA_SIM_COORD_SEED={seed} cargo test -p lava-sim --test replicated_coordinator (add LAVA_SIM_TRACE=1 for the trace)"
    )
}

/// The command that reruns `seed` of the replicated simulation alone.
pub fn repro_command_replicated(seed: u64) -> String {
    format!(
        "LAVA_SIM_REPL_SEED={seed} cargo test -p lava-sim --test replicated (add LAVA_SIM_TRACE=1 for the trace)"
    )
}

/// Runs `seed` with mbatchd replicated among three master candidates
/// (`lava_replog::machine` over the real lava-mbd logic: module `replicated`); panics on
/// the first broken property.
pub fn run_replicated(seed: u64, options: &Options) -> Outcome {
    let mut world = world::World::new_replicated(seed, options.clone());
    let trace_hash = world.run();
    assert!(world.is_done(), "seed {seed}: the event queue ran dry before the final checks");
    world.stats.n_released_before_own_fsync = world.released_before_own_fsync();
    (world.stats.n_disk_fulls, world.stats.n_hand_overs) = world.full_disks();
    Outcome { seed, trace_hash, stats: world.stats.clone() }
}

/// [`run_replicated`], a panic turned into a [`Failure`] naming the seed.
pub fn check_replicated(seed: u64, options: &Options) -> Result<Outcome, Failure> {
    catch(seed, Kind::Replicated, || run_replicated(seed, options))
}

/// Runs `seed`; panics on the first broken property.
pub fn run(seed: u64, options: &Options) -> Outcome {
    let mut world = world::World::new(seed, options.clone());
    let trace_hash = world.run();
    assert!(world.is_done(), "seed {seed}: the event queue ran dry before the final checks");
    Outcome { seed, trace_hash, stats: world.stats.clone() }
}

/// Runs `seed` and turns a panic (a broken property, or an assertion in a
/// logic crate) into a [`Failure`] naming the seed.
pub fn check(seed: u64, options: &Options) -> Result<Outcome, Failure> {
    catch(seed, Kind::Single, || run(seed, options))
}

/// The result of a run of the replicated coordinator that passed every check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoordOutcome {
    /// The seed.
    pub seed: u64,
    /// The fingerprint of everything that happened.
    pub trace_hash: u64,
    /// Counters.
    pub stats: CoordStats,
}

/// Runs `seed` with the coordinator replicated among three master candidates
/// (`lava_replog::machine` over the real lava-coord-logic: module `coordinator`); panics on
/// the first broken property.
pub fn run_coordinator(seed: u64, options: &Options) -> CoordOutcome {
    let mut world = coordinator::CoordWorld::new(seed, options);
    let trace_hash = world.run();
    assert!(world.is_done(), "seed {seed}: the event queue ran dry before the final checks");
    world.stats.n_released_before_own_fsync = world.released_before_own_fsync();
    world.stats.n_disk_fulls = world.disk_fulls();
    CoordOutcome { seed, trace_hash, stats: world.stats.clone() }
}

/// [`run_coordinator`], a panic turned into a [`Failure`] naming the seed.
pub fn check_coordinator(seed: u64, options: &Options) -> Result<CoordOutcome, Failure> {
    catch(seed, Kind::Coordinator, || run_coordinator(seed, options))
}

fn catch<T>(seed: u64, kind: Kind, run: impl FnOnce() -> T) -> Result<T, Failure> {
    catch_unwind(AssertUnwindSafe(run)).map_err(|payload| {
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "a panic without a message".to_owned());
        Failure { seed, kind, message }
    })
}
