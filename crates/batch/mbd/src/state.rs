//! The durable state (every job, the last job id and submission number given,
//! the request ids of cleaned jobs) and the indexes derived from it, changed only by
//! [`Store::apply`]. Jobs are keyed by [`JobRef`], id then array index: a
//! single job is `ID[0]`, an array's elements `ID[1..]`, all made by one
//! JOB_NEW (`array`) and sharing its submission.
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
//! **Job ids wrap.** The next id is the one after the last given, back to 1 after
//! `MAX_JOBID`, skipping every id a job in memory still has ([`Store::next_job_id`]).
//! So an id names one job at a time, but ids say nothing about age: every "before"
//! and "after" between jobs is their submission number (`Job::submit_seq`, the
//! JOB_NEWs applied so far), which never wraps. Replay needs no `MAX_JOBID`: a
//! JOB_NEW applies when its id is not in memory.
//!
//! The indexes (request id → its job or elements, slots used per host, pending
//! jobs, started jobs, finished jobs by finish time, jobs awaiting their start
//! accept or a signal answer, started elements per array, jobs by submission number)
//! are a pure function of the jobs: `apply` takes a job's contribution out
//! before changing it and puts it back after, and
//! [`Store::check`] recomputes them from scratch to prove it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::Arc;

use lava_batch_ll::{ArraySpec, DependExpr, HostName, JobRef, JobStatus, QueueName, SubmitSpec, UserName};
use lava_batch_wire as wire;
use serde::{Deserialize, Serialize};

use crate::MbdError;
use crate::config::JOB_ARRAY_SIZE_MAX;
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
    /// The last job id given (ids wrap at `MAX_JOBID`, skipping those in memory).
    pub last_job_id: u32,
    /// The last submission number given: the JOB_NEWs applied so far.
    pub last_submission: u64,
    /// Every job in memory, in job-id order. Each boxed, as the store keeps an
    /// unfinished one: a snapshot's copy of the state, and the state a restart decodes
    /// from one, is then no single allocation the size of every job together (which the
    /// allocator may keep after it is freed), and a loaded job moves into the store as it is.
    /// Decoding shares each job's parts with the job before it as it goes ([`Shared`]),
    /// so a million alike pending jobs do not all hold their own copy until the load.
    #[serde(deserialize_with = "decode_shared")]
    pub jobs: Vec<Box<Job>>,
    /// The submissions of cleaned jobs still recognised, in request-id order.
    pub retired_requests: Vec<RetiredRequest>,
    /// Hosts and queues an administrator closed or inactivated (`control`).
    pub control: ControlSnapshot,
    /// The started jobs a `brequeue` kill will requeue when their run ends, in
    /// job order (kept here rather than in each job's encoding, see `Job`).
    pub requeue_kills: Vec<RequeueKill>,
    /// The unfinished jobs, in job order, whose submission environment is the same as
    /// that of the unfinished job before them in `jobs`: written empty, and shared with
    /// that one again on load. Jobs submitted from one shell carry the same environment,
    /// often kilobytes, so a snapshot of many pending jobs holds it once per run of them.
    pub env_as_previous: Vec<JobRef>,
    /// The unfinished jobs, in job order, whose newest kill root or an administrator
    /// asked for (kept here rather than in each job's encoding, see `Job`).
    pub admin_kills: Vec<JobRef>,
}

/// A snapshot as record format 1 wrote it (before [`MbdSnapshot::admin_kills`]): the same
/// fields, in the same order, without that one. mbatchd's codec reads files of that format
/// with it; it loads as a snapshot with no administrator's kill.
#[derive(Debug, Deserialize)]
pub struct MbdSnapshotFormat1 {
    last_job_id: u32,
    last_submission: u64,
    #[serde(deserialize_with = "decode_shared")]
    #[allow(clippy::vec_box, reason = "each job boxed as the store keeps it (MbdSnapshot::jobs)")]
    jobs: Vec<Box<Job>>,
    retired_requests: Vec<RetiredRequest>,
    control: ControlSnapshot,
    requeue_kills: Vec<RequeueKill>,
    env_as_previous: Vec<JobRef>,
}

