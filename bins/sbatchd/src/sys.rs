//! The few system calls std does not wrap, and the only unsafe code of sbatchd.
//!
//! - [`spawn_gated`]: fork a job process that becomes its own session and
//!   process group, takes back the default SIGPIPE disposition, drops to the job's user (setgroups → setgid → setuid),
//!   sets its umask, working directory and standard files, and then WAITS on a
//!   gate pipe before it calls execve. The shepherd opens the gate only after
//!   the pid is durable, so a job whose pid was never recorded never ran. The
//!   child puts `LSB_JOBPID` (its own pid) in the environment it executes with,
//!   and runs a user's simple command as `sh` would ([`ExecPlan::search`]).
//! - [`wait4`] for the exit status together with the resource usage.
//! - [`kill_group`], [`lookup_user`], [`lookup_uid`], [`group_list`], [`process_exists`],
//!   [`effective_uid`].
//! - [`become_user`] and [`end_after`]: `bpeek`'s reader drops to the job's user for good,
//!   and ends itself after a while ([`crate::peek`]).
//! - [`pidfd_open`]: a file descriptor that becomes readable when a process ends, also for
//!   a process that is not our child (a shepherd adopted after an sbatchd restart).
//! - [`inheritable_copy`] and [`inherited_fd`]: hand a descriptor to an executed program
//!   (the zygote's socket) and take it over there; [`memory_file`]: the launch plan in
//!   memory; [`new_session`]: the shepherd's own session.
//! - The shepherd zygote's ([`crate::zygote`]): [`seqpacket_pair`], [`send_with_fds`] and
//!   [`recv_with_fds`] (messages with descriptors, `SCM_RIGHTS`), [`poll`], [`file_type`],
//!   [`fork`] (single-threaded callers only), [`reap_ended_children`],
//!   [`block_child_signal`], [`child_signal_fd`], [`drain_signal_fd`],
//!   [`restore_signal_mask`], [`close_descriptors_except`].
//!
//! Everything the child does between fork and execve is async-signal-safe:
//! every string and array is prepared before the fork, and the child only makes
//! raw system calls and `_exit`s on failure after reporting `(stage, errno)`
//! through a close-on-exec pipe.

#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The variable naming the job's process, which the job's process sets itself.
pub const JOB_PID_VARIABLE: &str = "LSB_JOBPID";
/// The shell that runs a file the kernel cannot execute (no `#!` line), as `sh` does.
const FALLBACK_SHELL: &CStr = c"/bin/sh";
/// Room for `LSB_JOBPID=` and the decimal digits of any pid, and the NUL.
const JOB_PID_ENTRY_BYTES: usize = JOB_PID_VARIABLE.len() + 1 + 10 + 1;

/// What the job's process is, prepared before the fork.
#[derive(Debug)]
pub struct ExecPlan {
    /// Program to execute (absolute path); not used when [`ExecPlan::search`] is not empty.
    pub program: CString,
    /// A user's simple command run as `sh` runs it: the paths to try in order (the command
    /// itself when it holds a `/`, else each folder of the job's `PATH` joined with it). A
    /// file the kernel refuses as not executable in format (ENOEXEC) is run by `/bin/sh`;
    /// when no path can be executed the child writes `sh: NAME: not found` (or
    /// `Permission denied`) to its standard error and exits 127 (126), as `sh` would, and
    /// nothing is reported as a start failure: the command ran and failed. Empty: execute
    /// `program`, and report a failure as [`SpawnStage::Exec`].
    pub search: Vec<CString>,
    /// Argument vector, `argv[0]` first.
    pub argv: Vec<CString>,
    /// Complete environment, `NAME=value` entries.
    pub envp: Vec<CString>,
    /// Uid to run as; when equal to the current euid no identity change happens.
    pub uid: u32,
    /// Primary gid to run as.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    /// Working directory (absolute).
    pub cwd: CString,
    /// File-creation mask.
    pub umask: u32,
    /// Standard input file (opened read-only as the job's user).
    pub stdin: CString,
    /// Standard output file (created as the job's user).
    pub stdout: CString,
    /// Truncate standard output instead of appending.
    pub stdout_truncate: bool,
    /// Standard error file (created as the job's user). When it is the same path as
    /// `stdout`, standard error is a duplicate of standard output (one file offset, so
    /// the two streams never overwrite each other).
    pub stderr: CString,
    /// Truncate standard error instead of appending.
    pub stderr_truncate: bool,
    /// Directories created (mode 0700, as the job's user, an existing one is fine) before
    /// the standard files are opened, parents first.
    pub create_dirs: Vec<CString>,
}

/// The step of the child's preparation that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpawnStage {
    /// setsid.
    Session,
    /// setgroups / setgid / setuid.
    Identity,
    /// chdir to the working directory.
    WorkingDirectory,
    /// Opening standard input.
    Stdin,
    /// Opening standard output.
    Stdout,
    /// Opening standard error.
    Stderr,
    /// Creating a directory of `create_dirs`.
    Directory,
    /// The gate closed without opening (the shepherd died before recording the pid).
    Gate,
    /// execve.
    Exec,
}

impl SpawnStage {
    fn code(self) -> u8 {
        self as u8
    }

    /// Every stage, in code order.
    pub const ALL: [SpawnStage; 9] = [
        SpawnStage::Session,
        SpawnStage::Identity,
        SpawnStage::WorkingDirectory,
        SpawnStage::Stdin,
        SpawnStage::Stdout,
        SpawnStage::Stderr,
        SpawnStage::Directory,
        SpawnStage::Gate,
        SpawnStage::Exec,
    ];

    fn from_code(code: u8) -> SpawnStage {
        SpawnStage::ALL.get(usize::from(code)).copied().unwrap_or(SpawnStage::Exec)
    }

    /// A stable one-word name, for files that outlive one build.
    pub fn name(self) -> &'static str {
        match self {
            SpawnStage::Session => "session",
            SpawnStage::Identity => "identity",
            SpawnStage::WorkingDirectory => "cwd",
            SpawnStage::Stdin => "stdin",
            SpawnStage::Stdout => "stdout",
            SpawnStage::Stderr => "stderr",
            SpawnStage::Directory => "directory",
            SpawnStage::Gate => "gate",
            SpawnStage::Exec => "exec",
        }
    }

    /// The stage [`SpawnStage::name`] names.
    pub fn from_name(name: &str) -> Option<SpawnStage> {
        SpawnStage::ALL.into_iter().find(|stage| stage.name() == name)
    }

    /// What the stage is, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            SpawnStage::Session => "cannot create a session",
            SpawnStage::Identity => "cannot change to the job's user",
            SpawnStage::WorkingDirectory => "cannot change to the working directory",
            SpawnStage::Stdin => "cannot open the input file",
            SpawnStage::Stdout => "cannot open the output file",
            SpawnStage::Stderr => "cannot open the error file",
            SpawnStage::Directory => "cannot create the output directory",
            SpawnStage::Gate => "the shepherd stopped before the job started",
            SpawnStage::Exec => "cannot execute the job",
        }
    }
}

