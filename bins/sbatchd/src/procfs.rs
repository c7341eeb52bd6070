//! What sbatchd reads about processes from `/proc`: a process's start time and the boot
//! id (which tell a job's process from a later one with the same pid), and what the
//! processes of a process group use (for the job's limits: `bsub -M`, and the queue's
//! `CPULIMIT`, `SWAPLIMIT`, `PROCESSLIMIT`, `THREADLIMIT`).

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use lava_sbd::UsageSample;

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

/// What each process group of `pgids` uses, summed over its processes. One pass over
/// `/proc`, one read of each process's `stat`; processes that end meanwhile are skipped.
pub fn group_usage(pgids: &BTreeSet<i32>) -> BTreeMap<i32, UsageSample> {
    let mut usage: BTreeMap<i32, UsageSample> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return usage };
    let units = Units::of_system();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().filter(|name| name.bytes().all(|b| b.is_ascii_digit())) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let fields = stat_fields(&stat);
        let pgid = fields.get(5 - 3).and_then(|pgid| pgid.parse::<i32>().ok());
        if let Some(pgid) = pgid.filter(|pgid| pgids.contains(pgid))
            && let Some(process) = process_usage(&fields, units)
        {
            let group = usage.entry(pgid).or_default();
            group.rss_kb += process.rss_kb;
            group.vm_kb += process.vm_kb;
            group.cpu_ms += process.cpu_ms;
            group.processes += 1;
            group.threads += process.threads;
        }
    }
    usage
}

/// The kernel's units of `/proc/<pid>/stat`: clock ticks per second and bytes per page.
#[derive(Clone, Copy, Debug)]
struct Units {
    ticks_per_s: u64,
    page_bytes: u64,
}

impl Units {
    /// The system's, else Linux's usual values.
    fn of_system() -> Units {
        let (ticks, page) = crate::sys::ticks_and_page_bytes();
        Units { ticks_per_s: ticks.unwrap_or(100), page_bytes: page.unwrap_or(4096) }
    }
}

/// One process's usage from the fields of its `stat` (field 3 first): CPU time of the
/// process and of its waited-for children (fields 14 to 17), threads (20), virtual memory
/// (23, bytes) and resident pages (24); `None` when a field is missing.
fn process_usage(fields: &[&str], units: Units) -> Option<UsageSample> {
    let number = |field: usize| fields.get(field - 3).and_then(|value| value.parse::<u64>().ok());
    let ticks = number(14)? + number(15)? + number(16)? + number(17)?;
    Some(UsageSample {
        rss_kb: number(24)?.saturating_mul(units.page_bytes) / 1024,
        vm_kb: number(23)? / 1024,
        cpu_ms: ticks.saturating_mul(1000) / units.ticks_per_s,
        processes: 1,
        threads: u32::try_from(number(20)?).unwrap_or(u32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: this process's start time and the boot id can be read, and a process group's
    // usage is what its processes use: CPU time that grows as a child spins, its
    // processes and threads counted, its memory.
    // Method: a child in a group of its own spins for 0.3 s of CPU; its group is read.
    #[test]
    fn own_process_and_a_group_are_readable() {
        let pid = i32::try_from(std::process::id()).expect("pid");
        assert!(process_start_ticks(pid).expect("stat") > 0);
        assert!(!boot_id().expect("boot id").is_empty());
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("/bin/sh")
            .args([
                "-c",
                "end=$(($(date +%s%N) + 300000000)); while [ $(date +%s%N) -lt $end ]; do :; done; sleep 5",
            ])
            .process_group(0)
            .spawn()
            .expect("sh");
        let pgid = i32::try_from(child.id()).expect("pid");
        let started = std::time::Instant::now();
        let usage = loop {
            let usage = group_usage(&BTreeSet::from([pgid]))[&pgid];
            if usage.cpu_ms >= 200 || started.elapsed() > std::time::Duration::from_secs(30) {
                break usage;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        crate::sys::kill_group(pgid, libc::SIGKILL).expect("kill the group");
        let _ = child.wait();
        assert!(usage.cpu_ms >= 200, "{usage:?}");
        assert!(usage.processes >= 1 && usage.threads >= usage.processes, "{usage:?}");
        assert!(usage.rss_kb > 0 && usage.vm_kb >= usage.rss_kb, "{usage:?}");
        // The shell's `sleep`, orphaned, is reaped by whoever adopts it.
        let started = std::time::Instant::now();
        while group_usage(&BTreeSet::from([pgid])).contains_key(&pgid) {
            assert!(started.elapsed() < std::time::Duration::from_secs(30), "the group is still there");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    // Goal: a command name with blanks and parentheses does not shift the fields.
    #[test]
    fn odd_command_names_are_skipped() {
        let stat = "42 (a) b (c) S 1 42 42 0";
        assert_eq!(stat_fields(stat)[..4], ["S", "1", "42", "42"]);
    }
}
