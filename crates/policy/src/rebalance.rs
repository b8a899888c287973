//! Re-placement of a shuffle's partitions once their sizes are predicted, moving as few as
//! possible.
//!
//! SCache (Fu & Qi, Section 3.2.3) schedules reduces from scratch with its heuristic
//! MinHeap ([`crate::placement::min_heap_schedule`]): largest first onto the least-loaded
//! host. A live service has already placed every partition when the sizes become known
//! (the coordinator places at registration, before any map ran) and the maps have begun
//! pushing there, so scheduling from scratch would move about (h-1)/h of all partitions
//! even when the shuffle turns out uniform, and every move costs a worker-to-worker copy.
//! [`rebalance_from`] keeps the current placement and takes MinHeap's result only as the
//! bound to reach: while a host carries more than `(1 + tol)` times MinHeap's largest host
//! load, it moves one partition off the most loaded host to the least loaded one. The
//! partition is the smallest that removes the whole excess, else the largest that fits
//! under the bound on the receiving host (best fit, so that few partitions move).
//!
//! Guarantees (tested below): a placement already within the bound moves nothing; a
//! partition moves at most once, always off a host above the bound onto one that stays
//! within it; the largest load never grows. A partition larger than the bound by itself
//! never moves (it would only move the hot spot; splitting it is
//! [`crate::split`]'s job). There are no swaps: a host whose remaining partitions are each
//! larger than the room left on the coldest host stays above the bound (at a lower load
//! than before); with many partitions per host, as a shuffle has, small ones fill the gap.

use crate::placement::{min_heap_schedule, ReduceInfo};

/// One partition's move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    /// The partition (an index into the sizes given).
    pub partition: usize,
    /// The host it leaves.
    pub from: usize,
    /// The host it goes to.
    pub to: usize,
}

/// What [`rebalance_from`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebalance {
    /// Host of every partition after the moves.
    pub host_of: Vec<usize>,
    /// Bytes on every host after the moves.
    pub loads: Vec<u64>,
    /// The moves, in the order they were decided.
    pub moves: Vec<Move>,
    /// The largest host load aimed at: `(1 + tol)` times MinHeap's.
    pub bound: u64,
}

impl Rebalance {
    /// The largest host load after the moves.
    pub fn max_load(&self) -> u64 {
        self.loads.iter().copied().max().unwrap_or(0)
    }

    /// Bytes of the partitions that move.
    pub fn moved_bytes(&self, sizes: &[u64]) -> u64 {
        self.moves.iter().map(|m| sizes[m.partition]).sum()
    }
}

