//! Rules of `spec.tenancy`, `spec.flowControl`, `spec.rateLimits` and `spec.rewrites`.

use std::collections::{BTreeMap, BTreeSet};

use super::{Findings, Result};
use crate::gateway::defaults::limits;
use crate::gateway::error::invalid;
use crate::gateway::lora::check_name;
use crate::gateway::traffic::{
    Band, Fairness, FlowControl, IdentitySource, RateLimit, RateLimitStore, RateLimits, Stickiness,
    Tenancy,
};
use crate::gateway::types::GatewaySpec;

pub(super) fn check(spec: &GatewaySpec) -> Result {
    let mut found = Findings::default();
    if let Some(t) = &spec.tenancy {
        found.note(check_tenancy(t, spec.auth.is_some()));
    }
    if let Some(f) = &spec.flow_control {
        found.note(check_flow(f));
    }
    if let Some(r) = &spec.rate_limits {
        found.note(check_rate_limits(r));
    }
    found.note(check_rewrites(spec));
    found.finish()
}

/// `spec.tenancy` and `spec.rateLimits` alone (the global tier has only these two of this
/// module's sections); `auth` says whether `spec.auth` is set, which claims need.
pub(super) fn check_tenancy_and_limits(
    tenancy: Option<&Tenancy>,
    rate_limits: Option<&RateLimits>,
    auth: bool,
) -> Result {
    let mut found = Findings::default();
    if let Some(t) = tenancy {
        found.note(check_tenancy(t, auth));
    }
    if let Some(r) = rate_limits {
        found.note(check_rate_limits(r));
    }
    found.finish()
}

fn check_tenancy(t: &Tenancy, auth: bool) -> Result {
    let mut found = Findings::default();
    if let Some(src) = &t.tenant {
        found.note(check_source(src, auth, "spec.tenancy.tenant"));
    }
    if let Some(src) = &t.criticality {
        found.note(check_source(src, auth, "spec.tenancy.criticality"));
    }
    found.finish()
}

fn check_source(src: &IdentitySource, auth: bool, at: &str) -> Result {
    match (&src.claim, &src.header) {
        (Some(_), Some(_)) => Err(invalid(
            format!("{at}.header"),
            "give a claim or a header, not both",
        )),
        (None, None) => Err(invalid(at, "give a claim or a header")),
        (Some(claim), None) => {
            if claim.is_empty() {
                Err(invalid(format!("{at}.claim"), "must not be empty"))
            } else if !auth {
                Err(invalid(
                    format!("{at}.claim"),
                    "a claim needs spec.auth.jwt (there is no token without it); use a header",
                ))
            } else {
                Ok(())
            }
        }
        (None, Some(header)) => {
            if !is_lowercase_header(header) {
                Err(invalid(
                    format!("{at}.header"),
                    format!("`{header}` is not a lowercase HTTP header name"),
                ))
            } else {
                Ok(())
            }
        }
    }
}

/// An HTTP header name (RFC 9110 token) in lowercase, as HTTP/2 sends them.
fn is_lowercase_header(name: &str) -> bool {
    let token =
        |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "!#$%&'*+-.^_`|~".contains(c);
    !name.is_empty() && name.chars().all(token)
}

