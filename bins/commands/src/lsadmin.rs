//! `lsadmin`: LSF's administrator command for lim. Three subcommands are served:
//!
//! - `lsadmin ckconfig [-v]` (LSF's): loads lsf.conf, lsf.shared and lsf.cluster.NAME from
//!   `LSF_ENVDIR` with lava-conf, exactly as lim does at start, and prints either
//!   `No errors found.` (exit 0) or the first error as `path:line: what` followed by
//!   `There are fatal errors.` (exit 255).
//! - `lsadmin showstatus [host]` (ours, in the spirit of `badmin showstatus`): asks the lim
//!   of `host` (default: this host — `LAVA_HOST` when set, several logical hosts on one
//!   machine, else the machine's host name, as lim takes it, else its short form) on
//!   its TCP query port (lava-lim-wire's `LIM_TCP_ADMIN_STATUS`, which every lim answers)
//!   and prints its role, the master, the hosts by status (master only), then `Counters:`
//!   with one `name value` line each. With two or more master candidates
//!   (`LSF_MASTER_LIST`), a `Master candidates` block before the counters gives each
//!   candidate's lim role in list order, as its own lim answers it (docs/failover.md).
//! - `lsadmin sbdstatus` (ours): asks the local sbatchd over its Unix socket
//!   (`LAVA_CMD_SOCKET`, SBD_STATUS_QUERY) and prints its host, the master, the state of its
//!   link to mbatchd, then `Counters:` (jobs by phase, shepherds, messages sent and resent by
//!   operation, record persists, fsyncs and commit latency, link connects, credentials).
//!
//! - `reconfig` (LSF's): every lim of `lsf.cluster` checks its configuration and, if it
//!   loads, restarts in place (exec of itself) to read it; one `Restart LIM on <host>
//!   ...... done` line per host. The request leaves from a privileged port (root only)
//!   and a lim accepts it only so, from a host of the cluster.
//!
//! - `showconf lim` (LSF's; any user, no daemon asked): `LIM configuration at <date>`
//!   then `    KEY = value` lines, lsf.conf's values in effect ([`crate::showconf`]).
//!
//! - `limlock [-t seconds]` and `limunlock` (LSF's): lock this host's lim (the default host
//!   of `showstatus`) until unlocked or for `seconds`, or unlock it (`LIM_TCP_LOCK`). While
//!   locked the host's status word has `LIM_LOCKEDU`: `lsload` shows `lockU`, mbatchd sends
//!   it no new job and `bhosts` shows it `closed` (`closed_Lock`). Like `reconfig` the
//!   request leaves from a privileged port (root only), and lim takes it only from its own
//!   host. LSF's words: `Host is locked`, `Host is locked for N seconds`, `Host is unlocked`;
//!   a refusal is `ls_lockhost: Host is already locked` / `ls_unlockhost: Host is not
//!   locked` (exit 255).
//!
//! LSF's other subcommands (`limstartup`, `limshutdown`, `limrestart`, ...) are
//! recognised and refused with `not supported by LavaCore yet` (exit 255); anything else is
//! LSF's `Invalid command`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

use lava_conf::BaseConfig;
use lava_lim_wire as wire;
use lava_xdr::frame::{FrameHeader, HEADER_BYTES};

use crate::lim::{QUERY_TIMEOUT_MS, REPLY_BODY_BYTES_MAX};
use crate::term::{self, Term};

const USAGE: &str = "Usage: lsadmin [-h] [-V] ckconfig [-v] | reconfig | showstatus [host_name] | sbdstatus\n\
     \x20      | limlock [-t time_seconds] | limunlock | showconf lim\n";
/// Largest status reply accepted from sbatchd.
const SBD_REPLY_BYTES_MAX: u32 = 1 << 20;

/// LSF subcommands LavaCore does not serve yet.
const NOT_YET: [&str; 8] = [
    "limstartup",
    "limshutdown",
    "limrestart",
    "resstartup",
    "resshutdown",
    "resrestart",
    "reslogon",
    "reslogoff",
];

/// One master candidate's lim as `lsadmin showstatus` asked it: its status or why not.
pub type CandidateStatus = (String, Result<wire::AdminStatusReply, String>);

