//! TaskManager (spec section 2.1): validates submissions, builds
//! `TaskCreated`, and owns the durable store, whose [`Store::apply`] is the
//! only code that changes task or lease state — used by live steps and by
//! replay alike.
//!
//! The store holds the tasks by id and indexes derived from them (WAITING in
//! id order, valid leases by expiry, valid leases per worker, counts by
//! state). Only the tasks and the two id counters are durable; the indexes
//! are rebuilt from them by [`Store::from_snapshot`] and checked by
//! [`Store::check`].

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use lava_coord_ll::{Caller, LeaseId, Outcome, Payload, SubmissionId, TaskId, WorkerName};
use lava_coord_wire::{self as wire, task_state};
use serde::{Deserialize, Serialize};

use crate::ApplyError;
use crate::event::Event;
use crate::submissions::{Bounds, Submission, Window};

/// A task's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaskState {
    /// Waiting for a worker.
    Waiting,
    /// Held under one valid lease.
    Leased {
        /// The valid lease.
        lease: LeaseId,
        /// Its worker.
        worker: WorkerName,
        /// The user it was granted to.
        holder: Caller,
        /// Its absolute expiry.
        expires_at_ms: u64,
    },
    /// Ended by the holder of `lease` (terminal).
    Finished {
        /// The lease it ended under.
        lease: LeaseId,
        /// That lease's worker.
        worker: WorkerName,
        /// The user that lease was granted to.
        holder: Caller,
        /// Completed or failed.
        outcome: Outcome,
    },
}

impl TaskState {
    /// The wire value of the state ([`task_state`]).
    pub fn code(&self) -> u32 {
        match self {
            TaskState::Waiting => task_state::WAITING,
            TaskState::Leased { .. } => task_state::LEASED,
            TaskState::Finished { outcome: Outcome::Completed, .. } => task_state::COMPLETED,
            TaskState::Finished { outcome: Outcome::Failed, .. } => task_state::FAILED,
        }
    }
}

/// One task, as the WAL made it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Task {
    /// Its id.
    pub id: TaskId,
    /// Its payload.
    pub payload: Payload,
    /// When it was submitted.
    pub created_at_ms: u64,
    /// Who submitted it.
    pub owner: Caller,
    /// Its state.
    pub state: TaskState,
    /// Leases granted on it.
    pub n_leases: u32,
    /// Completions and failures refused on it (`TaskCancelled`).
    pub n_refused: u32,
}

/// The durable state, as a snapshot file holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordSnapshot {
    /// The highest task id given (0: none).
    pub last_task_id: u64,
    /// The highest lease id given (0: none).
    pub last_lease_id: u64,
    /// Every task, by id.
    pub tasks: Vec<Task>,
    /// The submission window: the pairs held, oldest first (added 2026-11-28; a snapshot
    /// written before has none, and the shell reads it as empty).
    pub submissions: Vec<Submission>,
}

/// Every task, by id. Ids are dense (1, 2, 3, … and tasks are never
/// removed), so task `n` sits at index `n - 1`: a lookup is an index, not a
/// tree walk — which matters with millions of tasks, live and at replay.
#[derive(Clone, Debug, Default)]
pub(crate) struct TaskTable(Vec<Task>);

impl TaskTable {
    fn index(id: TaskId) -> usize {
        usize::try_from(id.get() - 1).unwrap_or(usize::MAX)
    }

    pub(crate) fn get(&self, id: &TaskId) -> Option<&Task> {
        self.0.get(TaskTable::index(*id))
    }

    pub(crate) fn get_mut(&mut self, id: &TaskId) -> Option<&mut Task> {
        self.0.get_mut(TaskTable::index(*id))
    }

    pub(crate) fn contains_key(&self, id: &TaskId) -> bool {
        TaskTable::index(*id) < self.0.len()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The tasks in id order.
    pub(crate) fn values(&self) -> std::slice::Iter<'_, Task> {
        self.0.iter()
    }

