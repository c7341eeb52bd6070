//! `bhosts [-w | -l] [host ...]`: the execution hosts as mbatchd sees them
//! (HOST_QUERY), in the classic layouts (docs/commands.md,
//! "bhosts"; LSF's `bhosts` reference):
//!
//! ```text
//! HOST_NAME          STATUS       JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV
//! h0                 ok              -      2      0      0      0      0      0
//! ```
//!
//! STATUS is `ok`, `unavail` (the master lim marks the host unavailable),
//! `unreach` (its sbatchd is not connected) or `closed`; `-w` and `-l` name why
//! a host is closed: `closed_Full` (every slot in use), `closed_Adm` (an
//! administrator closed it), `closed_Excl` (an exclusive job runs there),
//! `closed_Lock` (its lim is locked, `lsadmin limlock`), `closed_Busy` (lim
//! reports a load index beyond its lsf.cluster threshold); the
//! STATUS column of `-w` is 14 wide. `-` means unlimited or not yet known (MAX
//! of a host whose slots are its CPUs before its sbatchd registered).
//!
//! `-l` prints a block per host, LSF's: `HOST  name`, then the STATUS line
//! with CPUF (LavaCore has no CPU factors: every host is 1.00, as `lshosts`
//! shows) and DISPATCH_WINDOW (none: `-`), then, when the master lim answers
//! and the host reports its load, LSF's `CURRENT LOAD USED FOR SCHEDULING`
//! table: the `Total` row is lim's last report (formatted as `lsload` does),
//! the `Reserved` row zeros (no resource reservation yet). The load threshold
//! table of LSF is not printed (mbatchd does not report thresholds).
//!
//! A name that is not an execution host is reported on standard error and
//! makes the exit status 255. Counts are slots of started jobs, as `bjobs`
//! shows them on the host.

use std::process::ExitCode;

use lava_batch_wire::{self as wire, Operation};
use lava_lim_wire as lim_wire;

use crate::client;
use crate::lim::format_load_value;
use crate::term::{self, Term};

const USAGE: &str = "Usage: bhosts [-h] [-V] [-w | -l] [host_name ...]\n";

/// The STATUS word of a host: `closed` for every closed state unless `detailed`
/// (`-w`, `-l`), which names why (LSF's `closed_Full`, `closed_Adm`, `closed_Excl`,
/// `closed_Lock`, `closed_Busy`).
pub fn status_word(status: u32, detailed: bool) -> &'static str {
    match status {
        wire::HOST_OK => "ok",
        wire::HOST_UNAVAIL => "unavail",
        wire::HOST_UNREACH => "unreach",
        wire::HOST_CLOSED_FULL if detailed => "closed_Full",
        wire::HOST_CLOSED_ADM if detailed => "closed_Adm",
        wire::HOST_CLOSED_EXCL if detailed => "closed_Excl",
        wire::HOST_CLOSED_LOCK if detailed => "closed_Lock",
        wire::HOST_CLOSED_BUSY if detailed => "closed_Busy",
        wire::HOST_CLOSED_FULL
        | wire::HOST_CLOSED_ADM
        | wire::HOST_CLOSED_EXCL
        | wire::HOST_CLOSED_LOCK
        | wire::HOST_CLOSED_BUSY => "closed",
        _ => "unknown",
    }
}

/// A slot limit: `-` for none (or not yet known).
fn limit(slots: u32) -> String {
    match slots {
        0 | wire::HOST_SLOTS_UNLIMITED => "-".to_owned(),
        n => n.to_string(),
    }
}

/// The table for `hosts`; `wide` is `-w`.
pub fn format_bhosts(hosts: &[wire::HostInfo], wide: bool) -> String {
    let status_width = if wide { 14 } else { 11 };
    let mut out = format!(
        "{:<18} {:<status_width$}{:>6}{:>7}{:>7}{:>7}{:>7}{:>7}{:>7}\n",
        "HOST_NAME", "STATUS", "JL/U", "MAX", "NJOBS", "RUN", "SSUSP", "USUSP", "RSV"
    );
    for host in hosts {
        out.push_str(&format!(
            "{:<18} {:<status_width$}{:>6}{:>7}{:>7}{:>7}{:>7}{:>7}{:>7}\n",
            host.name,
            status_word(host.status, wide),
            limit(host.user_slot_limit),
            limit(host.max_slots),
            host.n_jobs,
            host.n_run,
            host.n_ssusp,
            host.n_ususp,
            host.n_reserved
        ));
    }
    out
}

/// The load indices of `-l`'s load table, in lim's order (`io` included, as LSF's `-l`).
const LOAD_INDICES: [&str; lim_wire::LIM_NIDX] =
    ["r15s", "r1m", "r15m", "ut", "pg", "io", "ls", "it", "tmp", "swp", "mem"];

