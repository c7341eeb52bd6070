//! lava-sd: the daemons' side of systemd's service notification protocol, and the test of
//! whether standard error goes to the journal.
//!
//! Implements the protocol of `sd_notify(3)` and `systemd.service(5)` (`Type=notify`,
//! `WatchdogSec=`), written from those manual pages, not from libsystemd:
//! - a notification is one datagram of newline-separated `KEY=value` assignments sent to the
//!   Unix socket named by `NOTIFY_SOCKET` (a path, or an abstract name written `@name`);
//! - [`State::Ready`] (`READY=1`) once the daemon serves, [`State::Stopping`] (`STOPPING=1`)
//!   when it begins an orderly stop, [`State::Reloading`] (`RELOADING=1` with
//!   `MONOTONIC_USEC=`, the `CLOCK_MONOTONIC` time of the reload in microseconds) when it
//!   begins a reload (followed by `READY=1` when done), [`State::Watchdog`] (`WATCHDOG=1`)
//!   to pet the watchdog and [`State::Status`] (`STATUS=...`, one line) for `systemctl status`;
//! - the watchdog is armed when `WATCHDOG_USEC` is set and `WATCHDOG_PID`, if set, is this
//!   process's pid; the daemon pets it at half the interval ([`Notifier::tick`]);
//! - `JOURNAL_STREAM=DEV:INO` says which stream systemd connected to the journal: standard
//!   error goes to the journal when its `fstat` has that device and inode
//!   ([`stderr_is_journal`]). The variable alone is not enough: a child whose standard error
//!   was redirected inherits it.
//!
//! # What it owns and never does
//! It owns the encoding of notifications and the reading of the four environment variables.
//! It never changes the environment (edition 2024 makes that unsafe; a daemon that starts
//! children clears their environment itself, as sbatchd's shepherd does), never blocks (a
//! datagram send to a full or missing socket fails at once and is reported, not retried),
//! uses no async runtime and no unsafe code. Outside systemd (no `NOTIFY_SOCKET`) every call
//! is a no-op returning `Ok`.
//!
//! With the `journald` feature, [`journald::try_init`] installs a `tracing` subscriber that
//! writes to the journal's native protocol when standard error is the journal.

#![deny(missing_docs)]

#[cfg(feature = "journald")]
pub mod journald;

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The environment variable naming the notification socket.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";
/// The environment variable carrying the watchdog interval in microseconds.
pub const WATCHDOG_USEC: &str = "WATCHDOG_USEC";
/// The environment variable naming the process the watchdog is meant for.
pub const WATCHDOG_PID: &str = "WATCHDOG_PID";
/// The environment variable naming the stream connected to the journal (`DEV:INO`).
pub const JOURNAL_STREAM: &str = "JOURNAL_STREAM";

/// One assignment of a notification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State<'a> {
    /// `READY=1`: start-up (or a reload) is finished; the daemon serves.
    Ready,
    /// `STOPPING=1`: the daemon begins an orderly stop.
    Stopping,
    /// `RELOADING=1` and `MONOTONIC_USEC=<usec>`: the daemon begins reloading at this
    /// `CLOCK_MONOTONIC` time ([`monotonic_usec`]); send [`State::Ready`] when done.
    Reloading {
        /// `CLOCK_MONOTONIC` in microseconds when the reload began.
        monotonic_usec: u64,
    },
    /// `WATCHDOG=1`: the daemon is alive.
    Watchdog,
    /// `STATUS=<text>`: a one-line status for `systemctl status`; line breaks become blanks.
    Status(&'a str),
}

impl fmt::Display for State<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            State::Ready => f.write_str("READY=1"),
            State::Stopping => f.write_str("STOPPING=1"),
            State::Reloading { monotonic_usec } => {
                write!(f, "RELOADING=1\nMONOTONIC_USEC={monotonic_usec}")
            }
            State::Watchdog => f.write_str("WATCHDOG=1"),
            State::Status(text) => {
                f.write_str("STATUS=")?;
                for c in text.chars() {
                    fmt::Write::write_char(f, if c == '\n' || c == '\r' { ' ' } else { c })?;
                }
                Ok(())
            }
        }
    }
}

/// The datagram carrying `states`, in order, one assignment per line.
pub fn encode(states: &[State<'_>]) -> String {
    let mut out = String::new();
    for state in states {
        out.push_str(&state.to_string());
        out.push('\n');
    }
    out
}

/// `CLOCK_MONOTONIC` now, in microseconds (what `MONOTONIC_USEC` carries).
pub fn monotonic_usec() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let secs = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(now.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000).saturating_add(nanos / 1_000)
}

