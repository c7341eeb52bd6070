//! lim on loopback: three lims on 127.0.0.1 with per-host ports (lsf.cluster's
//! LAVA_LIM_PORT column), short intervals through LAVA_LIM_*_INTERVAL_MS, queried with
//! the real `lsload` and `lsid`.

mod util;

use std::ffi::OsStr;
use std::net::{TcpListener, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

use util::{Cluster, Daemon, STARTUP_TIMEOUT, wait_until};

const REPORT_MS: u64 = 300;
const BEACON_MS: u64 = 300;

/// A port free for both UDP and TCP right now (the lims need fixed, configured ports).
fn free_port() -> u16 {
    loop {
        let tcp = TcpListener::bind("127.0.0.1:0").expect("bind tcp");
        let port = tcp.local_addr().expect("addr").port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn start_lim(cluster: &mut Cluster, host: &str) -> Daemon {
    let ready = cluster.dir().join(format!("run/lim.{host}.ready"));
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_lim"));
    let args: Vec<&OsStr> =
        vec![OsStr::new("--host"), OsStr::new(host), OsStr::new("--ready-file"), ready.as_os_str()];
    let daemon = cluster.spawn("lim", &bin, &args);
    let mut daemon = daemon;
    wait_until("lim ready file", STARTUP_TIMEOUT, || {
        assert!(daemon.is_running(), "lim {host} exited:\n{}", daemon.log());
        ready.exists().then_some(())
    });
    daemon
}

fn command(cluster: &Cluster, name: &str, args: &[&str]) -> (bool, String) {
    let bin = match name {
        "lsload" => env!("CARGO_BIN_EXE_lsload"),
        _ => env!("CARGO_BIN_EXE_lsid"),
    };
    let output = cluster.command(bin).args(args).output().expect("run the command");
    (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
}

fn host_line(out: &str, host: &str) -> Option<String> {
    out.lines().find(|line| line.split_whitespace().next() == Some(host)).map(str::to_owned)
}

// Goal: lsload lists the three hosts with live values; a killed lim is reported unavailable
// within 3 report intervals (+1); bad datagrams are dropped and the master keeps serving.
#[test]
fn three_lims_on_loopback() {
    let hosts = ["h0", "h1", "h2"];
    let mut cluster = Cluster::with_hosts(&hosts);
    let ports: Vec<u16> = hosts.iter().map(|_| free_port()).collect();
    let rows: String = hosts
        .iter()
        .zip(&ports)
        .map(|(h, p)| format!("{h} ! ! 1 (cs linux) 127.0.0.1 {p} {} {}\n", free_port(), free_port()))
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
    let _master = start_lim(&mut cluster, "h0");
    let _h1 = start_lim(&mut cluster, "h1");
    let mut h2 = start_lim(&mut cluster, "h2");

    let (ok, out) = command(&cluster, "lsid", &[]);
    assert!(
        ok && out.contains("My cluster name is lavacore") && out.contains("My master name is h0"),
        "{out}"
    );

    wait_until("all three hosts ok with load values", Duration::from_secs(20), || {
        let (ok, out) = command(&cluster, "lsload", &["-l"]);
        let all = hosts.iter().all(|h| {
            host_line(&out, h).is_some_and(|line| {
                line.split_whitespace().nth(1) == Some("ok") && (line.contains('M') || line.contains('G'))
            })
        });
        (ok && all).then_some(())
    });

    // Garbage to the master: short, wrong version, from an unknown source.
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket.send_to(b"short", ("127.0.0.1", ports[0])).expect("send");
    socket.send_to(&[0u8; 80], ("127.0.0.1", ports[0])).expect("send");

    h2.kill();
    let started = std::time::Instant::now();
    wait_until("h2 unavailable", Duration::from_secs(20), || {
        let (_, out) = command(&cluster, "lsload", &[]);
        host_line(&out, "h2").is_some_and(|line| line.contains("unavail")).then_some(())
    });
    // 3 intervals (+1 for jitter) plus the polling and command start-up slack.
    assert!(started.elapsed() < Duration::from_millis(4 * REPORT_MS + 3_000), "took {:?}", started.elapsed());
    let (ok, out) = command(&cluster, "lsload", &["h0", "h1"]);
    assert!(
        ok && host_line(&out, "h1").is_some_and(|l| l.contains(" ok ")) && host_line(&out, "h2").is_none(),
        "{out}"
    );
}
