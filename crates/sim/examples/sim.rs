//! Manual runner: `cargo run --release -p crossdock-sim --example sim -- <experiment> ...`.

use clap::Parser;
use crossdock_sim::SimArgs;

#[derive(Debug, Parser)]
#[command(name = "sim", about = "Crossdock's paper-reproduction simulator")]
struct Cli {
    #[command(flatten)]
    sim: SimArgs,
}

fn main() -> anyhow::Result<()> {
    crossdock_sim::run(Cli::parse().sim)
}
