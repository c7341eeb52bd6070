//! One local client's connection on the Unix socket (the framing is in [`crate::client`]): a
//! reader that hands every complete request to the main loop, and a writer that sends the
//! answers the main loop queues.
//!
//! The socket is watched by epoll for reading only. A Unix socket signals room to write each
//! time its peer takes in something it sent, so a socket also watched for writing (as a
//! `tokio::net::UnixStream` is) would wake this daemon once more for every answer a client
//! reads, for nothing: answers are small and almost always fit at once. The writer writes
//! straight to the non-blocking socket and watches for room (on a duplicate of the
//! descriptor) only while a write would block.

use std::io::{self, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;

use super::{ClientSlot, Event, SEND_QUEUE_FRAMES_MAX};
use crate::client::{CLIENT_BODY_BYTES_MAX, Request};

/// Bytes asked of the kernel per read: many requests at once.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Serves one client connection until it closes, sends a malformed request or stalls
/// in the middle of a request.
pub(super) async fn run_client(
    stream: tokio::net::UnixStream,
    client: u64,
    events: mpsc::Sender<Event>,
    slot: ClientSlot,
) {
    let access = Arc::clone(&slot.0);
    let (uid, may_lock) = match lava_net::peer_cred(&stream) {
        Ok(cred) => (cred.uid, access.may_lock(&cred)),
        Err(error) => {
            tracing::warn!(%error, "no peer credentials; client refused");
            return;
        }
    };
    let (reader, writer) = match split(stream) {
        Ok(halves) => halves,
        Err(error) => {
            tracing::warn!(%error, "client socket set-up failed; client refused");
            return;
        }
    };
    let (tx, rx) = mpsc::channel::<Vec<u8>>(SEND_QUEUE_FRAMES_MAX);
    if events.send(Event::ClientUp { client, tx, uid, may_lock }).await.is_err() {
        return;
    }
    let writer_task = tokio::spawn(write_answers(writer, rx));
    let ended = read_requests(&reader, client, &events, access.client_timeout).await;
    match ended {
        Ended::Closed => {}
        Ended::Failed(error) => tracing::debug!(client, %error, "client connection ended"),
        Ended::Slow => {
            access.counters.slow_request();
            tracing::info!(client, "client did not finish its request in time; connection closed");
        }
    }
    writer_task.abort();
    let _gone = events.send(Event::ClientDown { client }).await;
    drop(slot);
}

/// The socket registered for reading, and a duplicate of it for the writer.
fn split(stream: tokio::net::UnixStream) -> io::Result<(AsyncFd<UnixStream>, UnixStream)> {
    // Still non-blocking after leaving tokio's registration.
    let stream = stream.into_std()?;
    let writer = stream.try_clone()?;
    Ok((crate::sys::watch(stream, Interest::READABLE)?, writer))
}

/// Why the reading of a client connection stopped.
enum Ended {
    /// The client closed it, or sent a malformed request, or the daemon is stopping.
    Closed,
    /// A read failed, or a request was too large.
    Failed(io::Error),
    /// A request begun was not finished within the client timeout.
    Slow,
}

/// Reads requests and hands each to the main loop, in order. A client may stay idle between
/// requests (holding its locks) as long as it likes; once it starts one, the rest must follow
/// within `client_timeout`.
async fn read_requests(
    reader: &AsyncFd<UnixStream>,
    client: u64,
    events: &mpsc::Sender<Event>,
    client_timeout: Duration,
) -> Ended {
    let mut buffer: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut begun_at: Option<tokio::time::Instant> = None;
    loop {
        let mut taken = 0;
        loop {
            let body = match next_body(&buffer[taken..]) {
                Ok(Some(body)) => body,
                Ok(None) => break,
                Err(error) => return Ended::Failed(error),
            };
            taken += 4 + body.len();
            let request = Request::decode(body);
            let malformed = request.is_none();
            if events.send(Event::ClientRequest { client, request }).await.is_err() || malformed {
                return Ended::Closed;
            }
        }
        if taken > 0 {
            buffer.drain(..taken);
            // What is left is the start of a request that came after those.
            begun_at = None;
        }
        let read = read_some(reader, &mut chunk);
        let got = if buffer.is_empty() {
            begun_at = None;
            read.await
        } else {
            let deadline = *begun_at.get_or_insert_with(|| tokio::time::Instant::now() + client_timeout);
            match tokio::time::timeout_at(deadline, read).await {
                Ok(got) => got,
                Err(_) => return Ended::Slow,
            }
        };
        match got {
            Ok(0) => return Ended::Closed,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            Err(error) => return Ended::Failed(error),
        }
    }
}

/// The body of the first request in `bytes` if it is all there; an error if its length is
/// above [`CLIENT_BODY_BYTES_MAX`].
fn next_body(bytes: &[u8]) -> io::Result<Option<&[u8]>> {
    let Some(length) = bytes.get(..4) else { return Ok(None) };
    let length = u32::from_be_bytes(length.try_into().expect("4 bytes")) as usize;
    if length > CLIENT_BODY_BYTES_MAX {
        return Err(io::Error::other(format!("request of {length} bytes")));
    }
    Ok(bytes.get(4..4 + length))
}

/// One read of what the socket holds (0: end of file), waiting until there is something.
async fn read_some(reader: &AsyncFd<UnixStream>, chunk: &mut [u8]) -> io::Result<usize> {
    loop {
        let mut guard = reader.readable().await?;
        match guard.try_io(|socket| socket.get_ref().read(chunk)) {
            Ok(Ok(n)) => {
                // Less than asked for: the socket was emptied (a stream socket's read takes
                // everything queued up to the buffer's size), so the next read would only find
                // nothing; epoll tells when more comes.
                if n > 0 && n < chunk.len() {
                    guard.clear_ready();
                }
                return Ok(n);
            }
            Ok(Err(error)) if error.kind() == io::ErrorKind::Interrupted => {}
            Ok(Err(error)) => return Err(error),
            Err(_would_block) => {}
        }
    }
}

/// Sends the answers queued by the main loop; all those queued at once go in one write.
async fn write_answers(writer: UnixStream, mut rx: mpsc::Receiver<Vec<u8>>) {
    let mut out = Vec::new();
    while let Some(body) = rx.recv().await {
        push_frame(&mut out, &body);
        while let Ok(body) = rx.try_recv() {
            push_frame(&mut out, &body);
        }
        if write_all(&writer, &out).await.is_err() {
            break;
        }
        out.clear();
    }
}

fn push_frame(out: &mut Vec<u8>, body: &[u8]) {
    out.extend_from_slice(&u32::try_from(body.len()).expect("bodies are small").to_be_bytes());
    out.extend_from_slice(body);
}

/// Writes all of `bytes` to the non-blocking socket; only when it is full is the socket
/// watched for room, through a registration of a duplicate descriptor that ends with the call.
async fn write_all(writer: &UnixStream, bytes: &[u8]) -> io::Result<()> {
    let mut written = 0;
    let mut room: Option<AsyncFd<UnixStream>> = None;
    while written < bytes.len() {
        let result = match &room {
            None => (&*writer).write(&bytes[written..]),
            Some(watched) => {
                let mut guard = watched.writable().await?;
                match guard.try_io(|socket| socket.get_ref().write(&bytes[written..])) {
                    Ok(result) => result,
                    Err(_would_block) => continue,
                }
            }
        };
        match result {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock && room.is_none() => {
                room = Some(crate::sys::watch(writer.try_clone()?, Interest::WRITABLE)?);
            }
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{LockMode, frame};

    // Goal: an answer larger than the socket can hold is delivered whole and in order: the
    // writer waits for room (the only path that watches the socket for writing, beside the
    // reader's registration of the same socket) instead of failing or dropping bytes.
    // Method: 4 MiB (far above a Unix socket's buffer) to a peer that reads only from another
    // thread, at its own pace, through the halves `split` makes.
    #[tokio::test(flavor = "current_thread")]
    async fn write_all_waits_for_room_and_keeps_the_order() {
        let (ours, theirs) = tokio::net::UnixStream::pair().expect("socket pair");
        let theirs = theirs.into_std().expect("a std socket");
        theirs.set_nonblocking(false).expect("blocking");
        let (reader, writer) = split(ours).expect("split");
        let bytes: Vec<u8> = (0..4 << 20).map(|i: u32| (i % 251) as u8).collect();
        let peer = std::thread::spawn(move || {
            let mut got = Vec::new();
            (&theirs).read_to_end(&mut got).expect("read until the end");
            got
        });
        write_all(&writer, &bytes).await.expect("written");
        drop((reader, writer));
        assert!(peer.join().expect("peer thread") == bytes);
    }

    // Goal: requests that arrive together are all handed over, in order, and one split across
    // writes is put together; a request above the size limit ends the connection with an error.
    // Method: two requests and the start of a third in one write, the rest in a second one;
    // then a length field above CLIENT_BODY_BYTES_MAX.
    #[tokio::test(flavor = "current_thread")]
    async fn read_requests_takes_every_request_of_a_read_and_joins_split_ones() {
        let (ours, theirs) = UnixStream::pair().expect("socket pair");
        ours.set_nonblocking(true).expect("non-blocking");
        let reader = crate::sys::watch(ours, Interest::READABLE).expect("registered");
        let lock = Request::Lock {
            resource: "r".to_owned(),
            mode: LockMode::Ex,
            noqueue: false,
            norevoke: false,
            timeout_ms: 0,
        };
        let mut first = frame(&lock.encode());
        first.extend(frame(&Request::Unlock { handle: 7 }.encode()));
        let status = frame(&Request::Status.encode());
        first.extend_from_slice(&status[..2]);
        (&theirs).write_all(&first).expect("first write");
        let (events, mut rx) = mpsc::channel(16);
        let reading = read_requests(&reader, 1, &events, Duration::from_secs(3600));
        let writing = async {
            // The second part only once the first has been handed over.
            let mut handed = Vec::new();
            for _ in 0..2 {
                handed.push(rx.recv().await.expect("an event"));
            }
            (&theirs).write_all(&status[2..]).expect("second write");
            handed.push(rx.recv().await.expect("an event"));
            (&theirs).write_all(&u32::MAX.to_be_bytes()).expect("oversized length");
            handed
        };
        let (ended, handed) = tokio::join!(reading, writing);
        let requests: Vec<Option<Request>> = handed
            .into_iter()
            .map(|event| match event {
                Event::ClientRequest { client: 1, request } => request,
                _ => panic!("not a request of client 1"),
            })
            .collect();
        assert_eq!(requests, [Some(lock), Some(Request::Unlock { handle: 7 }), Some(Request::Status)]);
        assert!(
            matches!(ended, Ended::Failed(error) if error.to_string().contains("request of 4294967295 bytes"))
        );
    }
}
