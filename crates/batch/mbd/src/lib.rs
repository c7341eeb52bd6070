//! lava-mbd: the logic of mbatchd — the only code that changes job state.
//!
//! A pure, deterministic state machine ([`Mbd`]): it takes an [`Input`] (a
//! validated client request, an sbatchd message or channel event, a clock
//! tick) and the current time, changes its state, and returns [`Effect`]s:
//! events to append to `lsb.events`, messages to sbatchd, replies to clients.
//! It realises docs/protocols/batch.md (the job pipeline, the
//! signal pipeline, idempotency and replay) for mbatchd's side.
//!
//! # What it never does
//! No I/O, no clock (time arrives as `now_ms`, milliseconds since the epoch),
//! no randomness, no threads, no tokio; no `HashMap` whose order could reach
//! an output (every collection is a `BTreeMap`/`BTreeSet` or sorted). It never
//! encodes bytes for the log or the wire (the shell encodes [`Event`]s and
//! messages with `lava-xdr`; the logic's one use of it is the compact in-memory
//! form of finished jobs, see `state.rs`), never validates wire structure (`lava-batch-ll` did), never checks
//! credentials (the shell vouched for [`Caller`]).
//!
//! # The rule that makes replay exact
//! Durable state changes only in [`Mbd::apply`]. [`Mbd::step`] decides, builds
//! events, applies each with that same function, and emits it as
//! [`Effect::Append`]; replay is feeding the log's events to [`Mbd::replay`],
//! which is [`Mbd::apply`] except that it ignores what the protocol's replay
//! rules say to ignore (an event after DONE/EXIT, a duplicated stage: `replay`),
//! all of which `apply` refuses and so no live step ever logs.
//! So the state after replay equals the state before the crash, minus only
//! what was never durable — and nothing that depended on a lost event was
//! sent (the contract below). State that is not durable — connected hosts,
//! resend timestamps, hosts that refused a job, hosts lim marks unavailable —
//! is kept apart and rebuilt:
//! when a host registers, every started job of it whose start is not accepted
//! gets NEW_JOB again and every unanswered signal intent is sent again.
//!
//! # The shell contract, in order
//! 1. **Start.** Build the state: [`Mbd::from_snapshot`] with the newest
//!    snapshot if there is one, else [`Mbd::new`]; then feed every event logged
//!    after it to [`Mbd::replay`] in log order. An `Err` stops the daemon with
//!    the record's position (never skip a record the logic did not ignore);
//!    [`Replayed::Ignored`] (an event after DONE/EXIT, a duplicated stage)
//!    changed nothing and is no reason to stop: count them and log them once,
//!    with the first one's position. Then step [`Input::Start`], which also
//!    completes any step a crash tore (see below).
//! 2. **One step at a time.** For each input, in arrival order, call
//!    [`Mbd::step`] with the wall clock in ms since the epoch. Call
//!    [`Input::Tick`] about once a second; the logic decides what is due.
//! 3. **Carry out the effects in order.** [`Effect::Append`]: encode and
//!    append the event to the log (no fsync needed yet). [`Effect::SendSbd`]
//!    and [`Effect::Reply`]: **first wait until every event appended so far —
//!    in this step or an earlier one — is durable**, then send. A step lists
//!    all its appends before all its messages, so one durable wait per step
//!    suffices; group commit may cover many steps with one fsync, provided the
//!    shell keeps each step's messages back, in order, until then. This is
//!    what makes every ACK (NEW_JOB_REPLY_ACK, EXECUTE_ACK, FINISH_ACK) follow
//!    the event it confirms onto disk, every client answer follow the state it
//!    reports, and NEW_JOB follow its JOB_START (else a crash could forget a
//!    dispatch that sbatchd already acted on, and run the job twice).
//! 4. **Delivery is best effort.** A message for a host without a live
//!    connection, or a reply for a client that went away, is dropped: the
//!    logic resends NEW_JOB and JOB_SIGNAL on Tick and on registration, and
//!    sbatchd and the commands resend the rest.
//! 5. **Failure.** If an append or fsync fails, stop without sending any
//!    message that followed it: the memory is ahead of the log, and a restart
//!    (step 1) brings them back together.
//! 6. **Channels.** Step [`Input::HostRegistered`] once the SBD_REGISTER frame
//!    of an authenticated connection names a configured host (the logic
//!    answers with SBD_REGISTER_ACK); at most one live connection per host, an
//!    older one being closed, with [`Input::HostDisconnected`], before the new
//!    one registers; no message of a connection is stepped after its
//!    disconnect. Each sbatchd message is stepped with the host of the
//!    connection that carried it.
//! 7. **Snapshots.** [`Mbd::snapshot`] between two steps covers every event
//!    appended so far; write it only once those events are durable, and replay
//!    from it only the events after the last one it covers.
//!
//! # Torn steps
//! The log makes each record durable on its own, so a crash may keep any
//! prefix of one step's appends. Every such prefix is a state the logic
//! recovers from: a step whose later records answer an earlier one (a pending
//! job's JOB_SIGNAL and its JOB_STATUS; a refusal's JOB_STATUS PEND and the
//! EXIT or PSUSP that a kill or STOP asked before it leads to) leaves the
//! intent unanswered in the durable state until the answer is logged, and
//! [`Input::Start`] logs the answers a crash lost; a signal reply logs the
//! resulting JOB_STATUS before the JOB_SIGACT that settles the intent, so a
//! lost JOB_SIGACT only means the intent is sent again. (Found by lava-sim,
//! whose simulated disk keeps such prefixes.)
//!
//! # Choices beyond the spec (and why)
//! - Sends are deferred, not the state change: an event is applied at once
//!   and its messages wait for durability. Deciding on not-yet-durable state is
//!   safe because nothing leaves the process before it is durable.
//! - Dispatch numbers (an extension of the spec's message layouts; docs/batch.md,
//!   "Dispatch numbers"): a job's dispatch number is the count of its JOB_START
//!   events, so replay rebuilds it; NEW_JOB carries it, sbatchd echoes it in
//!   NEW_JOB_REPLY, EXECUTE and FINISH, and every ACK echoes the number of the
//!   message it answers. A message of an earlier dispatch is ACKed and never
//!   logged (`pipeline`), so the same job id may be dispatched again safely.
//! - A refused job is not offered to the refusing host again until that host
//!   re-registers (`pipeline`): it stops a refuse/dispatch loop on a host that
//!   cannot run it.
//! - JOB_SIGACT (LSF's name for a signal action's outcome) settles an intent
//!   durably, so a restart resends exactly the unanswered intents.
//! - JOB_SIGNAL is sent only after the start is accepted; earlier intents wait
//!   (sbatchd may not know the job yet), and a refusal applies them to the
//!   pending job (a kill ends it, a STOP holds it).
//! - A pipeline message that contradicts the log (Started, EXECUTE or FINISH
//!   for a pending job or from a host the job is not on) gets no event and no
//!   ACK: an ACK would confirm a run mbatchd does not know of. FINISH for a job
//!   whose start was never accepted still ends it.
//! - A signal other than kill, STOP or CONT on a pending job is answered
//!   `NotStarted` (LSF's "Job has not started yet"), not silently accepted.
//! - Dispatch is first fit in `lsf.cluster` host order (or `-R order[]`), jobs by
//!   queue priority then id (or fairshare); a job that fits nowhere is passed
//!   over, not waited for (docs/batch.md, "Scheduling").
//! - A submission's request id outlives its job: JOB_CLEAN retires it, and a
//!   retried `bsub` whose job already ran and was cleaned gets that job back,
//!   not a second one, for [`REQUEST_ID_RETENTION_MS`] after the clean (the
//!   retired list is durable state, bounded by the jobs cleaned in that time).
//! - A job array is one JOB_NEW; applying it makes every element, so the log
//!   holds one record per array and replay makes the same elements (`array`).
//!   A dependency's job names are resolved when JOB_NEW is applied, against
//!   the state just before it, so live steps and replay agree (`depend`).
//! - A signal request id is remembered per job (on JOB_SIGNAL), so a retried
//!   `bkill` acts on no job twice and a retried `bkill 0` selects the jobs the
//!   first attempt selected (also those a crash tore off its step). JOB_SIGNAL is logged for every live job a request
//!   names, even when the action changes nothing (a STOP of a stopped job):
//!   otherwise a late copy of an attempt the command gave up on could act
//!   after a later request (found by lava-sim).
//!
//! # Map
//! - [`config`]: [`MbdConfig`], queues, hosts, admins, limits.
//! - [`input`], [`effect`]: the boundary types.
//! - [`event`]: the records of `lsb.events`; `replay`: [`Mbd::replay`] and the
//!   events it ignores.
//! - `job`, `state`: one job's record and transitions; the store and its indexes.
//! - `array`, `depend`: job arrays (`-J "name[1-10]%2"`) and dependencies (`-w`):
//!   their checks at submission and what holds a pending job back at dispatch.
//! - `limits`: `MAX_PEND_JOBS`, `MAX_JOBS` per user and group, `LAVA_MAX_JOB_BYTES`.
//! - `machine`: [`Mbd`] and [`Mbd::step`]; `submit`, `sched` (dispatch turns, resends,
//!   cleaning), `placement` (one turn's decisions: limits, `-R`, fairshare,
//!   pending reasons), `pipeline` (NEW_JOB_REPLY, EXECUTE, FINISH), `signal`, `query`,
//!   `hosts` (lim's host availability, UNKWN, `bhosts`), `control` (`bmod`,
//!   `bswitch`, `btop`/`bbot`, `brequeue`, `brun`, `bkill -r`, `badmin hclose|qclose|…`), `history` (`bhist`
//!   from the log's events).

