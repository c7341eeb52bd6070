//! Golden bytes of the LIM protocol: the UDP datagram (the spec's `packet_header` followed by
//! the XDR payload) of every datagram kind, the master's beacon and the slave's load report, and
//! the TCP frames of every query on the lim's query port, request and answer, with the refusal.
//!
//! A lim of one build must understand the datagrams of another during a rolling upgrade, and the
//! spec fixes the header word by word; a field reordered in a payload struct, a `u16` widened, a
//! constant renumbered or a change inside the XDR codec would still round-trip inside one build
//! and pass every other test. Here each such change moves a byte of a fixed value, and the failure
//! names the message and the golden line (one field per line, named in its comment). Values are
//! distinct so that swapped fields show, and each golden is decoded back to its value. Two checks
//! keep the list complete: every opcode the datagram decoder accepts, and every `LIM_TCP_*`
//! constant the crate's source declares, must have a golden here.

use std::fmt::Debug;

use lava_lim_wire::*;
use lava_xdr::frame::{FrameHeader, FrameLimits, decode_exact};
use lava_xdr::golden::{assert_bytes, unhex};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A NUL-padded fixed field of the beacon.
fn field<const N: usize>(text: &str) -> [u8; N] {
    let mut bytes = [0u8; N];
    bytes[..text.len()].copy_from_slice(text.as_bytes());
    bytes
}

/// Encodes a datagram with the crate's codec, compares with `golden`, and decodes the golden
/// bytes back to the same sequence and message.
fn check_datagram(name: &str, sequence: u32, message: Message, golden: &str) {
    assert_bytes(name, &encode_datagram(sequence, &message), golden);
    let decoded = decode_datagram(&unhex(golden))
        .unwrap_or_else(|error| panic!("{name}: the golden datagram does not decode: {error}"));
    assert_eq!(decoded, Datagram { sequence, message }, "{name}: the golden decodes to another datagram");
}

/// Writes a TCP frame as the lims and their clients do (the 20-byte header, then the XDR body),
/// compares with `golden`, and decodes the golden frame back to the header and the body.
fn check_frame<T>(name: &str, operation: u32, status: u32, body: &T, golden: &str)
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let encoded = lava_xdr::to_bytes(body).unwrap_or_else(|error| panic!("{name}: does not encode: {error}"));
    let header =
        FrameHeader { sequence: 5, operation, version: LIM_VERSION, length: encoded.len() as u32, status };
    let mut frame = Vec::new();
    header.write(&mut frame);
    frame.extend_from_slice(&encoded);
    assert_bytes(name, &frame, golden);
    let decoded = decode_exact(&unhex(golden), &FrameLimits::default())
        .unwrap_or_else(|error| panic!("{name}: the golden frame does not decode: {error}"));
    assert_eq!(decoded.header, header, "{name}: header");
    let back: T = lava_xdr::from_bytes(&decoded.body, &lava_xdr::Limits::DEFAULT)
        .unwrap_or_else(|error| panic!("{name}: the golden body does not decode: {error}"));
    assert_eq!(&back, body, "{name}: the golden body decodes to another value");
}

/// A query's request frame, whose body is empty for every query but `LIM_TCP_LOCK`.
fn check_query(name: &str, operation: u32, golden: &str) {
    check_frame(name, operation, TCP_STATUS_OK, &(), golden);
}

// ---------------------------------------------------------------------------
// UDP datagrams
// ---------------------------------------------------------------------------

/// Each datagram kind's opcode and golden test. No wildcard: a new kind does not compile until
/// it is given its number and a golden here.
fn datagram_golden_of(message: &Message) -> (u32, fn()) {
    match message {
        Message::Beacon(_) => (0, beacon),
        Message::LoadReport(_) => (1, load_report),
    }
}

fn sample_beacon() -> MasterBeacon {
    MasterBeacon {
        cluster: field("lavacore"),
        hostname: field("hostA"),
        host_no: 2,
        seqno: 1234,
        tcp_port: 36000,
    }
}

fn sample_report() -> LoadReport {
    LoadReport {
        host_no: 3,
        seq_no: 4321,
        status0: LIM_LOCKEDU | LIM_BUSY | 1 << 2,
        nidx: LIM_NIDX as u32,
        li: [0.5, 1.25, 2.0, 0.375, 3.0, 120.0, 4.0, 600.0, 1024.0, 2048.0, 3906.25],
    }
}

