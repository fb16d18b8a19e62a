//! An online, per-endpoint model of time to first token (TTFT).
//!
//! `ttft ≈ base + queue_ahead × step + (prefill_ahead + uncached_prompt_tokens) × per_token`
//!
//! `step` is the time one request ahead in the queue costs, `per_token` the inverse of the
//! endpoint's prefill rate. `prefill_ahead` is the uncached prompt of requests this gateway sent
//! there that have not produced their first token: the engine prefills them first, at the same
//! rate, so a pod busy with one long cold prompt is priced as busy even though its request count
//! says it is nearly idle. Both are learned from the TTFTs the gateway observes, by decayed
//! (forgetting) least squares with a ridge pull toward a prior, so a slower GPU generation is
//! recognised after a few requests without any label saying so.
//!
//! Cold endpoints are not free. An endpoint with no observations is predicted with the fleet's
//! mean parameters, each floored, like linkerd seeds a new endpoint's latency estimate instead of
//! starting at zero: a zero estimate would make every fresh pod look like the fastest in the pool
//! and draw a flood of requests onto it right after it joins (or right after every metrics poll).

use std::time::Duration;

/// Tuning of the latency model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyParams {
    /// Prior fixed cost of a request (seconds) when the fleet has taught nothing yet.
    pub default_base_s: f64,
    /// Prior cost of one request queued ahead (seconds).
    pub default_step_s: f64,
    /// Prior prefill rate (tokens per second).
    pub default_prefill_tokens_per_s: f64,
    /// Lower bounds of the three parameters (seconds, seconds, seconds per 1000 tokens); learned
    /// values never go below them, so no endpoint is ever predicted to be free.
    pub floor_base_s: f64,
    /// See [`Self::floor_base_s`].
    pub floor_step_s: f64,
    /// See [`Self::floor_base_s`].
    pub floor_per_1k_tokens_s: f64,
    /// Weight of an old observation relative to the next one (0 < λ ≤ 1); the model remembers
    /// about `1 / (1 − λ)` observations.
    pub forgetting: f64,
    /// Strength of the pull toward the prior, in pseudo-observations.
    pub prior_weight: f64,
    /// Effective observations after which an endpoint counts as warm and joins the fleet prior.
    pub warm_after: f64,
}

impl Default for LatencyParams {
    fn default() -> Self {
        Self {
            default_base_s: 0.02,
            default_step_s: 0.05,
            default_prefill_tokens_per_s: 10_000.0,
            floor_base_s: 0.002,
            floor_step_s: 0.002,
            floor_per_1k_tokens_s: 0.005,
            forgetting: 0.98,
            prior_weight: 0.5,
            warm_after: 4.0,
        }
    }
}

/// What was known about a request at one endpoint when it was dispatched.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TtftFeatures {
    /// Requests ahead of it in the endpoint's queue (scraped plus dispatch credit).
    pub queue_ahead: f64,
    /// Prompt tokens not expected to be in the endpoint's prefix cache.
    pub uncached_tokens: f64,
    /// Uncached prompt tokens of earlier requests there still waiting for their first token.
    pub prefill_ahead: f64,
}

impl TtftFeatures {
    /// `[1, queue, tokens / 1000]`, the tokens being this prompt's and the prefill ahead of it:
    /// scaled so the three parameters have similar magnitudes (tens of milliseconds), which keeps
    /// the ridge prior equally strong on each.
    #[inline]
    fn x(&self) -> [f64; 3] {
        [
            1.0,
            self.queue_ahead.max(0.0),
            (self.uncached_tokens.max(0.0) + self.prefill_ahead.max(0.0)) / 1000.0,
        ]
    }
}

/// Learned parameters of one endpoint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyEstimate {
    /// Fixed cost (seconds).
    pub base_s: f64,
    /// Cost per queued request ahead (seconds).
    pub step_s: f64,
    /// Prefill rate (tokens per second).
    pub prefill_tokens_per_s: f64,
    /// Effective number of observations behind the estimate.
    pub observations: f64,
}

#[derive(Debug, Clone)]
struct EndpointFit {
    /// Decayed Σ x xᵀ.
    xx: [[f64; 3]; 3],
    /// Decayed Σ x t.
    xt: [f64; 3],
    /// Decayed observation count.
    n: f64,
    theta: [f64; 3],
}

