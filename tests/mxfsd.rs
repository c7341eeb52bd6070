//! mxfsd on loopback: three daemons on 127.0.0.1 with per-host ports (lsf.cluster's
//! LAVA_MXFSD_PORT column) and separate client sockets; the lowest live node is the lock master.
//! Many `mxfsctl lock counter EX -- sh -c '…'` processes on all three nodes increment one
//! counter file, and no increment is lost. A lock holder's node killed with SIGKILL has its
//! locks released only after its lease expired and its journal recovery ran, and rejoins with
//! a new epoch; a master killed with SIGKILL is taken over by the next node with every
//! outstanding lock still granted, and takes back over when restarted; a node stopped past its
//! lease loses its locks and `mxfsctl lock` stops its command; garbage on the master's TCP port
//! closes that connection only. Every node renews with every peer and sees a killed one die; a
//! holder that ignores its BAST past the BAST timeout has its lock revoked, one taken by
//! `mxfsctl lock` does not.

mod util;

use std::ffi::OsStr;
use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lava_dlm_ll::LockMode;
use lava_dlm_wire as wire;
use lava_mxfsd::client::{Client, ClientError, ErrorCode, Grant, Reply};
use lava_net::{AuthConfig, Authenticator, ClusterKey, KeyRing, Nonce, system_now_ms};
use util::mxfsd::{HOSTS, Node, spawn_node, write_cluster_file};
use util::{Cluster, IO_TIMEOUT, LOOPBACK, STARTUP_TIMEOUT, wait_until};

/// Concurrent `mxfsctl lock` processes per node.
const PROCESSES_PER_NODE: usize = 12;
/// Lease settings of most tests: generous, so that a busy machine never expires a lease.
const NODE_TIMEOUT_MS: u64 = 5_000;
const RENEW_MS: u64 = 300;

fn mxfsd_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mxfsd"))
}

fn mxfsctl_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_mxfsctl"))
}

/// Starts the three daemons with the default lease settings.
fn start_cluster() -> (Cluster, Vec<Node>) {
    start_cluster_with(NODE_TIMEOUT_MS, RENEW_MS, |_| {})
}

/// Starts the three daemons in id order, each on a free port that goes into lsf.cluster
/// before the next starts; waits until both other nodes joined the master (h1).
/// `configure` runs on the cluster folder before any daemon starts. The BAST timeout is a
/// minute unless `configure` says otherwise: most tests hold locks that others wait for while
/// ignoring their BASTs, which must not be revoked on a slow machine.
fn start_cluster_with(
    node_timeout_ms: u64,
    renew_ms: u64,
    configure: impl FnOnce(&Cluster),
) -> (Cluster, Vec<Node>) {
    let mut cluster = Cluster::with_hosts(&HOSTS);
    cluster.rewrite_lsf_conf("LAVA_MXFSD_RENEW_MS", &renew_ms.to_string());
    cluster.rewrite_lsf_conf("LAVA_MXFSD_NODE_TIMEOUT_MS", &node_timeout_ms.to_string());
    cluster.rewrite_lsf_conf("LAVA_MXFSD_BAST_TIMEOUT_MS", "60000");
    configure(&cluster);
    write_cluster_file(&cluster, &[]);
    let mut nodes: Vec<Node> = Vec::new();
    for idx in 0..HOSTS.len() {
        let node = spawn_node(&mut cluster, idx, 0);
        nodes.push(node);
        write_cluster_file(&cluster, &nodes.iter().map(|node| node.port).collect::<Vec<_>>());
    }
    for node in &nodes[1..] {
        wait_until("a node to join the master", STARTUP_TIMEOUT, || joined_epoch(&node.socket));
    }
    (cluster, nodes)
}

fn ctl(cluster: &Cluster, socket: &Path, args: &[&str]) -> std::process::Output {
    cluster.command(mxfsctl_bin()).arg("--socket").arg(socket).args(args).output().expect("run mxfsctl")
}

fn connect(socket: &Path) -> Client {
    Client::connect(socket).unwrap_or_else(|error| panic!("connect to {}: {error}", socket.display()))
}

/// The daemon's status text, `None` while its socket does not answer.
fn status(socket: &Path) -> Option<String> {
    Client::connect(socket).ok()?.status().ok()
}

/// On a node that is not the master: the epoch it joined with, once joined.
fn joined_epoch(socket: &Path) -> Option<u64> {
    let text = status(socket)?;
    let line = text.lines().find(|line| line.starts_with("MASTER CONNECTION: joined, epoch "))?;
    line.rsplit(' ').next()?.parse().ok()
}

/// On the master: the master's own epoch (the `EPOCH:` line).
fn master_epoch(text: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix("EPOCH: "))
        .and_then(|epoch| epoch.trim().parse().ok())
        .unwrap_or_else(|| panic!("no EPOCH line in {text}"))
}

/// On the master: `host`'s row of the node table, as (status, epoch).
fn node_row(text: &str, host: &str) -> (String, u64) {
    text.lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields[..] {
                [_id, name, state, epoch, _locks] if name == host => {
                    Some((state.to_owned(), epoch.parse().ok()?))
                }
                _ => None,
            }
        })
        .unwrap_or_else(|| panic!("no row for {host} in {text}"))
}

