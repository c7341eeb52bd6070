//! `lsid`, `lsload`, `lshosts`: blocking queries of the master lim's TCP port
//! (lava-lim-wire's `LIM_TCP_*` frames) and LavaLite 0.1.2's output formats
//! (docs/lim.md, "lsload's output"). The master is found among the candidates
//! (`LSF_MASTER_LIST`, else the first server host of lsf.cluster), asked in order; a
//! candidate's address is `LAVA_ADDR` (else its name) and its port the per-host
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

/// A candidate's name and its lim's query address, or why it has none.
type Candidate = (String, Result<SocketAddr, String>);

/// The master candidates' lim query addresses, most preferred first (`LSF_MASTER_LIST`, else
/// the first server host).
fn candidate_addrs() -> Result<Vec<Candidate>, String> {
    let config = crate::client::load_config().map_err(|error| error.to_string())?;
    let candidates = config.master_candidates();
    if candidates.is_empty() {
        return Err("lsf.cluster lists no server host".to_owned());
    }
    Ok(candidates
        .into_iter()
        .map(|host| {
            let port = host.lim_tcp_port(&config.lsf);
            let addr = match host.addr {
                Some(ip) => Ok(SocketAddr::new(ip, port)),
                None => (host.name.as_str(), port)
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut addrs| addrs.next())
                    .ok_or_else(|| format!("cannot resolve the master host `{}`", host.name)),
            };
            (host.name.clone(), addr)
        })
        .collect())
}

/// Why one candidate did not answer: it could not be reached, or it is not the master.
enum Miss {
    Down(String),
    NotMaster(String),
}

/// Sends one query to the master lim and decodes its reply: the candidates are asked in
/// `LSF_MASTER_LIST` order, and the first that answers as master answers (a candidate that
/// is down or not master passes the question on).
pub fn query<R: DeserializeOwned>(operation: u32) -> Result<R, String> {
    let candidates = candidate_addrs()?;
    let single = candidates.len() == 1;
    let mut misses = Vec::new();
    for (name, addr) in candidates {
        let outcome = match addr {
            Err(error) => Err(Miss::Down(error)),
            Ok(addr) => query_at(addr, operation),
        };
        match outcome {
            Ok(reply) => return Ok(reply),
            Err(Miss::Down(why)) if single => return Err(format!("LIM is down; try later ({why})")),
            Err(Miss::NotMaster(why)) if single => return Err(why),
            Err(Miss::Down(why) | Miss::NotMaster(why)) => misses.push(format!("{name}: {why}")),
        }
    }
    Err(format!("LIM is down; try later (no master candidate answers as master: {})", misses.join("; ")))
}

