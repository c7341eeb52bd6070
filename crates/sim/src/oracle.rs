//! What the simulation checks, beyond the logic crates' own invariants.
//!
//! The oracle keeps the truth the daemons cannot see: the durable state
//! (a replica [`Mbd`] fed every record the moment it becomes durable), the
//! starts mbatchd committed, the first terminal status of each job, which
//! processes really ran and how they ended, and every answer a command got.
//! The shells call its checks at the moment the property is observable:
//! after a step, when a message leaves a node, when a process starts.

use std::collections::{BTreeMap, BTreeSet};

use lava_batch_ll::{JobRef, JobStatus};
use lava_batch_wire as wire;
use lava_mbd::event::{FinishRecord, JobRequeueRecord, Requeued};
use lava_mbd::{Event, Job, Mbd, MbdConfig, SignalKind, ToSbd};
use lava_sbd::ToMbd;

use crate::world::World;

/// A job's process as it really ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecFact {
    /// The host it ran on.
    pub host: usize,
    /// Its pid.
    pub pid: i32,
    /// Its wait status, once it ended.
    pub wait_status: Option<i32>,
}

/// The simulation's knowledge of what really happened.
pub struct Oracle {
    /// mbatchd's durable state: every durable record applied, in order.
    pub replica: Mbd,
    /// (job, pid) of every JOB_START_ACCEPT that is durable.
    pub durable_accepts: BTreeSet<(JobRef, i32)>,
    /// The first durable terminal status of each job (array element), and its finish.
    pub terminal: BTreeMap<JobRef, (JobStatus, FinishRecord)>,
    /// Every job a durable JOB_NEW created: one, or an array's elements.
    pub created: BTreeSet<JobRef>,
    /// The job each durable JOB_NEW's request id created.
    pub job_by_request: BTreeMap<wire::RequestId, u32>,
    /// The job each submission's answer named.
    pub submit_answers: BTreeMap<wire::RequestId, u32>,
    /// Jobs with a durable kill intent (JOB_SIGNAL of a terminating action).
    pub kill_intents: BTreeSet<JobRef>,
    /// Jobs whose process reached exec, and how it ended.
    pub execs: BTreeMap<JobRef, ExecFact>,
    /// (host, job, dispatch number) whose sbatchd stepped a NEW_JOB_REPLY_ACK
    /// of that dispatch since the job's last Launch there.
    pub reply_acked: BTreeSet<(usize, JobRef, u32)>,
}

impl Oracle {
    /// The oracle of a cluster with an empty log.
    pub fn new(config: &MbdConfig) -> Oracle {
        Oracle {
            replica: Mbd::new(config.clone()).expect("the simulated configuration is valid"),
            durable_accepts: BTreeSet::new(),
            terminal: BTreeMap::new(),
            created: BTreeSet::new(),
            job_by_request: BTreeMap::new(),
            submit_answers: BTreeMap::new(),
            kill_intents: BTreeSet::new(),
            execs: BTreeMap::new(),
            reply_acked: BTreeSet::new(),
        }
    }
}

fn started_on(job: &Job, host: &lava_batch_ll::HostName) -> bool {
    job.status().is_started() && job.exec_hosts().first() == Some(host)
}

