//! `busers [-h] [-V] [-w] [user_name ... | user_group ... | all]`: users' and
//! user groups' job slots, in OpenLava's layout (`busers.c`, `prtWord` widths):
//!
//! ```text
//! USER/GROUP          JL/P    MAX  NJOBS   PEND    RUN  SSUSP  USUSP    RSV
//! alice                  -     10      3      1      2      0      0      0
//! ```
//!
//! - Rows: the caller without operands; the named users and groups (a group's
//!   row adds up its members' jobs, subgroups included); with `all`, every user
//!   with an unfinished job, every user and group lsb.users' `User` section
//!   names, and its `default` row (all dashes for the counts, as LSF). Sorted by
//!   name as OpenLava sorts them.
//! - JL/P (`%5.1f`) and MAX come from lsb.users' `User` section (the user's own
//!   row, else `default`; a group's own row), `-` when unlimited.
//! - Counts are job slots of unfinished jobs, counted as `bqueues` counts them:
//!   PEND holds PEND and PSUSP, RUN holds RUN and UNKWN, NJOBS all of them. RSV
//!   is 0 (no slot reservation in LavaCore). mbatchd is asked with the JOB_QUERY
//!   of `bjobs -u all` (no query of its own); the limits are read from lsb.users.
//! - `-w` (LSF 10's pending job thresholds, "Output shows PEND, MPEND, PJOBS,
//!   and MPJOBS fields"): `USER/GROUP PEND MPEND PJOBS MPJOBS` with the same
//!   widths: pending slots, LSF's pending slot threshold (`-`: LavaCore has no
//!   MAX_PEND_SLOTS), pending jobs, and `MAX_PEND_JOBS` (the user's, else
//!   `default`'s, else lsb.params'; `-` when unlimited). IBM names the fields, not
//!   the widths; these are LavaCore's.
//! - A name that is neither a user of this host's password database, a user
//!   with jobs, nor a group of lsb.users: `NAME: Bad user name` (LSF's
//!   `LSBE_BAD_USER`), exit 255.

use std::collections::BTreeMap;
use std::process::ExitCode;

use lava_batch_ll::JobStatus;
use lava_batch_wire::{JobInfo, JobQuery, state_filter};
use lava_conf::ClusterConfig;

use crate::client::Client;
use crate::term::{self, Term};
use crate::{bjobs, host};

/// The usage text (standard error).
pub const USAGE: &str = "Usage: busers [-h] [-V] [-w] [user_name ... | user_group ... | all]\n";

/// Slots of unfinished jobs, by state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// PEND and PSUSP slots.
    pub pend: u32,
    /// RUN and UNKWN slots.
    pub run: u32,
    /// SSUSP slots.
    pub ssusp: u32,
    /// USUSP slots.
    pub ususp: u32,
    /// Pending jobs (PEND and PSUSP).
    pub pend_jobs: u32,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.pend += other.pend;
        self.run += other.run;
        self.ssusp += other.ssusp;
        self.ususp += other.ususp;
        self.pend_jobs += other.pend_jobs;
    }

    fn n_jobs(&self) -> u32 {
        self.pend + self.run + self.ssusp + self.ususp
    }
}

/// One row: a user, a group or `default`.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The name.
    pub name: String,
    /// `JL/P`.
    pub jl_p: Option<f64>,
    /// `MAX`.
    pub max_jobs: Option<u32>,
    /// `MAX_PEND_JOBS` in effect.
    pub max_pend_jobs: Option<u32>,
    /// The counts; `None` for `default`.
    pub counts: Option<Counts>,
}

/// Slots by user of `jobs`.
pub fn count_jobs(jobs: &[JobInfo]) -> BTreeMap<String, Counts> {
    let mut by_user: BTreeMap<String, Counts> = BTreeMap::new();
    for job in jobs {
        let Some(status) = JobStatus::from_bits(job.status) else { continue };
        let counts = by_user.entry(job.user_name.clone()).or_default();
        let slots = job.n_slots.max(1);
        match status {
            JobStatus::Pend | JobStatus::Psusp => {
                counts.pend += slots;
                counts.pend_jobs += 1;
            }
            JobStatus::Run | JobStatus::Unknown => counts.run += slots,
            JobStatus::Ssusp => counts.ssusp += slots,
            JobStatus::Ususp => counts.ususp += slots,
            JobStatus::Done | JobStatus::Exit => {}
        }
    }
    by_user
}

