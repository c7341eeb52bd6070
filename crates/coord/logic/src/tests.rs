//! Exact-effects tests of every rule, replay and snapshot equality, and a
//! seeded random run checking the invariants after every step.
//!
//! Each test steps inputs through [`check`], which asserts the exact list of
//! effects, then the invariants, and then that replaying every event appended
//! so far into a fresh coordinator gives the same state hash.

use lava_coord_ll::{
    Caller, LeaseId, LeaseRef, Outcome, Payload, Request, SubmissionId, TaskId, UserName, WorkerName,
};
use lava_coord_wire::{self as wire, Reply, task_state};

use crate::{ClientId, Coord, CoordConfig, CoordSnapshot, Effect, Event, Input, TaskState};

const T0: u64 = 1_700_000_000_000;
const LEASE_MS: u64 = 10_000;

fn config() -> CoordConfig {
    CoordConfig {
        lease_duration_ms: LEASE_MS,
        payload_bytes_max: 16,
        leases_per_worker_max: 2,
        admins: vec!["lsfadmin".to_owned()],
        submission_window_ms: WINDOW_MS,
        submissions_per_owner_max: 3,
        submissions_max: 5,
    }
}

/// The submission window of [`config`].
const WINDOW_MS: u64 = 60_000;

fn user(uid: u32, name: &str) -> Caller {
    Caller { uid, user: UserName::parse(name).expect("valid user") }
}

/// The caller of every request unless a test says otherwise.
fn alice() -> Caller {
    user(1000, "alice")
}

fn task(id: u64) -> TaskId {
    TaskId::new("task", id).expect("non-zero")
}

fn lease(id: u64) -> LeaseId {
    LeaseId::new("lease", id).expect("non-zero")
}

fn worker(name: &str) -> WorkerName {
    WorkerName::parse(name).expect("valid worker")
}

fn payload(bytes: &[u8]) -> Payload {
    Payload::new(bytes.to_vec(), &lava_coord_ll::Limits::default()).expect("small")
}

fn req(client: u64, request: Request) -> Input {
    Input::Request { client: ClientId(client), caller: alice(), request }
}

fn submit(bytes: &[u8]) -> Input {
    req(1, Request::Submit { payload: payload(bytes) })
}

fn lease_req(name: &str) -> Input {
    req(1, Request::Lease { worker: worker(name) })
}

fn heartbeat(t: u64, l: u64) -> Input {
    req(1, Request::Heartbeat(LeaseRef { task: task(t), lease: lease(l) }))
}

fn finish(t: u64, l: u64, outcome: Outcome) -> Input {
    req(1, Request::Finish { lease: LeaseRef { task: task(t), lease: lease(l) }, outcome })
}

fn respond(reply: Reply) -> Effect {
    Effect::Respond { client: ClientId(1), reply }
}

fn created(t: u64, bytes: &[u8], at: u64) -> Effect {
    Effect::Append(Event::TaskCreated {
        task: task(t),
        payload: payload(bytes),
        created_at_ms: at,
        owner: alice(),
    })
}

fn granted(t: u64, l: u64, name: &str, expires_at_ms: u64) -> Effect {
    Effect::Append(Event::LeaseGranted {
        task: task(t),
        lease: lease(l),
        worker: worker(name),
        holder: alice(),
        expires_at_ms,
    })
}

fn expired(t: u64, l: u64, expires_at_ms: u64) -> Effect {
    Effect::Append(Event::LeaseExpired { task: task(t), lease: lease(l), expires_at_ms })
}

fn lease_reply(t: u64, l: u64, expires_at_ms: u64, bytes: &[u8]) -> Effect {
    respond(Reply::Lease(wire::LeaseReply {
        lease: Some(wire::LeaseGrant { task_id: t, lease_id: l, expires_at_ms, payload: bytes.to_vec() }),
    }))
}

fn outcome(t: u64, state: u32) -> Effect {
    respond(Reply::Outcome(wire::OutcomeReply { task_id: t, state }))
}

fn error_code(effect: &Effect) -> u32 {
    match effect {
        Effect::Respond { reply: Reply::Error(error), .. } => error.code,
        other => panic!("not an error answer: {other:?}"),
    }
}

/// A coordinator with the WAL it wrote, so every check can replay it.
struct Harness {
    coord: Coord,
    wal: Vec<Event>,
    /// Replay is compared with the live state every this many steps.
    replay_every: u64,
    n_steps: u64,
}

impl Harness {
    fn new() -> Harness {
        Harness { coord: Coord::new(config()), wal: Vec::new(), replay_every: 1, n_steps: 0 }
    }

    /// Steps `input` and returns the effects, after checking the invariants,
    /// that appends come before the answer, and that replay gives the same state.
    fn step(&mut self, now_ms: u64, input: Input) -> Vec<Effect> {
        let mut effects = Vec::new();
        self.coord.step(now_ms, input, &mut effects);
        self.coord.check_invariants().expect("invariants hold after every step");
        let mut seen_respond = false;
        for effect in &effects {
            match effect {
                Effect::Append(event) => {
                    assert!(!seen_respond, "an append after the answer: {effects:?}");
                    self.wal.push(event.clone());
                }
                Effect::Respond { .. } => seen_respond = true,
            }
        }
        self.n_steps += 1;
        if self.n_steps.is_multiple_of(self.replay_every) {
            assert_eq!(replay(&self.wal).state_hash(), self.coord.state_hash(), "replay equals live state");
        }
        effects
    }

