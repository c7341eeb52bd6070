//! `badmin`: the administrator's command.
//!
//! - `showstatus` (STATUS_QUERY, any user): mbatchd's view of the cluster in
//!   LSF's `badmin showstatus` layout, followed by the daemon's counters (frames
//!   by operation, refusals by reason, event-log appends, fsyncs and group-commit
//!   latency, queue depths), one `name value` line each, which scripts and
//!   monitoring can parse.
//! - `reconfig` (RECONFIG, cluster administrators): mbatchd reads the batch
//!   configuration again and uses it at once — queues, their priorities and hosts,
//!   MXJ, administrators, periods. A broken file, or a change of the cluster's
//!   hosts (which needs a restart), leaves the running configuration in force
//!   and is reported with LSF's `There are fatal errors.` (exit 255).
//!
//! - `hclose`/`hopen [host ...]` (the local host without names): close a host
//!   to new jobs (`bhosts` shows `closed_Adm`) or open it; `Close <h> ...... done`.
//! - `qclose`/`qopen`/`qact`/`qinact [queue ...]` (the default queue without
//!   names): a closed queue refuses submissions, an inactive one dispatches
//!   nothing; `Queue <q> is closed` (opened, activated, inactivated).
//! - `mbdrestart`: mbatchd checks its configuration, stops cleanly and starts
//!   again from its event log (`MBD restart initiated`).
//! - `ckconfig [-v]` (LSF's; no daemon asked): loads every file of the cluster
//!   (lsf.conf, lsf.shared, lsf.cluster.NAME and the lsb.* files) from `LSF_ENVDIR`
//!   with lava-conf, as mbatchd does, and prints `No errors found.` (exit 0) or the
//!   first error as `path:line: what` (a bad `PJOB_LIMIT`, `MAX_JOB_NUM`, ...)
//!   then `There are fatal errors.` (exit 255), as `lsadmin ckconfig` does. What
//!   only mbatchd checks (the files against each other, e.g. a queue's `HOSTS`
//!   naming a client host) `badmin reconfig` reports.
//!
//! - `showconf mbd` (LSF's; any user, no daemon asked): `MBD configuration at
//!   <date>` then `    KEY = value` lines, lsf.conf's and lsb.params' values in
//!   effect ([`crate::showconf`]).
//!
//! These orders are for cluster administrators (others get `User permission
//! denied`) and survive a restart (HOST_CTRL, QUEUE_CTRL in the event log).
//! Each line mbatchd answers goes to standard output when the order was carried
//! out, else to standard error with exit 255. Anything else is LSF's `Invalid command`.

use std::process::ExitCode;

use jiff::tz::TimeZone;
use lava_batch_wire::{self as wire, Operation};

use crate::client;
use crate::lsadmin::ckconfig_report;
use crate::term::{self, Term};

const USAGE: &str = "Usage: badmin [-h] [-V] showstatus | reconfig | mbdrestart | ckconfig [-v] | showconf mbd\n\
                     \x20                              | hclose [host ...] | hopen [host ...]\n\
                     \x20                              | qclose [queue ...] | qopen [queue ...]\n\
                     \x20                              | qact [queue ...] | qinact [queue ...]\n";

/// The administrator's orders (ADMIN_CONTROL) by subcommand.
const ORDERS: [(&str, wire::AdminAction); 7] = [
    ("hclose", wire::AdminAction::HostClose),
    ("hopen", wire::AdminAction::HostOpen),
    ("qclose", wire::AdminAction::QueueClose),
    ("qopen", wire::AdminAction::QueueOpen),
    ("qact", wire::AdminAction::QueueActivate),
    ("qinact", wire::AdminAction::QueueInactivate),
    ("mbdrestart", wire::AdminAction::MbdRestart),
];

/// What `badmin` prints for an ADMIN_CONTROL answer: (standard output, standard
/// error, whether every order was carried out).
pub fn format_orders(action: wire::AdminAction, reply: &wire::AdminControlReply) -> (String, String, bool) {
    let (mut out, mut err) = (String::new(), String::new());
    let mut ok = !reply.results.is_empty();
    for result in &reply.results {
        match (action, result.done) {
            (wire::AdminAction::MbdRestart, true) => out.push_str(&format!(
                "Checking configuration files ...\nNo errors found.\n\n{}\n",
                result.message
            )),
            (wire::AdminAction::MbdRestart, false) if result.message != "User permission denied" => err
                .push_str(&format!(
                    "Checking configuration files ...\n\n{}\n\nThere are fatal errors.\n",
                    result.message
                )),
            (_, true) => out.push_str(&format!("{}\n", result.message)),
            (_, false) => {
                ok = false;
                err.push_str(&format!("{}\n", result.message));
            }
        }
        ok &= result.done;
    }
    (out, err, ok)
}

