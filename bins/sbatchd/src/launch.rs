//! Carrying out a Launch effect: the job script, the execution plan, and the shepherd.
//!
//! # The shepherd's start
//! [`start`] prepares the job's state folder (created, locked, stale files removed), writes
//! the job script, puts the launch plan in a memfd and makes the notification pipe, then
//! asks the shepherd zygote ([`crate::zygote`]) to fork the shepherd with those
//! descriptors: one message and one answer, no program executed. The answer gives the
//! shepherd's pid and a pidfd, which sbatchd watches; a zygote that refuses or cannot be
//! reached makes the launch a start failure (SpawnFailed) as before; a zygote that fails
//! after taking the request leaves sbatchd to learn from the notification pipe and the
//! job's lock whether a shepherd runs, exactly as after a restart.
//!
//! # The job's process
//! `/bin/sh <jobs>/<jobfile>/job.sh`, where `job.sh` is `#!/bin/sh`, a line exporting
//! `LSB_JOBPID`, the pre-execution command if any, and the command (a script body of up to
//! 512 KiB, which no argument vector could hold). It runs as the execution user with the
//! user's supplementary groups, in the decoded working directory, with the submission's
//! umask.
//!
//! A command that is one plain simple command ([`is_simple_command`]: words only, no
//! quoting, variables, globs, redirections or lists, no builtin) with no `-L` shell and no
//! pre-execution command is executed directly instead, as the shell would execute it: the
//! shepherd's child looks it up in the job's `PATH`, runs a file without `#!` with
//! `/bin/sh`, and answers a command it cannot execute as `sh` does (`sh: NAME: not found`,
//! exit 127; 126 when it is not executable). The job sees the same program, arguments,
//! environment (`LSB_JOBPID` and `PWD` included), pid, process group and exit status as
//! through `sh` — one program start fewer per job (docs/benchmarks.md, `e2e`). `job.sh` is
//! still written, for `LSB_JOBFILENAME` and for an administrator.
//!
//! With a job starter (the queue's `JOB_STARTER`), `/bin/sh -c` (or the `-L` shell, as a
//! login shell) runs the starter's command line, `%USRCMD` in it replaced by the job: the
//! command as typed when it is one line, else the job file run by that shell
//! ([`job_starter_line`]); nothing is executed directly then.
//!
//! With `bsub -L SHELL` the job file is run by that shell as a login shell instead:
//! `argv[0]` is `-` and the shell's base name (the convention every Bourne-family shell
//! reads as "login shell": it reads `/etc/profile` and the user's profile first), and the
//! job file is its argument. The job file is Bourne-shell text, so the login shell must
//! be of that family (sh, bash, dash, ksh, zsh).
//!
//! # Pre- and post-execution commands (`bsub -E`, `-Ep`, the queue's `PRE_EXEC`, `POST_EXEC`)
//! They are not in the job file: the plan lists them ([`LaunchPlan::pre_exec`],
//! [`LaunchPlan::post_exec`], from [`hooks`]) and the shepherd runs each with `/bin/sh -c`
//! as the job's user with the job's environment, the queue's `PRE_EXEC` then `-E` before
//! the job's process is made, `-Ep` then the queue's `POST_EXEC` after it ended
//! ([`crate::shepherd`], docs/batch.md "Pre- and post-execution commands"). The job's own
//! commands run in its working directory with their output appended to the job's output
//! and error files; the queue's run in `/tmp` with their standard files on `/dev/null` and
//! `PATH=/bin:/usr/bin:/sbin:/usr/sbin`, as LSF runs them. A pre-execution command that
//! exits non-zero stops the launch before the job exists: the job goes back to PEND
//! (mbatchd decides).
//!
//! # Its environment
//! The submission environment from the dispatch snapshot, then LSF's job variables, which
//! win over submitted ones: `LSB_JOBID`, `LSB_JOBINDEX` (0 when not an array element),
//! `LSB_JOBNAME`, `LSB_QUEUE`, `LSB_HOSTS` (one host per slot, blank-separated),
//! `LSB_MCPU_HOSTS` (`host n host n`), `LSB_SUB_HOST`, `LS_SUBCWD` (the working directory),
//! `LSB_JOBFILENAME` (the script), `LSB_JOBDIR` (its folder), `LSB_PROJECT_NAME` when a
//! project is set; and the execution user's `HOME`, `USER`, `LOGNAME` and `SHELL` (from the
//! password database of this host; `HOME` falls back to the submission home, `SHELL` to
//! `/bin/sh`; `SHELL` is the `-L` shell when one is given), `PWD` (the working directory,
//! as `sh` exports it) and `LSB_JOBPID` (the job process's pid, set by that process itself). `PATH` is the submitted one, else `/usr/local/bin:/usr/bin:/bin`. When the
//! dispatch lists fewer hosts than slots, the remaining slots are on the first host.
//!
//! # Its standard files
//! Input: the `-i` file, else `/dev/null`. Output: the `-o`/`-oo` file, else
//! `<home>/.lsbatch/<jobfile>.out`. Error: the `-e`/`-eo` file; without one, the output
//! file when `-o` was given (one file, LSF's rule), else `<home>/.lsbatch/<jobfile>.err`.
//! `<home>` is the execution user's home on this host. LSF spools a job's output in
//! `$HOME/.lsbatch` and mails it at the end; LavaCore does not mail, so the spool files are
//! where the output stays. `.lsbatch` is created (0700) by the job's process as the user,
//! so no root-owned file ever appears in a user's home. `-o`/`-e` append, `-oo`/`-eo`
//! truncate.

