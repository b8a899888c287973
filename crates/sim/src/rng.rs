//! A small seeded PRNG: xoshiro256** (Blackman & Vigna) seeded through SplitMix64.
//! Deterministic across platforms; not for cryptography.

/// SplitMix64 step, used to expand a seed.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// xoshiro256** generator.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator from a 64-bit seed.
    pub fn new(seed: u64) -> Self {
        let mut st = seed;
        let s = [
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
        ];
        Rng { s }
    }

    /// An independent stream derived from this seed and a label.
    pub fn derive(seed: u64, label: u64) -> Self {
        let mut st = seed ^ label.wrapping_mul(0xD1B5_4A32_D192_ED03);
        Rng::new(splitmix64(&mut st))
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (Lemire's multiply-shift with rejection); 0 when `n == 0`.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = (self.next_u64() as u128) * (n as u128);
            if (m as u64) >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// Uniform in `[0, 1)`.
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.f64();
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Log-normal with median `median` and shape `sigma`.
    pub fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.normal()).exp()
    }

    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }
}

/// Sampling from a fixed discrete distribution by binary search on the cumulative weights.
#[derive(Debug, Clone)]
pub struct Discrete {
    cum: Vec<f64>,
}

impl Discrete {
    /// From non-negative weights (at least one positive).
    pub fn new(weights: &[f64]) -> Self {
        let mut acc = 0.0;
        let cum = weights
            .iter()
            .map(|w| {
                acc += w.max(0.0);
                acc
            })
            .collect();
        Discrete { cum }
    }

    /// Truncated Zipf over `0..n`: weight `1 / (x + 1)^alpha`.
    pub fn zipf(n: usize, alpha: f64) -> Self {
        let w: Vec<f64> = (0..n).map(|x| 1.0 / ((x + 1) as f64).powf(alpha)).collect();
        Discrete::new(&w)
    }

    /// Probability of outcome `i`.
    pub fn prob(&self, i: usize) -> f64 {
        let total = *self.cum.last().unwrap_or(&0.0);
        let lo = if i == 0 { 0.0 } else { self.cum[i - 1] };
        (self.cum[i] - lo) / total
    }

    /// One draw.
    pub fn sample(&self, rng: &mut Rng) -> usize {
        let total = *self.cum.last().unwrap_or(&0.0);
        let x = rng.f64() * total;
        self.cum
            .partition_point(|&c| c <= x)
            .min(self.cum.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let a: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = Rng::new(43);
            (0..5).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = Rng::new(1);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            seen[r.below(7) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| (850..1150).contains(&c)), "{seen:?}");
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn zipf_alpha_zero_is_uniform_and_skew_favours_zero() {
        let z = Discrete::zipf(4, 0.0);
        assert!((z.prob(3) - 0.25).abs() < 1e-12);
        let z = Discrete::zipf(4, 2.0);
        assert!(z.prob(0) > 0.6);
        let mut r = Rng::new(9);
        let hits = (0..10_000).filter(|_| z.sample(&mut r) == 0).count();
        assert!((hits as f64 / 10_000.0 - z.prob(0)).abs() < 0.03);
    }
}
