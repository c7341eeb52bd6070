//! The control commands (`control`): `badmin hclose|hopen|qclose|qopen|qact|qinact`,
//! `bmod`, `bswitch`, `btop`/`bbot`, and `bhist`'s history builder. Every step
//! goes through the harness, which also proves that replay of the log (and of
//! the snapshot before the step) rebuilds the live state.

use lava_batch_ll::{JobRef, JobStatus};
use lava_batch_wire as wire;

use super::harness::*;
use crate::event::{
    HostCtrlRecord, JobChanges, JobModifyRecord, JobMoveRecord, JobSwitchRecord, QueueCtrlAction,
    QueueCtrlRecord,
};
use crate::{ClientId, ClientReply, Effect, Event, HistoryBuilder, Input};

fn admin(client: u64, who: &str, action: wire::AdminAction, names: &[&str]) -> Input {
    let request =
        wire::AdminControlRequest { action, names: names.iter().map(|n| (*n).to_owned()).collect() };
    Input::AdminControl { client: ClientId(client), caller: caller(who), request }
}

fn control(client: u64, who: &str, jobs: &[u32], action: wire::JobControlAction) -> Input {
    let request = wire::JobControlRequest { jobs: jobs.iter().map(|id| wref(*id)).collect(), action };
    Input::JobControl { client: ClientId(client), request_id: rid(client), caller: caller(who), request }
}

fn modify(change: impl FnOnce(&mut wire::JobModify)) -> wire::JobControlAction {
    let mut modify = wire::JobModify::default();
    change(&mut modify);
    wire::JobControlAction::Modify(modify)
}

fn admin_answer(client: u64, lines: &[(&str, bool, &str)]) -> Effect {
    let results = lines
        .iter()
        .map(|(name, done, message)| wire::AdminResult {
            name: (*name).to_owned(),
            done: *done,
            message: (*message).to_owned(),
        })
        .collect();
    reply(client, ClientReply::AdminControl(wire::AdminControlReply { results }))
}

fn job_answer(client: u64, lines: &[(u32, bool, &str)]) -> Effect {
    let results = lines
        .iter()
        .map(|(id, done, message)| wire::JobControlResult {
            job: wref(*id),
            done: *done,
            message: (*message).to_owned(),
        })
        .collect();
    reply(client, ClientReply::JobControl(wire::JobControlReply { results }))
}

fn host_ctrl(name: &str, open: bool, t: u64) -> Event {
    Event::HostCtrl(HostCtrlRecord { host: host(name), open, requester: user("admin"), time_ms: t })
}

fn queue_ctrl(name: &str, action: QueueCtrlAction, t: u64) -> Event {
    Event::QueueCtrl(QueueCtrlRecord { queue: queue(name), action, requester: user("admin"), time_ms: t })
}

/// The ids of the events a step appended, by name.
fn appended(effects: &[Effect]) -> Vec<&'static str> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Append(event) => Some(event.name()),
            _ => None,
        })
        .collect()
}

// Goal: hclose is for administrators only; a closed host gets no job, shows
// closed_Adm, stays closed over a restart, and hopen dispatches in its step.
#[test]
fn closed_host_takes_no_job_until_opened_even_after_a_restart() {
    let mut h = Harness::new();
    h.check(
        admin(1, "alice", wire::AdminAction::HostClose, &["hostB"]),
        vec![admin_answer(1, &[("hostB", false, "Close <hostB> ...... User permission denied")])],
    );
    h.check(
        admin(2, "admin", wire::AdminAction::HostClose, &["hostB", "nohost"]),
        vec![
            append(host_ctrl("hostB", false, T0)),
            admin_answer(
                2,
                &[
                    ("hostB", true, "Close <hostB> ...... done"),
                    ("nohost", false, "Close <nohost> ...... Bad host name, host group name or cluster name"),
                ],
            ),
        ],
    );
    // Closing it again changes nothing and logs nothing.
    h.check(
        admin(3, "admin", wire::AdminAction::HostClose, &["hostB"]),
        vec![admin_answer(3, &[("hostB", true, "Close <hostB> ...... done")])],
    );
    h.restart();
    h.step(registered("hostB", 1));
    let mut on_b = request();
    on_b.hosts = vec!["hostB".into()];
    h.step(submit(4, 1, "alice", on_b));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Pend.bits());
    let bhosts = h.mbd.host_query(&wire::HostQuery { hosts: vec!["hostB".into()] });
    assert_eq!(bhosts.hosts[0].status, wire::HOST_CLOSED_ADM);
    assert!(h.mbd.host_closed(&host("hostB")));
    h.at(5);
    let effects = h.step(admin(5, "admin", wire::AdminAction::HostOpen, &["hostB"]));
    assert_eq!(appended(&effects), ["HOST_CTRL", "JOB_START"]);
    assert_eq!(effects[0], append(host_ctrl("hostB", true, T0 + 5)));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Run.bits());
}

