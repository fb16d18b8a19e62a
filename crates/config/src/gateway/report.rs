//! What `infergate check --config F` prints: the resolved gateway, with every default marked,
//! the endpoints each pool matched, the deployment-only knobs, and the warnings.

use std::fmt::{self, Display, Formatter};
use std::time::Duration;

use super::duration::GatewayDuration;
use super::resolve::{
    DefaultBackend, Identity, PickerSource, Pool, ResolvedDiscovery, ResolvedFlowControl,
    ResolvedGateway, ResolvedRateLimits, ResolvedTenancy, SessionKey, TlsMode,
};
use super::setting::Setting;
use super::traffic::{OverloadSensor, RateLimit, RateLimitStore, StoreFailure};
use super::types::KIND;

fn mark(is_default: bool) -> &'static str {
    if is_default {
        " (default)"
    } else {
        ""
    }
}

fn duration(d: Duration) -> String {
    GatewayDuration::from_duration(d).to_string()
}

fn dur(s: Setting<Duration>) -> String {
    format!("{}{}", duration(s.value), mark(s.is_default))
}

const W: usize = 18;

fn row(f: &mut Formatter<'_>, key: &str, value: impl Display) -> fmt::Result {
    writeln!(f, "  {key:<W$}{value}")
}

impl Display for ResolvedGateway {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{KIND} {} ({})",
            self.name.as_deref().unwrap_or("(unnamed)"),
            self.api_version.as_str()
        )?;
        writeln!(f)?;
        writeln!(f, "gateway")?;
        row(f, "listen", self.listen)?;
        row(f, "admin", self.admin_listen)?;
        row(f, "connections", self.connections)?;
        row(f, "tls", tls(&self.tls))?;
        match &self.auth {
            None => row(f, "auth", "off")?,
            Some(p) => {
                let keys = match (&p.remote_jwks, &p.local_jwks) {
                    (Some(r), _) => format!("keys from {}", r.uri),
                    (_, Some(l)) => format!("keys from file {}", l.file),
                    _ => String::new(),
                };
                row(
                    f,
                    "auth",
                    format!(
                        "JWT provider {}: issuer {}, {keys}, {} audience(s), {} required claim(s)",
                        p.name,
                        p.issuer,
                        p.audiences.len(),
                        p.required_claims.len()
                    ),
                )?;
            }
        }
        row(f, "bbr", self.bbr_line())?;
        row(
            f,
            "metrics",
            Setting {
                value: if self.metrics_enabled.value {
                    "on"
                } else {
                    "off"
                },
                is_default: self.metrics_enabled.is_default,
            },
        )?;
        row(f, "discovery", discovery(&self.discovery))?;
        row(f, "adapters", format!("{} mapped", self.adapters.len()))?;
        for pool in &self.pools {
            writeln!(f)?;
            self.fmt_pool(f, pool)?;
        }
        writeln!(f)?;
        self.fmt_traffic(f)?;
        if !self.deployment_knobs.is_empty() {
            writeln!(f)?;
            writeln!(
                f,
                "deployment only (accepted; honoured by the Kubernetes deployment, not by a \
                 standalone gateway)"
            )?;
            for k in &self.deployment_knobs {
                writeln!(f, "  {}: {}", k.field, k.value)?;
            }
        }
        if !self.warnings.is_empty() {
            writeln!(f)?;
            writeln!(f, "warnings")?;
            for w in &self.warnings {
                writeln!(f, "  - {w}")?;
            }
        }
        Ok(())
    }
}

fn tls(t: &TlsMode) -> String {
    match t {
        TlsMode::Plain => "off: plain HTTP".to_owned(),
        TlsMode::SelfSigned => "a self-signed certificate made at start-up (tls: {})".to_owned(),
        TlsMode::Files {
            cert_file,
            key_file,
        } => format!("certificate {cert_file}, key {key_file}"),
        TlsMode::Acm { arn } => format!("ACM certificate {arn} (Kubernetes load balancer)"),
    }
}

