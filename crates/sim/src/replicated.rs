//! The replicated mbatchd (docs/failover.md, "How it is tested"): three master
//! candidates, each the real lava-mbd logic over `lava_replog::machine`, played by a
//! shell that carries out the machine's steps in order, as mbatchd's shell must.
//!
//! - **A candidate** is a [`Machine`] whose application is an [`Mbd`] (events as the
//!   single mbatchd's shell encodes them, `codec::to_record`), a disk (the durable replica
//!   records and the newest snapshot of the mbd state), the sbatchd connections registered
//!   with it, and an inbox that fills while it is paused.
//! - **Serving.** Only a candidate between `Lead` and `Follow` steps its logic: at `Lead`
//!   its state is rebuilt without what only a running leader keeps (channels, resend
//!   times: `Mbd::from_snapshot` of its own state) and it steps `Start`, as a restarted
//!   mbatchd does. Each `Append` is proposed, each message and reply held; a `Release`
//!   sends it, a `NotDone` reply tells the command "not done" (it retries the same request
//!   id at once), a `NotDone` message to sbatchd is dropped (sbatchd resends). At `Follow`
//!   it closes every sbatchd connection registered with it and starts again from its
//!   replica log (mbatchd's restart in the same process), keeping the commit index it
//!   knows.
//! - **Finding the leader.** A candidate that does not serve answers a command with "not
//!   the master, try candidate X" (or "no master" when it knows none: the command tries
//!   the next in list order), and an sbatchd's registration the same way by closing the
//!   connection; sbatchd then tries the candidate named, or the next one. A command whose
//!   answer does not come tries the next candidate.
//! - **Faults**, drawn from the seed on top of the batch simulation's (lost, duplicated
//!   and delayed frames, sbatchd crashes, host partitions): consensus messages lost,
//!   duplicated and reordered; partitions among candidates, one-way ones included;
//!   candidates paused (no ticks, their inbox kept) and resumed; candidate crashes between
//!   drains and between any two steps of a drain, a `Persist` in progress keeping only a
//!   prefix of its records (power lost before its fsync); snapshots at random moments.
//!
//! Checked after every drain: at most one leader per term; every answer is released in a
//! term by one candidate only (at most one leader per term acknowledges); every entry
//! committed anywhere is the same entry everywhere at its index, and a leader holds every
//! entry acknowledged in an earlier term; a candidate whose state is the committed log (no
//! proposal outstanding) has the same state (the XDR of `Mbd::snapshot`) as every other
//! candidate had at the same applied index — whether it got there as leader, follower,
//! by replay after a restart, by a rebuild or by a leader's snapshot. The batch checks of
//! the single-master simulation hold with "durable" read as "committed": the oracle's state
//! is fed each entry when it is first committed. At the end, healed: every candidate up,
//! caught up and in the same state as the final log replayed, every job DONE or EXIT once.

use std::collections::BTreeMap;

use lava_batch_ll::HostName;
use lava_batch_wire as wire;
use lava_mbd::{ClientReply, Effect, Event, Input, Mbd, MbdConfig};
use lava_replog::ReplicaId;
use lava_replog::machine::{Application, Machine};

use crate::candidates::{self, CANDIDATES, CandidateShell, Group, ReplEv, ReplParams};
use crate::codec::{self, FromSbd};
use crate::mbd_shell::{Outgoing, sbd_input, shorten};
use crate::rng::Rng;
use crate::trace::Trace;
use crate::world::{Ev, Packet, Route, World};

/// What a candidate that does not serve answers a command: followed by the candidate to
/// try (its number, from 1) or by `none`.
pub const NOT_MASTER: &str = "Not the master; try master candidate ";
/// What a leader answers a command whose events may never be committed.
pub const NOT_DONE: &str = "Request not done (the master lost its majority); retry";

/// The application: mbatchd's logic; a committed entry that does not apply is noted.
pub struct MbdApp {
    config: MbdConfig,
    /// The logic.
    pub mbd: Mbd,
    /// The first entry that did not apply.
    pub error: Option<String>,
}

