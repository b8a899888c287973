//! The object tier: copies of partition files in S3 (or any S3-compatible store) or in a
//! mounted distributed file system, through `opendal`. This module only talks to the
//! store; when to upload, evict and adopt is decided by the modules above it.
//!
//! A worker uploads each partition file in **segments**: a segment is the byte range
//! `[start, end)` of the file, written as one immutable object once those bytes are in
//! the file. Segments start and end on record boundaries, so each one can be checked and
//! indexed on its own (the records carry their map, attempt, sequence number and CRC).
//!
//! ```text
//! <root>/<app>/<shuffle>/<partition>/<writer>-<start>.seg
//! ```
//!
//! `writer` is the uploading worker's incarnation (16 hex digits), `start` the segment's
//! offset in that worker's file (16 hex digits). Every copy a worker ever uploaded of a
//! partition is under the partition's prefix, which is what lets another worker adopt a
//! partition whose copies were all lost.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use opendal::layers::{RetryLayer, TimeoutLayer};
use opendal::{services, ErrorKind, Operator};

use crate::names::{app_name, is_app_name};

/// Why the object tier could not do something. Every variant names the store and,
/// where there is one, the key.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("'{url}' is not an object-store URL: {why}; give s3://BUCKET[/PREFIX][?endpoint=URL&region=REGION] or file:///PATH")]
    BadUrl { url: String, why: String },
    #[error("creating {}: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("object store '{url}': {source}")]
    Open {
        url: String,
        source: Box<opendal::Error>,
    },
    #[error("object store {url} is not usable: {source}")]
    Unusable {
        url: String,
        source: Box<opendal::Error>,
    },
    #[error("object store {url}: an object read back differs from what was written")]
    ReadBackDiffers { url: String },
    #[error("{op} {key} in {url}: {source}")]
    Op {
        op: &'static str,
        key: String,
        url: String,
        source: Box<opendal::Error>,
    },
    #[error("uploading {key} to {url}: reading {}: {source}", path.display())]
    LocalFile {
        key: String,
        url: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading {key} from {url}: {got} bytes instead of {want}")]
    ShortRead {
        key: String,
        url: String,
        got: u64,
        want: u64,
    },
    #[error("uploading {key}: the read task failed: {source}")]
    Task {
        key: String,
        source: tokio::task::JoinError,
    },
}

/// Bytes read from a local file and sent per write of an upload (and the size of a
/// multipart upload's parts): above S3's 5 MiB minimum part size.
pub const UPLOAD_CHUNK: usize = 8 << 20;

/// One uploaded segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub key: String,
    pub writer: u64,
    pub start: u64,
}

/// A connection to the store where workers keep copies of their partition files.
pub struct ObjectTier {
    op: Operator,
    /// The URL as given, without credentials (for messages).
    url: String,
}

/// The parts of an object-store URL.
#[derive(Debug, PartialEq, Eq)]
enum Location {
    S3 {
        bucket: String,
        root: String,
        endpoint: Option<String>,
        region: Option<String>,
    },
    Dir(PathBuf),
}

fn parse_url(url: &str) -> Result<Location, ObjectError> {
    let bad = |why: String| ObjectError::BadUrl {
        url: url.to_string(),
        why,
    };
    if let Some(path) = url.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(bad("a file URL needs an absolute path".into()));
        }
        return Ok(Location::Dir(PathBuf::from(path)));
    }
    let Some(rest) = url.strip_prefix("s3://") else {
        return Err(bad("it is neither s3:// nor file://".into()));
    };
    let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (bucket, root) = location.split_once('/').unwrap_or((location, ""));
    if bucket.is_empty() {
        return Err(bad("it names no bucket".into()));
    }
    let (mut endpoint, mut region) = (None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("endpoint", v)) if !v.is_empty() => endpoint = Some(v.to_string()),
            Some(("region", v)) if !v.is_empty() => region = Some(v.to_string()),
            _ => {
                return Err(bad(format!(
                    "unknown or empty option '{pair}' (known: endpoint, region)"
                )))
            }
        }
    }
    Ok(Location::S3 {
        bucket: bucket.to_string(),
        root: format!("/{}", root.trim_matches('/')),
        endpoint,
        region,
    })
}

