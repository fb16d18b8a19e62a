//! Planning a step: vLLM V1's `schedule()`.
//!
//! Running requests first — every decoder gets its one token (vLLM refuses a token budget below
//! `max_num_seqs`, so they always fit), then prefills in admission order take what budget is
//! left; when blocks run out the policy's victim (the newest running request under FCFS) is
//! preempted. If nothing was preempted, waiting requests are admitted in queue order while the
//! budget, `max_num_seqs`, the block pool and the LoRA slots allow; the first that does not fit
//! stops admission (a LoRA request with no slot is skipped instead, as in vLLM), whatever the
//! scheduling policy (see `priority.rs`).
//!
//! With [`crate::EngineConfig::prefill_steps_alone`] (vLLM V0 without chunked prefill), a step
//! that can admit waiting prompts runs them alone and the decoders wait for the next step.

use super::{Engine, Event};
use crate::lora::SlotDecision;
use crate::seq::blocks_for;
use crate::step_time::StepShape;
use crate::BLOCK_SIZE;
use std::time::Duration;

impl Engine {
    /// Plans the next step into `plan`; returns its shape and whether it runs prompts alone
    /// (V0's prefill step, see [`crate::EngineConfig::prefill_steps_alone`]).
    pub(super) fn schedule(
        &mut self,
        now: Duration,
        plan: &mut Vec<(u32, u32)>,
        out: &mut Vec<Event>,
    ) -> (StepShape, bool) {
        self.pending_adapter_load = Duration::ZERO;
        if self.config.prefill_steps_alone
            && !self.waiting.is_empty()
            && self.running.prefilling.is_empty()
        {
            // V0: waiting prompts that fit go first, in a step of their own, with the whole
            // budget; the decoders wait for it. Nothing admissible: an ordinary decode step.
            // (A prompt still being chunked, possible only with chunked prefill on, finishes in
            // ordinary steps first, so that new arrivals cannot starve it.)
            let mut budget = self.config.max_num_batched_tokens;
            self.admit_waiting(now, &mut budget, plan);
            if !plan.is_empty() {
                return (self.prompts_shape(plan), true);
            }
        }
        (self.mixed_step(now, plan, out), false)
    }

    /// V1's step: every decoder, then prefills in the budget left.
    fn mixed_step(
        &mut self,
        now: Duration,
        plan: &mut Vec<(u32, u32)>,
        out: &mut Vec<Event>,
    ) -> StepShape {
        let step = self.steps_done;
        let mut preempted = self.make_room_for_decoders(step, now, out);
        // Decoders that reach a block boundary before this step take their next block.
        for &slot in self.running.due_blocks(step) {
            let Some(seq) = self.slots[slot as usize].as_mut() else {
                continue;
            };
            seq.materialize(step);
            seq.offer_full_blocks(&mut self.pool);
            let ok = self.pool.allocate(1, &mut seq.blocks);
            debug_assert!(ok, "room was made for every due decoder");
        }
        let mut budget = self
            .config
            .max_num_batched_tokens
            .saturating_sub(self.running.decoding() as u32);
        let mut i = 0;
        while i < self.running.prefilling.len() && budget > 0 {
            let slot = self.running.prefilling[i];
            let Some(seq) = self.slots[slot as usize].as_ref() else {
                break;
            };
            let computed = seq.computed;
            let num_new = seq.num_tokens().saturating_sub(computed).clamp(1, budget);
            let needed = blocks_for(computed + num_new).saturating_sub(seq.blocks.len() as u32);
            let mut lost_itself = false;
            while self.pool.free_blocks() < needed {
                let Some(victim) = self.victim() else {
                    break;
                };
                // Only the priority policy can pick a victim already planned this step (an
                // earlier prefill); its chunk is taken back and the loop index follows.
                if self
                    .preempt_planned(victim, now, plan, &mut budget, out)
                    .is_some()
                {
                    i -= 1;
                }
                preempted = true;
                if victim == slot {
                    lost_itself = true;
                    break;
                }
            }
            if lost_itself {
                break;
            }
            let Some(seq) = self.slots[slot as usize].as_mut() else {
                break;
            };
            let ok = self.pool.allocate(needed, &mut seq.blocks);
            debug_assert!(ok, "allocation after making room");
            plan.push((slot, num_new));
            budget -= num_new;
            i += 1;
        }
        if !preempted {
            self.admit_waiting(now, &mut budget, plan);
        }
        self.shape(plan)
    }

