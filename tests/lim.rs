//! lim on loopback: three lims on 127.0.0.1 with per-host ports (lsf.cluster's
//! LAVA_LIM_PORT column), short intervals through LAVA_LIM_*_INTERVAL_MS, queried with
//! the real `lsload`, `lshosts` and `lsid` and, byte for byte, through the master's TCP port
//! (lava-lim-wire's `LIM_TCP_*` frames). The same scenario runs across network
//! namespaces in `tests/lim_netns.rs` where the machine allows it. Each host also runs
//! sbatchd (its own sbatchd port and credential socket), the master mbatchd, and `bhosts`
//! must follow lim's view.

mod util;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use lava_lim_wire as wire;
use lava_xdr::frame::{FrameHeader, HEADER_BYTES};
use serde::de::DeserializeOwned;
use util::lim_output::{host_line, lshosts_facts, this_machine_facts};
use util::{Cluster, Daemon, IO_TIMEOUT, STARTUP_TIMEOUT, fixed_port, wait_until};

const REPORT_MS: u64 = 300;
const BEACON_MS: u64 = 300;
/// The protocol's liveness deadline (spec: 3 missed intervals, LIM_MISSED_INTERVALS) plus
/// one interval for jitter, in intervals.
const DEADLINE_INTERVALS: u64 = 3 + 1;
/// Absolute slack on top of a protocol deadline for what is not the protocol: the killed
/// process being reaped, the daemon's timer firing late on a busy 2-core machine, and the
/// poll (a TCP query every 10 ms). It is not a performance bound.
const SCHEDULING_SLACK: Duration = Duration::from_millis(2_000);

