//! Exact-effects tests of every rule through [`check`], and a seeded random workload that
//! checks the invariants after every step.
//!
//! Every test starts from [`cluster`]: node 1 is the master, nodes 2 and 3 joined at `T0`, all
//! in epoch 1 (tokens `1 << 32 | n`).

use crate::{
    Config, DenyReason, DropReason, Effect, Envelope, Epoch, Input, Liveness, LivenessEffect, LockId,
    LockMode, Master, Message, NodeConfig, NodeId, PeerState, PeerView, ResourceName, compatible,
};
use LockMode::*;

const T0: u64 = 1_700_000_000_000;
const TIMEOUT_MS: u64 = 10_000;
/// Longer than the node timeout, so that only the BAST timeout tests meet it.
const BAST_TIMEOUT_MS: u64 = 30_000;

fn n(id: u32) -> NodeId {
    NodeId::new(id).expect("non-zero")
}

fn r(name: &str) -> ResourceName {
    ResourceName::parse(name).expect("valid")
}

fn token(epoch: u64, n_grant: u64) -> u64 {
    (epoch << 32) | n_grant
}

fn config() -> Config {
    let nodes = (1..=3).map(|id| NodeConfig { id: n(id), name: format!("h{id}"), slot: id - 1 }).collect();
    Config { me: n(1), port: 6883, nodes, node_timeout_ms: TIMEOUT_MS, bast_timeout_ms: BAST_TIMEOUT_MS }
}

fn from(sender: u32, epoch: u64, message: Message) -> Input {
    Input::Message(Envelope { seq: 1, sender: n(sender), target: Some(n(1)), epoch: Epoch(epoch), message })
}

fn lock_msg(lock: u64, resource: &str, mode: LockMode, noqueue: bool, convert: bool) -> Message {
    Message::Lock { lock: LockId(lock), resource: r(resource), mode, noqueue, convert }
}

/// `sender` asks for lock `lock` on `resource` in `mode`, in epoch 1.
fn lock(sender: u32, lock: u64, resource: &str, mode: LockMode) -> Input {
    from(sender, 1, lock_msg(lock, resource, mode, false, false))
}

fn try_lock(sender: u32, lock: u64, resource: &str, mode: LockMode) -> Input {
    from(sender, 1, lock_msg(lock, resource, mode, true, false))
}

fn convert(sender: u32, lock: u64, resource: &str, mode: LockMode) -> Input {
    from(sender, 1, lock_msg(lock, resource, mode, false, true))
}

fn release(sender: u32, lock: u64, resource: &str) -> Input {
    from(sender, 1, Message::Release { lock: LockId(lock), resource: r(resource) })
}

fn send(to: u32, epoch: u64, message: Message) -> Effect {
    Effect::Send { to: n(to), epoch: Epoch(epoch), message }
}

fn grant(to: u32, lock: u64, resource: &str, mode: LockMode, token: u64) -> Effect {
    send(to, token >> 32, Message::Grant { lock: LockId(lock), resource: r(resource), mode, token })
}

fn deny(to: u32, lock: u64, resource: &str, mode: LockMode, reason: DenyReason) -> Effect {
    send(to, 1, Message::Deny { lock: LockId(lock), resource: r(resource), mode, reason })
}

fn bast(to: u32, lock: u64, resource: &str, mode: LockMode) -> Effect {
    send(to, 1, Message::Bast { lock: LockId(lock), resource: r(resource), mode })
}

/// LEASE_RENEW from `node` (the node its lease is: the sender).
fn renew_msg(node: u32) -> Message {
    Message::LeaseRenew { duration_ms: TIMEOUT_MS, lock_count: 0, node: n(node) }
}

fn join_msg(name: &str) -> Message {
    Message::NodeJoin { name: name.to_owned(), port: 6883 }
}

/// A started master with nodes 2 and 3 joined at `T0`: a fresh start rebuilds the table
/// (every node joined, so the rebuild ends at once) and recovers the journals of every node's
/// previous incarnation before anything is granted.
fn cluster() -> Master {
    cluster_with(config())
}

/// [`cluster`] with another configuration of the same three nodes.
fn cluster_with(config: Config) -> Master {
    let mut master = Master::new(config, Epoch(0));
    check_at(
        &mut master,
        T0,
        vec![Input::Start { survivor: false }],
        vec![Effect::PersistEpoch(Epoch(1)), Effect::RunRecovery { node: n(1), slot: 0 }],
    );
    check_at(
        &mut master,
        T0,
        vec![from(2, 0, join_msg("h2")), from(3, 0, join_msg("h3"))],
        vec![
            Effect::NodeJoined { node: n(2), epoch: Epoch(1) },
            send(2, 1, join_msg("h1")),
            send(2, 1, Message::JournalRecover { node: n(2), slot: 1 }),
            Effect::RunRecovery { node: n(2), slot: 1 },
            Effect::NodeJoined { node: n(3), epoch: Epoch(1) },
            send(3, 1, join_msg("h1")),
            send(2, 1, Message::JournalRecover { node: n(3), slot: 2 }),
            send(3, 1, Message::JournalRecover { node: n(3), slot: 2 }),
            Effect::RunRecovery { node: n(3), slot: 2 },
            Effect::RebuildDone,
        ],
    );
    assert!(master.frozen(), "grants wait for the recoveries");
    check_at(
        &mut master,
        T0,
        (1..=3).map(|id| Input::RecoveryDone { node: n(id) }).collect(),
        vec![
            send(2, 1, Message::JournalDone { node: n(1), slot: 0 }),
            send(3, 1, Message::JournalDone { node: n(1), slot: 0 }),
            Effect::NodeRecovered { node: n(1) },
            send(2, 1, Message::JournalDone { node: n(2), slot: 1 }),
            send(3, 1, Message::JournalDone { node: n(2), slot: 1 }),
            Effect::NodeRecovered { node: n(2) },
            send(2, 1, Message::JournalDone { node: n(3), slot: 2 }),
            send(3, 1, Message::JournalDone { node: n(3), slot: 2 }),
            Effect::NodeRecovered { node: n(3) },
        ],
    );
    assert!(!master.frozen());
    master
}

