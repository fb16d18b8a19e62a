//! Validation and resolution of a `GlobalGatewayConfig`: every rule checked, every error named
//! by its field, every default applied and marked.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use super::{defaults, GlobalGatewayConfig, MemberSpec, WeightsSpec, GLOBAL_KIND};
use crate::gateway::{
    check_identity_and_limits, is_dns_label, EndpointAddress, GatewayConfigError, GatewayDuration,
    JwtProvider, ResolvedRateLimits, ResolvedTenancy, Setting, API_VERSION,
};

/// How close weights must sum to 1 (AWS's tolerance).
const WEIGHT_SUM_TOLERANCE: f64 = 0.001;

/// A member's cost, as written: every member uses the same kind, or none does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MemberCost {
    /// Price per GPU-hour.
    PerGpuHour(f64),
    /// A tier, 0 the cheapest.
    Tier(u32),
}

impl MemberCost {
    /// The number the tier orders by: the price, or the tier.
    pub fn rank(self) -> f64 {
        match self {
            MemberCost::PerGpuHour(p) => p,
            MemberCost::Tier(t) => f64::from(t),
        }
    }
}

/// A member endpoint: where to connect, and whether over TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberEndpoint {
    /// `host:port`.
    pub authority: String,
    /// The host alone (the name a TLS certificate is checked for by default).
    pub host: String,
    /// `https`.
    pub tls: bool,
}

/// How a member's certificates are checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResolvedMemberTls {
    /// CA certificates to trust instead of the platform's.
    pub ca_file: Option<String>,
    /// The name certificates must carry, instead of the URL's host.
    pub server_name: Option<String>,
}

/// One member, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedMember {
    /// Its name.
    pub name: String,
    /// Its data plane.
    pub data: MemberEndpoint,
    /// Its admin listener.
    pub admin: MemberEndpoint,
    /// How its certificates are checked (read only for an `https` endpoint).
    pub tls: ResolvedMemberTls,
    /// Its region.
    pub region: String,
    /// Its zone.
    pub zone: Option<String>,
    /// Its cost; `None` when no member has one.
    pub cost: Option<MemberCost>,
    /// One endpoint's capacity relative to other members' (see `MemberSpec::weight`).
    pub weight: Setting<f64>,
    /// Where its bearer token is read from.
    pub bearer_token_file: Option<String>,
}

/// The score's weights. Invariant: each in [0, 1], summing to 1 ± 0.001.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreWeights {
    /// Free KV cache.
    pub kv_headroom: f64,
    /// Requests waiting.
    pub queue_depth: f64,
    /// Closeness to the caller.
    pub region_proximity: f64,
    /// Recent errors.
    pub error_rate: f64,
}

/// `spec.status`, resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResolvedStatusPull {
    /// Between pulls. Invariant: above `timeout`.
    pub interval: Setting<Duration>,
    /// One pull's deadline.
    pub timeout: Setting<Duration>,
    /// Misses before stale. Invariant: at least 1.
    pub misses_before_stale: Setting<u32>,
    /// Good pulls before a stale member returns. Invariant: at least 1.
    pub pulls_before_return: Setting<u32>,
}

/// `spec.routing`, resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResolvedRouting {
    /// The score's weights.
    pub weights: Setting<ScoreWeights>,
    /// Saturation from which a member has no headroom left. Invariant: in (0, 1].
    pub spill_at: Setting<f64>,
    /// Members tried per request. Invariant: at least 1.
    pub max_attempts: Setting<u32>,
    /// Connect deadline. Invariant: positive.
    pub connect_timeout: Setting<Duration>,
    /// Response-headers deadline. Invariant: positive.
    pub first_byte_timeout: Setting<Duration>,
}

/// `spec.outlierDetection`, resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResolvedOutlier {
    /// Failures in a row that eject; 0 off.
    pub consecutive_failures: Setting<u32>,
    /// First ejection.
    pub base_ejection_time: Setting<Duration>,
    /// Longest ejection. Invariant: at least the base.
    pub max_ejection_time: Setting<Duration>,
}

/// `spec.slowStart`, resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResolvedSlowStart {
    /// The ramp's length; zero: none.
    pub window: Setting<Duration>,
    /// Its curve. Invariant: positive and finite.
    pub aggression: Setting<f64>,
    /// The least weight, as a fraction in (0, 1].
    pub min_weight: Setting<f64>,
}

