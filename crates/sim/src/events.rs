//! A discrete-event queue: events pop in time order, ties in insertion order.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Entry<K> {
    t: f64,
    seq: u64,
    kind: K,
}

impl<K> PartialEq for Entry<K> {
    fn eq(&self, o: &Self) -> bool {
        self.t == o.t && self.seq == o.seq
    }
}
impl<K> Eq for Entry<K> {}
impl<K> PartialOrd for Entry<K> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<K> Ord for Entry<K> {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap.
        o.t.total_cmp(&self.t).then(o.seq.cmp(&self.seq))
    }
}

/// The event queue and the simulated clock.
pub struct EventQueue<K> {
    heap: BinaryHeap<Entry<K>>,
    seq: u64,
    now: f64,
}

impl<K> Default for EventQueue<K> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0.0,
        }
    }
}

impl<K> EventQueue<K> {
    /// Current simulated time.
    pub fn now(&self) -> f64 {
        self.now
    }

    /// Schedules `kind` at `now + delay` (negative delays are treated as 0).
    pub fn after(&mut self, delay: f64, kind: K) {
        let t = self.now + delay.max(0.0);
        self.at(t, kind);
    }

    /// Schedules `kind` at absolute time `t` (not before now).
    pub fn at(&mut self, t: f64, kind: K) {
        self.seq += 1;
        self.heap.push(Entry {
            t: t.max(self.now),
            seq: self.seq,
            kind,
        });
    }

    /// Pops the next event and advances the clock.
    pub fn pop(&mut self) -> Option<K> {
        let e = self.heap.pop()?;
        self.now = e.t;
        Some(e.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_insertion_order() {
        let mut q = EventQueue::default();
        q.at(2.0, "b");
        q.at(1.0, "a");
        q.at(2.0, "c");
        assert_eq!(q.pop(), Some("a"));
        assert_eq!(q.now(), 1.0);
        q.after(1.0, "d");
        assert_eq!(q.pop(), Some("b"));
        assert_eq!(q.pop(), Some("c"));
        assert_eq!(q.pop(), Some("d"));
        assert_eq!(q.pop(), None);
    }
}
