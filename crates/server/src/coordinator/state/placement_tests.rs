//! Tests of where the coordinator's state puts partitions once it knows sizes and labels: size
//! prediction and its prior, block layouts and layouts shared between shuffles, replicas across
//! zones and hosts, labels and rates given to the clients. (Placement by load alone, and the
//! first replica rules, are tested in `tests.rs`.)

use super::tests::{stat, state_with_workers};
use super::*;
use crossdock_proto::{AttemptId, PartitionStat, NO_WORKER};

/// Commits `maps` of shuffle `id` of app "a", map `m` writing `sizes(m)` bytes per
/// partition, and does with a completion what the service does: remembers its sizes.
fn commit_all(
    st: &mut State,
    id: u32,
    maps: std::ops::Range<u32>,
    sizes: impl Fn(u32) -> Vec<u64>,
) {
    let e = st.shuffle("a", id).unwrap();
    for m in maps {
        let stats: Vec<PartitionStat> = sizes(m)
            .into_iter()
            .enumerate()
            .map(|(p, b)| stat(p as u32, b))
            .collect();
        let done = e
            .record_commit(m, AttemptId(0), &stats, &[])
            .forecast
            .completed;
        if let Some(done) = done {
            st.remember_final_sizes("a", done.final_sizes);
        }
    }
}

fn new_shuffle(st: &mut State, id: u32, maps: u32, partitions: u32) -> Arc<ShuffleEntry> {
    let e = st
        .plan_shuffle("a", id, maps, partitions)
        .unwrap()
        .unwrap_err();
    st.record_shuffle("a", id, e).unwrap()
}

#[test]
fn a_shuffle_predicts_at_the_configured_threshold() {
    let mut st = state_with_workers(2);
    st.set_prediction_threshold(0.5);
    st.register_app("a", 60_000, Instant::now()).unwrap();
    let e = new_shuffle(&mut st, 0, 4, 2);
    let first = e.record_commit(0, AttemptId(0), &[stat(0, 10), stat(1, 30)], &[]);
    assert!(first.forecast.predicted.is_none());
    assert!(
        st.predicted_sizes("a", 0).is_none(),
        "1 map of 4 is under 50%"
    );
    let second = e.record_commit(1, AttemptId(0), &[stat(0, 20), stat(1, 10)], &[]);
    assert_eq!(second.forecast.predicted, Some(2));
    // (10 + 20) * 4 / 2 and (30 + 10) * 4 / 2.
    assert_eq!(&*st.predicted_sizes("a", 0).unwrap(), &[60, 80]);
    let third = e.record_commit(2, AttemptId(0), &[stat(0, 1)], &[]);
    assert!(third.forecast.predicted.is_none(), "predicted once");
    assert_eq!(&*st.predicted_sizes("a", 0).unwrap(), &[60, 80]);
    assert!(st.predicted_sizes("a", 9).is_none(), "unknown shuffle");
}

#[test]
fn the_size_prior_is_the_apps_latest_completed_shuffle_of_that_partition_count() {
    let mut st = state_with_workers(2);
    st.register_app("a", 60_000, Instant::now()).unwrap();
    assert!(st.size_prior("a", 3).is_none(), "nothing completed yet");
    new_shuffle(&mut st, 0, 2, 3);
    commit_all(&mut st, 0, 0..1, |_| vec![1, 2, 3]);
    assert!(st.size_prior("a", 3).is_none(), "shuffle 0 is not complete");
    commit_all(&mut st, 0, 1..2, |_| vec![1, 2, 3]);
    assert_eq!(&*st.size_prior("a", 3).unwrap(), &[2, 4, 6]);
    // A later shuffle of the same partition count replaces it; another count does not.
    new_shuffle(&mut st, 1, 1, 3);
    commit_all(&mut st, 1, 0..1, |_| vec![0, 9, 0]);
    new_shuffle(&mut st, 2, 1, 2);
    commit_all(&mut st, 2, 0..1, |_| vec![5, 5]);
    assert_eq!(&*st.size_prior("a", 3).unwrap(), &[0, 9, 0]);
    assert_eq!(&*st.size_prior("a", 2).unwrap(), &[5, 5]);
    assert!(
        st.size_prior("a", 4).is_none(),
        "no shuffle of 4 partitions"
    );
    // The history outlives the shuffles, not the app.
    st.remove_shuffle("a", 1);
    assert_eq!(&*st.size_prior("a", 3).unwrap(), &[0, 9, 0]);
    assert!(st.size_prior("b", 3).is_none(), "unknown app");
    st.remove_app("a");
    st.register_app("a", 60_000, Instant::now()).unwrap();
    assert!(st.size_prior("a", 3).is_none(), "gone with the app");
}

