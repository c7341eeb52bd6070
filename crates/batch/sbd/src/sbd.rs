//! The state machine: one handler per input, each changing records, then
//! persisting them, then acting and sending, in that order.

use std::collections::{BTreeMap, BTreeSet};

use lava_batch_ll::{self as ll, JobRef, JobSpec};
use lava_batch_wire::{self as wire, SignalAction, SignalOutcome};

use crate::invariants::{Violation, check_record};
use crate::signal::{SIGCONT, SIGINT, SIGKILL, SIGSTOP, SIGTERM, SIGXCPU};
use crate::{
    Ack, Config, Effect, Execution, Hooks, Input, JobRecord, KillSequence, PENDING_SIGNALS_MAX,
    PendingSignal, Refusal, RunSpec, SIGNAL_NUMBER_MAX, START_FAILED_WAIT_STATUS, TOMBSTONE_EVICTION_PERCENT,
    ToMbd, UsageSample, UserInfo, errno,
};

/// When each message of a job was last sent, ms since the epoch. Optimisation
/// only (spec section 3): never persisted, 0 after a restart, so everything
/// eligible is resent at once.
#[derive(Clone, Copy, Debug, Default)]
struct LastSend {
    reply_ms: u64,
    execute_ms: u64,
    finish_ms: u64,
}

#[derive(Debug)]
struct Job {
    record: JobRecord,
    last_send: LastSend,
}

/// sbatchd's logic: every job record, and whether mbatchd can be reached.
#[derive(Debug)]
pub struct Sbd {
    config: Config,
    jobs: BTreeMap<JobRef, Job>,
    connected: bool,
    /// Restored records without pid that the shell has not yet resolved with
    /// Spawned or NotLaunched; the only jobs NotLaunched may relaunch.
    awaiting_adoption: BTreeSet<JobRef>,
    /// The state file system is full (`Input::DiskFull`): new runs are refused.
    disk_full: bool,
    /// Interactive jobs whose terminal is attached now (never persisted).
    attached: BTreeSet<JobRef>,
    /// Interactive jobs that had ever a terminal attached in this sbatchd's life.
    ever_attached: BTreeSet<JobRef>,
    /// Interactive jobs found at restart: their terminal, if any, went with the previous
    /// sbatchd; they are killed at the next tick once their process is known (LSF kills an
    /// interactive job whose sbatchd restarts). Never relaunched.
    orphaned: BTreeSet<JobRef>,
}

/// Why a new run is refused while the host's state file system is full.
pub const DISK_FULL_REFUSAL: &str = "the execution host's state file system is full";

/// Refuses a new run of the job with REFUSE_HOST, keeping no record: mbatchd returns
/// the job to PEND and keeps it off this host until the host registers again.
fn refuse_host(spec: &JobSpec, message: String, out: &mut Out<'_>) {
    let outcome = wire::NewJobOutcome::Refused { code: wire::REFUSE_HOST, message };
    let dispatch_seq = spec.specs().dispatch_seq;
    let reply = wire::NewJobReply { job: spec.job().to_wire(), dispatch_seq, outcome };
    out.send(ToMbd::NewJobReply(reply));
}

/// The effect sink of one step, with what every send needs to know.
struct Out<'a> {
    now_ms: u64,
    connected: bool,
    effects: &'a mut Vec<Effect>,
}

impl Out<'_> {
    fn persist(&mut self, record: &JobRecord) {
        self.effects.push(Effect::Persist(record.job, record.clone()));
    }

    /// A change a crash cannot lose (see the crate doc's "Noted facts").
    fn note(&mut self, record: &JobRecord) {
        self.effects.push(Effect::Note(record.job, record.clone()));
    }

    fn kill(&mut self, record: &JobRecord, signal: i32) {
        self.effects.push(Effect::Kill { job: record.job, pgid: record.pgid, signal });
    }

    /// Sends if the channel is up; says whether it did.
    fn send(&mut self, message: ToMbd) -> bool {
        if self.connected {
            self.effects.push(Effect::Send(message));
        }
        self.connected
    }

    fn signal_reply(&mut self, signal: &wire::JobSignal, outcome: SignalOutcome) {
        let reply = wire::JobSignalReply { job: signal.job, signal_seq: signal.signal_seq, outcome };
        self.send(ToMbd::JobSignalReply(reply));
    }

    /// Sends every message the job's facts make eligible whose last send is at
    /// least `interval_ms` old (`None`: all of them, as on connection).
    fn send_due(&mut self, job: &mut Job, interval_ms: Option<u64>) {
        let now_ms = self.now_ms;
        let stale =
            |last_ms: u64| interval_ms.is_none_or(|i| last_ms == 0 || now_ms.saturating_sub(last_ms) >= i);
        if job.record.reply_due() && stale(job.last_send.reply_ms) {
            self.send_reply(job);
        }
        if job.record.execute_due() && stale(job.last_send.execute_ms) {
            self.send_execute(job);
        }
        if job.record.finish_due() && stale(job.last_send.finish_ms) {
            self.send_finish(job);
        }
    }

    /// NEW_JOB_REPLY rebuilt from the record, if there is anything to reply.
    fn send_reply(&mut self, job: &mut Job) {
        if let Some(reply) = job.record.new_job_reply()
            && self.send(ToMbd::NewJobReply(reply))
        {
            job.last_send.reply_ms = self.now_ms;
        }
    }

    /// EXECUTE rebuilt from the record, if it is due.
    fn send_execute(&mut self, job: &mut Job) {
        if let Some(execute) = job.record.execute_message().filter(|_| job.record.execute_due())
            && self.send(ToMbd::JobExecute(execute))
        {
            job.last_send.execute_ms = self.now_ms;
        }
    }

    /// FINISH rebuilt from the record, if it is due.
    fn send_finish(&mut self, job: &mut Job) {
        if let Some(finish) = job.record.finish_message().filter(|_| job.record.finish_due())
            && self.send(ToMbd::JobFinish(finish))
        {
            job.last_send.finish_ms = self.now_ms;
        }
    }
}

