//! What the coordinator does when a commit makes a shuffle's size prediction or completes
//! the shuffle (`state/prediction.rs` keeps the state): count it, score the prediction
//! against the final sizes, log the score, and remember the final sizes in the app's
//! history as a prior for its next shuffle of that partition count.

use super::metrics::CoordinatorMetrics;
use super::node::Coordinator;
use super::state::ForecastEvent;

/// Reports what one commit changed in its shuffle's forecast. Takes the state lock once,
/// briefly, when the shuffle completes; the O(partitions) scoring runs outside it.
pub fn report(coord: &Coordinator, app_id: &str, shuffle_id: u32, event: ForecastEvent) {
    if let Some(observed) = event.predicted {
        CoordinatorMetrics::add(&coord.metrics.predictions, 1);
        tracing::debug!(app = %app_id, shuffle_id, maps_observed = observed, "partition sizes predicted");
    }
    let Some(done) = event.completed else {
        return;
    };
    let error = done.error();
    coord
        .lock()
        .remember_final_sizes(app_id, done.final_sizes.clone());
    let (Some(e), Some(p)) = (error, &done.prediction) else {
        return;
    };
    coord.metrics.observe_prediction(&e);
    let total_error = e
        .total_rel_err
        .map_or_else(|| "none (no bytes)".to_string(), |t| t.to_string());
    tracing::info!(
        app = %app_id,
        shuffle_id,
        maps_observed = p.observed,
        from_sample = p.from_sample,
        maps = done.num_maps,
        partitions = done.final_sizes.len(),
        error_std = e.share_std,
        total_error = %total_error,
        mean_partition_error = e.mean_rel_err,
        max_partition_error = e.max_rel_err,
        "partition size prediction scored"
    );
}
