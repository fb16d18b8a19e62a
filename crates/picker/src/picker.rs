//! The Picker: one per pool. It owns what is learned across requests (prefix index, latency
//! model, no-hit LRU, sessions, tie rotation, RNG) and turns a pool snapshot and a request into a
//! primary endpoint and ordered fallbacks.
//!
//! Per request the work is O(candidates) plus O(log prompt blocks) index lookups, and nothing is
//! allocated that grows with the fleet:
//!
//! 1. the candidates are copied from the snapshot's signal columns into reused column buffers
//!    (`scorer::Candidates`), and each endpoint's live counters are read once;
//! 2. the prefix index's match (a few lookups, see [`PrefixIndex::match_into`]) is written into
//!    the candidates' rows;
//! 3. the filters narrow a keep-mask (one pass each, writing nothing when nobody is dropped), and
//!    the columns are compacted once if somebody was;
//! 4. each scorer adds its weighted score to the totals in one or two tight passes over the
//!    columns it reads;
//! 5. the selection takes the best total and the next best as fallbacks.
//!
//! Everything that depends only on membership (slot mapping and its inverse, label filters) is
//! recomputed only when the pool's membership changes. The picker takes `&mut self`: the gateway
//! holds one per pool behind its own synchronisation (a short critical section), the simulator
//! calls it directly. [`crate::speed`] measures the whole decision.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::baseline;
use crate::counters::InFlightGuard;
use crate::endpoint::EndpointId;
use crate::error::PickError;
use crate::filter::{Filter, Outcome};
use crate::latency::{LatencyEstimate, LatencyModel, TtftFeatures};
use crate::policy::Policy;
use crate::pool::{Membership, Pool};
use crate::prefix::{IndexStats, PrefixIndex};
use crate::request::RequestFeatures;
use crate::scorer::state::{ColdLru, SessionTable};
use crate::scorer::{Candidates, Members, ScoreInput, Work};
use crate::select;
use infergate_rng::SplitMix64;

/// Sessions remembered by the session-affinity scorer.
const SESSION_CAPACITY: usize = 65_536;

/// The endpoint chosen for a request and where to go if it fails before the first byte.
#[derive(Debug, Clone, PartialEq)]
pub struct Pick {
    /// Send the request here.
    pub primary: EndpointId,
    /// Then try these, in order.
    pub fallbacks: Vec<EndpointId>,
    /// Every candidate's metrics were stale, so the pick was made without them.
    pub metrics_fail_open: bool,
    /// Why, when asked for with [`Picker::pick_explained`].
    pub explanation: Option<Box<Explanation>>,
}

impl Pick {
    /// Every endpoint of `pool` in the order to try them: the primary and the fallbacks, then
    /// the pool's others in its order (those the filters or outlier detection set aside), for a
    /// request that would rather try one of those than give up.
    pub fn then_the_rest<'a>(&'a self, pool: &'a Pool) -> impl Iterator<Item = EndpointId> + 'a {
        let offered = std::iter::once(self.primary).chain(self.fallbacks.iter().copied());
        let rest = pool
            .specs()
            .iter()
            .map(|s| s.id)
            .filter(move |id| *id != self.primary && !self.fallbacks.contains(id));
        offered.chain(rest)
    }
}

/// Why a pick chose what it chose: every candidate's score, its parts, and what the filters
/// removed. Asked for per pick ([`Picker::pick_explained`]); a plain pick builds none.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Explanation {
    /// The scorers, by plugin type, in the order of each candidate's `parts` (empty for a
    /// baseline policy, which has a ranking key but no scorers).
    pub scorers: Vec<&'static str>,
    /// The candidates left after the filters, in the pool's order.
    pub scored: Vec<ScoredEndpoint>,
    /// The endpoints removed, each with what removed it: a filter's plugin type, or
    /// `context-window` (its `max_model_len` does not hold the request).
    pub removed: Vec<(EndpointId, &'static str)>,
    /// Each scorer's column while the pick runs (moved into `scored` at its end).
    scored_parts: Vec<Vec<f64>>,
}

