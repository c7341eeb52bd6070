//! A master candidate's replica log on a full disk (docs/failover.md, "A full disk on a
//! candidate"; lava-shell's `ReplicaLog`): a leader's snapshot that cannot be kept for space
//! waits, and every `Persist` started after it waits behind it, unwritten, until it is kept;
//! once space returns the snapshot is kept first, then what followed it, and the tickets are
//! reported in order. A reopen rebuilds the log from that snapshot and the records after it.
//! Whatever the order of writes, full disks and polls a caller drops, every `Persist` started
//! is reported once there is room.
//!
//! The file system is a small tmpfs kept full by a file (`util::small_fs`), which needs root
//! (CI runs as root); elsewhere the test says why it is skipped.

mod util;

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use lava_replog::record::{Record, StoredEntry};
use lava_shell::replication::ReplicaLog;
use util::small_fs::SmallFs;

fn entry(index: u64, size: usize) -> StoredEntry {
    StoredEntry { index, term: 1, kind: 0, data: vec![index as u8; size] }
}

// Goal: see the module doc. Method: a replica log on a 4 MiB tmpfs holds entries 1 to 3;
// the tmpfs is then kept full; a 256 KiB snapshot at 3 is kept (it waits), a `Persist`
// of the install and entries 4 and 5 is started behind it; a try a second later finds the
// disk still full and reports nothing; the filler is freed, the next try is started by one
// poll of `persisted` whose future is then dropped, and the ticket comes all the same; a
// reopen finds the snapshot and, after it, entries 4 and 5 only.
#[tokio::test(flavor = "current_thread")]
async fn a_snapshot_that_cannot_be_kept_holds_back_what_follows_it_until_there_is_room() {
    let parent = tempfile::tempdir().expect("tempdir");
    let dir = parent.path().join("candidate");
    std::fs::create_dir(&dir).expect("create the candidate's folder");
    let Some(disk) = SmallFs::mount_or_skip(&dir, "4m") else { return };
    let (mut log, _, _) = ReplicaLog::open(&dir, "lsb.replica", 1..=1).expect("open");
    let hard = |commit| Record::Hard { term: 1, vote: 1, commit };
    log.persist(vec![Record::Entries(vec![entry(1, 100), entry(2, 100), entry(3, 100)]), hard(3)])
        .await
        .expect("persist while there is room");

    let filler = disk.keep_full("filler");
    let snapshot = vec![7u8; 256 << 10];
    log.keep_snapshot(3, 1, snapshot.clone(), Vec::new()).await.expect("a full disk is no error");
    assert!(log.stalled(), "the snapshot waits for room");
    let installed = vec![
        Record::Installed { index: 3, term: 1 },
        Record::Entries(vec![entry(4, 100), entry(5, 100)]),
        hard(5),
    ];
    log.start_persist(7, installed).expect("held behind the snapshot");
    let still_full = tokio::time::timeout(Duration::from_secs(60), log.persisted()).await;
    assert!(matches!(still_full, Ok(Ok(None))), "a try on a full disk reports nothing: {still_full:?}");
    assert!(log.stalled());

    filler.free();
    // The next try starts on the first poll of `persisted`, whose future a daemon's
    // `select!` then drops for another input: the snapshot and what waits behind it must
    // survive that.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(poll_once(log.persisted()).await.is_none(), "the try runs on a blocking thread");
    let reported = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if let Some(ticket) = log.persisted().await.expect("written once there is room") {
                return ticket;
            }
        }
    })
    .await
    .expect("the ticket is reported once there is room");
    assert_eq!(reported, 7);
    assert!(!log.stalled());
    drop(log);

    let (_, recovered, _) = ReplicaLog::open(&dir, "lsb.replica", 1..=1).expect("reopen");
    assert_eq!(recovered.snapshot, Some((3, 1, snapshot)));
    let rebuilt = lava_replog::record::rebuild(recovered.records, Some((3, 1))).expect("the log rebuilds");
    assert_eq!(rebuilt.entries, vec![entry(4, 100), entry(5, 100)]);
    assert_eq!(rebuilt.commit, 5);
}

