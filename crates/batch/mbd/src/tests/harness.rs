//! The `check(input, expected_effects)` harness and fixtures shared by the tests.

use lava_batch_ll::{HostName, JobRef, JobSpec, JobStatus, QueueName, SubmitSpec, UserName};
use lava_batch_wire as wire;

use crate::event::{
    ExecInfo, FinishRecord, JobExecuteRecord, JobNewRecord, JobSigactRecord, JobSignalRecord,
    JobStartAcceptRecord, JobStartRecord, JobStatusRecord,
};
use crate::{
    Caller, ClientId, ClientReply, ClusterAdmin, Effect, Event, HostConfig, Input, Mbd, MbdConfig,
    MbdSnapshot, QueueConfig, ToSbd,
};

/// The start of every test's clock.
pub const T0: u64 = 1_700_000_000_000;
/// The resend interval of the test configuration.
pub const RESEND_MS: u64 = 5_000;
/// The clean period of the test configuration.
pub const CLEAN_MS: u64 = 60_000;

pub fn host(name: &str) -> HostName {
    HostName::parse("test", name).expect("valid host name")
}

pub fn queue(name: &str) -> QueueName {
    QueueName::parse("test", name).expect("valid queue name")
}

pub fn user(name: &str) -> UserName {
    UserName::parse("test", name).expect("valid user name")
}

/// A cluster of hostA (its CPUs), hostB (MXJ 1) and hostC (MXJ 4); queues
/// `normal` (default, priority 30) and `high` (priority 40, hostA only).
pub fn config() -> MbdConfig {
    let mut config = MbdConfig::new("lava", host("master"));
    config.queues = vec![
        QueueConfig { default: true, ..QueueConfig::new(queue("normal"), 30) },
        QueueConfig { hosts: vec![host("hostA")], ..QueueConfig::new(queue("high"), 40) },
    ];
    config.hosts = vec![
        HostConfig::new(host("hostA"), None),
        HostConfig::new(host("hostB"), Some(1)),
        HostConfig::new(host("hostC"), Some(4)),
    ];
    config.admins = vec![ClusterAdmin::User(user("admin")), ClusterAdmin::Uid(5000)];
    config.clean_period_ms = CLEAN_MS;
    config.resend_interval_ms = RESEND_MS;
    config
}

/// alice 1000, bob 1001, admin 2000, root 0; any other name gets 3000.
pub fn caller(name: &str) -> Caller {
    let uid = match name {
        "alice" => 1000,
        "bob" => 1001,
        "admin" => 2000,
        "root" => 0,
        _ => 3000,
    };
    Caller { uid, gid: 100, user: user(name), host: host("client") }
}

pub fn rid(n: u64) -> wire::RequestId {
    wire::RequestId { high: 0xfeed, low: n }
}

pub fn wref(id: u32) -> wire::WireJobRef {
    wire::WireJobRef { job_id: id, array_index: 0 }
}

pub fn jref(id: u32) -> JobRef {
    JobRef::new(id, 0).expect("job id above 0")
}

pub fn request() -> wire::SubmitRequest {
    wire::SubmitRequest {
        command: "sleep 10".into(),
        cwd: "work".into(),
        home_dir: "/home/alice".into(),
        n_slots: 1,
        from_host: "client".into(),
        umask: 0o022,
        env: vec![wire::EnvVar { name: "PATH".into(), value: "/bin".into() }],
        ..wire::SubmitRequest::default()
    }
}

pub fn spec(request: wire::SubmitRequest) -> SubmitSpec {
    SubmitSpec::try_from(request).expect("valid submission")
}

pub fn submit(client: u64, request_id: u64, who: &str, request: wire::SubmitRequest) -> Input {
    Input::Submit {
        client: ClientId(client),
        request_id: rid(request_id),
        caller: caller(who),
        spec: Box::new(spec(request)),
    }
}

pub fn signal(client: u64, request_id: u64, who: &str, jobs: &[u32], action: wire::SignalAction) -> Input {
    let request = wire::SignalRequest {
        jobs: jobs.iter().map(|id| wref(*id)).collect(),
        all_jobs: false,
        user: String::new(),
        action,
    };
    Input::Signal { client: ClientId(client), request_id: rid(request_id), caller: caller(who), request }
}

pub fn query(client: u64, who: &str, filter: u32) -> Input {
    let query = wire::JobQuery {
        jobs: vec![],
        user: String::new(),
        state_filter: filter,
        queue: String::new(),
        host: String::new(),
        job_name: String::new(),
        after_job: 0,
        after_index: 0,
    };
    Input::Query { client: ClientId(client), caller: caller(who), query }
}

