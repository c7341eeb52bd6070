//! What sbatchd and a shepherd exchange, and its formats: the [`LaunchPlan`] sbatchd hands
//! over, the [`PidFile`] and [`ExitFile`] the shepherd writes in the job's state folder.
//!
//! - The launch plan: XDR of [`LaunchPlan`], in an in-memory file (memfd) the shepherd
//!   inherits (`--plan-fd`), never on disk: it matters only until the durable `pid` file
//!   exists (after a crash without a `pid` file the job never ran, and the logic launches
//!   it again with a new plan).
//! - `pid`: one line `v1 pid=P pgid=G exec_time_ms=T start_ticks=S boot_id=B shepherd=H`,
//!   written durably before the job may execute. `start_ticks` (field 22 of `/proc/P/stat`)
//!   and the kernel's boot id identify the process beyond its pid, so that a lost job is
//!   only killed when its process is still the one the shepherd started; `shepherd` is the
//!   shepherd's pid, watched with a pidfd by an sbatchd that adopts it after a restart.
//! - `exit`: one line, written durably before the shepherd exits, either
//!   `v1 exited wait_status=W end_time_ms=T user_ms=U system_ms=S max_rss_kb=R` or
//!   `v1 failed stage=NAME errno=E end_time_ms=T message=TEXT` (TEXT runs to the end of the
//!   line), or `v1 preexec exit=N end_time_ms=T` when a pre-execution command exited `N`
//!   before the job's process existed (no `pid` file then: the job never ran). Stages are [`crate::sys::SpawnStage::name`] for failures inside the job's
//!   process, and `plan`, `groups`, `fork`, `pidfile` for failures of the shepherd itself.
//!
//! Text files are parsed strictly: a line that does not parse is an error naming the file.

use std::path::Path;

use lava_batch_wire as wire;
use serde::{Deserialize, Serialize};

/// Version of the launch plan's layout.
/// (2: [`LaunchPlan::search_path`]; 3: [`LaunchPlan::interactive`]; 4: [`LaunchPlan::pre_exec`] and
/// [`LaunchPlan::post_exec`]; 5: [`LaunchPlan::nice`] and [`LaunchPlan::limits`].)
pub const LAUNCH_PLAN_VERSION: u32 = 5;
/// Version word that opens the `pid` and `exit` lines.
const LINE_VERSION: &str = "v1";
/// Largest launch plan read: a 512 KiB command is in the script, not in the plan, but the
/// environment may be large.
pub const LAUNCH_PLAN_BYTES_MAX: usize = 16 << 20;

/// Limits for decoding a launch plan.
pub const LAUNCH_PLAN_LIMITS: lava_xdr::Limits = lava_xdr::Limits {
    input_bytes_max: LAUNCH_PLAN_BYTES_MAX,
    string_bytes_max: lava_batch_ll::COMMAND_BYTES_MAX as u32,
    ..lava_xdr::Limits::DEFAULT
};