fn check_flow(f: &FlowControl) -> Result {
    let at = |s: &str| format!("spec.flowControl.{s}");
    if f.queue_ttl.is_some_and(|t| t.is_zero()) {
        return Err(invalid(
            at("queueTtl"),
            "must be more than 0s (to admit without queueing, set enabled: false)",
        ));
    }
    if f.max_queue_requests == Some(0) {
        return Err(invalid(at("maxQueueRequests"), "must be at least 1"));
    }
    if f.max_queue_bytes == Some(0) {
        return Err(invalid(at("maxQueueBytes"), "must be at least 1"));
    }
    let fairness = f.fairness.unwrap_or(crate::gateway::defaults::FAIRNESS);
    if !f.tenant_weights.is_empty() && fairness != Fairness::WeightedFair {
        return Err(invalid(
            at("tenantWeights"),
            format!(
                "only weighted-fair uses tenant weights (fairness is {})",
                fairness.as_str()
            ),
        ));
    }
    if let Some((tenant, _)) = f.tenant_weights.iter().find(|(_, w)| **w == 0) {
        return Err(invalid(
            at(&format!("tenantWeights.{tenant}")),
            "must be at least 1",
        ));
    }
    let mut bands = BTreeMap::new();
    for (i, b) in f.bands.iter().enumerate() {
        let at = |s: &str| at(&format!("bands[{i}].{s}"));
        if let Some(first) = bands.insert(b.name, i) {
            return Err(invalid(
                at("name"),
                format!("band {} is already configured by bands[{first}]", b.name),
            ));
        }
        if b.max_queue_requests == Some(0) {
            return Err(invalid(at("maxQueueRequests"), "must be at least 1"));
        }
        if b.max_queue_bytes == Some(0) {
            return Err(invalid(at("maxQueueBytes"), "must be at least 1"));
        }
        if b.queue_ttl.is_some_and(|t| t.is_zero()) {
            return Err(invalid(at("queueTtl"), "must be more than 0s"));
        }
        if let Some(c) = b.saturation_ceiling {
            if !(c.is_finite() && c > 0.0) {
                return Err(invalid(
                    at("saturationCeiling"),
                    format!("must be a number above 0, got {c}"),
                ));
            }
        }
    }
    check_ceilings_descend(f)?;
    if let Some(o) = &f.overload {
        for (field, value) in [("interval", o.interval), ("maxWait", o.max_wait)] {
            if value.is_some_and(|t| t.is_zero()) {
                return Err(invalid(
                    at(&format!("overload.{field}")),
                    "must be more than 0s (to switch the rule off, set enabled: false)",
                ));
            }
        }
    }
    if let Some(s) = &f.saturation {
        if s.queue_depth_threshold == Some(0) {
            return Err(invalid(
                at("saturation.queueDepthThreshold"),
                "must be at least 1",
            ));
        }
        if s.running_requests_threshold == Some(0) {
            return Err(invalid(
                at("saturation.runningRequestsThreshold"),
                "must be at least 1",
            ));
        }
        if let Some(kv) = s.kv_cache_threshold {
            if !(kv > 0.0 && kv <= 1.0) {
                return Err(invalid(
                    at("saturation.kvCacheThreshold"),
                    format!("must be in (0, 1], got {kv}"),
                ));
            }
        }
        if s.metrics_staleness_threshold.is_some_and(|t| t.is_zero()) {
            return Err(invalid(
                at("saturation.metricsStalenessThreshold"),
                "must be more than 0s",
            ));
        }
    }
    Ok(())
}

/// A lower band may not dispatch at a saturation where a higher one waits: strict priority
/// rests on it (a band that cannot dispatch implies no lower band can). Checked on the ceilings
/// in effect, configured or default; the error names the configured entry that breaks it.
fn check_ceilings_descend(f: &FlowControl) -> Result {
    let configured = |band: Band| {
        f.bands
            .iter()
            .position(|b| b.name == band && b.saturation_ceiling.is_some())
    };
    let effective = |band: Band| {
        f.bands
            .iter()
            .find(|b| b.name == band)
            .and_then(|b| b.saturation_ceiling)
            .unwrap_or(crate::gateway::defaults::saturation_ceiling(band))
    };
    for pair in Band::ALL.windows(2) {
        let (higher, lower) = (pair[0], pair[1]);
        let (h, l) = (effective(higher), effective(lower));
        if l > h {
            // Name the lower band's entry if it was configured, else the higher band's.
            let i = configured(lower).or(configured(higher)).unwrap_or(0);
            return Err(invalid(
                format!("spec.flowControl.bands[{i}].saturationCeiling"),
                format!(
                    "{lower}'s ceiling ({l}) is above {higher}'s ({h}); a lower band may not \
                     dispatch where a higher one waits"
                ),
            ));
        }
    }
    Ok(())
}

fn check_rate_limits(r: &RateLimits) -> Result {
    let at = |s: &str| format!("spec.rateLimits.{s}");
    let store = match &r.store {
        Some(s) => RateLimitStore::parse(s).map_err(|e| invalid(at("store"), e))?,
        None => crate::gateway::defaults::RATE_LIMIT_STORE,
    };
    if r.on_store_error.is_some() && store == RateLimitStore::Local {
        return Err(invalid(
            at("onStoreError"),
            "only a shared store (redis://…) can be unreachable; the local store cannot fail",
        ));
    }
    if let Some(t) = r.store_timeout {
        if store == RateLimitStore::Local {
            return Err(invalid(
                at("storeTimeout"),
                "only a shared store (redis://…) is waited for; the local store answers at once",
            ));
        }
        if t.is_zero() || t.get() > limits::STORE_TIMEOUT {
            return Err(invalid(
                at("storeTimeout"),
                format!(
                    "must be more than 0s and at most {:?}",
                    limits::STORE_TIMEOUT
                ),
            ));
        }
    }
    if r.default_max_tokens.is_some() {
        let counts_tokens = r.default.iter().any(|l| l.tokens_per_minute.is_some())
            || r.tenants.iter().any(|t| t.tokens_per_minute.is_some());
        if !counts_tokens {
            return Err(invalid(
                at("defaultMaxTokens"),
                "only tokensPerMinute limits reserve completion tokens, and none is set",
            ));
        }
    }
    if r.default.is_none() && r.tenants.is_empty() {
        return Err(invalid(
            "spec.rateLimits",
            "set a default limit, tenants' limits, or both",
        ));
    }
    if let Some(d) = &r.default {
        check_limit(d, &at("default"))?;
    }
    let mut seen = BTreeMap::new();
    for (i, t) in r.tenants.iter().enumerate() {
        let here = at(&format!("tenants[{i}]"));
        if t.tenant.is_empty() {
            return Err(invalid(format!("{here}.tenant"), "must not be empty"));
        }
        if let Some(first) = seen.insert(t.tenant.as_str(), i) {
            return Err(invalid(
                format!("{here}.tenant"),
                format!("`{}` already has a limit (tenants[{first}])", t.tenant),
            ));
        }
        check_limit(&t.limit(), &here)?;
    }
    Ok(())
}

