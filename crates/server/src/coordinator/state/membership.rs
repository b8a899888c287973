//! Which workers exist, which are alive, and what they last reported.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crossdock_proto::WorkerInfo;

use super::error::StateError;
use crossdock_client::host_of;

/// A registered worker.
#[derive(Debug, Clone)]
pub struct WorkerEntry {
    pub id: u32,
    pub addr: String,
    /// Where the worker runs and its failure domain ([`Labels`]).
    pub labels: Labels,
    pub memory_budget: u64,
    pub last_seen: Instant,
    pub alive: bool,
    /// What the worker reported in its last heartbeat.
    pub load: Load,
    /// Push and fetch throughput between its last two heartbeats.
    pub rates: Rates,
    /// When `load` was reported (`None` before the first heartbeat).
    load_at: Option<Instant>,
    /// Chosen by the worker process at start: a new value means it restarted.
    pub incarnation: u64,
    /// The worker reported a full disk: nothing new is placed on it.
    pub disk_full: bool,
}

/// What a worker reports about itself in every heartbeat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// Bytes of shuffle data it holds in memory.
    pub buffered: u64,
    /// Bytes of shuffle data it holds on disk.
    pub stored: u64,
    /// Payload bytes accepted from pushes since the worker process started.
    pub pushed: u64,
    /// Payload bytes sent to readers since the worker process started.
    pub fetched: u64,
    /// Bytes of its partition files stored in the object store.
    pub object: u64,
}

impl Load {
    /// A load of `stored` bytes on disk and nothing else (for tests and tools).
    pub fn stored(stored: u64) -> Load {
        Load {
            stored,
            ..Load::default()
        }
    }
}

/// Throughput of a worker, in bytes per second, between two heartbeats.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    pub push: f64,
    pub fetch: f64,
}

impl Rates {
    /// The rates from `before` to `after`, `elapsed` apart. A counter that went back (the
    /// worker process restarted) counts from zero.
    pub fn between(before: &Load, after: &Load, elapsed: Duration) -> Rates {
        let secs = elapsed.as_secs_f64();
        if secs <= 0.0 {
            return Rates::default();
        }
        let delta = |a: u64, b: u64| if b >= a { b - a } else { b };
        Rates {
            push: delta(before.pushed, after.pushed) as f64 / secs,
            fetch: delta(before.fetched, after.fetched) as f64 / secs,
        }
    }
}

/// A worker's host and zone, as it registered them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels {
    /// The machine, as engines name hosts: a reduce task there reads the worker locally.
    pub host: String,
    /// The failure domain; empty when not labelled (all unlabelled workers share it).
    pub zone: String,
}

