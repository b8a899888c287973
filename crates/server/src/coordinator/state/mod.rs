//! The coordinator's in-memory state and its transitions, free of I/O so they can be
//! tested directly. Its parts are private; everything goes through [`State`]'s methods.
//!
//! | module | concern |
//! |---|---|
//! | [`error`] | [`StateError`] and its wire codes |
//! | [`membership`] | the workers: registration, heartbeats, loss |
//! | [`progress`] | one shuffle: layout, committed attempts, sizes |
//! | [`apps`] | the apps, their leases and shuffles |
//! | [`placement`] | where partitions go (new shuffles, lost workers) |
//! | [`prediction`] | a shuffle's predicted partition sizes; an app's size history |
//! | [`rebalance`] | which partitions move to another host once sizes are predicted |
//! | [`replay`] | the state as journal records and back |

pub mod apps;
pub mod error;
pub mod membership;
pub mod placement;
#[cfg(test)]
mod placement_tests;
pub mod prediction;
pub mod progress;
pub mod rebalance;
pub mod replay;
#[cfg(test)]
mod split_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossdock_proto::Message;

use crate::coordinator::config::{Quotas, DEFAULT_PREDICTION_THRESHOLD};
use crate::coordinator::journal::Record;
use apps::Apps;
pub use error::StateError;
use membership::Membership;
pub use membership::{Labels, Load, Rates, Rejoin, WorkerEntry};
pub use placement::{Placer, Relocation, PARTITION_SIZE_ESTIMATE};
pub use prediction::{sample_shares, Completion, ForecastEvent, Prediction};
pub use progress::{invalid_runs, Progress, Recorded, ShuffleEntry};

/// How recently a shuffle of an app must have been registered for a new one of as many
/// partitions to share its layout (`State::partner_layout`): the map stages of one job
/// (a join's sides) are submitted within moments of each other.
pub const PARTNER_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// Everything the coordinator knows.
#[derive(Debug)]
pub struct State {
    members: Membership,
    apps: Apps,
    /// Copies of each partition: 1 (primary only) or 2 (primary and replica).
    replication: u32,
    /// What clients may register (checked on requests, not on replay).
    quotas: Quotas,
    /// Fraction of a shuffle's maps committed before its sizes are predicted.
    prediction_threshold: f64,
    /// Whether the coordinator re-places predicted shuffles (`--rebalance`): a join's side
    /// registered after its partner's moves then follows them.
    rebalance: bool,
}

impl Default for State {
    fn default() -> Self {
        State::new(1)
    }
}

impl State {
    pub fn new(replication: u32) -> State {
        State {
            members: Membership::default(),
            apps: Apps::default(),
            replication: replication.clamp(1, 2),
            quotas: Quotas::default(),
            prediction_threshold: DEFAULT_PREDICTION_THRESHOLD,
            rebalance: false,
        }
    }

    /// Sets what clients may register from now on.
    pub fn set_quotas(&mut self, quotas: Quotas) {
        self.quotas = quotas;
    }

    /// Sets the prediction threshold of shuffles registered (or replayed) from now on.
    pub fn set_prediction_threshold(&mut self, threshold: f64) {
        self.prediction_threshold = threshold;
    }

    /// Sets whether predicted shuffles are re-placed (`coordinator::rebalance`).
    pub fn set_rebalance(&mut self, on: bool) {
        self.rebalance = on;
    }