    /// Steps `input` and asserts the exact effects.
    fn check(&mut self, now_ms: u64, input: Input, expected: Vec<Effect>) {
        let effects = self.step(now_ms, input);
        assert_eq!(effects, expected);
    }

    fn state(&self, t: u64) -> TaskState {
        self.coord.task(task(t)).expect("task exists").state.clone()
    }
}

fn replay(wal: &[Event]) -> Coord {
    let mut coord = Coord::new(config());
    for event in wal {
        coord.apply(event).expect("a logged event applies on replay");
    }
    coord
}

// Goal: submission appends TaskCreated and answers the id only with it;
// ids count from 1; the payload bound of the configuration is enforced with
// an error and no append.
#[test]
fn submit_appends_task_created_then_answers() {
    let mut h = Harness::new();
    h.check(
        T0,
        submit(b"one"),
        vec![created(1, b"one", T0), respond(Reply::Submitted(wire::SubmitTaskReply { task_id: 1 }))],
    );
    h.check(
        T0 + 1,
        submit(b""),
        vec![created(2, b"", T0 + 1), respond(Reply::Submitted(wire::SubmitTaskReply { task_id: 2 }))],
    );
    let effects = h.step(T0 + 2, submit(&[0; 17]));
    assert_eq!(effects.len(), 1, "a refused submission appends nothing");
    assert_eq!(error_code(&effects[0]), wire::ERR_PAYLOAD_TOO_LARGE);
    assert_eq!(h.state(1), TaskState::Waiting);
}

// Goal: leases go FIFO by task id with the configured duration; an empty
// answer, with no append, when nothing is waiting or the worker is at its
// advisory maximum.
#[test]
fn lease_is_fifo_and_empty_when_nothing_is_schedulable() {
    let mut h = Harness::new();
    h.check(T0, lease_req("w1"), vec![respond(Reply::Lease(wire::LeaseReply { lease: None }))]);
    for bytes in [b"a", b"b", b"c"] {
        h.step(T0, submit(bytes));
    }
    h.check(
        T0 + 5,
        lease_req("w1"),
        vec![granted(1, 1, "w1", T0 + 5 + LEASE_MS), lease_reply(1, 1, T0 + 5 + LEASE_MS, b"a")],
    );
    h.check(
        T0 + 6,
        lease_req("w1"),
        vec![granted(2, 2, "w1", T0 + 6 + LEASE_MS), lease_reply(2, 2, T0 + 6 + LEASE_MS, b"b")],
    );
    // w1 holds 2 leases, its maximum: nothing for it, but w2 gets task 3.
    h.check(T0 + 7, lease_req("w1"), vec![respond(Reply::Lease(wire::LeaseReply { lease: None }))]);
    h.check(
        T0 + 8,
        lease_req("w2"),
        vec![granted(3, 3, "w2", T0 + 8 + LEASE_MS), lease_reply(3, 3, T0 + 8 + LEASE_MS, b"c")],
    );
    h.check(T0 + 9, lease_req("w2"), vec![respond(Reply::Lease(wire::LeaseReply { lease: None }))]);
}

// Goal: a heartbeat on the valid lease appends LeaseExtended with now + the
// duration and answers the new expiry; the lease then outlives its first expiry.
#[test]
fn heartbeat_extends_the_lease() {
    let mut h = Harness::new();
    h.step(T0, submit(b"x"));
    h.step(T0, lease_req("w1"));
    let at = T0 + LEASE_MS - 1;
    h.check(
        at,
        heartbeat(1, 1),
        vec![
            Effect::Append(Event::LeaseExtended {
                task: task(1),
                lease: lease(1),
                expires_at_ms: at + LEASE_MS,
            }),
            respond(Reply::Extended(wire::LeaseExtended {
                task_id: 1,
                lease_id: 1,
                expires_at_ms: at + LEASE_MS,
            })),
        ],
    );
    h.check(T0 + LEASE_MS + 1, Input::Tick, vec![]);
    h.check(
        T0 + LEASE_MS + 2,
        finish(1, 1, Outcome::Completed),
        vec![
            Effect::Append(Event::TaskCompleted { task: task(1), lease: lease(1) }),
            outcome(1, task_state::COMPLETED),
        ],
    );
}

