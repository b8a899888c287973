//! The worker's storage layer: everything a worker keeps of the shuffles placed on it,
//! in memory, in partition files on its disks and in the object store. The layer knows
//! nothing of connections or of the protocol's framing; the worker's handlers call the
//! [`ShuffleStore`] and turn its [`StorageError`]s into replies.
//!
//! The modules, lowest first (each uses only those above it in this list):
//!
//! | module | concern |
//! |---|---|
//! | [`record`] | the stored record format: written, parsed and checked in one place |
//! | [`layout`] | names of directories, files and keys; `shuffle.meta` |
//! | [`error`], [`metrics`] | what this layer reports |
//! | [`object`] | the object tier: one S3 or DFS store, through opendal |
//! | [`split`] | whether a partition continues on another worker |
//! | [`partition`] | one partition: its batches in memory, its file, its map index |
//! | [`shuffle`] | one shuffle: its partitions here and its committed attempts |
//! | [`registry`] | the apps and shuffles held |
//! | [`upload`] | disk to object store, behind the flush |
//! | [`disk`] | memory to disk (the flush policy), disk accounting, eviction |
//! | [`durability`] | a commit's wait for its data to be on disk or uploaded |
//! | [`recovery`] | a restarted worker's files, indexed again |
//! | [`adopt`] | a lost partition restored from the object store |
//! | [`read`] | a fetch's batches, from memory, file or object store, checked |
//!
//! and this module, [`ShuffleStore`], the face the worker's handlers use.

pub mod adopt;
pub mod disk;
pub mod durability;
pub mod error;
pub mod layout;
pub mod metrics;
pub mod object;
pub mod partition;
pub mod read;
pub mod record;
pub mod recovery;
pub mod registry;
pub mod shuffle;
pub mod split;
pub mod upload;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use crossdock_proto::{AttemptId, Durability, PartitionBytes, PushHeader, ResumePoint};

use crate::app_limits::{stricter, AppLimits};
use crate::congestion::Congestion;
use crate::memory::MemoryBudget;
use crossdock_policy::fair_completion::RemainingWork;
use disk::LocalDisk;
pub use error::StorageError;
pub use metrics::StorageMetrics;
use object::ObjectTier;
pub use partition::RunCut;
use partition::{Insert, Partition, Piece, ReadView};
use read::{ChunkReader, Loaded};
use registry::Registry;
use shuffle::Shuffle;
pub use upload::Tier;
use upload::Uploader;

/// How long a fetch waits for a partition being restored (see `Partition::restoring`).
const RESTORE_WAIT: Duration = Duration::from_secs(60);

/// Everything a worker stores.
pub struct ShuffleStore {
    registry: Registry,
    disk: Arc<LocalDisk>,
    /// Credit for buffered pushed bytes.
    pub budget: Arc<MemoryBudget>,
    /// Largest payload one push may carry.
    pub max_batch: u64,
    /// Most payload bytes one app may have stored here (memory, disk and object store).
    pub app_stored_quota: Option<u64>,
    /// Slows the heaviest pusher when writes slow down.
    pub congestion: Arc<Congestion>,
    /// Stored quotas apps asked for themselves, where stricter than `app_stored_quota`.
    asked_quotas: std::sync::Mutex<HashMap<String, u64>>,
    metrics: Arc<StorageMetrics>,
}

impl ShuffleStore {
    /// A store over the data directories `roots` (the first is the main one), keeping
    /// at most `budget` pushed bytes in memory, with an object tier if `tier` is given.
    pub fn new(
        roots: Vec<PathBuf>,
        budget: Arc<MemoryBudget>,
        max_batch: u64,
        app_stored_quota: Option<u64>,
        congestion: Arc<Congestion>,
        tier: Option<Tier>,
        memory_only: bool,
    ) -> Arc<ShuffleStore> {
        let metrics = Arc::new(StorageMetrics::default());
        let uploads = tier.map(|t| Uploader::new(t, metrics.clone()));
        let disk = LocalDisk::new(
            roots.clone(),
            budget.clone(),
            metrics.clone(),
            uploads,
            congestion.clone(),
            memory_only,
        );
        Arc::new(ShuffleStore {
            registry: Registry::new(roots),
            disk,
            budget,
            max_batch,
            app_stored_quota,
            congestion,
            asked_quotas: Default::default(),
            metrics,
        })
    }

    /// The layer's counters.
    pub fn metrics(&self) -> &StorageMetrics {
        &self.metrics
    }

    /// The object store partition files are uploaded to, if any.
    pub fn object_tier(&self) -> Option<&Arc<ObjectTier>> {
        self.disk.uploads().map(|u| &u.tier.object)
    }