impl Sbd {
    /// A fresh sbatchd holding no job, not connected.
    pub fn new(config: Config) -> Sbd {
        Sbd {
            config,
            jobs: BTreeMap::new(),
            connected: false,
            awaiting_adoption: BTreeSet::new(),
            disk_full: false,
            attached: BTreeSet::new(),
            ever_attached: BTreeSet::new(),
            orphaned: BTreeSet::new(),
        }
    }

    /// sbatchd after a restart, from the durable records; not connected, every
    /// resend timestamp 0. Fails on a record that breaks an invariant or on
    /// two records of one job.
    pub fn restore(config: Config, records: impl IntoIterator<Item = JobRecord>) -> Result<Sbd, Violation> {
        let mut sbd = Sbd::new(config);
        for record in records {
            check_record(&record)?;
            let job = record.job;
            if record.is_awaiting_spawn() {
                sbd.awaiting_adoption.insert(job);
            }
            if record.is_interactive() && (record.is_running() || record.is_awaiting_spawn()) {
                sbd.orphaned.insert(job);
            }
            let last_send = LastSend::default();
            if sbd.jobs.insert(job, Job { record, last_send }).is_some() {
                return Err(Violation { job, problem: "two records of one job".to_owned() });
            }
        }
        Ok(sbd)
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether the channel to mbatchd is up.
    pub fn is_connected(&self) -> bool {
        self.connected
    }

    /// The record of a job.
    pub fn job(&self, job: JobRef) -> Option<&JobRecord> {
        self.jobs.get(&job).map(|j| &j.record)
    }

    /// Every record, in job order.
    pub fn jobs(&self) -> impl Iterator<Item = &JobRecord> {
        self.jobs.values().map(|j| &j.record)
    }

    /// Restored jobs whose shepherd the shell must look for (contract step 2),
    /// answered with [`Input::Spawned`] or [`Input::NotLaunched`].
    pub fn awaiting_adoption(&self) -> impl Iterator<Item = JobRef> + '_ {
        self.awaiting_adoption.iter().copied()
    }

    /// Checks every record and the bookkeeping around them.
    pub fn check_invariants(&self) -> Result<(), Violation> {
        for (job, entry) in &self.jobs {
            check_record(&entry.record)?;
            if entry.record.job != *job {
                return Err(Violation { job: *job, problem: "held under another job's name".to_owned() });
            }
        }
        for job in &self.awaiting_adoption {
            if !self.job(*job).is_some_and(JobRecord::is_awaiting_spawn) {
                return Err(Violation { job: *job, problem: "awaits adoption but has a pid".to_owned() });
            }
        }
        Ok(())
    }

