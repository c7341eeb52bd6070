//! The replicated coordinator (docs/failover.md, "How it is tested"): three master
//! candidates, each the real lava-coord-logic over `lava_replog::machine` (the shared
//! candidates of module `candidates`), played by a shell that does what the daemon's
//! (`bins/coordinator/src/replicated.rs`) does, in its order, with submitters and pull
//! workers that find the leader.
//!
//! - **A candidate's shell.** Only between the machine's `Lead` and `Follow` does it take
//!   requests; a candidate that does not serve has no listener: the connection is refused
//!   and the client tries the next candidate. Each request arrives as real bytes (the
//!   request's XDR body, decoded by `lava-coord-wire` and checked by `lava-coord-ll`) and
//!   is stepped at once with the virtual clock (requests arriving within a few ms of each
//!   other, in some seeds, before one drain: the daemon takes the calls queued, then
//!   carries out); each `Append` is proposed (the event's XDR,
//!   the WAL record's bytes), each answer held until the machine releases it; an answer
//!   "not done" is `ERR_TRY_AGAIN` and the connection closes. The logic's `Tick` is stepped
//!   with every consensus tick while serving, as the daemon's one 100 ms timer does. A
//!   drain is repeated until it is empty; after one with `Lead` (and no `Follow`) the shell
//!   steps `Tick` (leases that ran out while nobody led expire); committed entries reach a
//!   follower's state through `Coord::apply`, a leader's snapshot replaces it. At `Follow`
//!   the drain is finished and the candidate starts again from its replica log alone,
//!   following (its connections closed, as the daemon's loop ends). A snapshot is taken
//!   every `snapshot_every` (3 to 40, drawn from the seed) applied entries once nothing is
//!   outstanding, as `--snapshot-events` does, or sooner when the applied entries since
//!   the last outweigh it (a `log_bytes_floor` of 512 B or 4 KiB in some seeds).
//! - **Clients.** Submitters submit with SUBMIT_TASK_ONCE (a fresh 128-bit id per task,
//!   sent again with the same id and payload after a refused connection, a timeout or
//!   "try again", to whichever candidate they reach, until answered: `client::submit_once`)
//!   or with SUBMIT_TASK (sent again only while no candidate took it: at least once), and
//!   now and then ask for a task (TASK_QUERY).
//!   Workers pull (LEASE_REQUEST), heartbeat at a third of the lease, complete or fail, or
//!   work on too long, skip heartbeats, or die holding a lease (which then expires) and
//!   come back later with no memory. A client whose answer does not come tries the next
//!   candidate; frames to and from clients are delayed and sometimes lost.
//! - **Faults**: those of module `candidates` (crashes between drains and inside them,
//!   power loss of unsynced records, pauses, partitions, lost, duplicated and reordered
//!   consensus messages), candidates crashing between drains at random times; in some seeds
//!   each candidate's clock is off by up to 20 or 200 ms (the leases' checks allow twice
//!   that: docs/failover.md's precondition is clocks that agree to well within a lease).
//!
//! Checked after every drain, on top of module `candidates`' checks (one leader per term,
//! one acknowledging candidate per term, the same committed entries everywhere, every
//! entry acknowledged in a term in the log of every leader of a later term, the same state
//! at the same applied index): the logic's invariants; a candidate whose state is the committed log has the
//! state of a coordinator fed only the committed entries (replay); every committed event
//! fits an independent model of the WAL's meaning (below). At every release, everything
//! the answer states is in the committed log: a task created, a submission id's task (one
//! task per id, whichever attempt is answered), a grant and the expiry promised, an
//! outcome, a task's state a query reported (and a query stepped after a task's outcome
//! was acknowledged reports it). A grant is never released for a task acknowledged
//! finished, nor while another worker holds an acknowledged lease of the task whose expiry
//! has not passed (the protocol's promise: at most one valid lease per task, a lease valid
//! until its expiry and never after; up to the clocks' skew). At every `Lead`, the new
//! leader's state holds every task, submission id and outcome acknowledged in an earlier
//! term. At the end, healed: every candidate up and in the
//! same state as the committed log replayed from nothing, every task completed or failed,
//! every submission id in exactly one `TaskCreatedOnce`.

use std::collections::BTreeMap;

use lava_coord_ll::{Caller, Limits, Outcome, UserName};
use lava_coord_logic::{ClientId, Coord, CoordConfig, CoordSnapshot, Effect, Event, Input, TaskState};
use lava_coord_wire::{self as wire, Reply, Request as WireRequest};
use lava_replog::ReplicaId;
use lava_replog::machine::Application;
use lava_xdr::Limits as XdrLimits;

use crate::Options;
use crate::candidates::{self, CANDIDATES, CandidateShell, Group, ReplEv, ReplParams};
use crate::rng::Rng;
use crate::trace::Trace;
use crate::world::{Queue, T0_MS};

/// Events a run may process before it is declared a runaway.
const EVENTS_MAX: u64 = 3_000_000;
/// How long the healed cluster may take to finish every task, ms.
const HEAL_MS_MAX: u64 = 300_000;
/// Quiet time after convergence before the final checks, ms.
const QUIET_MS: u64 = 3_000;
/// Every candidate's user for the workers (the holder of every lease).
const WORKER_UID: u32 = 1000;
/// The largest payload accepted.
const PAYLOAD_MAX: u32 = 64;
/// What a client is told when its answer may never be committed (the daemon's words).
const NOT_DONE: &str = "not done: the coordinator lost its leadership; connect again and retry";

/// Limits of the XDR bodies on the simulated wire.
const BODY_LIMITS: XdrLimits = XdrLimits::DEFAULT;

/// The application: the coordinator's logic; an entry that does not decode or apply is
/// noted (the daemon stops on it; here it is a failure).
pub struct CoordApp {
    config: CoordConfig,
    /// The logic.
    pub coord: Coord,
    /// The first entry that did not apply.
    pub fault: Option<String>,
}

fn encode<T: serde::Serialize + std::fmt::Debug>(value: &T) -> Vec<u8> {
    crate::codec::to_record(value)
}

fn decode_event(data: &[u8]) -> Result<Event, String> {
    lava_xdr::from_bytes::<Event>(data, &XdrLimits::DEFAULT).map_err(|error| error.to_string())
}

fn decode_snapshot(data: &[u8]) -> Result<CoordSnapshot, String> {
    let limits = XdrLimits { array_elements_max: u32::MAX, ..XdrLimits::DEFAULT };
    lava_xdr::from_bytes::<CoordSnapshot>(data, &limits).map_err(|error| error.to_string())
}

