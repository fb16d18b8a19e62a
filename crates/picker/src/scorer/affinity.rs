//! Affinity scorers: LoRA residency, session stickiness and no-hit LRU.

use super::{Candidates, ScoreInput, Work};
use crate::endpoint::LoraInfo;

/// Upstream's LoRA affinity for a request targeting `adapter`: 1.0 when the adapter is loaded
/// (running); 0.8 when a slot is free; 0.6 when the adapter is waiting to load; else 0. Unknown
/// residency scores 0. A request for the base model needs no slot and scores 1 everywhere (upstream
/// scores the base model's name like an adapter's, which only penalises pods busy with adapters).
pub fn lora_affinity_score(info: Option<&LoraInfo>, adapter: Option<&str>) -> f64 {
    let Some(adapter) = adapter else { return 1.0 };
    let Some(info) = info else { return 0.0 };
    if info.running.iter().any(|a| a == adapter) {
        1.0
    } else if info.has_free_slot() {
        0.8
    } else if info.waiting.iter().any(|a| a == adapter) {
        0.6
    } else {
        0.0
    }
}

pub(super) fn lora(input: &ScoreInput<'_>, cands: &Candidates, weight: f64, totals: &mut [f64]) {
    let Some(adapter) = input.req.target_adapter.as_deref() else {
        // A base-model request scores 1 everywhere, whatever the residency: no need to read it.
        totals.iter_mut().for_each(|t| *t += weight);
        return;
    };
    for (t, &pos) in totals.iter_mut().zip(&cands.pos) {
        let info = if cands.hidden {
            None
        } else {
            input
                .pool
                .metrics_at(pos as usize)
                .and_then(|m| m.lora.as_ref())
        };
        *t += weight * lora_affinity_score(info, Some(adapter));
    }
}

pub(super) fn session(input: &ScoreInput<'_>, cands: &Candidates, weight: f64, totals: &mut [f64]) {
    // The session's endpoint, found once by id; every other candidate scores 0.
    let Some(target) = input
        .req
        .session
        .as_deref()
        .and_then(|s| input.sessions.get(s))
        .and_then(|id| input.pool.position(id))
    else {
        return;
    };
    for (t, &pos) in totals.iter_mut().zip(&cands.pos) {
        if pos as usize == target {
            *t += weight;
        }
    }
}

/// Upstream's ranking: never-used endpoints first (in candidate order), then used ones from least
/// to most recently used; rank `r` of `n` scores `1 − r/(n − 1)`. Ranks are among the candidates
/// (upstream ranks within its global LRU, which can push scores below 0 and clamps them).
pub(super) fn no_hit_lru(
    input: &ScoreInput<'_>,
    cands: &Candidates,
    weight: f64,
    totals: &mut [f64],
    work: &mut Work,
) {
    let n = cands.len();
    if !input.cold {
        totals.iter_mut().for_each(|t| *t += weight * 0.5);
        return;
    }
    if n <= 1 {
        totals.iter_mut().for_each(|t| *t += weight);
        return;
    }
    let order = &mut work.order;
    order.clear();
    order.extend(
        cands
            .slot
            .iter()
            .enumerate()
            .map(|(i, &slot)| (input.cold_lru.last(slot), i as u32)),
    );
    // `last == 0` means never: those sort first, by candidate order (the tuple's second key).
    order.sort_unstable();
    let denom = (n - 1) as f64;
    for (rank, &(_, i)) in order.iter().enumerate() {
        if let Some(t) = totals.get_mut(i as usize) {
            *t += weight * (1.0 - rank as f64 / denom).max(0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(max: u32, running: &[&str], waiting: &[&str]) -> LoraInfo {
        LoraInfo {
            max_lora: max,
            running: running.iter().map(|s| s.to_string()).collect(),
            waiting: waiting.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn lora_affinity_table() {
        let cases = [
            (Some(info(2, &["a", "b"], &[])), Some("a"), 1.0),
            (Some(info(4, &["b"], &[])), Some("a"), 0.8),
            (Some(info(2, &["b", "c"], &["a"])), Some("a"), 0.6),
            (Some(info(2, &["b", "c"], &[])), Some("a"), 0.0),
            // loaded beats everything; free slot beats waiting (upstream order)
            (Some(info(4, &["a"], &["a"])), Some("a"), 1.0),
            (Some(info(4, &["b"], &["a"])), Some("a"), 0.8),
            (None, Some("a"), 0.0),
            (None, None, 1.0),
            (Some(info(1, &["b"], &[])), None, 1.0),
        ];
        for (i, adapter, want) in cases {
            assert_eq!(
                lora_affinity_score(i.as_ref(), adapter),
                want,
                "{i:?} {adapter:?}"
            );
        }
    }
}
