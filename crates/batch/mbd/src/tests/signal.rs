//! `bkill` / `bstop` / `bresume` and SIGNAL_REPLY.

use lava_batch_ll::JobStatus;
use lava_batch_wire::{self as wire, SignalAction, SignalOutcome, SignalRequestOutcome as Outcome};

use super::harness::*;
use crate::{ClientId, Event, Input, REASON_USER_STOP, REASON_USER_STOP_PENDING, ToSbd};

fn new_job(h: &Harness, id: u32) -> ToSbd {
    let job = h.mbd.job(jref(id)).expect("job exists");
    ToSbd::NewJob(Box::new(h.mbd.job_specs(&job)))
}

// Goal: STOP and CONT of a pending job need no sbatchd: intent then result,
// and a resumed job is dispatched in the same step.
#[test]
fn stop_and_resume_of_a_pending_job() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    h.at(10).check(
        signal(2, 2, "alice", &[1], SignalAction::Stop),
        vec![
            append(ev_signal(1, 1, SignalAction::Stop, "alice", 2, T0 + 10)),
            append(ev_status(1, JobStatus::Psusp, "", T0 + 10)),
            signaled(2, &[(1, Outcome::Accepted)]),
        ],
    );
    assert_eq!(h.infos(&[1])[0].reason, REASON_USER_STOP_PENDING);
    // Already stopped: accepted; only the request is logged, no status.
    h.check(
        signal(3, 3, "alice", &[1], SignalAction::Stop),
        vec![
            append(ev_signal(1, 2, SignalAction::Stop, "alice", 3, T0 + 10)),
            signaled(3, &[(1, Outcome::Accepted)]),
        ],
    );
    h.step(registered("hostA", 1));
    h.at(20);
    let effects = h.step(signal(4, 4, "alice", &[1], SignalAction::Continue));
    let expected = vec![
        append(ev_signal(1, 3, SignalAction::Continue, "alice", 4, T0 + 20)),
        append(ev_status(1, JobStatus::Pend, "", T0 + 20)),
        append(ev_start(1, "hostA", 1, T0 + 20)),
        signaled(4, &[(1, Outcome::Accepted)]),
        send("hostA", new_job(&h, 1)),
    ];
    assert_eq!(effects, expected);
}

// Goal: STOP and CONT of a running job log the intent, send JOB_SIGNAL, and
// log the resulting status only when sbatchd says it was delivered; replies
// for superseded or duplicate sequence numbers are ignored.
#[test]
fn stop_and_resume_of_a_running_job_log_intent_then_result() {
    let mut h = Harness::new();
    h.step(registered("hostA", 2));
    h.step(submit(1, 1, "alice", request()));
    h.step(started("hostA", 1, 42));
    h.at(10).check(
        signal(2, 2, "alice", &[1], SignalAction::Stop),
        vec![
            append(ev_signal(1, 1, SignalAction::Stop, "alice", 2, T0 + 10)),
            send("hostA", job_signal(1, 1, SignalAction::Stop)),
            signaled(2, &[(1, Outcome::Accepted)]),
        ],
    );
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Run.bits());
    h.at(20).check(
        signal_reply("hostA", 1, 1, SignalOutcome::Delivered),
        vec![
            append(ev_status(1, JobStatus::Ususp, "", T0 + 20)),
            append(ev_sigact(1, 1, SignalOutcome::Delivered, T0 + 20)),
        ],
    );
    assert_eq!(h.infos(&[1])[0].reason, REASON_USER_STOP);
    h.check(signal_reply("hostA", 1, 1, SignalOutcome::Delivered), vec![]);
    // CONT, then a STOP that supersedes it before any answer: the CONT's
    // late answer is ignored, the STOP's decides (already USUSP: no status).
    h.at(30).step(signal(3, 3, "alice", &[1], SignalAction::Continue));
    h.step(signal(4, 4, "alice", &[1], SignalAction::Stop));
    h.check(signal_reply("hostA", 1, 2, SignalOutcome::Delivered), vec![]);
    h.at(40).check(
        signal_reply("hostA", 1, 3, SignalOutcome::Delivered),
        vec![append(ev_sigact(1, 3, SignalOutcome::Delivered, T0 + 40))],
    );
    h.at(50).step(signal(5, 5, "alice", &[1], SignalAction::Continue));
    h.check(
        signal_reply("hostA", 1, 4, SignalOutcome::Delivered),
        vec![
            append(ev_status(1, JobStatus::Run, "", T0 + 50)),
            append(ev_sigact(1, 4, SignalOutcome::Delivered, T0 + 50)),
        ],
    );
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Run.bits());
}

