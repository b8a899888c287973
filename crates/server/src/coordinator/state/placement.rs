//! Where partitions go: a new shuffle's layout, and the moves when a worker is lost.
//! The choice of worker is the pure policy of `crossdock_policy::load_aware`.

use crossdock_proto::codec::Appended;
use std::collections::BTreeSet;

use crossdock_policy::load_aware::{place_in_blocks, place_partitions, WorkerLoad};
use crossdock_policy::replica::{self, Site};
use crossdock_policy::split::{split_target, Peer};
use crossdock_proto::{Message, NO_SLOT, NO_WORKER};

use super::apps::Apps;
use super::error::StateError;
use super::membership::{Labels, Membership};
use super::progress::{Progress, ShuffleEntry};

/// Size assumed for a partition before anything is known about it. It makes a worker's
/// load grow with every partition placed on it, so one shuffle spreads over the workers
/// instead of landing on whichever had the fewest bytes a heartbeat ago.
pub const PARTITION_SIZE_ESTIMATE: u64 = 64 << 20;

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

/// Placement decisions over the current membership and shuffles.
pub struct Placer<'a> {
    pub members: &'a Membership,
    pub apps: &'a Apps,
    /// Copies of each partition: 1 (primary only) or 2 (primary and replica).
    pub replication: u32,
}

