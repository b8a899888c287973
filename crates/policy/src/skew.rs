//! Skew-aware acceptance and delegation of shuffle blocks.
//!
//! Source: H. Daikoku, H. Kawashima, O. Tatebe, "Skew-Aware Collective Communication for
//! MapReduce Shuffling", IEICE Trans. Inf. & Syst., 2019. Section 2.2 (naive all-to-all),
//! Section 2.3 (pairwise all-to-all), Section 3 (CSA, DSA, DSA with the Skew-aware
//! Meta-Shuffle, Algorithms 1 and 2).
//!
//! - [`pairwise_peers`] and [`naive_order`] give the two exchange orders.
//! - [`accept_prefix`] is the receiver of Algorithm 1: it accepts meta-blocks in order while
//!   they fit under its cap and reports how many (a prefix: it stops at the first misfit).
//! - [`SmsShuffle`] runs the rounds of DSA with SMS: meta-shuffle to the primary owners,
//!   a second pairwise meta-shuffle delegating rejected blocks to peers with free memory,
//!   the block move, and the owners' reduce, until every block reached its owner.
//!
//! Choices the paper leaves open (documented, not corrections): delegates are tried in the
//! pairwise order `i + 1, i + 2, ...`; blocks held by a delegate are offered to their owner
//! again in the next round; blocks nobody accepted stay pending at their sender; an owner's
//! reduce keeps `reduce_ratio` of the bytes it folded (associative, size-reducing reduce);
//! the shuffle is stuck (fails) when a round moves nothing.
//!
//! Note on the paper's pairwise schedule: the XOR pairing `i ^ k` only forms pairs when the
//! process count is a power of two; for other counts we use the generalized
//! `send to (i + k) mod n, receive from (i - k) mod n`.

/// Send and receive peers of `rank` at pairwise step `step` (`1..n`).
/// Power-of-two `n`: both are `rank ^ step`; otherwise `(rank + step) % n` and
/// `(rank + n - step) % n`.
pub fn pairwise_peers(rank: usize, n: usize, step: usize) -> (usize, usize) {
    if n.is_power_of_two() {
        (rank ^ step, rank ^ step)
    } else {
        ((rank + step) % n, (rank + n - step % n) % n)
    }
}

/// The order in which a naive (unsynchronized) exchange visits peers: the same order as the
/// pairwise schedule's receive side, as DSA does "for a fair share of the network".
pub fn naive_order(rank: usize, n: usize) -> Vec<usize> {
    (1..n).map(|k| pairwise_peers(rank, n, k).1).collect()
}

/// Algorithm 1 (receiver side): accepts `sizes` in order while `cur + size <= max`
/// (strict `>` rejects), adds the accepted sizes to `cur`, and returns how many were
/// accepted. Stops at the first block that does not fit.
pub fn accept_prefix(cur: &mut u64, max: u64, sizes: &[u64]) -> usize {
    let mut n = 0;
    for &s in sizes {
        if *cur + s > max {
            break;
        }
        *cur += s;
        n += 1;
    }
    n
}

/// One shuffle block: produced on `origin`, destined to its primary owner `owner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaBlock {
    /// Caller's id.
    pub id: u64,
    /// Primary owner (destination process).
    pub owner: usize,
    /// Size in bytes.
    pub size: u64,
}

/// A block held by a process, flagged when it is held as a delegate for another owner.
type Held = (MetaBlock, bool);

/// What one SMS round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RoundStats {
    /// Bytes accepted by their primary owner this round.
    pub to_owner: u64,
    /// Bytes delegated to a non-owner with free memory.
    pub delegated: u64,
    /// Bytes still pending at a sender after the round.
    pub pending: u64,
    /// Largest `cur_size` of any process during the round (after the block move).
    pub peak: u64,
}

