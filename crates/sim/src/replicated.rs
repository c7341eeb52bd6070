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
//!   it closes every sbatchd connection registered with it.
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
//! committed anywhere is the same entry everywhere at its index, and a leader of a later
//! term holds every acknowledged entry; a candidate whose state is the committed log (no
//! proposal outstanding) has the same state (the XDR of `Mbd::snapshot`) as every other
//! candidate had at the same applied index — whether it got there as leader, follower,
//! by replay after a restart, by a rebuild or by a leader's snapshot. The batch checks of
//! the single-master simulation hold with "durable" read as "committed": the oracle's state
//! is fed each entry when it is first committed. At the end, healed: every candidate up,
//! caught up and in the same state as the final log replayed, every job DONE or EXIT once.

use std::collections::{BTreeMap, BTreeSet};

use lava_batch_ll::HostName;
use lava_batch_wire as wire;
use lava_mbd::{ClientReply, Effect, Event, Input, Mbd, MbdConfig};
use lava_replog::machine::{Application, Machine, Step};
use lava_replog::record::Record;
use lava_replog::{Config, ReplicaId};

use crate::codec::{self, FromSbd};
use crate::mbd_shell::{Outgoing, sbd_input, shorten};
use crate::world::{Ev, Packet, Route, World};

/// Master candidates in a replicated run.
pub const CANDIDATES: usize = 3;
/// The consensus tick (the shell's 100 ms timer).
pub const RAFT_TICK_MS: u64 = 100;
/// What a candidate that does not serve answers a command: followed by the candidate to
/// try (its number, from 1) or by `none`.
pub const NOT_MASTER: &str = "Not the master; try master candidate ";
/// What a leader answers a command whose events may never be committed.
pub const NOT_DONE: &str = "Request not done (the master lost its majority); retry";

/// Events of the candidates.
#[derive(Debug)]
pub enum ReplEv {
    /// Every candidate's consensus tick.
    Tick,
    /// A candidate starts again from its disk.
    Restart(usize),
    /// A random candidate is paused, or resumed.
    FaultPause,
    /// A paused candidate runs again.
    Resume(usize),
    /// The network among candidates is cut anew.
    FaultPartition,
}

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

/// One master candidate: its process (the machine) and its disk.
pub struct Candidate {
    /// The machine while the process runs.
    pub machine: Option<Machine<MbdApp, Outgoing>>,
    /// Starts so far; a command's connection belongs to one incarnation.
    pub incarnation: u64,
    /// Durable replica records.
    pub records: Vec<Record>,
    /// The newest durable snapshot of the mbd state (index, term, XDR).
    pub snapshot: Option<(u64, u64, Vec<u8>)>,
    /// Stalled: no tick, frames wait in `inbox`.
    pub paused: bool,
    /// Frames that arrived while paused, in arrival order.
    pub inbox: Vec<Packet>,
    /// The registered connection of each host (only while serving).
    pub registered: BTreeMap<usize, u64>,
    /// The applied index whose state was last compared.
    dumped: u64,
}

/// Fault intensities of the candidates, drawn from the seed.
#[derive(Clone, Debug)]
pub struct ReplParams {
    /// Mean time between pauses, ms.
    pub pause_mean_ms: Option<u64>,
    /// Mean time between new cuts of the candidates' network, ms.
    pub partition_mean_ms: Option<u64>,
    /// Probability of a crash before each step of a drain.
    pub crash_in_drain_p: f64,
    /// Probability of a snapshot after a drain.
    pub compact_p: f64,
    /// Largest delay of a consensus message, ms.
    pub delay_max_ms: u64,
    /// Probability that a consensus message is lost, duplicated.
    pub drop_p: f64,
    pub duplicate_p: f64,
}

