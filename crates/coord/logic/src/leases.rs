//! LeaseManager (spec section 2.2): pure decisions, no authority. It picks
//! the WAITING task to lease (FIFO by task id), checks the worker's advisory
//! capacity, computes lease expiries, and builds `LeaseGranted`,
//! `LeaseExtended` and the time-driven `LeaseExpired` events. It never changes
//! state: the machine applies what it returns through the store.

use lava_coord_ll::{Caller, LeaseId, TaskId, WorkerName};

use crate::config::CoordConfig;
use crate::event::Event;
use crate::tasks::{Store, TaskState};

/// The `LeaseGranted` for `worker`, or `None` when nothing is schedulable
/// (no WAITING task, or the worker already holds its advisory maximum).
pub(crate) fn grant(
    store: &Store,
    config: &CoordConfig,
    worker: &WorkerName,
    holder: &Caller,
    now_ms: u64,
) -> Option<Event> {
    let held = store.leases_by_worker.get(worker).copied().unwrap_or(0);
    if held >= config.leases_per_worker_max {
        return None;
    }
    let task = *store.waiting.first()?;
    let lease = LeaseId::new("lease_id", store.last_lease_id + 1).expect("last + 1 is never 0");
    Some(Event::LeaseGranted {
        task,
        lease,
        worker: worker.clone(),
        holder: holder.clone(),
        expires_at_ms: now_ms.saturating_add(config.lease_duration_ms),
    })
}

/// The `LeaseExtended` of a valid lease, never shortening it.
pub(crate) fn extend(
    config: &CoordConfig,
    task: TaskId,
    lease: LeaseId,
    old_expiry_ms: u64,
    now_ms: u64,
) -> Event {
    let expires_at_ms = now_ms.saturating_add(config.lease_duration_ms).max(old_expiry_ms);
    Event::LeaseExtended { task, lease, expires_at_ms }
}

/// The next lease whose expiry is at or before `now_ms`, as a `LeaseExpired`.
pub(crate) fn next_expired(store: &Store, now_ms: u64) -> Option<Event> {
    let (expires_at_ms, task) = *store.expiries.first()?;
    if expires_at_ms > now_ms {
        return None;
    }
    let Some(TaskState::Leased { lease, .. }) = store.tasks.get(&task).map(|t| &t.state) else {
        unreachable!("the expiry index holds only leased tasks (Store::check)");
    };
    Some(Event::LeaseExpired { task, lease: *lease, expires_at_ms })
}
