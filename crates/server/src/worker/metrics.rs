//! The worker's counters and its part of the `/metrics` page.

use std::fmt::Write;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::per_app::{self, AppTraffic, LABELLED_APPS};
use super::storage::ShuffleStore;
use crate::memory::MemoryBudget;
use crate::metrics::{describe, sample, ErrorCounts, LatencyHistogram};

/// Counters of the worker's request handling (the storage layer counts the rest).
#[derive(Default)]
pub struct WorkerMetrics {
    pub worker_id: AtomicU32,
    pub pushed_bytes: AtomicU64,
    pub pushed_batches: AtomicU64,
    pub duplicate_batches: AtomicU64,
    pub fetched_bytes: AtomicU64,
    pub fetched_batches: AtomicU64,
    /// Bytes of stored records sent from partition files with `sendfile`.
    pub zero_copy_bytes: AtomicU64,
    pub errors: ErrorCounts,
    /// A push from its frame's first byte to its acknowledgement being ready (the
    /// replica's included when there is one).
    pub push_ack: LatencyHistogram,
    /// A fetch from its request being read to its first frame being written.
    pub fetch_first_frame: LatencyHistogram,
    /// Bytes pushed and fetched per app.
    pub apps: AppTraffic,
}

/// What the page shows of one worker.
pub struct Page<'a> {
    pub metrics: &'a WorkerMetrics,
    pub store: &'a ShuffleStore,
    pub fetch_budget: &'a MemoryBudget,
    /// The worker's memory budget.
    pub memory: u64,
}

impl Page<'_> {
    /// Appends the worker's metrics in Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let m = self.metrics;
        let s = self.store.metrics();
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let labels = format!("worker=\"{}\"", m.worker_id.load(Ordering::Relaxed));
        let (apps, shuffles, partitions) = self.store.counts();
        let budget = &self.store.budget;
        let (waiters, quota_waiters) = budget.waiting();
        let congestion = &self.store.congestion;
        let rows: [(&str, &str, &str, u64); 23] = [
            ("crossdock_worker_pushed_bytes_total", "counter", "Payload bytes accepted from pushes.", get(&m.pushed_bytes)),
            ("crossdock_worker_pushed_batches_total", "counter", "Batches accepted from pushes.", get(&m.pushed_batches)),
            ("crossdock_worker_duplicate_batches_total", "counter", "Pushed batches dropped as duplicates of stored ones.", get(&m.duplicate_batches)),
            ("crossdock_worker_fetched_bytes_total", "counter", "Payload bytes sent to reducers.", get(&m.fetched_bytes)),
            ("crossdock_worker_fetched_batches_total", "counter", "Batches sent to reducers.", get(&m.fetched_batches)),
            ("crossdock_worker_zero_copy_fetched_bytes_total", "counter", "Bytes of stored records (headers included) sent to reducers from partition files with sendfile, unread by the worker.", get(&m.zero_copy_bytes)),
            ("crossdock_worker_flushed_bytes_total", "counter", "Payload bytes written to partition files.", get(&s.flushed_bytes)),
            ("crossdock_worker_flush_errors_total", "counter", "Failed partition file writes.", get(&s.flush_errors)),
            ("crossdock_worker_uploaded_bytes_total", "counter", "Partition file bytes uploaded to the object store.", get(&s.uploaded_bytes)),
            ("crossdock_worker_uploaded_segments_total", "counter", "Segments (objects) uploaded to the object store.", get(&s.uploaded_segments)),
            ("crossdock_worker_upload_errors_total", "counter", "Failed segment uploads (each is retried).", get(&s.upload_errors)),
            ("crossdock_worker_evicted_bytes_total", "counter", "Partition file bytes evicted from local disk (kept in the object store).", get(&s.evicted_bytes)),
            ("crossdock_worker_object_read_bytes_total", "counter", "Bytes read from the object store to serve fetches.", get(&s.object_read_bytes)),
            ("crossdock_worker_adopted_bytes_total", "counter", "Payload bytes restored from the object store for partitions whose copies were lost.", get(&s.adopted_bytes)),
            ("crossdock_worker_buffered_bytes", "gauge", "Shuffle bytes held in memory (pushed batches and fetch buffers).", budget.used() + self.fetch_budget.used()),
            ("crossdock_worker_peak_buffered_bytes", "gauge", "Largest number of shuffle bytes held in memory at once.", budget.peak() + self.fetch_budget.peak()),
            ("crossdock_worker_budget_bytes", "gauge", "The worker's memory budget for shuffle data.", self.memory),
            ("crossdock_worker_apps", "gauge", "Apps with data on this worker.", apps),
            ("crossdock_worker_shuffles", "gauge", "Shuffles with data on this worker.", shuffles),
            ("crossdock_worker_partitions", "gauge", "Partitions placed on this worker.", partitions),
            ("crossdock_worker_push_waiters", "gauge", "Pushes waiting for memory credit (fair completion or FIFO order, see --scheduling).", waiters as u64),
            ("crossdock_worker_quota_waiters", "gauge", "Pushes waiting because their app holds its share of the memory budget (--app-memory-share).", quota_waiters as u64),
            ("crossdock_worker_throttled_pushes_total", "counter", "Pushes of the heaviest app delayed by congestion throttling.", get(&congestion.delayed)),
        ];
        for (name, kind, help, v) in rows {
            describe(out, name, kind, help);
            sample(out, name, &labels, v);
        }
        describe(
            out,
            "crossdock_worker_errors_total",
            "counter",
            "Requests rejected, by error kind.",
        );
        m.errors
            .render(out, "crossdock_worker_errors_total", &labels);
        m.push_ack.render_labelled(
            out,
            "crossdock_worker_push_ack_seconds",
            "A pushed batch from its frame's first byte to its acknowledgement (the replica's included).",
            &labels,
        );
        m.fetch_first_frame.render_labelled(
            out,
            "crossdock_worker_fetch_first_frame_seconds",
            "A fetch from its request being read to its first frame written (queueing behind the connection's earlier replies included).",
            &labels,
        );
        s.flush_latency.render_labelled(
            out,
            "crossdock_worker_flush_seconds",
            "One flush of a partition's batches to its file (a blocking thread's wait included; a disk commit's sync is not).",
            &labels,
        );
        describe(
            out,
            "crossdock_worker_congestion_delay_seconds",
            "gauge",
            "The delay congestion throttling adds to the heaviest app's pushes (0: writes are not slowing down).",
        );
        let _ = writeln!(
            out,
            "crossdock_worker_congestion_delay_seconds{{{labels}}} {}",
            congestion.delay().as_secs_f64()
        );
        s.upload_latency.render_labelled(
            out,
            "crossdock_worker_upload_seconds",
            "One successful segment upload to the object store.",
            &labels,
        );
        let rows = per_app::rows(m.apps.snapshot(), self.store.app_usage(), LABELLED_APPS);
        per_app::render(out, &rows, &labels);
    }
}
