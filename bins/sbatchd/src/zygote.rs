//! The shepherd zygote: one long-lived, single-threaded `lava-shepherd --zygote` process
//! per sbatchd, which starts each job's shepherd by forking itself instead of sbatchd
//! executing `lava-shepherd` anew for every job.
//!
//! A program start costs more than the whole rest of a shepherd's set-up on the hosts
//! LavaCore was measured on: the dynamic loader, relocations, and glibc's and libgcc's
//! `cpuid` probing, which traps to the hypervisor (docs/benchmarks.md, "Shepherds forked
//! from a zygote"). The zygote pays that once; each shepherd is then a `fork` of a small,
//! already-loaded process.
//!
//! # The channel
//! sbatchd starts the zygote ([`Client`], from its launcher thread, at the first launch)
//! as its own child, `lava-shepherd --zygote --socket-fd N STATE_ROOT` (the same binary,
//! standard streams on /dev/null, empty environment, sbatchd's working directory and
//! umask: what a shepherd got when sbatchd executed it), holding one end of a
//! `socketpair(AF_UNIX, SOCK_SEQPACKET)`. `STATE_ROOT` is the host's `state` folder: every
//! request must name a job folder directly inside it (and `ps` shows whose zygote it is).
//!
//! One launch is one request and one answer, one at a time:
//! - request: [`REQUEST_MAGIC`], then the job's state folder (bytes of the path), with
//!   [`REQUEST_FDS`] descriptors attached (`SCM_RIGHTS`), in this order: the
//!   notification pipe's write end, the job's lock (the state folder, flocked), the launch
//!   plan (memfd); and for a job whose record is still being made durable, a fourth: the
//!   read end of its go pipe ([`crate::shepherd`], step 3). These are the descriptors a
//!   shepherd inherits at `--notify-fd`, `--lock-fd`, `--plan-fd` and `--go-fd` when it is
//!   executed as a program.
//! - answer: [`ANSWER_MAGIC`], a status byte, the shepherd's pid (4 bytes, big-endian),
//!   and for a refusal a message. A started shepherd's answer carries one descriptor, a
//!   pidfd for it (`pidfd_open` on the zygote's own child before the zygote can have
//!   reaped it, so it names that process and no other).
//!
//! # In the zygote
//! It blocks SIGCHLD and polls its socket and a signalfd: each ended child is reaped at
//! once (`waitpid(-1, WNOHANG)`), so no zombie stays. For each request it checks the size,
//! the descriptor count and kinds and the folder ([`decode_request`]); anything else is
//! answered with a refusal and the zygote goes on (a malformed request never stops it).
//! Then it forks. The child closes the zygote's socket, signalfd and every other
//! descriptor but its job's three, restores the signal mask the zygote started with (no
//! signal disposition was changed), and runs exactly the shepherd of
//! [`crate::shepherd`] (which makes itself a new session first), then exits with the
//! shepherd's status. The parent answers with the pid and a pidfd and closes its copies
//! of the job's descriptors.
//!
//! End-of-file (or hang-up) on the socket means sbatchd is gone: the zygote exits at once.
//! Its shepherds are in their own sessions and do not notice: they outlive the zygote as
//! they outlive sbatchd, and a restarted sbatchd adopts them as before.
//!
//! # In sbatchd
//! [`Client::launch`] sends the request and waits at most [`ANSWER_TIMEOUT`] for the
//! answer. A zygote found dead before a launch (or at the launcher's idle check) is
//! reaped, logged, and replaced by a new one. When the answer does not come (the zygote
//! died, hung, or said nonsense), the zygote is killed and reaped, and whether a shepherd
//! was started cannot be known from here: the launch is then [`LaunchError::Unknown`],
//! and sbatchd learns the truth the way it does after its own restart — from the job's
//! notification pipe (a byte once a shepherd has settled the pid question; end-of-file
//! once every copy of the write end is closed: the zygote dead and no shepherd started,
//! or the shepherd ended) and the job's lock. A job is therefore never started twice, nor left untracked, whatever the
//! zygote does; and no wait on it is unbounded.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use crate::sys::{self, Forked};