impl Application for MbdApp {
    fn apply(&mut self, index: u64, data: &[u8]) {
        let event: Event = codec::from_record(data);
        match self.mbd.replay(event) {
            Ok(lava_mbd::Replayed::Applied) => {}
            Ok(lava_mbd::Replayed::Ignored(ignored)) => {
                self.error
                    .get_or_insert(format!("entry {index}, written by mbatchd itself, ignored: {ignored:?}"));
            }
            Err(error) => {
                self.error.get_or_insert(format!("entry {index} does not apply: {error}"));
            }
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        codec::to_record(&self.mbd.snapshot())
    }

    fn restore(&mut self, snapshot: Option<&[u8]>) {
        let loaded = match snapshot {
            Some(bytes) => Mbd::from_snapshot(self.config.clone(), codec::from_record(bytes)),
            None => Mbd::new(self.config.clone()),
        };
        match loaded {
            Ok(mbd) => self.mbd = mbd,
            Err(error) => {
                self.error.get_or_insert(format!("the snapshot does not load: {error}"));
            }
        }
    }
}

/// The candidates of the replicated mbatchd and what its shell keeps beside them.
pub struct Repl {
    /// The candidates, their disks and what the checks remember.
    pub group: Group<MbdApp, Outgoing, Packet>,
    /// The registered connection of each host, per candidate (only while serving).
    pub registered: Vec<BTreeMap<usize, u64>>,
    /// The candidate each sbatchd tries, and each command.
    pub sbd_target: Vec<usize>,
    pub client_target: Vec<usize>,
    /// Whether each candidate's serving logic was last told its disk is full
    /// (`Input::DiskFull`), as mbatchd's shell tells it.
    told_full: Vec<bool>,
    config: MbdConfig,
}

impl Repl {
    /// Whether candidate `c` runs.
    pub fn is_up(&self, c: usize) -> bool {
        self.group.is_up(c)
    }

    /// Candidate `c`'s incarnation.
    pub fn incarnation(&self, c: usize) -> u64 {
        self.group.incarnation(c)
    }

    /// One candidate serves with nothing outstanding, and every candidate is up, running
    /// and has applied every committed entry.
    pub fn settled(&self) -> bool {
        self.group.settled()
    }

    /// For a failure report.
    pub fn describe(&self) -> String {
        self.group.describe(|k| format!(" registered {:?}", self.registered[k]))
    }

    /// The serving leader's state and the committed log, at the end; every candidate must
    /// hold the same state.
    pub fn final_state(&self) -> Result<(Mbd, Vec<Vec<u8>>), String> {
        let c = self.group.serving().ok_or("no candidate serves at the end")?;
        let live = self.group.cands[c].machine.as_ref().expect("serving").app().mbd.clone();
        for (k, cand) in self.group.cands.iter().enumerate() {
            let m = cand.machine.as_ref().ok_or(format!("candidate {} is down at the end", k + 1))?;
            if !m.app().mbd.same_durable_state(&live) {
                return Err(format!("candidate {} holds another state than the leader at the end", k + 1));
            }
        }
        Ok((live, self.group.committed_log()))
    }
}

impl World {
    /// A world whose mbatchd is replicated among [`CANDIDATES`] candidates.
    pub fn new_replicated(seed: u64, options: crate::Options) -> World {
        let mut world = World::new(seed, options);
        // The disk-full windows are a single mbatchd's (its own disk); candidates crash
        // as often as the single mbatchd would.
        world.params.disk_full_mean_ms = None;
        let rng = &mut world.rng;
        let params = ReplParams::draw(rng);
        let first = |rng: &mut crate::rng::Rng| rng.index(CANDIDATES);
        let sbd_target = (0..world.hosts.len()).map(|_| first(rng)).collect();
        let client_target = (0..world.clients.len()).map(|_| first(rng)).collect();
        world.repl = Some(Box::new(Repl {
            group: Group::new(params),
            registered: vec![BTreeMap::new(); CANDIDATES],
            sbd_target,
            client_target,
            told_full: vec![false; CANDIDATES],
            config: world.mbd_config.clone(),
        }));
        world
    }

    /// Answers a leader released before its own fsync ended, over the run.
    pub(crate) fn released_before_own_fsync(&self) -> u64 {
        self.repl().group.released_before_own_fsync
    }

