//! The world: the virtual clock and its event queue, the cluster's nodes, the
//! network links between them, the fault scheduler and the run's phases.
//!
//! Everything happens in one thread, in virtual time: the queue holds timed
//! events (a message arriving, a tick, an fsync finishing, a process exiting,
//! a fault) ordered by (time, insertion number), and the run pops them one at
//! a time. Nothing reads a real clock; every choice is drawn from the one
//! seeded [`Rng`], so a run is a pure function of its seed.
//!
//! The network ([`Link`]): each sbatchd reaches mbatchd over one connection at
//! a time. A connection dies on a partition or a crash of either end; each end
//! notices after its own delay, and sbatchd reconnects (SBD_REGISTER,
//! SBD_REGISTER_ACK) once it can. On a live connection each frame may be lost,
//! duplicated or delayed; by default delivery on one connection keeps its
//! order, as TCP does (see [`crate::Options::reorder_within_connection`]).
//! Frames of a dead connection are never delivered.

use std::collections::BTreeMap;

use lava_batch_ll::{HostName, JobRef, QueueName, UserName};
use lava_mbd::{ClientId, HostConfig, MbdConfig, QueueConfig, QueueLimit, QueueResourceLimits};

use crate::Options;
use crate::client::Client;
use crate::mbd_shell::MbdNode;
use crate::oracle::Oracle;
use crate::params::Params;
use crate::process::Proc;
use crate::rng::Rng;
use crate::sbd_shell::SbdNode;
use crate::trace::Trace;

/// The virtual clock's origin, ms since the epoch (November 2023).
pub const T0_MS: u64 = 1_700_000_000_000;
/// Interval of the daemons' ticks, ms (LavaLite's one-second timers).
pub const TICK_MS: u64 = 1_000;
/// After the faults stop, how long the network settles before every
/// sbatchd is made to reconnect once, ms (see [`Ev::ResetLinks`]).
pub const SETTLE_MS: u64 = 20_000;
/// How long the healed cluster may take to finish every job, ms.
pub const HEAL_MS_MAX: u64 = 900_000;
/// Quiet time after convergence before the final checks, ms.
pub const QUIET_MS: u64 = 5_000;
/// Events one run may process before it is declared a runaway.
pub const EVENTS_MAX: u64 = 5_000_000;
/// How long sbatchd waits for SBD_REGISTER_ACK before it reconnects, ms.
pub const REGISTER_TIMEOUT_MS: u64 = 3_000;

/// Which end of a connection notices its death.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The sbatchd end.
    Sbd,
    /// The mbatchd end.
    Mbd,
}

/// Where a frame goes, and on which connection.
#[derive(Clone, Debug)]
pub enum Route {
    /// sbatchd → mbatchd on connection `conn` of `host`'s link.
    ToMbd { host: usize, conn: u64 },
    /// mbatchd → sbatchd on connection `conn` of `host`'s link.
    ToSbd { host: usize, conn: u64 },
    /// A command's request to mbatchd incarnation `incarnation` (of master candidate
    /// `candidate` in a replicated run; 0 otherwise).
    ClientToMbd { attempt: ClientId, incarnation: u64, candidate: usize },
    /// A consensus message between master candidates (replicated runs).
    Raft { from: usize, to: usize },
    /// mbatchd's answer on the command's connection `attempt`.
    MbdToClient { attempt: ClientId },
}

/// One frame in flight.
#[derive(Clone, Debug)]
pub struct Packet {
    /// Its destination.
    pub route: Route,
    /// The frame.
    pub bytes: Vec<u8>,
}

/// Everything that can happen at a point of virtual time.
#[derive(Debug)]
pub enum Ev {
    MbdTick,
    MbdFsync,
    MbdRestart,
    SbdTick(usize),
    SbdFsyncDone {
        host: usize,
        incarnation: u64,
    },
    SbdRestart(usize),
    SbdConnect(usize),
    RegisterTimeout {
        host: usize,
        conn: u64,
    },
    Deliver(Packet),
    DetectDown {
        host: usize,
        conn: u64,
        side: Side,
    },
    ProcExit {
        host: usize,
        job: JobRef,
        generation: u64,
    },
    /// Process `pid` of the job goes over every limit: sbatchd measures it.
    UsageOver {
        host: usize,
        job: JobRef,
        pid: i32,
    },
    ClientWake {
        client: usize,
        generation: u64,
    },
    FaultMbdCrash,
    FaultSbdCrash,
    FaultPartition,
    /// mbatchd's disk fills up (true) or has room again (false).
    DiskFull(bool),
    /// Events of the master candidates (replicated runs).
    Repl(crate::candidates::ReplEv),
    HealStart,
    ResetLinks,
    CheckConverged,
    Finish,
}

