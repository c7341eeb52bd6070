//! Submission, dispatch and the NEW_JOB / EXECUTE / FINISH pipeline.

use lava_batch_ll::JobStatus;
use lava_batch_wire as wire;

use super::harness::*;
use crate::event::MbdStartRecord;
use crate::{ClientReply, Event, Input, REASON_NEW_JOB, ToSbd};

/// NEW_JOB for job `id` as the live state builds it.
fn new_job(h: &Harness, id: u32) -> ToSbd {
    let job = h.mbd.job(jref(id)).expect("job exists");
    ToSbd::NewJob(Box::new(h.mbd.job_specs(&job)))
}

/// Submits a default job for alice and has `on` accept it with pid 100 + id.
fn run_job(h: &mut Harness, request_id: u64, on: &str) -> u32 {
    let effects = h.step(submit(request_id, request_id, "alice", request()));
    let id = match effects.iter().find_map(|e| match e {
        crate::Effect::Reply { reply: ClientReply::Submit(r), .. } => Some(r.job_id),
        _ => None,
    }) {
        Some(id) => id,
        None => panic!("not submitted: {effects:?}"),
    };
    h.step(started(on, id, 100 + id as i32));
    id
}

// Goal: a submission logs JOB_NEW and then answers, even with no host to run on.
#[test]
fn submit_appends_job_new_then_replies() {
    let mut h = Harness::new();
    h.check(
        Input::Start,
        vec![append(Event::MbdStart(MbdStartRecord {
            time_ms: T0,
            master_host: host("master"),
            cluster_name: "lava".into(),
        }))],
    );
    h.check(
        submit(1, 1, "alice", request()),
        vec![append(ev_new(1, 1, "alice", "normal", request(), T0)), submitted(1, 1, "normal", true)],
    );
    let mut named = request();
    named.queue = "high".into();
    h.check(
        submit(2, 2, "bob", named.clone()),
        vec![append(ev_new(2, 2, "bob", "high", named, T0)), submitted(2, 2, "high", false)],
    );
    // No slot is free anywhere: no turn ran yet, so the job has LSF's first reason.
    let infos = h.infos(&[1]);
    assert_eq!((infos[0].status, infos[0].reason.as_str()), (JobStatus::Pend.bits(), REASON_NEW_JOB));
}

// Goal: what a submission may not ask is refused with LSF's wording, and nothing is logged.
#[test]
fn bad_submissions_are_refused_with_lsf_wording() {
    let mut h = Harness::new();
    let mut nosuch = request();
    nosuch.queue = "nosuch".into();
    h.check(
        submit(1, 1, "alice", nosuch),
        vec![reply(1, ClientReply::error(wire::ERR_NO_QUEUE, "nosuch: No such queue"))],
    );
    let mut bad_host = request();
    bad_host.hosts = vec!["hostZ".into()];
    h.check(
        submit(2, 2, "alice", bad_host),
        vec![reply(
            2,
            ClientReply::error(wire::ERR_REJECTED, "hostZ: Bad host name, host group name or cluster name"),
        )],
    );
    let mut outside_queue = request();
    outside_queue.queue = "high".into();
    outside_queue.hosts = vec!["hostB".into()];
    h.check(
        submit(3, 3, "alice", outside_queue),
        vec![reply(
            3,
            ClientReply::error(wire::ERR_REJECTED, "hostB: Host or host group is not used by the queue"),
        )],
    );
    let mut relative_home = request();
    relative_home.home_dir = "home".into();
    h.check(
        submit(4, 4, "alice", relative_home),
        vec![reply(4, ClientReply::error(wire::ERR_BAD_REQUEST, "submit.home_dir: is not an absolute path"))],
    );
    let mut no_default = config();
    no_default.queues.retain(|q| !q.default);
    let mut h = Harness::with_config(no_default);
    h.check(
        submit(5, 5, "alice", request()),
        vec![reply(5, ClientReply::error(wire::ERR_NO_QUEUE, "No default queue defined"))],
    );
}

