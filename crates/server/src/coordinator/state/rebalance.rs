//! Which partitions of a shuffle move to another host once its sizes are predicted
//! (SCache's placement on predicted sizes, issue 13), decided over the state by the pure
//! policy [`rebalance_over`]; `coordinator::rebalance` carries the moves out.
//!
//! The unit is the host, not the worker: a reduce task runs on a host and reads every
//! worker there locally, and the load to balance is the bytes reduce tasks will read on
//! each host. A partition is where its next pushes go (the primary of its chain's last
//! slot); a move continues it on a worker of the other host, so that the bytes of its
//! remaining maps land there.
//!
//! Shuffles that share a layout (a join's sides: the later took the earlier's primaries
//! when it registered, `State::partner_layout`) are decided together, as SCache's
//! accumulate scheduling does for the shuffles of one job (paper 003 §3.2.4, Algorithm 2):
//! their predicted sizes are summed per partition, since reduce task `p` reads partition
//! `p` of each, and partition `p` of every one of them moves to the same worker. So a
//! join's hot partitions leave their host as a pair and the reduce task that joins them
//! still finds both sides on one host. The group is decided once, when every side still
//! writing has its prediction; a side that finished its maps takes part with its bytes
//! where they are (bytes already pushed never follow a move).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossdock_policy::rebalance::rebalance_over;
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
    /// Its predicted bytes still to come, summed over the layout's shuffles.
    pub bytes: u64,
}

/// A decided re-placement: the shuffles that share the layout (by id, with the one whose
/// prediction completed the set among them) and the partitions to move in every one.
#[derive(Debug)]
pub struct Decided {
    pub shuffles: Vec<(u32, Arc<ShuffleEntry>)>,
    pub moves: Vec<PlannedMove>,
}

