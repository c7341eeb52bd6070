//! Property test of the whole pipeline under faults. Goal: whatever the
//! interleaving of duplicated, dropped and reordered messages, process
//! events, ticks, disconnections and crash-restarts (at any point of an effect
//! list, with the disk keeping only the Persists carried out, and the Notes
//! carried out or none of them), no job ever
//! has two processes; the shell carries out at most one Launch per job plus
//! one per NotLaunched it fed after a restart; mbatchd never sees EXECUTE or
//! FINISH before it acked the reply, nor two pids for one job; effect order
//! and invariants hold after every step; and once the faults stop, every job
//! sbatchd holds reaches a committed end.
//!
//! Method: a model shell (disk, shepherds, network, a minimal mbatchd) driven
//! by a proptest-generated list of actions, then a healing phase.

use std::collections::{BTreeMap, BTreeSet};

use lava_batch_ll::{JobRef, JobSpec};
use lava_batch_wire::{self as wire, NewJobOutcome, SignalAction};
use lava_sbd::{Ack, Config, Effect, Input, JobRecord, Sbd, ToMbd, UserInfo, invariants};
use proptest::prelude::*;

const N_JOBS: u32 = 3;
/// Job whose user lookup fails: it is refused.
const JOB_NO_USER: u32 = 3;
const T0: u64 = 1_800_000_000_000;

#[derive(Clone, Debug)]
enum Action {
    /// mbatchd sends NEW_JOB (a first copy or a duplicate).
    Dispatch(u32),
    DeliverToSbd(usize),
    DuplicateToSbd(usize),
    DropToSbd(usize),
    DeliverToMbd(usize),
    DropToMbd(usize),
    /// A launch in progress ends: the process exists (true) or could not start.
    Start(u32, bool),
    Exit(u32),
    Signal(u32, SignalAction),
    Tick(u64),
    Disconnect,
    Connect,
    /// Carry out only the first `k` effects of the last step, then restart;
    /// launches in progress survive as shepherds when the flag says so.
    Crash(usize, bool),
}

fn action() -> impl Strategy<Value = Action> {
    let job = 1..=N_JOBS;
    prop_oneof![
        3 => job.clone().prop_map(Action::Dispatch),
        6 => any::<usize>().prop_map(Action::DeliverToSbd),
        1 => any::<usize>().prop_map(Action::DuplicateToSbd),
        1 => any::<usize>().prop_map(Action::DropToSbd),
        6 => any::<usize>().prop_map(Action::DeliverToMbd),
        1 => any::<usize>().prop_map(Action::DropToMbd),
        3 => (job.clone(), prop::bool::weighted(0.8)).prop_map(|(j, ok)| Action::Start(j, ok)),
        2 => job.clone().prop_map(Action::Exit),
        1 => (job.clone(), any::<bool>())
            .prop_map(|(j, t)| Action::Signal(j, if t { SignalAction::Terminate } else { SignalAction::Stop })),
        3 => (0..3000u64).prop_map(Action::Tick),
        1 => Just(Action::Disconnect),
        2 => Just(Action::Connect),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(k, survive)| Action::Crash(k, survive)),
    ]
}

fn job(id: u32) -> JobRef {
    JobRef::new(id, 0).expect("nonzero id")
}