    /// Adds the task whose id is the next one; false (and nothing added) otherwise.
    fn push(&mut self, task: Task) -> bool {
        if TaskTable::index(task.id) != self.0.len() {
            return false;
        }
        self.0.push(task);
        true
    }
}

impl std::ops::Index<&TaskId> for TaskTable {
    type Output = Task;

    fn index(&self, id: &TaskId) -> &Task {
        self.get(id).expect("the caller checked the task exists")
    }
}

/// The durable store and its derived indexes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Store {
    pub(crate) tasks: TaskTable,
    pub(crate) last_task_id: u64,
    pub(crate) last_lease_id: u64,
    /// WAITING tasks, oldest id first (the FIFO).
    pub(crate) waiting: BTreeSet<TaskId>,
    /// Valid leases by (expiry, task).
    pub(crate) expiries: BTreeSet<(u64, TaskId)>,
    /// Valid leases per worker.
    pub(crate) leases_by_worker: BTreeMap<WorkerName, u32>,
    /// Tasks by state code.
    pub(crate) counts: [u64; 4],
    /// The submission ids recognised (durable: rebuilt from `TaskCreatedOnce` records).
    pub(crate) window: Window,
}

/// TaskManager's validation of a submission: the payload bound of the
/// configuration (ll checked it against the shell's limit, which may differ).
pub(crate) fn validate_submission(payload: &Payload, payload_bytes_max: u32) -> Result<(), wire::Reply> {
    if payload.len() > payload_bytes_max as usize {
        return Err(wire::Reply::error(
            wire::ERR_PAYLOAD_TOO_LARGE,
            format!("payload of {} bytes exceeds the maximum of {payload_bytes_max} bytes", payload.len()),
        ));
    }
    Ok(())
}

/// TaskManager's `TaskCreatedOnce` for the next task id.
pub(crate) fn task_created_once(
    store: &Store,
    payload: Payload,
    owner: Caller,
    submission: SubmissionId,
    now_ms: u64,
) -> Event {
    let task = TaskId::new("task_id", store.last_task_id + 1).expect("last + 1 is never 0");
    Event::TaskCreatedOnce { task, payload, created_at_ms: now_ms, owner, submission }
}

/// TaskManager's `TaskCreated` for the next task id.
pub(crate) fn task_created(store: &Store, payload: Payload, owner: Caller, now_ms: u64) -> Event {
    let task = TaskId::new("task_id", store.last_task_id + 1).expect("last + 1 is never 0");
    Event::TaskCreated { task, payload, created_at_ms: now_ms, owner }
}

impl Store {
    /// An empty store whose submission window has `bounds`.
    pub(crate) fn new(bounds: Bounds) -> Store {
        Store { window: Window::new(bounds), ..Store::default() }
    }

    /// Rebuilds the store and its indexes from a snapshot, checking it.
    pub(crate) fn from_snapshot(snapshot: CoordSnapshot, bounds: Bounds) -> Result<Store, ApplyError> {
        let mut store = Store {
            last_task_id: snapshot.last_task_id,
            last_lease_id: snapshot.last_lease_id,
            ..Store::new(bounds)
        };
        for task in snapshot.tasks {
            let id = task.id;
            store.index_add(&task);
            if !store.tasks.push(task) {
                return Err(snapshot_error(id, "the tasks are not 1, 2, 3, … in order".into()));
            }
        }
        for Submission { task, submission } in snapshot.submissions {
            let Some(created) = store.tasks.get(&task) else {
                return Err(snapshot_error(task, "a submission id of a task that does not exist".into()));
            };
            let (owner, at) = (created.owner.uid, created.created_at_ms);
            store.window.add(task, owner, submission, at).map_err(|problem| snapshot_error(task, problem))?;
        }
        store.check().map_err(|problem| snapshot_error(TaskId::FIRST, problem))?;
        Ok(store)
    }

    /// The durable state.
    pub(crate) fn snapshot(&self) -> CoordSnapshot {
        CoordSnapshot {
            last_task_id: self.last_task_id,
            last_lease_id: self.last_lease_id,
            tasks: self.tasks.values().cloned().collect(),
            submissions: self.window.entries().collect(),
        }
    }

