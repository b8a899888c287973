//! Reduce-partition size prediction.
//!
//! Source: Z. Fu, Z. Qi, "Efficient and Universal Shuffle Management with SCache",
//! Section 3.2.2 (shuffle output prediction) and Section 4.1.1 (sampling), Equation (1).
//!
//! - Hash partitioners: [`predict_from_map_outputs`] extrapolates linearly from the per-reduce
//!   block sizes of the map tasks observed so far.
//! - Range or custom partitioners: each input partition keeps an Algorithm-R [`Reservoir`] of
//!   `s * p` records (`p` reduces, `s = 3` in the paper); the caller runs the map function
//!   and the partitioner on the sampled records and reports a [`PartitionSample`];
//!   [`predict_from_samples`] weights each partition's sample by its record count (Eq. 1).
//!
//! Both report, per reduce partition, the predicted size, its dominant host and that
//! host's share (`prob` in SCache's Algorithm 1).
//!
//! The coordinator predicts live with the same arithmetic: [`maps_to_observe`] is its
//! observation threshold (the paper gives no value), [`extrapolate`] the linear
//! extrapolation from per-partition totals it already keeps (so it needs no per-map
//! vectors), and [`prediction_error`] scores a prediction against the final sizes, as
//! `crossdock sim size-prediction` does. For a range-partitioned shuffle whose engine sent
//! a sample of its input, the coordinator divides the extrapolated total by the sample's
//! [`predict_from_samples`] shares ([`scale_shares`]).
//!
//! Corrections of Eq. (1) as printed (`reduceSize_i = sum_{j=0}^{m} partitionSize_j *
//! sample_i / (s * p)`):
//! - the sum runs over the `m` input partitions, `j = 0..m-1`, not `0..=m`;
//! - `sample_i` must be partition `j`'s own sample count for reduce `i`, `sample_{j,i}`;
//! - the denominator is the number of records actually sampled from partition `j`, which
//!   is less than `s * p` when the partition has fewer records than the reservoir.

/// Prediction for one reduce partition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartitionPrediction {
    /// Predicted size (bytes or records, in the unit of the inputs).
    pub size: f64,
    /// The host producing the largest share, `None` if nothing was observed for it.
    pub host: Option<u32>,
    /// That host's share of the partition, in `[0, 1]` (0 when nothing was observed).
    pub share: f64,
}

/// The per-reduce output sizes of one finished map task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapOutput {
    /// Host where the map output lives.
    pub host: u32,
    /// `sizes[i]` is the block size for reduce `i`.
    pub sizes: Vec<u64>,
}

/// Sampling result of one input partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSample {
    /// Host of the input partition (where its map output will be produced).
    pub host: u32,
    /// Records in the whole input partition (`partitionSize_j`, the weight).
    pub records: u64,
    /// Records actually sampled (the reservoir's length).
    pub sampled: u64,
    /// `per_reduce[i]`: map-output records (or bytes) of the sampled records that the
    /// partitioner sends to reduce `i`.
    pub per_reduce: Vec<u64>,
}

/// Algorithm R (Vitter): a uniform sample of `k` items from a stream of unknown length.
#[derive(Debug, Clone)]
pub struct Reservoir<T> {
    k: usize,
    seen: u64,
    items: Vec<T>,
}

impl<T> Reservoir<T> {
    /// An empty reservoir of capacity `k`.
    pub fn new(k: usize) -> Self {
        Reservoir {
            k,
            seen: 0,
            items: Vec::with_capacity(k.min(1 << 16)),
        }
    }

    /// Offers the next stream item; `rand_below(n)` must be uniform in `0..n`.
    pub fn offer(&mut self, item: T, rand_below: &mut dyn FnMut(u64) -> u64) {
        self.seen += 1;
        if self.items.len() < self.k {
            self.items.push(item);
        } else if self.k > 0 {
            let r = rand_below(self.seen);
            if (r as usize) < self.k {
                self.items[r as usize] = item;
            }
        }
    }

    /// Items offered so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// The sample.
    pub fn items(&self) -> &[T] {
        &self.items
    }
}

fn dominant(by_host: &[(u32, f64)], total: f64) -> (Option<u32>, f64) {
    let mut best: Option<(u32, f64)> = None;
    for &(h, v) in by_host {
        match best {
            Some((bh, bv)) if v < bv || (v == bv && h >= bh) => {}
            _ => best = Some((h, v)),
        }
    }
    match best {
        Some((h, v)) if total > 0.0 && v > 0.0 => (Some(h), v / total),
        _ => (None, 0.0),
    }
}

