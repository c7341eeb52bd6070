//! Pre-execution failures (docs/batch.md, "Pre- and post-execution commands"): back to
//! PEND with LSF's reason, dispatched again, up to `LOCAL_MAX_PREEXEC_RETRY`; exit 99 ends
//! the job. Every step also proves replay (the failures counted from the log).

use lava_batch_ll::JobStatus;
use lava_batch_wire as wire;

use super::harness::*;
use crate::{Effect, Event, Input, PreExecRetryAction, REASON_PRE_EXEC, REASON_PRE_EXEC_LIMIT, ToSbd};

/// NEW_JOB_REPLY of dispatch `seq` of job `id`: its pre-execution commands exited `exit`.
fn pre_exec_failed(on: &str, id: u32, seq: u32, exit: u8) -> Input {
    let outcome = wire::NewJobOutcome::Refused {
        code: wire::REFUSE_PRE_EXEC_BASE + u32::from(exit),
        message: format!("pre-execution command exited with {exit}"),
    };
    Input::NewJobReply {
        host: host(on),
        reply: wire::NewJobReply { job: wref(id), dispatch_seq: seq, outcome },
    }
}

fn ack(id: u32, seq: u32) -> Effect {
    send("hostA", ToSbd::NewJobReplyAck(wire::JobAck { job: wref(id), dispatch_seq: seq }))
}

/// The dispatch numbers of the JOB_STARTs among `effects`.
fn started(effects: &[Effect]) -> usize {
    effects.iter().filter(|e| matches!(e, Effect::Append(Event::JobStart(_)))).count()
}

// Goal: a failed pre-exec puts the job back to PEND with LSF's reason and acknowledges; the
// host is not avoided (the job goes back to it at once), a copy of the old failure only gets
// its ACK, and the job runs normally once a pre-exec succeeds.
#[test]
fn a_failed_pre_exec_requeues_the_job_to_the_same_host() {
    let mut h = Harness::new();
    h.step(registered("hostA", 1));
    h.step(submit(1, 1, "alice", request()));
    let effects = h.at(10).step(pre_exec_failed("hostA", 1, 1, 3));
    assert_eq!(effects[0], append(ev_status(1, JobStatus::Pend, REASON_PRE_EXEC, T0 + 10)));
    assert!(effects.contains(&ack(1, 1)), "{effects:?}");
    assert_eq!(started(&effects), 1, "dispatched again to the same host: {effects:?}");
    assert_eq!(h.mbd.job(jref(1)).expect("job").pre_exec_failures, 1);
    // A late copy of the first failure: ACK only.
    h.check(pre_exec_failed("hostA", 1, 1, 3), vec![ack(1, 1)]);
    h.restart();
    assert_eq!(h.mbd.job(jref(1)).expect("job").pre_exec_failures, 1, "replay counts the failure");
    h.step(registered("hostA", 1));
    h.step(started_run("hostA", 1, 77, 2));
    let info = &h.infos(&[1])[0];
    assert_eq!((info.status, info.pid), (JobStatus::Run.bits(), 77));
}

// Goal: with no limit (LSF's default) the job is retried again and again.
#[test]
fn without_a_limit_a_failing_pre_exec_is_retried() {
    let mut h = Harness::new();
    h.step(registered("hostA", 1));
    h.step(submit(1, 1, "alice", request()));
    for seq in 1..=5 {
        let effects = h.step(pre_exec_failed("hostA", 1, seq, 1));
        assert_eq!(started(&effects), 1, "attempt {seq}: {effects:?}");
    }
    assert_eq!(h.mbd.job(jref(1)).expect("job").pre_exec_failures, 5);
}

// Goal: after LOCAL_MAX_PREEXEC_RETRY failures the job is held (SUSPEND, LSF's default
// action), not dispatched again; `bresume` releases it for one more attempt.
#[test]
fn the_retry_limit_holds_the_job() {
    let mut config = config();
    config.local_max_preexec_retry = Some(2);
    let mut h = Harness::with_config(config);
    h.step(registered("hostA", 1));
    h.step(submit(1, 1, "alice", request()));
    let effects = h.step(pre_exec_failed("hostA", 1, 1, 1));
    assert_eq!(started(&effects), 1);
    let effects = h.at(20).step(pre_exec_failed("hostA", 1, 2, 1));
    assert_eq!(effects[0], append(ev_status(1, JobStatus::Psusp, REASON_PRE_EXEC_LIMIT, T0 + 20)));
    assert_eq!(started(&effects), 0, "{effects:?}");
    let info = &h.infos(&[1])[0];
    assert_eq!((info.status, info.reason.as_str()), (JobStatus::Psusp.bits(), REASON_PRE_EXEC_LIMIT));
    h.restart();
    h.step(registered("hostA", 1));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Psusp.bits());
    let effects = h.step(signal(2, 2, "alice", &[1], wire::SignalAction::Continue));
    assert_eq!(started(&effects), 1, "released and dispatched: {effects:?}");
}

// Goal: with LOCAL_MAX_PREEXEC_RETRY_ACTION=EXIT (here the queue's) the job ends EXIT with
// the pre-exec's exit value at the limit; exit 99 ends it at the first failure whatever the
// limit, as LSF does.
#[test]
fn exit_action_and_exit_99_end_the_job() {
    let mut config = config();
    config.local_max_preexec_retry = Some(1);
    config.queues[0].preexec_retry_action = Some(PreExecRetryAction::Exit);
    let mut h = Harness::with_config(config);
    h.step(registered("hostA", 1));
    h.step(submit(1, 1, "alice", request()));
    h.step(pre_exec_failed("hostA", 1, 1, 7));
    let info = &h.infos(&[1])[0];
    assert_eq!(
        (info.status, info.exit_code, info.finish_reason),
        (JobStatus::Exit.bits(), 7, wire::FINISH_PRE_EXEC)
    );

    let mut h = Harness::new();
    h.step(registered("hostA", 1));
    h.step(submit(1, 1, "alice", request()));
    let effects = h.step(pre_exec_failed("hostA", 1, 1, 99));
    assert_eq!(started(&effects), 0);
    let info = &h.infos(&[1])[0];
    assert_eq!((info.status, info.exit_code), (JobStatus::Exit.bits(), 99));
    h.restart();
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Exit.bits());
}

// Goal: the queue's PRE_EXEC and POST_EXEC and the job's -Ep travel in NEW_JOB.
#[test]
fn new_job_carries_the_hooks() {
    let mut config = config();
    config.queues[0].pre_exec = "qpre".into();
    config.queues[0].post_exec = "qpost".into();
    let mut h = Harness::with_config(config);
    h.step(registered("hostA", 1));
    let mut request = request();
    request.pre_exec = "pre".into();
    request.post_exec = "post".into();
    let effects = h.step(submit(1, 1, "alice", request));
    let specs = effects
        .iter()
        .find_map(|e| match e {
            Effect::SendSbd { msg: ToSbd::NewJob(specs), .. } => Some(specs.clone()),
            _ => None,
        })
        .expect("NEW_JOB");
    let hooks = (&*specs.queue_pre_exec, &*specs.pre_exec, &*specs.post_exec, &*specs.queue_post_exec);
    assert_eq!(hooks, ("qpre", "pre", "post", "qpost"));
    let info = &h.infos(&[1])[0];
    assert_eq!((info.pre_exec.as_str(), info.post_exec.as_str()), ("pre", "post"));
}
