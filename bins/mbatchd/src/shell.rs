//! The one closed event loop of mbatchd (docs/ARCHITECTURE.md, "One closed event loop
//! per daemon shell"): every
//! input of the daemon becomes an [`Event`], and only this loop steps the
//! logic and carries out its effects, following `lava-mbd`'s shell contract.
//!
//! # Events
//! A connection accepted; what a connection task checked and passed on (a
//! command request, an sbatchd registration, message or close); a connection
//! task that ended; the one-second tick; a helper thread of the journal that
//! finished (events durable, snapshot written); a signal (SIGTERM and SIGINT
//! stop cleanly; SIGHUP reopens the log file, if mbatchd writes one, and
//! reloads nothing else: the configuration is read at start only, so a change
//! to lsf.conf or lsb.* needs a restart, which replays the event log).
//!
//! Each tick that the loop handled pets systemd's watchdog (at most every half
//! interval, [`lava_shell::readiness::Readiness::pet`]); a stop signal says `STOPPING=1`, and
//! SIGHUP says `RELOADING=1` before and `READY=1` after the reopen.
//!
//! # Effects (contract steps 3 to 5)
//! [`Shell::step`] calls [`Mbd::step`] with the wall clock and carries out the
//! effects in order: each `Append` goes to the journal's buffer at once; each
//! `SendSbd` and `Reply` is queued in the [`Outbox`] with, as its barrier, the
//! position of the last event appended before it; the messages whose barrier
//! is durable are delivered, in order. After each turn of the loop (one event,
//! or a connection event with those already waiting behind it, stepped one by
//! one), a `wait_durable` is started for the newest position unless one is
//! running (group commit: one fsync covers every step appended meanwhile). A message is
//! never sent before the events it depends on are on disk; a failed append or
//! fsync ends the loop at once with an error, so nothing after it is sent.
//! While many messages wait for a slow disk, the loop stops taking new input
//! from connections ([`HELD_MESSAGES_MAX`]): the bound turns into backpressure.
//!
//! # Dispatch turns
//! The logic leaves the turns its steps want to the loop (`MbdConfig::deferred_dispatch`):
//! after each turn of the loop, before its group commit, the loop steps
//! `Input::Dispatch` when a turn is wanted, so that one turn serves every event of the
//! loop's turn. Turns are paced by what they cost: the next one runs no sooner than
//! [`DISPATCH_PACE`] times the last one's duration after it ended (a timer wakes the
//! loop), so that with thousands of hosts, where a turn takes milliseconds, turns take
//! at most about a fifth of the loop, and with a few hosts every event still gets its
//! turn at once.
//!
//! # A full disk
//! The event log's file system is watched ([`Space`], every tick) and mbatchd keeps a
//! space reserve beside the log (`LAVA_STATE_RESERVE_MB`). When the file system fills up
//! (below the low mark, or a group commit failing for space) the reserve is released for
//! the log's own records and the logic is told (`Input::DiskFull`): new submissions are
//! refused with a message saying why; queries, job control, sbatchd's reports and
//! dispatch go on. Should a group commit still find no room, its events stay buffered,
//! everything held behind them waits (nothing is acknowledged before it is durable) and
//! the journal tries again every second; mbatchd never exits for a full disk. When there
//! is room again the reserve is written back and submissions are taken.
//!
//! # Channels (contract step 6)
//! At most one sbatchd channel per host: a second registration of a host
//! first steps `HostDisconnected` for the old channel and closes it (its
//! outbox sender is dropped), then steps `HostRegistered` for the new one. A
//! message that arrives from a channel that is no longer the host's is not
//! stepped, and a message decided for a channel is never delivered on a later
//! one (the logic resends what matters on registration).

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lava_batch_ll::{HostName, JobStatus};
use lava_mbd::{ClientId, ClientReply, Effect, Input, Mbd, ToSbd};
use lava_net::gate::{AcceptBackoff, Gate, Source};
use lava_net::system_now_ms;
use lava_shell::metrics::Scrape;
use lava_shell::readiness::Readiness;
use lava_shell::signals::{ShellSignal, Signals};
use lava_shell::space::Space;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinError, JoinSet};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::ShellError;
use crate::conn::{self, ConnEvent, ConnId, ReadReply, Shared};
use crate::counters::Reject;
use crate::events_view::EventsView;
use crate::journal::{Journal, JournalEvent};
use crate::lim_client::{LimUpdate, LimUpdates};
use crate::logging::LogFile;
use crate::replicated::{ReplInput, Replicated};
use crate::validate::{ClientCall, ReadQuery};
use lava_batch_wire as wire;
use lava_replog::machine::Step;

/// How often the logic is given `Input::Tick`.
pub(crate) const TICK_INTERVAL_MS: u64 = 1_000;
/// Capacity of the channel from the connection tasks to the loop.
pub(crate) const CONN_EVENTS_QUEUED_MAX: usize = 1024;
/// Messages waiting for durability above which the loop takes no new input.
pub(crate) const HELD_MESSAGES_MAX: usize = 65_536;
/// Connection events stepped in one turn of the loop at most (one group commit covers
/// them; the bound keeps a flood from starving the loop's other inputs).
const CONN_EVENTS_TURN_MAX: usize = 64;
/// A wanted dispatch turn waits at least this many times the duration of the last turn
/// after its end (see "Dispatch turns" above).
const DISPATCH_PACE: u32 = 4;
/// Time given to the connection tasks at a clean stop to write what was
/// released to them, before the rest are cut off.
const SHUTDOWN_GRACE_MS: u64 = 2_000;