#![deny(missing_docs)]

mod array;
pub mod config;
mod control;
mod depend;
pub mod effect;
pub mod event;
mod history;
mod hosts;
pub mod input;
mod job;
mod limits;
mod machine;
mod pipeline;
mod placement;
mod query;
mod queues;
mod replay;
mod sched;
mod signal;
mod state;
mod submit;

#[cfg(test)]
mod tests;

pub use array::REASON_ARRAY_LIMIT;
pub use config::{
    ClusterAdmin, GroupLimit, HostConfig, LoadThreshold, MbdConfig, PreExecRetryAction, QueueConfig,
    QueueInteractive, QueueLimit, QueueResourceLimits, UserLimit, UserLimits,
};
pub use control::ControlSnapshot;
pub use depend::{REASON_DEPEND_NEVER, REASON_DEPEND_WAIT};
pub use effect::{ClientReply, Effect, ToSbd};
pub use event::Event;
pub use history::{HISTORY_ENTRIES_PER_JOB_MAX, HISTORY_JOBS_PER_PAGE, HistoryBuilder};
pub use input::{Caller, ClientId, Input, LimFacts, LoggedSubmission};
pub use job::{
    Job, PendingSignal, ProcessIds, REASON_NEW_JOB, REASON_NO_QUEUE, REASON_PRE_EXEC, REASON_PRE_EXEC_LIMIT,
    REASON_USER_STOP, REASON_USER_STOP_PENDING, SIGNAL_NUMBER_MAX, SignalKind, TERM_MEMLIMIT, TERM_RUNLIMIT,
    exit_code,
};
pub use limits::{
    PEND_THRESHOLD_REACHED, REASON_UGRP_JOB_LIMIT, REASON_UGRP_PJOB_LIMIT, REASON_USER_JOB_LIMIT,
    REASON_USER_PJOB_LIMIT,
};
pub use machine::{INVARIANT_CHECK_JOBS_MAX, Mbd};
pub use pipeline::REFUSAL_REASON_BYTES_MAX;
pub use query::QUERY_REPLY_BYTES_MAX;
pub use queues::ClusterCounts;
pub use replay::{IgnoredEvent, IgnoredWhy, Replayed};
pub use state::{MbdSnapshot, MbdSnapshotFormat1, REQUEST_ID_RETENTION_MS, RequeueKill, RetiredRequest};
pub use submit::DISK_FULL_MESSAGE;

use lava_batch_ll::JobRef;

/// An error of the logic: a configuration it cannot work with, or durable
/// data (an event, a snapshot) that does not fit the state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MbdError {
    /// The configuration is inconsistent.
    #[error("configuration: {0}")]
    Config(String),
    /// A logged event does not apply to the state replayed so far.
    #[error("{event} for job {}: {problem}", job.map_or("-".to_owned(), |j| j.to_string()))]
    Apply {
        /// LSF's name of the event type.
        event: &'static str,
        /// The job it is about.
        job: Option<JobRef>,
        /// Why it does not apply.
        problem: String,
    },
    /// A snapshot is inconsistent.
    #[error("snapshot: {0}")]
    Snapshot(String),
}
