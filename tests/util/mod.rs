//! The harness of the integration tests: a throw-away cluster folder
//! ([`Cluster`]) and the real daemons started in it ([`Daemon`]), plus, in
//! [`proto`], a fake command client and a fake sbatchd that speak the batch
//! protocol byte for byte.
//!
//! Every test makes its own [`Cluster`]: a temporary folder holding a copy of
//! the repository's `etc/` rewritten so that everything stays inside it (state
//! under `work/`, logs under `log/`, the cluster key generated with mode 0600,
//! the hosts the test names with the first one at 127.0.0.1). Daemons bind
//! port 0 and report the port they got through a port file, which the harness
//! polls with a bounded timeout and then writes back into `lsf.conf`, so that
//! anything started later (sbatchd, the commands) finds them through the
//! configuration like in a real cluster. A [`Daemon`] runs in its own process
//! group and is killed with SIGKILL (the whole group) when the guard drops,
//! so a failing test never leaves a daemon behind; when the test is failing,
//! the guard first prints the daemon's log.
//!
//! Set `LAVACORE_KEEP_TEST_DIR=1` to keep the folders for a look afterwards.

#![allow(dead_code)] // Each test file uses a different part of the harness.

pub mod fsync_fault;
pub mod hostile;
pub mod lim_output;
pub mod mxfsd;
pub mod netns;
pub mod proto;
pub mod small_fs;

use std::ffi::{OsStr, OsString};
use std::fs;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lava_net::{AuthConfig, Authenticator, ClusterKey, KeyRing};

/// Longest a daemon may take to become ready (debug build, busy 2-core machine).
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest one answer may take to arrive.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a daemon may take to exit after a signal.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Interval of every bounded poll.
pub const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// The cluster name of the repository's `etc/`.
pub const CLUSTER_NAME: &str = "lavacore";
/// The address every test daemon listens on.
pub const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The job id of bsub's `Job <N> is submitted ...` at the start of `said`;
/// panics showing what was said when there is none.
pub fn submitted_job_id(said: &str) -> u32 {
    said.strip_prefix("Job <")
        .and_then(|rest| rest.split('>').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("bsub printed no job id: {said}"))
}

// `fixed_port`, shared with lava-bench's throwaway clusters (one file, two users).
#[path = "../../bins/lava-bench/ports.rs"]
mod ports;
#[allow(unused_imports)] // as `dead_code` for the rest of this module: not every test binary uses it
pub use ports::fixed_port;

/// Calls `probe` every [`POLL_INTERVAL`] until it returns `Some`, for at most
/// `timeout`; panics naming `what` if it never does.
pub fn wait_until<T>(what: &str, timeout: Duration, probe: impl FnMut() -> Option<T>) -> T {
    wait_until_showing(what, timeout, probe, String::new)
}

/// [`wait_until`], whose timeout also shows what `context` says then (a screen, a log).
pub fn wait_until_showing<T>(
    what: &str,
    timeout: Duration,
    probe: impl FnMut() -> Option<T>,
    context: impl FnOnce() -> String,
) -> T {
    poll_until(timeout, probe)
        .unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}\n{}", context()))
}

/// Calls `probe` every [`POLL_INTERVAL`] until it returns `Some`, for at most `timeout`;
/// `None` when it never did (for a wait whose end the test does not require).
pub fn poll_until<T>(timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// The repository's root (where `etc/` is).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `mbatchd` binary built for this test run.
pub fn mbatchd_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mbatchd"))
}

/// A throw-away cluster configuration and state folder; see the module doc.
#[derive(Debug)]
pub struct Cluster {
    dir: Option<tempfile::TempDir>,
    hosts: Vec<String>,
    mbd_port: Option<u16>,
    n_daemons: u32,
    /// Extra environment of the daemons spawned under a name: (name, variable, value).
    daemon_env: Vec<(String, String, OsString)>,
}

impl Cluster {
    /// A one-host cluster whose host is `localhost`.
    pub fn new() -> Cluster {
        Cluster::with_hosts(&["localhost"])
    }

