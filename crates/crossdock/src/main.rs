//! `crossdock`: the shuffle service's command-line entry point.

mod alloc;
mod auth;
mod bench;
mod config;
mod limits;
mod tenancy;
mod tls;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use crossdock_proto::Durability;
use crossdock_server::coordinator::config::{
    check_prediction_threshold, DEFAULT_PREDICTION_THRESHOLD,
};
use crossdock_server::coordinator::{web, Coordinator, CoordinatorConfig};
use crossdock_server::metrics::{self, Render};
use crossdock_server::standalone::{Standalone, StandaloneConfig};
use crossdock_server::worker::{Worker, WorkerConfig};

use auth::{AuthArgs, Missing};
use config::{human_bytes, parse_duration, parse_size, FileConfig};
use limits::{LimitArgs, QuotaArgs};
use tenancy::TenancyArgs;

const DEFAULT_COORDINATOR_LISTEN: &str = "127.0.0.1:7337";
const DEFAULT_WORKER_LISTEN: &str = "127.0.0.1:7338";
const DEFAULT_MEMORY: &str = "1GiB";
const DEFAULT_WORKER_TIMEOUT: &str = "10s";
const DEFAULT_METRICS_LISTEN: &str = "127.0.0.1:0";

#[derive(Parser)]
#[command(
    name = "crossdock",
    version,
    about = "Crossdock: a push-based remote shuffle service for Spark and other data-parallel engines",
    long_about = "Crossdock takes the shuffle out of the executors: map tasks push partitioned \
batches to Crossdock workers, which aggregate each reduce partition into one file; reducers \
read a few large streams.\n\nStart with `crossdock standalone` (a coordinator and workers in one \
process), then point a client at the address it prints.\n\nSettings come from flags, CROSSDOCK_* \
environment variables, or a TOML file given with --config; flags win over the environment, \
which wins over the file."
)]
struct Cli {
    /// Log filter, e.g. `info`, `debug`, `crossdock_server=debug` (or set RUST_LOG).
    #[arg(long, global = true, env = "CROSSDOCK_LOG", default_value = "info")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a coordinator and N workers in one process (the embedded default).
    Standalone(StandaloneArgs),
    /// Run a coordinator: worker membership, app leases, placement, commits.
    Coordinator(CoordinatorArgs),
    /// Run a worker that registers with a coordinator and stores shuffle data.
    Worker(WorkerArgs),
    /// Measure Crossdock: `crossdock bench push-fetch --help`.
    Bench(bench::BenchArgs),
    /// Reproduce the papers' experiments in a seeded simulation.
    Sim(crossdock_sim::SimArgs),
    /// Print the Spark properties that send a Spark application's shuffles through Crossdock.
    SparkConf(SparkConfArgs),
    /// Make a certificate authority and a server certificate for a cluster's TLS.
    TlsCerts(tls::TlsCertsArgs),
}

#[derive(Args)]
struct SparkConfArgs {
    /// The coordinator's address, HOST:PORT.
    #[arg(long, env = "CROSSDOCK_COORDINATOR")]
    coordinator: String,
    /// The Spark line of the application: `4` (Spark 4.x) or `3.5`. Spark 3.5 creates the
    /// shuffle manager before it adds `spark.jars` to an executor's classpath (Spark 4 fixed
    /// that), so for 3.5 the jar goes on the driver's and executors' class path instead.
    #[arg(long, default_value = "4", value_parser = ["4", "3.5"])]
    spark: String,
    /// The Spark client jar [default: the one built for --spark in this checkout
    /// (clients/spark/target/crossdock-spark.jar, or target/spark-3.5/crossdock-spark-3.5.jar),
    /// or the same name beside the binary].
    #[arg(long, env = "CROSSDOCK_SPARK_JAR")]
    jar: Option<PathBuf>,
    /// For a cluster with TLS: the PEM authorities Spark checks the servers against (the
    /// path must exist on the driver's and every executor's host).
    #[arg(long, env = "CROSSDOCK_TLS_CA")]
    tls_ca: Option<PathBuf>,
}

