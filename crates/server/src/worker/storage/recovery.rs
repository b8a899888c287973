//! A restarted worker finds what its previous run left in its data directories.
//!
//! Every shuffle directory with a readable `shuffle.meta` is taken back, and each of
//! its partition files re-indexed record by record (a torn tail is cut). Nothing counts
//! as committed until the coordinator says so (`CheckCopies`, `SyncCommits`): a file
//! whose committed attempts do not add up is never served.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::disk::LocalDisk;
use super::layout::{self, ShuffleMeta};
use super::partition::Partition;
use super::registry::Registry;

/// Indexes the partition files of every data directory. Returns the partitions found.
pub fn recover(registry: &Registry, disk: &LocalDisk) -> std::io::Result<usize> {
    let mut found = 0;
    for root in registry.roots() {
        found += recover_root(registry, disk, root)?;
    }
    Ok(found)
}

fn recover_root(registry: &Registry, disk: &LocalDisk, root: &Path) -> std::io::Result<usize> {
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
            let meta = match ShuffleMeta::read(&dir) {
                None => continue,
                Some(Err(why)) => {
                    tracing::warn!(dir = %dir.display(), "{why}; skipped");
                    continue;
                }
                Some(Ok(meta)) => meta,
            };
            let (partitions, bytes) = recover_partitions(&dir, &meta, disk)?;
            found += partitions.len();
            let dirs = registry.shuffle_dirs(&meta.app_id, meta.shuffle_id);
            let shuffle = registry.insert(&meta, dirs);
            shuffle.add_recovered(partitions);
            // What it holds counts against its app's stored quota as pushed bytes do.
            shuffle
                .accepted
                .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
        }
    }
    Ok(found)
}

fn recover_partitions(
    dir: &Path,
    meta: &ShuffleMeta,
    disk: &LocalDisk,
) -> std::io::Result<(HashMap<u32, Arc<Partition>>, u64)> {
    let mut partitions = HashMap::new();
    let mut total = 0;
    let owner: Arc<str> = meta.app_id.as_str().into();
    for f in std::fs::read_dir(dir)?.flatten() {
        let name = f.file_name().to_string_lossy().to_string();
        let Some(p) = layout::partition_of(&name)
            .filter(|&p| p < crossdock_proto::slot_limit(meta.num_partitions))
        else {
            continue;
        };
        // Part of it lives only in the object store: not a whole copy here. The
        // coordinator has it adopted from the store.
        let marker = layout::evicted_marker(&f.path());
        if marker.exists() {
            let _ = std::fs::remove_file(f.path());
            let _ = std::fs::remove_file(&marker);
            continue;
        }
        let (part, bytes) = Partition::recover(p, owner.clone(), meta.shuffle_id, f.path())?;
        disk.add_stored(bytes);
        total += bytes;
        partitions.insert(p, Arc::new(part));
    }
    Ok((partitions, total))
}
