//! Per-user and per-cluster limits: `MAX_PEND_JOBS` (lsb.params, lsb.users),
//! `MAX_JOBS` (lsb.users, per user and per group) and `LAVA_MAX_JOB_BYTES`.

use std::collections::BTreeSet;

use lava_batch_ll::JobStatus;
use lava_batch_wire::{self as wire, SignalAction};

use super::harness::*;
use crate::{
    ClientReply, Effect, GroupLimit, Input, MbdConfig, REASON_NEW_JOB, REASON_UGRP_JOB_LIMIT,
    REASON_USER_JOB_LIMIT, REASON_USER_PJOB_LIMIT, UserLimit, UserLimits,
};

fn status(h: &Harness, id: u32) -> JobStatus {
    h.mbd.job(jref(id)).expect("job in memory").status()
}

fn refused_with(client: u64, message: &str) -> Vec<Effect> {
    vec![reply(client, ClientReply::error(wire::ERR_REJECTED, message))]
}

fn limit(max_jobs: Option<u32>, max_pend_jobs: Option<u32>) -> UserLimit {
    UserLimit { max_jobs, max_pend_jobs }
}

fn group(name: &str, members: &[&str], limit: UserLimit) -> GroupLimit {
    let members: BTreeSet<_> = members.iter().map(|name| user(name)).collect();
    GroupLimit { name: name.into(), members: Some(members), limit }
}

/// The id the answer to a submission names (the submission was taken).
fn submitted_id(effects: &[Effect]) -> u32 {
    match effects.iter().find_map(|e| match e {
        Effect::Reply { reply: ClientReply::Submit(reply), .. } => Some(reply.job_id),
        _ => None,
    }) {
        Some(id) => id,
        None => panic!("no submission answer in {effects:?}"),
    }
}

fn held() -> wire::SubmitRequest {
    wire::SubmitRequest { hold: true, ..request() }
}

// Goal: MAX_PEND_JOBS of lsb.params bounds each user's pending jobs (PEND and PSUSP):
// the submission beyond it is refused with LSF's words and logs nothing, another user
// still submits, and a pending job that starts makes room again.
#[test]
fn max_pend_jobs_refuses_only_that_user() {
    let mut h = Harness::with_config(MbdConfig { max_pend_jobs: Some(2), ..config() });
    h.step(submit(1, 1, "alice", request()));
    h.step(submit(2, 2, "alice", held()));
    h.check(submit(3, 3, "alice", request()), refused_with(3, "User <alice>: Pending job threshold reached"));
    assert_eq!(h.mbd.last_job_id(), 2, "the refusal gave no id and logged nothing");
    assert_eq!(submitted_id(&h.step(submit(4, 4, "bob", request()))), 3);
    // Job 1 starts: alice has one pending job left, and submits again.
    h.step(registered("hostB", 1));
    assert_eq!(status(&h, 1), JobStatus::Run);
    assert_eq!(submitted_id(&h.step(submit(5, 5, "alice", request()))), 4);
    h.check(submit(6, 6, "alice", request()), refused_with(6, "User <alice>: Pending job threshold reached"));
    // A retry of an accepted submission is answered as before, not counted again.
    assert_eq!(submitted_id(&h.step(submit(7, 5, "alice", request()))), 4);
}

