//! A small seeded random source, so every run of the engine can be replayed bit for bit.
//!
//! SplitMix64 passes BigCrush, is a handful of instructions per draw and has no dependencies
//! whose output could change under us between versions.

/// A seeded SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n`; `n` must be positive.
    pub fn below(&mut self, n: u64) -> u64 {
        // Lemire's multiply-shift: unbiased enough for simulation, no division.
        ((u128::from(self.next_u64()) * u128::from(n.max(1))) >> 64) as u64
    }

    /// A standard normal draw (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.next_f64().max(f64::MIN_POSITIVE);
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// A lognormal factor with mean 1 and log-standard-deviation `sigma`.
    pub fn lognormal_factor(&mut self, sigma: f64) -> f64 {
        if sigma <= 0.0 {
            return 1.0;
        }
        (sigma * self.normal() - sigma * sigma / 2.0).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_other_seed_other_sequence() {
        let a: Vec<u64> = (0..8)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..8)
            .scan(Rng::new(7), |r, _| Some(r.next_u64()))
            .collect();
        let c: Vec<u64> = (0..8)
            .scan(Rng::new(8), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn lognormal_factor_has_mean_one_and_the_asked_spread() {
        let mut rng = Rng::new(1);
        let draws: Vec<f64> = (0..200_000).map(|_| rng.lognormal_factor(0.04)).collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let logs: Vec<f64> = draws.iter().map(|d| d.ln()).collect();
        let log_mean = logs.iter().sum::<f64>() / logs.len() as f64;
        let log_sd =
            (logs.iter().map(|l| (l - log_mean).powi(2)).sum::<f64>() / logs.len() as f64).sqrt();
        assert!((mean - 1.0).abs() < 0.002, "mean {mean}");
        assert!((log_sd - 0.04).abs() < 0.002, "sd {log_sd}");
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = Rng::new(3);
        let mut seen = [0u32; 5];
        for _ in 0..10_000 {
            let v = rng.below(5) as usize;
            seen[v] += 1;
        }
        assert!(seen.iter().all(|&n| n > 1_800), "{seen:?}");
    }
}