// Goal: the three stages in order, each event before the ACK that confirms
// it, NEW_JOB after the JOB_START it carries, and the NEW_JOB snapshot as
// sbatchd receives it.
#[test]
fn full_pipeline_logs_each_stage_before_its_ack() {
    let mut h = Harness::new();
    h.check(registered("hostA", 2), vec![send("hostA", register_ack())]);
    h.at(10);
    let specs = wire::JobSpecs {
        job: wref(1),
        submit_time: 1_700_000_000,
        dispatch_time: 1_700_000_000,
        dispatch_seq: 1,
        user_id: 1000,
        group_id: 100,
        user_name: "alice".into(),
        queue: "normal".into(),
        job_name: "sleep 10".into(),
        command: "sleep 10".into(),
        from_host: "client".into(),
        cwd: "work".into(),
        sub_home_dir: "/home/alice".into(),
        input_file: String::new(),
        output_file: String::new(),
        error_file: String::new(),
        file_flags: 0,
        n_slots: 1,
        exec_hosts: vec!["hostA".into()],
        umask: 0o022,
        run_limit_s: 0,
        mem_limit_kb: 0,
        terminate_interval_s: 10,
        project: "default".into(),
        login_shell: String::new(),
        pre_exec: String::new(),
        env: vec![wire::EnvVar { name: "PATH".into(), value: "/bin".into() }],
        post_exec: String::new(),
        queue_pre_exec: String::new(),
        queue_post_exec: String::new(),
        nice: 0,
        limits: wire::ResourceLimits::default(),
        job_starter: String::new(),
    };
    h.check(
        submit(1, 1, "alice", request()),
        vec![
            append(ev_new(1, 1, "alice", "normal", request(), T0 + 10)),
            append(ev_start(1, "hostA", 1, T0 + 10)),
            submitted(1, 1, "normal", true),
            send("hostA", ToSbd::NewJob(Box::new(specs))),
        ],
    );
    h.at(20).check(
        started("hostA", 1, 4242),
        vec![append(ev_accept(1, 4242, T0 + 20)), send("hostA", reply_ack(1))],
    );
    let exec = execute_msg(1, 4242, "/home/alice/work", 1_700_000_001);
    h.at(30).check(
        executed("hostA", 1, 4242),
        vec![append(ev_execute(&exec, T0 + 30)), send("hostA", execute_ack(1))],
    );
    h.at(40).check(
        finished("hostA", 1, 4242, 0),
        vec![append(ev_finished(1, 4242, 0, T0 + 40)), send("hostA", finish_ack(1))],
    );
    let info = &h.infos(&[1])[0];
    assert_eq!(info.status, JobStatus::Done.bits());
    assert_eq!((info.pid, info.exit_code, info.end_time), (4242, 0, 1_700_000_100));
    assert_eq!(
        (info.exec_cwd.as_str(), info.exec_hosts.clone()),
        ("/home/alice/work", vec!["hostA".to_owned()])
    );
}

