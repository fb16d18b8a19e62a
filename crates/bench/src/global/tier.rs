//! The global tier in virtual time: one tier replica per caller region, each with its own view
//! of the members (its own status pulls, in-flight credit, ejections and ramp), in front of
//! one gateway per cluster ([`crate::gateway::Gateway`] over that cluster's replicas).
//!
//! The decisions are the live tier's own (`infergate-global-picker`): a member's freshness on
//! its pulled status, ejection on failed attempts, the slow-start ramp and, for the `global`
//! policy, the ranking. The baselines share everything but the ranking — the same pulls, the
//! same staleness, the same retry on the next member — so a comparison is of the choice alone.
//!
//! A request's way: the caller's tier replica orders the members; an attempt at a member that
//! is cut off waits the connect timeout and moves to the next (up to `maxAttempts`); an
//! attempt at a member that is up reaches it after half the round trip between the regions,
//! meets that cluster's gateway (flow control, the picker) and its answer comes back after the
//! other half. A pull of a cut-off member times out; of a member that is up, it reads the
//! cluster's gateway as `/status/member` would (ready endpoints, KV headroom, queue, flow
//! control's saturation) with a sequence that advances, since its scrapes run every 50 ms.
//! Not modelled: a pull's own transit (at most one round trip, under the pull interval's
//! jitter) and the members' recent error rate (0: no member of these runs answers 5xx).

use infergate_config::global::ResolvedGlobal;
use infergate_global_picker::{
    rank, room_to_eject, Availability, Member, Refusal, Request, TierSettings,
};
use infergate_picker::AttemptOutcome;
use infergate_rng::SplitMix64;
use std::time::Duration;

/// How the tier orders the members for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlobalPolicy {
    /// infergate's global tier as it ships: the AWS-shaped score with cost fill and spill.
    Global,
    /// The same tier with no member's cost configured: the order by score alone (the
    /// ablation that says what the cost fill costs in latency).
    GlobalWithoutCost,
    /// Each tier replica rotates over the members that are up, wherever they are, each in
    /// proportion to its capacity — its ready endpoints (from its status) × its `weight` — by
    /// smooth weighted round-robin, as nginx and Envoy do it.
    RoundRobin,
    /// The members in the caller's nearest region that is up (geo-DNS with health checks),
    /// rotating within it by weight.
    NearestRegion,
}

impl GlobalPolicy {
    /// Every policy, the product first.
    pub const ALL: [GlobalPolicy; 4] = [
        GlobalPolicy::Global,
        GlobalPolicy::GlobalWithoutCost,
        GlobalPolicy::RoundRobin,
        GlobalPolicy::NearestRegion,
    ];

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            GlobalPolicy::Global => "infergate-global",
            GlobalPolicy::GlobalWithoutCost => "infergate-global-without-cost",
            GlobalPolicy::RoundRobin => "round-robin-clusters",
            GlobalPolicy::NearestRegion => "nearest-region",
        }
    }

    /// The policy named `name`.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// One tier replica: the callers of one region reach it.
pub(crate) struct Front {
    pub(crate) region: String,
    pub(crate) members: Vec<Member>,
    /// The baselines' smooth weighted round-robin: each member's current weight.
    current: Vec<f64>,
    rng: SplitMix64,
}

pub(crate) struct ClusterState {
    pub(crate) region: String,
    pub(crate) name: String,
    /// Cut off now.
    pub(crate) down: bool,
    /// Its control plane's refreshes, as its status document counts them.
    pub(crate) sequence: u64,
}

/// What becomes of an attempt.
pub(crate) enum Next {
    Member(usize),
    Refused(u16),
    Failed,
}