#[test]
fn replay_rebuilds_predictions_and_history_from_the_commits() {
    let mut st = state_with_workers(2);
    st.register_app("a", 60_000, Instant::now()).unwrap();
    // Shuffle 0 completed; shuffle 1 past its threshold (1 map of 10), not complete.
    new_shuffle(&mut st, 0, 2, 2);
    commit_all(&mut st, 0, 0..2, |m| vec![u64::from(m) + 1, 4]);
    new_shuffle(&mut st, 1, 10, 2);
    commit_all(&mut st, 1, 0..3, |m| vec![10 * u64::from(m + 1), 1]);
    assert_eq!(&*st.predicted_sizes("a", 1).unwrap(), &[100, 10]);
    let mut restored = State::new(1);
    for r in st.snapshot() {
        restored.apply(r, Instant::now());
    }
    // The snapshot lists commits in map order, the order they were made in here.
    assert_eq!(restored.predicted_sizes("a", 1), st.predicted_sizes("a", 1));
    assert_eq!(restored.predicted_sizes("a", 0), st.predicted_sizes("a", 0));
    assert_eq!(&*restored.size_prior("a", 2).unwrap(), &[3, 8]);
}

#[test]
fn a_new_shuffle_is_placed_in_one_block_per_worker() {
    let mut st = state_with_workers(3);
    st.register_app("a", 1000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 0, 4, 9).unwrap().unwrap_err();
    let (primary, _) = e.lock().layout();
    assert_eq!(primary, vec![0, 0, 0, 1, 1, 1, 2, 2, 2]);
}

#[test]
fn shuffles_written_at_once_share_their_layout_and_later_ones_do_not() {
    let mut st = state_with_workers(3);
    st.register_app("a", 1000, Instant::now()).unwrap();
    let first = st.plan_shuffle("a", 0, 2, 6).unwrap().unwrap_err();
    let first = st.record_shuffle("a", 0, first).unwrap();
    let layout = first.lock().layout().0;
    assert_eq!(layout, vec![0, 0, 1, 1, 2, 2]);
    // Worker 0 now holds far more than the others.
    st.heartbeat(0, Load::stored(10 << 30), false, Instant::now())
        .unwrap();
    // The app's second shuffle of as many partitions, while the first is being written
    // (a join's other side), still gets the same primaries, partition by partition.
    let second = st.plan_shuffle("a", 1, 2, 6).unwrap().unwrap_err();
    assert_eq!(second.lock().layout().0, layout);
    // Not one of another partition count: that one avoids worker 0.
    let third = st.plan_shuffle("a", 2, 2, 5).unwrap().unwrap_err();
    assert!(!third.lock().layout().0.contains(&0));
    // Once the first has every map committed, it is no one's partner.
    first.record_commit(0, AttemptId(0), &[stat(0, 1)], &[]);
    first.record_commit(1, AttemptId(0), &[stat(1, 1)], &[]);
    let later = st.plan_shuffle("a", 3, 2, 6).unwrap().unwrap_err();
    assert!(
        !later.lock().layout().0.contains(&0),
        "{:?}",
        later.lock().layout().0
    );
}

