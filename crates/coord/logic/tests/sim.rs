//! Deterministic simulation of the coordinator logic with crashes, through a
//! shell that carries out the logic's effects the way the daemon's does.
//!
//! One seeded run: a submitter (half its submissions under a submission id, resent
//! with the same id after a crash) and a handful of workers talk to one
//! [`Coord`] whose WAL is a vector. The shell here is a model of
//! `bins/coordinator`'s event loop (its `server` and `journal` modules), with
//! the same batching and the same order, which is the contract the logic's
//! crate doc states ("The shell contract, in order"):
//! - each request is stepped as it arrives and each event of the step is
//!   appended at once (not yet durable); its answer is held behind the
//!   position of the last event appended before it — also an answer that
//!   appended nothing, such as a query's;
//! - after a batch of steps the shell starts a group commit for everything
//!   appended so far, unless one is running; when one ends, the answers it
//!   covers are released in order and the next one starts at once for what
//!   was appended meanwhile (so an answer is never released by a group commit
//!   that started before its step); the start may also wait (the daemon
//!   gathers while it expects connections back, until a window ends: modelled
//!   as a start put off to a later settle or round), and a commit may end at
//!   once (made durable on the loop's own thread);
//! - `Tick` every 100 ms of simulated time, and once at every start;
//! - a snapshot is taken between steps and written by a helper once the
//!   events it covers are durable (its own wait makes them so).
//!
//! Workers pull, heartbeat in time or late, finish before or after their
//! lease expired, present stale or made-up leases, crash for good or come
//! back. The coordinator crashes between steps and at each of the daemon's
//! crash points (`lava_crash::point!` in `bins/coordinator`), plus one the
//! daemon has no name for:
//! - a request read but not yet stepped (it is lost);
//! - `coordinator.wal_appended`: after any append of a step, the step's later
//!   events never appended and its answer never held;
//! - `coordinator.wal_durable`: a group commit ended, the answers it covers
//!   not yet released;
//! - `coordinator.answer_written`: after any released answer, the ones behind
//!   it lost;
//!
//! and then the disk keeps the durable prefix of the WAL and any prefix of the
//! rest (written but not fsynced, or lost with the power), and a snapshot
//! being written may or may not have made it. The coordinator restarts from
//! the WAL alone — from the newest snapshot written (sometimes) plus the
//! tail, every record through the XDR codec the shell uses — then steps
//! `Tick` with the current time before serving.
//!
//! Checked after every step: the logic's own invariants; an independent
//! oracle model accepts every appended event at the step's time (in
//! particular no `TaskCompleted`/`TaskFailed`/`LeaseExtended` on an expired or
//! superseded lease, no grant of a task that is not WAITING, no lease left
//! valid past its expiry); every request appends at most its one event after
//! the time-driven `LeaseExpired`s, and a refusal appends nothing but the
//! `TaskCancelled` of a refused completion; the live state hash equals the
//! hash of a coordinator fed only the appended WAL (incrementally every step,
//! from scratch every few steps and at every restart). After every crash:
//! every fact any released answer stated is in the WAL that survived — task
//! ids, grants, expiries promised, outcomes, and what queries reported; and a
//! submission id is only ever answered with the one task the WAL created for it. At
//! the end, with the coordinator up and one worker behaving, every task in the
//! WAL is completed or failed.
//!
//! `LAVA_COORD_SIM_SEED=N cargo test -p lava-coord-logic --test sim` runs seed
//! `N` alone and traces it; `LAVA_COORD_SIM_SEEDS=K` runs seeds `1..=K`
//! (default 2,000).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};

use lava_coord_ll::{LeaseId, LeaseRef, Limits, Outcome, Payload, Request, SubmissionId, TaskId, WorkerName};
use lava_coord_logic::{ClientId, Coord, CoordConfig, CoordSnapshot, Effect, Event, Input, TaskState};
use lava_coord_wire::{self as wire, Reply};

const LEASE_MS: u64 = 1_000;
const TICK_MS: u64 = lava_coord_logic::TICK_INTERVAL_MS;
const PAYLOAD_MAX: u32 = 32;
const T0: u64 = 1_700_000_000_000;
const SEEDS_DEFAULT: u64 = 2_000;
/// Simulated ms the final phase may take to finish every task.
const DRAIN_MS_MAX: u64 = 600_000;
/// Live and replayed state hashes are compared every this many steps (and at every restart).
const HASH_EVERY_STEPS: u64 = 4;

/// splitmix64: tiny, seedable, good enough to drive choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `per_mille`/1000.
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

/// The oracle's own, independent view of one task.
#[derive(Clone, Debug, PartialEq, Eq)]
enum OState {
    Waiting,
    Leased { lease: u64, expires: u64 },
    Done { lease: u64, outcome: Outcome },
}

/// A model of the WAL's meaning written from the spec, not from the logic.
#[derive(Clone, Debug, Default)]
struct Oracle {
    tasks: Vec<OState>,
    last_lease: u64,
    /// Every lease granted: its task.
    granted: BTreeMap<u64, u64>,
    /// Every lease's latest expiry recorded (granted or extended).
    expiry: BTreeMap<u64, u64>,
    /// Refused completions and failures (TaskCancelled) per task.
    refused: BTreeMap<u64, u32>,
    /// Each submission id's task (TaskCreatedOnce): never two.
    submissions: BTreeMap<SubmissionId, u64>,
}

impl Oracle {
    fn from_wal(wal: &[Event]) -> Oracle {
        let mut oracle = Oracle::default();
        for event in wal {
            oracle.accept(event, None).expect("the durable WAL was accepted when appended");
        }
        oracle
    }

    fn state(&self, task: TaskId) -> Option<&OState> {
        self.tasks.get(usize::try_from(task.get() - 1).expect("small"))
    }

