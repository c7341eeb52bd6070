//! lava-coordinator: the coordinator daemon's I/O shell around
//! `lava-coord-logic`, plus `coordctl` and a small worker-client library.
//!
//! The coordinator is a single-process, WAL-backed, lease-based task scheduler
//! for pull workers (docs/coordinator.md). Everything it
//! decides is decided by [`lava_coord_logic::Coord`]; this crate carries
//! requests in and effects out, following the shell contract written in
//! `lava-coord-logic`'s crate documentation:
//!
//! | contract step | where |
//! |---|---|
//! | 1. Start: snapshot + tail to `Coord::apply`, then `Tick` with the current time (expire leases that ran out while down), then serve | [`journal::recover`], [`server::run`] |
//! | 2. One step at a time, wall clock, `Tick` every 100 ms | `server` (the one event loop) |
//! | 3. Each step's appends at once; every answer (a query's, STATS and a refusal included) held behind the last append before it until that is durable, released in order (group commit: `wait_durable` on a blocking thread covering every step appended meanwhile) | `server`, [`journal::Journal`] |
//! | 4. A failed append or fsync stops the daemon at once, releasing no held answer | `server` |
//! | 5. A snapshot every `--snapshot-events` events, then pruning | [`journal::Journal::maybe_snapshot`] |
//!
//! # Command line
//! `coordinator [--envdir DIR] [--port PORT] [--port-file PATH] [--ready-file PATH]
//! [--lease-ms MS] [--payload-bytes-max BYTES] [--snapshot-events N] [--host NAME]`. It always
//! runs in the foreground and logs to standard error (a supervisor or
//! `scripts/cluster` owns it). It listens on `LAVA_COORD_PORT` of `lsf.conf`
//! (or `--port`; 0 lets the kernel choose, read it from `--port-file`), on
//! the master host's `LAVA_ADDR` when `lsf.cluster` gives one, else 127.0.0.1.
//! `--ready-file` is written (atomically) once the coordinator serves.
//!
//! # Files
//! `$LSB_SHAREDIR/<cluster>/coord/`: the WAL `coord.wal.*`, its snapshots and
//! its writer lock (mode 0700). A torn last record (a crash mid-write) is cut
//! off at start and logged; damage followed by valid records stops the start
//! with an error naming the file and offset. On a master candidate the replica
//! log `coord.replica.*` in `coord/<candidate>/` takes the WAL's place.
//!
//! # Authentication and authorization (decided here; docs/protocols/coordinator.md)
//! The cluster key is read by the coordinator only (mode 0600, root). Users
//! prove who they are as the batch commands do: the client asks its local
//! sbatchd for a credential on `LAVA_CMD_SOCKET` (sbatchd learns the uid from
//! the kernel with SO_PEERCRED and seals uid, user and host with the cluster
//! key) and sends it as the first frame of the connection (HELLO). The
//! coordinator verifies it with the key — MAC, 30 s window, single use — and
//! serves that user on that connection; any other first frame, or a
//! credential that fails, gets `ERR_AUTH` and the connection is closed.
//!
//! Later frames of the connection are not sealed: as for the batch commands'
//! requests, the credential proves who opened the connection, and the
//! network between cluster hosts is trusted not to inject into a TCP stream.
//! A daemon with the key has no other way in: the coordinator's only
//! daemon-to-daemon traffic is the master candidates' replication link, on its own
//! port, from the candidates' addresses, every frame sealed with the key.
//!
//! Who may do what (the logic decides; `lava-coord-logic`):
//! - any authenticated user may submit (the task records its owner: uid and
//!   user), lease (the lease records the user it was granted to), and query;
//! - heartbeat, complete and fail under a lease are accepted only from the
//!   user the lease was granted to, or from a cluster administrator (uid 0 or
//!   a name in lsf.cluster ClusterAdmins); anyone else gets `ERR_PERMISSION`
//!   and nothing is appended;
//! - payloads are handed to whichever worker leases the task: they are not
//!   secret from the cluster's users.
//!
//! # Protocol
//! `lava-coord-wire`: each request frame gets exactly one answer whose header
//! echoes its `sequence`; requests on one connection are answered in order,
//! and a client may send requests before the earlier answers arrived.
//! An unknown version or operation, or an undecodable body, is answered
//! `REQUEST_FAILED` and the connection closed; a field `lava-coord-ll`
//! refuses (zero id, bad worker name, payload too large) is answered with an
//! error naming it and the connection stays usable.
//!
//! # What it never does
//! It never changes task state, never reads the clock for the logic except to
//! hand `now_ms` to `Coord::step`, and never answers before the WAL records
//! the answer depends on are durable.
//!
//! # Map
//! - [`args`]: the daemon's command line. [`codec`]: limits, XDR of events and snapshots.
//! - [`journal`]: the WAL: open, replay, group commit, snapshots.
//! - [`server`]: configuration, the listener, connection tasks and the event loop.
//! - [`replicated`]: the coordinator as one of several master candidates (`LSF_MASTER_LIST`
//!   with two names or more): its WAL is the candidates' replicated log (docs/failover.md).
//! - [`counters`]: what the shell counts for STATS; [`metrics`]: the same figures under
//!   Prometheus names (`LAVA_COORD_METRICS_PORT`), answered by the loop at each scrape.
//! - [`client`]: the blocking client and the worker library ([`client::Worker`]).
//! - [`ctl`]: the `coordctl` command.

#![deny(missing_docs)]

pub mod args;
pub mod client;
pub mod codec;
pub mod counters;
pub mod ctl;
pub mod journal;
pub mod metrics;
pub mod replicated;
pub mod server;

use std::path::PathBuf;

pub use args::Args;
pub use server::{main, run};

/// Why the coordinator could not start or had to stop. Each message names
/// the file, address or WAL position an operator has to look at.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// A configuration file is missing or wrong.
    #[error("configuration: {0}")]
    Conf(#[from] lava_conf::ConfError),
    /// The cluster key file is missing, unreadable or too permissive.
    #[error("{0}")]
    Key(#[from] lava_net::KeyError),
    /// The WAL failed (open, append, fsync, replay of a damaged record).
    #[error("WAL: {0}")]
    Log(#[from] lava_eventlog::Error),
    /// A WAL record or snapshot does not fit the state replayed so far.
    #[error("replay of the WAL in {dir}: {what} at position {position}: {problem}")]
    Replay {
        /// The WAL's directory.
        dir: PathBuf,
        /// "record" or "snapshot".
        what: &'static str,
        /// The record's position (a snapshot's covered position).
        position: u64,
        /// What is wrong with it.
        problem: String,
    },
    /// A file or folder operation failed.
    #[error(transparent)]
    Io(#[from] lava_shell::startup::PathError),
    /// The listening socket could not be set up.
    #[error(transparent)]
    Listen(#[from] lava_shell::startup::ListenError),
    /// The configuration does not fit (a master candidate).
    #[error("configuration: {0}")]
    Config(String),
    /// The replicated WAL of the master candidates failed (its disk, its port, an entry).
    #[error("replicated WAL: {0}")]
    Replica(String),
    /// The async runtime or a helper thread failed.
    #[error("runtime: {0}")]
    Runtime(String),
}