// Goal: lsb.users' MAX_PEND_JOBS per user and for `default`; a row may lower the
// lsb.params value, never raise it; an array counts each element.
#[test]
fn max_pend_jobs_per_user_default_and_arrays() {
    let mut config = MbdConfig { max_pend_jobs: Some(5), ..config() };
    config.user_limits = UserLimits {
        users: [(user("alice"), limit(None, Some(1))), (user("bob"), limit(None, Some(100)))].into(),
        default: limit(None, Some(3)),
        groups: Vec::new(),
    };
    let mut h = Harness::with_config(config);
    h.step(submit(1, 1, "alice", request()));
    h.check(submit(2, 2, "alice", request()), refused_with(2, "User <alice>: Pending job threshold reached"));
    let array = |spec: &str| wire::SubmitRequest { job_name: spec.into(), ..request() };
    // bob's own 100 is capped by lsb.params' 5: an array of 6 is refused, of 5 accepted.
    h.check(
        submit(3, 3, "bob", array("a[1-6]")),
        refused_with(3, "User <bob>: Pending job threshold reached"),
    );
    assert_eq!(submitted_id(&h.step(submit(4, 4, "bob", array("a[1-5]")))), 2);
    h.check(submit(5, 5, "bob", request()), refused_with(5, "User <bob>: Pending job threshold reached"));
    // carol has the default row's 3.
    for n in 6..=8 {
        h.step(submit(n, n, "carol", request()));
    }
    h.check(submit(9, 9, "carol", request()), refused_with(9, "User <carol>: Pending job threshold reached"));
    // Killing one of carol's pending jobs makes room.
    h.step(signal(10, 10, "carol", &[3], SignalAction::Terminate));
    assert_eq!(submitted_id(&h.step(submit(11, 11, "carol", request()))), 6);
}

// Goal: a group row's MAX_PEND_JOBS bounds its members' pending jobs together, with
// LSF's `Group <name>:` refusal; a user outside the group is not affected.
#[test]
fn max_pend_jobs_of_a_group_counts_its_members_together() {
    let mut config = config();
    config.user_limits.groups = vec![group("staff", &["alice", "bob"], limit(None, Some(2)))];
    let mut h = Harness::with_config(config);
    h.step(submit(1, 1, "alice", request()));
    h.step(submit(2, 2, "bob", request()));
    h.check(submit(3, 3, "bob", request()), refused_with(3, "Group <staff>: Pending job threshold reached"));
    assert_eq!(submitted_id(&h.step(submit(4, 4, "carol", request()))), 3);
}

// Goal: a submission larger than LAVA_MAX_JOB_BYTES is refused with its size and the
// limit, and logs nothing; one at the limit is taken.
#[test]
fn an_oversized_submission_is_refused_with_its_size_and_the_limit() {
    let mut h = Harness::with_config(MbdConfig { max_job_bytes: 4096, ..config() });
    let base = request();
    let base_bytes = crate::tests::harness::spec(base.clone()).submitted_bytes();
    let with_env = |value_bytes: usize| wire::SubmitRequest {
        env: vec![
            wire::EnvVar { name: "PATH".into(), value: "/bin".into() },
            wire::EnvVar { name: "BIG".into(), value: "x".repeat(value_bytes) },
        ],
        ..base.clone()
    };
    // BIG=... costs 3 + 1 + value + 1 bytes.
    let fits = usize::try_from(4096 - base_bytes).expect("small") - 5;
    h.check(
        submit(1, 1, "alice", with_env(fits + 1)),
        refused_with(
            1,
            "Job too large: the submission (command or script, environment and options) is 4097 bytes, \
             above the limit of 4096 bytes (LAVA_MAX_JOB_BYTES in lsb.params)",
        ),
    );
    assert_eq!(h.mbd.last_job_id(), 0);
    assert_eq!(submitted_id(&h.step(submit(2, 2, "alice", with_env(fits)))), 1);
}

