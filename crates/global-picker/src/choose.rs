//! The choice of a member for one request: which members serve its model, which of them are
//! candidates, how each scores, and the order they are tried in.
//!
//! The score has AWS's shape: `kvHeadroom`, `queueDepth`, `regionProximity` and `errorRate`
//! terms, each in [0, 1], weighted by weights summing to 1. The order adds cost: members with
//! headroom come first, cheapest first and by score within a price; then the members without
//! headroom, least loaded first — so traffic fills the cheapest members while they have room
//! and spills to dearer ones before any member's own queue grows.
//!
//! A member has headroom while its status says its saturation is below `spillAt` with at most
//! one request waiting per ready endpoint, and the tier has not sent it more since that status
//! than its allowance (`send_allowance`: a quarter more than in the interval before, paced
//! over the interval). Its load is its saturation credited with what the tier sent since the
//! status and still waits for. A member whose status says saturated (1 or more) is tried only
//! after every other; one with no ready endpoint or a 429 whose `Retry-After` has not passed
//! is not tried; when every candidate is saturated the request is refused with 429. Each of
//! these rules answers a loss `infergate bench --global` showed (see `docs/global.md`).
//!
//! A returning member in its slow-start ramp keeps its place first only with probability equal
//! to its ramp weight; otherwise it yields first place to the next, so its share of the traffic
//! it would win grows with the ramp.

use std::time::Duration;

use infergate_config::gateway::defaults::SATURATION_QUEUE_DEPTH;
use infergate_config::global::{MemberCost, ResolvedMember};
use infergate_rng::SplitMix64;

use crate::member::{Availability, MemberState};
use crate::settings::TierSettings;

/// How long a client is asked to wait when every member is saturated and none said how long.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// A member as the choice sees it: its fixed facts and its state.
#[derive(Debug)]
pub struct Member {
    /// Its name.
    pub name: String,
    /// Its region.
    pub region: String,
    /// Its cost rank (price or tier; 0 for all when no cost is configured).
    pub cost_rank: f64,
    /// One endpoint's capacity relative to other members'. Invariant: positive.
    pub weight: f64,
    /// What the tier knows of it.
    pub state: MemberState,
}

impl Member {
    /// A member as the config resolved it, nothing known of it yet.
    pub fn from_resolved(m: &ResolvedMember) -> Self {
        Member {
            name: m.name.clone(),
            region: m.region.clone(),
            cost_rank: m.cost.map_or(0.0, MemberCost::rank),
            weight: m.weight.value,
            state: MemberState::new(),
        }
    }
}

/// One request as the choice sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The body's `model`.
    pub model: &'a str,
    /// The caller's region, from the region header.
    pub caller_region: Option<&'a str>,
}

/// Why no member is tried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Refusal {
    /// No member's status lists the model (404).
    UnknownModel,
    /// Members serve it, but none is a candidate now: stale, ejected or not yet pulled (503,
    /// not dispatched).
    NoneAvailable,
    /// Every candidate is saturated (429 with `Retry-After`).
    AllSaturated {
        /// When the first of them expects room.
        retry_after: Duration,
    },
}

/// A member's score and its parts, each in [0, 1] before weighting.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ScoreParts {
    /// Free KV cache.
    pub kv_headroom: f64,
    /// 1 for an empty queue, falling linearly to 0 at the member's own saturation threshold
    /// (its default queue threshold per ready endpoint), the queue credited with what is in
    /// flight since the status and divided by the member's weight.
    pub queue_depth: f64,
    /// Closeness to the caller.
    pub region_proximity: f64,
    /// 1 − recent error rate.
    pub error_rate: f64,
    /// The weighted sum.
    pub total: f64,
}

