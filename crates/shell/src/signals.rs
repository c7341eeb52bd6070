//! [`Signals`]: the process signals a daemon's event loop listens to, as one
//! [`ShellSignal`] at a time. SIGTERM and SIGINT ask for a clean stop
//! ([`ShellSignal::Stop`], with the signal's name for the daemon's log), SIGHUP for a reload
//! ([`ShellSignal::Reload`]).
//!
//! It owns the registration of the handlers, which replaces the signals' default action
//! (once registered, SIGHUP no longer ends the process), and turns them into one value the
//! loop matches on. It never decides what a stop or a reload means, never logs and never
//! notifies systemd: each daemon does that in its own words (mbatchd reopens its log file on
//! SIGHUP, the others say there is nothing to reload; [`crate::readiness`] tells systemd).

use std::io;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// What a signal asks of the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShellSignal {
    /// SIGTERM or SIGINT: stop cleanly. The name (`"SIGTERM"`, `"SIGINT"`) is for the log.
    Stop(&'static str),
    /// SIGHUP: reload (whatever the daemon reloads, maybe nothing).
    Reload,
}

/// The registered handlers; see the module doc.
#[derive(Debug)]
pub struct Signals {
    /// SIGTERM and SIGINT; `None` when they keep their default action.
    stop: Option<(Signal, Signal)>,
    hangup: Signal,
}

impl Signals {
    /// Registers SIGTERM, SIGINT and SIGHUP. Must be called inside a tokio runtime (with
    /// its I/O driver), before the daemon says it is ready: a signal sent from then on is
    /// kept until [`Signals::next`] takes it.
    pub fn register() -> io::Result<Signals> {
        Ok(Signals {
            stop: Some((signal(SignalKind::terminate())?, signal(SignalKind::interrupt())?)),
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// Registers SIGHUP alone: SIGTERM and SIGINT keep their default action (the process
    /// ends at once and [`ShellSignal::Stop`] never comes), for a daemon with nothing to
    /// finish before it ends (lim).
    pub fn hangup_only() -> io::Result<Signals> {
        Ok(Signals { stop: None, hangup: signal(SignalKind::hangup())? })
    }

    /// The next signal received. Cancel-safe: it may be a branch of `tokio::select!`, and a
    /// signal that arrives while another branch wins is taken by the next call.
    pub async fn next(&mut self) -> ShellSignal {
        match &mut self.stop {
            Some((terminate, interrupt)) => tokio::select! {
                _ = terminate.recv() => ShellSignal::Stop("SIGTERM"),
                _ = interrupt.recv() => ShellSignal::Stop("SIGINT"),
                _ = self.hangup.recv() => ShellSignal::Reload,
            },
            None => {
                self.hangup.recv().await;
                ShellSignal::Reload
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{ShellSignal, Signals};

    /// Sends `signal` to this process (the test binary), as `kill -SIG <pid>` would.
    fn raise(signal: &str) {
        let status = std::process::Command::new("kill")
            .args([format!("-{signal}"), std::process::id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    async fn next_within(signals: &mut Signals) -> ShellSignal {
        tokio::time::timeout(Duration::from_secs(10), signals.next()).await.expect("a signal within 10 s")
    }

    // Goal: each registered signal comes out as what it asks for, in the order sent, and a
    // signal sent while nobody waits is kept for the next call. One test sends them all:
    // tests run in parallel threads of one process, and SIGHUP, SIGTERM and SIGINT are that
    // process's (once registered, none of them ends the test binary).
    #[tokio::test]
    async fn each_signal_comes_out_as_what_it_asks_for() {
        let mut signals = Signals::register().expect("register");
        raise("HUP");
        assert_eq!(next_within(&mut signals).await, ShellSignal::Reload);
        raise("TERM");
        assert_eq!(next_within(&mut signals).await, ShellSignal::Stop("SIGTERM"));
        raise("INT");
        assert_eq!(next_within(&mut signals).await, ShellSignal::Stop("SIGINT"));
        // Nothing else is pending.
        let idle = tokio::time::timeout(Duration::from_millis(50), signals.next()).await;
        assert!(idle.is_err(), "no further signal: {idle:?}");
    }
}
