//! Tests of the coordinator's state transitions.

use super::*;
use crate::error::Coded;
use crossdock_proto::{AttemptId, CommitStatus, ErrorCode, PartitionStat, RunStart, NO_WORKER};

fn state_with_workers(n: u32) -> State {
    let mut st = State::default();
    for i in 0..n {
        st.register_worker(
            &format!("127.0.0.1:{}", 7000 + i),
            1 << 30,
            1,
            Instant::now(),
        );
    }
    st
}

#[test]
fn same_address_keeps_its_worker_id() {
    let mut st = state_with_workers(2);
    assert_eq!(
        st.register_worker("127.0.0.1:7001", 1, 1, Instant::now()),
        (1, Rejoin::Reconnected)
    );
    assert_eq!(
        st.register_worker("127.0.0.1:9999", 1, 1, Instant::now()),
        (2, Rejoin::New)
    );
    assert_eq!(
        st.register_worker("127.0.0.1:7001", 1, 2, Instant::now()),
        (1, Rejoin::Restarted),
        "a new incarnation of a live worker is a restart"
    );
    assert!(
        !st.is_alive(1),
        "handled as lost until its copies are checked"
    );
    assert_eq!(
        st.register_worker("127.0.0.1:7001", 1, 2, Instant::now()),
        (1, Rejoin::Revived)
    );
}

#[test]
fn silent_workers_are_lost_and_come_back() {
    let mut st = state_with_workers(1);
    let later = Instant::now() + Duration::from_secs(60);
    st.mark_lost_workers(Duration::from_secs(10), later);
    assert!(!st.is_alive(0));
    st.heartbeat(0, Load::default(), false, Instant::now())
        .unwrap();
    assert!(st.is_alive(0));
    assert_eq!(
        st.heartbeat(5, Load::default(), false, Instant::now())
            .unwrap_err()
            .code(),
        ErrorCode::UnknownWorker
    );
}

#[test]
fn placement_balances_and_is_stable_on_reregistration() {
    let mut st = state_with_workers(2);
    st.register_app("a", 1000, Instant::now()).unwrap();
    let entry = st.plan_shuffle("a", 0, 2, 4).unwrap().unwrap_err();
    assert_eq!(entry.partitions_of(0).len(), 2);
    assert_eq!(entry.partitions_of(1).len(), 2);
    let recorded = st.record_shuffle("a", 0, entry).unwrap();
    let again = st.plan_shuffle("a", 0, 2, 4).unwrap().unwrap();
    assert!(Arc::ptr_eq(&recorded, &again));
    let conflict = st.plan_shuffle("a", 0, 3, 4).unwrap_err();
    assert_eq!(conflict.code(), ErrorCode::ShuffleExists);
}

#[test]
fn slightly_different_loads_still_spread_a_shuffle() {
    let mut st = state_with_workers(2);
    st.heartbeat(0, Load::stored(1000), false, Instant::now())
        .unwrap();
    st.heartbeat(1, Load::default(), false, Instant::now())
        .unwrap();
    st.register_app("a", 1000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 0, 1, 32).unwrap().unwrap_err();
    assert_eq!(e.partitions_of(0).len(), 16);
    assert_eq!(e.partitions_of(1).len(), 16);
}

#[test]
fn a_heavily_loaded_worker_gets_fewer_partitions() {
    let mut st = state_with_workers(2);
    st.heartbeat(
        0,
        Load::stored(8 * PARTITION_SIZE_ESTIMATE),
        false,
        Instant::now(),
    )
    .unwrap();
    st.register_app("a", 1000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 0, 1, 20).unwrap().unwrap_err();
    assert_eq!(
        e.partitions_of(1).len(),
        14,
        "8 estimates of head start, then alternate"
    );
    assert_eq!(e.partitions_of(0).len(), 6);
}

#[test]
fn second_shuffle_goes_to_the_less_loaded_worker() {
    let mut st = state_with_workers(2);
    st.register_app("a", 1000, Instant::now()).unwrap();
    st.register_app("b", 1000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 0, 1, 1).unwrap().unwrap_err();
    let first = e.lock().primary[0];
    st.record_shuffle("a", 0, e).unwrap();
    // Another app's: the same app's would share the first's layout while it is written.
    let e2 = st.plan_shuffle("b", 0, 1, 1).unwrap().unwrap_err();
    assert_ne!(e2.lock().primary[0], first);
}

