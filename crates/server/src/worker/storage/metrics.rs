//! Counters of the storage layer, read by the worker's `/metrics` page.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::metrics::LatencyHistogram;

/// What the storage layer did since the worker started.
#[derive(Default)]
pub struct StorageMetrics {
    /// Payload bytes written to partition files.
    pub flushed_bytes: AtomicU64,
    /// Failed partition file writes.
    pub flush_errors: AtomicU64,
    /// Partition file bytes uploaded to the object store.
    pub uploaded_bytes: AtomicU64,
    /// Segments (objects) uploaded.
    pub uploaded_segments: AtomicU64,
    /// Failed segment uploads (each is retried).
    pub upload_errors: AtomicU64,
    /// Partition file bytes evicted from local disk.
    pub evicted_bytes: AtomicU64,
    /// Bytes read from the object store to serve fetches.
    pub object_read_bytes: AtomicU64,
    /// Payload bytes restored from the object store for lost partitions.
    pub adopted_bytes: AtomicU64,
    /// One flush of a partition's batches to its file (page cache), from the write's
    /// start (waiting for a blocking thread included) to its end. The sync a `disk`
    /// commit asks for is separate (part of the commit).
    pub flush_latency: LatencyHistogram,
    /// One successful segment upload to the object store.
    pub upload_latency: LatencyHistogram,
}

impl StorageMetrics {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