fn new_job(id: u32) -> Input {
    let specs = wire::JobSpecs {
        job: job(id).to_wire(),
        submit_time: 1_799_999_000,
        dispatch_time: 1_800_000_000,
        dispatch_seq: 1,
        user_id: 1000,
        group_id: 100,
        user_name: "alice".into(),
        queue: "normal".into(),
        job_name: String::new(),
        command: "true".into(),
        from_host: "login1".into(),
        cwd: String::new(),
        sub_home_dir: "/home/alice".into(),
        input_file: String::new(),
        output_file: String::new(),
        error_file: String::new(),
        file_flags: 0,
        n_slots: 1,
        exec_hosts: vec!["node1".into()],
        umask: 0o022,
        run_limit_s: 0,
        mem_limit_kb: 0,
        terminate_interval_s: 1,
        project: String::new(),
        login_shell: String::new(),
        pre_exec: String::new(),
        post_exec: String::new(),
        queue_pre_exec: String::new(),
        queue_post_exec: String::new(),
        nice: 0,
        limits: wire::ResourceLimits::default(),
        job_starter: String::new(),
        env: Vec::new(),
    };
    let user = match id {
        JOB_NO_USER => Err("no such user".to_owned()),
        _ => Ok(UserInfo { uid: 1000, gid: 100, home: "/home/alice".into(), shell: "/bin/sh".into() }),
    };
    Input::NewJob { spec: Box::new(JobSpec::try_from(specs).expect("valid")), user }
}

#[derive(Clone, Copy, Debug)]
struct Shepherd {
    pid: i32,
    exited: bool,
}

/// The minimal mbatchd: acks what it logged and checks the barriers.
#[derive(Default, Debug)]
struct Mbd {
    reply_acked: BTreeSet<JobRef>,
    pids: BTreeMap<JobRef, i32>,
    finished: BTreeSet<JobRef>,
}

struct World {
    sbd: Sbd,
    now_ms: u64,
    disk: BTreeMap<JobRef, JobRecord>,
    /// Noted records newer than the disk's, not yet written: a crash keeps or loses them.
    noted: BTreeMap<JobRef, JobRecord>,
    pending: Vec<Effect>,
    link_up: bool,
    to_sbd: Vec<Input>,
    to_mbd: Vec<ToMbd>,
    launching: BTreeSet<JobRef>,
    shepherds: BTreeMap<JobRef, Shepherd>,
    n_launches: BTreeMap<JobRef, u32>,
    n_not_launched: BTreeMap<JobRef, u32>,
    next_pid: i32,
    next_signal_seq: u32,
    mbd: Mbd,
}

impl World {
    fn new() -> World {
        World {
            sbd: Sbd::new(Config::default()),
            now_ms: T0,
            disk: BTreeMap::new(),
            noted: BTreeMap::new(),
            pending: Vec::new(),
            link_up: false,
            to_sbd: Vec::new(),
            to_mbd: Vec::new(),
            launching: BTreeSet::new(),
            shepherds: BTreeMap::new(),
            n_launches: BTreeMap::new(),
            n_not_launched: BTreeMap::new(),
            next_pid: 100,
            next_signal_seq: 1,
            mbd: Mbd::default(),
        }
    }

    /// One step of the logic; its effects wait in `pending` until carried out.
    fn step(&mut self, input: Input) {
        self.carry_out_pending(usize::MAX);
        let mut effects = Vec::new();
        self.sbd.step(self.now_ms, input, &mut effects);
        let mut held = self.disk.clone();
        held.extend(self.noted.iter().map(|(job, record)| (*job, record.clone())));
        invariants::check_effects(&mut held, &effects).expect("effects in durable order");
        self.sbd.check_invariants().expect("invariants hold");
        self.pending = effects;
    }

    /// The shell carries out the first `n` pending effects, in order.
    fn carry_out_pending(&mut self, n: usize) {
        let pending = std::mem::take(&mut self.pending);
        for effect in pending.into_iter().take(n) {
            match effect {
                Effect::Persist(job, record) => {
                    self.noted.remove(&job);
                    self.disk.insert(job, record);
                }
                Effect::Note(job, record) => {
                    self.noted.insert(job, record);
                }
                Effect::Remove(job) => {
                    self.noted.remove(&job);
                    self.disk.remove(&job);
                    self.shepherds.remove(&job);
                }
                Effect::Launch { job, .. } => {
                    // A Launch lost in a crash together with its record never
                    // happened; one carried out is counted.
                    let n = self.n_launches.entry(job).or_default();
                    *n += 1;
                    let allowed = 1 + self.n_not_launched.get(&job).copied().unwrap_or(0);
                    assert!(*n <= allowed, "job {job}: Launch number {n}, {allowed} allowed");
                    let running = self.launching.contains(&job) || self.shepherds.contains_key(&job);
                    assert!(!running, "job {job}: launched while a process of it exists");
                    self.launching.insert(job);
                }
                Effect::Kill { job, pgid, .. } => {
                    let pid = self.shepherds.get(&job).map(|s| s.pid);
                    assert_eq!(pid, Some(pgid), "job {job}: Kill aimed at another process group");
                }
                Effect::Send(message) => {
                    assert!(self.link_up, "sent while the link is down");
                    self.to_mbd.push(message);
                }
            }
        }
    }

