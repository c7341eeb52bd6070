//! The commands: each simulated user runs `bsub`, `bstop`, `bresume`,
//! `bkill`, `bkill -r` (the job EXIT at once, its run killed as it can be) and
//! `brequeue -r` (kill and requeue a started job) one at a time, as a shell script would, and retries a request
//! whose answer does not come (lost request, lost reply, mbatchd down) with
//! the same request id on a new connection, until it is answered. The last
//! command of every user is `bresume 0` (every job of the user), so that no
//! job stays stopped for ever. Some submissions are small job arrays (one with
//! `%1`), and some wait with `-w "ended(ID)"` for one of the user's jobs; a
//! signal of an array's id acts on its elements.

use std::collections::VecDeque;

use lava_batch_ll::UserName;
use lava_batch_wire::{self as wire, SignalAction, SignalRequestOutcome};
use lava_mbd::{ClientId, ClientReply};

use crate::codec::{self, ClientRequest};
use crate::params::Params;
use crate::rng::Rng;
use crate::world::{Ev, Route, World, queue_names};

/// One command to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `bsub`.
    Submit,
    /// `bstop`, `bresume`, `bkill` or `brequeue -r` of one of the user's jobs.
    Signal,
    /// `bjobs -a`.
    Query,
    /// `bresume 0`.
    ResumeAll,
}

/// A request waiting for its answer.
#[derive(Clone, Debug)]
pub struct Outstanding {
    /// The request id, the same on every attempt.
    pub request_id: wire::RequestId,
    /// The request.
    pub request: ClientRequest,
    /// The connection of the current attempt.
    pub attempt: ClientId,
    /// Attempts so far.
    pub n_attempts: u32,
}

/// One user running commands.
#[derive(Clone, Debug)]
pub struct Client {
    /// The user.
    pub user: UserName,
    /// Its uid (what the credential vouches for).
    pub uid: u32,
    /// Commands still to run.
    pub plan: VecDeque<Op>,
    /// The command running.
    pub current: Option<Outstanding>,
    /// Jobs the user's submissions created.
    pub known_jobs: Vec<u32>,
    /// Voids wake-ups scheduled before the last change.
    pub generation: u64,
    /// Longest pause between two commands, ms.
    think_max_ms: u64,
    /// High half of this user's request ids.
    request_high: u64,
    /// Requests issued so far.
    n_requests: u64,
}

impl Client {
    /// A user with its plan: its share of the submissions and signals in a
    /// random order, then `bresume 0`.
    pub fn new(user: UserName, uid: u32, params: &Params, idx: usize, rng: &mut Rng) -> Client {
        let share = |total: usize| total / params.n_clients + usize::from(idx < total % params.n_clients);
        let mut ops = vec![Op::Submit; share(params.n_jobs)];
        ops.extend(std::iter::repeat_n(Op::Signal, share(params.n_signals)));
        ops.extend(std::iter::repeat_n(Op::Query, share(params.n_jobs / 4)));
        for i in (1..ops.len()).rev() {
            let j = rng.index(i + 1);
            ops.swap(i, j);
        }
        // Submissions first in expectation, so that signals find jobs.
        let n_ops = ops.len() as u64 + 1;
        let mut plan: VecDeque<Op> = ops.into();
        plan.push_back(Op::ResumeAll);
        Client {
            user,
            uid,
            plan,
            current: None,
            known_jobs: Vec::new(),
            generation: 0,
            think_max_ms: (params.fault_phase_ms / n_ops).max(1),
            request_high: rng.next_u64(),
            n_requests: 0,
        }
    }

    /// Every command ran and was answered.
    pub fn is_done(&self) -> bool {
        self.plan.is_empty() && self.current.is_none()
    }

    /// A summary for failure reports.
    pub fn describe(&self) -> String {
        format!(
            "{} plan {:?} outstanding {:?} jobs {:?}",
            self.user,
            self.plan,
            self.current.as_ref().map(|c| (c.request_id.low, c.n_attempts)),
            self.known_jobs
        )
    }

    fn next_request_id(&mut self) -> wire::RequestId {
        self.n_requests += 1;
        wire::RequestId { high: self.request_high, low: self.n_requests }
    }
}