/// The flag that makes `lava-shepherd` the zygote.
pub const ZYGOTE_FLAG: &str = "--zygote";
/// The flag naming the zygote's end of the socket pair.
pub const SOCKET_FD_FLAG: &str = "--socket-fd";
/// The first bytes of a request (and the protocol's version).
pub const REQUEST_MAGIC: [u8; 4] = *b"LZQ1";
/// The first bytes of an answer.
pub const ANSWER_MAGIC: [u8; 4] = *b"LZA1";
/// Descriptors attached to every request: notification pipe, job lock, launch plan.
pub const REQUEST_FDS: usize = 3;
/// Descriptors attached to a request at most: those, then the job's go pipe.
pub const REQUEST_FDS_MAX: usize = REQUEST_FDS + 1;
/// Longest request: the magic and a path of `PATH_MAX` bytes.
pub const REQUEST_BYTES_MAX: usize = REQUEST_MAGIC.len() + libc::PATH_MAX as usize;
/// Longest answer: magic, status, pid and a message.
const ANSWER_BYTES_MAX: usize = ANSWER_MAGIC.len() + 1 + 4 + ANSWER_MESSAGE_BYTES_MAX;
/// Longest refusal message (a longer one is cut).
const ANSWER_MESSAGE_BYTES_MAX: usize = 1024;
/// Longest sbatchd waits for one answer. A healthy zygote answers within a fork's time
/// (well under a millisecond); the bound is for a zygote that is stopped or wedged.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// Status byte of an answer: the shepherd was started.
const STARTED: u8 = 0;
/// Status byte of an answer: nothing was started.
const REFUSED: u8 = 1;
/// Exit status of a forked shepherd whose code panicked (Rust's own for a panic).
const PANIC_EXIT_CODE: i32 = 101;

/// A request checked by [`decode_request`]: the job's state folder and its descriptors.
#[derive(Debug)]
pub struct Request {
    /// The job's state folder (directly inside the zygote's state root).
    pub state_dir: PathBuf,
    /// Write end of the notification pipe.
    pub notify: OwnedFd,
    /// The job's lock (its state folder, flocked by sbatchd).
    pub lock: OwnedFd,
    /// The launch plan (an in-memory file).
    pub plan: OwnedFd,
    /// Read end of the go pipe, for a job whose record is still being made durable.
    pub go: Option<OwnedFd>,
}

/// The bytes of a request for the job whose state folder is `state_dir`.
pub fn encode_request(state_dir: &Path) -> Result<Vec<u8>, String> {
    let path = state_dir.as_os_str().as_bytes();
    if REQUEST_MAGIC.len() + path.len() > REQUEST_BYTES_MAX {
        return Err(format!("state folder path longer than {} bytes", libc::PATH_MAX));
    }
    Ok(REQUEST_MAGIC.iter().chain(path).copied().collect())
}

/// Checks one received request against the protocol and returns it; the error says what
/// is wrong, for the refusal. Every received descriptor is owned by the request or
/// dropped (closed) on refusal.
pub fn decode_request(received: sys::Received, buf: &[u8], state_root: &Path) -> Result<Request, String> {
    let sys::Received { len, fds, truncated, fds_truncated } = received;
    if truncated {
        return Err(format!("request longer than {REQUEST_BYTES_MAX} bytes"));
    }
    if fds_truncated {
        return Err(format!("more than {REQUEST_FDS_MAX} descriptors attached"));
    }
    let bytes = &buf[..len.min(buf.len())];
    let Some(path) = bytes.strip_prefix(&REQUEST_MAGIC) else {
        return Err("not a launch request (bad magic)".to_owned());
    };
    if fds.len() < REQUEST_FDS {
        return Err(format!(
            "{} descriptors attached, {REQUEST_FDS} or {REQUEST_FDS_MAX} expected",
            fds.len()
        ));
    }
    if path.contains(&0) {
        return Err("state folder path holds a NUL byte".to_owned());
    }
    let state_dir = PathBuf::from(OsString::from_vec(path.to_vec()));
    let mut components = state_dir
        .strip_prefix(state_root)
        .map(Path::components)
        .map_err(|_| format!("{} is not a folder of {}", state_dir.display(), state_root.display()))?;
    if !matches!((components.next(), components.next()), (Some(Component::Normal(_)), None)) {
        return Err(format!("{} is not a job folder of {}", state_dir.display(), state_root.display()));
    }
    let mut fds = fds.into_iter();
    let (Some(notify), Some(lock), Some(plan)) = (fds.next(), fds.next(), fds.next()) else {
        unreachable!("three descriptors, counted above");
    };
    let go = fds.next();
    let required = [
        (&notify, libc::S_IFIFO, "the notification pipe"),
        (&lock, libc::S_IFDIR, "the job's lock (its folder)"),
        (&plan, libc::S_IFREG, "the launch plan"),
    ];
    for (fd, kind, what) in
        required.into_iter().chain(go.as_ref().map(|go| (go, libc::S_IFIFO, "the go pipe")))
    {
        match sys::file_type(fd.as_fd()) {
            Ok(found) if found == kind => {}
            Ok(_) => return Err(format!("descriptor for {what} is of the wrong kind")),
            Err(err) => return Err(format!("descriptor for {what}: {err}")),
        }
    }
    Ok(Request { state_dir, notify, lock, plan, go })
}

