//! One shuffle as the coordinator knows it: where its partitions live, which attempt of
//! each map counts, what the committed maps wrote, and the prediction of its partition
//! sizes made from them.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use crossdock_proto::{
    AttemptId, CommitStatus, MapRunStart, Message, PartitionStat, RunStart, NO_WORKER,
};

use super::prediction::{Forecast, ForecastEvent, Prediction};
use crate::coordinator::config::DEFAULT_PREDICTION_THRESHOLD;

/// Why a commit's run starts cannot be recorded, if they cannot: each must name a
/// partition the commit reports bytes for and a batch after the first, and they must be
/// in increasing (partition, batch) order, so that every run holds at least one batch.
pub fn invalid_runs(stats: &[PartitionStat], runs: &[RunStart]) -> Option<String> {
    if runs.is_empty() {
        return None;
    }
    // The partitions with bytes, sorted once: a map of thousands of partitions with
    // several runs each is checked in O((stats + runs) · log stats), not stats × runs.
    let mut with_bytes: Vec<u32> = stats
        .iter()
        .filter(|s| s.bytes > 0)
        .map(|s| s.partition)
        .collect();
    with_bytes.sort_unstable();
    for (i, r) in runs.iter().enumerate() {
        if r.batch_seq == 0 {
            return Some(format!(
                "a further run of partition {} begins at batch 0 (the first run always does)",
                r.partition
            ));
        }
        if i > 0 && runs[i - 1] >= *r {
            return Some(format!(
                "partition {} batch {} is not after partition {} batch {}",
                r.partition,
                r.batch_seq,
                runs[i - 1].partition,
                runs[i - 1].batch_seq
            ));
        }
        if with_bytes.binary_search(&r.partition).is_err() {
            return Some(format!(
                "partition {} has runs but the commit reports no bytes for it",
                r.partition
            ));
        }
    }
    None
}

/// Where a shuffle's partitions live and which map attempts count.
#[derive(Debug)]
pub struct Progress {
    /// Committed attempt per map, [`AttemptId::NONE`] if none.
    pub(super) map_attempts: Vec<AttemptId>,
    /// The committed attempt's per-partition figures, per map (partitions with data
    /// only): what to subtract when the commit is replaced or revoked.
    pub(super) map_stats: Vec<Vec<PartitionStat>>,
    /// Where the committed attempt's further sorted runs begin, per map (see
    /// [`RunStart`]); empty for a map that pushed each partition as one run.
    pub(super) map_runs: Vec<Vec<RunStart>>,
    /// The run starts of all committed maps together.
    pub(super) run_count: u64,
    pub(super) committed: u32,
    pub(super) partition_bytes: Vec<u64>,
    pub(super) partition_records: Vec<u64>,
    /// Primary worker per partition.
    pub(super) primary: Vec<u32>,
    /// Replica worker per partition, [`NO_WORKER`] where there is none.
    pub(super) replica: Vec<u32>,
    /// The slot each split continues, for the slots past the shuffle's partitions (the
    /// per-partition lists above cover every slot; see [`Progress::add_split`]).
    pub(super) split_from: Vec<u32>,
    /// The prediction of the final partition sizes (soft state, not journaled).
    pub(super) forecast: Forecast,
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

    /// How many slots the shuffle has: its partitions and their splits.
    pub fn slots(&self) -> u32 {
        self.primary.len() as u32
    }

    /// The split that continues `slot`, if it was split.
    pub fn split_of(&self, slot: u32) -> Option<u32> {
        let first = self.primary.len() - self.split_from.len();
        self.split_from
            .iter()
            .position(|&f| f == slot)
            .map(|i| (first + i) as u32)
    }

    /// The last slot of `slot`'s chain of splits (`slot` itself when it was never split):
    /// where the partition's next pushes go.
    pub fn chain_tail(&self, slot: u32) -> u32 {
        let mut s = slot;
        while let Some(next) = self.split_of(s) {
            s = next;
        }
        s
    }

    /// The slot that split `slot` continues, if `slot` is a split.
    pub fn split_parent(&self, slot: u32) -> Option<u32> {
        let first = (self.primary.len() - self.split_from.len()) as u32;
        (slot >= first)
            .then(|| self.split_from.get((slot - first) as usize).copied())
            .flatten()
    }

