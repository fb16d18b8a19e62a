//! Chained block hashes of a prompt, byte-compatible with upstream GIE's approximate prefix
//! producer.

use xxhash_rust::xxh64::Xxh64;

/// Parameters of the approximate prefix index (the `prefix-cache-scorer` plugin parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixParams {
    /// Tokens per block (`blockSizeTokens`, default 16); a block is `4 ×` this many bytes.
    pub block_size_tokens: usize,
    /// At most this many leading blocks are hashed and matched (`maxPrefixBlocksToMatch`, 256).
    pub max_prefix_blocks: usize,
    /// Per-endpoint LRU capacity in blocks when the endpoint does not report its KV size
    /// (`lruCapacityPerServer`, 31,250).
    pub lru_capacity_per_server: usize,
    /// Size each endpoint's LRU from its scraped `num_gpu_blocks` (`autoTune`, default true).
    pub auto_tune: bool,
}

/// Upstream's estimate of characters (bytes) per token.
pub const CHARS_PER_TOKEN: usize = 4;

impl Default for PrefixParams {
    fn default() -> Self {
        Self {
            block_size_tokens: 16,
            max_prefix_blocks: 256,
            lru_capacity_per_server: 31_250,
            auto_tune: true,
        }
    }
}

impl PrefixParams {
    /// Bytes of serialized prompt per block (64 by default).
    pub fn chunk_bytes(&self) -> usize {
        self.block_size_tokens.saturating_mul(CHARS_PER_TOKEN)
    }

    /// Index capacity (in index blocks) for an endpoint reporting `num_gpu_blocks` blocks of
    /// `engine_block_size` tokens. Converts engine blocks to index blocks so an SGLang pod
    /// (page size 1) is not given 16 times the memory it has.
    pub fn capacity_for(
        &self,
        num_gpu_blocks: Option<u64>,
        engine_block_size: Option<u32>,
    ) -> usize {
        let Some(blocks) = num_gpu_blocks.filter(|_| self.auto_tune) else {
            return self.lru_capacity_per_server;
        };
        let tokens_per_engine_block = u64::from(engine_block_size.unwrap_or(16).max(1));
        let index_block = (self.block_size_tokens.max(1)) as u64;
        let capacity = blocks.saturating_mul(tokens_per_engine_block) / index_block;
        usize::try_from(capacity).unwrap_or(usize::MAX).max(1)
    }
}

/// Hashes a serialized prompt (chat: the JSON of `messages`; completions: the prompt text) into
/// chained block hashes.
///
/// Byte layout, identical to upstream so indexes agree:
/// - `h0 = xxh64(model_bytes ‖ salt_bytes, seed 0)` (salt empty when absent);
/// - the prompt is cut into consecutive chunks of `params.chunk_bytes()` **bytes**; a trailing
///   partial chunk is ignored and at most `params.max_prefix_blocks` chunks are used;
/// - `h_i = xxh64(chunk_i_bytes ‖ h_{i−1}.to_le_bytes(), seed 0)` for `i = 1..`, that is the chunk
///   followed by the previous hash as 8 little-endian bytes.
///
/// Returns `[h_1, …, h_n]` (`h0` is only the chain's seed). Because each hash covers everything
/// before it, the position of a hash in its chain is a property of the hash itself.
pub fn hash_prompt(
    model: &str,
    salt: Option<&str>,
    prompt: &[u8],
    params: &PrefixParams,
) -> Vec<u64> {
    let mut out = Vec::new();
    hash_prompt_into(model, salt, prompt, params, &mut out);
    out
}

/// [`hash_prompt`] into a caller-owned buffer (cleared first), to avoid an allocation per request.
pub fn hash_prompt_into(
    model: &str,
    salt: Option<&str>,
    prompt: &[u8],
    params: &PrefixParams,
    out: &mut Vec<u64>,
) {
    out.clear();
    let hashed = hashed_part(prompt, params);
    if !hashed.is_empty() {
        extend_chain(hashed, params.chunk_bytes(), chain_seed(model, salt), out);
    }
}

