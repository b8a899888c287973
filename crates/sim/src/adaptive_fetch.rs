//! `crossdock sim adaptive-fetch`: adaptive vs Spark's static fetch planning at the scale of
//! Nicolae et al. (TPDS 2017, Section 6.2): 247 executors x 8 reducers, 19 executors per node,
//! in-flight limits 10/50/200 MB. Reports completion time and peak buffered bytes.
//!
//! Model (ours; the paper measured a real cluster): every reducer fetches the same volume
//! from every other executor (its own executor's blocks are read directly). Each source
//! executor serves requests FIFO on two lanes, one for same-node readers and one for remote
//! readers; the remote lane gets the executor's share of the node NIC, the local lane
//! `local_speedup` times that; a fraction of sources is slow (CPU or bandwidth interference,
//! the case the responsiveness term targets). Each reducer consumes arrived blocks in
//! arrival order at its own rate (log-normal across reducers). Optionally, consumption on a
//! node slows with the bytes buffered on that node (`--gc-knee-gb`, a crude stand-in for
//! the JVM memory pressure the paper blames for large limits being slower).

use clap::Args;
use crossdock_policy::adaptive_fetch::{
    AdaptiveFetcher, Block, ElasticLimit, FetchMonitor, FetchRequest, StaticFetcher,
};
use std::collections::VecDeque;

use crate::events::EventQueue;
use crate::rng::Rng;

const MB: f64 = 1024.0 * 1024.0;

/// Arguments of `crossdock sim adaptive-fetch`.
#[derive(Debug, Clone, Args)]
pub struct FetchArgs {
    /// Executors (the paper: 13 worker nodes x 19 = 247).
    #[arg(long, default_value_t = 247)]
    pub executors: usize,
    /// Executors per node.
    #[arg(long, default_value_t = 19)]
    pub executors_per_node: usize,
    /// Concurrent reducers per executor (the paper: 8 task threads).
    #[arg(long, default_value_t = 8)]
    pub reducers_per_executor: usize,
    /// Waves of reducers (the paper runs 2 x cores reduce tasks, i.e. 2 waves).
    #[arg(long, default_value_t = 2)]
    pub waves: usize,
    /// Shuffle MB each reducer fetches from other executors (the paper: about 253).
    #[arg(long, default_value_t = 253.0)]
    pub mb_per_reducer: f64,
    /// Blocks each reducer fetches from each source.
    #[arg(long, default_value_t = 4)]
    pub blocks_per_source: usize,
    /// In-flight limits to compare, MB (200 is the paper's "unlimited").
    #[arg(long, value_delimiter = ',', default_values_t = vec![10.0, 50.0, 200.0])]
    pub limits_mb: Vec<f64>,
    /// In-flight increment as a fraction of the limit (the paper gives no value).
    #[arg(long, default_value_t = 0.2)]
    pub increment_fraction: f64,
    /// K, the number of recent blocks in each source's average wait.
    #[arg(long, default_value_t = 16)]
    pub wait_window: usize,
    /// Node NIC bandwidth in Gb/s (the paper: 100 Gb/s EDR InfiniBand).
    #[arg(long, default_value_t = 100.0)]
    pub node_gbps: f64,
    /// Same-node transfers are this many times faster than the NIC share.
    #[arg(long, default_value_t = 4.0)]
    pub local_speedup: f64,
    /// Fraction of source executors that serve slowly.
    #[arg(long, default_value_t = 0.05)]
    pub slow_fraction: f64,
    /// Bandwidth factor of the slow sources.
    #[arg(long, default_value_t = 0.5)]
    pub slow_factor: f64,
    /// Median consumption rate of one reducer, MB/s.
    #[arg(long, default_value_t = 60.0)]
    pub consume_mbps: f64,
    /// Log-normal spread of reducer consumption rates.
    #[arg(long, default_value_t = 0.3)]
    pub consume_sigma: f64,
    /// Memory-pressure model: consumption on a node slows by 1 + buffered/knee (GB); 0 = off.
    #[arg(long, default_value_t = 0.0)]
    pub gc_knee_gb: f64,
    /// Shrink the elastic limit only after this many blocks in a row without a wait (the
    /// Spark reader's rule uses 8); 0 = the paper's rule (after every wait at or below the
    /// average).
    #[arg(long, default_value_t = 0)]
    pub quiet_shrink: u32,
    /// Grow the elastic limit only at a wait above the average that is this many blocks in a
    /// row that waited (the Spark reader's rule uses 2); 1 = the paper's rule.
    #[arg(long, default_value_t = 1)]
    pub waits_to_grow: u32,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Which planner to simulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Spark's static default.
    Static,
    /// The paper's adaptive planner.
    Adaptive,
}