/// The candidates and what the checks remember.
pub struct Repl {
    /// The candidates, numbered from 0 here (their replica id is the number plus 1).
    pub cands: Vec<Candidate>,
    /// Consensus messages from one candidate to another that are cut.
    pub blocked: BTreeSet<(usize, usize)>,
    /// Every committed entry: index -> (term, XDR of the event; empty for a marker).
    pub committed: BTreeMap<u64, (u64, Vec<u8>)>,
    /// The state (hash of the snapshot's XDR) at each applied index, as first seen.
    pub dumps: BTreeMap<u64, u64>,
    /// term -> the candidate seen leading it.
    pub leaders: BTreeMap<u64, usize>,
    /// term -> the candidate that released an answer in it.
    pub ackers: BTreeMap<u64, usize>,
    /// The highest index an answer waited for: every committed entry up to it is
    /// acknowledged.
    pub acked_through: u64,
    /// (candidate, term) already checked for holding every acknowledged entry.
    checked_leaders: BTreeSet<(usize, u64)>,
    /// The candidate each sbatchd tries, and each command.
    pub sbd_target: Vec<usize>,
    pub client_target: Vec<usize>,
    /// Fault intensities.
    pub params: ReplParams,
    config: MbdConfig,
}

impl Repl {
    /// Whether candidate `c` runs.
    pub fn is_up(&self, c: usize) -> bool {
        self.cands[c].machine.is_some()
    }

    /// Candidate `c`'s incarnation.
    pub fn incarnation(&self, c: usize) -> u64 {
        self.cands[c].incarnation
    }

    fn serving(&self) -> Option<usize> {
        self.cands.iter().position(|c| !c.paused && c.machine.as_ref().is_some_and(|m| m.is_serving()))
    }

    /// One candidate serves with nothing outstanding, and every candidate is up, running
    /// and has applied every committed entry.
    pub fn settled(&self) -> bool {
        let top = self.committed.keys().next_back().copied().unwrap_or(0);
        self.serving().is_some_and(|c| {
            let m = self.cands[c].machine.as_ref().expect("serving");
            m.outstanding() == 0 && m.held() == 0
        }) && self.cands.iter().all(|c| {
            !c.paused && c.inbox.is_empty() && c.machine.as_ref().is_some_and(|m| m.applied() == top)
        })
    }

    /// For a failure report.
    pub fn describe(&self) -> String {
        let mut out = format!("candidates (blocked {:?}):\n", self.blocked);
        for (k, c) in self.cands.iter().enumerate() {
            match &c.machine {
                Some(m) => {
                    out += &format!(
                        "  candidate {}: {:?} serving {} applied {} outstanding {} held {} paused {} registered {:?}\n",
                        k + 1,
                        m.view(),
                        m.is_serving(),
                        m.applied(),
                        m.outstanding(),
                        m.held(),
                        c.paused,
                        c.registered
                    )
                }
                None => out += &format!("  candidate {}: down\n", k + 1),
            }
        }
        out
    }

    /// The serving leader's state and the committed log, at the end; every candidate must
    /// hold the same state.
    pub fn final_state(&self) -> Result<(Mbd, Vec<Vec<u8>>), String> {
        let c = self.serving().ok_or("no candidate serves at the end")?;
        let live = self.cands[c].machine.as_ref().expect("serving").app().mbd.clone();
        for (k, cand) in self.cands.iter().enumerate() {
            let m = cand.machine.as_ref().ok_or(format!("candidate {} is down at the end", k + 1))?;
            if !m.app().mbd.same_durable_state(&live) {
                return Err(format!("candidate {} holds another state than the leader at the end", k + 1));
            }
        }
        let log =
            self.committed.values().filter(|(_, data)| !data.is_empty()).map(|(_, d)| d.clone()).collect();
        Ok((live, log))
    }
}

fn fingerprint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

