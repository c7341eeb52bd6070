//! The shell side of the master candidates' replicated log (docs/failover.md): what a
//! daemon running as a candidate needs around `lava-replog`'s sans-IO replica, written once
//! for mbatchd and the coordinator.
//!
//! - [`peers`]: the link among candidates — the replication port, sealed frames, bounded
//!   queues, reconnection with backoff — carrying out [`lava_replog::Effect::Send`] and
//!   feeding [`lava_replog::Replica::receive`].
//! - [`store`]: the candidate's durable records and newest snapshot through
//!   `lava-eventlog`, carrying out [`lava_replog::Effect::Persist`] (on the spot, or
//!   started while the loop goes on, its end one of the loop's inputs) and keeping the
//!   snapshots of [`lava_replog::Effect::Restore`] and of compaction, and reading back what
//!   [`lava_replog::Replica::recover`] needs at a restart.
//!
//! The daemon drives the replica itself, in its own loop, and carries out the effects of
//! each `drain` in the order given: this module never owns the replica, never decides
//! what an entry means and never acknowledges anything.

pub mod peers;
pub mod store;

pub use peers::{Link, LinkConfig, LinkCounters};
pub use store::{NO_SPACE_RETRY, Recovered, ReplicaLog, StoreError};