    /// Windows of a full disk, and the transfers full leaders asked for, over the run.
    pub(crate) fn full_disks(&self) -> (u64, u64) {
        let group = &self.repl().group;
        (group.disk_fulls, group.hand_overs)
    }

    fn repl(&self) -> &Repl {
        self.repl.as_deref().expect("a replicated run")
    }

    fn repl_mut(&mut self) -> &mut Repl {
        self.repl.as_deref_mut().expect("a replicated run")
    }

    /// Every candidate starts; the consensus clock and the faults begin.
    pub fn repl_boot(&mut self) {
        candidates::boot(self);
    }

    /// The events of the candidates.
    pub fn repl_event(&mut self, ev: ReplEv) {
        candidates::event(self, ev);
    }

    /// Faults stop: every candidate runs, the candidates' network is whole.
    pub fn repl_heal(&mut self) {
        candidates::heal(self);
    }

    /// A random candidate crashes (the fault scheduler's mbatchd crash).
    pub fn repl_fault_crash(&mut self) {
        let c = self.rng.index(CANDIDATES);
        if self.repl().is_up(c) {
            candidates::crash(self, c, "between drains");
        }
    }

    /// A frame for candidate `c`: kept while it is paused, lost while it is down.
    pub fn repl_deliver(&mut self, c: usize, packet: Packet) {
        candidates::deliver(self, c, packet);
    }

    fn repl_receive_from_sbd(&mut self, c: usize, host: usize, conn: u64, bytes: &[u8]) {
        let message = match codec::decode_to_mbd(bytes) {
            Ok(message) => message,
            Err(error) => {
                self.violation(format!("mbd cannot decode a frame from {}: {error}", self.hosts[host]))
            }
        };
        let name = self.hosts[host].clone();
        let serving = self.repl().group.cands[c].machine.as_ref().is_some_and(|m| m.is_serving());
        match message {
            FromSbd::Register(register) => {
                if HostName::parse("register.host_name", &register.host_name).ok() != Some(name.clone()) {
                    self.violation(format!("SBD_REGISTER from {name} names {}", register.host_name));
                }
                if !serving {
                    // "Not the master, try X": the connection is closed with the hint.
                    let hint = self.repl().group.cands[c].machine.as_ref().and_then(|m| m.leader());
                    self.trace.line(self.now_ms, || {
                        format!("candidate {}: not the master for {name} (hint {hint:?})", c + 1)
                    });
                    if self.links[host].conn == Some(conn) {
                        self.kill_link(host);
                    }
                    self.repl_sbd_next(host, hint);
                    return;
                }
                let registered = &mut self.repl_mut().registered[c];
                if registered.get(&host) == Some(&conn) {
                    return;
                }
                if registered.insert(host, conn).is_some() {
                    self.repl_step(c, Input::HostDisconnected { host: name.clone() });
                }
                self.repl_step(c, Input::HostRegistered { host: name, n_cpus: register.n_cpus });
            }
            FromSbd::Message(message) => {
                if !serving || self.repl().registered[c].get(&host) != Some(&conn) {
                    return;
                }
                self.repl_step(c, sbd_input(name, message));
            }
        }
    }

    /// mbatchd's one-second tick on every serving, running candidate.
    pub fn repl_logic_tick(&mut self) {
        for c in 0..CANDIDATES {
            let cand = &self.repl().group.cands[c];
            if !cand.paused && cand.machine.as_ref().is_some_and(|m| m.is_serving()) {
                self.repl_step(c, Input::Tick);
            }
        }
    }

    /// Connection `conn` of `host` died: the candidate it went to notices.
    pub fn repl_detect_down(&mut self, host: usize, conn: u64) {
        for c in 0..CANDIDATES {
            if self.repl().registered[c].get(&host) == Some(&conn) {
                self.repl_mut().registered[c].remove(&host);
                let name = self.hosts[host].clone();
                self.repl_step(c, Input::HostDisconnected { host: name });
            }
        }
    }

    /// sbatchd tries the candidate `hint` names, or the next one in list order.
    pub fn repl_sbd_next(&mut self, host: usize, hint: Option<ReplicaId>) {
        let repl = self.repl_mut();
        repl.sbd_target[host] = match hint {
            Some(id) => (id - 1) as usize,
            None => (repl.sbd_target[host] + 1) % CANDIDATES,
        };
    }

