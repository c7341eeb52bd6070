//! What `mxfsctl status` and `mxfsctl locks` show: the loop's state as text and as gauges.
//! Read-only views of [`State`]; nothing here changes it.

use super::*;

impl State {
    pub(super) fn status_text(&self) -> String {
        let mut out = String::new();
        match self.current_master() {
            Some(master) => {
                let _ = writeln!(out, "MASTER: {} (node {master})", self.node_name(master));
            }
            None => {
                let _ = writeln!(out, "MASTER: none (looking for it)");
            }
        }
        let _ = writeln!(out, "THIS NODE: {} (node {})", self.settings.my_name, self.settings.me);
        if let Some(logic) = &self.master {
            let phase = match (logic.phase(), logic.frozen()) {
                (Phase::Rebuilding { .. }, _) => "rebuilding the lock table",
                (Phase::Serving, true) => "serving, grants held (recovery pending or no quorum)",
                (Phase::Serving, false) => "serving",
            };
            let _ = writeln!(out, "EPOCH: {}", logic.epoch());
            let _ = writeln!(out, "STATE: {phase}");
            let _ = writeln!(out, "{:<6}{:<20}{:<12}{:<8}{:>6}", "NODE", "HOST", "STATUS", "EPOCH", "LOCKS");
            for node in logic.nodes() {
                let status = match node.state {
                    NodeState::Alive { .. } => "ok",
                    NodeState::Absent => "unavail",
                    NodeState::Recovering => "recovering",
                };
                let _ = writeln!(
                    out,
                    "{:<6}{:<20}{:<12}{:<8}{:>6}",
                    node.id.get(),
                    node.name,
                    status,
                    node.epoch.0,
                    node.n_locks
                );
            }
        } else {
            let link = match &self.uplink {
                Some(Uplink { joined: Some(epoch), .. }) => format!("joined, epoch {epoch}"),
                Some(Uplink { tx: Some(_), node, .. }) => {
                    format!("connected to {}, joining", self.node_name(*node))
                }
                _ => "not connected".to_owned(),
            };
            let _ = writeln!(out, "MASTER CONNECTION: {link}");
            let n_granted = self.locks.values().filter(|lock| lock.token.is_some()).count();
            let _ =
                writeln!(out, "LOCAL LOCKS: {n_granted} granted, {} waiting", self.locks.len() - n_granted);
            if let Some(master) = self.current_master() {
                let _ = writeln!(
                    out,
                    "(the node table is kept by the master: run mxfsctl status on {})",
                    self.node_name(master)
                );
            }
        }
        let now_ms = self.now_ms();
        let _ = writeln!(
            out,
            "PEERS: LEASE_RENEW every {} ms to each; one silent for {} ms is taken for dead here",
            self.liveness.lease_renew_ms(),
            self.liveness.node_timeout_ms()
        );
        let _ = writeln!(out, "{:<6}{:<20}{:<10}{:>14}", "PEER", "HOST", "LIVENESS", "LAST_RENEWAL");
        for peer in self.liveness.peers() {
            let state = match peer.state {
                PeerState::Waiting => "waiting",
                PeerState::Alive => "alive",
                PeerState::Dead => "dead",
            };
            let last = peer
                .last_renewal_ms
                .map_or_else(|| "never".to_owned(), |at| format!("{}ms_ago", now_ms.saturating_sub(at)));
            let _ =
                writeln!(out, "{:<6}{:<20}{:<10}{:>14}", peer.id.get(), self.node_name(peer.id), state, last);
        }
        let _ = writeln!(out, "Counters:");
        for (name, value) in self.counters.snapshot().into_iter().chain(self.gauges()) {
            let _ = writeln!(out, "{name} {value}");
        }
        out
    }

