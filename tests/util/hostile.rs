//! What the hostile-load tests (`tests/hostile_*.rs`) share: an attacker's idle connections,
//! the check that a daemon closed each by its deadline, and a daemon's resident memory.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::IO_TIMEOUT;

/// The time a new connection has to authenticate at every daemon (lava-net's gate).
pub const AUTH_DEADLINE: Duration = Duration::from_secs(5);
/// Slack on a deadline for a busy 2-core machine's timers (not a performance bound).
pub const SCHEDULING_SLACK: Duration = Duration::from_secs(3);

/// Opens up to `n` TCP connections to `addr` that never send a byte.
pub fn open_idle(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n).filter_map(|_| TcpStream::connect_timeout(&addr, IO_TIMEOUT).ok()).collect()
}

/// Whether the peer closed `stream` (end of file or reset), waiting at most `within`.
pub fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).expect("a read timeout");
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(error) => !matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

/// Asserts that the daemon closed every connection of `idle`, opened at `opened`, by its
/// deadline to authenticate (or sooner, to make room).
pub fn assert_closed_by_deadline(idle: &mut [TcpStream], opened: Instant) {
    let deadline = opened + AUTH_DEADLINE + SCHEDULING_SLACK;
    for stream in idle {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(10));
        assert!(closed_within(stream, left), "an idle connection was still open after its deadline");
    }
}

/// A process's resident memory, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the process's status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .expect("a VmRSS line")
}