#[derive(Args)]
struct Common {
    /// TOML file with settings (keys as the flags, with underscores).
    #[arg(long, env = "CROSSDOCK_CONFIG")]
    config: Option<PathBuf>,
    /// Where to serve Prometheus metrics at /metrics; port 0 picks a free port, `off` disables.
    #[arg(long, env = "CROSSDOCK_METRICS_LISTEN")]
    metrics_listen: Option<String>,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    auth: AuthArgs,
    #[command(flatten)]
    tls: tls::TlsArgs,
}

#[derive(Args)]
struct StandaloneArgs {
    /// Address of the coordinator, which clients connect to [default: 127.0.0.1:7337].
    #[arg(long, env = "CROSSDOCK_LISTEN")]
    listen: Option<String>,
    /// Number of workers [default: 2].
    #[arg(long, env = "CROSSDOCK_WORKERS")]
    workers: Option<u32>,
    /// Memory budget of each worker for buffered shuffle data, e.g. 512MiB [default: 1GiB].
    #[arg(long, env = "CROSSDOCK_MEMORY")]
    memory: Option<String>,
    /// Parent directory for data; the cluster uses (and on exit deletes) a directory of
    /// its own inside it [default: the system temp dir].
    #[arg(long, env = "CROSSDOCK_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// A worker silent for this long is marked lost [default: 10s].
    #[arg(long, env = "CROSSDOCK_WORKER_TIMEOUT")]
    worker_timeout: Option<String>,
    /// Copies of every partition: 1, or 2 (a replica on another worker; a push is
    /// acknowledged once both hold it) [default: 1].
    #[arg(long, env = "CROSSDOCK_REPLICATION")]
    replication: Option<u32>,
    /// When a map counts as committed: `memory` (held by the workers, in memory on each
    /// copy), `disk` (written and synced to the workers' disks, so a restarted worker
    /// still serves it) or `object-store` (uploaded to the workers' object store, so it
    /// survives the loss of every worker that held it) [default: memory].
    #[arg(long, env = "CROSSDOCK_DURABILITY")]
    durability: Option<String>,
    /// Object store that workers upload their partition files to, so that a partition
    /// survives the loss of every worker holding it: s3://BUCKET[/PREFIX][?endpoint=URL&region=R]
    /// (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) or file:///PATH
    /// (a mounted distributed file system). Off by default.
    #[arg(long, env = "CROSSDOCK_OBJECT_STORE")]
    object_store: Option<String>,
    /// With --object-store: each worker's disk quota (see `crossdock worker --help`).
    #[arg(long, env = "CROSSDOCK_DISK_QUOTA")]
    disk_quota: Option<String>,
    /// A partition past this many bytes on one worker continues on another (and one
    /// crowding a worker that is short of memory, sooner); 0 turns splits off, e.g.
    /// 512MiB [default: 1GiB].
    #[arg(long, env = "CROSSDOCK_SPLIT_SIZE")]
    split_size: Option<String>,
    /// No local disk tier: shuffle data stays in memory until its app ends, and a push
    /// that finds the memory budget spent is refused (memory exceeded) instead of waiting
    /// for a spill; commits must be of durability memory. For nodes without a local disk.
    #[arg(long, env = "CROSSDOCK_MEMORY_ONLY")]
    memory_only: bool,
    /// Send fetches of data on disk from the page cache with sendfile (plain TCP only;
    /// the reader checks every record); false reads and checks them in the worker, for
    /// comparison [default: true].
    #[arg(long, env = "CROSSDOCK_ZERO_COPY_FETCH")]
    zero_copy_fetch: Option<bool>,
    /// Fraction of a shuffle's maps, 0 to 1, that must have committed before the
    /// coordinator predicts its partition sizes (at least one map) [default: 0.1].
    #[arg(long, env = "CROSSDOCK_PREDICTION_THRESHOLD")]
    prediction_threshold: Option<f64>,
    /// Once a shuffle's partition sizes are predicted, continue partitions on other hosts
    /// until every host's predicted load is within 10% of SCache's MinHeap placement (a
    /// join's two sides together); true or false [default: false]. Needs workers on two
    /// hosts or more.
    #[arg(long, env = "CROSSDOCK_REBALANCE")]
    rebalance: Option<bool>,
    #[command(flatten)]
    quotas: QuotaArgs,
    #[command(flatten)]
    tenancy: TenancyArgs,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
struct CoordinatorArgs {
    /// Address to listen on [default: 127.0.0.1:7337].
    #[arg(long, env = "CROSSDOCK_LISTEN")]
    listen: Option<String>,
    /// Directory for the coordinator's files.
    #[arg(long, env = "CROSSDOCK_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// A worker silent for this long is marked lost [default: 10s].
    #[arg(long, env = "CROSSDOCK_WORKER_TIMEOUT")]
    worker_timeout: Option<String>,
    /// Copies of every partition: 1, or 2 (a replica on another worker; a push is
    /// acknowledged once both hold it) [default: 1].
    #[arg(long, env = "CROSSDOCK_REPLICATION")]
    replication: Option<u32>,
    /// Sync the coordinator's state journal to the device on every change, true or
    /// false (false survives a coordinator crash, not a machine crash) [default: true].
    #[arg(long, env = "CROSSDOCK_FSYNC")]
    fsync: Option<bool>,
    /// When a map counts as committed: `memory` (held by the workers, in memory on each
    /// copy), `disk` (written and synced to the workers' disks, so a restarted worker
    /// still serves it) or `object-store` (uploaded to the workers' object store, so it
    /// survives the loss of every worker that held it) [default: memory].
    #[arg(long, env = "CROSSDOCK_DURABILITY")]
    durability: Option<String>,
    /// Fraction of a shuffle's maps, 0 to 1, that must have committed before the
    /// coordinator predicts its partition sizes (at least one map) [default: 0.1].
    #[arg(long, env = "CROSSDOCK_PREDICTION_THRESHOLD")]
    prediction_threshold: Option<f64>,
    /// Once a shuffle's partition sizes are predicted, continue partitions on other hosts
    /// until every host's predicted load is within 10% of SCache's MinHeap placement (a
    /// join's two sides together); true or false [default: false]. Needs workers on two
    /// hosts or more.
    #[arg(long, env = "CROSSDOCK_REBALANCE")]
    rebalance: Option<bool>,
    #[command(flatten)]
    quotas: QuotaArgs,
    #[command(flatten)]
    common: Common,
}

#[derive(Args)]
struct WorkerArgs {
    /// The coordinator's address, HOST:PORT.
    #[arg(long, env = "CROSSDOCK_COORDINATOR")]
    coordinator: Option<String>,
    /// Address to listen on for pushes and fetches [default: 127.0.0.1:7338].
    #[arg(long, env = "CROSSDOCK_LISTEN")]
    listen: Option<String>,
    /// Address clients use to reach this worker, when it differs from --listen
    /// (required when listening on 0.0.0.0).
    #[arg(long, env = "CROSSDOCK_ADVERTISE_ADDR")]
    advertise_addr: Option<String>,
    /// This machine's name as the engine knows it (Spark's executor host), so that reduce
    /// tasks run where their partitions are [default: the host of the advertised address,
    /// which is what Spark uses unless SPARK_LOCAL_HOSTNAME is set].
    #[arg(long, env = "CROSSDOCK_HOST")]
    host: Option<String>,
    /// The failure domain of this machine (rack or availability zone): a partition's
    /// replica goes to another zone when one has a live worker [default: unlabelled].
    #[arg(long, env = "CROSSDOCK_ZONE")]
    zone: Option<String>,
    /// Memory budget for buffered shuffle data, e.g. 4GiB [default: 1GiB].
    #[arg(long, env = "CROSSDOCK_MEMORY")]
    memory: Option<String>,
    /// Directory for partition files; several, comma-separated (one per disk), spread
    /// the partitions over them.
    #[arg(long, env = "CROSSDOCK_DATA_DIR")]
    data_dir: Option<String>,
    /// Object store that workers upload their partition files to, so that a partition
    /// survives the loss of every worker holding it: s3://BUCKET[/PREFIX][?endpoint=URL&region=R]
    /// (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) or file:///PATH
    /// (a mounted distributed file system). Off by default.
    #[arg(long, env = "CROSSDOCK_OBJECT_STORE")]
    object_store: Option<String>,
    /// With --object-store: above this many bytes of partition files on local disk,
    /// the largest wholly uploaded partitions are evicted from it and read from the
    /// object store, e.g. 100GiB [default: no quota; evict only when the disk is full].
    #[arg(long, env = "CROSSDOCK_DISK_QUOTA")]
    disk_quota: Option<String>,
    /// A partition past this many bytes on one worker continues on another (and one
    /// crowding a worker that is short of memory, sooner); 0 turns splits off, e.g.
    /// 512MiB [default: 1GiB].
    #[arg(long, env = "CROSSDOCK_SPLIT_SIZE")]
    split_size: Option<String>,
    /// No local disk tier: shuffle data stays in memory until its app ends, and a push
    /// that finds the memory budget spent is refused (memory exceeded) instead of waiting
    /// for a spill; commits must be of durability memory. For nodes without a local disk.
    #[arg(long, env = "CROSSDOCK_MEMORY_ONLY")]
    memory_only: bool,
    /// Send fetches of data on disk from the page cache with sendfile (plain TCP only;
    /// the reader checks every record); false reads and checks them in the worker, for
    /// comparison [default: true].
    #[arg(long, env = "CROSSDOCK_ZERO_COPY_FETCH")]
    zero_copy_fetch: Option<bool>,
    #[command(flatten)]
    tenancy: TenancyArgs,
    #[command(flatten)]
    common: Common,
}

fn main() -> Result<()> {
    alloc::tune();
    crossdock_server::heap::set_trim(alloc::trim);
    let cli = Cli::parse();
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| cli.log.clone());
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&filter).context("bad --log filter")?,
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Standalone(a) => standalone(a).await,
            Command::Coordinator(a) => coordinator(a).await,
            Command::Worker(a) => worker(a).await,
            Command::Bench(a) => bench::run(a).await,
            Command::Sim(a) => crossdock_sim::run(a),
            Command::SparkConf(a) => spark_conf(a),
            Command::TlsCerts(a) => tls::tls_certs(a),
        }
    })
}

