//! [`Coord`]: the state machine — the durable store, the soft worker
//! registry, and [`Coord::step`], which expires what is due, routes the
//! request to the manager that decides it, and orders the effects.
//!
//! Every decision goes through `record`, which applies the event with the
//! same [`Coord::apply`] replay uses and queues it as an [`Effect::Append`],
//! in the order applied. Nothing else changes the durable state, so once the
//! shell has appended a step's events the live state is exactly the replay of
//! the WAL appended so far; it is ahead of the *durable* WAL only by appends
//! whose answers the shell still holds (the crate doc, "The core loop", says
//! why that is the spec's order as far as anyone can see).

use lava_coord_ll::{Caller, LeaseRef, Outcome, Request};
use lava_coord_wire::{self as wire, Reply};

use crate::config::CoordConfig;
use crate::effect::Effect;
use crate::event::Event;
use crate::input::{ClientId, Input};
use crate::submissions::Bounds;
use crate::tasks::{self, CoordSnapshot, Store, Task, TaskState};
use crate::workers::WorkerRegistry;
use crate::{ApplyError, leases};

/// How often the shell steps [`Input::Tick`]: a lease is revoked at most
/// this long after its expiry.
pub const TICK_INTERVAL_MS: u64 = 100;
/// Above this many tasks, debug builds stop re-checking every invariant after
/// each step (the check is linear in the tasks).
pub const INVARIANT_CHECK_TASKS_MAX: usize = 2_000;

/// The coordinator's logic. See the crate documentation for the contract.
#[derive(Clone, Debug)]
pub struct Coord {
    config: CoordConfig,
    store: Store,
    workers: WorkerRegistry,
    /// The highest `now_ms` stepped: the logic's clock never goes backwards.
    clock_ms: u64,
}

/// The effects of one step while it is decided: appends first, then the answer.
struct Step {
    now_ms: u64,
    appends: Vec<Event>,
    reply: Option<(ClientId, Reply)>,
}

impl Coord {
    /// A coordinator with no task, for a new WAL or before replay.
    pub fn new(config: CoordConfig) -> Coord {
        let store = Store::new(Bounds::of(&config));
        Coord { config, store, workers: WorkerRegistry::default(), clock_ms: 0 }
    }

    /// A coordinator restored from a snapshot; replay the records after it with [`Coord::apply`].
    pub fn from_snapshot(config: CoordConfig, snapshot: CoordSnapshot) -> Result<Coord, ApplyError> {
        Ok(Coord {
            store: Store::from_snapshot(snapshot, Bounds::of(&config))?,
            config,
            workers: WorkerRegistry::default(),
            clock_ms: 0,
        })
    }

    /// Applies one WAL event (replay, and every live decision). An event that
    /// does not fit the state is an error and changes nothing.
    pub fn apply(&mut self, event: &Event) -> Result<(), ApplyError> {
        self.store.apply(event)
    }

    /// [`Coord::apply`] of an event the caller owns (replay from the WAL):
    /// the same rules, moving payloads and names instead of copying them.
    pub fn apply_owned(&mut self, event: Event) -> Result<(), ApplyError> {
        self.store.apply_owned(event)
    }

    /// The durable state, for a snapshot file.
    pub fn snapshot(&self) -> CoordSnapshot {
        self.store.snapshot()
    }

    /// A stable hash of the durable state (the tasks and id counters; not the
    /// worker registry): equal after replaying the same WAL, in any process.
    pub fn state_hash(&self) -> u64 {
        self.store.state_hash()
    }

    /// The configuration in force.
    pub fn config(&self) -> &CoordConfig {
        &self.config
    }

    /// A task, if it exists.
    pub fn task(&self, id: lava_coord_ll::TaskId) -> Option<&Task> {
        self.store.tasks.get(&id)
    }

    /// Number of tasks in memory.
    pub fn n_tasks(&self) -> usize {
        self.store.tasks.len()
    }

    /// The highest task id given (0: none).
    pub fn last_task_id(&self) -> u64 {
        self.store.last_task_id
    }

    /// Submission ids held in the window (docs/protocols/coordinator.md, "Submission ids").
    pub fn n_submissions_held(&self) -> usize {
        self.store.window.len()
    }