fn discovery(d: &ResolvedDiscovery) -> String {
    match d {
        ResolvedDiscovery::Static => "static (spec.endpoints)".to_owned(),
        ResolvedDiscovery::Kubernetes { namespace } => format!(
            "kubernetes: pods in {}{}",
            namespace
                .value
                .as_deref()
                .map_or("the gateway's own namespace".to_owned(), |ns| format!(
                    "namespace {ns}"
                )),
            mark(namespace.is_default)
        ),
    }
}

impl ResolvedGateway {
    fn bbr_line(&self) -> String {
        let b = &self.bbr;
        let state = if b.enabled {
            "on".to_owned()
        } else {
            match self.pools.first() {
                Some(p) => format!("off: every request goes to pool {}", p.name),
                None => "off".to_owned(),
            }
        };
        let fallback = match &b.default_backend {
            None => "unknown models get 404".to_owned(),
            Some(DefaultBackend::Pool(i)) => format!(
                "unknown models go to pool {}",
                self.pools.get(*i).map_or("?", |p| p.name.as_str())
            ),
            Some(DefaultBackend::Host { host, port }) => {
                format!("unknown models go to {host}:{port}")
            }
        };
        format!(
            "{state}; maxRequestBodyBytes {}; maxBufferedBodyBytes {}; {fallback}",
            b.max_request_body_bytes, b.max_buffered_body_bytes
        )
    }

    fn fmt_pool(&self, f: &mut Formatter<'_>, p: &Pool) -> fmt::Result {
        writeln!(f, "pool {}", p.name)?;
        row(f, "modelName", &p.model_name)?;
        let adapters = if p.adapters.is_empty() {
            "(none)".to_owned()
        } else {
            p.adapters.join(", ")
        };
        row(f, "adapters", adapters)?;
        row(f, "scheduler", p.scheduler.map(|s| s.as_str()))?;
        row(f, "engineType", p.engine_type.map(|e| e.as_str()))?;
        row(f, "targetPort", p.target_port)?;
        row(f, "appProtocol", p.app_protocol.map(|a| a.as_str()))?;
        let t = &p.timeouts;
        let timeout = match t.route.value {
            Some(d) => format!("{} to the first byte", duration(d)),
            None if t.route.is_default => "none (default)".to_owned(),
            None => "none (0s)".to_owned(),
        };
        row(f, "routeTimeout", timeout)?;
        row(f, "firstByteTimeout", t.first_byte)?;
        let idle = t.stream_idle.map(|d| {
            if d.is_zero() {
                "none (0s)".to_owned()
            } else {
                duration(d)
            }
        });
        row(f, "streamIdleTimeout", idle)?;
        row(f, "outliers", p.outlier_detection.summary())?;
        let forward = if p.forward_priority.value {
            "on: body `priority` Critical -1, Standard 0, Sheddable 1 (needs vLLM \
             --scheduling-policy priority)"
        } else {
            "off"
        };
        row(
            f,
            "forwardPriority",
            format!("{forward}{}", mark(p.forward_priority.is_default)),
        )?;
        let resume = if p.resume_streams.value {
            "on: a stream whose endpoint fails goes on at another from the tokens sent (serve)"
        } else {
            "off: a stream whose endpoint fails ends with an error event"
        };
        row(
            f,
            "resumeStreams",
            format!("{resume}{}", mark(p.resume_streams.is_default)),
        )?;
        match &p.picker {
            PickerSource::Weights(w) => {
                let parts: Vec<String> = w
                    .entries()
                    .iter()
                    .map(|(name, s)| match s.value {
                        0 => format!("{name} off{}", mark(s.is_default)),
                        v => format!("{name} {v}{}", mark(s.is_default)),
                    })
                    .collect();
                row(f, "weights", parts.join(", "))?;
            }
            PickerSource::ConfigMap { name, key } => {
                row(
                    f,
                    "picker",
                    format!("EndpointPickerConfig in ConfigMap {name}, key {key}"),
                )?;
            }
            PickerSource::File(path) => {
                row(f, "picker", format!("EndpointPickerConfig file {path}"))?;
            }
            PickerSource::Named(name) => {
                row(f, "picker", format!("policy {name}"))?;
            }
        }
        row(f, "modelSelector", &p.selector)?;
        match self.discovery {
            ResolvedDiscovery::Kubernetes { .. } => row(
                f,
                "endpoints",
                "pods matching modelSelector, watched at run time",
            ),
            ResolvedDiscovery::Static => {
                row(f, "endpoints", format!("{} matched", p.endpoints.len()))?;
                for e in &p.endpoints {
                    let labels: Vec<String> =
                        e.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    let port = if e.port_from_address {
                        "port from address"
                    } else {
                        "port from targetPort"
                    };
                    writeln!(
                        f,
                        "    {:<24}spec.endpoints[{}], {port}, {}",
                        e.authority,
                        e.index,
                        labels.join(",")
                    )?;
                }
                Ok(())
            }
        }
    }

