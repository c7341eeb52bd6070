//! SBD_PEEK: the output a running job has written so far, for `bpeek` (relayed by
//! mbatchd, which checked that the caller owns the job or administers the cluster).
//!
//! Any job whose process was started and whose record sbatchd still holds can be read
//! (mbatchd only relays peeks at started jobs). The answer is at most
//! `wire::PEEK_BYTES_MAX` bytes of the job's standard output file (the `-o` file, else the
//! spool file; see [`crate::launch::standard_files`]) from the asked offset.
//!
//! # Read as the job's user, never as root
//! The output path is the user's to choose, and so is every folder on it: she can swap a
//! folder of it for a symbolic link at any time, to a folder she cannot read or to
//! `/dev`. sbatchd runs as root, so it never opens that path itself. Each peek is read by
//! a reader of its own, `lava-shepherd --peek UID GID USER OFFSET PATH` (the program
//! installed beside sbatchd, [`crate::launch::shepherd_program`]; [`reader_main`]), which:
//! 1. closes every descriptor but its standard streams (it may have inherited one that
//!    sbatchd's launcher had made inheritable for the zygote at that moment), and arms an
//!    alarm that ends it after twice [`READ_TIMEOUT`] even if sbatchd is gone;
//! 2. becomes the job's user for good (its supplementary groups, then gid, then uid:
//!    [`crate::sys::become_user`]), unless it already is that user;
//! 3. resolves the path as that user, without following a symbolic link at its last
//!    component, into an `O_PATH` handle: nothing is opened yet, so a FIFO or a device
//!    there sees no open (no driver's open runs, no FIFO writer is woken);
//! 4. takes the handle's `fstat`: anything but a regular file owned by the job's user (any
//!    file for a root job) is refused;
//! 5. only then opens that very file for reading (through `/proc/self/fd`, so the path
//!    cannot be swapped in between), and reads at most `PEEK_BYTES_MAX` bytes from the
//!    offset;
//! 6. writes its answer on its standard output ([`encode_answer`]) and exits.
//!
//! The kernel checks every step with the user's own credentials, so a peek tells her only
//! what she could find out herself: a path through a folder she cannot search fails the
//! same way ("Permission denied") whether the file there exists or not; a file not created
//! yet (`ENOENT`) reads as empty output, as before. Errors are the kernel's words, without
//! the errno number.
//!
//! # In sbatchd
//! sbatchd's loop only decides what to read ([`decide`], from the job's record: the path,
//! the user, the offset) and starts the reader with tokio (no wait on the loop); a task
//! collects its answer and queues SBD_PEEK_REPLY. A reader that has not answered within
//! [`READ_TIMEOUT`] (a path on a hung file system, a FUSE file system of the user's) is
//! killed and the peek fails saying so; mbatchd gives up on a peek after 15 s. At most
//! [`IN_FLIGHT_MAX`] readers run at once, [`IN_FLIGHT_PER_USER_MAX`] for one job user;
//! a peek over either cap is refused at once ("too many peeks"), so one user's slow paths
//! never hold up another's peeks for long.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lava_batch_wire as wire;
use lava_sbd::JobRecord;
use tokio::io::AsyncReadExt;

use crate::{launch, sys};

/// The flag that makes `lava-shepherd` a peek reader.
pub const READER_FLAG: &str = "--peek";
/// Longest a reader may take to answer before it is killed.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Readers running at once on this host.
pub const IN_FLIGHT_MAX: usize = 16;
/// Readers running at once for the jobs of one user.
pub const IN_FLIGHT_PER_USER_MAX: usize = 4;
/// First byte of a reader's answer: the bytes read follow.
const ANSWER_DATA: u8 = b'D';
/// First byte of a reader's answer: why nothing was read follows.
const ANSWER_REFUSED: u8 = b'E';
/// Longest message a reader gives (a longer one is cut).
const MESSAGE_BYTES_MAX: usize = 1024;
/// What a reader says of a path that is not the job user's regular file.
const NOT_OWNED: &str = "not a regular file owned by the job's user";

