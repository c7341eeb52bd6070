//! Job dependencies (`bsub -w`): resolving the jobs an expression names, at
//! submission, and deciding at dispatch whether a pending job's condition holds.
//!
//! **Resolution.** `lava-batch-ll` parses the expression; here each job it
//! names becomes a [`JobRef`]: an id must be a job in memory (with `[index]`,
//! that element), a name means the submitting user's most recent job of that
//! name submitted before this one (LSF's rule; for an array, its name without
//! the index list). A job that cannot be found refuses the submission with
//! LSF's "No matching job found". The result is kept in the job (`Job::dependency`),
//! so a later job of the same name does not change what an earlier submission
//! meant. Resolution runs inside `apply` of JOB_NEW, against the state just
//! before it, so replay resolves exactly as the live step did.
//!
//! **Evaluation** gives each condition a value now and whether that value is
//! final: DONE and EXIT are for ever, so `done(x)` of a job that ended EXIT is
//! false for good. `!`, `&&` and `||` combine both (a conjunction with a final
//! false is final false, a disjunction with a final true is final true). A
//! pending job whose expression is true may be dispatched; false for good, it
//! stays pending with LSF's "Dependency condition invalid or never satisfied"
//! (the user kills it or, later, changes it); else it waits with "Job
//! dependency condition not satisfied". A reference to a whole array holds when
//! it holds for every element; it is decided from the array's counts of elements by
//! state, which the indexes keep (`Index::array_states`), so that a dispatch turn, a
//! `bjobs` line or a `bwait` question costs the same whatever the array's size (debug
//! builds check each such answer against the element-by-element one).
//!
//! **`bwait`** ([`Mbd::wait_query`]) asks whether an expression holds for its caller,
//! without a job: the first question resolves the names and ids as a submission of the
//! caller's would at that moment, and the answer gives the expression back with every job
//! as the id it meant and the submission number it was registered at; the later questions
//! send both, so that every answer is about the same jobs, as for a waiting job (a named job
//! cleaned since counts as cleaned, not as unknown). Nothing is recorded.
//!
//! **Cleaned jobs.** A job named by a dependency may be cleaned (`CLEAN_PERIOD`)
//! while its dependent still waits for slots. Its end is certain but not how it
//! ended: `ended()` and `started()` hold, `done()` and `exit()` become false for
//! good (the dependent shows "invalid or never satisfied"), as LSF treats a
//! condition on a job it no longer knows. Keep `CLEAN_PERIOD` above the time
//! dependents wait for slots. Job ids wrap (`state`): once the named job is
//! cleaned, a later job may get its id; a job submitted after the dependent is
//! never the one it named, so it counts as the cleaned job.

use lava_batch_ll::{CondKind, Condition, DependExpr, JobRef, JobSelector, JobStatus, UserName};
use lava_batch_wire as wire;

use crate::job::{Job, exit_code};
use crate::machine::Mbd;
use crate::state::Store;

/// LSF's pending reason of a job whose dependency does not hold yet.
pub const REASON_DEPEND_WAIT: &str = "Job dependency condition not satisfied";
/// LSF's pending reason of a job whose dependency can never hold.
pub const REASON_DEPEND_NEVER: &str = "Dependency condition invalid or never satisfied";

/// Why a dependency expression is refused at submission.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DependError {
    /// Not an expression (LSF's wording).
    #[error("{0}")]
    Syntax(lava_batch_ll::DependSyntaxError),
    /// It names a job that is not in memory (LSF's wording).
    #[error("No matching job found")]
    NoJob(JobSelector),
}

/// A condition's value now and whether it can still change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Truth {
    pub(crate) holds: bool,
    pub(crate) settled: bool,
}

impl Truth {
    fn not(self) -> Truth {
        Truth { holds: !self.holds, settled: self.settled }
    }

    fn and(self, other: Truth) -> Truth {
        let holds = self.holds && other.holds;
        let settled = if holds {
            self.settled && other.settled
        } else {
            (!self.holds && self.settled) || (!other.holds && other.settled)
        };
        Truth { holds, settled }
    }

    fn or(self, other: Truth) -> Truth {
        self.not().and(other.not()).not()
    }
}