impl Application for CoordApp {
    fn apply(&mut self, index: u64, data: &[u8]) {
        if self.fault.is_some() {
            return;
        }
        let applied = decode_event(data)
            .map_err(|error| format!("entry {index} does not decode as an event: {error}"))
            .and_then(|event| {
                self.coord.apply_owned(event).map_err(|error| format!("entry {index}: {error}"))
            });
        if let Err(fault) = applied {
            self.fault = Some(fault);
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        encode(&self.coord.snapshot())
    }

    fn restore(&mut self, snapshot: Option<&[u8]>) {
        let Some(bytes) = snapshot else {
            self.coord = Coord::new(self.config.clone());
            return;
        };
        let restored = decode_snapshot(bytes)
            .map_err(|error| format!("a snapshot does not decode: {error}"))
            .and_then(|state| {
                Coord::from_snapshot(self.config.clone(), state)
                    .map_err(|error| format!("a snapshot does not load: {error}"))
            });
        match restored {
            Ok(coord) => self.coord = coord,
            Err(fault) => self.fault = Some(fault),
        }
    }
}

/// An answer the machine holds: the connection it goes back on and what it says.
#[derive(Debug)]
pub struct Pending {
    /// When the request was stepped.
    stepped_ms: u64,
    actor: usize,
    conn: u64,
    request: lava_coord_ll::Request,
    caller: Caller,
    reply: Reply,
}

/// A frame for a candidate.
#[derive(Debug)]
pub enum CPacket {
    /// A consensus message from candidate `from`.
    Raft { from: usize, bytes: Vec<u8> },
    /// A client's request on connection `conn`, opened to incarnation `incarnation`.
    Request { actor: usize, conn: u64, incarnation: u64, operation: u32, body: Vec<u8> },
}

/// What reaches a client on its connection.
#[derive(Debug)]
pub enum ToClient {
    /// An answer (operation and XDR body).
    Answer { operation: u32, body: Vec<u8> },
    /// The connection was refused or closed without an answer.
    Closed,
}

/// Everything that can happen at a point of virtual time.
#[derive(Debug)]
pub enum CEv {
    Repl(ReplEv),
    Deliver {
        to: usize,
        packet: CPacket,
    },
    ToClient {
        actor: usize,
        conn: u64,
        what: ToClient,
    },
    Wake {
        actor: usize,
        generation: u64,
    },
    Timeout {
        actor: usize,
        conn: u64,
    },
    /// The end of a turn of candidate `c`'s loop that took several requests.
    Drain {
        c: usize,
    },
    FaultCrash,
    WorkerDeath,
    HealStart,
    CheckConverged,
    Finish,
}

/// Counters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoordStats {
    /// Events processed.
    pub n_events: u64,
    /// Steps of the coordinator's logic, all candidates.
    pub n_steps: u64,
    /// Consensus frames put on the wire.
    pub n_frames: u64,
    /// Frames lost (consensus and clients').
    pub n_frames_lost: u64,
    /// Candidate crashes.
    pub n_crashes: u64,
    /// Deposed leaders started again from their replica log.
    pub n_deposed: u64,
    /// Answers a leader released before its own fsync ended.
    pub n_released_before_own_fsync: u64,
    /// Windows of a full disk on a candidate.
    pub n_disk_fulls: u64,
    /// Leaderships begun.
    pub n_leads: u64,
    /// Answers "not done".
    pub n_not_done: u64,
    /// Tasks created (committed).
    pub n_tasks: u64,
    /// Leases that expired (committed).
    pub n_expired: u64,
    /// Tasks completed or failed (committed).
    pub n_finished: u64,
    /// SUBMIT_TASK_ONCE answers naming the task of an earlier attempt.
    pub n_repeated: u64,
    /// Snapshots taken.
    pub n_snapshots: u64,
    /// Of them, those due by weight alone (lava-replog's `log_outweighs_snapshot`).
    pub n_snapshots_by_weight: u64,
    /// Virtual time at the end, ms since the start.
    pub end_ms: u64,
}

/// The intensities of one seed.
#[derive(Clone, Debug)]
struct CParams {
    fault_phase_ms: u64,
    lease_ms: u64,
    reply_timeout_ms: u64,
    n_submitters: usize,
    n_workers: usize,
    submissions_each: u64,
    submit_gap_max_ms: u64,
    submit_once_p: f64,
    crash_mean_ms: Option<u64>,
    worker_death_mean_ms: Option<u64>,
    slow_p: f64,
    client_drop_p: f64,
    client_delay_max_ms: u64,
    snapshot_every: u64,
    /// Requests that arrive within this window of the first are stepped before the drain
    /// (the daemon takes the calls queued, then carries out; 0: a drain per request).
    batch_window_ms: u64,
    /// Each candidate's clock is off the true time by up to this much, either way ("well
    /// within a lease": the shortest lease is four times the largest skew).
    skew_max_ms: u64,
}

impl CParams {
    fn draw(rng: &mut Rng) -> CParams {
        CParams {
            fault_phase_ms: rng.range(15_000, 45_000),
            lease_ms: *rng.pick(&[800, 1_500, 3_000, 8_000]),
            reply_timeout_ms: *rng.pick(&[1_000, 2_000, 5_000]),
            n_submitters: rng.range(1, 3) as usize,
            n_workers: rng.range(1, 4) as usize,
            submissions_each: rng.range(3, 20),
            submit_gap_max_ms: *rng.pick(&[300, 1_500, 4_000]),
            submit_once_p: *rng.pick(&[1.0, 0.8, 0.5]),
            crash_mean_ms: rng.chance(0.7).then(|| rng.range(2_000, 15_000)),
            worker_death_mean_ms: rng.chance(0.6).then(|| rng.range(2_000, 10_000)),
            slow_p: *rng.pick(&[0.0, 0.1, 0.3]),
            client_drop_p: *rng.pick(&[0.0, 0.01, 0.05]),
            client_delay_max_ms: *rng.pick(&[2, 10, 50]),
            snapshot_every: rng.range(3, 40),
            batch_window_ms: *rng.pick(&[0, 0, 1, 5]),
            skew_max_ms: *rng.pick(&[0, 0, 20, 200]),
        }
    }
}

/// What a worker holds.
#[derive(Clone, Debug)]
struct Holding {
    task: u64,
    lease: u64,
    /// The expiry its last acknowledged grant or extension stated.
    expiry: u64,
    /// When its work is done.
    done_at_ms: u64,
    /// It works on past its lease without heartbeats.
    slow: bool,
    /// The outcome it reports.
    outcome: Outcome,
}

/// A submitter or a worker.
#[derive(Debug)]
struct Actor {
    worker: bool,
    caller: Caller,
    /// The candidate it tries next.
    target: usize,
    /// Candidates refused in a row (all of them: pause before the next round).
    refused_in_row: usize,
    /// The request it waits on: its connection (0: not sent yet, it goes at the next wake)
    /// and the request (sent again as it is).
    outstanding: Option<(u64, WireRequest)>,
    /// Pause before the next attempt of the outstanding request, ms.
    backoff_ms: u64,
    generation: u64,
    alive: bool,
    holding: Option<Holding>,
    submitted: u64,
}

/// What released answers stated: each must be in the committed log, then and later.
#[derive(Debug, Default)]
struct Told {
    /// Tasks said to exist, with the first term one was said to in.
    tasks: BTreeMap<u64, u64>,
    /// (owner uid, submission id) -> its task.
    submissions: BTreeMap<(u32, lava_coord_ll::SubmissionId), u64>,
    /// (owner uid, submission id) -> the first term it was answered in.
    submission_terms: BTreeMap<(u32, lava_coord_ll::SubmissionId), u64>,
    /// task -> the first term its outcome was told in.
    outcome_terms: BTreeMap<u64, u64>,
    /// task -> when its outcome was first told.
    outcome_times: BTreeMap<u64, u64>,
    /// lease -> (task, when it was granted, the latest expiry stated).
    leases: BTreeMap<u64, (u64, u64, u64)>,
    /// task -> (lease, outcome) said to have ended it.
    outcomes: BTreeMap<u64, (u64, Outcome)>,
}

