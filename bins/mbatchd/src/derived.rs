//! `lsb.events` and `lsb.acct` on a master candidate (docs/failover.md, "What each
//! candidate keeps"): views derived from the replicated log, written after commit.
//!
//! The replica log (`lsb.replica`) is the truth. Every candidate, leader or follower,
//! appends each committed event, in commit order, to its own `lsb.events` (the candidate's
//! folder, through [`crate::journal::Journal`] as a single master appends), once the
//! machine reports it applied (`Step::Applied`); a finished job's `lsb.acct` line follows
//! once that record is durable in `lsb.events`, as on a single master. So `bhist`,
//! `brequeue` and the `lsb.events` text view work on whichever candidate leads, and
//! `lsb.acct` is complete on every candidate.
//!
//! # Exactly once, keyed by the replicated index
//! The checkpoint file `lsb.events.replica` holds `<position> <index>`: `lsb.events`
//! position `position` holds everything committed through replicated index `index`
//! (written atomically, after the records are durable). A start reads it with the end of
//! `lsb.events`: entries through `index` are not written again, and the first
//! `end - position` events committed after `index` are already there (commit order is the
//! append order). The checkpoint is brought up to date before every compaction of the
//! replica log, so the entries past it are still in the replica log at any start.
//!
//! # A snapshot instead of entries
//! When the leader's snapshot replaces a candidate's state (it lagged behind a
//! compaction), or a start finds the replica log's snapshot past the checkpoint (a crash
//! between keeping that snapshot and recording it here), `lsb.events` gets that state as
//! its snapshot at its current end, as a single master's switch writes one (without the
//! environments of the finished jobs: `brequeue` of a job finished before it restarts
//! with an empty environment), and the checkpoint moves to the snapshot's index. Replay of
//! `lsb.events` then gives the same state as the replica log; `bhist` shows no events of
//! the entries the snapshot covers.
//!
//! # lsb.acct
//! The line of a finish is taken from the state when the event is applied (a follower) or
//! proposed (the leader), kept by index, and handed to the `lsb.acct` writer behind the
//! `lsb.events` record. A line lost in a crash is rebuilt at the next start by
//! [`crate::acct::reconcile`] from the state `lsb.events` replays to (the single master's
//! mechanism): none missing, none twice.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

use crate::ShellError;
use crate::journal::Journal;

/// The checkpoint's name in the candidate's folder.
pub const CHECKPOINT_NAME: &str = "lsb.events.replica";

/// What this candidate's `lsb.events` holds of the replicated log.
#[derive(Debug)]
pub(crate) struct Derived {
    path: PathBuf,
    /// Every committed entry through this index is in `lsb.events` (or holds no event).
    written: u64,
    /// The next events committed after `written` that `lsb.events` already holds.
    skip: u64,
    /// A snapshot to record in `lsb.events` at a position, for an index.
    install: Option<(u64, u64, Vec<u8>)>,
    /// Recording it found the disk full: not tried again before this.
    install_retry_at: Option<std::time::Instant>,
    /// The entries not yet written that finish a job, by index, with the finish's
    /// `lsb.acct` line (if the job has one).
    finishes: BTreeMap<u64, Option<String>>,
    /// The text view lines of entries not yet written, by increasing index
    /// ([`crate::events_view::EventsView::worded`]; `None`: a type it does not write).
    lines: VecDeque<(u64, Option<String>)>,
}

impl Derived {
    /// Reads the checkpoint in `dir`; `end` is the last position of its `lsb.events`.
    pub(crate) fn open(dir: &Path, end: u64) -> Result<Derived, ShellError> {
        let path = dir.join(CHECKPOINT_NAME);
        let (position, index) = match std::fs::read_to_string(&path) {
            Ok(text) => parse(&text).ok_or_else(|| {
                ShellError::Replica(format!(
                    "{}: not a checkpoint (`<lsb.events position> <replicated index>`): {:?}",
                    path.display(),
                    text.trim()
                ))
            })?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => (0, 0),
            Err(error) => return Err(ShellError::Replica(format!("{}: {error}", path.display()))),
        };
        if end < position {
            tracing::warn!(
                path = %path.display(),
                position,
                end,
                "lsb.events ends before its checkpoint (records were removed): events from there on are not \
                 written again"
            );
        }
        Ok(Derived {
            path,
            written: index,
            skip: end.saturating_sub(position),
            install: None,
            install_retry_at: None,
            finishes: BTreeMap::new(),
            lines: VecDeque::new(),
        })
    }

