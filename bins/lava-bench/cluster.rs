//! A throw-away cluster for the benchmarks that run the real daemons: a temporary folder
//! holding a copy of the repository's `etc/` rewritten so that everything stays inside it
//! (the same recipe as the integration tests' harness, `tests/util/mod.rs`), and guards for
//! the daemons started in it.
//!
//! The configuration: one host, `localhost`, listening on 127.0.0.1; state under `work/`,
//! logs under `log/`, the credential socket under `run/`; a cluster key generated with mode
//! 0600; the release binaries next to `lava-bench` (`LSF_SERVERDIR`, `LSF_BINDIR`). mbatchd
//! binds port 0 and reports its port through `--port-file`, which is then written into
//! `lsf.conf` so that sbatchd and the commands find it as in a real cluster.
//!
//! Every daemon runs in its own process group and is killed (SIGKILL to the group) when its
//! [`Daemon`] guard drops, also on error paths. Jobs do not run in sbatchd's group (each
//! shepherd makes itself a session), so dropping the [`BenchCluster`] also kills every
//! process whose command line names the cluster's folder: shepherds and job scripts left
//! over by a benchmark that stopped early.

use std::ffi::OsStr;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use lava_net::{AuthConfig, Authenticator, ClusterKey, KeyRing};

/// The cluster name of the repository's `etc/`.
pub const CLUSTER_NAME: &str = "lavacore";
/// The one host of a bench cluster.
pub const HOST: &str = "localhost";
/// Longest a daemon may take to become ready.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// Interval of the polls for port and ready files.
const POLL_INTERVAL: Duration = Duration::from_millis(1);

/// The folder holding the repository's `etc/`: `LAVACORE_ETC` if set, else `etc/` of the
/// source tree this binary was built from.
fn repo_etc() -> PathBuf {
    std::env::var_os("LAVACORE_ETC")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("etc"))
}

/// A release binary of the workspace, next to `lava-bench`.
pub fn sibling_binary(name: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::current_exe().context("find lava-bench's own path")?.with_file_name(name);
    if !path.exists() {
        bail!("{} is missing: build it first (cargo build --release --bins)", path.display());
    }
    Ok(path)
}

/// A temporary cluster folder; see the module doc.
#[derive(Debug)]
pub struct BenchCluster {
    /// The folder (`None` only while being dropped).
    dir: Option<tempfile::TempDir>,
    /// Keep the folder when dropped (to look at it, or start a daemon on it by hand).
    keep: bool,
    mbd_port: Option<u16>,
    n_daemons: u32,
}

impl BenchCluster {
    /// Writes a fresh one-host cluster configuration. `mxj` is the host's `MXJ` in
    /// `lsb.hosts` (`None`: the repository's default, `!`, one slot per CPU).
    pub fn new(mxj: Option<u32>) -> anyhow::Result<BenchCluster> {
        let dir =
            tempfile::Builder::new().prefix("lavacore-bench-").tempdir().context("a temporary folder")?;
        let cluster = BenchCluster { dir: Some(dir), keep: false, mbd_port: None, n_daemons: 0 };
        copy_dir(&repo_etc(), &cluster.envdir())?;
        for folder in ["work", "log", "run"] {
            fs::create_dir_all(cluster.dir().join(folder))?;
        }
        let bin_dir = sibling_binary("mbatchd")?.parent().context("a binary has a folder")?.to_owned();
        let settings = [
            ("LSB_SHAREDIR", cluster.dir().join("work")),
            ("LSF_LOGDIR", cluster.dir().join("log")),
            ("LSF_SERVERDIR", bin_dir.clone()),
            ("LSF_BINDIR", bin_dir),
            ("LAVA_CLUSTER_KEY_FILE", cluster.key_path()),
            ("LAVA_CMD_SOCKET", cluster.dir().join("run/lava.sock")),
        ];
        for (key, value) in settings {
            cluster.set_lsf_conf(key, &value.display().to_string())?;
        }
        cluster.set_lsf_conf("LSF_LOG_MASK", "LOG_WARNING")?;
        cluster.write_etc(&format!("lsf.cluster.{CLUSTER_NAME}"), &lsf_cluster(""))?;
        if let Some(mxj) = mxj {
            cluster.write_etc(
                &format!("lsbatch/{CLUSTER_NAME}/configdir/lsb.hosts"),
                &format!("Begin Host\nHOST_NAME  MXJ  JL/U  r1m\ndefault    {mxj}    ()    ()\nEnd Host\n"),
            )?;
        }
        ClusterKey::generate_file(cluster.key_path()).context("generate the cluster key")?;
        Ok(cluster)
    }