// Goal: every datagram kind keeps the opcode of spec section 2.1 (the C enum's values: the
// beacon 0, the report 1) and has a golden, and the decoder knows no other kind. Method: map one
// message of each kind through the exhaustive match above and run its golden; then offer the
// decoder every opcode up to 0x10000 with an empty payload and collect those it does not refuse
// as unknown.
#[test]
fn every_datagram_kind_keeps_its_opcode_and_has_a_golden() {
    let samples = [Message::Beacon(sample_beacon()), Message::LoadReport(sample_report())];
    let mut pinned = Vec::new();
    for message in &samples {
        let (code, golden) = datagram_golden_of(message);
        assert_eq!(message.operation(), code, "{message:?} changed its opcode");
        golden();
        pinned.push(code);
    }
    assert_eq!((LIM_MASTER_BEACON, LIM_LOAD_REPORT), (0, 1), "spec section 2.1's enum values");
    let mut known = Vec::new();
    for operation in 0..=0x1_0000u32 {
        let mut header = Vec::new();
        FrameHeader { sequence: 1, operation, version: LIM_VERSION, length: 0, status: 0 }.write(&mut header);
        if !matches!(decode_datagram(&header), Err(DecodeError::UnknownOpcode { .. })) {
            known.push(operation);
        }
    }
    assert_eq!(known, pinned, "the datagram decoder accepts an opcode that has no golden here");
}

// Goal: LIM_MASTER_BEACON is the spec's header (five 4-byte words: sequence, operation, version
// 0x00010000, payload length, reserved 0) then `struct master_beacon` in XDR: the NUL-padded
// 32-byte cluster and 64-byte host name, hostNo, seqno, and tcp_port. The spec declares tcp_port a
// `uint16_t`; XDR has no 16-bit type, so it travels in a 4-byte word with the high half zero (the
// port's two bytes at payload offset 106, not 104) and the payload is 108 bytes, as the crate
// documents. Method: golden of one beacon datagram.
#[test]
fn beacon() {
    let golden = r##"
        00000103                                    # header.sequence = 259
        00000000                                    # header.operation (LIM_MASTER_BEACON) = 0
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        0000006c                                    # header.length (payload bytes) = 108
        00000000                                    # header.reserved = 0
        6c617661636f72650000000000000000            # payload.cluster[0..16] = "lavacore", NUL-padded
        00000000000000000000000000000000            # payload.cluster[16..32]
        686f7374410000000000000000000000            # payload.hostname[0..16] = "hostA", NUL-padded
        00000000000000000000000000000000            # payload.hostname[16..32]
        00000000000000000000000000000000            # payload.hostname[32..48]
        00000000000000000000000000000000            # payload.hostname[48..64]
        00000002                                    # payload.host_no = 2
        000004d2                                    # payload.seqno = 1234
        00008ca0                                    # payload.tcp_port = 36000 (u16 in an XDR word)
    "##;
    check_datagram("LIM_MASTER_BEACON", 259, Message::Beacon(sample_beacon()), golden);
}

// Goal: LIM_LOAD_REPORT is the spec's header then `struct wire_load_update`: hostNo, seqNo,
// status0, nidx and the 11 load indices as big-endian IEEE floats in section 5's order, with
// status0's bits at LavaLite's values. Method: golden of one report datagram.
#[test]
fn load_report() {
    let golden = r##"
        00000104                                    # header.sequence = 260
        00000001                                    # header.operation (LIM_LOAD_REPORT) = 1
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        0000003c                                    # header.length (payload bytes) = 60
        00000000                                    # header.reserved = 0
        00000003                                    # payload.host_no = 3
        000010e1                                    # payload.seq_no = 4321
        000a0004                                    # payload.status0 = LOCKEDU | BUSY | index 2
        0000000b                                    # payload.nidx = 11
        3f000000                                    # payload.li[0] (r15s) = 0.5
        3fa00000                                    # payload.li[1] (r1m) = 1.25
        40000000                                    # payload.li[2] (r15m) = 2.0
        3ec00000                                    # payload.li[3] (ut) = 0.375
        40400000                                    # payload.li[4] (pg) = 3.0
        42f00000                                    # payload.li[5] (io) = 120.0
        40800000                                    # payload.li[6] (ls) = 4.0
        44160000                                    # payload.li[7] (it) = 600.0
        44800000                                    # payload.li[8] (tmp) = 1024.0
        45000000                                    # payload.li[9] (swp) = 2048.0
        45742400                                    # payload.li[10] (mem) = 3906.25
    "##;
    check_datagram("LIM_LOAD_REPORT", 260, Message::LoadReport(sample_report()), golden);
}

