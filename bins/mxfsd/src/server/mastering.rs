//! Finding, becoming and leaving the master (docs/protocols/dlm.md, "Mastering and
//! joining"; the rules are in [`super`]'s module doc): the search for the lowest live node,
//! a master life started, restarted after a lost quorum or given up for a lower node, a join
//! completed with the reclaims, and a master lost or a node fenced out.

use super::*;

impl State {
    /// Tries the next candidate below this node; when none is left, this node is the master.
    pub(super) fn seek_master(&mut self, now_ms: u64) -> anyhow::Result<()> {
        let me = self.settings.me;
        self.unresponsive.retain(|_, until| *until > now_ms);
        let candidate = self
            .settings
            .nodes
            .iter()
            .map(|node| node.id)
            .filter(|id| *id >= self.candidate && *id < me && !self.unresponsive.contains_key(id))
            .min();
        let Some(node) = candidate else {
            if !self.is_master() {
                self.become_master()?;
            }
            self.candidate = self.lowest();
            self.next_attempt_ms = now_ms + PROBE_INTERVAL_MS;
            return Ok(());
        };
        self.candidate = node;
        let conn = self.next_uplink_conn;
        self.next_uplink_conn += 2;
        self.uplink = Some(Uplink {
            conn,
            node,
            tx: None,
            joined: None,
            master_epoch_seen: Epoch(0),
            join_sent_ms: now_ms,
            last_heard_ms: now_ms,
        });
        let addr = self.settings.addrs.get(&node).copied().flatten();
        tracing::debug!(%node, ?addr, "trying a master");
        tokio::spawn(try_uplink(
            addr,
            conn,
            Arc::clone(&self.auth),
            Arc::clone(&self.counters),
            self.events.clone(),
        ));
        Ok(())
    }

    /// Forgets the uplink (closing it) and looks again from the lowest node at `at_ms`.
    pub(super) fn drop_uplink(&mut self, at_ms: u64) {
        self.uplink = None;
        self.candidate = self.lowest();
        self.next_attempt_ms = at_ms;
    }

    /// Every lower node is down: this node is the master, above every epoch it saw. A node
    /// that held locks under a previous master (a survivor) reclaims them from itself first.
    pub(super) fn become_master(&mut self) -> anyhow::Result<()> {
        let durable =
            epoch_file::load(&self.settings.epoch_path)?.max(self.max_epoch_seen).max(self.prev_epoch);
        let survivor = self.prev_epoch != Epoch(0);
        let config = Config {
            me: self.settings.me,
            port: self.settings.listen_addr.port(),
            nodes: self.settings.nodes.clone(),
            node_timeout_ms: self.settings.node_timeout_ms,
            bast_timeout_ms: self.settings.bast_timeout_ms,
        };
        let mut master = Master::new(config, durable);
        let effects = master.step(self.now_ms(), Input::Start { survivor });
        let epoch = master.epoch();
        self.master = Some(master);
        self.carry_out(None, effects)?;
        tracing::warn!(%epoch, survivor, n_locks = self.locks.len(), "this node is the lock master now; rebuilding the lock table");
        self.backlog.clear();
        let mut sync = Vec::new();
        if survivor {
            for (id, lock) in &self.locks {
                if let Some(token) = lock.token {
                    self.reclaiming.insert(*id);
                    let mode = lock.reclaim_mode();
                    sync.push(Message::Grant {
                        lock: LockId(*id),
                        resource: lock.resource.clone(),
                        mode,
                        token,
                    });
                }
            }
            for node in &self.recoveries {
                let slot = self.settings.nodes.iter().find(|n| n.id == *node).map_or(0, |n| n.slot);
                sync.push(Message::JournalRecover { node: *node, slot });
            }
            sync.push(self.renewal());
        }
        self.prev_epoch = epoch;
        self.synced_epoch = Some(epoch);
        self.recoveries.clear();
        self.released.clear();
        for message in sync {
            self.send_to_master(message);
        }
        self.resend_pending();
        Ok(())
    }

    /// Drops this master's stale table (its connections close, its own locks are lost) and
    /// looks for the master again — usually finding none lower, so it starts a new one.
    pub(super) fn restart_master(&mut self) {
        self.master = None;
        self.master_inbox.clear();
        self.peers.retain(|_, peer| peer.link);
        self.node_conns.clear();
        self.fence_out("a newer master ran while this one was cut off");
        self.synced_epoch = None;
        self.drop_uplink(0);
    }

