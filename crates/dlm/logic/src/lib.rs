//! lava-dlm-logic: the lock master of mxfsd (docs/protocols/dlm.md) — the only code
//! that changes lock, lease, membership and epoch state.
//!
//! A pure, deterministic state machine ([`Master`]): it takes an [`Input`] (a validated,
//! authenticated [`Envelope`] from lava-dlm-ll, a tick, a finished recovery) with the current
//! time and returns [`Effect`]s in the order the shell must carry them out.
//!
//! # What it never does
//! No I/O, no clock (time arrives as `now_ms`), no randomness, no threads, no tokio, no
//! `HashMap` whose order reaches an output (every table is a `BTreeMap` or a `VecDeque`). It
//! never encodes bytes (lava-dlm-wire) nor checks structure (lava-dlm-ll) nor authenticates
//! (the shell, with lava-net).
//!
//! # Modes and compatibility ([`compatible`])
//! The standard matrix of VMS, the Linux kernel DLM and OCFS2 (Y = may be held together):
//!
//! | | NL | CR | CW | PR | PW | EX |
//! |---|---|---|---|---|---|---|
//! | **NL** | Y | Y | Y | Y | Y | Y |
//! | **CR** | Y | Y | Y | Y | Y | N |
//! | **CW** | Y | Y | Y | N | N | N |
//! | **PR** | Y | Y | N | Y | N | N |
//! | **PW** | Y | Y | N | N | N | N |
//! | **EX** | Y | N | N | N | N | N |
//!
//! # Queueing rules (per resource: granted set, conversion queue, wait queue; both FIFO)
//! 1. A **new request** is granted at once only if it is compatible with every holder **and**
//!    both queues are empty: nobody who asked earlier is overtaken, so a stream of readers
//!    cannot starve a queued EX (the original granted on holder compatibility alone).
//! 2. A **conversion** is granted at once if it is a pure down-conversion (the new mode
//!    conflicts with nothing the old one did not), or if it is compatible with every *other*
//!    holder and no earlier conversion is queued. Otherwise it queues in the conversion queue,
//!    which is served before the wait queue ("conversions ahead of new requests"). A blocked
//!    up-conversion is granted as soon as the other holders allow it (the original never did).
//!    A conversion blocked by a holder that is itself converting, or that would queue behind
//!    a conversion its own granted mode blocks, is denied with `Deadlock` (two PR holders both
//!    converting to EX would otherwise wait forever; as the Linux DLM's conversion deadlock
//!    detection).
//! 3. After every release, conversion or purge the queues are served in order: the head of the
//!    conversion queue while it is compatible with the other holders; then, only once no
//!    conversion waits, the head of the wait queue while it is compatible with every holder.
//! 4. **NOQUEUE**: a request or conversion not grantable at once is answered LOCK_DENY
//!    (`WouldBlock`) and leaves no trace.
//! 5. **BAST**: every holder whose mode blocks a queued request (the new one, or the head of a
//!    queue after a change) is sent one LOCK_BAST naming the blocked mode; a holder is told once
//!    per mode it holds (a conversion re-arms it). Fenced holders of a dead node get none.
//! 6. **BAST timeout** (`bast_timeout_ms`): the spec's holder "should downgrade or release
//!    within bast_timeout_ms". A revocable holder (its [`LockId::revocable`]) that has neither
//!    converted nor released that long after its BAST, and still blocks a queued request, has
//!    its lock **revoked**: [`Effect::Revoked`], then LOCK_DENY with [`DenyReason::Revoked`]
//!    to its node, which tells its client the lock is lost and releases it (LOCK_RELEASE).
//!    Until that release arrives the lock stays in the table, revoked, and keeps blocking (the
//!    master cannot know before that the client was told; a node that never answers is a node
//!    whose lease runs out: the death sequence takes its locks); the revocation is sent again
//!    every `bast_timeout_ms`. A holder that stopped blocking anyone by then is re-armed (the
//!    next conflict sends a new BAST). A lock held until released (the top bit of its id:
//!    `mxfsctl lock`, which cannot downgrade a running command) gets BASTs as hints and is never
//!    revoked. Nothing is revoked while grants are held ([`Master::frozen`]): a holder that
//!    downgrades then is queued, not granted; its deadline is looked at again once grants
//!    resume.
//!
//! # Mastering, takeover and the rebuild of the lock table
//! The spec's single master: the lowest live node id masters every resource (finding it is the
//! shell's job; per-resource mastering by hash would be one [`Master`] per resource group).
//! Every master life starts with [`Input::Start`] and a **rebuild** ([`Phase::Rebuilding`]):
//! - A **survivor** of the previous master joins with the epoch it had there (NODE_JOIN with a
//!   non-zero header epoch), then *reclaims* each lock it holds with a LOCK_GRANT naming lock,
//!   resource, mode and old token, passes on every journal recovery it knows to be pending
//!   (JOURNAL_RECOVER), and ends its synchronisation with LEASE_RENEW. Each
//!   reclaim is answered by a LOCK_GRANT with a token of this master; one that conflicts with
//!   what is reclaimed already is denied `NotHeld` (the node reports the lock lost). The epoch
//!   is pushed above any survivor's epoch or token, so tokens keep growing over masters.
//! - A **new incarnation** (epoch 0) may have had a previous one holding locks at the previous
//!   master: its journal is claimed (JOURNAL_RECOVER to everyone, [`Effect::RunRecovery`]).
//!   The master's own previous incarnation is claimed at a fresh start
//!   (`Start { survivor: false }`); a survivor master reclaims its own locks like anyone.
//! - Nothing new is granted while rebuilding; requests queue (NOQUEUE ones are denied
//!   `WouldBlock`). The rebuild ends ([`Effect::RebuildDone`]) when every configured node
//!   joined and synced, or once `node_timeout_ms` passed and every joined node synced. Every
//!   node that did not join is then declared dead **with unknown locks**: a node whose locks
//!   are unknown (not joined, a claimed previous incarnation, a node that died before its sync
//!   was complete) blocks **every** grant until its recovery is done — only then is it sure
//!   that none of its resources goes to someone else before its journal is replayed.
//! - A master grants only with a **quorum**: a majority of the configured nodes alive, itself
//!   included ([`Master::frozen`]); so a master cut off with a minority stops granting.
//!   Requests wait and are served when the freeze ends.
//! - Outside a rebuild, a NODE_JOIN with an epoch from a node this master does not have alive
//!   is an incarnation that was declared dead: it is answered LEASE_EXPIRE (its locks are gone)
//!   and must join again with epoch 0.
//!
//! # Leases, death, fencing and recovery
//! - A node joins with NODE_JOIN; the master answers NODE_JOIN carrying, in the header, the
//!   epoch the node must stamp on everything it sends from then on (the master's current
//!   epoch). Its lease runs until `now + node_timeout_ms` and is extended by LEASE_RENEW,
//!   which is also its NODE_ALIVE (the spec's "piggybacked on lease renewal"), answered
//!   LEASE_ACK with the lease granted (`node_timeout_ms`) and the node's lock count here. A
//!   NODE_JOIN from a node thought alive with another epoch is a restarted node: its old
//!   incarnation is declared dead first.
//! - Every node, the master included, also tracks its peers' liveness from their renewals,
//!   which every node sends to every peer ([`Liveness`]: the spec's death sequence, steps 1 to
//!   3, in each node's own view). The master's leases are the authority: only the master acts on
//!   a death (steps 4 to 9 below), so that one node's view in a partition never fences anyone.
//! - The node death sequence at the master. Steps 1 and 2 (the renewals stop; the monitor
//!   sees it): nothing renews the lease and [`Master::next_deadline_ms`] asks for a tick when
//!   it ends. Then, at the start of **every** step, for each node whose lease expired at or
//!   before `now_ms`, in node order: 3, the node is declared dead (the epoch is bumped,
//!   [`Effect::PersistEpoch`], then [`Effect::NodeDead`]); 4, LEASE_EXPIRE is broadcast; 5,
//!   amended: its queued requests are purged but its granted locks are **fenced**, not
//!   released (kept in the table, still blocking others; the spec's purge would hand them out
//!   before the journal is replayed); 6, JOURNAL_RECOVER is broadcast (the master claims the
//!   journal slot). Step 7 is the shell's: [`Effect::RunRecovery`] runs the recovery.
//! - Step 8: when the recovery finishes ([`Input::RecoveryDone`], or a JOURNAL_DONE from a
//!   live node), JOURNAL_DONE is broadcast; step 9: the fenced locks are removed and the queues
//!   served. Only then can anyone be granted what the dead node held, and only then may it
//!   join again.
//! - NODE_LEAVE is the orderly way out: the node's locks are released without fencing.
//! - **Epochs are fencing tokens.** The epoch only grows; a message whose header epoch is older
//!   than the sender's current incarnation, or from a node that is dead or has not joined, is
//!   dropped with a reason ([`Effect::Drop`]; the shell closes that connection). Every grant
//!   carries a token `epoch << 32 | n`, strictly increasing over the master's life and, since
//!   the epoch is bumped and persisted at every start, over restarts too.
//!
//! # The shell contract, in order
//! 1. **Start.** Read the durable epoch `e` (0 if none; at a takeover the largest epoch seen
//!    from any master, if larger), build [`Master::new`] with it and step [`Input::Start`]: the
//!    master takes epoch `e + 1` and emits [`Effect::PersistEpoch`]. A survivor master then
//!    feeds its own reclaims, pending recoveries and a LEASE_RENEW as messages from itself.
//! 2. **One step at a time**, in arrival order, with a clock that does not go backwards (ms);
//!    [`Input::Tick`] at [`Master::next_deadline_ms`] at the latest.
//! 3. **Effects in order.** [`Effect::PersistEpoch`]: write the epoch durably (temporary file,
//!    fsync, rename, fsync the folder) **before** carrying out any later effect: no message with
//!    a new epoch leaves before the epoch is on disk. [`Effect::Send`]: stamp the header with
//!    the given epoch and send (a message to the master itself goes to its local clients; to a
//!    node that has not joined, back on the connection its message came on). When a node joins
//!    on a new connection, its previous connection is closed.
//!    [`Effect::RunRecovery`]: start the recovery; feed [`Input::RecoveryDone`] when it ends.
//!    [`Effect::Drop`]: log the reason and close the connection the message came on.
//!    The others are for the log.
//! 4. **Failure.** If persisting the epoch fails, stop: never send with an epoch not on disk.
//!
//! # Map
//! [`Config`], [`Input`], [`Effect`], [`DropReason`]: the boundary. `master`: [`Master`],
//! [`Phase`]. `liveness`: [`Liveness`], every node's renewals to its peers and its view of
//! theirs.