impl Store {
    /// Resolves the dependency `text` of a job of `user` about to be submitted
    /// (every job in memory was submitted before it); `None` for no dependency.
    pub(crate) fn resolve_dependency(
        &self,
        user: &UserName,
        text: &str,
    ) -> Result<Option<DependExpr<JobRef>>, DependError> {
        if text.trim().is_empty() {
            return Ok(None);
        }
        let parsed = DependExpr::parse(text).map_err(DependError::Syntax)?;
        parsed.try_map(&mut |selector| self.resolve(user, selector)).map(Some)
    }

    fn resolve(&self, user: &UserName, selector: &JobSelector) -> Result<JobRef, DependError> {
        let no_job = || DependError::NoJob(selector.clone());
        let (id, index) = match selector {
            JobSelector::Id { id, index } => (*id, *index),
            JobSelector::Name { name, index } => (self.latest_named(user, name).ok_or_else(no_job)?, *index),
        };
        let job = JobRef::new(id, index).ok_or_else(no_job)?;
        let known = if index == 0 { self.contains_id(id) } else { self.contains(job) };
        if known { Ok(job) } else { Err(no_job()) }
    }

    /// The id of `user`'s most recent job called `name` (an array by its name
    /// without the index list): the highest submission number, not the highest
    /// id, which wraps.
    fn latest_named(&self, user: &UserName, name: &str) -> Option<u32> {
        let base = |job: &Job| {
            let job_name = &job.spec.request().job_name;
            match job_name.find('[') {
                Some(open) if job.job.index() != 0 => job_name[..open].to_owned(),
                _ => job.job_name(),
            }
        };
        self.jobs_newest_first().find(|job| &job.user == user && base(job) == name).map(|job| job.job.id())
    }

    /// Whether any job with `id` (a single job or an array element) is in memory.
    pub(crate) fn contains_id(&self, id: u32) -> bool {
        !self.refs_of(id).is_empty()
    }

    /// The value of `expr` now, for a dependent job of submission number `dependent`.
    pub(crate) fn evaluate(&self, expr: &DependExpr<JobRef>, dependent: u64) -> Truth {
        match expr {
            DependExpr::Cond(cond) => self.condition(cond, dependent),
            DependExpr::Not(inner) => self.evaluate(inner, dependent).not(),
            DependExpr::And(a, b) => self.evaluate(a, dependent).and(self.evaluate(b, dependent)),
            DependExpr::Or(a, b) => self.evaluate(a, dependent).or(self.evaluate(b, dependent)),
        }
    }

    /// A condition on one job, or on every element of an array.
    fn condition(&self, cond: &Condition<JobRef>, dependent: u64) -> Truth {
        if let Some(truth) = self.whole_array(cond, dependent) {
            debug_assert_eq!(truth, self.element_by_element(cond, dependent), "{cond:?}");
            return truth;
        }
        self.element_by_element(cond, dependent)
    }

    /// A condition on a whole array, from its counts of elements by state
    /// (`Index::array_states`): the conjunction of its elements' conditions, at a cost that
    /// does not grow with the array. `None` when the counts cannot say: not a whole array in
    /// memory, an array submitted after the dependent (its id was reused), or an exit-code
    /// comparison (each element's code counts).
    fn whole_array(&self, cond: &Condition<JobRef>, dependent: u64) -> Option<Truth> {
        if cond.job.index() != 0 || matches!(cond.kind, CondKind::Exit(Some(_))) {
            return None;
        }
        let states = self.index.array_states.get(&cond.job.id()).filter(|s| s.submit_seq < dependent)?;
        let finished = states.done + states.exit;
        Some(match cond.kind {
            // Not all DONE: false for good once one ended EXIT.
            CondKind::Done => {
                let holds = states.done == states.total;
                Truth { holds, settled: holds || states.exit > 0 }
            }
            CondKind::Exit(_) => {
                let holds = states.exit == states.total;
                Truth { holds, settled: holds || states.done > 0 }
            }
            CondKind::Ended => {
                let holds = finished == states.total;
                Truth { holds, settled: holds }
            }
            CondKind::Started => {
                let holds = finished + states.started == states.total;
                Truth { holds, settled: holds }
            }
        })
    }

    /// [`Store::condition`] by visiting each element (or the one job).
    fn element_by_element(&self, cond: &Condition<JobRef>, dependent: u64) -> Truth {
        let mut refs = if cond.job.index() == 0 { self.refs_of(cond.job.id()) } else { Vec::new() };
        if refs.is_empty() {
            refs.push(cond.job);
        }
        refs.into_iter()
            .map(|job| self.one_condition(cond.kind, job, dependent))
            .fold(Truth { holds: true, settled: true }, Truth::and)
    }

