//! Committed data a worker loses without losing itself: a partition file deleted or cut
//! short under a running worker. The fetch that finds it missing is answered
//! `data_lost`, never a bare I/O error, and the worker reports its copy first, so the
//! coordinator has already handled it as a lost copy when the reader asks again: the
//! replica takes over, the object store restores it, or the maps that wrote into it are
//! revoked and their reruns accepted. Real coordinator and workers on loopback.

mod common;

use std::path::PathBuf;

use crossdock_proto::{CommitStatus, Durability, ErrorCode};
use crossdock_server::worker::storage::layout;

use common::nodes::{expected, read_from, run_map, tiered, Cluster};
use common::{attempts, object_stores};

/// The data file of partition `p` of app `app`'s shuffle 0 on the worker at `addr`.
fn data_file(c: &Cluster, addr: &str, app: &str, p: u32) -> PathBuf {
    let store = &c.node(addr).worker.store;
    layout::partition_file(&store.shuffle_dir(app, 0), p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_partition_file_is_reported_and_the_replica_serves_it() {
    let c = Cluster::start_with(2, 2, Durability::Disk).await;
    c.coord.register_app("d", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("d", 0, 2, 2).await.unwrap();
    for m in 0..2 {
        run_map(&c, &placement, "d", m, 0, 2).await.unwrap();
    }
    let primary = placement.worker_of(0).unwrap().addr.clone();
    let replica = placement.replica_of(0).unwrap().addr.clone();
    // Durability disk: the commit was answered once the file held the batches.
    std::fs::remove_file(data_file(&c, &primary, "d", 0)).unwrap();

    let err = read_from(&primary, "d", 0, 2).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::DataLost), "{err}");
    assert!(err.to_string().contains("0.data"), "names the file: {err}");
    // Reported before the answer: the replica is the primary now, nothing to recompute.
    let status = c.status("d").await;
    assert_eq!(status.placement.worker_of(0).unwrap().addr, replica);
    assert_eq!(attempts(&status.map_attempts), vec![Some(0), Some(0)]);
    assert_eq!(
        read_from(&replica, "d", 0, 2).await.unwrap(),
        expected(0, &[0, 0])
    );
    // The worker's other partitions are untouched.
    let other = status.placement.worker_of(1).unwrap().addr.clone();
    assert_eq!(
        read_from(&other, "d", 1, 2).await.unwrap(),
        expected(1, &[0, 0])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_only_copy_revokes_its_maps_and_their_reruns_are_read_exactly() {
    let c = Cluster::start_with(2, 1, Durability::Disk).await;
    c.coord.register_app("t", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("t", 0, 3, 2).await.unwrap();
    for m in 0..3 {
        run_map(&c, &placement, "t", m, 0, 2).await.unwrap();
    }
    let holder = placement.worker_of(0).unwrap().addr.clone();
    let file = data_file(&c, &holder, "t", 0);
    let len = std::fs::metadata(&file).unwrap().len();
    // Cut inside the last map's record: the first two maps' records are still whole.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len - 100)
        .unwrap();

    let err = read_from(&holder, "t", 0, 3).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::DataLost), "{err}");
    // Every map that wrote into the partition is revoked, so the engine reruns them;
    // no reader is served from the damaged copy.
    let status = c.status("t").await;
    assert_eq!(attempts(&status.map_attempts), vec![None, None, None]);
    let moved = status.placement.worker_of(0).unwrap().addr.clone();
    assert_eq!(
        read_from(&moved, "t", 0, 3).await.unwrap_err().code(),
        Some(ErrorCode::ShuffleNotComplete)
    );
    // The engine's rerun (a later stage attempt) commits and is read back exactly.
    let rerun = 1 << 16;
    for m in 0..3 {
        assert_eq!(
            run_map(&c, &status.placement, "t", m, rerun, 2)
                .await
                .unwrap(),
            (CommitStatus::Committed, rerun)
        );
    }
    let status = c.status("t").await;
    for p in 0..2 {
        let addr = &status.placement.worker_of(p).unwrap().addr;
        assert_eq!(
            read_from(addr, "t", p, 3).await.unwrap(),
            expected(p, &[rerun, rerun, rerun]),
            "partition {p}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_durability_object_store_a_deleted_file_is_restored_from_the_store() {
    let scratch = tempfile::tempdir().unwrap();
    for url in object_stores(scratch.path()) {
        let c = Cluster::start_tiered(2, 1, Durability::ObjectStore, tiered(&url, None)).await;
        c.coord.register_app("s", 60_000).await.unwrap();
        let placement = c.coord.register_shuffle("s", 0, 2, 2).await.unwrap();
        for m in 0..2 {
            run_map(&c, &placement, "s", m, 0, 2).await.unwrap();
        }
        let holder = placement.worker_of(0).unwrap().addr.clone();
        std::fs::remove_file(data_file(&c, &holder, "s", 0)).unwrap();

        let err = read_from(&holder, "s", 0, 2).await.unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::DataLost), "{url}: {err}");
        let status = c.status("s").await;
        assert_eq!(
            attempts(&status.map_attempts),
            vec![Some(0), Some(0)],
            "{url}: adopted whole from the object store; no map is rerun"
        );
        let moved = status.placement.worker_of(0).unwrap().addr.clone();
        assert_ne!(moved, holder, "{url}");
        assert_eq!(
            read_from(&moved, "s", 0, 2).await.unwrap(),
            expected(0, &[0, 0]),
            "{url}"
        );
    }
}
