//! lava-lim-wire: the bytes of the LIM protocol (docs/protocols/lim.md; "section N" below
//! is the original LIM document's, mapped in that page's "Section numbers used in the
//! code").
//!
//! # What it owns
//! - The datagram codec: [`encode_datagram`] and [`decode_datagram`]. A datagram is
//!   the spec's `packet_header` (section 2: five big-endian 32-bit fields `sequence`,
//!   `operation`, `version`, `length`, `reserved`, i.e. [`lava_xdr::frame::FrameHeader`]
//!   whose `status` field is the spec's `reserved`) followed by exactly `length` payload
//!   bytes in XDR.
//! - The opcodes of section 2.1 with the enum's values: [`LIM_MASTER_BEACON`] = 0,
//!   [`LIM_LOAD_REPORT`] = 1, and [`LIM_VERSION`] = 0x00010000.
//! - The payloads [`MasterBeacon`] (section 3.1) and [`LoadReport`] (section 4.1).
//! - The bits of the report's `status0` (section 6), with LavaLite's `lsf.h` values:
//!   [`LIM_UNAVAIL`], [`LIM_LOCKEDU`], [`LIM_LOCKEDW`], [`LIM_BUSY`], [`LIM_RESDOWN`],
//!   [`LIM_LOCKEDM`], [`LIM_SBDDOWN`] in the high half, and (ours) which load index is
//!   beyond its threshold in the low [`LIM_NIDX`] bits ([`LIM_BUSY_INDEX_MASK`]).
//! - The TCP query channel announced by the beacon's `tcp_port` (section 3.1, "future TCP
//!   control channel"): opcodes [`LIM_TCP_CLUSTER_INFO`], [`LIM_TCP_HOST_LOAD`],
//!   [`LIM_TCP_STATUS`], [`LIM_TCP_HOSTS_INFO`] (answered by the master) and
//!   [`LIM_TCP_HOST_INFO`] (answered by every lim about its own host: the static facts —
//!   CPUs, memory, swap — that the spec's fixed load report has no room for), and their XDR
//!   replies, carried in ordinary [`lava_xdr::frame`] frames with the same version; and
//!   [`LIM_TCP_LOCK`] (`lsadmin limlock`/`limunlock`, every lim about its own host).
//!
//! # Byte layout (decided here; the spec gives C structs)
//! | payload | field | XDR type | bytes |
//! |---|---|---|---|
//! | beacon | `cluster[LL_BUFSIZ_32]` | `opaque[32]`, NUL-padded | 32 |
//! | beacon | `hostname[MAXHOSTNAMELEN]` | `opaque[64]`, NUL-padded | 64 |
//! | beacon | `hostNo`, `seqno` | unsigned int | 4 + 4 |
//! | beacon | `tcp_port` (`uint16_t`) | unsigned int, high 16 bits zero (XDR has no 16-bit type) | 4 |
//! | report | `hostNo`, `seqNo`, `status0`, `nidx` | unsigned int | 4 × 4 |
//! | report | `li[LIM_NIDX]` | 11 × float (IEEE 754 big-endian), all 11 always present | 44 |
//!
//! So a beacon datagram is 20 + 108 = 128 bytes and a load report 20 + 60 = 80 bytes.
//! Slots of `li` at and after `nidx` are sent as 0.0 and ignored by the receiver.
//! The `reserved` header field is sent as 0 and ignored on receipt (future flags).
//!
//! # What it never does
//! Validation beyond well-formedness (string contents, `nidx` range, finite values: that is
//! lava-lim-ll), state, clocks, sockets.

#![deny(missing_docs)]

use lava_xdr::frame::{FrameHeader, HEADER_BYTES};
use serde::{Deserialize, Serialize};

