//! `bhist`'s HISTORY_QUERY, answered from the event log itself.
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
use lava_mbd::{Caller, Event, HistoryBuilder};

use crate::codec::EVENT_LIMITS;

/// The page of histories `query` asks `caller` for, or why the log could not be read.
pub(crate) fn answer(
    log: &EventLog,
    query: wire::HistoryQuery,
    caller: &Caller,
) -> Result<wire::HistoryReply, String> {
    let records = match log.replay_from(Position::FIRST) {
        Err(lava_eventlog::Error::Pruned { first_available, .. }) => log.replay_from(first_available),
        other => other,
    }
    .map_err(|error| format!("cannot read the event log: {error}"))?;
    let mut builder = HistoryBuilder::new(query, caller);
    for record in records {
        let (position, payload) = record.map_err(|error| format!("cannot read the event log: {error}"))?;
        let event: Event = lava_xdr::from_bytes(&payload, &EVENT_LIMITS)
            .map_err(|error| format!("event log record {} does not decode: {error}", position.0))?;
        builder.add(&event);
    }
    Ok(builder.finish())
}
