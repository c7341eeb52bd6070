//! Deterministic simulation of the coordinator logic with crashes.
//!
//! One seeded run: a submitter and a handful of workers talk to one
//! [`Coord`] whose WAL is a vector with a durable prefix (group commit: the
//! rest is appended but not yet fsynced). Answers are held until the WAL is
//! durable through their step's last append, as the shell does. Workers pull,
//! heartbeat in time or late, finish before or after their lease expired,
//! present stale or made-up leases, crash for good or come back; the
//! coordinator crashes between steps and inside a step at every point of the
//! core loop:
//! - before append (the request is lost, nothing is written),
//! - after append before apply (the step's events are durable, the answer is lost),
//! - after apply before respond (the events are applied in memory, only some
//!   of the pending WAL tail reaches the disk, the answer is lost);
//!
//! and restarts from the durable WAL alone — from the newest snapshot written
//! (sometimes) plus the tail, every record through the XDR codec the shell
//! uses — then steps `Tick` with the current time before serving.
//!
//! Checked after every step: the logic's own invariants; an independent
//! oracle model accepts every appended event at the step's time (in
//! particular no `TaskCompleted`/`TaskFailed`/`LeaseExtended` on an expired or
//! superseded lease, no grant of a task that is not WAITING, no lease left
//! valid past its expiry); every request appends at most its one event after
//! the time-driven `LeaseExpired`s, and a refusal appends nothing but the
//! `TaskCancelled` of a refused completion; the live state hash equals the
//! hash of a coordinator fed only the WAL (incrementally every step, from
//! scratch every few steps and at every restart); nothing acknowledged is
//! ever lost. At the end, with the coordinator up and one worker behaving,
//! every task in the WAL is completed or failed.
//!
//! `LAVA_COORD_SIM_SEED=N cargo test -p lava-coord-logic --test sim` runs seed
//! `N` alone and traces it; `LAVA_COORD_SIM_SEEDS=K` runs seeds `1..=K`
//! (default 2,000).

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};

