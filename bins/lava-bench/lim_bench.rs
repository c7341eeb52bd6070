//! The `lim` benchmark: one real master lim (the release binary next to `lava-bench`) in a
//! throw-away cluster ([`BenchCluster`]) whose `lsf.cluster` lists the master and `--hosts`
//! simulated hosts (10,000), all on loopback: the master on 127.0.0.1, simulated host `i` on
//! its own address 127.1.(i / 256).(i % 256), every lim on the same port. A load generator
//! binds one UDP socket per simulated host on that host's configured address and port, so
//! that its LIM_LOAD_REPORT datagrams pass the master's admission check (configured source
//! address and port, `hostNo` of that address) exactly as a real slave's would. Sequence
//! numbers start just below `u32::MAX`, so they wrap during the run.
//!
//! - **warm-up**: every simulated host reports once; the master must list all of them `ok`.
//! - **flood**: the generator sends reports round-robin as fast as it can for
//!   `--flood-secs` (3), from `--senders` threads (1) that share the hosts out; then the
//!   master's `accepted` counter (status query) is read once it stops moving. Reported: reports accepted per second of the flood, per second of the
//!   master's CPU time (`/proc/PID/stat`; lim is single-threaded, so this is its rate on one
//!   core), and how many the kernel dropped because the master's socket buffer was full.
//! - **steady**: each simulated host reports once a second, evenly spread, for
//!   `--steady-secs` (10); meanwhile `--queries` (21) host-load queries (what `lsload` sends:
//!   connect, `LIM_TCP_HOST_LOAD`, read and decode every host) are timed, one every
//!   200 ms, and the real `lsload` command is run a few times. Reported: reports sent, accepted
//!   and lost (sent − accepted, and any drop counter that moved), and the query times.
//! - **memory**: the master's `VmRSS` after the steady phase, against a master of a tiny
//!   cluster (one simulated host) that went through the same phases.
//!
//! ```text
//! lim_ingest hosts=10000 mode=flood senders=1 secs=... sent=... accepted=... lost=... reports_per_s=... reports_per_cpu_s=...
//! lim_ingest hosts=10000 mode=steady rate_per_s=10000 secs=... sent=... accepted=... lost=... drops=... master_cpu_pct=...
//! lim_query hosts=10000 queries=21 median_ms=... p90_ms=... max_ms=... reply_bytes=... lsload_median_ms=...
//! lim_memory hosts=10000 rss_kib=... tiny_rss_kib=... bytes_per_host=...
//! ```
//!
//! Goals (issue 4): ≥ 200,000 reports/s on one core (reports_per_cpu_s; reports_per_s when
//! the generator is fast enough); no loss at 10,000 hosts × 1 report/s;
//! ≤ 2 KiB per host; a host-load query of 10,000 hosts answered in ≤ 50 ms.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use lava_lim_wire as wire;
use lava_xdr::frame::{FrameHeader, HEADER_BYTES};
use serde::de::DeserializeOwned;

use crate::cluster::{BenchCluster, CLUSTER_NAME, sibling_binary};

const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// Report interval of the bench cluster (also the steady phase's rate per host).
const REPORT_INTERVAL_MS: u64 = 1_000;
/// First sequence number of every simulated host: the counters wrap during the run.
const FIRST_SEQNO: u32 = u32::MAX - 3;
/// The steady phase sends in slots of this length.
const SLOT: Duration = Duration::from_millis(1);

