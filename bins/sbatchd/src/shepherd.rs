//! The shepherd: one per job, single-threaded, plain std. It starts the job, records its
//! pid durably before the job may execute, waits for it, and records how it ended durably
//! before exiting. It outlives sbatchd (its own session), so a job survives an sbatchd
//! restart and its end is still captured.
//!
//! sbatchd has each shepherd forked by its shepherd zygote ([`crate::zygote`]: a
//! long-lived `lava-shepherd --zygote`), which runs [`run_with`] in the child with the
//! job's descriptors; no program is executed per shepherd. The same code runs as a
//! program, `lava-shepherd <state/jobfile> --notify-fd N --lock-fd M --plan-fd P [--go-fd G]` with the
//! descriptors inherited at those numbers ([`main`]), which is how sbatchd started every
//! shepherd before the zygote and how one can be run by hand. Both are in
//! `bins/sbatchd/lava-shepherd.rs`, installed next to sbatchd
//! ([`crate::launch::shepherd_program`]), a small binary that links none of the daemon's
//! runtime (tokio, tracing, clap), so the zygote is small and single-threaded.
//!
//! Protocol with sbatchd (see also [`crate::handoff`] for the file formats):
//! 1. sbatchd takes the job's lock (an flock on the job's state folder), puts the launch
//!    plan in an in-memory file, and sends the zygote the job's state folder with the
//!    write end of a pipe, the lock and the plan (`SCM_RIGHTS`), and for a new job the read
//!    end of its go pipe. The zygote forks; the
//!    child keeps only those descriptors (its standard streams are /dev/null, its
//!    environment empty, as the zygote's) and becomes the shepherd; the zygote answers
//!    with its pid and a pidfd. The shepherd holds the lock until it exits: the lock being
//!    free means no shepherd lives, and none can appear.
//! 2. The shepherd makes itself a new session (setsid), so that it survives sbatchd and no
//!    terminal signal reaches it, reads the plan, looks up the user's groups and forks the job's process,
//!    which prepares itself (session, identity, umask, cwd, files) and stops at its gate.
//! 3. When sbatchd gave it a go pipe (a new job, launched while its record is being made
//!    durable: docs/batch.md, "A new job's launch overlaps its record"), it waits for `g`
//!    on that pipe, which sbatchd writes once the record is durable. End-of-file instead
//!    (sbatchd died, or could not make the record durable) means the launch must leave no
//!    trace: it closes the job's gate unopened, reaps the child and exits ([`EXIT_NO_GO`])
//!    with `pid` and `exit` still empty, which a restarted sbatchd reads as a job never
//!    started. Then it writes `pid` (with its own pid), writes `p` on the pipe (sbatchd
//!    reads `pid` at once, no polling, and reports it to mbatchd while the shepherd
//!    flushes), makes `pid` durable (fdatasync), and only then opens the gate. A job whose
//!    pid was never made durable never ran, and no job runs before its record is durable.
//!    (A crash of the machine before that flush loses `pid` though mbatchd may have
//!    logged it: the job never ran, so the restarted sbatchd starts it afresh, and its
//!    EXECUTE gives mbatchd the new pid. Should the flush fail, the job ends as a start
//!    failure, its `exit` announced with `e`.)
//! 4. If anything fails before `pid` exists, it writes `exit` (`failed`) durably, then `p`,
//!    and exits: sbatchd reports a launch failure (the job goes back to PEND). If the
//!    job's preparation failed (reported at the gate), `exit` says `failed` with the stage
//!    and errno: the job finishes as a start failure (exit 127).
//! 5. It waits for the job (wait4: status and resource usage; how the job's exec went is
//!    read after that, from the child's close-on-exec report pipe, so the shepherd sleeps
//!    once per job, not once until the exec and again until the end), writes `exit` (`exited`),
//!    writes `e` on the pipe, makes `exit` durable (fdatasync) and exits (the zygote reaps
//!    it). On `e` sbatchd reads `exit` and reports the job's end while the shepherd
//!    flushes: the flush is off the path from a job's end to the next job's start. This
//!    loses nothing a flush before the byte would keep: the file only has to outlive a
//!    crash of the machine, which also ends the shepherd before its flush; what mbatchd
//!    has logged by then stands, and otherwise sbatchd reports the job lost after the
//!    reboot either way. sbatchd also watches the shepherd with the pidfd the zygote gave
//!    it, and reads `exit` when the shepherd ends without an `e` (a shepherd it adopted
//!    after a restart, or one that died).
//!
//! Pre- and post-execution commands (the plan's `pre_exec` and `post_exec`; docs/batch.md,
//! "Pre- and post-execution commands"): with pre-execution commands the shepherd waits
//! for `g` before step 2 and runs them one after the other ([`run_hook`]: a gated child
//! as the job's user, waited for); the first that exits non-zero ends the launch with
//! `exit` saying `preexec` (durable), then `p`, and no job process is made. With
//! post-execution commands, step 5 makes `exit` durable first, runs them (with
//! `LSB_JOBEXIT_STAT`), and only then writes `e`: the job stays running for sbatchd
//! until they end, and a crash meanwhile still finds the job's end in `exit`.

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::Write;
use std::os::fd::{OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use lava_batch_wire as wire;

use crate::handoff::{
    ExitFile, Hook, LAUNCH_PLAN_BYTES_MAX, LAUNCH_PLAN_LIMITS, LAUNCH_PLAN_VERSION, LaunchPlan, PidFile,
};
use crate::layout::{self, EXIT_FILE, PID_FILE};
use crate::procfs::{boot_id, process_start_ticks};
use crate::sys::{self, ExecPlan};

/// The byte the shepherd writes on the notification pipe once the `pid` question is settled
/// (`pid` written, its flush following before the job may run; or the start failed and
/// `exit` says why).
pub const READY_BYTE: u8 = b'p';
/// The byte the shepherd writes once the job has ended and `exit` is written (before its
/// flush).
pub const ENDED_BYTE: u8 = b'e';

/// The shepherd program's file name; it is installed in sbatchd's folder.
pub const SHEPHERD_PROGRAM: &str = "lava-shepherd";
/// The flag naming the notification pipe's descriptor.
pub const NOTIFY_FD_FLAG: &str = "--notify-fd";
/// The flag naming the job lock's descriptor.
pub const LOCK_FD_FLAG: &str = "--lock-fd";
/// The flag naming the launch plan's descriptor (an in-memory file).
pub const PLAN_FD_FLAG: &str = "--plan-fd";
/// The flag naming the go pipe's descriptor (its read end), when sbatchd gives one.
pub const GO_FD_FLAG: &str = "--go-fd";
/// The byte sbatchd writes on the go pipe once the job's record is durable.
pub const GO_BYTE: u8 = b'g';

/// The shepherd's command line.
#[derive(Debug, PartialEq, Eq)]
struct ShepherdArgs {
    state_dir: PathBuf,
    notify_fd: Option<RawFd>,
    lock_fd: RawFd,
    plan_fd: RawFd,
    go_fd: Option<RawFd>,
}

/// Parses `STATE_DIR [--notify-fd N] --lock-fd M --plan-fd P [--go-fd G]` (arguments after the program
/// name), by hand: a command-line parser would cost every job's start more than the whole
/// parse.
fn parse_args(args: impl IntoIterator<Item = OsString>) -> Result<ShepherdArgs, String> {
    let mut state_dir = None;
    let mut notify_fd = None;
    let mut lock_fd = None;
    let mut plan_fd = None;
    let mut go_fd = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let slot = match arg.to_str() {
            Some(NOTIFY_FD_FLAG) => &mut notify_fd,
            Some(LOCK_FD_FLAG) => &mut lock_fd,
            Some(PLAN_FD_FLAG) => &mut plan_fd,
            Some(GO_FD_FLAG) => &mut go_fd,
            Some(flag) if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            _ if state_dir.is_none() => {
                state_dir = Some(PathBuf::from(arg));
                continue;
            }
            _ => return Err(format!("unexpected argument {}", arg.to_string_lossy())),
        };
        let flag = arg.to_string_lossy().into_owned();
        let value = args.next().ok_or_else(|| format!("{flag} needs a descriptor number"))?;
        let fd = value
            .to_str()
            .and_then(|text| text.parse::<RawFd>().ok())
            .filter(|fd| *fd >= 0)
            .ok_or_else(|| format!("{flag} {}: not a descriptor number", value.to_string_lossy()))?;
        if slot.replace(fd).is_some() {
            return Err(format!("{flag} given twice"));
        }
    }
    Ok(ShepherdArgs {
        state_dir: state_dir.ok_or("no job state folder given")?,
        notify_fd,
        lock_fd: lock_fd.ok_or_else(|| format!("started without the job's lock ({LOCK_FD_FLAG})"))?,
        plan_fd: plan_fd.ok_or_else(|| format!("started without a launch plan ({PLAN_FD_FLAG})"))?,
        go_fd,
    })
}

