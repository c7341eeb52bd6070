//! `bjobs`: select jobs by the filters of a [`wire::JobQuery`] and describe
//! them. Reading only; nothing is logged.
//!
//! Named jobs are shown whatever their state and owner (LSF does so); the
//! queue, host and name filters still apply to them, and names that are not
//! in memory are listed in `not_found`. Without names, the user filter (`''`
//! for the caller, `all`, or a name) and the state filter select (on the
//! durable state: a job shown UNKWN is still RUN or suspended to the filter). Any user may
//! see any job, as in LSF. A job-name filter ending in `*` matches by prefix.

use std::borrow::Cow;
use std::collections::BTreeMap;

use lava_batch_wire::{self as wire, state_filter};

use crate::effect::ClientReply;
use crate::input::{Caller, ClientId};
use crate::job::Job;
use crate::machine::{Mbd, Step};

impl Mbd {
    pub(crate) fn query(&self, step: &mut Step, client: ClientId, caller: &Caller, query: &wire::JobQuery) {
        if query.state_filter > state_filter::SUSPENDED {
            let reply = ClientReply::error(
                wire::ERR_BAD_REQUEST,
                format!("Unknown state filter {}", query.state_filter),
            );
            return self.reply(step, client, reply);
        }
        let mut selected: BTreeMap<u32, Cow<'_, Job>> = BTreeMap::new();
        let mut not_found = Vec::new();
        if query.jobs.is_empty() {
            let wanted =
                |job: &Job| user_matches(job, &query.user, caller) && state_matches(job, query.state_filter);
            // Only the filters that can show a finished job read the finished (frozen) ones.
            let jobs: Box<dyn Iterator<Item = (u32, Cow<'_, Job>)>> = match query.state_filter {
                state_filter::DONE | state_filter::ALL => Box::new(self.store.all_jobs()),
                _ => Box::new(self.store.live_jobs().map(|(id, job)| (id, Cow::Borrowed(job)))),
            };
            selected.extend(jobs.filter(|(_, job)| wanted(job)));
        } else {
            for wanted in &query.jobs {
                let found = lava_batch_ll::job_ref("job", *wanted).ok().and_then(|job| self.job(job));
                match found {
                    Some(job) => {
                        selected.insert(job.job.id(), job);
                    }
                    None if !not_found.contains(wanted) => not_found.push(*wanted),
                    None => {}
                }
            }
        }
        let jobs = selected
            .into_values()
            .filter(|job| self.place_matches(job, query))
            .map(|job| {
                let mut info = job.info(self.config.queue(&job.queue).is_some());
                // UNKWN is display state: lim's view, never logged (see `hosts`).
                info.status = self.shown_status(&job).bits();
                info
            })
            .collect();
        self.reply(step, client, ClientReply::JobQuery(wire::JobQueryReply { jobs, not_found }));
    }

    fn place_matches(&self, job: &Job, query: &wire::JobQuery) -> bool {
        let name = &query.job_name;
        let name_matches = match name.strip_suffix('*') {
            _ if name.is_empty() => true,
            Some(prefix) => job.job_name().starts_with(prefix),
            None => job.job_name() == *name,
        };
        (query.queue.is_empty() || job.queue.as_str() == query.queue)
            && (query.host.is_empty() || job.exec_hosts.iter().any(|h| h.as_str() == query.host))
            && name_matches
    }
}

fn user_matches(job: &Job, user: &str, caller: &Caller) -> bool {
    match user {
        "" => job.user == caller.user,
        "all" => true,
        name => job.user.as_str() == name,
    }
}

fn state_matches(job: &Job, filter: u32) -> bool {
    use lava_batch_ll::JobStatus::*;
    let status = job.status;
    match filter {
        state_filter::UNFINISHED => !status.is_finished(),
        state_filter::DONE => status.is_finished(),
        state_filter::PENDING => status.is_pending(),
        state_filter::RUNNING => status == Run,
        state_filter::SUSPENDED => matches!(status, Psusp | Ususp | Ssusp),
        _ => true,
    }
}