/// The protocol version of section 2 (`0x00010000`).
pub const LIM_VERSION: u32 = 0x0001_0000;
/// `LIM_MASTER_BEACON`: master → slaves (section 2.1, first enumerator).
pub const LIM_MASTER_BEACON: u32 = 0;
/// `LIM_LOAD_REPORT`: slave → master (section 2.1, second enumerator).
pub const LIM_LOAD_REPORT: u32 = 1;
/// `LL_BUFSIZ_32`: bytes of the beacon's cluster field.
pub const CLUSTER_FIELD_BYTES: usize = 32;
/// `MAXHOSTNAMELEN`: bytes of the beacon's hostname field.
pub const HOSTNAME_FIELD_BYTES: usize = 64;
/// `LIM_NIDX`: the number of built-in load indices (section 5).
pub const LIM_NIDX: usize = 11;
/// Payload bytes of a beacon.
pub const BEACON_PAYLOAD_BYTES: usize = CLUSTER_FIELD_BYTES + HOSTNAME_FIELD_BYTES + 3 * 4;
/// Payload bytes of a load report.
pub const LOAD_REPORT_PAYLOAD_BYTES: usize = 4 * 4 + LIM_NIDX * 4;
/// The largest datagram this protocol ever sends; anything longer is refused unread.
pub const DATAGRAM_BYTES_MAX: usize = HEADER_BYTES + BEACON_PAYLOAD_BYTES;

/// TCP query: the cluster's name and the master's name ([`ClusterInfoReply`]).
pub const LIM_TCP_CLUSTER_INFO: u32 = 100;
/// TCP query: every configured host with status and load ([`HostLoadReply`]).
pub const LIM_TCP_HOST_LOAD: u32 = 101;
/// TCP query: the daemon's counters, drops by reason ([`StatusReply`]).
pub const LIM_TCP_STATUS: u32 = 102;
/// TCP query: this lim's own host's static facts ([`HostInfoReply`]); every lim answers it.
pub const LIM_TCP_HOST_INFO: u32 = 103;
/// TCP query: every configured host's static facts as the master knows them
/// ([`HostsInfoReply`], what `lshosts` prints).
pub const LIM_TCP_HOSTS_INFO: u32 = 104;
/// TCP query (ours, for `lsadmin showstatus`): this lim's role, its view of the master and of
/// the hosts, and every counter it keeps ([`AdminStatusReply`]); every lim answers it.
pub const LIM_TCP_ADMIN_STATUS: u32 = 105;
/// TCP request (ours, for `lsadmin reconfig`): check the configuration and, if it loads,
/// restart this lim in place to read it ([`ReconfigReply`]). Accepted only from a
/// privileged source port (root) on a host of the cluster.
pub const LIM_TCP_RECONFIG: u32 = 106;
/// TCP request (ours, for `lsadmin limlock` and `limunlock`): lock or unlock this lim's own
/// host ([`LockRequest`], [`LockReply`]). Accepted only from a privileged source port (root)
/// on this host itself (its own address or loopback).
pub const LIM_TCP_LOCK: u32 = 107;
/// Reply status of a TCP query that succeeded.
pub const TCP_STATUS_OK: u32 = 0;
/// Reply status of a query sent to a lim that is not the master, or an unknown query.
pub const TCP_STATUS_REFUSED: u32 = 1;

/// `status0` (section 6) with no bit set: the host is OK ("`LIM_UNAVAIL == 0` → Host OK").
pub const LIM_OK: u32 = 0;
/// `status0` bit: the host's lim is unavailable (never reported, or 3 report intervals
/// missed). The master sets it in its answers; a reporting slave does not send it.
pub const LIM_UNAVAIL: u32 = 0x0001_0000;
/// `status0` bit: the host's lim is locked by `lsadmin limlock` (`lsload`: `lockU`).
pub const LIM_LOCKEDU: u32 = 0x0002_0000;
/// `status0` bit: the host's lim is locked by its run window (`lockW`; LavaCore has no run
/// windows and never sets it, but shows it when a host reports it).
pub const LIM_LOCKEDW: u32 = 0x0004_0000;
/// `status0` bit: a load index is beyond its `lsf.cluster` threshold (`lsload`: `busy`); the
/// low [`LIM_NIDX`] bits say which ([`LIM_BUSY_INDEX_MASK`]).
pub const LIM_BUSY: u32 = 0x0008_0000;
/// `status0` bit: the host's RES is down (`-ok`; LavaCore has no RES and never sets it).
pub const LIM_RESDOWN: u32 = 0x0010_0000;
/// `status0` bit: the host is locked by the master (`lockM`; never set by LavaCore).
pub const LIM_LOCKEDM: u32 = 0x0020_0000;
/// `status0` bit: the host's sbatchd is down (never set by LavaCore's lim).
pub const LIM_SBDDOWN: u32 = 0x0040_0000;
/// Any of the lock bits.
pub const LIM_LOCKED_MASK: u32 = LIM_LOCKEDU | LIM_LOCKEDW | LIM_LOCKEDM;
/// `status0` bits (ours) saying which load index is beyond its threshold: bit `i` for index
/// `i` of section 5. LavaLite keeps these in `status[1]`, which the spec's report does not
/// carry; its flags use only the high half of `status0`, so the low bits are free.
pub const LIM_BUSY_INDEX_MASK: u32 = (1 << LIM_NIDX) - 1;

