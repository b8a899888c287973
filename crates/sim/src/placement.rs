//! `crossdock sim placement`: SCache's pre-scheduling schemes (Fu & Qi, Section 3.2.3,
//! Fig. 4) on synthetic skewed reduce stages with 1 to 10 rounds.
//!
//! The paper replays the OpenCloud trace; we cannot, so we synthesize reduce stages: task
//! compute times are log-normal (skew set by `--size-sigma`); each task's shuffle-read share
//! of its run time is exponential with mean 2.3% (the trace's average, Fig. 5); the cluster is
//! 50 nodes x 4 slots as in the paper's EC2 setup. Schemes, all measured against Spark's
//! dynamic FIFO *with* shuffle read:
//! - `fifo`: Spark's dynamic FIFO with the shuffle read removed (pre-fetched);
//! - `random`: a static, count-balanced random task-to-node mapping, no shuffle read;
//! - `minheap`: SCache Alg. 1 on predicted sizes (true size times a log-normal prediction
//!   error), no swap, no shuffle read;
//! - `minheap+swap`: the same with the locality swap; we also report the network bytes it
//!   saves (each task's data is produced `prob` on one host, the rest spread).
//!
//! Within a node, a static mapping runs its tasks on the node's slots largest-predicted
//! first (MinHeap) or in task order (random).
//!
//! A last line compares, for a shuffle already placed in contiguous blocks (as the live
//! coordinator places before sizes are known), MinHeap from scratch with
//! [`rebalance_from`]: partitions and bytes moved, and the balance reached.

use clap::Args;
use crossdock_policy::placement::{
    accumulate_schedule, min_heap_schedule, PreviousShuffle, ReduceInfo,
};
use crossdock_policy::rebalance::rebalance_from;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::rng::Rng;

/// Arguments of `crossdock sim placement`.
#[derive(Debug, Clone, Args)]
pub struct PreschedArgs {
    /// Nodes (the paper: 50 EC2 m4.xlarge).
    #[arg(long, default_value_t = 50)]
    pub nodes: usize,
    /// Reduce slots per node (4 vCPUs).
    #[arg(long, default_value_t = 4)]
    pub slots: usize,
    /// Largest number of rounds (tasks = nodes x slots x rounds).
    #[arg(long, default_value_t = 10)]
    pub max_rounds: usize,
    /// Stages simulated per round count.
    #[arg(long, default_value_t = 50)]
    pub trials: usize,
    /// Log-normal shape of task compute times (skew).
    #[arg(long, default_value_t = 1.0)]
    pub size_sigma: f64,
    /// Mean shuffle-read share of a task's run time (OpenCloud: 2.3%).
    #[arg(long, default_value_t = 0.023)]
    pub shuffle_share: f64,
    /// Log-normal shape of the size prediction error.
    #[arg(long, default_value_t = 0.1)]
    pub prediction_error: f64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Makespan of list scheduling `durations` in the given order on `slots` identical slots.
pub fn list_schedule(durations: impl IntoIterator<Item = f64>, slots: usize) -> f64 {
    let mut heap: BinaryHeap<Reverse<u64>> = (0..slots.max(1)).map(|_| Reverse(0u64)).collect();
    let mut makespan = 0.0f64;
    for d in durations {
        let Reverse(t) = heap.pop().expect("slots >= 1");
        let end = f64::from_bits(t) + d.max(0.0);
        makespan = makespan.max(end);
        // Non-negative f64 bit patterns order like the values.
        heap.push(Reverse(end.to_bits()));
    }
    makespan
}

/// Improvements (%) of one stage over Spark FIFO with shuffle read:
/// `[fifo, random, minheap, minheap+swap]`, and the swap's remote-byte saving (%).
pub fn one_stage(a: &PreschedArgs, rounds: usize, rng: &mut Rng) -> ([f64; 4], f64) {
    let nodes = a.nodes.max(1);
    let slots = a.slots.max(1);
    let n = nodes * slots * rounds.max(1);
    let m = nodes * slots;
    let compute: Vec<f64> = (0..n).map(|_| rng.lognormal(10.0, a.size_sigma)).collect();
    let read: Vec<f64> = compute
        .iter()
        .map(|&c| {
            let f = rng.exp(a.shuffle_share).min(0.5);
            c * f / (1.0 - f)
        })
        .collect();
    let infos: Vec<ReduceInfo> = compute
        .iter()
        .map(|&c| {
            let predicted = c * rng.lognormal(1.0, a.prediction_error);
            let u = rng.f64();
            ReduceInfo {
                size: (predicted * 1e6) as u64,
                prob: 1.0 / m as f64 + u * u * (1.0 - 1.0 / m as f64),
                host: Some(rng.below(nodes as u64) as usize),
            }
        })
        .collect();
    let base = list_schedule((0..n).map(|i| compute[i] + read[i]), m);
    let fifo = list_schedule(compute.iter().copied(), m);
    // Random even mapping: a random permutation dealt round-robin.
    let mut perm: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        perm.swap(i, j);
    }
    let mut per_node: Vec<Vec<usize>> = vec![Vec::new(); nodes];
    for (k, &t) in perm.iter().enumerate() {
        per_node[k % nodes].push(t);
    }
    for v in &mut per_node {
        v.sort_unstable();
    }
    let random = per_node
        .iter()
        .map(|v| list_schedule(v.iter().map(|&t| compute[t]), slots))
        .fold(0.0, f64::max);
    let static_makespan = |host_of: &[usize]| {
        let mut by: Vec<Vec<usize>> = vec![Vec::new(); nodes];
        for (t, &h) in host_of.iter().enumerate() {
            by[h].push(t);
        }
        by.iter_mut()
            .map(|v| {
                v.sort_by_key(|&t| Reverse(infos[t].size));
                list_schedule(v.iter().map(|&t| compute[t]), slots)
            })
            .fold(0.0, f64::max)
    };
    let plain = min_heap_schedule(m, nodes, &infos, false);
    let swapped = min_heap_schedule(m, nodes, &infos, true);
    let mh = static_makespan(&plain.host_of);
    let sw = static_makespan(&swapped.host_of);
    let imp = |x: f64| (base - x) / base * 100.0;
    let saved = {
        let p = plain.remote_bytes(&infos);
        let s = swapped.remote_bytes(&infos);
        if p > 0.0 {
            (p - s) / p * 100.0
        } else {
            0.0
        }
    };
    ([imp(fifo), imp(random), imp(mh), imp(sw)], saved)
}