/// Where notifications go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// A socket in the file system (an absolute path).
    Path(PathBuf),
    /// A socket in the abstract namespace (`@name` in `NOTIFY_SOCKET`; the name without `@`).
    Abstract(Vec<u8>),
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Path(path) => write!(f, "{}", path.display()),
            Address::Abstract(name) => write!(f, "@{}", String::from_utf8_lossy(name)),
        }
    }
}

/// A value of the environment that does not follow the protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvError {
    /// The variable.
    pub variable: &'static str,
    /// Its value, lossily as text.
    pub value: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

impl fmt::Display for EnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={:?}: {}", self.variable, self.value, self.problem)
    }
}

impl std::error::Error for EnvError {}

fn env_error(variable: &'static str, value: &OsStr, problem: &'static str) -> EnvError {
    EnvError { variable, value: value.to_string_lossy().into_owned(), problem }
}

/// Parses `NOTIFY_SOCKET`: an absolute path, or `@name` for the abstract namespace.
pub fn parse_address(value: &OsStr) -> Result<Address, EnvError> {
    let bytes = value.as_bytes();
    match bytes.first() {
        Some(b'/') => Ok(Address::Path(PathBuf::from(value))),
        Some(b'@') if bytes.len() > 1 => Ok(Address::Abstract(bytes[1..].to_vec())),
        Some(b'@') => Err(env_error(NOTIFY_SOCKET, value, "an abstract socket needs a name after `@`")),
        None => Err(env_error(NOTIFY_SOCKET, value, "empty")),
        Some(_) => Err(env_error(
            NOTIFY_SOCKET,
            value,
            "neither an absolute path nor an abstract name (`@name`); vsock addresses are not supported",
        )),
    }
}

/// The watchdog interval `WATCHDOG_USEC` and `WATCHDOG_PID` give this process (`pid`), if
/// any: none without `WATCHDOG_USEC` or when `WATCHDOG_PID` names another process.
pub fn parse_watchdog(
    usec: Option<&OsStr>,
    watchdog_pid: Option<&OsStr>,
    pid: u32,
) -> Result<Option<Duration>, EnvError> {
    let Some(usec) = usec else { return Ok(None) };
    let micros: u64 = usec
        .to_str()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| env_error(WATCHDOG_USEC, usec, "not a number of microseconds"))?;
    if micros == 0 {
        return Err(env_error(WATCHDOG_USEC, usec, "zero"));
    }
    if let Some(value) = watchdog_pid {
        let target: u32 = value
            .to_str()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| env_error(WATCHDOG_PID, value, "not a process id"))?;
        if target != pid {
            return Ok(None);
        }
    }
    Ok(Some(Duration::from_micros(micros)))
}

/// Sends notifications to systemd, and pets the watchdog on time.
///
/// Built from the environment by [`Notifier::from_env`] in a daemon, or from explicit values
/// by [`Notifier::new`] in a test. A disabled notifier ([`Notifier::disabled`], or no
/// `NOTIFY_SOCKET`) sends nothing and reports success.
#[derive(Debug)]
pub struct Notifier {
    target: Option<(Address, UnixDatagram)>,
    watchdog: Option<Duration>,
    last_pet: Option<Instant>,
}

impl Notifier {
    /// A notifier that sends nothing (not run by systemd).
    pub fn disabled() -> Notifier {
        Notifier { target: None, watchdog: None, last_pet: None }
    }

    /// A notifier for `address` (none: disabled) with the watchdog `interval` (none: no
    /// watchdog; a watchdog without an address is never petted).
    pub fn new(address: Option<Address>, interval: Option<Duration>) -> io::Result<Notifier> {
        let target = match address {
            Some(address) => Some((address, UnixDatagram::unbound()?)),
            None => None,
        };
        let watchdog = if target.is_some() { interval } else { None };
        Ok(Notifier { target, watchdog, last_pet: None })
    }

    /// A notifier from the values of `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID`,
    /// for the process `pid`.
    pub fn from_values(
        notify_socket: Option<&OsStr>,
        watchdog_usec: Option<&OsStr>,
        watchdog_pid: Option<&OsStr>,
        pid: u32,
    ) -> Result<Notifier, NotifierError> {
        let address = notify_socket.map(parse_address).transpose()?;
        let interval = parse_watchdog(watchdog_usec, watchdog_pid, pid)?;
        Notifier::new(address, interval).map_err(NotifierError::Socket)
    }

    /// The notifier this process's environment describes.
    pub fn from_env() -> Result<Notifier, NotifierError> {
        let var = |name| std::env::var_os(name).filter(|value: &OsString| !value.is_empty());
        let (socket, usec, pid) = (var(NOTIFY_SOCKET), var(WATCHDOG_USEC), var(WATCHDOG_PID));
        Notifier::from_values(socket.as_deref(), usec.as_deref(), pid.as_deref(), std::process::id())
    }

