//! The worker's shuffle store: apps, shuffles, partitions, commits and flushing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crossdock_proto::{Durability, ErrorCode, PartitionBytes, PushHeader};
use tokio::sync::Semaphore;

use super::object_store::ObjectStore;
use super::partition::{parse_record, FlushJob, Parsed, Partition};
use super::WorkerMetrics;
use crate::error::ServerError;
use crate::memory::MemoryBudget;

/// Marks a map without a committed attempt.
pub const NO_ATTEMPT: u32 = u32::MAX;

/// How long a commit waits for its data to reach the level it asks for.
const PERSIST_TIMEOUT: Duration = Duration::from_secs(120);

/// Bytes of a segment read at a time when a partition is adopted.
const ADOPT_READ: u64 = 8 << 20;

/// Marks a partition file whose first part was evicted to the object store.
fn evicted_marker(data_file: &Path) -> PathBuf {
    data_file.with_extension("evicted")
}

/// The object-store tier of a store.
pub struct Tier {
    pub store: Arc<ObjectStore>,
    /// Names this worker's segments (its incarnation).
    pub writer: u64,
    /// Above this many bytes of partition files on local disk, wholly uploaded
    /// partitions are evicted from it (read from the object store from then on).
    pub disk_quota: Option<u64>,
}

/// A shuffle as one worker holds it.
pub struct Shuffle {
    pub app_id: String,
    pub shuffle_id: u32,
    pub num_maps: u32,
    pub num_partitions: u32,
    /// The shuffle's directory in each of the worker's data directories; partition `p`
    /// lives in `dirs[p % dirs.len()]`.
    pub dirs: Vec<PathBuf>,
    /// The partitions placed on this worker.
    pub partitions: RwLock<HashMap<u32, Arc<Partition>>>,
    /// Committed attempt per map, [`NO_ATTEMPT`] until the coordinator says otherwise.
    committed: Vec<AtomicU32>,
}

impl Shuffle {
    /// The committed attempt of `map`.
    pub fn committed(&self, map: u32) -> Option<u32> {
        let a = self.committed.get(map as usize)?.load(Ordering::Acquire);
        (a != NO_ATTEMPT).then_some(a)
    }

    /// The first map in `[start, end)` that has not committed, and how many have not.
    pub fn first_uncommitted(&self, start: u32, end: u32) -> Option<(u32, u32)> {
        let missing: Vec<u32> = (start..end)
            .filter(|&m| self.committed(m).is_none())
            .collect();
        missing.first().map(|&m| (m, missing.len() as u32))
    }

    pub fn partition(&self, p: u32) -> Option<Arc<Partition>> {
        self.partitions.read().expect("lock").get(&p).cloned()
    }

    fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions
            .read()
            .expect("lock")
            .values()
            .cloned()
            .collect()
    }
}

type AppShuffles = HashMap<u32, Arc<Shuffle>>;

/// Everything a worker stores, and the flushing of it.
pub struct Store {
    /// The data directories (one per disk); the first is the main one.
    roots: Vec<PathBuf>,
    apps: RwLock<HashMap<String, AppShuffles>>,
    /// Credit for buffered pushed bytes.
    pub budget: Arc<MemoryBudget>,
    /// Largest payload one push may carry.
    pub max_batch: u64,
    /// Above this many buffered bytes the largest partitions are written to disk...
    pub high_water: u64,
    /// ...until the buffered bytes fall below this.
    pub low_water: u64,
    flush_slots: Arc<Semaphore>,
    pub metrics: Arc<WorkerMetrics>,
    pub stored_bytes: AtomicU64,
    /// Set when a flush failed for lack of space, cleared by the next one that worked.
    pub disk_full: std::sync::atomic::AtomicBool,
    /// Where partition files are uploaded, if anywhere.
    tier: Option<Tier>,
    upload_slots: Arc<Semaphore>,
    /// The last failed upload, for the error of a commit that waits for uploads.
    last_upload_error: Mutex<Option<String>>,
}

pub(crate) fn safe_component(s: &str) -> String {
    // App ids come from clients; keep them from naming paths outside the data dir.
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_start_matches('.')
        .to_string()
}

impl Store {
    pub fn new(
        roots: Vec<PathBuf>,
        budget: Arc<MemoryBudget>,
        max_batch: u64,
        metrics: Arc<WorkerMetrics>,
        tier: Option<Tier>,
    ) -> Arc<Store> {
        assert!(!roots.is_empty(), "a store needs a data directory");
        let total = budget.total();
        Arc::new(Store {
            roots,
            apps: RwLock::new(HashMap::new()),
            budget,
            max_batch,
            high_water: total / 10 * 9,
            low_water: total / 10 * 7,
            flush_slots: Arc::new(Semaphore::new(2)),
            metrics,
            stored_bytes: AtomicU64::new(0),
            disk_full: std::sync::atomic::AtomicBool::new(false),
            tier,
            upload_slots: Arc::new(Semaphore::new(2)),
            last_upload_error: Mutex::new(None),
        })
    }