/// Per-endpoint TTFT models over slots (see [`crate::prefix::PrefixIndex`] for slots).
#[derive(Debug, Clone)]
pub struct LatencyModel {
    params: LatencyParams,
    fits: Vec<Option<EndpointFit>>,
    /// Each fitted slot's θ, apart from the fit statistics so that predicting for thousands of
    /// candidates reads 32 bytes each.
    thetas: Vec<Option<[f64; 3]>>,
    /// Σ θ over warm endpoints and their count: the prior for cold ones.
    warm_sum: [f64; 3],
    warm_count: usize,
    /// The prior, recomputed whenever the warm set changes.
    prior: [f64; 3],
}

impl LatencyModel {
    /// A model with no observations.
    pub fn new(params: LatencyParams) -> Self {
        let mut m = Self {
            params,
            fits: Vec::new(),
            thetas: Vec::new(),
            warm_sum: [0.0; 3],
            warm_count: 0,
            prior: [0.0; 3],
        };
        m.prior = m.compute_prior();
        m
    }

    /// Predicted TTFT in seconds of a request with features `f` at `slot`; never below the
    /// floors.
    pub fn predict(&self, slot: u32, f: &TtftFeatures) -> f64 {
        dot(self.theta(slot), f.x())
    }

    /// [`Self::predict`], but only when it rests on observations — of `slot` itself, or of warm
    /// endpoints through the fleet prior — rather than on the defaults alone. A warm `slot` is
    /// one of the warm endpoints, so "some endpoint is warm" covers both.
    pub fn predict_informed(&self, slot: u32, f: &TtftFeatures) -> Option<f64> {
        (self.warm_count > 0).then(|| self.predict(slot, f))
    }

    /// [`Self::predict`] for many requests at once, appending to `out`: the `i`-th at slot
    /// `slots[i]` with `queue_ahead[i]`, `uncached_tokens[i]` and `prefill_ahead[i]`.
    pub(crate) fn predict_into(
        &self,
        slots: &[u32],
        queue_ahead: &[f64],
        uncached_tokens: &[f64],
        prefill_ahead: &[f64],
        out: &mut Vec<f64>,
    ) {
        out.extend(
            slots
                .iter()
                .zip(
                    queue_ahead
                        .iter()
                        .zip(uncached_tokens.iter().zip(prefill_ahead)),
                )
                .map(|(&slot, (&queue_ahead, (&uncached, &ahead)))| {
                    // `TtftFeatures::x`, with the division by 1000 turned into a multiplication
                    // (within an ulp; a division per candidate is most of this loop otherwise).
                    let tokens = uncached.max(0.0) + ahead.max(0.0);
                    let x = [1.0, queue_ahead.max(0.0), tokens * 0.001];
                    dot(self.theta(slot), x)
                }),
        );
    }

    /// Learns from one observed TTFT.
    pub fn observe(&mut self, slot: u32, f: &TtftFeatures, ttft: Duration) {
        let t = ttft.as_secs_f64();
        if !t.is_finite() {
            return;
        }
        // A single pathological sample (a stalled connection) must not wreck the fit.
        let t = t.min(600.0);
        let prior = self.prior;
        let idx = slot as usize;
        if self.fits.len() <= idx {
            self.fits.resize_with(idx + 1, || None);
            self.thetas.resize(idx + 1, None);
        }
        let p = self.params;
        let Some(entry) = self.fits.get_mut(idx) else {
            return;
        };
        let fit = entry.get_or_insert_with(|| EndpointFit {
            xx: [[0.0; 3]; 3],
            xt: [0.0; 3],
            n: 0.0,
            theta: prior,
        });
        let was_warm = fit.n >= p.warm_after;
        if was_warm {
            for (s, th) in self.warm_sum.iter_mut().zip(fit.theta) {
                *s -= th;
            }
            self.warm_count -= 1;
        }
        let x = f.x();
        let lambda = p.forgetting.clamp(0.5, 1.0);
        for i in 0..3 {
            for j in 0..3 {
                fit.xx[i][j] = lambda * fit.xx[i][j] + x[i] * x[j];
            }
            fit.xt[i] = lambda * fit.xt[i] + x[i] * t;
        }
        fit.n = lambda * fit.n + 1.0;
        // Ridge toward the prior: (XᵀWX + κI) θ = XᵀWt + κ θ₀.
        let mut a = fit.xx;
        let mut b = fit.xt;
        for i in 0..3 {
            a[i][i] += p.prior_weight;
            b[i] += p.prior_weight * prior[i];
        }
        if let Some(theta) = solve_floored(a, b, &p) {
            fit.theta = theta;
        }
        if fit.n >= p.warm_after {
            for (s, th) in self.warm_sum.iter_mut().zip(fit.theta) {
                *s += th;
            }
            self.warm_count += 1;
        }
        if let Some(t) = self.thetas.get_mut(idx) {
            *t = Some(fit.theta);
        }
        self.prior = self.compute_prior();
    }

