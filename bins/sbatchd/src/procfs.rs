//! What sbatchd reads about processes from `/proc`: a process's start time and the boot
//! id (which tell a job's process from a later one with the same pid), and the resident
//! memory of process groups (for `bsub -M` limits).

use std::collections::{BTreeMap, BTreeSet};
use std::io;

/// The fields after the command name of `/proc/<pid>/stat`, field 3 first. The name (field
/// 2) is in parentheses and may hold anything, so counting starts after its last `)`.
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rfind(')').map(|at| stat[at + 1..].split_whitespace().collect()).unwrap_or_default()
}

/// Field 22 of `/proc/<pid>/stat`: the process's start time in clock ticks after boot.
pub fn process_start_ticks(pid: i32) -> io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    stat_fields(&stat)
        .get(22 - 3)
        .and_then(|ticks| ticks.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("/proc/{pid}/stat: no start time")))
}

/// The kernel's boot id (changes at every boot).
pub fn boot_id() -> io::Result<String> {
    Ok(std::fs::read_to_string("/proc/sys/kernel/random/boot_id")?.trim().to_owned())
}

/// `VmRSS` of `/proc/<pid>/status`, KiB (0 for a kernel thread or a zombie).
fn process_rss_kb(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `VmRSS` of process `pid`, KiB; `None` when it is gone.
pub fn rss_kb_of(pid: i32) -> Option<u64> {
    process_rss_kb(&pid.to_string())
}

/// Resident memory of each process group of `pgids`, KiB: the sum over its processes.
/// One pass over `/proc`; processes that end meanwhile are skipped.
pub fn group_rss_kb(pgids: &BTreeSet<i32>) -> BTreeMap<i32, u64> {
    let mut rss_kb: BTreeMap<i32, u64> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return rss_kb };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|name| name.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let pgid = stat_fields(&stat).get(5 - 3).and_then(|pgid| pgid.parse::<i32>().ok());
        if let Some(pgid) = pgid.filter(|pgid| pgids.contains(pgid))
            && let Some(kb) = process_rss_kb(pid)
        {
            *rss_kb.entry(pgid).or_default() += kb;
        }
    }
    rss_kb
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: this process's start time, the boot id and its group's memory can be read.
    #[test]
    fn own_process_is_readable() {
        let pid = i32::try_from(std::process::id()).expect("pid");
        assert!(process_start_ticks(pid).expect("stat") > 0);
        assert!(!boot_id().expect("boot id").is_empty());
        let stat = std::fs::read_to_string("/proc/self/stat").expect("stat");
        let pgid: i32 = stat_fields(&stat)[5 - 3].parse().expect("pgid");
        let rss = group_rss_kb(&BTreeSet::from([pgid]));
        assert!(rss.get(&pgid).is_some_and(|kb| *kb > 0), "{rss:?}");
    }

    // Goal: a command name with blanks and parentheses does not shift the fields.
    #[test]
    fn odd_command_names_are_skipped() {
        let stat = "42 (a) b (c) S 1 42 42 0";
        assert_eq!(stat_fields(stat)[..4], ["S", "1", "42", "42"]);
    }
}