#[test]
fn a_partner_on_a_lost_worker_is_not_copied() {
    let mut st = state_with_workers(2);
    st.register_app("a", 1000, Instant::now()).unwrap();
    let first = st.plan_shuffle("a", 0, 2, 4).unwrap().unwrap_err();
    let first = st.record_shuffle("a", 0, first).unwrap();
    st.mark_lost(1);
    let second = st.plan_shuffle("a", 1, 2, 4).unwrap().unwrap_err();
    assert!(first.lock().layout().0.contains(&1));
    assert_eq!(second.lock().layout().0, vec![0; 4]);
}

#[test]
fn the_prior_moves_block_boundaries_toward_heavy_partitions() {
    let mut st = state_with_workers(2);
    st.register_app("a", 1000, Instant::now()).unwrap();
    // An earlier shuffle of 6 partitions whose first partition held most of the bytes.
    st.remember_final_sizes(
        "a",
        vec![
            600u64 << 20,
            20 << 20,
            20 << 20,
            20 << 20,
            20 << 20,
            20 << 20,
        ]
        .into(),
    );
    let e = st.plan_shuffle("a", 0, 2, 6).unwrap().unwrap_err();
    let primary = e.lock().layout().0;
    // Blended with its mean (the heavy partition still weighs most): the heavy one alone
    // or nearly alone on one worker, the light ones on the other.
    let first = primary[0];
    let with_first = primary.iter().filter(|&&w| w == first).count();
    assert!(with_first <= 2, "{primary:?}");
    // Without a prior the same shuffle splits 3 and 3.
    let mut st2 = state_with_workers(2);
    st2.register_app("b", 1000, Instant::now()).unwrap();
    let e = st2.plan_shuffle("b", 0, 2, 6).unwrap().unwrap_err();
    assert_eq!(e.lock().layout().0, vec![0, 0, 0, 1, 1, 1]);
}

fn labelled(st: &mut State, addr: &str, host: &str, zone: &str) -> u32 {
    let labels = Labels::new(addr, host, zone);
    st.register_labelled_worker(addr, labels, 1 << 30, 1, Instant::now())
        .0
}

#[test]
fn replicas_go_to_another_zone_and_spread_over_it() {
    let mut st = State::new(2);
    let zone_of: Vec<&str> = vec!["a", "a", "b", "b"];
    for (i, z) in zone_of.iter().enumerate() {
        labelled(&mut st, &format!("10.0.0.{i}:7001"), "", z);
    }
    st.register_app("a", 1000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 0, 1, 16).unwrap().unwrap_err();
    let p = e.lock();
    let mut replicas_of: std::collections::BTreeMap<u32, BTreeSet<u32>> = Default::default();
    for i in 0..16 {
        let (w, r) = (p.primary[i], p.replica[i]);
        assert_ne!(r, NO_WORKER);
        assert_ne!(
            zone_of[w as usize], zone_of[r as usize],
            "partition {i}: primary {w} and replica {r} share a zone"
        );
        replicas_of.entry(w).or_default().insert(r);
    }
    for (w, rs) in replicas_of {
        assert_eq!(
            rs.len(),
            2,
            "worker {w}'s partitions fall to both workers of the other zone"
        );
    }
}

#[test]
fn without_zones_replicas_leave_the_primarys_host() {
    let mut st = State::new(2);
    labelled(&mut st, "10.0.0.1:7001", "big-box", "");
    labelled(&mut st, "10.0.0.1:7002", "big-box", "");
    labelled(&mut st, "10.0.0.2:7001", "", "");
    st.register_app("a", 1000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 0, 1, 12).unwrap().unwrap_err();
    let p = e.lock();
    for i in 0..12 {
        if p.primary[i] < 2 {
            assert_eq!(p.replica[i], 2, "partition {i} would die with big-box");
        } else {
            assert!(p.replica[i] < 2);
        }
    }
}