/// The tier's state in a run.
pub(crate) struct TierSim {
    pub(crate) settings: TierSettings,
    policy: GlobalPolicy,
    pub(crate) model: String,
    pub(crate) pull_interval: Duration,
    pub(crate) pull_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    max_attempts: u32,
    pub(crate) clusters: Vec<ClusterState>,
    pub(crate) fronts: Vec<Front>,
    /// The faulty cluster and its window, if the run has one.
    pub(crate) fault: Option<(usize, Duration, Duration)>,
    /// Per request: its caller's tier replica.
    pub(crate) caller: Vec<usize>,
    /// Per request: when the caller sent it.
    pub caller_sent: Vec<Duration>,
    /// Per request: the clusters tried, as bits.
    tried: Vec<u64>,
    /// Per request: the attempt in flight (member, status generation).
    pub(crate) flight: Vec<Option<(usize, u64)>>,
    /// Per request: the cluster that took it.
    pub served_by: Vec<Option<usize>>,
    /// Attempts moved to another member after one failed.
    pub failovers: u64,
    /// The last attempt sent to the faulty cluster while it was cut off.
    pub last_to_faulty: Option<Duration>,
    /// Requests lost at the cut-off cluster: held there when it was cut, or reaching it after.
    pub lost_in_flight: u64,
    /// Requests that ran out of attempts, every one of them timed out.
    pub out_of_attempts: u64,
    pub(crate) pull_rng: SplitMix64,
}

/// Where a run's tier starts.
pub(crate) struct TierSetup<'a> {
    pub config: &'a ResolvedGlobal,
    pub policy: GlobalPolicy,
    pub model: String,
    /// Each request's caller region, as an index into `callers`.
    pub caller: Vec<usize>,
    pub callers: Vec<String>,
    /// The faulty cluster and its window.
    pub fault: Option<(usize, Duration, Duration)>,
    pub seed: u64,
}

impl TierSim {
    pub fn new(setup: TierSetup<'_>) -> Self {
        let g = setup.config;
        let fronts = setup
            .callers
            .iter()
            .enumerate()
            .map(|(f, region)| Front {
                region: region.clone(),
                members: g.members.iter().map(Member::from_resolved).collect(),
                current: vec![0.0; g.members.len()],
                rng: SplitMix64::new(setup.seed ^ 0x6100_0000 ^ f as u64),
            })
            .collect();
        let n = setup.caller.len();
        TierSim {
            settings: TierSettings::from_resolved(g),
            policy: setup.policy,
            model: setup.model,
            pull_interval: g.status.interval.value,
            pull_timeout: g.status.timeout.value,
            connect_timeout: g.routing.connect_timeout.value,
            max_attempts: g.routing.max_attempts.value,
            clusters: g
                .members
                .iter()
                .map(|m| ClusterState {
                    region: m.region.clone(),
                    name: m.name.clone(),
                    down: false,
                    sequence: 0,
                })
                .collect(),
            fronts,
            fault: setup.fault,
            caller: setup.caller,
            caller_sent: vec![Duration::ZERO; n],
            tried: vec![0; n],
            flight: vec![None; n],
            served_by: vec![None; n],
            failovers: 0,
            last_to_faulty: None,
            lost_in_flight: 0,
            out_of_attempts: 0,
            pull_rng: SplitMix64::new(setup.seed ^ 0x9011_0000),
        }
    }

    /// Half the round trip between the regions of tier replica `front` and member `member`.
    pub fn one_way(&self, front: usize, member: usize) -> Duration {
        let (a, b) = (&self.fronts[front].region, &self.clusters[member].region);
        let rtt = self
            .settings
            .region_latencies
            .between(a, b)
            .or_else(|| self.settings.region_latencies.farthest())
            .unwrap_or(Duration::ZERO);
        rtt / 2
    }

    /// Request `i`'s caller's tier replica.
    pub fn front_of(&self, i: usize) -> usize {
        self.caller[i]
    }

    /// Member `m`'s region.
    pub fn region_of(&self, m: usize) -> &str {
        &self.clusters[m].region
    }

    /// Tier replica `f`'s region.
    pub fn front_region(&self, f: usize) -> &str {
        &self.fronts[f].region
    }

    /// The member names, in order.
    pub fn names(&self) -> Vec<String> {
        self.clusters.iter().map(|c| c.name.clone()).collect()
    }

