//! sbatchd's shell, exactly as lava-sbd's shell contract prescribes, over a
//! simulated state directory.
//!
//! - Effects in the groups of [`lava_sbd::commit_groups`], as sbatchd carries
//!   them out: a group's record changes first (each Persist's record written as
//!   XDR, then one fsync for them all, which takes virtual time), then its other
//!   effects in order; nothing after the fsync (no Launch, Kill, Send, and no
//!   further step) happens before it is done. A crash between the writes and
//!   the fsync loses each write or not (the page cache may have written it
//!   back), both as on a real disk. A Note is kept at once and written back
//!   whenever the page cache likes: a crash keeps or loses each noted record
//!   (newer than its durable one) independently.
//! - Launch starts a shepherd (see [`crate::process`]), then the shell feeds
//!   Spawned, or SpawnFailed when no shepherd could start.
//! - Restart: [`Sbd::restore`] from the durable records only, then adoption:
//!   Spawned for each job awaiting adoption whose shepherd exists (it
//!   survived the crash), NotLaunched for the others, and Exited for every
//!   job whose shepherd has recorded an exit.
//! - Channel: connect, send SBD_REGISTER, feed Connected on SBD_REGISTER_ACK;
//!   feed Disconnected when the connection's death is noticed, and reconnect.

use std::collections::{BTreeMap, VecDeque};

use lava_batch_ll::{JobRef, JobSpec};
use lava_batch_wire as wire;
use lava_mbd::ToSbd;
use lava_sbd::{Ack, Effect, Input, JobRecord, Sbd, ToMbd, UserInfo, invariants};

use crate::codec::{self, FromSbd};
use crate::world::{Ev, REGISTER_TIMEOUT_MS, Route, World};

/// One execution host's sbatchd process and its state directory.
pub struct SbdNode {
    /// The logic while the process runs.
    pub sbd: Option<Sbd>,
    /// Starts so far; reports of a dead incarnation's children are void.
    pub incarnation: u64,
    /// Durable record files (XDR bytes), by job.
    pub disk: BTreeMap<JobRef, Vec<u8>>,
    /// The same records decoded, to check effect lists against.
    pub durable: BTreeMap<JobRef, JobRecord>,
    /// Records written by the group commit under way and not yet fsynced.
    pub writing: Vec<(JobRef, Vec<u8>)>,
    /// Noted records, newer than the durable ones, not yet written back.
    pub noted: BTreeMap<JobRef, JobRecord>,
    /// Groups of effects ([`lava_sbd::commit_groups`]) not yet begun, in order.
    pub groups: VecDeque<Vec<Effect>>,
    /// The effects of the group under way after its record changes, in order.
    pub after: VecDeque<Effect>,
    /// Inputs waiting for the previous step's effects to be carried out.
    pub inbox: VecDeque<Input>,
    /// Waiting for an fsync.
    pub busy: bool,
    /// The connection this sbatchd holds (registered or not).
    pub conn: Option<u64>,
    /// SBD_REGISTER_ACK arrived on `conn`: the logic was fed Connected.
    pub registered: bool,
    /// A connection attempt is scheduled.
    pub connect_armed: bool,
}

impl SbdNode {
    /// The records the shell holds: the durable ones, overlaid by the noted ones.
    fn held_records(&self) -> BTreeMap<JobRef, JobRecord> {
        let mut held = self.durable.clone();
        held.extend(self.noted.iter().map(|(job, record)| (*job, record.clone())));
        held
    }

    /// A host whose sbatchd has not started yet, with an empty state directory.
    pub fn new() -> SbdNode {
        SbdNode {
            sbd: None,
            incarnation: 0,
            disk: BTreeMap::new(),
            durable: BTreeMap::new(),
            writing: Vec::new(),
            noted: BTreeMap::new(),
            groups: VecDeque::new(),
            after: VecDeque::new(),
            inbox: VecDeque::new(),
            busy: false,
            conn: None,
            registered: false,
            connect_armed: false,
        }
    }