#[test]
fn a_partition_placed_anew_gets_its_replica_in_another_zone() {
    let mut st = State::new(2);
    let zone_of = ["a", "b", "a", "b"];
    for (i, z) in zone_of.iter().enumerate() {
        labelled(&mut st, &format!("10.0.0.{i}:7001"), "", z);
    }
    st.register_app("a", 1000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 0, 1, 16).unwrap().unwrap_err();
    let e = st.record_shuffle("a", 0, e).unwrap();
    // Workers 0 and 1 die together: partitions with both copies on them are placed anew.
    st.mark_lost(0);
    st.mark_lost(1);
    let mut lost = st.relocate("a", 0, &e, 0, &BTreeSet::new()).lost;
    lost.extend(st.relocate("a", 0, &e, 1, &BTreeSet::new()).lost);
    assert!(
        !lost.is_empty(),
        "some partition had both copies on workers 0 and 1"
    );
    let p = e.lock();
    for &part in &lost {
        let (w, r) = (p.primary[part as usize], p.replica[part as usize]);
        assert!(
            w >= 2 && r >= 2,
            "partition {part} placed on {w}, replica {r}"
        );
        assert_ne!(zone_of[w as usize], zone_of[r as usize], "partition {part}");
    }
}

#[test]
fn labels_reach_the_clients_and_default_to_the_address() {
    let mut st = State::new(1);
    labelled(&mut st, "10.0.0.1:7001", "node-1", "eu-1a");
    labelled(&mut st, "[fd00::2]:7001", "", "");
    let infos = st.members.infos([0, 1]);
    assert_eq!(
        (infos[0].host.as_str(), infos[0].zone.as_str()),
        ("node-1", "eu-1a")
    );
    assert_eq!(
        (infos[1].host.as_str(), infos[1].zone.as_str()),
        ("fd00::2", "")
    );
    // A worker that registers again with new labels is described with them.
    labelled(&mut st, "10.0.0.1:7001", "node-1b", "eu-1b");
    let infos = st.members.infos([0]);
    assert_eq!(
        (infos[0].host.as_str(), infos[0].zone.as_str()),
        ("node-1b", "eu-1b")
    );
}

#[test]
fn heartbeats_give_push_and_fetch_rates() {
    let mut st = State::default();
    let t0 = Instant::now();
    st.register_worker("w0:1", 1 << 30, 1, t0);
    let load = |pushed, fetched| Load {
        pushed,
        fetched,
        ..Load::default()
    };
    st.heartbeat(0, load(1000, 0), false, t0).unwrap();
    assert_eq!(
        st.worker(0).unwrap().rates,
        Rates::default(),
        "one report is no rate"
    );
    st.heartbeat(0, load(201_000, 50_000), false, t0 + Duration::from_secs(2))
        .unwrap();
    let r = st.worker(0).unwrap().rates;
    assert_eq!((r.push, r.fetch), (100_000.0, 25_000.0));
    // The worker restarted: its counters began again from zero.
    st.heartbeat(0, load(4000, 0), false, t0 + Duration::from_secs(4))
        .unwrap();
    let r = st.worker(0).unwrap().rates;
    assert_eq!((r.push, r.fetch), (2000.0, 0.0));
}