// ---------------------------------------------------------------------------
// TCP query frames
// ---------------------------------------------------------------------------

/// One TCP query of the table below.
struct TcpQuery {
    /// The opcode constant's name in the crate.
    name: &'static str,
    /// The constant.
    constant: u32,
    /// The number pinned.
    code: u32,
    /// Its golden test (request and answer frames).
    golden: fn(),
}

/// Every TCP query.
const TCP_QUERIES: [TcpQuery; 8] = [
    TcpQuery {
        name: "LIM_TCP_CLUSTER_INFO",
        constant: LIM_TCP_CLUSTER_INFO,
        code: 100,
        golden: tcp_cluster_info,
    },
    TcpQuery { name: "LIM_TCP_HOST_LOAD", constant: LIM_TCP_HOST_LOAD, code: 101, golden: tcp_host_load },
    TcpQuery { name: "LIM_TCP_STATUS", constant: LIM_TCP_STATUS, code: 102, golden: tcp_status },
    TcpQuery { name: "LIM_TCP_HOST_INFO", constant: LIM_TCP_HOST_INFO, code: 103, golden: tcp_host_info },
    TcpQuery { name: "LIM_TCP_HOSTS_INFO", constant: LIM_TCP_HOSTS_INFO, code: 104, golden: tcp_hosts_info },
    TcpQuery {
        name: "LIM_TCP_ADMIN_STATUS",
        constant: LIM_TCP_ADMIN_STATUS,
        code: 105,
        golden: tcp_admin_status,
    },
    TcpQuery { name: "LIM_TCP_RECONFIG", constant: LIM_TCP_RECONFIG, code: 106, golden: tcp_reconfig },
    TcpQuery { name: "LIM_TCP_LOCK", constant: LIM_TCP_LOCK, code: 107, golden: tcp_lock },
];

// Goal: every TCP query opcode the crate declares keeps its number and has a golden. Method: read
// the `pub const LIM_TCP_*` declarations from the crate's source (the opcodes are constants, not an
// enum, so no match can be exhaustive) and compare their names with the table above; check each
// constant against the number pinned there and run its golden; pin the two reply statuses.
#[test]
fn every_tcp_query_keeps_its_opcode_and_has_a_golden() {
    let source = include_str!("../src/lib.rs");
    let mut declared: Vec<&str> = source
        .lines()
        .filter_map(|line| line.strip_prefix("pub const "))
        .filter(|rest| rest.starts_with("LIM_TCP_"))
        .map(|rest| rest.split(':').next().unwrap_or(rest))
        .collect();
    declared.sort_unstable();
    let mut pinned: Vec<&str> = TCP_QUERIES.iter().map(|query| query.name).collect();
    pinned.sort_unstable();
    assert_eq!(declared, pinned, "a LIM_TCP_* opcode has no golden here (or one was removed)");
    for query in TCP_QUERIES {
        assert_eq!(query.constant, query.code, "{} changed its opcode", query.name);
        (query.golden)();
    }
    assert_eq!((TCP_STATUS_OK, TCP_STATUS_REFUSED), (0, 1));
}

// Goal: a refusal (a slave asked a master's query, or an unknown query) is the request's header
// with status TCP_STATUS_REFUSED and no body. Method: golden of one refusal frame.
#[test]
fn tcp_refused() {
    let golden = r##"
        00000005                                    # header.sequence = 5
        00000064                                    # header.operation (LIM_TCP_CLUSTER_INFO) = 100
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000000                                    # header.length (body bytes) = 0
        00000001                                    # header.status (TCP_STATUS_REFUSED) = 1
    "##;
    check_frame("refused LIM_TCP_CLUSTER_INFO", LIM_TCP_CLUSTER_INFO, TCP_STATUS_REFUSED, &(), golden);
}