impl ObjectTier {
    /// Connects to the store a URL names: `s3://bucket/prefix?endpoint=...&region=...`
    /// (credentials from `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, or the other
    /// usual AWS sources) or `file:///path` (a local or mounted file system).
    pub fn open(url: &str) -> Result<Arc<ObjectTier>, ObjectError> {
        // The HTTP client S3 requests go through (idempotent).
        opendal::install_default();
        let op = match parse_url(url)? {
            Location::Dir(path) => {
                std::fs::create_dir_all(&path).map_err(|source| ObjectError::CreateDir {
                    path: path.clone(),
                    source,
                })?;
                let b = services::Fs::default().root(&path.to_string_lossy());
                Operator::new(b)
            }
            Location::S3 {
                bucket,
                root,
                endpoint,
                region,
            } => {
                let mut b = services::S3::default().bucket(&bucket).root(&root);
                if let Some(e) = &endpoint {
                    b = b.endpoint(e);
                }
                // S3-compatible stores ignore the region, but requests are signed with one.
                b = b.region(region.as_deref().unwrap_or("us-east-1"));
                Operator::new(b)
            }
        }
        .map_err(|source| ObjectError::Open {
            url: url.to_string(),
            source: Box::new(source),
        })?
        .layer(
            TimeoutLayer::new()
                .with_timeout(Duration::from_secs(60))
                .with_io_timeout(Duration::from_secs(30)),
        )
        .layer(
            RetryLayer::new()
                .with_min_delay(Duration::from_millis(100))
                .with_max_delay(Duration::from_secs(5))
                .with_max_times(4)
                .with_jitter(),
        );
        Ok(Arc::new(ObjectTier {
            op,
            url: url.to_string(),
        }))
    }

    /// The error of a failed operation on `key`.
    fn op_error(&self, op: &'static str, key: &str) -> impl FnOnce(opendal::Error) -> ObjectError {
        let (key, url) = (key.to_string(), self.url.clone());
        move |source| ObjectError::Op {
            op,
            key,
            url,
            source: Box::new(source),
        }
    }

    /// Writes, reads back and deletes a small object, so that a wrong endpoint, bucket
    /// or credential stops the worker at start instead of failing its first commit.
    pub async fn probe(&self, writer: u64) -> Result<(), ObjectError> {
        let key = format!("_probe/{writer:016x}");
        let body = Bytes::from(format!("crossdock worker {writer:016x}"));
        let check = async {
            self.op.write(&key, body.clone()).await?;
            let back = self.op.read(&key).await?.to_bytes();
            self.op.delete(&key).await?;
            Ok::<_, opendal::Error>(back)
        };
        match check.await {
            Ok(back) if back == body => Ok(()),
            Ok(_) => Err(ObjectError::ReadBackDiffers {
                url: self.url.clone(),
            }),
            Err(source) => Err(ObjectError::Unusable {
                url: self.url.clone(),
                source: Box::new(source),
            }),
        }
    }

    fn shuffle_prefix(app_id: &str, shuffle_id: u32) -> String {
        format!("{}/{shuffle_id}/", app_name(app_id))
    }

    fn partition_prefix(app_id: &str, shuffle_id: u32, partition: u32) -> String {
        format!("{}{partition}/", Self::shuffle_prefix(app_id, shuffle_id))
    }

    /// The key of the segment of `writer`'s file for `partition` that starts at `start`.
    pub fn segment_key(
        app_id: &str,
        shuffle_id: u32,
        partition: u32,
        writer: u64,
        start: u64,
    ) -> String {
        format!(
            "{}{writer:016x}-{start:016x}.seg",
            Self::partition_prefix(app_id, shuffle_id, partition)
        )
    }