// Goal: a kill ends a pending job at once (EXIT), and a running job through
// the FINISH stage; a kill asked before the start is accepted goes out with the accept.
#[test]
fn kill_of_pending_and_of_running_jobs() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    h.at(10).check(
        signal(2, 2, "alice", &[1], SignalAction::Terminate),
        vec![
            append(ev_signal(1, 1, SignalAction::Terminate, "alice", 2, T0 + 10)),
            append(ev_killed_pending(1, 9, T0 + 10)),
            signaled(2, &[(1, Outcome::Accepted)]),
        ],
    );
    let info = &h.infos(&[1])[0];
    assert_eq!((info.status, info.exit_code), (JobStatus::Exit.bits(), 137));
    h.check(
        signal(3, 3, "alice", &[1], SignalAction::Terminate),
        vec![signaled(3, &[(1, Outcome::AlreadyFinished)])],
    );

    h.step(registered("hostA", 2));
    h.step(submit(4, 4, "alice", request()));
    h.at(20).check(
        signal(5, 5, "alice", &[2], SignalAction::Signal(15)),
        vec![
            append(ev_signal(2, 1, SignalAction::Signal(15), "alice", 5, T0 + 20)),
            signaled(5, &[(2, Outcome::Accepted)]),
        ],
    );
    h.at(30).check(
        started("hostA", 2, 77),
        vec![
            append(ev_accept(2, 77, T0 + 30)),
            send("hostA", reply_ack(2)),
            send("hostA", job_signal(2, 1, SignalAction::Signal(15))),
        ],
    );
    h.check(
        signal_reply("hostA", 2, 1, SignalOutcome::Delivered),
        vec![append(ev_sigact(2, 1, SignalOutcome::Delivered, T0 + 30))],
    );
    h.at(40).check(
        finished("hostA", 2, 77, 15),
        vec![append(ev_finished(2, 77, 15, T0 + 40)), send("hostA", finish_ack(2))],
    );
    assert_eq!(h.infos(&[2])[0].exit_code, 143);
}

// Goal: intents not yet sent when the dispatch is refused apply to the
// pending job: a kill ends it, a STOP holds it.
#[test]
fn a_refusal_applies_waiting_intents_to_the_pending_job() {
    let mut h = Harness::new();
    h.step(registered("hostA", 2));
    h.step(submit(1, 1, "alice", request()));
    h.step(submit(2, 2, "alice", request()));
    h.step(signal(3, 3, "alice", &[1], SignalAction::Terminate));
    h.step(signal(4, 4, "alice", &[2], SignalAction::Stop));
    let reason = "The job was refused by the execution host <hostA>: no";
    h.at(10).check(
        refused("hostA", 1, "no"),
        vec![
            append(ev_status(1, JobStatus::Pend, reason, T0 + 10)),
            append(ev_killed_pending(1, 9, T0 + 10)),
            send("hostA", reply_ack(1)),
        ],
    );
    h.check(
        refused("hostA", 2, "no"),
        vec![
            append(ev_status(2, JobStatus::Pend, reason, T0 + 10)),
            append(ev_status(2, JobStatus::Psusp, "", T0 + 10)),
            send("hostA", reply_ack(2)),
        ],
    );
}

// Goal: only the owner, root or a cluster administrator may signal; unknown
// ids are NotFound; a signal other than kill/stop/resume on a pending job is NotStarted.
#[test]
fn permissions_and_per_job_outcomes() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    h.step(submit(2, 2, "bob", request()));
    h.check(
        signal(3, 3, "bob", &[1, 2, 99, 0], SignalAction::Signal(1)),
        vec![signaled(
            3,
            &[
                (1, Outcome::PermissionDenied),
                (2, Outcome::NotStarted),
                (99, Outcome::NotFound),
                (0, Outcome::NotFound),
            ],
        )],
    );
    for (n, who) in [(4, "admin"), (5, "root")] {
        let effects = h.step(signal(n, n, who, &[1], SignalAction::Stop));
        assert_eq!(effects.last(), Some(&signaled(n, &[(1, Outcome::Accepted)])), "{who}");
    }
    let mut by_uid = caller("operator");
    by_uid.uid = 5000;
    let request = wire::SignalRequest {
        jobs: vec![wref(2)],
        all_jobs: false,
        user: String::new(),
        action: SignalAction::Terminate,
    };
    let effects = h.step(Input::Signal { client: ClientId(6), request_id: rid(6), caller: by_uid, request });
    assert_eq!(effects.last(), Some(&signaled(6, &[(2, Outcome::Accepted)])));
    h.check(
        signal(7, 7, "alice", &[1], SignalAction::Signal(99)),
        vec![reply(7, crate::ClientReply::error(wire::ERR_BAD_REQUEST, "Signal(99): Bad signal"))],
    );
}

