//! `crossdock bench placement`: SCache's placement experiment (paper 003, §3.2.3, Fig. 4;
//! issue 13) on the live service: how evenly a skewed shuffle's bytes end up over the
//! hosts with the coordinator's placement at registration alone (contiguous blocks, no
//! size known) and with its re-placement once the sizes are predicted (`--rebalance
//! true`: partitions leave a host above 1.1× MinHeap's largest load, the bytes pushed
//! before the decision staying where they are).
//!
//! H `crossdock worker` processes, labelled as hosts `h0`…, and a coordinator; one shuffle
//! of M maps × R partitions whose partition sizes follow Zipf(α) over a seeded random
//! order of the partitions (so the hot ones fall anywhere, not in one block), every map
//! writing the same share of each. The maps push one after the other (batches following
//! the workers' redirects, as the engine clients do) and commit; then every partition is
//! read back from all its slots and every byte checked. Reported per mode (median of
//! `--runs`, the modes alternating run by run): the largest host's bytes over the mean
//! (1.0 is perfect balance), the bytes a reduce task running on its partition's host (the
//! one holding most of it, as the Spark client chooses) reads from another host, the
//! partitions continued elsewhere, and the push time. Beside them, what the pure policies
//! would give on the same final sizes with nothing run: SCache's FIFO (reduce `i` on host
//! `i mod H`) and MinHeap from scratch, the bounds the paper compares.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use crossdock_client::{
    CoordinatorClient, FetchRange, Keyring, PartitionReader, PendingPush, ShuffleStatus,
    WorkerClient,
};
use crossdock_policy::placement::{min_heap_schedule, ReduceInfo};
use crossdock_policy::size_prediction::maps_to_observe;
use crossdock_proto::{checksum, AttemptId, CommitStatus, PushHeader};
use crossdock_server::coordinator::config::DEFAULT_PREDICTION_THRESHOLD;

use super::procs::Procs;
use super::Pool;
use crate::config::{human_bytes, parse_size};

/// Arguments of `crossdock bench placement`.
#[derive(Args, Clone)]
pub struct PlacementArgs {
    /// Hosts, one `crossdock worker` process each (labelled `h0`, `h1`, …).
    #[arg(long, default_value_t = 3)]
    pub hosts: usize,
    /// Map tasks; the prediction comes with the commit of 10% of them.
    #[arg(long, default_value_t = 20)]
    pub maps: u32,
    /// Reduce partitions.
    #[arg(long, default_value_t = 48)]
    pub partitions: u32,
    /// Bytes of the whole shuffle.
    #[arg(long, default_value = "192MiB")]
    pub bytes: String,
    /// Zipf exponent of the partition sizes (the paper's skewed shuffle: 1.3).
    #[arg(long, default_value_t = 1.3)]
    pub alpha: f64,
    /// Largest batch a map pushes.
    #[arg(long, default_value = "256KiB")]
    pub batch_size: String,
    /// Runs of each mode; figures are medians.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seed of the order of the partitions' sizes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// End with one line of JSON holding the results.
    #[arg(long)]
    pub json: bool,
}

/// What one run of one mode left.
struct Outcome {
    /// Bytes on each host, over all slots.
    loads: Vec<u64>,
    /// Bytes read across hosts by reduce tasks on their partitions' hosts.
    remote: u64,
    /// Partitions with bytes in more than one slot (continued on another host).
    moved: u32,
    push_secs: f64,
}

/// Unacknowledged batches a map keeps in flight.
const WINDOW: usize = 16;

/// Fewest maps whose prediction (at 10% of them) rests on two.
const MIN_MAPS: u32 = 11;

/// How long the split slots must stay as they are, after the predicting commit, for the
/// re-placement to count as carried out.
const SETTLED: Duration = Duration::from_millis(1000);