/// A forked job process waiting at its gate.
#[derive(Debug)]
pub struct GatedChild {
    /// Pid of the job process; also its process group and session id.
    pub pid: i32,
    gate: OwnedFd,
    report: OwnedFd,
}

impl GatedChild {
    /// Lets the child go on to execve; returns `Ok(())` once exec succeeded,
    /// or the stage and errno at which it failed (the child has then exited).
    pub fn open_gate(self) -> Result<(), (SpawnStage, i32)> {
        self.release().outcome()
    }

    /// Lets the child go on to execve without waiting to hear how it went: a parent that
    /// reaps the child next reads [`Released::outcome`] after reaping it, and so sleeps
    /// once (until the child ends) instead of twice (until its exec, then until it ends).
    pub fn release(self) -> Released {
        let byte = [1u8];
        // SAFETY: writing one byte from a valid buffer to a pipe fd we own.
        let written = unsafe { libc::write(self.gate.as_raw_fd(), byte.as_ptr().cast(), 1) };
        // A child whose preparation failed has exited, closing its gate (EPIPE): its
        // report says why, and only without one is the gate itself the failure.
        let gate_error = (written != 1).then(|| io::Error::last_os_error().raw_os_error().unwrap_or(0));
        drop(self.gate);
        Released { report: self.report, gate_error }
    }
}

/// A job process let through its gate ([`GatedChild::release`]).
#[derive(Debug)]
pub struct Released {
    report: OwnedFd,
    /// The errno of a gate that could not be opened.
    gate_error: Option<i32>,
}

impl Released {
    /// `Ok(())` if execve succeeded, else the stage and errno at which the child failed
    /// (it has then exited). Blocks until one or the other is known: read after the child
    /// is reaped, it answers at once.
    pub fn outcome(self) -> Result<(), (SpawnStage, i32)> {
        match (read_report(&self.report), self.gate_error) {
            (Ok(()), Some(errno)) => Err((SpawnStage::Gate, errno)),
            (reported, _) => reported,
        }
    }
}

fn read_report(report: &OwnedFd) -> Result<(), (SpawnStage, i32)> {
    let mut buf = [0u8; 5];
    let mut got = 0usize;
    while got < buf.len() {
        // SAFETY: reading into the unfilled tail of a valid stack buffer from a fd we own.
        let n = unsafe { libc::read(report.as_raw_fd(), buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err((SpawnStage::Exec, io::Error::last_os_error().raw_os_error().unwrap_or(0)));
        }
        if n == 0 {
            break;
        }
        got += n as usize;
    }
    match got {
        // The close-on-exec report pipe closed without a word: execve succeeded.
        0 => Ok(()),
        _ => {
            let errno = i32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]);
            Err((SpawnStage::from_code(buf[0]), errno))
        }
    }
}

fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills the two-element array on success.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect()
}

/// Forks the job process described by `plan`; it stops at its gate.
///
/// Must be called from a single-threaded process (the shepherd): after fork
/// only the calling thread exists in the child.
pub fn spawn_gated(plan: &ExecPlan) -> io::Result<GatedChild> {
    let (gate_read, gate_write) = pipe_cloexec()?;
    let (report_read, report_write) = pipe_cloexec()?;
    let argv = null_terminated(&plan.argv);
    // The job's own pid, written by the child into this entry: it is known only there.
    let mut job_pid_entry = [0u8; JOB_PID_ENTRY_BYTES];
    job_pid_entry[..JOB_PID_VARIABLE.len()].copy_from_slice(JOB_PID_VARIABLE.as_bytes());
    job_pid_entry[JOB_PID_VARIABLE.len()] = b'=';
    let job_pid_digits = job_pid_entry.as_mut_ptr().wrapping_add(JOB_PID_VARIABLE.len() + 1);
    let job_pid_prefix = format!("{JOB_PID_VARIABLE}=");
    let envp: Vec<*const libc::c_char> = plan
        .envp
        .iter()
        .filter(|entry| !entry.as_bytes().starts_with(job_pid_prefix.as_bytes()))
        .map(|entry| entry.as_ptr())
        .chain([job_pid_entry.as_ptr().cast(), std::ptr::null()])
        .collect();
    let search: Vec<*const libc::c_char> = plan.search.iter().map(|path| path.as_ptr()).collect();
    // `sh PATH ARGS...` for a file without `#!`: the path goes in slot 1 in the child.
    let mut script_argv: Vec<*const libc::c_char> = [c"sh".as_ptr(), std::ptr::null()]
        .into_iter()
        .chain(plan.argv.iter().skip(1).map(|arg| arg.as_ptr()))
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let script_path_slot = script_argv.as_mut_ptr().wrapping_add(1);
    let command_name = plan.argv.first().map_or(c"", |name| name.as_c_str());
    let groups: Vec<libc::gid_t> = plan.groups.iter().map(|g| *g as libc::gid_t).collect();
    // SAFETY: geteuid has no preconditions.
    let change_identity = unsafe { libc::geteuid() } != plan.uid;
    let out_flags = |truncate: bool| {
        libc::O_WRONLY
            | libc::O_CREAT
            | libc::O_CLOEXEC
            | if truncate { libc::O_TRUNC } else { libc::O_APPEND }
    };
    let stdout_flags = out_flags(plan.stdout_truncate);
    let stderr_flags = out_flags(plan.stderr_truncate);
    let stderr_is_stdout = plan.stderr == plan.stdout;
    let create_dirs: Vec<*const libc::c_char> = plan.create_dirs.iter().map(|d| d.as_ptr()).collect();

    // SAFETY: fork in a single-threaded caller; the child below calls only
    // async-signal-safe functions on memory prepared before the fork, and
    // leaves through execve or _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: see above; every pointer refers to data owned by this frame.
        unsafe {
            // The child must not hold the parent's ends: a gate it could
            // write itself would never read end-of-file.
            libc::close(gate_write.as_raw_fd());
            libc::close(report_read.as_raw_fd());
            let report = report_write.as_raw_fd();
            let fail = |stage: SpawnStage| -> ! {
                let errno = *libc::__errno_location();
                let e = errno.to_be_bytes();
                let msg = [stage.code(), e[0], e[1], e[2], e[3]];
                libc::write(report, msg.as_ptr().cast(), msg.len());
                libc::_exit(127)
            };
            if libc::setsid() < 0 {
                fail(SpawnStage::Session);
            }
            // Rust programs ignore SIGPIPE, and an ignored signal stays ignored across
            // execve: the job gets the default disposition back, as any process expects
            // (this cannot fail for a valid signal number).
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            if change_identity
                && (libc::setgroups(groups.len(), groups.as_ptr()) != 0
                    || libc::setgid(plan.gid as libc::gid_t) != 0
                    || libc::setuid(plan.uid as libc::uid_t) != 0)
            {
                fail(SpawnStage::Identity);
            }
            libc::umask(plan.umask as libc::mode_t);
            if libc::chdir(plan.cwd.as_ptr()) != 0 {
                fail(SpawnStage::WorkingDirectory);
            }
            for dir in &create_dirs {
                if libc::mkdir(*dir, 0o700) != 0 && *libc::__errno_location() != libc::EEXIST {
                    fail(SpawnStage::Directory);
                }
            }
            let files = [
                (plan.stdin.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC, 0, SpawnStage::Stdin),
                (plan.stdout.as_ptr(), stdout_flags, 1, SpawnStage::Stdout),
                (plan.stderr.as_ptr(), stderr_flags, 2, SpawnStage::Stderr),
            ];
            for (path, flags, target, stage) in files {
                if target == 2 && stderr_is_stdout {
                    if libc::dup2(1, 2) < 0 {
                        fail(stage);
                    }
                    continue;
                }
                let fd = libc::open(path, flags, 0o666 as libc::c_uint);
                if fd < 0 || libc::dup2(fd, target) < 0 {
                    fail(stage);
                }
                // A file opened at its target number must stay open (dup2 onto itself
                // leaves close-on-exec set; clear it instead of closing).
                if fd == target {
                    libc::fcntl(fd, libc::F_SETFD, 0);
                } else {
                    libc::close(fd);
                }
            }
            let mut go = 0u8;
            loop {
                let n = libc::read(gate_read.as_raw_fd(), (&mut go as *mut u8).cast(), 1);
                if n == 1 {
                    break;
                }
                if n < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                fail(SpawnStage::Gate);
            }
            write_decimal(job_pid_digits, libc::getpid());
            if search.is_empty() {
                libc::execve(plan.program.as_ptr(), argv.as_ptr(), envp.as_ptr());
                fail(SpawnStage::Exec);
            }
            let mut denied = false;
            for path in &search {
                libc::execve(*path, argv.as_ptr(), envp.as_ptr());
                match *libc::__errno_location() {
                    libc::ENOEXEC => {
                        *script_path_slot = *path;
                        libc::execve(FALLBACK_SHELL.as_ptr(), script_argv.as_ptr(), envp.as_ptr());
                        denied = true;
                    }
                    libc::EACCES | libc::EPERM | libc::EISDIR => denied = true,
                    _ => {}
                }
            }
            let why: &[u8] = if denied { b": Permission denied\n" } else { b": not found\n" };
            for part in [&b"sh: "[..], command_name.to_bytes(), why] {
                libc::write(2, part.as_ptr().cast(), part.len());
            }
            libc::_exit(if denied { 126 } else { 127 });
        }
    }
    drop(gate_read);
    drop(report_write);
    Ok(GatedChild { pid, gate: gate_write, report: report_read })
}

