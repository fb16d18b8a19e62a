//! Load scorers: queue, running requests, load-aware, active requests, token load and predicted
//! latency.

use super::{Candidate, ScoreInput};

/// Upstream's min-max normalisation: `(max − v)/(max − min)` over the known values, 1 when all
/// known values are equal, 0 for an unknown value.
pub fn min_max_scores(values: impl Iterator<Item = Option<f64>> + Clone, out: &mut [f64]) {
    let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.clone().flatten() {
        min = min.min(v);
        max = max.max(v);
    }
    let span = max - min;
    for (o, v) in out.iter_mut().zip(values) {
        *o = match v {
            None => 0.0,
            Some(_) if span <= 0.0 || !span.is_finite() => 1.0,
            Some(v) => ((max - v) / span).clamp(0.0, 1.0),
        };
    }
}

/// Upstream's active-request normalisation: `(max − n)/max`, and 1 for an idle endpoint.
pub fn share_scores(values: impl Iterator<Item = f64> + Clone, out: &mut [f64]) {
    let max = values.clone().fold(0.0f64, f64::max);
    for (o, n) in out.iter_mut().zip(values) {
        *o = if n <= 0.0 || max <= 0.0 {
            1.0
        } else {
            ((max - n) / max).clamp(0.0, 1.0)
        };
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

pub(super) fn queue(cands: &[Candidate], out: &mut [f64]) {
    min_max_scores(cands.iter().map(|c| c.waiting()), out);
}

pub(super) fn running(cands: &[Candidate], out: &mut [f64]) {
    min_max_scores(cands.iter().map(|c| c.running()), out);
}

pub(super) fn load_aware(cands: &[Candidate], threshold: f64, out: &mut [f64]) {
    for (o, c) in out.iter_mut().zip(cands) {
        *o = load_aware_score(c.waiting(), threshold);
    }
}

pub(super) fn active_request(cands: &[Candidate], out: &mut [f64]) {
    share_scores(cands.iter().map(|c| f64::from(c.in_flight)), out);
}

pub(super) fn token_load(cands: &[Candidate], out: &mut [f64]) {
    share_scores(cands.iter().map(|c| c.in_flight_tokens as f64), out);
}

/// `min_predicted / predicted`: the fastest candidate scores 1, one predicted twice as slow 0.5.
/// A ratio rather than min-max, so near-equal predictions give near-equal scores instead of being
/// stretched over the whole `[0, 1]` range.
pub(super) fn predicted_latency(input: &ScoreInput<'_>, cands: &[Candidate], out: &mut [f64]) {
    let mut min = f64::INFINITY;
    for (o, c) in out.iter_mut().zip(cands) {
        let p = input.latency.predict(c.slot, &input.ttft_features(c));
        *o = p;
        min = min.min(p);
    }
    for o in out.iter_mut() {
        *o = if *o > 0.0 && min.is_finite() {
            (min / *o).clamp(0.0, 1.0)
        } else {
            1.0
        };
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