pub async fn run(a: PlacementArgs) -> Result<()> {
    let total = parse_size(&a.bytes)?;
    let batch = parse_size(&a.batch_size)?;
    if a.hosts < 2 || a.runs == 0 || batch == 0 {
        bail!("--hosts must be at least 2; --runs and --batch-size positive");
    }
    if a.partitions < a.hosts as u32 {
        bail!("--partitions must be at least --hosts: every host gets partitions");
    }
    if a.maps < MIN_MAPS {
        bail!("--maps must be at least {MIN_MAPS}: the coordinator re-places only on a prediction from two maps or more, made at 10% of them");
    }
    if a.alpha.is_nan() || a.alpha < 0.0 {
        bail!("--alpha must be 0 or more");
    }
    let sizes = zipf_sizes(total, a.partitions as usize, a.alpha, a.seed);
    let pool = Pool::new(batch as usize);
    let mut results: BTreeMap<&str, Vec<Outcome>> = BTreeMap::new();
    for r in 0..a.runs {
        // Alternating which mode goes first, so that a drift of the machine's speed
        // falls on both.
        let order = if r % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for rebalance in order {
            let name = if rebalance { "re-placed" } else { "blocks" };
            let o = one_run(&a, &sizes, batch, &pool, rebalance)
                .await
                .with_context(|| format!("run {} of mode {name}", r + 1))?;
            eprintln!(
                "run {}: {name}: max/mean {:.2}, remote {:.1}%, {} partitions moved, push {:.2} s",
                r + 1,
                max_over_mean(&o.loads),
                100.0 * o.remote as f64 / total.max(1) as f64,
                o.moved,
                o.push_secs
            );
            results.entry(name).or_default().push(o);
        }
    }
    report(&a, total, &sizes, &results);
    Ok(())
}

/// Bytes per partition: `total` in proportion to `1 / (rank + 1)^alpha`, the ranks a
/// seeded shuffle of the partitions; rounding goes to the largest.
fn zipf_sizes(total: u64, parts: usize, alpha: f64, seed: u64) -> Vec<u64> {
    let mut rank: Vec<usize> = (0..parts).collect();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..parts).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        rank.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let weight: Vec<f64> = rank
        .iter()
        .map(|&k| 1.0 / ((k + 1) as f64).powf(alpha))
        .collect();
    let sum: f64 = weight.iter().sum();
    let mut sizes: Vec<u64> = weight
        .iter()
        .map(|w| (total as f64 * w / sum) as u64)
        .collect();
    let short = total - sizes.iter().sum::<u64>();
    let top = rank
        .iter()
        .position(|&k| k == 0)
        .expect("a partition of rank 0");
    sizes[top] += short;
    sizes
}

/// Bytes map `m` of `maps` writes to a partition of `size` bytes: an equal share, the
/// remainder to map 0.
fn share(size: u64, m: u32, maps: u32) -> u64 {
    size / maps as u64 + if m == 0 { size % maps as u64 } else { 0 }
}

