//! Reduce-partition placement from predicted sizes.
//!
//! Sources:
//! - Z. Fu, Z. Qi, "Efficient and Universal Shuffle Management with SCache", Section 3.2.3
//!   (Algorithm 1, heuristic MinHeap with locality swap) and Section 3.2.4 (Algorithm 2,
//!   accumulate scheduling across several shuffles): [`min_heap_schedule`],
//!   [`accumulate_schedule`].
//! - Y. Wang, "Efficient Movement and Task Management in MapReduce for Fast Analytics of Big
//!   Data", dissertation, Auburn 2014, Section 5.6.1 (Enhanced Load Balancer):
//!   [`elb_choose`].
//!
//! The simpler coordinator policy lives in [`crate::load_aware`].
//!
//! Corrections of SCache's printed algorithms (the paper's own mistakes, fixed here):
//! - Alg. 1 starts at `rid <- len(R)` with `while rid >= 0`, one past the end; we visit each
//!   reduce exactly once.
//! - Alg. 1 says "sort by size" then walks from the end, while the text says "sorted
//!   descendingly": the intent is largest first (LPT), which we do.
//! - `nor = (prob - 1/m) / (1 - 1/m) / 10` divides by zero for `m = 1`; a single input
//!   partition means every reduce comes from one host, so we use the maximum, 0.1. We also
//!   clamp `nor` to `[0, 0.1]` (a `prob` below `1/m` would make it negative).
//! - `swap_tasks` leaves the victim choice open; we take unsealed reduces of the target host,
//!   those whose own best host is elsewhere first, then closest in size, and require both
//!   hosts to stay within `(1 + nor) * max`. As in the paper, nothing moves when no victim
//!   fits (no one-way moves).
//! - Alg. 2 line 5 compares the previous size with `size * prob` *after* `size` was increased
//!   by the previous size. We compare with the new shuffle's own top-producer bytes, recompute
//!   `prob` over the combined size, and record the new size after scheduling (the printed
//!   algorithm never does, so a third shuffle would forget the second).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What the scheduler knows about one reduce partition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReduceInfo {
    /// Predicted size in bytes.
    pub size: u64,
    /// Share of the partition produced by its dominant host, in `[0, 1]`.
    pub prob: f64,
    /// The dominant host (an index into the `hosts` slice), `None` if unknown.
    pub host: Option<usize>,
}

impl ReduceInfo {
    /// A reduce of `size` bytes whose producing hosts are unknown (no locality to keep).
    pub fn sized(size: u64) -> Self {
        ReduceInfo {
            size,
            prob: 0.0,
            host: None,
        }
    }
}

/// Result of a schedule: `host_of[rid]` is an index into the `hosts` given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Host index of every reduce.
    pub host_of: Vec<usize>,
    /// Bytes assigned to every host.
    pub loads: Vec<u64>,
    /// Reduces whose assignment is on their dominant host (sealed by the swap pass).
    pub sealed: Vec<bool>,
}

impl Schedule {
    /// The largest host load.
    pub fn max_load(&self) -> u64 {
        self.loads.iter().copied().max().unwrap_or(0)
    }

    /// Bytes that must cross the network: for each reduce, the part not produced by the
    /// host it runs on, estimated as `size * (1 - prob)` on the dominant host and `size`
    /// elsewhere.
    pub fn remote_bytes(&self, reduces: &[ReduceInfo]) -> f64 {
        reduces
            .iter()
            .zip(&self.host_of)
            .map(|(r, &h)| {
                if r.host == Some(h) {
                    r.size as f64 * (1.0 - r.prob)
                } else {
                    r.size as f64
                }
            })
            .sum()
    }
}

/// The locality tolerance `nor` of SCache Alg. 1, corrected for `m <= 1` and clamped.
pub fn locality_tolerance(prob: f64, m: usize) -> f64 {
    if m <= 1 {
        return 0.1;
    }
    let inv = 1.0 / m as f64;
    ((prob - inv) / (1.0 - inv) / 10.0).clamp(0.0, 0.1)
}

/// What [`largest_first`] placed.
struct LargestFirst {
    /// The reduces in the order they were placed.
    order: Vec<usize>,
    host_of: Vec<usize>,
    /// `base` plus what each host received.
    loads: Vec<u64>,
}

