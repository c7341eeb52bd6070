//! Logic tests: each calls one input through `Harness::check` and asserts the
//! exact list of effects (openraft's engine-test shape). The harness also
//! keeps the shell's "disk" from the Persist/Remove effects, checks every
//! effect list against it (nothing acts or reports before the Persist of its
//! fact) and checks the invariants after every step.

use std::collections::BTreeMap;

use lava_batch_ll::{JobRef, JobSpec};
use lava_batch_wire::{self as wire, NewJobOutcome, SignalAction, SignalOutcome};
use lava_sbd::signal::{SIGCONT, SIGINT, SIGKILL, SIGSTOP, SIGTERM, SIGXCPU};
use lava_sbd::{
    Ack, Config, Effect, Input, JobRecord, KillSequence, PENDING_SIGNALS_MAX, PendingSignal, Refusal,
    START_FAILED_WAIT_STATUS, Sbd, ToMbd, UsageSample, UserInfo, errno, invariants,
};

const T0: u64 = 1_800_000_000_000;
const SECOND_MS: u64 = 1000;
const DAY_MS: u64 = 24 * 3600 * SECOND_MS;

fn job(id: u32) -> JobRef {
    JobRef::new(id, 0).expect("nonzero id")
}

/// An ACK of the first dispatch of job `id`.
fn ack(id: u32) -> Ack {
    Ack { job: job(id), dispatch_seq: 1 }
}

fn specs(id: u32) -> wire::JobSpecs {
    wire::JobSpecs {
        job: wire::WireJobRef { job_id: id, array_index: 0 },
        submit_time: 1_799_999_000,
        dispatch_time: 1_800_000_000,
        dispatch_seq: 1,
        user_id: 1000,
        group_id: 100,
        user_name: "alice".into(),
        queue: "normal".into(),
        job_name: "sleeper".into(),
        command: "sleep 60".into(),
        from_host: "login1".into(),
        cwd: "work".into(),
        sub_home_dir: "/home/alice".into(),
        input_file: String::new(),
        output_file: "%J.out".into(),
        error_file: String::new(),
        file_flags: 0,
        n_slots: 1,
        exec_hosts: vec!["node1".into()],
        umask: 0o022,
        run_limit_s: 0,
        mem_limit_kb: 0,
        terminate_interval_s: 10,
        project: "default".into(),
        login_shell: String::new(),
        pre_exec: String::new(),
        post_exec: String::new(),
        queue_pre_exec: String::new(),
        queue_post_exec: String::new(),
        nice: 0,
        limits: wire::ResourceLimits::default(),
        job_starter: String::new(),
        env: vec![wire::EnvVar { name: "PATH".into(), value: "/bin".into() }],
    }
}

fn alice() -> UserInfo {
    UserInfo { uid: 1000, gid: 100, home: "/home/alice".into(), shell: "/bin/bash".into() }
}

fn new_job_from(specs: wire::JobSpecs) -> Input {
    Input::NewJob { spec: Box::new(JobSpec::try_from(specs).expect("valid spec")), user: Ok(alice()) }
}

fn new_job(id: u32) -> Input {
    new_job_from(specs(id))
}

fn spawned(id: u32, pid: i32, exec_time_ms: u64) -> Input {
    Input::Spawned { job: job(id), pid, pgid: pid, exec_time_ms }
}

fn rusage() -> wire::ResourceUsage {
    wire::ResourceUsage { user_time_ms: 1500, system_time_ms: 20, max_rss_kb: 4096 }
}

fn exited(id: u32, wait_status: i32, end_time_ms: u64) -> Input {
    Input::Exited { job: job(id), wait_status, rusage: rusage(), end_time_ms }
}

fn signal(id: u32, signal_seq: u32, action: SignalAction) -> Input {
    Input::JobSignal(wire::JobSignal {
        job: wire::WireJobRef { job_id: id, array_index: 0 },
        signal_seq,
        action,
    })
}

fn persist(record: &JobRecord) -> Effect {
    Effect::Persist(record.job, record.clone())
}

/// The effects of a NEW_JOB whose record replaces job `removed`'s (a fresh run over a
/// tombstone, or an evicted tombstone): Remove, then the new record, then its Launch.
fn removed_then_launched(removed: u32, fresh: &JobRecord) -> Vec<Effect> {
    vec![
        Effect::Remove(job(removed)),
        persist(fresh),
        Effect::Launch { job: fresh.job, run_spec: fresh.run_spec.clone() },
    ]
}

fn note(record: &JobRecord) -> Effect {
    Effect::Note(record.job, record.clone())
}

fn kill(id: u32, pgid: i32, signal: i32) -> Effect {
    Effect::Kill { job: job(id), pgid, signal }
}

fn started(id: u32, pid: i32) -> Effect {
    let outcome = NewJobOutcome::Started { pid, pgid: pid, job_status: 0x04 };
    Effect::Send(ToMbd::NewJobReply(wire::NewJobReply { job: job(id).to_wire(), dispatch_seq: 1, outcome }))
}

fn refused(id: u32, code: u32, message: &str) -> Effect {
    let outcome = NewJobOutcome::Refused { code, message: message.into() };
    Effect::Send(ToMbd::NewJobReply(wire::NewJobReply { job: job(id).to_wire(), dispatch_seq: 1, outcome }))
}

fn execute(id: u32, pid: i32, exec_time_s: i64) -> Effect {
    Effect::Send(ToMbd::JobExecute(wire::JobExecute {
        job: job(id).to_wire(),
        dispatch_seq: 1,
        pid,
        pgid: pid,
        exec_uid: 1000,
        exec_user: "alice".into(),
        exec_home: "/home/alice".into(),
        exec_cwd: "/home/alice/work".into(),
        exec_time: exec_time_s,
    }))
}

fn finish(id: u32, pid: i32, wait_status: i32, finish_reason: u32, end_time_ms: u64) -> Effect {
    Effect::Send(ToMbd::JobFinish(wire::JobFinish {
        job: job(id).to_wire(),
        dispatch_seq: 1,
        pid,
        wait_status,
        finish_reason,
        end_time: i64::try_from(end_time_ms / 1000).expect("small"),
        rusage: rusage(),
    }))
}

fn signal_reply(id: u32, signal_seq: u32, outcome: SignalOutcome) -> Effect {
    let job = wire::WireJobRef { job_id: id, array_index: 0 };
    Effect::Send(ToMbd::JobSignalReply(wire::JobSignalReply { job, signal_seq, outcome }))
}

/// sbatchd plus the shell's disk, as the effects left it.
struct Harness {
    sbd: Sbd,
    disk: BTreeMap<JobRef, JobRecord>,
}

impl Harness {
    /// A fresh sbatchd, connected to mbatchd.
    fn connected() -> Harness {
        let mut h = Harness { sbd: Sbd::new(Config::default()), disk: BTreeMap::new() };
        h.check(T0, Input::Connected, vec![]);
        h
    }

    fn step(&mut self, now_ms: u64, input: Input) -> Vec<Effect> {
        let mut effects = Vec::new();
        self.sbd.step(now_ms, input, &mut effects);
        invariants::check_effects(&mut self.disk, &effects).expect("effects in durable order");
        self.sbd.check_invariants().expect("invariants hold");
        effects
    }

    fn check(&mut self, now_ms: u64, input: Input, expected: Vec<Effect>) {
        let effects = self.step(now_ms, input);
        assert_eq!(effects, expected);
    }

    fn record(&self, id: u32) -> JobRecord {
        self.sbd.job(job(id)).expect("job held").clone()
    }

    /// Crash and restart: the in-memory state is rebuilt from the disk alone.
    fn restart(&mut self) {
        self.sbd = Sbd::restore(Config::default(), self.disk.values().cloned()).expect("records restore");
        self.sbd.check_invariants().expect("invariants hold after restore");
    }

    /// Job `id` created and launched at T0, returning the created record.
    fn launched(&mut self, id: u32) -> JobRecord {
        self.step(T0, new_job(id));
        self.record(id)
    }

    /// Job `id` running with `pid` (exec at T0 + 1 s), its reply acked, and
    /// its EXECUTE acked when `execute_acked`.
    fn running(&mut self, id: u32, pid: i32, execute_acked: bool) -> JobRecord {
        self.launched(id);
        self.step(T0 + SECOND_MS, spawned(id, pid, T0 + SECOND_MS));
        self.step(T0 + SECOND_MS, Input::NewJobReplyAck(ack(id)));
        if execute_acked {
            self.step(T0 + SECOND_MS, Input::JobExecuteAck(ack(id)));
        }
        self.record(id)
    }
}

