//! Signal names for `bkill -s`, and what each one asks mbatchd to do.
//!
//! Names are accepted with or without the `SIG` prefix, in any case; numbers
//! from 1 to [`SIGNAL_NUMBER_MAX`]. Numbers are Linux's (the daemons run
//! there). As in LSF, three signals are actions rather than plain signals:
//! KILL is the kill sequence (SIGINT, SIGTERM, SIGKILL spaced by
//! JOB_TERMINATE_INTERVAL; what plain `bkill` does), STOP suspends and CONT
//! resumes (also for pending jobs). The verb of the message follows the
//! signal, as in Lava's `prtSignaled`: "terminated", "stopped", "resumed",
//! else "signaled".

use lava_batch_wire::SignalAction;

/// Largest signal number accepted (Linux's SIGRTMAX).
pub const SIGNAL_NUMBER_MAX: u32 = 64;

/// Linux's signal names and numbers, in number order; aliases after their first name.
pub const SIGNALS: &[(&str, u32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("IOT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("KILL", 9),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("STKFLT", 16),
    ("CHLD", 17),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("VTALRM", 26),
    ("PROF", 27),
    ("WINCH", 28),
    ("IO", 29),
    ("POLL", 29),
    ("PWR", 30),
    ("SYS", 31),
];

const SIGKILL: u32 = 9;
const SIGCONT: u32 = 18;
const SIGSTOP: u32 = 19;

/// The signal number `text` names, or LSF's `TEXT: Illegal signal value`.
pub fn parse(text: &str) -> Result<u32, String> {
    let illegal = || format!("{text}: Illegal signal value");
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<u32>() {
            Ok(number) if (1..=SIGNAL_NUMBER_MAX).contains(&number) => Ok(number),
            _ => Err(illegal()),
        };
    }
    let upper = text.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS.iter().find(|(known, _)| *known == name).map(|(_, number)| *number).ok_or_else(illegal)
}

/// What `bkill -s NUMBER` asks for, and the verb its success message uses.
pub fn action(number: u32) -> (SignalAction, &'static str) {
    match number {
        SIGKILL => (SignalAction::Terminate, "terminated"),
        SIGSTOP => (SignalAction::Stop, "stopped"),
        SIGCONT => (SignalAction::Continue, "resumed"),
        other => (SignalAction::Signal(other), "signaled"),
    }
}

/// The list `bkill -l` prints: every first name, in number order.
pub fn names_line() -> String {
    let mut names: Vec<&str> = Vec::new();
    let mut last = 0;
    for (name, number) in SIGNALS {
        if *number != last {
            names.push(name);
            last = *number;
        }
    }
    names.join(" ") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: names with or without SIG, any case, and numbers parse; the rest
    // gets LSF's message.
    #[test]
    fn signal_names_and_numbers_parse() {
        for (text, number) in [
            ("KILL", 9),
            ("sigterm", 15),
            ("SigInt", 2),
            ("stop", 19),
            ("CONT", 18),
            ("usr1", 10),
            ("12", 12),
        ] {
            assert_eq!(parse(text), Ok(number), "{text}");
        }
        assert_eq!(parse("64"), Ok(64));
        for bad in ["0", "65", "SIG", "BOGUS", "", "-9", "9x"] {
            assert_eq!(parse(bad), Err(format!("{bad}: Illegal signal value")), "{bad}");
        }
    }

    // Goal: KILL, STOP and CONT are LSF's actions; any other is a plain signal.
    #[test]
    fn three_signals_are_actions() {
        assert_eq!(action(9), (SignalAction::Terminate, "terminated"));
        assert_eq!(action(19), (SignalAction::Stop, "stopped"));
        assert_eq!(action(18), (SignalAction::Continue, "resumed"));
        assert_eq!(action(15), (SignalAction::Signal(15), "signaled"));
        assert_eq!(action(20), (SignalAction::Signal(20), "signaled"));
    }

    // Goal: `bkill -l` lists each number once.
    #[test]
    fn the_list_has_no_aliases() {
        let line = names_line();
        assert!(line.starts_with("HUP INT QUIT ILL TRAP ABRT BUS "), "{line}");
        assert!(!line.contains("IOT") && !line.contains("POLL"), "{line}");
    }
}