    /// Checks `event` against the model at time `now` (`None`: replay, no
    /// time checks) and applies it.
    fn accept(&mut self, event: &Event, now: Option<u64>) -> Result<(), String> {
        let before = |expires: u64| now.is_none_or(|now| now < expires);
        let index = usize::try_from(event.task().get() - 1).expect("small");
        let current = self.tasks.get(index).cloned();
        let next = match (event, current) {
            (Event::TaskCreated { .. }, _) if index == self.tasks.len() => {
                self.tasks.push(OState::Waiting);
                return Ok(());
            }
            (Event::TaskCreatedOnce { task, submission, .. }, _) if index == self.tasks.len() => {
                if let Some(first) = self.submissions.insert(*submission, task.get()) {
                    return Err(format!("submission id {submission} created task {first}, then task {task}"));
                }
                self.tasks.push(OState::Waiting);
                return Ok(());
            }
            (Event::LeaseGranted { task, lease, expires_at_ms, .. }, Some(OState::Waiting)) => {
                if lease.get() != self.last_lease + 1 {
                    return Err(format!("lease id {lease} is not the next ({})", self.last_lease + 1));
                }
                if let Some(now) = now {
                    if *expires_at_ms != now + LEASE_MS {
                        return Err(format!("lease expires at {expires_at_ms}, not now + lease"));
                    }
                    let older = self.tasks[..index].iter().position(|s| *s == OState::Waiting);
                    if let Some(older) = older {
                        return Err(format!(
                            "task {task} leased before the older waiting task {}",
                            older + 1
                        ));
                    }
                }
                self.last_lease = lease.get();
                self.granted.insert(lease.get(), task.get());
                self.expiry.insert(lease.get(), *expires_at_ms);
                OState::Leased { lease: lease.get(), expires: *expires_at_ms }
            }
            (
                Event::LeaseExtended { lease, expires_at_ms, .. },
                Some(OState::Leased { lease: l, expires }),
            ) if lease.get() == l && before(expires) && *expires_at_ms >= expires => {
                self.expiry.insert(l, *expires_at_ms);
                OState::Leased { lease: l, expires: *expires_at_ms }
            }
            (
                Event::TaskCompleted { lease, .. } | Event::TaskFailed { lease, .. },
                Some(OState::Leased { lease: l, expires }),
            ) if lease.get() == l && before(expires) => {
                let outcome = if matches!(event, Event::TaskCompleted { .. }) {
                    Outcome::Completed
                } else {
                    Outcome::Failed
                };
                OState::Done { lease: l, outcome }
            }
            (Event::TaskCancelled { lease, .. }, Some(state)) => {
                if let OState::Leased { lease: l, expires } = state
                    && l == lease.get()
                    && before(expires)
                {
                    return Err("a completion under the valid, unexpired lease was refused".into());
                }
                *self.refused.entry(event.task().get()).or_default() += 1;
                return Ok(());
            }
            (
                Event::LeaseExpired { lease, expires_at_ms, .. },
                Some(OState::Leased { lease: l, expires }),
            ) if lease.get() == l && *expires_at_ms == expires && now.is_none_or(|now| now >= expires) => {
                OState::Waiting
            }
            (event, state) => return Err(format!("{event:?} does not fit {state:?} at {now:?}")),
        };
        self.tasks[index] = next;
        Ok(())
    }

    /// No valid lease is past its expiry at `now`.
    fn check_revoked(&self, now: u64) -> Result<(), String> {
        for (i, state) in self.tasks.iter().enumerate() {
            if let OState::Leased { expires, .. } = state
                && *expires <= now
            {
                return Err(format!("task {}: lease expired at {expires} still valid at {now}", i + 1));
            }
        }
        Ok(())
    }

    /// The coordinator says the same about every task.
    fn check_agrees(&self, coord: &Coord) -> Result<(), String> {
        if coord.last_task_id() != self.tasks.len() as u64 {
            return Err(format!("{} tasks, the oracle has {}", coord.last_task_id(), self.tasks.len()));
        }
        for (i, expected) in self.tasks.iter().enumerate() {
            let id = task_id(i as u64 + 1);
            let state = &coord.task(id).ok_or(format!("task {id} missing"))?.state;
            let same = match (state, expected) {
                (TaskState::Waiting, OState::Waiting) => true,
                (TaskState::Leased { lease, expires_at_ms, .. }, OState::Leased { lease: l, expires }) => {
                    lease.get() == *l && expires_at_ms == expires
                }
                (TaskState::Finished { lease, outcome, .. }, OState::Done { lease: l, outcome: o }) => {
                    lease.get() == *l && outcome == o
                }
                _ => false,
            };
            if !same {
                return Err(format!("task {id}: coordinator has {state:?}, oracle {expected:?}"));
            }
        }
        Ok(())
    }
}

/// What the coordinator's released answers stated: each must be in the WAL after any crash.
#[derive(Debug, Default)]
struct Told {
    /// Tasks said to exist (a submission's id, a query's task, a lease's task).
    tasks: BTreeSet<u64>,
    /// The most tasks a count query reported, and the most of them finished.
    n_tasks: u64,
    n_finished: u64,
    /// Leases said to be granted: their task.
    grants: BTreeMap<u64, u64>,
    /// The latest expiry a grant, an extension or a query promised, per lease.
    expiries: BTreeMap<u64, u64>,
    /// Outcomes answered or reported: task → (lease, outcome).
    outcomes: BTreeMap<u64, (u64, Outcome)>,
    /// The most refusals a query reported, per task.
    refused: BTreeMap<u64, u32>,
    /// Submission ids answered, with their task.
    submissions: BTreeMap<SubmissionId, u64>,
}

impl Told {
    fn grant(&mut self, task: u64, lease: u64, expires: u64) {
        self.tasks.insert(task);
        self.grants.insert(lease, task);
        let promised = self.expiries.entry(lease).or_default();
        *promised = (*promised).max(expires);
    }

    fn outcome(&mut self, task: u64, lease: u64, outcome: Outcome) -> Result<(), String> {
        self.tasks.insert(task);
        match self.outcomes.insert(task, (lease, outcome)) {
            Some(before) if before != (lease, outcome) => {
                Err(format!("task {task} told finished twice: {before:?}, then {:?}", (lease, outcome)))
            }
            _ => Ok(()),
        }
    }

