//! The three-node lock clusters of the mxfsd tests (`tests/mxfsd.rs`, the mxfsd workload of
//! `tests/crash_points.rs`): the hosts, their lsf.cluster, and one node's daemon.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::{CLUSTER_NAME, Cluster, Daemon, STARTUP_TIMEOUT};

/// The lock hosts, in node-id order.
pub const HOSTS: [&str; 3] = ["h1", "h2", "h3"];

fn mxfsd_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mxfsd"))
}

/// Writes lsf.cluster with every host on 127.0.0.1 and the mxfsd ports known so far. A node
/// only ever connects to lower node ids (looking for the master), so the daemons start in id
/// order and the file is rewritten with each one's bound port before the next starts. Hosts
/// sharing an address need distinct ports in every column; the other columns (and the ports
/// not known yet) are placeholders below the ephemeral range that nothing listens on.
pub fn write_cluster_file(cluster: &Cluster, ports: &[u16]) {
    let mut rows = String::new();
    for (idx, host) in HOSTS.iter().enumerate() {
        let mxfsd_port = ports.get(idx).copied().unwrap_or(21_000 + idx as u16);
        let (lim_port, sbd_port) = (21_100 + idx, 21_200 + idx);
        rows.push_str(&format!(
            "{host}  !  !  1  (cs linux)  127.0.0.1  {lim_port}  {sbd_port}  {mxfsd_port}\n"
        ));
    }
    cluster.write_file(
        &format!("etc/lsf.cluster.{}", CLUSTER_NAME),
        &format!(
            "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\n\
             Begin Host\n\
             HOSTNAME  model  type  server  RESOURCES  LAVA_ADDR  LAVA_LIM_PORT  LAVA_SBD_PORT  LAVA_MXFSD_PORT\n\
             {rows}End Host\n"
        ),
    );
}

pub struct Node {
    /// The running daemon (killed on drop).
    pub daemon: Daemon,
    /// Its client socket.
    pub socket: PathBuf,
    /// The TCP port it bound.
    pub port: u16,
}

/// Starts mxfsd for `HOSTS[idx]` binding `port` (0: any) and waits for its ready file.
pub fn spawn_node(cluster: &mut Cluster, idx: usize, port: u16) -> Node {
    let host = HOSTS[idx];
    let socket = cluster.dir().join(format!("run/{host}.sock"));
    let ready = cluster.dir().join(format!("run/{host}.port"));
    // A restarted daemon must not be taken for ready by its predecessor's file.
    let _absent = std::fs::remove_file(&ready);
    let port = port.to_string();
    let args: Vec<&OsStr> = vec![
        "--host".as_ref(),
        host.as_ref(),
        "--port".as_ref(),
        port.as_ref(),
        "--socket".as_ref(),
        socket.as_ref(),
        "--ready-file".as_ref(),
        ready.as_ref(),
    ];
    let mut daemon = cluster.spawn(&format!("mxfsd-{host}"), mxfsd_bin(), &args);
    let port = daemon.wait_for_port_file(&ready, STARTUP_TIMEOUT);
    Node { daemon, socket, port }
}
