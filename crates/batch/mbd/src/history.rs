//! `bhist`: jobs' histories told from the events of `lsb.events`
//! ([`HistoryBuilder`]).
//!
//! LSF's `bhist` reads the event files itself; here mbatchd owns its log (a
//! private folder), so its shell reads the log's records on a blocking thread
//! and feeds each decoded [`Event`] to a builder, which keeps only the jobs the
//! query selects and turns their events into LSF's narrative lines
//! (`Submitted from host <h>, to Queue <q>, CWD <d>;`, `Dispatched to <h>;`,
//! `Starting (Pid N);`, `Done successfully. The CPU time used is …;`, …) with
//! the status each change leads to, from which `bhist` computes the time spent
//! in each state. A job cleaned from memory is still told while its JOB_NEW is
//! in the log; a job whose JOB_NEW was pruned (covered by a snapshot) is not.
//! This is logic only: no I/O, and the state of [`crate::Mbd`] is not read.
//!
//! Selection: named jobs whatever their state; otherwise the jobs of the `-u`
//! user (the caller by default, `all` for everyone) whose last state matches
//! the state filter (`wire::state_filter`; the default is unfinished jobs).
//! Answers are paged by job id: at most [`HISTORY_JOBS_PER_PAGE`] jobs and
//! [`HISTORY_ENTRIES_PER_JOB_MAX`] lines per job (the newest are dropped first).
//! A page holds the lowest ids above `after_job`, whatever order the log has them
//! in: after job ids wrapped at `MAX_JOBID`, the log holds high ids before low ones.
//! An id given again after the wrap (its old job long cleaned) tells the newer
//! job: its JOB_NEW starts the history afresh, and every later event of that id
//! is the newer job's.

use std::collections::BTreeMap;

use lava_batch_ll::{JobStatus, UserName};
use lava_batch_wire::{self as wire, state_filter};

use crate::event::{Event, FinishRecord, JobChanges, Requeued};
use crate::input::Caller;
use crate::job::exit_code;

/// Jobs in one page of a `bhist` answer.
pub const HISTORY_JOBS_PER_PAGE: usize = 500;
/// Lines kept per job (a job signalled without end would grow without bound).
pub const HISTORY_ENTRIES_PER_JOB_MAX: usize = 1_000;

/// One job being told.
struct Told {
    history: wire::JobHistory,
    status: JobStatus,
    /// Who asked the last signal, for the suspend and resume lines.
    last_requester: Option<UserName>,
}

/// Builds the answer to one [`wire::HistoryQuery`] from the log's events, in log order.
pub struct HistoryBuilder {
    query: wire::HistoryQuery,
    user: Option<String>,
    jobs: BTreeMap<u32, Told>,
    /// A matching job beyond the page was seen.
    more: bool,
}

impl HistoryBuilder {
    /// A builder for `query` asked by `caller`.
    pub fn new(query: wire::HistoryQuery, caller: &Caller) -> HistoryBuilder {
        let user = match query.user.as_str() {
            "" => Some(caller.user.to_string()),
            "all" => None,
            name => Some(name.to_owned()),
        };
        HistoryBuilder { query, user, jobs: BTreeMap::new(), more: false }
    }

    /// Whether a job submitted by `user` as `id` may be on this page.
    fn wanted(&self, id: u32, user: &UserName) -> bool {
        if id <= self.query.after_job {
            return false;
        }
        if !self.query.jobs.is_empty() {
            return self.query.jobs.iter().any(|job| job.job_id == id);
        }
        self.user.as_deref().is_none_or(|name| name == user.as_str())
    }