/// Writes `value` in decimal and a NUL at `at`, which has room for 11 bytes.
/// Async-signal-safe: no allocation, no formatting machinery.
///
/// # Safety
/// `at` must be valid for writes of 11 bytes.
unsafe fn write_decimal(at: *mut u8, value: libc::pid_t) {
    let mut digits = [0u8; 10];
    let mut n = value.unsigned_abs();
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        // SAFETY: i < len <= 10, within the 11 bytes the caller guarantees.
        unsafe { *at.add(i) = digits[len - 1 - i] };
    }
    // SAFETY: len <= 10, so the NUL is the 11th byte at most.
    unsafe { *at.add(len) = 0 };
}

/// Exit status and resource usage of a reaped process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reaped {
    /// Raw wait status.
    pub wait_status: i32,
    /// User CPU time, milliseconds.
    pub user_time_ms: u64,
    /// System CPU time, milliseconds.
    pub system_time_ms: u64,
    /// Peak resident set size, KiB.
    pub max_rss_kb: u64,
}

/// Waits for the child `pid` to terminate and returns its status and usage.
pub fn wait4(pid: i32) -> io::Result<Reaped> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; zeroed is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to local status and rusage.
        let got = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if got == pid {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    let ms = |tv: libc::timeval| (tv.tv_sec as u64) * 1000 + (tv.tv_usec as u64) / 1000;
    Ok(Reaped {
        wait_status: status,
        user_time_ms: ms(usage.ru_utime),
        system_time_ms: ms(usage.ru_stime),
        max_rss_kb: usage.ru_maxrss.max(0) as u64,
    })
}

