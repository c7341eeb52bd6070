//! Reconnect delays: exponential backoff with a cap and "equal jitter" (each delay is half
//! the exponential step plus a random part of the other half), so that daemons that lost
//! the same peer do not all come back at the same instant, yet never retry at once.
//!
//! [`Backoff`] is pure: its jitter comes from a seeded SplitMix64 generator, so a seed gives
//! one exact sequence (tests, simulation) and [`Backoff::from_entropy`] seeds it from the OS.
//! [`reconnect`] is the one place that sleeps.

use std::net::SocketAddr;
use std::time::Duration;

use lava_xdr::frame::FrameLimits;
use tokio::net::TcpStream;

use crate::conn::{ConnError, FramedConn, Timeouts};

/// Default first delay.
pub const BACKOFF_DELAY_MS_INITIAL_DEFAULT: u64 = 100;
/// Default longest delay.
pub const BACKOFF_DELAY_MS_MAX_DEFAULT: u64 = 30_000;

/// Shape of a backoff sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackoffConfig {
    /// Exponential step of the first attempt; it doubles each attempt.
    pub delay_ms_initial: u64,
    /// Cap on the exponential step, hence on every delay.
    pub delay_ms_max: u64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            delay_ms_initial: BACKOFF_DELAY_MS_INITIAL_DEFAULT,
            delay_ms_max: BACKOFF_DELAY_MS_MAX_DEFAULT,
        }
    }
}

/// A sequence of reconnect delays.
#[derive(Clone, Debug)]
pub struct Backoff {
    config: BackoffConfig,
    attempt: u32,
    jitter_state: u64,
}

impl Backoff {
    /// A sequence whose jitter is fixed by `seed`.
    pub fn new(config: BackoffConfig, seed: u64) -> Backoff {
        Backoff { config, attempt: 0, jitter_state: seed }
    }

    /// A sequence seeded from the OS random source.
    pub fn from_entropy(config: BackoffConfig) -> Result<Backoff, getrandom::Error> {
        Ok(Backoff::new(config, getrandom::u64()?))
    }

    /// The delay before the next attempt: step/2 + jitter in [0, step/2], where step is
    /// `delay_ms_initial * 2^attempt`, capped at `delay_ms_max`.
    pub fn next_delay_ms(&mut self) -> u64 {
        let step_ms = 1u64
            .checked_shl(self.attempt)
            .and_then(|factor| self.config.delay_ms_initial.checked_mul(factor))
            .map_or(self.config.delay_ms_max, |step_ms| step_ms.min(self.config.delay_ms_max));
        self.attempt = self.attempt.saturating_add(1);
        let half_ms = step_ms / 2;
        step_ms - half_ms + self.next_random() % (half_ms + 1)
    }

    /// Starts over from the first delay, after a successful connection.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// Delays handed out since the last reset.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// SplitMix64: tiny, full-period, and good enough to spread retries.
    fn next_random(&mut self) -> u64 {
        self.jitter_state = self.jitter_state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.jitter_state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Connects to `addr`, sleeping `backoff`'s delays between failed attempts, at most
/// `attempts_max` attempts (at least one). Resets `backoff` on success.
pub async fn reconnect(
    addr: SocketAddr,
    limits: FrameLimits,
    timeouts: Timeouts,
    backoff: &mut Backoff,
    attempts_max: u32,
) -> Result<FramedConn<TcpStream>, ConnError> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        match FramedConn::connect(addr, limits, timeouts).await {
            Ok(conn) => {
                backoff.reset();
                return Ok(conn);
            }
            Err(last) if attempts >= attempts_max => {
                return Err(ConnError::GaveUp { attempts, last: Box::new(last) });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(backoff.next_delay_ms())).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a seed gives one exact sequence, each delay within [step/2, step] of its
    // doubling, capped step, and reset restarts it. Method: seed 42, initial 100, cap 1000.
    #[test]
    fn seeded_backoff_sequence_is_deterministic_and_capped() {
        let config = BackoffConfig { delay_ms_initial: 100, delay_ms_max: 1000 };
        let mut backoff = Backoff::new(config, 42);
        let delays: Vec<u64> = (0..8).map(|_| backoff.next_delay_ms()).collect();
        let steps = [100, 200, 400, 800, 1000, 1000, 1000, 1000];
        for (delay_ms, step_ms) in delays.iter().zip(steps) {
            assert!((step_ms / 2..=step_ms).contains(delay_ms), "{delays:?}");
        }
        let mut again = Backoff::new(config, 42);
        assert_eq!((0..8).map(|_| again.next_delay_ms()).collect::<Vec<_>>(), delays);
        assert_eq!(delays, [63, 163, 233, 504, 723, 941, 753, 847]);
        let mut other_seed = Backoff::new(config, 43);
        assert_ne!((0..8).map(|_| other_seed.next_delay_ms()).collect::<Vec<_>>(), delays);
        backoff.reset();
        assert!((50..=100).contains(&backoff.next_delay_ms()));
        assert_eq!(backoff.attempt(), 1);
    }

    // Goal: no overflow after very many attempts; the delay stays capped.
    // Method: a huge initial delay and an unbounded cap, 100 attempts.
    #[test]
    fn backoff_never_overflows() {
        let mut backoff =
            Backoff::new(BackoffConfig { delay_ms_initial: u64::MAX / 2, delay_ms_max: u64::MAX }, 7);
        for _ in 0..100 {
            assert!(backoff.next_delay_ms() >= u64::MAX / 4);
        }
    }
}
