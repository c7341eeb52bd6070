//! Queries, cleaning, job ids, snapshots and replay of bad logs.

use std::sync::Arc;

use lava_batch_ll::JobStatus;
use lava_batch_wire::{self as wire, state_filter};

use super::harness::*;
use crate::event::{JobCleanRecord, JobStartRecord};
use crate::{ClientId, ClientReply, Event, Input, Mbd, MbdError};

fn ids_of(effects: &[crate::Effect]) -> (Vec<u32>, Vec<u32>) {
    match effects {
        [crate::Effect::Reply { reply: ClientReply::JobQuery(reply), .. }] => (
            reply.jobs.iter().map(|j| j.job.job_id).collect(),
            reply.not_found.iter().map(|j| j.job_id).collect(),
        ),
        other => panic!("unexpected query effects {other:?}"),
    }
}

// Goal: an answer larger than a page comes in pages of whole jobs that together
// hold every selected job once, in id order, each page within the byte budget.
#[test]
fn long_answers_come_in_pages() {
    let mut h = Harness::new();
    for n in 1..=40u64 {
        let mut big = request();
        big.command = format!("echo {}", "x".repeat(60 * 1024));
        h.step(submit(n, n, "alice", big));
    }
    let mut q = |after_job: u32, jobs: Vec<wire::WireJobRef>| {
        let query = wire::JobQuery {
            jobs,
            user: "all".into(),
            state_filter: state_filter::ALL,
            queue: String::new(),
            host: String::new(),
            job_name: String::new(),
            after_job,
            after_index: 0,
        };
        match h.step(Input::Query { client: ClientId(1), caller: caller("bob"), query }).as_slice() {
            [crate::Effect::Reply { reply: ClientReply::JobQuery(reply), .. }] => reply.clone(),
            other => panic!("unexpected query effects {other:?}"),
        }
    };
    let mut pages: Vec<Vec<u32>> = Vec::new();
    let mut after_job = 0;
    loop {
        let page = q(after_job, vec![]);
        assert!(lava_xdr::to_bytes(&page.jobs).expect("encodes").len() <= crate::QUERY_REPLY_BYTES_MAX + 4);
        pages.push(page.jobs.iter().map(|j| j.job.job_id).collect());
        if page.next_after == 0 {
            break;
        }
        assert_eq!(Some(&page.next_after), pages.last().and_then(|p| p.last()));
        after_job = page.next_after;
    }
    assert!(pages.len() >= 3, "60 KiB jobs: 17 to a 1 MiB page, so 40 need 3 pages: {pages:?}");
    assert!(pages.iter().all(|page| !page.is_empty()));
    assert_eq!(pages.concat(), (1..=40).collect::<Vec<u32>>());
    // Named jobs page the same way, and a page past the end is empty.
    let named: Vec<_> = (1..=40).rev().map(wref).collect();
    let first = q(0, named.clone());
    assert_eq!(first.jobs.first().map(|j| j.job.job_id), Some(1));
    let rest = q(first.next_after, named);
    assert_eq!(rest.jobs.first().map(|j| j.job.job_id), Some(first.next_after + 1));
    assert_eq!(q(40, vec![]).jobs, vec![]);
}

