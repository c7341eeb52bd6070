//! `lsinfo [-h] [-V] [-l] [-r] [-m] [-M] [-t] [resource_name ...]`: the
//! cluster's resources, host types and host models, in OpenLava's layout
//! (`lsinfo.c`):
//!
//! ```text
//! RESOURCE_NAME   TYPE   ORDER  DESCRIPTION
//! r15s          Numeric   Inc   15-second CPU run queue length
//! ...
//! cs            Boolean   N/A   Compute server
//!
//! TYPE_NAME
//! x86_64_linux
//!
//! MODEL_NAME      CPU_FACTOR      ARCHITECTURE
//! x86_64_default      100.00      x86_64_linux
//! ```
//!
//! - Resources (`-r`, or resource names): lim's built-in table (Lava's
//!   `builtInRes`: the load indices, then `ncpus ndisks maxmem maxswp maxtmp
//!   cpuf type model status rexpri server hname`), then lsf.shared's `Resource`
//!   section. Rows `%-13.13s %7.7s %5.5s   %s`; `-l` prints each resource's
//!   block (`RESOURCE_NAME:`, `DESCRIPTION:`, then `TYPE ORDER INTERVAL BUILTIN
//!   DYNAMIC RELEASE`). A name not found: `NAME: Resource name not found` on
//!   standard output, exit 0, as OpenLava.
//! - Host types (`-t`): lsf.shared's `HostType`.
//! - Host models (`-m`: the models lsf.cluster's hosts use; `-M`: all): `%-16s
//!   %6.2f      %s`. A host whose model is `!` (detected by lim) may use any
//!   model, so with one `-m` lists them all: LavaCore reads the files, lim is
//!   not asked.
//! - No option: all three, separated by a blank line.
//! - A configuration that does not load: `lsinfo: why`, exit 255.

use std::process::ExitCode;

use lava_conf::{BaseConfig, ResourceKind};

use crate::term::{self, Term};

/// The usage text (standard error).
pub const USAGE: &str = "Usage: lsinfo [-h] [-V] [-l] [-r] [-m] [-M] [-t] [resource_name ...]\n";

/// One resource as lsinfo shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceRow {
    /// The name.
    pub name: String,
    /// `Numeric`, `Boolean` or `String`.
    pub kind: &'static str,
    /// `Inc`, `Dec` or `N/A`.
    pub order: &'static str,
    /// The description.
    pub description: String,
    /// Seconds between updates (0 for static).
    pub interval_s: u32,
    /// Built into lim.
    pub builtin: bool,
    /// Changes with load.
    pub dynamic: bool,
    /// Released while a job is suspended.
    pub release: bool,
}

/// Lava's built-in resources: name, description, order, interval, dynamic, release.
const BUILTIN: [(&str, &str, &str, &str, u32); 22] = [
    ("r15s", "15-second CPU run queue length", "Numeric", "Inc", 15),
    ("r1m", "1-minute CPU run queue length (alias: cpu)", "Numeric", "Inc", 15),
    ("r15m", "15-minute CPU run queue length", "Numeric", "Inc", 15),
    ("ut", "1-minute CPU utilization (0.0 to 1.0)", "Numeric", "Inc", 15),
    ("pg", "Paging rate (pages/second)", "Numeric", "Inc", 15),
    ("io", "Disk IO rate (Kbytes/second)", "Numeric", "Inc", 15),
    ("ls", "Number of login sessions (alias: login)", "Numeric", "Inc", 30),
    ("it", "Idle time (minutes) (alias: idle)", "Numeric", "Dec", 30),
    ("tmp", "Disk space in /tmp (Mbytes)", "Numeric", "Dec", 120),
    ("swp", "Available swap space (Mbytes) (alias: swap)", "Numeric", "Dec", 15),
    ("mem", "Available memory (Mbytes)", "Numeric", "Dec", 15),
    ("ncpus", "Number of CPUs", "Numeric", "Dec", 0),
    ("ndisks", "Number of local disks", "Numeric", "Dec", 0),
    ("maxmem", "Maximum memory (Mbytes)", "Numeric", "Dec", 0),
    ("maxswp", "Maximum swap space (Mbytes)", "Numeric", "Dec", 0),
    ("maxtmp", "Maximum /tmp space (Mbytes)", "Numeric", "Dec", 0),
    ("cpuf", "CPU factor", "Numeric", "Dec", 0),
    ("type", "Host type", "String", "N/A", 0),
    ("model", "Host model", "String", "N/A", 0),
    ("status", "Host status", "String", "N/A", 0),
    ("rexpri", "Remote execution priority", "Numeric", "N/A", 0),
    ("server", "LSF server host", "Boolean", "N/A", 0),
];