/// State of a DSA-with-SMS shuffle across rounds.
#[derive(Debug, Clone)]
pub struct SmsShuffle {
    n: usize,
    max_size: u64,
    reduce_ratio: f64,
    /// Blocks each process holds for an owner, flagged when held as a delegate.
    held: Vec<Vec<(MetaBlock, bool)>>,
    /// Bytes of delegated blocks each process holds (count toward its memory).
    held_delegated: Vec<u64>,
    /// Bytes of folded reduce results at each owner.
    folded: Vec<f64>,
    /// Bytes each owner has received in total.
    received: Vec<u64>,
    rounds: usize,
}

impl SmsShuffle {
    /// `outgoing[i]` are the blocks process `i` produced, in the order it will offer them.
    /// Blocks whose owner is `i` itself are accepted locally through the same cap. A block
    /// whose owner is not a process (`owner >= outgoing.len()`) can never be delivered: the
    /// shuffle then never completes and [`SmsShuffle::run`] reports it as stuck.
    pub fn new(outgoing: Vec<Vec<MetaBlock>>, max_size: u64, reduce_ratio: f64) -> Self {
        let n = outgoing.len();
        SmsShuffle {
            n,
            max_size,
            reduce_ratio: reduce_ratio.clamp(0.0, 1.0),
            held: outgoing
                .into_iter()
                .map(|v| v.into_iter().map(|b| (b, false)).collect())
                .collect(),
            held_delegated: vec![0; n],
            folded: vec![0.0; n],
            received: vec![0; n],
            rounds: 0,
        }
    }

    /// True when every block reached its owner.
    pub fn done(&self) -> bool {
        self.held.iter().all(|h| h.is_empty())
    }

    /// Rounds run so far.
    pub fn rounds(&self) -> usize {
        self.rounds
    }

    /// Bytes each owner received in total.
    pub fn received(&self) -> &[u64] {
        &self.received
    }

    fn cur(&self, p: usize) -> u64 {
        self.folded[p].ceil() as u64 + self.held_delegated[p]
    }

    /// Runs one round. Returns `None` when the shuffle is already done.
    pub fn round(&mut self) -> Option<RoundStats> {
        if self.done() {
            return None;
        }
        self.rounds += 1;
        let n = self.n;
        let mut cur: Vec<u64> = (0..n).map(|p| self.cur(p)).collect();
        let mut owned_in: Vec<u64> = vec![0; n];
        let mut stats = RoundStats::default();
        // (block, held as a delegate?)
        let mut pending: Vec<Vec<(MetaBlock, bool)>> = vec![Vec::new(); n];
        let mut delegated_to: Vec<Vec<MetaBlock>> = vec![Vec::new(); n];
        let mut freed: Vec<u64> = vec![0; n];
        let mut offers: Vec<Vec<(MetaBlock, bool)>> =
            self.held.iter_mut().map(std::mem::take).collect();
        // Meta-shuffle 1: step 0 is the local data, then the pairwise steps.
        for step in 0..n {
            for i in 0..n {
                let dst = if step == 0 {
                    i
                } else {
                    pairwise_peers(i, n, step).0
                };
                let (mine, rest): (Vec<Held>, Vec<Held>) =
                    offers[i].iter().partition(|(b, _)| b.owner == dst);
                if mine.is_empty() {
                    continue;
                }
                offers[i] = rest;
                let sizes: Vec<u64> = mine.iter().map(|(b, _)| b.size).collect();
                let k = accept_prefix(&mut cur[dst], self.max_size, &sizes);
                for &(b, was_delegated) in &mine[..k] {
                    owned_in[dst] += b.size;
                    stats.to_owner += b.size;
                    if was_delegated {
                        freed[i] += b.size;
                    }
                }
                pending[i].extend_from_slice(&mine[k..]);
            }
        }
        // A block whose owner is not a process (owner >= n) was never offered: keep it
        // pending so the shuffle reports it as undeliverable instead of dropping it.
        for (p, rest) in pending.iter_mut().zip(offers.iter_mut()) {
            p.append(rest);
        }
        // Meta-shuffle 2: delegate pending blocks to peers with free memory, pairwise order.
        for step in 1..n {
            for i in 0..n {
                if pending[i].is_empty() {
                    continue;
                }
                let dst = pairwise_peers(i, n, step).0;
                let cand: Vec<(MetaBlock, bool)> = pending[i]
                    .iter()
                    .copied()
                    .filter(|(b, _)| b.owner != dst && b.owner < n)
                    .collect();
                let sizes: Vec<u64> = cand.iter().map(|(b, _)| b.size).collect();
                let k = accept_prefix(&mut cur[dst], self.max_size, &sizes);
                if k == 0 {
                    continue;
                }
                let moved: Vec<u64> = cand[..k].iter().map(|(b, _)| b.id).collect();
                for &(b, was_delegated) in &cand[..k] {
                    stats.delegated += b.size;
                    delegated_to[dst].push(b);
                    if was_delegated {
                        freed[i] += b.size;
                    }
                }
                pending[i].retain(|(b, _)| !moved.contains(&b.id));
            }
        }
        // Block shuffle: apply the moves.
        for i in 0..n {
            self.held_delegated[i] = self.held_delegated[i].saturating_sub(freed[i]);
            self.held_delegated[i] += delegated_to[i].iter().map(|b| b.size).sum::<u64>();
            self.received[i] += owned_in[i];
        }
        stats.peak = (0..n)
            .map(|p| self.folded[p].ceil() as u64 + owned_in[p] + self.held_delegated[p])
            .max()
            .unwrap_or(0);
        // Reduce: owners fold what they received.
        for (f, &o) in self.folded.iter_mut().zip(&owned_in) {
            *f += self.reduce_ratio * o as f64;
        }
        for i in 0..n {
            let mut h = std::mem::take(&mut pending[i]);
            h.extend(delegated_to[i].iter().map(|&b| (b, true)));
            self.held[i] = h;
        }
        stats.pending = self.held.iter().flatten().map(|(b, _)| b.size).sum();
        Some(stats)
    }