// Goal: a closed queue refuses submissions with LSF's message and nothing is
// logged; an inactive one accepts but dispatches nothing until qact; without
// names the default queue is meant; both survive a restart.
#[test]
fn closed_and_inactive_queues() {
    let mut h = Harness::new();
    h.step(registered("hostA", 2));
    h.check(
        admin(1, "bob", wire::AdminAction::QueueClose, &["normal"]),
        vec![admin_answer(1, &[("normal", false, "Queue <normal>: User permission denied")])],
    );
    h.check(
        admin(2, "admin", wire::AdminAction::QueueClose, &[]),
        vec![
            append(queue_ctrl("normal", QueueCtrlAction::Close, T0)),
            admin_answer(2, &[("normal", true, "Queue <normal> is closed")]),
        ],
    );
    h.restart();
    h.step(registered("hostA", 2));
    h.check(
        submit(3, 1, "alice", request()),
        vec![reply(3, ClientReply::error(wire::ERR_REJECTED, "normal: Queue has been closed"))],
    );
    h.check(
        admin(4, "admin", wire::AdminAction::QueueOpen, &["normal"]),
        vec![
            append(queue_ctrl("normal", QueueCtrlAction::Open, T0)),
            admin_answer(4, &[("normal", true, "Queue <normal> is opened")]),
        ],
    );
    h.check(
        admin(5, "root", wire::AdminAction::QueueInactivate, &["normal", "bogus"]),
        vec![
            Effect::Append(Event::QueueCtrl(QueueCtrlRecord {
                queue: queue("normal"),
                action: QueueCtrlAction::Inactivate,
                requester: user("root"),
                time_ms: T0,
            })),
            admin_answer(
                5,
                &[
                    ("normal", true, "Queue <normal> is inactivated"),
                    ("bogus", false, "Queue <bogus>: No such queue"),
                ],
            ),
        ],
    );
    h.check(
        submit(6, 2, "alice", request()),
        vec![append(ev_new(1, 2, "alice", "normal", request(), T0)), submitted(6, 1, "normal", true)],
    );
    h.restart();
    h.step(registered("hostA", 2));
    assert!(h.mbd.queue_inactive(&queue("normal")) && !h.mbd.queue_closed(&queue("normal")));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Pend.bits());
    let effects = h.step(admin(7, "admin", wire::AdminAction::QueueActivate, &["normal"]));
    assert_eq!(appended(&effects), ["QUEUE_CTRL", "JOB_START"]);
}

// Goal: bmod changes a pending job's options (JOB_MODIFY2) for its owner or an
// administrator; a job of another user, a started or finished job, an unknown
// or closed queue and a queue whose hosts the job cannot use are refused with
// LSF's words and log nothing.
#[test]
fn bmod_changes_pending_jobs_only() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    let change = modify(|m| {
        m.queue = Some("high".into());
        m.run_limit_s = Some(600);
        m.job_name = Some("renamed".into());
        m.res_req = Some("select[mem>100]".into());
    });
    h.check(
        control(2, "bob", &[1], change.clone()),
        vec![job_answer(2, &[(1, false, "Job <1>: User permission denied")])],
    );
    let record = JobModifyRecord {
        job: jref(1),
        changes: JobChanges {
            queue: Some(queue("high")),
            job_name: Some("renamed".into()),
            run_limit_s: Some(600),
            res_req: Some("select[mem>100]".into()),
            ..JobChanges::default()
        },
        requester: user("alice"),
        time_ms: T0,
    };
    h.check(
        control(3, "alice", &[1, 9], change),
        vec![
            append(Event::JobModify(Box::new(record))),
            job_answer(
                3,
                &[
                    (1, true, "Parameters of job <1> are being changed"),
                    (9, false, "Job <9>: No matching job found"),
                ],
            ),
        ],
    );
    let info = &h.infos(&[1])[0];
    assert_eq!((info.queue.as_str(), info.job_name.as_str()), ("high", "renamed"));
    let job = h.mbd.job(jref(1)).expect("job");
    assert_eq!(job.spec.request().run_limit_s, 600);
    // Removal (-Wn) and an administrator's change.
    let effects = h.step(control(4, "admin", &[1], modify(|m| m.run_limit_s = Some(0))));
    assert_eq!(appended(&effects), ["JOB_MODIFY2"]);
    assert_eq!(h.mbd.job(jref(1)).expect("job").spec.request().run_limit_s, 0);
    // Refusals.
    h.check(
        control(5, "alice", &[1], modify(|m| m.queue = Some("nosuch".into()))),
        vec![job_answer(5, &[(1, false, "Job <1>: nosuch: No such queue")])],
    );
    let mut on_b = request();
    on_b.hosts = vec!["hostB".into()];
    h.step(submit(6, 2, "alice", on_b));
    h.check(
        control(7, "alice", &[2], modify(|m| m.queue = Some("high".into()))),
        vec![job_answer(7, &[(2, false, "Job <2>: high: Host or host group is not used by the queue")])],
    );
    // The changed job must pass the queue's submission checks: a -R that does
    // not parse is refused as bsub's is.
    h.check(
        control(71, "alice", &[1], modify(|m| m.res_req = Some("select[mem>".into()))),
        vec![job_answer(71, &[(1, false, "Job <1>: Bad resource requirement syntax")])],
    );
    h.step(admin(8, "admin", wire::AdminAction::QueueClose, &["normal"]));
    h.check(
        control(9, "alice", &[1], modify(|m| m.queue = Some("normal".into()))),
        vec![job_answer(9, &[(1, false, "Job <1>: normal: Queue has been closed")])],
    );
    // The job's -R select[mem>100] needs lim's memory figure of the host.
    let mut load = [0.0; 11];
    load[lava_batch_ll::resreq::LOAD_MEM] = 4000.0;
    let facts = crate::LimFacts {
        load: Some(load),
        ncpus: 1,
        maxmem_mb: 4000,
        maxswp_mb: 0,
        locked: false,
        busy: false,
    };
    h.step(Input::HostLoad { host: host("hostA"), facts: Box::new(facts) });
    h.step(registered("hostA", 1));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Run.bits());
    h.check(
        control(10, "alice", &[1], modify(|m| m.n_slots = Some(2))),
        vec![job_answer(10, &[(1, false, "Job <1>: Job has already started")])],
    );
    h.step(started("hostA", 1, 42));
    h.step(finished("hostA", 1, 42, 0));
    h.check(
        control(11, "alice", &[1], modify(|m| m.n_slots = Some(2))),
        vec![job_answer(11, &[(1, false, "Job <1>: Job has already finished")])],
    );
}