#[test]
fn no_live_worker_is_a_clear_error() {
    let mut st = State::default();
    st.register_app("a", 1000, Instant::now()).unwrap();
    assert_eq!(
        st.plan_shuffle("a", 0, 1, 1).unwrap_err().code(),
        ErrorCode::NoWorkers
    );
    assert_eq!(
        st.plan_shuffle("zz", 0, 1, 1).unwrap_err().code(),
        ErrorCode::UnknownApp
    );
}

#[test]
fn first_attempt_wins() {
    let mut st = state_with_workers(1);
    st.register_app("a", 1000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 0, 2, 1).unwrap().unwrap_err();
    assert_eq!(e.commit_precheck(0, AttemptId(0)), None);
    e.record_commit(
        0,
        AttemptId(0),
        &[PartitionStat {
            partition: 0,
            bytes: 10,
            records: 1,
        }],
        &[],
    );
    assert_eq!(
        e.commit_precheck(0, AttemptId(0)),
        Some((CommitStatus::AlreadyCommitted, AttemptId(0)))
    );
    assert_eq!(
        e.commit_precheck(0, AttemptId(1)),
        Some((CommitStatus::Rejected, AttemptId(0)))
    );
    assert_eq!(e.lock().partition_bytes, vec![10]);
}

fn stat(partition: u32, bytes: u64) -> PartitionStat {
    PartitionStat {
        partition,
        bytes,
        records: 1,
    }
}

#[test]
fn a_later_generation_replaces_the_commit() {
    let mut st = state_with_workers(1);
    st.register_app("a", 1000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 0, 1, 2).unwrap().unwrap_err();
    assert_eq!(
        e.record_commit(0, AttemptId(3), &[stat(0, 10)], &[])
            .replaced,
        None
    );
    // Same generation (stage attempt 0), other task attempt: rejected.
    assert_eq!(
        e.commit_precheck(0, AttemptId(4)),
        Some((CommitStatus::Rejected, AttemptId(3)))
    );
    // Stage attempt 1 replaces it, and its figures replace the old ones.
    let gen1 = AttemptId(1 << 16);
    assert_eq!(e.commit_precheck(0, gen1), None);
    assert_eq!(
        e.record_commit(0, gen1, &[stat(1, 7)], &[]).replaced,
        Some(AttemptId(3))
    );
    let p = e.lock();
    assert_eq!(p.partition_bytes, vec![0, 7]);
    assert_eq!(p.committed, 1);
    drop(p);
    // An old-generation zombie cannot come back.
    assert_eq!(
        e.commit_precheck(0, AttemptId(5)),
        Some((CommitStatus::Rejected, gen1))
    );
}

#[test]
fn replicas_sit_on_another_worker() {
    let mut st = State::new(2);
    for i in 0..3 {
        st.register_worker(&format!("w{i}"), 1 << 30, 1, Instant::now());
    }
    st.register_app("a", 1000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 0, 1, 9).unwrap().unwrap_err();
    let p = e.lock();
    for i in 0..9 {
        assert_ne!(p.replica[i], NO_WORKER);
        assert_ne!(p.replica[i], p.primary[i]);
    }
    for w in 0..3 {
        assert_eq!(p.copies_of(w).len(), 6, "3 primaries and 3 replicas each");
    }
}

#[test]
fn one_worker_means_no_replica() {
    let mut st = State::new(2);
    st.register_worker("w0", 1 << 30, 1, Instant::now());
    st.register_app("a", 1000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 0, 1, 2).unwrap().unwrap_err();
    assert_eq!(e.lock().replica, vec![NO_WORKER, NO_WORKER]);
}

#[test]
fn losing_a_primary_promotes_its_replica_and_revokes_nothing() {
    let mut st = State::new(2);
    for i in 0..3 {
        st.register_worker(&format!("w{i}"), 1 << 30, 1, Instant::now());
    }
    st.register_app("a", 1000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 0, 2, 3).unwrap().unwrap_err();
    let e = st.record_shuffle("a", 0, e).unwrap();
    e.record_commit(0, AttemptId(0), &[stat(0, 5), stat(1, 5), stat(2, 5)], &[]);
    let (primary, replica) = {
        let p = e.lock();
        (p.primary.clone(), p.replica.clone())
    };
    let victim = primary[0];
    st.mark_lost(victim);
    let r = st.relocate("a", 0, &e, victim, &BTreeSet::new());
    assert!(r.lost.is_empty());
    assert_eq!(r.lost.len(), 0);
    let p = e.lock();
    assert_eq!(p.primary[0], replica[0], "the replica took over");
    assert!(!p.primary.contains(&victim) && !p.replica.contains(&victim));
    assert_eq!(p.committed, 1);
}