use std::fs::{self, File};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lava_batch_ll::JobRef;
use lava_sbd::{Execution, Hooks, RunSpec};

use crate::handoff::{Hook, LAUNCH_PLAN_VERSION, LaunchPlan};
use crate::jobdirs::JobDirs;
use crate::layout::{self, JOB_SCRIPT_FILE, Layout};
use crate::shepherd::SHEPHERD_PROGRAM;
use crate::{sys, zygote};

/// The shell that runs every job script.
pub const JOB_SHELL: &str = "/bin/sh";
/// `PATH` of a job whose submission environment had none.
pub const PATH_DEFAULT: &str = "/usr/local/bin:/usr/bin:/bin";
/// Folder in the user's home where output without `-o`/`-e` goes.
pub const SPOOL_DIR_NAME: &str = ".lsbatch";
/// How long a launch waits for a previous shepherd of the same job to let go of its lock.
const LOCK_WAIT_MS_MAX: u64 = 2_000;
/// Pause between two attempts at that lock.
const LOCK_RETRY_MS: u64 = 5;

/// The home of the execution user on this host, else the submission home.
pub fn exec_home(spec: &RunSpec) -> &str {
    if spec.user_home.is_empty() { &spec.exec_home } else { &spec.user_home }
}

/// The job's standard output and error files and the folders to create for them.
pub fn standard_files(spec: &RunSpec, jobfile: &str) -> (String, String, Vec<String>) {
    let spool = format!("{}/{SPOOL_DIR_NAME}", exec_home(spec).trim_end_matches('/'));
    let mut create_dirs = Vec::new();
    let mut spooled = |suffix: &str| {
        if create_dirs.is_empty() {
            create_dirs.push(spool.clone());
        }
        format!("{spool}/{jobfile}.{suffix}")
    };
    let stdout = match spec.output_file.as_str() {
        "" => spooled("out"),
        file => file.to_owned(),
    };
    let stderr = match (spec.error_file.as_str(), spec.output_file.as_str()) {
        ("", "") => spooled("err"),
        ("", _) => stdout.clone(),
        (file, _) => file.to_owned(),
    };
    (stdout, stderr, create_dirs)
}

/// One host per slot: the dispatch's list, the first host filling any missing slot.
pub fn slot_hosts(spec: &RunSpec) -> Vec<String> {
    let mut hosts: Vec<String> = spec.exec_hosts.iter().map(|h| h.as_str().to_owned()).collect();
    let n_slots = usize::try_from(spec.n_slots).unwrap_or(usize::MAX);
    if let Some(first) = hosts.first().cloned() {
        while hosts.len() < n_slots {
            hosts.push(first.clone());
        }
    }
    hosts
}

/// `LSB_MCPU_HOSTS`: each host once, in order of first appearance, with its slots: `host n`.
pub fn mcpu_hosts(slots: &[String]) -> String {
    let mut groups: Vec<(&str, usize)> = Vec::new();
    for host in slots {
        match groups.iter_mut().find(|(name, _)| *name == host.as_str()) {
            Some((_, n)) => *n += 1,
            None => groups.push((host, 1)),
        }
    }
    groups.iter().map(|(host, n)| format!("{host} {n}")).collect::<Vec<_>>().join(" ")
}

/// The host file of a job in its folder (`LSB_DJOB_HOSTFILE`, `LSB_DJOB_RANKFILE`).
pub const HOSTFILE: &str = "hostfile";

/// This host's `LSF_BINDIR` and `LSF_SERVERDIR`, given to every job (MPI launchers find
/// `blaunch` through `LSF_BINDIR`); set once at start by [`set_lsf_dirs`].
static LSF_DIRS: std::sync::OnceLock<(Option<String>, Option<String>)> = std::sync::OnceLock::new();

/// Records lsf.conf's `LSF_BINDIR` and `LSF_SERVERDIR` for the jobs' environment.
pub fn set_lsf_dirs(bin_dir: &Option<PathBuf>, server_dir: &Option<PathBuf>) {
    let text = |dir: &Option<PathBuf>| dir.as_ref().map(|dir| dir.display().to_string());
    let _ = LSF_DIRS.set((text(bin_dir), text(server_dir)));
}

/// `LSB_DJOB_HOSTFILE`'s text: one line per slot, the host's name (as LSF writes it).
pub fn hostfile_text(spec: &RunSpec) -> String {
    slot_hosts(spec).iter().map(|host| format!("{host}\n")).collect()
}

