//! The candidates' link and replica log around the real consensus core, on real sockets
//! and real files (docs/failover.md, "The candidates' link").
//!
//! Three candidates run in one runtime, each driving its `lava_replog::Replica` in its own
//! loop exactly as a daemon must: every effect of a drain carried out in order, a `Persist`
//! durable through `ReplicaLog` before anything after it, a `Send` through `Link`, a
//! snapshot kept before its record. The test stops the leader (its link and its loop go
//! away, as in a crash after the last fsync), checks that the others elect a leader and go
//! on, restarts it from its disk alone, and checks that every candidate ends with the same
//! values, each acknowledged value exactly once, in the same order.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use lava_net::gate::GateConfig;
use lava_net::{AuthConfig, Authenticator, ClusterKey, KeyRing};
use lava_replog::{Config, Effect, Placed, Refused, Replica, View};
use lava_shell::replication::{Link, LinkConfig, ReplicaLog};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

const TICK: Duration = Duration::from_millis(20);
/// Applied entries between two snapshots of a candidate's values.
const SNAPSHOT_EVERY: u64 = 40;

enum Ask {
    Propose(String, oneshot::Sender<Result<Placed, Refused>>),
    Look(oneshot::Sender<Seen>),
}

#[derive(Clone, Debug)]
struct Seen {
    view: View,
    values: Vec<String>,
    /// (index, term) of every applied entry with a value, in order.
    places: Vec<(u64, u64)>,
    link_refused: u64,
    /// Snapshots received from the leader since this candidate started.
    restores: u64,
    /// The index of this candidate's newest snapshot.
    snapshot_index: u64,
}

struct Candidate {
    replica: Replica,
    link: Link,
    log: ReplicaLog,
    values: Vec<String>,
    places: Vec<(u64, u64)>,
    restores: u64,
}

fn encode(values: &[String], places: &[(u64, u64)]) -> Vec<u8> {
    lava_xdr::to_bytes(&(values, places)).expect("encodes")
}

fn decode(data: &[u8]) -> (Vec<String>, Vec<(u64, u64)>) {
    lava_xdr::from_bytes(data, &lava_xdr::Limits::DEFAULT).expect("decodes")
}

impl Candidate {
    async fn open(id: u64, dir: &Path, addrs: &[SocketAddr], auth: Arc<Authenticator>) -> Candidate {
        let (log, recovered, _) = ReplicaLog::open(dir, "replica", 1..=1).expect("open the replica log");
        let (values, places) = recovered.snapshot.as_ref().map(|s| decode(&s.2)).unwrap_or_default();
        let mut config = Config::new(id, addrs.len() as u64);
        config.max_append_bytes = 4096;
        let replica = Replica::recover(config, recovered.records, recovered.snapshot).expect("recover");
        let mut listener = None;
        for _ in 0..100 {
            match TcpListener::bind(addrs[id as usize - 1]).await {
                Ok(bound) => {
                    listener = Some(bound);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        let link = Link::start(
            LinkConfig {
                id,
                candidates: addrs.to_vec(),
                auth,
                gate: GateConfig::DEFAULT,
                connect_timeout: Duration::from_millis(500),
            },
            listener.expect("the replication port binds again"),
        );
        Candidate { replica, link, log, values, places, restores: 0 }
    }

    async fn run(mut self, mut asks: mpsc::Receiver<Ask>) {
        let mut tick = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                _ = tick.tick() => self.replica.tick(),
                message = self.link.recv() => {
                    let _ = self.replica.receive(&message);
                }
                ask = asks.recv() => match ask {
                    None => return,
                    Some(Ask::Propose(value, answer)) => {
                        let _ = answer.send(self.replica.propose(value.into_bytes()));
                    }
                    Some(Ask::Look(answer)) => {
                        let _ = answer.send(Seen {
                            view: self.replica.view(),
                            values: self.values.clone(),
                            places: self.places.clone(),
                            link_refused: self.link.counters().refused.load(Ordering::Relaxed),
                            restores: self.restores,
                            snapshot_index: self.replica.snapshot_index(),
                        });
                    }
                },
            }
            self.carry_out().await;
        }
    }

    /// Every effect of the drains, in order; then a snapshot when one is due.
    async fn carry_out(&mut self) {
        loop {
            let effects = self.replica.drain();
            if effects.is_empty() {
                break;
            }
            self.carry_out_effects(effects).await;
        }
        let view = self.replica.view();
        if view.applied >= self.replica.snapshot_index() + SNAPSHOT_EVERY {
            let index = view.applied;
            let term = self.replica.term_at(index).expect("the applied entry's term");
            let data = encode(&self.values, &self.places);
            let tail = self.replica.entries_after(index).expect("the entries after the snapshot");
            self.log.keep_snapshot(index, term, data.clone(), tail).await.expect("keep");
            if let Some(record) = self.replica.compact(index, data) {
                self.log.persist(vec![record]).await.expect("persist");
            }
        }
    }

    /// One drain's effects, in order; each `Persist` made durable on the spot.
    async fn carry_out_effects(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::Persist { ticket, records } => {
                    self.log.persist(records).await.expect("persist");
                    self.replica.persisted(ticket);
                }
                Effect::Send { to, message } => self.link.send(to, message),
                Effect::Apply { index, term, data } => {
                    if !data.is_empty() {
                        self.values.push(String::from_utf8(data).expect("utf-8"));
                        self.places.push((index, term));
                    }
                }
                Effect::Confirmed { .. } => {}
                Effect::Restore { index, term, data } => {
                    self.log.keep_snapshot(index, term, data.clone(), Vec::new()).await.expect("keep");
                    (self.values, self.places) = decode(&data);
                    self.restores += 1;
                }
            }
        }
    }
}

