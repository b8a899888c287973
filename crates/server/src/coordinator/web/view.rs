//! What the web UI and the REST API show, read from the coordinator's state: plain
//! values, serialised as the API's JSON and rendered as the UI's pages, so the two can
//! never disagree.
//!
//! A view is taken in two steps: the workers and the shuffle list under the state's lock,
//! then each shuffle's progress under its own lock with the state's released (the order
//! commits take them in), so a page never holds up placement or commits for long.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use crossdock_proto::NO_WORKER;
use serde::Serialize;

use crate::coordinator::node::Coordinator;
use crate::coordinator::state::ShuffleEntry;

/// Buckets of a shuffle's partition-size histogram.
pub const HISTOGRAM_BUCKETS: usize = 10;

/// The whole service at a glance: `GET /api/v1/cluster`.
#[derive(Debug, Clone, Serialize)]
pub struct Cluster {
    /// The coordinator's build.
    pub version: &'static str,
    /// The coordinator's protocol endpoint.
    pub coordinator: String,
    /// Copies of every partition (1 or 2).
    pub replication: u32,
    pub apps: usize,
    pub shuffles: usize,
    pub workers_alive: usize,
    pub workers_lost: usize,
    /// Sum of the live workers' memory budgets.
    pub memory_budget: u64,
    /// Bytes the live workers hold in memory.
    pub buffered_bytes: u64,
    /// Bytes the live workers hold on disk.
    pub stored_bytes: u64,
    /// Bytes of the live workers' partition files in the object store.
    pub object_bytes: u64,
    /// Payload bytes per second pushed to the live workers (between their last heartbeats).
    pub push_bytes_per_sec: f64,
    /// Payload bytes per second the live workers sent to readers.
    pub fetch_bytes_per_sec: f64,
}

/// One worker: `GET /api/v1/workers`.
#[derive(Debug, Clone, Serialize)]
pub struct Worker {
    pub id: u32,
    /// Its data endpoint, `host:port`.
    pub addr: String,
    /// The machine it runs on, as engines name hosts.
    pub host: String,
    /// Its failure domain; empty when unlabelled.
    pub zone: String,
    /// `alive`, `lost` (missed its heartbeat deadline) or `disk full` (alive, placed on no more).
    pub state: &'static str,
    pub memory_budget: u64,
    pub buffered_bytes: u64,
    pub stored_bytes: u64,
    /// Bytes of its partition files in the object store (the third tier).
    pub object_bytes: u64,
    pub push_bytes_per_sec: f64,
    pub fetch_bytes_per_sec: f64,
    /// Payload bytes accepted from pushes since the worker process started (as of its
    /// last heartbeat).
    pub pushed_bytes: u64,
    /// Payload bytes sent to readers since the worker process started.
    pub fetched_bytes: u64,
    /// Copies of partitions (primaries and replicas) it holds over every shuffle.
    pub partition_copies: u64,
    /// Milliseconds since its last heartbeat.
    pub last_heartbeat_ms: u64,
}

/// One registered app and its shuffles: an element of `GET /api/v1/apps`.
#[derive(Debug, Clone, Serialize)]
pub struct App {
    pub app_id: String,
    pub lease_ms: u64,
    /// Milliseconds until its lease runs out unless renewed.
    pub expires_in_ms: u64,
    pub shuffles: Vec<ShuffleSummary>,
}

/// A shuffle in a line.
#[derive(Debug, Clone, Serialize)]
pub struct ShuffleSummary {
    pub shuffle_id: u32,
    pub num_maps: u32,
    pub maps_committed: u32,
    pub num_partitions: u32,
    /// Committed bytes over every partition.
    pub bytes: u64,
    pub records: u64,
    pub largest_partition_bytes: u64,
    pub median_partition_bytes: u64,
    /// Largest partition over the mean: 1 when even, the partition count when one holds
    /// everything; 0 before anything is committed.
    pub skew: f64,
}

/// One partition of a shuffle.
#[derive(Debug, Clone, Serialize)]
pub struct Partition {
    pub partition: u32,
    pub bytes: u64,
    pub records: u64,
    /// The size predicted from the first maps' commits, once made.
    pub predicted_bytes: Option<u64>,
    /// The primary copy's worker address.
    pub primary: String,
    /// The replica's worker address, if the partition has one.
    pub replica: Option<String>,
}

/// One bar of a partition-size histogram: partitions of `lo..=hi` bytes.
#[derive(Debug, Clone, Serialize)]
pub struct Bucket {
    pub lo: u64,
    pub hi: u64,
    pub partitions: u32,
}