/// The epoch a fencing token was granted in (its high 32 bits).
fn token_epoch(grant: &Grant) -> u64 {
    grant.token >> 32
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

// Goal: a one-host cluster (as `scripts/cluster up` runs it) is its own master at once: the
// rebuild ends as soon as it starts (every configured node is there), its previous journal is
// recovered, and it serves. Method: lsf.cluster with h1 only; mxfsd starts; its status says it
// is the master and serving; `mxfsctl lock` runs its command.
#[test]
fn one_host_cluster_is_its_own_master() {
    let mut cluster = Cluster::with_hosts(&["h1"]);
    let socket = cluster.dir().join("run/h1.sock");
    let ready = cluster.dir().join("run/h1.port");
    let args: Vec<&OsStr> = vec![
        "--host".as_ref(),
        "h1".as_ref(),
        "--port".as_ref(),
        "0".as_ref(),
        "--socket".as_ref(),
        socket.as_ref(),
        "--ready-file".as_ref(),
        ready.as_ref(),
    ];
    let mut daemon = cluster.spawn("mxfsd-h1", mxfsd_bin(), &args);
    daemon.wait_for_port_file(&ready, STARTUP_TIMEOUT);
    wait_until("the one host to serve", STARTUP_TIMEOUT, || master_is(&socket, "h1"));
    let out = ctl(&cluster, &socket, &["lock", "solo", "EX", "--noqueue", "--", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop(daemon);
}

/// The `name value` lines under `Counters:` in a status text.
fn counters(text: &str) -> Vec<(String, u64)> {
    let (_, section) = text.split_once("Counters:\n").unwrap_or_else(|| panic!("no Counters: in {text}"));
    section
        .lines()
        .map(|line| {
            let (name, value) = line.split_once(' ').unwrap_or_else(|| panic!("not `name value`: {line}"));
            (name.to_owned(), value.parse().unwrap_or_else(|_| panic!("not a number: {line}")))
        })
        .collect()
}

/// The counters of the daemon behind `socket`.
fn status_counters(socket: &Path) -> Vec<(String, u64)> {
    counters(&status(socket).expect("the status"))
}

fn counter(counters: &[(String, u64)], name: &str) -> u64 {
    counters
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no {name} in {counters:?}"))
}

// Goal: `mxfsctl status` counts what the daemon did. Method: a one-host cluster (its own
// master, so nothing else talks to it); two EX/PR locks granted, a NOQUEUE request refused, a
// waiting request that times out (the holder gets a BAST), an unlock of an unknown handle; then
// the counters of requests, refusals and the lock table are exact, and `mxfsctl status` prints
// the same section.
#[test]
fn status_counts_requests_refusals_and_locks() {
    let mut cluster = Cluster::with_hosts(&["h1"]);
    let socket = cluster.dir().join("run/h1.sock");
    let ready = cluster.dir().join("run/h1.port");
    let args: Vec<&OsStr> = vec![
        "--host".as_ref(),
        "h1".as_ref(),
        "--port".as_ref(),
        "0".as_ref(),
        "--socket".as_ref(),
        socket.as_ref(),
        "--ready-file".as_ref(),
        ready.as_ref(),
    ];
    let mut daemon = cluster.spawn("mxfsd-h1", mxfsd_bin(), &args);
    daemon.wait_for_port_file(&ready, STARTUP_TIMEOUT);
    wait_until("the one host to serve", STARTUP_TIMEOUT, || master_is(&socket, "h1"));
    let base = counters(&status(&socket).expect("the status"));
    let mut holder = connect(&socket);
    let ex = holder.lock("a", LockMode::Ex, false, None).expect("EX on a");
    holder.lock("b", LockMode::Pr, false, None).expect("PR on b");
    let mut other = connect(&socket);
    match other.lock("a", LockMode::Pr, true, None) {
        Err(ClientError::Refused { code: ErrorCode::WouldBlock, .. }) => {}
        other => panic!("NOQUEUE PR on a held EX: {other:?}"),
    }
    match other.lock("a", LockMode::Cw, false, Some(Duration::from_millis(200))) {
        Err(ClientError::Refused { code: ErrorCode::Timeout, .. }) => {}
        other => panic!("CW on a held EX with a timeout: {other:?}"),
    }
    match other.unlock(ex.handle) {
        Err(ClientError::Refused { code: ErrorCode::NotHeld, .. }) => {}
        other => panic!("unlock of another client's handle: {other:?}"),
    }
    let text = status(&socket).expect("the status");
    let now = counters(&text);
    let moved = |name: &str| counter(&now, name) - counter(&base, name);
    assert_eq!(moved("client_requests.lock"), 4, "{text}");
    assert_eq!(moved("client_requests.unlock"), 1, "{text}");
    assert_eq!(moved("client_requests.status"), 1, "{text}");
    assert_eq!(moved("client_refusals.would_block"), 1, "{text}");
    assert_eq!(moved("client_refusals.timeout"), 1, "{text}");
    assert_eq!(moved("client_refusals.not_held"), 1, "{text}");
    assert_eq!(moved("client_refusals.permission"), 0, "{text}");
    assert_eq!(moved("connections.clients"), 3, "{text}");
    assert!(moved("basts_sent") >= 1, "the EX holder of a gets a BAST: {text}");
    assert_eq!(counter(&now, "is_master"), 1, "{text}");
    assert_eq!(counter(&now, "epoch"), master_epoch(&text), "{text}");
    assert_eq!(counter(&now, "table.granted"), 2, "{text}");
    assert_eq!(counter(&now, "table.granted.EX"), 1, "{text}");
    assert_eq!(counter(&now, "table.granted.PR"), 1, "{text}");
    assert_eq!(counter(&now, "local.granted"), 2, "{text}");
    assert_eq!(counter(&now, "recoveries.pending"), 0, "{text}");
    assert_eq!(counter(&now, "received.LOCK_REQ"), 0, "no other node: {text}");
    let out = ctl(&cluster, &socket, &["status"]);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.contains("\nCounters:\nreceived.LOCK_REQ 0\n"), "{printed}");
    drop(holder);
    drop(other);
    drop(daemon);
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
    // The master heard three LOCK_REQs over TCP (h2's two, h3's one; h1's own request does not
    // cross the network) and denied one; nothing was refused.
    let counters = counters(&status);
    assert_eq!(counter(&counters, "received.LOCK_REQ"), 3, "{status}");
    assert_eq!(counter(&counters, "sent.LOCK_DENY"), 1, "{status}");
    assert!(counter(&counters, "received.NODE_JOIN") >= 2, "{status}");
    assert!(counter(&counters, "sent.LOCK_GRANT") >= 2, "{status}");
    assert_eq!(counter(&counters, "table.granted.EX"), 1, "h3's EX: {status}");
    for reason in ["magic", "version", "type", "length", "malformed", "auth", "invalid"] {
        assert_eq!(counter(&counters, &format!("refused.{reason}")), 0, "{status}");
    }
    let h2 = status_counters(&nodes[1].socket);
    assert_eq!(counter(&h2, "sent.LOCK_REQ"), 2, "{h2:?}");
    assert_eq!(counter(&h2, "received.LOCK_DENY"), 1, "{h2:?}");
    assert_eq!(counter(&h2, "client_refusals.would_block"), 1, "{h2:?}");
    assert_eq!(counter(&h2, "is_master"), 0, "{h2:?}");
    std::fs::write(&release, "").expect("release the holder");
    assert!(holder.wait().expect("wait for the holder").success());
    let out = ctl(&cluster, &nodes[1].socket, &["lock", "r", "EX", "--noqueue", "--", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop(nodes);
}

/// The master's lock table for `resource`, as (node, mode, state) rows.
fn lock_rows(master_socket: &Path, resource: &str) -> Vec<(String, String, String)> {
    let text = connect(master_socket).locks(Some(resource)).expect("the master's lock table");
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields[..] {
                [name, node, _lock, mode, state] if name == resource => {
                    Some((node.to_owned(), mode.to_owned(), state.to_owned()))
                }
                _ => None,
            }
        })
        .collect()
}

fn row(node: &str, mode: &str, state: &str) -> (String, String, String) {
    (node.to_owned(), mode.to_owned(), state.to_owned())
}

/// The lines of the recovery log that say `what` (`start` or `done`) for `node`.
fn recovery_lines(log: &Path, what: &str, node: u32) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|line| {
            line.split_whitespace().collect::<Vec<_>>() == [what, &node.to_string(), &(node - 1).to_string()]
        })
        .count()
}

