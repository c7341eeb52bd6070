//! Job arrays (`-J "name[list]%N"`) and dependencies (`-w`): submission
//! checks, dispatch, signals, queries, and replay (every step of the harness
//! also replays the log and the snapshot and compares them with the live state).

use std::sync::Arc;

use lava_batch_ll::{JobRef, JobStatus};
use lava_batch_wire as wire;

use super::harness::*;
use crate::{ClientReply, Effect, Event, Input, REASON_ARRAY_LIMIT, REASON_DEPEND_NEVER, REASON_DEPEND_WAIT};

fn element(id: u32, index: u32) -> wire::WireJobRef {
    wire::WireJobRef { job_id: id, array_index: index }
}

fn named(name: &str) -> wire::SubmitRequest {
    wire::SubmitRequest { job_name: name.into(), ..request() }
}

fn depending(expression: &str) -> wire::SubmitRequest {
    wire::SubmitRequest { dependency: expression.into(), ..request() }
}

/// The answer of a submission step: the job id, or the error's message.
fn answer(effects: &[Effect]) -> Result<u32, String> {
    effects
        .iter()
        .find_map(|e| match e {
            Effect::Reply { reply: ClientReply::Submit(r), .. } => Some(Ok(r.job_id)),
            Effect::Reply { reply: ClientReply::Error(r), .. } => Some(Err(r.message.clone())),
            _ => None,
        })
        .expect("the submission is answered")
}

/// The job references dispatched (JOB_START) by a step, in order.
fn dispatched(effects: &[Effect]) -> Vec<wire::WireJobRef> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Append(Event::JobStart(r)) => Some(r.job.to_wire()),
            _ => None,
        })
        .collect()
}

fn accept(on: &str, job: wire::WireJobRef) -> Input {
    let outcome = wire::NewJobOutcome::Started { pid: 100, pgid: 100, job_status: JobStatus::Run.bits() };
    Input::NewJobReply { host: host(on), reply: wire::NewJobReply { job, dispatch_seq: 1, outcome } }
}

fn finish(on: &str, job: wire::WireJobRef, wait_status: i32) -> Input {
    Input::JobFinish {
        host: host(on),
        msg: wire::JobFinish { job, ..finish_msg(job.job_id, 100, wait_status) },
    }
}

fn kill(client: u64, request_id: u64, jobs: &[wire::WireJobRef]) -> Input {
    let request = wire::SignalRequest {
        jobs: jobs.to_vec(),
        all_jobs: false,
        user: String::new(),
        action: wire::SignalAction::Terminate,
    };
    Input::Signal { client: ClientId(client), request_id: rid(request_id), caller: caller("alice"), request }
}

use crate::ClientId;

/// (reference, status, name, reason) of every job a query for `job` shows.
fn shown(h: &mut Harness, job: wire::WireJobRef) -> Vec<(String, JobStatus, String, String)> {
    let query = wire::JobQuery {
        jobs: vec![job],
        user: "all".into(),
        state_filter: wire::state_filter::ALL,
        queue: String::new(),
        host: String::new(),
        job_name: String::new(),
        after_job: 0,
        after_index: 0,
    };
    let effects = h.step(Input::Query { client: ClientId(9), caller: caller("alice"), query });
    let [Effect::Reply { reply: ClientReply::JobQuery(reply), .. }] = effects.as_slice() else {
        panic!("unexpected query effects {effects:?}");
    };
    reply
        .jobs
        .iter()
        .map(|info| {
            let reference = JobRef::new(info.job.job_id, info.job.array_index).expect("a job").to_string();
            (
                reference,
                JobStatus::from_bits(info.status).expect("a status"),
                info.job_name.clone(),
                info.reason.clone(),
            )
        })
        .collect()
}