    fn fmt_traffic(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "traffic")?;
        fmt_tenancy(f, &self.tenancy)?;
        fmt_flow(f, &self.flow_control)?;
        fmt_rate_limits(f, self.rate_limits.as_ref())?;
        if self.rewrites.is_empty() {
            row(f, "rewrites", "none")?;
        }
        for r in &self.rewrites {
            let targets: Vec<String> = r
                .targets
                .iter()
                .map(|(m, w)| format!("{m} weight {w}"))
                .collect();
            let name = r
                .name
                .as_deref()
                .map(|n| format!("{n}: "))
                .unwrap_or_default();
            let sticky = match &r.stickiness {
                None => String::new(),
                Some(SessionKey::Header(h)) => format!("; sessions stick by header {h}"),
                Some(SessionKey::Field(b)) => format!("; sessions stick by body field {b}"),
            };
            row(
                f,
                "rewrite",
                format!(
                    "{name}{} → {}{sticky}",
                    r.models.join(", "),
                    targets.join(", ")
                ),
            )?;
        }
        Ok(())
    }
}

fn identity(i: &Identity) -> String {
    match i {
        Identity::Claim(c) => format!("JWT claim {c}"),
        Identity::Header(h) => format!("header {h}"),
    }
}

fn limit(l: &RateLimit) -> String {
    let mut parts = Vec::new();
    if let Some(r) = l.requests_per_second {
        parts.push(format!("{r} requests/s"));
    }
    if let Some(t) = l.tokens_per_minute {
        parts.push(format!("{t} tokens/min"));
    }
    parts.join(", ")
}