// Goal: LIM_TCP_CLUSTER_INFO's request (empty body) and answer keep their layout. Method: goldens.
#[test]
fn tcp_cluster_info() {
    let golden = r##"
        00000005                                    # header.sequence = 5
        00000064                                    # header.operation (LIM_TCP_CLUSTER_INFO) = 100
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000000                                    # header.length (body bytes) = 0
        00000000                                    # header.status (TCP_STATUS_OK) = 0
    "##;
    check_query("LIM_TCP_CLUSTER_INFO request", LIM_TCP_CLUSTER_INFO, golden);
    let reply = ClusterInfoReply { cluster: "lavacore".into(), master: "hostA".into() };
    let golden = r##"
        00000005                                    # header.sequence = 5
        00000064                                    # header.operation (LIM_TCP_CLUSTER_INFO) = 100
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000018                                    # header.length (body bytes) = 24
        00000000                                    # header.status (TCP_STATUS_OK) = 0
        00000008 6c617661636f7265                   # body.cluster = "lavacore"
        00000005 686f737441 000000                  # body.master = "hostA"
    "##;
    check_frame("LIM_TCP_CLUSTER_INFO answer", LIM_TCP_CLUSTER_INFO, TCP_STATUS_OK, &reply, golden);
}

// Goal: LIM_TCP_HOST_LOAD's request and answer keep their layout; `li` is a fixed array of 11
// floats (no count word). Method: goldens.
#[test]
fn tcp_host_load() {
    let golden = r##"
        00000005                                    # header.sequence = 5
        00000065                                    # header.operation (LIM_TCP_HOST_LOAD) = 101
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000000                                    # header.length (body bytes) = 0
        00000000                                    # header.status (TCP_STATUS_OK) = 0
    "##;
    check_query("LIM_TCP_HOST_LOAD request", LIM_TCP_HOST_LOAD, golden);
    let mut li = [0.0; LIM_NIDX];
    li[..3].copy_from_slice(&[0.5, 1.25, 2.0]);
    let host = HostLoad {
        name: "hostB".into(),
        host_type: "X86_64".into(),
        model: "PC".into(),
        server: true,
        status: HOST_STATUS_UNAVAIL,
        status0: LIM_UNAVAIL,
        nidx: 3,
        li,
        age_ms: 15000,
    };
    let golden = r##"
        00000005                                    # header.sequence = 5
        00000065                                    # header.operation (LIM_TCP_HOST_LOAD) = 101
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000068                                    # header.length (body bytes) = 104
        00000000                                    # header.status (TCP_STATUS_OK) = 0
        00000001                                    # body.hosts: 1 element
        00000005 686f737442 000000                  # body.hosts[0].name = "hostB"
        00000006 5838365f3634 0000                  # body.hosts[0].host_type = "X86_64"
        00000002 5043 0000                          # body.hosts[0].model = "PC"
        00000001                                    # body.hosts[0].server = true
        00000001                                    # body.hosts[0].status = 1
        00010000                                    # body.hosts[0].status0 = LIM_UNAVAIL
        00000003                                    # body.hosts[0].nidx = 3
        3f000000                                    # body.hosts[0].li[0] (r15s) (no count) = 0.5
        3fa00000                                    # body.hosts[0].li[1] (r1m) = 1.25
        40000000                                    # body.hosts[0].li[2] (r15m) = 2.0
        00000000                                    # body.hosts[0].li[3] (ut) = 0.0
        00000000                                    # body.hosts[0].li[4] (pg) = 0.0
        00000000                                    # body.hosts[0].li[5] (io) = 0.0
        00000000                                    # body.hosts[0].li[6] (ls) = 0.0
        00000000                                    # body.hosts[0].li[7] (it) = 0.0
        00000000                                    # body.hosts[0].li[8] (tmp) = 0.0
        00000000                                    # body.hosts[0].li[9] (swp) = 0.0
        00000000                                    # body.hosts[0].li[10] (mem) = 0.0
        0000000000003a98                            # body.hosts[0].age_ms = 15000
    "##;
    check_frame(
        "LIM_TCP_HOST_LOAD answer",
        LIM_TCP_HOST_LOAD,
        TCP_STATUS_OK,
        &HostLoadReply { hosts: vec![host] },
        golden,
    );
}

