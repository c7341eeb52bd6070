//! The shepherd's side of an interactive job (`bsub -I`, `-Ip`, `-Is`; docs/protocols/batch.md,
//! "Interactive jobs"): the job's standard streams and the one connection sbatchd makes to
//! relay them to `bsub`.
//!
//! Before it forks the job, the shepherd binds the attach socket `attach` in the job's state
//! folder (root's, mode 0700, so only root can connect: sbatchd checks `bsub`'s credential and
//! the job's owner before it does) and makes the job's streams: a pseudo-terminal whose
//! terminal side the job takes as its controlling terminal (`PTY`), else three pipes. The
//! job starts at once; what it writes before `bsub` attaches waits in the kernel's pipe or
//! terminal buffer (the job blocks when it is full), and nothing is read before the attach.
//!
//! Once the job runs, a thread of the shepherd serves the streams ([`Relay::start`]): it
//! takes one connection on the socket (then closes it: one attach per job), and relays
//! INTERACTIVE_DATA frames both ways, INTERACTIVE_WINSIZE to the terminal, and
//! INTERACTIVE_SIGNAL (`bsub -Ip`'s interrupt and suspend keys) to the terminal's foreground
//! process group. When the job
//! ends ([`Running::finish`]), what is left in its streams is sent, then INTERACTIVE_EXIT
//! with the wait status, and the shepherd goes on to write `exit`: so `bsub` has the whole
//! output before mbatchd hears of the end. A job that ended before any attach waits for one
//! at most [`ATTACH_LINGER_MS`]. When the connection closes first, the relay only drains and
//! drops the job's output until the job ends (sbatchd's logic kills it: a lost terminal).
//!
//! The frames are the batch protocol's (20-byte header, XDR body) without a trailer: the
//! socket is private to root.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use lava_batch_wire::{self as wire, Operation};
use lava_xdr::frame::{FrameHeader, HEADER_BYTES};

use crate::handoff::LaunchPlan;
use crate::sys::{self, ExecPlan};

/// The attach socket's name in the job's state folder.
pub const ATTACH_SOCKET: &str = "attach";
/// How long the streams of a job that ended before `bsub` attached are kept for it.
pub const ATTACH_LINGER_MS: u64 = 60_000;
/// The ^D a pseudo-terminal reads as the end of input (its VEOF), sent when `bsub`'s input ends.
const END_OF_INPUT: u8 = 0x04;

/// The attach socket of the state folder open as `dir`: a path through `/proc`, so that no
/// state folder is too deep for a socket's 108 bytes.
pub fn socket_path(dir: RawFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{dir}/{ATTACH_SOCKET}"))
}

/// One frame: header and body in one write.
pub fn write_frame(to: &mut impl Write, operation: Operation, body: &[u8]) -> io::Result<()> {
    let length = u32::try_from(body.len()).map_err(|_| io::Error::other("frame body over 4 GiB"))?;
    let header = FrameHeader {
        sequence: 0,
        operation: operation.code(),
        version: wire::BATCH_VERSION,
        length,
        status: 0,
    };
    let mut frame = Vec::with_capacity(HEADER_BYTES + body.len());
    header.write(&mut frame);
    frame.extend_from_slice(body);
    to.write_all(&frame)
}

/// One frame whose body is at most `body_max` bytes: its operation and body. End of file
/// before a header is `UnexpectedEof`; anything not of the protocol is `InvalidData`.
pub fn read_frame(from: &mut impl Read, body_max: u32) -> io::Result<(Operation, Vec<u8>)> {
    let mut head = [0u8; HEADER_BYTES];
    from.read_exact(&mut head)?;
    let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let header = FrameHeader::parse(&head).map_err(|error| invalid(error.to_string()))?;
    header.check_version(wire::BATCH_VERSION).map_err(|error| invalid(error.to_string()))?;
    if header.length > body_max {
        return Err(invalid(format!("a frame of {} bytes, over {body_max}", header.length)));
    }
    let operation = Operation::from_code(header.operation)
        .ok_or_else(|| invalid(format!("operation {}", header.operation)))?;
    let mut body = vec![0u8; header.length as usize];
    from.read_exact(&mut body)?;
    Ok((operation, body))
}

/// The encoding of a protocol message (never fails for our types).
pub fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    lava_xdr::to_bytes(value).expect("interactive messages always encode")
}

