//! `bqueues [-w | -l] [queue ...]`: the queues as mbatchd sees them
//! (QUEUE_QUERY), in the classic layouts (docs/commands.md,
//! "bqueues"; LSF's `bqueues` reference):
//!
//! ```text
//! QUEUE_NAME      PRIO STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN  SUSP
//! normal           30   Open:Active      -    -    -    -     0     0     0     0
//! ```
//!
//! Queues are listed highest priority first. STATUS is `Open` or `Closed`
//! (does the queue accept jobs: `badmin qclose`/`qopen`), then `:Active` or
//! `:Inact` (are its jobs dispatched: `badmin qinact`/`qact`). MAX, JL/U, JL/P and JL/H are
//! the queue's slot limits, `-` for none; JL/P (`PJOB_LIMIT`, slots per CPU) may be a fraction
//! and is printed with one decimal, as LSF prints it. Counts are slots, as LSF counts them: PEND holds PEND and PSUSP (the
//! jobs `bjobs -p` lists), SUSP the suspended started jobs (SSUSP, USUSP),
//! NJOBS all of them. A name longer than 15 characters is cut to `*` and its
//! end (LSF's TRUNC_STR) unless `-w` is given.
//!
//! `-l` prints LSF's block per queue: `QUEUE: name`, the description line
//! (`This is the default queue.` appended for the default one), the
//! PARAMETERS/STATISTICS table with NICE and the SSUSP, USUSP and RSV
//! columns, the limit blocks when set ([`crate::format::limit_blocks`]; `DEFAULT LIMITS:`
//! and `MAXIMUM LIMITS:` when a limit has a default), `SCHEDULING POLICIES:` when the queue
//! has one, then `USERS:` and
//! `HOSTS:` (`all` when unrestricted), and `PRE_EXEC:`, `POST_EXEC:` and `JOB_STARTER:`
//! when set.
//!
//! A name that is not a queue is reported on standard error, LSF's way, and
//! makes the exit status 255.

use std::process::ExitCode;

use lava_batch_wire::{self as wire, Operation};

use crate::client;
use crate::format::{limit_blocks, truncate_star};
use crate::term::{self, Term};

const USAGE: &str = "Usage: bqueues [-h] [-V] [-w | -l] [queue_name ...]\n";

/// LSF's STATUS of a queue: `Open:Active`, `Closed:Active`, `Open:Inact`, `Closed:Inact`.
fn status(queue: &wire::QueueInfo) -> &'static str {
    match (queue.closed, queue.inactive) {
        (false, false) => "Open:Active",
        (true, false) => "Closed:Active",
        (false, true) => "Open:Inact",
        (true, true) => "Closed:Inact",
    }
}

/// A queue limit: `-` for none.
fn limit(slots: u32) -> String {
    if slots == wire::QUEUE_UNLIMITED { "-".to_owned() } else { slots.to_string() }
}

/// `PJOB_LIMIT` (thousandths of a slot per CPU) as LSF prints JL/P, one decimal: `-` for none.
fn cpu_limit(milli: u32) -> String {
    if milli == wire::QUEUE_UNLIMITED { "-".to_owned() } else { format!("{:.1}", f64::from(milli) / 1000.0) }
}

/// The table for `queues`; `wide` is `-w`.
pub fn format_bqueues(queues: &[wire::QueueInfo], wide: bool) -> String {
    let mut out =
        "QUEUE_NAME      PRIO STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN  SUSP\n".to_owned();
    for queue in queues {
        let name = if wide { queue.name.as_str().into() } else { truncate_star(&queue.name, 15) };
        out.push_str(&format!(
            "{name:<15} {:>3}   {:<14}{:>4} {:>4} {:>4} {:>4} {:>5} {:>5} {:>5} {:>5}\n",
            queue.priority,
            status(queue),
            limit(queue.max_slots),
            limit(queue.user_slot_limit),
            cpu_limit(queue.processor_slot_limit_milli),
            limit(queue.host_slot_limit),
            queue.n_jobs,
            queue.n_pend,
            queue.n_run,
            queue.n_susp
        ));
    }
    out
}

/// One line of the PARAMETERS/STATISTICS table of `-l` (header or values).
fn parameters_row(cells: &[String; 13]) -> String {
    let [prio, nice, status, max, jl_u, jl_p, jl_h, n_jobs, pend, run, ssusp, ususp, rsv] = cells;
    format!(
        "{prio:>4} {nice:>4} {status:<14}{max:>5}{jl_u:>5}{jl_p:>5}{jl_h:>5}{n_jobs:>6}{pend:>6}{run:>6}{ssusp:>6}{ususp:>6}{rsv:>5}\n"
    )
}

