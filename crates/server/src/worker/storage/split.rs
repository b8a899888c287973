//! Whether a partition held here continues on another worker (a split), as this worker
//! knows it: the bytes it took of the partition, and whether it asked the coordinator for
//! a split and what the answer was. Soft state: a restarted worker asks again and gets
//! the same split back (see `coordinator::split`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a worker waits before asking again after a split was refused (no other
/// worker, the coordinator unreachable): meanwhile it keeps taking the partition, as it
/// would without splits.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
enum State {
    Whole,
    Asking,
    Refused { until: Instant },
    Continues { slot: u32, addr: Arc<str> },
}

/// One partition's split, as its worker knows it.
#[derive(Debug)]
pub struct SplitMark {
    accepted: AtomicU64,
    state: Mutex<State>,
}

impl Default for SplitMark {
    fn default() -> Self {
        SplitMark {
            accepted: AtomicU64::new(0),
            state: Mutex::new(State::Whole),
        }
    }
}

impl SplitMark {
    /// Counts `bytes` more taken here; returns the total.
    pub fn took(&self, bytes: u64) -> u64 {
        self.accepted.fetch_add(bytes, Ordering::Relaxed) + bytes
    }

    /// Where the partition continues, once split: (slot, primary's address).
    pub fn continues(&self) -> Option<(u32, Arc<str>)> {
        match &*self.state.lock().expect("split lock") {
            State::Continues { slot, addr } => Some((*slot, addr.clone())),
            _ => None,
        }
    }

    /// True if the caller should ask for a split now: nobody asked yet, or the last
    /// refusal is old enough. The caller must then [`SplitMark::settle`] it.
    pub fn begin(&self, now: Instant) -> bool {
        let mut s = self.state.lock().expect("split lock");
        let free = match &*s {
            State::Whole => true,
            State::Refused { until } => now >= *until,
            State::Asking | State::Continues { .. } => false,
        };
        if free {
            *s = State::Asking;
        }
        free
    }

    /// Records the coordinator's answer: the split, or `None` when it was refused.
    pub fn settle(&self, split: Option<(u32, String)>, now: Instant) {
        *self.state.lock().expect("split lock") = match split {
            Some((slot, addr)) => State::Continues {
                slot,
                addr: addr.into(),
            },
            None => State::Refused {
                until: now + RETRY_AFTER,
            },
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_ask_at_a_time_and_a_refusal_waits_before_the_next() {
        let m = SplitMark::default();
        let t0 = Instant::now();
        assert_eq!(m.took(10) + m.took(5), 10 + 15);
        assert!(m.begin(t0));
        assert!(!m.begin(t0), "an ask is under way");
        m.settle(None, t0);
        assert!(
            !m.begin(t0 + Duration::from_secs(1)),
            "refused a moment ago"
        );
        assert!(m.begin(t0 + RETRY_AFTER));
        m.settle(Some((7, "w:1".into())), t0);
        assert_eq!(m.continues(), Some((7, Arc::from("w:1"))));
        assert!(!m.begin(t0 + RETRY_AFTER * 2), "split: nothing more to ask");
    }
}
