//! One dispatch turn's decisions ([`Pass`]): which pending jobs start where,
//! and why each of the others does not (LSF's pending reasons).
//!
//! A pass reads the state and decides without changing it; `sched` then logs
//! the decisions. Within a pass resources only shrink (free slots, limits,
//! reservations, exclusive hosts), which the pass uses twice:
//! - a host whose slots are all taken stays so: each requirement keeps a
//!   cursor past the full hosts at the head of its host list;
//! - a job that cannot start makes every later job of the same *shape*
//!   (requirement, queue, `-m` list, slots, `-x`, and the user when a host has
//!   `JL/U`) fail too: its reason is remembered and reused;
//! - once no slot is free anywhere nothing more can start, so the turn stops
//!   there ([`TurnEnd`]): the jobs it did not reach get their reasons when
//!   `bjobs` asks ([`Mbd::turn_end_reason`]), from the turn's end state, where
//!   every candidate host's reason is "Job slot limit reached". A turn thus
//!   costs what it starts, not the length of the backlog.
//!
//! The decision for one job is two separate checks, so that other policies
//! hook in at the right level:
//! - [`Pass::job_blocked`]: job-level conditions (begin time, queue and
//!   per-user queue slot limits, the user's and their groups' `MAX_JOBS` of
//!   `lsb.users`); a job failing one gets that reason alone;
//! - [`Pass::host_room`]: per host, how many of the job's slots the host can
//!   take now (free slots, exclusive jobs, `PJOB_LIMIT`, `HJOB_LIMIT`, `JL/U`, `rusage`),
//!   after the requirement's static filter (`-m`, queue `HOSTS`, connection,
//!   lim's availability and status word — locked or busy takes no job —, `select`)
//!   kept it as a candidate.
//!
//! Load values are lim's at the start of the pass minus the reservations of
//! started jobs (`rusage`, per host); `select` and `order` see those, and the
//! reservations of jobs started in the same pass are checked by `rusage` only.

use std::collections::{BTreeSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

use lava_batch_ll::resreq::{self, HostFacts, NumIndex, Rusage, Span, TextIndex};
use lava_batch_ll::{HostName, JobRef, ResReq, UserName};

use crate::config::{HostConfig, QueueConfig};
use crate::input::LimFacts;
use crate::job::{Job, s_to_ms};
use crate::limits::{self, JobLimitHit};
use crate::machine::Mbd;

/// A hash map with [`FastHasher`]: a pass makes several lookups per pending job.
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// The multiply-rotate hash of rustc's FxHasher: a few cycles per word, where SipHash
/// costs tens of ns per lookup. Keys here are job ids, indexes and requirement texts
/// from authenticated submissions, and no iteration order of these maps reaches an output.
#[derive(Clone, Copy, Default)]
pub(crate) struct FastHasher(u64);

impl FastHasher {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::SEED);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("chunks of 8")));
        }
        let mut tail = [0u8; 8];
        tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.add(u64::from_le_bytes(tail));
    }

    fn write_u8(&mut self, value: u8) {
        self.add(u64::from(value));
    }

    fn write_u32(&mut self, value: u32) {
        self.add(u64::from(value));
    }

    fn write_u64(&mut self, value: u64) {
        self.add(value);
    }

    fn write_usize(&mut self, value: usize) {
        self.add(value as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Most distinct requirement strings kept parsed between passes; beyond it the
/// cache starts again empty (a pass parses what it meets).
pub(crate) const RESREQ_CACHE_MAX: usize = 100_000;

/// A reason that holds for the job wherever it could run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum JobReason {
    StartTime,
    QueueSlotLimit,
    QueueUserSlotLimit,
    /// The user's `MAX_JOBS` (`lsb.users`).
    UserJobLimit(JobLimitHit),
    /// The `MAX_JOBS` of one of the user's groups (`lsb.users`).
    GroupJobLimit(JobLimitHit),
    /// A dependency or the array's running-element limit (`array`, `depend`), with its text.
    Held(&'static str),
}

impl JobReason {
    /// LSF's text (lsb_pendreason).
    pub(crate) fn text(self) -> &'static str {
        match self {
            JobReason::StartTime => "The job has a specified start time",
            JobReason::QueueSlotLimit => "The queue has reached its job slot limit",
            JobReason::QueueUserSlotLimit => "User has reached the per-user job slot limit of the queue",
            JobReason::UserJobLimit(JobLimitHit::Reached) => limits::REASON_USER_JOB_LIMIT,
            JobReason::UserJobLimit(JobLimitHit::TooFewLeft) => limits::REASON_USER_PJOB_LIMIT,
            JobReason::GroupJobLimit(JobLimitHit::Reached) => limits::REASON_UGRP_JOB_LIMIT,
            JobReason::GroupJobLimit(JobLimitHit::TooFewLeft) => limits::REASON_UGRP_PJOB_LIMIT,
            JobReason::Held(text) => text,
        }
    }
}

/// Why one host cannot take the job now; LSF counts these over the hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum HostReason {
    Closed,
    NotSpecified,
    NotUsableToQueue,
    SbdUnreachable,
    LoadUnavailable,
    ResourceRequirement,
    SlotLimit,
    LessSlots,
    ExclusiveRunning,
    NotExclusive,
    QueueCpuLimit,
    QueueHostLimit,
    HostUserLimit,
    Reservation(u8),
    Refused,
    JustStarted,
    /// lim's status word: locked (`lsadmin limlock`).
    Locked,
    /// lim's status word: busy (a load index beyond its lsf.cluster threshold).
    LoadThreshold,
    /// A load index beyond the host's lsb.hosts scheduling threshold (its position in
    /// lim's load vector).
    LoadSched(u8),
}

