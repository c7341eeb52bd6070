//! `bhist`'s HISTORY_QUERY, answered from the event log itself; and the
//! submission environments `brequeue` needs ([`submissions`]), read back from
//! the disk: the newest snapshot (an unfinished job's own, the copies of the
//! finished jobs' that [`finished_envs`] had written after the state) and the
//! JOB_NEW records still in the log.
//!
//! mbatchd owns `lsb.events` (its folder is private, see `journal`), so
//! `bhist` cannot read it as LSF's does; instead a command connection's task
//! reads the log's records on a blocking thread ([`answer`]) and feeds each
//! decoded event to `lava_mbd::HistoryBuilder`, which selects the jobs and
//! words their lines. The event loop is not involved: the read changes
//! nothing, never waits for the loop, and sees the records appended so far
//! (those not yet durable included, as LSF's `bhist` sees the file). Records a
//! snapshot let the log prune are gone: the read starts at the oldest record
//! still on disk, so jobs submitted before it are not told.

use lava_batch_wire as wire;
use lava_eventlog::{EventLog, Position};
use std::collections::{BTreeMap, BTreeSet, HashMap};

use lava_batch_ll::JobRef;
use lava_mbd::{Caller, Event, HistoryBuilder, LoggedSubmission, MbdSnapshot};

use crate::codec::EVENT_LIMITS;

/// The page of histories `query` asks `caller` for, or why the log could not be read.
pub(crate) fn answer(
    log: &EventLog,
    query: wire::HistoryQuery,
    caller: &Caller,
) -> Result<wire::HistoryReply, String> {
    let mut builder = HistoryBuilder::new(query, caller);
    for_each_event(log, |event| builder.add(&event))?;
    Ok(builder.finish())
}

/// The submission environments of jobs `ids` still on disk, for `brequeue`: a
/// finished job no longer holds its own. Each is found in the newest snapshot or
/// in the job's JOB_NEW (both, possibly: the copies are equal); a job found in
/// neither is not returned (the logic then refuses to requeue it).
pub(crate) fn submissions(log: &EventLog, ids: &BTreeSet<u32>) -> Result<Vec<LoggedSubmission>, String> {
    let mut found = Vec::new();
    each_submission(log, ids, |submission| found.push(submission))?;
    Ok(found)
}

/// Feeds [`submissions`]' findings to `each`, one at a time.
fn each_submission(
    log: &EventLog,
    ids: &BTreeSet<u32>,
    mut each: impl FnMut(LoggedSubmission),
) -> Result<(), String> {
    if let Some(snapshot) = newest_snapshot(log)? {
        snapshot_envs(snapshot, ids).for_each(&mut each);
    }
    for_each_event(log, |event| {
        if let Event::JobNew(record) = event
            && ids.contains(&record.job.id())
        {
            let env = record.spec.request().env.clone();
            each(LoggedSubmission { job: record.job, request_id: record.request_id, env });
        }
    })
}

/// The submission environments of a snapshot's finished jobs, as its file holds
/// them (`codec::encode_snapshot`): each distinct environment once, and for each
/// job (its JOB_NEW's job and request id) the index of its own. The jobs of one
/// user mostly share one environment, so the table stays small however many
/// finished jobs `CLEAN_PERIOD` keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FinishedEnvs {
    /// The distinct environments.
    envs: Vec<Vec<wire::EnvVar>>,
    /// One entry per job, in job order.
    jobs: Vec<FinishedEnv>,
}

/// A job of [`FinishedEnvs`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct FinishedEnv {
    job: JobRef,
    request_id: wire::RequestId,
    /// Index into [`FinishedEnvs::envs`].
    env: u32,
}

impl FinishedEnvs {
    /// The submissions of the jobs of `ids`.
    fn submissions<'a>(&'a self, ids: &'a BTreeSet<u32>) -> impl Iterator<Item = LoggedSubmission> + 'a {
        self.jobs.iter().filter(|entry| ids.contains(&entry.job.id())).filter_map(|entry| {
            let env = self.envs.get(usize::try_from(entry.env).ok()?)?.clone();
            Some(LoggedSubmission { job: entry.job, request_id: entry.request_id, env })
        })
    }
}

