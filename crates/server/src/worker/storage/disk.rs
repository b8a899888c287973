//! Memory to local disk, and local disk to nothing: the flush policy, the flushes
//! themselves, what the partition files take on disk, and eviction of files the object
//! store holds whole.
//!
//! **Flush policy** ([`LocalDisk::relieve_pressure`]): batches stay in memory, where
//! reducers read them fastest, until the buffered bytes pass 90% of the budget; then the
//! largest partitions are written, in vectored sequential writes of up to
//! [`FLUSH_JOB_BYTES`] straight from the batch buffers, until the buffered bytes are under
//! 70%. Each write's memory goes back to the budget as soon as it is written, so on a
//! slow disk waiting pushes get credit at the disk's pace, in the scheduler's order,
//! rather than all at once after a whole partition (tens of MiB, seconds on a slow
//! disk). A round (what a partition held unflushed when it began) is written to its end
//! before anything pushed since. The same rule holds per application against its share
//! (`MemoryBudget::holdings`): an application holding more than 90% of its share, or
//! with a push waiting on it, has its largest partitions written until it holds under 70%
//! of it (less if the waiting push needs more room), so its pushes go on even while the
//! worker as a whole has room. A partition idle for [`IDLE_FLUSH`] is written too, so
//! memory held by finished or abandoned shuffles returns to the budget.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::error::StorageError;
use super::layout;
use super::metrics::StorageMetrics;
use super::partition::{FlushJob, Partition};
use super::upload::Uploader;
use crate::congestion::Congestion;
use crate::memory::MemoryBudget;

/// A partition that received nothing for this long is written to disk.
pub const IDLE_FLUSH: Duration = Duration::from_secs(30);
/// Flushes running at once on one worker.
const FLUSH_SLOTS: usize = 2;
/// Payload bytes one flush write takes at most (and at least one batch): small enough
/// that credit returns often on a slow disk (0.1 s at 40 MB/s), large enough that a fast
/// one still writes in long sequential runs.
pub const FLUSH_JOB_BYTES: u64 = 4 << 20;

/// The worker's local disks as a tier below its memory.
pub struct LocalDisk {
    roots: Vec<PathBuf>,
    /// Credit of buffered pushed bytes; a flush gives back what it wrote.
    budget: Arc<MemoryBudget>,
    /// Above this many buffered bytes the largest partitions are written to disk...
    high_water: u64,
    /// ...until the buffered bytes fall below this.
    low_water: u64,
    slots: Semaphore,
    /// Bytes of partition files on local disk.
    stored_bytes: AtomicU64,
    /// Set when a flush failed for lack of space, cleared by the next one that worked.
    disk_full: AtomicBool,
    metrics: Arc<StorageMetrics>,
    /// Where written files go next, if anywhere.
    uploads: Option<Arc<Uploader>>,
    /// Told how long each flush took per byte.
    congestion: Arc<Congestion>,
    /// Nothing is ever written (`WorkerConfig::memory_only`).
    memory_only: bool,
}

impl LocalDisk {
    pub fn new(
        roots: Vec<PathBuf>,
        budget: Arc<MemoryBudget>,
        metrics: Arc<StorageMetrics>,
        uploads: Option<Arc<Uploader>>,
        congestion: Arc<Congestion>,
        memory_only: bool,
    ) -> Arc<LocalDisk> {
        let total = budget.total();
        Arc::new(LocalDisk {
            roots,
            budget,
            high_water: total / 10 * 9,
            low_water: total / 10 * 7,
            slots: Semaphore::new(FLUSH_SLOTS),
            stored_bytes: AtomicU64::new(0),
            disk_full: AtomicBool::new(false),
            metrics,
            uploads,
            congestion,
            memory_only,
        })
    }

    /// Whether this worker has no disk tier: nothing is flushed, a full budget refuses.
    pub fn memory_only(&self) -> bool {
        self.memory_only
    }

    /// The buffered bytes above which flushing starts.
    pub fn high_water(&self) -> u64 {
        self.high_water
    }

    /// Bytes of partition files on local disk.
    pub fn stored_bytes(&self) -> u64 {
        self.stored_bytes.load(Ordering::Relaxed)
    }