// Goal: bswitch moves a pending job (JOB_SWITCH) and dispatches it if the new
// queue lets it run; a started job whose start is not yet accepted is refused,
// an accepted one is switched without touching its run.
#[test]
fn bswitch_moves_pending_and_accepted_jobs() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    h.step(admin(2, "admin", wire::AdminAction::QueueInactivate, &["normal"]));
    h.step(registered("hostA", 1));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Pend.bits());
    let to_high = wire::JobControlAction::Switch { queue: "high".into() };
    h.at(3);
    let effects = h.step(control(3, "alice", &[1], to_high.clone()));
    assert_eq!(appended(&effects), ["JOB_SWITCH", "JOB_START"]);
    assert_eq!(
        effects[0],
        append(Event::JobSwitch(JobSwitchRecord {
            job: jref(1),
            queue: queue("high"),
            requester: user("alice"),
            time_ms: T0 + 3
        }))
    );
    let to_normal = wire::JobControlAction::Switch { queue: "normal".into() };
    h.check(
        control(4, "alice", &[1], to_normal.clone()),
        vec![job_answer(4, &[(1, false, "Job <1>: Job is being dispatched; switch it once it has started")])],
    );
    h.step(started("hostA", 1, 42));
    let effects = h.step(control(5, "admin", &[1], to_normal));
    assert_eq!(appended(&effects), ["JOB_SWITCH"]);
    let info = &h.infos(&[1])[0];
    assert_eq!((info.queue.as_str(), info.status), ("normal", JobStatus::Run.bits()));
    h.check(
        control(6, "alice", &[1], wire::JobControlAction::Switch { queue: "nosuch".into() }),
        vec![job_answer(6, &[(1, false, "Job <1>: nosuch: No such queue")])],
    );
}

/// The ids of a queue's pending jobs in dispatch order.
fn pending_order(h: &Harness) -> Vec<u32> {
    let mut jobs: Vec<(i64, JobRef)> = h
        .mbd
        .store
        .live_jobs()
        .filter(|(_, j)| j.status.is_pending())
        .map(|(id, j)| (j.dispatch_key(), id))
        .collect();
    jobs.sort_unstable();
    jobs.into_iter().map(|(_, id)| id.id()).collect()
}

// Goal: btop and bbot reorder pending jobs (JOB_MOVE carries the new key), a
// user relative to his own jobs only, an administrator relative to all; the
// dispatch follows that order.
#[test]
fn btop_and_bbot_set_the_dispatch_order() {
    let mut h = Harness::new();
    for (n, who) in [(1, "alice"), (2, "bob"), (3, "alice"), (4, "alice")] {
        h.step(submit(n, n, who, request()));
    }
    assert_eq!(pending_order(&h), [1, 2, 3, 4]);
    let top = |position| wire::JobControlAction::Move { to_top: true, position, owner_list: false };
    let bottom = |position| wire::JobControlAction::Move { to_top: false, position, owner_list: false };
    // alice's btop moves job 4 before her first job (1), not before bob's.
    let effects = h.step(control(10, "alice", &[4], top(1)));
    assert_eq!(appended(&effects), ["JOB_MOVE"]);
    assert_eq!(
        effects.last(),
        Some(&job_answer(10, &[(4, true, "Job <4> has been moved to position 1 from top.")]))
    );
    assert_eq!(pending_order(&h), [4, 1, 2, 3]);
    // The administrator's bbot 2: one job below it.
    h.check(
        control(11, "admin", &[4], bottom(2)),
        vec![
            append(Event::JobMove(JobMoveRecord {
                job: jref(4),
                order_key: crate::control::arrival_key(2) + crate::control::ARRIVAL_KEY_SPACING / 2,
                to_top: false,
                position: 2,
                requester: user("admin"),
                time_ms: T0,
            })),
            job_answer(11, &[(4, true, "Job <4> has been moved to position 2 from bottom.")]),
        ],
    );
    assert_eq!(pending_order(&h), [1, 2, 4, 3]);
    h.check(
        control(12, "bob", &[4], top(1)),
        vec![job_answer(12, &[(4, false, "Job <4>: User permission denied")])],
    );
    // Administrator: job 3 to the very top; a far position is the end.
    h.step(control(13, "admin", &[3], top(1)));
    h.step(control(14, "admin", &[1], top(99)));
    assert_eq!(pending_order(&h), [3, 2, 4, 1]);
    // With -u the administrator counts only the owner's (alice's) jobs: position 2
    // is before her second job (4), behind bob's 2 (without -u: before 2).
    let owner_top = wire::JobControlAction::Move { to_top: true, position: 2, owner_list: true };
    h.step(control(16, "admin", &[1], owner_top));
    assert_eq!(pending_order(&h), [3, 2, 1, 4]);
    h.restart();
    assert_eq!(pending_order(&h), [3, 2, 1, 4]);
    // Dispatch follows the order: one slot, job 3 goes first.
    let effects = h.step(registered("hostB", 1));
    assert!(effects.contains(&append(ev_start(3, "hostB", 1, T0))), "{effects:?}");
    h.check(
        control(15, "admin", &[3], top(1)),
        vec![job_answer(15, &[(3, false, "Job <3>: Job has already started")])],
    );
}