impl World {
    /// A client's timer: retry the command running, or start the next one.
    pub fn client_wake(&mut self, client: usize, generation: u64) {
        if self.clients[client].generation != generation {
            return;
        }
        if self.clients[client].current.is_some() {
            if self.repl.is_some() {
                // No answer in time: try the next master candidate.
                self.repl_client_next(client, None);
            }
            return self.client_send_attempt(client);
        }
        let Some(op) = self.clients[client].plan.pop_front() else { return };
        let request = match op {
            Op::Submit => Some(self.submit_request(client)),
            Op::Signal => self.signal_request(client),
            Op::Query => Some(self.query_request(client)),
            Op::ResumeAll => Some(self.resume_all_request(client)),
        };
        let Some(request) = request else {
            // Nothing to signal yet: think, then go on.
            return self.client_think(client);
        };
        let request_id = match &request {
            ClientRequest::Submit(r) => r.request_id,
            ClientRequest::Signal(r) => r.request_id,
            ClientRequest::Query(r) => r.request_id,
            ClientRequest::Requeue(r) => r.request_id,
        };
        self.trace.line(self.now_ms, || format!("client {client}: {request:?}"));
        self.clients[client].current =
            Some(Outstanding { request_id, request, attempt: ClientId(0), n_attempts: 0 });
        self.client_send_attempt(client);
    }

    fn client_think(&mut self, client: usize) {
        let c = &mut self.clients[client];
        c.generation += 1;
        let generation = c.generation;
        let delay = self.rng.range(0, c.think_max_ms);
        self.at(delay, Ev::ClientWake { client, generation });
    }

    /// Sends the running command on a new connection and arms its retry.
    pub(crate) fn client_send_attempt(&mut self, client: usize) {
        self.next_attempt += 1;
        let attempt = ClientId(self.next_attempt);
        let c = &mut self.clients[client];
        let outstanding = c.current.as_mut().expect("an attempt is of a running command");
        outstanding.attempt = attempt;
        outstanding.n_attempts += 1;
        let request_id = outstanding.request_id;
        let bytes = codec::encode_client_request(&outstanding.request);
        c.generation += 1;
        let generation = c.generation;
        self.attempts.insert(attempt, (client, request_id));
        let (incarnation, candidate) = match &self.repl {
            Some(repl) => {
                let candidate = repl.client_target[client];
                (repl.incarnation(candidate), candidate)
            }
            None => (self.mbd.incarnation, 0),
        };
        self.transmit(Route::ClientToMbd { attempt, incarnation, candidate }, bytes);
        let retry_ms = self.params.client_retry_ms;
        self.at(retry_ms, Ev::ClientWake { client, generation });
    }

    fn credential(&self, client: usize) -> Vec<u8> {
        self.clients[client].uid.to_be_bytes().to_vec()
    }

    fn submit_request(&mut self, client: usize) -> ClientRequest {
        let queues = queue_names();
        let queue = match self.rng.below(4) {
            0 => String::new(),
            n => queues[n as usize - 1].to_owned(),
        };
        // `-m` only where every host serves the queue, so it is never refused.
        let hosts = if queue.is_empty() && self.rng.chance(0.2) {
            vec![self.rng.pick(&self.hosts).to_string()]
        } else {
            Vec::new()
        };
        let user = self.clients[client].user.to_string();
        let request_id = self.clients[client].next_request_id();
        // Some submissions are small arrays, some limited to one element at a time.
        let job_name = match self.rng.below(10) {
            0 => format!("sim[1-{}]", self.rng.range(2, 4)),
            1 => "sim[1-5:2]%1".to_owned(),
            _ => String::new(),
        };
        // Some wait for one of the user's jobs to end: always met in the end, as
        // every job ends (the job may have been cleaned: then it is refused).
        let known = &self.clients[client].known_jobs;
        let dependency = if !known.is_empty() && self.rng.chance(0.1) {
            let known = known.clone();
            format!("ended({})", self.rng.pick(&known))
        } else {
            String::new()
        };
        let body = wire::SubmitRequest {
            queue,
            job_name,
            command: format!("simulated job {}", request_id.low),
            cwd: "work".to_owned(),
            home_dir: format!("/home/{user}"),
            output_file: "%J.out".to_owned(),
            n_slots: self.rng.range(1, 2) as u32,
            hosts,
            run_limit_s: if self.rng.chance(0.15) { self.rng.range(1, 8) } else { 0 },
            mem_limit_kb: if self.rng.chance(0.15) { self.rng.range(1_024, 1 << 20) } else { 0 },
            // Some jobs have limits of their own, within every queue's maxima: stored with
            // the submission (JOB_NEW, snapshots), so replays and hand-overs carry them.
            limits: self.rng.chance(0.15).then(|| {
                Box::new(wire::ResourceLimits {
                    cpu_s: Some(self.rng.range(1, 60)),
                    core_kb: Some(0),
                    processes: Some(self.rng.range(1, 4) as u32),
                    ..wire::ResourceLimits::default()
                })
            }),
            hold: self.rng.chance(0.1),
            dependency,
            from_host: "client1".to_owned(),
            umask: 0o022,
            env: vec![wire::EnvVar { name: "PATH".to_owned(), value: "/bin:/usr/bin".to_owned() }],
            ..wire::SubmitRequest::default()
        };
        let credential = self.credential(client);
        ClientRequest::Submit(Box::new(wire::ClientRequest { credential, request_id, body }))
    }