fn parse_quota(q: Option<String>) -> Result<Option<u64>> {
    q.map(|q| parse_size(&q)).transpose()
}

/// Parses a commit rule.
fn parse_durability(s: &str) -> Result<Durability> {
    Ok(match s {
        "memory" => Durability::Memory,
        "disk" => Durability::Disk,
        "object-store" => Durability::ObjectStore,
        other => anyhow::bail!("durability must be memory, disk or object-store, not '{other}'"),
    })
}

fn pick<T>(flag: Option<T>, file: Option<T>, default: impl FnOnce() -> T) -> T {
    flag.or(file).unwrap_or_else(default)
}

fn default_data_dir() -> PathBuf {
    std::env::temp_dir().join("crossdock")
}

/// Waits for SIGINT or SIGTERM.
async fn wait_for_signal() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}

/// Serves `/metrics` and `/healthz`, and with `coordinator` its web UI and REST API, on
/// the metrics address.
async fn start_metrics(
    flag: Option<String>,
    file: Option<String>,
    sources: Vec<Arc<dyn Render>>,
    coordinator: Option<Arc<Coordinator>>,
    shutdown: crossdock_server::ShutdownSignal,
) -> Result<()> {
    let addr = pick(flag, file, || DEFAULT_METRICS_LISTEN.to_string());
    if addr == "off" {
        return Ok(());
    }
    let has_ui = coordinator.is_some();
    let routes = coordinator.map(web::router).unwrap_or_default();
    let bound = metrics::serve(&addr, sources, routes, shutdown)
        .await
        .with_context(|| format!("serving metrics on {addr}"))?;
    println!("metrics on http://{bound}/metrics");
    if has_ui {
        println!("web UI on http://{bound}/ (REST API under /api/v1/)");
    }
    Ok(())
}

