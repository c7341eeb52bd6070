//! `bhosts [-w] [host ...]`: the execution hosts as mbatchd sees them
//! (HOST_QUERY), in LavaLite 0.1.2's classic layout
//! (../shared/research/lavalite.md section 2.4):
//!
//! ```text
//! HOST_NAME          STATUS       JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV
//! h0                 ok              -      2      0      0      0      0      0
//! ```
//!
//! STATUS is `ok`, `unavail` (the master lim marks the host unavailable),
//! `unreach` (its sbatchd is not connected) or `closed` (every slot in use;
//! `closed_Full` with `-w`, whose STATUS column is 14 wide). `-` means
//! unlimited (JL/U always: per-user limits are not implemented) or not yet
//! known (MAX of a host whose slots are its CPUs before its sbatchd registered).
//! A name that is not an execution host is reported on standard error and
//! makes the exit status 255.

use std::process::ExitCode;

use lava_batch_wire::{self as wire, Operation};

use crate::client;
use crate::term::{self, Term};

const USAGE: &str = "Usage: bhosts [-h] [-V] [-w] [host_name ...]\n";

/// The table for `hosts`; `wide` is `-w`.
pub fn format_bhosts(hosts: &[wire::HostInfo], wide: bool) -> String {
    let status_width = if wide { 14 } else { 11 };
    let mut out = format!(
        "{:<18} {:<status_width$}{:>6}{:>7}{:>7}{:>7}{:>7}{:>7}{:>7}\n",
        "HOST_NAME", "STATUS", "JL/U", "MAX", "NJOBS", "RUN", "SSUSP", "USUSP", "RSV"
    );
    for host in hosts {
        let status = match host.status {
            wire::HOST_OK => "ok",
            wire::HOST_UNAVAIL => "unavail",
            wire::HOST_UNREACH => "unreach",
            wire::HOST_CLOSED_FULL if wide => "closed_Full",
            wire::HOST_CLOSED_FULL => "closed",
            wire::HOST_CLOSED_ADM if wide => "closed_Adm",
            wire::HOST_CLOSED_ADM => "closed",
            _ => "unknown",
        };
        let max = match host.max_slots {
            0 | wire::HOST_SLOTS_UNLIMITED => "-".to_owned(),
            n => n.to_string(),
        };
        out.push_str(&format!(
            "{:<18} {:<status_width$}{:>6}{:>7}{:>7}{:>7}{:>7}{:>7}{:>7}\n",
            host.name, status, "-", max, host.n_jobs, host.n_run, host.n_ssusp, host.n_ususp, host.n_reserved
        ));
    }
    out
}

/// Runs `bhosts` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("bhosts", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let (mut wide, mut hosts) = (false, Vec::new());
    for arg in args {
        match arg.as_str() {
            "-w" => wide = true,
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
    let ops = (Operation::HostQuery, Operation::HostQueryReply);
    let Some(reply) =
        client::read_from_mbatchd::<_, wire::HostQueryReply>(term, "bhosts", ops, &wire::HostQuery { hosts })
    else {
        return false;
    };
    if !reply.hosts.is_empty() {
        term.out(&format_bhosts(&reply.hosts, wide));
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
        ];
        assert_eq!(
            format_bhosts(&hosts, false),
            "HOST_NAME          STATUS       JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV\n\
             vm                 ok              -      2      0      0      0      0      0\n\
             h1                 unavail         -      -      1      1      0      0      0\n\
             h2                 closed          -      1      1      1      0      0      0\n\
             h3                 unreach         -      -      0      0      0      0      0\n"
        );
        let wide = format_bhosts(&hosts[2..3], true);
        assert!(
            wide.ends_with(
                "h2                 closed_Full        -      1      1      1      0      0      0\n"
            ),
            "{wide}"
        );
    }
}