/// Moves partitions of sizes `sizes`, now on hosts `current` (indices below `hosts`), until
/// no host carries more than `(1 + tol)` times the largest host load of SCache's MinHeap
/// over the same sizes, or no move helps. See the module's documentation.
///
/// # Panics
/// If `current` and `sizes` differ in length or a host index is not below `hosts`.
pub fn rebalance_from(current: &[usize], sizes: &[u64], hosts: usize, tol: f64) -> Rebalance {
    assert_eq!(current.len(), sizes.len(), "one host per partition");
    assert!(
        current.iter().all(|&h| h < hosts),
        "a host index is out of range"
    );
    let mut host_of = current.to_vec();
    let mut loads = vec![0u64; hosts];
    for (&h, &s) in current.iter().zip(sizes) {
        loads[h] += s;
    }
    if hosts == 0 {
        return Rebalance {
            host_of,
            loads,
            moves: Vec::new(),
            bound: 0,
        };
    }
    let infos: Vec<ReduceInfo> = sizes
        .iter()
        .map(|&size| ReduceInfo {
            size,
            prob: 0.0,
            host: None,
        })
        .collect();
    let ideal = min_heap_schedule(1, hosts, &infos, false).max_load();
    let bound = ((1.0 + tol.max(0.0)) * ideal as f64).floor() as u64;
    let bound = bound.max(ideal);
    let mut moves = Vec::new();
    // A host none of whose partitions fits anywhere: left as it is.
    let mut stuck = vec![false; hosts];
    while let Some(hot) = (0..hosts)
        .filter(|&h| !stuck[h] && loads[h] > bound)
        .max_by_key(|&h| (loads[h], std::cmp::Reverse(h)))
    {
        let cold = (0..hosts)
            .min_by_key(|&h| (loads[h], h))
            .expect("hosts > 0");
        // The coldest host has the most room: what does not fit there fits nowhere.
        let room = bound.saturating_sub(loads[cold]);
        let excess = loads[hot] - bound;
        let fitting =
            (0..sizes.len()).filter(|&p| host_of[p] == hot && sizes[p] > 0 && sizes[p] <= room);
        // Smallest that removes the whole excess, else the largest (ties: lower index).
        let pick = fitting
            .clone()
            .filter(|&p| sizes[p] >= excess)
            .min_by_key(|&p| (sizes[p], p))
            .or_else(|| fitting.max_by_key(|&p| (sizes[p], std::cmp::Reverse(p))));
        let Some(p) = pick else {
            stuck[hot] = true;
            continue;
        };
        host_of[p] = cold;
        loads[hot] -= sizes[p];
        loads[cold] += sizes[p];
        moves.push(Move {
            partition: p,
            from: hot,
            to: cold,
        });
    }
    Rebalance {
        host_of,
        loads,
        moves,
        bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Contiguous blocks of equal counts, as the coordinator places before sizes are known.
    fn blocks(n: usize, hosts: usize) -> Vec<usize> {
        (0..n).map(|p| p * hosts / n).collect()
    }

    /// A small deterministic generator (xorshift) for the property test.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn a_uniform_shuffle_moves_nothing() {
        let sizes = vec![100; 12];
        let r = rebalance_from(&blocks(12, 3), &sizes, 3, 0.05);
        assert!(r.moves.is_empty());
        assert_eq!(r.loads, vec![400, 400, 400]);
        assert_eq!(r.host_of, blocks(12, 3));
    }

    #[test]
    fn a_skewed_block_sheds_only_what_exceeds_the_bound() {
        // Host 0 holds the four heavy partitions: loads 1000, 400, 400; MinHeap's max is
        // 600, the bound 720.
        let sizes = vec![400, 300, 200, 100, 100, 100, 100, 100, 100, 100, 100, 100];
        let r = rebalance_from(&blocks(12, 3), &sizes, 3, 0.2);
        assert_eq!(r.bound, 720);
        assert!(r.max_load() <= r.bound, "{:?}", r.loads);
        // One move suffices: of what fits on the coldest host (room 320), the smallest that
        // removes the whole excess of 280 is the 300, not the largest.
        assert_eq!(
            r.moves,
            vec![Move {
                partition: 1,
                from: 0,
                to: 1
            }]
        );
        assert_eq!(r.loads, vec![700, 700, 400]);
        assert_eq!(r.moved_bytes(&sizes), 300);
        // MinHeap from scratch would have moved most partitions.
        let infos: Vec<ReduceInfo> = sizes
            .iter()
            .map(|&size| ReduceInfo {
                size,
                prob: 0.0,
                host: None,
            })
            .collect();
        let scratch = min_heap_schedule(1, 3, &infos, false);
        let moved = (0..12)
            .filter(|&p| scratch.host_of[p] != blocks(12, 3)[p])
            .count();
        assert!(moved > r.moves.len(), "{moved}");
    }

    #[test]
    fn a_partition_larger_than_the_bound_stays() {
        let sizes = vec![1000, 10, 10, 10];
        let r = rebalance_from(&[0, 0, 1, 1], &sizes, 2, 0.1);
        // MinHeap's max is 1000 (the giant alone); host 0's 1010 is within 10% of it.
        assert!(r.moves.is_empty(), "{:?}", r.moves);
        // Bound 1000 (the giant alone): the giant never moves; the 200 and then a 10 do.
        let r = rebalance_from(&[0, 0, 0, 1], &[1000, 200, 10, 10], 2, 0.0);
        assert_eq!(r.bound, 1000);
        let moved: Vec<usize> = r.moves.iter().map(|m| m.partition).collect();
        assert_eq!(moved, vec![1, 2]);
        assert_eq!(r.loads, vec![1000, 220]);
    }

    #[test]
    fn without_swaps_a_host_can_stay_above_a_tight_bound_but_its_load_falls() {
        // Bound 600: the 200 and a 100 leave host 0 (1000 -> 700); then its 400 and 300 fit
        // on no host (the coldest has room for 100), and only a swap could do better.
        let sizes = vec![400, 300, 200, 100, 100, 100, 100, 100, 100, 100, 100, 100];
        let r = rebalance_from(&blocks(12, 3), &sizes, 3, 0.0);
        assert_eq!(r.bound, 600);
        let moved: Vec<usize> = r.moves.iter().map(|m| m.partition).collect();
        assert_eq!(moved, vec![2, 3]);
        assert_eq!(r.loads, vec![700, 600, 500]);
    }

    #[test]
    fn empty_and_degenerate_inputs() {
        let r = rebalance_from(&[], &[], 0, 0.1);
        assert!(r.moves.is_empty() && r.loads.is_empty());
        let r = rebalance_from(&[0, 0], &[5, 7], 1, 0.0);
        assert!(r.moves.is_empty());
        assert_eq!(r.loads, vec![12]);
        let r = rebalance_from(&[0, 0, 1], &[0, 0, 0], 2, 0.0);
        assert!(r.moves.is_empty());
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn a_host_out_of_range_is_refused() {
        rebalance_from(&[0, 2], &[1, 1], 2, 0.0);
    }

    #[test]
    fn random_placements_keep_the_guarantees() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..500 {
            let hosts = 1 + (next(&mut s) % 6) as usize;
            let n = (next(&mut s) % 40) as usize;
            // Heavy-tailed sizes: mostly small, a few large.
            let sizes: Vec<u64> = (0..n)
                .map(|_| {
                    let x = next(&mut s) % 1000;
                    if x < 900 {
                        x
                    } else {
                        x * 40
                    }
                })
                .collect();
            let current: Vec<usize> = (0..n)
                .map(|_| (next(&mut s) % hosts as u64) as usize)
                .collect();
            let tol = (next(&mut s) % 30) as f64 / 100.0;
            let r = rebalance_from(&current, &sizes, hosts, tol);
            let before = {
                let mut l = vec![0u64; hosts];
                for (&h, &z) in current.iter().zip(&sizes) {
                    l[h] += z;
                }
                l
            };
            // Loads agree with the hosts, and the largest load never grows.
            let mut l = vec![0u64; hosts];
            for (&h, &z) in r.host_of.iter().zip(&sizes) {
                l[h] += z;
            }
            assert_eq!(l, r.loads);
            assert!(r.max_load() <= before.iter().copied().max().unwrap_or(0));
            // Within the bound already: nothing moves.
            if before.iter().all(|&x| x <= r.bound) {
                assert!(r.moves.is_empty());
            }
            // Each partition moves at most once, and a moved one is where its move put it.
            let mut seen = std::collections::HashSet::new();
            for m in &r.moves {
                assert!(seen.insert(m.partition), "{:?} moved twice", m.partition);
                assert_eq!(current[m.partition], m.from);
                assert_eq!(r.host_of[m.partition], m.to);
                assert!(sizes[m.partition] <= r.bound);
            }
            // A host that received a partition is within the bound.
            for m in &r.moves {
                assert!(r.loads[m.to] <= r.bound, "{:?} {:?}", r.loads, m);
            }
            // Untouched partitions stayed.
            for (p, &h) in current.iter().enumerate() {
                if !seen.contains(&p) {
                    assert_eq!(r.host_of[p], h);
                }
            }
        }
    }
}