impl From<MbdSnapshotFormat1> for MbdSnapshot {
    fn from(old: MbdSnapshotFormat1) -> MbdSnapshot {
        MbdSnapshot {
            last_job_id: old.last_job_id,
            last_submission: old.last_submission,
            jobs: old.jobs,
            retired_requests: old.retired_requests,
            control: old.control,
            requeue_kills: old.requeue_kills,
            env_as_previous: old.env_as_previous,
            admin_kills: Vec::new(),
        }
    }
}

/// A started job whose run a `brequeue` kill will requeue (JOB_SIGNAL `requeue_hold`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequeueKill {
    /// The job.
    pub job: JobRef,
    /// `-H`: it is requeued held.
    pub hold: bool,
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
    /// (request id, job): every element of an array shares its submission's id.
    pub(crate) by_request: BTreeSet<(wire::RequestId, JobRef)>,
    pub(crate) slots_used: BTreeMap<HostName, u32>,
    /// Jobs in PEND (not PSUSP), the dispatch candidates, by queue, each as
    /// (`Job::dispatch_key`, job): dispatch visits them queue priority first, then in
    /// that order (arrival order unless `btop`/`bbot` moved them; the elements of an
    /// array by index), and stops once the free slots are taken, without looking at
    /// the rest of a long backlog.
    pub(crate) pending: BTreeMap<QueueName, BTreeSet<(i64, JobRef)>>,
    /// Finished jobs by (finish time, id): the cleaning order.
    pub(crate) finished: BTreeSet<(u64, JobRef)>,
    /// Started jobs whose NEW_JOB_REPLY is not yet committed.
    pub(crate) unaccepted: BTreeSet<JobRef>,
    /// Started jobs (RUN, USUSP, SSUSP): what holds slots, limits and reservations;
    /// a dispatch turn counts them without reading a long backlog of pending jobs.
    pub(crate) started: BTreeSet<JobRef>,
    /// The started jobs by the host they run on (`Job::run_host`): what a host
    /// that registers is owed (its unaccepted jobs, its unanswered signals) is
    /// found among its own jobs, not by a walk over every job of the cluster,
    /// which made a reconnect storm quadratic (every host × every started job).
    pub(crate) started_on: BTreeSet<(HostName, JobRef)>,
    /// Jobs with unanswered signal intents.
    pub(crate) signaling: BTreeSet<JobRef>,
    /// Finished jobs that `bkill -r` ended while dispatched, by the host their
    /// run may still be on (`Job::force_killed_on`): the kill goes to that host
    /// again whenever it registers, until the job is cleaned.
    pub(crate) force_killed: BTreeSet<(HostName, JobRef)>,
    /// The signal requests that acted on each job, by (request id, job id), with
    /// the last submission number given when the request was first logged for that
    /// job (`Job::signal_request_ids`): a retried `bkill 0` finds its first
    /// attempt here without reading every job, finished ones included.
    pub(crate) signal_requests: BTreeMap<(wire::RequestId, JobRef), u64>,
    /// Started elements per array id (RUN, USUSP, SSUSP, UNKWN), for `%N`.
    pub(crate) array_started: BTreeMap<u32, u32>,
    /// The elements in memory of each array id by state: a dependency on a whole array is
    /// decided from these counts, not element by element (`depend`).
    pub(crate) array_states: BTreeMap<u32, ArrayStates>,
    /// Every job by (submission number, job): newest first is this set backwards
    /// (ids wrap, so the highest id is not the newest job).
    pub(crate) by_seq: BTreeSet<(u64, JobRef)>,
    /// PEND and PSUSP jobs per user (`MAX_PEND_JOBS`), array elements each counted.
    pub(crate) pending_per_user: BTreeMap<UserName, u32>,
    /// What those jobs hold per user (`LAVA_MAX_PEND_BYTES`, `Job::pending_bytes`).
    pub(crate) pending_bytes_per_user: BTreeMap<UserName, u64>,
}

/// How many elements of one array (those in memory) are in which state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ArrayStates {
    /// The array's submission number (its elements share it).
    pub(crate) submit_seq: u64,
    /// Elements in memory.
    pub(crate) total: u32,
    /// DONE ones.
    pub(crate) done: u32,
    /// EXIT ones.
    pub(crate) exit: u32,
    /// Started and not finished (RUN, suspended).
    pub(crate) started: u32,
}