// Goal: one submission makes every element, the answer names the job id, and
// `%2` keeps at most two elements started; a finish lets the next one start.
// Method: six elements on a 4-slot host; finish elements one by one.
#[test]
fn an_array_runs_at_most_its_limit_at_once() {
    let mut h = Harness::new();
    h.step(registered("hostC", 8));
    let effects = h.step(submit(1, 1, "alice", named("arr[1-6]%2")));
    assert_eq!(answer(&effects), Ok(1));
    let new_jobs = effects.iter().filter(|e| matches!(e, Effect::Append(Event::JobNew(_)))).count();
    assert_eq!(new_jobs, 1, "one JOB_NEW for the whole array");
    assert_eq!(dispatched(&effects), vec![element(1, 1), element(1, 2)]);
    let all = shown(&mut h, wref(1));
    assert_eq!(all.len(), 6);
    assert_eq!(all[0].2, "arr[1]");
    assert_eq!(all[5], ("1[6]".into(), JobStatus::Pend, "arr[6]".into(), REASON_ARRAY_LIMIT.into()));
    let mut running = vec![element(1, 1), element(1, 2)];
    for next in 3..=6 {
        let done = running.remove(0);
        h.step(accept("hostC", done));
        let effects = h.step(finish("hostC", done, 0));
        assert_eq!(dispatched(&effects), vec![element(1, next)]);
        running.push(element(1, next));
    }
    assert_eq!(shown(&mut h, element(1, 4)).len(), 1, "ID[INDEX] names one element");
}

// Goal: the elements of an array share one copy of the submission in memory,
// finished ones too (frozen, they hold a stub instead of the command), also
// after a restart from a snapshot.
#[test]
fn elements_share_their_submission() {
    let mut h = Harness::new();
    h.step(registered("hostB", 1));
    h.step(submit(1, 1, "alice", named("big[1-500]")));
    h.step(accept("hostB", element(1, 1)));
    h.step(finish("hostB", element(1, 1), 0));
    assert_eq!(h.mbd.job(JobRef::new(1, 1).expect("job")).expect("kept").status(), JobStatus::Done);
    let spec_of = |mbd: &crate::Mbd, index: u32| {
        Arc::clone(&mbd.job(JobRef::new(1, index).expect("job")).expect("in memory").spec)
    };
    assert!(Arc::ptr_eq(&spec_of(&h.mbd, 1), &spec_of(&h.mbd, 500)));
    assert!(Arc::ptr_eq(&spec_of(&h.mbd, 2), &spec_of(&h.mbd, 500)));
    assert_eq!(spec_of(&h.mbd, 1).request().command, request().command, "a frozen element thaws whole");
    let restored = crate::Mbd::from_snapshot(config(), h.mbd.snapshot()).expect("loads");
    assert!(Arc::ptr_eq(&spec_of(&restored, 1), &spec_of(&restored, 500)));
    assert!(Arc::ptr_eq(&spec_of(&restored, 2), &spec_of(&restored, 500)));
}

// Goal: bad array specifications get LSF's messages and nothing is logged.
#[test]
fn bad_array_specs_are_refused() {
    let mut h = Harness::new();
    for (name, message) in [
        ("a[0]", "Job array index error"),
        ("a[3-1]", "Job array index error"),
        ("a[1-3,2]", "Job array index error"),
        ("a[1-3]%0", "Job array index error"),
        ("a[1-1001]", "Job array index too large"),
        ("a[5,2000]", "Job array index too large"),
    ] {
        let effects = h.step(submit(1, 1, "alice", named(name)));
        assert_eq!(answer(&effects), Err(message.to_owned()), "{name}");
        assert!(effects.iter().all(|e| !matches!(e, Effect::Append(_))), "{name}");
    }
    let mut small = config();
    small.max_job_array_size = 10;
    let mut h = Harness::with_config(small);
    assert_eq!(
        answer(&h.step(submit(1, 1, "alice", named("a[1-11]")))),
        Err("Job array index too large".into())
    );
    assert_eq!(answer(&h.step(submit(1, 2, "alice", named("a[1-10]")))), Ok(1));
}

// Goal: `bkill ID[INDEX]` ends one element; `bkill ID` every unfinished one;
// a retry of the submission gets the array back, not a second one.
#[test]
fn kill_one_element_then_the_whole_array() {
    let mut h = Harness::new();
    h.step(registered("hostB", 1));
    h.step(submit(1, 1, "alice", named("k[1-3]")));
    h.step(accept("hostB", element(1, 1)));
    let effects = h.step(kill(2, 10, &[element(1, 2)]));
    assert!(effects.iter().any(|e| matches!(e, Effect::Append(Event::JobStatus(r)) if r.job.index() == 2 && r.status == JobStatus::Exit)));
    let statuses: Vec<JobStatus> = shown(&mut h, wref(1)).into_iter().map(|s| s.1).collect();
    assert_eq!(statuses, vec![JobStatus::Run, JobStatus::Exit, JobStatus::Pend]);
    let effects = h.step(kill(2, 11, &[wref(1)]));
    let Some(Effect::Reply { reply: ClientReply::Signal(reply), .. }) = effects.last() else {
        panic!("answered: {effects:?}");
    };
    let targets: Vec<wire::WireJobRef> = reply.results.iter().map(|r| r.job).collect();
    assert_eq!(targets, vec![element(1, 1), element(1, 3)], "the unfinished elements");
    assert_eq!(answer(&h.step(submit(1, 1, "alice", named("k[1-3]")))), Ok(1));
    assert_eq!(h.mbd.last_job_id(), 1);
}