/// The users a group stands for, subgroups expanded (each group once).
fn group_users(config: &ClusterConfig, group: &str, seen: &mut Vec<String>, out: &mut Vec<String>) {
    if seen.iter().any(|g| g == group) {
        return;
    }
    seen.push(group.to_owned());
    let Some(row) = config.users.groups.iter().find(|g| g.name == group) else { return };
    for member in &row.members {
        if config.users.groups.iter().any(|g| &g.name == member) {
            group_users(config, member, seen, out);
        } else if !out.contains(member) {
            out.push(member.clone());
        }
    }
}

/// The row of `name` (a user or a group of `config`).
pub fn row(config: &ClusterConfig, name: &str, by_user: &BTreeMap<String, Counts>) -> Row {
    let own = config.users.users.iter().find(|u| u.name == name);
    let is_group = config.users.groups.iter().any(|g| g.name == name);
    let limits = own.or(if is_group { None } else { config.users.default.as_ref() });
    let counts = if is_group {
        let mut members = Vec::new();
        group_users(config, name, &mut Vec::new(), &mut members);
        let all = members.iter().any(|m| m == "all");
        let mut total = Counts::default();
        for (user, counts) in by_user {
            if all || members.contains(user) {
                total.add(counts);
            }
        }
        total
    } else {
        by_user.get(name).copied().unwrap_or_default()
    };
    Row {
        name: name.to_owned(),
        jl_p: limits.and_then(|u| u.jl_p),
        max_jobs: limits.and_then(|u| u.max_jobs),
        max_pend_jobs: limits.and_then(|u| u.max_pend_jobs).or(config.params.max_pend_jobs),
        counts: Some(counts),
    }
}

/// The `default` row of lsb.users, if any.
pub fn default_row(config: &ClusterConfig) -> Option<Row> {
    config.users.default.as_ref().map(|u| Row {
        name: "default".to_owned(),
        jl_p: u.jl_p,
        max_jobs: u.max_jobs,
        max_pend_jobs: u.max_pend_jobs.or(config.params.max_pend_jobs),
        counts: None,
    })
}

fn dash_or(value: Option<u32>) -> String {
    value.map_or_else(|| format!("{:>6}", "-"), |v| format!("{v:>6}"))
}

/// The listing, rows sorted by name.
pub fn format(rows: &[Row], pending_thresholds: bool) -> String {
    let mut rows: Vec<&Row> = rows.iter().collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = String::new();
    if pending_thresholds {
        out.push_str(&format!(
            "{:<18} {:>6} {:>6} {:>6} {:>6}\n",
            "USER/GROUP", "PEND", "MPEND", "PJOBS", "MPJOBS"
        ));
        for row in rows {
            let (pend, pjobs) = match &row.counts {
                Some(counts) => (format!("{:>6}", counts.pend), format!("{:>6}", counts.pend_jobs)),
                None => (format!("{:>6}", "-"), format!("{:>6}", "-")),
            };
            out.push_str(&format!(
                "{:<18} {pend} {:>6} {pjobs} {}\n",
                row.name,
                "-",
                dash_or(row.max_pend_jobs)
            ));
        }
        return out;
    }
    out.push_str(&format!(
        "{:<18} {:>5} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6}\n",
        "USER/GROUP", "JL/P", "MAX", "NJOBS", "PEND", "RUN", "SSUSP", "USUSP", "RSV"
    ));
    for row in rows {
        let jl_p = row.jl_p.map_or_else(|| format!("{:>5}", "-"), |v| format!("{v:>5.1}"));
        let head = format!("{:<18} {jl_p} {}", row.name, dash_or(row.max_jobs));
        let tail = match &row.counts {
            Some(c) => {
                format!("{:>6} {:>6} {:>6} {:>6} {:>6} {:>6}", c.n_jobs(), c.pend, c.run, c.ssusp, c.ususp, 0)
            }
            None => vec![format!("{:>6}", "-"); 6].join(" "),
        };
        out.push_str(&format!("{head} {tail}\n"));
    }
    out
}