/// The oracle's own view of a task, from the committed events.
#[derive(Clone, Debug, PartialEq, Eq)]
enum OState {
    Waiting,
    Leased { lease: u64 },
    Done { lease: u64, outcome: Outcome },
}

/// A model of the committed log's meaning, written from the protocol page, not from the
/// logic.
#[derive(Debug, Default)]
struct Model {
    tasks: Vec<OState>,
    /// lease -> (task, when it was granted, its latest expiry recorded).
    leases: BTreeMap<u64, (u64, u64, u64)>,
    /// (owner uid, submission id) -> the task of its one `TaskCreatedOnce`.
    submissions: BTreeMap<(u32, lava_coord_ll::SubmissionId), u64>,
}

impl Model {
    fn state(&self, task: u64) -> Option<&OState> {
        task.checked_sub(1).and_then(|i| self.tasks.get(i as usize))
    }

    /// Checks a committed event against the model and applies it.
    /// Two leases of a task may overlap by `tolerance_ms`, the most two candidates' clocks
    /// differ (a lease expired by one clock, the task granted again by another).
    fn accept(&mut self, event: &Event, lease_ms: u64, tolerance_ms: u64) -> Result<(), String> {
        let task = event.task().get();
        let current = self.state(task).cloned();
        let next = match (event, current) {
            (Event::TaskCreated { .. }, None) if task == self.tasks.len() as u64 + 1 => {
                self.tasks.push(OState::Waiting);
                return Ok(());
            }
            (Event::TaskCreatedOnce { owner, submission, .. }, None)
                if task == self.tasks.len() as u64 + 1 =>
            {
                let key = (owner.uid, *submission);
                if let Some(first) = self.submissions.insert(key, task) {
                    return Err(format!(
                        "submission id {submission} of uid {} created task {first}, then task {task}",
                        owner.uid
                    ));
                }
                self.tasks.push(OState::Waiting);
                return Ok(());
            }
            (Event::LeaseGranted { lease, expires_at_ms, .. }, Some(OState::Waiting)) => {
                let granted_at = expires_at_ms - lease_ms;
                for (&other, &(t, _, expiry)) in &self.leases {
                    if t == task && expiry > granted_at + tolerance_ms {
                        return Err(format!(
                            "task {task} granted lease {lease} at {granted_at} while lease {other} ran until {expiry}"
                        ));
                    }
                }
                self.leases.insert(lease.get(), (task, granted_at, *expires_at_ms));
                OState::Leased { lease: lease.get() }
            }
            (Event::LeaseExtended { lease, expires_at_ms, .. }, Some(OState::Leased { lease: l }))
                if lease.get() == l =>
            {
                let entry = self.leases.get_mut(&l).expect("granted");
                if *expires_at_ms < entry.2 {
                    return Err(format!("lease {l} extended to {expires_at_ms}, before {}", entry.2));
                }
                entry.2 = *expires_at_ms;
                OState::Leased { lease: l }
            }
            (
                Event::TaskCompleted { lease, .. } | Event::TaskFailed { lease, .. },
                Some(OState::Leased { lease: l }),
            ) if lease.get() == l => {
                let outcome = if matches!(event, Event::TaskCompleted { .. }) {
                    Outcome::Completed
                } else {
                    Outcome::Failed
                };
                OState::Done { lease: l, outcome }
            }
            (Event::TaskCancelled { .. }, Some(_)) => return Ok(()),
            (Event::LeaseExpired { lease, expires_at_ms, .. }, Some(OState::Leased { lease: l }))
                if lease.get() == l =>
            {
                let recorded = self.leases[&l].2;
                if *expires_at_ms != recorded {
                    return Err(format!(
                        "lease {l} expired at {expires_at_ms}, its recorded expiry is {recorded}"
                    ));
                }
                OState::Waiting
            }
            (event, state) => return Err(format!("{event:?} does not fit {state:?}")),
        };
        self.tasks[(task - 1) as usize] = next;
        Ok(())
    }
}

/// The simulated cluster of the replicated coordinator.
pub struct CoordWorld {
    seed: u64,
    params: CParams,
    rng: Rng,
    now_ms: u64,
    queue: Queue<CEv>,
    config: CoordConfig,
    group: Group<CoordApp, Pending, CPacket>,
    actors: Vec<Actor>,
    next_conn: u64,
    /// The applied index of each candidate's last snapshot (the daemon's `snapshot_index`).
    snapshot_index: Vec<u64>,
    /// Per candidate: how far its clock is off the true time, ms.
    clock_offset: Vec<i64>,
    /// Per candidate: requests stepped, their drain to come (`CEv::Drain`).
    drain_due: Vec<bool>,
    /// A coordinator fed only the committed entries, in order.
    shadow: Coord,
    model: Model,
    told: Told,
    trace: Trace,
    /// Counters.
    pub stats: CoordStats,
    healing: bool,
    heal_start_ms: u64,
    converged_at_ms: Option<u64>,
    done: bool,
}

fn task_state_name(state: &TaskState) -> String {
    match state {
        TaskState::Waiting => "waiting".into(),
        TaskState::Leased { lease, .. } => format!("leased ({lease})"),
        TaskState::Finished { lease, outcome, .. } => format!("{outcome:?} ({lease})"),
    }
}

impl CoordWorld {
    /// Answers a leader released before its own fsync ended, over the run.
    pub(crate) fn released_before_own_fsync(&self) -> u64 {
        self.group.released_before_own_fsync
    }

    /// Windows of a full disk on a candidate, over the run.
    pub(crate) fn disk_fulls(&self) -> u64 {
        self.group.disk_fulls
    }

    /// The world of `seed`, before its first event.
    pub fn new(seed: u64, options: &Options) -> CoordWorld {
        let mut rng = Rng::new(seed);
        let params = CParams::draw(&mut rng);
        let repl_params = ReplParams::draw(&mut rng);
        let config = CoordConfig {
            lease_duration_ms: params.lease_ms,
            payload_bytes_max: PAYLOAD_MAX,
            leases_per_worker_max: 2,
            admins: Vec::new(),
            // Longer than any run: a submission id is recognised throughout.
            submission_window_ms: 24 * 3_600_000,
            ..CoordConfig::default()
        };
        let skew = params.skew_max_ms;
        let clock_offset = (0..CANDIDATES).map(|_| rng.range(0, 2 * skew) as i64 - skew as i64).collect();
        let mut actors = Vec::new();
        for k in 0..params.n_submitters + params.n_workers {
            let worker = k >= params.n_submitters;
            let (uid, name) = if worker {
                (WORKER_UID, "worker".to_owned())
            } else {
                (2000 + k as u32, format!("user{k}"))
            };
            actors.push(Actor {
                worker,
                caller: Caller { uid, user: UserName::parse(&name).expect("valid") },
                target: rng.index(CANDIDATES),
                refused_in_row: 0,
                outstanding: None,
                backoff_ms: 100,
                generation: 0,
                alive: true,
                holding: None,
                submitted: 0,
            });
        }
        CoordWorld {
            seed,
            params,
            rng,
            now_ms: T0_MS,
            queue: Queue::default(),
            shadow: Coord::new(config.clone()),
            config,
            group: Group::new(repl_params),
            actors,
            next_conn: 1,
            snapshot_index: vec![0; CANDIDATES],
            drain_due: vec![false; CANDIDATES],
            clock_offset,
            model: Model::default(),
            told: Told::default(),
            trace: Trace::new(options.trace),
            stats: CoordStats::default(),
            healing: false,
            heal_start_ms: 0,
            converged_at_ms: None,
            done: false,
        }
    }

