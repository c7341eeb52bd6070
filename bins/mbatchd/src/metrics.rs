//! mbatchd's metrics (`LAVA_MBD_METRICS_PORT`; lava-shell's `metrics` serves them): the
//! figures of `badmin showstatus`, taken by the loop at scrape time, under Prometheus names.
//! Hosts and jobs by state are gauges; jobs finished since the start, frames, refusals and the
//! event log's appends and fsyncs are counters; the group commits are a latency histogram.

use lava_batch_wire::StatusReply;
use lava_shell::group_commit::SyncStats;
use lava_shell::metrics::{Kind, Metrics, Rule};

/// The status counters of [`StatusReply::counters`], by name; docs/operations.md lists them.
pub const RULES: [Rule; 20] = [
    Rule::new(
        "frames.",
        Kind::CounterBy("operation"),
        "lavacore_mbatchd_frames_received_total",
        "Frames received from commands and sbatchds, by operation.",
    ),
    Rule::new(
        "rejects.",
        Kind::CounterBy("reason"),
        "lavacore_mbatchd_refusals_total",
        "Input refused, by reason.",
    ),
    Rule::new(
        "connections",
        Kind::Counter,
        "lavacore_mbatchd_connections_accepted_total",
        "Connections accepted.",
    ),
    Rule::new(
        "sbd_messages_dropped",
        Kind::Counter,
        "lavacore_mbatchd_sbd_messages_dropped_total",
        "Messages to an sbatchd dropped because its channel was full.",
    ),
    Rule::new(
        "jobs_finished.",
        Kind::CounterBy("status"),
        "lavacore_mbatchd_jobs_finished_total",
        "Jobs that finished since this mbatchd started, by status (done, exit).",
    ),
    Rule::new(
        "log.appends",
        Kind::Counter,
        "lavacore_mbatchd_log_appends_total",
        "Records appended to lsb.events.",
    ),
    Rule::new("log.fsyncs", Kind::Counter, "lavacore_mbatchd_log_fsyncs_total", "fsyncs of lsb.events."),
    Rule::new(
        "log.next_position",
        Kind::Gauge,
        "lavacore_mbatchd_log_next_position",
        "The position the next record of lsb.events gets.",
    ),
    Rule::new(
        "log.durable_end",
        Kind::Gauge,
        "lavacore_mbatchd_log_durable_end_position",
        "The end of what is durable in lsb.events.",
    ),
    // The histogram below counts and sums the group commits.
    Rule::new("log.group_commits", Kind::Skip, "", ""),
    Rule::new("log.group_commit_us_mean", Kind::Skip, "", ""),
    Rule::new(
        "log.group_commit_us_max",
        Kind::GaugeSeconds,
        "lavacore_mbatchd_log_group_commit_max_seconds",
        "The longest group commit (write and fsync) of lsb.events since the start.",
    ),
    Rule::new(
        "queue.",
        Kind::GaugeBy("queue"),
        "lavacore_mbatchd_queue_depth",
        "Queue depths: answers waiting for durability, requests in progress, the loop's events.",
    ),
    Rule::new("sbd.connected", Kind::Gauge, "lavacore_mbatchd_sbd_connected", "sbatchds connected now."),
    Rule::new(
        "disk.full",
        Kind::Gauge,
        "lavacore_mbatchd_disk_full",
        "1 while the event log's file system is full.",
    ),
    Rule::new(
        "disk.available_bytes",
        Kind::Gauge,
        "lavacore_mbatchd_disk_available_bytes",
        "Space left on the event log's file system.",
    ),
    Rule::new(
        "log.stalled_for_space",
        Kind::Gauge,
        "lavacore_mbatchd_log_stalled_for_space",
        "1 while the group commit waits for disk space.",
    ),
    Rule::new(
        "replica.link_",
        Kind::CounterBy("event"),
        "lavacore_mbatchd_replica_link_messages_total",
        "Messages among master candidates: sent, send_dropped, received; refused connections.",
    ),
    Rule::new(
        "replica.",
        Kind::GaugeBy("figure"),
        "lavacore_mbatchd_replica",
        "The replicated event log of a master candidate: its rank, term, the leader's rank, serving, \
         commit, applied, last and snapshot indexes, proposals outstanding, answers held, fsyncs.",
    ),
    Rule::new(
        "candidate.",
        Kind::GaugeBy("candidate"),
        "lavacore_mbatchd_candidate_log_index",
        "The log index each master candidate is known to hold (rank.name): on the leader every \
         candidate's, on another candidate its own.",
    ),
];

/// Host states of [`StatusReply::hosts`], in order.
const HOST_STATES: [&str; 4] = ["ok", "closed", "unreach", "unavail"];
/// Job states of [`StatusReply::jobs`], in order.
const JOB_STATES: [&str; 4] = ["pending", "running", "suspended", "finished"];

