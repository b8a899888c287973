//! The coordinator: worker membership, app leases, shuffle placement and map commits.
//!
//! It holds no shuffle data. Its decisions reach the workers as calls on their data
//! endpoints (`PrepareShuffle`, `MapCommitted`, `DeleteShuffle`, `DeleteApp`).

mod conn;
mod state;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossdock_client::{ClientError, RpcConnection};
use crossdock_proto::Message;
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
}

impl CoordinatorConfig {
    /// Defaults: heartbeats every second, a worker is lost after 10 s of silence.
    pub fn new(listen: impl Into<String>, data_dir: impl Into<PathBuf>) -> Self {
        CoordinatorConfig {
            listen: listen.into(),
            data_dir: data_dir.into(),
            worker_timeout: Duration::from_secs(10),
            heartbeat: Duration::from_secs(1),
        }
    }
}

/// A running coordinator.
pub struct Coordinator {
    pub addr: SocketAddr,
    pub cfg: CoordinatorConfig,
    pub state: Mutex<State>,
    pub metrics: CoordinatorMetrics,
    worker_conns: tokio::sync::Mutex<HashMap<String, Arc<RpcConnection>>>,
}

impl Coordinator {
    /// Binds and serves until `shutdown` fires.
    pub async fn start(
        cfg: CoordinatorConfig,
        shutdown: ShutdownSignal,
    ) -> std::io::Result<Arc<Coordinator>> {
        std::fs::create_dir_all(&cfg.data_dir)?;
        let listener = TcpListener::bind(&cfg.listen).await?;
        let addr = listener.local_addr()?;
        let coord = Arc::new(Coordinator {
            addr,
            cfg,
            state: Mutex::new(State::default()),
            metrics: CoordinatorMetrics::default(),
            worker_conns: tokio::sync::Mutex::new(HashMap::new()),
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

    /// Calls a worker's data endpoint, reconnecting once if the cached connection broke.
    pub(crate) async fn call_worker(
        &self,
        addr: &str,
        msg: &Message,
    ) -> Result<Message, ClientError> {
        for attempt in 0..2 {
            // Connect outside the map's lock, so an unreachable worker delays only
            // the calls that need it.
            let cached = self
                .worker_conns
                .lock()
                .await
                .get(addr)
                .filter(|c| !c.is_closed())
                .cloned();
            let conn = match cached {
                Some(c) => c,
                None => {
                    let c = Arc::new(RpcConnection::connect(addr).await?);
                    self.worker_conns
                        .lock()
                        .await
                        .insert(addr.to_string(), c.clone());
                    c
                }
            };
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

/// Marks silent workers lost and cleans up apps whose lease expired.
async fn sweeper(coord: Arc<Coordinator>, mut shutdown: ShutdownSignal) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = shutdown.changed() => return,
        }
        let (expired, workers) = {
            let mut st = coord.lock();
            st.mark_lost_workers(coord.cfg.worker_timeout);
            (st.take_expired_apps(), st.live_worker_addrs())
        };
        for app in expired {
            tracing::warn!(app = %app, "app lease expired; deleting its shuffles");
            coord
                .metrics
                .expired_apps
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let coord = coord.clone();
            let workers = workers.clone();
            tokio::spawn(async move { conn::delete_app_on(&coord, &app, &workers).await });
        }
    }
}

impl Render for Coordinator {
    fn render(&self, out: &mut String) {
        use std::sync::atomic::Ordering::Relaxed;
        let (apps, shuffles, alive, lost) = self.lock().counts();
        let m = &self.metrics;
        let rows: [(&str, &str, &str, u64); 8] = [
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
