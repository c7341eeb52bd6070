//! The accept loop: [`serve`] runs each accepted TCP connection on its own task, so that a
//! slow, hostile or crashing peer costs its own connection and nothing else.
//!
//! The caller owns the listener (tests bind `127.0.0.1:0` and read the port) and the
//! shutdown future; shutdown is structural: when the future resolves, accepting stops and
//! the connection tasks are aborted (their sockets close) before `serve` returns. A handler
//! that must finish in-flight work cleanly watches its own signal. The number of live
//! connections is bounded; beyond it, new connections wait in the kernel's backlog.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Default bound on connections served at once.
pub const CONNECTIONS_MAX_DEFAULT: usize = 1024;
/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_ERROR_PAUSE_MS: u64 = 100;

/// Serves connections with `handler` until `shutdown` resolves, at most
/// [`CONNECTIONS_MAX_DEFAULT`] at once.
pub async fn serve<H, F>(listener: TcpListener, handler: H, shutdown: impl Future)
where
    H: FnMut(TcpStream, SocketAddr) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    serve_bounded(listener, handler, shutdown, CONNECTIONS_MAX_DEFAULT).await;
}

/// [`serve`] with an explicit bound on connections served at once (at least one).
pub async fn serve_bounded<H, F>(
    listener: TcpListener,
    mut handler: H,
    shutdown: impl Future,
    connections_max: usize,
) where
    H: FnMut(TcpStream, SocketAddr) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let permits = Arc::new(Semaphore::new(connections_max.max(1)));
    let mut tasks = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            permit = Arc::clone(&permits).acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        // Reap finished connections; a handler that panicked affects no one else.
        while tasks.try_join_next().is_some() {}
        match accepted {
            Ok((stream, peer_addr)) => {
                let connection = handler(stream, peer_addr);
                tasks.spawn(async move {
                    connection.await;
                    drop(permit);
                });
            }
            Err(_) => tokio::select! {
                _ = &mut shutdown => break,
                _ = tokio::time::sleep(Duration::from_millis(ACCEPT_ERROR_PAUSE_MS)) => {}
            },
        }
    }
    tasks.shutdown().await;
}