/// The heap pass of SCache's Algorithm 1, from the host loads `base` (at least one host):
/// reduces largest first (equal sizes in index order), each onto the least-loaded host
/// (ties to the lower host index).
fn largest_first(sizes: &[u64], base: &[u64]) -> LargestFirst {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&r| (Reverse(sizes[r]), r));
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = base
        .iter()
        .enumerate()
        .map(|(h, &b)| Reverse((b, h)))
        .collect();
    let mut host_of = vec![0usize; sizes.len()];
    let mut loads = base.to_vec();
    for &r in &order {
        let Reverse((load, h)) = heap.pop().expect("at least one host");
        host_of[r] = h;
        loads[h] = load + sizes[r];
        heap.push(Reverse((loads[h], h)));
    }
    LargestFirst {
        order,
        host_of,
        loads,
    }
}

/// The largest host load of MinHeap's heap pass (no locality swap) when the hosts start
/// with the loads `base` (one per host, at least one host): what a live re-placement can
/// reach when the bytes already pushed stay where they are
/// ([`crate::rebalance::rebalance_over`]). With zero bases it is
/// `min_heap_schedule(_, base.len(), _, false).max_load()`.
pub fn min_heap_max_load(sizes: &[u64], base: &[u64]) -> u64 {
    assert!(!base.is_empty(), "at least one host");
    largest_first(sizes, base)
        .loads
        .into_iter()
        .max()
        .unwrap_or(0)
}

/// SCache Algorithm 1 over `hosts` hosts (`m` input partitions): largest reduces first onto
/// the least-loaded host (ties to the lower host index); then, if `swap`, the locality pass
/// that moves a reduce to its dominant host when a swap keeps both hosts within
/// `(1 + nor) * max`. Returns an empty schedule when `hosts == 0`.
pub fn min_heap_schedule(m: usize, hosts: usize, reduces: &[ReduceInfo], swap: bool) -> Schedule {
    let n = reduces.len();
    if hosts == 0 {
        return Schedule {
            host_of: Vec::new(),
            loads: Vec::new(),
            sealed: Vec::new(),
        };
    }
    let sizes: Vec<u64> = reduces.iter().map(|r| r.size).collect();
    let LargestFirst {
        order,
        mut host_of,
        mut loads,
    } = largest_first(&sizes, &vec![0; hosts]);
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); hosts];
    for &r in &order {
        members[host_of[r]].push(r);
    }
    let mut sealed = vec![false; n];
    if swap {
        let max = loads.iter().copied().max().unwrap_or(0) as f64;
        for &r in &order {
            let Some(t) = reduces[r].host.filter(|&t| t < hosts) else {
                continue;
            };
            let c = host_of[r];
            if t == c {
                sealed[r] = true;
                continue;
            }
            let bound = (1.0 + locality_tolerance(reduces[r].prob, m)) * max;
            let size = reduces[r].size as f64;
            let mut cands: Vec<usize> =
                members[t].iter().copied().filter(|&v| !sealed[v]).collect();
            cands.sort_by(|&a, &b| {
                let la = reduces[a].host == Some(t);
                let lb = reduces[b].host == Some(t);
                let da = (reduces[a].size as f64 - size).abs();
                let db = (reduces[b].size as f64 - size).abs();
                la.cmp(&lb).then(da.total_cmp(&db)).then(a.cmp(&b))
            });
            let (lt, lc) = (loads[t] as f64, loads[c] as f64);
            let mut moved = 0.0;
            let mut victims = Vec::new();
            for v in cands {
                let vs = reduces[v].size as f64;
                if lc - size + moved + vs <= bound {
                    victims.push(v);
                    moved += vs;
                    if lt + size - moved <= bound {
                        break;
                    }
                }
            }
            if victims.is_empty() || lt + size - moved > bound || lc - size + moved > bound {
                continue;
            }
            for &v in &victims {
                members[t].retain(|&x| x != v);
                members[c].push(v);
                host_of[v] = c;
                loads[t] -= reduces[v].size;
                loads[c] += reduces[v].size;
            }
            members[c].retain(|&x| x != r);
            members[t].push(r);
            host_of[r] = t;
            loads[c] -= reduces[r].size;
            loads[t] += reduces[r].size;
            sealed[r] = true;
        }
    }
    Schedule {
        host_of,
        loads,
        sealed,
    }
}

/// The accumulated state of earlier shuffles for one reduce id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PreviousShuffle {
    /// Bytes of earlier shuffles already delivered to this reduce id.
    pub size: u64,
    /// Host holding them (meaningful when `size > 0`).
    pub host: usize,
}

