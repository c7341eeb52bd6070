//! mbatchd's shell, exactly as lava-mbd's SHELL CONTRACT prescribes, over a
//! simulated `lsb.events`.
//!
//! - Start: a fresh [`Mbd`] fed every durable record through [`Mbd::replay`],
//!   as mbatchd does, then [`Input::Start`]; a record replay ignores is a
//!   violation here (the log is the logic's own, which never writes one).
//! - Effects in order: an Append encodes the event with XDR and appends it to
//!   the log (not yet durable); a SendSbd or Reply is held, in order, until
//!   every record appended before it is durable (as mbatchd holds them, and
//!   the answers of its reads too). Group commit: an fsync is
//!   armed by the first append after the last one and happens a random
//!   moment later, covering everything appended by then.
//! - Channels: a connection's SBD_REGISTER makes [`Input::HostRegistered`]
//!   (after [`Input::HostDisconnected`] for an older connection of the host
//!   mbatchd has not noticed die yet); a connection's death, once noticed,
//!   makes [`Input::HostDisconnected`]. Frames of any other connection are
//!   not stepped.
//! - Crash: held messages vanish; the log keeps its durable prefix and, when
//!   the page cache happened to write some of the rest, a random prefix of the
//!   unsynced tail (record granularity, as lava-eventlog's torn-tail repair
//!   leaves it).
//! - A full disk (as mbatchd's shell over lava-shell's group commit): while the disk is
//!   full no fsync succeeds (the armed one tries again every second) and the logic is told
//!   ([`Input::DiskFull`]), also right after a start on a full disk.
//! - Snapshots (contract step 7): at some quiescent points the shell writes
//!   [`Mbd::snapshot`] (XDR) covering the whole log; a restart then loads the
//!   newest snapshot with [`Mbd::from_snapshot`] and replays only the records
//!   after it.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};

use lava_batch_ll::{HostName, JobRef, SubmitSpec, UserName};
use lava_batch_wire as wire;
use lava_mbd::{Caller, ClientId, ClientReply, Effect, Event, Input, Job, Mbd, ToSbd};

use crate::codec::{self, ClientRequest, FromSbd};
use crate::world::{Ev, Route, World};

/// How long the group commit waits before trying a full disk again (lava-shell's
/// `NO_SPACE_RETRY`).
const NO_SPACE_RETRY_MS: u64 = 1_000;

/// A message waiting for the log to be durable up to `log_len` records.
#[derive(Debug)]
pub struct Held {
    /// Records appended when the message was decided.
    pub log_len: usize,
    /// The message.
    pub out: Outgoing,
}

/// A message of mbatchd.
#[derive(Debug)]
pub enum Outgoing {
    /// To the sbatchd of a host.
    Sbd { host: usize, msg: ToSbd },
    /// To a command.
    Client { client: ClientId, reply: ClientReply },
}

/// mbatchd's process and its disk.
pub struct MbdNode {
    /// The logic while the process runs.
    pub mbd: Option<Mbd>,
    /// Restarts so far; a command's connection belongs to one incarnation.
    pub incarnation: u64,
    /// Every record appended (XDR bytes); the first `durable_len` are on disk.
    pub log: Vec<Vec<u8>>,
    /// Records made durable by an fsync.
    pub durable_len: usize,
    /// Messages waiting for durability, in decision order.
    pub held: VecDeque<Held>,
    /// An fsync is scheduled.
    pub fsync_armed: bool,
    /// The registered connection of each host.
    pub registered: BTreeMap<usize, u64>,
    /// The newest durable snapshot (XDR) and the log records it covers.
    pub snapshot: Option<(Vec<u8>, usize)>,
    /// The disk is full: no fsync succeeds.
    pub disk_full: bool,
}

impl MbdNode {
    /// A node with an empty log, not yet started.
    pub fn new() -> MbdNode {
        MbdNode {
            mbd: None,
            incarnation: 0,
            log: Vec::new(),
            durable_len: 0,
            held: VecDeque::new(),
            fsync_armed: false,
            registered: BTreeMap::new(),
            snapshot: None,
            disk_full: false,
        }
    }

    /// Whether the process runs.
    pub fn is_up(&self) -> bool {
        self.mbd.is_some()
    }
}

impl Default for MbdNode {
    fn default() -> MbdNode {
        MbdNode::new()
    }
}

/// The users the simulated credential service vouches for.
pub fn user_of_uid(uid: u32) -> Option<&'static str> {
    match uid {
        1000 => Some("alice"),
        1001 => Some("bob"),
        _ => None,
    }
}

impl World {
    /// The first start of mbatchd.
    pub fn mbd_boot(&mut self) {
        self.mbd_restart();
    }

