//! lava-mbatchd: the I/O shell of mbatchd around the `lava-mbd` state machine.
//!
//! mbatchd is the scheduler and state authority of the batch system
//! (docs/ARCHITECTURE.md, "Code map"). Everything it decides is decided by
//! [`lava_mbd::Mbd`]; this crate only carries inputs to it and its effects out,
//! following the *shell contract* written in `lava-mbd`'s crate documentation,
//! step by step:
//!
//! | contract step | where |
//! |---|---|
//! | 1. Start: snapshot, then every later event to `Mbd::replay`; an error stops the daemon naming the position, the events it ignores (after DONE/EXIT, duplicated stages) are counted and logged once; then `Input::Start` | [`journal::recover`], [`run`] |
//! | 2. One step at a time, with the wall clock; `Tick` once a second | `shell` (the one event loop) |
//! | 3. Effects in order; appends first, messages held until every earlier append is durable (group commit) | `shell::Shell::step`, [`journal::Journal`], `shell::Outbox` |
//! | 4. Best-effort delivery: no live connection, no message | `shell::Shell::deliver` |
//! | 5. A failed append or fsync stops the daemon, sending nothing after it | `shell::Shell::step`, [`ShellError::Log`] |
//! | 6. Channels: `HostRegistered` after an authenticated SBD_REGISTER of a configured host, one live channel per host | `conn` (sbatchd channels), `shell` (`SbdRegistered`) |
//! | 7. Snapshots of durable state, then pruning | [`journal::Journal::maybe_snapshot`] |
//!
//! # What it never does
//! It never changes job state, never decides what to send, and never reads
//! the clock for the logic except to hand `now_ms` to [`lava_mbd::Mbd::step`].
//! It never trusts a uid a client states (only a credential sealed with the
//! cluster key), never sends a message before the events it depends on are on
//! disk, and never lets one peer's bad input cost anyone else their connection
//! (docs/ARCHITECTURE.md, "Architecture invariants").
//!
//! # The connection protocol (one TCP port, `LSB_MBD_PORT`)
//! Every frame is `lava_xdr::frame`'s 20-byte header and an XDR body, at most
//! [`codec::FRAME_BYTES_MAX`] bytes. The **first frame** of a connection decides
//! what it is:
//! - `SBD_REGISTER` (sealed with the cluster key: every frame of the channel
//!   carries `lava-net`'s HMAC trailer, both ways): an **sbatchd channel**. The
//!   host it names must be a server host of `lsf.cluster`; its later frames are
//!   BATCH_NEW_JOB_REPLY, BATCH_JOB_EXECUTE, BATCH_JOB_FINISH and
//!   BATCH_JOB_SIGNAL_REPLY (docs/protocols/batch.md), and
//!   mbatchd sends SBD_REGISTER_ACK, BATCH_NEW_JOB, the three ACKs and
//!   BATCH_JOB_SIGNAL on it.
//! - anything else: a **command connection**. Each frame is one request
//!   (`SUBMIT_JOB`, `JOB_QUERY`, `SIGNAL_JOBS`, `JOB_CONTROL`, `ADMIN_CONTROL`) whose body is a
//!   `ClientRequest<T>` carrying a sealed credential; each gets exactly one
//!   answer (the `*_REPLY` operation, or `REQUEST_FAILED` with an
//!   `ErrorReply`) whose header echoes the request's `sequence`; requests on
//!   one connection are answered in order. REQUEST_FAILED repeats its error
//!   code in the header's `status` (0 in every other answer).
//!   `HOST_QUERY` (`bhosts`) is a read answered from memory at once (it
//!   confirms nothing, so it does not wait for the log); host availability
//!   comes from the master lim, polled by [`lim_client`].
//!   `HISTORY_QUERY` (`bhist`) is answered by the connection's task from the
//!   event log itself, read on a blocking thread (`history`); a `brequeue`
//!   JOB_CONTROL first has the named jobs' environments read back the same
//!   way (the newest snapshot and JOB_NEW records) and goes to the logic with
//!   them (`Input::Requeue`); `ADMIN_CONTROL`
//!   `mbdrestart` is served by the loop, which then stops cleanly and the
//!   daemon `exec`s itself ([`daemon`]).
//!   `PEEK_JOB` (`bpeek`) is relayed to the execution host's sbatchd as
//!   SBD_PEEK on its channel, whose SBD_PEEK_REPLY comes back the same way
//!   (`peek`); neither touches the logic.
//!
//! What a peer gets wrong costs it its connection and nothing else: a frame
//! over the limit or cut short, or an sbatchd frame that fails authentication,
//! closes it at once; a command of an unknown version or operation or with an
//! undecodable body is answered REQUEST_FAILED (ERR_UNSUPPORTED,
//! ERR_BAD_REQUEST) and then closed; a refused credential (ERR_AUTH) or a field
//! `lava-batch-ll` refuses (ERR_BAD_REQUEST naming the field) is answered and
//! the connection stays usable. A well-formed but invalid sbatchd message is
//! logged and dropped; its channel stays up. Every case is logged with the
//! peer's address and counted ([`counters`]).
//!
//! # Files
//! - `$LSB_SHAREDIR/<cluster>/logdir/lsb.events.*`: the event log, its
//!   snapshots and its writer lock (folders created with mode 0700).
//! - `$LSB_SHAREDIR/<cluster>/logdir/lsb.acct`, `lsb.acct.N`: the accounting log
//!   ([`acct`]), derived from the event log.
//! - `$LSB_SHAREDIR/<cluster>/logdir/lsb.events` (a text file), `lsb.events.N`,
//!   `lsb.events.state`: the event log's text view in LSF's format ([`events_view`]).
//! - `--port-file PATH`: the bound port, written atomically once mbatchd serves.
//! - `LSF_LOGDIR/mbatchd.log.<master host>`: the log of a detached mbatchd
//!   (`--foreground` logs to standard error).
//!
//! # Map
//! - [`args`]: the command line.
//! - [`config`]: `lsf.conf`, `lsf.cluster`, `lsb.*` → [`lava_mbd::MbdConfig`] and the shell's settings.
//! - [`codec`]: limits, XDR encoding and decoding, frame headers.
//! - [`journal`]: `lsb.events`: open, replay, group commit, snapshots.
//! - [`acct`]: `lsb.acct`: a record per finished job once its event is durable, rebuilt at start, switched.
//! - [`events_view`]: the `lsb.events` text view: the durable records worded in LSF's format,
//!   continued at start from where it got, switched.
//! - [`textlog`]: what those two text logs share: durable batches, retries, switching.
//! - [`lim_client`]: polls the master lim; host availability changes for the loop.
//! - [`counters`]: frames by operation and rejects by reason, for a later status command.
//! - [`metrics`]: the status figures under Prometheus names, answered by the loop to the
//!   metrics listener (`LAVA_MBD_METRICS_PORT`).
//! - `validate`: the structural checks (`lava-batch-ll`) of what peers send, and the credential check.
//! - `conn`: one task per connection (commands and sbatchd channels).
//! - `peek`: `bpeek`'s PEEK_JOB, relayed to the execution host's sbatchd as SBD_PEEK
//!   outside the logic (it changes nothing).
//! - `shell`: the one closed event loop, the effect executor.
//! - [`logging`]: standard error or a log file that SIGHUP reopens.
//! - [`daemon`]: detaching, the listener, the port file, and [`run`].