// Goal: `bkill 0` acts on every unfinished job of the caller (of `-u` for an
// admin), in id order; a retried request acts on no job twice.
#[test]
fn bkill_0_and_retried_signal_requests() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    h.step(submit(2, 2, "bob", request()));
    h.step(submit(3, 3, "alice", request()));
    h.step(signal(4, 4, "alice", &[3], SignalAction::Terminate));
    let all = |who: &str, user: &str, request_id: u64| Input::Signal {
        client: ClientId(request_id),
        request_id: rid(request_id),
        caller: caller(who),
        request: wire::SignalRequest {
            jobs: vec![],
            all_jobs: true,
            user: user.into(),
            action: SignalAction::Stop,
        },
    };
    h.at(10).check(
        all("alice", "", 5),
        vec![
            append(ev_signal(1, 1, SignalAction::Stop, "alice", 5, T0 + 10)),
            append(ev_status(1, JobStatus::Psusp, "", T0 + 10)),
            signaled(5, &[(1, Outcome::Accepted)]),
        ],
    );
    // The retry answers for the same jobs, even with a new job of alice's since.
    h.step(submit(6, 6, "alice", request()));
    h.check(all("alice", "", 5), vec![signaled(5, &[(1, Outcome::Accepted)])]);
    h.check(all("alice", "bob", 7), vec![signaled(7, &[(2, Outcome::PermissionDenied)])]);
    h.at(20).check(
        all("admin", "all", 8),
        vec![
            // Job 1 is already stopped: the request is logged, nothing else.
            append(ev_signal(1, 2, SignalAction::Stop, "admin", 8, T0 + 20)),
            append(ev_signal(2, 1, SignalAction::Stop, "admin", 8, T0 + 20)),
            append(ev_status(2, JobStatus::Psusp, "", T0 + 20)),
            append(ev_signal(4, 1, SignalAction::Stop, "admin", 8, T0 + 20)),
            append(ev_status(4, JobStatus::Psusp, "", T0 + 20)),
            signaled(8, &[(1, Outcome::Accepted), (2, Outcome::Accepted), (4, Outcome::Accepted)]),
        ],
    );
    // A retried CONT after a later STOP does not resume the job again.
    h.step(signal(9, 9, "alice", &[1], SignalAction::Continue));
    h.step(signal(10, 10, "alice", &[1], SignalAction::Stop));
    h.check(
        signal(9, 9, "alice", &[1], SignalAction::Continue),
        vec![signaled(9, &[(1, Outcome::Accepted)])],
    );
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Psusp.bits());
}

// Regression (found by the crash-point test, tests/crash_points.rs): `bkill` of a running
// job, mbatchd crashed after logging the kill and before answering; the job finished
// meanwhile, and the command's retry (same request id) was answered "Job has already
// finished", an error for a request that had worked. Goal: the retry is recognised on the
// finished job too and answered Accepted again; another request still gets the error.
#[test]
fn retried_kill_of_a_job_it_finished_is_accepted_again() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    h.step(signal(2, 2, "alice", &[1], SignalAction::Terminate));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Exit.bits(), "a pending job is killed at once");
    h.check(
        signal(2, 2, "alice", &[1], SignalAction::Terminate),
        vec![signaled(2, &[(1, Outcome::Accepted)])],
    );
    h.restart();
    h.check(
        signal(2, 2, "alice", &[1], SignalAction::Terminate),
        vec![signaled(2, &[(1, Outcome::Accepted)])],
    );
    h.check(
        signal(3, 3, "alice", &[1], SignalAction::Terminate),
        vec![signaled(3, &[(1, Outcome::AlreadyFinished)])],
    );
}

/// MBD_START as the test configuration logs it at `t`.
fn mbd_start(t: u64) -> crate::Effect {
    append(Event::MbdStart(crate::event::MbdStartRecord {
        time_ms: t,
        master_host: host("master"),
        cluster_name: "lava".into(),
    }))
}

