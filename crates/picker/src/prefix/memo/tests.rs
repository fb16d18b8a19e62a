use super::*;
use crate::prefix::hash_prompt;
use proptest::prelude::*;

fn params(tokens: usize) -> PrefixParams {
    PrefixParams {
        block_size_tokens: tokens,
        ..PrefixParams::default()
    }
}

/// One 64-byte chunk per byte of `bytes`, filled with it.
fn prompt(bytes: &[u8]) -> Vec<u8> {
    bytes.iter().flat_map(|&b| [b; 64]).collect()
}

#[test]
fn only_the_blocks_after_the_stored_prefix_are_hashed() {
    let p = PrefixParams::default();
    let mut memo = HashMemo::new(1);
    let mut out = Vec::new();
    let a = prompt(b"abcdefghij");
    assert_eq!(memo.hash_into("m", None, &a, &p, &mut out), 10);
    assert_eq!(out, hash_prompt("m", None, &a, &p));
    // The same prompt again: only the first block, which finds the slot, is hashed.
    assert_eq!(memo.hash_into("m", None, &a, &p, &mut out), 1);
    assert_eq!(out, hash_prompt("m", None, &a, &p));
    // Six blocks in common, then four of its own (and a partial chunk, which is never hashed).
    let mut b = prompt(b"abcdefWXYZ");
    b.extend_from_slice(b"tail");
    assert_eq!(memo.hash_into("m", None, &b, &p, &mut out), 5);
    assert_eq!(out, hash_prompt("m", None, &b, &p));
    // b shared more than half of a, so the slot still holds a.
    assert_eq!(memo.hash_into("m", None, &a, &p, &mut out), 1);
    // A prompt continuing a (its next turn) extends the slot.
    let a2 = prompt(b"abcdefghijkl");
    assert_eq!(memo.hash_into("m", None, &a2, &p, &mut out), 3);
    assert_eq!(out, hash_prompt("m", None, &a2, &p));
    assert_eq!(memo.hash_into("m", None, &a2, &p, &mut out), 1);
    // A prompt it contains (its first four blocks) changes nothing.
    assert_eq!(memo.hash_into("m", None, &a2[..4 * 64], &p, &mut out), 1);
    assert_eq!(out, hash_prompt("m", None, &a2[..4 * 64], &p));
    assert_eq!(memo.hash_into("m", None, &a2, &p, &mut out), 1);
    // One sharing less than half of it replaces it.
    let c = prompt(b"abcXYZ");
    assert_eq!(memo.hash_into("m", None, &c, &p, &mut out), 4);
    assert_eq!(memo.hash_into("m", None, &c, &p, &mut out), 1);
    assert_eq!(out, hash_prompt("m", None, &c, &p));
    // The same bytes under another model form another chain: nothing is reused.
    assert_eq!(memo.hash_into("n", None, &a, &p, &mut out), 10);
    assert_eq!(out, hash_prompt("n", None, &a, &p));
    // A prompt differing in its first block shares nothing, even in the one slot there is.
    let d = prompt(b"Xbcdefghij");
    assert_eq!(memo.hash_into("n", None, &d, &p, &mut out), 10);
    assert_eq!(out, hash_prompt("n", None, &d, &p));
}

#[test]
fn model_and_salt_are_compared_as_their_concatenation() {
    let p = PrefixParams::default();
    let mut memo = HashMemo::new(1);
    let mut out = Vec::new();
    let a = prompt(b"abcd");
    memo.hash_into("ab", None, &a, &p, &mut out);
    // Upstream seeds the chain with model ‖ salt: "a" salted "b" is the same chain as "ab".
    assert_eq!(memo.hash_into("a", Some("b"), &a, &p, &mut out), 1);
    assert_eq!(out, hash_prompt("ab", None, &a, &p));
    assert_eq!(memo.hash_into("a", Some("c"), &a, &p, &mut out), 4);
    assert_eq!(out, hash_prompt("a", Some("c"), &a, &p));
}