/// How the shepherd starts the job: everything is resolved by sbatchd, the shepherd only
/// looks up the supplementary groups (so that sbatchd's loop never waits on the group
/// database).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchPlan {
    /// [`LAUNCH_PLAN_VERSION`].
    pub version: u32,
    /// Job id, for the shepherd's messages.
    pub job_id: u32,
    /// Array index, 0 for none.
    pub array_index: u32,
    /// The execution user's name (for the group list).
    pub user: String,
    /// Uid to run as.
    pub uid: u32,
    /// Primary gid to run as.
    pub gid: u32,
    /// The program: an absolute path, or with [`LaunchPlan::search_path`] the command's
    /// first word as the user wrote it.
    pub program: String,
    /// Argument vector, `argv[0]` first.
    pub argv: Vec<String>,
    /// Run `program` as `/bin/sh` would run a simple command: looked up in the job's `PATH`
    /// unless it holds a `/`, a file without a `#!` line run by `/bin/sh`, and a command
    /// that cannot be executed answered as the shell answers it (`NAME: not found` on the
    /// job's standard error, exit 127; 126 when not executable).
    pub search_path: bool,
    /// The whole environment, `NAME=value`.
    pub env: Vec<String>,
    /// Working directory.
    pub cwd: String,
    /// File-creation mask.
    pub umask: u32,
    /// Standard input.
    pub stdin: String,
    /// Standard output.
    pub stdout: String,
    /// Truncate standard output.
    pub stdout_truncate: bool,
    /// Standard error (equal to `stdout`: the same file, one offset).
    pub stderr: String,
    /// Truncate standard error.
    pub stderr_truncate: bool,
    /// Folders created as the user before the files are opened.
    pub create_dirs: Vec<String>,
    /// An interactive job's bits (`wire::submit_flags`), 0 for a batch job. Its standard
    /// streams whose file above is empty are relayed to `bsub`: through pipes, or with
    /// `PTY` a pseudo-terminal ([`crate::relay`]).
    pub interactive: u32,
    /// The pre-execution commands, in order (the queue's `PRE_EXEC`, then `-E`): run one
    /// after the other before the job's process is made; the first that exits non-zero
    /// stops the launch (`exit` says `preexec`).
    pub pre_exec: Vec<Hook>,
    /// The post-execution commands, in order (`-Ep`, then the queue's `POST_EXEC`): run
    /// after the job ended, whatever they exit with.
    pub post_exec: Vec<Hook>,
    /// The niceness the job's process starts with (the queue's `NICE`); 0 leaves the
    /// shepherd's.
    pub nice: i32,
    /// The job's resource limits: the per-process ones (CPU time, file, data, stack, core)
    /// are set on the job's process before it executes; the whole job's are sbatchd's to
    /// enforce.
    pub limits: wire::ResourceLimits,
}

/// A pre- or post-execution command (docs/batch.md, "Pre- and post-execution commands").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hook {
    /// The command line, run by `/bin/sh -c` as the job's user.
    pub command: String,
    /// The queue's (`PRE_EXEC`/`POST_EXEC`): run in `/tmp` with its standard files on
    /// `/dev/null` and LSF's `PATH`, as LSF runs them; else the job's own (`-E`/`-Ep`):
    /// in the job's working directory, its output appended to the job's.
    pub queue_level: bool,
}

/// A malformed handoff file.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct HandoffError {
    /// The file.
    pub path: String,
    /// What is wrong.
    pub problem: String,
}

impl HandoffError {
    fn new(path: &Path, problem: impl Into<String>) -> HandoffError {
        HandoffError { path: path.display().to_string(), problem: problem.into() }
    }
}

/// The `pid` file: the job's process as the shepherd started it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PidFile {
    /// Pid of the job's process.
    pub pid: i32,
    /// Its process group (its own: the job leads a new session).
    pub pgid: i32,
    /// When the shepherd let it execute, ms since the epoch.
    pub exec_time_ms: u64,
    /// Field 22 of `/proc/<pid>/stat` (start time in clock ticks after boot), 0 if unknown.
    pub start_ticks: u64,
    /// The kernel's boot id when the job started, empty if unknown.
    pub boot_id: String,
    /// The shepherd's pid.
    pub shepherd: i32,
}

/// The `exit` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitFile {
    /// The job ran and ended.
    Exited {
        /// Raw wait status.
        wait_status: i32,
        /// When it ended, ms since the epoch.
        end_time_ms: u64,
        /// Its resource usage.
        rusage: wire::ResourceUsage,
    },
    /// The job's command never executed.
    Failed {
        /// Where it failed.
        stage: String,
        /// The errno, 0 if none.
        errno: i32,
        /// When, ms since the epoch.
        end_time_ms: u64,
        /// What failed, for `bjobs -l`.
        message: String,
    },
    /// A pre-execution command exited non-zero; the job's process was never made.
    PreExecFailed {
        /// The command's exit value (128 plus the signal that killed it).
        exit: u8,
        /// When, ms since the epoch.
        end_time_ms: u64,
    },
}

