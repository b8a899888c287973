//! Where partitions go, on a real coordinator and workers on loopback: the coordinator
//! predicts each shuffle's partition sizes from its first maps and scores the prediction;
//! workers' host and zone labels reach the clients and put replicas across zones; and
//! re-placement once sizes are predicted (SCache's placement on predicted sizes, issue
//! 13): the coordinator continues a hot host's partitions on another host, the pushers
//! follow the workers' redirects, and every byte reads back once. A join's two sides
//! (shuffles sharing a layout) move together: their sizes are summed and partition `p` of
//! both continues on the same worker.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use crossdock_client::{CoordinatorClient, Keyring, ShuffleStatus};
use crossdock_proto::{AttemptId, CommitStatus, Durability, InputSample, SampleCount};
use crossdock_server::coordinator::{Coordinator, CoordinatorConfig};
use crossdock_server::worker::{Worker, WorkerConfig};

use common::embedded::{push, Cluster as Embedded};
use common::nodes::{Cluster, WorkerOpts};
use common::{payload, push_routed_in, read_batches, reader_in, stat};

const BATCH: usize = 64 << 10;
const MAPS: u32 = 20;
const PARTITIONS: u32 = 9;
const HOSTS: &[&str] = &["h0", "h1", "h2"];

/// What one map pushed: payload bytes per slot, and every batch as (slot, seq, bytes).
#[derive(Default)]
struct Pushed {
    per_slot: BTreeMap<u32, u64>,
    batches: Vec<(u32, u32, Vec<u8>)>,
}

async fn commit(c: &Cluster, shuffle: u32, map: u32, pushed: &Pushed) -> CommitStatus {
    c.commit_slots("r", shuffle, map, &pushed.per_slot).await
}

/// Every batch of partition `p` of `shuffle` that a reader of all maps gets from all its
/// slots, as (map, seq, payload), sorted.
async fn read_all(status: &ShuffleStatus, shuffle: u32, p: u32) -> Vec<(u32, u32, Bytes)> {
    let mut out = Vec::new();
    for slot in status.slots_of(p) {
        let addr = &status.placement.worker_of(slot).unwrap().addr;
        let r = reader_in(shuffle, addr, "r", slot, 0, MAPS).with_max_resumes(0);
        out.extend(read_batches(r).await.unwrap());
    }
    out.sort();
    out
}