    fn crash(&mut self, n_carried_out: usize, shepherds_survive: bool) {
        self.carry_out_pending(n_carried_out);
        // The page cache wrote the noted records back before the crash, or not.
        let noted = std::mem::take(&mut self.noted);
        if n_carried_out.is_multiple_of(2) {
            self.disk.extend(noted);
        }
        self.link_up = false;
        self.sbd = Sbd::restore(Config::default(), self.disk.values().cloned()).expect("records restore");
        for job in std::mem::take(&mut self.launching) {
            if shepherds_survive {
                self.spawn_shepherd(job);
            }
        }
        // Contract step 2: adopt or relaunch jobs without pid, re-attach the rest.
        let awaiting: Vec<JobRef> = self.sbd.awaiting_adoption().collect();
        for job in awaiting {
            match self.shepherds.get(&job).copied() {
                Some(shepherd) => self.step(Input::Spawned {
                    job,
                    pid: shepherd.pid,
                    pgid: shepherd.pid,
                    exec_time_ms: self.now_ms,
                }),
                None => {
                    *self.n_not_launched.entry(job).or_default() += 1;
                    self.step(Input::NotLaunched { job });
                }
            }
        }
        let running: Vec<JobRef> = self.sbd.jobs().filter(|r| r.is_running()).map(|r| r.job).collect();
        for job in running {
            if self.shepherds.get(&job).is_some_and(|s| s.exited) {
                self.step(exited(job, self.now_ms));
            }
        }
        self.carry_out_pending(usize::MAX);
    }

    fn spawn_shepherd(&mut self, job: JobRef) -> i32 {
        self.next_pid += 1;
        self.shepherds.insert(job, Shepherd { pid: self.next_pid, exited: false });
        self.next_pid
    }

    fn deliver_to_mbd(&mut self, message: ToMbd) {
        let job = lava_batch_ll::job_ref("job", message.job()).expect("sbd names real jobs");
        let mbd = &mut self.mbd;
        match message {
            ToMbd::NewJobReply(reply) => {
                if let NewJobOutcome::Started { pid, .. } = reply.outcome {
                    let first = *mbd.pids.entry(job).or_insert(pid);
                    assert_eq!(first, pid, "job {job}: mbatchd saw two pids");
                }
                mbd.reply_acked.insert(job);
                self.to_sbd.push(Input::NewJobReplyAck(Ack { job, dispatch_seq: 1 }));
            }
            ToMbd::JobExecute(_) => {
                assert!(mbd.reply_acked.contains(&job), "job {job}: EXECUTE before the reply ACK");
                self.to_sbd.push(Input::JobExecuteAck(Ack { job, dispatch_seq: 1 }));
            }
            ToMbd::JobFinish(_) => {
                assert!(mbd.reply_acked.contains(&job), "job {job}: FINISH before the reply ACK");
                mbd.finished.insert(job);
                self.to_sbd.push(Input::JobFinishAck(Ack { job, dispatch_seq: 1 }));
            }
            ToMbd::JobSignalReply(_) => {}
        }
    }