    /// Every committed entry through this index is in `lsb.events`.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// The entry at `index` finishes a job; `line` is the finish's `lsb.acct` line. Noted
    /// by the leader as it proposes the event and by a follower as it applies it, before
    /// the entry is [`Derived::applied`].
    pub(crate) fn note_finish(&mut self, index: u64, line: Option<String>) {
        if index > self.written {
            self.finishes.insert(index, line);
        }
    }

    /// The entry at `index` words as `line` in the text view. Noted by the leader as it
    /// proposes the event and by a follower as it applies it (indexes increasing), before
    /// the entry is [`Derived::applied`]; an entry without one is read back by the view.
    pub(crate) fn note_line(&mut self, index: u64, line: Option<String>) {
        if self.lines.back().is_some_and(|(last, _)| *last >= index) {
            self.lines.clear();
        }
        if index > self.written {
            self.lines.push_back((index, line));
        }
    }

    /// The committed entry at `index` is in the state: appends its event to `lsb.events`
    /// unless it is there already, and queues its `lsb.acct` line behind it. The entry's
    /// bytes are the event's XDR encoding, which is what `lsb.events` holds: they are
    /// appended as they are, not decoded and encoded again. Returns the event's text view
    /// line when it was appended and its line noted, for the view at `lsb.events`' end.
    pub(crate) fn applied(
        &mut self,
        index: u64,
        data: &[u8],
        journal: &mut Journal,
        acct_held: &mut VecDeque<(u64, String)>,
    ) -> Result<Option<Option<String>>, ShellError> {
        if index <= self.written {
            return Ok(None);
        }
        self.written = index;
        let finish = self.finishes.remove(&index);
        // Notes of entries now behind `written` (a rebuild's replay) are not wanted.
        if self.finishes.first_key_value().is_some_and(|(first, _)| *first <= index) {
            self.finishes = self.finishes.split_off(&(index + 1));
        }
        while self.lines.front().is_some_and(|(at, _)| *at < index) {
            self.lines.pop_front();
        }
        let line = self.lines.front().is_some_and(|(at, _)| *at == index).then(|| self.lines.pop_front());
        if data.is_empty() {
            return Ok(None);
        }
        if self.skip > 0 {
            self.skip -= 1;
            return Ok(None);
        }
        journal.append_encoded(data, finish.is_some())?;
        if let Some(line) = finish.flatten() {
            acct_held.push_back((journal.appended_through(), line));
        }
        Ok(line.flatten().map(|(_, line)| line))
    }

    /// The state became the snapshot `data` (the replica log's encoding of the state) at
    /// `index`: `lsb.events` records it at its end (see the module doc).
    pub(crate) fn installed(&mut self, index: u64, data: &[u8], journal: &Journal) {
        let mut bytes = data.to_vec();
        bytes.extend(crate::codec::encode(&crate::history::FinishedEnvs::default()));
        self.install = Some((journal.appended_through(), index, bytes));
        self.written = index;
        self.skip = 0;
        self.finishes.clear();
        self.lines.clear();
    }

    /// Records a pending snapshot in `lsb.events` once no switch is being written.
    pub(crate) fn install_pending(&mut self, journal: &mut Journal) -> Result<(), ShellError> {
        if self.install_retry_at.is_some_and(|at| std::time::Instant::now() < at) {
            return Ok(());
        }
        let Some((position, index, bytes)) = self.install.take() else { return Ok(()) };
        match journal.write_snapshot_now(position, &bytes) {
            Ok(true) => self.install_retry_at = None,
            Ok(false) => {
                self.install = Some((position, index, bytes));
                return Ok(());
            }
            // A full disk: tried again in a second (the events committed after it go on
            // being appended behind its position; no switch or compaction meanwhile:
            // `installing`).
            Err(error) if error.is_no_space() => {
                if self.install_retry_at.is_none() {
                    tracing::warn!("lsb.events: the leader's snapshot waits for room: {error}");
                }
                self.install_retry_at = Some(std::time::Instant::now() + std::time::Duration::from_secs(1));
                self.install = Some((position, index, bytes));
                return Ok(());
            }
            Err(error) => return Err(error),
        }
        tracing::info!(
            index,
            position,
            "lsb.events: the leader's snapshot recorded as this candidate's state"
        );
        self.save(position, index)
    }