impl World {
    /// A record became durable.
    pub fn oracle_durable(&mut self, event: &Event) {
        if let Err(error) = self.oracle.replica.apply(event) {
            self.violation(format!("a durable record does not replay onto the durable state: {error}"));
        }
        match event {
            Event::JobNew(record) => {
                if let Some(first) = self.oracle.job_by_request.insert(record.request_id, record.job.id()) {
                    self.violation(format!(
                        "request id {:?} created job {} after job {first}: a retried submission made a second job",
                        record.request_id,
                        record.job.id()
                    ));
                }
                let id = record.job.id();
                match lava_batch_ll::ArraySpec::parse(&record.spec.request().job_name) {
                    Ok(Some(array)) => self.oracle.created.extend(
                        array.indexes().into_iter().map(|index| JobRef::new(id, index).expect("a real id")),
                    ),
                    _ => {
                        self.oracle.created.insert(record.job);
                    }
                }
                self.stats.n_jobs += 1;
            }
            Event::JobStartAccept(record) => {
                self.oracle.durable_accepts.insert((record.job, record.pid));
            }
            Event::JobForceExit(record) => {
                let id = record.job;
                if let Some((status, _)) = self.oracle.terminal.get(&id) {
                    self.violation(format!("job {id}: a forced EXIT after {status}"));
                }
                self.oracle.terminal.insert(id, (JobStatus::Exit, record.finish.clone()));
                self.stats.n_forced_exits += 1;
                if self.oracle.kill_intents.insert(id) {
                    // Some runs go on until the kill reaches them.
                    let immortal = self.rng.chance(0.5);
                    for ((_, job), proc) in self.procs.iter_mut() {
                        if *job == id && !proc.has_exited() {
                            proc.immortal |= immortal;
                        }
                    }
                }
            }
            Event::JobSignal(record) => {
                let id = record.job;
                if SignalKind::of(record.action) == Some(SignalKind::Terminate)
                    && self.oracle.kill_intents.insert(id)
                {
                    // Some killed jobs run until the kill reaches them.
                    let immortal = self.rng.chance(0.5);
                    for ((_, job), proc) in self.procs.iter_mut() {
                        if *job == id && !proc.has_exited() {
                            proc.immortal |= immortal;
                        }
                    }
                }
            }
            Event::JobStatus(record) => {
                if let Some(finish) = &record.finish {
                    let id = record.job;
                    if let Some((status, _)) = self.oracle.terminal.get(&id) {
                        self.violation(format!(
                            "job {id}: a second terminal status {} after {status}",
                            record.status
                        ));
                    }
                    if matches!(
                        finish.finish_reason,
                        wire::FINISH_MEM_LIMIT | wire::FINISH_CPU_LIMIT | wire::FINISH_PROCESS_LIMIT
                    ) {
                        self.stats.n_limit_kills += 1;
                    }
                    self.oracle.terminal.insert(id, (record.status, finish.clone()));
                }
            }
            Event::MbdStart(_)
            | Event::JobStart(_)
            | Event::JobExecute(_)
            | Event::JobSigact(_)
            | Event::JobClean(_) => {}
            Event::JobRequeue(record) => self.oracle_requeued(record),
            // The simulation sends no other control command (bmod, bswitch, btop, badmin).
            Event::HostCtrl(_)
            | Event::QueueCtrl(_)
            | Event::JobModify(_)
            | Event::JobSwitch(_)
            | Event::JobMove(_)
            | Event::JobForce(_) => {}
        }
    }

    /// A durable JOB_REQUEUE of a run a `brequeue -r` kill ended: the run is
    /// over as its process really ended, and the job may run again (a fresh
    /// process, which the requeue kill no longer concerns).
    fn oracle_requeued(&mut self, record: &JobRequeueRecord) {
        let id = record.job;
        let Requeued::Killed(finish) = &record.requeued else {
            self.violation(format!(
                "job {id}: requeued as {:?}, which the simulation never asks",
                record.requeued
            ));
        };
        if let Some(fact) = self.oracle.execs.remove(&id)
            && (fact.wait_status != Some(finish.wait_status) || fact.pid != finish.pid)
        {
            self.violation(format!(
                "job {id}: requeued with finish {finish:?}, but pid {} ended with wait status {:?}",
                fact.pid, fact.wait_status
            ));
        }
        self.oracle.kill_intents.remove(&id);
        self.stats.n_requeues += 1;
    }

    /// After an EXECUTE step: EXECUTE never changes a job's state.
    pub fn oracle_check_execute_changes_no_state(
        &self,
        job: JobRef,
        before: Option<&Job>,
        after: Option<&Job>,
    ) {
        let state = |j: &Job| {
            (
                j.status(),
                j.accepted(),
                j.pending_signals().to_vec(),
                j.finish().cloned(),
                j.exec_hosts().to_vec(),
            )
        };
        if before.map(state) != after.map(state) {
            self.violation(format!("job {job}: EXECUTE changed its state from {before:?} to {after:?}"));
        }
    }

    /// After every mbd step: a durable DONE or EXIT never changes.
    pub fn oracle_check_terminal_live(&self, mbd: &Mbd) {
        for (id, (status, finish)) in &self.oracle.terminal {
            if let Some(live) = mbd.job(*id)
                && (live.status() != *status || live.finish() != Some(finish))
            {
                self.violation(format!(
                    "job {id}: durable {status} changed to {} (finish {:?} then {:?})",
                    live.status(),
                    finish,
                    live.finish()
                ));
            }
        }
    }

