//! Counters of what the shell sent, received and refused, shown by `mxfsctl status` under
//! `Counters:` (one `name value` line each; see docs/mxfsd.md for the names).
//!
//! Plain atomics shared by the socket tasks and the event loop; reading them never blocks
//! anyone. They count the shell's I/O only: what the lock table holds is asked of
//! lava-dlm-logic's read-only views when the status is made, never kept twice.

use std::sync::atomic::{AtomicU64, Ordering};

use lava_dlm_wire::{DecodeError, type_name};

use crate::client::ErrorCode;

/// Type numbers are 1..=15 (docs/protocols/dlm.md, "Message types and payloads"); slot 0 holds
/// any other.
const TYPE_SLOTS: usize = 16;

/// Why a daemon frame (or the connection it came on) was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Magic other than "MXFS".
    Magic,
    /// A DLM version this daemon does not speak.
    Version,
    /// A message type not in the spec.
    Type,
    /// A length that is too small, too large or not the bytes present.
    Length,
    /// A payload that does not fit its type's layout.
    Malformed,
    /// A frame failing cluster-key authentication (bad MAC, stale time, replayed nonce).
    Auth,
    /// A well-formed message refused by lava-dlm-ll's validation.
    Invalid,
    /// A master message carrying an older epoch than one already seen.
    StaleEpoch,
    /// A message from a node the connection does not belong to.
    Stranger,
    /// A daemon connection refused or closed by the gate: too many from one address or in
    /// all, or no authenticated frame within the deadline.
    Gate,
}

impl Refusal {
    /// Every reason, in counter order.
    pub(crate) const ALL: [Refusal; 10] = [
        Refusal::Magic,
        Refusal::Version,
        Refusal::Type,
        Refusal::Length,
        Refusal::Malformed,
        Refusal::Auth,
        Refusal::Invalid,
        Refusal::StaleEpoch,
        Refusal::Stranger,
        Refusal::Gate,
    ];

    /// The counter's name (after `refused.`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Refusal::Magic => "magic",
            Refusal::Version => "version",
            Refusal::Type => "type",
            Refusal::Length => "length",
            Refusal::Malformed => "malformed",
            Refusal::Auth => "auth",
            Refusal::Invalid => "invalid",
            Refusal::StaleEpoch => "stale_epoch",
            Refusal::Stranger => "stranger",
            Refusal::Gate => "gate",
        }
    }

    /// The reason of a decoding error.
    pub(crate) fn of(error: &DecodeError) -> Refusal {
        match error {
            DecodeError::WrongMagic { .. } => Refusal::Magic,
            DecodeError::UnknownVersion { .. } => Refusal::Version,
            DecodeError::UnknownType { .. } => Refusal::Type,
            DecodeError::Short { .. }
            | DecodeError::LengthTooSmall { .. }
            | DecodeError::Oversized { .. }
            | DecodeError::LengthMismatch { .. } => Refusal::Length,
            DecodeError::Malformed { .. } => Refusal::Malformed,
        }
    }

    fn index(self) -> usize {
        Refusal::ALL.iter().position(|reason| *reason == self).expect("ALL lists every reason")
    }
}

/// The kinds of client request, in counter order (`client_requests.KIND`).
pub(crate) const REQUEST_KINDS: [&str; 7] =
    ["lock", "convert", "unlock", "cache_inval", "status", "locks", "malformed"];

/// Why a client was refused, beyond the error codes of its answers: in counter order
/// (`client_refusals.REASON`), the error codes first.
const CLIENT_REFUSALS: [&str; 10] = [
    "would_block",
    "timeout",
    "not_held",
    "deadlock",
    "invalid",
    "unavailable",
    "lost",
    "permission",
    "too_many_clients",
    "slow_request",
];

/// The shell's counters; see the module doc.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    received: [AtomicU64; TYPE_SLOTS],
    sent: [AtomicU64; TYPE_SLOTS],
    refused: [AtomicU64; Refusal::ALL.len()],
    client_requests: [AtomicU64; REQUEST_KINDS.len()],
    client_refusals: [AtomicU64; CLIENT_REFUSALS.len()],
    peer_connections: AtomicU64,
    client_connections: AtomicU64,
    basts: AtomicU64,
    bast_timeouts: AtomicU64,
    locks_revoked: AtomicU64,
}