/// A `GlobalGatewayConfig` with every rule checked and every default applied.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedGlobal {
    /// `metadata.name`.
    pub name: Option<String>,
    /// Data-plane listener.
    pub listen: Setting<SocketAddr>,
    /// Admin listener.
    pub admin_listen: Setting<SocketAddr>,
    /// This replica's region, if named.
    pub region: Option<String>,
    /// The caller's-region header, lower case.
    pub region_header: Setting<String>,
    /// Round trips between pairs of regions.
    pub region_latencies: RegionLatencies,
    /// The members, in the file's order. Invariant: at least one; names unique.
    pub members: Vec<ResolvedMember>,
    /// Status pulls.
    pub status: ResolvedStatusPull,
    /// Member choice.
    pub routing: ResolvedRouting,
    /// Passive outlier detection.
    pub outlier: ResolvedOutlier,
    /// The return ramp.
    pub slow_start: ResolvedSlowStart,
    /// JWT authentication, when on.
    pub auth: Option<JwtProvider>,
    /// Where tenants and bands come from.
    pub tenancy: ResolvedTenancy,
    /// Per-tenant limits, when set.
    pub rate_limits: Option<ResolvedRateLimits>,
}

/// `spec.regionLatencies`: round trips between pairs of regions, either order.
///
/// Invariant: each pair is stored once, the smaller name first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegionLatencies(BTreeMap<(String, String), Duration>);

impl RegionLatencies {
    fn pair(a: &str, b: &str) -> (String, String) {
        if a <= b {
            (a.to_string(), b.to_string())
        } else {
            (b.to_string(), a.to_string())
        }
    }

    /// Records the round trip between `a` and `b`; false when the pair was already there.
    fn insert(&mut self, a: &str, b: &str, latency: Duration) -> bool {
        self.0.insert(Self::pair(a, b), latency).is_none()
    }

    /// The round trip between two regions, if configured (zero within one region).
    pub fn between(&self, a: &str, b: &str) -> Option<Duration> {
        if a == b {
            return Some(Duration::ZERO);
        }
        self.0.get(&Self::pair(a, b)).copied()
    }

    /// The largest round trip configured.
    pub fn farthest(&self) -> Option<Duration> {
        self.0.values().max().copied()
    }

    /// Every pair and its round trip, the smaller name first.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, Duration)> {
        self.0
            .iter()
            .map(|((a, b), l)| (a.as_str(), b.as_str(), *l))
    }
}

/// Collects every rule broken, in document order.
#[derive(Default)]
struct Problems(Vec<GatewayConfigError>);

impl Problems {
    fn add(&mut self, field: impl Into<String>, reason: impl Into<String>) {
        self.0.push(GatewayConfigError::Invalid {
            field: field.into(),
            reason: reason.into(),
        });
    }
}

fn listener(
    written: Option<&str>,
    default: &str,
    field: &str,
    p: &mut Problems,
) -> Setting<SocketAddr> {
    let fallback = SocketAddr::from(([0, 0, 0, 0], 0));
    match written {
        None => Setting::default_value(default.parse().unwrap_or(fallback)),
        Some(text) => match text.parse::<SocketAddr>() {
            Ok(a) => Setting::set(a),
            Err(_) => {
                p.add(
                    field,
                    format!("`{text}` is not an IP address and port, like 0.0.0.0:8080"),
                );
                Setting::set(fallback)
            }
        },
    }
}