/// Two chained shuffles on the same reduce ids (SCache Alg. 2): the second's sizes follow
/// the first's with log-normal noise and its data comes from random hosts. Returns the
/// share (%) of reduce ids whose earlier data must move, with accumulate scheduling and
/// with the second shuffle scheduled on its own, and both schedules' max/mean load.
pub fn chained(a: &PreschedArgs, rng: &mut Rng) -> (f64, f64, f64, f64) {
    let nodes = a.nodes.max(1);
    let m = nodes * a.slots.max(1);
    let n = m * 2;
    let first: Vec<ReduceInfo> = (0..n)
        .map(|_| ReduceInfo {
            size: (rng.lognormal(10.0, a.size_sigma) * 1e6) as u64,
            prob: 0.5 + 0.5 * rng.f64(),
            host: Some(rng.below(nodes as u64) as usize),
        })
        .collect();
    let mut prev: Vec<PreviousShuffle> = Vec::new();
    let _ = accumulate_schedule(m, nodes, &first, &mut prev);
    let second: Vec<ReduceInfo> = first
        .iter()
        .map(|r| ReduceInfo {
            size: (r.size as f64 * rng.lognormal(1.0, 0.3)) as u64,
            prob: 0.5 * rng.f64() + 0.1,
            host: Some(rng.below(nodes as u64) as usize),
        })
        .collect();
    let before: Vec<usize> = prev.iter().map(|p| p.host).collect();
    let independent = min_heap_schedule(m, nodes, &second, true);
    let moved_ind = independent
        .host_of
        .iter()
        .zip(&before)
        .filter(|(a, b)| a != b)
        .count();
    let (acc, reshuffled) = accumulate_schedule(m, nodes, &second, &mut prev);
    let imbalance = |loads: &[u64]| {
        let mean = loads.iter().sum::<u64>() as f64 / loads.len().max(1) as f64;
        loads.iter().copied().max().unwrap_or(0) as f64 / mean.max(1.0)
    };
    (
        reshuffled.len() as f64 / n as f64 * 100.0,
        moved_ind as f64 / n as f64 * 100.0,
        imbalance(&acc.loads),
        imbalance(&independent.loads),
    )
}