// Goal: a chain A → B (done(A)) → C (ended(B)) runs in order, each waiting
// with LSF's reason; a job naming a job that ended the wrong way waits for
// ever with the "never satisfied" reason.
#[test]
fn a_dependency_chain_runs_in_order() {
    let mut h = Harness::new();
    h.step(registered("hostC", 8));
    assert_eq!(answer(&h.step(submit(1, 1, "alice", named("A")))), Ok(1));
    let effects = h.step(submit(1, 2, "alice", depending("done(1)")));
    assert_eq!((answer(&effects), dispatched(&effects)), (Ok(2), vec![]));
    let effects = h.step(submit(1, 3, "alice", depending("ended(2)")));
    assert_eq!((answer(&effects), dispatched(&effects)), (Ok(3), vec![]));
    assert_eq!(shown(&mut h, wref(3))[0].3, REASON_DEPEND_WAIT);
    let effects = h.step(submit(1, 4, "alice", depending("exit(A)")));
    assert_eq!(answer(&effects), Ok(4));
    h.step(accept("hostC", wref(1)));
    assert_eq!(dispatched(&h.step(finish("hostC", wref(1), 0))), vec![wref(2)]);
    assert_eq!(shown(&mut h, wref(4))[0].3, REASON_DEPEND_NEVER, "exit(A) after A was DONE");
    h.step(accept("hostC", wref(2)));
    assert_eq!(
        dispatched(&h.step(finish("hostC", wref(2), 1 << 8))),
        vec![wref(3)],
        "ended() takes EXIT too"
    );
    h.restart();
    assert_eq!(shown(&mut h, wref(4))[0].3, REASON_DEPEND_NEVER);
}

// Goal: the operators, names and array references of an expression decide as
// LSF's do: `!`, `||`, a name meaning the user's latest job of that name, a
// whole array holding when every element does, a kill while pending ending a job.
#[test]
fn expressions_names_and_arrays() {
    let mut h = Harness::new();
    h.step(submit(1, 1, "alice", wire::SubmitRequest { hold: true, ..named("build") }));
    h.step(submit(1, 2, "alice", wire::SubmitRequest { hold: true, ..named("build") }));
    h.step(submit(1, 3, "alice", wire::SubmitRequest { hold: true, ..named("set[1-2]") }));
    h.step(submit(1, 4, "alice", depending("!done(build) && ended(set)")));
    h.step(submit(1, 5, "alice", depending("ended(\"build\") || done(1)")));
    let job = |h: &Harness, id: u32| h.mbd.job(jref(id)).expect("in memory").into_owned();
    let names: Vec<u32> =
        job(&h, 5).dependency.expect("kept").conditions().iter().map(|c| c.job.id()).collect();
    assert_eq!(names, vec![2, 1], "a name means the latest job of that name");
    h.step(registered("hostC", 8));
    assert_eq!(shown(&mut h, wref(4))[0].3, REASON_DEPEND_WAIT);
    h.step(kill(2, 10, &[element(3, 1)]));
    assert_eq!(shown(&mut h, wref(4))[0].3, REASON_DEPEND_WAIT, "one element of two ended");
    let effects = h.step(kill(2, 11, &[element(3, 2), wref(2)]));
    assert_eq!(dispatched(&effects), vec![wref(4), wref(5)]);
}

// Goal: a malformed expression and one naming no job are refused with LSF's
// messages; nothing is logged and no job id is used.
#[test]
fn bad_dependencies_are_refused() {
    let mut h = Harness::new();
    for (expression, message) in [
        ("done(", "done(: Dependency condition syntax error"),
        ("done(1) &", "done(1) &: Dependency condition syntax error"),
        ("done(99)", "done(99): No matching job found"),
        ("ended(nosuch)", "ended(nosuch): No matching job found"),
    ] {
        let effects = h.step(submit(1, 1, "alice", depending(expression)));
        assert_eq!(answer(&effects), Err(message.to_owned()), "{expression}");
        assert!(effects.iter().all(|e| !matches!(e, Effect::Append(_))));
    }
    assert_eq!(h.mbd.last_job_id(), 0);
    // Another user's job of that name is not a match.
    h.step(submit(1, 2, "bob", named("theirs")));
    assert_eq!(
        answer(&h.step(submit(1, 3, "alice", depending("done(theirs)")))),
        Err("done(theirs): No matching job found".into())
    );
}