impl ArrayStates {
    fn count(&mut self, job: &Job, add: bool) {
        let step = |n: &mut u32| *n = if add { *n + 1 } else { n.saturating_sub(1) };
        step(&mut self.total);
        match job.status {
            JobStatus::Done => step(&mut self.done),
            JobStatus::Exit => step(&mut self.exit),
            status if status.is_started() => step(&mut self.started),
            _ => {}
        }
    }
}

impl Index {
    fn add(&mut self, id: JobRef, job: &Job) {
        self.by_request.insert((job.request_id, id));
        self.by_seq.insert((job.submit_seq, id));
        self.contribute(id, job, true);
    }

    fn remove(&mut self, id: JobRef, job: &Job) {
        self.by_request.remove(&(job.request_id, id));
        self.by_seq.remove(&(job.submit_seq, id));
        self.contribute(id, job, false);
    }

    /// The jobs `request_id` created, in order (one, or an array's elements).
    pub(crate) fn jobs_of_request(&self, request_id: wire::RequestId) -> impl Iterator<Item = JobRef> + '_ {
        self.by_request.range((request_id, JobRef::MIN)..=(request_id, JobRef::MAX)).map(|(_, job)| *job)
    }

    fn contribute(&mut self, id: JobRef, job: &Job, add: bool) {
        fn toggle<T: Ord>(set: &mut BTreeSet<T>, value: T, present: bool, add: bool) {
            if present {
                if add {
                    set.insert(value);
                } else {
                    set.remove(&value);
                }
            }
        }
        if id.index() != 0 {
            let states = self
                .array_states
                .entry(id.id())
                .or_insert(ArrayStates { submit_seq: job.submit_seq, ..ArrayStates::default() });
            states.count(job, add);
            if states.total == 0 {
                self.array_states.remove(&id.id());
            }
        }
        let started = job.status.is_started();
        if started && id.index() != 0 {
            let n = self.array_started.entry(id.id()).or_insert(0);
            *n = if add { *n + 1 } else { n.saturating_sub(1) };
            if *n == 0 {
                self.array_started.remove(&id.id());
            }
        }
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
        if job.status.is_pending() {
            let n = self.pending_per_user.entry(job.user.clone()).or_insert(0);
            *n = if add { *n + 1 } else { n.saturating_sub(1) };
            if *n == 0 {
                self.pending_per_user.remove(&job.user);
            }
            let bytes = job.pending_bytes();
            let held = self.pending_bytes_per_user.entry(job.user.clone()).or_insert(0);
            *held = if add { *held + bytes } else { held.saturating_sub(bytes) };
            if *held == 0 {
                self.pending_bytes_per_user.remove(&job.user);
            }
        }
        toggle(&mut self.finished, (job.status_time_ms, id), job.status.is_finished(), add);
        toggle(&mut self.unaccepted, id, started && job.accepted.is_none(), add);
        toggle(&mut self.started, id, started, add);
        if let Some(host) = job.run_host() {
            toggle(&mut self.started_on, (host.clone(), id), true, add);
        }
        toggle(&mut self.signaling, id, !job.pending_signals.is_empty(), add);
        if let Some(host) = job.force_killed_on() {
            toggle(&mut self.force_killed, (host.clone(), id), true, add);
        }
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
    /// DONE or EXIT, for dependencies, which must not decode every job they name.
    status: JobStatus,
    /// Its submission number, likewise (a dependency names the job submitted
    /// before its dependent, not a later one that took the id after a wrap).
    submit_seq: u64,
    bytes: Box<[u8]>,
    /// An array element's submission, shared with the other elements; the
    /// bytes then hold a stub in its place (`SubmitSpec::stub`), so that a
    /// finished array does not keep a copy of its command per element.
    spec: Option<Arc<SubmitSpec>>,
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
        let spec = (job.job.index() != 0).then(|| Arc::clone(&job.spec));
        let encoded = match spec {
            Some(_) => {
                lava_xdr::serialize_into(&Job { spec: Arc::new(job.spec.stub()), ..job.clone() }, scratch)
            }
            None => lava_xdr::serialize_into(job, scratch),
        };
        encoded.expect("a job always encodes (no unsupported types)");
        FrozenJob {
            job: job.job,
            status: job.status,
            submit_seq: job.submit_seq,
            bytes: Box::from(scratch.as_slice()),
            spec,
        }
    }

    /// The job, decoded.
    pub(crate) fn thaw(&self) -> Job {
        let mut job: Job = lava_xdr::from_bytes(&self.bytes, &FROZEN_LIMITS)
            .expect("a frozen job decodes: freeze encoded it");
        if let Some(spec) = &self.spec {
            job.spec = Arc::clone(spec);
        }
        job
    }

    /// The job's reference.
    pub(crate) fn job_ref(&self) -> JobRef {
        self.job
    }

    /// The job's status, DONE or EXIT.
    pub(crate) fn status(&self) -> JobStatus {
        self.status
    }

    /// The job's submission number.
    pub(crate) fn submit_seq(&self) -> u64 {
        self.submit_seq
    }
}