/// SCache Algorithm 2 (corrected): schedules a new shuffle together with what earlier
/// shuffles left on each reduce id, then updates `previous`. Returns the schedule and the
/// reduce ids whose earlier data must be re-shuffled to a new host. `previous` is resized
/// to the number of reduces if needed.
pub fn accumulate_schedule(
    m: usize,
    hosts: usize,
    new: &[ReduceInfo],
    previous: &mut Vec<PreviousShuffle>,
) -> (Schedule, Vec<usize>) {
    if previous.len() < new.len() {
        previous.resize(new.len(), PreviousShuffle::default());
    }
    let combined: Vec<ReduceInfo> = new
        .iter()
        .zip(previous.iter())
        .map(|(r, p)| {
            let total = r.size + p.size;
            let top_new = r.size as f64 * r.prob;
            if p.size > 0 && p.size as f64 >= top_new {
                ReduceInfo {
                    size: total,
                    prob: p.size as f64 / total as f64,
                    host: Some(p.host),
                }
            } else {
                ReduceInfo {
                    size: total,
                    prob: if total == 0 {
                        0.0
                    } else {
                        top_new / total as f64
                    },
                    host: r.host,
                }
            }
        })
        .collect();
    let schedule = min_heap_schedule(m, hosts, &combined, true);
    let mut reshuffled = Vec::new();
    for (rid, (r, p)) in new.iter().zip(previous.iter_mut()).enumerate() {
        let h = schedule.host_of[rid];
        if p.size > 0 && p.host != h {
            reshuffled.push(rid);
        }
        p.host = h;
        p.size += r.size;
    }
    (schedule, reshuffled)
}

