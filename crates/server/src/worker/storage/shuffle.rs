//! One shuffle as a worker holds it: the partitions placed here and which attempt of
//! each map counts.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use crossdock_proto::{AttemptId, PartitionBytes, NO_SLOT};

use super::error::StorageError;
use super::layout::{partition_file, ShuffleMeta};
use super::partition::Partition;

/// A shuffle on this worker.
pub struct Shuffle {
    pub app_id: String,
    pub shuffle_id: u32,
    pub num_maps: u32,
    pub num_partitions: u32,
    /// The shuffle's directory in each of the worker's data directories; partition `p`
    /// lives in `dirs[p % dirs.len()]`.
    pub dirs: Vec<PathBuf>,
    partitions: RwLock<HashMap<u32, Arc<Partition>>>,
    /// Committed attempt per map (its raw id), [`AttemptId::NONE`] until the
    /// coordinator says otherwise.
    committed: Vec<AtomicU32>,
    /// How many entries of `committed` hold an attempt (kept beside it, so that the
    /// scheduler's every-100-ms look at each shuffle does not walk every map).
    committed_maps: AtomicU32,
    /// When this worker learnt of the shuffle (the start of its map stage here).
    pub created: Instant,
    /// Payload bytes stored here from its pushes (both copies count where they are held).
    pub accepted: AtomicU64,
    /// Payload bytes of it sent to readers.
    pub fetched: AtomicU64,
}

impl Shuffle {
    /// A shuffle with no partitions and nothing committed.
    pub fn new(meta: &ShuffleMeta, dirs: Vec<PathBuf>) -> Shuffle {
        Shuffle {
            app_id: meta.app_id.clone(),
            shuffle_id: meta.shuffle_id,
            num_maps: meta.num_maps,
            num_partitions: meta.num_partitions,
            dirs,
            partitions: RwLock::new(HashMap::new()),
            committed: (0..meta.num_maps)
                .map(|_| AtomicU32::new(AttemptId::NONE.0))
                .collect(),
            committed_maps: AtomicU32::new(0),
            created: Instant::now(),
            accepted: AtomicU64::new(0),
            fetched: AtomicU64::new(0),
        }
    }

    /// The committed attempt of `map`.
    pub fn committed(&self, map: u32) -> Option<AttemptId> {
        let slot = self.committed.get(map as usize)?;
        AttemptId(slot.load(Ordering::Acquire)).some()
    }

    /// How many maps have committed.
    pub fn committed_count(&self) -> u32 {
        self.committed_maps.load(Ordering::Relaxed)
    }

    /// The shuffle's remaining work on this worker, the Fair Completion Scheduler's input
    /// (Wang 2014, Section 4.3) from what the coordinator told this worker: its map count
    /// and each map's commit. `T_rs`: the maps left take as many more waves of the time
    /// the committed ones took (the time since the shuffle began here; before the first
    /// commit, that time counts as one wave, a lower bound). `R_left`: the bytes held here
    /// not yet read, plus the maps left times the bytes per committed map so far.
    pub fn remaining_work(&self) -> crossdock_policy::fair_completion::RemainingWork {
        let committed = self.committed_count();
        let maps_left = self.num_maps.saturating_sub(committed) as u64;
        let accepted = self.accepted.load(Ordering::Relaxed);
        let per_map = accepted / committed.max(1) as u64;
        crossdock_policy::fair_completion::remaining_work(
            &crossdock_policy::fair_completion::JobProgress {
                maps_left,
                maps_per_wave: committed.max(1) as f64,
                avg_map_secs: self.created.elapsed().as_secs_f64(),
                reduce_total: accepted.saturating_add(maps_left.saturating_mul(per_map)),
                reduce_done: self.fetched.load(Ordering::Relaxed),
            },
        )
    }

    /// True if any map has committed.
    pub fn has_commits(&self) -> bool {
        (0..self.num_maps).any(|m| self.committed(m).is_some())
    }

    /// The first map in `[start, end)` that has not committed, and how many have not.
    pub fn first_uncommitted(&self, start: u32, end: u32) -> Option<(u32, u32)> {
        let missing: Vec<u32> = (start..end)
            .filter(|&m| self.committed(m).is_none())
            .collect();
        missing.first().map(|&m| (m, missing.len() as u32))
    }

    /// Partition `p`, if it is placed here.
    pub fn partition(&self, p: u32) -> Option<Arc<Partition>> {
        self.partitions.read().expect("lock").get(&p).cloned()
    }

    /// Partition `p`, or why it is not here.
    pub fn placed(&self, p: u32) -> Result<Arc<Partition>, StorageError> {
        self.partition(p).ok_or_else(|| {
            let (app, shuffle) = (self.app_id.clone(), self.shuffle_id);
            let slots = crossdock_proto::slot_limit(self.num_partitions);
            if p >= slots {
                StorageError::PartitionOutOfRange {
                    app,
                    shuffle,
                    partition: p,
                    partitions: slots,
                }
            } else {
                StorageError::PartitionNotHere {
                    app,
                    shuffle,
                    partition: p,
                }
            }
        })
    }

