//! The experiment's settings: the dissertation's workload mixes as job specifications,
//! the reduce-slot policies compared, and the command-line arguments.

use clap::{Args, ValueEnum};

use crate::rng::Rng;

/// The dissertation's workload mixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Table 4.1 (171 jobs).
    MapHeavy,
    /// Table 4.3 (171 jobs).
    ReduceHeavy,
    /// Table 4.5, Facebook column (100 jobs).
    Facebook,
    /// Table 4.5, Bing column (100 jobs).
    Bing,
}

/// Reduce-slot policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// FIFO queue (HCS-like).
    Fifo,
    /// Greedy fair sharing (HFS).
    Fair,
    /// Fair Completion Scheduler.
    Fcs,
}

/// Arguments of `crossdock sim fair-completion`.
#[derive(Debug, Clone, Args)]
pub struct FcsArgs {
    /// Workloads to run (default: all four).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub workloads: Vec<Workload>,
    /// Worker nodes (46 minus the JobTracker).
    #[arg(long, default_value_t = 45)]
    pub nodes: usize,
    /// Map slots per node.
    #[arg(long, default_value_t = 8)]
    pub map_slots: usize,
    /// Reduce slots per node.
    #[arg(long, default_value_t = 4)]
    pub reduce_slots: usize,
    /// Mean inter-arrival time, s.
    #[arg(long, default_value_t = 30.0)]
    pub mean_arrival: f64,
    /// Median map task time, s.
    #[arg(long, default_value_t = 8.0)]
    pub map_secs: f64,
    /// Reduce processing rate per task, MB/s.
    #[arg(long, default_value_t = 64.0)]
    pub reduce_mbps: f64,
    /// Network rate for copying and re-fetching, MB/s per task.
    #[arg(long, default_value_t = 100.0)]
    pub net_mbps: f64,
    /// FCS migration delay D.
    #[arg(long, default_value_t = 60)]
    pub migration_delay: u32,
    /// Independent runs (seeds `seed`, `seed + 1`, ...) averaged per row.
    #[arg(long, default_value_t = 10)]
    pub runs: u64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// One job's static description.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// Group number in the table (1-based).
    pub group: usize,
    /// Arrival time, s.
    pub arrival: f64,
    /// Map task durations.
    pub maps: Vec<f64>,
    /// Number of reduce tasks.
    pub reduces: usize,
    /// Reduce processing time per task, s.
    pub reduce_secs: f64,
    /// Copy time after the last map, s.
    pub tail_secs: f64,
    /// Full re-fetch time of one task's data, s.
    pub refetch_secs: f64,
}

fn table(w: Workload) -> Vec<(usize, usize, usize, bool)> {
    // (maps, reduces, jobs, reduce-heavy benchmark)
    match w {
        Workload::MapHeavy => vec![
            (10, 1, 50, false),
            (20, 2, 40, false),
            (50, 4, 30, false),
            (100, 8, 20, false),
            (500, 10, 10, false),
            (1000, 20, 8, false),
            (5000, 20, 6, false),
            (10000, 60, 4, false),
            (15000, 120, 2, false),
            (20000, 180, 1, false),
        ],
        Workload::ReduceHeavy => vec![
            (10, 2, 50, true),
            (20, 4, 40, true),
            (50, 8, 30, true),
            (100, 16, 20, true),
            (500, 32, 10, true),
            (1000, 64, 8, true),
            (5000, 128, 6, true),
            (10000, 256, 4, true),
            (15000, 512, 2, true),
            (20000, 1024, 1, true),
        ],
        Workload::Facebook | Workload::Bing => {
            let fb = w == Workload::Facebook;
            vec![
                (8, 1, if fb { 28 } else { 20 }, false),
                (8, 2, if fb { 28 } else { 12 }, false),
                (8, 2, if fb { 29 } else { 11 }, false),
                (30, 16, if fb { 2 } else { 4 }, true),
                (30, 20, if fb { 2 } else { 4 }, false),
                (110, 40, if fb { 4 } else { 12 }, true),
                (100, 50, if fb { 4 } else { 12 }, true),
                (248, 128, if fb { 1 } else { 12 }, true),
                (300, 180, if fb { 1 } else { 11 }, false),
                (3600, 256, if fb { 1 } else { 2 }, true),
            ]
        }
    }
}

/// Draws the jobs of a workload: shuffled group order, Poisson arrivals.
pub fn jobs(a: &FcsArgs, w: Workload) -> Vec<JobSpec> {
    let mut rng = Rng::derive(a.seed, 100 + w as u64);
    let mut list: Vec<(usize, usize, usize, bool)> = Vec::new();
    for (g, &(maps, reduces, count, heavy)) in table(w).iter().enumerate() {
        for _ in 0..count {
            list.push((g + 1, maps, reduces, heavy));
        }
    }
    for i in (1..list.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        list.swap(i, j);
    }
    let mut t = 0.0;
    list.into_iter()
        .map(|(group, maps, reduces, heavy)| {
            t += rng.exp(a.mean_arrival);
            let ratio = if heavy { 1.0 + 2.0 * rng.f64() } else { 0.05 };
            let share_mb = maps as f64 * 128.0 * ratio / reduces as f64;
            JobSpec {
                group,
                arrival: t,
                maps: (0..maps).map(|_| rng.lognormal(a.map_secs, 0.3)).collect(),
                reduces,
                reduce_secs: 1.0 + share_mb / a.reduce_mbps,
                tail_secs: 0.5 + share_mb / a.net_mbps / 4.0,
                refetch_secs: share_mb / a.net_mbps,
            }
        })
        .collect()
}
