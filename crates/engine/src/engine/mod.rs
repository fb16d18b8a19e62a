//! One replica: vLLM V1's scheduler loop over the block pool, LoRA slots and step-time model.
//!
//! The engine never reads a clock. It is told the time in [`Engine::submit`] and
//! [`Engine::advance`], and says in [`Engine::next_wakeup`] when it next has something to do, so a
//! real-time server and a virtual-time benchmark drive the same code.
//!
//! A step is planned when it starts and applied when it ends: blocks are allocated (and
//! preemptions made) at the start, tokens are emitted and requests finish at the end. Requests
//! that arrive while a step runs join the next one.
//!
//! Invariants:
//! - a request is in exactly one of `front` (the API front end), `waiting` or `running`;
//! - a running request holds the blocks for the tokens it has computed or is computing; waiting
//!   ones hold none;
//! - `running` keeps admission order, so its newest entry is the preemption victim;
//! - between steps every live request has `computed < prompt + generated`: a step computes the
//!   missing tokens (a prefill chunk, or the one token a decode feeds back) and, once none is
//!   missing, samples the next token — so the step that completes a prefill emits token one, as
//!   in vLLM V1.

use crate::blocks::{BlockHash, BlockPool};
use crate::config::{EngineConfig, SchedulingPolicy};
use crate::lora::{AdapterId, LoadCosts, LoraSlots};
use crate::metrics::{EngineCounters, EngineGauges, FinishReason};
use crate::seq::Seq;
use crate::step_time::StepTimeModel;
use crate::{tokens, BLOCK_SIZE};
use infergate_rng::SplitMix64;
use running::Running;
use std::collections::VecDeque;
use std::time::Duration;

mod priority;
mod running;
mod schedule;

pub use crate::seq::RequestId;

/// What the caller asks the engine to run.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRequest {
    /// Prompt length in tokens.
    pub prompt_tokens: u32,
    /// Hashes of the prompt's full blocks, from [`tokens::block_hashes`] with the adapter's extra
    /// key; `prompt_tokens / BLOCK_SIZE` of them.
    pub block_hashes: Vec<BlockHash>,
    /// Tokens to generate, at least one.
    pub output_tokens: u32,
    /// Why generation ends after `output_tokens`: `Length` when it hit `max_tokens`.
    pub finish: FinishReason,
    /// LoRA adapter name, `None` for the base model.
    pub adapter: Option<String>,
    /// vLLM's request `priority`: lower is served first, 0 is the default. Anything else needs
    /// [`SchedulingPolicy::Priority`].
    pub priority: i32,
}

impl NewRequest {
    /// A base-model request for the prompt `tokens` (ids), generating `output_tokens` up to the
    /// length limit, at the default priority.
    pub fn from_tokens(tokens: &[u32], output_tokens: u32) -> Self {
        Self {
            prompt_tokens: u32::try_from(tokens.len()).unwrap_or(u32::MAX),
            block_hashes: tokens::block_hashes(tokens, 0),
            output_tokens,
            finish: FinishReason::Length,
            adapter: None,
            priority: 0,
        }
    }
}

/// Token counts for the response's `usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Generated tokens.
    pub completion_tokens: u32,
    /// Prompt tokens served from the prefix cache at first admission.
    pub cached_tokens: u32,
}

/// Something that happened to a request.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// Output token `index` (0-based) is ready. With `report_every_token` off only index 0 is
    /// reported.
    Token {
        /// Position in the output.
        index: u32,
    },
    /// The request lost its KV blocks and went back to the queue; it will recompute them.
    Preempted,
    /// The request is done; no more events follow.
    Finished {
        /// Why.
        reason: FinishReason,
        /// Token counts.
        usage: Usage,
    },
}

/// An event and when it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Which request.
    pub id: RequestId,
    /// Engine time of the event.
    pub at: Duration,
    /// What happened.
    pub kind: EventKind,
}

