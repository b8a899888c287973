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

/// Linear extrapolation for hash partitioners: the observed per-reduce totals scaled by
/// `total_maps / observed.len()`. Hosts and shares come from the observed outputs; ties
/// between hosts go to the lower host id. With no observation every size is 0.
pub fn predict_from_map_outputs(
    observed: &[MapOutput],
    total_maps: usize,
    reduces: usize,
) -> Vec<PartitionPrediction> {
    let scale = if observed.is_empty() {
        0.0
    } else {
        total_maps as f64 / observed.len() as f64
    };
    (0..reduces)
        .map(|i| {
            let mut by_host = Vec::new();
            let mut total = 0.0;
            for o in observed {
                let v = o.sizes.get(i).copied().unwrap_or(0) as f64;
                total += v;
                add_host(&mut by_host, o.host, v);
            }
            let (host, share) = dominant(&by_host, total);
            PartitionPrediction {
                size: total * scale,
                host,
                share,
            }
        })
        .collect()
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
        if s.sampled == 0 {
            continue;
        }
        let w = s.records as f64 / s.sampled as f64;
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
