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
    journal: Journal,
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
            journal,
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
    pub fn log(&self, records: &[Record]) -> Result<(), ServiceError> {
        self.journal.append(records).map_err(|e| {
            tracing::error!(error = %e, "could not write the coordinator's journal");
            ServiceError::Journal(e)
        })
    }

    /// Replaces the journal's log with a snapshot once it grew large.
    pub fn maybe_compact(&self) {
        if self.journal.wal_bytes() < COMPACT_AFTER {
            return;
        }
        if let Err(e) = self.journal.compact_with(|| self.lock().snapshot()) {
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