/// The job's whole environment, `NAME=value`, sorted by name.
pub fn job_environment(job: JobRef, spec: &RunSpec, script: &Path, job_dir: &Path) -> Vec<String> {
    let mut env: std::collections::BTreeMap<String, String> =
        spec.env.iter().map(|var| (var.name.clone(), var.value.clone())).collect();
    env.entry("PATH".to_owned()).or_insert_with(|| PATH_DEFAULT.to_owned());
    // The job's process sets its own (the submitter's, if any, names another process).
    env.remove(sys::JOB_PID_VARIABLE);
    let slots = slot_hosts(spec);
    let shell = match (spec.login_shell.as_str(), spec.user_shell.as_str()) {
        ("", "") => JOB_SHELL,
        ("", user_shell) => user_shell,
        (login_shell, _) => login_shell,
    };
    let mut set = |name: &str, value: String| {
        env.insert(name.to_owned(), value);
    };
    set("HOME", exec_home(spec).to_owned());
    set("USER", spec.exec_user.as_str().to_owned());
    set("LOGNAME", spec.exec_user.as_str().to_owned());
    set("SHELL", shell.to_owned());
    set("LSB_JOBID", job.id().to_string());
    set("LSB_JOBINDEX", job.index().to_string());
    set("LSB_JOBNAME", spec.job_name.clone());
    set("LSB_QUEUE", spec.queue.as_str().to_owned());
    set("LSB_HOSTS", slots.join(" "));
    set("LSB_MCPU_HOSTS", mcpu_hosts(&slots));
    set("LSB_SUB_HOST", spec.from_host.clone());
    set("LS_SUBCWD", spec.exec_cwd.clone());
    // As `sh` exports it for the working directory it starts in.
    set("PWD", spec.exec_cwd.clone());
    set("LSB_JOBFILENAME", script.display().to_string());
    set("LSB_JOBDIR", job_dir.display().to_string());
    if !spec.project.is_empty() {
        set("LSB_PROJECT_NAME", spec.project.clone());
    }
    // LSF's parallel-job variables (docs/commands.md, "blaunch").
    set("LSB_DJOB_NUMPROC", slots.len().to_string());
    if spec.n_slots > 1 {
        set("LSB_DJOB_HOSTFILE", job_dir.join(HOSTFILE).display().to_string());
        set("LSB_DJOB_RANKFILE", job_dir.join(HOSTFILE).display().to_string());
    }
    if let Some((bin_dir, server_dir)) = LSF_DIRS.get() {
        for (name, dir) in [("LSF_BINDIR", bin_dir), ("LSF_SERVERDIR", server_dir)] {
            if let Some(dir) = dir {
                set(name, dir.clone());
            }
        }
    }
    env.into_iter().map(|(name, value)| format!("{name}={value}")).collect()
}

/// The job script's text. A command that is one simple command (see [`is_simple_command`])
/// is written with `exec`, so that the script, run by hand, does what the job did: the shell
/// becomes the command, with the same pid (so `LSB_JOBPID` names the job's process),
/// process group and exit status.
pub fn job_script(job: JobRef, jobfile: &str, command: &str) -> String {
    let newline = if command.ends_with('\n') { "" } else { "\n" };
    let exec = if is_simple_command(command) { "exec " } else { "" };
    format!(
        "#!/bin/sh\n# LSBATCH: job {job} ({jobfile})\nLSB_JOBPID=$$; export LSB_JOBPID\n\
         # LSBATCH: User input\n{exec}{command}{newline}"
    )
}

/// `PATH` of the queue's `PRE_EXEC` and `POST_EXEC`, as LSF sets it.
pub const QUEUE_HOOK_PATH: &str = "/bin:/usr/bin:/sbin:/usr/sbin";

/// The pre- and post-execution commands of a job, in the order the shepherd runs them:
/// the queue's `PRE_EXEC`, then `-E`; `-Ep`, then the queue's `POST_EXEC` (LSF's order).
pub fn hooks(spec: &RunSpec, hooks: &Hooks) -> (Vec<Hook>, Vec<Hook>) {
    let hook = |command: &str, queue_level: bool| {
        (!command.is_empty()).then(|| Hook { command: command.to_owned(), queue_level })
    };
    let pre = [hook(&hooks.queue_pre_exec, true), hook(&spec.pre_exec, false)];
    let post = [hook(&hooks.post_exec, false), hook(&hooks.queue_post_exec, true)];
    (pre.into_iter().flatten().collect(), post.into_iter().flatten().collect())
}

/// `text` as one single-quoted shell word.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// How the job's process starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobProgram {
    /// The program (see [`LaunchPlan::program`]).
    pub program: String,
    /// Its argument vector, `argv[0]` first.
    pub argv: Vec<String>,
    /// Whether `program` is the user's simple command, run as the shell would run it.
    pub search_path: bool,
}

/// The word of a job starter that stands for the job (LSF's `JOB_STARTER_KEYWORD`).
pub const JOB_STARTER_KEYWORD: &str = "%USRCMD";