/// Polls `future` once and drops it, as a `select!` does when another branch is ready: its
/// output if it was ready at once.
async fn poll_once<F: Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| match future.as_mut().poll(cx) {
        Poll::Ready(output) => Poll::Ready(Some(output)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}

/// A xorshift64* sequence: a seed is all that a failing run needs to repeat its operations.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// What the log should hold: the newest snapshot (index and data) and the entries after it.
#[derive(Default)]
struct Model {
    snapshot: Option<(u64, Vec<u8>)>,
    entries: Vec<StoredEntry>,
    next_index: u64,
}

impl Model {
    fn take_entries(&mut self, rng: &mut Rng) -> Vec<StoredEntry> {
        let taken: Vec<StoredEntry> = (0..1 + rng.below(3))
            .map(|i| entry(self.next_index + i, 100 + rng.below(2000) as usize))
            .collect();
        self.next_index += taken.len() as u64;
        self.entries.extend(taken.iter().cloned());
        taken
    }

    fn hard(&self) -> Record {
        Record::Hard { term: 1, vote: 1, commit: self.next_index - 1 }
    }
}

/// One seed's run: the log, what it should hold, and the tickets started and reported.
struct Run {
    seed: u64,
    log: ReplicaLog,
    model: Model,
    filler: Option<util::small_fs::Filler>,
    ticket: u64,
    started: Vec<u64>,
    reported: Vec<u64>,
}

impl Run {
    /// A ticket `persisted` returned: one started, after every one reported before.
    fn note(&mut self, ended: Result<Option<u64>, lava_shell::replication::StoreError>) {
        let seed = self.seed;
        let Some(ticket) = ended.unwrap_or_else(|e| panic!("seed {seed}: persisted: {e}")) else { return };
        assert!(self.started.contains(&ticket), "seed {seed}: ticket {ticket} reported but never started");
        assert!(
            self.reported.last() < Some(&ticket),
            "seed {seed}: ticket {ticket} after {:?}",
            self.reported
        );
        self.reported.push(ticket);
    }

    /// Polls `persisted` for at most `wait`.
    async fn poll_for(&mut self, wait: Duration) {
        if let Ok(ended) = tokio::time::timeout(wait, self.log.persisted()).await {
            self.note(ended);
        }
    }

    /// A `Persist` started: a daemon's `start_persist`.
    fn start(&mut self, records: Vec<Record>) {
        self.log
            .start_persist(self.ticket, records)
            .unwrap_or_else(|e| panic!("seed {}: start: {e}", self.seed));
        self.started.push(self.ticket);
    }

    /// A write without a ticket: done, or waiting for room (the records wait in the log).
    fn written_or_waiting(&self, what: &str, result: Result<(), lava_shell::replication::StoreError>) {
        if let Err(error) = result {
            assert!(error.is_no_space(), "seed {}: {what}: {error}", self.seed);
        }
    }

    /// Frees the disk and polls `persisted` until the last ticket started is reported and
    /// nothing waits for room.
    async fn settle(&mut self) {
        if let Some(filler) = self.filler.take() {
            filler.free();
        }
        let last = self.started.last().copied();
        let settled = tokio::time::timeout(Duration::from_secs(60), async {
            while self.reported.last().copied() != last || self.log.stalled() {
                let ended = self.log.persisted().await;
                self.note(ended);
            }
        })
        .await;
        assert!(
            settled.is_ok(),
            "seed {}: tickets {:?} started, {:?} reported; stalled: {}",
            self.seed,
            self.started,
            self.reported,
            self.log.stalled()
        );
    }
}

// Goal: every `Persist` handed to the replica log is reported (its ticket, or a later one,
// which covers it) once the disk has room, whatever the order of the ways of writing, of
// full disks and of polls of `persisted` dropped by a caller's `select!`: a ticket never
// reported silences a follower for good, since every message of a follower waits behind its
// newest `Persist` (docs/failover.md, "A full disk on a candidate"). A reopen then finds the
// newest snapshot and the entries after it.
// Method: for each seed, 60 operations drawn from a xorshift sequence on a 4 MiB tmpfs: a
// `Persist` started (its entries and a hard state); a hard state written on the spot without
// a ticket; a compaction (a snapshot with the entry after it, then its `Compacted` record,
// never while the log is stalled, as mbatchd and the coordinator do); a leader's snapshot
// installed (kept, then the `Persist` of `Installed` and the entries after it); the disk
// filled or freed; `persisted` polled once, or for 0 to 30 ms, or until the next try of a
// stalled log, and dropped; and a settling: the disk freed and `persisted` polled until the
// last ticket started is reported and nothing waits (also at the end).
// `LAVA_REPLICA_LOG_SEEDS=K` runs seeds 1..=K (default 6), `LAVA_REPLICA_LOG_SEED=N` from N
// on; every failure names its seed.
#[tokio::test(flavor = "current_thread")]
async fn every_persist_is_reported_whatever_the_writes_full_disks_and_dropped_polls() {
    let seeds = std::env::var("LAVA_REPLICA_LOG_SEEDS").ok().and_then(|n| n.parse().ok()).unwrap_or(6);
    let first = std::env::var("LAVA_REPLICA_LOG_SEED").ok().and_then(|n| n.parse().ok()).unwrap_or(1);
    for seed in first..=seeds.max(first) {
        if !run_seed(seed).await {
            return;
        }
    }
}

/// One seed of the test above; false when the tmpfs cannot be mounted (skipped).
async fn run_seed(seed: u64) -> bool {
    let parent = tempfile::tempdir().expect("tempdir");
    let dir = parent.path().join("candidate");
    std::fs::create_dir(&dir).expect("create the candidate's folder");
    let Some(disk) = SmallFs::mount_or_skip(&dir, "4m") else { return false };
    let (log, _, _) = ReplicaLog::open(&dir, "lsb.replica", 1..=1).expect("open");
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let model = Model { next_index: 1, ..Model::default() };
    let mut run =
        Run { seed, log, model, filler: None, ticket: 0, started: Vec::new(), reported: Vec::new() };
    for _ in 0..60 {
        match rng.below(10) {
            0..=2 => {
                run.ticket += 1 + rng.below(2);
                let records = vec![Record::Entries(run.model.take_entries(&mut rng)), run.model.hard()];
                run.start(records);
            }
            3 => {
                let written = run.log.persist(vec![run.model.hard()]).await;
                run.written_or_waiting("a hard state", written);
            }
            4 if !run.log.stalled() && run.model.entries.len() >= 2 => {
                let index = run.model.entries[run.model.entries.len() - 2].index;
                let tail = run.model.entries.split_off(run.model.entries.len() - 1);
                let data = vec![seed as u8; 1000 + rng.below(200_000) as usize];
                run.log
                    .keep_snapshot(index, 1, data.clone(), tail.clone())
                    .await
                    .unwrap_or_else(|e| panic!("seed {seed}: compaction: {e}"));
                run.model.snapshot = Some((index, data));
                run.model.entries = tail;
                let written = run.log.persist(vec![Record::Compacted { index, term: 1 }]).await;
                run.written_or_waiting("compacted", written);
            }
            5 => {
                let index = run.model.next_index + rng.below(3);
                let data = vec![!seed as u8; 1000 + rng.below(200_000) as usize];
                run.log
                    .keep_snapshot(index, 1, data.clone(), Vec::new())
                    .await
                    .unwrap_or_else(|e| panic!("seed {seed}: install: {e}"));
                run.model.snapshot = Some((index, data));
                run.model.entries.clear();
                run.model.next_index = index + 1;
                run.ticket += 1;
                let records = vec![
                    Record::Installed { index, term: 1 },
                    Record::Entries(run.model.take_entries(&mut rng)),
                    run.model.hard(),
                ];
                run.start(records);
            }
            6 => match run.filler.take() {
                None => run.filler = Some(disk.keep_full("filler")),
                Some(filler) => filler.free(),
            },
            7 => {
                if let Some(ended) = poll_once(run.log.persisted()).await {
                    run.note(ended);
                }
            }
            8 if run.log.stalled() => run.poll_for(Duration::from_millis(1200)).await,
            9 if rng.below(3) == 0 => run.settle().await,
            _ => run.poll_for(Duration::from_millis(rng.below(31))).await,
        }
    }
    run.settle().await;
    let Run { mut log, model, .. } = run;
    log.persist(vec![model.hard()]).await.unwrap_or_else(|e| panic!("seed {seed}: with room again: {e}"));
    drop(log);

    let (_, recovered, _) = ReplicaLog::open(&dir, "lsb.replica", 1..=1).expect("reopen");
    let snapshot = recovered.snapshot.as_ref().map(|(index, _, data)| (*index, data.clone()));
    assert!(snapshot == model.snapshot, "seed {seed}: the newest snapshot is not the one kept last");
    let base = model.snapshot.as_ref().map(|(index, _)| (*index, 1));
    let rebuilt = lava_replog::record::rebuild(recovered.records, base)
        .unwrap_or_else(|e| panic!("seed {seed}: the log does not rebuild: {e}"));
    let indexes = |entries: &[StoredEntry]| entries.iter().map(|e| e.index).collect::<Vec<_>>();
    assert!(
        rebuilt.entries == model.entries,
        "seed {seed}: the entries after the snapshot {:?} differ: {:?} rebuilt, {:?} written",
        base,
        indexes(&rebuilt.entries),
        indexes(&model.entries)
    );
    drop(disk);
    true
}
