//! lava-dlm-ll: DLM messages (lava-dlm-wire) turned into validated domain values, and back.
//!
//! # What it owns
//! - Domain newtypes: [`NodeId`] (non-zero; 0 is the header's "broadcast" target),
//!   [`Epoch`], [`LockId`], [`ResourceName`] (1..=255 bytes of printable UTF-8 without
//!   whitespace), [`LockMode`] (the six classic modes NL, CR, CW, PR, PW, EX), [`DenyReason`].
//! - [`Message`]: every message type mxfsd exchanges, with its fields validated. LOCK_REQ and
//!   LOCK_CONVERT both become [`Message::Lock`]; a conversion is "LOCK_REQ with the CONVERT
//!   flag", so a LOCK_REQ with the flag, and a LOCK_CONVERT with or without it (older senders),
//!   are taken as a conversion, and a conversion is sent as LOCK_REQ with the flag. NODE_ALIVE
//!   is carried on LEASE_RENEW (a renewal says its sender is alive): a NODE_ALIVE frame alone
//!   is refused ([`LlError::NotAlone`]). A LEASE_RENEW names its sender as the lease's node.
//! - [`Envelope`]: the header's seq, sender, target and epoch with the message
//!   ([`Envelope::from_wire`], [`Envelope::to_wire`]).
//!
//! # What it never does
//! Compatibility of modes, queues, epoch comparison (lava-dlm-logic), bytes, sockets, clocks.

#![deny(missing_docs)]

use std::fmt;

use lava_dlm_wire as wire;

/// Longest resource name, in bytes.
pub const RESOURCE_BYTES_MAX: usize = wire::RESOURCE_BYTES_MAX;
/// Longest node name, in bytes.
pub const NODE_NAME_BYTES_MAX: usize = wire::NODE_NAME_BYTES_MAX;

/// Why a well-formed message was refused; names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlError {
    /// A node id field is 0 where a node is required.
    #[error("field `{field}`: node id 0 is not a node")]
    ZeroNode {
        /// The field.
        field: &'static str,
    },
    /// A mode byte is not one of the six modes.
    #[error("field `{field}`: mode {got} is not one of NL CR CW PR PW EX (0..=5)")]
    BadMode {
        /// The field.
        field: &'static str,
        /// The byte.
        got: u8,
    },
    /// A name field is empty, too long, not UTF-8 or holds whitespace or control characters.
    #[error("field `{field}`: {reason}")]
    BadName {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// Unknown flag bits.
    #[error("field `flags`: unknown bits {got:#x}")]
    BadFlags {
        /// The unknown bits.
        got: u32,
    },
    /// A status byte that is not defined.
    #[error("field `status`: unknown status {got}")]
    BadStatus {
        /// The byte.
        got: u8,
    },
    /// A field that must name the sender names another node.
    #[error("field `{field}`: node {got} is not the sender {sender}")]
    NotSender {
        /// The field.
        field: &'static str,
        /// The node it names.
        got: u32,
        /// The header's sender.
        sender: u32,
    },
    /// A message type that is only ever carried on another one.
    #[error("{msg_type} is carried on {carrier}, never sent alone")]
    NotAlone {
        /// The message type.
        msg_type: &'static str,
        /// The message that carries it.
        carrier: &'static str,
    },
    /// A LOCK_GRANT with a non-OK status, or a LOCK_DENY with status OK.
    #[error("field `status`: {got} does not fit a {msg_type}")]
    StatusMismatch {
        /// The message type.
        msg_type: &'static str,
        /// The byte.
        got: u8,
    },
}

/// A node's id: its 1-based position in lsf.cluster's Host section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(u32);

impl NodeId {
    /// `Some` unless `id` is 0.
    pub fn new(id: u32) -> Option<NodeId> {
        (id != 0).then_some(NodeId(id))
    }

    /// The number.
    pub fn get(self) -> u32 {
        self.0
    }

    fn parse(field: &'static str, id: u32) -> Result<NodeId, LlError> {
        NodeId::new(id).ok_or(LlError::ZeroNode { field })
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Through the inner value's Display, so that width and alignment (tables) apply.
        fmt::Display::fmt(&self.0, f)
    }
}

/// A fencing epoch: it only grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Epoch(pub u64);

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A lock of one node, numbered by that node. Its top bit ([`LockId::NOREVOKE`]) marks a lock
/// held until released, never revoked for an unanswered BAST.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LockId(pub u64);

