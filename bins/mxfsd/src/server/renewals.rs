//! Renewals to every peer ([`super`]'s module doc, "Renewals to every peer"): the
//! LEASE_RENEW this node sends on its master connection or on a peer link, the LEASE_ACK it
//! answers, and what lava-dlm-logic's [`Liveness`] says about each peer.

use super::*;

impl State {
    /// This node's LEASE_RENEW (also its NODE_ALIVE): its node timeout, its granted locks.
    pub(super) fn renewal(&self) -> Message {
        let lock_count = self.locks.values().filter(|lock| lock.token.is_some()).count() as u32;
        Message::LeaseRenew { duration_ms: self.settings.node_timeout_ms, lock_count, node: self.settings.me }
    }

    /// The LEASE_ACK of a renewal from `renewer` by a node that is not its master: the node
    /// timeout, and no locks of it here.
    pub(super) fn peer_ack(&self, renewer: NodeId) -> Message {
        Message::LeaseAck { duration_ms: self.settings.node_timeout_ms, lock_count: 0, node: renewer }
    }

    /// The epoch this node stamps on what it sends outside its master connection.
    pub(super) fn own_epoch(&self) -> Epoch {
        match (&self.master, &self.uplink) {
            (Some(master), _) => master.epoch(),
            (None, Some(Uplink { joined: Some(epoch), .. })) => *epoch,
            _ => self.prev_epoch,
        }
    }

    /// A LEASE_RENEW from `node` arrived.
    pub(super) fn heard_renewal(&mut self, node: NodeId) {
        let now_ms = self.now_ms();
        for effect in self.liveness.renewal(now_ms, node) {
            self.liveness_effect(effect);
        }
    }

    pub(super) fn liveness_effect(&mut self, effect: LivenessEffect) {
        match effect {
            LivenessEffect::Renew { to } => self.renew(to),
            LivenessEffect::PeerAlive { node } => {
                tracing::info!(%node, host = self.node_name(node), "peer renewals arrive: alive");
            }
            LivenessEffect::PeerDead { node, last_renewal_ms } => {
                let silent_ms = last_renewal_ms.map(|at| self.now_ms().saturating_sub(at));
                tracing::warn!(%node, host = self.node_name(node), ?silent_ms, "no renewal from this peer for the node timeout: taken for dead here (only the master declares a death)");
            }
        }
    }

    /// LEASE_RENEW to `to` (see the module doc): on the master connection if `to` is this
    /// node's master, else on a connection to `to` (a master's joined node, a peer link), else
    /// a peer link is opened (the renewal goes when it is up).
    pub(super) fn renew(&mut self, to: NodeId) {
        let renewal = self.renewal();
        if let Some(Uplink { joined: Some(epoch), tx: Some(_), node, .. }) = &self.uplink
            && *node == to
        {
            let epoch = *epoch;
            return self.send_uplink(epoch, renewal);
        }
        let joined_conn = self.master.as_ref().and(self.node_conns.get(&to).copied());
        let accepted_link =
            self.peers.iter().find(|(_, peer)| peer.link && peer.node == Some(to)).map(|(conn, _)| *conn);
        if let Some(conn) = joined_conn.filter(|conn| self.peers.contains_key(conn)).or(accepted_link) {
            let tx = self.peers[&conn].tx.clone();
            if !self.send_frame(&tx, to, self.own_epoch(), &renewal) {
                tracing::warn!(node = %to, "send queue full; connection closed");
                self.peers.remove(&conn);
                self.node_conns.retain(|_, c| *c != conn);
            }
            return;
        }
        match self.links.get(&to) {
            Some(PeerLink { tx: Some(tx), .. }) => {
                let tx = tx.clone();
                if !self.send_frame(&tx, to, self.own_epoch(), &renewal) {
                    tracing::warn!(node = %to, "send queue full; peer link closed");
                    self.links.remove(&to);
                }
            }
            Some(PeerLink { tx: None, .. }) => {}
            None => {
                let Some(addr) = self.settings.addrs.get(&to).copied().flatten() else { return };
                let conn = self.next_uplink_conn;
                self.next_uplink_conn += 2;
                self.links.insert(to, PeerLink { conn, tx: None });
                tokio::spawn(try_uplink(
                    Some(addr),
                    conn,
                    Arc::clone(&self.auth),
                    Arc::clone(&self.counters),
                    self.events.clone(),
                ));
            }
        }
    }

    /// A message on a peer link (this node's own, or one a peer opened): a LEASE_RENEW is
    /// recorded and answered with LEASE_ACK on the link, a LEASE_ACK is taken; anything else,
    /// or a sender other than the link's peer, closes the link.
    pub(super) fn on_peer_link_message(&mut self, conn: u64, envelope: Envelope) {
        let sender = envelope.sender;
        let own = self.link_node(conn);
        let bound = own.or_else(|| self.peers.get(&conn).and_then(|peer| peer.node));
        let fits = matches!(envelope.message, Message::LeaseRenew { .. } | Message::LeaseAck { .. });
        if bound.is_some_and(|node| node != sender) || !fits {
            self.counters.refused(Refusal::Stranger);
            tracing::info!(conn, %sender, message = envelope.message.to_wire().name(), "not a renewal of the link's peer; peer link closed");
            match own {
                Some(node) => {
                    self.links.remove(&node);
                }
                None => {
                    self.peers.remove(&conn);
                }
            }
            return;
        }
        if own.is_none()
            && let Some(peer) = self.peers.get_mut(&conn)
        {
            peer.node = Some(sender);
            peer.link = true;
        }
        if let Message::LeaseRenew { .. } = envelope.message {
            self.heard_renewal(sender);
            let ack = self.peer_ack(sender);
            let tx = match own {
                Some(node) => self.links.get(&node).and_then(|link| link.tx.clone()),
                None => self.peers.get(&conn).map(|peer| peer.tx.clone()),
            };
            if let Some(tx) = tx {
                let epoch = self.own_epoch();
                self.send_frame(&tx, sender, epoch, &ack);
            }
        }
    }
}