/// The `-l` blocks for `hosts`, each followed by a blank line; `loads` is lim's
/// view of the hosts (empty when lim did not answer).
pub fn format_bhosts_long(hosts: &[wire::HostInfo], loads: &[lim_wire::HostLoad]) -> String {
    let mut out = String::new();
    for host in hosts {
        out.push_str(&format!("HOST  {}\n", host.name));
        out.push_str(&format!(
            "{:<16}{:>5}{:>6}{:>7}{:>7}{:>7}{:>7}{:>7}{:>7} {}\n",
            "STATUS", "CPUF", "JL/U", "MAX", "NJOBS", "RUN", "SSUSP", "USUSP", "RSV", "DISPATCH_WINDOW"
        ));
        out.push_str(&format!(
            "{:<16}{:>5}{:>6}{:>7}{:>7}{:>7}{:>7}{:>7}{:>7}{:>7}\n\n",
            status_word(host.status, true),
            "1.00",
            limit(host.user_slot_limit),
            limit(host.max_slots),
            host.n_jobs,
            host.n_run,
            host.n_ssusp,
            host.n_ususp,
            host.n_reserved,
            "-"
        ));
        let load = loads.iter().find(|load| load.name == host.name);
        if let Some(load) = load.filter(|load| load.status == lim_wire::HOST_STATUS_OK && load.nidx > 0) {
            out.push_str(&current_load(load));
        }
    }
    out
}

/// LSF's `CURRENT LOAD USED FOR SCHEDULING` table of one host, then a blank line.
fn current_load(load: &lim_wire::HostLoad) -> String {
    let mut out = format!(" CURRENT LOAD USED FOR SCHEDULING:\n {:<10}", "");
    for name in LOAD_INDICES {
        out.push_str(&format!("{name:>6}"));
    }
    for (label, reserved) in [("Total", false), ("Reserved", true)] {
        out.push_str(&format!("\n {label:<10}"));
        for (idx, value) in load.li.iter().enumerate() {
            let cell = match () {
                () if reserved => format_load_value(idx, 0.0),
                () if idx as u32 >= load.nidx => "-".to_owned(),
                () => format_load_value(idx, *value),
            };
            out.push_str(&format!("{cell:>6}"));
        }
    }
    out.push_str("\n\n");
    out
}

