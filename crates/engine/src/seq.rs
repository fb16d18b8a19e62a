//! One request's state inside the engine.

use crate::blocks::{BlockHash, BlockId, BlockPool};
use crate::lora::AdapterId;
use crate::metrics::FinishReason;
use crate::tokens::generated_block_hash;
use crate::BLOCK_SIZE;
use std::time::Duration;

/// A request's handle: a slot index and the slot's generation, so stale ids never alias.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(u64);

impl RequestId {
    pub(crate) fn new(slot: u32, generation: u32) -> RequestId {
        RequestId(u64::from(generation) << 32 | u64::from(slot))
    }
    pub(crate) fn slot(self) -> u32 {
        self.0 as u32
    }
    /// The id as a number, for logs and response ids.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

/// Blocks needed to hold `tokens` tokens.
pub(crate) fn blocks_for(tokens: u32) -> u32 {
    tokens.div_ceil(BLOCK_SIZE)
}

/// A request as the scheduler sees it.
///
/// Invariant: `hashes` holds the prompt's full-block hashes followed by hashes of blocks that
/// generation filled, each chained to the one before; `offered_blocks` leading blocks have been
/// offered to the prefix cache.
#[derive(Debug, Clone)]
pub(crate) struct Seq {
    pub id: RequestId,
    pub arrival: Duration,
    /// When it clears the API front end.
    pub ready: Duration,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    pub finish: FinishReason,
    pub hashes: Vec<BlockHash>,
    /// Makes generated-block hashes unique to this request.
    salt: u64,
    pub adapter: Option<AdapterId>,
    pub blocks: Vec<BlockId>,
    /// Tokens whose KV is computed.
    pub computed: u32,
    pub generated: u32,
    pub offered_blocks: u32,
    pub scheduled_at: Option<Duration>,
    pub first_token_at: Option<Duration>,
    pub last_token_at: Duration,
    pub cached_prompt_tokens: u32,
    pub aborted: bool,
    /// vLLM's request priority: lower values are more urgent.
    pub priority: i32,
    /// Submission number: the last tie-break of the priority order.
    pub order: u64,
    /// Set while the request decodes one token a step: its state is then derived from the
    /// step count instead of being updated every step.
    pub decode: Option<DecodeAnchor>,
    /// Bumped whenever `decode` is replaced, so stale finish-calendar entries are ignored.
    pub epoch: u32,
    /// Neighbours in the running list (admission order); `NIL` at the ends or when not running.
    pub prev: u32,
    pub next: u32,
}

/// Where a decoding request's state was last written down. After `n` more steps it has
/// computed `computed + n` tokens and generated `generated + n`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecodeAnchor {
    /// Steps applied when the anchor was set.
    pub base_step: u64,
    pub computed: u32,
    pub generated: u32,
    /// Position in its block-wheel bucket.
    pub bucket_pos: u32,
}

/// Marks the end of a linked list.
pub(crate) const NIL: u32 = u32::MAX;

impl Seq {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: RequestId,
        arrival: Duration,
        ready: Duration,
        prompt_tokens: u32,
        output_tokens: u32,
        finish: FinishReason,
        hashes: Vec<BlockHash>,
        adapter: Option<AdapterId>,
        salt: u64,
    ) -> Seq {
        Seq {
            id,
            arrival,
            ready,
            prompt_tokens,
            output_tokens,
            finish,
            hashes,
            salt,
            adapter,
            blocks: Vec::new(),
            computed: 0,
            generated: 0,
            offered_blocks: 0,
            scheduled_at: None,
            first_token_at: None,
            last_token_at: arrival,
            cached_prompt_tokens: 0,
            aborted: false,
            priority: 0,
            order: 0,
            decode: None,
            epoch: 0,
            prev: NIL,
            next: NIL,
        }
    }

    /// Where it stands under the priority policy: smaller is served first and preempted last.
    pub fn urgency_key(&self) -> (i32, Duration, u64) {
        (self.priority, self.arrival, self.order)
    }

    /// Tokens of the sequence so far (prompt plus generated); the next token is sampled once
    /// all of them are computed.
    pub fn num_tokens(&self) -> u32 {
        self.prompt_tokens + self.generated
    }

    /// Writes a decoding request's derived state down, given the steps applied so far.
    pub fn materialize(&mut self, steps_done: u64) {
        if let Some(anchor) = self.decode {
            let n = (steps_done - anchor.base_step) as u32;
            self.computed = anchor.computed + n;
            self.generated = anchor.generated + n;
        }
    }

    /// Makes sure hashes exist for the first `full_blocks` blocks.
    pub fn extend_hashes(&mut self, full_blocks: u32) {
        while self.hashes.len() < full_blocks as usize {
            let index = self.hashes.len();
            let parent = self.hashes.last().copied().unwrap_or(self.salt);
            self.hashes
                .push(generated_block_hash(parent, self.salt, index));
        }
    }

    /// Offers every newly full block of the prompt to the prefix cache. Blocks holding generated
    /// tokens are hashed with this request's salt, so no other request can ever hit them; they
    /// are offered only when the request is preempted (its recomputation can hit them), which
    /// gives the same hits as caching them at once for a fraction of the work.
    pub fn offer_full_blocks(&mut self, pool: &mut BlockPool) {
        self.offer_blocks_up_to(self.computed.min(self.prompt_tokens) / BLOCK_SIZE, pool);
    }

    /// Offers every full block, generated ones too (before a preemption frees them).
    pub fn offer_all_full_blocks(&mut self, pool: &mut BlockPool) {
        self.offer_blocks_up_to(self.computed / BLOCK_SIZE, pool);
    }

    fn offer_blocks_up_to(&mut self, full: u32, pool: &mut BlockPool) {
        if full <= self.offered_blocks {
            return;
        }
        self.extend_hashes(full);
        for i in self.offered_blocks..full {
            pool.cache_full_block(self.blocks[i as usize], self.hashes[i as usize]);
        }
        self.offered_blocks = full;
    }
}
