//! Disk to object store: partition files are uploaded behind the flush, in segments.
//!
//! After each flush, the written, not yet uploaded part of a partition file,
//! `[uploaded_to, file_written)`, goes up as one immutable segment. A partition's
//! uploads run one at a time, so flushes made during an upload gather into the next
//! segment; at most [`UPLOAD_SLOTS`] run per worker.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

use super::metrics::StorageMetrics;
use super::object::ObjectTier;
use super::partition::Partition;

/// Uploads running at once on one worker.
pub const UPLOAD_SLOTS: usize = 2;
/// Pause before a failed upload is tried again.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// How a worker uses its object store.
pub struct Tier {
    pub object: Arc<ObjectTier>,
    /// Names this worker's segments (its incarnation).
    pub writer: u64,
    /// Above this many bytes of partition files on local disk, wholly uploaded
    /// partitions are evicted from it (read from the object store from then on).
    pub disk_quota: Option<u64>,
}

/// Schedules and runs uploads.
pub struct Uploader {
    pub tier: Tier,
    slots: Semaphore,
    metrics: Arc<StorageMetrics>,
    /// The last failed upload, for the error of a commit that waits for uploads.
    last_error: Mutex<Option<String>>,
}

impl Uploader {
    pub fn new(tier: Tier, metrics: Arc<StorageMetrics>) -> Arc<Uploader> {
        Arc::new(Uploader {
            tier,
            slots: Semaphore::new(UPLOAD_SLOTS),
            metrics,
            last_error: Mutex::new(None),
        })
    }

    /// The error of the last failed upload, unless one succeeded since.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().expect("lock").clone()
    }

    /// Starts uploading the written, not yet uploaded part of `part`'s file as one
    /// segment, unless an upload of it is already scheduled. A failed upload is retried
    /// every 500 ms (without holding a slot) until it succeeds or the partition is
    /// deleted.
    pub fn schedule(self: &Arc<Self>, part: Arc<Partition>) {
        if part.to_upload().is_none() || part.uploading.swap(true, Ordering::AcqRel) {
            return;
        }
        let up = self.clone();
        tokio::spawn(async move {
            let object = &up.tier.object;
            while let Some(range) = part.to_upload() {
                let slot = up.slots.acquire().await.expect("never closed");
                let key: Arc<str> = ObjectTier::segment_key(
                    &part.app_id,
                    part.shuffle_id,
                    part.id,
                    up.tier.writer,
                    range.start,
                )
                .into();
                let started = std::time::Instant::now();
                let res = object.upload(&key, &part.path, range.clone()).await;
                drop(slot);
                match res {
                    Ok(()) => {
                        up.metrics.upload_latency.observe(started.elapsed());
                        let bytes = range.end - range.start;
                        if !part.uploaded(range, key.clone()) {
                            let _ = object.delete(&key).await; // deleted meanwhile
                            break;
                        }
                        StorageMetrics::add(&up.metrics.uploaded_bytes, bytes);
                        StorageMetrics::add(&up.metrics.uploaded_segments, 1);
                        *up.last_error.lock().expect("lock") = None;
                    }
                    Err(_) if part.lock().deleted => break,
                    Err(e) => {
                        tracing::error!(error = %e, "upload failed; retrying in 500 ms");
                        StorageMetrics::add(&up.metrics.upload_errors, 1);
                        *up.last_error.lock().expect("lock") = Some(e.to_string());
                        tokio::time::sleep(RETRY_AFTER).await;
                    }
                }
            }
            part.uploading.store(false, Ordering::Release);
            // A flush that ended after the last look saw the flag still set.
            if part.to_upload().is_some() {
                up.schedule(part);
            }
        });
    }

    /// Deletes what every worker uploaded of a shuffle, in the background.
    pub fn delete_shuffle(&self, app_id: &str, shuffle_id: u32) {
        let (object, app_id) = (self.tier.object.clone(), app_id.to_string());
        tokio::spawn(async move {
            if let Err(e) = object.delete_shuffle(&app_id, shuffle_id).await {
                tracing::warn!(error = %e, "could not delete a shuffle's segments");
            }
        });
    }

    /// Deletes what every worker uploaded of an app, in the background.
    pub fn delete_app(&self, app_id: &str) {
        let (object, app_id) = (self.tier.object.clone(), app_id.to_string());
        tokio::spawn(async move {
            if let Err(e) = object.delete_app(&app_id).await {
                tracing::warn!(error = %e, "could not delete an app's segments");
            }
        });
    }
}