    /// Contract step 1: replay the durable log into a fresh Mbd, check it
    /// against the oracle's durable state, then step Start.
    pub fn mbd_restart(&mut self) {
        if self.mbd.is_up() {
            return;
        }
        self.mbd.incarnation += 1;
        let (loaded, first_record) = match &self.mbd.snapshot {
            Some((bytes, covered)) => {
                (Mbd::from_snapshot(self.mbd_config.clone(), codec::from_record(bytes)), *covered)
            }
            None => (Mbd::new(self.mbd_config.clone()), 0),
        };
        let mut mbd = match loaded {
            Ok(mbd) => mbd,
            Err(error) => self.violation(format!("mbd cannot load its configuration or snapshot: {error}")),
        };
        for (position, bytes) in self.mbd.log.iter().enumerate().skip(first_record) {
            let event: Event = codec::from_record(bytes);
            // As mbatchd replays (Mbd::replay). An event replay ignores is no reason for
            // mbatchd to stop, but the log here is the logic's own: it never writes one.
            match mbd.replay(event) {
                Ok(lava_mbd::Replayed::Applied) => {}
                Ok(lava_mbd::Replayed::Ignored(ignored)) => self.violation(format!(
                    "lsb.events record {position}, written by mbatchd itself, was ignored on replay: {ignored:?}"
                )),
                Err(error) => self.violation(format!("replay of lsb.events record {position} failed: {error}")),
            }
        }
        if !mbd.same_durable_state(&self.oracle.replica) {
            self.violation("replay of the durable log differs from the durable state the oracle applied");
        }
        self.trace.line(self.now_ms, || {
            format!(
                "mbd: start #{} from a snapshot of {first_record} records and {} more",
                self.mbd.incarnation,
                self.mbd.log.len() - first_record
            )
        });
        self.mbd.mbd = Some(mbd);
        // Start first: replay can leave states only Start settles (the logic's contract).
        self.mbd_step(Input::Start);
        if self.mbd.disk_full {
            self.mbd_step(Input::DiskFull { full: true });
        }
    }

    /// Crashes mbatchd: held messages and unsynced records are lost (save a
    /// torn-tail prefix the page cache wrote), every connection dies.
    pub fn mbd_crash(&mut self) {
        self.stats.n_mbd_crashes += 1;
        self.mbd.mbd = None;
        self.mbd.held.clear();
        self.mbd.registered.clear();
        let unsynced = self.mbd.log.len() - self.mbd.durable_len;
        let survivors = if unsynced > 0 && self.rng.chance(self.params.torn_tail_p) {
            self.rng.range(0, unsynced as u64) as usize
        } else {
            0
        };
        let keep = self.mbd.durable_len + survivors;
        self.trace.line(self.now_ms, || {
            format!("mbd: CRASH; {unsynced} unsynced records, {survivors} of them survive in the page cache")
        });
        for position in self.mbd.durable_len..keep {
            let event: Event = codec::from_record(&self.mbd.log[position]);
            self.oracle_durable(&event);
        }
        self.mbd.log.truncate(keep);
        self.mbd.durable_len = keep;
        for host in 0..self.hosts.len() {
            self.kill_link(host);
        }
        let downtime = if self.healing { 0 } else { self.rng.range(100, 8_000) };
        self.at(downtime, Ev::MbdRestart);
    }

    /// One step of the logic, its checks, and its effects (contract step 3).
    pub fn mbd_step(&mut self, input: Input) {
        let Some(mbd) = self.mbd.mbd.as_mut() else { return };
        self.stats.n_mbd_steps += 1;
        let execute_job = match &input {
            Input::JobExecute { msg, .. } => lava_batch_ll::job_ref("execute.job", msg.job).ok(),
            _ => None,
        };
        let before = execute_job.and_then(|job| mbd.job(job).map(Cow::into_owned));
        let trace_input = self.trace.enabled().then(|| format!("{input:?}"));
        let mut effects = Vec::new();
        mbd.step(self.now_ms, input, &mut effects);
        if let Some(text) = trace_input {
            self.trace.line(self.now_ms, || format!("mbd: step {}", shorten(&text)));
            for effect in &effects {
                self.trace.line(self.now_ms, || format!("mbd:   -> {}", shorten(&format!("{effect:?}"))));
            }
        }
        let mbd = self.mbd.mbd.take().expect("stepped just now");
        self.check_mbd_step(&mbd, execute_job, before.as_ref(), true);
        self.mbd.mbd = Some(mbd);
        let mut first_message = None;
        for (idx, effect) in effects.into_iter().enumerate() {
            match effect {
                Effect::Append(event) => {
                    if first_message.is_some() {
                        self.violation("an Append follows a message in one step's effects");
                    }
                    let bytes = codec::to_record(&event);
                    self.trace.mix_bytes(&bytes);
                    self.mbd.log.push(bytes);
                }
                Effect::SendSbd { host, op, msg } => {
                    first_message.get_or_insert(idx);
                    if op != msg.operation() {
                        self.violation(format!("SendSbd op {op:?} does not match its message {msg:?}"));
                    }
                    let Some(host_idx) = self.host_idx(&host) else {
                        self.violation(format!("SendSbd to {host}, which is not a cluster host"));
                    };
                    let mbd = self.mbd.mbd.take().expect("stepped just now");
                    self.oracle_check_mbd_ack(&mbd, host_idx, &msg);
                    self.mbd.mbd = Some(mbd);
                    let log_len = self.mbd.log.len();
                    self.mbd.held.push_back(Held { log_len, out: Outgoing::Sbd { host: host_idx, msg } });
                }
                Effect::Reply { client, reply } => {
                    first_message.get_or_insert(idx);
                    let log_len = self.mbd.log.len();
                    self.mbd.held.push_back(Held { log_len, out: Outgoing::Client { client, reply } });
                }
            }
        }
        if self.mbd.log.len() > self.mbd.durable_len && !self.mbd.fsync_armed {
            self.mbd.fsync_armed = true;
            let delay = self.rng.range(0, self.params.fsync_delay_max_ms);
            self.at(delay, Ev::MbdFsync);
        }
        self.mbd_release();
    }

