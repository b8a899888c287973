//! `crossdock bench push-fetch`: a native load generator on the Rust client library.
//!
//! M mappers push R partitions' worth of batches, commit, then reducers fetch every
//! partition and check every byte. Without `--coordinator` it starts its own
//! `crossdock standalone` as a child process, so the workers' RSS is measured apart
//! from the load generator's. `--baseline` measures raw loopback TCP and memcpy in the
//! same run: the physical limits the service is compared against ([`baseline`]).
//! `--compare-tls` measures two embedded clusters, over plain TCP and over TLS, run by
//! run alternately ([`embedded`]); `--compare-zero-copy` two whose workers send fetches
//! of data on disk with `sendfile` or read and check them first.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use crossdock_client::tls::TlsClient;
use crossdock_client::{
    CoordinatorClient, FetchRange, Keyring, PartitionReader, Placement, WorkerClient,
};
use crossdock_proto::{checksum, AttemptId, CommitStatus, Message, PartitionStat, PushHeader};
use tokio::sync::Semaphore;

use crate::config::{human_bytes, parse_size};

mod alltoall;
mod baseline;
mod child;
mod embedded;
mod placement;
mod procs;

use baseline::{loopback_tcp_gbps, memcpy_gbps};
use embedded::Embedded;

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub which: BenchKind,
}

#[derive(Subcommand)]
pub enum BenchKind {
    /// Push M×R batches, commit, fetch every partition, verify every byte.
    PushFetch(PushFetchArgs),
    /// The skew paper's all-to-all (CSA, DSA, SMS) on memory-only workers.
    Alltoall(alltoall::AllToAllArgs),
    /// SCache's placement on a skewed shuffle: hosts' load with and without re-placement.
    Placement(placement::PlacementArgs),
}

#[derive(Args, Clone)]
pub struct PushFetchArgs {
    /// Coordinator to measure; without it an embedded standalone cluster is started.
    #[arg(long)]
    pub coordinator: Option<String>,
    /// Total payload bytes pushed per run.
    #[arg(long, default_value = "1GiB")]
    pub bytes: String,
    /// Number of map tasks.
    #[arg(long, default_value_t = 16)]
    pub maps: u32,
    /// Number of reduce partitions.
    #[arg(long, default_value_t = 32)]
    pub partitions: u32,
    /// Payload bytes per pushed batch.
    #[arg(long, default_value = "1MiB")]
    pub batch_size: String,
    /// Map tasks pushing at once.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Unacknowledged batches each map task may have in flight per worker.
    #[arg(long, default_value_t = 8)]
    pub window: usize,
    /// Partitions fetched at once.
    #[arg(long, default_value_t = 4)]
    pub fetch_concurrency: usize,
    /// Repeated runs; the report gives medians.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Workers of the embedded cluster.
    #[arg(long, default_value_t = 2)]
    pub workers: u32,
    /// Memory budget of each embedded worker.
    #[arg(long, default_value = "1GiB")]
    pub memory: String,
    /// Copies of each partition in the embedded cluster (1 or 2).
    #[arg(long, default_value_t = 1)]
    pub replication: u32,
    /// Commit rule of the embedded cluster: memory, disk or object-store.
    #[arg(long, default_value = "memory")]
    pub durability: String,
    /// Object store of the embedded cluster's workers (see `crossdock worker --help`).
    #[arg(long)]
    pub object_store: Option<String>,
    /// Disk quota of the embedded cluster's workers (with --object-store).
    #[arg(long)]
    pub disk_quota: Option<String>,
    /// Also measure raw loopback TCP bandwidth and memcpy rate.
    #[arg(long)]
    pub baseline: bool,
    /// End with one line of JSON holding the results.
    #[arg(long)]
    pub json: bool,
    /// Run the embedded cluster with TLS (a certificate made for 127.0.0.1).
    #[arg(long, conflicts_with = "coordinator")]
    pub tls: bool,
    /// Measure the embedded cluster with plain TCP and with TLS in the same run, the two
    /// alternating run by run, and report both and their ratio.
    #[arg(long, conflicts_with_all = ["coordinator", "tls"])]
    pub compare_tls: bool,
    /// Measure two embedded clusters in the same run, alternating run by run: workers
    /// that send fetches of data on disk from the page cache with sendfile (the reader
    /// checks the records) and workers that read and check them first; report both,
    /// their ratio and the workers' CPU time while fetching.
    #[arg(long, conflicts_with_all = ["coordinator", "tls", "compare_tls"])]
    pub compare_zero_copy: bool,
    /// The authorities to check --coordinator's servers against (a cluster with TLS).
    #[arg(long, requires = "coordinator")]
    pub tls_ca: Option<std::path::PathBuf>,
}