    /// Drops what was learned about `slot` (the endpoint left the pool).
    pub fn forget(&mut self, slot: u32) {
        let p = self.params;
        if let Some(fit) = self.fits.get_mut(slot as usize).and_then(Option::take) {
            if fit.n >= p.warm_after {
                for (s, th) in self.warm_sum.iter_mut().zip(fit.theta) {
                    *s -= th;
                }
                self.warm_count -= 1;
            }
        }
        if let Some(t) = self.thetas.get_mut(slot as usize) {
            *t = None;
        }
        self.prior = self.compute_prior();
    }

    /// The current parameters for `slot` (the prior when nothing was observed there).
    pub fn estimate(&self, slot: u32) -> LatencyEstimate {
        let theta = self.theta(slot);
        LatencyEstimate {
            base_s: theta[0],
            step_s: theta[1],
            prefill_tokens_per_s: 1000.0 / theta[2],
            observations: self
                .fits
                .get(slot as usize)
                .and_then(Option::as_ref)
                .map_or(0.0, |f| f.n),
        }
    }

    #[inline]
    fn theta(&self, slot: u32) -> [f64; 3] {
        self.thetas
            .get(slot as usize)
            .copied()
            .flatten()
            .unwrap_or(self.prior)
    }

    /// The fleet's mean warm parameters, or the defaults; floored either way.
    fn compute_prior(&self) -> [f64; 3] {
        let p = &self.params;
        let theta = if self.warm_count > 0 {
            let n = self.warm_count as f64;
            [
                self.warm_sum[0] / n,
                self.warm_sum[1] / n,
                self.warm_sum[2] / n,
            ]
        } else {
            [
                p.default_base_s,
                p.default_step_s,
                1000.0 / p.default_prefill_tokens_per_s.max(1.0),
            ]
        };
        floored(theta, p)
    }
}

#[inline]
fn dot(theta: [f64; 3], x: [f64; 3]) -> f64 {
    theta[0] * x[0] + theta[1] * x[1] + theta[2] * x[2]
}

fn floored(theta: [f64; 3], p: &LatencyParams) -> [f64; 3] {
    let floor = [p.floor_base_s, p.floor_step_s, p.floor_per_1k_tokens_s];
    let mut out = [0.0; 3];
    for i in 0..3 {
        out[i] = if theta[i].is_finite() {
            theta[i].max(floor[i])
        } else {
            floor[i]
        };
    }
    out
}

/// Least squares with the floors as constraints: a parameter the unconstrained solution puts
/// below its floor is fixed at the floor and the others are refitted without it (an active set of
/// at most three steps). Clamping after the fact instead would leave the other parameters fitted
/// to a value that was thrown away.
fn solve_floored(a: [[f64; 3]; 3], b: [f64; 3], p: &LatencyParams) -> Option<[f64; 3]> {
    let floor = [p.floor_base_s, p.floor_step_s, p.floor_per_1k_tokens_s];
    let mut fixed = [false; 3];
    for _ in 0..3 {
        let (mut a2, mut b2) = (a, b);
        for j in 0..3 {
            if !fixed[j] {
                continue;
            }
            for i in 0..3 {
                if i != j {
                    b2[i] -= a2[i][j] * floor[j];
                    a2[i][j] = 0.0;
                }
            }
            a2[j] = [0.0; 3];
            a2[j][j] = 1.0;
            b2[j] = floor[j];
        }
        let theta = solve3(a2, b2)?;
        let mut changed = false;
        for j in 0..3 {
            if !fixed[j] && (theta[j] < floor[j] || theta[j].is_nan()) {
                fixed[j] = true;
                changed = true;
            }
        }
        if !changed {
            return Some(floored(theta, p));
        }
    }
    Some(floor)
}