    /// Adds simulated execution hosts to `lsf.cluster` (each with its `LAVA_ADDR`) and
    /// gives each `slots` slots in `lsb.hosts`; the local host, which runs the real sbatchd
    /// the commands take their credentials from, gets none (the `scale` bench).
    pub fn add_hosts(&self, hosts: &[(String, Ipv4Addr)], slots: u32) -> anyhow::Result<()> {
        let rows: String =
            hosts.iter().map(|(name, addr)| format!("{name}  !  !  1  (linux)  {addr}  -  -  -\n")).collect();
        self.write_etc(&format!("lsf.cluster.{CLUSTER_NAME}"), &lsf_cluster(&rows))?;
        self.write_etc(
            &format!("lsbatch/{CLUSTER_NAME}/configdir/lsb.hosts"),
            &format!(
                "Begin Host\nHOST_NAME  MXJ  JL/U  r1m\n{HOST}  0  ()  ()\ndefault    {slots}    ()    ()\nEnd Host\n"
            ),
        )
    }

    /// Keeps the folder when the cluster is dropped (its processes are still killed).
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// The cluster's folder.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("the folder lives as long as the cluster").path()
    }

    /// `LSF_ENVDIR`.
    pub fn envdir(&self) -> PathBuf {
        self.dir().join("etc")
    }

    fn key_path(&self) -> PathBuf {
        self.envdir().join("lava.cluster.key")
    }

    /// An authenticator with the cluster key, as a daemon holds one.
    pub fn authenticator(&self) -> anyhow::Result<Arc<Authenticator>> {
        let key = ClusterKey::load(self.key_path()).context("load the cluster key")?;
        Ok(Arc::new(Authenticator::new(KeyRing::new(&key), AuthConfig::default())))
    }

    /// mbatchd's address, once started.
    pub fn mbd_addr(&self) -> anyhow::Result<SocketAddr> {
        let port = self.mbd_port.context("mbatchd was not started")?;
        Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
    }

    fn write_etc(&self, relative: &str, text: &str) -> anyhow::Result<()> {
        let path = self.envdir().join(relative);
        fs::write(&path, text).with_context(|| format!("write {}", path.display()))
    }

    /// Sets `KEY = value` in `lsb.params`' Parameters section: replaces the line of `key`,
    /// or adds one before `End Parameters`.
    pub fn set_lsb_param(&self, key: &str, value: &str) -> anyhow::Result<()> {
        let path = self.envdir().join(format!("lsbatch/{CLUSTER_NAME}/configdir/lsb.params"));
        let text = fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
        let names_key = |line: &str| line.split_whitespace().next().is_some_and(|word| word == key);
        let mut lines: Vec<String> =
            text.lines().filter(|line| !names_key(line)).map(str::to_owned).collect();
        let end = lines
            .iter()
            .rposition(|line| line.trim() == "End Parameters")
            .context("lsb.params has no End Parameters")?;
        lines.insert(end, format!("{key} = {value}"));
        fs::write(&path, lines.join("\n") + "\n").with_context(|| format!("write {}", path.display()))
    }

    /// Sets `KEY=value` in `lsf.conf`: replaces the line of `key`, or appends one.
    fn set_lsf_conf(&self, key: &str, value: &str) -> anyhow::Result<()> {
        let path = self.envdir().join("lsf.conf");
        let text = fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
        let prefix = format!("{key}=");
        let mut lines: Vec<String> =
            text.lines().filter(|line| !line.starts_with(&prefix)).map(str::to_owned).collect();
        lines.push(format!("{key}={value}"));
        fs::write(&path, lines.join("\n") + "\n").with_context(|| format!("write {}", path.display()))
    }

    /// A command for `program` with `LSF_ENVDIR` set to this cluster.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new(program);
        command.env("LSF_ENVDIR", self.envdir()).stdin(Stdio::null());
        command
    }

    /// Spawns mbatchd (`--foreground --port 0 --port-file ...` and `extra`) without waiting.
    pub fn spawn_mbatchd(&mut self, extra: &[&str]) -> anyhow::Result<(Daemon, PathBuf)> {
        let port_file = self.dir().join("run/mbatchd.port");
        match fs::remove_file(&port_file) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                return Err(error).context("remove a stale port file");
            }
            _ => {}
        }
        let port = self.mbd_port.unwrap_or(0).to_string();
        let mut args: Vec<&OsStr> =
            vec!["--foreground".as_ref(), "--port".as_ref(), port.as_ref(), "--port-file".as_ref()];
        args.push(port_file.as_os_str());
        args.extend(extra.iter().map(OsStr::new));
        let daemon = self.spawn("mbatchd", &sibling_binary("mbatchd")?, &args)?;
        Ok((daemon, port_file))
    }

    /// Starts mbatchd and waits until its port file names its port (then in `lsf.conf`).
    pub fn start_mbatchd(&mut self, extra: &[&str]) -> anyhow::Result<Daemon> {
        let (mut daemon, port_file) = self.spawn_mbatchd(extra)?;
        let port = daemon.wait_for_port_file(&port_file, STARTUP_TIMEOUT)?;
        self.port_known(port)?;
        Ok(daemon)
    }

    /// Records mbatchd's port and writes it into `lsf.conf`.
    pub fn port_known(&mut self, port: u16) -> anyhow::Result<()> {
        self.mbd_port = Some(port);
        self.set_lsf_conf("LSB_MBD_PORT", &port.to_string())
    }

    /// Makes the cluster one of `n` master candidates `h1`… (`127.0.0.2`…, beside the
    /// execution host on 127.0.0.1), with `LSF_MASTER_LIST` and fixed free ports for
    /// `LSB_MBD_PORT` and `LAVA_MBD_REPL_PORT`; returns each candidate's name and its
    /// command address.
    pub fn candidates(&mut self, n: usize) -> anyhow::Result<Vec<(String, SocketAddr)>> {
        // Below the ephemeral range: a port the kernel handed out for a moment could be a
        // connection's source port by the time a candidate binds it.
        let (mbd_port, repl_port) = (crate::ports::fixed_port(), crate::ports::fixed_port());
        let candidates: Vec<(String, SocketAddr)> = (1..=n)
            .map(|k| {
                (
                    format!("h{k}"),
                    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, k as u8 + 1)), mbd_port),
                )
            })
            .collect();
        let mut hosts = format!("{HOST}  !  !  1  (cs linux)  127.0.0.1  -  -  -\n");
        for (name, addr) in &candidates {
            hosts.push_str(&format!("{name}  !  !  1  (cs linux)  {}  -  -  -\n", addr.ip()));
        }
        self.write_etc(
            &format!("lsf.cluster.{CLUSTER_NAME}"),
            &format!(
                "# Written by lava-bench.\n\
                 Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\n\
                 Begin Host\n\
                 HOSTNAME  model  type  server  RESOURCES  LAVA_ADDR  LAVA_LIM_PORT  LAVA_SBD_PORT  LAVA_MXFSD_PORT\n\
                 {hosts}End Host\n"
            ),
        )?;
        let names: Vec<&str> = candidates.iter().map(|(name, _)| name.as_str()).collect();
        self.set_lsf_conf("LSF_MASTER_LIST", &format!("\"{}\"", names.join(" ")))?;
        self.set_lsf_conf("LAVA_MBD_REPL_PORT", &repl_port.to_string())?;
        self.port_known(mbd_port)?;
        Ok(candidates)
    }

    /// Starts mbatchd as master candidate `name` (see [`BenchCluster::candidates`]) and
    /// waits for its port file; it serves once it leads.
    pub fn start_candidate(&mut self, name: &str) -> anyhow::Result<Daemon> {
        let port_file = self.dir().join(format!("run/mbatchd.{name}.port"));
        let _stale = fs::remove_file(&port_file);
        let port = self.mbd_port.context("candidates() first")?.to_string();
        let args: Vec<&OsStr> = vec![
            "--foreground".as_ref(),
            "--host".as_ref(),
            name.as_ref(),
            "--port".as_ref(),
            port.as_ref(),
            "--port-file".as_ref(),
            port_file.as_os_str(),
        ];
        let mut daemon = self.spawn("mbatchd", &sibling_binary("mbatchd")?, &args)?;
        daemon.wait_for_port_file(&port_file, STARTUP_TIMEOUT)?;
        Ok(daemon)
    }

    /// Starts sbatchd for the host and waits for its ready file (its credential socket
    /// listens; it registers with mbatchd right after, and jobs submitted meanwhile wait).
    pub fn start_sbatchd(&mut self) -> anyhow::Result<Daemon> {
        let ready = self.dir().join("run/sbatchd.ready");
        let args: Vec<&OsStr> =
            vec!["--host".as_ref(), HOST.as_ref(), "--ready-file".as_ref(), ready.as_ref()];
        // sbatchd starts each job's shepherd from its own folder: say so now if it is missing.
        sibling_binary("lava-shepherd")?;
        let mut daemon = self.spawn("sbatchd", &sibling_binary("sbatchd")?, &args)?;
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while !ready.exists() {
            if !daemon.is_running() {
                bail!("sbatchd exited early:\n{}", daemon.log());
            }
            if Instant::now() > deadline {
                bail!("sbatchd not ready within {STARTUP_TIMEOUT:?}:\n{}", daemon.log());
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        Ok(daemon)
    }

    /// Spawns `program` as a daemon of this cluster: its own process group, standard error
    /// to `log/NAME.N.log`.
    fn spawn(&mut self, name: &str, program: &Path, args: &[&OsStr]) -> anyhow::Result<Daemon> {
        self.n_daemons += 1;
        let log_path = self.dir().join("log").join(format!("{name}.{}.log", self.n_daemons));
        let log = fs::File::create(&log_path).with_context(|| format!("create {}", log_path.display()))?;
        let child = self
            .command(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0)
            .spawn()
            .with_context(|| format!("start {}", program.display()))?;
        Ok(Daemon { name: name.to_owned(), child: Some(child), log_path })
    }
}

impl Drop for BenchCluster {
    fn drop(&mut self) {
        kill_processes_naming(self.dir());
        if self.keep
            && let Some(dir) = self.dir.take()
        {
            eprintln!("cluster folder kept: {}", dir.keep().display());
        }
    }
}

/// CPU seconds (user + system) process `pid` used so far, and those of the children it
/// reaped, from `/proc/PID/stat`.
pub fn process_cpu_secs(pid: u32) -> anyhow::Result<(f64, f64)> {
    let path = format!("/proc/{pid}/stat");
    let stat = fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    // The fields after the command name, which is in parentheses and may hold blanks.
    let fields: Vec<&str> = stat.rsplit_once(')').context("no command name")?.1.split_whitespace().collect();
    let ticks = |idx: usize| -> anyhow::Result<f64> {
        Ok(fields.get(idx).context("a short stat line")?.parse::<f64>()?)
    };
    // utime, stime, cutime, cstime are fields 14 to 17 of proc(5), 12 to 15 here.
    let ticks_per_s = 100.0;
    Ok(((ticks(11)? + ticks(12)?) / ticks_per_s, (ticks(13)? + ticks(14)?) / ticks_per_s))
}

/// A running daemon; its process group is killed with SIGKILL when dropped.
#[derive(Debug)]
pub struct Daemon {
    name: String,
    child: Option<Child>,
    log_path: PathBuf,
}

impl Daemon {
    /// Its pid (also its process group).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Whether it still runs (reaps it if not).
    pub fn is_running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Polls `path` until it holds a port; fails with the daemon's log if the daemon exits
    /// first or `timeout` passes.
    pub fn wait_for_port_file(&mut self, path: &Path, timeout: Duration) -> anyhow::Result<u16> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(text) = fs::read_to_string(path)
                && let Ok(port) = text.trim().parse::<u16>()
            {
                return Ok(port);
            }
            if !self.is_running() {
                bail!("{} exited before writing {}:\n{}", self.name, path.display(), self.log());
            }
            if Instant::now() > deadline {
                bail!("{} wrote no port within {timeout:?}:\n{}", self.name, self.log());
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Its resident memory (`VmRSS` of `/proc/<pid>/status`), in KiB.
    pub fn rss_kb(&self) -> anyhow::Result<u64> {
        rss_kib(self.pid())
    }

    /// CPU seconds (user + system) it used so far, and those of its children it reaped
    /// (for sbatchd: its shepherd zygotes that ended, with everything they had reaped).
    pub fn cpu_secs(&self) -> anyhow::Result<(f64, f64)> {
        process_cpu_secs(self.pid())
    }

    /// CPU seconds of its live children, each with the children it reaped: for sbatchd,
    /// its shepherd zygote and the shepherds (with their jobs) the zygote reaped. A child
    /// that ends between two readings moves from here to the second figure of
    /// [`Daemon::cpu_secs`] once reaped, so the sum of the two only grows.
    pub fn live_children_cpu_secs(&self) -> anyhow::Result<f64> {
        let mut total = 0.0;
        for entry in fs::read_dir("/proc").context("read /proc")?.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
                continue;
            };
            // A process that ends meanwhile is skipped: it is counted once its parent reaps it.
            let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else { continue };
            let parent = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
            if parent.and_then(|parent| parent.parse::<u32>().ok()) != Some(self.pid()) {
                continue;
            }
            if let Ok((own, reaped)) = process_cpu_secs(pid) {
                total += own + reaped;
            }
        }
        Ok(total)
    }

    /// Kills its process group with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&format!("-{}", child.id()), "KILL");
            // The group kill failing (the daemon left its group) must not leave it running.
            let _already_dead = child.kill();
            let _reaped = child.wait();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `kill -s SIGNAL -- TARGET` (a pid, or `-PGID` for a process group); the target may be
/// gone already.
fn signal(target: &str, signal: &str) {
    let _status = Command::new("kill")
        .args(["-s", signal, "--", target])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Kills, by pid, every process whose command line names `dir` (shepherds and job scripts
/// of a bench cluster: nothing outside it names its temporary folder).
fn kill_processes_naming(dir: &Path) {
    let needle = dir.as_os_str().as_encoded_bytes();
    let Ok(entries) = fs::read_dir("/proc") else { return };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else { continue };
        if cmdline.windows(needle.len()).any(|window| window == needle) {
            signal(&pid.to_string(), "KILL");
        }
    }
}

/// `lsf.cluster`: root as the administrator, the local host first (at 127.0.0.1), then
/// `extra_rows` of the Host section.
fn lsf_cluster(extra_rows: &str) -> String {
    format!(
        "# Written by lava-bench.\n\
         Begin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\n\
         Begin Host\n\
         HOSTNAME  model  type  server  RESOURCES  LAVA_ADDR  LAVA_LIM_PORT  LAVA_SBD_PORT  LAVA_MXFSD_PORT\n\
         {HOST}  !  !  1  (cs linux)  127.0.0.1  -  -  -\n\
         {extra_rows}End Host\n"
    )
}

/// Copies the folder tree `from` to `to`.
fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from).with_context(|| format!("read {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target).with_context(|| format!("copy {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// The resident memory of process `pid` (`VmRSS` of `/proc/<pid>/status`), in KiB.
pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no VmRSS in {path}"))
}
