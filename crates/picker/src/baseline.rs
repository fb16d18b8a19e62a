//! The fixed baseline policies: each chooses a primary and fills a fallback key (higher is
//! better) over the candidates.

use crate::policy::SglangParams;
use crate::scorer::Candidates;
use infergate_rng::SplitMix64;

/// `round-robin`.
pub(crate) fn round_robin(cands: &Candidates, rotation: &mut u64, key: &mut Vec<f64>) -> usize {
    let n = cands.len().max(1);
    let i = (*rotation % n as u64) as usize;
    *rotation = rotation.wrapping_add(1);
    uniform_key(cands, key);
    i
}

/// `random`.
pub(crate) fn random(cands: &Candidates, rng: &mut SplitMix64, key: &mut Vec<f64>) -> usize {
    uniform_key(cands, key);
    rng.below(cands.len())
}

/// `least-request`: two distinct candidates at random, the one with fewer in flight (the first
/// drawn on a tie). The other is the first fallback.
pub(crate) fn least_request(cands: &Candidates, rng: &mut SplitMix64, key: &mut Vec<f64>) -> usize {
    key.clear();
    key.resize(cands.len(), 0.0);
    let n = cands.len();
    if n <= 1 {
        return 0;
    }
    let a = rng.below(n);
    let mut b = rng.below(n - 1);
    if b >= a {
        b += 1;
    }
    let load = |i: usize| cands.in_flight.get(i).copied().unwrap_or(u32::MAX);
    let (winner, other) = if load(b) < load(a) { (b, a) } else { (a, b) };
    if let Some(k) = key.get_mut(other) {
        *k = 1.0;
    }
    winner
}

/// `k8s-service`: the next connection in turn; its pod if it is still a candidate, else the
/// connection is (re)opened to a candidate chosen at random. `pins` holds each connection's
/// pod as a candidate's endpoint id; `id_of` names candidate `i`.
pub(crate) fn k8s_service(
    cands: &Candidates,
    connections: u32,
    pins: &mut Vec<Option<u64>>,
    id_of: &dyn Fn(usize) -> Option<u64>,
    rotation: &mut u64,
    rng: &mut SplitMix64,
    key: &mut Vec<f64>,
) -> usize {
    uniform_key(cands, key);
    let n = cands.len();
    if n <= 1 {
        return 0;
    }
    let count = connections.max(1) as usize;
    pins.resize(count, None);
    let c = (*rotation % count as u64) as usize;
    *rotation = rotation.wrapping_add(1);
    if let Some(i) = pins[c].and_then(|id| (0..n).find(|&i| id_of(i) == Some(id))) {
        return i;
    }
    let i = rng.below(n);
    pins[c] = id_of(i);
    i
}

/// `sglang-cache-aware`, as sglang-router's `cache_aware` policy ships: least in-flight when
/// the load is imbalanced; else the longest prefix match when its share of the prompt is over
/// the cache threshold; else the endpoint whose tree (`tree_blocks`, one entry per candidate)
/// is smallest, which spreads new prefixes over the fleet's caches.
pub(crate) fn sglang_cache_aware(
    cands: &Candidates,
    total_blocks: usize,
    tree_blocks: &[usize],
    params: &SglangParams,
    key: &mut Vec<f64>,
) -> usize {
    key.clear();
    key.extend(cands.in_flight.iter().map(|&n| -f64::from(n)));
    let least_loaded = first_max(key);
    let (mut min, mut max) = (f64::INFINITY, 0.0f64);
    for &n in &cands.in_flight {
        let l = f64::from(n);
        min = min.min(l);
        max = max.max(l);
    }
    let imbalanced =
        max - min > params.balance_abs_threshold && max > params.balance_rel_threshold * min;
    if imbalanced || total_blocks == 0 {
        return least_loaded;
    }
    let (best, matched) =
        cands
            .matched_blocks
            .iter()
            .enumerate()
            .fold(
                (0, 0u32),
                |acc, (i, &m)| {
                    if m > acc.1 {
                        (i, m)
                    } else {
                        acc
                    }
                },
            );
    if f64::from(matched) / total_blocks as f64 > params.cache_threshold {
        best
    } else {
        // The first of the smallest, as `min_by_key` keeps the first of equals.
        tree_blocks
            .iter()
            .enumerate()
            .min_by_key(|&(_, &size)| size)
            .map_or(0, |(i, _)| i)
    }
}

/// `dynamo-kv`: cost = blocks of the request not cached on the endpoint + blocks of its active
/// (in-flight) requests; lowest wins, ties at random.
pub(crate) fn dynamo_kv(
    cands: &Candidates,
    prompt_tokens: u64,
    hashed_blocks: usize,
    block_tokens: u64,
    rng: &mut SplitMix64,
    key: &mut Vec<f64>,
) -> usize {
    let bt = block_tokens.max(1);
    let request_blocks = prompt_tokens.div_ceil(bt).max(hashed_blocks as u64);
    key.clear();
    key.extend(
        cands
            .matched_blocks
            .iter()
            .zip(&cands.in_flight_tokens)
            .map(|(&m, &t)| {
                let new_prefill = request_blocks.saturating_sub(u64::from(m));
                let active = t.div_ceil(bt);
                -((new_prefill + active) as f64)
            }),
    );
    let best = key.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let ties = key.iter().filter(|&&k| k == best).count();
    let pick = rng.below(ties);
    key.iter()
        .enumerate()
        .filter(|(_, &k)| k == best)
        .nth(pick)
        .map_or(0, |(i, _)| i)
}

fn uniform_key(cands: &Candidates, key: &mut Vec<f64>) {
    key.clear();
    key.resize(cands.len(), 0.0);
}

fn first_max(key: &[f64]) -> usize {
    let mut best = 0;
    for (i, k) in key.iter().enumerate() {
        if key.get(best).is_some_and(|b| k > b) {
            best = i;
        }
    }
    best
}