/// Runs `bhosts` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("bhosts", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let (mut wide, mut long, mut hosts) = (false, false, Vec::new());
    for arg in args {
        match arg.as_str() {
            "-w" => wide = true,
            "-l" => long = true,
            "-h" => {
                term.err(USAGE);
                return true;
            }
            "-V" => {
                term.err(term::VERSION_LINE);
                return true;
            }
            flag if flag.starts_with('-') => {
                term.err(&format!("bhosts: illegal option -- {}\n{USAGE}", flag.trim_start_matches('-')));
                return false;
            }
            host => hosts.push(host.to_owned()),
        }
    }
    if wide && long {
        term.err(&format!("bhosts: -w and -l cannot be combined\n{USAGE}"));
        return false;
    }
    let ops = (Operation::HostQuery, Operation::HostQueryReply);
    let Some(reply) =
        client::read_from_mbatchd::<_, wire::HostQueryReply>(term, "bhosts", ops, &wire::HostQuery { hosts })
    else {
        return false;
    };
    if !reply.hosts.is_empty() {
        let text = if long {
            // The load table is lim's; without an answer the block has the batch part only.
            let loads = crate::lim::query::<lim_wire::HostLoadReply>(lim_wire::LIM_TCP_HOST_LOAD)
                .map(|reply| reply.hosts)
                .unwrap_or_default();
            format_bhosts_long(&reply.hosts, &loads)
        } else {
            format_bhosts(&reply.hosts, wide)
        };
        term.out(&text);
    }
    for name in &reply.not_found {
        term.err(&format!("{name}: Bad host name, host group name or cluster name\n"));
    }
    reply.not_found.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, status: u32, max_slots: u32, n_jobs: u32) -> wire::HostInfo {
        wire::HostInfo {
            name: name.into(),
            status,
            max_slots,
            n_jobs,
            n_run: n_jobs,
            n_ssusp: 0,
            n_ususp: 0,
            n_reserved: 0,
            user_slot_limit: wire::HOST_SLOTS_UNLIMITED,
        }
    }

    // Goal: the classic header and columns, byte for byte as LavaLite prints them.
    #[test]
    fn classic_layout() {
        let hosts = [
            host("vm", wire::HOST_OK, 2, 0),
            host("h1", wire::HOST_UNAVAIL, wire::HOST_SLOTS_UNLIMITED, 1),
            host("h2", wire::HOST_CLOSED_FULL, 1, 1),
            host("h3", wire::HOST_UNREACH, 0, 0),
            wire::HostInfo { user_slot_limit: 1, ..host("h4", wire::HOST_CLOSED_ADM, 4, 0) },
        ];
        assert_eq!(
            format_bhosts(&hosts, false),
            "HOST_NAME          STATUS       JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV\n\
             vm                 ok              -      2      0      0      0      0      0\n\
             h1                 unavail         -      -      1      1      0      0      0\n\
             h2                 closed          -      1      1      1      0      0      0\n\
             h3                 unreach         -      -      0      0      0      0      0\n\
             h4                 closed          1      4      0      0      0      0      0\n"
        );
    }

    // Goal: -w widens STATUS to 14 and names why a host is closed.
    #[test]
    fn wide_layout_names_closed_states() {
        let hosts = [
            host("h2", wire::HOST_CLOSED_FULL, 1, 1),
            host("h4", wire::HOST_CLOSED_ADM, 4, 0),
            host("h5", wire::HOST_CLOSED_EXCL, 4, 1),
            host("h6", wire::HOST_CLOSED_LOCK, 4, 1),
            host("h7", wire::HOST_CLOSED_BUSY, 4, 0),
        ];
        assert_eq!(
            format_bhosts(&hosts, true),
            "HOST_NAME          STATUS          JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV\n\
             h2                 closed_Full        -      1      1      1      0      0      0\n\
             h4                 closed_Adm         -      4      0      0      0      0      0\n\
             h5                 closed_Excl        -      4      1      1      0      0      0\n\
             h6                 closed_Lock        -      4      1      1      0      0      0\n\
             h7                 closed_Busy        -      4      0      0      0      0      0\n"
        );
        assert_eq!(status_word(wire::HOST_CLOSED_LOCK, false), "closed");
        assert_eq!(status_word(wire::HOST_CLOSED_BUSY, false), "closed");
    }

    // Goal: with lim's load, -l adds LSF's CURRENT LOAD table: lim's last
    // report as lsload prints the values, `-` for an index not reported, a
    // Reserved row of zeros; an unavailable host gets no table.
    #[test]
    fn long_layout_with_load() {
        let mut li = [0.0f32; lim_wire::LIM_NIDX];
        li[..10].copy_from_slice(&[0.5, 1.25, 2.0, 0.37, 3.0, 12.0, 2.0, 13770.0, 286.0, 957.0]);
        let load = |name: &str, status: u32| lim_wire::HostLoad {
            name: name.to_owned(),
            host_type: "linux".to_owned(),
            model: "!".to_owned(),
            server: true,
            status,
            status0: 0,
            nidx: 10,
            li,
            age_ms: 0,
        };
        let hosts = [host("hostA", wire::HOST_OK, 2, 0), host("hostB", wire::HOST_UNAVAIL, 2, 0)];
        let loads = [load("hostA", lim_wire::HOST_STATUS_OK), load("hostB", lim_wire::HOST_STATUS_UNAVAIL)];
        assert_eq!(
            format_bhosts_long(&hosts, &loads),
            "HOST  hostA\n\
             STATUS           CPUF  JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV DISPATCH_WINDOW\n\
             ok               1.00     -      2      0      0      0      0      0      -\n\
             \n\
             \x20CURRENT LOAD USED FOR SCHEDULING:\n\
             \x20            r15s   r1m  r15m    ut    pg    io    ls    it   tmp   swp   mem\n\
             \x20Total        0.5   1.2   2.0   37%   3.0    12     2 13770  286M  957M     -\n\
             \x20Reserved     0.0   0.0   0.0    0%   0.0     0     0     0    0M    0M    0M\n\
             \n\
             HOST  hostB\n\
             STATUS           CPUF  JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV DISPATCH_WINDOW\n\
             unavail          1.00     -      2      0      0      0      0      0      -\n\
             \n"
        );
    }

    // Goal: -l prints LSF's per-host block: HOST line, STATUS header with CPUF
    // and DISPATCH_WINDOW, the values under their headers, a blank line.
    #[test]
    fn long_layout() {
        let hosts = [host("hostA", wire::HOST_OK, 2, 1), host("hostB", wire::HOST_CLOSED_FULL, 1, 1)];
        assert_eq!(
            format_bhosts_long(&hosts, &[]),
            "HOST  hostA\n\
             STATUS           CPUF  JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV DISPATCH_WINDOW\n\
             ok               1.00     -      2      1      1      0      0      0      -\n\
             \n\
             HOST  hostB\n\
             STATUS           CPUF  JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV DISPATCH_WINDOW\n\
             closed_Full      1.00     -      1      1      1      0      0      0      -\n\
             \n"
        );
    }
}