    /// Applies one input at `now_ms` (ms since the epoch) and appends the
    /// effects the shell must carry out, in order.
    pub fn step(&mut self, now_ms: u64, input: Input, effects: &mut Vec<Effect>) {
        let mut out = Out { now_ms, connected: self.connected, effects };
        match input {
            Input::NewJob { spec, user } => self.new_job(spec, user, &mut out),
            Input::NewJobReplyAck(ack) => self.reply_ack(ack, &mut out),
            Input::JobExecuteAck(ack) => self.execute_ack(ack, &mut out),
            Input::JobFinishAck(ack) => self.finish_ack(ack, &mut out),
            Input::JobSignal(signal) => self.signal(signal, &mut out),
            Input::Spawned { job, pid, pgid, exec_time_ms } => {
                self.spawned(job, pid, pgid, exec_time_ms, &mut out)
            }
            Input::SpawnFailed { job, message } => self.spawn_failed(job, message, &mut out),
            Input::PreExecFailed { job, exit } => self.pre_exec_failed(job, exit, &mut out),
            Input::NotLaunched { job } => self.not_launched(job, &mut out),
            Input::Exited { job, wait_status, rusage, end_time_ms } => {
                self.exited(job, wait_status, rusage, end_time_ms, &mut out)
            }
            Input::Usage { job, usage } => self.usage(job, usage, &mut out),
            Input::TaskUsage { job, rusage } => self.task_usage(job, rusage, &mut out),
            Input::Connected => {
                self.connected = true;
                out.connected = true;
                for job in self.jobs.values_mut() {
                    out.send_due(job, None);
                }
            }
            Input::Disconnected => self.connected = false,
            Input::DiskFull { full } => self.disk_full = full,
            Input::TerminalAttached { job } => {
                if self.jobs.get(&job).is_some_and(|j| j.record.is_interactive() && j.record.is_running()) {
                    self.attached.insert(job);
                    self.ever_attached.insert(job);
                }
            }
            Input::TerminalLost { job } => {
                if self.attached.remove(&job)
                    && let Some(job) = self.jobs.get_mut(&job)
                {
                    start_terminal_kill(&mut job.record, &mut out);
                }
            }
            Input::Tick => self.tick(&mut out),
        }
    }

    /// Whether a terminal has attached to interactive job `job` in this sbatchd's life (one
    /// attach per job).
    pub fn was_attached(&self, job: JobRef) -> bool {
        self.ever_attached.contains(&job)
    }

    /// Whether `bsub`'s terminal is attached to interactive job `job` now.
    pub fn is_attached(&self, job: JobRef) -> bool {
        self.attached.contains(&job)
    }

    /// Interactive jobs: kill those found at restart, and those whose terminal did not
    /// attach within [`crate::ATTACH_WAIT_MS`] of their start.
    fn tick_interactive(&mut self, out: &mut Out<'_>) {
        let now_ms = out.now_ms;
        let orphaned = std::mem::take(&mut self.orphaned);
        for job_ref in orphaned {
            let Some(job) = self.jobs.get_mut(&job_ref) else { continue };
            if job.record.is_running() {
                start_terminal_kill(&mut job.record, out);
            } else if job.record.is_awaiting_spawn() {
                self.orphaned.insert(job_ref);
            }
        }
        for (job_ref, job) in &mut self.jobs {
            let record = &mut job.record;
            if record.is_interactive()
                && record.is_running()
                && record.kill.is_none()
                && !self.ever_attached.contains(job_ref)
                && now_ms.saturating_sub(record.exec_time_ms) >= crate::ATTACH_WAIT_MS
            {
                start_terminal_kill(record, out);
            }
        }
        let jobs = &self.jobs;
        self.attached.retain(|job| jobs.get(job).is_some_and(|j| j.record.is_running()));
        self.ever_attached.retain(|job| jobs.contains_key(job));
    }

