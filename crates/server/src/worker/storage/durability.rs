//! The commit rule's wait: a map's commit is answered once its data is as durable as
//! the coordinator asks (`Durability`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crossdock_proto::{AttemptId, Durability};

use super::disk::LocalDisk;
use super::error::StorageError;
use super::partition::Partition;
use super::shuffle::Shuffle;

/// How long a commit waits for its data to reach the level it asks for.
pub const PERSIST_TIMEOUT: Duration = Duration::from_secs(120);

/// Waits until `map`'s `attempt` is as durable as `level` asks: every batch written to
/// its partition file and synced (`Disk`; also uploaded where the partition was partly
/// evicted), or written and uploaded (`ObjectStore`: the object store is the durable
/// copy, so nothing is synced).
pub async fn persist(
    disk: &Arc<LocalDisk>,
    shuffle: &Shuffle,
    map: u32,
    attempt: AttemptId,
    level: Durability,
) -> Result<(), StorageError> {
    if level == Durability::Memory {
        return Ok(());
    }
    if disk.memory_only() {
        return Err(StorageError::MemoryOnly {
            level: match level {
                Durability::ObjectStore => "the object store",
                _ => "disk",
            },
        });
    }
    let uploads = disk.uploads();
    if level == Durability::ObjectStore && uploads.is_none() {
        return Err(StorageError::NoObjectStore);
    }
    let parts: Vec<Arc<Partition>> = shuffle
        .partitions()
        .into_iter()
        .filter(|p| p.attempt_bytes(map, attempt) > 0)
        .collect();
    let wait = Wait {
        shuffle,
        map,
        attempt,
        deadline: tokio::time::Instant::now() + PERSIST_TIMEOUT,
        disk,
    };
    for part in &parts {
        let end = wait
            .until(
                part,
                "written to disk (see flush errors)",
                &|| match part.attempt_end(map, attempt) {
                    // With an object store, eviction makes room: wait for it.
                    None if disk.is_full() && uploads.is_none() => Err(disk.full_error()),
                    end => Ok(end),
                },
                &|| disk.schedule_flush(part.clone()),
            )
            .await?;
        // After an eviction the local file is not a whole copy on its own (a restarted
        // worker drops it): what a disk commit promises then lives in the store.
        let evicted = part.lock().local_from > 0;
        if let Some(up) = uploads.filter(|_| level == Durability::ObjectStore || evicted) {
            wait.until(
                part,
                "uploaded to the object store",
                &|| Ok((part.lock().uploaded_to >= end).then_some(end)),
                &|| up.schedule(part.clone()),
            )
            .await?;
        }
    }
    if level == Durability::ObjectStore {
        return Ok(());
    }
    let paths: Vec<PathBuf> = parts.iter().map(|p| p.path.clone()).collect();
    LocalDisk::sync(paths).await
}

/// One commit's wait for its partitions.
struct Wait<'a> {
    shuffle: &'a Shuffle,
    map: u32,
    attempt: AttemptId,
    deadline: tokio::time::Instant,
    disk: &'a LocalDisk,
}

/// Tells whether a partition is ready: `Some(end of the map's records)` once it is.
type Ready<'a> = &'a (dyn Fn() -> Result<Option<u64>, StorageError> + Sync);

impl Wait<'_> {
    /// Polls `ready` (2 ms apart), nudging the partition along with `nudge`, until it
    /// gives an answer or an error; a deletion or the deadline end the wait too.
    async fn until(
        &self,
        part: &Partition,
        what: &'static str,
        ready: Ready<'_>,
        nudge: &(dyn Fn() + Sync),
    ) -> Result<u64, StorageError> {
        loop {
            if let Some(v) = ready()? {
                return Ok(v);
            }
            if part.lock().deleted {
                return Err(StorageError::Deleted {
                    app: self.shuffle.app_id.clone(),
                    shuffle: self.shuffle.shuffle_id,
                });
            }
            if tokio::time::Instant::now() > self.deadline {
                return Err(StorageError::NotDurable {
                    map: self.map,
                    attempt: self.attempt,
                    what,
                    secs: PERSIST_TIMEOUT.as_secs(),
                    last_upload_error: self.disk.uploads().and_then(|u| u.last_error()),
                });
            }
            nudge();
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}