/// Exit status of a shepherd whose job ran (whatever the job's own status).
pub const EXIT_OK: u8 = 0;
/// Exit status of a shepherd that could not start its job (it wrote `exit` saying why).
pub const EXIT_FAILED: u8 = 1;
/// Exit status of a shepherd not started by sbatchd (bad command line or descriptors).
pub const EXIT_USAGE: u8 = 2;
/// Exit status of a shepherd whose go pipe ended without [`GO_BYTE`]: it wrote nothing and
/// its job never ran.
pub const EXIT_NO_GO: u8 = 3;
/// Exit status of a shepherd whose job's pre-execution command failed (it wrote `exit`
/// saying `preexec`; the job never ran).
pub const EXIT_PRE_EXEC_FAILED: u8 = 4;

/// `main` of the `lava-shepherd` program: a shepherd, or with [`crate::zygote::ZYGOTE_FLAG`]
/// first, the zygote that forks shepherds, or with [`crate::peek::READER_FLAG`] first,
/// `bpeek`'s reader of one job's output.
pub fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.peek().is_some_and(|first| first == crate::zygote::ZYGOTE_FLAG) {
        return crate::zygote::main(args.skip(1));
    }
    if args.peek().is_some_and(|first| first == crate::peek::READER_FLAG) {
        return crate::peek::reader_main(args.skip(1));
    }
    if args.peek().is_some_and(|first| first == crate::tasks::TASK_FLAG) {
        return crate::tasks::shepherd_main(args.skip(1));
    }
    match parse_args(args) {
        Ok(args) => run(&args),
        Err(message) => {
            eprintln!("{SHEPHERD_PROGRAM}: {message}; only sbatchd starts shepherds");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Milliseconds since the epoch.
fn now_ms() -> u64 {
    lava_net::system_now_ms()
}

/// Runs the shepherd for the job whose state folder is `state_dir`, with the inherited
/// notification pipe, job lock and launch plan; never returns early without having
/// written `exit`, except when it was not started by sbatchd.
fn run(args: &ShepherdArgs) -> ExitCode {
    let Ok(lock) = sys::inherited_fd(args.lock_fd) else {
        eprintln!(
            "{SHEPHERD_PROGRAM}: descriptor {} is not the job's lock; only sbatchd starts shepherds",
            args.lock_fd
        );
        return ExitCode::from(EXIT_USAGE);
    };
    let notify = args.notify_fd.and_then(|fd| sys::inherited_fd(fd).ok()).map(File::from);
    let plan = sys::inherited_fd(args.plan_fd).map(File::from);
    let Ok(go) = args.go_fd.map(sys::inherited_fd).transpose() else {
        eprintln!(
            "{SHEPHERD_PROGRAM}: {GO_FD_FLAG} does not name an open descriptor; only sbatchd starts shepherds"
        );
        return ExitCode::from(EXIT_USAGE);
    };
    ExitCode::from(run_with(&args.state_dir, lock, notify, plan, go.map(File::from)))
}

/// The shepherd proper, from its descriptors (inherited by an executed `lava-shepherd`, or
/// received by the zygote for a forked one): makes itself a new session, runs the job, and
/// returns the exit status ([`EXIT_OK`], [`EXIT_FAILED`], or [`EXIT_NO_GO`]). The lock is
/// held until then. With a go pipe, the job's process waits for [`GO_BYTE`] on it (step 3
/// of the module doc).
pub fn run_with(
    state_dir: &Path,
    lock: OwnedFd,
    notify: Option<File>,
    plan: std::io::Result<File>,
    go: Option<File>,
) -> u8 {
    // Already a session leader only if started by hand; nothing to do then.
    let _ = sys::new_session();
    let mut shepherd = Shepherd { state_dir, notify, go, dir_fd: std::os::fd::AsRawFd::as_raw_fd(&lock) };
    let code = shepherd.run(plan);
    drop(lock);
    code
}

struct Shepherd<'a> {
    state_dir: &'a Path,
    notify: Option<File>,
    go: Option<File>,
    /// The state folder, open (it is the job's lock): an interactive job's attach socket is
    /// bound through it ([`crate::relay`]).
    dir_fd: RawFd,
}

impl Shepherd<'_> {
    /// Runs the job from the launch plan in `plan` (the inherited in-memory file).
    fn run(&mut self, plan: std::io::Result<File>) -> u8 {
        let plan = match read_plan(plan) {
            Ok(plan) => plan,
            Err(message) => return self.fail_before_pid("plan", 0, message),
        };
        let mut exec_plan = match exec_plan(&plan) {
            Ok(exec_plan) => exec_plan,
            Err((stage, message)) => return self.fail_before_pid(stage, 0, message),
        };
        if !plan.pre_exec.is_empty() {
            // The pre-execution commands run only once the record is durable, and before
            // the job's process exists: a failure leaves no pid, and the job never ran.
            if !self.wait_for_go() {
                return EXIT_NO_GO;
            }
            for hook in &plan.pre_exec {
                let exit = run_hook(&plan, &exec_plan.groups, hook, &[]);
                if exit != 0 {
                    self.write_exit(&ExitFile::PreExecFailed { exit, end_time_ms: now_ms() });
                    self.notify_sbatchd(READY_BYTE);
                    return EXIT_PRE_EXEC_FAILED;
                }
            }
        }
        // An interactive job's streams and attach socket exist before the job does.
        let relay = match plan.interactive {
            0 => None,
            _ => match crate::relay::Relay::prepare(self.dir_fd, &plan) {
                Ok(relay) => Some(relay),
                Err(message) => return self.fail_before_pid("terminal", 0, message),
            },
        };
        if let Some(relay) = &relay {
            relay.plan_streams(&mut exec_plan);
        }
        let child = match sys::spawn_gated(&exec_plan) {
            Ok(child) => child,
            Err(err) => {
                return self.fail_before_pid("fork", err.raw_os_error().unwrap_or(0), format!("fork: {err}"));
            }
        };
        let pid = child.pid;
        if !self.wait_for_go() {
            // The record never became durable, or its sbatchd is gone: nothing of this
            // launch may remain. Closing the job's gate unopened makes the child exit
            // without executing anything; `pid` and `exit` stay empty, which a restarted
            // sbatchd reads as a job never started (it launches it afresh).
            drop(child);
            let _ = sys::wait4(pid);
            return EXIT_NO_GO;
        }
        let pid_file = PidFile {
            pid,
            pgid: pid,
            exec_time_ms: now_ms(),
            start_ticks: process_start_ticks(pid).unwrap_or(0),
            boot_id: boot_id().unwrap_or_default(),
            shepherd: i32::try_from(std::process::id()).unwrap_or(0),
        };
        // `p` goes as soon as `pid` is written, before its flush: sbatchd reports the pid
        // to mbatchd while the shepherd flushes (step 3 of the module doc).
        let mut announced = false;
        let state_dir = self.state_dir;
        let written =
            layout::write_shepherd_file_announced(state_dir, PID_FILE, pid_file.to_line().as_bytes(), || {
                announced = true;
                self.notify_sbatchd(READY_BYTE);
            });
        if let Err(err) = written {
            // Closing the gate unopened makes the child exit without executing anything.
            drop(child);
            let _ = sys::wait4(pid);
            let errno = err.raw_os_error().unwrap_or(0);
            let message = format!("cannot record the job's pid: {err}");
            if !announced {
                return self.fail_before_pid("pidfile", errno, message);
            }
            // sbatchd has the pid already: the job ends as one that could not start.
            let failed =
                ExitFile::Failed { stage: "pidfile".to_owned(), errno, end_time_ms: now_ms(), message };
            self.write_exit_announced(&failed);
            return EXIT_FAILED;
        }
        lava_crash::point!("shepherd.pid_flushed");
        // The child's exec is not waited for: its outcome is read once the child is reaped,
        // so the shepherd sleeps once, until the job ends.
        let released = child.release();
        // A relay that cannot start leaves the job without its terminal: sbatchd kills it
        // once no terminal has attached in time.
        let relay = relay.and_then(|relay| relay.start().ok());
        let reaped = sys::wait4(pid);
        let outcome = released.outcome();
        if let Some(relay) = relay {
            let wait_status = match (&reaped, &outcome) {
                (Ok(reaped), Ok(())) => reaped.wait_status,
                _ => lava_sbd::START_FAILED_WAIT_STATUS,
            };
            relay.finish(wait_status);
        }
        if let Err((stage, errno)) = outcome {
            let message = format!("{}: {}", stage.describe(), std::io::Error::from_raw_os_error(errno));
            self.write_exit_announced(&ExitFile::Failed {
                stage: stage.name().to_owned(),
                errno,
                end_time_ms: now_ms(),
                message,
            });
            return EXIT_FAILED;
        }
        let exit = match reaped {
            Ok(reaped) => ExitFile::Exited {
                wait_status: reaped.wait_status,
                end_time_ms: now_ms(),
                rusage: wire::ResourceUsage {
                    user_time_ms: reaped.user_time_ms,
                    system_time_ms: reaped.system_time_ms,
                    max_rss_kb: reaped.max_rss_kb,
                },
            },
            // Cannot happen for our own child. Reported like a lost job (see the crate
            // doc), with no usage, rather than never reported.
            Err(_) => ExitFile::Exited {
                wait_status: crate::LOST_WAIT_STATUS,
                end_time_ms: now_ms(),
                rusage: wire::ResourceUsage::default(),
            },
        };
        if plan.post_exec.is_empty() {
            self.write_exit_announced(&exit);
            return EXIT_OK;
        }
        // The job's end is durable first, then the post-execution commands run, and only
        // then is sbatchd told (`e`): the job stays RUN until they end, and a crash meanwhile
        // still finds its end ([`crate::daemon`] reads `exit` when the shepherd is gone).
        self.write_exit(&exit);
        lava_crash::point!("shepherd.exit_flushed");
        let wait_status = match &exit {
            ExitFile::Exited { wait_status, .. } => *wait_status,
            _ => crate::LOST_WAIT_STATUS,
        };
        let status = [format!("LSB_JOBEXIT_STAT={wait_status}")];
        for hook in &plan.post_exec {
            // Its exit changes nothing of the job's (LSF's rule).
            run_hook(&plan, &exec_plan.groups, hook, &status);
        }
        self.notify_sbatchd(ENDED_BYTE);
        EXIT_OK
    }

    /// Waits for sbatchd's [`GO_BYTE`] on the go pipe, if there is one: true once it came,
    /// false at end-of-file, any other byte or an error (see [`run_with`]).
    fn wait_for_go(&mut self) -> bool {
        let Some(mut go) = self.go.take() else { return true };
        let mut byte = [0u8; 1];
        loop {
            match std::io::Read::read(&mut go, &mut byte) {
                Ok(1) => return byte[0] == GO_BYTE,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                _ => return false,
            }
        }
    }

    /// Records a failure that happened before any pid existed, tells sbatchd, and exits.
    fn fail_before_pid(&mut self, stage: &str, errno: i32, message: String) -> u8 {
        self.write_exit(&ExitFile::Failed { stage: stage.to_owned(), errno, end_time_ms: now_ms(), message });
        self.notify_sbatchd(READY_BYTE);
        EXIT_FAILED
    }

    fn write_exit(&self, exit: &ExitFile) {
        // If even this fails, sbatchd finds no exit file and reports the job lost.
        let _ = layout::write_shepherd_file(self.state_dir, EXIT_FILE, exit.to_line().as_bytes());
    }

    /// After the job's pid is known: writes `exit`, says so on the pipe ([`ENDED_BYTE`]),
    /// then makes it durable (see step 5 of the module doc).
    fn write_exit_announced(&mut self, exit: &ExitFile) {
        let notify = &mut self.notify;
        let written = || {
            if let Some(notify) = notify.as_mut() {
                let _ = notify.write_all(&[ENDED_BYTE]);
            }
        };
        // If even this fails, sbatchd finds no exit file and reports the job lost.
        let _ = layout::write_shepherd_file_announced(
            self.state_dir,
            EXIT_FILE,
            exit.to_line().as_bytes(),
            written,
        );
        lava_crash::point!("shepherd.exit_flushed");
    }

    /// One byte on the pipe; the pipe stays open until the shepherd ends (end-of-file for
    /// sbatchd). sbatchd may be gone (EPIPE is ignored: Rust programs ignore SIGPIPE).
    fn notify_sbatchd(&mut self, byte: u8) {
        if let Some(notify) = self.notify.as_mut() {
            let _ = notify.write_all(&[byte]);
        }
    }
}