/// A member in the order it is tried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranked {
    /// Its index in the table.
    pub member: usize,
    /// Its score.
    pub score: ScoreParts,
    /// Whether it had headroom: its status's saturation below `spillAt`, no more than one
    /// request waiting per ready endpoint, and the tier's sends to it within their allowance.
    pub headroom: bool,
    /// Its saturation credited with what the tier sent it since its status and still waits
    /// for, each as one more waiting request: the order of members without headroom.
    pub load: f64,
    /// Its slow-start weight.
    pub ramp: f64,
    /// Its last status pull missed.
    pub suspect: bool,
}

/// The saturation one more request adds to a pool of `ready` endpoints, read as one more
/// waiting request against the member's default queue threshold: the most any request adds.
/// The status cannot show what was sent since it was read; without a credit every request of
/// the next second would go to the member that looked emptiest.
fn credit_per_request(ready: u32) -> f64 {
    1.0 / (f64::from(SATURATION_QUEUE_DEPTH) * f64::from(ready.max(1)))
}

/// How many requests the tier may have sent a member with headroom `elapsed` after its status,
/// having sent it `before` between the status before and this one: a quarter more than that,
/// at least two per ready endpoint, spread evenly over the status interval, plus a burst of two
/// per ready endpoint.
///
/// A status is up to a second old, and what one more request adds to a model server's
/// saturation depends on how fast requests arrive (each prefill slows every decode step), not
/// only on how many it holds: with no bound a cheap member took a second's traffic before its
/// next status said it was full, and with a bound per interval but not spread over it, it took
/// its share in a burst at the start of each interval (both found by `infergate bench
/// --global`). Growing by a quarter per status and pacing it lets the next status say where
/// the member's room ends, and interleaves its requests with the other members'.
fn send_allowance(before: u32, ready: u32, elapsed: Duration, interval: Duration) -> f64 {
    let floor = 2.0 * f64::from(ready.max(1));
    let per_interval = (f64::from(before) * 1.25).max(floor);
    let share = if interval.is_zero() {
        1.0
    } else {
        (elapsed.as_secs_f64() / interval.as_secs_f64()).min(1.0)
    };
    // The floor again as a burst: requests that arrive together (clients in step, a retry
    // wave) are not spilled for coming a moment ahead of the pace.
    per_interval * share + floor
}