// Goal: NEW_JOB makes a fresh record durable before the job is launched, and
// the record has no pid, no ACK, and the decoded runtime spec.
#[test]
fn new_job_persists_the_fresh_record_then_launches() {
    let mut h = Harness::connected();
    let effects = h.step(T0, new_job(7));
    let created = h.record(7);
    assert_eq!(
        effects,
        vec![persist(&created), Effect::Launch { job: job(7), run_spec: created.run_spec.clone() }]
    );
    assert_eq!((created.pid, created.pgid), (-1, -1));
    assert!(
        !created.pid_acked && !created.execute_acked && !created.finish_acked && !created.exit_status_valid
    );
    let run_spec = &created.run_spec;
    assert_eq!((run_spec.exec_uid, run_spec.exec_gid, run_spec.exec_user.as_str()), (1000, 100, "alice"));
    assert_eq!(
        (run_spec.exec_home.as_str(), run_spec.exec_cwd.as_str()),
        ("/home/alice", "/home/alice/work")
    );
    assert_eq!(run_spec.output_file, "/home/alice/work/7.out");
    assert_eq!((run_spec.user_home.as_str(), run_spec.user_shell.as_str()), ("/home/alice", "/bin/bash"));
}

// Goal: a failed user lookup refuses the job (REFUSE_NO_USER) through a
// durable record, so the refusal is resent until acked; the ACK makes it a
// tombstone that is removed after the retention period.
#[test]
fn unknown_user_is_refused_until_acked_then_pruned() {
    let mut h = Harness::connected();
    let input = Input::NewJob {
        spec: Box::new(JobSpec::try_from(specs(7)).expect("valid")),
        user: Err("no such user".into()),
    };
    let effects = h.step(T0, input);
    let record = h.record(7);
    let message = "user alice: no such user";
    assert_eq!(effects, vec![persist(&record), refused(7, wire::REFUSE_NO_USER, message)]);
    assert_eq!(record.run_spec.exec_uid, 1000, "the snapshot's uid stands in");
    h.check(T0 + SECOND_MS, Input::Tick, vec![refused(7, wire::REFUSE_NO_USER, message)]);
    let acked = JobRecord { pid_acked: true, ..record };
    h.check(T0 + SECOND_MS, Input::NewJobReplyAck(ack(7)), vec![note(&acked)]);
    h.check(T0 + 2 * SECOND_MS, Input::Tick, vec![]);
    h.check(T0 + DAY_MS, Input::Tick, vec![Effect::Remove(job(7))]);
}

// Goal: a user name that is uid 0 on this host runs nothing unless root
// submitted the job.
#[test]
fn user_mapping_to_root_is_refused() {
    let mut h = Harness::connected();
    let user = Ok(UserInfo { uid: 0, ..alice() });
    let effects =
        h.step(T0, Input::NewJob { spec: Box::new(JobSpec::try_from(specs(7)).expect("valid")), user });
    assert!(matches!(
        &effects[..],
        [
            Effect::Persist(..),
            Effect::Send(ToMbd::NewJobReply(wire::NewJobReply {
                outcome: NewJobOutcome::Refused { code: wire::REFUSE_NO_USER, .. },
                ..
            }))
        ]
    ));
}

// Goal: Spawned notes the pid (the shepherd's pid file holds it durably), then
// sends NEW_JOB_REPLY with RUN.
#[test]
fn spawned_notes_the_pid_then_replies() {
    let mut h = Harness::connected();
    let created = h.launched(7);
    let with_pid = JobRecord { pid: 4242, pgid: 4242, exec_time_ms: T0 + 5, ..created };
    h.check(T0 + 5, spawned(7, 4242, T0 + 5), vec![note(&with_pid), started(7, 4242)]);
}

// Goal: the stage-1 barrier. Method: before NEW_JOB_REPLY_ACK only the reply
// is resent and an early EXECUTE_ACK is ignored; the ACK is persisted, then
// EXECUTE follows at once.
#[test]
fn execute_waits_for_the_reply_ack() {
    let mut h = Harness::connected();
    h.launched(7);
    h.step(T0, spawned(7, 4242, T0));
    h.check(T0 + 5 * SECOND_MS, Input::Tick, vec![started(7, 4242)]);
    h.check(T0 + 5 * SECOND_MS, Input::JobExecuteAck(ack(7)), vec![]);
    let acked = JobRecord { pid_acked: true, ..h.record(7) };
    h.check(
        T0 + 6 * SECOND_MS,
        Input::NewJobReplyAck(ack(7)),
        vec![note(&acked), execute(7, 4242, 1_800_000_000)],
    );
    h.check(T0 + 6 * SECOND_MS, Input::NewJobReplyAck(ack(7)), vec![]);
}

// Goal: duplicated and reordered ACKs change nothing: an ACK of a message not
// yet sent is ignored, a repeated ACK is not persisted twice.
#[test]
fn duplicate_and_early_acks_are_harmless() {
    let mut h = Harness::connected();
    h.launched(7);
    for ack in [Input::NewJobReplyAck(ack(7)), Input::JobExecuteAck(ack(7)), Input::JobFinishAck(ack(7))] {
        h.check(T0, ack, vec![]);
    }
    let running = h.running(8, 88, false);
    h.check(T0 + 2 * SECOND_MS, Input::JobFinishAck(ack(8)), vec![]);
    let acked = JobRecord { execute_acked: true, ..running };
    h.check(T0 + 2 * SECOND_MS, Input::JobExecuteAck(ack(8)), vec![note(&acked)]);
    h.check(T0 + 2 * SECOND_MS, Input::JobExecuteAck(ack(8)), vec![]);
    for unknown in
        [Input::NewJobReplyAck(ack(99)), Input::JobExecuteAck(ack(99)), Input::JobFinishAck(ack(99))]
    {
        h.check(T0, unknown, vec![]);
    }
}

// Goal: an exit before the stage-1 barrier is persisted but FINISH waits for
// NEW_JOB_REPLY_ACK, which then releases EXECUTE and FINISH together.
#[test]
fn finish_waits_for_the_reply_ack() {
    let mut h = Harness::connected();
    h.launched(7);
    h.step(T0, spawned(7, 4242, T0));
    let end_ms = T0 + 3 * SECOND_MS;
    let ended = JobRecord {
        exit_status_valid: true,
        wait_status: 256,
        end_time_ms: end_ms,
        rusage: rusage(),
        ..h.record(7)
    };
    h.check(end_ms, exited(7, 256, end_ms), vec![note(&ended)]);
    let acked = JobRecord { pid_acked: true, ..ended };
    h.check(
        end_ms,
        Input::NewJobReplyAck(ack(7)),
        vec![
            note(&acked),
            execute(7, 4242, 1_800_000_000),
            finish(7, 4242, 256, wire::FINISH_NORMAL, end_ms),
        ],
    );
}

// Goal: FINISH does not wait for EXECUTE_ACK (EXECUTE is virtual); both are
// resent until acked; FINISH_ACK ends EXECUTE's resends too; the tombstone is
// removed after the retention period.
#[test]
fn finish_does_not_wait_for_execute_ack_and_dominates() {
    let mut h = Harness::connected();
    let running = h.running(7, 4242, false);
    let end_ms = T0 + 2 * SECOND_MS;
    let ended = JobRecord { exit_status_valid: true, end_time_ms: end_ms, rusage: rusage(), ..running };
    h.check(
        end_ms,
        exited(7, 0, end_ms),
        vec![note(&ended), finish(7, 4242, 0, wire::FINISH_NORMAL, end_ms)],
    );
    h.check(
        end_ms + SECOND_MS,
        Input::Tick,
        vec![execute(7, 4242, 1_800_000_001), finish(7, 4242, 0, wire::FINISH_NORMAL, end_ms)],
    );
    let done = JobRecord { finish_acked: true, ..ended };
    h.check(end_ms + SECOND_MS, Input::JobFinishAck(ack(7)), vec![note(&done)]);
    h.check(end_ms + 10 * SECOND_MS, Input::Tick, vec![]);
    h.check(
        end_ms + 10 * SECOND_MS,
        Input::JobExecuteAck(ack(7)),
        vec![note(&JobRecord { execute_acked: true, ..done })],
    );
    h.check(end_ms + DAY_MS - 1, Input::Tick, vec![]);
    h.check(end_ms + DAY_MS, Input::Tick, vec![Effect::Remove(job(7))]);
    assert!(h.disk.is_empty());
}

// Goal: resends are paced by the resend interval, measured from the last send.
#[test]
fn resend_waits_for_the_interval() {
    let mut h = Harness::connected();
    h.launched(7);
    h.step(T0, spawned(7, 4242, T0));
    h.check(T0 + 999, Input::Tick, vec![]);
    h.check(T0 + SECOND_MS, Input::Tick, vec![started(7, 4242)]);
    h.check(T0 + 1999, Input::Tick, vec![]);
    h.check(T0 + 2 * SECOND_MS, Input::Tick, vec![started(7, 4242)]);
}

// Goal: nothing is sent while disconnected, not even what a state change
// would send; on connection everything eligible goes out at once.
#[test]
fn disconnected_sends_nothing_and_connection_resends_everything() {
    let mut h = Harness::connected();
    h.running(8, 88, false);
    h.check(T0, Input::Disconnected, vec![]);
    h.launched(7);
    let effects = h.step(T0 + SECOND_MS, spawned(7, 77, T0));
    assert_eq!(effects, vec![note(&h.record(7))]);
    h.check(T0 + 10 * SECOND_MS, Input::Tick, vec![]);
    h.check(T0 + 10 * SECOND_MS, Input::Connected, vec![started(7, 77), execute(8, 88, 1_800_000_001)]);
    h.check(T0 + 10 * SECOND_MS + 10, Input::Tick, vec![]);
}