// Goal: LIM_TCP_STATUS's request and answer keep their layout; a counter is a (string, hyper)
// pair. Method: goldens.
#[test]
fn tcp_status() {
    let golden = r##"
        00000005                                    # header.sequence = 5
        00000066                                    # header.operation (LIM_TCP_STATUS) = 102
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000000                                    # header.length (body bytes) = 0
        00000000                                    # header.status (TCP_STATUS_OK) = 0
    "##;
    check_query("LIM_TCP_STATUS request", LIM_TCP_STATUS, golden);
    let reply = StatusReply {
        master: true,
        counters: vec![("drops.short".into(), 3), ("beacons".into(), 0x1_0000_0001)],
    };
    let golden = r##"
        00000005                                    # header.sequence = 5
        00000066                                    # header.operation (LIM_TCP_STATUS) = 102
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000034                                    # header.length (body bytes) = 52
        00000000                                    # header.status (TCP_STATUS_OK) = 0
        00000001                                    # body.master = true
        00000002                                    # body.counters: 2 elements
        0000000b 64726f70732e73686f7274 00          # body.counters[0].0 = "drops.short"
        0000000000000003                            # body.counters[0].1 = 3
        00000007 626561636f6e73 00                  # body.counters[1].0 = "beacons"
        0000000100000001                            # body.counters[1].1 = 0x100000001
    "##;
    check_frame("LIM_TCP_STATUS answer", LIM_TCP_STATUS, TCP_STATUS_OK, &reply, golden);
}

// Goal: LIM_TCP_HOST_INFO's request and answer keep their layout. Method: goldens.
#[test]
fn tcp_host_info() {
    let golden = r##"
        00000005                                    # header.sequence = 5
        00000067                                    # header.operation (LIM_TCP_HOST_INFO) = 103
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000000                                    # header.length (body bytes) = 0
        00000000                                    # header.status (TCP_STATUS_OK) = 0
    "##;
    check_query("LIM_TCP_HOST_INFO request", LIM_TCP_HOST_INFO, golden);
    let reply = HostInfoReply { name: "hostB".into(), ncpus: 16, maxmem_mb: 64000, maxswp_mb: 8192 };
    let golden = r##"
        00000005                                    # header.sequence = 5
        00000067                                    # header.operation (LIM_TCP_HOST_INFO) = 103
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000018                                    # header.length (body bytes) = 24
        00000000                                    # header.status (TCP_STATUS_OK) = 0
        00000005 686f737442 000000                  # body.name = "hostB"
        00000010                                    # body.ncpus = 16
        0000fa00                                    # body.maxmem_mb = 64000
        00002000                                    # body.maxswp_mb = 8192
    "##;
    check_frame("LIM_TCP_HOST_INFO answer", LIM_TCP_HOST_INFO, TCP_STATUS_OK, &reply, golden);
}

// Goal: LIM_TCP_HOSTS_INFO's request and answer keep their layout. Method: goldens.
#[test]
fn tcp_hosts_info() {
    let golden = r##"
        00000005                                    # header.sequence = 5
        00000068                                    # header.operation (LIM_TCP_HOSTS_INFO) = 104
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000000                                    # header.length (body bytes) = 0
        00000000                                    # header.status (TCP_STATUS_OK) = 0
    "##;
    check_query("LIM_TCP_HOSTS_INFO request", LIM_TCP_HOSTS_INFO, golden);
    let host = HostStatic {
        name: "hostC".into(),
        host_type: "X86_64".into(),
        model: "PC".into(),
        server: false,
        ncpus: 8,
        maxmem_mb: 32000,
        maxswp_mb: 4096,
    };
    let golden = r##"
        00000005                                    # header.sequence = 5
        00000068                                    # header.operation (LIM_TCP_HOSTS_INFO) = 104
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000034                                    # header.length (body bytes) = 52
        00000000                                    # header.status (TCP_STATUS_OK) = 0
        00000001                                    # body.hosts: 1 element
        00000005 686f737443 000000                  # body.hosts[0].name = "hostC"
        00000006 5838365f3634 0000                  # body.hosts[0].host_type = "X86_64"
        00000002 5043 0000                          # body.hosts[0].model = "PC"
        00000000                                    # body.hosts[0].server = false
        00000008                                    # body.hosts[0].ncpus = 8
        00007d00                                    # body.hosts[0].maxmem_mb = 32000
        00001000                                    # body.hosts[0].maxswp_mb = 4096
    "##;
    check_frame(
        "LIM_TCP_HOSTS_INFO answer",
        LIM_TCP_HOSTS_INFO,
        TCP_STATUS_OK,
        &HostsInfoReply { hosts: vec![host] },
        golden,
    );
}