impl Labels {
    /// The labels a worker registered, with an empty host replaced by the host of its
    /// address (what Spark calls an executor on that machine by default: its IP).
    pub fn new(addr: &str, host: &str, zone: &str) -> Labels {
        let host = if host.is_empty() {
            host_of(addr).to_string()
        } else {
            host.to_string()
        };
        Labels {
            host,
            zone: zone.to_string(),
        }
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

/// The registered workers, by id (ids are never reused).
#[derive(Debug, Default)]
pub struct Membership {
    workers: BTreeMap<u32, WorkerEntry>,
    next_id: u32,
}

impl Membership {
    /// Registers a worker, or takes back the one with the same address. Returns its id
    /// and how it came back. A live worker with a new incarnation restarted and lost
    /// what it held in memory: it is marked lost and not registered, so the caller
    /// handles its copies first and then registers it again.
    pub fn register(
        &mut self,
        addr: &str,
        labels: Labels,
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
            if w.labels != labels {
                tracing::info!(worker = w.id, %addr, host = %labels.host, zone = %labels.zone, "worker's labels changed");
                w.labels = labels;
            }
            return (w.id, how);
        }
        let id = self.next_id;
        self.next_id += 1;
        let mut entry = WorkerEntry::new(id, addr, memory_budget, incarnation, now);
        entry.labels = labels;
        self.workers.insert(id, entry);
        (id, Rejoin::New)
    }

    /// Takes back a worker from the journal. It counts as alive for a heartbeat
    /// deadline after a restart of the coordinator: the workers re-register meanwhile,
    /// and bring back their labels (the journal does not keep them: until then the
    /// worker's host is its address's and its zone unlabelled).
    pub fn restore(&mut self, id: u32, addr: String, incarnation: u64, now: Instant) {
        self.next_id = self.next_id.max(id + 1);
        let w = self
            .workers
            .entry(id)
            .or_insert_with(|| WorkerEntry::new(id, &addr, 0, incarnation, now));
        w.addr = addr;
        w.incarnation = incarnation;
    }

    /// The worker with id `id`.
    pub fn get(&self, id: u32) -> Option<&WorkerEntry> {
        self.workers.get(&id)
    }

    /// Every registered worker, in id order.
    pub fn iter(&self) -> impl Iterator<Item = &WorkerEntry> {
        self.workers.values()
    }

    /// The id of the worker at `addr`.
    pub fn by_addr(&self, addr: &str) -> Option<u32> {
        self.workers.values().find(|w| w.addr == addr).map(|w| w.id)
    }

    /// True if worker `id` is registered and alive.
    pub fn is_alive(&self, id: u32) -> bool {
        self.workers.get(&id).is_some_and(|w| w.alive)
    }

    /// The address of worker `id` (empty if unknown).
    pub fn addr_of(&self, id: u32) -> String {
        self.workers
            .get(&id)
            .map(|w| w.addr.clone())
            .unwrap_or_default()
    }

    /// Records a heartbeat. Returns true if the worker had been marked lost: its
    /// partitions were moved away meanwhile, so what it still holds must be deleted.
    pub fn heartbeat(&mut self, id: u32, load: Load, now: Instant) -> Result<bool, StateError> {
        let w = self
            .workers
            .get_mut(&id)
            .ok_or(StateError::UnknownWorker { id })?;
        let revived = !w.alive;
        if revived {
            tracing::info!(worker = id, addr = %w.addr, "worker is back; its old data will be deleted");
        }
        w.alive = true;
        w.last_seen = now;
        w.rates = match w.load_at {
            Some(at) => Rates::between(&w.load, &load, now.saturating_duration_since(at)),
            None => Rates::default(),
        };
        w.load = load;
        w.load_at = Some(now);
        Ok(revived)
    }

    /// Marks workers silent for longer than `timeout` at `now` as lost. Returns their
    /// ids.
    pub fn mark_silent_lost(&mut self, timeout: Duration, now: Instant) -> Vec<u32> {
        let mut lost = Vec::new();
        for w in self.workers.values_mut() {
            if w.alive && now.saturating_duration_since(w.last_seen) > timeout {
                w.alive = false;
                lost.push(w.id);
                tracing::warn!(worker = w.id, addr = %w.addr, "worker missed its heartbeat deadline; marked lost");
            }
        }
        lost
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

    /// The labels of worker `id` (unknown: empty).
    pub fn labels_of(&self, id: u32) -> Labels {
        self.workers
            .get(&id)
            .map(|w| w.labels.clone())
            .unwrap_or_default()
    }

    /// The addresses of the live workers.
    pub fn live_addrs(&self) -> Vec<String> {
        self.workers
            .values()
            .filter(|w| w.alive)
            .map(|w| w.addr.clone())
            .collect()
    }

    /// How clients see the workers `ids`.
    pub fn infos(&self, ids: impl IntoIterator<Item = u32>) -> Vec<WorkerInfo> {
        ids.into_iter()
            .filter_map(|id| self.workers.get(&id))
            .map(|w| WorkerInfo {
                id: w.id,
                addr: w.addr.clone(),
                alive: w.alive,
                host: w.labels.host.clone(),
                zone: w.labels.zone.clone(),
            })
            .collect()
    }

    /// (live workers, lost workers).
    pub fn counts(&self) -> (u64, u64) {
        let alive = self.workers.values().filter(|w| w.alive).count() as u64;
        (alive, self.workers.len() as u64 - alive)
    }
}

impl WorkerEntry {
    fn new(id: u32, addr: &str, memory_budget: u64, incarnation: u64, now: Instant) -> Self {
        WorkerEntry {
            id,
            addr: addr.to_string(),
            labels: Labels::new(addr, "", ""),
            memory_budget,
            last_seen: now,
            alive: true,
            load: Load::default(),
            rates: Rates::default(),
            load_at: None,
            incarnation,
            disk_full: false,
        }
    }
}
