//! The metrics endpoint every daemon serves when lsf.conf names its port: what the daemon
//! counts, in the Prometheus text exposition format (version 0.0.4), over a small HTTP/1
//! listener that answers `GET /metrics` and nothing else (docs/operations.md, "Watching the
//! daemons").
//!
//! - [`Metrics`]: one scrape's figures (counters, gauges, latency histograms), which a daemon
//!   fills at scrape time from what its status query already shows, and
//!   [`Metrics::render`], which encodes them with `prometheus-client`. Names follow
//!   Prometheus's conventions: `lavacore_DAEMON_…`, the base unit in the name (`_seconds`,
//!   `_bytes`), `_total` for counters.
//! - [`Rule`] and [`Metrics::status`]: a status reply's `name value` counters mapped by a
//!   table, so that each daemon says once which of its status counters is which metric.
//! - [`LatencyBuckets`]: a latency (a group commit, a record commit) counted in fixed buckets
//!   where the shell measures it, shown as a histogram.
//! - [`start`] and [`serve`]: the listener (hyper's HTTP/1 server). Every connection passes a
//!   lava-net gate ([`CONNECTIONS`]: a cap per address and in total, the oldest connection
//!   closed to make room) and serves one request: its headers within [`HEADER_TIMEOUT`], the
//!   whole exchange within [`EXCHANGE_TIMEOUT`]. The figures are asked of a [`Collect`] (the
//!   daemon's loop through a [`Scrape`] channel, or a function) for at most
//!   [`COLLECT_TIMEOUT`], and the listener adds its own (`lavacore_metrics_…`).
//!
//! It decides nothing: which figures a daemon shows, and under which names, is the daemon's.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use lava_net::gate::{AcceptBackoff, Gate, GateConfig, Pass, Source};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use crate::startup::{self, ListenError};

/// The upper bounds of the latency buckets, in µs (100 µs to 1 s); a last bucket holds
/// what is above them all.
pub const LATENCY_BOUNDS_US: [u64; 12] =
    [100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000];

/// A latency counted by bucket: `counts[i]` is how many took at most
/// `LATENCY_BOUNDS_US[i]` and more than the bound before it; the last, more than every bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencyBuckets {
    /// Observations by bucket (see the type's doc).
    pub counts: [u64; LATENCY_BOUNDS_US.len() + 1],
}

impl LatencyBuckets {
    /// Counts one latency of `us` microseconds.
    pub fn observe(&mut self, us: u64) {
        let idx = LATENCY_BOUNDS_US.iter().position(|bound| us <= *bound).unwrap_or(LATENCY_BOUNDS_US.len());
        self.counts[idx] += 1;
    }

    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// A value of one sample.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    Int(u64),
    Float(f64),
    Histogram { sum: f64, count: u64, buckets: Vec<(f64, u64)> },
}

/// One metric family: its name (as encoded, without the `_total` a counter gets), help and
/// samples by label set.
#[derive(Clone, Debug)]
struct Family {
    name: String,
    help: String,
    kind: MetricType,
    samples: Vec<(Vec<(String, String)>, Value)>,
}

/// One scrape's figures; see the module doc. Samples of one name gather in one family, in
/// the order they were added.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    families: Vec<Family>,
}

/// µs as seconds.
fn seconds(us: u64) -> f64 {
    us as f64 / 1e6
}

