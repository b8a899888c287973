//! Tests of the coordinator's state transitions.

use super::*;
use crate::error::Coded;
use crossdock_proto::{AttemptId, CommitStatus, ErrorCode, PartitionStat, RunStart, NO_WORKER};

pub(super) fn state_with_workers(n: u32) -> State {
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

pub(super) fn stat(partition: u32, bytes: u64) -> PartitionStat {
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
