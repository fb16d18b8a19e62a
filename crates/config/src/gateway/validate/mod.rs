//! The rules a config must keep, checked at load time. Each failure names the field's path and
//! the reason; every failure found is returned ([`Findings`]), the first first.

mod scheduler;
mod traffic;

use std::collections::BTreeSet;
use std::net::SocketAddr;

use super::address::EndpointAddress;
use super::auth::JwtProvider;
use super::defaults::{self, limits};
use super::error::{invalid, GatewayConfigError};
use super::lora::AdapterTable;
use super::selector::{check_label_key, check_label_value, is_dns_label, is_dns_subdomain};
use super::types::{Discovery, EndpointSpec, GatewaySpec, InferenceGatewayConfig};

type Result<T = ()> = std::result::Result<T, GatewayConfigError>;

/// Every rule a document breaks, gathered so that one run reports them all.
///
/// A check still stops at the first error of what it checks (one field, one scheduler, one
/// section: later rules of the same thing often only follow from the first), but every check
/// runs whether or not an earlier one failed, and the errors keep the order in which the
/// document is checked, so the first is the one a stop-at-the-first run would have reported.
#[derive(Default)]
pub(crate) struct Findings(Vec<GatewayConfigError>);

impl Findings {
    /// Keeps `result`'s error, if any.
    pub(crate) fn note<T>(&mut self, result: Result<T>) {
        if let Err(e) = result {
            self.0.push(e);
        }
    }

