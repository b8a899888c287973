//! Which apps and shuffles this worker holds, and where their directories are.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use super::error::StorageError;
use super::layout::{self, ShuffleMeta};
use super::partition::Partition;
use super::shuffle::Shuffle;

type AppShuffles = HashMap<u32, Arc<Shuffle>>;

/// The apps and shuffles held, by app id and shuffle id.
pub struct Registry {
    /// The data directories (one per disk); the first is the main one.
    roots: Vec<PathBuf>,
    apps: RwLock<HashMap<String, AppShuffles>>,
}

impl Registry {
    pub fn new(roots: Vec<PathBuf>) -> Registry {
        assert!(!roots.is_empty(), "a worker needs a data directory");
        Registry {
            roots,
            apps: RwLock::new(HashMap::new()),
        }
    }

    /// The data directories.
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// A shuffle's directory in every data directory.
    pub fn shuffle_dirs(&self, app_id: &str, shuffle_id: u32) -> Vec<PathBuf> {
        self.roots
            .iter()
            .map(|r| layout::shuffle_dir(r, app_id, shuffle_id))
            .collect()
    }

    /// An app's directory in every data directory.
    pub fn app_dirs(&self, app_id: &str) -> Vec<PathBuf> {
        self.roots
            .iter()
            .map(|r| layout::app_dir(r, app_id))
            .collect()
    }

    /// Looks a shuffle up, telling an unknown app from an unknown shuffle.
    pub fn shuffle(&self, app_id: &str, shuffle_id: u32) -> Result<Arc<Shuffle>, StorageError> {
        let apps = self.apps.read().expect("lock");
        let shuffles = apps.get(app_id).ok_or_else(|| StorageError::UnknownApp {
            app: app_id.to_string(),
        })?;
        shuffles
            .get(&shuffle_id)
            .cloned()
            .ok_or_else(|| StorageError::UnknownShuffle {
                app: app_id.to_string(),
                shuffle: shuffle_id,
            })
    }

    /// The shuffle `meta` describes, created (with its directories and their
    /// `shuffle.meta`) if it is not held yet. An existing shuffle of other dimensions
    /// is refused.
    pub fn get_or_create(&self, meta: &ShuffleMeta) -> Result<Arc<Shuffle>, StorageError> {
        let dirs = self.shuffle_dirs(&meta.app_id, meta.shuffle_id);
        for dir in &dirs {
            std::fs::create_dir_all(dir)
                .map_err(StorageError::io(format!("creating {}", dir.display())))?;
            meta.write_once(dir).map_err(StorageError::io(format!(
                "writing {}",
                dir.join(layout::META_FILE).display()
            )))?;
        }
        let shuffle = self.insert(meta, dirs);
        if shuffle.num_maps != meta.num_maps || shuffle.num_partitions != meta.num_partitions {
            return Err(StorageError::ShuffleExists {
                app: meta.app_id.clone(),
                shuffle: meta.shuffle_id,
                maps: shuffle.num_maps,
                partitions: shuffle.num_partitions,
            });
        }
        Ok(shuffle)
    }

    /// The shuffle `meta` describes, added with no partitions if it is not held yet.
    pub fn insert(&self, meta: &ShuffleMeta, dirs: Vec<PathBuf>) -> Arc<Shuffle> {
        self.apps
            .write()
            .expect("lock")
            .entry(meta.app_id.clone())
            .or_default()
            .entry(meta.shuffle_id)
            .or_insert_with(|| Arc::new(Shuffle::new(meta, dirs)))
            .clone()
    }

    /// Removes a shuffle; returns it if it was held.
    pub fn remove_shuffle(&self, app_id: &str, shuffle_id: u32) -> Option<Arc<Shuffle>> {
        let mut apps = self.apps.write().expect("lock");
        let removed = apps.get_mut(app_id).and_then(|s| s.remove(&shuffle_id));
        if apps.get(app_id).is_some_and(|s| s.is_empty()) {
            apps.remove(app_id);
        }
        removed
    }

    /// Removes an app; returns its shuffles.
    pub fn remove_app(&self, app_id: &str) -> Vec<Arc<Shuffle>> {
        let removed = self.apps.write().expect("lock").remove(app_id);
        removed.into_iter().flat_map(|m| m.into_values()).collect()
    }

    /// Payload bytes stored here for `app`'s pushes, over all its shuffles.
    pub fn app_accepted(&self, app_id: &str) -> u64 {
        let apps = self.apps.read().expect("lock");
        apps.get(app_id).map_or(0, |s| {
            s.values()
                .map(|s| s.accepted.load(std::sync::atomic::Ordering::Relaxed))
                .sum()
        })
    }

    /// Every shuffle held.
    pub fn every_shuffle(&self) -> Vec<Arc<Shuffle>> {
        let apps = self.apps.read().expect("lock");
        apps.values().flat_map(|s| s.values()).cloned().collect()
    }

    /// Every partition of every shuffle held.
    pub fn every_partition(&self) -> Vec<Arc<Partition>> {
        let apps = self.apps.read().expect("lock");
        apps.values()
            .flat_map(|s| s.values())
            .flat_map(|s| s.partitions())
            .collect()
    }

    /// Number of apps, shuffles and partitions held.
    pub fn counts(&self) -> (u64, u64, u64) {
        let apps = self.apps.read().expect("lock");
        let shuffles: u64 = apps.values().map(|s| s.len() as u64).sum();
        let partitions = apps
            .values()
            .flat_map(|s| s.values())
            .map(|s| s.partition_count() as u64)
            .sum();
        (apps.len() as u64, shuffles, partitions)
    }

    /// The main data directory.
    pub fn root(&self) -> &Path {
        &self.roots[0]
    }
}