/// Reads and checks the launch plan from its inherited file (at most
/// [`LAUNCH_PLAN_BYTES_MAX`] bytes are read; the decoder refuses more).
fn read_plan(file: std::io::Result<File>) -> Result<LaunchPlan, String> {
    use std::io::Read;
    let file = file.map_err(|err| format!("no launch plan descriptor: {err}"))?;
    let mut bytes = Vec::new();
    let limit = u64::try_from(LAUNCH_PLAN_BYTES_MAX).unwrap_or(u64::MAX) + 1;
    file.take(limit).read_to_end(&mut bytes).map_err(|err| format!("cannot read the launch plan: {err}"))?;
    let plan: LaunchPlan =
        lava_xdr::from_bytes(&bytes, &LAUNCH_PLAN_LIMITS).map_err(|err| format!("launch plan: {err}"))?;
    if plan.version != LAUNCH_PLAN_VERSION {
        return Err(format!("launch plan version {}", plan.version));
    }
    Ok(plan)
}

/// Where `sh` looks for `command`: the command itself when it holds a `/`, else each folder
/// of the `PATH` in `env` joined with it (an empty folder is the working directory).
fn command_paths(command: &str, env: &[String]) -> Vec<String> {
    if command.contains('/') {
        return vec![command.to_owned()];
    }
    let path =
        env.iter().find_map(|entry| entry.strip_prefix("PATH=")).unwrap_or(crate::launch::PATH_DEFAULT);
    path.split(':')
        .map(|dir| match dir {
            "" => command.to_owned(),
            dir => format!("{}/{command}", dir.trim_end_matches('/')),
        })
        .collect()
}

