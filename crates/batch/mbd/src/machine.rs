//! [`Mbd`]: the state machine itself — the durable store, the transient links
//! to the execution hosts, and [`Mbd::step`], which routes each input to the
//! module that decides it and orders the effects.
//!
//! Every decision goes through [`Mbd::record`], which applies the event with
//! the same [`Store::apply`] that replay uses and then queues it for the log,
//! so the live state can never hold a change the log lacks.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use lava_batch_ll::{HostName, JobRef};
use lava_batch_wire as wire;

use crate::MbdError;
use crate::config::MbdConfig;
use crate::effect::{ClientReply, Effect, ToSbd};
use crate::event::{Event, MbdStartRecord};
use crate::input::{ClientId, Input, LimFacts};
use crate::job::Job;
use crate::placement::{HashMap, PendReason, ResReqCache, TurnEnd};
use crate::state::{MbdSnapshot, Store};

/// Above this many jobs, debug builds stop re-checking every invariant after
/// each step (the check is linear in the jobs).
pub const INVARIANT_CHECK_JOBS_MAX: usize = 2_000;

/// A connected (or once connected) sbatchd; transient, rebuilt by registration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HostLink {
    pub(crate) n_cpus: u32,
    pub(crate) connected: bool,
    /// Slots in use when the host registered: a host may come back smaller
    /// than the work it still runs, and that is not an overcommit of ours.
    pub(crate) slots_used_at_registration: u32,
}

/// The transient state: what a restart forgets and rebuilds.
#[derive(Clone, Debug, Default)]
pub(crate) struct Links {
    pub(crate) hosts: BTreeMap<HostName, HostLink>,
    /// When NEW_JOB was last sent, for started jobs not yet accepted.
    pub(crate) new_job_sent_ms: BTreeMap<JobRef, u64>,
    /// When JOB_SIGNAL was last sent, by (job, signal sequence).
    pub(crate) signal_sent_ms: BTreeMap<(JobRef, u32), u64>,
    /// When the kill of a run `bkill -r` ended was last sent (`control`), for the
    /// runs whose host has not answered it yet.
    pub(crate) forced_kill_sent_ms: BTreeMap<JobRef, u64>,
    /// Runs `bkill -r` ended whose host answered the kill or reported their end:
    /// no more resends on the timer (registration still sends it again).
    pub(crate) forced_kill_settled: BTreeSet<JobRef>,
    /// Hosts that refused a job; it is not sent there again until that host re-registers.
    pub(crate) avoid: BTreeMap<JobRef, BTreeSet<HostName>>,
    /// Hosts the master lim marks unavailable (`Input::HostAvailability`).
    pub(crate) unavailable: BTreeSet<HostName>,
    /// lim's loads and static facts by host (`Input::HostLoad`).
    pub(crate) lim: BTreeMap<HostName, LimFacts>,
    /// Parsed `-R` strings (`placement`).
    pub(crate) resreqs: ResReqCache,
    /// Why each pending job the last dispatch turn considered did not start.
    pub(crate) reasons: HashMap<JobRef, PendReason>,
    /// When each host last took a job (`JOB_ACCEPT_INTERVAL`; kept only when it is set).
    pub(crate) last_start_ms: BTreeMap<HostName, u64>,
    /// The last turn's end state, for the reasons of the jobs it did not reach.
    pub(crate) turn_end: TurnEnd,
    /// When the last dispatch turn ran.
    pub(crate) last_pass_ms: Option<u64>,
    /// A step wanted a dispatch turn that was left to [`Input::Dispatch`]
    /// (`MbdConfig::deferred_dispatch`).
    pub(crate) turn_wanted: bool,
    /// The earliest begin time (`-b`) still ahead at the last turn.
    pub(crate) next_begin_ms: Option<u64>,
    /// The event log's file system is full (`Input::DiskFull`).
    pub(crate) disk_full: bool,
}

/// The effects of one step while it is being decided: the log appends come
/// first, then the messages, so the shell waits for durability once per step.
pub(crate) struct Step {
    pub(crate) now_ms: u64,
    appends: Vec<Event>,
    messages: Vec<Effect>,
    /// Whether a job was added or a slot freed: dispatch runs at the end of the step.
    pub(crate) dispatch: bool,
    /// Whether the periodic dispatch turn is due (`sched`): it runs even when no slot is free.
    pub(crate) full_turn: bool,
}

/// mbatchd's logic. See the crate documentation for the contract.
#[derive(Clone, Debug)]
pub struct Mbd {
    pub(crate) config: MbdConfig,
    pub(crate) store: Store,
    pub(crate) links: Links,
}

