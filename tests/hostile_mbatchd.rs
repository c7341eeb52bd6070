//! mbatchd's port under hostile load (docs/operations.md, "Connection limits"): a stranger
//! with plain TCP and no credential, bounded in count and time, on loopback. Each test shows
//! that commands and sbatchd's own channel are still served within a few seconds, and that
//! mbatchd's memory and log stay bounded.

mod util;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use util::hostile::{assert_closed_by_deadline, closed_within, open_idle, rss_kib};
use util::{Cluster, Daemon, IO_TIMEOUT, submitted_job_id, wait_until};

fn bin(name: &str) -> std::path::PathBuf {
    util::mbatchd_bin().with_file_name(name)
}

struct Rig {
    cluster: Cluster,
    mbatchd: Daemon,
    _sbatchd: Daemon,
}

impl Rig {
    fn start() -> Rig {
        let mut cluster = Cluster::new();
        let mbatchd = cluster.start_mbatchd();
        let _sbatchd = cluster.start_sbatchd("localhost");
        Rig { cluster, mbatchd, _sbatchd }
    }

    /// `bjobs -a` answered; how long it took.
    fn bjobs(&self) -> Option<Duration> {
        let started = Instant::now();
        let out = self.cluster.command(bin("bjobs")).arg("-a").env("LAVA_RETRY_SECS", "10").output().ok()?;
        out.status.success().then(|| started.elapsed())
    }

    /// A job submitted and run to DONE: sbatchd's channel works.
    fn job_runs(&self) {
        let out = self.cluster.command(bin("bsub")).args(["-o", "/dev/null", "true"]).output().expect("bsub");
        assert!(out.status.success(), "bsub: {}", String::from_utf8_lossy(&out.stderr));
        let job = submitted_job_id(&String::from_utf8_lossy(&out.stdout));
        wait_until(&format!("job {job} to be DONE"), Duration::from_secs(30), || {
            let out = self
                .cluster
                .command(bin("bjobs"))
                .args(["-a", "-noheader", &job.to_string()])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout).contains(" DONE ").then_some(())
        });
    }

    fn rss_kib(&self) -> u64 {
        rss_kib(self.mbatchd.pid())
    }
}

// Attack (issue 18, item 2): about 1,100 idle connections without a credential, more than
// mbatchd serves (it served 1,024 and gave each 60 s). Goal: commands are answered and a
// job runs meanwhile, every idle connection is closed by its deadline, and the log does
// not grow with them.
#[test]
fn idle_strangers_never_lock_out_commands_or_sbatchd() {
    let rig = Rig::start();
    let log_before = rig.mbatchd.log().len();
    let opened = Instant::now();
    let mut idle = open_idle(rig.cluster.mbd_addr(), 1100);
    assert!(idle.len() >= 1000, "the attacker opened {} connections", idle.len());
    let took = rig.bjobs().expect("bjobs is answered beside 1,100 idle connections");
    assert!(took < Duration::from_secs(5), "bjobs took {took:?}");
    rig.job_runs();
    assert_closed_by_deadline(&mut idle, opened);
    let grown = rig.mbatchd.log().len() - log_before;
    assert!(grown < 16 * 1024, "mbatchd logged {grown} bytes for 1,100 idle connections");
}

/// Opens `n` connections to mbatchd, each announcing a 2 MiB SUBMIT_JOB frame and sending
/// `part_bytes` of it (bounded writes: a connection mbatchd closed or stopped reading is
/// left as it is).
fn partial_first_frames(rig: &Rig, n: usize, part_bytes: usize) -> Vec<TcpStream> {
    let mut header = Vec::new();
    // Sequence, operation (SUBMIT_JOB), version, a 2 MiB length, status.
    let submit = lava_batch_wire::Operation::SubmitJob.code();
    for word in [1u32, submit, lava_batch_wire::BATCH_VERSION, 2 << 20, 0] {
        header.extend_from_slice(&word.to_be_bytes());
    }
    let part = vec![0x55u8; part_bytes];
    let mut streams = Vec::new();
    for _ in 0..n {
        let Ok(mut stream) = TcpStream::connect_timeout(&rig.cluster.mbd_addr(), IO_TIMEOUT) else {
            continue;
        };
        stream.set_write_timeout(Some(Duration::from_millis(500))).expect("a write timeout");
        let _sent = stream.write_all(&header).and_then(|()| stream.write_all(&part));
        streams.push(stream);
    }
    streams
}

// Attack: many connections, each sending almost all of a large first frame within the
// deadline (so that memory follows bytes actually received, and every one of them counts).
// Goal: together they hold at most mbatchd's pre-authentication budget (64 MiB): once it is
// reserved, each new large first frame closes the oldest unfinished one; mbatchd's memory
// stays bounded by the budget, not by the number of connections, and commands are served.
#[test]
fn large_first_frames_share_one_byte_budget() {
    let rig = Rig::start();
    let before = rig.rss_kib();
    // 1.875 MiB of each 2 MiB frame: 100 of them would be 187 MiB held without the budget.
    let mut streams = partial_first_frames(&rig, 100, 15 << 17);
    std::thread::sleep(Duration::from_millis(500));
    let grown = rig.rss_kib().saturating_sub(before);
    assert!(grown < 128 * 1024, "mbatchd grew by {grown} KiB for 100 large partial first frames");
    let closed = streams
        .iter_mut()
        .map(|stream| closed_within(stream, Duration::from_millis(100)))
        .filter(|closed| *closed)
        .count();
    assert!(closed >= 60, "only {closed} of 100 were closed to keep within the budget");
    assert!(rig.bjobs().is_some(), "commands are still answered");
}

// Attack (issue 18, item 2): connections that each announce a 2 MiB frame and send part of
// it (the reader used to reserve the announced size at once). Goal: mbatchd's memory grows
// with the bytes it was sent, not with what was announced, and commands are still served.
#[test]
fn announced_frame_sizes_reserve_no_memory() {
    let rig = Rig::start();
    let before = rig.rss_kib();
    let _streams = partial_first_frames(&rig, 400, 16 << 10);
    std::thread::sleep(Duration::from_millis(500));
    let grown = rig.rss_kib().saturating_sub(before);
    // 400 x 16 KiB were sent (6.4 MB); the announced 400 x 2 MiB would be 800 MB.
    assert!(grown < 96 * 1024, "mbatchd grew by {grown} KiB for 400 partial frames");
    assert!(rig.bjobs().is_some(), "commands are still answered");
}
