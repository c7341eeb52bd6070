//! WorkerRegistry (spec section 2.3): when each worker was last heard from.
//! Soft state only — not in the WAL, the snapshot or the state hash; lost on
//! restart and rebuilt as workers call again. It never affects correctness;
//! the valid-lease counts it reports come from the durable store.

use std::collections::BTreeMap;

use lava_coord_ll::WorkerName;

/// Workers seen since start, by name, with their last contact.
#[derive(Clone, Debug, Default)]
pub(crate) struct WorkerRegistry {
    pub(crate) last_seen_ms: BTreeMap<WorkerName, u64>,
}

/// Workers remembered at most; beyond it the one heard from longest ago is forgotten.
pub(crate) const WORKERS_REMEMBERED_MAX: usize = 65_536;

impl WorkerRegistry {
    /// `worker` called at `now_ms`.
    pub(crate) fn seen(&mut self, worker: &WorkerName, now_ms: u64) {
        if let Some(last) = self.last_seen_ms.get_mut(worker) {
            *last = now_ms;
            return;
        }
        if self.last_seen_ms.len() >= WORKERS_REMEMBERED_MAX {
            let oldest = self
                .last_seen_ms
                .iter()
                .min_by_key(|(name, seen)| (**seen, (*name).clone()))
                .map(|(name, _)| name.clone());
            if let Some(oldest) = oldest {
                self.last_seen_ms.remove(&oldest);
            }
        }
        self.last_seen_ms.insert(worker.clone(), now_ms);
    }
}
