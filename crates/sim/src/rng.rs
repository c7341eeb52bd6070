//! The simulation's only source of randomness: SplitMix64, seeded once per
//! run, so that a run is a pure function of its seed.
//!
//! SplitMix64 (Steele, Lea and Flood, 2014) passes BigCrush, needs eight bytes
//! of state and no dependency; its stream for a given seed never changes, so a
//! seed printed by a failing run reproduces the same run on any machine.

/// A seeded pseudo-random generator.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose whole stream is determined by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`; `n` must be above 0.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "an empty range has no element");
        // Lemire's multiply-shift: unbiased enough for a simulation, branch-free.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A number in `low..=high`.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        assert!(low <= high, "range {low}..={high} is empty");
        low + self.below(high - low + 1)
    }

    /// An index into a collection of `len` elements.
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// True with probability `p` (0 never, 1 always).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        // 53 random bits make an exact double in [0, 1).
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        unit < p
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// An exponentially distributed delay with the given mean, in ms, at least 1.
    pub fn exponential_ms(&mut self, mean_ms: u64) -> u64 {
        let unit = ((self.next_u64() >> 11) as f64 + 1.0) / ((1u64 << 53) as f64 + 1.0);
        ((-unit.ln()) * mean_ms as f64).max(1.0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the stream is the published SplitMix64 one, so seeds stay valid
    // across versions. Method: the first outputs for seed 0 (reference values).
    #[test]
    fn stream_is_splitmix64() {
        let mut rng = Rng::new(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    // Goal: bounded draws stay in bounds.
    #[test]
    fn draws_stay_in_bounds() {
        let mut rng = Rng::new(7);
        for _ in 0..10_000 {
            assert!(rng.below(3) < 3);
            let x = rng.range(5, 9);
            assert!((5..=9).contains(&x));
            assert!(rng.exponential_ms(100) >= 1);
        }
        assert!(!rng.chance(0.0));
        assert!(rng.chance(1.0));
    }
}
