//! The running coordinator as its request handlers and background tasks see it: its
//! state, its journal, its counters, and its calls to workers.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossdock_client::{ClientError, Keyring};
use crossdock_proto::Message;

use super::config::CoordinatorConfig;
use super::error::ServiceError;
use super::journal::{Journal, Record};
use super::metrics::CoordinatorMetrics;
use super::state::State;
use crate::limits::Gate;
use crate::metrics::Render;
use crate::peers::Peers;

/// The log is compacted into a new snapshot once it holds this many bytes.
const COMPACT_AFTER: u64 = 64 << 20;
/// How long the coordinator waits for a worker's answer.
const WORKER_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A running coordinator.
pub struct Coordinator {
    pub addr: SocketAddr,
    pub cfg: CoordinatorConfig,
    state: Mutex<State>,
    pub metrics: CoordinatorMetrics,
    /// Shared with the blocking threads that sync it (see [`Coordinator::log`]).
    journal: Arc<Journal>,
    worker_conns: Peers,
    /// Admission of connections and of large frames.
    pub gate: Arc<Gate>,
}

impl Coordinator {
    pub fn new(addr: SocketAddr, cfg: CoordinatorConfig, state: State, journal: Journal) -> Self {
        Coordinator {
            gate: Gate::new(cfg.limits.clone()),
            worker_conns: Peers::new(
                Keyring::cluster(cfg.secret.clone())
                    .with_tls(cfg.tls.as_ref().map(|t| t.peers.clone())),
            ),
            addr,
            cfg,
            state: Mutex::new(state),
            metrics: CoordinatorMetrics::default(),
            journal: Arc::new(journal),
        }
    }

    /// The keys the coordinator proves to workers (the cluster secret, if any).
    pub fn keyring(&self) -> &Keyring {
        self.worker_conns.keyring()
    }

    /// The state, locked. Never hold it across an await.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("coordinator state lock poisoned")
    }

    /// Makes changes already applied in memory durable, before they are acknowledged.
    /// Never call it holding the state lock (compaction takes it under the journal's).
    ///
    /// With `fsync` the append waits for the device (`fdatasync`, group-committed) on a
    /// blocking thread, not on the runtime's: a slow disk then delays the changes being
    /// logged, but not the heartbeats, status calls and accepts that the runtime's few
    /// threads also serve (a sync of seconds on a busy disk would otherwise stall them all
    /// and have workers declared lost).
    pub async fn log(&self, records: &[Record]) -> Result<(), ServiceError> {
        let appended = if self.journal.syncs() {
            let journal = self.journal.clone();
            let records = records.to_vec();
            tokio::task::spawn_blocking(move || journal.append(&records))
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e)))
        } else {
            // A write to the page cache: no wait worth a thread switch.
            self.journal.append(records)
        };
        appended.map_err(|e| {
            tracing::error!(error = %e, "could not write the coordinator's journal");
            ServiceError::Journal(e)
        })
    }

    /// Replaces the journal's log with a snapshot once it grew large, on a blocking thread
    /// (it writes and syncs the whole state).
    pub async fn maybe_compact(self: &Arc<Self>) {
        if self.journal.wal_bytes() < COMPACT_AFTER {
            return;
        }
        let coord = self.clone();
        let compacted = tokio::task::spawn_blocking(move || {
            coord.journal.compact_with(|| coord.lock().snapshot())
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        if let Err(e) = compacted {
            tracing::error!(error = %e, "could not compact the coordinator's journal");
        }
    }

    /// Calls a worker's data endpoint, reconnecting once if the cached connection broke.
    pub async fn call_worker(&self, addr: &str, msg: &Message) -> Result<Message, ClientError> {
        for attempt in 0..2 {
            let conn = self.worker_conns.get(addr).await?;
            match tokio::time::timeout(WORKER_CALL_TIMEOUT, conn.call(msg)).await {
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

impl Render for Coordinator {
    fn render(&self, out: &mut String) {
        let counts = self.lock().counts();
        self.metrics
            .render(out, counts, self.journal.appends_and_syncs());
        crate::metrics::render_connections(out, "coordinator", self.gate.counts());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;

    use super::*;

    /// On a runtime of one thread, an append waiting for a sync (here: another thread
    /// holds the journal's sync lock, as a long `fdatasync` does) leaves the thread free
    /// for other tasks. Logged inline, the append would block the only thread, the sleep
    /// below could never end, and the holder would give up after 10 s: the test fails.
    #[tokio::test]
    async fn an_append_waiting_for_a_sync_does_not_stall_the_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = CoordinatorConfig::new("127.0.0.1:0", dir.path().to_path_buf());
        cfg.fsync = true;
        let (journal, _) = Journal::open(dir.path(), true).unwrap();
        let coord = Arc::new(Coordinator::new(
            "127.0.0.1:0".parse().unwrap(),
            cfg,
            State::new(1),
            journal,
        ));
        let (locked_tx, locked) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let gave_up = Arc::new(AtomicBool::new(false));
        let holder = {
            let journal = coord.journal.clone();
            let gave_up = gave_up.clone();
            std::thread::spawn(move || {
                let _sync = journal.sync_lock();
                locked_tx.send(()).unwrap();
                if release_rx.recv_timeout(Duration::from_secs(10)).is_err() {
                    gave_up.store(true, Ordering::SeqCst);
                }
            })
        };
        locked.recv().unwrap();
        let c = coord.clone();
        let logging =
            tokio::spawn(async move { c.log(&[Record::AppGone { app_id: "a".into() }]).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = release.send(());
        holder.join().unwrap();
        assert!(
            !gave_up.load(Ordering::SeqCst),
            "the runtime stalled while an append waited for the sync"
        );
        logging.await.unwrap().unwrap();
        assert_eq!(coord.journal.appends_and_syncs(), (1, 1));
    }
}