// Goal: completion and failure under the valid lease end the task; a retry
// of the same outcome gets the same answer and appends nothing; the other
// outcome under that lease is refused (TaskCancelled, state unchanged).
#[test]
fn complete_and_fail_under_the_valid_lease() {
    let mut h = Harness::new();
    h.step(T0, submit(b"x"));
    h.step(T0, submit(b"y"));
    h.step(T0, lease_req("w1"));
    h.step(T0, lease_req("w2"));
    h.check(
        T0 + 1,
        finish(1, 1, Outcome::Completed),
        vec![
            Effect::Append(Event::TaskCompleted { task: task(1), lease: lease(1) }),
            outcome(1, task_state::COMPLETED),
        ],
    );
    h.check(T0 + 2, finish(1, 1, Outcome::Completed), vec![outcome(1, task_state::COMPLETED)]);
    h.check(
        T0 + 3,
        finish(2, 2, Outcome::Failed),
        vec![
            Effect::Append(Event::TaskFailed { task: task(2), lease: lease(2) }),
            outcome(2, task_state::FAILED),
        ],
    );
    let effects = h.step(T0 + 4, finish(1, 1, Outcome::Failed));
    assert_eq!(
        effects[0],
        Effect::Append(Event::TaskCancelled {
            task: task(1),
            lease: lease(1),
            outcome: Outcome::Failed,
            by: alice(),
        })
    );
    assert_eq!(error_code(&effects[1]), wire::ERR_LEASE_LOST);
    assert!(matches!(h.state(1), TaskState::Finished { outcome: Outcome::Completed, .. }));
}

// Goal (the beanstalkd bug): a completion on an expired lease is refused even
// while the task sits in WAITING and was not leased again. Method: no tick
// between the expiry and the completion; the completion's own step expires
// the lease first, then records the refused attempt; the task stays WAITING
// and is leased again, to anyone, under a new lease.
#[test]
fn completion_on_an_expired_lease_is_refused_while_waiting() {
    let mut h = Harness::new();
    h.step(T0, submit(b"x"));
    h.step(T0, lease_req("w1"));
    let late = T0 + LEASE_MS;
    let effects = h.step(late, finish(1, 1, Outcome::Completed));
    assert_eq!(effects.len(), 3, "{effects:?}");
    assert_eq!(effects[0], expired(1, 1, T0 + LEASE_MS));
    assert_eq!(
        effects[1],
        Effect::Append(Event::TaskCancelled {
            task: task(1),
            lease: lease(1),
            outcome: Outcome::Completed,
            by: alice(),
        })
    );
    assert_eq!(error_code(&effects[2]), wire::ERR_LEASE_LOST);
    assert_eq!(h.state(1), TaskState::Waiting);
    assert_eq!(h.coord.task(task(1)).expect("task").n_refused, 1);
    // Again, now that the expiry is already recorded: refused again, still waiting.
    let effects = h.step(late + 5, finish(1, 1, Outcome::Failed));
    assert_eq!(
        effects[0],
        Effect::Append(Event::TaskCancelled {
            task: task(1),
            lease: lease(1),
            outcome: Outcome::Failed,
            by: alice(),
        })
    );
    assert_eq!(error_code(&effects[1]), wire::ERR_LEASE_LOST);
    assert_eq!(h.state(1), TaskState::Waiting);
    h.check(
        late + 6,
        lease_req("w2"),
        vec![granted(1, 2, "w2", late + 6 + LEASE_MS), lease_reply(1, 2, late + 6 + LEASE_MS, b"x")],
    );
}

// Goal: a superseded lease (the task was re-leased after an expiry) can
// neither heartbeat nor complete; the new lease still can.
#[test]
fn a_superseded_lease_cannot_complete() {
    let mut h = Harness::new();
    h.step(T0, submit(b"x"));
    h.step(T0, lease_req("w1"));
    h.check(T0 + LEASE_MS, Input::Tick, vec![expired(1, 1, T0 + LEASE_MS)]);
    h.step(T0 + LEASE_MS + 1, lease_req("w2"));
    let effects = h.step(T0 + LEASE_MS + 2, heartbeat(1, 1));
    assert_eq!(effects.len(), 1, "a refused heartbeat appends nothing");
    assert_eq!(error_code(&effects[0]), wire::ERR_LEASE_LOST);
    let effects = h.step(T0 + LEASE_MS + 3, finish(1, 1, Outcome::Completed));
    assert_eq!(
        effects[0],
        Effect::Append(Event::TaskCancelled {
            task: task(1),
            lease: lease(1),
            outcome: Outcome::Completed,
            by: alice(),
        })
    );
    assert_eq!(error_code(&effects[1]), wire::ERR_LEASE_LOST);
    assert!(matches!(h.state(1), TaskState::Leased { lease: l, .. } if l == lease(2)));
    h.check(
        T0 + LEASE_MS + 4,
        finish(1, 2, Outcome::Completed),
        vec![
            Effect::Append(Event::TaskCompleted { task: task(1), lease: lease(2) }),
            outcome(1, task_state::COMPLETED),
        ],
    );
}

// Goal: an expired lease is never resurrected: a heartbeat after the expiry
// (without a tick in between) expires it and is refused; the task is WAITING.
#[test]
fn heartbeat_after_expiry_does_not_resurrect() {
    let mut h = Harness::new();
    h.step(T0, submit(b"x"));
    h.step(T0, lease_req("w1"));
    let effects = h.step(T0 + LEASE_MS + 50, heartbeat(1, 1));
    assert_eq!(effects[0], expired(1, 1, T0 + LEASE_MS));
    assert_eq!(error_code(&effects[1]), wire::ERR_LEASE_LOST);
    assert_eq!(effects.len(), 2);
    assert_eq!(h.state(1), TaskState::Waiting);
}