/// Outcome of one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FetchOutcome {
    /// Time until every reducer consumed every block, seconds.
    pub completion_s: f64,
    /// Peak bytes arrived but not yet consumed, summed over all reducers.
    pub peak_buffered: f64,
    /// Time-averaged bytes arrived but not yet consumed.
    pub mean_buffered: f64,
    /// Requests issued.
    pub requests: u64,
}

enum Planner {
    Static(StaticFetcher),
    Adaptive(AdaptiveFetcher),
}

struct Reducer {
    exec: usize,
    node: usize,
    planner: Option<Planner>,
    queue: VecDeque<(u64, usize)>,
    busy: Option<(u64, usize, f64)>,
    wait_since: Option<f64>,
    left: usize,
    rate: f64,
}

struct Lane {
    queue: VecDeque<usize>,
    busy: bool,
}

struct Req {
    reducer: usize,
    source: usize,
    blocks: Vec<u64>,
    bytes: u64,
}

enum Ev {
    AtSource(usize),
    ServiceDone(usize, usize),
    Arrive(usize),
    Consumed(usize),
}

struct World<'a> {
    a: &'a FetchArgs,
    q: EventQueue<Ev>,
    reducers: Vec<Reducer>,
    monitors: Vec<FetchMonitor>,
    lanes: Vec<[Lane; 2]>,
    bw: Vec<f64>,
    reqs: Vec<Req>,
    buffered: f64,
    node_buffered: Vec<f64>,
    peak: f64,
    area: f64,
    last_t: f64,
    done: usize,
    /// Reducers of each executor not started yet.
    pending: Vec<VecDeque<usize>>,
    strategy: Strategy,
    rng: Rng,
    bytes_per_block: u64,
    limit: u64,
    inc: u64,
}