/// One shuffle in full: `GET /api/v1/apps/{app}/shuffles/{id}`.
#[derive(Debug, Clone, Serialize)]
pub struct Shuffle {
    pub app_id: String,
    #[serde(flatten)]
    pub summary: ShuffleSummary,
    /// Maps committed when the sizes were predicted, if they were.
    pub predicted_after_maps: Option<u32>,
    /// Partition sizes in equal-width buckets from 0 to the largest: skew shows as a few
    /// partitions far to the right.
    pub histogram: Vec<Bucket>,
    pub partitions: Vec<Partition>,
}

/// A shuffle as listed under the state's lock, read after it is released.
struct Listed {
    app_id: String,
    shuffle_id: u32,
    entry: Arc<ShuffleEntry>,
}

/// Everything the overview page shows, taken at once.
pub struct Overview {
    pub cluster: Cluster,
    pub workers: Vec<Worker>,
    pub apps: Vec<App>,
}

/// The cluster, its workers and its apps.
pub fn overview(coord: &Coordinator) -> Overview {
    let now = Instant::now();
    let (mut workers, mut apps, listed) = {
        let st = coord.lock();
        let workers: Vec<Worker> = st
            .workers()
            .map(|w| Worker {
                id: w.id,
                addr: w.addr.clone(),
                host: w.labels.host.clone(),
                zone: w.labels.zone.clone(),
                state: match (w.alive, w.disk_full) {
                    (false, _) => "lost",
                    (true, true) => "disk full",
                    (true, false) => "alive",
                },
                memory_budget: w.memory_budget,
                buffered_bytes: w.load.buffered,
                stored_bytes: w.load.stored,
                object_bytes: w.load.object,
                push_bytes_per_sec: w.rates.push,
                fetch_bytes_per_sec: w.rates.fetch,
                pushed_bytes: w.load.pushed,
                fetched_bytes: w.load.fetched,
                partition_copies: 0,
                last_heartbeat_ms: now.saturating_duration_since(w.last_seen).as_millis() as u64,
            })
            .collect();
        let mut apps = Vec::new();
        let mut listed = Vec::new();
        for (id, app) in st.apps() {
            apps.push(App {
                app_id: id.clone(),
                lease_ms: app.lease.as_millis() as u64,
                expires_in_ms: app.expires.saturating_duration_since(now).as_millis() as u64,
                shuffles: Vec::new(),
            });
            for (shuffle_id, entry) in app.shuffles() {
                listed.push(Listed {
                    app_id: id.clone(),
                    shuffle_id,
                    entry: entry.clone(),
                });
            }
        }
        (workers, apps, listed)
    };
    // Each shuffle's progress, with the state's lock released.
    let mut copies: HashMap<u32, u64> = HashMap::new();
    let mut by_app: HashMap<String, Vec<ShuffleSummary>> = HashMap::new();
    for l in &listed {
        let p = l.entry.lock();
        for (w, n) in p.copies_per_worker() {
            *copies.entry(w).or_default() += n;
        }
        let summary = summarise(
            l.shuffle_id,
            &l.entry,
            p.committed(),
            &p.logical_bytes(),
            p.partition_records().iter().sum(),
        );
        by_app.entry(l.app_id.clone()).or_default().push(summary);
    }
    for w in &mut workers {
        w.partition_copies = copies.get(&w.id).copied().unwrap_or(0);
    }
    for a in &mut apps {
        a.shuffles = by_app.remove(&a.app_id).unwrap_or_default();
        a.shuffles.sort_by_key(|s| s.shuffle_id);
    }
    apps.sort_by(|a, b| a.app_id.cmp(&b.app_id));
    let live = workers.iter().filter(|w| w.state != "lost");
    let cluster = Cluster {
        version: env!("CARGO_PKG_VERSION"),
        coordinator: coord.addr.to_string(),
        replication: coord.cfg.replication,
        apps: apps.len(),
        shuffles: listed.len(),
        workers_alive: live.clone().count(),
        workers_lost: workers.iter().filter(|w| w.state == "lost").count(),
        memory_budget: live.clone().map(|w| w.memory_budget).sum(),
        buffered_bytes: live.clone().map(|w| w.buffered_bytes).sum(),
        stored_bytes: live.clone().map(|w| w.stored_bytes).sum(),
        object_bytes: live.clone().map(|w| w.object_bytes).sum(),
        push_bytes_per_sec: live.clone().map(|w| w.push_bytes_per_sec).sum(),
        fetch_bytes_per_sec: live.map(|w| w.fetch_bytes_per_sec).sum(),
    };
    Overview {
        cluster,
        workers,
        apps,
    }
}