fn refusal(code: u32, message: String) -> wire::PeekReply {
    wire::PeekReply { code, message, data: Vec::new(), next_offset: 0 }
}

/// What one peek reads, decided on sbatchd's loop from the job's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeekRead {
    /// The job as messages show it (`123`, `123[4]`).
    pub shown: String,
    /// The job's standard output file.
    pub path: String,
    /// The job's user name (for its supplementary groups).
    pub user: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
    /// First byte wanted.
    pub offset: u64,
}

impl PeekRead {
    /// The reply for what the reader said.
    fn reply(&self, outcome: Result<Vec<u8>, String>) -> wire::PeekReply {
        match outcome {
            Ok(data) => {
                let next_offset = self.offset + data.len() as u64;
                wire::PeekReply { code: wire::PEEK_OK, message: String::new(), data, next_offset }
            }
            Err(problem) => self.failed(&problem),
        }
    }

    /// A `PEEK_FAILED` reply naming the job and the file.
    pub fn failed(&self, problem: &str) -> wire::PeekReply {
        refusal(wire::PEEK_FAILED, format!("Job <{}> : cannot read {}: {problem}", self.shown, self.path))
    }
}

/// What to read for `request`, given the job's record (`None`: sbatchd holds no such job)
/// and its job file name; or the answer when there is nothing to read.
pub fn decide(
    record: Option<(&JobRecord, &str)>,
    request: &wire::PeekRequest,
) -> Result<PeekRead, wire::PeekReply> {
    let job = request.job;
    let shown = if job.array_index == 0 {
        job.job_id.to_string()
    } else {
        format!("{}[{}]", job.job_id, job.array_index)
    };
    // A finished job's record stays (as a tombstone) for a day: `bpeek -f` gets the last
    // bytes a job wrote just before it ended.
    let Some((record, jobfile)) = record.filter(|(record, _)| record.is_spawned()) else {
        return Err(refusal(wire::PEEK_NOT_RUNNING, format!("Job <{shown}> : Not a running job")));
    };
    let spec = &record.run_spec;
    let (path, _, _) = launch::standard_files(spec, jobfile);
    Ok(PeekRead {
        shown,
        path,
        user: spec.exec_user.as_str().to_owned(),
        uid: spec.exec_uid,
        gid: spec.exec_gid,
        offset: request.offset,
    })
}

/// The readers running now, in all and per job user; see the module doc.
#[derive(Clone, Debug)]
pub struct Peeks {
    program: PathBuf,
    timeout: Duration,
    in_flight: Arc<Mutex<InFlight>>,
}

#[derive(Debug, Default)]
struct InFlight {
    total: usize,
    per_uid: BTreeMap<u32, usize>,
}

/// One reader's place among [`Peeks`]; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    uid: u32,
    in_flight: Arc<Mutex<InFlight>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        in_flight.total = in_flight.total.saturating_sub(1);
        if let Some(count) = in_flight.per_uid.get_mut(&self.uid) {
            *count -= 1;
            if *count == 0 {
                in_flight.per_uid.remove(&self.uid);
            }
        }
    }
}

impl Peeks {
    /// Readers are `program --peek ...` (the `lava-shepherd` beside sbatchd).
    pub fn new(program: PathBuf) -> Peeks {
        Peeks { program, timeout: READ_TIMEOUT, in_flight: Arc::default() }
    }

    /// A place for one more reader for the jobs of `uid`, unless a cap is reached.
    pub fn slot(&self, uid: u32) -> Option<Slot> {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let users = in_flight.per_uid.get(&uid).copied().unwrap_or(0);
        if in_flight.total >= IN_FLIGHT_MAX || users >= IN_FLIGHT_PER_USER_MAX {
            return None;
        }
        in_flight.total += 1;
        *in_flight.per_uid.entry(uid).or_insert(0) += 1;
        Some(Slot { uid, in_flight: Arc::clone(&self.in_flight) })
    }