/// The `-l` blocks for `queues`.
pub fn format_bqueues_long(queues: &[wire::QueueInfo]) -> String {
    let mut out = String::new();
    for queue in queues {
        out.push_str(&format!("\nQUEUE: {}\n", queue.name));
        let description =
            if queue.description.is_empty() { "No description provided." } else { queue.description.trim() };
        let default = if queue.default { " This is the default queue." } else { "" };
        out.push_str(&format!("  -- {description}{default}\n\n"));
        out.push_str("PARAMETERS/STATISTICS\n");
        let header = [
            "PRIO", "NICE", "STATUS", "MAX", "JL/U", "JL/P", "JL/H", "NJOBS", "PEND", "RUN", "SSUSP",
            "USUSP", "RSV",
        ];
        out.push_str(&parameters_row(&header.map(str::to_owned)));
        out.push_str(&parameters_row(&[
            queue.priority.to_string(),
            queue.nice.to_string(),
            status(queue).to_owned(),
            limit(queue.max_slots),
            limit(queue.user_slot_limit),
            cpu_limit(queue.processor_slot_limit_milli),
            limit(queue.host_slot_limit),
            queue.n_jobs.to_string(),
            queue.n_pend.to_string(),
            queue.n_run.to_string(),
            queue.n_ssusp.to_string(),
            queue.n_ususp.to_string(),
            queue.n_reserved.to_string(),
        ]));
        let defaults =
            limit_blocks(queue.default_run_limit_s, queue.default_mem_limit_kb, &queue.default_limits);
        let maxima = limit_blocks(queue.run_limit_s, queue.mem_limit_kb, &queue.limits);
        if defaults.is_empty() {
            out.push_str(&maxima);
        } else {
            out.push_str(&format!("\nDEFAULT LIMITS:{defaults}\nMAXIMUM LIMITS:{maxima}"));
        }
        let policies: Vec<&str> = [
            (wire::QUEUE_POLICY_FAIRSHARE, "FAIRSHARE"),
            (wire::QUEUE_POLICY_EXCLUSIVE, "EXCLUSIVE"),
            (wire::QUEUE_POLICY_NO_INTERACTIVE, "NO_INTERACTIVE"),
            (wire::QUEUE_POLICY_ONLY_INTERACTIVE, "ONLY_INTERACTIVE"),
        ]
        .into_iter()
        .filter(|(bit, _)| queue.policies & bit != 0)
        .map(|(_, word)| word)
        .collect();
        if !policies.is_empty() {
            out.push_str(&format!("\nSCHEDULING POLICIES:  {}\n", policies.join("  ")));
        }
        let names = |names: &[String]| if names.is_empty() { "all".to_owned() } else { names.join(" ") };
        out.push_str(&format!("\nUSERS: {}\n", names(&queue.users)));
        out.push_str(&format!("HOSTS:  {}\n", names(&queue.hosts)));
        if !queue.pre_exec.is_empty() {
            out.push_str(&format!("PRE_EXEC:  {}\n", queue.pre_exec));
        }
        if !queue.post_exec.is_empty() {
            out.push_str(&format!("POST_EXEC:  {}\n", queue.post_exec));
        }
        if !queue.job_starter.is_empty() {
            out.push_str(&format!("JOB_STARTER:  {}\n", queue.job_starter));
        }
    }
    out
}

