//! lim's query port under hostile load (docs/operations.md, "Connection limits"): the attacks
//! of a stranger with plain TCP, bounded in count and time, on loopback. Each test shows that
//! other clients are still answered within a few seconds and that lim's log stays small.

mod util;

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use lava_lim_wire as wire;
use lava_xdr::frame::{FrameHeader, HEADER_BYTES};
use util::hostile::{assert_closed_by_deadline, closed_within, open_idle};
use util::{Cluster, Daemon, IO_TIMEOUT, STARTUP_TIMEOUT, fixed_port, wait_until};

/// A one-host cluster whose lim listens on a port of its own; returns the cluster, the
/// running lim and its query address.
fn start() -> (Cluster, Daemon, SocketAddr) {
    let mut cluster = Cluster::with_hosts(&["h0"]);
    let port = fixed_port();
    cluster.write_file(
        "etc/lsf.cluster.lavacore",
        &format!(
            "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
             HOSTNAME model type server RESOURCES LAVA_ADDR LAVA_LIM_PORT LAVA_SBD_PORT LAVA_MXFSD_PORT\n\
             h0 ! ! 1 (cs linux) 127.0.0.1 {port} {} {}\nEnd Host\n",
            fixed_port(),
            fixed_port()
        ),
    );
    let ready = cluster.dir().join("run/lim.h0.ready");
    let args: Vec<&OsStr> =
        vec!["--host".as_ref(), "h0".as_ref(), "--ready-file".as_ref(), ready.as_os_str()];
    let mut lim = cluster.spawn("lim", &PathBuf::from(env!("CARGO_BIN_EXE_lim")), &args);
    wait_until("lim's ready file", STARTUP_TIMEOUT, || {
        assert!(lim.is_running(), "lim exited:\n{}", lim.log());
        ready.exists().then_some(())
    });
    (cluster, lim, SocketAddr::from(([127, 0, 0, 1], port)))
}

/// One status query; how long it took, or `None` if it was not answered.
fn status_query(addr: SocketAddr) -> Option<Duration> {
    let started = Instant::now();
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).ok()?;
    stream.set_read_timeout(Some(IO_TIMEOUT)).ok()?;
    let mut request = Vec::new();
    FrameHeader {
        sequence: 1,
        operation: wire::LIM_TCP_STATUS,
        version: wire::LIM_VERSION,
        length: 0,
        status: 0,
    }
    .write(&mut request);
    stream.write_all(&request).ok()?;
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).ok()?;
    let header = FrameHeader::parse(&head).ok()?;
    let mut body = vec![0u8; header.length as usize];
    stream.read_exact(&mut body).ok()?;
    Some(started.elapsed())
}

// Attack (issue: "lim spins once out of file descriptors; it caps no connections"): 600
// idle connections from the attacker's address, more than lim serves at once. Goal: a
// query from the same address is still answered (the idle connections make room, oldest
// first), the idle ones are closed within the few seconds they have to send a query, and
// lim's log does not grow with them.
#[test]
fn idle_connections_never_lock_out_queries() {
    let (_cluster, lim, addr) = start();
    let log_before = lim.log().len();
    let opened = Instant::now();
    let mut idle = open_idle(addr, 600);
    assert!(idle.len() >= 500, "the attacker opened {} connections", idle.len());
    let took = status_query(addr).expect("a query is answered beside 600 idle connections");
    assert!(took < Duration::from_secs(5), "the query took {took:?}");
    // Every idle connection is closed by its deadline (5 s to send a whole query, plus slack
    // for a busy machine's timers; lim used to wait 10 s), or evicted sooner to make room.
    assert_closed_by_deadline(&mut idle, opened);
    assert!(status_query(addr).is_some(), "lim still answers");
    let grown = lim.log().len() - log_before;
    assert!(grown < 4096, "lim logged {grown} bytes for 600 idle connections");
}

// Attack: a query sent one byte at a time, slower than any client would, to hold a
// connection for ever (the read timeout used to start again at every byte). Goal: the
// connection is closed once its whole-query deadline passes, however the bytes trickle.
#[test]
fn a_trickled_query_is_cut_off_at_its_deadline() {
    let (_cluster, _lim, addr) = start();
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect");
    let mut request = Vec::new();
    FrameHeader {
        sequence: 1,
        operation: wire::LIM_TCP_STATUS,
        version: wire::LIM_VERSION,
        length: 0,
        status: 0,
    }
    .write(&mut request);
    let started = Instant::now();
    let mut cut = false;
    // One byte a second: the 20-byte header would take 20 s.
    for byte in &request[..request.len() - 1] {
        if stream.write_all(&[*byte]).is_err() {
            cut = true;
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
        if started.elapsed() > Duration::from_secs(12) {
            break;
        }
    }
    let closed = cut || closed_within(&mut stream, Duration::from_secs(3));
    assert!(closed, "a query trickled in for {:?} was never cut off", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(15), "cut off only after {:?}", started.elapsed());
    assert!(status_query(addr).is_some(), "lim still answers");
}