/// The limits interactive bodies are decoded with.
pub const LIMITS: lava_xdr::Limits = lava_xdr::Limits {
    input_bytes_max: wire::INTERACTIVE_BODY_BYTES_MAX as usize,
    ..lava_xdr::Limits::DEFAULT
};

/// The job's streams, on the shepherd's side and the job's.
#[derive(Debug)]
enum Streams {
    Pty { master: OwnedFd, slave: OwnedFd },
    Pipes { stdin: OwnedFd, stdout: OwnedFd, stderr: OwnedFd, job_ends: [OwnedFd; 3] },
}

/// An interactive job's streams and attach socket, made before the job is forked.
#[derive(Debug)]
pub struct Relay {
    listener: UnixListener,
    path: PathBuf,
    streams: Streams,
}

impl Relay {
    /// Binds the attach socket of the state folder open as `dir` and makes the streams the
    /// plan asks for.
    pub fn prepare(dir: RawFd, plan: &LaunchPlan) -> Result<Relay, String> {
        let path = socket_path(dir);
        match std::fs::remove_file(&path) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => {
                return Err(format!("cannot remove a stale attach socket: {error}"));
            }
            _ => {}
        }
        let listener =
            UnixListener::bind(&path).map_err(|error| format!("cannot bind the attach socket: {error}"))?;
        let streams = if plan.interactive & wire::submit_flags::PTY != 0 {
            let pty = sys::open_pty(plan.uid, 0, 0)
                .map_err(|error| format!("cannot open a pseudo-terminal: {error}"))?;
            Streams::Pty { master: pty.master, slave: pty.slave }
        } else {
            let pipe = || -> Result<(OwnedFd, OwnedFd), String> {
                let (read, write) = io::pipe().map_err(|error| format!("cannot create a pipe: {error}"))?;
                Ok((OwnedFd::from(read), OwnedFd::from(write)))
            };
            let (job_in, stdin) = pipe()?;
            let (stdout, job_out) = pipe()?;
            let (stderr, job_err) = pipe()?;
            Streams::Pipes { stdin, stdout, stderr, job_ends: [job_in, job_out, job_err] }
        };
        Ok(Relay { listener, path, streams })
    }

    /// Points the job's streams without a file at the relay's descriptors.
    pub fn plan_streams(&self, exec: &mut ExecPlan) {
        match &self.streams {
            Streams::Pty { slave, .. } => {
                exec.terminal = [slave.as_raw_fd(); 3];
                exec.controlling_tty = slave.as_raw_fd();
            }
            Streams::Pipes { job_ends, .. } => {
                exec.terminal = [job_ends[0].as_raw_fd(), job_ends[1].as_raw_fd(), job_ends[2].as_raw_fd()];
            }
        }
    }

    /// The job has been forked and let go: the job's ends close here (the job holds its
    /// copies), and a thread serves the streams until [`Running::finish`].
    pub fn start(self) -> io::Result<Running> {
        let (input, outputs, pty) = match self.streams {
            Streams::Pty { master, slave } => {
                drop(slave);
                let output = master.try_clone()?;
                (Some(master), vec![(wire::STREAM_STDOUT, output)], true)
            }
            Streams::Pipes { stdin, stdout, stderr, job_ends } => {
                drop(job_ends);
                (Some(stdin), vec![(wire::STREAM_STDOUT, stdout), (wire::STREAM_STDERR, stderr)], false)
            }
        };
        for (_, fd) in &outputs {
            sys::set_nonblocking(fd.as_fd())?;
        }
        if let Some(fd) = &input {
            sys::set_nonblocking(fd.as_fd())?;
        }
        let (end_read, end_write) = io::pipe()?;
        let serve = Serve {
            listener: Some(self.listener),
            path: self.path,
            conn: None,
            detached: false,
            input,
            pending: Vec::new(),
            close_input: false,
            outputs,
            pty,
            end: OwnedFd::from(end_read),
        };
        let thread = std::thread::Builder::new().name("relay".to_owned()).spawn(move || serve.run())?;
        Ok(Running { end: end_write, thread })
    }
}

/// The relay thread of a running job.
#[derive(Debug)]
pub struct Running {
    end: io::PipeWriter,
    thread: std::thread::JoinHandle<()>,
}

impl Running {
    /// The job has ended with `wait_status`: the relay sends the rest of its output and the
    /// status, and returns (at once when no terminal will come).
    pub fn finish(mut self, wait_status: i32) {
        let _ = self.end.write_all(&wait_status.to_be_bytes());
        drop(self.end);
        let _ = self.thread.join();
    }
}