/// The members to try for `req` at `now`, best first; at least one, or the reason for none.
pub fn rank(
    members: &[Member],
    req: Request<'_>,
    now: Duration,
    s: &TierSettings,
    rng: &mut SplitMix64,
) -> Result<Vec<Ranked>, Refusal> {
    let serving: Vec<usize> = members
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            m.state
                .status()
                .is_some_and(|st| st.pool_for(req.model).is_some())
        })
        .map(|(i, _)| i)
        .collect();
    if serving.is_empty() {
        let none_known = members
            .iter()
            .all(|m| m.state.availability(now) == Availability::Unknown);
        return Err(if none_known {
            Refusal::NoneAvailable
        } else {
            Refusal::UnknownModel
        });
    }
    struct Candidate {
        member: usize,
        queue: f64,
        saturation: f64,
        load: f64,
        waiting_per_endpoint: f64,
        growth_left: bool,
        kv_headroom: f64,
        error_rate: f64,
        ramp: f64,
        suspect: bool,
    }
    let mut candidates = Vec::new();
    let mut retry_after: Option<Duration> = None;
    let mut any_available = false;
    for &i in &serving {
        let m = &members[i];
        if m.state.availability(now) != Availability::Available {
            continue;
        }
        let Some(pool) = m.state.status().and_then(|st| st.pool_for(req.model)) else {
            continue;
        };
        any_available = true;
        let sent = f64::from(m.state.in_flight_since_status());
        let (sent_now, sent_before) = m.state.sends();
        let elapsed = m.state.status_age(now).unwrap_or_default();
        let growth_left = f64::from(sent_now)
            < send_allowance(
                sent_before,
                pool.ready_endpoints,
                elapsed,
                s.status_interval,
            );
        let load = pool.saturation + sent * credit_per_request(pool.ready_endpoints);
        if let Some(until) = m.state.throttled_until(now) {
            let wait = until.saturating_sub(now);
            retry_after = Some(retry_after.map_or(wait, |r| r.min(wait)));
            continue;
        }
        if pool.ready_endpoints == 0 {
            continue;
        }
        // Measured against the member's own threshold, not min-max over the candidates: with
        // min-max, two waiting requests against none would weigh as much as two hundred, and
        // proximity would lose to any difference at all.
        let threshold = f64::from(SATURATION_QUEUE_DEPTH) * f64::from(pool.ready_endpoints.max(1));
        candidates.push(Candidate {
            member: i,
            queue: (pool.queue_depth as f64 + sent) / m.weight / threshold,
            saturation: pool.saturation,
            load,
            waiting_per_endpoint: pool.queue_depth as f64 / f64::from(pool.ready_endpoints.max(1)),
            growth_left,
            kv_headroom: pool.kv_headroom.clamp(0.0, 1.0),
            error_rate: pool.error_rate.clamp(0.0, 1.0),
            ramp: m.state.ramp_weight(now, s),
            suspect: m.state.is_suspect(),
        });
    }
    if !any_available {
        return Err(Refusal::NoneAvailable);
    }
    // A saturated member stays a candidate, last by its load, while any other is not: left out
    // on a status up to a second old, it took nothing until its next status and every other
    // member took its share, and at full load members went on and off in turn (found by the
    // bench). Only when all are saturated is the request refused.
    if candidates.iter().all(|c| c.saturation >= 1.0) {
        return Err(Refusal::AllSaturated {
            retry_after: retry_after.unwrap_or(DEFAULT_RETRY_AFTER),
        });
    }
    let w = s.weights;
    let mut ranked: Vec<Ranked> = candidates
        .iter()
        .map(|c| {
            let queue_depth = 1.0 - c.queue.clamp(0.0, 1.0);
            let region_proximity = s.proximity(req.caller_region, &members[c.member].region);
            let kv_headroom = c.kv_headroom;
            let error_rate = 1.0 - c.error_rate;
            let total = w.kv_headroom * kv_headroom
                + w.queue_depth * queue_depth
                + w.region_proximity * region_proximity
                + w.error_rate * error_rate;
            Ranked {
                member: c.member,
                score: ScoreParts {
                    kv_headroom,
                    queue_depth,
                    region_proximity,
                    error_rate,
                    total,
                },
                headroom: c.saturation < s.spill_at
                    && c.waiting_per_endpoint <= 1.0
                    && c.growth_left,
                load: c.load,
                ramp: c.ramp,
                suspect: c.suspect,
            }
        })
        .collect();
    ranked.sort_by(|a, b| {
        // Members whose pulls answer first; then headroom; among those, cheapest first; then
        // the better score; then the name, so equal members are ordered the same way every time.
        a.suspect
            .cmp(&b.suspect)
            .then_with(|| b.headroom.cmp(&a.headroom))
            .then_with(|| {
                if a.headroom && b.headroom {
                    members[a.member]
                        .cost_rank
                        .total_cmp(&members[b.member].cost_rank)
                } else {
                    // Without headroom, the least loaded for its size first: the score's parts
                    // stop falling at their floor, so by score alone one member would take
                    // every request once its queue term is spent (found by the bench).
                    a.load.total_cmp(&b.load)
                }
            })
            .then_with(|| b.score.total.total_cmp(&a.score.total))
            .then_with(|| members[a.member].name.cmp(&members[b.member].name))
    });
    if ranked.len() > 1 && ranked[0].ramp < 1.0 && rng.next_f64() >= ranked[0].ramp {
        ranked.swap(0, 1);
    }
    Ok(ranked)
}

/// Whether one more member may be ejected: never the last candidate, since with every member
/// out there is nowhere to send and a member that answers some requests is better than none.
pub fn room_to_eject(members: &[Member], now: Duration) -> bool {
    let available = members
        .iter()
        .filter(|m| m.state.availability(now) == Availability::Available)
        .count();
    available > 1
}