    fn signal_request(&mut self, client: usize) -> Option<ClientRequest> {
        let known = self.clients[client].known_jobs.clone();
        if known.is_empty() {
            return None;
        }
        let mut jobs = vec![wire::WireJobRef { job_id: *self.rng.pick(&known), array_index: 0 }];
        if known.len() > 1 && self.rng.chance(0.2) {
            let other = wire::WireJobRef { job_id: *self.rng.pick(&known), array_index: 0 };
            if other != jobs[0] {
                jobs.push(other);
            }
        }
        let action = match self.rng.below(11) {
            0..=3 => SignalAction::Stop,
            4..=6 => SignalAction::Continue,
            7..=8 => SignalAction::Terminate,
            9 => return Some(self.requeue_request(client, jobs)),
            _ => return Some(self.force_exit_request(client, jobs)),
        };
        let request_id = self.clients[client].next_request_id();
        let body = wire::SignalRequest { jobs, all_jobs: false, user: String::new(), action };
        let credential = self.credential(client);
        Some(ClientRequest::Signal(wire::ClientRequest { credential, request_id, body }))
    }

    /// `brequeue -r`: the jobs' runs are killed and the jobs requeued.
    fn requeue_request(&mut self, client: usize, jobs: Vec<wire::WireJobRef>) -> ClientRequest {
        let request_id = self.clients[client].next_request_id();
        let action = wire::JobControlAction::Requeue {
            done: false,
            exit: false,
            running: true,
            pending: false,
            hold: false,
        };
        let body = wire::JobControlRequest { jobs, action };
        let credential = self.credential(client);
        ClientRequest::Requeue(wire::ClientRequest { credential, request_id, body })
    }

    /// `bkill -r`: the jobs are EXIT at once.
    fn force_exit_request(&mut self, client: usize, jobs: Vec<wire::WireJobRef>) -> ClientRequest {
        let request_id = self.clients[client].next_request_id();
        let body = wire::JobControlRequest { jobs, action: wire::JobControlAction::ForceExit };
        let credential = self.credential(client);
        ClientRequest::Requeue(wire::ClientRequest { credential, request_id, body })
    }

    fn query_request(&mut self, client: usize) -> ClientRequest {
        let request_id = self.clients[client].next_request_id();
        let body = wire::JobQuery {
            jobs: Vec::new(),
            user: String::new(),
            state_filter: wire::state_filter::ALL,
            queue: String::new(),
            host: String::new(),
            job_name: String::new(),
            after_job: 0,
            after_index: 0,
        };
        let credential = self.credential(client);
        ClientRequest::Query(wire::ClientRequest { credential, request_id, body })
    }

    fn resume_all_request(&mut self, client: usize) -> ClientRequest {
        let request_id = self.clients[client].next_request_id();
        let body = wire::SignalRequest {
            jobs: Vec::new(),
            all_jobs: true,
            user: String::new(),
            action: SignalAction::Continue,
        };
        let credential = self.credential(client);
        ClientRequest::Signal(wire::ClientRequest { credential, request_id, body })
    }

    /// mbatchd's answer on connection `attempt`. An answer to an attempt the
    /// command gave up on is not read (the command closed that connection),
    /// but it is still checked: a retried request must get the same answer.
    pub fn client_receive(&mut self, attempt: ClientId, bytes: &[u8]) {
        let reply = match codec::decode_client_reply(bytes) {
            Ok(reply) => reply,
            Err(error) => self.violation(format!("a command cannot decode mbatchd's answer: {error}")),
        };
        let Some((client, request_id)) = self.attempts.get(&attempt).copied() else {
            self.violation(format!("an answer on connection {attempt:?}, which no command opened"));
        };
        if let ClientReply::Submit(submit) = &reply {
            self.oracle_submit_answer(request_id, submit.job_id);
        }
        let current = self.clients[client].current.as_ref();
        if current.is_none_or(|c| c.attempt != attempt) {
            return;
        }
        let request = current.expect("checked").request.clone();
        if let ClientReply::Error(error) = &reply
            && self.repl_client_redirect(client, &error.message)
        {
            return;
        }
        self.trace.line(self.now_ms, || format!("client {client}: answer {reply:?}"));
        match (&request, reply) {
            (ClientRequest::Submit(_), ClientReply::Submit(submit)) => {
                let known = &mut self.clients[client].known_jobs;
                if !known.contains(&submit.job_id) {
                    known.push(submit.job_id);
                }
            }
            (ClientRequest::Signal(signal), ClientReply::Signal(answer)) => {
                self.check_signal_answer(&signal.body, &answer);
            }
            (ClientRequest::Query(_), ClientReply::JobQuery(answer)) => {
                self.check_query_answer(client, &answer);
            }
            (ClientRequest::Requeue(r), ClientReply::JobControl(answer))
                if r.body.action == wire::JobControlAction::ForceExit =>
            {
                self.check_force_exit_answer(&answer);
            }
            (ClientRequest::Requeue(_), ClientReply::JobControl(answer)) => {
                self.check_requeue_answer(&answer);
            }
            (ClientRequest::Submit(submit), ClientReply::Error(error))
                if !submit.body.dependency.is_empty() && error.message.ends_with("No matching job found") =>
            {
                // The job it named was cleaned meanwhile: refused, nothing submitted.
            }
            (ClientRequest::Submit(_), ClientReply::Error(error))
                if error.message == lava_mbd::DISK_FULL_MESSAGE =>
            {
                // mbatchd's disk is full: refused, nothing submitted (a retry of an accepted
                // submission is answered with its job instead: the oracle checks answers).
            }
            (request, reply) => {
                self.violation(format!("unexpected answer {reply:?} to {request:?}"));
            }
        }
        self.clients[client].current = None;
        self.client_think(client);
    }

