//! `lsclusters [-h] [-V] [-w] [cluster_name ...]`: the cluster, in LSF's
//! layout (OpenLava's `lsclusters.c`: `%-14.14s %-8.8s %-15.15s %15.15s %8d
//! %8d`, every column cut to its width; `-w` cuts none):
//!
//! ```text
//! CLUSTER_NAME   STATUS   MASTER_HOST               ADMIN    HOSTS  SERVERS
//! lavacore       ok       hostA                      root        3        2
//! ```
//!
//! The cluster name is the first word of the second line, which tools read
//! (Snakemake's LSF executor). The name, the administrator (the first of
//! lsf.cluster's `ClusterAdmins`), the hosts (every `Host` row) and servers
//! (`server` 1) come from the configuration; STATUS and MASTER_HOST from the
//! master lim when it answers (`ok`, and the master it names), else `unavail`
//! and the configured master (the first server host), so the listing is
//! there even on a cluster run without lim (mbatchd works without one).
//! A named cluster other than this one: `<name>: Unknown cluster name` on
//! standard error, exit 255 (LavaCore runs one cluster; LSF's `-l` and
//! multicluster listings are not supported).

use std::process::ExitCode;

use lava_conf::BaseConfig;

use crate::term::{self, Term};

/// The usage text (standard error).
pub const USAGE: &str = "Usage: lsclusters [-h] [-V] [-w] [cluster_name ...]\n";

/// The header.
pub const HEADER: &str = "CLUSTER_NAME   STATUS   MASTER_HOST               ADMIN    HOSTS  SERVERS\n";

/// One cluster's row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterRow {
    /// The cluster's name.
    pub name: String,
    /// `ok` or `unavail`.
    pub status: String,
    /// The master host.
    pub master: String,
    /// The primary administrator.
    pub admin: String,
    /// Every host of lsf.cluster.
    pub n_hosts: usize,
    /// Its server hosts.
    pub n_servers: usize,
}

/// The row of the configured cluster; `lim` is the master lim's answer
/// (cluster, master) when it gave one.
pub fn row(config: &BaseConfig, lim: Option<(String, String)>) -> ClusterRow {
    let configured_master = config.master_host().map_or_else(|| "-".to_owned(), |host| host.name.clone());
    let (status, master) = match lim {
        Some((_, master)) if !master.is_empty() => ("ok", master),
        _ => ("unavail", configured_master),
    };
    ClusterRow {
        name: config.cluster_name.clone(),
        status: status.to_owned(),
        master,
        admin: config.cluster.admins.first().cloned().unwrap_or_else(|| "root".to_owned()),
        n_hosts: config.cluster.hosts.len(),
        n_servers: config.cluster.hosts.iter().filter(|host| host.server).count(),
    }
}

/// The listing; `wide` (`-w`) cuts no column.
pub fn format(rows: &[ClusterRow], wide: bool) -> String {
    let mut out = HEADER.to_owned();
    for row in rows {
        let line = if wide {
            format!(
                "{:<14} {:<8} {:<15} {:>15} {:>8} {:>8}\n",
                row.name, row.status, row.master, row.admin, row.n_hosts, row.n_servers
            )
        } else {
            format!(
                "{:<14.14} {:<8.8} {:<15.15} {:>15.15} {:>8} {:>8}\n",
                row.name, row.status, row.master, row.admin, row.n_hosts, row.n_servers
            )
        };
        out.push_str(&line);
    }
    out
}

/// Runs `lsclusters` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("lsclusters", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let mut wide = false;
    let mut names = Vec::new();
    for arg in &args {
        match arg.as_str() {
            "-h" => {
                term.err(USAGE);
                return true;
            }
            "-V" => {
                term.err(term::VERSION_LINE);
                return true;
            }
            "-w" => wide = true,
            option if option.starts_with('-') => {
                term.err(&format!("lsclusters: illegal option -- {}\n{USAGE}", &option[1..]));
                return false;
            }
            name => names.push(name.to_owned()),
        }
    }
    let config = match BaseConfig::load(&lava_conf::envdir_from_env()) {
        Ok(config) => config,
        Err(error) => {
            term.err(&format!("lsclusters: {error}\n"));
            return false;
        }
    };
    if let Some(unknown) = names.iter().find(|name| **name != config.cluster_name) {
        term.err(&format!("{unknown}: Unknown cluster name\n"));
        return false;
    }
    let lim = crate::lim::query::<lava_lim_wire::ClusterInfoReply>(lava_lim_wire::LIM_TCP_CLUSTER_INFO)
        .ok()
        .map(|info| (info.cluster, info.master));
    term.out(&format(&[row(&config, lim)], wide));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ClusterRow {
        ClusterRow {
            name: "lavacore".to_owned(),
            status: "ok".to_owned(),
            master: "master.example.org".to_owned(),
            admin: "lsfadmin".to_owned(),
            n_hosts: 3,
            n_servers: 2,
        }
    }

    // Goal: OpenLava's columns, cut to their widths (the master host to 15),
    // none cut with -w; the cluster name is the second line's first word.
    #[test]
    fn layout() {
        assert_eq!(
            format(&[sample()], false),
            "CLUSTER_NAME   STATUS   MASTER_HOST               ADMIN    HOSTS  SERVERS\n\
             lavacore       ok       master.example.        lsfadmin        3        2\n"
        );
        assert_eq!(
            format(&[sample()], true),
            "CLUSTER_NAME   STATUS   MASTER_HOST               ADMIN    HOSTS  SERVERS\n\
             lavacore       ok       master.example.org        lsfadmin        3        2\n"
        );
        let listing = format(&[sample()], false);
        assert_eq!(
            listing.split('\n').nth(1).and_then(|line| line.split_whitespace().next()),
            Some("lavacore")
        );
    }
}