/// How the job starts: a plain simple command directly (see the module doc), else the job
/// file at `script` run by `/bin/sh`, or by the `-L` shell as a login shell (`argv[0]` is
/// `-NAME`). With a job starter (the queue's `JOB_STARTER`), that shell runs the starter's
/// command line instead ([`job_starter_line`]).
pub fn job_program(spec: &RunSpec, script: &Path, job_starter: &str) -> JobProgram {
    let script = script.display().to_string();
    let (shell_path, argv0) = if spec.login_shell.is_empty() {
        (JOB_SHELL.to_owned(), "sh".to_owned())
    } else {
        let name = spec.login_shell.rsplit('/').next().unwrap_or_default();
        (spec.login_shell.clone(), format!("-{name}"))
    };
    if !job_starter.is_empty() {
        let line = job_starter_line(job_starter, &spec.command, &shell_path, &script);
        return JobProgram {
            program: shell_path,
            argv: vec![argv0, "-c".to_owned(), line],
            search_path: false,
        };
    }
    let shell = |program: &str, argv0: String| JobProgram {
        program: program.to_owned(),
        argv: vec![argv0, script.clone()],
        search_path: false,
    };
    if !spec.login_shell.is_empty() {
        return shell(&shell_path, argv0);
    }
    if is_simple_command(&spec.command) {
        let argv: Vec<String> =
            spec.command.split([' ', '\t', '\n']).filter(|w| !w.is_empty()).map(str::to_owned).collect();
        return JobProgram { program: argv[0].clone(), argv, search_path: true };
    }
    shell(JOB_SHELL, "sh".to_owned())
}

/// A job starter's command line for `command` (LSF's rule): `%USRCMD` replaced by the job,
/// else the job appended after a blank. The job is the command as the user typed it when it
/// is one line, as LSF runs it (so `csh -c "%USRCMD"` has csh read it); a script of several
/// lines is the job file run by `shell` (`/bin/sh`, or the `-L` shell), its path quoted.
pub fn job_starter_line(job_starter: &str, command: &str, shell: &str, script: &str) -> String {
    let line = command.strip_suffix('\n').unwrap_or(command);
    let job = if line.contains('\n') { format!("{shell} {}", shell_quote(script)) } else { line.to_owned() };
    if job_starter.contains(JOB_STARTER_KEYWORD) {
        job_starter.replace(JOB_STARTER_KEYWORD, &job)
    } else {
        format!("{job_starter} {job}")
    }
}

/// The shell's reserved words and builtins (POSIX's, and dash's own), for which `exec NAME`
/// would not do what `NAME` does.
const SHELL_WORDS: &[&str] = &[
    "!", ".", ":", "[", "{", "}", "alias", "bg", "break", "case", "cd", "chdir", "command", "continue", "do",
    "done", "echo", "elif", "else", "esac", "eval", "exec", "exit", "export", "false", "fc", "fg", "fi",
    "for", "function", "getopts", "hash", "if", "in", "jobs", "kill", "local", "printf", "pwd", "read",
    "readonly", "return", "select", "set", "shift", "test", "then", "times", "trap", "true", "type",
    "ulimit", "umask", "unalias", "unset", "until", "wait", "while",
];

/// Whether `command` is one simple command that `exec` may prefix without changing what it
/// does: a single line of words made only of characters no shell treats specially (letters,
/// digits, blanks and `_-./,:=+@%`), whose first word is no assignment, reserved word or
/// builtin. Anything else (quotes, variables, globs, redirections, pipes, lists, several
/// lines) runs as written.
pub fn is_simple_command(command: &str) -> bool {
    let line = command.strip_suffix('\n').unwrap_or(command);
    let plain = |c: char| c.is_ascii_alphanumeric() || " \t_-./,:=+@%".contains(c);
    let Some(first) = line.split([' ', '\t']).find(|word| !word.is_empty()) else {
        return false;
    };
    line.chars().all(plain) && !first.contains('=') && !SHELL_WORDS.contains(&first)
}