/// Steps every input at `now_ms`, checks the invariants after each, and asserts that the
/// concatenated effects are exactly `expected`.
fn check_at(master: &mut Master, now_ms: u64, inputs: Vec<Input>, expected: Vec<Effect>) {
    let mut effects = Vec::new();
    for input in inputs {
        effects.extend(master.step(now_ms, input));
        master.check_invariants();
    }
    assert_eq!(effects, expected);
}

fn check(master: &mut Master, inputs: Vec<Input>, expected: Vec<Effect>) {
    check_at(master, T0, inputs, expected);
}

// Goal: the compatibility matrix is exactly the standard one (VMS, Linux DLM, OCFS2). Method:
// for each of the 36 pairs, node 2 takes the first mode, node 3 asks NOQUEUE for the second;
// the answer must be a grant where the table says Y and a WouldBlock deny where it says N.
#[test]
fn compatibility_matrix_is_the_standard_one() {
    const TABLE: [[bool; 6]; 6] = [
        [true, true, true, true, true, true],
        [true, true, true, true, true, false],
        [true, true, true, false, false, false],
        [true, true, false, true, false, false],
        [true, true, false, false, false, false],
        [true, false, false, false, false, false],
    ];
    for (held_idx, held) in LockMode::ALL.into_iter().enumerate() {
        for (asked_idx, asked) in LockMode::ALL.into_iter().enumerate() {
            let yes = TABLE[held_idx][asked_idx];
            assert_eq!(compatible(held, asked), yes, "{held} vs {asked}");
            assert_eq!(compatible(asked, held), yes, "the matrix is symmetric");
            let mut master = cluster();
            let answer = if yes {
                grant(3, 1, "r", asked, token(1, 2))
            } else {
                deny(3, 1, "r", asked, DenyReason::WouldBlock)
            };
            check(
                &mut master,
                vec![lock(2, 1, "r", held), try_lock(3, 1, "r", asked)],
                vec![grant(2, 1, "r", held, token(1, 1)), answer],
            );
        }
    }
}

// Goal: a stream of compatible readers does not starve a queued EX (the original's flaw).
// Method: PR held, EX queued; new PR requests queue behind the EX although they are
// compatible with the holder; the EX is granted at the release, the readers after it.
#[test]
fn reader_stream_does_not_starve_a_queued_ex() {
    let mut master = cluster();
    check(
        &mut master,
        vec![lock(2, 1, "r", Pr), lock(3, 1, "r", Ex), lock(2, 2, "r", Pr), lock(1, 1, "r", Pr)],
        vec![grant(2, 1, "r", Pr, token(1, 1)), bast(2, 1, "r", Ex)],
    );
    check(
        &mut master,
        vec![release(2, 1, "r")],
        vec![grant(3, 1, "r", Ex, token(1, 2)), bast(3, 1, "r", Pr)],
    );
    check(
        &mut master,
        vec![release(3, 1, "r")],
        vec![grant(2, 2, "r", Pr, token(1, 3)), grant(1, 1, "r", Pr, token(1, 4))],
    );
}

// Goal: grants are FIFO: a later request compatible with the holders still waits behind an
// earlier incompatible one, and waiters are granted in arrival order.
#[test]
fn waiters_are_granted_in_fifo_order() {
    let mut master = cluster();
    check(
        &mut master,
        vec![lock(2, 1, "r", Ex), lock(3, 1, "r", Ex), lock(3, 2, "r", Cr), lock(2, 2, "r", Ex)],
        vec![grant(2, 1, "r", Ex, token(1, 1)), bast(2, 1, "r", Ex)],
    );
    check(
        &mut master,
        vec![release(2, 1, "r")],
        vec![grant(3, 1, "r", Ex, token(1, 2)), bast(3, 1, "r", Cr)],
    );
    check(
        &mut master,
        vec![release(3, 1, "r")],
        vec![grant(3, 2, "r", Cr, token(1, 3)), bast(3, 2, "r", Ex)],
    );
    check(&mut master, vec![release(3, 2, "r")], vec![grant(2, 2, "r", Ex, token(1, 4))]);
}

// Goal: conversions go ahead of new requests, and a down-conversion is granted at once.
// Method: two PR holders; one converts to EX (queued, BAST to the other); a new PR request
// waits behind the conversion; at the release the conversion is granted; its down-conversion
// back to PR is granted at once and lets the new PR in.
#[test]
fn conversions_go_ahead_of_new_requests() {
    let mut master = cluster();
    check(
        &mut master,
        vec![lock(2, 1, "r", Pr), lock(3, 1, "r", Pr), convert(2, 1, "r", Ex), lock(1, 1, "r", Pr)],
        vec![grant(2, 1, "r", Pr, token(1, 1)), grant(3, 1, "r", Pr, token(1, 2)), bast(3, 1, "r", Ex)],
    );
    check(
        &mut master,
        vec![release(3, 1, "r")],
        vec![grant(2, 1, "r", Ex, token(1, 3)), bast(2, 1, "r", Pr)],
    );
    check(
        &mut master,
        vec![convert(2, 1, "r", Pr)],
        vec![grant(2, 1, "r", Pr, token(1, 4)), grant(1, 1, "r", Pr, token(1, 5))],
    );
}