/// The environments of `snapshot`'s finished jobs read back from the disk
/// ([`submissions`]), for the snapshot file (`codec::encode_snapshot`):
/// written into every snapshot, they stay on disk after the log prunes the
/// jobs' JOB_NEW, for as long as the jobs are kept (`CLEAN_PERIOD`), and cost
/// no memory between snapshots. Each distinct environment is held once while
/// they are read.
pub(crate) fn finished_envs(log: &EventLog, snapshot: &MbdSnapshot) -> Result<FinishedEnvs, String> {
    let finished: BTreeSet<(u32, wire::RequestId)> = snapshot
        .jobs
        .iter()
        .filter(|job| job.status().is_finished())
        .map(|job| (job.job_ref().id(), job.request_id()))
        .collect();
    let ids: BTreeSet<u32> = finished.iter().map(|(id, _)| *id).collect();
    let mut table = FinishedEnvs::default();
    let mut index_of: HashMap<Vec<u8>, u32> = HashMap::new();
    let mut entries: BTreeMap<(JobRef, wire::RequestId), u32> = BTreeMap::new();
    each_submission(log, &ids, |submission| {
        let key = (submission.job, submission.request_id);
        if !finished.contains(&(key.0.id(), key.1)) || entries.contains_key(&key) {
            return;
        }
        let bytes = crate::codec::encode(&submission.env);
        let next = u32::try_from(table.envs.len()).unwrap_or(u32::MAX);
        let env = *index_of.entry(bytes).or_insert_with(|| {
            table.envs.push(submission.env);
            next
        });
        entries.insert(key, env);
    })?;
    table.jobs =
        entries.into_iter().map(|((job, request_id), env)| FinishedEnv { job, request_id, env }).collect();
    Ok(table)
}

/// The newest snapshot file on disk, decoded; `None` before the first.
fn newest_snapshot(log: &EventLog) -> Result<Option<(MbdSnapshot, FinishedEnvs)>, String> {
    let replay = log.replay().map_err(|error| format!("cannot read the newest snapshot: {error}"))?;
    let Some(snapshot) = replay.snapshot else { return Ok(None) };
    crate::codec::decode_snapshot(&snapshot.bytes)
        .map(Some)
        .map_err(|error| format!("the snapshot at {} does not decode: {error}", snapshot.position.0))
}

/// The environments a snapshot file holds of jobs `ids`: an unfinished job's
/// own (an array's once), and the copies of the finished jobs'.
fn snapshot_envs(
    (snapshot, finished): (MbdSnapshot, FinishedEnvs),
    ids: &BTreeSet<u32>,
) -> impl Iterator<Item = LoggedSubmission> + '_ {
    let own = snapshot
        .jobs
        .into_iter()
        .filter(|job| !job.status().is_finished() && ids.contains(&job.job_ref().id()))
        .map(|job| LoggedSubmission {
            job: JobRef::new(job.job_ref().id(), 0).expect("a job's id is not 0"),
            request_id: job.request_id(),
            env: job.env().to_vec(),
        });
    own.chain(finished.submissions(ids).collect::<Vec<_>>())
}