/// The execution plan of a job.
///
/// An interactive job (`interactive`: its `wire::submit_flags` bits) has its standard
/// streams relayed to `bsub` ([`crate::relay`]): each is an empty path here, except those
/// `-i`, `-o`, `-e` name (LSF: a file given takes the stream; `-o` alone also takes
/// standard error). `execution` are the record's niceness and resource limits.
pub fn launch_plan(
    job: JobRef,
    spec: &RunSpec,
    job_hooks: &Hooks,
    execution: &Execution,
    jobfile: &str,
    layout: &Layout,
    interactive: u32,
) -> LaunchPlan {
    let job_dir = layout.job_dir(jobfile);
    let script = job_dir.join(JOB_SCRIPT_FILE);
    let (mut stdout, mut stderr, create_dirs) = standard_files(spec, jobfile);
    let is_interactive = interactive & lava_batch_wire::submit_flags::INTERACTIVE != 0;
    if is_interactive && spec.output_file.is_empty() {
        stdout = String::new();
        if spec.error_file.is_empty() {
            stderr = String::new();
        }
    }
    let stdin = match spec.input_file.as_str() {
        "" if is_interactive => String::new(),
        "" => "/dev/null".to_owned(),
        file => file.to_owned(),
    };
    let JobProgram { program, argv, search_path } = job_program(spec, &script, &execution.job_starter);
    let (pre_exec, post_exec) = hooks(spec, job_hooks);
    LaunchPlan {
        version: LAUNCH_PLAN_VERSION,
        job_id: job.id(),
        array_index: job.index(),
        user: spec.exec_user.as_str().to_owned(),
        uid: spec.exec_uid,
        gid: spec.exec_gid,
        program,
        argv,
        search_path,
        env: job_environment(job, spec, &script, &job_dir),
        cwd: spec.exec_cwd.clone(),
        umask: spec.umask,
        stdin,
        stdout,
        stdout_truncate: spec.output_truncate,
        stderr,
        stderr_truncate: spec.error_truncate,
        create_dirs,
        interactive: if is_interactive { interactive } else { 0 },
        pre_exec,
        post_exec,
        nice: execution.nice,
        limits: execution.limits,
    }
}

/// A shepherd just started.
#[derive(Debug)]
pub struct StartedShepherd {
    /// The shepherd's pid and a pidfd for it (the pidfd absent only if the zygote could not
    /// open one); `None` when the zygote failed after receiving the launch, so that whether
    /// a shepherd runs is learnt from the notification pipe and the job's lock, as after a
    /// restart ([`crate::zygote`]).
    pub shepherd: Option<(u32, Option<OwnedFd>)>,
    /// Read end of the notification pipe: one byte (or end-of-file) once the `pid` file is
    /// durable or the launch failed before a pid existed.
    pub notify: OwnedFd,
}

/// The shepherd program that the sbatchd executing `sbatchd_exe` starts: `lava-shepherd` in
/// the same folder (scripts/install puts both in the daemons' folder, cargo in its target
/// folder).
pub fn shepherd_program(sbatchd_exe: &Path) -> PathBuf {
    sbatchd_exe.with_file_name(SHEPHERD_PROGRAM)
}

/// The job a [`start`] launches: its reference, run spec and interactive bits (its record's
/// `interactive`: docs/protocols/batch.md, "Interactive jobs").
#[derive(Clone, Copy, Debug)]
pub struct JobToLaunch<'a> {
    /// The job.
    pub job: JobRef,
    /// Its run spec.
    pub spec: &'a RunSpec,
    /// `wire::submit_flags` bits of an interactive job, 0 for a batch job.
    pub interactive: u32,
    /// Its pre- and post-execution commands besides `-E` (the record's).
    pub hooks: &'a Hooks,
    /// Its niceness and resource limits (the record's).
    pub execution: &'a Execution,
}

/// Prepares the state folder and has the zygote fork the shepherd of a job (see the
/// crate doc's shepherd protocol and [`crate::zygote`]). Files of an earlier attempt are
/// removed first: a Launch only comes when no shepherd of the job is alive, which the
/// job's lock confirms. `go` is the read end of the job's go pipe when its record is not
/// durable yet ([`crate::shepherd`], step 3).
pub fn start(
    zygote: &mut zygote::Client,
    job_dirs: &mut JobDirs,
    layout: &Layout,
    launched: JobToLaunch<'_>,
    jobfile: &str,
    go: Option<OwnedFd>,
) -> Result<StartedShepherd, String> {
    let JobToLaunch { job, spec, interactive, hooks, execution } = launched;
    let state_dir = layout.state_dir(jobfile);
    let job_dir = layout.job_dir(jobfile);
    let at = |what: &str, path: &Path| {
        let path = path.display().to_string();
        let what = what.to_owned();
        move |err: io::Error| format!("{what} {path}: {err}")
    };
    // The state folder itself is the shepherd's lock (one file fewer per job). It exists
    // (its record is in it, or is being written into it): opening it takes no lock of
    // `state/`, which a `mkdir` would take even for a folder that exists, and so wait for
    // any flush of `state/` that a commit is making meanwhile.
    let lock = match File::open(&state_dir) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            layout::create_private_dir(&state_dir).map_err(at("cannot create", &state_dir))?;
            File::open(&state_dir)
        }
        opened => opened,
    }
    .map_err(at("cannot open", &state_dir))?;
    lock_exclusive(&lock).map_err(at("cannot lock", &state_dir))?;
    // A relaunch's stale files go; the empty ones the folder was created with stay, to be
    // filled in place (layout::write_shepherd_file).
    for stale in layout::SHEPHERD_FILES {
        let path = state_dir.join(stale);
        if layout::read_shepherd_file(&path).map_err(at("cannot read", &path))?.is_some() {
            layout::remove_optional(&path).map_err(at("cannot remove", &path))?;
        }
    }
    // The folder is root's and empty until the script is in it, so the user never has a
    // chance to put a link where root writes (crate::jobdirs).
    let script = job_script(job, jobfile, &spec.command);
    // A parallel job's host file; a one-slot job has none (one file fewer per job).
    let hostfile = hostfile_text(spec);
    let extra: &[(&str, &[u8])] = if spec.n_slots > 1 { &[(HOSTFILE, hostfile.as_bytes())] } else { &[] };
    job_dirs
        .prepare_with(jobfile, &script, extra, spec.exec_uid, spec.exec_gid)
        .map_err(at("cannot write the job script in", &job_dir))?;
    let plan = launch_plan(job, spec, hooks, execution, jobfile, layout, interactive);
    let plan_bytes = lava_xdr::to_bytes(&plan).expect("a launch plan always encodes");
    // In memory, not in a file: the plan matters only until the shepherd has read it (a
    // crash before the durable pid file means the job never ran and is launched afresh),
    // and one file fewer per job is one inode allocation fewer (docs/benchmarks.md, e2e).
    let plan_file = sys::memory_file(c"lava-launch-plan", &plan_bytes)
        .map_err(|err| format!("cannot hold the launch plan in memory: {err}"))?;
    let (notify_read, notify_write) = io::pipe().map_err(|err| format!("cannot create a pipe: {err}"))?;
    let go_fd = go.as_ref().map(AsFd::as_fd);
    let started = zygote.launch(&state_dir, notify_write.as_fd(), lock.as_fd(), plan_file.as_fd(), go_fd);
    // Our copies close here: the shepherd (or the zygote, until it has answered) holds the
    // lock, the notification pipe's only writer and the go pipe's only reader.
    drop((plan_file, notify_write, lock, go));
    let shepherd = match started {
        Ok(zygote::Started { pid, pidfd }) => Some((pid, pidfd)),
        Err(zygote::LaunchError::NotStarted(message)) => return Err(message),
        Err(zygote::LaunchError::Unknown(why)) => {
            tracing::warn!(%job, "{why}; whether the shepherd started is learnt from the job's folder");
            None
        }
    };
    Ok(StartedShepherd { shepherd, notify: OwnedFd::from(notify_read) })
}