    /// `Ok` when nothing was found; else the one error, or all of them.
    pub(crate) fn finish(self) -> Result {
        match GatewayConfigError::from_all(self.0) {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}

/// Checks every rule of the schema.
pub(crate) fn validate(config: &InferenceGatewayConfig) -> Result {
    let spec = &config.spec;
    let mut found = Findings::default();
    if let Some(ns) = config
        .metadata
        .as_ref()
        .and_then(|m| m.namespace.as_deref())
    {
        if !is_dns_label(ns) {
            found.note::<()>(Err(invalid(
                "metadata.namespace",
                format!("`{ns}` is not a Kubernetes namespace name"),
            )));
        }
    }
    found.note(check_bbr(spec));
    found.note(check_tls(spec));
    if let Some(auth) = &spec.auth {
        found.note(check_jwt(&auth.jwt.provider));
    }
    let statik = effective_discovery(spec) == Discovery::Static;
    found.note(scheduler::check_all(spec, statik));
    found.note(check_listen(spec));
    found.note(check_discovery(spec));
    found.note(AdapterTable::build(
        &spec.schedulers,
        &spec.lora_adapter_maps,
        &[],
    ));
    found.note(check_lora_maps(spec));
    found.note(traffic::check(spec));
    found.finish()
}

/// The rules of `spec.auth`, `spec.tenancy` and `spec.rateLimits` alone: what a config that
/// has only those sections (the global tier's) must keep, with the same field names.
pub(crate) fn check_identity_and_limits(
    auth: Option<&crate::gateway::Auth>,
    tenancy: Option<&crate::gateway::Tenancy>,
    rate_limits: Option<&crate::gateway::RateLimits>,
) -> Result {
    let mut found = Findings::default();
    if let Some(auth) = auth {
        found.note(check_jwt(&auth.jwt.provider));
    }
    found.note(traffic::check_tenancy_and_limits(
        tenancy,
        rate_limits,
        auth.is_some(),
    ));
    found.finish()
}

/// `spec.discovery` as written, or `static` when `spec.endpoints` is written, else `kubernetes`
/// in the resource's namespace.
pub(crate) fn effective_discovery(spec: &GatewaySpec) -> Discovery {
    match (&spec.discovery, &spec.endpoints) {
        (Some(d), _) => d.clone(),
        (None, Some(_)) => Discovery::Static,
        (None, None) => Discovery::Kubernetes { namespace: None },
    }
}

fn check_bbr(spec: &GatewaySpec) -> Result {
    let bbr = &spec.bbr;
    if !bbr.enabled && spec.schedulers.len() > 1 {
        return Err(invalid(
            "spec.bbr.enabled",
            format!(
                "must be true with more than one scheduler ({} are configured): body-based \
                 routing is what chooses among them",
                spec.schedulers.len()
            ),
        ));
    }
    if let Some(max) = bbr.max_request_body_bytes {
        if max == 0 || max > defaults::MAX_REQUEST_BODY_BYTES {
            return Err(invalid(
                "spec.bbr.maxRequestBodyBytes",
                format!(
                    "must be 1..{} (256 MiB), got {max}",
                    defaults::MAX_REQUEST_BODY_BYTES
                ),
            ));
        }
    }
    if bbr.max_buffered_body_bytes == Some(0) {
        return Err(invalid(
            "spec.bbr.maxBufferedBodyBytes",
            "must be at least 1 (and at least maxRequestBodyBytes, or the largest bodies are \
             always refused)",
        ));
    }
    let limit = bbr
        .max_request_body_bytes
        .unwrap_or(defaults::DEFAULT_REQUEST_BODY_BYTES);
    if let Some(budget) = bbr.max_buffered_body_bytes {
        if budget < limit {
            return Err(invalid(
                "spec.bbr.maxBufferedBodyBytes",
                format!(
                    "must be at least maxRequestBodyBytes ({limit}), got {budget}: a body the \
                     limit allows could never be buffered"
                ),
            ));
        }
    }
    if bbr.replicas == Some(0) {
        return Err(invalid("spec.bbr.replicas", "must be at least 1"));
    }
    if let Some(backend) = &bbr.default_backend {
        let is_pool = spec.schedulers.iter().any(|s| s.name == backend.name);
        if !is_pool && !is_dns_subdomain(&backend.name) {
            return Err(invalid(
                "spec.bbr.defaultBackend.name",
                format!(
                    "`{}` is neither a scheduler's name nor a host name",
                    backend.name
                ),
            ));
        }
        if is_pool && backend.port.is_some() {
            return Err(invalid(
                "spec.bbr.defaultBackend.port",
                format!(
                    "`{}` is a scheduler: its endpoints keep their own ports; leave port out",
                    backend.name
                ),
            ));
        }
        check_port(backend.port, "spec.bbr.defaultBackend.port")?;
    }
    Ok(())
}

pub(crate) fn check_port(port: Option<u32>, field: &str) -> Result {
    match port {
        Some(p) if !(1..=65535).contains(&p) => {
            Err(invalid(field, format!("must be 1..65535, got {p}")))
        }
        _ => Ok(()),
    }
}

fn check_tls(spec: &GatewaySpec) -> Result {
    let Some(tls) = &spec.tls else { return Ok(()) };
    match (&tls.cert_file, &tls.key_file) {
        (Some(_), None) => {
            return Err(invalid("spec.tls.keyFile", "certFile needs keyFile"));
        }
        (None, Some(_)) => {
            return Err(invalid("spec.tls.certFile", "keyFile needs certFile"));
        }
        (Some(c), Some(k)) if c.is_empty() || k.is_empty() => {
            return Err(invalid(
                "spec.tls.certFile",
                "certFile and keyFile must be paths",
            ));
        }
        _ => {}
    }
    if let Some(arn) = tls.acm_arn.as_deref().filter(|a| !a.is_empty()) {
        if !arn.starts_with("arn:") {
            return Err(invalid(
                "spec.tls.acmArn",
                format!("`{arn}` is not an ARN (arn:aws:acm:…)"),
            ));
        }
        if tls.cert_file.is_some() {
            return Err(invalid(
                "spec.tls.acmArn",
                "give either an ACM certificate or certFile/keyFile, not both",
            ));
        }
    }
    Ok(())
}

fn check_jwt(p: &JwtProvider) -> Result {
    let at = |f: &str| format!("spec.auth.jwt.provider.{f}");
    if p.name.is_empty() {
        return Err(invalid(at("name"), "must not be empty"));
    }
    if p.issuer.is_empty() {
        return Err(invalid(at("issuer"), "must not be empty"));
    }
    match (&p.remote_jwks, &p.local_jwks) {
        (None, None) => {
            return Err(invalid(
                at("remoteJWKS"),
                "signing keys are needed: set remoteJWKS.uri or localJWKS.file",
            ));
        }
        (Some(_), Some(_)) => {
            return Err(invalid(
                at("localJWKS"),
                "remoteJWKS and localJWKS are mutually exclusive",
            ));
        }
        (Some(remote), None) => {
            let host = remote
                .uri
                .strip_prefix("https://")
                .or_else(|| remote.uri.strip_prefix("http://"))
                .map(|rest| rest.split(['/', '?']).next().unwrap_or_default());
            if host.is_none_or(str::is_empty) {
                return Err(invalid(
                    at("remoteJWKS.uri"),
                    format!("`{}` is not an https:// URL", remote.uri),
                ));
            }
        }
        (None, Some(local)) => {
            if local.file.is_empty() {
                return Err(invalid(at("localJWKS.file"), "must be a path"));
            }
        }
    }
    if p.audiences.is_empty() && p.required_claims.is_empty() {
        return Err(invalid(
            at("audiences"),
            "set audiences or requiredClaims (or both): a token must be bound to this gateway",
        ));
    }
    if p.audiences.len() > limits::AUDIENCES {
        return Err(invalid(
            at("audiences"),
            format!(
                "at most {} audiences, got {}",
                limits::AUDIENCES,
                p.audiences.len()
            ),
        ));
    }
    if let Some(i) = p.audiences.iter().position(String::is_empty) {
        return Err(invalid(at(&format!("audiences[{i}]")), "must not be empty"));
    }
    if p.required_claims.len() > limits::REQUIRED_CLAIMS {
        return Err(invalid(
            at("requiredClaims"),
            format!(
                "at most {} required claims, got {}",
                limits::REQUIRED_CLAIMS,
                p.required_claims.len()
            ),
        ));
    }
    let mut names = BTreeSet::new();
    for (i, claim) in p.required_claims.iter().enumerate() {
        let at = |f: &str| at(&format!("requiredClaims[{i}].{f}"));
        if claim.name.is_empty() {
            return Err(invalid(at("name"), "must not be empty"));
        }
        if !names.insert(&claim.name) {
            return Err(invalid(
                at("name"),
                format!("claim `{}` is required twice", claim.name),
            ));
        }
        if claim.values.is_empty() || claim.values.len() > limits::CLAIM_VALUES {
            return Err(invalid(
                at("values"),
                format!(
                    "needs 1..{} values, got {}",
                    limits::CLAIM_VALUES,
                    claim.values.len()
                ),
            ));
        }
        for (j, v) in claim.values.iter().enumerate() {
            if v.is_empty() || v.chars().count() > limits::CLAIM_VALUE_LEN {
                return Err(invalid(
                    at(&format!("values[{j}]")),
                    format!("must be 1..{} characters", limits::CLAIM_VALUE_LEN),
                ));
            }
        }
    }
    Ok(())
}

fn check_listen(spec: &GatewaySpec) -> Result {
    let Some(listen) = &spec.listen else {
        return Ok(());
    };
    let parse = |value: &Option<String>, field: &str| -> Result<Option<SocketAddr>> {
        value
            .as_deref()
            .map(|v| {
                v.parse::<SocketAddr>()
                    .map_err(|e| invalid(field, format!("`{v}` is not ip:port ({e})")))
            })
            .transpose()
    };
    let address = parse(&listen.address, "spec.listen.address")?;
    let admin = parse(&listen.admin_address, "spec.listen.adminAddress")?;
    let address = address.unwrap_or(defaults::LISTEN_ADDRESS);
    let admin = admin.unwrap_or(defaults::ADMIN_ADDRESS);
    if address == admin {
        return Err(invalid(
            "spec.listen.adminAddress",
            "must differ from the inference listener's address",
        ));
    }
    match &listen.connections {
        Some(c) => crate::gateway::connections::check(c),
        None => Ok(()),
    }
}

fn check_discovery(spec: &GatewaySpec) -> Result {
    match effective_discovery(spec) {
        Discovery::Static => {
            let endpoints = spec.endpoints.as_deref().unwrap_or_default();
            if endpoints.is_empty() {
                return Err(invalid(
                    "spec.endpoints",
                    "static discovery needs at least one endpoint",
                ));
            }
            let mut seen = BTreeSet::new();
            let mut found = Findings::default();
            for (i, e) in endpoints.iter().enumerate() {
                found.note(check_endpoint(i, e, &mut seen));
            }
            return found.finish();
        }
        Discovery::Kubernetes { namespace } => {
            if spec.endpoints.is_some() {
                return Err(invalid(
                    "spec.endpoints",
                    "only static discovery reads spec.endpoints: remove them or set \
                     spec.discovery: static",
                ));
            }
            if let Some(ns) = namespace.as_deref().filter(|ns| !is_dns_label(ns)) {
                return Err(invalid(
                    "spec.discovery.kubernetes.namespace",
                    format!("`{ns}` is not a Kubernetes namespace name"),
                ));
            }
        }
    }
    Ok(())
}

/// `spec.endpoints[i]`: its address (unique among `seen`) and labels.
fn check_endpoint(i: usize, e: &EndpointSpec, seen: &mut BTreeSet<EndpointAddress>) -> Result {
    let field = format!("spec.endpoints[{i}].address");
    let address: EndpointAddress = e.address.parse().map_err(|r| invalid(&field, r))?;
    if !seen.insert(address.clone()) {
        return Err(invalid(field, format!("{address} is listed twice")));
    }
    for (k, v) in &e.labels {
        let at = format!("spec.endpoints[{i}].labels.{k}");
        check_label_key(k).map_err(|r| invalid(&at, r))?;
        check_label_value(v).map_err(|r| invalid(&at, r))?;
    }
    Ok(())
}

/// A base model in `spec.loraAdapterMaps` must be some scheduler's `modelName`: otherwise its
/// adapters route nowhere.
fn check_lora_maps(spec: &GatewaySpec) -> Result {
    let mut found = Findings::default();
    for (i, m) in spec.lora_adapter_maps.iter().enumerate() {
        if !spec.schedulers.iter().any(|s| s.model_name == m.base_model) {
            found.note::<()>(Err(invalid(
                format!("spec.loraAdapterMaps[{i}].baseModel"),
                format!(
                    "no scheduler serves `{}` (no modelName matches), so its adapters would \
                     route nowhere",
                    m.base_model
                ),
            )));
        }
    }
    found.finish()
}