/// What `badmin reconfig` prints for `reply`, and whether it succeeded.
pub fn format_reconfig(reply: &wire::ReconfigReply) -> (String, bool) {
    if reply.applied {
        ("Checking configuration files ...\nNo errors found.\n\nReconfiguration initiated\n".to_owned(), true)
    } else {
        (format!("Checking configuration files ...\n\n{}\n\nThere are fatal errors.\n", reply.message), false)
    }
}

/// `badmin showstatus` for `status`, with times in `tz`.
pub fn format_showstatus(status: &wire::StatusReply, tz: &TimeZone) -> String {
    let [ok, closed, unreach, unavail] = status.hosts;
    let [pend, run, susp, finished] = status.jobs;
    let started = crate::format::long_date(status.started_at, tz);
    let mut out = format!(
        "LSF runtime mbatchd information\n\
         \x20  Cluster name:           {}\n\
         \x20  Master name:            {}\n\
         \n\
         \x20  Number of servers:      {}\n\
         \x20     Ok:                  {ok}\n\
         \x20     Closed:              {closed}\n\
         \x20     Unreachable:         {unreach}\n\
         \x20     Unavailable:         {unavail}\n\
         \n\
         \x20  Number of jobs:         {}\n\
         \x20     Running:             {run}\n\
         \x20     Suspended:           {susp}\n\
         \x20     Pending:             {pend}\n\
         \x20     Finished:            {finished}\n\
         \n\
         \x20  Number of active users: {}\n\
         \n\
         \x20  Latest mbatchd start:   {started}\n\
         \x20  Active mbatchd PID:     {}\n\
         \n",
        status.cluster_name,
        status.master_name,
        ok + closed + unreach + unavail,
        pend + run + susp + finished,
        status.active_users,
        status.pid,
    );
    out.push_str(&candidates_block(status));
    out.push_str("Counters:\n");
    for counter in &status.counters {
        out.push_str(&format!("   {:<40} {}\n", counter.name, counter.value));
    }
    out
}

/// With master candidates (the `candidate.<rank>.<name>` counters of a replicated
/// mbatchd): who leads, the term, the commit index, and each candidate's role and the log
/// index it holds as the leader knows it. Empty for a single master. A candidate without a
/// leader (a stale answer) knows only itself: it says so, and that it is no leader.
fn candidates_block(status: &wire::StatusReply) -> String {
    let counter = |name: &str| status.counters.iter().find(|c| c.name == name).map(|c| c.value);
    let candidates: Vec<(u64, &str, u64)> = status
        .counters
        .iter()
        .filter_map(|c| {
            let (rank, name) = c.name.strip_prefix("candidate.")?.split_once('.')?;
            Some((rank.parse().ok()?, name, c.value))
        })
        .collect();
    if candidates.is_empty() {
        return String::new();
    }
    let leader = counter("replica.leader").unwrap_or(0);
    let mut out = format!(
        "   Master candidates:      {} (term {}, commit index {}{})\n",
        counter("replica.candidates").unwrap_or(candidates.len() as u64),
        counter("replica.term").unwrap_or(0),
        counter("replica.commit_index").unwrap_or(0),
        if leader == 0 { ", no master" } else { "" },
    );
    for (rank, name, held) in candidates {
        let role = match leader {
            0 => "candidate",
            _ if rank == leader => "leader",
            _ => "follower",
        };
        out.push_str(&format!("      {name:<20} {role:<9} log index {held}\n"));
    }
    out.push('\n');
    out
}

/// The `-v` line of `badmin ckconfig`.
fn batch_summary(config: &lava_conf::ClusterConfig) -> String {
    format!(
        "Cluster {}: {} queues, {} hosts, MAX_JOB_NUM {}",
        config.cluster_name,
        config.queues.queues.len(),
        config.cluster.hosts.len(),
        config.params.max_job_num
    )
}