// Goal (the other beanstalkd bug): every lease is revoked within one tick of
// its expiry, also under load. Method: 300 leases with spread expiries
// (heartbeats move some), ticks every TICK_INTERVAL_MS; after each tick no
// valid lease has an expiry at or before that tick, and each LeaseExpired
// comes from the first tick at or after its expiry.
#[test]
fn every_lease_is_revoked_within_one_tick() {
    let mut h = Harness::new();
    h.coord = Coord::new(CoordConfig { leases_per_worker_max: u32::MAX, ..config() });
    for i in 0..300u64 {
        h.step(T0 + i * 7, submit(b"t"));
        h.step(T0 + i * 7, lease_req("w"));
        if i % 3 == 0 {
            h.step(T0 + i * 7 + 3, heartbeat(i + 1, i + 1));
        }
    }
    let mut now = T0;
    let mut revoked = 0;
    while now < T0 + 300 * 7 + 2 * LEASE_MS {
        now += crate::TICK_INTERVAL_MS;
        for effect in h.step(now, Input::Tick) {
            let Effect::Append(Event::LeaseExpired { expires_at_ms, .. }) = effect else {
                panic!("a tick only expires leases: {effect:?}")
            };
            assert!(expires_at_ms <= now && now - expires_at_ms < crate::TICK_INTERVAL_MS);
            revoked += 1;
        }
        assert!(h.coord.store().expiries.first().is_none_or(|(at, _)| *at > now));
    }
    assert_eq!(revoked, 300);
}

// Goal: unknown tasks and unknown leases are clear errors and append nothing.
#[test]
fn unknown_task_and_lease_are_refused() {
    let mut h = Harness::new();
    assert_eq!(error_code(&h.step(T0, heartbeat(9, 1))[0]), wire::ERR_UNKNOWN_TASK);
    assert_eq!(error_code(&h.step(T0, finish(9, 1, Outcome::Completed))[0]), wire::ERR_UNKNOWN_TASK);
    assert_eq!(error_code(&h.step(T0, req(1, Request::QueryTask(task(9))))[0]), wire::ERR_UNKNOWN_TASK);
    h.step(T0, submit(b"x"));
    // A heartbeat with a lease never granted: refused, nothing appended.
    let effects = h.step(T0, heartbeat(1, 7));
    assert_eq!((effects.len(), error_code(&effects[0])), (1, wire::ERR_LEASE_LOST));
    assert_eq!(h.wal.len(), 1);
}

// Goal: the queries report the state and append nothing.
#[test]
fn queries_report_without_appending() {
    let mut h = Harness::new();
    h.step(T0, submit(b"abc"));
    h.step(T0, submit(b"d"));
    h.step(T0 + 1, lease_req("w1"));
    let wal_before = h.wal.len();
    h.check(
        T0 + 2,
        req(1, Request::QueryCounts),
        vec![respond(Reply::Counts(wire::CountsReply { waiting: 1, leased: 1, completed: 0, failed: 0 }))],
    );
    h.check(
        T0 + 2,
        req(1, Request::QueryTask(task(1))),
        vec![respond(Reply::Task(wire::TaskQueryReply {
            task: wire::TaskInfo {
                task_id: 1,
                state: task_state::LEASED,
                lease_id: 1,
                worker: "w1".into(),
                expires_at_ms: T0 + 1 + LEASE_MS,
                n_leases: 1,
                n_refused: 0,
                payload_bytes: 3,
                owner: "alice".into(),
                owner_uid: 1000,
                holder: "alice".into(),
            },
        }))],
    );
    h.check(
        T0 + 2,
        req(1, Request::QueryWorkers),
        vec![respond(Reply::Workers(wire::WorkersReply {
            workers: vec![wire::WorkerInfo { name: "w1".into(), last_seen_ms: T0 + 1, n_leases: 1 }],
        }))],
    );
    h.check(
        T0 + 2,
        req(1, Request::QueryLeases),
        vec![respond(Reply::Leases(wire::LeasesReply {
            leases: vec![wire::LeaseInfo {
                task_id: 1,
                lease_id: 1,
                worker: "w1".into(),
                user: "alice".into(),
                expires_at_ms: T0 + 1 + LEASE_MS,
            }],
        }))],
    );
    assert_eq!(h.wal.len(), wal_before);
}