impl World {
    /// A world whose mbatchd is replicated among [`CANDIDATES`] candidates.
    pub fn new_replicated(seed: u64, options: crate::Options) -> World {
        let mut world = World::new(seed, options);
        // The disk-full windows are a single mbatchd's (its own disk); candidates crash
        // as often as the single mbatchd would.
        world.params.disk_full_mean_ms = None;
        let rng = &mut world.rng;
        let sometimes = |rng: &mut crate::rng::Rng, p: f64, low: u64, high: u64| {
            rng.chance(p).then(|| rng.range(low, high))
        };
        let params = ReplParams {
            pause_mean_ms: sometimes(rng, 0.5, 3_000, 20_000),
            partition_mean_ms: sometimes(rng, 0.6, 2_000, 20_000),
            crash_in_drain_p: *rng.pick(&[0.0, 0.0, 0.002, 0.01]),
            compact_p: *rng.pick(&[0.0, 0.01, 0.05]),
            delay_max_ms: *rng.pick(&[2, 20, 100]),
            drop_p: *rng.pick(&[0.0, 0.02, 0.1, 0.3]),
            duplicate_p: *rng.pick(&[0.0, 0.02, 0.1]),
        };
        let first = |rng: &mut crate::rng::Rng| rng.index(CANDIDATES);
        let sbd_target = (0..world.hosts.len()).map(|_| first(rng)).collect();
        let client_target = (0..world.clients.len()).map(|_| first(rng)).collect();
        let cands = (0..CANDIDATES)
            .map(|_| Candidate {
                machine: None,
                incarnation: 0,
                records: Vec::new(),
                snapshot: None,
                paused: false,
                inbox: Vec::new(),
                registered: BTreeMap::new(),
                dumped: u64::MAX,
            })
            .collect();
        world.repl = Some(Box::new(Repl {
            cands,
            blocked: BTreeSet::new(),
            committed: BTreeMap::new(),
            dumps: BTreeMap::new(),
            leaders: BTreeMap::new(),
            ackers: BTreeMap::new(),
            acked_through: 0,
            checked_leaders: BTreeSet::new(),
            sbd_target,
            client_target,
            params,
            config: world.mbd_config.clone(),
        }));
        world
    }

    fn repl(&self) -> &Repl {
        self.repl.as_deref().expect("a replicated run")
    }

    fn repl_mut(&mut self) -> &mut Repl {
        self.repl.as_deref_mut().expect("a replicated run")
    }

    /// Every candidate starts; the consensus clock and the faults begin.
    pub fn repl_boot(&mut self) {
        for c in 0..CANDIDATES {
            self.repl_restart(c);
        }
        self.at(RAFT_TICK_MS, Ev::Repl(ReplEv::Tick));
        let params = self.repl().params.clone();
        if let Some(mean) = params.pause_mean_ms {
            let delay = self.rng.exponential_ms(mean);
            self.at(delay, Ev::Repl(ReplEv::FaultPause));
        }
        if let Some(mean) = params.partition_mean_ms {
            let delay = self.rng.exponential_ms(mean);
            self.at(delay, Ev::Repl(ReplEv::FaultPartition));
        }
    }

    /// The events of the candidates.
    pub fn repl_event(&mut self, ev: ReplEv) {
        match ev {
            ReplEv::Tick => {
                self.trace.mix(30);
                for c in 0..CANDIDATES {
                    let cand = &mut self.repl_mut().cands[c];
                    if cand.paused {
                        continue;
                    }
                    if let Some(m) = cand.machine.as_mut() {
                        m.tick();
                        self.repl_drain(c);
                    }
                }
                self.at(RAFT_TICK_MS, Ev::Repl(ReplEv::Tick));
            }
            ReplEv::Restart(c) => {
                self.trace.mix(31);
                self.repl_restart(c);
            }
            ReplEv::FaultPause => {
                if self.healing {
                    return;
                }
                self.trace.mix(32);
                let c = self.rng.index(CANDIDATES);
                if !self.repl().cands[c].paused {
                    let duration = self.rng.range(200, 6_000);
                    self.trace.line(self.now_ms, || format!("candidate {}: paused for {duration} ms", c + 1));
                    self.repl_mut().cands[c].paused = true;
                    self.at(duration, Ev::Repl(ReplEv::Resume(c)));
                }
                if let Some(mean) = self.repl().params.pause_mean_ms {
                    let delay = self.rng.exponential_ms(mean);
                    self.at(delay, Ev::Repl(ReplEv::FaultPause));
                }
            }
            ReplEv::Resume(c) => self.repl_resume(c),
            ReplEv::FaultPartition => {
                if self.healing {
                    return;
                }
                self.trace.mix(33);
                let mut blocked = BTreeSet::new();
                match self.rng.below(4) {
                    0 => {}
                    1 => {
                        let cut = self.rng.index(CANDIDATES);
                        for other in (0..CANDIDATES).filter(|&o| o != cut) {
                            blocked.insert((cut, other));
                            blocked.insert((other, cut));
                        }
                    }
                    _ => {
                        for from in 0..CANDIDATES {
                            for to in (0..CANDIDATES).filter(|&t| t != from) {
                                if self.rng.chance(0.3) {
                                    blocked.insert((from, to));
                                }
                            }
                        }
                    }
                }
                self.trace.line(self.now_ms, || format!("candidates' network: cut {blocked:?}"));
                self.repl_mut().blocked = blocked;
                if let Some(mean) = self.repl().params.partition_mean_ms {
                    let delay = self.rng.exponential_ms(mean);
                    self.at(delay, Ev::Repl(ReplEv::FaultPartition));
                }
            }
        }
    }