    /// A command tries the candidate `hint` names, or the next one in list order.
    pub fn repl_client_next(&mut self, client: usize, hint: Option<ReplicaId>) {
        let repl = self.repl_mut();
        repl.client_target[client] = match hint {
            Some(id) => (id - 1) as usize,
            None => (repl.client_target[client] + 1) % CANDIDATES,
        };
    }

    /// A command's answer "not the master" or "not done": it tries again (the same request
    /// id) where it is told, at once, or after a pause when nobody leads. False for any
    /// other answer.
    pub fn repl_client_redirect(&mut self, client: usize, message: &str) -> bool {
        if self.repl.is_none() {
            return false;
        }
        if message == NOT_DONE {
            self.trace.line(self.now_ms, || format!("client {client}: not done; retrying"));
            self.client_send_attempt(client);
            return true;
        }
        let Some(target) = message.strip_prefix(NOT_MASTER) else { return false };
        let hint = target.parse::<ReplicaId>().ok();
        self.trace.line(self.now_ms, || format!("client {client}: {message}"));
        self.repl_client_next(client, hint);
        if hint.is_some() {
            self.client_send_attempt(client);
        } else {
            // Nobody leads yet: the retry timer of the attempt tries the next candidate.
        }
        true
    }

    /// One step of a serving candidate's logic: events proposed, messages held.
    fn repl_step(&mut self, c: usize, input: Input) {
        let Some(mut machine) = self.repl_mut().group.cands[c].machine.take() else { return };
        if !machine.is_serving() {
            self.repl_mut().group.cands[c].machine = Some(machine);
            return;
        }
        self.stats.n_mbd_steps += 1;
        let execute_job = match &input {
            Input::JobExecute { msg, .. } => lava_batch_ll::job_ref("execute.job", msg.job).ok(),
            _ => None,
        };
        let before = execute_job.and_then(|job| machine.app().mbd.job(job).map(std::borrow::Cow::into_owned));
        let trace_input = self.trace.enabled().then(|| format!("{input:?}"));
        let mut effects = Vec::new();
        machine.app_mut().mbd.step(self.now_ms, input, &mut effects);
        if let Some(text) = trace_input {
            self.trace.line(self.now_ms, || format!("candidate {}: step {}", c + 1, shorten(&text)));
        }
        let top = self.repl().group.top();
        // A deposed leader that has not heard of newer commits may lag: it cannot
        // acknowledge anything, but its state is not the newest.
        let current = machine.applied() >= top;
        self.check_mbd_step(&machine.app().mbd, execute_job, before.as_ref(), current);
        for effect in effects {
            match effect {
                Effect::Append(event) => {
                    let bytes = codec::to_record(&event);
                    self.trace.mix_bytes(&bytes);
                    if let Err(refused) = machine.propose(bytes) {
                        self.trace.line(self.now_ms, || {
                            format!("candidate {}: proposal refused: {refused}", c + 1)
                        });
                    }
                }
                Effect::SendSbd { host, op, msg } => {
                    if op != msg.operation() {
                        self.violation(format!("SendSbd op {op:?} does not match its message {msg:?}"));
                    }
                    let Some(host_idx) = self.host_idx(&host) else {
                        self.violation(format!("SendSbd to {host}, which is not a cluster host"));
                    };
                    self.oracle_check_mbd_ack(&machine.app().mbd, host_idx, &msg);
                    machine.hold(Outgoing::Sbd { host: host_idx, msg });
                }
                Effect::Reply { client, reply } => machine.hold(Outgoing::Client { client, reply }),
            }
        }
        self.repl_mut().group.cands[c].machine = Some(machine);
        CandidateShell::drain(self, c);
    }

    /// A serving candidate's logic hears that its disk filled or has room again (new jobs
    /// are refused while it is full), as mbatchd's shell tells it on its timer.
    fn tell_disk_full(&mut self, c: usize) {
        let cand = &self.repl().group.cands[c];
        let full = cand.disk_full;
        if !cand.machine.as_ref().is_some_and(Machine::is_serving) || self.repl().told_full[c] == full {
            return;
        }
        self.repl_mut().told_full[c] = full;
        self.repl_step(c, Input::DiskFull { full });
    }