// Goal: who may do what (docs/coordinator.md, Authorization). Any user may
// submit and lease; a lease's heartbeat, completion and failure are only
// accepted from the user it was granted to or a cluster administrator (uid 0
// or a ClusterAdmins name); a refusal appends nothing and leaves the lease
// valid; a completion on an invalid lease is still a TaskCancelled recording
// who tried. Method: alice submits and leases; bob, root and lsfadmin act.
#[test]
fn only_the_lease_holder_or_an_admin_may_act_under_a_lease() {
    let as_user = |caller: Caller, request: Request| Input::Request { client: ClientId(1), caller, request };
    let r = |t, l| LeaseRef { task: task(t), lease: lease(l) };
    let bob = user(1001, "bob");
    let mut h = Harness::new();
    h.step(T0, submit(b"a"));
    h.step(T0, submit(b"b"));
    h.step(T0, as_user(bob.clone(), Request::Submit { payload: payload(b"c") }));
    assert!(matches!(&h.coord.task(task(3)).expect("task 3").owner, o if *o == bob));
    h.step(T0, lease_req("w1"));
    for request in [
        Request::Heartbeat(r(1, 1)),
        Request::Finish { lease: r(1, 1), outcome: Outcome::Completed },
        Request::Finish { lease: r(1, 1), outcome: Outcome::Failed },
    ] {
        let effects = h.step(T0 + 1, as_user(bob.clone(), request));
        assert_eq!(effects.len(), 1, "nothing appended: {effects:?}");
        assert_eq!(error_code(&effects[0]), wire::ERR_PERMISSION);
        let Effect::Respond { reply: Reply::Error(error), .. } = &effects[0] else { unreachable!() };
        assert!(error.message.contains("bob (uid 1001)") && error.message.contains("alice (uid 1000)"));
    }
    assert!(matches!(h.state(1), TaskState::Leased { lease: l, .. } if l == lease(1)));
    // Bob on a lease that is not valid: refused as lost, and recorded with his name.
    let refused =
        h.step(T0 + 1, as_user(bob.clone(), Request::Finish { lease: r(2, 9), outcome: Outcome::Completed }));
    let cancelled =
        Event::TaskCancelled { task: task(2), lease: lease(9), outcome: Outcome::Completed, by: bob.clone() };
    assert_eq!(refused[0], Effect::Append(cancelled));
    assert_eq!(error_code(&refused[1]), wire::ERR_LEASE_LOST);
    // Root and a ClusterAdmins name may act for alice; the retry check applies to them too.
    let extended = h.step(T0 + 2, as_user(user(0, "root"), Request::Heartbeat(r(1, 1))));
    assert!(matches!(extended.last(), Some(Effect::Respond { reply: Reply::Extended(_), .. })));
    let admin = user(1500, "lsfadmin");
    h.step(T0 + 3, as_user(admin.clone(), Request::Finish { lease: r(1, 1), outcome: Outcome::Completed }));
    assert!(matches!(h.state(1), TaskState::Finished { outcome: Outcome::Completed, .. }));
    let retry = h.step(T0 + 4, as_user(bob, Request::Finish { lease: r(1, 1), outcome: Outcome::Completed }));
    assert_eq!(error_code(&retry[0]), wire::ERR_PERMISSION);
    let retry =
        h.step(T0 + 4, as_user(admin, Request::Finish { lease: r(1, 1), outcome: Outcome::Completed }));
    assert_eq!(retry, vec![outcome(1, task_state::COMPLETED)]);
}

// Goal: replaying the same WAL twice gives the same state hash, equal to the
// live one; a snapshot (also through XDR) plus the tail gives it too; every
// event survives the XDR encoding the shell uses.
#[test]
fn replay_twice_and_snapshot_give_the_same_hash() {
    let mut h = Harness::new();
    for i in 0..20u64 {
        h.step(T0 + i, submit(&[i as u8; 3]));
    }
    for i in 0..10u64 {
        h.step(T0 + 100 + i, lease_req(if i % 2 == 0 { "a" } else { "b" }));
    }
    h.step(T0 + 200, finish(1, 1, Outcome::Completed));
    h.step(T0 + 200, finish(2, 2, Outcome::Failed));
    h.step(T0 + 300, heartbeat(3, 3));
    let cut = h.wal.len();
    let snapshot = h.coord.snapshot();
    h.step(T0 + 100 + LEASE_MS, Input::Tick);
    h.step(T0 + 100 + LEASE_MS, finish(4, 4, Outcome::Completed));
    h.step(T0 + 100 + LEASE_MS, lease_req("c"));
    let first = replay(&h.wal);
    let second = replay(&h.wal);
    assert_eq!(first.state_hash(), second.state_hash());
    assert_eq!(first.state_hash(), h.coord.state_hash());
    assert_eq!(first.snapshot(), h.coord.snapshot());
    // Replay by value (what the daemon does) gives the same state as by reference.
    let mut owned = Coord::new(config());
    for event in h.wal.clone() {
        owned.apply_owned(event).expect("a logged event applies on replay");
    }
    assert_eq!(owned.snapshot(), h.coord.snapshot());

    let limits = lava_xdr::Limits::DEFAULT;
    let bytes = lava_xdr::to_bytes(&snapshot).expect("snapshot encodes");
    let decoded: CoordSnapshot = lava_xdr::from_bytes(&bytes, &limits).expect("snapshot decodes");
    let mut restored = Coord::from_snapshot(config(), decoded).expect("a valid snapshot");
    for event in &h.wal[cut..] {
        let bytes = lava_xdr::to_bytes(event).expect("event encodes");
        let back: Event = lava_xdr::from_bytes(&bytes, &limits).expect("event decodes");
        assert_eq!(&back, event);
        restored.apply(&back).expect("applies");
    }
    assert_eq!(restored.state_hash(), h.coord.state_hash());
    restored.check_invariants().expect("restored invariants");
}