    fn at(&mut self, delay_ms: u64, ev: CEv) {
        self.queue.push(self.now_ms + delay_ms, ev);
    }

    fn line(&self, text: impl FnOnce() -> String) {
        self.trace.line(self.now_ms, text);
    }

    /// Reports a broken property: the run fails with the seed and what broke.
    #[track_caller]
    fn violation(&self, problem: impl std::fmt::Display) -> ! {
        panic!(
            "lava-sim coordinator violation (seed {}, t = {} ms): {problem}\n{}",
            self.seed,
            self.now_ms.saturating_sub(T0_MS),
            self.group.describe(|_| String::new())
        );
    }

    /// Whether the run reached its final checks.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Runs the whole scenario; returns the trace hash.
    pub fn run(&mut self) -> u64 {
        candidates::boot(self);
        for actor in 0..self.actors.len() {
            let delay = self.rng.range(100, 1_500);
            self.at(delay, CEv::Wake { actor, generation: 0 });
        }
        if let Some(mean) = self.params.crash_mean_ms {
            let delay = self.rng.exponential_ms(mean);
            self.at(delay, CEv::FaultCrash);
        }
        if let Some(mean) = self.params.worker_death_mean_ms {
            let delay = self.rng.exponential_ms(mean);
            self.at(delay, CEv::WorkerDeath);
        }
        self.at(self.params.fault_phase_ms, CEv::HealStart);
        while let Some((time_ms, ev)) = self.queue.pop() {
            self.now_ms = time_ms;
            self.stats.n_events += 1;
            if self.stats.n_events > EVENTS_MAX {
                self.violation(format!("runaway: more than {EVENTS_MAX} events"));
            }
            self.trace.mix(time_ms);
            self.handle(ev);
            if self.done {
                break;
            }
        }
        self.stats.end_ms = self.now_ms - T0_MS;
        self.trace.mix(self.stats.n_events);
        self.trace.hash()
    }

    fn handle(&mut self, ev: CEv) {
        match ev {
            CEv::Repl(ev) => candidates::event(self, ev),
            CEv::Deliver { to, packet } => {
                self.trace.mix(1);
                candidates::deliver(self, to, packet);
            }
            CEv::ToClient { actor, conn, what } => {
                self.trace.mix(2);
                self.client_receive(actor, conn, what);
            }
            CEv::Wake { actor, generation } => {
                self.trace.mix(3);
                if self.actors[actor].generation == generation {
                    self.act(actor);
                }
            }
            CEv::Timeout { actor, conn } => {
                self.trace.mix(4);
                if self.actors[actor].outstanding.as_ref().is_some_and(|(c, _)| *c == conn) {
                    self.line(|| format!("actor {actor}: no answer on connection {conn}"));
                    self.attempt_failed(actor, true);
                }
            }
            CEv::Drain { c } => {
                self.trace.mix(9);
                self.finish_turn(c);
            }
            CEv::FaultCrash => {
                if self.healing {
                    return;
                }
                self.trace.mix(5);
                let c = self.rng.index(CANDIDATES);
                if self.group.is_up(c) {
                    candidates::crash(self, c, "between drains");
                }
                let mean = self.params.crash_mean_ms.expect("scheduled");
                let delay = self.rng.exponential_ms(mean);
                self.at(delay, CEv::FaultCrash);
            }
            CEv::WorkerDeath => {
                if self.healing {
                    return;
                }
                self.trace.mix(6);
                let workers: Vec<usize> = (0..self.actors.len()).filter(|&a| self.actors[a].worker).collect();
                let a = *self.rng.pick(&workers);
                if self.actors[a].alive {
                    self.line(|| format!("actor {a}: dies holding {:?}", self.actors[a].holding));
                    let actor = &mut self.actors[a];
                    actor.alive = false;
                    actor.generation += 1;
                    actor.holding = None;
                    actor.outstanding = None;
                    let back = self.rng.range(500, 10_000);
                    self.at(back, CEv::Wake { actor: a, generation: self.actors[a].generation });
                }
                let mean = self.params.worker_death_mean_ms.expect("scheduled");
                let delay = self.rng.exponential_ms(mean);
                self.at(delay, CEv::WorkerDeath);
            }
            CEv::HealStart => {
                self.trace.mix(7);
                self.line(|| "HEAL".into());
                self.healing = true;
                self.heal_start_ms = self.now_ms;
                self.params.client_drop_p = 0.0;
                self.params.slow_p = 0.0;
                candidates::heal(self);
                for a in 0..self.actors.len() {
                    if !self.actors[a].alive {
                        self.actors[a].generation += 1;
                        let generation = self.actors[a].generation;
                        self.at(0, CEv::Wake { actor: a, generation });
                    }
                }
                self.at(1_000, CEv::CheckConverged);
            }
            CEv::CheckConverged => {
                self.trace.mix(8);
                if self.converged() {
                    match self.converged_at_ms {
                        Some(since) if self.now_ms - since >= QUIET_MS => {
                            self.at(0, CEv::Finish);
                            return;
                        }
                        Some(_) => {}
                        None => self.converged_at_ms = Some(self.now_ms),
                    }
                } else {
                    self.converged_at_ms = None;
                }
                if self.now_ms - self.heal_start_ms > HEAL_MS_MAX {
                    self.violation(format!(
                        "the coordinator did not converge within {HEAL_MS_MAX} ms of healing: unfinished tasks {:?}, actors {:?}",
                        self.model.tasks.iter().enumerate().filter(|(_, s)| !matches!(s, OState::Done { .. })).collect::<Vec<_>>(),
                        self.actors
                    ));
                }
                self.at(1_000, CEv::CheckConverged);
            }
            CEv::Finish => {
                self.final_checks();
                self.done = true;
            }
        }
    }

    /// Healed and idle: one leader with nothing outstanding, every candidate caught up,
    /// every task finished, every submission answered.
    fn converged(&self) -> bool {
        // Idle workers keep asking for leases, so an answer may always be held: the
        // leader need only have nothing outstanding.
        let top = self.group.top();
        let caught_up = self.group.cands.iter().all(|c| {
            !c.paused && c.inbox.is_empty() && c.machine.as_ref().is_some_and(|m| m.applied() == top)
        });
        let leader_idle = self
            .group
            .serving()
            .is_some_and(|c| self.group.cands[c].machine.as_ref().is_some_and(|m| m.outstanding() == 0));
        caught_up
            && leader_idle
            && self.model.tasks.iter().all(|s| matches!(s, OState::Done { .. }))
            && self.actors.iter().all(|a| {
                a.alive && a.holding.is_none() && (a.worker || a.submitted >= self.params.submissions_each)
            })
            && self
                .actors
                .iter()
                .all(|a| a.outstanding.as_ref().is_none_or(|(_, r)| matches!(r, WireRequest::Lease(_))))
    }

