//! One backoff for every loop that retries: opening a database that is not up yet, waiting
//! for a lease, and creating the lease table on a busy SQLite file. Each pause is jittered (a
//! random part of the current delay, so runners started together do not retry in step), and
//! the delay doubles up to a cap.

use std::time::Duration;

/// Jittered exponential backoff: from `first`, doubling, capped at `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    delay: Duration,
    max: Duration,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            delay: first.min(max),
            max,
        }
    }

    /// The pause before the next attempt; the one after it is (up to) twice as long.
    pub fn next_pause(&mut self) -> Duration {
        let pause = jittered(self.delay);
        self.delay = self.delay.saturating_mul(2).min(self.max);
        pause
    }
}

/// A random duration between half and all of `d`.
pub fn jittered(d: Duration) -> Duration {
    d.mul_f64(0.5 + fastrand::f64() * 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_cap_and_stay_within_their_jitter() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(350));
        let bounds = [(50, 100), (100, 200), (175, 350), (175, 350)];
        for (low, high) in bounds {
            let pause = backoff.next_pause();
            assert!(
                pause >= Duration::from_millis(low) && pause <= Duration::from_millis(high),
                "{pause:?} not in {low}..={high} ms"
            );
        }
    }

    #[test]
    fn a_huge_cap_never_overflows() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::MAX);
        for _ in 0..200 {
            backoff.next_pause();
        }
    }
}
