//! The shape of one run, drawn from its seed ("swarm testing"): cluster size,
//! workload, and how hard each fault hits. Drawing the intensities per seed,
//! instead of fixing one mix, lets some seeds stress one fault alone (only
//! mbd crashes, only partitions) and others everything at once, which finds
//! more bugs than any single average mix.

use crate::rng::Rng;

/// Upper bound on execution hosts in one run.
pub const HOSTS_MAX: usize = 4;
/// Upper bound on planned submissions in one run.
pub const JOBS_MAX: usize = 14;

/// Fault intensities and workload of one run; a pure function of the seed.
#[derive(Clone, Debug)]
pub struct Params {
    /// Execution hosts (one sbatchd each).
    pub n_hosts: usize,
    /// Job slots (MXJ) of each host, `None` for the CPUs it registers with.
    pub host_slots: Vec<Option<u32>>,
    /// CPUs each sbatchd registers with.
    pub host_cpus: Vec<u32>,
    /// Commands issuing requests, one user each (alternating alice and bob).
    pub n_clients: usize,
    /// Submissions over all clients.
    pub n_jobs: usize,
    /// Signal requests (bstop, bresume, bkill) over all clients.
    pub n_signals: usize,
    /// How long faults are injected, ms; afterwards the cluster heals.
    pub fault_phase_ms: u64,
    /// Probability that a message in flight is lost.
    pub drop_p: f64,
    /// Probability that a message is delivered twice.
    pub duplicate_p: f64,
    /// Largest one-way network delay, ms (each message draws 1..=this).
    pub delay_max_ms: u64,
    /// Probability that a message takes up to ten times the largest delay.
    pub slow_p: f64,
    /// Mean time between mbatchd crashes, ms; `None`: mbatchd never crashes.
    pub mbd_crash_mean_ms: Option<u64>,
    /// Mean time between sbatchd crashes (over all hosts), ms.
    pub sbd_crash_mean_ms: Option<u64>,
    /// Mean time between partitions of one host's link, ms.
    pub partition_mean_ms: Option<u64>,
    /// Probability that an sbatchd crashes right before carrying out an effect.
    pub crash_between_effects_p: f64,
    /// Probability that a crashed mbatchd's page cache wrote some of the
    /// unsynced tail of the log anyway (a prefix of it survives).
    pub torn_tail_p: f64,
    /// Largest delay before mbatchd's group commit fsyncs, ms.
    pub fsync_delay_max_ms: u64,
    /// Probability that mbatchd writes a snapshot at a quiescent point.
    pub snapshot_p: f64,
    /// Largest time an sbatchd record fsync takes, ms.
    pub record_fsync_max_ms: u64,
    /// Probability that the user lookup of a NEW_JOB fails on the host.
    pub lookup_fail_p: f64,
    /// Probability that a Launch cannot start the shepherd.
    pub spawn_fail_p: f64,
    /// Probability that a Launch's pre-execution command fails (the job goes back to PEND).
    pub pre_exec_fail_p: f64,
    /// Probability that a job's process goes over every limit at some moment of its run:
    /// sbatchd's next measurement (`Input::Usage`) then starts the kill of the limit the
    /// job has first (`-M`, the `short` queue's CPULIMIT, the `night` queue's
    /// PROCESSLIMIT); a job without a limit goes on.
    pub usage_over_p: f64,
    /// Longest run of a job's process, ms.
    pub job_run_max_ms: u64,
    /// mbatchd's CLEAN_PERIOD, ms.
    pub clean_period_ms: u64,
    /// sbatchd's tombstone retention, ms.
    pub tombstone_retention_ms: u64,
    /// JOB_TERMINATE_INTERVAL, s.
    pub terminate_interval_s: u32,
    /// How long a command waits for an answer before it retries, ms.
    pub client_retry_ms: u64,
    /// Mean time between windows in which mbatchd's disk is full (None: never): the
    /// logic is told (`Input::DiskFull`, new submissions refused) and no group commit
    /// succeeds until the window ends (lava-shell's group commit retries every second).
    pub disk_full_mean_ms: Option<u64>,
}

impl Params {
    /// The parameters of the run of `rng`'s seed.
    pub fn draw(rng: &mut Rng) -> Params {
        let n_hosts = rng.range(1, HOSTS_MAX as u64) as usize;
        let host_slots = (0..n_hosts).map(|_| rng.chance(0.7).then(|| rng.range(2, 4) as u32)).collect();
        let host_cpus = (0..n_hosts).map(|_| rng.range(2, 4) as u32).collect();
        let n_jobs = rng.range(3, JOBS_MAX as u64) as usize;
        let sometimes = |rng: &mut Rng, p: f64, mean_low: u64, mean_high: u64| {
            rng.chance(p).then(|| rng.range(mean_low, mean_high))
        };
        let level = |rng: &mut Rng, levels: &[f64]| *rng.pick(levels);
        let mut params = Params {
            n_hosts,
            host_slots,
            host_cpus,
            n_clients: rng.range(1, 2) as usize,
            n_jobs,
            n_signals: rng.range(0, n_jobs as u64) as usize,
            fault_phase_ms: rng.range(20_000, 60_000),
            drop_p: level(rng, &[0.0, 0.0, 0.02, 0.1, 0.3]),
            duplicate_p: level(rng, &[0.0, 0.0, 0.02, 0.1, 0.3]),
            delay_max_ms: *rng.pick(&[2, 20, 200, 1_500]),
            slow_p: level(rng, &[0.0, 0.01, 0.05]),
            mbd_crash_mean_ms: sometimes(rng, 0.5, 5_000, 30_000),
            sbd_crash_mean_ms: sometimes(rng, 0.5, 3_000, 30_000),
            partition_mean_ms: sometimes(rng, 0.5, 3_000, 30_000),
            crash_between_effects_p: level(rng, &[0.0, 0.0, 0.005, 0.02]),
            torn_tail_p: level(rng, &[0.0, 0.5, 1.0]),
            fsync_delay_max_ms: rng.range(0, 50),
            snapshot_p: level(rng, &[0.0, 0.05, 0.3]),
            record_fsync_max_ms: rng.range(0, 10),
            lookup_fail_p: level(rng, &[0.0, 0.0, 0.05, 0.2]),
            spawn_fail_p: level(rng, &[0.0, 0.0, 0.05, 0.2]),
            job_run_max_ms: rng.range(1_000, 20_000),
            clean_period_ms: *rng.pick(&[10_000, 60_000, 3_600_000]),
            tombstone_retention_ms: *rng.pick(&[5_000, 60_000, 24 * 3_600_000]),
            terminate_interval_s: rng.range(1, 3) as u32,
            client_retry_ms: rng.range(500, 5_000),
            disk_full_mean_ms: sometimes(rng, 0.3, 3_000, 30_000),
            pre_exec_fail_p: level(rng, &[0.0, 0.05, 0.2]),
            usage_over_p: level(rng, &[0.0, 0.1, 0.4]),
        };
        // A command waits at least a round trip of the network's longest delays for its
        // answer, as the real ones do (seconds): one that gave up sooner would almost never
        // hear an answer, and its run would crawl (seed 103,174 of the replicated runs: a
        // 524 ms wait against frames delayed up to 1.5 s each way took 20 to 40 s a command
        // and did not finish within the check's 15 minutes).
        params.client_retry_ms = params.client_retry_ms.max(2 * params.delay_max_ms + 1);
        params
    }
}