// Goal: a dependency on a job that was cleaned decides as the module says:
// ended() holds, done() never will.
#[test]
fn cleaned_jobs_end_dependencies() {
    let mut h = Harness::new();
    h.step(registered("hostB", 1));
    h.step(submit(1, 1, "alice", request()));
    h.step(submit(1, 2, "alice", wire::SubmitRequest { n_slots: 2, ..depending("done(1)") }));
    h.step(submit(1, 3, "alice", wire::SubmitRequest { n_slots: 2, ..depending("ended(1)") }));
    h.step(accept("hostB", wref(1)));
    h.step(finish("hostB", wref(1), 0));
    h.at(CLEAN_MS + 200_000).step(Input::Tick);
    assert!(h.mbd.job(jref(1)).is_none(), "cleaned");
    let reasons: Vec<String> = [2, 3].iter().map(|id| shown(&mut h, wref(*id))[0].3.clone()).collect();
    assert_eq!(reasons[0], REASON_DEPEND_NEVER);
    assert_ne!(reasons[1], REASON_DEPEND_NEVER);
    assert_ne!(reasons[1], REASON_DEPEND_WAIT);
}

/// The jobs of every page of `bjobs -a` as alice, following `next_after` and
/// `next_after_index`, and the number of pages.
fn all_pages(h: &mut Harness, job_name: &str) -> (Vec<String>, usize) {
    let (mut shown, mut after, mut n_pages) = (Vec::new(), (0, 0), 0);
    loop {
        let query = wire::JobQuery {
            jobs: vec![],
            user: "all".into(),
            state_filter: wire::state_filter::ALL,
            queue: String::new(),
            host: String::new(),
            job_name: job_name.into(),
            after_job: after.0,
            after_index: after.1,
        };
        let effects = h.step(Input::Query { client: ClientId(9), caller: caller("alice"), query });
        let [Effect::Reply { reply: ClientReply::JobQuery(reply), .. }] = effects.as_slice() else {
            panic!("unexpected query effects {effects:?}");
        };
        n_pages += 1;
        shown.extend(
            reply
                .jobs
                .iter()
                .map(|info| JobRef::new(info.job.job_id, info.job.array_index).expect("a job").to_string()),
        );
        if reply.next_after == 0 {
            return (shown, n_pages);
        }
        after = (reply.next_after, reply.next_after_index);
    }
}

// Goal: pages of `bjobs` list every element of an array once, in order, also
// when the array is larger than a page: a page may end inside an array and the
// next resumes at its following element.
// Method: jobs with 60 KB commands, so that 17 fill a page: a single job, then
// a 40-element array, then another job — three pages, cut inside the array.
#[test]
fn pages_resume_inside_an_array() {
    let mut h = Harness::new();
    let big = wire::SubmitRequest { command: "x".repeat(60 * 1024), ..request() };
    h.step(submit(1, 1, "alice", big.clone()));
    h.step(submit(1, 2, "alice", wire::SubmitRequest { job_name: "wide[1-40]".into(), ..big.clone() }));
    h.step(submit(1, 3, "alice", big));
    let (shown, n_pages) = all_pages(&mut h, "");
    let mut expected = vec!["1".to_owned()];
    expected.extend((1..=40).map(|i| format!("2[{i}]")));
    expected.push("3".to_owned());
    assert_eq!(shown, expected);
    assert_eq!(n_pages, 3, "42 jobs of 60 KB take three pages of 1 MiB");
    let (named, _) = all_pages(&mut h, "wide");
    assert_eq!(named.len(), 40, "an array's name selects every element");
    assert_eq!(all_pages(&mut h, "wide[3]").0, vec!["2[3]".to_owned()]);
}