    /// Decides `input` at `now_ms` and appends the effects to `effects`:
    /// every WAL append first, then the answer (if the input is a request).
    pub fn step(&mut self, now_ms: u64, input: Input, effects: &mut Vec<Effect>) {
        self.clock_ms = self.clock_ms.max(now_ms);
        let mut step = Step { now_ms: self.clock_ms, appends: Vec::new(), reply: None };
        // Time revokes first: no decision below ever sees an expired lease.
        while let Some(expired) = leases::next_expired(&self.store, step.now_ms) {
            self.record(&mut step, expired);
        }
        if let Input::Request { client, caller, request } = input {
            let reply = self.request(&mut step, caller, request);
            step.reply = Some((client, reply));
        }
        effects.extend(step.appends.into_iter().map(Effect::Append));
        if let Some((client, reply)) = step.reply {
            effects.push(Effect::Respond { client, reply });
        }
        if cfg!(debug_assertions)
            && self.store.tasks.len() <= INVARIANT_CHECK_TASKS_MAX
            && let Err(problem) = self.check_invariants()
        {
            panic!("coordinator invariant broken after a step: {problem}");
        }
    }

    /// Applies a decided event and queues it for the WAL (the shell appends it
    /// before the next step and answers only once it is durable).
    fn record(&mut self, step: &mut Step, event: Event) {
        if let Err(error) = self.store.apply(&event) {
            panic!("a decided event must apply to the state it was decided on: {error}");
        }
        step.appends.push(event);
    }

    /// Whether `caller` may act under a lease granted to `holder`: the same
    /// uid, or a cluster administrator.
    fn may_act_for(&self, caller: &Caller, holder: &Caller) -> bool {
        caller.uid == holder.uid || self.config.is_admin(caller)
    }

    fn request(&mut self, step: &mut Step, caller: Caller, request: Request) -> Reply {
        match request {
            Request::Submit { payload } => {
                if let Err(refusal) = tasks::validate_submission(&payload, self.config.payload_bytes_max) {
                    return refusal;
                }
                let event = tasks::task_created(&self.store, payload, caller, step.now_ms);
                let task = event.task();
                self.record(step, event);
                Reply::Submitted(wire::SubmitTaskReply { task_id: task.get() })
            }
            Request::SubmitOnce { submission, payload } => {
                self.submit_once(step, caller, submission, payload)
            }
            Request::Lease { worker } => {
                self.workers.seen(&worker, step.now_ms);
                match leases::grant(&self.store, &self.config, &worker, &caller, step.now_ms) {
                    None => Reply::Lease(wire::LeaseReply { lease: None }),
                    Some(event) => {
                        let Event::LeaseGranted { task, lease, expires_at_ms, .. } = &event else {
                            unreachable!("grant builds LeaseGranted")
                        };
                        let (task, lease, expires_at_ms) = (*task, *lease, *expires_at_ms);
                        self.record(step, event);
                        let payload = self.store.tasks[&task].payload.as_bytes().to_vec();
                        Reply::Lease(wire::LeaseReply {
                            lease: Some(wire::LeaseGrant {
                                task_id: task.get(),
                                lease_id: lease.get(),
                                expires_at_ms,
                                payload,
                            }),
                        })
                    }
                }
            }
            Request::Heartbeat(LeaseRef { task, lease }) => {
                if !self.store.tasks.contains_key(&task) {
                    return unknown_task(task);
                }
                match self.store.valid_lease(task, lease) {
                    Ok(held) => {
                        if !self.may_act_for(&caller, held.holder) {
                            return permission_denied(
                                "heartbeat",
                                LeaseRef { task, lease },
                                &caller,
                                held.holder,
                            );
                        }
                        let (worker, old_expiry_ms) = (held.worker.clone(), held.expires_at_ms);
                        self.workers.seen(&worker, step.now_ms);
                        let event = leases::extend(&self.config, task, lease, old_expiry_ms, step.now_ms);
                        let Event::LeaseExtended { expires_at_ms, .. } = event else {
                            unreachable!("extend builds LeaseExtended")
                        };
                        self.record(step, event);
                        Reply::Extended(wire::LeaseExtended {
                            task_id: task.get(),
                            lease_id: lease.get(),
                            expires_at_ms,
                        })
                    }
                    Err(_) => self.lease_lost(LeaseRef { task, lease }),
                }
            }
            Request::Finish { lease: LeaseRef { task, lease }, outcome } => {
                let Some(current) = self.store.tasks.get(&task) else {
                    return unknown_task(task);
                };
                if let TaskState::Finished { lease: ended_by, outcome: ended_with, holder, .. } =
                    &current.state
                    && *ended_by == lease
                    && *ended_with == outcome
                {
                    if !self.may_act_for(&caller, holder) {
                        return permission_denied(verb(outcome), LeaseRef { task, lease }, &caller, holder);
                    }
                    // A retry of an outcome already recorded: same answer, nothing appended.
                    return Reply::Outcome(wire::OutcomeReply {
                        task_id: task.get(),
                        state: current.state.code(),
                    });
                }
                if let Ok(held) = self.store.valid_lease(task, lease) {
                    if !self.may_act_for(&caller, held.holder) {
                        return permission_denied(
                            verb(outcome),
                            LeaseRef { task, lease },
                            &caller,
                            held.holder,
                        );
                    }
                    let event = match outcome {
                        Outcome::Completed => Event::TaskCompleted { task, lease },
                        Outcome::Failed => Event::TaskFailed { task, lease },
                    };
                    self.record(step, event);
                    let state = self.store.tasks[&task].state.code();
                    Reply::Outcome(wire::OutcomeReply { task_id: task.get(), state })
                } else {
                    self.record(step, Event::TaskCancelled { task, lease, outcome, by: caller });
                    self.lease_lost(LeaseRef { task, lease })
                }
            }
            Request::QueryTask(task) => self.query_task(task),
            Request::QueryCounts => self.query_counts(),
            Request::QueryWorkers => self.query_workers(),
            Request::QueryLeases => self.query_leases(),
        }
    }

