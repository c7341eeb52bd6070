//! The `eventlog` benchmark: durable appends from many concurrent appenders (group
//! commit), then replay of the resulting log.
//!
//! It first measures the disk's raw fsync latency (a plain file, one small write then
//! one `fdatasync`, repeated), because group commit can only be judged against it: with
//! `A` appenders each waiting for its record before writing the next, throughput is at
//! most about `A` records per fsync divided by the fsync latency. Then `--appenders`
//! threads each append `--record-bytes` records and wait for each to be durable before
//! the next, for `--secs` seconds. The log is then topped up (buffered appends, one
//! final sync) to at least `--replay-records` records, closed, reopened as at a daemon
//! restart, and replayed whole. Lines printed:
//!
//! ```text
//! eventlog_fsync_raw mode=append|overwrite write_bytes=... fsyncs=... us_per_fsync_p50=... us_per_fsync_mean=...
//! eventlog_append appenders=64 record_bytes=200 preallocate_bytes=... records=... secs=... appends_per_s=... fsyncs=... records_per_fsync=... latency_us_p50=... latency_us_p99=...
//! eventlog_fill records=... secs=... appends_per_s=...
//! eventlog_replay records=... secs=... records_per_s=... open_secs=... segments=...
//! ```
//!
//! Goals on the reference machine: `appends_per_s` ≥ 100,000 with 64 appenders and
//! `records_per_s` ≥ 1,000,000 for replay. The replay reads a log that was just
//! written, so it comes from the page cache: it measures the CPU cost of reading,
//! checking and copying records, not the disk.

use std::fs::OpenOptions;
use std::hint::black_box;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use lava_eventlog::{EventLog, Options as LogOptions, PREALLOCATE_BYTES_DEFAULT, Position};

/// Concurrent appenders, by default.
const APPENDERS_DEFAULT: usize = 64;
/// Seconds of appending, by default.
const SECS_DEFAULT: f64 = 5.0;
/// Payload bytes per record, by default (an mbatchd event is of this order).
const RECORD_BYTES_DEFAULT: usize = 200;
/// Records the replayed log holds at least, by default.
const REPLAY_RECORDS_MIN_DEFAULT: u64 = 1_000_000;
/// Write-plus-fdatasync pairs of the raw fsync probe.
const FSYNC_PROBE_COUNT: usize = 1000;
/// Log name used by the benchmark.
const LOG_NAME: &str = "bench.events";

struct BenchOptions {
    appenders: usize,
    secs: f64,
    record_bytes: usize,
    replay_records_min: u64,
    dir: Option<PathBuf>,
    keep: bool,
    preallocate_bytes: u64,
}

const USAGE: &str = "options: --appenders N, --secs S, --record-bytes B, --replay-records N, --dir D, \
    --preallocate-bytes B (0 disables), --keep";

fn parse(args: &[String]) -> anyhow::Result<BenchOptions> {
    let mut options = BenchOptions {
        appenders: APPENDERS_DEFAULT,
        secs: SECS_DEFAULT,
        record_bytes: RECORD_BYTES_DEFAULT,
        replay_records_min: REPLAY_RECORDS_MIN_DEFAULT,
        dir: None,
        keep: false,
        preallocate_bytes: PREALLOCATE_BYTES_DEFAULT,
    };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        if flag == "--keep" {
            options.keep = true;
            continue;
        }
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        let bad = || format!("{flag}: cannot parse '{value}'");
        match flag.as_str() {
            "--appenders" => options.appenders = value.parse().with_context(bad)?,
            "--secs" => options.secs = value.parse().with_context(bad)?,
            "--record-bytes" => options.record_bytes = value.parse().with_context(bad)?,
            "--replay-records" => options.replay_records_min = value.parse().with_context(bad)?,
            "--dir" => options.dir = Some(PathBuf::from(value)),
            "--preallocate-bytes" => options.preallocate_bytes = value.parse().with_context(bad)?,
            other => bail!("unknown option '{other}' ({USAGE})"),
        }
    }
    ensure!(options.appenders >= 1, "--appenders must be at least 1");
    ensure!(options.secs > 0.0 && options.secs.is_finite(), "--secs must be positive");
    Ok(options)
}

