//! lava-lim-ll: LIM datagrams (lava-lim-wire) turned into validated domain values, and back.
//!
//! # What it owns
//! - Fixed-size string fields (spec section 3.1, `cluster[32]`, `hostname[64]`): the text is
//!   the bytes before the first NUL, must be non-empty UTF-8 without control characters, and
//!   must be followed by at least one NUL with only NULs after it ([`decode_fixed`]).
//! - [`Beacon`] and [`LoadReport`] checked against a [`Context`]: the cluster name matches
//!   ours, `hostNo` is a configured host index, `nidx` ≤ `LIM_NIDX` (section 5) and every
//!   valid load index is finite and non-negative.
//! - The reverse mapping ([`Beacon::to_wire`], [`LoadReport::to_wire`]).
//! - `status0` is taken as sent: every bit pattern is a status word (spec section 6: zero is
//!   OK, anything else unavailable or degraded); the `LIM_*` bit values are re-exported from
//!   lava-lim-wire for the logic.
//!
//! # What it never does
//! State (sequence numbers, liveness: lava-lim-logic), sockets, clocks.

#![deny(missing_docs)]

use lava_lim_wire as wire;
pub use lava_lim_wire::{
    LIM_BUSY, LIM_BUSY_INDEX_MASK, LIM_LOCKED_MASK, LIM_LOCKEDM, LIM_LOCKEDU, LIM_LOCKEDW, LIM_NIDX, LIM_OK,
    LIM_RESDOWN, LIM_SBDDOWN, LIM_UNAVAIL,
};

/// What a datagram is checked against: our cluster and how many hosts it has.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// Our cluster's name.
    pub cluster: &'a str,
    /// Number of hosts in lsf.cluster (valid `hostNo` are `0..n_hosts`).
    pub n_hosts: u32,
}

/// Why a well-formed datagram was refused; names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlError {
    /// A fixed string field is empty, unterminated, not UTF-8 or has garbage after the NUL.
    #[error("field `{field}`: {reason}")]
    BadString {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// The beacon names another cluster.
    #[error("beacon of cluster `{got}`, ours is `{ours}`")]
    WrongCluster {
        /// The cluster in the beacon.
        got: String,
        /// Ours.
        ours: String,
    },
    /// `hostNo` is not a configured host index.
    #[error("field `{field}` = {got} is not a host index (the cluster has {n_hosts} hosts)")]
    HostOutOfRange {
        /// `hostNo`.
        field: &'static str,
        /// The value.
        got: u32,
        /// Number of configured hosts.
        n_hosts: u32,
    },
    /// `nidx` is larger than `LIM_NIDX`.
    #[error("field `nidx` = {got} exceeds LIM_NIDX = {LIM_NIDX}")]
    TooManyIndices {
        /// The value.
        got: u32,
    },
    /// A valid load index is NaN, infinite or negative.
    #[error("field `li[{idx}]` = {value} is not a finite non-negative number")]
    BadLoadValue {
        /// Index in `li`.
        idx: usize,
        /// The value.
        value: f32,
    },
}

/// Decodes a NUL-padded fixed-size C string field.
pub fn decode_fixed(field: &'static str, bytes: &[u8]) -> Result<String, LlError> {
    let bad = |reason| LlError::BadString { field, reason };
    let end = bytes.iter().position(|&b| b == 0).ok_or(bad("no terminating NUL"))?;
    if end == 0 {
        return Err(bad("empty"));
    }
    if bytes[end..].iter().any(|&b| b != 0) {
        return Err(bad("bytes after the terminating NUL are not NUL"));
    }
    let text = std::str::from_utf8(&bytes[..end]).map_err(|_| bad("not UTF-8"))?;
    if text.chars().any(char::is_control) {
        return Err(bad("control character"));
    }
    Ok(text.to_owned())
}