#![deny(missing_docs)]

mod liveness;
mod master;
#[cfg(test)]
mod tests;

pub use lava_dlm_ll::{DenyReason, Envelope, Epoch, LockId, LockMode, Message, NodeId, ResourceName};
pub use liveness::{Liveness, LivenessEffect, PeerState, PeerView};
pub use master::{HolderView, Master, NodeState, NodeView, Phase, ResourceView};

/// How long a node's lease lasts after a renewal, by default (the original's node timeout).
pub const NODE_TIMEOUT_MS_DEFAULT: u64 = 15_000;
/// How often every node sends LEASE_RENEW to every peer, by default (the original's).
pub const LEASE_RENEW_MS_DEFAULT: u64 = 2_000;
/// How long a holder has to downgrade or release after its BAST, by default (the original's
/// BAST response timeout).
pub const BAST_TIMEOUT_MS_DEFAULT: u64 = 10_000;

/// Whether a lock in mode `held` and one in mode `requested` may be held together.
pub fn compatible(held: LockMode, requested: LockMode) -> bool {
    use LockMode::*;
    match (held, requested) {
        (Nl, _) | (_, Nl) => true,
        (Cr, other) | (other, Cr) => other != Ex,
        (Cw, Cw) | (Pr, Pr) => true,
        _ => false,
    }
}

