//! `bsub -I`, `-Ip`, `-Is`: an interactive batch job, its standard streams connected to this
//! terminal through the execution host's sbatchd (docs/protocols/batch.md, "Interactive jobs";
//! docs/commands.md, "bsub -I").
//!
//! After the submission line, `bsub` prints `<<Waiting for dispatch ...>>` on standard error
//! and polls mbatchd until the job starts (`<<Starting on HOST>>`), or ends without starting
//! (`<<Terminated while pending>>`, exit 126, as `bsub -K`). It then connects to the
//! execution host's sbatchd (the host's `LAVA_ADDR` or name, and its `LAVA_SBD_PORT` or
//! `LSB_SBD_PORT`), sends INTERACTIVE_ATTACH with a credential its local sbatchd sealed for
//! this cluster's sbatchd, and relays: its standard input to the job (unless `-i` gave the job
//! a file), the job's output to its standard output, the job's standard error to its standard
//! output too unless `LSF_INTERACTIVE_STDERR=y` (environment or lsf.conf) keeps it on standard
//! error, as LSF does. With `-Ip` or `-Is` on a terminal, the terminal is put in raw mode and
//! its size is sent whenever it changes; the terminal's settings come back on every way out:
//! a normal end, an error, and, through the watcher process of `bsub -K`, a `bsub` killed by a
//! signal. The two differ in the interrupt, quit and suspend keys (the terminal's `intr`,
//! `quit` and `susp` characters, Ctrl-C, Ctrl-\ and Ctrl-Z by default), as in LSF:
//! - `-Is` (shell mode) passes them as characters to the job's pseudo-terminal, whose line
//!   discipline makes the signals, or not: an application that redefines the keys (a shell's
//!   line editor, an editor) gets them as characters;
//! - `-Ip` handles them here ([`Keys`]): Ctrl-C and Ctrl-\ become SIGINT and SIGQUIT for the
//!   job's foreground process group (INTERACTIVE_SIGNAL), whatever the job did to its
//!   terminal; Ctrl-Z sends SIGTSTP to it, gives this terminal its settings back and stops
//!   `bsub` itself (SIGSTOP), as a local program would stop; when `bsub` is continued (`fg`)
//!   it takes the terminal again and sends SIGCONT to the job.
//!
//! `bsub` exits with the job's exit code (128 + the signal for a job killed by one). If `bsub`
//! goes away, sbatchd kills the job (it ends EXIT); a job still pending is killed by the
//! watcher.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lava_batch_wire::{self as wire, Operation};
use lava_conf::BaseConfig;
use lava_xdr::frame::{FrameHeader, HEADER_BYTES};

use crate::bsub::Done;
use crate::bsubk::{self, Seen};
use crate::client::{self, Client};
use crate::term::Term;

/// Which interactive option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `-I`: pipes.
    Plain,
    /// `-Ip`: a pseudo-terminal.
    Pty,
    /// `-Is`: a pseudo-terminal in shell mode.
    Shell,
}

impl Mode {
    /// The bits of `file_flags` ([`wire::submit_flags`]).
    pub fn flags(self) -> u32 {
        use wire::submit_flags::{INTERACTIVE, PTY, PTY_SHELL};
        match self {
            Mode::Plain => INTERACTIVE,
            Mode::Pty => INTERACTIVE | PTY,
            Mode::Shell => INTERACTIVE | PTY | PTY_SHELL,
        }
    }
}

/// How long `bsub` tries to attach once the job runs (the job's sbatchd may still be starting
/// its shepherd, or restarting).
const ATTACH_TRY_SECS: u64 = 60;
/// Pause between two attach attempts.
const ATTACH_RETRY_MS: u64 = 200;
/// How often the terminal's size is looked at.
const WINSIZE_POLL_MS: u64 = 250;
/// First and longest pause between two polls of the job's state.
const POLL_MS_FIRST: u64 = 100;
const POLL_MS_MAX: u64 = 1000;

