//! `crossdock sim`: reproduces the papers' experiments on one machine by driving the
//! policies of `crossdock-policy` in seeded, deterministic discrete-event simulations.
//!
//! One sub-command per experiment; each prints the paper's number beside ours. Every
//! experiment takes `--seed`; the same seed gives the same output.

use clap::{Args, Subcommand};

pub mod events;
pub mod fcs;
pub mod fetch;
pub mod predict;
pub mod presched;
pub mod rng;
pub mod skew;

/// Arguments of `crossdock sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// The experiment to run.
    #[command(subcommand)]
    pub experiment: Experiment,
}

/// The experiments, one per paper result.
#[derive(Debug, Subcommand)]
pub enum Experiment {
    /// Adaptive vs static fetch planning, 247 executors x 8 reducers (Nicolae et al. 2017).
    AdaptiveFetch(fetch::FetchArgs),
    /// FIFO, random, MinHeap and MinHeap + swap pre-scheduling, 1-10 rounds (SCache, Fig. 4).
    Prescheduling(presched::PreschedArgs),
    /// Partition-size prediction: sampling vs linear extrapolation (SCache, Fig. 7).
    Prediction(predict::PredictArgs),
    /// CSA, DSA and DSA with SMS for Zipf alpha 0-3 under a memory cap (Daikoku et al., Fig. 3).
    Skew(skew::SkewArgs),
    /// FCS vs fair sharing vs FIFO on the dissertation's workload mixes (Wang 2014, ch. 4).
    Fcs(fcs::FcsArgs),
}

/// Runs the simulator sub-command.
pub fn run(args: SimArgs) -> anyhow::Result<()> {
    match args.experiment {
        Experiment::AdaptiveFetch(a) => fetch::run(&a),
        Experiment::Prescheduling(a) => presched::run(&a),
        Experiment::Prediction(a) => predict::run(&a),
        Experiment::Skew(a) => skew::run(&a),
        Experiment::Fcs(a) => fcs::run(&a),
    }
}