/// One shuffle in full, or `None` if the app or the shuffle is not registered.
pub fn shuffle(coord: &Coordinator, app_id: &str, shuffle_id: u32) -> Option<Shuffle> {
    let (entry, addrs) = {
        let st = coord.lock();
        let entry = st.shuffle(app_id, shuffle_id).ok()?;
        let addrs: HashMap<u32, String> = st.workers().map(|w| (w.id, w.addr.clone())).collect();
        (entry, addrs)
    };
    let prediction = entry.prediction();
    let p = entry.lock();
    let (primary, replica) = p.layout();
    // A split partition shows as one, its splits' figures folded in.
    let (bytes, records) = (&p.logical_bytes()[..], &p.logical_records()[..]);
    let addr = |w: u32| addrs.get(&w).cloned().unwrap_or_default();
    let partitions = (0..entry.num_partitions as usize)
        .map(|i| Partition {
            partition: i as u32,
            bytes: bytes[i],
            records: records[i],
            predicted_bytes: prediction.as_ref().and_then(|x| x.sizes.get(i).copied()),
            primary: addr(primary[i]),
            replica: (replica[i] != NO_WORKER).then(|| addr(replica[i])),
        })
        .collect();
    Some(Shuffle {
        app_id: app_id.to_string(),
        summary: summarise(
            shuffle_id,
            &entry,
            p.committed(),
            bytes,
            records.iter().sum(),
        ),
        predicted_after_maps: prediction.as_ref().map(|x| x.observed),
        histogram: histogram(bytes, HISTOGRAM_BUCKETS),
        partitions,
    })
}

fn summarise(
    shuffle_id: u32,
    entry: &ShuffleEntry,
    committed: u32,
    bytes: &[u64],
    records: u64,
) -> ShuffleSummary {
    let largest = bytes.iter().copied().max().unwrap_or(0);
    let median = median(bytes);
    let total: u64 = bytes.iter().sum();
    ShuffleSummary {
        shuffle_id,
        num_maps: entry.num_maps,
        maps_committed: committed,
        num_partitions: entry.num_partitions,
        bytes: total,
        records,
        largest_partition_bytes: largest,
        median_partition_bytes: median,
        skew: if total == 0 {
            0.0
        } else {
            largest as f64 * bytes.len() as f64 / total as f64
        },
    }
}

/// The median of `v` (the upper one of an even count), 0 for none.
fn median(v: &[u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let mut s = v.to_vec();
    let mid = s.len() / 2;
    *s.select_nth_unstable(mid).1
}

/// `sizes` counted in `n` equal-width buckets from 0 to the largest. Every size falls in
/// exactly one bucket; with nothing committed, one bucket holds every partition.
pub fn histogram(sizes: &[u64], n: usize) -> Vec<Bucket> {
    let max = sizes.iter().copied().max().unwrap_or(0);
    if max == 0 {
        return vec![Bucket {
            lo: 0,
            hi: 0,
            partitions: sizes.len() as u32,
        }];
    }
    // Width rounded up, so that n buckets cover 0..=max.
    let width = (max / n as u64) + 1;
    let mut buckets: Vec<Bucket> = (0..n as u64)
        .map(|i| Bucket {
            lo: i * width,
            hi: ((i + 1) * width - 1).min(max),
            partitions: 0,
        })
        .filter(|b| b.lo <= max)
        .collect();
    for &s in sizes {
        buckets[(s / width) as usize].partitions += 1;
    }
    buckets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_puts_every_size_in_one_bucket() {
        let sizes = [0, 5, 9, 10, 99, 100, 1000];
        let h = histogram(&sizes, 10);
        assert_eq!(h.len(), 10);
        assert_eq!(h.iter().map(|b| b.partitions).sum::<u32>(), 7);
        assert_eq!((h[0].lo, h[9].hi), (0, 1000));
        // 0, 5, 9, 10, 99, 100 are below the first bound (101); 1000 is alone at the top.
        assert_eq!(h[0].partitions, 6);
        assert_eq!(h[9].partitions, 1);
        for s in sizes {
            assert_eq!(
                h.iter().filter(|b| b.lo <= s && s <= b.hi).count(),
                1,
                "{s}"
            );
        }
    }

    #[test]
    fn histogram_of_small_or_empty_sizes() {
        assert_eq!(histogram(&[0, 0], 10)[0].partitions, 2);
        let h = histogram(&[1, 2, 3], 10);
        // Width 1: buckets 0..=0 to 3..=3 only.
        assert_eq!(h.len(), 4);
        assert_eq!(
            h.iter().map(|b| b.partitions).collect::<Vec<_>>(),
            [0, 1, 1, 1]
        );
    }

    #[test]
    fn median_is_the_upper_middle() {
        assert_eq!(median(&[]), 0);
        assert_eq!(median(&[3, 1, 2]), 2);
        assert_eq!(median(&[4, 1, 3, 2]), 3);
    }
}