    /// The object store partition files are uploaded to, if any.
    pub fn object_store(&self) -> Option<&Arc<ObjectStore>> {
        self.tier.as_ref().map(|t| &t.store)
    }

    /// The main data directory.
    pub fn root(&self) -> &Path {
        &self.roots[0]
    }

    /// Number of apps and shuffles and partitions held.
    pub fn counts(&self) -> (u64, u64, u64) {
        let apps = self.apps.read().expect("lock");
        let shuffles: u64 = apps.values().map(|s| s.len() as u64).sum();
        let partitions = apps
            .values()
            .flat_map(|s| s.values())
            .map(|s| s.partitions.read().expect("lock").len() as u64)
            .sum();
        (apps.len() as u64, shuffles, partitions)
    }

    /// Looks a shuffle up, telling an unknown app from an unknown shuffle.
    pub fn shuffle(&self, app_id: &str, shuffle_id: u32) -> Result<Arc<Shuffle>, ServerError> {
        let apps = self.apps.read().expect("lock");
        let shuffles = apps.get(app_id).ok_or_else(|| {
            ServerError::new(
                ErrorCode::UnknownApp,
                format!("app '{app_id}' has no shuffle on this worker (unknown, expired or unregistered)"),
            )
        })?;
        shuffles.get(&shuffle_id).cloned().ok_or_else(|| {
            ServerError::new(
                ErrorCode::UnknownShuffle,
                format!("shuffle {shuffle_id} of app '{app_id}' is not on this worker"),
            )
        })
    }

    /// Looks up the partition a reducer or pusher names.
    pub fn partition(
        &self,
        app_id: &str,
        shuffle_id: u32,
        partition: u32,
    ) -> Result<(Arc<Shuffle>, Arc<Partition>), ServerError> {
        let shuffle = self.shuffle(app_id, shuffle_id)?;
        let part = shuffle.partition(partition).ok_or_else(|| {
            let why = if partition >= shuffle.num_partitions {
                format!(
                    "is out of range (the shuffle has {} partitions)",
                    shuffle.num_partitions
                )
            } else {
                "is not placed on this worker".to_string()
            };
            ServerError::new(
                ErrorCode::UnknownPartition,
                format!("partition {partition} of shuffle {shuffle_id} of app '{app_id}' {why}"),
            )
        })?;
        Ok((shuffle, part))
    }

    /// Checks a push's header before its payload is read, so a rejected push costs no
    /// memory. Returns the partition to store into.
    pub fn admit_push(
        &self,
        h: &PushHeader,
        payload_len: u64,
    ) -> Result<(Arc<Shuffle>, Arc<Partition>), ServerError> {
        if payload_len > self.max_batch {
            return Err(ServerError::new(
                ErrorCode::BatchTooLarge,
                format!(
                    "batch of {payload_len} bytes exceeds this worker's limit of {} bytes; split it",
                    self.max_batch
                ),
            ));
        }
        let (shuffle, part) = self.partition(&h.app_id, h.shuffle_id, h.partition)?;
        // With the disk full, memory is all there is: refuse instead of waiting for a
        // spill that cannot happen.
        if self.disk_full.load(Ordering::Acquire)
            && self.budget.used() + payload_len > self.high_water
        {
            return Err(self.disk_full_error());
        }
        if h.map_id >= shuffle.num_maps {
            return Err(ServerError::new(
                ErrorCode::UnknownMap,
                format!(
                    "map {} is out of range (the shuffle has {} maps)",
                    h.map_id, shuffle.num_maps
                ),
            ));
        }
        // A rerun of the stage (a later generation: the attempt id's high 16 bits) may
        // replace a committed map; anything else arrives too late.
        if let Some(a) = shuffle
            .committed(h.map_id)
            .filter(|&a| h.attempt_id >> 16 <= a >> 16)
        {
            return Err(ServerError::new(
                ErrorCode::PushAfterCommit,
                format!(
                    "map {} of shuffle {} already committed (attempt {a}); batch {} of attempt {} is refused",
                    h.map_id, h.shuffle_id, h.batch_seq, h.attempt_id
                ),
            ));
        }
        Ok((shuffle, part))
    }