/// `struct master_beacon` (section 3.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MasterBeacon {
    /// Cluster name, NUL-padded.
    #[serde(with = "lava_xdr::fixed_opaque")]
    pub cluster: [u8; CLUSTER_FIELD_BYTES],
    /// Master host name, NUL-padded.
    #[serde(with = "lava_xdr::fixed_opaque")]
    pub hostname: [u8; HOSTNAME_FIELD_BYTES],
    /// Master host index (position in lsf.cluster's Host section).
    pub host_no: u32,
    /// Monotonic master sequence.
    pub seqno: u32,
    /// The master's TCP query port (XDR unsigned int; decode refuses values over 65535).
    pub tcp_port: u16,
}

/// `struct wire_load_update` (section 4.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// Reporting host's index.
    pub host_no: u32,
    /// Monotonic host sequence.
    pub seq_no: u32,
    /// Host status flags; 0 is OK (section 6, [`LIM_OK`] and the `LIM_*` bits).
    pub status0: u32,
    /// Number of valid entries of `li`.
    pub nidx: u32,
    /// Load indices in section 5's order.
    pub li: [f32; LIM_NIDX],
}

/// One decoded LIM datagram payload.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// `LIM_MASTER_BEACON`.
    Beacon(MasterBeacon),
    /// `LIM_LOAD_REPORT`.
    LoadReport(LoadReport),
}

impl Message {
    /// The opcode of this message.
    pub fn operation(&self) -> u32 {
        match self {
            Message::Beacon(_) => LIM_MASTER_BEACON,
            Message::LoadReport(_) => LIM_LOAD_REPORT,
        }
    }
}

/// A decoded datagram: the header's sequence and the message.
#[derive(Clone, Debug, PartialEq)]
pub struct Datagram {
    /// `packet_header.sequence`.
    pub sequence: u32,
    /// The payload.
    pub message: Message,
}

/// Why a datagram was refused; each variant is a drop counter of the daemon.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than the 20-byte header.
    #[error("short datagram: {actual} bytes, the header alone is {HEADER_BYTES}")]
    Short {
        /// Bytes received.
        actual: usize,
    },
    /// More bytes than the largest LIM datagram.
    #[error("oversized datagram: {actual} bytes, at most {DATAGRAM_BYTES_MAX}")]
    Oversized {
        /// Bytes received (possibly truncated by the receive buffer).
        actual: usize,
    },
    /// Version other than [`LIM_VERSION`].
    #[error("unsupported LIM version {got:#x}, this lim speaks {LIM_VERSION:#x}")]
    WrongVersion {
        /// Version in the header.
        got: u32,
    },
    /// `length` differs from the payload bytes present, or from the opcode's payload size.
    #[error(
        "length mismatch: header says {announced} payload bytes, {actual} present, operation needs {expected}"
    )]
    LengthMismatch {
        /// `packet_header.length`.
        announced: u32,
        /// Payload bytes present.
        actual: usize,
        /// Payload size of the operation (0 when the operation is unknown).
        expected: usize,
    },
    /// Opcode other than the two of section 2.1.
    #[error("unknown LIM operation {operation}")]
    UnknownOpcode {
        /// `packet_header.operation`.
        operation: u32,
    },
    /// The payload is not well-formed XDR for the operation (e.g. tcp_port > 65535).
    #[error("malformed payload of operation {operation}: {reason}")]
    Malformed {
        /// `packet_header.operation`.
        operation: u32,
        /// What the XDR decoder said.
        reason: String,
    },
}