/// One cluster measured: its coordinator and how connections to it are opened.
struct Target {
    label: &'static str,
    coordinator: String,
    tls: Option<TlsClient>,
    _embedded: Option<Embedded>,
}

pub async fn run(args: BenchArgs) -> Result<()> {
    match args.which {
        BenchKind::PushFetch(a) => push_fetch(a).await,
        BenchKind::Alltoall(a) => alltoall::run(a).await,
        BenchKind::Placement(a) => placement::run(a).await,
    }
}

/// Random bytes that payloads are cut from; a batch's content is a function of its
/// (map, partition, seq), so the reader can check every byte without storing them.
pub(super) struct Pool {
    data: Arc<Vec<u8>>,
}

impl Pool {
    const SIZE: usize = 16 << 20;

    pub(super) fn new(batch: usize) -> Pool {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut data = vec![0u8; Self::SIZE + batch];
        for chunk in data.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
        Pool {
            data: Arc::new(data),
        }
    }

    /// The largest slice it gives.
    pub(super) fn batch(&self) -> usize {
        self.data.len() - Self::SIZE
    }

    pub(super) fn slice(&self, map: u32, partition: u32, seq: u32, len: usize) -> &[u8] {
        let mut h = (map as u64) << 40 ^ (partition as u64) << 20 ^ seq as u64;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        let off = (h % Self::SIZE as u64) as usize;
        &self.data[off..off + len]
    }
}

/// A map's commit figures from its acknowledged (bytes, records) per slot.
pub(super) fn slot_stats(
    per_slot: &std::collections::BTreeMap<u32, (u64, u64)>,
) -> Vec<PartitionStat> {
    per_slot
        .iter()
        .map(|(&partition, &(bytes, records))| PartitionStat {
            partition,
            bytes,
            records,
        })
        .collect()
}

/// Batch sizes a map writes to a partition: `total` bytes cut into `batch`-sized pieces.
fn batches_for(total: u64, batch: u64) -> Vec<usize> {
    let mut out = vec![batch as usize; (total / batch) as usize];
    if !total.is_multiple_of(batch) {
        out.push((total % batch) as usize);
    }
    out
}

struct RunResult {
    push_secs: f64,
    fetch_secs: f64,
    latencies_us: Vec<u64>,
    verified: bool,
    peak_rss: u64,
    peak_buffered: u64,
    /// Sum of the budgets of the workers in the (largest) worker process.
    budget: u64,
    worker_budget: u64,
    disk_bytes: u64,
    tcp_gbps: Option<f64>,
    memcpy_gbps: Option<f64>,
    /// CPU time (user + system) of the embedded cluster's process during the fetch.
    fetch_cpu_secs: Option<f64>,
    /// Batches that arrived as stored records (sent from memory or with sendfile).
    stored_records: u64,
}