    fn final_checks(&mut self) {
        let Some(leader) = self.group.serving() else { self.violation("no candidate serves at the end") };
        let live = self.group.cands[leader].machine.as_ref().expect("serving").app().coord.state_hash();
        let mut replayed = Coord::new(self.config.clone());
        for data in self.group.committed_log() {
            let event = decode_event(&data).unwrap_or_else(|error| self.violation(error));
            if let Err(error) = replayed.apply_owned(event) {
                self.violation(format!("the committed log does not replay: {error}"));
            }
        }
        if replayed.state_hash() != live {
            self.violation("the leader's state differs from the committed log replayed from nothing");
        }
        for c in 0..CANDIDATES {
            let Some(m) = self.group.cands[c].machine.as_ref() else {
                self.violation(format!("candidate {} is down at the end", c + 1))
            };
            if m.app().coord.state_hash() != live {
                self.violation(format!("candidate {} holds another state than the leader at the end", c + 1));
            }
        }
        let coord = &self.group.cands[leader].machine.as_ref().expect("serving").app().coord;
        self.check_holds_told(coord, None, "at the end");
        let once: usize = self
            .group
            .committed_log()
            .iter()
            .filter(|data| matches!(decode_event(data), Ok(Event::TaskCreatedOnce { .. })))
            .count();
        if once != self.model.submissions.len() {
            self.violation(format!(
                "{once} TaskCreatedOnce for {} submission ids",
                self.model.submissions.len()
            ));
        }
        self.stats.n_tasks = self.model.tasks.len() as u64;
        self.stats.n_finished =
            self.model.tasks.iter().filter(|s| matches!(s, OState::Done { .. })).count() as u64;
    }

    /// `coord` (a new leader's state, or the final one) holds every task, submission id and
    /// outcome acknowledged so far.
    /// Only what was told in a term before `before_term` (all of it with `None`): a leader
    /// of a term holds what earlier terms committed; a stale leader of an earlier term,
    /// which can acknowledge nothing, may lack what a later one acknowledged.
    fn check_holds_told(&self, coord: &Coord, before_term: Option<u64>, when: &str) {
        let earlier = |term: u64| before_term.is_none_or(|before| term < before);
        for (&task, _) in self.told.tasks.iter().filter(|(_, t)| earlier(**t)) {
            let id = lava_coord_ll::TaskId::new("task", task).expect("non-zero");
            if coord.task(id).is_none() {
                self.violation(format!("acknowledged task {task} is missing {when}"));
            }
        }
        let window: BTreeMap<lava_coord_ll::SubmissionId, u64> =
            coord.snapshot().submissions.iter().map(|s| (s.submission, s.task.get())).collect();
        for (&(uid, submission), &task) in &self.told.submissions {
            if !earlier(self.told.submission_terms[&(uid, submission)]) {
                continue;
            }
            let id = lava_coord_ll::TaskId::new("task", task).expect("non-zero");
            let owner = coord.task(id).map(|t| t.owner.uid);
            if window.get(&submission) != Some(&task) || owner != Some(uid) {
                self.violation(format!(
                    "submission id {submission:?} (uid {uid}) acknowledged as task {task}; {when} the window says {:?}",
                    window.get(&submission)
                ));
            }
        }
        for (&task, &(lease, outcome)) in &self.told.outcomes {
            if !earlier(self.told.outcome_terms[&task]) {
                continue;
            }
            let id = lava_coord_ll::TaskId::new("task", task).expect("non-zero");
            let state = coord.task(id).map(|t| &t.state);
            let same = matches!(state, Some(TaskState::Finished { lease: l, outcome: o, .. }) if l.get() == lease && *o == outcome);
            if !same {
                self.violation(format!(
                    "task {task} acknowledged {outcome:?} under lease {lease}; {when} it is {:?}",
                    state.map(task_state_name)
                ));
            }
        }
    }

    // ----- the candidates' shell -----

    /// Steps the logic of serving candidate `c`: each event proposed, the answer held.
    fn step(&mut self, c: usize, input: Input, answer: Option<(usize, u64, lava_coord_ll::Request, Caller)>) {
        // The candidate's own clock.
        let now = self.now_ms.saturating_add_signed(self.clock_offset[c]);
        let Some(machine) = self.group.cands[c].machine.as_mut() else { return };
        if !machine.is_serving() {
            return;
        }
        self.stats.n_steps += 1;
        let mut effects = Vec::new();
        machine.app_mut().coord.step(now, input, &mut effects);
        let mut answer = answer;
        for effect in effects {
            match effect {
                Effect::Append(event) => {
                    let bytes = encode(&event);
                    self.trace.mix_bytes(&bytes);
                    if let Err(refused) = machine.propose(bytes) {
                        self.trace.line(now, || {
                            format!("candidate {}: {} not proposed: {refused}", c + 1, event.name())
                        });
                    }
                }
                Effect::Respond { reply, .. } => {
                    let Some((actor, conn, request, caller)) = answer.take() else {
                        panic!("seed {}: the logic answered a step without a request", self.seed)
                    };
                    machine.hold(Pending { stepped_ms: self.now_ms, actor, conn, request, caller, reply });
                }
            }
        }
        if let Err(problem) = machine.app().coord.check_invariants() {
            self.violation(format!("candidate {}: {problem}", c + 1));
        }
    }

    /// A request reaches candidate `c`, which runs.
    fn take_request(
        &mut self,
        c: usize,
        actor: usize,
        conn: u64,
        incarnation: u64,
        operation: u32,
        body: &[u8],
    ) {
        let serving = self.group.cands[c].machine.as_ref().is_some_and(|m| m.is_serving());
        if self.group.incarnation(c) != incarnation || !serving {
            // A restarted process has no such connection; a follower has no listener.
            self.send_to_client(actor, conn, ToClient::Closed);
            return;
        }
        let request = wire::decode_request(operation, body, &BODY_LIMITS)
            .unwrap_or_else(|error| self.violation(format!("a request does not decode: {error}")));
        let limits = Limits { payload_bytes_max: PAYLOAD_MAX };
        let caller = self.actors[actor].caller.clone();
        match lava_coord_ll::Request::validate(request, &limits) {
            Ok(request) => {
                let input = Input::Request {
                    client: ClientId(conn),
                    caller: caller.clone(),
                    request: request.clone(),
                };
                self.step(c, input, Some((actor, conn, request, caller)));
            }
            Err(error) => self.violation(format!("a simulated client's request is refused by ll: {error}")),
        }
        let window = self.params.batch_window_ms;
        if window == 0 {
            CandidateShell::drain(self, c);
        } else if !self.drain_due[c] {
            self.drain_due[c] = true;
            self.at(window, CEv::Drain { c });
        }
    }

    /// The turn of candidate `c`'s loop that took requests ends with its drain, before
    /// anything else reaches the machine (a paused process ends it when it runs again).
    fn finish_turn(&mut self, c: usize) {
        if !self.drain_due[c] || !self.group.is_up(c) || self.group.cands[c].paused {
            return;
        }
        self.drain_due[c] = false;
        CandidateShell::drain(self, c);
    }

    fn send_to_client(&mut self, actor: usize, conn: u64, what: ToClient) {
        if self.rng.chance(self.params.client_drop_p) {
            self.stats.n_frames_lost += 1;
            return;
        }
        let delay = self.rng.range(1, self.params.client_delay_max_ms);
        self.at(delay, CEv::ToClient { actor, conn, what });
    }