    /// The main data directory.
    pub fn root(&self) -> &Path {
        self.registry.root()
    }

    /// A shuffle's directory in the main data directory.
    pub fn shuffle_dir(&self, app_id: &str, shuffle_id: u32) -> PathBuf {
        layout::shuffle_dir(self.root(), app_id, shuffle_id)
    }

    /// Number of apps, shuffles and partitions held.
    pub fn counts(&self) -> (u64, u64, u64) {
        self.registry.counts()
    }

    /// Per app: payload bytes of its partitions in memory, and bytes of its partition
    /// files on local disk (evicted prefixes not counted).
    pub fn app_usage(&self) -> HashMap<Arc<str>, (u64, u64)> {
        let mut out: HashMap<Arc<str>, (u64, u64)> = HashMap::new();
        for p in self.registry.every_partition() {
            let (mem, disk) = {
                let st = p.lock();
                (st.mem_bytes, st.file_written.saturating_sub(st.local_from))
            };
            let e = out.entry(p.app_id.clone()).or_default();
            e.0 += mem;
            e.1 += disk;
        }
        out
    }

    /// Bytes of partition files stored in the object store (uploaded prefixes).
    pub fn object_bytes(&self) -> u64 {
        self.registry
            .every_partition()
            .iter()
            .map(|p| p.lock().uploaded_to)
            .sum()
    }

    /// Bytes of partition files on local disk.
    pub fn stored_bytes(&self) -> u64 {
        self.disk.stored_bytes()
    }

    /// True while the disk is full (writes beyond memory are refused).
    pub fn disk_full(&self) -> bool {
        self.disk.is_full()
    }

    /// Looks a shuffle up, telling an unknown app from an unknown shuffle.
    pub fn shuffle(&self, app_id: &str, shuffle_id: u32) -> Result<Arc<Shuffle>, StorageError> {
        self.registry.shuffle(app_id, shuffle_id)
    }

    /// Looks up the partition a reducer or pusher names.
    pub fn partition(
        &self,
        app_id: &str,
        shuffle_id: u32,
        partition: u32,
    ) -> Result<(Arc<Shuffle>, Arc<Partition>), StorageError> {
        let shuffle = self.shuffle(app_id, shuffle_id)?;
        let part = shuffle.placed(partition)?;
        Ok((shuffle, part))
    }

    /// Checks a push's header before its payload is read, so a refused push costs no
    /// memory. Returns the partition to store into.
    pub fn admit_push(
        &self,
        h: &PushHeader,
        payload_len: u64,
    ) -> Result<(Arc<Shuffle>, Arc<Partition>), StorageError> {
        if payload_len > self.max_batch {
            return Err(StorageError::BatchTooLarge {
                len: payload_len,
                limit: self.max_batch,
            });
        }
        let (shuffle, part) = self.partition(&h.app_id, h.shuffle_id, h.partition)?;
        // With the disk full, memory is all there is: refuse instead of waiting for a
        // spill that cannot happen.
        if self.disk.is_full() && self.budget.used() + payload_len > self.disk.high_water() {
            return Err(self.disk.full_error());
        }
        // Without a disk nothing will make room: refuse at once what cannot fit.
        // A retry of a batch already stored takes no memory (see `push::handle`).
        if self.disk.memory_only() && !part.holds(h.map_id, h.attempt_id, h.batch_seq) {
            if self.budget.used() + payload_len > self.budget.total() {
                return Err(self.memory_exceeded(payload_len));
            }
            let (held, share) = (self.budget.held(&h.app_id), self.budget.limit_of(&h.app_id));
            if held > 0 && held + payload_len > share {
                return Err(StorageError::AppMemoryExceeded {
                    app: h.app_id.clone(),
                    len: payload_len,
                    held,
                    share,
                });
            }
        }
        shuffle.admit(h.map_id, h.attempt_id, h.batch_seq)?;
        // A retry of a stored batch stores nothing more: it is answered, not refused.
        let quota = self
            .stored_quota_of(&h.app_id)
            .filter(|_| !part.holds(h.map_id, h.attempt_id, h.batch_seq));
        if let Some(quota) = quota {
            let held = self.registry.app_accepted(&h.app_id);
            if held + payload_len > quota {
                return Err(StorageError::QuotaExceeded {
                    app: h.app_id.clone(),
                    held,
                    len: payload_len,
                    quota,
                });
            }
        }
        Ok((shuffle, part))
    }