/// `http[s]://host[:port]`, no path (port 80 or 443 by default).
fn member_url(text: &str) -> Result<MemberEndpoint, String> {
    let (rest, tls) = if let Some(r) = text.strip_prefix("https://") {
        (r, true)
    } else if let Some(r) = text.strip_prefix("http://") {
        (r, false)
    } else {
        return Err(format!("`{text}` is not an http:// or https:// URL"));
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains('/') || authority.contains('?') || authority.contains('@') {
        return Err(format!(
            "`{text}`: only a scheme, a host and a port (no path, query or user)"
        ));
    }
    let address: EndpointAddress = authority.parse().map_err(|e: String| e)?;
    let host = match &address.host {
        crate::gateway::Host::Ip(ip) => ip.to_string(),
        crate::gateway::Host::Name(n) => n.clone(),
    };
    Ok(MemberEndpoint {
        authority: address.with_default_port(if tls { 443 } else { 80 }),
        host,
        tls,
    })
}

fn duration(
    written: Option<GatewayDuration>,
    default: Duration,
    field: &str,
    positive: bool,
    p: &mut Problems,
) -> Setting<Duration> {
    let s = Setting::or(written.map(GatewayDuration::get), default);
    if positive && s.value.is_zero() {
        p.add(field, "must be above 0s");
    }
    s
}

fn weights(w: Option<&WeightsSpec>, p: &mut Problems) -> Setting<ScoreWeights> {
    let default = ScoreWeights {
        kv_headroom: defaults::WEIGHT_KV_HEADROOM,
        queue_depth: defaults::WEIGHT_QUEUE_DEPTH,
        region_proximity: defaults::WEIGHT_REGION_PROXIMITY,
        error_rate: defaults::WEIGHT_ERROR_RATE,
    };
    let Some(w) = w else {
        return Setting::default_value(default);
    };
    let named = [
        ("kvHeadroom", w.kv_headroom),
        ("queueDepth", w.queue_depth),
        ("regionProximity", w.region_proximity),
        ("errorRate", w.error_rate),
    ];
    let missing: Vec<&str> = named
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(n, _)| *n)
        .collect();
    if !missing.is_empty() {
        p.add(
            "spec.routing.weights",
            format!(
                "give all four weights or none; missing {}",
                missing.join(", ")
            ),
        );
        return Setting::set(default);
    }
    let mut sum = 0.0;
    for (n, v) in named {
        let v = v.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&v) {
            p.add(
                format!("spec.routing.weights.{n}"),
                format!("{v} is not in [0, 1]"),
            );
        }
        sum += v;
    }
    if (sum - 1.0).abs() > WEIGHT_SUM_TOLERANCE {
        p.add(
            "spec.routing.weights",
            format!("the four weights sum to {sum}, not 1 (± {WEIGHT_SUM_TOLERANCE})"),
        );
    }
    Setting::set(ScoreWeights {
        kv_headroom: w.kv_headroom.unwrap_or(0.0),
        queue_depth: w.queue_depth.unwrap_or(0.0),
        region_proximity: w.region_proximity.unwrap_or(0.0),
        error_rate: w.error_rate.unwrap_or(0.0),
    })
}

fn member(i: usize, m: &MemberSpec, cost_kind: Option<bool>, p: &mut Problems) -> ResolvedMember {
    let at = format!("spec.members[{i}]");
    if !is_dns_label(&m.name) {
        p.add(
            format!("{at}.name"),
            format!(
                "`{}` is not a DNS label (lower-case letters, digits and `-`, at most 63)",
                m.name
            ),
        );
    }
    let unusable = || MemberEndpoint {
        authority: String::new(),
        host: String::new(),
        tls: false,
    };
    let data = member_url(&m.url).unwrap_or_else(|e| {
        p.add(format!("{at}.url"), e);
        unusable()
    });
    let admin = member_url(&m.admin_url).unwrap_or_else(|e| {
        p.add(format!("{at}.adminUrl"), e);
        unusable()
    });
    let tls = match &m.tls {
        None => ResolvedMemberTls::default(),
        Some(t) => {
            if !data.tls && !admin.tls {
                p.add(
                    format!("{at}.tls"),
                    "neither url nor adminUrl is https://: there is no TLS to configure",
                );
            }
            if t.ca_file.as_deref().is_some_and(str::is_empty) {
                p.add(format!("{at}.tls.caFile"), "must name a file");
            }
            if let Some(name) = &t.server_name {
                if name.parse::<std::net::IpAddr>().is_err()
                    && !crate::gateway::is_dns_subdomain(name)
                {
                    p.add(
                        format!("{at}.tls.serverName"),
                        format!("`{name}` is neither a DNS name nor an IP address"),
                    );
                }
            }
            ResolvedMemberTls {
                ca_file: t.ca_file.clone(),
                server_name: t.server_name.clone(),
            }
        }
    };
    if m.region.trim().is_empty() {
        p.add(format!("{at}.region"), "must name a region");
    }
    let cost = match m.cost {
        None => {
            if cost_kind.is_some() {
                p.add(
                    format!("{at}.cost"),
                    "another member has a cost: give every member one, or none",
                );
            }
            None
        }
        Some(c) => match (c.per_gpu_hour, c.tier) {
            (Some(price), None) => {
                if !price.is_finite() || price < 0.0 {
                    p.add(
                        format!("{at}.cost.perGpuHour"),
                        format!("{price} is not a price (finite, 0 or more)"),
                    );
                }
                if cost_kind == Some(false) {
                    p.add(
                        format!("{at}.cost"),
                        "members mix perGpuHour and tier: use one kind for all",
                    );
                }
                Some(MemberCost::PerGpuHour(price))
            }
            (None, Some(tier)) => {
                if cost_kind == Some(true) {
                    p.add(
                        format!("{at}.cost"),
                        "members mix perGpuHour and tier: use one kind for all",
                    );
                }
                Some(MemberCost::Tier(tier))
            }
            _ => {
                p.add(
                    format!("{at}.cost"),
                    "give exactly one of perGpuHour and tier",
                );
                None
            }
        },
    };
    let weight = Setting::or(m.weight, 1.0);
    if !(weight.value.is_finite() && weight.value > 0.0) {
        p.add(
            format!("{at}.weight"),
            format!("{} is not a positive number", weight.value),
        );
    }
    if m.bearer_token_file.as_deref().is_some_and(str::is_empty) {
        p.add(format!("{at}.bearerTokenFile"), "must name a file");
    }
    ResolvedMember {
        name: m.name.clone(),
        data,
        admin,
        tls,
        region: m.region.clone(),
        zone: m.zone.clone(),
        cost,
        weight,
        bearer_token_file: m.bearer_token_file.clone(),
    }
}

