//! `bwait`: wait until a job dependency condition holds (LSF 10.1's command).
//!
//! ```text
//! bwait -w "wait_condition" [-t timeout] [-r rereg_interval]
//! bwait -h | -V
//! ```
//!
//! The condition is a `bsub -w` expression (`done(12) && ended(build)`; a bare job means
//! `done(job)`), and a job name means the caller's most recent job of that name when
//! `bwait` starts. `bwait` prints nothing and exits 0 once the condition holds. It exits
//! 255 with a message on standard error when the condition can never hold (a job it needs
//! DONE ended EXIT: `Wait condition is never satisfied`), when `-t` minutes pass first
//! (`Wait condition is not satisfied within N minute(s)`), and when mbatchd refuses the
//! condition with `bsub -w`'s words (`Dependency condition syntax error`, `No matching job
//! found`). `-t` and `-r` take 1 to 525,600 minutes, as in LSF.
//!
//! mbatchd decides (WAIT_QUERY, docs/protocols/batch.md, "bwait"): the first question
//! resolves the jobs the condition names and the answer gives them back by id, with the
//! submission number they were resolved at; `bwait` asks again with both, quickly at first,
//! then every [`POLL_MS_MAX`] ms, so a job submitted later under the same name never
//! changes what it waits for. Where LSF's mbatchd keeps the condition and `bwait`
//! registers it again every `-r` minutes, this `bwait` asks again itself: `-r` is checked
//! and has no other effect. Each question goes through the ordinary client, so a master
//! restarting or failing over is waited out (`LAVA_RETRY_SECS`).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use lava_batch_wire::{self as wire, Operation};

use crate::args::{self, Item, OptSpec, Order};
use crate::client::{self, Client};
use crate::term::{self, Term};

/// The options the command accepts; its man page (lava-man) is checked against them.
pub const SPECS: &[OptSpec] =
    &[OptSpec::flag("h"), OptSpec::flag("V"), OptSpec::value("w"), OptSpec::value("t"), OptSpec::value("r")];

/// The command's usage (standard error).
pub const USAGE: &str =
    "Usage: bwait -w \"wait_condition\" [-t timeout] [-r rereg_interval]\n       bwait -h | -V\n";

/// Most minutes `-t` and `-r` take (one year), as in LSF.
pub const MINUTES_MAX: u64 = 525_600;

/// The first pause between two questions, doubled up to [`POLL_MS_MAX`].
const POLL_MS_FIRST: u64 = 100;
/// The longest pause between two questions.
pub const POLL_MS_MAX: u64 = 2000;

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The condition (`-w`).
    pub condition: String,
    /// `-t`: give up after this long.
    pub timeout: Option<Duration>,
}

fn minutes(option: &str, value: &str) -> Result<u64, (String, bool)> {
    value.parse::<u64>().ok().filter(|m| (1..=MINUTES_MAX).contains(m)).ok_or_else(|| {
        (
            format!("-{option} {value}: the value must be an integer between 1 and {MINUTES_MAX} minutes"),
            false,
        )
    })
}

/// Parses the arguments: `Ok(None)` for `-h`/`-V`; an error is the message to print (with
/// the usage when `true`).
pub fn parse_args(args: &[String]) -> term::Parsed<Options> {
    let items = args::scan(args, SPECS, Order::Permute).map_err(|error| (error.0, true))?;
    let (mut condition, mut timeout) = (None, None);
    for item in items {
        match item {
            Item::Operand(word) => return Err((format!("{word}: unexpected argument"), true)),
            Item::Opt("w", Some(value)) => condition = Some(value),
            Item::Opt("t", Some(value)) => timeout = Some(Duration::from_secs(minutes("t", &value)? * 60)),
            Item::Opt("r", Some(value)) => {
                minutes("r", &value)?;
            }
            Item::Opt(_, _) => return Ok(None),
        }
    }
    let condition = condition.ok_or_else(|| ("-w \"wait_condition\" is required".to_owned(), true))?;
    if condition.trim().is_empty() {
        return Err(("the wait condition is empty".to_owned(), true));
    }
    Ok(Some(Options { condition, timeout }))
}

