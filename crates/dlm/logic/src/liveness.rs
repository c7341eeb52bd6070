//! [`Liveness`]: one node's lease renewals to its peers and its view of theirs.
//!
//! Every node, whatever its role, sends LEASE_RENEW to every other configured node every
//! `lease_renew_ms` (the spec: "sent to all peers at lease_renew_ms interval"); a renewal is
//! also the sender's NODE_ALIVE. Each node keeps, per peer, when it last heard a renewal from
//! it: the spec's node death sequence, steps 1 to 3, as this node sees it. A peer is
//! [`PeerState::Waiting`] until its first renewal, [`PeerState::Alive`] after one, and
//! [`PeerState::Dead`] once `node_timeout_ms` passed without one (since its last renewal, or
//! since this node started); its next renewal makes it alive again.
//!
//! This view decides nothing about locks: the master's leases ([`crate::Master`]) are the
//! authority, and only the master declares a death and carries out steps 4 to 9. Two nodes
//! acting on their own views across a partition would fence each other.
//!
//! Pure like the rest of the crate: time comes in as `now_ms` (a clock that does not go
//! backwards; an earlier time is taken as the latest seen), the effects go out in order.

use std::collections::BTreeMap;

use crate::NodeId;

/// A peer's liveness, as this node sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerState {
    /// No renewal heard since this node started (for less than the node timeout).
    Waiting,
    /// A renewal arrived less than the node timeout ago.
    Alive,
    /// No renewal for the node timeout: taken for dead, until its next renewal.
    Dead,
}

/// One peer in [`Liveness::peers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerView {
    /// The peer.
    pub id: NodeId,
    /// Its state.
    pub state: PeerState,
    /// When its last renewal arrived, if any did.
    pub last_renewal_ms: Option<u64>,
}

/// What the shell carries out, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LivenessEffect {
    /// Send LEASE_RENEW to `to` (on its connection to its master if `to` is that master, else
    /// on a connection to the peer), answered with LEASE_ACK.
    Renew {
        /// The peer.
        to: NodeId,
    },
    /// `node`'s first renewal after it was waited for or taken for dead.
    PeerAlive {
        /// The peer.
        node: NodeId,
    },
    /// `node` sent no renewal for the node timeout (step 3, in this node's view).
    PeerDead {
        /// The peer.
        node: NodeId,
        /// When its last renewal arrived (`None`: never since this node started).
        last_renewal_ms: Option<u64>,
    },
}

#[derive(Clone, Copy, Debug)]
struct Peer {
    state: PeerState,
    last_renewal_ms: Option<u64>,
    /// The last renewal, or this node's start: the node timeout runs from here.
    since_ms: u64,
}

/// One node's renewals to its peers and its view of their liveness; see the module doc.
#[derive(Clone, Debug)]
pub struct Liveness {
    node_timeout_ms: u64,
    lease_renew_ms: u64,
    now_ms: u64,
    next_renew_ms: u64,
    peers: BTreeMap<NodeId, Peer>,
}

impl Liveness {
    /// The view of node `me` among `nodes` (every configured node; `me` is left out), started
    /// at `now_ms`: the first renewals are due at once.
    pub fn new(
        me: NodeId,
        nodes: impl IntoIterator<Item = NodeId>,
        node_timeout_ms: u64,
        lease_renew_ms: u64,
        now_ms: u64,
    ) -> Liveness {
        let peers = nodes
            .into_iter()
            .filter(|id| *id != me)
            .map(|id| (id, Peer { state: PeerState::Waiting, last_renewal_ms: None, since_ms: now_ms }))
            .collect();
        Liveness { node_timeout_ms, lease_renew_ms, now_ms, next_renew_ms: now_ms, peers }
    }

    fn advance(&mut self, now_ms: u64) -> u64 {
        self.now_ms = self.now_ms.max(now_ms);
        self.now_ms
    }

    /// A LEASE_RENEW from `from` arrived (a node that is not a configured peer is ignored).
    pub fn renewal(&mut self, now_ms: u64, from: NodeId) -> Vec<LivenessEffect> {
        let now_ms = self.advance(now_ms);
        let Some(peer) = self.peers.get_mut(&from) else { return Vec::new() };
        let was = peer.state;
        *peer = Peer { state: PeerState::Alive, last_renewal_ms: Some(now_ms), since_ms: now_ms };
        if was == PeerState::Alive { Vec::new() } else { vec![LivenessEffect::PeerAlive { node: from }] }
    }

    /// Time passed: peers silent for the node timeout are taken for dead (in node order), then,
    /// when due, a renewal to every peer (in node order).
    pub fn tick(&mut self, now_ms: u64) -> Vec<LivenessEffect> {
        let now_ms = self.advance(now_ms);
        let mut out = Vec::new();
        for (id, peer) in &mut self.peers {
            if peer.state != PeerState::Dead && peer.since_ms.saturating_add(self.node_timeout_ms) <= now_ms {
                peer.state = PeerState::Dead;
                out.push(LivenessEffect::PeerDead { node: *id, last_renewal_ms: peer.last_renewal_ms });
            }
        }
        if self.next_renew_ms <= now_ms {
            self.next_renew_ms = now_ms.saturating_add(self.lease_renew_ms);
            out.extend(self.peers.keys().map(|to| LivenessEffect::Renew { to: *to }));
        }
        out
    }

    /// When [`Liveness::tick`] is due next: the next renewal, or the earliest time a peer not
    /// taken for dead would be.
    pub fn next_deadline_ms(&self) -> u64 {
        self.peers
            .values()
            .filter(|peer| peer.state != PeerState::Dead)
            .map(|peer| peer.since_ms.saturating_add(self.node_timeout_ms))
            .min()
            .unwrap_or(u64::MAX)
            .min(self.next_renew_ms)
    }

    /// Every peer, by id.
    pub fn peers(&self) -> Vec<PeerView> {
        self.peers
            .iter()
            .map(|(id, peer)| PeerView { id: *id, state: peer.state, last_renewal_ms: peer.last_renewal_ms })
            .collect()
    }

    /// The renewal interval.
    pub fn lease_renew_ms(&self) -> u64 {
        self.lease_renew_ms
    }

    /// The node timeout.
    pub fn node_timeout_ms(&self) -> u64 {
        self.node_timeout_ms
    }
}