// Goal: a duplicate NEW_JOB never launches again: before the pid it is
// silent, after it the reply is resent, and the tombstone of a finished job
// answers a late duplicate with the old pid; once the tombstone is pruned the
// job id is free again.
#[test]
fn duplicate_new_job_is_answered_from_the_record() {
    let mut h = Harness::connected();
    h.launched(7);
    h.check(T0, new_job(7), vec![]);
    h.step(T0, spawned(7, 4242, T0));
    h.check(T0, new_job(7), vec![started(7, 4242)]);
    h.step(T0, Input::NewJobReplyAck(ack(7)));
    h.step(T0, exited(7, 0, T0 + SECOND_MS));
    h.step(T0, Input::JobFinishAck(ack(7)));
    h.check(T0 + 2 * SECOND_MS, new_job(7), vec![started(7, 4242)]);
    h.check(T0 + SECOND_MS + DAY_MS, Input::Tick, vec![Effect::Remove(job(7))]);
    let effects = h.step(T0 + 2 * DAY_MS, new_job(7));
    assert!(matches!(&effects[..], [Effect::Persist(..), Effect::Launch { .. }]));
}

// Goal: a launch that fails before any pid refuses the job (REFUSE_SETUP,
// back to PEND as LavaLite does); a duplicate of that dispatch gets the
// refusal again, a new dispatch (new dispatch time) is launched afresh.
#[test]
fn spawn_failure_before_pid_refuses_and_a_new_dispatch_relaunches() {
    let mut h = Harness::connected();
    let created = h.launched(7);
    let refusal = Refusal { code: wire::REFUSE_SETUP, message: "no such directory".into(), refused_ms: T0 };
    let refused_record = JobRecord { refusal: Some(refusal), ..created };
    h.check(
        T0,
        Input::SpawnFailed { job: job(7), message: "no such directory".into() },
        vec![persist(&refused_record), refused(7, wire::REFUSE_SETUP, "no such directory")],
    );
    h.check(T0, new_job(7), vec![refused(7, wire::REFUSE_SETUP, "no such directory")]);
    h.check(T0, signal(7, 1, SignalAction::Stop), vec![signal_reply(7, 1, SignalOutcome::NoSuchJob)]);
    h.step(T0, Input::NewJobReplyAck(ack(7)));
    let redispatch = wire::JobSpecs { dispatch_time: 1_800_000_100, dispatch_seq: 2, ..specs(7) };
    let effects = h.step(T0 + 100 * SECOND_MS, new_job_from(redispatch));
    let fresh = h.record(7);
    assert_eq!(effects, removed_then_launched(7, &fresh));
    assert_eq!(fresh.dispatch_seq, 2);
    assert!(fresh.refusal.is_none() && !fresh.pid_acked);
}

// Goal: a pre-execution failure (before any pid) refuses the dispatch with the exit value
// in the code (REFUSE_PRE_EXEC_BASE + exit), persisted before the reply, held signals
// answered NoSuchJob; a duplicate NEW_JOB gets the refusal again, never a launch.
#[test]
fn pre_exec_failure_refuses_with_its_exit_value() {
    let mut h = Harness::connected();
    let created = h.launched(7);
    h.step(T0, signal(7, 1, SignalAction::Stop));
    let held = h.record(7);
    let message = "the pre-execution command exited with 3; the job was not run";
    let code = wire::REFUSE_PRE_EXEC_BASE + 3;
    let refusal = Refusal { code, message: message.into(), refused_ms: T0 };
    let refused_record =
        JobRecord { refusal: Some(refusal), signal_seq_last: held.signal_seq_last, ..created };
    h.check(
        T0,
        Input::PreExecFailed { job: job(7), exit: 3 },
        vec![
            persist(&refused_record),
            refused(7, code, message),
            signal_reply(7, 1, SignalOutcome::NoSuchJob),
        ],
    );
    assert_eq!(wire::pre_exec_exit(code), Some(3));
    h.check(T0, new_job(7), vec![refused(7, code, message)]);
}

// Regression (found by lava-sim): a refusal not yet acked is resent when the
// channel comes back, and mbatchd, having dispatched the job to this host
// again on the registration, takes that late copy for a refusal of the new
// dispatch (NEW_JOB_REPLY carries no dispatch time) and dispatches the job
// elsewhere. If this host launched the new dispatch, the job ran twice.
// Goal: before the refusal's ACK a new dispatch gets the old refusal again
// (it names dispatch 1, so mbatchd acknowledges it without acting) and
// launches nothing; after the ACK it is launched.
#[test]
fn new_dispatch_before_the_refusal_is_acked_is_refused_again() {
    let mut h = Harness::connected();
    let input = Input::NewJob {
        spec: Box::new(JobSpec::try_from(specs(7)).expect("valid")),
        user: Err("no such user".into()),
    };
    h.step(T0, input);
    let message = "user alice: no such user";
    h.check(T0 + SECOND_MS, Input::Disconnected, vec![]);
    h.check(T0 + 2 * SECOND_MS, Input::Connected, vec![refused(7, wire::REFUSE_NO_USER, message)]);
    let redispatch = wire::JobSpecs { dispatch_time: 1_800_000_100, dispatch_seq: 2, ..specs(7) };
    h.check(T0 + 2 * SECOND_MS, new_job_from(redispatch), vec![refused(7, wire::REFUSE_NO_USER, message)]);
    h.step(T0 + 3 * SECOND_MS, Input::NewJobReplyAck(ack(7)));
    let later = wire::JobSpecs { dispatch_time: 1_800_000_200, dispatch_seq: 2, ..specs(7) };
    let effects = h.step(T0 + 200 * SECOND_MS, new_job_from(later));
    let fresh = h.record(7);
    assert_eq!(effects, removed_then_launched(7, &fresh));
}

// Goal (requeue): a NEW_JOB with a higher dispatch number meeting a finished
// run whose FINISH is not acknowledged launches nothing and resends the old
// FINISH (dispatch 1); an ACK naming the new dispatch does not settle the old
// run; the old FINISH's ACK makes it a tombstone, and the next copy of the new
// dispatch starts a fresh run: the old record and directory removed first,
// the signal numbers seen carried over, and every message of the new run
// naming dispatch 2. Stale copies of dispatch 1 are then ignored.
#[test]
fn new_dispatch_after_a_finished_run_waits_for_its_finish_ack_then_runs_afresh() {
    let mut h = Harness::connected();
    h.running(7, 4242, true);
    h.step(T0 + 2 * SECOND_MS, signal(7, 3, SignalAction::Stop));
    h.step(T0 + 3 * SECOND_MS, exited(7, 1 << 8, T0 + 3 * SECOND_MS));
    let requeued = || new_job_from(wire::JobSpecs { dispatch_seq: 2, ..specs(7) });
    let old_finish = finish(7, 4242, 1 << 8, wire::FINISH_NORMAL, T0 + 3 * SECOND_MS);
    h.check(T0 + 4 * SECOND_MS, requeued(), vec![old_finish.clone()]);
    h.check(T0 + 4 * SECOND_MS, Input::JobFinishAck(Ack { job: job(7), dispatch_seq: 2 }), vec![]);
    assert!(!h.record(7).finish_acked);
    h.step(T0 + 4 * SECOND_MS, Input::JobFinishAck(ack(7)));
    let effects = h.step(T0 + 5 * SECOND_MS, requeued());
    let fresh = h.record(7);
    assert_eq!(effects, removed_then_launched(7, &fresh));
    assert_eq!((fresh.dispatch_seq, fresh.pid, fresh.exit_status_valid), (2, -1, false));
    assert_eq!((fresh.signal_seq_last, fresh.suspend_seq_last), (Some(3), Some(3)));
    // A stale copy of dispatch 1 and a late copy of its STOP change nothing.
    h.check(T0 + 5 * SECOND_MS, new_job(7), vec![]);
    h.step(T0 + 6 * SECOND_MS, spawned(7, 5151, T0 + 6 * SECOND_MS));
    h.check(
        T0 + 6 * SECOND_MS,
        signal(7, 3, SignalAction::Stop),
        vec![signal_reply(7, 3, SignalOutcome::Delivered)],
    );
    // The new run's reply names dispatch 2 and only an ACK of dispatch 2 counts.
    let reply = h.record(7).new_job_reply().expect("a reply");
    assert_eq!(reply.dispatch_seq, 2);
    h.check(T0 + 6 * SECOND_MS, Input::NewJobReplyAck(ack(7)), vec![]);
    assert!(!h.record(7).pid_acked);
    let effects = h.step(T0 + 6 * SECOND_MS, Input::NewJobReplyAck(Ack { job: job(7), dispatch_seq: 2 }));
    assert!(h.record(7).pid_acked);
    let Some(Effect::Send(ToMbd::JobExecute(execute))) = effects.last() else {
        panic!("EXECUTE: {effects:?}")
    };
    assert_eq!((execute.dispatch_seq, execute.pid), (2, 5151));
}