// Goal: duplicates and reorderings of every pipeline message are idempotent:
// an ACK again and no new event; FINISH dominates whatever comes after it.
#[test]
fn duplicate_and_reordered_pipeline_messages_are_idempotent() {
    let mut h = Harness::new();
    h.step(registered("hostA", 8));
    let one = run_job(&mut h, 1, "hostA");
    h.check(started("hostA", one, 101), vec![send("hostA", reply_ack(one))]);
    let exec = execute_msg(one, 101, "/home/alice/work", 1_700_000_001);
    h.check(
        executed("hostA", one, 101),
        vec![append(ev_execute(&exec, T0)), send("hostA", execute_ack(one))],
    );
    h.check(executed("hostA", one, 101), vec![send("hostA", execute_ack(one))]);
    // A resend with a fresh timestamp is the same execution.
    let later = execute_msg(one, 101, "/home/alice/work", 1_700_000_999);
    h.check(Input::JobExecute { host: host("hostA"), msg: later }, vec![send("hostA", execute_ack(one))]);
    // Different metadata is recorded, the status untouched.
    let moved = execute_msg(one, 101, "/scratch", 1_700_000_002);
    h.check(
        Input::JobExecute { host: host("hostA"), msg: moved.clone() },
        vec![append(ev_execute(&moved, T0)), send("hostA", execute_ack(one))],
    );
    assert_eq!(h.infos(&[one])[0].status, JobStatus::Run.bits());

    // FINISH before EXECUTE; EXECUTE, FINISH and the reply after it: ACK only.
    let two = run_job(&mut h, 2, "hostA");
    h.check(
        finished("hostA", two, 102, 256),
        vec![append(ev_finished(two, 102, 256, T0)), send("hostA", finish_ack(two))],
    );
    h.check(executed("hostA", two, 102), vec![send("hostA", execute_ack(two))]);
    h.check(finished("hostA", two, 102, 256), vec![send("hostA", finish_ack(two))]);
    h.check(started("hostA", two, 102), vec![send("hostA", reply_ack(two))]);
    assert_eq!((h.infos(&[two])[0].status, h.infos(&[two])[0].exit_code), (JobStatus::Exit.bits(), 1));

    // FINISH before the start was ever accepted: still terminal.
    h.step(submit(3, 3, "alice", request()));
    h.check(finished("hostA", 3, 0, 0), vec![append(ev_finished(3, 0, 0, T0)), send("hostA", finish_ack(3))]);
    h.check(started("hostA", 3, 103), vec![send("hostA", reply_ack(3))]);
    assert_eq!(h.infos(&[3])[0].status, JobStatus::Done.bits());

    // Unknown jobs are ACKed so sbatchd can drop them; job id 0 is ignored.
    h.check(finished("hostA", 99, 1, 0), vec![send("hostA", finish_ack(99))]);
    h.check(executed("hostA", 99, 1), vec![send("hostA", execute_ack(99))]);
    h.check(started("hostA", 99, 1), vec![send("hostA", reply_ack(99))]);
    h.check(finished("hostA", 0, 1, 0), vec![]);

    // Messages that contradict the log get neither event nor ACK: a job
    // started elsewhere, a pending job.
    h.check(started("hostB", one, 5), vec![]);
    h.check(finished("hostB", one, 5, 0), vec![]);
    let mut held = request();
    held.hold = true;
    h.step(submit(4, 4, "alice", held));
    h.check(started("hostA", 4, 104), vec![]);
    h.check(executed("hostA", 4, 104), vec![]);
    h.check(finished("hostA", 4, 104, 0), vec![]);
}

// Goal: a refusal returns the job to PEND with the host's reason, frees the
// slot and ACKs; the job is not offered to that host again until it
// re-registers, but goes elsewhere at once.
#[test]
fn refusal_returns_the_job_to_pend_and_avoids_the_host() {
    let mut h = Harness::new();
    h.step(registered("hostA", 2));
    h.step(submit(1, 1, "alice", request()));
    let reason = "The job was refused by the execution host <hostA>: no user alice";
    h.at(10).check(
        refused("hostA", 1, "no user alice"),
        vec![append(ev_status(1, JobStatus::Pend, reason, T0 + 10)), send("hostA", reply_ack(1))],
    );
    let info = &h.infos(&[1])[0];
    assert_eq!(
        (info.status, info.reason.as_str(), info.exec_hosts.len()),
        (JobStatus::Pend.bits(), reason, 0)
    );
    h.check(refused("hostA", 1, "no user alice"), vec![send("hostA", reply_ack(1))]);
    h.check(Input::Tick, vec![]);

    h.at(20);
    let effects = h.step(registered("hostB", 4));
    let expected = vec![
        append(ev_start(1, "hostB", 1, T0 + 20)),
        send("hostB", register_ack()),
        send("hostB", new_job(&h, 1)),
    ];
    assert_eq!(effects, expected);
    // A late resend of the old refusal from hostA changes nothing.
    h.check(refused("hostA", 1, "no user alice"), vec![send("hostA", reply_ack(1))]);

    // hostB is full (MXJ 1); job 2 refused by hostA waits for hostA to come back.
    h.step(submit(2, 2, "alice", request()));
    h.step(refused("hostA", 2, "disk full"));
    h.check(Input::Tick, vec![]);
    h.at(30);
    h.step(Input::HostDisconnected { host: host("hostA") });
    let effects = h.step(registered("hostA", 2));
    let expected = vec![
        append(ev_start(2, "hostA", 1, T0 + 30)),
        send("hostA", register_ack()),
        send("hostA", new_job(&h, 2)),
    ];
    assert_eq!(effects, expected);
}