fn add_host(acc: &mut Vec<(u32, f64)>, host: u32, v: f64) {
    match acc.iter_mut().find(|(h, _)| *h == host) {
        Some(e) => e.1 += v,
        None => acc.push((host, v)),
    }
}

/// How many committed maps a prediction from map outputs waits for: `fraction` of
/// `total_maps`, rounded up, at least 1 and at most `total_maps` (0 for a shuffle of no
/// maps, which never predicts). The paper only says the scheduler runs once the observed
/// output "reaches an observation threshold"; the caller picks `fraction`.
///
/// A product such as `0.7 * 100` is `70.00000000000001` in floating point; the
/// millionth of a map subtracted before rounding up keeps it at 70.
pub fn maps_to_observe(total_maps: usize, fraction: f64) -> usize {
    if total_maps == 0 {
        return 0;
    }
    let wanted = (total_maps as f64 * fraction - 1e-6).ceil();
    // `NaN as usize` is 0 and a negative product saturates to 0: both become 1.
    (wanted as usize).clamp(1, total_maps)
}

/// Linear extrapolation (hash partitioners): each partition's bytes (or records)
/// written by the `observed_maps` maps seen so far, scaled by `total_maps /
/// observed_maps`. All zero when nothing was observed. [`predict_from_map_outputs`]
/// sizes its partitions with it; the coordinator calls it on the per-partition totals it
/// keeps anyway.
pub fn extrapolate(observed_totals: &[u64], observed_maps: usize, total_maps: usize) -> Vec<f64> {
    let scale = if observed_maps == 0 {
        0.0
    } else {
        total_maps as f64 / observed_maps as f64
    };
    observed_totals.iter().map(|&t| t as f64 * scale).collect()
}

/// Linear extrapolation for hash partitioners: the observed per-reduce totals scaled by
/// `total_maps / observed.len()` (see [`extrapolate`]). Hosts and shares come from the
/// observed outputs; ties between hosts go to the lower host id. With no observation
/// every size is 0.
pub fn predict_from_map_outputs(
    observed: &[MapOutput],
    total_maps: usize,
    reduces: usize,
) -> Vec<PartitionPrediction> {
    let totals: Vec<u64> = (0..reduces)
        .map(|i| {
            observed
                .iter()
                .map(|o| o.sizes.get(i).copied().unwrap_or(0))
                .sum()
        })
        .collect();
    let sizes = extrapolate(&totals, observed.len(), total_maps);
    (0..reduces)
        .map(|i| {
            let mut by_host = Vec::new();
            for o in observed {
                let v = o.sizes.get(i).copied().unwrap_or(0) as f64;
                add_host(&mut by_host, o.host, v);
            }
            let (host, share) = dominant(&by_host, totals[i] as f64);
            PartitionPrediction {
                size: sizes[i],
                host,
                share,
            }
        })
        .collect()
}

/// How far a size prediction was from the final sizes, as the paper's Fig. 7 reports it
/// and more. See [`prediction_error`] for the exact definitions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PredictionError {
    /// The standard deviation of the normalised error: the population standard
    /// deviation over the partitions of `pred_i / sum(pred) - truth_i / sum(truth)`.
    pub share_std: f64,
    /// `|sum(pred) - sum(truth)| / sum(truth)`: how far off the shuffle's total was.
    /// `None` when the final total is 0 (nothing to be relative to).
    pub total_rel_err: Option<f64>,
    /// Mean over partitions with final data of `|pred_i - truth_i| / truth_i`.
    pub mean_rel_err: f64,
    /// The largest of those per-partition relative errors.
    pub max_rel_err: f64,
}