// Goal: the node death sequence end to end (lava-dlm-logic's crate doc): the EX lock of a node
// killed with SIGKILL stays fenced until its lease expired and its journal recovery finished,
// and only then goes to the waiter; the node restarted rejoins with a newer epoch.
// Method: leases of 2 s renewed every 250 ms; a recovery command that logs `start ID SLOT`,
// sleeps 1 s and logs `done ID SLOT` (at start-up every node's previous journal is recovered
// once: the test waits for those three). A client on h2 holds EX on R (and is told by a BAST
// that h3 waits); a client on h3 asks for EX on R in a thread; h2's mxfsd is killed with
// SIGKILL. While the master's table shows h2's lock fenced, h3 still waits (one snapshot);
// h3's grant comes after the second `done 2 1` (checked by the waiting thread the instant it
// is granted), no sooner than lease expiry plus the recovery's sleep, with a fencing token of
// a newer epoch. h2 restarted joins again with an epoch above its old one, and gets R once h3
// lets go.
#[test]
fn killed_holder_node_releases_its_locks_only_after_lease_expiry_and_recovery() {
    const TIMEOUT_MS: u64 = 2_000;
    const RENEW: u64 = 250;
    const RECOVERY_SLEEP_MS: u64 = 1_000;
    let mut recovery_log = None;
    let (mut cluster, mut nodes) = start_cluster_with(TIMEOUT_MS, RENEW, |cluster| {
        let log = cluster.dir().join("recovery.log");
        let script = cluster.dir().join("recover.sh");
        std::fs::write(
            &script,
            format!(
                "echo \"start $1 $2\" >> {0}\nsleep {1}\necho \"done $1 $2\" >> {0}\n",
                log.display(),
                RECOVERY_SLEEP_MS as f64 / 1000.0,
            ),
        )
        .expect("write the recovery script");
        let command = format!("'sh {} \"$1\" \"$2\"'", script.display());
        cluster.rewrite_lsf_conf("LAVA_MXFSD_RECOVERY_CMD", &command);
        recovery_log = Some(log);
    });
    let log = recovery_log.expect("configured");
    for node in 1..=3 {
        wait_until("the start-up recoveries", STARTUP_TIMEOUT, || {
            (recovery_lines(&log, "done", node) >= 1).then_some(())
        });
    }
    let (started_2, done_2) = (recovery_lines(&log, "start", 2), recovery_lines(&log, "done", 2));
    let master = nodes[0].socket.clone();
    let (state, old_epoch) = node_row(&status(&master).expect("the master's status"), "h2");
    assert_eq!(state, "ok");

    let mut holder = connect(&nodes[1].socket);
    let held = holder.lock("R", LockMode::Ex, false, Some(IO_TIMEOUT)).expect("h2 locks R");
    let (granted_tx, granted_rx) = mpsc::channel();
    let waiter_socket = nodes[2].socket.clone();
    let waiter_log = log.clone();
    let waiter = std::thread::spawn(move || {
        let mut client = connect(&waiter_socket);
        let result = client.lock("R", LockMode::Ex, false, Some(2 * IO_TIMEOUT));
        let done_at_grant = recovery_lines(&waiter_log, "done", 2) > done_2;
        let _sent =
            granted_tx.send((result.map_err(|error| error.to_string()), Instant::now(), done_at_grant));
        // The lock stays held as long as this connection is open.
        client
    });
    wait_until("h3's request to queue behind h2", IO_TIMEOUT, || {
        lock_rows(&master, "R").contains(&row("3", "EX", "waiting")).then_some(())
    });
    let bast = holder.next_notification(IO_TIMEOUT).expect("a notification");
    assert_eq!(bast, Some(Reply::Bast { handle: held.handle, mode: LockMode::Ex }));
    assert!(granted_rx.try_recv().is_err(), "h3 was granted R while h2 holds it");

    let killed_at = Instant::now();
    nodes[1].daemon.kill();
    drop(holder);
    let mut saw_fenced = false;
    let (result, granted_at, done_at_grant) = wait_until("h3's grant", IO_TIMEOUT, || {
        if let Ok(granted) = granted_rx.try_recv() {
            return Some(granted);
        }
        if !saw_fenced {
            let rows = lock_rows(&master, "R");
            if rows.contains(&row("2", "EX", "fenced")) {
                assert!(rows.contains(&row("3", "EX", "waiting")), "fenced, yet h3 does not wait: {rows:?}");
                assert_eq!(
                    recovery_lines(&log, "done", 2),
                    done_2,
                    "the lock is still fenced after the recovery finished"
                );
                saw_fenced = true;
            }
        }
        None
    });
    let granted = result.expect("h3 is granted R once h2 is recovered");
    assert!(saw_fenced, "h2's lock was never seen fenced");
    assert!(done_at_grant, "h3 was granted R before h2's journal recovery finished");
    assert_eq!(
        recovery_lines(&log, "start", 2),
        started_2 + 1,
        "the recovery gets the dead node's id and journal slot"
    );
    let waited = granted_at - killed_at;
    let earliest = Duration::from_millis(TIMEOUT_MS - 2 * RENEW + RECOVERY_SLEEP_MS);
    assert!(waited >= earliest, "h3 was granted {waited:?} after the kill, before lease expiry and recovery");
    assert!(token_epoch(&granted) > token_epoch(&held), "{granted:?} is not fenced above {held:?}");
    let (state, _) = node_row(&status(&master).expect("the master's status"), "h2");
    assert_eq!(state, "unavail");

    nodes[1] = spawn_node(&mut cluster, 1, 0);
    let joined = wait_until("h2 to join again", STARTUP_TIMEOUT, || joined_epoch(&nodes[1].socket));
    let (state, new_epoch) = node_row(&status(&master).expect("the master's status"), "h2");
    assert_eq!(state, "ok");
    assert_eq!(new_epoch, joined);
    assert!(new_epoch > old_epoch, "h2 rejoined with epoch {new_epoch}, not above {old_epoch}");
    let mut again = connect(&nodes[1].socket);
    let out = ctl(&cluster, &nodes[1].socket, &["lock", "R", "EX", "--noqueue", "--", "true"]);
    assert_eq!(out.status.code(), Some(1), "h3 still holds R");
    drop(waiter.join().expect("the waiting thread"));
    let regained = again.lock("R", LockMode::Ex, false, Some(IO_TIMEOUT)).expect("h2 locks R again");
    assert!(token_epoch(&regained) >= new_epoch);
    drop(nodes);
}

