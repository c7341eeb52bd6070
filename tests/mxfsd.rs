//! mxfsd on loopback: three daemons on 127.0.0.1 with per-host ports (lsf.cluster's
//! LAVA_MXFSD_PORT column) and separate client sockets; the first host is the lock master.
//! Many `mxfsctl lock counter EX -- sh -c '…'` processes on all three nodes increment one
//! counter file, and no increment is lost.

mod util;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use util::{Cluster, Daemon, IO_TIMEOUT, STARTUP_TIMEOUT, wait_until};

const HOSTS: [&str; 3] = ["h1", "h2", "h3"];
/// Concurrent `mxfsctl lock` processes per node.
const PROCESSES_PER_NODE: usize = 12;

fn mxfsd_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mxfsd"))
}

fn mxfsctl_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mxfsctl"))
}

/// Writes lsf.cluster with every host on 127.0.0.1 and the master's mxfsd port, if known.
/// Hosts sharing an address need distinct ports in every column; the other columns (and the
/// ports of the nodes that are not the master, which bind `--port 0`) are placeholders below
/// the ephemeral range that nothing listens on.
fn write_cluster_file(cluster: &Cluster, master_port: Option<u16>) {
    let mut rows = String::new();
    for (idx, host) in HOSTS.iter().enumerate() {
        let mxfsd_port = match (idx, master_port) {
            (0, Some(port)) => port,
            _ => 21_000 + idx as u16,
        };
        let (lim_port, sbd_port) = (21_100 + idx, 21_200 + idx);
        rows.push_str(&format!(
            "{host}  !  !  1  (cs linux)  127.0.0.1  {lim_port}  {sbd_port}  {mxfsd_port}\n"
        ));
    }
    cluster.write_file(
        &format!("etc/lsf.cluster.{}", util::CLUSTER_NAME),
        &format!(
            "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\n\
             Begin Host\n\
             HOSTNAME  model  type  server  RESOURCES  LAVA_ADDR  LAVA_LIM_PORT  LAVA_SBD_PORT  LAVA_MXFSD_PORT\n\
             {rows}End Host\n"
        ),
    );
}

struct Node {
    /// Keeps the daemon running for the test (killed on drop).
    _daemon: Daemon,
    socket: PathBuf,
}

/// Starts the three daemons: the master first on a free port, which then goes into
/// lsf.cluster so that the others find it.
fn start_cluster() -> (Cluster, Vec<Node>) {
    let mut cluster = Cluster::with_hosts(&HOSTS);
    cluster.rewrite_lsf_conf("LAVA_MXFSD_RENEW_MS", "300");
    cluster.rewrite_lsf_conf("LAVA_MXFSD_NODE_TIMEOUT_MS", "5000");
    write_cluster_file(&cluster, None);
    let mut nodes = Vec::new();
    for (idx, host) in HOSTS.iter().enumerate() {
        let socket = cluster.dir().join(format!("run/{host}.sock"));
        let ready = cluster.dir().join(format!("run/{host}.port"));
        let args: Vec<&OsStr> = vec![
            "--host".as_ref(),
            host.as_ref(),
            "--port".as_ref(),
            "0".as_ref(),
            "--socket".as_ref(),
            socket.as_ref(),
            "--ready-file".as_ref(),
            ready.as_ref(),
        ];
        let mut daemon = cluster.spawn(&format!("mxfsd-{host}"), mxfsd_bin(), &args);
        let port = daemon.wait_for_port_file(&ready, STARTUP_TIMEOUT);
        if idx == 0 {
            write_cluster_file(&cluster, Some(port));
        }
        nodes.push(Node { _daemon: daemon, socket });
    }
    for node in &nodes[1..] {
        wait_until("a node to join the master", STARTUP_TIMEOUT, || {
            let out = ctl(&cluster, &node.socket, &["status"]);
            String::from_utf8_lossy(&out.stdout).contains("joined, epoch").then_some(())
        });
    }
    (cluster, nodes)
}

