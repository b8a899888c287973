//! Adaptive shuffle-block fetch planning.
//!
//! Source: B. Nicolae, C. H. A. Costa, C. Misale, K. Katrinis, Y. Park, "Leveraging Adaptive
//! I/O to Optimize Collective Data Shuffling Patterns for Big Data Analytics", IEEE TPDS 28(6),
//! 2017. Section 4.1 (source selection, Algorithm 1), Section 4.2 (transfer planning,
//! Algorithm 2) and Section 5 (Spark's static default planner, the baseline).
//!
//! Three pieces:
//! - [`FetchMonitor`]: one per executor, shared by its reducers. It tracks the bytes in flight
//!   from each source and a moving average of the time reducers blocked on each source
//!   (`AvgKWait`, last `K` samples), and recommends the next source
//!   ([`FetchMonitor::recommend_source`]).
//! - [`ElasticLimit`]: the per-reducer soft in-flight limit that grows by one increment when a
//!   fetch waited longer than average and shrinks by one otherwise, within
//!   `[increment, hard limit]`; the Spark reader's variants (grow only at the second wait in a
//!   row, shrink only after a run of fetches without a wait) are options of it.
//! - [`AdaptiveFetcher`] builds requests on the fly (at least one increment each, unless the
//!   chosen source has less left); [`StaticFetcher`] is Spark 1.6's default: requests pre-packed
//!   to 1/5 of the limit per source, shuffled once, issued FIFO.
//!
//! Corrections of the printed algorithms (the paper's own mistakes, fixed here):
//! - Algorithm 1, line 7 compares `Score[i]` with `Score[id]` (the reducer's own executor,
//!   which is never a candidate). We compare with the current best, `Score[min_i]`.
//! - Algorithm 1, line 2 starts from `Head[N]`, which may hold no block for this reducer. We
//!   only ever consider sources that still hold a block.
//! - Algorithm 1 lets a remote source replace a local best on score; the text (Section 4.1)
//!   says local sources take strict priority while any remain. We rank locality first.
//! - Algorithm 1's tie-break only says "a successor beats a predecessor"; the text asks for
//!   the *closest* successor in the circular order. We rank ties by circular distance.
//! - Algorithm 2 shrinks the limit when the wait is above average but the soft limit already
//!   equals the hard one (the `if` falls through to the `else if`). The text says grow, capped
//!   at the hard limit, so we keep it at the hard limit.
//! - Algorithm 2's guard `soft > 2 * inc` keeps the soft limit above `2 * inc`; the text says
//!   it "cannot shrink to less than the in-flight increment itself". We use `inc` as the floor.

use std::collections::VecDeque;

/// One shuffle block a reducer has to fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// The executor that serves the block (its index in the agreed circular order).
    pub source: usize,
    /// Size in bytes.
    pub bytes: u64,
    /// Caller's identifier for the block.
    pub id: u64,
}

/// One request to a single source, for one or more blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    /// The serving executor.
    pub source: usize,
    /// The blocks, in the order they were packed.
    pub blocks: Vec<Block>,
    /// Sum of the blocks' sizes.
    pub bytes: u64,
}

#[derive(Debug, Clone)]
struct WaitWindow {
    samples: Vec<f64>,
    next: usize,
    sum: f64,
}

impl WaitWindow {
    fn push(&mut self, k: usize, value: f64) {
        if self.samples.len() < k {
            self.samples.push(value);
            self.sum += value;
        } else {
            self.sum += value - self.samples[self.next];
            self.samples[self.next] = value;
            self.next = (self.next + 1) % k;
        }
    }

    fn mean(&self) -> f64 {
        if self.samples.is_empty() {
            0.0
        } else {
            // Clamp tiny negative drift from incremental sums.
            (self.sum / self.samples.len() as f64).max(0.0)
        }
    }
}

/// Executor-level shared view of every source (the paper's `BlockTransferMonitor`).
///
/// Executors are identified by their index in the circular order all executors agree on;
/// `host_of[i]` is the host of executor `i`.
#[derive(Debug, Clone)]
pub struct FetchMonitor {
    host_of: Vec<u32>,
    in_flight: Vec<u64>,
    waits: Vec<WaitWindow>,
    k: usize,
}