/// `n` loopback addresses free now, on ports below Linux's ephemeral range (32768–60999): a
/// stopped candidate binds its port again, and a port of that range may meanwhile have become
/// the source port of some connection on the machine (seen under parallel runs: "the
/// replication port binds again" failed). The first port tried differs per process and call.
fn free_addrs(n: usize) -> Vec<SocketAddr> {
    const PORTS: std::ops::RangeInclusive<u32> = 20_000..=32_000;
    let span = PORTS.end() - PORTS.start() + 1;
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let seed = std::process::id().wrapping_mul(7919) ^ nanos;
    let addrs: Vec<SocketAddr> = (0..span)
        .map(|step| {
            SocketAddr::from(([127, 0, 0, 1], (PORTS.start() + seed.wrapping_add(step * 613) % span) as u16))
        })
        .filter(|addr| std::net::TcpListener::bind(addr).is_ok())
        .take(n)
        .collect();
    assert_eq!(addrs.len(), n, "free ports below the ephemeral range");
    addrs
}

struct Cluster {
    dirs: Vec<PathBuf>,
    addrs: Vec<SocketAddr>,
    auth: Arc<Authenticator>,
    asks: Vec<Option<mpsc::Sender<Ask>>>,
    tasks: Vec<Option<tokio::task::JoinHandle<()>>>,
    _root: tempfile::TempDir,
}

impl Cluster {
    async fn start(n: usize) -> Cluster {
        let root = tempfile::tempdir().expect("tempdir");
        let key = ClusterKey::from_bytes(&[7u8; 32]).expect("key");
        let auth = Arc::new(Authenticator::new(KeyRing::new(&key), AuthConfig::default()));
        let addrs = free_addrs(n);
        let dirs: Vec<PathBuf> = (1..=n).map(|i| root.path().join(format!("candidate{i}"))).collect();
        let mut cluster = Cluster { dirs, addrs, auth, asks: vec![], tasks: vec![], _root: root };
        for id in 1..=n as u64 {
            cluster.asks.push(None);
            cluster.tasks.push(None);
            cluster.start_one(id).await;
        }
        cluster
    }

    async fn start_one(&mut self, id: u64) {
        let at = id as usize - 1;
        let candidate = Candidate::open(id, &self.dirs[at], &self.addrs, Arc::clone(&self.auth)).await;
        let (tx, rx) = mpsc::channel(64);
        self.asks[at] = Some(tx);
        self.tasks[at] = Some(tokio::spawn(candidate.run(rx)));
    }

    async fn stop_one(&mut self, id: u64) {
        let at = id as usize - 1;
        self.asks[at] = None;
        if let Some(task) = self.tasks[at].take() {
            task.await.expect("the candidate's loop ends");
        }
    }

    async fn look(&self, id: u64) -> Option<Seen> {
        let ask = self.asks[id as usize - 1].as_ref()?;
        let (tx, rx) = oneshot::channel();
        ask.send(Ask::Look(tx)).await.ok()?;
        rx.await.ok()
    }

    async fn leader(&self) -> u64 {
        for _ in 0..500 {
            for id in 1..=self.addrs.len() as u64 {
                if let Some(seen) = self.look(id).await
                    && seen.view.is_leader
                {
                    return id;
                }
            }
            tokio::time::sleep(TICK).await;
        }
        panic!("no leader within 10 s");
    }

    /// Proposes `value` until some leader takes it; returns where it was placed.
    async fn propose(&self, value: &str) -> Placed {
        loop {
            let leader = self.leader().await;
            let (tx, rx) = oneshot::channel();
            let ask = self.asks[leader as usize - 1].as_ref().expect("a running leader");
            if ask.send(Ask::Propose(value.to_string(), tx)).await.is_ok()
                && let Ok(Ok(placed)) = rx.await
            {
                return placed;
            }
            tokio::time::sleep(TICK).await;
        }
    }

