//! The worker: receives pushed batches, aggregates them per partition into one data
//! file each, and serves committed data to reducers.
//!
//! - [`partition`]: one partition's file, in-memory batches and map index.
//! - [`store`]: apps, shuffles, commits, deletion, flushing, uploading and eviction.
//! - [`object_store`]: the object-store tier (S3 or a mounted DFS, through opendal).
//! - `conn`: the per-connection protocol handler (push, fetch, control).

mod conn;
pub mod object_store;
pub mod partition;
pub mod store;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use crossdock_client::RpcConnection;
use crossdock_proto::{ErrorCode, Message, PushHeader, FLAG_REPLICA};
use tokio::net::TcpListener;

use crate::error::ServerError;
use crate::memory::MemoryBudget;
use crate::metrics::{describe, sample, ErrorCounts, Render};
use crate::ShutdownSignal;
use object_store::ObjectStore;
use store::{Store, Tier};

/// Largest batch a worker accepts by default.
pub const DEFAULT_MAX_BATCH: u64 = 16 << 20;
/// Sum of the memory budgets of the workers started in this process.
static PROCESS_BUDGET: AtomicU64 = AtomicU64::new(0);

/// A partition that received nothing for this long is written to disk.
pub const IDLE_FLUSH_SECS: u64 = 30;
/// Largest chunk of a fetch stream.
pub const FETCH_CHUNK: u64 = 4 << 20;

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Address to listen on for pushes, fetches and coordinator calls.
    pub listen: String,
    /// Address given to the coordinator for clients to connect to; defaults to the
    /// bound address (which must then not be a wildcard such as 0.0.0.0).
    pub advertise: Option<String>,
    /// The coordinator's address.
    pub coordinator: String,
    /// Budget for buffered shuffle data (pushed batches in memory and fetch buffers).
    pub memory: u64,
    /// Directory for partition files.
    pub data_dir: PathBuf,
    /// More directories (other disks): partitions are spread over all of them.
    pub extra_data_dirs: Vec<PathBuf>,
    /// The object store partition files are uploaded to (`s3://bucket/prefix?...` or
    /// `file:///path`), if any.
    pub object_store: Option<String>,
    /// With an object store: above this many bytes of partition files on local disk,
    /// wholly uploaded partitions are evicted from it.
    pub disk_quota: Option<u64>,
}

impl WorkerConfig {
    /// The budget's split: (push credit, fetch buffer credit, max batch).
    pub fn derived(&self) -> (u64, u64, u64) {
        let fetch = (self.memory / 8).clamp(FETCH_CHUNK.min(self.memory / 2), 64 << 20);
        let push = self.memory - fetch;
        let max_batch = DEFAULT_MAX_BATCH.min(push / 4).max(1);
        (push, fetch, max_batch)
    }
}

/// Counters of one worker.
#[derive(Default)]
pub struct WorkerMetrics {
    pub worker_id: AtomicU32,
    pub pushed_bytes: AtomicU64,
    pub pushed_batches: AtomicU64,
    pub duplicate_batches: AtomicU64,
    pub fetched_bytes: AtomicU64,
    pub fetched_batches: AtomicU64,
    pub flushed_bytes: AtomicU64,
    pub flush_errors: AtomicU64,
    pub uploaded_bytes: AtomicU64,
    pub uploaded_segments: AtomicU64,
    pub upload_errors: AtomicU64,
    pub evicted_bytes: AtomicU64,
    pub object_read_bytes: AtomicU64,
    pub adopted_bytes: AtomicU64,
    pub errors: ErrorCounts,
}

/// A running worker.
pub struct Worker {
    pub addr: SocketAddr,
    pub advertised: String,
    pub store: Arc<Store>,
    pub fetch_budget: Arc<MemoryBudget>,
    pub metrics: Arc<WorkerMetrics>,
    pub memory: u64,
    /// Random per process: tells the coordinator when this worker restarted.
    pub incarnation: u64,
    coordinator: String,
    /// Connections to the workers this one forwards replicas to.
    peers: crate::peers::Peers,
}

/// A random number for this process (not for cryptography).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

