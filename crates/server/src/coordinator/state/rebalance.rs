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

/// Fewest committed maps a prediction must rest on for the shuffle to be re-placed: one
/// map's output says little about the rest (the observation threshold, 10% by default,
/// makes it two maps from 20 maps up).
pub const MIN_OBSERVED_MAPS: u32 = 2;

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
/// prediction or one from fewer than [`MIN_OBSERVED_MAPS`] maps, fewer than two hosts, a
/// partition whose next pushes go to no live worker (a relocation is due), or a shuffle
/// that may share its layout ([`partnered`]). A host whose workers have no room left
/// counts (it may be the one to relieve) but takes no partition.
pub fn moves(
    members: &Membership,
    apps: &Apps,
    app_id: &str,
    shuffle_id: u32,
    tol: f64,
) -> Option<(Arc<ShuffleEntry>, Vec<PlannedMove>)> {
    let shuffle = apps.shuffle(app_id, shuffle_id).ok()?;
    let prediction = shuffle.prediction()?;
    if prediction.observed < MIN_OBSERVED_MAPS || partnered(apps, app_id, shuffle_id) {
        return None;
    }
    let sizes = prediction.sizes;
    // Hosts with a live worker, and those of their workers that have room.
    let mut hosts: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for w in members.iter().filter(|w| w.alive) {
        let room = hosts.entry(w.labels.host.as_str()).or_default();
        if !w.disk_full {
            room.push(w.id);
        }
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
            // The worker of the target host with the fewest bytes at its last heartbeat
            // (none when every worker there is out of room: that move is dropped).
            let target = hosts[names[m.to]]
                .iter()
                .filter_map(|&id| members.get(id))
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

/// Whether shuffle `shuffle_id` of `app_id` may share its layout with another of the app,
/// so that moving it alone could part a join's sides: it took another's primaries when it
/// registered, another took its own (`State::partner_layout`), or it was rebuilt after a
/// coordinator restart (the link is soft state, so unknown). True for an unknown shuffle.
pub fn partnered(apps: &Apps, app_id: &str, shuffle_id: u32) -> bool {
    let (Ok(shuffle), Ok(app)) = (apps.shuffle(app_id, shuffle_id), apps.get(app_id)) else {
        return true;
    };
    shuffle.partner.is_some()
        || shuffle.replayed
        || app.shuffles().any(|(_, s)| s.partner == Some(shuffle_id))
}
