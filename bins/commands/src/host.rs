//! Facts about the calling process that a submission carries: umask, home
//! directory, host name, working directory, environment.
//!
//! All of them are read without unsafe code: `/proc/self/status` (`Uid:` and
//! `Umask:`, Linux ≥ 4.7), `/proc/sys/kernel/hostname`, `$HOME` or the
//! `/etc/passwd` entry of the uid. None of them is an identity claim: mbatchd
//! takes the user from the credential the local sbatchd sealed.

use std::path::Path;

use lava_batch_wire::EnvVar;

/// The file-creation mask used when `/proc/self/status` has none (very old kernels).
pub const UMASK_DEFAULT: u32 = 0o022;

/// What `/proc/self/status` says about this process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcStatus {
    /// Real uid.
    pub uid: Option<u32>,
    /// File-creation mask.
    pub umask: Option<u32>,
}

impl ProcStatus {
    /// Reads this process's status, empty if it cannot be read.
    pub fn read() -> ProcStatus {
        std::fs::read_to_string("/proc/self/status").map(|text| ProcStatus::parse(&text)).unwrap_or_default()
    }

    /// Parses the text of a `/proc/PID/status` file.
    pub fn parse(text: &str) -> ProcStatus {
        let mut status = ProcStatus::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("Uid:") {
                status.uid = rest.split_whitespace().next().and_then(|uid| uid.parse().ok());
            } else if let Some(rest) = line.strip_prefix("Umask:") {
                status.umask = u32::from_str_radix(rest.trim(), 8).ok().filter(|mask| *mask <= 0o777);
            }
        }
        status
    }
}

/// The home directory: `$HOME` when it is an absolute path, else the
/// `/etc/passwd` entry of `uid`.
pub fn home_dir(home_env: Option<&str>, uid: Option<u32>, passwd: &Path) -> Option<String> {
    if let Some(home) = home_env.filter(|home| home.starts_with('/')) {
        return Some(home.to_owned());
    }
    let uid = uid?;
    let text = std::fs::read_to_string(passwd).ok()?;
    passwd_home(&text, uid)
}

/// The home field of the first `/etc/passwd` line whose uid is `uid`.
pub fn passwd_home(passwd: &str, uid: u32) -> Option<String> {
    passwd_entries(passwd)
        .find(|(_, id, _)| *id == uid)
        .filter(|(_, _, home)| home.starts_with('/'))
        .map(|(_, _, home)| home.to_owned())
}

/// The fields of the `/etc/passwd` lines: name, uid and home of each well-formed one.
fn passwd_entries(passwd: &str) -> impl Iterator<Item = (&str, u32, &str)> {
    passwd.lines().filter_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let uid = fields.get(2)?.parse::<u32>().ok()?;
        (fields.len() >= 7).then(|| (fields[0], uid, fields[5]))
    })
}

/// The user name of the first `/etc/passwd` line whose uid is `uid`.
pub fn passwd_name(passwd: &str, uid: u32) -> Option<String> {
    passwd_entries(passwd).find(|(_, id, _)| *id == uid).map(|(name, _, _)| name.to_owned())
}

/// The home field of the `/etc/passwd` line of user `name`.
pub fn passwd_home_by_name(passwd: &str, name: &str) -> Option<String> {
    passwd_entries(passwd)
        .find(|(user, _, home)| *user == name && home.starts_with('/'))
        .map(|(_, _, home)| home.to_owned())
}

/// This host's name as the cluster knows it: `LAVA_HOST` if set (several
/// logical hosts on one machine), else the kernel's host name cut at the first
/// dot (LSF compares short names), else `localhost`.
pub fn host_name(lava_host_env: Option<&str>) -> String {
    if let Some(name) = lava_host_env.filter(|name| !name.is_empty()) {
        return name.to_owned();
    }
    let kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let short = kernel.trim().split('.').next().unwrap_or_default();
    if short.is_empty() { "localhost".to_owned() } else { short.to_owned() }
}

/// A working directory as LSF stores it: relative to the home directory when
/// it is inside it (empty for the home itself), so that the job finds it on
/// an execution host that mounts homes elsewhere; absolute otherwise.
pub fn cwd_for_submission(cwd: &str, home: &str) -> String {
    let home = home.trim_end_matches('/');
    if home.is_empty() {
        return cwd.to_owned();
    }
    match cwd.strip_prefix(home) {
        Some("") | Some("/") => String::new(),
        Some(rest) if rest.starts_with('/') => rest.trim_start_matches('/').to_owned(),
        _ => cwd.to_owned(),
    }
}

/// The whole environment, in the process's order; variables whose name or
/// value is not UTF-8 cannot travel in the protocol and are left out.
pub fn environment() -> Vec<EnvVar> {
    std::env::vars_os()
        .filter_map(|(name, value)| {
            let name = name.into_string().ok()?;
            let value = value.into_string().ok()?;
            (!name.is_empty() && !name.contains('=')).then_some(EnvVar { name, value })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: uid and umask come out of a real-looking status file.
    #[test]
    fn proc_status_gives_uid_and_umask() {
        let text = "Name:\tbsub\nUmask:\t0027\nState:\tR (running)\nUid:\t1000\t1000\t1000\t1000\n";
        assert_eq!(ProcStatus::parse(text), ProcStatus { uid: Some(1000), umask: Some(0o027) });
        assert_eq!(ProcStatus::parse("Name:\tx\n"), ProcStatus::default());
        assert!(ProcStatus::read().uid.is_some(), "this process has a status file");
    }

    // Goal: $HOME wins when absolute; otherwise the passwd entry of the uid.
    #[test]
    fn home_comes_from_env_or_passwd() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000:Alice,,,:/home/alice:/bin/sh\n";
        assert_eq!(passwd_home(passwd, 1000), Some("/home/alice".to_owned()));
        assert_eq!(passwd_home(passwd, 7), None);
        assert_eq!(passwd_name(passwd, 1000).as_deref(), Some("alice"));
        assert_eq!(passwd_home_by_name(passwd, "root").as_deref(), Some("/root"));
        assert_eq!(passwd_home_by_name(passwd, "bob"), None);
        let missing = Path::new("/nonexistent/passwd");
        assert_eq!(home_dir(Some("/home/bob"), Some(1000), missing), Some("/home/bob".to_owned()));
        assert_eq!(home_dir(Some("relative"), None, missing), None);
    }

    // Goal: directories inside the home become relative, others stay absolute.
    #[test]
    fn cwd_is_relative_to_home_inside_it() {
        assert_eq!(cwd_for_submission("/home/alice/work/run", "/home/alice"), "work/run");
        assert_eq!(cwd_for_submission("/home/alice", "/home/alice/"), "");
        assert_eq!(cwd_for_submission("/home/alicex", "/home/alice"), "/home/alicex");
        assert_eq!(cwd_for_submission("/scratch/a", "/home/alice"), "/scratch/a");
        assert_eq!(cwd_for_submission("/scratch/a", "/"), "/scratch/a");
    }

    // Goal: LAVA_HOST names a logical host; otherwise the kernel's short name.
    #[test]
    fn host_name_prefers_lava_host() {
        assert_eq!(host_name(Some("node2")), "node2");
        let kernel = host_name(None);
        assert!(!kernel.is_empty() && !kernel.contains('.'), "{kernel}");
    }
}
