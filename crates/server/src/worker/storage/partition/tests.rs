use super::*;

/// (map, seq) of what a fetch of maps [0, 8) with `run_bytes` reads after `resume`.
fn kept(p: &Partition, resume: Option<ResumePoint>, run_bytes: u64) -> Vec<(u32, u32)> {
    cut(
        p,
        resume,
        RunCut {
            bytes: run_bytes,
            ..RunCut::default()
        },
    )
}

/// (map, seq) of what a fetch of maps [0, 8) cut by `cut` reads after `resume`.
fn cut(p: &Partition, resume: Option<ResumePoint>, cut: RunCut) -> Vec<(u32, u32)> {
    let v = p
        .read_view(0, 8, |_| Some(AttemptId(0)), resume, cut)
        .unwrap();
    v.pieces.iter().map(|x| (x.map_id, x.seq)).collect()
}

#[test]
fn a_run_of_several_ends_where_the_next_begins() {
    let p = part();
    let data = |n: usize| Bytes::from(vec![7u8; n]);
    // Map 2 pushed three runs: batches 0-1, 2-4 and 5.
    for seq in 0..6 {
        p.insert(2, AttemptId(0), seq, 0, data(10));
    }
    let run = |start: u32, end_seq: u32, bytes: u64| {
        let resume = (start > 0).then(|| ResumePoint {
            map_id: 2,
            batch_seq: start - 1,
        });
        let c = RunCut {
            bytes,
            end_seq,
            attempt: None,
        };
        cut(&p, resume, c)
    };
    assert_eq!(run(0, 2, 0), vec![(2, 0), (2, 1)]);
    assert_eq!(run(2, 5, 0), vec![(2, 2), (2, 3), (2, 4)]);
    assert_eq!(
        run(5, 0, 0),
        vec![(2, 5)],
        "the last run goes to the map's end"
    );
    // With a segment cap too: whichever comes first.
    assert_eq!(run(2, 5, 15), vec![(2, 2), (2, 3)]);
    assert_eq!(run(2, 4, 100), vec![(2, 2), (2, 3)]);
    // A segment asked after the run's last batch is empty: the run is read.
    assert_eq!(run(5, 5, 0), vec![]);
}