// Goal: bhist's builder tells a finished job's whole life in LSF's lines with
// the status of each change, selects by user and state, and pages.
#[test]
fn history_tells_a_finished_job() {
    let mut h = Harness::new();
    h.step(registered("hostA", 1));
    h.step(submit(1, 1, "alice", request()));
    h.at(1000).step(started("hostA", 1, 42));
    h.at(2000).step(executed("hostA", 1, 42));
    h.at(3000).step(finished("hostA", 1, 42, 1 << 8));
    h.step(submit(2, 2, "bob", request()));
    let query = |jobs: &[u32], user: &str, filter| wire::HistoryQuery {
        jobs: jobs.iter().map(|id| wref(*id)).collect(),
        user: user.to_owned(),
        state_filter: filter,
        after_job: 0,
    };
    let build = |q: wire::HistoryQuery, who: &str| {
        let mut builder = HistoryBuilder::new(q, &caller(who));
        for event in &h.log {
            builder.add(event);
        }
        builder.finish()
    };
    let reply = build(query(&[1, 7], "", 0), "bob");
    assert_eq!(reply.not_found, vec![wref(7)]);
    let job = &reply.jobs[0];
    let lines: Vec<(u64, u32, &str)> =
        job.entries.iter().map(|e| (e.time_ms - T0, e.status, e.text.as_str())).collect();
    assert_eq!(
        lines,
        vec![
            (0, JobStatus::Pend.bits(), "Submitted from host <client>, to Queue <normal>, CWD <work>;"),
            (0, JobStatus::Run.bits(), "Dispatched to <hostA>;"),
            (1000, 0, "Starting (Pid 42);"),
            (
                2000,
                0,
                "Running with execution home </home/alice>, Execution CWD </home/alice/work>, Execution Pid <42>;"
            ),
            (3000, JobStatus::Exit.bits(), "Exited with exit code 1. The CPU time used is 0.0 seconds;"),
        ]
    );
    // Defaults: the caller's unfinished jobs; -a all states; -u all everyone.
    assert!(build(query(&[], "", wire::state_filter::UNFINISHED), "alice").jobs.is_empty());
    assert_eq!(build(query(&[], "", wire::state_filter::ALL), "alice").jobs.len(), 1);
    let everyone = build(query(&[], "all", wire::state_filter::ALL), "alice");
    assert_eq!(everyone.jobs.iter().map(|j| j.job.job_id).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(everyone.next_after, 0);
    let later = build(wire::HistoryQuery { after_job: 1, ..query(&[], "all", wire::state_filter::ALL) }, "x");
    assert_eq!(later.jobs.iter().map(|j| j.job.job_id).collect::<Vec<_>>(), [2]);
}

/// A `brequeue` of `jobs` by `who` (request id `client`), with what the shell found on disk.
fn requeue_input(
    client: u64,
    who: &str,
    jobs: &[u32],
    action: wire::JobControlAction,
    submissions: Vec<crate::LoggedSubmission>,
) -> Input {
    let request = wire::JobControlRequest { jobs: jobs.iter().map(|id| wref(*id)).collect(), action };
    Input::Requeue {
        client: ClientId(client),
        request_id: rid(client),
        caller: caller(who),
        request,
        submissions,
    }
}

/// `brequeue -d` and/or `-e` of `jobs` by `who`; the shell found job 1's submission.
fn requeue(client: u64, who: &str, jobs: &[u32], done: bool, exit: bool) -> Input {
    requeue_input(client, who, jobs, requeue_action(done, exit), vec![logged(1, 1)])
}

fn requeue_action(done: bool, exit: bool) -> wire::JobControlAction {
    wire::JobControlAction::Requeue { done, exit, running: false, pending: false, hold: false }
}

/// `brequeue -r` (with `-H` when `hold`) of `jobs` by `who`.
fn requeue_running(client: u64, who: &str, jobs: &[u32], hold: bool) -> Input {
    let action =
        wire::JobControlAction::Requeue { done: false, exit: false, running: true, pending: false, hold };
    requeue_input(client, who, jobs, action, Vec::new())
}

/// JOB_SIGNAL of a `brequeue` kill asked by request `request_id`.
fn ev_requeue_kill(id: u32, seq: u32, who: &str, (request_id, hold): (u64, bool), t: u64) -> Event {
    let Event::JobSignal(mut record) = ev_signal(id, seq, wire::SignalAction::Terminate, who, request_id, t)
    else {
        unreachable!("ev_signal makes a JOB_SIGNAL")
    };
    record.requeue_hold = Some(hold);
    Event::JobSignal(record)
}

/// A FINISH of dispatch `dispatch_seq`.
fn finished_run(id: u32, pid: i32, wait_status: i32, dispatch_seq: u32) -> Input {
    Input::JobFinish {
        host: host("hostA"),
        msg: wire::JobFinish { dispatch_seq, ..finish_msg(id, pid, wait_status) },
    }
}

/// A started job 1 of alice's on hostA (pid 42, dispatch 1).
fn running_job() -> Harness {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    h.step(registered("hostA", 1));
    h.step(started("hostA", 1, 42));
    h
}

/// What the shell finds in the log for job `id` submitted with request `request_id`.
fn logged(id: u32, request_id: u64) -> crate::LoggedSubmission {
    crate::LoggedSubmission { job: jref(id), request_id: rid(request_id), env: request().env }
}

/// The NEW_JOB messages a step sent, as (job, dispatch number, environment size).
fn new_jobs(effects: &[Effect]) -> Vec<(u32, u32, usize)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::SendSbd { msg: crate::ToSbd::NewJob(specs), .. } => {
                Some((specs.job.job_id, specs.dispatch_seq, specs.env.len()))
            }
            _ => None,
        })
        .collect()
}