    /// When mbd's step emits an ACK: the state it was decided on — the live
    /// state, whose records the shell makes durable before sending — holds
    /// the event the ACK confirms.
    pub fn oracle_check_mbd_ack(&self, mbd: &Mbd, host: usize, msg: &ToSbd) {
        let name = &self.hosts[host];
        let (ack, what) = match msg {
            ToSbd::NewJobReplyAck(ack) => (ack, "NEW_JOB_REPLY_ACK"),
            ToSbd::JobExecuteAck(ack) => (ack, "EXECUTE_ACK"),
            ToSbd::JobFinishAck(ack) => (ack, "FINISH_ACK"),
            ToSbd::RegisterAck(_) | ToSbd::NewJob(_) | ToSbd::JobSignal(_) => return,
        };
        let Ok(job_ref) = lava_batch_ll::job_ref("ack.job", ack.job) else {
            self.violation(format!("{what} to {name} names job id 0"));
        };
        let Some(job) = mbd.job(job_ref).filter(|j| !j.status().is_finished()) else {
            return; // unknown or finished: DONE/EXIT dominate, ACK only
        };
        if ack.dispatch_seq < job.dispatch_seq() {
            return; // a message of an earlier run: ACK only
        }
        let confirmed = match msg {
            ToSbd::NewJobReplyAck(_) => !started_on(&job, name) || job.accepted().is_some(),
            ToSbd::JobExecuteAck(_) => started_on(&job, name) && job.exec().is_some(),
            _ => false,
        };
        if !confirmed {
            self.violation(format!(
                "{what} for job {job_ref} to {name} confirms nothing in the log: {} on {:?}, accepted {:?}, exec {}",
                job.status(),
                job.exec_hosts(),
                job.accepted(),
                job.exec().is_some()
            ));
        }
    }

    /// When sbd sends: no EXECUTE or FINISH before mbatchd durably committed
    /// the start (NEW_JOB_REPLY_ACK) of this very process; a Started reply
    /// names the process that runs.
    pub fn oracle_check_sbd_send(&self, host: usize, message: &ToMbd) {
        let (what, job, seq, pid) = match message {
            ToMbd::JobExecute(m) => ("EXECUTE", m.job, m.dispatch_seq, m.pid),
            ToMbd::JobFinish(m) => ("FINISH", m.job, m.dispatch_seq, m.pid),
            ToMbd::NewJobReply(wire::NewJobReply {
                job,
                outcome: wire::NewJobOutcome::Started { pid, .. },
                ..
            }) => {
                let job_ref = lava_batch_ll::job_ref("job", *job).expect("sbd replies about real jobs");
                if self.procs.get(&(host, job_ref)).map(|p| p.pid) != Some(*pid) {
                    self.violation(format!(
                        "job {job_ref}: Started names pid {pid}, not the process on the host"
                    ));
                }
                return;
            }
            _ => return,
        };
        let job = lava_batch_ll::job_ref("job", job).expect("sbd reports about real jobs");
        if self.oracle.terminal.get(&job).is_some_and(|(_, finish)| {
            matches!(finish.finish_reason, wire::FINISH_FORCE_OWNER | wire::FINISH_FORCE_ADMIN)
        }) {
            // `bkill -r` ended the job durably without waiting for this run: mbatchd
            // acknowledges the run's start without logging it, and sends it the kill.
            return;
        }
        if !self.oracle.reply_acked.contains(&(host, job, seq)) {
            self.violation(format!(
                "job {job}: {what} from {} before it received NEW_JOB_REPLY_ACK for this launch",
                self.hosts[host]
            ));
        }
        if !self.oracle.durable_accepts.contains(&(job, pid)) {
            self.violation(format!(
                "job {job}: {what} from {} for pid {pid} before mbd's JOB_START_ACCEPT of it is durable",
                self.hosts[host]
            ));
        }
    }

    /// Before a shepherd starts: a job never has two processes and never runs twice.
    pub fn oracle_check_launch(&self, host: usize, job: JobRef) {
        if let Some(((other, _), _)) = self.procs.iter().find(|((_, j), p)| *j == job && !p.has_exited()) {
            self.violation(format!(
                "job {job}: launched on {} while its process runs on {}",
                self.hosts[host], self.hosts[*other]
            ));
        }
        if let Some(fact) = self.oracle.execs.get(&job) {
            self.violation(format!(
                "job {job}: launched on {} but it already ran (pid {} on {})",
                self.hosts[host], fact.pid, self.hosts[fact.host]
            ));
        }
    }