// Goal: a NEW_JOB with a higher dispatch number while the old run's process
// still runs (mbatchd would never send one; a confused peer might) launches
// nothing: the old run is not a tombstone.
#[test]
fn new_dispatch_never_launches_beside_a_running_job() {
    let mut h = Harness::connected();
    h.running(7, 4242, true);
    let effects = h.step(T0 + 2 * SECOND_MS, new_job_from(wire::JobSpecs { dispatch_seq: 2, ..specs(7) }));
    assert!(effects.iter().all(|e| matches!(e, Effect::Send(_))), "{effects:?}");
    assert_eq!((h.record(7).dispatch_seq, h.record(7).pid), (1, 4242));
}

// Goal: a start failure after the pid is known finishes the job as EXIT 127
// with FINISH_START_FAILED.
#[test]
fn spawn_failure_after_pid_finishes_the_job() {
    let mut h = Harness::connected();
    let running = h.running(7, 4242, true);
    let now = T0 + 2 * SECOND_MS;
    let ended = JobRecord {
        exit_status_valid: true,
        wait_status: START_FAILED_WAIT_STATUS,
        finish_reason: wire::FINISH_START_FAILED,
        end_time_ms: now,
        ..running
    };
    let expected_finish = Effect::Send(ToMbd::JobFinish(wire::JobFinish {
        job: job(7).to_wire(),
        dispatch_seq: 1,
        pid: 4242,
        wait_status: 127 << 8,
        finish_reason: wire::FINISH_START_FAILED,
        end_time: 1_800_000_002,
        rusage: wire::ResourceUsage::default(),
    }));
    h.check(
        now,
        Input::SpawnFailed { job: job(7), message: "exec failed".into() },
        vec![persist(&ended), expected_finish],
    );
}

// Goal: signals that cannot act are answered at once: unknown job (or job id
// 0), finished job, signal number out of range.
#[test]
fn signals_that_cannot_act_are_answered_at_once() {
    let mut h = Harness::connected();
    h.check(T0, signal(99, 1, SignalAction::Stop), vec![signal_reply(99, 1, SignalOutcome::NoSuchJob)]);
    h.check(T0, signal(0, 1, SignalAction::Stop), vec![signal_reply(0, 1, SignalOutcome::NoSuchJob)]);
    h.running(7, 4242, true);
    for number in [0, 65] {
        let failed = SignalOutcome::Failed(errno::EINVAL);
        h.check(T0, signal(7, 1, SignalAction::Signal(number)), vec![signal_reply(7, 1, failed)]);
    }
    h.step(T0 + 2 * SECOND_MS, exited(7, 0, T0 + 2 * SECOND_MS));
    h.check(
        T0,
        signal(7, 2, SignalAction::Terminate),
        vec![signal_reply(7, 2, SignalOutcome::AlreadyFinished)],
    );
}

// Goal: Stop, Continue and a numbered signal go to the process group, then
// their sequence number is made durable (act, then record), then they are
// answered; a repeated sequence number is answered again without signalling
// again.
#[test]
fn stop_continue_and_numbered_signals_are_delivered_once() {
    let mut h = Harness::connected();
    let running = h.running(7, 4242, true);
    let cases = [
        (1, SignalAction::Stop, SIGSTOP, 1),
        (2, SignalAction::Continue, SIGCONT, 2),
        (3, SignalAction::Signal(10), 10, 2),
    ];
    for (seq, action, number, suspend_seq) in cases {
        let record =
            JobRecord { signal_seq_last: Some(seq), suspend_seq_last: Some(suspend_seq), ..running.clone() };
        h.check(
            T0,
            signal(7, seq, action),
            vec![kill(7, 4242, number), persist(&record), signal_reply(7, seq, SignalOutcome::Delivered)],
        );
    }
    h.check(T0, signal(7, 1, SignalAction::Stop), vec![signal_reply(7, 1, SignalOutcome::Delivered)]);
}

// Goal: a shell that carries out the groups of `commit_groups` sends a signal before
// it commits the record saying it was handled (act, then record), even when other jobs'
// records share the batch; the Persists before a Kill still share one commit.
#[test]
fn commit_groups_never_record_a_signal_before_sending_it() {
    let mut h = Harness::connected();
    let running = h.running(7, 4242, true);
    let mut effects = Vec::new();
    h.sbd.step(T0, new_job(8), &mut effects);
    h.sbd.step(T0, signal(7, 1, SignalAction::Stop), &mut effects);
    let groups = lava_sbd::commit_groups(effects.clone());
    assert_eq!(groups.concat(), effects, "groups keep every effect, in order");
    let kill_group = groups
        .iter()
        .position(|group| group.iter().any(|effect| matches!(effect, Effect::Kill { .. })))
        .expect("the stop is sent");
    assert!(matches!(groups[kill_group].last(), Some(Effect::Kill { .. })), "a Kill ends its group");
    let stopped = JobRecord { signal_seq_last: Some(1), suspend_seq_last: Some(1), ..running };
    assert!(
        groups[kill_group + 1..].iter().flatten().any(|effect| *effect == persist(&stopped)),
        "the record of the handled signal is committed after the Kill: {groups:?}"
    );
    assert!(
        groups[kill_group]
            .iter()
            .any(|effect| matches!(effect, Effect::Persist(persisted, _) if *persisted == job(8))),
        "the new job's record is committed before the Kill, with the group before it"
    );
}

// Goal: Terminate runs LSF's sequence: SIGINT now, SIGTERM after the
// terminate interval, SIGKILL after twice the interval, each step persisted
// right after its signal;
// a repeated Terminate joins it; the exit reports FINISH_KILLED.
#[test]
fn terminate_runs_the_lsf_kill_sequence() {
    let mut h = Harness::connected();
    let running = h.running(7, 4242, true);
    let t = T0 + 5 * SECOND_MS;
    let sequence = KillSequence { reason: wire::FINISH_KILLED, started_ms: t, n_signals_sent: 1 };
    let killing = JobRecord { signal_seq_last: Some(1), kill: Some(sequence), ..running };
    h.check(
        t,
        signal(7, 1, SignalAction::Terminate),
        vec![kill(7, 4242, SIGINT), persist(&killing), signal_reply(7, 1, SignalOutcome::Delivered)],
    );
    h.check(t, signal(7, 1, SignalAction::Terminate), vec![signal_reply(7, 1, SignalOutcome::Delivered)]);
    let joined = JobRecord { signal_seq_last: Some(2), ..killing.clone() };
    h.check(
        t,
        signal(7, 2, SignalAction::Terminate),
        vec![persist(&joined), signal_reply(7, 2, SignalOutcome::Delivered)],
    );
    h.check(t + 10 * SECOND_MS - 1, Input::Tick, vec![]);
    let term = JobRecord { kill: Some(KillSequence { n_signals_sent: 2, ..sequence }), ..joined };
    h.check(t + 10 * SECOND_MS, Input::Tick, vec![kill(7, 4242, SIGTERM), persist(&term)]);
    h.check(t + 20 * SECOND_MS - 1, Input::Tick, vec![]);
    let sigkill = JobRecord { kill: Some(KillSequence { n_signals_sent: 3, ..sequence }), ..term };
    h.check(t + 20 * SECOND_MS, Input::Tick, vec![kill(7, 4242, SIGKILL), persist(&sigkill)]);
    h.check(t + 60 * SECOND_MS, Input::Tick, vec![]);
    let end_ms = t + 21 * SECOND_MS;
    let effects = h.step(end_ms, exited(7, SIGKILL, end_ms));
    assert_eq!(effects[1], finish(7, 4242, SIGKILL, wire::FINISH_KILLED, end_ms));
}

// Goal: signals arriving before the pid are held durably (a duplicate stays
// silent) and delivered and answered right after Spawned: the pid is made
// durable with the signals still held, then they are sent, then the record
// without them is made durable, then they are answered; the holding list is
// bounded.
#[test]
fn signals_before_the_pid_wait_for_spawned() {
    let mut h = Harness::connected();
    let created = h.launched(7);
    let pending = vec![
        PendingSignal { signal_seq: 1, action: SignalAction::Stop },
        PendingSignal { signal_seq: 2, action: SignalAction::Terminate },
    ];
    h.step(T0, signal(7, 1, SignalAction::Stop));
    let holding = JobRecord { signal_seq_last: Some(2), pending_signals: pending, ..created };
    h.check(T0, signal(7, 2, SignalAction::Terminate), vec![persist(&holding)]);
    h.check(T0, signal(7, 2, SignalAction::Terminate), vec![]);
    let t = T0 + SECOND_MS;
    let sequence = KillSequence { reason: wire::FINISH_KILLED, started_ms: t, n_signals_sent: 1 };
    let with_pid = JobRecord { pid: 4242, pgid: 4242, exec_time_ms: t, ..holding };
    let delivered = JobRecord {
        pending_signals: vec![],
        kill: Some(sequence),
        suspend_seq_last: Some(1),
        ..with_pid.clone()
    };
    h.check(
        t,
        spawned(7, 4242, t),
        vec![
            note(&with_pid),
            started(7, 4242),
            kill(7, 4242, SIGSTOP),
            kill(7, 4242, SIGINT),
            persist(&delivered),
            signal_reply(7, 1, SignalOutcome::Delivered),
            signal_reply(7, 2, SignalOutcome::Delivered),
        ],
    );

    h.launched(8);
    let max = u32::try_from(PENDING_SIGNALS_MAX).expect("small");
    for seq in 1..=max {
        h.step(T0, signal(8, seq, SignalAction::Signal(10)));
    }
    let full = SignalOutcome::Failed(errno::EAGAIN);
    h.check(T0, signal(8, max + 1, SignalAction::Signal(10)), vec![signal_reply(8, max + 1, full)]);
}

