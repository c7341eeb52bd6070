//! Scheduling policies (docs/batch.md, "Scheduling"): `-R` select, order,
//! rusage and span over lim's loads; queue and host slot limits; exclusive
//! jobs; begin times; fairshare; the pending reason of every job that waits;
//! and the submissions a queue refuses. Each test builds a small cluster, steps
//! the inputs and reads where jobs went (`bjobs`' execution hosts) and why the
//! others wait (`bjobs`' reason); the harness proves replay after every step.

use lava_batch_ll::JobStatus;
use lava_batch_ll::resreq::LOAD_INDEX_NAMES;
use lava_batch_wire as wire;

use super::harness::*;
use crate::{ClientReply, Effect, Input, LimFacts, MbdConfig, QueueConfig, QueueLimit, QueueResourceLimits};

/// lim's report of `name`: the given load indices (by name), the others 0; 8 CPUs, 16 GB.
fn load(name: &str, indices: &[(&str, f32)]) -> Input {
    let mut li = [0.0; 11];
    for (index, value) in indices {
        li[LOAD_INDEX_NAMES.iter().position(|n| n == index).expect("a load index")] = *value;
    }
    let facts = LimFacts {
        load: Some(li),
        ncpus: 8,
        maxmem_mb: 16_000,
        maxswp_mb: 2_000,
        locked: false,
        busy: false,
    };
    Input::HostLoad { host: host(name), facts: Box::new(facts) }
}

fn with_resreq(text: &str) -> wire::SubmitRequest {
    let mut request = request();
    request.res_req = text.into();
    request
}

fn slots(n: u32, res_req: &str) -> wire::SubmitRequest {
    let mut request = with_resreq(res_req);
    request.n_slots = n;
    request
}

/// Where job `id` runs (one entry per slot) and why it waits, as `bjobs` shows them.
fn placed(h: &mut Harness, id: u32) -> (Vec<String>, String) {
    let info = h.infos(&[id]).remove(0);
    (info.exec_hosts, info.reason)
}

fn on(hosts: &[&str]) -> (Vec<String>, String) {
    (hosts.iter().map(|h| (*h).to_owned()).collect(), String::new())
}

fn waiting(reason: &str) -> (Vec<String>, String) {
    (Vec::new(), reason.to_owned())
}

/// A harness with hostA (8 CPUs), hostB (MXJ 1) and hostC (MXJ 4) registered.
fn cluster(config: MbdConfig) -> Harness {
    let mut h = Harness::with_config(config);
    for name in ["hostA", "hostB", "hostC"] {
        h.step(registered(name, 8));
    }
    h
}

fn rejected(h: &mut Harness, n: u64, who: &str, request: wire::SubmitRequest, message: &str) {
    h.check(submit(n, n, who, request), vec![reply(n, ClientReply::error(wire::ERR_REJECTED, message))]);
}

// Goal: select keeps only the hosts whose loads and static facts satisfy it,
// a host without load information never satisfies a load condition, and a job
// no host satisfies waits with LSF's per-host reason.
#[test]
fn select_chooses_and_refuses_hosts() {
    let mut h = cluster(config());
    h.step(load("hostA", &[("mem", 1000.0)]));
    h.step(load("hostC", &[("mem", 8000.0)]));
    h.step(submit(1, 1, "alice", with_resreq("select[mem>4000 && ncpus>=8]")));
    assert_eq!(placed(&mut h, 1), on(&["hostC"]));
    h.step(submit(2, 2, "alice", with_resreq("mem>10000")));
    assert_eq!(placed(&mut h, 2), waiting("Job's resource requirements not satisfied: 3 hosts"));
    h.step(submit(3, 3, "alice", with_resreq("hostname==hostB || mem<2000")));
    assert_eq!(placed(&mut h, 3), on(&["hostA"]));
    // Reasons are not durable: a restart forgets them until the next turn.
    h.restart();
    assert_eq!(placed(&mut h, 2), waiting(crate::REASON_NEW_JOB));
}