// Goal: MAX_JOBS of lsb.users: a user's running jobs hold at most that many slots;
// the others stay PEND with LSF's reason (the parallel one when some slots are left
// but too few) while other users' jobs run; they start when the user's jobs end.
#[test]
fn max_jobs_keeps_a_users_jobs_pending_with_lsfs_reason_until_slots_free() {
    let mut config = config();
    config.user_limits.users =
        [(user("alice"), limit(Some(1), None)), (user("bob"), limit(Some(3), None))].into();
    let mut h = Harness::with_config(config);
    h.step(registered("hostC", 4));
    h.step(submit(1, 1, "alice", request()));
    h.step(submit(2, 2, "alice", request()));
    h.step(submit(3, 3, "bob", wire::SubmitRequest { n_slots: 2, ..request() }));
    h.step(submit(4, 4, "bob", wire::SubmitRequest { n_slots: 2, ..request() }));
    assert_eq!(
        [1, 2, 3, 4].map(|id| status(&h, id)),
        [JobStatus::Run, JobStatus::Pend, JobStatus::Run, JobStatus::Pend]
    );
    h.step(Input::Tick);
    assert_eq!(h.infos(&[2])[0].reason, REASON_USER_JOB_LIMIT);
    assert_eq!(h.infos(&[4])[0].reason, REASON_USER_PJOB_LIMIT);
    // A host has room (hostC holds 3 of 4): the limits alone hold the jobs back.
    h.step(started("hostC", 1, 10));
    h.step(finished("hostC", 1, 10, 0));
    assert_eq!(status(&h, 2), JobStatus::Run, "alice's slot is free again");
    // After a restart (replay decides nothing), the limit still holds job 4 back.
    h.restart();
    h.step(Input::Start);
    h.step(registered("hostC", 4));
    assert_eq!(status(&h, 4), JobStatus::Pend);
    assert_eq!(h.infos(&[4])[0].reason, REASON_USER_PJOB_LIMIT);
}

// Goal: a group row's MAX_JOBS bounds its members' running jobs together (LSF's
// "One of the user's groups" reason); the `default` row applies to users without one.
#[test]
fn max_jobs_of_a_group_and_of_default() {
    let mut config = config();
    config.user_limits.groups = vec![group("staff", &["alice", "bob"], limit(Some(1), None))];
    config.user_limits.default = limit(Some(2), None);
    let mut h = Harness::with_config(config);
    h.step(registered("hostC", 4));
    h.step(submit(1, 1, "alice", request()));
    h.step(submit(2, 2, "bob", request()));
    for n in 3..=5 {
        h.step(submit(n, n, "carol", request()));
    }
    h.step(Input::Tick);
    let shown: Vec<(u32, String)> =
        h.infos(&[1, 2, 3, 4, 5]).into_iter().map(|info| (info.job.job_id, info.reason)).collect();
    assert_eq!(status(&h, 1), JobStatus::Run);
    assert_eq!(shown[1], (2, REASON_UGRP_JOB_LIMIT.to_owned()));
    assert_eq!((status(&h, 3), status(&h, 4)), (JobStatus::Run, JobStatus::Run));
    assert_eq!(shown[4], (5, REASON_USER_JOB_LIMIT.to_owned()));
}

// Goal: a job the last turn did not reach (the cluster was full) shows the user's
// limit, which holds whatever the hosts say, rather than a host reason.
#[test]
fn jobs_a_full_turn_did_not_reach_show_the_users_limit() {
    let mut config = config();
    config.user_limits.default = limit(Some(1), None);
    let mut h = Harness::with_config(config);
    h.step(registered("hostB", 1));
    h.step(submit(1, 1, "alice", request()));
    h.step(submit(2, 2, "alice", request()));
    h.at(MBD_TICK_MS).step(Input::Tick);
    assert_eq!(h.infos(&[2])[0].reason, REASON_USER_JOB_LIMIT);
}

const MBD_TICK_MS: u64 = crate::config::MBD_SLEEP_TIME_MS_DEFAULT;

// Goal: the limits decide at live steps only. A log written under no limits replays
// under strict ones to the same state, and badmin reconfig that lowers them leaves
// the jobs already in alone; new submissions meet the new limits.
#[test]
fn limits_never_change_replay_and_reconfig_applies_them_to_new_work() {
    let mut h = Harness::new();
    h.step(registered("hostC", 4));
    for n in 1..=4 {
        h.step(submit(n, n, "alice", request()));
    }
    let mut strict = config();
    strict.max_pend_jobs = Some(1);
    strict.max_job_bytes = 4096;
    strict.user_limits.default = limit(Some(1), Some(1));
    let replayed = replay_owned(&strict, &h.log);
    assert!(replayed.same_durable_state(&h.mbd));
    assert_eq!([1, 2, 3, 4].map(|id| status(&h, id)), [JobStatus::Run; 4]);
    h.step(Input::Reconfigure { config: Box::new(strict) });
    assert_eq!([1, 2, 3, 4].map(|id| status(&h, id)), [JobStatus::Run; 4]);
    h.step(submit(5, 5, "alice", request()));
    assert_eq!(status(&h, 5), JobStatus::Pend);
    h.check(submit(6, 6, "alice", request()), refused_with(6, "User <alice>: Pending job threshold reached"));
    h.at(MBD_TICK_MS).step(Input::Tick);
    assert_eq!(h.infos(&[5])[0].reason, REASON_USER_JOB_LIMIT);
    assert_ne!(h.infos(&[5])[0].reason, REASON_NEW_JOB);
}