impl Placer<'_> {
    /// The layout of a new shuffle of `num_partitions`: (primary, replica) per
    /// partition, on the least loaded live workers with room on their disks, in one
    /// contiguous block of partitions per worker ([`place_in_blocks`]: a reduce task that
    /// Spark's adaptive execution gives several neighbouring partitions then finds them on
    /// one worker, and runs on its host).
    ///
    /// `prior`: sizes the partitions are expected to have (the app's earlier shuffle of as
    /// many partitions), or none: every partition then counts [`PARTITION_SIZE_ESTIMATE`].
    /// A prior is blended half and half with its own mean, because it may come from another
    /// stage of the app with other data: a skewed prior then moves the block boundaries
    /// toward its heavy partitions without ever giving one worker more than twice its
    /// share of a shuffle that turns out uniform.
    pub fn plan(
        &self,
        num_partitions: u32,
        prior: Option<&[u64]>,
    ) -> Result<(Vec<u32>, Vec<u32>), StateError> {
        let loads = self.live_loads();
        if loads.is_empty() {
            let full = self
                .members
                .iter()
                .filter(|w| w.alive && w.disk_full)
                .count();
            return Err(if full > 0 {
                StateError::AllDisksFull { full }
            } else {
                StateError::NoWorkers
            });
        }
        let live: Vec<u32> = loads.iter().map(|l| l.id).collect();
        let estimate = match prior.filter(|p| p.len() == num_partitions as usize) {
            Some(prior) => blend_with_mean(prior),
            None => vec![PARTITION_SIZE_ESTIMATE; num_partitions as usize],
        };
        let primary = place_in_blocks(&loads, &estimate);
        let replica = self.replicas(&primary, &live);
        Ok((primary, replica))
    }

    /// The layout of a new shuffle whose primaries are `primary` (a partner shuffle's, see
    /// `State::partner_layout`), with replicas chosen as for any shuffle.
    pub fn plan_like(&self, primary: Vec<u32>) -> (Vec<u32>, Vec<u32>) {
        let live: Vec<u32> = self.live_loads().iter().map(|l| l.id).collect();
        let replica = self.replicas(&primary, &live);
        (primary, replica)
    }

    /// Where the split continuing `slot` of a shuffle goes: (primary, replica), chosen by
    /// [`split_target`] among the live workers with room that hold no copy of `slot`,
    /// by the memory they had free at their last heartbeat. `None` without such a worker.
    pub fn split_target(&self, p: &Progress, slot: u32) -> Option<(u32, u32)> {
        let partition = p.partition_of(slot);
        let holds_partition =
            |w: u32| (0..p.slots()).any(|s| p.partition_of(s) == partition && p.holds(s, w));
        let peers: Vec<Peer> = self
            .members
            .iter()
            .filter(|w| w.alive && !w.disk_full && !p.holds(slot, w.id))
            .map(|w| Peer {
                id: w.id,
                free_memory: w.memory_budget.saturating_sub(w.load.buffered),
                stored: w.load.stored,
                holds_partition: holds_partition(w.id),
            })
            .collect();
        let primary = split_target(&peers)?;
        let live: Vec<u32> = self.live_loads().iter().map(|l| l.id).collect();
        let labels = self.labels(&live);
        let replica = self.replica_for(slot, primary, &sites(&labels));
        Some((primary, replica))
    }

    /// Where the split continuing `slot` goes when the coordinator chose its worker
    /// `target` (a re-placement, `coordinator::rebalance`): (target, replica as for any
    /// split). `None` when `target` is not live, has no room or already holds `slot`.
    pub fn split_on(&self, p: &Progress, slot: u32, target: u32) -> Option<(u32, u32)> {
        let live: Vec<u32> = self.live_loads().iter().map(|l| l.id).collect();
        if !live.contains(&target) || p.holds(slot, target) {
            return None;
        }
        let labels = self.labels(&live);
        Some((target, self.replica_for(slot, target, &sites(&labels))))
    }

    /// Moves a shuffle's partitions off the lost worker `lost` (only partition `only`
    /// when given: a copy found corrupt). A partition that kept a copy is served by it
    /// (the replica is promoted). A partition that lost every copy is placed anew, and
    /// the maps that had written into it are to be revoked, so that the engine
    /// recomputes them. Copies in `keep` stay (a restarted worker found them whole).
    /// The caller holds the shuffle's layout guard.
    pub fn relocate(
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
        let labels = self.labels(&live);
        let sites = sites(&labels);
        let mut p = s.lock();
        let before = p.copies_per_worker();
        let mut changed: BTreeSet<u32> = BTreeSet::new();
        // Slots whose primary changed (not only their replica).
        let mut moved: BTreeSet<u32> = BTreeSet::new();
        let mut lost_parts: BTreeSet<u32> = BTreeSet::new();
        let mut degraded = 0;
        for part in 0..p.slots() {
            let i = part as usize;
            if keep.contains(&part) || only.is_some_and(|o| o != part) {
                continue; // a restarted worker that still holds this copy whole
            }
            if p.primary[i] == lost {
                let r = p.replica[i];
                if r != NO_WORKER && self.members.is_alive(r) {
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
                        p.replica[i] = self.replica_for(part, new, &sites);
                    }
                }
                changed.insert(part);
                moved.insert(part);
            } else if p.replica[i] == lost {
                p.replica[i] = NO_WORKER;
                degraded += 1;
                changed.insert(part);
            }
        }
        self.apps
            .moved(app_id, shuffle_id, s, &before, &p.copies_per_worker());
        // The slot a moved split continues: its primary redirects to the split's new worker.
        let parents: Vec<u32> = moved
            .iter()
            .filter(|&&q| p.primary[q as usize] != NO_WORKER)
            .filter_map(|&q| p.split_parent(q))
            .collect();
        changed.extend(parents);
        let holders: Vec<u32> = p
            .holders()
            .into_iter()
            .filter(|&w| self.members.is_alive(w))
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
                        self.members.addr_of(w),
                        self.prepare_message(app_id, shuffle_id, s, &p, w, parts),
                    )
                })
            })
            .collect();
        Relocation {
            prepares,
            holders: holders.iter().map(|&w| self.members.addr_of(w)).collect(),
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
                    self.members.addr_of(r)
                } else {
                    String::new()
                }
            })
            .collect();
        // Where each slot this worker is primary of continues, if it was split: sent only
        // when one was, so a new shuffle's message stays as small as before.
        let continued: Vec<Option<u32>> = parts
            .iter()
            .map(|&q| {
                p.split_of(q).filter(|&n| {
                    p.primary[q as usize] == worker && p.primary[n as usize] != NO_WORKER
                })
            })
            .collect();
        let (continued_in, continued_at) = if continued.iter().any(Option::is_some) {
            let slots = continued.iter().map(|c| c.unwrap_or(NO_SLOT)).collect();
            let addrs = continued
                .iter()
                .map(|c| {
                    c.map_or_else(String::new, |n| self.members.addr_of(p.primary[n as usize]))
                })
                .collect();
            (Appended(Some(slots)), Appended(Some(addrs)))
        } else {
            (Appended(None), Appended(None))
        };
        let limits = self.apps.limits(app_id);
        Message::PrepareShuffle {
            app_id: app_id.to_string(),
            shuffle_id,
            num_maps: s.num_maps,
            num_partitions: s.num_partitions,
            partitions: parts,
            forward_to,
            app_stored_quota: Appended::of(limits.stored_quota),
            app_memory_share_ppm: Appended::of(limits.memory_share_ppm),
            continued_in,
            continued_at,
        }
    }

    /// The replica of every partition whose primaries are `primary`, among `live`.
    fn replicas(&self, primary: &[u32], live: &[u32]) -> Vec<u32> {
        let labels = self.labels(live);
        let sites = sites(&labels);
        // Each primary's partitions take the candidates in turn.
        let mut turns: std::collections::HashMap<u32, u32> = Default::default();
        primary
            .iter()
            .map(|&w| {
                let turn = turns.entry(w).or_insert(0);
                *turn += 1;
                self.replica_for(*turn - 1, w, &sites)
            })
            .collect()
    }

    /// (id, labels) of each of `live`, for [`sites`].
    fn labels(&self, live: &[u32]) -> Vec<(u32, Labels)> {
        live.iter()
            .map(|&id| (id, self.members.labels_of(id)))
            .collect()
    }

    /// The replica of the `turn`-th partition placed on `primary`, among the live
    /// `sites`: in another zone when one has a live worker, else on another host
    /// ([`replica::replica_for`]). [`NO_WORKER`] with replication 1 or one worker.
    fn replica_for(&self, turn: u32, primary: u32, sites: &[Site]) -> u32 {
        if self.replication < 2 {
            return NO_WORKER;
        }
        // A primary that is not live (never a relocation's target) is looked up among
        // every worker.
        let gone;
        let own = match sites.iter().find(|s| s.id == primary) {
            Some(s) => *s,
            None => {
                gone = self.members.labels_of(primary);
                Site {
                    id: primary,
                    host: &gone.host,
                    zone: &gone.zone,
                }
            }
        };
        replica::replica_for(turn, &own, sites).unwrap_or(NO_WORKER)
    }

    /// Loads of the live workers with room: reported bytes, or the partitions placed on
    /// them counted at the estimate, whichever is larger.
    fn live_loads(&self) -> Vec<WorkerLoad> {
        // Live shuffles' partitions count as estimated bytes until the workers report
        // what they really hold.
        let assigned = self.apps.placed();
        self.members
            .iter()
            .filter(|w| w.alive && !w.disk_full)
            .map(|w| {
                let partitions = assigned.get(&w.id).copied().unwrap_or(0);
                let reported = w.load.stored + w.load.buffered;
                WorkerLoad {
                    id: w.id,
                    bytes: reported.max(partitions * PARTITION_SIZE_ESTIMATE),
                    partitions,
                }
            })
            .collect()
    }
}

/// The policy's view of workers and their labels.
fn sites(labels: &[(u32, Labels)]) -> Vec<Site<'_>> {
    labels
        .iter()
        .map(|(id, l)| Site {
            id: *id,
            host: &l.host,
            zone: &l.zone,
        })
        .collect()
}

/// `(size + mean) / 2` per partition (at least 1 byte each), for [`Placer::plan`].
fn blend_with_mean(sizes: &[u64]) -> Vec<u64> {
    let total: u128 = sizes.iter().map(|&s| u128::from(s)).sum();
    let mean = (total / sizes.len().max(1) as u128) as u64;
    sizes
        .iter()
        .map(|&s| (s / 2).saturating_add(mean / 2).max(1))
        .collect()
}