/// Where the benchmark's files go: `--dir`, else `./target` (the workspace's, on the
/// same disk as the checkout), else the system's temporary directory. A RAM-backed
/// directory would make fsync free and the figures meaningless.
fn base_dir(options: &BenchOptions) -> PathBuf {
    if let Some(dir) = &options.dir {
        return dir.clone();
    }
    let target = PathBuf::from("target");
    if target.is_dir() { target } else { std::env::temp_dir() }
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() - 1) as f64 * fraction).round() as usize;
    sorted[idx]
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ProbeMode {
    Append,
    Overwrite,
}

/// The disk's raw cost of making a small write durable: appended to the end of a file
/// (the file grows, so fdatasync also commits its size and new blocks), or written over
/// zeros written beforehand (what the log does with its preallocated space).
fn fsync_probe(dir: &std::path::Path, write_bytes: usize, mode: ProbeMode) -> anyhow::Result<()> {
    let path = dir.join(format!("fsync-probe-{write_bytes}"));
    let file = OpenOptions::new().create(true).truncate(true).write(true).open(&path)?;
    if mode == ProbeMode::Overwrite {
        (&file).write_all(&vec![0u8; write_bytes * FSYNC_PROBE_COUNT])?;
        file.sync_all()?;
    }
    let block = vec![0x5au8; write_bytes];
    let mut samples = Vec::with_capacity(FSYNC_PROBE_COUNT);
    let started = Instant::now();
    for write_idx in 0..FSYNC_PROBE_COUNT {
        let one = Instant::now();
        file.write_all_at(&block, (write_idx * write_bytes) as u64)?;
        file.sync_data()?;
        samples.push(one.elapsed());
    }
    let total = started.elapsed();
    drop(file);
    std::fs::remove_file(&path)?;
    samples.sort();
    println!(
        "eventlog_fsync_raw mode={} write_bytes={write_bytes} fsyncs={FSYNC_PROBE_COUNT} us_per_fsync_p50={:.1} us_per_fsync_mean={:.1}",
        match mode {
            ProbeMode::Append => "append",
            ProbeMode::Overwrite => "overwrite",
        },
        percentile(&samples, 0.5).as_secs_f64() * 1e6,
        total.as_secs_f64() * 1e6 / FSYNC_PROBE_COUNT as f64,
    );
    Ok(())
}

/// Durable appends from many threads for a fixed time.
fn append_phase(log: &Arc<EventLog>, options: &BenchOptions) -> anyhow::Result<()> {
    let barrier = Arc::new(Barrier::new(options.appenders + 1));
    let duration = Duration::from_secs_f64(options.secs);
    let threads: Vec<_> = (0..options.appenders)
        .map(|thread_idx| {
            let log = Arc::clone(log);
            let barrier = Arc::clone(&barrier);
            let mut record = vec![b'e'; options.record_bytes];
            std::thread::spawn(move || -> anyhow::Result<Vec<Duration>> {
                let mut latencies = Vec::new();
                barrier.wait();
                let started = Instant::now();
                let mut idx = 0u64;
                while started.elapsed() < duration {
                    // Make every record distinct, as real events are.
                    let tag = format!("{thread_idx}:{idx}:");
                    let tag_bytes = tag.len().min(record.len());
                    record[..tag_bytes].copy_from_slice(&tag.as_bytes()[..tag_bytes]);
                    let one = Instant::now();
                    let position = log.append(&record)?;
                    log.wait_durable(position)?;
                    latencies.push(one.elapsed());
                    idx += 1;
                }
                Ok(latencies)
            })
        })
        .collect();
    let fsyncs_before = log.stats().n_fsyncs;
    barrier.wait();
    let started = Instant::now();
    let mut latencies = Vec::new();
    for thread in threads {
        let thread_latencies =
            thread.join().map_err(|_| anyhow::anyhow!("an appender thread panicked"))??;
        latencies.extend(thread_latencies);
    }
    let secs = started.elapsed().as_secs_f64();
    let fsyncs = log.stats().n_fsyncs - fsyncs_before;
    latencies.sort();
    let records = latencies.len();
    println!(
        "eventlog_append appenders={} record_bytes={} preallocate_bytes={} records={records} secs={secs:.2} appends_per_s={:.0} fsyncs={fsyncs} records_per_fsync={:.1} latency_us_p50={:.0} latency_us_p99={:.0}",
        options.appenders,
        options.record_bytes,
        options.preallocate_bytes,
        records as f64 / secs,
        records as f64 / fsyncs.max(1) as f64,
        percentile(&latencies, 0.5).as_secs_f64() * 1e6,
        percentile(&latencies, 0.99).as_secs_f64() * 1e6,
    );
    Ok(())
}

