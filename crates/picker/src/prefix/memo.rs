//! The block hashes of recent prompts, kept with the bytes they cover, so that a prompt which
//! begins like a recent one has only its new blocks hashed.
//!
//! The prompts prefix routing exists for repeat themselves: a conversation's next turn resends
//! every earlier turn, and many requests open with the same long system prompt. Their leading
//! blocks hash to what they hashed to last time, and the chain makes each hash depend on every
//! byte before it, so the work is serial (about 13 ns a 64-byte block, most of a decision's time
//! for a long prompt). Comparing bytes is several times cheaper than hashing them, and exact:
//! the memo hands back a stored hash only for a block whose bytes, and every byte before them,
//! and the model and salt seeding the chain, are equal to the stored ones, so its output is
//! always the output of [`super::hash_prompt`].
//!
//! A slot is found by the prompt's first block hash (a system prompt or a conversation's
//! opening), among all slots; a new opening takes the least recently used slot. (A direct-mapped
//! table was not enough: a few dozen openings in 64 slots collided often enough that one request
//! in five hashed everything, which is the p99.) A slot keeps its prompt while the prompts that
//! open the same way share at least half of it (a system prompt followed by each conversation's
//! own turns): replacing it with each of them would copy every new tail for nothing, since the
//! next prompt shares only the system prompt with it either way. It grows when a prompt
//! continues it (a conversation's next turn), is left as it is by a prompt it already contains,
//! and is replaced by a prompt that shares less than half of it. Memory is bounded: a slot holds
//! at most one prompt's hashed part (`max_prefix_blocks` chunks, 16 KiB by default) and its
//! hashes.

use super::hash::{chain_seed, extend_chain, hashed_part};
use super::PrefixParams;

/// Slots of [`HashMemo::default`]: about 1.2 MB at most with the default parameters.
pub const DEFAULT_MEMO_SLOTS: usize = 64;

/// Recent prompts and their chained block hashes; see the module documentation.
#[derive(Debug, Clone)]
pub struct HashMemo {
    /// The first block hash of each slot's prompt (meaningless for a slot never used).
    keys: Vec<u64>,
    /// When each slot was last used, on `clock`; 0 for a slot never used.
    used: Vec<u64>,
    slots: Vec<Slot>,
    clock: u64,
}

/// One stored prompt.
///
/// Invariant: `hashes` is the chain of `bytes` cut into `chunk`-byte chunks and seeded with
/// `seed_bytes` (model ‖ salt), so `bytes.len() == hashes.len() * chunk`.
#[derive(Debug, Clone, Default)]
struct Slot {
    seed_bytes: Vec<u8>,
    chunk: usize,
    bytes: Vec<u8>,
    hashes: Vec<u64>,
}

impl Default for HashMemo {
    fn default() -> Self {
        Self::new(DEFAULT_MEMO_SLOTS)
    }
}

impl HashMemo {
    /// A memo of `slots` slots (at least one), each empty.
    pub fn new(slots: usize) -> Self {
        let n = slots.max(1);
        Self {
            keys: vec![0; n],
            used: vec![0; n],
            slots: vec![Slot::default(); n],
            clock: 0,
        }
    }

    /// [`super::hash_prompt_into`], reusing the hashes of the stored prompt that begins like this
    /// one, then keeping, growing or replacing that prompt (see the module documentation).
    /// Returns how many block hashes were computed (the rest were the stored ones).
    pub fn hash_into(
        &mut self,
        model: &str,
        salt: Option<&str>,
        prompt: &[u8],
        params: &PrefixParams,
        out: &mut Vec<u64>,
    ) -> usize {
        out.clear();
        let hashed = hashed_part(prompt, params);
        let chunk = params.chunk_bytes();
        let Some(first) = hashed.get(..chunk) else {
            return 0;
        };
        extend_chain(first, chunk, chain_seed(model, salt), out);
        let Some(&h1) = out.first() else {
            return 0;
        };
        let at = self.slot_for(h1);
        let Some(slot) = self.slots.get_mut(at) else {
            // `at` is below the length by construction; hashing without the memo is still right.
            extend_chain(&hashed[chunk..], chunk, h1, out);
            return out.len();
        };
        // Leading chunks equal to the stored prompt's, byte for byte, in the same chain.
        let equal = if slot.chunk == chunk && slot.seeded_by(model, salt) {
            equal_chunks(&slot.bytes, hashed, chunk)
        } else {
            0
        };
        // Blocks whose hashes are known: the stored ones, and the first, hashed already.
        let known = equal.max(1);
        out.extend_from_slice(slot.hashes.get(1..known).unwrap_or_default());
        let prev = out.last().copied().unwrap_or(h1);
        extend_chain(&hashed[known * chunk..], chunk, prev, out);
        let contained = equal == out.len();
        let continues = equal >= slot.hashes.len();
        let shares_little = 2 * equal < slot.hashes.len();
        if !contained && (continues || shares_little) {
            slot.store(model, salt, chunk, hashed, equal, out);
        }
        out.len() + 1 - known
    }