impl Mbd {
    /// A fresh mbatchd with no job, for a new cluster or before replay.
    pub fn new(config: MbdConfig) -> Result<Mbd, MbdError> {
        config.validate()?;
        Ok(Mbd { config, store: Store::default(), links: Links::default() })
    }

    /// An mbatchd restored from a snapshot; replay the events logged after it with [`Mbd::replay`].
    pub fn from_snapshot(config: MbdConfig, snapshot: MbdSnapshot) -> Result<Mbd, MbdError> {
        config.validate()?;
        Ok(Mbd { config, store: Store::from_snapshot(snapshot)?, links: Links::default() })
    }

    /// Applies one event: the only mutation of durable state, used by every
    /// step for the events it decides and by [`Mbd::replay`]. An event that does
    /// not fit the state is an error and changes nothing; this strictness is
    /// what makes a decided event that does not apply a bug (`record` panics)
    /// rather than a log entry. Replay uses [`Mbd::replay`], which in addition
    /// ignores the events the protocol's replay rules say to ignore.
    pub fn apply(&mut self, event: &Event) -> Result<(), MbdError> {
        self.store.apply(event)?;
        if let Some(job) = event.job() {
            self.sync_links(job);
        }
        Ok(())
    }

    /// [`Mbd::apply`] of an event the caller has no further use for (replay): the
    /// same checks and the same resulting state, without copying JOB_NEW's
    /// submission.
    pub fn apply_owned(&mut self, event: Event) -> Result<(), MbdError> {
        let job = event.job();
        self.store.apply_owned(event)?;
        if let Some(job) = job {
            self.sync_links(job);
        }
        Ok(())
    }

    /// The durable state, to be written by the event log's snapshot hook.
    pub fn snapshot(&self) -> MbdSnapshot {
        self.store.snapshot()
    }

    /// Whether `other` holds the same durable state as this one: the same answer as
    /// comparing [`Mbd::snapshot`]s, far cheaper (finished jobs are compared encoded).
    pub fn same_durable_state(&self, other: &Mbd) -> bool {
        self.store.same_state(&other.store)
    }

    /// Whether a step left a dispatch turn for [`Input::Dispatch`]
    /// ([`MbdConfig::deferred_dispatch`]).
    pub fn turn_wanted(&self) -> bool {
        self.links.turn_wanted
    }

    /// The configuration in force.
    pub fn config(&self) -> &MbdConfig {
        &self.config
    }