impl Worker {
    /// Binds, registers with the coordinator in the background and serves until
    /// `shutdown` fires.
    pub async fn start(
        cfg: WorkerConfig,
        shutdown: ShutdownSignal,
    ) -> std::io::Result<Arc<Worker>> {
        let (push, fetch, max_batch) = cfg.derived();
        std::fs::create_dir_all(&cfg.data_dir)?;
        for d in &cfg.extra_data_dirs {
            std::fs::create_dir_all(d)?;
        }
        let listener = TcpListener::bind(&cfg.listen).await?;
        let addr = listener.local_addr()?;
        let advertised = match &cfg.advertise {
            Some(a) => a.clone(),
            None if addr.ip().is_unspecified() => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("worker listens on the wildcard {addr}; give --advertise-addr HOST:PORT so clients can reach it"),
                ))
            }
            None => addr.to_string(),
        };
        PROCESS_BUDGET.fetch_add(cfg.memory, Ordering::Relaxed);
        let metrics = Arc::new(WorkerMetrics::default());
        let roots: Vec<PathBuf> = std::iter::once(cfg.data_dir.clone())
            .chain(cfg.extra_data_dirs.iter().cloned())
            .collect();
        let incarnation = random_u64();
        let tier = match &cfg.object_store {
            None => None,
            Some(url) => {
                let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
                let store = ObjectStore::open(url).map_err(invalid)?;
                store.probe(incarnation).await.map_err(invalid)?;
                tracing::info!(url = %url, disk_quota = ?cfg.disk_quota, "object-store tier ready");
                Some(Tier {
                    store,
                    writer: incarnation,
                    disk_quota: cfg.disk_quota,
                })
            }
        };
        let store = Store::new(
            roots,
            Arc::new(MemoryBudget::new(push)),
            max_batch,
            metrics.clone(),
            tier,
        );
        match store.recover() {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(partitions = n, data_dir = %cfg.data_dir.display(), "found partition files of a previous run; the coordinator decides what still counts")
            }
            Err(e) => tracing::warn!(error = %e, "could not read the data left by a previous run"),
        }
        let worker = Arc::new(Worker {
            addr,
            advertised,
            store,
            fetch_budget: Arc::new(MemoryBudget::new(fetch)),
            metrics,
            memory: cfg.memory,
            incarnation,
            coordinator: cfg.coordinator.clone(),
            peers: crate::peers::Peers::default(),
        });
        tracing::info!(%addr, memory = cfg.memory, push_budget = push, max_batch, data_dir = %cfg.data_dir.display(), "worker listening");
        let w = worker.clone();
        tokio::spawn(crate::accept_loop(
            "worker",
            listener,
            shutdown.clone(),
            move |stream| conn::serve(stream, w.clone()),
        ));
        tokio::spawn(flusher(worker.store.clone(), shutdown.clone()));
        tokio::spawn(membership(
            worker.clone(),
            cfg.coordinator.clone(),
            shutdown,
        ));
        Ok(worker)
    }

    /// Sends a pushed batch on to the partition's replica at `addr`. Returns once the
    /// frame is written, with a task that resolves to the reply for the pusher: `Ok`
    /// once the replica acknowledged, an error otherwise.
    pub(crate) async fn forward(
        self: &Arc<Self>,
        addr: &str,
        header: &PushHeader,
        payload: &Bytes,
    ) -> Result<tokio::task::JoinHandle<Message>, ServerError> {
        let unavailable = |e: &dyn std::fmt::Display| {
            ServerError::new(
                ErrorCode::WorkerUnavailable,
                format!("could not replicate the batch to {addr}: {e}"),
            )
        };
        // A cached connection may have broken since its last use: reconnect once.
        let mut retried = false;
        let (conn, rx) = loop {
            let conn = match self.peers.get(addr).await {
                Ok(c) => c,
                Err(e) => {
                    self.report_failure(addr);
                    return Err(unavailable(&e));
                }
            };
            match conn.start_push_flagged(header, payload, FLAG_REPLICA).await {
                Ok(rx) => break (conn, rx),
                Err(e) if !retried => {
                    retried = true;
                    tracing::debug!(error = %e, %addr, "replica connection broke; reconnecting");
                }
                Err(e) => {
                    self.report_failure(addr);
                    return Err(unavailable(&e));
                }
            }
        };
        let worker = self.clone();
        let addr = addr.to_string();
        Ok(tokio::spawn(async move {
            match conn.wait(rx).await {
                Ok(_) => Message::Ok,
                Err(e) => {
                    if e.is_transport() {
                        worker.report_failure(&addr);
                    }
                    let code = match &e {
                        crossdock_client::ClientError::Remote { code, .. } => {
                            ErrorCode::from_u16(*code).unwrap_or(ErrorCode::WorkerUnavailable)
                        }
                        _ => ErrorCode::WorkerUnavailable,
                    };
                    worker.metrics.errors.inc(code);
                    ServerError::new(code, format!("replica {addr}: {e}")).to_message()
                }
            }
        }))
    }

    /// Tells the coordinator that this worker's copy of a partition holds a corrupt
    /// committed batch (waits up to 3 s for it to take note).
    pub(crate) async fn report_corruption(&self, app_id: &str, shuffle_id: u32, partition: u32) {
        tracing::error!(app = %app_id, shuffle_id, partition, "corrupt data in a partition file; reporting the copy as lost");
        let msg = Message::ReportCorruption {
            app_id: app_id.to_string(),
            shuffle_id,
            partition,
            worker_addr: self.advertised.clone(),
        };
        let report = async {
            let c = RpcConnection::connect(&self.coordinator).await?;
            c.call(&msg).await
        };
        match tokio::time::timeout(Duration::from_secs(3), report).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "could not report corrupt data"),
            Err(_) => {
                tracing::warn!("the coordinator did not take the corruption report within 3 s")
            }
        }
    }

    /// Tells the coordinator (in the background) that `addr` did not answer.
    pub(crate) fn report_failure(&self, addr: &str) {
        let coordinator = self.coordinator.clone();
        let addr = addr.to_string();
        tokio::spawn(async move {
            let res = async {
                let c = RpcConnection::connect(&coordinator).await?;
                c.call(&Message::ReportWorkerFailure { addr: addr.clone() })
                    .await
            }
            .await;
            if let Err(e) = res {
                tracing::warn!(error = %e, %addr, "could not report an unreachable worker");
            }
        });
    }

    /// The worker's `WorkerStats` answer.
    pub fn stats(&self) -> Message {
        Message::WorkerStats {
            worker_id: self.metrics.worker_id.load(Ordering::Relaxed),
            budget_bytes: self.memory,
            buffered_bytes: self.store.budget.used() + self.fetch_budget.used(),
            peak_buffered_bytes: self.store.budget.peak() + self.fetch_budget.peak(),
            stored_bytes: self.store.stored_bytes.load(Ordering::Relaxed),
            peak_rss_bytes: crate::metrics::peak_rss_bytes(),
            process_budget_bytes: PROCESS_BUDGET.load(Ordering::Relaxed),
        }
    }
}

