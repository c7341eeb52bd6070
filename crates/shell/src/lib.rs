//! lava-shell: what the daemons' I/O shells share, written once. It owns the shell-side
//! machinery around the shared crates that every daemon would otherwise repeat; today that
//! is [`group_commit`], the appending side of a `lava-eventlog` log (group commit on a
//! blocking thread, small commits on the caller's thread, snapshots written and pruned on
//! a blocking thread, a clean close), used by mbatchd's `lsb.events` and the coordinator's
//! WAL, and [`space`], the watch over a daemon's state file system with its space reserve
//! (mbatchd and sbatchd). It sits beside `lava-net` on the shell side of the layering and may use tokio.
//!
//! It must never decide anything a daemon's logic or its shell decides: it knows no event,
//! no encoding, no snapshot rule and no crash point (`lava_crash::point!` needs a literal
//! name, so each daemon marks its own boundaries around these calls). No logic, ll or wire
//! crate may depend on it.
#![deny(missing_docs)]

pub mod group_commit;
pub mod space;