    /// Stores an admitted push whose credit is taken, once its payload matches the
    /// header's CRC32C. Returns whether it was new (a duplicate is a retried push). The
    /// credit is given back unless the batch is stored.
    pub fn insert(
        &self,
        shuffle: &Shuffle,
        part: &Partition,
        h: &PushHeader,
        payload: Bytes,
    ) -> Result<bool, StorageError> {
        let len = payload.len() as u64;
        let crc = crossdock_proto::checksum(&payload);
        if crc != h.crc32c {
            self.budget.give_back(&h.app_id, len);
            return Err(StorageError::BadChecksum {
                partition: h.partition,
                map: h.map_id,
                attempt: h.attempt_id,
                seq: h.batch_seq,
                found: crc,
                expected: h.crc32c,
            });
        }
        match part.insert(h.map_id, h.attempt_id, h.batch_seq, h.crc32c, payload) {
            Insert::Stored => {
                shuffle.accepted.fetch_add(len, Ordering::Relaxed);
                if !self.disk.memory_only() && self.budget.used() > self.disk.high_water() {
                    self.budget.pressure.notify_one();
                }
                Ok(true)
            }
            Insert::Duplicate => {
                self.budget.give_back(&h.app_id, len);
                Ok(false)
            }
            Insert::Deleted => {
                self.budget.give_back(&h.app_id, len);
                Err(StorageError::Deleted {
                    app: shuffle.app_id.clone(),
                    shuffle: shuffle.shuffle_id,
                })
            }
        }
    }

    /// Creates (or confirms) a shuffle and the partitions placed here, each with the
    /// replica it forwards to (`forward_to`, empty or one per partition).
    pub fn prepare(
        &self,
        meta: &layout::ShuffleMeta,
        partitions: &[u32],
        forward_to: &[String],
        continued: &[(u32, String)],
    ) -> Result<(), StorageError> {
        crate::names::check_app_id(&meta.app_id)?;
        if !forward_to.is_empty() && forward_to.len() != partitions.len() {
            return Err(StorageError::ForwardCount {
                forwards: forward_to.len(),
                partitions: partitions.len(),
            });
        }
        if !continued.is_empty() && continued.len() != partitions.len() {
            return Err(StorageError::ContinuedCount {
                slots: continued.len(),
                addrs: continued.len(),
                partitions: partitions.len(),
            });
        }
        let slots = crossdock_proto::slot_limit(meta.num_partitions);
        if let Some(&p) = partitions.iter().find(|&&p| p >= slots) {
            return Err(StorageError::PreparedOutOfRange {
                partition: p,
                partitions: slots,
            });
        }
        // A partition continues only in a split: a slot from `num_partitions` up.
        if let Some(&(slot, _)) = continued.iter().find(|(s, _)| {
            *s != crossdock_proto::NO_SLOT && !(meta.num_partitions..slots).contains(s)
        }) {
            return Err(StorageError::PreparedOutOfRange {
                partition: slot,
                partitions: slots,
            });
        }
        let shuffle = self.registry.get_or_create(meta)?;
        shuffle.place(partitions, forward_to, continued);
        Ok(())
    }

    /// Whether this worker keeps data in memory only (`WorkerConfig::memory_only`).
    pub fn memory_only(&self) -> bool {
        self.disk.memory_only()
    }

    /// The refusal of a `len`-byte batch that does not fit in a memory-only worker.
    pub fn memory_exceeded(&self, len: u64) -> StorageError {
        StorageError::MemoryExceeded {
            len,
            used: self.budget.used(),
            budget: self.budget.total(),
        }
    }

    /// Records the coordinator's decision on which attempt counts for `map` (see
    /// [`Shuffle::commit`]).
    pub fn map_committed(
        &self,
        app_id: &str,
        shuffle_id: u32,
        map: u32,
        attempt: AttemptId,
        expected: &[PartitionBytes],
    ) -> Result<(), StorageError> {
        self.shuffle(app_id, shuffle_id)?
            .commit(map, attempt, expected)
    }

    /// Waits until `map`'s `attempt` is as durable as `level` asks.
    pub async fn persist_map(
        &self,
        app_id: &str,
        shuffle_id: u32,
        map: u32,
        attempt: AttemptId,
        level: Durability,
    ) -> Result<(), StorageError> {
        if level == Durability::Memory {
            return Ok(());
        }
        let shuffle = self.shuffle(app_id, shuffle_id)?;
        durability::persist(&self.disk, &shuffle, map, attempt, level).await
    }