/// Timed events in the order they happen: by time, then by the order they were scheduled.
pub struct Queue<E> {
    events: BTreeMap<(u64, u64), E>,
    next_seq: u64,
}

impl<E> Default for Queue<E> {
    fn default() -> Queue<E> {
        Queue { events: BTreeMap::new(), next_seq: 0 }
    }
}

impl<E> Queue<E> {
    /// Schedules `ev` at `at_ms`, after every event already scheduled for that time.
    pub fn push(&mut self, at_ms: u64, ev: E) {
        self.events.insert((at_ms, self.next_seq), ev);
        self.next_seq += 1;
    }

    /// The next event and its time.
    pub fn pop(&mut self) -> Option<(u64, E)> {
        self.events.pop_first().map(|((at_ms, _), ev)| (at_ms, ev))
    }
}

/// One host's link to mbatchd.
#[derive(Clone, Debug, Default)]
pub struct Link {
    /// The live connection, if any.
    pub conn: Option<u64>,
    /// No connection can be made before this time (a partition).
    pub partitioned_until_ms: u64,
    /// Per direction (to mbd, to sbd), the last delivery time scheduled on
    /// the live connection, to keep its order.
    pub fifo_last_ms: [u64; 2],
    /// The master candidate the live connection goes to (replicated runs).
    pub candidate: usize,
}

/// Counters of one run, for the report and the seeds/second measurement.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events processed.
    pub n_events: u64,
    /// Steps of mbatchd's logic.
    pub n_mbd_steps: u64,
    /// Steps of sbatchd's logic, all hosts.
    pub n_sbd_steps: u64,
    /// Frames put on the wire.
    pub n_frames: u64,
    /// Frames lost (fault, or dead connection).
    pub n_frames_lost: u64,
    /// mbatchd crashes.
    pub n_mbd_crashes: u64,
    /// sbatchd crashes.
    pub n_sbd_crashes: u64,
    /// Partitions.
    pub n_partitions: u64,
    /// Windows in which mbatchd's disk was full.
    pub n_disk_full: u64,
    /// Jobs created (JOB_NEW durable).
    pub n_jobs: u64,
    /// Jobs whose process ran.
    pub n_jobs_ran: u64,
    /// Refusals (NEW_JOB_REPLY Refused sent).
    pub n_refusals: u64,
    /// Launches whose pre-execution command failed (the job went back to PEND).
    pub n_pre_exec_failures: u64,
    /// Measurements over every limit given to sbatchd (`Params::usage_over_p`).
    pub n_usage_over: u64,
    /// Jobs that ended killed at a limit sbatchd measures (memory, CPU time, processes).
    pub n_limit_kills: u64,
    /// Runs a `brequeue -r` kill ended and requeued (JOB_REQUEUE durable).
    pub n_requeues: u64,
    /// Jobs `bkill -r` ended (JOB_FORCE_EXIT durable).
    pub n_forced_exits: u64,
    /// Replicated runs: candidates that began to serve (a term led), answers "not done".
    pub n_leads: u64,
    /// Answers of a leader whose proposals may never commit.
    pub n_not_done: u64,
    /// Replicated runs: deposed leaders started again from their replica log.
    pub n_deposed: u64,
    /// Replicated runs: answers a leader released before its own fsync ended.
    pub n_released_before_own_fsync: u64,
    /// Replicated runs: windows of a full disk on a candidate.
    pub n_disk_fulls: u64,
    /// Replicated runs: transfers a full leader asked for.
    pub n_hand_overs: u64,
    /// Virtual time at the end, ms since the start.
    pub end_ms: u64,
}