impl HostReason {
    /// LSF's text (lsb_pendreason).
    pub(crate) fn text(self) -> &'static str {
        match self {
            HostReason::Closed => "Closed by LSF administrator",
            HostReason::NotSpecified => "Not specified in job submission",
            HostReason::NotUsableToQueue => "Not usable to the queue",
            HostReason::SbdUnreachable => "Unable to reach slave batch server",
            HostReason::LoadUnavailable => "Load information unavailable",
            HostReason::ResourceRequirement => "Job's resource requirements not satisfied",
            HostReason::SlotLimit => "Job slot limit reached",
            HostReason::LessSlots => "Not enough job slot(s)",
            HostReason::ExclusiveRunning => "Running an exclusive job",
            HostReason::NotExclusive => "Job's requirement for exclusive execution not satisfied",
            HostReason::QueueCpuLimit => "Queue's per-CPU job slot limit reached",
            HostReason::QueueHostLimit => "Queue's per-host job slot limit reached",
            HostReason::HostUserLimit => "Host's per-user job slot limit reached",
            HostReason::Reservation(idx) if usize::from(idx) == resreq::LOAD_SWP => {
                "Job's requirements for reserving resource (swp) not satisfied"
            }
            HostReason::Reservation(idx) if usize::from(idx) == resreq::LOAD_TMP => {
                "Job's requirements for reserving resource (tmp) not satisfied"
            }
            HostReason::Reservation(_) => "Job's requirements for reserving resource (mem) not satisfied",
            HostReason::Refused => "Slave batch server failed to accept job",
            HostReason::JustStarted => "Just started a job recently",
            HostReason::Locked => "Host is locked",
            HostReason::LoadThreshold => "Load threshold reached",
            HostReason::LoadSched(idx) => match usize::from(idx) {
                0 => "The 15s effective CPU queue length (r15s) is beyond threshold",
                1 => "The 1 min effective CPU queue length (r1m) is beyond threshold",
                2 => "The 15 min effective CPU queue length (r15m) is beyond threshold",
                3 => "The CPU utilization (ut) is beyond threshold",
                4 => "The paging rate (pg) is beyond threshold",
                5 => "The disk IO rate (io) is beyond threshold",
                6 => "There are too many login users (ls)",
                7 => "The idle time (it) is not long enough",
                8 => "The available /tmp space (tmp) is low",
                9 => "The available swap space (swp) is low",
                _ => "The available memory (mem) is low",
            },
        }
    }
}

/// Host reasons with the number of hosts giving each.
type ReasonCounts = Vec<(HostReason, u32)>;

/// [`ReasonCounts`] shared by the jobs of one shape.
type SharedCounts = Arc<[(HostReason, u32)]>;

/// Why a pending job did not start in the last pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PendReason {
    Job(JobReason),
    /// Per reason, the hosts that gave it (most first); shared by the jobs of one shape.
    Hosts(SharedCounts),
}

impl PendReason {
    /// As `bjobs` shows it: a job reason alone, else one `reason: N hosts` line per host
    /// reason, the lines after the first indented by one blank as LSF prints them (`bjobs`
    /// indents the first and ends each with `;`).
    pub(crate) fn render(&self) -> String {
        match self {
            PendReason::Job(reason) => reason.text().to_owned(),
            PendReason::Hosts(counts) if counts.is_empty() => {
                "There are no suitable hosts for the job".to_owned()
            }
            PendReason::Hosts(counts) => counts
                .iter()
                .map(|(reason, n)| format!("{}: {n} host{}", reason.text(), if *n == 1 { "" } else { "s" }))
                .collect::<Vec<_>>()
                .join(";\n "),
        }
    }
}

/// Parsed requirement strings, kept between passes (transient).
#[derive(Clone, Debug, Default)]
pub(crate) struct ResReqCache {
    by_text: HashMap<String, u32>,
    parsed: Vec<Option<ResReq>>,
    /// The unit the strings were parsed in (`MbdConfig::resreq_unit_mb`); another
    /// (after a reconfiguration) starts the cache again.
    unit_mb: u64,
}

/// The requirement of a job without `-R`.
const NO_RESREQ: u32 = u32::MAX;

impl ResReqCache {
    /// The index of `text`'s parse (`None` inside: it does not parse, which only a job
    /// logged before `-R` was checked can have).
    fn index(&mut self, text: &str, unit_mb: u64) -> u32 {
        if text.trim().is_empty() {
            return NO_RESREQ;
        }
        if self.unit_mb != unit_mb {
            *self = ResReqCache { unit_mb, ..ResReqCache::default() };
        }
        if let Some(idx) = self.by_text.get(text) {
            return *idx;
        }
        let idx = u32::try_from(self.parsed.len()).expect("bounded by RESREQ_CACHE_MAX");
        self.parsed.push(ResReq::parse_with_unit(text, unit_mb).ok());
        self.by_text.insert(text.to_owned(), idx);
        idx
    }

    fn get(&self, idx: u32) -> Option<&ResReq> {
        self.parsed.get(idx as usize).and_then(Option::as_ref)
    }