    /// The checks after a step of `mbd`: its invariants, EXECUTE changing no state, and
    /// (when `current`: its state holds every durable event) no durable DONE or EXIT changed.
    pub fn check_mbd_step(
        &self,
        mbd: &Mbd,
        execute_job: Option<JobRef>,
        before: Option<&Job>,
        current: bool,
    ) {
        if let Err(problem) = mbd.check_invariants() {
            self.violation(format!("mbd invariant: {problem}"));
        }
        if let Some(job) = execute_job {
            let after = mbd.job(job);
            self.oracle_check_execute_changes_no_state(job, before, after.as_deref());
        }
        if current {
            self.oracle_check_terminal_live(mbd);
        }
    }

    /// Group commit: everything appended so far becomes durable.
    pub fn mbd_fsync(&mut self) {
        self.mbd.fsync_armed = false;
        if !self.mbd.is_up() {
            return;
        }
        if self.mbd.disk_full {
            // lava-shell's group commit: the records stay buffered, and it tries again a
            // second later.
            self.mbd.fsync_armed = true;
            self.at(NO_SPACE_RETRY_MS, Ev::MbdFsync);
            return;
        }
        for position in self.mbd.durable_len..self.mbd.log.len() {
            let event: Event = codec::from_record(&self.mbd.log[position]);
            self.oracle_durable(&event);
        }
        self.mbd.durable_len = self.mbd.log.len();
        // A quiescent point: the durable log equals the appended one, so its
        // replay must equal the live durable state.
        let live = self.mbd.mbd.as_ref().expect("up");
        if !live.same_durable_state(&self.oracle.replica) {
            self.violation(
                "the durable log, replayed, differs from mbatchd's live state at a quiescent point",
            );
        }
        if self.rng.chance(self.params.snapshot_p) {
            // Contract step 7: a snapshot covers every record appended so far,
            // all durable now; it replaces the older one atomically.
            self.mbd.snapshot = Some((codec::to_record(&live.snapshot()), self.mbd.log.len()));
        }
        self.mbd_release();
    }

    /// Sends every held message whose records are durable, in order.
    fn mbd_release(&mut self) {
        while self.mbd.held.front().is_some_and(|held| held.log_len <= self.mbd.durable_len) {
            let held = self.mbd.held.pop_front().expect("front exists");
            match held.out {
                Outgoing::Sbd { host, msg } => {
                    let Some(conn) = self.mbd.registered.get(&host).copied() else {
                        self.trace.line(self.now_ms, || {
                            format!("mbd: no connection to {}: dropped", self.hosts[host])
                        });
                        continue;
                    };
                    let bytes = codec::encode_to_sbd(&msg);
                    self.transmit(Route::ToSbd { host, conn }, bytes);
                }
                Outgoing::Client { client, reply } => {
                    let bytes = codec::encode_client_reply(&reply);
                    self.transmit(Route::MbdToClient { attempt: client }, bytes);
                }
            }
        }
    }

