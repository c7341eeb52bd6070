//! mbatchd and sbatchd speak systemd's notification protocol (lava-sd) as a `Type=notify`
//! service with `WatchdogSec=` would see it: the real binaries are started with
//! `NOTIFY_SOCKET` naming a datagram socket this test listens on, in place of systemd.
//!
//! Each test checks the order a service manager relies on: `READY=1` only once the daemon
//! serves (its port or ready file exists), `WATCHDOG=1` while it runs, `RELOADING=1` then
//! `READY=1` around SIGHUP (and the daemon is still there afterwards), `STOPPING=1` on
//! SIGTERM, then a clean exit.

mod util;

use std::ffi::OsStr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use util::{Cluster, Daemon, EXIT_TIMEOUT, IO_TIMEOUT, STARTUP_TIMEOUT};

/// The socket systemd would listen on, in the cluster's folder.
struct FakeSystemd {
    path: PathBuf,
    socket: UnixDatagram,
}

impl FakeSystemd {
    fn new(cluster: &Cluster) -> FakeSystemd {
        let path = cluster.dir().join("run/notify.sock");
        let socket = UnixDatagram::bind(&path).expect("bind the notification socket");
        socket.set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
        FakeSystemd { path, socket }
    }

    /// The next datagram, as text; panics (with the daemon's log) if none comes in time.
    fn next(&self, daemon: &Daemon) -> String {
        let mut buf = [0u8; 4096];
        match self.socket.recv(&mut buf) {
            Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(error) => panic!("no notification within {IO_TIMEOUT:?} ({error}); log:\n{}", daemon.log()),
        }
    }

    /// The next notification that is neither a watchdog pet nor (unless `first` is one) a
    /// lone status line, such as sbatchd's news about its link to mbatchd; its first line
    /// must start with `first`.
    fn expect(&self, daemon: &Daemon, first: &str) -> String {
        loop {
            let message = self.next(daemon);
            if message == "WATCHDOG=1\n" || (is_lone_status(&message) && !first.starts_with("STATUS=")) {
                continue;
            }
            let line = message.lines().next().unwrap_or_default();
            assert!(line.starts_with(first), "expected {first:?}, got the notification {message:?}");
            return message;
        }
    }

    /// Waits for one more watchdog pet (lone status lines may come first).
    fn expect_pet(&self, daemon: &Daemon) {
        loop {
            let message = self.next(daemon);
            if !is_lone_status(&message) {
                assert_eq!(message, "WATCHDOG=1\n", "expected a watchdog pet");
                return;
            }
        }
    }
}

fn is_lone_status(message: &str) -> bool {
    message.starts_with("STATUS=") && message.lines().count() == 1
}

/// `env NOTIFY_SOCKET=... WATCHDOG_USEC=... PROGRAM ARGS`: `env` execs the daemon, so the
/// pid the harness holds is the daemon's, as systemd's main pid would be.
fn spawn_notified(
    cluster: &mut Cluster,
    systemd: &FakeSystemd,
    name: &str,
    program: &Path,
    args: &[&OsStr],
) -> Daemon {
    let notify = format!("NOTIFY_SOCKET={}", systemd.path.display());
    // Two seconds: half of it is the one-second tick of both loops, so every tick pets.
    let watchdog = "WATCHDOG_USEC=2000000";
    let mut all: Vec<&OsStr> = vec![OsStr::new(&notify), OsStr::new(watchdog), program.as_os_str()];
    all.extend_from_slice(args);
    cluster.spawn(name, Path::new("/usr/bin/env"), &all)
}