impl FetchMonitor {
    /// A monitor for executors `0..host_of.len()`, averaging waits over the last `k` blocks
    /// of each source (`k` of 0 is treated as 1).
    pub fn new(host_of: Vec<u32>, k: usize) -> Self {
        let n = host_of.len();
        FetchMonitor {
            host_of,
            in_flight: vec![0; n],
            waits: vec![
                WaitWindow {
                    samples: Vec::new(),
                    next: 0,
                    sum: 0.0
                };
                n
            ],
            k: k.max(1),
        }
    }

    /// Number of executors known to the monitor.
    pub fn executors(&self) -> usize {
        self.host_of.len()
    }

    /// Bytes requested from `source` by this executor's reducers and not yet arrived.
    pub fn in_flight(&self, source: usize) -> u64 {
        self.in_flight[source]
    }

    /// `AvgKWait[source]` in milliseconds (0 before any sample).
    pub fn avg_wait_ms(&self, source: usize) -> f64 {
        self.waits[source].mean()
    }

    /// The paper's combined metric `(AvgKWait + 1) * InFlight`; lower is better.
    pub fn score(&self, source: usize) -> f64 {
        (self.avg_wait_ms(source) + 1.0) * self.in_flight[source] as f64
    }

    /// A request of `bytes` to `source` was issued.
    pub fn on_request(&mut self, source: usize, bytes: u64) {
        self.in_flight[source] += bytes;
    }

    /// `bytes` from `source` arrived (no longer in transit).
    pub fn on_arrival(&mut self, source: usize, bytes: u64) {
        self.in_flight[source] = self.in_flight[source].saturating_sub(bytes);
    }

    /// A reducer blocked `wait_ms` for a block of `source` (0 if it was already buffered).
    pub fn record_wait(&mut self, source: usize, wait_ms: f64) {
        let k = self.k;
        self.waits[source].push(k, wait_ms.max(0.0));
    }

    /// RECOMMEND_SOURCE (Algorithm 1, corrected): among `candidates` (sources that still
    /// hold a block for the reducer), prefer sources on the reducer's host, then the lowest
    /// score, then the closest circular successor of `own`. `None` if there is no candidate.
    pub fn recommend_source(&self, own: usize, candidates: &[usize]) -> Option<usize> {
        let n = self.executors();
        let own_host = self.host_of[own];
        let key = |s: usize| {
            let remote = self.host_of[s] != own_host;
            let dist = (s + n - own) % n;
            (remote, self.score(s), dist)
        };
        candidates.iter().copied().min_by(|&a, &b| {
            let (ra, sa, da) = key(a);
            let (rb, sb, db) = key(b);
            ra.cmp(&rb).then(sa.total_cmp(&sb)).then(da.cmp(&db))
        })
    }
}

/// The elastic soft in-flight limit of one reducer (Section 4.2.2, Algorithm 2, corrected).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ElasticLimit {
    hard: u64,
    inc: u64,
    soft: u64,
    avg_wait_ms: Option<f64>,
    alpha: f64,
    skip_first: bool,
    floor: u64,
    /// `None`: the paper's rule (shrink after every wait at or below the average).
    /// `Some(n)`: shrink only after `n` blocks in a row consumed without any wait.
    quiet_to_shrink: Option<u32>,
    quiet: u32,
    /// 1: the paper's rule (grow after every wait above the average); `n`: grow only when
    /// that wait is the `n`-th block in a row that waited.
    waits_to_grow: u32,
    waited: u32,
}

impl ElasticLimit {
    /// Starts at the hard limit. `inc` is the in-flight increment (clamped to `1..=hard`);
    /// the reducer's average wait is an exponential moving average with weight `alpha`
    /// (the paper does not say which average; we default to 1/8 in the simulator).
    pub fn new(hard: u64, inc: u64, alpha: f64) -> Self {
        let hard = hard.max(1);
        let inc = inc.clamp(1, hard);
        ElasticLimit {
            hard,
            inc,
            soft: hard,
            avg_wait_ms: None,
            alpha: alpha.clamp(f64::MIN_POSITIVE, 1.0),
            skip_first: false,
            floor: inc,
            quiet_to_shrink: None,
            quiet: 0,
            waits_to_grow: 1,
            waited: 0,
        }
    }

    /// Shrinks only after `n` blocks in a row were consumed without any wait (a wait at or
    /// below the average then keeps the limit), instead of after every block that waited no
    /// longer than the average. The paper's rule suits reducers that read thousands of
    /// blocks with steady waits; a Spark task reads a few requests, and on a busy host the
    /// waits are noisy: shrinking at every below-average wait keeps the limit at its floor,
    /// where each request waits for the round trip. The Spark reader uses 8.
    pub fn shrinking_after_quiet(mut self, n: u32) -> Self {
        self.quiet_to_shrink = Some(n.max(1));
        self
    }