    /// The slot of the prompts opening with `h1`: the one holding them, or else the least
    /// recently used, given to them. Either way it is marked used now.
    fn slot_for(&mut self, h1: u64) -> usize {
        self.clock += 1;
        let held = self
            .keys
            .iter()
            .zip(&self.used)
            .position(|(&k, &u)| k == h1 && u != 0);
        let at = held.unwrap_or_else(|| {
            let lru = self.used.iter().enumerate().min_by_key(|&(_, &u)| u);
            lru.map_or(0, |(i, _)| i)
        });
        if let (Some(k), Some(u)) = (self.keys.get_mut(at), self.used.get_mut(at)) {
            *k = h1;
            *u = self.clock;
        }
        at
    }

    /// Bytes the memo holds now (allocated capacity), at most about `slots × (max_prefix_blocks ×
    /// (chunk + 8))` plus the model names.
    pub fn memory_bytes(&self) -> usize {
        self.slots
            .iter()
            .map(|s| s.seed_bytes.capacity() + s.bytes.capacity() + 8 * s.hashes.capacity())
            .sum()
    }
}

impl Slot {
    /// Whether this slot's chain is seeded with `model ‖ salt`, byte for byte.
    fn seeded_by(&self, model: &str, salt: Option<&str>) -> bool {
        let (m, s) = (model.as_bytes(), salt.unwrap_or_default().as_bytes());
        self.seed_bytes.len() == m.len() + s.len()
            && self.seed_bytes.starts_with(m)
            && self.seed_bytes.ends_with(s)
    }

    /// Replaces the stored prompt with `hashed` and its `hashes`, of which the first `equal`
    /// chunks are the stored ones already (zero: another chain, whose seed is replaced too).
    fn store(
        &mut self,
        model: &str,
        salt: Option<&str>,
        chunk: usize,
        hashed: &[u8],
        equal: usize,
        hashes: &[u64],
    ) {
        if equal == 0 {
            self.seed_bytes.clear();
            self.seed_bytes.extend_from_slice(model.as_bytes());
            self.seed_bytes
                .extend_from_slice(salt.unwrap_or_default().as_bytes());
            self.chunk = chunk;
        }
        // Exact reservations keep each buffer at the longest prompt stored, not up to twice that.
        let new = &hashed[equal * chunk..];
        self.bytes.truncate(equal * chunk);
        self.bytes.reserve_exact(new.len());
        self.bytes.extend_from_slice(new);
        self.hashes.clear();
        self.hashes.reserve_exact(hashes.len());
        self.hashes.extend_from_slice(hashes);
    }
}

/// How many leading `chunk`-byte chunks `a` and `b` have in common (whole chunks only).
fn equal_chunks(a: &[u8], b: &[u8], chunk: usize) -> usize {
    // Runs of chunks are compared at once while they agree (one `memcmp` per kibibyte by
    // default), then chunk by chunk inside the run that differs.
    const RUN: usize = 16;
    let max = a.len().min(b.len()) / chunk.max(1);
    let same =
        |from: usize, to: usize| a.get(from * chunk..to * chunk) == b.get(from * chunk..to * chunk);
    let mut k = 0;
    while k + RUN <= max && same(k, k + RUN) {
        k += RUN;
    }
    while k < max && same(k, k + 1) {
        k += 1;
    }
    k
}

#[cfg(test)]
mod tests;
