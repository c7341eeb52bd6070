//! The `xdr` benchmark: encode and decode of a realistic ~200-byte job submission.
//!
//! The job submission is encoded once and checked to round-trip; then each operation
//! is timed in batches of `--iters` operations, `--batches` times, and the median and
//! 99th-percentile batch give the nanoseconds per operation. It prints one line per
//! result: `xdr_decode` (owned strings, as the wire layer hands them to ll),
//! `xdr_decode_borrowed` (zero-copy `&str` fields) and `xdr_encode` (into a reused
//! buffer, as a connection's write buffer is). Goal: `xdr_decode` median ≤ 300 ns.

use std::hint::black_box;
use std::time::Instant;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

/// Operations per timed batch, by default.
const ITERS_PER_BATCH_DEFAULT: u32 = 20_000;
/// Timed batches, by default: odd, so the median is one batch.
const BATCHES_DEFAULT: u32 = 101;

/// A job submission as a client sends it to mbatchd (the shape of LavaLite's
/// `submitReq`, trimmed to its common fields).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct SubmitRequest {
    options: u32,
    options2: u32,
    n_processors_min: u32,
    n_processors_max: u32,
    priority: u32,
    submit_time: i64,
    begin_time: i64,
    mem_limit_kb: u64,
    job_name: String,
    queue: String,
    command: String,
    cwd: String,
    project: String,
    ask_hosts: Vec<String>,
    output_file: Option<String>,
}

/// The same message, decoded without copying its strings.
#[derive(Deserialize, Debug, PartialEq)]
struct SubmitRequestView<'a> {
    options: u32,
    options2: u32,
    n_processors_min: u32,
    n_processors_max: u32,
    priority: u32,
    submit_time: i64,
    begin_time: i64,
    mem_limit_kb: u64,
    job_name: &'a str,
    queue: &'a str,
    command: &'a str,
    cwd: &'a str,
    project: &'a str,
    ask_hosts: Vec<&'a str>,
    output_file: Option<&'a str>,
}

fn sample() -> SubmitRequest {
    SubmitRequest {
        options: 0x0000_0412,
        options2: 0x20,
        n_processors_min: 4,
        n_processors_max: 8,
        priority: 50,
        submit_time: 1_764_110_000,
        begin_time: 0,
        mem_limit_kb: 4 * 1024 * 1024,
        job_name: "sim-run-42".into(),
        queue: "normal".into(),
        command: "./simulate --steps 1000 input.dat".into(),
        cwd: "/home/alice/projects/sim".into(),
        project: "physics".into(),
        ask_hosts: vec!["node01".into(), "node02".into()],
        output_file: Some("out.%J".into()),
    }
}

struct Options {
    iters_per_batch: u32,
    batches: u32,
}

fn parse(args: &[String]) -> anyhow::Result<Options> {
    let mut options = Options { iters_per_batch: ITERS_PER_BATCH_DEFAULT, batches: BATCHES_DEFAULT };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let target = match flag.as_str() {
            "--iters" => &mut options.iters_per_batch,
            "--batches" => &mut options.batches,
            other => bail!("unknown option '{other}' (options: --iters N, --batches N)"),
        };
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        *target = value.parse().with_context(|| format!("{flag} {value}: not a count"))?;
        if *target == 0 {
            bail!("{flag} must be at least 1");
        }
    }
    Ok(options)
}

/// Times `op` and prints `NAME bytes=.. iters=.. batches=.. median_ns=.. p99_ns=..`.
fn time(name: &str, n_bytes: usize, options: &Options, mut op: impl FnMut()) {
    for _ in 0..options.iters_per_batch {
        op();
    }
    let mut per_op_ns: Vec<f64> = (0..options.batches)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..options.iters_per_batch {
                op();
            }
            start.elapsed().as_nanos() as f64 / f64::from(options.iters_per_batch)
        })
        .collect();
    per_op_ns.sort_by(f64::total_cmp);
    let at = |quantile: f64| per_op_ns[((per_op_ns.len() - 1) as f64 * quantile).round() as usize];
    println!(
        "{name} bytes={n_bytes} iters={} batches={} median_ns={:.1} p99_ns={:.1}",
        options.iters_per_batch,
        options.batches,
        at(0.5),
        at(0.99)
    );
}

/// Runs the benchmark with `args` (`--iters N`, `--batches N`).
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args)?;
    let limits = lava_xdr::Limits::default();
    let request = sample();
    let bytes = lava_xdr::to_bytes(&request)?;
    let decoded: SubmitRequest = lava_xdr::from_bytes(&bytes, &limits)?;
    if decoded != request {
        bail!("the job submission does not round-trip");
    }
    let view: SubmitRequestView<'_> = lava_xdr::from_bytes(&bytes, &limits)?;
    if view.command != request.command || view.ask_hosts.len() != request.ask_hosts.len() {
        bail!("the borrowed view does not match");
    }

    let mut failures = 0u64;
    time("xdr_decode", bytes.len(), &options, || {
        let result = lava_xdr::from_bytes::<SubmitRequest>(black_box(&bytes), &limits);
        failures += u64::from(black_box(result).is_err());
    });
    time("xdr_decode_borrowed", bytes.len(), &options, || {
        let result = lava_xdr::from_bytes::<SubmitRequestView<'_>>(black_box(&bytes), &limits);
        failures += u64::from(black_box(result).is_err());
    });
    let mut buffer = Vec::with_capacity(lava_xdr::ENCODE_BUFFER_INITIAL_BYTES);
    time("xdr_encode", bytes.len(), &options, || {
        buffer.clear();
        let result = lava_xdr::serialize_into(black_box(&request), &mut buffer);
        failures += u64::from(black_box(result).is_err());
    });
    if failures != 0 {
        bail!("{failures} timed operations failed");
    }
    Ok(())
}