/// Why a request is refused at submission.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// Prompt plus output exceed `max_model_len`.
    #[error(
        "This model's maximum context length is {max_model_len} tokens. However, you requested \
         {} tokens ({prompt} in the messages, {output} in the completion). Please reduce the \
         length of the messages or completion.",
        prompt + output
    )]
    TooLong {
        /// The limit.
        max_model_len: u32,
        /// Prompt tokens.
        prompt: u32,
        /// Output tokens asked for.
        output: u32,
    },
    /// The adapter was never loaded (or was unloaded).
    #[error("The model `{0}` does not exist.")]
    UnknownAdapter(String),
    /// Zero output tokens, or block hashes that do not match the prompt length.
    #[error("invalid request: {0}")]
    Invalid(&'static str),
    /// A non-zero priority on an engine that schedules first come, first served (vLLM's words).
    #[error("Got priority {0} but Priority scheduling is not enabled.")]
    PriorityNotEnabled(i32),
}

#[derive(Debug, Clone)]
struct Step {
    start: Duration,
    end: Duration,
    /// Decoding requests in the step (each computes one token; not listed in `plan`).
    decoders: usize,
    /// Prefilling requests scheduled and the tokens each computes.
    plan: Vec<(u32, u32)>,
    /// Prompts alone (V0's prefill step): the decoders wait, so the decode clock stands still.
    prefill_only: bool,
}

/// One simulated replica.
#[derive(Debug, Clone)]
pub struct Engine {
    config: EngineConfig,
    step_time: StepTimeModel,
    pool: BlockPool,
    lora: LoraSlots,
    adapters: Vec<Option<String>>,
    rng: SplitMix64,
    slots: Vec<Option<Seq>>,
    generations: Vec<u32>,
    free_slots: Vec<u32>,
    /// Requests in the API front end, with the time they reach the scheduler.
    front: VecDeque<(Duration, u32)>,
    /// The scheduler's queue: FCFS order, or (priority, arrival, submission) order under
    /// [`SchedulingPolicy::Priority`].
    waiting: VecDeque<u32>,
    /// Requests submitted so far: the tie-break that keeps equal (priority, arrival) keys in
    /// submission order.
    submitted: u64,
    running: Running,
    step: Option<Step>,
    /// Steps applied so far; decoding requests derive their state from it.
    steps_done: u64,
    /// Time of the prompts-only steps since the last decode step: the decoders waited through
    /// it, so their next inter-token latency includes it.
    stalled: Duration,
    spare_plan: Vec<(u32, u32)>,
    spare_slots: Vec<u32>,
    /// Adapter load time the step being planned pays.
    pending_adapter_load: Duration,
    aborts_pending: bool,
    /// The latest time the engine has been told about.
    clock: Duration,
    /// Waiting requests could not be scheduled on an idle engine; only a new arrival, an abort
    /// or an adapter change can unblock them, so `next_wakeup` does not report them as due.
    blocked: bool,
    slowdown: f64,
    counters: EngineCounters,
}

impl Engine {
    /// A replica with empty queues and a cold cache.
    pub fn new(config: EngineConfig) -> Engine {
        let profile = &config.profile;
        let adapter_bytes = config.adapter_bytes();
        Engine {
            step_time: StepTimeModel::calibrated(profile, &config.calibration),
            pool: BlockPool::new(config.num_gpu_blocks, config.enable_prefix_caching),
            lora: LoraSlots::new(
                config.max_loras as usize,
                config.max_cpu_loras as usize,
                LoadCosts::for_adapter_bytes(adapter_bytes),
            ),
            adapters: Vec::new(),
            rng: SplitMix64::new(config.seed),
            slots: Vec::new(),
            generations: Vec::new(),
            free_slots: Vec::new(),
            front: VecDeque::new(),
            waiting: VecDeque::new(),
            submitted: 0,
            running: Running::new(),
            step: None,
            steps_done: 0,
            stalled: Duration::ZERO,
            spare_plan: Vec::new(),
            spare_slots: Vec::new(),
            pending_adapter_load: Duration::ZERO,
            aborts_pending: false,
            clock: Duration::ZERO,
            blocked: false,
            slowdown: 1.0,
            counters: EngineCounters::default(),
            config,
        }
    }

    /// The configuration this engine runs with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Makes an adapter servable (vLLM's `load_lora_adapter`). Its weights reach a GPU slot
    /// when a request first needs them. Returns false if it was already known.
    pub fn register_adapter(&mut self, name: &str) -> bool {
        if self.adapter_id(name).is_some() {
            return false;
        }
        // Ids are never reused: requests still queued for an unloaded adapter must not become
        // requests for the next one registered.
        self.adapters.push(Some(name.to_owned()));
        true
    }

