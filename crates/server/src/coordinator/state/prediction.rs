//! Partition-size prediction in the live coordinator (SCache, Fu & Qi, Section 3.2.2:
//! prediction from map outputs for hash partitioners, from a sample of the input for
//! range partitioners).
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
//! A range-partitioned shuffle whose engine sampled its input before the maps ran (Spark
//! SQL's sort exchange, through the Spark client) registers with that sample: its
//! [`sample_shares`] then divide the extrapolated total among the partitions, since with
//! input already ordered by key the first maps to commit hold only the lowest ranges.
//!
//! The arithmetic is `crossdock_policy::size_prediction`'s, the same that
//! `crossdock sim size-prediction` drives. Everything here is soft state: nothing is
//! journaled. A restart rebuilds it from the commits that replay gives (see
//! [`super::replay::apply`]); a sample is not in them, so a shuffle replayed before its
//! prediction predicts from its maps alone.

use std::collections::VecDeque;
use std::sync::Arc;

use crossdock_policy::size_prediction::{
    extrapolate, maps_to_observe, prediction_error, sample_weight, scale_shares, PredictionError,
};
use crossdock_proto::{InputSample, SampleCount};

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
    /// The partitions' shares came from a sample of the input, not from the maps.
    pub from_sample: bool,
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
    /// Each partition's share of the shuffle by a sample of its input, when the engine
    /// sent one ([`sample_shares`]).
    shares: Option<Arc<[f64]>>,
}

impl Forecast {
    /// The forecast of a shuffle of `num_maps` maps that predicts once `threshold` (a
    /// fraction) of them committed (at least one).
    pub fn new(num_maps: u32, threshold: f64) -> Forecast {
        Forecast {
            observe_at: maps_to_observe(num_maps as usize, threshold) as u32,
            made: None,
            completed: false,
            shares: None,
        }
    }

    /// Predicts from these shares of a sample of the input (one per partition) and the
    /// observed maps' total bytes, instead of from the observed maps' bytes per partition.
    pub fn use_sample(&mut self, shares: Arc<[f64]>) {
        self.shares = Some(shares);
    }

    /// Committed maps at which the prediction is made.
    pub fn observe_at(&self) -> u32 {
        self.observe_at
    }

    /// The prediction, if made.
    pub fn prediction(&self) -> Option<&Prediction> {
        self.made.as_ref()
    }

    /// Whether the commit that brings the committed maps to `committed` reads the
    /// per-partition records ([`Forecast::on_commit`]): only the one that predicts from a
    /// sample.
    pub fn reads_records(&self, committed: u32) -> bool {
        self.made.is_none()
            && self.shares.is_some()
            && self.observe_at > 0
            && committed >= self.observe_at
    }