    /// Whether the process runs.
    pub fn is_up(&self) -> bool {
        self.sbd.is_some()
    }
}

impl Default for SbdNode {
    fn default() -> SbdNode {
        SbdNode::new()
    }
}

impl World {
    /// The first start of `host`'s sbatchd.
    pub fn sbd_boot(&mut self, host: usize) {
        self.sbd_restart(host);
    }

    /// Contract steps 1 and 2: restore from the durable records, adopt.
    pub fn sbd_restart(&mut self, host: usize) {
        if self.sbds[host].is_up() {
            return;
        }
        let node = &mut self.sbds[host];
        node.incarnation += 1;
        let records: Vec<JobRecord> = node.disk.values().map(|bytes| codec::from_record(bytes)).collect();
        let sbd = match Sbd::restore(self.sbd_config.clone(), records) {
            Ok(sbd) => sbd,
            Err(error) => {
                self.violation(format!("sbd {} cannot restore its records: {error}", self.hosts[host]))
            }
        };
        if let Err(violation) = sbd.check_invariants() {
            self.violation(format!("sbd {} invariant after restore: {violation}", self.hosts[host]));
        }
        let mut adoption = Vec::new();
        let awaiting: Vec<JobRef> = sbd.awaiting_adoption().collect();
        for job in &awaiting {
            match self.procs.get(&(host, *job)) {
                Some(proc) => {
                    adoption.push(Input::Spawned {
                        job: *job,
                        pid: proc.pid,
                        pgid: proc.pid,
                        exec_time_ms: proc.exec_time_ms,
                    });
                    if let Some(exited) = self.exit_report(host, *job) {
                        adoption.push(exited);
                    }
                }
                None => adoption.push(Input::NotLaunched { job: *job }),
            }
        }
        for record in sbd.jobs().filter(|r| r.is_running()) {
            if !self.procs.contains_key(&(host, record.job)) {
                self.violation(format!(
                    "job {}: running record on {} without a shepherd",
                    record.job, self.hosts[host]
                ));
            }
            if let Some(exited) = self.exit_report(host, record.job) {
                adoption.push(exited);
            }
        }
        self.trace.line(self.now_ms, || {
            format!("sbd {}: start #{}; adoption {adoption:?}", self.hosts[host], self.sbds[host].incarnation)
        });
        let node = &mut self.sbds[host];
        node.sbd = Some(sbd);
        node.inbox.extend(adoption);
        node.conn = None;
        node.registered = false;
        self.sbd_pump(host);
        self.sbd_arm_connect(host, 0);
    }

    /// Crashes `host`'s sbatchd: effects not carried out are lost, and so is
    /// a written record not yet fsynced, unless the page cache wrote it back.
    pub fn sbd_crash(&mut self, host: usize) {
        self.stats.n_sbd_crashes += 1;
        let survives = self.rng.chance(0.5);
        let node = &mut self.sbds[host];
        let lost = node.after.len() + node.groups.iter().map(Vec::len).sum::<usize>();
        for (job, bytes) in std::mem::take(&mut node.writing) {
            if survives {
                node.durable.insert(job, codec::from_record(&bytes));
                node.disk.insert(job, bytes);
            }
        }
        for (job, record) in std::mem::take(&mut self.sbds[host].noted) {
            if self.rng.chance(0.5) {
                let node = &mut self.sbds[host];
                node.disk.insert(job, codec::to_record(&record));
                node.durable.insert(job, record);
            }
        }
        let node = &mut self.sbds[host];
        node.sbd = None;
        node.groups.clear();
        node.after.clear();
        node.inbox.clear();
        node.busy = false;
        node.registered = false;
        let conn = node.conn.take();
        self.trace.line(self.now_ms, || {
            format!("sbd {}: CRASH with {lost} effects not carried out", self.hosts[host])
        });
        if conn.is_some() && self.links[host].conn == conn {
            self.kill_link(host);
        }
        let downtime = if self.healing { 0 } else { self.rng.range(100, 5_000) };
        self.at(downtime, Ev::SbdRestart(host));
    }