    /// Counts bytes found on disk (recovered files).
    pub fn add_stored(&self, bytes: u64) {
        self.stored_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// True while the last flush failed for lack of space.
    pub fn is_full(&self) -> bool {
        self.disk_full.load(Ordering::Acquire)
    }

    /// The error of a write refused because the disk is full.
    pub fn full_error(&self) -> StorageError {
        StorageError::DiskFull {
            dirs: self
                .roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// Where written files are uploaded, if anywhere.
    pub fn uploads(&self) -> Option<&Arc<Uploader>> {
        self.uploads.as_ref()
    }

    /// Drops a deleted partition's memory and disk accounting.
    pub fn release(&self, part: &Partition) {
        let (memory, disk) = part.delete();
        self.budget.give_back(&part.app_id, memory);
        self.stored_bytes.fetch_sub(disk, Ordering::Relaxed);
    }

    /// The flush policy (see the module documentation), then eviction.
    pub fn relieve_pressure(self: &Arc<Self>, partitions: Vec<Arc<Partition>>, idle: Duration) {
        if self.memory_only {
            return;
        }
        let mut parts: Vec<(u64, bool, Arc<Partition>)> = partitions
            .iter()
            .filter_map(|p| {
                let st = p.lock();
                let pending: u64 = st.mem_bytes;
                let idle = st.last_push.elapsed() >= idle;
                drop(st);
                (pending > 0).then(|| (pending, idle, p.clone()))
            })
            .collect();
        parts.sort_by_key(|p| std::cmp::Reverse(p.0));
        let mut used = self.budget.used();
        let pressed = used > self.high_water;
        // Apps past 90% of their share, or with a push waiting on it: what they hold above
        // 70% of it (or above what lets the waiting push through, if that is less).
        let total = self.budget.total();
        let mut over: std::collections::HashMap<Arc<str>, u64> = self
            .budget
            .holdings()
            .into_iter()
            .filter(|h| h.limit < total && (h.held > h.limit / 10 * 9 || h.blocked > 0))
            .map(|h| {
                let target = (h.limit / 10 * 7).min(h.limit.saturating_sub(h.blocked));
                (h.app, h.held.saturating_sub(target))
            })
            .collect();
        for (bytes, idle, p) in parts {
            let app_over = over.get_mut(&p.app_id).filter(|excess| **excess > 0);
            if (pressed && used > self.low_water) || idle || app_over.is_some() {
                used = used.saturating_sub(bytes);
                if let Some(excess) = app_over {
                    *excess = excess.saturating_sub(bytes);
                }
                self.schedule_flush(p);
            }
        }
        self.evict(partitions);
    }

    /// Starts a flush of `part` unless one is already scheduled.
    pub fn schedule_flush(self: &Arc<Self>, part: Arc<Partition>) {
        if self.memory_only || part.flushing.swap(true, Ordering::AcqRel) {
            return;
        }
        let disk = self.clone();
        tokio::spawn(async move {
            let _slot = disk.slots.acquire().await.expect("never closed");
            while let Some(job) = part.take_flush(FLUSH_JOB_BYTES) {
                let path = part.path.clone();
                let started = std::time::Instant::now();
                let written = tokio::task::spawn_blocking(move || write_job(&path, job)).await;
                match written {
                    Ok((job, Ok(()))) => {
                        let took = started.elapsed();
                        disk.metrics.flush_latency.observe(took);
                        disk.congestion.on_flush(job.file_bytes, took);
                        disk.flushed(&part, &job)
                    }
                    Ok((job, Err(e))) => {
                        if !part.lock().deleted {
                            disk.flush_failed(&part, &job, e);
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        break;
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "flush task failed");
                        break;
                    }
                }
                // A round, once begun, is written to its end (a durable commit or
                // `flush_all` waits for it); after that, only while memory is pressed.
                if disk.budget.used() <= disk.low_water && !part.in_round() {
                    break;
                }
            }
            part.flushing.store(false, Ordering::Release);
        });
    }

    fn flushed(&self, part: &Arc<Partition>, job: &FlushJob) {
        self.disk_full.store(false, Ordering::Release);
        if let Some(freed) = part.complete_flush(job) {
            self.budget.give_back(&part.app_id, freed);
            StorageMetrics::add(&self.metrics.flushed_bytes, job.payload_bytes);
            self.stored_bytes
                .fetch_add(job.file_bytes, Ordering::Relaxed);
            if let Some(up) = &self.uploads {
                up.schedule(part.clone());
            }
        }
    }

    /// A failed flush leaves its batches in memory to be retried, and gives its range
    /// of the file back (cut, so no garbage sits between records).
    fn flush_failed(&self, part: &Partition, job: &FlushJob, e: std::io::Error) {
        tracing::error!(path = %part.path.display(), error = %e, "flush failed; batches stay in memory and will be retried");
        StorageMetrics::add(&self.metrics.flush_errors, 1);
        let no_space = e.kind() == std::io::ErrorKind::StorageFull
            || e.kind() == std::io::ErrorKind::QuotaExceeded;
        if no_space && !self.disk_full.swap(true, Ordering::AcqRel) {
            tracing::error!(dir = %part.path.display(), "disk full: this worker takes no data beyond its memory until space is freed");
        }
        part.abort_flush(job);
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .open(&part.path)
            .and_then(|f| f.set_len(job.offset));
    }

    /// The eviction policy: while the partition files on local disk take more than the
    /// disk quota, or the disk is full, the largest wholly uploaded partitions are
    /// evicted from it (their reads go to the object store from then on). Returns the
    /// bytes freed.
    pub fn evict(&self, partitions: Vec<Arc<Partition>>) -> u64 {
        let Some(up) = &self.uploads else {
            return 0;
        };
        let stored = self.stored_bytes();
        let excess = if self.is_full() {
            stored
        } else {
            match up.tier.disk_quota {
                Some(q) if stored > q => stored - q,
                _ => return 0,
            }
        };
        let mut parts: Vec<(u64, Arc<Partition>)> = partitions
            .into_iter()
            .filter_map(|p| {
                let st = p.lock();
                let local = st.file_written.saturating_sub(st.local_from);
                let whole = st.uploaded_to == st.file_written && st.file_end == st.file_written;
                drop(st);
                (local > 0 && whole).then_some((local, p))
            })
            .collect();
        parts.sort_by_key(|p| std::cmp::Reverse(p.0));
        let mut freed = 0;
        for (_, p) in parts {
            if freed >= excess {
                break;
            }
            match p.evict(&layout::evicted_marker(&p.path)) {
                None => {}
                Some(Ok(bytes)) => {
                    freed += bytes;
                    self.stored_bytes.fetch_sub(bytes, Ordering::Relaxed);
                    StorageMetrics::add(&self.metrics.evicted_bytes, bytes);
                }
                Some(Err(e)) => {
                    tracing::warn!(path = %p.path.display(), error = %e, "could not evict a partition file")
                }
            }
        }
        if freed > 0 {
            tracing::info!(
                freed,
                stored = stored - freed,
                "evicted uploaded partition files from local disk"
            );
        }
        freed
    }

    /// Syncs partition files to the device (a file evicted meanwhile needs no sync:
    /// only wholly uploaded files are evicted).
    pub async fn sync(paths: Vec<PathBuf>) -> Result<(), StorageError> {
        tokio::task::spawn_blocking(move || {
            for path in paths {
                match std::fs::File::open(&path) {
                    Ok(f) => f.sync_data()?,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            Ok::<(), std::io::Error>(())
        })
        .await
        .map_err(|source| StorageError::Task {
            what: "sync",
            source,
        })?
        .map_err(StorageError::io("syncing partition files"))
    }
}

fn write_job(path: &Path, job: FlushJob) -> (FlushJob, std::io::Result<()>) {
    let res = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(path)
        .and_then(|mut f| job.write_to(&mut f));
    (job, res)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::storage::partition::FlushJob;
    use crossdock_proto::AttemptId;

    #[test]
    fn a_partition_is_flushed_in_jobs_of_at_most_the_job_size_in_record_order() {
        let p = Partition::new(0, "app".into(), 0, PathBuf::from("/nonexistent"));
        let mib = |n: usize| bytes::Bytes::from(vec![7u8; n << 20]);
        // Pushed out of order: map 1's batches, then map 0's; one batch above the cap.
        for seq in 0..3 {
            p.insert(1, AttemptId(0), seq, 0, mib(1));
        }
        p.insert(0, AttemptId(0), 0, 0, mib(3));
        p.insert(0, AttemptId(0), 1, 0, mib(5));
        let mut jobs = Vec::new();
        while let Some(job) = p.take_flush(FLUSH_JOB_BYTES) {
            assert_eq!(p.complete_flush(&job), Some(job.payload_bytes));
            jobs.push(job);
        }
        let sizes: Vec<u64> = jobs.iter().map(|j| j.payload_bytes >> 20).collect();
        // (0,0) 3 MiB; (0,1) 5 MiB alone; then map 1's three 1 MiB batches together.
        assert_eq!(sizes, vec![3, 5, 3]);
        let order: Vec<(u32, u32)> = jobs
            .iter()
            .flat_map(|j| j.records.iter().map(|r| (r.0, r.2)))
            .collect();
        assert_eq!(order, vec![(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]);
        let mut end = 0;
        for job in &jobs {
            assert_eq!(
                job.offset, end,
                "each job follows the one before in the file"
            );
            end += job.file_bytes;
        }
        assert_eq!(p.mem_bytes(), 0);
    }

    #[test]
    fn a_round_is_written_to_its_end_before_later_pushes() {
        // A commit waiting for map 7's batches to be written must not be passed over by
        // batches of lower maps pushed while the round is being written.
        let p = Partition::new(0, "app".into(), 0, PathBuf::from("/nonexistent"));
        let mib = |n: usize| bytes::Bytes::from(vec![7u8; n << 20]);
        p.insert(7, AttemptId(0), 0, 0, mib(3));
        p.insert(7, AttemptId(0), 1, 0, mib(3));
        let first = p.take_flush(FLUSH_JOB_BYTES).unwrap();
        assert!(p.in_round());
        for m in 0..3 {
            p.insert(m, AttemptId(0), 0, 0, mib(1));
        }
        let second = p.take_flush(FLUSH_JOB_BYTES).unwrap();
        assert!(!p.in_round());
        let third = p.take_flush(FLUSH_JOB_BYTES).unwrap();
        let maps = |j: &FlushJob| j.records.iter().map(|r| (r.0, r.2)).collect::<Vec<_>>();
        assert_eq!(maps(&first), vec![(7, 0)]);
        assert_eq!(
            maps(&second),
            vec![(7, 1)],
            "the round goes on before maps 0-2"
        );
        assert_eq!(maps(&third), vec![(0, 0), (1, 0), (2, 0)]);
    }
}
