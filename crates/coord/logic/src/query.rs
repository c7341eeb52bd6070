//! Read-only answers for operators: one task, counts by state, workers, valid
//! leases, and the figures the shell's status shows. They append nothing and change nothing.

use lava_coord_ll::TaskId;
use lava_coord_wire::{self as wire, Reply, task_state};

use crate::machine::{Coord, unknown_task};
use crate::tasks::TaskState;

/// Most entries one WORKERS or LEASES answer lists (the frame bound).
pub(crate) const LISTED_MAX: usize = 10_000;

impl Coord {
    /// Tasks by state, indexed by the `task_state` values (WAITING, LEASED, COMPLETED,
    /// FAILED): for the shell's counters.
    pub fn task_counts(&self) -> [u64; 4] {
        self.store().counts
    }

    /// Leases valid now (not yet expired, completed or failed).
    pub fn n_valid_leases(&self) -> usize {
        self.store().expiries.len()
    }

    /// Workers known: heard from since start (soft state), or holding a valid lease.
    pub fn n_workers_known(&self) -> usize {
        let heard = &self.workers().last_seen_ms;
        heard.len() + self.store().leases_by_worker.keys().filter(|name| !heard.contains_key(*name)).count()
    }

    pub(crate) fn query_task(&self, id: TaskId) -> Reply {
        let Some(task) = self.store().tasks.get(&id) else {
            return unknown_task(id);
        };
        let (lease_id, worker, holder, expires_at_ms) = match &task.state {
            TaskState::Waiting => (0, String::new(), String::new(), 0),
            TaskState::Leased { lease, worker, holder, expires_at_ms } => {
                (lease.get(), worker.to_string(), holder.user.to_string(), *expires_at_ms)
            }
            TaskState::Finished { lease, worker, holder, .. } => {
                (lease.get(), worker.to_string(), holder.user.to_string(), 0)
            }
        };
        Reply::Task(wire::TaskQueryReply {
            task: wire::TaskInfo {
                task_id: id.get(),
                state: task.state.code(),
                lease_id,
                worker,
                expires_at_ms,
                n_leases: task.n_leases,
                n_refused: task.n_refused,
                payload_bytes: u32::try_from(task.payload.len()).unwrap_or(u32::MAX),
                owner: task.owner.user.to_string(),
                owner_uid: task.owner.uid,
                holder,
            },
        })
    }

    pub(crate) fn query_counts(&self) -> Reply {
        let counts = &self.store().counts;
        Reply::Counts(wire::CountsReply {
            waiting: counts[task_state::WAITING as usize],
            leased: counts[task_state::LEASED as usize],
            completed: counts[task_state::COMPLETED as usize],
            failed: counts[task_state::FAILED as usize],
        })
    }

    pub(crate) fn query_workers(&self) -> Reply {
        let store = self.store();
        let mut names: Vec<_> = self.workers().last_seen_ms.keys().cloned().collect();
        names.extend(store.leases_by_worker.keys().cloned());
        names.sort();
        names.dedup();
        let workers = names
            .into_iter()
            .take(LISTED_MAX)
            .map(|name| wire::WorkerInfo {
                last_seen_ms: self.workers().last_seen_ms.get(&name).copied().unwrap_or(0),
                n_leases: store.leases_by_worker.get(&name).copied().unwrap_or(0),
                name: name.to_string(),
            })
            .collect();
        Reply::Workers(wire::WorkersReply { workers })
    }

    pub(crate) fn query_leases(&self) -> Reply {
        let store = self.store();
        let mut leases: Vec<wire::LeaseInfo> = store
            .expiries
            .iter()
            .filter_map(|(_, id)| match &store.tasks[id].state {
                TaskState::Leased { lease, worker, holder, expires_at_ms } => Some(wire::LeaseInfo {
                    task_id: id.get(),
                    lease_id: lease.get(),
                    worker: worker.to_string(),
                    user: holder.user.to_string(),
                    expires_at_ms: *expires_at_ms,
                }),
                _ => None,
            })
            .collect();
        leases.sort_by_key(|lease| lease.task_id);
        leases.truncate(LISTED_MAX);
        Reply::Leases(wire::LeasesReply { leases })
    }
}
