//! The runtime job specification: everything the shell needs to launch a job
//! and everything a message reports about it, derived once from the immutable
//! dispatch snapshot (docs/protocols/sbd-job-record.md, "From the dispatch to the run
//! spec").
//!
//! Decoding happens here and nowhere else: the working directory becomes an
//! absolute, lexically normalised path; `%J`/`%I` in the job files become the
//! job id and array index; relative job files are anchored at the working
//! directory; zero slots and a zero terminate interval take their defaults.
//! After derivation the wire snapshot is not needed any more, and the record
//! does not keep it (so `spec.cwd` is never persisted).

use lava_batch_ll::{HostName, JobRef, JobSpec, QueueName, UserName};
use lava_batch_wire as wire;
use serde::{Deserialize, Serialize};

use crate::UserInfo;

/// Interval between SIGINT, SIGTERM and SIGKILL when the dispatch snapshot says 0
/// (LSF's `JOB_TERMINATE_INTERVAL` default).
pub const TERMINATE_INTERVAL_S_DEFAULT: u32 = 10;

/// Bit of `JobSpecs::file_flags`: truncate the output file (`-oo`).
const FILE_FLAG_OUTPUT_TRUNCATE: u32 = 0b01;
/// Bit of `JobSpecs::file_flags`: truncate the error file (`-eo`).
const FILE_FLAG_ERROR_TRUNCATE: u32 = 0b10;

/// The execution-relevant part of a job, derived once at creation and persisted
/// in its [`crate::JobRecord`]; every outbound message is rebuilt from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSpec {
    /// Dispatch time from the snapshot, seconds since the epoch. It identifies
    /// the dispatch: a NEW_JOB for a refused job with another dispatch time is a
    /// new dispatch, with the same one a duplicate.
    pub dispatch_time_s: i64,
    /// Submission time, seconds since the epoch.
    pub submit_time_s: i64,
    /// Uid the job runs as (from the user lookup on this host).
    pub exec_uid: u32,
    /// Primary gid the job runs as (from the user lookup on this host).
    pub exec_gid: u32,
    /// User the job runs as.
    pub exec_user: UserName,
    /// Home directory reported in EXECUTE: the submission home (`spec.sub_home_dir`),
    /// the base of a relative working directory.
    pub exec_home: String,
    /// Absolute, normalised working directory of the job.
    pub exec_cwd: String,
    /// Home directory of the user's passwd entry on this host, empty when the
    /// lookup failed; the shell uses it for the job's `HOME`.
    pub user_home: String,
    /// Login shell of the user's passwd entry on this host, empty when unknown.
    pub user_shell: String,
    /// The command line or script body, run by `/bin/sh -c`.
    pub command: String,
    /// `-L`: the login shell that runs the job script, empty for `/bin/sh`.
    pub login_shell: String,
    /// `-E`: the pre-execution command, empty for none.
    pub pre_exec: String,
    /// The job's environment (mbatchd already added LSF's job variables).
    pub env: Vec<wire::EnvVar>,
    /// Standard input file, absolute; empty for `/dev/null`.
    pub input_file: String,
    /// Standard output file, absolute; empty for the default.
    pub output_file: String,
    /// Standard error file, absolute; empty to follow the output file.
    pub error_file: String,
    /// Truncate the output file instead of appending (`-oo`).
    pub output_truncate: bool,
    /// Truncate the error file instead of appending (`-eo`).
    pub error_truncate: bool,
    /// File-creation mask.
    pub umask: u32,
    /// Slots the job holds, at least 1.
    pub n_slots: u32,
    /// Run limit (`-W`) in seconds, 0 for none.
    pub run_limit_s: u64,
    /// Resident memory limit (`-M`) in KiB, 0 for none.
    pub mem_limit_kb: u64,
    /// Interval between the signals of a kill, seconds, at least 1.
    pub terminate_interval_s: u32,
    /// Queue the job came from.
    pub queue: QueueName,
    /// Job name.
    pub job_name: String,
    /// Project name.
    pub project: String,
    /// Submission host.
    pub from_host: String,
    /// Execution hosts, the first is this one.
    pub exec_hosts: Vec<HostName>,
}