impl LockId {
    /// The bit of a lock held until released (lava-dlm-wire's `LOCK_ID_NOREVOKE`).
    pub const NOREVOKE: u64 = wire::LOCK_ID_NOREVOKE;

    /// Whether the master may revoke this lock when its holder does not answer a BAST in time.
    pub fn revocable(self) -> bool {
        self.0 & LockId::NOREVOKE == 0
    }
}

/// A resource name: 1..=255 bytes of UTF-8 with no whitespace or control characters.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceName(String);

impl ResourceName {
    /// Validates `text`.
    pub fn parse(text: &str) -> Result<ResourceName, LlError> {
        check_name("resource", text.as_bytes(), RESOURCE_BYTES_MAX).map(ResourceName)
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

fn check_name(field: &'static str, bytes: &[u8], max: usize) -> Result<String, LlError> {
    let bad = |reason| LlError::BadName { field, reason };
    if bytes.is_empty() {
        return Err(bad("empty"));
    }
    if bytes.len() > max {
        return Err(bad("too long"));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8"))?;
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("whitespace or control character"));
    }
    Ok(text.to_owned())
}

/// The six classic DLM lock modes, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockMode {
    /// Null: holds a place, conflicts with nothing.
    Nl,
    /// Concurrent read.
    Cr,
    /// Concurrent write.
    Cw,
    /// Protected read.
    Pr,
    /// Protected write.
    Pw,
    /// Exclusive.
    Ex,
}

impl LockMode {
    /// All modes, weakest first (the wire values 0..=5).
    pub const ALL: [LockMode; 6] =
        [LockMode::Nl, LockMode::Cr, LockMode::Cw, LockMode::Pr, LockMode::Pw, LockMode::Ex];

    /// The wire value.
    pub fn to_wire(self) -> u8 {
        self as u8
    }

    /// The mode of a wire value.
    pub fn from_wire(field: &'static str, byte: u8) -> Result<LockMode, LlError> {
        LockMode::ALL.get(usize::from(byte)).copied().ok_or(LlError::BadMode { field, got: byte })
    }

    /// The usual name: NL, CR, CW, PR, PW, EX.
    pub fn name(self) -> &'static str {
        ["NL", "CR", "CW", "PR", "PW", "EX"][self as usize]
    }

    /// Parses a name, case-insensitively.
    pub fn parse(text: &str) -> Option<LockMode> {
        LockMode::ALL.into_iter().find(|mode| mode.name().eq_ignore_ascii_case(text))
    }
}

impl fmt::Display for LockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// Why a LOCK_DENY was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DenyReason {
    /// NOQUEUE and not grantable now.
    WouldBlock,
    /// A conversion of a lock the requester does not hold.
    NotHeld,
    /// A conversion that would deadlock with another queued conversion.
    Deadlock,
    /// Not valid in the master's state (e.g. a new request reusing a held lock id).
    Invalid,
    /// Of a granted lock: the master took it back, its holder having neither downgraded nor
    /// released it within the BAST timeout.
    Revoked,
}

impl DenyReason {
    /// The wire status.
    pub fn to_wire(self) -> u8 {
        match self {
            DenyReason::WouldBlock => wire::STATUS_WOULD_BLOCK,
            DenyReason::NotHeld => wire::STATUS_NOT_HELD,
            DenyReason::Deadlock => wire::STATUS_DEADLOCK,
            DenyReason::Invalid => wire::STATUS_INVALID,
            DenyReason::Revoked => wire::STATUS_REVOKED,
        }
    }

    fn from_wire(status: u8) -> Result<DenyReason, LlError> {
        match status {
            wire::STATUS_OK => Err(LlError::StatusMismatch { msg_type: "LOCK_DENY", got: status }),
            wire::STATUS_WOULD_BLOCK => Ok(DenyReason::WouldBlock),
            wire::STATUS_NOT_HELD => Ok(DenyReason::NotHeld),
            wire::STATUS_DEADLOCK => Ok(DenyReason::Deadlock),
            wire::STATUS_INVALID => Ok(DenyReason::Invalid),
            wire::STATUS_REVOKED => Ok(DenyReason::Revoked),
            got => Err(LlError::BadStatus { got }),
        }
    }

    /// A short description for logs and users.
    pub fn describe(self) -> &'static str {
        match self {
            DenyReason::WouldBlock => "the lock is held in a conflicting mode",
            DenyReason::NotHeld => "the lock to convert is not held",
            DenyReason::Deadlock => "the conversion would deadlock",
            DenyReason::Invalid => "the request is invalid",
            DenyReason::Revoked => "the lock was revoked: its BAST was not answered in time",
        }
    }
}

