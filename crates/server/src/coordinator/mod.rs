//! The coordinator: worker membership, app leases, shuffle placement and map commits.
//!
//! It holds no shuffle data. Its decisions reach the workers as calls on their data
//! endpoints (`PrepareShuffle`, `MapCommitted`, `DeleteShuffle`, `DeleteApp`,
//! `CheckCopies`, `SyncCommits`).
//!
//! The rooms, lowest first (each uses only those above it in this list, never its
//! parent):
//!
//! | module | concern |
//! |---|---|
//! | [`config`] | settings |
//! | [`journal`] | the durable state: records, snapshot and write-ahead log |
//! | [`state`] | what the coordinator knows, and its transitions (no I/O) |
//! | [`error`], [`metrics`] | what the service reports |
//! | [`node`] | [`Coordinator`]: state, journal, counters, calls to workers |
//! | [`prediction`] | what a commit's size prediction or completion is reported as |
//! | [`calls`] | what it tells several workers at once |
//! | [`recovery`] | losing copies: lost, restarted, corrupt; adoption, revocation |
//! | [`split`] | a hot partition continued on another worker |
//! | [`rebalance`] | a shuffle re-placed once its sizes are predicted |
//! | [`service`] | the requests, one function each |
//! | [`sweeper`] | lost workers, expired leases, compaction, every 100 ms |
//! | [`conn`] | one connection: framing and dispatch |
//! | [`web`] | the web UI and REST API (read-only views of the state) |
//!
//! and this module: [`Coordinator::start`], which puts them together.

pub mod calls;
pub mod config;
pub mod conn;
pub mod error;
pub mod journal;
pub mod metrics;
pub mod node;
pub mod prediction;
pub mod rebalance;
pub mod recovery;
pub mod service;
pub mod split;
pub mod state;
pub mod sweeper;
pub mod web;

use std::sync::Arc;

use tokio::net::TcpListener;

use crate::net::ShutdownSignal;
pub use config::CoordinatorConfig;
pub use metrics::CoordinatorMetrics;
pub use node::Coordinator;
pub use state::State;

impl Coordinator {
    /// Replays its journal, binds and serves until `shutdown` fires.
    pub async fn start(
        cfg: CoordinatorConfig,
        shutdown: ShutdownSignal,
    ) -> std::io::Result<Arc<Coordinator>> {
        if !(1..=2).contains(&cfg.replication) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("replication must be 1 or 2, not {}", cfg.replication),
            ));
        }
        std::fs::create_dir_all(&cfg.data_dir)?;
        let (journal, replay) = journal::Journal::open(&cfg.data_dir, cfg.fsync)?;
        cfg.quotas
            .check()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        config::check_prediction_threshold(cfg.prediction_threshold)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let mut state = State::new(cfg.replication);
        state.set_quotas(cfg.quotas.clone());
        // Before replay, so that replayed shuffles predict at the configured threshold.
        state.set_prediction_threshold(cfg.prediction_threshold);
        state.set_rebalance(cfg.rebalance);
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
        let coord = Arc::new(Coordinator::new(addr, cfg, state, journal));
        tracing::info!(%addr, "coordinator listening");
        let c = coord.clone();
        tokio::spawn(crate::net::accept_loop(
            "coordinator",
            listener,
            coord.gate.clone(),
            coord.cfg.tls.as_ref().map(|t| t.identity.clone()),
            shutdown.clone(),
            move |stream, peer| conn::serve(stream, peer, c.clone()),
        ));
        tokio::spawn(sweeper::run(coord.clone(), shutdown));
        Ok(coord)
    }
}