    /// The partition `slot` belongs to: itself, or the partition its chain of splits
    /// continues.
    pub fn partition_of(&self, slot: u32) -> u32 {
        let first = (self.primary.len() - self.split_from.len()) as u32;
        let mut s = slot;
        while s >= first {
            s = self.split_from[(s - first) as usize];
        }
        s
    }

    /// The partition of every split slot, in slot order (`ShuffleStatus.split_parents`).
    pub fn split_parents(&self) -> Vec<u32> {
        let first = (self.primary.len() - self.split_from.len()) as u32;
        (0..self.split_from.len() as u32)
            .map(|i| self.partition_of(first + i))
            .collect()
    }

    /// The run starts the committed maps reported for partitions `[from, to)` and their
    /// splits, ordered by (slot, map, batch). Each map's list is in (slot, batch) order, so
    /// every asked range of slots is found by a binary search in each map's.
    pub fn run_starts(&self, from: u32, to: u32) -> Vec<MapRunStart> {
        if self.run_count == 0 || from >= to {
            return Vec::new();
        }
        let first_split = (self.primary.len() - self.split_from.len()) as u32;
        let mut ranges = vec![(from, to.min(first_split))];
        ranges.extend(
            (first_split..self.primary.len() as u32)
                .filter(|&slot| (from..to).contains(&self.partition_of(slot)))
                .map(|slot| (slot, slot + 1)),
        );
        let mut out = Vec::new();
        for (m, runs) in self.map_runs.iter().enumerate() {
            if runs.is_empty() {
                continue;
            }
            for &(lo, hi) in &ranges {
                let i = runs.partition_point(|r| r.partition < lo);
                out.extend(runs[i..].iter().take_while(|r| r.partition < hi).map(|r| {
                    MapRunStart {
                        partition: r.partition,
                        map_id: m as u32,
                        batch_seq: r.batch_seq,
                    }
                }));
            }
        }
        out.sort_unstable();
        out
    }

    /// Adds the split that continues `from`, on `primary` (and `replica`). Returns its
    /// slot. A split's figures are kept like a partition's; a reader reads them all.
    pub fn add_split(&mut self, from: u32, primary: u32, replica: u32) -> u32 {
        let slot = self.primary.len() as u32;
        self.primary.push(primary);
        self.replica.push(replica);
        self.partition_bytes.push(0);
        self.partition_records.push(0);
        self.split_from.push(from);
        slot
    }

    /// Takes back the last split added (its workers could not prepare it).
    pub fn drop_last_split(&mut self) {
        if self.split_from.pop().is_some() {
            self.primary.pop();
            self.replica.pop();
            self.partition_bytes.pop();
            self.partition_records.pop();
        }
    }

    /// Bytes per partition over the committed maps, each partition's splits folded in.
    pub fn logical_bytes(&self) -> Vec<u64> {
        self.fold_splits(&self.partition_bytes)
    }

    /// Records per partition over the committed maps, each partition's splits folded in.
    pub fn logical_records(&self) -> Vec<u64> {
        self.fold_splits(&self.partition_records)
    }

    /// A per-slot figure as one per partition: each split's added to its partition's.
    fn fold_splits(&self, per_slot: &[u64]) -> Vec<u64> {
        let n = self.primary.len() - self.split_from.len();
        let mut out = per_slot[..n].to_vec();
        for (s, &v) in per_slot.iter().enumerate().skip(n) {
            out[self.partition_of(s as u32) as usize] += v;
        }
        out
    }

    /// (primary, replica) of the shuffle's partitions, its splits left out: what a new
    /// registration is told, and what a partner shuffle copies.
    pub fn partition_layout(&self) -> (Vec<u32>, Vec<u32>) {
        let n = self.primary.len() - self.split_from.len();
        (self.primary[..n].to_vec(), self.replica[..n].to_vec())
    }

    /// (primary per slot, replica per slot): the partitions, then the splits.
    pub fn layout(&self) -> (Vec<u32>, Vec<u32>) {
        (self.primary.clone(), self.replica.clone())
    }

    /// How many maps have a committed attempt.
    pub fn committed(&self) -> u32 {
        self.committed
    }

    /// Bytes per partition over the committed maps.
    pub fn partition_bytes(&self) -> &[u64] {
        &self.partition_bytes
    }

    /// Records per partition over the committed maps.
    pub fn partition_records(&self) -> &[u64] {
        &self.partition_records
    }

    /// The committed attempt of every map.
    pub fn map_attempts(&self) -> &[AttemptId] {
        &self.map_attempts
    }