// Goal: replay refuses events that do not fit (a damaged or foreign WAL) and
// changes nothing.
#[test]
fn replay_refuses_events_that_do_not_fit() {
    let mut coord = Coord::new(config());
    let bad = [
        Event::TaskCreated { task: task(2), payload: payload(b""), created_at_ms: 0, owner: alice() },
        Event::LeaseGranted {
            task: task(1),
            lease: lease(1),
            worker: worker("w"),
            holder: alice(),
            expires_at_ms: 1,
        },
        Event::TaskCompleted { task: task(1), lease: lease(1) },
    ];
    for event in &bad {
        let hash = coord.state_hash();
        assert!(coord.apply(event).is_err(), "{event:?}");
        assert_eq!(coord.state_hash(), hash);
    }
    coord
        .apply(&Event::TaskCreated { task: task(1), payload: payload(b""), created_at_ms: 0, owner: alice() })
        .expect("fits");
    coord
        .apply(&Event::LeaseGranted {
            task: task(1),
            lease: lease(1),
            worker: worker("w"),
            holder: alice(),
            expires_at_ms: 9,
        })
        .expect("fits");
    assert!(coord.apply(&Event::LeaseExpired { task: task(1), lease: lease(1), expires_at_ms: 8 }).is_err());
    assert!(
        coord
            .apply(&Event::TaskCancelled {
                task: task(1),
                lease: lease(1),
                outcome: Outcome::Completed,
                by: alice(),
            })
            .is_err()
    );
    assert!(
        coord
            .apply(&Event::LeaseGranted {
                task: task(1),
                lease: lease(2),
                worker: worker("w"),
                holder: alice(),
                expires_at_ms: 9
            })
            .is_err()
    );
}

// Goal: under a random mix of submits, pulls, late heartbeats, completions on
// stale leases, clock jumps and restarts from the WAL (replay, then Tick),
// the invariants hold after every step, no task is finished twice, no
// completion is accepted on anything but the valid lease, and every task is
// eventually finished when one worker behaves. Method: seeded LCG, 20 seeds.
#[test]
fn random_runs_keep_the_invariants() {
    for seed in 1..=20u64 {
        let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut next = |n: u64| {
            rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (rng >> 33) % n
        };
        let mut h = Harness::new();
        h.replay_every = 16;
        let mut now = T0;
        let mut held: Vec<(u64, u64)> = Vec::new();
        let mut finished = std::collections::BTreeSet::new();
        for _ in 0..400 {
            now += next(3_000);
            let input = match next(8) {
                0 | 1 => submit(b"p"),
                2 | 3 => lease_req(["a", "b", "c"][next(3) as usize]),
                4 if !held.is_empty() => {
                    let (t, l) = held[next(held.len() as u64) as usize];
                    heartbeat(t, l)
                }
                5 | 6 if !held.is_empty() => {
                    let (t, l) = held[next(held.len() as u64) as usize];
                    finish(t, l, if next(2) == 0 { Outcome::Completed } else { Outcome::Failed })
                }
                7 => {
                    // Crash and restart: replay the WAL, then expire by the current time.
                    h.coord = replay(&h.wal);
                    Input::Tick
                }
                _ => Input::Tick,
            };
            let expect_valid = match &input {
                Input::Request { request: Request::Finish { lease: r, .. }, .. } => {
                    h.coord.store().valid_lease(r.task, r.lease).is_ok_and(|held| held.expires_at_ms > now)
                }
                _ => false,
            };
            for effect in h.step(now, input) {
                match effect {
                    Effect::Append(
                        Event::TaskCompleted { task, lease } | Event::TaskFailed { task, lease },
                    ) => {
                        assert!(expect_valid, "seed {seed}: completion accepted on lease {lease} not valid");
                        assert!(finished.insert(task), "seed {seed}: task {task} finished twice");
                    }
                    Effect::Respond { reply: Reply::Lease(wire::LeaseReply { lease: Some(g) }), .. } => {
                        held.push((g.task_id, g.lease_id));
                    }
                    _ => {}
                }
            }
        }
        // One well-behaved worker drains everything; leases the others hold
        // run out and their tasks come back to it.
        while h.coord.store().counts[0] + h.coord.store().counts[1] > 0 {
            now += LEASE_MS;
            loop {
                now += 1;
                let effects = h.step(now, lease_req("good"));
                let Some(Effect::Respond {
                    reply: Reply::Lease(wire::LeaseReply { lease: Some(g) }), ..
                }) = effects.last()
                else {
                    break;
                };
                let (t, l) = (g.task_id, g.lease_id);
                h.step(now, finish(t, l, Outcome::Completed));
            }
        }
        assert_eq!(h.coord.store().counts[0] + h.coord.store().counts[1], 0, "seed {seed}: unfinished tasks");
    }
}

// ----- submission ids (SUBMIT_TASK_ONCE) -----

fn sid(n: u64) -> SubmissionId {
    SubmissionId::new(wire::SubmissionId { high: 0xfeed, low: n }).expect("non-zero")
}

fn submit_once_as(caller: Caller, n: u64, bytes: &[u8]) -> Input {
    Input::Request {
        client: ClientId(1),
        caller,
        request: Request::SubmitOnce { submission: sid(n), payload: payload(bytes) },
    }
}

