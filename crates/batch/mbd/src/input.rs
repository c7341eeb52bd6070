//! What the shell feeds the logic: client requests, sbatchd channel events
//! and messages, and the clock tick.
//!
//! Client requests arrive validated by `lava-batch-ll` and with the caller's
//! identity already vouched for by the shell (the credential checked); sbatchd
//! messages arrive as decoded wire structures together with the host whose
//! authenticated connection carried them, and the logic checks their job
//! references itself.

use lava_batch_ll::{HostName, SubmitSpec, UserName};
use lava_batch_wire as wire;

/// The shell's handle of a client connection (or request); opaque to the
/// logic, which only hands it back in [`crate::Effect::Reply`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub u64);

/// Who sent a client request, as the credential vouches for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The caller's uid.
    pub uid: u32,
    /// The caller's primary gid.
    pub gid: u32,
    /// The caller's login name.
    pub user: UserName,
    /// The host the request came from.
    pub host: HostName,
}

/// What the master lim reports of one host: its load vector and static facts.
#[derive(Clone, Debug, PartialEq)]
pub struct LimFacts {
    /// The load indices in lim's order (`lava_batch_ll::resreq::LOAD_INDEX_NAMES`),
    /// `None` when the host never reported.
    pub load: Option<[f32; 11]>,
    /// Processors; 0 when lim does not know them.
    pub ncpus: u32,
    /// Physical memory, MB (meaningful when `ncpus` > 0).
    pub maxmem_mb: u32,
    /// Swap space, MB (meaningful when `ncpus` > 0).
    pub maxswp_mb: u32,
    /// lim's status word has the host locked (`lsadmin limlock`): no dispatch
    /// there (pending reason "Host is locked"), `bhosts` shows `closed_Lock`.
    pub locked: bool,
    /// lim's status word has the host busy (a load index beyond its
    /// lsf.cluster threshold): no dispatch there ("Load threshold reached"),
    /// `bhosts` shows `closed_Busy`.
    pub busy: bool,
}

/// A job's submission environment as the shell read it back from the disk (the
/// job's JOB_NEW in the event log, or a snapshot file, which keeps those of the
/// finished jobs after the state), for `brequeue`: a finished job no longer
/// holds it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LoggedSubmission {
    /// The JOB_NEW's job (index 0, also for an array).
    pub job: lava_batch_ll::JobRef,
    /// Its request id: the logic requeues a job only with its own submission.
    pub request_id: wire::RequestId,
    /// The environment JOB_NEW logged.
    pub env: Vec<wire::EnvVar>,
}

/// One input of [`crate::Mbd::step`].
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// Replay is complete; mbatchd opens for business (logs MBD_START).
    Start,
    /// `bsub`.
    Submit {
        /// Where the reply goes.
        client: ClientId,
        /// The command's request id (the same on every retry).
        request_id: wire::RequestId,
        /// The vouched caller.
        caller: Caller,
        /// The validated submission (boxed: it is by far the largest input).
        spec: Box<SubmitSpec>,
    },
    /// `bjobs`.
    Query {
        /// Where the reply goes.
        client: ClientId,
        /// The vouched caller.
        caller: Caller,
        /// The query.
        query: wire::JobQuery,
    },
    /// `bkill`, `bstop`, `bresume`.
    Signal {
        /// Where the reply goes.
        client: ClientId,
        /// The command's request id (the same on every retry).
        request_id: wire::RequestId,
        /// The vouched caller.
        caller: Caller,
        /// The request.
        request: wire::SignalRequest,
    },
    /// sbatchd of `host` registered on an authenticated connection.
    HostRegistered {
        /// The host.
        host: HostName,
        /// The CPUs it offers.
        n_cpus: u32,
    },
    /// The connection of `host` closed.
    HostDisconnected {
        /// The host.
        host: HostName,
    },
    /// BATCH_NEW_JOB_REPLY from `host`.
    NewJobReply {
        /// The sending host.
        host: HostName,
        /// The message.
        reply: wire::NewJobReply,
    },
    /// BATCH_JOB_EXECUTE from `host`.
    JobExecute {
        /// The sending host.
        host: HostName,
        /// The message.
        msg: wire::JobExecute,
    },
    /// BATCH_JOB_FINISH from `host`.
    JobFinish {
        /// The sending host.
        host: HostName,
        /// The message.
        msg: wire::JobFinish,
    },
    /// BATCH_JOB_SIGNAL_REPLY from `host`.
    JobSignalReply {
        /// The sending host.
        host: HostName,
        /// The message.
        msg: wire::JobSignalReply,
    },
    /// The master lim's view of `host` changed (transient, never logged; see
    /// `hosts`): an unavailable host gets no new jobs and its started jobs
    /// show as UNKWN until it is available again. Every host is available
    /// until the shell says otherwise.
    HostAvailability {
        /// The host.
        host: HostName,
        /// Whether lim reports it available.
        available: bool,
    },
    /// Whether the file system holding the event log is full (transient, never
    /// logged; docs/operations.md, "A full disk"): while it is, a new submission
    /// is refused with a message saying so (a retry of one already accepted still
    /// gets its first answer); everything else goes on. Not full until the shell
    /// says otherwise.
    DiskFull {
        /// Whether it is full.
        full: bool,
    },
    /// The master lim's load and static facts of `host` (transient, never
    /// logged; see `hosts`): what `-R` selects, orders and reserves against.
    /// A host without them has no load: a select on a load index fails there.
    HostLoad {
        /// The host.
        host: HostName,
        /// What lim knows of it.
        facts: Box<LimFacts>,
    },
    /// `badmin reconfig`: a new configuration, which the shell loaded and checked
    /// ([`crate::Mbd::reconfigurable`]: valid, with the same cluster, master and
    /// hosts; host changes need a restart). Configuration is not logged; replay after
    /// a restart uses the configuration of that start, as it always does.
    Reconfigure {
        /// The configuration to use from now on.
        config: Box<crate::MbdConfig>,
    },
    /// Time passed; resends and cleaning that are due happen now.
    Tick,
    /// The dispatch turn that steps noted as wanted runs now (with
    /// [`crate::MbdConfig::deferred_dispatch`]; nothing happens when none is wanted).
    Dispatch,
    /// `bmod`, `bswitch`, `btop`, `bbot`, `brun`, `bkill -r` (see `control`).
    JobControl {
        /// Where the reply goes.
        client: ClientId,
        /// The command's request id (the same on every retry): a retried `brun`
        /// or `bkill -r` is answered again and acts on no job twice.
        request_id: wire::RequestId,
        /// The vouched caller.
        caller: Caller,
        /// The request.
        request: wire::JobControlRequest,
    },
    /// `brequeue` (a JOB_CONTROL with [`wire::JobControlAction::Requeue`]), with
    /// the submissions of the jobs it names that the shell found in the log.
    Requeue {
        /// Where the reply goes.
        client: ClientId,
        /// The command's request id (the same on every retry): a retried
        /// `brequeue -r` kills no run twice (`control`).
        request_id: wire::RequestId,
        /// The vouched caller.
        caller: Caller,
        /// The request.
        request: wire::JobControlRequest,
        /// The JOB_NEW environments found for the named job ids.
        submissions: Vec<LoggedSubmission>,
    },
    /// `badmin hclose`, `hopen`, `qclose`, `qopen`, `qact`, `qinact` (see `control`;
    /// `mbdrestart` is the shell's).
    AdminControl {
        /// Where the reply goes.
        client: ClientId,
        /// The vouched caller.
        caller: Caller,
        /// The request.
        request: wire::AdminControlRequest,
    },
}
