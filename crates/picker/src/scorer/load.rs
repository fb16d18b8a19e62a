//! Load scorers: queue, running requests, load-aware, active requests, token load and predicted
//! latency.

use super::{opt, Candidates, ScoreInput, Work};
use crate::extremes::{least, least_and_greatest};

/// Upstream's min-max normalisation: `(max − v)/(max − min)` over the known values, 1 when all
/// known values are equal, 0 for an unknown value.
pub fn min_max_scores(values: impl Iterator<Item = Option<f64>> + Clone, out: &mut [f64]) {
    let (min, max) = known_range(values.clone());
    for (o, v) in out.iter_mut().zip(values) {
        *o = min_max_score(v, min, max);
    }
}

/// The smallest and largest of the known values (`+∞, −∞` when none is known).
fn known_range(values: impl Iterator<Item = Option<f64>>) -> (f64, f64) {
    let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.flatten() {
        min = min.min(v);
        max = max.max(v);
    }
    (min, max)
}

/// One value's min-max score over a known range.
#[inline]
fn min_max_score(v: Option<f64>, min: f64, max: f64) -> f64 {
    let span = max - min;
    match v {
        None => 0.0,
        Some(_) if span <= 0.0 || !span.is_finite() => 1.0,
        Some(v) => ((max - v) / span).clamp(0.0, 1.0),
    }
}

/// Upstream's active-request normalisation: `(max − n)/max`, and 1 for an idle endpoint.
pub fn share_scores(values: impl Iterator<Item = f64> + Clone, out: &mut [f64]) {
    let max = values.clone().fold(0.0f64, f64::max);
    for (o, n) in out.iter_mut().zip(values) {
        *o = share_score(n, max);
    }
}

#[inline]
fn share_score(n: f64, max: f64) -> f64 {
    if n <= 0.0 || max <= 0.0 {
        1.0
    } else {
        ((max - n) / max).clamp(0.0, 1.0)
    }
}

/// Upstream's load-aware formula: `q == 0 → 0.5`, else `0.5 × (1 − min(q, T)/T)`; unknown → 0.
pub fn load_aware_score(waiting: Option<f64>, threshold: f64) -> f64 {
    match waiting {
        None => 0.0,
        Some(q) if q <= 0.0 => 0.5,
        Some(_) if threshold <= 0.0 => 0.0,
        Some(q) => 0.5 * (1.0 - q.min(threshold) / threshold),
    }
}

/// Adds `weight ×` the min-max score of each value of `column` (NaN = unknown) to `totals`:
/// [`min_max_scores`] as two tight passes over a column.
fn add_min_max(column: &[f64], weight: f64, totals: &mut [f64]) {
    // Unknown (NaN) values do not set the range.
    let (min, max) = least_and_greatest(column);
    let span = max - min;
    if span <= 0.0 || !span.is_finite() {
        // All known values equal (or none known): known → 1, unknown → 0.
        for (t, &v) in totals.iter_mut().zip(column) {
            *t += if v.is_nan() { 0.0 } else { weight };
        }
        return;
    }
    // A multiplication by `1 / span` per candidate rather than a division: within an ulp.
    let per_unit = 1.0 / span;
    for (t, &v) in totals.iter_mut().zip(column) {
        let score = ((max - v) * per_unit).clamp(0.0, 1.0);
        *t += weight * if v.is_nan() { 0.0 } else { score };
    }
}

/// Adds `weight ×` the share score of each value to `totals`.
fn add_shares(values: impl Iterator<Item = f64> + Clone, weight: f64, totals: &mut [f64]) {
    let max = values.clone().fold(0.0f64, f64::max);
    for (t, n) in totals.iter_mut().zip(values) {
        *t += weight * share_score(n, max);
    }
}

pub(super) fn queue(cands: &Candidates, weight: f64, totals: &mut [f64]) {
    add_min_max(&cands.waiting, weight, totals);
}

pub(super) fn running(cands: &Candidates, weight: f64, totals: &mut [f64]) {
    add_min_max(&cands.running, weight, totals);
}