/// `lsadmin showstatus` for `status`, with the master candidates' roles when there are
/// several (`candidates` in `LSF_MASTER_LIST` order; empty with one candidate).
pub fn format_showstatus(status: &wire::AdminStatusReply, candidates: &[CandidateStatus]) -> String {
    let mut out = format!(
        "LIM runtime information on host {}\n\
         \x20  Role:                   {}\n\
         \x20  Master name:            {}\n",
        status.host,
        if status.master { "master" } else { "slave" },
        status.master_name,
    );
    if status.master {
        out.push_str(&format!(
            "\n\
             \x20  Number of hosts:        {}\n\
             \x20     Ok:                  {}\n\
             \x20     Unavailable:         {}\n",
            status.hosts_ok + status.hosts_unavail,
            status.hosts_ok,
            status.hosts_unavail,
        ));
    } else {
        let heard = if status.master_heard { "yes (reporting)" } else { "no (not reporting)" };
        out.push_str(&format!("   Master heard:           {heard}\n"));
    }
    if !candidates.is_empty() {
        out.push_str("\nMaster candidates (LSF_MASTER_LIST order):\n");
        for (name, answer) in candidates {
            let role = match answer {
                Ok(lim) if lim.master => "master".to_owned(),
                Ok(lim) if lim.master_heard => format!("slave, follows {}", lim.master_name),
                Ok(_) => "slave, hears no master".to_owned(),
                Err(error) => format!("not answering ({error})"),
            };
            out.push_str(&format!("   {name:<23} {role}\n"));
        }
    }
    out.push_str("\nCounters:\n");
    for (name, value) in &status.counters {
        out.push_str(&format!("   {name:<40} {value}\n"));
    }
    out
}

/// `lsadmin sbdstatus` for `status`, with times in `tz`.
pub fn format_sbdstatus(status: &lava_batch_wire::SbdStatusReply, tz: &jiff::tz::TimeZone) -> String {
    let mut out = format!(
        "SBD runtime information on host {}\n\
         \x20  Master name:            {}\n\
         \x20  Link to mbatchd:        {} since {}\n\
         \x20  Latest sbatchd start:   {}\n\
         \x20  Active sbatchd PID:     {}\n\
         \nCounters:\n",
        status.host,
        status.master_name,
        if status.connected { "connected" } else { "down" },
        crate::format::long_date(status.link_since, tz),
        crate::format::long_date(status.started_at, tz),
        status.pid,
    );
    for counter in &status.counters {
        out.push_str(&format!("   {:<40} {}\n", counter.name, counter.value));
    }
    out
}

/// Asks the local sbatchd (`LAVA_CMD_SOCKET`) for its status.
fn sbdstatus() -> Result<lava_batch_wire::SbdStatusReply, String> {
    use lava_batch_wire::{Operation, SbdStatusQuery};
    let config = crate::client::load_config().map_err(|error| error.to_string())?;
    let path = config.lsf.cmd_socket.clone();
    let failure =
        |error: std::io::Error| format!("cannot reach the local sbatchd at {}: {error}", path.display());
    let mut stream = std::os::unix::net::UnixStream::connect(&path).map_err(failure)?;
    let timeout = Some(Duration::from_millis(QUERY_TIMEOUT_MS));
    stream.set_read_timeout(timeout).and_then(|()| stream.set_write_timeout(timeout)).map_err(failure)?;
    let body = lava_xdr::to_bytes(&SbdStatusQuery {}).map_err(|error| error.to_string())?;
    crate::client::write_frame(&mut stream, Operation::SbdStatusQuery, 1, &body).map_err(failure)?;
    let (header, body) =
        crate::client::read_frame(&mut stream, SBD_REPLY_BYTES_MAX).map_err(|error| match error {
            crate::client::FrameReadError::Io(error) => failure(error),
            crate::client::FrameReadError::Protocol(detail) => detail,
        })?;
    let limits = lava_xdr::Limits { input_bytes_max: body.len().max(1), ..lava_xdr::Limits::default() };
    match Operation::from_code(header.operation) {
        Some(Operation::SbdStatusReply) => {
            lava_xdr::from_bytes(&body, &limits).map_err(|error| format!("bad reply: {error}"))
        }
        Some(Operation::RequestFailed) => {
            let error: lava_batch_wire::ErrorReply =
                lava_xdr::from_bytes(&body, &limits).map_err(|error| format!("bad reply: {error}"))?;
            Err(format!("the local sbatchd refused: {}", error.message))
        }
        _ => Err(format!("the local sbatchd answered with operation {}", header.operation)),
    }
}

