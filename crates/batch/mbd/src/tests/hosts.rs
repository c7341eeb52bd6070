//! lim's host availability (transient): no dispatch to an unavailable host,
//! UNKWN in `bjobs` for its started jobs without any event, and `bhosts`.

use lava_batch_ll::JobStatus;
use lava_batch_wire as wire;

use super::harness::*;
use crate::{Input, LimFacts, ToSbd};

fn availability(name: &str, available: bool) -> Input {
    Input::HostAvailability { host: host(name), available }
}

/// lim's facts of `name` with its status word's lock and busy flags.
fn lim_status(name: &str, locked: bool, busy: bool) -> Input {
    let facts = LimFacts { load: Some([0.0; 11]), ncpus: 1, maxmem_mb: 1000, maxswp_mb: 0, locked, busy };
    Input::HostLoad { host: host(name), facts: Box::new(facts) }
}

fn new_job(h: &Harness, id: u32) -> ToSbd {
    let job = h.mbd.job(jref(id)).expect("job exists");
    ToSbd::NewJob(Box::new(h.mbd.job_specs(&job)))
}

fn on_hosts(hosts: &[&str]) -> wire::SubmitRequest {
    let mut request = request();
    request.hosts = hosts.iter().map(|h| (*h).to_owned()).collect();
    request
}

fn bhosts(h: &Harness, names: &[&str]) -> wire::HostQueryReply {
    h.mbd.host_query(&wire::HostQuery { hosts: names.iter().map(|n| (*n).to_owned()).collect() })
}

fn info(name: &str, status: u32, max_slots: u32, n_jobs: u32, counts: [u32; 3]) -> wire::HostInfo {
    wire::HostInfo {
        name: name.into(),
        status,
        max_slots,
        n_jobs,
        n_run: counts[0],
        n_ssusp: counts[1],
        n_ususp: counts[2],
        n_reserved: 0,
        user_slot_limit: wire::HOST_SLOTS_UNLIMITED,
    }
}

// Goal: a host lim marks unavailable gets no new job even with its sbatchd
// connected; the job stays pending, and is dispatched in the very step that
// makes the host available again. Availability itself logs nothing.
#[test]
fn unavailable_host_gets_no_new_jobs_until_available() {
    let mut h = Harness::new();
    h.step(registered("hostB", 1));
    h.check(availability("hostB", false), vec![]);
    h.check(
        submit(1, 1, "alice", on_hosts(&["hostB"])),
        vec![
            append(ev_new(1, 1, "alice", "normal", on_hosts(&["hostB"]), T0)),
            submitted(1, 1, "normal", true),
        ],
    );
    // A repeated report changes nothing; neither does the tick.
    h.check(availability("hostB", false), vec![]);
    h.at(RESEND_MS).check(Input::Tick, vec![]);
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Pend.bits());
    let effects = h.step(availability("hostB", true));
    assert_eq!(effects, vec![append(ev_start(1, "hostB", 1, T0 + RESEND_MS)), send("hostB", new_job(&h, 1))]);
    // Already available: nothing to do.
    h.check(availability("hostB", true), vec![]);
}

// Goal: lim's status word closes a host for dispatch: locked (`lsadmin limlock`) is
// `closed_Lock` with the reason "Host is locked", busy (a threshold crossed) is
// `closed_Busy` with "Load threshold reached"; a running job goes on; once lim reports
// the host neither, the next turn dispatches the pending job. Nothing of it is logged.
#[test]
fn a_locked_or_busy_host_takes_no_new_job() {
    let mut h = Harness::new();
    h.step(registered("hostA", 4));
    h.step(submit(1, 1, "alice", on_hosts(&["hostA"])));
    h.step(started("hostA", 1, 101));
    let logged = h.log.len();
    h.check(lim_status("hostA", true, false), vec![]);
    assert_eq!(bhosts(&h, &["hostA"]).hosts, vec![info("hostA", wire::HOST_CLOSED_LOCK, 4, 1, [1, 0, 0])]);
    h.check(
        submit(2, 2, "alice", on_hosts(&["hostA"])),
        vec![
            append(ev_new(2, 2, "alice", "normal", on_hosts(&["hostA"]), T0)),
            submitted(2, 2, "normal", true),
        ],
    );
    let reason = h.infos(&[2])[0].reason.clone();
    assert!(reason.contains("Host is locked: 1 host"), "{reason}");
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Run.bits(), "the running job goes on");
    // Locked and busy: the lock is named.
    h.step(lim_status("hostA", true, true));
    assert_eq!(bhosts(&h, &["hostA"]).hosts[0].status, wire::HOST_CLOSED_LOCK);
    h.step(lim_status("hostA", false, true));
    assert_eq!(bhosts(&h, &["hostA"]).hosts[0].status, wire::HOST_CLOSED_BUSY);
    // The next turn (MBD_SLEEP_TIME later) gives the busy host's reason.
    let sleep_ms = h.mbd.config.mbd_sleep_time_ms;
    h.at(sleep_ms).step(Input::Tick);
    let reason = h.infos(&[2])[0].reason.clone();
    assert!(reason.contains("Load threshold reached: 1 host"), "{reason}");
    assert_eq!(h.infos(&[2])[0].status, JobStatus::Pend.bits());
    assert_eq!(h.log.len(), logged + 1, "only the submission is logged: {:?}", &h.log[logged..]);
    h.step(lim_status("hostA", false, false));
    assert_eq!(bhosts(&h, &["hostA"]).hosts[0].status, wire::HOST_OK);
    let effects = h.at(2 * sleep_ms).step(Input::Tick);
    assert_eq!(effects.first(), Some(&append(ev_start(2, "hostA", 1, T0 + 2 * sleep_ms))), "{effects:?}");
}

