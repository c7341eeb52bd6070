//! The coordinator's metrics (`LAVA_COORD_METRICS_PORT`; lava-shell's `metrics` serves
//! them): the figures of `coordctl status` (docs/coordinator.md lists them), taken by the
//! loop at scrape time, under Prometheus names. Requests, refusals, WAL records, appends and
//! fsyncs, leases granted and expired are counters; tasks by state, valid leases, workers,
//! the WAL's size and the queues are gauges; the WAL's group commits are a latency histogram.

use lava_coord_wire as wire;
use lava_shell::group_commit::SyncStats;
use lava_shell::metrics::{Kind, Metrics, Rule};

/// The names of STATS_REPLY's counters, in the order each is looked for.
pub const RULES: [Rule; 24] = [
    Rule::new(
        "requests.",
        Kind::CounterBy("operation"),
        "lavacore_coordinator_requests_total",
        "Requests read, by operation.",
    ),
    Rule::new(
        "refusals.",
        Kind::CounterBy("code"),
        "lavacore_coordinator_refusals_total",
        "REQUEST_FAILED answers, by error code.",
    ),
    Rule::new(
        "wal.events.",
        Kind::CounterBy("record"),
        "lavacore_coordinator_wal_records_total",
        "Records appended to the WAL, by kind.",
    ),
    Rule::new(
        "leases.granted",
        Kind::Counter,
        "lavacore_coordinator_leases_granted_total",
        "Leases granted.",
    ),
    Rule::new(
        "leases.expired",
        Kind::Counter,
        "lavacore_coordinator_leases_expired_total",
        "Leases that ran out.",
    ),
    Rule::new("leases.valid", Kind::Gauge, "lavacore_coordinator_leases_valid", "Leases valid now."),
    Rule::new(
        "connections.accepted",
        Kind::Counter,
        "lavacore_coordinator_connections_accepted_total",
        "Connections accepted.",
    ),
    Rule::new(
        "connections.open",
        Kind::Gauge,
        "lavacore_coordinator_connections_open",
        "Connections open now.",
    ),
    Rule::new(
        "connections.refused",
        Kind::Counter,
        "lavacore_coordinator_connections_refused_total",
        "Connections refused at the gate.",
    ),
    Rule::new(
        "tasks.total",
        Kind::Gauge,
        "lavacore_coordinator_tasks_known",
        "Tasks the coordinator holds, in all.",
    ),
    Rule::new("tasks.", Kind::GaugeBy("state"), "lavacore_coordinator_tasks", "Tasks by state."),
    Rule::new("workers.known", Kind::Gauge, "lavacore_coordinator_workers_known", "Workers known."),
    Rule::new(
        "submissions.held",
        Kind::Gauge,
        "lavacore_coordinator_submission_ids_held",
        "Submission ids held in the window (a retry under one gets its first task).",
    ),
    Rule::new(
        "wal.appends",
        Kind::Counter,
        "lavacore_coordinator_wal_appends_total",
        "Records appended to the WAL.",
    ),
    Rule::new("wal.fsyncs", Kind::Counter, "lavacore_coordinator_wal_fsyncs_total", "fsyncs of the WAL."),
    // The histogram below counts and sums the group commits.
    Rule::new("wal.group_commits", Kind::Skip, "", ""),
    Rule::new("wal.group_commit_us_mean", Kind::Skip, "", ""),
    Rule::new(
        "wal.group_commit_us_max",
        Kind::GaugeSeconds,
        "lavacore_coordinator_wal_group_commit_max_seconds",
        "The longest group commit (write and fsync) of the WAL since the start.",
    ),
    Rule::new(
        "wal.events_per_group_commit",
        Kind::Gauge,
        "lavacore_coordinator_wal_records_per_group_commit",
        "Records made durable per group commit, on average.",
    ),
    Rule::new(
        "wal.appended_through",
        Kind::Gauge,
        "lavacore_coordinator_wal_appended_position",
        "The position of the last record appended.",
    ),
    Rule::new(
        "wal.durable_through",
        Kind::Gauge,
        "lavacore_coordinator_wal_durable_position",
        "Every record up to this position is durable.",
    ),
    Rule::new("wal.segments", Kind::Gauge, "lavacore_coordinator_wal_segments", "WAL segment files."),
    Rule::new(
        "wal.",
        Kind::GaugeBy("what"),
        "lavacore_coordinator_wal_bytes",
        "The WAL's bytes: segment_bytes (segments), disk_bytes (segments and snapshots).",
    ),
    Rule::new(
        "queue.",
        Kind::GaugeBy("queue"),
        "lavacore_coordinator_queue_depth",
        "Queue depths: requests queued, answers held for durability, both.",
    ),
];

/// The metrics of one scrape, from STATS_REPLY's counters and the WAL's group commits.
pub fn metrics(stats: &[wire::Counter], sync: &SyncStats) -> Metrics {
    let mut metrics = Metrics::new();
    let unknown = metrics.status(&RULES, stats.iter().map(|counter| (counter.name.as_str(), counter.value)));
    if !unknown.is_empty() {
        tracing::debug!(?unknown, "status counters without a metric");
    }
    metrics.histogram_seconds(
        "lavacore_coordinator_wal_group_commit_seconds",
        "Group commits (write and fsync) of the WAL.",
        &[],
        &sync.buckets,
        sync.total_us,
    );
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::Counters;

    // Goal: every counter of STATS_REPLY has a metric (the gauges `Loop::stats` adds are
    // listed here as it names them), and the WAL's sizes are told apart by label.
    #[test]
    fn every_status_counter_has_a_metric() {
        let mut all = Counters::default().snapshot();
        for name in [
            "tasks.waiting",
            "tasks.leased",
            "tasks.completed",
            "tasks.failed",
            "tasks.total",
            "leases.valid",
            "workers.known",
            "submissions.held",
            "wal.appends",
            "wal.fsyncs",
            "wal.group_commits",
            "wal.group_commit_us_mean",
            "wal.group_commit_us_max",
            "wal.events_per_group_commit",
            "wal.appended_through",
            "wal.durable_through",
            "wal.segment_bytes",
            "wal.segments",
            "wal.disk_bytes",
            "queue.requests_queued",
            "queue.answers_held",
            "queue.in_flight",
        ] {
            all.push((name.to_owned(), 2));
        }
        let stats: Vec<wire::Counter> =
            all.into_iter().map(|(name, value)| wire::Counter { name, value }).collect();
        let mut probe = Metrics::new();
        let unknown = probe.status(&RULES, stats.iter().map(|c| (c.name.as_str(), c.value)));
        assert!(unknown.is_empty(), "status counters without a metric: {unknown:?}");
        let metrics = metrics(&stats, &SyncStats::default());
        assert_eq!(metrics.value("lavacore_coordinator_wal_bytes", &[("what", "disk_bytes")]), Some(2.0));
        assert_eq!(metrics.value("lavacore_coordinator_tasks", &[("state", "leased")]), Some(2.0));
        assert_eq!(metrics.value("lavacore_coordinator_tasks_known", &[]), Some(2.0));
        assert_eq!(metrics.value("lavacore_coordinator_leases_granted_total", &[]), Some(0.0));
    }
}