    /// Every partition placed here.
    pub fn partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions
            .read()
            .expect("lock")
            .values()
            .cloned()
            .collect()
    }

    /// How many partitions are placed here.
    pub fn partition_count(&self) -> usize {
        self.partitions.read().expect("lock").len()
    }

    /// Places `partitions` here (those not here yet are created empty) and sets the
    /// replica each forwards to (`forward_to[i]`, empty for none), and the slot each
    /// continues in (`continued[i]`: a slot and its primary's address; none when absent or
    /// [`NO_SLOT`]).
    ///
    /// A partition created after maps committed here was moved from a lost worker: it
    /// holds nothing of theirs until it is restored or they are revoked, so it is not
    /// served before the coordinator checked it ([`Partition::restoring`]).
    pub fn place(&self, partitions: &[u32], forward_to: &[String], continued: &[(u32, String)]) {
        let has_commits = self.has_commits();
        let mut parts = self.partitions.write().expect("lock");
        for (i, &p) in partitions.iter().enumerate() {
            let part = parts.entry(p).or_insert_with(|| {
                let part = self.new_partition(p);
                part.restoring.store(has_commits, Ordering::Release);
                Arc::new(part)
            });
            part.set_forward(forward_to.get(i).map(String::as_str));
            if let Some((slot, addr)) = continued.get(i) {
                if *slot != NO_SLOT && !addr.is_empty() {
                    part.split.continue_in(*slot, addr);
                }
            }
        }
    }

    /// Partition `p`, created empty and servable if it is not here: a copy the coordinator
    /// found held whole while it held nothing (no committed map wrote into it, so a
    /// restart left no file of it). Created later by a `PrepareShuffle` instead, it would
    /// count as moved from a lost worker and wait for a check that never comes.
    pub fn keep(&self, p: u32) -> Arc<Partition> {
        let mut parts = self.partitions.write().expect("lock");
        parts
            .entry(p)
            .or_insert_with(|| Arc::new(self.new_partition(p)))
            .clone()
    }

    /// An empty partition `p` of this shuffle, its file in the data directory `p` falls to.
    fn new_partition(&self, p: u32) -> Partition {
        let dir = &self.dirs[p as usize % self.dirs.len()];
        let owner: Arc<str> = self.app_id.as_str().into();
        Partition::new(p, owner, self.shuffle_id, partition_file(dir, p))
    }

    /// Adds partitions rebuilt from their files after a restart.
    pub fn add_recovered(&self, recovered: HashMap<u32, Arc<Partition>>) {
        self.partitions.write().expect("lock").extend(recovered);
    }

    /// Checks that the map's range and commit state admit a push of `attempt`: a rerun
    /// of the stage (a later generation) may replace a committed map; anything else
    /// arrives too late.
    pub fn admit(&self, map: u32, attempt: AttemptId, seq: u32) -> Result<(), StorageError> {
        if map >= self.num_maps {
            return Err(StorageError::MapOutOfRange {
                map,
                maps: self.num_maps,
            });
        }
        match self.committed(map) {
            Some(a) if attempt.generation() <= a.generation() => {
                Err(StorageError::PushAfterCommit {
                    shuffle: self.shuffle_id,
                    map,
                    committed: a,
                    seq,
                    attempt,
                })
            }
            _ => Ok(()),
        }
    }

    /// Records the coordinator's decision that `attempt` is the one that counts for
    /// `map`, after checking that this worker holds exactly the bytes the map reported
    /// for the partitions placed here. [`AttemptId::NONE`] revokes an unfinished commit.
    pub fn commit(
        &self,
        map: u32,
        attempt: AttemptId,
        expected: &[PartitionBytes],
    ) -> Result<(), StorageError> {
        let slot = self
            .committed
            .get(map as usize)
            .ok_or(StorageError::MapOutOfRange {
                map,
                maps: self.num_maps,
            })?;
        if !attempt.is_none() {
            let expected: HashMap<u32, u64> =
                expected.iter().map(|p| (p.partition, p.bytes)).collect();
            for part in self.partitions() {
                let want = expected.get(&part.id).copied().unwrap_or(0);
                let have = part.attempt_bytes(map, attempt);
                if want != have {
                    return Err(StorageError::CommitMismatch {
                        map,
                        attempt,
                        partition: part.id,
                        want,
                        have,
                    });
                }
            }
        }
        let before = AttemptId(slot.swap(attempt.0, Ordering::AcqRel));
        self.count_commit(before, attempt);
        Ok(())
    }

    /// Keeps `committed_maps` right when a map's committed attempt goes from `before` to
    /// `after`.
    fn count_commit(&self, before: AttemptId, after: AttemptId) {
        match (before.is_none(), after.is_none()) {
            (true, false) => {
                self.committed_maps.fetch_add(1, Ordering::Relaxed);
            }
            (false, true) => {
                self.committed_maps.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }

    /// Takes the coordinator's view of which attempt counts for every map (after either
    /// of them restarted).
    pub fn sync_commits(&self, map_attempts: &[AttemptId]) -> Result<(), StorageError> {
        if map_attempts.len() != self.committed.len() {
            return Err(StorageError::AttemptCount {
                given: map_attempts.len(),
                maps: self.num_maps,
            });
        }
        for (slot, a) in self.committed.iter().zip(map_attempts) {
            let before = AttemptId(slot.swap(a.0, Ordering::AcqRel));
            self.count_commit(before, *a);
        }
        Ok(())
    }

    /// Which of `partitions` hold exactly `expected` bytes of the attempts in
    /// `map_attempts` (a partition not placed here holds nothing).
    pub fn held_whole(
        &self,
        map_attempts: &[AttemptId],
        partitions: &[u32],
        expected: &[u64],
    ) -> Vec<u32> {
        let mut held = Vec::new();
        for (i, &p) in partitions.iter().enumerate() {
            let want = expected.get(i).copied().unwrap_or(u64::MAX);
            let have: u64 = match self.partition(p) {
                Some(part) => map_attempts
                    .iter()
                    .enumerate()
                    .filter(|(_, a)| !a.is_none())
                    .map(|(m, &a)| part.attempt_bytes(m as u32, a))
                    .sum(),
                None if want == 0 => 0,
                None => continue,
            };
            if have == want {
                held.push(p);
            }
        }
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn shuffle(maps: u32, partitions: u32) -> Shuffle {
        let meta = ShuffleMeta {
            app_id: "a".into(),
            shuffle_id: 1,
            num_maps: maps,
            num_partitions: partitions,
        };
        Shuffle::new(&meta, vec![PathBuf::from("/nonexistent")])
    }

    #[test]
    fn placing_again_sets_where_a_split_slot_continues() {
        let s = shuffle(1, 2);
        s.place(&[0, 1], &[], &[]);
        assert_eq!(s.partition(0).unwrap().split.continues(), None);
        s.place(&[0, 1], &[], &[(4, "w:2".into()), (NO_SLOT, String::new())]);
        assert_eq!(
            s.partition(0).unwrap().split.continues(),
            Some((4, "w:2".into()))
        );
        assert_eq!(s.partition(1).unwrap().split.continues(), None);
        // Placed again without the lists (an older coordinator): the split stays.
        s.place(&[0], &[], &[]);
        assert!(s.partition(0).unwrap().split.continues().is_some());
    }

    #[test]
    fn a_commit_counts_only_with_the_reported_bytes_and_a_rerun_may_replace_it() {
        let s = shuffle(2, 2);
        s.place(&[0, 1], &[], &[]);
        let a0 = AttemptId(0);
        s.partition(0)
            .unwrap()
            .insert(0, a0, 0, 0, Bytes::from_static(b"abc"));
        let report = |bytes| {
            [PartitionBytes {
                partition: 0,
                bytes,
            }]
        };
        assert!(matches!(
            s.commit(0, a0, &report(2)),
            Err(StorageError::CommitMismatch { have: 3, .. })
        ));
        s.commit(0, a0, &report(3)).unwrap();
        assert_eq!(s.committed(0), Some(a0));
        assert_eq!(s.committed_count(), 1);
        // The same commit again does not count twice.
        s.commit(0, a0, &report(3)).unwrap();
        assert_eq!(s.committed_count(), 1);
        assert_eq!(s.first_uncommitted(0, 2), Some((1, 1)));
        assert!(matches!(
            s.admit(0, AttemptId(1), 0),
            Err(StorageError::PushAfterCommit { .. })
        ));
        s.admit(0, AttemptId::new(1, 0), 0).unwrap();
        assert!(matches!(
            s.admit(2, a0, 0),
            Err(StorageError::MapOutOfRange { .. })
        ));
        s.commit(0, AttemptId::NONE, &[]).unwrap();
        assert_eq!(s.committed(0), None, "revoked");
        assert_eq!(s.committed_count(), 0);
        s.sync_commits(&[a0, a0]).unwrap();
        assert_eq!(s.committed_count(), 2);
        s.sync_commits(&[a0, AttemptId::NONE]).unwrap();
        assert_eq!(s.committed_count(), 1);
        s.commit(0, AttemptId::NONE, &[]).unwrap();
        assert_eq!(
            s.held_whole(&[a0, AttemptId::NONE], &[0, 1], &[3, 0]),
            vec![0, 1]
        );
        // Slots past the partitions are splits, placed by the coordinator when needed.
        assert!(matches!(
            s.placed(2),
            Err(StorageError::PartitionNotHere { .. })
        ));
        assert!(matches!(
            s.placed(crossdock_proto::slot_limit(2)),
            Err(StorageError::PartitionOutOfRange { .. })
        ));
    }
}