/// Runs the interactive part of `bsub` for job `job_id` (submitted already).
pub fn run(
    term: &mut Term,
    config: &BaseConfig,
    client: &mut Client,
    job_id: u32,
    mode: Mode,
    input_file: bool,
) -> Done {
    term.err("<<Waiting for dispatch ...>>\n");
    let pty = mode != Mode::Plain && rustix::termios::isatty(std::io::stdin());
    let watcher = bsubk::start_watcher_guarding(term, job_id, pty);
    let host = match wait_started(term, client, job_id) {
        Ok(host) => host,
        Err(done) => return done,
    };
    term.err(&format!("<<Starting on {host}>>\n"));
    let size = if pty { rustix::termios::tcgetwinsize(std::io::stdin()).ok() } else { None };
    let (rows, cols) = size.map_or((0, 0), |size| (u32::from(size.ws_row), u32::from(size.ws_col)));
    let stream = match attach(config, client, job_id, &host, rows, cols) {
        Ok(stream) => stream,
        Err(message) => {
            // Killed before it could attach, or its host is unreachable: say so, and end as
            // the job ends.
            term.err(&format!("bsub: cannot attach to job <{job_id}> on {host}: {message}\n"));
            drop(watcher);
            return bsubk::wait_for_end(term, client, job_id);
        }
    };
    let raw = if pty { RawTerminal::enter() } else { None };
    let keys = raw.as_ref().filter(|_| mode == Mode::Pty).map(Keys::of);
    let status = relay(stream, pty, input_file, keys);
    drop(raw);
    drop(watcher);
    match status {
        Some(wait_status) => Done::Waited(exit_code(wait_status)),
        None => {
            term.err("bsub: the connection to the job was lost\n");
            bsubk::wait_for_end(term, client, job_id)
        }
    }
}

/// `bsub`'s exit code for a job's wait status: its exit code, or 128 + the signal.
pub fn exit_code(wait_status: i32) -> u8 {
    let signal = wait_status & 0x7f;
    let code = if signal == 0 { (wait_status >> 8) & 0xff } else { 128 + signal };
    u8::try_from(code).unwrap_or(255)
}

/// Polls the job until it starts (its first host) or ends without starting.
fn wait_started(term: &mut Term, client: &mut Client, job_id: u32) -> Result<String, Done> {
    let query = bsubk::job_query(job_id);
    let mut pause_ms = POLL_MS_FIRST;
    loop {
        let reply: wire::JobQueryReply =
            match client.call(Operation::JobQuery, Operation::JobQueryReply, &query) {
                Ok(reply) => reply,
                Err(error) => {
                    term.err(&format!("{error}\n"));
                    return Err(Done::Plain(false));
                }
            };
        let Some(job) = reply.jobs.iter().find(|job| job.job.job_id == job_id) else {
            term.err(&format!("Job <{job_id}> is not found\n"));
            return Err(Done::Plain(false));
        };
        match bsubk::seen(job) {
            Seen::Pending => {}
            Seen::Started(host) => return Ok(host),
            // Ended before the terminal could attach: its output went nowhere.
            Seen::Finished { code, started_on: Some(host) } => {
                term.err(&format!("<<Starting on {host}>>\n<<Job is finished>>\n"));
                return Err(Done::Waited(code));
            }
            Seen::Finished { code, started_on: None } => {
                term.err("<<Terminated while pending>>\n");
                return Err(Done::Waited(code));
            }
        }
        std::thread::sleep(Duration::from_millis(pause_ms));
        pause_ms = (pause_ms * 2).min(POLL_MS_MAX);
    }
}

/// Whether mbatchd still says job `job_id` runs on `host` (`false` when it cannot say).
fn still_started_on(client: &mut Client, job_id: u32, host: &str) -> bool {
    let Ok(reply) = client.call::<_, wire::JobQueryReply>(
        Operation::JobQuery,
        Operation::JobQueryReply,
        &bsubk::job_query(job_id),
    ) else {
        return false;
    };
    reply
        .jobs
        .iter()
        .find(|job| job.job.job_id == job_id)
        .is_some_and(|job| matches!(bsubk::seen(job), Seen::Started(on) if on == host))
}