/// Runs `bqueues` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("bqueues", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let (mut wide, mut long, mut queues) = (false, false, Vec::new());
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
                term.err(&format!("bqueues: illegal option -- {}\n{USAGE}", flag.trim_start_matches('-')));
                return false;
            }
            queue => queues.push(queue.to_owned()),
        }
    }
    if wide && long {
        term.err(&format!("bqueues: -w and -l cannot be combined\n{USAGE}"));
        return false;
    }
    let ops = (Operation::QueueQuery, Operation::QueueQueryReply);
    let Some(reply) = client::read_from_mbatchd::<_, wire::QueueQueryReply>(
        term,
        "bqueues",
        ops,
        &wire::QueueQuery { queues },
    ) else {
        return false;
    };
    if !reply.queues.is_empty() {
        term.out(&if long {
            format_bqueues_long(&reply.queues)
        } else {
            format_bqueues(&reply.queues, wide)
        });
    }
    for name in &reply.not_found {
        term.err(&format!("{name}: No such queue\n"));
    }
    reply.not_found.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str, priority: u32, counts: [u32; 4]) -> wire::QueueInfo {
        wire::QueueInfo {
            name: name.into(),
            priority,
            n_jobs: counts.iter().sum(),
            n_pend: counts[0],
            n_run: counts[1],
            n_susp: counts[2] + counts[3],
            n_ssusp: counts[2],
            n_ususp: counts[3],
            ..wire::QueueInfo::default()
        }
    }

    // Goal: the classic header and columns, byte for byte as LavaLite prints them
    // (LavaLite 0.1.2's row), LSF's cut of long names,
    // the four queue states and limits where the queue has them.
    #[test]
    fn classic_layout() {
        let closed = wire::QueueInfo {
            closed: true,
            max_slots: 10,
            user_slot_limit: 2,
            processor_slot_limit_milli: 1500,
            host_slot_limit: 1,
            ..queue("closed", 20, [1, 0, 0, 0])
        };
        let queues = [
            queue("normal", 30, [0, 0, 0, 0]),
            queue("a_very_long_queue_name", 5, [12, 1234, 1, 2]),
            closed,
            wire::QueueInfo { inactive: true, ..queue("inact", 1, [0, 0, 0, 0]) },
            wire::QueueInfo { closed: true, inactive: true, ..queue("off", 1, [0, 0, 0, 0]) },
        ];
        assert_eq!(
            format_bqueues(&queues, false),
            "QUEUE_NAME      PRIO STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN  SUSP\n\
             normal           30   Open:Active      -    -    -    -     0     0     0     0\n\
             *ong_queue_name   5   Open:Active      -    -    -    -  1249    12  1234     3\n\
             closed           20   Closed:Active   10    2  1.5    1     1     1     0     0\n\
             inact             1   Open:Inact       -    -    -    -     0     0     0     0\n\
             off               1   Closed:Inact     -    -    -    -     0     0     0     0\n"
        );
        assert!(format_bqueues(&queues, true).contains("\na_very_long_queue_name   5   Open:Active"));
    }

    // Goal: -l prints LSF's block per queue: name, description (default queue
    // marked), the parameters table with SSUSP/USUSP/RSV, the limits that are
    // set, USERS and HOSTS, PRE_EXEC and POST_EXEC when set.
    #[test]
    fn long_layout() {
        let mut normal = queue("normal", 30, [2, 1, 0, 1]);
        normal.default = true;
        normal.description = "For normal jobs".into();
        let mut night = queue("night", 40, [0, 0, 0, 0]);
        night.nice = 20;
        night.users = vec!["alice".into(), "bob".into()];
        night.hosts = vec!["hostA".into()];
        night.run_limit_s = 600;
        night.mem_limit_kb = 100 * 1024;
        night.user_slot_limit = 1;
        night.processor_slot_limit_milli = 2000;
        night.pre_exec = "/bin/check >> /tmp/pre.out".into();
        night.post_exec = "echo done".into();
        night.job_starter = "/usr/bin/time %USRCMD".into();
        night.default_run_limit_s = 300;
        night.policies = wire::QUEUE_POLICY_FAIRSHARE | wire::QUEUE_POLICY_NO_INTERACTIVE;
        normal.policies = wire::QUEUE_POLICY_EXCLUSIVE;
        assert_eq!(
            format_bqueues_long(&[night, normal]),
            "\n\
             QUEUE: night\n\
             \x20 -- No description provided.\n\
             \n\
             PARAMETERS/STATISTICS\n\
             PRIO NICE STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN SSUSP USUSP  RSV\n\
             \x20 40   20 Open:Active       -    1  2.0    -     0     0     0     0     0    0\n\
             \n\
             DEFAULT LIMITS:\n\
             \x20RUNLIMIT\n\
             \x205.0 min\n\
             \n\
             MAXIMUM LIMITS:\n\
             \x20RUNLIMIT\n\
             \x2010.0 min\n\
             \n\
             \x20MEMLIMIT\n\
             \x20 100 M\n\
             \n\
             SCHEDULING POLICIES:  FAIRSHARE  NO_INTERACTIVE\n\
             \n\
             USERS: alice bob\n\
             HOSTS:  hostA\n\
             PRE_EXEC:  /bin/check >> /tmp/pre.out\n\
             POST_EXEC:  echo done\n\
             JOB_STARTER:  /usr/bin/time %USRCMD\n\
             \n\
             QUEUE: normal\n\
             \x20 -- For normal jobs This is the default queue.\n\
             \n\
             PARAMETERS/STATISTICS\n\
             PRIO NICE STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN SSUSP USUSP  RSV\n\
             \x20 30    0 Open:Active       -    -    -    -     4     2     1     0     1    0\n\
             \n\
             SCHEDULING POLICIES:  EXCLUSIVE\n\
             \n\
             USERS: all\n\
             HOSTS:  all\n"
        );
    }
}