    /// Grows only on a wait above the average that is the `n`-th block in a row that waited
    /// (the paper: after every wait above the average). On a busy host a request now and
    /// then waits for no lack of prefetching (a reading thread or the worker did not get a
    /// core in time); growing at each such lone wait raises the limit in bursts that the
    /// quiet rule then takes its run to undo. A reader short of prefetching waits on block
    /// after block and still grows at every one after the first. The Spark reader uses 2.
    pub fn growing_after_waits(mut self, n: u32) -> Self {
        self.waits_to_grow = n.max(1);
        self
    }

    /// Continues runs carried over from an earlier reducer of the same executor (as the
    /// Spark reader carries its limit between short tasks): `quiet` blocks in a row without
    /// a wait, `waited` blocks in a row with one (at most one of them is non-zero).
    pub fn with_runs(mut self, quiet: u32, waited: u32) -> Self {
        self.quiet = quiet;
        self.waited = waited;
        self
    }

    /// Starts with `avg_ms` as the average wait (a limit carried over from an earlier
    /// reducer of the same executor, as the Spark reader does for its short tasks).
    pub fn with_average(mut self, avg_ms: f64) -> Self {
        self.avg_wait_ms = Some(avg_ms.max(0.0));
        self
    }

    /// Never shrinks below `floor` (clamped to `[increment, hard]`) instead of one
    /// increment. The paper's text says one increment, its code two: a reader that asks
    /// for a new increment only when one fits under the limit needs two (one consumed
    /// while the next arrives) or it prefetches nothing. The Spark reader uses two.
    pub fn with_floor(mut self, floor: u64) -> Self {
        self.floor = floor.clamp(self.inc, self.hard);
        self.soft = self.soft.max(self.floor);
        self
    }

    /// Starts at `soft` (clamped to `[increment, hard]`) instead of the hard limit. The
    /// Spark reader starts at two increments: starting at the hard limit makes every
    /// reducer's first burst as large as a static reader's, which is the peak memory the
    /// paper sets out to cut.
    pub fn starting_at(mut self, soft: u64) -> Self {
        self.soft = soft.clamp(self.floor, self.hard);
        self
    }

    /// Leaves the first consumed block's wait out of the average (it measures connecting
    /// to the sources, not the flow of data), as the Spark reader does.
    pub fn skipping_first_wait(mut self) -> Self {
        self.skip_first = true;
        self
    }

    /// The current soft limit in bytes.
    pub fn soft(&self) -> u64 {
        self.soft
    }

    /// The in-flight increment in bytes.
    pub fn increment(&self) -> u64 {
        self.inc
    }

    /// The hard limit in bytes.
    pub fn hard(&self) -> u64 {
        self.hard
    }

    /// The reducer's average wait so far (ms), if any block was consumed.
    pub fn avg_wait_ms(&self) -> Option<f64> {
        self.avg_wait_ms
    }

    /// A block was consumed after the reducer blocked `wait_ms`: grow if the wait was above
    /// the average (with [`Self::growing_after_waits`], and ended a run of waits), shrink
    /// otherwise (or, with [`Self::shrinking_after_quiet`], after a run of blocks without any
    /// wait), then fold the wait into the average.
    pub fn on_consume(&mut self, wait_ms: f64) {
        if self.skip_first {
            self.skip_first = false;
            return;
        }
        if let Some(avg) = self.avg_wait_ms {
            self.waited = if wait_ms > 0.0 {
                self.waited.saturating_add(1)
            } else {
                0
            };
            let shrink = match self.quiet_to_shrink {
                None => wait_ms <= avg,
                Some(n) => {
                    self.quiet = if wait_ms > 0.0 {
                        0
                    } else {
                        self.quiet.saturating_add(1)
                    };
                    self.quiet >= n
                }
            };
            if wait_ms > avg && self.waited >= self.waits_to_grow {
                self.soft = (self.soft + self.inc).min(self.hard);
            } else if shrink && self.soft >= self.floor + self.inc {
                self.soft -= self.inc;
                self.quiet = 0;
            }
            self.avg_wait_ms = Some(avg + self.alpha * (wait_ms - avg));
        } else {
            self.avg_wait_ms = Some(wait_ms);
        }
    }
}