fn send_signal(daemon: &Daemon, signal: &str) {
    let status = Command::new("kill")
        .args(["-s", signal, "--", &daemon.pid().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -s {signal} {}", daemon.pid());
}

// Goal: mbatchd says READY only once it serves (its port file exists), pets the watchdog
// from its loop, handles SIGHUP as a reload without stopping, and says STOPPING on SIGTERM.
#[test]
fn mbatchd_notifies_systemd() {
    let mut cluster = Cluster::new();
    let systemd = FakeSystemd::new(&cluster);
    let port_file = cluster.dir().join("run/mbatchd.port");
    let args: Vec<&OsStr> = vec![
        "--foreground".as_ref(),
        "--port".as_ref(),
        "0".as_ref(),
        "--port-file".as_ref(),
        port_file.as_ref(),
    ];
    let mut mbatchd =
        spawn_notified(&mut cluster, &systemd, "mbatchd", Path::new(env!("CARGO_BIN_EXE_mbatchd")), &args);

    systemd.expect(&mbatchd, "STATUS=replaying the event log in ");
    let ready = systemd.expect(&mbatchd, "READY=1");
    assert!(port_file.exists(), "READY=1 came before the port file was written");
    let port = mbatchd.wait_for_port_file(&port_file, STARTUP_TIMEOUT);
    assert!(ready.contains(&format!(":{port}")), "the status names the bound address: {ready:?}");
    systemd.expect_pet(&mbatchd);

    send_signal(&mbatchd, "HUP");
    let reloading = systemd.expect(&mbatchd, "RELOADING=1");
    assert!(
        reloading.lines().nth(1).is_some_and(|line| line.starts_with("MONOTONIC_USEC=")),
        "{reloading:?}"
    );
    systemd.expect(&mbatchd, "READY=1");
    assert!(mbatchd.is_running(), "SIGHUP stopped mbatchd:\n{}", mbatchd.log());
    // The loop still turns after the reload.
    systemd.expect_pet(&mbatchd);

    send_signal(&mbatchd, "TERM");
    systemd.expect(&mbatchd, "STOPPING=1");
    let status = mbatchd.wait_exit(EXIT_TIMEOUT);
    assert!(status.success(), "mbatchd exited with {status}:\n{}", mbatchd.log());
}

// Goal: sbatchd says READY once its ready file exists, pets the watchdog, survives SIGHUP
// (whose default action would kill it), and says STOPPING on SIGTERM.
#[test]
fn sbatchd_notifies_systemd() {
    let mut cluster = Cluster::new();
    let systemd = FakeSystemd::new(&cluster);
    let ready_file = cluster.dir().join("run/sbatchd.ready");
    let args: Vec<&OsStr> =
        vec!["--host".as_ref(), "localhost".as_ref(), "--ready-file".as_ref(), ready_file.as_ref()];
    let mut sbatchd =
        spawn_notified(&mut cluster, &systemd, "sbatchd", Path::new(env!("CARGO_BIN_EXE_sbatchd")), &args);

    let ready = systemd.expect(&sbatchd, "READY=1");
    assert!(ready_file.exists(), "READY=1 came before the ready file was written");
    assert!(ready.contains("STATUS=serving host localhost"), "{ready:?}");
    systemd.expect_pet(&sbatchd);

    send_signal(&sbatchd, "HUP");
    systemd.expect(&sbatchd, "RELOADING=1");
    systemd.expect(&sbatchd, "READY=1");
    systemd.expect_pet(&sbatchd);
    assert!(sbatchd.is_running(), "SIGHUP stopped sbatchd:\n{}", sbatchd.log());

    send_signal(&sbatchd, "TERM");
    systemd.expect(&sbatchd, "STOPPING=1");
    let status = sbatchd.wait_exit(EXIT_TIMEOUT);
    assert!(status.success(), "sbatchd exited with {status}:\n{}", sbatchd.log());
}

// Goal: a daemon whose stderr is the stream JOURNAL_STREAM names logs for the journal:
// through the journal's socket when there is one, else as plain lines without timestamps
// (the journal adds its own) after a warning; and with another JOURNAL_STREAM (a child whose
// stderr was redirected inherits the variable) it keeps its usual timestamped lines.
#[test]
fn mbatchd_detects_the_journal_stream() {
    use std::os::unix::fs::MetadataExt;
    let journald = Path::new("/run/systemd/journal/socket").exists();
    for matching in [true, false] {
        let cluster = Cluster::new();
        let log_path = cluster.dir().join("log/mbatchd.stderr");
        let log = std::fs::File::create(&log_path).expect("create the log");
        let meta = log.metadata().expect("metadata");
        let ino = if matching { meta.ino() } else { meta.ino() + 1 };
        let port_file = cluster.dir().join("run/mbatchd.port");
        let mut child = Reaped(
            cluster
                .command(env!("CARGO_BIN_EXE_mbatchd"))
                .args(["--foreground", "--port", "0", "--port-file"])
                .arg(&port_file)
                .env("JOURNAL_STREAM", format!("{}:{ino}", meta.dev()))
                .env_remove("NOTIFY_SOCKET")
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("start mbatchd"),
        );
        let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
        util::wait_until("mbatchd's port file", STARTUP_TIMEOUT, || {
            if let Ok(Some(status)) = child.0.try_wait() {
                panic!("mbatchd exited with {status}:\n{}", read_log());
            }
            port_file.exists().then_some(())
        });
        let _status = Command::new("kill").args(["-s", "TERM", &child.0.id().to_string()]).status();
        let status =
            util::wait_until("mbatchd to stop", EXIT_TIMEOUT, || child.0.try_wait().expect("try_wait"));
        assert!(status.success(), "mbatchd exited with {status}:\n{}", read_log());
        let text = read_log();
        let stamped = |line: &str| line.starts_with(|c: char| c.is_ascii_digit());
        if !matching {
            assert!(text.lines().any(|l| l.contains("mbatchd ready") && stamped(l)), "{text}");
        } else if journald {
            assert!(!text.contains("mbatchd ready"), "the entries belong in the journal:\n{text}");
        } else {
            assert!(text.contains("the journal's socket cannot be opened"), "{text}");
            assert!(text.lines().any(|l| l.contains("mbatchd ready")), "{text}");
            assert!(!text.lines().any(stamped), "no timestamps for the journal:\n{text}");
        }
    }
}

/// A child process killed and reaped when the test ends, even by a panic.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _already_gone = self.0.kill();
        let _status = self.0.wait();
    }
}

