//! `crossdock bench alltoall`: the skew-tolerance experiment of the skew-aware
//! meta-shuffle paper (004, §5.1, Fig. 3) on the live service.
//!
//! P pushers exchange the paper's DummyRDD all-to-all (each pusher's data cut into
//! 4 KiB-sized chunks, each sent to destination partition `x` with weight
//! `1 / (x + 1)^α`; the same generator as `crossdock sim skew`) through P real
//! `crossdock worker` processes, each with no disk (`--memory-only`, as the paper's HPC
//! nodes) and a push credit of `--limit-share` of all the data: the paper's per-node
//! job limit. What overflows a worker is refused ("memory exceeded"), never an OOM kill.
//! The three methods run on the same service, told apart by their buffer rules:
//!
//! - **CSA**: pairwise steps (pusher `i` sends to worker `i + k` at step `k`, or `i ^ k`
//!   for a power of two), every batch of a step acknowledged and every pusher done with
//!   it before the next step starts; no delegation (splits off).
//! - **DSA**: the same destination order, unsynchronized; the exchange ends when every
//!   pusher has committed (the paper's one global barrier); no delegation.
//! - **SMS**: as DSA, with the workers delegating the overflow of a hot partition to peers
//!   with free memory (the memory-pressure split, `policy/split.rs`) and pushers following
//!   the push answers.
//!
//! After a completed exchange every partition is read back from all its slots and every
//! byte checked. Reported per α: the largest demand on one worker (bytes destined to the
//! partitions placed on it), per method completion or the precise failure, the exchange
//! time (median of `--runs`), the largest receive load (bytes held by one worker), splits
//! and delegated bytes, and each worker's peak RSS against its budget; beside them the
//! simulator's verdict on the same data and the paper's.
//!
//! Parts: `bench::procs` starts the coordinator and workers, [`exchange`] runs one exchange and
//! reads it back, [`report`] prints the table.

mod exchange;
mod report;

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, ValueEnum};
use crossdock_sim::skew::SkewArgs;

use super::Pool;
use crate::bench::procs::Procs;
use crate::config::{human_bytes, parse_size};
use crossdock_server::worker::config::memory_for_push_credit;
use exchange::one_run;
use report::report;

/// Arguments of `crossdock bench alltoall` (defaults: the paper's Exp. 1 scaled to one host).
#[derive(Args, Clone)]
pub struct AllToAllArgs {
    /// Processes: P pushers and P workers (each its own `crossdock worker` process).
    #[arg(long, default_value_t = 8)]
    pub processes: usize,
    /// Data each pusher generates (the paper: 1 GiB; scaled down).
    #[arg(long, default_value = "32MiB")]
    pub bytes_per_process: String,
    /// Destination partitions per process (the paper's 32-MiB partitions of 1 GiB: 32).
    #[arg(long, default_value_t = 32)]
    pub partitions_per_process: usize,
    /// Zipf exponents to run.
    #[arg(long, value_delimiter = ',', default_values_t = vec![0.0, 1.0, 2.0, 2.5, 2.6, 2.7, 2.8, 3.0])]
    pub alphas: Vec<f64>,
    /// Methods to run.
    #[arg(long, value_delimiter = ',', value_enum, default_values = ["csa", "dsa", "sms"])]
    pub algo: Vec<Algo>,
    /// Each worker's push credit as a share of all the data: the paper's job limit
    /// (82 GiB per node), scaled so that, as there, CSA and DSA first overflow at
    /// α ≈ 2.7 with 8 processes.
    #[arg(long, default_value_t = 0.78)]
    pub limit_share: f64,
    /// Largest batch a pusher sends.
    #[arg(long, default_value = "256KiB")]
    pub batch_size: String,
    /// Unacknowledged batches each pusher may have in flight.
    #[arg(long, default_value_t = 8)]
    pub window: usize,
    /// Repeated runs of each point; times are medians.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seed of the data generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// End with one line of JSON holding the results.
    #[arg(long)]
    pub json: bool,
}

/// A shuffle method of the paper, emulated by its buffer rules on the live service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum Algo {
    Csa,
    Dsa,
    Sms,
}

impl Algo {
    fn name(self) -> &'static str {
        match self {
            Algo::Csa => "CSA",
            Algo::Dsa => "DSA",
            Algo::Sms => "SMS",
        }
    }
}

/// The data of one α: `sizes[pusher][partition]` bytes.
pub type Sizes = Arc<Vec<Vec<u64>>>;

/// What one run of one method did.
pub struct RunOutcome {
    /// `None`: completed and every byte read back; else why not.
    pub failure: Option<String>,
    /// From the first push to the last commit (or the failure).
    pub exchange_secs: f64,
    /// Reading every slot back and checking it.
    pub read_secs: f64,
    /// Bytes held by each worker when the exchange ended (acknowledged pushes).
    pub loads: Vec<u64>,
    /// Splits made (the overflow delegated to peers) and the bytes they took.
    pub splits: u32,
    pub delegated: u64,
    /// The most bytes destined to the partitions placed on one worker.
    pub demand: u64,
}