fn command(cluster: &Cluster, name: &str, args: &[&str]) -> (bool, String, String) {
    let bin = match name {
        "lsload" => env!("CARGO_BIN_EXE_lsload"),
        "lshosts" => env!("CARGO_BIN_EXE_lshosts"),
        _ => env!("CARGO_BIN_EXE_lsid"),
    };
    let output = cluster.command(bin).args(args).output().expect("run the command");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Longest mbatchd may take to show a change of lim's view in bhosts (it polls the master
/// lim; debug build, busy 2-core machine).
const BHOSTS_TIMEOUT: Duration = Duration::from_secs(60);

/// Waits until `bhosts` shows every `(host, status)` of `want`.
fn wait_bhosts(cluster: &Cluster, want: &[(&str, &str)]) {
    let deadline = Instant::now() + BHOSTS_TIMEOUT;
    loop {
        let output = cluster.command(env!("CARGO_BIN_EXE_bhosts")).output().expect("run bhosts");
        let last = String::from_utf8_lossy(&output.stdout).into_owned();
        let shows = |host: &str, status: &str| {
            host_line(&last, host).is_some_and(|line| line.split_whitespace().nth(1) == Some(status))
        };
        if want.iter().all(|(host, status)| shows(host, status)) {
            return;
        }
        assert!(Instant::now() < deadline, "bhosts never showed {want:?}; last:\n{last}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One query on the master's TCP port, as lsload sends it; `None` if the master is down.
fn query<R: DeserializeOwned>(addr: SocketAddr, operation: u32) -> Option<R> {
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).ok()?;
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("set a read timeout");
    let mut request = Vec::new();
    FrameHeader { sequence: 7, operation, version: wire::LIM_VERSION, length: 0, status: 0 }
        .write(&mut request);
    stream.write_all(&request).ok()?;
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).ok()?;
    let header = FrameHeader::parse(&head).expect("a reply header");
    assert_eq!((header.sequence, header.status), (7, wire::TCP_STATUS_OK), "reply to {operation}");
    let mut body = vec![0u8; header.length as usize];
    stream.read_exact(&mut body).expect("the reply body");
    let limits = lava_xdr::Limits { input_bytes_max: body.len().max(1), ..lava_xdr::Limits::default() };
    Some(lava_xdr::from_bytes(&body, &limits).expect("a well-formed reply"))
}

/// The master's counters (`LIM_TCP_STATUS`), by name.
fn counters(addr: SocketAddr) -> BTreeMap<String, u64> {
    let reply: wire::StatusReply = query(addr, wire::LIM_TCP_STATUS).expect("the master answers");
    assert!(reply.master, "the status query went to the master");
    reply.counters.into_iter().collect()
}

fn host_status(addr: SocketAddr, host: &str) -> Option<u32> {
    let reply: wire::HostLoadReply = query(addr, wire::LIM_TCP_HOST_LOAD)?;
    reply.hosts.iter().find(|h| h.name == host).map(|h| h.status)
}

fn report(host_no: u32, seq_no: u32) -> Vec<u8> {
    let li = [0.5, 0.5, 0.5, 0.1, 0.0, 0.0, 1.0, 0.0, 100.0, 100.0, 100.0];
    let message = wire::Message::LoadReport(wire::LoadReport { host_no, seq_no, status0: 0, nidx: 11, li });
    wire::encode_datagram(seq_no, &message)
}

// Goal: lsload lists the three hosts with live values, lshosts their CPUs and memory, bhosts
// all `ok`; every kind of bad datagram is dropped and counted by its reason; a killed lim is
// reported unavailable within 3 report intervals (+1), then `unavail` in bhosts; with the master down slaves fall silent after 3 missed beacons; a
// restarted master brings every host back.
/// A cluster of `hosts` on 127.0.0.1, each with its own lim, sbatchd and mxfsd ports (the
/// lim ports returned), and this file's short lim intervals.
fn loopback_cluster(hosts: &[&str]) -> (Cluster, Vec<u16>) {
    let cluster = Cluster::with_hosts(hosts);
    let ports: Vec<u16> = hosts.iter().map(|_| fixed_port()).collect();
    let rows: String = hosts
        .iter()
        .zip(&ports)
        .map(|(h, p)| format!("{h} ! ! 1 (cs linux) 127.0.0.1 {p} {} {}\n", fixed_port(), fixed_port()))
        .collect();
    cluster.write_file(
        "etc/lsf.cluster.lavacore",
        &format!(
            "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
             HOSTNAME model type server RESOURCES LAVA_ADDR LAVA_LIM_PORT LAVA_SBD_PORT LAVA_MXFSD_PORT\n{rows}End Host\n"
        ),
    );
    cluster.rewrite_lsf_conf("LAVA_LIM_BEACON_INTERVAL_MS", &BEACON_MS.to_string());
    cluster.rewrite_lsf_conf("LAVA_LIM_REPORT_INTERVAL_MS", &REPORT_MS.to_string());
    (cluster, ports)
}

#[test]
fn three_lims_on_loopback() {
    let hosts = ["h0", "h1", "h2"];
    let (mut cluster, ports) = loopback_cluster(&hosts);
    // The per-host LAVA_LIM_PORT is the master's UDP and TCP port.
    let master_addr = SocketAddr::from(([127, 0, 0, 1], ports[0]));
    let mut master = cluster.start_lim("h0");
    let h1 = cluster.start_lim("h1");
    let mut h2 = cluster.start_lim("h2");
    let _mbatchd = cluster.start_mbatchd();
    let envdirs = [cluster.envdir(), cluster.host_envdir("h1"), cluster.host_envdir("h2")];
    let _sbatchds: Vec<Daemon> =
        hosts.iter().zip(&envdirs).map(|(host, envdir)| cluster.start_sbatchd_in(host, envdir)).collect();

    let (ok, out, _) = command(&cluster, "lsid", &[]);
    assert!(
        ok && out.contains("My cluster name is lavacore") && out.contains("My master name is h0"),
        "{out}"
    );
    let all_ok = |cluster: &Cluster| {
        let (ok, out, _) = command(cluster, "lsload", &["-l"]);
        let all = hosts.iter().all(|h| {
            host_line(&out, h).is_some_and(|line| {
                line.split_whitespace().nth(1) == Some("ok") && (line.contains('M') || line.contains('G'))
            })
        });
        (ok && all).then_some(())
    };
    wait_until("all three hosts ok with load values", Duration::from_secs(20), || all_ok(&cluster));
    // Each slave's lim tells the master its CPUs and memory over TCP; the master knows its own.
    let facts = this_machine_facts();
    wait_until("lshosts shows every host's CPUs and memory", Duration::from_secs(20), || {
        let (ok, out, _) = command(&cluster, "lshosts", &[]);
        let all = hosts
            .iter()
            .all(|h| host_line(&out, h).and_then(|line| lshosts_facts(&line)) == Some(facts.clone()));
        (ok && all).then_some(())
    });
    wait_bhosts(&cluster, &[("h0", "ok"), ("h1", "ok"), ("h2", "ok")]);

    // Bad datagrams to the master, one of each kind, from an address that is not in
    // lsf.cluster (the decode checks come first, so each counts under its own reason).
    let before = counters(master_addr);
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let good = report(1, 42);
    let mut wrong_version = good.clone();
    wrong_version[8..12].copy_from_slice(&0x0002_0000u32.to_be_bytes());
    let mut unknown_opcode = good[..HEADER_BYTES].to_vec();
    unknown_opcode[4..8].copy_from_slice(&9u32.to_be_bytes());
    unknown_opcode[12..16].copy_from_slice(&0u32.to_be_bytes());
    let bad: [(&str, Vec<u8>); 6] = [
        ("drop_short", b"short".to_vec()),
        ("drop_wrong_version", wrong_version),
        ("drop_oversized", vec![0u8; wire::DATAGRAM_BYTES_MAX + 50]),
        ("drop_length_mismatch", good[..good.len() - 4].to_vec()),
        ("drop_unknown_opcode", unknown_opcode),
        // Well-formed and claiming to be h1, but not from h1's configured address.
        ("drop_unknown_source", good),
    ];
    for (_, bytes) in &bad {
        socket.send_to(bytes, master_addr).expect("send");
    }
    let delta = |now: &BTreeMap<String, u64>, name: &str| now[name] - before.get(name).copied().unwrap_or(0);
    let after = wait_until("every bad datagram counted", IO_TIMEOUT, || {
        let now = counters(master_addr);
        bad.iter().all(|(name, _)| delta(&now, name) >= 1).then_some(now)
    });
    // Exactly one more for each kind sent, none for any other reason.
    for name in after.keys().filter(|name| name.starts_with("drop_")) {
        let expected = u64::from(bad.iter().any(|(bad_name, _)| bad_name == name));
        assert_eq!(delta(&after, name), expected, "{name}: {before:?} -> {after:?}");
    }
    assert!(master.is_running(), "bad datagrams never stop lim");

    // The master marks a host unavailable once no report came for 3 report intervals
    // (`now > last + 3T`). Its last report left at most one interval before the kill, so the
    // mark is due at most 3T after the kill; one more interval covers a late report timer
    // (the "+1 for jitter"). The rest is slack for reaping and polling, measured from the
    // moment before the signal.
    let killed_at = Instant::now();
    h2.kill();
    let bound = Duration::from_millis(DEADLINE_INTERVALS * REPORT_MS) + SCHEDULING_SLACK;
    wait_until("h2 unavailable", bound, || {
        (host_status(master_addr, "h2") == Some(wire::HOST_STATUS_UNAVAIL)).then_some(())
    });
    eprintln!(
        "h2 unavailable {:?} after the kill (protocol bound {} ms)",
        killed_at.elapsed(),
        DEADLINE_INTERVALS * REPORT_MS
    );
    let (_, out, _) = command(&cluster, "lsload", &[]);
    assert!(host_line(&out, "h2").is_some_and(|line| line.contains("unavail")), "{out}");
    // mbatchd learns it from the master lim: bhosts shows h2 `unavail` (its sbatchd still runs).
    wait_bhosts(&cluster, &[("h0", "ok"), ("h1", "ok"), ("h2", "unavail")]);
    let (ok, out, _) = command(&cluster, "lsload", &["h0", "h1"]);
    assert!(
        ok && host_line(&out, "h1").is_some_and(|l| l.contains(" ok ")) && host_line(&out, "h2").is_none(),
        "{out}"
    );
    let (ok, out, err) = command(&cluster, "lsload", &["nosuchhost"]);
    assert!(!ok && out.is_empty() && err == "lsload: unknown host name nosuchhost\n", "{out}{err}");

    // Stop the master and take its UDP port: a fake master that counts h1's reports.
    master.kill();
    let fake = UdpSocket::bind(master_addr).expect("bind the master's UDP port");
    fake.set_read_timeout(Some(Duration::from_millis(50))).expect("read timeout");
    let h1_addr = SocketAddr::from(([127, 0, 0, 1], ports[1]));
    let mut buffer = [0u8; 256];
    let mut count_reports = |fake: &UdpSocket, window: Duration| {
        let until = Instant::now() + window;
        let mut n = 0;
        while Instant::now() < until {
            if let Ok((len, from)) = fake.recv_from(&mut buffer) {
                let decoded = wire::decode_datagram(&buffer[..len]).expect("lim sends well-formed datagrams");
                assert!(matches!(decoded.message, wire::Message::LoadReport(_)), "{decoded:?}");
                assert_eq!(from, h1_addr, "only h1 is left to report");
                n += 1;
            }
        }
        n
    };
    // h1 gives up 3 beacon intervals after the last beacon (+1 for jitter) and logs it.
    wait_until(
        "h1 gives up on the master",
        Duration::from_millis(DEADLINE_INTERVALS * BEACON_MS) + SCHEDULING_SLACK,
        || h1.log().contains("master lost").then_some(()),
    );
    let _in_flight = count_reports(&fake, Duration::from_millis(REPORT_MS));
    let n_silent = count_reports(&fake, Duration::from_millis(DEADLINE_INTERVALS * REPORT_MS));
    assert_eq!(n_silent, 0, "a slave that lost the master sends nothing");
    // The silence is h1's choice, not a deaf socket: one beacon from the master's address
    // makes it report again.
    let mut cluster_field = [0u8; wire::CLUSTER_FIELD_BYTES];
    cluster_field[..8].copy_from_slice(b"lavacore");
    let mut hostname = [0u8; wire::HOSTNAME_FIELD_BYTES];
    hostname[..2].copy_from_slice(b"h0");
    let beacon = wire::Message::Beacon(wire::MasterBeacon {
        cluster: cluster_field,
        hostname,
        host_no: 0,
        seqno: 1,
        tcp_port: ports[0],
    });
    fake.send_to(&wire::encode_datagram(1, &beacon), h1_addr).expect("send a beacon");
    assert!(
        count_reports(&fake, Duration::from_millis(REPORT_MS) + SCHEDULING_SLACK) > 0,
        "h1 reports again"
    );
    drop(fake);

    // The real master and h2 come back: every host is ok again.
    let _master = cluster.start_lim("h0");
    let _h2 = cluster.start_lim("h2");
    wait_until("all three hosts ok again", Duration::from_secs(20), || all_ok(&cluster));
    wait_bhosts(&cluster, &[("h0", "ok"), ("h1", "ok"), ("h2", "ok")]);
}

/// Runs `lsadmin` with `args`: (success, stdout, stderr).
fn lsadmin(cluster: &Cluster, args: &[&str]) -> (bool, String, String) {
    let output = cluster.command(env!("CARGO_BIN_EXE_lsadmin")).args(args).output().expect("run lsadmin");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `lsadmin showstatus HOST`: its text and its counters by name.
fn showstatus(cluster: &Cluster, host: &str) -> (String, BTreeMap<String, u64>) {
    let (ok, out, err) = lsadmin(cluster, &["showstatus", host]);
    assert!(ok, "lsadmin showstatus {host}: {err}");
    let counters = out
        .split_once("\nCounters:\n")
        .unwrap_or_else(|| panic!("no Counters: section in\n{out}"))
        .1
        .lines()
        .map(|line| {
            let (name, value) = line.trim().split_once(' ').expect("`name value`");
            (name.to_owned(), value.trim().parse().expect("a number"))
        })
        .collect();
    (out, counters)
}

// Goal: `lsadmin showstatus` shows each lim's role, master and (master) hosts by status, and its
// counters move with what happens: datagrams received and sent by kind, host-fact questions, a
// garbage datagram counted under its drop reason, TCP queries answered by kind and refused;
// `lsadmin ckconfig` passes a good configuration and names file:line of a broken one;
// LSF's unsupported subcommands are refused with exit 255.
#[test]
fn lsadmin_showstatus_and_ckconfig() {
    let hosts = ["h0", "h1"];
    let mut cluster = Cluster::with_hosts(&hosts);
    let ports: Vec<u16> = hosts.iter().map(|_| fixed_port()).collect();
    let rows: Vec<String> = hosts
        .iter()
        .zip(&ports)
        .map(|(h, p)| format!("{h} ! ! 1 (cs linux) 127.0.0.1 {p} {} {}\n", fixed_port(), fixed_port()))
        .collect();
    let cluster_file = |rows: &[String]| {
        format!(
            "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
             HOSTNAME model type server RESOURCES LAVA_ADDR LAVA_LIM_PORT LAVA_SBD_PORT LAVA_MXFSD_PORT\n{}End Host\n",
            rows.concat()
        )
    };
    cluster.write_file("etc/lsf.cluster.lavacore", &cluster_file(&rows));
    cluster.rewrite_lsf_conf("LAVA_LIM_BEACON_INTERVAL_MS", &BEACON_MS.to_string());
    cluster.rewrite_lsf_conf("LAVA_LIM_REPORT_INTERVAL_MS", &REPORT_MS.to_string());

    let (ok, out, err) = lsadmin(&cluster, &["ckconfig"]);
    assert!(ok && out.contains("No errors found.") && err.is_empty(), "{out}{err}");

    let mut master = cluster.start_lim("h0");
    let mut slave = cluster.start_lim("h1");
    // The master hears the slave and learns its facts; the slave hears beacons.
    let (text, at_master) = wait_until("the master has h1 ok and its facts", Duration::from_secs(20), || {
        let (text, counters) = showstatus(&cluster, "h0");
        (text.contains("      Ok:                  2\n") && counters["host_info.asked"] >= 1)
            .then_some((text, counters))
    });
    assert!(
        text.contains("Role:                   master") && text.contains("Master name:            h0"),
        "{text}"
    );
    assert!(
        at_master["datagrams.received.load_report"] >= 1 && at_master["datagrams.accepted"] >= 1,
        "{text}"
    );
    assert!(
        at_master["datagrams.sent.beacon"] >= 1 && at_master["datagrams.sent.load_report"] == 0,
        "{text}"
    );
    assert!(at_master["queries.admin_status"] >= 1, "earlier showstatus calls counted: {text}");
    let (text, before) = showstatus(&cluster, "h1");
    assert!(
        text.contains("Role:                   slave") && text.contains("Master name:            h0"),
        "{text}"
    );
    assert!(before["datagrams.received.beacon"] >= 1 && before["datagrams.sent.load_report"] >= 1, "{text}");
    assert!(before["queries.host_info"] >= 1, "the master asked h1 for its facts: {text}");

    // A garbage datagram to the slave and a master-only query it refuses.
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket.send_to(b"garbage", ("127.0.0.1", ports[1])).expect("send");
    let mut stream = TcpStream::connect(("127.0.0.1", ports[1])).expect("connect to h1's lim");
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("set a read timeout");
    let mut request = Vec::new();
    FrameHeader {
        sequence: 1,
        operation: wire::LIM_TCP_HOSTS_INFO,
        version: wire::LIM_VERSION,
        length: 0,
        status: 0,
    }
    .write(&mut request);
    stream.write_all(&request).expect("send the query");
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).expect("a reply");
    assert_eq!(FrameHeader::parse(&head).expect("a header").status, wire::TCP_STATUS_REFUSED);
    let (text, after) = wait_until("the garbage datagram counted", IO_TIMEOUT, || {
        let (text, counters) = showstatus(&cluster, "h1");
        (counters["datagrams.dropped.short"] > before["datagrams.dropped.short"]).then_some((text, counters))
    });
    assert_eq!(after["datagrams.dropped.short"], before["datagrams.dropped.short"] + 1, "{text}");
    assert_eq!(after["queries.refused"], before["queries.refused"] + 1, "{text}");
    // The previous showstatus call, counted once answered.
    assert!(after["queries.admin_status"] > before["queries.admin_status"], "{text}");
    for name in after
        .keys()
        .filter(|name| name.starts_with("datagrams.dropped.") && *name != "datagrams.dropped.short")
    {
        assert_eq!(after[name], before[name], "{name}: {text}");
    }
    assert!(slave.is_running() && master.is_running(), "garbage never stops lim");

    // Unsupported and unknown subcommands, an unknown host.
    let (ok, _, err) = lsadmin(&cluster, &["limrestart"]);
    assert!(!ok && err == "lsadmin: limrestart is not supported by LavaCore yet\n", "{err}");
    let (ok, _, err) = lsadmin(&cluster, &["frobnicate"]);
    assert!(!ok && err.starts_with("lsadmin: Invalid command <frobnicate>"), "{err}");
    let (ok, _, err) = lsadmin(&cluster, &["showstatus", "nosuchhost"]);
    assert!(!ok && err.contains("host `nosuchhost` is not in"), "{err}");

    // lsadmin reconfig from an unprivileged port is refused by the lim itself.
    let mut stream = TcpStream::connect(("127.0.0.1", ports[1])).expect("connect to h1's lim");
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("set a read timeout");
    let mut request = Vec::new();
    FrameHeader {
        sequence: 1,
        operation: wire::LIM_TCP_RECONFIG,
        version: wire::LIM_VERSION,
        length: 0,
        status: 0,
    }
    .write(&mut request);
    stream.write_all(&request).expect("send the request");
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).expect("a reply");
    let mut body = vec![0u8; FrameHeader::parse(&head).expect("a header").length as usize];
    stream.read_exact(&mut body).expect("the reply's body");
    let refused: wire::ReconfigReply =
        lava_xdr::from_bytes(&body, &lava_xdr::Limits::default()).expect("decodes");
    assert!(!refused.applied && refused.message.contains("permission denied"), "{refused:?}");
    // As root (a privileged port): both lims restart in place (same pids) and serve again.
    let (ok, out, err) = lsadmin(&cluster, &["reconfig"]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("Restart LIM on <h0> ...... done\n")
            && out.contains("Restart LIM on <h1> ...... done\n"),
        "{out}"
    );
    for host in hosts {
        wait_until("the lim answers again after its restart", STARTUP_TIMEOUT, || {
            lsadmin(&cluster, &["showstatus", host]).0.then_some(())
        });
    }
    assert!(master.is_running() && slave.is_running(), "lims restart in place");
    for lim in [&master, &slave] {
        assert!(
            lim.log().contains("lsadmin reconfig: restarting to read the configuration"),
            "{}",
            lim.log()
        );
    }

    // A broken lsf.cluster: h1's LIM port is not a number (line 8 of the file).
    let mut broken = rows.clone();
    broken[1] = broken[1].replacen(&ports[1].to_string(), "notaport", 1);
    cluster.write_file("etc/lsf.cluster.lavacore", &cluster_file(&broken));
    let (ok, out, err) = lsadmin(&cluster, &["ckconfig"]);
    assert!(
        !ok && out.is_empty()
            && err.contains("lsf.cluster.lavacore:8:")
            && err.contains("There are fatal errors."),
        "{err}"
    );
    // lsadmin reconfig with the broken file says so and touches no lim.
    let (ok, _, err) = lsadmin(&cluster, &["reconfig"]);
    assert!(!ok && err.contains("lsf.cluster.lavacore:8:"), "{err}");
    assert!(master.is_running() && slave.is_running());
}

// Goal: with LSF_MASTER_LIST the master role moves among the candidates (docs/protocols/lim.md,
// "Master election"): the first candidate (here not lsf.cluster's first host) is master;
// when its lim is killed the next candidate takes over within the protocol's deadline (3
// missed beacons, plus its rank's wait) and lsid and lsload, which try the candidates in
// order, name and ask it, and it sees the killed host unavailable; when the first comes back
// it is master again and the second has stepped down (lsadmin showstatus: slave).
#[test]
fn master_moves_along_lsf_master_list() {
    let hosts = ["h0", "h1", "h2"];
    let (mut cluster, _) = loopback_cluster(&hosts);
    cluster.rewrite_lsf_conf("LSF_MASTER_LIST", "\"h1 h2\"");
    let mut lims: BTreeMap<&str, Daemon> = hosts.iter().map(|h| (*h, cluster.start_lim(h))).collect();

    let master_is = |cluster: &Cluster, want: &str| {
        let (ok, out, _) = command(cluster, "lsid", &[]);
        (ok && out.contains(&format!("My master name is {want}\n"))).then_some(())
    };
    let lsload_shows = |cluster: &Cluster, want: &[(&str, &str)]| {
        let (ok, out, _) = command(cluster, "lsload", &[]);
        let all = want.iter().all(|(h, status)| {
            host_line(&out, h).is_some_and(|line| line.split_whitespace().nth(1) == Some(*status))
        });
        (ok && all).then_some(())
    };
    wait_until("h1 (first of LSF_MASTER_LIST) is master", STARTUP_TIMEOUT, || master_is(&cluster, "h1"));
    wait_until("every host ok at h1", STARTUP_TIMEOUT, || {
        lsload_shows(&cluster, &[("h0", "ok"), ("h1", "ok"), ("h2", "ok")])
    });

    lims.get_mut("h1").expect("started").kill();
    // h2 waits 3 beacon intervals without h1's beacon (rank 1), then takes over.
    let takeover = Duration::from_millis(BEACON_MS * (DEADLINE_INTERVALS + 1)) + SCHEDULING_SLACK * 5;
    wait_until("h2 takes over and lsid names it", takeover, || master_is(&cluster, "h2"));
    wait_until("h2 has h1 unavailable and the others ok", STARTUP_TIMEOUT, || {
        lsload_shows(&cluster, &[("h0", "ok"), ("h1", "unavail"), ("h2", "ok")])
    });

    lims.insert("h1", cluster.start_lim("h1"));
    wait_until("h1 is master again", STARTUP_TIMEOUT, || master_is(&cluster, "h1"));
    wait_until("h2 stepped down", STARTUP_TIMEOUT, || {
        let (text, _) = showstatus(&cluster, "h2");
        text.contains("slave").then_some(())
    });
    // Any lim's status lists the candidates' roles as each one's own lim gives it.
    let (text, _) = showstatus(&cluster, "h0");
    assert!(
        text.contains(
            "Master candidates (LSF_MASTER_LIST order):\n   h1                      master\n   \
             h2                      slave, follows h1\n"
        ),
        "{text}"
    );
    wait_until("every host ok at h1 again", STARTUP_TIMEOUT, || {
        lsload_shows(&cluster, &[("h0", "ok"), ("h1", "ok"), ("h2", "ok")])
    });
}