    /// Uploads `range` of the local file `path` as the object `key`, reading and sending
    /// it in [`UPLOAD_CHUNK`]s (a multipart upload when it is larger than one).
    pub async fn upload(
        &self,
        key: &str,
        path: &Path,
        range: Range<u64>,
    ) -> Result<(), ObjectError> {
        let local = |source: std::io::Error| ObjectError::LocalFile {
            key: key.to_string(),
            url: self.url.clone(),
            path: path.to_path_buf(),
            source,
        };
        let file = std::fs::File::open(path).map(Arc::new).map_err(local)?;
        let mut w = self
            .op
            .writer_with(key)
            .chunk(UPLOAD_CHUNK)
            .await
            .map_err(self.op_error("uploading", key))?;
        let mut at = range.start;
        while at < range.end {
            let n = (range.end - at).min(UPLOAD_CHUNK as u64) as usize;
            let f = file.clone();
            let chunk = tokio::task::spawn_blocking(move || {
                use std::os::unix::fs::FileExt;
                let mut buf = vec![0u8; n];
                f.read_exact_at(&mut buf, at).map(|()| Bytes::from(buf))
            })
            .await
            .map_err(|source| ObjectError::Task {
                key: key.to_string(),
                source,
            })
            .and_then(|r| r.map_err(local));
            let written = match chunk {
                Ok(chunk) => w
                    .write(chunk)
                    .await
                    .map_err(self.op_error("uploading", key)),
                Err(e) => Err(e),
            };
            if let Err(e) = written {
                // Drops the parts sent so far (an unfinished multipart upload).
                let _ = w.abort().await;
                return Err(e);
            }
            at += n as u64;
        }
        if let Err(e) = w.close().await {
            let _ = w.abort().await;
            return Err(self.op_error("uploading", key)(e));
        }
        Ok(())
    }

    /// Reads `range` of an object.
    pub async fn read_range(&self, key: &str, range: Range<u64>) -> Result<Bytes, ObjectError> {
        let want = range.end - range.start;
        let got = self
            .op
            .read_with(key)
            .range(range)
            .await
            .map_err(self.op_error("reading", key))?
            .to_bytes();
        if got.len() as u64 != want {
            return Err(ObjectError::ShortRead {
                key: key.to_string(),
                url: self.url.clone(),
                got: got.len() as u64,
                want,
            });
        }
        Ok(got)
    }

    /// The size of an object.
    pub async fn size(&self, key: &str) -> Result<u64, ObjectError> {
        self.op
            .stat(key)
            .await
            .map(|m| m.content_length())
            .map_err(self.op_error("looking up", key))
    }

