//! Resolution: a validated config with every default applied (and marked), one [`Pool`] per
//! scheduler with its static endpoints, the adapter table, and the model → pool routes that
//! body-based routing reads per request.

mod notes;
mod pool;
mod traffic;

pub use pool::{EffectiveWeights, PickerSource, Pool, PoolEndpoint};
pub use traffic::{
    Identity, ResolvedBand, ResolvedFlowControl, ResolvedOverload, ResolvedRateLimits,
    ResolvedSaturation, ResolvedTenancy,
};

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use super::auth::JwtProvider;
use super::defaults;
use super::error::{invalid, GatewayConfigError};
use super::lora::{AdapterTable, ConfigMapAdapterMap};
use super::setting::Setting;
use super::types::{ApiVersion, Discovery, GatewaySpec, InferenceGatewayConfig, Tls};
use super::validate::{effective_discovery, validate};

/// How the listener serves TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsMode {
    /// No `spec.tls`: plain HTTP.
    Plain,
    /// `tls: {}`: a certificate made at start-up.
    SelfSigned,
    /// `tls: {certFile, keyFile}`.
    Files {
        /// PEM certificate chain.
        cert_file: String,
        /// PEM private key.
        key_file: String,
    },
    /// `tls: {acmArn}`: the load balancer terminates TLS with an ACM certificate (Kubernetes
    /// deployment); a standalone gateway cannot read it.
    Acm {
        /// The certificate's ARN.
        arn: String,
    },
}

impl TlsMode {
    fn new(tls: Option<&Tls>) -> TlsMode {
        let Some(tls) = tls else {
            return TlsMode::Plain;
        };
        match (&tls.cert_file, &tls.key_file, &tls.acm_arn) {
            (Some(c), Some(k), _) => TlsMode::Files {
                cert_file: c.clone(),
                key_file: k.clone(),
            },
            (_, _, Some(arn)) if !arn.is_empty() => TlsMode::Acm { arn: arn.clone() },
            _ => TlsMode::SelfSigned,
        }
    }
}

/// `spec.bbr`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedBbr {
    /// Body-based routing on. Off (one scheduler only): every request goes to that pool.
    pub enabled: bool,
    /// Largest body read; larger gets 413.
    pub max_request_body_bytes: Setting<u64>,
    /// Request body bytes held at once over every request; a body that would pass it gets 503.
    pub max_buffered_body_bytes: Setting<u64>,
    /// Where a request naming no served model goes; `None`: 404.
    pub default_backend: Option<DefaultBackend>,
}

/// `spec.bbr.defaultBackend`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultBackend {
    /// A scheduler's pool, by index into [`ResolvedGateway::pools`].
    Pool(usize),
    /// A host (a Service in Kubernetes).
    Host {
        /// Host name.
        host: String,
        /// Port.
        port: Setting<u16>,
    },
}

/// Where endpoints come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolvedDiscovery {
    /// `spec.endpoints`, matched into each pool.
    Static,
    /// Pods watched in a namespace; `None`: the gateway's own.
    Kubernetes {
        /// Namespace: `spec.discovery.kubernetes.namespace`, else `metadata.namespace`.
        namespace: Setting<Option<String>>,
    },
}

/// A knob only the Kubernetes deployment honours, reported by a standalone gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentKnob {
    /// Its path.
    pub field: String,
    /// Its value, summarised.
    pub value: String,
}

/// A rewrite rule, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedRewrite {
    /// Its name, if any.
    pub name: Option<String>,
    /// The request models it applies to.
    pub models: Vec<String>,
    /// Target models with their weights.
    pub targets: Vec<(String, Setting<u32>)>,
    /// Where a session id is read, when sessions stick to one target.
    pub stickiness: Option<SessionKey>,
}

/// Where a request's session id is read (`spec.rewrites[].stickiness`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionKey {
    /// A request header (lowercase).
    Header(String),
    /// A top-level string field of the request body.
    Field(String),
}

impl SessionKey {
    fn from_spec(s: &crate::gateway::traffic::Stickiness) -> Option<SessionKey> {
        match (&s.header, &s.field) {
            (Some(h), _) => Some(SessionKey::Header(h.clone())),
            (None, Some(f)) => Some(SessionKey::Field(f.clone())),
            (None, None) => None,
        }
    }
}

/// Where body-based routing sends a model name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelRoute<'a> {
    /// The pool.
    pub pool: &'a Pool,
    /// The adapter the name denotes, if it is one.
    pub adapter: Option<&'a str>,
    /// The base model: the pool's `modelName` (the `X-Gateway-Base-Model-Name` value).
    pub base_model: &'a str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Route {
    pool: usize,
    adapter: bool,
}