/// The prediction threshold: the flag, then the file, then the default; a fraction.
fn prediction_threshold(flag: Option<f64>, file: Option<f64>) -> Result<f64> {
    let t = pick(flag, file, || DEFAULT_PREDICTION_THRESHOLD);
    check_prediction_threshold(t).map_err(anyhow::Error::msg)
}

/// `--split-size`: a size, or 0 / `off` for no splits; the default without one.
fn split_size(s: Option<String>) -> Result<u64> {
    match s.as_deref().map(str::trim) {
        None => Ok(crossdock_server::worker::config::DEFAULT_SPLIT_BYTES),
        Some("0" | "off") => Ok(0),
        Some(s) => {
            let n = parse_size(s)?;
            if n < (64 << 10) {
                anyhow::bail!("--split-size {s} is too small: at least 64KiB, or 0 for no splits");
            }
            Ok(n)
        }
    }
}

fn check_replication(n: u32) -> Result<u32> {
    if !(1..=2).contains(&n) {
        anyhow::bail!("replication must be 1 or 2, not {n}");
    }
    Ok(n)
}

async fn standalone(a: StandaloneArgs) -> Result<()> {
    let file = FileConfig::load(a.common.config.as_deref())?;
    let limits = a.common.limits.resolve(&file)?;
    let quotas = a.quotas.resolve(&file)?;
    let secret = a.common.auth.resolve(&file, Missing::Generate)?;
    let tls = a.common.tls.resolve(&file)?;
    let tenancy = a.tenancy.resolve(&file)?;
    let cfg = StandaloneConfig {
        listen: pick(a.listen, file.listen, || DEFAULT_COORDINATOR_LISTEN.into()),
        workers: pick(a.workers, file.workers, || 2),
        memory: parse_size(&pick(a.memory, file.memory, || DEFAULT_MEMORY.into()))?,
        data_dir: pick(a.data_dir, file.data_dir, default_data_dir),
        worker_timeout: parse_duration(&pick(a.worker_timeout, file.worker_timeout, || {
            DEFAULT_WORKER_TIMEOUT.into()
        }))?,
        replication: check_replication(pick(a.replication, file.replication, || 1))?,
        durability: parse_durability(&pick(a.durability, file.durability, || "memory".into()))?,
        object_store: a.object_store.or(file.object_store),
        disk_quota: parse_quota(a.disk_quota.or(file.disk_quota))?,
        prediction_threshold: prediction_threshold(
            a.prediction_threshold,
            file.prediction_threshold,
        )?,
        rebalance: pick(a.rebalance, file.rebalance, || false),
        limits,
        quotas,
        secret,
        tls,
        tenancy,
        split_bytes: split_size(a.split_size.or(file.split_size))?,
        memory_only: a.memory_only || file.memory_only.unwrap_or(false),
        zero_copy_fetch: pick(a.zero_copy_fetch, file.zero_copy_fetch, || true),
    };
    if cfg.durability == Durability::ObjectStore && cfg.object_store.is_none() {
        anyhow::bail!("--durability object-store needs --object-store URL");
    }
    if cfg.memory_only && cfg.durability != Durability::Memory {
        anyhow::bail!(
            "--memory-only keeps shuffle data in memory only: it needs --durability memory"
        );
    }
    if cfg.disk_quota.is_some() && cfg.object_store.is_none() {
        anyhow::bail!("--disk-quota needs --object-store: evicted partitions are read from it");
    }
    if cfg.memory_only && cfg.object_store.is_some() {
        anyhow::bail!(
            "--memory-only writes no partition files, so it has nothing to upload to --object-store"
        );
    }
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let cluster = Standalone::start(cfg.clone(), shutdown.clone())
        .await
        .with_context(|| format!("starting standalone cluster on {}", cfg.listen))?;
    println!(
        "crossdock standalone listening on {}",
        cluster.coordinator.addr
    );
    for (i, w) in cluster.workers.iter().enumerate() {
        println!(
            "worker {i} listening on {} (memory budget {})",
            w.addr,
            human_bytes(cfg.memory)
        );
    }
    println!("data in {}", cluster.own_dir.display());
    let mut sources: Vec<Arc<dyn Render>> = vec![cluster.coordinator.clone()];
    sources.extend(cluster.workers.iter().map(|w| w.clone() as Arc<dyn Render>));
    start_metrics(
        a.common.metrics_listen,
        file.metrics_listen,
        sources,
        Some(cluster.coordinator.clone()),
        shutdown,
    )
    .await?;
    flush_stdout();
    wait_for_signal().await?;
    eprintln!("crossdock standalone: stopping");
    let _ = stop.send(true);
    tokio::time::sleep(Duration::from_millis(50)).await;
    cluster
        .cleanup()
        .with_context(|| format!("deleting {}", cluster.own_dir.display()))?;
    Ok(())
}