    /// Takes the coordinator's view of which attempt counts for every map.
    pub fn sync_commits(
        &self,
        app_id: &str,
        shuffle_id: u32,
        map_attempts: &[AttemptId],
    ) -> Result<(), StorageError> {
        self.shuffle(app_id, shuffle_id)?.sync_commits(map_attempts)
    }

    /// Finds the shuffles a previous run of this worker left in its data directories.
    /// Returns the number of partitions found.
    pub fn recover(&self) -> std::io::Result<usize> {
        recovery::recover(&self.registry, &self.disk)
    }

    /// Which of `partitions` this worker holds whole: the bytes of the committed
    /// attempts (`map_attempts`) add up to `expected`. Takes `map_attempts` as the
    /// commits either way; the partitions held whole are served from then on.
    pub fn check_copies(
        &self,
        app_id: &str,
        shuffle_id: u32,
        map_attempts: &[AttemptId],
        partitions: &[u32],
        expected: &[u64],
    ) -> Result<Vec<u32>, StorageError> {
        let Ok(shuffle) = self.shuffle(app_id, shuffle_id) else {
            return Ok(Vec::new()); // nothing of it survived
        };
        shuffle.sync_commits(map_attempts)?;
        // Slots past the shuffle's split limit are never held, not even empty ones.
        let slots = crossdock_proto::slot_limit(shuffle.num_partitions);
        let mut held = shuffle.held_whole(map_attempts, partitions, expected);
        held.retain(|&p| p < slots);
        for &p in &held {
            shuffle.keep(p).restoring.store(false, Ordering::Release);
        }
        Ok(held)
    }

    /// Restores `partitions` from the object store (see [`adopt::Adoption::run`]).
    /// Without an object store nothing is adopted.
    pub async fn adopt(
        &self,
        app_id: &str,
        shuffle_id: u32,
        map_attempts: &[AttemptId],
        partitions: &[u32],
        expected: &[u64],
    ) -> Result<Vec<u32>, StorageError> {
        let Some(object) = self.object_tier() else {
            return Ok(Vec::new());
        };
        let shuffle = self.shuffle(app_id, shuffle_id)?;
        let adoption = adopt::Adoption {
            object,
            budget: &self.budget,
            metrics: &self.metrics,
        };
        adoption
            .run(&shuffle, map_attempts, partitions, expected)
            .await
    }

    /// Deletes a shuffle's data; `everywhere` also deletes what every worker uploaded of
    /// it to the object store. Unknown shuffles are fine (deletion is idempotent).
    pub fn delete_shuffle(&self, app_id: &str, shuffle_id: u32, everywhere: bool) {
        if let Some(s) = self.registry.remove_shuffle(app_id, shuffle_id) {
            self.drop_shuffle(&s);
            crate::heap::release_freed();
        }
        if let Some(up) = self.disk.uploads().filter(|_| everywhere) {
            up.delete_shuffle(app_id, shuffle_id);
        }
    }

    /// Deletes all data of an app; `everywhere` as for [`ShuffleStore::delete_shuffle`].
    pub fn delete_app(&self, app_id: &str, everywhere: bool) {
        self.asked_quotas.lock().expect("quota lock").remove(app_id);
        let dropped = self.registry.remove_app(app_id);
        for s in &dropped {
            self.drop_shuffle(s);
        }
        if !dropped.is_empty() {
            crate::heap::release_freed();
        }
        for (root, dir) in self
            .registry
            .roots()
            .iter()
            .zip(self.registry.app_dirs(app_id))
        {
            // Strictly one app's directory, inside the data directory.
            if layout::is_app_dir(root, &dir) {
                let _ = std::fs::remove_dir_all(dir);
            } else {
                tracing::error!(dir = %dir.display(), "not an app directory; not deleted");
            }
        }
        if let Some(up) = self.disk.uploads().filter(|_| everywhere) {
            up.delete_app(app_id);
        }
    }

