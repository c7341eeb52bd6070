//! [`spawn_gated`]: a job's process forked into its own session and process group, its
//! niceness and resource limits set, dropped to the job's user, its files and folder set,
//! held on a gate pipe until the shepherd has made its pid durable, then executed;
//! everything the child does between fork and execve is async-signal-safe (see
//! [`super`]).

use super::*;

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
    /// An interactive job's streams (docs/protocols/batch.md, "Interactive jobs"): for each
    /// of standard input, output and error whose path above is empty, the descriptor it is
    /// a copy of (a pipe's end, or the terminal side of a pseudo-terminal); -1 for none.
    pub terminal: [RawFd; 3],
    /// A pseudo-terminal's terminal side the job's process makes its controlling terminal
    /// right after `setsid` (`TIOCSCTTY`); -1 for none.
    pub controlling_tty: RawFd,
    /// The niceness the job's process sets (`setpriority`) before it changes identity (a
    /// negative one needs a privilege the job's user lacks); 0 leaves the niceness it
    /// inherits alone.
    pub nice: i32,
    /// The resource limits the job's process sets (`setrlimit`), in order, right after its
    /// niceness, also before it changes identity (only a privileged process may raise a
    /// hard limit).
    pub rlimits: Vec<ProcessLimit>,
}

/// A resource with a per-process limit ([`ProcessLimit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitedResource {
    /// CPU time, seconds (`RLIMIT_CPU`): the kernel sends `SIGXCPU` past the soft limit.
    CpuTime,
    /// Size of a file the process writes, bytes (`RLIMIT_FSIZE`).
    FileSize,
    /// Data segment, bytes (`RLIMIT_DATA`).
    Data,
    /// Stack, bytes (`RLIMIT_STACK`).
    Stack,
    /// Core file, bytes (`RLIMIT_CORE`; 0: none is written).
    Core,
}

impl LimitedResource {
    /// `getrlimit` of this resource into `limit`, or with `set` its `setrlimit` to `limit`;
    /// the call's result. Async-signal-safe (the job's process calls it after the fork).
    fn call(self, limit: &mut libc::rlimit, set: bool) -> libc::c_int {
        let resource = match self {
            LimitedResource::CpuTime => libc::RLIMIT_CPU,
            LimitedResource::FileSize => libc::RLIMIT_FSIZE,
            LimitedResource::Data => libc::RLIMIT_DATA,
            LimitedResource::Stack => libc::RLIMIT_STACK,
            LimitedResource::Core => libc::RLIMIT_CORE,
        };
        // SAFETY: the pointer is to a valid rlimit for the duration of the call.
        unsafe { if set { libc::setrlimit(resource, limit) } else { libc::getrlimit(resource, limit) } }
    }
}

/// A per-process resource limit, as `setrlimit` takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessLimit {
    /// The resource.
    pub resource: LimitedResource,
    /// The soft limit, in the resource's unit; `libc::RLIM_INFINITY` for none.
    pub soft: libc::rlim_t,
    /// The hard limit (the ceiling of the soft one); `libc::RLIM_INFINITY` for none.
    pub hard: libc::rlim_t,
}

/// This process's limit of `resource` (`getrlimit`), which a process it forks inherits.
pub fn current_limit(resource: LimitedResource) -> io::Result<ProcessLimit> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    if resource.call(&mut limit, false) != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ProcessLimit { resource, soft: limit.rlim_cur, hard: limit.rlim_max })
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
    /// setpriority / setrlimit (the job's niceness and resource limits).
    Limits,
}

impl SpawnStage {
    fn code(self) -> u8 {
        self as u8
    }

    /// Every stage, in code order.
    pub const ALL: [SpawnStage; 10] = [
        SpawnStage::Session,
        SpawnStage::Identity,
        SpawnStage::WorkingDirectory,
        SpawnStage::Stdin,
        SpawnStage::Stdout,
        SpawnStage::Stderr,
        SpawnStage::Directory,
        SpawnStage::Gate,
        SpawnStage::Exec,
        SpawnStage::Limits,
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
            SpawnStage::Limits => "limits",
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
            SpawnStage::Limits => "cannot set the job's niceness or resource limits",
        }
    }
}

/// A forked job process waiting at its gate.
#[derive(Debug)]
pub struct GatedChild {
    /// Pid of the job process; also its process group and session id.
    pub pid: i32,
    pub(super) gate: OwnedFd,
    pub(super) report: OwnedFd,
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

pub(super) fn read_report(report: &OwnedFd) -> Result<(), (SpawnStage, i32)> {
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
    let stderr_is_stdout = plan.stderr == plan.stdout && !plan.stderr.is_empty();
    let terminal = plan.terminal;
    let controlling_tty = plan.controlling_tty;
    let create_dirs: Vec<*const libc::c_char> = plan.create_dirs.iter().map(|d| d.as_ptr()).collect();
    let nice = plan.nice;
    let mut rlimits: Vec<(LimitedResource, libc::rlimit)> = plan
        .rlimits
        .iter()
        .map(|limit| (limit.resource, libc::rlimit { rlim_cur: limit.soft, rlim_max: limit.hard }))
        .collect();

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
            if controlling_tty >= 0 && libc::ioctl(controlling_tty, libc::TIOCSCTTY, 0) != 0 {
                fail(SpawnStage::Session);
            }
            // Before the identity change: a negative niceness and a raised hard limit need
            // a privilege the job's user lacks.
            if nice != 0 && libc::setpriority(libc::PRIO_PROCESS, 0, nice) != 0 {
                fail(SpawnStage::Limits);
            }
            for (resource, limit) in &mut rlimits {
                if resource.call(limit, true) != 0 {
                    fail(SpawnStage::Limits);
                }
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
                // An interactive job's stream: a copy of the relay's descriptor (dup2
                // clears close-on-exec on the copy; the original closes at execve).
                if *path == 0 {
                    let from = terminal[target as usize];
                    if from < 0 || libc::dup2(from, target) < 0 {
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