/// What re-placing a shuffle costs once its sizes are predicted, starting from the live
/// coordinator's layout before sizes are known (contiguous blocks of equal counts, two
/// rounds of partitions per node): MinHeap from scratch against [`rebalance_from`] with
/// tolerance `tol`. Decisions use the predicted sizes; loads are measured on the true ones.
/// Returns, each as `(blocks, minheap, rebalance)` where it applies: the share (%) of
/// partitions and of bytes moved (blocks: 0), and max/mean node load.
pub fn replaced(a: &PreschedArgs, tol: f64, rng: &mut Rng) -> [(f64, f64, f64); 3] {
    let nodes = a.nodes.max(1);
    let n = nodes * a.slots.max(1) * 2;
    let sizes: Vec<u64> = (0..n)
        .map(|_| (rng.lognormal(10.0, a.size_sigma) * 1e6) as u64)
        .collect();
    let predicted: Vec<u64> = sizes
        .iter()
        .map(|&s| (s as f64 * rng.lognormal(1.0, a.prediction_error)) as u64)
        .collect();
    let blocks: Vec<usize> = (0..n).map(|p| p * nodes / n).collect();
    let infos: Vec<ReduceInfo> = predicted
        .iter()
        .map(|&size| ReduceInfo::sized(size))
        .collect();
    let scratch = min_heap_schedule(1, nodes, &infos, false).host_of;
    let rebalanced = rebalance_from(&blocks, &predicted, nodes, tol).host_of;
    let total: u64 = sizes.iter().sum();
    let moved = |host_of: &[usize]| {
        let (mut count, mut bytes) = (0usize, 0u64);
        for p in 0..n {
            if host_of[p] != blocks[p] {
                count += 1;
                bytes += sizes[p];
            }
        }
        (
            count as f64 / n as f64 * 100.0,
            bytes as f64 / total.max(1) as f64 * 100.0,
        )
    };
    let imbalance = |host_of: &[usize]| {
        let mut loads = vec![0u64; nodes];
        for (&h, &s) in host_of.iter().zip(&sizes) {
            loads[h] += s;
        }
        loads.iter().copied().max().unwrap_or(0) as f64 / (total as f64 / nodes as f64).max(1.0)
    };
    let (sc, sb) = moved(&scratch);
    let (rc, rb) = moved(&rebalanced);
    [
        (0.0, sc, rc),
        (0.0, sb, rb),
        (
            imbalance(&blocks),
            imbalance(&scratch),
            imbalance(&rebalanced),
        ),
    ]
}