    /// Takes the next event of the log.
    pub fn add(&mut self, event: &Event) {
        if let Event::JobNew(record) = event {
            let id = record.job.id();
            if !self.wanted(id, &record.user) {
                // An id given again to a job this query does not select: the
                // older job of that id has no later events, and is not told.
                self.jobs.remove(&id);
                return;
            }
            if !self.jobs.contains_key(&id) && self.jobs.len() >= HISTORY_JOBS_PER_PAGE {
                // The page keeps the lowest ids: a higher one waits for a later page,
                // a lower one takes the place of the highest kept.
                self.more = true;
                match self.jobs.last_key_value() {
                    Some((highest, _)) if *highest > id => {
                        let highest = *highest;
                        self.jobs.remove(&highest);
                    }
                    _ => return,
                }
            }
            let request = record.spec.request();
            let mut text = format!(
                "Submitted from host <{}>, to Queue <{}>, CWD <{}>",
                record.from_host, record.queue, request.cwd
            );
            for (label, value) in [
                ("Input File", &request.input_file),
                ("Output File", &request.output_file),
                ("Error File", &request.error_file),
                ("Requested Resources", &request.res_req),
            ] {
                if !value.is_empty() {
                    text.push_str(&format!(", {label} <{value}>"));
                }
            }
            if record.spec.n_slots() > 1 {
                text.push_str(&format!(", {} Task(s)", record.spec.n_slots()));
            }
            text.push(';');
            let status = if record.hold { JobStatus::Psusp } else { JobStatus::Pend };
            let history = wire::JobHistory {
                job: record.job.to_wire(),
                user_name: record.user.to_string(),
                job_name: request.job_name.clone(),
                command: request.command.clone(),
                project: request.project.clone(),
                entries: vec![wire::HistoryEntry {
                    time_ms: record.submit_time_ms,
                    status: status.bits(),
                    text,
                }],
            };
            self.jobs.insert(id, Told { history, status, last_requester: None });
            return;
        }
        let Some(job) = event.job() else { return };
        let Some(told) = self.jobs.get_mut(&job.id()).filter(|t| t.history.job == job.to_wire()) else {
            return;
        };
        if let Some((time_ms, status, text)) = narrate(told, event) {
            if let Some(status) = status {
                told.status = status;
            }
            if told.history.entries.len() < HISTORY_ENTRIES_PER_JOB_MAX {
                let status = status.map_or(0, JobStatus::bits);
                told.history.entries.push(wire::HistoryEntry { time_ms, status, text });
            }
        }
    }

    /// The page: the selected jobs in id order, the named ones not in the log,
    /// and where the next page starts.
    pub fn finish(self) -> wire::HistoryReply {
        let next_after = if self.more { self.jobs.keys().next_back().copied().unwrap_or(0) } else { 0 };
        let not_found = self
            .query
            .jobs
            .iter()
            .filter(|job| job.job_id > self.query.after_job && !self.jobs.contains_key(&job.job_id))
            .copied()
            .collect();
        let explicit = !self.query.jobs.is_empty();
        let filter = self.query.state_filter;
        let jobs = self
            .jobs
            .into_values()
            .filter(|told| explicit || state_matches(told.status, filter))
            .map(|told| told.history)
            .collect();
        wire::HistoryReply { jobs, not_found, next_after }
    }
}

/// Whether a job whose last state is `status` passes `filter`.
fn state_matches(status: JobStatus, filter: u32) -> bool {
    match filter {
        state_filter::ALL => true,
        state_filter::DONE => status.is_finished(),
        state_filter::PENDING => status.is_pending(),
        state_filter::RUNNING => matches!(status, JobStatus::Run | JobStatus::Unknown),
        state_filter::SUSPENDED => matches!(status, JobStatus::Psusp | JobStatus::Ususp | JobStatus::Ssusp),
        _ => !status.is_finished(),
    }
}

