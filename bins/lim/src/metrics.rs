//! lim's metrics (`LAVA_LIM_METRICS_PORT`; lava-shell's `metrics` serves them): the figures
//! of `lsadmin showstatus` ([`crate::admin_counters`]), read under the state's lock at scrape
//! time, under Prometheus names. Its role and (on the master) hosts by status are gauges;
//! datagrams, queries and host-fact questions are counters.

use lava_lim_logic::{HostStatus, Lim};
use lava_shell::metrics::{Kind, Metrics, Rule};

use crate::ShellCounters;

/// The counters of [`crate::admin_counters`], by name.
pub const RULES: [Rule; 10] = [
    Rule::new(
        "datagrams.received.",
        Kind::CounterBy("operation"),
        "lavacore_lim_datagrams_received_total",
        "Datagrams received that decoded, by operation.",
    ),
    Rule::new(
        "datagrams.accepted",
        Kind::Counter,
        "lavacore_lim_datagrams_accepted_total",
        "Datagrams the logic accepted.",
    ),
    Rule::new(
        "datagrams.dropped.",
        Kind::CounterBy("reason"),
        "lavacore_lim_datagrams_dropped_total",
        "Datagrams dropped, by reason.",
    ),
    Rule::new(
        "datagrams.sent.",
        Kind::CounterBy("operation"),
        "lavacore_lim_datagrams_sent_total",
        "Datagrams handed to the kernel, by operation.",
    ),
    Rule::new(
        "datagrams.send_failed",
        Kind::Counter,
        "lavacore_lim_datagrams_send_failed_total",
        "Datagrams the kernel refused to send.",
    ),
    Rule::new(
        "queries.refused",
        Kind::Counter,
        "lavacore_lim_queries_refused_total",
        "TCP queries refused (unknown operation or version, a master query to a slave).",
    ),
    Rule::new(
        "queries.",
        Kind::CounterBy("kind"),
        "lavacore_lim_queries_total",
        "TCP queries answered, by kind.",
    ),
    Rule::new(
        "connections.refused",
        Kind::Counter,
        "lavacore_lim_connections_refused_total",
        "Query connections refused at the gate.",
    ),
    Rule::new(
        "host_info.asked",
        Kind::Counter,
        "lavacore_lim_host_info_asked_total",
        "Host-fact questions asked of other lims.",
    ),
    Rule::new(
        "host_info.failed",
        Kind::Counter,
        "lavacore_lim_host_info_failed_total",
        "Host-fact questions that failed.",
    ),
];

/// The metrics of one scrape.
pub fn metrics(lim: &Lim, counters: &ShellCounters) -> Metrics {
    let mut metrics = Metrics::new();
    metrics.gauge("lavacore_lim_master", "1 while this lim is the master.", &[], u64::from(lim.is_master()));
    if lim.is_master() {
        let hosts = lim.hosts();
        let ok = hosts.iter().filter(|host| host.status == HostStatus::Ok).count() as u64;
        let help = "Hosts by status, as the master lim sees them (only the master has them).";
        metrics.gauge("lavacore_lim_hosts", help, &[("state", "ok")], ok);
        metrics.gauge("lavacore_lim_hosts", help, &[("state", "unavail")], hosts.len() as u64 - ok);
    } else {
        metrics.gauge(
            "lavacore_lim_master_heard",
            "1 while this slave hears a master's beacons.",
            &[],
            u64::from(lim.master_valid()),
        );
    }
    let all = crate::admin_counters(lim, counters);
    let unknown = metrics.status(&RULES, all.iter().map(|(name, value)| (name.as_str(), *value)));
    if !unknown.is_empty() {
        tracing::debug!(?unknown, "status counters without a metric");
    }
    metrics
}

#[cfg(test)]
mod tests {
    use super::*;
    use lava_lim_logic::{Config, HostConfig, Thresholds};

    // Goal: every counter of `lsadmin showstatus` has a metric; the master shows its hosts.
    #[test]
    fn every_status_counter_has_a_metric() {
        let host = |name: &str, port| HostConfig {
            name: name.to_owned(),
            addr: Some(std::net::SocketAddr::from(([127, 0, 0, 1], port))),
        };
        let mut lim = Lim::new(Config {
            cluster: "c".to_owned(),
            hosts: vec![host("a", 7000), host("b", 7001)],
            candidates: vec![0],
            me: 0,
            beacon_interval_ms: 1000,
            report_interval_ms: 1000,
            tcp_port: 7000,
            initial_seqno: 1,
            thresholds: Thresholds::NONE,
        });
        // The only candidate is master from its first step.
        lim.step(0, lava_lim_logic::Input::Tick);
        let counters = ShellCounters::default();
        let all = crate::admin_counters(&lim, &counters);
        let mut probe = Metrics::new();
        let unknown = probe.status(&RULES, all.iter().map(|(name, value)| (name.as_str(), *value)));
        assert!(unknown.is_empty(), "status counters without a metric: {unknown:?}");
        let metrics = metrics(&lim, &counters);
        assert_eq!(metrics.value("lavacore_lim_master", &[]), Some(1.0));
        let hosts = ["ok", "unavail"].map(|state| metrics.value("lavacore_lim_hosts", &[("state", state)]));
        assert_eq!(hosts.iter().flatten().sum::<f64>(), 2.0, "{hosts:?}");
        assert_eq!(metrics.value("lavacore_lim_queries_refused_total", &[]), Some(0.0));
    }
}