// Regression (found by lava-sim): lava-eventlog makes each record durable
// on its own, and a crash kept the JOB_SIGNAL of a `bresume` of a held job but
// not its JOB_STATUS PEND; the retried request found its id and answered
// Accepted, and the job stayed PSUSP for ever. Goal: Start logs the status a
// torn step lost, for a pending job's signal and for a refusal's follow-up;
// a torn signal reply keeps the intent, which is answered again.
// Method: drop the step's last record from the log, restart, step Start.
#[test]
fn torn_step_lost_the_status_that_answers_an_intent() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", wire::SubmitRequest { hold: true, ..request() }));
    h.step(signal(2, 2, "alice", &[1], SignalAction::Continue));
    assert!(matches!(h.log.pop(), Some(Event::JobStatus(_))), "the step's last record is lost");
    h.restart();
    h.at(10)
        .check(Input::Start, vec![mbd_start(T0 + 10), append(ev_status(1, JobStatus::Pend, "", T0 + 10))]);
    h.check(
        signal(3, 2, "alice", &[1], SignalAction::Continue),
        vec![signaled(3, &[(1, Outcome::Accepted)])],
    );
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Pend.bits());

    // A kill asked before the start was accepted, then a refusal: PEND, EXIT.
    h.step(registered("hostA", 2));
    h.step(signal(4, 4, "alice", &[1], SignalAction::Terminate));
    h.at(20).step(refused("hostA", 1, "no user alice"));
    assert!(matches!(h.log.pop(), Some(Event::JobStatus(_))), "the EXIT is lost");
    h.restart();
    h.at(30).check(Input::Start, vec![mbd_start(T0 + 30), append(ev_killed_pending(1, 9, T0 + 30))]);

    // A delivered STOP: USUSP is logged before the JOB_SIGACT, which is lost.
    h.step(registered("hostA", 2));
    h.step(submit(5, 5, "alice", request()));
    h.step(started("hostA", 2, 42));
    h.step(signal(6, 6, "alice", &[2], SignalAction::Stop));
    h.at(40).step(signal_reply("hostA", 2, 1, SignalOutcome::Delivered));
    assert!(matches!(h.log.pop(), Some(Event::JobSigact(_))), "the JOB_SIGACT is lost");
    h.restart();
    h.at(50).check(Input::Start, vec![mbd_start(T0 + 50)]);
    assert_eq!(h.infos(&[2])[0].status, JobStatus::Ususp.bits());
    h.check(
        registered("hostA", 2),
        vec![send("hostA", register_ack()), send("hostA", job_signal(2, 1, SignalAction::Stop))],
    );
    h.check(
        signal_reply("hostA", 2, 1, SignalOutcome::Delivered),
        vec![append(ev_sigact(2, 1, SignalOutcome::Delivered, T0 + 50))],
    );
}

// Regression (found by lava-sim): a `bstop` whose retry found the job
// already stopped logged nothing, so its request id was unknown; the first
// attempt, late on the connection the command had given up, then arrived
// after a `bresume` and stopped the job again. Goal: a request that changes
// nothing still records its id, and a late copy of it changes nothing.
#[test]
fn late_copy_of_a_request_that_changed_nothing_acted_after_a_later_one() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", wire::SubmitRequest { hold: true, ..request() }));
    h.check(
        signal(2, 2, "alice", &[1], SignalAction::Stop),
        vec![
            append(ev_signal(1, 1, SignalAction::Stop, "alice", 2, T0)),
            signaled(2, &[(1, Outcome::Accepted)]),
        ],
    );
    h.step(signal(3, 3, "alice", &[1], SignalAction::Continue));
    h.check(signal(4, 2, "alice", &[1], SignalAction::Stop), vec![signaled(4, &[(1, Outcome::Accepted)])]);
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Pend.bits());
}

// Regression (found by lava-sim): a crash kept the JOB_SIGNALs of the first
// jobs of a `bresume 0` but not the last one's; the retry selected only the
// jobs carrying its request id, and the last job stayed PSUSP for ever. Goal:
// the retry selects every job the first attempt selected (still not one
// submitted since), acting only where the first attempt's records are lost.
#[test]
fn torn_bresume_0_retry_missed_the_jobs_whose_records_were_lost() {
    let mut h = Harness::new();
    let held = || wire::SubmitRequest { hold: true, ..request() };
    h.step(submit(1, 1, "alice", held()));
    h.step(submit(2, 2, "alice", held()));
    let resume_all = |request_id: u64| Input::Signal {
        client: ClientId(request_id),
        request_id: rid(request_id),
        caller: caller("alice"),
        request: wire::SignalRequest {
            jobs: vec![],
            all_jobs: true,
            user: String::new(),
            action: SignalAction::Continue,
        },
    };
    h.at(10).step(resume_all(3));
    assert!(matches!(h.log.pop(), Some(Event::JobStatus(_))), "job 2's status is lost");
    assert!(matches!(h.log.pop(), Some(Event::JobSignal(_))), "job 2's intent is lost");
    h.restart();
    h.at(20).step(Input::Start);
    h.step(submit(4, 4, "alice", held()));
    h.at(30).check(
        resume_all(3),
        vec![
            append(ev_signal(2, 1, SignalAction::Continue, "alice", 3, T0 + 30)),
            append(ev_status(2, JobStatus::Pend, "", T0 + 30)),
            signaled(3, &[(1, Outcome::Accepted), (2, Outcome::Accepted)]),
        ],
    );
    assert_eq!(h.infos(&[3])[0].status, JobStatus::Psusp.bits(), "job 3 came after the first attempt");
}