// Goal: order puts the best host first (lowest r15s; `-` reverses; mem is best high),
// and without an order section hosts go in lsf.cluster order.
#[test]
fn order_ranks_the_candidates() {
    let mut h = cluster(config());
    h.step(load("hostA", &[("r15s", 2.0), ("mem", 500.0)]));
    h.step(load("hostB", &[("r15s", 1.0), ("mem", 9000.0)]));
    h.step(load("hostC", &[("r15s", 0.5), ("mem", 100.0)]));
    h.step(submit(1, 1, "alice", with_resreq("order[r15s]")));
    h.step(submit(2, 2, "alice", with_resreq("order[-r15s]")));
    h.step(submit(3, 3, "alice", with_resreq("order[mem]")));
    h.step(submit(4, 4, "alice", request()));
    assert_eq!(placed(&mut h, 1), on(&["hostC"]));
    assert_eq!(placed(&mut h, 2), on(&["hostA"]));
    assert_eq!(placed(&mut h, 3), on(&["hostB"]));
    assert_eq!(placed(&mut h, 4), on(&["hostA"]));
}

// Goal: rusage reserves memory on the chosen host while the job runs: another
// job's rusage and select see lim's mem minus the reservations, and the
// reservation ends with the job.
#[test]
fn rusage_reserves_memory_until_the_job_ends() {
    let mut h = cluster(config());
    h.step(load("hostC", &[("mem", 1000.0)]));
    h.step(submit(1, 1, "alice", with_resreq("rusage[mem=600]")));
    assert_eq!(placed(&mut h, 1), on(&["hostC"]));
    h.step(submit(2, 2, "alice", with_resreq("rusage[mem=600]")));
    assert_eq!(
        placed(&mut h, 2),
        waiting(
            "Load information unavailable: 2 hosts;\n \
             Job's requirements for reserving resource (mem) not satisfied: 1 host"
        )
    );
    h.step(submit(3, 3, "alice", with_resreq("select[mem>500]")));
    assert_eq!(placed(&mut h, 3), waiting("Job's resource requirements not satisfied: 3 hosts"));
    h.step(started("hostC", 1, 100));
    h.step(finished("hostC", 1, 100, 0));
    assert_eq!(placed(&mut h, 2), on(&["hostC"]));
}

// Goal: a parallel job spans hosts by default (one exec_hosts entry per slot),
// span[hosts=1] keeps it on one host, span[ptile=N] puts N slots per host.
#[test]
fn span_places_the_slots() {
    let mut h = Harness::new();
    h.step(registered("hostB", 8));
    h.step(registered("hostC", 8));
    h.step(submit(1, 1, "alice", slots(2, "span[hosts=1]")));
    assert_eq!(placed(&mut h, 1), on(&["hostC", "hostC"]));
    h.step(submit(2, 2, "alice", slots(2, "span[ptile=1]")));
    assert_eq!(placed(&mut h, 2), on(&["hostB", "hostC"]));
    h.step(submit(3, 3, "alice", slots(2, "span[hosts=1]")));
    assert_eq!(
        placed(&mut h, 3),
        waiting(
            "Unable to reach slave batch server: 1 host;\n Job slot limit reached: 1 host;\n Not enough job slot(s): 1 host"
        )
    );
    h.step(registered("hostA", 3));
    assert_eq!(placed(&mut h, 3), on(&["hostA", "hostA"]));
    h.step(submit(4, 4, "alice", slots(2, "")));
    assert_eq!(placed(&mut h, 4), on(&["hostA", "hostC"]));
}

