//! `bjobs`: select jobs by the filters of a [`wire::JobQuery`] and describe
//! them. Reading only; nothing is logged.
//!
//! Named jobs are shown whatever their state and owner (LSF does so); the
//! queue, host and name filters still apply to them, and names that are not
//! in memory are listed in `not_found`. Without names, the user filter (`''`
//! for the caller, `all`, or a name) and the state filter select (on the
//! durable state: a job shown UNKWN is still RUN or suspended to the filter). Any user may
//! see any job, as in LSF. A job-name filter ending in `*` matches by prefix;
//! an array's name matches all its elements, `name[3]` one. A bare array id
//! names every element.
//!
//! An answer is cut into pages: jobs are added in (id, index) order (from after
//! `after_job`/`after_index`) while their encoding stays within
//! [`QUERY_REPLY_BYTES_MAX`], and `next_after`/`next_after_index` name the last
//! one when more remain (index 0 for a job that is not an array element). A page
//! holds at least one job, so a command asking again always progresses; a page may
//! end inside an array, the next one resuming at its following element. Each page
//! is read from the state of its own moment, as every LSF query is.

use std::borrow::Cow;
use std::collections::BTreeMap;

use lava_batch_ll::JobRef;
use lava_batch_wire::{self as wire, state_filter};

use crate::effect::ClientReply;
use crate::input::{Caller, ClientId};
use crate::job::Job;
use crate::machine::{Mbd, Step};

/// Encoded bytes of the jobs of one JOB_QUERY_REPLY page at most (the first job
/// of a page is always taken); half the shells' frame limit, so that a page always
/// fits a frame with room for the rest of the reply.
pub const QUERY_REPLY_BYTES_MAX: usize = 1 << 20;

impl Mbd {
    pub(crate) fn query(&self, step: &mut Step, client: ClientId, caller: &Caller, query: &wire::JobQuery) {
        if query.state_filter > state_filter::SUSPENDED {
            let reply = ClientReply::error(
                wire::ERR_BAD_REQUEST,
                format!("Unknown state filter {}", query.state_filter),
            );
            return self.reply(step, client, reply);
        }
        let mut not_found = Vec::new();
        let after = crate::state::refs_after(query.after_job, query.after_index);
        // The candidates in id order, visited lazily: a page decodes only the
        // finished jobs it walks past, not every one in memory.
        let candidates: Box<dyn Iterator<Item = Cow<'_, Job>> + '_> = if query.jobs.is_empty() {
            let wanted =
                |job: &Job| user_matches(job, &query.user, caller) && state_matches(job, query.state_filter);
            // Only the filters that can show a finished job read the finished (frozen) ones.
            let jobs: Box<dyn Iterator<Item = Cow<'_, Job>>> = match query.state_filter {
                state_filter::DONE | state_filter::ALL => Box::new(self.store.jobs_after(after)),
                _ => Box::new(self.store.live_jobs_after(after).map(Cow::Borrowed)),
            };
            Box::new(jobs.filter(move |job| wanted(job)))
        } else {
            let mut selected: BTreeMap<JobRef, Cow<'_, Job>> = BTreeMap::new();
            for wanted in &query.jobs {
                let found: Vec<Cow<'_, Job>> = self
                    .expand(*wanted, false)
                    .into_iter()
                    .filter_map(|job| lava_batch_ll::job_ref("job", job).ok().and_then(|job| self.job(job)))
                    .collect();
                if found.is_empty() && !not_found.contains(wanted) {
                    not_found.push(*wanted);
                }
                for job in found.into_iter().filter(|job| std::ops::RangeBounds::contains(&after, &job.job)) {
                    selected.insert(job.job, job);
                }
            }
            Box::new(selected.into_values())
        };
        let mut jobs: Vec<wire::JobInfo> = Vec::new();
        let (mut page_bytes, mut scratch) = (0, Vec::new());
        let (mut next_after, mut next_after_index) = (0, 0);
        for job in candidates.filter(|job| self.place_matches(job, query)) {
            let mut info = job.info(self.config.queue(&job.queue));
            if job.status == lava_batch_ll::JobStatus::Pend
                && let Some(reason) = self.held_back(&job)
            {
                info.reason = reason.to_owned();
            }
            // UNKWN is display state: lim's view, never logged (see `hosts`).
            info.status = self.shown_status(&job).bits();
            if let Some(reason) = self.pending_reason_shown(&job) {
                info.reason = reason;
            }
            scratch.clear();
            page_bytes += lava_xdr::serialize_into(&info, &mut scratch).expect("a job's description encodes");
            if page_bytes > QUERY_REPLY_BYTES_MAX
                && let Some(last) = jobs.last()
            {
                (next_after, next_after_index) = (last.job.job_id, last.job.array_index);
                break;
            }
            jobs.push(info);
        }
        let reply = wire::JobQueryReply { jobs, not_found, next_after, next_after_index };
        self.reply(step, client, ClientReply::JobQuery(reply));
    }

    fn place_matches(&self, job: &Job, query: &wire::JobQuery) -> bool {
        (query.queue.is_empty() || job.queue.as_str() == query.queue)
            && (query.host.is_empty() || job.exec_hosts.iter().any(|h| h.as_str() == query.host))
            && (query.job_name.is_empty()
                || name_matches(&query.job_name, &job.job_name(), job.job.index() != 0))
    }
}

