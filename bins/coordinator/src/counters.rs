//! Counters of what the shell received, refused and wrote, answered to STATS_QUERY
//! (`coordctl status` prints them under `Counters:`; docs/coordinator.md lists the names).
//!
//! Plain atomics shared by the connection tasks and the event loop; reading them never
//! blocks anyone. Task, lease and worker figures are not kept here: the status asks the logic
//! (`Coord::task_counts` and friends, read-only) when it is made.

use std::sync::atomic::{AtomicU64, Ordering};

use lava_coord_wire::{self as wire, Operation};

/// The `ERR_*` codes by name, in counter order (`refusals.NAME`); any other code counts as
/// `other`.
const ERROR_NAMES: [(u32, &str); 9] = [
    (wire::ERR_BAD_REQUEST, "bad_request"),
    (wire::ERR_UNSUPPORTED, "unsupported"),
    (wire::ERR_PAYLOAD_TOO_LARGE, "payload_too_large"),
    (wire::ERR_UNKNOWN_TASK, "unknown_task"),
    (wire::ERR_LEASE_LOST, "lease_lost"),
    (wire::ERR_TASK_FINISHED, "task_finished"),
    (wire::ERR_TRY_AGAIN, "try_again"),
    (wire::ERR_AUTH, "auth"),
    (wire::ERR_PERMISSION, "permission"),
];

/// The WAL records by name, in counter order (`wal.events.NAME`).
const EVENT_NAMES: [&str; 8] = [
    "TaskCreated",
    "LeaseGranted",
    "LeaseExtended",
    "TaskCompleted",
    "TaskFailed",
    "TaskCancelled",
    "LeaseExpired",
    "TaskCreatedOnce",
];

/// The shell's counters; see the module doc.
#[derive(Debug, Default)]
pub struct Counters {
    requests: [AtomicU64; Operation::ALL.len()],
    requests_unknown: AtomicU64,
    refusals: [AtomicU64; ERROR_NAMES.len() + 1],
    events: [AtomicU64; EVENT_NAMES.len()],
    connections: AtomicU64,
    connections_open: AtomicU64,
    connections_refused: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    /// A request frame read (HELLO included), by its header's operation code.
    pub fn request(&self, code: u32) {
        match Operation::ALL.iter().position(|op| op.code() == code) {
            Some(idx) => bump(&self.requests[idx]),
            None => bump(&self.requests_unknown),
        }
    }

    /// A REQUEST_FAILED answer, by its error code.
    pub fn refusal(&self, code: u32) {
        let idx = ERROR_NAMES.iter().position(|(known, _)| *known == code).unwrap_or(ERROR_NAMES.len());
        bump(&self.refusals[idx]);
    }

    /// An event appended to the WAL, by its record name.
    pub fn event(&self, name: &str) {
        if let Some(idx) = EVENT_NAMES.iter().position(|known| *known == name) {
            bump(&self.events[idx]);
        }
    }

    /// An accepted connection; [`Counters::connection_closed`] when it ends.
    pub fn connection_opened(&self) {
        bump(&self.connections);
        bump(&self.connections_open);
    }

    /// A connection refused at the gate (its address at its cap, or the daemon full, with
    /// no idle connection to close in its place).
    pub fn connection_refused(&self) {
        bump(&self.connections_refused);
    }

    /// A connection ended.
    pub fn connection_closed(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    /// Every counter by name, zeros included: `requests.OPERATION` (requests only; `UNKNOWN`
    /// when non-zero), `refusals.ERR`, `wal.events.RECORD`, `leases.granted`,
    /// `leases.expired`, `connections.accepted`, `connections.open`, `connections.refused`.
    pub fn snapshot(&self) -> Vec<(String, u64)> {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let mut all = Vec::new();
        for (op, counter) in Operation::ALL.iter().zip(&self.requests) {
            if wire::decode_request(op.code(), &[], &lava_xdr::Limits::DEFAULT)
                .is_err_and(|error| matches!(error, wire::DecodeError::Operation { .. }))
            {
                continue; // an answer's opcode
            }
            all.push((format!("requests.{}", op.name()), load(counter)));
        }
        if load(&self.requests_unknown) > 0 {
            all.push(("requests.UNKNOWN".to_owned(), load(&self.requests_unknown)));
        }
        for ((_, name), counter) in ERROR_NAMES.iter().zip(&self.refusals) {
            all.push((format!("refusals.{name}"), load(counter)));
        }
        all.push(("refusals.other".to_owned(), load(&self.refusals[ERROR_NAMES.len()])));
        for (name, counter) in EVENT_NAMES.iter().zip(&self.events) {
            all.push((format!("wal.events.{name}"), load(counter)));
        }
        all.push(("leases.granted".to_owned(), load(&self.events[1])));
        all.push(("leases.expired".to_owned(), load(&self.events[6])));
        all.push(("connections.accepted".to_owned(), load(&self.connections)));
        all.push(("connections.open".to_owned(), load(&self.connections_open)));
        all.push(("connections.refused".to_owned(), load(&self.connections_refused)));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(counters: &Counters, name: &str) -> Option<u64> {
        counters.snapshot().into_iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    // Goal: requests count under their protocol name (answers' opcodes are not listed),
    // refusals under their code's name, records under their name and the lease aliases.
    #[test]
    fn counts_by_operation_code_and_record() {
        let counters = Counters::default();
        counters.request(Operation::SubmitTask.code());
        counters.request(Operation::SubmitTask.code());
        counters.request(999);
        counters.refusal(wire::ERR_AUTH);
        counters.refusal(77);
        counters.event("LeaseGranted");
        assert_eq!(value(&counters, "requests.SUBMIT_TASK"), Some(2));
        assert_eq!(value(&counters, "requests.STATS_QUERY"), Some(0));
        assert_eq!(value(&counters, "requests.UNKNOWN"), Some(1));
        assert_eq!(value(&counters, "requests.SUBMIT_TASK_REPLY"), None);
        assert_eq!(value(&counters, "refusals.auth"), Some(1));
        assert_eq!(value(&counters, "refusals.other"), Some(1));
        assert_eq!(value(&counters, "wal.events.LeaseGranted"), Some(1));
        assert_eq!(value(&counters, "leases.granted"), Some(1));
        assert_eq!(value(&counters, "leases.expired"), Some(0));
    }
}