#[test]
fn short_prompts_and_empty_chunks_hash_to_nothing() {
    let mut memo = HashMemo::default();
    let mut out = vec![1, 2, 3];
    assert_eq!(
        memo.hash_into("m", None, &[b'a'; 63], &params(16), &mut out),
        0
    );
    assert!(out.is_empty());
    assert_eq!(
        memo.hash_into("m", None, &[b'a'; 640], &params(0), &mut out),
        0
    );
    assert!(out.is_empty());
}

#[test]
fn memory_is_bounded_by_the_longest_prompts_the_slots_can_hold() {
    let p = PrefixParams::default();
    let slots = 8;
    let mut memo = HashMemo::new(slots);
    let mut out = Vec::new();
    let mut rng = infergate_rng::SplitMix64::new(3);
    for i in 0..2_000 {
        // Prompts growing and shrinking, up to past the 256-block cap, so buffers are reused
        // at every length.
        let len = 64 * (1 + rng.below(300));
        let text = crate::speed::text(&mut rng, len);
        memo.hash_into("model", None, text.as_bytes(), &p, &mut out);
        assert_eq!(out.len(), (len / 64).min(256), "prompt {i}");
    }
    // The model name's buffer may round up to the allocator's smallest (8 bytes for bytes).
    let per_slot = 256 * 64 + 256 * 8 + 8;
    assert!(
        memo.memory_bytes() <= slots * per_slot,
        "{}",
        memo.memory_bytes()
    );
    assert!(memo.memory_bytes() > 0);
}

/// A prompt built from one of a few shared openings, cut anywhere, and a tail of its own.
fn shared_prompts() -> impl Strategy<Value = Vec<(usize, usize, Vec<u8>, usize, usize)>> {
    proptest::collection::vec(
        (
            0usize..3,
            0usize..1_200,
            proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            0usize..3,
            0usize..4,
        ),
        1..16,
    )
}

proptest! {
    /// Whatever the memo holds, and however prompts, models, salts and block sizes interleave
    /// (few slots, so prompts evict each other), its output is the plain hash's.
    #[test]
    fn the_memo_hashes_exactly_like_hash_prompt(
        openings in proptest::collection::vec(
            proptest::collection::vec(proptest::num::u8::ANY, 1_200), 3),
        requests in shared_prompts(),
        slots in 1usize..4,
    ) {
        let models = [("a", None), ("a", Some("b")), ("ab", None)];
        let sizes = [1usize, 3, 8, 16];
        let mut memo = HashMemo::new(slots);
        let mut out = Vec::new();
        for (opening, cut, tail, model, size) in requests {
            let mut prompt = openings[opening][..cut].to_vec();
            prompt.extend_from_slice(&tail);
            let (model, salt) = models[model];
            let p = params(sizes[size]);
            let computed = memo.hash_into(model, salt, &prompt, &p, &mut out);
            prop_assert_eq!(&out, &hash_prompt(model, salt, &prompt, &p));
            prop_assert!(computed <= out.len());
        }
    }
}

#[test]
fn openings_share_the_slots_least_recently_used_first() {
    let p = PrefixParams::default();
    let mut memo = HashMemo::new(2);
    let mut out = Vec::new();
    let (a, b, c) = (prompt(b"aaaa"), prompt(b"bbbb"), prompt(b"cccc"));
    assert_eq!(memo.hash_into("m", None, &a, &p, &mut out), 4);
    assert_eq!(memo.hash_into("m", None, &b, &p, &mut out), 4);
    // Two openings in two slots: each keeps its own, whatever the order.
    for _ in 0..3 {
        assert_eq!(memo.hash_into("m", None, &a, &p, &mut out), 1);
        assert_eq!(memo.hash_into("m", None, &b, &p, &mut out), 1);
    }
    // A third takes the least recently used slot, a's; b keeps its own.
    assert_eq!(memo.hash_into("m", None, &c, &p, &mut out), 4);
    assert_eq!(memo.hash_into("m", None, &b, &p, &mut out), 1);
    assert_eq!(memo.hash_into("m", None, &a, &p, &mut out), 4);
    assert_eq!(out, hash_prompt("m", None, &a, &p));
}
