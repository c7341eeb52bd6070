//! The 11 load indices (spec section 5) read from the Linux kernel, in LSF's units:
//! r15s (lim's own 15-second exponential average of the running-task count of
//! `/proc/loadavg`, sampled every second), r1m and r15m (`/proc/loadavg`), ut (CPU busy
//! fraction 0..1 from `/proc/stat` deltas), pg (pages swapped in+out per second,
//! `/proc/vmstat` pswpin+pswpout), io (KB/s read+written, `/proc/vmstat` pgpgin+pgpgout,
//! which the kernel counts in KB), ls (distinct users with a USER_PROCESS entry in
//! `/var/run/utmp`), it (minutes since the most recent access to a terminal, `/dev/pts/*`
//! and `/dev/tty*` atimes), tmp (free MB in /tmp, statvfs), swp (free swap MB), mem
//! (MemAvailable MB). A source that cannot be read gives 0 for its index.

use std::collections::BTreeSet;
use std::fs;
use std::time::{Duration, SystemTime};

use lava_lim_ll::{LIM_NIDX, LoadVector};
use lava_lim_logic::HostInfo;

/// Seconds of the r15s average.
const R15S_WINDOW_SECS: f64 = 15.0;
/// Size of one `struct utmp` record on Linux (glibc, 64-bit and 32-bit alike).
const UTMP_RECORD_BYTES: usize = 384;
/// `ut_type` of a logged-in user.
const UTMP_USER_PROCESS: u16 = 7;

/// Keeps what the rate indices need between two samples.
#[derive(Debug, Default)]
pub struct Sampler {
    r15s: Option<f64>,
    cpu: Option<(u64, u64)>,
    vmstat: Option<(u64, u64)>,
}

impl Sampler {
    /// Takes one sample; `elapsed` is the time since the previous one.
    pub fn sample(&mut self, elapsed: Duration) -> LoadVector {
        let secs = elapsed.as_secs_f64().max(0.001);
        let mut li = [0.0f32; LIM_NIDX];
        let loadavg = fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let fields: Vec<&str> = loadavg.split_whitespace().collect();
        let running: f64 = fields
            .get(3)
            .and_then(|field| field.split('/').next())
            .and_then(|n| n.parse::<f64>().ok())
            // The count includes the reading process itself (lim is running while it reads).
            .map_or(0.0, |n| (n - 1.0).max(0.0));
        let decay = (-secs / R15S_WINDOW_SECS).exp();
        let r15s = self.r15s.map_or(running, |old| old * decay + running * (1.0 - decay));
        self.r15s = Some(r15s);
        li[0] = r15s as f32;
        li[1] = parse_at(&fields, 0);
        li[2] = parse_at(&fields, 2);
        if let Some((busy, total)) = cpu_times() {
            if let Some((old_busy, old_total)) = self.cpu
                && total > old_total
            {
                li[3] = (busy.saturating_sub(old_busy) as f64 / (total - old_total) as f64) as f32;
            }
            self.cpu = Some((busy, total));
        }
        if let Some((swaps, kbytes)) = vmstat() {
            if let Some((old_swaps, old_kbytes)) = self.vmstat {
                li[4] = (swaps.saturating_sub(old_swaps) as f64 / secs) as f32;
                li[5] = (kbytes.saturating_sub(old_kbytes) as f64 / secs) as f32;
            }
            self.vmstat = Some((swaps, kbytes));
        }
        li[6] = login_sessions() as f32;
        li[7] = idle_minutes();
        li[8] = rustix::fs::statvfs("/tmp")
            .map_or(0.0, |vfs| (vfs.f_bavail.saturating_mul(vfs.f_frsize) / (1024 * 1024)) as f32);
        let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        li[9] = meminfo_mb(&meminfo, "SwapFree:");
        li[10] = meminfo_mb(&meminfo, "MemAvailable:");
        LoadVector::full(li.map(|value| if value.is_finite() && value >= 0.0 { value } else { 0.0 }))
    }
}

