//! Partition-size prediction in the live coordinator (SCache, Fu & Qi, Section 3.2.2:
//! prediction from map outputs for hash partitioners).
//!
//! Each shuffle keeps a [`Forecast`]. When its committed maps first reach the observation
//! threshold ([`maps_to_observe`] of the coordinator's `prediction_threshold`), the
//! per-partition bytes committed so far are extrapolated linearly to all its maps
//! ([`extrapolate`]) and kept. When its maps have all committed for the first time, the
//! final sizes are handed back ([`Completion`]) so the prediction can be scored
//! ([`prediction_error`]) and remembered in the app's [`SizeHistory`], which gives a
//! *prior* for the app's next shuffle of the same partition count, before any of its
//! maps commits.
//!
//! The arithmetic is `crossdock_policy::size_prediction`'s, the same that
//! `crossdock sim size-prediction` drives. Everything here is soft state: nothing is
//! journaled. A restart rebuilds it from the commits that replay gives (see
//! [`super::replay::apply`]).

use std::collections::VecDeque;
use std::sync::Arc;

use crossdock_policy::size_prediction::{
    extrapolate, maps_to_observe, prediction_error, PredictionError,
};

/// Completed shuffles an app's [`SizeHistory`] remembers, one per partition count.
/// A prior is only used for a shuffle of the same partition count, so a handful of
/// distinct counts covers an app that runs the same jobs again; the bound keeps an
/// app's history at a few shuffles' worth of sizes (8 bytes per partition).
pub const HISTORY_LEN: usize = 4;

/// A prediction of a shuffle's final partition sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prediction {
    /// Committed maps it was made from.
    pub observed: u32,
    /// Predicted final bytes per partition, rounded to the byte.
    pub sizes: Arc<[u64]>,
}

/// A shuffle whose maps all committed, the first time it happened.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The shuffle's maps.
    pub num_maps: u32,
    /// The prediction made before (or at) this commit.
    pub prediction: Option<Prediction>,
    /// Final bytes per partition.
    pub final_sizes: Arc<[u64]>,
}

impl Completion {
    /// How far the prediction was from the final sizes. `None` without a prediction, or
    /// when it was made from every map (it is then exact by construction, and scoring it
    /// would only pull the figures towards 0). O(partitions): call it outside any lock.
    pub fn error(&self) -> Option<PredictionError> {
        let p = self.prediction.as_ref()?;
        if p.observed >= self.num_maps {
            return None;
        }
        let pred: Vec<f64> = p.sizes.iter().map(|&b| b as f64).collect();
        let truth: Vec<f64> = self.final_sizes.iter().map(|&b| b as f64).collect();
        Some(prediction_error(&pred, &truth))
    }
}

/// What one commit changed in a shuffle's [`Forecast`].
#[derive(Debug, Default)]
pub struct ForecastEvent {
    /// The threshold was reached by this commit: a prediction was made from this many
    /// committed maps.
    pub predicted: Option<u32>,
    /// This commit completed the shuffle for the first time.
    pub completed: Option<Completion>,
}

/// One shuffle's prediction state.
#[derive(Debug)]
pub struct Forecast {
    /// Committed maps at which the prediction is made.
    observe_at: u32,
    /// The prediction, once made. Made once: revocations and reruns that bring the
    /// committed count down and up again do not redo it.
    made: Option<Prediction>,
    /// The shuffle completed once (and its prediction was handed out to be scored).
    completed: bool,
}

impl Forecast {
    /// The forecast of a shuffle of `num_maps` maps that predicts once `threshold` (a
    /// fraction) of them committed (at least one).
    pub fn new(num_maps: u32, threshold: f64) -> Forecast {
        Forecast {
            observe_at: maps_to_observe(num_maps as usize, threshold) as u32,
            made: None,
            completed: false,
        }
    }

    /// Committed maps at which the prediction is made.
    pub fn observe_at(&self) -> u32 {
        self.observe_at
    }

    /// The prediction, if made.
    pub fn prediction(&self) -> Option<&Prediction> {
        self.made.as_ref()
    }

    /// Called after each recorded commit, under the shuffle's lock, with the committed
    /// maps and the per-partition bytes they wrote. O(partitions) on the commit that
    /// reaches the threshold and on the one that first completes the shuffle, O(1) on
    /// every other.
    pub fn on_commit(&mut self, committed: u32, num_maps: u32, bytes: &[u64]) -> ForecastEvent {
        let mut event = ForecastEvent::default();
        if self.made.is_none() && self.observe_at > 0 && committed >= self.observe_at {
            let sizes = extrapolate(bytes, committed as usize, num_maps as usize)
                .into_iter()
                .map(|s| s.round() as u64)
                .collect();
            self.made = Some(Prediction {
                observed: committed,
                sizes,
            });
            event.predicted = Some(committed);
        }
        if !self.completed && num_maps > 0 && committed >= num_maps {
            self.completed = true;
            event.completed = Some(Completion {
                num_maps,
                prediction: self.made.clone(),
                final_sizes: bytes.into(),
            });
        }
        event
    }
}

/// An app's final partition sizes of its last completed shuffles: at most
/// [`HISTORY_LEN`], one per partition count, the most recent last. It goes with the app.
#[derive(Debug, Default)]
pub struct SizeHistory {
    recent: VecDeque<Arc<[u64]>>,
}

impl SizeHistory {
    /// Remembers a completed shuffle's final sizes, replacing the one of the same
    /// partition count and forgetting the oldest beyond [`HISTORY_LEN`].
    pub fn remember(&mut self, sizes: Arc<[u64]>) {
        self.recent.retain(|s| s.len() != sizes.len());
        self.recent.push_back(sizes);
        while self.recent.len() > HISTORY_LEN {
            self.recent.pop_front();
        }
    }

