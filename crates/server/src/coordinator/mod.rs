//! The coordinator: worker membership, app leases, shuffle placement and map commits.
//!
//! It holds no shuffle data. Its decisions reach the workers as calls on their data
//! endpoints (`PrepareShuffle`, `MapCommitted`, `DeleteShuffle`, `DeleteApp`).

mod conn;
pub mod journal;
mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossdock_client::{ClientError, RpcConnection};
use crossdock_proto::{Durability, Message};
use tokio::net::TcpListener;

use crate::metrics::{describe, sample, Render};
use crate::ShutdownSignal;
pub use state::{CoordinatorMetrics, State};

/// How a coordinator runs.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// Address to listen on.
    pub listen: String,
    /// Directory for the coordinator's own files.
    pub data_dir: PathBuf,
    /// A worker that sends no heartbeat for this long is marked lost.
    pub worker_timeout: Duration,
    /// How often workers send heartbeats.
    pub heartbeat: Duration,
    /// Copies of every partition: 1, or 2 (a primary and a replica on another worker).
    pub replication: u32,
    /// Sync the state journal to the device on every change (survives a machine crash;
    /// without it, only a crash of the coordinator process).
    pub fsync: bool,
    /// The commit rule: a map counts once its data is held by its workers (`Memory`),
    /// written and synced to their disks (`Disk`), or stored in their object store
    /// (`ObjectStore`).
    pub durability: Durability,
}

/// The log is compacted into a new snapshot once it holds this many bytes.
const COMPACT_AFTER: u64 = 64 << 20;

impl CoordinatorConfig {
    /// Defaults: heartbeats every second, a worker is lost after 10 s of silence.
    pub fn new(listen: impl Into<String>, data_dir: impl Into<PathBuf>) -> Self {
        CoordinatorConfig {
            listen: listen.into(),
            data_dir: data_dir.into(),
            worker_timeout: Duration::from_secs(10),
            heartbeat: Duration::from_secs(1),
            replication: 1,
            fsync: true,
            durability: Durability::Memory,
        }
    }
}

/// A running coordinator.
pub struct Coordinator {
    pub addr: SocketAddr,
    pub cfg: CoordinatorConfig,
    pub state: Mutex<State>,
    pub metrics: CoordinatorMetrics,
    journal: journal::Journal,
    worker_conns: crate::peers::Peers,
}

impl Coordinator {
    /// Binds and serves until `shutdown` fires.
    pub async fn start(
        cfg: CoordinatorConfig,
        shutdown: ShutdownSignal,
    ) -> std::io::Result<Arc<Coordinator>> {
        std::fs::create_dir_all(&cfg.data_dir)?;
        let (journal, replay) = journal::Journal::open(&cfg.data_dir, cfg.fsync)?;
        let mut state = State::new(cfg.replication);
        let restored = replay.len();
        let now = std::time::Instant::now();
        for r in replay {
            state.apply(r, now);
        }
        journal.compact(&state.snapshot())?;
        if restored > 0 {
            let (apps, shuffles, workers, _) = state.counts();
            tracing::info!(apps, shuffles, workers, records = restored, dir = %cfg.data_dir.display(), "coordinator state restored");
        }
        let listener = TcpListener::bind(&cfg.listen).await?;
        let addr = listener.local_addr()?;
        if !(1..=2).contains(&cfg.replication) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("replication must be 1 or 2, not {}", cfg.replication),
            ));
        }
        let coord = Arc::new(Coordinator {
            addr,
            state: Mutex::new(state),
            journal,
            cfg,
            metrics: CoordinatorMetrics::default(),
            worker_conns: crate::peers::Peers::default(),
        });
        tracing::info!(%addr, "coordinator listening");
        let c = coord.clone();
        tokio::spawn(crate::accept_loop(
            "coordinator",
            listener,
            shutdown.clone(),
            move |stream| conn::serve(stream, c.clone()),
        ));
        tokio::spawn(sweeper(coord.clone(), shutdown));
        Ok(coord)
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("coordinator state lock poisoned")
    }

    /// Makes changes already applied in memory durable, before they are acknowledged.
    /// Never call it holding the state lock (compaction takes it under the journal's).
    pub(crate) fn log(&self, records: &[journal::Record]) -> Result<(), crate::ServerError> {
        self.journal.append(records).map_err(|e| {
            tracing::error!(error = %e, "could not write the coordinator's journal");
            crate::ServerError::io("writing the coordinator's state journal", e)
        })
    }

    /// Replaces the journal's log with a snapshot once it grew large.
    fn maybe_compact(&self) {
        if self.journal.wal_bytes() < COMPACT_AFTER {
            return;
        }
        if let Err(e) = self.journal.compact_with(|| self.lock().snapshot()) {
            tracing::error!(error = %e, "could not compact the coordinator's journal");
        }
    }

    /// Calls a worker's data endpoint, reconnecting once if the cached connection broke.
    pub(crate) async fn call_worker(
        &self,
        addr: &str,
        msg: &Message,
    ) -> Result<Message, ClientError> {
        for attempt in 0..2 {
            let conn = self.worker_conns.get(addr).await?;
            match tokio::time::timeout(Duration::from_secs(30), conn.call(msg)).await {
                Ok(Err(e)) if e.is_transport() && attempt == 0 => continue,
                Ok(res) => return res,
                Err(_) => {
                    return Err(ClientError::Io {
                        addr: addr.to_string(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "worker did not answer within 30 s",
                        ),
                    })
                }
            }
        }
        unreachable!("the loop returns on its second pass")
    }
}

