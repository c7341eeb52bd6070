//! Job ids wrap at `MAX_JOBID` (LSF's minimum is 999,999; the logic takes any
//! value, so these tests use a handful): back to 1, skipping every id a job in
//! memory has, with every "older than" decided by submission order.

use lava_batch_ll::JobStatus;
use lava_batch_wire::{self as wire, SignalAction, SignalRequestOutcome as Outcome};

use super::harness::*;
use crate::{ClientId, ClientReply, HistoryBuilder, Input, Mbd, MbdConfig, REASON_DEPEND_NEVER};

/// The test cluster with `MAX_JOBID` = `max`.
fn config_max(max: u32) -> MbdConfig {
    MbdConfig { max_job_id: max, ..config() }
}

fn status(h: &Harness, id: u32) -> JobStatus {
    h.mbd.job(jref(id)).expect("job in memory").status()
}

/// The id the answer to a submission names.
fn submitted_id(effects: &[crate::Effect]) -> u32 {
    match effects.iter().find_map(|e| match e {
        crate::Effect::Reply { reply: ClientReply::Submit(reply), .. } => Some(reply.job_id),
        _ => None,
    }) {
        Some(id) => id,
        None => panic!("no submission answer in {effects:?}"),
    }
}

/// Kills pending jobs `ids` (EXIT at once) and lets `CLEAN_PERIOD` pass so they
/// are cleaned from memory.
fn kill_and_clean(h: &mut Harness, ids: &[u32], request_id: u64) {
    h.step(signal(90, request_id, "alice", ids, SignalAction::Terminate));
    let now = h.now_ms - T0;
    h.at(now + CLEAN_MS + 1).step(Input::Tick);
    for id in ids {
        assert!(h.mbd.job(jref(*id)).is_none(), "job {id} is cleaned");
    }
}

// Goal: after MAX_JOBID the ids start again at 1 and skip every id still in
// memory (a pending job, a finished one not yet cleaned); with all taken, bsub is
// refused; freeing one makes it available again.
#[test]
fn ids_wrap_to_one_and_skip_the_ids_still_known() {
    let mut h = Harness::with_config(config_max(5));
    for n in 1..=5 {
        assert_eq!(submitted_id(&h.step(submit(n, n, "alice", request()))), n as u32);
    }
    // 3 stays pending, 2 finishes but is not cleaned yet, 1, 4 and 5 are cleaned.
    kill_and_clean(&mut h, &[1, 4, 5], 50);
    h.step(signal(91, 51, "alice", &[2], SignalAction::Terminate));
    assert_eq!(status(&h, 2), JobStatus::Exit);
    assert_eq!(submitted_id(&h.step(submit(6, 6, "alice", request()))), 1);
    assert_eq!(submitted_id(&h.step(submit(7, 7, "alice", request()))), 4, "2 and 3 are still known");
    assert_eq!(submitted_id(&h.step(submit(8, 8, "alice", request()))), 5);
    h.check(
        submit(9, 9, "alice", request()),
        vec![reply(
            9,
            ClientReply::error(
                wire::ERR_REJECTED,
                "No job ID available: every job id up to MAX_JOBID 5 belongs to a job still in the system",
            ),
        )],
    );
    // Job 2 is cleaned: its id is free again, after the last one given (5), wrapping.
    let now = h.now_ms - T0;
    h.at(now + CLEAN_MS + 1).step(Input::Tick);
    assert_eq!(submitted_id(&h.step(submit(10, 10, "alice", request()))), 2);
    assert_eq!((h.mbd.last_job_id(), h.mbd.last_submission()), (2, 9));
}

// Goal: a restart at the wrap gives the very next id the live mbatchd would have
// given, whether it replays the whole log or a snapshot taken at the wrap, and
// replay does not depend on MAX_JOBID (a lowered one still replays the log).
#[test]
fn a_restart_at_the_wrap_gives_the_same_next_id() {
    let mut h = Harness::with_config(config_max(3));
    for n in 1..=3 {
        h.step(submit(n, n, "alice", request()));
    }
    kill_and_clean(&mut h, &[1, 3], 50);
    assert_eq!(submitted_id(&h.step(submit(4, 4, "alice", request()))), 1);
    let snapshot = h.mbd.snapshot();
    let mut live = h.mbd.clone();
    let mut effects = Vec::new();
    live.step(h.now_ms, submit(5, 5, "alice", request()), &mut effects);
    assert_eq!(submitted_id(&effects), 3, "2 is pending, so the next id is 3");

    let mut from_snapshot = Mbd::from_snapshot(config_max(3), snapshot).expect("snapshot loads");
    let mut effects = Vec::new();
    from_snapshot.step(h.now_ms, submit(5, 5, "alice", request()), &mut effects);
    assert_eq!(submitted_id(&effects), 3);
    h.restart();
    assert_eq!(submitted_id(&h.step(submit(5, 5, "alice", request()))), 3);
    assert!(h.mbd.same_durable_state(&live));
    // MAX_JOBID lowered below ids already given: replay still takes the log, and
    // the next id wraps at once.
    let lowered = replay_owned(&config_max(2), &h.log);
    assert!(lowered.same_durable_state(&h.mbd));
}

