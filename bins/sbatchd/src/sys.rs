//! The few system calls std does not wrap, and the only unsafe code of sbatchd.
//!
//! - [`spawn_gated`]: fork a job process that becomes its own session and
//!   process group, sets its niceness and resource limits ([`ExecPlan::nice`],
//!   [`ExecPlan::rlimits`]), takes back the default SIGPIPE disposition, drops to the job's user (setgroups → setgid → setuid),
//!   sets its umask, working directory and standard files, and then WAITS on a
//!   gate pipe before it calls execve. The shepherd opens the gate only after
//!   the pid is durable, so a job whose pid was never recorded never ran. The
//!   child puts `LSB_JOBPID` (its own pid) in the environment it executes with,
//!   and runs a user's simple command as `sh` would ([`ExecPlan::search`]).
//! - [`wait4`] for the exit status together with the resource usage.
//! - [`kill_group`], [`kill_process`], [`set_child_subreaper`] (a task shepherd keeps its
//!   task's whole tree, [`crate::tasks`]), [`lookup_user`], [`lookup_uid`], [`group_list`], [`process_exists`],
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
//! - Interactive jobs' pseudo-terminals ([`open_pty`], [`set_window_size`],
//!   [`set_nonblocking`]); the job's process takes its terminal as its controlling
//!   terminal in [`spawn_gated`] ([`ExecPlan::controlling_tty`]).
//!
//! Files: `sys/spawn.rs` ([`spawn_gated`]), `sys/pty.rs`, `sys/users.rs` (the user and group databases,
//! [`become_user`]), `sys/zygote_io.rs` (the zygote's calls); the rest here.
//!
//! Everything the child does between fork and execve is async-signal-safe:
//! every string and array is prepared before the fork, and the child only makes
//! raw system calls and `_exit`s on failure after reporting `(stage, errno)`
//! through a close-on-exec pipe.

#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

mod pty;
mod spawn;
mod users;
mod zygote_io;

pub use pty::*;
#[cfg(test)]
use spawn::read_report;
pub use spawn::*;
pub use users::*;
pub use zygote_io::*;

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

/// Sends `signal` to the one process `pid` (a task's descendant, [`crate::tasks`]).
pub fn kill_process(pid: i32, signal: i32) -> io::Result<()> {
    if pid <= 1 {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("refusing to signal process {pid}")));
    }
    // SAFETY: kill with a positive pid has no memory-safety preconditions.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): a descendant whose
/// parent ends is reparented to it rather than to init, so that every process a task
/// started stays in the task shepherd's tree, whatever sessions or groups it made.
pub fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER, 1) takes plain integers.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
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

/// The kernel's clock ticks per second and bytes per page (the units of `/proc/<pid>/stat`);
/// `None` for one the system does not say.
pub fn ticks_and_page_bytes() -> (Option<u64>, Option<u64>) {
    // SAFETY: sysconf has no preconditions; it returns -1 for a value it does not know.
    let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
    let known = |value: libc::c_long| u64::try_from(value).ok().filter(|value| *value > 0);
    (known(ticks), known(page))
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
            terminal: [-1; 3],
            controlling_tty: -1,
            nice: 0,
            rlimits: vec![],
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

    // Goal: the job's process runs with the niceness and the per-process limits of its
    // plan, as the shepherd maps a job's limits (CPU time soft under the hard limit it
    // inherits; file, data, stack, core in bytes, soft and hard; core 0 is a limit), and a
    // limit it cannot set is a start failure at the `limits` stage. Method: the child
    // prints /proc/self/limits and its niceness (field 19 of /proc/self/stat); a soft
    // limit above its hard one is refused by the kernel (EINVAL, even for root).
    #[test]
    fn the_job_runs_with_its_niceness_and_limits() {
        let _serial = fork_lock();
        let dir = tempfile::tempdir().expect("tempdir");
        let limits = lava_batch_wire::ResourceLimits {
            cpu_s: Some(30),
            file_kb: Some(1024),
            core_kb: Some(0),
            stack_kb: Some(4096),
            data_kb: Some(1_048_576),
            ..Default::default()
        };
        let cpu_hard = current_limit(LimitedResource::CpuTime).expect("getrlimit").hard;
        let mut limited = plan(dir.path(), r#"cat /proc/self/limits; cut -d" " -f19 /proc/self/stat"#);
        limited.nice = 5;
        limited.rlimits = crate::shepherd::process_limits(&limits, || cpu_hard);
        let (code, out, err) = run_plan(&limited, dir.path());
        assert_eq!((code, err.as_str()), (0, ""), "{out}");
        let seen = |name: &str| {
            let line = out.lines().find_map(|line| line.strip_prefix(name)).expect(name);
            let words: Vec<&str> = line.split_whitespace().collect();
            (words[0].to_owned(), words[1].to_owned())
        };
        let both = |value: &str| (value.to_owned(), value.to_owned());
        let hard =
            if cpu_hard == libc::RLIM_INFINITY { "unlimited".to_owned() } else { cpu_hard.to_string() };
        assert_eq!(seen("Max cpu time"), ("30".to_owned(), hard));
        assert_eq!(seen("Max file size"), both("1048576"));
        assert_eq!(seen("Max core file size"), both("0"));
        assert_eq!(seen("Max stack size"), both("4194304"));
        assert_eq!(seen("Max data size"), both("1073741824"));
        assert_eq!(out.lines().last(), Some("5"), "{out}");

        let mut refused = plan(dir.path(), "true");
        refused.rlimits = vec![ProcessLimit { resource: LimitedResource::Core, soft: 2, hard: 1 }];
        let child = spawn_gated(&refused).expect("fork");
        let pid = child.pid;
        assert_eq!(child.open_gate(), Err((SpawnStage::Limits, libc::EINVAL)));
        assert_eq!(libc::WEXITSTATUS(wait4(pid).expect("wait4").wait_status), 127);
        assert_eq!(SpawnStage::from_name("limits"), Some(SpawnStage::Limits));
        assert_eq!(SpawnStage::from_name("exec"), Some(SpawnStage::Exec));
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
