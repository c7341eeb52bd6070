//! [`Master`]: the lock table, the node table and the epoch, and [`Master::step`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::{
    Config, DenyReason, DropReason, Effect, Envelope, Epoch, Input, LockId, LockMode, Message, NodeId,
    ResourceName, compatible, is_down_conversion,
};

/// Who owns a lock: a node and that node's lock id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Owner {
    node: NodeId,
    lock: LockId,
}

#[derive(Clone, Debug)]
struct Holder {
    owner: Owner,
    mode: LockMode,
    token: u64,
    /// The node died; the lock stays until its recovery ends.
    fenced: bool,
    /// A BAST was sent for the mode held now.
    bast_sent: bool,
    /// A revocable holder told by a BAST: when it must have converted or released (rule 6);
    /// of a revoked one, when the revocation goes again.
    bast_deadline_ms: Option<u64>,
    /// Revoked (rule 6): kept, blocking, until its node releases it.
    revoked: bool,
}

impl Holder {
    fn new(owner: Owner, mode: LockMode, token: u64) -> Holder {
        Holder { owner, mode, token, fenced: false, bast_sent: false, bast_deadline_ms: None, revoked: false }
    }
}

#[derive(Clone, Debug)]
struct Request {
    owner: Owner,
    mode: LockMode,
}

#[derive(Clone, Debug, Default)]
struct Resource {
    granted: Vec<Holder>,
    converting: VecDeque<Request>,
    waiting: VecDeque<Request>,
}

impl Resource {
    fn is_empty(&self) -> bool {
        self.granted.is_empty() && self.converting.is_empty() && self.waiting.is_empty()
    }

    fn holder_idx(&self, owner: Owner) -> Option<usize> {
        self.granted.iter().position(|holder| holder.owner == owner)
    }

    /// Compatible with every holder but `except`.
    fn compatible_with_holders(&self, mode: LockMode, except: Option<Owner>) -> bool {
        self.granted
            .iter()
            .filter(|holder| Some(holder.owner) != except)
            .all(|holder| compatible(holder.mode, mode))
    }
}

/// Clears `holder`'s BAST deadline and its entry in the master's index of them.
fn forget_bast_deadline(
    index: &mut BTreeSet<(u64, ResourceName, Owner)>,
    name: &ResourceName,
    holder: &mut Holder,
) {
    if let Some(at) = holder.bast_deadline_ms.take() {
        index.remove(&(at, name.clone(), holder.owner));
    }
}

/// A node's membership state, as the master sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    /// Not joined (never, or left, or recovered after death).
    Absent,
    /// Joined; its lease runs until the given time.
    Alive {
        /// Absolute lease expiry (ms).
        lease_expires_at_ms: u64,
    },
    /// Declared dead; its locks are fenced until its recovery ends.
    Recovering,
}

#[derive(Clone, Debug)]
struct Node {
    name: String,
    slot: u32,
    state: NodeState,
    /// The epoch of its current (or last) incarnation.
    epoch: Epoch,
    /// Its lock-table synchronisation is complete (a survivor joining a rebuilding master is
    /// not synced until its first LEASE_RENEW after its reclaims).
    synced: bool,
    /// This master declared it dead since its last fresh join: an incarnation coming back
    /// with an epoch is a fenced one, not a survivor of the previous master.
    died_here: bool,
}

/// Where the master is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Just started: survivors join and reclaim the locks they hold; nothing new is granted.
    /// Ends when every configured node joined and synced, or at `until_ms` once every joined
    /// node synced.
    Rebuilding {
        /// The end of the rebuild window (start + node timeout).
        until_ms: u64,
    },
    /// The lock table is rebuilt; requests are granted (while [`Master::frozen`] is false).
    Serving,
}

/// A node in [`Master::nodes`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    /// Its id.
    pub id: NodeId,
    /// Its host name.
    pub name: String,
    /// Its state.
    pub state: NodeState,
    /// Its incarnation's epoch.
    pub epoch: Epoch,
    /// Locks it holds.
    pub n_locks: u32,
}

/// A holder or waiter in a [`ResourceView`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HolderView {
    /// Owning node.
    pub node: NodeId,
    /// Its lock id.
    pub lock: LockId,
    /// Mode held, or asked for.
    pub mode: LockMode,
    /// For a conversion: the mode asked for.
    pub converting_to: Option<LockMode>,
    /// Held by a dead node, awaiting recovery.
    pub fenced: bool,
    /// Revoked for an unanswered BAST, awaiting its node's release.
    pub revoked: bool,
}

/// One resource in [`Master::resources`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceView {
    /// The name.
    pub name: ResourceName,
    /// Holders, in grant order.
    pub granted: Vec<HolderView>,
    /// Waiters, in queue order.
    pub waiting: Vec<HolderView>,
}

