//! The table of `crossdock bench alltoall`, beside the simulator and the paper, and its JSON.

use std::collections::HashMap;

use crossdock_sim::skew::SkewArgs;

use super::{Algo, AllToAllArgs, RunOutcome, Sizes};
use crate::bench::median;
use crate::config::human_bytes;

/// Prints the table; returns it as JSON.
pub fn report(
    a: &AllToAllArgs,
    skew: &SkewArgs,
    data: &[(f64, Sizes)],
    points: &[HashMap<Algo, Vec<RunOutcome>>],
    rss: &HashMap<Algo, (u64, u64)>,
    limit: u64,
    memory: u64,
) -> serde_json::Value {
    let total: u64 = data
        .first()
        .map(|(_, s)| s.iter().flatten().sum())
        .unwrap_or(0);
    println!(
        "\n{:>4} | {:>22} | {:<44} | {:<12} | paper (128 nodes)",
        "α", "largest demand (share)", "live: outcome, exchange time, largest load", "sim C/D/S"
    );
    let mut rows = Vec::new();
    for ((alpha, _), by_algo) in data.iter().zip(points) {
        let sim = crossdock_sim::skew::point(skew, *alpha);
        let demand = by_algo
            .values()
            .flatten()
            .map(|r| r.demand)
            .max()
            .unwrap_or(0);
        let mut cells = Vec::new();
        let mut methods = serde_json::Map::new();
        for &algo in &a.algo {
            let runs = &by_algo[&algo];
            let ok = runs.iter().filter(|r| r.failure.is_none()).count();
            let time = median(runs.iter().map(|r| r.exchange_secs).collect());
            let load = runs
                .iter()
                .map(|r| r.loads.iter().copied().max().unwrap_or(0))
                .max()
                .unwrap_or(0);
            let splits = runs.iter().map(|r| r.splits).max().unwrap_or(0);
            let delegated = runs.iter().map(|r| r.delegated).max().unwrap_or(0);
            let failure = runs.iter().find_map(|r| r.failure.clone());
            cells.push(if ok == runs.len() {
                let extra = if algo == Algo::Sms && splits > 0 {
                    format!(", {splits} splits, {} delegated", human_bytes(delegated))
                } else {
                    String::new()
                };
                format!(
                    "{} ok {time:.2} s, {}{extra}",
                    algo.name(),
                    human_bytes(load)
                )
            } else {
                let short = failure
                    .as_deref()
                    .map(|f| f.split(" (").next().unwrap_or(f).to_string())
                    .unwrap_or_default();
                format!(
                    "{} FAILED {}/{} ({short})",
                    algo.name(),
                    runs.len() - ok,
                    runs.len()
                )
            });
            methods.insert(
                algo.name().to_lowercase(),
                serde_json::json!({
                    "runs": runs.len(),
                    "completed": ok,
                    "exchange_secs_median": time,
                    "read_secs_median": median(runs.iter().map(|r| r.read_secs).collect()),
                    "largest_load_bytes": load,
                    "splits": splits,
                    "delegated_bytes": delegated,
                    "failure": failure,
                }),
            );
        }
        let verdict = |o: &crossdock_sim::skew::MethodOutcome| if o.ok { "ok" } else { "fail" };
        let sim_cell = sim
            .methods
            .iter()
            .map(verdict)
            .collect::<Vec<_>>()
            .join("/");
        let paper = if *alpha >= 2.7 {
            "CSA, DSA killed; SMS completes"
        } else if *alpha >= 2.6 {
            "all complete; SMS delegates"
        } else {
            "all complete"
        };
        for (k, cell) in cells.iter().enumerate() {
            if k == 0 {
                println!(
                    "{alpha:>4.1} | {:>14} ({:.3}) | {cell:<44} | {sim_cell:<12} | {paper}",
                    human_bytes(demand),
                    demand as f64 / total.max(1) as f64
                );
            } else {
                println!("{:>4} | {:>22} | {cell:<44} |", "", "");
            }
        }
        rows.push(serde_json::json!({
            "alpha": alpha,
            "largest_demand_bytes": demand,
            "largest_demand_share": demand as f64 / total.max(1) as f64,
            "methods": methods,
            "sim": {"csa": sim.methods[0].ok, "dsa": sim.methods[1].ok, "sms": sim.methods[2].ok,
                    "straggler_bytes": sim.straggler},
            "paper": paper,
        }));
    }
    let mut rss_json = serde_json::Map::new();
    for &algo in &a.algo {
        let (peak, budget) = rss[&algo];
        let within = peak <= budget + (64 << 20);
        println!(
            "{} workers: peak RSS {} against a budget of {} (+64 MiB): {}",
            algo.name(),
            human_bytes(peak),
            human_bytes(budget),
            if within { "within" } else { "OVER" }
        );
        rss_json.insert(
            algo.name().to_lowercase(),
            serde_json::json!({"peak_rss_bytes": peak, "budget_bytes": budget, "within": within}),
        );
    }
    serde_json::json!({
        "processes": a.processes,
        "bytes": total,
        "partitions": a.processes * a.partitions_per_process,
        "push_credit_bytes": limit,
        "worker_memory_bytes": memory,
        "limit_share": a.limit_share,
        "runs": a.runs,
        "seed": a.seed,
        "points": rows,
        "worker_rss": rss_json,
    })
}