    /// Creates (or confirms) a shuffle and the partitions placed here.
    pub fn prepare(
        &self,
        app_id: &str,
        shuffle_id: u32,
        num_maps: u32,
        num_partitions: u32,
        partitions: &[u32],
        forward_to: &[String],
    ) -> Result<(), ServerError> {
        if !forward_to.is_empty() && forward_to.len() != partitions.len() {
            return Err(ServerError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "{} forward addresses for {} partitions",
                    forward_to.len(),
                    partitions.len()
                ),
            ));
        }
        if let Some(&p) = partitions.iter().find(|&&p| p >= num_partitions) {
            return Err(ServerError::new(
                ErrorCode::InvalidArgument,
                format!("partition {p} is out of range for {num_partitions} partitions"),
            ));
        }
        let dirs: Vec<PathBuf> = self
            .roots
            .iter()
            .map(|r| r.join(safe_component(app_id)).join(shuffle_id.to_string()))
            .collect();
        for dir in &dirs {
            std::fs::create_dir_all(dir)
                .map_err(|e| ServerError::io(&format!("creating {}", dir.display()), e))?;
            // What a restarted worker needs to find the shuffle again (the directory
            // names are sanitized app ids).
            let meta = dir.join("shuffle.meta");
            if !meta.exists() {
                std::fs::write(
                    &meta,
                    format!("{app_id}\n{shuffle_id}\n{num_maps}\n{num_partitions}\n"),
                )
                .map_err(|e| ServerError::io(&format!("writing {}", meta.display()), e))?;
            }
        }
        let mut apps = self.apps.write().expect("lock");
        let shuffles = apps.entry(app_id.to_string()).or_default();
        let shuffle = shuffles
            .entry(shuffle_id)
            .or_insert_with(|| {
                Arc::new(Shuffle {
                    app_id: app_id.to_string(),
                    shuffle_id,
                    num_maps,
                    num_partitions,
                    dirs: dirs.clone(),
                    partitions: RwLock::new(HashMap::new()),
                    committed: (0..num_maps).map(|_| AtomicU32::new(NO_ATTEMPT)).collect(),
                })
            })
            .clone();
        drop(apps);
        if shuffle.num_maps != num_maps || shuffle.num_partitions != num_partitions {
            return Err(ServerError::new(
                ErrorCode::ShuffleExists,
                format!(
                    "shuffle {shuffle_id} of app '{app_id}' exists with {} maps and {} partitions",
                    shuffle.num_maps, shuffle.num_partitions
                ),
            ));
        }
        // A partition created after maps committed here was moved from a lost worker:
        // it holds nothing of theirs until it is restored or they are revoked, and it is
        // not served before the coordinator checked it (`CheckCopies`).
        let has_commits = (0..num_maps).any(|m| shuffle.committed(m).is_some());
        let mut parts = shuffle.partitions.write().expect("lock");
        let owner: Arc<str> = app_id.into();
        for (i, &p) in partitions.iter().enumerate() {
            let dir = &dirs[p as usize % dirs.len()];
            let part = parts.entry(p).or_insert_with(|| {
                let part =
                    Partition::new(p, owner.clone(), shuffle_id, dir.join(format!("{p}.data")));
                part.restoring.store(has_commits, Ordering::Release);
                Arc::new(part)
            });
            part.set_forward(forward_to.get(i).map(String::as_str));
        }
        Ok(())
    }

    /// Records the coordinator's decision that `attempt` is the one that counts for
    /// `map`, after checking that this worker holds exactly the bytes the map reported
    /// for the partitions placed here. `NO_ATTEMPT` revokes an unfinished commit.
    pub fn map_committed(
        self: &Arc<Self>,
        app_id: &str,
        shuffle_id: u32,
        map: u32,
        attempt: u32,
        expected: &[PartitionBytes],
    ) -> Result<(), ServerError> {
        let shuffle = self.shuffle(app_id, shuffle_id)?;
        let slot = shuffle.committed.get(map as usize).ok_or_else(|| {
            ServerError::new(
                ErrorCode::UnknownMap,
                format!(
                    "map {map} is out of range (the shuffle has {} maps)",
                    shuffle.num_maps
                ),
            )
        })?;
        if attempt == NO_ATTEMPT {
            slot.store(NO_ATTEMPT, Ordering::Release);
            return Ok(());
        }
        let expected: HashMap<u32, u64> = expected.iter().map(|p| (p.partition, p.bytes)).collect();
        for part in shuffle.all_partitions() {
            let want = expected.get(&part.id).copied().unwrap_or(0);
            let have = part.attempt_bytes(map, attempt);
            if want != have {
                return Err(ServerError::new(
                    ErrorCode::CommitMismatch,
                    format!(
                        "map {map} attempt {attempt} reported {want} bytes for partition {} but this worker holds {have}",
                        part.id
                    ),
                ));
            }
        }
        slot.store(attempt, Ordering::Release);
        Ok(())
    }

    /// Finds the shuffles a previous run of this worker left in its data directory and
    /// indexes their partition files. Nothing counts as committed until the coordinator
    /// says so (`CheckCopies`, `SyncCommits`). Returns the number of partitions found.
    pub fn recover(&self) -> std::io::Result<usize> {
        let mut found = 0;
        for root in &self.roots {
            found += self.recover_root(root)?;
        }
        Ok(found)
    }

    fn recover_root(&self, root: &Path) -> std::io::Result<usize> {
        let mut found = 0;
        let Ok(app_dirs) = std::fs::read_dir(root) else {
            return Ok(0);
        };
        for app_dir in app_dirs.flatten() {
            let Ok(shuffle_dirs) = std::fs::read_dir(app_dir.path()) else {
                continue;
            };
            for shuffle_dir in shuffle_dirs.flatten() {
                let dir = shuffle_dir.path();
                let Ok(meta) = std::fs::read_to_string(dir.join("shuffle.meta")) else {
                    continue;
                };
                let fields: Vec<&str> = meta.lines().collect();
                let [app_id, shuffle_id, num_maps, num_partitions] = fields[..] else {
                    tracing::warn!(dir = %dir.display(), "unreadable shuffle.meta; skipped");
                    continue;
                };
                let (Ok(shuffle_id), Ok(num_maps), Ok(num_partitions)) = (
                    shuffle_id.parse::<u32>(),
                    num_maps.parse::<u32>(),
                    num_partitions.parse::<u32>(),
                ) else {
                    tracing::warn!(dir = %dir.display(), "unreadable shuffle.meta; skipped");
                    continue;
                };
                let mut partitions = HashMap::new();
                for f in std::fs::read_dir(&dir)?.flatten() {
                    let name = f.file_name().to_string_lossy().to_string();
                    let Some(p) = name
                        .strip_suffix(".data")
                        .and_then(|p| p.parse::<u32>().ok())
                    else {
                        continue;
                    };
                    if p >= num_partitions {
                        continue;
                    }
                    // Part of it lives only in the object store: not a whole copy here.
                    // The coordinator has it adopted from the store.
                    let marker = evicted_marker(&f.path());
                    if marker.exists() {
                        let _ = std::fs::remove_file(f.path());
                        let _ = std::fs::remove_file(&marker);
                        continue;
                    }
                    let (part, bytes) = Partition::recover(p, app_id.into(), shuffle_id, f.path())?;
                    self.stored_bytes.fetch_add(bytes, Ordering::Relaxed);
                    partitions.insert(p, Arc::new(part));
                }
                found += partitions.len();
                let dirs: Vec<PathBuf> = self
                    .roots
                    .iter()
                    .map(|r| r.join(safe_component(app_id)).join(shuffle_id.to_string()))
                    .collect();
                let mut apps = self.apps.write().expect("lock");
                let shuffle = apps
                    .entry(app_id.to_string())
                    .or_default()
                    .entry(shuffle_id)
                    .or_insert_with(|| {
                        Arc::new(Shuffle {
                            app_id: app_id.to_string(),
                            shuffle_id,
                            num_maps,
                            num_partitions,
                            dirs,
                            partitions: RwLock::new(HashMap::new()),
                            committed: (0..num_maps).map(|_| AtomicU32::new(NO_ATTEMPT)).collect(),
                        })
                    })
                    .clone();
                drop(apps);
                shuffle.partitions.write().expect("lock").extend(partitions);
            }
        }
        Ok(found)
    }

    /// Which of `partitions` this worker holds whole: the bytes of the committed
    /// attempts (`map_attempts`) add up to `expected`. Takes `map_attempts` as the
    /// commits either way; the partitions held whole are served from then on (a
    /// partition being restored is not, see [`Partition::restoring`]).
    pub fn check_copies(
        &self,
        app_id: &str,
        shuffle_id: u32,
        map_attempts: &[u32],
        partitions: &[u32],
        expected: &[u64],
    ) -> Result<Vec<u32>, ServerError> {
        let Ok(shuffle) = self.shuffle(app_id, shuffle_id) else {
            return Ok(Vec::new()); // nothing of it survived
        };
        self.sync_commits(app_id, shuffle_id, map_attempts)?;
        let held = held_whole(&shuffle, map_attempts, partitions, expected);
        for &p in &held {
            if let Some(part) = shuffle.partition(p) {
                part.restoring.store(false, Ordering::Release);
            }
        }
        Ok(held)
    }

    fn disk_full_error(&self) -> ServerError {
        ServerError::new(
            ErrorCode::Io,
            format!(
                "disk full: this worker cannot write to {} and its memory is used up; it takes no more data until space is freed",
                self.roots
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    }

    /// Waits until `map`'s `attempt` is as durable as `level` asks: every batch written
    /// to its partition file and synced (`Disk`; also uploaded where the partition was
    /// partly evicted), or written and uploaded (`ObjectStore`: the object store is the
    /// durable copy, so nothing is synced).
    pub async fn persist_map(
        self: &Arc<Self>,
        app_id: &str,
        shuffle_id: u32,
        map: u32,
        attempt: u32,
        level: Durability,
    ) -> Result<(), ServerError> {
        if level == Durability::Memory {
            return Ok(());
        }
        if level == Durability::ObjectStore && self.tier.is_none() {
            return Err(ServerError::new(
                ErrorCode::InvalidArgument,
                "the coordinator commits to the object store, but this worker has none: start every worker with --object-store".to_string(),
            ));
        }
        let shuffle = self.shuffle(app_id, shuffle_id)?;
        let parts: Vec<Arc<Partition>> = shuffle
            .all_partitions()
            .into_iter()
            .filter(|p| p.attempt_bytes(map, attempt) > 0)
            .collect();
        let deadline = tokio::time::Instant::now() + PERSIST_TIMEOUT;
        let timed_out = |what: &str| {
            let why = self
                .last_upload_error
                .lock()
                .expect("lock")
                .clone()
                .map_or(String::new(), |e| format!("; last upload error: {e}"));
            ServerError::new(
                ErrorCode::Io,
                format!(
                    "map {map} attempt {attempt} could not be {what} within {} s{why}",
                    PERSIST_TIMEOUT.as_secs()
                ),
            )
        };
        // Polls `ready` (2 ms apart), nudging the partition along with `nudge`, until it
        // gives an answer or an error; a deletion or the deadline end the wait too.
        type Ready<'a> = &'a (dyn Fn() -> Result<Option<u64>, ServerError> + Sync);
        let wait = async |part: &Arc<Partition>,
                          what: &str,
                          ready: Ready<'_>,
                          nudge: &(dyn Fn() + Sync)| loop {
            if let Some(v) = ready()? {
                return Ok(v);
            }
            if part.lock().deleted {
                return Err(ServerError::new(
                    ErrorCode::UnknownShuffle,
                    format!("shuffle {shuffle_id} of app '{app_id}' was deleted"),
                ));
            }
            if tokio::time::Instant::now() > deadline {
                return Err(timed_out(what));
            }
            nudge();
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        for part in &parts {
            let end = wait(
                part,
                "written to disk (see flush errors)",
                &|| match part.attempt_end(map, attempt) {
                    // With an object store, eviction makes room: wait for it.
                    None if self.disk_full.load(Ordering::Acquire) && self.tier.is_none() => {
                        Err(self.disk_full_error())
                    }
                    end => Ok(end),
                },
                &|| self.schedule_flush(part.clone()),
            )
            .await?;
            // After an eviction the local file is not a whole copy on its own (a restarted
            // worker drops it): what a disk commit promises then lives in the store.
            let evicted = part.lock().local_from > 0;
            if level == Durability::ObjectStore || evicted {
                wait(
                    part,
                    "uploaded to the object store",
                    &|| Ok((part.lock().uploaded_to >= end).then_some(end)),
                    &|| self.schedule_upload(part.clone()),
                )
                .await?;
            }
        }
        if level == Durability::ObjectStore {
            return Ok(());
        }
        let paths: Vec<PathBuf> = parts.iter().map(|p| p.path.clone()).collect();
        tokio::task::spawn_blocking(move || {
            for path in paths {
                match std::fs::File::open(&path) {
                    Ok(f) => f.sync_data()?,
                    // Evicted meanwhile: only wholly uploaded files are.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            Ok::<(), std::io::Error>(())
        })
        .await
        .map_err(|e| ServerError::new(ErrorCode::Internal, format!("sync task failed: {e}")))?
        .map_err(|e| ServerError::io("syncing partition files", e))
    }

    /// Takes the coordinator's view of which attempt counts for every map (after either
    /// of them restarted).
    pub fn sync_commits(
        &self,
        app_id: &str,
        shuffle_id: u32,
        map_attempts: &[u32],
    ) -> Result<(), ServerError> {
        let shuffle = self.shuffle(app_id, shuffle_id)?;
        if map_attempts.len() != shuffle.committed.len() {
            return Err(ServerError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "{} map attempts for a shuffle of {} maps",
                    map_attempts.len(),
                    shuffle.num_maps
                ),
            ));
        }
        for (slot, &a) in shuffle.committed.iter().zip(map_attempts) {
            slot.store(a, Ordering::Release);
        }
        Ok(())
    }

    /// Deletes a shuffle's data; `everywhere` also deletes what every worker uploaded of
    /// it to the object store. Unknown shuffles are fine (deletion is idempotent).
    pub fn delete_shuffle(&self, app_id: &str, shuffle_id: u32, everywhere: bool) {
        let removed = {
            let mut apps = self.apps.write().expect("lock");
            let removed = apps.get_mut(app_id).and_then(|s| s.remove(&shuffle_id));
            if apps.get(app_id).is_some_and(|s| s.is_empty()) {
                apps.remove(app_id);
            }
            removed
        };
        if let Some(s) = removed {
            self.drop_shuffle(&s);
        }
        if let Some(t) = self.tier.as_ref().filter(|_| everywhere) {
            let (store, app_id) = (t.store.clone(), app_id.to_string());
            tokio::spawn(async move {
                if let Err(e) = store.delete_shuffle(&app_id, shuffle_id).await {
                    tracing::warn!(error = %e, "could not delete a shuffle's segments");
                }
            });
        }
    }

    /// Deletes all data of an app; `everywhere` as for [`Store::delete_shuffle`].
    pub fn delete_app(&self, app_id: &str, everywhere: bool) {
        let removed = self.apps.write().expect("lock").remove(app_id);
        for s in removed.into_iter().flat_map(|m| m.into_values()) {
            self.drop_shuffle(&s);
        }
        for root in &self.roots {
            let _ = std::fs::remove_dir_all(root.join(safe_component(app_id)));
        }
        if let Some(t) = self.tier.as_ref().filter(|_| everywhere) {
            let (store, app_id) = (t.store.clone(), app_id.to_string());
            tokio::spawn(async move {
                if let Err(e) = store.delete_app(&app_id).await {
                    tracing::warn!(error = %e, "could not delete an app's segments");
                }
            });
        }
    }

    fn drop_shuffle(&self, s: &Shuffle) {
        let mut freed_disk = 0;
        for p in s.all_partitions() {
            let (memory, disk) = p.delete();
            self.budget.give_back(memory);
            freed_disk += disk;
        }
        self.stored_bytes.fetch_sub(freed_disk, Ordering::Relaxed);
        for dir in &s.dirs {
            if let Err(e) = std::fs::remove_dir_all(dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(dir = %dir.display(), error = %e, "could not delete shuffle data");
                }
            }
        }
        tracing::info!(app = %s.app_id, shuffle = s.shuffle_id, "deleted shuffle data");
    }

    /// Starts a flush of `part` unless one is already scheduled.
    pub fn schedule_flush(self: &Arc<Self>, part: Arc<Partition>) {
        if part.flushing.swap(true, Ordering::AcqRel) {
            return;
        }
        let store = self.clone();
        tokio::spawn(async move {
            let _slot = store.flush_slots.acquire().await.expect("never closed");
            while let Some(job) = part.take_flush() {
                let path = part.path.clone();
                let written = tokio::task::spawn_blocking(move || write_job(&path, job)).await;
                match written {
                    Ok((job, Ok(()))) => {
                        store.disk_full.store(false, Ordering::Release);
                        if let Some(freed) = part.complete_flush(&job) {
                            store.budget.give_back(freed);
                            store
                                .metrics
                                .flushed_bytes
                                .fetch_add(job.payload_bytes, Ordering::Relaxed);
                            store
                                .stored_bytes
                                .fetch_add(job.file_bytes, Ordering::Relaxed);
                            store.schedule_upload(part.clone());
                        }
                    }
                    Ok((job, Err(e))) => {
                        if !part.lock().deleted {
                            tracing::error!(path = %part.path.display(), error = %e, "flush failed; batches stay in memory and will be retried");
                            store.metrics.flush_errors.fetch_add(1, Ordering::Relaxed);
                            let no_space = e.kind() == std::io::ErrorKind::StorageFull
                                || e.kind() == std::io::ErrorKind::QuotaExceeded;
                            if no_space && !store.disk_full.swap(true, Ordering::AcqRel) {
                                tracing::error!(dir = %part.path.display(), "disk full: this worker takes no data beyond its memory until space is freed");
                            }
                            part.abort_flush(&job);
                            let _ = std::fs::OpenOptions::new()
                                .write(true)
                                .open(&part.path)
                                .and_then(|f| f.set_len(job.offset));
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        break;
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "flush task failed");
                        break;
                    }
                }
                if store.budget.used() <= store.low_water {
                    break;
                }
            }
            part.flushing.store(false, Ordering::Release);
        });
    }

    /// Starts uploading the written, not yet uploaded part of `part`'s file as one
    /// segment, unless an upload of it is already scheduled. At most two uploads run at
    /// once; a partition's uploads run one at a time, so while one is in flight the
    /// next flushes gather into the next segment. A failed upload is retried every
    /// 500 ms (without holding a slot) until it succeeds or the partition is deleted.
    pub fn schedule_upload(self: &Arc<Self>, part: Arc<Partition>) {
        let Some(tier) = &self.tier else {
            return;
        };
        if part.to_upload().is_none() || part.uploading.swap(true, Ordering::AcqRel) {
            return;
        }
        let (store, object) = (self.clone(), tier.store.clone());
        let writer = tier.writer;
        tokio::spawn(async move {
            while let Some(range) = part.to_upload() {
                let slot = store.upload_slots.acquire().await.expect("never closed");
                let key: Arc<str> = ObjectStore::segment_key(
                    &part.app_id,
                    part.shuffle_id,
                    part.id,
                    writer,
                    range.start,
                )
                .into();
                let res = object.upload(&key, &part.path, range.clone()).await;
                drop(slot);
                match res {
                    Ok(()) => {
                        let bytes = range.end - range.start;
                        if !part.uploaded(range, key.clone()) {
                            let _ = object.delete(&key).await; // deleted meanwhile
                            break;
                        }
                        let m = &store.metrics;
                        m.uploaded_bytes.fetch_add(bytes, Ordering::Relaxed);
                        m.uploaded_segments.fetch_add(1, Ordering::Relaxed);
                        *store.last_upload_error.lock().expect("lock") = None;
                    }
                    Err(_) if part.lock().deleted => break,
                    Err(e) => {
                        tracing::error!(error = %e, "upload failed; retrying in 500 ms");
                        store.metrics.upload_errors.fetch_add(1, Ordering::Relaxed);
                        *store.last_upload_error.lock().expect("lock") = Some(e);
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
            part.uploading.store(false, Ordering::Release);
            // A flush that ended after the last look saw the flag still set.
            if part.to_upload().is_some() {
                store.schedule_upload(part);
            }
        });
    }

    /// The eviction policy: while the partition files on local disk take more than the
    /// disk quota, or the disk is full, the largest wholly uploaded partitions are
    /// evicted from it (their reads go to the object store from then on). Returns the
    /// bytes freed.
    pub fn evict(&self) -> u64 {
        let Some(tier) = &self.tier else {
            return 0;
        };
        let stored = self.stored_bytes.load(Ordering::Relaxed);
        let excess = if self.disk_full.load(Ordering::Acquire) {
            stored
        } else {
            match tier.disk_quota {
                Some(q) if stored > q => stored - q,
                _ => return 0,
            }
        };
        let mut parts: Vec<(u64, Arc<Partition>)> = self
            .every_partition()
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
            match p.evict(&evicted_marker(&p.path)) {
                None => {}
                Some(Ok(bytes)) => {
                    freed += bytes;
                    self.stored_bytes.fetch_sub(bytes, Ordering::Relaxed);
                    self.metrics
                        .evicted_bytes
                        .fetch_add(bytes, Ordering::Relaxed);
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

    /// Restores `partitions` (placed here, every copy lost) from the segments any worker
    /// uploaded of them: the records of the attempts in `map_attempts` are stored as if
    /// pushed (duplicates dropped). Returns the partitions that now hold exactly
    /// `expected` bytes of those attempts. The partitions are not served meanwhile, nor
    /// after: the coordinator decides what counts and then says so with `CheckCopies`
    /// (this call takes no commits, so one that ends after the coordinator gave up on it
    /// changes nothing that is read).
    pub async fn adopt(
        self: &Arc<Self>,
        app_id: &str,
        shuffle_id: u32,
        map_attempts: &[u32],
        partitions: &[u32],
        expected: &[u64],
    ) -> Result<Vec<u32>, ServerError> {
        let Some(tier) = &self.tier else {
            return Ok(Vec::new()); // nothing to adopt from
        };
        let shuffle = self.shuffle(app_id, shuffle_id)?;
        for &p in partitions {
            let Some(part) = shuffle.partition(p) else {
                continue;
            };
            part.restoring.store(true, Ordering::Release);
            let segments = tier
                .store
                .segments(app_id, shuffle_id, p)
                .await
                .map_err(|e| ServerError::new(ErrorCode::Io, e))?;
            let mut restored = 0u64;
            for seg in &segments {
                restored += self
                    .restore_segment(&tier.store, seg, &part, map_attempts)
                    .await?;
            }
            self.metrics
                .adopted_bytes
                .fetch_add(restored, Ordering::Relaxed);
            tracing::info!(app = %app_id, shuffle_id, partition = p, segments = segments.len(), restored, "restored a partition from the object store");
        }
        Ok(held_whole(&shuffle, map_attempts, partitions, expected))
    }

    /// Reads one segment in pieces of [`ADOPT_READ`] bytes and stores the committed
    /// attempts' records it holds into `part`. A record that fails its check ends the
    /// segment (the copy check then tells what is missing). Returns the payload bytes
    /// stored.
    async fn restore_segment(
        &self,
        store: &ObjectStore,
        seg: &super::object_store::Segment,
        part: &Partition,
        map_attempts: &[u32],
    ) -> Result<u64, ServerError> {
        let io = |e: String| ServerError::new(ErrorCode::Io, e);
        let size = store.size(&seg.key).await.map_err(io)?;
        let (mut at, mut buf, mut restored) = (0u64, Vec::<u8>::new(), 0u64);
        loop {
            let mut pos = 0;
            while let Parsed::Record(r) = parse_record(&buf[pos..]) {
                let end = pos + r.payload.end;
                if map_attempts.get(r.map as usize) == Some(&r.attempt) {
                    let payload = bytes::Bytes::copy_from_slice(&buf[pos + r.payload.start..end]);
                    let n = payload.len() as u64;
                    self.budget.take(n).await;
                    match part.insert(r.map, r.attempt, r.seq, r.crc, payload) {
                        super::partition::Insert::Stored => restored += n,
                        _ => self.budget.give_back(n),
                    }
                }
                pos = end;
            }
            let bad = parse_record(&buf[pos..]) == Parsed::Bad;
            buf.drain(..pos);
            if bad || at >= size {
                if bad || !buf.is_empty() {
                    tracing::warn!(key = %seg.key, offset = at - buf.len() as u64, "segment holds a bad or cut record; the rest of it is skipped");
                }
                return Ok(restored);
            }
            let n = (size - at).min(ADOPT_READ);
            let more = store.read_range(&seg.key, at..at + n).await.map_err(io)?;
            buf.extend_from_slice(&more);
            at += n;
        }
    }

    /// The flush policy. Batches stay in memory, where reducers read them fastest,
    /// until the buffered bytes pass the high-water mark; then the largest partitions are
    /// written (each as one large sequential write) until the low-water mark is reached.
    /// Partitions that received nothing for `idle` are written too, so memory held by
    /// finished or abandoned shuffles returns to the budget.
    pub fn relieve_pressure(self: &Arc<Self>, idle: Duration) {
        let mut parts: Vec<(u64, bool, Arc<Partition>)> = self
            .every_partition()
            .into_iter()
            .filter_map(|p| {
                let st = p.lock();
                let pending: u64 = st.mem_bytes;
                let idle = st.last_push.elapsed() >= idle;
                drop(st);
                (pending > 0).then_some((pending, idle, p))
            })
            .collect();
        parts.sort_by_key(|p| std::cmp::Reverse(p.0));
        let mut used = self.budget.used();
        let pressed = used > self.high_water;
        for (bytes, idle, p) in parts {
            if (pressed && used > self.low_water) || idle {
                used = used.saturating_sub(bytes);
                self.schedule_flush(p);
            }
        }
        self.evict();
    }

    /// Writes every partition's buffered batches to disk.
    pub fn flush_all(self: &Arc<Self>) {
        for p in self.every_partition() {
            self.schedule_flush(p);
        }
    }

    /// Every partition of every shuffle held here.
    fn every_partition(&self) -> Vec<Arc<Partition>> {
        let apps = self.apps.read().expect("lock");
        apps.values()
            .flat_map(|s| s.values())
            .flat_map(|s| s.all_partitions())
            .collect()
    }
}

/// Which of `partitions` hold exactly `expected` bytes of the attempts in `map_attempts`.
fn held_whole(
    shuffle: &Shuffle,
    map_attempts: &[u32],
    partitions: &[u32],
    expected: &[u64],
) -> Vec<u32> {
    let mut held = Vec::new();
    for (i, &p) in partitions.iter().enumerate() {
        let want = expected.get(i).copied().unwrap_or(u64::MAX);
        let have: u64 = match shuffle.partition(p) {
            Some(part) => map_attempts
                .iter()
                .enumerate()
                .filter(|(_, &a)| a != NO_ATTEMPT)
                .map(|(m, &a)| part.attempt_bytes(m as u32, a))
                .sum(),
            None if want == 0 => 0,
            None => continue,
        };
        if have == want {
            held.push(p);
        }
    }
    held
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