/// A config with every default applied: what a gateway runs and what `infergate check` shows.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedGateway {
    /// `metadata.name`.
    pub name: Option<String>,
    /// `apiVersion`.
    pub api_version: ApiVersion,
    /// Inference listener.
    pub listen: Setting<SocketAddr>,
    /// Admin listener.
    pub admin_listen: Setting<SocketAddr>,
    /// The inference listener's connection limits and timeouts.
    pub connections: super::connections::ResolvedConnections,
    /// TLS.
    pub tls: TlsMode,
    /// JWT auth, when on.
    pub auth: Option<JwtProvider>,
    /// Body-based routing.
    pub bbr: ResolvedBbr,
    /// Prometheus metrics export.
    pub metrics_enabled: Setting<bool>,
    /// Endpoint discovery.
    pub discovery: ResolvedDiscovery,
    /// One per scheduler, in order.
    pub pools: Vec<Pool>,
    /// Every adapter → base model.
    pub adapters: AdapterTable,
    /// Canary rules.
    pub rewrites: Vec<ResolvedRewrite>,
    /// Tenant and criticality sources.
    pub tenancy: ResolvedTenancy,
    /// Admission control.
    pub flow_control: ResolvedFlowControl,
    /// Rate limits, when set.
    pub rate_limits: Option<ResolvedRateLimits>,
    /// Set knobs that only the Kubernetes deployment honours.
    pub deployment_knobs: Vec<DeploymentKnob>,
    /// Things that load but deserve attention (shadowed names, empty pools, no TLS, …).
    pub warnings: Vec<String>,
    routes: HashMap<String, Route>,
}

/// Validates and resolves a config.
pub fn resolve(config: &InferenceGatewayConfig) -> Result<ResolvedGateway, GatewayConfigError> {
    resolve_with_config_maps(config, &[])
}

/// Validates and resolves a config, with LoRA adapter maps read from ConfigMaps as well.
pub fn resolve_with_config_maps(
    config: &InferenceGatewayConfig,
    config_maps: &[ConfigMapAdapterMap],
) -> Result<ResolvedGateway, GatewayConfigError> {
    validate(config)?;
    let spec = &config.spec;
    let adapters = AdapterTable::build(&spec.schedulers, &spec.lora_adapter_maps, config_maps)?;
    let mut warnings = Vec::new();

    let discovery = match effective_discovery(spec) {
        Discovery::Static => ResolvedDiscovery::Static,
        Discovery::Kubernetes { namespace } => {
            let own = config.metadata.as_ref().and_then(|m| m.namespace.clone());
            ResolvedDiscovery::Kubernetes {
                namespace: match namespace {
                    Some(ns) => Setting::set(Some(ns)),
                    None => Setting::default_value(own),
                },
            }
        }
    };
    let statik = discovery == ResolvedDiscovery::Static;

    let (routes, pool_adapters) = build_routes(spec, &adapters, &mut warnings);

    let endpoints = if statik {
        spec.endpoints.as_deref()
    } else {
        None
    };
    let pools: Vec<Pool> = spec
        .schedulers
        .iter()
        .zip(pool_adapters)
        .map(|(s, mut names)| {
            names.sort();
            Pool::new(s, names, endpoints)
        })
        .collect();

    let listen = config_listen(
        spec.listen.as_ref().and_then(|l| l.address.as_deref()),
        defaults::LISTEN_ADDRESS,
    );
    let admin_listen = config_listen(
        spec.listen
            .as_ref()
            .and_then(|l| l.admin_address.as_deref()),
        defaults::ADMIN_ADDRESS,
    );

    let default_backend = spec.bbr.default_backend.as_ref().map(|b| {
        match spec.schedulers.iter().position(|s| s.name == b.name) {
            Some(i) => DefaultBackend::Pool(i),
            None => DefaultBackend::Host {
                host: b.name.clone(),
                port: Setting::or(
                    b.port.and_then(|p| u16::try_from(p).ok()),
                    defaults::DEFAULT_BACKEND_PORT,
                ),
            },
        }
    });

    let mut resolved = ResolvedGateway {
        name: config.metadata.as_ref().and_then(|m| m.name.clone()),
        api_version: config.api_version,
        listen,
        admin_listen,
        connections: super::connections::ResolvedConnections::new(
            spec.listen.as_ref().and_then(|l| l.connections.as_ref()),
        ),
        tls: TlsMode::new(spec.tls.as_ref()),
        auth: spec.auth.as_ref().map(|a| a.jwt.provider.clone()),
        bbr: ResolvedBbr {
            enabled: spec.bbr.enabled,
            max_request_body_bytes: Setting::or(
                spec.bbr.max_request_body_bytes,
                defaults::DEFAULT_REQUEST_BODY_BYTES,
            ),
            max_buffered_body_bytes: Setting::or(
                spec.bbr.max_buffered_body_bytes,
                defaults::MAX_BUFFERED_BODY_BYTES,
            ),
            default_backend,
        },
        metrics_enabled: Setting::or(
            spec.observability
                .as_ref()
                .and_then(|o| o.metrics.as_ref())
                .and_then(|m| m.enabled),
            defaults::METRICS_ENABLED,
        ),
        discovery,
        pools,
        adapters,
        rewrites: Vec::new(),
        tenancy: ResolvedTenancy::new(spec.tenancy.as_ref()),
        flow_control: ResolvedFlowControl::new(spec.flow_control.as_ref()),
        rate_limits: spec.rate_limits.as_ref().map(ResolvedRateLimits::new),
        deployment_knobs: notes::deployment_knobs(config),
        warnings,
        routes,
    };
    resolved.rewrites = resolve_rewrites(config, &resolved)?;
    let endpoint_count = match (&resolved.discovery, &spec.endpoints) {
        (ResolvedDiscovery::Static, Some(e)) => e.len(),
        _ => 0,
    };
    resolved.warn(endpoint_count);
    Ok(resolved)
}