/// The leading bytes of `prompt` that are hashed: whole chunks, at most `max_prefix_blocks` of
/// them; empty when a chunk is empty.
pub(super) fn hashed_part<'a>(prompt: &'a [u8], params: &PrefixParams) -> &'a [u8] {
    let chunk = params.chunk_bytes();
    let blocks = prompt
        .len()
        .checked_div(chunk)
        .unwrap_or(0)
        .min(params.max_prefix_blocks);
    prompt.get(..blocks * chunk).unwrap_or_default()
}

/// `h0`, the seed of a chain: `xxh64(model_bytes ‖ salt_bytes, seed 0)`.
pub(super) fn chain_seed(model: &str, salt: Option<&str>) -> u64 {
    let mut h = Xxh64::new(0);
    h.update(model.as_bytes());
    if let Some(salt) = salt {
        h.update(salt.as_bytes());
    }
    h.digest()
}

/// Appends to `out` the chained hashes of the consecutive `chunk`-byte chunks of `blocks` (a
/// trailing partial chunk is ignored), the first one chained to `prev`.
pub(super) fn extend_chain(blocks: &[u8], chunk: usize, mut prev: u64, out: &mut Vec<u64>) {
    if chunk == 0 {
        return;
    }
    let blocks = blocks.chunks_exact(chunk);
    if chunk.is_multiple_of(STRIPE) {
        // Chunks of whole stripes (every multiple of 8 tokens, the default 16 included).
        out.extend(blocks.map(|block| {
            prev = chained(stripes(block), prev, block.len() + 8);
            prev
        }));
    } else {
        out.extend(blocks.map(|block| {
            let mut h = Xxh64::new(0);
            h.update(block);
            h.update(&prev.to_le_bytes());
            prev = h.digest();
            prev
        }));
    }
}

// XXH64, one-shot and seed 0, for an input that is whole 32-byte stripes followed by one 8-byte
// word — exactly `chunk ‖ le_bytes(prev)` when the chunk is a multiple of 32 bytes. The stripes
// do not depend on `prev`, so the CPU overlaps them with the previous block's tail; only the
// tail round and the avalanche are serial along the chain. The streaming hasher cannot do that
// (it buffers, and its digest is a call per block), and it was most of a request's hashing time.
// The tests check every output against the reference implementation.

const STRIPE: usize = 32;
const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;

#[inline(always)]
fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

#[inline(always)]
fn merge(acc: u64, v: u64) -> u64 {
    (acc ^ round(0, v)).wrapping_mul(P1).wrapping_add(P4)
}

/// The accumulator state of XXH64 after `data` (whole stripes; a trailing partial stripe is not
/// part of any caller's input) has been consumed and merged.
#[inline(always)]
fn stripes(data: &[u8]) -> u64 {
    let mut v = [P1.wrapping_add(P2), P2, 0, 0u64.wrapping_sub(P1)];
    for stripe in data.chunks_exact(STRIPE) {
        for (acc, word) in v.iter_mut().zip(stripe.chunks_exact(8)) {
            *acc = round(*acc, word.try_into().map_or(0, u64::from_le_bytes));
        }
    }
    let [v1, v2, v3, v4] = v;
    let h = v1
        .rotate_left(1)
        .wrapping_add(v2.rotate_left(7))
        .wrapping_add(v3.rotate_left(12))
        .wrapping_add(v4.rotate_left(18));
    merge(merge(merge(merge(h, v1), v2), v3), v4)
}

