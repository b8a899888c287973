//! The embedded default: a coordinator and N workers in one process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::coordinator::config::Quotas;
use crate::coordinator::{Coordinator, CoordinatorConfig};
use crate::limits::ConnLimits;
use crate::net::ShutdownSignal;
use crate::worker::{Worker, WorkerConfig};

/// How a standalone cluster runs.
#[derive(Debug, Clone)]
pub struct StandaloneConfig {
    /// The coordinator's address; workers listen on ephemeral ports of the same host.
    pub listen: String,
    pub workers: u32,
    /// Memory budget of each worker.
    pub memory: u64,
    /// Parent directory; the cluster works in a directory of its own inside it and
    /// deletes only that directory when it stops.
    pub data_dir: PathBuf,
    pub worker_timeout: Duration,
    /// Copies of every partition (1 or 2).
    pub replication: u32,
    /// The commit rule (see [`CoordinatorConfig::durability`]).
    pub durability: crossdock_proto::Durability,
    /// The workers' object store, if any (see [`WorkerConfig::object_store`]).
    pub object_store: Option<String>,
    /// Each worker's disk quota (see [`WorkerConfig::disk_quota`]).
    pub disk_quota: Option<u64>,
    /// Connection limits of the coordinator and of each worker (each counts its own).
    pub limits: ConnLimits,
    /// What clients may register.
    pub quotas: Quotas,
    /// When the coordinator predicts a shuffle's partition sizes (see
    /// [`CoordinatorConfig::prediction_threshold`]).
    pub prediction_threshold: f64,
    /// Whether the coordinator re-places predicted shuffles (see
    /// [`CoordinatorConfig::rebalance`]).
    pub rebalance: bool,
    /// The secret the coordinator and workers share (see
    /// [`CoordinatorConfig::secret`]); `None`: authentication is off.
    pub secret: Option<std::sync::Arc<crossdock_proto::auth::ClusterSecret>>,
    /// TLS on every connection this server accepts and opens to its peers
    /// (`docs/security.md`, "TLS"); `None`: plain TCP.
    pub tls: Option<crossdock_client::tls::ServerTls>,
    /// How each worker is shared between applications.
    pub tenancy: crate::worker::config::Tenancy,
    /// Each worker's split size (see [`WorkerConfig::split_bytes`]).
    pub split_bytes: u64,
    /// Each worker keeps data in memory only (see [`WorkerConfig::memory_only`]).
    pub memory_only: bool,
    /// Each worker's fetches from disk use `sendfile` (see [`WorkerConfig::zero_copy_fetch`]).
    pub zero_copy_fetch: bool,
}

/// A running standalone cluster.
pub struct Standalone {
    pub coordinator: Arc<Coordinator>,
    pub workers: Vec<Arc<Worker>>,
    /// The cluster's own directory (removed by [`Standalone::cleanup`]).
    pub own_dir: PathBuf,
}

impl Standalone {
    /// Starts the coordinator and the workers, and waits until every worker registered.
    pub async fn start(
        cfg: StandaloneConfig,
        shutdown: ShutdownSignal,
    ) -> std::io::Result<Standalone> {
        if cfg.workers == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "--workers must be at least 1",
            ));
        }
        std::fs::create_dir_all(&cfg.data_dir)?;
        let own_dir = cfg
            .data_dir
            .join(format!("crossdock-standalone-{}", std::process::id()));
        std::fs::create_dir_all(&own_dir)?;
        let mut ccfg = CoordinatorConfig::new(cfg.listen.clone(), own_dir.join("coordinator"));
        ccfg.worker_timeout = cfg.worker_timeout;
        ccfg.replication = cfg.replication;
        ccfg.durability = cfg.durability;
        ccfg.limits = cfg.limits.clone();
        ccfg.quotas = cfg.quotas.clone();
        ccfg.prediction_threshold = cfg.prediction_threshold;
        ccfg.rebalance = cfg.rebalance;
        ccfg.secret = cfg.secret.clone();
        ccfg.tls = cfg.tls.clone();
        let coordinator = Coordinator::start(ccfg, shutdown.clone()).await?;
        let host = worker_host(coordinator.addr);
        let mut workers = Vec::new();
        for i in 0..cfg.workers {
            let wcfg = WorkerConfig {
                listen: format!("{host}:0"),
                advertise: None,
                host: String::new(),
                zone: String::new(),
                coordinator: coordinator.addr.to_string(),
                memory: cfg.memory,
                data_dir: own_dir.join(format!("worker-{i}")),
                extra_data_dirs: Vec::new(),
                object_store: cfg.object_store.clone(),
                disk_quota: cfg.disk_quota,
                limits: cfg.limits.clone(),
                secret: cfg.secret.clone(),
                tls: cfg.tls.clone(),
                tenancy: cfg.tenancy,
                split_bytes: cfg.split_bytes,
                memory_only: cfg.memory_only,
                zero_copy_fetch: cfg.zero_copy_fetch,
            };
            workers.push(Worker::start(wcfg, shutdown.clone()).await?);
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while coordinator.lock().counts().2 < cfg.workers as u64 {
            if tokio::time::Instant::now() > deadline {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "workers did not register within 10 s",
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(Standalone {
            coordinator,
            workers,
            own_dir,
        })
    }

    /// Removes the cluster's own directory (and nothing else).
    pub fn cleanup(&self) -> std::io::Result<()> {
        match std::fs::remove_dir_all(&self.own_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

fn worker_host(coordinator: SocketAddr) -> String {
    match coordinator {
        SocketAddr::V4(a) if a.ip().is_unspecified() => "127.0.0.1".into(),
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) if a.ip().is_unspecified() => "[::1]".into(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    }
}