/// The model → pool routes: model names first, then adapters, which win over a model name.
/// Also returns each pool's adapters.
fn build_routes(
    spec: &GatewaySpec,
    adapters: &AdapterTable,
    warnings: &mut Vec<String>,
) -> (HashMap<String, Route>, Vec<Vec<String>>) {
    let mut routes: HashMap<String, Route> = HashMap::new();
    for (i, s) in spec.schedulers.iter().enumerate() {
        routes.insert(
            s.model_name.clone(),
            Route {
                pool: i,
                adapter: false,
            },
        );
    }
    let pool_of_model: BTreeMap<&str, usize> = spec
        .schedulers
        .iter()
        .enumerate()
        .map(|(i, s)| (s.model_name.as_str(), i))
        .collect();
    let mut pool_adapters: Vec<Vec<String>> = vec![Vec::new(); spec.schedulers.len()];
    let mut unserved: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (adapter, entry) in adapters.iter() {
        let Some(&pool) = pool_of_model.get(entry.base_model.as_str()) else {
            unserved.entry(&entry.base_model).or_default().push(adapter);
            continue;
        };
        pool_adapters[pool].push(adapter.to_owned());
        let previous = routes.insert(
            adapter.to_owned(),
            Route {
                pool,
                adapter: true,
            },
        );
        if let Some(shadowed) = previous.filter(|r| !r.adapter) {
            warnings.push(format!(
                "`{adapter}` is the modelName of scheduler `{}` and also an adapter of `{}` \
                 ({}): an adapter name wins, so requests naming it go to pool `{}`",
                spec.schedulers[shadowed.pool].name,
                entry.base_model,
                entry.origin,
                spec.schedulers[pool].name
            ));
        }
    }
    for (base, names) in unserved {
        warnings.push(format!(
            "no scheduler serves base model `{base}`, so its adapters ({}) get 404{}",
            names.join(", "),
            if spec.bbr.default_backend.is_some() {
                " (or the default backend)"
            } else {
                ""
            }
        ));
    }
    (routes, pool_adapters)
}

/// Validation has parsed a written address, so `written` never fails to parse here.
fn config_listen(written: Option<&str>, default: SocketAddr) -> Setting<SocketAddr> {
    Setting::or(written.and_then(|a| a.parse().ok()), default)
}

/// Each rule's targets must be models some pool serves.
fn resolve_rewrites(
    config: &InferenceGatewayConfig,
    gw: &ResolvedGateway,
) -> Result<Vec<ResolvedRewrite>, GatewayConfigError> {
    let mut out = Vec::new();
    for (i, rule) in config.spec.rewrites.iter().enumerate() {
        let mut targets = Vec::new();
        for (j, t) in rule.targets.iter().enumerate() {
            if gw.lookup_model(&t.model_rewrite).is_none() {
                return Err(invalid(
                    format!("spec.rewrites[{i}].targets[{j}].modelRewrite"),
                    format!(
                        "no scheduler serves `{}` (neither a modelName nor a known adapter)",
                        t.model_rewrite
                    ),
                ));
            }
            targets.push((
                t.model_rewrite.clone(),
                Setting::or(t.weight, defaults::REWRITE_WEIGHT),
            ));
        }
        out.push(ResolvedRewrite {
            name: rule.name.clone(),
            models: rule.matches.iter().map(|m| m.model.value.clone()).collect(),
            targets,
            stickiness: rule.stickiness.as_ref().and_then(SessionKey::from_spec),
        });
    }
    Ok(out)
}

impl ResolvedGateway {
    /// Body-based routing: adapter → its base model's pool, else model name → its pool. With
    /// BBR off (one scheduler), every name goes to that pool. `None`: no pool serves the name
    /// (the caller then uses [`ResolvedBbr::default_backend`] or answers 404).
    pub fn lookup_model(&self, model: &str) -> Option<ModelRoute<'_>> {
        let (name, route) = match self.routes.get_key_value(model) {
            Some((name, r)) => (Some(name.as_str()), *r),
            None if !self.bbr.enabled && self.pools.len() == 1 => (
                None,
                Route {
                    pool: 0,
                    adapter: false,
                },
            ),
            None => return None,
        };
        let pool = self.pools.get(route.pool)?;
        Some(ModelRoute {
            pool,
            adapter: name.filter(|_| route.adapter),
            base_model: &pool.model_name,
        })
    }

    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&Pool> {
        self.pools.iter().find(|p| p.name == name)
    }
}