#[test]
fn a_predicted_shuffle_moves_off_its_hot_host_once() {
    let mut st = State::default();
    labelled(&mut st, "10.0.0.1:7001", "", "");
    labelled(&mut st, "10.0.0.2:7001", "", "");
    st.register_app("a", 1000, Instant::now()).unwrap();
    let plan = |st: &mut State, id: u32| {
        let e = st.plan_shuffle("a", id, 20, 8).unwrap().unwrap_err();
        st.record_shuffle("a", id, e).unwrap()
    };
    let a = plan(&mut st, 0);
    let hot = a.lock().copies(0).0;
    let heavy: Vec<u32> = (0..8).filter(|&p| a.lock().copies(p).0 == hot).collect();
    assert_eq!(heavy.len(), 4, "blocks of four");
    // Maps 0 and 1 (10% of 20 maps: the prediction) write three times more to the hot block.
    let stats: Vec<PartitionStat> = (0..8)
        .map(|p| stat(p, if heavy.contains(&p) { 300 } else { 100 }))
        .collect();
    a.record_commit(0, AttemptId(0), &stats, &[]);
    assert!(a
        .record_commit(1, AttemptId(0), &stats, &[])
        .forecast
        .predicted
        .is_some());
    let decided = st.rebalance_moves("a", 0, 0.1).unwrap();
    assert_eq!(decided.shuffles.len(), 1, "a shuffle of its own");
    let moves = decided.moves;
    // Predicted loads 24000 / 8000, of which 2400 / 800 committed (they stay); MinHeap of
    // the bytes to come from those reaches 16800, the bound 18480: one hot partition's
    // 5400 to come fits (room 10480), and after it none.
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert!(heavy.contains(&moves[0].partition));
    assert_ne!(moves[0].target, hot);
    assert_eq!(moves[0].bytes, 5400, "predicted for maps 2 to 19");
    // Decided once.
    assert!(st.rebalance_moves("a", 0, 0.1).is_none());
    // One host only: nothing to decide.
    let mut one = state_with_workers(2);
    one.register_app("a", 1000, Instant::now()).unwrap();
    let e = one.plan_shuffle("a", 0, 20, 8).unwrap().unwrap_err();
    let e = one.record_shuffle("a", 0, e).unwrap();
    e.record_commit(0, AttemptId(0), &stats, &[]);
    e.record_commit(1, AttemptId(0), &stats, &[]);
    assert!(e.prediction().is_some());
    assert!(one.rebalance_moves("a", 0, 0.1).is_none());
    // A prediction from one map only: nothing to decide either.
    let mut few = State::default();
    labelled(&mut few, "10.0.0.1:7001", "", "");
    labelled(&mut few, "10.0.0.2:7001", "", "");
    few.register_app("a", 1000, Instant::now()).unwrap();
    let e = few.plan_shuffle("a", 0, 10, 8).unwrap().unwrap_err();
    let e = few.record_shuffle("a", 0, e).unwrap();
    e.record_commit(0, AttemptId(0), &stats, &[]);
    assert_eq!(e.prediction().map(|p| p.observed), Some(1));
    assert!(few.rebalance_moves("a", 0, 0.1).is_none());
}

/// Two hosts, one worker each; app "a" with shuffles 0 and 1 of 20 maps and 8 partitions
/// registered together (1 takes 0's layout: a join's sides); the partitions of 0's first
/// worker are the hot block.
fn join_sides() -> (State, Arc<ShuffleEntry>, Arc<ShuffleEntry>, Vec<u32>) {
    let mut st = State::default();
    labelled(&mut st, "10.0.0.1:7001", "", "");
    labelled(&mut st, "10.0.0.2:7001", "", "");
    st.register_app("a", 1000, Instant::now()).unwrap();
    let a = new_shuffle(&mut st, 0, 20, 8);
    let b = new_shuffle(&mut st, 1, 20, 8);
    assert_eq!(b.partner, Some(0));
    let hot = a.lock().copies(0).0;
    let heavy = (0..8).filter(|&p| a.lock().copies(p).0 == hot).collect();
    (st, a, b, heavy)
}

/// Commits maps `maps` of `e`, each writing `bytes(p)` to partition `p`.
fn commit_maps(e: &ShuffleEntry, maps: std::ops::Range<u32>, bytes: impl Fn(u32) -> u64) {
    let stats: Vec<PartitionStat> = (0..8).map(|p| stat(p, bytes(p))).collect();
    for m in maps {
        e.record_commit(m, AttemptId(0), &stats, &[]);
    }
}