    /// NEW_JOB: create, persist, launch; or answer a duplicate from its record.
    fn new_job(&mut self, spec: Box<JobSpec>, user: Result<UserInfo, String>, out: &mut Out<'_>) {
        let job_ref = spec.job();
        if self.jobs.len() >= self.config.records_max && !self.jobs.contains_key(&job_ref) {
            self.evict_tombstones(out);
        }
        let n_records = self.jobs.len();
        let mut carried_signals = None;
        match self.jobs.get_mut(&job_ref) {
            // The dispatch number tells a copy of the dispatch this record
            // runs (answered from the record) and a stale copy of an older one
            // (ignored) from a new dispatch of the same job (a refused job sent
            // back, a requeued one).
            // Job ids wrap at mbatchd's MAX_JOBID: a record of an older job that had
            // this id (another submission time) is never answered for the new one.
            // Its tombstone goes now, alone (the shell writes a job's folder under its
            // submission time, and one batch merges a Remove and a Persist of the same
            // job into one folder's Replace); mbatchd's resent NEW_JOB then finds no
            // record and starts the new job. While the old run still waits for an ACK,
            // its messages are resent, as for a new dispatch below.
            Some(job) if job.record.run_spec.submit_time_s != spec.specs().submit_time => {
                if job.record.is_tombstone() {
                    self.jobs.remove(&job_ref);
                    out.effects.push(Effect::Remove(job_ref));
                } else {
                    out.send_due(job, None);
                }
                return;
            }
            Some(job) => {
                let seq = spec.specs().dispatch_seq;
                if seq < job.record.dispatch_seq {
                    return;
                }
                if seq == job.record.dispatch_seq {
                    out.send_reply(job);
                    return;
                }
                if !job.record.is_tombstone() {
                    // The earlier run still has an unacknowledged FINISH or
                    // refusal: the new run waits until mbatchd has acknowledged
                    // it (it acknowledges an earlier dispatch's messages
                    // without acting on them) and resends NEW_JOB. Resending
                    // it now speeds that up.
                    out.send_due(job, None);
                    return;
                }
                if self.disk_full {
                    refuse_host(&spec, DISK_FULL_REFUSAL.to_owned(), out);
                    return;
                }
                // A fresh run: the earlier run's record and job directory go
                // first (a restart must never adopt that run's shepherd files
                // for this one). Signal numbers grow across dispatches, so the
                // new record knows which ones it has already seen.
                let seen = (job.record.signal_seq_last, job.record.suspend_seq_last);
                self.jobs.remove(&job_ref);
                out.effects.push(Effect::Remove(job_ref));
                carried_signals = Some(seen);
            }
            None if n_records >= self.config.records_max => {
                refuse_host(&spec, format!("sbatchd holds {n_records} job records, its limit"), out);
                return;
            }
            None if self.disk_full => {
                refuse_host(&spec, DISK_FULL_REFUSAL.to_owned(), out);
                return;
            }
            None => {}
        }
        let refuse =
            |message: String| Some(Refusal { code: wire::REFUSE_NO_USER, message, refused_ms: out.now_ms });
        let (run_spec, refusal) = match &user {
            // Jobs run as root only when root submitted them (DESIGN section 5).
            Ok(info) if info.uid == 0 && spec.specs().user_id != 0 => (
                RunSpec::derive(&spec, None),
                refuse(format!("user {} is uid 0 on this host but not the submitter's uid", spec.user())),
            ),
            Ok(info) => (RunSpec::derive(&spec, Some(info)), None),
            Err(problem) => {
                (RunSpec::derive(&spec, None), refuse(format!("user {}: {problem}", spec.user())))
            }
        };
        let hooks = Hooks::of(spec.specs());
        let mut record = JobRecord::created(job_ref, spec.specs().dispatch_seq, run_spec, refusal, hooks);
        record.execution = Execution::of(spec.specs());
        record.interactive = spec.specs().file_flags
            & (wire::submit_flags::INTERACTIVE | wire::submit_flags::PTY | wire::submit_flags::PTY_SHELL);
        if let Some((signal_seq_last, suspend_seq_last)) = carried_signals {
            record.signal_seq_last = signal_seq_last;
            record.suspend_seq_last = suspend_seq_last;
        }
        assert!(
            !record.is_spawned() && !record.pid_acked && !record.execute_acked && !record.finish_acked,
            "a new record starts with no pid and no ACK"
        );
        out.persist(&record);
        let mut job = Job { record, last_send: Default::default() };
        if job.record.refusal.is_some() {
            out.send_reply(&mut job);
        } else {
            out.effects.push(Effect::Launch { job: job_ref, run_spec: job.record.run_spec.clone() });
        }
        self.jobs.insert(job_ref, job);
    }

    /// At the records limit: removes the oldest tombstones, [`TOMBSTONE_EVICTION_PERCENT`]
    /// of the limit at once (at least one), so that a busy host keeps taking jobs rather than
    /// waiting for tombstones to expire (none may be left: the host is then full of live
    /// jobs).
    fn evict_tombstones(&mut self, out: &mut Out<'_>) {
        let mut tombstones: Vec<(u64, JobRef)> = self
            .jobs
            .values()
            .filter_map(|job| job.record.tombstone_since_ms().map(|since| (since, job.record.job)))
            .collect();
        tombstones.sort_unstable();
        let n = (self.config.records_max * TOMBSTONE_EVICTION_PERCENT / 100).max(1);
        tombstones.truncate(n);
        for (_, job_ref) in &tombstones {
            self.jobs.remove(job_ref);
            out.effects.push(Effect::Remove(*job_ref));
        }
    }

    /// NEW_JOB_REPLY_ACK: the stage-1 barrier; EXECUTE (and FINISH) may follow.
    fn reply_ack(&mut self, ack: Ack, out: &mut Out<'_>) {
        let Some(job) = self.acked_job(ack) else { return };
        // A duplicate, or an ACK of a reply this dispatch never produced.
        if job.record.pid_acked || !(job.record.is_spawned() || job.record.refusal.is_some()) {
            return;
        }
        job.record.pid_acked = true;
        out.note(&job.record);
        out.send_execute(job);
        out.send_finish(job);
    }