    /// Starts again empty when it grew beyond its bound (between passes only).
    pub(crate) fn trim(&mut self) {
        if self.parsed.len() >= RESREQ_CACHE_MAX {
            *self = ResReqCache::default();
        }
    }
}

/// A host as `-R` sees it: configuration, lim's facts, reservations subtracted.
pub(crate) struct HostView<'a> {
    pub(crate) config: &'a HostConfig,
    pub(crate) lim: Option<&'a LimFacts>,
    pub(crate) n_cpus: Option<u32>,
    pub(crate) reserved: Rusage,
}

impl HostFacts for HostView<'_> {
    fn number(&self, index: NumIndex) -> Option<f64> {
        let lim = self.lim;
        match index {
            NumIndex::Load(idx) => {
                let value = f64::from(lim?.load?[usize::from(idx)]);
                Some(match usize::from(idx) {
                    resreq::LOAD_MEM => value - self.reserved.mem,
                    resreq::LOAD_SWP => value - self.reserved.swp,
                    resreq::LOAD_TMP => value - self.reserved.tmp,
                    _ => value,
                })
            }
            NumIndex::Ncpus => match lim.filter(|l| l.ncpus > 0) {
                Some(lim) => Some(f64::from(lim.ncpus)),
                None => self.n_cpus.map(f64::from),
            },
            NumIndex::Maxmem => lim.filter(|l| l.ncpus > 0).map(|l| f64::from(l.maxmem_mb)),
            NumIndex::Maxswp => lim.filter(|l| l.ncpus > 0).map(|l| f64::from(l.maxswp_mb)),
            NumIndex::Maxtmp => None,
        }
    }

    fn text(&self, index: TextIndex) -> Option<&str> {
        match index {
            TextIndex::Type => self.config.host_type.as_deref(),
            TextIndex::Model => self.config.model.as_deref(),
            TextIndex::Hostname => Some(self.config.name.as_str()),
        }
    }

    fn has_resource(&self, name: &str) -> bool {
        self.config.resources.iter().any(|r| r == name)
    }
}

/// One host during a pass.
struct PassHost {
    /// Why no job can go there at all this pass (not connected, lim says unavailable,
    /// locked or busy).
    unusable: Option<HostReason>,
    free: u32,
    /// The CPUs the host registered with (`PJOB_LIMIT` counts per CPU); 0 when not connected.
    n_cpus: u32,
    n_jobs: u32,
    exclusive: bool,
    reserved: Rusage,
    /// `JOB_ACCEPT_INTERVAL`: the host took a job too recently (or in this turn).
    just_started: bool,
}

/// The hosts a requirement may use, best first, and why the others are out.
struct Candidates {
    hosts: Vec<usize>,
    /// Hosts at the head of `hosts` with no free slot (they stay full this pass).
    n_full: usize,
    excluded: Vec<(HostReason, u32)>,
    rusage: Rusage,
    span: Span,
}

/// What makes two jobs place alike (see the module doc).
#[derive(Clone, PartialEq, Eq, Hash)]
struct Shape {
    candidates: usize,
    n_slots: u32,
    exclusive: bool,
    user: Option<u32>,
}

/// What a turn that stopped at a full cluster leaves behind, so that the jobs it did not
/// reach get their reasons when `bjobs` asks (see the module doc): the turn's end state.
#[derive(Clone, Debug, Default)]
pub(crate) struct TurnEnd {
    /// Whether the turn stopped with pending jobs it did not consider.
    stopped: bool,
    now_ms: u64,
    /// The last submission number when the turn ran: later jobs were not there.
    last_submission: u64,
    queue_used: Vec<u32>,
    users: HashMap<String, u32>,
    queue_user_used: HashMap<(usize, u32), u32>,
    /// Slots of started jobs per user (by `users` index) and per group of `lsb.users`.
    user_used: UserUsed,
    /// Per host: why it takes no job at all (not connected, unavailable), and its reservations.
    hosts: Vec<(Option<HostReason>, Rusage)>,
    /// Host reasons by (requirement text, queue, `-m` list), computed as asked.
    asked: ReasonCache,
}

/// The slots started jobs hold per user and per user group, for `MAX_JOBS`
/// (`lsb.users`); empty when no row sets `MAX_JOBS`.
#[derive(Clone, Debug, Default)]
pub(crate) struct UserUsed {
    /// Whether any row sets `MAX_JOBS` (else nothing is counted or checked).
    active: bool,
    /// By user index (`Pass::users`).
    users: HashMap<u32, u32>,
    /// By index into `MbdConfig::user_limits.groups`.
    groups: Vec<u32>,
}

impl UserUsed {
    /// Why a job of `n_slots` of `user` (index `user_idx`) would go beyond a
    /// `MAX_JOBS`, if it would: the user's own, then each group's.
    fn blocked(&self, mbd: &Mbd, user: &UserName, user_idx: Option<u32>, n_slots: u32) -> Option<JobReason> {
        if !self.active {
            return None;
        }
        let limits = &mbd.config.user_limits;
        let used = user_idx.and_then(|idx| self.users.get(&idx)).copied().unwrap_or(0);
        if let Some(hit) = limits::over_job_limit(used, n_slots, limits.of(user).max_jobs) {
            return Some(JobReason::UserJobLimit(hit));
        }
        limits
            .groups
            .iter()
            .zip(&self.groups)
            .find_map(|(group, used)| {
                group
                    .contains(user)
                    .then(|| limits::over_job_limit(*used, n_slots, group.limit.max_jobs))
                    .flatten()
            })
            .map(JobReason::GroupJobLimit)
    }