#[test]
fn a_joins_sides_are_re_placed_together_on_their_summed_sizes() {
    let (st, a, b, heavy) = join_sides();
    let hot = a.lock().copies(heavy[0]).0;
    // Side 0 writes three times more to the hot block; side 1 is even. Side 0 predicted
    // alone decides nothing yet: its partner's prediction will.
    commit_maps(&a, 0..2, |p| if heavy.contains(&p) { 300 } else { 100 });
    assert!(a.prediction().is_some());
    assert!(st.rebalance_moves("a", 0, 0.1).is_none());
    commit_maps(&b, 0..2, |_| 100);
    let decided = st.rebalance_moves("a", 1, 0.1).unwrap();
    let ids: Vec<u32> = decided.shuffles.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [0, 1]);
    // Summed over 20 maps: 8000 a hot partition, 4000 a cold one; hosts 32000 / 16000, of
    // which 3200 / 1600 committed; MinHeap of the rest from there reaches 24800, the bound
    // 27280: one hot partition moves, for both sides.
    assert_eq!(decided.moves.len(), 1, "{:?}", decided.moves);
    let m = &decided.moves[0];
    assert!(heavy.contains(&m.partition));
    assert_ne!(m.target, hot);
    assert_eq!(m.bytes, 5400 + 1800, "both sides' bytes to come");
    assert_eq!(st.layout_group("a", 0), Some(vec![0, 1]));
    // Decided once, whichever side asks.
    assert!(st.rebalance_moves("a", 0, 0.1).is_none());
    assert!(st.rebalance_moves("a", 1, 0.1).is_none());
}

#[test]
fn a_join_side_written_before_the_other_was_predicted_keeps_the_partitions_in_place() {
    let (st, a, b, heavy) = join_sides();
    // Side 0 is all written before side 1's prediction: its bytes stay (24000 / 8000 on
    // the two hosts), and they outweigh side 1's bytes to come in every partition (a hot
    // one: 6000 + 600 committed, 5400 to come), so moving any would leave its reduce task
    // reading most of it across hosts: the group is decided with nothing to move.
    commit_maps(&a, 0..20, |p| if heavy.contains(&p) { 300 } else { 100 });
    commit_maps(&b, 0..2, |p| if heavy.contains(&p) { 300 } else { 100 });
    let decided = st.rebalance_moves("a", 1, 0.1).unwrap();
    assert_eq!(decided.shuffles.len(), 2);
    assert!(decided.moves.is_empty(), "{:?}", decided.moves);
    assert!(st.rebalance_moves("a", 1, 0.1).is_none(), "decided once");
    // A small side written first weighs where it is, and the large side still moves: side
    // 0 wrote 10 a partition in all, side 1 predicts 6000 / 2000 with 600 / 200 committed.
    let (st, a, b, heavy) = join_sides();
    commit_maps(&a, 0..20, |_| 10);
    commit_maps(&b, 0..2, |p| if heavy.contains(&p) { 300 } else { 100 });
    let decided = st.rebalance_moves("a", 1, 0.1).unwrap();
    assert_eq!(decided.moves.len(), 1, "{:?}", decided.moves);
    assert_eq!(decided.moves[0].bytes, 5400);
    // Every side complete: nothing to decide.
    let (st, a, b, _) = join_sides();
    commit_maps(&a, 0..20, |_| 100);
    commit_maps(&b, 0..20, |_| 100);
    assert!(st.rebalance_moves("a", 1, 0.1).is_none());
    // A shuffle without partners is its own group; a partner unregistered since is no
    // longer in it.
    let (mut st, _a, _b, _) = join_sides();
    assert_eq!(st.layout_group("a", 1), Some(vec![0, 1]));
    st.remove_shuffle("a", 0);
    assert_eq!(st.layout_group("a", 1), Some(vec![1]));
    assert_eq!(st.layout_group("a", 0), None, "unknown");
}