/// The zygote's answer to one request.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// The shepherd was started with this pid.
    Started {
        /// The shepherd's pid.
        pid: i32,
    },
    /// Nothing was started, and why.
    Refused(String),
}

fn encode_answer(answer: &Answer) -> Vec<u8> {
    let mut bytes = ANSWER_MAGIC.to_vec();
    match answer {
        Answer::Started { pid } => {
            bytes.push(STARTED);
            bytes.extend_from_slice(&pid.to_be_bytes());
        }
        Answer::Refused(message) => {
            bytes.push(REFUSED);
            bytes.extend_from_slice(&0i32.to_be_bytes());
            let mut end = message.len().min(ANSWER_MESSAGE_BYTES_MAX);
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            bytes.extend_from_slice(&message.as_bytes()[..end]);
        }
    }
    bytes
}

fn decode_answer(bytes: &[u8]) -> Result<Answer, String> {
    let rest = bytes.strip_prefix(&ANSWER_MAGIC).ok_or("an answer without the magic")?;
    let (&status, rest) = rest.split_first().ok_or("a short answer")?;
    let (pid, message) = rest.split_at_checked(4).ok_or("a short answer")?;
    let pid = i32::from_be_bytes([pid[0], pid[1], pid[2], pid[3]]);
    match status {
        STARTED if pid > 0 && message.is_empty() => Ok(Answer::Started { pid }),
        REFUSED => Ok(Answer::Refused(String::from_utf8_lossy(message).into_owned())),
        _ => Err(format!("an answer of status {status} with pid {pid}")),
    }
}

// ---------------------------------------------------------------------------------------
// The zygote process.

/// `main` of `lava-shepherd --zygote --socket-fd N STATE_ROOT` (`args`: what follows
/// `--zygote`).
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let mut args = args.into_iter();
    let (socket_fd, state_root) = match (args.next(), args.next(), args.next(), args.next()) {
        (Some(flag), Some(fd), Some(root), None) if flag == SOCKET_FD_FLAG => {
            match fd.to_str().and_then(|fd| fd.parse::<RawFd>().ok()) {
                Some(fd) => (fd, PathBuf::from(root)),
                None => return usage(),
            }
        }
        _ => return usage(),
    };
    let Ok(socket) = sys::inherited_fd(socket_fd) else {
        eprintln!(
            "lava-shepherd --zygote: descriptor {socket_fd} is not open; only sbatchd starts the zygote"
        );
        return ExitCode::from(crate::shepherd::EXIT_USAGE);
    };
    // fork is only safe here because nothing in this process ever starts a thread.
    match sys::thread_count() {
        Ok(1) => {}
        other => {
            eprintln!("lava-shepherd --zygote: not single-threaded ({other:?}); refusing to fork");
            return ExitCode::FAILURE;
        }
    }
    let start = || -> io::Result<(sys::SignalMask, OwnedFd)> {
        let mask = sys::block_child_signal()?;
        Ok((mask, sys::child_signal_fd()?))
    };
    match start() {
        Ok((mask, child_signals)) => {
            let mut fork = |request: Request| fork_shepherd(request, &mask);
            serve(&socket, Some(&child_signals), &state_root, &mut fork);
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("lava-shepherd --zygote: cannot watch for ended children: {err}");
            ExitCode::FAILURE
        }
    }
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: lava-shepherd {ZYGOTE_FLAG} {SOCKET_FD_FLAG} N STATE_ROOT (only sbatchd starts the zygote)"
    );
    ExitCode::from(crate::shepherd::EXIT_USAGE)
}