/// What `lsadmin ckconfig` (and `badmin ckconfig`) print for the result of loading the
/// configuration, and whether it is fine: with `-v` (`verbose`), the summary of what
/// loaded (`Ok`) precedes `No errors found.`; an error is printed as lava-conf words it
/// (`path:line: what`), then `There are fatal errors.`.
pub fn ckconfig_report(loaded: Result<String, &lava_conf::ConfError>, verbose: bool) -> (String, bool) {
    let mut out = String::from("\nChecking configuration files ...\n\n");
    match loaded {
        Ok(summary) => {
            if verbose {
                out.push_str(&format!("{summary}\n"));
            }
            out.push_str("No errors found.\n");
            (out, true)
        }
        Err(error) => {
            out.push_str(&format!("{error}\n\nThere are fatal errors.\n"));
            (out, false)
        }
    }
}

/// The `-v` line of `lsadmin ckconfig`.
fn base_summary(config: &BaseConfig) -> String {
    format!(
        "Cluster {}: {} hosts, master {}",
        config.cluster_name,
        config.cluster.hosts.len(),
        config.master_host().map_or("-", |host| host.name.as_str()),
    )
}

/// Runs `lsadmin` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("lsadmin", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let rest = args.get(1..).unwrap_or_default();
    match args.first().map(String::as_str) {
        Some("-h") | None => {
            term.err(USAGE);
            !args.is_empty()
        }
        Some("-V") => {
            term.err(term::VERSION_LINE);
            true
        }
        Some("ckconfig") if rest.is_empty() || rest == ["-v"] => {
            let envdir = lava_conf::envdir_from_env();
            let loaded = BaseConfig::load(&envdir);
            let (text, ok) = ckconfig_report(loaded.as_ref().map(base_summary), !rest.is_empty());
            if ok {
                term.out(&text);
            } else {
                term.err(&text);
            }
            ok
        }
        Some("showstatus") if rest.len() <= 1 => match showstatus(rest.first().map(String::as_str)) {
            Ok(status) => {
                term.out(&format_showstatus(&status, &candidates()));
                true
            }
            Err(error) => {
                term.err(&format!("lsadmin: {error}\n"));
                false
            }
        },
        Some("reconfig") if rest.is_empty() => reconfig(term),
        Some("showconf") if rest == ["lim"] => {
            let now_s = jiff::Timestamp::now().as_second();
            match crate::showconf::lim(&lava_conf::envdir_from_env(), now_s, &jiff::tz::TimeZone::system()) {
                Ok(text) => {
                    term.out(&text);
                    true
                }
                Err(error) => {
                    term.err(&format!("lsadmin: {error}\n"));
                    false
                }
            }
        }
        Some("limlock") => match lock_duration(rest) {
            Some(duration_s) => lock(term, wire::LockRequest { lock: true, duration_s }),
            None => {
                term.err("Usage: lsadmin limlock [-t time_seconds]\n");
                false
            }
        },
        Some("limunlock") if rest.is_empty() => lock(term, wire::LockRequest { lock: false, duration_s: 0 }),
        Some("sbdstatus") if rest.is_empty() => match sbdstatus() {
            Ok(status) => {
                term.out(&format_sbdstatus(&status, &jiff::tz::TimeZone::system()));
                true
            }
            Err(error) => {
                term.err(&format!("lsadmin: {error}\n"));
                false
            }
        },
        Some(name) if NOT_YET.contains(&name) => {
            term.err(&format!("lsadmin: {name} is not supported by LavaCore yet\n"));
            false
        }
        Some(name) => {
            term.err(&format!("lsadmin: Invalid command <{name}>\n{USAGE}"));
            false
        }
    }
}