    /// A stable hash of the durable state: FNV-1a over the tasks in id order
    /// and the counters (no indexes, no soft state).
    pub(crate) fn state_hash(&self) -> u64 {
        let mut hasher = Fnv1a::default();
        self.last_task_id.hash(&mut hasher);
        self.last_lease_id.hash(&mut hasher);
        for task in self.tasks.values() {
            task.hash(&mut hasher);
        }
        for submission in self.window.entries() {
            submission.hash(&mut hasher);
        }
        hasher.finish()
    }

    fn index_add(&mut self, task: &Task) {
        let Store { waiting, expiries, leases_by_worker, counts, .. } = self;
        index(waiting, expiries, leases_by_worker, counts, task.id, &task.state, true);
    }

    /// Moves task `id` to the state `next` makes of its current one (which
    /// it may take apart: no clone of names), keeping the indexes in step.
    fn transition(&mut self, id: TaskId, next: impl FnOnce(TaskState) -> TaskState) {
        let Store { tasks, waiting, expiries, leases_by_worker, counts, .. } = self;
        let task = tasks.get_mut(&id).expect("the caller checked the task exists");
        let old = std::mem::replace(&mut task.state, TaskState::Waiting);
        index(waiting, expiries, leases_by_worker, counts, id, &old, false);
        task.state = next(old);
        index(waiting, expiries, leases_by_worker, counts, id, &task.state, true);
    }

    /// Applies one WAL event: the only mutation of durable state. An event
    /// that does not fit (a damaged or foreign WAL) changes nothing.
    pub(crate) fn apply(&mut self, event: &Event) -> Result<(), ApplyError> {
        let fail = |problem: String| ApplyError { event: event.name(), task: event.task().get(), problem };
        match event {
            Event::TaskCreated { task, payload, created_at_ms, owner } => {
                self.create(*task, payload.clone(), *created_at_ms, owner.clone()).map_err(fail)?;
            }
            Event::TaskCreatedOnce { task, payload, created_at_ms, owner, submission } => {
                self.create_once(*task, payload.clone(), *created_at_ms, owner.clone(), *submission)
                    .map_err(fail)?;
            }
            Event::LeaseGranted { task, lease, worker, holder, expires_at_ms } => {
                self.grant(*task, *lease, worker.clone(), holder.clone(), *expires_at_ms).map_err(fail)?;
            }
            Event::LeaseExtended { task, lease, expires_at_ms } => {
                let old = self.valid_lease(*task, *lease).map_err(fail)?.expires_at_ms;
                if *expires_at_ms < old {
                    return Err(fail(format!("the new expiry {expires_at_ms} is before the old {old}")));
                }
                let new_expiry = *expires_at_ms;
                self.transition(*task, |state| match state {
                    TaskState::Leased { lease, worker, holder, .. } => {
                        TaskState::Leased { lease, worker, holder, expires_at_ms: new_expiry }
                    }
                    other => other,
                });
            }
            Event::TaskCompleted { task, lease } | Event::TaskFailed { task, lease } => {
                self.valid_lease(*task, *lease).map_err(fail)?;
                let outcome = if matches!(event, Event::TaskCompleted { .. }) {
                    Outcome::Completed
                } else {
                    Outcome::Failed
                };
                self.transition(*task, |state| match state {
                    TaskState::Leased { lease, worker, holder, .. } => {
                        TaskState::Finished { lease, worker, holder, outcome }
                    }
                    other => other,
                });
            }
            Event::TaskCancelled { task, lease, .. } => {
                if self.valid_lease(*task, *lease).is_ok() {
                    return Err(fail(format!("lease {lease} is the task's valid lease; nothing to refuse")));
                }
                let entry = self.tasks.get_mut(task).ok_or_else(|| fail("unknown task".into()))?;
                entry.n_refused = entry.n_refused.saturating_add(1);
            }
            Event::LeaseExpired { task, lease, expires_at_ms } => {
                let old = self.valid_lease(*task, *lease).map_err(fail)?.expires_at_ms;
                if old != *expires_at_ms {
                    return Err(fail(format!("the lease expires at {old}, not {expires_at_ms}")));
                }
                self.transition(*task, |_| TaskState::Waiting);
            }
        }
        Ok(())
    }