/// A validated message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// LOCK_REQ (a conversion when `convert`; LOCK_CONVERT is taken as one too).
    Lock {
        /// The requester's lock id.
        lock: LockId,
        /// The resource.
        resource: ResourceName,
        /// Requested mode.
        mode: LockMode,
        /// Deny rather than queue.
        noqueue: bool,
        /// Convert the held lock `lock`.
        convert: bool,
    },
    /// LOCK_GRANT.
    Grant {
        /// The requester's lock id.
        lock: LockId,
        /// The resource.
        resource: ResourceName,
        /// Granted mode.
        mode: LockMode,
        /// Fencing token.
        token: u64,
    },
    /// LOCK_DENY.
    Deny {
        /// The requester's lock id.
        lock: LockId,
        /// The resource.
        resource: ResourceName,
        /// Requested mode.
        mode: LockMode,
        /// Why.
        reason: DenyReason,
    },
    /// LOCK_RELEASE.
    Release {
        /// The releaser's lock id.
        lock: LockId,
        /// The resource.
        resource: ResourceName,
    },
    /// LOCK_BAST.
    Bast {
        /// The blocking holder's lock id.
        lock: LockId,
        /// The resource.
        resource: ResourceName,
        /// The mode the blocked waiter asks for.
        mode: LockMode,
    },
    /// LEASE_RENEW, which is also the sender's NODE_ALIVE.
    LeaseRenew {
        /// How long the sender asks to be taken for alive from this renewal (its node timeout).
        duration_ms: u64,
        /// The locks its clients hold granted.
        lock_count: u32,
        /// The node whose lease it is: the sender ([`Envelope::from_wire`] checks it).
        node: NodeId,
    },
    /// LEASE_ACK.
    LeaseAck {
        /// The lease granted: how long the acknowledging node takes the renewer for alive from
        /// the renewal (its node timeout).
        duration_ms: u64,
        /// The renewer's locks in the acknowledging node's table (0 at a node that is not its
        /// master).
        lock_count: u32,
        /// The renewer, whose lease it is.
        node: NodeId,
    },
    /// LEASE_EXPIRE: `node` was declared dead.
    LeaseExpire {
        /// The dead node.
        node: NodeId,
    },
    /// NODE_JOIN.
    NodeJoin {
        /// The node's name.
        name: String,
        /// The node's DLM port.
        port: u16,
    },
    /// NODE_LEAVE.
    NodeLeave {
        /// The node's name.
        name: String,
        /// The node's DLM port.
        port: u16,
    },
    /// JOURNAL_RECOVER.
    JournalRecover {
        /// The dead node.
        node: NodeId,
        /// Its journal slot.
        slot: u32,
    },
    /// JOURNAL_DONE.
    JournalDone {
        /// The dead node.
        node: NodeId,
        /// Its journal slot.
        slot: u32,
    },
    /// CACHE_INVAL.
    CacheInval {
        /// The resource.
        resource: ResourceName,
        /// First byte.
        start: u64,
        /// Bytes.
        length: u64,
    },
}

/// A validated message with its header fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Sender's sequence number.
    pub seq: u32,
    /// Sender.
    pub sender: NodeId,
    /// Target; `None` for broadcast.
    pub target: Option<NodeId>,
    /// Sender's epoch.
    pub epoch: Epoch,
    /// The message.
    pub message: Message,
}

fn resource(bytes: &[u8]) -> Result<ResourceName, LlError> {
    check_name("resource", bytes, RESOURCE_BYTES_MAX).map(ResourceName)
}