/// Whether converting from `from` to `to` only removes conflicts (a pure down-conversion).
pub fn is_down_conversion(from: LockMode, to: LockMode) -> bool {
    LockMode::ALL.into_iter().all(|other| !compatible(from, other) || compatible(to, other))
}

/// One configured node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    /// Its id.
    pub id: NodeId,
    /// Its host name.
    pub name: String,
    /// Its journal slot.
    pub slot: u32,
}

/// The master's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The master's own node id.
    pub me: NodeId,
    /// The master's DLM port (sent in NODE_JOIN answers).
    pub port: u16,
    /// Every configured node, the master included.
    pub nodes: Vec<NodeConfig>,
    /// A node whose lease is not renewed within this is declared dead; also the lease granted
    /// in LEASE_ACK.
    pub node_timeout_ms: u64,
    /// A revocable holder that neither converts nor releases within this after its BAST, while
    /// it still blocks a queued request, has its lock revoked (rule 6 of the crate doc).
    pub bast_timeout_ms: u64,
}

/// One input of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The first step: take a new epoch and rebuild the lock table. `survivor`: this host's
    /// node survived the previous master and reclaims its own locks (messages from itself:
    /// LOCK_GRANTs, then LEASE_RENEW); otherwise its own previous incarnation's journal is
    /// recovered first.
    Start {
        /// This host's node held locks under a previous master.
        survivor: bool,
    },
    /// A validated, authenticated message (the master's own local clients' requests come with
    /// the master's id and [`Master::epoch`]).
    Message(Envelope),
    /// Time passed.
    Tick,
    /// The recovery of `node`'s journal finished.
    RecoveryDone {
        /// The dead node.
        node: NodeId,
    },
}