    /// Waits until every running candidate applied through `index`.
    async fn applied_through(&self, index: u64) -> Vec<Seen> {
        for _ in 0..1000 {
            let mut seen = Vec::new();
            for id in 1..=self.addrs.len() as u64 {
                if let Some(s) = self.look(id).await {
                    seen.push(s);
                }
            }
            if seen.iter().all(|s| s.view.applied >= index) {
                return seen;
            }
            tokio::time::sleep(TICK).await;
        }
        let mut views = Vec::new();
        for id in 1..=self.addrs.len() as u64 {
            views.push(self.look(id).await.map(|s| (s.view, s.values.len())));
        }
        panic!("not every candidate applied through {index} within 20 s: {views:?}");
    }
}

// Goal: with the real consensus core over the real link and replica logs, a leader's
// death costs no acknowledged value, the survivors go on, and the dead candidate comes
// back from its disk alone (by snapshot when the others compacted past it) to the same
// values in the same order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_candidates_survive_the_leaders_death_and_its_return() {
    let mut cluster = Cluster::start(3).await;
    let mut placed = Vec::new();
    for n in 0..60 {
        let value = format!("first-{n}");
        placed.push((value.clone(), cluster.propose(&value).await));
    }
    let last = placed.last().expect("placed").1.index;
    cluster.applied_through(last).await;

    let old = cluster.leader().await;
    let at_stop = cluster.look(old).await.map(|s| (s.view, s.snapshot_index));
    cluster.stop_one(old).await;
    for n in 0..120 {
        let value = format!("second-{n}");
        placed.push((value.clone(), cluster.propose(&value).await));
    }
    let new = cluster.leader().await;
    assert_ne!(new, old, "another candidate leads once the leader is gone");

    cluster.start_one(old).await;
    let last = placed.iter().map(|p| p.1.index).max().expect("placed");
    let seen = cluster.applied_through(last).await;
    assert_eq!(seen.len(), 3);
    let views: Vec<_> = seen.iter().map(|s| (s.view, s.snapshot_index, s.restores)).collect();
    assert!(
        seen[old as usize - 1].restores >= 1,
        "the returning candidate {old} was caught up by a snapshot: the others compacted past it \
         (at its stop: {at_stop:?}; now, (view, snapshot index, restores) of each: {views:?})"
    );
    for s in &seen[1..] {
        assert_eq!(s.values, seen[0].values, "every candidate applies the same values in the same order");
        assert_eq!(s.places, seen[0].places);
    }
    // Acknowledged: applied at the index and term its proposal was placed at.
    let applied = &seen[0];
    for (value, at) in &placed {
        if let Some(k) = applied.places.iter().position(|p| *p == (at.index, at.term)) {
            assert_eq!(&applied.values[k], value, "the entry at {at:?} is the value proposed there");
        }
    }
    let mut sorted = applied.values.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), applied.values.len(), "no value applied twice");
    let acknowledged = placed.iter().filter(|(_, at)| applied.places.contains(&(at.index, at.term))).count();
    assert!(acknowledged >= 170, "only {acknowledged} of 180 proposals were acknowledged");

    for id in 1..=3 {
        cluster.stop_one(id).await;
    }
}

// Goal: a stranger on the replication port — unauthenticated bytes, or a frame sealed with
// another key — loses its own connection, is counted, and the candidates go on agreeing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_on_the_replication_port_are_refused() {
    use tokio::io::AsyncWriteExt;
    let cluster = Cluster::start(3).await;
    let target = cluster.addrs[0];
    let mut junk = tokio::net::TcpStream::connect(target).await.expect("connect");
    junk.write_all(&[0xffu8; 64]).await.expect("write");
    let other = ClusterKey::from_bytes(&[9u8; 32]).expect("key");
    let forger = Arc::new(Authenticator::new(KeyRing::new(&other), AuthConfig::default()));
    let framed = lava_net::FramedConn::connect(
        target,
        lava_xdr::frame::FrameLimits { body_bytes_max: 1 << 20 },
        lava_net::Timeouts::default(),
    )
    .await
    .expect("connect");
    let mut forged = lava_net::AuthConn::new(framed, forger);
    let header = lava_xdr::frame::FrameHeader {
        sequence: 0,
        operation: lava_shell::replication::peers::MESSAGE_OPERATION,
        version: lava_shell::replication::peers::LINK_VERSION,
        length: 0,
        status: 0,
    };
    forged.write_frame(header, b"not a raft message").await.expect("write");
    for _ in 0..500 {
        if cluster.look(1).await.expect("candidate 1").link_refused >= 2 {
            break;
        }
        tokio::time::sleep(TICK).await;
    }
    assert!(cluster.look(1).await.expect("candidate 1").link_refused >= 2, "both strangers were refused");
    let placed = cluster.propose("after the strangers").await;
    let seen = cluster.applied_through(placed.index).await;
    assert!(seen.iter().all(|s| s.values.last().map(String::as_str) == Some("after the strangers")));
    drop(junk);
}