fn query_at<R: DeserializeOwned>(addr: SocketAddr, operation: u32) -> Result<R, Miss> {
    let unreachable = |error: std::io::Error| Miss::Down(format!("{addr}: {error}"));
    let timeout = Duration::from_millis(QUERY_TIMEOUT_MS);
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(unreachable)?;
    stream.set_read_timeout(Some(timeout)).map_err(unreachable)?;
    let mut request = Vec::new();
    FrameHeader { sequence: 1, operation, version: wire::LIM_VERSION, length: 0, status: 0 }
        .write(&mut request);
    stream.write_all(&request).map_err(unreachable)?;
    let mut head = [0u8; HEADER_BYTES];
    stream.read_exact(&mut head).map_err(unreachable)?;
    let bad = |error: String| Miss::NotMaster(error);
    let header = FrameHeader::parse(&head).map_err(|error| bad(error.to_string()))?;
    header.check_version(wire::LIM_VERSION).map_err(|error| bad(error.to_string()))?;
    if header.length > REPLY_BODY_BYTES_MAX {
        return Err(bad(format!("reply of {} bytes is too large", header.length)));
    }
    if header.status != wire::TCP_STATUS_OK {
        return Err(bad(format!("{addr} is not the master LIM (status {})", header.status)));
    }
    let mut body = vec![0u8; header.length as usize];
    stream.read_exact(&mut body).map_err(unreachable)?;
    let limits = lava_xdr::Limits { input_bytes_max: body.len().max(1), ..lava_xdr::Limits::default() };
    lava_xdr::from_bytes(&body, &limits).map_err(|error| bad(format!("bad reply: {error}")))
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

/// Host name column of `lsload` (LavaLite 0.1.2's `%-16s`); longer names are cut, as
/// LSF cuts them in its default format.
pub const LSLOAD_NAME_WIDTH: usize = 16;
/// Host name column of `lsload -w` (LSF's wide format: `%-23s` plus the separator);
/// longer names are printed whole and push the row to the right.
pub const LSLOAD_WIDE_NAME_WIDTH: usize = 24;
/// Status column of `lsload` (`%-10s`).
pub const LSLOAD_STATUS_WIDTH: usize = 10;
/// Status column of `lsload -w`, room for LSF's longest states (`lockU`, `-ok`, `unavail`)
/// with a `*`-style marker and LSF 10's `closed_*` spellings.
pub const LSLOAD_WIDE_STATUS_WIDTH: usize = 12;
/// Width of every load column (`%6s`).
pub const LSLOAD_VALUE_WIDTH: usize = 6;

/// One load value the way LSF's `lstools/load.c` prints it (index in spec section 5's order):
/// r15s, r1m, r15m and pg to one decimal; ut as an integer percent; io, ls and it (idle
/// minutes) as integers; tmp, swp and mem (MB) as whole megabytes with `M`, or whole
/// gigabytes with `G` when the megabyte form would be wider than LSF's 5 characters.
pub fn format_load_value(idx: usize, value: f32) -> String {
    let value = f64::from(value);
    match idx {
        3 => format!("{:.0}%", value * 100.0),
        5..=7 => format!("{value:.0}"),
        8..=10 => {
            let megabytes = format!("{value:.0}M");
            if megabytes.len() > 5 && value > 1024.0 { format!("{:.0}G", value / 1024.0) } else { megabytes }
        }
        _ => format!("{value:.1}"),
    }
}

/// The `status` column of `lsload` for `host`, from lim's status word (LIM §6 `status0`) as
/// Lava's `lstools/load.c` words it, the first that applies: `unavail` (the master has no
/// report from it within 3 intervals, or `LIM_UNAVAIL`), `lockU` (`lsadmin limlock`),
/// `lockW` (run window), `lockM` (locked by the master), `busy` (a load index beyond its
/// lsf.cluster threshold), `-ok` (`LIM_RESDOWN`), `ok`.
pub fn lsload_status(host: &wire::HostLoad) -> &'static str {
    let word = host.status0;
    if host.status != wire::HOST_STATUS_OK || word & wire::LIM_UNAVAIL != 0 {
        "unavail"
    } else if word & wire::LIM_LOCKEDU != 0 {
        "lockU"
    } else if word & wire::LIM_LOCKEDW != 0 {
        "lockW"
    } else if word & wire::LIM_LOCKEDM != 0 {
        "lockM"
    } else if word & wire::LIM_BUSY != 0 {
        "busy"
    } else if word & wire::LIM_RESDOWN != 0 {
        "-ok"
    } else {
        "ok"
    }
}

/// Whether lim marks load index `idx` of `host` beyond its threshold (`LIM_BUSY` with the
/// index's bit): `lsload` prints its value after a `*`.
pub fn index_busy(host: &wire::HostLoad, idx: usize) -> bool {
    host.status0 & wire::LIM_BUSY != 0 && idx < wire::LIM_NIDX && host.status0 & (1 << idx) != 0
}

