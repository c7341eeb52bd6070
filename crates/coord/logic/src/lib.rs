//! lava-coord-logic: the coordinator's logic — the only code that changes task
//! and lease state (docs/protocols/coordinator.md, which also maps the original
//! design's section numbers cited below; the overview is docs/coordinator.md).
//!
//! A pure, deterministic state machine ([`Coord`]): it takes an [`Input`] (a
//! validated request from `lava-coord-ll`, or a tick) with the current time,
//! and returns [`Effect`]s: WAL events to append, then the answer to send.
//!
//! # What it never does
//! No I/O, no clock (time arrives as `now_ms`, ms since the epoch), no
//! randomness, no threads, no tokio, no `HashMap` whose order reaches an
//! output. It never encodes bytes (the shell encodes [`Event`]s with
//! `lava-xdr`), never checks structure (`lava-coord-ll` did), never
//! authenticates (the shell did).
//!
//! # The core loop: the spec's order, and what the code does
//! The contract (docs/coordinator.md, "The core loop") orders every request
//! `validate → choose the WAL event → append → apply → respond`. The code keeps
//! that order for every decision and for everything seen outside the process,
//! and applies in memory earlier:
//! 1. **Validate.** `lava-coord-ll` checked the fields (in the shell).
//!    [`Coord::step`] first records a `LeaseExpired` for every lease whose
//!    expiry has passed (time revokes before anything is decided), then
//!    checks the request against the live state: unknown task, a lease that
//!    is not valid, a payload over the configured maximum, a caller who may
//!    not act under the lease.
//! 2. **Choose.** The manager concerned chooses the request's event, or none.
//! 3. **Apply.** Each chosen event is applied at once with [`Coord::apply`],
//!    the function replay uses, in memory, so the step's next decision and the
//!    next step see it. This is the one departure from the spec's order: the
//!    change is applied before its append, not after.
//! 4. **Append.** The step returns an [`Effect::Append`] per event, in the
//!    order applied; the shell appends them to the WAL before it steps
//!    anything else. They become durable with a later group commit.
//! 5. **Respond.** The step's [`Effect::Respond`] comes last. The shell sends
//!    it only once the WAL is durable through the last append made before it,
//!    this step's or an earlier one's.
//!
//! **Why this is equivalent to the spec's order.**
//! - *The same decisions.* Step *n* decides on the state that steps 1 to
//!   *n*−1 left, every one of their events applied. That is also the state
//!   request *n* meets in the spec's order, where each earlier event was
//!   applied before its answer and before the next request. The same inputs
//!   in the same order give the same events and the same answers.
//! - *The live state is the appended WAL.* Every change to the durable state
//!   is made by an event the step hands to the shell, in the order applied,
//!   and the shell appends all of a step's events before the next step. So
//!   between two steps the live state is exactly the replay of the WAL
//!   appended so far (the simulation compares the state hashes after every
//!   step). It may be ahead of the *durable* WAL by the appends not yet
//!   fsynced; that is the only sense in which the live state holds a change
//!   the disk lacks.
//! - *Nobody outside sees that difference.* The only way out of the process
//!   is an answer, and every answer is held until the WAL is durable through
//!   the last append before it, including an answer that appended nothing:
//!   a query, which reads the live state, the shell's STATS, a refusal, an
//!   empty lease. That position covers every event the state it reports was
//!   built from. Answers leave in step order. A snapshot is written only once
//!   the events it covers are durable.
//! - *A failed append or fsync.* The shell stops at once: it releases no
//!   answer it still holds and steps nothing more. The memory that was ahead
//!   dies with the process, and the restart rebuilds the state from the WAL.
//!   The request is not answered with an error; its connection closes.
//! - *A crash anywhere.* The disk keeps a prefix of the appended WAL that
//!   contains every position a released answer rested on. Replaying it gives
//!   a state the live coordinator passed through right after one of its
//!   events was applied: between steps, or inside a step after some of its
//!   `LeaseExpired`s (each a complete transition; the restart's `Tick`
//!   expires the rest). So every answer given stays true, and an unanswered
//!   request either happened (its event survived) or did not: the two
//!   outcomes the spec's order also gives for a crash between its append and
//!   its response.
//!
//! **One event per request.** A request appends at most one event of its
//! own: `TaskCreated`, `TaskCreatedOnce`, `LeaseGranted`, `LeaseExtended`,
//! `TaskCompleted` or `TaskFailed`, or the `TaskCancelled` of a refused
//! completion or failure (answered `ERR_LEASE_LOST`). It appends none when it
//! is refused otherwise, when it is a query, when a lease request finds nothing
//! to grant, when it repeats an outcome already recorded, and when it repeats a
//! submission id the window holds (`submissions`). The `LeaseExpired` records before it are
//! time's, not the request's, and each is a transaction of its own: the WAL
//! cut after any record replays to a consistent state, so there are no
//! multi-record transactions. Durable state changes only in [`Coord::apply`].
//!
//! The modules of the spec (section 2):
//! - `tasks` — **TaskManager**: validates submissions, builds `TaskCreated`,
//!   and holds the durable store whose `apply` applies every WAL event.
//! - `leases` — **LeaseManager**: pure decisions: which WAITING task (FIFO by
//!   task id, so a task returned by expiry goes before younger ones), whether
//!   the worker has room (advisory [`CoordConfig::leases_per_worker_max`]),
//!   lease duration and expiry, `LeaseGranted` / `LeaseExtended`.
//! - `submissions` — the submission window: the `(owner uid, submission id)`
//!   pairs of recent `TaskCreatedOnce` records, so that a retried
//!   SUBMIT_TASK_ONCE gets the task its first attempt created; bounded by age,
//!   per owner and in total ([`CoordConfig`]), derived from the WAL alone.
//! - `workers` — **WorkerRegistry**: when each worker was last heard from
//!   (lease request or heartbeat). Soft state, not in the WAL, not in the
//!   snapshot, not in [`Coord::state_hash`]; losing it changes no decision
//!   that matters for correctness.
//!
//! # WAL events and our readings of the spec
//! [`Event::TaskCreated`], [`Event::LeaseGranted`], [`Event::LeaseExtended`],
//! [`Event::TaskCompleted`], [`Event::TaskFailed`] as the spec names them, and:
//! - [`Event::TaskCancelled`] — the spec's "logical event" for a completion or
//!   failure with an invalid lease. It **records the refused attempt and leaves
//!   the task's state as it was** (a WAITING task stays WAITING, a task leased
//!   to someone else stays leased, a finished task stays finished); the worker
//!   is answered `ERR_LEASE_LOST`. Only the task's refusal counter changes. So
//!   a late worker can never complete or fail a task it no longer owns, and
//!   the history shows that it tried.
//! - [`Event::LeaseExpired`] — expiry is **explicit in the WAL**, so replay
//!   never reads a clock and the history shows every revocation. At the start
//!   of every step, before anything else is decided, every lease whose
//!   absolute expiry is at or before `now_ms` gets a `LeaseExpired` (the task
//!   returns to WAITING). The shell steps [`Input::Tick`] every 100 ms, so a
//!   lease is revoked within one tick of its expiry even when no request
//!   comes; and because every request steps the same check first, a grant,
//!   heartbeat or completion never sees an expired lease. An expired lease is
//!   never resurrected: lease ids are never reused and an extension needs the
//!   task's current lease. Time never completes or fails a task. There is
//!   never more than one valid lease per task (the task holds at most one).
//!   These time-driven records are the only case where one step appends more
//!   than the request's own event.
//! - A completion or failure repeated with the lease that already ended the
//!   task with that same outcome (a retry after a lost answer) is answered
//!   with the recorded outcome and appends nothing: idempotency from
//!   WAL-derived state (spec section 4).
//! - The clock the logic uses never goes backwards: `now_ms` below an earlier
//!   step's is taken as the earlier value.
//!
//! # The shell contract, in order
//! This list is the contract. The daemon's loop (`bins/coordinator`,
//! `server.rs` and `journal.rs`) carries it out, and the simulation's shell
//! (`tests/sim.rs`) carries it out the same way, with the same batching. A
//! shell that does otherwise is wrong, not the contract.
//! 1. **Start.** [`Coord::from_snapshot`] with the newest snapshot if there is
//!    one, else [`Coord::new`]; then every WAL record after it to
//!    [`Coord::apply`], in order; an `Err` stops the daemon naming the record
//!    (never skip one). Then step [`Input::Tick`] with the current time: this
//!    expires every lease that ran out while the coordinator was down, before
//!    any request is served. Its appends are carried out as in step 3.
//! 2. **One step at a time**, in arrival order, with the wall clock in ms
//!    since the epoch; [`Input::Tick`] every [`TICK_INTERVAL_MS`].
//! 3. **Effects in order.** [`Effect::Append`]: encode and append to the WAL
//!    at once, before the next step (the event is already applied; the
//!    append need not be durable yet). [`Effect::Respond`]: hold the answer
//!    behind the WAL position of the last append made so far, whether or not
//!    this step appended anything, and **release it only once the WAL is
//!    durable through that position.** Answers are released in the order
//!    their steps ran. Group commit: after a batch of steps, start one wait
//!    for durability covering everything appended so far, unless one is
//!    running; when it ends, release the answers it covers and start the next
//!    for what was appended meanwhile. A step lists all its appends before its
//!    answer, so one position per answer suffices.
//! 4. **Failure.** If an append or fsync fails, stop at once: release no
//!    held answer and step nothing more. The memory is ahead of the WAL, and a
//!    restart (step 1) brings them back together. Nobody was told anything the
//!    disk lacks.
//! 5. **Snapshots.** [`Coord::snapshot`] between two steps covers every event
//!    appended so far; write it only once those are durable, and replay from
//!    it only the records after the last one it covers.
//!
//! # Map
//! - [`config`]: [`CoordConfig`]. [`input`], [`effect`]: the boundary types.
//! - [`event`]: the WAL records. `tasks`, `leases`, `workers`: the three
//!   managers. `machine`: [`Coord`] and [`Coord::step`]. `query`: read-only answers.

#![deny(missing_docs)]

pub mod config;
pub mod effect;
pub mod event;
pub mod input;
mod leases;
mod machine;
mod query;
mod submissions;
mod tasks;
mod workers;

#[cfg(test)]
mod tests;

pub use config::CoordConfig;
pub use effect::Effect;
pub use event::Event;
pub use input::{ClientId, Input};
pub use machine::{Coord, INVARIANT_CHECK_TASKS_MAX, TICK_INTERVAL_MS};
pub use submissions::Submission;
pub use tasks::{CoordSnapshot, Task, TaskState};

/// A WAL record or snapshot that does not fit the state replayed so far (a
/// damaged or foreign WAL). Replay must stop and name the record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{event} of task {task}: {problem}")]
pub struct ApplyError {
    /// The event's name.
    pub event: &'static str,
    /// The task it names.
    pub task: u64,
    /// What does not fit.
    pub problem: String,
}