/// The job references with an id above `after`, every array index of them.
/// The jobs after a JOB_QUERY's resume point (`after_job`, `after_index`): after the
/// whole id when the index is 0, else after that element of the array.
pub(crate) fn refs_after(after_job: u32, after_index: u32) -> (Bound<JobRef>, Bound<JobRef>) {
    if let Some(element) = JobRef::new(after_job, after_index).filter(|_| after_index != 0) {
        return (Bound::Excluded(element), Bound::Unbounded);
    }
    match after_job.checked_add(1).and_then(|id| JobRef::new(id, 0)) {
        Some(first) => (Bound::Included(first), Bound::Unbounded),
        None => (Bound::Excluded(JobRef::MAX), Bound::Unbounded),
    }
}

/// What a job has in common with the job before it, kept to be shared (not state):
/// a job whose submission (its command, paths, requirements), environment, user,
/// queue or submitting host is equal to that of the last job seen holds the same
/// copy. A user's stream of submissions, often identical but for the environment or
/// not even that, then costs one copy in memory rather than one per pending job;
/// the values, and so the state, its snapshot and its events, are the same.
/// JOB_NEW ([`Store::insert_new`]) and a snapshot's load share alike, so a replayed
/// state holds no more than the live one did.
#[derive(Clone, Debug, Default)]
struct Shared {
    spec: Option<Arc<SubmitSpec>>,
    env: Option<Arc<Vec<wire::EnvVar>>>,
    user: Option<UserName>,
    queue: Option<QueueName>,
    from_host: Option<HostName>,
}

impl Shared {
    /// Makes `job` share what is equal to the last job's, and remembers its parts.
    fn share(&mut self, job: &mut Job) {
        fn one<T: Clone + PartialEq>(last: &mut Option<T>, value: &mut T) {
            match last {
                Some(kept) if *kept == *value => *value = kept.clone(),
                _ => *last = Some(value.clone()),
            }
        }
        one(&mut self.spec, &mut job.spec);
        one(&mut self.env, &mut job.env);
        one(&mut self.user, &mut job.user);
        one(&mut self.queue, &mut job.queue);
        one(&mut self.from_host, &mut job.from_host);
    }
}

/// Decodes a snapshot's jobs, each sharing what is equal to the job before it.
#[allow(clippy::vec_box, reason = "each job boxed as the store keeps it (MbdSnapshot::jobs)")]
fn decode_shared<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<Box<Job>>, D::Error> {
    struct Jobs;
    impl<'de> serde::de::Visitor<'de> for Jobs {
        type Value = Vec<Box<Job>>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of jobs")
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let (mut jobs, mut shared) = (Vec::new(), Shared::default());
            while let Some(mut job) = seq.next_element::<Box<Job>>()? {
                shared.share(&mut job);
                jobs.push(job);
            }
            Ok(jobs)
        }
    }
    deserializer.deserialize_seq(Jobs)
}

