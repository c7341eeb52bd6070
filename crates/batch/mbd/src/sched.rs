//! Scheduling and timers: dispatch turns, the NEW_JOB snapshot, the resends
//! of unanswered NEW_JOB and JOB_SIGNAL, and cleaning finished jobs.
//!
//! A dispatch turn runs at the end of every step that added a pending job or
//! freed slots (submit, finish, refusal, resume, host registration,
//! reconfiguration), so a job starts as soon as the step that made room for
//! it (skipped when no slot is free anywhere) — or, with
//! `MbdConfig::deferred_dispatch`, at the next `Input::Dispatch`, which the shell
//! steps once for a batch of such steps; and on a tick once
//! `MBD_SLEEP_TIME` passed since the last turn (lim's loads change without a
//! step of ours) or a job's begin time (`-b`) came: this periodic turn always
//! runs and refreshes the pending reasons of every job.
//! Jobs of active queues (`badmin qinact`) are offered by queue priority,
//! highest first, then by (order key, job id) — arrival order unless
//! `btop`/`bbot` moved them — or by fairshare within a FAIRSHARE queue; hosts
//! closed by `badmin hclose` take none; [`crate::placement`] decides each one
//! (limits, `-R`, exclusivity) and keeps the reasons of those that wait. A job
//! that fits nowhere is passed over, not waited for (first fit: a wide job can
//! be passed by narrower ones; reservation is a later feature). The turn's
//! JOB_STARTs are logged in decision order after the whole turn is decided.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use lava_batch_ll::{HostName, JobRef};
use lava_batch_wire as wire;

use crate::config::QueueLimit;
use crate::effect::ToSbd;
use crate::event::{Event, JobCleanRecord, JobStartRecord};
use crate::job::{Job, ms_to_s, project};
use crate::machine::{Mbd, Step};
use crate::placement::{Decision, Pass, fairshare_walk};

impl Mbd {
    /// One dispatch turn: decides every pending job ([`Pass`]), logs JOB_START
    /// and sends NEW_JOB for those that start, and keeps why the others wait.
    /// A turn a step started (not the periodic one) is skipped when no slot is
    /// free anywhere: it could start nothing, and its reasons can wait for the
    /// periodic turn, so that a submission costs no walk over a long backlog.
    pub(crate) fn dispatch(&mut self, step: &mut Step) {
        if !step.full_turn && !self.any_free_slot() {
            return;
        }
        let mut reqs = std::mem::take(&mut self.links.resreqs);
        reqs.trim();
        let reasons = std::mem::take(&mut self.links.reasons);
        let mut pass = Pass::new(self, step.now_ms, &mut reqs, reasons);
        let stopped = self.walk_pending(&mut pass).is_none();
        let turn_end = pass.end(stopped);
        let Pass { decisions, reasons, next_begin_ms, .. } = pass;
        self.links.turn_end = turn_end;
        self.links.resreqs = reqs;
        self.links.reasons = reasons;
        self.links.next_begin_ms = next_begin_ms;
        self.links.last_pass_ms = Some(step.now_ms);
        for decision in decisions {
            self.start(step, decision);
        }
    }

    /// Whether some connected, available host has a free slot.
    fn any_free_slot(&self) -> bool {
        self.config.hosts.iter().any(|host| {
            self.links.hosts.get(&host.name).is_some_and(|link| {
                let used = self.store.index.slots_used.get(&host.name).copied().unwrap_or(0);
                link.connected
                    && self.host_available(&host.name)
                    && !self.store.control.closed_hosts.contains(&host.name)
                    && self.capacity(&host.name, link) > used
            })
        })
    }