pub fn registered(name: &str, n_cpus: u32) -> Input {
    Input::HostRegistered { host: host(name), n_cpus }
}

pub fn started(on: &str, id: u32, pid: i32) -> Input {
    started_run(on, id, pid, 1)
}

/// NEW_JOB_REPLY (started) of dispatch `dispatch_seq` of job `id`.
pub fn started_run(on: &str, id: u32, pid: i32, dispatch_seq: u32) -> Input {
    let outcome = wire::NewJobOutcome::Started { pid, pgid: pid, job_status: JobStatus::Run.bits() };
    Input::NewJobReply { host: host(on), reply: wire::NewJobReply { job: wref(id), dispatch_seq, outcome } }
}

pub fn refused(on: &str, id: u32, message: &str) -> Input {
    let outcome = wire::NewJobOutcome::Refused { code: wire::REFUSE_NO_USER, message: message.into() };
    Input::NewJobReply {
        host: host(on),
        reply: wire::NewJobReply { job: wref(id), dispatch_seq: 1, outcome },
    }
}

pub fn execute_msg(id: u32, pid: i32, cwd: &str, exec_time: i64) -> wire::JobExecute {
    wire::JobExecute {
        job: wref(id),
        dispatch_seq: 1,
        pid,
        pgid: pid,
        exec_uid: 1000,
        exec_user: "alice".into(),
        exec_home: "/home/alice".into(),
        exec_cwd: cwd.into(),
        exec_time,
    }
}

pub fn executed(on: &str, id: u32, pid: i32) -> Input {
    Input::JobExecute { host: host(on), msg: execute_msg(id, pid, "/home/alice/work", 1_700_000_001) }
}

pub fn finish_msg(id: u32, pid: i32, wait_status: i32) -> wire::JobFinish {
    wire::JobFinish {
        job: wref(id),
        dispatch_seq: 1,
        pid,
        wait_status,
        finish_reason: wire::FINISH_NORMAL,
        end_time: 1_700_000_100,
        rusage: wire::ResourceUsage { user_time_ms: 7, system_time_ms: 3, max_rss_kb: 1024 },
    }
}

pub fn finished(on: &str, id: u32, pid: i32, wait_status: i32) -> Input {
    Input::JobFinish { host: host(on), msg: finish_msg(id, pid, wait_status) }
}

pub fn signal_reply(on: &str, id: u32, seq: u32, outcome: wire::SignalOutcome) -> Input {
    Input::JobSignalReply {
        host: host(on),
        msg: wire::JobSignalReply { job: wref(id), signal_seq: seq, outcome },
    }
}

// ----- expected effects -----

pub fn append(event: Event) -> Effect {
    Effect::Append(event)
}

pub fn send(to: &str, msg: ToSbd) -> Effect {
    Effect::SendSbd { host: host(to), op: msg.operation(), msg }
}

pub fn reply(client: u64, reply: ClientReply) -> Effect {
    Effect::Reply { client: ClientId(client), reply }
}

pub fn register_ack() -> ToSbd {
    ToSbd::RegisterAck(wire::SbdRegisterAck { cluster_name: "lava".into(), master_name: "master".into() })
}

pub fn reply_ack(id: u32) -> ToSbd {
    ToSbd::NewJobReplyAck(wire::JobAck { job: wref(id), dispatch_seq: 1 })
}

pub fn execute_ack(id: u32) -> ToSbd {
    ToSbd::JobExecuteAck(wire::JobAck { job: wref(id), dispatch_seq: 1 })
}

pub fn finish_ack(id: u32) -> ToSbd {
    ToSbd::JobFinishAck(wire::JobAck { job: wref(id), dispatch_seq: 1 })
}

pub fn job_signal(id: u32, seq: u32, action: wire::SignalAction) -> ToSbd {
    ToSbd::JobSignal(wire::JobSignal { job: wref(id), signal_seq: seq, action })
}

pub fn submitted(client: u64, id: u32, queue: &str, default_queue: bool) -> Effect {
    reply(client, ClientReply::Submit(wire::SubmitReply { job_id: id, queue: queue.into(), default_queue }))
}

pub fn signaled(client: u64, outcomes: &[(u32, wire::SignalRequestOutcome)]) -> Effect {
    let results = outcomes
        .iter()
        .map(|(id, outcome)| wire::SignalResult { job: wref(*id), outcome: *outcome })
        .collect();
    reply(client, ClientReply::Signal(wire::SignalReply { results }))
}