// Goal: each filter of JobQuery selects what bjobs expects, in id order.
#[test]
fn queries_filter_by_user_state_queue_host_and_name() {
    let mut h = Harness::new();
    h.step(registered("hostA", 1));
    h.step(submit(1, 1, "alice", request())); // 1: RUN on hostA
    let mut named = request();
    named.job_name = "analysis-7".into();
    h.step(submit(2, 2, "alice", named)); // 2: PEND
    h.step(submit(3, 3, "bob", request())); // 3: bob, PEND
    h.step(finished("hostA", 1, 5, 0)); // 1: DONE; 2 dispatched
    h.step(signal(4, 4, "bob", &[3], wire::SignalAction::Stop)); // 3: PSUSP
    let mut q = |who: &str, user: &str, filter: u32, edit: fn(&mut wire::JobQuery)| {
        let mut query = wire::JobQuery {
            jobs: vec![],
            user: user.into(),
            state_filter: filter,
            queue: String::new(),
            host: String::new(),
            job_name: String::new(),
            after_job: 0,
            after_index: 0,
        };
        edit(&mut query);
        ids_of(&h.step(Input::Query { client: ClientId(1), caller: caller(who), query }))
    };
    let none: fn(&mut wire::JobQuery) = |_| {};
    assert_eq!(q("alice", "", state_filter::UNFINISHED, none), (vec![2], vec![]));
    assert_eq!(q("alice", "", state_filter::ALL, none), (vec![1, 2], vec![]));
    assert_eq!(q("alice", "all", state_filter::ALL, none), (vec![1, 2, 3], vec![]));
    assert_eq!(q("alice", "bob", state_filter::SUSPENDED, none), (vec![3], vec![]));
    assert_eq!(q("alice", "all", state_filter::DONE, none), (vec![1], vec![]));
    assert_eq!(q("alice", "all", state_filter::RUNNING, none), (vec![2], vec![]));
    assert_eq!(q("alice", "all", state_filter::PENDING, none), (vec![3], vec![]));
    assert_eq!(q("alice", "all", state_filter::ALL, |q| q.host = "hostA".into()), (vec![1, 2], vec![]));
    assert_eq!(q("alice", "all", state_filter::ALL, |q| q.job_name = "analysis*".into()), (vec![2], vec![]));
    assert_eq!(q("alice", "all", state_filter::ALL, |q| q.queue = "high".into()), (vec![], vec![]));
    // Named jobs: any owner, any state; unknown ones are listed once.
    let named = |q: &mut wire::JobQuery| q.jobs = vec![wref(3), wref(1), wref(42), wref(42)];
    assert_eq!(q("alice", "", state_filter::UNFINISHED, named), (vec![1, 3], vec![42]));
    let effects = h.step(query(1, "alice", 77));
    assert_eq!(effects, vec![reply(1, ClientReply::error(wire::ERR_BAD_REQUEST, "Unknown state filter 77"))]);
}

// Goal: a job keeps its environment while it may still be dispatched and
// drops it when it finishes (most of a finished job's memory), in the live
// state and in replay alike, while JOB_NEW in the log keeps it whole.
// Method: run one job to DONE and look at its submission before and after;
// every step also checks replay against the live state (the harness).
#[test]
fn a_finished_job_drops_its_environment() {
    let mut h = Harness::new();
    h.step(registered("hostA", 1));
    h.step(submit(1, 1, "alice", request()));
    let env = |h: &Harness| h.mbd.job(jref(1)).expect("in memory").env().to_vec();
    assert_eq!(env(&h), request().env);
    h.step(finished("hostA", 1, 5, 0));
    assert_eq!(env(&h), vec![]);
    let Some(Event::JobNew(record)) = h.log.iter().find(|event| matches!(event, Event::JobNew(_))) else {
        panic!("JOB_NEW was logged");
    };
    assert_eq!(record.spec.request().env, request().env);
    assert_eq!(h.infos(&[1])[0].command, request().command);
}