// Goal: lsb.hosts' scheduling thresholds (loadSched) close a host for dispatch while one of
// lim's load indices is beyond its threshold, LSF's way: above it for an index that grows
// with load (r1m), below it for one that falls (mem); the job's reason names the index with
// LSF's words, bhosts shows closed_Busy; at the threshold itself the host takes jobs.
#[test]
fn lsb_hosts_load_thresholds_hold_dispatch() {
    let mut config = config();
    config.hosts[0].load_sched[1] = crate::LoadThreshold::new(0.5);
    config.hosts[0].load_sched[10] = crate::LoadThreshold::new(100.0);
    let mut h = Harness::with_config(config);
    h.step(registered("hostA", 4));
    let load = |r1m: f32, mem: f32| {
        let mut load = [0.0; 11];
        (load[1], load[10]) = (r1m, mem);
        let facts = LimFacts {
            load: Some(load),
            ncpus: 4,
            maxmem_mb: 1000,
            maxswp_mb: 0,
            locked: false,
            busy: false,
        };
        Input::HostLoad { host: host("hostA"), facts: Box::new(facts) }
    };
    let sleep_ms = h.mbd.config.mbd_sleep_time_ms;
    let cases = [
        (load(2.0, 500.0), "The 1 min effective CPU queue length (r1m) is beyond threshold: 1 host"),
        (load(0.1, 50.0), "The available memory (mem) is low: 1 host"),
    ];
    for (n, (input, reason)) in (1u32..).zip(cases) {
        h.step(input);
        assert_eq!(bhosts(&h, &["hostA"]).hosts[0].status, wire::HOST_CLOSED_BUSY);
        h.step(submit(u64::from(n), u64::from(n), "alice", on_hosts(&["hostA"])));
        let turn_ms = 2 * u64::from(n) * sleep_ms;
        h.at(turn_ms).step(Input::Tick);
        let info = &h.infos(&[n])[0];
        assert_eq!(info.status, JobStatus::Pend.bits());
        assert!(info.reason.contains(reason), "{}", info.reason);
        h.step(load(0.5, 100.0));
        assert_eq!(bhosts(&h, &["hostA"]).hosts[0].status, wire::HOST_OK);
        h.at(turn_ms + sleep_ms).step(Input::Tick);
        assert_eq!(h.infos(&[n])[0].status, JobStatus::Run.bits(), "at its threshold the host takes the job");
    }
}

// Goal: a started job on an unavailable host shows UNKWN (0x10000) in bjobs,
// computed at query time with no event logged; the durable state stays RUN
// (the state filter still sees it running), and the job shows RUN again once
// the host is back — or after a restart, which forgets lim's view.
#[test]
fn started_jobs_on_an_unavailable_host_show_unkwn() {
    let mut h = Harness::new();
    h.step(registered("hostA", 2));
    h.step(registered("hostC", 1));
    h.step(submit(1, 1, "alice", on_hosts(&["hostA"])));
    h.step(started("hostA", 1, 101));
    h.step(submit(2, 2, "alice", on_hosts(&["hostC"])));
    h.step(started("hostC", 2, 102));
    let logged = h.log.len();
    h.check(availability("hostA", false), vec![]);
    let infos = h.infos(&[1, 2]);
    assert_eq!(infos[0].status, JobStatus::Unknown.bits());
    assert_eq!(infos[1].status, JobStatus::Run.bits());
    assert_eq!(h.mbd.job(jref(1)).map(|j| j.status), Some(JobStatus::Run));
    let running = h.step(query(5, "alice", wire::state_filter::RUNNING));
    match running.as_slice() {
        [crate::Effect::Reply { reply: crate::ClientReply::JobQuery(reply), .. }] => {
            let shown: Vec<(u32, u32)> = reply.jobs.iter().map(|j| (j.job.job_id, j.status)).collect();
            assert_eq!(shown, vec![(1, JobStatus::Unknown.bits()), (2, JobStatus::Run.bits())]);
        }
        other => panic!("unexpected query effects {other:?}"),
    }
    // A suspended job on the host is UNKWN too.
    h.step(signal(6, 6, "alice", &[1], wire::SignalAction::Stop));
    h.step(signal_reply("hostA", 1, 1, wire::SignalOutcome::Delivered));
    assert_eq!(h.mbd.job(jref(1)).map(|j| j.status), Some(JobStatus::Ususp));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Unknown.bits());
    h.step(signal(7, 7, "alice", &[1], wire::SignalAction::Continue));
    h.step(signal_reply("hostA", 1, 2, wire::SignalOutcome::Delivered));
    let logged_by_signals = h.log.len() - logged;
    assert_eq!(logged_by_signals, 6, "only the signals' own events: {:?}", &h.log[logged..]);
    h.check(availability("hostA", true), vec![]);
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Run.bits());
    h.check(availability("hostA", false), vec![]);
    h.restart();
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Run.bits());
    assert!(h.mbd.host_available(&host("hostA")));
}