    /// Copies of partitions per worker (primaries and replicas).
    pub fn copies_per_worker(&self) -> HashMap<u32, u64> {
        let mut out: HashMap<u32, u64> = HashMap::new();
        for &w in self.primary.iter().chain(self.replica.iter()) {
            if w != NO_WORKER {
                *out.entry(w).or_default() += 1;
            }
        }
        out
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
        self.run_count -= self.map_runs[map as usize].len() as u64;
        self.map_runs[map as usize].clear();
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

/// Stripes of [`ShuffleEntry`]'s per-map commit locks: two commits of one map always meet
/// on the same stripe; commits of different maps rarely do.
const COMMIT_STRIPES: usize = 32;

/// A registered shuffle.
#[derive(Debug)]
pub struct ShuffleEntry {
    pub num_maps: u32,
    pub num_partitions: u32,
    /// Held shared by every commit and exclusively by whatever moves copies or resends
    /// commits (a relocation, a worker's resync), which so see one settled set of commits
    /// and layout. Commits of different maps run side by side: their workers' confirmations
    /// overlap and their journal appends share syncs.
    layout: tokio::sync::RwLock<()>,
    /// Two commits of the same map (attempts racing, a rerun) run one after the other, so
    /// that the precheck, the workers' confirmation and the record are one step per map.
    map_stripes: [tokio::sync::Mutex<()>; COMMIT_STRIPES],
    progress: Mutex<Progress>,
    /// When this coordinator process learnt of the shuffle (registered, or replayed):
    /// shuffles of an app registered close together belong to one job (see
    /// `State::partner_layout`).
    pub registered_at: std::time::Instant,
    /// The shuffle of the app whose primaries this one took when it registered
    /// (`State::partner_layout`: a join's other side). Soft state: not journaled, so
    /// unknown for shuffles replayed after a coordinator restart.
    pub partner: Option<u32>,
    /// Rebuilt from the journal after a coordinator restart: its partner is unknown.
    pub replayed: bool,
    /// Whether its re-placement was decided (`state::rebalance::moves`): a layout is
    /// re-placed once, by whichever of its shuffles' predictions completed the set.
    pub rebalance_decided: std::sync::atomic::AtomicBool,
}

/// What [`ShuffleEntry::record_commit`] changed besides the commit itself.
#[derive(Debug, Default)]
pub struct Recorded {
    /// The attempt this commit replaced (a rerun of the stage), if any.
    pub replaced: Option<AttemptId>,
    /// The prediction made or completed by this commit.
    pub forecast: ForecastEvent,
}

/// What a commit of one map holds while it runs: the layout shared, the map's stripe
/// exclusively.
pub struct CommitGuard<'a> {
    _layout: tokio::sync::RwLockReadGuard<'a, ()>,
    _map: tokio::sync::MutexGuard<'a, ()>,
}

impl ShuffleEntry {
    /// A shuffle with nothing committed yet, laid out as given, that predicts its
    /// partition sizes at the default threshold (see [`ShuffleEntry::observing`]).
    pub fn new(num_maps: u32, num_partitions: u32, primary: Vec<u32>, replica: Vec<u32>) -> Self {
        assert!(
            primary.len() == num_partitions as usize && replica.len() == primary.len(),
            "a layout of {} primaries and {} replicas for {num_partitions} partitions",
            primary.len(),
            replica.len()
        );
        ShuffleEntry {
            num_maps,
            num_partitions,
            layout: tokio::sync::RwLock::new(()),
            map_stripes: std::array::from_fn(|_| tokio::sync::Mutex::new(())),
            progress: Mutex::new(Progress {
                map_attempts: vec![AttemptId::NONE; num_maps as usize],
                map_stats: vec![Vec::new(); num_maps as usize],
                map_runs: vec![Vec::new(); num_maps as usize],
                run_count: 0,
                committed: 0,
                partition_bytes: vec![0; num_partitions as usize],
                partition_records: vec![0; num_partitions as usize],
                primary,
                replica,
                split_from: Vec::new(),
                forecast: Forecast::new(num_maps, DEFAULT_PREDICTION_THRESHOLD),
            }),
            registered_at: std::time::Instant::now(),
            partner: None,
            replayed: false,
            rebalance_decided: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The same shuffle predicting its partition sizes once `threshold` (a fraction) of
    /// its maps committed (the coordinator's `prediction_threshold`).
    /// The shuffle took the primaries of the app's shuffle `partner` (a join's other side).
    pub fn partnered_with(mut self, partner: Option<u32>) -> Self {
        self.partner = partner;
        self
    }

    /// The shuffle was rebuilt from the journal (its partner, soft state, is unknown).
    pub fn replayed(mut self) -> Self {
        self.replayed = true;
        self
    }

    pub fn observing(mut self, threshold: f64) -> Self {
        let p = self.progress.get_mut().expect("shuffle lock poisoned");
        p.forecast = Forecast::new(self.num_maps, threshold);
        self
    }

    /// The shuffle predicts its partition sizes from these shares of a sample of its input
    /// (`prediction::sample_shares`) and its first maps' total bytes.
    pub fn use_sample(&self, shares: std::sync::Arc<[f64]>) {
        self.lock().forecast.use_sample(shares);
    }

    /// The prediction of the shuffle's final partition sizes, once its committed maps
    /// reached the observation threshold.
    pub fn prediction(&self) -> Option<Prediction> {
        self.lock().forecast.prediction().cloned()
    }

    /// Waits until map `map_id` may commit: no relocation or resync of this shuffle runs
    /// and no other commit of the same map does.
    pub async fn commit_guard(&self, map_id: u32) -> CommitGuard<'_> {
        let layout = self.layout.read().await;
        let map = self.map_stripes[map_id as usize % COMMIT_STRIPES]
            .lock()
            .await;
        CommitGuard {
            _layout: layout,
            _map: map,
        }
    }

    /// Waits until no commit of this shuffle runs, and keeps new ones waiting while the
    /// guard lives: for changing where copies live or resending commits to a worker.
    pub async fn layout_guard(&self) -> tokio::sync::RwLockWriteGuard<'_, ()> {
        self.layout.write().await
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

    /// Records a commit the workers accepted. Returns the attempt it replaced, if any,
    /// and whether it made the shuffle's size prediction or completed the shuffle (the
    /// caller scores the prediction then, outside this lock).
    pub fn record_commit(
        &self,
        map: u32,
        attempt: AttemptId,
        stats: &[PartitionStat],
        runs: &[RunStart],
    ) -> Recorded {
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
        p.run_count += runs.len() as u64;
        p.map_runs[map as usize] = runs.to_vec();
        let p = &mut *p;
        let forecast = if p.split_from.is_empty() {
            p.forecast.on_commit(
                p.committed,
                self.num_maps,
                &p.partition_bytes,
                &p.partition_records,
            )
        } else {
            // Records are read only by the commit that predicts from a sample.
            let records = if p.forecast.reads_records(p.committed) {
                p.logical_records()
            } else {
                Vec::new()
            };
            let bytes = p.logical_bytes();
            p.forecast
                .on_commit(p.committed, self.num_maps, &bytes, &records)
        };
        Recorded {
            replaced: previous.some(),
            forecast,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// Whether `f` completes on its first poll (whether the lock it takes is free now).
    fn ready_now<F: Future>(f: F) -> bool {
        let mut f = pin!(f);
        matches!(
            f.as_mut().poll(&mut Context::from_waker(Waker::noop())),
            Poll::Ready(_)
        )
    }

    fn entry() -> ShuffleEntry {
        ShuffleEntry::new(100, 2, vec![0, 0], vec![NO_WORKER, NO_WORKER])
    }

    #[test]
    fn commits_of_different_maps_run_side_by_side_and_of_one_map_one_at_a_time() {
        let e = entry();
        let held = std::pin::pin!(e.commit_guard(3));
        let Poll::Ready(_guard) = held.poll(&mut Context::from_waker(Waker::noop())) else {
            panic!("the first commit waits for nothing")
        };
        assert!(
            ready_now(e.commit_guard(4)),
            "another map's commit goes ahead"
        );
        assert!(
            !ready_now(e.commit_guard(3)),
            "a second commit of map 3 waits"
        );
        assert!(
            !ready_now(e.layout_guard()),
            "a relocation waits for running commits"
        );
    }

    #[test]
    fn a_relocation_keeps_every_commit_waiting() {
        let e = entry();
        let held = std::pin::pin!(e.layout_guard());
        let Poll::Ready(_guard) = held.poll(&mut Context::from_waker(Waker::noop())) else {
            panic!("nothing holds the layout")
        };
        for map in [0, 1, 99] {
            assert!(
                !ready_now(e.commit_guard(map)),
                "map {map} committed during a relocation"
            );
        }
    }
}
