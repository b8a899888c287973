//! The coordinator's in-memory state and its transitions, free of I/O so they can be
//! tested directly.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossdock_policy::load_aware::{place_partitions, WorkerLoad};
use crossdock_proto::{CommitStatus, ErrorCode, Message, PartitionStat, WorkerInfo, NO_WORKER};

use super::journal::Record;
use crate::error::ServerError;
use crate::metrics::ErrorCounts;

/// Marks a map without a committed attempt.
pub const NO_ATTEMPT: u32 = u32::MAX;
/// Size assumed for a partition before anything is known about it. It makes a worker's
/// load grow with every partition placed on it, so one shuffle spreads over the workers
/// instead of landing on whichever had the fewest bytes a heartbeat ago.
pub const PARTITION_SIZE_ESTIMATE: u64 = 64 << 20;
/// Most partitions or maps one shuffle may have.
pub const MAX_SHUFFLE_DIMENSION: u32 = 1 << 24;

/// Counters of the coordinator.
#[derive(Default)]
pub struct CoordinatorMetrics {
    pub commits: AtomicU64,
    pub rejected_commits: AtomicU64,
    pub expired_apps: AtomicU64,
    pub registered_shuffles: AtomicU64,
    /// Partitions that lost every copy with a worker.
    pub lost_partitions: AtomicU64,
    pub adopted_partitions: AtomicU64,
    /// Map commits revoked because their data was lost.
    pub revoked_maps: AtomicU64,
    pub errors: ErrorCounts,
}

/// A registered worker.
#[derive(Debug, Clone)]
pub struct WorkerEntry {
    pub id: u32,
    pub addr: String,
    pub memory_budget: u64,
    pub last_seen: Instant,
    pub alive: bool,
    pub buffered_bytes: u64,
    pub stored_bytes: u64,
    /// Chosen by the worker process at start: a new value means it restarted.
    pub incarnation: u64,
    /// The worker reported a full disk: nothing new is placed on it.
    pub disk_full: bool,
}

/// Where a shuffle's partitions live and which map attempts count.
#[derive(Debug)]
pub struct Progress {
    /// Committed attempt per map, [`NO_ATTEMPT`] if none.
    pub map_attempts: Vec<u32>,
    /// The committed attempt's per-partition figures, per map (partitions with data
    /// only): what to subtract when the commit is replaced or revoked.
    pub map_stats: Vec<Vec<PartitionStat>>,
    pub committed: u32,
    pub partition_bytes: Vec<u64>,
    pub partition_records: Vec<u64>,
    /// Primary worker per partition.
    pub primary: Vec<u32>,
    /// Replica worker per partition, [`NO_WORKER`] where there is none.
    pub replica: Vec<u32>,
}

