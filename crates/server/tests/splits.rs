//! Hot partitions split across workers (Celeborn's soft split; SMS's delegation to a
//! peer with room): pushers follow the push answers, commits count every slot, readers
//! read every split, and a split survives losing its worker like a partition. Real
//! coordinator and workers on loopback.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use crossdock_client::ShuffleStatus;
use crossdock_proto::{AttemptId, CommitStatus, Durability, ErrorCode, PartitionStat};

use common::nodes::{read_from, restart_in_place, Cluster, WorkerOpts};
use common::{payload, push_routed, read_batches, reader};

const BATCH: usize = 64 << 10;

/// What one map pushed: payload bytes per slot, and every batch as (slot, seq, bytes).
#[derive(Default)]
struct Pushed {
    per_slot: BTreeMap<u32, u64>,
    batches: Vec<(u32, u32, Vec<u8>)>,
}

/// Pushes `n` batches of `map` to partition `p`, starting at `addr` and following every
/// redirect the workers answer with, as the engine clients do.
async fn push_following(addr: &str, app: &str, p: u32, map: u32, n: u32) -> Pushed {
    let mut out = Pushed::default();
    let mut route = (p, addr.to_string());
    push_more(&mut out, &mut route, app, p, map, 0..n).await;
    out
}

/// Pushes batches `seqs` of `map` (partition `p`) along `route` (slot and worker), which
/// follows the redirects, adding them to `out`.
async fn push_more(
    out: &mut Pushed,
    route: &mut (u32, String),
    app: &str,
    p: u32,
    map: u32,
    seqs: std::ops::Range<u32>,
) {
    for seq in seqs {
        let data = payload(map, p, seq, BATCH);
        let redirect = push_routed(&route.1, app, route.0, (map, 0, seq), &data)
            .await
            .unwrap();
        *out.per_slot.entry(route.0).or_default() += data.len() as u64;
        out.batches.push((route.0, seq, data));
        if let Some(r) = redirect {
            *route = (r.slot, r.addr);
        }
    }
}

/// Pushes `n` batches of `map` to partition `p` as [`push_following`] does, but after the
/// first `split_after` waits until the worker at `addr` redirects the partition: a worker
/// asks for its split in the background, so without the wait how many batches land
/// before the redirect depends on timing.
async fn push_split(
    c: &Cluster,
    addr: &str,
    app: &str,
    p: u32,
    map: u32,
    (split_after, n): (u32, u32),
) -> Pushed {
    let mut out = Pushed::default();
    let mut route = (p, addr.to_string());
    push_more(&mut out, &mut route, app, p, map, 0..split_after).await;
    common::eventually("the worker redirects the partition", || async {
        c.node(addr)
            .worker
            .store
            .partition(app, 0, p)
            .is_ok_and(|(_, part)| part.split.continues().is_some())
    })
    .await;
    push_more(&mut out, &mut route, app, p, map, split_after..n).await;
    out
}

/// Pushes `n` batches of `map` to partition `p` as [`push_following`] does, but before a
/// push that would leave the worker it goes to without room for one more batch while that
/// worker's ask for a split is unanswered, waits for the answer. Pushes go on while a
/// worker asks (its headroom takes them, as in production); only the last batch that
/// fits waits, so a loaded machine, where the background ask may come back late, cannot
/// fill a memory-only worker and have a push refused.
async fn push_paced(c: &Cluster, addr: &str, app: &str, p: u32, map: u32, n: u32) -> Pushed {
    let mut out = Pushed::default();
    let mut route = (p, addr.to_string());
    for seq in 0..n {
        let (slot, at) = route.clone();
        let worker = &c.node(&at).worker;
        let budget = &worker.store.budget;
        if budget.total().saturating_sub(budget.used()) < 2 * BATCH as u64 {
            common::eventually("the worker's ask for a split is answered", || async {
                worker
                    .store
                    .partition(app, 0, slot)
                    .is_ok_and(|(_, part)| !part.split.asking())
            })
            .await;
        }
        push_more(&mut out, &mut route, app, p, map, seq..seq + 1).await;
    }
    out
}

async fn commit(c: &Cluster, app: &str, map: u32, pushed: &Pushed) -> CommitStatus {
    c.commit_slots(app, 0, map, &pushed.per_slot).await
}