/// Encodes one datagram: header (`reserved` = 0) then payload.
pub fn encode_datagram(sequence: u32, message: &Message) -> Vec<u8> {
    let payload = match message {
        Message::Beacon(beacon) => lava_xdr::to_bytes(beacon),
        Message::LoadReport(report) => lava_xdr::to_bytes(report),
    }
    .expect("fixed-size LIM payloads always encode");
    let header = FrameHeader {
        sequence,
        operation: message.operation(),
        version: LIM_VERSION,
        length: u32::try_from(payload.len()).expect("payload is a fixed, small size"),
        status: 0,
    };
    let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
    header.write(&mut out);
    out.extend_from_slice(&payload);
    out
}

/// Decodes one received datagram, checking in this order: short, oversized, version,
/// header length against the bytes present, opcode, the opcode's payload size, XDR.
pub fn decode_datagram(bytes: &[u8]) -> Result<Datagram, DecodeError> {
    if bytes.len() < HEADER_BYTES {
        return Err(DecodeError::Short { actual: bytes.len() });
    }
    if bytes.len() > DATAGRAM_BYTES_MAX {
        return Err(DecodeError::Oversized { actual: bytes.len() });
    }
    let header = FrameHeader::parse(bytes).expect("length checked above");
    if header.version != LIM_VERSION {
        return Err(DecodeError::WrongVersion { got: header.version });
    }
    let payload = &bytes[HEADER_BYTES..];
    let expected = match header.operation {
        LIM_MASTER_BEACON => BEACON_PAYLOAD_BYTES,
        LIM_LOAD_REPORT => LOAD_REPORT_PAYLOAD_BYTES,
        _ => 0,
    };
    if header.length as usize != payload.len() {
        return Err(DecodeError::LengthMismatch {
            announced: header.length,
            actual: payload.len(),
            expected,
        });
    }
    if expected == 0 {
        return Err(DecodeError::UnknownOpcode { operation: header.operation });
    }
    if payload.len() != expected {
        return Err(DecodeError::LengthMismatch {
            announced: header.length,
            actual: payload.len(),
            expected,
        });
    }
    let limits = lava_xdr::Limits::default();
    let malformed = |error: lava_xdr::Error| DecodeError::Malformed {
        operation: header.operation,
        reason: error.to_string(),
    };
    let message = if header.operation == LIM_MASTER_BEACON {
        Message::Beacon(lava_xdr::from_bytes(payload, &limits).map_err(malformed)?)
    } else {
        Message::LoadReport(lava_xdr::from_bytes(payload, &limits).map_err(malformed)?)
    };
    Ok(Datagram { sequence: header.sequence, message })
}

/// Reply to [`LIM_TCP_CLUSTER_INFO`] (what `lsid` prints).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterInfoReply {
    /// The cluster's name.
    pub cluster: String,
    /// The master lim's host name.
    pub master: String,
}

/// One host of a [`HostLoadReply`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostLoad {
    /// Host name as configured.
    pub name: String,
    /// Host type from lsf.cluster (`!` or empty when unknown).
    pub host_type: String,
    /// Host model from lsf.cluster.
    pub model: String,
    /// Whether the host is a server host.
    pub server: bool,
    /// 0: ok; 1: unavailable (never reported, or 3 report intervals missed).
    pub status: u32,
    /// The host's status word: [`LIM_UNAVAIL`] when `status` is unavailable, else the last
    /// `status0` it reported (lock and busy bits).
    pub status0: u32,
    /// Number of valid `li` entries (0 when the host never reported).
    pub nidx: u32,
    /// Last reported load indices (section 5's order).
    pub li: [f32; LIM_NIDX],
    /// Milliseconds since the master last heard from the host (`u64::MAX`: never).
    pub age_ms: u64,
}

