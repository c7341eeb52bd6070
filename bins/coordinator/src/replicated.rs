//! The coordinator as one of several master candidates (docs/failover.md, "One log for two
//! daemons"): its WAL is the candidates' replicated log, not a file of this host.
//!
//! With `LSF_MASTER_LIST` naming two candidates or more, every candidate runs the
//! coordinator. Each keeps its replica log (`coord.replica` in `coord/<candidate>`, through
//! `lava_shell::replication::ReplicaLog`) and talks to the others on `LAVA_COORD_REPL_PORT`
//! (`lava_shell::replication::Link`). The shared `lava_replog::machine::Machine` decides —
//! the same component and contract as mbatchd's (`bins/mbatchd/src/replicated.rs`); this
//! module carries out what it decides, in its order:
//!
//! - **The leader serves.** Only between the machine's `Lead` and `Follow` does the
//!   coordinator listen on `LAVA_COORD_PORT`: clients reach a follower's address, are
//!   refused, and try the next candidate. At `Lead` the state holds every committed
//!   event; the loop steps `Tick` with the current time (leases that ran out meanwhile
//!   expire, as at any start) and binds the port.
//! - **Each event is proposed, each answer held.** The logic's `Append` becomes a proposal
//!   of the event's XDR bytes (the WAL record's bytes); each answer — a reply, a query's,
//!   STATS, a refusal — is held by the machine and sent only once every event before it is
//!   committed (held durably by a majority) in the term it was proposed in, or, with none
//!   outstanding, once a majority confirmed this candidate still leads (the read index).
//!   An answer whose events died with a term is answered `ERR_TRY_AGAIN` and its
//!   connection closed: the client reconnects and retries.
//! - **Followers apply.** Committed events reach the state through `Coord::apply`, as a
//!   restart replays the WAL; a leader's snapshot replaces the state. The machine owns the
//!   state ([`App`]).
//! - **A deposed leader starts again.** At `Follow` the state may hold events that were
//!   never committed: the loop ends, everything it opened is closed, and [`serve`] starts
//!   again from the replica log alone, following (crash-only: the same path as a `kill -9`).
//! - **Snapshots.** Every `--snapshot-events` applied events, or sooner when the applied
//!   entries held in memory outweigh the last snapshot (`Machine::log_outweighs_snapshot`),
//!   once no proposal is outstanding, the state is snapshotted into the replica log and the
//!   log compacted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lava_coord_logic::{ClientId, Coord, CoordConfig, Effect, Event, Input};
use lava_coord_wire::{self as wire, Reply};
use lava_net::{Authenticator, system_now_ms};
use lava_replog::Config;
use lava_replog::machine::{Application, Machine, Step};
use lava_shell::readiness::Readiness;
use lava_shell::replication::{Link, LinkConfig, ReplicaLog};
use lava_shell::signals::{ShellSignal, Signals};
use lava_shell::startup;
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;

use crate::codec::{EVENT_LIMITS, decode_snapshot, encode};
use crate::counters::Counters;
use crate::server::{
    CALLS_PER_WAKEUP_MAX, Call, CallKind, Outbound, REQUESTS_QUEUED_MAX, Shared, ShellConfig, accept_loop,
};
use crate::{Args, ShellError};

/// The replica log's name in the candidate's folder.
pub const REPLICA_LOG_NAME: &str = "coord.replica";
/// The replicated log's clock, also the logic's tick: 100 ms.
pub const REPLICA_TICK: Duration = Duration::from_millis(lava_coord_logic::TICK_INTERVAL_MS);
/// Messages from candidates taken in one turn of the loop at most.
const MESSAGES_TURN_MAX: usize = 1024;

/// The coordinator as one of several master candidates (`LSF_MASTER_LIST` with two names
/// or more).
#[derive(Clone, Debug)]
pub struct Replication {
    /// This candidate's rank in `LSF_MASTER_LIST`, from 1.
    pub id: u64,
    /// Every candidate's name and replication address (`LAVA_ADDR`, else the name
    /// resolved, and `LAVA_COORD_REPL_PORT`), in `LSF_MASTER_LIST` order.
    pub candidates: Vec<(String, SocketAddr)>,
    /// This candidate's own folder: `coord/<candidate>`, so that candidates sharing
    /// `LSB_SHAREDIR` never share a file.
    pub dir: PathBuf,
}

