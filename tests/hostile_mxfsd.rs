//! mxfsd's daemon port under hostile load (docs/operations.md, "Connection limits"): a
//! stranger with plain TCP and no cluster key, bounded in count and time, on loopback. The
//! test shows that the nodes keep their lock service and that mxfsd's log stays small.

mod util;

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use util::hostile::{assert_closed_by_deadline, open_idle};
use util::{Cluster, Daemon, STARTUP_TIMEOUT, wait_until};

/// A one-node lock cluster; returns it, the daemon, its port and its client socket.
fn start() -> (Cluster, Daemon, u16, PathBuf) {
    let mut cluster = Cluster::with_hosts(&["h1"]);
    let port = util::fixed_port();
    cluster.write_file(
        &format!("etc/lsf.cluster.{}", util::CLUSTER_NAME),
        &format!(
            "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
             HOSTNAME  model  type  server  RESOURCES  LAVA_ADDR  LAVA_LIM_PORT  LAVA_SBD_PORT  LAVA_MXFSD_PORT\n\
             h1  !  !  1  (cs linux)  127.0.0.1  21100  21200  {port}\nEnd Host\n"
        ),
    );
    let port_arg = port.to_string();
    let socket = cluster.dir().join("run/h1.sock");
    let ready = cluster.dir().join("run/h1.port");
    let args: Vec<&OsStr> = vec![
        "--host".as_ref(),
        "h1".as_ref(),
        "--port".as_ref(),
        port_arg.as_ref(),
        "--socket".as_ref(),
        socket.as_ref(),
        "--ready-file".as_ref(),
        ready.as_ref(),
    ];
    let mut daemon = cluster.spawn("mxfsd", Path::new(env!("CARGO_BIN_EXE_mxfsd")), &args);
    let port = daemon.wait_for_port_file(&ready, STARTUP_TIMEOUT);
    (cluster, daemon, port, socket)
}

/// `mxfsctl lock R EX -- true` succeeded.
fn locks(cluster: &Cluster, socket: &Path) -> bool {
    cluster
        .command(util::mbatchd_bin().with_file_name("mxfsctl"))
        .arg("--socket")
        .arg(socket)
        .args(["lock", "R", "EX", "--", "true"])
        .output()
        .is_ok_and(|out| out.status.success())
}

// Attack (issue 18, item 3): idle connections to mxfsd's daemon port, more than it admits
// (it capped none and read from each for ever). Goal: locks are still granted, every idle
// connection is closed by its deadline, and the log does not grow with them.
#[test]
fn idle_strangers_are_closed_and_locks_go_on() {
    let (cluster, daemon, port, socket) = start();
    wait_until("the node to serve", STARTUP_TIMEOUT, || locks(&cluster, &socket).then_some(()));
    let log_before = daemon.log().len();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let opened = Instant::now();
    let mut idle = open_idle(addr, 400);
    assert!(idle.len() >= 300, "the attacker opened {} connections", idle.len());
    assert!(locks(&cluster, &socket), "a lock is granted beside 400 idle connections");
    assert_closed_by_deadline(&mut idle, opened);
    assert!(locks(&cluster, &socket), "locks are still granted");
    let grown = daemon.log().len() - log_before;
    assert!(grown < 64 * 1024, "mxfsd logged {grown} bytes for 400 idle connections");
}
