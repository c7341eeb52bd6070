//! Host liveness as the master lim sees it, and `bhosts`.
//!
//! [`Input::HostAvailability`](crate::Input::HostAvailability) carries lim's
//! view of one host: the shell polls the master lim and steps each change;
//! [`Input::HostLoad`](crate::Input::HostLoad) carries the host's load indices
//! and static facts, which `-R` selects and orders by (same rules: transient,
//! never logged, forgotten by a restart; a host without them has no load).
//! It is transient state, like the connected hosts: nothing is logged, a
//! restart forgets it (every host is available until lim says otherwise),
//! and snapshots never hold it. An unavailable host:
//! - gets no new dispatches (its sbatchd may still be connected: lim's view
//!   wins, as in LSF);
//! - has its started jobs shown as UNKWN by `bjobs`, computed at query time
//!   from the durable state (RUN, SSUSP or USUSP stays in the log) and this
//!   transient flag, so they show their real state again as soon as the host
//!   is available.
//!
//! `bhosts` ([`Mbd::host_query`]) is a read of the state in memory: per host
//! the slots of started jobs by state, the slot limit, and the status —
//! `unavail` (lim), `unreach` (lim sees the host, its sbatchd is not
//! connected), `closed_Adm` (`badmin hclose`), `closed_Lock` and
//! `closed_Busy` (lim's status word: `lsadmin limlock`, a load index beyond
//! its lsf.cluster threshold; such a host gets no new job, its running jobs
//! go on), `closed_Full` (every slot in use), else `ok`. A lock or busy
//! flag lim reported stays until lim says otherwise (a master lim that
//! cannot be asked changes nothing).

use std::collections::BTreeMap;

use lava_batch_ll::{HostName, JobStatus};
use lava_batch_wire as wire;

use crate::input::LimFacts;
use crate::job::Job;
use crate::machine::{Mbd, Step};

impl Mbd {
    /// lim's view of `host` changed. A host that becomes available may take
    /// jobs at once, so dispatch runs at the end of the step.
    pub(crate) fn host_availability(&mut self, step: &mut Step, host: HostName, available: bool) {
        if self.config.host(&host).is_none() {
            // Only cluster hosts are tracked; lim may list client hosts too.
            return;
        }
        if available {
            if self.links.unavailable.remove(&host) {
                step.dispatch = true;
            }
        } else {
            self.links.unavailable.insert(host);
        }
    }

    /// lim's load and static facts of `host`: kept for the next dispatch turn
    /// (at most `MBD_SLEEP_TIME` away), not acted on at once, so that a stream
    /// of load reports does not make a turn each.
    pub(crate) fn host_load(&mut self, host: HostName, facts: LimFacts) {
        if self.config.host(&host).is_some() {
            self.links.lim.insert(host, facts);
        }
    }

    /// Whether lim has not marked `host` unavailable.
    pub fn host_available(&self, host: &HostName) -> bool {
        !self.links.unavailable.contains(host)
    }

    /// The status `bjobs` shows for `job`: UNKWN for a started job on a host
    /// lim marked unavailable, else its own.
    pub(crate) fn shown_status(&self, job: &Job) -> JobStatus {
        let started = matches!(job.status, JobStatus::Run | JobStatus::Ssusp | JobStatus::Ususp);
        if started && job.exec_hosts.iter().any(|host| self.links.unavailable.contains(host)) {
            JobStatus::Unknown
        } else {
            job.status
        }
    }

    /// `bhosts`: the execution hosts `query` names (all when it names none),
    /// in `lsf.cluster` order, with names that are not execution hosts listed
    /// in `not_found` (each once).
    pub fn host_query(&self, query: &wire::HostQuery) -> wire::HostQueryReply {
        #[derive(Default)]
        struct Counts {
            run: u32,
            ssusp: u32,
            ususp: u32,
        }
        let mut counts: BTreeMap<&HostName, Counts> = BTreeMap::new();
        // Only started jobs hold a host: a long backlog of pending ones is not read.
        for job in self.store.index.started.iter().map(|id| self.store.live_job(*id)) {
            for host in &job.exec_hosts {
                let entry = counts.entry(host).or_default();
                match job.status {
                    JobStatus::Run => entry.run += 1,
                    JobStatus::Ssusp => entry.ssusp += 1,
                    JobStatus::Ususp => entry.ususp += 1,
                    _ => {}
                }
            }
        }
        let wanted = |name: &str| query.hosts.is_empty() || query.hosts.iter().any(|h| h == name);
        let hosts = self
            .config
            .hosts
            .iter()
            .filter(|host| wanted(host.name.as_str()))
            .map(|host| {
                let link = self.links.hosts.get(&host.name);
                let max_slots = match (host.max_jobs, link) {
                    (Some(n), _) => n,
                    (None, Some(link)) => link.n_cpus,
                    (None, None) => 0,
                };
                let used = self.store.index.slots_used.get(&host.name).copied().unwrap_or(0);
                let status = if !self.host_available(&host.name) {
                    wire::HOST_UNAVAIL
                } else if !link.is_some_and(|link| link.connected) {
                    wire::HOST_UNREACH
                } else if self.store.control.closed_hosts.contains(&host.name) {
                    wire::HOST_CLOSED_ADM
                } else if self.links.lim.get(&host.name).is_some_and(|lim| lim.locked) {
                    wire::HOST_CLOSED_LOCK
                } else if self.links.lim.get(&host.name).is_some_and(|lim| {
                    lim.busy || lim.load.as_ref().is_some_and(|load| host.beyond_load_sched(load).is_some())
                }) {
                    wire::HOST_CLOSED_BUSY
                } else if max_slots != wire::HOST_SLOTS_UNLIMITED && used >= max_slots {
                    wire::HOST_CLOSED_FULL
                } else {
                    wire::HOST_OK
                };
                let c = counts.remove(&host.name).unwrap_or_default();
                wire::HostInfo {
                    name: host.name.to_string(),
                    status,
                    max_slots,
                    n_jobs: used,
                    n_run: c.run,
                    n_ssusp: c.ssusp,
                    n_ususp: c.ususp,
                    n_reserved: 0,
                    user_slot_limit: host.user_job_limit.unwrap_or(wire::HOST_SLOTS_UNLIMITED),
                }
            })
            .collect();
        let mut not_found: Vec<String> = Vec::new();
        for name in &query.hosts {
            if !self.config.hosts.iter().any(|h| h.name.as_str() == name) && !not_found.contains(name) {
                not_found.push(name.clone());
            }
        }
        wire::HostQueryReply { hosts, not_found }
    }
}
