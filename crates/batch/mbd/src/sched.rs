//! Scheduling and timers: event-driven dispatch, the NEW_JOB snapshot, the
//! resends of unanswered NEW_JOB and JOB_SIGNAL, and cleaning finished jobs.
//!
//! Dispatch runs at the end of every step that added a pending job or freed
//! slots (submit, finish, refusal, resume, host registration) — never on a
//! timer, so a job starts as soon as the step that made room for it.
//! Candidates are the PEND jobs (not PSUSP) of active queues (`badmin qinact`)
//! by queue priority, highest first, then by (order key, job id) — arrival order
//! unless `btop`/`bbot` moved them (`control`); each goes to the first connected host (and not marked
//! unavailable by lim, not closed by `badmin hclose`) in `lsf.cluster` order
//! that its `-m` list and its queue's HOSTS allow, that has not refused it
//! since it last registered, and that has enough free slots. A job that fits
//! nowhere is skipped, not waited for (first fit: a wide job can be passed by
//! narrower ones; reservation is a later feature).

use std::cmp::Reverse;
use std::ops::Bound;

use lava_batch_ll::{HostName, JobRef, QueueName};
use lava_batch_wire as wire;

use crate::effect::ToSbd;
use crate::event::{Event, JobCleanRecord, JobStartRecord};
use crate::job::{Job, ms_to_s, project};
use crate::machine::{Mbd, Step};

impl Mbd {
    /// Dispatches every pending job that fits somewhere now.
    pub(crate) fn dispatch(&mut self, step: &mut Step) {
        let mut free: Vec<(HostName, u32)> = Vec::new();
        for host in &self.config.hosts {
            if let Some(link) = self
                .links
                .hosts
                .get(&host.name)
                .filter(|link| link.connected && !self.links.unavailable.contains(&host.name))
                .filter(|_| !self.store.control.closed_hosts.contains(&host.name))
            {
                let used = self.store.index.slots_used.get(&host.name).copied().unwrap_or(0);
                free.push((host.name.clone(), self.capacity(&host.name, link).saturating_sub(used)));
            }
        }
        let mut n_free: u64 = free.iter().map(|(_, n)| u64::from(*n)).sum();
        if n_free == 0 {
            return;
        }
        // Priority levels, highest first; the jobs of one level in id order, merged over
        // its queues. A job whose queue left the configuration is under no level: it
        // waits until its queue returns.
        let mut levels: Vec<u32> = self.config.queues.iter().map(|queue| queue.priority).collect();
        levels.sort_unstable_by_key(|priority| Reverse(*priority));
        levels.dedup();
        for priority in levels {
            let queues: Vec<QueueName> = self
                .config
                .queues
                .iter()
                .filter(|queue| {
                    queue.priority == priority
                        && self.store.index.pending.contains_key(&queue.name)
                        && !self.store.control.inactive_queues.contains(&queue.name)
                })
                .map(|queue| queue.name.clone())
                .collect();
            let mut after = None;
            while let Some((key, id)) = self.next_pending(&queues, after) {
                after = Some((key, id));
                if self.try_dispatch(step, id, &mut free, &mut n_free) && n_free == 0 {
                    return;
                }
            }
        }
    }

    /// The first pending (order key, job) after `after` (from the start for `None`) in
    /// any of `queues` (arrival order unless `btop`/`bbot` moved jobs:
    /// `Job::dispatch_key`; an array's elements by index). Dispatching takes a job out
    /// of the pending index, so the walk looks the next one up each time.
    fn next_pending(&self, queues: &[QueueName], after: Option<(i64, JobRef)>) -> Option<(i64, JobRef)> {
        let above = match after {
            Some(after) => (Bound::Excluded(after), Bound::Unbounded),
            None => (Bound::Unbounded, Bound::Unbounded),
        };
        queues
            .iter()
            .filter_map(|queue| self.store.index.pending.get(queue)?.range(above).next())
            .min()
            .copied()
    }

    /// Dispatches pending job `id` to the first host in `free` where it fits and may
    /// run, if any; says whether it did.
    fn try_dispatch(
        &mut self,
        step: &mut Step,
        id: JobRef,
        free: &mut [(HostName, u32)],
        n_free: &mut u64,
    ) -> bool {
        let job = self.store.live_job(id);
        if self.held_back(job).is_some() {
            return false;
        }
        let n_slots = job.n_slots();
        let Some(host_idx) = free.iter().position(|(host, n)| *n >= n_slots && self.may_run_on(job, host))
        else {
            return false;
        };
        let host = free[host_idx].0.clone();
        free[host_idx].1 -= n_slots;
        *n_free -= u64::from(n_slots);
        let record = JobStartRecord {
            job: job.job,
            exec_hosts: vec![host.clone(); n_slots as usize],
            time_ms: step.now_ms,
        };
        self.record(step, Event::JobStart(record));
        self.send_new_job(step, id, &host);
        true
    }

    /// Whether `job` may be dispatched to `host` (free slots aside).
    fn may_run_on(&self, job: &Job, host: &HostName) -> bool {
        let asked = job.spec.hosts();
        let queue_hosts = self.config.queue(&job.queue).map(|q| q.hosts.as_slice()).unwrap_or_default();
        (asked.is_empty() || asked.contains(host))
            && (queue_hosts.is_empty() || queue_hosts.contains(host))
            && !self.links.avoid.get(&job.job).is_some_and(|avoided| avoided.contains(host))
    }