// Goal: lim may list hosts that are not execution hosts (clients, the
// master itself); their availability is ignored and no invariant breaks.
#[test]
fn availability_of_unknown_hosts_is_ignored() {
    let mut h = Harness::new();
    h.check(availability("elsewhere", false), vec![]);
    assert!(h.mbd.host_available(&host("elsewhere")));
    assert!(bhosts(&h, &[]).hosts.iter().all(|i| i.status != wire::HOST_UNAVAIL));
}

// Goal: bhosts reports per host, in lsf.cluster order: unavail (lim),
// unreach (no sbatchd), closed (slots full), ok; MAX from MXJ or the CPUs
// registered; job counts in slots by state; unknown names listed once.
#[test]
fn bhosts_reports_status_slots_and_counts() {
    let mut h = Harness::new();
    h.step(registered("hostA", 4));
    h.step(registered("hostB", 8));
    h.step(submit(1, 1, "alice", on_hosts(&["hostA"])));
    h.step(started("hostA", 1, 101));
    let mut wide = on_hosts(&["hostA"]);
    wide.n_slots = 2;
    h.step(submit(2, 2, "alice", wide));
    h.step(started("hostA", 2, 102));
    h.step(signal(3, 3, "alice", &[2], wire::SignalAction::Stop));
    h.step(signal_reply("hostA", 2, 1, wire::SignalOutcome::Delivered));
    h.step(submit(4, 4, "alice", on_hosts(&["hostB"])));
    h.step(started("hostB", 3, 103));
    assert_eq!(
        bhosts(&h, &[]),
        wire::HostQueryReply {
            hosts: vec![
                info("hostA", wire::HOST_OK, 4, 3, [1, 0, 2]),
                info("hostB", wire::HOST_CLOSED_FULL, 1, 1, [1, 0, 0]),
                info("hostC", wire::HOST_UNREACH, 4, 0, [0, 0, 0]),
            ],
            not_found: vec![],
        }
    );
    h.step(availability("hostA", false));
    assert_eq!(
        bhosts(&h, &["hostA", "nosuch", "nosuch"]),
        wire::HostQueryReply {
            hosts: vec![info("hostA", wire::HOST_UNAVAIL, 4, 3, [1, 0, 2])],
            not_found: vec!["nosuch".into()],
        }
    );
}

// Goal: bqueues lists the queues highest priority first, counts the slots of each
// queue's unfinished jobs by state as LSF does (PSUSP in PEND, as `bjobs -p`
// lists it; finished jobs nowhere), and names unknown queues once.
#[test]
fn bqueues_counts_slots_by_state() {
    let mut h = Harness::new();
    h.step(registered("hostB", 1));
    let mut two_slots = request();
    two_slots.n_slots = 2;
    h.step(submit(1, 1, "alice", request())); // 1: RUN on hostB (normal)
    h.step(submit(2, 2, "alice", two_slots)); // 2: PEND, 2 slots (normal)
    let mut held = request();
    held.hold = true;
    h.step(submit(3, 3, "bob", held)); // 3: PSUSP (normal)
    let mut high = request();
    high.queue = "high".into();
    h.step(submit(4, 4, "bob", high)); // 4: PEND (high: hostA only)
    let queue_info =
        |name: &str, priority: u32, default: bool, hosts: &[&str], counts: [u32; 3]| wire::QueueInfo {
            name: name.into(),
            priority,
            default,
            hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            n_jobs: counts.iter().sum(),
            n_pend: counts[0],
            n_run: counts[1],
            n_susp: counts[2],
            n_ususp: counts[2],
            ..wire::QueueInfo::default()
        };
    let all = h.mbd.queue_query(&wire::QueueQuery { queues: vec![] });
    assert_eq!(
        all,
        wire::QueueQueryReply {
            queues: vec![
                queue_info("high", 40, false, &["hostA"], [1, 0, 0]),
                queue_info("normal", 30, true, &[], [3, 1, 0]),
            ],
            not_found: vec![],
        }
    );
    h.step(finished("hostB", 1, 100, 0));
    let named = h
        .mbd
        .queue_query(&wire::QueueQuery { queues: vec!["normal".into(), "nosuch".into(), "nosuch".into()] });
    assert_eq!(named.queues, vec![queue_info("normal", 30, true, &[], [3, 0, 0])]);
    assert_eq!(named.not_found, vec!["nosuch".to_owned()]);
}