    /// An answer released by candidate `c`: to the sbatchd connection registered with it,
    /// or to the command.
    fn repl_send_answer(&mut self, c: usize, answer: Outgoing) {
        match answer {
            Outgoing::Sbd { host, msg } => {
                let Some(conn) = self.repl().registered[c].get(&host).copied() else {
                    self.trace.line(self.now_ms, || {
                        format!("candidate {}: no connection to {}: dropped", c + 1, self.hosts[host])
                    });
                    return;
                };
                self.transmit(Route::ToSbd { host, conn }, codec::encode_to_sbd(&msg));
            }
            Outgoing::Client { client, reply } => {
                self.transmit(Route::MbdToClient { attempt: client }, codec::encode_client_reply(&reply));
            }
        }
    }
}

/// The replicated mbatchd's shell over the shared candidates (module `candidates`).
impl CandidateShell for World {
    type App = MbdApp;
    type Answer = Outgoing;
    type Packet = Packet;

    fn group(&self) -> &Group<MbdApp, Outgoing, Packet> {
        &self.repl().group
    }

    fn group_mut(&mut self) -> &mut Group<MbdApp, Outgoing, Packet> {
        &mut self.repl_mut().group
    }

    fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    fn trace(&mut self) -> &mut Trace {
        &mut self.trace
    }

    fn now_ms(&self) -> u64 {
        self.now_ms
    }

    fn healing(&self) -> bool {
        self.healing
    }

    fn fail(&self, problem: String) -> ! {
        self.violation(problem)
    }

    fn schedule(&mut self, delay_ms: u64, ev: ReplEv) {
        self.at(delay_ms, Ev::Repl(ev));
    }

    fn schedule_raft(&mut self, delay_ms: u64, from: usize, to: usize, message: Vec<u8>) {
        self.at(delay_ms, Ev::Deliver(Packet { route: Route::Raft { from, to }, bytes: message }));
    }

    fn count_sent(&mut self) {
        self.stats.n_frames += 1;
    }

    fn count_lost(&mut self) {
        self.stats.n_frames_lost += 1;
    }

    fn new_app(&self) -> MbdApp {
        let config = self.repl().config.clone();
        MbdApp { mbd: Mbd::new(config.clone()).expect("valid"), config, error: None }
    }

    fn state_bytes(app: &MbdApp) -> Result<Vec<u8>, String> {
        app.mbd.check_durable_invariants().map_err(|problem| format!("mbd invariant: {problem}"))?;
        Ok(codec::to_record(&app.mbd.snapshot()))
    }

    /// Drains candidate `c`'s machine once and carries out its steps in order; at `Lead`
    /// the state is rebuilt and `Start` stepped; after a `Follow` the candidate starts again
    /// from its replica log, as mbatchd does (its loop stops and the daemon starts again in
    /// the same process, keeping the commit index it knows).
    fn drain(&mut self, c: usize) {
        let Some(machine) = self.repl_mut().group.cands[c].machine.as_mut() else { return };
        let steps = machine.drain();
        let carried = candidates::carry_out(self, c, steps);
        if carried.crashed {
            return;
        }
        let Some(machine) = self.repl_mut().group.cands[c].machine.as_mut() else { return };
        if let Some(error) = machine.app().error.clone() {
            self.violation(format!("candidate {}: {error}", c + 1));
        }
        if carried.follow {
            candidates::check(self, c);
            self.stats.n_deposed += 1;
            self.trace.line(self.now_ms, || {
                format!("candidate {}: starts again from its replica log to follow", c + 1)
            });
            candidates::start(self, c);
            return;
        }
        if carried.lead {
            // What only a running leader keeps starts empty, as in a restarted mbatchd.
            let app = machine.app_mut();
            app.mbd = match Mbd::from_snapshot(app.config.clone(), app.mbd.snapshot()) {
                Ok(mbd) => mbd,
                Err(error) => {
                    self.violation(format!("candidate {}: its state does not load: {error}", c + 1))
                }
            };
            self.repl_mut().registered[c].clear();
        }
        candidates::check(self, c);
        if carried.lead {
            self.repl_step(c, Input::Start);
            // As mbatchd at `Lead`: after Start, a full disk is said.
            self.repl_mut().told_full[c] = false;
            self.tell_disk_full(c);
            return;
        }
        if !self.healing || self.rng.chance(0.5) {
            candidates::maybe_compact(self, c);
        }
    }