    /// [`Store::apply`] of an event it owns (replay): the payload and names
    /// move into the state instead of being copied.
    pub(crate) fn apply_owned(&mut self, event: Event) -> Result<(), ApplyError> {
        let (name, id) = (event.name(), event.task().get());
        let fail = |problem: String| ApplyError { event: name, task: id, problem };
        match event {
            Event::TaskCreated { task, payload, created_at_ms, owner } => {
                self.create(task, payload, created_at_ms, owner).map_err(fail)
            }
            Event::TaskCreatedOnce { task, payload, created_at_ms, owner, submission } => {
                self.create_once(task, payload, created_at_ms, owner, submission).map_err(fail)
            }
            Event::LeaseGranted { task, lease, worker, holder, expires_at_ms } => {
                self.grant(task, lease, worker, holder, expires_at_ms).map_err(fail)
            }
            other => self.apply(&other),
        }
    }

    /// `TaskCreated`: the next task, WAITING.
    fn create(
        &mut self,
        task: TaskId,
        payload: Payload,
        created_at_ms: u64,
        owner: Caller,
    ) -> Result<(), String> {
        if task.get() != self.last_task_id + 1 {
            return Err(format!("expected task id {}", self.last_task_id + 1));
        }
        let new = Task {
            id: task,
            payload,
            created_at_ms,
            owner,
            state: TaskState::Waiting,
            n_leases: 0,
            n_refused: 0,
        };
        self.last_task_id = task.get();
        self.index_add(&new);
        let pushed = self.tasks.push(new);
        debug_assert!(pushed, "the id was checked to be the next one");
        Ok(())
    }

    /// `TaskCreatedOnce`: the next task, WAITING, its submission id held in the window.
    fn create_once(
        &mut self,
        task: TaskId,
        payload: Payload,
        created_at_ms: u64,
        owner: Caller,
        submission: SubmissionId,
    ) -> Result<(), String> {
        if let Some(first) = self.window.find(owner.uid, submission) {
            return Err(format!("submission id {submission} of {owner} already created task {first}"));
        }
        let uid = owner.uid;
        self.create(task, payload, created_at_ms, owner)?;
        // The pair is new and the task newer than any held: this cannot fail.
        self.window.add(task, uid, submission, created_at_ms)
    }

    /// `LeaseGranted`: a WAITING task becomes LEASED under the next lease id.
    fn grant(
        &mut self,
        task: TaskId,
        lease: LeaseId,
        worker: WorkerName,
        holder: Caller,
        expires_at_ms: u64,
    ) -> Result<(), String> {
        let current = self.tasks.get(&task).ok_or_else(|| "unknown task".to_owned())?;
        if current.state != TaskState::Waiting {
            return Err(format!("the task is {:?}, not waiting", current.state));
        }
        if lease.get() != self.last_lease_id + 1 {
            return Err(format!("expected lease id {}", self.last_lease_id + 1));
        }
        self.last_lease_id = lease.get();
        self.transition(task, |_| TaskState::Leased { lease, worker, holder, expires_at_ms });
        let entry = self.tasks.get_mut(&task).expect("just set");
        entry.n_leases = entry.n_leases.saturating_add(1);
        Ok(())
    }