    /// Records what `reply` (to `request`) states.
    fn record(&mut self, request: &Request, reply: &Reply) -> Result<(), String> {
        match (request, reply) {
            (Request::Submit { .. }, Reply::Submitted(r)) => {
                self.tasks.insert(r.task_id);
            }
            (Request::SubmitOnce { submission, .. }, Reply::SubmittedOnce(r)) => {
                self.tasks.insert(r.task_id);
                if let Some(before) = self.submissions.insert(*submission, r.task_id)
                    && before != r.task_id
                {
                    return Err(format!(
                        "submission id {submission} answered task {before}, then task {}",
                        r.task_id
                    ));
                }
            }
            (Request::Lease { .. }, Reply::Lease(wire::LeaseReply { lease: Some(grant) })) => {
                self.grant(grant.task_id, grant.lease_id, grant.expires_at_ms);
            }
            (Request::Heartbeat(_), Reply::Extended(r)) => self.grant(r.task_id, r.lease_id, r.expires_at_ms),
            (Request::Finish { lease, outcome }, Reply::Outcome(_)) => {
                self.outcome(lease.task.get(), lease.lease.get(), *outcome)?;
            }
            (Request::QueryTask(_), Reply::Task(r)) => {
                let info = &r.task;
                self.tasks.insert(info.task_id);
                let refused = self.refused.entry(info.task_id).or_default();
                *refused = (*refused).max(info.n_refused);
                match info.state {
                    wire::task_state::LEASED => self.grant(info.task_id, info.lease_id, info.expires_at_ms),
                    wire::task_state::COMPLETED => {
                        self.outcome(info.task_id, info.lease_id, Outcome::Completed)?;
                    }
                    wire::task_state::FAILED => self.outcome(info.task_id, info.lease_id, Outcome::Failed)?,
                    _ => {}
                }
            }
            (Request::QueryCounts, Reply::Counts(r)) => {
                self.n_tasks = self.n_tasks.max(r.waiting + r.leased + r.completed + r.failed);
                self.n_finished = self.n_finished.max(r.completed + r.failed);
            }
            (Request::QueryLeases, Reply::Leases(r)) => {
                for info in &r.leases {
                    self.grant(info.task_id, info.lease_id, info.expires_at_ms);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Everything told is in `wal`'s meaning.
    fn check(&self, wal: &Oracle) -> Result<(), String> {
        let n_tasks = wal.tasks.len() as u64;
        if let Some(task) = self.tasks.iter().find(|task| **task > n_tasks) {
            return Err(format!("task {task} was answered, the WAL has {n_tasks} tasks"));
        }
        if self.n_tasks > n_tasks {
            return Err(format!("a count query reported {} tasks, the WAL has {n_tasks}", self.n_tasks));
        }
        let n_finished = wal.tasks.iter().filter(|s| matches!(s, OState::Done { .. })).count() as u64;
        if self.n_finished > n_finished {
            return Err(format!("a count query reported {} finished, the WAL {n_finished}", self.n_finished));
        }
        for (lease, task) in &self.grants {
            if wal.granted.get(lease) != Some(task) {
                return Err(format!("lease {lease} of task {task} was answered, the WAL lacks its grant"));
            }
        }
        for (lease, promised) in &self.expiries {
            if wal.expiry.get(lease).is_none_or(|recorded| recorded < promised) {
                return Err(format!("lease {lease} was promised until {promised}, the WAL has less"));
            }
        }
        for (task, (lease, outcome)) in &self.outcomes {
            let expected = OState::Done { lease: *lease, outcome: *outcome };
            if wal.state(task_id(*task)) != Some(&expected) {
                return Err(format!("acknowledged outcome of task {task} (lease {lease}) is lost"));
            }
        }
        for (task, refused) in &self.refused {
            if wal.refused.get(task).copied().unwrap_or(0) < *refused {
                return Err(format!("{refused} refusals of task {task} were reported, the WAL has fewer"));
            }
        }
        for (submission, task) in &self.submissions {
            if wal.submissions.get(submission) != Some(task) {
                return Err(format!("submission id {submission} was answered task {task}, not the WAL's"));
            }
        }
        Ok(())
    }
}

fn task_id(id: u64) -> TaskId {
    TaskId::new("task", id).expect("non-zero")
}

fn lease_ref(task: u64, lease: u64) -> LeaseRef {
    LeaseRef { task: task_id(task), lease: LeaseId::new("lease", lease).expect("non-zero") }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Heartbeats in time, finishes quickly.
    Good,
    /// Skips heartbeats now and then, so its lease expires under it.
    LateHeartbeat,
    /// Works on past its lease's expiry, then finishes anyway.
    SlowFinish,
    /// Crashes once and never comes back.
    CrashForever,
    /// Crashes now and then and comes back with no memory.
    CrashAndReturn,
}

#[derive(Clone, Debug)]
struct Held {
    task: u64,
    lease: u64,
    known_expiry: u64,
    done_at: u64,
}

#[derive(Debug)]
struct Actor {
    name: WorkerName,
    mode: Mode,
    alive: bool,
    revive_at: Option<u64>,
    /// Bumped at each crash: answers to an earlier life are dropped.
    life: u64,
    holding: Option<Held>,
    next_at: u64,
    outstanding: Option<Request>,
    resend: Option<Request>,
}

/// An answer in the shell's outbox.
#[derive(Debug)]
struct HeldAnswer {
    /// The WAL position it rests on: the last append before it.
    barrier: usize,
    actor: usize,
    /// The actor's life when it asked: an answer to an earlier life is dropped.
    life: u64,
    request: Request,
    reply: Reply,
}

/// What a step came to.
enum Stepped {
    /// The step's appends are made; its answer (a request's) is to be held.
    Done(Option<Reply>),
    /// The coordinator crashed in the middle (`coordinator.wal_appended`).
    Crashed,
}

struct Sim {
    seed: u64,
    rng: Rng,
    trace: bool,
    config: CoordConfig,
    now: u64,
    last_tick: u64,
    coord: Option<Coord>,
    down_until: u64,
    /// Every event appended (handed to the log) since the WAL was created.
    wal: Vec<Event>,
    /// The first `durable` of them are on disk whatever happens (the log's own durable end).
    durable: usize,
    /// What the shell knows to be durable: answers are released up to here
    /// (`Journal::durable_through`; never more than `durable`).
    durable_through: usize,
    /// The running group commit: the WAL length it makes durable.
    sync: Option<usize>,
    /// A coordinator fed only the appended events, in order.
    shadow: Coord,
    oracle: Oracle,
    /// The newest snapshot written: (events covered, state).
    snapshot: Option<(usize, CoordSnapshot)>,
    /// A snapshot taken and being written (once the events it covers are durable).
    snapshot_running: Option<(usize, CoordSnapshot)>,
    /// The outbox: answers waiting for durability, in the order they were decided.
    held: VecDeque<HeldAnswer>,
    /// actors[0] is the submitter; the others are workers.
    actors: Vec<Actor>,
    submissions_target: u64,
    submissions_sent: u64,
    told: Told,
    /// Crash probabilities, per mille: between steps, and at each crash point.
    crash_between: u64,
    crash_at_point: u64,
    /// Per round, per mille: a running group commit ends; a snapshot is taken; one being written ends.
    fsync_rate: u64,
    /// Per settle, per mille: the commit's start is put off (gathering); a commit started
    /// ends at once (on the loop's thread).
    gather_rate: u64,
    inline_rate: u64,
    snapshot_rate: u64,
    snapshot_write_rate: u64,
    n_steps: u64,
    n_restarts: u64,
    /// Submissions answered as repeats of one already recorded (a resend after a crash).
    n_repeated: u64,
    chaos: bool,
}

/// Every actor runs as one user: permissions are the unit tests' subject, leases are this one's.
fn sim_user() -> lava_coord_ll::Caller {
    lava_coord_ll::Caller { uid: 1000, user: lava_coord_ll::UserName::parse("sim").expect("valid") }
}

impl Sim {
    fn new(seed: u64, trace: bool) -> Sim {
        let mut rng = Rng(seed);
        let config = CoordConfig {
            lease_duration_ms: LEASE_MS,
            payload_bytes_max: PAYLOAD_MAX,
            leases_per_worker_max: 2,
            admins: Vec::new(),
            ..CoordConfig::default()
        };
        let n_workers = 2 + rng.below(5) as usize;
        let mut actors = Vec::new();
        for i in 0..=n_workers {
            let mode = match i {
                0 | 1 => Mode::Good,
                _ => match rng.below(5) {
                    0 => Mode::Good,
                    1 => Mode::LateHeartbeat,
                    2 => Mode::SlowFinish,
                    3 => Mode::CrashForever,
                    _ => Mode::CrashAndReturn,
                },
            };
            actors.push(Actor {
                name: WorkerName::parse(&format!("w{i}")).expect("valid"),
                mode,
                alive: true,
                revive_at: None,
                life: 0,
                holding: None,
                next_at: T0 + rng.below(200),
                outstanding: None,
                resend: None,
            });
        }
        let crash_between = rng.below(8);
        let crash_at_point = rng.below(5);
        let snapshot_rate = rng.below(30);
        let snapshot_write_rate = 100 + rng.below(900);
        let fsync_rate = 200 + rng.below(800);
        let gather_rate = rng.below(700);
        let inline_rate = rng.below(700);
        let submissions_target = 5 + rng.below(40);
        Sim {
            seed,
            rng,
            trace,
            shadow: Coord::new(config.clone()),
            coord: Some(Coord::new(config.clone())),
            config,
            now: T0,
            last_tick: T0,
            down_until: 0,
            wal: Vec::new(),
            durable: 0,
            durable_through: 0,
            sync: None,
            oracle: Oracle::default(),
            snapshot: None,
            snapshot_running: None,
            held: VecDeque::new(),
            actors,
            submissions_target,
            submissions_sent: 0,
            told: Told::default(),
            crash_between,
            crash_at_point,
            fsync_rate,
            gather_rate,
            inline_rate,
            snapshot_rate,
            snapshot_write_rate,
            n_steps: 0,
            n_restarts: 0,
            n_repeated: 0,
            chaos: true,
        }
    }

    fn log(&self, what: impl FnOnce() -> String) {
        if self.trace {
            eprintln!("[{:>7}] {}", self.now - T0, what());
        }
    }

    fn up(&self) -> bool {
        self.coord.is_some()
    }

    /// Whether the coordinator crashes at the crash point it has reached.
    fn crashes_here(&mut self) -> bool {
        self.chaos && self.rng.chance(self.crash_at_point)
    }

    /// Steps the live coordinator, checks everything, and carries out the
    /// appends (the daemon's `Loop::step`): each event to the WAL in order,
    /// the coordinator possibly crashing after any of them.
    fn step(&mut self, input: Input) -> Result<Stepped, String> {
        let coord = self.coord.as_mut().expect("stepped only while up");
        let request = match &input {
            Input::Request { request, .. } => Some(request.clone()),
            Input::Tick => None,
        };
        let mut effects = Vec::new();
        coord.step(self.now, input, &mut effects);
        self.n_steps += 1;
        let mut reply = None;
        let mut request_events = 0;
        let appended_before = self.wal.len();
        for effect in effects {
            match effect {
                Effect::Append(event) => {
                    if reply.is_some() {
                        return Err("an append after the answer".into());
                    }
                    if !matches!(event, Event::LeaseExpired { .. }) {
                        request_events += 1;
                        if request.is_none() || request_events > 1 {
                            return Err(format!("{event:?} is not the one event of {request:?}"));
                        }
                    } else if request_events > 0 {
                        return Err("a LeaseExpired after the request's event".into());
                    }
                    self.oracle.accept(&event, Some(self.now))?;
                    self.shadow.apply(&event).map_err(|e| format!("the WAL does not replay: {e}"))?;
                    let event_str = if self.trace { format!("{event:?}") } else { String::new() };
                    self.log(|| format!("  append {event_str}"));
                    self.wal.push(event);
                }
                Effect::Respond { reply: r, .. } => reply = Some(r),
            }
        }
        if request.is_some() != reply.is_some() {
            return Err(format!("request {request:?} answered {reply:?}"));
        }
        // A refusal appends nothing, except the TaskCancelled of a refused completion.
        if let Some(Reply::Error(error)) = &reply {
            let cancelled_finish =
                error.code == wire::ERR_LEASE_LOST && matches!(request, Some(Request::Finish { .. }));
            if request_events != usize::from(cancelled_finish) {
                return Err(format!("refusal {error:?} of {request:?} appended {request_events} events"));
            }
        }
        let coord = self.coord.as_ref().expect("up");
        // Debug builds of the logic check its invariants inside every step already.
        if !cfg!(debug_assertions) || self.n_steps.is_multiple_of(16) {
            coord.check_invariants()?;
        }
        self.oracle.check_revoked(self.now)?;
        self.oracle.check_agrees(coord)?;
        // The oracle compares every task every step; the full hash (payloads,
        // counters, refusal counts) every few steps keeps debug runs fast.
        if self.n_steps.is_multiple_of(HASH_EVERY_STEPS) && coord.state_hash() != self.shadow.state_hash() {
            return Err("live state differs from the state replayed from the WAL".into());
        }
        if self.n_steps.is_multiple_of(64) {
            self.check_full_replay()?;
        }
        // coordinator.wal_appended, after each append: the step's later events
        // never reach the log, and its answer is never held.
        for n_appended in appended_before + 1..=self.wal.len() {
            if self.crashes_here() {
                self.wal.truncate(n_appended);
                self.crash("coordinator.wal_appended")?;
                return Ok(Stepped::Crashed);
            }
        }
        Ok(Stepped::Done(reply))
    }

    /// The loop's `Tick` arm: step, then settle. False if the coordinator crashed.
    fn tick(&mut self) -> Result<bool, String> {
        self.last_tick = self.now;
        if let Stepped::Crashed = self.step(Input::Tick)? {
            return Ok(false);
        }
        self.settle()?;
        Ok(self.up())
    }

    fn check_full_replay(&self) -> Result<(), String> {
        let mut fresh = Coord::new(self.config.clone());
        for event in &self.wal {
            fresh.apply(event).map_err(|e| format!("replay from scratch: {e}"))?;
        }
        let mut twice = Coord::new(self.config.clone());
        for event in &self.wal {
            twice.apply(event).map_err(|e| format!("second replay: {e}"))?;
        }
        let live = self.coord.as_ref().map_or(self.shadow.state_hash(), Coord::state_hash);
        if fresh.state_hash() != live || twice.state_hash() != live {
            return Err("replay from scratch differs from the live state".into());
        }
        Ok(())
    }

    /// After a batch of steps (the daemon's `Loop::settle`): start a group
    /// commit for everything appended unless one runs or the start is put off
    /// (gathering), maybe take a snapshot, and release what is already durable
    /// (answers that appended nothing, or everything when the commit ended at once).
    fn settle(&mut self) -> Result<(), String> {
        let mut inline = false;
        if self.sync.is_none() && self.wal.len() > self.durable_through && !self.rng.chance(self.gather_rate)
        {
            self.sync = Some(self.wal.len());
            inline = self.rng.chance(self.inline_rate);
        }
        if self.snapshot_running.is_none() && !self.wal.is_empty() && self.rng.chance(self.snapshot_rate) {
            let coord = self.coord.as_ref().expect("settled only while up");
            self.snapshot_running = Some((self.wal.len(), coord.snapshot()));
        }
        if inline {
            return self.group_commit_ended();
        }
        self.release()
    }

    /// The running group commit ended (the loop's `Durable` arm): release
    /// what it covers, then start the next one at once.
    fn group_commit_ended(&mut self) -> Result<(), String> {
        let target = self.sync.take().expect("a group commit runs");
        self.durable = self.durable.max(target);
        self.durable_through = target;
        self.log(|| format!("durable through {target}"));
        if self.crashes_here() {
            return self.crash("coordinator.wal_durable");
        }
        self.release()?;
        if self.up() { self.settle() } else { Ok(()) }
    }

    /// The snapshot being written is on disk; writing it made the events it covers durable.
    fn snapshot_written(&mut self) {
        let (covered, snapshot) = self.snapshot_running.take().expect("a snapshot is being written");
        self.durable = self.durable.max(covered);
        self.snapshot = Some((covered, snapshot));
    }

    /// Delivers, in order, every held answer whose WAL position is known to be durable.
    fn release(&mut self) -> Result<(), String> {
        while self.held.front().is_some_and(|held| held.barrier <= self.durable_through) {
            let held = self.held.pop_front().expect("checked just above");
            self.told.record(&held.request, &held.reply)?;
            self.deliver(held.actor, held.life, held.reply);
            if self.crashes_here() {
                return self.crash("coordinator.answer_written");
            }
        }
        Ok(())
    }

    /// Makes everything durable and releases every answer (a clean stop's `sync_all`).
    fn sync_all(&mut self) -> Result<(), String> {
        loop {
            self.settle()?;
            if self.sync.is_none() && self.wal.len() > self.durable_through {
                // A clean stop commits what a gather was waiting with.
                self.sync = Some(self.wal.len());
            }
            if self.sync.is_none() {
                return Ok(());
            }
            self.group_commit_ended()?;
        }
    }

    fn crash(&mut self, why: &str) -> Result<(), String> {
        // A snapshot being written may have reached the disk; its events did first.
        let snapshot_kept = self.snapshot_running.is_some() && self.rng.chance(500);
        if let Some((covered, snapshot)) = self.snapshot_running.take()
            && snapshot_kept
        {
            self.durable = self.durable.max(covered);
            self.snapshot = Some((covered, snapshot));
        }
        // The log writes in order: some prefix of the tail that is not durable may have reached the disk.
        let pending = self.wal.len() - self.durable;
        let reached = if pending == 0 { 0 } else { self.rng.below(pending as u64 + 1) as usize };
        self.durable += reached;
        self.wal.truncate(self.durable);
        // Reopening the log makes what it kept durable.
        self.durable_through = self.durable;
        self.sync = None;
        self.held.clear();
        self.coord = None;
        self.down_until = self.now + self.rng.below(2 * LEASE_MS);
        self.log(|| format!("COORDINATOR CRASH ({why}), {reached} of {pending} pending events kept"));
        for i in 0..self.actors.len() {
            let retry = self.rng.chance(700);
            let actor = &mut self.actors[i];
            if let Some(request) = actor.outstanding.take()
                && retry
            {
                actor.resend = Some(request);
            }
        }
        // What is left must be the WAL, replayable by the oracle and by the logic,
        // and hold everything any answer stated.
        self.oracle = Oracle::from_wal(&self.wal);
        self.shadow = Coord::new(self.config.clone());
        for event in &self.wal {
            self.shadow.apply(event).map_err(|e| format!("durable WAL does not replay: {e}"))?;
        }
        self.told.check(&self.oracle).map_err(|problem| format!("after a crash ({why}): {problem}"))
    }

    /// Restart: snapshot (if one was written) and the tail, through the codec,
    /// then `Tick` with the current time, then serve.
    fn restart(&mut self) -> Result<(), String> {
        self.n_restarts += 1;
        let limits = lava_xdr::Limits { array_elements_max: u32::MAX, ..lava_xdr::Limits::DEFAULT };
        let use_snapshot = self.rng.chance(700);
        let (mut coord, from) = match &self.snapshot {
            Some((covered, snapshot)) if use_snapshot => {
                let bytes = lava_xdr::to_bytes(snapshot).map_err(|e| e.to_string())?;
                let decoded: CoordSnapshot =
                    lava_xdr::from_bytes(&bytes, &limits).map_err(|e| e.to_string())?;
                let coord = Coord::from_snapshot(self.config.clone(), decoded).map_err(|e| e.to_string())?;
                (coord, *covered)
            }
            _ => (Coord::new(self.config.clone()), 0),
        };
        for event in &self.wal[from..] {
            let bytes = lava_xdr::to_bytes(event).map_err(|e| e.to_string())?;
            let decoded: Event = lava_xdr::from_bytes(&bytes, &limits).map_err(|e| e.to_string())?;
            if decoded != *event {
                return Err(format!("{event:?} does not survive the codec"));
            }
            coord.apply(&decoded).map_err(|e| format!("replay at restart: {e}"))?;
        }
        if coord.state_hash() != self.shadow.state_hash() {
            return Err(format!("state recovered from snapshot at {from} + tail differs from the WAL's"));
        }
        self.log(|| format!("COORDINATOR RESTART from snapshot at {from}, {} events", self.wal.len()));
        self.coord = Some(coord);
        if self.tick()? { self.told.check(&self.oracle) } else { Ok(()) }
    }

    /// `actor` sends `request`; the coordinator steps it at once and holds its
    /// answer behind the last append before it.
    fn send(&mut self, actor: usize, request: Request) -> Result<(), String> {
        self.log(|| format!("{} sends {request:?}", self.actors[actor].name));
        self.actors[actor].outstanding = Some(request.clone());
        if self.crashes_here() {
            return self.crash("a request read, not yet stepped");
        }
        let input =
            Input::Request { client: ClientId(actor as u64), caller: sim_user(), request: request.clone() };
        let Stepped::Done(reply) = self.step(input)? else { return Ok(()) };
        let reply = reply.ok_or("a request without an answer")?;
        let life = self.actors[actor].life;
        self.held.push_back(HeldAnswer { barrier: self.wal.len(), actor, life, request, reply });
        Ok(())
    }

    fn deliver(&mut self, actor: usize, life: u64, reply: Reply) {
        let a = &mut self.actors[actor];
        if !a.alive || a.life != life {
            return;
        }
        let Some(request) = a.outstanding.take() else { return };
        let now = self.now;
        if self.trace {
            eprintln!("[{:>7}]   {} <- {reply:?}", now - T0, a.name);
        }
        match (&request, reply) {
            (Request::Submit { .. }, Reply::Submitted(_)) => {}
            (Request::SubmitOnce { .. }, Reply::SubmittedOnce(r)) => self.n_repeated += u64::from(r.repeated),
            (Request::Lease { .. }, Reply::Lease(r)) => match r.lease {
                Some(grant) => {
                    let work = match a.mode {
                        Mode::SlowFinish if self.rng.chance(500) => LEASE_MS + self.rng.below(2 * LEASE_MS),
                        _ => self.rng.below(3 * LEASE_MS),
                    };
                    a.holding = Some(Held {
                        task: grant.task_id,
                        lease: grant.lease_id,
                        known_expiry: grant.expires_at_ms,
                        done_at: now + work,
                    });
                }
                None => a.next_at = now + 50 + self.rng.below(200),
            },
            (Request::Heartbeat(_), Reply::Extended(r)) => {
                if let Some(held) = a.holding.as_mut()
                    && held.lease == r.lease_id
                {
                    held.known_expiry = r.expires_at_ms;
                }
            }
            (Request::Finish { lease, .. }, Reply::Outcome(_)) => {
                let task = lease.task.get();
                if a.holding.as_ref().is_some_and(|h| h.task == task) {
                    a.holding = None;
                }
            }
            (Request::Heartbeat(l) | Request::Finish { lease: l, .. }, Reply::Error(_)) => {
                if a.holding.as_ref().is_some_and(|h| h.task == l.task.get() && h.lease == l.lease.get()) {
                    a.holding = None;
                }
            }
            (Request::Submit { payload } | Request::SubmitOnce { payload, .. }, Reply::Error(e)) => {
                assert!(
                    e.code == wire::ERR_PAYLOAD_TOO_LARGE && payload.len() > PAYLOAD_MAX as usize,
                    "seed {}: submission refused: {e:?}",
                    self.seed
                );
            }
            (
                _,
                Reply::Counts(_) | Reply::Leases(_) | Reply::Task(_) | Reply::Workers(_) | Reply::Error(_),
            ) => {}
            (request, reply) => panic!("seed {}: {request:?} answered {reply:?}", self.seed),
        }
    }

    /// What `actor` does now, if anything.
    fn act(&mut self, i: usize) -> Result<(), String> {
        let now = self.now;
        let a = &self.actors[i];
        if !a.alive || a.outstanding.is_some() || a.next_at > now || self.coord.is_none() {
            return Ok(());
        }
        if let Some(request) = self.actors[i].resend.take() {
            return self.send(i, request);
        }
        if i == 0 {
            return self.submitter_act();
        }
        let bogus = self.rng.chance(20);
        let a = &mut self.actors[i];
        a.next_at = now + 20 + self.rng.below(LEASE_MS / 4);
        if bogus {
            // A stale or made-up lease, on a real or unknown task.
            let task = 1 + self.rng.below(self.oracle.tasks.len() as u64 + 2);
            let lease = 1 + self.rng.below(self.oracle.last_lease + 2);
            let request = match self.rng.below(3) {
                0 => Request::Heartbeat(lease_ref(task, lease)),
                1 => Request::Finish { lease: lease_ref(task, lease), outcome: Outcome::Completed },
                _ => Request::Finish { lease: lease_ref(task, lease), outcome: Outcome::Failed },
            };
            return self.send(i, request);
        }
        let Some(held) = a.holding.clone() else {
            let worker = a.name.clone();
            return self.send(i, Request::Lease { worker });
        };
        if now >= held.done_at {
            let outcome = if self.rng.chance(850) { Outcome::Completed } else { Outcome::Failed };
            return self.send(i, Request::Finish { lease: lease_ref(held.task, held.lease), outcome });
        }
        let due = held.known_expiry.saturating_sub(now) < LEASE_MS / 2;
        let skip = match a.mode {
            Mode::LateHeartbeat => self.rng.chance(600),
            Mode::SlowFinish => now >= held.known_expiry.saturating_sub(LEASE_MS / 4),
            _ => false,
        };
        if due && !skip {
            return self.send(i, Request::Heartbeat(lease_ref(held.task, held.lease)));
        }
        if due && skip && a.mode == Mode::LateHeartbeat {
            a.next_at = held.known_expiry + self.rng.below(LEASE_MS / 2);
        }
        Ok(())
    }

    fn submitter_act(&mut self) -> Result<(), String> {
        self.actors[0].next_at = self.now + self.rng.below(120);
        let query = self.rng.chance(80);
        if query {
            let request = match self.rng.below(4) {
                0 => Request::QueryCounts,
                1 => Request::QueryLeases,
                2 => Request::QueryWorkers,
                _ => Request::QueryTask(task_id(1 + self.rng.below(self.oracle.tasks.len() as u64 + 1))),
            };
            return self.send(0, request);
        }
        if !self.chaos || self.submissions_sent >= self.submissions_target {
            return Ok(());
        }
        self.submissions_sent += 1;
        let size = if self.rng.chance(30) { PAYLOAD_MAX as usize + 1 } else { self.rng.below(9) as usize };
        let bytes = self.submissions_sent.to_le_bytes().iter().copied().cycle().take(size).collect();
        let payload = Payload::new(bytes, &Limits::default()).expect("under the ll limit");
        if self.rng.chance(500) {
            // Under a submission id: a resend after a crash must find the first attempt's task.
            let id = wire::SubmissionId { high: self.seed, low: self.submissions_sent };
            let submission = SubmissionId::new(id).expect("non-zero");
            return self.send(0, Request::SubmitOnce { submission, payload });
        }
        self.send(0, Request::Submit { payload })
    }

    fn worker_chaos(&mut self) {
        for i in 1..self.actors.len() {
            let now = self.now;
            let roll = self.rng.below(1000);
            let a = &mut self.actors[i];
            if !a.alive {
                if a.revive_at.is_some_and(|at| at <= now) {
                    a.alive = true;
                    a.revive_at = None;
                    a.next_at = now;
                    if self.trace {
                        eprintln!("[{:>7}] {} comes back", now - T0, a.name);
                    }
                }
                continue;
            }
            let crashes =
                self.chaos && matches!(a.mode, Mode::CrashForever | Mode::CrashAndReturn) && roll < 4;
            if crashes {
                a.alive = false;
                a.life += 1;
                a.holding = None;
                a.outstanding = None;
                a.resend = None;
                if a.mode == Mode::CrashAndReturn {
                    a.revive_at = Some(now + 100 + (roll * 997) % (3 * LEASE_MS));
                }
                if self.trace {
                    eprintln!("[{:>7}] {} crashes", now - T0, a.name);
                }
            }
        }
    }

    /// One round: time passes; the loop's arms (the tick, the end of a group
    /// commit, the end of a snapshot write) may fire; the coordinator may
    /// crash between steps; actors act in a random order, each request stepped
    /// as it arrives; then the batch is settled.
    fn round(&mut self) -> Result<(), String> {
        self.now += self.rng.below(60);
        if !self.up() {
            if self.now >= self.down_until {
                self.restart()?;
            }
            return Ok(());
        }
        if self.now >= self.last_tick + TICK_MS && !self.tick()? {
            return Ok(());
        }
        if self.sync.is_some() && self.rng.chance(self.fsync_rate) {
            self.group_commit_ended()?;
            if !self.up() {
                return Ok(());
            }
        } else if self.sync.is_none()
            && self.wal.len() > self.durable_through
            && self.rng.chance(self.fsync_rate)
        {
            // A gather window ended with nobody arriving: the commit starts (the loop's
            // `Durable` arm when it ended at once).
            self.sync = Some(self.wal.len());
            if self.rng.chance(self.inline_rate) {
                self.group_commit_ended()?;
                if !self.up() {
                    return Ok(());
                }
            }
        }
        if self.snapshot_running.is_some() && self.rng.chance(self.snapshot_write_rate) {
            self.snapshot_written();
        }
        if self.chaos && self.rng.chance(self.crash_between) {
            return self.crash("between steps");
        }
        self.worker_chaos();
        let n = self.actors.len();
        let start = self.rng.below(n as u64) as usize;
        for k in 0..n {
            self.act((start + k) % n)?;
            if !self.up() {
                return Ok(());
            }
        }
        self.settle()
    }

    fn run(&mut self) -> Result<(), String> {
        let chaos_rounds = 150 + self.rng.below(300);
        for _ in 0..chaos_rounds {
            self.round()?;
        }
        // Drain: no more crashes or submissions; worker 1 behaves. Every task
        // the WAL holds must end completed or failed.
        self.chaos = false;
        self.log(|| "DRAIN".into());
        let deadline = self.now + DRAIN_MS_MAX;
        loop {
            self.round()?;
            if let Some(coord) = &self.coord {
                let unfinished =
                    self.oracle.tasks.iter().filter(|s| !matches!(s, OState::Done { .. })).count();
                if unfinished == 0 && self.held.is_empty() {
                    coord.check_invariants()?;
                    break;
                }
            }
            if self.now > deadline {
                let unfinished: Vec<_> = self
                    .oracle
                    .tasks
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| !matches!(s, OState::Done { .. }))
                    .collect();
                return Err(format!("tasks never finished with a behaving worker: {unfinished:?}"));
            }
        }
        self.sync_all()?;
        self.check_full_replay()?;
        self.told.check(&self.oracle)
    }
}

fn run_seed(seed: u64, trace: bool) -> Result<(u64, u64, usize, u64), String> {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut sim = Sim::new(seed, trace);
        sim.run().map(|()| (sim.n_steps, sim.n_restarts, sim.wal.len(), sim.n_repeated))
    }));
    match result {
        Ok(outcome) => outcome,
        Err(panic) => Err(panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "panic".into())),
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}")))
}

