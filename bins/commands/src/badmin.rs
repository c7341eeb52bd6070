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
//! The other LSF subcommands (`mbdrestart`, `hclose`, `hopen`, `qclose`,
//! `qopen`, `qact`, `qinact`) are recognised and refused with a message saying
//! they are not supported yet (exit 255); anything else is LSF's `Invalid command`.

use std::process::ExitCode;

use jiff::tz::TimeZone;
use lava_batch_wire::{self as wire, Operation};

use crate::client;
use crate::term::{self, Term};

const USAGE: &str = "Usage: badmin [-h] [-V] showstatus | reconfig\n";

/// LSF subcommands LavaCore does not serve yet.
const NOT_YET: [&str; 7] = ["mbdrestart", "hclose", "hopen", "qclose", "qopen", "qact", "qinact"];

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
         \n\
         Counters:\n",
        status.cluster_name,
        status.master_name,
        ok + closed + unreach + unavail,
        pend + run + susp + finished,
        status.active_users,
        status.pid,
    );
    for counter in &status.counters {
        out.push_str(&format!("   {:<40} {}\n", counter.name, counter.value));
    }
    out
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
        Some(name) if NOT_YET.contains(&name) => {
            term.err(&format!("badmin: {name} is not supported by LavaCore yet\n"));
            return false;
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