/// Runs every method at every α, `--runs` times each, and prints the table.
pub async fn run(a: AllToAllArgs) -> Result<()> {
    let p = a.processes;
    let per_process = parse_size(&a.bytes_per_process)?;
    let batch = parse_size(&a.batch_size)?;
    if p < 2 || a.partitions_per_process == 0 || batch == 0 || a.runs == 0 || a.window == 0 {
        bail!("--processes must be at least 2; --partitions-per-process, --batch-size, --window and --runs positive");
    }
    if !(a.limit_share > 0.0 && a.limit_share <= 1.0) {
        bail!("--limit-share must be in (0, 1]");
    }
    let parts = p * a.partitions_per_process;
    let total = per_process * p as u64;
    let limit = (total as f64 * a.limit_share) as u64;
    let memory = memory_for_push_credit(limit);
    if memory < (16 << 20) {
        bail!(
            "each worker's push credit would be {} ({} of the data), under the 12 MiB a 16 MiB \
             worker has: give more --bytes-per-process or a larger --limit-share",
            human_bytes(limit),
            a.limit_share
        );
    }
    let skew = sim_args(&a, per_process, limit)?;
    println!(
        "alltoall: {p} processes × {} ({} in all), {parts} partitions, DummyRDD chunks of {}; \
         each worker memory-only with {} of push credit ({:.2} of the data; --memory {}), \
         batches of {}, {} runs",
        human_bytes(per_process),
        human_bytes(total),
        human_bytes(per_process / a.partitions_per_process as u64 / parts as u64),
        human_bytes(limit),
        a.limit_share,
        human_bytes(memory),
        human_bytes(batch),
        a.runs
    );
    let pool = Arc::new(Pool::new(batch as usize));
    let data: Vec<(f64, Sizes)> = a
        .alphas
        .iter()
        .map(|&alpha| (alpha, Arc::new(sizes_of(&skew, alpha))))
        .collect();
    // points[alpha index][method] = outcomes of its runs.
    let mut points: Vec<HashMap<Algo, Vec<RunOutcome>>> =
        data.iter().map(|_| HashMap::new()).collect();
    let mut rss: HashMap<Algo, (u64, u64)> = HashMap::new();
    for &algo in &a.algo {
        let cluster = Procs::start(p, memory, algo == Algo::Sms)?;
        cluster.wait_for_workers(p, parts as u32).await?;
        for (i, (alpha, sizes)) in data.iter().enumerate() {
            for run in 0..a.runs {
                let o = one_run(&cluster, &a, algo, *alpha, sizes, &pool, batch, run).await?;
                println!(
                    "{} α {alpha:.1} run {}: {}",
                    algo.name(),
                    run + 1,
                    match &o.failure {
                        None => format!(
                            "completed in {:.2} s (read back and checked in {:.2} s), largest load {}, {} splits",
                            o.exchange_secs,
                            o.read_secs,
                            human_bytes(o.loads.iter().copied().max().unwrap_or(0)),
                            o.splits
                        ),
                        Some(why) => format!("failed after {:.2} s: {why}", o.exchange_secs),
                    }
                );
                points[i].entry(algo).or_default().push(o);
            }
        }
        rss.insert(algo, cluster.peak_rss(memory).await?);
    }
    let json = report(&a, &skew, &data, &points, &rss, limit, memory);
    if a.json {
        println!("{json}");
    }
    Ok(())
}

/// The simulator's arguments for the same data and caps: its SMS cap is the live
/// workers' delegation threshold (3/4 of the push credit: `policy::split::pressed`), its
/// job limit the credit.
fn sim_args(a: &AllToAllArgs, per_process: u64, limit: u64) -> Result<SkewArgs> {
    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        skew: SkewArgs,
    }
    const GIB: f64 = (1u64 << 30) as f64;
    let partition_mib = per_process as f64 / a.partitions_per_process as f64 / (1 << 20) as f64;
    let args = [
        "sim".to_string(),
        format!("--processes={}", a.processes),
        format!("--gib-per-process={}", per_process as f64 / GIB),
        format!("--partition-mib={partition_mib}"),
        format!("--max-size-gib={}", limit as f64 * 3.0 / 4.0 / GIB),
        format!("--limit-gib={}", limit as f64 / GIB),
        format!("--seed={}", a.seed),
    ];
    Ok(Wrap::try_parse_from(args)
        .context("the simulator's arguments")?
        .skew)
}

/// The DummyRDD data of `alpha`, in whole bytes.
fn sizes_of(skew: &SkewArgs, alpha: f64) -> Vec<Vec<u64>> {
    crossdock_sim::skew::generate(skew, alpha)
        .into_iter()
        .map(|row| row.into_iter().map(|b| b.round() as u64).collect())
        .collect()
}

/// `sizes` (columns: Zipf ranks) with its columns moved to partition numbers: rank `r` to
/// the next unused partition of worker `r mod P`, or of the next worker with one left.
pub fn by_rank(sizes: &Sizes, by_worker: &[Vec<u32>]) -> Sizes {
    let p = by_worker.len();
    let mut next = vec![0usize; p];
    let parts: usize = by_worker.iter().map(Vec::len).sum();
    let mut partition_of_rank = Vec::with_capacity(parts);
    for r in 0..parts {
        let w = (0..p)
            .map(|k| (r + k) % p)
            .find(|&w| next[w] < by_worker[w].len())
            .expect("as many partitions as ranks");
        partition_of_rank.push(by_worker[w][next[w]]);
        next[w] += 1;
    }
    Arc::new(
        sizes
            .iter()
            .map(|row| {
                let mut out = vec![0u64; parts];
                for (r, &b) in row.iter().enumerate() {
                    out[partition_of_rank[r] as usize] = b;
                }
                out
            })
            .collect(),
    )
}
