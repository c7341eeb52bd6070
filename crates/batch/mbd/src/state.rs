//! The durable state (every job, the highest job id ever given, the request
//! ids of cleaned jobs) and the indexes derived from it, changed only by
//! [`Store::apply`].
//!
//! Unfinished jobs live as [`Job`]s; a job that reaches DONE or EXIT is kept
//! as a [`FrozenJob`], its XDR encoding in one allocation of exactly its size.
//! A finished job changes only when it is cleaned, is never dispatched or
//! signalled again, and is read only by queries; and finished jobs are most of
//! what mbatchd holds (a `CLEAN_PERIOD` of them). A `Job` with its dozen
//! separately allocated names is about 1.3 KB in memory; frozen, 0.4–0.5 KB.
//! Freezing happens inside `apply`, so live steps and replay freeze the same
//! jobs at the same events and their states stay equal.
//!
//! The indexes (request id → job, slots used per host, pending jobs, finished
//! jobs by finish time, jobs awaiting their start accept or a signal answer)
//! are a pure function of the jobs: `apply` takes a job's contribution out
//! before changing it and puts it back after, and
//! [`Store::check`] recomputes them from scratch to prove it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use lava_batch_ll::{HostName, JobRef, JobStatus, QueueName};
use lava_batch_wire as wire;
use serde::{Deserialize, Serialize};

use crate::MbdError;
use crate::control::{Control, ControlSnapshot};
use crate::event::{Event, JobNewRecord};
use crate::job::Job;

/// How long the request id of a cleaned job is still recognised, counted
/// from its JOB_CLEAN: far longer than any command retries a submission.
pub const REQUEST_ID_RETENTION_MS: u64 = 24 * 3600 * 1000;

/// The durable state of mbatchd, for the event log's snapshot hook: replay of
/// a snapshot and the events after it equals the state that wrote them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MbdSnapshot {
    /// The highest job id ever given; ids are never reused, even after JOB_CLEAN.
    pub last_job_id: u32,
    /// Every job in memory, in job-id order.
    pub jobs: Vec<Job>,
    /// The submissions of cleaned jobs still recognised, in request-id order.
    pub retired_requests: Vec<RetiredRequest>,
    /// Hosts and queues an administrator closed or inactivated (`control`).
    pub control: ControlSnapshot,
}

/// The submission of a job that JOB_CLEAN dropped from memory. A command may
/// still be retrying it (its answer was lost, and the job ran and was cleaned
/// meanwhile); the retry must get that job back, never a second job. Kept for
/// [`REQUEST_ID_RETENTION_MS`] after the clean, so the list stays bounded by
/// the jobs cleaned in that time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredRequest {
    /// The command's request id.
    pub request_id: wire::RequestId,
    /// The job it created.
    pub job: JobRef,
    /// The submitter's uid (another user presenting the id is not a retry).
    pub user_id: u32,
    /// The job's queue, for the answer.
    pub queue: QueueName,
    /// Whether that was the default queue, for the answer.
    pub default_queue: bool,
    /// When the job was cleaned (the JOB_CLEAN's time).
    pub cleaned_ms: u64,
}

/// Indexes over the jobs; see the module doc.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Index {
    pub(crate) by_request: BTreeMap<wire::RequestId, u32>,
    pub(crate) slots_used: BTreeMap<HostName, u32>,
    /// Jobs in PEND (not PSUSP), the dispatch candidates, by queue, each as
    /// (`Job::dispatch_key`, id): dispatch visits them queue priority first, then in
    /// that order (arrival order unless `btop`/`bbot` moved them), and stops once the
    /// free slots are taken, without looking at the rest of a long backlog.
    pub(crate) pending: BTreeMap<QueueName, BTreeSet<(i64, u32)>>,
    /// Finished jobs by (finish time, id): the cleaning order.
    pub(crate) finished: BTreeSet<(u64, u32)>,
    /// Started jobs whose NEW_JOB_REPLY is not yet committed.
    pub(crate) unaccepted: BTreeSet<u32>,
    /// Jobs with unanswered signal intents.
    pub(crate) signaling: BTreeSet<u32>,
    /// The signal requests that acted on each job, by (request id, job id), with
    /// the highest job id given when the request was first logged for that job
    /// (`Job::signal_request_ids`): a retried `bkill 0` finds its first
    /// attempt here without reading every job, finished ones included.
    pub(crate) signal_requests: BTreeMap<(wire::RequestId, u32), u32>,
}

