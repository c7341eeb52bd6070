//! Replay of logs that hold what the protocol's replay rules ignore (`replay`):
//! duplicated stages and events after DONE/EXIT are ignored and reported, never a
//! reason to stop; live application stays strict; nothing else is let through.

use lava_batch_ll::JobStatus;
use lava_batch_wire as wire;

use super::harness::*;
use crate::event::JobSwitchRecord;
use crate::{ClientId, Event, IgnoredEvent, IgnoredWhy, Input, Mbd, MbdError, Replayed};

/// A fresh [`Mbd`] from `log` through [`Mbd::replay`], and what it ignored, in order.
fn replay_log(log: &[Event]) -> (Mbd, Vec<IgnoredEvent>) {
    let mut mbd = Mbd::new(config()).expect("valid config");
    let mut ignored = Vec::new();
    for event in log {
        match mbd.replay(event.clone()) {
            Ok(Replayed::Applied) => {}
            Ok(Replayed::Ignored(what)) => ignored.push(what),
            Err(error) => panic!("replay of {event:?} failed: {error}"),
        }
    }
    (mbd, ignored)
}

/// What replay reports for `event` of job `id`.
fn ignored(id: u32, event: &Event, why: IgnoredWhy) -> IgnoredEvent {
    IgnoredEvent { job: jref(id), event: event.name(), why }
}

/// Live application refuses each of `events` and changes nothing (the strictness
/// that makes a decided event which does not apply a bug, not a log entry).
#[track_caller]
fn live_apply_refuses(mbd: &mut Mbd, events: &[Event]) {
    let before = mbd.snapshot();
    for event in events {
        assert!(matches!(mbd.apply(event), Err(MbdError::Apply { .. })), "apply took {event:?}");
        assert_eq!(mbd.snapshot(), before, "a refused {event:?} changed the state");
    }
}

/// JOB_SWITCH of job `id` to `to`.
fn ev_switch(id: u32, to: &str, t: u64) -> Event {
    Event::JobSwitch(JobSwitchRecord {
        job: jref(id),
        queue: queue(to),
        requester: user("admin"),
        time_ms: t,
    })
}

// Goal: a duplicated stage event (a second JOB_START on the same hosts, a second
// JOB_START_ACCEPT) is ignored on replay and reported, and the state is the one
// the log without it gives; a duplicate JOB_EXECUTE applies (metadata only) and
// changes nothing. Live apply still refuses the two duplicates, and replay still
// refuses what is no duplicate (a dispatch to other hosts, an accept of a job
// that is not started).
// Method: a job dispatched, accepted and executed live; its log with a copy of
// each stage event after the original (the accept's copy with another pid: the
// first one stands), replayed; then the near misses.
#[test]
fn duplicated_stage_events_are_ignored_on_replay() {
    let mut h = Harness::new();
    h.step(registered("hostA", 4));
    h.step(submit(1, 1, "alice", request()));
    h.at(10).step(started("hostA", 1, 101));
    h.at(20).step(executed("hostA", 1, 101));
    let dup_start = ev_start(1, "hostA", 1, T0 + 5);
    let dup_accept = ev_accept(1, 999, T0 + 15);
    let mut log = Vec::new();
    for event in &h.log {
        log.push(event.clone());
        match event {
            Event::JobStart(_) => log.push(dup_start.clone()),
            Event::JobStartAccept(_) => log.push(dup_accept.clone()),
            Event::JobExecute(_) => log.push(event.clone()),
            _ => {}
        }
    }
    assert_eq!(log.len(), h.log.len() + 3);

    let (replayed, what) = replay_log(&log);
    assert_eq!(
        what,
        vec![
            ignored(1, &dup_start, IgnoredWhy::DuplicateStage),
            ignored(1, &dup_accept, IgnoredWhy::DuplicateStage),
        ]
    );
    assert_eq!(replayed.snapshot(), h.mbd.snapshot());
    assert_eq!(replayed.job(jref(1)).expect("job 1").accepted().map(|p| p.pid), Some(101));
    assert_eq!(what[1].to_string(), "JOB_START_ACCEPT for job 1: a stage the job's run already passed");
    live_apply_refuses(&mut h.mbd, &[dup_start, dup_accept]);

    // No wider than that: another dispatch of a started job, or an accept of a
    // held job, is still an error that stops replay and changes nothing.
    h.step(submit(2, 2, "alice", wire::SubmitRequest { hold: true, ..request() }));
    let mut mbd = replay_owned(&config(), &h.log);
    let before = mbd.snapshot();
    for event in [ev_start(1, "hostC", 1, T0 + 30), ev_accept(2, 102, T0 + 30)] {
        assert!(matches!(mbd.replay(event.clone()), Err(MbdError::Apply { .. })), "{event:?}");
        assert_eq!(mbd.snapshot(), before);
    }
}