    /// A cluster of `hosts`, in this order (the first is the master); the
    /// first listens on 127.0.0.1 (`LAVA_ADDR`), the others have no address
    /// of their own (give them one with [`Cluster::write_file`] if needed).
    pub fn with_hosts(hosts: &[&str]) -> Cluster {
        assert!(!hosts.is_empty(), "a cluster has at least one host");
        let dir = tempfile::Builder::new().prefix("lavacore-test-").tempdir().expect("a temporary folder");
        let cluster = Cluster {
            dir: Some(dir),
            hosts: hosts.iter().map(|host| (*host).to_owned()).collect(),
            mbd_port: None,
            n_daemons: 0,
            daemon_env: Vec::new(),
        };
        copy_dir(&repo_root().join("etc"), &cluster.envdir());
        for folder in ["work", "log", "run"] {
            fs::create_dir_all(cluster.dir().join(folder)).expect("create a cluster folder");
        }
        let bin_dir = mbatchd_bin().parent().expect("a binary has a folder").to_owned();
        let settings = [
            ("LSB_SHAREDIR", cluster.dir().join("work")),
            ("LSF_LOGDIR", cluster.dir().join("log")),
            ("LSF_SERVERDIR", bin_dir.clone()),
            ("LSF_BINDIR", bin_dir),
            ("LAVA_CLUSTER_KEY_FILE", cluster.key_path()),
            ("LAVA_CMD_SOCKET", cluster.dir().join("run/lava.sock")),
        ];
        for (key, value) in settings {
            cluster.rewrite_lsf_conf(key, &value.display().to_string());
        }
        cluster.rewrite_lsf_conf("LSF_LOG_MASK", "LOG_INFO");
        // A small space reserve (each mbatchd and sbatchd writes and fsyncs it at start):
        // the default 16 MiB, in every test's cluster, would cost the suite gigabytes.
        cluster.rewrite_lsf_conf("LAVA_STATE_RESERVE_MB", "1");
        let mut rows = String::new();
        for (idx, host) in hosts.iter().enumerate() {
            let addr = if idx == 0 { LOOPBACK.to_string() } else { "-".to_owned() };
            rows.push_str(&format!("{host}  !  !  1  (cs linux)  {addr}  -  -  -\n"));
        }
        cluster.write_file(
            &format!("etc/lsf.cluster.{CLUSTER_NAME}"),
            &format!(
                "# Written by the integration test harness.\n\
                 Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\n\
                 Begin Host\n\
                 HOSTNAME  model  type  server  RESOURCES  LAVA_ADDR  LAVA_LIM_PORT  LAVA_SBD_PORT  LAVA_MXFSD_PORT\n\
                 {rows}End Host\n"
            ),
        );
        ClusterKey::generate_file(cluster.key_path()).expect("generate the cluster key");
        cluster
    }