/// Takes the job's lock, waiting a little for a previous shepherd that is exiting.
fn lock_exclusive(lock: &File) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_millis(LOCK_WAIT_MS_MAX);
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(()),
            Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(LOCK_RETRY_MS));
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(io::Error::other("a previous shepherd of this job still holds it"));
            }
            Err(fs::TryLockError::Error(err)) => return Err(err),
        }
    }
}

/// Whether a shepherd holds the job's lock (an flock on its state folder): `Some(true)`
/// alive, `Some(false)` no shepherd (and none can appear: only sbatchd starts one, with the
/// lock already taken), `None` when the folder does not exist.
pub fn shepherd_alive(state_dir: &Path) -> io::Result<Option<bool>> {
    let file = match File::open(state_dir) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    match file.try_lock() {
        Ok(()) => Ok(Some(false)),
        Err(fs::TryLockError::WouldBlock) => Ok(Some(true)),
        Err(fs::TryLockError::Error(err)) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use lava_batch_ll::JobSpec;
    use lava_batch_wire as wire;
    use lava_sbd::UserInfo;

    use super::*;

    fn spec(output: &str, error: &str, n_slots: u32, hosts: &[&str]) -> RunSpec {
        let specs = wire::JobSpecs {
            job: wire::WireJobRef { job_id: 7, array_index: 3 },
            submit_time: 1_700_000_000,
            dispatch_time: 1_700_000_001,
            dispatch_seq: 1,
            user_id: 1000,
            group_id: 100,
            user_name: "alice".into(),
            queue: "normal".into(),
            job_name: "name".into(),
            command: "echo hi".into(),
            from_host: "login".into(),
            cwd: "work".into(),
            sub_home_dir: "/home/alice".into(),
            input_file: String::new(),
            output_file: output.into(),
            error_file: error.into(),
            file_flags: 0,
            n_slots,
            exec_hosts: hosts.iter().map(|h| (*h).to_owned()).collect(),
            umask: 0o022,
            run_limit_s: 0,
            mem_limit_kb: 0,
            terminate_interval_s: 0,
            project: "proj".into(),
            login_shell: String::new(),
            pre_exec: String::new(),
            post_exec: String::new(),
            queue_pre_exec: String::new(),
            queue_post_exec: String::new(),
            env: vec![
                wire::EnvVar { name: "LSB_JOBID".into(), value: "forged".into() },
                wire::EnvVar { name: "LSB_JOBPID".into(), value: "1".into() },
                wire::EnvVar { name: "FOO".into(), value: "bar".into() },
            ],
            nice: 0,
            limits: wire::ResourceLimits::default(),
            job_starter: String::new(),
        };
        let user = UserInfo { uid: 1000, gid: 100, home: "/users/alice".into(), shell: "/bin/bash".into() };
        RunSpec::derive(&JobSpec::try_from(specs).expect("valid"), Some(&user))
    }

    // Goal: LSF's defaults for the standard files: spool files without -o/-e, stderr
    // follows -o, and the spool folder is created only when used.
    #[test]
    fn standard_file_defaults() {
        let both = standard_files(&spec("", "", 1, &["n1"]), "1.7.3");
        assert_eq!(
            both,
            (
                "/users/alice/.lsbatch/1.7.3.out".to_owned(),
                "/users/alice/.lsbatch/1.7.3.err".to_owned(),
                vec!["/users/alice/.lsbatch".to_owned()]
            )
        );
        let out_only = standard_files(&spec("o.%J", "", 1, &["n1"]), "1.7.3");
        assert_eq!(out_only, ("/home/alice/work/o.7".into(), "/home/alice/work/o.7".into(), vec![]));
        let err_only = standard_files(&spec("", "/e", 1, &["n1"]), "1.7.3");
        assert_eq!(err_only.1, "/e");
        assert_eq!(err_only.0, "/users/alice/.lsbatch/1.7.3.out");
    }

    // Goal: only a command that is one plain simple command gets `exec`; anything the
    // shell would treat specially, a builtin or an assignment runs as written.
    #[test]
    fn exec_only_for_simple_commands() {
        for simple in ["/bin/true", "sleep 10", "./run.sh -n 4 --out=x.dat", "a.out 1,2 +3 @f %g\n"] {
            assert!(is_simple_command(simple), "{simple:?}");
            assert!(job_script(JobRef::new(7, 0).expect("job"), "1.7", simple).contains("\nexec "));
        }
        for not_simple in [
            "",
            "  ",
            "echo hi",
            "exit 3",
            "cd /tmp",
            "A=1 run",
            "run; other",
            "run | other",
            "run > out",
            "run $HOME",
            "run 'quoted'",
            "run *.dat",
            "run ~/x",
            "run &",
            "if true",
            "line1\nline2",
            "run `x`",
            "run # note",
        ] {
            assert!(!is_simple_command(not_simple), "{not_simple:?}");
        }
        let script = job_script(JobRef::new(7, 0).expect("job"), "1.7", "echo $LSB_JOBID");
        assert!(script.ends_with("# LSBATCH: User input\necho $LSB_JOBID\n"), "{script}");
    }

    // Goal: the hooks come in LSF's order (queue PRE_EXEC, -E; -Ep, queue POST_EXEC), the
    // queue's marked as such, and are not in the job file, which is plain; -L runs the job
    // file with the login shell as a login shell; a plain simple command runs directly even
    // with -E (the pre-execution commands run apart, before the job's process exists).
    #[test]
    fn hooks_and_login_shell() {
        let mut run_spec = spec("", "", 1, &["n1"]);
        run_spec.pre_exec = "pre".to_owned();
        let job_hooks = Hooks {
            queue_pre_exec: "qpre".to_owned(),
            post_exec: "post".to_owned(),
            queue_post_exec: "qpost".to_owned(),
        };
        let hook = |command: &str, queue_level: bool| Hook { command: command.to_owned(), queue_level };
        let (pre, post) = hooks(&run_spec, &job_hooks);
        assert_eq!(pre, vec![hook("qpre", true), hook("pre", false)]);
        assert_eq!(post, vec![hook("post", false), hook("qpost", true)]);
        run_spec.pre_exec.clear();
        let (pre, post) = hooks(&run_spec, &Hooks::default());
        assert!(pre.is_empty() && post.is_empty());
        let script = job_script(JobRef::new(7, 0).expect("job"), "1.7", "echo ran");
        assert!(!script.contains("pre-execution"), "{script}");
        assert_eq!(shell_quote("a'b"), "'a'\\''b'");

        let program = |program: &str, argv: &[&str], search_path: bool| JobProgram {
            program: program.to_owned(),
            argv: argv.iter().map(|a| (*a).to_owned()).collect(),
            search_path,
        };
        let script = Path::new("/j/job.sh");
        let mut login = spec("", "", 1, &["n1"]);
        assert_eq!(job_program(&login, script, ""), program("/bin/sh", &["sh", "/j/job.sh"], false));
        login.login_shell = "/bin/bash".to_owned();
        assert_eq!(job_program(&login, script, ""), program("/bin/bash", &["-bash", "/j/job.sh"], false));
        // A plain simple command runs directly, unless a login shell must run it.
        let mut simple = spec("", "", 1, &["n1"]);
        simple.command = "sleep\t10 \n".to_owned();
        assert_eq!(job_program(&simple, script, ""), program("sleep", &["sleep", "10"], true));
        simple.pre_exec = "true".to_owned();
        assert_eq!(job_program(&simple, script, ""), program("sleep", &["sleep", "10"], true));
        simple.login_shell = "/bin/bash".to_owned();
        assert_eq!(job_program(&simple, script, ""), program("/bin/bash", &["-bash", "/j/job.sh"], false));
        // A job starter is run by that shell, or by /bin/sh, the job in its place.
        let starter = "csh -c \"%USRCMD; sleep 1\"";
        let through = ["-bash", "-c", "csh -c \"sleep\t10 ; sleep 1\""];
        assert_eq!(job_program(&simple, script, starter), program("/bin/bash", &through, false));
        simple.login_shell.clear();
        let through = ["sh", "-c", "csh -c \"sleep\t10 ; sleep 1\""];
        assert_eq!(job_program(&simple, script, starter), program("/bin/sh", &through, false));
    }

    // Goal: a job starter's line is LSF's: %USRCMD replaced by the job (every time it
    // appears), else the job appended; a one-line job as typed, a script as the job file run
    // by the job's shell (a path that needs quoting is quoted).
    #[test]
    fn job_starter_lines() {
        let line =
            |starter: &str, command: &str| job_starter_line(starter, command, "/bin/sh", "/j/it's/job.sh");
        assert_eq!(line("/usr/bin/time", "myjob a b\n"), "/usr/bin/time myjob a b");
        assert_eq!(line("csh -c \"%USRCMD;sleep 10\"", "myjob $X"), "csh -c \"myjob $X;sleep 10\"");
        assert_eq!(line("%USRCMD; %USRCMD", "true"), "true; true");
        assert_eq!(
            line("env A=1 %USRCMD", "#!/bin/sh\necho 1\necho 2\n"),
            "env A=1 /bin/sh '/j/it'\\''s/job.sh'"
        );
    }

    // Goal: the launch plan carries the record's niceness and limits as they are (0 a
    // limit, None none), in the current plan version, and runs the job through its starter.
    #[test]
    fn launch_plan_carries_the_execution() {
        let execution = Execution {
            nice: 7,
            limits: wire::ResourceLimits { cpu_s: Some(60), core_kb: Some(0), ..Default::default() },
            job_starter: "/usr/bin/time".to_owned(),
        };
        let layout = Layout::new(Path::new("/var/lava"), "n1");
        let mut spec = spec("", "", 1, &["n1"]);
        spec.command = "sleep 1".to_owned();
        let plan = launch_plan(
            JobRef::new(7, 3).expect("job"),
            &spec,
            &Hooks::default(),
            &execution,
            "1.7.3",
            &layout,
            0,
        );
        assert_eq!((plan.version, plan.nice, plan.limits), (LAUNCH_PLAN_VERSION, 7, execution.limits));
        assert_eq!(
            (plan.program.as_str(), plan.argv),
            (JOB_SHELL, vec!["sh".into(), "-c".into(), "/usr/bin/time sleep 1".into()])
        );
    }

    // Goal: the job variables are set, override submitted ones, and list one host per slot.
    #[test]
    fn job_variables() {
        let spec = spec("", "", 4, &["n1", "n1", "n2"]);
        let env =
            job_environment(JobRef::new(7, 3).expect("job"), &spec, Path::new("/j/job.sh"), Path::new("/j"));
        let get = |name: &str| {
            env.iter()
                .find_map(|e| e.strip_prefix(&format!("{name}=")))
                .map(str::to_owned)
                .unwrap_or_default()
        };
        assert_eq!(get("LSB_JOBID"), "7");
        assert_eq!(get("LSB_JOBINDEX"), "3");
        assert_eq!(get("LSB_HOSTS"), "n1 n1 n2 n1");
        assert_eq!(get("LSB_MCPU_HOSTS"), "n1 3 n2 1");
        assert_eq!(get("FOO"), "bar");
        assert_eq!(get("HOME"), "/users/alice");
        assert_eq!(get("SHELL"), "/bin/bash");
        assert_eq!(get("PATH"), PATH_DEFAULT);
        assert_eq!(get("LS_SUBCWD"), "/home/alice/work");
        assert_eq!(get("LSB_JOBFILENAME"), "/j/job.sh");
        assert_eq!(get("LSB_PROJECT_NAME"), "proj");
        assert_eq!(get("PWD"), "/home/alice/work");
        assert_eq!(get("LSB_DJOB_NUMPROC"), "4");
        assert_eq!(get("LSB_DJOB_HOSTFILE"), "/j/hostfile");
        assert_eq!(get("LSB_DJOB_RANKFILE"), "/j/hostfile");
        assert_eq!(hostfile_text(&spec), "n1\nn1\nn2\nn1\n");
        // The job's process sets LSB_JOBPID itself; a submitted one never reaches it.
        assert!(!env.iter().any(|e| e.starts_with("LSB_JOBPID=")), "{env:?}");
        // A one-slot job has no host file.
        let one = self::spec("", "", 1, &["n1"]);
        let env =
            job_environment(JobRef::new(8, 0).expect("job"), &one, Path::new("/j/job.sh"), Path::new("/j"));
        assert!(env.contains(&"LSB_DJOB_NUMPROC=1".to_owned()), "{env:?}");
        assert!(!env.iter().any(|e| e.starts_with("LSB_DJOB_HOSTFILE=")), "{env:?}");
        let mut sorted = env.clone();
        sorted.sort();
        assert_eq!(env, sorted);
    }
}
