//! Many apps on one worker: per-app quotas on stored bytes and on memory, against real
//! pushes, commits and reads on loopback.

mod common;

use std::sync::Arc;

use common::nodes::{expected, push_to, read_from, run_map, Cluster};
use common::{eventually, payload};
use crossdock_proto::ErrorCode;
use crossdock_server::metrics::Render;
use crossdock_server::worker::config::Tenancy;

/// Runs 4 maps of an app with 2 partitions and checks that both read back exactly.
async fn well_behaved_app(c: &Cluster, app: &str) {
    c.coord.register_app(app, 60_000).await.unwrap();
    let placement = c.coord.register_shuffle(app, 0, 4, 2).await.unwrap();
    for map in 0..4 {
        run_map(c, &placement, app, map, 0, 2).await.unwrap();
    }
    for p in 0..2 {
        let addr = &placement.worker_of(p).unwrap().addr;
        assert_eq!(
            read_from(addr, app, p, 4).await.unwrap(),
            expected(p, &[0, 0, 0, 0]),
            "partition {p} of {app}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_app_is_refused_at_its_stored_quota_and_the_others_finish_exactly() {
    let quota = 1u64 << 20;
    let c = Cluster::start_shared(
        64 << 20,
        Tenancy {
            app_stored_quota: Some(quota),
            ..Tenancy::default()
        },
    )
    .await;
    c.coord.register_app("flood", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("flood", 0, 100, 1).await.unwrap();
    let addr = placement.worker_of(0).unwrap().addr.clone();
    // It pushes 100 KiB per map and never commits.
    let batch = payload(0, 0, 0, 100 << 10);
    let mut stored = 0u64;
    let mut refused = None;
    for map in 0..100 {
        match push_to(&addr, "flood", 0, map, 0, &batch).await {
            Ok(()) => stored += batch.len() as u64,
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let err = refused.expect("the quota refuses a push");
    assert_eq!(err.code(), Some(ErrorCode::LimitExceeded), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("app 'flood'") && text.contains("quota of 1048576 bytes"),
        "{text}"
    );
    // Ten batches fit in 1 MiB, the eleventh does not.
    assert_eq!(stored, 10 * (100 << 10));
    // Retrying does not get it further.
    let again = push_to(&addr, "flood", 0, 99, 0, &batch).await.unwrap_err();
    assert_eq!(again.code(), Some(ErrorCode::LimitExceeded));
    // The others are not touched by the flood's quota.
    well_behaved_app(&c, "good").await;
    // The refusals are counted by kind.
    let mut page = String::new();
    c.nodes[0].worker.render(&mut page);
    assert!(
        page.lines().any(
            |l| l.starts_with("crossdock_worker_errors_total{") && l.contains("limit_exceeded")
        ),
        "{page}"
    );
    // Deleting its shuffle gives the flood its quota back.
    c.coord.unregister_shuffle("flood", 0).await.unwrap();
    let placement = c.coord.register_shuffle("flood", 1, 1, 1).await.unwrap();
    let addr = placement.worker_of(0).unwrap().addr.clone();
    eventually("the deleted shuffle's bytes leave the quota", || async {
        let w = crossdock_client::WorkerClient::connect(&addr, &common::app_keys("flood"))
            .await
            .unwrap();
        let mut h = common::header("flood", 0, 0, 0, 0, &batch);
        h.shuffle_id = 1;
        let p = w.push(&h, &batch).await.unwrap();
        w.finish_push(p).await.is_ok()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_holds_no_more_than_its_memory_share_and_waits_instead_of_failing() {
    // 16 MiB: 12 MiB of push credit, half of it for one app.
    let c = Cluster::start_shared(
        16 << 20,
        Tenancy {
            app_memory_share: 0.5,
            ..Tenancy::default()
        },
    )
    .await;
    let worker = c.nodes[0].worker.clone();
    let limit = worker.store.budget.app_limit();
    assert_eq!(limit, 6 << 20);
    c.coord.register_app("flood", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("flood", 0, 64, 4).await.unwrap();
    let addr = Arc::new(placement.worker_of(0).unwrap().addr.clone());
    // Eight pushers, 32 MiB in all, none committed: far beyond its share.
    let mut pushers = Vec::new();
    for t in 0..8u32 {
        let addr = addr.clone();
        pushers.push(tokio::spawn(async move {
            for i in 0..8u32 {
                let map = t * 8 + i;
                let data = payload(map, map % 4, 0, 512 << 10);
                push_to(&addr, "flood", map % 4, map, 0, &data).await?;
            }
            Ok::<(), crossdock_client::ClientError>(())
        }));
    }
    // Meanwhile another app runs to the end with exact results.
    well_behaved_app(&c, "good").await;
    for p in pushers {
        p.await
            .unwrap()
            .expect("a push over the share waits; it does not fail");
    }
    let peak = worker.store.budget.peak_held("flood");
    assert!(peak <= limit, "held {peak} over its share {limit}");
    assert!(
        peak > limit / 2,
        "the flood never came near its share: {peak}"
    );
    let mut page = String::new();
    worker.render(&mut page);
    assert!(page.contains("crossdock_worker_quota_waiters{"), "{page}");
    assert!(
        page.contains("crossdock_worker_congestion_delay_seconds{"),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_may_ask_for_stricter_limits_but_never_looser_ones() {
    let c = Cluster::start_shared(
        16 << 20,
        Tenancy {
            app_stored_quota: Some(1 << 20),
            ..Tenancy::default()
        },
    )
    .await;
    let worker = c.nodes[0].worker.clone();
    let batch = payload(0, 0, 0, 100 << 10);
    // Pushes 100 KiB batches of `app` until one is refused; returns the bytes stored.
    let fill = |app: &'static str, addr: String| {
        let batch = batch.clone();
        async move {
            let mut stored = 0u64;
            for map in 0..100 {
                match push_to(&addr, app, 0, map, 0, &batch).await {
                    Ok(()) => stored += batch.len() as u64,
                    Err(e) => {
                        assert_eq!(e.code(), Some(ErrorCode::LimitExceeded), "{e}");
                        return (stored, e.to_string());
                    }
                }
            }
            panic!("{app} was never refused");
        }
    };
    // Asks for 300 KiB and a quarter of the memory: both are stricter than the worker's.
    c.coord
        .register_app_limited("modest", 60_000, 300 << 10, 250_000)
        .await
        .unwrap();
    let p = c.coord.register_shuffle("modest", 0, 100, 1).await.unwrap();
    let (stored, msg) = fill("modest", p.worker_of(0).unwrap().addr.clone()).await;
    assert_eq!(stored, 3 * (100 << 10));
    assert!(msg.contains("quota of 307200 bytes"), "{msg}");
    let push_budget = worker.store.budget.total();
    assert_eq!(worker.store.budget.limit_of("modest"), push_budget / 4);
    // Asks for 4 MiB and all the memory: the worker's 1 MiB and its own share hold.
    c.coord
        .register_app_limited("greedy", 60_000, 4 << 20, 1_000_000)
        .await
        .unwrap();
    let p = c.coord.register_shuffle("greedy", 0, 100, 1).await.unwrap();
    let (stored, msg) = fill("greedy", p.worker_of(0).unwrap().addr.clone()).await;
    assert_eq!(stored, 10 * (100 << 10));
    assert!(msg.contains("quota of 1048576 bytes"), "{msg}");
    assert_eq!(worker.store.budget.limit_of("greedy"), push_budget);
    // A share above the whole is refused at registration.
    let err = c
        .coord
        .register_app_limited("confused", 60_000, 0, 1_000_001)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::InvalidArgument), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_waiting_on_its_share_is_flushed_at_once_not_after_the_idle_flush() {
    // 12 MiB of push credit, a quarter for one app: 3 MiB. Holding one 2 MiB batch (under
    // 90% of the share), the next 2 MiB waits; only a flush of its own data lets it in.
    let c = Cluster::start_shared(
        16 << 20,
        Tenancy {
            app_memory_share: 0.25,
            ..Tenancy::default()
        },
    )
    .await;
    c.coord.register_app("chunky", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("chunky", 0, 8, 1).await.unwrap();
    let addr = placement.worker_of(0).unwrap().addr.clone();
    let pushes = async {
        for map in 0..8 {
            let data = payload(map, 0, 0, 2 << 20);
            push_to(&addr, "chunky", 0, map, 0, &data).await.unwrap();
        }
    };
    // Each wait is one flush (milliseconds); the idle flush would take 30 s per push.
    tokio::time::timeout(std::time::Duration::from_secs(20), pushes)
        .await
        .expect("pushes waiting on the share were left to the 30 s idle flush");
    let worker = &c.nodes[0].worker;
    assert!(worker.store.budget.peak_held("chunky") <= worker.store.budget.app_limit());
}