/// Scores predicted partition sizes `pred` against the final sizes `truth` (same
/// length, same unit).
///
/// The normalised error. Fig. 7 normalises each series (observed map output,
/// prediction, final reduce input) "to [0, 1]" without saying how, and reports the
/// standard deviation of the normalised prediction's error. Here each series is divided
/// by its own total: `p_i = pred_i / sum(pred)` and `t_i = truth_i / sum(truth)` (all 0
/// when the total is 0), so both lie in [0, 1] and sum to 1, and `share_std` is the
/// population standard deviation, over the partitions, of `e_i = p_i - t_i` (whose mean
/// is 0 when both totals are positive). It measures the *shape* of the prediction only:
/// a prediction off by a constant factor scores 0, and that factor shows in
/// `total_rel_err` instead. Min-max normalisation was not used because it is undefined
/// for a uniform series, the usual outcome of a hash partitioner. Shares average `1 / p`,
/// so `share_std` shrinks as the partition count `p` grows; `share_std * p` is the error
/// relative to the average partition.
///
/// Relative errors are taken over the partitions whose final size is positive; a
/// partition predicted to hold data that ends up empty shows in `share_std` only. Both
/// are 0 when no partition has final data.
pub fn prediction_error(pred: &[f64], truth: &[f64]) -> PredictionError {
    let ps: f64 = pred.iter().sum();
    let ts: f64 = truth.iter().sum();
    let diffs: Vec<f64> = pred
        .iter()
        .zip(truth)
        .map(|(p, t)| {
            let a = if ps > 0.0 { p / ps } else { 0.0 };
            let b = if ts > 0.0 { t / ts } else { 0.0 };
            a - b
        })
        .collect();
    let n = diffs.len().max(1) as f64;
    let mean = diffs.iter().sum::<f64>() / n;
    let var = diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n;
    let rel: Vec<f64> = pred
        .iter()
        .zip(truth)
        .filter(|(_, &t)| t > 0.0)
        .map(|(p, t)| (p - t).abs() / t)
        .collect();
    PredictionError {
        share_std: var.sqrt(),
        total_rel_err: (ts > 0.0).then(|| (ps - ts).abs() / ts),
        mean_rel_err: rel.iter().sum::<f64>() / rel.len().max(1) as f64,
        max_rel_err: rel.iter().copied().fold(0.0, f64::max),
    }
}

/// Records of a partition's own observed output that weigh as much as the shuffle's mean
/// in [`scale_shares`]' bytes per record: a partition seen in a handful of records keeps
/// close to the mean, one seen in thousands has its own.
pub const BYTES_PER_RECORD_PRIOR: f64 = 32.0;

/// How far the first maps' records must be from the sample's division (total variation
/// distance: the share of records that would have to change partitions) for
/// [`scale_shares`] to trust the sample alone; below it the maps' extrapolation keeps a
/// weight falling linearly to 0 at this distance.
pub const UNREPRESENTATIVE_MAPS: f64 = 0.5;

/// Partition sizes from a sample of the input and the first maps' output. `shares` are
/// the sample's predicted records per partition ([`predict_from_samples`]'s sizes, Eq. 1,
/// in records: they sum to the input's records); each partition's bytes per record come
/// from its own committed output, shrunk towards the shuffle's mean by
/// [`BYTES_PER_RECORD_PRIOR`] records (partitions compress differently: a run of one hot
/// key far better than distinct keys, so a record is not a byte).
///
/// The first maps are a better guide than the sample when they are a fair draw of the input
/// (hash partitioners, input in random order): they saw far more records. They are no
/// guide when the input is ordered by key (the first maps hold only the lowest ranges).
/// So the result blends the two: the sample's prediction with weight `min(1, d /`
/// [`UNREPRESENTATIVE_MAPS`]`)`, where `d` is the total variation distance between the first
/// maps' records per partition and the sample's, and [`extrapolate`]'s with the rest.
/// With no observed records (`observed_records` empty or all 0) the bytes' extrapolated
/// total is divided by the shares alone; a sample that saw nothing (every share 0), or one
/// of another partition count, leaves the extrapolation of `observed_bytes`.
pub fn scale_shares(
    shares: &[f64],
    observed_bytes: &[u64],
    observed_records: &[u64],
    observed_maps: usize,
    total_maps: usize,
) -> Vec<f64> {
    let linear = extrapolate(observed_bytes, observed_maps, total_maps);
    let weight: f64 = shares.iter().sum();
    if weight <= 0.0 || shares.len() != linear.len() {
        return linear;
    }
    let bytes: f64 = observed_bytes.iter().map(|&b| b as f64).sum();
    let records: f64 = observed_records.iter().map(|&r| r as f64).sum();
    if records <= 0.0 || observed_records.len() != shares.len() {
        let total: f64 = linear.iter().sum();
        return shares.iter().map(|s| total * s / weight).collect();
    }
    let mean = bytes / records;
    let distance = 0.5
        * shares
            .iter()
            .zip(observed_records)
            .map(|(s, &r)| (s / weight - r as f64 / records).abs())
            .sum::<f64>();
    let trust = (distance / UNREPRESENTATIVE_MAPS).min(1.0);
    shares
        .iter()
        .zip(observed_bytes.iter().zip(observed_records))
        .zip(&linear)
        .map(|((s, (&b, &r)), l)| {
            let per_record =
                (b as f64 + mean * BYTES_PER_RECORD_PRIOR) / (r as f64 + BYTES_PER_RECORD_PRIOR);
            trust * s * per_record + (1.0 - trust) * l
        })
        .collect()
}

