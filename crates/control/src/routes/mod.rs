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

/// The names that route to one pool, as a client would write them in `model`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PoolNames {
    /// Model names: the pool's `modelName` (unless an adapter or a rewrite rule takes it
    /// elsewhere) first, then, sorted, every rewrite rule's model with a target served here.
    pub models: Vec<String>,
    /// Its LoRA adapters (unless a rewrite rule takes the name elsewhere), sorted.
    pub adapters: Vec<String>,
}

/// The routing table of one config.
#[derive(Debug)]
pub struct Routes {
    /// The config it was built from.
    pub config: ResolvedGateway,
    /// One per scheduler, in config order.
    pub pools: Vec<Arc<PoolRuntime>>,
    /// The names routed to each of `pools`, in the same order (one per pool).
    pub names: Vec<PoolNames>,
    /// How each of `pools` picks, in one line ([`infergate_config::gateway::Pool::routing_definition`]),
    /// in the same order: what the member status reports for the global tier's drift check,
    /// made once per config.
    pub routing: Vec<String>,
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
        let names = pool_names(&config);
        let routing = config
            .pools
            .iter()
            .map(infergate_config::gateway::Pool::routing_definition)
            .collect();
        Ok(Self {
            config,
            pools,
            names,
            routing,
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

/// The names routed to each pool of `config`, in its order: what a request naming them meets
/// in the rewrite and route steps. A rule's model is rewritten before routing, so it goes
/// wherever a target goes and nowhere else, even when it is also a pool's `modelName` or an
/// adapter. Built once per config, so a reader never walks the rules.
fn pool_names(config: &ResolvedGateway) -> Vec<PoolNames> {
    let rewritten = |name: &str| {
        config
            .rewrites
            .iter()
            .any(|r| r.models.iter().any(|m| m == name))
    };
    let routes_to = |name: &str, pool: &str| {
        config
            .lookup_model(name)
            .is_some_and(|r| r.pool.name == pool)
    };
    config
        .pools
        .iter()
        .map(|p| {
            let mut aliases: Vec<String> = config
                .rewrites
                .iter()
                .filter(|r| r.targets.iter().any(|(t, _)| routes_to(t, &p.name)))
                .flat_map(|r| r.models.iter().cloned())
                .collect();
            aliases.sort();
            aliases.dedup();
            let own = config
                .lookup_model(&p.model_name)
                .is_some_and(|r| r.pool.name == p.name && r.adapter.is_none())
                && !rewritten(&p.model_name);
            let mut models: Vec<String> = own.then(|| p.model_name.clone()).into_iter().collect();
            // With `own`, the pool's name is no rule's model, so it is not among the aliases.
            models.extend(aliases);
            let mut adapters: Vec<String> = p
                .adapters
                .iter()
                .filter(|a| !rewritten(a) && routes_to(a, &p.name))
                .cloned()
                .collect();
            adapters.sort();
            PoolNames { models, adapters }
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(yaml: &str) -> ResolvedGateway {
        infergate_config::gateway::load_from_str(yaml)
            .expect("parses")
            .resolve()
            .expect("resolves")
    }

    #[test]
    fn each_pool_lists_its_model_its_adapters_and_the_rules_that_reach_it() {
        let config = resolve(
            r#"apiVersion: infergate.dev/v1alpha1
kind: InferenceGatewayConfig
spec:
  bbr: {enabled: true}
  schedulers:
    - {name: stable, modelName: llama-stable, modelSelector: {matchLabels: {app: s}}, loraAdapters: [sql-lora, chat-lora]}
    - {name: canary, modelName: llama-canary, modelSelector: {matchLabels: {app: c}}}
    - {name: old, modelName: llama, modelSelector: {matchLabels: {app: o}}}
  rewrites:
    - matches: [{model: {type: Exact, value: llama}}, {model: {type: Exact, value: chat-alias}}]
      targets: [{modelRewrite: llama-stable, weight: 90}, {modelRewrite: llama-canary, weight: 10}]
    - matches: [{model: {type: Exact, value: chat-lora}}]
      targets: [{modelRewrite: llama-canary}]
  endpoints:
    - {address: "127.0.0.1:9", labels: {app: s}}
"#,
        );
        let names = pool_names(&config);
        assert_eq!(names.len(), 3);
        assert_eq!(names[0].models, ["llama-stable", "chat-alias", "llama"]);
        // `chat-lora` is rewritten before routing: it reaches the canary, not its adapter.
        assert_eq!(names[0].adapters, ["sql-lora"]);
        assert_eq!(
            names[1].models,
            ["llama-canary", "chat-alias", "chat-lora", "llama"]
        );
        assert!(names[1].adapters.is_empty());
        // `llama` is the old pool's modelName, but every request for it is rewritten away.
        assert!(names[2].models.is_empty(), "{:?}", names[2]);
    }
}