    /// Whether notifications are sent (`NOTIFY_SOCKET` was set).
    pub fn is_enabled(&self) -> bool {
        self.target.is_some()
    }

    /// Where notifications go, if anywhere.
    pub fn address(&self) -> Option<&Address> {
        self.target.as_ref().map(|(address, _)| address)
    }

    /// The watchdog interval systemd set, if the watchdog is armed for this process.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog
    }

    /// How often [`Notifier::tick`] pets the watchdog: half its interval.
    pub fn pet_interval(&self) -> Option<Duration> {
        self.watchdog.map(|interval| interval / 2)
    }

    /// Sends `states` as one datagram. The error names the socket.
    pub fn notify(&self, states: &[State<'_>]) -> io::Result<()> {
        let Some((address, socket)) = &self.target else { return Ok(()) };
        let message = encode(states);
        let sent = match address {
            Address::Path(path) => socket.send_to(message.as_bytes(), path),
            Address::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                socket.send_to_addr(message.as_bytes(), &addr)
            }
        };
        match sent {
            Ok(n) if n == message.len() => Ok(()),
            Ok(n) => Err(io::Error::other(format!(
                "notification to {address} cut short: {n} of {} bytes sent",
                message.len()
            ))),
            Err(error) => Err(io::Error::new(error.kind(), format!("notification to {address}: {error}"))),
        }
    }

    /// `READY=1` with a status line.
    pub fn ready(&self, status: &str) -> io::Result<()> {
        self.notify(&[State::Ready, State::Status(status)])
    }

    /// `STOPPING=1` with a status line.
    pub fn stopping(&self, status: &str) -> io::Result<()> {
        self.notify(&[State::Stopping, State::Status(status)])
    }

    /// `RELOADING=1` (with `MONOTONIC_USEC` now) and a status line.
    pub fn reloading(&self, status: &str) -> io::Result<()> {
        self.notify(&[State::Reloading { monotonic_usec: monotonic_usec() }, State::Status(status)])
    }

    /// `STATUS=<status>` alone.
    pub fn status(&self, status: &str) -> io::Result<()> {
        self.notify(&[State::Status(status)])
    }

    /// Called from the daemon's event loop at every turn of its timer: sends `WATCHDOG=1`
    /// when the watchdog is armed and half its interval has passed since the last pet (or it
    /// was never petted). Returns whether it sent. Because only the loop calls it, a wedged
    /// loop stops petting and systemd restarts the daemon.
    pub fn tick(&mut self, now: Instant) -> io::Result<bool> {
        let Some(half) = self.pet_interval() else { return Ok(false) };
        if self.last_pet.is_some_and(|last| now.saturating_duration_since(last) < half) {
            return Ok(false);
        }
        self.notify(&[State::Watchdog])?;
        self.last_pet = Some(now);
        Ok(true)
    }
}

/// Why a notifier could not be built.
#[derive(Debug)]
pub enum NotifierError {
    /// A variable of the environment is malformed.
    Env(EnvError),
    /// The sending socket could not be created.
    Socket(io::Error),
}

impl fmt::Display for NotifierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotifierError::Env(error) => write!(f, "systemd notification: {error}"),
            NotifierError::Socket(error) => {
                write!(f, "systemd notification: cannot create a socket: {error}")
            }
        }
    }
}

impl std::error::Error for NotifierError {}

impl From<EnvError> for NotifierError {
    fn from(error: EnvError) -> NotifierError {
        NotifierError::Env(error)
    }
}

/// Whether `JOURNAL_STREAM`'s value (`DEV:INO`, decimal) names the file with device `dev`
/// and inode `ino`.
pub fn journal_stream_matches(value: &OsStr, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = value.to_str().and_then(|text| text.trim().split_once(':')) else { return false };
    d.parse() == Ok(dev) && i.parse() == Ok(ino)
}

/// Whether this process's standard error is connected to the journal: `JOURNAL_STREAM` is
/// set and names the device and inode that `fstat` gives for file descriptor 2.
pub fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os(JOURNAL_STREAM) else { return false };
    match stderr_dev_ino() {
        Ok((dev, ino)) => journal_stream_matches(&value, dev, ino),
        Err(_) => false,
    }
}

fn stderr_dev_ino() -> io::Result<(u64, u64)> {
    use std::os::fd::AsFd;
    let fd = io::stderr().as_fd().try_clone_to_owned()?;
    let metadata = std::fs::File::from(fd).metadata()?;
    Ok((metadata.dev(), metadata.ino()))
}

#[cfg(test)]
mod tests;