// Goal: an up-conversion is granted at once when the other holders allow it, and a blocked one
// is granted as soon as they do (the original never granted a blocked up-conversion).
#[test]
fn up_conversion_is_granted_when_compatible_with_the_other_holders() {
    let mut master = cluster();
    check(
        &mut master,
        vec![lock(2, 1, "r", Cr), lock(3, 1, "r", Cr), convert(2, 1, "r", Pw)],
        vec![
            grant(2, 1, "r", Cr, token(1, 1)),
            grant(3, 1, "r", Cr, token(1, 2)),
            grant(2, 1, "r", Pw, token(1, 3)),
        ],
    );
    check(&mut master, vec![convert(2, 1, "r", Ex)], vec![bast(3, 1, "r", Ex)]);
    check(&mut master, vec![release(3, 1, "r")], vec![grant(2, 1, "r", Ex, token(1, 4))]);
}

// Goal: NOQUEUE denies instead of queueing, for requests and conversions, leaving no trace;
// a conversion that would deadlock with a queued one is denied; bad conversions are refused.
#[test]
fn noqueue_deadlock_and_invalid_requests_are_denied() {
    let mut master = cluster();
    check(
        &mut master,
        vec![
            lock(2, 1, "r", Pr),
            lock(3, 1, "r", Pr),
            from(3, 1, lock_msg(1, "r", Ex, true, true)),
            try_lock(1, 1, "r", Ex),
            convert(2, 1, "r", Ex),
            convert(3, 1, "r", Ex),
            convert(1, 9, "r", Ex),
            lock(2, 1, "r", Ex),
        ],
        vec![
            grant(2, 1, "r", Pr, token(1, 1)),
            grant(3, 1, "r", Pr, token(1, 2)),
            deny(3, 1, "r", Ex, DenyReason::WouldBlock),
            deny(1, 1, "r", Ex, DenyReason::WouldBlock),
            bast(3, 1, "r", Ex),
            deny(3, 1, "r", Ex, DenyReason::Deadlock),
            deny(1, 9, "r", Ex, DenyReason::NotHeld),
            deny(2, 1, "r", Ex, DenyReason::Invalid),
        ],
    );
    assert_eq!(master.resources().len(), 1);
    assert_eq!(master.resources()[0].waiting.len(), 0, "denied requests leave no trace");
}

// Goal (regression, found by tests/sim.rs seed 720): a conversion that would queue behind an
// earlier conversion its own granted mode blocks is a deadlock, and is denied. Node 2 holds NL
// and converts to EX (blocked by node 3's CR); node 3 then converts CR to EX: it would wait
// behind node 2's conversion, which waits for node 3's CR, for ever (the check only looked at
// holders whose granted mode blocks the new mode; NL blocks nothing). As in the Linux DLM's
// conversion deadlock detection.
#[test]
fn conversion_queued_behind_one_it_blocks_is_a_deadlock() {
    let mut master = cluster();
    check(
        &mut master,
        vec![lock(2, 1, "r", Nl), lock(3, 1, "r", Cr), convert(2, 1, "r", Ex), convert(3, 1, "r", Ex)],
        vec![
            grant(2, 1, "r", Nl, token(1, 1)),
            grant(3, 1, "r", Cr, token(1, 2)),
            bast(3, 1, "r", Ex),
            deny(3, 1, "r", Ex, DenyReason::Deadlock),
        ],
    );
    // Node 3 answers the BAST: node 2's conversion goes through.
    check(&mut master, vec![release(3, 1, "r")], vec![grant(2, 1, "r", Ex, token(1, 3))]);
}

// Goal: a BAST goes to every holder that blocks a waiter, once per mode held, never to
// holders that do not block, and re-arms after a conversion.
#[test]
fn bast_goes_once_to_each_blocking_holder() {
    let mut master = cluster();
    check(
        &mut master,
        vec![lock(2, 1, "r", Cr), lock(3, 1, "r", Pr), lock(1, 1, "r", Pw), lock(1, 2, "r", Ex)],
        vec![
            grant(2, 1, "r", Cr, token(1, 1)),
            grant(3, 1, "r", Pr, token(1, 2)),
            bast(3, 1, "r", Pw),
            bast(2, 1, "r", Ex),
        ],
    );
    check(
        &mut master,
        vec![convert(3, 1, "r", Nl)],
        vec![grant(3, 1, "r", Nl, token(1, 3)), grant(1, 1, "r", Pw, token(1, 4)), bast(1, 1, "r", Ex)],
    );
}