/// Every resource: lim's built-in ones (the load indices are the first 11), then lsf.shared's.
pub fn resources(config: &BaseConfig) -> Vec<ResourceRow> {
    let mut rows: Vec<ResourceRow> = BUILTIN
        .iter()
        .enumerate()
        .map(|(idx, (name, description, kind, order, interval_s))| ResourceRow {
            name: (*name).to_owned(),
            kind,
            order,
            description: (*description).to_owned(),
            interval_s: *interval_s,
            builtin: true,
            dynamic: idx < 11,
            release: idx < 3,
        })
        .collect();
    rows.push(ResourceRow {
        name: "hname".to_owned(),
        kind: "String",
        order: "N/A",
        description: "Host name".to_owned(),
        interval_s: 0,
        builtin: true,
        dynamic: false,
        release: false,
    });
    for resource in &config.shared.resources {
        rows.push(ResourceRow {
            name: resource.name.clone(),
            kind: match resource.kind {
                ResourceKind::Boolean => "Boolean",
                ResourceKind::Numeric => "Numeric",
                ResourceKind::String => "String",
            },
            order: match resource.increasing {
                Some(true) => "Inc",
                Some(false) => "Dec",
                None => "N/A",
            },
            description: resource.description.clone(),
            interval_s: resource.interval_s.unwrap_or(0),
            builtin: false,
            dynamic: resource.interval_s.is_some(),
            release: false,
        });
    }
    rows
}

fn yes_no(flag: bool) -> &'static str {
    if flag { "Yes" } else { "No" }
}

/// The resource table (short or `-l`) of `rows`.
pub fn format_resources(rows: &[&ResourceRow], long: bool) -> String {
    let mut out = String::new();
    if !long {
        out.push_str(&format!(
            "{:<13.13} {:>7.7}  {:>5.5}  {}\n",
            "RESOURCE_NAME", "  TYPE ", "ORDER", "DESCRIPTION"
        ));
        for row in rows {
            out.push_str(&format!(
                "{:<13.13} {:>7.7} {:>5.5}   {}\n",
                row.name, row.kind, row.order, row.description
            ));
        }
        return out;
    }
    for (idx, row) in rows.iter().enumerate() {
        if idx > 0 {
            out.push('\n');
        }
        out.push_str(&format!("RESOURCE_NAME:  {}\nDESCRIPTION: {}\n", row.name, row.description));
        out.push_str(&format!(
            "{:<7.7} {:>5}  {:>9} {:>8} {:>8} {:>8}\n",
            "TYPE", "ORDER", "INTERVAL", "BUILTIN", "DYNAMIC", "RELEASE"
        ));
        out.push_str(&format!(
            "{:<7.7} {:>5}  {:>9} {:>8} {:>8} {:>8}\n",
            row.kind,
            row.order,
            row.interval_s,
            yes_no(row.builtin),
            yes_no(row.dynamic),
            yes_no(row.release)
        ));
    }
    out
}

/// The host types block.
pub fn format_types(config: &BaseConfig) -> String {
    let mut out = "TYPE_NAME\n".to_owned();
    for host_type in &config.shared.host_types {
        out.push_str(host_type);
        out.push('\n');
    }
    out
}

