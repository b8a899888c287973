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
//! under the bound on the receiving host (best fit, so that few partitions move); when
//! none fits, the one that leaves the larger of the two hosts' loads smallest, if that is
//! below the sending host's load (so a host of a few large partitions still sheds one).
//!
//! A live shuffle's bytes already pushed stay where they landed: [`rebalance_over`] takes
//! them as host loads no move changes, so that only the bytes still to come follow a
//! partition that moves, and MinHeap's bound is reached from those loads.
//!
//! Guarantees (tested below): a placement already within the bound moves nothing; a
//! partition moves at most once, always off a host above the bound; the two hosts of a
//! move both end below the sender's load before it, so the largest load never grows and
//! the loop ends. A partition larger than the bound by itself fits under it nowhere; it
//! moves only when that lowers the larger of the two loads (a hot spot that stays is
//! [`crate::split`]'s job). There are no swaps, so a host can stay above the bound, at a
//! load no higher than before; with many partitions per host, as a shuffle has, small ones
//! fill the gap.

use crate::placement::min_heap_max_load;

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
    rebalance_over(current, sizes, &vec![0; hosts], tol)
}

/// [`rebalance_from`] over hosts that already carry bytes no move takes away, `base[h]` on
/// host `h` (`base.len()` hosts): a live shuffle's bytes already pushed stay where they
/// landed, and only the bytes still to come (`sizes`) follow a partition that moves. The
/// bound is MinHeap's largest load when it places `sizes` onto hosts starting from `base`;
/// with every base 0 this is [`rebalance_from`] exactly.
///
/// # Panics
/// If `current` and `sizes` differ in length or a host index is not below `base.len()`.
pub fn rebalance_over(current: &[usize], sizes: &[u64], base: &[u64], tol: f64) -> Rebalance {
    let hosts = base.len();
    assert_eq!(current.len(), sizes.len(), "one host per partition");
    assert!(
        current.iter().all(|&h| h < hosts),
        "a host index is out of range"
    );
    let mut host_of = current.to_vec();
    let mut loads = base.to_vec();
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
    let ideal = min_heap_max_load(sizes, base);
    let bound = ((1.0 + tol.max(0.0)) * ideal as f64).floor() as u64;
    let bound = bound.max(ideal);
    let mut moves = Vec::new();
    // A host none of whose partitions can move: left as it is. (It stays so: the coldest
    // load only grows, and a host above the bound never receives.)
    let mut stuck = vec![false; hosts];
    let mut moved = vec![false; sizes.len()];
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
        // Partitions of the hot host that have not moved and whose move lowers both hosts
        // below the hot host's load.
        let movable = (0..sizes.len()).filter(|&p| {
            host_of[p] == hot && !moved[p] && sizes[p] > 0 && loads[cold] + sizes[p] < loads[hot]
        });
        let fitting = movable.clone().filter(|&p| sizes[p] <= room);
        // Smallest that removes the whole excess, else the largest that fits (ties: lower
        // index), else the one that leaves the larger of the two loads smallest.
        let pick = fitting
            .clone()
            .filter(|&p| sizes[p] >= excess)
            .min_by_key(|&p| (sizes[p], p))
            .or_else(|| fitting.max_by_key(|&p| (sizes[p], std::cmp::Reverse(p))))
            .or_else(|| {
                movable.min_by_key(|&p| {
                    let after = (loads[hot] - sizes[p]).max(loads[cold] + sizes[p]);
                    (after, p)
                })
            });
        let Some(p) = pick else {
            stuck[hot] = true;
            continue;
        };
        moved[p] = true;
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
    use crate::placement::{min_heap_schedule, ReduceInfo};

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
    fn under_a_tight_bound_a_partition_that_fits_nowhere_still_moves_if_it_helps() {
        // Bound 600: the 200 and a 100 fit (1000 -> 700, hosts 1 and 2 at 600 and 500);
        // then the 300 fits nowhere, but moving it to host 2 leaves 400 and 800: no better
        // than 700, so host 0 stays at 700 (a swap could do better).
        let sizes = vec![400, 300, 200, 100, 100, 100, 100, 100, 100, 100, 100, 100];
        let r = rebalance_from(&blocks(12, 3), &sizes, 3, 0.0);
        assert_eq!(r.bound, 600);
        let moved: Vec<usize> = r.moves.iter().map(|m| m.partition).collect();
        assert_eq!(moved, vec![2, 3]);
        assert_eq!(r.loads, vec![700, 600, 500]);
        // Three partitions of 3 on one host, 1s elsewhere: none fits under the bound (5.5
        // x 100) on a host holding 300, yet moving a 300 leaves 600 and 600 instead of 900.
        let sizes = vec![300, 300, 300, 100, 100, 100, 100, 100, 100];
        let r = rebalance_from(&blocks(9, 3), &sizes, 3, 0.1);
        assert_eq!(r.bound, 550);
        assert_eq!(r.moves[0].partition, 0);
        assert!(r.max_load() <= 600, "{:?}", r.loads);
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
    fn bytes_already_on_a_host_count_and_stay_there() {
        // Even bytes still to come, but 300 already on host 0: alone the sizes are
        // balanced; with the base, host 0 carries 500 against 200. MinHeap from the bases
        // reaches 400 (the bound 440), so one partition of host 0 moves, its 100 only.
        let (current, sizes) = (vec![0, 0, 1, 1], vec![100; 4]);
        assert!(rebalance_from(&current, &sizes, 2, 0.1).moves.is_empty());
        let r = rebalance_over(&current, &sizes, &[300, 0], 0.1);
        assert_eq!(r.bound, 440);
        assert_eq!(r.moves.len(), 1, "{r:?}");
        assert_eq!((r.moves[0].from, r.moves[0].to), (0, 1));
        assert_eq!(r.loads, vec![400, 300]);
    }

    #[test]
    fn min_heap_max_load_without_base_is_scaches_min_heap() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200 {
            let hosts = 1 + (next(&mut s) % 5) as usize;
            let sizes: Vec<u64> = (0..(next(&mut s) % 30))
                .map(|_| next(&mut s) % 500)
                .collect();
            let infos: Vec<ReduceInfo> = sizes.iter().map(|&z| ReduceInfo::sized(z)).collect();
            assert_eq!(
                min_heap_max_load(&sizes, &vec![0; hosts]),
                min_heap_schedule(1, hosts, &infos, false).max_load()
            );
        }
    }

    #[test]
    fn random_placements_keep_the_guarantees() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..1000 {
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
            // A third of the cases with no bytes already on the hosts, a third with a few,
            // a third with more than the sizes (a join side that finished its maps).
            let base: Vec<u64> = (0..hosts)
                .map(|_| match round % 3 {
                    0 => 0,
                    1 => next(&mut s) % 5000,
                    _ => next(&mut s) % 400_000,
                })
                .collect();
            let r = rebalance_over(&current, &sizes, &base, tol);
            let before = {
                let mut l = base.clone();
                for (&h, &z) in current.iter().zip(&sizes) {
                    l[h] += z;
                }
                l
            };
            // Loads agree with the hosts, and the largest load never grows.
            let mut l = base.clone();
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
            }
            // Replayed: every move leaves a host above the bound, and both of its hosts
            // end below that host's load before it.
            let mut l = before.clone();
            for m in &r.moves {
                let (sender, z) = (l[m.from], sizes[m.partition]);
                assert!(sender > r.bound);
                l[m.from] -= z;
                l[m.to] += z;
                assert!(l[m.from] < sender && l[m.to] < sender, "{m:?}");
            }
            assert_eq!(l, r.loads);
            // Untouched partitions stayed.
            for (p, &h) in current.iter().enumerate() {
                if !seen.contains(&p) {
                    assert_eq!(r.host_of[p], h);
                }
            }
        }
    }
}