    /// Queues an input for `host`'s sbatchd and runs what can run.
    pub fn sbd_input(&mut self, host: usize, input: Input) {
        if self.sbds[host].is_up() {
            self.sbds[host].inbox.push_back(input);
            self.sbd_pump(host);
        }
    }

    /// Carries out effects, and steps queued inputs once the effects are done,
    /// until the process waits for an fsync or has nothing to do.
    pub fn sbd_pump(&mut self, host: usize) {
        loop {
            let node = &mut self.sbds[host];
            if !node.is_up() || node.busy {
                return;
            }
            if let Some(effect) = node.after.pop_front() {
                self.sbd_carry_out(host, effect);
            } else if let Some(group) = node.groups.pop_front() {
                self.sbd_commit_group(host, group);
            } else if let Some(input) = node.inbox.pop_front() {
                self.sbd_step(host, input);
            } else {
                return;
            }
        }
    }

    fn sbd_step(&mut self, host: usize, input: Input) {
        self.stats.n_sbd_steps += 1;
        let now_ms = self.now_ms;
        let trace_input = self.trace.enabled().then(|| format!("{input:?}"));
        let node = &mut self.sbds[host];
        let Some(sbd) = node.sbd.as_mut() else { return };
        let mut effects = Vec::new();
        sbd.step(now_ms, input, &mut effects);
        let checked = sbd
            .check_invariants()
            .and_then(|()| invariants::check_effects(&mut node.held_records(), &effects));
        if let Some(text) = trace_input {
            let name = &self.hosts[host];
            self.trace.line(now_ms, || format!("sbd {name}: step {}", crate::mbd_shell::shorten(&text)));
            for effect in &effects {
                self.trace.line(now_ms, || {
                    format!("sbd {name}:   -> {}", crate::mbd_shell::shorten(&format!("{effect:?}")))
                });
            }
        }
        if let Err(violation) = checked {
            self.violation(format!("sbd {}: {violation}", self.hosts[host]));
        }
        self.sbds[host].groups.extend(lava_sbd::commit_groups(effects));
    }

    /// Begins a group: its record changes in order, the Persists' records written and
    /// one fsync started for them all; its other effects wait in `after`.
    fn sbd_commit_group(&mut self, host: usize, group: Vec<Effect>) {
        if !self.healing && self.rng.chance(self.params.crash_between_effects_p) {
            self.sbds[host].groups.push_front(group);
            self.sbd_crash(host);
            return;
        }
        for effect in group {
            match effect {
                Effect::Persist(job, record) => {
                    let bytes = codec::to_record(&record);
                    self.trace.mix_bytes(&bytes);
                    let node = &mut self.sbds[host];
                    node.noted.remove(&job);
                    node.writing.retain(|(written, _)| *written != job);
                    node.writing.push((job, bytes));
                }
                Effect::Note(job, record) => {
                    self.trace.mix_bytes(&codec::to_record(&record));
                    self.sbds[host].noted.insert(job, record);
                }
                Effect::Remove(job) => {
                    let node = &mut self.sbds[host];
                    node.noted.remove(&job);
                    node.writing.retain(|(written, _)| *written != job);
                    node.disk.remove(&job);
                    node.durable.remove(&job);
                    if let Some(proc) = self.procs.remove(&(host, job))
                        && !proc.has_exited()
                    {
                        self.violation(format!("job {job}: record removed while its process runs"));
                    }
                }
                other => self.sbds[host].after.push_back(other),
            }
        }
        let node = &mut self.sbds[host];
        if !node.writing.is_empty() {
            node.busy = true;
            let incarnation = node.incarnation;
            let delay = self.rng.range(0, self.params.record_fsync_max_ms);
            self.at(delay, Ev::SbdFsyncDone { host, incarnation });
        }
    }

