//! Identity: who a request is for — its tenant and its priority band — read from the
//! verified token's claims or from headers, as `spec.tenancy` says. Flow control queues by
//! both, the rate limits count by the tenant, and a pool with `forwardPriority` is told the
//! band in the body (see [`crate::rewrite::set_priority`]).

use hyper::HeaderMap;
use infergate_auth::Verified;
use infergate_config::gateway::defaults::OBJECTIVE_HEADER;
use infergate_config::gateway::{Band, Identity as Source, ResolvedTenancy};

/// Who a request is for: its tenant and priority band.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The tenant, when the request names one.
    pub tenant: Option<String>,
    /// The priority band.
    pub band: Band,
}

/// The request's identity from where `tenancy` says: claims of the verified token, or
/// headers. A claim that is absent (or, for the band, not a band or priority) gives no tenant
/// and the default band, exactly as a missing header does.
pub fn identity(
    tenancy: &ResolvedTenancy,
    token: Option<&Verified>,
    headers: &HeaderMap,
) -> Identity {
    let tenant = match (&tenancy.tenant.value, token) {
        (Source::Claim(claim), Some(t)) => t.tenant(claim),
        // Validation allows a claim only with spec.auth, so there is a token here.
        (Source::Claim(_), None) => None,
        (Source::Header(_), _) => tenant(headers, tenancy),
    };
    let band = match (&tenancy.criticality.value, token) {
        (Source::Claim(claim), Some(t)) => {
            t.band(claim).unwrap_or(tenancy.default_criticality.value)
        }
        (Source::Claim(_), None) => tenancy.default_criticality.value,
        (Source::Header(_), _) => band(headers, tenancy),
    };
    Identity { tenant, band }
}

/// A band's priority as the picker reads it: negative is sheddable.
pub fn priority(band: Band) -> i32 {
    match band {
        Band::Critical => 1,
        Band::Standard => 0,
        Band::Sheddable => -1,
    }
}

/// The band a request asks for in its criticality header: an InferenceObjective's name (its
/// priority's band), a band name or an upstream priority integer ([`Band::from_criticality`]);
/// the default band when it names none. With the default header, llm-d's
/// `x-llm-d-inference-objective` is read first.
pub fn band(headers: &HeaderMap, tenancy: &ResolvedTenancy) -> Band {
    let default = tenancy.default_criticality.value;
    let Source::Header(name) = &tenancy.criticality.value else {
        return default;
    };
    let read = |header: &str| headers.get(header).and_then(|v| v.to_str().ok());
    let value = if tenancy.criticality.is_default {
        read(OBJECTIVE_HEADER).or_else(|| read(name))
    } else {
        read(name)
    };
    value
        .and_then(|v| match tenancy.objectives.get(v.trim()) {
            Some(priority) => Some(Band::from_priority(*priority)),
            None => Band::from_criticality(v),
        })
        .unwrap_or(default)
}