// Goal: brequeue -e puts an EXIT job back to PEND with its logged environment
// (JOB_REQUEUE), dispatches it again under the same id with dispatch number 2,
// and the second run can end DONE; replay and snapshots agree at every step. A
// retry of the same request (its answer lost), even after the second run ended,
// gets the same answer and requeues nothing, across a restart too.
#[test]
fn brequeue_runs_an_exit_job_again_under_its_id() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    h.step(registered("hostA", 1));
    h.step(started("hostA", 1, 42));
    h.step(finished("hostA", 1, 42, 3 << 8));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Exit.bits());
    assert_eq!(h.mbd.job(jref(1)).expect("kept").env().len(), 0);
    let effects = h.step(requeue(10, "alice", &[1], false, true));
    assert!(effects.contains(&job_answer(10, &[(1, true, "Job <1> is being requeued")])));
    assert_eq!(appended(&effects), vec!["JOB_REQUEUE", "JOB_START"]);
    assert_eq!(new_jobs(&effects), vec![(1, 2, 1)]);
    let info = &h.infos(&[1])[0];
    assert_eq!((info.status, info.exit_code, info.end_time), (JobStatus::Run.bits(), 0, 0));
    h.restart();
    h.step(started_run("hostA", 1, 43, 2));
    let msg = wire::JobFinish { dispatch_seq: 2, ..finish_msg(1, 43, 0) };
    h.step(Input::JobFinish { host: host("hostA"), msg });
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Done.bits());
    let retry = h.step(requeue(10, "alice", &[1], true, true));
    assert!(retry.contains(&job_answer(10, &[(1, true, "Job <1> is being requeued")])));
    assert!(appended(&retry).is_empty(), "the retry logged {:?}", appended(&retry));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Done.bits());
    // A new request does requeue it.
    let again = h.step(requeue(11, "alice", &[1], true, false));
    assert_eq!(appended(&again).first(), Some(&"JOB_REQUEUE"));
}

// Goal: brequeue refuses what it may not requeue, each with its line and no
// event: a pending job, a running one (no -r), another user's job, an unknown
// job, a job of the status not selected, and a job whose submission the shell
// did not find in the log; an administrator may requeue anyone's job.
#[test]
fn brequeue_refusals() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    h.check(
        requeue(10, "alice", &[1], true, true),
        vec![job_answer(10, &[(1, false, "Job <1>: Job has not started yet")])],
    );
    h.step(registered("hostA", 1));
    h.check(
        requeue(11, "alice", &[1], true, true),
        vec![job_answer(
            11,
            &[(1, false, "Job <1>: Job has not finished; requeue a running job with -r or -a")],
        )],
    );
    h.step(started("hostA", 1, 42));
    h.step(finished("hostA", 1, 42, 0));
    h.check(
        requeue(12, "bob", &[1, 7], true, true),
        vec![job_answer(
            12,
            &[(1, false, "Job <1>: User permission denied"), (7, false, "Job <7>: No matching job found")],
        )],
    );
    h.check(
        requeue(13, "alice", &[1], false, true),
        vec![job_answer(13, &[(1, false, "Job <1>: Job is DONE; requeue it with -d or -a")])],
    );
    let request = wire::JobControlRequest { jobs: vec![wref(1)], action: requeue_action(true, false) };
    let other = Input::Requeue {
        client: ClientId(14),
        request_id: rid(14),
        caller: caller("alice"),
        request: request.clone(),
        submissions: vec![logged(1, 2)],
    };
    let lost = "Job <1>: The job's submission is no longer on disk; it cannot be requeued";
    h.check(other, vec![job_answer(14, &[(1, false, lost)])]);
    h.check(
        control(15, "alice", &[1], requeue_action(true, false)),
        vec![job_answer(15, &[(1, false, lost)])],
    );
    let effects = h.step(Input::Requeue {
        client: ClientId(16),
        request_id: rid(16),
        caller: caller("admin"),
        request,
        submissions: vec![logged(1, 1)],
    });
    assert!(effects.contains(&job_answer(16, &[(1, true, "Job <1> is being requeued")])));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Run.bits());
}

// Goal: brequeue -r kills a running job through the signal pipeline (one
// JOB_SIGNAL carrying the requeue intent, then BATCH_JOB_SIGNAL) and, when its
// FINISH arrives, puts it back to PEND under its id (JOB_REQUEUE) instead of
// EXIT, durably: an mbatchd crash between the kill and the FINISH still
// requeues. The job keeps its environment, runs again (a higher dispatch
// number), a late copy of the old FINISH gets only its ACK, and the second run
// ends DONE. Asked again while the kill is on its way, brequeue logs nothing.
#[test]
fn brequeue_r_requeues_a_running_job_across_a_crash() {
    let mut h = running_job();
    h.at(1000).check(
        requeue_running(10, "alice", &[1], false),
        vec![
            append(ev_requeue_kill(1, 1, "alice", (10, false), T0 + 1000)),
            send("hostA", job_signal(1, 1, wire::SignalAction::Terminate)),
            job_answer(10, &[(1, true, "Job <1> is being requeued")]),
        ],
    );
    h.check(
        requeue_running(11, "alice", &[1], false),
        vec![job_answer(11, &[(1, true, "Job <1> is being requeued")])],
    );
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Run.bits());
    // A snapshot lists the intent beside the jobs and restores it through XDR.
    let snapshot = xdr_round_trip(&h.mbd.snapshot());
    assert_eq!(snapshot.requeue_kills, vec![crate::RequeueKill { job: jref(1), hold: false }]);
    let restored = crate::Mbd::from_snapshot(config(), snapshot).expect("the snapshot loads");
    assert!(restored.same_durable_state(&h.mbd));
    // mbatchd crashes; replay alone must remember the intent.
    h.restart();
    let effects = h.at(2000).step(registered("hostA", 1));
    assert!(effects.contains(&send("hostA", job_signal(1, 1, wire::SignalAction::Terminate))), "{effects:?}");
    h.step(signal_reply("hostA", 1, 1, wire::SignalOutcome::Delivered));
    let effects = h.at(3000).step(finished("hostA", 1, 42, 2));
    assert_eq!(appended(&effects), vec!["JOB_REQUEUE", "JOB_START"]);
    assert!(effects.contains(&send("hostA", finish_ack(1))), "{effects:?}");
    assert_eq!(new_jobs(&effects), vec![(1, 3, 1)]);
    let info = &h.infos(&[1])[0];
    assert_eq!((info.status, info.exit_code, info.end_time), (JobStatus::Run.bits(), 0, 0));
    // A late copy of the killed run's FINISH: ACK only.
    h.check(finished("hostA", 1, 42, 2), vec![send("hostA", finish_ack(1))]);
    // A retry of the first request (its answer lost) kills no later run.
    h.check(
        requeue_running(10, "alice", &[1], false),
        vec![job_answer(10, &[(1, true, "Job <1> is being requeued")])],
    );
    h.step(started_run("hostA", 1, 43, 3));
    h.step(finished_run(1, 43, 0, 3));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Done.bits());
    // bhist: the requeue kill, the killed run, pending again, the second run.
    let texts: Vec<String> = history_of(&h, 1).into_iter().map(|(_, _, text)| text).collect();
    assert!(
        texts.contains(&"Signal <REQUEUE_PEND> requested by user or administrator <alice>;".to_owned()),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.starts_with("Exited by signal 2.") && t.ends_with("Job has been requeued;")),
        "{texts:?}"
    );
}