impl Index {
    fn add(&mut self, id: u32, job: &Job) {
        self.by_request.insert(job.request_id, id);
        self.contribute(id, job, true);
    }

    fn remove(&mut self, id: u32, job: &Job) {
        self.by_request.remove(&job.request_id);
        self.contribute(id, job, false);
    }

    fn contribute(&mut self, id: u32, job: &Job, add: bool) {
        fn toggle<T: Ord>(set: &mut BTreeSet<T>, value: T, present: bool, add: bool) {
            if present {
                if add {
                    set.insert(value);
                } else {
                    set.remove(&value);
                }
            }
        }
        let started = job.status.is_started();
        if started {
            for host in &job.exec_hosts {
                let used = self.slots_used.entry(host.clone()).or_insert(0);
                *used = if add { *used + 1 } else { used.saturating_sub(1) };
                if *used == 0 {
                    self.slots_used.remove(host);
                }
            }
        }
        if job.status == JobStatus::Pend {
            let entry = (job.dispatch_key(), id);
            match self.pending.get_mut(&job.queue) {
                Some(ids) if add => {
                    ids.insert(entry);
                }
                Some(ids) => {
                    ids.remove(&entry);
                    if ids.is_empty() {
                        self.pending.remove(&job.queue);
                    }
                }
                None if add => {
                    self.pending.insert(job.queue.clone(), BTreeSet::from([entry]));
                }
                None => {}
            }
        }
        toggle(&mut self.finished, (job.status_time_ms, id), job.status.is_finished(), add);
        toggle(&mut self.unaccepted, id, started && job.accepted.is_none(), add);
        toggle(&mut self.signaling, id, !job.pending_signals.is_empty(), add);
        for (request_id, last_job_id) in &job.signal_request_ids {
            if add {
                self.signal_requests.insert((*request_id, id), *last_job_id);
            } else {
                self.signal_requests.remove(&(*request_id, id));
            }
        }
    }
}

/// A finished job in compact form (see the module doc): its reference, to
/// answer "which job is this" without decoding, and its XDR encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FrozenJob {
    job: JobRef,
    bytes: Box<[u8]>,
}

/// Decoding limits of a frozen job: it was encoded here, from a valid `Job`.
const FROZEN_LIMITS: lava_xdr::Limits = lava_xdr::Limits {
    input_bytes_max: usize::MAX,
    string_bytes_max: u32::MAX,
    opaque_bytes_max: u32::MAX,
    array_elements_max: u32::MAX,
    ..lava_xdr::Limits::DEFAULT
};

impl FrozenJob {
    /// Encodes `job` through `scratch` and keeps a copy of exactly its size: growing
    /// and then shrinking a fresh buffer per job leaves the allocator a free fragment
    /// beside every frozen job, and glibc's malloc then spends most of a replay
    /// searching and merging them (measured: 2 s of 200,000 finished jobs' replay).
    fn freeze(job: &Job, scratch: &mut Vec<u8>) -> FrozenJob {
        scratch.clear();
        lava_xdr::serialize_into(job, scratch).expect("a job always encodes (no unsupported types)");
        FrozenJob { job: job.job, bytes: Box::from(scratch.as_slice()) }
    }

    /// The job, decoded.
    pub(crate) fn thaw(&self) -> Job {
        lava_xdr::from_bytes(&self.bytes, &FROZEN_LIMITS).expect("a frozen job decodes: freeze encoded it")
    }

    /// The job's reference.
    pub(crate) fn job_ref(&self) -> JobRef {
        self.job
    }
}

/// The durable state plus its indexes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Store {
    /// Unfinished jobs. Boxed: a `Job` is several hundred bytes, and a B-tree filled
    /// in id order keeps its nodes about half full, which would nearly double that.
    live: BTreeMap<u32, Box<Job>>,
    /// Finished jobs, frozen.
    finished: BTreeMap<u32, FrozenJob>,
    /// Reused by every freeze (not state).
    scratch: Vec<u8>,
    pub(crate) last_job_id: u32,
    pub(crate) index: Index,
    /// Request ids of cleaned jobs, still recognised.
    pub(crate) retired: BTreeMap<wire::RequestId, RetiredRequest>,
    /// The same, by (clean time, request id): the order they expire in.
    retired_by_time: BTreeSet<(u64, wire::RequestId)>,
    /// Closed hosts, closed and inactive queues (HOST_CTRL, QUEUE_CTRL).
    pub(crate) control: Control,
}