// Goal: while the event log's disk is full a new submission is refused with a message
// saying so and logs nothing, a retry of a submission accepted before is still answered
// with its job, and everything else (a running job's finish, a kill) goes on; once the
// shell says the disk has room, submissions are taken again.
#[test]
fn a_full_disk_refuses_new_submissions_only() {
    let mut h = Harness::new();
    assert_eq!(submitted_id(&h.step(submit(1, 1, "alice", request()))), 1);
    h.step(submit(2, 2, "alice", request()));
    h.step(Input::DiskFull { full: true });
    h.check(submit(3, 3, "alice", request()), refused_with(3, crate::DISK_FULL_MESSAGE));
    assert_eq!(h.mbd.last_job_id(), 2, "the refusal gave no id and logged nothing");
    assert_eq!(submitted_id(&h.step(submit(4, 1, "alice", request()))), 1, "a retry gets its first answer");
    h.step(signal(5, 5, "alice", &[2], SignalAction::Terminate));
    assert_eq!(status(&h, 2), JobStatus::Exit, "control of submitted jobs goes on");
    h.step(Input::DiskFull { full: false });
    assert_eq!(submitted_id(&h.step(submit(6, 6, "alice", request()))), 3);
}

// Goal: LAVA_MAX_PEND_BYTES bounds what one user's pending jobs hold together: the
// submission that would pass it is refused with LSF's threshold words and the sizes,
// logs nothing, and leaves other users alone; a pending job that starts gives its bytes
// back; an array's elements share one copy (the array is counted once).
#[test]
fn max_pend_bytes_bounds_each_users_pending_jobs_together() {
    let big = |n: usize| wire::SubmitRequest {
        env: vec![wire::EnvVar { name: "PAYLOAD".into(), value: "x".repeat(n) }],
        ..request()
    };
    let mut h = Harness::with_config(MbdConfig { max_pend_bytes: 10_000, ..config() });
    h.step(submit(1, 1, "alice", big(4_000)));
    h.step(submit(2, 2, "alice", big(4_000)));
    let refused = h.step(submit(3, 3, "alice", big(4_000)));
    let Some(Effect::Reply { reply: ClientReply::Error(error), .. }) = refused.first() else {
        panic!("refused: {refused:?}")
    };
    assert!(error.message.starts_with("User <alice>: Pending job threshold reached"), "{}", error.message);
    assert!(error.message.contains("LAVA_MAX_PEND_BYTES"), "{}", error.message);
    assert_eq!(h.mbd.last_job_id(), 2, "the refusal gave no id and logged nothing");
    assert_eq!(submitted_id(&h.step(submit(4, 4, "bob", big(4_000)))), 3, "bob has his own bytes");
    // Job 1 starts: alice's bytes drop below the bound again.
    h.step(registered("hostB", 1));
    assert_eq!(status(&h, 1), JobStatus::Run);
    assert_eq!(submitted_id(&h.step(submit(5, 5, "alice", big(4_000)))), 4);
    // An array of 100 elements of 4 KB each is one copy for carol, not 400 KB.
    let array = wire::SubmitRequest { job_name: "a[1-100]".into(), ..big(4_000) };
    assert_eq!(submitted_id(&h.step(submit(6, 6, "carol", array))), 5);
    assert_eq!(submitted_id(&h.step(submit(7, 7, "carol", big(4_000)))), 6);
}