// Goal: a finished job stays visible until CLEAN_PERIOD has passed, then
// Tick logs JOB_CLEAN; its id is never given again, also after a restart
// from a snapshot taken after the clean.
#[test]
fn finished_jobs_are_cleaned_and_ids_never_reused() {
    let mut h = Harness::new();
    h.step(registered("hostA", 1));
    h.step(submit(1, 1, "alice", request()));
    h.at(100).step(finished("hostA", 1, 5, 0));
    h.at(100 + CLEAN_MS - 1).check(Input::Tick, vec![]);
    assert_eq!(h.infos(&[1]).len(), 1);
    h.at(100 + CLEAN_MS).check(
        Input::Tick,
        vec![append(Event::JobClean(JobCleanRecord { job: jref(1), time_ms: T0 + 100 + CLEAN_MS }))],
    );
    assert!(h.infos(&[1]).is_empty());
    let effects = h.step(submit(2, 2, "alice", request()));
    assert!(effects.contains(&submitted(2, 2, "normal", true)), "{effects:?}");

    let snapshot = xdr_round_trip(&h.mbd.snapshot());
    assert_eq!(snapshot, h.mbd.snapshot());
    let mut mbd = Mbd::from_snapshot(config(), snapshot).expect("snapshot loads");
    h.step(finished("hostA", 2, 6, 0));
    let mut effects = Vec::new();
    mbd.step(T0 + 10 * CLEAN_MS, Input::Tick, &mut effects);
    assert_eq!(mbd.last_job_id(), 2);
    effects.clear();
    mbd.step(T0 + 10 * CLEAN_MS, submit(3, 3, "alice", request()), &mut effects);
    assert_eq!(effects.last(), Some(&submitted(3, 3, "normal", true)));
}

// Regression (found by lava-sim): the request id of a cleaned job was
// forgotten with the job, so a bsub whose answers were all lost while its job
// ran, finished and was cleaned made a second job on its next retry. Goal: the
// retry gets the cleaned job back, also after a restart from a snapshot or
// from the log, and another user's copy of the id is refused; the id is
// forgotten only REQUEST_ID_RETENTION_MS after the clean.
#[test]
fn retried_submission_after_its_job_was_cleaned_made_a_second_job() {
    let mut h = Harness::new();
    h.step(registered("hostA", 1));
    h.step(submit(1, 1, "alice", request()));
    h.at(100).step(finished("hostA", 1, 5, 0));
    h.at(100 + CLEAN_MS).step(Input::Tick);
    assert!(h.infos(&[1]).is_empty(), "job 1 is cleaned");
    h.check(submit(2, 1, "alice", request()), vec![submitted(2, 1, "normal", true)]);
    h.check(
        submit(3, 1, "bob", request()),
        vec![reply(3, ClientReply::error(wire::ERR_REJECTED, "Request id already used by another user"))],
    );
    let snapshot = xdr_round_trip(&h.mbd.snapshot());
    assert_eq!(snapshot.retired_requests.len(), 1);
    let mut restored = Mbd::from_snapshot(config(), snapshot).expect("snapshot loads");
    let mut effects = Vec::new();
    restored.step(T0 + 2 * CLEAN_MS, submit(4, 1, "alice", request()), &mut effects);
    assert_eq!(effects, vec![submitted(4, 1, "normal", true)]);
    h.restart();
    h.check(submit(5, 1, "alice", request()), vec![submitted(5, 1, "normal", true)]);
    // A day after the clean, the next clean forgets the id.
    h.step(registered("hostA", 1));
    h.step(submit(6, 6, "alice", request()));
    let cleaned_ms = 100 + CLEAN_MS;
    h.at(cleaned_ms + crate::REQUEST_ID_RETENTION_MS).step(finished("hostA", 2, 6, 0));
    h.at(cleaned_ms + crate::REQUEST_ID_RETENTION_MS + CLEAN_MS).step(Input::Tick);
    assert_eq!(h.mbd.snapshot().retired_requests.iter().map(|r| r.job.id()).collect::<Vec<_>>(), vec![2]);
}

// Goal: no id above MAX_JOBID is ever given; when every id up to it belongs to a
// job in memory, submission is refused (the wrap itself: tests/wrap.rs).
#[test]
fn max_job_id_is_never_exceeded() {
    let mut limited = config();
    limited.max_job_id = 2;
    let mut h = Harness::with_config(limited);
    h.step(submit(1, 1, "alice", request()));
    h.step(submit(2, 2, "alice", request()));
    h.check(
        submit(3, 3, "alice", request()),
        vec![reply(
            3,
            ClientReply::error(
                wire::ERR_REJECTED,
                "No job ID available: every job id up to MAX_JOBID 2 belongs to a job still in the system",
            ),
        )],
    );
    assert_eq!(h.mbd.last_job_id(), 2);
}

