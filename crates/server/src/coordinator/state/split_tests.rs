//! Tests of partition splits in the coordinator's state: where a split goes, how its
//! figures count, and that the journal brings it back.

use super::tests::stat;
use super::*;
use crate::coordinator::journal::Record;
use crossdock_proto::{AttemptId, Message, NO_WORKER};

/// Three workers of 1 GiB, worker `i` holding `i × 100 MiB` in memory, and app `a`'s
/// shuffle 0 of 2 maps and 2 partitions.
fn splittable(replication: u32) -> (State, Arc<ShuffleEntry>) {
    let mut st = State::new(replication);
    let now = Instant::now();
    for i in 0..3u32 {
        st.register_worker(&format!("w{i}:1"), 1 << 30, 1, now);
        let load = Load {
            buffered: u64::from(i) * (100 << 20),
            ..Load::default()
        };
        st.heartbeat(i, load, false, now).unwrap();
    }
    st.register_app("a", 60_000, now).unwrap();
    let e = st.plan_shuffle("a", 0, 2, 2).unwrap().unwrap_err();
    let e = st.record_shuffle("a", 0, e).unwrap();
    (st, e)
}

#[test]
fn a_split_goes_where_the_partition_is_not_and_memory_is_freest() {
    let (st, e) = splittable(1);
    let holder = e.lock().copies(1).0;
    let (to, replica) = st.placer().split_target(&e.lock(), 1).unwrap();
    assert_ne!(to, holder, "never onto the worker that asks");
    let freest = (0..3).find(|&w| w != holder).unwrap();
    assert_eq!(to, freest, "the peer with the most free memory");
    assert_eq!(replica, NO_WORKER, "replication 1");

    let mut p = e.lock();
    let s2 = p.add_split(1, to, replica);
    assert_eq!((s2, p.slots()), (2, 3));
    // A split of the split belongs to the same partition, and avoids both holders when
    // a third worker is left.
    let (to3, _) = st.placer().split_target(&p, 2).unwrap();
    assert!(to3 != to && to3 != holder);
    let s3 = p.add_split(2, to3, NO_WORKER);
    assert_eq!(
        (p.split_of(1), p.split_of(2), p.split_of(0)),
        (Some(2), Some(3), None)
    );
    assert_eq!((p.partition_of(s3), p.partition_of(0)), (1, 0));
    assert_eq!(p.split_parents(), vec![1, 1]);
    drop(p);

    // Figures count per slot on the wire and fold into the partition for predictions.
    e.record_commit(
        0,
        AttemptId(0),
        &[stat(0, 5), stat(1, 10), stat(2, 20), stat(3, 40)],
        &[],
    );
    let p = e.lock();
    assert_eq!(p.partition_bytes(), &[5, 10, 20, 40]);
    assert_eq!(p.logical_bytes(), vec![5, 70]);
    drop(p);
    let Message::ShuffleStatus {
        partition_workers,
        split_parents,
        ..
    } = st.status(&e, 0..0)
    else {
        panic!("a status")
    };
    assert_eq!(partition_workers.len(), 4, "every slot is listed");
    assert_eq!(split_parents.0, Some(vec![1, 1]));
}

#[test]
fn with_replication_the_split_gets_a_replica_on_another_worker() {
    let (st, e) = splittable(2);
    let (to, replica) = st.placer().split_target(&e.lock(), 0).unwrap();
    assert_ne!(replica, NO_WORKER);
    assert_ne!(replica, to);
    let (p0, r0) = e.lock().copies(0);
    assert!(
        to != p0 && to != r0,
        "not onto a copy of the slot it continues"
    );
}

#[test]
fn the_placement_of_a_split_shuffle_lists_its_partitions_only() {
    // A new registration of the shuffle, and a partner shuffle copying its layout, must
    // get one entry per partition.
    let (st, e) = splittable(1);
    e.lock().add_split(1, 2, NO_WORKER);
    let Message::ShufflePlacement {
        partition_workers,
        partition_replicas,
        ..
    } = st.placement(&e)
    else {
        panic!("a placement")
    };
    assert_eq!((partition_workers.len(), partition_replicas.len()), (2, 2));
    assert_eq!(e.lock().partition_layout().0.len(), 2);
}

#[test]
fn a_split_taken_back_leaves_the_layout_as_it_was() {
    let (_, e) = splittable(1);
    let mut p = e.lock();
    let before = (p.layout(), p.partition_bytes().to_vec());
    p.add_split(0, 2, NO_WORKER);
    p.drop_last_split();
    assert_eq!((p.layout(), p.partition_bytes().to_vec()), before);
    assert_eq!(p.split_of(0), None);
}

#[test]
fn splits_come_back_from_a_snapshot_and_from_the_log() {
    let (st, e) = splittable(2);
    {
        let mut p = e.lock();
        p.add_split(1, 0, 2);
        p.add_split(2, 2, 1);
    }
    e.record_commit(1, AttemptId(3), &[stat(1, 7), stat(3, 9)], &[]);
    let mut restored = State::new(2);
    for r in st.snapshot() {
        restored.apply(r, Instant::now());
    }
    assert_eq!(restored.snapshot(), st.snapshot());
    let again = restored.shuffle("a", 0).unwrap();
    assert_eq!(restored.status(&again, 0..0), st.status(&e, 0..0));

    // From the log: the split record comes before the commits that use it.
    let mut logged = State::new(2);
    let now = Instant::now();
    for r in st
        .snapshot()
        .into_iter()
        .filter(|r| !matches!(r, Record::Split { .. } | Record::Commit { .. }))
    {
        logged.apply(r, now);
    }
    let split = |slot, from, primary| Record::Split {
        app_id: "a".into(),
        shuffle_id: 0,
        slot,
        from,
        primary,
        replica: NO_WORKER,
    };
    let commit = Record::Commit {
        app_id: "a".into(),
        shuffle_id: 0,
        map_id: 0,
        attempt_id: AttemptId(0),
        stats: vec![stat(2, 4)],
        run_starts: Default::default(),
    };
    logged.apply(commit.clone(), now);
    let s = logged.shuffle("a", 0).unwrap();
    assert_eq!(
        s.lock().committed(),
        0,
        "a commit naming an unknown slot is skipped"
    );
    logged.apply(split(3, 1, 0), now);
    assert_eq!(s.lock().slots(), 2, "a split is the next slot or none");
    logged.apply(split(2, 1, 0), now);
    logged.apply(split(3, 1, 2), now);
    assert_eq!(s.lock().slots(), 3, "a slot is split once");
    logged.apply(commit, now);
    assert_eq!(s.lock().partition_bytes(), &[0, 0, 4]);
}
