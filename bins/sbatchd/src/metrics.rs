//! sbatchd's metrics (`LAVA_SBD_METRICS_PORT`; lava-shell's `metrics` serves them): the
//! figures of `lsadmin sbdstatus`, taken by the loop at scrape time, under Prometheus names.
//! Jobs by phase and shepherds alive are gauges; messages, record writes, the link's
//! reconnections and credentials are counters; the record store's commits are a latency
//! histogram.

use lava_batch_wire::SbdStatusReply;
use lava_shell::metrics::{Kind, Metrics, Rule};

use crate::status::LoopCounters;

/// The status counters of [`SbdStatusReply::counters`], by name (`crate::status::counters`).
pub const RULES: [Rule; 18] = [
    Rule::new(
        "jobs.",
        Kind::GaugeBy("phase"),
        "lavacore_sbatchd_jobs",
        "Job records by phase (a job may be in two).",
    ),
    Rule::new("shepherds.alive", Kind::Gauge, "lavacore_sbatchd_shepherds_alive", "Shepherds running now."),
    Rule::new(
        "shepherds.launched",
        Kind::Counter,
        "lavacore_sbatchd_shepherds_launched_total",
        "Shepherds started by this sbatchd.",
    ),
    Rule::new(
        "sent.",
        Kind::CounterBy("operation"),
        "lavacore_sbatchd_messages_sent_total",
        "Messages to mbatchd, by operation.",
    ),
    Rule::new(
        "resent.",
        Kind::CounterBy("operation"),
        "lavacore_sbatchd_messages_resent_total",
        "Messages sent again for the same job until acknowledged, by operation.",
    ),
    // The histogram below counts and sums the commits.
    Rule::new("store.commits", Kind::Skip, "", ""),
    Rule::new("store.commit_us_total", Kind::Skip, "", ""),
    Rule::new(
        "store.persists",
        Kind::Counter,
        "lavacore_sbatchd_records_persisted_total",
        "Job records written.",
    ),
    Rule::new(
        "store.removes",
        Kind::Counter,
        "lavacore_sbatchd_records_removed_total",
        "Job records removed.",
    ),
    Rule::new(
        "store.fsyncs",
        Kind::Counter,
        "lavacore_sbatchd_store_fsyncs_total",
        "fsyncs of the record store.",
    ),
    Rule::new(
        "store.commit_us_max",
        Kind::GaugeSeconds,
        "lavacore_sbatchd_store_commit_max_seconds",
        "The longest commit of the record store since the start.",
    ),
    Rule::new(
        "link.connects",
        Kind::Counter,
        "lavacore_sbatchd_link_connects_total",
        "Registrations with mbatchd.",
    ),
    Rule::new(
        "link.disconnects",
        Kind::Counter,
        "lavacore_sbatchd_link_disconnects_total",
        "Connections to mbatchd lost.",
    ),
    Rule::new(
        "credentials.issued",
        Kind::Counter,
        "lavacore_sbatchd_credentials_issued_total",
        "User credentials sealed and sent.",
    ),
    Rule::new(
        "credentials.refused",
        Kind::Counter,
        "lavacore_sbatchd_credentials_refused_total",
        "Credential requests refused.",
    ),
    Rule::new(
        "socket.credentials_delayed",
        Kind::Counter,
        "lavacore_sbatchd_credentials_delayed_total",
        "Credential requests that waited for their uid's rate.",
    ),
    Rule::new(
        "socket.status_queries",
        Kind::Counter,
        "lavacore_sbatchd_status_queries_total",
        "Status queries answered on the local socket.",
    ),
    Rule::new(
        "socket.",
        Kind::CounterBy("reason"),
        "lavacore_sbatchd_socket_refusals_total",
        "Requests (requests_refused) and connections (connections_refused) refused on the local socket.",
    ),
];

/// The metrics of one scrape, from `lsadmin sbdstatus`'s answer and the loop's commits.
pub fn metrics(status: &SbdStatusReply, counters: &LoopCounters) -> Metrics {
    let mut metrics = Metrics::new();
    metrics.gauge(
        "lavacore_sbatchd_connected",
        "1 while mbatchd has acknowledged this sbatchd's registration.",
        &[],
        u64::from(status.connected),
    );
    metrics.gauge(
        "lavacore_sbatchd_start_time_seconds",
        "When this sbatchd started, in seconds since the epoch.",
        &[],
        u64::try_from(status.started_at).unwrap_or(0),
    );
    let unknown = metrics.status(&RULES, status.counters.iter().map(|c| (c.name.as_str(), c.value)));
    if !unknown.is_empty() {
        tracing::debug!(?unknown, "status counters without a metric");
    }
    metrics.histogram_seconds(
        "lavacore_sbatchd_store_commit_seconds",
        "Commits (write and fsync) of the job record store.",
        &[],
        &counters.commit_buckets,
        counters.commit_us_total,
    );
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{JobPhases, SocketCounters, counters};

    // Goal: every counter of the status has a metric, and the socket's refusals are labelled
    // by reason while its other counters keep their own names.
    #[test]
    fn every_status_counter_has_a_metric() {
        let mut loop_counters = LoopCounters::new(0);
        loop_counters.on_commit(2, 1, 300);
        let all = counters(JobPhases::default(), 1, &loop_counters, 4, &SocketCounters::default());
        let mut probe = Metrics::new();
        let unknown = probe.status(&RULES, all.iter().map(|c| (c.name.as_str(), c.value)));
        assert!(unknown.is_empty(), "status counters without a metric: {unknown:?}");
        let status = SbdStatusReply {
            host: "h".into(),
            master_name: "m".into(),
            pid: 1,
            started_at: 2,
            connected: true,
            link_since: 2,
            counters: all,
        };
        let metrics = metrics(&status, &loop_counters);
        assert_eq!(
            metrics.value("lavacore_sbatchd_socket_refusals_total", &[("reason", "connections_refused")]),
            Some(0.0)
        );
        assert_eq!(metrics.value("lavacore_sbatchd_status_queries_total", &[]), Some(0.0));
        assert_eq!(metrics.value("lavacore_sbatchd_records_persisted_total", &[]), Some(2.0));
        assert_eq!(metrics.value("lavacore_sbatchd_store_commit_seconds", &[]), Some(1.0));
        assert_eq!(metrics.value("lavacore_sbatchd_connected", &[]), Some(1.0));
    }
}