    /// What a released answer states is in the committed log, and agrees with what was
    /// said before.
    fn acknowledged(&mut self, pending: &Pending, term: u64) {
        let now = self.now_ms;
        match (&pending.request, &pending.reply) {
            (lava_coord_ll::Request::Submit { .. }, Reply::Submitted(r)) => {
                if self.model.state(r.task_id).is_none() {
                    self.violation(format!("task {} acknowledged, not committed", r.task_id));
                }
                self.told.tasks.entry(r.task_id).or_insert(term);
            }
            (lava_coord_ll::Request::SubmitOnce { submission, .. }, Reply::SubmittedOnce(r)) => {
                let key = (pending.caller.uid, *submission);
                if self.model.submissions.get(&key) != Some(&r.task_id) {
                    self.violation(format!(
                        "submission id {submission} answered task {}, the committed log says {:?}",
                        r.task_id,
                        self.model.submissions.get(&key)
                    ));
                }
                self.told.submission_terms.entry(key).or_insert(term);
                if let Some(before) = self.told.submissions.insert(key, r.task_id)
                    && before != r.task_id
                {
                    self.violation(format!(
                        "submission id {submission} answered task {before}, then {}",
                        r.task_id
                    ));
                }
                self.stats.n_repeated += u64::from(r.repeated);
                self.told.tasks.entry(r.task_id).or_insert(term);
            }
            (lava_coord_ll::Request::Lease { .. }, Reply::Lease(wire::LeaseReply { lease: Some(grant) })) => {
                let (task, lease, expiry) = (grant.task_id, grant.lease_id, grant.expires_at_ms);
                // A grant released late may be older than the end (its lease id smaller).
                if let Some((l, outcome)) = self.told.outcomes.get(&task).filter(|(l, _)| lease > *l) {
                    self.violation(format!(
                        "task {task}, acknowledged {outcome:?} under lease {l}, handed out again (lease {lease})"
                    ));
                }
                // Two leases of a task are never valid at once: the time each was granted
                // until the latest expiry promised for it never overlap (an answer released
                // late may state a lease that has expired already).
                let granted_at = expiry - self.params.lease_ms;
                for (&other, &(t, g, e)) in &self.told.leases {
                    let overlap = e.min(expiry).saturating_sub(g.max(granted_at));
                    if t == task && other != lease && overlap > 2 * self.params.skew_max_ms {
                        self.violation(format!(
                            "task {task} handed out under lease {lease} from {granted_at} to {expiry} while lease {other} was promised from {g} until {e}"
                        ));
                    }
                }
                if self.model.leases.get(&lease).is_none_or(|&(t, _, e)| t != task || e < expiry) {
                    self.violation(format!("lease {lease} of task {task} acknowledged, not committed so"));
                }
                if granted_at > now + self.params.skew_max_ms {
                    self.violation(format!("lease {lease} granted in the future ({granted_at} > {now})"));
                }
                self.told.tasks.entry(task).or_insert(term);
                let entry = self.told.leases.entry(lease).or_insert((task, granted_at, expiry));
                entry.2 = entry.2.max(expiry);
            }
            (lava_coord_ll::Request::Heartbeat(_), Reply::Extended(r)) => {
                let (task, lease, expiry) = (r.task_id, r.lease_id, r.expires_at_ms);
                let Some(&(t, granted_at, e)) = self.model.leases.get(&lease) else {
                    self.violation(format!("lease {lease} promised until {expiry}, never granted"))
                };
                if t != task || e < expiry {
                    self.violation(format!("lease {lease} promised until {expiry}, not committed so"));
                }
                let entry = self.told.leases.entry(lease).or_insert((task, granted_at, expiry));
                entry.2 = entry.2.max(expiry);
            }
            (lava_coord_ll::Request::Finish { lease, outcome }, Reply::Outcome(_)) => {
                let (task, lease) = (lease.task.get(), lease.lease.get());
                if self.model.state(task) != Some(&OState::Done { lease, outcome: *outcome }) {
                    self.violation(format!(
                        "task {task} acknowledged {outcome:?} under lease {lease}; committed: {:?}",
                        self.model.state(task)
                    ));
                }
                self.told.outcome_terms.entry(task).or_insert(term);
                self.told.outcome_times.entry(task).or_insert(now);
                if let Some(before) = self.told.outcomes.insert(task, (lease, *outcome))
                    && before != (lease, *outcome)
                {
                    self.violation(format!(
                        "task {task} acknowledged {before:?}, then {:?}",
                        (lease, *outcome)
                    ));
                }
                self.told.tasks.entry(task).or_insert(term);
            }
            (lava_coord_ll::Request::QueryTask(_), Reply::Task(r)) => {
                // What a query reports was the leader's state when it was stepped: it is
                // committed, and a finished task stays so.
                let info = &r.task;
                let task = info.task_id;
                let committed = self.model.state(task).cloned();
                let outcome = match info.state {
                    wire::task_state::COMPLETED => Some(Outcome::Completed),
                    wire::task_state::FAILED => Some(Outcome::Failed),
                    _ => None,
                };
                let fits = match (info.state, &committed) {
                    (_, None) => false,
                    (wire::task_state::WAITING, Some(_)) => true,
                    (wire::task_state::LEASED, Some(_)) => self
                        .model
                        .leases
                        .get(&info.lease_id)
                        .is_some_and(|&(t, _, e)| t == task && e >= info.expires_at_ms),
                    (_, Some(state)) => {
                        outcome.is_some_and(|o| *state == OState::Done { lease: info.lease_id, outcome: o })
                    }
                };
                if !fits {
                    self.violation(format!("task {task} reported {info:?}; committed: {committed:?}"));
                }
                // Linearizable: a query stepped after an outcome was acknowledged reports it
                // (a deposed leader that does not know it yet must not answer from its state).
                if let Some(&told_at) = self.told.outcome_times.get(&task)
                    && told_at < pending.stepped_ms
                    && outcome.is_none()
                {
                    self.violation(format!(
                        "task {task}, acknowledged finished at {told_at}, reported {} by a query stepped at {}",
                        wire::task_state::name(info.state),
                        pending.stepped_ms
                    ));
                }
                if outcome.is_some() {
                    self.told.outcome_terms.entry(task).or_insert(term);
                    self.told.outcome_times.entry(task).or_insert(now);
                }
                if let Some(outcome) = outcome
                    && let Some(before) = self.told.outcomes.insert(task, (info.lease_id, outcome))
                    && before != (info.lease_id, outcome)
                {
                    self.violation(format!("task {task} acknowledged {before:?}, then reported {info:?}"));
                }
                self.told.tasks.entry(task).or_insert(term);
            }
            _ => {}
        }
    }

    // ----- clients -----

    fn schedule_wake(&mut self, actor: usize, delay_ms: u64) {
        let generation = self.actors[actor].generation;
        self.at(delay_ms, CEv::Wake { actor, generation });
    }

    /// Sends `request` on a new connection to the actor's target candidate.
    fn send(&mut self, actor: usize, request: WireRequest) {
        let conn = self.next_conn;
        self.next_conn += 1;
        let target = self.actors[actor].target;
        let incarnation = self.group.incarnation(target);
        let body = request.encode_body();
        let operation = request.operation().code();
        self.trace.mix_bytes(&body);
        self.line(|| format!("actor {actor}: {request:?} to candidate {} (connection {conn})", target + 1));
        self.actors[actor].outstanding = Some((conn, request));
        let timeout = self.params.reply_timeout_ms;
        self.at(timeout, CEv::Timeout { actor, conn });
        if self.rng.chance(self.params.client_drop_p) {
            self.stats.n_frames_lost += 1;
            return;
        }
        let delay = self.rng.range(1, self.params.client_delay_max_ms);
        let packet = CPacket::Request { actor, conn, incarnation, operation, body };
        self.at(delay, CEv::Deliver { to: target, packet });
    }

