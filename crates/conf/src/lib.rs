//! lava-conf: the reader of LavaCore's LSF-style configuration.
//!
//! # What it owns
//! The syntax and the meaning of the configuration files an LSF / Lava administrator knows:
//! `lsf.conf`, `lsf.shared`, `lsf.cluster.<cluster>`, and the batch system's `lsb.queues`,
//! `lsb.params`, `lsb.hosts` and `lsb.users`, plus the few keys and columns of our own (each
//! documented where it is read, and listed below). It turns files into typed values with
//! defaults, or into a [`ConfError`] naming the file, the line and what was expected.
//!
//! # What it never does
//! - No logging, no network, no clock, no tokio, no threads. It reads files and returns values;
//!   a daemon decides what to log (see [`ClusterConfig::unimplemented_warnings`]).
//! - It never writes a file or creates a folder, never resolves a host name, never looks a user
//!   up, and never expands `$VARIABLES`.
//! - It reads the process environment in exactly one place, [`envdir_from_env`]; everything else
//!   takes the envdir as an argument, so tests never depend on the environment.
//! - It never panics on any input text (a property test feeds it arbitrary text).
//!
//! # Map
//! Two layers, the generic one knowing no file, the typed one knowing one file each:
//! - generic: [`keyvalue`] (`KEY=value`, the syntax of lsf.conf), [`section`] (`Begin ... End`
//!   blocks of `KEY = value` lines or tables, the syntax of every other file), [`value`] (one
//!   value: bare, quoted, parenthesised or `-`), and the private `lex` (comments,
//!   continuations, line numbers);
//! - typed: [`lsf_conf`], [`shared`], [`cluster`], [`queues`], [`params`], [`hosts`], [`users`];
//! - [`load`]: [`ClusterConfig::load`] finds and loads every file of a cluster from its envdir
//!   and runs the checks that span files;
//! - [`error`]: [`ConfError`] and [`ErrorKind`].
//!
//! # Syntax shared by every file
//! `#` starts a comment (outside quotes); `\` at the very end of a line joins the next line;
//! blank lines are ignored; `"..."` and `'...'` quote a value; in section files `(a b c)` is one
//! value and `-` means "the default". The details, and where we differ from LSF, are in
//! `lex`'s rules (summarised here), [`keyvalue`] and [`section`].
//!
//! # Strictness
//! LSF skips what it does not understand, with a log line at best. We refuse unknown sections,
//! keys and columns with an error, so a typo cannot silently change how the cluster behaves.
//! Sections, keys and columns that LSF defines but LavaCore does not implement are accepted and
//! handed back unread (`unimplemented` fields), so an existing LSF configuration still loads and
//! the daemon can warn that they have no effect.
//!
//! # Our own keys and columns (not in LSF)
//! - lsf.conf: `LAVA_CLUSTER_NAME`, `LAVA_CLUSTER_KEY_FILE`, `LAVA_MXFSD_PORT`,
//!   `LAVA_COORD_PORT`, `LAVA_LIM_TCP_PORT`, `LAVA_CMD_SOCKET` (see [`lsf_conf`]);
//! - lsf.cluster `Host` columns: `LAVA_ADDR`, `LAVA_LIM_PORT`, `LAVA_SBD_PORT`,
//!   `LAVA_MXFSD_PORT`, which let several logical hosts share one address (see [`cluster`]);
//! - lsb.queues: `DEFAULT = y` marks a default queue (see [`queues`]);
//! - relative paths in lsf.conf are relative to the envdir (see [`lsf_conf`]).
#![deny(missing_docs)]

pub mod cluster;
pub mod error;
mod fields;
pub mod hosts;
pub mod keyvalue;
mod lex;
pub mod load;
pub mod lsf_conf;
pub mod params;
pub mod queues;
pub mod section;
pub mod shared;
pub mod users;
pub mod value;

pub use cluster::{ClusterHost, LsfCluster};
pub use error::{ConfError, ErrorKind};
pub use fields::{GROUP_NAME_BYTES_MAX, HOST_NAME_BYTES_MAX, LOAD_INDICES};
pub use hosts::{BatchHost, HostGroup, LsbHosts, Mxj, Threshold};
pub use keyvalue::{KeyValueEntry, KeyValueFile};
pub use load::{BaseConfig, ClusterConfig, own_candidate};
pub use lsf_conf::{LimitUnit, LogMask, LsfConf, MetricsPorts, envdir_from, envdir_from_env};
pub use params::LsbParams;
pub use queues::{
    HOOK_COMMAND_BYTES_MAX, Interactive, LsbQueues, Members, PJOB_LIMIT_MAX, PreExecRetryAction, Queue,
    QueueLimit,
};
pub use section::{Entry, Row, Section, SectionBody, SectionFile, Table};
pub use shared::{HostModel, LsfShared, Resource, ResourceKind};
pub use users::{BatchUser, LsbUsers, UserGroup};
pub use value::{Value, ValueForm};

/// The largest configuration file read, in bytes. Real files are a few kilobytes; the limit
/// only stops a wrong path (a log, a device) from being read into memory whole.
pub const CONF_FILE_BYTES_MAX: u64 = 16 * 1024 * 1024;