/// Everything the loop reacts to.
#[derive(Debug)]
pub(crate) enum Event {
    /// The listener accepted a connection (or failed to).
    Accepted(io::Result<(TcpStream, SocketAddr)>),
    /// A connection task passed something on.
    Conn(ConnEvent),
    /// A connection task ended (an error only if it panicked).
    ConnectionEnded(Result<(), JoinError>),
    /// A second passed.
    Tick,
    /// A helper thread of the journal finished.
    Journal(Result<JournalEvent, ShellError>),
    /// The pause after a failed accept is over.
    AcceptResumed,
    /// A wanted dispatch turn may run (see "Dispatch turns" above).
    DispatchDue,
    /// SIGTERM or SIGINT (stop cleanly), or SIGHUP.
    Signal(ShellSignal),
    /// The metrics listener asks for the figures.
    Scrape(Scrape),
    /// The replicated log's tick or a message from another candidate.
    Replica(ReplInput),
}

/// A message decided by the logic, waiting for its barrier to be durable.
#[derive(Debug)]
pub(crate) enum Outgoing {
    Client {
        client: u64,
        reply: ClientReply,
    },
    /// A read's answer, computed from the state of every event appended so far.
    Read {
        reply: oneshot::Sender<ReadReply>,
        answer: ReadReply,
    },
    Sbd {
        host: HostName,
        conn: ConnId,
        msg: ToSbd,
    },
}

/// The messages held back until the events before them are durable, in order.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    held: VecDeque<(u64, Outgoing)>,
}

/// The live channel of one sbatchd.
#[derive(Debug)]
struct SbdLink {
    conn: ConnId,
    peer: SocketAddr,
    outbox: mpsc::Sender<ToSbd>,
    /// `bpeek` requests for this host ([`crate::peek`]).
    relay: mpsc::Sender<crate::peek::Relay>,
}

/// The event loop's state; see the module doc.
#[derive(Debug)]
pub(crate) struct Shell {
    mbd: Mbd,
    journal: Journal,
    /// The event log's file system and its space reserve (see "A full disk" above).
    space: Space,
    outbox: Outbox,
    /// Where each outstanding command request's answer goes, by client id.
    clients: BTreeMap<u64, oneshot::Sender<ClientReply>>,
    next_client: u64,
    sbd: BTreeMap<HostName, SbdLink>,
    shared: Arc<Shared>,
    conn_events: mpsc::Receiver<ConnEvent>,
    /// The command and sbatchd port; a master candidate that does not lead refuses what
    /// it accepts there, naming the leader ([`conn::refuse`]).
    listener: Option<TcpListener>,
    /// Where the listener is bound when this candidate starts to lead.
    serve_addr: SocketAddr,
    /// The replicated event log, on a master candidate ([`crate::replicated`]).
    repl: Option<Box<Replicated<Outgoing>>>,
    /// Host availability heard from lim while following, stepped at `Lead`.
    lim_heard: BTreeMap<HostName, bool>,
    tasks: JoinSet<()>,
    next_conn: ConnId,
    accept_paused_until: Option<Instant>,
    /// Who is let in (conn::connections), and the pause after failed accepts.
    gate: Gate,
    accept_backoff: AcceptBackoff,
    /// The effects buffer, reused by every step.
    effects: Vec<Effect>,
    /// Host availability changes from the master lim, stepped on each tick.
    lim: LimUpdates,
    /// When this mbatchd started serving, in seconds since the epoch.
    started_at_s: i64,
    /// The configuration folder `badmin reconfig` reads again.
    envdir: Option<std::path::PathBuf>,
    /// `badmin mbdrestart` was accepted: the loop stops cleanly and the daemon starts again.
    restart_requested: bool,
    /// The last group commit found the disk full and none has succeeded since.
    stalled: bool,
    /// The writer of `lsb.acct` (`acct`), once given.
    acct: Option<crate::acct::AcctLog>,
    /// Finished jobs' `lsb.acct` lines, each behind the position of the JOB_STATUS that
    /// finished the job: written once that is durable.
    acct_held: VecDeque<(u64, String)>,
    /// The writer of the `lsb.events` text view (`events_view`), once given.
    events_view: Option<EventsView>,
    /// Scrapes of the metrics listener, when it serves ([`Shell::serve_metrics`]).
    scrapes: Option<mpsc::Receiver<Scrape>>,
    /// The earliest time the next wanted dispatch turn may run.
    next_turn_at: Instant,
    /// A wanted turn waits for `next_turn_at`: the loop wakes then.
    turn_timer: Option<Instant>,
}

impl Shell {
    /// A loop over the recovered state `mbd`, serving `listener`.
    pub(crate) fn new(
        mbd: Mbd,
        journal: Journal,
        space: Space,
        listener: Option<TcpListener>,
        serve_addr: SocketAddr,
        make_shared: impl FnOnce(mpsc::Sender<ConnEvent>) -> Shared,
    ) -> Shell {
        let (events, conn_events) = mpsc::channel(CONN_EVENTS_QUEUED_MAX);
        let shared = Arc::new(make_shared(events));
        let connections = conn::connections(shared.hosts.len());
        Shell {
            mbd,
            journal,
            space,
            outbox: Outbox::default(),
            clients: BTreeMap::new(),
            next_client: 1,
            sbd: BTreeMap::new(),
            shared,
            conn_events,
            listener,
            serve_addr,
            repl: None,
            lim_heard: BTreeMap::new(),
            tasks: JoinSet::new(),
            next_conn: 1,
            accept_paused_until: None,
            gate: Gate::new(connections).with_pre_auth_budget(conn::PRE_AUTH_BYTES_MAX),
            accept_backoff: AcceptBackoff::default(),
            effects: Vec::new(),
            lim: LimUpdates::default(),
            started_at_s: (system_now_ms() / 1000) as i64,
            envdir: None,
            restart_requested: false,
            stalled: false,
            acct: None,
            acct_held: VecDeque::new(),
            events_view: None,
            scrapes: None,
            next_turn_at: Instant::now(),
            turn_timer: None,
        }
    }

    /// Words the durable events into the `lsb.events` text view through `view`;
    /// snapshots wait for it.
    pub(crate) fn view_events(&mut self, view: EventsView) {
        self.journal.wait_for_view(view.progress());
        self.events_view = Some(view);
    }