    /// Whether a snapshot waits to be recorded (no switch of `lsb.events` meanwhile).
    pub(crate) fn installing(&self) -> bool {
        self.install.is_some()
    }

    /// Before a compaction: `lsb.events` is durable through `position`, which holds every
    /// entry through `written`.
    pub(crate) async fn checkpoint(&mut self, journal: &mut Journal) -> Result<(), ShellError> {
        if self.install.is_some() {
            return Ok(());
        }
        journal.sync_all().await?;
        self.save(journal.appended_through(), self.written)
    }

    fn save(&self, position: u64, index: u64) -> Result<(), ShellError> {
        Ok(lava_shell::startup::write_atomically(&self.path, &format!("{position} {index}\n"))?)
    }
}

fn parse(text: &str) -> Option<(u64, u64)> {
    let mut words = text.split_whitespace();
    let position = words.next()?.parse().ok()?;
    let index = words.next()?.parse().ok()?;
    words.next().is_none().then_some((position, index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_is_two_numbers() {
        assert_eq!(parse("12 40\n"), Some((12, 40)));
        assert_eq!(parse("12"), None);
        assert_eq!(parse("12 40 3"), None);
        assert_eq!(parse("x 40"), None);
    }

    #[test]
    fn a_bad_checkpoint_is_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join(CHECKPOINT_NAME), "garbage").expect("write");
        let error = Derived::open(dir.path(), 0).expect_err("refused").to_string();
        assert!(error.contains("lsb.events.replica: not a checkpoint"), "{error}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_noted_line_comes_back_with_its_appended_entry_only() {
        // Goal: `applied` hands back the text view line noted for its index once the entry
        // is appended to lsb.events (`None` inside: a type the view does not write), and
        // none for an entry without a note, an empty entry, or one noted out of order.
        use crate::journal::{Backlog, SwitchRule};
        let dir = tempfile::tempdir().expect("temp dir");
        let log = crate::journal::open(&dir.path().join("logdir")).expect("a log");
        let rule = SwitchRule { max_job_num: 1000, snapshot_events: 1000 };
        let mut journal = Journal::new(log, rule, Backlog::default());
        let mut derived = Derived::open(dir.path(), 0).expect("open");
        let mut acct = VecDeque::new();
        let mut applied = |derived: &mut Derived, index: u64, data: &[u8]| {
            derived.applied(index, data, &mut journal, &mut acct).expect("appended")
        };
        derived.note_line(1, Some("one\n".into()));
        derived.note_line(2, None);
        derived.note_line(4, Some("four\n".into()));
        assert_eq!(applied(&mut derived, 1, b"e1"), Some(Some("one\n".into())));
        assert_eq!(applied(&mut derived, 2, b"e2"), Some(None), "noted: a type the view does not write");
        assert_eq!(applied(&mut derived, 3, b"e3"), None, "not noted: the view reads it back");
        assert_eq!(applied(&mut derived, 4, b""), None, "an empty entry is not appended");
        derived.note_line(6, Some("six\n".into()));
        derived.note_line(5, Some("five\n".into()));
        assert_eq!(applied(&mut derived, 5, b"e5"), Some(Some("five\n".into())));
        assert_eq!(applied(&mut derived, 6, b"e6"), None, "dropped when a note came out of order");
        assert_eq!(journal.appended_through(), 5, "e1, e2, e3, e5 and e6 appended; the empty one not");
    }

    #[test]
    fn a_start_skips_what_lsb_events_holds_past_its_checkpoint() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join(CHECKPOINT_NAME), "10 30\n").expect("write");
        let derived = Derived::open(dir.path(), 13).expect("open");
        assert_eq!((derived.written, derived.skip), (30, 3));
        let fresh = Derived::open(&dir.path().join("none"), 0).expect("no checkpoint yet");
        assert_eq!((fresh.written, fresh.skip), (0, 0));
    }
}
