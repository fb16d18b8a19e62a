//! Body-based routing: a model name → its pool, with the adapter and base model that the
//! upstream headers carry. Built once per config (and per reload), read per request.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use infergate_config::gateway::{DefaultBackend, ResolvedDiscovery, ResolvedGateway};

pub mod rewrites;

use infergate_telemetry::metrics::Metrics;

use crate::discovery::{self, MemberSource};
use crate::error::GatewayError;
use crate::policy::PickerConfigSource;
use crate::pool::PoolRuntime;
use crate::routes::rewrites::Rewrites;

/// Where a request goes.
#[derive(Debug, Clone)]
pub struct Target {
    /// The pool.
    pub pool: Arc<PoolRuntime>,
    /// The adapter the model names, if it is one.
    pub adapter: Option<String>,
    /// `X-Gateway-Base-Model-Name`: the pool's model, or empty for the default backend.
    pub base_model: String,
}

/// The routing table of one config.
#[derive(Debug)]
pub struct Routes {
    /// The config it was built from.
    pub config: ResolvedGateway,
    /// One per scheduler, in config order.
    pub pools: Vec<Arc<PoolRuntime>>,
    /// The canary rules, by the model names they match.
    pub rewrites: Rewrites,
    by_name: HashMap<String, usize>,
    default_backend: Option<Arc<PoolRuntime>>,
    models: Bytes,
}

impl Routes {
    /// Builds every pool, its members from `spec.endpoints` or, under Kubernetes discovery,
    /// from `source`, a `configMapRef` from `picker_configs`. With `previous` (a reload), pools that keep their name keep their
    /// learned state and the metrics of endpoints that stay.
    pub fn build(
        config: ResolvedGateway,
        config_dir: Option<&Path>,
        source: Option<&dyn MemberSource>,
        picker_configs: Option<&dyn PickerConfigSource>,
        previous: Option<&Routes>,
        metrics: &Metrics,
    ) -> Result<Self, GatewayError> {
        let mut pools = Vec::with_capacity(config.pools.len());
        let mut by_name = HashMap::with_capacity(config.pools.len());
        for (i, p) in config.pools.iter().enumerate() {
            // The models a config routes are always reported under their own names: only
            // names clients invent fold into `other`.
            metrics.models.pin(&p.model_name);
            for adapter in &p.adapters {
                metrics.models.pin(adapter);
            }
            let policy = crate::policy::pool_policy(p, config_dir, picker_configs)?;
            let prev = previous.and_then(|r| r.pool(&p.name));
            let members = match (&config.discovery, source) {
                (ResolvedDiscovery::Static, _) => discovery::static_members(p),
                (ResolvedDiscovery::Kubernetes { .. }, Some(source)) => source.members(p),
                (ResolvedDiscovery::Kubernetes { .. }, None) => {
                    return Err(GatewayError::unsupported(
                        "spec.discovery",
                        "Kubernetes discovery needs the Kubernetes API: run `infergate serve --config F` or `--from-cluster NAME` with a kubeconfig or in a pod, or list spec.endpoints",
                    ))
                }
            };
            pools.push(Arc::new(PoolRuntime::new(
                p,
                &config,
                policy,
                members,
                prev.map(|a| &**a),
                metrics,
            )?));
            by_name.insert(p.name.clone(), i);
        }
        let default_backend = match &config.bbr.default_backend {
            None => None,
            Some(DefaultBackend::Pool(i)) => pools.get(*i).cloned(),
            Some(DefaultBackend::Host { host, port }) => Some(Arc::new(PoolRuntime::host(
                "default-backend",
                &format!("{host}:{}", port.value),
                &config,
                metrics,
            )?)),
        };
        let models = models_body(&config);
        let rewrites = Rewrites::new(&config.rewrites);
        Ok(Self {
            config,
            pools,
            rewrites,
            by_name,
            default_backend,
            models,
        })
    }

    /// The pool named `name`.
    pub fn pool(&self, name: &str) -> Option<&Arc<PoolRuntime>> {
        self.pools.get(*self.by_name.get(name)?)
    }

    /// Where a request for `model` goes; `None`: 404.
    pub fn route(&self, model: &str) -> Option<Target> {
        if let Some(r) = self.config.lookup_model(model) {
            let pool = self.pool(&r.pool.name)?;
            return Some(Target {
                pool: Arc::clone(pool),
                adapter: r.adapter.map(str::to_owned),
                base_model: r.base_model.to_owned(),
            });
        }
        self.default_backend.as_ref().map(|pool| Target {
            pool: Arc::clone(pool),
            adapter: None,
            base_model: String::new(),
        })
    }

    /// The `GET /v1/models` body.
    pub fn models(&self) -> Bytes {
        self.models.clone()
    }

    /// Every pool that is scraped, default backend included when it is one.
    pub fn scraped_pools(&self) -> impl Iterator<Item = &Arc<PoolRuntime>> {
        self.pools.iter().filter(|p| p.scraped)
    }
}

/// Every pool's model and its adapters, in OpenAI's list shape (adapters name their parent, as
/// vLLM lists them).
fn models_body(config: &ResolvedGateway) -> Bytes {
    let mut data = Vec::new();
    for p in &config.pools {
        data.push(serde_json::json!({
            "id": p.model_name, "object": "model", "created": 0, "owned_by": "infergate",
            "root": p.model_name, "parent": null,
        }));
        for a in &p.adapters {
            data.push(serde_json::json!({
                "id": a, "object": "model", "created": 0, "owned_by": "infergate",
                "root": a, "parent": p.model_name,
            }));
        }
    }
    Bytes::from(serde_json::json!({"object": "list", "data": data}).to_string())
}