impl PidFile {
    /// The line written to the file.
    pub fn to_line(&self) -> String {
        let boot_id = if self.boot_id.is_empty() { "-" } else { self.boot_id.as_str() };
        format!(
            "{LINE_VERSION} pid={} pgid={} exec_time_ms={} start_ticks={} boot_id={boot_id} shepherd={}\n",
            self.pid, self.pgid, self.exec_time_ms, self.start_ticks, self.shepherd
        )
    }

    /// Parses the file's content.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<PidFile, HandoffError> {
        let fields = Fields::parse(path, bytes, None)?;
        let pid_file = PidFile {
            pid: fields.number(path, "pid")?,
            pgid: fields.number(path, "pgid")?,
            exec_time_ms: fields.number(path, "exec_time_ms")?,
            start_ticks: fields.number(path, "start_ticks")?,
            boot_id: match fields.text(path, "boot_id")? {
                "-" => String::new(),
                id => id.to_owned(),
            },
            shepherd: fields.number(path, "shepherd")?,
        };
        if pid_file.pid <= 0 || pid_file.pgid <= 0 {
            return Err(HandoffError::new(path, "pid and pgid must be positive"));
        }
        Ok(pid_file)
    }
}

impl ExitFile {
    /// The line written to the file.
    pub fn to_line(&self) -> String {
        match self {
            ExitFile::Exited { wait_status, end_time_ms, rusage } => format!(
                "{LINE_VERSION} exited wait_status={wait_status} end_time_ms={end_time_ms} user_ms={} \
                 system_ms={} max_rss_kb={}\n",
                rusage.user_time_ms, rusage.system_time_ms, rusage.max_rss_kb
            ),
            ExitFile::Failed { stage, errno, end_time_ms, message } => {
                let message = message.replace(['\n', '\r'], " ");
                format!(
                    "{LINE_VERSION} failed stage={stage} errno={errno} end_time_ms={end_time_ms} message={message}\n"
                )
            }
            ExitFile::PreExecFailed { exit, end_time_ms } => {
                format!("{LINE_VERSION} preexec exit={exit} end_time_ms={end_time_ms}\n")
            }
        }
    }

    /// Parses the file's content.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<ExitFile, HandoffError> {
        let fields = Fields::parse(path, bytes, Some("message"))?;
        match fields.kind.as_str() {
            "exited" => Ok(ExitFile::Exited {
                wait_status: fields.number(path, "wait_status")?,
                end_time_ms: fields.number(path, "end_time_ms")?,
                rusage: wire::ResourceUsage {
                    user_time_ms: fields.number(path, "user_ms")?,
                    system_time_ms: fields.number(path, "system_ms")?,
                    max_rss_kb: fields.number(path, "max_rss_kb")?,
                },
            }),
            "failed" => Ok(ExitFile::Failed {
                stage: fields.text(path, "stage")?.to_owned(),
                errno: fields.number(path, "errno")?,
                end_time_ms: fields.number(path, "end_time_ms")?,
                message: fields.text(path, "message")?.to_owned(),
            }),
            "preexec" => Ok(ExitFile::PreExecFailed {
                exit: fields.number(path, "exit")?,
                end_time_ms: fields.number(path, "end_time_ms")?,
            }),
            other => Err(HandoffError::new(path, format!("unknown exit kind `{other}`"))),
        }
    }
}

/// `v1 [kind] key=value ... [last=rest of line]`.
struct Fields {
    kind: String,
    pairs: Vec<(String, String)>,
}