/// Encodes `text` into a NUL-padded field of `N` bytes; `None` if it does not fit with its NUL.
pub fn encode_fixed<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.is_empty() || text.len() >= N || text.as_bytes().contains(&0) {
        return None;
    }
    let mut out = [0u8; N];
    out[..text.len()].copy_from_slice(text.as_bytes());
    Some(out)
}

/// A validated master beacon (spec section 3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Beacon {
    /// Cluster name (equal to ours once validated).
    pub cluster: String,
    /// Master host name.
    pub master: String,
    /// Master host index.
    pub host_idx: u32,
    /// Master sequence number.
    pub seqno: u32,
    /// Master's TCP query port.
    pub tcp_port: u16,
}

impl Beacon {
    /// Validates a wire beacon.
    pub fn from_wire(beacon: &wire::MasterBeacon, context: Context<'_>) -> Result<Beacon, LlError> {
        let cluster = decode_fixed("cluster", &beacon.cluster)?;
        if cluster != context.cluster {
            return Err(LlError::WrongCluster { got: cluster, ours: context.cluster.to_owned() });
        }
        let master = decode_fixed("hostname", &beacon.hostname)?;
        check_host("hostNo", beacon.host_no, context)?;
        Ok(Beacon {
            cluster,
            master,
            host_idx: beacon.host_no,
            seqno: beacon.seqno,
            tcp_port: beacon.tcp_port,
        })
    }

    /// The wire form; `None` if a name does not fit its fixed field (configuration refuses those).
    pub fn to_wire(&self) -> Option<wire::MasterBeacon> {
        Some(wire::MasterBeacon {
            cluster: encode_fixed(&self.cluster)?,
            hostname: encode_fixed(&self.master)?,
            host_no: self.host_idx,
            seqno: self.seqno,
            tcp_port: self.tcp_port,
        })
    }
}

/// The 11 built-in load indices (spec section 5), `n_valid` of them meaningful.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadVector {
    /// Values in section 5's order; entries at and after `n_valid` are 0.
    pub values: [f32; LIM_NIDX],
    /// How many leading entries are valid.
    pub n_valid: u8,
}

impl LoadVector {
    /// No load known.
    pub const EMPTY: LoadVector = LoadVector { values: [0.0; LIM_NIDX], n_valid: 0 };

    /// A full vector of 11 values.
    pub fn full(values: [f32; LIM_NIDX]) -> LoadVector {
        LoadVector { values, n_valid: LIM_NIDX as u8 }
    }
}

/// A validated load report (spec section 4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadReport {
    /// Reporting host index.
    pub host_idx: u32,
    /// Host sequence number.
    pub seqno: u32,
    /// Host status flags (0: OK; the `LIM_*` bits).
    pub status0: u32,
    /// The load.
    pub load: LoadVector,
}

impl LoadReport {
    /// Validates a wire report.
    pub fn from_wire(report: &wire::LoadReport, context: Context<'_>) -> Result<LoadReport, LlError> {
        check_host("hostNo", report.host_no, context)?;
        if report.nidx as usize > LIM_NIDX {
            return Err(LlError::TooManyIndices { got: report.nidx });
        }
        let n_valid = report.nidx as usize;
        let mut values = [0.0f32; LIM_NIDX];
        for (idx, &value) in report.li.iter().enumerate().take(n_valid) {
            if !value.is_finite() || value < 0.0 {
                return Err(LlError::BadLoadValue { idx, value });
            }
            values[idx] = value;
        }
        Ok(LoadReport {
            host_idx: report.host_no,
            seqno: report.seq_no,
            status0: report.status0,
            load: LoadVector { values, n_valid: n_valid as u8 },
        })
    }

    /// The wire form.
    pub fn to_wire(&self) -> wire::LoadReport {
        let mut li = [0.0f32; LIM_NIDX];
        let n_valid = usize::from(self.load.n_valid).min(LIM_NIDX);
        li[..n_valid].copy_from_slice(&self.load.values[..n_valid]);
        wire::LoadReport {
            host_no: self.host_idx,
            seq_no: self.seqno,
            status0: self.status0,
            nidx: n_valid as u32,
            li,
        }
    }
}