/// What starting one shepherd gave: its pid and a pidfd for it, or why nothing started.
pub type StartResult = Result<(i32, Option<OwnedFd>), String>;

/// The zygote's loop: answers each request on `socket` until end-of-file, reaping ended
/// children whenever `child_signals` (a SIGCHLD signalfd) says so. `start` starts one
/// shepherd (`fork_shepherd` in the zygote; tests pass their own). Returns when sbatchd
/// is gone (end-of-file, hang-up, or an answer that cannot be sent).
pub fn serve(
    socket: &OwnedFd,
    child_signals: Option<&OwnedFd>,
    state_root: &Path,
    start: &mut dyn FnMut(Request) -> StartResult,
) {
    let mut buf = vec![0u8; REQUEST_BYTES_MAX];
    let mut watched: Vec<BorrowedFd<'_>> = vec![socket.as_fd()];
    watched.extend(child_signals.map(AsFd::as_fd));
    loop {
        let ready = match sys::poll(&watched, libc::POLLIN, -1) {
            Ok(ready) => ready,
            Err(err) => {
                eprintln!("lava-shepherd --zygote: poll: {err}");
                return;
            }
        };
        if let Some(signals) = child_signals
            && ready.get(1).is_some_and(|events| *events != 0)
        {
            sys::drain_signal_fd(signals.as_fd());
            sys::reap_ended_children();
        }
        if ready[0] == 0 {
            continue;
        }
        if ready[0] & libc::POLLIN == 0 {
            // Hang-up or error without a message: sbatchd is gone.
            return;
        }
        let received = match sys::recv_with_fds(socket.as_fd(), &mut buf, REQUEST_FDS_MAX) {
            Ok(received) => received,
            Err(err) => {
                eprintln!("lava-shepherd --zygote: receiving a request: {err}");
                return;
            }
        };
        if received.len == 0 && received.fds.is_empty() && !received.truncated {
            return; // End-of-file: sbatchd closed its end.
        }
        let (answer, pidfd) = match decode_request(received, &buf, state_root) {
            Err(problem) => (Answer::Refused(format!("bad launch request: {problem}")), None),
            Ok(request) => match start(request) {
                Ok((pid, pidfd)) => (Answer::Started { pid }, pidfd),
                Err(message) => (Answer::Refused(message), None),
            },
        };
        let attached: Vec<BorrowedFd<'_>> = pidfd.iter().map(AsFd::as_fd).collect();
        if sys::send_with_fds(socket.as_fd(), &encode_answer(&answer), &attached).is_err() {
            return;
        }
    }
}

/// Forks the shepherd of `request` (see the module doc); in the parent, returns its pid
/// and a pidfd for it, and the job's descriptors are closed when `request` drops. The
/// child never returns.
fn fork_shepherd(request: Request, mask: &sys::SignalMask) -> StartResult {
    match sys::fork() {
        Err(err) => Err(format!("cannot fork a shepherd: {err}")),
        Ok(Forked::Parent(pid)) => {
            // Not reaped yet (the loop reaps only after this answer), so the pid is still
            // this child's: the pidfd cannot name another process.
            let pidfd = sys::pidfd_open(pid).ok();
            Ok((pid, pidfd))
        }
        Ok(Forked::Child) => shepherd_child(request, mask),
    }
}