/// Moves every shuffle off a worker just marked lost (see [`State::relocate`]) and
/// tells the workers: the new copies are prepared, forwarding to the lost replica
/// stops, and the commits of maps whose only copy was lost are revoked everywhere so
/// that a rerun of them is accepted.
pub(crate) async fn handle_loss(coord: &Arc<Coordinator>, lost: u32) {
    relocate_all(coord, lost, None).await
}

/// A worker found its copy of one partition corrupt: that copy is handled as lost (the
/// replica takes over, or the partition moves and the maps that wrote into it are
/// revoked), the rest of the worker is fine.
pub(crate) async fn handle_corruption(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    partition: u32,
    worker_addr: &str,
) -> Result<(), crate::ServerError> {
    let (s, worker) = {
        let st = coord.lock();
        let s = st.shuffle(app_id, shuffle_id)?;
        let worker = st.worker_by_addr(worker_addr).ok_or_else(|| {
            crate::ServerError::new(
                crossdock_proto::ErrorCode::UnknownWorker,
                format!("no worker at {worker_addr}"),
            )
        })?;
        (s, worker)
    };
    let _serial = s.commit_lock.lock().await;
    {
        let p = s.lock();
        let i = partition as usize;
        if i >= p.primary.len() || (p.primary[i] != worker && p.replica[i] != worker) {
            return Ok(()); // already moved
        }
    }
    let r = coord.lock().relocate_some(
        app_id,
        shuffle_id,
        &s,
        worker,
        &std::collections::BTreeSet::new(),
        Some(partition),
    );
    let revoked = apply_relocation(coord, app_id, shuffle_id, &s, r).await;
    tracing::warn!(app = %app_id, shuffle_id, partition, worker, revoked_maps = revoked, "a corrupt copy no longer counts");
    Ok(())
}

/// A worker restarted (new incarnation) before anyone declared it lost: it recovered
/// its partition files, so it is asked which copies it still holds whole (committed
/// bytes all there); those stay where they are, the rest is handled as lost.
pub(crate) async fn handle_restart(coord: &Arc<Coordinator>, worker: u32, addr: &str) {
    relocate_all(coord, worker, Some(addr)).await
}

async fn relocate_all(coord: &Arc<Coordinator>, lost: u32, restarted_at: Option<&str>) {
    let shuffles = coord.lock().shuffles_on(lost);
    for (app_id, shuffle_id, s) in shuffles {
        let _serial = s.commit_lock.lock().await;
        let mut keep = std::collections::BTreeSet::new();
        if let Some(addr) = restarted_at {
            let check = {
                let p = s.lock();
                p.copy_check(&app_id, shuffle_id, p.copies_of(lost), false)
            };
            match coord.call_worker(addr, &check).await {
                Ok(Message::CopiesHeld { partitions }) => keep.extend(partitions),
                Ok(other) => tracing::warn!(reply = ?other, "unexpected answer to CheckCopies"),
                Err(e) => {
                    tracing::warn!(error = %e, %addr, "a restarted worker could not be asked what it holds")
                }
            }
            tracing::info!(app = %app_id, shuffle_id, worker = lost, kept = keep.len(), "a restarted worker still holds these copies whole");
        }
        let r = coord.lock().relocate(&app_id, shuffle_id, &s, lost, &keep);
        let (lost_partitions, kept_by_replica) = (r.lost.len(), r.degraded_partitions);
        let revoked = apply_relocation(coord, &app_id, shuffle_id, &s, r).await;
        tracing::warn!(app = %app_id, shuffle_id, worker = lost, lost_partitions, kept_by_replica, revoked_maps = revoked, "moved a shuffle off a lost worker");
    }
}