impl Store {
    /// A store from a snapshot, checked as thoroughly as a live one.
    pub(crate) fn from_snapshot(snapshot: MbdSnapshot) -> Result<Store, MbdError> {
        let mut store = Store {
            last_job_id: snapshot.last_job_id,
            control: Control::from_snapshot(snapshot.control),
            ..Store::default()
        };
        for job in snapshot.jobs {
            let id = job.job.id();
            if store.contains(id) {
                return Err(MbdError::Snapshot(format!("job {id} appears twice")));
            }
            store.put(id, job);
        }
        for retired in snapshot.retired_requests {
            let request_id = retired.request_id;
            store.retired_by_time.insert((retired.cleaned_ms, request_id));
            if store.retired.insert(request_id, retired).is_some() {
                return Err(MbdError::Snapshot(format!("retired request {request_id:?} appears twice")));
            }
        }
        store.index = store.build_index();
        store.check().map_err(MbdError::Snapshot)?;
        Ok(store)
    }

    pub(crate) fn snapshot(&self) -> MbdSnapshot {
        let mut jobs: Vec<(u32, Job)> =
            self.live.iter().map(|(id, job)| (*id, job.as_ref().clone())).collect();
        jobs.extend(self.finished.iter().map(|(id, frozen)| (*id, frozen.thaw())));
        jobs.sort_unstable_by_key(|(id, _)| *id);
        MbdSnapshot {
            last_job_id: self.last_job_id,
            jobs: jobs.into_iter().map(|(_, job)| job).collect(),
            retired_requests: self.retired.values().cloned().collect(),
            control: self.control.snapshot(),
        }
    }

    /// Files `job` under `id`: unfinished jobs as they are, finished ones frozen.
    fn put(&mut self, id: u32, job: Job) {
        if job.status.is_finished() {
            self.live.remove(&id);
            self.finished.insert(id, FrozenJob::freeze(&job, &mut self.scratch));
        } else {
            self.finished.remove(&id);
            self.live.insert(id, Box::new(job));
        }
    }

    /// Whether `other` holds the same durable state: what comparing their snapshots
    /// says, without decoding finished jobs (equal jobs freeze to equal bytes).
    pub(crate) fn same_state(&self, other: &Store) -> bool {
        self.last_job_id == other.last_job_id
            && self.live == other.live
            && self.finished == other.finished
            && self.retired == other.retired
            && self.control == other.control
    }