    /// `bjobs` shows only the caller's jobs, and a finished job as it durably ended.
    fn check_query_answer(&self, client: usize, answer: &wire::JobQueryReply) {
        let user = self.clients[client].user.as_str();
        for info in &answer.jobs {
            if info.user_name != user {
                self.violation(format!(
                    "bjobs of {user} lists job {} of {}",
                    info.job.job_id, info.user_name
                ));
            }
            let finished = lava_batch_ll::JobStatus::from_bits(info.status).is_some_and(|s| s.is_finished());
            let job = lava_batch_ll::job_ref("job", info.job).expect("bjobs shows real jobs");
            let durable = self.oracle.terminal.get(&job).map(|(status, _)| status.bits());
            if finished && durable != Some(info.status) {
                self.violation(format!(
                    "bjobs shows job {} with status {:#x}, its durable end is {durable:?}",
                    info.job.job_id, info.status
                ));
            }
        }
    }

    /// The owner's `brequeue -r` is done, or refused for a job it cannot act
    /// on: not (or no longer) started, or cleaned.
    fn check_requeue_answer(&self, answer: &wire::JobControlReply) {
        const REFUSALS: [&str; 5] = [
            "Job has not started yet",
            "Job is being dispatched; requeue it once it has started",
            "Job is DONE; requeue it with -d or -a",
            "Job is EXIT; requeue it with -e or -a",
            "No matching job found",
        ];
        for result in &answer.results {
            if !result.done && !REFUSALS.iter().any(|why| result.message.ends_with(why)) {
                self.violation(format!("the owner's brequeue -r was answered {:?}", result.message));
            }
        }
    }

    /// The owner's `bkill -r` ended the job, durably before the answer, or is
    /// refused for a job already finished (or cleaned).
    fn check_force_exit_answer(&self, answer: &wire::JobControlReply) {
        for result in &answer.results {
            let job = lava_batch_ll::job_ref("job", result.job).expect("the simulation names real jobs");
            if result.done && !self.oracle.terminal.contains_key(&job) {
                self.violation(format!("job {job}: bkill -r answered before its EXIT is durable"));
            }
            let refused_as_finished = ["Job has already finished", "No matching job found"]
                .iter()
                .any(|why| result.message.ends_with(why));
            if !result.done && !refused_as_finished {
                self.violation(format!("the owner's bkill -r was answered {:?}", result.message));
            }
        }
    }

    fn check_signal_answer(&self, request: &wire::SignalRequest, answer: &wire::SignalReply) {
        if !request.all_jobs {
            // A job id that names an array is answered element by element.
            let answered: Vec<u32> = answer.results.iter().map(|r| r.job.job_id).collect();
            let mut asked: Vec<u32> = request.jobs.iter().map(|j| j.job_id).collect();
            let mut distinct = answered.clone();
            distinct.dedup();
            asked.dedup();
            if distinct != asked {
                self.violation(format!("signal answer for {answered:?}, asked for {:?}", request.jobs));
            }
        }
        for result in &answer.results {
            let job = lava_batch_ll::job_ref("job", result.job).expect("the simulation names real jobs");
            match result.outcome {
                SignalRequestOutcome::Accepted | SignalRequestOutcome::AlreadyFinished => {}
                // Only a cleaned job is unknown; the answer left after its clean was durable.
                SignalRequestOutcome::NotFound if self.oracle.replica.job(job).is_none() => {}
                outcome => self.violation(format!(
                    "job {job}: the owner's {:?} was answered {outcome:?}",
                    request.action
                )),
            }
            let kill = request.action == SignalAction::Terminate;
            if kill
                && result.outcome == SignalRequestOutcome::Accepted
                && !self.oracle.kill_intents.contains(&job)
            {
                self.violation(format!("job {job}: kill answered Accepted before its JOB_SIGNAL is durable"));
            }
        }
    }
}