// Goal: the run limit (-W) starts the kill sequence with FINISH_RUN_LIMIT,
// counted from the exec time.
#[test]
fn run_limit_starts_the_kill_sequence() {
    let mut h = Harness::connected();
    h.step(T0, new_job_from(wire::JobSpecs { run_limit_s: 60, ..specs(7) }));
    h.step(T0, spawned(7, 4242, T0));
    h.step(T0, Input::NewJobReplyAck(ack(7)));
    h.step(T0, Input::JobExecuteAck(ack(7)));
    h.check(T0 + 60 * SECOND_MS - 1, Input::Tick, vec![]);
    let sequence =
        KillSequence { reason: wire::FINISH_RUN_LIMIT, started_ms: T0 + 60 * SECOND_MS, n_signals_sent: 1 };
    let killing = JobRecord { kill: Some(sequence), ..h.record(7) };
    h.check(T0 + 60 * SECOND_MS, Input::Tick, vec![kill(7, 4242, SIGINT), persist(&killing)]);
    let end_ms = T0 + 61 * SECOND_MS;
    let effects = h.step(end_ms, exited(7, SIGINT, end_ms));
    assert_eq!(effects[1], finish(7, 4242, SIGINT, wire::FINISH_RUN_LIMIT, end_ms));
}

// Goal: a measurement over a job-wide limit starts the kill sequence once, with that
// limit's finish reason: -M (resident memory), the queue's CPULIMIT (whose kill starts with
// SIGXCPU), SWAPLIMIT (virtual memory), PROCESSLIMIT and THREADLIMIT; a measurement at a
// limit, or of an unknown job, does nothing.
// Method: one job per limit; each measured at its limit, then just over it, then over it
// again.
#[test]
fn job_wide_limits_start_the_kill_sequence() {
    let limits = |limits: wire::ResourceLimits| wire::JobSpecs { limits, ..specs(7) };
    let cases: [(wire::JobSpecs, UsageSample, UsageSample, u32, i32); 5] = [
        (
            wire::JobSpecs { mem_limit_kb: 1024, ..specs(7) },
            UsageSample { rss_kb: 1024, ..UsageSample::default() },
            UsageSample { rss_kb: 1025, ..UsageSample::default() },
            wire::FINISH_MEM_LIMIT,
            SIGINT,
        ),
        (
            limits(wire::ResourceLimits { cpu_s: Some(60), ..Default::default() }),
            UsageSample { cpu_ms: 60_000, ..UsageSample::default() },
            UsageSample { cpu_ms: 60_001, ..UsageSample::default() },
            wire::FINISH_CPU_LIMIT,
            SIGXCPU,
        ),
        (
            limits(wire::ResourceLimits { swap_kb: Some(4096), ..Default::default() }),
            UsageSample { vm_kb: 4096, ..UsageSample::default() },
            UsageSample { vm_kb: 4097, ..UsageSample::default() },
            wire::FINISH_SWAP_LIMIT,
            SIGINT,
        ),
        (
            limits(wire::ResourceLimits { processes: Some(3), ..Default::default() }),
            UsageSample { processes: 3, ..UsageSample::default() },
            UsageSample { processes: 4, ..UsageSample::default() },
            wire::FINISH_PROCESS_LIMIT,
            SIGINT,
        ),
        (
            limits(wire::ResourceLimits { threads: Some(8), ..Default::default() }),
            UsageSample { threads: 8, ..UsageSample::default() },
            UsageSample { threads: 9, ..UsageSample::default() },
            wire::FINISH_THREAD_LIMIT,
            SIGINT,
        ),
    ];
    for (specs, at, over, reason, first_signal) in cases {
        let mut h = Harness::connected();
        h.step(T0, new_job_from(specs));
        h.step(T0, spawned(7, 4242, T0));
        h.check(T0, Input::Usage { job: job(7), usage: at }, vec![]);
        h.check(T0, Input::Usage { job: job(99), usage: over }, vec![]);
        let sequence = KillSequence { reason, started_ms: T0, n_signals_sent: 1 };
        let killing = JobRecord { kill: Some(sequence), ..h.record(7) };
        h.check(
            T0,
            Input::Usage { job: job(7), usage: over },
            vec![kill(7, 4242, first_signal), persist(&killing)],
        );
        h.check(T0, Input::Usage { job: job(7), usage: over }, vec![]);
    }
}

// Goal: the kill over a CPU limit is LSF's: SIGXCPU, then SIGINT, SIGTERM and SIGKILL each
// one terminate interval later, and the job ends with FINISH_CPU_LIMIT (TERM_CPULIMIT).
#[test]
fn a_cpu_limit_kill_sends_sigxcpu_first() {
    let mut h = Harness::connected();
    let cpu = wire::ResourceLimits { cpu_s: Some(1), ..Default::default() };
    h.step(T0, new_job_from(wire::JobSpecs { limits: cpu, ..specs(7) }));
    h.step(T0, spawned(7, 4242, T0));
    h.step(T0, Input::NewJobReplyAck(ack(7)));
    h.step(T0, Input::JobExecuteAck(ack(7)));
    let over = UsageSample { cpu_ms: 1001, ..UsageSample::default() };
    h.step(T0, Input::Usage { job: job(7), usage: over });
    let interval_ms = 10 * SECOND_MS;
    for (n, signal) in [(1u32, SIGINT), (2, SIGTERM), (3, SIGKILL)] {
        h.check(T0 + u64::from(n) * interval_ms - 1, Input::Tick, vec![]);
        let sent = KillSequence { reason: wire::FINISH_CPU_LIMIT, started_ms: T0, n_signals_sent: n + 1 };
        let record = JobRecord { kill: Some(sent), ..h.record(7) };
        h.check(T0 + u64::from(n) * interval_ms, Input::Tick, vec![kill(7, 4242, signal), persist(&record)]);
    }
    h.check(T0 + 10 * interval_ms, Input::Tick, vec![]);
    let end_ms = T0 + 31 * SECOND_MS;
    let effects = h.step(end_ms, exited(7, SIGKILL, end_ms));
    assert_eq!(effects[1], finish(7, 4242, SIGKILL, wire::FINISH_CPU_LIMIT, end_ms));
}

// Goal: a job whose process the kernel ended at its own CPU limit (RLIMIT_CPU: SIGXCPU)
// ends with FINISH_CPU_LIMIT when it had one, and as any other signal's end without; the
// record keeps the snapshot's job starter, niceness and limits.
#[test]
fn death_by_sigxcpu_is_the_cpu_limit_only_with_one() {
    for (cpu_s, reason) in [(Some(60), wire::FINISH_CPU_LIMIT), (None, wire::FINISH_NORMAL)] {
        let mut h = Harness::connected();
        let limits = wire::ResourceLimits { cpu_s, core_kb: Some(0), ..Default::default() };
        let job_starter = "/usr/bin/time %USRCMD".to_owned();
        h.step(
            T0,
            new_job_from(wire::JobSpecs { limits, nice: 5, job_starter: job_starter.clone(), ..specs(7) }),
        );
        assert_eq!(h.record(7).execution, lava_sbd::Execution { nice: 5, limits, job_starter });
        h.step(T0, spawned(7, 4242, T0));
        h.step(T0, Input::NewJobReplyAck(ack(7)));
        h.step(T0, Input::JobExecuteAck(ack(7)));
        let end_ms = T0 + 61 * SECOND_MS;
        let effects = h.step(end_ms, exited(7, SIGXCPU, end_ms));
        assert_eq!(effects[1], finish(7, 4242, SIGXCPU, reason, end_ms));
    }
}