    /// Counts `n_slots` more for `user` (index `user_idx`).
    fn add(&mut self, mbd: &Mbd, user: &UserName, user_idx: u32, n_slots: u32) {
        if !self.active {
            return;
        }
        *self.users.entry(user_idx).or_insert(0) += n_slots;
        for (group, used) in mbd.config.user_limits.groups.iter().zip(&mut self.groups) {
            if group.limit.max_jobs.is_some() && group.contains(user) {
                *used += n_slots;
            }
        }
    }
}

/// [`TurnEnd`]'s answers, filled by queries (which read the state through `&Mbd`).
#[derive(Debug, Default)]
struct ReasonCache(Mutex<HashMap<AskedKey, SharedCounts>>);

/// A requirement text, a queue (by index) and a `-m` list: what decides a job's host reasons.
type AskedKey = (String, usize, Vec<HostName>);

impl Clone for ReasonCache {
    /// A copy starts empty: the cache is a pure function of the turn's end state.
    fn clone(&self) -> ReasonCache {
        ReasonCache::default()
    }
}

/// A job to start: hosts (by configuration index) and slots on each, in order.
pub(crate) struct Decision {
    pub(crate) id: JobRef,
    pub(crate) hosts: Vec<(usize, u32)>,
}

/// One dispatch pass; see the module doc.
pub(crate) struct Pass<'a> {
    mbd: &'a Mbd,
    now_ms: u64,
    reqs: &'a mut ResReqCache,
    hosts: Vec<PassHost>,
    n_free: u64,
    users: HashMap<&'a str, u32>,
    queue_used: Vec<u32>,
    queue_user_used: HashMap<(usize, u32), u32>,
    /// `MAX_JOBS` of `lsb.users`: slots per user and per group.
    user_used: UserUsed,
    queue_host_used: HashMap<(usize, usize), u32>,
    user_host_used: HashMap<(u32, usize), u32>,
    /// Whether any host has `JL/U` (then the user is part of a job's shape).
    user_limits: bool,
    /// Array elements started in this turn, by array id (`%N` limits).
    array_started: HashMap<u32, u32>,
    candidates: HashMap<(u32, usize, Vec<HostName>), usize>,
    candidate_lists: Vec<Candidates>,
    failed: HashMap<Shape, SharedCounts>,
    pub(crate) decisions: Vec<Decision>,
    pub(crate) reasons: HashMap<JobRef, PendReason>,
    /// The earliest begin time still ahead among the jobs seen.
    pub(crate) next_begin_ms: Option<u64>,
}