impl World<'_> {
    fn node_of(&self, exec: usize) -> usize {
        exec / self.a.executors_per_node
    }

    fn issue(&mut self, r: usize, reqs: Vec<FetchRequest>) {
        for fr in reqs {
            let id = self.reqs.len();
            self.reqs.push(Req {
                reducer: r,
                source: fr.source,
                blocks: fr.blocks.iter().map(|b| b.bytes).collect(),
                bytes: fr.bytes,
            });
            let local = self.node_of(fr.source) == self.reducers[r].node;
            self.q
                .after(if local { 5e-6 } else { 20e-6 }, Ev::AtSource(id));
        }
    }

    fn plan(&mut self, r: usize) {
        let exec = self.reducers[r].exec;
        let reqs = match &mut self.reducers[r].planner {
            Some(Planner::Static(s)) => s.plan(),
            Some(Planner::Adaptive(p)) => p.plan(&mut self.monitors[exec]),
            None => Vec::new(),
        };
        self.issue(r, reqs);
    }

    /// Starts reducer `r`: builds its planner and issues its first requests.
    fn start_reducer(&mut self, r: usize) {
        let exec = self.reducers[r].exec;
        let e = self.a.executors;
        let bpb = self.bytes_per_block;
        let per = self.a.blocks_per_source;
        let blocks: Vec<Block> = (0..e)
            .filter(|&s| s != exec)
            .flat_map(|s| {
                (0..per).map(move |k| Block {
                    source: s,
                    bytes: bpb,
                    id: (s * per + k) as u64,
                })
            })
            .collect();
        let mut limit = ElasticLimit::new(self.limit, self.inc, 0.125)
            .growing_after_waits(self.a.waits_to_grow);
        if self.a.quiet_shrink > 0 {
            limit = limit.shrinking_after_quiet(self.a.quiet_shrink);
        }
        let planner = match self.strategy {
            Strategy::Static => {
                let rng = &mut self.rng;
                Planner::Static(StaticFetcher::new(&blocks, self.limit, &mut |n| {
                    rng.below(n)
                }))
            }
            Strategy::Adaptive => Planner::Adaptive(AdaptiveFetcher::new(exec, e, &blocks, limit)),
        };
        self.reducers[r].left = blocks.len();
        self.reducers[r].planner = Some(planner);
        self.reducers[r].wait_since = Some(self.q.now());
        if blocks.is_empty() {
            self.finish_reducer(r);
        } else {
            self.plan(r);
        }
    }

    fn finish_reducer(&mut self, r: usize) {
        self.done += 1;
        self.reducers[r].planner = None;
        let exec = self.reducers[r].exec;
        if let Some(next) = self.pending[exec].pop_front() {
            self.start_reducer(next);
        }
    }

    fn start_service(&mut self, src: usize, lane: usize) {
        if self.lanes[src][lane].busy {
            return;
        }
        if let Some(&id) = self.lanes[src][lane].queue.front() {
            self.lanes[src][lane].busy = true;
            let speed = if lane == 0 {
                self.bw[src] * self.a.local_speedup
            } else {
                self.bw[src]
            };
            let t = 50e-6 + self.reqs[id].bytes as f64 / speed;
            self.q.after(t, Ev::ServiceDone(src, lane));
        }
    }

    fn start_consume(&mut self, r: usize, wait_s: f64) {
        let Some((bytes, src)) = self.reducers[r].queue.pop_front() else {
            return;
        };
        let wait_ms = wait_s * 1e3;
        let exec = self.reducers[r].exec;
        if matches!(self.reducers[r].planner, Some(Planner::Adaptive(_))) {
            self.monitors[exec].record_wait(src, wait_ms);
        }
        let mut rate = self.reducers[r].rate;
        if self.a.gc_knee_gb > 0.0 {
            let node = self.reducers[r].node;
            rate /= 1.0 + self.node_buffered[node] / (self.a.gc_knee_gb * 1024.0 * MB);
        }
        self.reducers[r].busy = Some((bytes, src, wait_ms));
        self.reducers[r].wait_since = None;
        self.q.after(bytes as f64 / rate, Ev::Consumed(r));
    }

    fn handle(&mut self, ev: Ev) {
        let now = self.q.now();
        self.area += self.buffered * (now - self.last_t);
        self.last_t = now;
        match ev {
            Ev::AtSource(id) => {
                let src = self.reqs[id].source;
                let r = self.reqs[id].reducer;
                let lane = usize::from(self.node_of(src) != self.reducers[r].node);
                self.lanes[src][lane].queue.push_back(id);
                self.start_service(src, lane);
            }
            Ev::ServiceDone(src, lane) => {
                let id = self.lanes[src][lane].queue.pop_front().expect("served");
                self.lanes[src][lane].busy = false;
                let latency = if lane == 0 { 5e-6 } else { 20e-6 };
                self.q.after(latency, Ev::Arrive(id));
                self.start_service(src, lane);
            }
            Ev::Arrive(id) => {
                let r = self.reqs[id].reducer;
                let src = self.reqs[id].source;
                let bytes = self.reqs[id].bytes;
                let blocks = std::mem::take(&mut self.reqs[id].blocks);
                let exec = self.reducers[r].exec;
                if matches!(self.reducers[r].planner, Some(Planner::Adaptive(_))) {
                    self.monitors[exec].on_arrival(src, bytes);
                }
                for b in blocks {
                    self.reducers[r].queue.push_back((b, src));
                }
                self.buffered += bytes as f64;
                let node = self.reducers[r].node;
                self.node_buffered[node] += bytes as f64;
                self.peak = self.peak.max(self.buffered);
                if self.reducers[r].busy.is_none() {
                    let wait = self.reducers[r]
                        .wait_since
                        .map(|t| self.q.now() - t)
                        .unwrap_or(0.0);
                    self.start_consume(r, wait);
                }
            }
            Ev::Consumed(r) => {
                let (bytes, _src, wait_ms) = self.reducers[r].busy.take().expect("busy");
                self.buffered -= bytes as f64;
                let node = self.reducers[r].node;
                self.node_buffered[node] -= bytes as f64;
                self.reducers[r].left -= 1;
                match &mut self.reducers[r].planner {
                    Some(Planner::Static(s)) => s.on_consumed(bytes),
                    Some(Planner::Adaptive(p)) => p.on_consumed(bytes, wait_ms),
                    None => {}
                }
                self.plan(r);
                if !self.reducers[r].queue.is_empty() {
                    self.start_consume(r, 0.0);
                } else if self.reducers[r].left > 0 {
                    self.reducers[r].wait_since = Some(self.q.now());
                } else {
                    self.finish_reducer(r);
                }
            }
        }
    }
}