// Goal: unanswered intents are resent on Tick after the interval, only to a
// connected host; an answered one is not.
#[test]
fn signal_intents_are_resent_until_answered() {
    let mut h = Harness::new();
    h.step(registered("hostA", 2));
    h.step(submit(1, 1, "alice", request()));
    h.step(started("hostA", 1, 42));
    h.step(signal(2, 2, "alice", &[1], SignalAction::Stop));
    h.at(RESEND_MS - 1).check(Input::Tick, vec![]);
    h.at(RESEND_MS).check(Input::Tick, vec![send("hostA", job_signal(1, 1, SignalAction::Stop))]);
    h.step(Input::HostDisconnected { host: host("hostA") });
    h.at(3 * RESEND_MS).check(Input::Tick, vec![]);
    h.step(signal_reply("hostA", 1, 1, SignalOutcome::Failed(3)));
    h.check(registered("hostA", 2), vec![send("hostA", register_ack())]);
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Run.bits());
}

// Goal: LSF's termination reason names who killed the job: a kill its owner asked for
// ends it TERM_OWNER (`FINISH_KILLED`), one root or an administrator asked for TERM_ADMIN
// (`FINISH_KILLED_ADMIN`), whether mbatchd ends the pending job itself or sbatchd reports
// the run killed (sbatchd says `FINISH_KILLED` whoever asked); the newest kill decides;
// a snapshot between the kill and the finish keeps who asked (`admin_kills`).
#[test]
fn a_kill_by_root_or_an_administrator_ends_the_job_term_admin() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    h.step(submit(2, 2, "alice", request()));
    h.step(signal(3, 3, "alice", &[1], SignalAction::Terminate));
    h.step(signal(4, 4, "admin", &[2], SignalAction::Terminate));
    let reasons: Vec<u32> = h.infos(&[1, 2]).iter().map(|info| info.finish_reason).collect();
    assert_eq!(reasons, [wire::FINISH_KILLED, wire::FINISH_KILLED_ADMIN]);
    let exit_info =
        |h: &Harness, id| h.mbd.job(jref(id)).expect("held").acct_record().expect("finished").exit_info;
    assert_eq!((exit_info(&h, 1), exit_info(&h, 2)), (14, 15));

    h.step(registered("hostA", 2));
    h.step(submit(5, 5, "alice", request()));
    h.step(submit(6, 6, "alice", request()));
    h.step(started("hostA", 3, 77));
    h.step(started("hostA", 4, 78));
    h.step(signal(7, 7, "root", &[3], SignalAction::Terminate));
    h.step(signal(8, 8, "root", &[4], SignalAction::Terminate));
    h.step(signal(9, 9, "alice", &[4], SignalAction::Terminate));
    let snapshot = xdr_round_trip(&h.mbd.snapshot());
    assert_eq!(snapshot.admin_kills, [jref(3)]);
    // A list naming a job twice, or a finished or unknown job, is refused, naming the job.
    for bad in [vec![jref(3), jref(3)], vec![jref(1)], vec![jref(99)]] {
        let broken = crate::MbdSnapshot { admin_kills: bad.clone(), ..snapshot.clone() };
        let error = crate::Mbd::from_snapshot(config(), broken).map(|_| ()).expect_err("refused").to_string();
        assert!(error.contains(&format!("administrator's kill of job {}", bad[bad.len() - 1])), "{error}");
    }
    h.mbd = crate::Mbd::from_snapshot(config(), snapshot).expect("the snapshot loads");
    for (id, pid) in [(3, 77), (4, 78)] {
        let msg = wire::JobFinish { finish_reason: wire::FINISH_KILLED, ..finish_msg(id, pid, 2) };
        h.step(Input::JobFinish { host: host("hostA"), msg });
    }
    let reasons: Vec<u32> = h.infos(&[3, 4]).iter().map(|info| info.finish_reason).collect();
    assert_eq!(reasons, [wire::FINISH_KILLED_ADMIN, wire::FINISH_KILLED]);
    assert_eq!((exit_info(&h, 3), exit_info(&h, 4)), (15, 14));
    assert!(h.mbd.snapshot().admin_kills.is_empty(), "only unfinished jobs are listed");
}
