//! The running worker as its connections and background tasks see it: its storage, its
//! fetch buffers, its counters and its links to others.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossdock_proto::Message;

use super::links::Links;
use super::metrics::{Page, WorkerMetrics};
use super::storage::ShuffleStore;
use crate::limits::Gate;
use crate::memory::MemoryBudget;
use crate::metrics::Render;

/// Sum of the memory budgets of the workers started in this process.
pub static PROCESS_BUDGET: AtomicU64 = AtomicU64::new(0);

/// A running worker.
pub struct Worker {
    pub addr: SocketAddr,
    /// The address clients and the coordinator reach it at.
    pub advertised: String,
    pub store: Arc<ShuffleStore>,
    /// Credit for the buffers of fetch streams.
    pub fetch_budget: Arc<MemoryBudget>,
    pub metrics: Arc<WorkerMetrics>,
    /// The whole memory budget (pushes and fetch buffers).
    pub memory: u64,
    /// Random per process: tells the coordinator when this worker restarted.
    pub incarnation: u64,
    /// The host label registered with the coordinator (empty: the advertised address's).
    pub host: String,
    /// The zone label registered with the coordinator (empty: unlabelled).
    pub zone: String,
    pub links: Links,
    /// Admission of connections and of large frames.
    pub gate: Arc<Gate>,
    /// The cluster secret (`None`: authentication off): what each connection's
    /// handshake is checked against.
    pub secret: Option<Arc<crossdock_proto::auth::ClusterSecret>>,
    /// A partition past this many bytes here continues on another worker; 0: never.
    pub split_bytes: u64,
    /// File ranges of fetches go with `sendfile` when the reader takes stored records
    /// (turned off for good if the file system turns out not to support it).
    pub zero_copy_fetch: std::sync::atomic::AtomicBool,
}

impl Worker {
    /// The worker's `WorkerStats` answer.
    pub fn stats(&self) -> Message {
        let store = &self.store;
        Message::WorkerStats {
            worker_id: self.metrics.worker_id.load(Ordering::Relaxed),
            budget_bytes: self.memory,
            buffered_bytes: store.budget.used() + self.fetch_budget.used(),
            peak_buffered_bytes: store.budget.peak() + self.fetch_budget.peak(),
            stored_bytes: store.stored_bytes(),
            peak_rss_bytes: crate::metrics::peak_rss_bytes(),
            process_budget_bytes: PROCESS_BUDGET.load(Ordering::Relaxed),
        }
    }
}

impl Render for Worker {
    fn render(&self, out: &mut String) {
        Page {
            metrics: &self.metrics,
            store: &self.store,
            fetch_budget: &self.fetch_budget,
            memory: self.memory,
        }
        .render(out);
        crate::metrics::render_connections(out, "worker", self.gate.counts());
    }
}
