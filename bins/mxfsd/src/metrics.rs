//! mxfsd's metrics (`LAVA_MXFSD_METRICS_PORT`; lava-shell's `metrics` serves them): the
//! counters and gauges of `mxfsctl status` (docs/mxfsd.md lists them), taken by the loop at
//! scrape time, under Prometheus names. Frames, refusals, client requests and BASTs are
//! counters; the lock table by state and mode, nodes and peers by state, and the queues are
//! gauges.

use lava_shell::metrics::{Kind, Metrics, Rule};

/// The names of `mxfsctl status`'s counters, in the order each is looked for.
pub(crate) const RULES: [Rule; 21] = [
    Rule::new(
        "received.",
        Kind::CounterBy("type"),
        "lavacore_mxfsd_frames_received_total",
        "DLM frames received from other daemons, by type.",
    ),
    Rule::new(
        "sent.",
        Kind::CounterBy("type"),
        "lavacore_mxfsd_frames_sent_total",
        "DLM frames queued to other daemons, by type.",
    ),
    Rule::new(
        "refused.",
        Kind::CounterBy("reason"),
        "lavacore_mxfsd_frames_refused_total",
        "Daemon frames or connections refused, by reason.",
    ),
    Rule::new(
        "client_requests.",
        Kind::CounterBy("kind"),
        "lavacore_mxfsd_client_requests_total",
        "Local client requests, by kind.",
    ),
    Rule::new(
        "client_refusals.",
        Kind::CounterBy("reason"),
        "lavacore_mxfsd_client_refusals_total",
        "Local client requests refused, by reason.",
    ),
    Rule::new(
        "connections.",
        Kind::CounterBy("kind"),
        "lavacore_mxfsd_connections_accepted_total",
        "Connections accepted: peers (daemons), clients.",
    ),
    Rule::new("basts_sent", Kind::Counter, "lavacore_mxfsd_basts_sent_total", "LOCK_BASTs the master sent."),
    Rule::new(
        "bast_timeouts",
        Kind::Counter,
        "lavacore_mxfsd_bast_timeouts_total",
        "Locks the master revoked for an unanswered BAST.",
    ),
    Rule::new(
        "locks_revoked",
        Kind::Counter,
        "lavacore_mxfsd_locks_revoked_total",
        "Locks of this node's clients revoked by the master.",
    ),
    Rule::new(
        "epoch",
        Kind::Gauge,
        "lavacore_mxfsd_epoch",
        "The master's epoch this node follows (0: none).",
    ),
    Rule::new("is_master", Kind::Gauge, "lavacore_mxfsd_master", "1 while this node is the lock master."),
    Rule::new(
        "peers.connected",
        Kind::Gauge,
        "lavacore_mxfsd_peers_connected",
        "Daemon connections open now.",
    ),
    Rule::new(
        "peers.",
        Kind::GaugeBy("state"),
        "lavacore_mxfsd_peers",
        "Peers by liveness as this node sees them (lease renewals).",
    ),
    Rule::new(
        "table.resources",
        Kind::Gauge,
        "lavacore_mxfsd_lock_resources",
        "Resources in the master's lock table.",
    ),
    Rule::new(
        "table.granted.",
        Kind::GaugeBy("mode"),
        "lavacore_mxfsd_locks_granted_by_mode",
        "Granted locks in the master's table, by mode.",
    ),
    Rule::new(
        "table.",
        Kind::GaugeBy("state"),
        "lavacore_mxfsd_locks",
        "Locks in the master's table: granted, waiting, converting, fenced, revoked.",
    ),
    Rule::new(
        "nodes.",
        Kind::GaugeBy("state"),
        "lavacore_mxfsd_nodes",
        "Nodes by state in the master's node table.",
    ),
    Rule::new(
        "recoveries.pending",
        Kind::Gauge,
        "lavacore_mxfsd_recoveries_pending",
        "Journal recoveries not yet done.",
    ),
    Rule::new(
        "local.",
        Kind::GaugeBy("state"),
        "lavacore_mxfsd_local_locks",
        "This node's clients' locks: granted, waiting.",
    ),
    Rule::new(
        "clients.connected",
        Kind::Gauge,
        "lavacore_mxfsd_clients_connected",
        "Local clients connected now.",
    ),
    Rule::new("queue.", Kind::GaugeBy("queue"), "lavacore_mxfsd_queue_depth", "Queue depths of the loop."),
];

/// The metrics of one scrape, from `mxfsctl status`'s counters and gauges.
pub(crate) fn metrics(all: impl IntoIterator<Item = (String, u64)>) -> Metrics {
    let all: Vec<(String, u64)> = all.into_iter().collect();
    let mut metrics = Metrics::new();
    let unknown = metrics.status(&RULES, all.iter().map(|(name, value)| (name.as_str(), *value)));
    if !unknown.is_empty() {
        tracing::debug!(?unknown, "status counters without a metric");
    }
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::Counters;

    // Goal: every counter of `mxfsctl status` has a metric (the gauges `State::gauges` adds
    // are listed here as it names them), and labels split the families.
    #[test]
    fn every_status_counter_has_a_metric() {
        let mut all = Counters::default().snapshot();
        for name in [
            "epoch",
            "is_master",
            "peers.alive",
            "peers.dead",
            "table.resources",
            "table.granted",
            "table.waiting",
            "table.converting",
            "table.fenced",
            "table.revoked",
            "table.granted.EX",
            "nodes.alive",
            "nodes.recovering",
            "nodes.absent",
            "recoveries.pending",
            "local.granted",
            "local.waiting",
            "clients.connected",
            "peers.connected",
            "queue.master_inbox",
            "queue.backlog",
        ] {
            all.push((name.to_owned(), 3));
        }
        let mut probe = Metrics::new();
        let unknown = probe.status(&RULES, all.iter().map(|(name, value)| (name.as_str(), *value)));
        assert!(unknown.is_empty(), "status counters without a metric: {unknown:?}");
        let metrics = metrics(all);
        assert_eq!(metrics.value("lavacore_mxfsd_locks", &[("state", "granted")]), Some(3.0));
        assert_eq!(metrics.value("lavacore_mxfsd_locks_granted_by_mode", &[("mode", "EX")]), Some(3.0));
        assert_eq!(metrics.value("lavacore_mxfsd_peers_connected", &[]), Some(3.0));
        assert_eq!(metrics.value("lavacore_mxfsd_frames_refused_total", &[("reason", "auth")]), Some(0.0));
    }
}