    /// Offers the pending jobs to `pass` in dispatch order: priority levels,
    /// highest first, of the active queues (`badmin qinact` stops a queue's
    /// dispatch); within a level by (order key, job) over its queues — arrival
    /// order unless `btop`/`bbot` moved jobs — or, when one of
    /// them has FAIRSHARE, queue by queue in `lsb.queues` order, each by its
    /// own policy. A job whose queue left the configuration is under no level:
    /// it waits until its queue returns.
    /// `None` when it stopped because no slot is free anywhere any more (the jobs not
    /// reached get their reasons when asked: `Mbd::turn_end_reason`).
    fn walk_pending<'a>(&'a self, pass: &mut Pass<'a>) -> Option<()> {
        let queues = &self.config.queues;
        let mut levels: Vec<u32> = queues.iter().map(|queue| queue.priority).collect();
        levels.sort_unstable_by_key(|priority| Reverse(*priority));
        levels.dedup();
        let consider = |pass: &mut Pass<'a>, (_, id): (i64, JobRef), idx: usize| {
            if pass.cluster_full() {
                return None;
            }
            pass.consider(self.store.live_job(id), idx);
            Some(())
        };
        for priority in levels {
            let level: Vec<(usize, &BTreeSet<(i64, JobRef)>)> = queues
                .iter()
                .enumerate()
                .filter(|(_, queue)| {
                    queue.priority == priority && !self.store.control.inactive_queues.contains(&queue.name)
                })
                .filter_map(|(idx, queue)| Some((idx, self.store.index.pending.get(&queue.name)?)))
                .collect();
            if level.iter().any(|(idx, _)| queues[*idx].fairshare.is_some()) {
                for (idx, ids) in level {
                    if queues[idx].fairshare.is_some() {
                        fairshare_walk(pass, idx, ids);
                    } else {
                        for id in ids {
                            consider(pass, *id, idx)?;
                        }
                    }
                }
            } else if let [(idx, ids)] = level[..] {
                for id in ids {
                    consider(pass, *id, idx)?;
                }
            } else {
                let mut merged: Vec<((i64, JobRef), usize)> =
                    level.iter().flat_map(|(idx, ids)| ids.iter().map(|id| (*id, *idx))).collect();
                merged.sort_unstable();
                for (id, idx) in merged {
                    consider(pass, id, idx)?;
                }
            }
            if pass.cluster_full() {
                return None;
            }
        }
        Some(())
    }

    /// Logs the start of a decided job and sends it to its first host.
    fn start(&mut self, step: &mut Step, decision: Decision) {
        let job = self.store.live_job(decision.id);
        let mut exec_hosts = Vec::with_capacity(job.n_slots() as usize);
        for (host_idx, n_slots) in &decision.hosts {
            let host = &self.config.hosts[*host_idx].name;
            exec_hosts.extend(std::iter::repeat_n(host.clone(), *n_slots as usize));
        }
        if self.config.job_accept_interval > 0 {
            for (host_idx, _) in &decision.hosts {
                self.links.last_start_ms.insert(self.config.hosts[*host_idx].name.clone(), step.now_ms);
            }
        }
        let first = exec_hosts[0].clone();
        let record = JobStartRecord { job: job.job, exec_hosts, time_ms: step.now_ms };
        self.record(step, Event::JobStart(record));
        self.send_new_job(step, decision.id, &first);
    }

    /// Why PEND job `job` did not start in the last dispatch turn, if that turn
    /// considered it (a job submitted since shows LSF's "New job is waiting for
    /// scheduling"): computed, never logged.
    pub(crate) fn pending_reason_shown(&self, job: &Job) -> Option<String> {
        if job.status != lava_batch_ll::JobStatus::Pend
            || !job.reason.is_empty()
            || self.held_back(job).is_some()
        {
            // A logged reason (a host's refusal), a dependency or an array limit says
            // more than the turn's summary.
            return None;
        }
        match self.links.reasons.get(&job.job) {
            Some(reason) => Some(reason.render()),
            None => self.turn_end_reason(job).map(|reason| reason.render()),
        }
    }

    /// Whether a dispatch turn is due on a tick: `MBD_SLEEP_TIME` passed since
    /// the last one (lim's loads changed meanwhile), or a begin time came.
    fn dispatch_due(&self, now_ms: u64) -> bool {
        let sleep_done =
            self.links.last_pass_ms.is_none_or(|t| now_ms >= t.saturating_add(self.config.mbd_sleep_time_ms));
        sleep_done || self.links.next_begin_ms.is_some_and(|t| now_ms >= t)
    }

    /// Sends (or resends) NEW_JOB for started job `id` and arms its resend.
    pub(crate) fn send_new_job(&mut self, step: &mut Step, id: JobRef, host: &HostName) {
        let specs = self.job_specs(self.store.live_job(id));
        self.send(step, host, ToSbd::NewJob(Box::new(specs)));
        self.links.new_job_sent_ms.insert(id, step.now_ms);
    }

    /// The dispatch snapshot of a started job, rebuilt identically from the
    /// durable state on every resend.
    /// A job without `-W` or `-M` gets its queue's default (else maximum) `RUNLIMIT`
    /// and `MEMLIMIT`, and its queue's other resource limits and `NICE`, as the
    /// configuration in force says.
    pub(crate) fn job_specs(&self, job: &Job) -> wire::JobSpecs {
        let request = job.spec.request();
        let queue = self.config.queue(&job.queue);
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
            run_limit_s: QueueLimit::effective(
                queue.and_then(|q| q.run_limit_s.as_ref()),
                request.run_limit_s,
            ),
            mem_limit_kb: QueueLimit::effective(
                queue.and_then(|q| q.mem_limit_kb.as_ref()),
                request.mem_limit_kb,
            ),
            terminate_interval_s: self.config.job_terminate_interval_s,
            project: project(request),
            login_shell: request.login_shell.clone(),
            pre_exec: request.pre_exec.clone(),
            env: job.env.as_ref().clone(),
            post_exec: request.post_exec.clone(),
            queue_pre_exec: queue.map(|q| q.pre_exec.clone()).unwrap_or_default(),
            queue_post_exec: queue.map(|q| q.post_exec.clone()).unwrap_or_default(),
            nice: queue.map_or(0, |q| q.nice),
            limits: crate::job::resource_limits(queue, request),
            job_starter: queue.map(|q| q.job_starter.clone()).unwrap_or_default(),
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
        let index = &self.store.index;
        let on_host: Vec<JobRef> = index
            .started_on
            .range((host.clone(), JobRef::MIN)..=(host.clone(), JobRef::MAX))
            .map(|(_, id)| *id)
            .collect();
        let new_jobs: Vec<JobRef> =
            on_host.iter().filter(|id| index.unaccepted.contains(id)).copied().collect();
        let signaled: Vec<JobRef> =
            on_host.iter().filter(|id| index.signaling.contains(id)).copied().collect();
        for id in new_jobs {
            self.send_new_job(step, id, host);
        }
        for id in signaled {
            self.send_signals(step, id, |_| true);
        }
        let force_killed: Vec<JobRef> = self
            .store
            .index
            .force_killed
            .range((host.clone(), JobRef::MIN)..=(host.clone(), JobRef::MAX))
            .map(|(_, id)| *id)
            .collect();
        for id in force_killed {
            self.kill_forced_run(step, host, id, None);
        }
    }

    /// Sends the kill of `bkill -r` again to the run finished job `id` may
    /// still have on `host` (`control`): when the host registers, or reports
    /// that run (`dispatch_seq`) with a NEW_JOB_REPLY or an EXECUTE. Never
    /// logged: the job is EXIT whatever the answer; sbatchd's reply is ignored
    /// as any reply about a finished job is.
    pub(crate) fn kill_forced_run(
        &mut self,
        step: &mut Step,
        host: &HostName,
        id: JobRef,
        dispatch_seq: Option<u32>,
    ) {
        let Some(job) = self.store.job(id) else { return };
        if job.force_killed_on() != Some(host) || dispatch_seq.is_some_and(|seq| seq != job.dispatch_seq) {
            return;
        }
        let kill = wire::JobSignal {
            job: job.job.to_wire(),
            signal_seq: job.signal_seq,
            action: wire::SignalAction::Terminate,
        };
        self.send(step, host, ToSbd::JobSignal(kill));
        self.links.forced_kill_sent_ms.insert(id, step.now_ms);
    }

    /// The host of a run `bkill -r` ended answered its kill (`signal_seq`) or
    /// reported the run's end (`dispatch_seq`): the timer stops resending it.
    pub(crate) fn forced_kill_answered(
        &mut self,
        host: &HostName,
        id: JobRef,
        signal_seq: Option<u32>,
        dispatch_seq: Option<u32>,
    ) {
        if !self.store.index.force_killed.contains(&(host.clone(), id)) {
            return;
        }
        let Some(job) = self.store.job(id) else { return };
        if signal_seq.is_some_and(|seq| seq == job.signal_seq)
            || dispatch_seq.is_some_and(|seq| seq == job.dispatch_seq)
        {
            self.links.forced_kill_settled.insert(id);
            self.links.forced_kill_sent_ms.remove(&id);
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
        // The kills of runs `bkill -r` ended, to connected hosts that have not
        // answered them (a cleaned job's bookkeeping goes with it).
        let forced: Vec<(HostName, JobRef)> = self
            .store
            .index
            .force_killed
            .iter()
            .filter(|(host, id)| {
                self.is_connected(host)
                    && !self.links.forced_kill_settled.contains(id)
                    && self
                        .links
                        .forced_kill_sent_ms
                        .get(id)
                        .is_none_or(|t| now_ms >= t.saturating_add(resend_interval_ms))
            })
            .cloned()
            .collect();
        for (host, id) in forced {
            self.kill_forced_run(step, &host, id, None);
        }
        let index = &self.store.index.force_killed;
        let still_forced = |id: &JobRef| index.iter().any(|(_, forced)| forced == id);
        self.links.forced_kill_settled.retain(|id| still_forced(id));
        self.links.forced_kill_sent_ms.retain(|id, _| still_forced(id));
        let clean_period_ms = self.config.clean_period_ms;
        let cleanable: Vec<JobRef> = self
            .store
            .index
            .finished
            .iter()
            .take_while(|(finish_ms, _)| finish_ms.saturating_add(clean_period_ms) <= now_ms)
            .map(|(_, id)| *id)
            // A run `bkill -r` ended whose host has not answered the kill keeps its job:
            // cleaning it would forget the kill, and the process would run on unknown to
            // anyone (a host that never comes back keeps it until mbatchd is told otherwise).
            .filter(|id| {
                self.links.forced_kill_settled.contains(id)
                    || !self.store.index.force_killed.iter().any(|(_, forced)| forced == id)
            })
            .collect();
        for id in cleanable {
            let job = self.store.finished(id).expect("the finished index lists finished jobs").job_ref();
            self.record(step, Event::JobClean(JobCleanRecord { job, time_ms: now_ms }));
        }
        step.full_turn |= self.dispatch_due(now_ms);
    }
}