// Goal: every event about a DONE job that is logged after its finish (a second
// FINISH, an EXIT, EXECUTE, an accept, a signal, a dispatch, a switch) is
// ignored on replay and reported, and the job's clean after them still applies:
// the replayed state equals the live one. Live apply refuses each of them.
// Method: a job run to DONE live; the events inserted after its JOB_STATUS DONE;
// then the live clean (Tick after CLEAN_PERIOD) appended and the whole replayed.
#[test]
fn events_after_done_are_ignored_on_replay() {
    let mut h = Harness::new();
    h.step(registered("hostA", 4));
    h.step(submit(1, 1, "alice", request()));
    h.at(10).step(started("hostA", 1, 101));
    h.at(20).step(executed("hostA", 1, 101));
    h.at(30).step(finished("hostA", 1, 101, 0));
    assert_eq!(h.mbd.job(jref(1)).expect("job 1").status(), JobStatus::Done);
    let late = vec![
        ev_finished(1, 101, 0, T0 + 40),
        ev_finished(1, 101, 256, T0 + 41),
        ev_execute(&execute_msg(1, 101, "/elsewhere", 1_700_000_002), T0 + 42),
        ev_accept(1, 101, T0 + 43),
        ev_signal(1, 1, wire::SignalAction::Terminate, "alice", 9, T0 + 44),
        ev_start(1, "hostA", 1, T0 + 45),
        ev_switch(1, "high", T0 + 46),
    ];
    let mut log = h.log.clone();
    log.extend(late.iter().cloned());
    let (replayed, what) = replay_log(&log);
    let expected: Vec<IgnoredEvent> =
        late.iter().map(|event| ignored(1, event, IgnoredWhy::AfterFinish(JobStatus::Done))).collect();
    assert_eq!(what, expected);
    assert_eq!(replayed.snapshot(), h.mbd.snapshot());
    assert_eq!(what[0].to_string(), "JOB_STATUS for job 1: the job is already DONE");
    live_apply_refuses(&mut h.mbd, &late);

    let before_clean = h.log.len();
    h.at(30 + CLEAN_MS + 1_000).step(Input::Tick);
    let clean = &h.log[before_clean..];
    assert!(matches!(clean, [Event::JobClean(_)]), "{clean:?}");
    log.extend(clean.iter().cloned());
    let (replayed, what) = replay_log(&log);
    assert_eq!(what, expected);
    assert!(replayed.job(jref(1)).is_none(), "cleaned");
    assert_eq!(replayed.snapshot(), h.mbd.snapshot());
}

// Goal: every event about an EXIT job logged after its finish (a second FINISH,
// a DONE, a signal answer, EXECUTE, an accept, a requeue of a run's end) is
// ignored on replay and reported, and a `brequeue -e` after them, which a
// finished job takes, still applies: the job runs again and the replayed state
// equals the live one. Live apply refuses each ignored event.
// Method: a job run to EXIT live (wait status 256); the events inserted after
// its JOB_STATUS EXIT; then the live requeue and new dispatch appended.
#[test]
fn events_after_exit_are_ignored_on_replay() {
    let mut h = Harness::new();
    h.step(registered("hostA", 4));
    h.step(submit(1, 1, "alice", request()));
    h.at(10).step(started("hostA", 1, 101));
    h.at(30).step(finished("hostA", 1, 101, 256));
    assert_eq!(h.mbd.job(jref(1)).expect("job 1").status(), JobStatus::Exit);
    let Event::JobStatus(exit) = ev_finished(1, 101, 256, T0 + 30) else { unreachable!("a JOB_STATUS") };
    let requeue_killed = Event::JobRequeue(Box::new(crate::event::JobRequeueRecord {
        job: jref(1),
        hold: false,
        order_key: 1 << 40,
        requeued: crate::event::Requeued::Killed(exit.finish.clone().expect("EXIT has a finish")),
        request_id: None,
        time_ms: T0 + 46,
    }));
    let late = vec![
        ev_finished(1, 101, 256, T0 + 40),
        ev_finished(1, 101, 0, T0 + 41),
        ev_sigact(1, 1, wire::SignalOutcome::Delivered, T0 + 42),
        ev_execute(&execute_msg(1, 101, "/home/alice/work", 1_700_000_001), T0 + 43),
        ev_accept(1, 101, T0 + 44),
        requeue_killed,
    ];
    let mut log = h.log.clone();
    log.extend(late.iter().cloned());
    let (replayed, what) = replay_log(&log);
    let expected: Vec<IgnoredEvent> =
        late.iter().map(|event| ignored(1, event, IgnoredWhy::AfterFinish(JobStatus::Exit))).collect();
    assert_eq!(what, expected);
    assert_eq!(replayed.snapshot(), h.mbd.snapshot());
    live_apply_refuses(&mut h.mbd, &late);

    let before_requeue = h.log.len();
    let action = wire::JobControlAction::Requeue {
        done: false,
        exit: true,
        running: false,
        pending: false,
        hold: false,
    };
    h.at(50).step(Input::Requeue {
        client: ClientId(7),
        request_id: rid(7),
        caller: caller("alice"),
        request: wire::JobControlRequest { jobs: vec![wref(1)], action },
        submissions: vec![crate::LoggedSubmission { job: jref(1), request_id: rid(1), env: request().env }],
    });
    let requeued = &h.log[before_requeue..];
    assert!(matches!(requeued, [Event::JobRequeue(_), Event::JobStart(_)]), "{requeued:?}");
    log.extend(requeued.iter().cloned());
    let (replayed, what) = replay_log(&log);
    assert_eq!(what, expected);
    assert_eq!(replayed.job(jref(1)).expect("job 1").status(), JobStatus::Run);
    assert_eq!(replayed.snapshot(), h.mbd.snapshot());
}