// Goal: the invariants of the core loop hold under worker and coordinator
// crashes at every step kind, replay equals live state, and every task ends.
// Method: seeded simulation (module doc), thousands of seeds.
#[test]
fn coordinator_survives_crashes_at_every_step() {
    if let Some(seed) = env_u64("LAVA_COORD_SIM_SEED") {
        match run_seed(seed, true) {
            Ok((steps, restarts, events, repeated)) => {
                eprintln!(
                    "seed {seed}: ok, {steps} steps, {restarts} restarts, {events} WAL events, \
                     {repeated} repeated submissions"
                );
            }
            Err(problem) => panic!("seed {seed}: {problem}"),
        }
        return;
    }
    let n_seeds = env_u64("LAVA_COORD_SIM_SEEDS").unwrap_or(SEEDS_DEFAULT);
    let (mut steps, mut restarts, mut events, mut repeated) = (0, 0, 0, 0);
    for seed in 1..=n_seeds {
        match run_seed(seed, false) {
            Ok((s, r, e, p)) => {
                steps += s;
                restarts += r;
                events += e;
                repeated += p;
            }
            Err(problem) => panic!(
                "seed {seed} failed: {problem}\nreproduce with: LAVA_COORD_SIM_SEED={seed} cargo test -p lava-coord-logic --test sim"
            ),
        }
    }
    eprintln!(
        "{n_seeds} seeds: {steps} steps, {restarts} coordinator restarts, {events} WAL events, \
         {repeated} repeated submissions"
    );
    assert!(restarts > n_seeds / 2, "the simulation should crash the coordinator often");
    assert!(repeated > 0, "a resent submission should sometimes find its first attempt recorded");
}