/// `limlock`'s arguments: none (until unlocked: 0) or `-t SECONDS` (at least 1).
fn lock_duration(args: &[String]) -> Option<u32> {
    match args {
        [] => Some(0),
        [flag, seconds] if flag == "-t" => seconds.parse::<u32>().ok().filter(|s| *s > 0),
        _ => None,
    }
}

/// `lsadmin limlock` / `limunlock`: asks this host's lim from a privileged port and prints
/// LSF's words for the outcome.
fn lock(term: &mut Term, request: wire::LockRequest) -> bool {
    let call = if request.lock { "ls_lockhost" } else { "ls_unlockhost" };
    let body = match lava_xdr::to_bytes(&request) {
        Ok(body) => body,
        Err(error) => {
            term.err(&format!("{call}: {error}\n"));
            return false;
        }
    };
    let outcome = lim_addr(None).and_then(|addr| {
        let stream = privileged_connect(addr, "lock or unlock a host's LIM")?;
        exchange::<wire::LockReply>(stream, addr, wire::LIM_TCP_LOCK, &body)
    });
    match outcome {
        Ok(reply) if reply.done => {
            term.out(&match (request.lock, request.duration_s) {
                (false, _) => "Host is unlocked\n".to_owned(),
                (true, 0) => "Host is locked\n".to_owned(),
                (true, seconds) => format!("Host is locked for {seconds} seconds\n"),
            });
            true
        }
        Ok(reply) => {
            term.err(&format!("{call}: {}\n", reply.message));
            false
        }
        Err(error) => {
            term.err(&format!("{call}: {error}\n"));
            false
        }
    }
}

/// The TCP query address of `host`'s lim (default: this host, `LAVA_HOST` when set, else
/// this machine's host name).
fn lim_addr(host: Option<&str>) -> Result<SocketAddr, String> {
    let config = crate::client::load_config().map_err(|error| error.to_string())?;
    let logical = std::env::var("LAVA_HOST").ok().filter(|name| !name.is_empty());
    let name = match host.map(str::to_owned).or(logical) {
        Some(name) => name,
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map_err(|error| format!("cannot read this host's name: {error}"))?
            .trim()
            .to_owned(),
    };
    // lim names its host by the kernel's full host name; a cluster may list the short one.
    let short = name.split('.').next().unwrap_or_default();
    let find = |wanted: &str| config.cluster.hosts.iter().find(|h| h.name.eq_ignore_ascii_case(wanted));
    let Some(entry) = find(&name).or_else(|| if host.is_none() { find(short) } else { None }) else {
        return Err(format!("host `{name}` is not in {}", config.cluster.path.display()));
    };
    let port = entry.lim_tcp_port(&config.lsf);
    match entry.addr {
        Some(ip) => Ok(SocketAddr::new(ip, port)),
        None => (entry.name.as_str(), port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| format!("cannot resolve host `{}`", entry.name)),
    }
}

/// Asks `host`'s lim for its status and counters.
fn showstatus(host: Option<&str>) -> Result<wire::AdminStatusReply, String> {
    let addr = lim_addr(host)?;
    let timeout = Duration::from_millis(QUERY_TIMEOUT_MS);
    let stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|error| format!("LIM is down; try later ({addr}: {error})"))?;
    exchange(stream, addr, wire::LIM_TCP_ADMIN_STATUS, &[])
}

/// Each master candidate's lim status, in `LSF_MASTER_LIST` order, when there are two or
/// more candidates (one lim asked at a time, each within the query timeout); otherwise
/// nothing.
fn candidates() -> Vec<CandidateStatus> {
    let Ok(config) = crate::client::load_config() else { return Vec::new() };
    let names: Vec<String> = config.master_candidates().iter().map(|host| host.name.clone()).collect();
    if names.len() < 2 {
        return Vec::new();
    }
    names
        .into_iter()
        .map(|name| {
            let answer = showstatus(Some(&name));
            (name, answer)
        })
        .collect()
}