    /// SUBMIT_TASK_ONCE: the task the pair (caller's uid, `submission`) created if the
    /// window holds it (nothing appended), else a new task under the pair.
    fn submit_once(
        &mut self,
        step: &mut Step,
        caller: Caller,
        submission: lava_coord_ll::SubmissionId,
        payload: lava_coord_ll::Payload,
    ) -> Reply {
        if let Some(task) = self.store.window.find(caller.uid, submission) {
            let first = &self.store.tasks[&task];
            if first.payload != payload {
                return Reply::error(
                    wire::ERR_BAD_REQUEST,
                    format!(
                        "submission id {submission} of {caller} already created task {task} with another \
                         payload ({} bytes, not {}); choose a new id for a new task",
                        first.payload.len(),
                        payload.len()
                    ),
                );
            }
            // A retry whose first attempt was recorded: the same task, nothing appended.
            return Reply::SubmittedOnce(wire::SubmitTaskOnceReply { task_id: task.get(), repeated: true });
        }
        if let Err(refusal) = tasks::validate_submission(&payload, self.config.payload_bytes_max) {
            return refusal;
        }
        if let Err(wait_ms) = self.store.window.room_for(caller.uid, step.now_ms) {
            let bounds = self.store.window.bounds;
            return Reply::error(
                wire::ERR_TRY_AGAIN,
                format!(
                    "the coordinator holds {} submission ids of the last {} s, its most: retry in {} s \
                     (or submit without an id)",
                    bounds.total_max,
                    bounds.window_ms / 1000,
                    wait_ms.div_ceil(1000)
                ),
            );
        }
        let event = tasks::task_created_once(&self.store, payload, caller, submission, step.now_ms);
        let task = event.task();
        self.record(step, event);
        Reply::SubmittedOnce(wire::SubmitTaskOnceReply { task_id: task.get(), repeated: false })
    }

    fn lease_lost(&self, LeaseRef { task, lease }: LeaseRef) -> Reply {
        let why = match &self.store.tasks[&task].state {
            TaskState::Waiting => "it expired and the task is waiting for a worker".to_owned(),
            TaskState::Leased { lease: current, .. } if current.get() > lease.get() => {
                format!("it was superseded by lease {current}")
            }
            TaskState::Leased { .. } => "the task is leased under another lease".to_owned(),
            TaskState::Finished { lease: by, outcome, .. } => {
                format!("the task was already {} under lease {by}", outcome_word(*outcome))
            }
        };
        Reply::error(wire::ERR_LEASE_LOST, format!("lease {lease} of task {task} is not valid: {why}"))
    }

    /// Every invariant: the store's (ids, one valid lease per task, indexes)
    /// and time's (no valid lease is past its expiry after a step). Tests call
    /// it after every step; debug builds do too.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.store.check()?;
        if let Some((expires_at_ms, task)) = self.store.expiries.first()
            && *expires_at_ms <= self.clock_ms
        {
            return Err(format!(
                "task {task}: lease expired at {expires_at_ms} still valid at {}",
                self.clock_ms
            ));
        }
        Ok(())
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    pub(crate) fn workers(&self) -> &WorkerRegistry {
        &self.workers
    }
}

pub(crate) fn unknown_task(task: lava_coord_ll::TaskId) -> Reply {
    Reply::error(wire::ERR_UNKNOWN_TASK, format!("no task {task}"))
}

/// ERR_PERMISSION: `caller` acted under a lease granted to someone else.
fn permission_denied(
    what: &str,
    LeaseRef { task, lease }: LeaseRef,
    caller: &Caller,
    holder: &Caller,
) -> Reply {
    Reply::error(
        wire::ERR_PERMISSION,
        format!(
            "permission denied: {caller} may not {what} task {task} under lease {lease}, which was granted to \
             {holder} (only that user or a cluster administrator may)"
        ),
    )
}

fn verb(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Completed => "complete",
        Outcome::Failed => "fail",
    }
}

fn outcome_word(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Completed => "completed",
        Outcome::Failed => "failed",
    }
}