/// The machine's application: the coordinator's state. An entry that does not decode or
/// apply is noted, and the loop stops the daemon after the drain.
#[derive(Debug)]
pub struct App {
    coord: Coord,
    config: CoordConfig,
    fault: Option<String>,
}

impl App {
    fn new(config: CoordConfig) -> App {
        App { coord: Coord::new(config.clone()), config, fault: None }
    }
}

impl Application for App {
    fn apply(&mut self, index: u64, data: &[u8]) {
        if self.fault.is_some() {
            return;
        }
        let applied = lava_xdr::from_bytes::<Event>(data, &EVENT_LIMITS)
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

/// An answer held by the machine until what it depends on is committed.
#[derive(Debug)]
pub struct Pending {
    to: Outbound,
    sequence: u32,
    reply: Reply,
    close: bool,
}

impl Pending {
    fn send(self) {
        // The client may have gone away; its answer is then dropped.
        let _gone = self.to.send((self.sequence, self.reply, self.close));
    }
}

/// How one leadership (or following) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// SIGTERM or SIGINT: stop the daemon.
    Stopped,
    /// This candidate lost its leadership: start again from the replica log and follow.
    Restart,
}

fn replica_error(error: impl std::fmt::Display) -> ShellError {
    ShellError::Replica(error.to_string())
}

/// The candidate's loop: recover from the replica log, follow, serve while leading;
/// returns when stopped or when the leadership ended (see the module doc).
pub async fn serve(
    args: &Args,
    config: &ShellConfig,
    setting: &Replication,
    auth: Arc<Authenticator>,
    coord_config: CoordConfig,
    signals: &mut Signals,
    readiness: &mut Readiness,
) -> Result<Outcome, ShellError> {
    startup::create_private_dir(&setting.dir, "create the candidate's folder")?;
    let (mut log, recovered, report) =
        ReplicaLog::open(&setting.dir, REPLICA_LOG_NAME, crate::codec::LOG_FORMATS)
            .map_err(|error| ShellError::Replica(format!("{}: {error}", setting.dir.display())))?;
    startup::log_open_report(&setting.dir, &report, "replica log");
    let mut snapshot_index = recovered.snapshot.as_ref().map_or(0, |s| s.0);
    let n = setting.candidates.len() as u64;
    let mut machine: Machine<App, Pending> = Machine::recover(
        Config::new(setting.id, n),
        App::new(coord_config.clone()),
        recovered.records,
        recovered.snapshot,
    )
    .map_err(|error| ShellError::Replica(format!("{}: {error}", setting.dir.display())))?;
    let addrs: Vec<SocketAddr> = setting.candidates.iter().map(|(_, addr)| *addr).collect();
    let own = addrs[setting.id as usize - 1];
    let std_listener = bind_replication_port(own).await?;
    let listener = tokio::net::TcpListener::from_std(std_listener)
        .map_err(|error| ShellError::Replica(format!("replication port {own}: {error}")))?;
    let mut link = Link::start(LinkConfig::for_candidates(setting.id, addrs, Arc::clone(&auth)), listener);
    tracing::info!(
        candidate = setting.id,
        candidates = n,
        snapshot = snapshot_index,
        "replicated WAL opened: following until elected"
    );
    // Running as a candidate is this daemon's service (a supervisor must not wait for a
    // leadership that another candidate holds).
    readiness.ready("a master candidate: following until elected");
    let counters = Arc::new(Counters::default());
    let (calls, mut inbox) = mpsc::channel::<Call>(REQUESTS_QUEUED_MAX);
    let shared = Arc::new(Shared {
        auth,
        limits: lava_coord_ll::Limits { payload_bytes_max: args.payload_bytes_max },
        coord_config,
        calls,
        counters: Arc::clone(&counters),
        next_conn: std::sync::atomic::AtomicU64::new(1),
    });
    let mut accept: Option<tokio::task::JoinHandle<()>> = None;
    let mut scrapes = lava_shell::metrics::start_for_loop(config.metrics)?;
    let mut tick = tokio::time::interval(REPLICA_TICK);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut shell = Shell {
        effects: Vec::new(),
        next_client: 1,
        counters,
        snapshot_every: args.snapshot_events.max(1),
        restart: false,
        released_unsynced: None,
    };
    let result = loop {
        let outcome: Result<(), ShellError> = tokio::select! {
            signal = signals.next() => match signal {
                ShellSignal::Stop(name) => {
                    tracing::info!("{name}: stopping");
                    readiness.stopping(&format!("{name}: stopping"));
                    break Ok(Outcome::Stopped);
                }
                ShellSignal::Reload => {
                    tracing::info!("SIGHUP: nothing to reload (the coordinator reads its configuration at start)");
                    Ok(())
                }
            },
            _ = tick.tick() => {
                readiness.pet();
                machine.tick();
                if machine.is_serving() {
                    shell.step(&mut machine, Input::Tick, None);
                }
                Ok(())
            }
            // The leader's fsync ended.
            persisted = log.persisted() => persisted.map_err(replica_error).map(|ticket| {
                if let Some(ticket) = ticket {
                    machine.persisted(ticket);
                }
            }),
            message = link.recv() => {
                receive(&mut machine, &message);
                for _ in 0..MESSAGES_TURN_MAX {
                    let Some(message) = link.try_recv() else { break };
                    receive(&mut machine, &message);
                }
                Ok(())
            }
            call = inbox.recv(), if machine.is_serving() => {
                if let Some(call) = call {
                    shell.take(&mut machine, setting, call, inbox.len());
                    for _ in 1..CALLS_PER_WAKEUP_MAX {
                        let Ok(call) = inbox.try_recv() else { break };
                        shell.take(&mut machine, setting, call, inbox.len());
                    }
                }
                Ok(())
            }
            Some(scrape) = lava_shell::metrics::next_scrape(&mut scrapes) => {
                let stats = shell.stats(&machine, setting, inbox.len());
                scrape.answer(crate::metrics::metrics(&stats, &Default::default()));
                Ok(())
            }
        };
        // The writers of the answers released last turn have run (the loop awaited since).
        if shell.released_unsynced.take().is_some_and(|index| index > machine.replica().durable_index()) {
            lava_crash::point!("coordinator.acknowledged_before_own_fsync");
        }
        let outcome = match outcome {
            Ok(()) => {
                shell
                    .carry_out(&mut machine, &mut log, &link, &mut snapshot_index, |term| {
                        lead(args, config, &shared, term, &mut accept, readiness)
                    })
                    .await
            }
            Err(error) => Err(error),
        };
        if let Err(error) = outcome {
            tracing::error!("{error}; stopping without answering anything more");
            break Err(error);
        }
        if shell.restart {
            break Ok(Outcome::Restart);
        }
    };
    // A clean stop keeps what this candidate knows committed, for its next start (lava-replog's
    // `commit_record`): every step of its drains is carried out by now.
    let result = match result {
        Ok(outcome) => log.stop(&mut machine).await.map_err(replica_error).map(|()| outcome),
        Err(error) => Err(error),
    };
    if let Some(accept) = accept {
        accept.abort();
        // Wait until the task is gone, and its listener closed with it.
        let _cancelled = accept.await;
    }
    drop(link);
    tokio::task::yield_now().await;
    result
}

/// Binds this candidate's replication port. After a leadership ended, the previous link's
/// listener closes as its aborted task is dropped, soon but not at once: an address in use
/// is tried again for a few seconds.
async fn bind_replication_port(own: SocketAddr) -> Result<std::net::TcpListener, ShellError> {
    let mut attempts = 0;
    loop {
        let bound = std::net::TcpListener::bind(own)
            .and_then(|listener| listener.set_nonblocking(true).map(|()| listener));
        match bound {
            Ok(listener) => return Ok(listener),
            Err(error) if error.kind() == std::io::ErrorKind::AddrInUse && attempts < 100 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => return Err(ShellError::Replica(format!("replication port {own}: {error}"))),
        }
    }
}

/// A message from a candidate; one the machine refuses is logged and dropped.
fn receive(machine: &mut Machine<App, Pending>, bytes: &[u8]) {
    if let Err(error) = machine.receive(bytes) {
        tracing::warn!("replication message dropped: {error}");
    }
}

/// This candidate leads and its state holds every committed event: listen and serve.
fn lead(
    args: &Args,
    config: &ShellConfig,
    shared: &Arc<Shared>,
    term: u64,
    accept: &mut Option<tokio::task::JoinHandle<()>>,
    readiness: &mut Readiness,
) -> Result<(), ShellError> {
    let (listener, bound) = startup::listen(config.listen)?;
    *accept = Some(tokio::spawn(accept_loop(listener, Arc::clone(shared))));
    if let Some(path) = &args.port_file {
        startup::write_atomically(path, &format!("{}\n", bound.port()))?;
    }
    if let Some(path) = &args.ready_file {
        startup::write_atomically(path, "ready\n")?;
    }
    tracing::info!(term, %bound, "elected leader: serving");
    readiness.ready(&format!("leading, serving on {bound}"));
    Ok(())
}

/// The loop's own state while a candidate.
struct Shell {
    effects: Vec<Effect>,
    next_client: u64,
    counters: Arc<Counters>,
    snapshot_every: u64,
    /// The leadership ended: start again once this drain is carried out.
    restart: bool,
    /// The newest entry an answer released last turn rests on, if this candidate's own
    /// records of it were not yet durable then (the crash point
    /// `coordinator.acknowledged_before_own_fsync`, docs/crash-points.md).
    released_unsynced: Option<u64>,
}

impl Shell {
    /// Steps a request, or holds a connection task's refusal behind what came before it.
    fn take(
        &mut self,
        machine: &mut Machine<App, Pending>,
        setting: &Replication,
        call: Call,
        queued: usize,
    ) {
        let Call { conn: _, to, sequence, what } = call;
        match what {
            CallKind::Request { caller, request } => {
                let client = self.next_client;
                self.next_client += 1;
                let input = Input::Request { client: ClientId(client), caller, request };
                self.step(machine, input, Some((client, to, sequence)));
            }
            CallKind::Refused { reply, close } => {
                if let Reply::Error(error) = &reply {
                    self.counters.refusal(error.code);
                }
                machine.hold(Pending { to, sequence, reply, close });
            }
            CallKind::Stats => {
                let reply = Reply::Stats(wire::StatsReply { counters: self.stats(machine, setting, queued) });
                machine.hold(Pending { to, sequence, reply, close: false });
            }
        }
    }