/// The forked shepherd: keeps only its job's descriptors, takes back the signal mask the
/// zygote started with, runs the shepherd, and exits with its status.
fn shepherd_child(request: Request, mask: &sys::SignalMask) -> ! {
    let Request { state_dir, notify, lock, plan, go } = request;
    let mut keep = vec![notify.as_raw_fd(), lock.as_raw_fd(), plan.as_raw_fd()];
    keep.extend(go.as_ref().map(AsRawFd::as_raw_fd));
    // The zygote's socket and signalfd are among the descriptors closed here; their owners
    // live in frames of the zygote's loop that this process never returns to.
    let code = if sys::close_descriptors_except(&keep).is_err() || sys::restore_signal_mask(mask).is_err() {
        // Nothing of the job has happened yet: sbatchd learns it from the pipe's end and
        // the lock, as for any shepherd that died before writing `pid`.
        i32::from(crate::shepherd::EXIT_FAILED)
    } else {
        let run = std::panic::AssertUnwindSafe(|| {
            let go = go.map(File::from);
            crate::shepherd::run_with(&state_dir, lock, Some(File::from(notify)), Ok(File::from(plan)), go)
        });
        std::panic::catch_unwind(run).map_or(PANIC_EXIT_CODE, i32::from)
    };
    std::process::exit(code)
}

// ---------------------------------------------------------------------------------------
// sbatchd's side.

/// A shepherd the zygote started.
#[derive(Debug)]
pub struct Started {
    /// Its pid.
    pub pid: u32,
    /// A pidfd for it (`None` only if the zygote could not open one).
    pub pidfd: Option<OwnedFd>,
}

/// Why a launch through the zygote did not report a started shepherd.
#[derive(Debug, PartialEq, Eq)]
pub enum LaunchError {
    /// No shepherd was started (the zygote refused, or never got the request).
    NotStarted(String),
    /// The zygote got the request but gave no usable answer (it has been killed since):
    /// a shepherd may or may not have been started.
    Unknown(String),
}

/// One running zygote, as sbatchd holds it.
#[derive(Debug)]
struct Zygote {
    child: Child,
    socket: OwnedFd,
}

/// sbatchd's handle on its zygote: starts it when needed, replaces it when it dies, and
/// sends it launches (from one thread: the launcher).
#[derive(Debug)]
pub struct Client {
    program: PathBuf,
    state_root: PathBuf,
    current: Option<Zygote>,
}

impl Client {
    /// A client that starts `program --zygote` (the `lava-shepherd` beside sbatchd) for the
    /// host's `state_root`; nothing is started before the first launch.
    pub fn new(program: PathBuf, state_root: PathBuf) -> Client {
        Client { program, state_root, current: None }
    }

    /// The running zygote's pid, if one runs.
    pub fn pid(&self) -> Option<u32> {
        self.current.as_ref().map(|zygote| zygote.child.id())
    }

    /// Reaps and forgets the zygote if it has ended (logged, with its status).
    pub fn check(&mut self) {
        let ended = match self.current.as_mut().map(|zygote| zygote.child.try_wait()) {
            Some(Ok(Some(status))) => format!("ended ({status})"),
            Some(Err(err)) => format!("cannot be waited for ({err})"),
            Some(Ok(None)) | None => return,
        };
        if let Some(zygote) = self.current.take() {
            tracing::warn!(
                pid = zygote.child.id(),
                "the shepherd zygote {ended}; a new one starts at the next launch"
            );
        }
    }

    /// Kills (SIGKILL) and reaps the zygote, saying why.
    fn discard(&mut self, why: &str) {
        if let Some(mut zygote) = self.current.take() {
            tracing::warn!(pid = zygote.child.id(), "shepherd zygote dropped: {why}");
            let _ = zygote.child.kill();
            let _ = zygote.child.wait();
        }
    }

    fn start(&mut self) -> io::Result<()> {
        let (ours, theirs) = sys::seqpacket_pair()?;
        let theirs = sys::inheritable_copy(theirs.as_fd())?;
        let child = Command::new(&self.program)
            .arg(ZYGOTE_FLAG)
            .arg(SOCKET_FD_FLAG)
            .arg(theirs.as_raw_fd().to_string())
            .arg(&self.state_root)
            .env_clear()
            .envs(lava_crash::inherited_env())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        drop(theirs);
        tracing::info!(pid = child.id(), "shepherd zygote started");
        self.current = Some(Zygote { child, socket: ours });
        Ok(())
    }