/// Runs one strategy at one in-flight limit.
pub fn simulate(a: &FetchArgs, strategy: Strategy, limit_mb: f64) -> FetchOutcome {
    let e = a.executors.max(1);
    let per_node = a.executors_per_node.max(1);
    // Sources: NIC share and slow ones (same draw for both strategies: seeded separately).
    let nic = a.node_gbps * 1e9 / 8.0 / per_node as f64;
    let mut srng = Rng::derive(a.seed, 2);
    let bw: Vec<f64> = (0..e)
        .map(|_| {
            if srng.f64() < a.slow_fraction {
                nic * a.slow_factor
            } else {
                nic
            }
        })
        .collect();
    let host_of: Vec<u32> = (0..e).map(|x| (x / per_node) as u32).collect();
    let sources = e.saturating_sub(1).max(1);
    let bytes_per_block =
        ((a.mb_per_reducer * MB) / (sources * a.blocks_per_source.max(1)) as f64).max(1.0) as u64;
    let limit = (limit_mb * MB) as u64;
    let inc = ((limit as f64) * a.increment_fraction).max(1.0) as u64;
    let mut crng = Rng::derive(a.seed, 3);
    let tasks = a.reducers_per_executor.max(1) * a.waves.max(1);
    let mut reducers = Vec::with_capacity(e * tasks);
    let mut pending = vec![VecDeque::new(); e];
    for (exec, pend) in pending.iter_mut().enumerate() {
        for k in 0..tasks {
            if k >= a.reducers_per_executor.max(1) {
                pend.push_back(reducers.len());
            }
            reducers.push(Reducer {
                exec,
                node: exec / per_node,
                planner: None,
                queue: VecDeque::new(),
                busy: None,
                wait_since: None,
                left: 0,
                rate: crng.lognormal(a.consume_mbps * MB, a.consume_sigma),
            });
        }
    }
    let nodes = e.div_ceil(per_node);
    let mut w = World {
        a,
        q: EventQueue::default(),
        monitors: (0..e)
            .map(|_| FetchMonitor::new(host_of.clone(), a.wait_window))
            .collect(),
        lanes: (0..e)
            .map(|_| {
                [
                    Lane {
                        queue: VecDeque::new(),
                        busy: false,
                    },
                    Lane {
                        queue: VecDeque::new(),
                        busy: false,
                    },
                ]
            })
            .collect(),
        bw,
        reqs: Vec::new(),
        buffered: 0.0,
        node_buffered: vec![0.0; nodes],
        peak: 0.0,
        area: 0.0,
        last_t: 0.0,
        done: 0,
        reducers,
        pending,
        strategy,
        rng: Rng::derive(a.seed, 1),
        bytes_per_block,
        limit,
        inc,
    };
    let n = w.reducers.len();
    for r in 0..n {
        if !w.pending[w.reducers[r].exec].contains(&r) {
            w.start_reducer(r);
        }
    }
    let mut completion = 0.0;
    while let Some(ev) = w.q.pop() {
        w.handle(ev);
        if w.done == n {
            completion = w.q.now();
            break;
        }
    }
    FetchOutcome {
        completion_s: completion,
        peak_buffered: w.peak,
        mean_buffered: if completion > 0.0 {
            w.area / completion
        } else {
            0.0
        },
        requests: w.reqs.len() as u64,
    }
}

