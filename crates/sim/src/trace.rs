//! The run's fingerprint and its optional human-readable trace.
//!
//! Every event the world processes, every byte it puts on a wire or a disk,
//! is folded into a 64-bit FNV-1a hash; two runs of one seed must end with
//! the same hash (the determinism test). With `LAVA_SIM_TRACE=1` each event
//! is also printed to stderr with its virtual time, to debug a failing seed.

/// FNV-1a offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The hash of a run so far, and whether to print its events.
#[derive(Clone, Debug)]
pub struct Trace {
    enabled: bool,
    hash: u64,
}

impl Trace {
    /// A fresh trace; `enabled` prints every line.
    pub fn new(enabled: bool) -> Trace {
        Trace { enabled, hash: FNV_OFFSET }
    }

    /// Folds a number into the hash.
    pub fn mix(&mut self, value: u64) {
        self.mix_bytes(&value.to_le_bytes());
    }

    /// Folds bytes into the hash.
    pub fn mix_bytes(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.hash ^= u64::from(*byte);
            self.hash = self.hash.wrapping_mul(FNV_PRIME);
        }
    }

    /// Prints a line at virtual time `now_ms` when tracing; the text is only
    /// built then, so an untraced run pays nothing for it.
    pub fn line(&self, now_ms: u64, text: impl FnOnce() -> String) {
        if self.enabled {
            let t = now_ms.saturating_sub(crate::world::T0_MS);
            eprintln!("[{:>5}.{:03}] {}", t / 1000, t % 1000, text());
        }
    }

    /// Whether lines are printed.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The hash so far.
    pub fn hash(&self) -> u64 {
        self.hash
    }
}
