//! The only unsafe code of mxfsd: registering a client socket with tokio's reactor for one
//! direction only (see `server/client_io.rs` for why), which tokio offers only as an unsafe
//! function.

#![allow(unsafe_code)]

use std::io;
use std::os::unix::net::UnixStream;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// `stream`, watched by the runtime for `interest` only. Must be called inside the runtime.
pub(crate) fn watch(stream: UnixStream, interest: Interest) -> io::Result<AsyncFd<UnixStream>> {
    // SAFETY: the AsyncFd owns `stream` from here on. A std UnixStream owns its descriptor:
    // it stays open, and `as_raw_fd` returns the same one, until the stream is dropped, which
    // happens only when the AsyncFd is dropped (after it deregistered the descriptor). Nothing
    // replaces the stream through `AsyncFd::get_mut`.
    unsafe { AsyncFd::register_with_interest(stream, interest) }.map_err(io::Error::from)
}