#[test]
fn each_run_is_cut_after_the_batch_that_reaches_run_bytes() {
    let p = part();
    let data = |n: usize| Bytes::from(vec![7u8; n]);
    for (map, seq, len) in [(0, 0, 40), (0, 1, 40), (0, 2, 40), (1, 0, 100), (1, 1, 1)] {
        p.insert(map, AttemptId(0), seq, 0, data(len));
    }
    p.insert(3, AttemptId(0), 0, 0, data(10));
    p.insert(3, AttemptId(0), 1, 0, data(10));
    // Map 0: 40 < 64, then 80 >= 64 stops it; map 1: its first batch alone passes the
    // cap and is still sent; map 3 is shorter than the cap and sent whole.
    assert_eq!(
        kept(&p, None, 64),
        vec![(0, 0), (0, 1), (1, 0), (3, 0), (3, 1)]
    );
    // The cap counts from the resume point.
    let after = Some(ResumePoint {
        map_id: 0,
        batch_seq: 0,
    });
    assert_eq!(
        kept(&p, after, 64),
        vec![(0, 1), (0, 2), (1, 0), (3, 0), (3, 1)]
    );
    // No cap, or one larger than every run: everything.
    let all = vec![(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (3, 0), (3, 1)];
    assert_eq!(kept(&p, None, 0), all);
    assert_eq!(kept(&p, None, 1 << 20), all);
}

fn part() -> Partition {
    Partition::new(0, "app".into(), 0, PathBuf::from("/nonexistent"))
}

#[test]
fn duplicate_batches_are_dropped() {
    let p = part();
    assert_eq!(
        p.insert(1, AttemptId(0), 0, 0, Bytes::from_static(b"ab")),
        Insert::Stored
    );
    assert_eq!(
        p.insert(1, AttemptId(0), 0, 0, Bytes::from_static(b"ab")),
        Insert::Duplicate
    );
    assert_eq!(p.attempt_bytes(1, AttemptId(0)), 2);
    assert_eq!(p.mem_bytes(), 2);
}

#[test]
fn snapshot_keeps_committed_attempts_in_map_seq_order() {
    let p = part();
    p.insert(2, AttemptId(0), 1, 0, Bytes::from_static(b"2-0-1"));
    p.insert(0, AttemptId(5), 0, 0, Bytes::from_static(b"0-5-0"));
    p.insert(2, AttemptId(0), 0, 0, Bytes::from_static(b"2-0-0"));
    p.insert(2, AttemptId(1), 0, 0, Bytes::from_static(b"2-1-0"));
    p.insert(1, AttemptId(0), 0, 0, Bytes::from_static(b"1-0-0"));
    let committed = |m: u32| match m {
        0 => Some(AttemptId(5)),
        1 => Some(AttemptId(0)),
        2 => Some(AttemptId(0)),
        _ => None,
    };
    let names: Vec<_> = p
        .snapshot(0, 3, committed, None)
        .into_iter()
        .map(|x| (x.map_id, x.attempt_id.0, x.seq))
        .collect();
    assert_eq!(names, vec![(0, 5, 0), (1, 0, 0), (2, 0, 0), (2, 0, 1)]);
    let range: Vec<_> = p
        .snapshot(1, 2, committed, None)
        .into_iter()
        .map(|x| x.map_id)
        .collect();
    assert_eq!(range, vec![1]);
    let resumed: Vec<_> = p
        .snapshot(
            0,
            3,
            committed,
            Some(ResumePoint {
                map_id: 2,
                batch_seq: 0,
            }),
        )
        .into_iter()
        .map(|x| (x.map_id, x.seq))
        .collect();
    assert_eq!(resumed, vec![(2, 1)]);
}

#[test]
fn flush_sorts_records_and_moves_them_to_disk() {
    let p = part();
    p.insert(3, AttemptId(0), 0, 7, Bytes::from_static(b"ccc"));
    p.insert(1, AttemptId(0), 0, 9, Bytes::from_static(b"a"));
    let job = p.take_flush(u64::MAX).unwrap();
    assert_eq!(job.offset, 0);
    assert_eq!(job.records[0].0, 1, "map 1 is written before map 3");
    assert_eq!(job.records[1].3, (RECORD_HEADER + 1) as u64);
    assert_eq!(job.file_bytes, (2 * RECORD_HEADER + 4) as u64);
    let dir = tempfile::tempdir().unwrap();
    let mut f = std::fs::File::create(dir.path().join("p.data")).unwrap();
    job.write_to(&mut f).unwrap();
    let written = std::fs::read(dir.path().join("p.data")).unwrap();
    assert_eq!(written.len(), 2 * RECORD_HEADER + 4);
    assert_eq!(&written[RECORD_HEADER..RECORD_HEADER + 1], b"a");
    assert_eq!(&written[2 * RECORD_HEADER + 1..], b"ccc");
    assert!(p.take_flush(u64::MAX).is_none(), "nothing left to flush");
    assert_eq!(p.complete_flush(&job), Some(4));
    assert_eq!(p.lock().file_written, (2 * RECORD_HEADER + 4) as u64);
    assert_eq!(p.mem_bytes(), 0);
    let pieces = p.snapshot(0, 4, |_| Some(AttemptId(0)), None);
    assert!(matches!(pieces[1].source, Source::File(o) if o == (RECORD_HEADER + 1) as u64));
}

#[test]
fn delete_releases_memory_and_stops_inserts() {
    let p = part();
    p.insert(0, AttemptId(0), 0, 0, Bytes::from_static(b"xyz"));
    let job = p.take_flush(u64::MAX).unwrap();
    assert_eq!(p.delete(), (3, 0));
    assert_eq!(
        p.complete_flush(&job),
        None,
        "deletion already released the bytes"
    );
    assert_eq!(
        p.insert(0, AttemptId(0), 1, 0, Bytes::from_static(b"x")),
        Insert::Deleted
    );
}
