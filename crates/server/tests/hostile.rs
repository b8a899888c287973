//! What a hostile or careless client can do, done against real workers: each attack is
//! refused or harmless, and the other apps' data stays whole on disk and in the object
//! store.

mod common;

use crossdock_client::ClientError;
use crossdock_proto::{Durability, ErrorCode};
use crossdock_server::worker::storage::layout;
use crossdock_server::worker::storage::object::ObjectTier;

use common::nodes::{expected, read_from, restart_in_place, run_map, tiered, Cluster};
use common::{attempts, eventually, object_stores};

/// Registers `app` with one shuffle of 2 maps x 2 partitions, runs both maps and checks
/// they read back.
async fn write_app(c: &Cluster, app: &str) -> crossdock_client::Placement {
    c.coord.register_app(app, 60_000).await.unwrap();
    let placement = c.coord.register_shuffle(app, 0, 2, 2).await.unwrap();
    for m in 0..2 {
        run_map(c, &placement, app, m, 0, 2).await.unwrap();
    }
    assert_reads(c, &placement, app).await;
    placement
}

async fn assert_reads(c: &Cluster, placement: &crossdock_client::Placement, app: &str) {
    for p in 0..2 {
        let addr = &placement.worker_of(p).unwrap().addr;
        assert_eq!(
            read_from(addr, app, p, 2).await.unwrap(),
            expected(p, &[0, 0]),
            "app {app:?} partition {p}"
        );
    }
    assert_eq!(
        attempts(&c.status(app).await.map_attempts),
        vec![Some(0), Some(0)],
        "app {app:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dots_slashes_and_lookalike_ids_cannot_reach_other_apps_data() {
    let scratch = tempfile::tempdir().unwrap();
    for url in object_stores(scratch.path()) {
        let c = Cluster::start_tiered(2, 1, Durability::ObjectStore, tiered(&url, None)).await;
        let object = ObjectTier::open(&url).unwrap();
        let victims = ["x_y", "victim", "x%2Fy"];
        let mut placements = Vec::new();
        for v in victims {
            placements.push(write_app(&c, v).await);
        }
        // Each hostile id is a legal app of its own: it writes, and is unregistered.
        for hostile in [".", "..", "/", "x/y", "../victim", "victim/..", "x%y", "*"] {
            write_app(&c, hostile).await;
            c.coord.unregister_app(hostile).await.unwrap();
        }
        for (v, placement) in victims.iter().zip(&placements) {
            assert_reads(&c, placement, v).await;
            for n in &c.nodes {
                let dir = n.worker.store.shuffle_dir(v, 0);
                let holds =
                    (0..2).any(|p| placement.worker_of(p).unwrap().addr == n.worker.advertised);
                assert_eq!(dir.exists(), holds, "{url}: {}", dir.display());
            }
            for p in 0..2 {
                let segments = object.segments(v, 0, p).await.unwrap();
                assert!(
                    !segments.is_empty(),
                    "{url}: {v:?} partition {p} kept its segments"
                );
            }
        }
        // The hostile apps' own data is gone, and only it.
        eventually("the hostile apps' segments are deleted", || async {
            let mut gone = true;
            for hostile in ["..", "x/y"] {
                gone &= object.segments(hostile, 0, 0).await.unwrap().is_empty();
            }
            gone
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_and_overlong_ids_are_refused_at_registration() {
    let c = Cluster::start(1, 1).await;
    let refused = |r: Result<bytes::Bytes, ClientError>, what: &str| {
        let e = r.unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::InvalidArgument), "{e}");
        assert!(e.to_string().contains(what), "{e}");
    };
    refused(c.coord.register_app("", 60_000).await, "must not be empty");
    refused(
        c.coord.register_app(&"a".repeat(256), 60_000).await,
        "too long",
    );
    refused(
        c.coord.register_app(&"é".repeat(50), 60_000).await,
        "too long",
    );
    c.coord
        .register_app(&"a".repeat(255), 60_000)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_ascii_and_control_characters_round_trip_through_a_restart() {
    let c = Cluster::start_with(1, 1, Durability::Disk).await;
    let app = "アプリ\nline two/..";
    let placement = write_app(&c, app).await;
    let addr = placement.worker_of(0).unwrap().addr.clone();
    let dir = c.nodes[0].worker.store.shuffle_dir(app, 0);
    assert!(dir.exists(), "{}", dir.display());
    assert_eq!(
        dir.parent().unwrap().parent().unwrap(),
        c.nodes[0].worker.store.root(),
        "one directory level per app, inside the data directory"
    );
    assert!(layout::is_app_dir(
        c.nodes[0].worker.store.root(),
        dir.parent().unwrap()
    ));
    // A restarted worker finds the app again from its files.
    let _again = restart_in_place(&c, &addr).await;
    eventually("the restarted worker serves the app again", || async {
        read_from(&addr, app, 0, 2).await.ok() == Some(expected(0, &[0, 0]))
    })
    .await;
    assert_reads(&c, &placement, app).await;
}