impl Fields {
    fn parse(path: &Path, bytes: &[u8], rest_key: Option<&str>) -> Result<Fields, HandoffError> {
        let text = std::str::from_utf8(bytes).map_err(|_| HandoffError::new(path, "not UTF-8"))?;
        let line = text.strip_suffix('\n').ok_or_else(|| HandoffError::new(path, "no final newline"))?;
        if line.contains('\n') {
            return Err(HandoffError::new(path, "more than one line"));
        }
        let mut rest = None;
        let mut head = line;
        if let Some(key) = rest_key
            && let Some((before, value)) = line.split_once(&format!(" {key}="))
        {
            head = before;
            rest = Some((key, value));
        }
        let mut words = head.split(' ');
        if words.next() != Some(LINE_VERSION) {
            return Err(HandoffError::new(path, format!("does not start with `{LINE_VERSION}`")));
        }
        let mut kind = String::new();
        let mut pairs = Vec::new();
        for word in words {
            match word.split_once('=') {
                Some((key, value)) => pairs.push((key.to_owned(), value.to_owned())),
                None if kind.is_empty() && pairs.is_empty() => kind = word.to_owned(),
                None => return Err(HandoffError::new(path, format!("`{word}` is not key=value"))),
            }
        }
        if let Some((key, value)) = rest {
            pairs.push((key.to_owned(), value.to_owned()));
        }
        Ok(Fields { kind, pairs })
    }

    fn text(&self, path: &Path, key: &str) -> Result<&str, HandoffError> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| HandoffError::new(path, format!("no `{key}`")))
    }

    fn number<T: std::str::FromStr>(&self, path: &Path, key: &str) -> Result<T, HandoffError> {
        let text = self.text(path, key)?;
        text.parse().map_err(|_| HandoffError::new(path, format!("`{key}={text}` is not a number")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: both files round-trip through their lines, including a message with blanks
    // and `=` signs, and malformed lines are refused.
    #[test]
    fn lines_round_trip() {
        let path = Path::new("/x/pid");
        let pid = PidFile {
            pid: 12,
            pgid: 12,
            exec_time_ms: 99,
            start_ticks: 5,
            boot_id: "abc".into(),
            shepherd: 11,
        };
        assert_eq!(PidFile::parse(path, pid.to_line().as_bytes()).expect("parse"), pid);
        let anonymous = PidFile { boot_id: String::new(), ..pid.clone() };
        assert_eq!(PidFile::parse(path, anonymous.to_line().as_bytes()).expect("parse"), anonymous);
        let exited = ExitFile::Exited {
            wait_status: 768,
            end_time_ms: 7,
            rusage: wire::ResourceUsage { user_time_ms: 1, system_time_ms: 2, max_rss_kb: 3 },
        };
        assert_eq!(ExitFile::parse(path, exited.to_line().as_bytes()).expect("parse"), exited);
        let failed = ExitFile::Failed {
            stage: "cwd".into(),
            errno: 2,
            end_time_ms: 8,
            message: "cannot change to /a b=c: No such file".into(),
        };
        assert_eq!(ExitFile::parse(path, failed.to_line().as_bytes()).expect("parse"), failed);
        let pre_exec = ExitFile::PreExecFailed { exit: 99, end_time_ms: 9 };
        assert_eq!(pre_exec.to_line(), "v1 preexec exit=99 end_time_ms=9\n");
        assert_eq!(ExitFile::parse(path, pre_exec.to_line().as_bytes()).expect("parse"), pre_exec);
        assert!(ExitFile::parse(path, b"v1 preexec exit=256 end_time_ms=9\n").is_err());
        for bad in ["", "v1 pid=1\n", "v2 pid=1 pgid=1 exec_time_ms=1 start_ticks=1 boot_id=-\n", "garbage"] {
            assert!(PidFile::parse(path, bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert!(ExitFile::parse(path, b"v1 vanished\n").is_err());
        assert!(
            PidFile::parse(path, b"v1 pid=0 pgid=0 exec_time_ms=1 start_ticks=1 boot_id=- shepherd=1\n")
                .is_err()
        );
    }
}