/// Asks until the condition holds (`Ok`), can never hold, is refused, or `timeout` passes
/// (`Err` with the message for standard error).
fn wait(client: &mut Client, options: &Options) -> Result<(), String> {
    let started = Instant::now();
    let mut query = wire::WaitQuery { condition: options.condition.clone(), registered: 0 };
    let mut pause_ms = POLL_MS_FIRST;
    loop {
        let reply: wire::WaitQueryReply = client
            .call(Operation::WaitQuery, Operation::WaitQueryReply, &query)
            .map_err(|error| error.to_string())?;
        match reply.code {
            wire::WAIT_HOLDS => return Ok(()),
            wire::WAIT_NEVER => return Err("Wait condition is never satisfied".to_owned()),
            wire::WAIT_NOT_YET => {}
            _ => return Err(reply.message),
        }
        if query.registered == 0 {
            query = wire::WaitQuery { condition: reply.condition, registered: reply.registered };
        }
        std::thread::sleep(next_pause(Duration::from_millis(pause_ms), started.elapsed(), options.timeout)?);
        pause_ms = (pause_ms * 2).min(POLL_MS_MAX);
    }
}

/// The pause before the next question: `pause`, cut to what is left of `timeout` after
/// `elapsed`; the timeout's message once nothing is left.
fn next_pause(pause: Duration, elapsed: Duration, timeout: Option<Duration>) -> Result<Duration, String> {
    let Some(timeout) = timeout else { return Ok(pause) };
    let left = timeout.saturating_sub(elapsed);
    if left.is_zero() {
        let n = timeout.as_secs() / 60;
        let unit = if n == 1 { "minute" } else { "minutes" };
        return Err(format!("Wait condition is not satisfied within {n} {unit}"));
    }
    Ok(pause.min(left))
}

/// Runs `bwait` with this process's arguments.
pub fn main() -> ExitCode {
    term::main_with("bwait", |term: &mut Term, args: Vec<String>| {
        let options = match term::options(term, "bwait", USAGE, &args, parse_args(&args)) {
            Ok(options) => options,
            Err(ok) => return ok,
        };
        let waited = client::load_config()
            .and_then(|config| Client::from_env(&config))
            .map_err(|error| error.to_string())
            .and_then(|mut client| wait(&mut client, &options));
        match waited {
            Ok(()) => true,
            Err(message) => {
                term.err(&format!("{message}\n"));
                false
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> term::Parsed<Options> {
        parse_args(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    // Goal: -t cuts the last pause to the time left, then ends the wait with its message.
    #[test]
    fn the_timeout_ends_the_wait() {
        let (second, minute) = (Duration::from_secs(1), Duration::from_secs(60));
        assert_eq!(next_pause(2 * second, 100 * minute, None), Ok(2 * second));
        assert_eq!(next_pause(2 * second, 30 * second, Some(minute)), Ok(2 * second));
        assert_eq!(next_pause(2 * second, 59 * second, Some(minute)), Ok(second));
        assert_eq!(
            next_pause(2 * second, minute, Some(minute)),
            Err("Wait condition is not satisfied within 1 minute".to_owned())
        );
        assert_eq!(
            next_pause(2 * second, 3 * minute, Some(2 * minute)),
            Err("Wait condition is not satisfied within 2 minutes".to_owned())
        );
    }

    // Goal: -w is required, -t and -r take 1 to 525600 minutes, anything else is a usage
    // error caught before anything is sent.
    #[test]
    fn options_are_lsf_s() {
        assert_eq!(
            parse(&["-w", "done(1)", "-t", "2", "-r", "10"]),
            Ok(Some(Options { condition: "done(1)".into(), timeout: Some(Duration::from_secs(120)) }))
        );
        assert_eq!(parse(&["-wended(x)"]), Ok(Some(Options { condition: "ended(x)".into(), timeout: None })));
        assert_eq!(parse(&["-h"]), Ok(None));
        assert!(matches!(parse(&[]), Err((_, true))));
        assert!(matches!(parse(&["-w", " "]), Err((_, true))));
        assert!(matches!(parse(&["-w", "done(1)", "extra"]), Err((_, true))));
        assert!(matches!(parse(&["-x"]), Err((_, true))));
        for bad in ["0", "525601", "x", "-1"] {
            assert!(matches!(parse(&["-w", "1", "-t", bad]), Err((_, false))), "-t {bad}");
            assert!(matches!(parse(&["-w", "1", "-r", bad]), Err((_, false))), "-r {bad}");
        }
        assert_eq!(
            parse(&["-w", "1", "-t", "525600"]).map(|o| o.and_then(|o| o.timeout)),
            Ok(Some(Duration::from_secs(525_600 * 60)))
        );
    }
}