/// Runs a pre- or post-execution command as the job's user and waits for it; `extra_env`
/// is added to the job's environment. Returns its exit value: 128 plus the signal that
/// killed it, 127 when it could not be started (reported on the job's error file by the
/// shell, or not at all for a queue's command).
fn run_hook(plan: &LaunchPlan, groups: &[u32], hook: &Hook, extra_env: &[String]) -> u8 {
    let Ok(exec) = hook_exec_plan(plan, groups, hook, extra_env) else { return HOOK_NOT_STARTED };
    let Ok(child) = sys::spawn_gated(&exec) else { return HOOK_NOT_STARTED };
    let pid = child.pid;
    let released = child.release();
    let reaped = sys::wait4(pid);
    if released.outcome().is_err() {
        return HOOK_NOT_STARTED;
    }
    match reaped {
        Ok(reaped) => exit_value(reaped.wait_status),
        Err(_) => HOOK_NOT_STARTED,
    }
}

/// What a hook that could not be started exits with (as `sh` answers a command it cannot run).
const HOOK_NOT_STARTED: u8 = 127;

/// The exit value of a wait status as `sh` reports it: the exit code, or 128 plus the signal.
fn exit_value(wait_status: i32) -> u8 {
    let signal = wait_status & 0x7f;
    let value = if signal == 0 { (wait_status >> 8) & 0xff } else { 128 + signal };
    u8::try_from(value).unwrap_or(u8::MAX)
}