fn type_slot(msg_type: u16) -> usize {
    if type_name(msg_type).is_some() { usize::from(msg_type) } else { 0 }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    /// A frame received from another daemon and accepted by the wire layer, by type number.
    pub(crate) fn received(&self, msg_type: u16) {
        bump(&self.received[type_slot(msg_type)]);
    }

    /// A frame queued to another daemon, by type number.
    pub(crate) fn sent(&self, msg_type: u16) {
        bump(&self.sent[type_slot(msg_type)]);
    }

    /// A refused daemon frame.
    pub(crate) fn refused(&self, reason: Refusal) {
        bump(&self.refused[reason.index()]);
    }

    /// A client request, by its index in [`REQUEST_KINDS`].
    pub(crate) fn client_request(&self, kind: usize) {
        bump(&self.client_requests[kind.min(REQUEST_KINDS.len() - 1)]);
    }

    /// An error answer to a client.
    pub(crate) fn client_error(&self, code: ErrorCode) {
        let idx = match code {
            ErrorCode::WouldBlock => 0,
            ErrorCode::Timeout => 1,
            ErrorCode::NotHeld => 2,
            ErrorCode::Deadlock => 3,
            ErrorCode::Invalid => 4,
            ErrorCode::Unavailable => 5,
            ErrorCode::Lost => 6,
            ErrorCode::PermissionDenied => 7,
        };
        bump(&self.client_refusals[idx]);
    }

    /// A client turned away because LAVA_MXFSD_MAX_CLIENTS were connected.
    pub(crate) fn too_many_clients(&self) {
        bump(&self.client_refusals[8]);
    }

    /// A client connection closed because it did not finish a request within the client timeout.
    pub(crate) fn slow_request(&self) {
        bump(&self.client_refusals[9]);
    }

    /// An accepted daemon connection (either direction).
    pub(crate) fn peer_connection(&self) {
        bump(&self.peer_connections);
    }

    /// An accepted client connection.
    pub(crate) fn client_connection(&self) {
        bump(&self.client_connections);
    }

    /// A LOCK_BAST the master sent (to another node or to its own node).
    pub(crate) fn bast(&self) {
        bump(&self.basts);
    }

    /// A lock the master revoked for an unanswered BAST (on any node, its own included).
    pub(crate) fn bast_timeout(&self) {
        bump(&self.bast_timeouts);
    }

    /// A lock of this node's clients revoked by the master (the client was told LOST).
    pub(crate) fn lock_revoked(&self) {
        bump(&self.locks_revoked);
    }

    /// Every counter by name, zeros included (so that a watcher sees the whole set):
    /// `received.TYPE`, `sent.TYPE` (`UNKNOWN` for a type outside the spec, listed only when
    /// non-zero), `refused.REASON`, `client_requests.KIND`, `client_refusals.REASON`,
    /// `connections.peers`, `connections.clients`, `basts_sent`, `bast_timeouts`, `locks_revoked`.
    pub(crate) fn snapshot(&self) -> Vec<(String, u64)> {
        let mut all = Vec::new();
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        for (prefix, slots) in [("received", &self.received), ("sent", &self.sent)] {
            for (msg_type, counter) in slots.iter().enumerate().skip(1) {
                let name = type_name(msg_type as u16).expect("slots 1..16 are the spec's types");
                all.push((format!("{prefix}.{name}"), load(counter)));
            }
            if load(&slots[0]) > 0 {
                all.push((format!("{prefix}.UNKNOWN"), load(&slots[0])));
            }
        }
        for (reason, counter) in Refusal::ALL.iter().zip(&self.refused) {
            all.push((format!("refused.{}", reason.name()), load(counter)));
        }
        for (kind, counter) in REQUEST_KINDS.iter().zip(&self.client_requests) {
            all.push((format!("client_requests.{kind}"), load(counter)));
        }
        for (reason, counter) in CLIENT_REFUSALS.iter().zip(&self.client_refusals) {
            all.push((format!("client_refusals.{reason}"), load(counter)));
        }
        all.push(("connections.peers".to_owned(), load(&self.peer_connections)));
        all.push(("connections.clients".to_owned(), load(&self.client_connections)));
        all.push(("basts_sent".to_owned(), load(&self.basts)));
        all.push(("bast_timeouts".to_owned(), load(&self.bast_timeouts)));
        all.push(("locks_revoked".to_owned(), load(&self.locks_revoked)));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(counters: &Counters, name: &str) -> u64 {
        counters.snapshot().into_iter().find(|(n, _)| n == name).map(|(_, v)| v).expect(name)
    }

    // Goal: messages count under the spec's type names, refusals under their reason,
    // client errors under their code; unknown types apart.
    #[test]
    fn counts_by_type_and_reason() {
        let counters = Counters::default();
        counters.received(1);
        counters.received(1);
        counters.sent(6);
        counters.received(99);
        counters.refused(Refusal::of(&DecodeError::WrongMagic { got: 0 }));
        counters.refused(Refusal::of(&DecodeError::Oversized { announced: 1 << 30 }));
        counters.client_error(ErrorCode::PermissionDenied);
        counters.too_many_clients();
        assert_eq!(value(&counters, "received.LOCK_REQ"), 2);
        assert_eq!(value(&counters, "sent.LOCK_BAST"), 1);
        assert_eq!(value(&counters, "received.UNKNOWN"), 1);
        assert_eq!(value(&counters, "refused.magic"), 1);
        assert_eq!(value(&counters, "refused.length"), 1);
        assert_eq!(value(&counters, "client_refusals.permission"), 1);
        assert_eq!(value(&counters, "client_refusals.too_many_clients"), 1);
        assert_eq!(value(&counters, "sent.LOCK_REQ"), 0);
        assert!(!counters.snapshot().iter().any(|(name, _)| name == "sent.UNKNOWN"));
    }
}
