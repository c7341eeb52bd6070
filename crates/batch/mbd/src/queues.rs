//! `bqueues` ([`Mbd::queue_query`]) and the cluster part of `badmin showstatus`
//! ([`Mbd::cluster_counts`]): reads of the state in memory, like `bhosts`. Per
//! queue its configuration and the slots of its unfinished jobs by state,
//! counted as LSF counts them (Lava's `IS_PEND` covers PSUSP): PEND is every
//! pending job (PEND and PSUSP, the jobs `bjobs -p` lists), RUN is running
//! (UNKWN included: running as far as mbatchd knows), SSUSP and USUSP are the
//! suspended started jobs, SUSP their sum, and NJOBS the sum of all.
//!
//! The queue's status is its `badmin qclose`/`qinact` state; its limits are
//! those of the configuration mbatchd holds, and a limit the configuration
//! does not carry is shown unlimited.

use std::collections::BTreeSet;

use lava_batch_ll::JobStatus;
use lava_batch_wire as wire;

use crate::machine::Mbd;

/// The cluster part of `badmin showstatus`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterCounts {
    /// Execution hosts by `bhosts` status: ok, closed, unreach, unavail.
    pub hosts: [u32; 4],
    /// Jobs in memory: pending (PEND), running (RUN), suspended (PSUSP, USUSP,
    /// SSUSP), finished and not yet cleaned (DONE, EXIT).
    pub jobs: [u32; 4],
    /// Users with unfinished jobs.
    pub active_users: u32,
}

impl Mbd {
    /// The cluster part of `badmin showstatus`, counted as `bhosts` and `bjobs` show them.
    pub fn cluster_counts(&self) -> ClusterCounts {
        let mut hosts = [0; 4];
        for host in self.host_query(&wire::HostQuery { hosts: vec![] }).hosts {
            let idx = match host.status {
                wire::HOST_OK => 0,
                wire::HOST_CLOSED_FULL | wire::HOST_CLOSED_ADM | wire::HOST_CLOSED_EXCL => 1,
                wire::HOST_UNREACH => 2,
                _ => 3,
            };
            hosts[idx] += 1;
        }
        let mut jobs = [0, 0, 0, u32::try_from(self.store.n_finished()).unwrap_or(u32::MAX)];
        let mut users = BTreeSet::new();
        for (_, job) in self.store.live_jobs() {
            let idx = match job.status {
                JobStatus::Pend => 0,
                JobStatus::Run | JobStatus::Unknown => 1,
                JobStatus::Psusp | JobStatus::Ususp | JobStatus::Ssusp => 2,
                JobStatus::Done | JobStatus::Exit => 3,
            };
            jobs[idx] += 1;
            users.insert(&job.user);
        }
        ClusterCounts { hosts, jobs, active_users: u32::try_from(users.len()).unwrap_or(u32::MAX) }
    }

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
                closed: self.queue_closed(&queue.name),
                inactive: self.queue_inactive(&queue.name),
                nice: queue.nice,
                description: queue.description.clone(),
                users: queue.users.iter().flatten().map(ToString::to_string).collect(),
                max_slots: queue.qjob_limit.unwrap_or(wire::QUEUE_UNLIMITED),
                user_slot_limit: queue.ujob_limit.unwrap_or(wire::QUEUE_UNLIMITED),
                processor_slot_limit_milli: queue.pjob_limit_milli.unwrap_or(wire::QUEUE_UNLIMITED),
                host_slot_limit: queue.hjob_limit.unwrap_or(wire::QUEUE_UNLIMITED),
                run_limit_s: queue.run_limit_s.as_ref().map_or(0, |limit| limit.max),
                mem_limit_kb: queue.mem_limit_kb.as_ref().map_or(0, |limit| limit.max),
                n_ssusp: 0,
                n_ususp: 0,
                n_reserved: 0,
                pre_exec: queue.pre_exec.clone(),
                post_exec: queue.post_exec.clone(),
                limits: queue.limits.maxima(),
                job_starter: queue.job_starter.clone(),
                policies: queue.policies(),
                default_run_limit_s: queue.run_limit_s.and_then(|limit| limit.default).unwrap_or(0),
                default_mem_limit_kb: queue.mem_limit_kb.and_then(|limit| limit.default).unwrap_or(0),
                default_limits: queue.limits.defaults(),
            })
            .collect();
        for (_, job) in self.store.live_jobs() {
            let Some(info) = queues.iter_mut().find(|info| info.name == job.queue.as_str()) else {
                continue;
            };
            let slots = job.n_slots();
            match job.status {
                JobStatus::Pend | JobStatus::Psusp => info.n_pend += slots,
                JobStatus::Run | JobStatus::Unknown => info.n_run += slots,
                JobStatus::Ssusp => {
                    info.n_ssusp += slots;
                    info.n_susp += slots;
                }
                JobStatus::Ususp => {
                    info.n_ususp += slots;
                    info.n_susp += slots;
                }
                JobStatus::Done | JobStatus::Exit => continue,
            }
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