    fn sbd_carry_out(&mut self, host: usize, effect: Effect) {
        if !self.healing && self.rng.chance(self.params.crash_between_effects_p) {
            self.sbds[host].after.push_front(effect);
            self.sbd_crash(host);
            return;
        }
        match effect {
            Effect::Persist(..) | Effect::Note(..) | Effect::Remove(..) => {
                unreachable!("record changes are made by sbd_commit_group")
            }
            Effect::Launch { job, run_spec } => self.launch(host, job, &run_spec),
            Effect::Kill { job, pgid, signal } => self.kill(host, job, pgid, signal),
            Effect::Send(message) => {
                self.oracle_check_sbd_send(host, &message);
                if let ToMbd::NewJobReply(wire::NewJobReply {
                    outcome: wire::NewJobOutcome::Refused { .. },
                    ..
                }) = &message
                {
                    self.stats.n_refusals += 1;
                }
                let Some(conn) = self.sbds[host].conn else { return };
                let bytes = codec::encode_to_mbd(&FromSbd::Message(message));
                self.transmit(Route::ToMbd { host, conn }, bytes);
            }
        }
    }

    /// The fsync of the group commit under way finished.
    pub fn sbd_fsync_done(&mut self, host: usize, incarnation: u64) {
        let node = &mut self.sbds[host];
        if !node.is_up() || node.incarnation != incarnation {
            return;
        }
        assert!(!node.writing.is_empty(), "an fsync finishes only a write in progress");
        for (job, bytes) in std::mem::take(&mut node.writing) {
            node.durable.insert(job, codec::from_record(&bytes));
            node.disk.insert(job, bytes);
        }
        node.busy = false;
        self.sbd_pump(host);
    }

    /// The Exited input for a job whose shepherd has recorded an exit.
    pub fn exit_report(&self, host: usize, job: JobRef) -> Option<Input> {
        let proc = self.procs.get(&(host, job))?;
        let (wait_status, end_time_ms) = proc.exit()?;
        let rusage = wire::ResourceUsage {
            user_time_ms: u64::from(proc.pid.unsigned_abs()),
            system_time_ms: 1,
            max_rss_kb: 1024,
        };
        Some(Input::Exited { job, wait_status, rusage, end_time_ms })
    }

    // ----- the channel -----

    /// Schedules a connection attempt unless one is scheduled.
    pub fn sbd_arm_connect(&mut self, host: usize, delay_ms: u64) {
        if !self.sbds[host].connect_armed {
            self.sbds[host].connect_armed = true;
            self.at(delay_ms, Ev::SbdConnect(host));
        }
    }

    /// Connects to mbatchd and registers, if the network and mbatchd allow.
    pub fn sbd_connect(&mut self, host: usize) {
        self.sbds[host].connect_armed = false;
        let node = &self.sbds[host];
        if !node.is_up() || node.conn.is_some() {
            return;
        }
        let partitioned = self.now_ms < self.links[host].partitioned_until_ms;
        let master_up = match &self.repl {
            Some(repl) => repl.is_up(repl.sbd_target[host]),
            None => self.mbd.is_up(),
        };
        if !master_up && self.repl.is_some() {
            // Connection refused: sbatchd tries the next candidate.
            self.repl_sbd_next(host, None);
        }
        if partitioned || !master_up || self.links[host].conn.is_some() {
            let backoff = self.rng.range(200, 2_000);
            self.sbd_arm_connect(host, backoff);
            return;
        }
        let conn = self.new_conn();
        self.links[host].conn = Some(conn);
        self.links[host].fifo_last_ms = [self.now_ms; 2];
        self.links[host].candidate = self.repl.as_ref().map_or(0, |repl| repl.sbd_target[host]);
        let node = &mut self.sbds[host];
        node.conn = Some(conn);
        node.registered = false;
        self.trace.line(self.now_ms, || format!("sbd {}: connection {conn} opened", self.hosts[host]));
        let register = wire::SbdRegister {
            host_name: self.hosts[host].to_string(),
            n_cpus: self.params.host_cpus[host],
            sbd_pid: 500 + host as u32,
        };
        let bytes = codec::encode_to_mbd(&FromSbd::Register(register));
        self.transmit(Route::ToMbd { host, conn }, bytes);
        self.at(REGISTER_TIMEOUT_MS, Ev::RegisterTimeout { host, conn });
    }

