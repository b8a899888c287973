//! Partition splits: when a worker stops taking a hot partition, and which peer takes the
//! rest of it.
//!
//! Two triggers, one action. A partition whose bytes on one worker reach the split size
//! continues on another worker (Celeborn's soft split: a hot partition must not fill one
//! worker's disk, nor be read whole from one place). And a worker whose memory is nearly
//! spent while one partition holds a large share of it delegates that partition's further
//! batches to the peer with the most free memory: the skew-aware meta-shuffle's rule
//! (Daikoku et al., IEICE 2019, Section 3.3, Algorithm 2) that a receiver whose buffer
//! would overflow hands the overflow to a process with room, instead of refusing it. In
//! the service both become a split: the peer holds the delegated batches as a slot of
//! the partition that reads, commits and failures treat like any partition, so the
//! paper's later rounds (a delegate offering blocks back to their owner) are not needed:
//! the reader collects from every holder.

/// What a worker knows about one of its partitions (or splits) when a batch arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitCheck {
    /// Payload bytes of the slot accepted here.
    pub slot_bytes: u64,
    /// Of those, the bytes still in memory (not yet written to disk).
    pub slot_memory: u64,
    /// The split size (0: never split).
    pub split_bytes: u64,
    /// Memory the worker holds now, and its budget.
    pub worker_used: u64,
    pub worker_budget: u64,
    /// The worker has no disk to spill to (`--memory-only`): what it cannot hold is
    /// refused, so it delegates sooner.
    pub memory_only: bool,
}

/// Why a slot is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitReason {
    /// It reached the split size.
    Size,
    /// The worker's memory is nearly spent (7/8 of the budget) and this slot holds a
    /// quarter of the budget or more of it: the overflow goes to a peer with room (SMS).
    MemoryPressure,
}

/// Whether the slot should continue on another worker now.
pub fn split_due(c: &SplitCheck) -> Option<SplitReason> {
    if c.split_bytes == 0 {
        return None;
    }
    if c.slot_bytes >= c.split_bytes {
        return Some(SplitReason::Size);
    }
    let pressed = pressed(c.worker_used, c.worker_budget, c.memory_only);
    let hot = u128::from(c.slot_memory) * 4 >= u128::from(c.worker_budget);
    (c.worker_budget > 0 && pressed && hot).then_some(SplitReason::MemoryPressure)
}

/// Whether a worker's memory is short enough for a hot slot to be delegated: 7/8 of the
/// budget spent, or 3/4 on a worker without a disk. Delegation is asked for while batches
/// keep arriving (the coordinator answers after a journal write), so a worker that
/// refuses what it cannot hold keeps a quarter of its budget for them.
pub fn pressed(used: u64, budget: u64, memory_only: bool) -> bool {
    let (num, den) = if memory_only { (3, 4) } else { (7, 8) };
    u128::from(used) * den >= u128::from(budget) * num
}

/// A worker that could take a split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub id: u32,
    /// Budget minus the memory it held at its last heartbeat.
    pub free_memory: u64,
    /// Bytes it holds on disk.
    pub stored: u64,
    /// It already holds a slot of the same partition (taking another adds no spread).
    pub holds_partition: bool,
}

/// The peer to continue a split slot on: one not yet holding the partition if any, then
/// the most free memory (SMS delegates to the process with room), then the fewest stored
/// bytes, then the lowest id. `None` when there is no peer.
pub fn split_target(peers: &[Peer]) -> Option<u32> {
    peers
        .iter()
        .min_by_key(|p| {
            (
                p.holds_partition,
                std::cmp::Reverse(p.free_memory),
                p.stored,
                p.id,
            )
        })
        .map(|p| p.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(slot_bytes: u64, worker_used: u64) -> SplitCheck {
        SplitCheck {
            slot_bytes,
            slot_memory: slot_bytes,
            split_bytes: 1000,
            worker_used,
            worker_budget: 800,
            memory_only: false,
        }
    }

    #[test]
    fn a_slot_splits_at_the_split_size_or_when_it_crowds_a_pressed_worker() {
        assert_eq!(split_due(&check(999, 0)), None);
        assert_eq!(split_due(&check(1000, 0)), Some(SplitReason::Size));
        // 7/8 of 800 is 700 and a quarter 200.
        assert_eq!(split_due(&check(199, 800)), None, "pressed, but not hot");
        assert_eq!(split_due(&check(200, 699)), None, "hot, but not pressed");
        assert_eq!(
            split_due(&check(200, 700)),
            Some(SplitReason::MemoryPressure)
        );
        let written = SplitCheck {
            slot_memory: 100,
            ..check(900, 800)
        };
        assert_eq!(split_due(&written), None, "its bytes went to disk");
        let off = SplitCheck {
            split_bytes: 0,
            ..check(5000, 800)
        };
        assert_eq!(split_due(&off), None, "a split size of 0 turns splits off");
        // Without a disk, 3/4 of the budget (600) is pressed already.
        let no_disk = |used| SplitCheck {
            memory_only: true,
            ..check(200, used)
        };
        assert_eq!(split_due(&no_disk(599)), None);
        assert_eq!(split_due(&no_disk(600)), Some(SplitReason::MemoryPressure));
    }

    #[test]
    fn the_target_spreads_the_partition_then_has_the_most_room() {
        let peer = |id, free_memory, stored, holds_partition| Peer {
            id,
            free_memory,
            stored,
            holds_partition,
        };
        assert_eq!(split_target(&[]), None);
        let peers = [
            peer(1, 900, 0, true),
            peer(2, 100, 50, false),
            peer(3, 300, 70, false),
            peer(4, 300, 60, false),
        ];
        assert_eq!(
            split_target(&peers),
            Some(4),
            "room first, then less stored"
        );
        assert_eq!(
            split_target(&[peer(1, 900, 0, true), peer(2, 10, 0, true)]),
            Some(1),
            "every peer holds the partition: the one with room"
        );
    }
}
