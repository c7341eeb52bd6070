//! Peer credentials of a local Unix-socket client, from the kernel (SO_PEERCRED through
//! tokio), which is how a daemon learns who runs a command without taking its word for it.
//! The credentials are those of the process when it connected.

use std::io;

use tokio::net::UnixStream;

/// Who is at the other end of a Unix socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    /// Effective uid of the peer process.
    pub uid: u32,
    /// Effective gid of the peer process.
    pub gid: u32,
    /// Pid of the peer process, where the kernel reports it (Linux always does).
    pub pid: Option<u32>,
}

/// Reads the peer's credentials from the kernel.
pub fn peer_cred(stream: &UnixStream) -> io::Result<PeerCred> {
    let cred = stream.peer_cred()?;
    Ok(PeerCred { uid: cred.uid(), gid: cred.gid(), pid: cred.pid().and_then(|pid| u32::try_from(pid).ok()) })
}