    /// Runs rounds until done, or until a round neither delivers nor delegates anything
    /// (stuck: no memory anywhere). Returns every round's stats and whether it completed.
    pub fn run(&mut self, max_rounds: usize) -> (Vec<RoundStats>, bool) {
        let mut all = Vec::new();
        while !self.done() && all.len() < max_rounds {
            let s = self.round().expect("not done");
            let stuck = s.to_owner == 0 && s.delegated == 0;
            all.push(s);
            if stuck {
                break;
            }
        }
        (all, self.done())
    }
}

/// Bytes each process receives when every block goes straight to its owner (CSA and DSA,
/// which have no cap): the straggler is the maximum.
pub fn received_without_cap(outgoing: &[Vec<MetaBlock>]) -> Vec<u64> {
    let mut r = vec![0u64; outgoing.len()];
    for b in outgoing.iter().flatten() {
        r[b.owner] += b.size;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blk(id: u64, owner: usize, size: u64) -> MetaBlock {
        MetaBlock { id, owner, size }
    }

    #[test]
    fn pairwise_four_processes_matches_figure_1() {
        // n = 4: XOR pairing, each step a perfect matching.
        for step in 1..4 {
            let mut seen = [false; 4];
            for i in 0..4 {
                let (s, r) = pairwise_peers(i, 4, step);
                assert_eq!(s, r);
                assert_eq!(pairwise_peers(s, 4, step).0, i);
                assert!(!seen[s]);
                seen[s] = true;
            }
        }
        assert_eq!(pairwise_peers(1, 4, 3), (2, 2));
    }

    #[test]
    fn pairwise_generalized_for_odd_counts() {
        assert_eq!(pairwise_peers(0, 3, 1), (1, 2));
        assert_eq!(pairwise_peers(2, 3, 2), (1, 0));
        // Every process sends to every other exactly once over n - 1 steps.
        for i in 0..5 {
            let mut dsts: Vec<usize> = (1..5).map(|k| pairwise_peers(i, 5, k).0).collect();
            dsts.sort_unstable();
            assert_eq!(dsts, (0..5).filter(|&x| x != i).collect::<Vec<_>>());
        }
        assert_eq!(naive_order(0, 3), vec![2, 1]);
        assert!(naive_order(0, 1).is_empty());
    }

    #[test]
    fn acceptance_is_a_prefix_with_inclusive_cap() {
        let mut cur = 2;
        // 2 + 3 = 5 <= 5 fits exactly; 1 more would not, and the later 0 is not considered.
        assert_eq!(accept_prefix(&mut cur, 5, &[3, 1, 0]), 1);
        assert_eq!(cur, 5);
        let mut cur = 0;
        assert_eq!(accept_prefix(&mut cur, 5, &[]), 0);
        assert_eq!(accept_prefix(&mut cur, 5, &[6, 1]), 0);
    }

    #[test]
    fn no_skew_completes_in_one_round() {
        let out: Vec<Vec<MetaBlock>> = (0..4)
            .map(|i| (0..4).map(|o| blk((i * 4 + o) as u64, o, 10)).collect())
            .collect();
        let mut s = SmsShuffle::new(out, 100, 0.5);
        let (rounds, ok) = s.run(10);
        assert!(ok);
        assert_eq!(rounds.len(), 1);
        assert_eq!(rounds[0].delegated, 0);
        assert_eq!(s.received(), &[40, 40, 40, 40]);
    }

    #[test]
    fn all_data_on_one_owner_is_delegated_then_delivered() {
        // Four processes each send 4 blocks of 10 to process 0, whose cap is 25.
        let out: Vec<Vec<MetaBlock>> = (0..4)
            .map(|i| (0..4).map(|k| blk((i * 4 + k) as u64, 0, 10)).collect())
            .collect();
        assert_eq!(received_without_cap(&out), vec![160, 0, 0, 0]);
        let mut s = SmsShuffle::new(out, 25, 0.0);
        let (rounds, ok) = s.run(100);
        assert!(ok, "{rounds:?}");
        assert!(rounds.len() > 1);
        assert!(rounds[0].delegated > 0);
        assert!(rounds.iter().all(|r| r.peak <= 25));
        assert_eq!(s.received()[0], 160);
    }

    #[test]
    fn stuck_when_no_memory_anywhere() {
        let out = vec![vec![blk(0, 1, 10)], vec![]];
        let mut s = SmsShuffle::new(out, 5, 0.0);
        let (rounds, ok) = s.run(10);
        assert!(!ok);
        assert_eq!(rounds.len(), 1);
        assert_eq!(rounds[0].pending, 10);
    }

    #[test]
    fn reduce_output_occupies_memory() {
        // Owner 0 keeps everything it folds (ratio 1): 30 bytes never fit under a cap of 20.
        let out = vec![vec![], vec![blk(0, 0, 10), blk(1, 0, 10), blk(2, 0, 10)]];
        let mut s = SmsShuffle::new(out, 20, 1.0);
        let (_, ok) = s.run(50);
        assert!(!ok);
        assert_eq!(s.received()[0], 20);
    }

    #[test]
    fn block_for_unknown_owner_is_not_dropped() {
        let mut s = SmsShuffle::new(vec![vec![blk(0, 5, 1)], vec![]], 100, 0.0);
        let (rounds, ok) = s.run(5);
        assert!(!ok);
        assert!(!s.done());
        // Stuck after one round: never delegated, since no process can own it.
        assert_eq!(rounds.len(), 1);
        assert_eq!(rounds[0].delegated, 0);
    }

    #[test]
    fn one_process_shuffles_locally() {
        let mut s = SmsShuffle::new(vec![vec![blk(0, 0, 5)]], 5, 0.0);
        let (rounds, ok) = s.run(3);
        assert!(ok);
        assert_eq!(rounds[0].to_owner, 5);
    }
}
