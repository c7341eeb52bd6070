//! The in-memory log raft-rs reads ([`raft::Storage`]): the snapshot's place and data, the
//! entries after it, the hard and configuration states. It is the image of what the
//! replica handed out for persistence; the durable copy is the caller's (crate::record).

use raft::eraftpb::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError};

use crate::snapshot_of;

pub(crate) struct Store {
    hard: HardState,
    conf: ConfState,
    snapshot_index: u64,
    snapshot_term: u64,
    snapshot_data: Vec<u8>,
    /// `entries[k].index == snapshot_index + 1 + k`.
    entries: Vec<Entry>,
    /// The bytes of `entries`' data, kept as they come and go.
    entry_bytes: u64,
}

impl Store {
    pub(crate) fn new(conf: ConfState) -> Store {
        Store {
            hard: HardState::default(),
            conf,
            snapshot_index: 0,
            snapshot_term: 0,
            snapshot_data: Vec::new(),
            entries: Vec::new(),
            entry_bytes: 0,
        }
    }

    pub(crate) fn entry_bytes(&self) -> u64 {
        self.entry_bytes
    }

    /// The bytes of the entries' data through `index` (those after it are counted off from
    /// the end: the few not applied yet).
    pub(crate) fn entry_bytes_through(&self, index: u64) -> u64 {
        let after: u64 =
            self.entries.iter().rev().take_while(|e| e.index > index).map(|e| e.data.len() as u64).sum();
        self.entry_bytes - after
    }

    pub(crate) fn snapshot_data(&self) -> &[u8] {
        &self.snapshot_data
    }

    pub(crate) fn snapshot_bytes(&self) -> u64 {
        self.snapshot_data.len() as u64
    }

    pub(crate) fn snapshot_index(&self) -> u64 {
        self.snapshot_index
    }

    pub(crate) fn last(&self) -> u64 {
        self.snapshot_index + self.entries.len() as u64
    }

    pub(crate) fn term_of(&self, index: u64) -> Option<u64> {
        if index == self.snapshot_index {
            return Some(self.snapshot_term);
        }
        let k = index.checked_sub(self.snapshot_index + 1)? as usize;
        self.entries.get(k).map(|e| e.term)
    }

    /// A snapshot through `index` replaces the whole log.
    pub(crate) fn install(&mut self, index: u64, term: u64, data: Vec<u8>) {
        self.entries.clear();
        self.entry_bytes = 0;
        self.snapshot_index = index;
        self.snapshot_term = term;
        self.snapshot_data = data;
        self.hard.commit = self.hard.commit.max(index);
    }

    /// The application's snapshot through `index` (which the log holds): entries through
    /// it are dropped, the rest kept.
    pub(crate) fn compact_to(&mut self, index: u64, term: u64, data: Vec<u8>) {
        let drop = (index - self.snapshot_index) as usize;
        let dropped: u64 =
            self.entries.drain(..drop.min(self.entries.len())).map(|e| e.data.len() as u64).sum();
        self.entry_bytes -= dropped;
        self.snapshot_index = index;
        self.snapshot_term = term;
        self.snapshot_data = data;
    }

    /// Appends `entries` (contiguous); the first replaces every entry from its index on.
    pub(crate) fn append(&mut self, entries: &[Entry]) {
        let Some(first) = entries.first() else { return };
        let keep = first.index.saturating_sub(self.snapshot_index + 1) as usize;
        if keep < self.entries.len() {
            let cut: u64 = self.entries.drain(keep..).map(|e| e.data.len() as u64).sum();
            self.entry_bytes -= cut;
        }
        for entry in entries {
            if entry.index > self.snapshot_index {
                self.entry_bytes += entry.data.len() as u64;
                self.entries.push(entry.clone());
            }
        }
    }

    pub(crate) fn hard_state(&self) -> &HardState {
        &self.hard
    }

    pub(crate) fn set_hard_state(&mut self, hard: HardState) {
        self.hard = hard;
    }
}

impl raft::Storage for Store {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(self.hard.clone(), self.conf.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low <= self.snapshot_index {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let from = (low - self.snapshot_index - 1) as usize;
        let to = (high - self.snapshot_index - 1) as usize;
        let mut entries = self.entries[from..to].to_vec();
        raft::util::limit_size(&mut entries, max_size.into());
        Ok(entries)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        if index < self.snapshot_index {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        self.term_of(index).ok_or(raft::Error::Store(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.snapshot_index + 1)
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, _request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        Ok(snapshot_of(self.snapshot_index, self.snapshot_term, &self.conf, &self.snapshot_data))
    }
}
