//! What the scheduling policy changes: the waiting queue's order and who is preempted.
//!
//! Under [`SchedulingPolicy::Fcfs`] the queue is first come, first served, a preempted request
//! goes back to its head, and the newest running request is the victim — vLLM's default, which
//! the calibration was measured with.
//!
//! Under [`SchedulingPolicy::Priority`] (vLLM's `--scheduling-policy priority`) the queue is
//! ordered by (priority, arrival), lower values first, and the victim is the running request
//! with the largest (priority, arrival): the least urgent, then the latest to arrive. As in vLLM
//! V1, a waiting request never preempts a running one: admission stops at the first request that
//! does not fit, however urgent (vLLM V0's priority scheduler did preempt for it; V1 dropped
//! that, and with it the recomputation storms it caused on servers with long queues).
//!
//! Invariant: under `Priority`, `waiting` is sorted by [`Seq::urgency_key`](crate::seq::Seq).

use super::{Engine, Event};
use crate::config::SchedulingPolicy;
use std::time::Duration;

impl Engine {
    fn urgency(&self, slot: u32) -> (i32, Duration, u64) {
        self.slots[slot as usize]
            .as_ref()
            .map_or((i32::MAX, Duration::MAX, u64::MAX), |s| s.urgency_key())
    }

    /// Puts a request that just cleared the API front end into the queue.
    pub(super) fn enqueue(&mut self, slot: u32) {
        match self.config.scheduling_policy {
            SchedulingPolicy::Fcfs => self.waiting.push_back(slot),
            SchedulingPolicy::Priority => self.insert_by_urgency(slot),
        }
    }

    /// Puts a preempted (or skipped) request back: at the head under FCFS, in its place by
    /// urgency under the priority policy.
    pub(super) fn requeue(&mut self, slot: u32) {
        match self.config.scheduling_policy {
            SchedulingPolicy::Fcfs => self.waiting.push_front(slot),
            SchedulingPolicy::Priority => self.insert_by_urgency(slot),
        }
    }

    fn insert_by_urgency(&mut self, slot: u32) {
        let key = self.urgency(slot);
        let at = self.waiting.partition_point(|&s| self.urgency(s) <= key);
        self.waiting.insert(at, slot);
    }

    /// The running request to preempt when blocks run out.
    pub(super) fn victim(&self) -> Option<u32> {
        match self.config.scheduling_policy {
            SchedulingPolicy::Fcfs => self.running.newest(),
            // O(running), paid only when something is preempted.
            SchedulingPolicy::Priority => self
                .running
                .iter(&self.slots)
                .max_by_key(|&s| self.urgency(s)),
        }
    }

    /// Preempts `victim`, first taking back the prefill chunk this step planned for it (and its
    /// share of the token budget), so the step never computes for a request that lost its blocks.
    /// Returns the victim's position in `plan`, if it had one.
    pub(super) fn preempt_planned(
        &mut self,
        victim: u32,
        now: Duration,
        plan: &mut Vec<(u32, u32)>,
        budget: &mut u32,
        out: &mut Vec<Event>,
    ) -> Option<usize> {
        let planned = plan.iter().position(|&(s, _)| s == victim);
        if let Some(pos) = planned {
            let (_, tokens) = plan.remove(pos);
            *budget += tokens;
        }
        self.preempt(victim, now, out);
        planned
    }
}