/// Runs the experiment and prints the table.
pub fn run(a: &PreschedArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.max_rounds >= 1 && a.trials >= 1, "need rounds and trials");
    println!(
        "paper (Fig. 4, OpenCloud trace): MinHeap without swap +5.7% on average vs Spark FIFO +2.7%; \
         random mapping good at 1 round, collapses (worse than baseline) as rounds grow"
    );
    println!(
        "prescheduling: {} nodes x {} slots, task sigma {}, shuffle share {:.1}%, \
         prediction error {}, {} stages per point, seed {}",
        a.nodes,
        a.slots,
        a.size_sigma,
        a.shuffle_share * 100.0,
        a.prediction_error,
        a.trials,
        a.seed
    );
    println!(
        "{:>6} {:>9} {:>9} {:>9} {:>13} {:>15}",
        "rounds", "fifo %", "random %", "minheap %", "minheap+swap %", "swap saves net %"
    );
    let mut total = [0.0f64; 5];
    for rounds in 1..=a.max_rounds {
        let mut rng = Rng::derive(a.seed, rounds as u64);
        let mut acc = [0.0f64; 5];
        for _ in 0..a.trials {
            let (imp, saved) = one_stage(a, rounds, &mut rng);
            for k in 0..4 {
                acc[k] += imp[k];
            }
            acc[4] += saved;
        }
        for v in &mut acc {
            *v /= a.trials as f64;
        }
        for k in 0..5 {
            total[k] += acc[k];
        }
        println!(
            "{:>6} {:>9.2} {:>9.2} {:>9.2} {:>13.2} {:>15.1}",
            rounds, acc[0], acc[1], acc[2], acc[3], acc[4]
        );
    }
    let r = a.max_rounds as f64;
    println!(
        "{:>6} {:>9.2} {:>9.2} {:>9.2} {:>13.2} {:>15.1}   (paper: fifo 2.7, minheap 5.7)",
        "avg",
        total[0] / r,
        total[1] / r,
        total[2] / r,
        total[3] / r,
        total[4] / r
    );
    let mut rng = Rng::derive(a.seed, 999);
    let mut acc = [0.0f64; 4];
    for _ in 0..a.trials {
        let (x, y, z, w) = chained(a, &mut rng);
        for (s, v) in acc.iter_mut().zip([x, y, z, w]) {
            *s += v / a.trials as f64;
        }
    }
    println!(
        "two chained shuffles (Alg. 2, 2 rounds): earlier data re-shuffled for {:.1}% of reduces \
         with accumulate scheduling vs {:.1}% when the second shuffle is scheduled alone; \
         max/mean node load {:.3} vs {:.3}   (paper: re-shuffles should be rare)",
        acc[0], acc[1], acc[2], acc[3]
    );
    let tol = 0.1;
    let mut rng = Rng::derive(a.seed, 1000);
    let mut acc = [(0.0f64, 0.0f64, 0.0f64); 3];
    for _ in 0..a.trials {
        for (s, v) in acc.iter_mut().zip(replaced(a, tol, &mut rng)) {
            s.0 += v.0 / a.trials as f64;
            s.1 += v.1 / a.trials as f64;
            s.2 += v.2 / a.trials as f64;
        }
    }
    println!(
        "re-placing a placed shuffle once sizes are predicted (from contiguous blocks, 2 rounds): \
         MinHeap from scratch moves {:.1}% of partitions ({:.1}% of bytes), rebalance (tolerance \
         {tol}) {:.1}% ({:.1}% of bytes); max/mean node load: blocks {:.3}, MinHeap {:.3}, \
         rebalance {:.3}",
        acc[0].1, acc[1].1, acc[0].2, acc[1].2, acc[2].0, acc[2].1, acc[2].2
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stage of 10 nodes x 4 slots, one round.
    fn ten_nodes() -> PreschedArgs {
        PreschedArgs {
            nodes: 10,
            slots: 4,
            max_rounds: 1,
            trials: 1,
            size_sigma: 1.0,
            shuffle_share: 0.023,
            prediction_error: 0.1,
            seed: 8,
        }
    }

    #[test]
    fn list_schedule_basics() {
        assert_eq!(list_schedule([3.0, 3.0, 3.0], 3), 3.0);
        assert_eq!(list_schedule([3.0, 3.0, 3.0], 1), 9.0);
        assert_eq!(list_schedule([1.0, 1.0, 2.0], 2), 3.0);
        assert_eq!(list_schedule(std::iter::empty(), 2), 0.0);
    }

    #[test]
    fn accumulate_moves_less_earlier_data_than_independent_scheduling() {
        let a = ten_nodes();
        let (acc, ind, _, _) = chained(&a, &mut Rng::new(3));
        assert!(acc < ind, "{acc} vs {ind}");
    }

    #[test]
    fn rebalancing_moves_fewer_partitions_than_minheap_from_scratch() {
        let a = ten_nodes();
        let [count, bytes, imbalance] = replaced(&a, 0.1, &mut Rng::new(4));
        assert!(count.2 < count.1 / 2.0, "{count:?}");
        assert!(bytes.2 < bytes.1, "{bytes:?}");
        // Better balanced than the blocks it starts from, if less than MinHeap.
        assert!(imbalance.2 < imbalance.0, "{imbalance:?}");
        assert!(imbalance.1 <= imbalance.2, "{imbalance:?}");
    }

    #[test]
    fn removing_shuffle_read_never_hurts_fifo_and_is_deterministic() {
        let a = PreschedArgs {
            nodes: 5,
            slots: 2,
            max_rounds: 3,
            trials: 3,
            size_sigma: 1.0,
            shuffle_share: 0.05,
            prediction_error: 0.1,
            seed: 3,
        };
        let x = one_stage(&a, 3, &mut Rng::new(5));
        let y = one_stage(&a, 3, &mut Rng::new(5));
        assert_eq!(x, y);
        assert!(x.0[0] >= 0.0);
        assert!(x.1 >= 0.0);
    }
}