    /// What the status shows beside the counters: the state now (see docs/mxfsd.md). The lock
    /// table is asked of the logic (read-only views) on the master.
    pub(super) fn gauges(&self) -> Vec<(String, u64)> {
        let mut all: Vec<(String, u64)> = Vec::new();
        let mut put = |name: &str, value: u64| all.push((name.to_owned(), value));
        let epoch = match (&self.master, &self.uplink) {
            (Some(logic), _) => logic.epoch().0,
            (None, Some(Uplink { joined: Some(epoch), .. })) => epoch.0,
            _ => 0,
        };
        put("epoch", epoch);
        put("is_master", u64::from(self.is_master()));
        let peers = self.liveness.peers();
        let count = |state: PeerState| peers.iter().filter(|peer| peer.state == state).count() as u64;
        put("peers.alive", count(PeerState::Alive));
        put("peers.dead", count(PeerState::Dead));
        if let Some(logic) = &self.master {
            let resources = logic.resources();
            let mut by_mode = [0u64; LockMode::ALL.len()];
            let (mut granted, mut waiting, mut converting, mut fenced) = (0u64, 0u64, 0u64, 0u64);
            let mut revoked = 0u64;
            for resource in &resources {
                for holder in &resource.granted {
                    granted += 1;
                    converting += u64::from(holder.converting_to.is_some());
                    fenced += u64::from(holder.fenced);
                    revoked += u64::from(holder.revoked);
                    if let Some(idx) = LockMode::ALL.iter().position(|mode| *mode == holder.mode) {
                        by_mode[idx] += 1;
                    }
                }
                waiting += resource.waiting.len() as u64;
            }
            put("table.resources", resources.len() as u64);
            put("table.granted", granted);
            put("table.waiting", waiting);
            put("table.converting", converting);
            put("table.fenced", fenced);
            put("table.revoked", revoked);
            for (mode, count) in LockMode::ALL.iter().zip(by_mode) {
                put(&format!("table.granted.{}", mode.name()), count);
            }
            let nodes = logic.nodes();
            let count = |f: fn(&NodeState) -> bool| nodes.iter().filter(|node| f(&node.state)).count() as u64;
            put("nodes.alive", count(|state| matches!(state, NodeState::Alive { .. })));
            put("nodes.recovering", count(|state| matches!(state, NodeState::Recovering)));
            put("nodes.absent", count(|state| matches!(state, NodeState::Absent)));
            put("recoveries.pending", count(|state| matches!(state, NodeState::Recovering)));
        } else {
            put("recoveries.pending", self.recoveries.len() as u64);
        }
        let local_granted = self.locks.values().filter(|lock| lock.token.is_some()).count() as u64;
        put("local.granted", local_granted);
        put("local.waiting", self.locks.len() as u64 - local_granted);
        put("clients.connected", self.clients.len() as u64);
        put("peers.connected", self.peers.len() as u64);
        put("queue.master_inbox", self.master_inbox.len() as u64);
        put("queue.local_inbox", self.local_inbox.len() as u64);
        put("queue.backlog", self.backlog.len() as u64);
        put("queue.renews_in_flight", self.renews_in_flight.len() as u64);
        put("queue.releases_unconfirmed", self.released.len() as u64);
        all
    }

    pub(super) fn locks_text(&self, only: Option<&str>) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{:<24}{:<6}{:<22}{:<6}STATE", "RESOURCE", "NODE", "LOCK", "MODE");
        if let Some(logic) = &self.master {
            for resource in logic.resources() {
                if only.is_some_and(|name| name != resource.name.as_str()) {
                    continue;
                }
                for holder in &resource.granted {
                    let state = match (holder.fenced, holder.converting_to) {
                        (true, _) => "fenced".to_owned(),
                        (false, _) if holder.revoked => "revoked".to_owned(),
                        (false, Some(to)) => format!("converting->{to}"),
                        (false, None) => "granted".to_owned(),
                    };
                    let _ = writeln!(
                        out,
                        "{:<24}{:<6}{:<22}{:<6}{state}",
                        resource.name,
                        holder.node.get(),
                        holder.lock.0,
                        holder.mode
                    );
                }
                for waiter in &resource.waiting {
                    let _ = writeln!(
                        out,
                        "{:<24}{:<6}{:<22}{:<6}waiting",
                        resource.name,
                        waiter.node.get(),
                        waiter.lock.0,
                        waiter.mode
                    );
                }
            }
        } else {
            for (id, lock) in &self.locks {
                if only.is_some_and(|name| name != lock.resource.as_str()) {
                    continue;
                }
                let state = match (lock.token, &lock.pending) {
                    (Some(_), Some(_)) => "converting",
                    (Some(_), None) => "granted",
                    (None, _) => "waiting",
                };
                let uid = self.clients.get(&lock.client).map_or(0, |c| c.uid);
                let _ = writeln!(
                    out,
                    "{:<24}{:<6}{:<22}{:<6}{state} (uid {uid})",
                    lock.resource,
                    self.settings.me.get(),
                    id,
                    lock.mode
                );
            }
            let master = self.current_master().map_or("(none yet)", |master| self.node_name(master));
            let _ = writeln!(out, "(this node's locks only; the whole table is on the master {master})");
        }
        out
    }
}