    /// Runs a reader for `read` and turns its answer into the reply (never fails: every
    /// problem is a `PEEK_FAILED` reply). Must be called within a tokio runtime.
    pub async fn read(&self, read: &PeekRead) -> wire::PeekReply {
        let mut command = tokio::process::Command::new(&self.program);
        command
            .arg(READER_FLAG)
            .arg(read.uid.to_string())
            .arg(read.gid.to_string())
            .arg(&read.user)
            .arg(read.offset.to_string())
            .arg(&read.path)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let limit = 1 + u64::from(wire::PEEK_BYTES_MAX);
        let run = async {
            let mut child = command.spawn()?;
            let mut answer = Vec::new();
            if let Some(stdout) = child.stdout.take() {
                stdout.take(limit).read_to_end(&mut answer).await?;
            }
            child.wait().await?;
            io::Result::Ok(answer)
        };
        // Dropped at the deadline, the child is killed (kill_on_drop) and reaped by tokio.
        match tokio::time::timeout(self.timeout, run).await {
            Ok(Ok(answer)) => read.reply(decode_answer(&answer)),
            Ok(Err(err)) => {
                tracing::warn!(job = %read.shown, "cannot run the peek reader {}: {err}", self.program.display());
                read.failed("sbatchd cannot start its reader")
            }
            Err(_) => read.failed(&format!("no answer within {} s", self.timeout.as_secs_f32())),
        }
    }
}

/// A reader's answer: [`ANSWER_DATA`] and the bytes, or [`ANSWER_REFUSED`] and why.
pub fn encode_answer(outcome: &Result<Vec<u8>, String>) -> Vec<u8> {
    match outcome {
        Ok(data) => std::iter::once(ANSWER_DATA).chain(data.iter().copied()).collect(),
        Err(message) => {
            let mut cut = message.len().min(MESSAGE_BYTES_MAX);
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            std::iter::once(ANSWER_REFUSED).chain(message[..cut].bytes()).collect()
        }
    }
}

/// What [`encode_answer`] wrote; anything else (a reader that died) is a failure.
pub fn decode_answer(answer: &[u8]) -> Result<Vec<u8>, String> {
    match answer.split_first() {
        Some((&ANSWER_DATA, data)) if data.len() <= wire::PEEK_BYTES_MAX as usize => Ok(data.to_vec()),
        Some((&ANSWER_REFUSED, message)) => {
            Err(String::from_utf8_lossy(&message[..message.len().min(MESSAGE_BYTES_MAX)]).into_owned())
        }
        _ => Err("the reader ended without an answer".to_owned()),
    }
}

// ---------------------------------------------------------------------------------------
// The reader process.

/// The reader's command line, after [`READER_FLAG`].
#[derive(Debug, PartialEq, Eq)]
struct ReaderArgs {
    uid: u32,
    gid: u32,
    user: String,
    offset: u64,
    path: PathBuf,
}

fn parse_reader_args(args: impl IntoIterator<Item = OsString>) -> Option<ReaderArgs> {
    let args: Vec<OsString> = args.into_iter().collect();
    let [uid, gid, user, offset, path] = args.as_slice() else { return None };
    fn number<T: std::str::FromStr>(arg: &OsString) -> Option<T> {
        arg.to_str()?.parse().ok()
    }
    Some(ReaderArgs {
        uid: number(uid)?,
        gid: number(gid)?,
        user: user.to_str()?.to_owned(),
        offset: number(offset)?,
        path: PathBuf::from(path),
    })
}