// Goal: the node death sequence: an expired lease fences the node (epoch bump persisted
// first, LEASE_EXPIRE, JOURNAL_RECOVER, recovery started); its locks are not granted to
// others until its recovery is done; its messages are refused meanwhile, and stale-epoch ones
// after it rejoins.
#[test]
fn lease_expiry_fences_then_recovery_releases() {
    let mut master = cluster();
    check(
        &mut master,
        vec![lock(2, 1, "r", Ex), lock(3, 1, "r", Ex), lock(2, 2, "q", Ex), lock(3, 2, "q", Pr)],
        vec![
            grant(2, 1, "r", Ex, token(1, 1)),
            bast(2, 1, "r", Ex),
            grant(2, 2, "q", Ex, token(1, 2)),
            bast(2, 2, "q", Pr),
        ],
    );
    let renew = from(3, 1, renew_msg(3));
    let ack = send(3, 1, Message::LeaseAck { duration_ms: TIMEOUT_MS, lock_count: 0, node: n(3) });
    check_at(&mut master, T0 + 6_000, vec![renew], vec![ack]);
    check_at(&mut master, T0 + 9_999, vec![Input::Tick], vec![]);
    assert_eq!(master.next_deadline_ms(), T0 + TIMEOUT_MS);
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![Input::Tick],
        vec![
            Effect::PersistEpoch(Epoch(2)),
            Effect::NodeDead { node: n(2) },
            send(3, 2, Message::LeaseExpire { node: n(2) }),
            send(3, 2, Message::JournalRecover { node: n(2), slot: 1 }),
            Effect::RunRecovery { node: n(2), slot: 1 },
        ],
    );
    let late = from(2, 1, Message::Release { lock: LockId(1), resource: r("r") });
    let rejoin = from(2, 1, join_msg("h2"));
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![late.clone(), rejoin.clone()],
        vec![
            Effect::Drop { from: n(2), reason: DropReason::Fenced },
            Effect::Drop { from: n(2), reason: DropReason::RecoveryPending },
        ],
    );
    assert!(master.resources().iter().all(|resource| resource.granted.iter().all(|h| h.fenced)));
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![Input::RecoveryDone { node: n(2) }],
        vec![
            send(3, 2, Message::JournalDone { node: n(2), slot: 1 }),
            Effect::NodeRecovered { node: n(2) },
            grant(3, 2, "q", Pr, token(2, 1)),
            grant(3, 1, "r", Ex, token(2, 2)),
        ],
    );
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![rejoin, from(2, 0, join_msg("h2")), late, from(2, 3, renew_msg(2))],
        vec![
            send(2, 2, Message::LeaseExpire { node: n(2) }),
            Effect::Drop { from: n(2), reason: DropReason::Fenced },
            Effect::NodeJoined { node: n(2), epoch: Epoch(2) },
            send(2, 2, join_msg("h1")),
            Effect::Drop { from: n(2), reason: DropReason::StaleEpoch { got: Epoch(1), current: Epoch(2) } },
            Effect::Drop { from: n(2), reason: DropReason::FutureEpoch { got: Epoch(3) } },
        ],
    );
}

// Goal: a JOURNAL_DONE from a live node ends a recovery like the shell's own; a second one is
// a benign drop.
#[test]
fn journal_done_from_a_peer_ends_the_recovery() {
    let mut master = cluster();
    check(
        &mut master,
        vec![lock(2, 1, "r", Ex), lock(3, 1, "r", Ex)],
        vec![grant(2, 1, "r", Ex, token(1, 1)), bast(2, 1, "r", Ex)],
    );
    let renew = from(3, 1, renew_msg(3));
    master.step(T0 + 5_000, renew);
    let effects = master.step(T0 + TIMEOUT_MS, Input::Tick);
    assert!(effects.contains(&Effect::RunRecovery { node: n(2), slot: 1 }));
    let done = from(3, 1, Message::JournalDone { node: n(2), slot: 1 });
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![done.clone(), done],
        vec![
            send(3, 2, Message::JournalDone { node: n(2), slot: 1 }),
            Effect::NodeRecovered { node: n(2) },
            grant(3, 1, "r", Ex, token(2, 1)),
            Effect::Drop { from: n(3), reason: DropReason::NoRecoveryPending },
        ],
    );
}

// Goal: a NODE_JOIN from a node thought alive with another epoch is a restart: the old
// incarnation is declared dead and fenced; the same epoch is a reconnect that keeps the locks.
#[test]
fn restarted_node_is_fenced_and_reconnect_keeps_locks() {
    let mut master = cluster();
    check(&mut master, vec![lock(2, 1, "r", Ex)], vec![grant(2, 1, "r", Ex, token(1, 1))]);
    check(
        &mut master,
        vec![from(2, 1, join_msg("h2"))],
        vec![Effect::NodeJoined { node: n(2), epoch: Epoch(1) }, send(2, 1, join_msg("h1"))],
    );
    check(
        &mut master,
        vec![from(2, 0, join_msg("h2"))],
        vec![
            send(2, 1, Message::LeaseExpire { node: n(2) }),
            Effect::PersistEpoch(Epoch(2)),
            Effect::NodeDead { node: n(2) },
            send(3, 2, Message::LeaseExpire { node: n(2) }),
            send(3, 2, Message::JournalRecover { node: n(2), slot: 1 }),
            Effect::RunRecovery { node: n(2), slot: 1 },
            Effect::Drop { from: n(2), reason: DropReason::RecoveryPending },
        ],
    );
}

// Goal: NODE_LEAVE releases the node's locks at once (no fencing, no recovery) and serves the
// waiters; CACHE_INVAL is forwarded to the other live holders of the resource.
#[test]
fn leave_releases_and_cache_inval_is_forwarded() {
    let mut master = cluster();
    check(
        &mut master,
        vec![lock(2, 1, "r", Cr), lock(3, 1, "r", Cr), lock(1, 1, "r", Cr)],
        vec![
            grant(2, 1, "r", Cr, token(1, 1)),
            grant(3, 1, "r", Cr, token(1, 2)),
            grant(1, 1, "r", Cr, token(1, 3)),
        ],
    );
    let inval = Message::CacheInval { resource: r("r"), start: 4096, length: 512 };
    check(&mut master, vec![from(2, 1, inval.clone())], vec![send(1, 1, inval.clone()), send(3, 1, inval)]);
    check(
        &mut master,
        vec![lock(1, 2, "r", Ex), from(3, 1, Message::NodeLeave { name: "h3".to_owned(), port: 1 })],
        vec![bast(2, 1, "r", Ex), bast(3, 1, "r", Ex), bast(1, 1, "r", Ex), Effect::NodeLeft { node: n(3) }],
    );
    check(&mut master, vec![release(2, 1, "r"), release(1, 1, "r")], vec![grant(1, 2, "r", Ex, token(1, 4))]);
    check(
        &mut master,
        vec![lock(3, 1, "r", Nl)],
        vec![Effect::Drop { from: n(3), reason: DropReason::NotJoined }],
    );
}

