//! Which partitions of a shuffle move to another host once its sizes are predicted
//! (SCache's placement on predicted sizes, issue 13), decided over the state by the pure
//! policy [`rebalance_from`]; `coordinator::rebalance` carries the moves out.
//!
//! The unit is the host, not the worker: a reduce task runs on a host and reads every
//! worker there locally, and the load to balance is the bytes reduce tasks will read on
//! each host. A partition is where its next pushes go (the primary of its chain's last
//! slot); a move continues it on a worker of the other host, so that the bytes of its
//! remaining maps land there.

use std::collections::BTreeMap;
use std::sync::Arc;

use crossdock_policy::rebalance::rebalance_from;
use crossdock_proto::NO_WORKER;

use super::apps::Apps;
use super::membership::Membership;
use super::progress::ShuffleEntry;

/// How far above SCache's MinHeap placement a host's predicted load may be before
/// partitions move off it: its locality tolerance's largest value (`placement::locality_tolerance`).
pub const REBALANCE_TOLERANCE: f64 = 0.1;

/// Fewest maps a shuffle must have to be re-placed: with fewer, the prediction rests on one
/// map's output and few maps are left to push to the new place.
pub const MIN_MAPS: u32 = 10;

/// One partition to continue on another host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedMove {
    pub partition: u32,
    /// The worker (on the other host) the partition continues on.
    pub target: u32,
    /// Its predicted bytes.
    pub bytes: u64,
}

/// The moves that balance a predicted shuffle's partitions over the hosts of `members`,
/// with the shuffle (`State::rebalance_moves`); `None` when there is nothing to decide: no
/// prediction, fewer than [`MIN_MAPS`] maps, fewer than two hosts with a live worker that has room, a partition whose
/// next pushes go to no live worker (a relocation is due), or a shuffle that shares its
/// layout with another of the app (a join's sides: one took the other's primaries when it
/// registered, `State::partner_layout`; moving one side alone would part them).
pub fn moves(
    members: &Membership,
    apps: &Apps,
    app_id: &str,
    shuffle_id: u32,
    tol: f64,
) -> Option<(Arc<ShuffleEntry>, Vec<PlannedMove>)> {
    let shuffle = apps.shuffle(app_id, shuffle_id).ok()?;
    if shuffle.num_maps < MIN_MAPS {
        return None;
    }
    let sizes = shuffle.prediction()?.sizes;
    let partnered = shuffle.partner.is_some()
        || apps
            .get(app_id)
            .ok()?
            .shuffles()
            .any(|(_, s)| s.partner == Some(shuffle_id));
    if partnered {
        return None;
    }
    // Hosts with a live worker that has room, and those workers.
    let mut hosts: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for w in members.iter().filter(|w| w.alive && !w.disk_full) {
        hosts.entry(w.labels.host.as_str()).or_default().push(w.id);
    }
    if hosts.len() < 2 {
        return None;
    }
    let index: BTreeMap<&str, usize> = hosts.keys().enumerate().map(|(i, h)| (*h, i)).collect();
    let current: Vec<usize> = {
        let p = shuffle.lock();
        let mut out = Vec::with_capacity(sizes.len());
        for part in 0..sizes.len() as u32 {
            let w = p.copies(p.chain_tail(part)).0;
            if w == NO_WORKER || !members.is_alive(w) {
                return None;
            }
            let host = members.labels_of(w).host;
            out.push(*index.get(host.as_str())?);
        }
        out
    };
    let decided = rebalance_from(&current, &sizes, hosts.len(), tol);
    let names: Vec<&str> = hosts.keys().copied().collect();
    let moves = decided
        .moves
        .iter()
        .filter_map(|m| {
            // The worker of the target host with the fewest bytes at its last heartbeat.
            let target = hosts[names[m.to]]
                .iter()
                .copied()
                .filter_map(|id| members.iter().find(|w| w.id == id))
                .min_by_key(|w| (w.load.stored + w.load.buffered, w.id))?
                .id;
            Some(PlannedMove {
                partition: m.partition as u32,
                target,
                bytes: sizes[m.partition],
            })
        })
        .collect();
    Some((shuffle, moves))
}
