//! The runner's event loop: one heap orders arrivals, engine step ends, scrapes and flow-control
//! deadlines; each event is a method on [`Sim`].
//!
//! An arrival meets the gateway replica it was dealt to ([`crate::gateway`]), and everything
//! that follows for it — flow control, the pick, the dispatch credit, the first token the
//! latency model learns from, the completion — happens at that gateway. A scrape lands at all
//! of them.

mod global_tier;

use crate::gate::Gate;
use crate::gateway::{Chooser, Gateway};
use crate::outcome::{Outcome, QueueSample};
use crate::replica::{
    choose, greedy_choice, lookahead_choice, new_request, scrape, Oracle, Replica,
};
use crate::workload::BenchRequest;
use infergate_config::gateway::Band;
use infergate_engine::{Event, EventKind, RequestId};
use infergate_picker::{Dispatch, EndpointId};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Ev {
    Arrival(usize),
    Wake(usize),
    Scrape(usize),
    /// A flow-control queue deadline of this gateway may have passed.
    FlowDeadline(usize),
    /// A caller sends request `i` to its region's global-tier replica (multi-cluster runs).
    Caller(usize),
    /// Request `i`'s attempt at a member got no connection in time: the next attempt.
    Retry(usize),
    /// Global-tier replica `.0` pulls member `.1`'s status.
    Pull(usize, usize),
    /// That pull timed out.
    PullMissed(usize, usize),
    /// The run's cluster fault starts (`true`) or heals (`false`).
    Fault(bool),
}

/// Everything a run holds while it runs.
pub(crate) struct Sim<'a> {
    pub requests: &'a [BenchRequest],
    pub replicas: Vec<Replica>,
    /// The gateway replicas, at least one.
    pub gateways: Vec<Gateway>,
    /// The gateway each request was dealt to, by request.
    pub dealt_to: Vec<u32>,
    /// Requests finished in the step being handled, per gateway.
    pub completed: Vec<u32>,
    pub scrape_interval: Duration,
    pub last_arrival: Duration,
    pub heap: BinaryHeap<Reverse<(Duration, Ev)>>,
    pub outcomes: Vec<Outcome>,
    /// Each request's latest token, for the gap to its next.
    pub last_token: Vec<Duration>,
    /// Each request's gaps between successive tokens (ms).
    pub token_gaps_ms: Vec<Vec<f32>>,
    pub dispatches: Vec<Option<Dispatch>>,
    pub owner: HashMap<(usize, RequestId), usize>,
    pub unfinished: usize,
    pub events: Vec<Event>,
    pub queue_samples: Vec<QueueSample>,
    /// The global tier in front of the gateways, one per cluster, in a multi-cluster run.
    pub tier: Option<Box<crate::global::tier::TierSim>>,
}