/// A port free for both UDP and TCP right now (lim needs a fixed, configured port).
fn free_lim_port() -> u16 {
    loop {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("bind tcp");
        let port = tcp.local_addr().expect("addr").port();
        if std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Starts `program` notified, expects READY=1 after `ready_file` exists, a watchdog pet, a
/// pet again after SIGHUP (the daemon survives it), and, if `stopping`, STOPPING=1 and a
/// clean exit on SIGTERM.
fn notifies_systemd(
    mut cluster: Cluster,
    name: &str,
    program: &Path,
    args: &[&OsStr],
    ready_file: &Path,
    stopping: bool,
) {
    let systemd = FakeSystemd::new(&cluster);
    let mut daemon = spawn_notified(&mut cluster, &systemd, name, program, args);
    systemd.expect(&daemon, "READY=1");
    assert!(ready_file.exists(), "{name}: READY=1 came before its ready file was written");
    systemd.expect_pet(&daemon);
    send_signal(&daemon, "HUP");
    systemd.expect_pet(&daemon);
    assert!(daemon.is_running(), "SIGHUP stopped {name}:\n{}", daemon.log());
    if stopping {
        send_signal(&daemon, "TERM");
        systemd.expect(&daemon, "STOPPING=1");
        let status = daemon.wait_exit(EXIT_TIMEOUT);
        assert!(status.success(), "{name} exited with {status}:\n{}", daemon.log());
    }
}

// Goal: lim says READY once its sockets are bound, pets the watchdog and survives SIGHUP.
#[test]
fn lim_notifies_systemd() {
    let cluster = Cluster::new();
    let port = free_lim_port().to_string();
    cluster.rewrite_lsf_conf("LSF_LIM_PORT", &port);
    cluster.rewrite_lsf_conf("LAVA_LIM_TCP_PORT", &port);
    let ready = cluster.dir().join("run/lim.ready");
    let args: Vec<&OsStr> =
        vec!["--host".as_ref(), "localhost".as_ref(), "--ready-file".as_ref(), ready.as_ref()];
    notifies_systemd(cluster, "lim", Path::new(env!("CARGO_BIN_EXE_lim")), &args, &ready, false);
}

// Goal: mxfsd says READY once it serves, pets the watchdog, survives SIGHUP, says STOPPING.
#[test]
fn mxfsd_notifies_systemd() {
    let cluster = Cluster::new();
    let ready = cluster.dir().join("run/mxfsd.port");
    let socket = cluster.dir().join("run/mxfsd.sock");
    let args: Vec<&OsStr> = vec![
        "--host".as_ref(),
        "localhost".as_ref(),
        "--port".as_ref(),
        "0".as_ref(),
        "--socket".as_ref(),
        socket.as_ref(),
        "--ready-file".as_ref(),
        ready.as_ref(),
    ];
    notifies_systemd(cluster, "mxfsd", Path::new(env!("CARGO_BIN_EXE_mxfsd")), &args, &ready, true);
}

// Goal: the coordinator says READY once it serves, pets the watchdog, survives SIGHUP, says
// STOPPING.
#[test]
fn coordinator_notifies_systemd() {
    let cluster = Cluster::new();
    let port_file = cluster.dir().join("run/coordinator.port");
    let ready = cluster.dir().join("run/coordinator.ready");
    let args: Vec<&OsStr> = vec![
        "--port".as_ref(),
        "0".as_ref(),
        "--port-file".as_ref(),
        port_file.as_ref(),
        "--ready-file".as_ref(),
        ready.as_ref(),
    ];
    notifies_systemd(
        cluster,
        "coordinator",
        Path::new(env!("CARGO_BIN_EXE_coordinator")),
        &args,
        &ready,
        true,
    );
}
