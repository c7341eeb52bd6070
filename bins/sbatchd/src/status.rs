//! sbatchd's status query (`lsadmin sbdstatus`): what the daemon counts and how a request on
//! the local socket reaches the event loop.
//!
//! A SBD_STATUS_QUERY frame on the credential socket ([`crate::credential`]) is handed to the
//! event loop as a [`StatusRequest`]; the loop answers from its own state (the logic's job
//! records, the shepherds it watches, its [`LoopCounters`]) and the socket's
//! [`SocketCounters`], so nothing is computed on the hot path and no lock is shared with it.
//! This module only counts and formats; it never changes a job's state.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use lava_batch_wire::{self as wire, Operation, WireJobRef};
use tokio::sync::oneshot;

/// A status request from the socket: the loop sends the reply back on it.
pub type StatusRequest = oneshot::Sender<wire::SbdStatusReply>;

/// What the credential socket counts (shared with its connection tasks).
#[derive(Debug, Default)]
pub struct SocketCounters {
    /// Credentials sealed and sent.
    pub credentials_issued: AtomicU64,
    /// Credential requests refused (no account for the caller's uid, no randomness).
    pub credentials_refused: AtomicU64,
    /// Requests refused as malformed (another version, an unknown operation).
    pub requests_refused: AtomicU64,
    /// Status queries answered.
    pub status_queries: AtomicU64,
    /// Connections refused at the gate (a uid at its cap with no idle connection, or full).
    pub connections_refused: AtomicU64,
    /// Credential requests that waited for their uid's rate.
    pub credentials_delayed: AtomicU64,
}

/// Adds one to a shared counter.
pub fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// The messages to mbatchd whose resends are counted (each is sent again until acknowledged).
pub const RESENT_OPERATIONS: [Operation; 3] =
    [Operation::NewJobReply, Operation::JobExecute, Operation::JobFinish];
/// Every message sbatchd sends to mbatchd, counted by operation.
pub const SENT_OPERATIONS: [Operation; 4] =
    [Operation::NewJobReply, Operation::JobExecute, Operation::JobFinish, Operation::JobSignalReply];

/// What the event loop counts.
#[derive(Debug, Default)]
pub struct LoopCounters {
    /// Messages handed to the link, by [`SENT_OPERATIONS`] index.
    pub sent: [u64; SENT_OPERATIONS.len()],
    /// Messages sent again for the same job, by [`RESENT_OPERATIONS`] index.
    pub resent: [u64; RESENT_OPERATIONS.len()],
    /// `(RESENT_OPERATIONS index, job)` already sent once; pruned when the job's record goes.
    seen: BTreeSet<(usize, WireJobRef)>,
    /// Group commits of the record store, records written, records removed.
    pub commits: u64,
    /// Records written (Persist).
    pub persists: u64,
    /// Records removed.
    pub removes: u64,
    /// Total and longest time spent in a group commit, microseconds.
    pub commit_us_total: u64,
    /// Longest group commit, microseconds.
    pub commit_us_max: u64,
    /// Group commits by latency bucket, for the metrics' histogram.
    pub commit_buckets: lava_shell::metrics::LatencyBuckets,
    /// Shepherds started by this sbatchd.
    pub launches: u64,
    /// Registrations with mbatchd (the first connection and every reconnection).
    pub connects: u64,
    /// Connections to mbatchd lost.
    pub disconnects: u64,
    /// Whether the link is registered now.
    pub connected: bool,
    /// Since when the link is in its current state, seconds since the epoch.
    pub link_since: i64,
}

impl LoopCounters {
    /// Nothing counted yet; the link is down since `now` (seconds since the epoch).
    pub fn new(now: i64) -> LoopCounters {
        LoopCounters { link_since: now, ..LoopCounters::default() }
    }

    /// Counts one message for `job` with this operation, as a resend when it was sent before.
    pub fn on_send(&mut self, operation: Operation, job: WireJobRef) {
        if let Some(idx) = SENT_OPERATIONS.iter().position(|op| *op == operation) {
            self.sent[idx] += 1;
        }
        if let Some(idx) = RESENT_OPERATIONS.iter().position(|op| *op == operation)
            && !self.seen.insert((idx, job))
        {
            self.resent[idx] += 1;
        }
    }

    /// The job's record is gone: forget what was sent about it.
    pub fn forget(&mut self, job: WireJobRef) {
        for idx in 0..RESENT_OPERATIONS.len() {
            self.seen.remove(&(idx, job));
        }
    }

    /// One group commit of `persists` records and `removes` removals that took `micros`.
    pub fn on_commit(&mut self, persists: u64, removes: u64, micros: u64) {
        self.commits += 1;
        self.persists += persists;
        self.removes += removes;
        self.commit_us_total += micros;
        self.commit_us_max = self.commit_us_max.max(micros);
        self.commit_buckets.observe(micros);
    }