    /// Job `id`, unfinished or finished (decoded, then).
    pub(crate) fn job(&self, id: u32) -> Option<Cow<'_, Job>> {
        match self.live.get(&id) {
            Some(job) => Some(Cow::Borrowed(job)),
            None => self.finished.get(&id).map(|frozen| Cow::Owned(frozen.thaw())),
        }
    }

    /// Unfinished job `id`, if it is one.
    pub(crate) fn live(&self, id: u32) -> Option<&Job> {
        self.live.get(&id).map(Box::as_ref)
    }

    /// Unfinished job `id`, which the caller knows to be one.
    pub(crate) fn live_job(&self, id: u32) -> &Job {
        self.live(id).unwrap_or_else(|| panic!("job {id} is not an unfinished job"))
    }

    /// Finished job `id`, frozen, if it is one.
    pub(crate) fn finished(&self, id: u32) -> Option<&FrozenJob> {
        self.finished.get(&id)
    }

    /// The unfinished jobs, by id.
    pub(crate) fn live_jobs(&self) -> impl Iterator<Item = (u32, &Job)> {
        self.live.iter().map(|(id, job)| (*id, job.as_ref()))
    }

    /// The unfinished jobs with an id above `after`, by id.
    pub(crate) fn live_jobs_after(&self, after: u32) -> impl Iterator<Item = &Job> {
        self.live.range((Bound::Excluded(after), Bound::Unbounded)).map(|(_, job)| job.as_ref())
    }

    /// Every job with an id above `after`, by id; finished ones are decoded as they
    /// are reached.
    pub(crate) fn jobs_after(&self, after: u32) -> impl Iterator<Item = Cow<'_, Job>> {
        let above = (Bound::Excluded(after), Bound::Unbounded);
        let mut live = self.live.range(above).peekable();
        let mut finished = self.finished.range(above).peekable();
        std::iter::from_fn(move || match (live.peek(), finished.peek()) {
            (Some((live_id, _)), Some((finished_id, _))) if finished_id < live_id => {
                finished.next().map(|(_, frozen)| Cow::Owned(frozen.thaw()))
            }
            (Some(_), _) => live.next().map(|(_, job)| Cow::Borrowed(job.as_ref())),
            (None, _) => finished.next().map(|(_, frozen)| Cow::Owned(frozen.thaw())),
        })
    }

    /// Every job, unfinished ones first, finished ones decoded.
    pub(crate) fn all_jobs(&self) -> impl Iterator<Item = (u32, Cow<'_, Job>)> {
        let live = self.live.iter().map(|(id, job)| (*id, Cow::Borrowed(job.as_ref())));
        live.chain(self.finished.iter().map(|(id, frozen)| (*id, Cow::Owned(frozen.thaw()))))
    }

    /// Whether job `id` is in memory.
    pub(crate) fn contains(&self, id: u32) -> bool {
        self.live.contains_key(&id) || self.finished.contains_key(&id)
    }

    /// Finished jobs in memory.
    pub(crate) fn n_finished(&self) -> usize {
        self.finished.len()
    }

    /// Jobs in memory.
    pub(crate) fn len(&self) -> usize {
        self.live.len() + self.finished.len()
    }

    fn build_index(&self) -> Index {
        let mut index = Index::default();
        for (id, job) in self.all_jobs() {
            index.add(id, &job);
        }
        index
    }

    /// Applies one event: the only way durable state changes.
    pub(crate) fn apply(&mut self, event: &Event) -> Result<(), MbdError> {
        let fail = |problem: String| MbdError::Apply { event: event.name(), job: event.job(), problem };
        match event {
            Event::MbdStart(_) => Ok(()),
            Event::HostCtrl(record) => {
                self.control.apply_host(record);
                Ok(())
            }
            Event::QueueCtrl(record) => {
                self.control.apply_queue(record);
                Ok(())
            }
            Event::JobNew(record) => {
                self.check_new(record).map_err(fail)?;
                self.insert_new(record.as_ref().clone());
                Ok(())
            }
            Event::JobClean(record) => {
                let id = record.job.id();
                if let Some(job) = self.live.get(&id) {
                    return Err(fail(format!("clean of a {} job", job.status)));
                }
                let Some(frozen) = self.finished.remove(&id) else {
                    return Err(fail("no such job".to_owned()));
                };
                let job = frozen.thaw();
                if job.job != record.job {
                    self.finished.insert(id, frozen);
                    return Err(fail(format!("clean of a {} job", job.status)));
                }
                self.index.remove(id, &job);
                self.retire(&job, record.time_ms);
                Ok(())
            }
            _ => {
                let job_ref = event.job().ok_or_else(|| fail("no job".to_owned()))?;
                let id = job_ref.id();
                if let Some(job) = self.live.get_mut(&id).filter(|job| job.job == job_ref) {
                    self.index.remove(id, job);
                    let result = job.apply(event, self.last_job_id).map_err(fail);
                    self.index.add(id, job);
                    if job.status.is_finished()
                        && let Some(job) = self.live.remove(&id)
                    {
                        self.finished.insert(id, FrozenJob::freeze(&job, &mut self.scratch));
                    }
                    return result;
                }
                let Some(mut job) =
                    self.finished.get(&id).filter(|frozen| frozen.job == job_ref).map(FrozenJob::thaw)
                else {
                    return Err(fail("no such job".to_owned()));
                };
                self.index.remove(id, &job);
                let result = job.apply(event, self.last_job_id).map_err(fail);
                self.index.add(id, &job);
                self.put(id, job);
                result
            }
        }
    }

    /// [`Store::apply`] of an event the caller has no further use for (replay): the
    /// same checks and changes, but JOB_NEW's submission moves into the job instead of
    /// being copied.
    pub(crate) fn apply_owned(&mut self, event: Event) -> Result<(), MbdError> {
        match event {
            Event::JobNew(record) => {
                let fail = |problem| MbdError::Apply { event: "JOB_NEW", job: Some(record.job), problem };
                self.check_new(&record).map_err(fail)?;
                self.insert_new(*record);
                Ok(())
            }
            other => self.apply(&other),
        }
    }

    /// Why JOB_NEW `record` does not fit the state, if it does not.
    fn check_new(&self, record: &JobNewRecord) -> Result<(), String> {
        if record.job.index() != 0 {
            return Err("array elements are not supported yet".to_owned());
        }
        if record.job.id() <= self.last_job_id {
            return Err(format!("job id not above the last one, {}", self.last_job_id));
        }
        if self.index.by_request.contains_key(&record.request_id)
            || self.retired.contains_key(&record.request_id)
        {
            return Err("request id already used".to_owned());
        }
        Ok(())
    }

    /// Adds the job of a checked JOB_NEW.
    fn insert_new(&mut self, record: JobNewRecord) {
        let id = record.job.id();
        let job = Job::new(record);
        self.index.add(id, &job);
        self.put(id, job);
        self.last_job_id = id;
    }

    /// Remembers the request id of cleaned `job` and forgets those retired
    /// for longer than [`REQUEST_ID_RETENTION_MS`] at `now_ms` (the JOB_CLEAN's
    /// time, so that replay forgets exactly what the live run forgot).
    fn retire(&mut self, job: &Job, now_ms: u64) {
        while let Some((cleaned_ms, request_id)) = self.retired_by_time.first().copied() {
            if cleaned_ms.saturating_add(REQUEST_ID_RETENTION_MS) > now_ms {
                break;
            }
            self.retired_by_time.pop_first();
            self.retired.remove(&request_id);
        }
        let retired = RetiredRequest {
            request_id: job.request_id,
            job: job.job,
            user_id: job.user_id,
            queue: job.queue.clone(),
            default_queue: job.spec.queue().is_none(),
            cleaned_ms: now_ms,
        };
        self.retired_by_time.insert((now_ms, job.request_id));
        self.retired.insert(job.request_id, retired);
    }

    /// Every durable invariant: each job's own, ids, and the indexes.
    pub(crate) fn check(&self) -> Result<(), String> {
        // One pass, so that each finished job is decoded once.
        let mut rebuilt = Index::default();
        for (id, job) in self.all_jobs() {
            if job.job.id() != id {
                return Err(format!("job {} filed under {id}", job.job));
            }
            if id > self.last_job_id {
                return Err(format!("job {id} above the last job id {}", self.last_job_id));
            }
            if job.status.is_finished() != self.finished.contains_key(&id) {
                return Err(format!("job {id} ({}) kept in the wrong form", job.status));
            }
            if self.finished.get(&id).is_some_and(|frozen| frozen.job != job.job) {
                return Err(format!("frozen job {id} filed under the wrong reference"));
            }
            job.check()?;
            rebuilt.add(id, &job);
        }
        if self.live.keys().any(|id| self.finished.contains_key(id)) {
            return Err("a job is kept both unfinished and finished".to_owned());
        }
        if self.index.by_request.len() != self.len() {
            return Err("two jobs share a submission request id".to_owned());
        }
        if rebuilt != self.index {
            return Err(format!("indexes drifted: kept {:?}, rebuilt {:?}", self.index, rebuilt));
        }
        for (request_id, retired) in &self.retired {
            let id = retired.job.id();
            if retired.request_id != *request_id || self.index.by_request.contains_key(request_id) {
                return Err(format!("retired request {request_id:?} is filed wrongly or still has a job"));
            }
            if self.contains(id) || id > self.last_job_id {
                return Err(format!(
                    "retired request {request_id:?} names job {id}, which is in memory or unknown"
                ));
            }
        }
        let by_time: BTreeSet<(u64, wire::RequestId)> =
            self.retired.values().map(|r| (r.cleaned_ms, r.request_id)).collect();
        if by_time != self.retired_by_time {
            return Err("the retired requests' expiry order drifted".to_owned());
        }
        Ok(())
    }
}