/// Why a message was not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The sender is not a configured node.
    UnknownNode,
    /// The sender has not joined (or has left).
    NotJoined,
    /// The sender was declared dead and is fenced.
    Fenced,
    /// The sender's epoch is older than its current incarnation's.
    StaleEpoch {
        /// The header's epoch.
        got: Epoch,
        /// The sender's current epoch.
        current: Epoch,
    },
    /// The sender's epoch is newer than the master's: it talks to another master's life.
    FutureEpoch {
        /// The header's epoch.
        got: Epoch,
    },
    /// The target is neither the master nor broadcast.
    WrongTarget,
    /// A NODE_JOIN while the node's previous incarnation is still being recovered.
    RecoveryPending,
    /// A message only the master sends (GRANT, DENY, BAST, LEASE_ACK, ...).
    Unexpected,
    /// A release of a lock that is neither held nor queued.
    UnknownLock,
    /// A JOURNAL_DONE for a node that is not being recovered.
    NoRecoveryPending,
}

impl DropReason {
    /// A one-line description for the log.
    pub fn describe(&self) -> String {
        match self {
            DropReason::UnknownNode => "sender is not a configured node".to_owned(),
            DropReason::NotJoined => "sender has not joined".to_owned(),
            DropReason::Fenced => "sender was declared dead and is fenced".to_owned(),
            DropReason::StaleEpoch { got, current } => {
                format!("stale epoch {got}, sender's current is {current}")
            }
            DropReason::FutureEpoch { got } => format!("epoch {got} is newer than the master's"),
            DropReason::WrongTarget => "target is not this master".to_owned(),
            DropReason::RecoveryPending => "node's previous incarnation is being recovered".to_owned(),
            DropReason::Unexpected => "message type is not sent to a master".to_owned(),
            DropReason::UnknownLock => "lock is neither held nor queued".to_owned(),
            DropReason::NoRecoveryPending => "no recovery pending for that node".to_owned(),
        }
    }

    /// Whether the connection the message came on should be closed: everything but the
    /// benign races (a release crossing a grant, a late JOURNAL_DONE).
    pub fn closes_connection(&self) -> bool {
        !matches!(self, DropReason::UnknownLock | DropReason::NoRecoveryPending)
    }
}

/// One effect, to be carried out in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Make this epoch durable before anything that follows.
    PersistEpoch(Epoch),
    /// Send `message` to `to` with `epoch` in the header.
    Send {
        /// Destination.
        to: NodeId,
        /// Header epoch.
        epoch: Epoch,
        /// The message.
        message: Message,
    },
    /// Replay `node`'s journal in `slot`; feed [`Input::RecoveryDone`] when done.
    RunRecovery {
        /// The dead node.
        node: NodeId,
        /// Its journal slot.
        slot: u32,
    },
    /// A message from `from` was dropped.
    Drop {
        /// The sender.
        from: NodeId,
        /// Why.
        reason: DropReason,
    },
    /// `node` joined with `epoch`.
    NodeJoined {
        /// The node.
        node: NodeId,
        /// Its epoch.
        epoch: Epoch,
    },
    /// `node` was declared dead (lease expired or restarted).
    NodeDead {
        /// The node.
        node: NodeId,
    },
    /// `node`'s journal recovery finished: a dead node's locks are released; for a node alive
    /// again (its previous incarnation's journal was claimed) grants may resume.
    NodeRecovered {
        /// The node.
        node: NodeId,
    },
    /// The rebuild of the lock table ended; requests are served (once no recovery of a node
    /// with unknown locks is pending and a quorum is alive).
    RebuildDone,
    /// `node` left in order.
    NodeLeft {
        /// The node.
        node: NodeId,
    },
    /// `node`'s lock `lock` on `resource` was revoked: its BAST went unanswered for
    /// `bast_timeout_ms` while it blocked a queued request (the LOCK_DENY `Revoked` to the node
    /// follows). The lock stays, revoked, until the node releases it.
    Revoked {
        /// The holder's node.
        node: NodeId,
        /// Its lock.
        lock: LockId,
        /// The resource.
        resource: ResourceName,
    },
}