// Goal: bqueues and bhosts show what the configuration sets (DESCRIPTION, NICE, USERS,
// QJOB/UJOB/PJOB/HJOB_LIMIT, RUNLIMIT and MEMLIMIT maxima, a host's JL/U), and no
// limit where it sets none.
#[test]
fn bqueues_and_bhosts_show_the_configured_limits() {
    let mut config = config();
    let normal = config.queues.iter_mut().find(|q| q.name.as_str() == "normal").expect("normal");
    normal.users = Some(vec![user("alice"), user("bob")]);
    normal.description = "Work of the day.".into();
    normal.nice = 5;
    normal.qjob_limit = Some(10);
    normal.ujob_limit = Some(3);
    normal.hjob_limit = Some(2);
    normal.pjob_limit_milli = Some(1500);
    normal.run_limit_s = Some(crate::config::QueueLimit { default: Some(600), max: 3600 });
    normal.mem_limit_kb = Some(crate::config::QueueLimit { default: None, max: 1 << 20 });
    config.hosts[0].user_job_limit = Some(4);
    let h = Harness::with_config(config);
    let queues = h.mbd.queue_query(&wire::QueueQuery { queues: vec!["normal".into(), "high".into()] });
    let limits = |q: &wire::QueueInfo| {
        let slots = (q.max_slots, q.user_slot_limit, q.processor_slot_limit_milli, q.host_slot_limit);
        (q.users.clone(), slots, q.run_limit_s, q.mem_limit_kb)
    };
    let unlimited = wire::QUEUE_UNLIMITED;
    assert_eq!(
        queues.queues.iter().map(limits).collect::<Vec<_>>(),
        [
            (vec![], (unlimited, unlimited, unlimited, unlimited), 0, 0),
            (vec!["alice".to_owned(), "bob".to_owned()], (10, 3, 1500, 2), 3600, 1 << 20),
        ]
    );
    let normal = &queues.queues[1];
    assert_eq!((normal.description.as_str(), normal.nice), ("Work of the day.", 5));
    let hosts = bhosts(&h, &[]).hosts;
    assert_eq!(hosts[0].user_slot_limit, 4);
    assert!(hosts[1..].iter().all(|host| host.user_slot_limit == wire::HOST_SLOTS_UNLIMITED));
}

// Goal: badmin reconfig's new configuration is in force at once — a new queue
// takes jobs, a lower MXJ keeps the running jobs and starts no more — and a
// configuration with other hosts is refused and changes nothing.
#[test]
fn reconfigure_takes_queues_and_slots_now() {
    let mut h = Harness::new();
    h.step(registered("hostC", 4)); // MXJ 4
    for n in 1..=4u64 {
        h.step(submit(n, n, "alice", request()));
    }
    assert_eq!(bhosts(&h, &["hostC"]).hosts[0].n_run, 4);
    let mut config = config();
    config.hosts[2].max_jobs = Some(2);
    config.queues.push(crate::QueueConfig::new(queue("night"), 10));
    assert_eq!(h.mbd.reconfigurable(&config), Ok(()));
    h.step(Input::Reconfigure { config: Box::new(config.clone()) });
    // The four running jobs keep running; a new one waits for the slots MXJ 2 allows.
    h.step(submit(5, 5, "alice", request()));
    assert_eq!(h.mbd.job(jref(5)).expect("job").status(), JobStatus::Pend);
    assert_eq!(bhosts(&h, &["hostC"]).hosts[0].n_run, 4);
    let queues = h.mbd.queue_query(&wire::QueueQuery { queues: vec!["night".into()] });
    assert_eq!(queues.not_found, Vec::<String>::new());
    // Another host list is refused before it reaches the logic, and ignored if it does.
    let mut other_hosts = config.clone();
    other_hosts.hosts.pop();
    assert!(h.mbd.reconfigurable(&other_hosts).is_err());
    h.step(Input::Reconfigure { config: Box::new(other_hosts) });
    assert_eq!(h.mbd.config().hosts.len(), 3);
}