    fn act(&mut self, action: Action) {
        match action {
            Action::Dispatch(id) => self.to_sbd.push(new_job(id)),
            Action::DeliverToSbd(idx) if !self.to_sbd.is_empty() => {
                let input = self.to_sbd.remove(idx % self.to_sbd.len());
                self.step(input);
            }
            Action::DuplicateToSbd(idx) if !self.to_sbd.is_empty() => {
                let input = self.to_sbd[idx % self.to_sbd.len()].clone();
                self.step(input);
            }
            Action::DropToSbd(idx) if !self.to_sbd.is_empty() => {
                self.to_sbd.remove(idx % self.to_sbd.len());
            }
            Action::DeliverToMbd(idx) if !self.to_mbd.is_empty() => {
                let message = self.to_mbd.remove(idx % self.to_mbd.len());
                self.deliver_to_mbd(message);
            }
            Action::DropToMbd(idx) if !self.to_mbd.is_empty() => {
                self.to_mbd.remove(idx % self.to_mbd.len());
            }
            Action::Start(id, ok) if self.launching.contains(&job(id)) => {
                self.carry_out_pending(usize::MAX);
                self.launching.remove(&job(id));
                if ok {
                    let pid = self.spawn_shepherd(job(id));
                    self.step(Input::Spawned { job: job(id), pid, pgid: pid, exec_time_ms: self.now_ms });
                } else {
                    self.step(Input::SpawnFailed { job: job(id), message: "cannot start".into() });
                }
            }
            Action::Exit(id) if self.shepherds.get(&job(id)).is_some_and(|s| !s.exited) => {
                self.carry_out_pending(usize::MAX);
                if let Some(shepherd) = self.shepherds.get_mut(&job(id)) {
                    shepherd.exited = true;
                }
                self.step(exited(job(id), self.now_ms));
            }
            Action::Signal(id, action) => {
                let signal_seq = self.next_signal_seq;
                self.next_signal_seq += 1;
                self.to_sbd.push(Input::JobSignal(wire::JobSignal {
                    job: job(id).to_wire(),
                    signal_seq,
                    action,
                }));
            }
            Action::Tick(advance_ms) => {
                self.now_ms += advance_ms;
                self.step(Input::Tick);
            }
            Action::Disconnect => {
                self.carry_out_pending(usize::MAX);
                self.link_up = false;
                self.step(Input::Disconnected);
            }
            Action::Connect => {
                self.carry_out_pending(usize::MAX);
                self.link_up = true;
                self.step(Input::Connected);
            }
            Action::Crash(k, survive) => self.crash(k % (self.pending.len() + 1), survive),
            _ => {}
        }
    }

    /// Faults stop: everything is delivered, every process ends, time passes.
    fn heal(&mut self) {
        if !self.link_up {
            self.act(Action::Connect);
        }
        for _ in 0..20 {
            for job in self.launching.clone() {
                self.act(Action::Start(job.id(), true));
            }
            for (job, _) in self.shepherds.clone().into_iter().filter(|(_, s)| !s.exited) {
                self.act(Action::Exit(job.id()));
            }
            while !self.to_sbd.is_empty() {
                self.act(Action::DeliverToSbd(0));
            }
            self.carry_out_pending(usize::MAX);
            while !self.to_mbd.is_empty() {
                self.act(Action::DeliverToMbd(0));
            }
            self.act(Action::Tick(1000));
        }
        self.carry_out_pending(usize::MAX);
    }
}

fn exited(job: JobRef, end_time_ms: u64) -> Input {
    Input::Exited { job, wait_status: 0, rusage: wire::ResourceUsage::default(), end_time_ms }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn a_job_never_runs_twice_and_every_job_converges(actions in prop::collection::vec(action(), 0..80)) {
        let mut world = World::new();
        for action in actions {
            world.act(action);
        }
        world.heal();
        for record in world.sbd.jobs() {
            prop_assert!(record.is_tombstone(), "job {} did not converge: {:?}", record.job, record);
            let committed = world.mbd.finished.contains(&record.job) || record.refusal.is_some();
            prop_assert!(committed && world.mbd.reply_acked.contains(&record.job), "mbd: {:?}", world.mbd);
        }
    }
}