// Regression (found by lava-sim): a refused job's host registered again
// (lifting the avoidance) while full; a resent copy of the old refusal then
// arrived for the pending job and was only ACKed; when a slot freed, the job
// went back to that host on the same connection, and a further copy of the
// refusal, still on its way, was taken for a refusal of the new dispatch while
// the host ran the job. Goal: a refusal copy for a pending job keeps it off
// the host until the host registers again.
#[test]
fn late_refusal_copy_let_the_job_go_back_to_the_refusing_host() {
    let mut h = Harness::new();
    h.step(registered("hostA", 1));
    h.step(submit(1, 1, "alice", request())); // job 1 on hostA
    h.step(refused("hostA", 1, "no user alice")); // job 1 PEND, kept off hostA
    h.step(submit(2, 2, "alice", request())); // job 2 on hostA, which is now full
    h.step(Input::HostDisconnected { host: host("hostA") });
    h.step(registered("hostA", 1)); // the avoidance is lifted; no free slot
    h.check(refused("hostA", 1, "no user alice"), vec![send("hostA", reply_ack(1))]);
    let effects = h.step(finished("hostA", 2, 102, 0));
    assert!(!effects.iter().any(|e| matches!(e, crate::Effect::Append(Event::JobStart(_)))), "{effects:?}");
    h.step(Input::HostDisconnected { host: host("hostA") });
    h.at(10);
    let effects = h.step(registered("hostA", 1));
    assert_eq!(effects[0], append(ev_start(1, "hostA", 1, T0 + 10)));
}

// Goal: a finish frees a slot and the next job dispatches in the same step, no Tick needed.
#[test]
fn a_freed_slot_dispatches_in_the_same_step() {
    let mut h = Harness::new();
    h.step(registered("hostB", 16));
    let one = run_job(&mut h, 1, "hostB");
    h.check(
        submit(2, 2, "alice", request()),
        vec![append(ev_new(2, 2, "alice", "normal", request(), T0)), submitted(2, 2, "normal", true)],
    );
    h.at(50);
    let effects = h.step(finished("hostB", one, 101, 0));
    let expected = vec![
        append(ev_finished(one, 101, 0, T0 + 50)),
        append(ev_start(2, "hostB", 1, T0 + 50)),
        send("hostB", finish_ack(one)),
        send("hostB", new_job(&h, 2)),
    ];
    assert_eq!(effects, expected);
}

// Goal: dispatch order is queue priority first, then job id; `-m` and the
// queue's HOSTS are honoured; several jobs dispatch in one step.
#[test]
fn dispatch_follows_priority_then_id_and_placement() {
    let mut h = Harness::new();
    h.step(registered("hostA", 1));
    let one = run_job(&mut h, 1, "hostA");
    h.step(submit(2, 2, "alice", request()));
    let mut high = request();
    high.queue = "high".into();
    h.step(submit(3, 3, "alice", high));
    let mut wide = request();
    wide.n_slots = 3;
    h.step(submit(4, 4, "alice", wide));
    let mut on_c = request();
    on_c.hosts = vec!["hostC".into()];
    h.step(submit(5, 5, "alice", on_c));
    let effects = h.step(finished("hostA", one, 101, 0));
    let expected = vec![
        append(ev_finished(one, 101, 0, T0)),
        append(ev_start(3, "hostA", 1, T0)),
        send("hostA", finish_ack(one)),
        send("hostA", new_job(&h, 3)),
    ];
    assert_eq!(effects, expected);
    // hostC (MXJ 4) takes the wide job and the one that asked for it; the
    // high-priority queue may not use it.
    let effects = h.step(registered("hostC", 1));
    let expected = vec![
        append(ev_start(2, "hostC", 1, T0)),
        append(ev_start(4, "hostC", 3, T0)),
        send("hostC", register_ack()),
        send("hostC", new_job(&h, 2)),
        send("hostC", new_job(&h, 4)),
    ];
    assert_eq!(effects, expected);
    assert_eq!(h.infos(&[5])[0].status, JobStatus::Pend.bits());
    assert_eq!(h.infos(&[4])[0].exec_hosts, vec!["hostC".to_owned(); 3]);
}