// Goal: after a restart, Connected resends exactly what the durable facts make
// eligible, in job order; tombstones and jobs without pid send nothing, and
// the job without pid is offered for adoption.
#[test]
fn restart_resends_exactly_the_eligible_messages() {
    let mut h = Harness::connected();
    h.launched(1); // awaiting spawn: nothing to send
    h.launched(2);
    h.step(T0, spawned(2, 22, T0)); // reply due
    h.running(3, 33, false); // EXECUTE due
    h.running(4, 44, true);
    h.step(T0 + 2 * SECOND_MS, exited(4, 0, T0 + 2 * SECOND_MS)); // FINISH due
    h.running(5, 55, true);
    h.step(T0 + 2 * SECOND_MS, exited(5, 0, T0 + 2 * SECOND_MS));
    h.step(T0 + 2 * SECOND_MS, Input::JobFinishAck(ack(5))); // tombstone
    h.launched(6);
    h.step(T0, Input::SpawnFailed { job: job(6), message: "no cwd".into() }); // refusal due
    h.restart();
    assert_eq!(h.sbd.awaiting_adoption().collect::<Vec<_>>(), vec![job(1)]);
    h.check(T0 + 3 * SECOND_MS, Input::Tick, vec![]); // not connected yet
    h.check(
        T0 + 3 * SECOND_MS,
        Input::Connected,
        vec![
            started(2, 22),
            execute(3, 33, 1_800_000_001),
            finish(4, 44, 0, wire::FINISH_NORMAL, T0 + 2 * SECOND_MS),
            refused(6, wire::REFUSE_SETUP, "no cwd"),
        ],
    );
}

// Goal: restart adoption of a job whose pid was never recorded: a shepherd
// found by the shell is adopted with Spawned (no second launch); no shepherd
// means the job never started, and NotLaunched launches it.
#[test]
fn restart_adopts_or_relaunches_a_job_without_pid() {
    let mut h = Harness::connected();
    h.launched(1);
    h.launched(2);
    h.restart();
    h.step(T0, Input::Connected);
    assert_eq!(h.sbd.awaiting_adoption().collect::<Vec<_>>(), vec![job(1), job(2)]);
    let adopted = JobRecord { pid: 11, pgid: 11, exec_time_ms: T0, ..h.record(1) };
    h.check(T0 + SECOND_MS, spawned(1, 11, T0), vec![note(&adopted), started(1, 11)]);
    let run_spec = h.record(2).run_spec.clone();
    h.check(
        T0 + SECOND_MS,
        Input::NotLaunched { job: job(2) },
        vec![Effect::Launch { job: job(2), run_spec }],
    );
    assert_eq!(h.sbd.awaiting_adoption().count(), 0);
}

// Goal: a restart in the middle of a kill resumes the sequence where the
// durable record left it.
#[test]
fn restart_mid_kill_resumes_the_sequence() {
    let mut h = Harness::connected();
    h.running(7, 4242, true);
    h.step(T0 + 5 * SECOND_MS, signal(7, 1, SignalAction::Terminate));
    h.restart();
    h.step(T0 + 6 * SECOND_MS, Input::Connected);
    let effects = h.step(T0 + 15 * SECOND_MS, Input::Tick);
    assert_eq!(effects[0], kill(7, 4242, SIGTERM));
    assert!(matches!(effects[1], Effect::Persist(..)));
}

// Regression (found by lava-sim): mbatchd keeps a kill pending beside newer
// STOP and CONT intents (a kill is never superseded), so after its first copy
// was lost its resend arrived after them; being below the last sequence
// number handled, it was answered Delivered and never sent, and the job ran
// on. Goal: a kill acts whatever its sequence number, unless a kill is under
// way; an older STOP after a newer CONT still does not act.
#[test]
fn kill_resent_after_newer_stop_and_continue_was_never_sent() {
    let mut h = Harness::connected();
    h.running(7, 4242, true);
    h.step(T0, signal(7, 2, SignalAction::Stop));
    h.step(T0, signal(7, 3, SignalAction::Continue));
    let effects = h.step(T0 + SECOND_MS, signal(7, 1, SignalAction::Terminate));
    assert_eq!(effects[0], kill(7, 4242, SIGINT));
    let effects = h.step(T0 + SECOND_MS, signal(7, 1, SignalAction::Terminate));
    assert_eq!(effects, vec![signal_reply(7, 1, SignalOutcome::Delivered)], "a kill under way is joined");
    h.check(
        T0 + SECOND_MS,
        signal(7, 2, SignalAction::Stop),
        vec![signal_reply(7, 2, SignalOutcome::Delivered)],
    );
}

// Regression (found by lava-sim): the record saying a signal was handled was
// persisted before the Kill. A crash between the two left a CONT recorded but
// never sent; mbatchd's resend was then answered Delivered without acting, and
// the job stayed stopped for ever. Goal: a crash between the Kill and the
// Persist repeats the signal on the resend; a crash after the Persist does not.
// Method: keep the disk as it was before the step's Persist, restart from it.
#[test]
fn regression_signal_recorded_before_it_was_sent_was_lost_in_a_crash() {
    let mut h = Harness::connected();
    h.running(7, 4242, true);
    h.step(T0, signal(7, 1, SignalAction::Stop));
    let before = h.disk.clone();
    let effects = h.step(T0 + SECOND_MS, signal(7, 2, SignalAction::Continue));
    assert_eq!(effects[0], kill(7, 4242, SIGCONT), "the signal is sent before it is recorded");
    h.disk = before;
    h.restart();
    h.step(T0 + 2 * SECOND_MS, Input::Connected);
    let again = h.step(T0 + 3 * SECOND_MS, signal(7, 2, SignalAction::Continue));
    assert_eq!(again[0], kill(7, 4242, SIGCONT), "unrecorded, it is sent again");
    h.restart();
    h.step(T0 + 4 * SECOND_MS, Input::Connected);
    h.check(
        T0 + 5 * SECOND_MS,
        signal(7, 2, SignalAction::Continue),
        vec![signal_reply(7, 2, SignalOutcome::Delivered)],
    );
}

// Goal: held signals a crash kept from their delivery (the pid was durable,
// the record after the delivery was not) are delivered by the next Tick.
#[test]
fn held_signals_left_by_a_crash_are_delivered_on_tick() {
    let mut h = Harness::connected();
    let created = h.launched(7);
    h.step(T0, signal(7, 1, SignalAction::Stop));
    let held = vec![PendingSignal { signal_seq: 1, action: SignalAction::Stop }];
    let with_pid = JobRecord {
        pid: 4242,
        pgid: 4242,
        exec_time_ms: T0,
        signal_seq_last: Some(1),
        pending_signals: held,
        ..created
    };
    h.step(T0, spawned(7, 4242, T0));
    h.disk.insert(job(7), with_pid.clone());
    h.restart();
    h.step(T0 + SECOND_MS, Input::Connected);
    let delivered = JobRecord { pending_signals: vec![], suspend_seq_last: Some(1), ..with_pid };
    let effects = h.step(T0 + 2 * SECOND_MS, Input::Tick);
    assert_eq!(
        effects[..3],
        [kill(7, 4242, SIGSTOP), persist(&delivered), signal_reply(7, 1, SignalOutcome::Delivered)]
    );
}

// Goal: past records_max a new job is refused (REFUSE_HOST) without a record
// while every record is live; once tombstones exist, the oldest one makes room
// instead (Remove, then the new job's record and launch).
#[test]
fn full_host_refuses_without_a_record_or_evicts_its_oldest_tombstone() {
    let config = Config { records_max: 2, ..Config::default() };
    let mut h = Harness { sbd: Sbd::new(config), disk: BTreeMap::new() };
    h.step(T0, Input::Connected);
    h.launched(1);
    h.launched(2);
    let message = "sbatchd holds 2 job records, its limit";
    h.check(T0, new_job(3), vec![refused(3, wire::REFUSE_HOST, message)]);
    assert!(h.sbd.job(job(3)).is_none());
    // Jobs 2 then 1 run and end, their FINISH acked: two tombstones, 2 the older.
    for (id, end_ms) in [(2, T0 + SECOND_MS), (1, T0 + 2 * SECOND_MS)] {
        h.step(end_ms, spawned(id, 100 + i32::try_from(id).expect("small"), end_ms));
        h.step(end_ms, Input::NewJobReplyAck(ack(id)));
        h.step(end_ms, exited(id, 0, end_ms));
        h.step(end_ms, Input::JobFinishAck(ack(id)));
    }
    let effects = h.step(T0 + 3 * SECOND_MS, new_job(3));
    let created = h.record(3);
    assert_eq!(effects, removed_then_launched(2, &created));
    assert!(h.sbd.job(job(2)).is_none() && h.sbd.job(job(1)).is_some());
}

// Goal: while the shell says the disk is full, a NEW_JOB for a new run is refused
// (REFUSE_HOST, the reason, no record); a duplicate NEW_JOB of a job already on the
// host is still answered from its record and the job's own life goes on; once there
// is room, a new job is taken.
#[test]
fn a_full_disk_refuses_new_runs_only() {
    let mut h = Harness::connected();
    let running = h.launched(1);
    h.step(T0, Input::DiskFull { full: true });
    h.check(T0, new_job(2), vec![refused(2, wire::REFUSE_HOST, lava_sbd::DISK_FULL_REFUSAL)]);
    assert!(h.sbd.job(job(2)).is_none(), "no record for a refused new run");
    let again = h.step(T0, new_job(1));
    assert!(again.iter().all(|effect| !matches!(effect, Effect::Persist(..) | Effect::Launch { .. })));
    assert_eq!(h.record(1), running, "the job on the host is untouched");
    h.step(T0 + SECOND_MS, spawned(1, 101, T0 + SECOND_MS));
    assert!(h.sbd.job(job(1)).is_some_and(|record| record.pid == 101));
    h.step(T0 + SECOND_MS, Input::DiskFull { full: false });
    let effects = h.step(T0 + SECOND_MS, new_job(2));
    assert!(effects.iter().any(|effect| matches!(effect, Effect::Launch { .. })), "{effects:?}");
}