/// The adaptive planner of one reducer: requests built on the fly through the executor's
/// [`FetchMonitor`] under an [`ElasticLimit`].
#[derive(Debug, Clone)]
pub struct AdaptiveFetcher {
    own: usize,
    by_source: Vec<VecDeque<Block>>,
    candidates: Vec<usize>,
    in_flight: u64,
    limit: ElasticLimit,
}

impl AdaptiveFetcher {
    /// `own` is the reducer's executor; blocks served by `own` itself must not be passed
    /// (they are read directly). `executors` is the size of the circular order.
    pub fn new(own: usize, executors: usize, blocks: &[Block], limit: ElasticLimit) -> Self {
        let mut by_source = vec![VecDeque::new(); executors];
        for b in blocks {
            by_source[b.source].push_back(*b);
        }
        let candidates = (0..executors)
            .filter(|&s| !by_source[s].is_empty())
            .collect();
        AdaptiveFetcher {
            own,
            by_source,
            candidates,
            in_flight: 0,
            limit,
        }
    }

    /// Bytes requested and not yet consumed (the buffered-memory bound).
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// The reducer's elastic limit.
    pub fn limit(&self) -> &ElasticLimit {
        &self.limit
    }

    /// True when every block has been requested.
    pub fn all_requested(&self) -> bool {
        self.candidates.is_empty()
    }

    /// Issues as many requests as the soft limit allows: while there is room for a full
    /// increment (or nothing is in flight), ask the monitor for a source and pack that
    /// source's blocks until the request reaches one increment, without passing the room
    /// left (a single block is always allowed, as in Spark, so an oversized block cannot
    /// stall the reducer). The monitor's in-flight counters are updated per request, so
    /// consecutive requests disperse across sources.
    pub fn plan(&mut self, monitor: &mut FetchMonitor) -> Vec<FetchRequest> {
        let mut out = Vec::new();
        let inc = self.limit.inc;
        loop {
            let soft = self.limit.soft;
            if self.candidates.is_empty() || (self.in_flight > 0 && self.in_flight + inc > soft) {
                break;
            }
            let Some(src) = monitor.recommend_source(self.own, &self.candidates) else {
                break;
            };
            let room = soft.saturating_sub(self.in_flight);
            let queue = &mut self.by_source[src];
            let mut req = FetchRequest {
                source: src,
                blocks: Vec::new(),
                bytes: 0,
            };
            while let Some(b) = queue.front() {
                if !req.blocks.is_empty() && (req.bytes >= inc || req.bytes + b.bytes > room) {
                    break;
                }
                req.bytes += b.bytes;
                req.blocks.push(*b);
                queue.pop_front();
            }
            if queue.is_empty() {
                self.candidates.retain(|&s| s != src);
            }
            self.in_flight += req.bytes;
            monitor.on_request(src, req.bytes);
            out.push(req);
        }
        out
    }

    /// A block of `bytes` was consumed after the reducer blocked `wait_ms`.
    /// Call [`AdaptiveFetcher::plan`] afterwards to refill.
    pub fn on_consumed(&mut self, bytes: u64, wait_ms: f64) {
        self.in_flight = self.in_flight.saturating_sub(bytes);
        self.limit.on_consume(wait_ms);
    }
}

/// Spark 1.6's default planner (`ShuffleBlockFetcherIterator`), the paper's baseline.
#[derive(Debug, Clone)]
pub struct StaticFetcher {
    queue: VecDeque<FetchRequest>,
    max_in_flight: u64,
    in_flight: u64,
}