// Goal: replay refuses events that do not fit the state, names them, and
// leaves the state unchanged.
#[test]
fn replay_rejects_events_that_do_not_fit() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    let before = h.mbd.snapshot();
    let cases = [
        (ev_start(2, "hostA", 1, T0), "no such job"),
        (ev_start(1, "hostA", 2, T0), "2 execution slots for a 1-slot job"),
        (ev_accept(1, 5, T0), "accept of a PEND job"),
        (ev_status(1, JobStatus::Ususp, "", T0), "status PEND → USUSP"),
        (ev_status(1, JobStatus::Exit, "", T0), "status EXIT with finish false"),
        (ev_signal(1, 5, wire::SignalAction::Stop, "alice", 1, T0), "signal sequence 5 after 0"),
        (ev_new(1, 9, "alice", "normal", request(), T0), "job id 1 is still in use"),
        (ev_new(2, 1, "alice", "normal", request(), T0), "request id already used"),
        (Event::JobClean(JobCleanRecord { job: jref(1), time_ms: T0 }), "clean of a PEND job"),
    ];
    for (event, problem) in cases {
        match h.mbd.apply(&event) {
            Err(MbdError::Apply { problem: got, .. }) => assert_eq!(got, problem, "{event:?}"),
            other => panic!("{event:?} gave {other:?}"),
        }
        assert_eq!(h.mbd.snapshot(), before);
    }
    let no_hosts = Event::JobStart(JobStartRecord { job: jref(1), exec_hosts: vec![], time_ms: T0 });
    assert!(h.mbd.apply(&no_hosts).is_err());
}

// Goal: a snapshot that contradicts itself is refused when loaded.
#[test]
fn inconsistent_snapshots_are_refused() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    let mut snapshot = h.mbd.snapshot();
    snapshot.last_job_id = 0;
    assert!(matches!(Mbd::from_snapshot(config(), snapshot), Err(MbdError::Snapshot(_))));
    let mut snapshot = h.mbd.snapshot();
    snapshot.jobs.push(snapshot.jobs[0].clone());
    assert!(matches!(Mbd::from_snapshot(config(), snapshot), Err(MbdError::Snapshot(_))));
}

// Goal: a snapshot writes a run of unfinished jobs' equal environments once (the jobs
// after the first are listed in `env_as_previous`, written empty), loads them back shared
// in memory and equal to the state that wrote them; a list that does not fit the jobs is
// refused.
#[test]
fn snapshots_write_a_shared_environment_once() {
    let mut h = Harness::new();
    let other = wire::EnvVar { name: "HOME".into(), value: "/home/bob".into() };
    for id in 1..=3 {
        h.step(submit(id, id, "alice", request()));
    }
    let mut own = request();
    own.env.push(other);
    h.step(submit(4, 4, "alice", own));
    h.step(submit(5, 5, "alice", request()));
    let snapshot = h.mbd.snapshot();
    assert_eq!(snapshot.env_as_previous, vec![jref(2), jref(3)]);
    let written: Vec<bool> = snapshot.jobs.iter().map(|job| job.env.is_empty()).collect();
    assert_eq!(written, [false, true, true, false, false]);
    let loaded = Mbd::from_snapshot(config(), snapshot.clone()).expect("loads");
    assert_eq!(loaded.snapshot(), snapshot, "what loads writes the same snapshot");
    let env = |id| loaded.job(jref(id)).expect("job").env.clone();
    assert!(Arc::ptr_eq(&env(1), &env(3)), "one environment in memory for the run");
    assert_eq!(*env(3), request().env);
    assert_eq!(env(4).len(), 2);

    for (bad, why) in [
        (vec![jref(1)], "the first job"),
        (vec![jref(4)], "a job with its own"),
        (vec![jref(9)], "no such job"),
        (vec![jref(3), jref(2)], "out of order"),
    ] {
        let mut broken = snapshot.clone();
        broken.env_as_previous = bad;
        assert!(matches!(Mbd::from_snapshot(config(), broken), Err(MbdError::Snapshot(_))), "{why}");
    }
}