/// The metrics of one scrape, from `badmin showstatus`'s answer and the group commits.
pub fn metrics(status: &StatusReply, sync: &SyncStats) -> Metrics {
    let mut metrics = Metrics::new();
    for (state, n) in HOST_STATES.iter().zip(status.hosts) {
        metrics.gauge(
            "lavacore_mbatchd_hosts",
            "Execution hosts by bhosts status.",
            &[("state", state)],
            n.into(),
        );
    }
    for (state, n) in JOB_STATES.iter().zip(status.jobs) {
        metrics.gauge(
            "lavacore_mbatchd_jobs",
            "Jobs in memory by state (finished: DONE or EXIT, not yet cleaned).",
            &[("state", state)],
            n.into(),
        );
    }
    metrics.gauge(
        "lavacore_mbatchd_active_users",
        "Users with unfinished jobs.",
        &[],
        status.active_users.into(),
    );
    metrics.gauge(
        "lavacore_mbatchd_start_time_seconds",
        "When this mbatchd started, in seconds since the epoch.",
        &[],
        u64::try_from(status.started_at).unwrap_or(0),
    );
    // Present from the start (zero), so that the first finish is an increase.
    let mut counters: Vec<(&str, u64)> = vec![("jobs_finished.done", 0), ("jobs_finished.exit", 0)];
    for counter in &status.counters {
        match counters.iter_mut().find(|(name, _)| *name == counter.name) {
            Some(seeded) => seeded.1 = counter.value,
            None => counters.push((&counter.name, counter.value)),
        }
    }
    let unknown = metrics.status(&RULES, counters);
    if !unknown.is_empty() {
        tracing::debug!(?unknown, "status counters without a metric");
    }
    metrics.histogram_seconds(
        "lavacore_mbatchd_log_group_commit_seconds",
        "Group commits (write and fsync) of lsb.events.",
        &[],
        &sync.buckets,
        sync.total_us,
    );
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::{Counters, Reject};
    use lava_batch_wire::{Operation, StatusCounter};

    // Goal: every counter the status can show has a metric (those `Shell::status` adds are
    // listed here as it names them), jobs by state are labelled, and finishes start at 0.
    #[test]
    fn every_status_counter_has_a_metric() {
        let counters = Counters::default();
        for op in Operation::ALL {
            counters.frame(op.code());
        }
        counters.frame(9999);
        for reason in Reject::ALL {
            counters.reject(reason);
        }
        counters.connection();
        counters.sbd_message_dropped();
        counters.job_finished(true);
        let mut names: Vec<(String, u64)> = counters.snapshot().into_iter().collect();
        for name in [
            "log.appends",
            "log.fsyncs",
            "log.next_position",
            "log.durable_end",
            "log.group_commits",
            "log.group_commit_us_mean",
            "log.group_commit_us_max",
            "queue.replies_awaiting_durability",
            "queue.requests_in_progress",
            "queue.loop_events",
            "sbd.connected",
            "disk.full",
            "disk.available_bytes",
            "log.stalled_for_space",
            "replica.term",
            "replica.link_sent",
            "candidate.2.h2",
        ] {
            names.push((name.to_owned(), 7));
        }
        let mut probe = Metrics::new();
        let unknown = probe.status(&RULES, names.iter().map(|(name, value)| (name.as_str(), *value)));
        assert!(unknown.is_empty(), "status counters without a metric: {unknown:?}");
        let status = StatusReply {
            cluster_name: "c".into(),
            master_name: "m".into(),
            pid: 1,
            started_at: 5,
            hosts: [1, 0, 0, 2],
            jobs: [3, 1, 0, 4],
            active_users: 1,
            counters: names.into_iter().map(|(name, value)| StatusCounter { name, value }).collect(),
        };
        let metrics = metrics(&status, &SyncStats::default());
        assert_eq!(metrics.value("lavacore_mbatchd_jobs", &[("state", "finished")]), Some(4.0));
        assert_eq!(metrics.value("lavacore_mbatchd_hosts", &[("state", "unavail")]), Some(2.0));
        assert_eq!(metrics.value("lavacore_mbatchd_jobs_finished_total", &[("status", "done")]), Some(1.0));
        assert_eq!(metrics.value("lavacore_mbatchd_jobs_finished_total", &[("status", "exit")]), Some(0.0));
        assert_eq!(metrics.value("lavacore_mbatchd_queue_depth", &[("queue", "loop_events")]), Some(7.0));
        assert_eq!(metrics.value("lavacore_mbatchd_log_group_commit_max_seconds", &[]), Some(7e-6));
        let text = metrics.render();
        assert!(text.contains("lavacore_mbatchd_log_group_commit_seconds_count 0"), "{text}");
    }
}
