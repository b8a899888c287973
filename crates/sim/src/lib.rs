//! `crossdock sim`: reproduces the papers' experiments on one machine by driving the
//! policies of `crossdock-policy` in seeded, deterministic discrete-event simulations.
//!
//! One sub-command per experiment; each prints the paper's number beside ours. Every
//! experiment takes `--seed`; the same seed gives the same output.

use clap::{Args, Subcommand};

pub mod adaptive_fetch;
pub mod events;
pub mod fair_completion;
pub mod placement;
pub mod rng;
pub mod size_prediction;
pub mod skew;

/// Arguments of `crossdock sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// The experiment to run.
    #[command(subcommand)]
    pub experiment: Experiment,
}

/// The experiments, one per paper result. Each is named like the policy module it
/// drives (`crossdock_policy::<name>`); the older names stay as aliases.
#[derive(Debug, Subcommand)]
pub enum Experiment {
    /// Adaptive vs static fetch planning, 247 executors x 8 reducers (Nicolae et al. 2017).
    AdaptiveFetch(adaptive_fetch::FetchArgs),
    /// FIFO, random, MinHeap and MinHeap + swap pre-scheduling, 1-10 rounds (SCache, Fig. 4).
    #[command(alias = "prescheduling")]
    Placement(placement::PreschedArgs),
    /// Partition-size prediction: sampling vs linear extrapolation (SCache, Fig. 7).
    #[command(alias = "prediction")]
    SizePrediction(size_prediction::PredictArgs),
    /// CSA, DSA and DSA with SMS for Zipf alpha 0-3 under a memory cap (Daikoku et al., Fig. 3).
    Skew(skew::SkewArgs),
    /// FCS vs fair sharing vs FIFO on the dissertation's workload mixes (Wang 2014, ch. 4).
    #[command(alias = "fcs")]
    FairCompletion(fair_completion::FcsArgs),
}

/// Runs the simulator sub-command.
pub fn run(args: SimArgs) -> anyhow::Result<()> {
    match args.experiment {
        Experiment::AdaptiveFetch(a) => adaptive_fetch::run(&a),
        Experiment::Placement(a) => placement::run(&a),
        Experiment::SizePrediction(a) => size_prediction::run(&a),
        Experiment::Skew(a) => skew::run(&a),
        Experiment::FairCompletion(a) => fair_completion::run(&a),
    }
}