impl<'a> Pass<'a> {
    /// A pass over the state of `mbd` at `now_ms`; `reasons` is reused (cleared).
    pub(crate) fn new(
        mbd: &'a Mbd,
        now_ms: u64,
        reqs: &'a mut ResReqCache,
        mut reasons: HashMap<JobRef, PendReason>,
    ) -> Pass<'a> {
        reasons.clear();
        let config = &mbd.config;
        let mut pass = Pass {
            mbd,
            now_ms,
            reqs,
            hosts: Vec::with_capacity(config.hosts.len()),
            n_free: 0,
            users: HashMap::default(),
            queue_used: vec![0; config.queues.len()],
            queue_user_used: HashMap::default(),
            user_used: UserUsed {
                active: !config.user_limits.no_job_limits(),
                users: HashMap::default(),
                groups: vec![0; config.user_limits.groups.len()],
            },
            queue_host_used: HashMap::default(),
            user_host_used: HashMap::default(),
            user_limits: config.hosts.iter().any(|h| h.user_job_limit.is_some()),
            array_started: HashMap::default(),
            candidates: HashMap::default(),
            candidate_lists: Vec::new(),
            failed: HashMap::default(),
            decisions: Vec::new(),
            reasons,
            next_begin_ms: None,
        };
        for host in &config.hosts {
            let link = mbd.links.hosts.get(&host.name).filter(|link| link.connected);
            let lim = mbd.links.lim.get(&host.name);
            let unusable = if mbd.store.control.closed_hosts.contains(&host.name) {
                Some(HostReason::Closed)
            } else if !mbd.host_available(&host.name) {
                Some(HostReason::LoadUnavailable)
            } else if link.is_none() {
                Some(HostReason::SbdUnreachable)
            } else if lim.is_some_and(|lim| lim.locked) {
                Some(HostReason::Locked)
            } else if lim.is_some_and(|lim| lim.busy) {
                Some(HostReason::LoadThreshold)
            } else {
                lim.and_then(|lim| lim.load.as_ref())
                    .and_then(|load| host.beyond_load_sched(load))
                    .map(|idx| HostReason::LoadSched(u8::try_from(idx).unwrap_or(u8::MAX)))
            };
            let free = match link {
                Some(link) if unusable.is_none() => {
                    let used = mbd.store.index.slots_used.get(&host.name).copied().unwrap_or(0);
                    // `Mbd::capacity` looks the host up by name: a pass has it at hand.
                    host.max_jobs.unwrap_or(link.n_cpus).saturating_sub(used)
                }
                _ => 0,
            };
            pass.n_free += u64::from(free);
            let accept_ms = u64::from(config.job_accept_interval).saturating_mul(config.mbd_sleep_time_ms);
            let just_started = config.job_accept_interval > 0
                && mbd
                    .links
                    .last_start_ms
                    .get(&host.name)
                    .is_some_and(|t| now_ms < t.saturating_add(accept_ms));
            pass.hosts.push(PassHost {
                unusable,
                free,
                n_cpus: link.map_or(0, |link| link.n_cpus),
                n_jobs: 0,
                exclusive: false,
                reserved: Rusage::default(),
                just_started,
            });
        }
        pass.count_started();
        pass
    }

    /// Adds what started jobs hold: jobs, exclusivity and reservations per host, slots per
    /// queue, per queue and user, per queue and host, per user and host.
    fn count_started(&mut self) {
        let mbd = self.mbd;
        let host_idx: HashMap<&HostName, usize> =
            mbd.config.hosts.iter().enumerate().map(|(idx, h)| (&h.name, idx)).collect();
        for job in mbd.store.index.started.iter().map(|id| mbd.store.live_job(*id)) {
            let queue = mbd.config.queues.iter().position(|q| q.name == job.queue);
            let user = self.user_idx(&job.user);
            let rusage = self.rusage_of(job);
            self.user_used.add(mbd, &job.user, user, job.n_slots());
            if let Some(queue) = queue {
                self.queue_used[queue] += job.n_slots();
                *self.queue_user_used.entry((queue, user)).or_insert(0) += job.n_slots();
            }
            let mut seen: Option<usize> = None;
            for host in &job.exec_hosts {
                let Some(&h) = host_idx.get(host) else { continue };
                if let Some(queue) = queue {
                    *self.queue_host_used.entry((queue, h)).or_insert(0) += 1;
                }
                *self.user_host_used.entry((user, h)).or_insert(0) += 1;
                if seen != Some(h) {
                    // exec_hosts lists a host's slots together: count the job once per host.
                    seen = Some(h);
                    let entry = &mut self.hosts[h];
                    entry.n_jobs += 1;
                    entry.exclusive |= job.spec.request().exclusive;
                    add_rusage(&mut entry.reserved, &rusage);
                }
            }
        }
    }

    fn user_idx(&mut self, user: &'a UserName) -> u32 {
        let next = u32::try_from(self.users.len()).unwrap_or(u32::MAX);
        *self.users.entry(user.as_str()).or_insert(next)
    }

    fn rusage_of(&mut self, job: &Job) -> Rusage {
        let idx = self.reqs.index(&job.spec.request().res_req, self.mbd.config.resreq_unit_mb);
        self.reqs.get(idx).map(|req| req.rusage_mb).unwrap_or_default()
    }

    /// Whether no slot is free anywhere: every later job waits.
    pub(crate) fn cluster_full(&self) -> bool {
        self.n_free == 0
    }

    /// The turn's end state for the reasons of the jobs it did not consider (`stopped`).
    pub(crate) fn end(&self, stopped: bool) -> TurnEnd {
        TurnEnd {
            stopped,
            now_ms: self.now_ms,
            last_submission: self.mbd.store.last_submission,
            queue_used: self.queue_used.clone(),
            users: self.users.iter().map(|(name, idx)| ((*name).to_owned(), *idx)).collect(),
            queue_user_used: self.queue_user_used.clone(),
            user_used: self.user_used.clone(),
            hosts: self.hosts.iter().map(|host| (host.unusable, host.reserved)).collect(),
            asked: ReasonCache::default(),
        }
    }

    /// Decides pending job `job` of queue `queue_idx`: a [`Decision`] or a reason.
    pub(crate) fn consider(&mut self, job: &'a Job, queue_idx: usize) {
        let id = job.job;
        if let Some(reason) = self.job_blocked(job, queue_idx) {
            self.reasons.insert(id, PendReason::Job(reason));
            return;
        }
        let req_idx = self.reqs.index(&job.spec.request().res_req, self.mbd.config.resreq_unit_mb);
        let candidates = self.candidates_for(req_idx, queue_idx, job.spec.hosts());
        let avoided = self.mbd.links.avoid.get(&id);
        // The user is part of the shape only where a host limits users (JL/U).
        let user_key = if self.user_limits { Some(self.user_idx(&job.user)) } else { None };
        let shape = Shape {
            candidates,
            n_slots: job.n_slots(),
            exclusive: job.spec.request().exclusive,
            user: user_key,
        };
        if avoided.is_none()
            && let Some(counts) = self.failed.get(&shape)
        {
            self.reasons.insert(id, PendReason::Hosts(counts.clone()));
            return;
        }
        let user = match user_key {
            Some(user) => user,
            None => self.user_idx(&job.user),
        };
        match self.place(&shape, queue_idx, user, avoided) {
            Ok(hosts) => self.commit(Decision { id, hosts }, &shape, queue_idx, user),
            Err(counts) => {
                let counts: SharedCounts = counts.into();
                if avoided.is_none() {
                    self.failed.insert(shape, counts.clone());
                }
                self.reasons.insert(id, PendReason::Hosts(counts));
            }
        }
    }

    /// The job-level reason `job` cannot start now, if any.
    pub(crate) fn job_blocked(&mut self, job: &'a Job, queue_idx: usize) -> Option<JobReason> {
        if let Some(text) = self.mbd.dependency_hold(job) {
            return Some(JobReason::Held(text));
        }
        if job.job.index() != 0
            && let Some(running_max) = lava_batch_ll::running_max_of(&job.spec.request().job_name)
        {
            // The elements started before the turn and those started in it.
            let before = self.mbd.store.index.array_started.get(&job.job.id()).copied().unwrap_or(0);
            let now = self.array_started.get(&job.job.id()).copied().unwrap_or(0);
            if before + now >= running_max {
                return Some(JobReason::Held(crate::REASON_ARRAY_LIMIT));
            }
        }
        let begin_ms = s_to_ms(job.spec.request().begin_time);
        if begin_ms > self.now_ms {
            self.next_begin_ms = Some(self.next_begin_ms.map_or(begin_ms, |t| t.min(begin_ms)));
            return Some(JobReason::StartTime);
        }
        let queue = &self.mbd.config.queues[queue_idx];
        let n_slots = job.n_slots();
        if queue.qjob_limit.is_some_and(|limit| self.queue_used[queue_idx] + n_slots > limit) {
            return Some(JobReason::QueueSlotLimit);
        }
        if let Some(limit) = queue.ujob_limit {
            let user = self.user_idx(&job.user);
            let used = self.queue_user_used.get(&(queue_idx, user)).copied().unwrap_or(0);
            if used + n_slots > limit {
                return Some(JobReason::QueueUserSlotLimit);
            }
        }
        if self.user_used.active {
            let user = self.user_idx(&job.user);
            return self.user_used.blocked(self.mbd, &job.user, Some(user), n_slots);
        }
        None
    }

    /// The candidate list of (requirement, queue, `-m` list), built on first use.
    fn candidates_for(&mut self, req_idx: u32, queue_idx: usize, asked: &[HostName]) -> usize {
        if let Some(idx) = self.candidates.get(&(req_idx, queue_idx, asked.to_vec())) {
            return *idx;
        }
        let mbd = self.mbd;
        let queue: &QueueConfig = &mbd.config.queues[queue_idx];
        let req = self.reqs.get(req_idx);
        let mut hosts = Vec::new();
        let mut excluded: Vec<HostReason> = Vec::new();
        let mut keys: Vec<Vec<f64>> = Vec::new();
        for (h, config) in mbd.config.hosts.iter().enumerate() {
            let view = self.view(h, config);
            let reason = if let Some(reason) = self.hosts[h].unusable {
                Some(reason)
            } else if !asked.is_empty() && !asked.contains(&config.name) {
                Some(HostReason::NotSpecified)
            } else if !queue.hosts.is_empty() && !queue.hosts.contains(&config.name) {
                Some(HostReason::NotUsableToQueue)
            } else if req_idx != NO_RESREQ && !req.is_some_and(|req| req.selects(&view)) {
                Some(HostReason::ResourceRequirement)
            } else {
                None
            };
            match reason {
                Some(reason) => excluded.push(reason),
                None => {
                    if let Some(req) = req.filter(|req| !req.order.is_empty()) {
                        keys.push(order_key(req, &view));
                    }
                    hosts.push(h);
                }
            }
        }
        if !keys.is_empty() {
            // Stable: equal keys keep the lsf.cluster order.
            let mut ranked: Vec<(Vec<f64>, usize)> = keys.into_iter().zip(hosts).collect();
            ranked.sort_by(|a, b| {
                a.0.iter()
                    .zip(&b.0)
                    .map(|(x, y)| x.total_cmp(y))
                    .find(|o| o.is_ne())
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
            hosts = ranked.into_iter().map(|(_, h)| h).collect();
        }
        let (rusage, span) = req.map(|req| (req.rusage_mb, req.span)).unwrap_or_default();
        let idx = self.candidate_lists.len();
        self.candidate_lists.push(Candidates { hosts, n_full: 0, excluded: count(excluded), rusage, span });
        self.candidates.insert((req_idx, queue_idx, asked.to_vec()), idx);
        idx
    }

    fn view(&self, h: usize, config: &'a HostConfig) -> HostView<'a> {
        let mbd = self.mbd;
        HostView {
            config,
            lim: mbd.links.lim.get(&config.name),
            n_cpus: mbd.links.hosts.get(&config.name).map(|link| link.n_cpus),
            reserved: self.hosts[h].reserved,
        }
    }

    /// How many of the job's slots host `h` can take now, or why none.
    pub(crate) fn host_room(
        &self,
        h: usize,
        exclusive: bool,
        queue_idx: usize,
        user: u32,
        rusage: &Rusage,
        avoided: Option<&BTreeSet<HostName>>,
    ) -> Result<u32, HostReason> {
        let host = &self.hosts[h];
        let config = &self.mbd.config.hosts[h];
        if host.free == 0 {
            return Err(HostReason::SlotLimit);
        }
        if host.exclusive {
            return Err(HostReason::ExclusiveRunning);
        }
        if exclusive && host.n_jobs > 0 {
            return Err(HostReason::NotExclusive);
        }
        if host.just_started {
            return Err(HostReason::JustStarted);
        }
        if avoided.is_some_and(|hosts| hosts.contains(&config.name)) {
            return Err(HostReason::Refused);
        }
        let mut room = host.free;
        let queue = &self.mbd.config.queues[queue_idx];
        let queue_used = self.queue_host_used.get(&(queue_idx, h)).copied().unwrap_or(0);
        if let Some(limit) = queue.cpu_slot_limit(host.n_cpus) {
            room =
                room.min(limit.checked_sub(queue_used).filter(|n| *n > 0).ok_or(HostReason::QueueCpuLimit)?);
        }
        if let Some(limit) = queue.hjob_limit {
            room =
                room.min(limit.checked_sub(queue_used).filter(|n| *n > 0).ok_or(HostReason::QueueHostLimit)?);
        }
        if let Some(limit) = config.user_job_limit {
            let used = self.user_host_used.get(&(user, h)).copied().unwrap_or(0);
            room = room.min(limit.checked_sub(used).filter(|n| *n > 0).ok_or(HostReason::HostUserLimit)?);
        }
        if !rusage.is_empty() {
            let view = self.view(h, config);
            for (idx, amount) in [
                (resreq::LOAD_MEM, rusage.mem),
                (resreq::LOAD_SWP, rusage.swp),
                (resreq::LOAD_TMP, rusage.tmp),
            ] {
                if amount > 0.0 {
                    match view.number(NumIndex::Load(idx as u8)) {
                        None => return Err(HostReason::LoadUnavailable),
                        Some(available) if available < amount => {
                            return Err(HostReason::Reservation(idx as u8));
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        Ok(room)
    }

    /// Hosts and slots for a job of `shape`, or the per-host reasons it has none.
    fn place(
        &mut self,
        shape: &Shape,
        queue_idx: usize,
        user: u32,
        avoided: Option<&BTreeSet<HostName>>,
    ) -> Result<Vec<(usize, u32)>, ReasonCounts> {
        let list = &self.candidate_lists[shape.candidates];
        let mut n_full = list.n_full;
        while list.hosts.get(n_full).is_some_and(|h| self.hosts[*h].free == 0) {
            n_full += 1;
        }
        let (rusage, span) = (list.rusage, list.span);
        let mut remaining = shape.n_slots;
        let mut chosen = Vec::new();
        for &h in &list.hosts[n_full..] {
            let Ok(room) = self.host_room(h, shape.exclusive, queue_idx, user, &rusage, avoided) else {
                continue;
            };
            let wanted = match span {
                Span::OneHost => remaining,
                Span::Ptile(per_host) => per_host.min(remaining),
                Span::Any => room.min(remaining),
            };
            if room >= wanted {
                chosen.push((h, wanted));
                remaining -= wanted;
                if remaining == 0 {
                    break;
                }
            }
        }
        self.candidate_lists[shape.candidates].n_full = n_full;
        if remaining == 0 {
            return Ok(chosen);
        }
        // Why not: every host gives one reason (a host with room, but too little, "Not enough job slot(s)").
        let list = &self.candidate_lists[shape.candidates];
        let mut reasons: Vec<HostReason> = vec![HostReason::SlotLimit; n_full];
        for &h in &list.hosts[n_full..] {
            reasons.push(match self.host_room(h, shape.exclusive, queue_idx, user, &rusage, avoided) {
                Ok(_) => HostReason::LessSlots,
                Err(reason) => reason,
            });
        }
        let mut counts = count(reasons);
        for (reason, n) in &list.excluded {
            match counts.iter_mut().find(|(r, _)| r == reason) {
                Some((_, total)) => *total += n,
                None => counts.push((*reason, *n)),
            }
        }
        counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Err(counts)
    }

    /// Takes the decision's resources out of the pass.
    fn commit(&mut self, decision: Decision, shape: &Shape, queue_idx: usize, user: u32) {
        let rusage = self.candidate_lists[shape.candidates].rusage;
        for &(h, n) in &decision.hosts {
            let host = &mut self.hosts[h];
            host.free -= n;
            host.n_jobs += 1;
            host.exclusive |= shape.exclusive;
            host.just_started |= self.mbd.config.job_accept_interval > 0;
            add_rusage(&mut host.reserved, &rusage);
            self.n_free -= u64::from(n);
            *self.queue_host_used.entry((queue_idx, h)).or_insert(0) += n;
            *self.user_host_used.entry((user, h)).or_insert(0) += n;
        }
        if decision.id.index() != 0 {
            *self.array_started.entry(decision.id.id()).or_insert(0) += 1;
        }
        if self.user_used.active {
            let mbd = self.mbd;
            let owner = &mbd.store.live_job(decision.id).user;
            self.user_used.add(mbd, owner, user, shape.n_slots);
        }
        self.queue_used[queue_idx] += shape.n_slots;
        *self.queue_user_used.entry((queue_idx, user)).or_insert(0) += shape.n_slots;
        self.decisions.push(decision);
    }

    /// Slots of `queue_idx` that `user` holds, started in this pass or before.
    pub(crate) fn user_slots(&mut self, queue_idx: usize, user: &'a UserName) -> u32 {
        let user = self.user_idx(user);
        self.queue_user_used.get(&(queue_idx, user)).copied().unwrap_or(0)
    }
}

impl Mbd {
    /// The reason of PEND job `job` that the last turn did not reach because the cluster was
    /// full: the job-level checks against the turn's end state, else, host by host, why it is
    /// not a candidate or, for every candidate, "Job slot limit reached" (no slot was free).
    pub(crate) fn turn_end_reason(&self, job: &Job) -> Option<PendReason> {
        let end = &self.links.turn_end;
        if !end.stopped || job.submit_seq > end.last_submission {
            return None;
        }
        let queue_idx = self.config.queues.iter().position(|queue| queue.name == job.queue)?;
        let queue = &self.config.queues[queue_idx];
        if let Some(text) = self.held_back(job) {
            return Some(PendReason::Job(JobReason::Held(text)));
        }
        let request = job.spec.request();
        let n_slots = job.n_slots();
        if s_to_ms(request.begin_time) > end.now_ms {
            return Some(PendReason::Job(JobReason::StartTime));
        }
        if queue
            .qjob_limit
            .is_some_and(|limit| end.queue_used.get(queue_idx).copied().unwrap_or(0) + n_slots > limit)
        {
            return Some(PendReason::Job(JobReason::QueueSlotLimit));
        }
        if let Some(limit) = queue.ujob_limit {
            let used = end
                .users
                .get(job.user.as_str())
                .and_then(|user| end.queue_user_used.get(&(queue_idx, *user)))
                .copied()
                .unwrap_or(0);
            if used + n_slots > limit {
                return Some(PendReason::Job(JobReason::QueueUserSlotLimit));
            }
        }
        let user_idx = end.users.get(job.user.as_str()).copied();
        if let Some(reason) = end.user_used.blocked(self, &job.user, user_idx, n_slots) {
            return Some(PendReason::Job(reason));
        }
        let key = (request.res_req.clone(), queue_idx, job.spec.hosts().to_vec());
        let mut asked = end.asked.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(counts) = asked.get(&key) {
            return Some(PendReason::Hosts(counts.clone()));
        }
        let req = ResReq::parse_with_unit(&request.res_req, self.config.resreq_unit_mb).ok();
        let mut reasons = Vec::with_capacity(self.config.hosts.len());
        for (config, (unusable, reserved)) in self.config.hosts.iter().zip(&end.hosts) {
            let view = HostView {
                config,
                lim: self.links.lim.get(&config.name),
                n_cpus: self.links.hosts.get(&config.name).map(|link| link.n_cpus),
                reserved: *reserved,
            };
            reasons.push(if let Some(reason) = unusable {
                *reason
            } else if !key.2.is_empty() && !key.2.contains(&config.name) {
                HostReason::NotSpecified
            } else if !queue.hosts.is_empty() && !queue.hosts.contains(&config.name) {
                HostReason::NotUsableToQueue
            } else if !request.res_req.trim().is_empty()
                && !req.as_ref().is_some_and(|req| req.selects(&view))
            {
                HostReason::ResourceRequirement
            } else {
                HostReason::SlotLimit
            });
        }
        let mut counts = count(reasons);
        counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let counts: SharedCounts = counts.into();
        asked.insert(key, counts.clone());
        Some(PendReason::Hosts(counts))
    }
}

fn add_rusage(total: &mut Rusage, more: &Rusage) {
    total.mem += more.mem;
    total.swp += more.swp;
    total.tmp += more.tmp;
}

/// A host's sort key under `req`'s order: lower sorts first, unknown values last.
fn order_key(req: &ResReq, view: &HostView<'_>) -> Vec<f64> {
    req.order
        .iter()
        .map(|key| match view.number(key.index) {
            Some(value) if key.index.lower_is_better() != key.reversed => value,
            Some(value) => -value,
            None => f64::INFINITY,
        })
        .collect()
}

/// Reasons counted, in first-seen order.
fn count(reasons: Vec<HostReason>) -> Vec<(HostReason, u32)> {
    let mut counts: Vec<(HostReason, u32)> = Vec::new();
    for reason in reasons {
        match counts.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => counts.push((reason, 1)),
        }
    }
    counts
}

/// Fairshare order of one queue's pending jobs: repeatedly the user with the
/// highest dynamic priority, shares / (1 + slots the user's jobs of the queue
/// hold), offers its oldest job not yet considered; ties go to the user name
/// first in byte order. Slots started during the pass count at once.
pub(crate) fn fairshare_walk<'a>(pass: &mut Pass<'a>, queue_idx: usize, ids: &BTreeSet<(i64, JobRef)>) {
    let mbd = pass.mbd;
    let queue = &mbd.config.queues[queue_idx];
    let mut by_user: std::collections::BTreeMap<&'a UserName, VecDeque<&'a Job>> =
        std::collections::BTreeMap::new();
    for (_, id) in ids {
        let job = mbd.store.live_job(*id);
        by_user.entry(&job.user).or_default().push_back(job);
    }
    loop {
        if pass.cluster_full() {
            // Nothing more starts; the jobs left get their reasons when asked (`TurnEnd`).
            return;
        }
        let mut best: Option<(&'a UserName, u64, u64)> = None;
        for user in by_user.keys() {
            let shares = u64::from(queue.shares(user));
            let load = 1 + u64::from(pass.user_slots(queue_idx, user));
            // shares/load > best_shares/best_load, in integers.
            if best
                .is_none_or(|(_, s, l)| u128::from(shares) * u128::from(l) > u128::from(s) * u128::from(load))
            {
                best = Some((user, shares, load));
            }
        }
        let Some((user, _, _)) = best else { return };
        let jobs = by_user.get_mut(user).expect("the user was just found");
        let job = jobs.pop_front().expect("users without jobs are removed");
        if jobs.is_empty() {
            by_user.remove(user);
        }
        pass.consider(job, queue_idx);
    }
}