    /// Steps the logic on the leader's state: each event proposed, the answer held.
    fn step(
        &mut self,
        machine: &mut Machine<App, Pending>,
        input: Input,
        mut answer: Option<(u64, Outbound, u32)>,
    ) {
        let mut effects = std::mem::take(&mut self.effects);
        machine.app_mut().coord.step(system_now_ms(), input, &mut effects);
        for effect in effects.drain(..) {
            match effect {
                Effect::Append(event) => {
                    self.counters.event(event.name());
                    if let Err(refused) = machine.propose(encode(&event)) {
                        // The machine rebuilds the state and answers what is held "not done".
                        tracing::warn!("{} not proposed: {refused}", event.name());
                    }
                }
                Effect::Respond { client, reply } => match answer.take() {
                    Some((id, to, sequence)) if id == client.0 => {
                        if let Reply::Error(error) = &reply {
                            self.counters.refusal(error.code);
                        }
                        machine.hold(Pending { to, sequence, reply, close: false });
                    }
                    other => {
                        debug_assert!(false, "the logic answers only the request of its step");
                        answer = other;
                    }
                },
            }
        }
        self.effects = effects;
    }

    /// Carries out every step of the machine's drains, in order (the machine's contract),
    /// then maybe a snapshot.
    async fn carry_out(
        &mut self,
        machine: &mut Machine<App, Pending>,
        log: &mut ReplicaLog,
        link: &Link,
        snapshot_index: &mut u64,
        mut lead: impl FnMut(u64) -> Result<(), ShellError>,
    ) -> Result<(), ShellError> {
        loop {
            let steps = machine.drain();
            if let Some(fault) = &machine.app().fault {
                return Err(ShellError::Replica(fault.clone()));
            }
            if steps.is_empty() {
                break;
            }
            // Stepped once every step of this drain is carried out (the machine's contract).
            let mut elected = false;
            for step in steps {
                match step {
                    Step::Persist { ticket, records } => {
                        log.persist_step(machine, ticket, records).await.map_err(replica_error)?
                    }
                    Step::Send { to, message } => link.send(to, message),
                    Step::KeepSnapshot { index, term, data } => {
                        log.keep_snapshot(index, term, data, Vec::new()).await.map_err(replica_error)?;
                        *snapshot_index = index;
                    }
                    Step::Applied { .. } => {}
                    Step::Release { answer, after } => {
                        // Committed by the followers' acknowledgements, perhaps before this
                        // candidate's own records of it are durable: noted for the crash point
                        // of the next turn, once the answer's writer has run.
                        if let Some(gate) =
                            after.filter(|gate| gate.index > machine.replica().durable_index())
                        {
                            self.released_unsynced = self.released_unsynced.max(Some(gate.index));
                        }
                        answer.send();
                    }
                    Step::NotDone(mut answer) => {
                        answer.reply = Reply::Error(wire::ErrorReply {
                            code: wire::ERR_TRY_AGAIN,
                            message: "not done: the coordinator lost its leadership; connect again and retry"
                                .to_owned(),
                        });
                        answer.close = true;
                        answer.send();
                    }
                    Step::Lead { term } => {
                        lead(term)?;
                        elected = true;
                    }
                    Step::Follow { term, leader } => {
                        tracing::warn!(
                            term,
                            leader = leader.unwrap_or(0),
                            "no longer the leader: starting again to follow from the replicated WAL"
                        );
                        self.restart = true;
                    }
                }
            }
            if elected && !self.restart {
                // As at any start: expire what ran out while no candidate led.
                self.step(machine, Input::Tick, None);
            }
        }
        // Outstanding proposals first: the weight is summed over the entries not applied.
        // None while the disk is full: a snapshot needs room too.
        if machine.outstanding() == 0
            && !log.stalled()
            && (machine.applied() >= *snapshot_index + self.snapshot_every
                || machine.log_outweighs_snapshot())
            && let Some(compaction) = machine.compact()
        {
            let tail = machine.replica().entries_after(compaction.index).map_err(replica_error)?;
            let kept = match log.keep_snapshot(compaction.index, compaction.term, compaction.data, tail).await
            {
                Ok(()) => log.persist(vec![compaction.record]).await,
                Err(error) => Err(error),
            };
            match kept {
                Ok(()) => {
                    tracing::info!(index = compaction.index, "replicated WAL compacted behind a snapshot")
                }
                // Made all the same: the snapshot, or its record, waits in the log for room and
                // is written in order once there is some (lava-shell's `ReplicaLog`).
                Err(error) if error.is_no_space() => tracing::warn!(
                    index = compaction.index,
                    "replicated WAL compacted behind a snapshot, written once its disk has room"
                ),
                Err(error) => return Err(replica_error(error)),
            }
            *snapshot_index = compaction.index;
        }
        Ok(())
    }