/// Tops the log up to `records_min` records with buffered appends and one final sync.
fn fill_phase(log: &EventLog, options: &BenchOptions) -> anyhow::Result<()> {
    let next = log.stats().next_position.0;
    let missing = (options.replay_records_min + 1).saturating_sub(next);
    let record = vec![b'f'; options.record_bytes];
    let started = Instant::now();
    for _ in 0..missing {
        log.append(&record)?;
    }
    log.sync()?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "eventlog_fill records={missing} secs={secs:.2} appends_per_s={:.0}",
        missing as f64 / secs.max(1e-9)
    );
    Ok(())
}

/// Reopens the log as a restarting daemon would and replays it whole.
fn replay_phase(dir: &std::path::Path, expected_records: u64) -> anyhow::Result<()> {
    let started = Instant::now();
    let (log, report) = EventLog::open(dir, LogOptions::new(LOG_NAME))?;
    let open_secs = started.elapsed().as_secs_f64();
    ensure!(report.torn_tail.is_none(), "a cleanly closed log reported {:?}", report.torn_tail);
    let started = Instant::now();
    let replay = log.replay()?;
    let mut records = 0u64;
    let mut payload_bytes = 0usize;
    for record in replay.records {
        let (position, payload) = record?;
        records += 1;
        ensure!(position == Position(records), "replay out of order at {position}");
        payload_bytes += black_box(payload).len();
    }
    let secs = started.elapsed().as_secs_f64();
    ensure!(records == expected_records, "replayed {records} records, expected {expected_records}");
    black_box(payload_bytes);
    println!(
        "eventlog_replay records={records} secs={secs:.3} records_per_s={:.0} open_secs={open_secs:.3} segments={}",
        records as f64 / secs,
        report.n_segments,
    );
    Ok(())
}

/// Runs the benchmark with `args` (see [`USAGE`]).
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let base = base_dir(&options);
    let temp = tempfile::Builder::new()
        .prefix("lava-bench-eventlog-")
        .tempdir_in(&base)
        .with_context(|| format!("create a directory under {}", base.display()))?;
    let dir = temp.path().to_path_buf();
    eprintln!("eventlog bench: files in {}", dir.display());

    // One record, and a typical group-commit batch of 32 records.
    for write_bytes in [RECORD_BYTES_DEFAULT + 8, (RECORD_BYTES_DEFAULT + 8) * 32] {
        for mode in [ProbeMode::Append, ProbeMode::Overwrite] {
            fsync_probe(&dir, write_bytes, mode)?;
        }
    }

    let log_options =
        LogOptions { preallocate_bytes: options.preallocate_bytes, ..LogOptions::new(LOG_NAME) };
    let (log, _report) = EventLog::open(&dir, log_options)?;
    let log = Arc::new(log);
    append_phase(&log, &options)?;
    fill_phase(&log, &options)?;
    let total = log.stats().next_position.0 - 1;
    let log = Arc::into_inner(log).context("the appender threads have ended")?;
    log.close()?;
    replay_phase(&dir, total)?;

    if options.keep {
        let kept = temp.keep();
        eprintln!("eventlog bench: kept {}", kept.display());
    }
    Ok(())
}
