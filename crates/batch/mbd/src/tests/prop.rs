//! Property: any sequence of inputs — client requests, registrations,
//! plausible and implausible sbatchd answers, duplicates, ticks and restarts —
//! keeps every invariant and replay-equality after every step (the harness
//! checks both on each step).

use lava_batch_wire::{self as wire, SignalAction, SignalOutcome};
use proptest::prelude::*;

use super::harness::*;
use crate::{ClientId, Effect, Input, ToSbd};

const USERS: [&str; 4] = ["alice", "bob", "admin", "root"];
const HOSTS: [&str; 3] = ["hostA", "hostB", "hostC"];

#[derive(Clone, Debug)]
enum Op {
    Submit {
        who: usize,
        request_id: u64,
        queue: u8,
        n_slots: u32,
        hold: bool,
        host: Option<usize>,
        /// A job array and a dependency (see `Op::run`).
        shape: u8,
    },
    Signal {
        who: usize,
        request_id: u64,
        job: u32,
        all: bool,
        action: u8,
    },
    Query {
        who: usize,
        filter: u32,
    },
    Register {
        host: usize,
        n_cpus: u32,
    },
    Disconnect {
        host: usize,
    },
    /// Root signals the job of the `pick`-th NEW_JOB sent (likely started).
    SignalDispatched {
        pick: usize,
        action: u8,
    },
    /// Answer the `pick`-th NEW_JOB or JOB_SIGNAL sent so far, the way `kind` says.
    React {
        pick: usize,
        kind: u8,
    },
    /// A message about an arbitrary job from an arbitrary host.
    Stray {
        host: usize,
        job: u32,
        kind: u8,
    },
    /// Deliver an sbatchd message again.
    Redeliver {
        pick: usize,
    },
    Tick {
        advance_ms: u64,
    },
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..4usize, 0..24u64, 0..3u8, 1..4u32, proptest::bool::weighted(0.2), proptest::option::of(0..3usize), 0..12u8)
            .prop_map(|(who, request_id, queue, n_slots, hold, host, shape)| Op::Submit { who, request_id, queue, n_slots, hold, host, shape }),
        3 => (0..4usize, 0..24u64, 1..16u32, proptest::bool::weighted(0.2), 0..6u8)
            .prop_map(|(who, request_id, job, all, action)| Op::Signal { who, request_id, job, all, action }),
        3 => (any::<usize>(), 0..6u8).prop_map(|(pick, action)| Op::SignalDispatched { pick, action }),
        1 => (0..4usize, 0..7u32).prop_map(|(who, filter)| Op::Query { who, filter }),
        2 => (0..3usize, 0..5u32).prop_map(|(host, n_cpus)| Op::Register { host, n_cpus }),
        1 => (0..3usize).prop_map(|host| Op::Disconnect { host }),
        12 => (any::<usize>(), 0..8u8).prop_map(|(pick, kind)| Op::React { pick, kind }),
        1 => (0..3usize, 0..10u32, 0..4u8).prop_map(|(host, job, kind)| Op::Stray { host, job, kind }),
        2 => any::<usize>().prop_map(|pick| Op::Redeliver { pick }),
        2 => (0..20_000u64).prop_map(|advance_ms| Op::Tick { advance_ms }),
        1 => Just(Op::Restart),
    ]
}

fn action(n: u8) -> SignalAction {
    [
        SignalAction::Stop,
        SignalAction::Continue,
        SignalAction::Terminate,
        SignalAction::Signal(9),
        SignalAction::Signal(1),
        SignalAction::Signal(19),
    ][usize::from(n) % 6]
}

/// `input` about `job` instead of the job its helper named (array elements).
fn about(job: wire::WireJobRef, mut input: Input) -> Input {
    match &mut input {
        Input::NewJobReply { reply, .. } => reply.job = job,
        Input::JobExecute { msg, .. } => msg.job = job,
        Input::JobFinish { msg, .. } => msg.job = job,
        Input::JobSignalReply { msg, .. } => msg.job = job,
        _ => {}
    }
    input
}

/// sbatchd's plausible answer to a message it received.
fn answer(to: &str, msg: &ToSbd, kind: u8) -> Option<Input> {
    match msg {
        ToSbd::NewJob(specs) => {
            let id = specs.job.job_id;
            let pid = 1000 + (id * 16 + specs.job.array_index) as i32;
            Some(about(
                specs.job,
                match kind % 5 {
                    0 | 1 => started(to, id, pid),
                    2 => refused(to, id, "cannot"),
                    3 => executed(to, id, pid),
                    _ => finished(to, id, pid, i32::from(kind % 2) * 256),
                },
            ))
        }
        ToSbd::JobSignal(signal) => {
            let outcome = [
                SignalOutcome::Delivered,
                SignalOutcome::Delivered,
                SignalOutcome::NoSuchJob,
                SignalOutcome::AlreadyFinished,
                SignalOutcome::Failed(1),
            ][usize::from(kind) % 5];
            Some(about(signal.job, signal_reply(to, signal.job.job_id, signal.signal_seq, outcome)))
        }
        _ => None,
    }
}

