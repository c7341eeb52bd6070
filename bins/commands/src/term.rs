//! Printing and exiting: every line a command prints goes through [`Term`], so
//! that a closed standard output (`bjobs | head -1`) is not an error, while a
//! failed write of any other kind makes the command fail.
//!
//! LSF's commands exit with `exit(-1)`, i.e. status 255, on every failure;
//! [`EXIT_FAILURE`] keeps that number because scripts test for it.

use std::io::{self, Write};
use std::process::ExitCode;

/// The exit status of a failed command (LSF's `exit(-1)`).
pub const EXIT_FAILURE: u8 = 255;

/// The line `-V` prints (to standard error, as LSF does).
pub const VERSION_LINE: &str =
    concat!("LavaCore ", env!("CARGO_PKG_VERSION"), ", LSF-compatible batch commands\n");

/// The standard streams of a command.
#[derive(Debug, Default)]
pub struct Term {
    stdout_failed: bool,
}

impl Term {
    /// A terminal over this process's standard output and error.
    pub fn new() -> Term {
        Term::default()
    }

    /// Writes `text` to standard output. A closed pipe is ignored (the reader
    /// has what it wanted); any other error makes [`Term::exit`] fail.
    pub fn out(&mut self, text: &str) {
        let mut stdout = io::stdout().lock();
        match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::BrokenPipe => {}
            Err(_) => self.stdout_failed = true,
        }
    }

    /// Writes `text` to standard error; nothing useful can be done if that fails.
    pub fn err(&mut self, text: &str) {
        let _ = io::stderr().lock().write_all(text.as_bytes());
    }

    /// The exit code: success only if the command succeeded and its output was written.
    pub fn exit(&self, ok: bool) -> ExitCode {
        if ok && !self.stdout_failed { ExitCode::SUCCESS } else { ExitCode::from(EXIT_FAILURE) }
    }
}

/// The `main` of a command named `name`: runs `run` with this process's
/// arguments and exits with LSF's code (0 when `run` says it succeeded, else 255).
/// An argument that is not UTF-8 is reported as `NAME: problem` and fails.
pub fn main_with(name: &str, run: impl FnOnce(&mut Term, Vec<String>) -> bool) -> std::process::ExitCode {
    let mut term = Term::new();
    let ok = match arguments() {
        Ok(args) => run(&mut term, args),
        Err(message) => {
            term.err(&format!("{name}: {message}\n"));
            false
        }
    };
    term.exit(ok)
}

/// What a command's argument parser found: its options, `None` when it only prints
/// (`-h`, `-V`), or a message and whether the usage follows. [`options`] handles the last two.
pub type Parsed<T> = Result<Option<T>, (String, bool)>;

/// The options of `parsed`, or, when there are none to act on, `Err` with the command's
/// outcome after printing what was asked: the version (`-V` among `args`), the `usage`, or
/// `NAME: message` (with the usage when the parser asks for it).
pub fn options<T>(
    term: &mut Term,
    name: &str,
    usage: &str,
    args: &[String],
    parsed: Parsed<T>,
) -> Result<T, bool> {
    match parsed {
        Ok(Some(options)) => Ok(options),
        Ok(None) if args.iter().any(|a| a == "-V") => {
            term.err(VERSION_LINE);
            Err(true)
        }
        Ok(None) => {
            term.err(usage);
            Err(true)
        }
        Err((message, with_usage)) => {
            term.err(&format!("{name}: {message}\n"));
            if with_usage {
                term.err(usage);
            }
            Err(false)
        }
    }
}

/// This process's arguments after the program name, or the first one that is
/// not valid UTF-8 (every string of the protocol is UTF-8).
pub fn arguments() -> Result<Vec<String>, String> {
    std::env::args_os()
        .skip(1)
        .map(|arg| arg.into_string().map_err(|bad| format!("{}: argument is not valid UTF-8", bad.display())))
        .collect()
}