/// Runs `badmin` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("badmin", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    match args.first().map(String::as_str) {
        Some("-h") | None => {
            term.err(USAGE);
            return !args.is_empty();
        }
        Some("-V") => {
            term.err(term::VERSION_LINE);
            return true;
        }
        Some("showstatus") if args.len() == 1 => {}
        Some("showconf") if args[1..] == ["mbd"] => {
            let now_s = jiff::Timestamp::now().as_second();
            return match crate::showconf::mbd(&lava_conf::envdir_from_env(), now_s, &TimeZone::system()) {
                Ok(text) => {
                    term.out(&text);
                    true
                }
                Err(error) => {
                    term.err(&format!("badmin: {error}\n"));
                    false
                }
            };
        }
        Some("showconf") => {
            term.err(&format!(
                "badmin: showconf supports mbd only (sbd and all are not supported by LavaCore yet)\n{USAGE}"
            ));
            return false;
        }
        Some("ckconfig") if args.len() == 1 || args[1..] == ["-v"] => {
            let loaded = lava_conf::ClusterConfig::load(&lava_conf::envdir_from_env());
            let (text, ok) = ckconfig_report(loaded.as_ref().map(batch_summary), args.len() > 1);
            if ok {
                term.out(&text);
            } else {
                term.err(&text);
            }
            return ok;
        }
        Some("reconfig") if args.len() == 1 => {
            let ops = (Operation::Reconfig, Operation::ReconfigReply);
            let Some(reply) = client::read_from_mbatchd::<_, wire::ReconfigReply>(
                term,
                "badmin",
                ops,
                &wire::ReconfigRequest {},
            ) else {
                return false;
            };
            let (text, ok) = format_reconfig(&reply);
            if ok {
                term.out(&text);
            } else {
                term.err(&text);
            }
            return ok;
        }
        Some(name) if ORDERS.iter().any(|(order, _)| *order == name) => {
            let action = ORDERS.iter().find(|(order, _)| *order == name).map(|(_, a)| *a).expect("listed");
            if action == wire::AdminAction::MbdRestart && args.len() > 1 {
                term.err(&format!("badmin: mbdrestart takes no argument\n{USAGE}"));
                return false;
            }
            let request = wire::AdminControlRequest { action, names: args[1..].to_vec() };
            let ops = (Operation::AdminControl, Operation::AdminControlReply);
            let Some(reply) =
                client::read_from_mbatchd::<_, wire::AdminControlReply>(term, "badmin", ops, &request)
            else {
                return false;
            };
            let (out, err, ok) = format_orders(action, &reply);
            term.out(&out);
            term.err(&err);
            return ok;
        }
        Some(name) => {
            term.err(&format!("badmin: Invalid command <{name}>\n{USAGE}"));
            return false;
        }
    }
    let ops = (Operation::StatusQuery, Operation::StatusQueryReply);
    let Some(status) =
        client::read_from_mbatchd::<_, wire::StatusReply>(term, "badmin", ops, &wire::StatusQuery {})
    else {
        return false;
    };
    term.out(&format_showstatus(&status, &TimeZone::system()));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(lines: &[(&str, bool, &str)]) -> wire::AdminControlReply {
        let results = lines
            .iter()
            .map(|(name, done, message)| wire::AdminResult {
                name: (*name).into(),
                done: *done,
                message: (*message).into(),
            })
            .collect();
        wire::AdminControlReply { results }
    }

    // Goal: done lines on standard output, refusals on standard error and a
    // failure; mbdrestart in LSF's reconfig-like words.
    #[test]
    fn order_lines() {
        let answer = reply(&[
            ("a", true, "Close <a> ...... done"),
            ("b", false, "Close <b> ...... User permission denied"),
        ]);
        assert_eq!(
            format_orders(wire::AdminAction::HostClose, &answer),
            ("Close <a> ...... done\n".into(), "Close <b> ...... User permission denied\n".into(), false)
        );
        let restart = reply(&[("mbatchd", true, "MBD restart initiated")]);
        assert_eq!(
            format_orders(wire::AdminAction::MbdRestart, &restart),
            (
                "Checking configuration files ...\nNo errors found.\n\nMBD restart initiated\n".into(),
                String::new(),
                true
            )
        );
        let broken = reply(&[("mbatchd", false, "lsb.queues(3): bad line")]);
        let (_, err, ok) = format_orders(wire::AdminAction::MbdRestart, &broken);
        assert!(!ok && err.ends_with("lsb.queues(3): bad line\n\nThere are fatal errors.\n"), "{err}");
        assert!(!format_orders(wire::AdminAction::QueueOpen, &reply(&[])).2);
    }

    // Goal: LSF's labels and order, the totals summed from their parts, and one
    // `name value` line per counter.
    #[test]
    fn showstatus_layout() {
        let status = wire::StatusReply {
            cluster_name: "lavacore".into(),
            master_name: "h0".into(),
            pid: 4242,
            started_at: 0,
            hosts: [2, 1, 0, 1],
            jobs: [3, 2, 1, 10],
            active_users: 2,
            counters: vec![wire::StatusCounter { name: "log.fsyncs".into(), value: 7 }],
        };
        let text = format_showstatus(&status, &TimeZone::UTC);
        assert_eq!(
            text,
            "LSF runtime mbatchd information\n   Cluster name:           lavacore\n   Master name:            h0\n\n   \
             Number of servers:      4\n      Ok:                  2\n      Closed:              1\n      \
             Unreachable:         0\n      Unavailable:         1\n\n   Number of jobs:         16\n      \
             Running:             2\n      Suspended:           1\n      Pending:             3\n      \
             Finished:            10\n\n   Number of active users: 2\n\n   Latest mbatchd start:   \
             Thu Jan  1 00:00:00 1970\n   Active mbatchd PID:     4242\n\nCounters:\n   log.fsyncs                               7\n"
        );
    }
}
