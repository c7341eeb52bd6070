//! `lsid`, `lsload`, `lshosts`: blocking queries of the master lim's TCP port
//! (lava-lim-wire's `LIM_TCP_*` frames) and LavaLite 0.1.2's output formats
//! (../shared/research/lavalite.md section 2.5). The master is the first host of
//! lsf.cluster; its address is `LAVA_ADDR` (else its name) and its port the per-host
//! `LAVA_LIM_PORT`, else `LAVA_LIM_TCP_PORT`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

use lava_lim_wire as wire;
use lava_xdr::frame::{FrameHeader, HEADER_BYTES};
use serde::de::DeserializeOwned;

use crate::term::{Term, arguments};

/// Longest a query may take.
pub const QUERY_TIMEOUT_MS: u64 = 10_000;
/// Largest reply accepted.
pub const REPLY_BODY_BYTES_MAX: u32 = 16 << 20;

fn master_addr() -> Result<SocketAddr, String> {
    let config = crate::client::load_config().map_err(|error| error.to_string())?;
    let master = config.master_host().ok_or("lsf.cluster lists no server host")?;
    let port = master.lim_tcp_port(&config.lsf);
    match master.addr {
        Some(ip) => Ok(SocketAddr::new(ip, port)),
        None => (master.name.as_str(), port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| format!("cannot resolve the master host `{}`", master.name)),
    }
}

/// Sends one query and decodes its reply.
pub fn query<R: DeserializeOwned>(operation: u32) -> Result<R, String> {
    let addr = master_addr()?;
    let unreachable = |error: std::io::Error| format!("LIM is down; try later ({addr}: {error})");
    let timeout = Duration::from_millis(QUERY_TIMEOUT_MS);
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(unreachable)?;
    stream.set_read_timeout(Some(timeout)).map_err(unreachable)?;
    let mut request = Vec::new();
    FrameHeader { sequence: 1, operation, version: wire::LIM_VERSION, length: 0, status: 0 }
        .write(&mut request);
    stream.write_all(&request).map_err(unreachable)?;
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).map_err(unreachable)?;
    let header = FrameHeader::parse(&head).map_err(|error| error.to_string())?;
    header.check_version(wire::LIM_VERSION).map_err(|error| error.to_string())?;
    if header.length > REPLY_BODY_BYTES_MAX {
        return Err(format!("reply of {} bytes is too large", header.length));
    }
    if header.status != wire::TCP_STATUS_OK {
        return Err(format!("{addr} is not the master LIM (status {})", header.status));
    }
    let mut body = vec![0u8; header.length as usize];
    stream.read_exact(&mut body).map_err(unreachable)?;
    let limits = lava_xdr::Limits { input_bytes_max: body.len().max(1), ..lava_xdr::Limits::default() };
    lava_xdr::from_bytes(&body, &limits).map_err(|error| format!("bad reply: {error}"))
}

fn finish(term: &mut Term, result: Result<String, String>, name: &str) -> ExitCode {
    match result {
        Ok(text) => {
            term.out(&text);
            term.exit(true)
        }
        Err(error) => {
            term.err(&format!("{name}: {error}\n"));
            term.exit(false)
        }
    }
}

/// `lsid`.
pub fn lsid_main() -> ExitCode {
    let mut term = Term::new();
    let result = query::<wire::ClusterInfoReply>(wire::LIM_TCP_CLUSTER_INFO).map(|info| {
        format!(
            "LavaCore {}\nMy cluster name is {}\nMy master name is {}\n",
            env!("CARGO_PKG_VERSION"),
            info.cluster,
            info.master
        )
    });
    finish(&mut term, result, "lsid")
}