// Goal: messages that are not for a master, for another target or from strangers are dropped
// with their reason; a release of an unknown lock is a benign drop.
#[test]
fn misdirected_messages_are_dropped_with_a_reason() {
    let mut master = cluster();
    let wrong_target = Input::Message(Envelope {
        seq: 1,
        sender: n(2),
        target: Some(n(3)),
        epoch: Epoch(1),
        message: renew_msg(2),
    });
    check(
        &mut master,
        vec![
            from(2, 1, Message::LeaseExpire { node: n(3) }),
            wrong_target,
            from(4, 1, renew_msg(4)),
            release(2, 7, "r"),
        ],
        vec![
            Effect::Drop { from: n(2), reason: DropReason::Unexpected },
            Effect::Drop { from: n(2), reason: DropReason::WrongTarget },
            Effect::Drop { from: n(4), reason: DropReason::UnknownNode },
            Effect::Drop { from: n(2), reason: DropReason::UnknownLock },
        ],
    );
}

// Goal: under a random workload of locks, conversions, releases, NOQUEUE, renewals and node
// deaths, the invariants hold after every step, and once everyone releases, every queued
// request was granted. Method: a seeded LCG; a failing seed reproduces.
#[test]
fn random_workloads_keep_the_invariants() {
    for seed in 0..200u64 {
        let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let mut next = |bound: u64| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % bound
        };
        let mut master = cluster();
        let mut now = T0;
        for _ in 0..300 {
            now += next(200);
            let node = 1 + next(3) as u32;
            let epoch = master.nodes().iter().find(|view| view.id == n(node)).map_or(1, |view| view.epoch.0);
            let resource = ["a", "b"][next(2) as usize];
            let mode = LockMode::ALL[next(6) as usize];
            let lock_id = next(4);
            let message = match next(6) {
                0 | 1 => lock_msg(lock_id, resource, mode, next(4) == 0, false),
                2 => lock_msg(lock_id, resource, mode, next(2) == 0, true),
                3 => Message::Release { lock: LockId(lock_id), resource: r(resource) },
                4 => renew_msg(node),
                _ => join_msg("x"),
            };
            let effects = master.step(now, from(node, epoch, message));
            master.check_invariants();
            for effect in effects {
                if let Effect::RunRecovery { node, .. } = effect {
                    master.step(now, Input::RecoveryDone { node });
                    master.check_invariants();
                }
            }
        }
        // Dead nodes rejoin (a quorum grants again) and everyone releases everything it holds,
        // repeatedly, until the table is empty.
        for _ in 0..100 {
            for view in master.nodes() {
                if view.state == crate::NodeState::Absent {
                    master.step(now, from(view.id.get(), 0, join_msg("x")));
                    master.check_invariants();
                }
            }
            let views = master.resources();
            if views.is_empty() {
                break;
            }
            for view in views {
                for holder in view.granted {
                    let epoch = master.nodes().iter().find(|v| v.id == holder.node).map_or(1, |v| v.epoch.0);
                    let input = from(
                        holder.node.get(),
                        epoch,
                        Message::Release { lock: holder.lock, resource: view.name.clone() },
                    );
                    master.step(now, input);
                    master.check_invariants();
                }
            }
            now += TIMEOUT_MS;
            for effect in master.step(now, Input::Tick) {
                if let Effect::RunRecovery { node, .. } = effect {
                    master.step(now, Input::RecoveryDone { node });
                }
            }
        }
        assert!(master.resources().is_empty(), "seed {seed}: locks left: {:?}", master.resources());
    }
}

/// Node 2's view of `Input::Message` from `sender` (node 2 is the master in the takeover tests).
fn to_2(sender: u32, epoch: u64, message: Message) -> Input {
    Input::Message(Envelope { seq: 1, sender: n(sender), target: Some(n(2)), epoch: Epoch(epoch), message })
}

fn reclaim(lock: u64, resource: &str, mode: LockMode, token: u64) -> Message {
    Message::Grant { lock: LockId(lock), resource: r(resource), mode, token }
}

// Goal: master takeover (spec "Lock Mastering"): node 2 takes over from a dead node 1 whose
// last epoch was 5. Its own locks and node 3's are reclaimed (LOCK_GRANT from the holder,
// answered with a grant of the new epoch); requests during the rebuild wait; the rebuild ends
// when the window is over, the old master is declared dead with unknown locks and nothing new
// is granted until its journal recovery is done; then the waiters are served. A reclaim after
// the rebuild, or one that conflicts, is denied NotHeld.
#[test]
fn takeover_rebuilds_the_table_from_the_survivors() {
    let mut config = config();
    config.me = n(2);
    let mut master = Master::new(config, Epoch(5));
    check(&mut master, vec![Input::Start { survivor: true }], vec![Effect::PersistEpoch(Epoch(6))]);
    assert_eq!(master.next_deadline_ms(), T0 + TIMEOUT_MS);
    check_at(
        &mut master,
        T0 + 1,
        vec![
            to_2(2, 6, reclaim(1, "q", Pr, token(5, 1))),
            to_2(2, 6, renew_msg(2)),
            to_2(3, 5, join_msg("h3")),
            to_2(3, 6, reclaim(7, "r", Ex, token(5, 3))),
            to_2(3, 6, reclaim(8, "r", Pr, token(5, 4))),
            to_2(3, 6, lock_msg(9, "q", Ex, false, false)),
            to_2(3, 6, lock_msg(10, "s", Cr, false, false)),
            to_2(3, 6, Message::LeaseRenew { duration_ms: 0, lock_count: 1, node: n(3) }),
        ],
        vec![
            send(2, 6, reclaim(1, "q", Pr, token(6, 1))),
            send(2, 6, Message::LeaseAck { duration_ms: TIMEOUT_MS, lock_count: 1, node: n(2) }),
            Effect::NodeJoined { node: n(3), epoch: Epoch(6) },
            send(3, 6, join_msg("h2")),
            send(3, 6, reclaim(7, "r", Ex, token(6, 2))),
            send(
                3,
                6,
                Message::Deny { lock: LockId(8), resource: r("r"), mode: Pr, reason: DenyReason::NotHeld },
            ),
            send(2, 6, Message::Bast { lock: LockId(1), resource: r("q"), mode: Ex }),
            send(3, 6, Message::LeaseAck { duration_ms: TIMEOUT_MS, lock_count: 1, node: n(3) }),
        ],
    );
    assert!(master.frozen());
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![Input::Tick],
        vec![
            Effect::RebuildDone,
            Effect::NodeDead { node: n(1) },
            send(3, 6, Message::LeaseExpire { node: n(1) }),
            send(3, 6, Message::JournalRecover { node: n(1), slot: 0 }),
            Effect::RunRecovery { node: n(1), slot: 0 },
        ],
    );
    assert!(master.frozen(), "the old master's locks are unknown until its recovery");
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![Input::RecoveryDone { node: n(1) }, to_2(3, 6, reclaim(11, "t", Ex, token(5, 5)))],
        vec![
            send(3, 6, Message::JournalDone { node: n(1), slot: 0 }),
            Effect::NodeRecovered { node: n(1) },
            send(3, 6, reclaim(10, "s", Cr, token(6, 3))),
            send(
                3,
                6,
                Message::Deny { lock: LockId(11), resource: r("t"), mode: Ex, reason: DenyReason::NotHeld },
            ),
        ],
    );
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![to_2(2, 6, Message::Release { lock: LockId(1), resource: r("q") })],
        vec![send(3, 6, reclaim(9, "q", Ex, token(6, 4)))],
    );
}

