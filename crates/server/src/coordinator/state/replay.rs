//! The coordinator's state as journal records, and back: a snapshot writes it out, a
//! restart replays the snapshot and the log after it.

use crate::app_limits::AppLimits;
use crossdock_proto::codec::Appended;
use std::time::Instant;

use super::apps::Apps;
use super::membership::Membership;
use super::progress::{invalid_runs, ShuffleEntry};
use crate::coordinator::journal::Record;

/// The whole durable state as records.
pub fn snapshot(members: &Membership, apps: &Apps) -> Vec<Record> {
    let mut out: Vec<Record> = members
        .iter()
        .map(|w| Record::Worker {
            id: w.id,
            addr: w.addr.clone(),
            incarnation: w.incarnation,
        })
        .collect();
    for (app_id, app) in apps.iter() {
        out.push(Record::App {
            app_id: app_id.clone(),
            lease_ms: app.lease.as_millis().min(u32::MAX as u128) as u32,
            stored_quota: Appended::of(app.limits.stored_quota),
            memory_share_ppm: Appended::of(app.limits.memory_share_ppm),
        });
        for (shuffle_id, s) in app.shuffles() {
            let p = s.lock();
            let n = s.num_partitions as usize;
            out.push(Record::Shuffle {
                app_id: app_id.clone(),
                shuffle_id,
                num_maps: s.num_maps,
                num_partitions: s.num_partitions,
                primary: p.primary[..n].to_vec(),
                replica: p.replica[..n].to_vec(),
            });
            for (i, &from) in p.split_from.iter().enumerate() {
                out.push(Record::Split {
                    app_id: app_id.clone(),
                    shuffle_id,
                    slot: (n + i) as u32,
                    from,
                    primary: p.primary[n + i],
                    replica: p.replica[n + i],
                });
            }
            for (m, &a) in p.map_attempts.iter().enumerate() {
                if !a.is_none() {
                    out.push(Record::Commit {
                        app_id: app_id.clone(),
                        shuffle_id,
                        map_id: m as u32,
                        attempt_id: a,
                        stats: p.map_stats[m].clone(),
                        run_starts: Appended(Some(p.map_runs[m].clone()).filter(|r| !r.is_empty())),
                    });
                }
            }
        }
    }
    out
}

/// Replays one record. Records naming an app or shuffle that no longer exists are
/// skipped (the journal is written in the order changes happened, but a deletion may
/// overtake a registration on another connection).
///
/// Size predictions are not journaled; replaying the commits rebuilds them (shuffles
/// predict at `prediction_threshold`, the setting of this run): a shuffle whose replayed
/// commits reach the threshold predicts from the first of them in the journal's order
/// (map order for those folded into a snapshot, the order they were made in for the
/// log's), so its prediction may differ from the one made before the restart. A shuffle that completes during replay is not scored (no
/// metrics, no log) but its final sizes go into its app's history.
pub fn apply(
    members: &mut Membership,
    apps: &mut Apps,
    r: Record,
    now: Instant,
    prediction_threshold: f64,
) {
    match r {
        Record::Worker {
            id,
            addr,
            incarnation,
        } => members.restore(id, addr, incarnation, now),
        Record::App {
            app_id,
            lease_ms,
            stored_quota,
            memory_share_ppm,
        } => {
            let _ = apps.register(&app_id, lease_ms.max(1), now);
            apps.set_limits(
                &app_id,
                AppLimits {
                    stored_quota: stored_quota.value(),
                    memory_share_ppm: memory_share_ppm.value(),
                },
            );
        }
        Record::AppGone { app_id } => {
            apps.remove(&app_id);
        }
        Record::Shuffle {
            app_id,
            shuffle_id,
            num_maps,
            num_partitions,
            primary,
            replica,
        } => {
            let whole = primary.len() == num_partitions as usize && replica.len() == primary.len();
            if whole {
                let entry = ShuffleEntry::new(num_maps, num_partitions, primary, replica)
                    .replayed()
                    .observing(prediction_threshold);
                apps.put_shuffle(&app_id, shuffle_id, entry);
            }
        }
        Record::Layout {
            app_id,
            shuffle_id,
            primary,
            replica,
        } => {
            if let Ok(s) = apps.shuffle(&app_id, shuffle_id) {
                let mut p = s.lock();
                if primary.len() == p.primary.len() && replica.len() == p.replica.len() {
                    let before = p.copies_per_worker();
                    p.primary = primary;
                    p.replica = replica;
                    apps.moved(&app_id, shuffle_id, &s, &before, &p.copies_per_worker());
                }
            }
        }
        Record::Commit {
            app_id,
            shuffle_id,
            map_id,
            attempt_id,
            stats,
            run_starts,
        } => {
            if let Ok(s) = apps.shuffle(&app_id, shuffle_id) {
                let slots = s.lock().slots();
                let runs = run_starts.0.unwrap_or_default();
                let valid = map_id < s.num_maps
                    && stats.iter().all(|x| x.partition < slots)
                    && invalid_runs(&stats, &runs).is_none();
                if valid {
                    let recorded = s.record_commit(map_id, attempt_id, &stats, &runs);
                    if let Some(done) = recorded.forecast.completed {
                        apps.remember_sizes(&app_id, done.final_sizes);
                    }
                }
            }
        }
        Record::Revoke {
            app_id,
            shuffle_id,
            maps,
        } => {
            if let Ok(s) = apps.shuffle(&app_id, shuffle_id) {
                s.lock().revoke(&maps);
            }
        }
        Record::ShuffleGone { app_id, shuffle_id } => {
            apps.remove_shuffle(&app_id, shuffle_id);
        }
        Record::Split {
            app_id,
            shuffle_id,
            slot,
            from,
            primary,
            replica,
        } => {
            if let Ok(s) = apps.shuffle(&app_id, shuffle_id) {
                let mut p = s.lock();
                if slot == p.slots() && from < slot && p.split_of(from).is_none() {
                    let before = p.copies_per_worker();
                    p.add_split(from, primary, replica);
                    apps.moved(&app_id, shuffle_id, &s, &before, &p.copies_per_worker());
                }
            }
        }
    }
}
