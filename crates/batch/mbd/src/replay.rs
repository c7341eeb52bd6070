//! Replay of `lsb.events` ([`Mbd::replay`]) and the events it ignores, as the
//! replay invariants of the mbd-sbd protocol (section 7) ask: "DONE/EXIT
//! dominate", "duplicate stages are ignored" (docs/batch.md, "Recovery").
//!
//! [`Mbd::apply`] stays strict: every event a step decides goes through it,
//! and one that does not fit the state is a bug of the logic (`Mbd::record`
//! panics), never something to log. Replay is the same function with exactly
//! two kinds of event let through unapplied, each of which `apply` refuses:
//!
//! - **an event after DONE/EXIT**: any event about a job that is DONE or EXIT,
//!   except the two a finished job takes (JOB_REQUEUE of a finished job,
//!   JOB_CLEAN). A finished job never changes otherwise, so the event can only
//!   be a late copy of something the finish already settled.
//! - **a duplicated stage**: JOB_START of a job already started on the same
//!   hosts, and JOB_START_ACCEPT of a job whose start is already accepted (the
//!   first accept stands, as a live step answers a second NEW_JOB_REPLY with
//!   an ACK and no event). A duplicate JOB_EXECUTE needs no leniency: EXECUTE
//!   updates metadata only (section 6, rule 3), so it applies. A duplicated
//!   FINISH is the first kind.
//!
//! An ignored event changes nothing; [`Mbd::replay`] says so and which, so
//! that the shell can count and log it (the logic logs nothing). Anything else
//! that does not fit (an event for a job never submitted, a dispatch of a job
//! started elsewhere, an accept of a pending job, a damaged record) is still an
//! error that stops replay: those are not the duplicates and late copies
//! section 7 speaks of, and guessing would build a state no live run reached.
//!
//! Since live steps apply every event strictly, a log this mbatchd wrote holds
//! no event replay ignores (the test harness replays every test's log with
//! [`Mbd::replay`] and checks that each event applied); the leniency only
//! matters for a log that holds duplicates from elsewhere, which mbatchd used
//! to refuse to start with.

use std::fmt;

use lava_batch_ll::{JobRef, JobStatus};

use crate::MbdError;
use crate::event::{Event, Requeued};
use crate::machine::Mbd;
use crate::state::Store;

/// What [`Mbd::replay`] did with one logged event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replayed {
    /// The event was applied, exactly as [`Mbd::apply`] applies it.
    Applied,
    /// The event was ignored (see the module doc); the state is unchanged.
    Ignored(IgnoredEvent),
}

/// A logged event that replay ignored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoredEvent {
    /// The job it is about.
    pub job: JobRef,
    /// LSF's name of its event type ([`Event::name`]).
    pub event: &'static str,
    /// Why it was ignored.
    pub why: IgnoredWhy,
}

/// Why replay ignored an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IgnoredWhy {
    /// The job is already DONE or EXIT (this status), which dominates every later
    /// event but the job's requeue and its clean.
    AfterFinish(JobStatus),
    /// The job's current run already passed this stage: a JOB_START of a job
    /// started on the same hosts, or a JOB_START_ACCEPT of an accepted start.
    DuplicateStage,
}

impl fmt::Display for IgnoredWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IgnoredWhy::AfterFinish(status) => write!(f, "the job is already {status}"),
            IgnoredWhy::DuplicateStage => f.write_str("a stage the job's run already passed"),
        }
    }
}

impl fmt::Display for IgnoredEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} for job {}: {}", self.event, self.job, self.why)
    }
}

impl Mbd {
    /// Replays one logged event (shell contract step 1): applies it as
    /// [`Mbd::apply`] does, except an event after DONE/EXIT or a duplicated
    /// stage (see the module doc), which is ignored and returned as
    /// [`Replayed::Ignored`] for the shell to count. Any other event that does
    /// not fit the state is an error and changes nothing. Like
    /// [`Mbd::apply_owned`], the event moves into the state.
    pub fn replay(&mut self, event: Event) -> Result<Replayed, MbdError> {
        if let Some(ignored) = self.store.settled(&event) {
            return Ok(Replayed::Ignored(ignored));
        }
        self.apply_owned(event)?;
        Ok(Replayed::Applied)
    }
}

impl Store {
    /// `event`, when the job's durable state already settles it (see the
    /// module doc); `None` when it must be applied (or refused) as usual. Every
    /// event it returns is one [`Store::apply`] refuses.
    pub(crate) fn settled(&self, event: &Event) -> Option<IgnoredEvent> {
        let job = event.job()?;
        let why = match event {
            Event::MbdStart(_)
            | Event::HostCtrl(_)
            | Event::QueueCtrl(_)
            | Event::JobNew(_)
            | Event::JobClean(_) => return None,
            Event::JobRequeue(record) if matches!(record.requeued, Requeued::Finished { .. }) => return None,
            _ => match self.finished(job) {
                Some(frozen) => IgnoredWhy::AfterFinish(frozen.status()),
                None => {
                    let live = self.live(job)?;
                    let duplicate = match event {
                        Event::JobStart(record) => {
                            live.status.is_started() && live.exec_hosts == record.exec_hosts
                        }
                        Event::JobStartAccept(_) => live.status.is_started() && live.accepted.is_some(),
                        _ => false,
                    };
                    if !duplicate {
                        return None;
                    }
                    IgnoredWhy::DuplicateStage
                }
            },
        };
        Some(IgnoredEvent { job, event: event.name(), why })
    }
}