// Goal: a survivor whose token comes from an epoch at or above the new master's pushes the
// master's epoch past it (tokens only grow), and a fresh joiner during the rebuild has its
// previous incarnation's journal recovered before anything is granted.
#[test]
fn takeover_stays_above_the_survivors_epochs_and_recovers_fresh_joiners() {
    let mut config = config();
    config.me = n(2);
    let mut master = Master::new(config, Epoch(5));
    check(
        &mut master,
        vec![Input::Start { survivor: true }, to_2(2, 6, renew_msg(2))],
        vec![
            Effect::PersistEpoch(Epoch(6)),
            send(2, 6, Message::LeaseAck { duration_ms: TIMEOUT_MS, lock_count: 0, node: n(2) }),
        ],
    );
    check(
        &mut master,
        vec![to_2(3, 8, join_msg("h3"))],
        vec![
            Effect::PersistEpoch(Epoch(9)),
            Effect::NodeJoined { node: n(3), epoch: Epoch(9) },
            send(3, 9, join_msg("h2")),
        ],
    );
    check(
        &mut master,
        vec![to_2(3, 9, reclaim(1, "r", Ex, token(9, 7)))],
        vec![Effect::PersistEpoch(Epoch(10)), send(3, 10, reclaim(1, "r", Ex, token(10, 1)))],
    );
    let mut master = Master::new(master.config().clone(), Epoch(5));
    check(
        &mut master,
        vec![Input::Start { survivor: true }, to_2(2, 6, renew_msg(2))],
        vec![
            Effect::PersistEpoch(Epoch(6)),
            send(2, 6, Message::LeaseAck { duration_ms: TIMEOUT_MS, lock_count: 0, node: n(2) }),
        ],
    );
    check_at(
        &mut master,
        T0 + 1,
        vec![to_2(3, 0, join_msg("h3")), to_2(3, 6, lock_msg(1, "r", Ex, false, false))],
        vec![
            Effect::NodeJoined { node: n(3), epoch: Epoch(6) },
            send(3, 6, join_msg("h2")),
            send(3, 6, Message::JournalRecover { node: n(3), slot: 2 }),
            Effect::RunRecovery { node: n(3), slot: 2 },
        ],
    );
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![Input::Tick],
        vec![
            Effect::RebuildDone,
            Effect::NodeDead { node: n(1) },
            send(3, 6, Message::LeaseExpire { node: n(1) }),
            send(3, 6, Message::JournalRecover { node: n(1), slot: 0 }),
            Effect::RunRecovery { node: n(1), slot: 0 },
        ],
    );
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![Input::RecoveryDone { node: n(1) }, Input::RecoveryDone { node: n(3) }],
        vec![
            send(3, 6, Message::JournalDone { node: n(1), slot: 0 }),
            Effect::NodeRecovered { node: n(1) },
            send(3, 6, Message::JournalDone { node: n(3), slot: 2 }),
            Effect::NodeRecovered { node: n(3) },
            grant(3, 1, "r", Ex, token(6, 1)),
        ],
    );
}

// Goal: a master without a quorum (a majority of the configured nodes alive) grants nothing
// new; requests wait and are served once a quorum is back.
#[test]
fn no_grants_without_a_quorum() {
    let mut master = cluster();
    for effect in master.step(T0 + TIMEOUT_MS, Input::Tick) {
        if let Effect::RunRecovery { node, .. } = effect {
            master.step(T0 + TIMEOUT_MS, Input::RecoveryDone { node });
        }
    }
    assert!(master.frozen());
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![from(1, 3, lock_msg(1, "r", Ex, false, false)), from(1, 3, lock_msg(2, "s", Pr, true, false))],
        vec![send(
            1,
            3,
            Message::Deny { lock: LockId(2), resource: r("s"), mode: Pr, reason: DenyReason::WouldBlock },
        )],
    );
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![from(2, 0, join_msg("h2"))],
        vec![
            Effect::NodeJoined { node: n(2), epoch: Epoch(3) },
            send(2, 3, join_msg("h1")),
            grant(1, 1, "r", Ex, token(3, 1)),
        ],
    );
}