    fn drop_shuffle(&self, s: &Shuffle) {
        for p in s.partitions() {
            self.disk.release(&p);
        }
        for dir in &s.dirs {
            if let Err(e) = std::fs::remove_dir_all(dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(dir = %dir.display(), error = %e, "could not delete shuffle data");
                }
            }
        }
        tracing::info!(app = %s.app_id, shuffle = s.shuffle_id, "deleted shuffle data");
    }

    /// Applies the limits an app asked for where they are stricter than this worker's.
    pub fn set_app_limits(&self, app_id: &str, limits: AppLimits) {
        let mut asked = self.asked_quotas.lock().expect("quota lock");
        match limits.stored_quota() {
            Some(q) => asked.insert(app_id.to_string(), q),
            None => asked.remove(app_id),
        };
        drop(asked);
        self.budget.set_app_share(app_id, limits.memory_share());
    }

    /// The stored quota `app_id` is held to: the stricter of this worker's and its own.
    pub fn stored_quota_of(&self, app_id: &str) -> Option<u64> {
        let asked = self
            .asked_quotas
            .lock()
            .expect("quota lock")
            .get(app_id)
            .copied();
        stricter(self.app_stored_quota, asked)
    }

    /// Every app's remaining work on this worker (the sum over its shuffles of bytes left,
    /// the longest of their remaining shuffle times): what the Fair Completion Scheduler
    /// orders the budgets' waiters by (see [`Shuffle::remaining_work`]).
    pub fn remaining_work(&self) -> HashMap<Arc<str>, RemainingWork> {
        let mut out: HashMap<Arc<str>, RemainingWork> = HashMap::new();
        for s in self.registry.every_shuffle() {
            let w = s.remaining_work();
            let e = out
                .entry(Arc::from(s.app_id.as_str()))
                .or_insert(RemainingWork {
                    t_rs: 0.0,
                    r_left: 0,
                });
            e.t_rs = e.t_rs.max(w.t_rs);
            e.r_left = e.r_left.saturating_add(w.r_left);
        }
        out
    }

    /// Counts `bytes` of a shuffle sent to its readers.
    pub fn count_fetched(&self, app_id: &str, shuffle_id: u32, bytes: u64) {
        if let Ok(s) = self.shuffle(app_id, shuffle_id) {
            s.fetched.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Runs the flush policy and then the eviction policy (see [`disk`]).
    pub fn relieve_pressure(&self, idle: Duration) {
        self.disk
            .relieve_pressure(self.registry.every_partition(), idle);
    }

    /// Writes every partition's buffered batches to disk.
    pub fn flush_all(&self) {
        for p in self.registry.every_partition() {
            self.disk.schedule_flush(p);
        }
    }

    /// Opens a fetch of maps `[start, end)` of a partition, after `resume` if given (of
    /// each map only the batches `cut` leaves, a merging reader's segment of one run):
    /// checks the range, waits while the partition is being restored, refuses while a
    /// map of the range has not committed, and takes a consistent view of the batches
    /// of the committed attempts.
    pub async fn open_read(
        &self,
        app_id: &str,
        shuffle_id: u32,
        partition: u32,
        (start, end): (u32, u32),
        resume: Option<ResumePoint>,
        cut: RunCut,
    ) -> Result<ReadView, StorageError> {
        let (shuffle, part) = self.partition(app_id, shuffle_id, partition)?;
        if start >= end || end > shuffle.num_maps {
            return Err(StorageError::BadMapRange {
                start,
                end,
                maps: shuffle.num_maps,
            });
        }
        // A copy placed here for a lost one is read once the coordinator found it whole.
        let deadline = tokio::time::Instant::now() + RESTORE_WAIT;
        while part.restoring.load(Ordering::Acquire) {
            if tokio::time::Instant::now() > deadline {
                return Err(StorageError::StillRestoring {
                    partition,
                    secs: RESTORE_WAIT.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if let Some((first, missing)) = shuffle.first_uncommitted(start, end) {
            return Err(StorageError::NotCommitted {
                start,
                end,
                first,
                missing,
            });
        }
        // Checked before the view is taken and again after: a commit replaced between
        // the two would otherwise go unseen.
        let expected_attempt = || {
            let Some(expected) = cut.attempt else {
                return Ok(());
            };
            match (start..end).find(|&m| shuffle.committed(m) != Some(expected)) {
                None => Ok(()),
                Some(map) => Err(StorageError::OtherAttempt {
                    map,
                    expected,
                    committed: shuffle.committed(map).unwrap_or(AttemptId::NONE),
                }),
            }
        };
        expected_attempt()?;
        let view = part
            .read_view(start, end, |m| shuffle.committed(m), resume, cut)
            .map_err(StorageError::reading(format!(
                "opening {}",
                part.path.display()
            )))?;
        expected_attempt()?;
        Ok(view)
    }

    /// Loads one chunk of an open read into `buf` (see [`read::ChunkReader::load`]).
    pub async fn load_chunk(
        &self,
        view: &ReadView,
        chunk: &[Piece],
        buf: Vec<u8>,
    ) -> (Vec<u8>, Result<Vec<Loaded>, StorageError>) {
        let reader = ChunkReader {
            view,
            tier: self.object_tier().map(|t| &**t),
            metrics: &self.metrics,
        };
        reader.load(chunk, buf).await
    }
}