// Goal: -H requeues into PSUSP: a running job after its kill's FINISH, a
// finished job at once; neither is dispatched until bresume releases it. The
// pending job shows LSF's reason for a requeued job once released.
#[test]
fn brequeue_h_holds_the_requeued_job() {
    let mut h = running_job();
    h.step(requeue_running(10, "alice", &[1], true));
    let effects = h.step(finished("hostA", 1, 42, 2));
    assert_eq!(appended(&effects), vec!["JOB_REQUEUE"]);
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Psusp.bits());
    let effects = h.step(signal(12, 2, "alice", &[1], wire::SignalAction::Continue));
    assert_eq!(appended(&effects), vec!["JOB_SIGNAL", "JOB_STATUS", "JOB_START"]);
    h.step(started_run("hostA", 1, 43, 3));
    h.step(finished_run(1, 43, 1 << 8, 3));
    let held = wire::JobControlAction::Requeue {
        done: false,
        exit: true,
        running: false,
        pending: false,
        hold: true,
    };
    let request = wire::JobControlRequest { jobs: vec![wref(1)], action: held };
    let effects = h.step(Input::Requeue {
        client: ClientId(13),
        request_id: rid(13),
        caller: caller("alice"),
        request,
        submissions: vec![logged(1, 1)],
    });
    assert_eq!(appended(&effects), vec!["JOB_REQUEUE"]);
    let info = &h.infos(&[1])[0];
    assert_eq!(info.status, JobStatus::Psusp.bits());
    assert_eq!(h.mbd.job(jref(1)).expect("kept").env().len(), 1);
}

// Goal: brequeue -r refuses, with no event: another user's running job, a
// job being dispatched (its start not yet accepted), a pending job, and a job
// that already finished when the request came (not selected by -r).
#[test]
fn brequeue_r_refusals() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", request()));
    h.check(
        requeue_running(10, "alice", &[1], false),
        vec![job_answer(10, &[(1, false, "Job <1>: Job has not started yet")])],
    );
    h.step(registered("hostA", 1));
    h.check(
        requeue_running(11, "alice", &[1], false),
        vec![job_answer(
            11,
            &[(1, false, "Job <1>: Job is being dispatched; requeue it once it has started")],
        )],
    );
    h.step(started("hostA", 1, 42));
    h.check(
        requeue_running(12, "bob", &[1], false),
        vec![job_answer(12, &[(1, false, "Job <1>: User permission denied")])],
    );
    h.step(finished("hostA", 1, 42, 0));
    h.check(
        requeue_running(13, "alice", &[1], false),
        vec![job_answer(13, &[(1, false, "Job <1>: Job is DONE; requeue it with -d or -a")])],
    );
}

// Goal: a run that ends on its own after the requeue intent was logged, before
// the kill reached it (FINISH with status 0), is requeued all the same, and the
// late answer to the kill is ignored; a later plain bkill cancels a requeue.
#[test]
fn brequeue_r_of_a_run_that_ends_first_and_a_kill_that_cancels() {
    let mut h = running_job();
    h.step(requeue_running(10, "alice", &[1], false));
    let effects = h.step(finished("hostA", 1, 42, 0));
    assert_eq!(appended(&effects), vec!["JOB_REQUEUE", "JOB_START"]);
    h.check(signal_reply("hostA", 1, 1, wire::SignalOutcome::Delivered), vec![]);
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Run.bits());
    h.step(started_run("hostA", 1, 43, 3));
    h.step(requeue_running(11, "alice", &[1], false));
    h.step(signal(12, 5, "alice", &[1], wire::SignalAction::Terminate));
    let effects = h.step(finished_run(1, 43, 15, 3));
    assert_eq!(appended(&effects), vec!["JOB_STATUS"]);
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Exit.bits());
}

/// Job `id`'s bhist lines from the harness's log: (time after T0, status bits, text).
fn history_of(h: &Harness, id: u32) -> Vec<(u64, u32, String)> {
    let query =
        wire::HistoryQuery { jobs: vec![wref(id)], user: "all".to_owned(), state_filter: 0, after_job: 0 };
    let mut builder = HistoryBuilder::new(query, &caller("alice"));
    for event in &h.log {
        builder.add(event);
    }
    let reply = builder.finish();
    reply.jobs[0].entries.iter().map(|e| (e.time_ms - T0, e.status, e.text.clone())).collect()
}

/// `brequeue -p` (with `-H` when `hold`) of `jobs` by `who`.
fn requeue_pending(client: u64, who: &str, jobs: &[u32], hold: bool) -> Input {
    let action =
        wire::JobControlAction::Requeue { done: false, exit: false, running: false, pending: true, hold };
    requeue_input(client, who, jobs, action, Vec::new())
}

