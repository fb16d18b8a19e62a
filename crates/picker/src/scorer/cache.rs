//! Cache scorers: KV use, KV headroom and prefix affinity.

use super::{Candidate, ScoreInput};

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

pub(super) fn kv_cache(cands: &[Candidate], out: &mut [f64]) {
    for (o, c) in out.iter_mut().zip(cands) {
        *o = c.kv().map_or(0.0, |k| 1.0 - k);
    }
}

pub(super) fn prefix(input: &ScoreInput<'_>, cands: &[Candidate], out: &mut [f64]) {
    let total = input.req.prompt_block_hashes.len();
    for (o, c) in out.iter_mut().zip(cands) {
        *o = prefix_score(c.matched_blocks, total);
    }
}

pub(super) fn prefix_yielding(
    input: &ScoreInput<'_>,
    cands: &[Candidate],
    slack: f64,
    out: &mut [f64],
) {
    let total = input.req.prompt_block_hashes.len();
    let q_min = cands
        .iter()
        .map(Candidate::queue_ahead)
        .fold(f64::INFINITY, f64::min);
    let slack = slack.max(f64::MIN_POSITIVE);
    for (o, c) in out.iter_mut().zip(cands) {
        let excess = (c.queue_ahead() - q_min).max(0.0);
        *o = prefix_score(c.matched_blocks, total) * slack / (slack + excess);
    }
}

pub(super) fn kv_headroom(
    input: &ScoreInput<'_>,
    cands: &[Candidate],
    soft_limit: f64,
    out: &mut [f64],
) {
    for (o, c) in out.iter_mut().zip(cands) {
        let added = f64::from(c.token_credit) + input.uncached_tokens(c);
        *o = kv_headroom_score(c.kv(), added, c.kv_capacity_tokens(), soft_limit);
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
