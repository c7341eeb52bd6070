//! Per-user and per-cluster limits, with LSF's names and words:
//!
//! - **`MAX_PEND_JOBS`** (`lsb.params`, for every user; `lsb.users`, per user,
//!   per user group or for `default`): the pending jobs (PEND and PSUSP, each
//!   element of an array counted) a user may have. A submission that would go
//!   beyond it is refused with LSF's `User <alice>: Pending job threshold
//!   reached` (a group's: `Group <staff>: ...`), and nothing is logged; other
//!   users go on. A user's own row may only lower the `lsb.params` value.
//! - **`MAX_JOBS`** (`lsb.users`): the job slots a user's running and suspended
//!   jobs (RUN, USUSP, SSUSP, UNKWN) may hold across the cluster, or a group's
//!   members together. A job that would go beyond it stays pending with LSF's
//!   reason, "The user has reached his/her job slot limit" ("The user has not
//!   enough job slots for the parallel job" when some are left but too few for
//!   its `-n`; for a group, "One of the user's groups has ..."), and starts once
//!   the user's jobs free slots (a finish runs a dispatch turn).
//! - **`LAVA_MAX_JOB_BYTES`** (`lsb.params`, LavaCore's own key; 1 MiB by
//!   default): the largest submission, counted by `SubmitSpec::submitted_bytes`
//!   (command or script, environment, every other text). A larger one is refused
//!   with a message naming its size and the limit.
//! - **`LAVA_MAX_PEND_BYTES`** (`lsb.params`, LavaCore's own key; 2 GiB by
//!   default): what one user's pending jobs may hold together (`Job::pending_bytes`:
//!   each submission's bytes, an array's elements sharing one copy). A submission
//!   that would pass it is refused like one over `MAX_PEND_JOBS`, with the sizes
//!   said; other users go on. So however `MAX_PEND_JOBS` is set, no user can make
//!   mbatchd hold more than this for her.
//!
//! **Replay.** Every limit decides at a live step, against the configuration in
//! force: a refused submission logs nothing, and a job held back by `MAX_JOBS`
//! logs nothing either (its JOB_START comes when it starts). Replay applies the
//! logged events without asking any limit, so it rebuilds what the live run did
//! whatever the configuration is at the restart, and `badmin reconfig` to lower
//! limits leaves the jobs already pending or running alone.

use lava_batch_ll::{ArraySpec, SubmitSpec, UserName};
use lava_batch_wire as wire;

use crate::effect::ClientReply;
use crate::machine::Mbd;

/// LSF's message for a submission over `MAX_PEND_JOBS` (lsberrno `LSBE_JOB_MAX_PEND`),
/// after `User <name>: ` or `Group <name>: `.
pub const PEND_THRESHOLD_REACHED: &str = "Pending job threshold reached";
/// LSF's pending reason of a job whose user holds `MAX_JOBS` slots (`PEND_USER_JOB_LIMIT`).
pub const REASON_USER_JOB_LIMIT: &str = "The user has reached his/her job slot limit";
/// LSF's pending reason of a parallel job whose user has fewer than its slots left
/// under `MAX_JOBS` (`PEND_USER_PJOB_LIMIT`).
pub const REASON_USER_PJOB_LIMIT: &str = "The user has not enough job slots for the parallel job";
/// LSF's pending reason of a job one of whose user's groups holds its `MAX_JOBS`
/// slots (`PEND_UGRP_JOB_LIMIT`).
pub const REASON_UGRP_JOB_LIMIT: &str = "One of the user's groups has reached its job slot limit";
/// LSF's pending reason of a parallel job one of whose user's groups has fewer
/// than its slots left (`PEND_UGRP_PJOB_LIMIT`).
pub const REASON_UGRP_PJOB_LIMIT: &str = "One of user's groups has not enough job slots for the parallel job";

/// Why a job cannot start under a `MAX_JOBS` limit, if it cannot: `used` slots
/// held, `n_slots` wanted, `limit` allowed.
pub(crate) fn over_job_limit(used: u32, n_slots: u32, limit: Option<u32>) -> Option<JobLimitHit> {
    let limit = limit?;
    if u64::from(used) + u64::from(n_slots) <= u64::from(limit) {
        return None;
    }
    Some(if used >= limit { JobLimitHit::Reached } else { JobLimitHit::TooFewLeft })
}

/// How a job is over a `MAX_JOBS` limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum JobLimitHit {
    /// Every slot of the limit is held.
    Reached,
    /// Some are left, fewer than the job's `-n`.
    TooFewLeft,
}

impl Mbd {
    /// The limits a submission by `user` must keep (see the module doc), with the
    /// refusal `bsub` prints when it does not.
    pub(crate) fn check_submission_limits(
        &self,
        user: &UserName,
        spec: &SubmitSpec,
    ) -> Result<(), ClientReply> {
        let bytes = spec.submitted_bytes();
        let max_bytes = self.config.max_job_bytes;
        if bytes > max_bytes {
            return Err(ClientReply::error(
                wire::ERR_REJECTED,
                format!(
                    "Job too large: the submission (command or script, environment and options) is {bytes} \
                     bytes, above the limit of {max_bytes} bytes (LAVA_MAX_JOB_BYTES in lsb.params)"
                ),
            ));
        }
        let n_new = match ArraySpec::parse(&spec.request().job_name) {
            Ok(Some(array)) => array.len(),
            _ => 1,
        };
        let pending = &self.store.index.pending_per_user;
        let own = self.config.user_limits.of(user).max_pend_jobs;
        let limit = match (self.config.max_pend_jobs, own) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mine = u64::from(pending.get(user).copied().unwrap_or(0));
        if limit.is_some_and(|limit| mine + n_new > u64::from(limit)) {
            return Err(ClientReply::error(
                wire::ERR_REJECTED,
                format!("User <{user}>: {PEND_THRESHOLD_REACHED}"),
            ));
        }
        let held = self.store.index.pending_bytes_per_user.get(user).copied().unwrap_or(0);
        let max_pend_bytes = self.config.max_pend_bytes;
        if held.saturating_add(bytes) > max_pend_bytes {
            return Err(ClientReply::error(
                wire::ERR_REJECTED,
                format!(
                    "User <{user}>: {PEND_THRESHOLD_REACHED} (the user's pending jobs hold {held} bytes; \
                     with this one of {bytes} bytes they would pass LAVA_MAX_PEND_BYTES, {max_pend_bytes})"
                ),
            ));
        }
        for group in &self.config.user_limits.groups {
            let Some(limit) = group.limit.max_pend_jobs else { continue };
            if !group.contains(user) {
                continue;
            }
            let together: u64 =
                pending.iter().filter(|(member, _)| group.contains(member)).map(|(_, n)| u64::from(*n)).sum();
            if together + n_new > u64::from(limit) {
                return Err(ClientReply::error(
                    wire::ERR_REJECTED,
                    format!("Group <{}>: {PEND_THRESHOLD_REACHED}", group.name),
                ));
            }
        }
        Ok(())
    }
}