/// Tells the workers of a relocation: new copies prepared, forwarding to lost replicas
/// stopped. Partitions that lost every copy are adopted from the object store by their
/// new workers where it holds them whole; the maps that wrote into the others are
/// revoked everywhere. Journals the outcome. The caller holds the commit lock. Returns
/// the number of maps revoked.
async fn apply_relocation(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    s: &state::ShuffleEntry,
    r: state::Relocation,
) -> usize {
    let prepares = r
        .prepares
        .iter()
        .map(|(addr, msg)| coord.call_worker(addr, msg));
    for res in futures_util::future::join_all(prepares).await {
        if let Err(e) = res {
            tracing::warn!(error = %e, app = %app_id, shuffle_id, "could not prepare a moved partition");
        }
    }
    let adopted = adopt_lost(coord, app_id, shuffle_id, s, &r.lost).await;
    let revoked = {
        let mut p = s.lock();
        let not_adopted = r.lost.difference(&adopted).copied().collect();
        p.revoke_maps_touching(&not_adopted)
    };
    let layout = {
        let p = s.lock();
        journal::Record::Layout {
            app_id: app_id.to_string(),
            shuffle_id,
            primary: p.primary.clone(),
            replica: p.replica.clone(),
        }
    };
    let revoke = journal::Record::Revoke {
        app_id: app_id.to_string(),
        shuffle_id,
        maps: revoked.clone(),
    };
    let _ = coord.log(&[layout, revoke]);
    use std::sync::atomic::Ordering::Relaxed;
    let m = &coord.metrics;
    m.lost_partitions.fetch_add(r.lost.len() as u64, Relaxed);
    m.adopted_partitions
        .fetch_add(adopted.len() as u64, Relaxed);
    m.revoked_maps.fetch_add(revoked.len() as u64, Relaxed);
    let per_worker: Vec<(String, Vec<crossdock_proto::PartitionBytes>)> =
        r.holders.iter().map(|a| (a.clone(), Vec::new())).collect();
    for &map in &revoked {
        conn::notify_commit(
            coord,
            app_id,
            shuffle_id,
            map,
            state::NO_ATTEMPT,
            &per_worker,
        )
        .await;
    }
    release_restored(coord, app_id, shuffle_id, s, &r.lost).await;
    revoked.len()
}

/// The new copies of partitions that lost every copy are not served until checked
/// against the commits as they now stand (adopted, or their maps revoked): this check
/// lets them be read.
async fn release_restored(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    s: &state::ShuffleEntry,
    lost: &std::collections::BTreeSet<u32>,
) {
    for (_, addr, msg) in copy_checks(coord, app_id, shuffle_id, s, lost, false) {
        let Message::CheckCopies { partitions, .. } = &msg else {
            unreachable!("built above")
        };
        let want = partitions.len();
        match coord.call_worker(&addr, &msg).await {
            Ok(Message::CopiesHeld { partitions }) if partitions.len() == want => {}
            Ok(other) => {
                tracing::error!(reply = ?other, %addr, app = %app_id, shuffle_id, "a moved partition does not match the commits; it is not served")
            }
            Err(e) => {
                tracing::error!(error = %e, %addr, app = %app_id, shuffle_id, "could not release a moved partition; it is not served")
            }
        }
    }
}