/// Formats `lsload` output (LavaLite 0.1.2's layout, docs/lim.md, "lsload's output"):
/// `HOST_NAME` left-aligned in 16 columns (cut to 16), `status` in 10, then one
/// right-aligned column of width 6 per index: r15s r1m r15m ut pg ls it tmp swp mem, with
/// `io` after `pg` only with `-l` (classic Lava). `-w` widens the host column to 24 (names
/// never cut) and the status column to 12. The status is [`lsload_status`]'s; a value beyond
/// its threshold is marked `*` ([`index_busy`]), as LSF marks it. An unavailable host shows
/// `unavail` and `-` in every column, as does an index the host did not report. `only`
/// restricts the rows to
/// these hosts (matched without case), in the cluster's order.
pub fn format_lsload(hosts: &[wire::HostLoad], long: bool, wide: bool, only: &[String]) -> String {
    let (name_width, status_width) = if wide {
        (LSLOAD_WIDE_NAME_WIDTH, LSLOAD_WIDE_STATUS_WIDTH)
    } else {
        (LSLOAD_NAME_WIDTH, LSLOAD_STATUS_WIDTH)
    };
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
    let width = LSLOAD_VALUE_WIDTH;
    let mut out = format!("{:<name_width$} {:<status_width$}", "HOST_NAME", "status");
    for (_, name) in &columns {
        out.push_str(&format!(" {name:>width$}"));
    }
    out.push('\n');
    for host in
        hosts.iter().filter(|h| only.is_empty() || only.iter().any(|o| o.eq_ignore_ascii_case(&h.name)))
    {
        let status = lsload_status(host);
        let ok = status != "unavail";
        let name: String =
            if wide { host.name.clone() } else { host.name.chars().take(LSLOAD_NAME_WIDTH).collect() };
        out.push_str(&format!("{name:<name_width$} {status:<status_width$}"));
        for (idx, _) in &columns {
            let cell = if !ok || *idx as u32 >= host.nidx {
                "-".to_owned()
            } else if index_busy(host, *idx) {
                format!("*{}", format_load_value(*idx, host.li[*idx]))
            } else {
                format_load_value(*idx, host.li[*idx])
            };
            out.push_str(&format!(" {cell:>width$}"));
        }
        out.push('\n');
    }
    out
}

/// What `lsload` prints and whether it succeeded: the table, after one classic Lava error
/// line (`lsload: unknown host name NAME`) on standard error per named host that is not in
/// the cluster. As in Lava, it fails only when no named host is known.
pub fn lsload_output(
    hosts: &[wire::HostLoad],
    long: bool,
    wide: bool,
    only: &[String],
) -> (String, String, bool) {
    let (known, unknown): (Vec<String>, Vec<String>) =
        only.iter().cloned().partition(|name| hosts.iter().any(|h| h.name.eq_ignore_ascii_case(name)));
    let errors: String = unknown.iter().map(|name| format!("lsload: unknown host name {name}\n")).collect();
    if known.is_empty() && !unknown.is_empty() {
        return (String::new(), errors, false);
    }
    (format_lsload(hosts, long, wide, &known), errors, true)
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
        Ok(lsload_output(&reply.hosts, long, wide, &only))
    });
    match result {
        Ok((out, errors, ok)) => {
            term.err(&errors);
            term.out(&out);
            term.exit(ok)
        }
        Err(error) => finish(&mut term, Err(error), "lsload"),
    }
}

/// Formats `lshosts` output: LavaLite 0.1.2's columns `HOST_NAME type model cpuf ncpus
/// maxmem maxswp server`. ncpus, maxmem and maxswp are the host's own (its lim tells the
/// master over TCP, `LIM_TCP_HOST_INFO`); memory prints like lsload's (`M`, `G` past 5
/// characters). A host whose facts the master does not know (its lim never answered) shows
/// `-` in those three columns; an unknown type or model shows `-` too.
pub fn format_lshosts(hosts: &[wire::HostStatic]) -> String {
    let mut out = format!(
        "{:<16} {:>8} {:>8} {:>6} {:>6} {:>7} {:>7} {:>6}\n",
        "HOST_NAME", "type", "model", "cpuf", "ncpus", "maxmem", "maxswp", "server"
    );
    for host in hosts {
        let or_dash = |s: &str| if s.is_empty() || s == "!" { "-".to_owned() } else { s.to_owned() };
        let known = host.ncpus > 0;
        let fact = |text: String| if known { text } else { "-".to_owned() };
        out.push_str(&format!(
            "{:<16} {:>8} {:>8} {:>6} {:>6} {:>7} {:>7} {:>6}\n",
            host.name,
            or_dash(&host.host_type),
            or_dash(&host.model),
            "1.0",
            fact(host.ncpus.to_string()),
            fact(format_load_value(10, host.maxmem_mb as f32)),
            fact(format_load_value(9, host.maxswp_mb as f32)),
            if host.server { "Yes" } else { "No" }
        ));
    }
    out
}