    /// Placement decisions over the current workers and shuffles.
    pub fn placer(&self) -> Placer<'_> {
        Placer {
            members: &self.members,
            apps: &self.apps,
            replication: self.replication,
        }
    }

    /// The whole durable state as journal records (a snapshot).
    pub fn snapshot(&self) -> Vec<Record> {
        replay::snapshot(&self.members, &self.apps)
    }

    /// Replays one journal record (see [`replay::apply`]).
    pub fn apply(&mut self, r: Record, now: Instant) {
        replay::apply(
            &mut self.members,
            &mut self.apps,
            r,
            now,
            self.prediction_threshold,
        )
    }

    /// (apps, shuffles, live workers, lost workers).
    pub fn counts(&self) -> (u64, u64, u64, u64) {
        let (apps, shuffles) = self.apps.counts();
        let (alive, lost) = self.members.counts();
        (apps, shuffles, alive, lost)
    }

    // ---- workers

    /// Registers a worker without labels: its host is its address's, its zone none.
    pub fn register_worker(
        &mut self,
        addr: &str,
        memory_budget: u64,
        incarnation: u64,
        now: Instant,
    ) -> (u32, Rejoin) {
        let labels = Labels::new(addr, "", "");
        self.register_labelled_worker(addr, labels, memory_budget, incarnation, now)
    }

    /// Registers a worker with its labels (see [`Membership::register`]).
    pub fn register_labelled_worker(
        &mut self,
        addr: &str,
        labels: Labels,
        memory_budget: u64,
        incarnation: u64,
        now: Instant,
    ) -> (u32, Rejoin) {
        self.members
            .register(addr, labels, memory_budget, incarnation, now)
    }

    /// The worker with id `id`.
    pub fn worker(&self, id: u32) -> Option<&WorkerEntry> {
        self.members.get(id)
    }

    /// The id of the worker at `addr`.
    pub fn worker_by_addr(&self, addr: &str) -> Option<u32> {
        self.members.by_addr(addr)
    }

    /// Records a heartbeat and the worker's disk state. Returns true if the worker had
    /// been marked lost (what it still holds must be deleted).
    pub fn heartbeat(
        &mut self,
        id: u32,
        load: Load,
        disk_full: bool,
        now: Instant,
    ) -> Result<bool, StateError> {
        let revived = self.members.heartbeat(id, load, now)?;
        self.members.set_disk_full(id, disk_full);
        Ok(revived)
    }

    /// Marks workers silent for longer than `timeout` at `now` as lost.
    pub fn mark_lost_workers(&mut self, timeout: Duration, now: Instant) -> Vec<u32> {
        self.members.mark_silent_lost(timeout, now)
    }

    /// Marks a worker lost now. False if it was not alive.
    pub fn mark_lost(&mut self, id: u32) -> bool {
        self.members.mark_lost(id)
    }

    pub fn is_alive(&self, id: u32) -> bool {
        self.members.is_alive(id)
    }

    /// Every registered worker, live or lost, in id order.
    pub fn workers(&self) -> impl Iterator<Item = &WorkerEntry> {
        self.members.iter()
    }

    /// Every registered app and its id.
    pub fn apps(&self) -> impl Iterator<Item = (&String, &apps::App)> {
        self.apps.iter()
    }

    /// The address of worker `id` (empty if unknown).
    pub fn addr_of(&self, id: u32) -> String {
        self.members.addr_of(id)
    }

    pub fn live_worker_addrs(&self) -> Vec<String> {
        self.members.live_addrs()
    }

    // ---- apps

    /// Registers an app or renews the lease of an already registered one.
    pub fn register_app(
        &mut self,
        app_id: &str,
        lease_ms: u32,
        now: Instant,
    ) -> Result<(), StateError> {
        let q = &self.quotas;
        if u128::from(lease_ms) > q.max_lease.as_millis() {
            return Err(StateError::Quota {
                what: format!("a lease of {lease_ms} ms"),
                max: q.max_lease.as_millis() as u64,
                setting: "max_lease, in ms",
            });
        }
        let (apps, _) = self.apps.counts();
        if !self.apps.contains(app_id) && apps >= q.max_apps as u64 {
            return Err(StateError::Quota {
                what: format!("app '{app_id}' would be app number {}", apps + 1),
                max: q.max_apps as u64,
                setting: "max_apps",
            });
        }
        self.apps.register(app_id, lease_ms, now)
    }

    /// Sets the limits a registered app asked for.
    pub fn set_app_limits(&mut self, app_id: &str, limits: crate::app_limits::AppLimits) {
        self.apps.set_limits(app_id, limits);
    }

    pub fn renew_lease(&mut self, app_id: &str, now: Instant) -> Result<(), StateError> {
        self.apps.renew(app_id, now)
    }

    /// Removes an app. True if it was registered.
    pub fn remove_app(&mut self, app_id: &str) -> bool {
        self.apps.remove(app_id)
    }

    /// True if the app is registered.
    pub fn has_app(&self, app_id: &str) -> bool {
        self.apps.contains(app_id)
    }

    /// The ids of every registered app.
    pub fn app_ids(&self) -> Vec<String> {
        self.apps.ids()
    }

    /// Removes and returns the ids of apps whose lease ran out.
    pub fn take_expired_apps(&mut self) -> Vec<String> {
        self.apps.take_expired(Instant::now())
    }

    // ---- shuffles

    pub fn shuffle(&self, app_id: &str, shuffle_id: u32) -> Result<Arc<ShuffleEntry>, StateError> {
        self.apps.shuffle(app_id, shuffle_id)
    }

    /// Removes a shuffle; returns it if it was registered.
    pub fn remove_shuffle(&mut self, app_id: &str, shuffle_id: u32) -> Option<Arc<ShuffleEntry>> {
        self.apps.remove_shuffle(app_id, shuffle_id)
    }

    /// The shuffles with a copy of some partition on `worker`.
    pub fn shuffles_on(&self, worker: u32) -> Vec<(String, u32, Arc<ShuffleEntry>)> {
        self.apps
            .all_shuffles()
            .filter(|(_, _, s)| !s.partitions_of(worker).is_empty())
            .map(|(app, id, s)| (app.clone(), id, s.clone()))
            .collect()
    }

    /// An existing registration of the shuffle (`Ok`), or a new placement not yet
    /// recorded (`Err`, to be prepared on its workers and then recorded).
    pub fn plan_shuffle(
        &self,
        app_id: &str,
        shuffle_id: u32,
        num_maps: u32,
        num_partitions: u32,
    ) -> Result<Result<Arc<ShuffleEntry>, ShuffleEntry>, StateError> {
        let app = self.apps.get(app_id)?;
        let q = &self.quotas;
        if num_partitions > q.max_partitions {
            return Err(StateError::Quota {
                what: format!("a shuffle of {num_partitions} partitions"),
                max: q.max_partitions.into(),
                setting: "max_partitions",
            });
        }
        if num_maps > q.max_maps {
            return Err(StateError::Quota {
                what: format!("a shuffle of {num_maps} maps"),
                max: q.max_maps.into(),
                setting: "max_maps",
            });
        }
        if let Ok(existing) = self.apps.shuffle(app_id, shuffle_id) {
            if existing.num_maps != num_maps || existing.num_partitions != num_partitions {
                return Err(StateError::ShuffleExists {
                    app: app_id.to_string(),
                    shuffle: shuffle_id,
                    maps: existing.num_maps,
                    partitions: existing.num_partitions,
                    asked_maps: num_maps,
                    asked_partitions: num_partitions,
                });
            }
            return Ok(Ok(existing));
        }
        if app.shuffle_count() >= q.max_shuffles_per_app {
            return Err(StateError::Quota {
                what: format!(
                    "shuffle {shuffle_id} would be app '{app_id}''s shuffle number {}",
                    app.shuffle_count() + 1
                ),
                max: q.max_shuffles_per_app as u64,
                setting: "max_shuffles_per_app",
            });
        }
        let placer = self.placer();
        let partner = self.partner_layout(app_id, num_partitions);
        let (primary, replica) = match &partner {
            Some((_, primary)) => placer.plan_like(primary.clone()),
            None => placer.plan(
                num_partitions,
                self.size_prior(app_id, num_partitions).as_deref(),
            )?,
        };
        Ok(Err(ShuffleEntry::new(
            num_maps,
            num_partitions,
            primary,
            replica,
        )
        .partnered_with(partner.map(|(id, _)| id))
        .observing(self.prediction_threshold)))
    }

    /// The primaries of a shuffle of `app_id` that a new one of `num_partitions` should
    /// share (SCache's accumulate scheduling, paper 003 §3.2.4, for the case it is for: the
    /// shuffles of one job, e.g. a join's two sides, whose reducer `p` reads partition `p`
    /// of each): the most recent shuffle of the app with as many partitions whose maps are
    /// still being written and that was registered within [`PARTNER_WINDOW`] (map stages
    /// that start together belong to one job; an abandoned shuffle that never completes
    /// must not pin the app's layout), if every one of its primaries is live with room.
    /// Then both sides of partition `p` are on one host, and so is the reduce task that
    /// joins them.
    fn partner_layout(&self, app_id: &str, num_partitions: u32) -> Option<(u32, Vec<u32>)> {
        let app = self.apps.get(app_id).ok()?;
        let (partner_id, partner) = app
            .shuffles()
            .filter(|(_, s)| s.num_partitions == num_partitions)
            .filter(|(_, s)| s.registered_at.elapsed() <= PARTNER_WINDOW)
            .filter(|(_, s)| s.lock().committed < s.num_maps)
            .max_by_key(|(id, _)| *id)?;
        // With re-placement on, where each partition goes on: a partner re-placed after its
        // prediction continues some partitions on other hosts, and this side follows them.
        let primary: Vec<u32> = {
            let p = partner.lock();
            if self.rebalance {
                (0..num_partitions)
                    .map(|q| p.copies(p.chain_tail(q)).0)
                    .collect()
            } else {
                p.partition_layout().0
            }
        };
        let usable = |w: &u32| {
            self.members
                .iter()
                .any(|m| m.id == *w && m.alive && !m.disk_full)
        };
        primary.iter().all(usable).then_some((partner_id, primary))
    }

    /// Records a planned shuffle once its workers prepared it. Returns the entry that
    /// counts (an identical concurrent registration may have won).
    pub fn record_shuffle(
        &mut self,
        app_id: &str,
        shuffle_id: u32,
        entry: ShuffleEntry,
    ) -> Result<Arc<ShuffleEntry>, StateError> {
        self.apps.add_shuffle(app_id, shuffle_id, entry)
    }

    // ---- size prediction (soft state: see `prediction`)

    /// The predicted final bytes per partition of a shuffle, once its committed maps
    /// reached the observation threshold; `None` before, or for an unknown shuffle.
    pub fn predicted_sizes(&self, app_id: &str, shuffle_id: u32) -> Option<Arc<[u64]>> {
        let s = self.apps.shuffle(app_id, shuffle_id).ok()?;
        let p = s.prediction()?;
        Some(p.sizes)
    }

    /// The partitions of a predicted shuffle, and of the shuffles sharing its layout, to
    /// continue on other hosts, deciding them (see [`rebalance::moves`]).
    pub fn rebalance_moves(
        &self,
        app_id: &str,
        shuffle_id: u32,
        tol: f64,
    ) -> Option<rebalance::Decided> {
        rebalance::moves(&self.members, &self.apps, app_id, shuffle_id, tol)
    }

    /// The ids of the shuffles sharing shuffle `shuffle_id`'s layout, itself included (see
    /// [`rebalance::layout_group`]); `None` for an unknown shuffle or unknown links.
    pub fn layout_group(&self, app_id: &str, shuffle_id: u32) -> Option<Vec<u32>> {
        let group = rebalance::layout_group(&self.apps, app_id, shuffle_id)?;
        Some(group.into_iter().map(|(id, _)| id).collect())
    }

    /// A size prior for a new shuffle of `num_partitions` partitions of `app_id`, for
    /// placing it before any of its maps commits: the final bytes per partition of the
    /// app's most recent completed shuffle with that many partitions (partitions that
    /// ended up empty are 0). `None` if there is none among the few it remembers.
    pub fn size_prior(&self, app_id: &str, num_partitions: u32) -> Option<Arc<[u64]>> {
        self.apps.size_prior(app_id, num_partitions)
    }

    /// Remembers the final sizes of a shuffle of `app_id` that completed, for
    /// [`State::size_prior`]. Ignored if the app is gone.
    pub fn remember_final_sizes(&mut self, app_id: &str, sizes: Arc<[u64]>) {
        self.apps.remember_sizes(app_id, sizes);
    }

    /// Moves a shuffle's partitions off the lost worker `lost` (see
    /// [`Placer::relocate`]).
    pub fn relocate(
        &self,
        app_id: &str,
        shuffle_id: u32,
        s: &ShuffleEntry,
        lost: u32,
        keep: &BTreeSet<u32>,
    ) -> Relocation {
        self.placer()
            .relocate(app_id, shuffle_id, s, lost, keep, None)
    }

    /// Moves one partition's copy off `worker`, which found it corrupt.
    pub fn relocate_one(
        &self,
        app_id: &str,
        shuffle_id: u32,
        s: &ShuffleEntry,
        worker: u32,
        partition: u32,
    ) -> Relocation {
        self.placer().relocate(
            app_id,
            shuffle_id,
            s,
            worker,
            &BTreeSet::new(),
            Some(partition),
        )
    }

    /// Records that a shuffle's layout changed outside [`State::relocate`] (see
    /// [`Apps::moved`]): `before` and `after` are its copies per worker.
    pub fn layout_changed(
        &self,
        app_id: &str,
        shuffle_id: u32,
        s: &ShuffleEntry,
        before: &std::collections::HashMap<u32, u64>,
        after: &std::collections::HashMap<u32, u64>,
    ) {
        self.apps.moved(app_id, shuffle_id, s, before, after);
    }

    /// The placement message of a shuffle.
    pub fn placement(&self, s: &ShuffleEntry) -> Message {
        let p = s.lock();
        let (primary, replica) = p.partition_layout();
        Message::ShufflePlacement {
            workers: self.members.infos(p.holders()),
            partition_workers: primary,
            partition_replicas: replica,
        }
    }

    /// The status message of a shuffle, with the run starts of partitions `runs` (and of
    /// their splits).
    pub fn status(&self, s: &ShuffleEntry, runs: std::ops::Range<u32>) -> Message {
        let p = s.lock();
        Message::ShuffleStatus {
            num_maps: s.num_maps,
            num_partitions: s.num_partitions,
            committed_maps: p.committed,
            workers: self.members.infos(p.holders()),
            partition_workers: p.primary.clone(),
            map_attempts: p.map_attempts.clone(),
            partition_bytes: p.partition_bytes.clone(),
            partition_records: p.partition_records.clone(),
            partition_replicas: p.replica.clone(),
            split_parents: crossdock_proto::Appended(Some(p.split_parents())),
            run_count: crossdock_proto::Appended::of(p.run_count),
            run_starts: crossdock_proto::Appended(Some(p.run_starts(runs.start, runs.end))),
        }
    }
}
