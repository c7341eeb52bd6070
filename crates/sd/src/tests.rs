//! Unit tests: every notification is received by a real Unix datagram socket.

use std::ffi::OsStr;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use super::*;

/// A listening socket in a temporary folder, standing in for systemd's.
struct Listener {
    _dir: tempfile::TempDir,
    path: PathBuf,
    socket: UnixDatagram,
}

fn listener() -> Listener {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&path).expect("bind");
    socket.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    Listener { _dir: dir, path, socket }
}

fn receive(socket: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = socket.recv(&mut buf).expect("a datagram arrives");
    String::from_utf8(buf[..n].to_vec()).expect("text")
}

fn notifier_for(listener: &Listener, watchdog: Option<Duration>) -> Notifier {
    Notifier::new(Some(Address::Path(listener.path.clone())), watchdog).expect("notifier")
}

// Goal: READY, STOPPING and a status arrive as one datagram each, in the protocol's words.
#[test]
fn ready_and_stopping_arrive_as_single_datagrams() {
    let l = listener();
    let n = notifier_for(&l, None);
    assert!(n.is_enabled());
    n.ready("serving on port 6881").expect("sent");
    assert_eq!(receive(&l.socket), "READY=1\nSTATUS=serving on port 6881\n");
    n.stopping("SIGTERM").expect("sent");
    assert_eq!(receive(&l.socket), "STOPPING=1\nSTATUS=SIGTERM\n");
    n.status("two\nlines").expect("sent");
    assert_eq!(receive(&l.socket), "STATUS=two lines\n");
}

// Goal: RELOADING carries a MONOTONIC_USEC that is the monotonic clock, not the wall clock.
#[test]
fn reloading_carries_the_monotonic_time() {
    let l = listener();
    let n = notifier_for(&l, None);
    let before = monotonic_usec();
    n.reloading("reopening the log").expect("sent");
    let after = monotonic_usec();
    let message = receive(&l.socket);
    let mut lines = message.lines();
    assert_eq!(lines.next(), Some("RELOADING=1"));
    let usec: u64 = lines
        .next()
        .and_then(|line| line.strip_prefix("MONOTONIC_USEC="))
        .and_then(|value| value.parse().ok())
        .expect("MONOTONIC_USEC=<number>");
    assert!(before <= usec && usec <= after, "{before} <= {usec} <= {after}");
    assert_eq!(lines.next(), Some("STATUS=reopening the log"));
    assert_eq!(lines.next(), None);
}

// Goal: `@name` in NOTIFY_SOCKET reaches a socket of the abstract namespace.
#[test]
fn abstract_socket_is_reached() {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("lava-sd-test-{}-{:?}", std::process::id(), std::thread::current().id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("addr");
    let socket = UnixDatagram::bind_addr(&addr).expect("bind abstract");
    socket.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let value = format!("@{name}");
    let n = Notifier::from_values(Some(OsStr::new(&value)), None, None, 1).expect("notifier");
    assert_eq!(n.address(), Some(&Address::Abstract(name.into_bytes())));
    n.notify(&[State::Ready]).expect("sent");
    assert_eq!(receive(&socket), "READY=1\n");
}

// Goal: without NOTIFY_SOCKET nothing is sent and nothing fails; the watchdog stays off.
#[test]
fn without_a_socket_everything_is_a_no_op() {
    let mut n = Notifier::from_values(None, Some(OsStr::new("1000000")), None, 7).expect("notifier");
    assert!(!n.is_enabled());
    assert_eq!(n.watchdog_interval(), None);
    n.ready("x").expect("no-op");
    assert!(!n.tick(Instant::now()).expect("no-op"));
}

// Goal: a socket nobody listens on is an error naming it (the daemon logs it and goes on).
#[test]
fn a_missing_socket_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nobody");
    let n = Notifier::new(Some(Address::Path(path.clone())), None).expect("notifier");
    let error = n.ready("x").expect_err("nobody listens");
    assert!(error.to_string().contains(&path.display().to_string()), "{error}");
}

// Goal: NOTIFY_SOCKET values that are not a path or an abstract name are refused by name.
#[test]
fn malformed_addresses_are_refused() {
    for value in ["", "@", "relative/path", "vsock:2:1234"] {
        let error = parse_address(OsStr::new(value)).expect_err(value);
        assert_eq!(error.variable, NOTIFY_SOCKET, "{value}");
    }
    assert_eq!(parse_address(OsStr::new("/run/x")), Ok(Address::Path(PathBuf::from("/run/x"))));
}

// Goal: the watchdog is armed for this pid only, with systemd's interval.
#[test]
fn watchdog_interval_follows_usec_and_pid() {
    let usec = Some(OsStr::new("30000000"));
    assert_eq!(parse_watchdog(usec, None, 42), Ok(Some(Duration::from_secs(30))));
    assert_eq!(parse_watchdog(usec, Some(OsStr::new("42")), 42), Ok(Some(Duration::from_secs(30))));
    assert_eq!(parse_watchdog(usec, Some(OsStr::new("43")), 42), Ok(None));
    assert_eq!(parse_watchdog(None, Some(OsStr::new("42")), 42), Ok(None));
    assert_eq!(
        parse_watchdog(Some(OsStr::new("soon")), None, 42).map_err(|e| e.variable),
        Err(WATCHDOG_USEC)
    );
    assert_eq!(parse_watchdog(Some(OsStr::new("0")), None, 42).map_err(|e| e.variable), Err(WATCHDOG_USEC));
    assert_eq!(parse_watchdog(usec, Some(OsStr::new("me")), 42).map_err(|e| e.variable), Err(WATCHDOG_PID));
}

// Goal: tick pets at once, then not again before half the interval, then again after it.
#[test]
fn tick_pets_at_half_the_interval() {
    let l = listener();
    let mut n = notifier_for(&l, Some(Duration::from_secs(10)));
    assert_eq!(n.pet_interval(), Some(Duration::from_secs(5)));
    let start = Instant::now();
    assert!(n.tick(start).expect("sent"));
    assert_eq!(receive(&l.socket), "WATCHDOG=1\n");
    assert!(!n.tick(start + Duration::from_secs(4)).expect("not due"));
    assert!(n.tick(start + Duration::from_secs(5)).expect("due"));
    assert_eq!(receive(&l.socket), "WATCHDOG=1\n");
    assert!(!n.tick(start + Duration::from_secs(9)).expect("not due"));
    // Nothing else was sent in between.
    l.socket.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 64];
    assert!(l.socket.recv(&mut buf).is_err());
}

// Goal: JOURNAL_STREAM matches exactly the device and inode it names.
#[test]
fn journal_stream_names_one_file() {
    let file = tempfile::tempfile().expect("file");
    let metadata = file.metadata().expect("metadata");
    let (dev, ino) = (metadata.dev(), metadata.ino());
    let value = format!("{dev}:{ino}");
    assert!(journal_stream_matches(OsStr::new(&value), dev, ino));
    assert!(!journal_stream_matches(OsStr::new(&value), dev, ino + 1));
    assert!(!journal_stream_matches(OsStr::new(&value), dev + 1, ino));
    assert!(!journal_stream_matches(OsStr::new("garbage"), dev, ino));
    assert!(!journal_stream_matches(OsStr::new(""), dev, ino));
}

// Goal: the datagram lists the assignments in the order given.
#[test]
fn encode_keeps_the_order() {
    let text = encode(&[State::Status("a"), State::Watchdog, State::Ready]);
    assert_eq!(text, "STATUS=a\nWATCHDOG=1\nREADY=1\n");
}