// Goal: a requeued job goes after every job of its queue and before the jobs
// submitted after the requeue (LSF dispatches it by its requeue time): a
// running job requeued with -r, a pending one with -p (-p -H holds it); -p
// leaves running jobs alone. Method: one slot, so NEW_JOB tells the order.
#[test]
fn a_requeued_job_goes_to_the_end_of_its_queue() {
    let mut h = running_job();
    for id in 2..=4_u64 {
        h.step(submit(id, id, "alice", request()));
    }
    h.check(
        requeue_pending(10, "alice", &[1], false),
        vec![job_answer(
            10,
            &[(1, false, "Job <1>: Job has not finished; requeue a running job with -r or -a")],
        )],
    );
    assert_eq!(appended(&h.step(requeue_pending(11, "alice", &[2], false))), vec!["JOB_REQUEUE"]);
    assert_eq!(appended(&h.step(requeue_pending(12, "alice", &[4], true))), vec!["JOB_REQUEUE"]);
    assert_eq!(h.infos(&[4])[0].status, JobStatus::Psusp.bits());
    h.step(requeue_running(13, "alice", &[1], false));
    let effects = h.step(finished("hostA", 1, 42, 2));
    assert_eq!(appended(&effects), vec!["JOB_REQUEUE", "JOB_START"]);
    assert_eq!(new_jobs(&effects), vec![(3, 1, 1)]);
    h.step(submit(5, 5, "alice", request()));
    h.step(started("hostA", 3, 43));
    assert_eq!(new_jobs(&h.step(finished("hostA", 3, 43, 0))), vec![(2, 1, 1)]);
    h.step(started("hostA", 2, 44));
    assert_eq!(new_jobs(&h.step(finished("hostA", 2, 44, 0))), vec![(1, 3, 1)]);
    h.step(started_run("hostA", 1, 45, 3));
    assert_eq!(new_jobs(&h.step(finished_run(1, 45, 0, 3))), vec![(5, 1, 1)]);
    let texts: Vec<String> = history_of(&h, 2).into_iter().map(|(_, _, text)| text).collect();
    assert!(texts.contains(&"Job requeued by user or administrator <alice>;".to_owned()), "{texts:?}");
}

/// `brun -m hosts` of job `id` by `who` (request id `client`).
fn brun(client: u64, who: &str, id: u32, hosts: &[&str]) -> Input {
    let hosts = hosts.iter().map(|h| (*h).to_owned()).collect();
    control(client, who, &[id], wire::JobControlAction::Run { hosts })
}

/// `bkill -r` of `jobs` by `who` (request id `client`).
fn force_exit(client: u64, who: &str, jobs: &[u32]) -> Input {
    control(client, who, jobs, wire::JobControlAction::ForceExit)
}

/// The messages a step sent to sbatchds, as (host, operation).
fn sent(effects: &[Effect]) -> Vec<(String, wire::Operation)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::SendSbd { host, msg, .. } => Some((host.to_string(), msg.operation())),
            _ => None,
        })
        .collect()
}

// Goal: brun starts a pending job that a closed host keeps pending on the host
// named (JOB_FORCE, NEW_JOB), the run ends DONE; a retry of the request is
// answered again and starts nothing; replay rebuilds every step.
#[test]
fn brun_runs_a_job_the_limits_keep_pending() {
    let mut h = Harness::new();
    h.step(admin(1, "admin", wire::AdminAction::HostClose, &["hostA"]));
    h.step(registered("hostA", 1));
    h.step(submit(2, 2, "alice", request()));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Pend.bits());
    let effects = h.step(brun(3, "admin", 1, &["hostA"]));
    assert_eq!(appended(&effects), ["JOB_FORCE"]);
    assert_eq!(new_jobs(&effects), [(1, 1, 1)]);
    assert_eq!(effects.last(), Some(&job_answer(3, &[(1, true, "Job <1> is being forced to run.")])));
    let info = &h.infos(&[1])[0];
    assert_eq!((info.status, info.exec_hosts.as_slice()), (JobStatus::Run.bits(), &["hostA".to_owned()][..]));
    h.check(
        brun(3, "admin", 1, &["hostA"]),
        vec![job_answer(3, &[(1, true, "Job <1> is being forced to run.")])],
    );
    h.step(started("hostA", 1, 42));
    h.restart();
    h.step(finished("hostA", 1, 42, 0));
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Done.bits());
    let history = history_of(&h, 1);
    assert!(
        history
            .iter()
            .any(|(_, _, text)| text.starts_with("Job is forced to run by user or administrator <admin>"))
    );
}

// Goal: brun refuses with LSF's words and logs nothing: a user who is not an
// administrator, an unknown job, an unknown host, a started job, a finished one,
// a held one, and a 4-slot job on a 1-CPU host.
#[test]
fn brun_refusals() {
    let mut h = Harness::new();
    h.step(registered("hostA", 1));
    h.step(submit(1, 1, "alice", request()));
    h.step(started("hostA", 1, 42));
    let mut held = request();
    held.hold = true;
    h.step(submit(2, 2, "alice", held));
    let mut wide = request();
    wide.n_slots = 4;
    h.step(submit(3, 3, "alice", wide));
    let refusals = [
        (brun(10, "alice", 3, &["hostA"]), 3, "Failed to run the job: User permission denied"),
        (brun(11, "admin", 9, &["hostA"]), 9, "Failed to run the job: No matching job found"),
        (
            brun(12, "root", 3, &["nohost"]),
            3,
            "Failed to run the job: Bad host name, host group name or cluster name",
        ),
        (brun(13, "admin", 1, &["hostA"]), 1, "Failed to run the job: Job has already started"),
        (
            brun(14, "admin", 2, &["hostA"]),
            2,
            "Failed to run the job: Operation not supported for a suspended job",
        ),
        (brun(15, "admin", 3, &["hostA"]), 3, "Failed to run the job: Too many processors requested"),
    ];
    for (input, id, message) in refusals {
        let client = match &input {
            Input::JobControl { client, .. } => client.0,
            _ => unreachable!(),
        };
        h.check(input, vec![job_answer(client, &[(id, false, message)])]);
    }
    h.step(finished("hostA", 1, 42, 0));
    h.check(
        brun(16, "admin", 1, &["hostA"]),
        vec![job_answer(16, &[(1, false, "Failed to run the job: Job has already finished")])],
    );
    // Two hosts of 1 and 4 CPUs give the 4-slot job one slot on the first, three
    // on the second (closed, so that only brun starts the job there).
    h.step(admin(18, "admin", wire::AdminAction::HostClose, &["hostC"]));
    h.step(registered("hostC", 4));
    let effects = h.step(brun(17, "admin", 3, &["hostA", "hostC", "hostA"]));
    assert_eq!(appended(&effects), ["JOB_FORCE"]);
    let info = &h.infos(&[3])[0];
    assert_eq!(info.exec_hosts, ["hostA", "hostC", "hostC", "hostC"]);
}