async fn coordinator(a: CoordinatorArgs) -> Result<()> {
    let file = FileConfig::load(a.common.config.as_deref())?;
    let limits = a.common.limits.resolve(&file)?;
    let quotas = a.quotas.resolve(&file)?;
    let secret = a
        .common
        .auth
        .resolve(&file, Missing::Required("a coordinator"))?;
    let tls = a.common.tls.resolve(&file)?;
    let mut cfg = CoordinatorConfig::new(
        pick(a.listen, file.listen, || DEFAULT_COORDINATOR_LISTEN.into()),
        pick(a.data_dir, file.data_dir, || {
            default_data_dir().join("coordinator")
        }),
    );
    cfg.worker_timeout = parse_duration(&pick(a.worker_timeout, file.worker_timeout, || {
        DEFAULT_WORKER_TIMEOUT.into()
    }))?;
    cfg.replication = check_replication(pick(a.replication, file.replication, || 1))?;
    cfg.fsync = pick(a.fsync, file.fsync, || true);
    cfg.durability = parse_durability(&pick(a.durability, file.durability, || "memory".into()))?;
    cfg.prediction_threshold =
        prediction_threshold(a.prediction_threshold, file.prediction_threshold)?;
    cfg.rebalance = pick(a.rebalance, file.rebalance, || false);
    cfg.limits = limits;
    cfg.quotas = quotas;
    cfg.secret = secret;
    cfg.tls = tls;
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let coord = Coordinator::start(cfg.clone(), shutdown.clone())
        .await
        .with_context(|| format!("starting coordinator on {}", cfg.listen))?;
    println!("crossdock coordinator listening on {}", coord.addr);
    start_metrics(
        a.common.metrics_listen,
        file.metrics_listen,
        vec![coord.clone()],
        Some(coord.clone()),
        shutdown,
    )
    .await?;
    serve_until_signal(stop).await
}