/// A validated datagram.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// A master beacon.
    Beacon(Beacon),
    /// A load report.
    LoadReport(LoadReport),
}

impl Message {
    /// Validates a decoded wire message.
    pub fn from_wire(message: &wire::Message, context: Context<'_>) -> Result<Message, LlError> {
        Ok(match message {
            wire::Message::Beacon(beacon) => Message::Beacon(Beacon::from_wire(beacon, context)?),
            wire::Message::LoadReport(report) => Message::LoadReport(LoadReport::from_wire(report, context)?),
        })
    }
}

fn check_host(field: &'static str, host_idx: u32, context: Context<'_>) -> Result<(), LlError> {
    if host_idx < context.n_hosts {
        Ok(())
    } else {
        Err(LlError::HostOutOfRange { field, got: host_idx, n_hosts: context.n_hosts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTEXT: Context<'static> = Context { cluster: "lava", n_hosts: 3 };

    fn wire_report(nidx: u32, li: [f32; LIM_NIDX]) -> wire::LoadReport {
        wire::LoadReport { host_no: 1, seq_no: 5, status0: 0, nidx, li }
    }

    // Goal: fixed strings decode only when NUL-terminated, non-empty, UTF-8 and NUL-padded.
    #[test]
    fn fixed_strings() {
        let field = encode_fixed::<8>("host").expect("fits");
        assert_eq!(decode_fixed("f", &field), Ok("host".to_owned()));
        assert!(encode_fixed::<4>("host").is_none(), "no room for the NUL");
        assert!(decode_fixed("f", b"hostname").is_err());
        assert!(decode_fixed("f", b"\0\0\0\0").is_err());
        assert!(decode_fixed("f", b"ab\0c").is_err());
        assert!(decode_fixed("f", b"\xff\0\0\0").is_err());
    }

    // Goal: beacons of another cluster or an out-of-range host are refused, naming the field.
    #[test]
    fn beacon_checks() {
        let beacon =
            Beacon { cluster: "lava".into(), master: "h0".into(), host_idx: 0, seqno: 1, tcp_port: 9 };
        let wire = beacon.to_wire().expect("fits");
        assert_eq!(Beacon::from_wire(&wire, CONTEXT), Ok(beacon.clone()));
        let other = Context { cluster: "other", n_hosts: 3 };
        assert!(matches!(Beacon::from_wire(&wire, other), Err(LlError::WrongCluster { .. })));
        let far = wire::MasterBeacon { host_no: 3, ..wire };
        assert!(matches!(Beacon::from_wire(&far, CONTEXT), Err(LlError::HostOutOfRange { got: 3, .. })));
    }

    // Goal: nidx over 11, non-finite or negative valid values are refused; invalid slots are ignored.
    #[test]
    fn report_checks() {
        assert!(LoadReport::from_wire(&wire_report(11, [1.0; 11]), CONTEXT).is_ok());
        assert_eq!(
            LoadReport::from_wire(&wire_report(12, [1.0; 11]), CONTEXT),
            Err(LlError::TooManyIndices { got: 12 })
        );
        let mut li = [1.0; 11];
        li[4] = f32::NAN;
        assert!(matches!(
            LoadReport::from_wire(&wire_report(11, li), CONTEXT),
            Err(LlError::BadLoadValue { idx: 4, .. })
        ));
        let ok = LoadReport::from_wire(&wire_report(4, li), CONTEXT).expect("slot 4 is not valid");
        assert_eq!(ok.load.values[4], 0.0);
        assert_eq!(ok.to_wire().nidx, 4);
        li[0] = -1.0;
        assert!(LoadReport::from_wire(&wire_report(1, li), CONTEXT).is_err());
    }
}