    /// Sends (or resends) NEW_JOB for started job `id` and arms its resend.
    fn send_new_job(&mut self, step: &mut Step, id: JobRef, host: &HostName) {
        let specs = self.job_specs(self.store.live_job(id));
        self.send(step, host, ToSbd::NewJob(Box::new(specs)));
        self.links.new_job_sent_ms.insert(id, step.now_ms);
    }

    /// The dispatch snapshot of a started job, rebuilt identically from the
    /// durable state on every resend.
    pub(crate) fn job_specs(&self, job: &Job) -> wire::JobSpecs {
        let request = job.spec.request();
        wire::JobSpecs {
            job: job.job.to_wire(),
            submit_time: ms_to_s(job.submit_time_ms),
            dispatch_time: job.start_time_ms.map_or(0, ms_to_s),
            dispatch_seq: job.dispatch_seq,
            user_id: job.user_id,
            group_id: job.group_id,
            user_name: job.user.to_string(),
            queue: job.queue.to_string(),
            job_name: job.job_name(),
            command: request.command.clone(),
            from_host: job.from_host.to_string(),
            cwd: request.cwd.clone(),
            sub_home_dir: request.home_dir.clone(),
            input_file: request.input_file.clone(),
            output_file: request.output_file.clone(),
            error_file: request.error_file.clone(),
            file_flags: request.file_flags,
            n_slots: job.n_slots(),
            exec_hosts: job.exec_hosts.iter().map(ToString::to_string).collect(),
            umask: request.umask,
            run_limit_s: request.run_limit_s,
            mem_limit_kb: request.mem_limit_kb,
            terminate_interval_s: self.config.job_terminate_interval_s,
            project: project(request),
            login_shell: request.login_shell.clone(),
            pre_exec: request.pre_exec.clone(),
            env: job.env.as_ref().clone(),
        }
    }

    /// Sends JOB_SIGNAL for each unanswered intent of accepted job `id`.
    pub(crate) fn send_signals(&mut self, step: &mut Step, id: JobRef, due: impl Fn(Option<u64>) -> bool) {
        let job = self.store.live_job(id);
        let Some(host) = job.run_host().filter(|_| job.accepted.is_some()).cloned() else {
            return;
        };
        let mut sent = Vec::new();
        for pending in &job.pending_signals {
            if due(self.links.signal_sent_ms.get(&(id, pending.signal_seq)).copied()) {
                let msg = wire::JobSignal {
                    job: job.job.to_wire(),
                    signal_seq: pending.signal_seq,
                    action: pending.action,
                };
                sent.push((pending.signal_seq, msg));
            }
        }
        for (seq, msg) in sent {
            self.send(step, &host, ToSbd::JobSignal(msg));
            self.links.signal_sent_ms.insert((id, seq), step.now_ms);
        }
    }

    /// After `host` registered: everything it has not answered, at once.
    pub(crate) fn resend_to_host(&mut self, step: &mut Step, host: &HostName) {
        let on_host = |mbd: &Mbd, id: &JobRef| mbd.store.live_job(*id).run_host() == Some(host);
        let new_jobs: Vec<JobRef> =
            self.store.index.unaccepted.iter().filter(|id| on_host(self, id)).copied().collect();
        for id in new_jobs {
            self.send_new_job(step, id, host);
        }
        let signaled: Vec<JobRef> =
            self.store.index.signaling.iter().filter(|id| on_host(self, id)).copied().collect();
        for id in signaled {
            self.send_signals(step, id, |_| true);
        }
    }

    /// Time passed: resend what is overdue to connected hosts, clean old jobs.
    pub(crate) fn tick(&mut self, step: &mut Step) {
        let now_ms = step.now_ms;
        let due = |sent: Option<u64>| {
            sent.is_none_or(|t| now_ms >= t.saturating_add(self.config.resend_interval_ms))
        };
        let new_jobs: Vec<(JobRef, HostName)> = self
            .store
            .index
            .unaccepted
            .iter()
            .filter_map(|id| Some((*id, self.store.live_job(*id).run_host()?.clone())))
            .filter(|(id, host)| self.is_connected(host) && due(self.links.new_job_sent_ms.get(id).copied()))
            .collect();
        for (id, host) in new_jobs {
            self.send_new_job(step, id, &host);
        }
        let resend_interval_ms = self.config.resend_interval_ms;
        let signaled: Vec<JobRef> = self
            .store
            .index
            .signaling
            .iter()
            .filter(|id| self.store.live_job(**id).run_host().is_some_and(|host| self.is_connected(host)))
            .copied()
            .collect();
        for id in signaled {
            self.send_signals(step, id, |sent| {
                sent.is_none_or(|t| now_ms >= t.saturating_add(resend_interval_ms))
            });
        }
        let clean_period_ms = self.config.clean_period_ms;
        let cleanable: Vec<JobRef> = self
            .store
            .index
            .finished
            .iter()
            .take_while(|(finish_ms, _)| finish_ms.saturating_add(clean_period_ms) <= now_ms)
            .map(|(_, id)| *id)
            .collect();
        for id in cleanable {
            let job = self.store.finished(id).expect("the finished index lists finished jobs").job_ref();
            self.record(step, Event::JobClean(JobCleanRecord { job, time_ms: now_ms }));
        }
    }
}