    /// Forgets an adapter (vLLM's `unload_lora_adapter`); requests already admitted finish.
    /// Returns false if it was not known.
    pub fn unregister_adapter(&mut self, name: &str) -> bool {
        let Some(id) = self.adapter_id(name) else {
            return false;
        };
        self.lora.forget(id);
        self.adapters[id as usize] = None;
        true
    }

    /// Names of the servable adapters, in registration order.
    pub fn adapters(&self) -> impl Iterator<Item = &str> {
        self.adapters.iter().flatten().map(String::as_str)
    }

    fn adapter_id(&self, name: &str) -> Option<AdapterId> {
        self.adapters
            .iter()
            .position(|a| a.as_deref() == Some(name))
            .map(|i| i as AdapterId)
    }

    /// The extra key that separates an adapter's KV from the base model's in block hashes.
    pub fn adapter_hash_key(&self, adapter: Option<&str>) -> u64 {
        adapter.map_or(0, |name| {
            tokens::mix(
                name.bytes()
                    .fold(0xA5, |h, b| tokens::mix(h ^ u64::from(b))),
            )
        })
    }

    /// Sets a slowdown factor (thermal throttling); 1.0 is normal speed.
    pub fn set_slowdown(&mut self, factor: f64) {
        self.slowdown = factor.max(0.01);
    }