/// Checks every rule of `c` and applies every default.
pub(super) fn resolve(c: &GlobalGatewayConfig) -> Result<ResolvedGlobal, GatewayConfigError> {
    let mut p = Problems::default();
    if c.api_version != API_VERSION {
        p.add(
            "apiVersion",
            format!("`{}`: must be {API_VERSION}", c.api_version),
        );
    }
    if c.kind != GLOBAL_KIND {
        p.add("kind", format!("`{}`: must be {GLOBAL_KIND}", c.kind));
    }
    let s = &c.spec;
    let listen = listener(s.listen.as_deref(), defaults::LISTEN, "spec.listen", &mut p);
    let admin_listen = listener(
        s.admin_listen.as_deref(),
        defaults::ADMIN_LISTEN,
        "spec.adminListen",
        &mut p,
    );
    if s.region.as_deref().is_some_and(|r| r.trim().is_empty()) {
        p.add("spec.region", "must name a region when given");
    }
    let region_header = Setting::or(
        s.region_header.as_ref().map(|h| h.to_ascii_lowercase()),
        defaults::REGION_HEADER.to_string(),
    );
    if !region_header
        .value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        || region_header.value.is_empty()
    {
        p.add(
            "spec.regionHeader",
            format!("`{}` is not a header name", region_header.value),
        );
    }
    if s.members.is_empty() {
        p.add("spec.members", "name at least one member gateway");
    }
    // The first member with a cost fixes the kind every other must use.
    let cost_kind = s
        .members
        .iter()
        .find_map(|m| m.cost)
        .map(|c| c.per_gpu_hour.is_some());
    let members: Vec<ResolvedMember> = s
        .members
        .iter()
        .enumerate()
        .map(|(i, m)| member(i, m, cost_kind, &mut p))
        .collect();
    let mut seen = BTreeSet::new();
    for (i, m) in members.iter().enumerate() {
        if !seen.insert(m.name.as_str()) {
            p.add(
                format!("spec.members[{i}].name"),
                format!("`{}` names another member too", m.name),
            );
        }
    }
    let regions: BTreeSet<&str> = members
        .iter()
        .map(|m| m.region.as_str())
        .chain(s.region.as_deref())
        .collect();
    let mut region_latencies = RegionLatencies::default();
    for (i, l) in s.region_latencies.iter().enumerate() {
        for (side, r) in [("from", &l.from), ("to", &l.to)] {
            if !regions.contains(r.as_str()) {
                p.add(
                    format!("spec.regionLatencies[{i}].{side}"),
                    format!("`{r}` is neither spec.region nor any member's region"),
                );
            }
        }
        if l.from == l.to {
            p.add(
                format!("spec.regionLatencies[{i}]"),
                "a region's latency to itself is zero; name two regions",
            );
        }
        if !region_latencies.insert(&l.from, &l.to, l.latency.get()) {
            p.add(
                format!("spec.regionLatencies[{i}]"),
                format!("{} and {} are listed twice", l.from, l.to),
            );
        }
    }

    let st = s.status.unwrap_or_default();
    let status = ResolvedStatusPull {
        interval: duration(
            st.interval,
            defaults::STATUS_INTERVAL,
            "spec.status.interval",
            true,
            &mut p,
        ),
        timeout: duration(
            st.timeout,
            defaults::STATUS_TIMEOUT,
            "spec.status.timeout",
            true,
            &mut p,
        ),
        misses_before_stale: Setting::or(st.misses_before_stale, defaults::MISSES_BEFORE_STALE),
        pulls_before_return: Setting::or(st.pulls_before_return, defaults::PULLS_BEFORE_RETURN),
    };
    if status.timeout.value >= status.interval.value {
        p.add(
            "spec.status.timeout",
            format!(
                "{} is not below the interval ({}): a pull would overlap the next",
                GatewayDuration::from_duration(status.timeout.value),
                GatewayDuration::from_duration(status.interval.value)
            ),
        );
    }
    if status.misses_before_stale.value == 0 {
        p.add("spec.status.missesBeforeStale", "must be at least 1");
    }
    if status.pulls_before_return.value == 0 {
        p.add("spec.status.pullsBeforeReturn", "must be at least 1");
    }

    let r = s.routing.unwrap_or_default();
    let routing = ResolvedRouting {
        weights: weights(r.weights.as_ref(), &mut p),
        spill_at: Setting::or(r.spill_at, defaults::SPILL_AT),
        max_attempts: Setting::or(r.max_attempts, defaults::MAX_ATTEMPTS),
        connect_timeout: duration(
            r.connect_timeout,
            defaults::CONNECT_TIMEOUT,
            "spec.routing.connectTimeout",
            true,
            &mut p,
        ),
        first_byte_timeout: duration(
            r.first_byte_timeout,
            defaults::FIRST_BYTE_TIMEOUT,
            "spec.routing.firstByteTimeout",
            true,
            &mut p,
        ),
    };
    if !(routing.spill_at.value > 0.0 && routing.spill_at.value <= 1.0) {
        p.add(
            "spec.routing.spillAt",
            format!("{} is not in (0, 1]", routing.spill_at.value),
        );
    }
    if routing.max_attempts.value == 0 {
        p.add("spec.routing.maxAttempts", "must be at least 1");
    }

    let o = s.outlier_detection.unwrap_or_default();
    let outlier = ResolvedOutlier {
        consecutive_failures: Setting::or(
            o.consecutive_failures,
            defaults::OUTLIER_CONSECUTIVE_FAILURES,
        ),
        base_ejection_time: duration(
            o.base_ejection_time,
            defaults::OUTLIER_BASE_EJECTION,
            "spec.outlierDetection.baseEjectionTime",
            true,
            &mut p,
        ),
        max_ejection_time: duration(
            o.max_ejection_time,
            defaults::OUTLIER_MAX_EJECTION,
            "spec.outlierDetection.maxEjectionTime",
            true,
            &mut p,
        ),
    };
    if outlier.max_ejection_time.value < outlier.base_ejection_time.value {
        p.add(
            "spec.outlierDetection.maxEjectionTime",
            "is below baseEjectionTime",
        );
    }

    let ss = s.slow_start.unwrap_or_default();
    let slow_start = ResolvedSlowStart {
        window: duration(
            ss.window,
            defaults::SLOW_START_WINDOW,
            "spec.slowStart.window",
            false,
            &mut p,
        ),
        aggression: Setting::or(ss.aggression, defaults::SLOW_START_AGGRESSION),
        min_weight: Setting::or(
            ss.min_weight_percent,
            defaults::SLOW_START_MIN_WEIGHT_PERCENT,
        )
        .map(|pct| f64::from(pct) / 100.0),
    };
    if !(slow_start.aggression.value.is_finite() && slow_start.aggression.value > 0.0) {
        p.add(
            "spec.slowStart.aggression",
            format!("{} is not a positive number", slow_start.aggression.value),
        );
    }
    if !(slow_start.min_weight.value > 0.0 && slow_start.min_weight.value <= 1.0) {
        p.add("spec.slowStart.minWeightPercent", "must be in 1..=100");
    }

    if let Err(e) =
        check_identity_and_limits(s.auth.as_ref(), s.tenancy.as_ref(), s.rate_limits.as_ref())
    {
        p.0.push(e);
    }

    if let Some(e) = GatewayConfigError::from_all(p.0) {
        return Err(e);
    }
    Ok(ResolvedGlobal {
        name: c.metadata.name.clone(),
        listen,
        admin_listen,
        region: s.region.clone(),
        region_header,
        region_latencies,
        members,
        status,
        routing,
        outlier,
        slow_start,
        auth: s.auth.as_ref().map(|a| a.jwt.provider.clone()),
        tenancy: ResolvedTenancy::new(s.tenancy.as_ref()),
        rate_limits: s.rate_limits.as_ref().map(ResolvedRateLimits::new),
    })
}
