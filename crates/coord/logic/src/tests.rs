//! Exact-effects tests of every rule, replay and snapshot equality, and a
//! seeded random run checking the invariants after every step.
//!
//! Each test steps inputs through [`check`], which asserts the exact list of
//! effects, then the invariants, and then that replaying every event appended
//! so far into a fresh coordinator gives the same state hash.

use lava_coord_ll::{Caller, LeaseId, LeaseRef, Outcome, Payload, Request, TaskId, UserName, WorkerName};
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
    }
}

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
