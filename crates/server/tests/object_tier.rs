//! The object-store tier with real workers: commits that wait for uploads, partitions
//! adopted from the store when every copy was lost, eviction above a disk quota and on
//! a full disk, and the errors of a missing or unusable store. Each test runs against a
//! directory store and against the S3 server the test scripts started.

mod common;

use std::time::Duration;

use crossdock_proto::{AttemptId, CommitStatus, Durability};
use crossdock_server::worker::storage::object::ObjectTier;
use crossdock_server::worker::{Worker, WorkerConfig};

use common::nodes::{
    expected, push_to, read_from, restart_in_place, run_map, start_worker_on, tiered, Cluster,
};
use common::{attempts, eventually, object_stores, own_prefix, payload, stat, SmallDisk};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_durability_object_store_losing_every_copy_recomputes_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    for url in object_stores(scratch.path()) {
        let c = Cluster::start_tiered(2, 1, Durability::ObjectStore, tiered(&url, None)).await;
        c.coord.register_app("o", 60_000).await.unwrap();
        let placement = c.coord.register_shuffle("o", 0, 3, 2).await.unwrap();
        let victim = placement.worker_of(0).unwrap().addr.clone();
        let survivor = placement.worker_of(1).unwrap().addr.clone();
        assert_ne!(victim, survivor);
        for m in 0..3 {
            // Answered only once the map's batches are uploaded.
            assert_eq!(
                run_map(&c, &placement, "o", m, 0, 2).await.unwrap().0,
                CommitStatus::Committed
            );
        }
        // Both partitions are in the store before anything is lost.
        let store = ObjectTier::open(&url).unwrap();
        for p in 0..2 {
            assert!(
                !store.segments("o", 0, p).await.unwrap().is_empty(),
                "{url}: {p}"
            );
        }
        // Every flush and every upload was timed (one file and one segment per commit at
        // least, on each worker).
        for addr in [&victim, &survivor] {
            let m = c.node(addr).worker.store.metrics();
            let segments = m
                .uploaded_segments
                .load(std::sync::atomic::Ordering::Relaxed);
            assert!(segments >= 1, "{url}: {addr}");
            assert_eq!(m.upload_latency.count(), segments, "{url}: {addr}");
            assert!(m.flush_latency.count() >= 1, "{url}: {addr}");
        }
        c.kill(&victim).await;
        let status = c.status("o").await;
        assert_eq!(
            attempts(&status.map_attempts),
            vec![Some(0), Some(0), Some(0)],
            "{url}: the lost partition was adopted from the object store; no map is rerun"
        );
        let moved = status.placement.worker_of(0).unwrap();
        assert_eq!(moved.addr, survivor, "{url}");
        for p in 0..2 {
            assert_eq!(
                read_from(&survivor, "o", p, 3).await.unwrap(),
                expected(p, &[0, 0, 0]),
                "{url}: partition {p}"
            );
        }
        let adopted = c
            .node(&survivor)
            .worker
            .store
            .metrics()
            .adopted_bytes
            .load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(adopted, 3 * 1000, "{url}: the three batches of partition 0");
        // Deleting the app deletes its segments.
        c.coord.unregister_app("o").await.unwrap();
        eventually("the app's segments are deleted", || async {
            store.segments("o", 0, 0).await.unwrap().is_empty()
                && store.segments("o", 0, 1).await.unwrap().is_empty()
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_whole_upload_a_lost_partition_still_revokes_its_maps() {
    // Durability memory: nothing was flushed, so nothing was uploaded. Adoption finds no
    // whole copy and the maps are rerun, never read partially.
    let scratch = tempfile::tempdir().unwrap();
    let url = format!("file://{}", scratch.path().join("store").display());
    let c = Cluster::start_tiered(2, 1, Durability::Memory, tiered(&url, None)).await;
    c.coord.register_app("q", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("q", 0, 2, 2).await.unwrap();
    for m in 0..2 {
        run_map(&c, &placement, "q", m, 0, 2).await.unwrap();
    }
    let victim = placement.worker_of(0).unwrap().addr.clone();
    c.kill(&victim).await;
    assert_eq!(
        attempts(&c.status("q").await.map_attempts),
        vec![None, None]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn above_its_disk_quota_a_worker_evicts_uploaded_files_and_serves_them_from_the_store() {
    use std::sync::atomic::Ordering::Relaxed;
    let scratch = tempfile::tempdir().unwrap();
    let stores = object_stores(scratch.path());
    // With `disk`, what a commit into a partly evicted file promises must be in the
    // store too: the restart below drops the local file.
    let runs = [Durability::ObjectStore, Durability::Disk]
        .into_iter()
        .flat_map(|d| stores.iter().map(move |u| (d, u.clone())));
    for (durability, url) in runs {
        // A store of its own per run.
        let url = &match durability {
            Durability::Disk if url.starts_with("file://") => format!("{url}-disk"),
            Durability::Disk => own_prefix(&url),
            _ => url,
        };
        // A quota of one byte: every wholly uploaded partition file is evicted.
        let c = Cluster::start_tiered(2, 1, durability, tiered(url, Some(1))).await;
        c.coord.register_app("v", 60_000).await.unwrap();
        let placement = c.coord.register_shuffle("v", 0, 2, 2).await.unwrap();
        for m in 0..2 {
            run_map(&c, &placement, "v", m, 0, 2).await.unwrap();
        }
        eventually("the partition files are evicted", || async {
            c.nodes.iter().all(|n| n.worker.store.stored_bytes() == 0)
        })
        .await;
        for p in 0..2 {
            let addr = &placement.worker_of(p).unwrap().addr;
            assert_eq!(
                read_from(addr, "v", p, 2).await.unwrap(),
                expected(p, &[0, 0]),
                "{url}: partition {p} read from the object store"
            );
        }
        let read: u64 = c
            .nodes
            .iter()
            .map(|n| n.worker.store.metrics().object_read_bytes.load(Relaxed))
            .sum();
        assert!(read >= 4 * 1000, "{url}: {read} bytes read from the store");
        // A map of a rerun stage is written to local disk again (after the evicted
        // part), and the reader gets both tiers in one stream.
        run_map(&c, &placement, "v", 1, 1 << 16, 2).await.unwrap();
        for p in 0..2 {
            let addr = &placement.worker_of(p).unwrap().addr;
            assert_eq!(
                read_from(addr, "v", p, 2).await.unwrap(),
                expected(p, &[0, 1 << 16]),
                "{url}: partition {p} after the rerun"
            );
        }
        // A restarted worker cannot trust a partly evicted file and does not offer it:
        // the coordinator has the other worker adopt the partition from the store, and
        // nothing is recomputed.
        let addr = placement.worker_of(0).unwrap().addr.clone();
        let again = restart_in_place(&c, &addr).await;
        eventually("partition 0 is served again", || async {
            let s = c.status("v").await;
            match s.placement.worker_of(0) {
                Some(w) if s.placement.workers.iter().all(|w| w.alive) => {
                    read_from(&w.addr, "v", 0, 2).await.ok() == Some(expected(0, &[0, 1 << 16]))
                }
                _ => false,
            }
        })
        .await;
        assert_eq!(
            attempts(&c.status("v").await.map_attempts),
            vec![Some(0), Some(1 << 16)],
            "{url}"
        );
        // Deleting the app frees what is left on disk, evicted bytes counted once.
        c.coord.unregister_app("v").await.unwrap();
        let other = c
            .nodes
            .iter()
            .find(|n| n.worker.addr.to_string() != addr)
            .unwrap();
        eventually("no bytes are left on disk", || async {
            [&again.worker, &other.worker]
                .iter()
                .all(|w| w.store.stored_bytes() == 0)
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_to_the_object_store_fails_clearly_on_a_worker_without_one() {
    let c = Cluster::start_with(1, 1, Durability::ObjectStore).await;
    c.coord.register_app("n", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("n", 0, 1, 1).await.unwrap();
    let err = run_map(&c, &placement, "n", 0, 0, 1).await.unwrap_err();
    assert!(err.to_string().contains("--object-store"), "{err}");
    assert_eq!(attempts(&c.status("n").await.map_attempts), vec![None]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_refuses_to_start_with_an_unusable_object_store() {
    let dir = tempfile::tempdir().unwrap();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let cfg = |url: &str| WorkerConfig {
        listen: "127.0.0.1:0".into(),
        advertise: None,
        host: String::new(),
        zone: String::new(),
        coordinator: "127.0.0.1:1".into(),
        memory: 64 << 20,
        data_dir: dir.path().join("w"),
        extra_data_dirs: Vec::new(),
        object_store: Some(url.into()),
        disk_quota: None,
        limits: Default::default(),
        secret: Some(common::secret()),
        tls: None,
        tenancy: Default::default(),
        split_bytes: crossdock_server::worker::config::DEFAULT_SPLIT_BYTES,
        memory_only: false,
        zero_copy_fetch: true,
    };
    let err = Worker::start(cfg("hdfs://nn/x"), shutdown.clone())
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("not an object-store URL"), "{err}");
    // Nothing listens on port 1: the probe fails at start, not at the first commit.
    let err = Worker::start(cfg("s3://bucket?endpoint=http://127.0.0.1:1"), shutdown)
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("is not usable"), "{err}");
}

/// One worker with durability `disk` over a directory store, app "w"'s partition 0
/// uploaded and evicted from its disk after map 0 committed, and the upload of whatever is
/// written to it next held back by a directory standing where its segment goes (remove
/// `blocker` to let it through).
struct HeldUpload {
    c: Cluster,
    placement: crossdock_client::Placement,
    part: std::sync::Arc<crossdock_server::worker::storage::partition::Partition>,
    blocker: std::path::PathBuf,
}

async fn held_upload(scratch: &tempfile::TempDir) -> HeldUpload {
    let store = scratch.path().join("store");
    let url = format!("file://{}", store.display());
    let c = Cluster::start_tiered(1, 1, Durability::Disk, tiered(&url, Some(1))).await;
    c.coord.register_app("w", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("w", 0, 1, 1).await.unwrap();
    run_map(&c, &placement, "w", 0, 0, 1).await.unwrap();
    let worker = c.nodes[0].worker.clone();
    eventually("the partition file is evicted", || async {
        worker.store.stored_bytes() == 0
    })
    .await;
    let (_, part) = worker.store.partition("w", 0, 0).unwrap();
    let next = part.lock().file_written;
    let blocker = store.join(format!("w/0/0/{:016x}-{next:016x}.seg", worker.incarnation));
    std::fs::create_dir_all(&blocker).unwrap();
    HeldUpload {
        c,
        placement,
        part,
        blocker,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_commit_into_an_evicted_partition_waits_until_it_is_uploaded() {
    // A restarted worker drops a partly evicted file, so a disk commit into it is only
    // durable once uploaded. The upload is held back by a directory standing where the
    // next segment goes; the commit must wait for it.
    let scratch = tempfile::tempdir().unwrap();
    let HeldUpload {
        c,
        placement,
        part,
        blocker,
    } = held_upload(&scratch).await;
    let rerun = {
        let placement = placement.clone();
        let c = &c;
        async move { run_map(c, &placement, "w", 0, 1 << 16, 1).await }
    };
    tokio::pin!(rerun);
    assert!(
        tokio::time::timeout(Duration::from_millis(1500), &mut rerun)
            .await
            .is_err(),
        "the commit waited for the upload"
    );
    std::fs::remove_dir(&blocker).unwrap();
    assert_eq!(rerun.await.unwrap().0, CommitStatus::Committed);
    let st = part.lock();
    assert_eq!(
        st.uploaded_to, st.file_written,
        "the rerun's batches are uploaded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_waiting_for_its_upload_holds_back_no_other_call_to_its_worker() {
    // One worker, so every call of the coordinator's goes over its one connection to it.
    // A disk commit into an evicted partition waits for its upload, held back as in the
    // test above; meanwhile another app registers a shuffle on the same worker, pushes,
    // commits (durable on disk) and reads. Answered in request order, all of that would
    // wait behind the held commit until the coordinator's call timeout.
    let scratch = tempfile::tempdir().unwrap();
    let HeldUpload {
        c,
        placement,
        part: _,
        blocker,
    } = held_upload(&scratch).await;
    let held = {
        let placement = placement.clone();
        let c = &c;
        async move { run_map(c, &placement, "w", 0, 1 << 16, 1).await }
    };
    tokio::pin!(held);
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut held)
            .await
            .is_err(),
        "the commit waits for its upload"
    );
    let other = async {
        c.coord.register_app("v", 60_000).await.unwrap();
        let placement = c.coord.register_shuffle("v", 0, 1, 1).await.unwrap();
        let committed = run_map(&c, &placement, "v", 0, 0, 1).await.unwrap().0;
        let addr = placement.worker_of(0).unwrap().addr.clone();
        (committed, read_from(&addr, "v", 0, 1).await.unwrap())
    };
    // Far below the coordinator's 30 s call timeout; the held commit is still waiting.
    let (committed, read) = tokio::time::timeout(Duration::from_secs(10), other)
        .await
        .expect("the other app's calls were answered while the commit waited");
    assert_eq!(committed, CommitStatus::Committed);
    assert_eq!(read, expected(0, &[0]));
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut held)
            .await
            .is_err(),
        "the held commit still waits"
    );
    std::fs::remove_dir(&blocker).unwrap();
    assert_eq!(held.await.unwrap().0, CommitStatus::Committed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_object_store_a_full_disk_is_relieved_by_eviction() {
    // Four pages: shuffle.meta takes one, a partition file a page per 4 KiB (an evicted
    // file's tail is written again from where the eviction left it: sparse, but the page
    // under its first byte is taken anew).
    let disk = SmallDisk::mount("16k");
    let scratch = tempfile::tempdir().unwrap();
    let url = format!("file://{}", scratch.path().join("store").display());
    let c = Cluster::start_tiered(0, 1, Durability::ObjectStore, None).await;
    let tier = tiered(&url, None);
    let w = start_worker_on(
        &c.coord_addr,
        "127.0.0.1:0",
        vec![disk.dir.path().join("w")],
        tier.as_ref(),
    )
    .await;
    let addr = w.worker.addr.to_string();
    eventually("the worker registered", || async {
        c.coord.register_app("x", 60_000).await.is_ok()
            && c.coord.register_shuffle("x", 0, 6, 1).await.is_ok()
    })
    .await;
    // Six maps of 3 KiB each do not fit: the disk fills, uploaded files are evicted, and
    // every commit goes through.
    for m in 0..6u32 {
        let data = payload(m, 0, 0, 3 << 10);
        push_to(&addr, "x", 0, m, 0, &data).await.unwrap();
        let stats = vec![stat(0, data.len())];
        let r = tokio::time::timeout(
            Duration::from_secs(20),
            c.coord.commit_map("x", 0, m, AttemptId(0), stats),
        )
        .await;
        assert!(
            matches!(r, Ok(Ok((CommitStatus::Committed, AttemptId(0))))),
            "map {m}: {r:?}"
        );
    }
    let got = read_from(&addr, "x", 0, 6).await.unwrap();
    assert_eq!(got.len(), 6);
    for (m, (map, bytes)) in got.iter().enumerate() {
        assert_eq!(
            (*map, &bytes[..]),
            (m as u32, &payload(m as u32, 0, 0, 3 << 10)[..])
        );
    }
    assert!(
        w.worker
            .store
            .metrics()
            .evicted_bytes
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
    drop(w);
}