/// Runs `busers` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("busers", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let mut pending_thresholds = false;
    let mut names: Vec<String> = Vec::new();
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
            "-w" => pending_thresholds = true,
            option if option.starts_with('-') => {
                term.err(&format!("busers: illegal option -- {}\n{USAGE}", &option[1..]));
                return false;
            }
            name => names.push(name.to_owned()),
        }
    }
    let config = match ClusterConfig::load(&lava_conf::envdir_from_env()) {
        Ok(config) => config,
        Err(error) => {
            term.err(&format!("busers: {error}\n"));
            return false;
        }
    };
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    if names.is_empty() {
        let uid = host::ProcStatus::read().uid;
        match uid.and_then(|uid| host::passwd_name(&passwd, uid)) {
            Some(name) => names.push(name),
            None => {
                term.err("busers: cannot find the name of the calling user\n");
                return false;
            }
        }
    }
    let query = JobQuery {
        jobs: Vec::new(),
        user: "all".to_owned(),
        state_filter: state_filter::UNFINISHED,
        queue: String::new(),
        host: String::new(),
        job_name: String::new(),
        after_job: 0,
        after_index: 0,
    };
    let base = match crate::client::load_config() {
        Ok(base) => base,
        Err(error) => {
            term.err(&format!("busers: {error}\n"));
            return false;
        }
    };
    let jobs = match Client::from_env(&base).and_then(|mut client| {
        // Without a majority of master candidates, the last applied state, with a warning.
        client.accept_stale();
        bjobs::all_pages(&mut client, query)
    }) {
        Ok(jobs) => jobs,
        Err(error) => {
            term.err(&format!("{error}\n"));
            return false;
        }
    };
    let by_user = count_jobs(&jobs);
    let mut rows: Vec<Row> = Vec::new();
    let push = |rows: &mut Vec<Row>, name: &str| {
        if !rows.iter().any(|r| r.name == name) {
            rows.push(row(&config, name, &by_user));
        }
    };
    for name in &names {
        if name == "all" {
            for user in by_user.keys() {
                push(&mut rows, user);
            }
            for user in &config.users.users {
                push(&mut rows, &user.name);
            }
            if let Some(default) = default_row(&config)
                && !rows.iter().any(|r| r.name == "default")
            {
                rows.push(default);
            }
            continue;
        }
        let known = config.users.groups.iter().any(|g| &g.name == name)
            || by_user.contains_key(name)
            || host::passwd_home_by_name(&passwd, name).is_some();
        if !known {
            term.err(&format!("{name}: Bad user name\n"));
            return false;
        }
        push(&mut rows, name);
    }
    term.out(&format(&rows, pending_thresholds));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pend: u32, run: u32, ssusp: u32, ususp: u32) -> Option<Counts> {
        Some(Counts { pend, run, ssusp, ususp, pend_jobs: pend })
    }

    // Goal: OpenLava's widths: the name in 18, JL/P `%5.1f`, the rest in 6, dashes
    // for unlimited and for the default row's counts; rows sorted by name.
    #[test]
    fn layouts() {
        let rows = vec![
            Row {
                name: "zoe".to_owned(),
                jl_p: None,
                max_jobs: None,
                max_pend_jobs: None,
                counts: counts(0, 0, 0, 0),
            },
            Row {
                name: "alice".to_owned(),
                jl_p: Some(1.5),
                max_jobs: Some(10),
                max_pend_jobs: Some(100),
                counts: counts(2, 3, 1, 0),
            },
            Row {
                name: "default".to_owned(),
                jl_p: None,
                max_jobs: Some(4),
                max_pend_jobs: None,
                counts: None,
            },
        ];
        assert_eq!(
            format(&rows, false),
            "USER/GROUP          JL/P    MAX  NJOBS   PEND    RUN  SSUSP  USUSP    RSV\n\
             alice                1.5     10      6      2      3      1      0      0\n\
             default                -      4      -      -      -      -      -      -\n\
             zoe                    -      -      0      0      0      0      0      0\n"
        );
        assert_eq!(
            format(&rows[1..2], true),
            "USER/GROUP           PEND  MPEND  PJOBS MPJOBS\nalice                   2      -      2    100\n"
        );
    }
}