    /// The worker, holder and expiry of `lease` if it is `task`'s valid lease.
    pub(crate) fn valid_lease(&self, task: TaskId, lease: LeaseId) -> Result<Held<'_>, String> {
        match self.tasks.get(&task).map(|t| &t.state) {
            None => Err("unknown task".into()),
            Some(TaskState::Leased { lease: current, worker, holder, expires_at_ms })
                if *current == lease =>
            {
                Ok(Held { worker, holder, expires_at_ms: *expires_at_ms })
            }
            Some(state) => Err(format!("lease {lease} is not the task's valid lease (task is {state:?})")),
        }
    }

    /// Every invariant of the store: ids, one valid lease per task, indexes.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut rebuilt =
            Store { last_task_id: self.last_task_id, last_lease_id: self.last_lease_id, ..Store::default() };
        let mut lease_ids = BTreeSet::new();
        if self.tasks.len() as u64 != self.last_task_id {
            return Err(format!("{} tasks but the last task id is {}", self.tasks.len(), self.last_task_id));
        }
        for (index, task) in self.tasks.values().enumerate() {
            let id = &task.id;
            if id.get() != index as u64 + 1 {
                return Err(format!("task {id} stored at position {}", index + 1));
            }
            if id.get() > self.last_task_id {
                return Err(format!("task {id} above the last task id {}", self.last_task_id));
            }
            if let TaskState::Leased { lease, .. } | TaskState::Finished { lease, .. } = &task.state {
                if lease.get() > self.last_lease_id {
                    return Err(format!(
                        "task {id}: lease {lease} above the last lease id {}",
                        self.last_lease_id
                    ));
                }
                if !lease_ids.insert(*lease) {
                    return Err(format!("lease {lease} held by two tasks"));
                }
                if task.n_leases == 0 {
                    return Err(format!("task {id}: has a lease but counts no grant"));
                }
            }
            rebuilt.index_add(task);
        }
        if rebuilt.waiting != self.waiting {
            return Err("the WAITING index differs from the tasks".into());
        }
        if rebuilt.expiries != self.expiries {
            return Err("the expiry index differs from the tasks".into());
        }
        if rebuilt.leases_by_worker != self.leases_by_worker {
            return Err("the per-worker lease counts differ from the tasks".into());
        }
        if rebuilt.counts != self.counts {
            return Err(format!("counts {:?} differ from the tasks' {:?}", self.counts, rebuilt.counts));
        }
        self.window.check()?;
        if let Some(Submission { task, .. }) = self.window.entries().last()
            && !self.tasks.contains_key(&task)
        {
            return Err(format!("submission window holds task {task}, which does not exist"));
        }
        Ok(())
    }
}

/// A valid lease, as [`Store::valid_lease`] finds it.
pub(crate) struct Held<'a> {
    pub(crate) worker: &'a WorkerName,
    pub(crate) holder: &'a Caller,
    pub(crate) expires_at_ms: u64,
}

/// Adds (or removes) task `id` in `state` to (from) the indexes.
fn index(
    waiting: &mut BTreeSet<TaskId>,
    expiries: &mut BTreeSet<(u64, TaskId)>,
    leases_by_worker: &mut BTreeMap<WorkerName, u32>,
    counts: &mut [u64; 4],
    id: TaskId,
    state: &TaskState,
    add: bool,
) {
    let count = &mut counts[state.code() as usize];
    *count = if add { *count + 1 } else { *count - 1 };
    match state {
        TaskState::Waiting if add => {
            waiting.insert(id);
        }
        TaskState::Waiting => {
            waiting.remove(&id);
        }
        TaskState::Leased { worker, expires_at_ms, .. } if add => {
            expiries.insert((*expires_at_ms, id));
            match leases_by_worker.get_mut(worker) {
                Some(n) => *n += 1,
                None => {
                    leases_by_worker.insert(worker.clone(), 1);
                }
            }
        }
        TaskState::Leased { worker, expires_at_ms, .. } => {
            expiries.remove(&(*expires_at_ms, id));
            if let Some(n) = leases_by_worker.get_mut(worker) {
                *n -= 1;
                if *n == 0 {
                    leases_by_worker.remove(worker);
                }
            }
        }
        TaskState::Finished { .. } => {}
    }
}

fn snapshot_error(task: TaskId, problem: String) -> ApplyError {
    ApplyError { event: "snapshot", task: task.get(), problem }
}

/// FNV-1a, 64 bits: a fixed, documented hash, so [`Store::state_hash`] is the
/// same in every process and every build.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}
