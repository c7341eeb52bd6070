//! What `bmod`, `bswitch`, `btop` and `bbot` share: one JOB_CONTROL request
//! and its answer, one line per job in the words mbatchd chose (LSF's), the
//! successes on standard output and the refusals on standard error. The exit
//! status is 0 only when every job was changed.

use lava_batch_wire::{self as wire, Operation};

use crate::client::{self, Client};
use crate::term::Term;

/// What the job-control commands' parsers return: a request, `None` for `-h`/`-V`
/// (or any option that only prints), or a message and whether the usage follows.
pub type Parsed = crate::term::Parsed<wire::JobControlRequest>;

/// Carries out `parsed` for command `name`: sends the request, or prints the
/// version (`-V`) or `usage`, or the error (with the usage when it asks for it).
pub fn run(term: &mut Term, name: &str, usage: &str, args: &[String], parsed: Parsed) -> bool {
    match crate::term::options(term, name, usage, args, parsed) {
        Ok(request) => send(term, &request),
        Err(ok) => ok,
    }
}

/// Sends `request` and prints the answer; whether every job was changed.
pub fn send(term: &mut Term, request: &wire::JobControlRequest) -> bool {
    let reply: wire::JobControlReply = match client::load_config()
        .and_then(|config| Client::from_env(&config))
        .and_then(|mut client| client.call(Operation::JobControl, Operation::JobControlReply, request))
    {
        Ok(reply) => reply,
        Err(error) => {
            term.err(&format!("{error}\n"));
            return false;
        }
    };
    print(term, &reply.results)
}

/// Prints one line per result; whether every job was changed.
pub fn print(term: &mut Term, results: &[wire::JobControlResult]) -> bool {
    let mut all_done = !results.is_empty();
    for result in results {
        if result.done {
            term.out(&format!("{}\n", result.message));
        } else {
            all_done = false;
            term.err(&format!("{}\n", result.message));
        }
    }
    all_done
}

/// Parses the job operands of a command that acts on named jobs only (no `0`).
pub fn job_operands(operands: &[String]) -> Result<Vec<wire::WireJobRef>, String> {
    let (jobs, all) = crate::jobid::parse_all(operands)?;
    if all {
        return Err("0: Illegal job ID.".to_owned());
    }
    Ok(jobs)
}