    /// The cluster's folder.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("the folder lives as long as the cluster").path()
    }

    /// `LSF_ENVDIR`: the folder holding `lsf.conf`.
    pub fn envdir(&self) -> PathBuf {
        self.dir().join("etc")
    }

    /// The hosts, in `lsf.cluster` order.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// The cluster key file (`LAVA_CLUSTER_KEY_FILE`, mode 0600).
    pub fn key_path(&self) -> PathBuf {
        self.envdir().join("lava.cluster.key")
    }

    /// The cluster key.
    pub fn key(&self) -> ClusterKey {
        ClusterKey::load(self.key_path()).expect("the cluster key loads")
    }

    /// An authenticator with the cluster key, as a daemon or a command holds one.
    pub fn authenticator(&self) -> Arc<Authenticator> {
        Arc::new(Authenticator::new(KeyRing::new(&self.key()), AuthConfig::default()))
    }

    /// `$LSB_SHAREDIR/<cluster>`: the daemons' durable state.
    pub fn work_dir(&self) -> PathBuf {
        self.dir().join("work").join(CLUSTER_NAME)
    }

    /// mbatchd's event log folder.
    pub fn event_log_dir(&self) -> PathBuf {
        self.work_dir().join("logdir")
    }

    /// Writes `text` to `relative` inside the cluster's folder (`etc/...` for configuration).
    pub fn write_file(&self, relative: &str, text: &str) {
        let path = self.dir().join(relative);
        fs::create_dir_all(path.parent().expect("a file has a folder")).expect("create the folder");
        fs::write(&path, text).unwrap_or_else(|error| panic!("write {}: {error}", path.display()));
    }

    /// The layout of the master-candidate tests, for a cluster made `with_hosts(&["h0",
    /// "h1", "h2", "h3"])`: h0 on 127.0.0.1 (the execution host), h1 to h3 on 127.0.0.2 to
    /// .4, and `candidates` (among h1 to h3, in order) as `LSF_MASTER_LIST`.
    pub fn set_master_candidates(&self, candidates: &[&str]) {
        self.write_file(
            "etc/lsf.cluster.lavacore",
            "Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\nBegin Host\n\
             HOSTNAME model type server RESOURCES LAVA_ADDR\n\
             h0 ! ! 1 (cs linux) 127.0.0.1\nh1 ! ! 1 (cs linux) 127.0.0.2\n\
             h2 ! ! 1 (cs linux) 127.0.0.3\nh3 ! ! 1 (cs linux) 127.0.0.4\nEnd Host\n",
        );
        self.rewrite_lsf_conf("LSF_MASTER_LIST", &format!("\"{}\"", candidates.join(" ")));
    }

    /// Sets `KEY=value` in `lsf.conf`: replaces the line of `key`, or appends one.
    pub fn rewrite_lsf_conf(&self, key: &str, value: &str) {
        let path = self.envdir().join("lsf.conf");
        let text = fs::read_to_string(&path).expect("read lsf.conf");
        let prefix = format!("{key}=");
        let mut found = false;
        let mut lines: Vec<String> = text
            .lines()
            .map(|line| {
                if line.starts_with(&prefix) {
                    found = true;
                    format!("{key}={value}")
                } else {
                    line.to_owned()
                }
            })
            .collect();
        if !found {
            lines.push(format!("{key}={value}"));
        }
        fs::write(&path, lines.join("\n") + "\n").expect("write lsf.conf");
    }

    /// A copy of the configuration for one more sbatchd on this machine, as if on host
    /// `host`: its own credential socket (each sbatchd serves one), everything else shared.
    /// Returns the new `LSF_ENVDIR`.
    pub fn host_envdir(&self, host: &str) -> PathBuf {
        let envdir = self.dir().join(format!("etc-{host}"));
        fs::create_dir_all(&envdir).expect("create the envdir");
        for entry in fs::read_dir(self.envdir()).expect("read etc") {
            let entry = entry.expect("an entry");
            if entry.file_type().expect("a type").is_file() {
                fs::copy(entry.path(), envdir.join(entry.file_name())).expect("copy a file");
            }
        }
        let socket = self.dir().join(format!("run/lava.{host}.sock"));
        let conf = fs::read_to_string(envdir.join("lsf.conf")).expect("read lsf.conf");
        let conf: String = conf
            .lines()
            .map(|line| {
                if line.starts_with("LAVA_CMD_SOCKET=") {
                    format!("LAVA_CMD_SOCKET={}\n", socket.display())
                } else {
                    format!("{line}\n")
                }
            })
            .collect();
        fs::write(envdir.join("lsf.conf"), conf).expect("write lsf.conf");
        envdir
    }

    /// The value of `KEY=` in `lsf.conf`, if set.
    pub fn lsf_conf_value(&self, key: &str) -> Option<String> {
        let text = fs::read_to_string(self.envdir().join("lsf.conf")).expect("read lsf.conf");
        let prefix = format!("{key}=");
        text.lines().find_map(|line| line.strip_prefix(&prefix).map(str::to_owned))
    }

    /// Sets `key=value` in the environment of every daemon spawned as `daemon` from now on
    /// (the `name` of [`Cluster::spawn`]).
    pub fn set_daemon_env(&mut self, daemon: &str, key: &str, value: impl Into<OsString>) {
        self.daemon_env.push((daemon.to_owned(), key.to_owned(), value.into()));
    }

    /// mbatchd's port, once it was started.
    pub fn mbd_port(&self) -> Option<u16> {
        self.mbd_port
    }

    /// mbatchd's address, once it was started.
    pub fn mbd_addr(&self) -> SocketAddr {
        SocketAddr::new(LOOPBACK, self.mbd_port.expect("mbatchd was started"))
    }

    /// A command for `program` with `LSF_ENVDIR` set to this cluster.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new(program);
        command.env("LSF_ENVDIR", self.envdir()).stdin(Stdio::null());
        command
    }

    /// Starts mbatchd and waits until it is ready; see [`Cluster::start_mbatchd_with`].
    pub fn start_mbatchd(&mut self) -> Daemon {
        self.start_mbatchd_with(&[])
    }

    /// Starts mbatchd with `extra` arguments and waits (bounded) for its port
    /// file. The first start binds port 0; later starts rebind the same port,
    /// as a restarted mbatchd would, so its peers find it again. The port is
    /// written to `lsf.conf` (`LSB_MBD_PORT`).
    pub fn start_mbatchd_with(&mut self, extra: &[&str]) -> Daemon {
        let port = self.mbd_port.unwrap_or(0).to_string();
        let port_file = self.dir().join("run/mbatchd.port");
        let mut args: Vec<&OsStr> = vec![
            "--foreground".as_ref(),
            "--port".as_ref(),
            port.as_ref(),
            "--port-file".as_ref(),
            port_file.as_ref(),
        ];
        args.extend(extra.iter().map(|arg| OsStr::new(*arg)));
        // A port file left by an earlier run must not be taken for this one's.
        match fs::remove_file(&port_file) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => panic!("remove {}: {error}", port_file.display()),
        }
        let mut daemon = self.spawn("mbatchd", &mbatchd_bin(), &args);
        let port = daemon.wait_for_port_file(&port_file, STARTUP_TIMEOUT);
        self.mbd_port = Some(port);
        self.rewrite_lsf_conf("LSB_MBD_PORT", &port.to_string());
        daemon
    }

    /// Starts sbatchd for `host` (`--host`) and waits (bounded) for its ready
    /// file: its credential socket listens, so the commands work; it registers
    /// with mbatchd right after.
    pub fn start_sbatchd(&mut self, host: &str) -> Daemon {
        let ready = self.dir().join(format!("run/sbatchd.{host}.ready"));
        let _absent = fs::remove_file(&ready);
        let args: Vec<&OsStr> =
            vec!["--host".as_ref(), host.as_ref(), "--ready-file".as_ref(), ready.as_ref()];
        let mut daemon = self.spawn("sbatchd", &mbatchd_bin().with_file_name("sbatchd"), &args);
        wait_until("sbatchd's ready file", STARTUP_TIMEOUT, || {
            assert!(daemon.is_running(), "sbatchd exited early:\n{}", daemon.log());
            ready.exists().then_some(())
        });
        daemon
    }

    /// Starts lim for `host` and waits (bounded) for its ready file.
    pub fn start_lim(&mut self, host: &str) -> Daemon {
        let ready = self.dir().join(format!("run/lim.{host}.ready"));
        // A ready file of an earlier run of this host's lim must not be taken for this one's.
        let _absent = fs::remove_file(&ready);
        let bin = mbatchd_bin().with_file_name("lim");
        let args: Vec<&OsStr> =
            vec!["--host".as_ref(), host.as_ref(), "--ready-file".as_ref(), ready.as_os_str()];
        let mut daemon = self.spawn("lim", &bin, &args);
        wait_until("lim ready file", STARTUP_TIMEOUT, || {
            assert!(daemon.is_running(), "lim {host} exited:\n{}", daemon.log());
            ready.exists().then_some(())
        });
        daemon
    }

    /// Starts sbatchd for `host` with the configuration in `envdir` (see
    /// [`Cluster::host_envdir`]) and waits (bounded) for its ready file.
    pub fn start_sbatchd_in(&mut self, host: &str, envdir: &Path) -> Daemon {
        let ready = self.dir().join(format!("run/sbatchd.{host}.ready"));
        let args: Vec<&OsStr> = vec![
            "--envdir".as_ref(),
            envdir.as_os_str(),
            "--host".as_ref(),
            host.as_ref(),
            "--ready-file".as_ref(),
            ready.as_os_str(),
        ];
        let mut daemon = self.spawn("sbatchd", &mbatchd_bin().with_file_name("sbatchd"), &args);
        wait_until("sbatchd ready file", STARTUP_TIMEOUT, || {
            assert!(daemon.is_running(), "sbatchd {host} exited:\n{}", daemon.log());
            ready.exists().then_some(())
        });
        daemon
    }

    /// Starts the coordinator with `extra` arguments on `port` (0 the first time), waits
    /// for its ready file, and writes its port to `lsf.conf` (`LAVA_COORD_PORT`).
    pub fn start_coordinator(&mut self, port: u16, extra: &[&str]) -> Daemon {
        let port_file = self.dir().join("run/coordinator.port");
        let ready_file = self.dir().join("run/coordinator.ready");
        let port = port.to_string();
        let mut args: Vec<&OsStr> = vec![
            "--port".as_ref(),
            port.as_ref(),
            "--port-file".as_ref(),
            port_file.as_ref(),
            "--ready-file".as_ref(),
            ready_file.as_ref(),
        ];
        args.extend(extra.iter().map(OsStr::new));
        for stale in [&port_file, &ready_file] {
            let _absent = fs::remove_file(stale);
        }
        let mut daemon = self.spawn("coordinator", &mbatchd_bin().with_file_name("coordinator"), &args);
        let port = daemon.wait_for_port_file(&port_file, STARTUP_TIMEOUT);
        wait_until("the coordinator's ready file", STARTUP_TIMEOUT, || ready_file.exists().then_some(()));
        self.rewrite_lsf_conf("LAVA_COORD_PORT", &port.to_string());
        daemon
    }

    /// Spawns `program` with `args` as a daemon of this cluster: `LSF_ENVDIR`
    /// set, its own process group, standard error to `log/NAME.N.log`. Does
    /// not wait for anything; see [`Daemon::wait_for_port_file`].
    pub fn spawn(&mut self, name: &str, program: &Path, args: &[&OsStr]) -> Daemon {
        self.n_daemons += 1;
        let log_path = self.dir().join("log").join(format!("{name}.{}.log", self.n_daemons));
        let log = fs::File::create(&log_path).expect("create the daemon's log");
        let mut command = self.command(program);
        for (_, key, value) in self.daemon_env.iter().filter(|(daemon, _, _)| daemon == name) {
            command.env(key, value);
        }
        let child = command
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|error| panic!("start {}: {error}", program.display()));
        Daemon { name: name.to_owned(), child: Some(child), log_path, port: None }
    }
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster::new()
    }
}

