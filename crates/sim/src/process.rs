//! Simulated shepherds and job processes.
//!
//! A Launch starts a shepherd, which writes its pid file and executes the job
//! at once (the launch "reached exec", which the oracle counts), unless the
//! launch fails before any process exists, or its pre-execution command fails
//! (the job never runs and goes back to PEND). The process then runs for a random
//! virtual time and exits 0 or non-zero. It survives sbatchd crashes (as the
//! real shepherd does); its exit is reported to sbatchd when sbatchd runs, or
//! found by the adoption of the next start.
//!
//! Signals follow the kernel: SIGSTOP stops the clock of the process, SIGCONT
//! restarts it; SIGINT, SIGTERM and SIGXCPU end it unless it ignores them (each
//! process draws whether it does), and stay pending while it is stopped; SIGKILL
//! always ends it, stopped or not. A signal to an exited process is ESRCH,
//! which the shell ignores.
//!
//! A process may go over its limits at a moment of its run (`usage_over_p`): sbatchd
//! is then given a measurement over every limit ([`lava_sbd::Input::Usage`]), as the
//! real sbatchd's once-a-second reading of `/proc` would find it, and starts the kill
//! of the job's first limit.

use lava_batch_ll::JobRef;
use lava_sbd::signal::{SIGCONT, SIGINT, SIGKILL, SIGSTOP, SIGTERM, SIGXCPU};
use lava_sbd::{Input, RunSpec, UsageSample};

use crate::world::{Ev, World};

/// What a process is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcState {
    /// Running; it exits on its own at `exit_at_ms`.
    Running { exit_at_ms: u64 },
    /// Stopped with `remaining_ms` of work left.
    Stopped { remaining_ms: u64 },
    /// Gone, with its wait status, recorded by the shepherd.
    Exited { wait_status: i32, end_ms: u64 },
}

/// One job's shepherd and process.
#[derive(Clone, Debug)]
pub struct Proc {
    /// Pid and process group.
    pub pid: i32,
    /// When it executed the job.
    pub exec_time_ms: u64,
    /// Its state.
    pub state: ProcState,
    /// Bumped whenever the scheduled natural exit changes, to void stale events.
    pub generation: u64,
    /// The wait status of its natural exit.
    pub natural_status: i32,
    /// It ignores SIGINT.
    pub ignores_sigint: bool,
    /// It ignores SIGTERM.
    pub ignores_sigterm: bool,
    /// It ignores SIGXCPU.
    pub ignores_sigxcpu: bool,
    /// A fatal signal that arrived while it was stopped.
    pub pending_fatal: Option<i32>,
    /// It runs until a signal ends it (a job long enough that a kill must
    /// reach it: a lost kill then shows as a run that never converges).
    pub immortal: bool,
}

impl Proc {
    /// Whether the process is gone.
    pub fn has_exited(&self) -> bool {
        matches!(self.state, ProcState::Exited { .. })
    }

    /// Its wait status and end time, once gone.
    pub fn exit(&self) -> Option<(i32, u64)> {
        match self.state {
            ProcState::Exited { wait_status, end_ms } => Some((wait_status, end_ms)),
            _ => None,
        }
    }
}

impl World {
    /// Carries out a Launch on `host`.
    pub fn launch(&mut self, host: usize, job: JobRef, run_spec: &RunSpec) {
        if run_spec.exec_hosts.first() != Some(&self.hosts[host]) {
            self.violation(format!(
                "job {job}: launched on {} but dispatched to {:?}",
                self.hosts[host], run_spec.exec_hosts
            ));
        }
        if !self.healing && self.rng.chance(self.params.spawn_fail_p) {
            self.trace.line(self.now_ms, || {
                format!("job {job}: the shepherd could not start on {}", self.hosts[host])
            });
            let message = "fork: Resource temporarily unavailable".to_owned();
            self.sbd_input(host, Input::SpawnFailed { job, message });
            return;
        }
        if !self.healing && self.rng.chance(self.params.pre_exec_fail_p) {
            // The shepherd ran the pre-execution commands before any job process: one
            // failed, so the job never ran and goes back to PEND (any exit but 99, which
            // would end it).
            let exit = self.rng.range(1, 3) as u8;
            self.trace.line(self.now_ms, || {
                format!("job {job}: its pre-execution command exits {exit} on {}", self.hosts[host])
            });
            self.stats.n_pre_exec_failures += 1;
            self.sbd_input(host, Input::PreExecFailed { job, exit });
            return;
        }
        self.oracle_check_launch(host, job);
        self.oracle.reply_acked.retain(|&(h, j, _)| (h, j) != (host, job));
        self.next_pid += 1;
        let pid = self.next_pid;
        let run_ms = self.rng.range(200, self.params.job_run_max_ms);
        let natural_status = if self.rng.chance(0.7) { 0 } else { (self.rng.range(1, 3) as i32) << 8 };
        let proc = Proc {
            pid,
            exec_time_ms: self.now_ms,
            state: ProcState::Running { exit_at_ms: self.now_ms + run_ms },
            generation: 0,
            natural_status,
            ignores_sigint: self.rng.chance(0.3),
            ignores_sigterm: self.rng.chance(0.2),
            ignores_sigxcpu: self.rng.chance(0.3),
            pending_fatal: None,
            immortal: self.oracle.kill_intents.contains(&job) && self.rng.chance(0.5),
        };
        if self.rng.chance(self.params.usage_over_p) {
            let over_in_ms = self.rng.range(0, run_ms);
            self.at(over_in_ms, Ev::UsageOver { host, job, pid });
        }
        self.trace.line(self.now_ms, || {
            format!("job {job}: process {pid} runs on {} for {run_ms} ms", self.hosts[host])
        });
        self.procs.insert((host, job), proc);
        self.oracle_process_started(host, job, pid);
        self.stats.n_jobs_ran += 1;
        self.at(run_ms, Ev::ProcExit { host, job, generation: 0 });
        self.sbd_input(host, Input::Spawned { job, pid, pgid: pid, exec_time_ms: self.now_ms });
    }