impl StaticFetcher {
    /// Packs each source's blocks into requests of at least `max(max_in_flight / 5, 1)`
    /// bytes (the remainder forms a last, smaller request), shuffles all requests with
    /// Fisher-Yates using `rand_below(n)` (uniform in `0..n`), and queues them.
    pub fn new(
        blocks: &[Block],
        max_in_flight: u64,
        rand_below: &mut dyn FnMut(u64) -> u64,
    ) -> Self {
        let target = (max_in_flight / 5).max(1);
        // Group by source (stable, so each source keeps its block order).
        let mut sorted: Vec<Block> = blocks.to_vec();
        sorted.sort_by_key(|b| b.source);
        let mut reqs: Vec<FetchRequest> = Vec::new();
        let mut cur: Option<FetchRequest> = None;
        for b in sorted {
            let c = match cur.take() {
                Some(c) if c.source == b.source => c,
                other => {
                    if let Some(done) = other {
                        reqs.push(done);
                    }
                    FetchRequest {
                        source: b.source,
                        blocks: Vec::new(),
                        bytes: 0,
                    }
                }
            };
            let mut c = c;
            c.bytes += b.bytes;
            c.blocks.push(b);
            if c.bytes >= target {
                reqs.push(c);
            } else {
                cur = Some(c);
            }
        }
        if let Some(c) = cur {
            reqs.push(c);
        }
        for i in (1..reqs.len()).rev() {
            let j = rand_below(i as u64 + 1) as usize;
            reqs.swap(i, j);
        }
        StaticFetcher {
            queue: reqs.into(),
            max_in_flight,
            in_flight: 0,
        }
    }

    /// Bytes requested and not yet consumed.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Requests not yet issued.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Dequeues requests while `in_flight == 0 || in_flight + front.bytes <= max`.
    pub fn plan(&mut self) -> Vec<FetchRequest> {
        let mut out = Vec::new();
        while let Some(front) = self.queue.front() {
            if self.in_flight != 0 && self.in_flight + front.bytes > self.max_in_flight {
                break;
            }
            let req = self.queue.pop_front().expect("front exists");
            self.in_flight += req.bytes;
            out.push(req);
        }
        out
    }

    /// A block of `bytes` was consumed (Spark 1.6 decrements `bytesInFlight` in `next()`).
    pub fn on_consumed(&mut self, bytes: u64) {
        self.in_flight = self.in_flight.saturating_sub(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(spec: &[(usize, u64)]) -> Vec<Block> {
        spec.iter()
            .enumerate()
            .map(|(i, &(source, bytes))| Block {
                source,
                bytes,
                id: i as u64,
            })
            .collect()
    }

    #[test]
    fn score_is_zero_when_idle_and_plus_one_keeps_in_flight() {
        let mut m = FetchMonitor::new(vec![0, 0, 1], 4);
        assert_eq!(m.score(1), 0.0);
        m.on_request(1, 100);
        // No wait recorded: (0 + 1) * 100.
        assert_eq!(m.score(1), 100.0);
        m.record_wait(1, 3.0);
        assert_eq!(m.score(1), 400.0);
        m.on_arrival(1, 100);
        assert_eq!(m.score(1), 0.0);
    }

    #[test]
    fn wait_average_uses_last_k_samples() {
        let mut m = FetchMonitor::new(vec![0; 2], 2);
        for w in [10.0, 20.0, 30.0] {
            m.record_wait(1, w);
        }
        assert_eq!(m.avg_wait_ms(1), 25.0);
    }

    #[test]
    fn initial_choice_is_closest_circular_successor() {
        // Four executors on four hosts, nothing known: executor 2 picks 3, executor 3 wraps to 0.
        let m = FetchMonitor::new(vec![0, 1, 2, 3], 4);
        assert_eq!(m.recommend_source(2, &[0, 1, 3]), Some(3));
        assert_eq!(m.recommend_source(3, &[0, 1, 2]), Some(0));
        assert_eq!(m.recommend_source(3, &[1, 2]), Some(1));
    }

    #[test]
    fn local_sources_win_over_better_scored_remote_ones() {
        // Executors 0 and 1 share host 0; 2 is remote and idle, 1 is local and busy.
        let mut m = FetchMonitor::new(vec![0, 0, 1], 4);
        m.on_request(1, 1 << 20);
        m.record_wait(1, 50.0);
        assert_eq!(m.recommend_source(0, &[1, 2]), Some(1));
        // Once the local source holds nothing more, the remote one is chosen.
        assert_eq!(m.recommend_source(0, &[2]), Some(2));
    }

    #[test]
    fn lower_score_beats_closer_successor_and_slow_sources_are_avoided() {
        let mut m = FetchMonitor::new(vec![0, 1, 2, 3], 8);
        m.on_request(1, 100);
        m.on_request(2, 100);
        m.record_wait(1, 9.0); // score 1000
        assert_eq!(m.recommend_source(0, &[1, 2]), Some(2)); // score 100
        assert_eq!(m.recommend_source(0, &[]), None);
    }

    #[test]
    fn elastic_limit_grows_capped_and_shrinks_to_one_increment() {
        let mut l = ElasticLimit::new(10, 2, 0.5);
        l.on_consume(5.0); // first sample only sets the average
        assert_eq!(l.soft(), 10);
        // Above average at the hard limit: stays at hard (the printed algorithm would shrink).
        l.on_consume(100.0);
        assert_eq!(l.soft(), 10);
        for _ in 0..10 {
            l.on_consume(0.0);
        }
        // Floor is the increment itself, not 2 * inc.
        assert_eq!(l.soft(), 2);
        l.on_consume(1000.0);
        assert_eq!(l.soft(), 4);
    }

    #[test]
    fn elastic_limit_equal_wait_shrinks() {
        let mut l = ElasticLimit::new(10, 2, 0.5);
        l.on_consume(4.0);
        l.on_consume(4.0);
        assert_eq!(l.soft(), 8);
    }

    #[test]
    fn adaptive_requests_pack_at_least_one_increment_and_disperse() {
        let mut m = FetchMonitor::new(vec![0, 1, 2], 4);
        let bl = blocks(&[(1, 3), (1, 3), (1, 3), (2, 3), (2, 3), (2, 3)]);
        let mut f = AdaptiveFetcher::new(0, 3, &bl, ElasticLimit::new(12, 5, 0.125));
        let reqs = f.plan(&mut m);
        // First request goes to the successor (1) with two blocks (6 >= 5); the next goes
        // to 2, whose score (0) now beats 1's.
        assert_eq!(reqs[0].source, 1);
        assert_eq!(reqs[0].bytes, 6);
        assert_eq!(reqs[1].source, 2);
        assert_eq!(reqs[1].bytes, 6);
        assert_eq!(reqs.len(), 2);
        assert_eq!(f.in_flight(), 12);
        assert_eq!(m.in_flight(1), 6);
        // Consuming frees room for one more increment.
        // (the second wait is above the first, so the soft limit stays at the hard one)
        f.on_consumed(3, 0.0);
        f.on_consumed(3, 10.0);
        assert_eq!(f.limit().soft(), 12);
        m.on_arrival(1, 6);
        let more = f.plan(&mut m);
        assert_eq!(more.len(), 1);
        assert_eq!(more[0].source, 1);
        assert_eq!(more[0].bytes, 3);
        assert!(f.all_requested() || !more.is_empty());
    }

    #[test]
    fn adaptive_oversized_block_is_fetched_alone() {
        let mut m = FetchMonitor::new(vec![0, 1], 4);
        let mut f = AdaptiveFetcher::new(0, 2, &blocks(&[(1, 100)]), ElasticLimit::new(10, 2, 0.1));
        let r = f.plan(&mut m);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].bytes, 100);
        assert!(f.all_requested());
        assert!(f.plan(&mut m).is_empty());
    }