/// How a hook runs: `/bin/sh -c COMMAND` as the job's user with the job's environment
/// (plus `extra_env`); the job's own hooks in its working directory, appending to its
/// output and error files; the queue's in `/tmp`, on `/dev/null`, with LSF's `PATH`.
fn hook_exec_plan<'a>(
    plan: &'a LaunchPlan,
    groups: &[u32],
    hook: &Hook,
    extra_env: &[String],
) -> Result<ExecPlan, std::ffi::NulError> {
    let mut env: Vec<String> = plan.env.clone();
    if hook.queue_level {
        env.retain(|entry| !entry.starts_with("PATH="));
        env.push(format!("PATH={}", crate::launch::QUEUE_HOOK_PATH));
    }
    env.extend(extra_env.iter().cloned());
    let all =
        |texts: &[String]| texts.iter().map(|t| CString::new(t.as_str())).collect::<Result<Vec<_>, _>>();
    let (cwd, stdout, stderr, create_dirs) = if hook.queue_level {
        ("/tmp", "/dev/null", "/dev/null", Vec::new())
    } else {
        // An interactive job's relayed streams (empty paths) are not the hooks': /dev/null.
        let file = |path: &'a str| if path.is_empty() { "/dev/null" } else { path };
        (plan.cwd.as_str(), file(&plan.stdout), file(&plan.stderr), all(&plan.create_dirs)?)
    };
    Ok(ExecPlan {
        program: CString::new(crate::launch::JOB_SHELL)?,
        search: Vec::new(),
        argv: all(&["sh".to_owned(), "-c".to_owned(), hook.command.clone()])?,
        envp: all(&env)?,
        uid: plan.uid,
        gid: plan.gid,
        groups: groups.to_vec(),
        cwd: CString::new(cwd)?,
        umask: plan.umask,
        stdin: CString::new("/dev/null")?,
        stdout: CString::new(stdout)?,
        stdout_truncate: false,
        stderr: CString::new(stderr)?,
        stderr_truncate: false,
        create_dirs,
        terminal: [-1; 3],
        controlling_tty: -1,
        nice: 0,
        rlimits: Vec::new(),
    })
}