/// Runs the flush policy ([`Store::relieve_pressure`]) when a push crosses the
/// high-water mark or waits for credit, and every 100 ms.
async fn flusher(store: Arc<Store>, mut shutdown: ShutdownSignal) {
    let idle = Duration::from_secs(IDLE_FLUSH_SECS);
    loop {
        tokio::select! {
            _ = store.budget.pressure.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = shutdown.changed() => return,
        }
        store.relieve_pressure(idle);
    }
}

/// Registers with the coordinator and sends heartbeats; re-registers when the
/// coordinator forgot this worker, reconnects when it is unreachable.
async fn membership(worker: Arc<Worker>, coordinator: String, mut shutdown: ShutdownSignal) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let session = async {
            let conn = RpcConnection::connect(&coordinator).await?;
            let reply = conn
                .call(&Message::RegisterWorker {
                    addr: worker.advertised.clone(),
                    memory_budget: worker.memory,
                    incarnation: worker.incarnation,
                })
                .await?;
            let Message::WorkerRegistered {
                worker_id,
                heartbeat_ms,
            } = reply
            else {
                return Err(crossdock_client::ClientError::Unexpected {
                    addr: coordinator.clone(),
                    what: format!("{reply:?}"),
                });
            };
            worker.metrics.worker_id.store(worker_id, Ordering::Relaxed);
            tracing::info!(worker_id, %coordinator, "registered with the coordinator");
            loop {
                tokio::time::sleep(Duration::from_millis(heartbeat_ms.max(10) as u64)).await;
                let hb = Message::Heartbeat {
                    worker_id,
                    buffered_bytes: worker.store.budget.used(),
                    stored_bytes: worker.store.stored_bytes.load(Ordering::Relaxed),
                    disk_full: worker.store.disk_full.load(Ordering::Relaxed),
                };
                match conn.call(&hb).await {
                    Ok(_) => {}
                    Err(e) if e.code() == Some(ErrorCode::UnknownWorker) => {
                        tracing::warn!(
                            "coordinator no longer knows this worker; registering again"
                        );
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        tokio::select! {
            res = session => {
                match res {
                    Ok(()) => backoff = Duration::from_millis(100),
                    Err(e) => {
                        tracing::warn!(error = %e, retry_in = ?backoff, "coordinator unreachable");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
            _ = shutdown.changed() => return,
        }
    }
}

impl Render for Worker {
    fn render(&self, out: &mut String) {
        let m = &self.metrics;
        let id = m.worker_id.load(Ordering::Relaxed);
        let labels = format!("worker=\"{id}\"");
        let l = labels.as_str();
        let (apps, shuffles, partitions) = self.store.counts();
        let rows: [(&str, &str, &str, u64); 19] = [
            (
                "crossdock_worker_pushed_bytes_total",
                "counter",
                "Payload bytes accepted from pushes.",
                m.pushed_bytes.load(Ordering::Relaxed),
            ),
            (
                "crossdock_worker_pushed_batches_total",
                "counter",
                "Batches accepted from pushes.",
                m.pushed_batches.load(Ordering::Relaxed),
            ),
            (
                "crossdock_worker_duplicate_batches_total",
                "counter",
                "Pushed batches dropped as duplicates of stored ones.",
                m.duplicate_batches.load(Ordering::Relaxed),
            ),
            (
                "crossdock_worker_fetched_bytes_total",
                "counter",
                "Payload bytes sent to reducers.",
                m.fetched_bytes.load(Ordering::Relaxed),
            ),
            (
                "crossdock_worker_fetched_batches_total",
                "counter",
                "Batches sent to reducers.",
                m.fetched_batches.load(Ordering::Relaxed),
            ),
            (
                "crossdock_worker_flushed_bytes_total",
                "counter",
                "Payload bytes written to partition files.",
                m.flushed_bytes.load(Ordering::Relaxed),
            ),
            (
                "crossdock_worker_flush_errors_total",
                "counter",
                "Failed partition file writes.",
                m.flush_errors.load(Ordering::Relaxed),
            ),
            (
                "crossdock_worker_uploaded_bytes_total",
                "counter",
                "Partition file bytes uploaded to the object store.",
                m.uploaded_bytes.load(Ordering::Relaxed),
            ),
            (
                "crossdock_worker_uploaded_segments_total",
                "counter",
                "Segments (objects) uploaded to the object store.",
                m.uploaded_segments.load(Ordering::Relaxed),
            ),
            (
                "crossdock_worker_upload_errors_total",
                "counter",
                "Failed segment uploads (each is retried).",
                m.upload_errors.load(Ordering::Relaxed),
            ),
            (
                "crossdock_worker_evicted_bytes_total",
                "counter",
                "Partition file bytes evicted from local disk (kept in the object store).",
                m.evicted_bytes.load(Ordering::Relaxed),
            ),
            (
                "crossdock_worker_object_read_bytes_total",
                "counter",
                "Bytes read from the object store to serve fetches.",
                m.object_read_bytes.load(Ordering::Relaxed),
            ),
            (
                "crossdock_worker_adopted_bytes_total",
                "counter",
                "Payload bytes restored from the object store for partitions whose copies were lost.",
                m.adopted_bytes.load(Ordering::Relaxed),
            ),
            (
                "crossdock_worker_buffered_bytes",
                "gauge",
                "Shuffle bytes held in memory (pushed batches and fetch buffers).",
                self.store.budget.used() + self.fetch_budget.used(),
            ),
            (
                "crossdock_worker_peak_buffered_bytes",
                "gauge",
                "Largest number of shuffle bytes held in memory at once.",
                self.store.budget.peak() + self.fetch_budget.peak(),
            ),
            (
                "crossdock_worker_budget_bytes",
                "gauge",
                "The worker's memory budget for shuffle data.",
                self.memory,
            ),
            (
                "crossdock_worker_apps",
                "gauge",
                "Apps with data on this worker.",
                apps,
            ),
            (
                "crossdock_worker_shuffles",
                "gauge",
                "Shuffles with data on this worker.",
                shuffles,
            ),
            (
                "crossdock_worker_partitions",
                "gauge",
                "Partitions placed on this worker.",
                partitions,
            ),
        ];
        for (name, kind, help, v) in rows {
            describe(out, name, kind, help);
            sample(out, name, l, v);
        }
        describe(
            out,
            "crossdock_worker_errors_total",
            "counter",
            "Requests rejected, by error kind.",
        );
        m.errors.render(out, "crossdock_worker_errors_total", l);
    }
}