    /// Every segment any worker uploaded of a partition, by writer and offset.
    pub async fn segments(
        &self,
        app_id: &str,
        shuffle_id: u32,
        partition: u32,
    ) -> Result<Vec<Segment>, ObjectError> {
        let prefix = Self::partition_prefix(app_id, shuffle_id, partition);
        let entries = match self.op.list(&prefix).await {
            Ok(e) => e,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.op_error("listing", &prefix)(e)),
        };
        let mut out: Vec<Segment> = entries
            .iter()
            .filter_map(|e| {
                let (writer, start) = e.name().strip_suffix(".seg")?.split_once('-')?;
                Some(Segment {
                    key: format!("{prefix}{}", e.name()),
                    writer: u64::from_str_radix(writer, 16).ok()?,
                    start: u64::from_str_radix(start, 16).ok()?,
                })
            })
            .collect();
        out.sort_by_key(|s| (s.writer, s.start));
        Ok(out)
    }

    /// Deletes everything stored for a shuffle (every worker's segments).
    pub async fn delete_shuffle(&self, app_id: &str, shuffle_id: u32) -> Result<(), ObjectError> {
        self.delete_prefix(&Self::shuffle_prefix(app_id, shuffle_id))
            .await
    }

    /// Deletes everything stored for an app.
    pub async fn delete_app(&self, app_id: &str) -> Result<(), ObjectError> {
        let name = app_name(app_id);
        // Never a prefix of other apps' keys, let alone the whole store.
        assert!(is_app_name(&name), "app name {name:?} names no single app");
        self.delete_prefix(&format!("{name}/")).await
    }

    /// Deletes one object (a segment uploaded for a partition deleted meanwhile).
    pub async fn delete(&self, key: &str) -> Result<(), ObjectError> {
        self.op
            .delete(key)
            .await
            .map_err(self.op_error("deleting", key))
    }

    async fn delete_prefix(&self, prefix: &str) -> Result<(), ObjectError> {
        match self.op.delete_with(prefix).recursive(true).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.op_error("deleting", prefix)(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_bucket_or_a_directory() {
        assert_eq!(
            parse_url("s3://shuffle/crossdock/prod?endpoint=http://127.0.0.1:9000&region=eu-1")
                .ok(),
            Some(Location::S3 {
                bucket: "shuffle".into(),
                root: "/crossdock/prod".into(),
                endpoint: Some("http://127.0.0.1:9000".into()),
                region: Some("eu-1".into()),
            })
        );
        assert_eq!(
            parse_url("s3://shuffle").ok(),
            Some(Location::S3 {
                bucket: "shuffle".into(),
                root: "/".into(),
                endpoint: None,
                region: None,
            })
        );
        assert_eq!(
            parse_url("file:///mnt/dfs/crossdock").ok(),
            Some(Location::Dir(PathBuf::from("/mnt/dfs/crossdock")))
        );
        for bad in [
            "s3://",
            "s3:///prefix",
            "s3://b?endpont=x",
            "s3://b?endpoint=",
            "file://relative/path",
            "hdfs://namenode/x",
            "/just/a/path",
        ] {
            assert!(parse_url(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn segment_keys_sort_by_writer_and_offset_and_keep_app_ids_inside() {
        let k = ObjectTier::segment_key("../app 1", 7, 3, 0xab, 0x10);
        assert_eq!(
            k,
            "%2E%2E%2Fapp%201/7/3/00000000000000ab-0000000000000010.seg"
        );
        assert!(
            ObjectTier::segment_key("a", 1, 0, 1, 2) < ObjectTier::segment_key("a", 1, 0, 1, 10)
        );
    }

    #[tokio::test]
    async fn segments_round_trip_through_a_directory_store() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            ObjectTier::open(&format!("file://{}", dir.path().join("store").display())).unwrap();
        store.probe(1).await.unwrap();
        let file = dir.path().join("0.data");
        let data: Vec<u8> = (0..(UPLOAD_CHUNK + 100)).map(|i| (i % 251) as u8).collect();
        std::fs::write(&file, &data).unwrap();
        let key = ObjectTier::segment_key("app", 1, 0, 9, 50);
        // Larger than one chunk: the upload sends two writes.
        store
            .upload(&key, &file, 50..data.len() as u64)
            .await
            .unwrap();
        assert_eq!(store.size(&key).await.unwrap(), data.len() as u64 - 50);
        let got = store.read_range(&key, 10..20).await.unwrap();
        assert_eq!(&got[..], &data[60..70]);
        let other = ObjectTier::segment_key("app", 1, 0, 2, 0);
        store.upload(&other, &file, 0..50).await.unwrap();
        let segs = store.segments("app", 1, 0).await.unwrap();
        assert_eq!(
            segs.iter().map(|s| (s.writer, s.start)).collect::<Vec<_>>(),
            vec![(2, 0), (9, 50)]
        );
        assert!(store.segments("app", 1, 5).await.unwrap().is_empty());
        assert!(store
            .read_range(&key, 0..(data.len() as u64))
            .await
            .is_err());
        store.delete_shuffle("app", 1).await.unwrap();
        assert!(store.segments("app", 1, 0).await.unwrap().is_empty());
        store.delete_app("app").await.unwrap();
    }
}