async fn push_fetch(a: PushFetchArgs) -> Result<()> {
    let total = parse_size(&a.bytes)?;
    let batch = parse_size(&a.batch_size)?;
    if a.maps == 0 || a.partitions == 0 || batch == 0 || a.runs == 0 {
        bail!("--maps, --partitions, --batch-size and --runs must be positive");
    }
    let per_cell = total / (a.maps as u64 * a.partitions as u64);
    if per_cell == 0 {
        bail!(
            "--bytes {} is too small for {} maps × {} partitions",
            a.bytes,
            a.maps,
            a.partitions
        );
    }
    let mut targets = Vec::new();
    match &a.coordinator {
        Some(c) => targets.push(Target {
            label: "",
            coordinator: c.clone(),
            tls: a.tls_ca.as_deref().map(crate::tls::client).transpose()?,
            _embedded: None,
        }),
        None if a.compare_zero_copy => {
            for (label, zero_copy) in [("sendfile", true), ("read and check", false)] {
                let e = Embedded::start(&a, None, zero_copy)?;
                targets.push(Target {
                    label,
                    coordinator: e.addr.clone(),
                    tls: None,
                    _embedded: Some(e),
                });
            }
        }
        None => {
            if !a.tls {
                let e = Embedded::start(&a, None, true)?;
                targets.push(Target {
                    label: if a.compare_tls { "plain TCP" } else { "" },
                    coordinator: e.addr.clone(),
                    tls: None,
                    _embedded: Some(e),
                });
            }
            if a.tls || a.compare_tls {
                let (e, client) = Embedded::start_tls(&a)?;
                targets.push(Target {
                    label: "TLS",
                    coordinator: e.addr.clone(),
                    tls: Some(client),
                    _embedded: Some(e),
                });
            }
        }
    }
    let pool = Arc::new(Pool::new(batch as usize));
    let bytes = per_cell * a.maps as u64 * a.partitions as u64;
    println!(
        "push-fetch: {} in {} maps × {} partitions, batches of {}, {} runs, coordinator {}",
        human_bytes(bytes),
        a.maps,
        a.partitions,
        human_bytes(batch),
        a.runs,
        targets
            .iter()
            .map(|t| if t.label.is_empty() {
                t.coordinator.clone()
            } else {
                format!("{} ({})", t.coordinator, t.label)
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut results: Vec<Vec<RunResult>> = targets.iter().map(|_| Vec::new()).collect();
    for run in 0..a.runs {
        for (t, target) in targets.iter().enumerate() {
            let name = target.label;
            let r = one_run(&a, target, &pool, per_cell, batch, run).await?;
            println!(
                "run {}{}: push {:.2} GB/s, fetch {:.2} GB/s, verified {}{}",
                run + 1,
                if name.is_empty() {
                    String::new()
                } else {
                    format!(" ({name})")
                },
                bytes as f64 / r.push_secs / 1e9,
                bytes as f64 / r.fetch_secs / 1e9,
                r.verified,
                r.tcp_gbps
                    .map(|t| format!(", loopback TCP {t:.2} GB/s"))
                    .unwrap_or_default()
            );
            results[t].push(r);
        }
    }
    let mut reports = Vec::new();
    for (rs, target) in results.iter().zip(&targets) {
        let name = target.label;
        if !name.is_empty() {
            println!("\n== {name}");
        }
        reports.push(report(&a, bytes, rs)?);
    }
    let verified = results.iter().flatten().all(|r| r.verified);
    let ratio = |k: &str| {
        reports[1][k].as_f64().unwrap_or(f64::NAN) / reports[0][k].as_f64().unwrap_or(f64::NAN)
    };
    if a.json {
        let j = if a.compare_tls {
            serde_json::json!({
                "plain": reports[0],
                "tls": reports[1],
                "tls_to_plain_end_to_end": ratio("end_to_end_gbps"),
            })
        } else if a.compare_zero_copy {
            serde_json::json!({
                "sendfile": reports[0],
                "read_and_check": reports[1],
                "read_and_check_to_sendfile_fetch": ratio("fetch_gbps"),
                "read_and_check_to_sendfile_fetch_cpu": ratio("fetch_worker_cpu_secs_per_gib"),
            })
        } else {
            reports[0].clone()
        };
        println!("{j}");
    }
    if a.compare_tls {
        println!(
            "\nTLS / plain TCP (medians): push {:.2}, fetch {:.2}, end to end {:.2}",
            ratio("push_gbps"),
            ratio("fetch_gbps"),
            ratio("end_to_end_gbps")
        );
    }
    if a.compare_zero_copy {
        println!(
            "\nread and check / sendfile (medians): fetch throughput {:.2}, workers' CPU time per GiB fetched {:.2}",
            ratio("fetch_gbps"),
            ratio("fetch_worker_cpu_secs_per_gib")
        );
    }
    if !verified {
        bail!("verification failed: the data read back differs from what was pushed");
    }
    Ok(())
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Prints the medians of one target's runs; returns them as JSON.
fn report(a: &PushFetchArgs, bytes: u64, results: &[RunResult]) -> Result<serde_json::Value> {
    let gb = bytes as f64 / 1e9;
    let push = median(results.iter().map(|r| gb / r.push_secs).collect());
    let fetch = median(results.iter().map(|r| gb / r.fetch_secs).collect());
    let e2e = median(
        results
            .iter()
            .map(|r| gb / (r.push_secs + r.fetch_secs))
            .collect(),
    );
    let mut lat: Vec<u64> = results
        .iter()
        .flat_map(|r| r.latencies_us.iter().copied())
        .collect();
    lat.sort_unstable();
    let (p50, p99) = (percentile(&lat, 0.5), percentile(&lat, 0.99));
    let verified = results.iter().all(|r| r.verified);
    let peak_rss = results.iter().map(|r| r.peak_rss).max().unwrap_or(0);
    let peak_buffered = results.iter().map(|r| r.peak_buffered).max().unwrap_or(0);
    let budget = results.first().map_or(0, |r| r.budget);
    let worker_budget = results.first().map_or(0, |r| r.worker_budget);
    let disk = median(results.iter().map(|r| r.disk_bytes as f64).collect()) as u64;
    let tcp = a
        .baseline
        .then(|| median(results.iter().filter_map(|r| r.tcp_gbps).collect()));
    let memcpy = a
        .baseline
        .then(|| median(results.iter().filter_map(|r| r.memcpy_gbps).collect()));
    let ratio = tcp.map(|t| push.min(fetch) / t);
    let cpu: Vec<f64> = results.iter().filter_map(|r| r.fetch_cpu_secs).collect();
    let fetch_cpu = (!cpu.is_empty()).then(|| median(cpu) / (bytes as f64 / (1u64 << 30) as f64));
    println!();
    println!("medians over {} runs", results.len());
    println!("  push throughput        {push:8.2} GB/s");
    println!("  fetch throughput       {fetch:8.2} GB/s");
    println!("  end to end (push+fetch){e2e:8.2} GB/s");
    println!(
        "  push batch latency     p50 {:.2} ms, p99 {:.2} ms",
        p50 as f64 / 1e3,
        p99 as f64 / 1e3
    );
    if let (Some(t), Some(m), Some(r)) = (tcp, memcpy, ratio) {
        println!("  loopback TCP baseline  {t:8.2} GB/s");
        println!("  memcpy baseline        {m:8.2} GB/s");
        println!("  min(push, fetch) / TCP {r:8.2}");
    }
    println!(
        "  worker peak RSS        {} (its process holds {} of worker budgets, {} each; bound: budgets + 64 MiB)",
        human_bytes(peak_rss),
        human_bytes(budget),
        human_bytes(worker_budget)
    );
    println!("  worker peak buffered   {}", human_bytes(peak_buffered));
    let records = results.iter().map(|r| r.stored_records).max().unwrap_or(0);
    println!("  batches as records     {records} (stored records sent unread, at most per run)");
    if let Some(c) = fetch_cpu {
        println!("  workers' CPU in fetch  {c:8.3} s per GiB (user + system of the embedded cluster's process)");
    }
    println!(
        "  written to worker disk {} per run ({:.0}% of the data)",
        human_bytes(disk),
        100.0 * disk as f64 / bytes as f64
    );
    println!("  every byte verified    {verified}");
    Ok(serde_json::json!({
            "bytes": bytes,
            "runs": results.len(),
            "maps": a.maps,
            "partitions": a.partitions,
            "batch_bytes": parse_size(&a.batch_size)?,
            "replication": a.replication,
            "durability": a.durability,
            "push_gbps": push,
            "fetch_gbps": fetch,
            "end_to_end_gbps": e2e,
            "push_latency_p50_ms": p50 as f64 / 1e3,
            "push_latency_p99_ms": p99 as f64 / 1e3,
            "baseline_tcp_gbps": tcp,
            "baseline_memcpy_gbps": memcpy,
            "ratio_to_tcp": ratio,
            "verified": verified,
            "peak_worker_rss_bytes": peak_rss,
            "peak_worker_buffered_bytes": peak_buffered,
            "budget_bytes": budget,
            "worker_budget_bytes": worker_budget,
            "rss_within_budget": peak_rss <= budget + (64 << 20),
            "worker_disk_bytes": disk,
            "fetch_worker_cpu_secs_per_gib": fetch_cpu,
            "stored_records": records,
            "tls": a.tls || a.tls_ca.is_some(),
    }))
}

async fn one_run(
    a: &PushFetchArgs,
    target: &Target,
    pool: &Arc<Pool>,
    per_cell: u64,
    batch: u64,
    run: usize,
) -> Result<RunResult> {
    let (tcp_gbps, memcpy_gbps) = if a.baseline {
        let bytes = (per_cell * a.maps as u64 * a.partitions as u64).min(4 << 30);
        let (t, m) =
            tokio::task::spawn_blocking(move || (loopback_tcp_gbps(bytes), memcpy_gbps())).await?;
        (Some(t?), Some(m))
    } else {
        (None, None)
    };
    let coordinator = &target.coordinator;
    let coord = Arc::new(
        CoordinatorClient::connect(coordinator, &Keyring::new().with_tls(target.tls.clone()))
            .await
            .with_context(|| format!("connecting to the coordinator at {coordinator}"))?,
    );
    let app = format!("bench-{}-{run}", std::process::id());
    coord.register_app(&app, 120_000).await?;
    let placement = Arc::new(
        coord
            .register_shuffle(&app, 0, a.maps, a.partitions)
            .await?,
    );

    // Push.
    let start = Instant::now();
    let slots = Arc::new(Semaphore::new(a.concurrency.max(1)));
    let mut tasks = Vec::new();
    for map in 0..a.maps {
        let permit = slots.clone().acquire_owned().await?;
        let (coord, placement, pool, app) =
            (coord.clone(), placement.clone(), pool.clone(), app.clone());
        let (partitions, window) = (a.partitions, a.window.max(1));
        tasks.push(tokio::spawn(async move {
            let r = push_map(
                &coord, &placement, &pool, &app, map, partitions, per_cell, batch, window,
            )
            .await;
            drop(permit);
            r
        }));
    }
    let mut latencies_us = Vec::new();
    for t in tasks {
        latencies_us.extend(t.await??);
    }
    let push_secs = start.elapsed().as_secs_f64();
    let status = coord.shuffle_status(&app, 0).await?;
    if !status.is_complete() {
        bail!(
            "after every commit the shuffle reports {}/{} maps committed",
            status.committed_maps,
            status.num_maps
        );
    }

    // Fetch and verify.
    let cpu = || target._embedded.as_ref().and_then(Embedded::cpu_secs);
    let cpu_before = cpu();
    let start = Instant::now();
    let slots = Arc::new(Semaphore::new(a.fetch_concurrency.max(1)));
    let mut tasks = Vec::new();
    for partition in 0..a.partitions {
        let permit = slots.clone().acquire_owned().await?;
        let (placement, pool, app) = (placement.clone(), pool.clone(), app.clone());
        let keyring = coord.keyring().clone();
        let attempts = status.map_attempts.clone();
        let expected = status.partition_bytes[partition as usize];
        tasks.push(tokio::spawn(async move {
            let r = fetch_partition(
                &placement, &keyring, &pool, &app, partition, attempts, per_cell, batch, expected,
            )
            .await;
            drop(permit);
            r
        }));
    }
    let (mut verified, mut stored_records) = (true, 0);
    for t in tasks {
        match t.await? {
            Ok(n) => stored_records += n,
            Err(e) => {
                eprintln!("verification error: {e:#}");
                verified = false;
            }
        }
    }
    let fetch_secs = start.elapsed().as_secs_f64();
    let fetch_cpu_secs = cpu().zip(cpu_before).map(|(after, before)| after - before);

    // Worker statistics, then clean up.
    let (mut peak_rss, mut peak_buffered, mut budget, mut worker_budget, mut disk_bytes) =
        (0, 0, 0, 0, 0);
    for w in &placement.workers {
        let client = WorkerClient::connect(&w.addr, coord.keyring()).await?;
        if let Message::WorkerStats {
            peak_rss_bytes,
            peak_buffered_bytes,
            budget_bytes,
            stored_bytes,
            process_budget_bytes,
            ..
        } = client.call(&Message::GetWorkerStats).await?
        {
            peak_rss = peak_rss.max(peak_rss_bytes);
            peak_buffered = peak_buffered.max(peak_buffered_bytes);
            worker_budget = budget_bytes;
            budget = budget.max(process_budget_bytes);
            disk_bytes += stored_bytes;
        }
    }
    coord.unregister_app(&app).await?;
    Ok(RunResult {
        push_secs,
        fetch_secs,
        latencies_us,
        verified,
        peak_rss,
        peak_buffered,
        budget,
        worker_budget,
        disk_bytes,
        tcp_gbps,
        memcpy_gbps,
        fetch_cpu_secs,
        stored_records,
    })
}

#[allow(clippy::too_many_arguments)]
async fn push_map(
    coord: &CoordinatorClient,
    placement: &Placement,
    pool: &Pool,
    app: &str,
    map: u32,
    partitions: u32,
    per_cell: u64,
    batch: u64,
    window: usize,
) -> Result<Vec<u64>> {
    // One connection per worker for this map task, as an executor would hold.
    let mut clients = std::collections::HashMap::new();
    for w in &placement.workers {
        clients.insert(w.id, WorkerClient::connect(&w.addr, coord.keyring()).await?);
    }
    let sizes = batches_for(per_cell, batch);
    let mut inflight = std::collections::VecDeque::new();
    let mut latencies = Vec::new();
    // Interleave partitions, as a map task's buffers fill: seq-major order.
    for (seq, &len) in sizes.iter().enumerate() {
        for p in 0..partitions {
            let wid = placement.partition_workers[p as usize];
            let client = &clients[&wid];
            let payload = pool.slice(map, p, seq as u32, len);
            let header = PushHeader {
                app_id: app.to_string(),
                shuffle_id: 0,
                partition: p,
                map_id: map,
                attempt_id: AttemptId(0),
                batch_seq: seq as u32,
                crc32c: checksum(payload),
            };
            let t0 = Instant::now();
            let pending = client.push(&header, payload).await?;
            inflight.push_back((wid, t0, pending));
            if inflight.len() >= window * clients.len() {
                let (wid, t0, pending) = inflight.pop_front().expect("non-empty");
                clients[&wid].finish_push(pending).await?;
                latencies.push(t0.elapsed().as_micros() as u64);
            }
        }
    }
    while let Some((wid, t0, pending)) = inflight.pop_front() {
        clients[&wid].finish_push(pending).await?;
        latencies.push(t0.elapsed().as_micros() as u64);
    }
    let stats: Vec<PartitionStat> = (0..partitions)
        .map(|p| PartitionStat {
            partition: p,
            bytes: per_cell,
            records: sizes.len() as u64,
        })
        .collect();
    let (status, winner) = coord.commit_map(app, 0, map, AttemptId(0), stats).await?;
    if status != CommitStatus::Committed {
        bail!("map {map} commit returned {status:?} (winner {winner})");
    }
    Ok(latencies)
}

#[allow(clippy::too_many_arguments)]
async fn fetch_partition(
    placement: &Placement,
    keyring: &Keyring,
    pool: &Pool,
    app: &str,
    partition: u32,
    map_attempts: Vec<Option<AttemptId>>,
    per_cell: u64,
    batch: u64,
    expected_bytes: u64,
) -> Result<u64> {
    let maps = map_attempts.len() as u32;
    let worker = placement
        .worker_of(partition)
        .context("partition without a worker")?;
    let range = FetchRange {
        app_id: app.to_string(),
        shuffle_id: 0,
        partition,
        start_map: 0,
        end_map: maps,
    };
    // The reader takes stored records, checked against the committed attempts.
    let mut reader =
        PartitionReader::new(&worker.addr, range, keyring).accepting_records(map_attempts);
    let sizes = batches_for(per_cell, batch);
    let mut next = (0u32, 0u32);
    while let Some(b) = reader.next_batch().await? {
        if (b.map_id, b.batch_seq) != next {
            bail!(
                "partition {partition}: expected (map {}, seq {}), got (map {}, seq {})",
                next.0,
                next.1,
                b.map_id,
                b.batch_seq
            );
        }
        let len = sizes[b.batch_seq as usize];
        if b.payload[..] != pool.slice(b.map_id, partition, b.batch_seq, len)[..] {
            bail!(
                "partition {partition}: batch (map {}, seq {}) has the wrong bytes",
                b.map_id,
                b.batch_seq
            );
        }
        next = if b.batch_seq as usize + 1 == sizes.len() {
            (b.map_id + 1, 0)
        } else {
            (b.map_id, b.batch_seq + 1)
        };
    }
    if next != (maps, 0) {
        bail!(
            "partition {partition}: stream ended at (map {}, seq {})",
            next.0,
            next.1
        );
    }
    if reader.bytes != expected_bytes {
        bail!(
            "partition {partition}: read {} bytes, the commits report {expected_bytes}",
            reader.bytes
        );
    }
    if reader.record_fallbacks > 0 {
        bail!("partition {partition}: a stored record failed the reader's checks");
    }
    Ok(reader.stored_records)
}