impl Message {
    /// Validates a decoded wire message.
    pub fn from_wire(message: &wire::Message) -> Result<Message, LlError> {
        Ok(match message {
            wire::Message::LockReq(req) | wire::Message::LockConvert(req) => {
                let known = wire::FLAG_NOQUEUE | wire::FLAG_CONVERT;
                if req.flags & !known != 0 {
                    return Err(LlError::BadFlags { got: req.flags & !known });
                }
                Message::Lock {
                    lock: LockId(req.lock_id),
                    resource: resource(&req.resource)?,
                    mode: LockMode::from_wire("mode", req.mode)?,
                    noqueue: req.flags & wire::FLAG_NOQUEUE != 0,
                    convert: req.flags & wire::FLAG_CONVERT != 0
                        || matches!(message, wire::Message::LockConvert(_)),
                }
            }
            wire::Message::LockGrant(resp) => {
                if resp.status != wire::STATUS_OK {
                    return Err(LlError::StatusMismatch { msg_type: "LOCK_GRANT", got: resp.status });
                }
                Message::Grant {
                    lock: LockId(resp.lock_id),
                    resource: resource(&resp.resource)?,
                    mode: LockMode::from_wire("mode", resp.mode)?,
                    token: resp.token,
                }
            }
            wire::Message::LockDeny(resp) => Message::Deny {
                lock: LockId(resp.lock_id),
                resource: resource(&resp.resource)?,
                mode: LockMode::from_wire("mode", resp.mode)?,
                reason: DenyReason::from_wire(resp.status)?,
            },
            wire::Message::LockRelease(release) => {
                Message::Release { lock: LockId(release.lock_id), resource: resource(&release.resource)? }
            }
            wire::Message::LockBast(bast) => Message::Bast {
                lock: LockId(bast.lock_id),
                resource: resource(&bast.resource)?,
                mode: LockMode::from_wire("mode", bast.mode)?,
            },
            wire::Message::LeaseRenew(lease) => Message::LeaseRenew {
                duration_ms: lease.duration_ms,
                lock_count: lease.lock_count,
                node: NodeId::parse("node", lease.node)?,
            },
            wire::Message::LeaseAck(lease) => Message::LeaseAck {
                duration_ms: lease.duration_ms,
                lock_count: lease.lock_count,
                node: NodeId::parse("node", lease.node)?,
            },
            wire::Message::LeaseExpire(lease) => {
                Message::LeaseExpire { node: NodeId::parse("node", lease.node)? }
            }
            wire::Message::NodeJoin(node) => Message::NodeJoin {
                name: check_name("name", &node.name, NODE_NAME_BYTES_MAX)?,
                port: node.port,
            },
            wire::Message::NodeLeave(node) => Message::NodeLeave {
                name: check_name("name", &node.name, NODE_NAME_BYTES_MAX)?,
                port: node.port,
            },
            wire::Message::NodeAlive => {
                return Err(LlError::NotAlone { msg_type: "NODE_ALIVE", carrier: "LEASE_RENEW" });
            }
            wire::Message::JournalRecover(journal) => {
                Message::JournalRecover { node: NodeId::parse("node", journal.node)?, slot: journal.slot }
            }
            wire::Message::JournalDone(journal) => {
                Message::JournalDone { node: NodeId::parse("node", journal.node)?, slot: journal.slot }
            }
            wire::Message::CacheInval(inval) => Message::CacheInval {
                resource: resource(&inval.resource)?,
                start: inval.start,
                length: inval.length,
            },
        })
    }

    /// The wire form.
    pub fn to_wire(&self) -> wire::Message {
        match self {
            Message::Lock { lock, resource, mode, noqueue, convert } => {
                let flags = if *noqueue { wire::FLAG_NOQUEUE } else { 0 }
                    | if *convert { wire::FLAG_CONVERT } else { 0 };
                let req = wire::LockReq {
                    lock_id: lock.0,
                    mode: mode.to_wire(),
                    flags,
                    resource: resource.0.as_bytes().to_vec(),
                };
                wire::Message::LockReq(req)
            }
            Message::Grant { lock, resource, mode, token } => wire::Message::LockGrant(wire::LockResp {
                lock_id: lock.0,
                token: *token,
                mode: mode.to_wire(),
                status: wire::STATUS_OK,
                resource: resource.0.as_bytes().to_vec(),
            }),
            Message::Deny { lock, resource, mode, reason } => wire::Message::LockDeny(wire::LockResp {
                lock_id: lock.0,
                token: 0,
                mode: mode.to_wire(),
                status: reason.to_wire(),
                resource: resource.0.as_bytes().to_vec(),
            }),
            Message::Release { lock, resource } => wire::Message::LockRelease(wire::LockRelease {
                lock_id: lock.0,
                resource: resource.0.as_bytes().to_vec(),
            }),
            Message::Bast { lock, resource, mode } => wire::Message::LockBast(wire::Bast {
                lock_id: lock.0,
                mode: mode.to_wire(),
                resource: resource.0.as_bytes().to_vec(),
            }),
            Message::LeaseRenew { duration_ms, lock_count, node } => {
                wire::Message::LeaseRenew(wire::LeaseMsg {
                    duration_ms: *duration_ms,
                    lock_count: *lock_count,
                    node: node.0,
                })
            }
            Message::LeaseAck { duration_ms, lock_count, node } => wire::Message::LeaseAck(wire::LeaseMsg {
                duration_ms: *duration_ms,
                lock_count: *lock_count,
                node: node.0,
            }),
            Message::LeaseExpire { node } => {
                wire::Message::LeaseExpire(wire::LeaseMsg { duration_ms: 0, lock_count: 0, node: node.0 })
            }
            Message::NodeJoin { name, port } => {
                wire::Message::NodeJoin(wire::NodeMsg { port: *port, name: name.as_bytes().to_vec() })
            }
            Message::NodeLeave { name, port } => {
                wire::Message::NodeLeave(wire::NodeMsg { port: *port, name: name.as_bytes().to_vec() })
            }
            Message::JournalRecover { node, slot } => {
                wire::Message::JournalRecover(wire::JournalMsg { node: node.0, slot: *slot })
            }
            Message::JournalDone { node, slot } => {
                wire::Message::JournalDone(wire::JournalMsg { node: node.0, slot: *slot })
            }
            Message::CacheInval { resource, start, length } => wire::Message::CacheInval(wire::CacheInval {
                start: *start,
                length: *length,
                resource: resource.0.as_bytes().to_vec(),
            }),
        }
    }
}