    fn execute_ack(&mut self, ack: Ack, out: &mut Out<'_>) {
        let Some(job) = self.acked_job(ack) else { return };
        let record = &mut job.record;
        if record.execute_acked || !record.pid_acked || !record.is_spawned() {
            return;
        }
        record.execute_acked = true;
        out.note(record);
    }

    /// The job an ACK is about, if the ACK is for the dispatch its record
    /// runs: an ACK of an earlier run's message says nothing about this run.
    fn acked_job(&mut self, ack: Ack) -> Option<&mut Job> {
        self.jobs.get_mut(&ack.job).filter(|job| job.record.dispatch_seq == ack.dispatch_seq)
    }

    fn finish_ack(&mut self, ack: Ack, out: &mut Out<'_>) {
        let Some(job) = self.acked_job(ack) else { return };
        if !job.record.finish_due() {
            return;
        }
        job.record.finish_acked = true;
        out.note(&job.record);
    }

    fn signal(&mut self, signal: wire::JobSignal, out: &mut Out<'_>) {
        let job = ll::job_ref("signal.job", signal.job).ok().and_then(|job_ref| self.jobs.get_mut(&job_ref));
        let Some(job) = job else { return out.signal_reply(&signal, SignalOutcome::NoSuchJob) };
        let record = &mut job.record;
        if record.refusal.is_some() {
            return out.signal_reply(&signal, SignalOutcome::NoSuchJob);
        }
        if record.exit_status_valid {
            return out.signal_reply(&signal, SignalOutcome::AlreadyFinished);
        }
        if let SignalAction::Signal(number) = signal.action
            && signal_number(number).is_none()
        {
            return out.signal_reply(&signal, SignalOutcome::Failed(errno::EINVAL));
        }
        let seq = signal.signal_seq;
        if record.pending_signals.iter().any(|p| p.signal_seq == seq) {
            if record.is_spawned() {
                // Held signals a crash kept from their delivery: deliver them now.
                deliver_held(record, out);
            }
            return; // a duplicate of a held signal: answered when it is delivered
        }
        if record.is_spawned() {
            // Older held signals go first, in mbatchd's order.
            deliver_held(record, out);
        }
        let seen_later = record.signal_seq_last.is_some_and(|last| seq <= last);
        if !record.is_spawned() {
            // Before the process exists every signal seen is held, so this one
            // is new, possibly overtaken by a later one: hold it in mbatchd's order.
            if record.pending_signals.len() >= PENDING_SIGNALS_MAX {
                return out.signal_reply(&signal, SignalOutcome::Failed(errno::EAGAIN));
            }
            record.signal_seq_last = record.signal_seq_last.max(Some(seq));
            let at = record.pending_signals.partition_point(|p| p.signal_seq < seq);
            record.pending_signals.insert(at, PendingSignal { signal_seq: seq, action: signal.action });
            return out.persist(record);
        }
        if !signal_acts(record, seq, signal.action) {
            // A duplicate, an old STOP or CONT overtaken by a newer one, or a
            // kill joining the one under way: answered, never acted on twice
            // or out of order. A new number is made durable first.
            if !seen_later {
                record.signal_seq_last = Some(seq);
                out.persist(record);
            }
            return out.signal_reply(&signal, SignalOutcome::Delivered);
        }
        // Act, then record (see `deliver_held`): a crash between the two
        // leaves the signal unrecorded, so mbatchd's resend acts again.
        let kill = act_on_signal(record, seq, signal.action, out.now_ms);
        if let Some(number) = kill {
            out.kill(record, number);
        }
        out.persist(record);
        out.signal_reply(&signal, SignalOutcome::Delivered);
    }

    /// The process exists: record it, reply with the pid, deliver what waited.
    fn spawned(&mut self, job_ref: JobRef, pid: i32, pgid: i32, exec_time_ms: u64, out: &mut Out<'_>) {
        assert!(pid > 0 && pgid > 0, "job {job_ref}: Spawned with pid {pid} pgid {pgid}");
        let job = self.jobs.get_mut(&job_ref);
        let Some(job) = job else { panic!("job {job_ref}: Spawned for a job sbatchd does not hold") };
        let record = &mut job.record;
        if record.is_spawned() {
            assert_eq!((record.pid, record.pgid), (pid, pgid), "job {job_ref}: Spawned with a second pid");
            return;
        }
        assert!(record.refusal.is_none(), "job {job_ref}: Spawned for a refused job");
        self.awaiting_adoption.remove(&job_ref);
        record.pid = pid;
        record.pgid = pgid;
        record.exec_time_ms = exec_time_ms;
        // The pid is durable in the shepherd's pid file already (it is
        // written before the job may execute, and adoption reads it back):
        // noted, with the held signals still held; delivering them persists.
        out.note(&job.record);
        out.send_reply(job);
        deliver_held(&mut job.record, out);
    }