    /// STATS_REPLY's counters on a candidate: the shell's, the state's, and the replicated
    /// log's (`replica.*`, and on the leader `candidate.<rank>.<name>`: the log index each
    /// candidate holds).
    fn stats(
        &self,
        machine: &Machine<App, Pending>,
        setting: &Replication,
        queued: usize,
    ) -> Vec<wire::Counter> {
        let mut all = self.counters.snapshot();
        all.extend(crate::server::state_gauges(&machine.app().coord));
        let view = machine.view();
        let gauges = [
            ("queue.requests_queued", queued as u64),
            ("queue.answers_held", machine.held() as u64),
            ("replica.candidate", view.id),
            ("replica.term", view.term),
            ("replica.leader", view.leader.unwrap_or(0)),
            ("replica.serving", u64::from(machine.is_serving())),
            ("replica.commit_index", view.commit),
            ("replica.applied_index", view.applied),
            ("replica.last_index", view.last_index),
            ("replica.outstanding", machine.outstanding() as u64),
        ];
        all.extend(gauges.into_iter().map(|(name, value)| (name.to_owned(), value)));
        let progress = machine.replica().progress().unwrap_or_default();
        for (id, held) in progress {
            let Some((name, _)) =
                usize::try_from(id).ok().and_then(|id| setting.candidates.get(id.checked_sub(1)?))
            else {
                continue;
            };
            all.push((format!("candidate.{id}.{name}"), held));
        }
        all.into_iter().map(|(name, value)| wire::Counter { name, value }).collect()
    }
}