    #[test]
    fn adaptive_empty_input_plans_nothing() {
        let mut m = FetchMonitor::new(vec![0], 4);
        let mut f = AdaptiveFetcher::new(0, 1, &[], ElasticLimit::new(10, 2, 0.1));
        assert!(f.plan(&mut m).is_empty());
        assert!(f.all_requested());
    }

    #[test]
    fn static_requests_are_one_fifth_of_limit_and_respect_it() {
        let bl = blocks(&[(1, 1); 20]);
        let mut identity = |_n: u64| 0u64; // j = 0 for every i: a deterministic permutation
        let mut f = StaticFetcher::new(&bl, 10, &mut identity);
        assert_eq!(f.queued(), 10); // 20 bytes / target 2
        let first = f.plan();
        assert_eq!(first.iter().map(|r| r.bytes).sum::<u64>(), 10);
        assert!(first.iter().all(|r| r.bytes == 2));
        assert!(f.plan().is_empty());
        f.on_consumed(1);
        assert!(f.plan().is_empty()); // 9 + 2 > 10
        f.on_consumed(1);
        assert_eq!(f.plan().len(), 1);
    }

    #[test]
    fn static_shuffle_permutes_but_keeps_all_blocks() {
        let bl = blocks(&[(1, 5), (2, 5), (3, 5), (4, 5)]);
        let mut state = 7u64;
        let mut rng = |n: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        let mut f = StaticFetcher::new(&bl, 25, &mut rng);
        let reqs = f.plan();
        let mut ids: Vec<u64> = reqs
            .iter()
            .flat_map(|r| r.blocks.iter().map(|b| b.id))
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![0, 1, 2, 3]);
    }
}
