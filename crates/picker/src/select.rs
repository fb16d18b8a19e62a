//! Selection: from scored candidates to a primary and ordered fallbacks.

use infergate_rng::SplitMix64;

/// How ties between equal best scores are broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TieBreak {
    /// Round-robin among the tied candidates: a burst that sees one snapshot is spread evenly
    /// instead of landing wherever a coin says (infergate).
    Rotate,
    /// Uniformly at random (upstream `max-score-picker`).
    Random,
}

/// A picker plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// `max-score-picker`: the highest total.
    MaxScore {
        /// How ties are broken.
        ties: TieBreak,
    },
    /// `weighted-random-picker`: probability proportional to the total score.
    WeightedRandom,
    /// `random-picker`: uniform.
    Random,
}

impl Selection {
    /// The plugin type name.
    pub fn plugin_type(&self) -> &'static str {
        match self {
            Selection::MaxScore { .. } => "max-score-picker",
            Selection::WeightedRandom => "weighted-random-picker",
            Selection::Random => "random-picker",
        }
    }
}

/// Scores this close are equal: floating-point sums of the same terms in a different order must
/// not break a tie.
const TIE_EPSILON: f64 = 1e-9;

/// Chooses a primary index into `totals`.
pub(crate) fn primary(
    selection: Selection,
    totals: &[f64],
    rng: &mut SplitMix64,
    rotation: &mut u64,
) -> Option<usize> {
    if totals.is_empty() {
        return None;
    }
    match selection {
        Selection::MaxScore { ties } => {
            let max = crate::extremes::greatest(totals);
            let tol = TIE_EPSILON * max.abs().max(1.0);
            let tied = || {
                totals
                    .iter()
                    .enumerate()
                    .filter(move |(_, &t)| t >= max - tol)
            };
            let threshold = max - tol;
            let count: usize = totals.iter().map(|&t| usize::from(t >= threshold)).sum();
            let k = match ties {
                TieBreak::Rotate => {
                    let k = (*rotation % count.max(1) as u64) as usize;
                    *rotation = rotation.wrapping_add(1);
                    k
                }
                TieBreak::Random => rng.below(count),
            };
            tied().nth(k).map(|(i, _)| i)
        }
        Selection::WeightedRandom => {
            let sum: f64 = totals.iter().map(|t| t.max(0.0)).sum();
            if !(sum > 0.0 && sum.is_finite()) {
                return Some(rng.below(totals.len()));
            }
            let mut target = rng.next_f64() * sum;
            for (i, t) in totals.iter().enumerate() {
                target -= t.max(0.0);
                if target < 0.0 {
                    return Some(i);
                }
            }
            // Rounding left a sliver: the last positive weight takes it.
            totals.iter().rposition(|t| *t > 0.0)
        }
        Selection::Random => Some(rng.below(totals.len())),
    }
}

/// `(key, cyclic distance from the primary, index)` of a fallback being ranked.
pub(crate) type Ranked = (f64, usize, usize);

/// Up to `k` fallbacks after `primary`, best `key` first (higher is better); among equal keys the
/// one closest after the primary in candidate order comes first. One pass, O(n × k) at worst and
/// O(n) in practice. `best` is scratch space.
pub(crate) fn fallbacks(
    key: &[f64],
    primary: usize,
    k: usize,
    out: &mut Vec<usize>,
    best: &mut Vec<Ranked>,
) {
    out.clear();
    best.clear();
    if k == 0 {
        return;
    }
    let n = key.len();
    // Kept sorted best-first.
    // Once `best` is full, a key below its worst cannot enter: most candidates stop at this one
    // comparison.
    let mut floor = f64::NEG_INFINITY;
    for (i, &s) in key.iter().enumerate() {
        if s < floor || i == primary {
            continue;
        }
        // Cyclic distance from the primary, without a division per candidate.
        let dist = if i > primary {
            i - primary
        } else {
            i + n - primary
        };
        let better = |a: &Ranked| s > a.0 || (s == a.0 && dist < a.1);
        if best.len() == k && !best.last().is_some_and(better) {
            continue;
        }
        let at = best.iter().position(better).unwrap_or(best.len());
        best.insert(at, (s, dist, i));
        best.truncate(k);
        if best.len() == k {
            floor = best.last().map_or(f64::NEG_INFINITY, |b| b.0);
        }
    }
    out.extend(best.iter().map(|b| b.2));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_score_rotates_among_ties_and_ignores_lower_scores() {
        let totals = [1.0, 3.0, 2.0, 3.0, 3.0];
        let mut rng = SplitMix64::new(1);
        let mut rot = 0;
        let sel = Selection::MaxScore {
            ties: TieBreak::Rotate,
        };
        let picks: Vec<usize> = (0..6)
            .map(|_| primary(sel, &totals, &mut rng, &mut rot).unwrap())
            .collect();
        assert_eq!(picks, vec![1, 3, 4, 1, 3, 4]);
    }

    #[test]
    fn max_score_random_ties_reach_every_tied_candidate_only() {
        let totals = [3.0, 1.0, 3.0];
        let mut rng = SplitMix64::new(5);
        let mut rot = 0;
        let sel = Selection::MaxScore {
            ties: TieBreak::Random,
        };
        let mut seen = [0; 3];
        for _ in 0..200 {
            seen[primary(sel, &totals, &mut rng, &mut rot).unwrap()] += 1;
        }
        assert!(seen[0] > 50 && seen[2] > 50 && seen[1] == 0, "{seen:?}");
    }

    #[test]
    fn weighted_random_follows_the_weights() {
        let totals = [0.0, 1.0, 3.0];
        let mut rng = SplitMix64::new(9);
        let mut rot = 0;
        let mut seen = [0; 3];
        for _ in 0..4000 {
            seen[primary(Selection::WeightedRandom, &totals, &mut rng, &mut rot).unwrap()] += 1;
        }
        assert_eq!(seen[0], 0);
        assert!((2700..3300).contains(&seen[2]), "{seen:?}");
    }

    #[test]
    fn fallbacks_are_the_next_best_with_ties_in_cyclic_order() {
        let mut out = Vec::new();
        let mut best = Vec::new();
        fallbacks(&[0.5, 0.9, 0.1, 0.7, 0.9], 1, 2, &mut out, &mut best);
        assert_eq!(out, vec![4, 3]);
        fallbacks(&[1.0, 1.0, 1.0, 1.0], 2, 3, &mut out, &mut best);
        assert_eq!(out, vec![3, 0, 1]);
        fallbacks(&[1.0, 2.0], 0, 0, &mut out, &mut best);
        assert!(out.is_empty());
    }
}