async fn worker(a: WorkerArgs) -> Result<()> {
    let file = FileConfig::load(a.common.config.as_deref())?;
    let limits = a.common.limits.resolve(&file)?;
    let coordinator = a
        .coordinator
        .or(file.coordinator.clone())
        .context("a worker needs --coordinator HOST:PORT (or CROSSDOCK_COORDINATOR)")?;
    let secret = a
        .common
        .auth
        .resolve(&file, Missing::Required("a worker"))?;
    let tls = a.common.tls.resolve(&file)?;
    let tenancy = a.tenancy.resolve(&file)?;
    let dirs: Vec<PathBuf> = match a.data_dir {
        Some(list) => list
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .collect(),
        None => vec![file
            .data_dir
            .unwrap_or_else(|| default_data_dir().join("worker"))],
    };
    if dirs.is_empty() {
        anyhow::bail!("--data-dir names no directory");
    }
    let cfg = WorkerConfig {
        listen: pick(a.listen, file.listen, || DEFAULT_WORKER_LISTEN.into()),
        advertise: a.advertise_addr.or(file.advertise_addr),
        host: a.host.or(file.host).unwrap_or_default(),
        zone: a.zone.or(file.zone).unwrap_or_default(),
        coordinator,
        memory: parse_size(&pick(a.memory, file.memory, || DEFAULT_MEMORY.into()))?,
        data_dir: dirs[0].clone(),
        extra_data_dirs: dirs[1..].to_vec(),
        object_store: a.object_store.or(file.object_store),
        disk_quota: parse_quota(a.disk_quota.or(file.disk_quota))?,
        limits,
        secret,
        tls,
        tenancy,
        split_bytes: split_size(a.split_size.or(file.split_size))?,
        memory_only: a.memory_only || file.memory_only.unwrap_or(false),
        zero_copy_fetch: pick(a.zero_copy_fetch, file.zero_copy_fetch, || true),
    };
    if cfg.disk_quota.is_some() && cfg.object_store.is_none() {
        anyhow::bail!("--disk-quota needs --object-store: evicted partitions are read from it");
    }
    if cfg.memory_only && cfg.object_store.is_some() {
        anyhow::bail!(
            "--memory-only writes no partition files, so it has nothing to upload to --object-store"
        );
    }
    if cfg.memory < (16 << 20) {
        anyhow::bail!(
            "--memory {} is too small: a worker needs at least 16MiB",
            human_bytes(cfg.memory)
        );
    }
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let w = Worker::start(cfg.clone(), shutdown.clone())
        .await
        .with_context(|| format!("starting worker on {}", cfg.listen))?;
    println!(
        "crossdock worker listening on {} (advertised as {}, host {}, zone {}, memory budget {}, coordinator {})",
        w.addr,
        w.advertised,
        w.host,
        if w.zone.is_empty() { "unlabelled" } else { &w.zone },
        human_bytes(cfg.memory),
        cfg.coordinator
    );
    start_metrics(
        a.common.metrics_listen,
        file.metrics_listen,
        vec![w.clone()],
        None,
        shutdown,
    )
    .await?;
    serve_until_signal(stop).await
}

