//! A master candidate's replica log on a full disk (docs/failover.md, "A full disk on a
//! candidate"; lava-shell's `ReplicaLog`): a leader's snapshot that cannot be kept for space
//! waits, and every `Persist` started after it waits behind it, unwritten, until it is kept;
//! once space returns the snapshot is kept first, then what followed it, and the tickets are
//! reported in order. A reopen rebuilds the log from that snapshot and the records after it.
//!
//! The file system is a small tmpfs kept full by a file (`util::small_fs`), which needs root
//! (CI runs as root); elsewhere the test says why it is skipped.

mod util;

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
// disk still full and reports nothing; the filler is freed and the ticket comes; a reopen
// finds the snapshot and, after it, entries 4 and 5 only.
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