#[derive(Debug)]
struct Options {
    hosts: u32,
    flood_secs: f64,
    steady_secs: u64,
    queries: usize,
    senders: usize,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options { hosts: 10_000, flood_secs: 3.0, steady_secs: 10, queries: 21, senders: 1 };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--hosts" => options.hosts = value()?.parse()?,
            "--flood-secs" => options.flood_secs = value()?.parse()?,
            "--steady-secs" => options.steady_secs = value()?.parse()?,
            "--queries" => options.queries = value()?.parse()?,
            "--senders" => options.senders = value()?.parse::<usize>()?.max(1),
            other => bail!(
                "unknown option {other}; usage: lava-bench lim [--hosts N] [--flood-secs S] \
                 [--steady-secs S] [--queries N] [--senders N]"
            ),
        }
    }
    if options.hosts == 0 || options.hosts > 60_000 {
        bail!("--hosts must be 1..=60000 (simulated hosts get addresses 127.1.x.y)");
    }
    if options.steady_secs < 2 {
        bail!("--steady-secs must be at least 2");
    }
    Ok(options)
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    if options.hosts < 2 {
        bail!("--hosts must be at least 2 (the memory figure compares with a one-host cluster)");
    }
    let tiny = Options { hosts: 1, queries: 3, ..options };
    let tiny_rss_kib = Bench::start(&tiny)?.run(&tiny, false)?;
    let rss_kib = Bench::start(&options)?.run(&options, true)?;
    let bytes_per_host = (rss_kib.saturating_sub(tiny_rss_kib) * 1024) as f64 / f64::from(options.hosts - 1);
    println!(
        "lim_memory hosts={} rss_kib={rss_kib} tiny_rss_kib={tiny_rss_kib} bytes_per_host={bytes_per_host:.0}",
        options.hosts
    );
    Ok(())
}

/// A lim process in its own group, killed when dropped.
struct Lim {
    child: Option<Child>,
    log: PathBuf,
}

impl Lim {
    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// User + system CPU seconds so far.
    fn cpu_secs(&self) -> anyhow::Result<f64> {
        let path = format!("/proc/{}/stat", self.pid());
        let stat = fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
        let fields: Vec<&str> =
            stat.rsplit_once(')').context("no command name")?.1.split_whitespace().collect();
        let ticks = |idx: usize| -> anyhow::Result<f64> {
            Ok(fields.get(idx).context("a short stat line")?.parse::<f64>()?)
        };
        // utime and stime are fields 14 and 15 of proc(5), 12 and 13 after the name.
        Ok((ticks(11)? + ticks(12)?) / 100.0)
    }

    /// `VmRSS`, KiB.
    fn rss_kib(&self) -> anyhow::Result<u64> {
        crate::cluster::rss_kib(self.pid())
    }
}

impl Drop for Lim {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _already_dead = child.kill();
            let _reaped = child.wait();
        }
    }
}

/// The simulated host `idx` (1-based; 0 is the master)'s address.
fn host_ip(idx: u32) -> Ipv4Addr {
    Ipv4Addr::new(127, 1, (idx >> 8) as u8, idx as u8)
}

