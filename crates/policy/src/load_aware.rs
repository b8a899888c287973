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
use std::ops::Range;

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

/// Splits partitions `0..sizes.len()` into at most `blocks` contiguous, non-empty ranges of
/// about equal total size (every size counted at least 1, so equal or unknown sizes give
/// ranges of equal length, give or take one). See [`split_by_shares`].
pub fn contiguous_blocks(sizes: &[u64], blocks: usize) -> Vec<Range<usize>> {
    let k = blocks.min(sizes.len());
    split_by_shares(sizes, &vec![1; k])
}

/// Splits partitions `0..sizes.len()` into one contiguous, non-empty range per share, in
/// order, each range's total size (every size counted at least 1) in proportion to its share;
/// at most `sizes.len()` ranges (later shares get none when there are fewer partitions). Each
/// block aims at its share of what the blocks before it left, so one heavy partition does not
/// unbalance the rest; a partition whose midpoint lies past the current block's target starts
/// the next block, and when only as many partitions remain as cuts are left to make, each
/// starts its own block.
pub fn split_by_shares(sizes: &[u64], shares: &[u128]) -> Vec<Range<usize>> {
    let n = sizes.len();
    let k = shares.len().min(n);
    if k == 0 {
        return Vec::new();
    }
    let shares: Vec<u128> = shares[..k].iter().map(|&s| s.max(1)).collect();
    let weight = |i: usize| u128::from(sizes[i].max(1));
    let total: u128 = (0..n).map(weight).sum();
    let mut out = Vec::with_capacity(k);
    // `base`: the weight of the blocks already cut; `acc`: of partitions 0..i.
    let (mut start, mut acc, mut base) = (0usize, 0u128, 0u128);
    for i in 0..n {
        let cuts_left = k - 1 - out.len();
        if cuts_left > 0 && i > start {
            // Is the midpoint of partition i past this block's target,
            // (total - base) * share / (shares left)? Doubled to stay in integers.
            let j = out.len();
            let left: u128 = shares[j..].iter().sum();
            let past = (2 * (acc - base) + weight(i)) * left > 2 * (total - base) * shares[j];
            if past || n - i == cuts_left {
                out.push(start..i);
                start = i;
                base = acc;
            }
        }
        acc += weight(i);
    }
    out.push(start..n);
    out
}

