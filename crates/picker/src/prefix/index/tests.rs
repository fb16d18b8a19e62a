//! The index against the brute-force definition of a match, and its LRU and memory behaviour.

use super::*;
use proptest::prelude::*;

fn sorted(mut v: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    v.sort_unstable();
    v
}

#[test]
fn match_counts_leading_blocks_per_endpoint() {
    let mut idx = PrefixIndex::new();
    idx.learn(0, &[1, 2, 3, 4], 100);
    idx.learn(1, &[1, 2], 100);
    idx.learn(2, &[9, 8], 100);
    let mut out = Vec::new();
    idx.match_into(&[1, 2, 3, 5], &mut out);
    assert_eq!(sorted(out.clone()), vec![(0, 3), (1, 2)]);
    assert_eq!(idx.matched_blocks(0, &[1, 2, 3, 5]), 3);
    assert_eq!(idx.matched_blocks(2, &[1, 2, 3, 5]), 0);
    idx.match_into(&[7], &mut out);
    assert!(out.is_empty());
    idx.check_invariants();
}

#[test]
fn lru_evicts_the_tail_of_a_prefix_before_its_head() {
    let mut idx = PrefixIndex::new();
    idx.learn(0, &[1, 2, 3, 4], 4);
    idx.learn(0, &[10, 11], 4);
    // Capacity 4: two blocks of the first chain had to go, and they are its deepest two.
    assert!(idx.contains(0, 1) && idx.contains(0, 2));
    assert!(!idx.contains(0, 3) && !idx.contains(0, 4));
    assert_eq!(idx.stats(0).entries, 4);
    idx.check_invariants();
}

#[test]
fn capacity_shrink_and_forget_release_memory() {
    let mut idx = PrefixIndex::new();
    idx.learn(3, &[1, 2, 3, 4, 5, 6], 10);
    assert_eq!(idx.stats(3).entries, 6);
    assert_eq!(idx.stats(3).approx_bytes, 6 * BYTES_PER_ENTRY);
    idx.learn(3, &[], 2);
    assert_eq!(idx.stats(3).entries, 2);
    assert!(idx.contains(3, 1) && idx.contains(3, 2));
    idx.learn(4, &[1], 10);
    idx.forget(3);
    assert_eq!(idx.stats(3).entries, 0);
    assert!(idx.is_known(1));
    assert!(!idx.is_known(2));
    assert_eq!(idx.distinct_hashes(), 1);
    idx.check_invariants();
}

/// The definition of the match: for each of `slots` slots, its leading blocks of `q`, listed
/// when there is at least one.
fn brute_force(idx: &PrefixIndex, q: &[u64], slots: u32) -> Vec<(u32, u32)> {
    (0..slots)
        .map(|slot| {
            (
                slot,
                q.iter().take_while(|&&h| idx.contains(slot, h)).count() as u32,
            )
        })
        .filter(|&(_, leading)| leading > 0)
        .collect()
}

/// Chains drawn from a small tree of prompts, so they share prefixes. Each hash is spread over
/// all 64 bits by an odd multiplier (a bijection, so distinct nodes keep distinct hashes), as real
/// block hashes are, so the index's shards (picked by the top bits) are all exercised.
fn chain(branch: &[u8]) -> Vec<u64> {
    let mut h = 0u64;
    branch
        .iter()
        .map(|&b| {
            h = h.wrapping_mul(31).wrapping_add(u64::from(b) + 1);
            h.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        })
        .collect()
}

proptest! {
    #[test]
    fn match_equals_brute_force_leading_count(
        ops in prop::collection::vec((0u32..6, prop::collection::vec(0u8..3, 0..8), 1usize..12), 1..60),
        query in prop::collection::vec(0u8..3, 1..8),
    ) {
        let mut idx = PrefixIndex::new();
        for (slot, branch, cap) in &ops {
            idx.learn(*slot, &chain(branch), *cap);
        }
        idx.check_invariants();
        let q = chain(&query);
        let mut out = Vec::new();
        idx.match_into(&q, &mut out);
        let mut expected = Vec::new();
        for slot in 0..6u32 {
            let leading = q.iter().take_while(|&&h| idx.contains(slot, h)).count();
            prop_assert_eq!(idx.matched_blocks(slot, &q), leading);
            if leading > 0 {
                expected.push((slot, leading as u32));
            }
        }
        prop_assert_eq!(sorted(out), expected);
    }

    /// Long chains sharing deep prefixes (three trunks, each request a prefix of one plus a
    /// tail of its own), so the bisection has many levels and several drops to find.
    #[test]
    fn match_finds_every_drop_along_long_shared_chains(
        ops in prop::collection::vec(
            (0u32..8, 0usize..3, 0usize..64, prop::collection::vec(3u8..6, 0..6), 4usize..200),
            1..80,
        ),
        query in (0usize..3, 1usize..64, prop::collection::vec(3u8..6, 0..6)),
    ) {
        let request = |trunk: usize, len: usize, tail: &[u8]| -> Vec<u64> {
            let mut branch: Vec<u8> = (0..len).map(|i| ((i * 7 + trunk * 3) % 3) as u8).collect();
            branch.insert(0, 10 + trunk as u8);
            branch.extend_from_slice(tail);
            chain(&branch)
        };
        let mut idx = PrefixIndex::new();
        for (slot, trunk, len, tail, cap) in &ops {
            idx.learn(*slot, &request(*trunk, *len, tail), *cap);
        }
        idx.check_invariants();
        let q = request(query.0, query.1, &query.2);
        let mut out = Vec::new();
        idx.match_into(&q, &mut out);
        prop_assert_eq!(sorted(out), brute_force(&idx, &q, 8));
    }

    /// Matches interleaved with learning and eviction, so most matches start from hints
    /// left by an earlier match of the same trunk that the learning since has made stale.
    #[test]
    fn match_is_exact_whatever_the_hints_left_by_earlier_matches(
        ops in prop::collection::vec(
            (any::<bool>(), 0u32..8, 0usize..2, 0usize..48, prop::collection::vec(3u8..6, 0..4), 4usize..120),
            1..120,
        ),
    ) {
        let request = |trunk: usize, len: usize, tail: &[u8]| -> Vec<u64> {
            let mut branch: Vec<u8> = (0..len).map(|i| ((i * 5 + trunk) % 3) as u8).collect();
            branch.insert(0, 20 + trunk as u8);
            branch.extend_from_slice(tail);
            chain(&branch)
        };
        let mut idx = PrefixIndex::new();
        let mut out = Vec::new();
        for (is_query, slot, trunk, len, tail, cap) in &ops {
            let q = request(*trunk, *len, tail);
            if !*is_query {
                idx.learn(*slot, &q, *cap);
                continue;
            }
            idx.match_into(&q, &mut out);
            prop_assert_eq!(sorted(out.clone()), brute_force(&idx, &q, 8));
        }
    }
}