/// Host status value in [`HostLoad::status`]: available.
pub const HOST_STATUS_OK: u32 = 0;
/// Host status value in [`HostLoad::status`]: unavailable.
pub const HOST_STATUS_UNAVAIL: u32 = 1;

/// Reply to [`LIM_TCP_HOST_LOAD`]: every configured host in lsf.cluster order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostLoadReply {
    /// The hosts.
    pub hosts: Vec<HostLoad>,
}

/// Reply to [`LIM_TCP_HOST_INFO`]: the answering lim's host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInfoReply {
    /// The host's name in lsf.cluster (so that the asker knows it reached the right lim).
    pub name: String,
    /// Processors the host has.
    pub ncpus: u32,
    /// Physical memory, MB.
    pub maxmem_mb: u32,
    /// Swap space, MB.
    pub maxswp_mb: u32,
}

/// One host of a [`HostsInfoReply`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostStatic {
    /// Host name as configured.
    pub name: String,
    /// Host type from lsf.cluster (`!` or empty when unknown).
    pub host_type: String,
    /// Host model from lsf.cluster.
    pub model: String,
    /// Whether the host is a server host.
    pub server: bool,
    /// Processors; 0 when the master does not know them (the host's lim never answered).
    pub ncpus: u32,
    /// Physical memory, MB (meaningful when `ncpus` > 0).
    pub maxmem_mb: u32,
    /// Swap space, MB (meaningful when `ncpus` > 0).
    pub maxswp_mb: u32,
}

/// Reply to [`LIM_TCP_HOSTS_INFO`]: every configured host in lsf.cluster order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostsInfoReply {
    /// The hosts.
    pub hosts: Vec<HostStatic>,
}

/// Reply to [`LIM_TCP_STATUS`]: named counters (drops by reason and accepted messages).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReply {
    /// Whether this lim is the master.
    pub master: bool,
    /// `(name, count)` pairs in a stable order.
    pub counters: Vec<(String, u64)>,
}

/// Reply to [`LIM_TCP_RECONFIG`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconfigReply {
    /// The configuration loads and the lim restarts to read it.
    pub applied: bool,
    /// Why not (the file, line and problem, or the refusal).
    pub message: String,
}

/// Request of [`LIM_TCP_LOCK`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRequest {
    /// Lock (`lsadmin limlock`) or unlock (`lsadmin limunlock`).
    pub lock: bool,
    /// A lock's duration in seconds (`limlock -t`); 0: until unlocked. Ignored by an unlock.
    pub duration_s: u32,
}

/// Reply to [`LIM_TCP_LOCK`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockReply {
    /// Whether the host is now locked (or unlocked) as asked.
    pub done: bool,
    /// Why not, in LSF's words (`Host is already locked`, `Host is not locked`, permission).
    pub message: String,
    /// The host's status word after the request.
    pub status0: u32,
}