// Goal: QJOB_LIMIT and UJOB_LIMIT hold a queue's and a user's slots; the
// waiting jobs say which limit, and a finish lets the next one start.
#[test]
fn queue_and_user_slot_limits() {
    let mut config = config();
    config.queues[0].qjob_limit = Some(3);
    config.queues[0].ujob_limit = Some(2);
    let mut h = cluster(config);
    for n in 1..=4 {
        h.step(submit(n, n, if n == 4 { "bob" } else { "alice" }, request()));
    }
    assert_eq!(placed(&mut h, 1), on(&["hostA"]));
    assert_eq!(placed(&mut h, 2), on(&["hostA"]));
    assert_eq!(placed(&mut h, 3), waiting("User has reached the per-user job slot limit of the queue"));
    assert_eq!(placed(&mut h, 4), on(&["hostA"]));
    h.step(submit(5, 5, "carol", request()));
    assert_eq!(placed(&mut h, 5), waiting("The queue has reached its job slot limit"));
    h.step(started("hostA", 4, 104));
    h.step(finished("hostA", 4, 104, 0));
    assert_eq!(placed(&mut h, 5), on(&["hostA"]));
}

// Goal: HJOB_LIMIT caps a queue's slots per host and JL/U a user's slots per
// host; the job goes to the next host, or waits with the host reasons.
#[test]
fn per_host_limits() {
    let mut config = config();
    config.queues[0].hjob_limit = Some(2);
    config.hosts[2].user_job_limit = Some(1);
    let mut h = cluster(config);
    for n in 1..=5 {
        h.step(submit(n, n, "alice", request()));
    }
    let hosts: Vec<Vec<String>> = (1..=5).map(|id| placed(&mut h, id).0).collect();
    assert_eq!(hosts, [vec!["hostA"], vec!["hostA"], vec!["hostB"], vec!["hostC"], vec![]]);
    assert_eq!(
        placed(&mut h, 5).1,
        "Job slot limit reached: 1 host;\n Queue's per-host job slot limit reached: 1 host;\n \
         Host's per-user job slot limit reached: 1 host"
    );
    h.step(submit(6, 6, "bob", request()));
    assert_eq!(placed(&mut h, 6), on(&["hostC"]));
}

// Goal: PJOB_LIMIT caps a queue's slots per host at the limit times the host's CPUs,
// rounded up (0.3 × 8 CPUs = 3 slots), below MXJ; the waiting job gives LSF's per-CPU
// reason per host, another queue is not bound by it, and a finish lets the next one start.
#[test]
fn per_cpu_limit_of_a_queue() {
    let mut config = config();
    config.queues[0].pjob_limit_milli = Some(300);
    let mut h = cluster(config);
    for n in 1..=8 {
        h.step(submit(n, n, "alice", request()));
    }
    let hosts: Vec<Vec<String>> = (1..=8).map(|id| placed(&mut h, id).0).collect();
    let expected: Vec<Vec<&str>> =
        [["hostA"].as_slice(), &["hostA"], &["hostA"], &["hostB"], &["hostC"], &["hostC"], &["hostC"], &[]]
            .iter()
            .map(|hosts| hosts.to_vec())
            .collect();
    assert_eq!(hosts, expected);
    assert_eq!(
        placed(&mut h, 8).1,
        "Queue's per-CPU job slot limit reached: 2 hosts;\n Job slot limit reached: 1 host"
    );
    let mut high = request();
    high.queue = "high".into();
    h.step(submit(9, 9, "alice", high));
    assert_eq!(placed(&mut h, 9), on(&["hostA"]));
    h.step(started("hostC", 5, 105));
    h.step(finished("hostC", 5, 105, 0));
    assert_eq!(placed(&mut h, 8), on(&["hostC"]));
}

