//! What the integration tests share: data, pushes and reads, waiting, small disks and
//! object stores. Each test binary uses part of it.
#![allow(dead_code)]

pub mod embedded;
pub mod nodes;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use crossdock_client::{ClientError, FetchRange, Keyring, PartitionReader, Redirect, WorkerClient};
use crossdock_proto::auth::ClusterSecret;
use crossdock_proto::{checksum, AttemptId, PartitionStat, PushHeader};

/// The cluster secret of every test cluster: the integration tests run with
/// authentication on, as the `crossdock` binary does by default.
pub fn secret() -> Arc<ClusterSecret> {
    Arc::new(ClusterSecret::from_bytes(b"crossdock integration tests' cluster secret").unwrap())
}

/// The keys an app's clients hold (what its driver got from `RegisterApp`).
pub fn app_keys(app: &str) -> Keyring {
    Keyring::app(app, secret().app_token(app))
}

/// The test payload of one batch: a pattern of its map, partition and `tag` (its
/// sequence number or its attempt), so every batch read back can be checked.
pub fn payload(map: u32, partition: u32, tag: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32 ^ map.wrapping_mul(31) ^ partition.wrapping_mul(7) ^ tag) as u8)
        .collect()
}

/// The routing header of a batch of shuffle 0.
pub fn header(
    app: &str,
    partition: u32,
    map: u32,
    attempt: u32,
    seq: u32,
    payload: &[u8],
) -> PushHeader {
    PushHeader {
        app_id: app.into(),
        shuffle_id: 0,
        partition,
        map_id: map,
        attempt_id: AttemptId(attempt),
        batch_seq: seq,
        crc32c: checksum(payload),
    }
}

/// Pushes one batch to the worker at `addr` and waits for its acknowledgement.
pub async fn push_batch(
    addr: &str,
    app: &str,
    partition: u32,
    (map, attempt, seq): (u32, u32, u32),
    data: &[u8],
) -> Result<(), ClientError> {
    push_routed(addr, app, partition, (map, attempt, seq), data)
        .await
        .map(|_| ())
}

/// As [`push_batch`], answering where the partition goes on if it was split.
pub async fn push_routed(
    addr: &str,
    app: &str,
    partition: u32,
    batch: (u32, u32, u32),
    data: &[u8],
) -> Result<Option<Redirect>, ClientError> {
    push_routed_in(0, addr, app, partition, batch, data).await
}

/// [`push_routed`] to a partition of shuffle `shuffle`.
pub async fn push_routed_in(
    shuffle: u32,
    addr: &str,
    app: &str,
    partition: u32,
    (map, attempt, seq): (u32, u32, u32),
    data: &[u8],
) -> Result<Option<Redirect>, ClientError> {
    let w = WorkerClient::connect(addr, &app_keys(app)).await?;
    let mut h = header(app, partition, map, attempt, seq, data);
    h.shuffle_id = shuffle;
    let p = w.push(&h, data).await?;
    w.finish_push(p).await
}

/// A reader of maps `[start, end)` of a partition of shuffle 0.
pub fn reader(addr: &str, app: &str, partition: u32, start: u32, end: u32) -> PartitionReader {
    reader_in(0, addr, app, partition, start, end)
}

/// [`reader`] of a partition of shuffle `shuffle`.
pub fn reader_in(
    shuffle: u32,
    addr: &str,
    app: &str,
    partition: u32,
    start: u32,
    end: u32,
) -> PartitionReader {
    PartitionReader::new(
        addr,
        FetchRange {
            app_id: app.into(),
            shuffle_id: shuffle,
            partition,
            start_map: start,
            end_map: end,
        },
        &app_keys(app),
    )
}

/// Every batch a reader reads: (map, sequence number, payload).
pub async fn read_batches(mut r: PartitionReader) -> Result<Vec<(u32, u32, Bytes)>, ClientError> {
    let mut out = Vec::new();
    while let Some(b) = r.next_batch().await? {
        out.push((b.map_id, b.batch_seq, b.payload));
    }
    Ok(out)
}

/// One partition's figures in a commit (one record).
pub fn stat(partition: u32, bytes: usize) -> PartitionStat {
    PartitionStat {
        partition,
        bytes: bytes as u64,
        records: 1,
    }
}

/// The committed attempts as plain numbers, for comparison with literals.
pub fn attempts(a: &[Option<AttemptId>]) -> Vec<Option<u32>> {
    a.iter().map(|a| a.map(|a| a.0)).collect()
}

/// How long [`eventually`] waits for its condition before failing the test.
pub const EVENTUALLY: Duration = Duration::from_secs(30);

/// Waits until `check` holds, checking every 20 ms, and fails the test naming `what` if it
/// does not within [`EVENTUALLY`].
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    // A deadline, not a count of tries: each check may itself wait on the coordinator's
    // journal sync, which a loaded CI disk can stretch to seconds.
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    while !check().await {
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {EVENTUALLY:?} waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The first `Ok` of `attempt`, tried every 20 ms; fails the test naming `what` and the
/// last error if none comes within [`EVENTUALLY`] (e.g. registering a shuffle until a
/// worker that is starting has registered).
pub async fn first_ok<T, E, F, Fut>(what: &str, mut attempt: F) -> T
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        match attempt().await {
            Ok(v) => return v,
            Err(e) if tokio::time::Instant::now() >= deadline => {
                panic!("timed out after {EVENTUALLY:?} waiting until {what}; last error: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Waits until nothing accepts connections at `addr` (a stopped node's listener is
/// closed), so that a test acts on a node that is really gone or can take its address
/// again; a fixed sleep is not enough when the node's threads wait on a slow disk.
pub async fn until_closed(addr: &str) {
    eventually(&format!("{addr} refuses connections"), || async {
        tokio::net::TcpStream::connect(addr).await.is_err()
    })
    .await;
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted when dropped.
pub struct SmallDisk {
    pub dir: tempfile::TempDir,
}

impl SmallDisk {
    pub fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("running mount");
        assert!(
            out.status.success(),
            "mounting a tmpfs needs root (CI runs as root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallDisk { dir }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

/// A number not used before in this test binary.
pub fn rand_id() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

// Object-store tests run against a directory store (`file://`, what a mounted DFS
// looks like) and, when the test scripts started one (`CROSSDOCK_TEST_S3`), against a
// real S3 server.

/// The object stores to test against: a directory always, and the S3 server the test
/// scripts started, if any. With `CROSSDOCK_REQUIRE_S3` set (CI), a missing S3 server
/// fails the test instead of being skipped.
pub fn object_stores(dir: &std::path::Path) -> Vec<String> {
    let mut urls = vec![format!("file://{}", dir.join("store").display())];
    match std::env::var("CROSSDOCK_TEST_S3") {
        Ok(url) => urls.push(own_prefix(&url)),
        Err(_) if std::env::var_os("CROSSDOCK_REQUIRE_S3").is_some() => {
            panic!("CROSSDOCK_REQUIRE_S3 is set but no S3 server was started (CROSSDOCK_TEST_S3)")
        }
        Err(_) => {
            eprintln!("no S3 server (CROSSDOCK_TEST_S3 unset): testing the directory store only")
        }
    }
    urls
}

/// Gives an S3 URL a prefix of its own (`s3://bucket?endpoint=..` becomes
/// `s3://bucket/t<pid>-<nanos>?endpoint=..`), so runs never see each other's objects.
pub fn own_prefix(url: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{base}/t{}-{nanos}?{query}", std::process::id())
}