/// `main` of `lava-shepherd --peek UID GID USER OFFSET PATH` (`args`: what follows
/// `--peek`): steps 1 to 6 of the module doc. The answer goes to standard output; the exit
/// status is 0 once an answer is written.
pub fn reader_main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    // Step 1, before anything else: nothing sbatchd holds stays open here.
    if let Err(err) = sys::close_descriptors_except(&[]) {
        return answer(&Err(format!("the reader cannot close its descriptors: {err}")));
    }
    // sbatchd kills a reader at READ_TIMEOUT; one whose sbatchd died ends by itself.
    sys::end_after(u32::try_from(READ_TIMEOUT.as_secs() * 2).unwrap_or(u32::MAX));
    let Some(args) = parse_reader_args(args) else {
        eprintln!(
            "usage: lava-shepherd {READER_FLAG} UID GID USER OFFSET PATH (only sbatchd starts readers)"
        );
        return ExitCode::from(crate::shepherd::EXIT_USAGE);
    };
    if sys::effective_uid() != args.uid {
        let become_user = sys::group_list(&args.user, args.gid)
            .and_then(|groups| sys::become_user(args.uid, args.gid, &groups));
        if let Err(err) = become_user {
            return answer(&Err(format!("cannot read as the job's user: {}", describe(&err))));
        }
    }
    answer(&read_regular(&args.path, args.uid, args.offset))
}