/// Runs the experiment and prints the table.
pub fn run(a: &FetchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.executors >= 2, "need at least 2 executors");
    println!(
        "paper: adaptive up to 40% faster (groupByKey; 20% sortByKey), peak buffer 2x (10 MB) \
         to 3x (unlimited) lower; both get slower as the limit grows"
    );
    println!(
        "adaptive-fetch: {} executors ({} per node) x {} reducers x {} waves, {:.0} MB per \
         reducer, {} blocks per source, increment = {:.0}% of limit, K = {}, shrink {}, grow {}, \
         seed {}",
        a.executors,
        a.executors_per_node,
        a.reducers_per_executor,
        a.waves,
        a.mb_per_reducer,
        a.blocks_per_source,
        a.increment_fraction * 100.0,
        a.wait_window,
        if a.quiet_shrink > 0 {
            format!("after {} waitless blocks", a.quiet_shrink)
        } else {
            "as the paper".to_string()
        },
        if a.waits_to_grow > 1 {
            format!("at {} waits in a row", a.waits_to_grow)
        } else {
            "as the paper".to_string()
        },
        a.seed
    );
    println!(
        "{:>8} {:>10} {:>10} {:>9} {:>12} {:>12} {:>7} {:>10} {:>10}   paper (groupByKey)",
        "limit",
        "default s",
        "adaptive s",
        "speed-up",
        "default pk",
        "adaptive pk",
        "peak x",
        "dflt mean",
        "adpt mean"
    );
    for &l in &a.limits_mb {
        let d = simulate(a, Strategy::Static, l);
        let ad = simulate(a, Strategy::Adaptive, l);
        let speed = (d.completion_s - ad.completion_s) / d.completion_s * 100.0;
        let paper = if l <= 10.0 {
            "faster, up to 40%; 2x less memory"
        } else if l >= 200.0 {
            "gap smallest; 3x less memory"
        } else {
            "faster (up to 40%); less memory"
        };
        let gb = 1024.0 * MB;
        println!(
            "{:>6}MB {:>10.2} {:>10.2} {:>8.1}% {:>9.2} GB {:>9.2} GB {:>6.2}x {:>7.2} GB {:>7.2} GB   {}",
            l,
            d.completion_s,
            ad.completion_s,
            speed,
            d.peak_buffered / gb,
            ad.peak_buffered / gb,
            d.peak_buffered / ad.peak_buffered.max(1.0),
            d.mean_buffered / gb,
            ad.mean_buffered / gb,
            paper
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> FetchArgs {
        FetchArgs {
            executors: 6,
            executors_per_node: 3,
            reducers_per_executor: 2,
            waves: 2,
            mb_per_reducer: 20.0,
            blocks_per_source: 4,
            limits_mb: vec![4.0],
            increment_fraction: 0.2,
            wait_window: 8,
            node_gbps: 10.0,
            local_speedup: 4.0,
            slow_fraction: 0.2,
            slow_factor: 0.5,
            consume_mbps: 60.0,
            consume_sigma: 0.3,
            gc_knee_gb: 0.0,
            quiet_shrink: 0,
            waits_to_grow: 1,
            seed: 7,
        }
    }

    #[test]
    fn deterministic_and_complete() {
        let a = small();
        for s in [Strategy::Static, Strategy::Adaptive] {
            let x = simulate(&a, s, 4.0);
            let y = simulate(&a, s, 4.0);
            assert_eq!(x, y);
            assert!(x.completion_s > 0.0);
            // Buffered bytes never exceed the sum of hard limits plus one oversize block each.
            let bound = 12.0 * (4.0 * MB + 20.0 * MB / 20.0);
            assert!(x.peak_buffered <= bound, "{x:?}");
        }
    }

    #[test]
    fn completion_is_bounded_below_by_consumption() {
        let a = small();
        let x = simulate(&a, Strategy::Adaptive, 4.0);
        // The fastest reducer still needs 20 MB at a rate that is rarely above 3x median.
        assert!(x.completion_s >= 20.0 / (60.0 * 3.0));
    }
}