/// Whether a job whose name is shown as `shown` (`name[index]` for an array
/// element) is selected by `-J pattern`, as LSF 10 selects: `*` matches any
/// run of characters anywhere in the name (`*sim*`, `sim*`, `*_01`), never
/// inside an array index (`job1[*]` selects nothing); an array's name without
/// an index selects all its elements (`-J sweep`, `-J 'sw*'`); `name[3]`
/// selects that element (`-J '*AAA*[1]'`: the first element of every array
/// whose name holds `AAA`).
pub(crate) fn name_matches(pattern: &str, shown: &str, element: bool) -> bool {
    if let Some(open) = pattern.find('[')
        && pattern[open..].contains('*')
    {
        return false;
    }
    let base = shown.split('[').next().filter(|_| element);
    glob(pattern, shown) || base.is_some_and(|base| glob(pattern, base))
}

/// `*`-only wildcard matching of the whole `text` (iterative, with one
/// backtracking point: linear in practice, never exponential).
fn glob(pattern: &str, text: &str) -> bool {
    let (pattern, text): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut p_idx, mut t_idx) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t_idx < text.len() {
        match pattern.get(p_idx) {
            Some('*') => {
                star = Some((p_idx, t_idx));
                p_idx += 1;
            }
            Some(c) if *c == text[t_idx] => {
                p_idx += 1;
                t_idx += 1;
            }
            _ => match star {
                // Let the last star swallow one more character.
                Some((star_p, star_t)) => {
                    p_idx = star_p + 1;
                    t_idx = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p_idx..].iter().all(|c| *c == '*')
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

#[cfg(test)]
mod tests {
    use super::name_matches;

    // Goal: `-J` as LSF 10 reads it: `*` anywhere (Snakemake's `*<uuid>*`),
    // exact names, array names for their elements, never a star in an index.
    #[test]
    fn job_name_patterns() {
        let uuid = "snakejob.a.1.0c5a9f7e-2b1d-4c6e-9d2a-1f0e3b4c5d6e.sh";
        assert!(name_matches("*0c5a9f7e-2b1d-4c6e-9d2a-1f0e3b4c5d6e*", uuid, false));
        assert!(name_matches("snakejob*", uuid, false));
        assert!(name_matches("*.sh", uuid, false));
        assert!(name_matches("*", uuid, false));
        assert!(name_matches("s*a*1*sh", uuid, false));
        assert!(name_matches(uuid, uuid, false));
        assert!(!name_matches("*0c5a9f7f*", uuid, false));
        assert!(!name_matches("snakejob", uuid, false));
        assert!(!name_matches("*.s", uuid, false));
        // Array elements: shown as `name[index]`.
        assert!(name_matches("sweep", "sweep[3]", true));
        assert!(name_matches("sw*", "sweep[3]", true));
        assert!(name_matches("*eep", "sweep[3]", true));
        assert!(name_matches("sweep[3]", "sweep[3]", true));
        assert!(name_matches("*wee*[3]", "sweep[3]", true));
        assert!(!name_matches("*wee*[4]", "sweep[3]", true));
        assert!(!name_matches("sweep[*]", "sweep[3]", true));
        assert!(!name_matches("sweep", "sweep[3]", false));
        // Many stars on a long name stay quick.
        let long = "a".repeat(4000);
        assert!(!name_matches(&format!("{}b", "*a".repeat(50)), &long, false));
    }
}