// Goal: brequeue names an array's elements by the array id and one element by
// `ID[i]`; a requeued element gets its shared submission whole and the logged
// environment back, and runs again with dispatch number 2.
#[test]
fn brequeue_takes_elements_like_bkill() {
    let mut h = Harness::new();
    h.step(registered("hostC", 4));
    h.step(submit(1, 1, "alice", named("arr[1-2]")));
    for index in [1, 2] {
        h.step(accept("hostC", element(1, index)));
        h.step(finish("hostC", element(1, index), 1 << 8));
    }
    let requeue = |client: u64, job: wire::WireJobRef| Input::Requeue {
        client: ClientId(client),
        request_id: rid(client),
        caller: caller("alice"),
        request: wire::JobControlRequest {
            jobs: vec![job],
            action: wire::JobControlAction::Requeue {
                done: false,
                exit: true,
                running: false,
                pending: false,
                hold: false,
            },
        },
        submissions: vec![crate::LoggedSubmission { job: jref(1), request_id: rid(1), env: request().env }],
    };
    let effects = h.step(requeue(10, element(1, 2)));
    assert_eq!(dispatched(&effects), vec![element(1, 2)]);
    let status =
        |h: &Harness, index: u32| h.mbd.job(JobRef::new(1, index).expect("job")).expect("kept").status();
    assert_eq!((status(&h, 1), status(&h, 2)), (JobStatus::Exit, JobStatus::Run));
    let second = h.mbd.job(JobRef::new(1, 2).expect("job")).expect("kept").into_owned();
    assert_eq!(
        (second.dispatch_seq(), second.env(), second.spec().request().command.as_str()),
        (2, &request().env[..], "sleep 10")
    );
    let effects = h.step(requeue(11, wref(1)));
    let lines = effects.iter().find_map(|e| match e {
        Effect::Reply { reply: ClientReply::JobControl(reply), .. } => Some(reply.results.clone()),
        _ => None,
    });
    let lines: Vec<(bool, String)> =
        lines.expect("an answer").into_iter().map(|r| (r.done, r.message)).collect();
    assert_eq!(
        lines,
        vec![
            (true, "Job <1[1]> is being requeued".to_owned()),
            (false, "Job <1[2]>: Job has not finished; requeue a running job with -r or -a".to_owned()),
        ]
    );
    assert_eq!(dispatched(&effects), vec![element(1, 1)]);
}

// Goal: `bwait`'s question (Mbd::wait_query) decides as a waiting job's dependency would:
// the first question resolves a name to the caller's latest job of that name and gives the
// condition back by id with its registration; a later question with both is about the same
// job even after a newer job took the name; DONE makes done() hold, EXIT makes it false for
// good; a syntax error or an unknown job is refused with the `bsub -w` wording (a question
// takes the state by reference: it cannot log anything).
#[test]
fn bwait_asks_the_dependency_rules() {
    let mut h = Harness::new();
    h.step(registered("hostC", 8));
    assert_eq!(answer(&h.step(submit(1, 1, "alice", named("A")))), Ok(1));
    let ask = |h: &Harness, who: &str, condition: &str, registered: u64| {
        h.mbd.wait_query(&caller(who), &wire::WaitQuery { condition: condition.into(), registered })
    };
    let first = ask(&h, "alice", "done(A) && started(A)", 0);
    assert_eq!(
        (first.code, first.condition.as_str(), first.message.as_str()),
        (wire::WAIT_NOT_YET, "done(1) && started(1)", "")
    );
    assert_eq!(first.registered, 2, "the next submission number");
    // Another job of the name after the registration changes nothing for the question.
    assert_eq!(answer(&h.step(submit(1, 2, "alice", named("A")))), Ok(2));
    assert_eq!(ask(&h, "alice", "done(A)", 0).condition, "done(2)", "a new question: the latest");
    h.step(accept("hostC", wref(1)));
    let again = ask(&h, "alice", &first.condition, first.registered);
    assert_eq!((again.code, again.registered), (wire::WAIT_NOT_YET, 2), "started, not done");
    h.step(finish("hostC", wref(1), 0));
    assert_eq!(ask(&h, "alice", &first.condition, first.registered).code, wire::WAIT_HOLDS);
    assert_eq!(ask(&h, "alice", "exit(1)", 0).code, wire::WAIT_NEVER, "DONE is final");
    assert_eq!(ask(&h, "alice", "!exit(1) || done(2)", 0).code, wire::WAIT_HOLDS);
    for (who, condition, message) in [
        ("alice", "done(", "Dependency condition syntax error"),
        ("alice", "done(99)", "No matching job found"),
        ("bob", "done(A)", "No matching job found"),
    ] {
        let refused = ask(&h, who, condition, 0);
        assert_eq!((refused.code, refused.message.as_str()), (wire::WAIT_REFUSED, message), "{condition}");
    }
}