/// The addresses of `host`'s sbatchd.
fn sbd_addrs(config: &BaseConfig, host: &str) -> Result<Vec<SocketAddr>, String> {
    let entry = config.cluster.host(host).ok_or_else(|| format!("{host} is not a host of the cluster"))?;
    let port = entry.sbd_tcp_port(&config.lsf);
    match entry.addr {
        Some(ip) => Ok(vec![SocketAddr::new(ip, port)]),
        None => (entry.name.as_str(), port)
            .to_socket_addrs()
            .map(Iterator::collect)
            .map_err(|error| format!("cannot resolve {host}: {error}")),
    }
}

/// Connects to the job's sbatchd and attaches, trying again while the job is not ready there.
fn attach(
    config: &BaseConfig,
    client: &mut Client,
    job_id: u32,
    host: &str,
    rows: u32,
    cols: u32,
) -> Result<TcpStream, String> {
    let addrs = sbd_addrs(config, host)?;
    let deadline = Instant::now() + Duration::from_secs(ATTACH_TRY_SECS);
    let mut last = String::from("no address");
    while Instant::now() < deadline {
        for addr in &addrs {
            let mut stream = match TcpStream::connect_timeout(addr, Duration::from_secs(5)) {
                Ok(stream) => stream,
                Err(error) => {
                    last = format!("{addr}: {error}");
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let credential =
                client.credential_for(wire::AUDIENCE_SBATCHD).map_err(|error| error.to_string())?;
            let request = wire::InteractiveAttach {
                credential,
                job: wire::WireJobRef { job_id, array_index: 0 },
                rows,
                cols,
            };
            let body = lava_xdr::to_bytes(&request).map_err(|error| error.to_string())?;
            let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
            let answer = write_frame(&mut stream, Operation::InteractiveAttach, &body)
                .and_then(|()| read_frame(&mut stream, wire::INTERACTIVE_BODY_BYTES_MAX));
            let reply: wire::InteractiveAttachReply = match answer {
                Ok((Operation::InteractiveAttachReply, body)) => {
                    lava_xdr::from_bytes(&body, &lava_xdr::Limits::DEFAULT)
                        .map_err(|error| error.to_string())?
                }
                Ok((operation, _)) => return Err(format!("sbatchd answered {}", operation.name())),
                Err(error) => {
                    last = format!("{addr}: {error}");
                    continue;
                }
            };
            match reply.code {
                wire::ATTACH_OK => {
                    let _ = stream.set_read_timeout(None);
                    return Ok(stream);
                }
                wire::ATTACH_NOT_READY => last = reply.message,
                // mbatchd says the job runs there once it dispatched it: the job's start
                // may not have reached its sbatchd yet. Not there while mbatchd still says
                // it runs there means not there yet.
                wire::ATTACH_NOT_FOUND if still_started_on(client, job_id, host) => last = reply.message,
                _ => return Err(reply.message),
            }
        }
        std::thread::sleep(Duration::from_millis(ATTACH_RETRY_MS));
    }
    Err(last)
}

/// Relays until INTERACTIVE_EXIT (its wait status) or the connection's end (`None`).
fn relay(stream: TcpStream, pty: bool, input_file: bool, keys: Option<Keys>) -> Option<i32> {
    let writer = Arc::new(Mutex::new(stream.try_clone().ok()?));
    if !input_file {
        let writer = Arc::clone(&writer);
        std::thread::spawn(move || forward_input(&writer, keys.as_ref()));
    }
    if pty {
        let writer = Arc::clone(&writer);
        std::thread::spawn(move || forward_size(&writer));
    }
    let stderr_apart = client::is_yes(std::env::var("LSF_INTERACTIVE_STDERR").ok().as_deref())
        || client::load_config()
            .ok()
            .and_then(|config| client::lsf_param(&config, "LSF_INTERACTIVE_STDERR"))
            .is_some_and(|value| client::is_yes(Some(&value)));
    let mut reader = stream;
    loop {
        let (operation, body) = read_frame(&mut reader, wire::INTERACTIVE_BODY_BYTES_MAX).ok()?;
        let limits = lava_xdr::Limits::DEFAULT;
        match operation {
            Operation::InteractiveData => {
                let data: wire::InteractiveData = lava_xdr::from_bytes(&body, &limits).ok()?;
                if data.stream == wire::STREAM_STDERR && stderr_apart {
                    let mut err = std::io::stderr().lock();
                    let _ = err.write_all(&data.data).and_then(|()| err.flush());
                } else {
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(&data.data).and_then(|()| out.flush());
                }
            }
            Operation::InteractiveExit => {
                let exit: wire::InteractiveExit = lava_xdr::from_bytes(&body, &limits).ok()?;
                return Some(exit.wait_status);
            }
            _ => return None,
        }
    }
}

/// Standard input to the job; its end as an empty frame. With `keys` (`-Ip`), the interrupt,
/// quit and suspend characters are handled here instead ([`Keys`]).
fn forward_input(writer: &Mutex<TcpStream>, keys: Option<&Keys>) {
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0u8; wire::INTERACTIVE_DATA_BYTES_MAX as usize];
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(n) => n,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => 0,
        };
        let mut rest = &buf[..n];
        while let Some((at, key)) = keys.and_then(|keys| keys.find(rest)) {
            if at > 0 && !send_input(writer, &rest[..at]) {
                return;
            }
            rest = &rest[at + 1..];
            let keys = keys.expect("found by the keys");
            if !keys.press(writer, key) {
                return;
            }
        }
        if (n == 0 || !rest.is_empty()) && !send_input(writer, rest) {
            return;
        }
        if n == 0 {
            return;
        }
    }
}