/// A `CheckCopies` (with `adopt` or not) for every live worker holding a copy of one of
/// `partitions`, over those it holds, against the commits as they stand: (worker id,
/// address, request).
fn copy_checks(
    coord: &Coordinator,
    app_id: &str,
    shuffle_id: u32,
    s: &state::ShuffleEntry,
    partitions: &std::collections::BTreeSet<u32>,
    adopt: bool,
) -> Vec<(u32, String, Message)> {
    let st = coord.lock();
    let p = s.lock();
    let mut on: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
    for &q in partitions {
        for w in [p.primary[q as usize], p.replica[q as usize]] {
            if w != crossdock_proto::NO_WORKER && st.is_alive(w) {
                on.entry(w).or_default().push(q);
            }
        }
    }
    on.into_iter()
        .map(|(w, parts)| {
            let msg = p.copy_check(app_id, shuffle_id, parts, adopt);
            (w, st.addr_of(w), msg)
        })
        .collect()
}

/// How long a worker may take to adopt partitions from the object store.
const ADOPT_TIMEOUT: Duration = Duration::from_secs(600);

/// Asks the new workers of partitions that lost every copy to restore them from the
/// object store. Returns the partitions whose new primary now holds them whole. A
/// replica that could not adopt one is dropped (the partition runs on its primary
/// alone); a worker without an object store adopts nothing.
async fn adopt_lost(
    coord: &Arc<Coordinator>,
    app_id: &str,
    shuffle_id: u32,
    s: &state::ShuffleEntry,
    lost: &std::collections::BTreeSet<u32>,
) -> std::collections::BTreeSet<u32> {
    use std::collections::{BTreeMap, BTreeSet};
    if lost.is_empty() {
        return BTreeSet::new();
    }
    let calls = copy_checks(coord, app_id, shuffle_id, s, lost, true);
    // Each on a connection of its own: an adoption may take minutes, and replies on a
    // connection come in request order.
    let answers = futures_util::future::join_all(calls.iter().map(|(_, addr, msg)| async move {
        let call = async {
            let conn = RpcConnection::connect(addr).await?;
            conn.call(msg).await
        };
        tokio::time::timeout(ADOPT_TIMEOUT, call)
            .await
            .unwrap_or_else(|_| {
                Err(ClientError::Io {
                    addr: addr.clone(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "no answer to an adoption within {} s",
                            ADOPT_TIMEOUT.as_secs()
                        ),
                    ),
                })
            })
    }))
    .await;
    let mut held: BTreeSet<(u32, u32)> = BTreeSet::new();
    for ((w, addr, _), answer) in calls.iter().zip(answers) {
        match answer {
            Ok(Message::CopiesHeld { partitions }) => {
                held.extend(partitions.into_iter().map(|q| (*w, q)))
            }
            Ok(other) => tracing::warn!(reply = ?other, %addr, "unexpected answer to an adoption"),
            Err(e) => tracing::warn!(error = %e, %addr, "a worker could not adopt partitions"),
        }
    }
    let mut adopted = BTreeSet::new();
    let mut drop_replica = Vec::new();
    {
        let mut p = s.lock();
        for &q in lost {
            let i = q as usize;
            if !held.contains(&(p.primary[i], q)) {
                continue;
            }
            adopted.insert(q);
            if p.replica[i] != crossdock_proto::NO_WORKER && !held.contains(&(p.replica[i], q)) {
                p.replica[i] = crossdock_proto::NO_WORKER;
                drop_replica.push(q);
            }
        }
    }
    if !drop_replica.is_empty() {
        // The primaries of those partitions stop forwarding to the replica.
        let prepares: Vec<(String, Message)> = {
            let st = coord.lock();
            let p = s.lock();
            let mut by_primary: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
            for &q in &drop_replica {
                by_primary.entry(p.primary[q as usize]).or_default().push(q);
            }
            by_primary
                .into_iter()
                .map(|(w, parts)| {
                    (
                        st.addr_of(w),
                        st.prepare_message(app_id, shuffle_id, s, &p, w, parts),
                    )
                })
                .collect()
        };
        for (addr, msg) in prepares {
            if let Err(e) = coord.call_worker(&addr, &msg).await {
                tracing::warn!(error = %e, %addr, "could not stop forwarding to a replica that did not adopt");
            }
        }
    }
    if !adopted.is_empty() {
        tracing::info!(app = %app_id, shuffle_id, adopted = adopted.len(), lost = lost.len(), "partitions adopted from the object store; their maps stand");
    }
    adopted
}