    /// A frame from `host`'s sbatchd on connection `conn`.
    pub fn mbd_receive_from_sbd(&mut self, host: usize, conn: u64, bytes: &[u8]) {
        let message = match codec::decode_to_mbd(bytes) {
            Ok(message) => message,
            Err(error) => {
                self.violation(format!("mbd cannot decode a frame from {}: {error}", self.hosts[host]))
            }
        };
        let name = self.hosts[host].clone();
        match message {
            FromSbd::Register(register) => {
                if HostName::parse("register.host_name", &register.host_name).ok() != Some(name.clone()) {
                    self.violation(format!("SBD_REGISTER from {name} names {}", register.host_name));
                }
                if self.mbd.registered.get(&host) == Some(&conn) {
                    return; // a duplicate: one registration per connection
                }
                if self.mbd.registered.insert(host, conn).is_some() {
                    // Contract step 6: the older connection is closed first.
                    self.mbd_step(Input::HostDisconnected { host: name.clone() });
                }
                self.mbd_step(Input::HostRegistered { host: name, n_cpus: register.n_cpus });
            }
            FromSbd::Message(message) => {
                if self.mbd.registered.get(&host) != Some(&conn) {
                    return; // not a registered connection: never stepped
                }
                self.mbd_step(sbd_input(name, message));
            }
        }
    }

    /// mbatchd noticed that connection `conn` of `host` died.
    pub fn mbd_detect_down(&mut self, host: usize, conn: u64) {
        if self.mbd.is_up() && self.mbd.registered.get(&host) == Some(&conn) {
            self.mbd.registered.remove(&host);
            let name = self.hosts[host].clone();
            self.mbd_step(Input::HostDisconnected { host: name });
        }
    }

    /// A command's request on its connection `attempt`: the shell vouches for
    /// the caller from the credential and validates the body with
    /// `lava-batch-ll` before stepping.
    pub fn mbd_receive_from_client(&mut self, attempt: ClientId, bytes: &[u8]) {
        let input = self.client_input(attempt, bytes);
        self.mbd_step(input);
    }

    /// A command's request as the input mbatchd's shell steps.
    pub fn client_input(&self, attempt: ClientId, bytes: &[u8]) -> Input {
        let request = match codec::decode_client_request(bytes) {
            Ok(request) => request,
            Err(error) => self.violation(format!("mbd cannot decode a command's request: {error}")),
        };
        let caller = |credential: &[u8]| -> Caller {
            let uid = u32::from_be_bytes(credential.try_into().expect("the simulated credential is a uid"));
            let name = user_of_uid(uid).expect("the simulation vouches only for its users");
            Caller {
                uid,
                gid: 100,
                user: UserName::parse("credential", name).expect("valid"),
                host: HostName::parse("credential", "client1").expect("valid"),
            }
        };
        match request {
            ClientRequest::Submit(submit) => {
                let wire::ClientRequest { credential, request_id, body } = *submit;
                let spec = match SubmitSpec::try_from(body) {
                    Ok(spec) => spec,
                    Err(error) => self.violation(format!("a simulated submission fails validation: {error}")),
                };
                Input::Submit {
                    client: attempt,
                    request_id,
                    caller: caller(&credential),
                    spec: Box::new(spec),
                }
            }
            ClientRequest::Signal(wire::ClientRequest { credential, request_id, body }) => {
                Input::Signal { client: attempt, request_id, caller: caller(&credential), request: body }
            }
            ClientRequest::Query(wire::ClientRequest { credential, body, .. }) => {
                Input::Query { client: attempt, caller: caller(&credential), query: body }
            }
            // `bkill -r` is a JOB_CONTROL of its own.
            ClientRequest::Requeue(wire::ClientRequest { credential, request_id, body })
                if body.action == wire::JobControlAction::ForceExit =>
            {
                Input::JobControl { client: attempt, request_id, caller: caller(&credential), request: body }
            }
            // `brequeue -r` needs no environment read back (only finished jobs do).
            ClientRequest::Requeue(wire::ClientRequest { credential, request_id, body }) => Input::Requeue {
                client: attempt,
                request_id,
                caller: caller(&credential),
                request: body,
                submissions: Vec::new(),
            },
        }
    }
}

/// An sbatchd pipeline message as the input mbatchd's shell steps, with the host of the
/// connection that carried it.
pub fn sbd_input(host: HostName, message: lava_sbd::ToMbd) -> Input {
    match message {
        lava_sbd::ToMbd::NewJobReply(reply) => Input::NewJobReply { host, reply },
        lava_sbd::ToMbd::JobExecute(msg) => Input::JobExecute { host, msg },
        lava_sbd::ToMbd::JobFinish(msg) => Input::JobFinish { host, msg },
        lava_sbd::ToMbd::JobSignalReply(msg) => Input::JobSignalReply { host, msg },
    }
}

/// A long debug text cut for the trace.
pub fn shorten(text: &str) -> String {
    const TRACE_CHARS_MAX: usize = 300;
    if text.chars().count() <= TRACE_CHARS_MAX {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(TRACE_CHARS_MAX).collect();
        format!("{cut}…")
    }
}
