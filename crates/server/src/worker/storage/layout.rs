//! Where a worker's data lives: the names of directories, files and object keys, and the
//! `shuffle.meta` file that lets a restarted worker find its shuffles again.
//!
//! ```text
//! <data dir>/<app>/<shuffle>/shuffle.meta       app id, shuffle id, maps, partitions
//! <data dir>/<app>/<shuffle>/<partition>.data   the partition's records
//! <data dir>/<app>/<shuffle>/<partition>.evicted  the file's start lives in the object store
//! ```
//!
//! With several data directories, partition `p` lives in the `p % n`-th one.

use std::path::{Path, PathBuf};

/// The file that describes a shuffle directory.
pub const META_FILE: &str = "shuffle.meta";

/// The name an app id takes in a path or an object key. App ids come from clients:
/// nothing in them may name a place outside the app's own directory.
pub fn app_component(app_id: &str) -> String {
    app_id
        .chars()
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

/// An app's directory under a data directory.
pub fn app_dir(root: &Path, app_id: &str) -> PathBuf {
    root.join(app_component(app_id))
}

/// A shuffle's directory under a data directory.
pub fn shuffle_dir(root: &Path, app_id: &str, shuffle_id: u32) -> PathBuf {
    app_dir(root, app_id).join(shuffle_id.to_string())
}

/// The data file of partition `p` in a shuffle directory.
pub fn partition_file(dir: &Path, p: u32) -> PathBuf {
    dir.join(format!("{p}.data"))
}

/// The partition a file name in a shuffle directory holds, if it is a data file.
pub fn partition_of(file_name: &str) -> Option<u32> {
    file_name.strip_suffix(".data")?.parse().ok()
}

/// Marks a partition file whose first part was evicted to the object store: a
/// restarted worker then knows the local file is not the whole partition.
pub fn evicted_marker(data_file: &Path) -> PathBuf {
    data_file.with_extension("evicted")
}

/// What a shuffle directory holds, as written in its `shuffle.meta`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShuffleMeta {
    pub app_id: String,
    pub shuffle_id: u32,
    pub num_maps: u32,
    pub num_partitions: u32,
}

impl ShuffleMeta {
    /// Writes `shuffle.meta` into `dir` unless it is there already.
    pub fn write_once(&self, dir: &Path) -> std::io::Result<()> {
        let path = dir.join(META_FILE);
        if path.exists() {
            return Ok(());
        }
        std::fs::write(
            &path,
            format!(
                "{}\n{}\n{}\n{}\n",
                self.app_id, self.shuffle_id, self.num_maps, self.num_partitions
            ),
        )
    }

    /// Reads `dir`'s `shuffle.meta`: `None` if there is none, an error text if it is
    /// there but unreadable.
    pub fn read(dir: &Path) -> Option<Result<ShuffleMeta, &'static str>> {
        let text = std::fs::read_to_string(dir.join(META_FILE)).ok()?;
        let fields: Vec<&str> = text.lines().collect();
        let [app_id, shuffle_id, num_maps, num_partitions] = fields[..] else {
            return Some(Err("unreadable shuffle.meta"));
        };
        let parsed = (|| {
            Some(ShuffleMeta {
                app_id: app_id.to_string(),
                shuffle_id: shuffle_id.parse().ok()?,
                num_maps: num_maps.parse().ok()?,
                num_partitions: num_partitions.parse().ok()?,
            })
        })();
        Some(parsed.ok_or("unreadable shuffle.meta"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_ids_stay_inside_their_directory() {
        assert_eq!(app_component("../app 1"), "_app_1");
        assert_eq!(app_component("app-1.x_y"), "app-1.x_y");
        let root = Path::new("/data");
        assert_eq!(
            partition_file(&shuffle_dir(root, "a", 3), 7),
            Path::new("/data/a/3/7.data")
        );
        assert_eq!(partition_of("7.data"), Some(7));
        assert_eq!(partition_of("7.evicted"), None);
        assert_eq!(
            evicted_marker(Path::new("/d/7.data")),
            Path::new("/d/7.evicted")
        );
    }

    #[test]
    fn shuffle_meta_round_trips_and_is_written_once() {
        let dir = tempfile::tempdir().unwrap();
        assert!(ShuffleMeta::read(dir.path()).is_none());
        let meta = ShuffleMeta {
            app_id: "a/b".into(),
            shuffle_id: 2,
            num_maps: 3,
            num_partitions: 4,
        };
        meta.write_once(dir.path()).unwrap();
        let other = ShuffleMeta {
            num_maps: 9,
            ..meta.clone()
        };
        other.write_once(dir.path()).unwrap();
        assert_eq!(ShuffleMeta::read(dir.path()), Some(Ok(meta)));
        std::fs::write(dir.path().join(META_FILE), "x\n").unwrap();
        assert!(matches!(ShuffleMeta::read(dir.path()), Some(Err(_))));
    }
}