    /// Writes finished jobs' records to `lsb.acct` through `acct`.
    pub(crate) fn account_to(&mut self, acct: crate::acct::AcctLog) {
        self.acct = Some(acct);
    }

    /// Serves the metrics at `addr`, if set ([`crate::metrics`]), answered by this loop.
    pub(crate) fn serve_metrics(&mut self, addr: Option<SocketAddr>) -> Result<(), ShellError> {
        self.scrapes = lava_shell::metrics::start_for_loop(addr)?;
        Ok(())
    }

    /// Takes host availability and load changes from the master lim (`lim_client`).
    pub(crate) fn follow_lim(&mut self, lim: LimUpdates) {
        self.lim = lim;
    }

    /// Runs as a master candidate over `repl`: serving only while it leads.
    pub(crate) fn replicate(&mut self, repl: Replicated<Outgoing>) {
        self.repl = Some(Box::new(repl));
    }

    /// Contract step 1's end: replay is done, mbatchd opens for business (a master
    /// candidate does so when it starts to lead: [`Shell::lead`]).
    pub(crate) fn start(&mut self) -> Result<(), ShellError> {
        if self.repl.is_some() {
            return Ok(());
        }
        self.step(Input::Start, None)?;
        // After Start (replay can leave states only Start settles; lava-sim found it).
        if self.space.is_full() {
            let available = self.space.available().unwrap_or(0);
            self.disk_full_changed(lava_shell::space::Change::Full { available, released: 0 })?;
        }
        self.journal.start_sync();
        Ok(())
    }