/// Sends one request (`body` after the header) on `stream` (connected to `addr`) and
/// decodes its reply.
fn exchange<R: serde::de::DeserializeOwned>(
    mut stream: TcpStream,
    addr: SocketAddr,
    operation: u32,
    body: &[u8],
) -> Result<R, String> {
    let unreachable = |error: std::io::Error| format!("LIM is down; try later ({addr}: {error})");
    let timeout = Duration::from_millis(QUERY_TIMEOUT_MS);
    stream.set_read_timeout(Some(timeout)).map_err(unreachable)?;
    let mut request = Vec::new();
    let length = u32::try_from(body.len()).map_err(|_| "request too large".to_owned())?;
    FrameHeader { sequence: 1, operation, version: wire::LIM_VERSION, length, status: 0 }.write(&mut request);
    request.extend_from_slice(body);
    stream.write_all(&request).map_err(unreachable)?;
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).map_err(unreachable)?;
    let header = FrameHeader::parse(&head).map_err(|error| error.to_string())?;
    header.check_version(wire::LIM_VERSION).map_err(|error| error.to_string())?;
    if header.length > REPLY_BODY_BYTES_MAX {
        return Err(format!("reply of {} bytes is too large", header.length));
    }
    if header.status != wire::TCP_STATUS_OK {
        return Err(format!("the lim at {addr} refused the request (status {})", header.status));
    }
    let mut body = vec![0u8; header.length as usize];
    stream.read_exact(&mut body).map_err(unreachable)?;
    let limits = lava_xdr::Limits { input_bytes_max: body.len().max(1), ..lava_xdr::Limits::default() };
    lava_xdr::from_bytes(&body, &limits).map_err(|error| format!("bad reply: {error}"))
}

/// `lsadmin reconfig`: every lim of the cluster checks its configuration and, if it
/// loads, restarts in place to read it (LSF restarts the lims). The request leaves from
/// a privileged port, which only root can bind: the lims accept it from nobody else.
/// One line per host, LSF's `Restart LIM on <host> ...... done`; false if any failed.
fn reconfig(term: &mut Term) -> bool {
    let config = match crate::client::load_config() {
        Ok(config) => config,
        Err(error) => {
            term.err(&format!("lsadmin: {error}\n"));
            return false;
        }
    };
    term.out("Checking configuration files ...\nNo errors found.\n\n");
    let mut ok = true;
    for host in &config.cluster.hosts {
        let port = host.lim_tcp_port(&config.lsf);
        let addr = host
            .addr
            .map(|ip| SocketAddr::new(ip, port))
            .or_else(|| (host.name.as_str(), port).to_socket_addrs().ok().and_then(|mut addrs| addrs.next()));
        let outcome = match addr {
            None => Err(format!("cannot resolve host `{}`", host.name)),
            Some(addr) => privileged_connect(addr, "reconfigure the lims").and_then(|stream| {
                let reply: wire::ReconfigReply = exchange(stream, addr, wire::LIM_TCP_RECONFIG, &[])?;
                if reply.applied { Ok(()) } else { Err(reply.message) }
            }),
        };
        match outcome {
            Ok(()) => term.out(&format!("Restart LIM on <{}> ...... done\n", host.name)),
            Err(problem) => {
                ok = false;
                term.out(&format!("Restart LIM on <{}> ...... failed: {problem}\n", host.name));
            }
        }
    }
    ok
}