    /// The link changed state at `now` (seconds since the epoch).
    pub fn on_link(&mut self, connected: bool, now: i64) {
        if connected {
            self.connects += 1;
        } else {
            self.disconnects += 1;
        }
        self.connected = connected;
        self.link_since = now;
    }
}

/// Jobs by phase, as `lsadmin sbdstatus` prints them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct JobPhases {
    /// Launched, no process reported yet.
    pub starting: u64,
    /// Pid (or refusal) reported, NEW_JOB_REPLY not yet acknowledged.
    pub awaiting_reply_ack: u64,
    /// Process alive.
    pub running: u64,
    /// Exit captured, FINISH not yet acknowledged.
    pub exited_awaiting_finish_ack: u64,
    /// Everything said; kept to recognise a late duplicate NEW_JOB.
    pub tombstones: u64,
}

impl JobPhases {
    /// Counts the records; a job counts in every phase it is in (a running job may still
    /// await its reply's ACK).
    pub fn of<'a>(records: impl Iterator<Item = &'a lava_sbd::JobRecord>) -> JobPhases {
        let mut phases = JobPhases::default();
        for record in records {
            phases.starting += u64::from(record.is_awaiting_spawn());
            phases.awaiting_reply_ack += u64::from(record.reply_due());
            phases.running += u64::from(record.is_running());
            phases.exited_awaiting_finish_ack +=
                u64::from(record.exit_status_valid && !record.finish_acked && !record.is_tombstone());
            phases.tombstones += u64::from(record.is_tombstone());
        }
        phases
    }
}

/// Every counter of the reply, in a stable order.
pub fn counters(
    phases: JobPhases,
    shepherds_alive: u64,
    loop_counters: &LoopCounters,
    fsyncs: u64,
    socket: &SocketCounters,
) -> Vec<wire::StatusCounter> {
    let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let mut out: Vec<(String, u64)> = vec![
        ("jobs.starting".into(), phases.starting),
        ("jobs.awaiting_reply_ack".into(), phases.awaiting_reply_ack),
        ("jobs.running".into(), phases.running),
        ("jobs.exited_awaiting_finish_ack".into(), phases.exited_awaiting_finish_ack),
        ("jobs.tombstones".into(), phases.tombstones),
        ("shepherds.alive".into(), shepherds_alive),
        ("shepherds.launched".into(), loop_counters.launches),
    ];
    for (op, n) in SENT_OPERATIONS.iter().zip(loop_counters.sent) {
        out.push((format!("sent.{}", op.name()), n));
    }
    for (op, n) in RESENT_OPERATIONS.iter().zip(loop_counters.resent) {
        out.push((format!("resent.{}", op.name()), n));
    }
    out.extend([
        ("store.commits".into(), loop_counters.commits),
        ("store.persists".into(), loop_counters.persists),
        ("store.removes".into(), loop_counters.removes),
        ("store.fsyncs".into(), fsyncs),
        ("store.commit_us_total".into(), loop_counters.commit_us_total),
        ("store.commit_us_max".into(), loop_counters.commit_us_max),
        ("link.connects".into(), loop_counters.connects),
        ("link.disconnects".into(), loop_counters.disconnects),
        ("credentials.issued".into(), get(&socket.credentials_issued)),
        ("credentials.refused".into(), get(&socket.credentials_refused)),
        ("socket.requests_refused".into(), get(&socket.requests_refused)),
        ("socket.status_queries".into(), get(&socket.status_queries)),
        ("socket.connections_refused".into(), get(&socket.connections_refused)),
        ("socket.credentials_delayed".into(), get(&socket.credentials_delayed)),
    ]);
    out.into_iter().map(|(name, value)| wire::StatusCounter { name, value }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a second send of the same message for the same job counts as a resend, a first
    // send for another job does not, and a forgotten job starts over.
    #[test]
    fn resends_are_repeats_per_job() {
        let job = |id| WireJobRef { job_id: id, array_index: 0 };
        let mut counters = LoopCounters::default();
        counters.on_send(Operation::NewJobReply, job(1));
        counters.on_send(Operation::NewJobReply, job(2));
        counters.on_send(Operation::NewJobReply, job(1));
        counters.on_send(Operation::JobSignalReply, job(1));
        counters.on_send(Operation::JobSignalReply, job(1));
        assert_eq!((counters.sent, counters.resent), ([3, 0, 0, 2], [1, 0, 0]));
        counters.forget(job(1));
        counters.on_send(Operation::NewJobReply, job(1));
        assert_eq!(counters.resent, [1, 0, 0]);
    }
}