/// The lock master; see the crate documentation.
#[derive(Clone, Debug)]
pub struct Master {
    config: Config,
    epoch: Epoch,
    /// Grants made in this epoch (the low half of the next token).
    n_grants: u32,
    now_ms: u64,
    nodes: BTreeMap<NodeId, Node>,
    resources: BTreeMap<ResourceName, Resource>,
    phase: Phase,
    /// Recoveries started and not yet finished, per node (a node can have two: the claim of its
    /// previous incarnation's journal and its own death).
    recoveries: BTreeMap<NodeId, u32>,
    /// Nodes whose locks this master cannot know (the previous master's, a fresh joiner's
    /// previous incarnation, a node that did not sync): while one is being recovered nothing
    /// new is granted anywhere.
    unknown: BTreeSet<NodeId>,
    /// Whether the last step ended frozen (to serve every queue when it thaws).
    was_frozen: bool,
    /// Every holder's BAST deadline, earliest first (kept with the holders' own, by
    /// `forget_bast_deadline` and at every change), so that neither a step nor
    /// [`Master::next_deadline_ms`] walks the table.
    bast_deadlines: BTreeSet<(u64, ResourceName, Owner)>,
}

impl Master {
    /// A master whose last durable epoch is `durable_epoch`; step [`Input::Start`] first.
    pub fn new(config: Config, durable_epoch: Epoch) -> Master {
        let nodes = config
            .nodes
            .iter()
            .map(|node| {
                (
                    node.id,
                    Node {
                        name: node.name.clone(),
                        slot: node.slot,
                        state: NodeState::Absent,
                        epoch: Epoch(0),
                        synced: false,
                        died_here: false,
                    },
                )
            })
            .collect();
        assert!(config.nodes.iter().any(|node| node.id == config.me), "the master is a configured node");
        Master {
            config,
            epoch: durable_epoch,
            n_grants: 0,
            now_ms: 0,
            nodes,
            resources: BTreeMap::new(),
            phase: Phase::Rebuilding { until_ms: 0 },
            recoveries: BTreeMap::new(),
            unknown: BTreeSet::new(),
            was_frozen: true,
            bast_deadlines: BTreeSet::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The current epoch.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The phase: rebuilding the lock table, or serving.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether nothing new is granted now: while rebuilding, while a node whose locks are
    /// unknown is being recovered, or without a quorum (a majority of the configured nodes
    /// alive, this master included).
    pub fn frozen(&self) -> bool {
        self.phase != Phase::Serving || !self.unknown.is_empty() || !self.has_quorum()
    }

    /// Whether a majority of the configured nodes is alive, this master included.
    pub fn has_quorum(&self) -> bool {
        let alive = self.nodes.values().filter(|node| matches!(node.state, NodeState::Alive { .. })).count();
        alive * 2 > self.nodes.len()
    }

    /// The earliest lease expiry, end of the rebuild window or BAST deadline (while grants are
    /// not held), when a [`Input::Tick`] is due (`u64::MAX`: none).
    pub fn next_deadline_ms(&self) -> u64 {
        let rebuild = match self.phase {
            // Once the window is over the rebuild ends with the last synchronisation, not a tick.
            Phase::Rebuilding { until_ms } if until_ms > self.now_ms => until_ms,
            _ => u64::MAX,
        };
        let bast = match self.bast_deadlines.first() {
            Some((at, ..)) if !self.frozen() => *at,
            _ => u64::MAX,
        };
        self.nodes
            .values()
            .filter_map(|node| match node.state {
                NodeState::Alive { lease_expires_at_ms } => Some(lease_expires_at_ms),
                _ => None,
            })
            .min()
            .unwrap_or(u64::MAX)
            .min(rebuild)
            .min(bast)
    }

    /// Every configured node.
    pub fn nodes(&self) -> Vec<NodeView> {
        self.nodes
            .iter()
            .map(|(id, node)| NodeView {
                id: *id,
                name: node.name.clone(),
                state: node.state,
                epoch: node.epoch,
                n_locks: self.n_locks(*id),
            })
            .collect()
    }

    /// Every resource with holders or waiters, by name.
    pub fn resources(&self) -> Vec<ResourceView> {
        self.resources
            .iter()
            .map(|(name, resource)| ResourceView {
                name: name.clone(),
                granted: resource
                    .granted
                    .iter()
                    .map(|holder| HolderView {
                        node: holder.owner.node,
                        lock: holder.owner.lock,
                        mode: holder.mode,
                        converting_to: resource
                            .converting
                            .iter()
                            .find(|request| request.owner == holder.owner)
                            .map(|request| request.mode),
                        fenced: holder.fenced,
                        revoked: holder.revoked,
                    })
                    .collect(),
                waiting: resource
                    .waiting
                    .iter()
                    .map(|request| HolderView {
                        node: request.owner.node,
                        lock: request.owner.lock,
                        mode: request.mode,
                        converting_to: None,
                        fenced: false,
                        revoked: false,
                    })
                    .collect(),
            })
            .collect()
    }

    fn n_locks(&self, node: NodeId) -> u32 {
        let n = self.resources.values().flat_map(|r| &r.granted).filter(|h| h.owner.node == node).count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Takes one input at `now_ms`; returns the effects in the order they must be carried out.
    pub fn step(&mut self, now_ms: u64, input: Input) -> Vec<Effect> {
        let mut out = Vec::new();
        self.now_ms = self.now_ms.max(now_ms);
        if let Input::Start { survivor } = input {
            self.bump_epoch(&mut out);
            let me = self.config.me;
            let node = self.nodes.get_mut(&me).expect("the master is configured");
            node.state = NodeState::Alive { lease_expires_at_ms: u64::MAX };
            node.epoch = self.epoch;
            node.synced = !survivor;
            self.phase =
                Phase::Rebuilding { until_ms: self.now_ms.saturating_add(self.config.node_timeout_ms) };
            if !survivor {
                self.claim(me, &mut out);
            }
            self.end_rebuild(&mut out);
            self.was_frozen = self.frozen();
            return out;
        }
        self.expire_leases(&mut out);
        self.expire_basts(&mut out);
        match input {
            Input::Start { .. } => unreachable!("handled above"),
            Input::Tick => {}
            Input::RecoveryDone { node } => self.recovery_done(node, &mut out),
            Input::Message(envelope) => self.message(envelope, &mut out),
        }
        self.end_rebuild(&mut out);
        let frozen = self.frozen();
        if self.was_frozen && !frozen {
            let names: Vec<ResourceName> = self.resources.keys().cloned().collect();
            for name in names {
                self.serve(&name, &mut out);
            }
        }
        self.was_frozen = frozen;
        out
    }

    /// Claims the journal of `node`'s previous incarnation, whose locks are unknown: nothing new
    /// is granted until its recovery is done.
    /// Every node is told, the claimed one included: survivors pass pending recoveries on
    /// to the next master.
    fn claim(&mut self, node: NodeId, out: &mut Vec<Effect>) {
        let slot = self.nodes[&node].slot;
        *self.recoveries.entry(node).or_default() += 1;
        self.unknown.insert(node);
        self.broadcast(out, self.config.me, &Message::JournalRecover { node, slot });
        out.push(Effect::RunRecovery { node, slot });
    }

    /// Ends the rebuild when every configured node joined and synced, or when the window is
    /// over and every joined node synced; then every node that did not join is declared dead
    /// with unknown locks (it may have held some at the previous master).
    fn end_rebuild(&mut self, out: &mut Vec<Effect>) {
        let Phase::Rebuilding { until_ms } = self.phase else { return };
        let alive = |node: &Node| matches!(node.state, NodeState::Alive { .. });
        if self.nodes.values().any(|node| alive(node) && !node.synced) {
            return;
        }
        let everyone = self.nodes.values().all(alive);
        if !everyone && self.now_ms < until_ms {
            return;
        }
        self.phase = Phase::Serving;
        out.push(Effect::RebuildDone);
        let absent: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|(_, node)| node.state == NodeState::Absent)
            .map(|(id, _)| *id)
            .collect();
        for node in absent {
            self.unknown.insert(node);
            self.declare_dead(node, out);
        }
    }

    fn bump_epoch(&mut self, out: &mut Vec<Effect>) {
        self.epoch = Epoch(self.epoch.0.checked_add(1).expect("an epoch does not reach 2^64"));
        self.n_grants = 0;
        out.push(Effect::PersistEpoch(self.epoch));
    }

    fn next_token(&mut self, out: &mut Vec<Effect>) -> u64 {
        if self.n_grants == u32::MAX {
            self.bump_epoch(out);
        }
        self.n_grants += 1;
        (self.epoch.0 << 32) | u64::from(self.n_grants)
    }

    fn send(&self, out: &mut Vec<Effect>, to: NodeId, message: Message) {
        out.push(Effect::Send { to, epoch: self.epoch, message });
    }

    /// Sends `message` to every live node but `except`.
    fn broadcast(&self, out: &mut Vec<Effect>, except: NodeId, message: &Message) {
        for (id, node) in &self.nodes {
            if *id != except && *id != self.config.me && matches!(node.state, NodeState::Alive { .. }) {
                self.send(out, *id, message.clone());
            }
        }
    }

    fn expire_leases(&mut self, out: &mut Vec<Effect>) {
        let expired: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|(_, node)| {
                matches!(node.state, NodeState::Alive { lease_expires_at_ms } if lease_expires_at_ms <= self.now_ms)
            })
            .map(|(id, _)| *id)
            .collect();
        for node in expired {
            self.declare_dead(node, out);
        }
    }

    /// Rule 6 of the crate doc, at the start of every step while grants are not held: a holder
    /// past its BAST deadline that still blocks a queued request is revoked; a revoked one is
    /// sent its revocation again; one that blocks nobody any more is re-armed.
    fn expire_basts(&mut self, out: &mut Vec<Effect>) {
        if self.frozen() {
            return;
        }
        let (now, timeout, epoch) = (self.now_ms, self.config.bast_timeout_ms, self.epoch);
        while let Some((at, name, owner)) = self.bast_deadlines.first().cloned()
            && at <= now
        {
            self.bast_deadlines.pop_first();
            let Some(resource) = self.resources.get_mut(&name) else { continue };
            let Some(idx) = resource.holder_idx(owner) else { continue };
            let blocking = resource.converting.iter().chain(&resource.waiting).any(|request| {
                request.owner != owner && !compatible(resource.granted[idx].mode, request.mode)
            });
            let holder = &mut resource.granted[idx];
            if holder.fenced || holder.bast_deadline_ms != Some(at) {
                continue;
            }
            if !holder.revoked && !blocking {
                holder.bast_deadline_ms = None;
                holder.bast_sent = false;
                continue;
            }
            if !holder.revoked {
                holder.revoked = true;
                out.push(Effect::Revoked { node: owner.node, lock: owner.lock, resource: name.clone() });
            }
            let again = now.saturating_add(timeout);
            holder.bast_deadline_ms = Some(again);
            let revocation = Message::Deny {
                lock: owner.lock,
                resource: name.clone(),
                mode: holder.mode,
                reason: DenyReason::Revoked,
            };
            out.push(Effect::Send { to: owner.node, epoch, message: revocation });
            self.bast_deadlines.insert((again, name, owner));
        }
    }

    /// The node death sequence of the spec (crate doc): step 3 (declared dead, the epoch bumped
    /// if it was alive),
    /// 4 (LEASE_EXPIRE to every live node), 5 as amended (queued requests purged, granted locks
    /// fenced, not released) and 6 (JOURNAL_RECOVER to every live node); step 7 is the shell's
    /// recovery ([`Effect::RunRecovery`]), 8 and 9 are `recovery_done`'s.
    fn declare_dead(&mut self, dead: NodeId, out: &mut Vec<Effect>) {
        assert_ne!(dead, self.config.me, "the master never declares itself dead");
        let node = self.nodes.get_mut(&dead).expect("a configured node");
        let was_alive = matches!(node.state, NodeState::Alive { .. });
        if was_alive && !node.synced {
            // It died before its reclaims were complete: it may have held more.
            self.unknown.insert(dead);
        }
        node.state = NodeState::Recovering;
        node.died_here = true;
        let slot = node.slot;
        *self.recoveries.entry(dead).or_default() += 1;
        if was_alive {
            self.bump_epoch(out);
        }
        out.push(Effect::NodeDead { node: dead });
        self.broadcast(out, dead, &Message::LeaseExpire { node: dead });
        let names: Vec<ResourceName> = self.resources.keys().cloned().collect();
        for name in names {
            let resource = self.resources.get_mut(&name).expect("listed above");
            resource.converting.retain(|request| request.owner.node != dead);
            resource.waiting.retain(|request| request.owner.node != dead);
            for holder in &mut resource.granted {
                if holder.owner.node == dead {
                    holder.fenced = true;
                    forget_bast_deadline(&mut self.bast_deadlines, &name, holder);
                }
            }
            self.serve(&name, out);
        }
        self.broadcast(out, dead, &Message::JournalRecover { node: dead, slot });
        out.push(Effect::RunRecovery { node: dead, slot });
    }

    /// One recovery of `dead` finished (step 8: JOURNAL_DONE to every live node); when it was
    /// the last one, its locks are released (step 9, a dead node) or grants may resume (a
    /// claimed previous incarnation).
    fn recovery_done(&mut self, dead: NodeId, out: &mut Vec<Effect>) {
        let Some(count) = self.recoveries.get_mut(&dead) else { return };
        *count -= 1;
        if *count > 0 {
            return;
        }
        self.recoveries.remove(&dead);
        self.unknown.remove(&dead);
        let node = self.nodes.get_mut(&dead).expect("a configured node");
        let slot = node.slot;
        let dead_node = node.state == NodeState::Recovering;
        if dead_node {
            node.state = NodeState::Absent;
        }
        self.broadcast(out, self.config.me, &Message::JournalDone { node: dead, slot });
        out.push(Effect::NodeRecovered { node: dead });
        if dead_node {
            self.remove_node_locks(dead, out);
        }
    }

    /// Removes every lock and request of `node` and serves the queues it was in.
    fn remove_node_locks(&mut self, node: NodeId, out: &mut Vec<Effect>) {
        let names: Vec<ResourceName> = self.resources.keys().cloned().collect();
        for name in names {
            let resource = self.resources.get_mut(&name).expect("listed above");
            for holder in resource.granted.iter_mut().filter(|holder| holder.owner.node == node) {
                forget_bast_deadline(&mut self.bast_deadlines, &name, holder);
            }
            resource.granted.retain(|holder| holder.owner.node != node);
            resource.converting.retain(|request| request.owner.node != node);
            resource.waiting.retain(|request| request.owner.node != node);
            self.serve(&name, out);
        }
    }

    fn drop(out: &mut Vec<Effect>, from: NodeId, reason: DropReason) {
        out.push(Effect::Drop { from, reason });
    }

    fn message(&mut self, envelope: Envelope, out: &mut Vec<Effect>) {
        let Envelope { sender, target, epoch, message, .. } = envelope;
        let Some(node) = self.nodes.get(&sender) else {
            return Self::drop(out, sender, DropReason::UnknownNode);
        };
        if target.is_some_and(|target| target != self.config.me) {
            return Self::drop(out, sender, DropReason::WrongTarget);
        }
        if let Message::NodeJoin { .. } = message {
            return self.join(sender, epoch, out);
        }
        match node.state {
            NodeState::Absent => return Self::drop(out, sender, DropReason::NotJoined),
            NodeState::Recovering => return Self::drop(out, sender, DropReason::Fenced),
            NodeState::Alive { .. } => {}
        }
        if epoch < node.epoch {
            return Self::drop(out, sender, DropReason::StaleEpoch { got: epoch, current: node.epoch });
        }
        if epoch > self.epoch {
            return Self::drop(out, sender, DropReason::FutureEpoch { got: epoch });
        }
        match message {
            Message::Lock { lock, resource, mode, noqueue, convert } => {
                let owner = Owner { node: sender, lock };
                if convert {
                    self.convert(owner, resource, mode, noqueue, out);
                } else {
                    self.lock(owner, resource, mode, noqueue, out);
                }
            }
            Message::Release { lock, resource } => self.release(Owner { node: sender, lock }, resource, out),
            Message::LeaseRenew { .. } => {
                // The first renewal after joining ends the node's synchronisation.
                self.nodes.get_mut(&sender).expect("checked above").synced = true;
                self.renew(sender);
                let ack = Message::LeaseAck {
                    duration_ms: self.config.node_timeout_ms,
                    lock_count: self.n_locks(sender),
                    node: sender,
                };
                self.send(out, sender, ack);
            }
            Message::NodeLeave { .. } => {
                self.nodes.get_mut(&sender).expect("checked above").state = NodeState::Absent;
                out.push(Effect::NodeLeft { node: sender });
                self.remove_node_locks(sender, out);
            }
            Message::JournalDone { node, .. } => {
                if let Some(count) = self.recoveries.get_mut(&node) {
                    *count = 1;
                    self.recovery_done(node, out);
                } else {
                    Self::drop(out, sender, DropReason::NoRecoveryPending);
                }
            }
            Message::CacheInval { resource, start, length } => {
                let holders: BTreeSet<NodeId> = self
                    .resources
                    .get(&resource)
                    .map(|r| r.granted.iter().filter(|h| !h.fenced).map(|h| h.owner.node).collect())
                    .unwrap_or_default();
                for node in holders.into_iter().filter(|node| *node != sender) {
                    self.send(out, node, Message::CacheInval { resource: resource.clone(), start, length });
                }
            }
            Message::NodeJoin { .. } => unreachable!("handled above"),
            Message::Grant { lock, resource, mode, token } => {
                self.reclaim(Owner { node: sender, lock }, resource, mode, token, out)
            }
            Message::JournalRecover { node, .. } => {
                // A survivor passes on a recovery it knows to be pending (or its own previous
                // incarnation's): while rebuilding it is claimed again; once serving every
                // node's history is known (whoever did not sync was recovered), so it is moot.
                let syncing = self.phase != Phase::Serving && !self.nodes[&sender].synced;
                if syncing && self.nodes.contains_key(&node) && !self.recoveries.contains_key(&node) {
                    self.claim(node, out);
                }
            }
            Message::Deny { .. }
            | Message::Bast { .. }
            | Message::LeaseAck { .. }
            | Message::LeaseExpire { .. } => Self::drop(out, sender, DropReason::Unexpected),
        }
    }

    /// Extends `node`'s lease.
    fn renew(&mut self, node: NodeId) {
        let expires = self.now_ms.saturating_add(self.config.node_timeout_ms);
        let entry = self.nodes.get_mut(&node).expect("a joined node");
        if node != self.config.me {
            entry.state = NodeState::Alive { lease_expires_at_ms: expires };
        }
    }

    fn join(&mut self, sender: NodeId, epoch: Epoch, out: &mut Vec<Effect>) {
        if sender == self.config.me {
            return Self::drop(out, sender, DropReason::Unexpected);
        }
        let node = self.nodes.get(&sender).expect("checked by the caller");
        let mut claim = false;
        match node.state {
            NodeState::Recovering => return Self::drop(out, sender, DropReason::RecoveryPending),
            // The same incarnation reconnecting: keep its locks.
            NodeState::Alive { .. } if epoch == node.epoch => {}
            NodeState::Alive { .. } => {
                // The live incarnation (if this join is a late one of an older incarnation) is
                // told it is fenced.
                self.send(out, sender, Message::LeaseExpire { node: sender });
                self.declare_dead(sender, out);
                return Self::drop(out, sender, DropReason::RecoveryPending);
            }
            NodeState::Absent if epoch != Epoch(0) && (self.phase == Phase::Serving || node.died_here) => {
                // An incarnation declared dead (here, or at the rebuild's end for not having
                // synced) comes back with its epoch: its locks are gone. It is told so, and
                // joins again as a new incarnation.
                self.send(out, sender, Message::LeaseExpire { node: sender });
                return Self::drop(out, sender, DropReason::Fenced);
            }
            NodeState::Absent => {
                let rebuilding = self.phase != Phase::Serving;
                if rebuilding && epoch >= self.epoch {
                    // A survivor of a master whose epoch went past ours: stay above it.
                    self.epoch = epoch;
                    self.bump_epoch(out);
                }
                let node = self.nodes.get_mut(&sender).expect("checked");
                node.epoch = self.epoch;
                node.synced = false;
                node.died_here = false;
                // A fresh incarnation: its previous one may have held locks at the previous
                // master; its journal is recovered before anything is granted.
                claim = rebuilding && epoch == Epoch(0);
            }
        }
        let serving = self.phase == Phase::Serving;
        let node = self.nodes.get_mut(&sender).expect("checked");
        if !matches!(node.state, NodeState::Alive { .. }) {
            // A survivor joining a rebuilding master reclaims its locks, then renews.
            node.synced = serving || epoch == Epoch(0);
        }
        self.renew(sender);
        let node = self.nodes.get(&sender).expect("checked");
        out.push(Effect::NodeJoined { node: sender, epoch: node.epoch });
        let me = &self.nodes[&self.config.me];
        let answer = Message::NodeJoin { name: me.name.clone(), port: self.config.port };
        out.push(Effect::Send { to: sender, epoch: node.epoch, message: answer });
        if claim {
            self.claim(sender, out);
        }
    }

    fn grant_message(owner: Owner, resource: &ResourceName, mode: LockMode, token: u64) -> Message {
        Message::Grant { lock: owner.lock, resource: resource.clone(), mode, token }
    }

    fn deny(
        &self,
        out: &mut Vec<Effect>,
        owner: Owner,
        resource: ResourceName,
        mode: LockMode,
        reason: DenyReason,
    ) {
        self.send(out, owner.node, Message::Deny { lock: owner.lock, resource, mode, reason });
    }

    fn lock(
        &mut self,
        owner: Owner,
        name: ResourceName,
        mode: LockMode,
        noqueue: bool,
        out: &mut Vec<Effect>,
    ) {
        let frozen = self.frozen();
        let resource = self.resources.entry(name.clone()).or_default();
        if let Some(idx) = resource.holder_idx(owner) {
            // A repeated request for a lock already granted in that mode: answer it again.
            let holder = &resource.granted[idx];
            if holder.revoked {
                let held = holder.mode;
                return self.deny(out, owner, name, held, DenyReason::Revoked);
            }
            if holder.mode == mode {
                let grant = Self::grant_message(owner, &name, mode, holder.token);
                return self.send(out, owner.node, grant);
            }
            return self.deny(out, owner, name, mode, DenyReason::Invalid);
        }
        if let Some(request) = resource.waiting.iter().find(|request| request.owner == owner) {
            // The same request again (asked again after a reconnection) waits where it is.
            if request.mode == mode {
                return;
            }
            return self.deny(out, owner, name, mode, DenyReason::Invalid);
        }
        let grantable = !frozen
            && resource.converting.is_empty()
            && resource.waiting.is_empty()
            && resource.compatible_with_holders(mode, None);
        if grantable {
            let token = self.next_token(out);
            let resource = self.resources.get_mut(&name).expect("entered above");
            resource.granted.push(Holder::new(owner, mode, token));
            let grant = Self::grant_message(owner, &name, mode, token);
            return self.send(out, owner.node, grant);
        }
        if noqueue {
            if resource.is_empty() {
                self.resources.remove(&name);
            }
            return self.deny(out, owner, name, mode, DenyReason::WouldBlock);
        }
        resource.waiting.push_back(Request { owner, mode });
        self.bast_blockers(&name, owner, mode, out);
    }

    fn convert(
        &mut self,
        owner: Owner,
        name: ResourceName,
        mode: LockMode,
        noqueue: bool,
        out: &mut Vec<Effect>,
    ) {
        let frozen = self.frozen();
        let Some(resource) = self.resources.get_mut(&name) else {
            return self.deny(out, owner, name, mode, DenyReason::NotHeld);
        };
        let Some(idx) = resource.holder_idx(owner) else {
            return self.deny(out, owner, name, mode, DenyReason::NotHeld);
        };
        if let Some(request) = resource.converting.iter().find(|request| request.owner == owner) {
            if request.mode == mode {
                return;
            }
            return self.deny(out, owner, name, mode, DenyReason::Invalid);
        }
        let held = resource.granted[idx].mode;
        if resource.granted[idx].revoked {
            // It crossed the revocation: the node releases the lock.
            return self.deny(out, owner, name, held, DenyReason::Revoked);
        }
        if held == mode {
            let grant = Self::grant_message(owner, &name, mode, resource.granted[idx].token);
            return self.send(out, owner.node, grant);
        }
        let grantable = !frozen
            && (is_down_conversion(held, mode)
                || (resource.converting.is_empty() && resource.compatible_with_holders(mode, Some(owner))));
        if grantable {
            self.grant_conversion(&name, idx, mode, out);
            return self.serve(&name, out);
        }
        if noqueue {
            return self.deny(out, owner, name, mode, DenyReason::WouldBlock);
        }
        let deadlock = resource.granted.iter().any(|holder| {
            holder.owner != owner
                && !compatible(holder.mode, mode)
                && resource.converting.iter().any(|request| request.owner == holder.owner)
        }) || resource.converting.iter().any(|request| !compatible(held, request.mode));
        if deadlock {
            return self.deny(out, owner, name, mode, DenyReason::Deadlock);
        }
        resource.converting.push_back(Request { owner, mode });
        self.bast_blockers(&name, owner, mode, out);
    }

    fn grant_conversion(&mut self, name: &ResourceName, idx: usize, mode: LockMode, out: &mut Vec<Effect>) {
        let token = self.next_token(out);
        let holder = &mut self.resources.get_mut(name).expect("the caller found it").granted[idx];
        holder.mode = mode;
        holder.token = token;
        holder.bast_sent = false;
        forget_bast_deadline(&mut self.bast_deadlines, name, holder);
        let grant = Self::grant_message(holder.owner, name, mode, token);
        let to = holder.owner.node;
        self.send(out, to, grant);
    }

    /// Lock-table synchronisation: a survivor of the previous master says it holds `owner` in
    /// `mode` with `token`. Accepted while the master rebuilds and the node has not finished
    /// its synchronisation, and if compatible with what is reclaimed already; it is answered
    /// with a grant carrying a token of this master. Otherwise it is denied `NotHeld`: the
    /// node tells its client the lock is lost.
    fn reclaim(
        &mut self,
        owner: Owner,
        name: ResourceName,
        mode: LockMode,
        token: u64,
        out: &mut Vec<Effect>,
    ) {
        let syncing = self.phase != Phase::Serving && !self.nodes[&owner.node].synced;
        let resource = self.resources.get(&name);
        if let Some(holder) = resource.and_then(|r| r.holder_idx(owner).map(|idx| &r.granted[idx]))
            && holder.mode == mode
            && !holder.revoked
        {
            // Reclaimed already: answer again.
            let grant = Self::grant_message(owner, &name, mode, holder.token);
            return self.send(out, owner.node, grant);
        }
        let fits = resource.is_none_or(|r| {
            r.holder_idx(owner).is_none()
                && r.waiting.iter().chain(&r.converting).all(|request| request.owner != owner)
                && r.compatible_with_holders(mode, None)
        });
        if !syncing || !fits {
            return self.deny(out, owner, name, mode, DenyReason::NotHeld);
        }
        let old_epoch = Epoch(token >> 32);
        if old_epoch >= self.epoch {
            // Tokens only grow: stay above the previous master's.
            self.epoch = old_epoch;
            self.bump_epoch(out);
        }
        let token = self.next_token(out);
        let resource = self.resources.entry(name.clone()).or_default();
        resource.granted.push(Holder::new(owner, mode, token));
        let grant = Self::grant_message(owner, &name, mode, token);
        self.send(out, owner.node, grant);
    }

    fn release(&mut self, owner: Owner, name: ResourceName, out: &mut Vec<Effect>) {
        let Some(resource) = self.resources.get_mut(&name) else {
            return Self::drop(out, owner.node, DropReason::UnknownLock);
        };
        let before = resource.granted.len() + resource.converting.len() + resource.waiting.len();
        if let Some(idx) = resource.holder_idx(owner) {
            forget_bast_deadline(&mut self.bast_deadlines, &name, &mut resource.granted[idx]);
        }
        resource.granted.retain(|holder| holder.owner != owner);
        resource.converting.retain(|request| request.owner != owner);
        resource.waiting.retain(|request| request.owner != owner);
        if before == resource.granted.len() + resource.converting.len() + resource.waiting.len() {
            return Self::drop(out, owner.node, DropReason::UnknownLock);
        }
        self.serve(&name, out);
    }

    /// Rule 3 of the crate doc: grants the heads of the queues while they fit.
    fn grant_heads(&mut self, name: &ResourceName, out: &mut Vec<Effect>) {
        loop {
            let resource = &self.resources[name];
            let Some(head) = resource.converting.front() else { break };
            if !resource.compatible_with_holders(head.mode, Some(head.owner)) {
                break;
            }
            let (owner, mode) = (head.owner, head.mode);
            let idx = resource.holder_idx(owner).expect("a conversion belongs to a holder");
            self.resources.get_mut(name).expect("present").converting.pop_front();
            self.grant_conversion(name, idx, mode, out);
        }
        loop {
            let resource = &self.resources[name];
            if !resource.converting.is_empty() {
                break;
            }
            let Some(head) = resource.waiting.front() else { break };
            if !resource.compatible_with_holders(head.mode, None) {
                break;
            }
            let (owner, mode) = (head.owner, head.mode);
            let token = self.next_token(out);
            let resource = self.resources.get_mut(name).expect("present");
            resource.waiting.pop_front();
            resource.granted.push(Holder::new(owner, mode, token));
            let grant = Self::grant_message(owner, name, mode, token);
            self.send(out, owner.node, grant);
        }
    }

    /// Rule 3 of the crate doc, then BASTs for the heads still blocked; forgets an empty resource.
    fn serve(&mut self, name: &ResourceName, out: &mut Vec<Effect>) {
        if !self.frozen() {
            self.grant_heads(name, out);
        }
        let resource = &self.resources[name];
        let heads: Vec<Request> =
            resource.converting.front().into_iter().chain(resource.waiting.front()).cloned().collect();
        for head in heads {
            self.bast_blockers(name, head.owner, head.mode, out);
        }
        if self.resources[name].is_empty() {
            self.resources.remove(name);
        }
    }

    /// Rule 5: a BAST to each live holder (not `waiter`) whose mode blocks `mode`, once per mode
    /// held; a revocable one must answer it within `bast_timeout_ms` (rule 6).
    fn bast_blockers(&mut self, name: &ResourceName, waiter: Owner, mode: LockMode, out: &mut Vec<Effect>) {
        let epoch = self.epoch;
        let deadline = self.now_ms.saturating_add(self.config.bast_timeout_ms);
        let resource = self.resources.get_mut(name).expect("the caller found it");
        for holder in &mut resource.granted {
            if holder.owner != waiter && !holder.fenced && !holder.bast_sent && !compatible(holder.mode, mode)
            {
                holder.bast_sent = true;
                if holder.owner.lock.revocable() {
                    holder.bast_deadline_ms = Some(deadline);
                    self.bast_deadlines.insert((deadline, name.clone(), holder.owner));
                }
                out.push(Effect::Send {
                    to: holder.owner.node,
                    epoch,
                    message: Message::Bast { lock: holder.owner.lock, resource: name.clone(), mode },
                });
            }
        }
    }

    /// Checks every invariant of the lock table; panics naming the first one broken.
    pub fn check_invariants(&self) {
        let deadlines: BTreeSet<(u64, ResourceName, Owner)> =
            self.resources
                .iter()
                .flat_map(|(name, resource)| {
                    resource.granted.iter().filter_map(|holder| {
                        holder.bast_deadline_ms.map(|at| (at, name.clone(), holder.owner))
                    })
                })
                .collect();
        assert_eq!(deadlines, self.bast_deadlines, "the index of BAST deadlines is not the holders'");
        for (name, holder) in
            self.resources.iter().flat_map(|(name, r)| r.granted.iter().map(move |h| (name, h)))
        {
            assert!(
                holder.owner.lock.revocable() || (!holder.revoked && holder.bast_deadline_ms.is_none()),
                "{name}: {:?} is held until released, yet revoked or given a BAST deadline",
                holder.owner
            );
            assert!(
                !holder.fenced || holder.bast_deadline_ms.is_none(),
                "{name}: a fenced holder has a BAST deadline"
            );
        }
        for (name, resource) in &self.resources {
            assert!(!resource.is_empty(), "{name}: an empty resource is forgotten");
            for (idx, a) in resource.granted.iter().enumerate() {
                for b in &resource.granted[idx + 1..] {
                    assert!(
                        compatible(a.mode, b.mode),
                        "{name}: incompatible holders {:?} {} and {:?} {}",
                        a.owner,
                        a.mode,
                        b.owner,
                        b.mode
                    );
                    assert_ne!(a.owner, b.owner, "{name}: one owner holds twice");
                }
                let state = self.nodes[&a.owner.node].state;
                assert!(
                    matches!(state, NodeState::Alive { .. }) || (a.fenced && state == NodeState::Recovering),
                    "{name}: {:?} is held by a node in state {state:?} (fenced: {})",
                    a.owner,
                    a.fenced
                );
                assert!(a.token >> 32 <= self.epoch.0, "{name}: a token from a future epoch");
            }
            for request in resource.converting.iter().chain(&resource.waiting) {
                assert!(
                    matches!(self.nodes[&request.owner.node].state, NodeState::Alive { .. }),
                    "{name}: {:?} queued for a node that is not alive",
                    request.owner
                );
            }
            for request in &resource.converting {
                assert!(
                    resource.holder_idx(request.owner).is_some(),
                    "{name}: a conversion without its lock"
                );
            }
            if self.frozen() {
                continue;
            }
            if let Some(head) = resource.converting.front() {
                assert!(
                    !resource.compatible_with_holders(head.mode, Some(head.owner)),
                    "{name}: the head conversion is grantable but waits"
                );
            } else if let Some(head) = resource.waiting.front() {
                assert!(
                    !resource.compatible_with_holders(head.mode, None),
                    "{name}: the head waiter is grantable but waits"
                );
            }
        }
    }
}
