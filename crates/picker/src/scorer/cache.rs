//! Cache scorers: KV use, KV headroom and prefix affinity.

use super::{opt, Candidates, ScoreInput};
use crate::extremes::least;

/// Upstream's prefix score: matched blocks over the request's blocks; 0 for a request with none.
pub fn prefix_score(matched_blocks: u32, total_blocks: usize) -> f64 {
    if total_blocks == 0 {
        0.0
    } else {
        (f64::from(matched_blocks) / total_blocks as f64).clamp(0.0, 1.0)
    }
}

/// KV headroom: with `kv` in use, `added_tokens` about to arrive and `capacity_tokens` in all,
/// the projected use is `kv + added/capacity` (just `kv` when the capacity is unknown); the score
/// is 1 up to `soft_limit` and falls linearly to 0 at a full cache. Unknown use → 0.
pub fn kv_headroom_score(
    kv: Option<f64>,
    added_tokens: f64,
    capacity_tokens: Option<f64>,
    soft_limit: f64,
) -> f64 {
    let Some(kv) = kv else { return 0.0 };
    let projected = match capacity_tokens {
        Some(cap) if cap > 0.0 => kv + added_tokens / cap,
        _ => kv,
    };
    if projected <= soft_limit {
        1.0
    } else if soft_limit >= 1.0 {
        0.0
    } else {
        ((1.0 - projected) / (1.0 - soft_limit)).clamp(0.0, 1.0)
    }
}

pub(super) fn kv_cache(cands: &Candidates, weight: f64, totals: &mut [f64]) {
    for (t, &k) in totals.iter_mut().zip(&cands.kv) {
        *t += weight * opt(k).map_or(0.0, |k| 1.0 - k);
    }
}

/// `matched / total` for every candidate, as [`prefix_score`] computes it, added with `weight`.
/// The loop multiplies by `1 / total` rather than dividing: within an ulp of the formula, and a
/// multiplication per candidate instead of a division.
pub(super) fn prefix(input: &ScoreInput<'_>, cands: &Candidates, weight: f64, totals: &mut [f64]) {
    let total = input.req.prompt_block_hashes.len();
    if total == 0 {
        return;
    }
    let per_block = weight / total as f64;
    for (t, &m) in totals.iter_mut().zip(&cands.matched_blocks) {
        *t += (f64::from(m) * per_block).min(weight);
    }
}

/// The prefix ratio damped by the queue excess: `ratio × slack / (slack + q − q_min)`.
pub(super) fn prefix_yielding(
    input: &ScoreInput<'_>,
    cands: &Candidates,
    slack: f64,
    weight: f64,
    totals: &mut [f64],
) {
    let total = input.req.prompt_block_hashes.len();
    if total == 0 {
        // Every candidate scores 0: nothing to add.
        return;
    }
    let q_min = least(&cands.queue_ahead);
    let slack = slack.max(f64::MIN_POSITIVE);
    let per_block = weight * slack / total as f64;
    for (t, (&m, &q)) in totals
        .iter_mut()
        .zip(cands.matched_blocks.iter().zip(&cands.queue_ahead))
    {
        let ratio = f64::from(m).min(total as f64) * per_block;
        let excess = (q - q_min).max(0.0);
        *t += ratio / (slack + excess);
    }
}

/// [`kv_headroom_score`] over the columns, without a branch per candidate.
pub(super) fn kv_headroom(cands: &Candidates, soft_limit: f64, weight: f64, totals: &mut [f64]) {
    let rows = cands
        .kv
        .iter()
        .zip(&cands.kv_share_per_token)
        .zip(cands.token_credit.iter().zip(&cands.uncached_tokens));
    // Past the soft limit the score falls linearly to 0 at a full cache; with no room between the
    // two it is a step.
    let slope = if soft_limit < 1.0 {
        1.0 / (1.0 - soft_limit)
    } else {
        f64::INFINITY
    };
    for (t, ((&kv, &per_token), (&credit, &uncached))) in totals.iter_mut().zip(rows) {
        // Unknown capacity (a share of 0 per token): the current use alone.
        let projected = kv + (f64::from(credit) + uncached) * per_token;
        let falling = ((1.0 - projected) * slope).clamp(0.0, 1.0);
        let score = if projected <= soft_limit {
            1.0
        } else {
            falling
        };
        *t += weight * if kv.is_nan() { 0.0 } else { score };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_table() {
        let cases = [
            (0, 10, 0.0),
            (5, 10, 0.5),
            (10, 10, 1.0),
            (3, 4, 0.75),
            (0, 0, 0.0),
        ];
        for (m, t, want) in cases {
            assert!((prefix_score(m, t) - want).abs() < 1e-12, "{m}/{t}");
        }
    }

    #[test]
    fn kv_headroom_table() {
        let cases = [
            // under the soft limit even after the request
            (Some(0.5), 1000.0, Some(10_000.0), 0.8, 1.0),
            // 0.7 + 0.2 = 0.9: halfway between 0.8 and 1.0
            (Some(0.7), 2000.0, Some(10_000.0), 0.8, 0.5),
            // projected beyond full
            (Some(0.95), 2000.0, Some(10_000.0), 0.8, 0.0),
            // capacity unknown: the current use alone
            (Some(0.9), 5000.0, None, 0.8, 0.5),
            (None, 0.0, Some(10_000.0), 0.8, 0.0),
        ];
        for (kv, added, cap, soft, want) in cases {
            let got = kv_headroom_score(kv, added, cap, soft);
            assert!(
                (got - want).abs() < 1e-9,
                "{kv:?} {added} {cap:?}: {got} != {want}"
            );
        }
    }
}