// Goal: LIM_TCP_ADMIN_STATUS's request and answer keep their layout. Method: goldens.
#[test]
fn tcp_admin_status() {
    let golden = r##"
        00000005                                    # header.sequence = 5
        00000069                                    # header.operation (LIM_TCP_ADMIN_STATUS) = 105
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000000                                    # header.length (body bytes) = 0
        00000000                                    # header.status (TCP_STATUS_OK) = 0
    "##;
    check_query("LIM_TCP_ADMIN_STATUS request", LIM_TCP_ADMIN_STATUS, golden);
    let reply = AdminStatusReply {
        host: "hostB".into(),
        master: false,
        master_name: "hostA".into(),
        master_heard: true,
        hosts_ok: 4,
        hosts_unavail: 1,
        counters: vec![("reports.sent".into(), 77)],
    };
    let golden = r##"
        00000005                                    # header.sequence = 5
        00000069                                    # header.operation (LIM_TCP_ADMIN_STATUS) = 105
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000044                                    # header.length (body bytes) = 68
        00000000                                    # header.status (TCP_STATUS_OK) = 0
        00000005 686f737442 000000                  # body.host = "hostB"
        00000000                                    # body.master = false
        00000005 686f737441 000000                  # body.master_name = "hostA"
        00000001                                    # body.master_heard = true
        00000004                                    # body.hosts_ok = 4
        00000001                                    # body.hosts_unavail = 1
        00000001                                    # body.counters: 1 element
        0000000c 7265706f7274732e73656e74           # body.counters[0].0 = "reports.sent"
        000000000000004d                            # body.counters[0].1 = 77
    "##;
    check_frame("LIM_TCP_ADMIN_STATUS answer", LIM_TCP_ADMIN_STATUS, TCP_STATUS_OK, &reply, golden);
}

// Goal: LIM_TCP_RECONFIG's request and answer keep their layout. Method: goldens.
#[test]
fn tcp_reconfig() {
    let golden = r##"
        00000005                                    # header.sequence = 5
        0000006a                                    # header.operation (LIM_TCP_RECONFIG) = 106
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000000                                    # header.length (body bytes) = 0
        00000000                                    # header.status (TCP_STATUS_OK) = 0
    "##;
    check_query("LIM_TCP_RECONFIG request", LIM_TCP_RECONFIG, golden);
    let reply = ReconfigReply { applied: false, message: "bad line 3".into() };
    let golden = r##"
        00000005                                    # header.sequence = 5
        0000006a                                    # header.operation (LIM_TCP_RECONFIG) = 106
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000014                                    # header.length (body bytes) = 20
        00000000                                    # header.status (TCP_STATUS_OK) = 0
        00000000                                    # body.applied = false
        0000000a 626164206c696e652033 0000          # body.message = "bad line 3"
    "##;
    check_frame("LIM_TCP_RECONFIG answer", LIM_TCP_RECONFIG, TCP_STATUS_OK, &reply, golden);
}

// Goal: LIM_TCP_LOCK's request (the only query with a body) and answer keep their layout.
// Method: goldens.
#[test]
fn tcp_lock() {
    let request = LockRequest { lock: true, duration_s: 30 };
    let golden = r##"
        00000005                                    # header.sequence = 5
        0000006b                                    # header.operation (LIM_TCP_LOCK) = 107
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        00000008                                    # header.length (body bytes) = 8
        00000000                                    # header.status (TCP_STATUS_OK) = 0
        00000001                                    # body.lock = true
        0000001e                                    # body.duration_s = 30
    "##;
    check_frame("LIM_TCP_LOCK request", LIM_TCP_LOCK, TCP_STATUS_OK, &request, golden);
    let reply = LockReply { done: true, message: String::new(), status0: LIM_LOCKEDU };
    let golden = r##"
        00000005                                    # header.sequence = 5
        0000006b                                    # header.operation (LIM_TCP_LOCK) = 107
        00010000                                    # header.version (LIM_VERSION) = 0x10000
        0000000c                                    # header.length (body bytes) = 12
        00000000                                    # header.status (TCP_STATUS_OK) = 0
        00000001                                    # body.done = true
        00000000                                    # body.message = ""
        00020000                                    # body.status0 = LIM_LOCKEDU
    "##;
    check_frame("LIM_TCP_LOCK answer", LIM_TCP_LOCK, TCP_STATUS_OK, &reply, golden);
}