    /// A lower node answered as master: this master steps down and joins it as a survivor.
    pub(super) fn step_down(&mut self) {
        let Some(master) = self.master.take() else { return };
        tracing::warn!(epoch = %master.epoch(), "a lower node is the lock master; stepping down");
        self.master_inbox.clear();
        // Closing every daemon connection sends the other nodes looking for the master again
        // (peer links stay: they carry renewals only).
        self.peers.retain(|_, peer| peer.link);
        self.node_conns.clear();
        self.synced_epoch = None;
        // Its own locks were valid up to now (it was their master): they are reclaimed.
        self.lease_until_ms = self.now_ms() + self.settings.node_timeout_ms;
        // Its requests went to its own master, which is gone: they are asked again after the
        // join, as after losing any master (found by tests/crash_points.rs: a locker of a
        // node that stepped down waited for ever).
        self.forget_master_state();
    }

    /// The master's NODE_JOIN answer (see the module doc for what follows it).
    pub(super) fn joined(&mut self, epoch: Epoch) {
        let now_ms = self.now_ms();
        let before = self.prev_epoch;
        if before != Epoch(0) && now_ms >= self.lease_until_ms {
            self.fence_out("the lease ran out while joining");
        }
        let Some(uplink) = self.uplink.as_mut() else { return };
        uplink.joined = Some(epoch);
        let (master, join_sent_ms) = (uplink.node, uplink.join_sent_ms);
        self.lease_until_ms = self.lease_until_ms.max(join_sent_ms + self.settings.node_timeout_ms);
        let new_master = before != epoch || self.synced_epoch != Some(epoch);
        self.prev_epoch = epoch;
        if before == Epoch(0) {
            // A new incarnation reclaims nothing; its previous one's journal may need a
            // recovery until a JOURNAL_DONE says otherwise.
            self.synced_epoch = Some(epoch);
            self.recoveries.insert(self.settings.me);
        }
        tracing::info!(%master, %epoch, previous = %before, "joined the lock master");
        let mut out = Vec::new();
        if new_master && before != Epoch(0) {
            for (id, lock) in &self.locks {
                if let Some(token) = lock.token {
                    self.reclaiming.insert(*id);
                    let mode = lock.reclaim_mode();
                    out.push(Message::Grant {
                        lock: LockId(*id),
                        resource: lock.resource.clone(),
                        mode,
                        token,
                    });
                }
            }
            let lock_count = out.len() as u32;
            for node in &self.recoveries {
                let slot = self.settings.nodes.iter().find(|n| n.id == *node).map_or(0, |n| n.slot);
                out.push(Message::JournalRecover { node: *node, slot });
            }
            tracing::info!(n_locks = lock_count, "reclaiming locks from the new master");
            out.push(self.renewal());
            self.sync_pending = true;
        }
        let released = std::mem::take(&mut self.released);
        out.extend(std::mem::take(&mut self.backlog));
        for message in out {
            self.send_to_master(message);
        }
        for (_, lock, resource) in released {
            self.release(lock, resource);
        }
        self.resend_pending();
    }

    /// The master connection is gone: the locks are kept for the next master; requests are
    /// asked again after the next join; the search for the master starts at once.
    pub(super) fn lose_master(&mut self, why: &str) {
        tracing::warn!(why, n_locks = self.locks.len(), "lost the lock master; looking for it");
        self.drop_uplink(0);
        self.forget_master_state();
    }

    /// What was on its way to a master that is gone: nothing is sent from the backlog, no
    /// reclaim is awaited, and every pending request is asked again after the next join.
    pub(super) fn forget_master_state(&mut self) {
        self.backlog.clear();
        self.reclaiming.clear();
        for lock in self.locks.values_mut() {
            if let Some(pending) = &mut lock.pending {
                pending.resend = true;
            }
        }
    }

    /// This node is (or may be) declared dead: every local lock is lost and the next join is a
    /// new incarnation, whose previous journal the next master is told to recover.
    pub(super) fn fence_out(&mut self, why: &str) {
        tracing::warn!(why, n_locks = self.locks.len(), "this node is fenced; its locks are lost");
        self.prev_epoch = Epoch(0);
        self.recoveries.insert(self.settings.me);
        self.backlog.clear();
        self.reclaiming.clear();
        let now_ms = self.now_ms();
        for (id, lock) in std::mem::take(&mut self.locks) {
            let reply = if lock.pending.is_some() {
                Reply::Error { code: ErrorCode::Lost, message: format!("lock lost: {why}") }
            } else {
                Reply::Lost { handle: id }
            };
            self.reply(lock.client, reply);
            // Whatever of it reached a master goes after the next join.
            self.released.push((now_ms, id, lock.resource));
        }
    }
}