    /// The final sizes of the most recent completed shuffle of `num_partitions`
    /// partitions, as a size prior for a new one before any of its maps commits.
    pub fn prior(&self, num_partitions: u32) -> Option<Arc<[u64]>> {
        self.recent
            .iter()
            .rev()
            .find(|s| s.len() == num_partitions as usize)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predicts_once_when_the_threshold_is_reached() {
        // 20 maps at 10%: the second commit predicts.
        let mut f = Forecast::new(20, 0.1);
        assert_eq!(f.observe_at(), 2);
        let ev = f.on_commit(1, 20, &[10, 0]);
        assert!(ev.predicted.is_none() && ev.completed.is_none());
        assert!(f.prediction().is_none());
        let ev = f.on_commit(2, 20, &[30, 1]);
        assert_eq!(ev.predicted, Some(2));
        let want: Arc<[u64]> = Arc::from(vec![300, 10]);
        assert_eq!(f.prediction().unwrap().sizes, want);
        // Later commits, and a count that drops (revocation) and climbs again, keep it.
        for committed in [3, 2, 1, 2, 3] {
            let ev = f.on_commit(committed, 20, &[999, 999]);
            assert!(ev.predicted.is_none(), "predicted again at {committed}");
        }
        assert_eq!(f.prediction().unwrap().sizes, want);
        assert_eq!(f.prediction().unwrap().observed, 2);
    }

    #[test]
    fn prediction_is_the_rounded_linear_extrapolation() {
        let mut f = Forecast::new(7, 0.4); // 2.8 maps: 3
        f.on_commit(1, 7, &[1, 1]);
        f.on_commit(2, 7, &[1, 1]);
        f.on_commit(3, 7, &[10, 2]);
        let want: Vec<u64> = extrapolate(&[10, 2], 3, 7)
            .iter()
            .map(|s| s.round() as u64)
            .collect();
        assert_eq!(want, vec![23, 5]); // 23.33 and 4.67
        assert_eq!(&*f.prediction().unwrap().sizes, &want[..]);
    }

    #[test]
    fn completes_once_and_scores_the_prediction() {
        let mut f = Forecast::new(4, 0.25);
        let ev = f.on_commit(1, 4, &[10, 10]);
        assert_eq!(ev.predicted, Some(1));
        f.on_commit(2, 4, &[20, 20]);
        f.on_commit(3, 4, &[30, 30]);
        let done = f.on_commit(4, 4, &[40, 40]).completed.expect("completed");
        let want: Arc<[u64]> = Arc::from(vec![40, 40]);
        assert_eq!(done.final_sizes, want);
        // Uniform maps: the prediction from one map was exact.
        let e = done.error().unwrap();
        assert_eq!(e.share_std, 0.0);
        assert_eq!(e.total_rel_err, Some(0.0));
        // Revoked and committed again: no second completion.
        f.on_commit(3, 4, &[30, 30]);
        assert!(f.on_commit(4, 4, &[40, 40]).completed.is_none());
    }

    #[test]
    fn a_shuffle_whose_later_maps_differ_scores_the_computed_error() {
        // 4 maps, threshold 50%: maps 0 and 1 write (10, 10), maps 2 and 3 write (0, 20).
        // Predicted (40, 40) from 2 maps; final (20, 60). Shares 0.5/0.5 vs 0.25/0.75:
        // errors +0.25, -0.25, std 0.25. Total 80 vs 80: 0. Relative errors 1 and 1/3.
        let mut f = Forecast::new(4, 0.5);
        f.on_commit(1, 4, &[10, 10]);
        assert_eq!(f.on_commit(2, 4, &[20, 20]).predicted, Some(2));
        f.on_commit(3, 4, &[20, 40]);
        let done = f.on_commit(4, 4, &[20, 60]).completed.unwrap();
        let e = done.error().unwrap();
        assert!((e.share_std - 0.25).abs() < 1e-12, "{e:?}");
        assert_eq!(e.total_rel_err, Some(0.0));
        assert!((e.mean_rel_err - (1.0 + 1.0 / 3.0) / 2.0).abs() < 1e-12);
        assert!((e.max_rel_err - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_prediction_from_every_map_is_not_scored() {
        // One map: the threshold and the completion are the same commit.
        let mut f = Forecast::new(1, 0.1);
        let ev = f.on_commit(1, 1, &[5, 7]);
        assert_eq!(ev.predicted, Some(1));
        let done = ev.completed.unwrap();
        assert!(done.prediction.is_some());
        assert!(done.error().is_none());
    }

    #[test]
    fn history_keeps_the_latest_shuffle_per_partition_count() {
        let mut h = SizeHistory::default();
        assert!(h.prior(2).is_none());
        h.remember(Arc::from(vec![1, 2]));
        h.remember(Arc::from(vec![1, 2, 3]));
        h.remember(Arc::from(vec![5, 6]));
        assert_eq!(
            &*h.prior(2).unwrap(),
            &[5, 6],
            "the most recent of 2 partitions"
        );
        assert_eq!(&*h.prior(3).unwrap(), &[1, 2, 3]);
        assert!(h.prior(4).is_none(), "no shuffle of that partition count");
        // Bounded: four more partition counts push out the oldest.
        for n in 4..8 {
            h.remember(vec![0; n].into());
        }
        assert!(h.prior(2).is_none() && h.prior(3).is_none());
        assert!((4..8).all(|n| h.prior(n).is_some()));
    }
}