    /// Runs the loop until a stop signal or `badmin mbdrestart` (then stops cleanly)
    /// or a failure of the event log (then returns the error at once, sending
    /// nothing more). Says whether mbatchd is to start again (`mbdrestart`, a candidate
    /// deposed), and when it last knew a master (a candidate; ms since the epoch).
    pub(crate) async fn run(
        mut self,
        mut signals: Signals,
        log_file: Option<LogFile>,
        mut readiness: Readiness,
    ) -> Result<Option<Option<u64>>, ShellError> {
        let mut tick = tokio::time::interval(Duration::from_millis(TICK_INTERVAL_MS));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            match self.next_event(&mut tick, &mut signals).await {
                Event::Signal(ShellSignal::Stop(name)) => {
                    tracing::info!("{name}: stopping");
                    readiness.stopping(&format!("{name}: stopping"));
                    break;
                }
                Event::Signal(ShellSignal::Reload) => {
                    readiness.reloading("SIGHUP: reopening the log file");
                    match &log_file {
                        Some(log_file) => match log_file.reopen() {
                            Ok(()) => {
                                tracing::info!("SIGHUP: log file {} reopened", log_file.path().display())
                            }
                            Err(error) => tracing::warn!("SIGHUP: {error}; logging on to the old file"),
                        },
                        None => {
                            tracing::info!("SIGHUP: no log file to reopen (logging to stderr or the journal)")
                        }
                    }
                    readiness.ready("serving (SIGHUP handled)");
                }
                Event::Tick => {
                    self.handle(Event::Tick)?;
                    readiness.pet();
                }
                Event::Conn(event) => {
                    self.handle_conn(event)?;
                    self.handle_waiting_conn_events()?;
                }
                event => self.handle(event)?,
            }
            self.dispatch_if_wanted()?;
            if self.repl.is_some() {
                self.carry_out_replication().await?;
            } else if self.journal.sync_small()? {
                // One fsync for everything appended in this turn (group commit), unless one
                // is running: its end starts the next. A small one is made here and now.
                self.release();
            } else {
                self.journal.start_sync();
            }
            if self.restart_requested {
                tracing::info!("badmin mbdrestart: stopping, then starting again");
                readiness.stopping("badmin mbdrestart: restarting");
                break;
            }
        }
        let restart =
            self.restart_requested.then(|| self.repl.as_ref().and_then(|repl| repl.leader_seen_at_ms()));
        self.stop().await.map(|()| restart)
    }

    async fn next_event(&mut self, tick: &mut Interval, signals: &mut Signals) -> Event {
        let accepting = self.accept_paused_until.is_none() && self.listener.is_some();
        let taking_input = self.outbox.held.len() < HELD_MESSAGES_MAX;
        let paused_until = self.accept_paused_until;
        let turn_timer = self.turn_timer;
        tokio::select! {
            signal = signals.next() => Event::Signal(signal),
            done = self.journal.next() => Event::Journal(done),
            event = self.conn_events.recv(), if taking_input => {
                Event::Conn(event.expect("the loop holds a sender in `shared`, so the channel never closes"))
            }
            _ = tick.tick() => Event::Tick,
            accepted = accept(&self.listener), if accepting => Event::Accepted(accepted),
            input = next_replica_input(&mut self.repl), if self.repl.is_some() => Event::Replica(input),
            Some(ended) = self.tasks.join_next(), if !self.tasks.is_empty() => Event::ConnectionEnded(ended),
            _ = sleep_until(paused_until), if paused_until.is_some() => Event::AcceptResumed,
            _ = sleep_until(turn_timer), if turn_timer.is_some() => Event::DispatchDue,
            Some(scrape) = lava_shell::metrics::next_scrape(&mut self.scrapes) => Event::Scrape(scrape),
        }
    }

    fn handle(&mut self, event: Event) -> Result<(), ShellError> {
        match event {
            Event::Accepted(Ok((stream, peer))) => {
                self.shared.counters.connection();
                if let Some(line) = self.accept_backoff.succeeded() {
                    tracing::info!("{line}");
                }
                let pass = match self.gate.admit(Source::Ip(peer.ip())) {
                    Ok(pass) => pass,
                    Err(refusal) => {
                        tracing::debug!(%peer, "connection refused: {refusal}");
                        self.shared.counters.reject(Reject::Refused);
                        return Ok(());
                    }
                };
                // Requests and acknowledgements are small and latency-bound.
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::debug!(%peer, "TCP_NODELAY not set: {error}");
                }
                if !self.serving() {
                    let refusal = self.not_master();
                    let stale =
                        self.repl.as_ref().is_some_and(|repl| repl.stale_state(Instant::now()).is_some());
                    let shared = Arc::clone(&self.shared);
                    self.tasks.spawn(conn::refuse(stream, peer, pass, shared, refusal, stale));
                    return Ok(());
                }
                let conn = self.next_conn;
                self.next_conn += 1;
                tracing::debug!(%peer, conn, "connection accepted");
                self.tasks.spawn(conn::serve(stream, peer, conn, pass, Arc::clone(&self.shared)));
            }
            Event::Accepted(Err(error)) => {
                let (pause, line) = self.accept_backoff.failed(&error);
                if let Some(line) = line {
                    tracing::warn!("{line}");
                }
                self.accept_paused_until = Some(Instant::now() + pause);
            }
            Event::AcceptResumed => self.accept_paused_until = None,
            Event::Replica(input) => {
                if let Some(repl) = self.repl.as_mut() {
                    repl.input(input)?;
                }
            }
            // The turn itself follows in `run`, after every event.
            Event::DispatchDue => self.turn_timer = None,
            Event::Scrape(scrape) => {
                scrape.answer(crate::metrics::metrics(&self.status(), &self.journal.sync_latency()))
            }
            Event::ConnectionEnded(Ok(())) => {}
            Event::ConnectionEnded(Err(error)) => {
                tracing::error!("a connection task failed: {error}");
            }
            Event::Tick if !self.serving() => {
                // A candidate that does not lead steps nothing; lim's word on availability
                // waits for it to lead.
                for update in self.lim.drain() {
                    if let LimUpdate::Availability(host, available) = update {
                        self.lim_heard.insert(host, available);
                    }
                }
            }
            Event::Tick => {
                for update in self.lim.drain() {
                    match update {
                        LimUpdate::Availability(host, available) => {
                            tracing::info!(%host, available, "master lim: host availability changed");
                            self.step(Input::HostAvailability { host, available }, None)?;
                        }
                        LimUpdate::Load(host, facts) => {
                            self.step(Input::HostLoad { host, facts }, None)?;
                        }
                    }
                }
                match self.space.check() {
                    Ok(Some(change)) => self.disk_full_changed(change)?,
                    Ok(None) => {}
                    Err(error) => tracing::debug!("statvfs of the event log's folder: {error}"),
                }
                self.step(Input::Tick, None)?;
            }
            Event::Journal(Ok(JournalEvent::Durable(position))) => {
                tracing::trace!(position, "durable");
                if self.stalled {
                    self.stalled = false;
                    tracing::warn!(position, "the event log is written again: held answers go out");
                }
                self.release();
            }
            Event::Journal(Ok(JournalEvent::NoSpace(error))) => {
                if !self.stalled {
                    self.stalled = true;
                    tracing::error!(
                        "{error}; answers wait until the event log can be written (retried every second)"
                    );
                }
                if let Some(change) = self.space.no_space() {
                    self.disk_full_changed(change)?;
                }
            }
            Event::Journal(Ok(JournalEvent::SnapshotWritten { position, prune })) => {
                tracing::info!(
                    position,
                    segments_removed = prune.removed_segments.len(),
                    snapshots_removed = prune.removed_snapshots.len(),
                    "snapshot written"
                );
            }
            Event::Journal(Ok(JournalEvent::SnapshotFailed(error))) => {
                tracing::warn!("snapshot not written: {error}");
            }
            Event::Journal(Err(error)) => {
                tracing::error!("{error}; stopping without sending anything more");
                return Err(error);
            }
            Event::Conn(event) => self.handle_conn(event)?,
            Event::Signal(_) => unreachable!("run() handles signals itself"),
        }
        Ok(())
    }

    /// Runs the dispatch turn the logic wants, when its pace allows; else sets the timer
    /// that wakes the loop for it (see "Dispatch turns" above).
    fn dispatch_if_wanted(&mut self) -> Result<(), ShellError> {
        // A master candidate that does not lead steps nothing (its state follows the log).
        if !self.serving() || !self.mbd.turn_wanted() {
            self.turn_timer = None;
            return Ok(());
        }
        let now = Instant::now();
        if now < self.next_turn_at {
            self.turn_timer = Some(self.next_turn_at);
            return Ok(());
        }
        self.turn_timer = None;
        self.step(Input::Dispatch, None)?;
        let end = Instant::now();
        self.next_turn_at = end + (end - now) * DISPATCH_PACE;
        Ok(())
    }

    /// The event log's file system became full or has room again: logged, and the logic
    /// told (it refuses new submissions while full).
    fn disk_full_changed(&mut self, change: lava_shell::space::Change) -> Result<(), ShellError> {
        let dir = self.journal.log_dir().display().to_string();
        let full = match change {
            lava_shell::space::Change::Full { available, released } => {
                tracing::error!(
                    dir,
                    available,
                    released,
                    "the event log's file system is full: new jobs are refused, everything else goes on"
                );
                true
            }
            lava_shell::space::Change::Room { available } => {
                tracing::warn!(
                    dir,
                    available,
                    "the event log's file system has room again: new jobs are taken"
                );
                false
            }
        };
        self.step(Input::DiskFull { full }, None)?;
        Ok(())
    }

    /// Steps the connection events already waiting (at most [`CONN_EVENTS_TURN_MAX`], and
    /// none while the outbox is full), so that they share the turn's fsync: an sbatchd's
    /// EXECUTE and FINISH sent together cost one group commit, not two.
    fn handle_waiting_conn_events(&mut self) -> Result<(), ShellError> {
        for _ in 1..CONN_EVENTS_TURN_MAX {
            if self.outbox.held.len() >= HELD_MESSAGES_MAX {
                break;
            }
            match self.conn_events.try_recv() {
                Ok(event) => self.handle_conn(event)?,
                Err(_) => break,
            }
        }
        Ok(())
    }

    fn handle_conn(&mut self, event: ConnEvent) -> Result<(), ShellError> {
        match event {
            ConnEvent::Client { call: ClientCall::AdminControl { caller, request }, reply, .. }
                if request.action == wire::AdminAction::MbdRestart =>
            {
                let answer = self.mbd_restart(&caller);
                // The connection may have gone; the restart happens all the same.
                let _gone = reply.send(ClientReply::AdminControl(answer));
            }
            ConnEvent::Client { peer, call, reply } => {
                let client = self.next_client;
                self.next_client += 1;
                self.clients.insert(client, reply);
                let answered = self.step(call.into_input(ClientId(client)), Some(client))?;
                if !answered {
                    debug_assert!(answered, "the logic answers every client request in its step");
                    tracing::error!(%peer, "the logic gave no answer to a request; closing that connection");
                    self.clients.remove(&client);
                }
            }
            ConnEvent::SbdRegistered { conn, peer, host, n_cpus, sbd_pid, outbox, relay } => {
                if let Some(old) = self.sbd.remove(&host) {
                    tracing::info!(%host, old_peer = %old.peer, %peer, "sbatchd registered again: the old channel is closed");
                    self.step(Input::HostDisconnected { host: host.clone() }, None)?;
                }
                tracing::info!(%host, %peer, n_cpus, sbd_pid, "sbatchd registered");
                self.sbd.insert(host.clone(), SbdLink { conn, peer, outbox, relay });
                self.step(Input::HostRegistered { host, n_cpus }, None)?;
            }
            ConnEvent::SbdMessage { conn, host, message } => {
                if self.sbd.get(&host).is_some_and(|link| link.conn == conn) {
                    self.step(message.into_input(host), None)?;
                } else {
                    tracing::debug!(%host, conn, "message from a replaced channel not stepped");
                }
            }
            ConnEvent::Peek { caller, request, reply } => {
                let relay_of = |host: &HostName| self.sbd.get(host).map(|link| link.relay.clone());
                // The connection may have gone; then nobody needs the answer.
                let _gone = reply.send(crate::peek::decide(&self.mbd, relay_of, &caller, &request));
            }
            ConnEvent::StaleRead { query, reply } => {
                let answer = self.answer_stale(query);
                // The connection may have gone; then nobody needs the answer.
                let _gone = reply.send(answer);
            }
            ConnEvent::Read { query: ReadQuery::Reconfig(caller), reply } => {
                let answer = self.reconfig(&caller)?;
                let _gone = reply.send(ReadReply::Reconfig(answer));
            }
            ConnEvent::Read { query, reply } => {
                // Held like a step's reply: it reports the state of events that may not
                // be durable yet (lava-mbd's shell contract, step 3).
                let answer = self.answer_read(&query);
                self.hold(Outgoing::Read { reply, answer });
                self.release();
            }
            ConnEvent::SbdClosed { conn, host } => {
                if self.sbd.get(&host).is_some_and(|link| link.conn == conn) {
                    let link = self.sbd.remove(&host).expect("checked just above");
                    tracing::info!(%host, peer = %link.peer, "sbatchd channel closed");
                    self.step(Input::HostDisconnected { host }, None)?;
                }
            }
        }
        Ok(())
    }

    /// The answer to a read (`bhosts`, `bqueues`, `badmin showstatus`, `bwait`), from memory.
    fn answer_read(&self, query: &ReadQuery) -> ReadReply {
        match query {
            ReadQuery::Hosts(query) => ReadReply::Hosts(self.mbd.host_query(query)),
            ReadQuery::Queues(query) => ReadReply::Queues(self.mbd.queue_query(query)),
            ReadQuery::Status => ReadReply::Status(Box::new(self.status())),
            ReadQuery::Wait(caller, query) => ReadReply::Wait(self.mbd.wait_query(caller, query)),
            ReadQuery::Reconfig(_) => {
                ReadReply::Reconfig(lava_batch_wire::ReconfigReply { applied: false, message: String::new() })
            }
        }
    }

    /// A read-only query to a master candidate that has known no leader for a while, from
    /// its last applied state, which holds committed entries only
    /// ([`Replicated::stale_state`]). Refused as any request to a candidate that does not
    /// lead when a leader appeared meanwhile (or this candidate serves now: asked again).
    fn answer_stale(&mut self, query: conn::StaleQuery) -> Result<conn::StaleAnswer, wire::ErrorReply> {
        if self.serving() {
            let message = "this master candidate has just become the master; ask again".to_owned();
            return Err(wire::ErrorReply { code: wire::ERR_TRY_AGAIN, message });
        }
        let stale = self.repl.as_ref().and_then(|repl| repl.stale_state(Instant::now()));
        let Some(state) = stale else { return Err(self.not_master()) };
        let reply = match query {
            conn::StaleQuery::Jobs { caller, query } => {
                // A JOB_QUERY reads the state and changes nothing: its one effect is its
                // reply (lava-mbd's `query` takes the state by reference); no event is made,
                // so none is proposed or held here.
                let mut effects = Vec::new();
                self.mbd.step(
                    system_now_ms(),
                    Input::Query { client: ClientId(0), caller, query },
                    &mut effects,
                );
                match effects.pop() {
                    Some(Effect::Reply { reply, .. }) if effects.is_empty() => conn::StaleReply::Jobs(reply),
                    other => {
                        tracing::error!(
                            ?other,
                            "a job query on a candidate without a leader did more than answer"
                        );
                        let message = "no master, and this candidate cannot answer from its state".to_owned();
                        return Err(wire::ErrorReply { code: wire::ERR_NO_MASTER, message });
                    }
                }
            }
            conn::StaleQuery::Read(query) => conn::StaleReply::Read(self.answer_read(&query)),
        };
        Ok(conn::StaleAnswer { state, reply })
    }

    /// `badmin reconfig` reads the configuration again from this folder.
    pub(crate) fn reconfig_from(&mut self, envdir: std::path::PathBuf) {
        self.envdir = Some(envdir);
    }

    /// `badmin reconfig` by `caller`: an administrator's request loads the
    /// configuration again and, if it is valid and names the same hosts, steps it
    /// into the logic and gives the journal lsb.params' `MAX_JOB_NUM`; otherwise the running configuration stays and the answer
    /// says why (the file, line and problem for a broken file).
    fn reconfig(&mut self, caller: &lava_mbd::Caller) -> Result<lava_batch_wire::ReconfigReply, ShellError> {
        let refuse = |message: String| lava_batch_wire::ReconfigReply { applied: false, message };
        if !self.mbd.config().is_admin(caller.uid, &caller.user) {
            tracing::warn!(user = %caller.user, "badmin reconfig refused: not an administrator");
            return Ok(refuse("User permission denied.".to_owned()));
        }
        let Some(envdir) = self.envdir.clone() else {
            return Ok(refuse("this mbatchd does not know its configuration folder".to_owned()));
        };
        let loaded = lava_conf::ClusterConfig::load(&envdir)
            .map_err(|error| error.to_string())
            .and_then(|conf| {
                let master = self.mbd.config().master_host.to_string();
                let config = crate::config::mbd_config(&conf, &master).map_err(|error| error.to_string())?;
                Ok((config, conf.params.max_job_num))
            })
            .and_then(|(config, max_job_num)| {
                self.mbd.reconfigurable(&config).map(|()| (config, max_job_num))
            });
        match loaded {
            Ok((config, max_job_num)) => {
                tracing::info!(user = %caller.user, "badmin reconfig: the new configuration is in force");
                // The journal's switch rule before the step, so that the step's own check sees it.
                self.journal.set_max_job_num(max_job_num);
                self.step(Input::Reconfigure { config: Box::new(config) }, None)?;
                Ok(lava_batch_wire::ReconfigReply { applied: true, message: String::new() })
            }
            Err(problem) => {
                tracing::warn!(user = %caller.user, "badmin reconfig: the running configuration stays: {problem}");
                Ok(refuse(problem))
            }
        }
    }

    /// `badmin mbdrestart` by `caller`: an administrator's request, with a configuration
    /// that loads (else the restarted daemon could not start), makes the loop stop
    /// cleanly — every event durable, the log closed — after which `daemon` starts
    /// the same program again in this process (`exec`, keeping the pid), which
    /// replays the log like any start: the log is the truth, nothing else is handed over.
    fn mbd_restart(&mut self, caller: &lava_mbd::Caller) -> wire::AdminControlReply {
        let answer = |done: bool, message: String| wire::AdminControlReply {
            results: vec![wire::AdminResult { name: "mbatchd".to_owned(), done, message }],
        };
        if !self.mbd.config().is_admin(caller.uid, &caller.user) {
            tracing::warn!(user = %caller.user, "badmin mbdrestart refused: not an administrator");
            return answer(false, "User permission denied".to_owned());
        }
        let Some(envdir) = self.envdir.clone() else {
            return answer(false, "this mbatchd does not know its configuration folder".to_owned());
        };
        let master = self.mbd.config().master_host.to_string();
        let loaded =
            lava_conf::ClusterConfig::load(&envdir).map_err(|error| error.to_string()).and_then(|conf| {
                crate::config::mbd_config(&conf, &master).map(|_| ()).map_err(|error| error.to_string())
            });
        if let Err(problem) = loaded {
            tracing::warn!(user = %caller.user, "badmin mbdrestart: not restarting: {problem}");
            return answer(false, problem);
        }
        tracing::info!(user = %caller.user, "badmin mbdrestart accepted");
        self.restart_requested = true;
        answer(true, "MBD restart initiated".to_owned())
    }

    /// `badmin showstatus`: the cluster as the logic counts it, and the shell's counters.
    fn status(&self) -> lava_batch_wire::StatusReply {
        let cluster = self.mbd.cluster_counts();
        let mut counters = self.shared.counters.snapshot();
        let log = self.journal.log_stats();
        let latency = self.journal.sync_latency();
        let gauges = [
            ("log.appends", log.n_appends),
            ("log.fsyncs", log.n_fsyncs),
            ("log.next_position", log.next_position.0),
            ("log.durable_end", log.durable_end.0),
            ("log.group_commits", latency.count),
            ("log.group_commit_us_mean", latency.total_us.checked_div(latency.count).unwrap_or(0)),
            ("log.group_commit_us_max", latency.max_us),
            ("queue.replies_awaiting_durability", self.outbox.held.len() as u64),
            ("queue.requests_in_progress", self.clients.len() as u64),
            ("queue.loop_events", self.conn_events.len() as u64),
            ("sbd.connected", self.sbd.len() as u64),
            ("disk.full", u64::from(self.space.is_full())),
            ("disk.available_bytes", self.space.available().unwrap_or(0)),
            (
                "log.stalled_for_space",
                u64::from(self.stalled || self.repl.as_ref().is_some_and(|repl| repl.stalled())),
            ),
        ];
        counters.extend(gauges.into_iter().map(|(name, value)| (name.to_owned(), value)));
        if let Some(repl) = &self.repl {
            counters.extend(repl.gauges().into_iter().map(|(name, value)| (name.to_owned(), value)));
            counters.extend(repl.candidates());
        }
        let config = self.mbd.config();
        lava_batch_wire::StatusReply {
            cluster_name: config.cluster_name.clone(),
            master_name: config.master_host.to_string(),
            pid: std::process::id(),
            started_at: self.started_at_s,
            hosts: cluster.hosts,
            jobs: cluster.jobs,
            active_users: cluster.active_users,
            counters: counters
                .into_iter()
                .map(|(name, value)| lava_batch_wire::StatusCounter { name, value })
                .collect(),
        }
    }

    /// Steps the logic and carries out its effects (contract steps 2 to 5).
    /// Returns whether the step answered `client`.
    fn step(&mut self, input: Input, client: Option<u64>) -> Result<bool, ShellError> {
        let mut effects = std::mem::take(&mut self.effects);
        self.mbd.step(system_now_ms(), input, &mut effects);
        let mut answered = false;
        let mut result = Ok(());
        for effect in effects.drain(..) {
            match effect {
                Effect::Append(event) => {
                    let finished = event.finishes();
                    if let Some((_, status)) = finished {
                        self.shared.counters.job_finished(status == JobStatus::Done);
                    }
                    if let Some(repl) = self.repl.as_mut() {
                        let bytes = crate::codec::encode(&event);
                        match repl.machine.propose(bytes) {
                            // Its lsb.acct line and its text view line follow the event
                            // into lsb.events (crate::derived).
                            Ok(placed) => {
                                if self.events_view.as_ref().is_some_and(EventsView::wants_lines) {
                                    repl.derived.note_line(placed.index, crate::events_view::line(&event));
                                }
                                if let Some((job, _)) = finished {
                                    let line = self.mbd.job(job).and_then(|job| job.acct_record());
                                    repl.derived
                                        .note_finish(placed.index, line.map(|record| record.to_line()));
                                }
                            }
                            Err(refused) => tracing::debug!("{} not proposed: {refused}", event.name()),
                        }
                    } else if let Err(error) = self.journal.append(&event) {
                        tracing::error!(
                            "appending {} failed: {error}; stopping without sending anything more",
                            event.name()
                        );
                        result = Err(error);
                        break;
                    } else if let Some(view) = self.events_view.as_mut().filter(|view| view.wants_lines()) {
                        view.worded(self.journal.appended_through(), crate::events_view::line(&event));
                    }
                    if let Some((job, _)) = finished
                        && self.acct.is_some()
                        && self.repl.is_none()
                        && let Some(record) = self.mbd.job(job).and_then(|job| job.acct_record())
                    {
                        self.acct_held.push_back((self.journal.appended_through(), record.to_line()));
                    }
                }
                Effect::SendSbd { host, msg, .. } => match self.sbd.get(&host) {
                    Some(link) => {
                        let conn = link.conn;
                        self.hold(Outgoing::Sbd { host, conn, msg });
                    }
                    None => tracing::debug!(%host, "no channel: {} not sent", msg.operation().name()),
                },
                Effect::Reply { client: to, reply } => {
                    answered |= client == Some(to.0);
                    self.hold(Outgoing::Client { client: to.0, reply });
                }
            }
        }
        self.effects = effects;
        result?;
        if self.repl.is_none() {
            self.journal.maybe_snapshot(&self.mbd);
        }
        self.release();
        Ok(answered)
    }

    /// Queues a message behind every event appended (or proposed) so far.
    fn hold(&mut self, message: Outgoing) {
        match self.repl.as_mut() {
            Some(repl) => repl.machine.hold(message),
            None => self.outbox.held.push_back((self.journal.appended_through(), message)),
        }
    }

    /// Whether this mbatchd steps its logic: always with one master, only while it leads
    /// among candidates.
    fn serving(&self) -> bool {
        self.repl.as_ref().is_none_or(|repl| repl.machine.is_serving())
    }

    /// What a candidate that does not lead answers every request: the leader it knows
    /// of (host name and address; candidates share `LSB_MBD_PORT`), else that there is
    /// none.
    fn not_master(&self) -> wire::ErrorReply {
        let repl = self.repl.as_ref().expect("only a master candidate does not serve");
        let leader = repl.machine.leader().and_then(|id| Some((repl.name_of(id)?, repl.addr_of(id)?)));
        match leader {
            Some((host, ip)) if repl.machine.leader() != Some(repl.machine.view().id) => {
                wire::ErrorReply { code: wire::ERR_NOT_MASTER, message: format!("{host} {ip}") }
            }
            _ => wire::ErrorReply {
                code: wire::ERR_NO_MASTER,
                message: format!(
                    "no master: no master elected yet among the {} master candidates \
                     (a majority of them must be up and reach each other)",
                    repl.n_candidates()
                ),
            },
        }
    }

    /// Carries out every step of the replicated log's drains, in order (the machine's
    /// contract, step 5), applying what it did to the state first; then a snapshot when
    /// one is due.
    async fn carry_out_replication(&mut self) -> Result<(), ShellError> {
        if let Some(repl) = self.repl.as_mut() {
            repl.take_waiting();
            let full = repl.stalled() || self.space.is_full();
            repl.hand_over_if_full(full);
        }
        loop {
            let Some(repl) = self.repl.as_mut() else { return Ok(()) };
            let steps = repl.drain();
            repl.apply_ops(&mut self.mbd, self.events_view.as_ref().is_some_and(EventsView::wants_lines))?;
            if steps.is_empty() {
                break;
            }
            for step in steps {
                let repl = self.repl.as_mut().expect("checked above");
                match step {
                    Step::Persist { ticket, records } => repl.persist_step(ticket, records).await?,
                    Step::Send { to, message } => repl.send(to, message),
                    Step::KeepSnapshot { index, term, data } => {
                        repl.installed(index, &data, &self.journal, &mut self.acct_held, self.acct.as_ref())?;
                        repl.keep_snapshot(index, term, data).await?;
                    }
                    Step::Applied { index, data, .. } => {
                        let worded =
                            repl.derived.applied(index, &data, &mut self.journal, &mut self.acct_held)?;
                        if let (Some(line), Some(view)) = (worded, self.events_view.as_mut()) {
                            view.worded(self.journal.appended_through(), line);
                        }
                    }
                    Step::Release { answer, after } => {
                        // Committed by the followers' acknowledgements, perhaps before this
                        // candidate's own records of it are durable.
                        let unsynced =
                            after.is_some_and(|gate| gate.index > repl.machine.replica().durable_index());
                        self.deliver(answer);
                        if unsynced {
                            lava_crash::point!("mbatchd.acknowledged_before_own_fsync");
                        }
                    }
                    Step::NotDone(message) => self.not_done(message),
                    Step::Lead { term } => self.lead(term)?,
                    Step::Follow { term, leader } => {
                        let leader = leader.and_then(|id| repl.name_of(id)).unwrap_or("unknown");
                        tracing::warn!(
                            term,
                            leader,
                            "no longer the master: starting again to follow from the replicated log"
                        );
                        self.restart_requested = true;
                    }
                }
            }
        }
        if let Some(repl) = self.repl.as_mut() {
            repl.note_leader();
            repl.after_drains(&self.mbd, &mut self.journal)?;
            repl.maybe_compact(&self.mbd, &mut self.journal).await?;
            // The replica log found the disk full: a leader is full then (new jobs refused;
            // a candidate that starts to lead takes it from `space` at `Lead`).
            if repl.stalled()
                && self.serving()
                && let Some(change) = self.space.no_space()
            {
                self.disk_full_changed(change)?;
            }
        }
        Ok(())
    }

    /// This candidate leads and its state holds every committed event: listen, and start
    /// as any mbatchd starts.
    fn lead(&mut self, term: u64) -> Result<(), ShellError> {
        // The listener that refused requests while following serves from now on (the
        // same socket: a second bind of the port would fail while it is open).
        if self.listener.is_none() {
            let (listener, _) = lava_shell::startup::listen(self.serve_addr)?;
            self.listener = Some(listener);
        }
        tracing::info!(term, bound = %self.serve_addr, "elected master: serving");
        self.step(Input::Start, None)?;
        if self.space.is_full() {
            let available = self.space.available().unwrap_or(0);
            self.disk_full_changed(lava_shell::space::Change::Full { available, released: 0 })?;
        }
        for (host, available) in std::mem::take(&mut self.lim_heard) {
            self.step(Input::HostAvailability { host, available }, None)?;
        }
        Ok(())
    }

    /// An answer whose events may never be committed: a client gets no answer (its
    /// connection closes and the command retries with the same request id); a message to
    /// an sbatchd is not sent (the logic resends what matters).
    fn not_done(&mut self, message: Outgoing) {
        match message {
            Outgoing::Client { client, .. } => {
                self.clients.remove(&client);
            }
            Outgoing::Read { .. } | Outgoing::Sbd { .. } => {}
        }
    }

    /// Delivers, in order, every held message whose events are durable.
    fn release(&mut self) {
        let durable = self.journal.durable_through();
        while self.outbox.held.front().is_some_and(|(barrier, _)| *barrier <= durable) {
            let (_, message) = self.outbox.held.pop_front().expect("checked just above");
            self.deliver(message);
        }
        while self.acct_held.front().is_some_and(|(barrier, _)| *barrier <= durable) {
            let (_, line) = self.acct_held.pop_front().expect("checked just above");
            if let Some(acct) = &self.acct {
                acct.write(line);
            }
        }
        if let Some(view) = &mut self.events_view {
            view.durable(durable);
        }
    }

    /// Contract step 4: best effort; a client or channel that went away loses its message.
    fn deliver(&mut self, message: Outgoing) {
        match message {
            Outgoing::Client { client, reply } => {
                if let Some(reply_to) = self.clients.remove(&client)
                    && reply_to.send(reply).is_err()
                {
                    tracing::debug!(client, "the client went away before its answer");
                }
            }
            Outgoing::Read { reply, answer } => {
                // The connection may have gone; then nobody needs the answer.
                let _gone = reply.send(answer);
            }
            Outgoing::Sbd { host, conn, msg } => match self.sbd.get(&host) {
                Some(link) if link.conn == conn => match link.outbox.try_send(msg) {
                    Ok(()) => {}
                    Err(TrySendError::Full(msg)) => {
                        tracing::warn!(%host, "{} dropped: the channel's queue is full", msg.operation().name());
                        self.shared.counters.sbd_message_dropped();
                    }
                    Err(TrySendError::Closed(msg)) => {
                        tracing::debug!(%host, "{} dropped: the channel is closing", msg.operation().name());
                    }
                },
                _ => {
                    tracing::debug!(%host, "{} dropped: the channel it was for is gone", msg.operation().name())
                }
            },
        }
    }

    /// A clean stop: make every event durable, deliver what that releases,
    /// give the connections a bounded time to write it, close the log.
    async fn stop(mut self) -> Result<(), ShellError> {
        // New connections are refused from now on, not taken in and left unanswered while
        // the stop waits for a disk (a full one can make that long): a command moves on to
        // the next candidate, or retries, at once.
        drop(self.listener.take());
        if let Some(repl) = self.repl.as_mut() {
            // Every step of its drains is carried out by now.
            repl.stop().await?;
        }
        self.journal.sync_all().await?;
        self.release();
        debug_assert!(self.outbox.held.is_empty(), "every event is durable, so every message is released");
        if let Some(acct) = self.acct.take() {
            acct.close();
        }
        if let Some(view) = self.events_view.take() {
            view.close();
        }
        let Shell { journal, clients, sbd, shared, conn_events, mut tasks, .. } = self;
        shared.stopping.send_replace(true);
        // Requests not yet stepped, answers not yet delivered and channels:
        // dropping their ends lets each task finish what it has and end.
        drop(conn_events);
        drop(clients);
        drop(sbd);
        let drained = tokio::time::timeout(Duration::from_millis(SHUTDOWN_GRACE_MS), async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::debug!(n_connections = tasks.len(), "closing the connections still open");
            tasks.shutdown().await;
        }
        tracing::info!(counters = ?shared.counters.snapshot(), "connections closed");
        journal.close().await?;
        tracing::info!("mbatchd stopped");
        Ok(())
    }
}

/// The next connection on `listener`; pending forever without one.
async fn accept(listener: &Option<TcpListener>) -> io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// The replicated log's next input; pending forever without one.
async fn next_replica_input(repl: &mut Option<Box<Replicated<Outgoing>>>) -> ReplInput {
    match repl {
        Some(repl) => repl.next().await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `deadline`; pending forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