impl Cluster {
    /// Kills the process group of every job a shepherd of this cluster started (from the
    /// `pid` files in each host's state folders): jobs outlive their sbatchd by design, so
    /// a test that ends with jobs running would otherwise leave them behind.
    fn kill_jobs(&self) {
        let Some(dir) = self.dir.as_ref() else { return };
        let Ok(hosts) = fs::read_dir(dir.path().join("work").join(CLUSTER_NAME).join("sbd")) else { return };
        let mut groups = Vec::new();
        for host in hosts.flatten() {
            let Ok(jobs) = fs::read_dir(host.path().join("state")) else { continue };
            for job in jobs.flatten() {
                let line = fs::read_to_string(job.path().join("pid")).unwrap_or_default();
                let pgid = line.split(' ').find_map(|field| field.strip_prefix("pgid=")?.parse::<i32>().ok());
                if let Some(pgid) = pgid.filter(|pgid| *pgid > 1) {
                    groups.push(format!("-{pgid}"));
                }
            }
        }
        // One `kill` for every group: a host keeps thousands of finished jobs' folders
        // (tombstones), and a process each would take half a minute.
        for chunk in groups.chunks(1_000) {
            signal_all(chunk, "KILL");
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kill_jobs();
        let keep = std::env::var_os("LAVACORE_KEEP_TEST_DIR").is_some_and(|value| value != "0");
        if (keep || std::thread::panicking())
            && let Some(dir) = self.dir.take()
        {
            let path = dir.keep();
            eprintln!("cluster folder kept: {}", path.display());
        }
    }
}

/// A running daemon; killed (SIGKILL to its process group) when dropped.
#[derive(Debug)]
pub struct Daemon {
    name: String,
    child: Option<Child>,
    log_path: PathBuf,
    port: Option<u16>,
}

impl Daemon {
    /// Its pid (also its process group).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the daemon was not reaped").id()
    }