// Goal: across the wrap, dispatch keeps submission order (an old job with a high
// id goes before new jobs with low ids) and bjobs shows the jobs of both sides.
#[test]
fn dispatch_and_queries_follow_submission_order_across_the_wrap() {
    let mut h = Harness::with_config(config_max(4));
    for n in 1..=4 {
        h.step(submit(n, n, "alice", request()));
    }
    kill_and_clean(&mut h, &[1, 2, 3], 50);
    assert_eq!(submitted_id(&h.step(submit(5, 5, "alice", request()))), 1);
    assert_eq!(submitted_id(&h.step(submit(6, 6, "alice", request()))), 2);
    // hostB has one slot: the oldest pending job, 4, goes first.
    h.step(registered("hostB", 1));
    assert_eq!(status(&h, 4), JobStatus::Run);
    assert_eq!((status(&h, 1), status(&h, 2)), (JobStatus::Pend, JobStatus::Pend));
    let shown: Vec<u32> = h.infos(&[4, 1, 2]).iter().map(|info| info.job.job_id).collect();
    assert_eq!(shown, vec![1, 2, 4]);
    // `bjobs` without names: every job, in id order, on one page.
    let all = match h.step(query(7, "alice", wire::state_filter::ALL)).as_slice() {
        [crate::Effect::Reply { reply: ClientReply::JobQuery(reply), .. }] => reply.clone(),
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(all.jobs.iter().map(|info| info.job.job_id).collect::<Vec<_>>(), vec![1, 2, 4]);
    // Job 4 ends: the next is 1, the older of the two new jobs.
    h.step(started("hostB", 4, 40));
    h.step(finished("hostB", 4, 40, 0));
    assert_eq!(status(&h, 1), JobStatus::Run);
}

// Goal: a retried `bstop 0` selects the jobs its first attempt selected, not a
// job submitted afterwards whose id is lower after the wrap (the selection used
// to be "ids up to the highest id given then").
#[test]
fn a_retried_signal_of_every_job_ignores_jobs_submitted_after_the_wrap() {
    let mut h = Harness::with_config(config_max(5));
    for n in 1..=5 {
        h.step(submit(n, n, "alice", request()));
    }
    kill_and_clean(&mut h, &[1, 2, 3, 4], 50);
    let stop_all = || Input::Signal {
        client: ClientId(60),
        request_id: rid(60),
        caller: caller("alice"),
        request: wire::SignalRequest {
            jobs: vec![],
            all_jobs: true,
            user: String::new(),
            action: SignalAction::Stop,
        },
    };
    h.check(
        stop_all(),
        vec![
            append(ev_signal(5, 1, SignalAction::Stop, "alice", 60, h.now_ms)),
            append(ev_status(5, JobStatus::Psusp, "", h.now_ms)),
            signaled(60, &[(5, Outcome::Accepted)]),
        ],
    );
    assert_eq!(submitted_id(&h.step(submit(7, 7, "alice", request()))), 1);
    // The retry answers for job 5 again and leaves job 1 alone.
    h.check(stop_all(), vec![signaled(60, &[(5, Outcome::Accepted)])]);
    assert_eq!(status(&h, 1), JobStatus::Pend);
    h.restart();
    h.check(stop_all(), vec![signaled(60, &[(5, Outcome::Accepted)])]);
}

// Goal: a dependency names the job submitted before its dependent; once that job
// is cleaned and a new job gets its id after the wrap, the condition is on the
// cleaned job (done() never holds), not on the new one, even when it ends DONE.
#[test]
fn a_dependency_never_follows_its_job_id_to_a_later_job() {
    let mut h = Harness::with_config(config_max(2));
    h.step(submit(1, 1, "alice", request()));
    h.step(submit(2, 2, "alice", wire::SubmitRequest { dependency: "done(1)".into(), ..request() }));
    kill_and_clean(&mut h, &[1], 50);
    assert_eq!(submitted_id(&h.step(submit(3, 3, "alice", request()))), 1);
    h.step(registered("hostB", 1));
    h.step(started("hostB", 1, 10));
    h.step(finished("hostB", 1, 10, 0));
    assert_eq!(status(&h, 1), JobStatus::Done);
    h.step(Input::Tick);
    assert_eq!(status(&h, 2), JobStatus::Pend, "job 2 waits for the old job 1, which exited");
    assert_eq!(h.infos(&[2])[0].reason, REASON_DEPEND_NEVER);
    // A name resolves to the newest job of that name, by submission, not by id.
    let named = |name: &str| wire::SubmitRequest { job_name: name.into(), ..request() };
    let mut h = Harness::with_config(config_max(4));
    h.step(submit(1, 1, "alice", named("prep")));
    h.step(submit(2, 2, "alice", request()));
    h.step(submit(3, 3, "alice", named("prep")));
    h.step(submit(4, 4, "alice", request()));
    kill_and_clean(&mut h, &[1, 4], 50);
    assert_eq!(submitted_id(&h.step(submit(5, 5, "alice", named("prep")))), 1);
    let waits = wire::SubmitRequest { dependency: "ended(prep)".into(), ..request() };
    assert_eq!(submitted_id(&h.step(submit(6, 6, "alice", waits))), 4);
    let dependent = h.mbd.job(jref(4)).expect("dependent in memory");
    let target = dependent.dependency.as_ref().and_then(|d| d.conditions().first().map(|c| c.job));
    assert_eq!(target, Some(jref(1)), "the newest prep is job 1, submitted after job 3");
}

// Goal: bhist pages by the lowest ids whatever their order in the log (after a
// wrap the log holds 400-999 before 1-100), and an id given again tells its
// newest job.
#[test]
fn history_pages_by_lowest_id_and_tells_the_newest_job_of_an_id() {
    let mut log = Vec::new();
    for id in (400..=999).chain(1..=100) {
        log.push(ev_new(id, u64::from(id), "alice", "normal", request(), T0));
    }
    let page = |after_job: u32| {
        let query = wire::HistoryQuery {
            jobs: vec![],
            user: "all".into(),
            state_filter: wire::state_filter::ALL,
            after_job,
        };
        let mut builder = HistoryBuilder::new(query, &caller("alice"));
        for event in &log {
            builder.add(event);
        }
        builder.finish()
    };
    let first = page(0);
    let ids: Vec<u32> = first.jobs.iter().map(|j| j.job.job_id).collect();
    assert_eq!(ids, (1..=100).chain(400..=799).collect::<Vec<_>>());
    assert_eq!(first.next_after, 799);
    let second = page(799);
    let ids: Vec<u32> = second.jobs.iter().map(|j| j.job.job_id).collect();
    assert_eq!(ids, (800..=999).collect::<Vec<_>>());
    assert_eq!(second.next_after, 0);

    // Job 7 of alice, cleaned, then job 7 again (bob's, after a wrap).
    let old = wire::SubmitRequest { command: "old".into(), ..request() };
    let new = wire::SubmitRequest { command: "new".into(), ..request() };
    let log = [
        ev_new(7, 1, "alice", "normal", old, T0),
        ev_status(7, JobStatus::Psusp, "", T0 + 1),
        ev_new(7, 2, "bob", "normal", new, T0 + 2),
        ev_status(7, JobStatus::Psusp, "", T0 + 3),
    ];
    let ask = |user: &str| {
        let query = wire::HistoryQuery {
            jobs: vec![],
            user: user.into(),
            state_filter: wire::state_filter::ALL,
            after_job: 0,
        };
        let mut builder = HistoryBuilder::new(query, &caller("alice"));
        for event in &log {
            builder.add(event);
        }
        builder.finish().jobs
    };
    let all = ask("all");
    assert_eq!(all.len(), 1);
    assert_eq!((all[0].user_name.as_str(), all[0].command.as_str()), ("bob", "new"));
    assert_eq!(all[0].entries.len(), 2, "the newer job's submission and its status");
    assert!(ask("alice").is_empty(), "alice's job 7 is gone; the id is bob's now");
}