impl Metrics {
    /// No figures yet.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    fn add(&mut self, name: &str, help: &str, kind: MetricType, labels: &[(&str, &str)], value: Value) {
        debug_assert!(name.starts_with("lavacore_"), "{name}: every metric of ours is lavacore_…");
        let name = match kind {
            MetricType::Counter => {
                debug_assert!(name.ends_with("_total"), "{name}: a counter's name ends in _total");
                name.strip_suffix("_total").unwrap_or(name)
            }
            _ => name,
        };
        let labels = labels.iter().map(|(key, value)| ((*key).to_owned(), (*value).to_owned())).collect();
        match self.families.iter_mut().find(|family| family.name == name) {
            Some(family) => {
                debug_assert_eq!(family.kind, kind, "{name} is added as one kind of metric");
                family.samples.push((labels, value));
            }
            None => self.families.push(Family {
                name: name.to_owned(),
                help: help.to_owned(),
                kind,
                samples: vec![(labels, value)],
            }),
        }
    }

    /// A counter (`name` ends in `_total`).
    pub fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: u64) {
        self.add(name, help, MetricType::Counter, labels, Value::Int(value));
    }

    /// A counter of time kept in µs, shown in seconds (`name` ends in `_seconds_total`).
    pub fn counter_seconds(&mut self, name: &str, help: &str, labels: &[(&str, &str)], us: u64) {
        self.add(name, help, MetricType::Counter, labels, Value::Float(seconds(us)));
    }

    /// A gauge.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: u64) {
        self.add(name, help, MetricType::Gauge, labels, Value::Int(value));
    }

    /// A gauge of time kept in µs, shown in seconds (`name` ends in `_seconds`).
    pub fn gauge_seconds(&mut self, name: &str, help: &str, labels: &[(&str, &str)], us: u64) {
        self.add(name, help, MetricType::Gauge, labels, Value::Float(seconds(us)));
    }

    /// A latency histogram in seconds (`name` ends in `_seconds`) from its buckets and the sum
    /// of every observation in µs.
    pub fn histogram_seconds(
        &mut self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        buckets: &LatencyBuckets,
        sum_us: u64,
    ) {
        let mut bounds: Vec<(f64, u64)> =
            LATENCY_BOUNDS_US.iter().zip(buckets.counts).map(|(bound, n)| (seconds(*bound), n)).collect();
        bounds.push((f64::INFINITY, buckets.counts[LATENCY_BOUNDS_US.len()]));
        let value = Value::Histogram { sum: seconds(sum_us), count: buckets.count(), buckets: bounds };
        self.add(name, help, MetricType::Histogram, labels, value);
    }

    /// Maps a status reply's counters by `rules` (for each name the first rule that matches:
    /// its exact name, or the prefix of a [`Kind::CounterBy`] or [`Kind::GaugeBy`]), and
    /// returns the names no rule knows (left out; a daemon's tests keep this empty).
    pub fn status<'a>(
        &mut self,
        rules: &[Rule],
        counters: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Vec<String> {
        let mut unknown = Vec::new();
        for (name, value) in counters {
            let found = rules.iter().find_map(|rule| match rule.kind {
                Kind::CounterBy(_) | Kind::GaugeBy(_) => {
                    name.strip_prefix(rule.status).filter(|rest| !rest.is_empty()).map(|rest| (rule, rest))
                }
                _ => (name == rule.status).then_some((rule, "")),
            });
            let Some((rule, rest)) = found else {
                unknown.push(name.to_owned());
                continue;
            };
            let (metric, help) = (rule.metric, rule.help);
            match rule.kind {
                Kind::Counter => self.counter(metric, help, &[], value),
                Kind::CounterSeconds => self.counter_seconds(metric, help, &[], value),
                Kind::Gauge => self.gauge(metric, help, &[], value),
                Kind::GaugeSeconds => self.gauge_seconds(metric, help, &[], value),
                Kind::CounterBy(label) => self.counter(metric, help, &[(label, rest)], value),
                Kind::GaugeBy(label) => self.gauge(metric, help, &[(label, rest)], value),
                Kind::Skip => {}
            }
        }
        unknown
    }

    /// The value of the sample of `name` (as exposed, `_total` included) with exactly these
    /// labels, as a number: for tests.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let family = self.families.iter().find(|family| match family.kind {
            MetricType::Counter => name.strip_suffix("_total") == Some(family.name.as_str()),
            _ => family.name == name,
        })?;
        let (_, value) = family.samples.iter().find(|(have, _)| {
            have.len() == labels.len() && have.iter().zip(labels).all(|((k, v), (k2, v2))| k == k2 && v == v2)
        })?;
        match value {
            Value::Int(n) => Some(*n as f64),
            Value::Float(x) => Some(*x),
            Value::Histogram { count, .. } => Some(*count as f64),
        }
    }

    /// Adds every figure of `other` after its own.
    pub fn extend(&mut self, other: Metrics) {
        for family in other.families {
            match self.families.iter_mut().find(|mine| mine.name == family.name) {
                Some(mine) => mine.samples.extend(family.samples),
                None => self.families.push(family),
            }
        }
    }

    /// The figures in the Prometheus text exposition format, version 0.0.4
    /// ([`CONTENT_TYPE`]).
    pub fn render(self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self));
        let mut text = String::new();
        // Writing to a String cannot fail; an encoding error would be a bug in a name.
        if let Err(error) = prometheus_client::encoding::prometheus_text::encode(&mut text, &registry) {
            tracing::error!("the metrics could not be encoded: {error}");
        }
        text
    }
}