/// Writes `outcome` to standard output (step 6).
fn answer(outcome: &Result<Vec<u8>, String>) -> ExitCode {
    let mut out = io::stdout().lock();
    match out.write_all(&encode_answer(outcome)).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

/// An I/O error in the kernel's words, without Rust's "(os error N)".
fn describe(err: &io::Error) -> String {
    let text = err.to_string();
    match text.find(" (os error ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// Steps 3 to 5 of the module doc, with this process's credentials: up to
/// `PEEK_BYTES_MAX` bytes of `path` from `offset`, if it is a regular file owned by `uid`
/// (any regular file when `uid` is 0); a file not created yet reads as empty.
fn read_regular(path: &Path, uid: u32, offset: u64) -> Result<Vec<u8>, String> {
    // O_PATH: the file is found, not opened (no FIFO or device sees an open); O_NOFOLLOW:
    // a symbolic link at the last component is the handle's file itself, refused below.
    let handle = OpenOptions::new().read(true).custom_flags(libc::O_PATH | libc::O_NOFOLLOW).open(path);
    let handle = match handle {
        Ok(handle) => handle,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(describe(&err)),
    };
    let meta = handle.metadata().map_err(|err| describe(&err))?;
    if !meta.is_file() || (uid != 0 && meta.uid() != uid) {
        return Err(NOT_OWNED.to_owned());
    }
    // The same file, opened through the handle: the path is not looked up again.
    let mut file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{}", handle.as_raw_fd()))
        .map_err(|err| describe(&err))?;
    let opened = file.metadata().map_err(|err| describe(&err))?;
    if (opened.dev(), opened.ino()) != (meta.dev(), meta.ino()) {
        return Err(NOT_OWNED.to_owned());
    }
    let mut data = Vec::new();
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.take(u64::from(wire::PEEK_BYTES_MAX)).read_to_end(&mut data))
        .map_err(|err| describe(&err))?;
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a file of the user is read from the offset, bounded; a missing file is
    // empty; a link, a device, a folder or another user's file is refused.
    #[test]
    fn only_the_users_regular_files_are_read() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("out");
        std::fs::write(&path, "hello world").expect("write");
        let me = std::fs::metadata(&path).expect("stat").uid();
        assert_eq!(read_regular(&path, me, 6), Ok(b"world".to_vec()));
        assert_eq!(read_regular(&dir.path().join("none"), me, 0), Ok(Vec::new()));
        assert_eq!(read_regular(&dir.path().join("none/deeper"), me, 0), Ok(Vec::new()));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).expect("symlink");
        assert_eq!(read_regular(&link, me, 0), Err(NOT_OWNED.to_owned()));
        assert_eq!(read_regular(Path::new("/dev/null"), me, 0), Err(NOT_OWNED.to_owned()));
        assert_eq!(read_regular(dir.path(), me, 0), Err(NOT_OWNED.to_owned()));
        if me == 0 {
            assert_eq!(read_regular(&path, 12345, 0), Err(NOT_OWNED.to_owned()), "another user's file");
        }
        assert_eq!(
            read_regular(&path.join("below-a-file"), me, 0),
            Err("Not a directory".to_owned()),
            "the kernel's words, without the errno"
        );
        std::fs::write(&path, vec![b'x'; wire::PEEK_BYTES_MAX as usize + 10]).expect("write");
        assert_eq!(read_regular(&path, me, 0).map(|d| d.len()), Ok(wire::PEEK_BYTES_MAX as usize));
    }

    // Goal: a FIFO where the output should be is never opened: a writer blocked in its
    // open stays blocked (an open for reading, even non-blocking, would release it).
    #[test]
    fn a_fifo_is_refused_without_being_opened() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("out");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(status.success());
        let me = std::fs::metadata(&fifo).expect("stat").uid();
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || OpenOptions::new().write(true).open(fifo).map(drop))
        };
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(read_regular(&fifo, me, 0), Err(NOT_OWNED.to_owned()));
        std::thread::sleep(Duration::from_millis(200));
        assert!(!writer.is_finished(), "the FIFO was opened for reading");
        let _reader = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo).expect("open");
        writer.join().expect("writer").expect("the writer's open returns once a reader came");
    }

    // Goal: the reader's answer survives the pipe: data, a refusal, and anything else
    // (a killed reader) is a failure; a long message is cut at a character boundary.
    #[test]
    fn answers_round_trip() {
        assert_eq!(decode_answer(&encode_answer(&Ok(b"abc".to_vec()))), Ok(b"abc".to_vec()));
        assert_eq!(decode_answer(&encode_answer(&Ok(Vec::new()))), Ok(Vec::new()));
        assert_eq!(
            decode_answer(&encode_answer(&Err("Permission denied".into()))),
            Err("Permission denied".into())
        );
        assert_eq!(decode_answer(b""), Err("the reader ended without an answer".into()));
        assert_eq!(decode_answer(b"X"), Err("the reader ended without an answer".into()));
        let too_long = [vec![ANSWER_DATA], vec![b'x'; wire::PEEK_BYTES_MAX as usize + 1]].concat();
        assert!(decode_answer(&too_long).is_err());
        let long = "é".repeat(MESSAGE_BYTES_MAX);
        let cut = decode_answer(&encode_answer(&Err(long))).expect_err("a refusal");
        assert!(cut.len() <= MESSAGE_BYTES_MAX && cut.chars().all(|c| c == 'é'), "{cut}");
    }

    // Goal: the reader takes exactly its five arguments.
    #[test]
    fn reader_arguments() {
        let args = |list: &[&str]| parse_reader_args(list.iter().map(OsString::from));
        assert_eq!(
            args(&["65534", "65534", "nobody", "12", "/tmp/out"]),
            Some(ReaderArgs {
                uid: 65534,
                gid: 65534,
                user: "nobody".into(),
                offset: 12,
                path: "/tmp/out".into()
            })
        );
        assert_eq!(args(&["65534", "65534", "nobody", "12"]), None);
        assert_eq!(args(&["x", "65534", "nobody", "12", "/tmp/out"]), None);
        assert_eq!(args(&["1", "1", "u", "-1", "/tmp/out"]), None);
    }

    // Goal: readers are capped in all and per job user, and a slot is given back when
    // dropped.
    #[test]
    fn readers_are_capped() {
        let peeks = Peeks::new(PathBuf::from("/nonexistent"));
        let mine: Vec<Slot> = (0..IN_FLIGHT_PER_USER_MAX).map(|_| peeks.slot(1).expect("a slot")).collect();
        assert!(peeks.slot(1).is_none(), "one user's cap");
        let others: Vec<Slot> = (2..)
            .take(IN_FLIGHT_MAX - IN_FLIGHT_PER_USER_MAX)
            .map(|uid| peeks.slot(uid).expect("a slot"))
            .collect();
        assert!(peeks.slot(999).is_none(), "the host's cap");
        drop(others);
        assert!(peeks.slot(1).is_none());
        drop(mine);
        assert!(peeks.slot(1).is_some());
        assert_eq!(peeks.in_flight.lock().expect("lock").total, 0);
    }

    fn a_read() -> PeekRead {
        PeekRead { shown: "7".into(), path: "/x/out".into(), user: "u".into(), uid: 1, gid: 1, offset: 0 }
    }

    /// A stand-in reader: an executable shell script, named `name`.
    fn fake_reader(dir: &Path, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    /// `peeks.read(read)`, tried again while the script cannot be executed yet: a process
    /// forked by another test meanwhile may still hold the script open for writing
    /// (ETXTBSY), until it executes or exits.
    async fn read_started(peeks: &Peeks, read: &PeekRead) -> wire::PeekReply {
        for _ in 0..20 {
            let reply = peeks.read(read).await;
            if !reply.message.ends_with("sbatchd cannot start its reader") {
                return reply;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the stand-in reader never started");
    }

    // Goal: sbatchd's side of a peek: the reader gets its arguments and its answer becomes
    // the reply; a reader that cannot start, or that dies without an answer, is a failure
    // saying so; a reader that does not answer in time is killed, and the peek fails at
    // the deadline rather than waiting for it. Method: shell scripts stand in for the
    // reader.
    #[tokio::test(flavor = "current_thread")]
    async fn sbatchds_side_of_a_peek() {
        let dir = tempfile::tempdir().expect("temp dir");
        let args = dir.path().join("args");
        let program =
            fake_reader(dir.path(), "answers", &format!("echo \"$@\" > {}; printf Dhello", args.display()));
        let reply = read_started(&Peeks::new(program), &PeekRead { offset: 3, ..a_read() }).await;
        assert_eq!((reply.code, reply.data.as_slice(), reply.next_offset), (wire::PEEK_OK, &b"hello"[..], 8));
        assert_eq!(std::fs::read_to_string(&args).expect("args"), "--peek 1 1 u 3 /x/out\n");

        let reply = Peeks::new(dir.path().join("missing")).read(&a_read()).await;
        assert_eq!(reply.message, "Job <7> : cannot read /x/out: sbatchd cannot start its reader");
        let reply = read_started(&Peeks::new(fake_reader(dir.path(), "dies", "exit 3")), &a_read()).await;
        assert_eq!(reply.message, "Job <7> : cannot read /x/out: the reader ended without an answer");

        let pid_file = dir.path().join("pid");
        let program =
            fake_reader(dir.path(), "hangs", &format!("echo $$ > {}; exec sleep 60", pid_file.display()));
        let peeks = Peeks { timeout: Duration::from_secs(2), ..Peeks::new(program) };
        let started = std::time::Instant::now();
        let reply = read_started(&peeks, &a_read()).await;
        assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
        assert_eq!(reply.message, "Job <7> : cannot read /x/out: no answer within 2 s");
        let pid: i32 = std::fs::read_to_string(&pid_file).expect("pid").trim().parse().expect("a pid");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            // Gone, or a zombie waiting for tokio's reaper: killed either way.
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = state.rsplit(')').next().and_then(|rest| rest.split_whitespace().next());
            if matches!(state, None | Some("Z")) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the reader {pid} still runs: {state:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    // Goal: the reply carries the data and the next offset, or names the job and the file.
    #[test]
    fn replies() {
        let read = PeekRead {
            shown: "7[2]".into(),
            path: "/x/out".into(),
            user: "u".into(),
            uid: 1,
            gid: 1,
            offset: 10,
        };
        let ok = read.reply(Ok(b"abc".to_vec()));
        assert_eq!((ok.code, ok.next_offset, ok.data), (wire::PEEK_OK, 13, b"abc".to_vec()));
        let failed = read.reply(Err("Permission denied".into()));
        assert_eq!(
            (failed.code, failed.message.as_str()),
            (wire::PEEK_FAILED, "Job <7[2]> : cannot read /x/out: Permission denied")
        );
    }
}