    fn one_condition(&self, kind: CondKind, job: JobRef, dependent: u64) -> Truth {
        // A job submitted after the dependent took the id of the one it named,
        // which was cleaned (ids wrap): that one is the job the condition is on.
        let status = match (self.live(job), self.finished(job)) {
            (Some(j), _) if j.submit_seq < dependent => Some(j.status),
            (_, Some(frozen)) if frozen.submit_seq() < dependent => Some(frozen.status()),
            _ => None,
        };
        let Some(status) = status else {
            // Cleaned: it ended, how is no longer known (see the module doc).
            let holds = matches!(kind, CondKind::Ended | CondKind::Started);
            return Truth { holds, settled: true };
        };
        let finished = status.is_finished();
        let holds = match kind {
            CondKind::Done => status == JobStatus::Done,
            CondKind::Ended => finished,
            CondKind::Started => finished || status.is_started(),
            CondKind::Exit(None) => status == JobStatus::Exit,
            CondKind::Exit(Some((op, code))) => {
                status == JobStatus::Exit
                    && self
                        .job(job)
                        .and_then(|j| j.finish.as_ref().map(|f| exit_code(f.wait_status)))
                        .is_some_and(|value| op.holds(value, code))
            }
        };
        // Only a finished job's conditions are final; started() also once it holds.
        let settled = finished || (kind == CondKind::Started && holds);
        Truth { holds, settled }
    }
}

impl Mbd {
    /// `bwait`: whether `query`'s condition holds now for `caller` (the module doc). A
    /// read: it changes nothing.
    pub fn wait_query(&self, caller: &crate::Caller, query: &wire::WaitQuery) -> wire::WaitQueryReply {
        let refused = |message: String| wire::WaitQueryReply {
            code: wire::WAIT_REFUSED,
            message,
            condition: String::new(),
            registered: 0,
        };
        let parsed = match DependExpr::parse(&query.condition) {
            Ok(parsed) => parsed,
            Err(error) => return refused(error.to_string()),
        };
        let first = query.registered == 0;
        let resolved = parsed.try_map(&mut |selector| match selector {
            // Registered: the job it meant, even if cleaned since.
            JobSelector::Id { id, index } if !first => {
                JobRef::new(*id, *index).ok_or_else(|| DependError::NoJob(selector.clone()))
            }
            _ => self.store.resolve(&caller.user, selector),
        });
        let expr = match resolved {
            Ok(expr) => expr,
            Err(error) => return refused(error.to_string()),
        };
        let registered = if first { self.store.last_submission + 1 } else { query.registered };
        let code = match self.store.evaluate(&expr, registered) {
            Truth { holds: true, .. } => wire::WAIT_HOLDS,
            Truth { settled: true, .. } => wire::WAIT_NEVER,
            Truth { settled: false, .. } => wire::WAIT_NOT_YET,
        };
        let by_id = expr.try_map(&mut |job| {
            Ok::<_, std::convert::Infallible>(JobSelector::Id { id: job.id(), index: job.index() })
        });
        let condition = by_id.map(|expr| expr.to_string()).unwrap_or_default();
        wire::WaitQueryReply { code, message: String::new(), condition, registered }
    }

    /// Why pending `job` may not be dispatched now because of its dependency, if so.
    pub(crate) fn dependency_hold(&self, job: &Job) -> Option<&'static str> {
        let truth = self.store.evaluate(job.dependency.as_ref()?, job.submit_seq);
        match truth {
            Truth { holds: true, .. } => None,
            Truth { settled: true, .. } => Some(REASON_DEPEND_NEVER),
            Truth { settled: false, .. } => Some(REASON_DEPEND_WAIT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the three-valued combination is right for every pair of values.
    #[test]
    fn truth_table() {
        let (t, f, tf, ff) = (
            Truth { holds: true, settled: false },
            Truth { holds: false, settled: false },
            Truth { holds: true, settled: true },
            Truth { holds: false, settled: true },
        );
        assert_eq!(f.and(ff), ff);
        assert_eq!(t.and(tf), t);
        assert_eq!(tf.and(tf), tf);
        assert_eq!(t.and(f), f);
        assert_eq!(f.or(tf), tf);
        assert_eq!(ff.or(ff), ff);
        assert_eq!(ff.or(f), f);
        assert_eq!(ff.not(), tf);
    }
}