    fn ticked(&mut self, c: usize) {
        self.tell_disk_full(c);
        // As mbatchd's shell at each turn: a leader whose disk is full hands over.
        let now = self.now_ms;
        let group = &mut self.repl_mut().group;
        let cand = &mut group.cands[c];
        let full = cand.disk_full;
        if let Some(machine) = cand.machine.as_mut()
            && let Some(to) = cand.hand_over.turn(machine, full, now)
        {
            group.hand_overs += 1;
            self.trace.line(now, || format!("candidate {}: disk full, hands its leadership to {to}", c + 1));
        }
        CandidateShell::drain(self, c);
    }

    fn deliver_running(&mut self, c: usize, packet: Packet) {
        match packet.route {
            Route::Raft { from, .. } => candidates::receive(self, c, from, &packet.bytes),
            Route::ToMbd { host, conn } => self.repl_receive_from_sbd(c, host, conn, &packet.bytes),
            Route::ClientToMbd { attempt, incarnation, .. } => {
                if self.repl().incarnation(c) != incarnation {
                    self.stats.n_frames_lost += 1;
                    return;
                }
                let serving = self.repl().group.cands[c].machine.as_ref().is_some_and(|m| m.is_serving());
                if !serving {
                    let hint = self.repl().group.cands[c].machine.as_ref().and_then(|m| m.leader());
                    let target = hint.map_or("none".to_owned(), |id| id.to_string());
                    let reply = ClientReply::error(wire::ERR_REJECTED, format!("{NOT_MASTER}{target}"));
                    self.transmit(Route::MbdToClient { attempt }, codec::encode_client_reply(&reply));
                    return;
                }
                let input = self.client_input(attempt, &packet.bytes);
                self.repl_step(c, input);
            }
            Route::ToSbd { .. } | Route::MbdToClient { .. } => unreachable!("not a frame for a candidate"),
        }
    }

    fn crashed(&mut self, c: usize) {
        self.stats.n_mbd_crashes += 1;
        let registered = std::mem::take(&mut self.repl_mut().registered[c]);
        for (host, conn) in registered {
            if self.links[host].conn == Some(conn) {
                self.kill_link(host);
            }
        }
    }

    fn first_commit(&mut self, _c: usize, index: u64, term: u64, data: &[u8]) {
        let event: Event = codec::from_record(data);
        self.trace.line(self.now_ms, || {
            format!("commit {index} (term {term}): {}", shorten(&format!("{event:?}")))
        });
        self.oracle_durable(&event);
    }

    fn release(&mut self, c: usize, answer: Outgoing) {
        self.repl_send_answer(c, answer);
    }

    fn not_done(&mut self, c: usize, answer: Outgoing) {
        self.stats.n_not_done += 1;
        match answer {
            Outgoing::Client { client, .. } => {
                let reply = ClientReply::error(wire::ERR_REJECTED, NOT_DONE);
                self.transmit(Route::MbdToClient { attempt: client }, codec::encode_client_reply(&reply));
            }
            Outgoing::Sbd { host, msg } => self.trace.line(self.now_ms, || {
                format!(
                    "candidate {}: not done, dropped: {} to {}",
                    c + 1,
                    msg.operation().name(),
                    self.hosts[host]
                )
            }),
        }
    }

    fn lead(&mut self, c: usize, term: u64) {
        self.trace.line(self.now_ms, || format!("candidate {}: leads term {term}", c + 1));
        self.stats.n_leads += 1;
    }

    fn follow(&mut self, c: usize, term: u64, leader: Option<ReplicaId>) {
        self.trace.line(self.now_ms, || {
            format!("candidate {}: stops leading term {term} (leader {leader:?})", c + 1)
        });
        let registered = std::mem::take(&mut self.repl_mut().registered[c]);
        for (host, conn) in registered {
            if self.links[host].conn == Some(conn) {
                self.kill_link(host);
            }
        }
    }
}