impl Sim<'_> {
    /// Runs events until every request is settled or `drain_until` passes.
    pub fn run(&mut self, drain_until: Duration) {
        while let Some(Reverse((now, ev))) = self.heap.pop() {
            if now > drain_until || self.unfinished == 0 {
                break;
            }
            match ev {
                Ev::Arrival(i) => self.arrive(i, now),
                Ev::Wake(e) => self.wake(e, now),
                Ev::Scrape(e) => self.scrape(e, now),
                Ev::FlowDeadline(g) => {
                    if self.gateways[g].gate_wake == Some(now) {
                        self.gateways[g].gate_wake = None;
                        self.poll_gate(g, now);
                    }
                }
                Ev::Caller(i) => self.tier_send(i, now),
                Ev::Retry(i) => self.tier_retry(i, now),
                Ev::Pull(t, m) => self.tier_pull(t, m, now),
                Ev::PullMissed(t, m) => self.tier_pull_missed(t, m),
                Ev::Fault(down) => self.tier_fault(down, now),
            }
        }
    }

    fn arrive(&mut self, i: usize, now: Duration) {
        if !self.cluster_accepts(i, now, false) {
            return;
        }
        self.outcomes[i].sent = now;
        let r = &self.requests[i];
        self.outcomes[i].band = r.band;
        let g = self.dealt_to[i] as usize;
        let gate = match self.gateways[g].gate.as_mut() {
            Some(g) => g.admit(
                i,
                r.band.unwrap_or(Band::Standard),
                r.tenant.as_deref(),
                r.prompt_tokens,
                now,
            ),
            None => Gate::Now,
        };
        match gate {
            Gate::Now => self.dispatch(i, now),
            Gate::Queued(deadline) => self.wake_gate_at(g, deadline, now),
            Gate::Refused(status) => self.refuse(i, status, now),
        }
    }

    /// Picks a replica for request `i` at its gateway and submits it there.
    fn dispatch(&mut self, i: usize, now: Duration) {
        if !self.cluster_accepts(i, now, true) {
            return;
        }
        let r = &self.requests[i];
        let g = self.dealt_to[i] as usize;
        let gateway = &mut self.gateways[g];
        let target = match &mut gateway.chooser {
            Chooser::Picker(p) => choose(p, &gateway.pool, r, now).map(|(e, d)| {
                self.dispatches[i] = Some(d);
                e
            }),
            Chooser::Oracle(Oracle::Greedy) => greedy_choice(&self.replicas, r),
            Chooser::Oracle(Oracle::Lookahead) => lookahead_choice(&self.replicas, r, now),
        };
        let submitted = target.and_then(|e| {
            let engine = &mut self.replicas[e].engine;
            let policy = engine.config().scheduling_policy;
            engine
                .submit(now, new_request(r, policy))
                .ok()
                .map(|id| (e, id))
        });
        match submitted {
            Some((e, id)) => {
                self.owner.insert((e, id), i);
                self.schedule(e, now);
            }
            None => self.fail(i, Some(g), now),
        }
    }

    /// Request `i` failed at `now`: after gateway `admitted_by`'s flow control let it through
    /// (that gate counts it done), or before it met one (`None`).
    pub(crate) fn fail(&mut self, i: usize, admitted_by: Option<usize>, now: Duration) {
        self.outcomes[i].error = true;
        self.dispatches[i] = None;
        self.unfinished -= 1;
        if let Some(gate) = admitted_by.and_then(|g| self.gateways[g].gate.as_mut()) {
            gate.complete(now);
        }
        self.tier_settled(i, now, None);
    }

    fn refuse(&mut self, i: usize, status: u16, now: Duration) {
        self.outcomes[i].refused = Some(status);
        self.unfinished -= 1;
        self.tier_settled(i, now, Some(status));
    }

    fn wake(&mut self, e: usize, now: Duration) {
        let replica = &mut self.replicas[e];
        if replica.wake != Some(now) {
            return;
        }
        replica.wake = None;
        self.events.clear();
        replica.engine.advance(now, &mut self.events);
        let mut completed = false;
        // Requests that finished, for the tier of a multi-cluster run (none collected without
        // one: this loop runs at every engine step).
        let with_tier = self.tier.is_some();
        let mut finished = Vec::new();
        for event in &self.events {
            let Some(&i) = self.owner.get(&(e, event.id)) else {
                continue;
            };
            let g = self.dealt_to[i] as usize;
            match event.kind {
                EventKind::Token { index: 0 } => {
                    self.outcomes[i].first_token = Some(event.at);
                    self.last_token[i] = event.at;
                    if let (Some(p), Some(d)) =
                        (self.gateways[g].picker_mut(), self.dispatches[i].as_mut())
                    {
                        d.guard.first_token();
                        p.observe_first_token(&d.ticket, event.at);
                    }
                }
                EventKind::Token { .. } => {
                    let gap = event.at.saturating_sub(self.last_token[i]);
                    self.token_gaps_ms[i].push((gap.as_secs_f64() * 1e3) as f32);
                    self.last_token[i] = event.at;
                }
                EventKind::Finished { usage, .. } => {
                    self.outcomes[i].finished = Some(event.at);
                    self.outcomes[i].output_tokens = usage.completion_tokens;
                    self.dispatches[i] = None; // drops the in-flight guard
                    self.owner.remove(&(e, event.id));
                    self.unfinished -= 1;
                    self.completed[g] += 1;
                    completed = true;
                    if with_tier {
                        finished.push(i);
                    }
                }
                _ => {}
            }
        }
        self.schedule(e, now);
        for i in finished {
            self.tier_settled(i, now, None);
        }
        if completed {
            for g in 0..self.gateways.len() {
                let done = std::mem::take(&mut self.completed[g]);
                if done == 0 {
                    continue;
                }
                if let Some(gate) = self.gateways[g].gate.as_mut() {
                    for _ in 0..done {
                        gate.complete(now);
                    }
                }
                self.poll_gate(g, now);
            }
        }
    }

    fn scrape(&mut self, e: usize, now: Duration) {
        let metrics = scrape(&self.replicas[e].engine, now);
        if now <= self.last_arrival {
            self.queue_samples.push(QueueSample {
                at: now,
                replica: e as u32,
                waiting: metrics.waiting.unwrap_or(0) as u32,
                running: metrics.running.unwrap_or(0) as u32,
            });
        }
        let prefill = self.replicas[e].engine.pending_prefill_tokens();
        for gateway in self.gateways.iter_mut().filter(|g| g.replicas.contains(&e)) {
            if let Some(gate) = gateway.gate.as_mut() {
                gate.on_scrape(e, &metrics, prefill, now);
            }
            let _ = gateway
                .pool
                .update_metrics(EndpointId(e as u64), metrics.clone());
        }
        // The first scrape lands at zero, the rest at phase + k × interval.
        let next = self.replicas[e].next_scrape;
        self.replicas[e].next_scrape = next + self.scrape_interval;
        self.heap.push(Reverse((next, Ev::Scrape(e))));
        for g in 0..self.gateways.len() {
            if self.gateways[g].gate.is_some() {
                self.poll_gate(g, now);
            }
        }
    }

    /// Carries out what gateway `g`'s flow control decided at `now`, and makes sure it is asked
    /// again when its next deadline comes.
    fn poll_gate(&mut self, g: usize, now: Duration) {
        let Some(gate) = self.gateways[g].gate.as_mut() else {
            return;
        };
        let decided = gate.poll(now);
        let next = gate.next_deadline();
        for (i, refused) in decided {
            match refused {
                None => self.dispatch(i, now),
                Some(status) => self.refuse(i, status, now),
            }
        }
        if let Some(at) = next {
            self.wake_gate_at(g, at, now);
        }
    }

    /// Asks for a poll of gateway `g`'s flow control at `at`, unless one is already due no later.
    /// A deadline not after `now` was just polled and gets nothing new until time moves on: the
    /// next event does.
    fn wake_gate_at(&mut self, g: usize, at: Duration, now: Duration) {
        let wake = &mut self.gateways[g].gate_wake;
        if at <= now || wake.is_some_and(|w| w <= at) {
            return;
        }
        *wake = Some(at);
        self.heap.push(Reverse((at, Ev::FlowDeadline(g))));
    }

    /// Makes sure replica `e` is woken at its next step end.
    fn schedule(&mut self, e: usize, now: Duration) {
        let replica = &mut self.replicas[e];
        if let Some(next) = replica.engine.next_wakeup() {
            let next = next.max(now);
            if replica.wake.is_none_or(|w| next < w) {
                replica.wake = Some(next);
                self.heap.push(Reverse((next, Ev::Wake(e))));
            }
        }
    }
}