/// `lshosts`.
pub fn lshosts_main() -> ExitCode {
    let mut term = Term::new();
    let result =
        query::<wire::HostsInfoReply>(wire::LIM_TCP_HOSTS_INFO).map(|reply| format_lshosts(&reply.hosts));
    finish(&mut term, result, "lshosts")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, status: u32, nidx: u32, li: [f32; wire::LIM_NIDX]) -> wire::HostLoad {
        wire::HostLoad {
            name: name.to_owned(),
            host_type: "!".to_owned(),
            model: "!".to_owned(),
            server: true,
            status,
            status0: 0,
            nidx,
            li,
            age_ms: 0,
        }
    }

    fn cluster() -> Vec<wire::HostLoad> {
        vec![
            host(
                "vm",
                wire::HOST_STATUS_OK,
                11,
                [2.0, 3.04, 4.25, 0.123, 0.0, 812.4, 2.0, 17.0, 80_896.0, 0.0, 23_740.0],
            ),
            host(
                "node-with-a-long-name",
                wire::HOST_STATUS_OK,
                11,
                [0.04, 0.0, 0.0, 1.0, 12.35, 3.0, 0.0, 0.0, 9_999.0, 1_500.0, 512.4],
            ),
            host("down", wire::HOST_STATUS_UNAVAIL, 0, [0.0; wire::LIM_NIDX]),
        ]
    }

    // Goal: each index is printed with LSF's precision and unit, M switching to G only when
    // the megabyte form is wider than 5 characters.
    #[test]
    fn load_values_as_lsf_prints_them() {
        let cases = [
            (0, 2.0, "2.0"),
            (1, 3.04, "3.0"),
            (2, 0.05, "0.1"),
            (3, 0.123, "12%"),
            (3, 1.0, "100%"),
            (4, 12.35, "12.4"),
            (5, 812.4, "812"),
            (6, 2.0, "2"),
            (7, 17.4, "17"),
            (8, 0.0, "0M"),
            (8, 512.4, "512M"),
            (9, 1_500.0, "1500M"),
            (10, 9_999.0, "9999M"),
            (10, 10_000.0, "10G"),
            (8, 80_896.0, "79G"),
        ];
        for (idx, value, expected) in cases {
            assert_eq!(format_load_value(idx, value), expected, "index {idx} value {value}");
        }
    }

    // Goal: the default layout is 0.1.2's `%-16s %-10s` + width-6 columns without io, names cut
    // to 16, and an unavailable host shows `-` everywhere.
    #[test]
    fn default_format() {
        let expected = "\
HOST_NAME        status       r15s    r1m   r15m     ut     pg     ls     it    tmp    swp    mem
vm               ok            2.0    3.0    4.2    12%    0.0      2     17    79G     0M    23G
node-with-a-long ok            0.0    0.0    0.0   100%   12.4      0      0  9999M  1500M   512M
down             unavail         -      -      -      -      -      -      -      -      -      -
";
        assert_eq!(format_lsload(&cluster(), false, false, &[]), expected);
    }

    // Goal: -l adds io after pg; -w widens the host and status columns and never cuts a name.
    #[test]
    fn long_and_wide_formats() {
        let expected = "\
HOST_NAME        status       r15s    r1m   r15m     ut     pg     io     ls     it    tmp    swp    mem
vm               ok            2.0    3.0    4.2    12%    0.0    812      2     17    79G     0M    23G
";
        assert_eq!(format_lsload(&cluster(), true, false, &["VM".to_owned()]), expected);
        let expected = "\
HOST_NAME                status         r15s    r1m   r15m     ut     pg     ls     it    tmp    swp    mem
node-with-a-long-name    ok              0.0    0.0    0.0   100%   12.4      0      0  9999M  1500M   512M
down                     unavail           -      -      -      -      -      -      -      -      -      -
";
        let only = ["node-with-a-long-name".to_owned(), "down".to_owned()];
        assert_eq!(format_lsload(&cluster(), false, true, &only), expected);
    }

    // Goal: lshosts prints each host's CPUs and memory as lsload prints memory, `-` where the
    // master does not know them.
    #[test]
    fn lshosts_format() {
        let fact = |name: &str, ncpus, maxmem_mb, maxswp_mb| wire::HostStatic {
            name: name.to_owned(),
            host_type: "!".to_owned(),
            model: "!".to_owned(),
            server: true,
            ncpus,
            maxmem_mb,
            maxswp_mb,
        };
        let hosts = [fact("vm", 2, 23_990, 0), fact("small", 1, 512, 2_047), fact("down", 0, 0, 0)];
        let expected = "\
HOST_NAME            type    model   cpuf  ncpus  maxmem  maxswp server
vm                      -        -    1.0      2     23G      0M    Yes
small                   -        -    1.0      1    512M   2047M    Yes
down                    -        -    1.0      -       -       -    Yes
";
        assert_eq!(format_lshosts(&hosts), expected);
    }

    // Goal: the status column follows lim's word (unavail before a lock, a lock before busy),
    // and only the indices lim marks busy get a `*`.
    #[test]
    fn status_words_and_busy_marks() {
        let li = [2.0, 3.04, 4.25, 0.123, 0.0, 812.4, 2.0, 17.0, 80_896.0, 0.0, 23_740.0];
        let with =
            |name: &str, status: u32, status0: u32| wire::HostLoad { status0, ..host(name, status, 11, li) };
        let ok = wire::HOST_STATUS_OK;
        let hosts = [
            with("locked", ok, wire::LIM_LOCKEDU),
            with("lockedbusy", ok, wire::LIM_LOCKEDU | wire::LIM_BUSY | 1 << 1),
            with("busy", ok, wire::LIM_BUSY | 1 << 1 | 1 << 10),
            with("window", ok, wire::LIM_LOCKEDW),
            with("gone", wire::HOST_STATUS_UNAVAIL, wire::LIM_UNAVAIL),
            with("saysgone", ok, wire::LIM_UNAVAIL | wire::LIM_LOCKEDU),
            with("nores", ok, wire::LIM_RESDOWN),
        ];
        let expected = "\
HOST_NAME        status       r15s    r1m   r15m     ut     pg     ls     it    tmp    swp    mem
locked           lockU         2.0    3.0    4.2    12%    0.0      2     17    79G     0M    23G
lockedbusy       lockU         2.0   *3.0    4.2    12%    0.0      2     17    79G     0M    23G
busy             busy          2.0   *3.0    4.2    12%    0.0      2     17    79G     0M   *23G
window           lockW         2.0    3.0    4.2    12%    0.0      2     17    79G     0M    23G
gone             unavail         -      -      -      -      -      -      -      -      -      -
saysgone         unavail         -      -      -      -      -      -      -      -      -      -
nores            -ok           2.0    3.0    4.2    12%    0.0      2     17    79G     0M    23G
";
        assert_eq!(format_lsload(&hosts, false, false, &[]), expected);
        assert!(!index_busy(&with("x", ok, 1 << 1), 1), "an index bit without LIM_BUSY is no mark");
    }

    // Goal: unknown hosts get Lava's error line; the command fails only when no named host is known.
    #[test]
    fn unknown_hosts() {
        let (out, err, ok) = lsload_output(&cluster(), false, false, &["nosuch".to_owned()]);
        assert_eq!((out.as_str(), err.as_str(), ok), ("", "lsload: unknown host name nosuch\n", false));
        let (out, err, ok) = lsload_output(&cluster(), false, false, &["nosuch".to_owned(), "vm".to_owned()]);
        assert!(ok && out.lines().count() == 2 && out.contains("\nvm "), "{out}");
        assert_eq!(err, "lsload: unknown host name nosuch\n");
        let (out, err, ok) = lsload_output(&cluster(), false, false, &[]);
        assert!(ok && err.is_empty() && out.lines().count() == 4);
    }
}