    fn spawn_failed(&mut self, job_ref: JobRef, message: String, out: &mut Out<'_>) {
        let job = self.jobs.get_mut(&job_ref);
        let Some(job) = job else { panic!("job {job_ref}: SpawnFailed for a job sbatchd does not hold") };
        let record = &mut job.record;
        if record.refusal.is_some() || record.exit_status_valid {
            return;
        }
        if record.is_spawned() {
            record.exit_status_valid = true;
            record.wait_status = START_FAILED_WAIT_STATUS;
            record.finish_reason = wire::FINISH_START_FAILED;
            record.end_time_ms = out.now_ms;
            let held = std::mem::take(&mut record.pending_signals);
            out.persist(record);
            out.send_finish(job);
            return answer_held(job_ref, held, SignalOutcome::AlreadyFinished, out);
        }
        self.refuse_unstarted(job_ref, wire::REFUSE_SETUP, message, out);
    }

    /// The job's pre-execution commands exited `exit` before its process existed: the
    /// dispatch is refused with [`wire::REFUSE_PRE_EXEC_BASE`] plus `exit`, which mbatchd
    /// turns into LSF's requeue (docs/batch.md, "Pre- and post-execution commands").
    fn pre_exec_failed(&mut self, job_ref: JobRef, exit: u8, out: &mut Out<'_>) {
        let job = self.jobs.get(&job_ref);
        let Some(job) = job else { panic!("job {job_ref}: PreExecFailed for a job sbatchd does not hold") };
        let record = &job.record;
        // The commands run before any process: a report for a job with a process, or one
        // already refused, is stale (a copy from before a restart) and changes nothing.
        if record.is_spawned() || record.refusal.is_some() || record.exit_status_valid {
            return;
        }
        let message = format!("the pre-execution command exited with {exit}; the job was not run");
        self.refuse_unstarted(job_ref, wire::REFUSE_PRE_EXEC_BASE + u32::from(exit), message, out);
    }

    /// Refuses the dispatch of a job that has no process: persisted, then the reply, and
    /// every held signal answered `NoSuchJob`.
    fn refuse_unstarted(&mut self, job_ref: JobRef, code: u32, message: String, out: &mut Out<'_>) {
        let job = self.jobs.get_mut(&job_ref).expect("the caller checked the job");
        let record = &mut job.record;
        self.awaiting_adoption.remove(&job_ref);
        record.refusal = Some(Refusal { code, message, refused_ms: out.now_ms });
        let pending = std::mem::take(&mut record.pending_signals);
        out.persist(record);
        out.send_reply(job);
        for p in pending {
            let signal =
                wire::JobSignal { job: job_ref.to_wire(), signal_seq: p.signal_seq, action: p.action };
            out.signal_reply(&signal, SignalOutcome::NoSuchJob);
        }
    }

    fn not_launched(&mut self, job_ref: JobRef, out: &mut Out<'_>) {
        assert!(
            self.awaiting_adoption.remove(&job_ref),
            "job {job_ref}: NotLaunched for a job that is not awaiting adoption"
        );
        // Never started: its first run starts now, and its bsub may still attach.
        self.orphaned.remove(&job_ref);
        let run_spec = self.jobs.get(&job_ref).map(|j| j.record.run_spec.clone());
        let run_spec = run_spec.expect("a job awaiting adoption has a record (check_invariants)");
        out.effects.push(Effect::Launch { job: job_ref, run_spec });
    }

    fn exited(
        &mut self,
        job_ref: JobRef,
        wait_status: i32,
        rusage: wire::ResourceUsage,
        end_time_ms: u64,
        out: &mut Out<'_>,
    ) {
        let job = self.jobs.get_mut(&job_ref);
        let Some(job) = job else { panic!("job {job_ref}: Exited for a job sbatchd does not hold") };
        let record = &mut job.record;
        if record.exit_status_valid {
            return;
        }
        assert!(record.is_spawned(), "job {job_ref}: Exited before Spawned");
        record.exit_status_valid = true;
        record.wait_status = wait_status;
        record.finish_reason = match record.kill {
            Some(kill) => kill.reason,
            // The kernel's own CPU limit (RLIMIT_CPU) ended the job's process.
            None if wait_status & 0x7f == SIGXCPU && record.execution.limits.cpu_s.is_some() => {
                wire::FINISH_CPU_LIMIT
            }
            None => wire::FINISH_NORMAL,
        };
        record.end_time_ms = end_time_ms;
        // The job's own usage and its ended tasks' (the same sum after a restart: the
        // tasks' part was durable before the exit).
        record.rusage = crate::tasks::add_usage(rusage, record.task_rusage);
        // Signals a crash kept from their delivery are moot now.
        let held = std::mem::take(&mut record.pending_signals);
        // The exit is durable in the shepherd's exit file already (adoption
        // reads it back after a crash): noted.
        out.note(record);
        out.send_finish(job);
        answer_held(job_ref, held, SignalOutcome::AlreadyFinished, out);
    }