/// The per-process limits of `limits`, as the job's process sets them on itself: a CPU time
/// limit is the soft `RLIMIT_CPU` (the kernel sends `SIGXCPU` to a process past it; the
/// whole job's is sbatchd's to enforce) under the hard one as it is, `cpu_hard()` (asked
/// only for a CPU time limit; a soft limit above it would be refused); a file, data, stack
/// or core limit in KiB is both the soft and the hard limit in bytes (saturating: one past
/// `rlim_t` is none). The virtual memory, process and thread limits are the whole job's,
/// not a process's: sbatchd's.
pub(crate) fn process_limits(
    limits: &wire::ResourceLimits,
    cpu_hard: impl FnOnce() -> libc::rlim_t,
) -> Vec<sys::ProcessLimit> {
    use sys::LimitedResource;
    let value = |amount: u64| libc::rlim_t::try_from(amount).unwrap_or(libc::RLIM_INFINITY);
    let mut rlimits = Vec::new();
    if let Some(seconds) = limits.cpu_s {
        let hard = cpu_hard();
        rlimits.push(sys::ProcessLimit {
            resource: LimitedResource::CpuTime,
            soft: value(seconds).min(hard),
            hard,
        });
    }
    for (kb, resource) in [
        (limits.file_kb, LimitedResource::FileSize),
        (limits.data_kb, LimitedResource::Data),
        (limits.stack_kb, LimitedResource::Stack),
        (limits.core_kb, LimitedResource::Core),
    ] {
        if let Some(kb) = kb {
            let bytes = value(kb.saturating_mul(1024));
            rlimits.push(sys::ProcessLimit { resource, soft: bytes, hard: bytes });
        }
    }
    rlimits
}

