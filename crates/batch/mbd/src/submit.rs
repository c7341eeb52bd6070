//! `bsub`: resolve the queue, check what the request may ask, give the next
//! job id (ids wrap at `MAX_JOBID`, skipping those still in memory), log JOB_NEW
//! and answer; a retried request id gets its first answer.

use lava_batch_ll::{BAD_RESREQ_MESSAGE, HostName, JobRef, ResReq, SubmitSpec, UserName};
use lava_batch_wire as wire;

use crate::config::{QueueConfig, QueueInteractive, QueueLimit};
use crate::depend::DependError;
use crate::effect::ClientReply;
use crate::event::{Event, JobNewRecord};
use crate::input::{Caller, ClientId};
use crate::job::Job;
use crate::machine::{Mbd, Step};

/// The refusal of a new submission while the event log's file system is full.
pub const DISK_FULL_MESSAGE: &str =
    "The file system of mbatchd's event log is full: new jobs are refused until space is freed";

impl Mbd {
    pub(crate) fn submit(
        &mut self,
        step: &mut Step,
        client: ClientId,
        request_id: wire::RequestId,
        caller: &Caller,
        spec: SubmitSpec,
    ) {
        if let Some((user_id, answer)) = self.answered_before(request_id) {
            // A retry: the first answer again, nothing new logged — also when
            // the job ran and was cleaned meanwhile (its request id is
            // retired, not forgotten), so a retry never makes a second job.
            // A request id is the command's 128 random bits, so another user
            // presenting it is not a retry.
            let reply = if user_id == caller.uid {
                ClientReply::Submit(answer)
            } else {
                ClientReply::error(wire::ERR_REJECTED, "Request id already used by another user")
            };
            self.reply(step, client, reply);
            return;
        }
        if self.links.disk_full {
            let reply = ClientReply::error(wire::ERR_REJECTED, DISK_FULL_MESSAGE);
            self.reply(step, client, reply);
            return;
        }
        let reply = match self.admit(step, request_id, caller, spec) {
            Ok(id) => {
                // An array's first element: the answer names only the job id.
                let first = self.store.index.jobs_of_request(request_id).next().unwrap_or(id);
                let job = self.store.live(first).expect("JOB_NEW was just applied");
                ClientReply::Submit(self.submit_reply(job))
            }
            Err(error) => error,
        };
        self.reply(step, client, reply);
    }

    /// Checks the submission and logs JOB_NEW, or says why not (LSF's wording).
    fn admit(
        &mut self,
        step: &mut Step,
        request_id: wire::RequestId,
        caller: &Caller,
        spec: SubmitSpec,
    ) -> Result<JobRef, ClientReply> {
        let queue = match spec.queue() {
            Some(name) => self
                .config
                .queue(name)
                .ok_or_else(|| ClientReply::error(wire::ERR_NO_QUEUE, format!("{name}: No such queue")))?,
            None => self
                .config
                .default_queue()
                .ok_or_else(|| ClientReply::error(wire::ERR_NO_QUEUE, "No default queue defined"))?,
        };
        if self.store.control.closed_queues.contains(&queue.name) {
            let message = crate::control::queue_closed_message(&queue.name);
            return Err(ClientReply::error(wire::ERR_REJECTED, message));
        }
        self.check_policy(queue, &caller.user, &spec)
            .map_err(|message| ClientReply::error(wire::ERR_REJECTED, message))?;
        if let Some(host) = spec.hosts().iter().find(|h| self.config.host(h).is_none()) {
            return Err(ClientReply::error(
                wire::ERR_REJECTED,
                format!("{host}: Bad host name, host group name or cluster name"),
            ));
        }
        let usable = |h: &HostName| queue.hosts.is_empty() || queue.hosts.contains(h);
        if !spec.hosts().is_empty() && !spec.hosts().iter().any(usable) {
            let names: Vec<&str> = spec.hosts().iter().map(HostName::as_str).collect();
            return Err(ClientReply::error(
                wire::ERR_REJECTED,
                format!("{}: Host or host group is not used by the queue", names.join(" ")),
            ));
        }
        // sbatchd decodes the working directory against the home directory,
        // which must therefore be absolute (lava-batch-ll's JobSpec requires it).
        if !spec.request().home_dir.starts_with('/') {
            return Err(ClientReply::error(
                wire::ERR_BAD_REQUEST,
                "submit.home_dir: is not an absolute path",
            ));
        }
        self.check_array(&spec)?;
        self.check_submission_limits(&caller.user, &spec)?;
        // Ids wrap at MAX_JOBID and skip every id still in memory (`Store::next_job_id`).
        let Some(job) = self.store.next_job_id(self.config.max_job_id).and_then(|id| JobRef::new(id, 0))
        else {
            return Err(ClientReply::error(
                wire::ERR_REJECTED,
                format!(
                    "No job ID available: every job id up to MAX_JOBID {} belongs to a job still in the system",
                    self.config.max_job_id
                ),
            ));
        };
        let dependency = &spec.request().dependency;
        if let Err(error) = self.store.resolve_dependency(&caller.user, dependency) {
            let code = match error {
                DependError::Syntax(_) => wire::ERR_BAD_REQUEST,
                DependError::NoJob(_) => wire::ERR_REJECTED,
            };
            return Err(ClientReply::error(code, format!("{dependency}: {error}")));
        }
        let mut spec = spec;
        // LSF's own default ("default") stays implicit: the job shows it without it being
        // written into every JOB_NEW.
        if self.config.default_project != crate::job::DEFAULT_PROJECT {
            spec.default_project(&self.config.default_project);
        }
        let hold = spec.request().hold;
        let record = JobNewRecord {
            job,
            request_id,
            user_id: caller.uid,
            group_id: caller.gid,
            user: caller.user.clone(),
            from_host: caller.host.clone(),
            queue: queue.name.clone(),
            submit_time_ms: step.now_ms,
            hold,
            spec,
        };
        self.record(step, Event::JobNew(Box::new(record)));
        step.dispatch |= !hold;
        Ok(job)
    }