#[test]
fn a_partition_whose_sides_continue_on_different_hosts_stays() {
    let (st, a, b, heavy) = join_sides();
    let hot = a.lock().copies(heavy[0]).0;
    let cold = (0..8)
        .map(|p| a.lock().copies(p).0)
        .find(|&w| w != hot)
        .unwrap();
    // Side 1 continues the first hot partition on the cold host already (a worker's own
    // split): moving it would part the sides somewhere, so it stays, each side's bytes to
    // come counted where that side puts them, and the next hot partition moves instead.
    b.lock().add_split(heavy[0], cold, NO_WORKER);
    commit_maps(&a, 0..2, |p| if heavy.contains(&p) { 300 } else { 100 });
    commit_maps(&b, 0..2, |_| 100);
    let decided = st.rebalance_moves("a", 1, 0.1).unwrap();
    // Hosts 30200 / 17800 (8600 / 3400 staying); MinHeap of the rest from there reaches
    // 25000, the bound 27500: one hot partition of 7200 to come moves.
    assert_eq!(decided.moves.len(), 1, "{:?}", decided.moves);
    assert_eq!(decided.moves[0].partition, heavy[1]);
    assert_eq!(decided.moves[0].bytes, 7200);
}

#[test]
fn an_empty_slot_on_a_lost_worker_weighs_nothing_and_bytes_there_wait_for_relocation() {
    let mut st = State::default();
    let w0 = labelled(&mut st, "10.0.0.1:7001", "", "");
    let w1 = labelled(&mut st, "10.0.0.2:7001", "", "");
    st.register_app("a", 1000, Instant::now()).unwrap();
    let a = new_shuffle(&mut st, 0, 20, 8);
    // A third host joins later; a cold partition continued on it (a split) and from there
    // back on its own host, then the third host's worker is lost. Its slot never received
    // a byte. The decision is then the one without that detour: one hot partition moves.
    let lost = labelled(&mut st, "10.0.0.3:7001", "", "");
    let hot = a.lock().copies(0).0;
    let heavy: Vec<u32> = (0..8).filter(|&p| a.lock().copies(p).0 == hot).collect();
    let cold = (0..8).find(|p| !heavy.contains(p)).unwrap();
    let other = if hot == w0 { w1 } else { w0 };
    let via = a.lock().add_split(cold, lost, NO_WORKER);
    a.lock().add_split(via, other, NO_WORKER);
    assert!(st.mark_lost(lost));
    commit_maps(&a, 0..2, |p| if heavy.contains(&p) { 300 } else { 100 });
    let decided = st.rebalance_moves("a", 0, 0.1);
    let moves = decided
        .expect("an empty slot does not hold the decision")
        .moves;
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert!(heavy.contains(&moves[0].partition));
    assert_eq!((moves[0].target, moves[0].bytes), (other, 5400));

    // Bytes on a lost worker: nothing is decided until they are relocated, and the
    // shuffle is not marked decided (a later prediction asks again).
    let mut st = State::default();
    labelled(&mut st, "10.0.0.1:7001", "", "");
    labelled(&mut st, "10.0.0.2:7001", "", "");
    labelled(&mut st, "10.0.0.3:7001", "", "");
    st.register_app("a", 1000, Instant::now()).unwrap();
    let a = new_shuffle(&mut st, 0, 20, 8);
    let hot = a.lock().copies(0).0;
    commit_maps(&a, 0..2, |p| {
        if a.lock().copies(p).0 == hot {
            300
        } else {
            100
        }
    });
    assert!(st.mark_lost(hot));
    assert!(st.rebalance_moves("a", 0, 0.1).is_none());
    assert!(!a
        .rebalance_decided
        .load(std::sync::atomic::Ordering::Relaxed));
    // Once relocated, as `recovery` does it (the maps that wrote into the lost block are
    // revoked, to run again), and asked again: decided over the hosts left.
    let r = st.relocate("a", 0, &a, hot, &BTreeSet::new());
    assert_eq!(a.lock().revoke_maps_touching(&r.lost), vec![0, 1]);
    let decided = st
        .rebalance_moves("a", 0, 0.1)
        .expect("decided once relocated");
    assert!(decided
        .moves
        .iter()
        .all(|m| m.target != hot && st.is_alive(m.target)));
    assert!(a
        .rebalance_decided
        .load(std::sync::atomic::Ordering::Relaxed));
}