// Goal: every node renews its lease with every peer every `lease_renew_ms` (LEASE_RENEW to all
// peers, as the spec has it, to dead ones too), and keeps each peer's liveness from the
// renewals it hears: the spec's death sequence, steps 1 to 3, in this node's view. A peer never
// heard, or silent for the node timeout, is taken for dead; its next renewal makes it alive.
#[test]
fn renewals_go_to_every_peer_and_each_peer_is_watched() {
    let renew_all = || [1, 3, 4].map(|to| LivenessEffect::Renew { to: n(to) }).to_vec();
    let mut live = Liveness::new(n(2), (1..=4).map(n), 1_000, 300, T0);
    assert_eq!(live.next_deadline_ms(), T0, "the first renewals go at once");
    assert_eq!(live.tick(T0), renew_all());
    assert_eq!(live.renewal(T0 + 100, n(1)), vec![LivenessEffect::PeerAlive { node: n(1) }]);
    assert_eq!(live.renewal(T0 + 150, n(1)), vec![]);
    assert_eq!(live.renewal(T0 + 200, n(3)), vec![LivenessEffect::PeerAlive { node: n(3) }]);
    assert_eq!(live.renewal(T0 + 200, n(2)), vec![], "its own renewal is no peer's");
    assert_eq!(live.renewal(T0 + 200, n(9)), vec![], "not a configured node");
    assert_eq!(live.tick(T0 + 299), vec![]);
    assert_eq!(live.next_deadline_ms(), T0 + 300);
    assert_eq!(live.tick(T0 + 300), renew_all());
    assert_eq!(
        live.peers(),
        vec![
            PeerView { id: n(1), state: PeerState::Alive, last_renewal_ms: Some(T0 + 150) },
            PeerView { id: n(3), state: PeerState::Alive, last_renewal_ms: Some(T0 + 200) },
            PeerView { id: n(4), state: PeerState::Waiting, last_renewal_ms: None },
        ]
    );
    assert_eq!(live.tick(T0 + 600), renew_all());
    assert_eq!(live.tick(T0 + 900), renew_all());
    assert_eq!(live.next_deadline_ms(), T0 + 1_000);
    assert_eq!(live.tick(T0 + 1_000), vec![LivenessEffect::PeerDead { node: n(4), last_renewal_ms: None }]);
    assert_eq!(live.renewal(T0 + 1_100, n(1)), vec![]);
    let mut dead_then_renew = vec![LivenessEffect::PeerDead { node: n(3), last_renewal_ms: Some(T0 + 200) }];
    dead_then_renew.extend(renew_all());
    assert_eq!(live.tick(T0 + 1_300), dead_then_renew);
    assert_eq!(live.tick(T0 + 1_400), vec![], "a dead peer is reported once");
    assert_eq!(live.renewal(T0 + 1_500, n(4)), vec![LivenessEffect::PeerAlive { node: n(4) }]);
    let states: Vec<PeerState> = live.peers().iter().map(|peer| peer.state).collect();
    assert_eq!(states, [PeerState::Alive, PeerState::Dead, PeerState::Alive]);
    assert_eq!(live.next_deadline_ms(), T0 + 1_600);
}

/// A cluster whose BAST timeout (3 s) is shorter than the node timeout (10 s).
fn short_bast_cluster() -> Master {
    cluster_with(Config { bast_timeout_ms: 3_000, ..config() })
}

fn revocation(to: u32, lock: u64, resource: &str, mode: LockMode) -> Effect {
    deny(to, lock, resource, mode, DenyReason::Revoked)
}

// Goal: `bast_timeout_ms` is enforced: a holder that neither converts nor releases within it
// after its BAST, while the waiter still waits, has its lock revoked (Effect::Revoked, then
// LOCK_DENY Revoked to its node); the lock stays in the table, revoked and blocking, until the
// node releases it; the revocation goes again every BAST timeout; a conversion that crossed it
// is denied Revoked; the release serves the waiter.
#[test]
fn an_unanswered_bast_revokes_the_lock_once_its_timeout_passes() {
    let mut master = short_bast_cluster();
    check(
        &mut master,
        vec![lock(2, 1, "r", Ex), lock(3, 1, "r", Pr)],
        vec![grant(2, 1, "r", Ex, token(1, 1)), bast(2, 1, "r", Pr)],
    );
    assert_eq!(master.next_deadline_ms(), T0 + 3_000, "the BAST deadline comes before the leases'");
    check_at(&mut master, T0 + 2_999, vec![Input::Tick], vec![]);
    check_at(
        &mut master,
        T0 + 3_000,
        vec![Input::Tick],
        vec![Effect::Revoked { node: n(2), lock: LockId(1), resource: r("r") }, revocation(2, 1, "r", Ex)],
    );
    let view = &master.resources()[0];
    assert!(view.granted[0].revoked && !view.granted[0].fenced, "kept, revoked: {view:?}");
    assert_eq!(view.waiting.len(), 1, "the waiter still waits until the node releases");
    check_at(&mut master, T0 + 3_001, vec![convert(2, 1, "r", Pr)], vec![revocation(2, 1, "r", Ex)]);
    assert_eq!(master.next_deadline_ms(), T0 + 6_000);
    check_at(&mut master, T0 + 6_000, vec![Input::Tick], vec![revocation(2, 1, "r", Ex)]);
    check_at(&mut master, T0 + 6_001, vec![release(2, 1, "r")], vec![grant(3, 1, "r", Pr, token(1, 2))]);
    assert_eq!(master.next_deadline_ms(), T0 + TIMEOUT_MS, "no BAST deadline is left");
}

