//! lava-net: the framed TCP transport shared by the LavaCore daemons, with cluster-key
//! authentication, timeouts, reconnect backoff and local peer credentials.
//!
//! This is the only library crate that depends on tokio. Protocol crates hand it
//! opaque payloads and receive opaque payloads back; framing is `lava_xdr::frame`'s.
//!
//! # Map
//! - [`key`]: the cluster key file (hex text, mode 0600 or stricter) and its [`KeyId`].
//! - [`auth`]: [`Authenticator`], a pure, clock-injected HMAC-SHA256 sealer/opener with a
//!   timestamp window and a bounded replay cache; works on frames and on raw bytes.
//! - [`credential`]: [`Credential`], the MUNGE-style token a local daemon issues to vouch
//!   for a user whose uid it learned from the kernel.
//! - [`conn`]: [`FramedConn`] (frames over any async byte stream, with read/write/connect
//!   timeouts) and [`AuthConn`] (seals what it sends, opens what it receives, and closes on
//!   the first failure).
//! - [`backoff`]: [`Backoff`], exponential reconnect delays with seeded jitter, and
//!   [`reconnect`].
//! - [`server`]: [`serve`], one task per accepted connection until a shutdown future resolves.
//! - [`peer`]: [`PeerCred`], the uid/gid/pid of the process at the other end of a Unix socket.
//!
//! # Architecture invariants
//! - Nothing here knows an operation code or an XDR type: payloads are bytes.
//! - [`Authenticator`], [`Credential`] and [`Backoff`] read no clock and draw no randomness of
//!   their own: time (`now_ms`) and nonces/seeds are arguments. Only [`AuthConn`] and
//!   [`reconnect`] read the system clock and the OS random source.
//! - A peer that sends one bad frame (oversized, unauthenticated, replayed, late) loses its
//!   connection and nothing else: every connection runs on its own task.
//! - No unsafe code: SO_PEERCRED comes from tokio, file modes from std.
#![deny(missing_docs)]

pub mod auth;
pub mod backoff;
pub mod conn;
pub mod credential;
pub mod gate;
pub mod key;
pub mod peer;
pub mod server;

pub use auth::{AuthConfig, AuthError, Authenticator, KeyRing, Nonce, TRAILER_BYTES, system_now_ms};
pub use backoff::{Backoff, BackoffConfig, reconnect};
pub use conn::{AuthConn, ConnError, FramedConn, Timeouts};
pub use credential::{Audience, Credential, CredentialError};
pub use key::{ClusterKey, KeyError, KeyId};
pub use peer::{PeerCred, peer_cred};
pub use server::{serve, serve_bounded};