#![deny(missing_docs)]

pub mod acct;
pub mod args;
pub mod codec;
pub mod config;
mod conn;
pub mod counters;
pub mod daemon;
mod derived;
pub mod events_view;
mod history;
pub mod journal;
pub mod lim_client;
pub mod logging;
pub mod metrics;
mod peek;
mod replicated;
mod shell;
pub mod textlog;
mod validate;

use std::path::PathBuf;

pub use args::Args;
pub use daemon::{main, run};

/// Why mbatchd could not start or had to stop. Each message names the file,
/// address or log position an operator has to look at.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// A configuration file is missing or wrong.
    #[error("configuration: {0}")]
    Conf(#[from] lava_conf::ConfError),
    /// The configuration loads but does not describe a cluster mbatchd can run.
    #[error("configuration: {0}")]
    Config(String),
    /// The logic refused the configuration.
    #[error("configuration: {0}")]
    Logic(#[from] lava_mbd::MbdError),
    /// The cluster key file is missing, unreadable or too permissive.
    #[error("{0}")]
    Key(#[from] lava_net::KeyError),
    /// The event log failed (open, append, fsync, replay of a damaged record).
    #[error("event log: {0}")]
    Log(#[from] lava_eventlog::Error),
    /// A logged event or snapshot does not fit the state replayed so far.
    #[error("replay of the event log in {dir}: {what} at position {position}: {problem}")]
    Replay {
        /// The log's directory.
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
    /// The replicated event log of the master candidates failed (docs/failover.md).
    #[error("replicated event log: {0}")]
    Replica(String),
    /// The async runtime or a helper thread failed.
    #[error("runtime: {0}")]
    Runtime(String),
}

impl ShellError {
    /// A write found the file system full (ENOSPC or EDQUOT): waited out, not a reason to
    /// stop (docs/operations.md, "A full disk").
    pub fn is_no_space(&self) -> bool {
        match self {
            ShellError::Log(error) => error.is_no_space(),
            ShellError::Io(error) => {
                matches!(
                    error.error.kind(),
                    std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
                )
            }
            _ => false,
        }
    }
}