impl RunSpec {
    /// Derives the runtime spec from a validated snapshot and the user lookup.
    /// Without a lookup (the job is being refused) the snapshot's uid and gid
    /// stand in, so that even a refused record is complete and well formed.
    pub fn derive(spec: &JobSpec, user: Option<&UserInfo>) -> RunSpec {
        let specs = spec.specs();
        let job = spec.job();
        let exec_cwd = decode_cwd(&specs.sub_home_dir, &specs.cwd);
        let file = |path: &str| resolve_file(&exec_cwd, &substitute_job(path, job));
        RunSpec {
            dispatch_time_s: specs.dispatch_time,
            submit_time_s: specs.submit_time,
            exec_uid: user.map_or(specs.user_id, |u| u.uid),
            exec_gid: user.map_or(specs.group_id, |u| u.gid),
            exec_user: spec.user().clone(),
            exec_home: normalize_path(&specs.sub_home_dir),
            input_file: file(&specs.input_file),
            output_file: file(&specs.output_file),
            error_file: file(&specs.error_file),
            exec_cwd: exec_cwd.clone(),
            user_home: user.map(|u| u.home.clone()).unwrap_or_default(),
            user_shell: user.map(|u| u.shell.clone()).unwrap_or_default(),
            command: specs.command.clone(),
            login_shell: specs.login_shell.clone(),
            pre_exec: specs.pre_exec.clone(),
            env: specs.env.clone(),
            output_truncate: specs.file_flags & FILE_FLAG_OUTPUT_TRUNCATE != 0,
            error_truncate: specs.file_flags & FILE_FLAG_ERROR_TRUNCATE != 0,
            umask: specs.umask,
            n_slots: specs.n_slots.max(1),
            run_limit_s: specs.run_limit_s,
            mem_limit_kb: specs.mem_limit_kb,
            terminate_interval_s: match specs.terminate_interval_s {
                0 => TERMINATE_INTERVAL_S_DEFAULT,
                interval_s => interval_s,
            },
            queue: spec.queue().clone(),
            job_name: specs.job_name.clone(),
            project: specs.project.clone(),
            from_host: specs.from_host.clone(),
            exec_hosts: spec.exec_hosts().to_vec(),
        }
    }
}

/// The absolute working directory of a job: `cwd` when absolute, `home/cwd`
/// when relative (LSF stores a directory under the home relative to it), `home`
/// when empty; `.` and `..` are resolved lexically (`..` of `/` is `/`).
/// `home` is absolute (checked by `lava-batch-ll`), so the result always is.
pub fn decode_cwd(home: &str, cwd: &str) -> String {
    if cwd.starts_with('/') { normalize_path(cwd) } else { normalize_path(&format!("{home}/{cwd}")) }
}

/// Lexical normalisation of an absolute path: no empty, `.` or `..` component.
pub fn normalize_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    format!("/{}", parts.join("/"))
}

/// LSF's file-name substitution: `%J` → job id, `%I` → array index (0 when
/// the job is not an array element).
pub fn substitute_job(template: &str, job: JobRef) -> String {
    template.replace("%J", &job.id().to_string()).replace("%I", &job.index().to_string())
}

/// A job file anchored at the working directory; empty stays empty.
pub fn resolve_file(exec_cwd: &str, path: &str) -> String {
    match path {
        "" => String::new(),
        absolute if absolute.starts_with('/') => normalize_path(absolute),
        relative => normalize_path(&format!("{exec_cwd}/{relative}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: every shape of `spec.cwd` decodes to the absolute directory LSF
    // would use. Method: a table of (home, cwd, expected).
    #[test]
    fn cwd_decoding_table() {
        let cases = [
            ("/home/alice", "", "/home/alice"),
            ("/home/alice", ".", "/home/alice"),
            ("/home/alice", "work", "/home/alice/work"),
            ("/home/alice", "work/./run/", "/home/alice/work/run"),
            ("/home/alice", "../bob/x", "/home/bob/x"),
            ("/home/alice", "../../../../etc", "/etc"),
            ("/home/alice", "/scratch/run", "/scratch/run"),
            ("/home/alice", "/scratch//a/../b/.", "/scratch/b"),
            ("/home/alice", "/..", "/"),
            ("/home/alice/", "w", "/home/alice/w"),
            ("/", "", "/"),
        ];
        for (home, cwd, expected) in cases {
            assert_eq!(decode_cwd(home, cwd), expected, "home {home:?} cwd {cwd:?}");
        }
    }

    // Goal: %J and %I are replaced everywhere, and relative files are anchored
    // at the working directory.
    #[test]
    fn job_files_are_substituted_and_anchored() {
        let job = JobRef::new(42, 3).expect("nonzero id");
        assert_eq!(substitute_job("out.%J.%I.%J", job), "out.42.3.42");
        assert_eq!(resolve_file("/w", &substitute_job("logs/%J.out", job)), "/w/logs/42.out");
        assert_eq!(resolve_file("/w", "/abs/../x"), "/x");
        assert_eq!(resolve_file("/w", ""), "");
    }
}