    /// Called after each recorded commit, under the shuffle's lock, with the committed
    /// maps and the per-partition bytes and records they wrote (`records` is read only
    /// with a sample: empty for none). O(partitions) on the commit that reaches the
    /// threshold and on the one that first completes the shuffle, O(1) on every other.
    pub fn on_commit(
        &mut self,
        committed: u32,
        num_maps: u32,
        bytes: &[u64],
        records: &[u64],
    ) -> ForecastEvent {
        let mut event = ForecastEvent::default();
        if self.made.is_none() && self.observe_at > 0 && committed >= self.observe_at {
            let (observed, maps) = (committed as usize, num_maps as usize);
            // Used once: the prediction is made once.
            let sized = match self.shares.take() {
                Some(shares) if shares.len() == bytes.len() => {
                    Some(scale_shares(&shares, bytes, records, observed, maps))
                }
                _ => None,
            };
            let from_sample = sized.is_some();
            let sizes = sized
                .unwrap_or_else(|| extrapolate(bytes, observed, maps))
                .into_iter()
                .map(|s| s.round() as u64)
                .collect();
            self.made = Some(Prediction {
                observed: committed,
                from_sample,
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

/// Each partition's share of a range-partitioned shuffle, from the engine's sample of
/// the map stage's input (SCache's Eq. (1), term by term as
/// `crossdock_policy::size_prediction::predict_from_samples` sums it): `inputs[j]` is input
/// partition `j`'s record count and sample size, `counts` where its sampled records go.
/// `Ok(None)` for no sample or one that kept no record. A sample that cannot describe this
/// shuffle is refused with the reason: more inputs than the shuffle has maps, a count
/// naming an input or partition out of range, an input whose counts do not add up to the
/// records it sampled, or more sampled than it holds.
pub fn sample_shares(
    num_maps: u32,
    num_partitions: u32,
    inputs: &[InputSample],
    counts: &[SampleCount],
) -> Result<Option<Arc<[f64]>>, String> {
    if inputs.is_empty() && counts.is_empty() {
        return Ok(None);
    }
    if inputs.len() > num_maps as usize {
        return Err(format!(
            "{} sampled inputs for a shuffle of {num_maps} maps",
            inputs.len()
        ));
    }
    if let Some(i) = inputs.iter().find(|i| u64::from(i.sampled) > i.records) {
        return Err(format!(
            "an input sampled {} of its {} records",
            i.sampled, i.records
        ));
    }
    // Eq. (1) term by term, sparse: a sample names a few of many partitions per input.
    let mut shares = vec![0.0f64; num_partitions as usize];
    let mut counted = vec![0u64; inputs.len()];
    for c in counts {
        let Some(input) = inputs.get(c.input as usize) else {
            return Err(format!(
                "a count names input {} of {}",
                c.input,
                inputs.len()
            ));
        };
        if c.partition >= num_partitions {
            return Err(format!(
                "a count names partition {} of {num_partitions}",
                c.partition
            ));
        }
        counted[c.input as usize] += u64::from(c.count);
        if counted[c.input as usize] > u64::from(input.sampled) {
            return Err(format!(
                "input {} counts more records than the {} it sampled",
                c.input, input.sampled
            ));
        }
        let weight = sample_weight(input.records, u64::from(input.sampled));
        shares[c.partition as usize] += f64::from(c.count) * weight;
    }
    if let Some((j, (i, n))) = inputs
        .iter()
        .zip(&counted)
        .enumerate()
        .find(|(_, (i, &n))| n != u64::from(i.sampled))
    {
        return Err(format!(
            "input {j} counts {n} of the {} records it sampled",
            i.sampled
        ));
    }
    Ok((shares.iter().sum::<f64>() > 0.0).then(|| shares.into()))
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
        let ev = f.on_commit(1, 20, &[10, 0], &[]);
        assert!(ev.predicted.is_none() && ev.completed.is_none());
        assert!(f.prediction().is_none());
        let ev = f.on_commit(2, 20, &[30, 1], &[]);
        assert_eq!(ev.predicted, Some(2));
        let want: Arc<[u64]> = Arc::from(vec![300, 10]);
        assert_eq!(f.prediction().unwrap().sizes, want);
        // Later commits, and a count that drops (revocation) and climbs again, keep it.
        for committed in [3, 2, 1, 2, 3] {
            let ev = f.on_commit(committed, 20, &[999, 999], &[]);
            assert!(ev.predicted.is_none(), "predicted again at {committed}");
        }
        assert_eq!(f.prediction().unwrap().sizes, want);
        assert_eq!(f.prediction().unwrap().observed, 2);
    }

    #[test]
    fn prediction_is_the_rounded_linear_extrapolation() {
        let mut f = Forecast::new(7, 0.4); // 2.8 maps: 3
        f.on_commit(1, 7, &[1, 1], &[]);
        f.on_commit(2, 7, &[1, 1], &[]);
        f.on_commit(3, 7, &[10, 2], &[]);
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
        let ev = f.on_commit(1, 4, &[10, 10], &[]);
        assert_eq!(ev.predicted, Some(1));
        f.on_commit(2, 4, &[20, 20], &[]);
        f.on_commit(3, 4, &[30, 30], &[]);
        let done = f
            .on_commit(4, 4, &[40, 40], &[])
            .completed
            .expect("completed");
        let want: Arc<[u64]> = Arc::from(vec![40, 40]);
        assert_eq!(done.final_sizes, want);
        // Uniform maps: the prediction from one map was exact.
        let e = done.error().unwrap();
        assert_eq!(e.share_std, 0.0);
        assert_eq!(e.total_rel_err, Some(0.0));
        // Revoked and committed again: no second completion.
        f.on_commit(3, 4, &[30, 30], &[]);
        assert!(f.on_commit(4, 4, &[40, 40], &[]).completed.is_none());
    }

    #[test]
    fn a_shuffle_whose_later_maps_differ_scores_the_computed_error() {
        // 4 maps, threshold 50%: maps 0 and 1 write (10, 10), maps 2 and 3 write (0, 20).
        // Predicted (40, 40) from 2 maps; final (20, 60). Shares 0.5/0.5 vs 0.25/0.75:
        // errors +0.25, -0.25, std 0.25. Total 80 vs 80: 0. Relative errors 1 and 1/3.
        let mut f = Forecast::new(4, 0.5);
        f.on_commit(1, 4, &[10, 10], &[]);
        assert_eq!(f.on_commit(2, 4, &[20, 20], &[]).predicted, Some(2));
        f.on_commit(3, 4, &[20, 40], &[]);
        let done = f.on_commit(4, 4, &[20, 60], &[]).completed.unwrap();
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
        let ev = f.on_commit(1, 1, &[5, 7], &[]);
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

    fn input(records: u64, sampled: u32) -> InputSample {
        InputSample { records, sampled }
    }

    fn count(input: u32, partition: u32, count: u32) -> SampleCount {
        SampleCount {
            input,
            partition,
            count,
        }
    }

    #[test]
    fn a_sample_weights_each_input_by_its_records() {
        // Input 0: 1000 records, 10 sampled, 6 to partition 0 and 4 to partition 2;
        // input 1: 30 records, all 3 sampled to partition 1.
        let shares = sample_shares(
            2,
            3,
            &[input(1000, 10), input(30, 3)],
            &[count(0, 0, 6), count(0, 2, 4), count(1, 1, 3)],
        )
        .unwrap()
        .unwrap();
        assert_eq!(&*shares, &[600.0, 30.0, 400.0]);
        assert_eq!(sample_shares(2, 3, &[], &[]).unwrap(), None, "no sample");
        assert_eq!(
            sample_shares(2, 3, &[input(0, 0)], &[]).unwrap(),
            None,
            "an empty input"
        );
    }

    #[test]
    fn a_sample_that_cannot_describe_the_shuffle_is_refused() {
        let one = [input(10, 2)];
        for (inputs, counts, why) in [
            (&[input(1, 1); 3][..], &[][..], "more inputs than maps"),
            (&[input(1, 2)][..], &[][..], "sampled more than it holds"),
            (&one[..], &[count(1, 0, 1)][..], "input out of range"),
            (&one[..], &[count(0, 3, 1)][..], "partition out of range"),
            (
                &one[..],
                &[count(0, 0, 2), count(0, 1, 1)][..],
                "counts over the sample",
            ),
            (&one[..], &[count(0, 0, 1)][..], "counts under the sample"),
        ] {
            assert!(sample_shares(2, 3, inputs, counts).is_err(), "{why}");
        }
    }

    #[test]
    fn the_prediction_divides_the_maps_total_by_the_sample() {
        // 10 maps over input ordered by key: the first commit wrote everything to
        // partition 0; the sample says the shuffle divides 1:1:2.
        let mut f = Forecast::new(10, 0.1);
        f.use_sample(Arc::from(vec![5.0, 5.0, 10.0]));
        let ev = f.on_commit(1, 10, &[40, 0, 0], &[]);
        assert_eq!(ev.predicted, Some(1));
        let p = f.prediction().unwrap();
        assert!(p.from_sample);
        assert_eq!(&*p.sizes, &[100, 100, 200]);
        // Without a sample: the maps' own division.
        let mut g = Forecast::new(10, 0.1);
        g.on_commit(1, 10, &[40, 0, 0], &[]);
        assert!(!g.prediction().unwrap().from_sample);
        assert_eq!(&*g.prediction().unwrap().sizes, &[400, 0, 0]);
    }
}
