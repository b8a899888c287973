//! Congestion-aware dispatch throttling.
//!
//! Source: Y. Wang, "Efficient Movement and Task Management in MapReduce for Fast Analytics of
//! Big Data", PhD dissertation, Auburn University, 2014, Section 5.6.2 (Congestion-Aware
//! Dispatching, CAD): "increase the interval by 50 ms whenever the average execution time
//! increases by 2x" and reduce it when the average "drops by half".
//!
//! In Crossdock the signal is the running average write latency of a worker's storage and
//! the output is the delay inserted before dispatching the next write. The dissertation does
//! not say what the 2x is measured against or whether the delay can go negative; we compare
//! with the average at the last adjustment (initially the first sample) and floor at 0.
//!
//! The dissertation averages over every task of one job. A service runs for months, where an
//! average since start would stop moving; [`CongestionThrottle::windowed`] averages the last
//! `n` samples instead (the same rule, a moving average).

use std::collections::VecDeque;

/// The throttle's state.
#[derive(Debug, Clone, PartialEq)]
pub struct CongestionThrottle {
    step_ms: f64,
    delay_ms: f64,
    reference: Option<f64>,
    sum: f64,
    count: u64,
    /// With a window: the samples in it, oldest first, and its size.
    recent: VecDeque<f64>,
    window: usize,
}

impl CongestionThrottle {
    /// A throttle adding or removing `step_ms` (50 in the dissertation) per doubling or halving.
    pub fn new(step_ms: f64) -> Self {
        CongestionThrottle {
            step_ms: step_ms.max(0.0),
            delay_ms: 0.0,
            reference: None,
            sum: 0.0,
            count: 0,
            recent: VecDeque::new(),
            window: 0,
        }
    }

    /// A throttle whose average covers only the last `window` samples (at least 1).
    pub fn windowed(step_ms: f64, window: usize) -> Self {
        CongestionThrottle {
            window: window.max(1),
            ..CongestionThrottle::new(step_ms)
        }
    }

    /// The current dispatch delay in ms.
    pub fn delay_ms(&self) -> f64 {
        self.delay_ms
    }

    /// The running average latency (ms), 0 before any sample.
    pub fn average_ms(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }

    /// Records one completed write of `latency_ms` and returns the new delay.
    pub fn on_complete(&mut self, latency_ms: f64) -> f64 {
        let sample = latency_ms.max(0.0);
        self.sum += sample;
        self.count += 1;
        if self.window > 0 {
            self.recent.push_back(sample);
            if self.recent.len() > self.window {
                let old = self.recent.pop_front().unwrap_or(0.0);
                self.sum -= old;
                self.count -= 1;
            }
            // Summing the window again keeps float error from piling up over months.
            if self.count > 0 && self.recent.len() == self.window {
                self.sum = self.recent.iter().sum();
            }
        }
        let avg = self.average_ms();
        match self.reference {
            None => self.reference = Some(avg),
            Some(r) if r > 0.0 && avg >= 2.0 * r => {
                self.delay_ms += self.step_ms;
                self.reference = Some(avg);
            }
            Some(r) if avg <= r / 2.0 && r > 0.0 => {
                self.delay_ms = (self.delay_ms - self.step_ms).max(0.0);
                self.reference = Some(avg);
            }
            Some(0.0) if avg > 0.0 => self.reference = Some(avg),
            Some(_) => {}
        }
        self.delay_ms
    }
}

impl Default for CongestionThrottle {
    fn default() -> Self {
        CongestionThrottle::new(50.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubling_adds_fifty_ms_halving_removes_it() {
        let mut t = CongestionThrottle::default();
        assert_eq!(t.on_complete(10.0), 0.0); // reference 10
        assert_eq!(t.on_complete(29.0), 0.0); // average 19.5 < 20
        assert_eq!(t.on_complete(21.0), 50.0); // average 20 = 2x: +50, reference 20
        assert_eq!(t.on_complete(140.0), 100.0); // average 50 >= 40: +50, reference 50
                                                 // Sum 200 over 4 writes; 4 instant writes halve the average to 25: -50.
        for _ in 0..3 {
            assert_eq!(t.on_complete(0.0), 100.0);
        }
        assert_eq!(t.on_complete(0.0), 50.0);
        // Halving again (12.5) takes 8 more.
        for _ in 0..7 {
            assert_eq!(t.on_complete(0.0), 50.0);
        }
        assert_eq!(t.on_complete(0.0), 0.0);
    }

    #[test]
    fn windowed_average_follows_recent_samples_only() {
        let mut t = CongestionThrottle::windowed(50.0, 4);
        for _ in 0..1000 {
            t.on_complete(2.0);
        }
        assert_eq!(t.average_ms(), 2.0);
        // Four slow writes fill the window: the average doubles at once (+50 per doubling
        // seen: 2 -> 4.5 -> 7 -> 9.5 -> 12 crosses 4 and 9.5 (>= 2 x 4.5)).
        for _ in 0..4 {
            t.on_complete(12.0);
        }
        assert_eq!(t.average_ms(), 12.0);
        assert_eq!(t.delay_ms(), 100.0);
        // Fast again: the window forgets the slow writes and the delay comes back down.
        for _ in 0..4 {
            t.on_complete(2.0);
        }
        assert_eq!(t.delay_ms(), 0.0);
        // The cumulative throttle after 1000 fast writes barely notices 4 slow ones.
        let mut c = CongestionThrottle::new(50.0);
        for _ in 0..1000 {
            c.on_complete(2.0);
        }
        for _ in 0..4 {
            c.on_complete(12.0);
        }
        assert_eq!(c.delay_ms(), 0.0);
    }

    #[test]
    fn delay_never_negative_and_zero_reference_recovers() {
        let mut t = CongestionThrottle::default();
        t.on_complete(0.0);
        t.on_complete(0.0);
        assert_eq!(t.delay_ms(), 0.0);
        // Reference 0 cannot double; the first positive average becomes the reference.
        t.on_complete(9.0);
        assert_eq!(t.delay_ms(), 0.0);
        for _ in 0..10 {
            t.on_complete(100.0);
        }
        assert!(t.delay_ms() >= 50.0);
        for _ in 0..1000 {
            t.on_complete(0.0);
        }
        assert!(t.delay_ms() >= 0.0);
    }
}