fn check_limit(l: &RateLimit, at: &str) -> Result {
    if l.requests_per_second.is_none() && l.tokens_per_minute.is_none() {
        return Err(invalid(
            at,
            "set requestsPerSecond, tokensPerMinute, or both",
        ));
    }
    if l.requests_per_second == Some(0) {
        return Err(invalid(
            format!("{at}.requestsPerSecond"),
            "must be at least 1 (leave it out for no limit)",
        ));
    }
    if l.tokens_per_minute == Some(0) {
        return Err(invalid(
            format!("{at}.tokensPerMinute"),
            "must be at least 1 (leave it out for no limit)",
        ));
    }
    if l.tokens_per_minute
        .is_some_and(|t| t > limits::TOKENS_PER_MINUTE)
    {
        return Err(invalid(
            format!("{at}.tokensPerMinute"),
            format!("must be at most {}", limits::TOKENS_PER_MINUTE),
        ));
    }
    Ok(())
}

/// Each rule needs matches and targets with positive weights; a model is matched by one rule
/// at most; a rewrite is applied once, so a target may not be another rule's match.
fn check_rewrites(spec: &GatewaySpec) -> Result {
    let mut matched: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, rule) in spec.rewrites.iter().enumerate() {
        let at = |s: &str| format!("spec.rewrites[{i}].{s}");
        if rule.matches.is_empty() {
            return Err(invalid(at("matches"), "needs at least one match"));
        }
        if rule.targets.is_empty() {
            return Err(invalid(at("targets"), "needs at least one target"));
        }
        for (j, m) in rule.matches.iter().enumerate() {
            let field = at(&format!("matches[{j}].model.value"));
            check_name(&m.model.value, limits::MODEL_NAME_LEN).map_err(|r| invalid(&field, r))?;
            if let Some(first) = matched.insert(&m.model.value, i) {
                return Err(invalid(
                    field,
                    format!(
                        "`{}` is already matched by spec.rewrites[{first}]; a model has one \
                         rewrite rule",
                        m.model.value
                    ),
                ));
            }
        }
        let mut targets = BTreeSet::new();
        for (j, t) in rule.targets.iter().enumerate() {
            let field = at(&format!("targets[{j}]"));
            check_name(&t.model_rewrite, limits::MODEL_NAME_LEN)
                .map_err(|r| invalid(format!("{field}.modelRewrite"), r))?;
            if !targets.insert(&t.model_rewrite) {
                return Err(invalid(
                    format!("{field}.modelRewrite"),
                    format!("`{}` is a target twice; merge the weights", t.model_rewrite),
                ));
            }
            if t.weight == Some(0) {
                return Err(invalid(
                    format!("{field}.weight"),
                    "must be at least 1 (remove the target to send it nothing)",
                ));
            }
        }
        if let Some(s) = &rule.stickiness {
            check_stickiness(s, &at("stickiness"))?;
        }
    }
    for (i, rule) in spec.rewrites.iter().enumerate() {
        for (j, t) in rule.targets.iter().enumerate() {
            if let Some(&other) = matched.get(t.model_rewrite.as_str()) {
                if other != i {
                    return Err(invalid(
                        format!("spec.rewrites[{i}].targets[{j}].modelRewrite"),
                        format!(
                            "`{}` is rewritten again by spec.rewrites[{other}]; rewrites apply \
                             once, so point at the final model",
                            t.model_rewrite
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// A session id comes from one place; the body's `model` cannot be it, since every request a
/// rule matches names the same few models and would stick to one target.
fn check_stickiness(s: &Stickiness, at: &str) -> Result {
    match (&s.header, &s.field) {
        (Some(_), Some(_)) => Err(invalid(
            format!("{at}.field"),
            "give a header or a field, not both",
        )),
        (None, None) => Err(invalid(at, "give a header or a field")),
        (Some(header), None) if !is_lowercase_header(header) => Err(invalid(
            format!("{at}.header"),
            format!("`{header}` is not a lowercase HTTP header name"),
        )),
        (None, Some(field)) if field.is_empty() => {
            Err(invalid(format!("{at}.field"), "must not be empty"))
        }
        (None, Some(field)) if field == "model" => Err(invalid(
            format!("{at}.field"),
            "`model` names the rule's own model, so every request would stick to one target; \
             name a session or user field",
        )),
        _ => Ok(()),
    }
}
