//! sbatchd's credential socket under hostile load (docs/operations.md, "Connection limits"):
//! an ordinary local user tries to take the socket from everyone else, or to mint
//! credentials as fast as the socket will hand them out. Bounded in count and time.

mod util;

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use lava_batch_wire::{AUDIENCE_MBATCHD, BATCH_VERSION, CredentialRequest, Operation};
use lava_xdr::frame::{FrameHeader, HEADER_BYTES};
use util::{Cluster, Daemon, IO_TIMEOUT, STARTUP_TIMEOUT, wait_until};

const NOBODY_UID: u32 = 65534;
/// sbatchd's credentials per second per uid, and its burst (bins/sbatchd/src/credential.rs).
const CREDENTIALS_PER_SECOND: u32 = 200;
const CREDENTIALS_BURST: u32 = 1000;

/// sbatchd alone (its credential socket needs no mbatchd).
fn start() -> (Cluster, Daemon, PathBuf) {
    let mut cluster = Cluster::new();
    let ready = cluster.dir().join("run/sbatchd.ready");
    let args: Vec<&OsStr> =
        vec!["--host".as_ref(), "localhost".as_ref(), "--ready-file".as_ref(), ready.as_ref()];
    let mut sbatchd = cluster.spawn("sbatchd", Path::new(env!("CARGO_BIN_EXE_sbatchd")), &args);
    let socket = cluster.dir().join("run/lava.sock");
    wait_until("sbatchd's credential socket", STARTUP_TIMEOUT, || {
        assert!(sbatchd.is_running(), "sbatchd exited:\n{}", sbatchd.log());
        (ready.exists() && socket.exists()).then_some(())
    });
    (cluster, sbatchd, socket)
}

/// Asks for `n` credentials on one connection; the time it took, `None` if any failed.
fn credentials(socket: &Path, n: u32) -> Option<Duration> {
    let started = Instant::now();
    let mut stream = UnixStream::connect(socket).ok()?;
    stream.set_read_timeout(Some(IO_TIMEOUT)).ok()?;
    let audience = lava_xdr::to_bytes(&CredentialRequest {
        audience_kind: AUDIENCE_MBATCHD,
        audience_cluster: util::CLUSTER_NAME.to_owned(),
    })
    .expect("encodes");
    for sequence in 0..n {
        let mut request = Vec::new();
        FrameHeader {
            sequence,
            operation: Operation::CredentialRequest.code(),
            version: BATCH_VERSION,
            length: audience.len() as u32,
            status: 0,
        }
        .write(&mut request);
        request.extend_from_slice(&audience);
        stream.write_all(&request).ok()?;
        let mut head = [0u8; HEADER_BYTES];
        stream.read_exact(&mut head).ok()?;
        let header = FrameHeader::parse(&head).ok()?;
        let mut body = vec![0u8; header.length as usize];
        stream.read_exact(&mut body).ok()?;
        if header.operation != Operation::CredentialReply.code() {
            return None;
        }
    }
    Some(started.elapsed())
}

/// A process of user `nobody` that opens `n` connections to `socket`, holds them for
/// `hold_secs` seconds, and prints how many it opened.
fn hog_as_nobody(socket: &Path, n: u32, hold_secs: u32) -> std::process::Child {
    let script = format!(
        "import socket, time, sys\n\
         held = []\n\
         for _ in range({n}):\n    \
             s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n    \
             try:\n        s.connect({path:?})\n    \
             except OSError:\n        break\n    \
             held.append(s)\n\
         print(len(held), flush=True)\n\
         time.sleep({hold_secs})\n",
        path = socket.display().to_string(),
    );
    Command::new("python3")
        .args(["-c", &script])
        .uid(NOBODY_UID)
        .gid(NOBODY_UID)
        .current_dir("/tmp")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 runs")
}

// Attack (issue 18, item 5): one user holds every connection of the host's credential
// socket, so nobody else on the host can run a command. Goal: with 400 idle connections of
// `nobody` open, root is still given a credential at once (sbatchd used to serve 256
// connections in all, each idle one for 10 s), and `nobody` itself keeps at most its cap.
#[test]
fn one_user_cannot_take_the_socket_from_the_others() {
    let (_cluster, sbatchd, socket) = start();
    let mut hog = hog_as_nobody(&socket, 400, 15);
    let mut line = String::new();
    let mut out = hog.stdout.take().expect("piped");
    let mut byte = [0u8; 1];
    while out.read(&mut byte).expect("read the hog's count") == 1 && byte[0] != b'\n' {
        line.push(byte[0] as char);
    }
    let opened: u32 = line.trim().parse().expect("the hog's count");
    assert!(opened >= 300, "the hog opened {opened} connections");
    let took =
        credentials(&socket, 1).expect("root is given a credential beside 400 idle connections of nobody");
    assert!(took < Duration::from_secs(3), "root waited {took:?} for a credential");
    let _killed = hog.kill();
    let _reaped = hog.wait();
    assert!(sbatchd.log().len() < 64 * 1024, "sbatchd's log grew with the attack");
}

// Attack (issue 18, item 1's source): a user mints credentials as fast as the socket hands
// them out, to fill mbatchd's replay window. Goal: beyond its burst, one uid gets no more
// than the socket's rate (a lower bound on the time: the quota, not the machine's speed),
// while another user is served at once meanwhile.
#[test]
fn credentials_are_issued_at_a_bounded_rate_per_user() {
    let (_cluster, _sbatchd, socket) = start();
    let beyond = 300;
    let flood = {
        let socket = socket.clone();
        std::thread::spawn(move || credentials(&socket, CREDENTIALS_BURST + beyond))
    };
    // Nobody's one request, while root floods.
    std::thread::sleep(Duration::from_millis(200));
    let script = format!(
        "import socket, struct, time\n\
         s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n\
         s.connect({path:?})\n\
         t = time.time()\n\
         body = struct.pack('>II', 1, {n}) + {cluster:?}.encode() + bytes((4 - {n} % 4) % 4)\n\
         s.sendall(struct.pack('>5I', 1, {op}, {version}, len(body), 0) + body)\n\
         head = b''\n\
         while len(head) < 20:\n    head += s.recv(20 - len(head))\n\
         print(struct.unpack('>5I', head)[1], time.time() - t)\n",
        path = socket.display().to_string(),
        op = Operation::CredentialRequest.code(),
        n = util::CLUSTER_NAME.len(),
        cluster = util::CLUSTER_NAME,
        version = BATCH_VERSION,
    );
    let other = Command::new("python3")
        .args(["-c", &script])
        .uid(NOBODY_UID)
        .gid(NOBODY_UID)
        .current_dir("/tmp")
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&other.stdout);
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(
        fields.first().copied(),
        Some(Operation::CredentialReply.code().to_string().as_str()),
        "{text}"
    );
    let waited: f64 = fields.get(1).and_then(|field| field.parse().ok()).expect("a time");
    assert!(waited < 2.0, "nobody waited {waited} s for a credential while root flooded");
    let took = flood.join().expect("the flood").expect("every credential of the flood is issued");
    let floor = Duration::from_secs_f64(f64::from(beyond) / f64::from(CREDENTIALS_PER_SECOND)) * 9 / 10;
    assert!(
        took >= floor,
        "{} credentials in {took:?}: faster than the rate allows",
        CREDENTIALS_BURST + beyond
    );
}