/// The moves that balance the predicted partitions of shuffle `shuffle_id` and of the
/// shuffles sharing its layout ([`layout_group`]) over the hosts of `members`, deciding
/// the group (`State::rebalance_moves`). The load of a host is what reduce tasks will read
/// there: the bytes already committed, which stay on their slots' hosts whatever moves,
/// and the bytes still to come (each side's prediction less what it committed), which
/// follow a partition that moves ([`rebalance_over`]). Only a partition most of whose
/// bytes are still to come may move.
///
/// `None` when there is nothing to decide now or ever: the group was decided already; a
/// side still writing has no prediction yet (its own will decide); every side committed
/// every map; the side with the most bytes to come predicted from fewer than
/// [`MIN_OBSERVED_MAPS`] maps (a smaller side may rest on one: a join's small side of few
/// maps barely weighs on the sums); the group includes a shuffle rebuilt after a
/// coordinator restart (links unknown); fewer than two hosts; a slot holding bytes, or a
/// partition's last slot, on no live worker (a relocation is due; it asks again). A host
/// whose workers have no room left counts (it may be the one to relieve) but takes no
/// partition. Only the outcomes that settle the group mark it decided.
pub fn moves(
    members: &Membership,
    apps: &Apps,
    app_id: &str,
    shuffle_id: u32,
    tol: f64,
) -> Option<Decided> {
    let group = layout_group(apps, app_id, shuffle_id)?;
    let decided = |group: &[(u32, Arc<ShuffleEntry>)]| {
        for (_, s) in group {
            s.rebalance_decided.store(true, Ordering::Relaxed);
        }
    };
    if group
        .iter()
        .any(|(_, s)| s.rebalance_decided.load(Ordering::Relaxed))
    {
        return None;
    }
    // Hosts with a live worker, and those of their workers that have room.
    let mut hosts: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for w in members.iter().filter(|w| w.alive) {
        let room = hosts.entry(w.labels.host.as_str()).or_default();
        if !w.disk_full {
            room.push(w.id);
        }
    }
    if hosts.len() < 2 {
        decided(&group);
        return None;
    }
    let index: BTreeMap<&str, usize> = hosts.keys().enumerate().map(|(i, h)| (*h, i)).collect();
    let host_index = |w: u32| -> Option<usize> {
        if w == NO_WORKER || !members.is_alive(w) {
            return None;
        }
        index.get(members.labels_of(w).host.as_str()).copied()
    };
    // Bytes committed per host, and bytes to come per partition summed over the sides
    // (Algorithm 2's accumulation).
    let num_partitions = group[0].1.num_partitions as usize;
    let mut base = vec![0u64; hosts.len()];
    // Bytes committed per partition, summed over the sides.
    let mut done_all = vec![0u64; num_partitions];
    // Of each side still writing: its bytes to come per partition, and the host its next
    // pushes of each partition go to (its chain's last slot).
    let mut open: Vec<(Vec<u64>, Vec<usize>)> = Vec::new();
    // (bytes to come, maps its prediction rests on) of the side with the most to come.
    let mut largest: Option<(u64, u32)> = None;
    for (_, s) in &group {
        let prediction = s.prediction();
        let p = s.lock();
        for (slot, &b) in p.partition_bytes().iter().enumerate() {
            // An empty slot weighs nothing, wherever it is; bytes on a lost worker wait for
            // their relocation (`coordinator::recovery` asks again once it is done).
            if b > 0 {
                base[host_index(p.copies(slot as u32).0)?] += b;
            }
        }
        let committed = p.logical_bytes();
        if committed.len() != num_partitions {
            decided(&group);
            return None;
        }
        for (sum, &b) in done_all.iter_mut().zip(&committed) {
            *sum += b;
        }
        if p.committed() >= s.num_maps {
            continue;
        }
        let prediction = prediction?;
        if prediction.sizes.len() != num_partitions {
            decided(&group);
            return None;
        }
        let rest: Vec<u64> = prediction
            .sizes
            .iter()
            .zip(&committed)
            .map(|(&predicted, &done)| predicted.saturating_sub(done))
            .collect();
        let mut tails = Vec::with_capacity(num_partitions);
        for part in 0..num_partitions as u32 {
            tails.push(host_index(p.copies(p.chain_tail(part)).0)?);
        }
        let to_come: u64 = rest.iter().sum();
        if largest.is_none_or(|(most, _)| to_come > most) {
            largest = Some((to_come, prediction.observed));
        }
        open.push((rest, tails));
    }
    if largest.is_none_or(|(_, observed)| observed < MIN_OBSERVED_MAPS) {
        decided(&group);
        return None;
    }
    // Where each partition's next pushes go, and its bytes to come. A partition moves only
    // when the sides still writing continue it on one host (they share the layout, but a
    // worker's own split of one side, or a move that failed on one side, can part them),
    // and while most of its bytes are still to come: its reduce task then runs on the new
    // host, the one holding most of it, and reads the rest across. One whose committed
    // bytes outweigh the rest (a join side written before the other was predicted) stays.
    // A partition that stays has its bytes to come counted where each side puts them.
    let mut current = vec![0usize; num_partitions];
    let mut sizes = vec![0u64; num_partitions];
    for part in 0..num_partitions {
        let host = open[0].1[part];
        let rest: u64 = open.iter().map(|(r, _)| r[part]).sum();
        current[part] = host;
        if open.iter().all(|(_, t)| t[part] == host) && done_all[part] < rest {
            sizes[part] = rest;
        } else {
            for (r, t) in &open {
                base[t[part]] += r[part];
            }
        }
    }
    let chosen = rebalance_over(&current, &sizes, &base, tol);
    let names: Vec<&str> = hosts.keys().copied().collect();
    let moves = chosen
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
    decided(&group);
    Some(Decided {
        shuffles: group,
        moves,
    })
}

/// The shuffles of `app_id` that share shuffle `shuffle_id`'s layout, itself included,
/// ordered by id: those linked to it through partner links (`ShuffleEntry::partner`, one
/// side took the other's primaries), transitively. `None` for an unknown shuffle or a
/// group with a shuffle rebuilt after a coordinator restart (the links are soft state,
/// so its partners are unknown). A partner unregistered since is left out.
pub fn layout_group(
    apps: &Apps,
    app_id: &str,
    shuffle_id: u32,
) -> Option<Vec<(u32, Arc<ShuffleEntry>)>> {
    let app = apps.get(app_id).ok()?;
    let mut group: BTreeMap<u32, Arc<ShuffleEntry>> = BTreeMap::new();
    let mut next = vec![shuffle_id];
    while let Some(id) = next.pop() {
        if group.contains_key(&id) {
            continue;
        }
        let Ok(s) = apps.shuffle(app_id, id) else {
            // A partner unregistered since (its reduce stage is over) shares nothing now.
            if id == shuffle_id {
                return None;
            }
            continue;
        };
        if s.replayed {
            return None;
        }
        next.extend(s.partner);
        next.extend(
            app.shuffles()
                .filter(|(_, other)| other.partner == Some(id))
                .map(|(other_id, _)| other_id),
        );
        group.insert(id, s);
    }
    Some(group.into_iter().collect())
}
