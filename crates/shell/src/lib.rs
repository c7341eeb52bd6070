//! lava-shell: what the daemons' I/O shells share, written once. It owns the shell-side
//! machinery that every daemon (mbatchd, sbatchd, lim, mxfsd, the coordinator) would
//! otherwise repeat around the shared crates:
//! - [`group_commit`]: the appending side of a `lava-eventlog` log (group commit on a
//!   blocking thread, small commits on the caller's thread, snapshots written and pruned on
//!   a blocking thread, a clean close), used by mbatchd's `lsb.events` and the
//!   coordinator's WAL;
//! - [`signals`]: SIGTERM, SIGINT and SIGHUP as one [`signals::ShellSignal`] for the event
//!   loop (stop, or reload), used by all five daemons;
//! - [`readiness`]: the notifications to systemd (`STATUS`, `READY`, `WATCHDOG` from the
//!   loop's timer, `RELOADING`, `STOPPING`), a failed one logged and never fatal, used by
//!   all five daemons;
//! - [`space`]: the watch over a daemon's state file system with its space reserve
//!   (mbatchd and sbatchd);
//! - [`startup`]: the listener with SO_REUSEADDR (mbatchd, the coordinator), a stale port
//!   or ready file removed and the new one written atomically (mbatchd, lim, mxfsd, the
//!   coordinator), an event log's private folder and the findings of opening it logged
//!   (mbatchd's `lsb.events`, the coordinator's WAL), and [`startup::PathError`] / [`startup::ListenError`], the errors naming
//!   the path or address that the daemons' own error types wrap.
//!
//! - [`metrics`]: the metrics endpoint (the Prometheus text exposition of a daemon's
//!   figures over a small HTTP/1 listener behind a gate), used by all five daemons when
//!   lsf.conf names their metrics port.
//!
//! - [`replication`]: the master candidates' link and durable replica log around
//!   `lava-replog` (docs/failover.md), for mbatchd and the coordinator.
//!
//! It sits beside `lava-net` on the shell side of the layering and may use tokio.
//!
//! It must never decide anything a daemon's logic or its shell decides: it knows no event,
//! no encoding of a daemon's own, no snapshot rule and no crash point (`lava_crash::point!` needs a literal
//! name, so each daemon marks its own boundaries around these calls); it does not say what
//! a stop or a reload does, when a daemon is ready or what its status line says. No logic,
//! ll or wire crate may depend on it.
#![deny(missing_docs)]

pub mod group_commit;
pub mod metrics;
pub mod readiness;
pub mod replication;
pub mod signals;
pub mod space;
pub mod startup;