// Goal: the simulation's shell batches as the daemon's loop does: an answer is
// held behind the last append before it (also a query's, which appends
// nothing), is released only by a group commit that covers that position, in
// order, and the next group commit starts as soon as one ends.
// Method: the shell driven by hand, without crashes.
#[test]
fn the_simulated_shell_holds_answers_behind_the_group_commit_that_covers_them() {
    let mut sim = Sim::new(1, false);
    sim.chaos = false;
    sim.snapshot_rate = 0;
    sim.gather_rate = 0;
    sim.inline_rate = 0;
    let payload = Payload::new(vec![1], &Limits::default()).expect("small");
    sim.send(0, Request::Submit { payload }).expect("stepped");
    sim.settle().expect("settled");
    assert_eq!((sim.wal.len(), sim.sync, sim.durable_through), (1, Some(1), 0));
    // During that group commit: a grant (appended at 2) and a query behind it.
    let worker = sim.actors[1].name.clone();
    sim.send(1, Request::Lease { worker }).expect("stepped");
    sim.send(2, Request::QueryTask(task_id(1))).expect("stepped");
    sim.settle().expect("settled");
    assert_eq!(sim.held.iter().map(|held| held.barrier).collect::<Vec<_>>(), [1, 2, 2]);
    assert_eq!(sim.sync, Some(1), "one group commit at a time");
    assert!(sim.actors.iter().take(3).all(|a| a.outstanding.is_some()), "nothing answered yet");

    sim.group_commit_ended().expect("released");
    assert!(sim.actors[0].outstanding.is_none(), "the submission is answered");
    assert!(sim.actors[1].outstanding.is_some() && sim.actors[2].outstanding.is_some());
    assert_eq!(sim.sync, Some(2), "the next group commit started at once");

    sim.group_commit_ended().expect("released");
    assert!(sim.actors[1].holding.is_some() && sim.actors[2].outstanding.is_none());
    assert_eq!(sim.told.grants, BTreeMap::from([(1, 1)]));
    assert!(sim.held.is_empty() && sim.sync.is_none());
}
