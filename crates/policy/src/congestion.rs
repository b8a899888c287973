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

/// The throttle's state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CongestionThrottle {
    step_ms: f64,
    delay_ms: f64,
    reference: Option<f64>,
    sum: f64,
    count: u64,
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
        self.sum += latency_ms.max(0.0);
        self.count += 1;
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
