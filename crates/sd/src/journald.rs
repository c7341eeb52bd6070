//! Logging to the journal when a daemon runs under systemd (feature `journald`).
//!
//! A daemon started by systemd has its standard error connected to the journal
//! ([`crate::stderr_is_journal`]). Writing formatted lines there works, but every line then
//! carries two timestamps and loses its level; the journal's native protocol
//! (`tracing-journald`) keeps the level as the entry's priority and each `tracing` field as
//! a journal field (`journalctl -o verbose` shows them), and `journalctl -p warning` works.
//!
//! It never installs anything when standard error is not the journal: the caller keeps its
//! own logger (a terminal, a log file, a test's capture).

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// If standard error is connected to the journal, installs the global `tracing` subscriber
/// for it and returns true; otherwise installs nothing and returns false (the caller then
/// installs its usual logger).
///
/// The filter is `RUST_LOG` if set, else `default_filter` (e.g. `"info"`). Entries go
/// through the journal's native socket; should that socket not open, they go to standard
/// error as plain lines without timestamps or colours (the journal adds the time). A
/// subscriber already installed (a test) is left in place.
pub fn try_init(default_filter: &str) -> bool {
    if !crate::stderr_is_journal() {
        return false;
    }
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    match tracing_journald::layer() {
        Ok(layer) => {
            let _installed = tracing_subscriber::registry().with(filter).with(layer).try_init();
        }
        Err(error) => {
            let _installed = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .without_time()
                .with_target(false)
                .try_init();
            tracing::warn!("the journal's socket cannot be opened ({error}); logging plain lines to stderr");
        }
    }
    true
}

/// A daemon's logging: to the journal under systemd ([`try_init`]), else plain lines
/// with timestamps to standard error (never standard output: it is not a log). The
/// filter is `RUST_LOG` if set, else `default_filter`. A subscriber already installed
/// (a test) is left in place.
pub fn init(default_filter: &str) {
    if try_init(default_filter) {
        return;
    }
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let _installed = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The daemon's [`crate::Notifier`] from the environment; a malformed `NOTIFY_SOCKET` or
/// `WATCHDOG_USEC` is logged and the daemon runs without notifying systemd.
pub fn notifier() -> crate::Notifier {
    crate::Notifier::from_env().unwrap_or_else(|error| {
        tracing::warn!("{error}; not notifying systemd");
        crate::Notifier::disabled()
    })
}
