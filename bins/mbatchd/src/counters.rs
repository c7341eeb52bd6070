//! Counters of what the shell received and refused, kept for a later status
//! command (and logged at shutdown): frames by operation, rejected input by
//! reason, connections, messages dropped because a channel was full, and jobs
//! finished (DONE, EXIT) since this mbatchd started.
//!
//! Plain atomics shared by the connection tasks and the event loop; reading
//! them never blocks anyone.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use lava_batch_wire::Operation;

/// Why input was refused; each is a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reject {
    /// A frame that could not be read: oversized length, truncated, socket error.
    Frame,
    /// A frame of a protocol version we do not speak.
    Version,
    /// An operation that is unknown or not accepted on this kind of connection.
    Operation,
    /// A body that does not decode as the operation's structure.
    Body,
    /// A command whose credential failed verification.
    Credential,
    /// An sbatchd frame that failed cluster-key authentication.
    SbdAuth,
    /// An sbatchd registration naming a host that is not a server host of the cluster.
    UnknownHost,
    /// A well-formed message refused by structural validation (`lava-batch-ll`).
    Invalid,
    /// A connection that sent nothing in time.
    Timeout,
    /// A connection closed before its first request to make room (lava-net's gate).
    Evicted,
    /// A connection refused at the gate: its address at its cap, or mbatchd full, with no
    /// connection waiting for its first request to close instead.
    Refused,
}

impl Reject {
    /// Every reason, in counter order.
    pub const ALL: [Reject; 11] = [
        Reject::Frame,
        Reject::Version,
        Reject::Operation,
        Reject::Body,
        Reject::Credential,
        Reject::SbdAuth,
        Reject::UnknownHost,
        Reject::Invalid,
        Reject::Timeout,
        Reject::Evicted,
        Reject::Refused,
    ];

    /// The counter's name.
    pub fn name(self) -> &'static str {
        match self {
            Reject::Frame => "frame",
            Reject::Version => "version",
            Reject::Operation => "operation",
            Reject::Body => "body",
            Reject::Credential => "credential",
            Reject::SbdAuth => "sbd_auth",
            Reject::UnknownHost => "unknown_host",
            Reject::Invalid => "invalid",
            Reject::Timeout => "timeout",
            Reject::Evicted => "evicted",
            Reject::Refused => "refused",
        }
    }

    fn index(self) -> usize {
        Reject::ALL.iter().position(|reason| *reason == self).expect("ALL lists every reason")
    }
}

/// The shell's counters; see the module doc.
#[derive(Debug)]
pub struct Counters {
    frames_by_operation: [AtomicU64; Operation::ALL.len()],
    frames_unknown_operation: AtomicU64,
    rejects: [AtomicU64; Reject::ALL.len()],
    connections: AtomicU64,
    sbd_messages_dropped: AtomicU64,
    /// Jobs that finished: DONE, EXIT.
    jobs_finished: [AtomicU64; 2],
}

// By hand: `Default` is derived for arrays of at most 32 elements only.
impl Default for Counters {
    fn default() -> Counters {
        Counters {
            frames_by_operation: std::array::from_fn(|_| AtomicU64::new(0)),
            frames_unknown_operation: AtomicU64::new(0),
            rejects: Default::default(),
            connections: AtomicU64::new(0),
            sbd_messages_dropped: AtomicU64::new(0),
            jobs_finished: Default::default(),
        }
    }
}

impl Counters {
    /// Counts a received frame by its header's operation code.
    pub fn frame(&self, code: u32) {
        match Operation::ALL.iter().position(|op| op.code() == code) {
            Some(idx) => self.frames_by_operation[idx].fetch_add(1, Ordering::Relaxed),
            None => self.frames_unknown_operation.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// Counts refused input.
    pub fn reject(&self, reason: Reject) {
        self.rejects[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an accepted connection.
    pub fn connection(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a message to sbatchd dropped because its channel's queue was full.
    pub fn sbd_message_dropped(&self) {
        self.sbd_messages_dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a job that finished (its DONE or EXIT appended to the log): `done` or not.
    pub fn job_finished(&self, done: bool) {
        self.jobs_finished[usize::from(!done)].fetch_add(1, Ordering::Relaxed);
    }

    /// Every non-zero counter by name: `frames.OPERATION`, `rejects.REASON`,
    /// `connections`, `sbd_messages_dropped`, `jobs_finished.done`, `jobs_finished.exit`.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        let mut all = BTreeMap::new();
        let mut put = |name: String, counter: &AtomicU64| {
            let value = counter.load(Ordering::Relaxed);
            if value > 0 {
                all.insert(name, value);
            }
        };
        for (op, counter) in Operation::ALL.iter().zip(&self.frames_by_operation) {
            put(format!("frames.{}", op.name()), counter);
        }
        put("frames.UNKNOWN".to_owned(), &self.frames_unknown_operation);
        for (reason, counter) in Reject::ALL.iter().zip(&self.rejects) {
            put(format!("rejects.{}", reason.name()), counter);
        }
        put("connections".to_owned(), &self.connections);
        put("sbd_messages_dropped".to_owned(), &self.sbd_messages_dropped);
        put("jobs_finished.done".to_owned(), &self.jobs_finished[0]);
        put("jobs_finished.exit".to_owned(), &self.jobs_finished[1]);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: frames count under their protocol name, unknown codes apart, and
    // zero counters stay out of the snapshot.
    #[test]
    fn counts_by_operation_and_reason() {
        let counters = Counters::default();
        counters.frame(Operation::SubmitJob.code());
        counters.frame(Operation::SubmitJob.code());
        counters.frame(999);
        counters.reject(Reject::Credential);
        let snapshot = counters.snapshot();
        assert_eq!(snapshot.get("frames.SUBMIT_JOB"), Some(&2));
        assert_eq!(snapshot.get("frames.UNKNOWN"), Some(&1));
        assert_eq!(snapshot.get("rejects.credential"), Some(&1));
        assert_eq!(snapshot.len(), 3);
    }
}
