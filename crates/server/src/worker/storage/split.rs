//! Whether a partition held here continues on another worker (a split), as this worker
//! knows it: the bytes it took of the partition, and whether it asked the coordinator for
//! a split and what the answer was, or what the coordinator said with `PrepareShuffle`
//! (a split it made, or one whose worker moved). Soft state: a restarted worker asks again
//! and gets the same split back (see `coordinator::split`), or is told it again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// Set once the state is `Continues`, never cleared: pushes of a slot that was never
    /// split look at this flag only, not the lock.
    split: AtomicBool,
    state: Mutex<State>,
}

impl Default for SplitMark {
    fn default() -> Self {
        SplitMark {
            accepted: AtomicU64::new(0),
            split: AtomicBool::new(false),
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
        if !self.split.load(Ordering::Acquire) {
            return None;
        }
        match &*self.state.lock().expect("split lock") {
            State::Continues { slot, addr } => Some((*slot, addr.clone())),
            _ => None,
        }
    }

    /// True while this worker's ask for a split is unanswered. The ask begins before the
    /// push that set it off is answered, so a pusher that checks this after an answer knows
    /// whether a redirect may still come (the tests wait on it before filling a worker).
    pub fn asking(&self) -> bool {
        matches!(*self.state.lock().expect("split lock"), State::Asking)
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

    /// Records the coordinator's answer to this worker's ask: the split, or `None` when it
    /// was refused. Neither replaces a split the coordinator told of meanwhile
    /// ([`Self::continue_in`]): its `PrepareShuffle` and the answer travel on different
    /// connections, and the prepare (a relocation's) may be the newer.
    pub fn settle(&self, split: Option<(u32, String)>, now: Instant) {
        let mut s = self.state.lock().expect("split lock");
        if matches!(*s, State::Continues { .. }) {
            return;
        }
        *s = match split {
            Some((slot, addr)) => State::Continues {
                slot,
                addr: addr.into(),
            },
            None => State::Refused {
                until: now + RETRY_AFTER,
            },
        };
        if matches!(*s, State::Continues { .. }) {
            self.split.store(true, Ordering::Release);
        }
    }

    /// The partition continues in `slot` on the worker at `addr`, as the coordinator says
    /// (a split it made, or the split's worker after a relocation): replaces what was known.
    pub fn continue_in(&self, slot: u32, addr: &str) {
        *self.state.lock().expect("split lock") = State::Continues {
            slot,
            addr: addr.into(),
        };
        self.split.store(true, Ordering::Release);
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

    #[test]
    fn the_coordinators_word_wins_over_a_late_refusal_and_replaces_the_address() {
        let m = SplitMark::default();
        let t0 = Instant::now();
        assert_eq!(m.continues(), None);
        assert!(m.begin(t0));
        // The coordinator splits the slot itself while this worker's ask is under way.
        m.continue_in(9, "w:2");
        m.settle(None, t0);
        assert_eq!(m.continues(), Some((9, Arc::from("w:2"))));
        // The split's worker was lost and the split moved; an answer to an older ask,
        // arriving late, does not bring the lost worker back.
        m.continue_in(9, "w:3");
        m.settle(Some((9, "w:2".into())), t0);
        assert_eq!(m.continues(), Some((9, Arc::from("w:3"))));
        assert!(!m.begin(t0 + RETRY_AFTER));
    }
}