/// One INTERACTIVE_DATA of standard input (empty: its end); false when the job is gone.
fn send_input(writer: &Mutex<TcpStream>, data: &[u8]) -> bool {
    let data = wire::InteractiveData { stream: wire::STREAM_STDIN, data: data.to_vec() };
    let Ok(body) = lava_xdr::to_bytes(&data) else { return false };
    let Ok(mut stream) = writer.lock() else { return false };
    write_frame(&mut *stream, Operation::InteractiveData, &body).is_ok()
}

/// One INTERACTIVE_SIGNAL; false when the job is gone.
fn send_signal(writer: &Mutex<TcpStream>, signal: rustix::process::Signal) -> bool {
    let body = lava_xdr::to_bytes(&wire::InteractiveSignal { signal: signal.as_raw() as u32 });
    let Ok(body) = body else { return false };
    let Ok(mut stream) = writer.lock() else { return false };
    write_frame(&mut *stream, Operation::InteractiveSignal, &body).is_ok()
}

/// `bsub -Ip`'s own handling of the terminal's interrupt, quit and suspend keys (the module
/// doc): the characters, and the terminal's settings before and in raw mode.
struct Keys {
    /// `intr`, `quit`, `susp` (0: disabled), each with the signal it sends the job.
    signals: [(u8, rustix::process::Signal); 3],
    saved: rustix::termios::Termios,
    raw: rustix::termios::Termios,
}

impl Keys {
    fn of(terminal: &RawTerminal) -> Keys {
        use rustix::process::Signal;
        use rustix::termios::SpecialCodeIndex;
        let codes = &terminal.saved.special_codes;
        Keys {
            signals: [
                (codes[SpecialCodeIndex::VINTR], Signal::INT),
                (codes[SpecialCodeIndex::VQUIT], Signal::QUIT),
                (codes[SpecialCodeIndex::VSUSP], Signal::TSTP),
            ],
            saved: terminal.saved.clone(),
            raw: terminal.raw.clone(),
        }
    }

    /// The first key of `input`: its place and signal.
    fn find(&self, input: &[u8]) -> Option<(usize, rustix::process::Signal)> {
        input.iter().enumerate().find_map(|(at, byte)| {
            self.signals.iter().find(|(key, _)| *key != 0 && key == byte).map(|(_, signal)| (at, *signal))
        })
    }