#[test]
fn losing_the_only_copy_replaces_the_partition_and_revokes_its_maps() {
    let mut st = state_with_workers(2);
    st.register_app("a", 1000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 0, 3, 2).unwrap().unwrap_err();
    let e = st.record_shuffle("a", 0, e).unwrap();
    let victim = e.lock().primary[0];
    let survivor = 1 - victim;
    e.record_commit(0, AttemptId(0), &[stat(0, 5)], &[]);
    e.record_commit(1, AttemptId(0), &[stat(1, 5)], &[]);
    e.record_commit(2, AttemptId(0), &[stat(0, 1), stat(1, 1)], &[]);
    st.mark_lost(victim);
    let r = st.relocate("a", 0, &e, victim, &BTreeSet::new());
    assert_eq!(e.lock().revoke_maps_touching(&r.lost), vec![0, 2]);
    assert_eq!(r.lost.len(), 1);
    assert_eq!(
        r.prepares.len(),
        1,
        "the survivor creates the moved partition"
    );
    let p = e.lock();
    assert_eq!(p.primary, vec![survivor, survivor]);
    assert_eq!(
        p.map_attempts,
        vec![AttemptId::NONE, AttemptId(0), AttemptId::NONE]
    );
    assert_eq!(p.partition_bytes, vec![0, 5]);
    assert_eq!(p.committed, 1);
}

fn run(partition: u32, batch_seq: u32) -> RunStart {
    RunStart {
        partition,
        batch_seq,
    }
}

#[test]
fn run_starts_are_kept_per_committed_attempt_and_listed_for_the_partitions_asked() {
    let mut st = state_with_workers(2);
    st.register_app("a", 5000, Instant::now()).unwrap();
    let e = st.plan_shuffle("a", 1, 3, 4).unwrap().unwrap_err();
    let e = st.record_shuffle("a", 1, e).unwrap();
    let runs_of = |st: &State, asked: std::ops::Range<u32>| match st.status(&e, asked) {
        Message::ShuffleStatus {
            run_count,
            run_starts,
            ..
        } => (
            run_count.value(),
            run_starts
                .0
                .unwrap()
                .iter()
                .map(|r| (r.partition, r.map_id, r.batch_seq))
                .collect::<Vec<_>>(),
        ),
        m => panic!("{m:?}"),
    };
    e.record_commit(
        2,
        AttemptId(0),
        &[stat(1, 9), stat(3, 9)],
        &[run(1, 4), run(3, 2), run(3, 7)],
    );
    e.record_commit(0, AttemptId(0), &[stat(1, 9)], &[run(1, 1)]);
    e.record_commit(1, AttemptId(0), &[stat(1, 9)], &[]);
    assert_eq!(runs_of(&st, 1..2), (4, vec![(1, 0, 1), (1, 2, 4)]));
    assert_eq!(runs_of(&st, 2..4), (4, vec![(3, 2, 2), (3, 2, 7)]));
    assert_eq!(runs_of(&st, 0..0), (4, vec![]), "none asked, none listed");
    // A later attempt that replaces the commit replaces its runs; a revoked map has none.
    e.record_commit(2, AttemptId(1), &[stat(1, 9)], &[]);
    assert_eq!(runs_of(&st, 0..4), (1, vec![(1, 0, 1)]));
    e.lock().revoke(&[0]);
    assert_eq!(runs_of(&st, 0..4), (0, vec![]));
    // A split's runs are listed with its partition's.
    let slot = e.lock().add_split(1, 0, NO_WORKER);
    e.record_commit(0, AttemptId(0), &[stat(slot, 9)], &[run(slot, 3)]);
    assert_eq!(runs_of(&st, 1..2), (1, vec![(slot, 0, 3)]));
    assert_eq!(runs_of(&st, 2..3), (1, vec![]));
}

