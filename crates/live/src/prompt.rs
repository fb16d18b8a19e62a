//! Prompt text for a bench request: text the simulator tokenizes into exactly the request's
//! prompt tokens, with 16-token blocks that are equal exactly where the request's block hashes
//! are.
//!
//! The simulator's tokenizer makes one token of every four bytes and hashes the tokens in blocks
//! of 16 (`infergate_engine::tokens`), so a block is 64 bytes of text. Each block's text is drawn
//! from its block hash alone; since the workload's hashes are chained, two prompts share a text
//! prefix exactly as long as they share leading hashes, and every router that matches prefixes on
//! text (infergate's 64-byte chunks, sglang-router's radix tree) sees the same sharing the virtual
//! runner gives the engine directly. The bytes after the last full block (fewer than 64) are drawn
//! from the request's own salt, so they are never shared.

use infergate_bench::workload::BenchRequest;
use infergate_engine::tokens::{mix, BYTES_PER_TOKEN};
use infergate_engine::BLOCK_SIZE;
use infergate_rng::SplitMix64;

/// Bytes of text in one block of the simulator's prefix cache.
pub const BLOCK_BYTES: usize = BLOCK_SIZE as usize * BYTES_PER_TOKEN;

/// The prompt text of `request`: `prompt_tokens × 4` ASCII bytes (letters and spaces, nothing a
/// JSON string must escape). `salt` makes the unshared remainder unique (the request's index).
pub fn prompt_text(request: &BenchRequest, salt: u64) -> String {
    let len = request.prompt_tokens as usize * BYTES_PER_TOKEN;
    let mut text = String::with_capacity(len);
    let full_blocks = len / BLOCK_BYTES;
    for &hash in request.block_hashes.iter().take(full_blocks) {
        push_letters(&mut text, hash, BLOCK_BYTES);
    }
    // Blocks the request carries no hash for (none, for the workload's shapes) and the partial
    // block at the end are the request's own.
    let own = mix(salt ^ 0x7E57_0000_0000_0000);
    while text.len() < len {
        let (done, n) = (text.len(), (len - text.len()).min(BLOCK_BYTES));
        push_letters(&mut text, mix(own ^ done as u64), n);
    }
    text
}

/// Letters and spaces: a byte's low five bits pick one, so about one byte in five is a space.
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz      ";

/// Appends `n` bytes drawn from `seed`.
fn push_letters(text: &mut String, seed: u64, n: usize) {
    let mut rng = SplitMix64::new(seed);
    let bytes = std::iter::repeat_with(|| rng.next_u64().to_le_bytes()).flatten();
    for b in bytes.take(n) {
        text.push(char::from(ALPHABET[usize::from(b & 31)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infergate_bench::workload::Shape;
    use infergate_engine::tokens::{block_hashes, count_tokens, tokenize};
    use std::time::Duration;

    fn shared_prefix_requests() -> Vec<BenchRequest> {
        let shape = Shape::SharedPrefix {
            groups: 2,
            prompts_per_group: 3,
            system_tokens: 96,
            question_tokens: 40,
            output_tokens: 4,
        };
        shape.requests(
            &[Duration::ZERO; 40],
            4_096,
            &mut infergate_rng::SplitMix64::new(5),
        )
    }

    #[test]
    fn the_simulator_counts_exactly_the_prompt_tokens() {
        let shape = Shape::Sampled(vec![(1, 1), (15, 1), (16, 1), (17, 1), (1_000, 1)]);
        let reqs = shape.requests(
            &[Duration::ZERO; 50],
            4_096,
            &mut infergate_rng::SplitMix64::new(1),
        );
        for (i, r) in reqs.iter().enumerate() {
            let text = prompt_text(r, i as u64);
            assert!(text.is_ascii());
            assert_eq!(count_tokens(&text), r.prompt_tokens as usize, "{r:?}");
        }
    }

    #[test]
    fn simulator_blocks_are_shared_exactly_where_block_hashes_are() {
        let reqs = shared_prefix_requests();
        let blocks: Vec<Vec<u64>> = reqs
            .iter()
            .enumerate()
            .map(|(i, r)| block_hashes(&tokenize(&prompt_text(r, i as u64), 128_256), 0))
            .collect();
        let mut compared = 0;
        for (a, ra) in reqs.iter().enumerate() {
            assert_eq!(blocks[a].len(), ra.block_hashes.len());
            for (b, rb) in reqs.iter().enumerate().skip(a + 1) {
                let shared =
                    |x: &[u64], y: &[u64]| x.iter().zip(y).take_while(|(p, q)| p == q).count();
                assert_eq!(
                    shared(&blocks[a], &blocks[b]),
                    shared(&ra.block_hashes, &rb.block_hashes),
                    "requests {a} and {b}"
                );
                compared += 1;
            }
        }
        assert!(compared > 100);
    }

    #[test]
    fn only_the_partial_block_at_the_end_depends_on_the_salt() {
        let r = &shared_prefix_requests()[0];
        let (a, b) = (prompt_text(r, 0), prompt_text(r, 1));
        let full = r.block_hashes.len() * BLOCK_BYTES;
        assert!(a.len() > full, "the shape leaves a partial block");
        assert_eq!(a[..full], b[..full]);
        assert_ne!(a[full..], b[full..]);
    }
}
