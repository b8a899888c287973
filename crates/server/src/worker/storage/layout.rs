//! Where a worker's data lives: the names of directories, files and object keys, and the
//! `shuffle.meta` file that lets a restarted worker find its shuffles again.
//!
//! ```text
//! <data dir>/<app>/<shuffle>/shuffle.meta       app, shuffle id, maps, partitions
//! <data dir>/<app>/<shuffle>/<partition>.data   the partition's records
//! <data dir>/<app>/<shuffle>/<partition>.evicted  the file's start lives in the object store
//! ```
//!
//! `<app>` is the app id's name ([`crate::names`]: reversible, one safe component).
//! With several data directories, partition `p` lives in the `p % n`-th one.

use std::path::{Path, PathBuf};

use crate::names::{app_id_of, app_name};

/// The file that describes a shuffle directory.
pub const META_FILE: &str = "shuffle.meta";

/// An app's directory under a data directory.
pub fn app_dir(root: &Path, app_id: &str) -> PathBuf {
    root.join(app_name(app_id))
}

/// True if `dir` is an app directory right under `root` (what a deletion may remove).
pub fn is_app_dir(root: &Path, dir: &Path) -> bool {
    dir.parent() == Some(root)
        && dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(crate::names::is_app_name)
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
        std::fs::write(&path, self.to_text())
    }

    /// The contents of `shuffle.meta`: one field a line, the app id as its name.
    pub fn to_text(&self) -> String {
        format!(
            "{}\n{}\n{}\n{}\n",
            app_name(&self.app_id),
            self.shuffle_id,
            self.num_maps,
            self.num_partitions
        )
    }

    /// Reads `dir`'s `shuffle.meta`: `None` if there is none, an error text if it is
    /// there but unreadable.
    pub fn read(dir: &Path) -> Option<Result<ShuffleMeta, &'static str>> {
        let text = std::fs::read_to_string(dir.join(META_FILE)).ok()?;
        Some(Self::parse(&text))
    }

    /// Parses the contents of a `shuffle.meta` ([`ShuffleMeta::to_text`]). Apart from
    /// [`ShuffleMeta::read`] so that the fuzzer (`crates/fuzz`) reaches it without a file.
    pub fn parse(text: &str) -> Result<ShuffleMeta, &'static str> {
        // Five at most: a fifth line is already an error, however many follow.
        let fields: Vec<&str> = text.lines().take(5).collect();
        let [app_id, shuffle_id, num_maps, num_partitions] = fields[..] else {
            return Err("unreadable shuffle.meta");
        };
        let parsed = (|| {
            Some(ShuffleMeta {
                // A file of an earlier version holds the id as it was given.
                app_id: app_id_of(app_id).unwrap_or_else(|| app_id.to_string()),
                shuffle_id: shuffle_id.parse().ok()?,
                num_maps: num_maps.parse().ok()?,
                num_partitions: num_partitions.parse().ok()?,
            })
        })();
        parsed.ok_or("unreadable shuffle.meta")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_ids_stay_inside_their_directory() {
        let root = Path::new("/data");
        assert_eq!(
            app_dir(root, "../app 1"),
            Path::new("/data/%2E%2E%2Fapp%201")
        );
        assert!(is_app_dir(root, &app_dir(root, "..")));
        assert!(!is_app_dir(root, root));
        assert!(!is_app_dir(root, Path::new("/data/..")));
        assert!(!is_app_dir(root, Path::new("/data/a/b")));
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
            app_id: "a/b\nc".into(),
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