/// Feeds every event still in the log, oldest first, to `each`.
fn for_each_event(log: &EventLog, mut each: impl FnMut(Event)) -> Result<(), String> {
    let records = match log.replay_from(Position::FIRST) {
        Err(lava_eventlog::Error::Pruned { first_available, .. }) => log.replay_from(first_available),
        other => other,
    }
    .map_err(|error| format!("cannot read the event log: {error}"))?;
    for record in records {
        let (position, payload) = record.map_err(|error| format!("cannot read the event log: {error}"))?;
        let event: Event = lava_xdr::from_bytes(&payload, &EVENT_LIMITS)
            .map_err(|error| format!("event log record {} does not decode: {error}", position.0))?;
        each(event);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use lava_batch_ll::{HostName, SubmitSpec, UserName};
    use lava_eventlog::{Options, Position};
    use lava_mbd::{ClientId, ClientReply, Effect, Input, Mbd};

    use crate::journal::tests_support::config;

    fn caller() -> Caller {
        let user = UserName::parse("test", "alice").expect("user");
        Caller { uid: 1000, gid: 100, user, host: HostName::parse("test", "h1").expect("host") }
    }

    /// Steps `input` into `mbd` and appends its events to `log`; the effects.
    fn step(mbd: &mut Mbd, log: &EventLog, now_ms: u64, input: Input) -> Vec<Effect> {
        let mut effects = Vec::new();
        mbd.step(now_ms, input, &mut effects);
        for effect in &effects {
            if let Effect::Append(event) = effect {
                log.append(&crate::codec::encode(event)).expect("appends");
            }
        }
        log.sync().expect("syncs");
        effects
    }

    /// Writes a snapshot of `mbd` as the journal does, then prunes; the
    /// environments written, and the state as recovery reads it back.
    fn snapshot(mbd: &Mbd, log: &EventLog) -> (FinishedEnvs, MbdSnapshot) {
        let state = mbd.snapshot();
        let envs = finished_envs(log, &state).expect("environments read back");
        let position = log.stats().next_position.0 - 1;
        let bytes = crate::codec::encode_snapshot(&state, &envs);
        log.write_snapshot(Position(position), &bytes).expect("snapshot written");
        log.prune().expect("pruned");
        let read_back = crate::codec::decode_snapshot_state(&bytes).expect("decodes");
        assert_eq!(read_back, state);
        (envs, read_back)
    }

    fn job_news(log: &EventLog) -> usize {
        let mut n = 0;
        for_each_event(log, |event| n += usize::from(matches!(event, Event::JobNew(_)))).expect("reads");
        n
    }

    // Goal: a finished job's environment, which memory drops, stays on disk
    // once snapshots let the log prune its JOB_NEW: each snapshot carries it
    // (read back from JOB_NEW, then from the previous snapshot), `submissions`
    // finds it there, and the logic restored from that snapshot requeues the
    // job with it. Method: a log of tiny segments, so that pruning removes the
    // segment holding JOB_NEW; two snapshots.
    #[test]
    fn a_finished_jobs_environment_outlives_its_pruned_job_new() {
        let dir = tempfile::tempdir().expect("tempdir");
        let options =
            Options { segment_bytes_max: lava_eventlog::SEGMENT_BYTES_MIN, ..Options::new("lsb.events") };
        let (log, _) = EventLog::open(dir.path(), options).expect("opens");
        let mut mbd = Mbd::new(config()).expect("valid config");
        let env = vec![wire::EnvVar { name: "PATH".into(), value: "/opt/bin:/bin".into() }];
        let request = wire::SubmitRequest {
            command: "sleep 10".into(),
            cwd: "work".into(),
            home_dir: "/home/alice".into(),
            n_slots: 1,
            from_host: "h1".into(),
            env: env.clone(),
            ..wire::SubmitRequest::default()
        };
        let host = HostName::parse("test", "h1").expect("host");
        step(&mut mbd, &log, 1_000, Input::HostRegistered { host: host.clone(), n_cpus: 1 });
        // Jobs 1 and 2, with the same environment, each run and end EXIT.
        for id in [1, 2] {
            let spec = Box::new(SubmitSpec::try_from(request.clone()).expect("valid submission"));
            let request_id = wire::RequestId { high: 1, low: u64::from(id) };
            let now = u64::from(id) * 10_000;
            step(
                &mut mbd,
                &log,
                now,
                Input::Submit { client: ClientId(1), request_id, caller: caller(), spec },
            );
            let job = wire::WireJobRef { job_id: id, array_index: 0 };
            let outcome = wire::NewJobOutcome::Started { pid: 42, pgid: 42, job_status: 0x04 };
            let reply = wire::NewJobReply { job, dispatch_seq: 1, outcome };
            step(&mut mbd, &log, now + 1_000, Input::NewJobReply { host: host.clone(), reply });
            let msg = wire::JobFinish {
                job,
                dispatch_seq: 1,
                pid: 42,
                wait_status: 1 << 8,
                finish_reason: wire::FINISH_NORMAL,
                end_time: 3,
                rusage: wire::ResourceUsage::default(),
            };
            step(&mut mbd, &log, now + 2_000, Input::JobFinish { host: host.clone(), msg });
            assert!(mbd.job(JobRef::new(id, 0).expect("id")).expect("kept").env().is_empty());
        }
        let request_id = wire::RequestId { high: 1, low: 1 };
        let job = wire::WireJobRef { job_id: 1, array_index: 0 };

        let (first, _) = snapshot(&mbd, &log);
        // Both jobs are in the table, their one environment once.
        assert_eq!((first.jobs.len(), first.envs.clone()), (2, vec![env.clone()]));
        let both = BTreeSet::from([1, 2]);
        assert_eq!(
            first.submissions(&both).map(|s| s.env).collect::<Vec<_>>(),
            vec![env.clone(), env.clone()]
        );
        assert_eq!(job_news(&log), 0, "the JOB_NEW was pruned");
        step(&mut mbd, &log, 4_000, Input::Start);
        let (again, second) = snapshot(&mbd, &log);
        assert_eq!(again, first);
        let found = submissions(&log, &BTreeSet::from([1])).expect("reads");
        assert_eq!(
            found.iter().map(|s| (s.request_id, s.env.clone())).collect::<Vec<_>>(),
            vec![(request_id, env)]
        );
        assert!(submissions(&log, &BTreeSet::from([3])).expect("reads").is_empty());

        let mut restored = Mbd::from_snapshot(config(), second).expect("loads");
        let action = wire::JobControlAction::Requeue {
            done: false,
            exit: true,
            running: false,
            pending: false,
            hold: false,
        };
        let request = wire::JobControlRequest { jobs: vec![job], action };
        let request_id = wire::RequestId { high: 2, low: 2 };
        let input =
            Input::Requeue { client: ClientId(2), request_id, caller: caller(), request, submissions: found };
        let effects = step(&mut restored, &log, 5_000, input);
        let answered = effects.iter().any(|effect| {
            matches!(effect, Effect::Reply { reply: ClientReply::JobControl(reply), .. }
                if reply.results.iter().all(|r| r.done && r.message == "Job <1> is being requeued"))
        });
        assert!(answered, "{effects:?}");
    }
}
