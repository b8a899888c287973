//! The coordinator's counters and its part of the `/metrics` page.

use std::sync::atomic::{AtomicU64, Ordering};

use crossdock_policy::size_prediction::PredictionError;

use crate::metrics::{describe, sample, ErrorCounts, LatencyHistogram, RatioHistogram};

/// Counters of the coordinator.
#[derive(Default)]
pub struct CoordinatorMetrics {
    pub commits: AtomicU64,
    pub rejected_commits: AtomicU64,
    /// Partitions (or splits) continued on another worker.
    pub splits: AtomicU64,
    /// Partitions continued on another host after their shuffle's sizes were predicted
    /// (`coordinator::rebalance`), and their predicted bytes.
    pub rebalanced_partitions: AtomicU64,
    pub rebalanced_bytes: AtomicU64,
    pub expired_apps: AtomicU64,
    pub registered_shuffles: AtomicU64,
    /// Partitions that lost every copy with a worker.
    pub lost_partitions: AtomicU64,
    pub adopted_partitions: AtomicU64,
    /// Map commits revoked because their data was lost.
    pub revoked_maps: AtomicU64,
    /// Time from a `CommitMap`'s arrival to its answer, whatever the answer.
    pub commit_latency: LatencyHistogram,
    /// Shuffles whose partition sizes were predicted (their observation threshold was
    /// reached; not counting predictions rebuilt by replay).
    pub predictions: AtomicU64,
    /// Shuffles registered with their engine's sample of their input (a range
    /// partitioner's), whose predictions divide by it.
    pub sampled_shuffles: AtomicU64,
    /// Per scored shuffle, the std of the normalised prediction error
    /// ([`PredictionError::share_std`]).
    pub prediction_error: RatioHistogram,
    /// Per scored shuffle with data, the relative error of the predicted total.
    pub prediction_total_error: RatioHistogram,
    pub errors: ErrorCounts,
}

impl CoordinatorMetrics {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Records how far one shuffle's prediction was from its final sizes. Per shuffle
    /// figures go into histograms, never into labels, so the page's size does not grow
    /// with the shuffles.
    pub fn observe_prediction(&self, e: &PredictionError) {
        self.prediction_error.observe(e.share_std);
        if let Some(t) = e.total_rel_err {
            self.prediction_total_error.observe(t);
        }
    }

    /// Appends the coordinator's metrics in Prometheus text format, with the state's
    /// `counts` (apps, shuffles, live workers, lost workers) and the journal's appends and
    /// syncs.
    pub fn render(&self, out: &mut String, counts: (u64, u64, u64, u64), journal: (u64, u64)) {
        let (apps, shuffles, alive, lost) = counts;
        let (appends, syncs) = journal;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let rows: [(&str, &str, &str, u64); 18] = [
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
                get(&self.commits),
            ),
            (
                "crossdock_coordinator_rejected_commits_total",
                "counter",
                "Commits refused because another attempt of the map won.",
                get(&self.rejected_commits),
            ),
            (
                "crossdock_coordinator_splits_total",
                "counter",
                "Hot partitions (or their splits) continued on another worker.",
                get(&self.splits),
            ),
            (
                "crossdock_coordinator_rebalanced_partitions_total",
                "counter",
                "Partitions continued on another host once their shuffle's sizes were predicted (a partition of shuffles sharing a layout, a join's sides, counts once).",
                get(&self.rebalanced_partitions),
            ),
            (
                "crossdock_coordinator_rebalanced_bytes_total",
                "counter",
                "Predicted bytes of the partitions continued on another host (summed over the shuffles sharing a layout).",
                get(&self.rebalanced_bytes),
            ),
            (
                "crossdock_coordinator_expired_apps_total",
                "counter",
                "Apps cleaned up after their lease expired.",
                get(&self.expired_apps),
            ),
            (
                "crossdock_coordinator_registered_shuffles_total",
                "counter",
                "Shuffles registered.",
                get(&self.registered_shuffles),
            ),
            (
                "crossdock_coordinator_lost_partitions_total",
                "counter",
                "Partitions that lost every copy with a worker.",
                get(&self.lost_partitions),
            ),
            (
                "crossdock_coordinator_adopted_partitions_total",
                "counter",
                "Partitions that lost every copy and were restored from the object store.",
                get(&self.adopted_partitions),
            ),
            (
                "crossdock_coordinator_revoked_maps_total",
                "counter",
                "Map commits revoked because their only copy was lost.",
                get(&self.revoked_maps),
            ),
            (
                "crossdock_coordinator_predictions_total",
                "counter",
                "Shuffles whose partition sizes were predicted from their first committed maps.",
                get(&self.predictions),
            ),
            (
                "crossdock_coordinator_sampled_shuffles_total",
                "counter",
                "Shuffles registered with a sample of their input (range partitioners), their sizes predicted from it.",
                get(&self.sampled_shuffles),
            ),
            (
                "crossdock_coordinator_journal_appends_total",
                "counter",
                "Changes appended to the journal before they were acknowledged.",
                appends,
            ),
            (
                "crossdock_coordinator_journal_syncs_total",
                "counter",
                "Journal syncs to the device; fewer than appends when concurrent appends shared one.",
                syncs,
            ),
        ];
        for (name, kind, help, v) in rows {
            describe(out, name, kind, help);
            sample(out, name, "", v);
        }
        self.commit_latency.render(
            out,
            "crossdock_coordinator_commit_seconds",
            "Time from a map's CommitMap arriving to its answer: waiting behind other commits of the map, the workers' confirmation, the journal sync.",
        );
        self.prediction_error.render(
            out,
            "crossdock_coordinator_prediction_error",
            "Per shuffle, when its last map commits: the standard deviation over its partitions of the predicted minus the final share of the total bytes.",
        );
        self.prediction_total_error.render(
            out,
            "crossdock_coordinator_prediction_total_error",
            "Per shuffle, when its last map commits: |predicted - final| / final total bytes.",
        );
        describe(
            out,
            "crossdock_coordinator_errors_total",
            "counter",
            "Requests rejected, by error kind.",
        );
        self.errors
            .render(out, "crossdock_coordinator_errors_total", "");
    }
}