    fn task_usage(&mut self, job_ref: JobRef, rusage: wire::ResourceUsage, out: &mut Out<'_>) {
        let Some(job) = self.jobs.get_mut(&job_ref) else { return };
        let record = &mut job.record;
        if record.refusal.is_some() || record.exit_status_valid || record.is_tombstone() {
            return;
        }
        record.task_rusage = crate::tasks::add_usage(record.task_rusage, rusage);
        out.persist(record);
    }

    fn usage(&mut self, job_ref: JobRef, usage: UsageSample, out: &mut Out<'_>) {
        let Some(job) = self.jobs.get_mut(&job_ref) else { return };
        if let Some(reason) = limit_crossed(&job.record, &usage) {
            start_limit_kill(&mut job.record, reason, out);
        }
    }

    /// Time passed: prune old tombstones, advance kills, enforce run limits, resend.
    fn tick(&mut self, out: &mut Out<'_>) {
        self.tick_interactive(out);
        let now_ms = out.now_ms;
        let mut expired = Vec::new();
        for (job_ref, job) in &mut self.jobs {
            let record = &mut job.record;
            if let Some(since_ms) = record.tombstone_since_ms() {
                if now_ms.saturating_sub(since_ms) >= self.config.tombstone_retention_ms {
                    expired.push(*job_ref);
                }
                continue;
            }
            if record.is_running() {
                deliver_held(record, out);
                match record.kill {
                    Some(kill) => advance_kill(record, kill, now_ms, out),
                    None => {
                        let limit_ms = record.run_spec.run_limit_s.saturating_mul(1000);
                        if limit_ms > 0 && now_ms.saturating_sub(record.exec_time_ms) >= limit_ms {
                            start_limit_kill(record, wire::FINISH_RUN_LIMIT, out);
                        }
                    }
                }
            }
            out.send_due(job, Some(self.config.resend_interval_ms));
        }
        for job_ref in expired {
            self.jobs.remove(&job_ref);
            out.effects.push(Effect::Remove(job_ref));
        }
    }
}

/// The signal number of `SignalAction::Signal`, if it is one.
fn signal_number(number: u32) -> Option<i32> {
    (1..=SIGNAL_NUMBER_MAX).contains(&number).then(|| i32::try_from(number).ok()).flatten()
}

/// Records what an action starts and returns the signal to send now, if any.
/// A Terminate while a kill is under way only joins it.
fn start_action(record: &mut JobRecord, action: SignalAction, now_ms: u64) -> Option<i32> {
    match action {
        SignalAction::Stop => Some(SIGSTOP),
        SignalAction::Continue => Some(SIGCONT),
        SignalAction::Signal(number) => signal_number(number),
        SignalAction::Terminate if record.kill.is_some() => None,
        SignalAction::Terminate => {
            record.kill =
                Some(KillSequence { reason: wire::FINISH_KILLED, started_ms: now_ms, n_signals_sent: 1 });
            Some(SIGINT)
        }
    }
}

/// The terminal of an interactive job is gone, or never came: LSF's kill, starting with
/// SIGHUP (what a terminal's hangup sends), unless one is under way.
fn start_terminal_kill(record: &mut JobRecord, out: &mut Out<'_>) {
    if !record.is_running() || record.kill.is_some() {
        return;
    }
    record.kill =
        Some(KillSequence { reason: wire::FINISH_KILLED, started_ms: out.now_ms, n_signals_sent: 1 });
    out.kill(record, crate::signal::SIGHUP);
    out.persist(record);
}

/// The finish reason of the first of the job's limits that `usage` is over, in LSF's order
/// of checks: memory (`-M`), CPU time, virtual memory, processes, threads.
fn limit_crossed(record: &JobRecord, usage: &UsageSample) -> Option<u32> {
    record
        .measured_limits()
        .into_iter()
        .find_map(|(limit, reason, used)| limit.is_some_and(|limit| used(usage) > limit).then_some(reason))
}

/// A limit was crossed: start LSF's kill (its first signal), unless one is under way.
fn start_limit_kill(record: &mut JobRecord, reason: u32, out: &mut Out<'_>) {
    if !record.is_running() || record.kill.is_some() {
        return;
    }
    let kill = KillSequence { reason, started_ms: out.now_ms, n_signals_sent: 1 };
    record.kill = Some(kill);
    out.kill(record, kill.signals()[0]);
    out.persist(record);
}