/// Registers `sides` shuffles of MAPS maps and PARTITIONS partitions at once (the later
/// ones take the first's layout, as a join's sides do) on three hosts of one worker each,
/// the workers' own splits off so that only the coordinator's re-placement splits. Every
/// map of every side gives the first worker's block three times the others' bytes (that
/// host would read 9 of 15 units). Maps 0 and 1 make each side's prediction (10% of 20
/// maps); the last side's completes the set and the layout is decided. With 2 of 20 maps
/// committed (units per host 18 / 6 / 6 staying, 162 / 54 / 54 to come), MinHeap from
/// there reaches 108 (the bound 118): two hot partitions go, one to each cold host. Checks
/// the moves, that each side's moved partitions continued on one worker, and that every
/// partition reads back once.
async fn hot_block_re_placed(sides: u32) {
    let opts = WorkerOpts {
        split_bytes: 0,
        memory_only: false,
        hosts: HOSTS,
    };
    let tenancy = crossdock_server::worker::config::Tenancy::default();
    let c = Cluster::start_full(3, 1, Durability::Memory, None, 64 << 20, tenancy, opts).await;
    c.coord.register_app("r", 60_000).await.unwrap();
    let mut placements = Vec::new();
    for s in 0..sides {
        placements.push(
            c.coord
                .register_shuffle("r", s, MAPS, PARTITIONS)
                .await
                .unwrap(),
        );
    }
    let first = &placements[0];
    let hot = first.worker_of(0).unwrap().clone();
    let heavy: Vec<u32> = (0..PARTITIONS)
        .filter(|&p| first.worker_of(p).unwrap().addr == hot.addr)
        .collect();
    assert_eq!(heavy.len(), 3, "blocks of three");
    for (s, placement) in placements.iter().enumerate() {
        for p in 0..PARTITIONS {
            assert_eq!(
                placement.worker_of(p).unwrap().addr,
                first.worker_of(p).unwrap().addr,
                "side {s} shares the layout"
            );
        }
    }
    let batches = |p: u32| if heavy.contains(&p) { 3 } else { 1 };

    // Where each side's partition's pushes go, learned from redirects as the engine
    // clients do: a map's stream of a partition stays in the slot its first batch went to,
    // and the maps after it start in the slot a redirect named.
    let mut route: Vec<BTreeMap<u32, (u32, String)>> = placements
        .iter()
        .map(|pl| {
            (0..PARTITIONS)
                .map(|p| (p, (p, pl.worker_of(p).unwrap().addr.clone())))
                .collect()
        })
        .collect();
    // pushed[side][map][partition]
    let mut pushed: Vec<Vec<Vec<Pushed>>> = (0..sides).map(|_| Vec::new()).collect();
    let mut redirected_after_prediction = vec![false; sides as usize];
    let moved = || {
        c.coordinator
            .metrics
            .rebalanced_partitions
            .load(Ordering::Relaxed)
    };
    for map in 0..MAPS {
        for s in 0..sides {
            let side = s as usize;
            let mut per_partition = Vec::new();
            for p in 0..PARTITIONS {
                let mut out = Pushed::default();
                let (slot, addr) = route[side][&p].clone();
                for seq in 0..batches(p) {
                    let data = payload(map, p, seq + 100 * s, BATCH);
                    let redirect = push_routed_in(s, &addr, "r", slot, (map, 0, seq), &data)
                        .await
                        .unwrap();
                    *out.per_slot.entry(slot).or_default() += data.len() as u64;
                    out.batches.push((slot, seq, data));
                    if let Some(r) = redirect {
                        redirected_after_prediction[side] |= map > 1;
                        route[side].insert(p, (r.slot, r.addr));
                    }
                }
                per_partition.push(out);
            }
            let mut all = Pushed::default();
            for out in &per_partition {
                all.per_slot.extend(out.per_slot.iter());
            }
            assert_eq!(commit(&c, s, map, &all).await, CommitStatus::Committed);
            pushed[side].push(per_partition);
        }
        if map == 1 {
            // The re-placement runs in the background after the predicting commit; a move
            // is counted once the old slots' workers were told.
            common::eventually("two moves are counted", || async { moved() >= 2 }).await;
            assert_eq!(moved(), 2, "the hot host's partitions were not re-placed");
        }
    }
    assert!(
        redirected_after_prediction.iter().all(|&r| r),
        "a side's pushes did not follow the re-placement: {redirected_after_prediction:?}"
    );

    // moved_to[i]: where each side continued the i-th moved partition.
    let mut moved_to: Vec<Vec<String>> = vec![Vec::new(); 2];
    for s in 0..sides {
        let status = c.coord.shuffle_status("r", s).await.unwrap();
        for (i, &p) in heavy[..2].iter().enumerate() {
            let slots = status.slots_of(p);
            assert_eq!(slots.len(), 2, "side {s} partition {p}: {slots:?}");
            let to = status.placement.worker_of(slots[1]).unwrap().clone();
            assert_ne!(to.host, hot.host, "continued on another host");
            moved_to[i].push(to.host);
            // Most of the partition's bytes are on the new host: maps 0 and 1 (before the
            // move) and map 2 (whose first batch learnt of it) stayed, maps 3 to 19 went
            // there.
            let (old, new) = (
                status.partition_bytes[slots[0] as usize],
                status.partition_bytes[slots[1] as usize],
            );
            assert_eq!(
                (old, new),
                (9 * BATCH as u64, 51 * BATCH as u64),
                "side {s}"
            );
        }
        assert_eq!(
            status.slots_of(heavy[2]).len(),
            1,
            "the third hot partition stays"
        );
        // Every partition reads back exactly once.
        for p in 0..PARTITIONS {
            let mut want: Vec<(u32, u32, Bytes)> = pushed[s as usize]
                .iter()
                .enumerate()
                .flat_map(|(m, of_map)| {
                    of_map[p as usize]
                        .batches
                        .iter()
                        .map(move |(_, seq, b)| (m as u32, *seq, Bytes::from(b.clone())))
                })
                .collect();
            want.sort();
            assert_eq!(
                read_all(&status, s, p).await,
                want,
                "side {s} partition {p}"
            );
        }
    }
    assert_ne!(moved_to[0][0], moved_to[1][0], "one to each cold host");
    for to in &mut moved_to {
        to.dedup();
        assert_eq!(to.len(), 1, "the sides parted: {to:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_sizes_are_predicted_a_hot_hosts_partition_continues_on_another_host() {
    hot_block_re_placed(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joins_two_sides_are_re_placed_together_once_both_are_predicted() {
    hot_block_re_placed(2).await;
}

/// The value of the sample `name` (a full series name, with its labels) on a metrics page.
fn sample(page: &str, name: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {name} in\n{page}"))
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_shuffle_registered_with_a_sample_is_predicted_from_it() {
    let c = Embedded::start(2, 64 << 20).await;
    let app = "app-sampled";
    c.coord.register_app(app, 60_000).await.unwrap();
    // A sample that names a partition the shuffle does not have is refused, and nothing
    // is registered.
    let bad = c
        .coord
        .register_sampled_shuffle(
            app,
            0,
            10,
            4,
            Some((
                vec![InputSample {
                    records: 10,
                    sampled: 2,
                }],
                vec![SampleCount {
                    input: 0,
                    partition: 4,
                    count: 1,
                }],
            )),
        )
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("invalid input sample"), "{bad}");
    let unknown = c.coord.shuffle_status(app, 0).await.unwrap_err();
    assert!(unknown.to_string().contains("not registered"), "{unknown}");
    // Input ordered by key: map m writes only partition m * 4 / 10. The sample (one
    // input per map, 4 records each, all kept) says the shuffle divides 3:2:3:2.
    let part_of = |m: u32| m * 4 / 10;
    let inputs = vec![
        InputSample {
            records: 4,
            sampled: 4
        };
        10
    ];
    let counts = (0..10)
        .map(|m| SampleCount {
            input: m,
            partition: part_of(m),
            count: 4,
        })
        .collect();
    let placement = c
        .coord
        .register_sampled_shuffle(app, 0, 10, 4, Some((inputs, counts)))
        .await
        .unwrap();
    let sampled = sample(
        &c.coordinator_metrics().await,
        "crossdock_coordinator_sampled_shuffles_total",
    );
    assert_eq!(sampled, 1.0, "the refused sample is not counted");
    for map in 0..10 {
        let p = part_of(map);
        let d = payload(map, p, 0, 400);
        push(&placement, app, p, map, 0, 0, &d).await.unwrap();
        let mut st = stat(p, d.len());
        st.records = 4;
        c.coord
            .commit_map(app, 0, map, AttemptId(0), vec![st])
            .await
            .unwrap();
        if map == 0 {
            // From map 0 alone, extrapolation would put the whole shuffle in partition 0.
            let predicted = c.sa.coordinator.lock().predicted_sizes(app, 0).unwrap();
            let b = d.len() as u64;
            assert_eq!(&*predicted, &[3 * b, 2 * b, 3 * b, 2 * b], "by the sample");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_coordinator_predicts_partition_sizes_and_scores_the_prediction() {
    let c = Embedded::start(2, 64 << 20).await;
    let app = "app-predict";
    // 10 maps at the default threshold (10%): the first commit predicts. Map 0 writes
    // 100 bytes to each partition, maps 1-9 write 50, 100, 150 and 200: the prediction
    // (1000 everywhere) misses the shape of the final sizes.
    let placement = c.shuffle(app, 10, 4).await;
    let written = |map: u32, p: u32| if map == 0 { 100 } else { 50 * (p as usize + 1) };
    for map in 0..10 {
        let mut stats = Vec::new();
        for p in 0..4 {
            let d = payload(map, p, 0, written(map, p));
            push(&placement, app, p, map, 0, 0, &d).await.unwrap();
            stats.push(stat(p, d.len()));
        }
        c.coord
            .commit_map(app, 0, map, AttemptId(0), stats)
            .await
            .unwrap();
        if map == 0 {
            let predicted = c.sa.coordinator.lock().predicted_sizes(app, 0);
            assert_eq!(&*predicted.unwrap(), &[1000; 4], "extrapolated from map 0");
            assert!(
                c.sa.coordinator.lock().size_prior(app, 4).is_none(),
                "not complete"
            );
        }
    }
    let final_sizes = [550u64, 1000, 1450, 1900];
    let prior = c.sa.coordinator.lock().size_prior(app, 4).unwrap();
    assert_eq!(
        &*prior, &final_sizes,
        "the completed shuffle is the app's prior"
    );

    // The figures, computed here from their definitions.
    let total: u64 = final_sizes.iter().sum();
    let errors: Vec<f64> = final_sizes
        .iter()
        .map(|&t| 0.25 - t as f64 / total as f64)
        .collect();
    let std = (errors.iter().map(|e| e * e).sum::<f64>() / 4.0).sqrt();
    let total_error = (4000.0 - total as f64).abs() / total as f64;
    let page = c.coordinator_metrics().await;
    assert_eq!(
        sample(&page, "crossdock_coordinator_predictions_total"),
        1.0
    );
    assert_eq!(
        sample(&page, "crossdock_coordinator_prediction_error_count"),
        1.0
    );
    let got = sample(&page, "crossdock_coordinator_prediction_error_sum");
    assert!((got - std).abs() < 1e-12, "std {got}, expected {std}");
    // About 0.103 and 0.184: both in the (0.1, 0.2] bucket.
    for name in ["prediction_error", "prediction_total_error"] {
        let bucket = |le: &str| {
            sample(
                &page,
                &format!("crossdock_coordinator_{name}_bucket{{le=\"{le}\"}}"),
            )
        };
        assert_eq!((bucket("0.1"), bucket("0.2")), (0.0, 1.0), "{name}");
    }
    let got = sample(&page, "crossdock_coordinator_prediction_total_error_sum");
    assert!((got - total_error).abs() < 1e-12, "{got} vs {total_error}");
}

/// Workers' `--host`/`--zone` labels reach the clients in every worker record, and with
/// replication each partition's replica sits in the other zone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_labels_reach_clients_and_replicas_cross_zones() {
    let dir = tempfile::tempdir().unwrap();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let mut cfg = CoordinatorConfig::new("127.0.0.1:0", dir.path().join("c"));
    cfg.replication = 2;
    cfg.secret = Some(common::secret());
    let coord = Coordinator::start(cfg, shutdown.clone()).await.unwrap();
    // (host label, zone): two workers in zone a, one in b; the last one unlabelled host.
    let labels = [("node-a1", "a"), ("node-a2", "a"), ("", "b")];
    let mut workers = Vec::new();
    for (i, (host, zone)) in labels.iter().enumerate() {
        let w = Worker::start(
            WorkerConfig {
                listen: "127.0.0.1:0".into(),
                advertise: None,
                host: host.to_string(),
                zone: zone.to_string(),
                coordinator: coord.addr.to_string(),
                memory: 32 << 20,
                data_dir: dir.path().join(format!("w{i}")),
                extra_data_dirs: Vec::new(),
                object_store: None,
                disk_quota: None,
                limits: Default::default(),
                secret: Some(common::secret()),
                tls: None,
                tenancy: Default::default(),
                split_bytes: crossdock_server::worker::config::DEFAULT_SPLIT_BYTES,
                memory_only: false,
                zero_copy_fetch: true,
            },
            shutdown.clone(),
        )
        .await
        .unwrap();
        workers.push(w);
    }
    while coord.lock().counts().2 < 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let client = CoordinatorClient::connect(&coord.addr.to_string(), &Keyring::new())
        .await
        .unwrap();
    client.register_app("a", 60_000).await.unwrap();
    let placement = client.register_shuffle("a", 0, 1, 12).await.unwrap();
    let label_of = |addr: &str| {
        let i = workers.iter().position(|w| w.advertised == addr).unwrap();
        labels[i]
    };
    for info in &placement.workers {
        let (host, zone) = label_of(&info.addr);
        let want_host = if host.is_empty() { "127.0.0.1" } else { host };
        assert_eq!((info.host.as_str(), info.zone.as_str()), (want_host, zone));
    }
    let zone_of = |id: u32| {
        let w = placement.workers.iter().find(|w| w.id == id).unwrap();
        w.zone.clone()
    };
    for p in 0..12 {
        let (w, r) = (
            placement.partition_workers[p],
            placement.partition_replicas[p],
        );
        assert_ne!(
            zone_of(w),
            zone_of(r),
            "partition {p}: both copies in one zone"
        );
    }
}