// Goal: an exclusive job needs a host with no job and then runs alone there;
// a queue without EXCLUSIVE = y refuses -x.
#[test]
fn exclusive_jobs_run_alone() {
    let mut config = config();
    config.queues[0].exclusive = true;
    let mut h = cluster(config);
    h.step(submit(1, 1, "alice", request()));
    let mut exclusive = request();
    exclusive.exclusive = true;
    h.step(submit(2, 2, "alice", exclusive.clone()));
    assert_eq!(placed(&mut h, 2), on(&["hostB"]));
    h.step(submit(3, 3, "alice", exclusive.clone()));
    assert_eq!(placed(&mut h, 3), on(&["hostC"]));
    h.step(submit(4, 4, "alice", exclusive.clone()));
    assert_eq!(
        placed(&mut h, 4),
        waiting(
            "Job slot limit reached: 1 host;\n Running an exclusive job: 1 host;\n \
             Job's requirement for exclusive execution not satisfied: 1 host"
        )
    );
    // hostC has free slots, but its exclusive job keeps every other job off it.
    h.step(submit(5, 5, "alice", slots(8, "span[hosts=1]")));
    assert_eq!(
        placed(&mut h, 5).1,
        "Job slot limit reached: 1 host;\n Not enough job slot(s): 1 host;\n Running an exclusive job: 1 host"
    );
    exclusive.queue = "high".into();
    rejected(&mut h, 6, "alice", exclusive, "Queue does not accept EXCLUSIVE jobs");
}

// Goal: a job with a begin time (-b) waits with LSF's reason and starts on
// the first tick at or after that time, without any other input.
#[test]
fn begin_time_holds_the_job_until_then() {
    let mut h = cluster(config());
    let mut later = request();
    later.begin_time = i64::try_from(T0 / 1000).expect("fits") + 30;
    h.step(submit(1, 1, "alice", later));
    assert_eq!(placed(&mut h, 1), waiting("The job has a specified start time"));
    h.at(29_000).step(Input::Tick);
    assert_eq!(placed(&mut h, 1).1, "The job has a specified start time");
    h.at(30_000).step(Input::Tick);
    assert_eq!(placed(&mut h, 1), on(&["hostA"]));
}

// Goal: lim's loads change without any step of ours; the tick after
// MBD_SLEEP_TIME runs a dispatch turn that sees them.
#[test]
fn a_turn_every_mbd_sleep_time_sees_new_loads() {
    let mut h = cluster(config());
    h.step(load("hostC", &[("mem", 100.0)]));
    h.step(submit(1, 1, "alice", with_resreq("mem>1000")));
    h.step(load("hostC", &[("mem", 5000.0)]));
    h.at(1_000).step(Input::Tick);
    assert_eq!(placed(&mut h, 1).0, Vec::<String>::new());
    h.at(crate::config::MBD_SLEEP_TIME_MS_DEFAULT).step(Input::Tick);
    assert_eq!(placed(&mut h, 1), on(&["hostC"]));
}

// Goal: within a FAIRSHARE queue the user with the highest shares per held
// slot goes next (alice 3 shares, bob 1: alice, alice, then a tie that the
// name breaks, then bob), where first come, first served would start only alice.
#[test]
fn fairshare_orders_users_by_dynamic_priority() {
    let mut config = config();
    config.queues[0].fairshare = Some(vec![("alice".into(), 3), ("default".into(), 1)]);
    let mut h = Harness::with_config(config);
    for n in 1..=8 {
        h.step(submit(n, n, if n <= 4 { "alice" } else { "bob" }, request()));
    }
    h.step(registered("hostC", 8));
    let running: Vec<u32> = (1..=8).filter(|id| !placed(&mut h, *id).0.is_empty()).collect();
    assert_eq!(running, [1, 2, 3, 5]);
    // A user not listed gets `default`'s share; the waiting jobs say why.
    assert_eq!(
        placed(&mut h, 4).1,
        "Unable to reach slave batch server: 2 hosts;\n Job slot limit reached: 1 host"
    );
}