impl Progress {
    /// The partitions `worker` holds a copy of (as primary or replica).
    pub fn copies_of(&self, worker: u32) -> Vec<u32> {
        (0..self.primary.len() as u32)
            .filter(|&p| self.primary[p as usize] == worker || self.replica[p as usize] == worker)
            .collect()
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

    /// Revokes the commits of `maps` (those still committed).
    pub fn revoke(&mut self, maps: &[u32]) {
        for &m in maps {
            if self
                .map_attempts
                .get(m as usize)
                .is_some_and(|&a| a != NO_ATTEMPT)
            {
                self.subtract(m);
                self.map_attempts[m as usize] = NO_ATTEMPT;
                self.committed -= 1;
            }
        }
    }

    /// Revokes the commit of every map that wrote into one of `lost`. Returns them.
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

    pub fn revoke_maps_touching(&mut self, lost: &BTreeSet<u32>) -> Vec<u32> {
        let maps: Vec<u32> = (0..self.map_attempts.len() as u32)
            .filter(|&m| {
                self.map_attempts[m as usize] != NO_ATTEMPT
                    && self.map_stats[m as usize]
                        .iter()
                        .any(|s| lost.contains(&s.partition))
            })
            .collect();
        for &m in &maps {
            self.subtract(m);
            self.map_attempts[m as usize] = NO_ATTEMPT;
            self.committed -= 1;
        }
        maps
    }
}

/// The generation of an attempt id: its high 16 bits (Spark's stage attempt).
pub fn generation(attempt: u32) -> u32 {
    attempt >> 16
}

/// A registered shuffle.
#[derive(Debug)]
pub struct ShuffleEntry {
    pub num_maps: u32,
    pub num_partitions: u32,
    /// Serializes commits and relocations of this shuffle.
    pub commit_lock: tokio::sync::Mutex<()>,
    pub progress: Mutex<Progress>,
}

impl ShuffleEntry {
    /// A shuffle with nothing committed yet, laid out as given.
    pub fn new(num_maps: u32, num_partitions: u32, primary: Vec<u32>, replica: Vec<u32>) -> Self {
        ShuffleEntry {
            num_maps,
            num_partitions,
            commit_lock: tokio::sync::Mutex::new(()),
            progress: Mutex::new(Progress {
                map_attempts: vec![NO_ATTEMPT; num_maps as usize],
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
    pub fn commit_precheck(&self, map: u32, attempt: u32) -> Option<(CommitStatus, u32)> {
        let winner = self.lock().map_attempts[map as usize];
        if winner == NO_ATTEMPT || generation(attempt) > generation(winner) {
            None
        } else if winner == attempt {
            Some((CommitStatus::AlreadyCommitted, winner))
        } else {
            Some((CommitStatus::Rejected, winner))
        }
    }

    /// Records a commit the workers accepted. Returns the attempt it replaced, if any.
    pub fn record_commit(&self, map: u32, attempt: u32, stats: &[PartitionStat]) -> Option<u32> {
        let mut p = self.lock();
        let previous = p.map_attempts[map as usize];
        if previous == NO_ATTEMPT {
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
        (previous != NO_ATTEMPT).then_some(previous)
    }
}

/// A registered app.
#[derive(Debug)]
pub struct App {
    pub lease: Duration,
    pub expires: Instant,
    pub shuffles: HashMap<u32, Arc<ShuffleEntry>>,
}

/// Everything the coordinator knows.
#[derive(Debug)]
pub struct State {
    pub apps: HashMap<String, App>,
    pub workers: BTreeMap<u32, WorkerEntry>,
    next_worker_id: u32,
    /// Copies of each partition: 1 (primary only) or 2 (primary and replica).
    pub replication: u32,
}

impl Default for State {
    fn default() -> Self {
        State::new(1)
    }
}

/// How a registering worker relates to what the coordinator knew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejoin {
    /// An address never seen.
    New,
    /// The same process again (its connection to the coordinator broke, or the
    /// coordinator restarted).
    Reconnected,
    /// A worker marked lost is back: its copies were moved meanwhile.
    Revived,
    /// A live worker's process restarted (new incarnation); now marked lost.
    Restarted,
}

/// What a relocation changed in one shuffle, for the coordinator to tell the workers.
#[derive(Debug, Default)]
pub struct Relocation {
    /// `PrepareShuffle` calls: (worker address, message).
    pub prepares: Vec<(String, Message)>,
    /// Partitions that lost every copy, placed anew. Unless their new workers adopt
    /// them from the object store, the maps that wrote into them are revoked
    /// ([`Progress::revoke_maps_touching`]).
    pub lost: BTreeSet<u32>,
    /// Live workers of the shuffle, to which revocations go.
    pub holders: Vec<String>,
    /// Partitions that lost a copy but kept one.
    pub degraded_partitions: usize,
}

fn unknown_app(app_id: &str) -> ServerError {
    ServerError::new(
        ErrorCode::UnknownApp,
        format!("app '{app_id}' is not registered (never registered, unregistered, or its lease expired)"),
    )
}

impl State {
    /// The whole durable state as journal records (a snapshot).
    pub fn snapshot(&self) -> Vec<Record> {
        let mut out: Vec<Record> = self
            .workers
            .values()
            .map(|w| Record::Worker {
                id: w.id,
                addr: w.addr.clone(),
                incarnation: w.incarnation,
            })
            .collect();
        for (app_id, app) in &self.apps {
            out.push(Record::App {
                app_id: app_id.clone(),
                lease_ms: app.lease.as_millis().min(u32::MAX as u128) as u32,
            });
            for (&shuffle_id, s) in &app.shuffles {
                let p = s.lock();
                out.push(Record::Shuffle {
                    app_id: app_id.clone(),
                    shuffle_id,
                    num_maps: s.num_maps,
                    num_partitions: s.num_partitions,
                    primary: p.primary.clone(),
                    replica: p.replica.clone(),
                });
                for (m, &a) in p.map_attempts.iter().enumerate() {
                    if a != NO_ATTEMPT {
                        out.push(Record::Commit {
                            app_id: app_id.clone(),
                            shuffle_id,
                            map_id: m as u32,
                            attempt_id: a,
                            stats: p.map_stats[m].clone(),
                        });
                    }
                }
            }
        }
        out
    }

    /// Replays one journal record. Records naming an app or shuffle that no longer
    /// exists are skipped (the journal is written in the order changes happened, but a
    /// deletion may overtake a registration on another connection).
    pub fn apply(&mut self, r: Record, now: Instant) {
        match r {
            Record::Worker {
                id,
                addr,
                incarnation,
            } => {
                self.next_worker_id = self.next_worker_id.max(id + 1);
                // Counted alive for a heartbeat deadline after a restart of the
                // coordinator: the workers re-register meanwhile.
                let w = self.workers.entry(id).or_insert_with(|| WorkerEntry {
                    id,
                    addr: addr.clone(),
                    memory_budget: 0,
                    last_seen: now,
                    alive: true,
                    buffered_bytes: 0,
                    stored_bytes: 0,
                    incarnation,
                    disk_full: false,
                });
                w.addr = addr;
                w.incarnation = incarnation;
            }
            Record::App { app_id, lease_ms } => {
                let _ = self.register_app(&app_id, lease_ms.max(1), now);
            }
            Record::AppGone { app_id } => {
                self.apps.remove(&app_id);
            }
            Record::Shuffle {
                app_id,
                shuffle_id,
                num_maps,
                num_partitions,
                primary,
                replica,
            } => {
                if let Some(app) = self.apps.get_mut(&app_id) {
                    app.shuffles.insert(
                        shuffle_id,
                        Arc::new(ShuffleEntry::new(
                            num_maps,
                            num_partitions,
                            primary,
                            replica,
                        )),
                    );
                }
            }
            Record::Layout {
                app_id,
                shuffle_id,
                primary,
                replica,
            } => {
                if let Ok(s) = self.shuffle(&app_id, shuffle_id) {
                    let mut p = s.lock();
                    if primary.len() == p.primary.len() && replica.len() == p.replica.len() {
                        p.primary = primary;
                        p.replica = replica;
                    }
                }
            }
            Record::Commit {
                app_id,
                shuffle_id,
                map_id,
                attempt_id,
                stats,
            } => {
                if let Ok(s) = self.shuffle(&app_id, shuffle_id) {
                    let valid =
                        map_id < s.num_maps && stats.iter().all(|x| x.partition < s.num_partitions);
                    if valid {
                        s.record_commit(map_id, attempt_id, &stats);
                    }
                }
            }
            Record::Revoke {
                app_id,
                shuffle_id,
                maps,
            } => {
                if let Ok(s) = self.shuffle(&app_id, shuffle_id) {
                    s.lock().revoke(&maps);
                }
            }
            Record::ShuffleGone { app_id, shuffle_id } => {
                if let Some(app) = self.apps.get_mut(&app_id) {
                    app.shuffles.remove(&shuffle_id);
                }
            }
        }
    }

    pub fn new(replication: u32) -> State {
        State {
            apps: HashMap::new(),
            workers: BTreeMap::new(),
            next_worker_id: 0,
            replication: replication.clamp(1, 2),
        }
    }

    /// (apps, shuffles, live workers, lost workers).
    pub fn counts(&self) -> (u64, u64, u64, u64) {
        let shuffles = self.apps.values().map(|a| a.shuffles.len() as u64).sum();
        let alive = self.workers.values().filter(|w| w.alive).count() as u64;
        (
            self.apps.len() as u64,
            shuffles,
            alive,
            self.workers.len() as u64 - alive,
        )
    }

    /// Registers a worker, or takes back the one with the same address. Returns its id
    /// and how it came back. A live worker with a new incarnation restarted and lost
    /// what it held in memory: it is marked lost and not registered, so the caller
    /// handles its copies first and then registers it again.
    pub fn register_worker(
        &mut self,
        addr: &str,
        memory_budget: u64,
        incarnation: u64,
        now: Instant,
    ) -> (u32, Rejoin) {
        if let Some(w) = self.workers.values_mut().find(|w| w.addr == addr) {
            if w.alive && w.incarnation != incarnation {
                w.alive = false;
                return (w.id, Rejoin::Restarted);
            }
            let how = if w.alive {
                Rejoin::Reconnected
            } else {
                Rejoin::Revived
            };
            w.alive = true;
            w.last_seen = now;
            w.memory_budget = memory_budget;
            w.incarnation = incarnation;
            return (w.id, how);
        }
        let id = self.next_worker_id;
        self.next_worker_id += 1;
        self.workers.insert(
            id,
            WorkerEntry {
                id,
                addr: addr.to_string(),
                memory_budget,
                last_seen: now,
                alive: true,
                buffered_bytes: 0,
                stored_bytes: 0,
                incarnation,
                disk_full: false,
            },
        );
        (id, Rejoin::New)
    }

    /// The id of the worker at `addr`.
    pub fn worker_by_addr(&self, addr: &str) -> Option<u32> {
        self.workers.values().find(|w| w.addr == addr).map(|w| w.id)
    }

    /// Records a heartbeat. Returns true if the worker had been marked lost: its
    /// partitions were moved away meanwhile, so what it still holds must be deleted.
    pub fn heartbeat(
        &mut self,
        id: u32,
        buffered: u64,
        stored: u64,
        now: Instant,
    ) -> Result<bool, ServerError> {
        let w = self.workers.get_mut(&id).ok_or_else(|| {
            ServerError::new(
                ErrorCode::UnknownWorker,
                format!("worker {id} is not registered; register again"),
            )
        })?;
        let revived = !w.alive;
        if revived {
            tracing::info!(worker = id, addr = %w.addr, "worker is back; its old data will be deleted");
        }
        w.alive = true;
        w.last_seen = now;
        w.buffered_bytes = buffered;
        w.stored_bytes = stored;
        Ok(revived)
    }

    /// Marks workers silent for longer than `timeout` as lost. Returns their ids.
    pub fn mark_lost_workers(&mut self, timeout: Duration) -> Vec<u32> {
        let mut lost = Vec::new();
        for w in self.workers.values_mut() {
            if w.alive && w.last_seen.elapsed() > timeout {
                w.alive = false;
                lost.push(w.id);
                tracing::warn!(worker = w.id, addr = %w.addr, "worker missed its heartbeat deadline; marked lost");
            }
        }
        lost
    }

    /// Records whether a worker's disk is full.
    pub fn set_disk_full(&mut self, id: u32, full: bool) {
        if let Some(w) = self.workers.get_mut(&id) {
            if w.disk_full != full {
                if full {
                    tracing::warn!(worker = id, addr = %w.addr, "worker reports a full disk; no new partitions go there");
                } else {
                    tracing::info!(worker = id, addr = %w.addr, "worker's disk has room again");
                }
            }
            w.disk_full = full;
        }
    }

    /// Marks a worker lost now. False if it was not alive.
    pub fn mark_lost(&mut self, id: u32) -> bool {
        match self.workers.get_mut(&id) {
            Some(w) if w.alive => {
                w.alive = false;
                true
            }
            _ => false,
        }
    }

    pub(crate) fn is_alive(&self, id: u32) -> bool {
        self.workers.get(&id).is_some_and(|w| w.alive)
    }

    pub(crate) fn addr_of(&self, id: u32) -> String {
        self.workers
            .get(&id)
            .map(|w| w.addr.clone())
            .unwrap_or_default()
    }

    /// The shuffles with a copy of some partition on `worker`.
    pub fn shuffles_on(&self, worker: u32) -> Vec<(String, u32, Arc<ShuffleEntry>)> {
        let mut out = Vec::new();
        for (app, a) in &self.apps {
            for (&sid, s) in &a.shuffles {
                let p = s.lock();
                if p.primary.contains(&worker) || p.replica.contains(&worker) {
                    out.push((app.clone(), sid, s.clone()));
                }
            }
        }
        out
    }

    /// Moves a shuffle's partitions off the lost worker `lost`. A partition that kept a
    /// copy is served by it (the replica is promoted). A partition that lost every copy
    /// is placed anew, and the maps that had written into it are revoked, so that the
    /// engine recomputes them. Copies in `keep` stay (a restarted worker found them
    /// whole). The caller holds the shuffle's commit lock.
    pub fn relocate(
        &self,
        app_id: &str,
        shuffle_id: u32,
        s: &ShuffleEntry,
        lost: u32,
        keep: &BTreeSet<u32>,
    ) -> Relocation {
        self.relocate_some(app_id, shuffle_id, s, lost, keep, None)
    }

    /// [`State::relocate`], for one partition only when `only` is given (a copy found
    /// corrupt).
    pub fn relocate_some(
        &self,
        app_id: &str,
        shuffle_id: u32,
        s: &ShuffleEntry,
        lost: u32,
        keep: &BTreeSet<u32>,
        only: Option<u32>,
    ) -> Relocation {
        let mut loads = self.live_loads();
        if only.is_some() {
            // A copy found corrupt does not go back to the worker that holds it.
            loads.retain(|l| l.id != lost);
        }
        let live: Vec<u32> = loads.iter().map(|l| l.id).collect();
        let mut p = s.lock();
        let mut changed: BTreeSet<u32> = BTreeSet::new();
        let mut lost_parts: BTreeSet<u32> = BTreeSet::new();
        let mut degraded = 0;
        for part in 0..s.num_partitions {
            let i = part as usize;
            if keep.contains(&part) || only.is_some_and(|o| o != part) {
                continue; // a restarted worker that still holds this copy whole
            }
            if p.primary[i] == lost {
                let r = p.replica[i];
                if r != NO_WORKER && self.is_alive(r) {
                    p.primary[i] = r;
                    p.replica[i] = NO_WORKER;
                    degraded += 1;
                } else {
                    lost_parts.insert(part);
                    if !loads.is_empty() {
                        let new = place_partitions(&loads, &[PARTITION_SIZE_ESTIMATE])[0];
                        if let Some(l) = loads.iter_mut().find(|l| l.id == new) {
                            l.bytes += PARTITION_SIZE_ESTIMATE;
                            l.partitions += 1;
                        }
                        p.primary[i] = new;
                        p.replica[i] = self.replica_for(new, &live);
                    }
                }
                changed.insert(part);
            } else if p.replica[i] == lost {
                p.replica[i] = NO_WORKER;
                degraded += 1;
                changed.insert(part);
            }
        }
        let holders: Vec<u32> = p
            .holders()
            .into_iter()
            .filter(|&w| self.is_alive(w))
            .collect();
        let prepares = holders
            .iter()
            .filter_map(|&w| {
                let parts: Vec<u32> = p
                    .copies_of(w)
                    .into_iter()
                    .filter(|q| changed.contains(q))
                    .collect();
                (!parts.is_empty()).then(|| {
                    (
                        self.addr_of(w),
                        self.prepare_message(app_id, shuffle_id, s, &p, w, parts),
                    )
                })
            })
            .collect();
        Relocation {
            prepares,
            holders: holders.iter().map(|&w| self.addr_of(w)).collect(),
            lost: lost_parts,
            degraded_partitions: degraded,
        }
    }

    /// The `PrepareShuffle` that creates (or updates) `parts` on `worker`, with the
    /// replica to forward to for the partitions it is primary of.
    pub fn prepare_message(
        &self,
        app_id: &str,
        shuffle_id: u32,
        s: &ShuffleEntry,
        p: &Progress,
        worker: u32,
        parts: Vec<u32>,
    ) -> Message {
        let forward_to = parts
            .iter()
            .map(|&q| {
                let r = p.replica[q as usize];
                if p.primary[q as usize] == worker && r != NO_WORKER {
                    self.addr_of(r)
                } else {
                    String::new()
                }
            })
            .collect();
        Message::PrepareShuffle {
            app_id: app_id.to_string(),
            shuffle_id,
            num_maps: s.num_maps,
            num_partitions: s.num_partitions,
            partitions: parts,
            forward_to,
        }
    }

    /// The replica for a partition whose primary is `primary`: the next live worker
    /// after it in id order, so replicas spread like primaries. None with one worker
    /// or replication 1.
    fn replica_for(&self, primary: u32, live: &[u32]) -> u32 {
        if self.replication < 2 || live.len() < 2 {
            return NO_WORKER;
        }
        let pos = live.iter().position(|&w| w == primary).unwrap_or(0);
        live[(pos + 1) % live.len()]
    }

    /// Loads of the live workers: reported bytes, or the partitions placed on them
    /// counted at the estimate, whichever is larger.
    fn live_loads(&self) -> Vec<WorkerLoad> {
        // Live shuffles' partitions count as estimated bytes until the workers report
        // what they really hold.
        let mut assigned: HashMap<u32, u64> = HashMap::new();
        for s in self.apps.values().flat_map(|a| a.shuffles.values()) {
            let p = s.lock();
            for &w in p.primary.iter().chain(p.replica.iter()) {
                *assigned.entry(w).or_default() += 1;
            }
        }
        self.workers
            .values()
            .filter(|w| w.alive && !w.disk_full)
            .map(|w| {
                let partitions = assigned.get(&w.id).copied().unwrap_or(0);
                let reported = w.stored_bytes + w.buffered_bytes;
                WorkerLoad {
                    id: w.id,
                    bytes: reported.max(partitions * PARTITION_SIZE_ESTIMATE),
                    partitions,
                }
            })
            .collect()
    }

    pub fn live_worker_addrs(&self) -> Vec<String> {
        self.workers
            .values()
            .filter(|w| w.alive)
            .map(|w| w.addr.clone())
            .collect()
    }

    pub fn worker_infos(&self, ids: impl IntoIterator<Item = u32>) -> Vec<WorkerInfo> {
        ids.into_iter()
            .filter_map(|id| self.workers.get(&id))
            .map(|w| WorkerInfo {
                id: w.id,
                addr: w.addr.clone(),
                alive: w.alive,
            })
            .collect()
    }

    /// Registers an app or renews the lease of an already registered one.
    pub fn register_app(
        &mut self,
        app_id: &str,
        lease_ms: u32,
        now: Instant,
    ) -> Result<(), ServerError> {
        if app_id.is_empty() {
            return Err(ServerError::new(
                ErrorCode::InvalidArgument,
                "app id must not be empty",
            ));
        }
        if lease_ms == 0 {
            return Err(ServerError::new(
                ErrorCode::InvalidArgument,
                "lease_ms must be positive",
            ));
        }
        let lease = Duration::from_millis(lease_ms as u64);
        let app = self.apps.entry(app_id.to_string()).or_insert_with(|| App {
            lease,
            expires: now + lease,
            shuffles: HashMap::new(),
        });
        app.lease = lease;
        app.expires = now + lease;
        Ok(())
    }

    pub fn renew_lease(&mut self, app_id: &str, now: Instant) -> Result<(), ServerError> {
        let app = self
            .apps
            .get_mut(app_id)
            .ok_or_else(|| unknown_app(app_id))?;
        app.expires = now + app.lease;
        Ok(())
    }

    /// Removes and returns the ids of apps whose lease ran out.
    pub fn take_expired_apps(&mut self) -> Vec<String> {
        let now = Instant::now();
        let expired: Vec<String> = self
            .apps
            .iter()
            .filter(|(_, a)| a.expires <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for id in &expired {
            self.apps.remove(id);
        }
        expired
    }

    pub fn shuffle(&self, app_id: &str, shuffle_id: u32) -> Result<Arc<ShuffleEntry>, ServerError> {
        let app = self.apps.get(app_id).ok_or_else(|| unknown_app(app_id))?;
        app.shuffles.get(&shuffle_id).cloned().ok_or_else(|| {
            ServerError::new(
                ErrorCode::UnknownShuffle,
                format!("shuffle {shuffle_id} of app '{app_id}' is not registered"),
            )
        })
    }

    /// An existing registration of the shuffle, or a new placement (not yet recorded).
    pub fn plan_shuffle(
        &self,
        app_id: &str,
        shuffle_id: u32,
        num_maps: u32,
        num_partitions: u32,
    ) -> Result<Result<Arc<ShuffleEntry>, ShuffleEntry>, ServerError> {
        let app = self.apps.get(app_id).ok_or_else(|| unknown_app(app_id))?;
        if num_maps > MAX_SHUFFLE_DIMENSION || num_partitions > MAX_SHUFFLE_DIMENSION {
            return Err(ServerError::new(
                ErrorCode::InvalidArgument,
                format!("a shuffle may have at most {MAX_SHUFFLE_DIMENSION} maps and partitions"),
            ));
        }
        if let Some(existing) = app.shuffles.get(&shuffle_id) {
            if existing.num_maps != num_maps || existing.num_partitions != num_partitions {
                return Err(ServerError::new(
                    ErrorCode::ShuffleExists,
                    format!(
                        "shuffle {shuffle_id} of app '{app_id}' is registered with {} maps and {} partitions, not {num_maps} and {num_partitions}",
                        existing.num_maps, existing.num_partitions
                    ),
                ));
            }
            return Ok(Ok(existing.clone()));
        }
        let loads = self.live_loads();
        if loads.is_empty() {
            let full = self
                .workers
                .values()
                .filter(|w| w.alive && w.disk_full)
                .count();
            return Err(ServerError::new(
                ErrorCode::NoWorkers,
                if full > 0 {
                    format!("every live worker ({full}) reports a full disk; free space on them or add workers")
                } else {
                    "no live worker is registered with the coordinator; start a worker or check its heartbeats".to_string()
                },
            ));
        }
        let live: Vec<u32> = loads.iter().map(|l| l.id).collect();
        let estimate = vec![PARTITION_SIZE_ESTIMATE; num_partitions as usize];
        let primary = place_partitions(&loads, &estimate);
        let replica = primary
            .iter()
            .map(|&w| self.replica_for(w, &live))
            .collect();
        Ok(Err(ShuffleEntry::new(
            num_maps,
            num_partitions,
            primary,
            replica,
        )))
    }

    /// Records a planned shuffle once its workers prepared it. Returns the entry that
    /// counts (an identical concurrent registration may have won).
    pub fn record_shuffle(
        &mut self,
        app_id: &str,
        shuffle_id: u32,
        entry: ShuffleEntry,
    ) -> Result<Arc<ShuffleEntry>, ServerError> {
        let app = self
            .apps
            .get_mut(app_id)
            .ok_or_else(|| unknown_app(app_id))?;
        Ok(app
            .shuffles
            .entry(shuffle_id)
            .or_insert_with(|| Arc::new(entry))
            .clone())
    }

    /// The placement message of a shuffle.
    pub fn placement(&self, s: &ShuffleEntry) -> Message {
        let p = s.lock();
        Message::ShufflePlacement {
            workers: self.worker_infos(p.holders()),
            partition_workers: p.primary.clone(),
            partition_replicas: p.replica.clone(),
        }
    }

    /// The status message of a shuffle.
    pub fn status(&self, s: &ShuffleEntry) -> Message {
        let p = s.lock();
        Message::ShuffleStatus {
            num_maps: s.num_maps,
            num_partitions: s.num_partitions,
            committed_maps: p.committed,
            workers: self.worker_infos(p.holders()),
            partition_workers: p.primary.clone(),
            map_attempts: p.map_attempts.clone(),
            partition_bytes: p.partition_bytes.clone(),
            partition_records: p.partition_records.clone(),
            partition_replicas: p.replica.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            !st.workers[&1].alive,
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
        st.workers.get_mut(&0).unwrap().last_seen = Instant::now() - Duration::from_secs(60);
        st.mark_lost_workers(Duration::from_secs(10));
        assert!(!st.workers[&0].alive);
        st.heartbeat(0, 0, 0, Instant::now()).unwrap();
        assert!(st.workers[&0].alive);
        assert_eq!(
            st.heartbeat(5, 0, 0, Instant::now()).unwrap_err().code,
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
        assert_eq!(conflict.code, ErrorCode::ShuffleExists);
    }

    #[test]
    fn slightly_different_loads_still_spread_a_shuffle() {
        let mut st = state_with_workers(2);
        st.heartbeat(0, 0, 1000, Instant::now()).unwrap();
        st.heartbeat(1, 0, 0, Instant::now()).unwrap();
        st.register_app("a", 1000, Instant::now()).unwrap();
        let e = st.plan_shuffle("a", 0, 1, 32).unwrap().unwrap_err();
        assert_eq!(e.partitions_of(0).len(), 16);
        assert_eq!(e.partitions_of(1).len(), 16);
    }

    #[test]
    fn a_heavily_loaded_worker_gets_fewer_partitions() {
        let mut st = state_with_workers(2);
        st.heartbeat(0, 0, 8 * PARTITION_SIZE_ESTIMATE, Instant::now())
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
        let e = st.plan_shuffle("a", 0, 1, 1).unwrap().unwrap_err();
        let first = e.lock().primary[0];
        st.record_shuffle("a", 0, e).unwrap();
        let e2 = st.plan_shuffle("a", 1, 1, 1).unwrap().unwrap_err();
        assert_ne!(e2.lock().primary[0], first);
    }

    #[test]
    fn no_live_worker_is_a_clear_error() {
        let mut st = State::default();
        st.register_app("a", 1000, Instant::now()).unwrap();
        assert_eq!(
            st.plan_shuffle("a", 0, 1, 1).unwrap_err().code,
            ErrorCode::NoWorkers
        );
        assert_eq!(
            st.plan_shuffle("zz", 0, 1, 1).unwrap_err().code,
            ErrorCode::UnknownApp
        );
    }

    #[test]
    fn first_attempt_wins() {
        let mut st = state_with_workers(1);
        st.register_app("a", 1000, Instant::now()).unwrap();
        let e = st.plan_shuffle("a", 0, 2, 1).unwrap().unwrap_err();
        assert_eq!(e.commit_precheck(0, 0), None);
        e.record_commit(
            0,
            0,
            &[PartitionStat {
                partition: 0,
                bytes: 10,
                records: 1,
            }],
        );
        assert_eq!(
            e.commit_precheck(0, 0),
            Some((CommitStatus::AlreadyCommitted, 0))
        );
        assert_eq!(e.commit_precheck(0, 1), Some((CommitStatus::Rejected, 0)));
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
        assert_eq!(e.record_commit(0, 3, &[stat(0, 10)]), None);
        // Same generation (stage attempt 0), other task attempt: rejected.
        assert_eq!(e.commit_precheck(0, 4), Some((CommitStatus::Rejected, 3)));
        // Stage attempt 1 replaces it, and its figures replace the old ones.
        let gen1 = 1 << 16;
        assert_eq!(e.commit_precheck(0, gen1), None);
        assert_eq!(e.record_commit(0, gen1, &[stat(1, 7)]), Some(3));
        let p = e.lock();
        assert_eq!(p.partition_bytes, vec![0, 7]);
        assert_eq!(p.committed, 1);
        drop(p);
        // An old-generation zombie cannot come back.
        assert_eq!(
            e.commit_precheck(0, 5),
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
        e.record_commit(0, 0, &[stat(0, 5), stat(1, 5), stat(2, 5)]);
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
        e.record_commit(0, 0, &[stat(0, 5)]);
        e.record_commit(1, 0, &[stat(1, 5)]);
        e.record_commit(2, 0, &[stat(0, 1), stat(1, 1)]);
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
        assert_eq!(p.map_attempts, vec![NO_ATTEMPT, 0, NO_ATTEMPT]);
        assert_eq!(p.partition_bytes, vec![0, 5]);
        assert_eq!(p.committed, 1);
    }

    #[test]
    fn a_snapshot_replays_to_the_same_state() {
        let mut st = State::new(2);
        for i in 0..3 {
            st.register_worker(&format!("w{i}"), 1 << 30, 10 + i as u64, Instant::now());
        }
        st.register_app("a", 5000, Instant::now()).unwrap();
        let e = st.plan_shuffle("a", 4, 3, 5).unwrap().unwrap_err();
        let e = st.record_shuffle("a", 4, e).unwrap();
        e.record_commit(0, 2, &[stat(1, 10), stat(4, 3)]);
        e.record_commit(2, 0, &[stat(0, 1)]);
        let mut restored = State::new(2);
        for r in st.snapshot() {
            restored.apply(r, Instant::now());
        }
        assert_eq!(restored.snapshot(), st.snapshot());
        let (a, b) = (
            st.status(&e),
            restored.status(&restored.shuffle("a", 4).unwrap()),
        );
        assert_eq!(a, b);
        assert_eq!(restored.workers[&2].incarnation, 12);
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
        assert!(st.apps.contains_key("b"));
    }
}