/// Every batch of partition `p` a reader of maps `[start, end)` gets from all its slots,
/// as (map, seq, payload), sorted.
async fn read_all(
    status: &ShuffleStatus,
    app: &str,
    p: u32,
    start: u32,
    end: u32,
) -> Vec<(u32, u32, Bytes)> {
    let mut out = Vec::new();
    for slot in status.slots_of(p) {
        let addr = &status.placement.worker_of(slot).unwrap().addr;
        let r = reader(addr, app, slot, start, end).with_max_resumes(0);
        out.extend(read_batches(r).await.unwrap());
    }
    out.sort();
    out
}

fn expected(pushed: &[&Pushed], maps: &[u32]) -> Vec<(u32, u32, Bytes)> {
    let mut out: Vec<(u32, u32, Bytes)> = maps
        .iter()
        .flat_map(|&m| {
            pushed[m as usize]
                .batches
                .iter()
                .map(move |(_, seq, b)| (m, *seq, Bytes::from(b.clone())))
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_partition_splits_and_is_read_once_through_the_loss_of_a_splits_worker() {
    // Split at 4 batches, replicated: a split has a replica like a partition.
    let c = Cluster::start_splitting(3, 2, 4 * BATCH as u64).await;
    c.coord.register_app("h", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("h", 0, 3, 2).await.unwrap();
    let first = placement.worker_of(0).unwrap().addr.clone();
    let cold = placement.worker_of(1).unwrap().addr.clone();
    // Map 2 commits before anything is split: the splits' workers must learn of it.
    let early = push_following(&cold, "h", 1, 2, 1).await;
    assert_eq!(commit(&c, "h", 2, &early).await, CommitStatus::Committed);
    let m0 = push_split(&c, &first, "h", 0, 0, (5, 24)).await;
    let m1 = push_following(&first, "h", 0, 1, 8).await;
    let cold0 = push_following(&cold, "h", 1, 0, 1).await;
    assert!(
        m0.per_slot.len() >= 2,
        "24 batches at a split size of 4 left partition 0 in one slot: {:?}",
        m0.per_slot
    );
    // Map 1 started after the split: the old slot redirected it at its first batch.
    assert!(m1.per_slot.len() >= 2, "{:?}", m1.per_slot);
    let mut m0_all = Pushed::default();
    for p in [&m0, &cold0] {
        for (&s, &b) in &p.per_slot {
            *m0_all.per_slot.entry(s).or_default() += b;
        }
    }
    assert_eq!(commit(&c, "h", 0, &m0_all).await, CommitStatus::Committed);
    assert_eq!(commit(&c, "h", 1, &m1).await, CommitStatus::Committed);

    let status = c.status("h").await;
    let slots = status.slots_of(0);
    assert!(slots.len() >= 2 && slots[0] == 0, "{slots:?}");
    assert_eq!(
        status.slots_of(1),
        vec![1],
        "the cold partition was not split"
    );
    let split = slots[1];
    let (split_at, split_replica) = (
        status.placement.worker_of(split).unwrap().addr.clone(),
        status.placement.replica_of(split).unwrap().addr.clone(),
    );
    assert_ne!(split_at, first, "a split goes to another worker");
    assert_ne!(split_at, split_replica);
    let bytes: u64 = slots
        .iter()
        .map(|&s| status.partition_bytes[s as usize])
        .sum();
    assert_eq!(bytes, 32 * BATCH as u64, "the commits count every slot");

    let want = expected(&[&m0, &m1], &[0, 1]);
    assert_eq!(read_all(&status, "h", 0, 0, 3).await, want);
    // A map range (AQE's skew reads) reads only its maps, from every slot.
    assert_eq!(
        read_all(&status, "h", 0, 1, 2).await,
        expected(&[&m0, &m1], &[1])
    );
    assert_eq!(
        read_from(&cold, "h", 1, 3).await.unwrap().len(),
        2,
        "one batch of maps 0 and 2"
    );

    // The split's worker goes: its replica serves it, nothing is recomputed.
    c.kill(&split_at).await;
    let after = c.status("h").await;
    assert_eq!(after.committed_maps, 3);
    assert_eq!(after.slots_of(0), slots);
    assert_eq!(
        after.placement.worker_of(split).unwrap().addr,
        split_replica
    );
    assert_eq!(read_all(&after, "h", 0, 0, 3).await, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_other_worker_a_hot_partition_stays_whole() {
    let c = Cluster::start_splitting(1, 1, 2 * BATCH as u64).await;
    c.coord.register_app("w", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("w", 0, 1, 1).await.unwrap();
    let only = placement.worker_of(0).unwrap().addr.clone();
    let m0 = push_following(&only, "w", 0, 0, 10).await;
    assert_eq!(
        m0.per_slot.keys().collect::<Vec<_>>(),
        vec![&0],
        "nowhere to split to"
    );
    assert_eq!(commit(&c, "w", 0, &m0).await, CommitStatus::Committed);
    let status = c.status("w").await;
    assert_eq!(status.slots_of(0), vec![0]);
    assert_eq!(
        read_all(&status, "w", 0, 0, 1).await,
        expected(&[&m0], &[0])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_that_misplaces_split_bytes_is_refused() {
    let c = Cluster::start_splitting(2, 1, 2 * BATCH as u64).await;
    c.coord.register_app("m", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("m", 0, 1, 1).await.unwrap();
    let first = placement.worker_of(0).unwrap().addr.clone();
    let m0 = push_split(&c, &first, "m", 0, 0, (3, 12)).await;
    assert!(m0.per_slot.len() >= 2, "{:?}", m0.per_slot);
    // Claiming every byte for the first slot: the split's worker holds some of them.
    let total: u64 = m0.per_slot.values().sum();
    let claim = vec![PartitionStat {
        partition: 0,
        bytes: total,
        records: 1,
    }];
    let err = c
        .coord
        .commit_map("m", 0, 0, AttemptId(0), claim)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::CommitMismatch), "{err}");
    // The right figures commit (the refused commit was undone everywhere).
    assert_eq!(commit(&c, "m", 0, &m0).await, CommitStatus::Committed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_short_of_memory_delegates_a_hot_partition_to_a_peer_with_room() {
    // Splits by size are out of reach (1 GiB): only memory pressure can split. 16 MiB
    // workers (14 MiB of push credit) start writing to disk at 90% of it; on the way there
    // the hot partition holds most of a worker whose memory is 7/8 spent, and its later
    // batches go to the peer.
    let small = 16 << 20;
    let c = Cluster::start_splitting_in(2, 1, 1 << 30, small, Durability::Memory).await;
    c.coord.register_app("p", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("p", 0, 1, 1).await.unwrap();
    let first = placement.worker_of(0).unwrap().addr.clone();
    let m0 = push_following(&first, "p", 0, 0, 320).await;
    assert!(
        m0.per_slot.len() >= 2,
        "20 MiB into a 16 MiB worker stayed in one slot: {:?}",
        m0.per_slot
    );
    let budget = c.node(&first).worker.store.budget.total();
    assert!(
        c.node(&first).worker.store.budget.peak() <= budget,
        "the worker never held more than its budget"
    );
    assert_eq!(commit(&c, "p", 0, &m0).await, CommitStatus::Committed);
    let status = c.status("p").await;
    let split = status.slots_of(0)[1];
    assert_ne!(status.placement.worker_of(split).unwrap().addr, first);
    assert_eq!(
        read_all(&status, "p", 0, 0, 1).await,
        expected(&[&m0], &[0])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_only_workers_take_a_partition_larger_than_any_of_them_by_delegating_it() {
    // Workers without a disk (SMS's setting): 16 MiB each, 12 MiB of push credit, and a
    // 30 MiB partition. Without delegation the first worker would refuse it (memory
    // exceeded); with it, the overflow goes to peers with room, split after split (each
    // worker delegates at 9 MiB, keeping 3 MiB for what arrives while it asks).
    let opts = WorkerOpts {
        split_bytes: 1 << 30,
        memory_only: true,
        hosts: &[],
    };
    let tenancy = crossdock_server::worker::config::Tenancy::default();
    let c = Cluster::start_full(4, 1, Durability::Memory, None, 16 << 20, tenancy, opts).await;
    c.coord.register_app("m", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("m", 0, 1, 1).await.unwrap();
    let first = placement.worker_of(0).unwrap().addr.clone();
    let m0 = push_paced(&c, &first, "m", 0, 0, 480).await;
    assert!(m0.per_slot.len() >= 3, "{:?}", m0.per_slot);
    assert_eq!(commit(&c, "m", 0, &m0).await, CommitStatus::Committed);
    for n in &c.nodes {
        let b = &n.worker.store.budget;
        assert!(b.peak() <= b.total(), "a worker held more than its budget");
        let flushed = &n.worker.store.metrics().flushed_bytes;
        assert_eq!(flushed.load(std::sync::atomic::Ordering::Relaxed), 0);
    }
    let status = c.status("m").await;
    assert_eq!(
        read_all(&status, "m", 0, 0, 1).await,
        expected(&[&m0], &[0])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_on_disk_is_served_again_by_its_restarted_worker() {
    let c = Cluster::start_splitting_in(2, 1, 2 * BATCH as u64, 64 << 20, Durability::Disk).await;
    c.coord.register_app("r", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("r", 0, 2, 1).await.unwrap();
    let first = placement.worker_of(0).unwrap().addr.clone();
    let m0 = push_split(&c, &first, "r", 0, 0, (3, 10)).await;
    let m1 = push_following(&first, "r", 0, 1, 4).await;
    assert_eq!(commit(&c, "r", 0, &m0).await, CommitStatus::Committed);
    assert_eq!(commit(&c, "r", 1, &m1).await, CommitStatus::Committed);
    let status = c.status("r").await;
    let slots = status.slots_of(0);
    assert!(slots.len() >= 2, "{slots:?}");
    let split_at = status.placement.worker_of(slots[1]).unwrap().addr.clone();
    // The split's worker restarts on its data directory (durability disk: its batches were
    // synced before the commits counted): it is checked and keeps serving the split.
    let _again = restart_in_place(&c, &split_at).await;
    let want = expected(&[&m0, &m1], &[0, 1]);
    common::eventually("the restarted worker serves its split again", || async {
        let s = c.status("r").await;
        s.committed_maps == 2 && s.slots_of(0) == slots && {
            let mut out = Vec::new();
            for &slot in &slots {
                let addr = &s.placement.worker_of(slot).unwrap().addr;
                match read_batches(reader(addr, "r", slot, 0, 2).with_max_resumes(0)).await {
                    Ok(b) => out.extend(b),
                    Err(_) => return false,
                }
            }
            out.sort();
            out == want
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_splits_worker_is_lost_the_split_slot_redirects_to_its_new_worker() {
    let c = Cluster::start_splitting(3, 2, 4 * BATCH as u64).await;
    c.coord.register_app("m", 60_000).await.unwrap();
    let placement = c.coord.register_shuffle("m", 0, 2, 1).await.unwrap();
    let first = placement.worker_of(0).unwrap().addr.clone();
    let m0 = push_split(&c, &first, "m", 0, 0, (5, 8)).await;
    assert!(m0.per_slot.len() >= 2, "{:?}", m0.per_slot);
    let status = c.status("m").await;
    let split = status.slots_of(0)[1];
    let split_at = status.placement.worker_of(split).unwrap().addr.clone();
    let replica = status.placement.replica_of(split).unwrap().addr.clone();

    // The split's worker goes and its replica takes over. The coordinator tells the old
    // slot's worker, which redirects the next map there, not to the dead worker.
    c.kill(&split_at).await;
    let data = payload(1, 0, 0, BATCH);
    let redirect = push_routed(&first, "m", 0, (1, 0, 0), &data)
        .await
        .unwrap()
        .expect("the old slot redirects");
    assert_eq!(
        (redirect.slot, redirect.addr.as_str()),
        (split, replica.as_str())
    );

    // Map 1 goes on in the split (a redirect answer still means stored), and both maps
    // are read exactly once.
    let mut m1 = Pushed::default();
    m1.per_slot.insert(0, data.len() as u64);
    m1.batches.push((0, 0, data));
    for seq in 1..4 {
        let d = payload(1, 0, seq, BATCH);
        push_routed(&replica, "m", split, (1, 0, seq), &d)
            .await
            .unwrap();
        *m1.per_slot.entry(split).or_default() += d.len() as u64;
        m1.batches.push((split, seq, d));
    }
    assert_eq!(commit(&c, "m", 0, &m0).await, CommitStatus::Committed);
    assert_eq!(commit(&c, "m", 1, &m1).await, CommitStatus::Committed);
    let after = c.status("m").await;
    assert_eq!(
        read_all(&after, "m", 0, 0, 2).await,
        expected(&[&m0, &m1], &[0, 1])
    );
}
