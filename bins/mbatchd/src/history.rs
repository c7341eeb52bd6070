//! `bhist`'s HISTORY_QUERY, answered from the event log itself; and the
//! submissions `brequeue` needs ([`submissions`]), read the same way.
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
use std::collections::BTreeSet;

use lava_mbd::{Caller, Event, HistoryBuilder, LoggedSubmission};

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

/// The environments the JOB_NEW records of jobs `ids` logged, for `brequeue`: a
/// finished job no longer holds its own. A job whose JOB_NEW a snapshot let the
/// log prune is not found (the logic then refuses to requeue it).
pub(crate) fn submissions(log: &EventLog, ids: &BTreeSet<u32>) -> Result<Vec<LoggedSubmission>, String> {
    let mut found = Vec::new();
    for_each_event(log, |event| {
        if let Event::JobNew(record) = event
            && ids.contains(&record.job.id())
        {
            let env = record.spec.request().env.clone();
            found.push(LoggedSubmission { job: record.job, request_id: record.request_id, env });
        }
    })?;
    Ok(found)
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