/// Runs until SIGINT or SIGTERM, then tells the server's tasks to stop.
async fn serve_until_signal(stop: tokio::sync::watch::Sender<bool>) -> Result<()> {
    flush_stdout();
    wait_for_signal().await?;
    let _ = stop.send(true);
    Ok(())
}

fn flush_stdout() {
    use std::io::Write;
    let _ = std::io::stdout().flush();
}

/// The class Spark loads as `spark.shuffle.manager`.
const SPARK_SHUFFLE_MANAGER: &str = "org.apache.spark.shuffle.crossdock.CrossdockShuffleManager";
/// The client's Spark SQL extension (reduce tasks placed on their partitions' hosts).
const SPARK_SQL_EXTENSIONS: &str = "org.apache.spark.sql.crossdock.CrossdockSqlExtensions";

fn spark_conf(a: SparkConfArgs) -> Result<()> {
    let jar = match a.jar {
        Some(j) => j,
        None => find_spark_jar(&a.spark)?,
    };
    if !jar.is_file() {
        anyhow::bail!(
            "the Spark client jar {} does not exist; build it with `make build`",
            jar.display()
        );
    }
    let jar = jar.canonicalize()?;
    println!("spark.shuffle.manager={SPARK_SHUFFLE_MANAGER}");
    println!("spark.crossdock.coordinator={}", a.coordinator);
    if a.spark == "3.5" {
        // The one property Spark 3.5 makes unavoidable (see --spark): a path that must exist
        // on the driver's and every executor's host.
        println!("spark.driver.extraClassPath={}", jar.display());
        println!("spark.executor.extraClassPath={}", jar.display());
        // A session PySpark 3.5 makes (Spark's constructor, not its builder) applies only the
        // extensions this names, not those the jar declares as services, so the SQL reduce
        // tasks would lose their placement without it (Spark 4 applies both everywhere).
        println!("spark.sql.extensions={SPARK_SQL_EXTENSIONS}");
    } else {
        println!("spark.jars={}", jar.display());
    }
    if let Some(ca) = a.tls_ca {
        let ca = ca
            .canonicalize()
            .with_context(|| format!("--tls-ca {}", ca.display()))?;
        println!("spark.crossdock.tls.ca={}", ca.display());
    }
    Ok(())
}

fn find_spark_jar(spark: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("the binary has no directory")?;
    let (built, name) = if spark == "3.5" {
        (
            "spark-3.5/crossdock-spark-3.5.jar",
            "crossdock-spark-3.5.jar",
        )
    } else {
        ("crossdock-spark.jar", "crossdock-spark.jar")
    };
    let candidates = [
        // target/release/crossdock in a checkout.
        dir.join("../../clients/spark/target").join(built),
        // An installed layout: the jar beside the binary.
        dir.join(name),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .with_context(|| {
            format!(
            "no Spark client jar found (looked at {}); build it with `make build` or pass --jar",
            candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        )
        })
}