fn fmt_flow(f: &mut Formatter<'_>, fc: &ResolvedFlowControl) -> fmt::Result {
    if !fc.enabled.value {
        return row(
            f,
            "flow control",
            format!(
                "off{}: every request is admitted at once",
                mark(fc.enabled.is_default)
            ),
        );
    }
    row(
        f,
        "flow control",
        format!(
            "on{}; queueTtl {}; maxQueueRequests {}; maxQueueBytes {}; fairness {}",
            mark(fc.enabled.is_default),
            dur(fc.queue_ttl),
            fc.max_queue_requests,
            fc.max_queue_bytes,
            fc.fairness.map(|x| x.as_str())
        ),
    )?;
    for b in &fc.bands {
        row(
            f,
            &format!("  {}", b.band),
            format!(
                "maxQueueRequests {}, maxQueueBytes {}, queueTtl {}, saturationCeiling {}",
                b.max_queue_requests,
                b.max_queue_bytes,
                dur(b.queue_ttl),
                b.saturation_ceiling
            ),
        )?;
    }
    let o = &fc.overload;
    row(
        f,
        "  overload",
        if o.enabled.value {
            format!(
                "on{}: below Critical, {}{} refuses (429) what waited {}{}{}; \
                 KV-cache use holds Standard {}{}",
                mark(o.enabled.is_default),
                match o.sensor.value {
                    OverloadSensor::Sojourn => format!(
                        "once the oldest request has waited past {} for as long again (sojourn)",
                        dur(o.max_wait)
                    ),
                    OverloadSensor::Backlog =>
                        format!("a queue not empty for {} (backlog)", dur(o.interval)),
                },
                mark(o.sensor.is_default),
                dur(o.max_wait),
                if o.hold_while_draining.value {
                    " unless what is queued drains within that wait (then at twice it)"
                } else {
                    ""
                },
                mark(o.hold_while_draining.is_default),
                if o.kv_cache_always.value {
                    "at all times"
                } else {
                    "only while overloaded"
                },
                mark(o.kv_cache_always.is_default)
            )
        } else {
            "off: queued requests wait out their queueTtl".to_owned()
        },
    )?;
    if !fc.tenant_weights.is_empty() {
        let w: Vec<String> = fc
            .tenant_weights
            .iter()
            .map(|(t, w)| format!("{t} {w}"))
            .collect();
        row(f, "  tenant weights", w.join(", "))?;
    }
    let s = &fc.saturation;
    row(
        f,
        "saturation",
        format!(
            "queueDepthThreshold {}, kvCacheThreshold {}, metricsStalenessThreshold {}, \
             runningRequestsThreshold {}, interTokenLatencyThreshold {}",
            s.queue_depth_threshold,
            s.kv_cache_threshold,
            dur(s.metrics_staleness_threshold),
            s.running_requests_threshold
                .map_or_else(|| "off (default)".to_owned(), |t| t.to_string()),
            if s.inter_token_latency_threshold.value.is_zero() {
                "off".to_owned()
            } else {
                dur(s.inter_token_latency_threshold)
            }
        ),
    )
}

/// The tenancy rows (shared with the global tier's report).
pub(crate) fn fmt_tenancy(f: &mut Formatter<'_>, t: &ResolvedTenancy) -> fmt::Result {
    row(f, "tenant", t.tenant.as_ref().map(identity))?;
    row(f, "criticality", t.criticality.as_ref().map(identity))?;
    row(f, "default band", t.default_criticality)
}

/// The rate-limit rows (shared with the global tier's report).
pub(crate) fn fmt_rate_limits(
    f: &mut Formatter<'_>,
    limits: Option<&ResolvedRateLimits>,
) -> fmt::Result {
    match limits {
        None => row(f, "rate limits", "none")?,
        Some(r) => {
            let store = match &r.store.value {
                RateLimitStore::Local => "local".to_owned(),
                RateLimitStore::Redis { url } => url.clone(),
            };
            let on_error = match r.store.value {
                RateLimitStore::Local => String::new(),
                RateLimitStore::Redis { .. } => format!(
                    "; timeout {}; store down: {}{}",
                    dur(r.store_timeout),
                    match r.on_store_error.value {
                        StoreFailure::FailOpen => "fail open",
                        StoreFailure::FailClosed => "fail closed",
                    },
                    mark(r.on_store_error.is_default)
                ),
            };
            row(
                f,
                "rate limits",
                format!("store {store}{}{on_error}", mark(r.store.is_default)),
            )?;
            if let Some(d) = &r.default {
                row(f, "  every tenant", limit(d))?;
            }
            for (tenant, l) in &r.tenants {
                row(f, &format!("  {tenant}"), limit(l))?;
            }
            let counts_tokens = r
                .default
                .iter()
                .chain(r.tenants.values())
                .any(|l| l.tokens_per_minute.is_some());
            if counts_tokens {
                row(
                    f,
                    "  no max_tokens",
                    format!("reserve {} completion tokens", r.default_max_tokens),
                )?;
            }
        }
    }
    Ok(())
}