/// Turns the plan into C strings and adds the supplementary groups when the identity changes.
fn exec_plan(plan: &LaunchPlan) -> Result<ExecPlan, (&'static str, String)> {
    let c = |what: &str, text: &str| {
        CString::new(text).map_err(|_| ("plan", format!("{what} contains a NUL byte")))
    };
    let all = |what: &str, texts: &[String]| texts.iter().map(|t| c(what, t)).collect::<Result<Vec<_>, _>>();
    let changes_identity = sys::effective_uid() != plan.uid;
    let groups = if changes_identity {
        sys::group_list(&plan.user, plan.gid)
            .map_err(|err| ("groups", format!("cannot list the groups of {}: {err}", plan.user)))?
    } else {
        Vec::new()
    };
    // The job's process inherits this process's hard CPU time limit. getrlimit cannot fail
    // for a valid resource; should it, the job's process reports the limit it cannot set.
    let cpu_hard =
        || sys::current_limit(sys::LimitedResource::CpuTime).map_or(libc::RLIM_INFINITY, |limit| limit.hard);
    let search = if plan.search_path {
        command_paths(&plan.program, &plan.env)
            .iter()
            .map(|path| c("program", path))
            .collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    Ok(ExecPlan {
        program: c("program", &plan.program)?,
        search,
        argv: all("argument", &plan.argv)?,
        envp: all("environment", &plan.env)?,
        uid: plan.uid,
        gid: plan.gid,
        groups,
        cwd: c("working directory", &plan.cwd)?,
        umask: plan.umask,
        stdin: c("input file", &plan.stdin)?,
        stdout: c("output file", &plan.stdout)?,
        stdout_truncate: plan.stdout_truncate,
        stderr: c("error file", &plan.stderr)?,
        stderr_truncate: plan.stderr_truncate,
        create_dirs: all("folder", &plan.create_dirs)?,
        terminal: [-1; 3],
        controlling_tty: -1,
        nice: plan.nice,
        rlimits: process_limits(&plan.limits, cpu_hard),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ShepherdArgs, String> {
        parse_args(args.iter().map(OsString::from))
    }

    // Goal: a simple command is looked up as sh looks it up: a path as written, else the
    // job's PATH folders in order, an empty folder meaning the working directory.
    #[test]
    fn command_paths_follow_the_jobs_path() {
        let env = |path: &str| vec!["HOME=/h".to_owned(), format!("PATH={path}")];
        assert_eq!(command_paths("./run", &env("/bin")), ["./run"]);
        assert_eq!(command_paths("/bin/true", &env("/bin")), ["/bin/true"]);
        assert_eq!(command_paths("true", &env("/usr/bin/::/bin")), ["/usr/bin/true", "true", "/bin/true"]);
        assert_eq!(command_paths("true", &[]).len(), crate::launch::PATH_DEFAULT.split(':').count());
    }

    // Goal: a launch plan is read from its in-memory file, every field intact (version 5's
    // niceness and limits too, 0 and None kept apart); a missing descriptor, bytes that are
    // no plan, another version and an oversized file are refused, saying what.
    #[test]
    fn launch_plans_are_read_and_checked() {
        let plan = LaunchPlan {
            version: LAUNCH_PLAN_VERSION,
            job_id: 7,
            array_index: 0,
            user: "root".into(),
            uid: 0,
            gid: 0,
            program: "true".into(),
            argv: vec!["true".into()],
            search_path: true,
            env: vec!["PATH=/bin".into()],
            cwd: "/".into(),
            umask: 0o022,
            stdin: "/dev/null".into(),
            stdout: "/dev/null".into(),
            stdout_truncate: false,
            stderr: "/dev/null".into(),
            stderr_truncate: false,
            create_dirs: vec![],
            interactive: 0,
            pre_exec: vec![],
            post_exec: vec![],
            nice: -3,
            limits: wire::ResourceLimits {
                cpu_s: Some(30),
                core_kb: Some(0),
                swap_kb: Some(u64::MAX),
                threads: Some(8),
                ..wire::ResourceLimits::default()
            },
        };
        let file = |bytes: &[u8]| Ok(sys::memory_file(c"test-plan", bytes).expect("memfd"));
        let bytes = lava_xdr::to_bytes(&plan).expect("encodes");
        assert_eq!(read_plan(file(&bytes)), Ok(plan.clone()));
        let missing = read_plan(Err(std::io::Error::from_raw_os_error(libc::EBADF)));
        assert!(missing.expect_err("no descriptor").starts_with("no launch plan descriptor"));
        assert!(read_plan(file(b"junk")).expect_err("junk").starts_with("launch plan: "));
        let old = lava_xdr::to_bytes(&LaunchPlan { version: 1, ..plan }).expect("encodes");
        assert_eq!(read_plan(file(&old)), Err("launch plan version 1".to_owned()));
        let huge = vec![0u8; LAUNCH_PLAN_BYTES_MAX + 2];
        assert!(read_plan(file(&huge)).is_err());
    }

    // Goal: the plan's limits become the job's process's own: CPU time a soft limit under
    // the hard one as it is (never above it), file, data, stack and core limits in bytes,
    // both soft and hard (0 a limit, a size past the kernel's range none); the whole job's
    // limits none of them. Method: map limits against given hard CPU limits.
    #[test]
    fn process_limits_follow_the_plan() {
        use sys::{LimitedResource, ProcessLimit};
        let limit = |resource, soft, hard| ProcessLimit { resource, soft, hard };
        let limits = wire::ResourceLimits {
            cpu_s: Some(30),
            file_kb: Some(1024),
            data_kb: Some(u64::MAX),
            stack_kb: None,
            core_kb: Some(0),
            swap_kb: Some(1),
            processes: Some(1),
            threads: Some(1),
        };
        assert_eq!(
            process_limits(&limits, || libc::RLIM_INFINITY),
            [
                limit(LimitedResource::CpuTime, 30, libc::RLIM_INFINITY),
                limit(LimitedResource::FileSize, 1 << 20, 1 << 20),
                limit(LimitedResource::Data, libc::RLIM_INFINITY, libc::RLIM_INFINITY),
                limit(LimitedResource::Core, 0, 0),
            ]
        );
        assert_eq!(
            process_limits(&wire::ResourceLimits { cpu_s: Some(30), ..Default::default() }, || 20),
            [limit(LimitedResource::CpuTime, 20, 20)]
        );
        let whole_job_only = wire::ResourceLimits {
            swap_kb: Some(1),
            processes: Some(1),
            threads: Some(1),
            ..Default::default()
        };
        assert!(process_limits(&whole_job_only, || unreachable!("no CPU time limit")).is_empty());
    }

    // Goal: the command line sbatchd gives is read in any order, and anything else is
    // refused with what is wrong (the shepherd then exits 2 without touching the job).
    #[test]
    fn command_line() {
        let full = ShepherdArgs {
            state_dir: "/s/1.7".into(),
            notify_fd: Some(4),
            lock_fd: 5,
            plan_fd: 6,
            go_fd: Some(8),
        };
        let args = ["/s/1.7", "--notify-fd", "4", "--lock-fd", "5", "--plan-fd", "6", "--go-fd", "8"];
        assert_eq!(parse(&args), Ok(full));
        let reordered = parse(&["--plan-fd", "7", "--lock-fd", "5", "/s/1.7"]).expect("parses");
        let expected =
            ShepherdArgs { state_dir: "/s/1.7".into(), notify_fd: None, lock_fd: 5, plan_fd: 7, go_fd: None };
        assert_eq!(reordered, expected);
        for (bad, problem) in [
            (&[][..], "no job state folder given"),
            (&["/s/1.7"][..], "started without the job's lock (--lock-fd)"),
            (&["/s/1.7", "--lock-fd", "5"][..], "started without a launch plan (--plan-fd)"),
            (&["/s/1.7", "--lock-fd"][..], "--lock-fd needs a descriptor number"),
            (&["/s/1.7", "--lock-fd", "x"][..], "--lock-fd x: not a descriptor number"),
            (&["/s/1.7", "--lock-fd", "-1"][..], "--lock-fd -1: not a descriptor number"),
            (&["/s/1.7", "--lock-fd", "5", "--lock-fd", "6"][..], "--lock-fd given twice"),
            (&["/s/1.7", "--lock-fd", "5", "--go-fd", "g"][..], "--go-fd g: not a descriptor number"),
            (&["/s/1.7", "/s/1.8", "--lock-fd", "5"][..], "unexpected argument /s/1.8"),
            (&["--shepherd", "/s/1.7", "--lock-fd", "5"][..], "unknown option --shepherd"),
        ] {
            assert_eq!(parse(bad), Err(problem.to_owned()), "{bad:?}");
        }
    }
}