// Goal: queues of equal priority share one order, by job id, and a backlog
// is served from its front, one freed slot at a time; a job whose queue left
// the configuration is never dispatched. Method: a third queue with the
// default queue's priority, jobs alternating between the two on a one-slot
// host; then a restart without the third queue.
#[test]
fn equal_priority_queues_dispatch_by_job_id() {
    let mut config = config();
    let also = crate::QueueConfig::new(queue("also"), 30);
    config.queues.push(also);
    let mut h = Harness::with_config(config);
    h.step(registered("hostB", 1));
    let one = run_job(&mut h, 1, "hostB");
    for (n, name) in [(2, "also"), (3, "normal"), (4, "also"), (5, "also"), (6, "normal")] {
        let mut queued = request();
        queued.queue = name.into();
        h.step(submit(n, n, "alice", queued));
    }
    let mut running = one;
    for next in [2, 3, 4] {
        let effects = h.step(finished("hostB", running, 100 + running as i32, 0));
        assert!(effects.contains(&append(ev_start(next, "hostB", 1, T0))), "job {next} next: {effects:?}");
        h.step(started("hostB", next, 100 + next as i32));
        running = next;
    }
    // Without the queue `also`, job 5 waits in it; job 6 goes first.
    let without = super::harness::config();
    let mut restarted = Harness::with_config(without.clone());
    restarted.mbd = replay(&without, None, &h.log);
    restarted.log = h.log.clone();
    restarted.step(registered("hostB", 1));
    let effects = restarted.step(finished("hostB", running, 100 + running as i32, 0));
    assert!(effects.contains(&append(ev_start(6, "hostB", 1, T0))), "{effects:?}");
    assert_eq!(restarted.infos(&[5])[0].status, JobStatus::Pend.bits());
}

// Goal: NEW_JOB is resent on Tick only once the interval has passed and only
// to a connected host; registration resends at once; an accepted job is not resent.
#[test]
fn new_job_is_resent_on_tick_and_on_registration() {
    let mut h = Harness::new();
    h.step(registered("hostA", 2));
    h.step(submit(1, 1, "alice", request()));
    h.at(RESEND_MS - 1).check(Input::Tick, vec![]);
    let resend = send("hostA", new_job(&h, 1));
    h.at(RESEND_MS).check(Input::Tick, vec![resend.clone()]);
    h.at(RESEND_MS + 1).check(Input::Tick, vec![]);
    h.step(Input::HostDisconnected { host: host("hostA") });
    h.at(5 * RESEND_MS).check(Input::Tick, vec![]);
    h.check(registered("hostA", 2), vec![send("hostA", register_ack()), resend]);
    h.step(started("hostA", 1, 7));
    h.at(50 * RESEND_MS).check(Input::Tick, vec![]);
}

// Goal: after a restart (replay of the log alone) a registering host gets
// NEW_JOB for its unaccepted jobs and JOB_SIGNAL for unanswered intents.
#[test]
fn restart_rebuilds_the_resends_from_the_log() {
    let mut h = Harness::new();
    h.step(registered("hostA", 4));
    h.step(submit(1, 1, "alice", request()));
    let two = run_job(&mut h, 2, "hostA");
    h.step(signal(9, 9, "alice", &[two], wire::SignalAction::Stop));
    h.restart();
    h.check(Input::Tick, vec![]);
    let effects = h.step(registered("hostA", 4));
    let expected = vec![
        send("hostA", register_ack()),
        send("hostA", new_job(&h, 1)),
        send("hostA", job_signal(two, 1, wire::SignalAction::Stop)),
    ];
    assert_eq!(effects, expected);
}

// Goal: a repeated submission request id gets the first answer and logs nothing.
#[test]
fn a_repeated_submit_request_gets_the_first_answer() {
    let mut h = Harness::new();
    h.step(submit(1, 77, "alice", request()));
    h.check(submit(2, 77, "alice", request()), vec![submitted(2, 1, "normal", true)]);
    h.check(
        submit(3, 77, "bob", request()),
        vec![reply(3, ClientReply::error(wire::ERR_REJECTED, "Request id already used by another user"))],
    );
    h.restart();
    h.check(submit(4, 77, "alice", request()), vec![submitted(4, 1, "normal", true)]);
}