pub(super) fn load_aware(cands: &Candidates, threshold: f64, weight: f64, totals: &mut [f64]) {
    for (t, &q) in totals.iter_mut().zip(&cands.waiting) {
        *t += weight * load_aware_score(opt(q), threshold);
    }
}

pub(super) fn active_request(cands: &Candidates, weight: f64, totals: &mut [f64]) {
    add_shares(
        cands.in_flight.iter().map(|&n| f64::from(n)),
        weight,
        totals,
    );
}

pub(super) fn token_load(cands: &Candidates, weight: f64, totals: &mut [f64]) {
    add_shares(
        cands.in_flight_tokens.iter().map(|&n| n as f64),
        weight,
        totals,
    );
}

/// `(min_predicted + tolerance) / (predicted + tolerance)`: the fastest candidate scores 1; with
/// no tolerance, one predicted twice as slow scores 0.5. A ratio rather than min-max, so
/// near-equal predictions give near-equal scores instead of being stretched over the whole
/// `[0, 1]` range; the tolerance (see [`super::Scorer::PredictedLatency`]) makes a difference
/// count by its size against a first token's scale.
pub(super) fn predicted_latency(
    input: &ScoreInput<'_>,
    cands: &Candidates,
    tolerance_s: f64,
    weight: f64,
    totals: &mut [f64],
    work: &mut Work,
) {
    let predicted = &mut work.values;
    predicted.clear();
    input.latency.predict_into(
        &cands.slot,
        &cands.queue_ahead,
        &cands.uncached_tokens,
        &cands.prefill_ahead,
        predicted,
    );
    let min = least(predicted);
    if !min.is_finite() {
        totals.iter_mut().for_each(|t| *t += weight);
        return;
    }
    let tolerance = tolerance_s.max(0.0);
    // Branch-free, so the compiler can divide two candidates at a time.
    for (t, &p) in totals.iter_mut().zip(predicted.iter()) {
        let ratio = ((min + tolerance) / (p + tolerance)).clamp(0.0, 1.0);
        *t += weight * if p + tolerance > 0.0 { ratio } else { 1.0 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    #[test]
    fn min_max_table() {
        let cases: &[(&[Option<f64>], &[f64])] = &[
            // (maxQ − q)/(maxQ − minQ)
            (&[Some(0.0), Some(5.0), Some(10.0)], &[1.0, 0.5, 0.0]),
            (&[Some(2.0), Some(3.0)], &[1.0, 0.0]),
            (&[Some(4.0), Some(4.0), Some(4.0)], &[1.0, 1.0, 1.0]),
            // unknown scores 0 and does not set the range
            (&[Some(1.0), None, Some(3.0)], &[1.0, 0.0, 0.0]),
            (&[None, None], &[0.0, 0.0]),
            (&[Some(7.0)], &[1.0]),
        ];
        for (input, want) in cases {
            let mut out = vec![f64::NAN; input.len()];
            min_max_scores(input.iter().copied(), &mut out);
            assert!(close(&out, want), "{input:?}: {out:?} != {want:?}");
        }
    }

    #[test]
    fn share_table() {
        let cases: &[(&[f64], &[f64])] = &[
            (&[0.0, 2.0, 4.0], &[1.0, 0.5, 0.0]),
            (&[0.0, 0.0], &[1.0, 1.0]),
            (&[3.0, 1.0], &[0.0, 2.0 / 3.0]),
        ];
        for (input, want) in cases {
            let mut out = vec![f64::NAN; input.len()];
            share_scores(input.iter().copied(), &mut out);
            assert!(close(&out, want), "{input:?}: {out:?} != {want:?}");
        }
    }

    #[test]
    fn load_aware_table() {
        let cases = [
            (Some(0.0), 0.5),
            (Some(64.0), 0.25),
            (Some(32.0), 0.375),
            (Some(128.0), 0.0),
            (Some(500.0), 0.0),
            (None, 0.0),
        ];
        for (q, want) in cases {
            let got = load_aware_score(q, 128.0);
            assert!((got - want).abs() < 1e-12, "{q:?}: {got} != {want}");
        }
    }
}
