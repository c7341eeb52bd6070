//! lava-coord-logic: the coordinator's logic — the only code that changes task
//! and lease state (../shared/specs/coordinator-core-loop.md).
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
//! # The core loop
//! Every request follows `validate → choose exactly one WAL event → append
//! (durably) → apply → respond`. A request that fails validation (unknown
//! task, a heartbeat on a lease that is not valid, a payload over the
//! configured maximum) is answered with an error and appends nothing. Read-only
//! queries and a lease request when nothing is schedulable append nothing
//! either. Durable state changes only in [`Coord::apply`], which replay uses
//! too, so the state after replay is exactly the state before the crash.
//!
//! The modules of the spec (section 2):
//! - `tasks` — **TaskManager**: validates submissions, builds `TaskCreated`,
//!   and holds the durable store whose `apply` applies every WAL event.
//! - `leases` — **LeaseManager**: pure decisions: which WAITING task (FIFO by
//!   task id, so a task returned by expiry goes before younger ones), whether
//!   the worker has room (advisory [`CoordConfig::leases_per_worker_max`]),
//!   lease duration and expiry, `LeaseGranted` / `LeaseExtended`.
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
//! 1. **Start.** [`Coord::from_snapshot`] with the newest snapshot if there is
//!    one, else [`Coord::new`]; then every WAL record after it to
//!    [`Coord::apply`], in order; an `Err` stops the daemon naming the record
//!    (never skip one). Then step [`Input::Tick`] with the current time: this
//!    expires every lease that ran out while the coordinator was down, before
//!    any request is served.
//! 2. **One step at a time**, in arrival order, with the wall clock in ms
//!    since the epoch; [`Input::Tick`] every [`TICK_INTERVAL_MS`].
//! 3. **Effects in order.** [`Effect::Append`]: encode and append to the WAL
//!    (the event is already applied). [`Effect::Respond`]: **respond only after
//!    every append so far — of this step and every earlier one — is durable.**
//!    A step lists all its appends before its answer, so one durable wait per
//!    step suffices, and group commit may cover many steps with one fsync.
//! 4. **Failure.** If an append or fsync fails, stop without sending any
//!    answer held behind it: the memory is ahead of the WAL, and a restart
//!    (step 1) brings them back together. The operation did not happen for
//!    anyone who was not answered.
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
mod tasks;
mod workers;

#[cfg(test)]
mod tests;

pub use config::CoordConfig;
pub use effect::Effect;
pub use event::Event;
pub use input::{ClientId, Input};
pub use machine::{Coord, INVARIANT_CHECK_TASKS_MAX, TICK_INTERVAL_MS};
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