    /// The port it reported.
    pub fn port(&self) -> u16 {
        self.port.expect("the daemon reported its port")
    }

    /// 127.0.0.1 and the port it reported.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::new(LOOPBACK, self.port())
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Whether it is still running (reaps it if not).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => child.try_wait().expect("try_wait").is_none(),
            None => false,
        }
    }

    /// Polls for `path` to hold a port, for at most `timeout`; panics with
    /// the daemon's log if it exits first or never writes it.
    pub fn wait_for_port_file(&mut self, path: &Path, timeout: Duration) -> u16 {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(text) = fs::read_to_string(path)
                && let Ok(port) = text.trim().parse::<u16>()
            {
                self.port = Some(port);
                return port;
            }
            if !self.is_running() {
                panic!("{} exited before writing {}:\n{}", self.name, path.display(), self.log());
            }
            if Instant::now() >= deadline {
                panic!(
                    "{} wrote no port to {} within {timeout:?}:\n{}",
                    self.name,
                    path.display(),
                    self.log()
                );
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Waits (bounded) for the daemon to exit on its own.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let child = self.child.as_mut().expect("the daemon was not reaped");
        let status =
            wait_until(&format!("{} to exit", self.name), timeout, || child.try_wait().expect("try_wait"));
        self.child = None;
        status
    }

    /// Sends SIGTERM to the daemon and waits (bounded) for it to exit.
    pub fn terminate(&mut self) -> ExitStatus {
        signal(&self.pid().to_string(), "TERM");
        self.wait_exit(EXIT_TIMEOUT)
    }

    /// Kills the daemon's whole process group with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&format!("-{}", child.id()), "KILL");
            // The group kill failing (the daemon left its group) must not leave it running.
            let _already_dead = child.kill();
            child.wait().expect("reap the daemon");
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- log of {} ({}) ----\n{}", self.name, self.log_path.display(), self.log());
        }
        self.kill();
    }
}

/// `kill -s SIGNAL -- TARGET` (a pid, or `-PGID` for a process group).
fn signal(target: &str, signal: &str) {
    signal_all(&[target.to_owned()], signal);
}

/// `kill -s SIGNAL -- TARGETS...`: every target is tried, gone ones included.
fn signal_all(targets: &[String], signal: &str) {
    // The targets may be gone already; the caller reaps and checks.
    let _status = Command::new("kill")
        .args(["-s", signal, "--"])
        .args(targets)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Copies the folder tree `from` to `to`.
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create a folder");
    for entry in fs::read_dir(from).unwrap_or_else(|error| panic!("read {}: {error}", from.display())) {
        let entry = entry.expect("a folder entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

/// Sets a file's permission bits.
pub fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}