/// The durable state plus its indexes.
#[derive(Clone, Debug, Default)]
pub(crate) struct Store {
    /// Unfinished jobs. Boxed: a `Job` is several hundred bytes, and a B-tree filled
    /// in id order keeps its nodes about half full, which would nearly double that.
    live: BTreeMap<JobRef, Box<Job>>,
    /// Finished jobs, frozen.
    finished: BTreeMap<JobRef, FrozenJob>,
    /// Reused by every freeze (not state).
    scratch: Vec<u8>,
    /// The shared parts of the last JOB_NEW applied (not state; see [`Shared`]).
    last_new: Shared,
    /// The last job id given.
    pub(crate) last_job_id: u32,
    /// The last submission number given (JOB_NEWs applied).
    pub(crate) last_submission: u64,
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
            last_submission: snapshot.last_submission,
            control: Control::from_snapshot(snapshot.control),
            ..Store::default()
        };
        let mut shared = Shared::default();
        let mut previous_env: Option<Arc<Vec<wire::EnvVar>>> = None;
        let mut env_as_previous = snapshot.env_as_previous.into_iter().peekable();
        for mut job in snapshot.jobs {
            let id = job.job;
            if store.contains(id) {
                return Err(MbdError::Snapshot(format!("job {id} appears twice")));
            }
            // Environments written once for a run of jobs are shared again.
            if env_as_previous.next_if_eq(&id).is_some() {
                match previous_env.as_ref() {
                    Some(env) if job.env.is_empty() && !job.status.is_finished() => job.env = Arc::clone(env),
                    _ => {
                        return Err(MbdError::Snapshot(format!(
                            "job {id} is to share the environment of an unfinished job before it, \
                             and there is none or it has its own"
                        )));
                    }
                }
            }
            if !job.env.is_empty() {
                previous_env = Some(Arc::clone(&job.env));
            }
            // The elements of an array share their submission in memory, and so may
            // consecutive jobs (`Shared`); the snapshot wrote a copy per job, so the
            // copies that are equal are shared again.
            shared.share(&mut job);
            store.put(id, job);
        }
        if let Some(id) = env_as_previous.next() {
            return Err(MbdError::Snapshot(format!(
                "job {id} is to share an environment but is not in order"
            )));
        }
        for kill in snapshot.requeue_kills {
            match store.live.get_mut(&kill.job) {
                Some(job) if job.requeue_hold.is_none() => job.requeue_hold = Some(kill.hold),
                _ => {
                    return Err(MbdError::Snapshot(format!(
                        "requeue kill of job {}, not a live job once",
                        kill.job
                    )));
                }
            }
        }
        for id in snapshot.admin_kills {
            match store.live.get_mut(&id) {
                Some(job) if !job.killed_by_admin => job.killed_by_admin = true,
                _ => {
                    return Err(MbdError::Snapshot(format!(
                        "administrator's kill of job {id}, not an unfinished job once"
                    )));
                }
            }
        }
        for retired in snapshot.retired_requests {
            let request_id = retired.request_id;
            store.retired_by_time.insert((retired.cleaned_ms, request_id));
            if store.retired.insert(request_id, retired).is_some() {
                return Err(MbdError::Snapshot(format!("retired request {request_id:?} appears twice")));
            }
        }
        store.last_new = shared;
        // The index is what checking the jobs builds: built once, with no second copy
        // to compare it with (a million jobs' worth of memory the allocator may keep).
        store.index = store.checked_index().map_err(MbdError::Snapshot)?;
        Ok(store)
    }

    pub(crate) fn snapshot(&self) -> MbdSnapshot {
        // A requeue kill and an administrator's kill are listed beside the jobs
        // (`requeue_kills`, `admin_kills`), not in them.
        let mut jobs: Vec<(JobRef, Box<Job>)> = self
            .live
            .iter()
            .map(|(id, job)| {
                (*id, Box::new(Job { requeue_hold: None, killed_by_admin: false, ..job.as_ref().clone() }))
            })
            .collect();
        jobs.extend(self.finished.iter().map(|(id, frozen)| (*id, Box::new(frozen.thaw()))));
        jobs.sort_unstable_by_key(|(id, _)| *id);
        let mut env_as_previous = Vec::new();
        let mut previous: Option<Arc<Vec<wire::EnvVar>>> = None;
        for (id, job) in &mut jobs {
            if job.env.is_empty() {
                continue;
            }
            let env = std::mem::take(&mut job.env);
            if previous.as_ref().is_some_and(|before| Arc::ptr_eq(before, &env) || before == &env) {
                env_as_previous.push(*id);
            } else {
                job.env = Arc::clone(&env);
                previous = Some(env);
            }
        }
        MbdSnapshot {
            last_job_id: self.last_job_id,
            last_submission: self.last_submission,
            env_as_previous,
            jobs: jobs.into_iter().map(|(_, job)| job).collect(),
            retired_requests: self.retired.values().cloned().collect(),
            control: self.control.snapshot(),
            requeue_kills: self
                .live
                .iter()
                .filter_map(|(id, job)| job.requeue_hold.map(|hold| RequeueKill { job: *id, hold }))
                .collect(),
            admin_kills: self.live.iter().filter(|(_, job)| job.killed_by_admin).map(|(id, _)| *id).collect(),
        }
    }

    /// Files `job` under `id`: unfinished jobs as they are, finished ones frozen.
    fn put(&mut self, id: JobRef, job: Box<Job>) {
        if job.status.is_finished() {
            self.live.remove(&id);
            self.finished.insert(id, FrozenJob::freeze(&job, &mut self.scratch));
        } else {
            self.finished.remove(&id);
            self.live.insert(id, job);
        }
    }

    /// Whether `other` holds the same durable state: what comparing their snapshots
    /// says, without decoding finished jobs (equal jobs freeze to equal bytes).
    pub(crate) fn same_state(&self, other: &Store) -> bool {
        self.last_job_id == other.last_job_id
            && self.last_submission == other.last_submission
            && self.live == other.live
            && self.finished == other.finished
            && self.retired == other.retired
            && self.control == other.control
    }

    /// Job `id`, unfinished or finished (decoded, then).
    pub(crate) fn job(&self, id: JobRef) -> Option<Cow<'_, Job>> {
        match self.live.get(&id) {
            Some(job) => Some(Cow::Borrowed(job)),
            None => self.finished.get(&id).map(|frozen| Cow::Owned(frozen.thaw())),
        }
    }

    /// Unfinished job `id`, if it is one.
    pub(crate) fn live(&self, id: JobRef) -> Option<&Job> {
        self.live.get(&id).map(Box::as_ref)
    }

    /// Unfinished job `id`, which the caller knows to be one.
    pub(crate) fn live_job(&self, id: JobRef) -> &Job {
        self.live(id).unwrap_or_else(|| panic!("job {id} is not an unfinished job"))
    }

    /// Finished job `id`, frozen, if it is one.
    pub(crate) fn finished(&self, id: JobRef) -> Option<&FrozenJob> {
        self.finished.get(&id)
    }

    /// The unfinished jobs, by id.
    pub(crate) fn live_jobs(&self) -> impl Iterator<Item = (JobRef, &Job)> {
        self.live.iter().map(|(id, job)| (*id, job.as_ref()))
    }

    /// The unfinished jobs with an id above `after`, by id.
    pub(crate) fn live_jobs_after(
        &self,
        after: (Bound<JobRef>, Bound<JobRef>),
    ) -> impl Iterator<Item = &Job> {
        self.live.range(after).map(|(_, job)| job.as_ref())
    }

    /// Every job with an id above `after`, by id; finished ones are decoded as they
    /// are reached.
    pub(crate) fn jobs_after(
        &self,
        above: (Bound<JobRef>, Bound<JobRef>),
    ) -> impl Iterator<Item = Cow<'_, Job>> {
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

    /// Every job, newest (highest submission number; an array's elements by
    /// index, backwards) first; finished ones are decoded as they are reached, so a
    /// search that stops early decodes few.
    pub(crate) fn jobs_newest_first(&self) -> impl Iterator<Item = Cow<'_, Job>> {
        self.index.by_seq.iter().rev().filter_map(|(_, id)| self.job(*id))
    }

    /// The id a new job gets when the last one given is `self.last_job_id` and
    /// the highest allowed is `max_job_id`: the next one, back to 1 after
    /// `max_job_id` (or when the last one is above a lowered `MAX_JOBID`), skipping
    /// every id a job in memory has (unfinished, or finished and not yet cleaned);
    /// `None` when all of them are taken. Costs the run of taken ids it skips.
    pub(crate) fn next_job_id(&self, max_job_id: u32) -> Option<u32> {
        let start = match self.last_job_id.checked_add(1) {
            Some(next) if next <= max_job_id => next,
            _ => 1,
        };
        self.first_free_id(start, max_job_id).or_else(|| self.first_free_id(1, start - 1))
    }

    /// The lowest id in `low..=high` no job in memory has.
    fn first_free_id(&self, low: u32, high: u32) -> Option<u32> {
        if low > high {
            return None;
        }
        let range = JobRef::new(low, 0)?..=JobRef::new(high, u32::MAX)?;
        let mut live = self.live.range(range.clone()).map(|(id, _)| id.id()).peekable();
        let mut finished = self.finished.range(range).map(|(id, _)| id.id()).peekable();
        let mut candidate = low;
        loop {
            // The next taken id of either map, in order.
            let taken = match (live.peek(), finished.peek()) {
                (Some(a), Some(b)) if b < a => finished.next(),
                (Some(_), _) => live.next(),
                (None, _) => finished.next(),
            };
            match taken {
                Some(id) if id > candidate => return Some(candidate),
                Some(id) if id == candidate => {
                    candidate = candidate.checked_add(1)?;
                    if candidate > high {
                        return None;
                    }
                }
                Some(_) => {} // another element of an id already passed
                None => return Some(candidate),
            }
        }
    }

    /// Every job, unfinished ones first, finished ones decoded.
    pub(crate) fn all_jobs(&self) -> impl Iterator<Item = (JobRef, Cow<'_, Job>)> {
        let live = self.live.iter().map(|(id, job)| (*id, Cow::Borrowed(job.as_ref())));
        live.chain(self.finished.iter().map(|(id, frozen)| (*id, Cow::Owned(frozen.thaw()))))
    }

    /// Every job in memory with job id `id`, in order: one job, or an array's elements.
    pub(crate) fn refs_of(&self, id: u32) -> Vec<JobRef> {
        let (Some(first), Some(last)) = (JobRef::new(id, 0), JobRef::new(id, u32::MAX)) else {
            return Vec::new();
        };
        let mut refs: Vec<JobRef> = self.live.range(first..=last).map(|(job, _)| *job).collect();
        refs.extend(self.finished.range(first..=last).map(|(job, _)| *job));
        refs.sort_unstable();
        refs
    }

    /// Whether job `id` is in memory.
    pub(crate) fn contains(&self, id: JobRef) -> bool {
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
                let dependency = self.check_new(record).map_err(fail)?;
                self.insert_new(record.as_ref().clone(), dependency);
                Ok(())
            }
            Event::JobClean(record) => {
                let id = record.job;
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
                // An array's submission is retired with its last element.
                if self.index.jobs_of_request(job.request_id).next().is_none() {
                    self.retire(&job, record.time_ms);
                }
                Ok(())
            }
            _ => {
                let id = event.job().ok_or_else(|| fail("no job".to_owned()))?;
                if let Some(job) = self.live.get_mut(&id) {
                    self.index.remove(id, job);
                    let result = job.apply(event, self.last_submission).map_err(fail);
                    self.index.add(id, job);
                    if job.status.is_finished()
                        && let Some(job) = self.live.remove(&id)
                    {
                        self.finished.insert(id, FrozenJob::freeze(&job, &mut self.scratch));
                    }
                    return result;
                }
                let Some(mut job) = self.finished.get(&id).map(FrozenJob::thaw) else {
                    return Err(fail("no such job".to_owned()));
                };
                self.index.remove(id, &job);
                let result = job.apply(event, self.last_submission).map_err(fail);
                self.index.add(id, &job);
                self.put(id, Box::new(job));
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
                let dependency = self.check_new(&record).map_err(fail)?;
                self.insert_new(*record, dependency);
                Ok(())
            }
            other => self.apply(&other),
        }
    }

    /// Why JOB_NEW `record` does not fit the state, if it does not; else its
    /// dependency, resolved against the state (as the live step resolved it).
    fn check_new(&self, record: &JobNewRecord) -> Result<Option<DependExpr<JobRef>>, String> {
        if record.job.index() != 0 {
            return Err("JOB_NEW names an array element".to_owned());
        }
        match ArraySpec::parse(&record.spec.request().job_name) {
            Err(error) => return Err(format!("job name: {error}")),
            Ok(Some(array)) if array.max_index() > JOB_ARRAY_SIZE_MAX => {
                return Err(format!("array index {} above {JOB_ARRAY_SIZE_MAX}", array.max_index()));
            }
            Ok(_) => {}
        }
        // Ids wrap (`Store::next_job_id`): any id no job in memory has is a valid
        // next one, whatever MAX_JOBID was when it was given.
        if self.contains_id(record.job.id()) {
            return Err(format!("job id {} is still in use", record.job.id()));
        }
        if self.index.jobs_of_request(record.request_id).next().is_some()
            || self.retired.contains_key(&record.request_id)
        {
            return Err("request id already used".to_owned());
        }
        self.resolve_dependency(&record.user, &record.spec.request().dependency)
            .map_err(|error| format!("dependency: {error}"))
    }

    /// Adds the job (or the array's elements) of a checked JOB_NEW.
    fn insert_new(&mut self, record: JobNewRecord, dependency: Option<DependExpr<JobRef>>) {
        let id = record.job;
        let array = ArraySpec::parse(&record.spec.request().job_name).ok().flatten();
        self.last_submission += 1;
        let mut job = Job::new(record, dependency, self.last_submission);
        // The names the indexes already hold for other jobs are shared with them.
        if let Some((user, _)) = self.index.pending_per_user.get_key_value(&job.user) {
            job.user = user.clone();
        }
        if let Some((queue, _)) = self.index.pending.get_key_value(&job.queue) {
            job.queue = queue.clone();
        }
        self.last_new.share(&mut job);
        self.last_job_id = id.id();
        let Some(array) = array else {
            self.index.add(id, &job);
            self.put(id, Box::new(job));
            return;
        };
        for index in array.indexes() {
            let element = job.element(JobRef::new(id.id(), index).expect("a job's id is not 0"));
            self.index.add(element.job, &element);
            self.put(element.job, Box::new(element));
        }
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
            job: JobRef::new(job.job.id(), 0).expect("a job's id is not 0"),
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
        let rebuilt = self.checked_index()?;
        if rebuilt != self.index {
            return Err(format!("indexes drifted: kept {:?}, rebuilt {:?}", self.index, rebuilt));
        }
        Ok(())
    }

    /// The indexes rebuilt from the jobs, once every invariant but the kept indexes'
    /// agreement with them holds (see [`Store::check`]).
    fn checked_index(&self) -> Result<Index, String> {
        // One pass, so that each finished job is decoded once.
        let mut rebuilt = Index::default();
        for (id, job) in self.all_jobs() {
            if job.job != id {
                return Err(format!("job {} filed under {id}", job.job));
            }
            if job.submit_seq > self.last_submission {
                return Err(format!(
                    "job {id}: submission number {} above the last one given, {}",
                    job.submit_seq, self.last_submission
                ));
            }
            if job.status.is_finished() != self.finished.contains_key(&id) {
                return Err(format!("job {id} ({}) kept in the wrong form", job.status));
            }
            if self
                .finished
                .get(&id)
                .is_some_and(|frozen| frozen.job != job.job || frozen.status != job.status)
            {
                return Err(format!("frozen job {id} filed under the wrong reference or status"));
            }
            job.check()?;
            rebuilt.add(id, &job);
        }
        if self.live.keys().any(|id| self.finished.contains_key(id)) {
            return Err("a job is kept both unfinished and finished".to_owned());
        }
        if let Some((a, b)) = rebuilt
            .by_request
            .iter()
            .zip(rebuilt.by_request.iter().skip(1))
            .find(|(a, b)| a.0 == b.0 && (a.1.id() != b.1.id() || a.1.index() == 0))
        {
            return Err(format!("jobs {} and {} share a submission request id", a.1, b.1));
        }
        // One submission number per submission (an array's elements share theirs): the
        // jobs of one number are neighbours in `by_seq`.
        if let Some((_, (seq, id))) = rebuilt
            .by_seq
            .iter()
            .zip(rebuilt.by_seq.iter().skip(1))
            .find(|(a, b)| a.0 == b.0 && a.1.id() != b.1.id())
        {
            return Err(format!("job {id} shares submission number {seq} with another job"));
        }
        if let Some((seq, id)) = rebuilt.by_seq.last()
            && *seq == self.last_submission
            && id.id() != self.last_job_id
        {
            return Err(format!(
                "the newest job {id} does not have the last job id given, {}",
                self.last_job_id
            ));
        }
        for (request_id, retired) in &self.retired {
            let id = retired.job;
            if retired.request_id != *request_id || rebuilt.jobs_of_request(*request_id).next().is_some() {
                return Err(format!("retired request {request_id:?} is filed wrongly or still has a job"));
            }
            // After a wrap, a later job may have the cleaned job's id.
            if id.index() != 0 {
                return Err(format!("retired request {request_id:?} names array element {id}"));
            }
        }
        let by_time: BTreeSet<(u64, wire::RequestId)> =
            self.retired.values().map(|r| (r.cleaned_ms, r.request_id)).collect();
        if by_time != self.retired_by_time {
            return Err("the retired requests' expiry order drifted".to_owned());
        }
        Ok(rebuilt)
    }
}