/// The tenant named in the fairness header, when tenancy comes from headers.
pub fn tenant(headers: &HeaderMap, tenancy: &ResolvedTenancy) -> Option<String> {
    let Source::Header(name) = &tenancy.tenant.value else {
        return None;
    };
    headers
        .get(name.as_str())
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;
    use infergate_auth::Verifier;
    use infergate_test_support::jwt::{idp_claims, idp_provider, jwks, unix_now, Key};
    use serde_json::json;

    fn tenancy() -> ResolvedTenancy {
        infergate_config::gateway::load_from_str(
            "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {enabled: true}\n  schedulers:\n    - name: a\n      modelName: m\n      modelSelector: {matchLabels: {app: a}}\n",
        )
        .unwrap()
        .resolve()
        .unwrap()
        .tenancy
    }

    #[test]
    fn an_objective_name_gives_its_priority_band_and_llm_d_header_is_read_first() {
        let mut t = tenancy();
        t.objectives.insert("batch".into(), -5);
        t.objectives.insert("interactive".into(), 10);
        let mut h = HeaderMap::new();
        h.insert(
            "x-gateway-inference-objective",
            HeaderValue::from_static("batch"),
        );
        assert_eq!(band(&h, &t), Band::Sheddable);
        h.insert(
            "x-llm-d-inference-objective",
            HeaderValue::from_static("interactive"),
        );
        assert_eq!(band(&h, &t), Band::Critical, "the llm-d header wins");
        let mut h = HeaderMap::new();
        h.insert(
            "x-llm-d-inference-objective",
            HeaderValue::from_static("Sheddable"),
        );
        assert_eq!(band(&h, &t), Band::Sheddable, "a band name still works");
        h.insert(
            "x-llm-d-inference-objective",
            HeaderValue::from_static("unknown-objective"),
        );
        assert_eq!(
            band(&h, &t),
            Band::Standard,
            "an unknown name is the default band"
        );
    }

    #[test]
    fn band_and_tenant_come_from_the_headers() {
        let t = tenancy();
        let mut h = HeaderMap::new();
        assert_eq!(band(&h, &t), Band::Standard);
        h.insert(
            "x-gateway-inference-objective",
            HeaderValue::from_static("Sheddable"),
        );
        h.insert(
            "x-gateway-inference-fairness-id",
            HeaderValue::from_static("team-a"),
        );
        assert_eq!(band(&h, &t), Band::Sheddable);
        assert_eq!(tenant(&h, &t).as_deref(), Some("team-a"));
        // Upstream priorities: above zero Critical, below zero Sheddable.
        h.insert(
            "x-gateway-inference-objective",
            HeaderValue::from_static("2"),
        );
        assert_eq!(band(&h, &t), Band::Critical);
        h.insert(
            "x-gateway-inference-objective",
            HeaderValue::from_static("-1"),
        );
        assert_eq!(band(&h, &t), Band::Sheddable);
        h.insert(
            "x-gateway-inference-objective",
            HeaderValue::from_static("urgent"),
        );
        assert_eq!(band(&h, &t), Band::Standard);
    }

    fn tenancy_of(spec: &str) -> ResolvedTenancy {
        let yaml = format!(
            "apiVersion: infergate.dev/v1alpha1\nkind: InferenceGatewayConfig\nspec:\n  bbr: {{enabled: true}}\n  auth:\n    jwt:\n      provider: {{name: idp, issuer: 'https://idp', localJWKS: {{file: k.json}}, audiences: [gw]}}\n{spec}  schedulers:\n    - name: a\n      modelName: m\n      modelSelector: {{matchLabels: {{app: a}}}}\n"
        );
        infergate_config::gateway::load_from_str(&yaml)
            .unwrap()
            .resolve()
            .unwrap()
            .tenancy
    }

    #[test]
    fn identity_comes_from_the_claims_the_tenancy_names() {
        let key = Key::ed25519();
        let keys = infergate_auth::KeySet::parse(jwks(&[key.jwk("k")]).as_bytes()).unwrap();
        let mut c = idp_claims();
        c["org"] = json!("team-a");
        c["tier"] = json!(-1);
        let token = Verifier::new(&idp_provider())
            .verify(&key.token("k", &c), &keys, unix_now())
            .unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-gateway-inference-fairness-id",
            HeaderValue::from_static("spoofed"),
        );
        headers.insert(
            "x-gateway-inference-objective",
            HeaderValue::from_static("Critical"),
        );

        let by_claims =
            tenancy_of("  tenancy:\n    tenant: {claim: org}\n    criticality: {claim: tier}\n");
        assert_eq!(
            identity(&by_claims, Some(&token), &headers),
            Identity {
                tenant: Some("team-a".into()),
                band: Band::Sheddable
            },
            "the headers cannot override the token"
        );
        let absent = tenancy_of(
            "  tenancy:\n    tenant: {claim: team}\n    criticality: {claim: prio}\n    defaultCriticality: Standard\n",
        );
        assert_eq!(
            identity(&absent, Some(&token), &headers),
            Identity {
                tenant: None,
                band: Band::Standard
            }
        );
        // Without spec.tenancy the headers still name them, as with auth off.
        let by_headers = tenancy_of("");
        assert_eq!(
            identity(&by_headers, Some(&token), &headers),
            Identity {
                tenant: Some("spoofed".into()),
                band: Band::Critical
            }
        );
    }
}