async fn one_run(
    a: &PlacementArgs,
    sizes: &[u64],
    batch: u64,
    pool: &Pool,
    rebalance: bool,
) -> Result<Outcome> {
    let coordinator = ["--rebalance", if rebalance { "true" } else { "false" }].map(String::from);
    let cluster = Procs::launch("crossdock-placement-", &coordinator, a.hosts, |i| {
        let host = format!("h{i}");
        ["--host", &host, "--split-size", "off", "--memory", "512MiB"]
            .map(String::from)
            .to_vec()
    })?;
    cluster.wait_for_workers(a.hosts, a.partitions).await?;
    let keyring = Keyring::new();
    let coord = CoordinatorClient::connect(&cluster.coordinator, &keyring).await?;
    let app = format!("placement-{}", std::process::id());
    coord.register_app(&app, 600_000).await?;
    let placement = coord
        .register_shuffle(&app, 0, a.maps, a.partitions)
        .await?;
    // Where each partition's next batch goes: (slot, worker), moved on by redirects.
    let mut route: Vec<(u32, String)> = (0..a.partitions)
        .map(|p| (p, placement.worker_of(p).expect("placed").addr.clone()))
        .collect();
    let mut clients: HashMap<String, WorkerClient> = HashMap::new();
    // The commit that makes the prediction (the coordinator's default threshold).
    let predicting = maps_to_observe(a.maps as usize, DEFAULT_PREDICTION_THRESHOLD) as u32;
    let mut waited = Duration::ZERO;
    let started = Instant::now();
    for m in 0..a.maps {
        let mut per_slot: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
        let mut inflight: VecDeque<(u32, u32, String, u64, PendingPush)> = VecDeque::new();
        for p in 0..a.partitions {
            let mut left = share(sizes[p as usize], m, a.maps);
            let mut seq = 0u32;
            // A map's stream of a partition stays in the slot its first batch goes to, as
            // the engine clients' (`MapPusher`); a redirect serves the maps after it.
            let (slot, addr) = route[p as usize].clone();
            while left > 0 {
                let len = left.min(batch);
                if !clients.contains_key(&addr) {
                    clients.insert(addr.clone(), WorkerClient::connect(&addr, &keyring).await?);
                }
                let payload = pool.slice(m, p, seq, len as usize);
                let header = PushHeader {
                    app_id: app.clone(),
                    shuffle_id: 0,
                    partition: slot,
                    map_id: m,
                    attempt_id: AttemptId(0),
                    batch_seq: seq,
                    crc32c: checksum(payload),
                };
                let pending = clients[&addr].push(&header, payload).await?;
                inflight.push_back((p, slot, addr.clone(), len, pending));
                if inflight.len() >= WINDOW {
                    let f = inflight.pop_front().expect("non-empty");
                    settle(&clients, f, &mut route, &mut per_slot).await?;
                }
                left -= len;
                seq += 1;
            }
        }
        while let Some(f) = inflight.pop_front() {
            settle(&clients, f, &mut route, &mut per_slot).await?;
        }
        let stats = super::slot_stats(&per_slot);
        match coord.commit_map(&app, 0, m, AttemptId(0), stats).await? {
            (CommitStatus::Committed, _) => {}
            (other, _) => bail!("map {m}'s commit answered {other:?}"),
        }
        if rebalance && m + 1 == predicting {
            waited = settle_moves(&coord, &app).await?;
        }
    }
    let push_secs = (started.elapsed() - waited).as_secs_f64();
    let status = coord.shuffle_status(&app, 0).await?;
    for p in 0..a.partitions {
        check_partition(&status, &keyring, &app, pool, sizes, p).await?;
    }
    let outcome = loads(&status, a.hosts, push_secs)?;
    coord.unregister_app(&app).await?;
    Ok(outcome)
}