// Goal: bkill -r of a running job whose host went away ends it EXIT at once
// (JOB_FORCE_EXIT, TERM_FORCE_OWNER), sends the kill when the host is there,
// and again when the host registers or reports the run; that run's FINISH only
// gets its ACK; a retry is answered again; a restart keeps it EXIT.
#[test]
fn bkill_r_ends_a_job_at_once_and_its_run_never_comes_back() {
    let mut h = running_job();
    h.step(Input::HostDisconnected { host: host("hostA") });
    let effects = h.step(force_exit(10, "alice", &[1]));
    assert_eq!(appended(&effects), ["JOB_FORCE_EXIT"]);
    assert_eq!(sent(&effects), []);
    assert_eq!(effects.last(), Some(&job_answer(10, &[(1, true, "Job <1> is being terminated")])));
    let info = &h.infos(&[1])[0];
    assert_eq!((info.status, info.finish_reason), (JobStatus::Exit.bits(), wire::FINISH_FORCE_OWNER));
    h.check(force_exit(10, "alice", &[1]), vec![job_answer(10, &[(1, true, "Job <1> is being terminated")])]);
    h.check(
        force_exit(11, "alice", &[1]),
        vec![job_answer(11, &[(1, false, "Job <1>: Job has already finished")])],
    );
    h.restart();
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Exit.bits());
    h.check(
        registered("hostA", 1),
        vec![send("hostA", register_ack()), send("hostA", job_signal(1, 1, wire::SignalAction::Terminate))],
    );
    h.check(
        executed("hostA", 1, 42),
        vec![send("hostA", execute_ack(1)), send("hostA", job_signal(1, 1, wire::SignalAction::Terminate))],
    );
    h.check(signal_reply("hostA", 1, 1, wire::SignalOutcome::Delivered), vec![]);
    h.check(finished("hostA", 1, 42, 9), vec![send("hostA", finish_ack(1))]);
    assert_eq!(h.infos(&[1])[0].status, JobStatus::Exit.bits());
    let history = history_of(&h, 1);
    assert!(history.last().is_some_and(|(_, _, text)| text.contains("TERM_FORCE_OWNER")), "{history:?}");
}

// Goal: bkill -r of a connected running job sends the kill in its step; of a job
// being dispatched, kills the run when its NEW_JOB_REPLY comes; of a pending
// job, ends it with no message; another user's job is refused; an
// administrator's is TERM_FORCE_ADMIN. The kill is resent on the timer until
// the host answers it.
#[test]
fn bkill_r_of_running_dispatching_and_pending_jobs() {
    let mut h = running_job();
    let effects = h.step(force_exit(10, "admin", &[1]));
    assert_eq!(appended(&effects), ["JOB_FORCE_EXIT"]);
    assert_eq!(sent(&effects), [("hostA".to_owned(), wire::Operation::JobSignal)]);
    assert_eq!(h.infos(&[1])[0].finish_reason, wire::FINISH_FORCE_ADMIN);
    // Unanswered, the kill goes again on the timer; answered, it stops.
    h.at(RESEND_MS);
    assert_eq!(sent(&h.step(Input::Tick)), [("hostA".to_owned(), wire::Operation::JobSignal)]);
    h.check(signal_reply("hostA", 1, 1, wire::SignalOutcome::Delivered), vec![]);
    h.at(3 * RESEND_MS);
    assert_eq!(sent(&h.step(Input::Tick)), []);
    // The slot is free again: job 2 is dispatched and force-killed before its start is accepted.
    let effects = h.step(submit(11, 2, "alice", request()));
    assert_eq!(appended(&effects), ["JOB_NEW", "JOB_START"]);
    h.check(
        force_exit(12, "bob", &[2]),
        vec![job_answer(12, &[(2, false, "Job <2>: User permission denied")])],
    );
    let effects = h.step(force_exit(13, "alice", &[2]));
    assert_eq!(sent(&effects), []);
    h.check(
        started("hostA", 2, 43),
        vec![send("hostA", reply_ack(2)), send("hostA", job_signal(2, 1, wire::SignalAction::Terminate))],
    );
    let mut held = request();
    held.hold = true;
    h.step(submit(14, 3, "alice", held));
    let effects = h.step(force_exit(15, "alice", &[3]));
    assert_eq!((appended(&effects), sent(&effects)), (vec!["JOB_FORCE_EXIT"], vec![]));
    assert_eq!(h.infos(&[3])[0].status, JobStatus::Exit.bits());
    h.restart();
    h.check(registered("hostA", 1), {
        let mut expected = vec![send("hostA", register_ack())];
        expected.push(send("hostA", job_signal(1, 1, wire::SignalAction::Terminate)));
        expected.push(send("hostA", job_signal(2, 1, wire::SignalAction::Terminate)));
        expected
    });
}