impl Explanation {
    /// Records the endpoints in `before` but not in `after` (pool positions, both ascending, as
    /// candidates always are) as removed `by`.
    fn note_removed(&mut self, pool: &Pool, before: &[u32], after: &[u32], by: &'static str) {
        self.removed.extend(
            before
                .iter()
                .filter(|p| after.binary_search(p).is_err())
                .filter_map(|&p| pool.spec(p as usize))
                .map(|s| (s.id, by)),
        );
    }
}

/// One candidate's score.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredEndpoint {
    /// The endpoint.
    pub id: EndpointId,
    /// The total the selection ranked it by (for a weighted profile, the sum of `parts`).
    pub total: f64,
    /// Each scorer's weighted contribution, in the order of [`Explanation::scorers`].
    pub parts: Vec<f64>,
}

/// What [`Picker::on_dispatch`] returns: keep the guard as long as the response, and hand the
/// ticket back with the observed TTFT.
#[derive(Debug)]
pub struct Dispatch {
    /// Counts the request as in flight until dropped.
    pub guard: InFlightGuard,
    /// What the latency model needs to learn from this request's TTFT.
    pub ticket: TtftTicket,
    /// The latency model's TTFT for it there at dispatch; `None` while the model has learned
    /// nothing (no warm endpoint), when its figure would be the defaults'.
    pub predicted_ttft: Option<Duration>,
}

/// A request's features at the endpoint it was sent to, kept until its first token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TtftTicket {
    /// Where the request went.
    pub endpoint: EndpointId,
    /// Queue ahead and uncached tokens at dispatch.
    pub features: TtftFeatures,
    /// When it was dispatched.
    pub dispatched_at: Duration,
    /// Whether its TTFT may teach the latency model. A request for a LoRA adapter that was not
    /// running there at dispatch may wait for a slot and a load — time the model has no feature
    /// for, which it would otherwise learn as a slow endpoint and then steer everything away
    /// from it.
    pub teaches: bool,
}

/// Dense slots for endpoint ids, reused after an endpoint leaves.
#[derive(Debug, Default)]
struct Slots {
    by_id: HashMap<EndpointId, u32>,
    free: Vec<u32>,
    next: u32,
}

impl Slots {
    fn assign(&mut self, id: EndpointId) -> u32 {
        if let Some(&s) = self.by_id.get(&id) {
            return s;
        }
        let s = self.free.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        });
        self.by_id.insert(id, s);
        s
    }
}

/// Per-request buffers, kept to avoid allocating on every pick.
#[derive(Debug, Default)]
struct Scratch {
    cands: Candidates,
    matches: Vec<(u32, u32)>,
    matched_by_slot: Vec<u32>,
    totals: Vec<f64>,
    work: Work,
    fallbacks: Vec<usize>,
    ranked: Vec<select::Ranked>,
    positions: Vec<usize>,
    /// `sglang-cache-aware`: each candidate's index size, in blocks.
    tree_blocks: Vec<usize>,
}

/// The endpoint picker for one pool.
#[derive(Debug)]
pub struct Picker {
    policy: Policy,
    rng: SplitMix64,
    rotation: u64,
    slots: Slots,
    synced: Option<Arc<Membership>>,
    slot_of_pos: Vec<u32>,
    /// The inverse of `slot_of_pos`; `u32::MAX` for a free slot.
    pos_of_slot: Vec<u32>,
    admitted: Vec<bool>,
    base: Vec<usize>,
    index: PrefixIndex,
    latency: LatencyModel,
    cold: ColdLru,
    sessions: SessionTable,
    /// `k8s-service`: the endpoint each keep-alive connection is pinned to.
    pins: Vec<Option<u64>>,
    scratch: Scratch,
    /// Filled during a pick of [`Picker::pick_explained`]; `None` otherwise.
    explaining: Option<Explanation>,
}