    /// Starts the shepherd of the job whose state folder is `state_dir`, handing it the
    /// notification pipe's write end, the job's lock, the launch plan and, when given, the
    /// go pipe's read end (see the module doc). Starts a zygote first if none runs; retries
    /// once with a new zygote when the request could not be delivered.
    pub fn launch(
        &mut self,
        state_dir: &Path,
        notify: BorrowedFd<'_>,
        lock: BorrowedFd<'_>,
        plan: BorrowedFd<'_>,
        go: Option<BorrowedFd<'_>>,
    ) -> Result<Started, LaunchError> {
        let mut attached = vec![notify, lock, plan];
        attached.extend(go);
        let request = encode_request(state_dir).map_err(LaunchError::NotStarted)?;
        self.check();
        let mut attempts = 0;
        loop {
            attempts += 1;
            if self.current.is_none() {
                let program = self.program.display().to_string();
                self.start().map_err(|err| {
                    LaunchError::NotStarted(format!("cannot start the shepherd zygote {program}: {err}"))
                })?;
            }
            let Some(zygote) = &self.current else { unreachable!("started above") };
            match sys::send_with_fds(zygote.socket.as_fd(), &request, &attached) {
                Ok(()) => break,
                Err(err) => {
                    // Not delivered: nothing can have started. A zygote that died since the
                    // last look is the likely reason; one new zygote is tried.
                    let why = format!("cannot send it a launch: {err}");
                    self.discard(&why);
                    if attempts > 1 {
                        return Err(LaunchError::NotStarted(format!("shepherd zygote: {why}")));
                    }
                }
            }
        }
        match self.answer() {
            Ok(answer) => Ok(answer),
            Err(LaunchError::Unknown(why)) => {
                self.discard(&why);
                Err(LaunchError::Unknown(why))
            }
            Err(not_started) => Err(not_started),
        }
    }