struct Serve {
    listener: Option<UnixListener>,
    path: PathBuf,
    conn: Option<UnixStream>,
    /// The connection came and went: nothing is relayed any more.
    detached: bool,
    input: Option<OwnedFd>,
    pending: Vec<u8>,
    /// Close the job's input once `pending` is written (pipes: the end of input).
    close_input: bool,
    outputs: Vec<(u32, OwnedFd)>,
    pty: bool,
    end: OwnedFd,
}

impl Serve {
    fn run(mut self) {
        let mut ended: Option<(i32, Instant)> = None;
        loop {
            if let Some((status, at)) = ended {
                if self.conn.is_some() {
                    self.drain();
                    if let Some(conn) = self.conn.as_mut() {
                        let _ = write_frame(
                            conn,
                            Operation::InteractiveExit,
                            &encode(&wire::InteractiveExit { wait_status: status }),
                        );
                    }
                    break;
                }
                if self.detached || at.elapsed() >= Duration::from_millis(ATTACH_LINGER_MS) {
                    break;
                }
            }
            let mut fds: Vec<(std::os::fd::BorrowedFd<'_>, i16, Slot)> = Vec::new();
            if ended.is_none() {
                fds.push((self.end.as_fd(), libc::POLLIN, Slot::End));
            }
            if let Some(listener) = &self.listener {
                fds.push((listener.as_fd(), libc::POLLIN, Slot::Listener));
            }
            if let (Some(conn), true) = (&self.conn, self.pending.is_empty()) {
                fds.push((conn.as_fd(), libc::POLLIN, Slot::Conn));
            }
            if let (Some(input), false) = (&self.input, self.pending.is_empty()) {
                fds.push((input.as_fd(), libc::POLLOUT, Slot::Input));
            }
            if self.conn.is_some() || self.detached {
                for (idx, (_, fd)) in self.outputs.iter().enumerate() {
                    fds.push((fd.as_fd(), libc::POLLIN, Slot::Output(idx)));
                }
            }
            let timeout = if ended.is_some() { 200 } else { -1 };
            let ready = match sys::poll_each(
                &fds.iter().map(|(fd, events, _)| (*fd, *events)).collect::<Vec<_>>(),
                timeout,
            ) {
                Ok(ready) => ready,
                Err(_) => break,
            };
            let mut slots: Vec<Slot> = fds
                .iter()
                .zip(ready)
                .filter(|(_, revents)| *revents != 0)
                .map(|((_, _, slot), _)| *slot)
                .collect();
            // Outputs last, the highest index first: reading one may remove it.
            slots.sort_by_key(|slot| match slot {
                Slot::Output(idx) => usize::MAX - idx,
                _ => 0,
            });
            for slot in slots {
                match slot {
                    Slot::End => ended = Some((read_status(&self.end), Instant::now())),
                    Slot::Listener => self.accept(),
                    Slot::Conn => self.serve_conn(),
                    Slot::Input => self.write_input(),
                    Slot::Output(idx) => {
                        self.read_output(idx);
                    }
                }
            }
        }
        let _ = std::fs::remove_file(&self.path);
    }

    fn accept(&mut self) {
        let Some(listener) = self.listener.take() else { return };
        let _ = std::fs::remove_file(&self.path);
        if let Ok((conn, _)) = listener.accept() {
            self.conn = Some(conn);
        } else {
            self.detached = true;
        }
    }

    fn lose_conn(&mut self) {
        self.conn = None;
        self.detached = true;
        self.pending.clear();
    }

    /// One frame from sbatchd: input, its end, the terminal's size, or a signal (`bsub -Ip`'s
    /// keys) for the pseudo-terminal's foreground process group.
    fn serve_conn(&mut self) {
        let Some(conn) = self.conn.as_mut() else { return };
        let frame = read_frame(conn, wire::INTERACTIVE_BODY_BYTES_MAX);
        match frame {
            Ok((Operation::InteractiveData, body)) => {
                match lava_xdr::from_bytes::<wire::InteractiveData>(&body, &LIMITS) {
                    Ok(data) if data.stream == wire::STREAM_STDIN && data.data.is_empty() => {
                        if self.pty {
                            self.pending.push(END_OF_INPUT);
                        } else {
                            self.close_input = true;
                            self.write_input();
                        }
                    }
                    Ok(data) if data.stream == wire::STREAM_STDIN => {
                        self.pending.extend_from_slice(&data.data);
                        self.write_input();
                    }
                    _ => self.lose_conn(),
                }
            }
            Ok((Operation::InteractiveWinsize, body)) => {
                match lava_xdr::from_bytes::<wire::InteractiveWinsize>(&body, &LIMITS) {
                    Ok(size) => {
                        if let (true, Some(input)) = (self.pty, &self.input) {
                            let rows = u16::try_from(size.rows).unwrap_or(u16::MAX);
                            let cols = u16::try_from(size.cols).unwrap_or(u16::MAX);
                            let _ = sys::set_window_size(input.as_fd(), rows, cols);
                        }
                    }
                    Err(_) => self.lose_conn(),
                }
            }
            Ok((Operation::InteractiveSignal, body)) => {
                match lava_xdr::from_bytes::<wire::InteractiveSignal>(&body, &LIMITS) {
                    Ok(signal) if (1..=64).contains(&signal.signal) => {
                        if let (true, Some(input)) = (self.pty, &self.input)
                            && let Ok(pgrp) = sys::foreground_group(input.as_fd())
                        {
                            let _ = sys::kill_group(pgrp, signal.signal as i32);
                            // The job is a session of its own whose parent (the shepherd)
                            // is in another, so its process groups are orphaned and the
                            // kernel drops a SIGTSTP whose action is to stop: SIGSTOP does
                            // what the suspend key does to a local program (a handler of
                            // SIGTSTP still sees it, once continued).
                            if signal.signal as i32 == libc::SIGTSTP {
                                let _ = sys::kill_group(pgrp, libc::SIGSTOP);
                            }
                        }
                    }
                    _ => self.lose_conn(),
                }
            }
            _ => self.lose_conn(),
        }
    }

    /// Writes what it can of the pending input (non-blocking).
    fn write_input(&mut self) {
        let Some(input) = &self.input else {
            self.pending.clear();
            return;
        };
        let mut file = std::fs::File::from(input.try_clone().expect("dup of our own descriptor"));
        while !self.pending.is_empty() {
            match file.write(&self.pending) {
                Ok(0) => break,
                Ok(n) => {
                    self.pending.drain(..n);
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    // The job closed its input: what is pending is dropped.
                    self.pending.clear();
                    self.input = None;
                    return;
                }
            }
        }
        if self.close_input && self.pending.is_empty() {
            self.input = None;
        }
    }

    /// Reads one chunk of an output and sends it (or drops it once detached).
    fn read_output(&mut self, idx: usize) -> bool {
        let Some((stream, fd)) = self.outputs.get(idx) else { return false };
        let mut buf = vec![0u8; wire::INTERACTIVE_DATA_BYTES_MAX as usize];
        let mut file = std::fs::File::from(fd.try_clone().expect("dup of our own descriptor"));
        let n = loop {
            match file.read(&mut buf) {
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return false,
                Ok(0) | Err(_) => {
                    // End of file, or EIO from a terminal whose every user has gone.
                    self.outputs.remove(idx);
                    return false;
                }
                Ok(n) => break n,
            }
        };
        let stream = *stream;
        if let Some(conn) = self.conn.as_mut() {
            let data = wire::InteractiveData { stream, data: buf[..n].to_vec() };
            if write_frame(conn, Operation::InteractiveData, &encode(&data)).is_err() {
                self.lose_conn();
            }
        }
        true
    }

    /// After the job's end: sends whatever its streams still hold (never waiting).
    fn drain(&mut self) {
        let mut idx = 0;
        while idx < self.outputs.len() && self.conn.is_some() {
            let before = self.outputs.len();
            if !self.read_output(idx) && self.outputs.len() == before {
                idx += 1;
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Slot {
    End,
    Listener,
    Conn,
    Input,
    Output(usize),
}

/// The wait status the shepherd's main thread wrote (a lost job's if it could not).
fn read_status(end: &OwnedFd) -> i32 {
    let mut bytes = [0u8; 4];
    let mut file = std::fs::File::from(end.try_clone().expect("dup of our own descriptor"));
    match file.read_exact(&mut bytes) {
        Ok(()) => i32::from_be_bytes(bytes),
        Err(_) => crate::LOST_WAIT_STATUS,
    }
}