// Goal: CACHE_INVAL end to end through the client library: a holder's invalidation reaches
// every other holder of the resource — on its own node, on another node, on the master —
// as a notification naming the receiver's own handle and the byte range, and not the sender.
// Method: PR/CR holders of `c` on h2 (two connections), h3 and h1; one h2 holder invalidates
// 4096+512; the three others are notified. Then h1's holder invalidates 0+1 and the first h2
// holder's next notification is that one (it was not sent its own). Invalidating through a
// handle that is not a granted lock of the connection is refused.
#[test]
fn cache_inval_reaches_every_other_holder_of_the_resource() {
    let (_cluster, nodes) = start_cluster();
    let mut sender = connect(&nodes[1].socket);
    let sent = sender.lock("c", LockMode::Pr, false, Some(IO_TIMEOUT)).expect("h2 locks c");
    let mut holders = Vec::new();
    for (idx, mode) in [(1, LockMode::Pr), (2, LockMode::Pr), (0, LockMode::Cr)] {
        let mut client = connect(&nodes[idx].socket);
        let grant = client.lock("c", mode, false, Some(IO_TIMEOUT)).expect("lock c");
        holders.push((client, grant));
    }
    sender.cache_inval(sent.handle, 4096, 512).expect("h2 invalidates c");
    for (client, grant) in &mut holders {
        let note = client.next_notification(IO_TIMEOUT).expect("a notification");
        assert_eq!(note, Some(Reply::CacheInval { handle: grant.handle, start: 4096, length: 512 }));
    }
    let (master_client, master_grant) = holders.last_mut().expect("h1's holder");
    master_client.cache_inval(master_grant.handle, 0, 1).expect("h1 invalidates c");
    let note = sender.next_notification(IO_TIMEOUT).expect("a notification");
    assert_eq!(note, Some(Reply::CacheInval { handle: sent.handle, start: 0, length: 1 }));
    match sender.cache_inval(sent.handle + 1_000, 0, 1) {
        Err(lava_mxfsd::client::ClientError::Refused { .. }) => {}
        other => panic!("invalidating through a stranger's handle: {other:?}"),
    }
    drop(nodes);
}

// Goal: the client socket's limits: a client that starts a request and stalls is closed after
// LAVA_MXFSD_CLIENT_TIMEOUT_MS (an idle one is not), and beyond LAVA_MXFSD_MAX_CLIENTS a new
// client is answered "too many clients" and closed, the others served. Method: a timeout of
// 300 ms and a cap of 3 on h2; an idle client and a client that sent half a length prefix;
// the half-sent one is closed, the idle one still answers; with 3 clients open a fourth is
// refused with Unavailable naming the limit; once one goes, a new client is served again.
#[test]
fn client_socket_closes_stalled_requests_and_caps_its_clients() {
    let (_cluster, nodes) = start_cluster_with(NODE_TIMEOUT_MS, RENEW_MS, |cluster| {
        cluster.rewrite_lsf_conf("LAVA_MXFSD_CLIENT_TIMEOUT_MS", "300");
        cluster.rewrite_lsf_conf("LAVA_MXFSD_MAX_CLIENTS", "3");
    });
    let socket = &nodes[1].socket;
    let mut idle = connect(socket);
    idle.status().expect("the idle client is served");
    let mut stalled = std::os::unix::net::UnixStream::connect(socket).expect("connect");
    stalled.write_all(&[0, 0]).expect("half a length prefix");
    stalled.set_read_timeout(Some(IO_TIMEOUT)).expect("a read timeout");
    let mut buffer = [0u8; 16];
    match stalled.read(&mut buffer) {
        Ok(0) => {}
        other => panic!("the stalled client was not closed: {other:?}"),
    }
    drop(stalled);
    std::thread::sleep(Duration::from_millis(400));
    idle.status().expect("an idle client is kept past the client timeout");
    let mut second = connect(socket);
    second.status().expect("the second client is served");
    let mut third = connect(socket);
    third.status().expect("the third client is served");
    match connect(socket).status() {
        Err(ClientError::Refused { code: ErrorCode::Unavailable, message }) => {
            assert!(message.contains("too many clients"), "{message}")
        }
        other => panic!("a fourth client: {other:?}"),
    }
    drop(third);
    wait_until("a new client to be served again", IO_TIMEOUT, || connect(socket).status().ok());
    let text = idle.status().expect("the first client is still served");
    let counters = counters(&text);
    assert_eq!(counter(&counters, "client_refusals.slow_request"), 1, "{text}");
    // The wait for a free slot may have been turned away more than once.
    assert!(counter(&counters, "client_refusals.too_many_clients") >= 1, "{text}");
    drop((idle, second));
    drop(nodes);
}

