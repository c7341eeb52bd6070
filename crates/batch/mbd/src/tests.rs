//! Tests of the logic, in openraft's engine-test shape: one input, the exact
//! list of effects expected. Every step also proves the replay rule: the
//! events emitted so far, replayed into a fresh [`Mbd`] (and the snapshot
//! before the step plus the step's events), give the live durable state.

mod acct;
mod arrays;
mod control;
mod harness;
mod hooks;
mod hosts;
mod limits;
mod pipeline;
mod prop;
mod replay;
mod sched;
mod signal;
mod state;
mod wrap;