/// What one sampled record of an input partition stands for in Eq. (1): the partition's
/// records over the records sampled from it (0 for a partition with no sample). A caller
/// with sparse counts (the coordinator: a sample names few of many partitions) adds
/// `count * sample_weight(..)` per (partition, count), the sum [`predict_from_samples`] makes.
pub fn sample_weight(records: u64, sampled: u64) -> f64 {
    if sampled == 0 {
        0.0
    } else {
        records as f64 / sampled as f64
    }
}

/// SCache's Eq. (1), corrected: `size_i = sum_j records_j * per_reduce_{j,i} / sampled_j`.
/// Partitions with no sampled record contribute nothing.
pub fn predict_from_samples(
    samples: &[PartitionSample],
    reduces: usize,
) -> Vec<PartitionPrediction> {
    let mut sizes = vec![0.0f64; reduces];
    let mut hosts: Vec<Vec<(u32, f64)>> = vec![Vec::new(); reduces];
    for s in samples {
        let w = sample_weight(s.records, s.sampled);
        for (i, &c) in s.per_reduce.iter().enumerate().take(reduces) {
            let v = c as f64 * w;
            sizes[i] += v;
            if v > 0.0 {
                add_host(&mut hosts[i], s.host, v);
            }
        }
    }
    sizes
        .iter()
        .zip(&hosts)
        .map(|(&size, by_host)| {
            let (host, share) = dominant(by_host, size);
            PartitionPrediction { size, host, share }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_extrapolation_scales_by_unobserved_maps() {
        let obs = vec![
            MapOutput {
                host: 0,
                sizes: vec![10, 0, 4],
            },
            MapOutput {
                host: 1,
                sizes: vec![30, 0, 4],
            },
        ];
        let p = predict_from_map_outputs(&obs, 10, 3);
        assert_eq!(p[0].size, 200.0);
        assert_eq!(p[0].host, Some(1));
        assert_eq!(p[0].share, 0.75);
        // Nothing observed for reduce 1.
        assert_eq!(
            p[1],
            PartitionPrediction {
                size: 0.0,
                host: None,
                share: 0.0
            }
        );
        // Tie between hosts 0 and 1: lower id wins.
        assert_eq!(p[2].host, Some(0));
        assert_eq!(p[2].share, 0.5);
    }

    #[test]
    fn observation_threshold_rounds_up_and_keeps_at_least_one_map() {
        assert_eq!(maps_to_observe(200, 0.1), 20);
        assert_eq!(
            maps_to_observe(100, 0.7),
            70,
            "not 71 from 70.00000000000001"
        );
        assert_eq!(maps_to_observe(15, 0.1), 2, "1.5 rounds up");
        assert_eq!(maps_to_observe(5, 0.1), 1, "at least one map");
        assert_eq!(maps_to_observe(5, 0.0), 1);
        assert_eq!(maps_to_observe(5, 1.0), 5);
        assert_eq!(maps_to_observe(5, 3.0), 5, "at most every map");
        assert_eq!(maps_to_observe(5, f64::NAN), 1);
        assert_eq!(maps_to_observe(0, 0.1), 0);
    }

    #[test]
    fn extrapolation_of_totals_matches_the_per_map_form() {
        assert_eq!(extrapolate(&[40, 0, 8], 2, 10), vec![200.0, 0.0, 40.0]);
        assert_eq!(extrapolate(&[5], 0, 10), vec![0.0]);
        let obs = vec![
            MapOutput {
                host: 0,
                sizes: vec![7, 1],
            },
            MapOutput {
                host: 1,
                sizes: vec![2, 9],
            },
            MapOutput {
                host: 0,
                sizes: vec![0, 4],
            },
        ];
        let per_map: Vec<f64> = predict_from_map_outputs(&obs, 7, 2)
            .iter()
            .map(|x| x.size)
            .collect();
        assert_eq!(per_map, extrapolate(&[9, 14], 3, 7));
    }

    #[test]
    fn a_prediction_of_the_right_shape_has_no_normalised_error() {
        // Half the true sizes everywhere: the shape is exact, the total 50% off.
        let e = prediction_error(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]);
        assert!(e.share_std < 1e-12);
        assert!((e.total_rel_err.unwrap() - 0.5).abs() < 1e-12);
        assert!((e.mean_rel_err - 0.5).abs() < 1e-12);
        assert!((e.max_rel_err - 0.5).abs() < 1e-12);
    }

    #[test]
    fn prediction_error_on_a_worked_example() {
        // Predicted shares 0.5, 0.5, 0; true shares 0.25, 0.25, 0.5: errors 0.25, 0.25,
        // -0.5, mean 0, variance (0.0625 + 0.0625 + 0.25) / 3 = 0.125.
        let e = prediction_error(&[50.0, 50.0, 0.0], &[25.0, 25.0, 50.0]);
        assert!((e.share_std - 0.125f64.sqrt()).abs() < 1e-12, "{e:?}");
        assert_eq!(e.total_rel_err, Some(0.0));
        // Relative errors 1, 1, 1.
        assert!((e.mean_rel_err - 1.0).abs() < 1e-12);
        assert!((e.max_rel_err - 1.0).abs() < 1e-12);
    }

    #[test]
    fn empty_partitions_and_empty_shuffles_score_without_dividing_by_zero() {
        // Partition 1 ends up empty: left out of the relative errors.
        let e = prediction_error(&[10.0, 5.0], &[10.0, 0.0]);
        assert_eq!(e.mean_rel_err, 0.0);
        assert_eq!(e.max_rel_err, 0.0);
        assert!(e.share_std > 0.0);
        assert!((e.total_rel_err.unwrap() - 0.5).abs() < 1e-12);
        let none = prediction_error(&[0.0, 0.0], &[0.0, 0.0]);
        assert_eq!(
            none,
            PredictionError {
                share_std: 0.0,
                total_rel_err: None,
                mean_rel_err: 0.0,
                max_rel_err: 0.0
            }
        );
        assert_eq!(prediction_error(&[], &[]).share_std, 0.0);
    }

    #[test]
    fn hash_extrapolation_without_observations_is_empty_sized() {
        let p = predict_from_map_outputs(&[], 10, 2);
        assert!(p.iter().all(|x| x.size == 0.0 && x.host.is_none()));
        assert!(predict_from_map_outputs(&[], 10, 0).is_empty());
    }

    #[test]
    fn eq1_weights_partitions_by_record_count() {
        // Partition A (host 0): 1000 records, sample of 10: 8 go to reduce 0, 2 to reduce 1.
        // Partition B (host 1): 100 records, sample of 10: all to reduce 1.
        let s = vec![
            PartitionSample {
                host: 0,
                records: 1000,
                sampled: 10,
                per_reduce: vec![8, 2],
            },
            PartitionSample {
                host: 1,
                records: 100,
                sampled: 10,
                per_reduce: vec![0, 10],
            },
        ];
        let p = predict_from_samples(&s, 2);
        assert!((p[0].size - 800.0).abs() < 1e-9);
        assert!((p[1].size - 300.0).abs() < 1e-9);
        assert_eq!(p[0].host, Some(0));
        assert_eq!(p[0].share, 1.0);
        assert_eq!(p[1].host, Some(0)); // 200 from host 0 vs 100 from host 1
        assert!((p[1].share - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn eq1_small_partition_uses_actual_sample_count() {
        // 4 records in the partition, reservoir of 9 holds all 4: the prediction is exact,
        // whereas the printed denominator s * p = 9 would under-predict by more than half.
        let s = vec![PartitionSample {
            host: 3,
            records: 4,
            sampled: 4,
            per_reduce: vec![1, 3, 0],
        }];
        let p = predict_from_samples(&s, 3);
        assert_eq!(
            p.iter().map(|x| x.size).collect::<Vec<_>>(),
            vec![1.0, 3.0, 0.0]
        );
        assert_eq!(p[2].host, None);
    }

    #[test]
    fn eq1_map_function_may_multiply_records() {
        // Each sampled record emits two outputs: sizes double the record count.
        let s = vec![PartitionSample {
            host: 0,
            records: 50,
            sampled: 5,
            per_reduce: vec![10],
        }];
        assert_eq!(predict_from_samples(&s, 1)[0].size, 100.0);
    }

    #[test]
    fn shares_divide_the_extrapolated_total() {
        // 2 of 10 maps wrote 30 bytes, all to partition 0 (sorted input); the sample says
        // the shuffle divides 1:1:2. Without records: the bytes' extrapolated total divided.
        let sizes = scale_shares(&[10.0, 10.0, 20.0], &[30, 0, 0], &[], 2, 10);
        assert_eq!(sizes, vec![37.5, 37.5, 75.0]);
    }

    #[test]
    fn maps_unlike_the_sample_leave_it_to_the_sample() {
        // 1 of 2 maps, input ordered by key: it wrote partition 0 (1000 records in 1000
        // bytes: equal keys compress) and partition 1 (1000 in 9000 bytes); the sample says
        // the 4000 input records divide 1000 : 1000 : 2000. Distance 0.5: the sample alone.
        let sizes = scale_shares(
            &[1000.0, 1000.0, 2000.0],
            &[1000, 9000, 0],
            &[1000, 1000, 0],
            1,
            2,
        );
        let mean = 10000.0 / 2000.0;
        let own =
            |b: f64, r: f64| (b + mean * BYTES_PER_RECORD_PRIOR) / (r + BYTES_PER_RECORD_PRIOR);
        assert_eq!(sizes[0], 1000.0 * own(1000.0, 1000.0));
        assert_eq!(sizes[1], 1000.0 * own(9000.0, 1000.0));
        assert_eq!(
            sizes[2],
            2000.0 * mean,
            "an unseen partition takes the mean"
        );
        assert!(
            sizes[0] < 1150.0 && sizes[1] > 8850.0,
            "near their own: {sizes:?}"
        );
    }

    #[test]
    fn maps_like_the_sample_keep_their_extrapolation() {
        // The first map's records divide as the sample's: its extrapolation stands.
        let sizes = scale_shares(&[1000.0, 3000.0], &[500, 1600], &[250, 750], 1, 4);
        assert_eq!(sizes, vec![2000.0, 6400.0]);
        // Halfway (distance 0.25): half each.
        let half = scale_shares(&[1000.0, 1000.0], &[750, 250], &[750, 250], 1, 2);
        let sample = 1000.0 * (750.0 + 32.0) / (750.0 + 32.0);
        assert!(
            (half[0] - (0.5 * sample + 0.5 * 1500.0)).abs() < 1e-9,
            "{half:?}"
        );
    }

    #[test]
    fn an_empty_or_mismatched_sample_leaves_the_extrapolation() {
        assert_eq!(
            scale_shares(&[0.0, 0.0], &[3, 1], &[1, 1], 1, 2),
            vec![6.0, 2.0]
        );
        assert_eq!(scale_shares(&[1.0], &[3, 1], &[1, 1], 1, 2), vec![6.0, 2.0]);
    }

    #[test]
    fn reservoir_keeps_first_k_then_replaces_by_draw() {
        let mut r = Reservoir::new(3);
        let mut draws = [0u64, 4, 2].into_iter();
        let mut rb = |n: u64| {
            let d = draws.next().expect("three draws");
            assert!(d < n);
            d
        };
        for x in 0..6 {
            r.offer(x, &mut rb);
        }
        // Items 0,1,2 fill; 3 replaces slot 0; 4 (draw 4) is dropped; 5 replaces slot 2.
        assert_eq!(r.items(), &[3, 1, 5]);
        assert_eq!(r.seen(), 6);
    }

    #[test]
    fn reservoir_of_zero_keeps_nothing() {
        let mut r = Reservoir::new(0);
        let mut rb = |_n: u64| -> u64 { panic!("no draw needed") };
        r.offer(1, &mut rb);
        assert!(r.items().is_empty());
        assert_eq!(r.seen(), 1);
    }

    #[test]
    fn reservoir_is_roughly_uniform() {
        // 2000 runs of k=1 over 4 items: every item is kept about a quarter of the time.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut rb = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut counts = [0u32; 4];
        for _ in 0..2000 {
            let mut r = Reservoir::new(1);
            for x in 0..4 {
                r.offer(x, &mut rb);
            }
            counts[r.items()[0]] += 1;
        }
        assert!(
            counts.iter().all(|&c| (400..600).contains(&c)),
            "{counts:?}"
        );
    }
}