/// A client or worker could not reach `addr`. The coordinator asks the worker itself,
/// and handles it as lost at once if it does not answer, instead of waiting for the
/// heartbeat deadline while tasks fail against it.
pub(crate) async fn check_reported_worker(coord: &Arc<Coordinator>, addr: &str) {
    let Some(id) = coord.lock().worker_by_addr(addr) else {
        return;
    };
    if !coord.lock().workers[&id].alive {
        return;
    }
    let probe = async {
        let c = RpcConnection::connect(addr).await?;
        c.call(&Message::GetWorkerStats).await
    };
    let answered = matches!(
        tokio::time::timeout(Duration::from_secs(3), probe).await,
        Ok(Ok(_))
    );
    if answered {
        tracing::info!(worker = id, %addr, "a reported worker answers; it stays");
        return;
    }
    if coord.lock().mark_lost(id) {
        tracing::warn!(worker = id, %addr, "a reported worker does not answer; marked lost");
        handle_loss(coord, id).await;
    }
}

/// Marks silent workers lost and cleans up apps whose lease expired.
async fn sweeper(coord: Arc<Coordinator>, mut shutdown: ShutdownSignal) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = shutdown.changed() => return,
        }
        let (lost, expired, workers) = {
            let mut st = coord.lock();
            let lost = st.mark_lost_workers(coord.cfg.worker_timeout);
            (lost, st.take_expired_apps(), st.live_worker_addrs())
        };
        for id in lost {
            let coord = coord.clone();
            tokio::spawn(async move { handle_loss(&coord, id).await });
        }
        coord.maybe_compact();
        for app in expired {
            let _ = coord.log(&[journal::Record::AppGone {
                app_id: app.clone(),
            }]);
            tracing::warn!(app = %app, "app lease expired; deleting its shuffles");
            coord
                .metrics
                .expired_apps
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let coord = coord.clone();
            let workers = workers.clone();
            tokio::spawn(async move { conn::delete_app_on(&coord, &app, &workers, true).await });
        }
    }
}

impl Render for Coordinator {
    fn render(&self, out: &mut String) {
        use std::sync::atomic::Ordering::Relaxed;
        let (apps, shuffles, alive, lost) = self.lock().counts();
        let m = &self.metrics;
        let rows: [(&str, &str, &str, u64); 11] = [
            (
                "crossdock_coordinator_apps",
                "gauge",
                "Registered apps.",
                apps,
            ),
            (
                "crossdock_coordinator_shuffles",
                "gauge",
                "Registered shuffles.",
                shuffles,
            ),
            (
                "crossdock_coordinator_workers_alive",
                "gauge",
                "Workers whose heartbeats arrive.",
                alive,
            ),
            (
                "crossdock_coordinator_workers_lost",
                "gauge",
                "Workers that missed their heartbeat deadline.",
                lost,
            ),
            (
                "crossdock_coordinator_commits_total",
                "counter",
                "Map attempts committed.",
                m.commits.load(Relaxed),
            ),
            (
                "crossdock_coordinator_rejected_commits_total",
                "counter",
                "Commits refused because another attempt of the map won.",
                m.rejected_commits.load(Relaxed),
            ),
            (
                "crossdock_coordinator_expired_apps_total",
                "counter",
                "Apps cleaned up after their lease expired.",
                m.expired_apps.load(Relaxed),
            ),
            (
                "crossdock_coordinator_registered_shuffles_total",
                "counter",
                "Shuffles registered.",
                m.registered_shuffles.load(Relaxed),
            ),
            (
                "crossdock_coordinator_lost_partitions_total",
                "counter",
                "Partitions that lost every copy with a worker.",
                m.lost_partitions.load(Relaxed),
            ),
            (
                "crossdock_coordinator_adopted_partitions_total",
                "counter",
                "Partitions that lost every copy and were restored from the object store.",
                m.adopted_partitions.load(Relaxed),
            ),
            (
                "crossdock_coordinator_revoked_maps_total",
                "counter",
                "Map commits revoked because their only copy was lost.",
                m.revoked_maps.load(Relaxed),
            ),
        ];
        for (name, kind, help, v) in rows {
            describe(out, name, kind, help);
            sample(out, name, "", v);
        }
        describe(
            out,
            "crossdock_coordinator_errors_total",
            "counter",
            "Requests rejected, by error kind.",
        );
        m.errors
            .render(out, "crossdock_coordinator_errors_total", "");
    }
}