impl Picker {
    /// A picker for `policy` whose random choices all derive from `seed`.
    pub fn new(policy: Policy, seed: u64) -> Self {
        let latency = match &policy {
            Policy::Weighted(p) => LatencyModel::new(p.latency),
            _ => LatencyModel::new(Default::default()),
        };
        Self {
            policy,
            rng: SplitMix64::new(seed),
            rotation: 0,
            slots: Slots::default(),
            synced: None,
            slot_of_pos: Vec::new(),
            pos_of_slot: Vec::new(),
            admitted: Vec::new(),
            base: Vec::new(),
            index: PrefixIndex::new(),
            latency,
            cold: ColdLru::default(),
            sessions: SessionTable::new(SESSION_CAPACITY),
            pins: Vec::new(),
            scratch: Scratch::default(),
            explaining: None,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// [`Picker::pick`], and why: the pick carries an [`Explanation`]. Slower (every scorer
    /// writes its own column before they are summed, in the same order, so the totals and the
    /// choice are exactly a plain pick's); for operators who asked for it.
    pub fn pick_explained(
        &mut self,
        pool: &Pool,
        req: &RequestFeatures,
        now: Duration,
    ) -> Result<Pick, PickError> {
        self.explaining = Some(Explanation::default());
        let picked = self.pick(pool, req, now);
        let explanation = self.explaining.take();
        picked.map(|mut p| {
            p.explanation = explanation.map(Box::new);
            p
        })
    }

    /// Chooses an endpoint of `pool` for `req` at time `now`.
    pub fn pick(
        &mut self,
        pool: &Pool,
        req: &RequestFeatures,
        now: Duration,
    ) -> Result<Pick, PickError> {
        self.sync(pool);
        if pool.is_empty() {
            return Err(PickError::EmptyPool);
        }
        self.gather(pool, req)?;
        let gathered = self
            .explaining
            .is_some()
            .then(|| self.scratch.cands.pos.clone());
        Self::fit_context(pool, req, &mut self.scratch.cands);
        Self::drop_ejected(pool, now, &mut self.rng, &mut self.scratch.cands);
        let Self {
            policy,
            rng,
            rotation,
            index,
            latency,
            cold,
            sessions,
            scratch,
            pos_of_slot,
            pins,
            explaining,
            ..
        } = self;
        if let (Some(e), Some(before)) = (explaining.as_mut(), gathered) {
            e.note_removed(pool, &before, &scratch.cands.pos, "context-window");
        }
        let cands = &mut scratch.cands;
        let hashes = &req.prompt_block_hashes;
        if policy.needs_prefix() && !hashes.is_empty() {
            index.match_into(hashes, &mut scratch.matches);
            if cands.len() == pool.len() {
                // Every endpoint is a candidate, in position order (filters have not run yet):
                // each match lands straight in its endpoint's row.
                for &(slot, m) in &scratch.matches {
                    let pos = pos_of_slot.get(slot as usize).copied().unwrap_or(u32::MAX);
                    if let Some(x) = cands.matched_blocks.get_mut(pos as usize) {
                        *x = m;
                    }
                }
            } else if !scratch.matches.is_empty() {
                let by_slot = &mut scratch.matched_by_slot;
                for &(slot, m) in &scratch.matches {
                    if let Some(x) = by_slot.get_mut(slot as usize) {
                        *x = m;
                    }
                }
                for (m, &slot) in cands.matched_blocks.iter_mut().zip(&cands.slot) {
                    *m = by_slot.get(slot as usize).copied().unwrap_or(0);
                }
                for &(slot, _) in &scratch.matches {
                    if let Some(x) = by_slot.get_mut(slot as usize) {
                        *x = 0;
                    }
                }
            }
        }
        let mut fail_open = false;
        if let Policy::Weighted(profile) = &*policy {
            for filter in &profile.filters {
                let before = explaining.as_ref().map(|_| kept_positions(cands));
                if filter.apply(now, cands) == Outcome::FailedOpen
                    && matches!(filter, Filter::Stale { .. })
                {
                    fail_open = true;
                }
                if let (Some(e), Some(before)) = (explaining.as_mut(), before) {
                    e.note_removed(pool, &before, &kept_positions(cands), filter.plugin_type());
                }
            }
            cands.compact();
        }
        let block_tokens = policy.prefix_params().block_size_tokens as u64;
        cands.derive(req.prompt_tokens, block_tokens);
        let cands = &scratch.cands;
        let id_at = |i: usize| {
            cands
                .pos
                .get(i)
                .and_then(|&pos| pool.spec(pos as usize))
                .map(|s| s.id)
        };
        let key = &mut scratch.totals;
        let primary = match &*policy {
            Policy::RoundRobin => baseline::round_robin(cands, rotation, key),
            Policy::Random => baseline::random(cands, rng, key),
            Policy::LeastRequest => baseline::least_request(cands, rng, key),
            Policy::K8sService { connections } => {
                let id_of = |i: usize| id_at(i).map(|id| id.0);
                baseline::k8s_service(cands, *connections, pins, &id_of, rotation, rng, key)
            }
            Policy::SglangCacheAware(p) => {
                let trees = &mut scratch.tree_blocks;
                trees.clear();
                trees.extend(cands.slot.iter().map(|&slot| index.stats(slot).entries));
                baseline::sglang_cache_aware(cands, hashes.len(), trees, p, key)
            }
            Policy::DynamoKv => baseline::dynamo_kv(
                cands,
                req.prompt_tokens,
                hashes.len(),
                block_tokens,
                rng,
                key,
            ),
            Policy::Weighted(profile) => {
                let input = ScoreInput {
                    pool,
                    req,
                    latency,
                    cold_lru: cold,
                    sessions,
                    cold: hashes.first().is_none_or(|h| !index.is_known(*h)),
                };
                key.clear();
                key.resize(cands.len(), 0.0);
                for ws in &profile.scorers {
                    if ws.weight == 0.0 {
                        continue;
                    }
                    match explaining.as_mut() {
                        None => {
                            ws.scorer
                                .add_scores(&input, cands, ws.weight, key, &mut scratch.work)
                        }
                        Some(e) => {
                            // Its own column, then added in: every scorer only adds to the
                            // totals, so the sum is bit for bit a plain pick's.
                            let mut part = vec![0.0; cands.len()];
                            ws.scorer.add_scores(
                                &input,
                                cands,
                                ws.weight,
                                &mut part,
                                &mut scratch.work,
                            );
                            for (t, p) in key.iter_mut().zip(&part) {
                                *t += p;
                            }
                            e.scorers.push(ws.scorer.plugin_type());
                            e.scored_parts.push(part);
                        }
                    }
                }
                select::primary(profile.selection, key, rng, rotation).unwrap_or(0)
            }
        };
        let max_fallbacks = match &*policy {
            Policy::Weighted(p) => p.max_fallbacks,
            _ => crate::profile::DEFAULT_FALLBACKS,
        };
        select::fallbacks(
            key,
            primary,
            max_fallbacks,
            &mut scratch.fallbacks,
            &mut scratch.ranked,
        );
        if let Some(e) = explaining.as_mut() {
            let columns = std::mem::take(&mut e.scored_parts);
            e.scored = (0..cands.len())
                .filter_map(|i| {
                    Some(ScoredEndpoint {
                        id: id_at(i)?,
                        total: key.get(i).copied().unwrap_or(f64::NAN),
                        parts: columns
                            .iter()
                            .map(|c| c.get(i).copied().unwrap_or(0.0))
                            .collect(),
                    })
                })
                .collect();
        }
        let primary = id_at(primary).ok_or(PickError::EmptyPool)?;
        Ok(Pick {
            primary,
            fallbacks: scratch.fallbacks.iter().filter_map(|&i| id_at(i)).collect(),
            metrics_fail_open: fail_open,
            explanation: None,
        })
    }

    /// Keeps only the candidates whose context window holds the request. When none does, it
    /// keeps those with the largest window: the request's length is an estimate, so the model
    /// server, not the gateway, gives the verdict (and its 400 reaches the client).
    fn fit_context(pool: &Pool, req: &RequestFeatures, cands: &mut Candidates) {
        let needed = req.context_tokens.max(req.prompt_tokens);
        let limit = |pos: u32| {
            pool.metrics_at(pos as usize)
                .and_then(|m| m.max_model_len)
                .map_or(u64::MAX, u64::from)
        };
        if cands.pos.iter().all(|&pos| limit(pos) >= needed) {
            return;
        }
        let largest = cands.pos.iter().map(|&p| limit(p)).max().unwrap_or(0);
        let bar = needed.min(largest);
        let Candidates { pos, keep, .. } = cands;
        keep.narrow(|| pos.iter().map(|&p| limit(p) >= bar));
        cands.compact();
    }

    /// Removes the endpoints outlier detection ejected ([`crate::outlier`]), and a returning
    /// one in slow start with the chance it is not yet admitted at, under every policy. When that
    /// would remove every candidate (the share rule allows it only after candidates were
    /// narrowed), none is removed. Draws from `rng` only while some candidate is ramping, so
    /// picks in a pool that never ejected are unchanged.
    fn drop_ejected(pool: &Pool, now: Duration, rng: &mut SplitMix64, cands: &mut Candidates) {
        let share = |p: u32| pool.admitted_share_at(p as usize, now);
        if cands.pos.iter().all(|&p| share(p) >= 1.0) {
            return;
        }
        // Drawn once: `narrow` reads its pass list twice. Allocates only while a candidate is
        // ejected or ramping.
        let admitted: Vec<bool> = cands
            .pos
            .iter()
            .map(|&p| {
                let s = share(p);
                s >= 1.0 || (s > 0.0 && rng.next_f64() < s)
            })
            .collect();
        cands.keep.narrow(|| admitted.iter().copied());
        cands.compact();
    }

    /// Records that `req` was sent to `endpoint` (the primary, or the fallback actually used):
    /// learns its prefix there, counts it as in flight and dispatched since the last scrape, and
    /// returns the guard and the TTFT ticket.
    pub fn on_dispatch(
        &mut self,
        pool: &Pool,
        endpoint: EndpointId,
        req: &RequestFeatures,
        now: Duration,
    ) -> Result<Dispatch, PickError> {
        self.sync(pool);
        let pos = pool
            .position(endpoint)
            .ok_or(PickError::UnknownEndpoint(endpoint))?;
        let counters = pool
            .counters_at(pos)
            .ok_or(PickError::UnknownEndpoint(endpoint))?;
        let slot = self.slot_of_pos.get(pos).copied().unwrap_or(0);
        let params = self.policy.prefix_params();
        let hashes = &req.prompt_block_hashes;
        let matched = self.index.matched_blocks(slot, hashes) as u64;
        let cached = matched.saturating_mul(params.block_size_tokens as u64);
        let uncached = req.prompt_tokens.saturating_sub(cached);
        let features = TtftFeatures {
            queue_ahead: queue_ahead(pool, pos),
            uncached_tokens: uncached as f64,
            prefill_ahead: counters.prefill_pending_tokens() as f64,
        };
        if self.policy.uses_index() {
            if hashes.first().is_none_or(|h| !self.index.is_known(*h)) {
                self.cold.touch(slot);
            }
            let m = pool.metrics_at(pos);
            let capacity = params.capacity_for(
                m.and_then(|m| m.num_gpu_blocks),
                m.and_then(|m| m.block_size),
            );
            self.index.learn(slot, hashes, capacity);
        }
        if let Some(s) = &req.session {
            self.sessions.learn(s, endpoint);
        }
        let predicted_ttft = self
            .latency
            .predict_informed(slot, &features)
            // Refuses a negative, NaN or infinite figure.
            .and_then(|s| Duration::try_from_secs_f64(s).ok());
        Ok(Dispatch {
            guard: counters.dispatch(
                req.prompt_tokens,
                if req.buffered_response { 0 } else { uncached },
            ),
            ticket: TtftTicket {
                endpoint,
                features,
                dispatched_at: now,
                teaches: adapter_was_running(pool, pos, req),
            },
            predicted_ttft,
        })
    }

    /// Learns from the first token of a dispatched request arriving after `ttft` (unless the
    /// ticket says it cannot teach anything).
    pub fn observe_ttft(&mut self, ticket: &TtftTicket, ttft: Duration) {
        if !ticket.teaches {
            return;
        }
        if let Some(&slot) = self.slots.by_id.get(&ticket.endpoint) {
            self.latency.observe(slot, &ticket.features, ttft);
        }
    }

    /// Learns from a first token that arrived at `now` (time since the same epoch as the
    /// dispatch's `now`).
    pub fn observe_first_token(&mut self, ticket: &TtftTicket, now: Duration) {
        self.observe_ttft(ticket, now.saturating_sub(ticket.dispatched_at));
    }

    /// The prefix index's occupancy and memory per endpoint of `pool` (for metrics; walks the
    /// pool, so not for the request path).
    pub fn prefix_index_stats(&self, pool: &Pool) -> Vec<(EndpointId, IndexStats)> {
        pool.specs()
            .iter()
            .filter_map(|s| Some((s.id, self.index.stats(*self.slots.by_id.get(&s.id)?))))
            .collect()
    }

    /// How many leading blocks of `req`'s prompt the prefix index believes `endpoint` holds —
    /// the match the prefix scorers see for it. 0 for an endpoint the picker has not seen.
    /// O(log blocks); for comparing the index with the truth (tests, the simulator, debugging).
    pub fn predicted_prefix_blocks(&self, endpoint: EndpointId, req: &RequestFeatures) -> usize {
        self.slots.by_id.get(&endpoint).map_or(0, |&slot| {
            self.index.matched_blocks(slot, &req.prompt_block_hashes)
        })
    }

    /// Distinct block hashes in the prefix index.
    pub fn prefix_index_hashes(&self) -> usize {
        self.index.distinct_hashes()
    }

    /// The latency model's current estimate for `endpoint`, once it has been seen.
    pub fn latency_estimate(&self, endpoint: EndpointId) -> Option<LatencyEstimate> {
        Some(self.latency.estimate(*self.slots.by_id.get(&endpoint)?))
    }

    /// The latency model's estimate for `endpoint`: its own once seen, the fleet prior before.
    pub(crate) fn latency_estimate_or_prior(&self, endpoint: EndpointId) -> LatencyEstimate {
        self.latency.estimate(self.slot_or_none(endpoint))
    }

    /// The latency model's TTFT prediction (seconds) at `endpoint` for a request with features
    /// `f`; the fleet prior's before it has been seen.
    pub(crate) fn latency_prediction(&self, endpoint: EndpointId, f: &TtftFeatures) -> f64 {
        self.latency.predict(self.slot_or_none(endpoint), f)
    }

    /// The endpoint's slot, or one no endpoint has (whose learned state is the prior).
    fn slot_or_none(&self, endpoint: EndpointId) -> u32 {
        self.slots.by_id.get(&endpoint).copied().unwrap_or(u32::MAX)
    }

    /// Recomputes what depends on membership, when the pool's membership changed.
    fn sync(&mut self, pool: &Pool) {
        if self
            .synced
            .as_ref()
            .is_some_and(|m| Arc::ptr_eq(m, pool.membership()))
        {
            return;
        }
        let gone: Vec<(EndpointId, u32)> = self
            .slots
            .by_id
            .iter()
            .filter(|(id, _)| pool.position(**id).is_none())
            .map(|(id, s)| (*id, *s))
            .collect();
        for (id, slot) in gone {
            self.index.forget(slot);
            self.latency.forget(slot);
            self.cold.forget(slot);
            self.slots.by_id.remove(&id);
            self.slots.free.push(slot);
        }
        let specs = pool.specs();
        self.slot_of_pos = specs.iter().map(|s| self.slots.assign(s.id)).collect();
        self.pos_of_slot.clear();
        self.pos_of_slot.resize(self.slots.next as usize, u32::MAX);
        for (pos, &slot) in self.slot_of_pos.iter().enumerate() {
            if let Some(p) = self.pos_of_slot.get_mut(slot as usize) {
                *p = pos as u32;
            }
        }
        let filters: &[Filter] = match &self.policy {
            Policy::Weighted(p) => &p.filters,
            _ => &[],
        };
        self.admitted = specs
            .iter()
            .map(|s| filters.iter().all(|f| f.admits_member(s)))
            .collect();
        self.base = (0..specs.len()).filter(|&i| self.admitted[i]).collect();
        self.scratch
            .matched_by_slot
            .resize(self.slots.next as usize, 0);
        self.synced = Some(Arc::clone(pool.membership()));
    }

    /// Fills the candidate list: the request's subset (or every admitted endpoint), read once.
    fn gather(&mut self, pool: &Pool, req: &RequestFeatures) -> Result<(), PickError> {
        let fresh = match &self.policy {
            Policy::Weighted(p) => p.fresh_load,
            _ => false,
        };
        let s = &mut self.scratch;
        let members = match &req.endpoint_subset {
            Some(addrs) => {
                s.positions.clear();
                s.positions
                    .extend(addrs.iter().filter_map(|a| pool.position_of_address(a)));
                if s.positions.is_empty() {
                    return Err(PickError::SubsetNotInPool {
                        requested: addrs.len(),
                    });
                }
                s.positions.sort_unstable();
                s.positions.dedup();
                let admitted = &self.admitted;
                s.positions
                    .retain(|&p| admitted.get(p).copied().unwrap_or(false));
                Members::Only(&s.positions)
            }
            // Every endpoint admitted (no label selector removed any): copy whole columns.
            None if self.base.len() == pool.len() => Members::All,
            None => Members::Only(&self.base),
        };
        if matches!(members, Members::Only(p) if p.is_empty()) || pool.is_empty() {
            return Err(PickError::Filtered {
                filter: "label-selector-filter",
            });
        }
        s.cands.fill(pool, members, &self.slot_of_pos, fresh);
        Ok(())
    }
}

/// The pool positions of the candidates the filters have kept so far.
fn kept_positions(cands: &Candidates) -> Vec<u32> {
    cands
        .pos
        .iter()
        .enumerate()
        .filter(|&(i, _)| cands.keep.kept(i))
        .map(|(_, &p)| p)
        .collect()
}

/// Whether `req` is for the base model, or for an adapter the endpoint at `pos` reported running.
fn adapter_was_running(pool: &Pool, pos: usize, req: &RequestFeatures) -> bool {
    let Some(adapter) = req.target_adapter.as_deref() else {
        return true;
    };
    pool.metrics_at(pos)
        .and_then(|m| m.lora.as_ref())
        .is_some_and(|l| l.running.iter().any(|a| a == adapter))
}

/// Requests ahead of a new one at the endpoint at `pos`: its scraped queue plus what was
/// dispatched there since the scrape and is still in flight, never less than this gateway's
/// own requests in flight there beyond those reported running ([`LocalLoad::floored_waiting`]),
/// or, when the server does not report
/// a queue, what this gateway has in flight there.
pub(crate) fn queue_ahead(pool: &Pool, pos: usize) -> f64 {
    let s = pool.signals_at(pos);
    let local = pool.local_load_since(pos, s.mark);
    if s.waiting.is_nan() {
        local.in_flight_requests as f64
    } else {
        local.floored_waiting(s.waiting, s.running)
    }
}