    /// A job in memory (a finished one is decoded from its compact form).
    pub fn job(&self, job: JobRef) -> Option<Cow<'_, Job>> {
        self.store.job(job)
    }

    /// The `lsb.acct` records of every finished job in memory (jobs are dropped at
    /// `CLEAN_PERIOD`), oldest end first: what mbatchd checks `lsb.acct` against at start.
    pub fn finished_acct_records(&self) -> Vec<lava_batch_ll::acct::AcctRecord> {
        let mut records: Vec<_> = self
            .store
            .all_jobs()
            .filter(|(_, job)| job.status().is_finished())
            .filter_map(|(_, job)| job.acct_record())
            .collect();
        records.sort_by_key(|record| (record.event_time, record.job_id, record.idx));
        records
    }

    /// The last job id given (the highest until the ids wrap at `MAX_JOBID`).
    pub fn last_job_id(&self) -> u32 {
        self.store.last_job_id
    }

    /// The last submission number given: the JOB_NEWs applied so far (`Job::submit_seq`).
    pub fn last_submission(&self) -> u64 {
        self.store.last_submission
    }

    /// Decides `input` at time `now_ms` (ms since the epoch) and appends the
    /// effects to `effects`: first every log append, then every message, in
    /// the order they must be carried out.
    pub fn step(&mut self, now_ms: u64, input: Input, effects: &mut Vec<Effect>) {
        let mut step =
            Step { now_ms, appends: Vec::new(), messages: Vec::new(), dispatch: false, full_turn: false };
        let flush = matches!(input, Input::Dispatch);
        match input {
            Input::Start => {
                let record = MbdStartRecord {
                    time_ms: now_ms,
                    master_host: self.config.master_host.clone(),
                    cluster_name: self.config.cluster_name.clone(),
                };
                self.record(&mut step, Event::MbdStart(record));
                self.settle_torn_steps(&mut step);
            }
            Input::Submit { client, request_id, caller, spec } => {
                self.submit(&mut step, client, request_id, &caller, *spec)
            }
            Input::Query { client, caller, query } => self.query(&mut step, client, &caller, &query),
            Input::Signal { client, request_id, caller, request } => {
                self.signal_request(&mut step, client, request_id, &caller, &request)
            }
            Input::HostRegistered { host, n_cpus } => self.host_registered(&mut step, host, n_cpus),
            Input::HostDisconnected { host } => {
                if let Some(link) = self.links.hosts.get_mut(&host) {
                    link.connected = false;
                }
            }
            Input::NewJobReply { host, reply } => self.new_job_reply(&mut step, &host, &reply),
            Input::JobExecute { host, msg } => self.job_execute(&mut step, &host, &msg),
            Input::JobFinish { host, msg } => self.job_finish(&mut step, &host, &msg),
            Input::JobSignalReply { host, msg } => self.signal_reply(&mut step, &host, &msg),
            Input::HostAvailability { host, available } => self.host_availability(&mut step, host, available),
            Input::HostLoad { host, facts } => self.host_load(host, *facts),
            Input::DiskFull { full } => self.links.disk_full = full,
            Input::Tick => self.tick(&mut step),
            Input::Dispatch => step.dispatch = self.links.turn_wanted,
            Input::Reconfigure { config } => self.reconfigure(&mut step, *config),
            Input::JobControl { client, request_id, caller, request } => {
                self.job_control(&mut step, client, request_id, &caller, &request, None)
            }
            Input::Requeue { client, request_id, caller, request, submissions } => self.job_control(
                &mut step,
                client,
                request_id,
                &caller,
                &request,
                Some((request_id, &submissions)),
            ),
            Input::AdminControl { client, caller, request } => {
                self.admin_control(&mut step, client, &caller, &request)
            }
        }
        if step.full_turn || (step.dispatch && (flush || !self.config.deferred_dispatch)) {
            self.links.turn_wanted = false;
            self.dispatch(&mut step);
        } else if step.dispatch {
            self.links.turn_wanted = true;
        }
        effects.extend(step.appends.into_iter().map(Effect::Append));
        effects.extend(step.messages);
        if cfg!(debug_assertions)
            && self.store.len() <= INVARIANT_CHECK_JOBS_MAX
            && let Err(problem) = self.check_invariants()
        {
            panic!("mbd invariant broken after a step: {problem}");
        }
    }

    /// Applies a decided event and queues it for the log.
    pub(crate) fn record(&mut self, step: &mut Step, event: Event) {
        if let Err(error) = self.apply(&event) {
            panic!("a decided event must apply to the state it was decided on: {error}");
        }
        // A job that ends may release the jobs that depend on it.
        if let Event::JobStatus(record) = &event {
            step.dispatch |= record.status.is_finished();
        }
        step.appends.push(event);
    }

    /// Queues a message to `host`'s sbatchd.
    pub(crate) fn send(&self, step: &mut Step, host: &HostName, msg: ToSbd) {
        step.messages.push(Effect::SendSbd { host: host.clone(), op: msg.operation(), msg });
    }

    /// Queues an answer to a client.
    pub(crate) fn reply(&self, step: &mut Step, client: ClientId, reply: ClientReply) {
        step.messages.push(Effect::Reply { client, reply });
    }

    /// Whether `host`'s sbatchd is connected now.
    pub(crate) fn is_connected(&self, host: &HostName) -> bool {
        self.links.hosts.get(host).is_some_and(|link| link.connected)
    }

    /// Job slots of `host`: MXJ, else the CPUs it registered with.
    pub(crate) fn capacity(&self, host: &HostName, link: &HostLink) -> u32 {
        self.config.host(host).and_then(|h| h.max_jobs).unwrap_or(link.n_cpus)
    }

    /// Whether `config` may replace the running configuration without a restart:
    /// valid, and the same cluster, master and execution hosts (queues, their
    /// priorities and hosts, MXJ, administrators and periods may change).
    pub fn reconfigurable(&self, config: &MbdConfig) -> Result<(), String> {
        config.validate().map_err(|error| error.to_string())?;
        let names = |c: &MbdConfig| c.hosts.iter().map(|h| h.name.clone()).collect::<Vec<_>>();
        if config.cluster_name != self.config.cluster_name
            || config.master_host != self.config.master_host
            || names(config) != names(&self.config)
        {
            return Err("the cluster's hosts changed (lsf.cluster); restart mbatchd to take them".to_owned());
        }
        Ok(())
    }

    /// `badmin reconfig` ([`Input::Reconfigure`]): the new configuration is in force
    /// from this step; dispatch runs, since a new queue or more slots may start jobs.
    /// Jobs of a queue that is gone stay pending, as after a restart.
    fn reconfigure(&mut self, step: &mut Step, config: MbdConfig) {
        if self.reconfigurable(&config).is_err() {
            // The shell checks first; a configuration that slipped through changes nothing.
            return;
        }
        self.config = config;
        // A host whose MXJ went below the slots its jobs hold keeps them, as a host that
        // registers with fewer CPUs than its jobs use does (the slot bound allows both).
        for (host, link) in &mut self.links.hosts {
            let used = self.store.index.slots_used.get(host).copied().unwrap_or(0);
            link.slots_used_at_registration = link.slots_used_at_registration.max(used);
        }
        step.dispatch = true;
    }

    /// Drops transient bookkeeping that no longer matches job `id`'s durable state.
    fn sync_links(&mut self, id: JobRef) {
        // Only an unfinished job has unanswered intents (a finish clears them).
        let job = self.store.live(id);
        if !self.store.index.unaccepted.contains(&id) {
            self.links.new_job_sent_ms.remove(&id);
        }
        let stale: Vec<(JobRef, u32)> = self
            .links
            .signal_sent_ms
            .range((id, 0)..=(id, u32::MAX))
            .map(|(key, _)| *key)
            .filter(|(_, seq)| !job.is_some_and(|j| j.pending_signals.iter().any(|p| p.signal_seq == *seq)))
            .collect();
        for key in stale {
            self.links.signal_sent_ms.remove(&key);
        }
        if job.is_none() {
            self.links.avoid.remove(&id);
        }
    }

    fn host_registered(&mut self, step: &mut Step, host: HostName, n_cpus: u32) {
        if self.config.host(&host).is_none() {
            // The shell admits only cluster hosts; a stray name changes nothing.
            return;
        }
        let slots_used_at_registration = self.store.index.slots_used.get(&host).copied().unwrap_or(0);
        self.links
            .hosts
            .insert(host.clone(), HostLink { n_cpus, connected: true, slots_used_at_registration });
        for avoided in self.links.avoid.values_mut() {
            avoided.remove(&host);
        }
        self.links.avoid.retain(|_, avoided| !avoided.is_empty());
        let ack = wire::SbdRegisterAck {
            cluster_name: self.config.cluster_name.clone(),
            master_name: self.config.master_host.to_string(),
        };
        self.send(step, &host, ToSbd::RegisterAck(ack));
        self.resend_to_host(step, &host);
        step.dispatch = true;
    }

    /// The invariants of the durable state alone (per job, ids, request ids, indexes):
    /// what holds after any prefix of the log, a torn step's included — a follower among
    /// the master candidates applies the committed log, which may end inside a step.
    pub fn check_durable_invariants(&self) -> Result<(), String> {
        self.store.check()
    }

    /// Every invariant of the state: the durable ones (per job, ids, request
    /// ids, indexes) and the transient ones (no host over its slots, resend
    /// bookkeeping only for what is outstanding). Tests and the simulation call
    /// it after every step; debug builds do too.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.store.check()?;
        // The durable state may hold a torn step's unanswered intent of a
        // pending job; Start answers it, so no step ever leaves one.
        if let Some((_, job)) =
            self.store.live_jobs().find(|(_, j)| j.status.is_pending() && !j.pending_signals.is_empty())
        {
            return Err(format!("job {}: pending with an unanswered intent after a step", job.job));
        }
        for (host, used) in &self.store.index.slots_used {
            if let Some(link) = self.links.hosts.get(host).filter(|link| link.connected) {
                let bound = self.capacity(host, link).max(link.slots_used_at_registration);
                if *used > bound {
                    return Err(format!("host {host}: {used} slots used, at most {bound}"));
                }
            }
        }
        if let Some(host) = self.links.unavailable.iter().find(|h| self.config.host(h).is_none()) {
            return Err(format!("host {host} is marked unavailable but not configured"));
        }
        if let Some(host) = self.links.hosts.keys().find(|h| self.config.host(h).is_none()) {
            return Err(format!("host {host} is linked but not configured"));
        }
        if let Some(id) =
            self.links.new_job_sent_ms.keys().find(|id| !self.store.index.unaccepted.contains(id))
        {
            return Err(format!("job {id}: NEW_JOB resend armed for an accepted or unstarted job"));
        }
        for (id, seq) in self.links.signal_sent_ms.keys() {
            let pending =
                self.store.live(*id).is_some_and(|j| j.pending_signals.iter().any(|p| p.signal_seq == *seq));
            if !pending {
                return Err(format!("job {id}: signal {seq} resend armed but not pending"));
            }
        }
        if let Some(id) = self.links.avoid.keys().find(|id| self.store.live(**id).is_none()) {
            return Err(format!("job {id}: refusal memory kept for a finished or cleaned job"));
        }
        Ok(())
    }
}
