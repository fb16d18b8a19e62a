//! The running set, kept so a step costs O(what changes), not O(batch).
//!
//! A decoding request computes one token and samples one each step, so its state after `n` more
//! steps follows from a [`DecodeAnchor`]; nothing about it needs touching until it needs a new KV
//! block (every `BLOCK_SIZE` steps), finishes, or is preempted. Decoding requests therefore sit
//! in a wheel of `BLOCK_SIZE` buckets — bucket `k % BLOCK_SIZE` holds the ones that need a block
//! before step `k` — and in a calendar of the steps at which they finish.
//!
//! Invariants:
//! - the linked list through `Seq::prev/next` holds every running request in admission order;
//! - a running request is in `prefilling` xor in exactly one wheel bucket (with `decode` set);
//! - `ctx_sum` is the sum, over decoding requests, of tokens computed before the next step.

use crate::seq::{DecodeAnchor, Seq, NIL};
use crate::BLOCK_SIZE;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const BUCKETS: u64 = BLOCK_SIZE as u64;

#[derive(Debug, Clone)]
pub(crate) struct Running {
    head: u32,
    tail: u32,
    len: usize,
    /// Running requests still computing their prompt (or recomputing after preemption), in
    /// admission order.
    pub prefilling: Vec<u32>,
    wheel: Vec<Vec<u32>>,
    decoding: usize,
    ctx_sum: u64,
    /// (index of the step whose end emits the last token, slot, epoch).
    finish: BinaryHeap<Reverse<(u64, u32, u32)>>,
}

fn seq(slots: &mut [Option<Seq>], slot: u32) -> Option<&mut Seq> {
    slots.get_mut(slot as usize)?.as_mut()
}

impl Running {
    pub fn new() -> Running {
        Running {
            head: NIL,
            tail: NIL,
            len: 0,
            prefilling: Vec::new(),
            wheel: (0..BUCKETS).map(|_| Vec::new()).collect(),
            decoding: 0,
            ctx_sum: 0,
            finish: BinaryHeap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Decoding requests.
    pub fn decoding(&self) -> usize {
        self.decoding
    }

    /// Tokens of context the decoding requests hold before the next step.
    pub fn decode_context(&self) -> u64 {
        self.ctx_sum
    }

    /// The most recently admitted running request: vLLM's preemption victim.
    pub fn newest(&self) -> Option<u32> {
        (self.tail != NIL).then_some(self.tail)
    }

    /// Admits a request (it starts prefilling).
    pub fn admit(&mut self, slots: &mut [Option<Seq>], slot: u32) {
        let tail = self.tail;
        if let Some(s) = seq(slots, slot) {
            s.prev = tail;
            s.next = NIL;
        }
        match seq(slots, tail) {
            Some(t) => t.next = slot,
            None => self.head = slot,
        }
        self.tail = slot;
        self.len += 1;
        self.prefilling.push(slot);
    }

    /// Takes a request out of the running set (finished, preempted or aborted), writing its
    /// derived state down first.
    pub fn remove(&mut self, slots: &mut [Option<Seq>], slot: u32, steps_done: u64) {
        self.stop_decoding(slots, slot, steps_done);
        if let Some(pos) = self.prefilling.iter().position(|&s| s == slot) {
            self.prefilling.remove(pos);
        }
        let Some(s) = seq(slots, slot) else { return };
        let (prev, next) = (s.prev, s.next);
        s.prev = NIL;
        s.next = NIL;
        match seq(slots, prev) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        match seq(slots, next) {
            Some(n) => n.prev = prev,
            None => self.tail = prev,
        }
        self.len -= 1;
    }

    /// Moves a prefilling request whose prompt is now computed (and which has sampled a token) to
    /// decoding, from the next step on.
    pub fn start_decoding(&mut self, slots: &mut [Option<Seq>], slot: u32, steps_done: u64) {
        if let Some(pos) = self.prefilling.iter().position(|&s| s == slot) {
            self.prefilling.remove(pos);
        }
        let Some(s) = seq(slots, slot) else { return };
        let bucket = ((steps_done % BUCKETS) + BUCKETS - u64::from(s.computed) % BUCKETS) % BUCKETS;
        let members = &mut self.wheel[bucket as usize];
        s.decode = Some(DecodeAnchor {
            base_step: steps_done,
            computed: s.computed,
            generated: s.generated,
            bucket_pos: members.len() as u32,
        });
        s.epoch = s.epoch.wrapping_add(1);
        members.push(slot);
        let last_step = steps_done + u64::from(s.output_tokens - s.generated) - 1;
        self.finish.push(Reverse((last_step, slot, s.epoch)));
        self.decoding += 1;
        self.ctx_sum += u64::from(s.computed);
    }

    fn stop_decoding(&mut self, slots: &mut [Option<Seq>], slot: u32, steps_done: u64) {
        let Some(s) = seq(slots, slot) else { return };
        let Some(anchor) = s.decode else { return };
        s.materialize(steps_done);
        s.decode = None;
        s.epoch = s.epoch.wrapping_add(1);
        self.decoding -= 1;
        self.ctx_sum -= u64::from(s.computed);
        let bucket = ((anchor.base_step % BUCKETS) + BUCKETS
            - u64::from(anchor.computed) % BUCKETS)
            % BUCKETS;
        let members = &mut self.wheel[bucket as usize];
        let pos = anchor.bucket_pos as usize;
        members.swap_remove(pos);
        if let Some(&moved) = members.get(pos) {
            if let Some(Some(anchor)) = seq(slots, moved).map(|m| m.decode.as_mut()) {
                anchor.bucket_pos = pos as u32;
            }
        }
    }

    /// Decoding requests that need a new block before step `step`.
    pub fn due_blocks(&self, step: u64) -> &[u32] {
        &self.wheel[(step % BUCKETS) as usize]
    }

    /// Every decoding request, in no particular order.
    pub fn decoders(&self) -> impl Iterator<Item = u32> + '_ {
        self.wheel.iter().flatten().copied()
    }

    /// Records that one more step was applied: every decoder computed one more token.
    pub fn step_applied(&mut self) {
        self.ctx_sum += self.decoding as u64;
    }

    /// Pops the decoding requests whose last token came at the end of step `step` or earlier.
    pub fn pop_finished(&mut self, slots: &[Option<Seq>], step: u64, out: &mut Vec<u32>) {
        while let Some(&Reverse((last, slot, epoch))) = self.finish.peek() {
            if last > step {
                break;
            }
            self.finish.pop();
            let live = slots
                .get(slot as usize)
                .and_then(Option::as_ref)
                .is_some_and(|s| s.epoch == epoch && s.decode.is_some());
            if live {
                out.push(slot);
            }
        }
    }

    /// Running requests in admission order.
    pub fn iter<'a>(&self, slots: &'a [Option<Seq>]) -> impl Iterator<Item = u32> + 'a {
        let mut at = self.head;
        std::iter::from_fn(move || {
            let slot = at;
            let s = slots.get(slot as usize)?.as_ref()?;
            at = s.next;
            Some(slot)
        })
    }
}
