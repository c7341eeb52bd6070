//! `bqueues` ([`Mbd::queue_query`]): a read of the state in memory, like
//! `bhosts`. Per queue its configuration and the slots of its unfinished jobs
//! by state, counted as `bjobs` shows them: PEND is pending, RUN is running
//! (UNKWN included: running as far as mbatchd knows), SUSP is every suspended
//! state (PSUSP, USUSP, SSUSP), and NJOBS is their sum.

use lava_batch_ll::JobStatus;
use lava_batch_wire as wire;

use crate::machine::Mbd;

impl Mbd {
    /// `bqueues`: the queues `query` names (all when it names none), highest
    /// priority first and in `lsb.queues` order among equals, with names that
    /// are not queues listed in `not_found` (each once).
    pub fn queue_query(&self, query: &wire::QueueQuery) -> wire::QueueQueryReply {
        let wanted = |name: &str| query.queues.is_empty() || query.queues.iter().any(|q| q == name);
        let mut queues: Vec<wire::QueueInfo> = self
            .config
            .queues
            .iter()
            .filter(|queue| wanted(queue.name.as_str()))
            .map(|queue| wire::QueueInfo {
                name: queue.name.to_string(),
                priority: queue.priority,
                default: queue.default,
                hosts: queue.hosts.iter().map(ToString::to_string).collect(),
                n_jobs: 0,
                n_pend: 0,
                n_run: 0,
                n_susp: 0,
            })
            .collect();
        for (_, job) in self.store.live_jobs() {
            let Some(info) = queues.iter_mut().find(|info| info.name == job.queue.as_str()) else {
                continue;
            };
            let slots = job.n_slots();
            let count = match job.status {
                JobStatus::Pend => &mut info.n_pend,
                JobStatus::Run | JobStatus::Unknown => &mut info.n_run,
                JobStatus::Psusp | JobStatus::Ususp | JobStatus::Ssusp => &mut info.n_susp,
                JobStatus::Done | JobStatus::Exit => continue,
            };
            *count += slots;
            info.n_jobs += slots;
        }
        queues.sort_by_key(|queue| std::cmp::Reverse(queue.priority));
        let mut not_found: Vec<String> = Vec::new();
        for name in &query.queues {
            if !self.config.queues.iter().any(|q| q.name.as_str() == name) && !not_found.contains(name) {
                not_found.push(name.clone());
            }
        }
        wire::QueueQueryReply { queues, not_found }
    }
}