/// A TCP connection to `addr` from a privileged local port (512..1023, the first free);
/// refused unless root, named as `only root may {purpose}`.
fn privileged_connect(addr: SocketAddr, purpose: &str) -> Result<TcpStream, String> {
    use rustix::net::{AddressFamily, SocketType, sockopt};
    let family = if addr.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
    let local_ip: std::net::IpAddr = if addr.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    let timeout = Duration::from_millis(QUERY_TIMEOUT_MS);
    for port in (512..1024u16).rev() {
        let socket =
            rustix::net::socket(family, SocketType::STREAM, None).map_err(|e| format!("socket: {e}"))?;
        // Linux bounds a blocking connect by the send timeout.
        sockopt::set_socket_timeout(&socket, sockopt::Timeout::Send, Some(timeout))
            .map_err(|e| format!("socket: {e}"))?;
        match rustix::net::bind(&socket, &SocketAddr::new(local_ip, port)) {
            Ok(()) => {}
            Err(rustix::io::Errno::ADDRINUSE) => continue,
            Err(rustix::io::Errno::ACCESS) => {
                return Err(format!("only root may {purpose} (a privileged port is needed)"));
            }
            Err(error) => return Err(format!("bind to port {port}: {error}")),
        }
        return match rustix::net::connect(&socket, &addr) {
            Ok(()) => Ok(TcpStream::from(socket)),
            Err(error) => Err(format!("LIM is down; try later ({addr}: {error})")),
        };
    }
    Err("no privileged port is free".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the master shows the hosts by status, a slave whether it hears the master; both end
    // with `Counters:` and one `name value` line per counter.
    #[test]
    fn showstatus_layout() {
        let mut status = wire::AdminStatusReply {
            host: "h0".into(),
            master: true,
            master_name: "h0".into(),
            master_heard: true,
            hosts_ok: 2,
            hosts_unavail: 1,
            counters: vec![("datagrams.dropped.short".into(), 3)],
        };
        assert_eq!(
            format_showstatus(&status, &[]),
            "LIM runtime information on host h0\n   Role:                   master\n   \
             Master name:            h0\n\n   Number of hosts:        3\n      Ok:                  2\n      \
             Unavailable:         1\n\nCounters:\n   datagrams.dropped.short                  3\n"
        );
        (status.host, status.master, status.master_heard) = ("h1".into(), false, false);
        assert_eq!(
            format_showstatus(&status, &[]),
            "LIM runtime information on host h1\n   Role:                   slave\n   \
             Master name:            h0\n   Master heard:           no (not reporting)\n\nCounters:\n   \
             datagrams.dropped.short                  3\n"
        );
    }

    // Goal: with several master candidates each one's lim role is listed in LSF_MASTER_LIST
    // order, before the counters (which a reader takes as the last section).
    #[test]
    fn showstatus_lists_the_candidates_roles() {
        let lim = |host: &str, master: bool, heard: bool| wire::AdminStatusReply {
            host: host.into(),
            master,
            master_name: "h1".into(),
            master_heard: heard,
            hosts_ok: 0,
            hosts_unavail: 0,
            counters: Vec::new(),
        };
        let candidates = [
            ("h1".to_owned(), Ok(lim("h1", true, true))),
            ("h2".to_owned(), Ok(lim("h2", false, true))),
            ("h3".to_owned(), Ok(lim("h3", false, false))),
            ("h4".to_owned(), Err("LIM is down; try later".to_owned())),
        ];
        let text = format_showstatus(&lim("h2", false, true), &candidates);
        assert!(
            text.ends_with(
                "\nMaster candidates (LSF_MASTER_LIST order):\n   h1                      master\n   \
                 h2                      slave, follows h1\n   h3                      slave, hears no master\n   \
                 h4                      not answering (LIM is down; try later)\n\nCounters:\n"
            ),
            "{text}"
        );
    }

    // Goal: `limlock` takes nothing (until unlocked) or `-t` with a positive number of seconds.
    #[test]
    fn limlock_arguments() {
        let args = |list: &[&str]| list.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        assert_eq!(lock_duration(&args(&[])), Some(0));
        assert_eq!(lock_duration(&args(&["-t", "30"])), Some(30));
        for bad in [&["-t"][..], &["-t", "0"], &["-t", "x"], &["30"], &["-t", "1", "2"]] {
            assert_eq!(lock_duration(&args(bad)), None, "{bad:?}");
        }
    }

    // Goal: host, master, link state with its time, start and pid, then one line per counter.
    #[test]
    fn sbdstatus_layout() {
        let status = lava_batch_wire::SbdStatusReply {
            host: "h1".into(),
            master_name: "h0".into(),
            pid: 42,
            started_at: 0,
            connected: true,
            link_since: 60,
            counters: vec![lava_batch_wire::StatusCounter { name: "jobs.running".into(), value: 2 }],
        };
        assert_eq!(
            format_sbdstatus(&status, &jiff::tz::TimeZone::UTC),
            "SBD runtime information on host h1\n   Master name:            h0\n   \
             Link to mbatchd:        connected since Thu Jan  1 00:01:00 1970\n   \
             Latest sbatchd start:   Thu Jan  1 00:00:00 1970\n   Active sbatchd PID:     42\n\n\
             Counters:\n   jobs.running                             2\n"
        );
    }
}