fn submit_once(n: u64, bytes: &[u8]) -> Input {
    submit_once_as(alice(), n, bytes)
}

fn created_once(t: u64, owner: Caller, n: u64, bytes: &[u8], at: u64) -> Effect {
    Effect::Append(Event::TaskCreatedOnce {
        task: task(t),
        payload: payload(bytes),
        created_at_ms: at,
        owner,
        submission: sid(n),
    })
}

fn once_reply(t: u64, repeated: bool) -> Effect {
    respond(Reply::SubmittedOnce(wire::SubmitTaskOnceReply { task_id: t, repeated }))
}

// Goal: a submission id's first use appends TaskCreatedOnce and answers the new task; its
// retry (same owner, same id, same payload) answers the same task, marked repeated, and
// appends nothing; the retry is recognised after the task was leased and completed too.
#[test]
fn a_repeated_submission_id_gets_the_same_task_and_creates_nothing() {
    let mut h = Harness::new();
    h.check(T0, submit_once(7, b"p"), vec![created_once(1, alice(), 7, b"p", T0), once_reply(1, false)]);
    h.check(T0 + 1, submit_once(7, b"p"), vec![once_reply(1, true)]);
    h.check(
        T0 + 2,
        submit(b"q"),
        vec![created(2, b"q", T0 + 2), respond(Reply::Submitted(wire::SubmitTaskReply { task_id: 2 }))],
    );
    h.step(T0 + 3, lease_req("w"));
    h.step(T0 + 4, finish(1, 1, Outcome::Completed));
    h.check(T0 + 5, submit_once(7, b"p"), vec![once_reply(1, true)]);
    assert_eq!(h.coord.n_tasks(), 2);
    assert_eq!(h.coord.n_submissions_held(), 1);
    // A new id is a new task.
    h.check(
        T0 + 6,
        submit_once(8, b"p"),
        vec![created_once(3, alice(), 8, b"p", T0 + 6), once_reply(3, false)],
    );
}

// Goal: the pair is (owner uid, id): another user with the same id gets a task of their
// own; the same id with another payload is refused, naming the id and the first task, and
// appends nothing.
#[test]
fn the_same_id_of_another_owner_is_another_task_and_another_payload_is_refused() {
    let mut h = Harness::new();
    let bob = user(1001, "bob");
    h.check(T0, submit_once(7, b"p"), vec![created_once(1, alice(), 7, b"p", T0), once_reply(1, false)]);
    h.check(
        T0 + 1,
        submit_once_as(bob.clone(), 7, b"p"),
        vec![created_once(2, bob.clone(), 7, b"p", T0 + 1), once_reply(2, false)],
    );
    h.check(T0 + 2, submit_once_as(bob, 7, b"p"), vec![once_reply(2, true)]);
    let effects = h.step(T0 + 3, submit_once(7, b"other"));
    assert_eq!(effects.len(), 1, "nothing appended: {effects:?}");
    assert_eq!(error_code(&effects[0]), wire::ERR_BAD_REQUEST);
    let Effect::Respond { reply: Reply::Error(error), .. } = &effects[0] else { unreachable!() };
    assert!(
        error
            .message
            .contains(&format!("submission id {} of alice (uid 1000) already created task 1", sid(7))),
        "{}",
        error.message
    );
    // An oversized payload under a new id is refused before anything is held.
    let effects = h.step(T0 + 4, submit_once(9, &[0; 17]));
    assert_eq!(error_code(&effects[0]), wire::ERR_PAYLOAD_TOO_LARGE);
    assert_eq!(h.coord.n_submissions_held(), 2);
}