#[test]
fn run_starts_that_could_not_be_read_are_refused() {
    let stats = [stat(1, 9), stat(2, 0)];
    assert_eq!(invalid_runs(&stats, &[run(1, 1), run(1, 5)]), None);
    assert_eq!(invalid_runs(&stats, &[]), None);
    for (runs, want) in [
        (vec![run(1, 0)], "begins at batch 0"),
        (vec![run(1, 5), run(1, 5)], "is not after"),
        (vec![run(1, 5), run(1, 2)], "is not after"),
        (vec![run(2, 1)], "reports no bytes"),
        (vec![run(7, 1)], "reports no bytes"),
    ] {
        let why = invalid_runs(&stats, &runs).expect("refused");
        assert!(why.contains(want), "{runs:?}: {why}");
    }
    // Stats in any order: a map of many partitions, listed backwards, with three further
    // runs of every partition but the empty last one.
    let many: Vec<PartitionStat> = (0..2000u32)
        .rev()
        .map(|p| stat(p, u64::from(p < 1999)))
        .collect();
    let runs: Vec<RunStart> = (0..1999u32)
        .flat_map(|p| (1..4).map(move |k| run(p, k * 10)))
        .collect();
    assert_eq!(invalid_runs(&many, &runs), None);
    let why = invalid_runs(&many, &[run(1999, 1)]).expect("the empty partition has no runs");
    assert!(why.contains("partition 1999"), "{why}");
}

#[test]
fn a_snapshot_replays_to_the_same_state() {
    let mut st = State::new(2);
    for i in 0..3 {
        st.register_worker(&format!("w{i}"), 1 << 30, 10 + i as u64, Instant::now());
    }
    st.register_app("a", 5000, Instant::now()).unwrap();
    let limits = crate::app_limits::AppLimits {
        stored_quota: 1 << 30,
        memory_share_ppm: 250_000,
    };
    st.set_app_limits("a", limits);
    let e = st.plan_shuffle("a", 4, 3, 5).unwrap().unwrap_err();
    let e = st.record_shuffle("a", 4, e).unwrap();
    e.record_commit(0, AttemptId(2), &[stat(1, 10), stat(4, 3)], &[run(4, 2)]);
    e.record_commit(2, AttemptId(0), &[stat(0, 1)], &[]);
    let mut restored = State::new(2);
    for r in st.snapshot() {
        restored.apply(r, Instant::now());
    }
    assert_eq!(restored.snapshot(), st.snapshot());
    // The limits the app asked for survive, and go to the workers with every placement.
    assert_eq!(restored.apps.limits("a"), limits);
    let (a, b) = (
        st.status(&e, 0..5),
        restored.status(&restored.shuffle("a", 4).unwrap(), 0..5),
    );
    assert_eq!(a, b);
    let Message::ShuffleStatus { run_starts, .. } = b else {
        panic!("{b:?}")
    };
    assert_eq!(run_starts.0.unwrap().len(), 1, "the run start is replayed");
    assert_eq!(restored.worker(2).unwrap().incarnation, 12);
    // Replaying a revocation and a later registration of a worker id.
    restored.apply(
        Record::Revoke {
            app_id: "a".into(),
            shuffle_id: 4,
            maps: vec![0],
        },
        Instant::now(),
    );
    let p = restored.shuffle("a", 4).unwrap();
    assert_eq!(p.lock().committed, 1);
    assert_eq!(p.lock().partition_bytes, vec![1, 0, 0, 0, 0]);
    assert_eq!(restored.register_worker("new", 1, 1, Instant::now()).0, 3);
}

#[test]
fn leases_expire() {
    let mut st = State::default();
    st.register_app("a", 1, Instant::now() - Duration::from_secs(1))
        .unwrap();
    st.register_app("b", 60_000, Instant::now()).unwrap();
    assert_eq!(st.take_expired_apps(), vec!["a".to_string()]);
    assert!(st.has_app("b"));
}

/// Copies per worker counted afresh over every shuffle.
fn recount(st: &State) -> std::collections::HashMap<u32, u64> {
    let mut out = std::collections::HashMap::new();
    for (_, _, s) in st.apps.all_shuffles() {
        for (w, n) in s.lock().copies_per_worker() {
            *out.entry(w).or_default() += n;
        }
    }
    out
}