/// Sends `signal` to the process group `pgid`.
pub fn kill_group(pgid: i32, signal: i32) -> io::Result<()> {
    if pgid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    }
    // SAFETY: killpg with a positive group id has no memory-safety preconditions.
    if unsafe { libc::killpg(pgid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a process with this pid exists (it may belong to another user).
pub fn process_exists(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The effective uid of this process.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// A pidfd for `pid`: it becomes readable when the process terminates, whoever its parent
/// is. Fails with ESRCH when there is no such process.
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    if pid <= 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(fd).map_err(|_| io::Error::other("pidfd_open returned a bad descriptor"))?;
    // SAFETY: the kernel just created this descriptor (close-on-exec) and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `FS_TOPDIR_FL` of linux/fs.h (`chattr +T`).
const FS_TOPDIR_FL: libc::c_int = 0x0002_0000;

/// Marks `dir` as the top of a directory hierarchy (`chattr +T`): ext2/3/4 then spread its
/// subfolders over the file system's block groups (the Orlov allocator) instead of packing
/// them next to it. sbatchd creates and deletes a folder and several files per job; spread
/// out, that churn does not make every new file's inode search crawl past the inodes just
/// freed in one group. A hint only: file systems without the flag refuse it, and the
/// error is for the caller to ignore.
pub fn set_top_directory_hint(dir: &std::path::Path) -> io::Result<()> {
    let file = std::fs::File::open(dir)?;
    let mut flags: libc::c_int = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one int through the valid pointer; the fd is open.
    if unsafe { libc::ioctl(file.as_raw_fd(), libc::FS_IOC_GETFLAGS, &mut flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if flags & FS_TOPDIR_FL != 0 {
        return Ok(());
    }
    flags |= FS_TOPDIR_FL;
    // SAFETY: FS_IOC_SETFLAGS reads one int through the valid pointer; the fd is open.
    if unsafe { libc::ioctl(file.as_raw_fd(), libc::FS_IOC_SETFLAGS, &flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Waits until `fd` (a pidfd) is readable, i.e. until its process has ended. Must be
/// called within a tokio runtime.
pub async fn wait_readable(fd: OwnedFd) -> io::Result<()> {
    // SAFETY: the AsyncFd takes the OwnedFd by value, so the descriptor stays open and
    // refers to the same file description until the AsyncFd is dropped.
    let async_fd =
        unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }?;
    let _ready = async_fd.readable().await?;
    Ok(())
}

/// A duplicate of `fd` *without* close-on-exec, for a child to inherit. std starts the
/// shepherd zygote with `posix_spawn` (no fork: fast, and nothing runs between fork and
/// exec), which cannot move a descriptor to a chosen number, so the zygote is told the
/// number. The caller drops the duplicate right after the spawn; sbatchd starts shepherds
/// from one thread only (the launcher). The one other child sbatchd starts, `bpeek`'s
/// reader ([`crate::peek`], from the event loop's thread), may inherit it meanwhile: the
/// reader closes every descriptor but its standard streams first thing, before anything
/// else, and so holds it for no longer than its own start.
pub fn inheritable_copy(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD on an open descriptor returns a new descriptor (or -1).
    let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD, 3) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just created this descriptor and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// An anonymous in-memory file (memfd, close-on-exec) holding `bytes`, positioned at its
/// start: how sbatchd hands a shepherd its launch plan without creating a file on disk.
pub fn memory_file(name: &CStr, bytes: &[u8]) -> io::Result<std::fs::File> {
    use std::io::{Seek, Write};
    // SAFETY: memfd_create takes a NUL-terminated name and flags; it returns a new
    // descriptor or -1.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just created this descriptor and nobody else owns it.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(file)
}

/// Makes this process the leader of a new session and process group (the shepherd, so
/// that it outlives sbatchd and no terminal signal reaches it).
pub fn new_session() -> io::Result<()> {
    // SAFETY: setsid has no preconditions.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Takes over descriptor `fd`, inherited from the parent by the protocol between sbatchd
/// and its shepherd, and marks it close-on-exec so that the job never inherits it.
/// Fails with EBADF when no such descriptor is open. Descriptors 0 to 2 are refused.
pub fn inherited_fd(fd: RawFd) -> io::Result<OwnedFd> {
    if fd < 3 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: F_SETFD on an integer descriptor; it fails with EBADF if it is not open.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor is open (checked above) and, by the shepherd protocol, was
    // placed at this number for us alone; nothing else in this process owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A user account as the password database describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserAccount {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Home directory.
    pub home: String,
    /// Login shell.
    pub shell: String,
}

fn text(ptr: *const libc::c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: getpwnam_r/getpwuid_r fill NUL-terminated strings inside our buffer.
    unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
}

fn lookup_with(
    call: impl Fn(*mut libc::passwd, *mut libc::c_char, usize, *mut *mut libc::passwd) -> libc::c_int,
) -> io::Result<Option<UserAccount>> {
    let mut buf_len = 4096usize;
    loop {
        let mut buf = vec![0 as libc::c_char; buf_len];
        // SAFETY: passwd is plain data; zeroed is a valid value.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = call(&mut entry, buf.as_mut_ptr(), buf.len(), &mut result);
        if rc == libc::ERANGE && buf_len < 1 << 20 {
            buf_len *= 4;
            continue;
        }
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        if result.is_null() {
            return Ok(None);
        }
        return Ok(Some(UserAccount {
            name: text(entry.pw_name),
            uid: entry.pw_uid,
            gid: entry.pw_gid,
            home: text(entry.pw_dir),
            shell: text(entry.pw_shell),
        }));
    }
}

/// Looks a user up by name; `Ok(None)` when there is no such user.
pub fn lookup_user(name: &str) -> io::Result<Option<UserAccount>> {
    let name =
        CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in user name"))?;
    // SAFETY: every pointer is valid for the duration of the call; buffer length is passed.
    lookup_with(|entry, buf, len, result| unsafe { libc::getpwnam_r(name.as_ptr(), entry, buf, len, result) })
}

/// Looks a user up by uid; `Ok(None)` when there is no such user.
pub fn lookup_uid(uid: u32) -> io::Result<Option<UserAccount>> {
    // SAFETY: every pointer is valid for the duration of the call; buffer length is passed.
    lookup_with(|entry, buf, len, result| unsafe { libc::getpwuid_r(uid, entry, buf, len, result) })
}

/// The supplementary groups of `user` (with `gid` included), as initgroups would set them.
pub fn group_list(user: &str, gid: u32) -> io::Result<Vec<u32>> {
    let name =
        CString::new(user).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in user name"))?;
    let mut count: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; count as usize];
        let mut n = count;
        // SAFETY: groups has room for n entries; getgrouplist updates n.
        let rc =
            unsafe { libc::getgrouplist(name.as_ptr(), gid as libc::gid_t, groups.as_mut_ptr(), &mut n) };
        if rc >= 0 {
            groups.truncate(n.max(0) as usize);
            return Ok(groups.into_iter().collect());
        }
        if n <= count || n > 65_536 {
            return Err(io::Error::other(format!("cannot list the groups of {user}")));
        }
        count = n;
    }
}

/// Makes this whole process the user `uid` for good: supplementary groups `groups`, then
/// real, effective and saved gid `gid`, then real, effective and saved uid `uid`; then
/// checks that every id took and, for a `uid` other than 0, that root cannot be taken
/// back. For `bpeek`'s reader ([`crate::peek`]), a short-lived process that must see the
/// file system exactly as the job's user does. Needs CAP_SETUID and CAP_SETGID (root).
pub fn become_user(uid: u32, gid: u32, groups: &[u32]) -> io::Result<()> {
    let groups: Vec<libc::gid_t> = groups.iter().map(|g| *g as libc::gid_t).collect();
    // SAFETY: setgroups reads `groups.len()` gids from a valid array.
    if unsafe { libc::setgroups(groups.len(), groups.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: setresgid takes plain integers.
    if unsafe { libc::setresgid(gid, gid, gid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: setresuid takes plain integers.
    if unsafe { libc::setresuid(uid, uid, uid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let (mut ruid, mut euid, mut suid) = (0, 0, 0);
    let (mut rgid, mut egid, mut sgid) = (0, 0, 0);
    // SAFETY: getresuid and getresgid write one id through each valid pointer.
    let read = unsafe {
        libc::getresuid(&mut ruid, &mut euid, &mut suid) == 0
            && libc::getresgid(&mut rgid, &mut egid, &mut sgid) == 0
    };
    if !read || [ruid, euid, suid] != [uid; 3] || [rgid, egid, sgid] != [gid; 3] {
        return Err(io::Error::other("the new identity did not take"));
    }
    // SAFETY: setuid takes a plain integer; it must fail here.
    if uid != 0 && unsafe { libc::setuid(0) } == 0 {
        return Err(io::Error::other("root could be taken back"));
    }
    Ok(())
}

/// Has the kernel end this process (SIGALRM, whose default action is to terminate) after
/// `seconds`, whatever it is waiting for then: `bpeek`'s reader's own bound, which holds
/// even when sbatchd is gone and cannot kill it.
pub fn end_after(seconds: u32) {
    // SAFETY: alarm takes a plain integer and only arms this process's timer.
    unsafe { libc::alarm(seconds) };
}

/// A connected pair of `AF_UNIX` `SOCK_SEQPACKET` sockets, both close-on-exec: the channel
/// between sbatchd and its shepherd zygote (message boundaries kept, descriptors passed
/// with `SCM_RIGHTS`).
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair fills the two-element array on success.
    let rc = unsafe {
        libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr())
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Room for the control message of `n_fds` descriptors, in `u64`s (aligned for `cmsghdr`).
fn control_words(n_fds: usize) -> usize {
    let fd_bytes = u32::try_from(n_fds * std::mem::size_of::<RawFd>()).unwrap_or(u32::MAX);
    // SAFETY: CMSG_SPACE is arithmetic on its argument.
    let bytes = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
    bytes.div_ceil(std::mem::size_of::<u64>())
}

/// Sends `bytes` as one message on the seqpacket `socket`, with copies of `fds` attached
/// (`SCM_RIGHTS`; none when empty). `MSG_NOSIGNAL`: a peer that is gone is EPIPE, not a
/// signal. A message is sent whole or not at all.
pub fn send_with_fds(
    socket: std::os::fd::BorrowedFd<'_>,
    bytes: &[u8],
    fds: &[std::os::fd::BorrowedFd<'_>],
) -> io::Result<()> {
    let mut control = vec![0u64; if fds.is_empty() { 0 } else { control_words(fds.len()) }];
    let mut iov = libc::iovec { iov_base: bytes.as_ptr().cast_mut().cast(), iov_len: bytes.len() };
    // SAFETY: msghdr is plain data; zeroed is a valid (empty) value.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    if !fds.is_empty() {
        let fd_bytes = fds.len() * std::mem::size_of::<RawFd>();
        message.msg_control = control.as_mut_ptr().cast();
        message.msg_controllen = control.len() * std::mem::size_of::<u64>();
        // SAFETY: the control buffer has room for one cmsghdr with `fds.len()` descriptors
        // (control_words), so CMSG_FIRSTHDR is not null and CMSG_DATA points inside it; the
        // copy writes exactly fd_bytes there.
        unsafe {
            let header = libc::CMSG_FIRSTHDR(&message);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as usize;
            let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
            std::ptr::copy_nonoverlapping(raw.as_ptr().cast::<u8>(), libc::CMSG_DATA(header), fd_bytes);
        }
    }
    loop {
        // SAFETY: message points to a valid iovec and control buffer that outlive the call;
        // the descriptors named are open (borrowed for the call).
        let sent = unsafe { libc::sendmsg(socket.as_raw_fd(), &message, libc::MSG_NOSIGNAL) };
        if sent >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// One message received by [`recv_with_fds`].
#[derive(Debug)]
pub struct Received {
    /// Bytes placed in the buffer (0 with no descriptors: the peer has closed its end).
    pub len: usize,
    /// The descriptors attached (close-on-exec, owned: dropping one closes it).
    pub fds: Vec<OwnedFd>,
    /// The message was longer than the buffer; the rest is lost (`MSG_TRUNC`).
    pub truncated: bool,
    /// More descriptors were attached than asked for; the extra ones were closed by the
    /// kernel (`MSG_CTRUNC`).
    pub fds_truncated: bool,
}

/// Receives one message from the seqpacket `socket` into `buf`, with at most `fds_max`
/// attached descriptors (`MSG_CMSG_CLOEXEC`). Blocks until a message or end-of-file.
/// Whatever arrives, every descriptor received is owned by the result, so none leaks.
pub fn recv_with_fds(
    socket: std::os::fd::BorrowedFd<'_>,
    buf: &mut [u8],
    fds_max: usize,
) -> io::Result<Received> {
    let mut control = vec![0u64; control_words(fds_max.max(1))];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: msghdr is plain data; zeroed is a valid (empty) value.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    // Room for fds_max descriptors exactly (CMSG_LEN, not the padded CMSG_SPACE, which may
    // hold one more): any more are MSG_CTRUNC, and the kernel closes them.
    message.msg_controllen = if fds_max == 0 {
        0
    } else {
        // SAFETY: CMSG_LEN is arithmetic on its argument.
        unsafe { libc::CMSG_LEN((fds_max * std::mem::size_of::<RawFd>()) as u32) as usize }
    };
    let len = loop {
        // SAFETY: message points to a valid iovec over `buf` and a control buffer of at
        // least msg_controllen bytes, both outliving the call.
        let got = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC) };
        if got >= 0 {
            break got as usize;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    };
    let mut fds = Vec::new();
    if message.msg_controllen > 0 {
        // SAFETY: the kernel filled msg_controllen bytes of the control buffer with
        // well-formed control messages; CMSG_FIRSTHDR/CMSG_NXTHDR stay within them, and an
        // SCM_RIGHTS message's data holds (cmsg_len - CMSG_LEN(0)) / 4 descriptors that
        // the kernel installed in this process for us alone.
        unsafe {
            let mut header = libc::CMSG_FIRSTHDR(&message);
            while !header.is_null() {
                if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(header);
                    let n = ((*header).cmsg_len - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                    for idx in 0..n {
                        let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(idx));
                        fds.push(OwnedFd::from_raw_fd(fd));
                    }
                }
                header = libc::CMSG_NXTHDR(&message, header);
            }
        }
    }
    Ok(Received {
        len,
        fds,
        truncated: message.msg_flags & libc::MSG_TRUNC != 0,
        fds_truncated: message.msg_flags & libc::MSG_CTRUNC != 0,
    })
}

/// Waits at most `timeout_ms` (negative: without limit) until one of `fds` is ready for
/// `events` (`POLLIN`, ...); returns each descriptor's returned events (all zero on
/// timeout). Retries on EINTR with the full timeout again (callers bound their own total).
pub fn poll(fds: &[std::os::fd::BorrowedFd<'_>], events: i16, timeout_ms: i32) -> io::Result<Vec<i16>> {
    let mut entries: Vec<libc::pollfd> =
        fds.iter().map(|fd| libc::pollfd { fd: fd.as_raw_fd(), events, revents: 0 }).collect();
    loop {
        // SAFETY: entries is a valid array of entries.len() pollfd structures.
        let rc = unsafe { libc::poll(entries.as_mut_ptr(), entries.len() as libc::nfds_t, timeout_ms) };
        if rc >= 0 {
            return Ok(entries.iter().map(|entry| entry.revents).collect());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// The kind of file a descriptor refers to (`st_mode & S_IFMT` of fstat: `libc::S_IFDIR`,
/// `S_IFIFO`, `S_IFREG`, ...).
pub fn file_type(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<u32> {
    // SAFETY: stat is plain data; zeroed is a valid value.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one stat structure through the valid pointer; the fd is open.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(stat.st_mode & libc::S_IFMT)
}

/// Who this process is after [`fork`].
#[derive(Debug, PartialEq, Eq)]
pub enum Forked {
    /// The new process.
    Child,
    /// The calling process; the child's pid.
    Parent(i32),
}

/// Number of threads of this process (`Threads:` of /proc/self/status).
pub fn thread_count() -> io::Result<usize> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no Threads line in /proc/self/status"))
}

/// Forks this process (glibc's fork: its at-fork handlers keep malloc and stdio usable in
/// the child).
///
/// Must only be called from a single-threaded process (the shepherd zygote checks
/// [`thread_count`] at start and never creates a thread): the child then holds no lock
/// another thread held, and may do anything the parent could, as the shepherd does.
pub fn fork() -> io::Result<Forked> {
    // SAFETY: the caller is single-threaded (see above), so the child is a complete copy
    // of the only thread, with no lock held by a thread that does not exist in it.
    match unsafe { libc::fork() } {
        pid if pid < 0 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid)),
    }
}

/// Collects every ended child without waiting (`waitpid(-1, WNOHANG)` until none is
/// left); returns how many. Only for a process all of whose children are its own to reap
/// (the zygote): it takes any child's status.
pub fn reap_ended_children() -> usize {
    let mut n = 0;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: a valid pointer to a local status.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid > 0 {
            n += 1;
            continue;
        }
        if pid < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        // 0: children remain, none ended; ECHILD: no children at all.
        return n;
    }
}

/// A signal mask, as [`block_child_signal`] found it.
pub struct SignalMask(libc::sigset_t);

impl std::fmt::Debug for SignalMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignalMask")
    }
}

fn child_signal_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset and sigaddset initialise and change it
    // through a valid pointer (SIGCHLD is a valid signal, so neither fails).
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        set
    }
}

/// Blocks SIGCHLD in the calling thread (for [`child_signal_fd`]) and returns the mask as
/// it was, for [`restore_signal_mask`] in a child.
pub fn block_child_signal() -> io::Result<SignalMask> {
    let set = child_signal_set();
    // SAFETY: sigset_t is plain data; zeroed is a valid value.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(SignalMask(old))
}

/// Sets the calling thread's signal mask back to `mask`.
pub fn restore_signal_mask(mask: &SignalMask) -> io::Result<()> {
    // SAFETY: a valid pointer to an initialised sigset_t; the old mask is not asked for.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &mask.0, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// A signalfd (close-on-exec, non-blocking) that becomes readable when SIGCHLD is pending:
/// how the zygote learns, in its poll loop, that a child has ended. SIGCHLD must be
/// blocked ([`block_child_signal`]).
pub fn child_signal_fd() -> io::Result<OwnedFd> {
    let set = child_signal_set();
    // SAFETY: signalfd with -1 creates a new descriptor for the valid set.
    let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just created this descriptor and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads every pending signal off a signalfd (non-blocking), so that poll waits again.
pub fn drain_signal_fd(fd: std::os::fd::BorrowedFd<'_>) {
    // SAFETY: signalfd_siginfo is plain data; zeroed is a valid value.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    loop {
        // SAFETY: reading at most one structure into a valid local.
        let n =
            unsafe { libc::read(fd.as_raw_fd(), (&mut info as *mut libc::signalfd_siginfo).cast(), size) };
        if n <= 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// Closes every descriptor from 3 up except those in `keep` (close_range over the gaps):
/// a process forked by the zygote keeps only its own job's descriptors.
pub fn close_descriptors_except(keep: &[RawFd]) -> io::Result<()> {
    let mut kept: Vec<RawFd> = keep.iter().copied().filter(|fd| *fd >= 3).collect();
    kept.sort_unstable();
    kept.dedup();
    let mut first: libc::c_uint = 3;
    for fd in kept.into_iter().map(|fd| fd as libc::c_uint).chain(std::iter::once(libc::c_uint::MAX)) {
        if fd > first {
            // SAFETY: close_range only closes descriptors; none in [first, fd - 1] is
            // owned by anything this process still uses (the caller's contract).
            if unsafe { libc::close_range(first, fd - 1, 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        first = fd.saturating_add(1);
    }
    Ok(())
}

/// `fallocate(FALLOC_FL_KEEP_SIZE)` of the first `len` bytes of `file`: its blocks are
/// allocated, its size is unchanged.
pub fn allocate_keeping_size(file: &std::fs::File, len: i64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: fallocate on a descriptor the caller's borrow keeps open; no memory is passed.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, len) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    /// Forking tests run one at a time: a child forked by one test thread
    /// inherits (until its exec) the pipe ends of another test's child, which
    /// would keep a gate from ever reading end-of-file. The shepherd, which is
    /// single-threaded, has no such problem.
    static FORK_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn fork_lock() -> std::sync::MutexGuard<'static, ()> {
        FORK_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn cstr(s: &str) -> CString {
        CString::new(s).expect("no NUL")
    }

    fn plan(dir: &std::path::Path, script: &str) -> ExecPlan {
        // SAFETY: geteuid/getegid have no preconditions.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        ExecPlan {
            program: cstr("/bin/sh"),
            search: vec![],
            argv: vec![cstr("sh"), cstr("-c"), cstr(script)],
            envp: vec![cstr("PATH=/usr/bin:/bin"), cstr("GREETING=hello")],
            uid,
            gid,
            groups: vec![],
            cwd: cstr(dir.to_str().expect("utf-8 temp dir")),
            umask: 0o022,
            stdin: cstr("/dev/null"),
            stdout: cstr(dir.join("out").to_str().expect("utf-8")),
            stdout_truncate: true,
            stderr: cstr(dir.join("err").to_str().expect("utf-8")),
            stderr_truncate: false,
            create_dirs: vec![],
        }
    }

    // Goal: a gated child runs only after the gate opens, in its own session,
    // with the planned cwd, environment and files; wait4 returns its status.
    // Method: a script that prints its env, cwd, and whether pid == pgid == sid.
    #[test]
    fn gated_child_runs_with_plan_and_reports_status() {
        let _serial = fork_lock();
        let dir = tempfile::tempdir().expect("tempdir");
        let script = r#"echo "$GREETING $(pwd)"; ps -o pid=,pgid=,sid= -p $$ | awk '{print ($1==$2 && $2==$3)}'; echo oops >&2; exit 3"#;
        let child = spawn_gated(&plan(dir.path(), script)).expect("fork");
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !dir.path().join("out").exists()
                || std::fs::read(dir.path().join("out")).expect("read").is_empty()
        );
        let pid = child.pid;
        child.open_gate().expect("exec");
        let reaped = wait4(pid).expect("wait4");
        assert!(libc::WIFEXITED(reaped.wait_status));
        assert_eq!(libc::WEXITSTATUS(reaped.wait_status), 3);
        let out = std::fs::read_to_string(dir.path().join("out")).expect("out");
        let canonical = dir.path().canonicalize().expect("canonical");
        assert!(out.starts_with(&format!("hello {}\n", canonical.display())), "{out}");
        assert_eq!(std::fs::read_to_string(dir.path().join("err")).expect("err"), "oops\n");
    }

    // Goal: the job does not inherit the ignored SIGPIPE of the Rust process that forks
    // it (`yes | head -1` must end `yes` by the signal). Method: the child reads its own
    // ignored-signal mask; this test process ignores SIGPIPE, as the shepherd does.
    #[test]
    fn job_gets_the_default_sigpipe() {
        let _serial = fork_lock();
        let dir = tempfile::tempdir().expect("tempdir");
        let child = spawn_gated(&plan(dir.path(), "exec grep ^SigIgn: /proc/self/status")).expect("fork");
        let pid = child.pid;
        child.open_gate().expect("exec");
        assert!(libc::WIFEXITED(wait4(pid).expect("wait4").wait_status));
        let out = std::fs::read_to_string(dir.path().join("out")).expect("out");
        let mask = out.trim().strip_prefix("SigIgn:").map(str::trim).expect("SigIgn line");
        let ignored = u64::from_str_radix(mask, 16).expect("hex mask");
        assert_eq!(ignored & (1 << (libc::SIGPIPE - 1)), 0, "SIGPIPE ignored in the job: {out}");
    }

    // Goal: standard error follows standard output into one file (one offset, nothing
    // overwritten even when truncating), and missing folders are created as asked.
    #[test]
    fn stderr_joins_stdout_and_folders_are_created() {
        let _serial = fork_lock();
        let dir = tempfile::tempdir().expect("tempdir");
        let spool = dir.path().join("spool");
        let mut joined = plan(dir.path(), "echo one; echo two >&2; echo three");
        joined.stdout = cstr(spool.join("both").to_str().expect("utf-8"));
        joined.stderr = joined.stdout.clone();
        joined.create_dirs = vec![cstr(spool.to_str().expect("utf-8"))];
        let child = spawn_gated(&joined).expect("fork");
        let pid = child.pid;
        child.open_gate().expect("exec");
        assert!(libc::WIFEXITED(wait4(pid).expect("wait4").wait_status));
        assert_eq!(std::fs::read_to_string(spool.join("both")).expect("output"), "one\ntwo\nthree\n");
    }

    // Goal: a failure before exec is reported with its stage, and the child exits.
    #[test]
    fn missing_working_directory_is_reported() {
        let _serial = fork_lock();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut bad = plan(dir.path(), "true");
        bad.cwd = cstr("/nonexistent/lavacore");
        let child = spawn_gated(&bad).expect("fork");
        let pid = child.pid;
        assert_eq!(child.open_gate(), Err((SpawnStage::WorkingDirectory, libc::ENOENT)));
        let reaped = wait4(pid).expect("wait4");
        assert_eq!(libc::WEXITSTATUS(reaped.wait_status), 127);
    }

    // Goal: a child whose preparation failed before its gate was opened is reported with
    // the stage that failed, not as a gate that could not be opened (the gate's write end
    // meets a closed pipe then). Method: reap the failed child first, then release it, as
    // a shepherd that flushed its `pid` file meanwhile does.
    #[test]
    fn a_failure_before_the_gate_keeps_its_stage() {
        let _serial = fork_lock();
        let dir = tempfile::tempdir().expect("tempdir");
        let blocker = dir.path().join("a-file");
        std::fs::write(&blocker, "").expect("write");
        let mut bad = plan(dir.path(), "true");
        bad.stdout = cstr(blocker.join("out").to_str().expect("utf-8"));
        let child = spawn_gated(&bad).expect("fork");
        let reaped = wait4(child.pid).expect("wait4");
        assert_eq!(libc::WEXITSTATUS(reaped.wait_status), 127);
        assert_eq!(child.release().outcome(), Err((SpawnStage::Stdout, libc::ENOTDIR)));
    }

    // Goal: a child whose gate closes without opening never executes.
    #[test]
    fn closed_gate_means_the_job_never_ran() {
        let _serial = fork_lock();
        let dir = tempfile::tempdir().expect("tempdir");
        let marker = dir.path().join("ran");
        let child = spawn_gated(&plan(dir.path(), &format!("touch {}", marker.display()))).expect("fork");
        let GatedChild { pid, gate, report } = child;
        drop(gate);
        assert_eq!(read_report(&report).map_err(|(stage, _)| stage), Err(SpawnStage::Gate));
        wait4(pid).expect("wait4");
        assert!(!marker.exists());
    }

    /// Runs `plan` through its gate and returns the exit code, standard output and error.
    fn run_plan(plan: &ExecPlan, dir: &std::path::Path) -> (i32, String, String) {
        for name in ["out", "err"] {
            let _ = std::fs::remove_file(dir.join(name));
        }
        let child = spawn_gated(plan).expect("fork");
        let pid = child.pid;
        child.open_gate().expect("no start failure");
        let reaped = wait4(pid).expect("wait4");
        assert!(libc::WIFEXITED(reaped.wait_status));
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        (libc::WEXITSTATUS(reaped.wait_status), read("out"), read("err"))
    }

    // Goal: every job sees its own pid in LSB_JOBPID, whatever the environment said.
    #[test]
    fn the_job_sets_its_own_pid() {
        let _serial = fork_lock();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut jobpid =
            plan(dir.path(), r#"[ "$LSB_JOBPID" = "$$" ] && echo same; env | grep -c ^LSB_JOBPID="#);
        jobpid.envp.push(cstr("LSB_JOBPID=1"));
        assert_eq!(run_plan(&jobpid, dir.path()), (0, "same\n1\n".to_owned(), String::new()));
    }

    // Goal: a simple command runs as sh runs it: found in PATH order, a file without `#!`
    // run by sh, a missing or unexecutable command answered as sh answers it (message on
    // standard error, exit 127 or 126), never as a start failure.
    #[test]
    fn simple_commands_run_as_sh_runs_them() {
        let _serial = fork_lock();
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("bin folder");
        let script = bin.join("hello");
        std::fs::write(&script, "echo hello \"$@\" $LSB_JOBPID\n").expect("write");
        let text = |path: &std::path::Path| cstr(path.to_str().expect("utf-8"));
        let command = |search: Vec<CString>, argv: &[&str]| ExecPlan {
            search,
            argv: argv.iter().map(|a| cstr(a)).collect(),
            ..plan(dir.path(), "")
        };
        let mode = |path: &std::path::Path, mode: u32| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        };
        // Not executable: a later folder of PATH is tried, then 126.
        mode(&script, 0o644);
        let denied = command(vec![text(&script), cstr("/nonexistent/hello")], &["hello", "x"]);
        assert_eq!(
            run_plan(&denied, dir.path()),
            (126, String::new(), "sh: hello: Permission denied\n".into())
        );
        // Executable without `#!`: sh runs it with the arguments.
        mode(&script, 0o755);
        let (code, out, err) = run_plan(&command(vec![text(&script)], &["hello", "a", "b"]), dir.path());
        assert_eq!((code, err.as_str()), (0, ""));
        assert!(
            out.starts_with("hello a b ")
                && out.trim_end().rsplit(' ').next().is_some_and(|pid| pid.parse::<u32>().is_ok()),
            "{out}"
        );
        // A real program, after a folder that does not hold it.
        let truth = command(vec![cstr("/nonexistent/true"), cstr("/bin/true")], &["true"]);
        assert_eq!(run_plan(&truth, dir.path()), (0, String::new(), String::new()));
        let missing = command(vec![cstr("/nonexistent/nosuch")], &["nosuch"]);
        assert_eq!(run_plan(&missing, dir.path()), (127, String::new(), "sh: nosuch: not found\n".into()));
    }

    // Goal: descriptors passed over a seqpacket pair arrive as working, close-on-exec
    // copies of the sender's, with the message intact; the message boundary holds (two
    // sends are two receives). Method: pass a pipe's write end and a memfd, write through
    // the received pipe end and read the memfd through the received copy.
    #[test]
    fn descriptors_pass_over_a_seqpacket_pair() {
        use std::io::{Read, Write};
        let (a, b) = seqpacket_pair().expect("socketpair");
        let (mut read, write) = std::io::pipe().expect("pipe");
        let plan = memory_file(c"test", b"plan bytes").expect("memfd");
        send_with_fds(a.as_fd(), b"first", &[write.as_fd(), plan.as_fd()]).expect("send");
        send_with_fds(a.as_fd(), b"second", &[]).expect("send");
        drop(write);
        let mut buf = [0u8; 64];
        let got = recv_with_fds(b.as_fd(), &mut buf, 2).expect("receive");
        assert_eq!((&buf[..got.len], got.truncated, got.fds_truncated), (&b"first"[..], false, false));
        assert_eq!(got.fds.len(), 2);
        for fd in &got.fds {
            // SAFETY (test): F_GETFD on a descriptor the test owns.
            let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) };
            assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC, "received descriptors are close-on-exec");
        }
        assert_eq!(file_type(got.fds[0].as_fd()).expect("fstat"), libc::S_IFIFO);
        assert_eq!(file_type(got.fds[1].as_fd()).expect("fstat"), libc::S_IFREG);
        let mut fds = got.fds.into_iter();
        let mut passed_write = std::fs::File::from(fds.next().expect("pipe end"));
        let mut passed_plan = std::fs::File::from(fds.next().expect("memfd"));
        passed_write.write_all(b"x").expect("write through the passed pipe end");
        drop(passed_write);
        let mut through = String::new();
        read.read_to_string(&mut through).expect("the pipe ends once every writer is closed");
        assert_eq!(through, "x");
        let mut text = String::new();
        passed_plan.read_to_string(&mut text).expect("read the passed memfd");
        assert_eq!(text, "plan bytes");
        let second = recv_with_fds(b.as_fd(), &mut buf, 2).expect("receive");
        assert_eq!((&buf[..second.len], second.fds.len()), (&b"second"[..], 0));
        // The peer's end closing reads as an empty message without descriptors.
        assert_eq!(poll(&[b.as_fd()], libc::POLLIN, 0).expect("poll"), vec![0]);
        drop(a);
        assert_ne!(poll(&[b.as_fd()], libc::POLLIN, 0).expect("poll")[0] & libc::POLLHUP, 0);
        let eof = recv_with_fds(b.as_fd(), &mut buf, 2).expect("receive");
        assert_eq!((eof.len, eof.fds.len(), eof.truncated), (0, 0, false));
    }

    // Goal: a message longer than the buffer or with more descriptors than asked for is
    // flagged (not silently taken as well-formed), the descriptors that fit are still
    // owned (closed on drop), and the kernel drops the extra ones: no descriptor leaks.
    // Method: count this process's open descriptors before and after.
    #[test]
    fn oversized_messages_and_extra_descriptors_are_flagged() {
        let open_fds = || std::fs::read_dir("/proc/self/fd").expect("/proc/self/fd").count();
        let _serial = fork_lock(); // no fork meanwhile changes the count
        let (a, b) = seqpacket_pair().expect("socketpair");
        let files: Vec<std::fs::File> =
            (0..4).map(|_| std::fs::File::open("/dev/null").expect("open")).collect();
        let before = open_fds();
        let borrowed: Vec<std::os::fd::BorrowedFd<'_>> = files.iter().map(AsFd::as_fd).collect();
        send_with_fds(a.as_fd(), &[7u8; 100], &borrowed).expect("send");
        let mut small = [0u8; 10];
        let got = recv_with_fds(b.as_fd(), &mut small, 3).expect("receive");
        assert!(got.truncated && got.fds_truncated, "{got:?}");
        assert_eq!((got.len, got.fds.len()), (10, 3));
        drop(got);
        assert_eq!(open_fds(), before, "received descriptors closed, the extra one never installed");
        send_with_fds(a.as_fd(), b"none wanted", &borrowed[..1]).expect("send");
        let got = recv_with_fds(b.as_fd(), &mut [0u8; 64], 0).expect("receive");
        assert!(got.fds_truncated && got.fds.is_empty(), "{got:?}");
        drop(got);
        assert_eq!(open_fds(), before);
    }

    // Goal: close_descriptors_except closes every descriptor from 3 but the kept ones.
    // Method: in a forked child (which may close anything without harming the tests'
    // process), keep two of four and report, by exit status, which are still open.
    #[test]
    fn only_the_kept_descriptors_stay_open() {
        let _serial = fork_lock();
        let files: Vec<std::fs::File> =
            (0..4).map(|_| std::fs::File::open("/dev/null").expect("open")).collect();
        let fds: Vec<RawFd> = files.iter().map(AsRawFd::as_raw_fd).collect();
        match fork().expect("fork") {
            Forked::Child => {
                let ok = close_descriptors_except(&[fds[1], fds[3]]).is_ok();
                // SAFETY (test): F_GETFD on integers, only to see whether they are open.
                let open = |fd: RawFd| unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
                let mut code = 0;
                for (idx, fd) in fds.iter().enumerate() {
                    if open(*fd) {
                        code |= 1 << idx;
                    }
                }
                if !open(0) || !open(2) || !ok {
                    code = 0x80;
                }
                // SAFETY (test): leaves the forked child at once, without unwinding.
                unsafe { libc::_exit(code) }
            }
            Forked::Parent(pid) => {
                let reaped = wait4(pid).expect("wait4");
                assert_eq!(libc::WEXITSTATUS(reaped.wait_status), 0b1010, "descriptors 1 and 3 kept");
            }
        }
    }

    // Goal: the password database lookups find root and refuse unknown users.
    #[test]
    fn user_lookup_finds_root() {
        let root = lookup_user("root").expect("lookup").expect("root exists");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert_eq!(lookup_uid(0).expect("lookup").map(|u| u.name), Some("root".to_owned()));
        assert_eq!(lookup_user("no-such-user-lavacore").expect("lookup"), None);
        assert!(group_list("root", 0).expect("groups").contains(&0));
    }

    // Goal: signalling process group 0 or 1 is refused (it would hit sbatchd or init).
    #[test]
    fn kill_group_refuses_dangerous_groups() {
        assert!(kill_group(0, libc::SIGTERM).is_err());
        assert!(kill_group(1, libc::SIGTERM).is_err());
        assert!(process_exists(std::process::id() as i32));
    }
}