struct World {
    h: Harness,
    /// Every NEW_JOB and JOB_SIGNAL sent, with its destination.
    sent: Vec<(String, ToSbd)>,
    /// Every sbatchd message delivered.
    delivered: Vec<Input>,
}

impl World {
    fn step(&mut self, input: Input) {
        let effects = self.h.step(input);
        for effect in effects {
            if let Effect::SendSbd { host, msg: msg @ (ToSbd::NewJob(_) | ToSbd::JobSignal(_)), .. } = effect
            {
                self.sent.push((host.to_string(), msg));
            }
        }
    }

    fn deliver(&mut self, input: Input) {
        self.delivered.push(input.clone());
        self.step(input);
    }

    fn run(&mut self, op: Op) {
        match op {
            Op::Submit { who, request_id, queue, n_slots, hold, host, shape } => {
                let mut request = request();
                request.job_name =
                    ["", "", "", "p[1-3]", "p[2,4-6:2]%1", "p[0]"][usize::from(shape % 6)].into();
                request.dependency =
                    ["", "", "ended(1)", "done(2) || !started(p)", "exit(3[1], > 0)", "done("]
                        [usize::from(shape / 2)]
                    .into();
                request.queue = ["", "high", "nosuch"][usize::from(queue)].into();
                request.n_slots = n_slots;
                request.hold = hold;
                request.hosts = host.map(|h| vec![HOSTS[h].to_owned()]).unwrap_or_default();
                self.step(submit(request_id, request_id, USERS[who], request));
            }
            Op::Signal { who, request_id, job, all, action: n } => {
                let request = wire::SignalRequest {
                    jobs: if all { vec![] } else { vec![wref(job)] },
                    all_jobs: all,
                    user: if all && who >= 2 { "all".into() } else { String::new() },
                    action: action(n),
                };
                let input = Input::Signal {
                    client: ClientId(request_id),
                    request_id: rid(100 + request_id),
                    caller: caller(USERS[who]),
                    request,
                };
                self.step(input);
            }
            Op::SignalDispatched { pick, action: n } => {
                let dispatched: Vec<wire::WireJobRef> = self
                    .sent
                    .iter()
                    .filter_map(|(_, msg)| match msg {
                        ToSbd::NewJob(specs) => Some(specs.job),
                        _ => None,
                    })
                    .collect();
                if !dispatched.is_empty() {
                    let job = dispatched[pick % dispatched.len()];
                    let request_id = 1000 + self.delivered.len() as u64;
                    let mut input = signal(request_id, request_id, "root", &[job.job_id], action(n));
                    if let Input::Signal { request, .. } = &mut input {
                        request.jobs = vec![job];
                    }
                    self.step(input);
                }
            }
            Op::Query { who, filter } => self.step(query(0, USERS[who], filter)),
            Op::Register { host: h, n_cpus } => self.step(registered(HOSTS[h], n_cpus)),
            Op::Disconnect { host: h } => self.step(Input::HostDisconnected { host: host(HOSTS[h]) }),
            Op::React { pick, kind } => {
                if self.sent.is_empty() {
                    return;
                }
                let (to, msg) = self.sent[pick % self.sent.len()].clone();
                if let Some(input) = answer(&to, &msg, kind) {
                    self.deliver(input);
                }
            }
            Op::Stray { host: h, job, kind } => {
                let to = HOSTS[h];
                let input = match kind {
                    0 => started(to, job, 7),
                    1 => refused(to, job, "stray"),
                    2 => executed(to, job, 7),
                    _ => finished(to, job, 7, 9),
                };
                self.deliver(input);
            }
            Op::Redeliver { pick } => {
                if !self.delivered.is_empty() {
                    let input = self.delivered[pick % self.delivered.len()].clone();
                    self.step(input);
                }
            }
            Op::Tick { advance_ms } => {
                let now = self.h.now_ms - T0 + advance_ms;
                self.h.at(now);
                self.step(Input::Tick);
            }
            Op::Restart => self.h.restart(),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    // Goal: invariants and replay-equality (full log, and snapshot + step)
    // survive arbitrary interleavings, duplicates and restarts.
    #[test]
    fn random_inputs_keep_invariants_and_replay_equality(ops in proptest::collection::vec(op(), 1..160)) {
        let mut world = World { h: Harness::new(), sent: Vec::new(), delivered: Vec::new() };
        world.step(Input::Start);
        for op in ops {
            world.run(op);
        }
    }
}
