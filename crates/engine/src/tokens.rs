//! A deterministic tokenizer and the chained block hashes the prefix cache keys on.
//!
//! Real tokenizers are model-specific and heavy; what the simulation needs is that equal text
//! prefixes give equal token prefixes, that token counts track text length the way BPE does on
//! English (about four bytes a token), and that every replica tokenizes alike.

use crate::blocks::BlockHash;
use crate::BLOCK_SIZE;

/// UTF-8 bytes per token.
pub const BYTES_PER_TOKEN: usize = 4;

/// Token ids of `text`: one per started run of [`BYTES_PER_TOKEN`] bytes, ids in `0..vocab`.
pub fn tokenize(text: &str, vocab: u32) -> Vec<u32> {
    text.as_bytes()
        .chunks(BYTES_PER_TOKEN)
        .map(|chunk| {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            (mix(u64::from_le_bytes(word)) % u64::from(vocab.max(1))) as u32
        })
        .collect()
}

/// How many tokens [`tokenize`] gives for `text`, without building them.
pub fn count_tokens(text: &str) -> usize {
    text.len().div_ceil(BYTES_PER_TOKEN)
}

/// Chained hashes of the full [`BLOCK_SIZE`]-token blocks of `tokens`. `extra_key` (for example
/// a LoRA adapter id plus one, 0 for the base model) seeds the chain, so the same text under
/// different adapters never shares KV.
pub fn block_hashes(tokens: &[u32], extra_key: u64) -> Vec<BlockHash> {
    let mut parent = mix(extra_key ^ 0x005E_ED0F_B10C);
    tokens
        .chunks_exact(BLOCK_SIZE as usize)
        .map(|block| {
            let mut h = parent;
            for &t in block {
                h = mix(h ^ u64::from(t));
            }
            parent = h;
            h
        })
        .collect()
}

/// The hash of a block of generated tokens, which the simulation does not materialise: unique
/// per request (`salt`) and position, chained to the block before it.
pub fn generated_block_hash(parent: BlockHash, salt: u64, index: usize) -> BlockHash {
    mix(mix(parent ^ salt) ^ index as u64)
}

/// SplitMix64's finaliser: a fast bijective mix with full avalanche.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_bytes_a_token() {
        assert_eq!(tokenize("", 1000).len(), 0);
        assert_eq!(tokenize("abcd", 1000).len(), 1);
        assert_eq!(tokenize("abcde", 1000).len(), 2);
        assert_eq!(count_tokens("abcde"), 2);
    }

    #[test]
    fn equal_prefixes_give_equal_block_hashes() {
        let shared = "You are a helpful assistant. ".repeat(10);
        let a = tokenize(&format!("{shared}What is the capital of France?"), 128_256);
        let b = tokenize(&format!("{shared}Tell me a joke about routers."), 128_256);
        let (ha, hb) = (block_hashes(&a, 0), block_hashes(&b, 0));
        let common = shared.len() / (BYTES_PER_TOKEN * BLOCK_SIZE as usize);
        assert!(common >= 4);
        assert_eq!(ha[..common], hb[..common]);
        assert_ne!(ha.last(), hb.last());
    }

    #[test]
    fn the_extra_key_separates_adapters() {
        let t = tokenize(&"x".repeat(200), 1000);
        assert_ne!(block_hashes(&t, 0), block_hashes(&t, 1));
    }

    #[test]
    fn only_full_blocks_are_hashed() {
        let t: Vec<u32> = (0..47).collect();
        assert_eq!(block_hashes(&t, 0).len(), 2);
    }
}