/// A port free for UDP and TCP on 127.0.0.1 right now.
fn free_port() -> anyhow::Result<u16> {
    for _ in 0..100 {
        let tcp = TcpListener::bind("127.0.0.1:0").context("bind a TCP port")?;
        let port = tcp.local_addr()?.port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no port free for both UDP and TCP")
}

/// Sets `KEY=value` in lsf.conf (replacing the key's line).
fn set_lsf_conf(envdir: &Path, key: &str, value: &str) -> anyhow::Result<()> {
    let path = envdir.join("lsf.conf");
    let text = fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    let prefix = format!("{key}=");
    let mut lines: Vec<&str> = text.lines().filter(|line| !line.starts_with(&prefix)).collect();
    let line = format!("{key}={value}");
    lines.push(&line);
    fs::write(&path, lines.join("\n") + "\n").with_context(|| format!("write {}", path.display()))
}

/// One simulated host: its socket (bound to its configured address, connected to the
/// master) and its next sequence number.
struct SimHost {
    host_no: u32,
    socket: UdpSocket,
    seqno: u32,
}

impl SimHost {
    /// Sends one report, `template` patched with our numbers; false if the kernel refused it
    /// (counted as sent and lost: the master never saw it).
    fn report(&mut self, template: &mut [u8]) -> bool {
        let seqno = self.seqno;
        self.seqno = seqno.wrapping_add(1);
        template[0..4].copy_from_slice(&seqno.to_be_bytes());
        let payload = HEADER_BYTES;
        template[payload..payload + 4].copy_from_slice(&self.host_no.to_be_bytes());
        template[payload + 4..payload + 8].copy_from_slice(&seqno.to_be_bytes());
        self.socket.send(template).is_ok()
    }
}

/// One running bench: the cluster folder, the master lim and the simulated hosts.
struct Bench {
    cluster: BenchCluster,
    lim: Lim,
    master: SocketAddr,
    /// `hosts[i]` is host `i + 1` of lsf.cluster.
    hosts: Vec<SimHost>,
    /// A load report datagram; host and sequence numbers are patched in before each send.
    template: Vec<u8>,
}

impl Bench {
    fn start(options: &Options) -> anyhow::Result<Bench> {
        let cluster = BenchCluster::new(None)?;
        let envdir = cluster.envdir();
        let port = free_port()?;
        let mut rows = String::from("limmaster ! ! 1 () 127.0.0.1 - - -\n");
        for idx in 1..=options.hosts {
            rows.push_str(&format!("sim{idx} ! ! 1 () {} - - -\n", host_ip(idx)));
        }
        fs::write(
            envdir.join(format!("lsf.cluster.{CLUSTER_NAME}")),
            format!(
                "# Written by lava-bench lim.\nBegin ClusterAdmins\nAdministrators = root\nEnd ClusterAdmins\n\n\
                 Begin Host\nHOSTNAME model type server RESOURCES LAVA_ADDR LAVA_LIM_PORT LAVA_SBD_PORT \
                 LAVA_MXFSD_PORT\n{rows}End Host\n"
            ),
        )
        .context("write lsf.cluster")?;
        for (key, value) in [
            ("LSF_LIM_PORT", port.to_string()),
            ("LAVA_LIM_TCP_PORT", port.to_string()),
            ("LAVA_LIM_REPORT_INTERVAL_MS", REPORT_INTERVAL_MS.to_string()),
        ] {
            set_lsf_conf(&envdir, key, &value)?;
        }
        let master = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let mut hosts = Vec::with_capacity(options.hosts as usize);
        for host_no in 1..=options.hosts {
            let socket = UdpSocket::bind((host_ip(host_no), port))
                .with_context(|| format!("bind {}:{port} for simulated host {host_no}", host_ip(host_no)))?;
            socket.connect(master).context("connect a simulated host to the master")?;
            socket.set_nonblocking(true)?;
            hosts.push(SimHost { host_no, socket, seqno: FIRST_SEQNO });
        }
        let ready = cluster.dir().join("run/lim.ready");
        let log = cluster.dir().join("log/lim.bench.log");
        let stderr = fs::File::create(&log).with_context(|| format!("create {}", log.display()))?;
        let child = Command::new(sibling_binary("lim")?)
            .arg("--envdir")
            .arg(&envdir)
            .args(["--host", "limmaster", "--ready-file"])
            .arg(&ready)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .process_group(0)
            .spawn()
            .context("spawn lim")?;
        let mut lim = Lim { child: Some(child), log };
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while !ready.exists() {
            if !lim.running() {
                bail!("lim exited before it was ready:\n{}", lim.log());
            }
            if Instant::now() > deadline {
                bail!("lim not ready within {STARTUP_TIMEOUT:?}:\n{}", lim.log());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let li = [0.5, 0.4, 0.3, 0.1, 0.0, 12.0, 1.0, 3.0, 5000.0, 1000.0, 8000.0];
        let report = wire::LoadReport { host_no: 0, seq_no: 0, status0: 0, nidx: 11, li };
        let template = wire::encode_datagram(0, &wire::Message::LoadReport(report));
        Ok(Bench { cluster, lim, master, hosts, template })
    }

    /// Sends one report from `hosts[idx]`.
    fn send(&mut self, idx: usize) -> bool {
        self.hosts[idx].report(&mut self.template)
    }

    /// Reads and discards the beacons waiting on every simulated host's socket.
    fn drain_beacons(&self) -> u64 {
        let mut buffer = [0u8; 256];
        let mut n = 0;
        for host in &self.hosts {
            while host.socket.recv(&mut buffer).is_ok() {
                n += 1;
            }
        }
        n
    }

    fn counters(&self) -> anyhow::Result<BTreeMap<String, u64>> {
        let reply: wire::StatusReply = query(self.master, wire::LIM_TCP_STATUS)?.0;
        Ok(reply.counters.into_iter().collect())
    }

    fn accepted(&self) -> anyhow::Result<u64> {
        self.counters()?.get("accepted").copied().context("no `accepted` counter")
    }

    /// The `accepted` counter once it stopped moving (the socket buffer is drained).
    fn accepted_settled(&self) -> anyhow::Result<u64> {
        let mut last = self.accepted()?;
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let now = self.accepted()?;
            if now == last {
                return Ok(now);
            }
            last = now;
        }
    }

    /// Hosts the master lists `ok`, of how many.
    fn n_ok(&self) -> anyhow::Result<(usize, usize)> {
        let reply: wire::HostLoadReply = query(self.master, wire::LIM_TCP_HOST_LOAD)?.0;
        let ok = reply.hosts.iter().filter(|host| host.status == wire::HOST_STATUS_OK).count();
        Ok((ok, reply.hosts.len()))
    }

    /// Runs every phase; prints results when `print`; returns the master's final VmRSS.
    fn run(mut self, options: &Options, print: bool) -> anyhow::Result<u64> {
        let n = self.hosts.len();
        // Warm-up: one report per host, spread over half a second.
        let per_ms = (n / 500).max(1);
        for idx in 0..n {
            self.send(idx);
            if idx % per_ms == per_ms - 1 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            let (ok, total) = self.n_ok()?;
            if ok == n + 1 && total == n + 1 {
                break;
            }
            if Instant::now() > deadline {
                bail!("only {ok} of {total} hosts ok after the warm-up:\n{}", self.lim.log());
            }
            // Hosts whose warm-up report was lost report again.
            for idx in 0..n {
                self.send(idx);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        self.drain_beacons();

        // Flood.
        let before = self.accepted_settled()?;
        let cpu_before = self.lim.cpu_secs()?;
        let started = Instant::now();
        let flood = Duration::from_secs_f64(options.flood_secs);
        let chunk = n.div_ceil(options.senders);
        let template = &self.template;
        let sent: u64 = std::thread::scope(|scope| {
            let threads: Vec<_> = self
                .hosts
                .chunks_mut(chunk)
                .map(|hosts| {
                    scope.spawn(move || {
                        let mut template = template.clone();
                        let mut sent = 0u64;
                        'flood: loop {
                            for host in hosts.iter_mut() {
                                host.report(&mut template);
                                sent += 1;
                                if sent.is_multiple_of(1024) && started.elapsed() >= flood {
                                    break 'flood;
                                }
                            }
                        }
                        sent
                    })
                })
                .collect();
            threads.into_iter().map(|thread| thread.join().unwrap_or(0)).sum()
        });
        let secs = started.elapsed().as_secs_f64();
        let accepted = self.accepted_settled()? - before;
        let cpu = self.lim.cpu_secs()? - cpu_before;
        if print {
            println!(
                "lim_ingest hosts={n} mode=flood senders={} secs={secs:.2} sent={sent} accepted={accepted} lost={} \
                 reports_per_s={:.0} reports_per_cpu_s={:.0} master_cpu_s={cpu:.2}",
                options.senders,
                sent - accepted,
                accepted as f64 / secs,
                accepted as f64 / cpu.max(0.01),
            );
        }
        self.drain_beacons();
        // Hosts that lost every flood report (none should, but the kernel may drop a
        // whole run of them) are back before the steady phase.
        for idx in 0..n {
            self.send(idx);
        }
        std::thread::sleep(Duration::from_millis(200));

        // Steady: every host once per second, evenly spread; queries meanwhile.
        let counters_before = self.counters()?;
        let before = counters_before.get("accepted").copied().unwrap_or(0);
        let cpu_before = self.lim.cpu_secs()?;
        let started = Instant::now();
        let n_slots = (options.steady_secs * REPORT_INTERVAL_MS) as usize;
        let per_second = (REPORT_INTERVAL_MS as usize).max(1);
        let mut sent = 0u64;
        let mut refused = 0u64;
        let mut query_times = Vec::new();
        let mut reply_bytes = 0;
        let mut next_query = started + Duration::from_secs(1);
        let mut n_beacons = 0;
        for slot in 0..n_slots {
            let second_slot = slot % per_second;
            let from = n * second_slot / per_second;
            let to = n * (second_slot + 1) / per_second;
            for idx in from..to {
                if !self.send(idx) {
                    refused += 1;
                }
                sent += 1;
            }
            if second_slot == per_second - 1 {
                n_beacons += self.drain_beacons();
            }
            let now = Instant::now();
            if query_times.len() < options.queries && now >= next_query {
                let at = Instant::now();
                let (reply, bytes): (wire::HostLoadReply, usize) =
                    query(self.master, wire::LIM_TCP_HOST_LOAD)?;
                query_times.push(at.elapsed().as_secs_f64() * 1000.0);
                reply_bytes = bytes;
                if reply.hosts.len() != n + 1 {
                    bail!("the host-load reply lists {} hosts, not {}", reply.hosts.len(), n + 1);
                }
                next_query = Instant::now() + Duration::from_millis(200);
            }
            let due = started + SLOT * (slot as u32 + 1);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        let secs = started.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_millis(200));
        let counters_after = self.counters()?;
        let accepted = counters_after.get("accepted").copied().unwrap_or(0) - before;
        let cpu = self.lim.cpu_secs()? - cpu_before;
        let drops: u64 = counters_after
            .iter()
            .filter(|(name, _)| name.starts_with("drop_"))
            .map(|(name, value)| value - counters_before.get(name).copied().unwrap_or(0))
            .sum();
        let (ok, total) = self.n_ok()?;
        if print {
            println!(
                "lim_ingest hosts={n} mode=steady rate_per_s={n} secs={secs:.2} sent={sent} accepted={accepted} \
                 lost={} send_refused={refused} drops={drops} hosts_ok={ok}/{total} master_cpu_pct={:.1} \
                 beacons_received={n_beacons}",
                sent - accepted,
                100.0 * cpu / secs,
            );
        }
        let lsload = sibling_binary("lsload")?;
        let mut lsload_times = Vec::new();
        for _ in 0..5 {
            let at = Instant::now();
            let output = self.cluster.command(&lsload).output().context("run lsload")?;
            lsload_times.push(at.elapsed().as_secs_f64() * 1000.0);
            if !output.status.success() || output.stdout.iter().filter(|&&b| b == b'\n').count() != n + 2 {
                bail!(
                    "lsload failed or printed the wrong number of lines: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
        }
        if print {
            let sorted = |mut times: Vec<f64>| {
                times.sort_by(f64::total_cmp);
                times
            };
            let times = sorted(query_times);
            let lsload_times = sorted(lsload_times);
            let at =
                |q: f64| times.get(((times.len() - 1) as f64 * q).round() as usize).copied().unwrap_or(0.0);
            println!(
                "lim_query hosts={n} queries={} median_ms={:.2} p90_ms={:.2} max_ms={:.2} reply_bytes={reply_bytes} \
                 lsload_median_ms={:.1}",
                times.len(),
                at(0.5),
                at(0.9),
                at(1.0),
                lsload_times[lsload_times.len() / 2],
            );
        }
        self.lim.rss_kib()
    }
}

/// One query on the master's TCP port, as `lsload` sends it: the decoded reply and its size.
fn query<R: DeserializeOwned>(addr: SocketAddr, operation: u32) -> anyhow::Result<(R, usize)> {
    let mut stream =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).with_context(|| format!("connect {addr}"))?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_nodelay(true)?;
    let mut request = Vec::with_capacity(HEADER_BYTES);
    FrameHeader { sequence: 1, operation, version: wire::LIM_VERSION, length: 0, status: 0 }
        .write(&mut request);
    stream.write_all(&request)?;
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head)?;
    let header = FrameHeader::parse(&head).map_err(|error| anyhow::anyhow!("{error}"))?;
    if header.status != wire::TCP_STATUS_OK {
        bail!("query {operation} refused with status {}", header.status);
    }
    let mut body = vec![0u8; header.length as usize];
    stream.read_exact(&mut body)?;
    let limits = lava_xdr::Limits { input_bytes_max: body.len().max(1), ..lava_xdr::Limits::default() };
    let reply =
        lava_xdr::from_bytes(&body, &limits).map_err(|error| anyhow::anyhow!("bad reply: {error}"))?;
    Ok((reply, HEADER_BYTES + body.len()))
}