/// The next signal of the kill once its time has come: the `n`th signal `n - 1` terminate
/// intervals after the first.
fn advance_kill(record: &mut JobRecord, mut kill: KillSequence, now_ms: u64, out: &mut Out<'_>) {
    let interval_ms = u64::from(record.run_spec.terminate_interval_s) * 1000;
    let elapsed_ms = now_ms.saturating_sub(kill.started_ms);
    let sent = kill.n_signals_sent;
    let Some(&signal) = kill.signals().get(sent as usize) else { return };
    if elapsed_ms < u64::from(sent) * interval_ms {
        return;
    }
    kill.n_signals_sent += 1;
    record.kill = Some(kill);
    // Act, then record: a crash in between repeats the signal after the
    // restart instead of losing it (a lost SIGKILL would never come again).
    out.kill(record, signal);
    out.persist(record);
}

/// Delivers the signals held for a job whose process now exists, in
/// mbatchd's order: act first (Kill), then record (Persist), then answer.
///
/// Signals are acted on before the record says so, never after, because a
/// crash between the two must repeat the act rather than lose it: STOP, CONT
/// and the signals of a kill are harmless to repeat, while a lost SIGCONT
/// leaves the job stopped for ever and a lost SIGKILL never comes again
/// (found by lava-sim). The held signals are normally delivered in the step
/// that reports the process; a crash between that step's two Persists leaves
/// them held on disk, and the next Tick or signal delivers them.
fn deliver_held(record: &mut JobRecord, out: &mut Out<'_>) {
    if record.pending_signals.is_empty() || !record.is_running() {
        return;
    }
    let held = std::mem::take(&mut record.pending_signals);
    for p in &held {
        if signal_acts(record, p.signal_seq, p.action)
            && let Some(number) = act_on_signal(record, p.signal_seq, p.action, out.now_ms)
        {
            out.kill(record, number);
        }
    }
    out.persist(record);
    answer_held(record.job, held, SignalOutcome::Delivered, out);
}

/// How a signal action relates to the others, as mbatchd's supersession
/// rules see it (lava-mbd's `SignalKind`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Terminate, or SIGINT, SIGKILL, SIGTERM by number: never superseded.
    Kill,
    /// STOP, CONT and their numbers: each supersedes the other.
    Suspend,
    /// Any other numbered signal.
    Other,
}

fn kind(action: SignalAction) -> Kind {
    match action {
        SignalAction::Terminate => Kind::Kill,
        SignalAction::Stop | SignalAction::Continue => Kind::Suspend,
        SignalAction::Signal(n) if [SIGINT, SIGKILL, SIGTERM].iter().any(|s| u32::try_from(*s) == Ok(n)) => {
            Kind::Kill
        }
        SignalAction::Signal(n) if [SIGSTOP, SIGCONT, 20].iter().any(|s| u32::try_from(*s) == Ok(n)) => {
            Kind::Suspend
        }
        SignalAction::Signal(_) => Kind::Other,
    }
}

/// Whether signal `seq` must act on the running process. Sequence numbers
/// alone do not say it: mbatchd keeps a kill pending beside newer STOPs and
/// CONTs (a kill is never superseded), so a resent kill may arrive after them
/// and must still act (lava-sim found such a kill answered Delivered and
/// never sent). So: a kill acts unless a kill sequence is under way (a
/// numbered kill signal always acts: repeating it is harmless); a STOP or CONT
/// acts unless a newer STOP or CONT was acted on; any other signal acts only
/// if no newer signal was handled.
fn signal_acts(record: &JobRecord, seq: u32, action: SignalAction) -> bool {
    match (kind(action), action) {
        (Kind::Kill, SignalAction::Terminate) => record.kill.is_none(),
        (Kind::Kill, _) => true,
        (Kind::Suspend, _) => record.suspend_seq_last.is_none_or(|last| seq > last),
        (Kind::Other, _) => record.signal_seq_last.is_none_or(|last| seq > last),
    }
}

/// Records that signal `seq` acts now and returns the signal to send, if any.
fn act_on_signal(record: &mut JobRecord, seq: u32, action: SignalAction, now_ms: u64) -> Option<i32> {
    record.signal_seq_last = record.signal_seq_last.max(Some(seq));
    if kind(action) == Kind::Suspend {
        record.suspend_seq_last = Some(seq);
    }
    start_action(record, action, now_ms)
}

/// Answers held signals once their outcome is durable.
fn answer_held(job: JobRef, held: Vec<PendingSignal>, outcome: SignalOutcome, out: &mut Out<'_>) {
    for p in held {
        let signal = wire::JobSignal { job: job.to_wire(), signal_seq: p.signal_seq, action: p.action };
        out.signal_reply(&signal, outcome);
    }
}