/// The `Content-Type` of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

impl Collector for Metrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        type NoExemplars<'a> = Option<&'a HashMap<usize, Exemplar<Vec<(String, String)>, f64>>>;
        for family in &self.families {
            let mut metric = encoder.encode_descriptor(&family.name, &family.help, None, family.kind)?;
            for (labels, value) in &family.samples {
                let sample = metric.encode_family(labels)?;
                match (family.kind, value) {
                    (MetricType::Counter, Value::Int(n)) => ConstCounter::new(*n).encode(sample)?,
                    (MetricType::Counter, Value::Float(x)) => ConstCounter::new(*x).encode(sample)?,
                    (_, Value::Int(n)) => ConstGauge::new(*n).encode(sample)?,
                    (_, Value::Float(x)) => ConstGauge::new(*x).encode(sample)?,
                    (_, Value::Histogram { sum, count, buckets }) => {
                        let mut sample = sample;
                        sample.encode_histogram(*sum, *count, buckets, NoExemplars::None)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// How a [`Rule`] shows a status counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A counter.
    Counter,
    /// A counter of µs, shown in seconds.
    CounterSeconds,
    /// A gauge.
    Gauge,
    /// A gauge of µs, shown in seconds.
    GaugeSeconds,
    /// The rule's `status` is a prefix (ending in `.`) and the rest of the name is the value
    /// of this label of a counter.
    CounterBy(&'static str),
    /// The same, of a gauge.
    GaugeBy(&'static str),
    /// Shown by the status query only (a mean, which the metrics' sum and count give).
    Skip,
}

/// Which metric one status counter is; see [`Metrics::status`].
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// The status counter's name, or the prefix of a `…By` kind.
    pub status: &'static str,
    /// How it is shown.
    pub kind: Kind,
    /// The metric's name.
    pub metric: &'static str,
    /// The metric's help.
    pub help: &'static str,
}

impl Rule {
    /// A rule (for tables).
    pub const fn new(status: &'static str, kind: Kind, metric: &'static str, help: &'static str) -> Rule {
        Rule { status, kind, metric, help }
    }
}

/// The connections the listener serves at once, and from one address (a Prometheus server
/// uses one per target at a time); a connection never "authenticates", so the oldest makes
/// room for a newcomer.
pub const CONNECTIONS: GateConfig =
    GateConfig { total_max: 32, per_source_max: 8, auth_deadline: HEADER_TIMEOUT };
/// Longest a connection may take to send its request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest one connection may last, request and answer.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest the daemon may take to hand over its figures.
pub const COLLECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The request buffer (hyper's smallest): a `GET /metrics` needs a fraction of it.
const REQUEST_BUFFER_BYTES: usize = 8192;
/// Scrapes that may wait for the loop's answer at once; more are answered 503.
const SCRAPES_QUEUED_MAX: usize = 4;

/// A scrape waiting for the daemon's loop: the loop answers with its figures.
#[derive(Debug)]
pub struct Scrape {
    answer: oneshot::Sender<Metrics>,
}

impl Scrape {
    /// Hands over the figures (the scrape may have given up waiting: then nothing happens).
    pub fn answer(self, metrics: Metrics) {
        let _gone = self.answer.send(metrics);
    }
}

/// The channel of [`Scrape`]s to a daemon's loop: the sending side goes to [`start`], the
/// loop receives.
pub fn scrape_channel() -> (mpsc::Sender<Scrape>, mpsc::Receiver<Scrape>) {
    mpsc::channel(SCRAPES_QUEUED_MAX)
}

/// When `addr` is set, [`start`]s the listener there asking a loop, and returns the loop's
/// end of the channel (for [`next_scrape`]); `None` when the daemon serves no metrics.
pub fn start_for_loop(addr: Option<SocketAddr>) -> Result<Option<mpsc::Receiver<Scrape>>, ListenError> {
    let Some(addr) = addr else { return Ok(None) };
    let (asks, scrapes) = scrape_channel();
    start(addr, asks)?;
    Ok(Some(scrapes))
}

/// The next scrape for a loop's `select!`; never resolves when no metrics are served.
pub async fn next_scrape(scrapes: &mut Option<mpsc::Receiver<Scrape>>) -> Option<Scrape> {
    match scrapes {
        Some(scrapes) => scrapes.recv().await,
        None => std::future::pending().await,
    }
}

/// Where a scrape gets the daemon's figures.
pub trait Collect: Send + Sync + 'static {
    /// The figures now; `None` when the daemon cannot give them (stopping, or too busy).
    fn collect(&self) -> impl Future<Output = Option<Metrics>> + Send;
}

/// Asks the daemon's loop (see [`scrape_channel`]); a full queue is a busy loop.
impl Collect for mpsc::Sender<Scrape> {
    async fn collect(&self) -> Option<Metrics> {
        let (answer, answered) = oneshot::channel();
        self.try_send(Scrape { answer }).ok()?;
        answered.await.ok()
    }
}

/// Figures made by a function (a daemon whose state is behind a lock, say).
#[derive(Debug)]
pub struct FromFn<F>(pub F);

impl<F: Fn() -> Metrics + Send + Sync + 'static> Collect for FromFn<F> {
    async fn collect(&self) -> Option<Metrics> {
        Some((self.0)())
    }
}

/// What the listener itself counts, added to every scrape.
#[derive(Debug, Default)]
struct Served {
    /// Answers by status: 200, 404, 405, 503.
    answers: [AtomicU64; 4],
    refused: AtomicU64,
    timed_out: AtomicU64,
    evicted: AtomicU64,
    failed: AtomicU64,
}

const ANSWER_CODES: [StatusCode; 4] =
    [StatusCode::OK, StatusCode::NOT_FOUND, StatusCode::METHOD_NOT_ALLOWED, StatusCode::SERVICE_UNAVAILABLE];

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Served {
    fn answered(&self, code: StatusCode) {
        if let Some(idx) = ANSWER_CODES.iter().position(|known| *known == code) {
            bump(&self.answers[idx]);
        }
    }

    fn add_to(&self, metrics: &mut Metrics) {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        for (code, counter) in ANSWER_CODES.iter().zip(&self.answers) {
            metrics.counter(
                "lavacore_metrics_requests_total",
                "HTTP requests the metrics listener answered, by status code.",
                &[("code", code.as_str())],
                load(counter),
            );
        }
        for (reason, counter) in [
            ("refused", &self.refused),
            ("timeout", &self.timed_out),
            ("evicted", &self.evicted),
            ("error", &self.failed),
        ] {
            metrics.counter(
                "lavacore_metrics_connections_closed_total",
                "Connections to the metrics listener refused or closed without an answer, by reason.",
                &[("reason", reason)],
                load(counter),
            );
        }
    }
}

/// Binds `addr` (SO_REUSEADDR) and serves the metrics there on a task of the current tokio
/// runtime for as long as it runs; returns the address bound.
pub fn start(addr: SocketAddr, collect: impl Collect) -> Result<SocketAddr, ListenError> {
    let (listener, bound) = startup::listen(addr)?;
    tracing::info!("metrics served on http://{bound}/metrics");
    tokio::spawn(serve(listener, collect));
    Ok(bound)
}

/// Serves `GET /metrics` on `listener` forever; see the module doc.
pub async fn serve(listener: TcpListener, collect: impl Collect) {
    let collect = Arc::new(collect);
    let served = Arc::new(Served::default());
    let gate = Gate::new(CONNECTIONS);
    let mut backoff = AcceptBackoff::default();
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                if let Some(line) = backoff.succeeded() {
                    tracing::info!("metrics listener: {line}");
                }
                match gate.admit(Source::Ip(peer.ip())) {
                    Ok(pass) => {
                        tokio::spawn(exchange(stream, pass, Arc::clone(&collect), Arc::clone(&served)));
                    }
                    Err(refusal) => {
                        bump(&served.refused);
                        tracing::debug!(%peer, "metrics connection refused: {refusal}");
                    }
                }
            }
            Err(error) => {
                let (pause, line) = backoff.failed(&error);
                if let Some(line) = line {
                    tracing::warn!("metrics listener: {line}");
                }
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// One connection: one request, answered, within the deadlines.
async fn exchange<C: Collect>(stream: TcpStream, mut pass: Pass, collect: Arc<C>, served: Arc<Served>) {
    let peer = pass.source();
    let service = service_fn(|request: Request<Incoming>| {
        let (collect, served) = (Arc::clone(&collect), Arc::clone(&served));
        async move {
            let response = respond(&request, &*collect, &served).await;
            served.answered(response.status());
            Ok::<_, Infallible>(response)
        }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(false)
        .max_buf_size(REQUEST_BUFFER_BYTES)
        .serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        outcome = tokio::time::timeout(EXCHANGE_TIMEOUT, connection) => match outcome {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                if error.is_timeout() { bump(&served.timed_out) } else { bump(&served.failed) }
                tracing::debug!(%peer, "metrics connection: {error}");
            }
            Err(_elapsed) => {
                bump(&served.timed_out);
                tracing::debug!(%peer, "metrics connection closed: no answer within {EXCHANGE_TIMEOUT:?}");
            }
        },
        () = pass.evicted() => {
            bump(&served.evicted);
            tracing::debug!(%peer, "metrics connection closed to make room for a newer one");
        }
    }
}

fn text(code: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = code;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

async fn respond<C: Collect>(
    request: &Request<Incoming>,
    collect: &C,
    served: &Served,
) -> Response<Full<Bytes>> {
    if request.uri().path() != "/metrics" {
        return text(StatusCode::NOT_FOUND, "only /metrics is served here\n");
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served here\n");
        response.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let Ok(Some(mut metrics)) = tokio::time::timeout(COLLECT_TIMEOUT, collect.collect()).await else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "the daemon did not hand over its figures in time\n");
    };
    served.add_to(&mut metrics);
    let mut response = Response::new(Full::new(Bytes::from(metrics.render())));
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(CONTENT_TYPE));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    // Goal: counters get `_total` once, units stay in the name, labels are escaped, a
    // histogram's buckets are cumulative with `+Inf`, in seconds.
    #[test]
    fn exposition_text() {
        let mut metrics = Metrics::new();
        metrics.counter("lavacore_test_frames_received_total", "Frames.", &[("operation", "SUBMIT_JOB")], 3);
        metrics.counter("lavacore_test_frames_received_total", "Frames.", &[("operation", "a\"b")], 1);
        metrics.gauge("lavacore_test_jobs", "Jobs by state.", &[("state", "pending")], 2);
        metrics.gauge_seconds("lavacore_test_commit_max_seconds", "Longest.", &[], 1_500);
        let mut buckets = LatencyBuckets::default();
        for us in [50, 100, 101, 2_000_000] {
            buckets.observe(us);
        }
        metrics.histogram_seconds("lavacore_test_commit_seconds", "Commits.", &[], &buckets, 2_000_251);
        let text = metrics.render();
        let expected = [
            "# HELP lavacore_test_frames_received_total Frames.",
            "# TYPE lavacore_test_frames_received_total counter",
            "lavacore_test_frames_received_total{operation=\"SUBMIT_JOB\"} 3",
            "lavacore_test_frames_received_total{operation=\"a\\\"b\"} 1",
            "# TYPE lavacore_test_jobs gauge",
            "lavacore_test_jobs{state=\"pending\"} 2",
            "lavacore_test_commit_max_seconds 0.0015",
            "# TYPE lavacore_test_commit_seconds histogram",
            "lavacore_test_commit_seconds_bucket{le=\"0.0001\"} 2",
            "lavacore_test_commit_seconds_bucket{le=\"0.00025\"} 3",
            "lavacore_test_commit_seconds_bucket{le=\"1\"} 3",
            "lavacore_test_commit_seconds_bucket{le=\"+Inf\"} 4",
            "lavacore_test_commit_seconds_sum 2.000251",
            "lavacore_test_commit_seconds_count 4",
        ];
        for line in expected {
            assert!(text.lines().any(|have| have == line), "no line `{line}` in:\n{text}");
        }
        assert!(!text.contains("_total_total"), "{text}");
        assert_eq!(text.matches("+Inf").count(), 1, "{text}");
    }

    // Goal: a table maps exact names and prefixes (the rest a label), µs become seconds,
    // skipped names vanish, and names no rule knows are returned.
    #[test]
    fn status_rules() {
        const RULES: [Rule; 4] = [
            Rule::new("frames.", Kind::CounterBy("operation"), "lavacore_t_frames_received_total", "F."),
            Rule::new("log.us_max", Kind::GaugeSeconds, "lavacore_t_commit_max_seconds", "M."),
            Rule::new("log.us_mean", Kind::Skip, "", ""),
            Rule::new("connections", Kind::Counter, "lavacore_t_connections_accepted_total", "C."),
        ];
        let counters =
            [("frames.PING", 2), ("log.us_max", 2_500), ("log.us_mean", 9), ("connections", 4), ("odd", 1)];
        let mut metrics = Metrics::new();
        let unknown = metrics.status(&RULES, counters);
        assert_eq!(unknown, ["odd"]);
        assert_eq!(metrics.value("lavacore_t_frames_received_total", &[("operation", "PING")]), Some(2.0));
        assert_eq!(metrics.value("lavacore_t_commit_max_seconds", &[]), Some(0.0025));
        assert_eq!(metrics.value("lavacore_t_connections_accepted_total", &[]), Some(4.0));
    }

    async fn http(addr: SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("read");
        answer
    }

    // Goal: GET /metrics answers the loop's figures and the listener's own; another path is
    // 404, another method 405; a loop that is gone is a 503.
    #[tokio::test]
    async fn listener_answers_metrics_only() {
        let (scrapes, mut loop_side) = scrape_channel();
        let (listener, addr) = startup::listen("127.0.0.1:0".parse().expect("an address")).expect("bind");
        tokio::spawn(serve(listener, scrapes));
        let answering = tokio::spawn(async move {
            let scrape = loop_side.recv().await.expect("a scrape");
            let mut metrics = Metrics::new();
            metrics.gauge("lavacore_test_up", "Up.", &[], 1);
            scrape.answer(metrics);
        });
        let answer = http(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("content-type: text/plain; version=0.0.4"), "{answer}");
        assert!(answer.contains("\nlavacore_test_up 1\n"), "{answer}");
        assert!(answer.contains("lavacore_metrics_requests_total{code=\"200\"} 0"), "{answer}");
        answering.await.expect("the loop answered, then ended");
        let answer = http(addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
        let answer = http(addr, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
        let answer = http(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    }

    // Goal: a connection that sends no request is closed after the header deadline.
    #[tokio::test(start_paused = true)]
    async fn silent_connection_is_closed() {
        let (listener, addr) = startup::listen("127.0.0.1:0".parse().expect("an address")).expect("bind");
        tokio::spawn(serve(listener, FromFn(Metrics::new)));
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let mut buffer = Vec::new();
        let read = tokio::time::timeout(EXCHANGE_TIMEOUT * 2, stream.read_to_end(&mut buffer)).await;
        assert!(read.is_ok(), "the connection stayed open");
    }
}