    /// Preempts the newest running requests until every decoder due a block this step can have
    /// one. Returns whether anything was preempted.
    fn make_room_for_decoders(&mut self, step: u64, now: Duration, out: &mut Vec<Event>) -> bool {
        let mut preempted = false;
        while self.pool.free_blocks() < self.running.due_blocks(step).len() as u32 {
            let Some(victim) = self.victim() else {
                break;
            };
            self.preempt(victim, now, out);
            preempted = true;
        }
        preempted
    }

    /// A step of prompts alone: the plan's chunks, no decoder.
    fn prompts_shape(&self, plan: &[(u32, u32)]) -> StepShape {
        let mut shape = StepShape::default();
        for &(slot, num_new) in plan {
            if let Some(seq) = self.slots[slot as usize].as_ref() {
                shape.add_chunk(u64::from(num_new), u64::from(seq.computed));
            }
        }
        shape.distinct_adapters = self.lora.active_adapters() as u32;
        shape.adapter_load = self.pending_adapter_load;
        shape
    }

    /// A mixed step: every decoder, and the plan's chunks.
    fn shape(&self, plan: &[(u32, u32)]) -> StepShape {
        let mut shape = self.prompts_shape(plan);
        let decoders = self.running.decoding() as u64;
        shape.batch_size += decoders as u32;
        shape.tokens += decoders;
        shape.kv_read_tokens += self.running.decode_context();
        shape
    }

    fn admit_waiting(&mut self, now: Duration, budget: &mut u32, plan: &mut Vec<(u32, u32)>) {
        let mut skipped: Vec<u32> = Vec::new();
        while *budget > 0 && (self.running.len() as u32) < self.config.max_num_seqs {
            let Some(&slot) = self.waiting.front() else {
                break;
            };
            let Some(seq) = self.slots[slot as usize].as_mut() else {
                self.waiting.pop_front();
                continue;
            };
            let num_tokens = seq.num_tokens();
            seq.extend_hashes(num_tokens / BLOCK_SIZE);
            // A full hit still recomputes the last token, as vLLM does.
            let max_hit_blocks = ((num_tokens - 1) / BLOCK_SIZE) as usize;
            let (found, evictable) = self
                .pool
                .longest_cached_prefix(&seq.hashes[..max_hit_blocks]);
            let hit_tokens = found as u32 * BLOCK_SIZE;
            let mut num_new = num_tokens - hit_tokens;
            if num_new > *budget {
                if !self.config.enable_chunked_prefill {
                    break;
                }
                num_new = *budget;
            }
            let needed = blocks_for(hit_tokens + num_new) - found as u32;
            if self.pool.free_blocks() < needed + evictable {
                break;
            }
            if let Some(adapter) = seq.adapter {
                match self.lora.acquire(adapter, self.lora.active_adapters()) {
                    SlotDecision::Resident => {}
                    SlotDecision::Loaded(cost) => {
                        self.pending_adapter_load += cost;
                        self.counters.lora_loads += 1;
                    }
                    SlotDecision::NoSlot => {
                        skipped.extend(self.waiting.pop_front());
                        continue;
                    }
                }
                self.lora.start_use(adapter);
            }
            self.waiting.pop_front();
            let Some(seq) = self.slots[slot as usize].as_mut() else {
                continue;
            };
            seq.blocks
                .reserve(blocks_for(seq.prompt_tokens + seq.output_tokens) as usize);
            self.pool.touch(&seq.hashes[..found], &mut seq.blocks);
            let ok = self.pool.allocate(needed, &mut seq.blocks);
            debug_assert!(ok, "allocation checked above");
            seq.computed = hit_tokens;
            seq.offered_blocks = found as u32;
            if seq.scheduled_at.is_none() {
                seq.scheduled_at = Some(now);
                seq.cached_prompt_tokens = hit_tokens.min(seq.prompt_tokens);
            }
            self.counters.prefix_cache_queries += u64::from(num_tokens);
            self.counters.prefix_cache_hits += u64::from(hit_tokens);
            plan.push((slot, num_new));
            self.running.admit(&mut self.slots, slot);
            *budget -= num_new;
        }
        for slot in skipped.into_iter().rev() {
            self.requeue(slot);
        }
    }
}