// Goal: the window's rules. An id is held at least the window after its task was created,
// and forgotten when a later TaskCreatedOnce comes the window or more after it (then its
// retry is a new task); an owner past its bound forgets its own oldest id; past the total
// bound a new id is refused ERR_TRY_AGAIN, naming when to retry, while ids held are still
// recognised and another owner at its own bound may go on (it only pushes out its own).
#[test]
fn the_window_forgets_by_age_and_per_owner_and_refuses_past_the_total() {
    let mut h = Harness::new();
    h.step(T0, submit_once(1, b"a"));
    // Past the window, but no later TaskCreatedOnce yet: still held, still recognised.
    h.check(T0 + WINDOW_MS + 5, submit_once(1, b"a"), vec![once_reply(1, true)]);
    // A new pair at that time forgets the old one.
    h.step(T0 + WINDOW_MS + 5, submit_once(2, b"b"));
    assert_eq!(h.coord.n_submissions_held(), 1);
    let at = T0 + WINDOW_MS + 6;
    h.check(at, submit_once(1, b"a"), vec![created_once(3, alice(), 1, b"a", at), once_reply(3, false)]);

    // Per owner (3): alice's fourth pushes out her oldest (id 2, task 2).
    h.step(at + 1, submit_once(4, b"d"));
    h.check(at + 2, submit_once(2, b"b"), vec![once_reply(2, true)]);
    h.step(at + 3, submit_once(5, b"e"));
    assert_eq!(h.coord.n_submissions_held(), 3);
    let t = h.coord.last_task_id() + 1;
    h.check(
        at + 4,
        submit_once(2, b"b"),
        vec![created_once(t, alice(), 2, b"b", at + 4), once_reply(t, false)],
    );
    assert_eq!(h.coord.n_submissions_held(), 3);

    // In total (5): bob fills two, then carol is refused; held ids still answer.
    let bob = user(1001, "bob");
    let carol = user(1002, "carol");
    h.step(at + 5, submit_once_as(bob.clone(), 1, b"x"));
    h.step(at + 6, submit_once_as(bob.clone(), 2, b"y"));
    assert_eq!(h.coord.n_submissions_held(), 5);
    let effects = h.step(at + 7, submit_once_as(carol.clone(), 1, b"z"));
    assert_eq!(effects.len(), 1, "a refusal appends nothing: {effects:?}");
    assert_eq!(error_code(&effects[0]), wire::ERR_TRY_AGAIN);
    let Effect::Respond { reply: Reply::Error(error), .. } = &effects[0] else { unreachable!() };
    assert!(
        error.message.contains("holds 5 submission ids of the last 60 s, its most: retry in"),
        "{}",
        error.message
    );
    h.check(at + 8, submit_once_as(bob, 2, b"y"), vec![once_reply(h.coord.last_task_id(), true)]);
    // Alice is at her own bound: her new id replaces her oldest, the total stays 5.
    let t = h.coord.last_task_id() + 1;
    h.check(
        at + 9,
        submit_once(6, b"f"),
        vec![created_once(t, alice(), 6, b"f", at + 9), once_reply(t, false)],
    );
    assert_eq!(h.coord.n_submissions_held(), 5);
    // Submissions without an id are never refused for the window.
    h.step(at + 10, submit(b"plain"));
    // Once the window has passed, carol gets in (everything older leaves).
    let later = at + 9 + WINDOW_MS;
    let t = h.coord.last_task_id() + 1;
    h.check(
        later,
        submit_once_as(carol.clone(), 1, b"z"),
        vec![created_once(t, carol, 1, b"z", later), once_reply(t, false)],
    );
    assert_eq!(h.coord.n_submissions_held(), 1);
}

// Goal: the window survives replay, a snapshot (through XDR) plus the tail, and replay by
// value: a retry after each is recognised with the same task, and the states agree.
#[test]
fn submission_ids_survive_replay_and_snapshots() {
    let mut h = Harness::new();
    for n in 1..=4u64 {
        h.step(T0 + n, submit_once(n, &[n as u8]));
    }
    h.step(T0 + 10, submit_once_as(user(1001, "bob"), 1, b"b"));
    let cut = h.wal.len();
    let snapshot = h.coord.snapshot();
    assert_eq!(snapshot.submissions.len(), 4, "alice's 3 and bob's 1: {:?}", snapshot.submissions);
    h.step(T0 + 20, submit_once(5, b"5"));
    let limits = lava_xdr::Limits::DEFAULT;
    let bytes = lava_xdr::to_bytes(&snapshot).expect("snapshot encodes");
    let decoded: CoordSnapshot = lava_xdr::from_bytes(&bytes, &limits).expect("snapshot decodes");
    let mut restored = Coord::from_snapshot(config(), decoded).expect("a valid snapshot");
    for event in &h.wal[cut..] {
        let bytes = lava_xdr::to_bytes(event).expect("event encodes");
        restored.apply_owned(lava_xdr::from_bytes(&bytes, &limits).expect("event decodes")).expect("applies");
    }
    let mut replayed = replay(&h.wal);
    for coord in [&mut restored, &mut replayed] {
        assert_eq!(coord.state_hash(), h.coord.state_hash());
        assert_eq!(coord.snapshot(), h.coord.snapshot());
        coord.check_invariants().expect("invariants");
        let mut effects = Vec::new();
        coord.step(T0 + 30, submit_once(4, &[4]), &mut effects);
        assert_eq!(effects, vec![once_reply(4, true)]);
        effects.clear();
        coord.step(T0 + 30, submit_once(1, &[1]), &mut effects);
        assert!(
            matches!(&effects[0], Effect::Append(Event::TaskCreatedOnce { .. })),
            "id 1 was pushed out: {effects:?}"
        );
    }
    // A snapshot naming a task that does not exist, or one pair twice, is refused.
    let mut bad = h.coord.snapshot();
    bad.submissions.push(held(99, 9));
    assert!(Coord::from_snapshot(config(), bad).is_err());
    let mut twice = h.coord.snapshot();
    let first = twice.submissions[0];
    twice.submissions.push(first);
    assert!(Coord::from_snapshot(config(), twice).is_err());
    // Replay refuses a second TaskCreatedOnce of a pair held.
    let mut coord = replay(&h.wal);
    let again = Event::TaskCreatedOnce {
        task: task(coord.last_task_id() + 1),
        payload: payload(b"5"),
        created_at_ms: T0 + 40,
        owner: alice(),
        submission: sid(5),
    };
    let hash = coord.state_hash();
    assert!(coord.apply(&again).is_err());
    assert_eq!(coord.state_hash(), hash, "a refused event changes nothing");
}

fn held(t: u64, n: u64) -> crate::Submission {
    crate::Submission { task: task(t), submission: sid(n) }
}