    fn repl_resume(&mut self, c: usize) {
        let cand = &mut self.repl_mut().cands[c];
        if !cand.paused {
            return;
        }
        cand.paused = false;
        let inbox = std::mem::take(&mut cand.inbox);
        self.trace
            .line(self.now_ms, || format!("candidate {}: resumed, {} frames waiting", c + 1, inbox.len()));
        for packet in inbox {
            self.repl_deliver(c, packet);
        }
    }

    /// Faults stop: every candidate runs, the candidates' network is whole.
    pub fn repl_heal(&mut self) {
        let repl = self.repl_mut();
        repl.blocked.clear();
        repl.params.drop_p = 0.0;
        repl.params.duplicate_p = 0.0;
        for c in 0..CANDIDATES {
            self.repl_resume(c);
            if !self.repl().is_up(c) {
                self.at(0, Ev::Repl(ReplEv::Restart(c)));
            }
        }
    }

    /// A random candidate crashes (the fault scheduler's mbatchd crash).
    pub fn repl_fault_crash(&mut self) {
        let c = self.rng.index(CANDIDATES);
        if self.repl().is_up(c) {
            self.repl_crash(c, "between drains");
        }
    }

    fn repl_crash(&mut self, c: usize, when: &str) {
        self.stats.n_mbd_crashes += 1;
        self.trace.line(self.now_ms, || format!("candidate {}: CRASH {when}", c + 1));
        let cand = &mut self.repl_mut().cands[c];
        cand.machine = None;
        cand.paused = false;
        cand.inbox.clear();
        let registered = std::mem::take(&mut cand.registered);
        for (host, conn) in registered {
            if self.links[host].conn == Some(conn) {
                self.kill_link(host);
            }
        }
        let downtime = if self.healing { 0 } else { self.rng.range(100, 8_000) };
        self.at(downtime, Ev::Repl(ReplEv::Restart(c)));
    }

    /// A candidate starts from its disk alone.
    fn repl_restart(&mut self, c: usize) {
        if self.repl().is_up(c) {
            return;
        }
        let repl = self.repl_mut();
        let app = MbdApp {
            config: repl.config.clone(),
            mbd: Mbd::new(repl.config.clone()).expect("valid"),
            error: None,
        };
        let cand = &mut repl.cands[c];
        cand.incarnation += 1;
        cand.dumped = u64::MAX;
        let config = Config::new(c as u64 + 1, CANDIDATES as u64);
        let machine = match Machine::recover(config, app, cand.records.clone(), cand.snapshot.clone()) {
            Ok(machine) => machine,
            Err(error) => {
                self.violation(format!("candidate {} does not recover from its own disk: {error}", c + 1))
            }
        };
        let view = machine.view();
        self.repl_mut().cands[c].machine = Some(machine);
        self.trace.line(self.now_ms, || format!("candidate {}: start {view:?}", c + 1));
        self.repl_drain(c);
    }

