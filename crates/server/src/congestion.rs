//! Congestion-aware throttling of a worker's pushes (Wang 2014, Section 5.6.2, "CAD").
//!
//! The signal is the worker's write latency: every flush reports its time per MiB
//! written (so one large flush and many small ones compare), averaged over the last
//! [`WINDOW`] flushes. The decision is the pure [`CongestionThrottle`]: when the average
//! doubles against its reference, the delay grows by one step (50 ms in the dissertation);
//! when it halves, the delay shrinks by one, never below zero.
//!
//! Where the delay goes: before the heaviest sender's next push takes memory credit. The
//! heaviest sender is the application holding the most credit on this worker, and it is
//! slowed only while another application holds credit too: alone, the budget's own
//! back-pressure already paces it to the disk, and a delay would only leave the disk idle.
//! With several, the delay keeps the heavy one from refilling the memory a slow disk frees
//! before the light ones get their share.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crossdock_policy::congestion::CongestionThrottle;

use crate::memory::MemoryBudget;

/// Flushes the latency average covers.
pub const WINDOW: usize = 32;

/// A worker's throttle.
pub struct Congestion {
    /// `None`: throttling is off (a step of zero).
    throttle: Option<Mutex<CongestionThrottle>>,
    /// The current delay in microseconds, readable without the lock.
    delay_us: AtomicU64,
    /// Pushes delayed so far.
    pub delayed: AtomicU64,
}

impl Congestion {
    /// A throttle stepping by `step` per doubling of write latency; zero turns it off.
    pub fn new(step: Duration) -> Congestion {
        let throttle = (!step.is_zero()).then(|| {
            Mutex::new(CongestionThrottle::windowed(
                step.as_secs_f64() * 1000.0,
                WINDOW,
            ))
        });
        Congestion {
            throttle,
            delay_us: AtomicU64::new(0),
            delayed: AtomicU64::new(0),
        }
    }

    /// Records a flush of `bytes` that took `took`.
    pub fn on_flush(&self, bytes: u64, took: Duration) {
        let Some(t) = &self.throttle else { return };
        if bytes == 0 {
            return;
        }
        let ms_per_mib = took.as_secs_f64() * 1000.0 / (bytes as f64 / (1 << 20) as f64);
        let delay_ms = t.lock().expect("throttle lock").on_complete(ms_per_mib);
        self.delay_us
            .store((delay_ms * 1000.0) as u64, Ordering::Relaxed);
    }

    /// The current delay.
    pub fn delay(&self) -> Duration {
        Duration::from_micros(self.delay_us.load(Ordering::Relaxed))
    }

    /// How long `app`'s next push waits before it takes credit from `budget`: the delay,
    /// if `app` is the heaviest of several holders, else nothing.
    pub fn delay_for(&self, budget: &MemoryBudget, app: &str) -> Option<Duration> {
        let delay = self.delay();
        if delay.is_zero() {
            return None;
        }
        let holders = budget.holdings();
        if holders.len() < 2 {
            return None;
        }
        let mine = holders
            .iter()
            .find(|h| &*h.app == app)
            .map_or(0, |h| h.held);
        let heaviest = holders.iter().map(|h| h.held).max().unwrap_or(0);
        (mine > 0 && mine == heaviest).then(|| {
            self.delayed.fetch_add(1, Ordering::Relaxed);
            delay
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slow_flushes_delay_only_the_heaviest_of_several_apps() {
        let c = Congestion::new(Duration::from_millis(50));
        let b = MemoryBudget::new(1000);
        b.take("heavy", 600).await;
        // 1 ms per MiB, then a disk eight times slower: the moving average doubles twice
        // on its way there (the third doubling, from 4.3 to 8.6, it never reaches).
        for _ in 0..WINDOW {
            c.on_flush(1 << 20, Duration::from_millis(1));
        }
        assert_eq!(c.delay(), Duration::ZERO);
        assert_eq!(c.delay_for(&b, "heavy"), None);
        for _ in 0..WINDOW {
            c.on_flush(4 << 20, Duration::from_millis(32));
        }
        assert_eq!(c.delay(), Duration::from_millis(100));
        // Alone it is not slowed: the budget paces it.
        assert_eq!(c.delay_for(&b, "heavy"), None);
        b.take("light", 100).await;
        assert_eq!(c.delay_for(&b, "heavy"), Some(Duration::from_millis(100)));
        assert_eq!(c.delay_for(&b, "light"), None);
        assert_eq!(c.delay_for(&b, "newcomer"), None);
        // The disk recovers: the delay returns to zero.
        for _ in 0..WINDOW {
            c.on_flush(1 << 20, Duration::from_millis(1));
        }
        assert_eq!(c.delay(), Duration::ZERO);
        assert_eq!(c.delay_for(&b, "heavy"), None);
    }

    #[test]
    fn a_zero_step_turns_it_off() {
        let c = Congestion::new(Duration::ZERO);
        for _ in 0..100 {
            c.on_flush(1 << 20, Duration::from_secs(1));
        }
        assert_eq!(c.delay(), Duration::ZERO);
    }
}
