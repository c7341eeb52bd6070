//! Job status: the states `bjobs` shows, with LavaLite's bit values.
//!
//! The values are those of Lava's `lsbatch.h` (listed in docs/protocols/batch.md,
//! "Bodies"), so that anything reading `lsb.events` or the wire sees the
//! numbers an LSF tool expects.

use std::fmt;

/// The lifecycle state of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum JobStatus {
    /// Waiting to be dispatched.
    Pend,
    /// Held while pending (`bsub -H`, `bstop` of a pending job).
    Psusp,
    /// Dispatched and running.
    Run,
    /// Suspended by the system.
    Ssusp,
    /// Suspended by the user (`bstop` of a running job).
    Ususp,
    /// Ended with a non-zero status or was killed.
    Exit,
    /// Ended with status 0.
    Done,
    /// Its execution host cannot be reached; the job is presumably still running.
    Unknown,
}

impl JobStatus {
    /// Every status, in bit order.
    pub const ALL: [JobStatus; 8] = [
        JobStatus::Pend,
        JobStatus::Psusp,
        JobStatus::Run,
        JobStatus::Ssusp,
        JobStatus::Ususp,
        JobStatus::Exit,
        JobStatus::Done,
        JobStatus::Unknown,
    ];

    /// LavaLite's bit value.
    pub fn bits(self) -> u32 {
        match self {
            JobStatus::Pend => 0x01,
            JobStatus::Psusp => 0x02,
            JobStatus::Run => 0x04,
            JobStatus::Ssusp => 0x08,
            JobStatus::Ususp => 0x10,
            JobStatus::Exit => 0x20,
            JobStatus::Done => 0x40,
            JobStatus::Unknown => 0x1_0000,
        }
    }

    /// The status whose bit value is `bits`.
    pub fn from_bits(bits: u32) -> Option<JobStatus> {
        JobStatus::ALL.into_iter().find(|s| s.bits() == bits)
    }

    /// DONE and EXIT: terminal, dominating every later message.
    pub fn is_finished(self) -> bool {
        matches!(self, JobStatus::Done | JobStatus::Exit)
    }

    /// PEND and PSUSP: not dispatched.
    pub fn is_pending(self) -> bool {
        matches!(self, JobStatus::Pend | JobStatus::Psusp)
    }

    /// Dispatched and not finished: holds slots on a host.
    pub fn is_started(self) -> bool {
        matches!(self, JobStatus::Run | JobStatus::Ssusp | JobStatus::Ususp | JobStatus::Unknown)
    }

    /// The STAT column of `bjobs`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Pend => "PEND",
            JobStatus::Psusp => "PSUSP",
            JobStatus::Run => "RUN",
            JobStatus::Ssusp => "SSUSP",
            JobStatus::Ususp => "USUSP",
            JobStatus::Exit => "EXIT",
            JobStatus::Done => "DONE",
            JobStatus::Unknown => "UNKWN",
        }
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: bit values are LavaLite's and map back one to one.
    #[test]
    fn bits_are_lavalites_and_round_trip() {
        assert_eq!(JobStatus::Pend.bits(), 0x01);
        assert_eq!(JobStatus::Done.bits(), 0x40);
        for s in JobStatus::ALL {
            assert_eq!(JobStatus::from_bits(s.bits()), Some(s));
        }
        assert_eq!(JobStatus::from_bits(0x03), None);
    }
}