#[test]
fn the_tally_of_placed_copies_follows_every_change_of_layout() {
    let mut st = State::new(2);
    for i in 0..3 {
        st.register_worker(&format!("w{i}"), 1 << 30, 1, Instant::now());
    }
    for app in ["a", "b"] {
        st.register_app(app, 60_000, Instant::now()).unwrap();
        for id in 0..4 {
            let e = st.plan_shuffle(app, id, 2, 5 + id).unwrap().unwrap_err();
            st.record_shuffle(app, id, e).unwrap();
            assert_eq!(st.apps.placed(), recount(&st));
        }
    }
    assert_eq!(
        st.apps.placed().values().sum::<u64>(),
        2 * 2 * (5 + 6 + 7 + 8)
    );
    // A worker lost: its copies move (replicas promoted, none re-placed on it).
    st.mark_lost(1);
    for (app, id, e) in st.shuffles_on(1) {
        st.relocate(&app, id, &e, 1, &BTreeSet::new());
        assert_eq!(st.apps.placed(), recount(&st));
    }
    assert!(!st.apps.placed().contains_key(&1));
    // A corrupt copy moved off one worker.
    let e = st.shuffle("a", 0).unwrap();
    let holder = e.lock().primary[0];
    st.relocate_one("a", 0, &e, holder, 0);
    assert_eq!(st.apps.placed(), recount(&st));
    // Replay of a layout, removal of a shuffle, of an app, expiry.
    let (primary, replica) = st.shuffle("b", 1).unwrap().lock().layout();
    st.apply(
        Record::Layout {
            app_id: "b".into(),
            shuffle_id: 1,
            primary: primary.iter().map(|_| 0).collect(),
            replica: replica.iter().map(|_| NO_WORKER).collect(),
        },
        Instant::now(),
    );
    assert_eq!(st.apps.placed(), recount(&st));
    st.remove_shuffle("b", 2);
    assert_eq!(st.apps.placed(), recount(&st));
    st.remove_app("a");
    assert_eq!(st.apps.placed(), recount(&st));
    st.register_app("b", 1, Instant::now() - Duration::from_secs(1))
        .unwrap();
    assert_eq!(st.take_expired_apps(), vec!["b".to_string()]);
    assert!(st.apps.placed().is_empty());
    // A snapshot replays to the same tally.
    st.register_app("c", 60_000, Instant::now()).unwrap();
    let e = st.plan_shuffle("c", 0, 1, 9).unwrap().unwrap_err();
    st.record_shuffle("c", 0, e).unwrap();
    let mut restored = State::new(2);
    for r in st.snapshot() {
        restored.apply(r, Instant::now());
    }
    assert_eq!(restored.apps.placed(), st.apps.placed());
}

#[test]
fn registrations_beyond_a_quota_are_refused_naming_it() {
    let mut st = state_with_workers(1);
    st.set_quotas(crate::coordinator::config::Quotas {
        max_apps: 2,
        max_shuffles_per_app: 2,
        max_partitions: 100,
        max_maps: 50,
        max_lease: Duration::from_secs(60),
    });
    let now = Instant::now();
    let refused = |e: StateError, setting: &str| {
        assert_eq!(e.code(), ErrorCode::LimitExceeded);
        assert!(e.to_string().contains(setting), "{e}");
    };
    refused(st.register_app("a", 60_001, now).unwrap_err(), "max_lease");
    st.register_app("a", 60_000, now).unwrap();
    st.register_app("b", 1000, now).unwrap();
    refused(st.register_app("c", 1000, now).unwrap_err(), "max_apps");
    st.register_app("a", 1000, now).unwrap(); // a renewal is not a new app
    refused(
        st.plan_shuffle("a", 0, 1, 101).unwrap_err(),
        "max_partitions",
    );
    refused(st.plan_shuffle("a", 0, 51, 1).unwrap_err(), "max_maps");
    for id in 0..2 {
        let e = st.plan_shuffle("a", id, 50, 100).unwrap().unwrap_err();
        st.record_shuffle("a", id, e).unwrap();
    }
    refused(
        st.plan_shuffle("a", 2, 1, 1).unwrap_err(),
        "max_shuffles_per_app",
    );
    assert!(
        st.plan_shuffle("a", 1, 50, 100).unwrap().is_ok(),
        "re-registering is fine"
    );
    st.remove_shuffle("a", 0);
    assert!(st.plan_shuffle("a", 2, 1, 1).is_ok());
}

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