    /// A job's process reached exec.
    pub fn oracle_process_started(&mut self, host: usize, job: JobRef, pid: i32) {
        self.oracle.execs.insert(job, ExecFact { host, pid, wait_status: None });
    }

    /// A job's process ended.
    pub fn oracle_process_exited(&mut self, job: JobRef, pid: i32, wait_status: i32) {
        let fact = self.oracle.execs.get_mut(&job).expect("a process that ends was started");
        assert_eq!(fact.pid, pid, "job {job}: the process that ended is the one that started");
        fact.wait_status = Some(wait_status);
    }

    /// A command got an answer to submission `request_id`.
    pub fn oracle_submit_answer(&mut self, request_id: wire::RequestId, job_id: u32) {
        if let Some(first) = self.oracle.submit_answers.insert(request_id, job_id)
            && first != job_id
        {
            self.violation(format!(
                "submission {request_id:?} was answered job {first}, then job {job_id}: a retry made a second job"
            ));
        }
    }

    /// After convergence and a quiet period: every job ran at most once and
    /// ended exactly once, as its process really ended; the log replays.
    pub fn final_checks(&mut self) {
        let (live, log) = match &self.repl {
            Some(repl) => match repl.final_state() {
                Ok(state) => state,
                Err(problem) => self.violation(problem),
            },
            None => {
                let Some(live) = self.mbd.mbd.as_ref() else { self.violation("mbd is down at the end") };
                if self.mbd.durable_len != self.mbd.log.len() {
                    self.violation("records are still not durable at the end");
                }
                (live.clone(), self.mbd.log.clone())
            }
        };
        let mut replayed = Mbd::new(self.mbd_config.clone()).expect("valid configuration");
        for bytes in &log {
            let event: Event = crate::codec::from_record(bytes);
            if let Err(error) = replayed.apply(&event) {
                self.violation(format!("the final log does not replay: {error}"));
            }
        }
        if replayed.snapshot() != live.snapshot() {
            self.violation("replay of the final log differs from mbatchd's state");
        }
        for (request_id, job_id) in &self.oracle.submit_answers {
            if self.oracle.job_by_request.get(request_id) != Some(job_id) {
                self.violation(format!(
                    "submission {request_id:?} was answered job {job_id}, which it did not create"
                ));
            }
        }
        let ids: BTreeSet<u32> = self.oracle.created.iter().map(|job| job.id()).collect();
        if ids.len() != self.oracle.replica.last_job_id() as usize {
            self.violation(format!(
                "{} job ids given, {} submissions durable",
                self.oracle.replica.last_job_id(),
                ids.len()
            ));
        }
        for id in self.oracle.created.clone() {
            let Some((status, finish)) = self.oracle.terminal.get(&id) else {
                self.violation(format!("job {id} never reached DONE or EXIT"));
            };
            match self.oracle.execs.get(&id) {
                Some(fact) => {
                    let Some(wait_status) = fact.wait_status else {
                        self.violation(format!("job {id}: {status} while its process still runs"));
                    };
                    let expected = if wait_status == 0 { JobStatus::Done } else { JobStatus::Exit };
                    // `bkill -r` ended the job without waiting for its process, which
                    // must have ended all the same (checked above), however it did.
                    let forced =
                        matches!(finish.finish_reason, wire::FINISH_FORCE_OWNER | wire::FINISH_FORCE_ADMIN);
                    let as_ended =
                        *status == expected && finish.pid == fact.pid && finish.wait_status == wait_status;
                    if !(as_ended || forced && *status == JobStatus::Exit) {
                        self.violation(format!(
                            "job {id}: {status} with finish {finish:?}, but pid {} ended with wait status {wait_status:#x}",
                            fact.pid
                        ));
                    }
                }
                None => {
                    if *status != JobStatus::Exit
                        || finish.pid != 0
                        || !self.oracle.kill_intents.contains(&id)
                    {
                        self.violation(format!(
                            "job {id}: {status} (finish {finish:?}) though it never ran and was not killed"
                        ));
                    }
                }
            }
        }
        for (idx, node) in self.sbds.iter().enumerate() {
            let Some(sbd) = &node.sbd else {
                self.violation(format!("sbd {} is down at the end", self.hosts[idx]))
            };
            if let Some(record) = sbd.jobs().find(|r| !r.is_tombstone()) {
                self.violation(format!(
                    "sbd {}: record of job {} is not settled: {record:?}",
                    self.hosts[idx], record.job
                ));
            }
        }
    }
}