pub fn ev_new(
    id: u32,
    request_id: u64,
    who: &str,
    queue_name: &str,
    request: wire::SubmitRequest,
    t: u64,
) -> Event {
    let who = caller(who);
    Event::JobNew(Box::new(JobNewRecord {
        job: jref(id),
        request_id: rid(request_id),
        user_id: who.uid,
        group_id: who.gid,
        user: who.user,
        from_host: who.host,
        queue: queue(queue_name),
        submit_time_ms: t,
        hold: request.hold,
        spec: spec(request),
    }))
}

pub fn ev_start(id: u32, on: &str, n_slots: usize, t: u64) -> Event {
    Event::JobStart(JobStartRecord { job: jref(id), exec_hosts: vec![host(on); n_slots], time_ms: t })
}

pub fn ev_accept(id: u32, pid: i32, t: u64) -> Event {
    Event::JobStartAccept(JobStartAcceptRecord { job: jref(id), pid, pgid: pid, time_ms: t })
}

pub fn ev_execute(msg: &wire::JobExecute, t: u64) -> Event {
    let exec = ExecInfo {
        pid: msg.pid,
        pgid: msg.pgid,
        exec_uid: msg.exec_uid,
        exec_user: msg.exec_user.clone(),
        exec_home: msg.exec_home.clone(),
        exec_cwd: msg.exec_cwd.clone(),
        exec_time_ms: u64::try_from(msg.exec_time).expect("positive") * 1000,
    };
    Event::JobExecute(JobExecuteRecord { job: jref(msg.job.job_id), exec, time_ms: t })
}

pub fn ev_status(id: u32, status: JobStatus, reason: &str, t: u64) -> Event {
    Event::JobStatus(JobStatusRecord {
        job: jref(id),
        status,
        reason: reason.into(),
        time_ms: t,
        finish: None,
    })
}

/// The JOB_STATUS a FINISH built by [`finish_msg`] produces.
pub fn ev_finished(id: u32, pid: i32, wait_status: i32, t: u64) -> Event {
    let msg = finish_msg(id, pid, wait_status);
    let status = if wait_status == 0 { JobStatus::Done } else { JobStatus::Exit };
    let finish = FinishRecord {
        wait_status,
        finish_reason: msg.finish_reason,
        end_time_ms: 1_700_000_100_000,
        rusage: msg.rusage,
        pid,
    };
    Event::JobStatus(JobStatusRecord {
        job: jref(id),
        status,
        reason: String::new(),
        time_ms: t,
        finish: Some(finish),
    })
}

/// The JOB_STATUS EXIT of a job killed while pending.
pub fn ev_killed_pending(id: u32, signal: i32, t: u64) -> Event {
    let finish = FinishRecord {
        wait_status: signal,
        finish_reason: wire::FINISH_KILLED,
        end_time_ms: t,
        rusage: wire::ResourceUsage::default(),
        pid: 0,
    };
    Event::JobStatus(JobStatusRecord {
        job: jref(id),
        status: JobStatus::Exit,
        reason: String::new(),
        time_ms: t,
        finish: Some(finish),
    })
}

pub fn ev_signal(id: u32, seq: u32, action: wire::SignalAction, who: &str, request_id: u64, t: u64) -> Event {
    let who = caller(who);
    Event::JobSignal(JobSignalRecord {
        job: jref(id),
        signal_seq: seq,
        action,
        requester_uid: who.uid,
        requester: who.user,
        request_id: Some(rid(request_id)),
        requeue_hold: None,
        time_ms: t,
    })
}

pub fn ev_sigact(id: u32, seq: u32, outcome: wire::SignalOutcome, t: u64) -> Event {
    Event::JobSigact(JobSigactRecord { job: jref(id), signal_seq: seq, outcome, time_ms: t })
}

// ----- the harness -----

