//! The coordinator's in-memory state and its transitions, free of I/O so they can be
//! tested directly.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossdock_policy::load_aware::{place_partitions, WorkerLoad};
use crossdock_proto::{CommitStatus, ErrorCode, Message, PartitionStat, WorkerInfo};

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
}

/// Commit progress of a shuffle.
#[derive(Debug)]
pub struct Progress {
    pub map_attempts: Vec<u32>,
    pub committed: u32,
    pub partition_bytes: Vec<u64>,
    pub partition_records: Vec<u64>,
}

/// A registered shuffle.
#[derive(Debug)]
pub struct ShuffleEntry {
    pub num_maps: u32,
    pub num_partitions: u32,
    /// Worker id per partition.
    pub partition_workers: Vec<u32>,
    /// The workers holding partitions, with their addresses, in id order.
    pub workers: Vec<(u32, String)>,
    /// Serializes commits of this shuffle so two attempts of a map cannot race.
    pub commit_lock: tokio::sync::Mutex<()>,
    pub progress: Mutex<Progress>,
}

impl ShuffleEntry {
    /// The partitions placed on `worker`.
    pub fn partitions_of(&self, worker: u32) -> Vec<u32> {
        (0..self.num_partitions)
            .filter(|&p| self.partition_workers[p as usize] == worker)
            .collect()
    }

    /// How a commit of `attempt` of `map` relates to what is already committed.
    pub fn commit_precheck(&self, map: u32, attempt: u32) -> Option<(CommitStatus, u32)> {
        let winner = self.progress.lock().expect("lock").map_attempts[map as usize];
        if winner == NO_ATTEMPT {
            None
        } else if winner == attempt {
            Some((CommitStatus::AlreadyCommitted, winner))
        } else {
            Some((CommitStatus::Rejected, winner))
        }
    }

    /// Records a commit the workers accepted.
    pub fn record_commit(&self, map: u32, attempt: u32, stats: &[PartitionStat]) {
        let mut p = self.progress.lock().expect("lock");
        p.map_attempts[map as usize] = attempt;
        p.committed += 1;
        for s in stats {
            p.partition_bytes[s.partition as usize] += s.bytes;
            p.partition_records[s.partition as usize] += s.records;
        }
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
#[derive(Debug, Default)]
pub struct State {
    pub apps: HashMap<String, App>,
    pub workers: BTreeMap<u32, WorkerEntry>,
    next_worker_id: u32,
}

fn unknown_app(app_id: &str) -> ServerError {
    ServerError::new(
        ErrorCode::UnknownApp,
        format!("app '{app_id}' is not registered (never registered, unregistered, or its lease expired)"),
    )
}

impl State {
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

    /// Registers a worker, or revives the one with the same address.
    pub fn register_worker(&mut self, addr: &str, memory_budget: u64, now: Instant) -> u32 {
        if let Some(w) = self.workers.values_mut().find(|w| w.addr == addr) {
            w.alive = true;
            w.last_seen = now;
            w.memory_budget = memory_budget;
            return w.id;
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
            },
        );
        id
    }

    /// Records a heartbeat.
    pub fn heartbeat(
        &mut self,
        id: u32,
        buffered: u64,
        stored: u64,
        now: Instant,
    ) -> Result<(), ServerError> {
        let w = self.workers.get_mut(&id).ok_or_else(|| {
            ServerError::new(
                ErrorCode::UnknownWorker,
                format!("worker {id} is not registered; register again"),
            )
        })?;
        if !w.alive {
            tracing::info!(worker = id, addr = %w.addr, "worker is back");
        }
        w.alive = true;
        w.last_seen = now;
        w.buffered_bytes = buffered;
        w.stored_bytes = stored;
        Ok(())
    }

    /// Marks workers silent for longer than `timeout` as lost.
    pub fn mark_lost_workers(&mut self, timeout: Duration) {
        for w in self.workers.values_mut() {
            if w.alive && w.last_seen.elapsed() > timeout {
                w.alive = false;
                tracing::warn!(worker = w.id, addr = %w.addr, "worker missed its heartbeat deadline; marked lost");
            }
        }
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
        // Live shuffles' partitions count as estimated bytes until the workers report
        // what they really hold.
        let mut assigned: HashMap<u32, u64> = HashMap::new();
        for s in self.apps.values().flat_map(|a| a.shuffles.values()) {
            for &w in &s.partition_workers {
                *assigned.entry(w).or_default() += 1;
            }
        }
        let loads: Vec<WorkerLoad> = self
            .workers
            .values()
            .filter(|w| w.alive)
            .map(|w| {
                let partitions = assigned.get(&w.id).copied().unwrap_or(0);
                let reported = w.stored_bytes + w.buffered_bytes;
                WorkerLoad {
                    id: w.id,
                    bytes: reported.max(partitions * PARTITION_SIZE_ESTIMATE),
                    partitions,
                }
            })
            .collect();
        if loads.is_empty() {
            return Err(ServerError::new(
                ErrorCode::NoWorkers,
                "no live worker is registered with the coordinator; start a worker or check its heartbeats",
            ));
        }
        let estimate = vec![PARTITION_SIZE_ESTIMATE; num_partitions as usize];
        let partition_workers = place_partitions(&loads, &estimate);
        let mut ids: Vec<u32> = partition_workers.clone();
        ids.sort_unstable();
        ids.dedup();
        let workers = ids
            .iter()
            .map(|id| (*id, self.workers[id].addr.clone()))
            .collect();
        Ok(Err(ShuffleEntry {
            num_maps,
            num_partitions,
            partition_workers,
            workers,
            commit_lock: tokio::sync::Mutex::new(()),
            progress: Mutex::new(Progress {
                map_attempts: vec![NO_ATTEMPT; num_maps as usize],
                committed: 0,
                partition_bytes: vec![0; num_partitions as usize],
                partition_records: vec![0; num_partitions as usize],
            }),
        }))
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
        Message::ShufflePlacement {
            workers: self.worker_infos(s.workers.iter().map(|w| w.0)),
            partition_workers: s.partition_workers.clone(),
        }
    }

    /// The status message of a shuffle.
    pub fn status(&self, s: &ShuffleEntry) -> Message {
        let p = s.progress.lock().expect("lock");
        Message::ShuffleStatus {
            num_maps: s.num_maps,
            num_partitions: s.num_partitions,
            committed_maps: p.committed,
            workers: self.worker_infos(s.workers.iter().map(|w| w.0)),
            partition_workers: s.partition_workers.clone(),
            map_attempts: p.map_attempts.clone(),
            partition_bytes: p.partition_bytes.clone(),
            partition_records: p.partition_records.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_with_workers(n: u32) -> State {
        let mut st = State::default();
        for i in 0..n {
            st.register_worker(&format!("127.0.0.1:{}", 7000 + i), 1 << 30, Instant::now());
        }
        st
    }

    #[test]
    fn same_address_keeps_its_worker_id() {
        let mut st = state_with_workers(2);
        assert_eq!(st.register_worker("127.0.0.1:7001", 1, Instant::now()), 1);
        assert_eq!(st.register_worker("127.0.0.1:9999", 1, Instant::now()), 2);
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
        let first = e.partition_workers[0];
        st.record_shuffle("a", 0, e).unwrap();
        let e2 = st.plan_shuffle("a", 1, 1, 1).unwrap().unwrap_err();
        assert_ne!(e2.partition_workers[0], first);
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
        assert_eq!(e.progress.lock().unwrap().partition_bytes, vec![10]);
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