    /// A frame for candidate `c`: kept while it is paused, lost while it is down.
    pub fn repl_deliver(&mut self, c: usize, packet: Packet) {
        let cand = &mut self.repl_mut().cands[c];
        if cand.machine.is_none() {
            self.stats.n_frames_lost += 1;
            return;
        }
        if cand.paused {
            cand.inbox.push(packet);
            return;
        }
        match packet.route {
            Route::Raft { from, .. } => {
                let m = self.repl_mut().cands[c].machine.as_mut().expect("up");
                if let Err(error) = m.receive(&packet.bytes) {
                    self.violation(format!(
                        "candidate {} refused candidate {}'s message: {error}",
                        c + 1,
                        from + 1
                    ));
                }
                self.repl_drain(c);
            }
            Route::ToMbd { host, conn } => self.repl_receive_from_sbd(c, host, conn, &packet.bytes),
            Route::ClientToMbd { attempt, incarnation, .. } => {
                if self.repl().cands[c].incarnation != incarnation {
                    self.stats.n_frames_lost += 1;
                    return;
                }
                let serving = self.repl().cands[c].machine.as_ref().is_some_and(|m| m.is_serving());
                if !serving {
                    let hint = self.repl().cands[c].machine.as_ref().and_then(|m| m.leader());
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

    fn repl_receive_from_sbd(&mut self, c: usize, host: usize, conn: u64, bytes: &[u8]) {
        let message = match codec::decode_to_mbd(bytes) {
            Ok(message) => message,
            Err(error) => {
                self.violation(format!("mbd cannot decode a frame from {}: {error}", self.hosts[host]))
            }
        };
        let name = self.hosts[host].clone();
        let serving = self.repl().cands[c].machine.as_ref().is_some_and(|m| m.is_serving());
        match message {
            FromSbd::Register(register) => {
                if HostName::parse("register.host_name", &register.host_name).ok() != Some(name.clone()) {
                    self.violation(format!("SBD_REGISTER from {name} names {}", register.host_name));
                }
                if !serving {
                    // "Not the master, try X": the connection is closed with the hint.
                    let hint = self.repl().cands[c].machine.as_ref().and_then(|m| m.leader());
                    self.trace.line(self.now_ms, || {
                        format!("candidate {}: not the master for {name} (hint {hint:?})", c + 1)
                    });
                    if self.links[host].conn == Some(conn) {
                        self.kill_link(host);
                    }
                    self.repl_sbd_next(host, hint);
                    return;
                }
                let registered = &mut self.repl_mut().cands[c].registered;
                if registered.get(&host) == Some(&conn) {
                    return;
                }
                if registered.insert(host, conn).is_some() {
                    self.repl_step(c, Input::HostDisconnected { host: name.clone() });
                }
                self.repl_step(c, Input::HostRegistered { host: name, n_cpus: register.n_cpus });
            }
            FromSbd::Message(message) => {
                if !serving || self.repl().cands[c].registered.get(&host) != Some(&conn) {
                    return;
                }
                self.repl_step(c, sbd_input(name, message));
            }
        }
    }

    /// mbatchd's one-second tick on every serving, running candidate.
    pub fn repl_logic_tick(&mut self) {
        for c in 0..CANDIDATES {
            let cand = &self.repl().cands[c];
            if !cand.paused && cand.machine.as_ref().is_some_and(|m| m.is_serving()) {
                self.repl_step(c, Input::Tick);
            }
        }
    }

    /// Connection `conn` of `host` died: the candidate it went to notices.
    pub fn repl_detect_down(&mut self, host: usize, conn: u64) {
        for c in 0..CANDIDATES {
            if self.repl().cands[c].registered.get(&host) == Some(&conn) {
                self.repl_mut().cands[c].registered.remove(&host);
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
        let Some(mut machine) = self.repl_mut().cands[c].machine.take() else { return };
        if !machine.is_serving() {
            self.repl_mut().cands[c].machine = Some(machine);
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
        let top = self.repl().committed.keys().next_back().copied().unwrap_or(0);
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
        self.repl_mut().cands[c].machine = Some(machine);
        self.repl_drain(c);
    }

    /// Drains candidate `c`'s machine and carries out its steps in order; a crash may
    /// strike before any of them (a `Persist` then keeps a prefix of its records).
    fn repl_drain(&mut self, c: usize) {
        let Some(machine) = self.repl_mut().cands[c].machine.as_mut() else { return };
        let steps = machine.drain();
        let crash_p = if self.healing { 0.0 } else { self.repl().params.crash_in_drain_p };
        let mut lead = false;
        for step in steps {
            if self.rng.chance(crash_p) {
                if let Step::Persist(records) = &step {
                    let keep = self.rng.range(0, records.len() as u64) as usize;
                    self.repl_mut().cands[c].records.extend(records[..keep].iter().cloned());
                }
                return self.repl_crash(c, "inside a drain");
            }
            if matches!(step, Step::NotDone(_)) {
                self.stats.n_not_done += 1;
            }
            match step {
                Step::Persist(records) => {
                    for record in &records {
                        self.trace.mix_bytes(&codec::to_record(record));
                    }
                    self.repl_mut().cands[c].records.extend(records);
                }
                Step::Send { to, message } => self.repl_send(c, (to - 1) as usize, message),
                Step::KeepSnapshot { index, term, data } => {
                    self.trace
                        .line(self.now_ms, || format!("candidate {}: leader's snapshot at {index}", c + 1));
                    self.repl_mut().cands[c].snapshot = Some((index, term, data));
                }
                Step::Applied { index, term, data } => self.repl_committed(c, index, term, data),
                Step::Release { answer, after } => {
                    if let Some(gate) = after {
                        let repl = self.repl_mut();
                        if let Some(&other) = repl.ackers.get(&gate.term)
                            && other != c
                        {
                            self.violation(format!(
                                "candidates {} and {} both acknowledged in term {}",
                                other + 1,
                                c + 1,
                                gate.term
                            ));
                        }
                        repl.ackers.insert(gate.term, c);
                        repl.acked_through = repl.acked_through.max(gate.index);
                    }
                    self.repl_send_answer(c, answer);
                }
                Step::NotDone(answer) => match answer {
                    Outgoing::Client { client, .. } => {
                        let reply = ClientReply::error(wire::ERR_REJECTED, NOT_DONE);
                        self.transmit(
                            Route::MbdToClient { attempt: client },
                            codec::encode_client_reply(&reply),
                        );
                    }
                    Outgoing::Sbd { host, msg } => self.trace.line(self.now_ms, || {
                        format!(
                            "candidate {}: not done, dropped: {} to {}",
                            c + 1,
                            msg.operation().name(),
                            self.hosts[host]
                        )
                    }),
                },
                Step::Lead { term } => {
                    self.trace.line(self.now_ms, || format!("candidate {}: leads term {term}", c + 1));
                    self.stats.n_leads += 1;
                    lead = true;
                }
                Step::Follow { term, leader } => {
                    self.trace.line(self.now_ms, || {
                        format!("candidate {}: stops leading term {term} (leader {leader:?})", c + 1)
                    });
                    let registered = std::mem::take(&mut self.repl_mut().cands[c].registered);
                    for (host, conn) in registered {
                        if self.links[host].conn == Some(conn) {
                            self.kill_link(host);
                        }
                    }
                }
            }
        }
        let cand = &mut self.repl_mut().cands[c];
        let Some(machine) = cand.machine.as_mut() else { return };
        if let Some(error) = machine.app().error.clone() {
            self.violation(format!("candidate {}: {error}", c + 1));
        }
        if lead {
            // What only a running leader keeps starts empty, as in a restarted mbatchd.
            let app = machine.app_mut();
            app.mbd = match Mbd::from_snapshot(app.config.clone(), app.mbd.snapshot()) {
                Ok(mbd) => mbd,
                Err(error) => {
                    self.violation(format!("candidate {}: its state does not load: {error}", c + 1))
                }
            };
            cand.registered.clear();
        }
        self.repl_check(c);
        if lead {
            self.repl_step(c, Input::Start);
            return;
        }
        if !self.healing || self.rng.chance(0.5) {
            self.repl_maybe_compact(c);
        }
    }

    fn repl_maybe_compact(&mut self, c: usize) {
        let p = self.repl().params.compact_p;
        if !self.rng.chance(p) {
            return;
        }
        let Some(machine) = self.repl_mut().cands[c].machine.as_mut() else { return };
        let Some(compaction) = machine.compact() else { return };
        self.trace
            .line(self.now_ms, || format!("candidate {}: snapshot through {}", c + 1, compaction.index));
        let cand = &mut self.repl_mut().cands[c];
        cand.snapshot = Some((compaction.index, compaction.term, compaction.data));
        // A crash between the snapshot and its record loses the record only.
        if !self.rng.chance(self.repl().params.crash_in_drain_p) {
            self.repl_mut().cands[c].records.push(compaction.record);
        } else {
            self.repl_crash(c, "after a snapshot, before its record");
        }
    }

    fn repl_send(&mut self, from: usize, to: usize, message: Vec<u8>) {
        self.stats.n_frames += 1;
        self.trace.mix_bytes(&message);
        let params = self.repl().params.clone();
        if self.repl().blocked.contains(&(from, to)) || self.rng.chance(params.drop_p) {
            self.stats.n_frames_lost += 1;
            return;
        }
        let copies = if self.rng.chance(params.duplicate_p) { 2 } else { 1 };
        for _ in 0..copies {
            let delay = self.rng.range(1, params.delay_max_ms);
            self.at(delay, Ev::Deliver(Packet { route: Route::Raft { from, to }, bytes: message.clone() }));
        }
    }

    fn repl_send_answer(&mut self, c: usize, answer: Outgoing) {
        match answer {
            Outgoing::Sbd { host, msg } => {
                let Some(conn) = self.repl().cands[c].registered.get(&host).copied() else {
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

    /// An entry is in candidate `c`'s state: the same entry as everywhere else at its
    /// index; the first time anywhere, it is committed news for the oracle.
    fn repl_committed(&mut self, c: usize, index: u64, term: u64, data: Vec<u8>) {
        match self.repl().committed.get(&index) {
            Some((t, d)) if (*t, d) != (term, &data) => self.violation(format!(
                "candidate {} applied entry {index} of term {term}, where term {t} was committed",
                c + 1
            )),
            Some(_) => {}
            None => {
                let top = self.repl().committed.keys().next_back().copied().unwrap_or(0);
                if index != top + 1 {
                    self.violation(format!(
                        "entry {index} committed first at candidate {}, after {top}",
                        c + 1
                    ));
                }
                if !data.is_empty() {
                    let event: Event = codec::from_record(&data);
                    self.trace.line(self.now_ms, || {
                        format!("commit {index} (term {term}): {}", shorten(&format!("{event:?}")))
                    });
                    self.oracle_durable(&event);
                }
                self.repl_mut().committed.insert(index, (term, data));
            }
        }
    }

    /// The checks after a drain of candidate `c`.
    fn repl_check(&mut self, c: usize) {
        let Some(machine) = self.repl().cands[c].machine.as_ref() else { return };
        let view = machine.view();
        // The state equals every other candidate's at the same applied index.
        let applied = machine.applied();
        if machine.outstanding() == 0 && self.repl().cands[c].dumped != applied {
            if let Err(problem) = machine.app().mbd.check_durable_invariants() {
                self.violation(format!("candidate {}: mbd invariant: {problem}", c + 1));
            }
            let hash = fingerprint(&codec::to_record(&machine.app().mbd.snapshot()));
            let repl = self.repl_mut();
            repl.cands[c].dumped = applied;
            match repl.dumps.get(&applied) {
                Some(&first) if first != hash => self.violation(format!(
                    "candidate {}: its state at applied index {applied} differs from the state another candidate had there",
                    c + 1
                )),
                Some(_) => {}
                None => {
                    repl.dumps.insert(applied, hash);
                }
            }
        }
        if !view.is_leader {
            return;
        }
        match self.repl().leaders.get(&view.term) {
            Some(&other) if other != c => self.violation(format!(
                "two leaders in term {}: candidates {} and {}",
                view.term,
                other + 1,
                c + 1
            )),
            Some(_) => {}
            None => {
                self.trace.line(self.now_ms, || format!("candidate {} leads term {}", c + 1, view.term));
                self.repl_mut().leaders.insert(view.term, c);
            }
        }
        if !self.repl_mut().checked_leaders.insert((c, view.term)) {
            return;
        }
        // Every acknowledged entry of an earlier term is in this leader's log.
        let repl = self.repl();
        let replica = repl.cands[c].machine.as_ref().expect("up").replica();
        let base = replica.snapshot_index();
        if base >= repl.acked_through {
            return;
        }
        for (&index, (term, data)) in repl.committed.range(base + 1..=repl.acked_through) {
            if *term >= view.term {
                continue;
            }
            if replica.term_at(index) != Some(*term) || replica.entry_at(index).as_ref() != Some(data) {
                self.violation(format!(
                    "candidate {} leads term {} without acknowledged entry {index} (term {term}); it holds term {:?}",
                    c + 1,
                    view.term,
                    replica.term_at(index)
                ));
            }
        }
    }
}
