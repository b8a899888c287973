//! `crossdock sim`: reproduces the papers' experiments on one machine by driving the
//! policies of `crossdock-policy` in a seeded discrete-event simulation.

use clap::Args;

/// Arguments of `crossdock sim`.
#[derive(Debug, Args)]
pub struct SimArgs {}

/// Runs the simulator sub-command.
pub fn run(_args: SimArgs) -> anyhow::Result<()> {
    anyhow::bail!("crossdock sim: no experiment is implemented yet")
}