    /// The key for `signal` was typed: the job gets the signal; for SIGTSTP `bsub` stops too,
    /// its terminal as it was, until it is continued. False when the job is gone.
    fn press(&self, writer: &Mutex<TcpStream>, signal: rustix::process::Signal) -> bool {
        use rustix::termios::{OptionalActions, tcsetattr};
        if !send_signal(writer, signal) {
            return false;
        }
        if signal != rustix::process::Signal::TSTP {
            return true;
        }
        let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, &self.saved);
        let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::STOP);
        // Another thread may take the stop: this one stops at its next call into the kernel,
        // which this sleep is, and so never runs on before the stop.
        std::thread::sleep(Duration::from_millis(100));
        // Continued (`fg`, `kill -CONT`): the terminal is the job's again.
        let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, &self.raw);
        send_signal(writer, rustix::process::Signal::CONT)
    }
}

/// The terminal's size to the job whenever it changes.
fn forward_size(writer: &Mutex<TcpStream>) {
    let mut last =
        rustix::termios::tcgetwinsize(std::io::stdin()).ok().map(|size| (size.ws_row, size.ws_col));
    loop {
        std::thread::sleep(Duration::from_millis(WINSIZE_POLL_MS));
        let now = rustix::termios::tcgetwinsize(std::io::stdin()).ok().map(|size| (size.ws_row, size.ws_col));
        if now == last {
            continue;
        }
        last = now;
        let Some((rows, cols)) = now else { continue };
        let size = wire::InteractiveWinsize { rows: u32::from(rows), cols: u32::from(cols) };
        let Ok(body) = lava_xdr::to_bytes(&size) else { return };
        let Ok(mut stream) = writer.lock() else { return };
        if write_frame(&mut *stream, Operation::InteractiveWinsize, &body).is_err() {
            return;
        }
    }
}

/// The terminal in raw mode until dropped.
struct RawTerminal {
    saved: rustix::termios::Termios,
    raw: rustix::termios::Termios,
}

impl RawTerminal {
    fn enter() -> Option<RawTerminal> {
        let saved = rustix::termios::tcgetattr(std::io::stdin()).ok()?;
        let mut raw = saved.clone();
        raw.make_raw();
        rustix::termios::tcsetattr(std::io::stdin(), rustix::termios::OptionalActions::Now, &raw).ok()?;
        Some(RawTerminal { saved, raw })
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        let _ =
            rustix::termios::tcsetattr(std::io::stdin(), rustix::termios::OptionalActions::Now, &self.saved);
    }
}

fn write_frame(to: &mut impl Write, operation: Operation, body: &[u8]) -> std::io::Result<()> {
    let length = u32::try_from(body.len()).map_err(|_| std::io::Error::other("frame over 4 GiB"))?;
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

fn read_frame(from: &mut impl Read, body_max: u32) -> std::io::Result<(Operation, Vec<u8>)> {
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let mut head = [0u8; HEADER_BYTES];
    from.read_exact(&mut head)?;
    let header = FrameHeader::parse(&head).map_err(|error| invalid(error.to_string()))?;
    header.check_version(wire::BATCH_VERSION).map_err(|error| invalid(error.to_string()))?;
    if header.length > body_max {
        return Err(invalid(format!("a frame of {} bytes", header.length)));
    }
    let operation = Operation::from_code(header.operation)
        .ok_or_else(|| invalid(format!("operation {}", header.operation)))?;
    let mut body = vec![0u8; header.length as usize];
    from.read_exact(&mut body)?;
    Ok((operation, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: bsub's exit code is the job's exit code, or 128 + the signal that killed it.
    #[test]
    fn exit_codes_follow_the_wait_status() {
        assert_eq!(exit_code(0), 0);
        assert_eq!(exit_code(3 << 8), 3);
        assert_eq!(exit_code(255 << 8), 255);
        assert_eq!(exit_code(9), 137);
        assert_eq!(exit_code(1), 129);
    }

    // Goal: each option sets its bits.
    #[test]
    fn modes_set_their_flags() {
        use wire::submit_flags::{INTERACTIVE, PTY, PTY_SHELL};
        assert_eq!(Mode::Plain.flags(), INTERACTIVE);
        assert_eq!(Mode::Pty.flags(), INTERACTIVE | PTY);
        assert_eq!(Mode::Shell.flags(), INTERACTIVE | PTY | PTY_SHELL);
    }
}
