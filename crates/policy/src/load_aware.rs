//! Load-aware primary placement used by the coordinator when a shuffle registers.
//!
//! Every partition goes to the worker that currently carries the least load, where load
//! is first the bytes assigned to it (stored plus expected), then the number of
//! partitions assigned, then the worker id (so the result is deterministic). Partitions
//! are placed largest first (LPT), which is the classic greedy bound of 4/3 of the optimal
//! makespan; with no size prediction every partition weighs the same and the rule
//! degenerates to "fewest partitions first", i.e. a balanced round robin that starts on
//! the emptiest worker.
//!
//! The richer policies of the papers (SCache's MinHeap with locality swap, the Hadoop-A
//! load balancer that skips workers 25% above the average) build on the same inputs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What the coordinator knows about one live worker's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerLoad {
    /// The worker's id.
    pub id: u32,
    /// Bytes the worker already holds or is expected to receive.
    pub bytes: u64,
    /// Partitions already assigned to the worker (all live shuffles).
    pub partitions: u64,
}

/// Assigns each partition a worker.
///
/// `expected_sizes[p]` is the expected size of partition `p` in bytes; pass all zeros
/// (or equal values) when nothing is known. Returns one worker id per partition, in
/// partition order. Returns an empty vector when `workers` is empty.
pub fn place_partitions(workers: &[WorkerLoad], expected_sizes: &[u64]) -> Vec<u32> {
    if workers.is_empty() {
        return Vec::new();
    }
    // Min-heap on (bytes, partitions, id).
    let mut heap: BinaryHeap<Reverse<(u64, u64, u32)>> = workers
        .iter()
        .map(|w| Reverse((w.bytes, w.partitions, w.id)))
        .collect();
    // Largest partition first; ties by partition index so the order is deterministic.
    let mut order: Vec<usize> = (0..expected_sizes.len()).collect();
    order.sort_by_key(|&p| (Reverse(expected_sizes[p]), p));
    let mut placement = vec![0u32; expected_sizes.len()];
    for p in order {
        let Reverse((bytes, parts, id)) = heap.pop().expect("heap holds every worker");
        placement[p] = id;
        heap.push(Reverse((
            bytes.saturating_add(expected_sizes[p]),
            parts + 1,
            id,
        )));
    }
    placement
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(id: u32, bytes: u64, partitions: u64) -> WorkerLoad {
        WorkerLoad {
            id,
            bytes,
            partitions,
        }
    }

    #[test]
    fn no_workers_places_nothing() {
        assert!(place_partitions(&[], &[1, 2, 3]).is_empty());
    }

    #[test]
    fn equal_sizes_round_robin_from_emptiest() {
        let placement = place_partitions(&[w(0, 0, 3), w(1, 0, 0), w(2, 0, 1)], &[0; 6]);
        // Worker 1 has the fewest partitions, then 2, then 0 catches up.
        assert_eq!(placement, vec![1, 1, 2, 1, 2, 0]);
    }

    #[test]
    fn one_worker_takes_everything() {
        assert_eq!(place_partitions(&[w(7, 100, 5)], &[3, 1, 2]), vec![7, 7, 7]);
    }

    #[test]
    fn largest_partitions_spread_first() {
        // Sizes 10, 1, 9, 1: the two big ones land on different workers.
        let placement = place_partitions(&[w(0, 0, 0), w(1, 0, 0)], &[10, 1, 9, 1]);
        assert_ne!(placement[0], placement[2]);
        // The first small one goes beside the 9 (lower bytes); the second then ties on
        // bytes (10 each) and goes to the worker with fewer partitions, beside the 10.
        assert_eq!(placement[1], placement[2]);
        assert_eq!(placement[3], placement[0]);
    }

    #[test]
    fn existing_bytes_steer_new_partitions_away() {
        let placement = place_partitions(&[w(0, 1 << 30, 0), w(1, 0, 10)], &[0; 4]);
        assert_eq!(placement, vec![1, 1, 1, 1]);
    }
}