    /// An attempt got no answer: the request goes again, save a plain submission that may
    /// have been taken (`maybe_taken`), which is given up (at least once, as the real client).
    fn attempt_failed(&mut self, actor: usize, maybe_taken: bool) {
        let plain =
            self.actors[actor].outstanding.as_ref().is_some_and(|(_, r)| matches!(r, WireRequest::Submit(_)));
        if plain && maybe_taken {
            self.line(|| format!("actor {actor}: a plain submission unanswered: given up"));
            self.actors[actor].outstanding = None;
            return self.submitter_pause(actor);
        }
        self.retry(actor);
    }

    /// A submitter's pause before its next submission.
    fn submitter_pause(&mut self, actor: usize) {
        let gap = self.rng.range(1, self.params.submit_gap_max_ms);
        self.schedule_wake(actor, gap);
    }

    /// The outstanding request goes again to the next candidate, at once or, once every
    /// candidate failed in a row, after a pause that doubles up to 1 s (`client::submit_once`).
    fn retry(&mut self, actor: usize) {
        let Some((_, request)) = self.actors[actor].outstanding.take() else { return };
        let a = &mut self.actors[actor];
        a.target = (a.target + 1) % CANDIDATES;
        a.refused_in_row += 1;
        let pause = if a.refused_in_row >= CANDIDATES {
            a.refused_in_row = 0;
            let pause = a.backoff_ms;
            a.backoff_ms = (a.backoff_ms * 2).min(1_000);
            pause
        } else {
            self.rng.range(1, 20)
        };
        let a = &mut self.actors[actor];
        a.outstanding = Some((0, request));
        self.schedule_wake(actor, pause);
    }

    fn client_receive(&mut self, actor: usize, conn: u64, what: ToClient) {
        if self.actors[actor].outstanding.as_ref().is_none_or(|(c, _)| *c != conn) {
            return; // An answer to an attempt given up, or to an earlier life.
        }
        let reply = match what {
            ToClient::Closed => {
                self.line(|| format!("actor {actor}: connection {conn} refused or closed"));
                return self.attempt_failed(actor, false);
            }
            ToClient::Answer { operation, body } => wire::decode_reply(operation, &body, &BODY_LIMITS)
                .unwrap_or_else(|error| self.violation(format!("an answer does not decode: {error}"))),
        };
        self.line(|| format!("actor {actor}: answer {reply:?}"));
        if let Reply::Error(error) = &reply
            && error.code == wire::ERR_TRY_AGAIN
        {
            // Not done (or the window is full): connect again and retry, the same request.
            return self.attempt_failed(actor, true);
        }
        let (_, request) = self.actors[actor].outstanding.take().expect("checked");
        let a = &mut self.actors[actor];
        a.refused_in_row = 0;
        a.backoff_ms = 100;
        let now = self.now_ms;
        match (request, reply) {
            (
                WireRequest::Submit(_) | WireRequest::SubmitOnce(_),
                Reply::Submitted(_) | Reply::SubmittedOnce(_),
            )
            | (WireRequest::Task(_), Reply::Task(_)) => {
                return self.submitter_pause(actor);
            }
            (WireRequest::Task(_), Reply::Error(error)) if error.code == wire::ERR_UNKNOWN_TASK => {
                return self.submitter_pause(actor);
            }
            (WireRequest::Lease(_), Reply::Lease(r)) => {
                if let Some(grant) = r.lease {
                    let slow = self.rng.chance(self.params.slow_p);
                    let lease_ms = self.params.lease_ms;
                    let work = if slow {
                        self.rng.range(lease_ms, 3 * lease_ms)
                    } else if self.healing {
                        // Healed: the work left is done briskly, so that the run ends.
                        self.rng.range(0, lease_ms / 2)
                    } else {
                        self.rng.range(0, 3 * lease_ms)
                    };
                    let outcome = if self.rng.chance(0.85) { Outcome::Completed } else { Outcome::Failed };
                    if let Some(old) = &self.actors[actor].holding {
                        self.violation(format!("actor {actor} granted a task while holding {old:?}"));
                    }
                    self.actors[actor].holding = Some(Holding {
                        task: grant.task_id,
                        lease: grant.lease_id,
                        expiry: grant.expires_at_ms,
                        done_at_ms: now + work,
                        slow,
                        outcome,
                    });
                } else {
                    let pause = self.rng.range(100, 500);
                    return self.schedule_wake(actor, pause);
                }
            }
            (WireRequest::Heartbeat(_), Reply::Extended(r)) => {
                if let Some(h) = self.actors[actor].holding.as_mut()
                    && h.lease == r.lease_id
                {
                    h.expiry = h.expiry.max(r.expires_at_ms);
                }
            }
            (WireRequest::Complete(_) | WireRequest::Fail(_), Reply::Outcome(_)) => {
                self.actors[actor].holding = None;
            }
            (
                WireRequest::Heartbeat(_) | WireRequest::Complete(_) | WireRequest::Fail(_),
                Reply::Error(error),
            ) if error.code == wire::ERR_LEASE_LOST => {
                self.actors[actor].holding = None;
            }
            (request, reply) => self.violation(format!("actor {actor}: {request:?} answered {reply:?}")),
        }
        self.schedule_wake(actor, 0);
    }

    /// What `actor` does now, if anything.
    fn act(&mut self, actor: usize) {
        let now = self.now_ms;
        if !self.actors[actor].alive {
            // Back from the dead, with no memory.
            self.line(|| format!("actor {actor}: comes back"));
            self.actors[actor].alive = true;
        }
        if let Some((conn, request)) = self.actors[actor].outstanding.take() {
            if conn == 0 {
                return self.send(actor, request);
            }
            self.actors[actor].outstanding = Some((conn, request));
            return;
        }
        if !self.actors[actor].worker {
            return self.submit(actor);
        }
        let lease_ms = self.params.lease_ms;
        let Some(h) = self.actors[actor].holding.clone() else {
            let worker = format!("w{actor}");
            return self.send(actor, WireRequest::Lease(wire::LeaseRequest { worker }));
        };
        let lease = wire::TaskOutcome { task_id: h.task, lease_id: h.lease };
        if now >= h.done_at_ms {
            let request = if h.outcome == Outcome::Completed {
                WireRequest::Complete(lease)
            } else {
                WireRequest::Fail(lease)
            };
            return self.send(actor, request);
        }
        let beat_at = h.expiry.saturating_sub(2 * lease_ms / 3);
        if now >= beat_at && !h.slow {
            return self
                .send(actor, WireRequest::Heartbeat(wire::Heartbeat { task_id: h.task, lease_id: h.lease }));
        }
        let next = if h.slow { h.done_at_ms } else { beat_at.min(h.done_at_ms) };
        self.schedule_wake(actor, next.saturating_sub(now).max(1));
    }

    fn submit(&mut self, actor: usize) {
        let done = self.actors[actor].submitted >= self.params.submissions_each;
        if done && self.healing {
            return;
        }
        if done || self.rng.chance(0.3) {
            // An operator's look at a task (TASK_QUERY), perhaps one not created yet.
            let task_id = self.rng.range(1, self.model.tasks.len() as u64 + 1);
            return self.send(actor, WireRequest::Task(wire::TaskQuery { task_id }));
        }
        let k = self.actors[actor].submitted + 1;
        self.actors[actor].submitted = k;
        let size = self.rng.range(0, 16) as usize;
        let payload: Vec<u8> = (0..size).map(|i| (k as u8).wrapping_add(i as u8)).collect();
        let once = self.rng.chance(self.params.submit_once_p);
        let request = if once {
            let submission = wire::SubmissionId { high: self.rng.next_u64() | 1, low: self.rng.next_u64() };
            WireRequest::SubmitOnce(wire::SubmitTaskOnce { submission, payload })
        } else {
            WireRequest::Submit(wire::SubmitTask { payload })
        };
        self.send(actor, request);
    }
}