    /// The queue's and the scheduler's conditions on a submission, with LSF's
    /// messages: interactive jobs only where INTERACTIVE allows them, the queue's USERS,
    /// `-x` only where EXCLUSIVE = y, `-W`, `-M` and the other resource limits within the
    /// queue's maxima, a `-R` that parses and names known resources.
    pub(crate) fn check_policy(
        &self,
        queue: &QueueConfig,
        user: &UserName,
        spec: &SubmitSpec,
    ) -> Result<(), &'static str> {
        let request = spec.request();
        let interactive = request.file_flags & wire::submit_flags::INTERACTIVE != 0;
        match queue.interactive {
            QueueInteractive::No if interactive => return Err("Queue does not accept interactive jobs"),
            QueueInteractive::Only if !interactive => return Err("Queue only accepts interactive jobs"),
            _ => {}
        }
        if !queue.admits(user) {
            return Err("User cannot use the queue");
        }
        if request.exclusive && !queue.exclusive {
            return Err("Queue does not accept EXCLUSIVE jobs");
        }
        let over = |limit: Option<&QueueLimit>, asked: u64| limit.is_some_and(|l| asked > l.max);
        if over(queue.run_limit_s.as_ref(), request.run_limit_s)
            || over(queue.mem_limit_kb.as_ref(), request.mem_limit_kb)
            || request.limits.as_deref().is_some_and(|asked| queue.limits.exceeded_by(asked))
        {
            return Err("Cannot exceed queue's hard limit(s)");
        }
        if !request.res_req.trim().is_empty() {
            let known = |name: &str| {
                self.config.resources.iter().any(|r| r == name)
                    || self.config.hosts.iter().any(|h| h.resources.iter().any(|r| r == name))
            };
            match ResReq::parse_with_unit(&request.res_req, self.config.resreq_unit_mb) {
                Ok(req) if req.resource_names().into_iter().all(known) => {}
                _ => return Err(BAD_RESREQ_MESSAGE),
            }
        }
        Ok(())
    }

    /// The submitter and the answer of a submission already made with
    /// `request_id`, whether its job is in memory or was cleaned.
    fn answered_before(&self, request_id: wire::RequestId) -> Option<(u32, wire::SubmitReply)> {
        if let Some(job) =
            self.store.index.jobs_of_request(request_id).next().and_then(|id| self.store.job(id))
        {
            return Some((job.user_id, self.submit_reply(&job)));
        }
        let retired = self.store.retired.get(&request_id)?;
        let answer = wire::SubmitReply {
            job_id: retired.job.id(),
            queue: retired.queue.to_string(),
            default_queue: retired.default_queue,
        };
        Some((retired.user_id, answer))
    }

    fn submit_reply(&self, job: &Job) -> wire::SubmitReply {
        wire::SubmitReply {
            job_id: job.job.id(),
            queue: job.queue.to_string(),
            default_queue: job.spec.queue().is_none(),
        }
    }
}