/// Reply to [`LIM_TCP_ADMIN_STATUS`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdminStatusReply {
    /// The answering lim's host.
    pub host: String,
    /// Whether this lim is the master.
    pub master: bool,
    /// The master's name (a slave: the configured master, whether or not it is heard).
    pub master_name: String,
    /// A slave: whether valid beacons arrive (it is reporting); the master: always true.
    pub master_heard: bool,
    /// The master: hosts `ok` (0 on a slave).
    pub hosts_ok: u32,
    /// The master: hosts `unavail` (0 on a slave).
    pub hosts_unavail: u32,
    /// `(name, count)` pairs in a stable order.
    pub counters: Vec<(String, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beacon() -> Message {
        let mut cluster = [0u8; 32];
        cluster[..4].copy_from_slice(b"lava");
        let mut hostname = [0u8; 64];
        hostname[..2].copy_from_slice(b"h0");
        Message::Beacon(MasterBeacon { cluster, hostname, host_no: 0, seqno: 7, tcp_port: 6879 })
    }

    fn report() -> Message {
        Message::LoadReport(LoadReport { host_no: 2, seq_no: 9, status0: 0, nidx: 11, li: [1.5; 11] })
    }

    // Goal: both messages round-trip and have the documented sizes and field offsets.
    #[test]
    fn round_trip_and_layout() {
        let bytes = encode_datagram(3, &beacon());
        assert_eq!(bytes.len(), 128);
        assert_eq!(&bytes[..20], &[0, 0, 0, 3, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 108, 0, 0, 0, 0]);
        assert_eq!(&bytes[20..24], b"lava");
        assert_eq!(&bytes[52..54], b"h0");
        assert_eq!(&bytes[124..128], &[0, 0, 0x1a, 0xdf]);
        assert_eq!(decode_datagram(&bytes), Ok(Datagram { sequence: 3, message: beacon() }));
        let bytes = encode_datagram(4, &report());
        assert_eq!(bytes.len(), 80);
        assert_eq!(&bytes[36..40], &1.5f32.to_be_bytes());
        assert_eq!(decode_datagram(&bytes), Ok(Datagram { sequence: 4, message: report() }));
    }

    // Goal: the status0 bits have LavaLite's lsf.h values, the index bits fit below them, and a
    // lock request is two XDR words.
    #[test]
    fn status_bits_and_lock_request() {
        let flags = [
            (LIM_UNAVAIL, 0x0001_0000),
            (LIM_LOCKEDU, 0x0002_0000),
            (LIM_LOCKEDW, 0x0004_0000),
            (LIM_BUSY, 0x0008_0000),
            (LIM_RESDOWN, 0x0010_0000),
            (LIM_LOCKEDM, 0x0020_0000),
            (LIM_SBDDOWN, 0x0040_0000),
        ];
        for (bit, value) in flags {
            assert_eq!(bit, value);
            assert_eq!(bit & LIM_BUSY_INDEX_MASK, 0);
        }
        assert_eq!(LIM_BUSY_INDEX_MASK, 0x7ff);
        let request = LockRequest { lock: true, duration_s: 30 };
        assert_eq!(lava_xdr::to_bytes(&request).expect("encodes"), [0, 0, 0, 1, 0, 0, 0, 30]);
    }

    // Goal: every malformed shape gets its own typed error.
    #[test]
    fn malformed_datagrams_are_typed_errors() {
        let good = encode_datagram(1, &report());
        assert_eq!(decode_datagram(&good[..10]), Err(DecodeError::Short { actual: 10 }));
        assert_eq!(decode_datagram(&[0; 129]), Err(DecodeError::Oversized { actual: 129 }));
        let mut bad = good.clone();
        bad[9] = 2;
        assert_eq!(decode_datagram(&bad), Err(DecodeError::WrongVersion { got: 0x0002_0000 }));
        assert!(matches!(decode_datagram(&good[..79]), Err(DecodeError::LengthMismatch { .. })));
        let mut bad = good.clone();
        bad[7] = 9;
        assert_eq!(decode_datagram(&bad), Err(DecodeError::UnknownOpcode { operation: 9 }));
        let mut bad = good.clone();
        bad[7] = 0; // a beacon header over a report-sized payload
        assert!(matches!(decode_datagram(&bad), Err(DecodeError::LengthMismatch { expected: 108, .. })));
        let mut bad = encode_datagram(1, &beacon());
        bad[125] = 1; // tcp_port = 0x011adf > 65535
        assert!(matches!(decode_datagram(&bad), Err(DecodeError::Malformed { .. })));
    }

    // Goal: arbitrary bytes never panic the decoder.
    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut state = 0x1234_5678u32;
        for len in 0..200usize {
            let mut bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (state >> 24) as u8
                })
                .collect();
            if len >= 20 {
                bytes[8..12].copy_from_slice(&LIM_VERSION.to_be_bytes());
                bytes[12..16].copy_from_slice(&((len - 20) as u32).to_be_bytes());
                bytes[4..8].copy_from_slice(&(len as u32 % 2).to_be_bytes());
            }
            let _ = decode_datagram(&bytes);
        }
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn beacons() -> impl Strategy<Value = MasterBeacon> {
        (
            proptest::array::uniform32(any::<u8>()),
            proptest::collection::vec(any::<u8>(), HOSTNAME_FIELD_BYTES),
            any::<u32>(),
            any::<u32>(),
            any::<u16>(),
        )
            .prop_map(|(cluster, host, host_no, seqno, tcp_port)| {
                let mut hostname = [0u8; HOSTNAME_FIELD_BYTES];
                hostname.copy_from_slice(&host);
                MasterBeacon { cluster, hostname, host_no, seqno, tcp_port }
            })
    }

    fn reports() -> impl Strategy<Value = LoadReport> {
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), proptest::array::uniform11(any::<f32>()))
            .prop_map(|(host_no, seq_no, status0, nidx, li)| LoadReport {
                host_no,
                seq_no,
                status0,
                nidx,
                li,
            })
    }

    fn messages() -> impl Strategy<Value = Message> {
        prop_oneof![beacons().prop_map(Message::Beacon), reports().prop_map(Message::LoadReport)]
    }

    /// Equality on the bits, so that NaN load values compare equal to themselves.
    fn same(a: &Message, b: &Message) -> bool {
        match (a, b) {
            (Message::Beacon(a), Message::Beacon(b)) => a == b,
            (Message::LoadReport(a), Message::LoadReport(b)) => {
                (a.host_no, a.seq_no, a.status0, a.nidx) == (b.host_no, b.seq_no, b.status0, b.nidx)
                    && a.li.iter().zip(&b.li).all(|(x, y)| x.to_bits() == y.to_bits())
            }
            _ => false,
        }
    }

    /// `bytes` with the header's `reserved` word zeroed: it is ignored on receipt and sent as 0.
    fn canonical(bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        if out.len() >= HEADER_BYTES {
            out[16..20].fill(0);
        }
        out
    }

    proptest! {
        // Goal: any byte string is decoded or refused with a typed error, never a panic, and
        // an accepted one re-encodes to the same bytes but for the ignored `reserved` word (one
        // encoding per datagram).
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(datagram) = decode_datagram(&bytes) {
                prop_assert_eq!(encode_datagram(datagram.sequence, &datagram.message), canonical(&bytes));
            }
        }

        // Goal: the same, for inputs that get past the header checks (right version and
        // length, either opcode) so that the payload decoders are exercised too.
        #[test]
        fn plausible_headers_never_panic(
            sequence in any::<u32>(),
            operation in 0u32..3,
            reserved in any::<u32>(),
            payload in prop_oneof![
                proptest::collection::vec(any::<u8>(), BEACON_PAYLOAD_BYTES),
                proptest::collection::vec(any::<u8>(), LOAD_REPORT_PAYLOAD_BYTES),
                proptest::collection::vec(any::<u8>(), 0..=BEACON_PAYLOAD_BYTES),
            ],
        ) {
            let mut bytes = Vec::new();
            FrameHeader {
                sequence,
                operation,
                version: LIM_VERSION,
                length: payload.len() as u32,
                status: reserved,
            }
            .write(&mut bytes);
            bytes.extend_from_slice(&payload);
            match decode_datagram(&bytes) {
                Ok(datagram) => {
                    prop_assert_eq!(datagram.sequence, sequence);
                    prop_assert_eq!(encode_datagram(sequence, &datagram.message), canonical(&bytes));
                }
                Err(DecodeError::Short { .. } | DecodeError::Oversized { .. } | DecodeError::WrongVersion { .. }) => {
                    prop_assert!(false, "the header was well-formed");
                }
                Err(_) => {}
            }
        }

        // Goal: every generated beacon and report round-trips through encode and decode, with
        // the documented size.
        #[test]
        fn encode_decode_round_trips(sequence in any::<u32>(), message in messages()) {
            let bytes = encode_datagram(sequence, &message);
            let expected_len = HEADER_BYTES + match message {
                Message::Beacon(_) => BEACON_PAYLOAD_BYTES,
                Message::LoadReport(_) => LOAD_REPORT_PAYLOAD_BYTES,
            };
            prop_assert_eq!(bytes.len(), expected_len);
            let decoded = decode_datagram(&bytes).expect("an encoded datagram decodes");
            prop_assert_eq!(decoded.sequence, sequence);
            prop_assert!(same(&decoded.message, &message), "{:?} != {:?}", decoded.message, message);
        }
    }
}
