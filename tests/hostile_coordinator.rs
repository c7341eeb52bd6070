//! The coordinator's port under hostile load (docs/operations.md, "Connection limits"): a
//! stranger with plain TCP and no credential, bounded in count and time, on loopback. Each
//! test shows that a worker with a credential is still served within a few seconds and
//! that the coordinator's memory stays bounded.

mod util;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use lava_coordinator::client::{Client, Endpoint};
use util::hostile::{
    AUTH_DEADLINE, SCHEDULING_SLACK, assert_closed_by_deadline, closed_within, open_idle, rss_kib,
};
use util::{Cluster, Daemon, IO_TIMEOUT};

struct Rig {
    cluster: Cluster,
    _sbatchd: Daemon,
    coordinator: Daemon,
}

impl Rig {
    fn start() -> Rig {
        let mut cluster = Cluster::new();
        let _sbatchd = cluster.start_sbatchd("localhost");
        let coordinator = cluster.start_coordinator(0, &[]);
        Rig { cluster, _sbatchd, coordinator }
    }

    fn addr(&self) -> SocketAddr {
        self.coordinator.addr()
    }

    /// A worker's round trip with a credential (HELLO, then a count query); how long it took.
    fn served(&self) -> Option<Duration> {
        let started = Instant::now();
        let endpoint =
            Endpoint::new(self.addr(), &self.cluster.dir().join("run/lava.sock"), util::CLUSTER_NAME);
        let mut client = Client::connect(&endpoint).ok()?;
        client.counts().ok()?;
        Some(started.elapsed())
    }

    /// The coordinator's resident memory, in KiB.
    fn rss_kib(&self) -> u64 {
        rss_kib(self.coordinator.pid())
    }
}

// Attack (issue 18, item 4): more idle connections than the coordinator serves, none of
// them ever saying HELLO. Goal: a worker with a credential is still served at once, and
// every idle connection is closed by its deadline (it used to have 300 s).
#[test]
fn idle_strangers_never_lock_out_workers() {
    let rig = Rig::start();
    let opened = Instant::now();
    let mut idle = open_idle(rig.addr(), 1100);
    assert!(idle.len() >= 1000, "the attacker opened {} connections", idle.len());
    let took = rig.served().expect("a worker is served beside 1,100 idle connections");
    assert!(took < Duration::from_secs(5), "the worker waited {took:?}");
    assert_closed_by_deadline(&mut idle, opened);
    assert!(rig.served().is_some(), "the coordinator still serves");
}

// Attack (issue 18, item 4): connections that announce a large frame before HELLO and send
// a good part of it, to make the coordinator hold the bytes. Goal: such a frame is refused
// at its header (a HELLO is a few hundred bytes), the memory stays bounded, and workers
// are still served.
#[test]
fn large_frames_before_hello_cost_nothing() {
    let rig = Rig::start();
    let before = rig.rss_kib();
    let mut header = Vec::new();
    // Sequence, operation, version, a 4 MiB length, status.
    let hello = lava_coord_wire::Operation::Hello.code();
    for word in [1u32, hello, lava_coord_wire::COORD_VERSION, 4 << 20, 0] {
        header.extend_from_slice(&word.to_be_bytes());
    }
    let chunk = vec![0u8; 1 << 20];
    let mut streams = Vec::new();
    for _ in 0..150 {
        let Ok(mut stream) = TcpStream::connect_timeout(&rig.addr(), IO_TIMEOUT) else { continue };
        stream.set_write_timeout(Some(Duration::from_millis(500))).expect("a write timeout");
        // The coordinator may close the connection at the header: the write then fails.
        let _sent = stream.write_all(&header).and_then(|()| stream.write_all(&chunk));
        streams.push(stream);
    }
    let grown = rig.rss_kib().saturating_sub(before);
    assert!(grown < 64 * 1024, "the coordinator grew by {grown} KiB for 150 frames it should refuse");
    assert!(rig.served().is_some(), "a worker is still served");
}

// Attack: a HELLO sent a byte a second, to hold a connection (the idle timeout used to start
// again at every read). Goal: cut off at the HELLO deadline.
#[test]
fn a_trickled_hello_is_cut_off_at_its_deadline() {
    let rig = Rig::start();
    let mut stream = TcpStream::connect_timeout(&rig.addr(), IO_TIMEOUT).expect("connect");
    let started = Instant::now();
    let mut cut = false;
    for byte in [0u8; 19] {
        if stream.write_all(&[byte]).is_err() {
            cut = true;
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
        if started.elapsed() > AUTH_DEADLINE + SCHEDULING_SLACK {
            break;
        }
    }
    let closed = cut || closed_within(&mut stream, Duration::from_secs(1));
    assert!(closed, "a HELLO trickled in for {:?} was never cut off", started.elapsed());
    assert!(rig.served().is_some(), "the coordinator still serves");
}

// Attack (issue 18, item 10): a credential seen on its way to mbatchd, spent at the
// coordinator within its 30 s. Goal: refused there, naming the daemon it was made for; a
// credential made for the coordinator is taken.
#[test]
fn a_credential_for_mbatchd_is_refused_by_the_coordinator() {
    let rig = Rig::start();
    let socket = rig.cluster.dir().join("run/lava.sock");
    let endpoint = Endpoint::new(rig.addr(), &socket, util::CLUSTER_NAME);
    let for_mbatchd = mbatchd_credential(&socket);
    let refused = Client::connect_with_credential(&endpoint, for_mbatchd).expect_err("refused");
    let text = refused.to_string();
    assert!(text.contains("is for mbatchd of cluster lavacore, not for the coordinator"), "{text}");
    assert!(Client::connect(&endpoint).is_ok(), "a credential for the coordinator is taken");
}

/// A credential for this cluster's mbatchd, from the local sbatchd, as `bsub` asks for one.
fn mbatchd_credential(socket: &Path) -> Vec<u8> {
    use lava_batch_wire::{self as wire, BATCH_VERSION, Operation};
    use lava_xdr::frame::{FrameHeader, HEADER_BYTES};
    use std::io::Read;
    let body = lava_xdr::to_bytes(&wire::CredentialRequest {
        audience_kind: wire::AUDIENCE_MBATCHD,
        audience_cluster: util::CLUSTER_NAME.to_owned(),
    })
    .expect("encodes");
    let mut stream = std::os::unix::net::UnixStream::connect(socket).expect("the credential socket");
    let mut request = Vec::new();
    let operation = Operation::CredentialRequest.code();
    FrameHeader { sequence: 1, operation, version: BATCH_VERSION, length: body.len() as u32, status: 0 }
        .write(&mut request);
    request.extend_from_slice(&body);
    stream.write_all(&request).expect("ask");
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).expect("an answer");
    let header = FrameHeader::parse(&head).expect("a header");
    let mut reply = vec![0u8; header.length as usize];
    stream.read_exact(&mut reply).expect("its body");
    let reply: wire::CredentialReply =
        lava_xdr::from_bytes(&reply, &lava_xdr::Limits::DEFAULT).expect("a reply");
    reply.token
}