/// The whole simulated cluster.
pub struct World {
    pub seed: u64,
    pub params: Params,
    pub options: Options,
    pub rng: Rng,
    pub now_ms: u64,
    queue: Queue<Ev>,
    pub mbd_config: MbdConfig,
    pub sbd_config: lava_sbd::Config,
    pub hosts: Vec<HostName>,
    pub mbd: MbdNode,
    pub sbds: Vec<SbdNode>,
    pub links: Vec<Link>,
    /// Shepherds and their job processes, by (host, job); they survive sbatchd crashes.
    pub procs: BTreeMap<(usize, JobRef), Proc>,
    pub clients: Vec<Client>,
    /// The master candidates of a replicated run (`None`: one mbatchd, `mbd`).
    pub repl: Option<Box<crate::replicated::Repl>>,
    /// Every command connection ever opened: the client and the request it carries.
    pub attempts: BTreeMap<ClientId, (usize, lava_batch_wire::RequestId)>,
    pub next_attempt: u64,
    pub next_conn: u64,
    pub next_pid: i32,
    pub oracle: Oracle,
    pub trace: Trace,
    pub stats: Stats,
    /// Faults have stopped; the cluster is healing.
    pub healing: bool,
    heal_start_ms: u64,
    converged_at_ms: Option<u64>,
    done: bool,
}

/// The queues of every run: `normal` (default, every host), `short` (higher
/// priority, the first host only) and `night` (lower priority, the last host).
pub fn queue_names() -> [&'static str; 3] {
    ["normal", "short", "night"]
}

fn host_name(idx: usize) -> HostName {
    let name = format!("host{}", (b'A' + idx as u8) as char);
    HostName::parse("sim", &name).expect("simulated host names are valid")
}

impl World {
    /// The world of `seed`, before its first event.
    pub fn new(seed: u64, options: Options) -> World {
        let mut rng = Rng::new(seed);
        let params = Params::draw(&mut rng);
        let hosts: Vec<HostName> = (0..params.n_hosts).map(host_name).collect();
        let queue = |name: &str| QueueName::parse("sim", name).expect("simulated queue names are valid");
        let mut mbd_config = MbdConfig::new("sim", HostName::parse("sim", "master").expect("valid"));
        let [normal, short, night] = queue_names();
        mbd_config.queues = vec![
            QueueConfig { default: true, ..QueueConfig::new(queue(normal), 30) },
            QueueConfig {
                hosts: vec![hosts[0].clone()],
                limits: QueueResourceLimits {
                    cpu_s: Some(QueueLimit { default: None, max: 60 }),
                    ..Default::default()
                },
                ..QueueConfig::new(queue(short), 40)
            },
            QueueConfig {
                hosts: vec![hosts[hosts.len() - 1].clone()],
                limits: QueueResourceLimits {
                    processes: Some(QueueLimit { default: None, max: 4 }),
                    ..Default::default()
                },
                ..QueueConfig::new(queue(night), 20)
            },
        ];
        mbd_config.hosts = hosts
            .iter()
            .zip(&params.host_slots)
            .map(|(name, slots)| HostConfig::new(name.clone(), *slots))
            .collect();
        mbd_config.clean_period_ms = params.clean_period_ms;
        mbd_config.resend_interval_ms = 5_000;
        mbd_config.job_terminate_interval_s = params.terminate_interval_s;
        let sbd_config = lava_sbd::Config {
            tombstone_retention_ms: params.tombstone_retention_ms,
            ..lava_sbd::Config::default()
        };
        let oracle = Oracle::new(&mbd_config);
        let trace = Trace::new(options.trace);
        let clients = (0..params.n_clients)
            .map(|idx| {
                let (name, uid) = if idx % 2 == 0 { ("alice", 1000) } else { ("bob", 1001) };
                let user = UserName::parse("sim", name).expect("valid user name");
                Client::new(user, uid, &params, idx, &mut rng)
            })
            .collect();
        let sbds = hosts.iter().map(|_| SbdNode::new()).collect();
        let links = vec![Link::default(); hosts.len()];
        let mbd = MbdNode::new();
        World {
            seed,
            params,
            options,
            rng,
            now_ms: T0_MS,
            queue: Queue::default(),
            mbd_config,
            sbd_config,
            hosts,
            mbd,
            sbds,
            links,
            procs: BTreeMap::new(),
            clients,
            repl: None,
            attempts: BTreeMap::new(),
            next_attempt: 1,
            next_conn: 1,
            next_pid: 1000,
            oracle,
            trace,
            stats: Stats::default(),
            healing: false,
            heal_start_ms: 0,
            converged_at_ms: None,
            done: false,
        }
    }