fn ctl(cluster: &Cluster, socket: &Path, args: &[&str]) -> std::process::Output {
    cluster.command(mxfsctl_bin()).arg("--socket").arg(socket).args(args).output().expect("run mxfsctl")
}

// Goal: mutual exclusion across nodes. Method: 12 concurrent `mxfsctl lock counter EX` per
// node, each a non-atomic read-increment-write of one file; the final count must be the
// number of processes, and each process exits with its command's status (0).
#[test]
fn exclusive_locks_across_three_nodes_never_lose_an_increment() {
    let (cluster, nodes) = start_cluster();
    let counter = cluster.dir().join("counter");
    std::fs::write(&counter, "0\n").expect("write the counter");
    let script = format!("read n < {0}; sleep 0.01; echo $((n+1)) > {0}", counter.display());
    let mut children = Vec::new();
    for _ in 0..PROCESSES_PER_NODE {
        for node in &nodes {
            let child = cluster
                .command(mxfsctl_bin())
                .arg("--socket")
                .arg(&node.socket)
                .args(["lock", "counter", "EX", "--", "sh", "-c", &script])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start mxfsctl");
            children.push(child);
        }
    }
    for child in children {
        let out = child.wait_with_output().expect("wait for mxfsctl");
        assert!(out.status.success(), "mxfsctl failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let total = std::fs::read_to_string(&counter).expect("read the counter");
    assert_eq!(total.trim(), (PROCESSES_PER_NODE * nodes.len()).to_string());
    drop(nodes);
}

// Goal: the user-facing behaviour of `mxfsctl lock`: the command's exit code comes back,
// NOQUEUE fails at once with a clear message while another node holds the lock, `--timeout`
// gives up, and `mxfsctl locks` on the master shows the holder and the waiter.
#[test]
fn mxfsctl_reports_exit_codes_conflicts_and_the_lock_table() {
    let (cluster, nodes) = start_cluster();
    let out = ctl(&cluster, &nodes[1].socket, &["lock", "r", "PR", "--", "sh", "-c", "exit 7"]);
    assert_eq!(out.status.code(), Some(7));
    let flag = cluster.dir().join("holding");
    let release = cluster.dir().join("release");
    let hold = format!("touch {}; while [ ! -e {} ]; do sleep 0.05; done", flag.display(), release.display());
    let mut holder = cluster
        .command(mxfsctl_bin())
        .arg("--socket")
        .arg(&nodes[2].socket)
        .args(["lock", "r", "EX", "--", "sh", "-c", &hold])
        .spawn()
        .expect("start the holder");
    wait_until("the holder to hold the lock", IO_TIMEOUT, || flag.exists().then_some(()));
    let out = ctl(&cluster, &nodes[1].socket, &["lock", "r", "PR", "--noqueue", "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "mxfsctl: r: the lock is held in a conflicting mode\n");
    let out = ctl(&cluster, &nodes[0].socket, &["lock", "r", "CR", "--timeout", "0.3", "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "mxfsctl: r: timed out waiting for the lock\n");
    let table =
        String::from_utf8_lossy(&ctl(&cluster, &nodes[0].socket, &["locks", "r"]).stdout).into_owned();
    assert!(
        table.lines().any(|line| line.starts_with('r') && line.contains("EX") && line.contains("granted")),
        "{table}"
    );
    let status = String::from_utf8_lossy(&ctl(&cluster, &nodes[0].socket, &["status"]).stdout).into_owned();
    assert!(status.contains("MASTER: h1 (node 1)") && status.contains("h3"), "{status}");
    std::fs::write(&release, "").expect("release the holder");
    assert!(holder.wait().expect("wait for the holder").success());
    let out = ctl(&cluster, &nodes[1].socket, &["lock", "r", "EX", "--noqueue", "--", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop(nodes);
}