    /// The members to try for a request of tier replica `f`, best first.
    fn order(&mut self, f: usize, now: Duration) -> Result<Vec<usize>, Refusal> {
        let front = &mut self.fronts[f];
        if matches!(
            self.policy,
            GlobalPolicy::Global | GlobalPolicy::GlobalWithoutCost
        ) {
            let req = Request {
                model: &self.model,
                caller_region: Some(&front.region),
            };
            return rank(&front.members, req, now, &self.settings, &mut front.rng)
                .map(|ranked| ranked.into_iter().map(|r| r.member).collect());
        }
        let up: Vec<usize> = (0..front.members.len())
            .filter(|&m| front.members[m].state.availability(now) == Availability::Available)
            .collect();
        if up.is_empty() {
            return Err(Refusal::NoneAvailable);
        }
        // Smooth weighted round-robin over those that are up, by capacity: the first is the
        // pick, the rest follow in the order they would be picked next.
        let capacity = |m: &Member| {
            let ready = m
                .state
                .status()
                .and_then(|st| st.pool_for(&self.model))
                .map_or(1, |p| p.ready_endpoints.max(1));
            m.weight * f64::from(ready)
        };
        let total: f64 = up.iter().map(|&m| capacity(&front.members[m])).sum();
        for &m in &up {
            front.current[m] += capacity(&front.members[m]);
        }
        let mut order = up.clone();
        order.sort_by(|&a, &b| {
            front.current[b]
                .total_cmp(&front.current[a])
                .then(a.cmp(&b))
        });
        front.current[order[0]] -= total;
        if self.policy == GlobalPolicy::NearestRegion {
            let near = |m: usize| {
                let r = &front.members[m].region;
                self.settings
                    .region_latencies
                    .between(&front.region, r)
                    .unwrap_or(Duration::MAX)
            };
            // Stable: the rotation orders members of one region.
            order.sort_by_key(|&m| near(m));
        }
        Ok(order)
    }

    /// The next member for request `i` at `now`, its attempt counted as sent.
    pub(crate) fn next(&mut self, i: usize, now: Duration) -> Next {
        let tried = self.tried[i];
        if tried.count_ones() >= self.max_attempts {
            return Next::Failed;
        }
        let f = self.caller[i];
        let order = match self.order(f, now) {
            Ok(order) => order,
            // Saturated, before or after a failed attempt: refused, as the live tier does (the
            // request has not started).
            Err(Refusal::AllSaturated { .. }) => return Next::Refused(429),
            Err(refusal) if tried == 0 => {
                return Next::Refused(match refusal {
                    Refusal::UnknownModel => 404,
                    _ => 503,
                })
            }
            Err(_) => return Next::Failed,
        };
        let Some(m) = order.into_iter().find(|&m| tried & (1 << m) == 0) else {
            return Next::Failed;
        };
        if tried != 0 {
            self.failovers += 1;
        }
        self.tried[i] |= 1 << m;
        let generation = self.fronts[f].members[m].state.on_sent();
        self.flight[i] = Some((m, generation));
        if let Some((faulty, from, until)) = self.fault {
            if m == faulty && now >= from && now < until {
                self.last_to_faulty = Some(now);
            }
        }
        Next::Member(m)
    }

    /// Request `i`'s attempt ended; `outcome`, if given, is recorded for outlier detection.
    pub(crate) fn end_attempt(&mut self, i: usize, now: Duration, outcome: Option<AttemptOutcome>) {
        let f = self.caller[i];
        let Some((m, generation)) = self.flight[i].take() else {
            return;
        };
        let members = &mut self.fronts[f].members;
        let room = room_to_eject(members, now);
        let member = &mut members[m];
        member.state.on_done(generation);
        if let Some(outcome) = outcome {
            member
                .state
                .on_attempt(outcome, now, &self.settings.outlier, || room);
        }
    }

    /// Member `m`'s answer reached request `i`'s tier replica: it is in flight again, under
    /// the credit it was sent with.
    pub(crate) fn answered(&mut self, i: usize, m: usize, now: Duration) {
        let f = self.caller[i];
        let members = &mut self.fronts[f].members;
        let room = room_to_eject(members, now);
        members[m].state.on_attempt(
            AttemptOutcome::Answered,
            now,
            &self.settings.outlier,
            || room,
        );
    }
}