impl Envelope {
    /// Validates a decoded header and message (a LEASE_RENEW's node must be its sender).
    pub fn from_wire(header: &wire::Header, message: &wire::Message) -> Result<Envelope, LlError> {
        let sender = NodeId::parse("sender", header.sender)?;
        let message = Message::from_wire(message)?;
        if let Message::LeaseRenew { node, .. } = message
            && node != sender
        {
            return Err(LlError::NotSender { field: "node", got: node.0, sender: sender.0 });
        }
        Ok(Envelope {
            seq: header.seq,
            sender,
            target: NodeId::new(header.target),
            epoch: Epoch(header.epoch),
            message,
        })
    }

    /// The wire envelope and message.
    pub fn to_wire(&self) -> (wire::Envelope, wire::Message) {
        (
            wire::Envelope {
                seq: self.seq,
                sender: self.sender.0,
                target: self.target.map_or(0, |node| node.0),
                epoch: self.epoch.0,
            },
            self.message.to_wire(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire_req(mode: u8, flags: u32, resource: &[u8]) -> wire::Message {
        wire::Message::LockReq(wire::LockReq { lock_id: 1, mode, flags, resource: resource.to_vec() })
    }

    // Goal: every field check names its field, and a valid message round-trips.
    #[test]
    fn fields_are_validated_by_name() {
        assert_eq!(
            Message::from_wire(&wire_req(6, 0, b"r")),
            Err(LlError::BadMode { field: "mode", got: 6 })
        );
        assert_eq!(Message::from_wire(&wire_req(5, 4, b"r")), Err(LlError::BadFlags { got: 4 }));
        assert_eq!(
            Message::from_wire(&wire_req(5, 0, b"")),
            Err(LlError::BadName { field: "resource", reason: "empty" })
        );
        assert_eq!(
            Message::from_wire(&wire_req(5, 0, b"a b")),
            Err(LlError::BadName { field: "resource", reason: "whitespace or control character" })
        );
        assert_eq!(
            Message::from_wire(&wire_req(5, 0, &[0xff])),
            Err(LlError::BadName { field: "resource", reason: "not UTF-8" })
        );
        let deny_ok = wire::Message::LockDeny(wire::LockResp {
            lock_id: 1,
            token: 0,
            mode: 5,
            status: 0,
            resource: b"r".to_vec(),
        });
        assert_eq!(
            Message::from_wire(&deny_ok),
            Err(LlError::StatusMismatch { msg_type: "LOCK_DENY", got: 0 })
        );
        let expire = wire::Message::LeaseExpire(wire::LeaseMsg { duration_ms: 0, lock_count: 0, node: 0 });
        assert_eq!(Message::from_wire(&expire), Err(LlError::ZeroNode { field: "node" }));
        let header = wire::Header { msg_type: 1, length: 0, seq: 1, sender: 0, target: 0, epoch: 1 };
        assert_eq!(
            Envelope::from_wire(&header, &wire_req(5, 0, b"r")),
            Err(LlError::ZeroNode { field: "sender" })
        );
        let valid = wire_req(4, wire::FLAG_NOQUEUE, b"inode/42");
        let message = Message::from_wire(&valid).expect("valid");
        assert_eq!(
            message,
            Message::Lock {
                lock: LockId(1),
                resource: ResourceName::parse("inode/42").expect("valid"),
                mode: LockMode::Pw,
                noqueue: true,
                convert: false
            }
        );
        assert_eq!(message.to_wire(), valid);
    }

    // Goal: a conversion is LOCK_REQ with the CONVERT flag, and is sent so (type 1, not
    // LOCK_CONVERT); a LOCK_CONVERT from an older sender, flagged or not, is a conversion too.
    #[test]
    fn convert_is_a_flagged_lock_request() {
        let flagged = wire_req(1, wire::FLAG_CONVERT, b"r");
        let converted = Message::from_wire(&flagged).expect("valid");
        assert!(matches!(converted, Message::Lock { convert: true, .. }));
        assert_eq!(converted.to_wire(), flagged);
        assert_eq!(converted.to_wire().msg_type(), wire::msg_type::LOCK_REQ);
        let bare = wire::Message::LockConvert(wire::LockReq {
            lock_id: 1,
            mode: 1,
            flags: 0,
            resource: b"r".to_vec(),
        });
        assert!(matches!(Message::from_wire(&bare), Ok(Message::Lock { convert: true, .. })));
    }

    // Goal: the lease messages say what their docs say: a LEASE_RENEW names its sender as the
    // lease's node (0 or another node is refused) and goes with that node on the wire; NODE_ALIVE
    // is carried on LEASE_RENEW and refused alone.
    #[test]
    fn renewal_names_its_sender_and_node_alive_is_not_sent_alone() {
        let header = |sender| wire::Header { msg_type: 7, length: 0, seq: 1, sender, target: 1, epoch: 4 };
        let renew =
            |node| wire::Message::LeaseRenew(wire::LeaseMsg { duration_ms: 15_000, lock_count: 2, node });
        let two = NodeId::new(2).expect("not zero");
        let envelope = Envelope::from_wire(&header(2), &renew(2)).expect("valid");
        let message = Message::LeaseRenew { duration_ms: 15_000, lock_count: 2, node: two };
        assert_eq!(envelope.message, message);
        assert_eq!(message.to_wire(), renew(2));
        assert_eq!(
            Envelope::from_wire(&header(2), &renew(3)),
            Err(LlError::NotSender { field: "node", got: 3, sender: 2 })
        );
        assert_eq!(Message::from_wire(&renew(0)), Err(LlError::ZeroNode { field: "node" }));
        assert_eq!(
            Message::from_wire(&wire::Message::NodeAlive),
            Err(LlError::NotAlone { msg_type: "NODE_ALIVE", carrier: "LEASE_RENEW" })
        );
    }

    // Goal: a revocation is a LOCK_DENY with status REVOKED, both ways; a lock id with the top
    // bit set is not revocable.
    #[test]
    fn revocation_and_norevoke_lock_ids() {
        let revoked = Message::Deny {
            lock: LockId(7),
            resource: ResourceName::parse("r").expect("valid"),
            mode: LockMode::Ex,
            reason: DenyReason::Revoked,
        };
        let wire = revoked.to_wire();
        assert!(matches!(wire, wire::Message::LockDeny(wire::LockResp { status: wire::STATUS_REVOKED, .. })));
        assert_eq!(Message::from_wire(&wire), Ok(revoked));
        assert!(LockId(7).revocable());
        assert!(!LockId(LockId::NOREVOKE | 7).revocable());
    }

    // Goal: mode names parse case-insensitively and map to the wire values 0..=5.
    #[test]
    fn modes_have_names_and_wire_values() {
        for (idx, mode) in LockMode::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(mode.to_wire()), idx);
            assert_eq!(LockMode::parse(&mode.name().to_lowercase()), Some(mode));
        }
        assert_eq!(LockMode::parse("XX"), None);
    }

    // Goal: the names and numbers honour width and alignment, so that mxfsctl's tables line up
    // (they were written unpadded, gluing the columns together).
    #[test]
    fn display_honours_width() {
        let name = ResourceName::parse("r").expect("valid");
        let node = NodeId::new(3).expect("not zero");
        assert_eq!(format!("{name:<3}|{node:<3}|{:<3}|{:>3}|", LockMode::Ex, Epoch(7)), "r  |3  |EX |  7|");
    }
}