// Goal: what the queue does not allow is refused at submission with LSF's
// message, and nothing is logged: USERS, -W and -M over RUNLIMIT and MEMLIMIT,
// a malformed -R, a -R naming a resource the cluster does not have.
#[test]
fn policy_violations_are_refused_at_submission() {
    let mut config = config();
    config.queues[0].users = Some(vec![user("alice")]);
    config.queues[0].run_limit_s = Some(QueueLimit { default: Some(60), max: 600 });
    config.queues[0].mem_limit_kb = Some(QueueLimit { default: None, max: 1024 });
    config.resources = vec!["cs".into()];
    config.hosts[0].resources = vec!["cs".into()];
    let mut h = cluster(config);
    rejected(&mut h, 1, "bob", request(), "User cannot use the queue");
    let mut long = request();
    long.run_limit_s = 601;
    rejected(&mut h, 2, "alice", long, "Cannot exceed queue's hard limit(s)");
    let mut big = request();
    big.mem_limit_kb = 1025;
    rejected(&mut h, 3, "alice", big, "Cannot exceed queue's hard limit(s)");
    for (n, text) in
        [(4, "select[mem>"), (5, "rusage[mem=1] rusage[mem=2]"), (6, "span[hosts=3]"), (7, "gpu")]
    {
        rejected(&mut h, n, "alice", with_resreq(text), "Bad resource requirement syntax");
    }
    assert!(h.log.iter().all(|event| event.name() != "JOB_NEW"), "nothing was submitted");
    // Within the limits, a job without -W gets the queue's default, sent to sbatchd.
    h.step(submit(8, 8, "alice", with_resreq("select[cs || mem>0]")));
    let job = h.mbd.job(jref(1)).expect("the first job submitted");
    assert_eq!(job.status(), JobStatus::Run);
    let specs = h.mbd.job_specs(&job);
    assert_eq!((specs.run_limit_s, specs.mem_limit_kb), (60, 1024));
}