// Goal: an inconsistent configuration is refused up front.
#[test]
fn inconsistent_configurations_are_refused() {
    let mut twice = config();
    twice.queues.push(twice.queues[0].clone());
    let mut two_defaults = config();
    two_defaults.queues[1].default = true;
    let mut stray_host = config();
    stray_host.queues[1].hosts.push(host("hostZ"));
    for bad in [twice, two_defaults, stray_host] {
        assert!(matches!(Mbd::new(bad), Err(MbdError::Config(_))));
    }
}

// Goal: values read back from disk are validated like fresh messages: a bad
// name, an unknown status bit or job id 0 is a decode error, not a value.
#[test]
fn corrupt_records_are_refused_on_decode() {
    use lava_batch_ll::{HostName, JobRef};
    let limits = lava_xdr::Limits::DEFAULT;
    let name = lava_xdr::to_bytes("a b").expect("encodes");
    assert!(lava_xdr::from_bytes::<HostName>(&name, &limits).is_err());
    let bits = lava_xdr::to_bytes(&3u32).expect("encodes");
    assert!(lava_xdr::from_bytes::<JobStatus>(&bits, &limits).is_err());
    let job = lava_xdr::to_bytes(&wref(0)).expect("encodes");
    assert!(lava_xdr::from_bytes::<JobRef>(&job, &limits).is_err());
    let good = lava_xdr::to_bytes(&wref(7)).expect("encodes");
    assert_eq!(lava_xdr::from_bytes::<JobRef>(&good, &limits).ok(), Some(jref(7)));
}

// Goal: jobs submitted alike hold one copy of their submission and of their names in
// memory, whether applied live, replayed from the log or loaded from a snapshot (so a
// restart holds no more than the live run did); a job that differs keeps its own, and
// sharing changes no value: the snapshots are equal.
#[test]
fn alike_submissions_are_shared_live_replayed_and_loaded() {
    let mut h = Harness::new();
    for id in 1..=3 {
        h.step(submit(id, id, "alice", request()));
    }
    let mut other = request();
    other.command = "sleep 1".into();
    h.step(submit(4, 4, "alice", other));
    h.step(submit(5, 5, "bob", request()));
    let replayed = replay_owned(&config(), &h.log);
    let loaded = Mbd::from_snapshot(config(), xdr_round_trip(&h.mbd.snapshot())).expect("loads");
    for (what, mbd) in [("live", &h.mbd), ("replayed", &replayed), ("loaded", &loaded)] {
        let job = |id| mbd.job(jref(id)).expect("job").into_owned();
        let (first, third, fourth, fifth) = (job(1), job(3), job(4), job(5));
        assert!(Arc::ptr_eq(&first.spec, &third.spec), "{what}: one submission for alike jobs");
        assert!(!Arc::ptr_eq(&third.spec, &fourth.spec), "{what}: a different command is its own");
        assert!(Arc::ptr_eq(&fourth.env, &fifth.env), "{what}: one environment");
        assert!(first.user.shares(&fourth.user), "{what}: one copy of the user's name");
        assert!(!first.user.shares(&fifth.user), "{what}: another user");
        assert!(first.queue.shares(&fifth.queue), "{what}: one copy of the queue's name");
        assert!(first.from_host.shares(&fifth.from_host), "{what}: one copy of the host's name");
        assert_eq!(mbd.snapshot(), h.mbd.snapshot(), "{what}: the same state");
    }
}
