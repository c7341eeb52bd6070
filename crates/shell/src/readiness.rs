//! [`Readiness`]: what a daemon tells systemd (`Type=notify`) about itself, over
//! `lava-sd`'s [`Notifier`], in the one pattern every daemon follows:
//! - [`Readiness::status`] (`STATUS=`) while it starts or as its outlook changes;
//! - [`Readiness::ready`] (`READY=1`) at the moment it serves (its port or ready file is
//!   written);
//! - [`Readiness::pet`] (`WATCHDOG=1`, at most every half `WatchdogSec=`) from its event
//!   loop's timer, never from a thread of its own, so that a wedged loop stops petting and
//!   systemd restarts the daemon;
//! - [`Readiness::reloading`] (`RELOADING=1`) then [`Readiness::ready`] around a reload;
//! - [`Readiness::stopping`] (`STOPPING=1`) when an orderly stop begins.
//!
//! It owns only this: sending, and logging a notification that could not be sent as a
//! warning. It never stops or delays the daemon over a failed notification (systemd notices
//! a missing READY or WATCHDOG on its own), never decides when the daemon is ready or what
//! its status says, and outside systemd (no `NOTIFY_SOCKET`) sends nothing.

use std::time::{Duration, Instant};

use lava_sd::Notifier;

/// A daemon's notifications to systemd; see the module doc.
#[derive(Debug)]
pub struct Readiness {
    notifier: Notifier,
}

impl Readiness {
    /// The notifications this process's environment asks for (`NOTIFY_SOCKET`,
    /// `WATCHDOG_USEC`); a malformed environment is logged and nothing is sent. Call it once
    /// logging is set up, so that the warning is seen.
    pub fn from_env() -> Readiness {
        Readiness { notifier: lava_sd::journald::notifier() }
    }

    /// Notifications through `notifier` (a test's, or [`Notifier::disabled`]).
    pub fn new(notifier: Notifier) -> Readiness {
        Readiness { notifier }
    }

    /// The watchdog interval systemd set, if the watchdog is armed for this process.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.notifier.watchdog_interval()
    }

    /// `STATUS=<text>` alone.
    pub fn status(&self, text: &str) {
        warn_unsent(self.notifier.status(text));
    }

    /// `READY=1` with the status line `text`: the daemon serves (again, after a reload).
    pub fn ready(&self, text: &str) {
        warn_unsent(self.notifier.ready(text));
    }

    /// `RELOADING=1` with the status line `text`; [`Readiness::ready`] follows when done.
    pub fn reloading(&self, text: &str) {
        warn_unsent(self.notifier.reloading(text));
    }

    /// `STOPPING=1` with the status line `text`.
    pub fn stopping(&self, text: &str) {
        warn_unsent(self.notifier.stopping(text));
    }

    /// Pets the watchdog if half its interval has passed since the last pet. Call it from
    /// the event loop's timer (at least once per half interval).
    pub fn pet(&mut self) {
        if let Err(error) = self.notifier.tick(Instant::now()) {
            tracing::warn!("systemd watchdog: {error}");
        }
    }
}

/// A notification that was not sent is a warning, never an error.
fn warn_unsent(sent: std::io::Result<()>) {
    if let Err(error) = sent {
        tracing::warn!("{error}");
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixDatagram;
    use std::time::Duration;

    use lava_sd::{Address, Notifier};

    use super::Readiness;

    fn received(socket: &UnixDatagram) -> Vec<String> {
        let mut all = Vec::new();
        let mut buffer = [0u8; 4096];
        while let Ok(n) = socket.recv(&mut buffer) {
            all.push(String::from_utf8_lossy(&buffer[..n]).into_owned());
        }
        all
    }

    // Goal: each call sends its state with its status line, the watchdog is petted once per
    // half interval however often the loop calls, and a notification to a socket that is
    // gone is a warning, not a failure.
    #[test]
    fn sends_the_pattern_and_pets_at_most_every_half_interval() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notify");
        let socket = UnixDatagram::bind(&path).expect("bind");
        socket.set_nonblocking(true).expect("nonblocking");
        let notifier = Notifier::new(Some(Address::Path(path.clone())), Some(Duration::from_secs(3600)))
            .expect("notifier");
        let mut readiness = Readiness::new(notifier);
        assert_eq!(readiness.watchdog_interval(), Some(Duration::from_secs(3600)));
        readiness.status("replaying");
        readiness.ready("serving");
        readiness.pet();
        readiness.pet();
        readiness.reloading("SIGHUP");
        readiness.stopping("SIGTERM: stopping");
        let all = received(&socket);
        assert_eq!(all.len(), 5, "{all:?}");
        assert_eq!(all[0], "STATUS=replaying\n");
        assert_eq!(all[1], "READY=1\nSTATUS=serving\n");
        assert_eq!(all[2], "WATCHDOG=1\n");
        assert!(all[3].starts_with("RELOADING=1\nMONOTONIC_USEC=") && all[3].ends_with("STATUS=SIGHUP\n"));
        assert_eq!(all[4], "STOPPING=1\nSTATUS=SIGTERM: stopping\n");
        drop(socket);
        std::fs::remove_file(&path).expect("remove the socket");
        readiness.ready("nobody listens");
        readiness.pet();
    }
}