/// Assigns each partition a worker, in contiguous blocks, balancing the load as
/// [`place_partitions`] does: the new partitions fill the workers up to a common level
/// (water-filling: a worker above the level gets nothing, the others get the difference),
/// and each worker's share is one contiguous block, the blocks in worker-id order
/// ([`split_by_shares`]). Every size counts at least 1. Empty when `workers` is.
///
/// Why blocks: Spark's adaptive execution coalesces *neighbouring* small partitions into one
/// reduce task. Spread one by one (round robin), a coalesced range lies on every worker and
/// its task cannot run where its data is; in blocks, it lies on one worker and runs there.
pub fn place_in_blocks(workers: &[WorkerLoad], expected_sizes: &[u64]) -> Vec<u32> {
    if workers.is_empty() || expected_sizes.is_empty() {
        return Vec::new();
    }
    let new: u128 = expected_sizes.iter().map(|&s| u128::from(s.max(1))).sum();
    // The water level: the least L with sum(max(0, L - load)) >= new, over the workers
    // sorted by load, lightest first.
    let mut by_load: Vec<&WorkerLoad> = workers.iter().collect();
    by_load.sort_by_key(|w| (w.bytes, w.partitions, w.id));
    let mut level = 0u128;
    let mut below = 0u128; // sum of the loads of the workers under the level
    for (i, w) in by_load.iter().enumerate() {
        below += u128::from(w.bytes);
        let count = i as u128 + 1;
        let candidate = (new + below).div_ceil(count);
        let next = by_load.get(i + 1).map(|n| u128::from(n.bytes));
        if next.is_none_or(|n| candidate <= n) {
            level = candidate;
            break;
        }
    }
    // Shares, the largest kept when there are more workers than partitions; then by id.
    let mut shares: Vec<(u32, u128)> = workers
        .iter()
        .map(|w| (w.id, level.saturating_sub(u128::from(w.bytes))))
        .filter(|&(_, s)| s > 0)
        .collect();
    if shares.len() > expected_sizes.len() {
        shares.sort_by_key(|&(id, s)| (Reverse(s), id));
        shares.truncate(expected_sizes.len());
    }
    shares.sort_by_key(|&(id, _)| id);
    let amounts: Vec<u128> = shares.iter().map(|&(_, s)| s).collect();
    let mut placement = vec![0u32; expected_sizes.len()];
    for (range, (owner, _)) in split_by_shares(expected_sizes, &amounts)
        .into_iter()
        .zip(shares)
    {
        placement[range].fill(owner);
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

    #[test]
    fn equal_sizes_make_blocks_of_equal_length() {
        let lens = |n: usize, k: usize| -> Vec<usize> {
            contiguous_blocks(&vec![64; n], k)
                .iter()
                .map(|r| r.len())
                .collect()
        };
        assert_eq!(lens(8, 3), vec![3, 3, 2]);
        assert_eq!(lens(9, 3), vec![3, 3, 3]);
        assert_eq!(lens(2, 3), vec![1, 1]);
        assert_eq!(lens(3, 3), vec![1, 1, 1]);
        assert_eq!(lens(200, 1), vec![200]);
        assert!(contiguous_blocks(&[], 3).is_empty());
        assert!(contiguous_blocks(&[1, 2], 0).is_empty());
        // Zero sizes count as one each.
        assert_eq!(contiguous_blocks(&[0; 4], 2), vec![0..2, 2..4]);
    }

    #[test]
    fn blocks_cover_every_partition_once_in_order() {
        let sizes: Vec<u64> = (0..97u64).map(|i| (i * 7919) % 1000).collect();
        for k in 1..12 {
            let blocks = contiguous_blocks(&sizes, k);
            assert_eq!(blocks.len(), k);
            assert_eq!(blocks[0].start, 0);
            assert_eq!(blocks[k - 1].end, 97);
            for pair in blocks.windows(2) {
                assert_eq!(pair[0].end, pair[1].start);
                assert!(!pair[0].is_empty());
            }
        }
    }

    #[test]
    fn a_heavy_partition_gets_a_block_of_its_own() {
        // 100 then eight 10s, in three blocks: the 100 alone, then the 10s halved.
        let mut sizes = vec![100];
        sizes.extend([10; 8]);
        assert_eq!(contiguous_blocks(&sizes, 3), vec![0..1, 1..5, 5..9]);
    }

    #[test]
    fn shares_set_the_block_sizes() {
        assert_eq!(split_by_shares(&[1; 10], &[1, 4]), vec![0..2, 2..10]);
        assert_eq!(
            split_by_shares(&[1; 3], &[1, 1, 1, 1]),
            vec![0..1, 1..2, 2..3]
        );
    }

    #[test]
    fn the_remaining_partitions_start_blocks_when_cuts_are_left() {
        // All the weight up front: the last two partitions still get blocks.
        assert_eq!(contiguous_blocks(&[1000, 1, 1], 3), vec![0..1, 1..2, 2..3]);
    }

    #[test]
    fn blocks_go_to_workers_by_load() {
        // Nine partitions on three empty workers: a block of three each, in id order.
        let p = place_in_blocks(&[w(0, 0, 0), w(1, 0, 0), w(2, 0, 0)], &[64; 9]);
        assert_eq!(p, vec![0, 0, 0, 1, 1, 1, 2, 2, 2]);
        // A worker 8 partitions ahead: the 20 new ones fill both to 14.
        let p = place_in_blocks(&[w(0, 8 * 64, 8), w(1, 0, 0)], &[64; 20]);
        assert_eq!(p.iter().filter(|&&o| o == 0).count(), 6);
        assert_eq!(p.iter().filter(|&&o| o == 1).count(), 14);
        assert_eq!(&p[..6], &[0; 6]);
        // A loaded worker gets nothing while the others are lighter.
        let p = place_in_blocks(&[w(0, 1 << 30, 0), w(1, 0, 0)], &[64; 4]);
        assert_eq!(p, vec![1, 1, 1, 1]);
        // More workers than partitions: the emptiest ones, one partition each.
        let p = place_in_blocks(&[w(0, 5, 0), w(1, 0, 0), w(2, 0, 0)], &[64; 2]);
        assert_eq!(p, vec![1, 2]);
        assert!(place_in_blocks(&[], &[1, 2]).is_empty());
        assert!(place_in_blocks(&[w(0, 0, 0)], &[]).is_empty());
    }
}
