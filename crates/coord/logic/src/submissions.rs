//! The submission window (docs/protocols/coordinator.md, "Submission ids"): which
//! `(owner uid, submission id)` pairs the coordinator recognises, so that a retried
//! SUBMIT_TASK_ONCE is answered with the task its first attempt created and creates
//! nothing.
//!
//! The window is derived from the WAL alone: each `TaskCreatedOnce` adds its pair, and
//! the same application forgets
//! - every pair whose task was created [`CoordConfig::submission_window_ms`] or more
//!   before the new one (oldest task first), and
//! - the owner's oldest pair once the owner has more than
//!   [`CoordConfig::submissions_per_owner_max`] (an owner's flood only pushes out its own
//!   pairs).
//!
//! So live steps, replay, a snapshot's reload and a follower candidate all hold the same
//! pairs. A pair still held is recognised whatever its age: the window is a minimum.
//! [`CoordConfig::submissions_max`] bounds the pairs of all owners: a new submission with
//! an id that would pass it is refused (`ERR_TRY_AGAIN`), never made to push out another
//! owner's pair. Memory: three small entries per pair held, nothing per task beyond it.

use std::collections::{BTreeMap, VecDeque};

use lava_coord_ll::{SubmissionId, TaskId};
use serde::{Deserialize, Serialize};

use crate::config::CoordConfig;

/// One pair held, as a snapshot keeps it (the owner and the time are the task's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Submission {
    /// The task the submission created.
    pub task: TaskId,
    /// Its submission id.
    pub submission: SubmissionId,
}

/// The bounds of the window, from the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bounds {
    pub(crate) window_ms: u64,
    pub(crate) per_owner_max: usize,
    pub(crate) total_max: usize,
}

impl Bounds {
    pub(crate) fn of(config: &CoordConfig) -> Bounds {
        Bounds {
            window_ms: config.submission_window_ms,
            per_owner_max: config.submissions_per_owner_max.max(1) as usize,
            total_max: config.submissions_max.max(1) as usize,
        }
    }
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds::of(&CoordConfig::default())
    }
}

/// The pairs held and their indexes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Window {
    pub(crate) bounds: Bounds,
    /// Every pair held by task id (the order of creation): the owner uid, the id and the
    /// task's creation time.
    by_task: BTreeMap<TaskId, (u32, SubmissionId, u64)>,
    /// The lookup: (owner uid, id) to the task.
    by_pair: BTreeMap<(u32, SubmissionId), TaskId>,
    /// Each owner's tasks held, oldest first.
    by_owner: BTreeMap<u32, VecDeque<TaskId>>,
}

impl Window {
    pub(crate) fn new(bounds: Bounds) -> Window {
        Window { bounds, ..Window::default() }
    }

    /// The task `owner`'s submission `id` created, if the pair is held.
    pub(crate) fn find(&self, owner: u32, id: SubmissionId) -> Option<TaskId> {
        self.by_pair.get(&(owner, id)).copied()
    }

    /// Pairs held.
    pub(crate) fn len(&self) -> usize {
        self.by_task.len()
    }

    /// Whether a new pair of `owner` created at `now_ms` fits within the total bound,
    /// counting the pairs its own application would forget first. `Err` names the time
    /// (ms) until the oldest pair leaves the window.
    pub(crate) fn room_for(&self, owner: u32, now_ms: u64) -> Result<(), u64> {
        let leaving = self.by_task.values().take_while(|(_, _, at)| self.expired(*at, now_ms)).count();
        let held = self.by_task.len() - leaving;
        let owner_full = self
            .by_owner
            .get(&owner)
            .is_some_and(|tasks| tasks.len() - self.leaving(tasks, now_ms) >= self.bounds.per_owner_max);
        if held < self.bounds.total_max || owner_full {
            return Ok(());
        }
        let oldest = self.by_task.values().nth(leaving).map_or(now_ms, |(_, _, at)| *at);
        Err(oldest.saturating_add(self.bounds.window_ms).saturating_sub(now_ms).max(1))
    }

    /// How many of an owner's `tasks` (oldest first) the next application at `now_ms`
    /// forgets for their age: those at the front of the whole window.
    fn leaving(&self, tasks: &VecDeque<TaskId>, now_ms: u64) -> usize {
        let first_kept =
            self.by_task.iter().find(|(_, (_, _, at))| !self.expired(*at, now_ms)).map(|(task, _)| *task);
        tasks.iter().take_while(|task| first_kept.is_none_or(|kept| **task < kept)).count()
    }

    fn expired(&self, created_at_ms: u64, now_ms: u64) -> bool {
        created_at_ms.saturating_add(self.bounds.window_ms) <= now_ms
    }

    /// Holds `task`'s pair (a `TaskCreatedOnce` applied), forgetting what leaves the window.
    /// `Err` when the pair or the task is held already (a damaged WAL).
    pub(crate) fn add(
        &mut self,
        task: TaskId,
        owner: u32,
        id: SubmissionId,
        created_at_ms: u64,
    ) -> Result<(), String> {
        if let Some(first) = self.by_pair.get(&(owner, id)) {
            return Err(format!("submission id {id} of uid {owner} already created task {first}"));
        }
        if self.by_task.last_key_value().is_some_and(|(last, _)| *last >= task) {
            return Err("a submission's task is not newer than the last one held".to_owned());
        }
        while let Some((&oldest, &(_, _, at))) = self.by_task.first_key_value() {
            if !self.expired(at, created_at_ms) {
                break;
            }
            self.forget(oldest);
        }
        self.by_task.insert(task, (owner, id, created_at_ms));
        self.by_pair.insert((owner, id), task);
        let tasks = self.by_owner.entry(owner).or_default();
        tasks.push_back(task);
        if tasks.len() > self.bounds.per_owner_max {
            let oldest = tasks[0];
            self.forget(oldest);
        }
        Ok(())
    }

    fn forget(&mut self, task: TaskId) {
        let Some((owner, id, _)) = self.by_task.remove(&task) else { return };
        self.by_pair.remove(&(owner, id));
        if let Some(tasks) = self.by_owner.get_mut(&owner) {
            // The owner's oldest is forgotten first, in both rules.
            if tasks.front() == Some(&task) {
                tasks.pop_front();
            } else {
                tasks.retain(|held| *held != task);
            }
            if tasks.is_empty() {
                self.by_owner.remove(&owner);
            }
        }
    }

    /// The pairs held, oldest first, for a snapshot and the state hash.
    pub(crate) fn entries(&self) -> impl Iterator<Item = Submission> + '_ {
        self.by_task
            .iter()
            .map(|(task, (_, submission, _))| Submission { task: *task, submission: *submission })
    }

    /// Every invariant: the three indexes agree and respect the per-owner bound.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.by_pair.len() != self.by_task.len() {
            return Err(format!(
                "{} submission pairs but {} tasks in the submission window",
                self.by_pair.len(),
                self.by_task.len()
            ));
        }
        let mut owned = 0;
        for (owner, tasks) in &self.by_owner {
            if tasks.is_empty() || tasks.len() > self.bounds.per_owner_max {
                return Err(format!("uid {owner} holds {} submission ids", tasks.len()));
            }
            for task in tasks {
                match self.by_task.get(task) {
                    Some((held_by, id, _))
                        if held_by == owner && self.by_pair.get(&(*owner, *id)) == Some(task) => {}
                    _ => return Err(format!("task {task} of uid {owner}: the submission indexes disagree")),
                }
            }
            owned += tasks.len();
        }
        if owned != self.by_task.len() {
            return Err("a submission pair belongs to no owner".to_owned());
        }
        Ok(())
    }
}