/// XXH64 of `stripes ‖ le_bytes(tail)`, given [`stripes`] of the first part and the total
/// length in bytes.
#[inline(always)]
fn chained(stripes: u64, tail: u64, len: usize) -> u64 {
    let mut h = stripes.wrapping_add(len as u64);
    h ^= round(0, tail);
    h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use xxhash_rust::xxh64::xxh64;

    #[test]
    fn chain_matches_the_documented_byte_layout() {
        let params = PrefixParams {
            block_size_tokens: 1,
            ..PrefixParams::default()
        };
        let prompt = b"abcdefghij"; // chunks of 4 bytes: "abcd", "efgh"; "ij" is ignored
        let got = hash_prompt("m", None, prompt, &params);
        let h0 = xxh64(b"m", 0);
        let mut buf = b"abcd".to_vec();
        buf.extend_from_slice(&h0.to_le_bytes());
        let h1 = xxh64(&buf, 0);
        let mut buf = b"efgh".to_vec();
        buf.extend_from_slice(&h1.to_le_bytes());
        let h2 = xxh64(&buf, 0);
        assert_eq!(got, vec![h1, h2]);
    }

    #[test]
    fn model_and_salt_seed_the_chain() {
        let p = PrefixParams::default();
        let prompt = vec![b'x'; 200];
        let a = hash_prompt("a", None, &prompt, &p);
        let b = hash_prompt("b", None, &prompt, &p);
        let a_salted = hash_prompt("a", Some("s"), &prompt, &p);
        assert_eq!(a.len(), 3); // 200 / 64
        assert_ne!(a[0], b[0]);
        assert_ne!(a[0], a_salted[0]);
        // Model ‖ salt is a plain concatenation.
        assert_eq!(a_salted, hash_prompt("as", None, &prompt, &p));
    }

    #[test]
    fn shared_prefix_shares_leading_hashes_only() {
        let p = PrefixParams::default();
        let mut x = vec![b'a'; 128];
        let mut y = x.clone();
        x.extend_from_slice(&[b'b'; 64]);
        y.extend_from_slice(&[b'c'; 64]);
        let hx = hash_prompt("m", None, &x, &p);
        let hy = hash_prompt("m", None, &y, &p);
        assert_eq!(hx[..2], hy[..2]);
        assert_ne!(hx[2], hy[2]);
    }

    #[test]
    fn at_most_max_blocks_and_short_prompts_hash_to_nothing() {
        let p = PrefixParams::default();
        assert!(hash_prompt("m", None, &[b'a'; 63], &p).is_empty());
        assert_eq!(hash_prompt("m", None, &vec![b'a'; 64 * 300], &p).len(), 256);
    }

    /// The chain as the streaming reference hasher computes it.
    fn reference(model: &str, prompt: &[u8], params: &PrefixParams) -> Vec<u64> {
        let mut prev = xxh64(model.as_bytes(), 0);
        prompt
            .chunks_exact(params.chunk_bytes())
            .take(params.max_prefix_blocks)
            .map(|block| {
                let mut buf = block.to_vec();
                buf.extend_from_slice(&prev.to_le_bytes());
                prev = xxh64(&buf, 0);
                prev
            })
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn the_one_shot_hash_equals_the_reference_xxh64(
            prompt in proptest::collection::vec(proptest::num::u8::ANY, 0..2_000),
            tokens in proptest::sample::select(vec![1usize, 3, 8, 16, 24, 32, 64]),
        ) {
            let params = PrefixParams { block_size_tokens: tokens, ..PrefixParams::default() };
            proptest::prop_assert_eq!(
                hash_prompt("llama", None, &prompt, &params),
                reference("llama", &prompt, &params)
            );
        }
    }

    #[test]
    fn a_long_prompt_hashes_like_the_reference() {
        let p = PrefixParams::default();
        let prompt: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let got = hash_prompt("m", None, &prompt, &p);
        assert_eq!(got.len(), 256);
        assert_eq!(got, reference("m", &prompt, &p));
    }

    #[test]
    fn capacity_converts_engine_blocks_to_index_blocks() {
        let p = PrefixParams::default();
        assert_eq!(p.capacity_for(None, None), 31_250);
        assert_eq!(p.capacity_for(Some(1000), Some(16)), 1000);
        assert_eq!(p.capacity_for(Some(16_000), Some(1)), 1000);
        let fixed = PrefixParams {
            auto_tune: false,
            ..p
        };
        assert_eq!(fixed.capacity_for(Some(1000), Some(16)), 31_250);
    }
}
