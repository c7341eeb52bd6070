//! `bqueues [-w] [queue ...]`: the queues as mbatchd sees them (QUEUE_QUERY), in
//! LavaLite 0.1.2's classic layout (../shared/research/lavalite.md section 2.4):
//!
//! ```text
//! QUEUE_NAME      PRIO STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN  SUSP
//! normal           30   Open:Active      -    -    -    -     0     0     0     0
//! ```
//!
//! Queues are listed highest priority first. STATUS is `Open` or `Closed`
//! (`badmin qclose`), then `Active` or `Inact` (`badmin qinact`); MAX, JL/U, JL/P and JL/H are `-`
//! because the scheduler enforces no queue job limit yet. Counts are slots, as
//! `bjobs` shows the jobs (SUSP includes PSUSP). A name longer than 15
//! characters is cut to `*` and its end (LSF's TRUNC_STR) unless `-w` is given.
//! `-l` is not supported yet and says so. A name that is not a queue is
//! reported on standard error, LSF's way, and makes the exit status 255.

use std::process::ExitCode;

use lava_batch_wire::{self as wire, Operation};

use crate::client;
use crate::format::truncate_star;
use crate::term::{self, Term};

const USAGE: &str = "Usage: bqueues [-h] [-V] [-w] [queue_name ...]\n";

/// The table for `queues`; `wide` is `-w`.
pub fn format_bqueues(queues: &[wire::QueueInfo], wide: bool) -> String {
    let mut out =
        "QUEUE_NAME      PRIO STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN  SUSP\n".to_owned();
    for queue in queues {
        let name = if wide { queue.name.clone() } else { truncate_star(&queue.name, 15) };
        out.push_str(&format!(
            "{name:<15} {:>3}   {:<14}{:>4} {:>4} {:>4} {:>4} {:>5} {:>5} {:>5} {:>5}\n",
            queue.priority,
            status(queue),
            "-",
            "-",
            "-",
            "-",
            queue.n_jobs,
            queue.n_pend,
            queue.n_run,
            queue.n_susp
        ));
    }
    out
}

/// Runs `bqueues` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("bqueues", run)
}

fn run(term: &mut Term, args: Vec<String>) -> bool {
    let (mut wide, mut queues) = (false, Vec::new());
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
            "-l" => {
                term.err("bqueues: option -l is not supported by LavaCore yet\n");
                return false;
            }
            flag if flag.starts_with('-') => {
                term.err(&format!("bqueues: illegal option -- {}\n{USAGE}", flag.trim_start_matches('-')));
                return false;
            }
            queue => queues.push(queue.to_owned()),
        }
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
        term.out(&format_bqueues(&reply.queues, wide));
    }
    for name in &reply.not_found {
        term.err(&format!("{name}: No such queue\n"));
    }
    reply.not_found.is_empty()
}

/// LSF's STATUS of a queue: `Open:Active`, `Closed:Active`, `Open:Inact`, `Closed:Inact`.
fn status(queue: &wire::QueueInfo) -> &'static str {
    match (queue.closed, queue.inactive) {
        (false, false) => "Open:Active",
        (true, false) => "Closed:Active",
        (false, true) => "Open:Inact",
        (true, true) => "Closed:Inact",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(name: &str, priority: u32, counts: [u32; 3]) -> wire::QueueInfo {
        wire::QueueInfo {
            name: name.into(),
            priority,
            default: false,
            hosts: vec![],
            n_jobs: counts.iter().sum(),
            n_pend: counts[0],
            n_run: counts[1],
            n_susp: counts[2],
            closed: false,
            inactive: false,
        }
    }

    // Goal: the classic header and columns, byte for byte as LavaLite prints them
    // (the row of research/lavalite.md section 2.4), and LSF's cut of long names.
    #[test]
    fn classic_layout() {
        let queues = [queue("normal", 30, [0, 0, 0]), queue("a_very_long_queue_name", 5, [12, 1234, 3])];
        assert_eq!(
            format_bqueues(&queues, false),
            "QUEUE_NAME      PRIO STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN  SUSP\n\
             normal           30   Open:Active      -    -    -    -     0     0     0     0\n\
             *ong_queue_name   5   Open:Active      -    -    -    -  1249    12  1234     3\n"
        );
        assert!(format_bqueues(&queues, true).contains("\na_very_long_queue_name   5   Open:Active"));
        let closed = wire::QueueInfo { closed: true, inactive: true, ..queue("night", 1, [0, 0, 0]) };
        assert!(format_bqueues(&[closed], false).contains("\nnight             1   Closed:Inact     -"));
    }
}