/// The line an event adds to a job's history: its time, the status it leads to
/// (if it changes it) and the text.
fn narrate(told: &mut Told, event: &Event) -> Option<(u64, Option<JobStatus>, String)> {
    Some(match event {
        Event::JobStart(r) => {
            let text = if r.exec_hosts.len() > 1 {
                let hosts: Vec<String> = r.exec_hosts.iter().map(|h| format!("<{h}>")).collect();
                format!("Dispatched to {} Hosts/Processors {};", r.exec_hosts.len(), hosts.join(" "))
            } else {
                format!(
                    "Dispatched to <{}>;",
                    r.exec_hosts.first().map(ToString::to_string).unwrap_or_default()
                )
            };
            (r.time_ms, Some(JobStatus::Run), text)
        }
        Event::JobStartAccept(r) => (r.time_ms, None, format!("Starting (Pid {});", r.pid)),
        Event::JobExecute(r) => (
            r.time_ms,
            None,
            format!(
                "Running with execution home <{}>, Execution CWD <{}>, Execution Pid <{}>;",
                r.exec.exec_home, r.exec.exec_cwd, r.exec.pid
            ),
        ),
        Event::JobSignal(r) => {
            told.last_requester = Some(r.requester.clone());
            let what = match (r.requeue_hold, r.action) {
                (Some(false), _) => "REQUEUE_PEND".to_owned(),
                (Some(true), _) => "REQUEUE_PSUSP".to_owned(),
                (None, action) => match action {
                    wire::SignalAction::Stop => "STOP".to_owned(),
                    wire::SignalAction::Continue => "CONT".to_owned(),
                    wire::SignalAction::Terminate => "KILL".to_owned(),
                    wire::SignalAction::Signal(n) => n.to_string(),
                },
            };
            (
                r.time_ms,
                None,
                format!("Signal <{what}> requested by user or administrator <{}>;", r.requester),
            )
        }
        Event::JobStatus(r) => {
            let by = told.last_requester.as_ref().map_or_else(String::new, |u| format!(" <{u}>"));
            let text = match (told.status, r.status) {
                (_, JobStatus::Done) => finished_text(r.finish.as_ref(), true, &r.reason),
                (_, JobStatus::Exit) => finished_text(r.finish.as_ref(), false, &r.reason),
                (_, JobStatus::Psusp) if r.reason == crate::job::REASON_PRE_EXEC_LIMIT => {
                    format!("Suspended: {};", r.reason)
                }
                (_, JobStatus::Psusp | JobStatus::Ususp) => {
                    format!("Suspended by the user or administrator{by};")
                }
                (JobStatus::Psusp, JobStatus::Pend) | (JobStatus::Ususp, JobStatus::Run) => {
                    format!("Resumed by the user or administrator{by};")
                }
                (_, JobStatus::Pend) if !r.reason.is_empty() => format!("Pending: {};", r.reason),
                (_, JobStatus::Ssusp) => format!("Suspended by the system: {};", r.reason),
                (_, status) => format!("Status changed to {status};"),
            };
            (r.time_ms, Some(r.status), text)
        }
        Event::JobModify(r) => (r.time_ms, None, modify_text(&r.changes, &r.requester)),
        Event::JobSwitch(r) => (
            r.time_ms,
            None,
            format!("Switched to Queue <{}> by user or administrator <{}>;", r.queue, r.requester),
        ),
        Event::JobMove(r) => (
            r.time_ms,
            None,
            format!(
                "Job moved to position {} relative to <{}> by user or administrator <{}>;",
                r.position,
                if r.to_top { "top" } else { "bottom" },
                r.requester
            ),
        ),
        Event::JobRequeue(r) => {
            let status = if r.hold { JobStatus::Psusp } else { JobStatus::Pend };
            let text = match &r.requeued {
                Requeued::Finished { requester, .. } | Requeued::Pending { requester } => {
                    format!("Job requeued by user or administrator <{requester}>;")
                }
                Requeued::Killed(finish) => {
                    format!(
                        "{} Job has been requeued;",
                        finished_text(Some(finish), finish.wait_status == 0, "")
                    )
                }
            };
            (r.time_ms, Some(status), text)
        }
        Event::JobForce(r) => {
            let hosts: Vec<String> = r.exec_hosts.iter().map(|h| format!("<{h}>")).collect();
            let text = format!(
                "Job is forced to run by user or administrator <{}>; Dispatched to {};",
                r.requester,
                hosts.join(" ")
            );
            (r.time_ms, Some(JobStatus::Run), text)
        }
        Event::JobForceExit(r) => {
            told.last_requester = Some(r.requester.clone());
            let text = format!(
                "Signal <KILL> requested by user or administrator <{}>; {}",
                r.requester,
                finished_text(Some(&r.finish), false, "")
            );
            (r.time_ms, Some(JobStatus::Exit), text)
        }
        Event::JobSigact(_)
        | Event::JobClean(_)
        | Event::JobNew(_)
        | Event::MbdStart(_)
        | Event::HostCtrl(_)
        | Event::QueueCtrl(_) => return None,
    })
}

/// The line of a DONE or EXIT.
fn finished_text(finish: Option<&FinishRecord>, done: bool, reason: &str) -> String {
    let cpu_ms = finish.map_or(0, |f| f.rusage.user_time_ms + f.rusage.system_time_ms);
    let cpu = format!("The CPU time used is {:.1} seconds", cpu_ms as f64 / 1000.0);
    let mut text = match finish {
        _ if done => format!("Done successfully. {cpu};"),
        Some(f) if f.wait_status & 0x7f != 0 => format!("Exited by signal {}. {cpu};", f.wait_status & 0x7f),
        Some(f) => format!("Exited with exit code {}. {cpu};", exit_code(f.wait_status)),
        None => format!("Exited. {cpu};"),
    };
    if let Some(why) = finish.and_then(|f| lava_batch_ll::acct::TermReason::of_finish(f.finish_reason)) {
        text.push_str(&format!(" {};", why.text));
    }
    if !reason.is_empty() {
        text.push_str(&format!(" {reason};"));
    }
    text
}

/// The line of a JOB_MODIFY2.
fn modify_text(changes: &JobChanges, requester: &UserName) -> String {
    let mut text = format!("Parameters of Job are changed by user or administrator <{requester}>:");
    let mut change = |what: &str, value: String| text.push_str(&format!(" {what} changes to : {value};"));
    if let Some(queue) = &changes.queue {
        change("Job queue", queue.to_string());
    }
    if let Some(name) = &changes.job_name {
        change("Job name", name.clone());
    }
    if let Some(n) = changes.n_slots {
        change("Job slots", n.max(1).to_string());
    }
    if let Some(limit) = changes.run_limit_s {
        change("Run limit", format!("{limit} seconds"));
    }
    if let Some(limit) = changes.mem_limit_kb {
        change("Memory limit", format!("{limit} KB"));
    }
    if let Some(res_req) = &changes.res_req {
        change("Resource requirements", res_req.clone());
    }
    text
}