    /// No SBD_REGISTER_ACK in time: drop the connection and try again.
    pub fn sbd_register_timeout(&mut self, host: usize, conn: u64) {
        let node = &self.sbds[host];
        if node.conn == Some(conn) && !node.registered {
            self.trace.line(self.now_ms, || format!("sbd {}: registration timed out", self.hosts[host]));
            if self.repl.is_some() {
                self.repl_sbd_next(host, None);
            }
            self.sbds[host].conn = None;
            if self.links[host].conn == Some(conn) {
                self.kill_link(host);
            }
            self.sbd_arm_connect(host, 0);
        }
    }

    /// sbatchd noticed that its connection `conn` died.
    pub fn sbd_detect_down(&mut self, host: usize, conn: u64) {
        let node = &mut self.sbds[host];
        if node.conn != Some(conn) {
            return;
        }
        node.conn = None;
        let was_registered = std::mem::replace(&mut node.registered, false);
        if was_registered {
            self.sbd_input(host, Input::Disconnected);
        }
        self.sbd_arm_connect(host, 0);
    }

    /// A frame from mbatchd, through wire and ll into an input.
    pub fn sbd_receive(&mut self, host: usize, bytes: &[u8]) {
        let message = match codec::decode_to_sbd(bytes) {
            Ok(message) => message,
            Err(error) => self.violation(format!("sbd {} cannot decode a frame: {error}", self.hosts[host])),
        };
        let job_ref = |world: &World, job: wire::WireJobRef| -> JobRef {
            match lava_batch_ll::job_ref("ack.job", job) {
                Ok(job) => job,
                Err(error) => world.violation(format!("mbd sent an ACK naming no job: {error}")),
            }
        };
        let input = match message {
            ToSbd::RegisterAck(_) => {
                if self.sbds[host].registered {
                    return; // one registration per connection
                }
                self.sbds[host].registered = true;
                Input::Connected
            }
            ToSbd::NewJob(specs) => {
                let user = if !self.healing && self.rng.chance(self.params.lookup_fail_p) {
                    Err("getpwnam: the name service timed out".to_owned())
                } else {
                    Ok(UserInfo {
                        uid: specs.user_id,
                        gid: specs.group_id,
                        home: specs.sub_home_dir.clone(),
                        shell: "/bin/sh".to_owned(),
                    })
                };
                match JobSpec::try_from(*specs) {
                    Ok(spec) => Input::NewJob { spec: Box::new(spec), user },
                    Err(error) => self.violation(format!("NEW_JOB fails sbatchd's validation: {error}")),
                }
            }
            ToSbd::NewJobReplyAck(ack) => {
                let job = job_ref(self, ack.job);
                self.oracle.reply_acked.insert((host, job, ack.dispatch_seq));
                Input::NewJobReplyAck(Ack { job, dispatch_seq: ack.dispatch_seq })
            }
            ToSbd::JobExecuteAck(ack) => {
                Input::JobExecuteAck(Ack { job: job_ref(self, ack.job), dispatch_seq: ack.dispatch_seq })
            }
            ToSbd::JobFinishAck(ack) => {
                Input::JobFinishAck(Ack { job: job_ref(self, ack.job), dispatch_seq: ack.dispatch_seq })
            }
            ToSbd::JobSignal(signal) => Input::JobSignal(signal),
        };
        self.sbd_input(host, input);
    }
}
