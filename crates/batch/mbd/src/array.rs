//! Job arrays: `bsub -J "name[index_list]%N"`, checked at submission, and what
//! sets an array apart afterwards.
//!
//! One JOB_NEW (job index 0, the array specification in its job name) makes
//! every element: `Store::apply` creates a job `ID[INDEX]` per index, sharing
//! one copy of the submission (`Job`). From then on an element is a job like
//! any other: it is dispatched, runs (sbatchd sets `LSB_JOBINDEX` and expands
//! `%I` from its reference), finishes, is signalled and cleaned on its own.
//! What is particular to arrays is here:
//! - at submission, LSF's errors: a malformed list or an index used twice is
//!   "Job array index error", an index above `MAX_JOB_ARRAY_SIZE` (lsb.params,
//!   1000 by default) "Job array index too large";
//! - `%N`: at most N elements of the array are started at once; a pending
//!   element beyond it waits with [`REASON_ARRAY_LIMIT`];
//! - a bare array id in `bjobs`, `bkill`, `bstop`, `bresume` means every element
//!   ([`Mbd::expand`]); `ID[INDEX]` means that element.
//!
//! Dispatch asks [`Mbd::held_back`] about every pending candidate: it combines
//! the `%N` limit and the job's dependency (`depend`), and is also what `bjobs`
//! shows as the pending reason.

use lava_batch_ll::{ArraySpec, JobRef, SubmitSpec};
use lava_batch_wire as wire;

use crate::effect::ClientReply;
use crate::job::Job;
use crate::machine::Mbd;

/// The pending reason of an element held back by its array's `%N`.
pub const REASON_ARRAY_LIMIT: &str = "The job array has reached its running element limit";

impl Mbd {
    /// Checks the array specification in `spec`'s job name, if it has one.
    pub(crate) fn check_array(&self, spec: &SubmitSpec) -> Result<(), ClientReply> {
        let index_error =
            |error: &dyn std::fmt::Display| ClientReply::error(wire::ERR_BAD_REQUEST, error.to_string());
        let Some(array) = ArraySpec::parse(&spec.request().job_name).map_err(|error| index_error(&error))?
        else {
            return Ok(());
        };
        if array.max_index() > self.config.max_job_array_size {
            return Err(ClientReply::error(wire::ERR_REJECTED, "Job array index too large"));
        }
        if array.has_duplicate_indexes() {
            return Err(index_error(&lava_batch_ll::ArrayError::Index));
        }
        Ok(())
    }

    /// Why pending `job` may not be dispatched now, if something holds it back:
    /// its array's `%N`, or its dependency.
    pub(crate) fn held_back(&self, job: &Job) -> Option<&'static str> {
        self.array_limit_hold(job).or_else(|| self.dependency_hold(job))
    }

    fn array_limit_hold(&self, job: &Job) -> Option<&'static str> {
        if job.job.index() == 0 {
            return None;
        }
        let running_max = lava_batch_ll::running_max_of(&job.spec.request().job_name)?;
        let n_started = self.store.index.array_started.get(&job.job.id()).copied().unwrap_or(0);
        (n_started >= running_max).then_some(REASON_ARRAY_LIMIT)
    }

    /// The jobs a command's reference means: `ID[INDEX]` that element, `ID` that
    /// job or, for an array, every element in memory; `only_live` keeps the
    /// unfinished elements of an array when it has any (what a signal acts on).
    pub(crate) fn expand(&self, job: wire::WireJobRef, only_live: bool) -> Vec<wire::WireJobRef> {
        let Ok(job_ref) = lava_batch_ll::job_ref("job", job) else {
            return vec![job];
        };
        if job_ref.index() != 0 || self.store.contains(job_ref) {
            return vec![job];
        }
        let elements = self.store.refs_of(job_ref.id());
        if elements.is_empty() {
            return vec![job];
        }
        let live: Vec<JobRef> = elements.iter().copied().filter(|e| self.store.live(*e).is_some()).collect();
        let chosen = if only_live && !live.is_empty() { live } else { elements };
        chosen.into_iter().map(JobRef::to_wire).collect()
    }
}