    /// Schedules `ev` `delay_ms` from now.
    pub fn at(&mut self, delay_ms: u64, ev: Ev) {
        self.queue.push(self.now_ms + delay_ms, ev);
    }

    /// Reports a broken property: the run fails with the seed and what broke.
    #[track_caller]
    pub fn violation(&self, problem: impl std::fmt::Display) -> ! {
        panic!(
            "lava-sim violation (seed {}, t = {} ms): {problem}",
            self.seed,
            self.now_ms.saturating_sub(T0_MS)
        );
    }

    /// The index of a configured host.
    pub fn host_idx(&self, host: &HostName) -> Option<usize> {
        self.hosts.iter().position(|h| h == host)
    }

    /// Runs the whole scenario; returns the trace hash.
    pub fn run(&mut self) -> u64 {
        if self.repl.is_some() {
            self.repl_boot();
        } else {
            self.mbd_boot();
        }
        for host in 0..self.hosts.len() {
            self.sbd_boot(host);
            let jitter = self.rng.below(TICK_MS);
            self.at(jitter, Ev::SbdTick(host));
        }
        self.at(TICK_MS, Ev::MbdTick);
        for client in 0..self.clients.len() {
            let delay = self.rng.range(100, 2_000);
            self.at(delay, Ev::ClientWake { client, generation: 0 });
        }
        self.schedule_faults_initial();
        self.at(self.params.fault_phase_ms, Ev::HealStart);
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

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::MbdTick => {
                self.trace.mix(1);
                if self.repl.is_some() {
                    self.repl_logic_tick();
                } else {
                    self.mbd_step(lava_mbd::Input::Tick);
                }
                let jitter = self.rng.below(100);
                self.at(TICK_MS - 50 + jitter, Ev::MbdTick);
            }
            Ev::MbdFsync => {
                self.trace.mix(2);
                self.mbd_fsync();
            }
            Ev::MbdRestart => {
                self.trace.mix(3);
                self.mbd_restart();
            }
            Ev::SbdTick(host) => {
                self.trace.mix(4);
                self.sbd_input(host, lava_sbd::Input::Tick);
                let jitter = self.rng.below(100);
                self.at(TICK_MS - 50 + jitter, Ev::SbdTick(host));
            }
            Ev::SbdFsyncDone { host, incarnation } => {
                self.trace.mix(5);
                self.sbd_fsync_done(host, incarnation);
            }
            Ev::SbdRestart(host) => {
                self.trace.mix(6);
                self.sbd_restart(host);
            }
            Ev::SbdConnect(host) => {
                self.trace.mix(7);
                self.sbd_connect(host);
            }
            Ev::RegisterTimeout { host, conn } => {
                self.trace.mix(8);
                self.sbd_register_timeout(host, conn);
            }
            Ev::Deliver(packet) => {
                self.trace.mix(9);
                self.trace.mix_bytes(&packet.bytes);
                self.deliver(packet);
            }
            Ev::DetectDown { host, conn, side } => {
                self.trace.mix(10);
                match side {
                    Side::Sbd => self.sbd_detect_down(host, conn),
                    Side::Mbd if self.repl.is_some() => self.repl_detect_down(host, conn),
                    Side::Mbd => self.mbd_detect_down(host, conn),
                }
            }
            Ev::ProcExit { host, job, generation } => {
                self.trace.mix(11);
                self.proc_natural_exit(host, job, generation);
            }
            Ev::UsageOver { host, job, pid } => {
                self.trace.mix(17);
                self.usage_over(host, job, pid);
            }
            Ev::ClientWake { client, generation } => {
                self.trace.mix(12);
                self.client_wake(client, generation);
            }
            Ev::FaultMbdCrash => self.fault_mbd_crash(),
            Ev::FaultSbdCrash => self.fault_sbd_crash(),
            Ev::FaultPartition => self.fault_partition(),
            Ev::DiskFull(full) => self.disk_full(full),
            Ev::Repl(ev) => self.repl_event(ev),
            Ev::HealStart => self.heal_start(),
            Ev::ResetLinks => {
                self.trace.line(self.now_ms, || "heal: every sbatchd reconnects once".to_owned());
                for host in 0..self.hosts.len() {
                    self.kill_link(host);
                }
                self.at(TICK_MS, Ev::CheckConverged);
            }
            Ev::CheckConverged => self.check_converged(),
            Ev::Finish => {
                // Ticks of the quiet period may have appended (JOB_CLEAN):
                // the final checks wait for the group commit.
                if !self.master_settled() {
                    self.at(TICK_MS / 10, Ev::Finish);
                    return;
                }
                self.final_checks();
                self.done = true;
            }
        }
    }

    // ----- faults -----

    fn schedule_faults_initial(&mut self) {
        if let Some(mean) = self.params.mbd_crash_mean_ms {
            let delay = self.rng.exponential_ms(mean);
            self.at(delay, Ev::FaultMbdCrash);
        }
        if let Some(mean) = self.params.sbd_crash_mean_ms {
            let delay = self.rng.exponential_ms(mean);
            self.at(delay, Ev::FaultSbdCrash);
        }
        if let Some(mean) = self.params.partition_mean_ms {
            let delay = self.rng.exponential_ms(mean);
            self.at(delay, Ev::FaultPartition);
        }
        if let Some(mean) = self.params.disk_full_mean_ms {
            let delay = self.rng.exponential_ms(mean);
            self.at(delay, Ev::DiskFull(true));
        }
    }

    /// mbatchd's disk fills up for a while, or has room again (also at the heal, so that
    /// the run converges). The logic hears of each change while it runs.
    fn disk_full(&mut self, full: bool) {
        if full && (self.healing || self.mbd.disk_full) {
            return;
        }
        if !full && !self.mbd.disk_full {
            return;
        }
        self.trace.mix(23);
        self.mbd.disk_full = full;
        if full {
            self.stats.n_disk_full += 1;
            let duration_ms = self.rng.range(500, 10_000);
            self.trace.line(self.now_ms, || format!("mbatchd's disk is full for {duration_ms} ms"));
            self.at(duration_ms, Ev::DiskFull(false));
            if let Some(mean) = self.params.disk_full_mean_ms {
                let delay = self.rng.exponential_ms(mean);
                self.at(duration_ms + delay, Ev::DiskFull(true));
            }
        } else {
            self.trace.line(self.now_ms, || "mbatchd's disk has room again".to_owned());
        }
        if self.mbd.is_up() {
            self.mbd_step(lava_mbd::Input::DiskFull { full });
        }
    }

    fn fault_mbd_crash(&mut self) {
        if self.healing {
            return;
        }
        self.trace.mix(20);
        if self.repl.is_some() {
            self.repl_fault_crash();
        } else if self.mbd.is_up() {
            self.mbd_crash();
        }
        if let Some(mean) = self.params.mbd_crash_mean_ms {
            let delay = self.rng.exponential_ms(mean);
            self.at(delay, Ev::FaultMbdCrash);
        }
    }

    fn fault_sbd_crash(&mut self) {
        if self.healing {
            return;
        }
        self.trace.mix(21);
        let host = self.rng.index(self.hosts.len());
        if self.sbds[host].is_up() {
            self.sbd_crash(host);
        }
        if let Some(mean) = self.params.sbd_crash_mean_ms {
            let delay = self.rng.exponential_ms(mean);
            self.at(delay, Ev::FaultSbdCrash);
        }
    }

    fn fault_partition(&mut self) {
        if self.healing {
            return;
        }
        self.trace.mix(22);
        let host = self.rng.index(self.hosts.len());
        let duration_ms = self.rng.range(200, 15_000);
        self.stats.n_partitions += 1;
        self.trace.line(self.now_ms, || format!("partition of {} for {duration_ms} ms", self.hosts[host]));
        let link = &mut self.links[host];
        link.partitioned_until_ms = link.partitioned_until_ms.max(self.now_ms + duration_ms);
        self.kill_link(host);
        if let Some(mean) = self.params.partition_mean_ms {
            let delay = self.rng.exponential_ms(mean);
            self.at(delay, Ev::FaultPartition);
        }
    }

    /// Faults stop: partitions heal, crashed daemons restart, the network
    /// stops losing and duplicating, lookups and launches stop failing.
    fn heal_start(&mut self) {
        self.trace.line(self.now_ms, || "heal: faults stop".to_owned());
        self.healing = true;
        self.heal_start_ms = self.now_ms;
        self.disk_full(false);
        for link in &mut self.links {
            link.partitioned_until_ms = self.now_ms;
        }
        if self.repl.is_some() {
            self.repl_heal();
        } else if !self.mbd.is_up() {
            self.at(0, Ev::MbdRestart);
        }
        for host in 0..self.hosts.len() {
            if !self.sbds[host].is_up() {
                self.at(0, Ev::SbdRestart(host));
            }
        }
        // lava-mbd keeps a refused job off the refusing host until that host
        // registers again (its documented choice, which closes the race
        // between a late refusal and a fresh dispatch). A job refused by every
        // host it may use would wait for ever without a registration, so once
        // the last refusals are acknowledged every sbatchd reconnects once.
        self.at(SETTLE_MS, Ev::ResetLinks);
    }

    fn check_converged(&mut self) {
        if self.now_ms > self.heal_start_ms + HEAL_MS_MAX {
            self.violation(format!(
                "the cluster did not converge within {HEAL_MS_MAX} ms of healing:\n{}",
                self.describe_state()
            ));
        }
        if self.converged_at_ms.is_none() && self.is_converged() {
            self.converged_at_ms = Some(self.now_ms);
            self.trace.line(self.now_ms, || "converged; quiet period before the final checks".to_owned());
            self.at(QUIET_MS, Ev::Finish);
            return;
        }
        self.at(TICK_MS, Ev::CheckConverged);
    }

    /// Every job ended, every record settled, every command answered.
    fn is_converged(&self) -> bool {
        let mbd_settled = self.master_settled();
        let clients_done = self.clients.iter().all(Client::is_done);
        let jobs_done = self.oracle.created.iter().all(|job| self.oracle.terminal.contains_key(job));
        let sbds_settled = self.sbds.iter().all(|node| {
            node.is_up()
                && node.groups.is_empty()
                && node.after.is_empty()
                && node.inbox.is_empty()
                && node.sbd.as_ref().is_some_and(|sbd| sbd.jobs().all(|r| r.is_tombstone()))
        });
        let procs_done = self.procs.values().all(Proc::has_exited);
        mbd_settled && clients_done && jobs_done && sbds_settled && procs_done
    }

    /// mbatchd is up with nothing unsynced or held (every candidate caught up with the
    /// serving leader in a replicated run).
    pub fn master_settled(&self) -> bool {
        match &self.repl {
            Some(repl) => repl.settled(),
            None => {
                self.mbd.is_up() && self.mbd.durable_len == self.mbd.log.len() && self.mbd.held.is_empty()
            }
        }
    }

    /// A readable summary of the cluster, for a failure report.
    pub fn describe_state(&self) -> String {
        let mut out = String::new();
        if let Some(repl) = &self.repl {
            out += &repl.describe();
        }
        out += &format!(
            "mbd: up {} log {} durable {} held {}\n",
            self.mbd.is_up(),
            self.mbd.log.len(),
            self.mbd.durable_len,
            self.mbd.held.len()
        );
        if let Some(mbd) = &self.mbd.mbd {
            for job in mbd.snapshot().jobs {
                out += &format!(
                    "  job {} {} on {:?} accepted {:?} pending signals {:?}\n",
                    job.job_ref(),
                    job.status(),
                    job.exec_hosts().iter().map(|h| h.as_str()).collect::<Vec<_>>(),
                    job.accepted(),
                    job.pending_signals()
                );
            }
        }
        for (idx, node) in self.sbds.iter().enumerate() {
            out += &format!(
                "sbd {}: up {} conn {:?} registered {} link {:?}\n",
                self.hosts[idx],
                node.is_up(),
                node.conn,
                node.registered,
                self.links[idx]
            );
            if let Some(sbd) = &node.sbd {
                for r in sbd.jobs() {
                    out += &format!(
                        "  record {} pid {} pid_acked {} execute_acked {} exit {} finish_acked {} refusal {:?}\n",
                        r.job,
                        r.pid,
                        r.pid_acked,
                        r.execute_acked,
                        r.exit_status_valid,
                        r.finish_acked,
                        r.refusal.as_ref().map(|x| &x.message)
                    );
                }
            }
        }
        for ((host, job), proc) in &self.procs {
            out += &format!("proc {} on {}: {:?}\n", job, self.hosts[*host], proc.state);
        }
        for (idx, client) in self.clients.iter().enumerate() {
            out += &format!("client {idx}: {}\n", client.describe());
        }
        out
    }

    // ----- the network -----

    /// A fresh connection number.
    pub fn new_conn(&mut self) -> u64 {
        self.next_conn += 1;
        self.next_conn
    }

    /// The live connection of `host`'s link dies (partition, crash, reset);
    /// each end notices after its own delay.
    pub fn kill_link(&mut self, host: usize) {
        if let Some(conn) = self.links[host].conn.take() {
            self.trace.line(self.now_ms, || format!("connection {conn} of {} dies", self.hosts[host]));
            let sbd_delay = self.rng.range(1, 2_000);
            let mbd_delay = self.rng.range(1, 2_000);
            self.at(sbd_delay, Ev::DetectDown { host, conn, side: Side::Sbd });
            self.at(mbd_delay, Ev::DetectDown { host, conn, side: Side::Mbd });
        }
    }

    /// One-way delay of a frame, ms.
    fn delay_ms(&mut self) -> u64 {
        let max = self.params.delay_max_ms;
        let base = self.rng.range(1, max);
        if !self.healing && self.rng.chance(self.params.slow_p) {
            base + self.rng.range(0, 10 * max)
        } else {
            base
        }
    }

    /// Puts a frame on the wire: lost, duplicated and delayed as the fault
    /// model says; frames of one sbatchd connection keep their order unless
    /// the options allow reordering.
    pub fn transmit(&mut self, route: Route, bytes: Vec<u8>) {
        self.stats.n_frames += 1;
        self.trace.mix_bytes(&bytes);
        let faulty = !self.healing;
        if faulty && self.rng.chance(self.params.drop_p) {
            self.stats.n_frames_lost += 1;
            self.trace.line(self.now_ms, || format!("net: frame to {route:?} lost"));
            return;
        }
        let copies = if faulty && self.rng.chance(self.params.duplicate_p) { 2 } else { 1 };
        for _ in 0..copies {
            let mut delay = self.delay_ms();
            let fifo = match &route {
                Route::ToMbd { host, .. } => Some((*host, 0)),
                Route::ToSbd { host, .. } => Some((*host, 1)),
                _ => None,
            };
            if let Some((host, dir)) = fifo
                && !self.options.reorder_within_connection
            {
                let last = &mut self.links[host].fifo_last_ms[dir];
                let at = (self.now_ms + delay).max(*last);
                *last = at;
                delay = at - self.now_ms;
            }
            self.at(delay, Ev::Deliver(Packet { route: route.clone(), bytes: bytes.clone() }));
        }
    }

    fn deliver(&mut self, packet: Packet) {
        match packet.route {
            Route::ToMbd { host, conn } => {
                if self.repl.is_some() {
                    let candidate = self.links[host].candidate;
                    if self.links[host].conn != Some(conn) {
                        self.stats.n_frames_lost += 1;
                        return;
                    }
                    return self
                        .repl_deliver(candidate, Packet { route: Route::ToMbd { host, conn }, ..packet });
                }
                if self.links[host].conn != Some(conn) || !self.mbd.is_up() {
                    self.stats.n_frames_lost += 1;
                    return;
                }
                self.mbd_receive_from_sbd(host, conn, &packet.bytes);
            }
            Route::ToSbd { host, conn } => {
                if self.links[host].conn != Some(conn) || self.sbds[host].conn != Some(conn) {
                    self.stats.n_frames_lost += 1;
                    return;
                }
                self.sbd_receive(host, &packet.bytes);
            }
            Route::ClientToMbd { candidate, .. } if self.repl.is_some() => {
                self.repl_deliver(candidate, packet)
            }
            Route::Raft { to, .. } => self.repl_deliver(to, packet),
            Route::ClientToMbd { attempt, incarnation, .. } => {
                if !self.mbd.is_up() || self.mbd.incarnation != incarnation {
                    self.stats.n_frames_lost += 1;
                    return;
                }
                self.mbd_receive_from_client(attempt, &packet.bytes);
            }
            Route::MbdToClient { attempt } => self.client_receive(attempt, &packet.bytes),
        }
    }

    /// The run is over once the final checks passed.
    pub fn is_done(&self) -> bool {
        self.done
    }
}