// Goal: an EXIT job sbatchd killed at its run or memory limit shows LSF's
// termination reason in bjobs; a job that exited on its own shows none.
#[test]
fn limit_kills_show_lsfs_termination_reason() {
    let mut h = Harness::new();
    h.step(registered("hostA", 4));
    let reasons = [wire::FINISH_RUN_LIMIT, wire::FINISH_MEM_LIMIT, wire::FINISH_NORMAL];
    let mut ids = Vec::new();
    for (request_id, finish_reason) in (1..).zip(reasons) {
        let id = run_job(&mut h, request_id, "hostA");
        let msg = wire::JobFinish { finish_reason, ..finish_msg(id, 100 + id as i32, 9) };
        h.step(Input::JobFinish { host: host("hostA"), msg });
        ids.push(id);
    }
    let shown: Vec<(u32, String)> =
        h.infos(&ids).into_iter().map(|info| (info.status, info.reason)).collect();
    let exit = JobStatus::Exit.bits();
    assert_eq!(
        shown,
        vec![
            (exit, crate::TERM_RUNLIMIT.to_owned()),
            (exit, crate::TERM_MEMLIMIT.to_owned()),
            (exit, String::new())
        ]
    );
}

/// `msg` as sent for dispatch `seq` instead of the first.
fn of_dispatch(seq: u32, mut input: Input) -> Input {
    match &mut input {
        Input::NewJobReply { reply, .. } => reply.dispatch_seq = seq,
        Input::JobExecute { msg, .. } => msg.dispatch_seq = seq,
        Input::JobFinish { msg, .. } => msg.dispatch_seq = seq,
        other => panic!("not a pipeline message: {other:?}"),
    }
    input
}

/// An ACK `ack` naming dispatch `seq`.
fn ack_of(seq: u32, mut ack: ToSbd) -> ToSbd {
    match &mut ack {
        ToSbd::NewJobReplyAck(a) | ToSbd::JobExecuteAck(a) | ToSbd::JobFinishAck(a) => a.dispatch_seq = seq,
        other => panic!("not an ACK: {other:?}"),
    }
    ack
}

// Goal: the dispatch number counts JOB_STARTs (replay included) and NEW_JOB
// carries it; once a job is dispatched again to the same host, every message
// of the earlier dispatch (Started, EXECUTE, FINISH, a refusal) gets only an
// ACK naming that dispatch and no event, a message naming a dispatch never
// made gets nothing, and the current dispatch's messages are logged as usual.
#[test]
fn messages_of_an_earlier_dispatch_are_acked_and_never_logged() {
    let mut h = Harness::new();
    h.step(registered("hostA", 1));
    h.step(submit(1, 1, "alice", request()));
    assert_eq!(h.mbd.job(jref(1)).expect("job").dispatch_seq(), 1);
    h.step(refused("hostA", 1, "no user alice"));
    h.step(Input::HostDisconnected { host: host("hostA") });
    h.at(10);
    let effects = h.step(registered("hostA", 1));
    assert_eq!(effects[0], append(ev_start(1, "hostA", 1, T0 + 10)));
    let ToSbd::NewJob(specs) = new_job(&h, 1) else { panic!("NEW_JOB") };
    assert_eq!(specs.dispatch_seq, 2);
    assert!(effects.contains(&send("hostA", new_job(&h, 1))));

    for old in [
        started("hostA", 1, 101),
        executed("hostA", 1, 101),
        finished("hostA", 1, 101, 0),
        refused("hostA", 1, "no user alice"),
    ] {
        let ack = match &old {
            Input::NewJobReply { .. } => reply_ack(1),
            Input::JobExecute { .. } => execute_ack(1),
            _ => finish_ack(1),
        };
        h.check(old, vec![send("hostA", ack)]);
    }
    h.check(of_dispatch(3, started("hostA", 1, 101)), vec![]);
    h.check(of_dispatch(3, finished("hostA", 1, 101, 0)), vec![]);
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Run.bits());

    let effects = h.step(of_dispatch(2, started("hostA", 1, 202)));
    assert!(matches!(effects[0], crate::Effect::Append(Event::JobStartAccept(_))), "{effects:?}");
    assert!(effects.contains(&send("hostA", ack_of(2, reply_ack(1)))));
    let effects = h.step(of_dispatch(2, finished("hostA", 1, 202, 0)));
    assert!(matches!(effects[0], crate::Effect::Append(Event::JobStatus(_))), "{effects:?}");
    assert!(effects.contains(&send("hostA", ack_of(2, finish_ack(1)))));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Done.bits());
    // After the finish, both dispatches' copies get their own ACK only.
    h.check(of_dispatch(2, finished("hostA", 1, 202, 0)), vec![send("hostA", ack_of(2, finish_ack(1)))]);
    h.check(finished("hostA", 1, 101, 0), vec![send("hostA", finish_ack(1))]);
}