/// Waits, after the commit that made the prediction, until the re-placement it started in
/// the coordinator has been carried out: until the shuffle's split slots have stayed as
/// they are for [`SETTLED`] (at most 20 s). Real maps take far longer than the decision,
/// so the next maps start after it; here a map takes a millisecond, and without the wait
/// the measurement would depend on which map the background decision happens to meet.
/// Returns the time waited, which is not push time.
async fn settle_moves(coord: &CoordinatorClient, app: &str) -> Result<Duration> {
    let began = Instant::now();
    let (mut splits, mut since) = (usize::MAX, Instant::now());
    loop {
        let now = coord.shuffle_status(app, 0).await?.split_parents.len();
        if now != splits {
            (splits, since) = (now, Instant::now());
        } else if since.elapsed() >= SETTLED {
            return Ok(began.elapsed());
        }
        if began.elapsed() > Duration::from_secs(20) {
            bail!("the re-placement was still making splits after 20 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits for one push's acknowledgement, counts it in its slot and follows a redirect.
async fn settle(
    clients: &HashMap<String, WorkerClient>,
    (p, slot, addr, len, pending): (u32, u32, String, u64, PendingPush),
    route: &mut [(u32, String)],
    per_slot: &mut BTreeMap<u32, (u64, u64)>,
) -> Result<()> {
    let redirect = clients[&addr].finish_push(pending).await?;
    let e = per_slot.entry(slot).or_default();
    e.0 += len;
    e.1 += 1;
    // A late answer of an earlier slot points at a split already passed.
    if let Some(r) = redirect.filter(|_| route[p as usize].0 == slot) {
        route[p as usize] = (r.slot, r.addr);
    }
    Ok(())
}

/// Reads partition `p` from all its slots and checks every byte of every map.
async fn check_partition(
    status: &ShuffleStatus,
    keyring: &Keyring,
    app: &str,
    pool: &Pool,
    sizes: &[u64],
    p: u32,
) -> Result<()> {
    let maps = status.num_maps;
    let mut seen = HashSet::new();
    let mut got = vec![0u64; maps as usize];
    for slot in status.slots_of(p) {
        let mut in_slot = 0u64;
        let addr = &status.placement.worker_of(slot).expect("placed").addr;
        let range = FetchRange {
            app_id: app.to_string(),
            shuffle_id: 0,
            partition: slot,
            start_map: 0,
            end_map: maps,
        };
        let mut reader = PartitionReader::new(addr, range, keyring);
        while let Some(b) = reader.next_batch().await? {
            if b.map_id >= maps || b.payload.len() > pool.batch() {
                bail!(
                    "partition {p}: slot {slot} gave a batch of map {} and {} bytes",
                    b.map_id,
                    b.payload.len()
                );
            }
            let want = pool.slice(b.map_id, p, b.batch_seq, b.payload.len());
            if b.payload[..] != want[..] || !seen.insert((b.map_id, b.batch_seq)) {
                bail!(
                    "partition {p}: batch (map {}, seq {}) in slot {slot} is wrong or repeated",
                    b.map_id,
                    b.batch_seq
                );
            }
            got[b.map_id as usize] += b.payload.len() as u64;
            in_slot += b.payload.len() as u64;
        }
        // The hosts' loads are counted from the committed bytes per slot: they must be
        // what the slot holds.
        if in_slot != status.partition_bytes[slot as usize] {
            bail!(
                "partition {p}: slot {slot} holds {in_slot} bytes, its commits count {}",
                status.partition_bytes[slot as usize]
            );
        }
    }
    for (m, &g) in got.iter().enumerate() {
        let want = share(sizes[p as usize], m as u32, maps);
        if g != want {
            bail!("partition {p}: map {m} wrote {want} bytes, {g} read back");
        }
    }
    Ok(())
}

/// Bytes per host over all slots, and the bytes each partition's reduce task, on the
/// host holding most of the partition, reads from other hosts.
fn loads(status: &ShuffleStatus, hosts: usize, push_secs: f64) -> Result<Outcome> {
    let host_of_slot = |slot: u32| -> Result<usize> {
        let w = status
            .placement
            .worker_of(slot)
            .context("a slot on no worker")?;
        w.host
            .strip_prefix('h')
            .and_then(|i| i.parse::<usize>().ok())
            .filter(|&i| i < hosts)
            .with_context(|| format!("worker {} has host label '{}'", w.addr, w.host))
    };
    let mut out = Outcome {
        loads: vec![0; hosts],
        remote: 0,
        moved: 0,
        push_secs,
    };
    for p in 0..status.num_partitions {
        let slots = status.slots_of(p);
        let holding = slots
            .iter()
            .filter(|&&s| status.partition_bytes[s as usize] > 0)
            .count();
        out.moved += u32::from(holding > 1);
        let mut on = vec![0u64; hosts];
        for slot in slots {
            on[host_of_slot(slot)?] += status.partition_bytes[slot as usize];
        }
        let all: u64 = on.iter().sum();
        out.remote += all - on.iter().copied().max().unwrap_or(0);
        for (l, b) in out.loads.iter_mut().zip(&on) {
            *l += b;
        }
    }
    Ok(out)
}

fn max_over_mean(loads: &[u64]) -> f64 {
    let sum: u64 = loads.iter().sum();
    if sum == 0 {
        return 1.0;
    }
    let max = loads.iter().copied().max().unwrap_or(0) as f64;
    max * loads.len() as f64 / sum as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn report(a: &PlacementArgs, total: u64, sizes: &[u64], results: &BTreeMap<&str, Vec<Outcome>>) {
    let h = a.hosts;
    // The pure policies on the same final sizes, nothing run.
    let mut fifo = vec![0u64; h];
    for (p, &s) in sizes.iter().enumerate() {
        fifo[p % h] += s;
    }
    let infos: Vec<ReduceInfo> = sizes.iter().map(|&s| ReduceInfo::sized(s)).collect();
    let heap = min_heap_schedule(1, h, &infos, false).loads;
    let largest = sizes.iter().copied().max().unwrap_or(0);
    println!(
        "placement: {h} hosts, {} maps x {} partitions, {}, Zipf α {} (largest partition {:.1}% of the bytes), {} runs, medians",
        a.maps,
        a.partitions,
        human_bytes(total),
        a.alpha,
        100.0 * largest as f64 / total.max(1) as f64,
        a.runs
    );
    println!(
        "  {:<34} {:>14} {:>13} {:>10} {:>8}",
        "mode", "max/mean load", "remote bytes", "moved", "push s"
    );
    let mut json_modes = serde_json::Map::new();
    for (name, runs) in results {
        let ratio = median(runs.iter().map(|o| max_over_mean(&o.loads)).collect());
        let remote = median(
            runs.iter()
                .map(|o| o.remote as f64 / total.max(1) as f64)
                .collect(),
        );
        let moved = median(runs.iter().map(|o| o.moved as f64).collect());
        let push = median(runs.iter().map(|o| o.push_secs).collect());
        let label = if *name == "blocks" {
            "live: placed at registration"
        } else {
            "live: re-placed on the prediction"
        };
        println!(
            "  {label:<34} {ratio:>14.2} {:>12.1}% {moved:>10.0} {push:>8.2}",
            100.0 * remote
        );
        json_modes.insert(
            name.to_string(),
            serde_json::json!({
                "max_over_mean": ratio,
                "remote_share": remote,
                "partitions_moved": moved,
                "push_secs": push,
                "verified": true,
            }),
        );
    }
    println!("  on the same final sizes, nothing run:");
    println!(
        "  {:<34} {:>14.2}",
        "FIFO (reduce i on host i mod H)",
        max_over_mean(&fifo)
    );
    println!(
        "  {:<34} {:>14.2}",
        "MinHeap from scratch",
        max_over_mean(&heap)
    );
    println!(
        "  {:<34} {:>14.2}",
        "largest partition alone",
        largest as f64 * h as f64 / total.max(1) as f64
    );
    if a.json {
        let j = serde_json::json!({
            "hosts": h,
            "maps": a.maps,
            "partitions": a.partitions,
            "bytes": total,
            "alpha": a.alpha,
            "runs": a.runs,
            "modes": json_modes,
            "fifo_max_over_mean": max_over_mean(&fifo),
            "min_heap_max_over_mean": max_over_mean(&heap),
        });
        println!("{j}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_sizes_add_up_and_are_skewed_anywhere() {
        let s = zipf_sizes(1 << 20, 48, 1.3, 1);
        assert_eq!(s.iter().sum::<u64>(), 1 << 20);
        let top = s
            .iter()
            .position(|&x| x == *s.iter().max().unwrap())
            .unwrap();
        // Rank 1 over rank 2 is 2^1.3.
        let mut sorted = s.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        assert!((sorted[0] as f64 / sorted[1] as f64) > 2.4);
        // Another seed puts the hottest partition elsewhere.
        let t = zipf_sizes(1 << 20, 48, 1.3, 2);
        assert_ne!(
            t.iter()
                .position(|&x| x == *t.iter().max().unwrap())
                .unwrap(),
            top
        );
        // α 0: even.
        assert!(zipf_sizes(480, 48, 0.0, 1).iter().all(|&x| x == 10));
    }

    #[test]
    fn every_map_writes_its_share_and_they_add_up() {
        for size in [0, 1, 19, 20, 1000, 12345] {
            let sum: u64 = (0..20).map(|m| share(size, m, 20)).sum();
            assert_eq!(sum, size);
        }
    }
}