    /// Accepts a request arriving at `now`. It reaches the scheduler after the API overhead.
    pub fn submit(&mut self, now: Duration, request: NewRequest) -> Result<RequestId, SubmitError> {
        let NewRequest {
            prompt_tokens,
            block_hashes,
            output_tokens,
            finish,
            adapter,
            priority,
        } = request;
        if priority != 0 && self.config.scheduling_policy == SchedulingPolicy::Fcfs {
            return Err(SubmitError::PriorityNotEnabled(priority));
        }
        if output_tokens == 0 {
            return Err(SubmitError::Invalid("output_tokens must be at least 1"));
        }
        if prompt_tokens == 0 {
            return Err(SubmitError::Invalid("the prompt must not be empty"));
        }
        if block_hashes.len() != (prompt_tokens / BLOCK_SIZE) as usize {
            return Err(SubmitError::Invalid(
                "block_hashes do not match prompt_tokens",
            ));
        }
        let total = u64::from(prompt_tokens) + u64::from(output_tokens);
        if total > u64::from(self.config.max_model_len) {
            return Err(SubmitError::TooLong {
                max_model_len: self.config.max_model_len,
                prompt: prompt_tokens,
                output: output_tokens,
            });
        }
        let adapter = match adapter {
            Some(name) => Some(
                self.adapter_id(&name)
                    .ok_or(SubmitError::UnknownAdapter(name))?,
            ),
            None => None,
        };
        let slot = match self.free_slots.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(None);
                self.generations.push(0);
                (self.slots.len() - 1) as u32
            }
        };
        self.clock = self.clock.max(now);
        self.blocked = false;
        let id = RequestId::new(slot, self.generations[slot as usize]);
        let ready = now + self.config.api_overhead;
        let mut seq = Seq::new(
            id,
            now,
            ready,
            prompt_tokens,
            output_tokens,
            finish,
            block_hashes,
            adapter,
            self.rng.next_u64(),
        );
        seq.priority = priority;
        seq.order = self.submitted;
        self.submitted += 1;
        self.slots[slot as usize] = Some(seq);
        let at = self.front.partition_point(|&(t, _)| t <= ready);
        self.front.insert(at, (ready, slot));
        self.counters.prompt_tokens += u64::from(prompt_tokens);
        Ok(id)
    }

    /// Cancels a request (the client went away). It finishes with `Abort` at the next step
    /// boundary. Returns false for an unknown or finished id.
    pub fn abort(&mut self, id: RequestId) -> bool {
        match self.seq_mut(id) {
            Some(seq) if !seq.aborted => {
                seq.aborted = true;
                self.aborts_pending = true;
                self.blocked = false;
                true
            }
            _ => false,
        }
    }

    fn seq_mut(&mut self, id: RequestId) -> Option<&mut Seq> {
        self.slots
            .get_mut(id.slot() as usize)?
            .as_mut()
            .filter(|s| s.id == id)
    }

    /// When the engine next needs [`Engine::advance`]: the end of the running step, or when the
    /// first queued request clears the API front of an idle engine. `None` when idle and empty.
    pub fn next_wakeup(&self) -> Option<Duration> {
        match &self.step {
            Some(step) => Some(step.end),
            None if self.has_leftover_work() && !self.blocked => Some(self.clock),
            None => self.front.front().map(|&(t, _)| t),
        }
    }

    fn has_leftover_work(&self) -> bool {
        !self.waiting.is_empty() || self.aborts_pending
    }

    /// Runs every step that ends at or before `now`, starting the next one as each ends, and
    /// appends what happened to `out`.
    pub fn advance(&mut self, now: Duration, out: &mut Vec<Event>) {
        loop {
            if let Some(step) = &self.step {
                if step.end > now {
                    return;
                }
                let end = step.end;
                self.finish_step(out);
                self.start_step(end, out);
                continue;
            }
            // Idle: a step starts when the first request clears the API front end, or at once
            // if work is already queued.
            let due = if self.has_leftover_work() {
                self.clock
            } else {
                match self.front.front() {
                    Some(&(t, _)) => t,
                    None => return,
                }
            };
            if due > now {
                return;
            }
            self.start_step(due, out);
            if self.step.is_none() {
                // Nothing could be scheduled; only a later arrival can change that.
                self.blocked = true;
                match self.front.front() {
                    Some(&(t, _)) if t <= now => self.clock = t,
                    _ => return,
                }
            }
        }
    }

    fn start_step(&mut self, now: Duration, out: &mut Vec<Event>) {
        self.clock = self.clock.max(now);
        self.blocked = false;
        while let Some(&(ready, slot)) = self.front.front() {
            if ready > now {
                break;
            }
            self.front.pop_front();
            self.enqueue(slot);
        }
        if self.aborts_pending {
            self.reap_aborts(now, out);
        }
        let mut plan = std::mem::take(&mut self.spare_plan);
        plan.clear();
        let (shape, prefill_only) = self.schedule(now, &mut plan, out);
        if plan.is_empty() && self.running.decoding() == 0 {
            self.spare_plan = plan;
            return;
        }
        let jitter = self.rng.lognormal_factor(self.config.jitter_sigma);
        let nanos = self.step_time.step_nanos(&shape) * self.slowdown * jitter;
        self.counters.steps += 1;
        let end = now + Duration::from_nanos(nanos.max(1.0) as u64);
        self.step = Some(Step {
            start: now,
            end,
            decoders: if prefill_only {
                0
            } else {
                self.running.decoding()
            },
            plan,
            prefill_only,
        });
    }

    /// Applies the running step at its end: every decoder gains a token, prefill chunks land,
    /// prompts that completed sample their first token, finished requests retire.
    fn finish_step(&mut self, out: &mut Vec<Event>) {
        let Some(Step {
            start,
            end,
            decoders,
            plan,
            prefill_only,
        }) = self.step.take()
        else {
            return;
        };
        // `steps_done` is the decode clock: every decoder's progress is counted from it, so a
        // prompts-only step, in which no decoder computes, leaves it where it is.
        let step = self.steps_done;
        if !prefill_only {
            self.steps_done += 1;
            self.running.step_applied();
        }
        self.counters.generation_tokens += decoders as u64;
        if prefill_only {
            self.stalled += end - start;
        } else {
            let waited = end - start + std::mem::take(&mut self.stalled);
            self.counters
                .itl
                .observe_many(waited.as_secs_f64(), decoders as u64);
        }
        if self.config.report_every_token && !prefill_only {
            for slot in self.running.decoders() {
                let Some(seq) = self.slots[slot as usize].as_mut() else {
                    continue;
                };
                seq.materialize(self.steps_done);
                seq.last_token_at = end;
                out.push(Event {
                    id: seq.id,
                    at: end,
                    kind: EventKind::Token {
                        index: seq.generated - 1,
                    },
                });
            }
        }
        let mut done = std::mem::take(&mut self.spare_slots);
        done.clear();
        if !prefill_only {
            self.running.pop_finished(&self.slots, step, &mut done);
        }
        for &(slot, num_new) in &plan {
            let Some(seq) = self.slots[slot as usize].as_mut() else {
                continue;
            };
            if seq.aborted || seq.decode.is_some() {
                continue;
            }
            seq.computed += num_new;
            seq.offer_full_blocks(&mut self.pool);
            if seq.computed < seq.num_tokens() {
                continue;
            }
            // The prompt (or the recomputation after a preemption) is complete: sample.
            seq.generated += 1;
            self.counters.generation_tokens += 1;
            let index = seq.generated - 1;
            if index == 0 {
                seq.first_token_at = Some(end);
                self.counters
                    .ttft
                    .observe((end - seq.arrival).as_secs_f64());
            } else {
                self.counters
                    .itl
                    .observe((end - seq.last_token_at).as_secs_f64());
            }
            seq.last_token_at = end;
            if index == 0 || self.config.report_every_token {
                out.push(Event {
                    id: seq.id,
                    at: end,
                    kind: EventKind::Token { index },
                });
            }
            if seq.generated == seq.output_tokens {
                done.push(slot);
            } else {
                self.running
                    .start_decoding(&mut self.slots, slot, self.steps_done);
            }
        }
        for &slot in &done {
            self.running.remove(&mut self.slots, slot, self.steps_done);
            self.retire(slot, end, None, out);
        }
        self.spare_slots = done;
        self.spare_plan = plan;
    }

    fn preempt(&mut self, slot: u32, now: Duration, out: &mut Vec<Event>) {
        let was_decoding = self.slots[slot as usize]
            .as_ref()
            .is_some_and(|s| s.decode.is_some());
        self.running.remove(&mut self.slots, slot, self.steps_done);
        let Some(seq) = self.slots[slot as usize].as_mut() else {
            return;
        };
        if was_decoding {
            // Steps run back to back while anything runs: its last token came at `now`.
            seq.last_token_at = now;
        }
        seq.offer_all_full_blocks(&mut self.pool);
        self.pool.free_request(&seq.blocks);
        seq.blocks.clear();
        seq.computed = 0;
        seq.offered_blocks = 0;
        if let Some(adapter) = seq.adapter {
            self.lora.end_use(adapter);
        }
        self.counters.preemptions += 1;
        out.push(Event {
            id: seq.id,
            at: now,
            kind: EventKind::Preempted,
        });
        self.requeue(slot);
    }

    fn reap_aborts(&mut self, now: Duration, out: &mut Vec<Event>) {
        self.aborts_pending = false;
        let slots = &self.slots;
        let aborted = |slot: u32| slots[slot as usize].as_ref().is_none_or(|s| s.aborted);
        let running: Vec<u32> = self.running.iter(slots).filter(|&s| aborted(s)).collect();
        let mut queued: Vec<u32> = self
            .waiting
            .iter()
            .copied()
            .filter(|&s| aborted(s))
            .collect();
        queued.extend(self.front.iter().map(|&(_, s)| s).filter(|&s| aborted(s)));
        if !queued.is_empty() {
            self.waiting.retain(|s| !queued.contains(s));
            self.front.retain(|(_, s)| !queued.contains(s));
        }
        for &slot in &running {
            self.running.remove(&mut self.slots, slot, self.steps_done);
        }
        for slot in running.into_iter().chain(queued) {
            self.retire(slot, now, Some(FinishReason::Abort), out);
        }
    }

    /// Frees a request's blocks and slot (it must no longer be running), records its latencies
    /// and reports it finished.
    fn retire(
        &mut self,
        slot: u32,
        now: Duration,
        reason: Option<FinishReason>,
        out: &mut Vec<Event>,
    ) {
        let Some(seq) = self.slots[slot as usize].take() else {
            return;
        };
        self.pool.free_request(&seq.blocks);
        if let Some(adapter) = seq.adapter {
            if !seq.blocks.is_empty() {
                self.lora.end_use(adapter);
            }
        }
        let reason = if seq.aborted {
            FinishReason::Abort
        } else {
            reason.unwrap_or(seq.finish)
        };
        self.counters.count_finish(reason);
        if reason != FinishReason::Abort {
            let secs = |d: Duration| d.as_secs_f64();
            self.counters.e2e.observe(secs(now - seq.arrival));
            let scheduled = seq.scheduled_at.unwrap_or(now);
            self.counters
                .queue
                .observe(secs(scheduled.saturating_sub(seq.ready)));
            let first = seq.first_token_at.unwrap_or(now);
            self.counters
                .prefill
                .observe(secs(first.saturating_sub(scheduled)));
            self.counters
                .decode
                .observe(secs(now.saturating_sub(first)));
        }
        let usage = Usage {
            prompt_tokens: seq.prompt_tokens,
            completion_tokens: seq.generated,
            cached_tokens: seq.cached_prompt_tokens,
        };
        out.push(Event {
            id: seq.id,
            at: now,
            kind: EventKind::Finished { reason, usage },
        });
        self.generations[slot as usize] = self.generations[slot as usize].wrapping_add(1);
        self.free_slots.push(slot);
    }

    /// Cumulative counters and histograms.
    pub fn counters(&self) -> &EngineCounters {
        &self.counters
    }

    /// Running requests.
    pub fn num_running(&self) -> usize {
        self.running.len()
    }

    /// Requests queued in the scheduler or still in the API front end.
    pub fn num_waiting(&self) -> usize {
        self.waiting.len() + self.front.len()
    }

    /// Prompt (or recomputation) tokens still to compute, over queued and prefilling requests:
    /// the prefill work ahead of a request that arrives now. O(queue length).
    pub fn pending_prefill_tokens(&self) -> u64 {
        let remaining = |slot: u32| {
            self.slots[slot as usize]
                .as_ref()
                .map_or(0, |s| u64::from(s.num_tokens().saturating_sub(s.computed)))
        };
        let queued: u64 = self
            .waiting
            .iter()
            .chain(self.front.iter().map(|(_, s)| s))
            .map(|&s| remaining(s))
            .sum();
        queued
            + self
                .running
                .prefilling
                .iter()
                .map(|&s| remaining(s))
                .sum::<u64>()
    }

    /// Requests decoding one token a step.
    pub fn num_decoding(&self) -> usize {
        self.running.decoding()
    }

    /// Share of KV blocks referenced by requests, 0..1.
    pub fn kv_usage(&self) -> f64 {
        f64::from(self.pool.used_blocks()) / f64::from(self.pool.capacity().max(1))
    }

    /// Gauges for `/metrics`.
    pub fn gauges(&self) -> EngineGauges {
        let names = |slots: &mut dyn Iterator<Item = &u32>| {
            let mut v: Vec<String> = slots
                .filter_map(|&s| self.slots[s as usize].as_ref()?.adapter)
                .filter_map(|a| self.adapters.get(a as usize)?.clone())
                .collect();
            v.sort();
            v.dedup();
            v
        };
        let front_slots: Vec<u32> = self.front.iter().map(|&(_, s)| s).collect();
        let running: Vec<u32> = self.running.iter(&self.slots).collect();
        EngineGauges {
            running: self.running.len(),
            waiting: self.num_waiting(),
            kv_usage: self.kv_usage(),
            num_gpu_blocks: self.pool.capacity(),
            block_size: BLOCK_SIZE,
            max_lora: self.lora.max_loras(),
            running_adapters: names(&mut running.iter()),
            waiting_adapters: names(&mut self.waiting.iter().chain(front_slots.iter())),
        }
    }

    /// True when nothing is queued, running or in flight.
    pub fn is_idle(&self) -> bool {
        self.step.is_none()
            && self.running.is_empty()
            && self.waiting.is_empty()
            && self.front.is_empty()
    }

    /// How many leading blocks of `hashes` this replica holds in its prefix cache right now.
    pub fn cached_prefix_blocks(&self, hashes: &[BlockHash]) -> usize {
        self.pool.longest_cached_prefix(hashes).0
    }

    /// When `request`, submitted at `now`, would get its first token if nothing else arrived:
    /// a copy of this engine, with the request added, run forward from its true state: every
    /// running request decodes to its own output length and frees its blocks then, every step
    /// keeps its jitter. `None` when the engine refuses the request, or no first token comes by
    /// `give_up_at` (the caller's bound, so a forecast behind a long queue stops early).
    ///
    /// The engine itself is left as it was; the copy reports only first tokens, which changes
    /// what it reports, not when its steps end.
    pub fn forecast_first_token(
        &self,
        now: Duration,
        request: NewRequest,
        give_up_at: Duration,
    ) -> Option<Duration> {
        let mut fork = self.clone();
        fork.config.report_every_token = false;
        let id = fork.submit(now, request).ok()?;
        let mut events = Vec::new();
        while let Some(at) = fork.next_wakeup() {
            if at > give_up_at {
                return None;
            }
            fork.advance(at, &mut events);
            let first = events
                .iter()
                .find(|e| e.id == id && matches!(e.kind, EventKind::Token { .. }));
            if let Some(e) = first {
                return Some(e.at);
            }
            events.clear();
        }
        None
    }
}