// Goal: LAVA_MXFSD_GROUP: the socket is open to everyone, anyone may ask STATUS, and only root,
// mxfsd's own user and members of the group may lock. Method (as root only: it runs mxfsctl as
// other users): group 4242; `mxfsctl status` as nobody (uid/gid 65534) works, `mxfsctl lock` as
// nobody is refused with a message saying why and does not run its command, as uid 65534 with
// gid 4242 it runs.
#[test]
fn only_the_lock_group_may_lock() {
    let is_root = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0);
    if is_root.ok() != Some(true) {
        eprintln!("only_the_lock_group_may_lock: needs root to run mxfsctl as other users; skipped");
        return;
    }
    let (cluster, nodes) = start_cluster_with(NODE_TIMEOUT_MS, RENEW_MS, |cluster| {
        cluster.rewrite_lsf_conf("LAVA_MXFSD_GROUP", "4242");
    });
    for folder in [cluster.dir().to_owned(), cluster.dir().join("run")] {
        util::chmod(&folder, 0o755);
    }
    let as_user = |gid: u32, args: &[&str]| {
        use std::os::unix::process::CommandExt as _;
        cluster
            .command(mxfsctl_bin())
            .uid(65_534)
            .gid(gid)
            .arg("--socket")
            .arg(&nodes[1].socket)
            .args(args)
            .output()
            .expect("run mxfsctl as another user")
    };
    let out = as_user(65_534, &["status"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let marker = cluster.dir().join("ran");
    let touch = format!("touch {}", marker.display());
    let out = as_user(65_534, &["lock", "g", "EX", "--", "sh", "-c", &touch]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("uid 65534 may not lock"), "{stderr}");
    assert!(!marker.exists(), "the command ran without the lock");
    let out = as_user(4242, &["lock", "g", "EX", "--", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = status(&nodes[1].socket).expect("h2's status");
    assert_eq!(counter(&counters(&text), "client_refusals.permission"), 1, "{text}");
    drop(nodes);
}

/// Whether `socket`'s daemon takes `host` as its master (and, on the master, serves).
fn master_is(socket: &Path, host: &str) -> Option<()> {
    let text = status(socket)?;
    let named = text.lines().any(|line| line.starts_with(&format!("MASTER: {host} ")));
    let serving = !text.contains("STATE: ") || text.contains("STATE: serving\n");
    let joined = text.contains("MASTER CONNECTION: joined") || text.contains("STATE: ");
    (named && serving && joined).then_some(())
}

// Goal: master takeover (spec "Lock Mastering"): the master killed with SIGKILL, the next node
// takes over, rebuilds the lock table from what the survivors hold, and outstanding locks stay
// granted; requests waiting at the dead master wait on, and new requests are served by the new
// master; the old master restarted is the lowest live node again and takes back over, the
// locks surviving a second time.
// Method: h2 holds EX on m (told by a BAST that h3 waits) and h3 holds PR on q; h3 waits for m
// in a thread; h1 is killed with SIGKILL. h2 becomes the master (its status says so, with an
// epoch above h1's) and h3 joins it; the rebuilt table shows h2's EX on m granted, h3's PR on q
// granted and h3 waiting for m. A new lock on another resource works from h3. h2 unlocks m
// with its old handle (the lock was never lost) and h3's waiting request is granted with a
// token of the new epoch. h2 (master) grants PR on s to its own client; h1 restarted on its
// port: h2 steps down, h2 and h3 join h1, h3's PR on q and h2's PR on s are still held (a
// NOQUEUE EX from h2 on q is refused) and unlock cleanly.
#[test]
fn killed_master_is_taken_over_by_the_next_node_and_locks_stay_granted() {
    let (mut cluster, mut nodes) = start_cluster();
    let h1_port = nodes[0].port;
    let old_epoch = master_epoch(&status(&nodes[0].socket).expect("the master's status"));
    let mut holder = connect(&nodes[1].socket);
    let held = holder.lock("m", LockMode::Ex, false, Some(IO_TIMEOUT)).expect("h2 locks m");
    assert_eq!(token_epoch(&held), old_epoch);
    let mut reader = connect(&nodes[2].socket);
    let read = reader.lock("q", LockMode::Pr, false, Some(IO_TIMEOUT)).expect("h3 locks q");
    let waiter_socket = nodes[2].socket.clone();
    let waiter = std::thread::spawn(move || {
        let mut client = connect(&waiter_socket);
        let result = client.lock("m", LockMode::Ex, false, Some(3 * IO_TIMEOUT));
        (result.map_err(|error| error.to_string()), client)
    });
    wait_until("h3's request to queue behind h2", IO_TIMEOUT, || {
        lock_rows(&nodes[0].socket, "m").contains(&row("3", "EX", "waiting")).then_some(())
    });
    let bast = holder.next_notification(IO_TIMEOUT).expect("a notification");
    assert_eq!(bast, Some(Reply::Bast { handle: held.handle, mode: LockMode::Ex }));

    nodes[0].daemon.kill();
    wait_until("h2 to take over", STARTUP_TIMEOUT, || master_is(&nodes[1].socket, "h2"));
    wait_until("h3 to join h2", STARTUP_TIMEOUT, || master_is(&nodes[2].socket, "h2"));
    let table = status(&nodes[1].socket).expect("the new master's status");
    let new_epoch = master_epoch(&table);
    assert!(new_epoch > old_epoch, "the new master's epoch {new_epoch} is not above {old_epoch}");
    assert_eq!(node_row(&table, "h1").0, "unavail", "{table}");
    assert_eq!(node_row(&table, "h3").0, "ok", "{table}");
    assert_eq!(lock_rows(&nodes[1].socket, "q"), vec![row("3", "PR", "granted")]);
    wait_until("h3's request to wait at the new master", IO_TIMEOUT, || {
        (lock_rows(&nodes[1].socket, "m") == vec![row("2", "EX", "granted"), row("3", "EX", "waiting")])
            .then_some(())
    });
    let out = ctl(&cluster, &nodes[2].socket, &["lock", "other", "EX", "--", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    holder.unlock(held.handle).expect("h2 unlocks m with its handle from before the takeover");
    let (result, _waiting_client) = waiter.join().expect("the waiting thread");
    let granted = result.expect("h3's request waiting since before the takeover is granted");
    assert!(token_epoch(&granted) >= new_epoch, "{granted:?} is not of the new epoch {new_epoch}");

    // A lock granted by h2 as master goes with h2 when it steps down.
    let mut stepping = connect(&nodes[1].socket);
    let kept =
        stepping.lock("s", LockMode::Pr, false, Some(IO_TIMEOUT)).expect("h2 locks s at its own master");
    nodes[0] = spawn_node(&mut cluster, 0, h1_port);
    for node in &nodes {
        wait_until("every node to take h1 as master again", STARTUP_TIMEOUT, || {
            master_is(&node.socket, "h1")
        });
    }
    assert_eq!(lock_rows(&nodes[0].socket, "q"), vec![row("3", "PR", "granted")]);
    assert_eq!(lock_rows(&nodes[0].socket, "s"), vec![row("2", "PR", "granted")]);
    stepping.unlock(kept.handle).expect("h2 unlocks s after stepping down");
    let out = ctl(&cluster, &nodes[1].socket, &["lock", "q", "EX", "--noqueue", "--", "true"]);
    assert_eq!(out.status.code(), Some(1), "h2 got q while h3 holds it");
    reader.unlock(read.handle).expect("h3 unlocks q with its handle from before both takeovers");
    let out = ctl(&cluster, &nodes[1].socket, &["lock", "q", "EX", "--noqueue", "--", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop(nodes);
}

// Goal: a silently dead master (stopped, not closed) is noticed by its silence within the node
// timeout and taken over like a crashed one; when it wakes up it finds itself without a quorum,
// starts over with a new table (its own client's lock, fenced by the new master, is lost), and
// as the lowest node takes back over, the others' locks surviving both changes.
// Method: node timeout 1.5 s; h1's client holds EX on a, h3's client PR on b; SIGSTOP h1; h2
// takes over and h3 joins it with b still granted; h2's client locks PR on c at h2; SIGCONT h1;
// every node takes h1 as master again, h1's client is told its lock on a is LOST, b is still
// h3's and c h2's, and a is free.
#[test]
fn stopped_master_is_taken_over_and_starts_over_when_it_wakes() {
    let (cluster, nodes) = start_cluster_with(1_500, 250, |_| {});
    let mut h1_client = connect(&nodes[0].socket);
    let a = h1_client.lock("a", LockMode::Ex, false, Some(IO_TIMEOUT)).expect("h1 locks a");
    let mut h3_client = connect(&nodes[2].socket);
    let b = h3_client.lock("b", LockMode::Pr, false, Some(IO_TIMEOUT)).expect("h3 locks b");
    let pid = nodes[0].daemon.pid().to_string();
    let signal = |name: &str| {
        let status = std::process::Command::new("kill").args([name, &pid]).status().expect("run kill");
        assert!(status.success(), "kill {name} {pid}");
    };
    signal("-STOP");
    wait_until("h2 to take over from the stopped h1", STARTUP_TIMEOUT, || master_is(&nodes[1].socket, "h2"));
    wait_until("h3 to join h2", STARTUP_TIMEOUT, || master_is(&nodes[2].socket, "h2"));
    assert_eq!(
        lock_rows(&nodes[1].socket, "b"),
        vec![row("3", "PR", "granted")],
        "h2:\n{}\nh3:\n{}",
        nodes[1].daemon.log(),
        nodes[2].daemon.log()
    );
    // A lock granted by h2 as master, kept when h1 (waking) refuses h2's probes at first and
    // when h2 steps down for it.
    let mut h2_client = connect(&nodes[1].socket);
    let c = h2_client.lock("c", LockMode::Pr, false, Some(IO_TIMEOUT)).expect("h2 locks c");
    signal("-CONT");
    for node in &nodes {
        wait_until("every node to take h1 as master again", STARTUP_TIMEOUT, || {
            master_is(&node.socket, "h1")
        });
    }
    let lost = h1_client.next_notification(IO_TIMEOUT).expect("a notification");
    assert_eq!(lost, Some(Reply::Lost { handle: a.handle }));
    assert_eq!(lock_rows(&nodes[0].socket, "b"), vec![row("3", "PR", "granted")]);
    assert_eq!(lock_rows(&nodes[0].socket, "c"), vec![row("2", "PR", "granted")]);
    h2_client.unlock(c.handle).expect("h2 unlocks c");
    let out = ctl(&cluster, &nodes[1].socket, &["lock", "a", "EX", "--noqueue", "--", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    h3_client.unlock(b.handle).expect("h3 unlocks b with its handle from before both changes");
    drop(nodes);
}

// Goal: `mxfsctl lock R MODE -- CMD` never lets CMD run unprotected: when the lock is lost (here
// h2's mxfsd is stopped past the node timeout, so the master declares it dead and recovers it;
// on waking up h2 learns it and fails its locks), the command is stopped at once and mxfsctl
// fails with a message naming the resource. Method: a `sleep 600` under an EX lock on h2;
// SIGSTOP h2's mxfsd until the master shows h2 recovered, then SIGCONT; mxfsctl must exit
// non-zero, long before the sleep would have ended, and say the lock was lost.
#[test]
fn mxfsctl_stops_its_command_when_the_lock_is_lost() {
    let (cluster, nodes) = start_cluster_with(1_500, 250, |_| {});
    let mut guarded = KillOnDrop(
        cluster
            .command(mxfsctl_bin())
            .arg("--socket")
            .arg(&nodes[1].socket)
            .args(["lock", "guarded", "EX", "--", "sleep", "600"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start mxfsctl"),
    );
    wait_until("h2's mxfsctl to hold the lock", IO_TIMEOUT, || {
        lock_rows(&nodes[0].socket, "guarded").contains(&row("2", "EX", "granted")).then_some(())
    });
    let pid = nodes[1].daemon.pid().to_string();
    let signal = |name: &str| {
        let status = std::process::Command::new("kill").args([name, &pid]).status().expect("run kill");
        assert!(status.success(), "kill {name} {pid}");
    };
    signal("-STOP");
    wait_until("the master to recover h2", IO_TIMEOUT, || {
        (node_row(&status(&nodes[0].socket)?, "h2").0 == "unavail").then_some(())
    });
    signal("-CONT");
    let status =
        wait_until("mxfsctl to stop its command", IO_TIMEOUT, || guarded.0.try_wait().expect("try_wait"));
    assert_eq!(status.code(), Some(1));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut guarded.0.stderr.take().expect("piped stderr"), &mut stderr)
        .expect("read stderr");
    assert!(stderr.contains("guarded: lock lost; stopping sleep"), "{stderr}");
    drop(nodes);
}

/// A child process killed (with its own children left to the test's cluster
/// guard) when the test ends, also when it fails.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _already_gone = self.0.kill();
        let _reaped = self.0.wait();
    }
}

/// A NODE_JOIN from node 2 (h2), as the daemon frames it, sealed by `auth`.
fn sealed_join(auth: &Authenticator) -> Vec<u8> {
    let envelope = wire::Envelope { seq: 1, sender: 2, target: 1, epoch: 0 };
    let join = wire::Message::NodeJoin(wire::NodeMsg { port: 0, name: b"h2".to_vec() });
    seal(auth, wire::encode_unsealed(envelope, &join))
}

fn seal(auth: &Authenticator, mut bytes: Vec<u8>) -> Vec<u8> {
    let trailer = auth.seal_bytes(&bytes, system_now_ms(), Nonce::fresh().expect("a nonce"));
    bytes.extend_from_slice(&trailer);
    bytes
}

/// `frame` with `bytes` written over it at `at`.
fn patched(frame: &[u8], at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut out = frame.to_vec();
    out[at..at + bytes.len()].copy_from_slice(bytes);
    out
}

/// Sends `bytes` on a new connection to `addr` and checks that the daemon closes it.
fn assert_closed(addr: SocketAddr, bytes: &[u8], what: &str) {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|error| panic!("{what}: connect: {error}"));
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("set a read timeout");
    // The daemon may close before it has read everything: a failed write is fine.
    let _written = stream.write_all(bytes);
    let mut buffer = [0u8; 256];
    match stream.read(&mut buffer) {
        Ok(0) => {}
        Err(error) if matches!(error.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {}
        Ok(n) => panic!("{what}: the daemon answered {n} bytes"),
        Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!("{what}: the connection was left open")
        }
        Err(error) => panic!("{what}: {error}"),
    }
}

// Goal: bad input on the daemons' TCP port costs the sender its connection and nothing else.
// Method: against the master, one connection each for: random bytes, a wrong magic, an unknown
// version, an unknown type, a length below the minimum, oversized lengths, a NODE_JOIN with its
// MAC altered, with its payload altered after sealing, sealed with another cluster key, and an
// authenticated LOCK_REQ whose payload is malformed. Each connection is closed and the master
// logs the reason; a connection idle after half a header holds nobody up. Random bytes to a
// node that is not the master are refused too. Afterwards the node table is unchanged (the
// forged NODE_JOINs in h2's name did not declare h2 dead) and `mxfsctl lock` works on every
// node.
#[test]
fn garbage_on_the_tcp_port_closes_that_connection_and_the_daemon_keeps_serving() {
    let (cluster, nodes) = start_cluster();
    let master = SocketAddr::new(LOOPBACK, nodes[0].port);
    let before = status(&nodes[0].socket).expect("the master's status");
    let mut idle = TcpStream::connect(master).expect("connect to the master");
    idle.write_all(&wire::DLM_MAGIC.to_be_bytes()[..3]).expect("half a header");

    let mut random = Vec::with_capacity(512);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    while random.len() < 512 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        random.extend_from_slice(&x.to_le_bytes());
    }
    assert_ne!(random[..4], wire::DLM_MAGIC.to_be_bytes());
    let join = sealed_join(&cluster.authenticator());
    let oversized = |length: u32| {
        let mut frame = patched(&join, 8, &length.to_be_bytes());
        frame.resize(4096, 0);
        frame
    };
    let mut mac_altered = join.clone();
    *mac_altered.last_mut().expect("a trailer") ^= 1;
    // The name's last byte: `h2` becomes `h3`.
    let name_end = wire::HEADER_BYTES + 4 + 1;
    let payload_altered = patched(&join, name_end, b"3");
    let other_key = ClusterKey::generate_file(cluster.dir().join("other.key")).expect("another key");
    let other_auth = Authenticator::new(KeyRing::new(&other_key), AuthConfig::default());
    let malformed = {
        let length = (wire::HEADER_BYTES + 3 + wire::TRAILER_BYTES) as u32;
        let mut bytes = patched(&join[..wire::HEADER_BYTES], 6, &wire::msg_type::LOCK_REQ.to_be_bytes());
        bytes[8..12].copy_from_slice(&length.to_be_bytes());
        bytes.extend_from_slice(&[1, 2, 3]);
        seal(&cluster.authenticator(), bytes)
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("random bytes", random.clone(), "wrong magic"),
        ("a wrong magic", patched(&join, 0, &0x4D58_4654u32.to_be_bytes()), "wrong magic 0x4d584654"),
        ("an unknown version", patched(&join, 4, &2u16.to_be_bytes()), "unknown DLM version 2"),
        ("an unknown type", patched(&join, 6, &99u16.to_be_bytes()), "unknown DLM message type 99"),
        ("a length below the minimum", patched(&join, 8, &40u32.to_be_bytes()), "length 40 is below"),
        ("an oversized length", oversized(1 << 20), "oversized message: length 1048576"),
        ("the largest length", oversized(u32::MAX), "oversized message: length 4294967295"),
        ("an altered MAC", mac_altered, "bad MAC"),
        ("a payload altered after sealing", payload_altered, "bad MAC"),
        (
            "another cluster key",
            seal(&other_auth, join[..join.len() - wire::TRAILER_BYTES].to_vec()),
            "sealed with key",
        ),
        ("an authenticated malformed payload", malformed, "malformed LOCK_REQ payload"),
    ];
    for (what, bytes, reason) in &cases {
        assert_closed(master, bytes, what);
        wait_until(&format!("the master to log why it closed {what}"), IO_TIMEOUT, || {
            nodes[0].daemon.log().contains(reason).then_some(())
        });
    }
    assert_closed(SocketAddr::new(LOOPBACK, nodes[1].port), &random, "random bytes to a node");
    // Each refusal counted under its reason, on the master.
    let counters = counters(&status(&nodes[0].socket).expect("the master's status"));
    for (name, expected) in [
        ("refused.magic", 2),
        ("refused.version", 1),
        ("refused.type", 1),
        ("refused.length", 3),
        ("refused.auth", 3),
        ("refused.malformed", 1),
        ("refused.invalid", 0),
    ] {
        assert_eq!(counter(&counters, name), expected, "{name} in {counters:?}");
    }

    let after = status(&nodes[0].socket).expect("the master's status");
    assert_eq!(master_epoch(&after), master_epoch(&before), "{after}");
    for host in ["h2", "h3"] {
        assert_eq!(node_row(&after, host), node_row(&before, host), "{after}");
    }
    for node in &nodes {
        let out = ctl(&cluster, &node.socket, &["lock", "after-garbage", "EX", "--", "true"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    drop(idle);
    drop(nodes);
}

/// `host`'s liveness in the PEERS table of a status text (`waiting`, `alive`, `dead`).
fn peer_state(text: &str, host: &str) -> Option<String> {
    let (_, table) = text.split_once("\nPEERS: ")?;
    let (table, _) = table.split_once("Counters:\n")?;
    table.lines().find_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
        [_id, name, state, _last] if name == host => Some(state.to_owned()),
        _ => None,
    })
}

// Goal: LEASE_RENEW goes to every peer, NODE_ALIVE travels on it, and every node keeps its
// peers' liveness as the spec's death sequence describes (steps 1 to 3), the master alone acting
// on a death. Method: on each of the three nodes the PEERS table of `mxfsctl status` shows both
// others alive — h2 and h3 too, neither of which is the other's master — and the counters show
// renewals and acknowledgements both ways and no NODE_ALIVE frame. h3 is killed with SIGKILL:
// h2, which is not the master, takes it for dead in its own table once the node timeout has
// passed, while the master's node table shows what the master did (h3 no longer `ok`).
#[test]
fn every_node_renews_with_every_peer_and_sees_a_dead_one() {
    let (cluster, mut nodes) = start_cluster();
    for (idx, node) in nodes.iter().enumerate() {
        for host in HOSTS.iter().filter(|host| **host != HOSTS[idx]) {
            wait_until(&format!("{} to hear {host} renew", HOSTS[idx]), STARTUP_TIMEOUT, || {
                (peer_state(&status(&node.socket)?, host)? == "alive").then_some(())
            });
        }
    }
    for node in &nodes {
        let text = status(&node.socket).expect("the status");
        let now = counters(&text);
        for name in ["received.LEASE_RENEW", "sent.LEASE_RENEW", "received.LEASE_ACK", "sent.LEASE_ACK"] {
            assert!(counter(&now, name) > 0, "{name}: {text}");
        }
        assert_eq!(counter(&now, "received.NODE_ALIVE") + counter(&now, "sent.NODE_ALIVE"), 0, "{text}");
        assert_eq!(counter(&now, "peers.alive"), 2, "{text}");
        assert_eq!(counter(&now, "peers.dead"), 0, "{text}");
    }
    let killed_at = Instant::now();
    nodes[2].daemon.kill();
    wait_until("h2 to take h3 for dead", STARTUP_TIMEOUT, || {
        (peer_state(&status(&nodes[1].socket)?, "h3")? == "dead").then_some(())
    });
    let waited = killed_at.elapsed();
    assert!(
        waited >= Duration::from_millis(NODE_TIMEOUT_MS - 2 * RENEW_MS),
        "h3 taken for dead {waited:?} after the kill, before the node timeout"
    );
    let text = status(&nodes[1].socket).expect("h2's status");
    assert_eq!(counter(&counters(&text), "peers.dead"), 1, "{text}");
    assert_eq!(peer_state(&text, "h1").as_deref(), Some("alive"), "{text}");
    assert!(!text.contains("\nNODE "), "h2 is not the master and keeps no node table: {text}");
    wait_until("the master to act on h3's death", STARTUP_TIMEOUT, || {
        (node_row(&status(&nodes[0].socket)?, "h3").0 != "ok").then_some(())
    });
    drop(cluster);
}

// Goal: `bast_timeout_ms` is enforced as docs/mxfsd.md says: a holder that neither downgrades
// nor releases within the BAST timeout after its BAST, while the waiter still waits, has its lock
// revoked — its client is told LOST, the lock is released, the waiter is granted — and a lock
// taken by `mxfsctl lock` (held until released) is never revoked: its command runs to its end.
// Method: BAST timeout 1 s. A library client on h2 holds EX on r and ignores its BAST; a client
// on h3 waits for r. h2's client's next notification is LOST for its handle, no sooner than the
// BAST timeout after the BAST; h3 is granted; the master counts one `bast_timeouts`, h2 one
// `locks_revoked`; h2's client can no longer unlock the handle. Then `mxfsctl lock n EX -- sleep
// 2` on h2 while h3 waits for n: mxfsctl exits 0 (its command was not killed), h3 gets n after
// it, and the master's `bast_timeouts` is still 1.
#[test]
fn a_holder_that_ignores_its_bast_is_revoked_after_the_bast_timeout() {
    const BAST_TIMEOUT_MS: u64 = 1_000;
    let (cluster, nodes) = start_cluster_with(NODE_TIMEOUT_MS, RENEW_MS, |cluster| {
        cluster.rewrite_lsf_conf("LAVA_MXFSD_BAST_TIMEOUT_MS", &BAST_TIMEOUT_MS.to_string());
    });
    let master = nodes[0].socket.clone();
    let mut holder = connect(&nodes[1].socket);
    let held = holder.lock("r", LockMode::Ex, false, Some(IO_TIMEOUT)).expect("h2 locks r");
    let waiter_socket = nodes[2].socket.clone();
    let waiter = std::thread::spawn(move || {
        let mut client = connect(&waiter_socket);
        let result = client.lock("r", LockMode::Ex, false, Some(IO_TIMEOUT));
        (result.map_err(|error| error.to_string()), Instant::now(), client)
    });
    let bast = holder.next_notification(IO_TIMEOUT).expect("a notification");
    let bast_at = Instant::now();
    assert_eq!(bast, Some(Reply::Bast { handle: held.handle, mode: LockMode::Ex }));
    // The BAST is ignored: no conversion, no unlock.
    let lost = holder.next_notification(IO_TIMEOUT).expect("a notification");
    let lost_at = Instant::now();
    assert_eq!(lost, Some(Reply::Lost { handle: held.handle }));
    assert!(
        lost_at - bast_at >= Duration::from_millis(BAST_TIMEOUT_MS - 2 * RENEW_MS),
        "revoked {:?} after the BAST, before the BAST timeout",
        lost_at - bast_at
    );
    let (result, granted_at, _waiting_client) = waiter.join().expect("the waiting thread");
    let granted = result.expect("h3 is granted r once h2's lock is revoked");
    assert!(granted_at >= bast_at, "h3 was granted r before h2's BAST");
    assert!(token_epoch(&granted) >= token_epoch(&held));
    match holder.unlock(held.handle) {
        Err(ClientError::Refused { code: ErrorCode::NotHeld, .. }) => {}
        other => panic!("unlock of a revoked lock: {other:?}"),
    }
    assert_eq!(counter(&status_counters(&master), "bast_timeouts"), 1);
    assert_eq!(counter(&status_counters(&nodes[1].socket), "locks_revoked"), 1);

    let mut command = cluster.command(mxfsctl_bin());
    command.arg("--socket").arg(&nodes[1].socket).args(["lock", "n", "EX", "--", "sleep", "2"]);
    let mut long = command.stderr(Stdio::piped()).spawn().expect("start mxfsctl");
    wait_until("mxfsctl to hold n", IO_TIMEOUT, || {
        lock_rows(&master, "n").contains(&row("2", "EX", "granted")).then_some(())
    });
    let mut waiter = connect(&nodes[2].socket);
    let second =
        waiter.lock("n", LockMode::Ex, false, Some(IO_TIMEOUT)).expect("h3 gets n after the command");
    let status = long.wait().expect("mxfsctl exits");
    let mut stderr = String::new();
    let _read = long.stderr.take().expect("piped").read_to_string(&mut stderr);
    assert!(status.success(), "mxfsctl's command was stopped: {status:?} {stderr}");
    waiter.unlock(second.handle).expect("h3 unlocks n");
    assert_eq!(counter(&status_counters(&master), "bast_timeouts"), 1, "the mxfsctl lock was revoked");
    drop(nodes);
}