/// The host models block: all with `all_models` (`-M`), else those the hosts use.
pub fn format_models(config: &BaseConfig, all_models: bool) -> String {
    let hosts = &config.cluster.hosts;
    let any_detected = hosts.iter().any(|h| h.model.is_none());
    let mut out = "MODEL_NAME      CPU_FACTOR      ARCHITECTURE\n".to_owned();
    for model in &config.shared.host_models {
        let used = any_detected || hosts.iter().any(|h| h.model.as_deref() == Some(model.name.as_str()));
        if all_models || used {
            out.push_str(&format!(
                "{:<16}    {:>6.2}      {}\n",
                model.name,
                model.cpu_factor,
                model.architectures.join(" ")
            ));
        }
    }
    out
}

/// Runs `lsinfo` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("lsinfo", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let (mut long, mut r_flag, mut t_flag, mut m_flag, mut all_models) = (false, false, false, false, false);
    let mut names: Vec<String> = Vec::new();
    for arg in &args {
        match arg.strip_prefix('-') {
            Some(letters) if !letters.is_empty() => {
                for letter in letters.chars() {
                    match letter {
                        'h' => {
                            term.err(USAGE);
                            return true;
                        }
                        'V' => {
                            term.err(term::VERSION_LINE);
                            return true;
                        }
                        'l' => long = true,
                        'r' => r_flag = true,
                        't' => t_flag = true,
                        'm' => m_flag = true,
                        'M' => (m_flag, all_models) = (true, true),
                        other => {
                            term.err(&format!("lsinfo: illegal option -- {other}\n{USAGE}"));
                            return false;
                        }
                    }
                }
            }
            _ => names.push(arg.clone()),
        }
    }
    let config = match BaseConfig::load(&lava_conf::envdir_from_env()) {
        Ok(config) => config,
        Err(error) => {
            term.err(&format!("lsinfo: {error}\n"));
            return false;
        }
    };
    if names.is_empty() && !r_flag && !t_flag && !m_flag {
        (r_flag, t_flag, m_flag) = (true, true, true);
    } else if !names.is_empty() {
        r_flag = true;
    }
    let mut out = String::new();
    if r_flag {
        let all = resources(&config);
        let shown: Vec<&ResourceRow> =
            all.iter().filter(|row| names.is_empty() || names.contains(&row.name)).collect();
        out.push_str(&format_resources(&shown, long));
        let mut missing: Vec<&String> = names.iter().filter(|n| !all.iter().any(|r| &r.name == *n)).collect();
        missing.dedup();
        for name in missing {
            out.push_str(&format!("{name}: Resource name not found\n"));
        }
    }
    if t_flag {
        if r_flag {
            out.push('\n');
        }
        out.push_str(&format_types(&config));
    }
    if m_flag {
        if r_flag || t_flag {
            out.push('\n');
        }
        out.push_str(&format_models(&config, all_models));
    }
    term.out(&out);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: OpenLava's widths for the short and the long resource layouts.
    #[test]
    fn resource_layouts() {
        let rows = [
            ResourceRow {
                name: "r15s".to_owned(),
                kind: "Numeric",
                order: "Inc",
                description: "15-second CPU run queue length".to_owned(),
                interval_s: 15,
                builtin: true,
                dynamic: true,
                release: true,
            },
            ResourceRow {
                name: "type".to_owned(),
                kind: "String",
                order: "N/A",
                description: "Host type".to_owned(),
                interval_s: 0,
                builtin: true,
                dynamic: false,
                release: false,
            },
        ];
        let refs: Vec<&ResourceRow> = rows.iter().collect();
        assert_eq!(
            format_resources(&refs, false),
            "RESOURCE_NAME   TYPE   ORDER  DESCRIPTION\n\
             r15s          Numeric   Inc   15-second CPU run queue length\n\
             type           String   N/A   Host type\n"
        );
        assert_eq!(
            format_resources(&refs[..1], true),
            "RESOURCE_NAME:  r15s\nDESCRIPTION: 15-second CPU run queue length\n\
             TYPE    ORDER   INTERVAL  BUILTIN  DYNAMIC  RELEASE\n\
             Numeric   Inc         15      Yes      Yes      Yes\n"
        );
    }
}