/// Hadoop-A dissertation, Section 5.6.1, the Enhanced Load Balancer: a worker whose
/// intermediate bytes exceed the average by more than `threshold` (0.25 in the
/// dissertation) gets no task; the task goes to the worker holding the least intermediate
/// data instead (ties to the lower index). Otherwise the offered worker keeps it. Returns
/// `None` if `bytes` is empty or `offered` is out of range.
pub fn elb_choose(offered: usize, bytes: &[u64], threshold: f64) -> Option<usize> {
    let own = *bytes.get(offered)?;
    let avg = bytes.iter().map(|&b| b as f64).sum::<f64>() / bytes.len() as f64;
    if own as f64 > avg * (1.0 + threshold) {
        bytes
            .iter()
            .enumerate()
            .min_by_key(|&(i, &b)| (b, i))
            .map(|(i, _)| i)
    } else {
        Some(offered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(size: u64, prob: f64, host: Option<usize>) -> ReduceInfo {
        ReduceInfo { size, prob, host }
    }

    #[test]
    fn min_heap_max_load_from_base_loads_fills_the_light_host_first() {
        // Host 0 starts at 6: 5 and 4 go to host 1 (0, then 5), 3 to host 0 (6 < 9).
        assert_eq!(min_heap_max_load(&[5, 4, 3], &[6, 0]), 9);
        // A base above everything else stays the largest load.
        assert_eq!(min_heap_max_load(&[2, 2], &[20, 0, 0]), 20);
        assert_eq!(min_heap_max_load(&[], &[3, 1]), 3);
    }

    #[test]
    fn lpt_spreads_largest_first() {
        let reduces = [
            r(1, 0.0, None),
            r(7, 0.0, None),
            r(5, 0.0, None),
            r(4, 0.0, None),
            r(3, 0.0, None),
        ];
        let s = min_heap_schedule(4, 2, &reduces, false);
        // 7 -> h0, 5 -> h1, 4 -> h1 (9), 3 -> h0 (10), 1 -> h1 (10).
        assert_eq!(s.host_of, vec![1, 0, 1, 1, 0]);
        assert_eq!(s.loads, vec![10, 10]);
    }

    #[test]
    fn ties_and_empty_inputs_are_deterministic() {
        let s = min_heap_schedule(2, 3, &[r(5, 0.0, None); 3], false);
        assert_eq!(s.host_of, vec![0, 1, 2]);
        let e = min_heap_schedule(2, 3, &[], true);
        assert!(e.host_of.is_empty());
        assert_eq!(e.loads, vec![0, 0, 0]);
        assert!(min_heap_schedule(2, 0, &[r(1, 0.0, None)], true)
            .loads
            .is_empty());
    }

    #[test]
    fn one_worker_takes_everything() {
        let s = min_heap_schedule(3, 1, &[r(3, 1.0, Some(0)), r(2, 0.5, Some(0))], true);
        assert_eq!(s.host_of, vec![0, 0]);
        assert!(s.sealed.iter().all(|&x| x));
    }

    #[test]
    fn tolerance_is_bounded_and_handles_one_partition() {
        assert_eq!(locality_tolerance(0.25, 4), 0.0);
        assert!((locality_tolerance(1.0, 4) - 0.1).abs() < 1e-12);
        assert_eq!(locality_tolerance(0.1, 4), 0.0);
        assert_eq!(locality_tolerance(1.0, 1), 0.1);
    }

    #[test]
    fn swap_restores_locality_within_bound() {
        // Terasort-like: each reduce gets 93% of its data from one host, but LPT ignores that.
        // Reduce i is produced on host (i + 1) % 2; equal sizes so LPT puts reduce i on i % 2.
        let reduces: Vec<ReduceInfo> = (0..4).map(|i| r(10, 0.93, Some((i + 1) % 2))).collect();
        let plain = min_heap_schedule(8, 2, &reduces, false);
        assert_eq!(plain.host_of, vec![0, 1, 0, 1]);
        let swapped = min_heap_schedule(8, 2, &reduces, true);
        assert_eq!(swapped.host_of, vec![1, 0, 1, 0]);
        assert_eq!(swapped.loads, vec![20, 20]);
        assert!(swapped.remote_bytes(&reduces) < plain.remote_bytes(&reduces));
        assert!(swapped.sealed.iter().all(|&x| x));
    }

    #[test]
    fn swap_never_exceeds_tolerance() {
        // Everything is produced on host 0 (all data on one host): moving all there would
        // overload it, so the loads must stay within (1 + 0.1) * max.
        let reduces: Vec<ReduceInfo> = (0..8).map(|i| r(10 + i, 1.0, Some(0))).collect();
        let plain = min_heap_schedule(1, 4, &reduces, false);
        let s = min_heap_schedule(1, 4, &reduces, true);
        let bound = 1.1 * plain.max_load() as f64;
        assert!(s.loads.iter().all(|&l| l as f64 <= bound), "{:?}", s.loads);
        assert_eq!(
            s.loads.iter().sum::<u64>(),
            reduces.iter().map(|x| x.size).sum::<u64>()
        );
    }

    #[test]
    fn no_swap_when_no_victim_fits() {
        // LPT: 100 -> h0, 50 -> h1, 10 -> h1 (60). The 10 prefers h0; trading it for the
        // 100 would put 150 on h1 (> 1.1 * 100), so nothing moves, although a one-way move
        // (h0 = 110) would fit: the paper only swaps.
        let reduces = [r(100, 0.0, None), r(50, 0.0, None), r(10, 1.0, Some(0))];
        let s = min_heap_schedule(4, 2, &reduces, true);
        assert_eq!(s.host_of, vec![0, 1, 1]);
        assert!(!s.sealed[2]);
        // A reduce already on its dominant host is sealed.
        let s = min_heap_schedule(4, 2, &[r(100, 0.0, None), r(10, 1.0, Some(1))], true);
        assert_eq!(s.host_of, vec![0, 1]);
        assert!(s.sealed[1]);
    }

    #[test]
    fn accumulate_keeps_previous_host_when_it_dominates() {
        let mut prev = vec![
            PreviousShuffle { size: 100, host: 1 },
            PreviousShuffle { size: 100, host: 0 },
        ];
        // New shuffle: 50 bytes each, top producer 40 bytes on the other host.
        let new = [r(50, 0.8, Some(0)), r(50, 0.8, Some(1))];
        let (s, reshuffled) = accumulate_schedule(4, 2, &new, &mut prev);
        assert_eq!(s.host_of, vec![1, 0]);
        assert!(reshuffled.is_empty());
        assert_eq!(prev[0], PreviousShuffle { size: 150, host: 1 });
        // A third shuffle sees the second one's bytes too.
        let (_, _) = accumulate_schedule(4, 2, &[r(0, 0.0, None), r(0, 0.0, None)], &mut prev);
        assert_eq!(prev[1].size, 150);
    }

    #[test]
    fn accumulate_reports_reshuffles() {
        // Both earlier reduces sit on host 0; balancing moves one of them.
        let mut prev = vec![
            PreviousShuffle { size: 10, host: 0 },
            PreviousShuffle { size: 10, host: 0 },
        ];
        let new = [r(10, 0.5, Some(0)), r(10, 0.5, Some(0))];
        let (s, reshuffled) = accumulate_schedule(4, 2, &new, &mut prev);
        assert_eq!(s.loads, vec![20, 20]);
        assert_eq!(reshuffled.len(), 1);
    }

    #[test]
    fn elb_redirects_above_threshold() {
        // Average 100: 126 > 125 is skipped, 125 is not.
        assert_eq!(elb_choose(0, &[126, 74, 100], 0.25), Some(1));
        assert_eq!(elb_choose(0, &[125, 75, 100], 0.25), Some(0));
        assert_eq!(elb_choose(0, &[0], 0.25), Some(0));
        assert_eq!(elb_choose(0, &[], 0.25), None);
        // Ties for least loaded go to the lower index.
        assert_eq!(elb_choose(2, &[1, 1, 9], 0.25), Some(0));
    }
}
