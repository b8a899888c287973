//! One shuffle as the coordinator knows it: where its partitions live, which attempt of
//! each map counts, and what the committed maps wrote.

use std::collections::BTreeSet;
use std::sync::Mutex;

use crossdock_proto::{AttemptId, CommitStatus, Message, PartitionStat, NO_WORKER};

/// Where a shuffle's partitions live and which map attempts count.
#[derive(Debug)]
pub struct Progress {
    /// Committed attempt per map, [`AttemptId::NONE`] if none.
    pub(super) map_attempts: Vec<AttemptId>,
    /// The committed attempt's per-partition figures, per map (partitions with data
    /// only): what to subtract when the commit is replaced or revoked.
    pub(super) map_stats: Vec<Vec<PartitionStat>>,
    pub(super) committed: u32,
    pub(super) partition_bytes: Vec<u64>,
    pub(super) partition_records: Vec<u64>,
    /// Primary worker per partition.
    pub(super) primary: Vec<u32>,
    /// Replica worker per partition, [`NO_WORKER`] where there is none.
    pub(super) replica: Vec<u32>,
}

impl Progress {
    /// The partitions `worker` holds a copy of (as primary or replica).
    pub fn copies_of(&self, worker: u32) -> Vec<u32> {
        (0..self.primary.len() as u32)
            .filter(|&p| self.holds(p, worker))
            .collect()
    }

    /// True if `worker` holds a copy of partition `p`.
    pub fn holds(&self, p: u32, worker: u32) -> bool {
        let i = p as usize;
        i < self.primary.len() && (self.primary[i] == worker || self.replica[i] == worker)
    }

    /// The primary and the replica (or [`NO_WORKER`]) of partition `p`.
    pub fn copies(&self, p: u32) -> (u32, u32) {
        (self.primary[p as usize], self.replica[p as usize])
    }

    /// Partition `p` goes on with its primary alone.
    pub fn drop_replica(&mut self, p: u32) {
        self.replica[p as usize] = NO_WORKER;
    }

    /// (primary per partition, replica per partition).
    pub fn layout(&self) -> (Vec<u32>, Vec<u32>) {
        (self.primary.clone(), self.replica.clone())
    }

    /// The committed attempt of every map.
    pub fn map_attempts(&self) -> &[AttemptId] {
        &self.map_attempts
    }

    /// The workers holding any copy, in id order.
    pub fn holders(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .primary
            .iter()
            .chain(self.replica.iter())
            .copied()
            .filter(|&w| w != NO_WORKER)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    fn subtract(&mut self, map: u32) {
        for s in std::mem::take(&mut self.map_stats[map as usize]) {
            self.partition_bytes[s.partition as usize] -= s.bytes;
            self.partition_records[s.partition as usize] -= s.records;
        }
    }

    fn uncommit(&mut self, m: u32) {
        self.subtract(m);
        self.map_attempts[m as usize] = AttemptId::NONE;
        self.committed -= 1;
    }

    /// Revokes the commits of `maps` (those still committed).
    pub fn revoke(&mut self, maps: &[u32]) {
        for &m in maps {
            if self
                .map_attempts
                .get(m as usize)
                .is_some_and(|a| !a.is_none())
            {
                self.uncommit(m);
            }
        }
    }

    /// Revokes the commit of every map that wrote into one of `lost`. Returns them.
    pub fn revoke_maps_touching(&mut self, lost: &BTreeSet<u32>) -> Vec<u32> {
        let maps: Vec<u32> = (0..self.map_attempts.len() as u32)
            .filter(|&m| {
                !self.map_attempts[m as usize].is_none()
                    && self.map_stats[m as usize]
                        .iter()
                        .any(|s| lost.contains(&s.partition))
            })
            .collect();
        for &m in &maps {
            self.uncommit(m);
        }
        maps
    }

    /// The `CheckCopies` asking a worker which of `parts` it holds whole under the
    /// commits as they stand (restoring them from the object store first with `adopt`).
    pub fn copy_check(
        &self,
        app_id: &str,
        shuffle_id: u32,
        parts: Vec<u32>,
        adopt: bool,
    ) -> Message {
        Message::CheckCopies {
            app_id: app_id.to_string(),
            shuffle_id,
            map_attempts: self.map_attempts.clone(),
            expected_bytes: parts
                .iter()
                .map(|&q| self.partition_bytes[q as usize])
                .collect(),
            partitions: parts,
            adopt,
        }
    }
}

/// A registered shuffle.
#[derive(Debug)]
pub struct ShuffleEntry {
    pub num_maps: u32,
    pub num_partitions: u32,
    /// Serializes commits and relocations of this shuffle.
    pub commit_lock: tokio::sync::Mutex<()>,
    progress: Mutex<Progress>,
}

impl ShuffleEntry {
    /// A shuffle with nothing committed yet, laid out as given.
    pub fn new(num_maps: u32, num_partitions: u32, primary: Vec<u32>, replica: Vec<u32>) -> Self {
        ShuffleEntry {
            num_maps,
            num_partitions,
            commit_lock: tokio::sync::Mutex::new(()),
            progress: Mutex::new(Progress {
                map_attempts: vec![AttemptId::NONE; num_maps as usize],
                map_stats: vec![Vec::new(); num_maps as usize],
                committed: 0,
                partition_bytes: vec![0; num_partitions as usize],
                partition_records: vec![0; num_partitions as usize],
                primary,
                replica,
            }),
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().expect("shuffle lock poisoned")
    }

    /// The partitions `worker` holds a copy of.
    pub fn partitions_of(&self, worker: u32) -> Vec<u32> {
        self.lock().copies_of(worker)
    }

    /// How a commit of `attempt` of `map` relates to what is already committed: `None`
    /// if it may proceed. Within a generation the first commit wins; a commit of a
    /// later generation (a rerun of the stage) replaces the earlier one, so a rerun
    /// indeterminate stage never mixes its outputs with the old ones.
    pub fn commit_precheck(
        &self,
        map: u32,
        attempt: AttemptId,
    ) -> Option<(CommitStatus, AttemptId)> {
        let winner = self.lock().map_attempts[map as usize];
        if winner.is_none() || attempt.generation() > winner.generation() {
            None
        } else if winner == attempt {
            Some((CommitStatus::AlreadyCommitted, winner))
        } else {
            Some((CommitStatus::Rejected, winner))
        }
    }

    /// Records a commit the workers accepted. Returns the attempt it replaced, if any.
    pub fn record_commit(
        &self,
        map: u32,
        attempt: AttemptId,
        stats: &[PartitionStat],
    ) -> Option<AttemptId> {
        let mut p = self.lock();
        let previous = p.map_attempts[map as usize];
        if previous.is_none() {
            p.committed += 1;
        } else {
            p.subtract(map);
        }
        p.map_attempts[map as usize] = attempt;
        let kept: Vec<PartitionStat> = stats
            .iter()
            .filter(|s| s.bytes > 0 || s.records > 0)
            .cloned()
            .collect();
        for s in &kept {
            p.partition_bytes[s.partition as usize] += s.bytes;
            p.partition_records[s.partition as usize] += s.records;
        }
        p.map_stats[map as usize] = kept;
        previous.some()
    }
}