// Goal: a queue's INTERACTIVE is LSF's: NO refuses interactive jobs, ONLY batch jobs, each
// with LSF's message and nothing logged; lsb.params' DEFAULT_PROJECT is written into the
// JOB_NEW of a job submitted without -P (a job with -P keeps its own).
#[test]
fn interactive_queues_and_the_default_project() {
    let mut config = config();
    config.queues[0].interactive = crate::QueueInteractive::No;
    config.queues.push(QueueConfig {
        interactive: crate::QueueInteractive::Only,
        ..QueueConfig::new(queue("ionly"), 30)
    });
    config.default_project = "physics".into();
    let policies: Vec<u32> = config.queues.iter().map(QueueConfig::policies).collect();
    assert_eq!(policies, [wire::QUEUE_POLICY_NO_INTERACTIVE, 0, wire::QUEUE_POLICY_ONLY_INTERACTIVE]);
    let mut h = cluster(config);
    let mut interactive = request();
    interactive.file_flags = wire::submit_flags::INTERACTIVE;
    rejected(&mut h, 1, "alice", interactive, "Queue does not accept interactive jobs");
    let mut batch = request();
    batch.queue = "ionly".into();
    rejected(&mut h, 2, "alice", batch, "Queue only accepts interactive jobs");
    assert!(h.log.iter().all(|event| event.name() != "JOB_NEW"), "nothing was submitted");
    h.step(submit(3, 3, "alice", request()));
    let mut own = request();
    own.project = "chem".into();
    h.step(submit(4, 4, "alice", own));
    let projects: Vec<String> = h
        .log
        .iter()
        .filter_map(|event| match event {
            crate::Event::JobNew(record) => Some(record.spec.request().project.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(projects, ["physics", "chem"]);
}

// Goal: a queue's NICE and resource limits reach its jobs: the dispatch snapshot sbatchd
// runs the job with and bjobs' record carry the job's own limit, else the queue's default,
// else its maximum; bqueues shows the maxima; a queue without limits gives none; a job's
// own limit beyond a maximum is refused.
#[test]
fn queue_resource_limits_and_nice_reach_the_job() {
    let mut config = config();
    config.queues[0].nice = 7;
    config.queues[0].limits = QueueResourceLimits {
        cpu_s: Some(QueueLimit { default: Some(60), max: 600 }),
        processes: Some(QueueLimit { default: None, max: 8 }),
        core_kb: Some(0),
        swap_kb: Some(1 << 20),
        ..QueueResourceLimits::default()
    };
    let mut h = cluster(config);
    h.step(submit(1, 1, "alice", request()));
    let job = h.mbd.job(jref(1)).expect("the job");
    assert_eq!(job.status(), JobStatus::Run);
    let expected = wire::ResourceLimits {
        cpu_s: Some(60),
        processes: Some(8),
        core_kb: Some(0),
        swap_kb: Some(1 << 20),
        ..wire::ResourceLimits::default()
    };
    let specs = h.mbd.job_specs(&job);
    assert_eq!((specs.nice, specs.limits), (7, expected));
    assert_eq!(job.info(h.mbd.config.queue(&job.queue)).limits, expected);
    let queue = &h.mbd.queue_query(&wire::QueueQuery { queues: vec![job.queue.to_string()] }).queues[0];
    assert_eq!(queue.limits, wire::ResourceLimits { cpu_s: Some(600), ..expected });
    assert_eq!(
        queue.default_limits,
        wire::ResourceLimits { cpu_s: Some(60), ..wire::ResourceLimits::default() }
    );
    assert_eq!(job.info(None).limits, wire::ResourceLimits::default());
    // A job's own limits (bsub -c -F ...) win over the queue's default, within its maxima;
    // one beyond a maximum is refused with LSF's message and nothing logged.
    let own = wire::ResourceLimits { cpu_s: Some(600), file_kb: Some(10), ..wire::ResourceLimits::default() };
    let request_with =
        |limits: wire::ResourceLimits| wire::SubmitRequest { limits: Some(Box::new(limits)), ..request() };
    h.step(submit(2, 2, "alice", request_with(own)));
    let job = h.mbd.job(jref(2)).expect("the second job");
    let specs = h.mbd.job_specs(&job);
    assert_eq!(specs.limits, wire::ResourceLimits { cpu_s: Some(600), file_kb: Some(10), ..expected });
    let logged = h.log.len();
    for over in [
        wire::ResourceLimits { cpu_s: Some(601), ..wire::ResourceLimits::default() },
        wire::ResourceLimits { processes: Some(9), ..wire::ResourceLimits::default() },
        wire::ResourceLimits { core_kb: Some(1), ..wire::ResourceLimits::default() },
    ] {
        rejected(&mut h, 3, "alice", request_with(over), "Cannot exceed queue's hard limit(s)");
    }
    assert_eq!(h.log.len(), logged, "nothing was logged");
}

// Goal: queues of one priority level stay merged by job id without fairshare,
// and a higher level goes first; a level with a FAIRSHARE queue walks its queues
// in lsb.queues order.
#[test]
fn levels_and_queue_order() {
    let mut config = config();
    config.queues.push(QueueConfig {
        fairshare: Some(vec![("default".into(), 1)]),
        ..QueueConfig::new(queue("fair"), 30)
    });
    let mut h = Harness::with_config(config);
    let mut fair = request();
    fair.queue = "fair".into();
    h.step(submit(1, 1, "alice", fair.clone()));
    h.step(submit(2, 2, "alice", request()));
    h.step(submit(3, 3, "alice", fair));
    h.step(registered("hostB", 8));
    // One slot: the normal queue comes first in lsb.queues, so job 2 starts.
    let effects = h.step(Input::Tick);
    assert!(effects.iter().all(|e| !matches!(e, Effect::Append(_))), "nothing new starts on a tick");
    assert_eq!(placed(&mut h, 2), on(&["hostB"]));
    assert_eq!(
        placed(&mut h, 1).1,
        "Unable to reach slave batch server: 2 hosts;\n Job slot limit reached: 1 host"
    );
}

// Goal: a turn stops once no slot is free; the jobs it did not reach get, when
// `bjobs` asks, the reason they would have got: job-level checks first, then
// per host why it is not a candidate or that its slots are taken.
#[test]
fn reasons_of_jobs_a_full_turn_did_not_reach() {
    let mut config = config();
    config.hosts[0].resources = vec!["cs".into()];
    config.queues[0].qjob_limit = Some(14);
    let mut h = cluster(config);
    h.step(submit(1, 1, "alice", slots(13, "")));
    assert_eq!(placed(&mut h, 1).0.len(), 13, "hostA 8, hostB 1, hostC 4: the cluster is full");
    let mut later = request();
    later.begin_time = i64::try_from(T0 / 1000).expect("fits") + 3600;
    h.step(submit(2, 2, "alice", later));
    h.step(submit(3, 3, "alice", with_resreq("select[cs]")));
    h.step(submit(4, 4, "alice", slots(2, "")));
    // The periodic turn reaches none of them: job 1 took every slot.
    h.at(crate::config::MBD_SLEEP_TIME_MS_DEFAULT).step(Input::Tick);
    assert_eq!(placed(&mut h, 2).1, "The job has a specified start time");
    assert_eq!(
        placed(&mut h, 3).1,
        "Job's resource requirements not satisfied: 2 hosts;\n Job slot limit reached: 1 host"
    );
    assert_eq!(placed(&mut h, 4).1, "The queue has reached its job slot limit");
    h.step(submit(5, 5, "alice", request()));
    assert_eq!(placed(&mut h, 5).1, crate::REASON_NEW_JOB, "submitted after the turn");
}

// Goal: with JOB_ACCEPT_INTERVAL = 1 a host takes one job per turn and no other
// until MBD_SLEEP_TIME passed; the waiting job says so.
#[test]
fn job_accept_interval_spaces_a_hosts_jobs() {
    let mut config = config();
    config.job_accept_interval = 1;
    config.queues[0].hosts = vec![host("hostC")];
    let mut h = cluster(config);
    h.step(submit(1, 1, "alice", request()));
    h.step(submit(2, 2, "alice", request()));
    assert_eq!(placed(&mut h, 1), on(&["hostC"]));
    assert_eq!(
        placed(&mut h, 2),
        waiting("Not usable to the queue: 2 hosts;\n Just started a job recently: 1 host")
    );
    h.at(crate::config::MBD_SLEEP_TIME_MS_DEFAULT - 1).step(Input::Tick);
    assert_eq!(placed(&mut h, 2).0, Vec::<String>::new());
    h.at(crate::config::MBD_SLEEP_TIME_MS_DEFAULT).step(Input::Tick);
    assert_eq!(placed(&mut h, 2), on(&["hostC"]));
}

/// With `deferred_dispatch`, the steps that want a turn (submissions, a registration, a
/// finish) only note it; `Input::Dispatch` runs one turn for all of them, and does
/// nothing when no turn is wanted.
#[test]
fn deferred_turns_run_once_at_dispatch() {
    let mut h = Harness::with_config(MbdConfig { deferred_dispatch: true, ..config() });
    h.step(Input::Start);
    h.step(registered("hostA", 2));
    for n in 1..=3 {
        h.step(submit(n, n, "alice", request()));
    }
    let starts = |effects: &[Effect]| {
        effects.iter().filter(|effect| matches!(effect, Effect::Append(crate::Event::JobStart(_)))).count()
    };
    assert!(h.mbd.turn_wanted(), "the submissions left their turn to the shell");
    assert!(placed(&mut h, 1).0.is_empty(), "no job started before the turn");
    let effects = h.step(Input::Dispatch);
    assert_eq!(starts(&effects), 2, "one turn starts what fits on the host's 2 slots");
    assert!(!h.mbd.turn_wanted());
    assert_eq!(starts(&h.step(Input::Dispatch)), 0, "no turn wanted: nothing happens");
    assert!(placed(&mut h, 3).0.is_empty(), "job 3 waits for a slot");
    // A finish frees a slot: the turn is wanted again, and runs at the next Dispatch.
    h.step(started("hostA", 1, 101));
    h.step(finished("hostA", 1, 101, 0));
    assert!(h.mbd.turn_wanted());
    assert_eq!(starts(&h.step(Input::Dispatch)), 1);
    assert_eq!(placed(&mut h, 3), on(&["hostA"]));
}