impl CandidateShell for CoordWorld {
    type App = CoordApp;
    type Answer = Pending;
    type Packet = CPacket;

    fn group(&self) -> &Group<CoordApp, Pending, CPacket> {
        &self.group
    }

    fn group_mut(&mut self) -> &mut Group<CoordApp, Pending, CPacket> {
        &mut self.group
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
        self.at(delay_ms, CEv::Repl(ev));
    }

    fn schedule_raft(&mut self, delay_ms: u64, from: usize, to: usize, message: Vec<u8>) {
        self.at(delay_ms, CEv::Deliver { to, packet: CPacket::Raft { from, bytes: message } });
    }

    fn count_sent(&mut self) {
        self.stats.n_frames += 1;
    }

    fn count_lost(&mut self) {
        self.stats.n_frames_lost += 1;
    }

    fn new_app(&self) -> CoordApp {
        CoordApp { coord: Coord::new(self.config.clone()), config: self.config.clone(), fault: None }
    }

    fn state_bytes(app: &CoordApp) -> Result<Vec<u8>, String> {
        app.coord.check_invariants().map_err(|problem| format!("coordinator invariant: {problem}"))?;
        Ok(encode(&app.coord.snapshot()))
    }

    /// The daemon's `carry_out`: drains until a drain is empty, each carried out in order
    /// (after one with `Lead`, `Tick` is stepped); then maybe a snapshot; then, after a
    /// `Follow`, the candidate starts again from its replica log.
    fn drain(&mut self, c: usize) {
        let mut restart = false;
        loop {
            let Some(machine) = self.group.cands[c].machine.as_mut() else { return };
            let steps = machine.drain();
            if let Some(fault) = machine.app().fault.clone() {
                self.violation(format!("candidate {}: {fault}", c + 1));
            }
            if steps.is_empty() {
                break;
            }
            let carried = candidates::carry_out(self, c, steps);
            if carried.crashed {
                return;
            }
            restart |= carried.follow;
            candidates::check(self, c);
            self.check_replay(c);
            if carried.lead && !restart {
                let coord = &self.group.cands[c].machine.as_ref().expect("up").app().coord;
                let term = self.group.cands[c].machine.as_ref().expect("up").view().term;
                let when = format!("on candidate {}, leading term {term} from now on,", c + 1);
                self.check_holds_told(coord, Some(term), &when);
                // As at any start: expire what ran out while no candidate led.
                self.step(c, Input::Tick, None);
            }
        }
        let machine = self.group.cands[c].machine.as_ref().expect("up");
        let by_count = machine.applied() >= self.snapshot_index[c] + self.params.snapshot_every;
        let by_weight = machine.log_outweighs_snapshot();
        if (by_count || by_weight) && machine.outstanding() == 0 {
            self.stats.n_snapshots += 1;
            self.stats.n_snapshots_by_weight += u64::from(!by_count);
            candidates::compact(self, c);
            let Some(machine) = self.group.cands[c].machine.as_ref() else { return };
            self.snapshot_index[c] = machine.applied();
        }
        if restart && self.group.is_up(c) {
            self.stats.n_deposed += 1;
            self.line(|| format!("candidate {}: starts again from its replica log to follow", c + 1));
            self.snapshot_index[c] = self.group.cands[c].snapshot.as_ref().map_or(0, |s| s.0);
            candidates::start(self, c);
        }
    }

    fn ticked(&mut self, c: usize) {
        self.finish_turn(c);
        if !self.group.is_up(c) {
            return;
        }
        if self.group.cands[c].machine.as_ref().is_some_and(|m| m.is_serving()) {
            self.step(c, Input::Tick, None);
        }
        CandidateShell::drain(self, c);
    }

    fn deliver_running(&mut self, c: usize, packet: CPacket) {
        match packet {
            CPacket::Raft { from, bytes } => {
                self.finish_turn(c);
                if self.group.is_up(c) {
                    candidates::receive(self, c, from, &bytes);
                }
            }
            CPacket::Request { actor, conn, incarnation, operation, body } => {
                self.take_request(c, actor, conn, incarnation, operation, &body);
            }
        }
    }

    fn crashed(&mut self, c: usize) {
        self.stats.n_crashes += 1;
        self.drain_due[c] = false;
        self.snapshot_index[c] = self.group.cands[c].snapshot.as_ref().map_or(0, |s| s.0);
    }

    fn first_commit(&mut self, _c: usize, index: u64, term: u64, data: &[u8]) {
        let event =
            decode_event(data).unwrap_or_else(|error| self.violation(format!("entry {index}: {error}")));
        self.line(|| format!("commit {index} (term {term}): {event:?}"));
        if let Err(problem) = self.model.accept(&event, self.params.lease_ms, 2 * self.params.skew_max_ms) {
            self.violation(format!("committed entry {index}: {problem}"));
        }
        if matches!(event, Event::LeaseExpired { .. }) {
            self.stats.n_expired += 1;
        }
        if let Err(error) = self.shadow.apply_owned(event) {
            self.violation(format!("committed entry {index} does not replay: {error}"));
        }
    }

    fn release(&mut self, c: usize, answer: Pending) {
        self.line(|| format!("candidate {}: releases {:?} to actor {}", c + 1, answer.reply, answer.actor));
        let term = self.group.cands[c].machine.as_ref().expect("up").view().term;
        self.acknowledged(&answer, term);
        let operation = answer.reply.operation().code();
        let body = answer.reply.encode_body();
        self.trace.mix_bytes(&body);
        self.send_to_client(answer.actor, answer.conn, ToClient::Answer { operation, body });
    }

    fn not_done(&mut self, _c: usize, answer: Pending) {
        self.stats.n_not_done += 1;
        let reply = Reply::error(wire::ERR_TRY_AGAIN, NOT_DONE);
        let operation = reply.operation().code();
        self.send_to_client(
            answer.actor,
            answer.conn,
            ToClient::Answer { operation, body: reply.encode_body() },
        );
    }

    fn lead(&mut self, c: usize, term: u64) {
        self.line(|| format!("candidate {}: leads term {term}", c + 1));
        self.stats.n_leads += 1;
    }

    fn follow(&mut self, c: usize, term: u64, leader: Option<ReplicaId>) {
        self.line(|| format!("candidate {}: stops leading term {term} (leader {leader:?})", c + 1));
    }
}

impl CoordWorld {
    /// A candidate whose state is exactly the committed log has the state of a coordinator
    /// fed only the committed entries.
    fn check_replay(&self, c: usize) {
        let Some(machine) = self.group.cands[c].machine.as_ref() else { return };
        if machine.outstanding() != 0 || machine.applied() != self.group.top() {
            return;
        }
        if machine.app().coord.state_hash() != self.shadow.state_hash() {
            self.violation(format!(
                "candidate {}: its state at applied index {} is not the committed log replayed",
                c + 1,
                machine.applied()
            ));
        }
    }
}