// Goal: restore refuses a damaged record and two records of one job, naming
// the job.
#[test]
fn restore_refuses_broken_records() {
    let mut h = Harness::connected();
    let record = h.launched(7);
    let broken = JobRecord { execute_acked: true, ..record.clone() };
    let err = Sbd::restore(Config::default(), [broken]).expect_err("execute_acked without pid_acked");
    assert_eq!(err.job, job(7));
    let mut relative = record.clone();
    relative.run_spec.exec_cwd = "work".into();
    assert!(Sbd::restore(Config::default(), [relative]).is_err());
    assert!(Sbd::restore(Config::default(), [record.clone(), record]).is_err());
}

// Goal: the effect-order checker itself catches a report sent before the
// Persist of its fact, and a launch without a durable record.
#[test]
fn effect_checker_catches_sends_before_persists() {
    let mut h = Harness::connected();
    let created = h.launched(7);
    let with_pid = JobRecord { pid: 5, pgid: 5, exec_time_ms: T0, ..created.clone() };
    let mut disk = BTreeMap::from([(job(7), created.clone())]);
    assert!(invariants::check_effects(&mut disk, &[started(7, 5), persist(&with_pid)]).is_err());
    let mut disk = BTreeMap::from([(job(7), created.clone())]);
    assert!(invariants::check_effects(&mut disk, &[persist(&with_pid), started(7, 5)]).is_ok());
    // A Note may add the pid, ACK flags or the exit; nothing else, and never a new record.
    let mut disk = BTreeMap::from([(job(7), created.clone())]);
    assert!(invariants::check_effects(&mut disk, &[note(&with_pid), started(7, 5)]).is_ok());
    let refused = JobRecord {
        refusal: Some(lava_sbd::Refusal { code: 1, message: "x".into(), refused_ms: T0 }),
        ..created.clone()
    };
    let mut disk = BTreeMap::from([(job(7), created.clone())]);
    assert!(invariants::check_effects(&mut disk, &[note(&refused)]).is_err());
    let signalled = JobRecord { signal_seq_last: Some(3), ..with_pid.clone() };
    let mut disk = BTreeMap::from([(job(7), with_pid.clone())]);
    assert!(invariants::check_effects(&mut disk, &[note(&signalled)]).is_err());
    assert!(invariants::check_effects(&mut BTreeMap::new(), &[note(&created)]).is_err());
    let launch = Effect::Launch { job: job(7), run_spec: created.run_spec.clone() };
    assert!(invariants::check_effects(&mut BTreeMap::new(), &[launch]).is_err());
}

// Goal (regression, found by the property test): an older signal overtaken
// by a newer one while the pid is unknown was answered Delivered without
// being delivered. Now it is held too, in sequence order, and both are
// delivered and answered after Spawned.
#[test]
fn regression_overtaken_signal_before_pid_was_answered_without_delivery() {
    let mut h = Harness::connected();
    let created = h.launched(7);
    h.step(T0, signal(7, 2, SignalAction::Continue));
    let held = vec![
        PendingSignal { signal_seq: 1, action: SignalAction::Stop },
        PendingSignal { signal_seq: 2, action: SignalAction::Continue },
    ];
    let holding = JobRecord { signal_seq_last: Some(2), pending_signals: held, ..created };
    h.check(T0, signal(7, 1, SignalAction::Stop), vec![persist(&holding)]);
    let effects = h.step(T0, spawned(7, 4242, T0));
    assert_eq!(effects[2..4], [kill(7, 4242, SIGSTOP), kill(7, 4242, SIGCONT)]);
    assert!(matches!(effects[4], Effect::Persist(..)));
    assert_eq!(
        effects[5..],
        [signal_reply(7, 1, SignalOutcome::Delivered), signal_reply(7, 2, SignalOutcome::Delivered)]
    );
    // Once the process exists an overtaken signal is not acted on.
    h.step(T0, signal(7, 4, SignalAction::Continue));
    h.check(T0, signal(7, 3, SignalAction::Stop), vec![signal_reply(7, 3, SignalOutcome::Delivered)]);
}

// Goal: the record is a durable format: every record a full lifecycle
// persists (created, spawned, held signals, kill under way, exited, acked,
// refused) decodes back from XDR to the same value, validated on the way in.
#[test]
fn every_persisted_record_round_trips_through_xdr() {
    let mut h = Harness::connected();
    let mut effects = h.step(T0, new_job(7));
    effects.extend(h.step(T0, signal(7, 1, SignalAction::Terminate)));
    effects.extend(h.step(T0, spawned(7, 4242, T0)));
    effects.extend(h.step(T0, Input::NewJobReplyAck(ack(7))));
    effects.extend(h.step(T0 + 10 * SECOND_MS, Input::Tick));
    effects.extend(h.step(T0 + 11 * SECOND_MS, exited(7, SIGTERM, T0 + 11 * SECOND_MS)));
    effects.extend(h.step(T0 + 11 * SECOND_MS, Input::JobFinishAck(ack(7))));
    effects.extend(h.step(
        T0,
        Input::NewJob {
            spec: Box::new(JobSpec::try_from(specs(8)).expect("valid")),
            user: Err("gone".into()),
        },
    ));
    let records: Vec<JobRecord> = effects
        .into_iter()
        .filter_map(|e| if let Effect::Persist(_, r) | Effect::Note(_, r) = e { Some(r) } else { None })
        .collect();
    // Spawned persists twice: the pid with the held Terminate, then after it.
    assert_eq!(records.len(), 9);
    for record in records {
        let bytes = lava_xdr::to_bytes(&record).expect("encodes");
        let decoded: JobRecord = lava_xdr::from_bytes(&bytes, &lava_xdr::Limits::DEFAULT).expect("decodes");
        assert_eq!(decoded, record);
    }
}

// Goal: after mbatchd's job ids wrap, a NEW_JOB for a new job with the id of an
// old one (another submission time) is never answered from the old job's tombstone
// (which used to report the old run as the new job's start): the tombstone is
// removed alone, and mbatchd's resent NEW_JOB starts the new job afresh; an old run
// still waiting for its FINISH ACK is only resent.
#[test]
fn a_reused_job_id_is_never_answered_from_the_old_jobs_record() {
    let mut h = Harness::connected();
    h.running(7, 4242, true);
    h.step(T0 + 2 * SECOND_MS, exited(7, 0, T0 + 2 * SECOND_MS));
    let newer = || new_job_from(wire::JobSpecs { submit_time: 1_799_999_500, ..specs(7) });
    let old_finish = finish(7, 4242, 0, wire::FINISH_NORMAL, T0 + 2 * SECOND_MS);
    h.check(T0 + 3 * SECOND_MS, newer(), vec![old_finish]);
    h.step(T0 + 3 * SECOND_MS, Input::JobFinishAck(ack(7)));
    assert!(h.record(7).is_tombstone());
    h.check(T0 + 4 * SECOND_MS, newer(), vec![Effect::Remove(job(7))]);
    assert!(h.sbd.job(job(7)).is_none());
    let effects = h.step(T0 + 9 * SECOND_MS, newer());
    let fresh = h.record(7);
    assert_eq!(
        effects,
        vec![persist(&fresh), Effect::Launch { job: job(7), run_spec: fresh.run_spec.clone() }]
    );
    assert_eq!((fresh.run_spec.submit_time_s, fresh.pid, fresh.signal_seq_last), (1_799_999_500, -1, None));
    h.restart();
    assert_eq!(h.record(7).run_spec.submit_time_s, 1_799_999_500);
}

/// Job `id` as `bsub -Is` submits it, running with `pid` since T0 + 1 s, reply acked.
fn interactive_running(h: &mut Harness, id: u32, pid: i32) -> JobRecord {
    let flags = wire::submit_flags::INTERACTIVE | wire::submit_flags::PTY | wire::submit_flags::PTY_SHELL;
    h.step(T0, new_job_from(wire::JobSpecs { file_flags: flags, ..specs(id) }));
    assert_eq!(h.record(id).interactive, flags);
    assert!(h.record(id).is_interactive() && h.record(id).wants_pty());
    h.step(T0 + SECOND_MS, spawned(id, pid, T0 + SECOND_MS));
    h.step(T0 + SECOND_MS, Input::NewJobReplyAck(ack(id)));
    h.step(T0 + SECOND_MS, Input::JobExecuteAck(ack(id)));
    h.record(id)
}

fn terminal_kill(record: &JobRecord, now_ms: u64) -> JobRecord {
    let kill = KillSequence { reason: wire::FINISH_KILLED, started_ms: now_ms, n_signals_sent: 1 };
    JobRecord { kill: Some(kill), ..record.clone() }
}