/// A live [`Mbd`], its clock, and every event it has emitted.
pub struct Harness {
    pub mbd: Mbd,
    pub now_ms: u64,
    pub log: Vec<Event>,
    config: MbdConfig,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::with_config(config())
    }

    pub fn with_config(config: MbdConfig) -> Harness {
        Harness { mbd: Mbd::new(config.clone()).expect("valid config"), now_ms: T0, log: Vec::new(), config }
    }

    /// Moves the clock to `T0 + offset_ms`.
    pub fn at(&mut self, offset_ms: u64) -> &mut Harness {
        self.now_ms = T0 + offset_ms;
        self
    }

    /// Steps `input` and returns its effects, after checking every property
    /// that must hold after any step (see [`verify_step`]).
    pub fn step(&mut self, input: Input) -> Vec<Effect> {
        let before = self.mbd.snapshot();
        let mut effects = Vec::new();
        self.mbd.step(self.now_ms, input, &mut effects);
        verify_step(&self.config, &self.mbd, &before, &mut self.log, &effects);
        effects
    }

    /// Steps `input` and asserts its exact effects.
    #[track_caller]
    pub fn check(&mut self, input: Input, expected: Vec<Effect>) {
        let effects = self.step(input);
        assert_eq!(effects, expected, "effects at t = T0 + {} ms", self.now_ms - T0);
    }

    /// A restart: a fresh [`Mbd`] from the log alone; transient state is lost.
    pub fn restart(&mut self) {
        self.mbd = replay(&self.config, None, &self.log);
    }

    /// The effects of a query for `jobs` (state filter ALL), as `JobInfo`s.
    pub fn infos(&mut self, jobs: &[u32]) -> Vec<wire::JobInfo> {
        let query = wire::JobQuery {
            jobs: jobs.iter().map(|id| wref(*id)).collect(),
            user: "all".into(),
            state_filter: wire::state_filter::ALL,
            queue: String::new(),
            host: String::new(),
            job_name: String::new(),
            after_job: 0,
            after_index: 0,
        };
        match self.step(Input::Query { client: ClientId(999), caller: caller("alice"), query }).as_slice() {
            [Effect::Reply { reply: ClientReply::JobQuery(reply), .. }] => reply.jobs.clone(),
            other => panic!("unexpected query effects {other:?}"),
        }
    }
}

/// A fresh [`Mbd`] from an optional snapshot and the events after it.
pub fn replay(config: &MbdConfig, snapshot: Option<MbdSnapshot>, events: &[Event]) -> Mbd {
    let mut mbd = match snapshot {
        Some(snapshot) => Mbd::from_snapshot(config.clone(), snapshot).expect("snapshot loads"),
        None => Mbd::new(config.clone()).expect("valid config"),
    };
    for event in events {
        if let Err(error) = mbd.apply(event) {
            panic!("replay of {event:?} failed: {error}");
        }
    }
    mbd
}

/// What must hold after any step: the invariants; appends before messages;
/// every message's operation matches its body and every NEW_JOB passes
/// sbatchd's validation; and replay of the whole log, and of the snapshot
/// before the step plus the step's events, equals the live durable state.
pub fn verify_step(
    config: &MbdConfig,
    mbd: &Mbd,
    before: &MbdSnapshot,
    log: &mut Vec<Event>,
    effects: &[Effect],
) {
    if let Err(problem) = mbd.check_invariants() {
        panic!("invariant broken: {problem}");
    }
    let first_message = effects.iter().position(|e| !matches!(e, Effect::Append(_))).unwrap_or(effects.len());
    assert!(
        effects[first_message..].iter().all(|e| !matches!(e, Effect::Append(_))),
        "an append follows a message: {effects:?}"
    );
    let appended: Vec<Event> = effects[..first_message]
        .iter()
        .filter_map(|e| match e {
            Effect::Append(event) => Some(event.clone()),
            _ => None,
        })
        .collect();
    for effect in effects {
        match effect {
            Effect::SendSbd { op, msg, .. } => {
                assert_eq!(*op, msg.operation());
                if let ToSbd::NewJob(specs) = msg {
                    JobSpec::try_from((**specs).clone()).expect("NEW_JOB passes sbatchd's validation");
                }
            }
            Effect::Reply { .. } | Effect::Append(_) => {}
        }
    }
    for event in &appended {
        assert_eq!(&xdr_round_trip(event), event, "the event survives XDR");
    }
    let tail = replay(config, Some(before.clone()), &appended);
    assert_eq!(tail.snapshot(), mbd.snapshot(), "snapshot + step events differ from the live state");
    log.extend(appended);
    let full = replay_owned(config, log);
    assert_eq!(full.snapshot(), mbd.snapshot(), "replay of the log differs from the live state");
}

/// A fresh [`Mbd`] from the whole log, as mbatchd replays it ([`Mbd::replay`]); every
/// event a live step logged applies (replay ignores nothing of a log live steps wrote).
pub fn replay_owned(config: &MbdConfig, events: &[Event]) -> Mbd {
    let mut mbd = Mbd::new(config.clone()).expect("valid config");
    for event in events {
        match mbd.replay(event.clone()) {
            Ok(crate::Replayed::Applied) => {}
            Ok(crate::Replayed::Ignored(ignored)) => panic!("replay ignored a logged event: {ignored}"),
            Err(error) => panic!("replay of {event:?} failed: {error}"),
        }
    }
    mbd
}

/// `value` encoded with the shell's XDR codec and decoded again.
pub fn xdr_round_trip<T: serde::Serialize + serde::de::DeserializeOwned>(value: &T) -> T {
    let bytes = lava_xdr::to_bytes(value).expect("encodes");
    lava_xdr::from_bytes(&bytes, &lava_xdr::Limits::DEFAULT).expect("decodes")
}