/// This host's static facts (what `lshosts` prints): processors (the `processor` entries
/// of `/proc/cpuinfo`, else what the scheduler lets lim use), physical memory and swap in MB
/// (`MemTotal`, `SwapTotal` of `/proc/meminfo`).
pub fn host_info() -> HostInfo {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let listed = cpuinfo
        .lines()
        .filter(|line| line.split(':').next().is_some_and(|key| key.trim() == "processor"))
        .count();
    let ncpus = if listed > 0 {
        listed
    } else {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    };
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    HostInfo {
        ncpus: u32::try_from(ncpus).unwrap_or(u32::MAX),
        maxmem_mb: meminfo_mb(&meminfo, "MemTotal:") as u32,
        maxswp_mb: meminfo_mb(&meminfo, "SwapTotal:") as u32,
    }
}

fn parse_at(fields: &[&str], idx: usize) -> f32 {
    fields.get(idx).and_then(|field| field.parse().ok()).unwrap_or(0.0)
}

fn cpu_times() -> Option<(u64, u64)> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let values: Vec<u64> = line.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    let total: u64 = values.iter().take(8).sum();
    // idle and iowait are not busy.
    let idle = values.get(3).copied().unwrap_or(0) + values.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

fn vmstat() -> Option<(u64, u64)> {
    let text = fs::read_to_string("/proc/vmstat").ok()?;
    let mut swaps = 0;
    let mut kbytes = 0;
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let (Some(key), Some(value)) = (parts.next(), parts.next().and_then(|v| v.parse::<u64>().ok()))
        else {
            continue;
        };
        match key {
            "pswpin" | "pswpout" => swaps += value,
            "pgpgin" | "pgpgout" => kbytes += value,
            _ => {}
        }
    }
    Some((swaps, kbytes))
}

fn meminfo_mb(meminfo: &str, key: &str) -> f32 {
    meminfo
        .lines()
        .find(|line| line.starts_with(key))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| (kb / 1024.0) as f32)
}

fn login_sessions() -> usize {
    let Ok(bytes) = fs::read("/var/run/utmp") else { return 0 };
    let mut users = BTreeSet::new();
    for record in bytes.chunks_exact(UTMP_RECORD_BYTES) {
        let ut_type = u16::from_ne_bytes([record[0], record[1]]);
        if ut_type == UTMP_USER_PROCESS {
            // ut_user: 32 bytes at offset 44 (after type+pad, pid, line[32], id[4]).
            let user = &record[44..76];
            let end = user.iter().position(|&b| b == 0).unwrap_or(user.len());
            if end > 0 {
                users.insert(user[..end].to_vec());
            }
        }
    }
    users.len()
}

fn idle_minutes() -> f32 {
    let mut latest: Option<SystemTime> = None;
    let mut consider = |path: std::path::PathBuf| {
        if let Ok(accessed) = fs::metadata(&path).and_then(|meta| meta.accessed()) {
            latest = Some(latest.map_or(accessed, |old| old.max(accessed)));
        }
    };
    if let Ok(entries) = fs::read_dir("/dev/pts") {
        entries.flatten().filter(|e| e.file_name() != "ptmx").for_each(|e| consider(e.path()));
    }
    if let Ok(entries) = fs::read_dir("/dev") {
        entries
            .flatten()
            .filter(|e| {
                e.file_name().to_string_lossy().strip_prefix("tty").is_some_and(|rest| !rest.is_empty())
            })
            .for_each(|e| consider(e.path()));
    }
    latest
        .and_then(|at| SystemTime::now().duration_since(at).ok())
        .map_or(0.0, |idle| (idle.as_secs() / 60) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: two samples a second apart give the indices we can always rely on in a sandbox.
    #[test]
    fn samples_are_plausible() {
        let mut sampler = Sampler::default();
        sampler.sample(Duration::from_secs(1));
        let load = sampler.sample(Duration::from_secs(1));
        assert_eq!(usize::from(load.n_valid), LIM_NIDX);
        assert!(load.values[10] > 0.0, "MemAvailable is known: {load:?}");
        assert!((0.0..=1.0).contains(&load.values[3]), "ut is a fraction: {load:?}");
        assert!(load.values.iter().all(|value| value.is_finite() && *value >= 0.0));
    }

    // Goal: the static facts are read: at least one processor, some memory.
    #[test]
    fn host_info_is_plausible() {
        let info = host_info();
        assert!(info.ncpus >= 1 && info.maxmem_mb > 0, "{info:?}");
    }
}
