//! The worker: receives pushed batches, aggregates them per partition into one data
//! file each, and serves committed data to reducers.
//!
//! The rooms, lowest first (each uses only those above it in this list, never its
//! parent):
//!
//! | module | concern |
//! |---|---|
//! | [`config`] | settings and the split of the memory budget |
//! | [`storage`] | everything stored: memory, partition files, object store (its own layer) |
//! | [`per_app`] | per-app traffic and `/metrics` rows, with bounded label cardinality |
//! | [`metrics`] | the worker's counters and its `/metrics` rows |
//! | [`links`] | calls to others: forwarding to replicas, reports to the coordinator |
//! | [`node`] | [`Worker`]: what connections and background tasks share |
//! | [`sink`] | a connection's writing half: bytes, and file ranges with `sendfile` |
//! | [`fetch`] | streaming a fetch (storage opens and loads, this writes the frames) |
//! | [`reply`] | a connection's reply queue, in request order (storage waits: when done) |
//! | [`split`] | a push's answer for a hot partition: go on at its split |
//! | [`push`], [`control`] | a pushed batch; the coordinator's calls |
//! | [`conn`] | one connection: framing and dispatch |
//! | [`membership`] | registration and heartbeats |
//!
//! and this module: [`Worker::start`], which puts them together.

pub mod config;
pub mod conn;
pub mod control;
pub mod fetch;
pub mod links;
pub mod membership;
pub mod metrics;
pub mod node;
pub mod per_app;
pub mod push;
pub mod reply;
pub mod sink;
pub mod split;
pub mod storage;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crossdock_client::Keyring;
use tokio::net::TcpListener;

use crate::congestion::Congestion;
use crate::limits::Gate;
use crate::memory::MemoryBudget;
use crate::net::ShutdownSignal;
pub use config::WorkerConfig;
use links::Links;
pub use metrics::WorkerMetrics;
pub use node::Worker;
use node::PROCESS_BUDGET;
use storage::disk::IDLE_FLUSH;
use storage::object::ObjectTier;
use storage::{ShuffleStore, Tier};

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
        for d in cfg.data_dirs() {
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
        let incarnation = random_u64();
        let tier = match &cfg.object_store {
            None => None,
            Some(url) => {
                let invalid = |e: storage::object::ObjectError| {
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
                };
                let object = ObjectTier::open(url).map_err(invalid)?;
                object.probe(incarnation).await.map_err(invalid)?;
                tracing::info!(url = %url, disk_quota = ?cfg.disk_quota, "object-store tier ready");
                Some(Tier {
                    object,
                    writer: incarnation,
                    disk_quota: cfg.disk_quota,
                })
            }
        };
        let sharing = cfg.tenancy.sharing();
        let store = ShuffleStore::new(
            cfg.data_dirs(),
            Arc::new(MemoryBudget::shared(push, sharing)),
            max_batch,
            cfg.tenancy.app_stored_quota,
            Arc::new(Congestion::new(cfg.tenancy.congestion_step)),
            tier,
            cfg.memory_only,
        );
        // A memory-only worker writes no partition files and serves none left by an
        // earlier run with a disk (they would hold memory it cannot spill).
        let recovered = if cfg.memory_only {
            Ok(0)
        } else {
            store.recover()
        };
        match recovered {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(partitions = n, data_dir = %cfg.data_dir.display(), "found partition files of a previous run; the coordinator decides what still counts")
            }
            Err(e) => tracing::warn!(error = %e, "could not read the data left by a previous run"),
        }
        let worker = Arc::new(Worker {
            addr,
            advertised: advertised.clone(),
            store,
            fetch_budget: Arc::new(MemoryBudget::shared(fetch, sharing)),
            metrics: Arc::new(WorkerMetrics::default()),
            memory: cfg.memory,
            incarnation,
            host: if cfg.host.is_empty() {
                crossdock_client::host_of(&advertised).to_string()
            } else {
                cfg.host.clone()
            },
            zone: cfg.zone.clone(),
            links: Links::new(
                cfg.coordinator.clone(),
                Keyring::cluster(cfg.secret.clone())
                    .with_tls(cfg.tls.as_ref().map(|t| t.peers.clone())),
            ),
            gate: Gate::new(cfg.limits.clone()),
            secret: cfg.secret.clone(),
            split_bytes: cfg.split_bytes,
            zero_copy_fetch: cfg.zero_copy_fetch.into(),
        });
        tracing::info!(%addr, memory = cfg.memory, push_budget = push, max_batch, data_dir = %cfg.data_dir.display(), order = sharing.order.name(), app_memory_share = sharing.app_share, app_stored_quota = ?cfg.tenancy.app_stored_quota, "worker listening");
        let w = worker.clone();
        tokio::spawn(crate::net::accept_loop(
            "worker",
            listener,
            worker.gate.clone(),
            cfg.tls.as_ref().map(|t| t.identity.clone()),
            shutdown.clone(),
            move |stream, peer| conn::serve(stream, peer, w.clone()),
        ));
        if !cfg.memory_only {
            tokio::spawn(flusher(worker.store.clone(), shutdown.clone()));
        }
        if matches!(sharing.order, crate::memory::Order::FairCompletion(_)) {
            tokio::spawn(fair_completion(worker.clone(), shutdown.clone()));
        }
        tokio::spawn(membership::run(worker.clone(), shutdown));
        Ok(worker)
    }
}

/// Refreshes every app's remaining work in both budgets every 100 ms, the order the Fair
/// Completion Scheduler serves their waiters in.
async fn fair_completion(worker: Arc<Worker>, mut shutdown: ShutdownSignal) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = shutdown.changed() => return,
        }
        let work = worker.store.remaining_work();
        worker.fetch_budget.set_work(work.clone());
        worker.store.budget.set_work(work);
    }
}

/// Runs the flush and eviction policies when a push crosses the high-water mark or
/// waits for credit, and every 100 ms.
async fn flusher(store: Arc<ShuffleStore>, mut shutdown: ShutdownSignal) {
    loop {
        tokio::select! {
            _ = store.budget.pressure.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = shutdown.changed() => return,
        }
        store.relieve_pressure(IDLE_FLUSH);
    }
}