// Goal: what is not revoked: a holder that downgrades within the timeout; a lock held until
// released (the top bit of its id: `mxfsctl lock`), which gets the BAST as a hint; a holder
// whose waiter left before the timeout, which is re-armed instead (the next conflict sends a
// new BAST and starts a new timeout).
#[test]
fn answered_basts_held_locks_and_gone_waiters_are_not_revoked() {
    let mut master = short_bast_cluster();
    let held = LockId::NOREVOKE | 2;
    check(
        &mut master,
        vec![
            lock(2, 1, "a", Ex),
            lock(2, held, "b", Ex),
            lock(3, 5, "c", Ex),
            lock(3, 1, "a", Pr),
            lock(3, 2, "b", Pr),
            lock(2, 6, "c", Pr),
        ],
        vec![
            grant(2, 1, "a", Ex, token(1, 1)),
            grant(2, held, "b", Ex, token(1, 2)),
            grant(3, 5, "c", Ex, token(1, 3)),
            bast(2, 1, "a", Pr),
            bast(2, held, "b", Pr),
            bast(3, 5, "c", Pr),
        ],
    );
    check_at(
        &mut master,
        T0 + 1_000,
        vec![convert(2, 1, "a", Pr), release(2, 6, "c")],
        vec![grant(2, 1, "a", Pr, token(1, 4)), grant(3, 1, "a", Pr, token(1, 5))],
    );
    check_at(&mut master, T0 + 3_000, vec![Input::Tick], vec![]);
    assert!(master.resources().iter().all(|view| view.granted.iter().all(|holder| !holder.revoked)));
    check_at(&mut master, T0 + 3_001, vec![lock(2, 7, "c", Pr)], vec![bast(3, 5, "c", Pr)]);
    assert_eq!(master.next_deadline_ms(), T0 + 6_001);
    check_at(
        &mut master,
        T0 + 6_001,
        vec![Input::Tick],
        vec![Effect::Revoked { node: n(3), lock: LockId(5), resource: r("c") }, revocation(3, 5, "c", Ex)],
    );
}

// Goal: nothing is revoked while grants are held (here: no quorum): a holder that downgrades
// then would be queued, not granted. The deadline is looked at again once grants resume, and
// the master's own clients' locks are revoked like anyone's (the LOCK_DENY goes to its own
// node).
#[test]
fn no_revocation_while_grants_are_held() {
    let mut master = short_bast_cluster();
    let leave = |node: u32| from(node, 1, Message::NodeLeave { name: format!("h{node}"), port: 1 });
    check(
        &mut master,
        vec![lock(1, 1, "r", Ex), lock(1, 2, "r", Pr), leave(2), leave(3)],
        vec![
            grant(1, 1, "r", Ex, token(1, 1)),
            bast(1, 1, "r", Pr),
            Effect::NodeLeft { node: n(2) },
            Effect::NodeLeft { node: n(3) },
        ],
    );
    assert!(master.frozen());
    assert_eq!(master.next_deadline_ms(), u64::MAX, "no tick is due while grants are held");
    check_at(&mut master, T0 + 3_000, vec![Input::Tick], vec![]);
    check_at(
        &mut master,
        T0 + 5_000,
        vec![from(2, 0, join_msg("h2"))],
        vec![Effect::NodeJoined { node: n(2), epoch: Epoch(1) }, send(2, 1, join_msg("h1"))],
    );
    assert_eq!(master.next_deadline_ms(), T0 + 3_000, "the overdue deadline asks for a tick at once");
    check_at(
        &mut master,
        T0 + 5_000,
        vec![Input::Tick],
        vec![Effect::Revoked { node: n(1), lock: LockId(1), resource: r("r") }, revocation(1, 1, "r", Ex)],
    );
}

// Goal: the majority rule in a two-node cluster (docs/mxfsd.md): a majority of 2 is 2, so when
// either node is gone the other grants nothing; requests wait (NOQUEUE ones are refused) and
// are served once the other node is back. The survivor's lone master never has a quorum.
#[test]
fn two_node_cluster_grants_nothing_while_either_node_is_gone() {
    let nodes: Vec<NodeConfig> =
        (1..=2).map(|id| NodeConfig { id: n(id), name: format!("h{id}"), slot: id - 1 }).collect();
    let config = Config { nodes, ..config() };
    let mut master = Master::new(config.clone(), Epoch(0));
    master.step(T0, Input::Start { survivor: false });
    master.step(T0, from(2, 0, join_msg("h2")));
    for node in [1, 2] {
        master.step(T0, Input::RecoveryDone { node: n(node) });
    }
    assert!(master.has_quorum() && !master.frozen());
    check(&mut master, vec![lock(2, 1, "r", Ex)], vec![grant(2, 1, "r", Ex, token(1, 1))]);
    let died = master.step(T0 + TIMEOUT_MS, Input::Tick);
    assert!(died.contains(&Effect::NodeDead { node: n(2) }), "{died:?}");
    master.step(T0 + TIMEOUT_MS, Input::RecoveryDone { node: n(2) });
    assert!(!master.has_quorum() && master.frozen(), "one node of two is no majority");
    assert!(master.resources().is_empty(), "the dead node's lock went with its recovery");
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![from(1, 2, lock_msg(1, "r", Ex, false, false)), from(1, 2, lock_msg(2, "s", Ex, true, false))],
        vec![send(
            1,
            2,
            Message::Deny { lock: LockId(2), resource: r("s"), mode: Ex, reason: DenyReason::WouldBlock },
        )],
    );
    check_at(
        &mut master,
        T0 + TIMEOUT_MS,
        vec![from(2, 0, join_msg("h2"))],
        vec![
            Effect::NodeJoined { node: n(2), epoch: Epoch(2) },
            send(2, 2, join_msg("h1")),
            grant(1, 1, "r", Ex, token(2, 1)),
        ],
    );
    let mut lone = Master::new(Config { me: n(2), ..config }, Epoch(2));
    lone.step(T0, Input::Start { survivor: false });
    lone.step(T0 + TIMEOUT_MS, Input::Tick);
    assert!(!lone.has_quorum() && lone.frozen(), "node 2 alone is no majority either");
}