use lava_coord_ll::{LeaseId, LeaseRef, Limits, Outcome, Payload, Request, TaskId, WorkerName};
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
                OState::Leased { lease: lease.get(), expires: *expires_at_ms }
            }
            (
                Event::LeaseExtended { lease, expires_at_ms, .. },
                Some(OState::Leased { lease: l, expires }),
            ) if lease.get() == l && before(expires) && *expires_at_ms >= expires => {
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CrashPoint {
    None,
    BeforeAppend,
    AfterAppendBeforeApply,
    AfterApplyBeforeRespond,
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
    /// Every event appended since the WAL was created; `durable` of them are on disk.
    wal: Vec<Event>,
    durable: usize,
    /// A coordinator fed only the appended events, in order.
    shadow: Coord,
    oracle: Oracle,
    /// The newest snapshot written: (events covered, state).
    snapshot: Option<(usize, CoordSnapshot)>,
    /// A snapshot taken, written once the events it covers are durable.
    snapshot_pending: Option<(usize, CoordSnapshot)>,
    /// Answers waiting for durability: (WAL length they need, actor, life, reply).
    held: Vec<(usize, usize, u64, Reply)>,
    /// actors[0] is the submitter; the others are workers.
    actors: Vec<Actor>,
    submissions_target: u64,
    submissions_sent: u64,
    acked_tasks: BTreeSet<u64>,
    acked_outcomes: BTreeMap<u64, (u64, Outcome)>,
    /// Crash probabilities, per mille: between steps, and at each point of a step.
    crash_between: u64,
    crash_in_step: u64,
    snapshot_rate: u64,
    fsync_rate: u64,
    n_steps: u64,
    n_restarts: u64,
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
        let crash_in_step = rng.below(12);
        let snapshot_rate = rng.below(30);
        let fsync_rate = 200 + rng.below(800);
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
            oracle: Oracle::default(),
            snapshot: None,
            snapshot_pending: None,
            held: Vec::new(),
            actors,
            submissions_target,
            submissions_sent: 0,
            acked_tasks: BTreeSet::new(),
            acked_outcomes: BTreeMap::new(),
            crash_between,
            crash_in_step,
            snapshot_rate,
            fsync_rate,
            n_steps: 0,
            n_restarts: 0,
            chaos: true,
        }
    }

    fn log(&self, what: impl FnOnce() -> String) {
        if self.trace {
            eprintln!("[{:>7}] {}", self.now - T0, what());
        }
    }

    /// Steps the live coordinator and checks everything; returns the answer.
    fn step(&mut self, input: Input) -> Result<Option<Reply>, String> {
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
        Ok(reply)
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

    fn fsync(&mut self) {
        self.durable = self.wal.len();
        if let Some((covered, _)) = &self.snapshot_pending
            && *covered <= self.durable
        {
            self.snapshot = self.snapshot_pending.take();
        }
        let durable = self.durable;
        let (ready, waiting): (Vec<_>, Vec<_>) = self.held.drain(..).partition(|(need, ..)| *need <= durable);
        self.held = waiting;
        for (_, actor, life, reply) in ready {
            self.deliver(actor, life, reply);
        }
    }

    fn crash(&mut self, why: &str) -> Result<(), String> {
        // Group commit writes in order: some prefix of the pending tail may have reached the disk.
        let pending = self.wal.len() - self.durable;
        let reached = if pending == 0 { 0 } else { self.rng.below(pending as u64 + 1) as usize };
        self.durable += reached;
        self.wal.truncate(self.durable);
        if let Some((covered, _)) = &self.snapshot_pending
            && *covered <= self.durable
        {
            self.snapshot = self.snapshot_pending.take();
        }
        self.snapshot_pending = None;
        self.held.clear();
        self.coord = None;
        self.down_until = self.now + self.rng.below(2 * LEASE_MS);
        self.log(|| format!("COORDINATOR CRASH ({why}), {reached} of {pending} pending events durable"));
        for i in 0..self.actors.len() {
            let retry = self.rng.chance(700);
            let actor = &mut self.actors[i];
            if let Some(request) = actor.outstanding.take()
                && retry
            {
                actor.resend = Some(request);
            }
        }
        // What is left must be the WAL, replayable by the oracle and by the logic.
        self.oracle = Oracle::from_wal(&self.wal);
        self.shadow = Coord::new(self.config.clone());
        for event in &self.wal {
            self.shadow.apply(event).map_err(|e| format!("durable WAL does not replay: {e}"))?;
        }
        Ok(())
    }

    /// Restart: snapshot (if one was written) and the tail, through the codec,
    /// then `Tick` with the current time.
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
        self.last_tick = self.now;
        self.step(Input::Tick)?;
        self.check_acknowledged()
    }

    /// Nothing acknowledged is lost: every task and outcome answered is in the state.
    fn check_acknowledged(&self) -> Result<(), String> {
        for task in &self.acked_tasks {
            if self.oracle.state(task_id(*task)).is_none() {
                return Err(format!("acknowledged task {task} is lost"));
            }
        }
        for (task, (lease, outcome)) in &self.acked_outcomes {
            let expected = OState::Done { lease: *lease, outcome: *outcome };
            if self.oracle.state(task_id(*task)) != Some(&expected) {
                return Err(format!("acknowledged outcome of task {task} (lease {lease}) is lost"));
            }
        }
        Ok(())
    }

    /// `actor` sends `request`; the coordinator may crash at any point of the step.
    fn send(&mut self, actor: usize, request: Request) -> Result<(), String> {
        self.log(|| format!("{} sends {request:?}", self.actors[actor].name));
        self.actors[actor].outstanding = Some(request.clone());
        let point = if self.chaos && self.rng.chance(self.crash_in_step) {
            match self.rng.below(3) {
                0 => CrashPoint::BeforeAppend,
                1 => CrashPoint::AfterAppendBeforeApply,
                _ => CrashPoint::AfterApplyBeforeRespond,
            }
        } else {
            CrashPoint::None
        };
        if point == CrashPoint::BeforeAppend {
            return self.crash("before append");
        }
        let reply = self
            .step(Input::Request { client: ClientId(actor as u64), caller: sim_user(), request })?
            .ok_or("a request without an answer")?;
        match point {
            CrashPoint::AfterAppendBeforeApply => {
                // The events are durable; the answer never leaves.
                self.durable = self.wal.len();
                self.crash("after append, before the answer")
            }
            CrashPoint::AfterApplyBeforeRespond => self.crash("after apply, before respond"),
            _ => {
                let life = self.actors[actor].life;
                self.held.push((self.wal.len(), actor, life, reply));
                if self.wal.len() == self.durable {
                    // Nothing to wait for (a query, an empty pull).
                    self.fsync();
                }
                Ok(())
            }
        }
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
            (Request::Submit { .. }, Reply::Submitted(r)) => {
                self.acked_tasks.insert(r.task_id);
            }
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
            (Request::Finish { lease, outcome }, Reply::Outcome(_)) => {
                let task = lease.task.get();
                let previous = self.acked_outcomes.insert(task, (lease.lease.get(), *outcome));
                assert!(
                    previous.is_none_or(|p| p == (lease.lease.get(), *outcome)),
                    "seed {}: task {task} acknowledged as finished twice: {previous:?} then {:?}",
                    self.seed,
                    (lease.lease.get(), *outcome)
                );
                if a.holding.as_ref().is_some_and(|h| h.task == task) {
                    a.holding = None;
                }
            }
            (Request::Heartbeat(l) | Request::Finish { lease: l, .. }, Reply::Error(_)) => {
                if a.holding.as_ref().is_some_and(|h| h.task == l.task.get() && h.lease == l.lease.get()) {
                    a.holding = None;
                }
            }
            (Request::Submit { payload }, Reply::Error(e)) => {
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

    /// One round: time passes, the coordinator ticks, fsyncs, maybe crashes,
    /// takes a snapshot; actors act in a random order.
    fn round(&mut self) -> Result<(), String> {
        self.now += self.rng.below(60);
        if self.coord.is_none() {
            if self.now >= self.down_until {
                self.restart()?;
            }
            return Ok(());
        }
        if self.now >= self.last_tick + TICK_MS {
            self.last_tick = self.now;
            self.step(Input::Tick)?;
        }
        if self.rng.chance(self.fsync_rate) {
            self.fsync();
        }
        if self.chaos && self.rng.chance(self.crash_between) {
            return self.crash("between steps");
        }
        if self.rng.chance(self.snapshot_rate)
            && self.snapshot_pending.is_none()
            && let Some(coord) = &self.coord
        {
            self.snapshot_pending = Some((self.wal.len(), coord.snapshot()));
        }
        self.worker_chaos();
        let n = self.actors.len();
        let start = self.rng.below(n as u64) as usize;
        for k in 0..n {
            self.act((start + k) % n)?;
            if self.coord.is_none() {
                break;
            }
        }
        Ok(())
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
        self.fsync();
        self.check_full_replay()?;
        self.check_acknowledged()
    }
}

fn run_seed(seed: u64, trace: bool) -> Result<(u64, u64, usize), String> {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut sim = Sim::new(seed, trace);
        sim.run().map(|()| (sim.n_steps, sim.n_restarts, sim.wal.len()))
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
            Ok((steps, restarts, events)) => {
                eprintln!("seed {seed}: ok, {steps} steps, {restarts} restarts, {events} WAL events");
            }
            Err(problem) => panic!("seed {seed}: {problem}"),
        }
        return;
    }
    let n_seeds = env_u64("LAVA_COORD_SIM_SEEDS").unwrap_or(SEEDS_DEFAULT);
    let (mut steps, mut restarts, mut events) = (0, 0, 0);
    for seed in 1..=n_seeds {
        match run_seed(seed, false) {
            Ok((s, r, e)) => {
                steps += s;
                restarts += r;
                events += e;
            }
            Err(problem) => panic!(
                "seed {seed} failed: {problem}\nreproduce with: LAVA_COORD_SIM_SEED={seed} cargo test -p lava-coord-logic --test sim"
            ),
        }
    }
    eprintln!("{n_seeds} seeds: {steps} steps, {restarts} coordinator restarts, {events} WAL events");
    assert!(restarts > n_seeds / 2, "the simulation should crash the coordinator often");
}