    /// Carries out a Kill (`killpg`) on `host`.
    pub fn kill(&mut self, host: usize, job: JobRef, pgid: i32, signal: i32) {
        let now_ms = self.now_ms;
        let Some(proc) = self.procs.get_mut(&(host, job)) else {
            self.violation(format!("job {job}: Kill on {} of a job that has no shepherd", self.hosts[host]));
        };
        if proc.pid != pgid {
            let pid = proc.pid;
            self.violation(format!("job {job}: Kill of process group {pgid}, the job's is {pid}"));
        }
        let fatal = match signal {
            SIGKILL => true,
            SIGINT => !proc.ignores_sigint,
            SIGTERM => !proc.ignores_sigterm,
            SIGXCPU => !proc.ignores_sigxcpu,
            _ => false,
        };
        let mut resume = None;
        let ends = match (&proc.state, signal) {
            (ProcState::Exited { .. }, _) => None, // ESRCH
            (_, SIGKILL) => Some(signal),
            (ProcState::Running { exit_at_ms }, SIGSTOP) => {
                proc.state = ProcState::Stopped { remaining_ms: exit_at_ms.saturating_sub(now_ms) };
                proc.generation += 1;
                None
            }
            (ProcState::Stopped { remaining_ms }, SIGCONT) => {
                let remaining_ms = *remaining_ms;
                proc.generation += 1;
                match proc.pending_fatal.take() {
                    Some(pending) => Some(pending),
                    None => {
                        proc.state = ProcState::Running { exit_at_ms: now_ms + remaining_ms };
                        resume = Some((remaining_ms, proc.generation));
                        None
                    }
                }
            }
            (ProcState::Stopped { .. }, _) if fatal => {
                proc.pending_fatal = Some(signal);
                None
            }
            (ProcState::Running { .. }, _) if fatal => Some(signal),
            _ => None,
        };
        self.trace.line(now_ms, || format!("job {job}: signal {signal} on {}", self.hosts[host]));
        if let Some((remaining_ms, generation)) = resume {
            self.at(remaining_ms, Ev::ProcExit { host, job, generation });
        }
        if let Some(signal) = ends {
            self.proc_end(host, job, signal);
        }
    }

    /// Process `pid` of the job goes over every limit, if it still runs: sbatchd, if up,
    /// measures it (a down one measures it again once up, which this leaves out).
    pub fn usage_over(&mut self, host: usize, job: JobRef, pid: i32) {
        let Some(proc) = self.procs.get(&(host, job)).filter(|proc| proc.pid == pid && !proc.has_exited())
        else {
            return;
        };
        let over = UsageSample {
            rss_kb: u64::MAX,
            vm_kb: u64::MAX,
            cpu_ms: u64::MAX,
            processes: u32::MAX,
            threads: u32::MAX,
        };
        let pid = proc.pid;
        self.trace.line(self.now_ms, || format!("job {job}: process {pid} is over every limit"));
        self.stats.n_usage_over += 1;
        self.sbd_input(host, Input::Usage { job, usage: over });
    }

    /// A process's natural exit, if the event is still current.
    pub fn proc_natural_exit(&mut self, host: usize, job: JobRef, generation: u64) {
        let Some(proc) = self.procs.get(&(host, job)) else { return };
        if proc.generation != generation || proc.immortal || !matches!(proc.state, ProcState::Running { .. })
        {
            return;
        }
        let status = proc.natural_status;
        self.proc_end(host, job, status);
    }

    /// The process ends with `wait_status`; the shepherd records it and
    /// tells sbatchd if it runs.
    fn proc_end(&mut self, host: usize, job: JobRef, wait_status: i32) {
        let now_ms = self.now_ms;
        let proc = self.procs.get_mut(&(host, job)).expect("a process that ends exists");
        proc.state = ProcState::Exited { wait_status, end_ms: now_ms };
        proc.generation += 1;
        let pid = proc.pid;
        self.trace
            .line(now_ms, || format!("job {job}: process {pid} exits with wait status {wait_status:#x}"));
        self.oracle_process_exited(job, pid, wait_status);
        if let Some(report) = self.exit_report(host, job) {
            self.sbd_input(host, report);
        }
    }
}