// Goal: a batch job is never interactive; an interactive job whose terminal attached and
// then went away is killed at once, starting with SIGHUP (a terminal's hangup), the kill
// durable after its first signal, and then ends EXIT through the ordinary kill sequence.
#[test]
fn a_lost_terminal_kills_the_interactive_job() {
    let mut h = Harness::connected();
    let batch = h.running(1, 4000, true);
    assert!(!batch.is_interactive() && batch.interactive == 0);
    // A batch job ignores terminal inputs.
    h.check(T0 + 2 * SECOND_MS, Input::TerminalAttached { job: job(1) }, vec![]);
    h.check(T0 + 2 * SECOND_MS, Input::TerminalLost { job: job(1) }, vec![]);
    let running = interactive_running(&mut h, 2, 4242);
    h.check(T0 + 2 * SECOND_MS, Input::TerminalAttached { job: job(2) }, vec![]);
    assert!(h.sbd.is_attached(job(2)));
    let killed = terminal_kill(&running, T0 + 3 * SECOND_MS);
    h.check(
        T0 + 3 * SECOND_MS,
        Input::TerminalLost { job: job(2) },
        vec![kill(2, 4242, lava_sbd::signal::SIGHUP), persist(&killed)],
    );
    assert!(!h.sbd.is_attached(job(2)));
    // A second loss changes nothing; the sequence goes on to SIGTERM after the interval.
    h.check(T0 + 3 * SECOND_MS, Input::TerminalLost { job: job(2) }, vec![]);
    let effects = h.step(T0 + 13 * SECOND_MS, Input::Tick);
    assert!(effects.contains(&kill(2, 4242, SIGTERM)), "{effects:?}");
}

// Goal: an interactive job whose terminal never attaches is killed once ATTACH_WAIT_MS has
// passed since its start (its bsub is gone), not before; one that attached is not.
#[test]
fn an_interactive_job_never_attached_is_killed_after_the_wait() {
    let mut h = Harness::connected();
    let lonely = interactive_running(&mut h, 3, 5000);
    interactive_running(&mut h, 4, 5001);
    h.step(T0 + 2 * SECOND_MS, Input::TerminalAttached { job: job(4) });
    let just_before = T0 + SECOND_MS + lava_sbd::ATTACH_WAIT_MS - 1;
    let effects = h.step(just_before, Input::Tick);
    assert!(!effects.iter().any(|e| matches!(e, Effect::Kill { .. })), "{effects:?}");
    let due = T0 + SECOND_MS + lava_sbd::ATTACH_WAIT_MS;
    let effects = h.step(due, Input::Tick);
    let killed = terminal_kill(&lonely, due);
    assert_eq!(&effects[..2], &[kill(3, 5000, lava_sbd::signal::SIGHUP), persist(&killed)]);
    assert!(!effects.iter().any(|e| matches!(e, Effect::Kill { job: j, .. } if *j == job(4))), "{effects:?}");
}

// Goal: after an sbatchd restart an interactive job that was running is killed at the first
// tick (its terminal went with the old sbatchd) and ends EXIT; it is never run again. One
// that had never been launched is launched once, and may still attach.
#[test]
fn a_restart_kills_running_interactive_jobs_and_launches_unstarted_ones_once() {
    let mut h = Harness::connected();
    let running = interactive_running(&mut h, 5, 6000);
    h.step(T0 + 2 * SECOND_MS, Input::TerminalAttached { job: job(5) });
    let flags = wire::submit_flags::INTERACTIVE;
    h.step(T0, new_job_from(wire::JobSpecs { file_flags: flags, ..specs(6) }));
    h.restart();
    assert!(!h.sbd.is_attached(job(5)));
    h.step(T0 + 3 * SECOND_MS, Input::NotLaunched { job: job(6) });
    let effects = h.step(T0 + 3 * SECOND_MS, Input::Tick);
    let killed = terminal_kill(&running, T0 + 3 * SECOND_MS);
    assert_eq!(&effects[..2], &[kill(5, 6000, lava_sbd::signal::SIGHUP), persist(&killed)]);
    assert!(!effects.iter().any(|e| matches!(e, Effect::Kill { job: j, .. } if *j == job(6))), "{effects:?}");
    assert!(!effects.iter().any(|e| matches!(e, Effect::Launch { .. })), "{effects:?}");
    // The killed job ends EXIT with FINISH_KILLED.
    h.step(T0 + 4 * SECOND_MS, Input::Connected);
    let effects = h.step(T0 + 4 * SECOND_MS, exited(5, lava_sbd::signal::SIGHUP, T0 + 4 * SECOND_MS));
    assert!(effects.contains(&finish(
        5,
        6000,
        lava_sbd::signal::SIGHUP,
        wire::FINISH_KILLED,
        T0 + 4 * SECOND_MS
    )));
}

// Goal: a task grant (blaunch) is given only for a job launched and not ended on this host, to
// its user or root, for a host of its allocation; each refusal names its reason. Method: ask
// for job 9 before it exists, once launched (its pid not yet reported), while running (as
// alice, root, bob; for node1 and for a host not allocated), and after its exit.
#[test]
fn task_grants_follow_the_job_its_user_and_its_hosts() {
    use lava_sbd::tasks::{TaskGrantFacts, TaskRefusal, may_start_task};
    let mut h = Harness::connected();
    let ask = |h: &Harness, uid: u32, host: &str| may_start_task(h.sbd.job(job(9)), job(9), uid, host);
    assert_eq!(ask(&h, 1000, "node1"), Err(TaskRefusal::NoSuchJob(job(9))));
    h.launched(9);
    // Launched: its process may already run (and call blaunch) before its pid is reported.
    let alice = TaskGrantFacts { user: "alice".into(), uid: 1000, gid: 100, mem_limit_kb: 0 };
    assert_eq!(ask(&h, 1000, "node1"), Ok(alice.clone()));
    h.step(T0 + SECOND_MS, spawned(9, 4321, T0 + SECOND_MS));
    assert_eq!(ask(&h, 1000, "node1"), Ok(alice.clone()));
    assert_eq!(ask(&h, 0, "node1"), Ok(alice));
    assert_eq!(ask(&h, 1001, "node1"), Err(TaskRefusal::NotOwner { job: job(9), uid: 1001 }));
    let refusal = ask(&h, 1000, "node2").expect_err("node2 is not allocated");
    assert_eq!(refusal, TaskRefusal::HostNotAllocated { job: job(9), host: "node2".into() });
    assert_eq!(refusal.to_string(), "Host <node2> is not allocated to job <9>");
    h.step(
        T0 + 2 * SECOND_MS,
        Input::Exited { job: job(9), wait_status: 0, rusage: rusage(), end_time_ms: T0 + 2 * SECOND_MS },
    );
    assert_eq!(ask(&h, 1000, "node1"), Err(TaskRefusal::NotRunning(job(9))));
}

// Goal: the usage of a job's ended tasks is added to the job's own in its finish, durably
// before it is acknowledged, survives a restart, and is refused (ignored) once the job has
// ended; only the job's user or root may report it. Method: job 9 runs, two task usages are
// reported (each a Persist holding the sum so far), sbatchd restarts, the job exits: its
// FINISH carries its usage plus the tasks'.
#[test]
fn task_usage_is_added_to_the_jobs_finish() {
    use lava_sbd::tasks::{TaskRefusal, may_report_usage};
    let mut h = Harness::connected();
    h.running(9, 4321, true);
    assert_eq!(
        may_report_usage(h.sbd.job(job(9)), job(9), 1001),
        Err(TaskRefusal::NotOwner { job: job(9), uid: 1001 })
    );
    assert_eq!(may_report_usage(h.sbd.job(job(9)), job(9), 1000), Ok(()));
    let task = wire::ResourceUsage { user_time_ms: 3000, system_time_ms: 100, max_rss_kb: 1000 };
    for round in 1..=2u64 {
        let effects = h.step(T0 + 2 * SECOND_MS, Input::TaskUsage { job: job(9), rusage: task });
        let summed = wire::ResourceUsage {
            user_time_ms: 3000 * round,
            system_time_ms: 100 * round,
            max_rss_kb: 1000 * round,
        };
        assert_eq!(effects, vec![persist(&JobRecord { task_rusage: summed, ..h.record(9) })]);
    }
    h.restart();
    h.step(T0 + 3 * SECOND_MS, Input::Connected);
    let effects = h.step(T0 + 3 * SECOND_MS, exited(9, 0, T0 + 3 * SECOND_MS));
    let Some(Effect::Send(ToMbd::JobFinish(finish))) = effects.iter().find(|e| matches!(e, Effect::Send(_)))
    else {
        panic!("a FINISH: {effects:?}")
    };
    let own = rusage();
    assert_eq!(
        finish.rusage,
        wire::ResourceUsage {
            user_time_ms: own.user_time_ms + 6000,
            system_time_ms: own.system_time_ms + 200,
            max_rss_kb: own.max_rss_kb + 2000,
        }
    );
    assert_eq!(may_report_usage(h.sbd.job(job(9)), job(9), 1000), Err(TaskRefusal::NotRunning(job(9))));
    assert_eq!(h.step(T0 + 4 * SECOND_MS, Input::TaskUsage { job: job(9), rusage: task }), vec![]);
}