    /// Waits (at most [`ANSWER_TIMEOUT`]) for the answer to the request just sent.
    fn answer(&mut self) -> Result<Started, LaunchError> {
        let unknown = |why: String| LaunchError::Unknown(format!("the shepherd zygote {why}"));
        let Some(zygote) = &self.current else {
            return Err(unknown("is gone".to_owned()));
        };
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(unknown(format!("did not answer within {ANSWER_TIMEOUT:?}")));
            }
            let timeout_ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
            let ready = sys::poll(&[zygote.socket.as_fd()], libc::POLLIN, timeout_ms)
                .map_err(|err| unknown(format!("cannot be waited for: {err}")))?;
            if ready[0] != 0 {
                break;
            }
        }
        let mut buf = vec![0u8; ANSWER_BYTES_MAX];
        let received = sys::recv_with_fds(zygote.socket.as_fd(), &mut buf, 1)
            .map_err(|err| unknown(format!("answer cannot be read: {err}")))?;
        if received.len == 0 && received.fds.is_empty() {
            return Err(unknown("closed its socket without answering".to_owned()));
        }
        if received.truncated || received.fds_truncated {
            return Err(unknown("sent an oversized answer".to_owned()));
        }
        match decode_answer(&buf[..received.len]) {
            Ok(Answer::Started { pid }) => {
                Ok(Started { pid: pid.unsigned_abs(), pidfd: received.fds.into_iter().next() })
            }
            Ok(Answer::Refused(message)) if received.fds.is_empty() => Err(LaunchError::NotStarted(message)),
            Ok(Answer::Refused(_)) => Err(unknown("sent a refusal with a descriptor".to_owned())),
            Err(problem) => Err(unknown(format!("sent {problem}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Seek, Write};

    use super::*;

    fn pair() -> (OwnedFd, OwnedFd) {
        sys::seqpacket_pair().expect("socketpair")
    }

    /// A pipe's write end, a folder and a memfd: the three descriptors of a real request.
    struct JobFds {
        dir: tempfile::TempDir,
        read: std::io::PipeReader,
        write: std::io::PipeWriter,
        folder: File,
        plan: File,
    }

    fn job_fds() -> JobFds {
        let dir = tempfile::tempdir().expect("tempdir");
        let (read, write) = std::io::pipe().expect("pipe");
        let folder = File::open(dir.path()).expect("open the folder");
        let plan = sys::memory_file(c"test-plan", b"the plan").expect("memfd");
        JobFds { dir, read, write, folder, plan }
    }

    fn send(socket: &OwnedFd, bytes: &[u8], fds: &[BorrowedFd<'_>]) {
        sys::send_with_fds(socket.as_fd(), bytes, fds).expect("send");
    }

    fn receive_answer(socket: &OwnedFd) -> (Answer, Vec<OwnedFd>) {
        let mut buf = vec![0u8; ANSWER_BYTES_MAX];
        let received = sys::recv_with_fds(socket.as_fd(), &mut buf, 1).expect("answer");
        (decode_answer(&buf[..received.len]).expect("a well-formed answer"), received.fds)
    }

    // Goal: requests and answers survive their encoding, and answers that are not the
    // protocol's are refused rather than misread.
    #[test]
    fn answers_round_trip_and_junk_is_refused() {
        for answer in [Answer::Started { pid: 4242 }, Answer::Refused("no: why".to_owned())] {
            assert_eq!(decode_answer(&encode_answer(&answer)), Ok(answer));
        }
        let long = Answer::Refused("é".repeat(ANSWER_MESSAGE_BYTES_MAX));
        let Ok(Answer::Refused(cut)) = decode_answer(&encode_answer(&long)) else { panic!("refusal") };
        assert!(cut.len() <= ANSWER_MESSAGE_BYTES_MAX && cut.chars().all(|c| c == 'é'));
        for junk in
            [&b""[..], b"LZA1", b"LZA1\0\0\0", b"XXXX\0\0\0\0\x01", b"LZA1\0\0\0\0\0", b"LZA1\x07\0\0\0\x01"]
        {
            assert!(decode_answer(junk).is_err(), "{junk:?}");
        }
        assert!(decode_answer(b"LZA1\0\0\0\0\x05extra").is_err(), "a started answer carries no message");
        let dir = Path::new("/state/1700000000.7");
        assert_eq!(encode_request(dir).expect("encodes"), b"LZQ1/state/1700000000.7".to_vec());
        let too_long = PathBuf::from(format!("/{}", "x".repeat(libc::PATH_MAX as usize)));
        assert!(encode_request(&too_long).is_err());
    }

    // Goal: the zygote's loop hands a well-formed request's folder and the very
    // descriptors sbatchd attached to its `start` (with and without a go pipe), answers
    // malformed requests (wrong magic, no or too many or the wrong kinds of descriptors,
    // an oversized message, a folder outside its state root or not directly in it) with a
    // refusal and keeps serving, and returns at end-of-file. Method: the real loop in a thread (without a
    // signalfd and with a `start` that records instead of forking) on a real socket pair.
    #[test]
    fn zygote_loop_refuses_malformed_requests_and_keeps_serving() {
        let (ours, theirs) = pair();
        let job = job_fds();
        let root = job.dir.path().to_path_buf();
        let state_dir = root.join("1700000000.7");
        let loop_root = root.clone();
        let server = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut start = |request: Request| -> StartResult {
                // The descriptors are the sender's: the pipe reaches its reader, the plan
                // reads back.
                let mut notify = File::from(request.notify);
                notify.write_all(b"p").expect("write on the passed pipe");
                let mut plan = File::from(request.plan);
                let mut text = String::new();
                plan.rewind().expect("rewind");
                plan.read_to_string(&mut text).expect("read the passed plan");
                if let Some(go) = request.go {
                    let mut byte = [0u8; 1];
                    File::from(go).read_exact(&mut byte).expect("read the passed go pipe");
                    text.push(char::from(byte[0]));
                }
                seen.push((request.state_dir, text));
                Ok((4242, None))
            };
            serve(&theirs, None, &loop_root, &mut start);
            seen
        });
        let fds = [job.write.as_fd(), job.folder.as_fd(), job.plan.as_fd()];
        let good = encode_request(&state_dir).expect("encodes");
        let refused = |bytes: &[u8], attached: &[BorrowedFd<'_>], expected: &str| {
            send(&ours, bytes, attached);
            let (answer, passed) = receive_answer(&ours);
            let Answer::Refused(message) = answer else { panic!("{expected}: accepted") };
            assert!(message.contains(expected), "{message:?} should say {expected:?}");
            assert!(passed.is_empty());
        };
        refused(b"LZQ9/x", &fds, "bad magic");
        refused(&good, &[], "0 descriptors attached");
        refused(&good, &fds[..2], "2 descriptors attached");
        let (go_read, mut go_write) = std::io::pipe().expect("go pipe");
        let go = go_read.as_fd();
        refused(&good, &[fds[0], fds[1], fds[2], go, go], "more than 4 descriptors");
        refused(&good, &[fds[1], fds[0], fds[2]], "the notification pipe is of the wrong kind");
        refused(&good, &[fds[0], fds[1], fds[0]], "the launch plan is of the wrong kind");
        refused(&good, &[fds[0], fds[1], fds[2], fds[2]], "the go pipe is of the wrong kind");
        let oversized: Vec<u8> = REQUEST_MAGIC.iter().copied().chain([b'x'; REQUEST_BYTES_MAX]).collect();
        refused(&oversized, &fds, "longer than");
        refused(&encode_request(Path::new("/etc/passwd")).expect("encodes"), &fds, "is not a folder of");
        refused(&encode_request(&root.join("a/b")).expect("encodes"), &fds, "is not a job folder of");
        refused(&encode_request(&root.join("..")).expect("encodes"), &fds, "is not a job folder of");
        refused(&encode_request(&root).expect("encodes"), &fds, "is not a job folder of");
        refused(b"LZQ1/x\0y", &fds, "NUL");
        // Still serving: the good request goes through, twice, then once with a go pipe.
        for _ in 0..2 {
            send(&ours, &good, &fds);
            assert_eq!(receive_answer(&ours).0, Answer::Started { pid: 4242 });
        }
        go_write.write_all(b"g").expect("go");
        send(&ours, &good, &[fds[0], fds[1], fds[2], go]);
        assert_eq!(receive_answer(&ours).0, Answer::Started { pid: 4242 });
        drop(ours);
        let seen = server.join().expect("the loop returns at end-of-file");
        let plan = |text: &str| (state_dir.clone(), text.to_owned());
        assert_eq!(seen, vec![plan("the plan"), plan("the plan"), plan("the plang")]);
        let mut read = job.read;
        let mut notified = [0u8; 3];
        read.read_exact(&mut notified).expect("every notification arrived through the passed pipe");
    }

    // Goal: sbatchd's side refuses answers that are not the protocol's, never treats them
    // as a started shepherd, and says the outcome is unknown (the zygote got the request).
    #[test]
    fn client_treats_a_bad_answer_as_unknown() {
        let (ours, theirs) = pair();
        let job = job_fds();
        let child = Command::new("sleep").arg("30").spawn().expect("a stand-in zygote process");
        let mut client = Client::new("/nonexistent".into(), job.dir.path().to_path_buf());
        client.current = Some(Zygote { child, socket: ours });
        send(&theirs, b"LZA1\x09\0\0\0\x01", &[]);
        let fds = (job.write.as_fd(), job.folder.as_fd(), job.plan.as_fd());
        let outcome = client.launch(&job.dir.path().join("1.7"), fds.0, fds.1, fds.2, None);
        let Err(LaunchError::Unknown(why)) = outcome else { panic!("{outcome:?}") };
        assert!(why.contains("status 9"), "{why}");
        assert_eq!(client.pid(), None, "the misbehaving zygote is dropped (killed and reaped)");
        // A new zygote cannot start from a missing program: nothing started, and said so.
        let outcome = client.launch(&job.dir.path().join("1.7"), fds.0, fds.1, fds.2, None);
        let Err(LaunchError::NotStarted(why)) = outcome else { panic!("{outcome:?}") };
        assert!(why.contains("cannot start the shepherd zygote /nonexistent"), "{why}");
    }
}