/// Formats `lsload` output: `%-16s %-10s` (24 wide with `-w`), then 11 columns of width 6
/// (`io` only with `-l`, as classic Lava). Loads to 1 decimal; ut and it as percent/minutes
/// integers; tmp, swp, mem in whole GiB with `G` (M below 1 GiB).
pub fn format_lsload(hosts: &[wire::HostLoad], long: bool, wide: bool, only: &[String]) -> String {
    let name_width = if wide { 24 } else { 16 };
    let columns: Vec<(usize, &str)> = [
        (0, "r15s"),
        (1, "r1m"),
        (2, "r15m"),
        (3, "ut"),
        (4, "pg"),
        (5, "io"),
        (6, "ls"),
        (7, "it"),
        (8, "tmp"),
        (9, "swp"),
        (10, "mem"),
    ]
    .into_iter()
    .filter(|(idx, _)| long || *idx != 5)
    .collect();
    let mut out = format!("{:<name_width$} {:<10}", "HOST_NAME", "status");
    for (_, name) in &columns {
        out.push_str(&format!(" {name:>6}"));
    }
    out.push('\n');
    for host in
        hosts.iter().filter(|h| only.is_empty() || only.iter().any(|o| o.eq_ignore_ascii_case(&h.name)))
    {
        let ok = host.status == wire::HOST_STATUS_OK;
        out.push_str(&format!("{:<name_width$} {:<10}", host.name, if ok { "ok" } else { "unavail" }));
        for (idx, _) in &columns {
            let value = host.li[*idx];
            let cell = if !ok || *idx as u32 >= host.nidx {
                "-".to_owned()
            } else {
                match idx {
                    3 => format!("{:.0}%", value * 100.0),
                    6 | 7 => format!("{value:.0}"),
                    8..=10 if value >= 1024.0 => format!("{:.0}G", value / 1024.0),
                    8..=10 => format!("{value:.0}M"),
                    _ => format!("{value:.1}"),
                }
            };
            out.push_str(&format!(" {cell:>6}"));
        }
        out.push('\n');
    }
    out
}

/// `lsload [-l] [-w] [host...]`.
pub fn lsload_main() -> ExitCode {
    let mut term = Term::new();
    let result = arguments().and_then(|args| {
        let (mut long, mut wide, mut only) = (false, false, Vec::new());
        for arg in args {
            match arg.as_str() {
                "-l" => long = true,
                "-w" => wide = true,
                "-lw" | "-wl" => (long, wide) = (true, true),
                flag if flag.starts_with('-') => {
                    return Err(format!("unknown option {flag}\nUsage: lsload [-l] [-w] [host ...]"));
                }
                host => only.push(host.to_owned()),
            }
        }
        let reply = query::<wire::HostLoadReply>(wire::LIM_TCP_HOST_LOAD)?;
        Ok(format_lsload(&reply.hosts, long, wide, &only))
    });
    finish(&mut term, result, "lsload")
}

/// `lshosts`: `HOST_NAME type model cpuf ncpus maxmem maxswp server` (LavaLite 0.1.2);
/// ncpus, maxmem and maxswp are not in the spec's load report and print as `-`.
pub fn lshosts_main() -> ExitCode {
    let mut term = Term::new();
    let result = query::<wire::HostLoadReply>(wire::LIM_TCP_HOST_LOAD).map(|reply| {
        let mut out = format!(
            "{:<16} {:>8} {:>8} {:>6} {:>6} {:>7} {:>7} {:>6}\n",
            "HOST_NAME", "type", "model", "cpuf", "ncpus", "maxmem", "maxswp", "server"
        );
        for host in &reply.hosts {
            let or_dash = |s: &str| if s.is_empty() || s == "!" { "-".to_owned() } else { s.to_owned() };
            out.push_str(&format!(
                "{:<16} {:>8} {:>8} {:>6} {:>6} {:>7} {:>7} {:>6}\n",
                host.name,
                or_dash(&host.host_type),
                or_dash(&host.model),
                "1.0",
                "-",
                "-",
                "-",
                if host.server { "Yes" } else { "No" }
            ));
        }
        out
    });
    finish(&mut term, result, "lshosts")
}
