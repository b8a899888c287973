//! What the coordinator does on its own, every 100 ms: silent workers are marked lost
//! (their copies moved), apps whose lease ran out are deleted everywhere, and the
//! journal is compacted once its log grew large.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::calls::delete_app_on;
use super::journal::Record;
use super::metrics::CoordinatorMetrics;
use super::node::Coordinator;
use super::recovery::handle_loss;
use crate::net::ShutdownSignal;

/// Runs until `shutdown` fires.
pub async fn run(coord: Arc<Coordinator>, mut shutdown: ShutdownSignal) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = shutdown.changed() => return,
        }
        let (lost, expired, workers) = {
            let mut st = coord.lock();
            let lost = st.mark_lost_workers(coord.cfg.worker_timeout, Instant::now());
            (lost, st.take_expired_apps(), st.live_worker_addrs())
        };
        for id in lost {
            let coord = coord.clone();
            tokio::spawn(async move { handle_loss(&coord, id).await });
        }
        coord.maybe_compact().await;
        for app in expired {
            let _ = coord
                .log(&[Record::AppGone {
                    app_id: app.clone(),
                }])
                .await;
            tracing::warn!(app = %app, "app lease expired; deleting its shuffles");
            CoordinatorMetrics::add(&coord.metrics.expired_apps, 1);
            let coord = coord.clone();
            let workers = workers.clone();
            tokio::spawn(async move { delete_app_on(&coord, &app, &workers, true).await });
        }
    }
}