/// Solves a 3×3 system by Gaussian elimination with partial pivoting.
fn solve3(mut a: [[f64; 3]; 3], mut b: [f64; 3]) -> Option<[f64; 3]> {
    for col in 0..3 {
        let pivot = (col..3).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let pivot_row = a[col];
        for row in col + 1..3 {
            let f = a[row][col] / pivot_row[col];
            for (x, p) in a[row][col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= f * p;
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = [0.0; 3];
    for row in (0..3).rev() {
        let mut s = b[row];
        for k in row + 1..3 {
            s -= a[row][k] * x[k];
        }
        x[row] = s / a[row][row];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(m: &mut LatencyModel, slot: u32, base: f64, step: f64, rate: f64, n: usize) {
        for i in 0..n {
            let f = TtftFeatures {
                queue_ahead: (i % 5) as f64,
                uncached_tokens: ((i * 37) % 4000) as f64,
                prefill_ahead: ((i * 53) % 7) as f64 * 1000.0,
            };
            let t = base + step * f.queue_ahead + (f.uncached_tokens + f.prefill_ahead) / rate;
            m.observe(slot, &f, Duration::from_secs_f64(t));
        }
    }

    #[test]
    fn solve3_solves_a_known_system() {
        let x = solve3(
            [[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]],
            [3.0, 5.0, 5.0],
        )
        .unwrap();
        for (got, want) in x.iter().zip([1.0, 1.0, 1.0]) {
            assert!((got - want).abs() < 1e-12);
        }
        assert!(solve3([[0.0; 3]; 3], [1.0; 3]).is_none());
    }

    #[test]
    fn learns_a_slow_and_a_fast_endpoint_apart() {
        let mut m = LatencyModel::new(LatencyParams::default());
        feed(&mut m, 0, 0.03, 0.04, 40_000.0, 300); // fast GPU
        feed(&mut m, 1, 0.03, 0.12, 5_000.0, 300); // slow GPU
        let fast = m.estimate(0);
        let slow = m.estimate(1);
        assert!(
            (fast.prefill_tokens_per_s - 40_000.0).abs() / 40_000.0 < 0.1,
            "{fast:?}"
        );
        assert!(
            (slow.prefill_tokens_per_s - 5_000.0).abs() / 5_000.0 < 0.1,
            "{slow:?}"
        );
        assert!((slow.step_s - 0.12).abs() < 0.01, "{slow:?}");
        let f = TtftFeatures {
            queue_ahead: 1.0,
            uncached_tokens: 2000.0,
            prefill_ahead: 0.0,
        };
        assert!(m.predict(1, &f) > 2.0 * m.predict(0, &f));
        // A long prefill queued ahead costs what the same tokens of this prompt would.
        let behind = TtftFeatures {
            prefill_ahead: 6000.0,
            ..f
        };
        let longer = TtftFeatures {
            uncached_tokens: 8000.0,
            ..f
        };
        let extra = m.predict(0, &behind) - m.predict(0, &f);
        assert!((extra - 6000.0 / 40_000.0).abs() < 0.02, "{extra}");
        assert!((m.predict(0, &behind) - m.predict(0, &longer)).abs() < 1e-12);
    }

    #[test]
    fn a_cold_endpoint_is_seeded_with_the_fleet_mean_not_zero() {
        let mut m = LatencyModel::new(LatencyParams::default());
        let f = TtftFeatures {
            uncached_tokens: 1000.0,
            ..TtftFeatures::default()
        };
        // With nothing learned, the defaults: 20 ms + 1000 / 10k tok/s.
        assert!((m.predict(7, &f) - 0.12).abs() < 1e-9);
        feed(&mut m, 0, 0.05, 0.1, 2_000.0, 200);
        feed(&mut m, 1, 0.05, 0.1, 2_000.0, 200);
        let cold = m.predict(7, &f);
        let warm = m.predict(0, &f);
        assert!((cold - warm).abs() / warm < 0.05, "cold {cold} warm {warm}");
        m.forget(0);
        m.forget(1);
        assert!((m.predict(7, &f) - 0.12).abs() < 1e-9);
    }

    #[test]
    fn predictions_never_go_below_the_floor() {
        let mut m = LatencyModel::new(LatencyParams::default());
        for _ in 0..100 {
            m.observe(
                0,
                &TtftFeatures {
                    queue_ahead: 3.0,
                    uncached_tokens: 500.0,
                    prefill_ahead: 0.0,
                },
                Duration::ZERO,
            );
        }
        let e = m.estimate(0);
        let p = LatencyParams::default();
        assert!(e.base_s >= p.floor_base_s && e.step_s >= p.floor_step_s);
        assert!(m.predict(0, &TtftFeatures::default()) >= p.floor_base_s);
    }
}
