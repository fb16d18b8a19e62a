//! `infergate extproc --pool-name N`: the Gateway API Inference Extension's `InferencePool`
//! (`inference.networking.k8s.io/v1`) N watched by name, its selector and target ports giving
//! the one pool's members (one endpoint per pod and target port), and the pool's
//! `InferenceModelRewrite`s (`llm-d.ai/v1alpha2`, else the legacy
//! `inference.networking.x-k8s.io/v1alpha2`) its canary splits. The config the picker runs is
//! made from them, with the pool's `InferenceObjective`s (same groups) giving the priority of a
//! request whose objective header names one; every change to any of them is a reload.
//!
//! As upstream: a pool that is not there yet leaves the picker unsynced (not ready, no
//! endpoints); a pool that is deleted, or has a `deletionTimestamp`, clears the endpoints; an
//! optional CRD that is not installed is skipped with a log line.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use infergate_config::gateway::{self, LabelSelector, Pool as PoolConfig, ResolvedGateway};
use infergate_control::discovery::{MemberSource, SourceHealth};
use infergate_control::PlaneHandle;
use infergate_picker::EndpointSpec;
use kube::core::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::members::PodDiscovery;
use crate::watch::Watched;

/// What of an InferencePool the picker uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    /// `spec.selector.matchLabels`.
    pub match_labels: BTreeMap<String, String>,
    /// `spec.targetPorts[].number`, in order (a port's index is its rank).
    pub target_ports: Vec<u16>,
    /// `spec.appProtocol` (`http` when unset).
    pub app_protocol: String,
}

/// Reads an InferencePool object; `None` for one being deleted; the error names the field.
pub fn read_pool(obj: &DynamicObject) -> Result<Option<PoolSpec>, String> {
    if obj.metadata.deletion_timestamp.is_some() {
        return Ok(None);
    }
    let spec = obj.data.get("spec").ok_or("spec: missing")?;
    let match_labels: BTreeMap<String, String> = spec
        .pointer("/selector/matchLabels")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| format!("spec.selector.matchLabels: {e}"))?
        .unwrap_or_default();
    if match_labels.is_empty() {
        return Err("spec.selector.matchLabels: at least one label is required".to_owned());
    }
    let mut target_ports = Vec::new();
    for (i, p) in spec
        .get("targetPorts")
        .and_then(Value::as_array)
        .ok_or("spec.targetPorts: missing")?
        .iter()
        .enumerate()
    {
        let n = p
            .get("number")
            .and_then(Value::as_u64)
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("spec.targetPorts[{i}].number: a port 1..65535"))?;
        target_ports.push(n);
    }
    if target_ports.is_empty() {
        return Err("spec.targetPorts: at least one port".to_owned());
    }
    let app_protocol = spec
        .get("appProtocol")
        .and_then(Value::as_str)
        .unwrap_or("http")
        .to_owned();
    Ok(Some(PoolSpec {
        match_labels,
        target_ports,
        app_protocol,
    }))
}

/// The rewrite rules of `objects` (InferenceModelRewrites) whose `spec.poolRef.name` is
/// `pool`, in upstream precedence: oldest object first, then by name, rules in their order
/// (exact matches beating catch-alls is the rewrite table's own rule).
pub fn read_rewrites(objects: &[Arc<DynamicObject>], pool: &str) -> Vec<Value> {
    let mut mine: Vec<&Arc<DynamicObject>> = objects
        .iter()
        .filter(|o| o.data.pointer("/spec/poolRef/name").and_then(Value::as_str) == Some(pool))
        .collect();
    mine.sort_by(|a, b| {
        let key = |o: &DynamicObject| {
            (
                o.metadata.creation_timestamp.clone().map(|t| t.0),
                o.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    mine.iter()
        .flat_map(|o| {
            let name = o.metadata.name.clone().unwrap_or_default();
            o.data
                .pointer("/spec/rules")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(move |(i, rule)| {
                    json!({
                        "name": format!("{name}[{i}]"),
                        "matches": rule.get("matches").cloned().unwrap_or(json!([])),
                        "targets": rule.get("targets").cloned().unwrap_or(json!([])),
                    })
                })
        })
        .collect()
}

/// The config the picker runs for `pool` in `namespace`: one scheduler over the pool's pods,
/// which every request goes to whatever its model (the pool is the route; the model only
/// selects adapters and rewrites).
pub fn pool_config(
    pool: &str,
    namespace: &str,
    spec: &PoolSpec,
    rewrites: &[Value],
) -> Result<ResolvedGateway, String> {
    let doc = json!({
        "apiVersion": "infergate.dev/v1alpha1",
        "kind": "InferenceGatewayConfig",
        "metadata": {"name": pool, "namespace": namespace},
        "spec": {
            "bbr": {"enabled": true, "defaultBackend": {"name": pool}},
            "discovery": {"kubernetes": {"namespace": namespace}},
            "schedulers": [{
                "name": pool,
                "modelName": pool,
                "modelSelector": {"matchLabels": spec.match_labels},
                "targetPort": spec.target_ports[0],
                "appProtocol": spec.app_protocol,
            }],
            "rewrites": rewrites,
        },
    });
    let config = gateway::load_from_str(&doc.to_string()).map_err(|e| e.to_string())?;
    config.resolve().map_err(|e| e.to_string())
}

/// The priority of each InferenceObjective of `objects` whose `spec.poolRef.name` is `pool`,
/// by object name (an unset priority is 0).
pub fn read_objectives(objects: &[Arc<DynamicObject>], pool: &str) -> BTreeMap<String, i64> {
    objects
        .iter()
        .filter(|o| o.data.pointer("/spec/poolRef/name").and_then(Value::as_str) == Some(pool))
        .filter_map(|o| {
            let priority = o
                .data
                .pointer("/spec/priority")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            Some((o.metadata.name.clone()?, priority))
        })
        .collect()
}

fn optional_resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.to_owned(),
        version: "v1alpha2".to_owned(),
        api_version: format!("{group}/v1alpha2"),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    }
}

/// The groups of the optional CRDs, newest first: when both are served the newest is read.
const OPTIONAL_GROUPS: [&str; 2] = ["llm-d.ai", "inference.networking.x-k8s.io"];

/// Watches the first group of [`OPTIONAL_GROUPS`] that serves `plural`; `None` (with a log
/// line) when none does.
async fn watch_optional(
    client: &Client,
    namespace: &str,
    kind: &str,
    plural: &'static str,
    changed: &Arc<Notify>,
) -> Option<Watched<DynamicObject>> {
    for group in OPTIONAL_GROUPS {
        let ar = optional_resource(group, kind, plural);
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
        match api.list(&kube::api::ListParams::default().limit(1)).await {
            Ok(_) => {
                tracing::info!(group, kind, "watching");
                return Some(Watched::start_with(
                    api,
                    ar,
                    watcher::Config::default(),
                    plural,
                    changed,
                ));
            }
            Err(e) => tracing::info!(group, kind, error = %e, "not served here; skipped"),
        }
    }
    None
}

/// What the picker's config is made from: the pool's spec, its rewrite rules and its
/// objectives' priorities; a reload when any of them changes.
type Inputs = (
    Result<Option<PoolSpec>, String>,
    Vec<Value>,
    BTreeMap<String, i64>,
);

/// The InferencePool, its rewrites and its pods, watched; the member source of the one pool.
#[derive(Debug)]
pub struct InferencePoolSource {
    name: String,
    namespace: String,
    pods: Arc<PodDiscovery>,
    pool: Watched<DynamicObject>,
    rewrites: Option<Watched<DynamicObject>>,
    objectives: Option<Watched<DynamicObject>>,
    changed: Arc<Notify>,
    /// The spec the members follow; `None` while the pool is absent (no endpoints).
    spec: Mutex<Option<PoolSpec>>,
    /// What the config last made was made from.
    built: Mutex<Option<Inputs>>,
}

/// How long start-up waits for the pool to exist before serving unsynced.
const FIRST_WAIT: Duration = Duration::from_secs(30);

impl InferencePoolSource {
    /// Starts the watches: the pool by name, its pods, and the rewrites when their CRD is
    /// installed. Must run inside a tokio runtime.
    pub async fn start(client: Client, name: &str, namespace: &str) -> Arc<Self> {
        let changed = Arc::new(Notify::new());
        let ar = ApiResource {
            group: "inference.networking.k8s.io".to_owned(),
            version: "v1".to_owned(),
            api_version: "inference.networking.k8s.io/v1".to_owned(),
            kind: "InferencePool".to_owned(),
            plural: "inferencepools".to_owned(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
        let by_name = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let pool = Watched::start_with(api, ar, by_name, "inferencepools", &changed);
        let rewrites = watch_optional(
            &client,
            namespace,
            "InferenceModelRewrite",
            "inferencemodelrewrites",
            &changed,
        )
        .await;
        let objectives = watch_optional(
            &client,
            namespace,
            "InferenceObjective",
            "inferenceobjectives",
            &changed,
        )
        .await;
        let pods = PodDiscovery::start(client, namespace);
        let source = Arc::new(Self {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            pods,
            pool,
            rewrites,
            objectives,
            changed,
            spec: Mutex::new(None),
            built: Mutex::new(None),
        });
        if !source.pool.health.wait_synced(FIRST_WAIT).await
            || !source.pods.wait_synced(FIRST_WAIT).await
        {
            tracing::warn!(
                pool = name,
                "the InferencePool or its pods are not listed yet; not ready until they are"
            );
        }
        source
    }

    fn current_spec(&self) -> Result<Option<PoolSpec>, String> {
        match self.pool.store.state().into_iter().next() {
            None => Ok(None),
            Some(obj) => read_pool(&obj),
        }
    }

    fn rewrite_rules(&self) -> Vec<Value> {
        self.rewrites
            .as_ref()
            .map(|w| read_rewrites(&w.store.state(), &self.name))
            .unwrap_or_default()
    }

    fn objective_priorities(&self) -> BTreeMap<String, i64> {
        self.objectives
            .as_ref()
            .map(|w| read_objectives(&w.store.state(), &self.name))
            .unwrap_or_default()
    }

    fn inputs(&self) -> Inputs {
        (
            self.current_spec(),
            self.rewrite_rules(),
            self.objective_priorities(),
        )
    }

    /// The config to serve now; `None` while the pool is absent or invalid (said in the log).
    pub fn config(&self) -> Option<ResolvedGateway> {
        self.config_from(self.inputs())
    }

    /// The config `inputs` make, remembered as the one [`InferencePoolSource::run`] starts
    /// from, so the config the picker started with is not loaded a second time.
    fn config_from(&self, inputs: Inputs) -> Option<ResolvedGateway> {
        *self.built.lock().unwrap_or_else(PoisonError::into_inner) = Some(inputs.clone());
        let (spec, rules, objectives) = inputs;
        let spec = match spec {
            Ok(Some(spec)) => spec,
            Ok(None) => return None,
            Err(e) => {
                tracing::error!(pool = %self.name, error = %e, "InferencePool refused");
                return None;
            }
        };
        match pool_config(&self.name, &self.namespace, &spec, &rules) {
            Ok(mut c) => {
                c.tenancy.objectives = objectives;
                *self.spec.lock().unwrap_or_else(PoisonError::into_inner) = Some(spec);
                Some(c)
            }
            Err(e) => {
                tracing::error!(pool = %self.name, error = %e, "InferencePool or its rewrites refused");
                None
            }
        }
    }

    /// A config to start with while the pool is absent: the same pool, selecting nothing.
    pub fn placeholder(&self) -> Result<ResolvedGateway, String> {
        let spec = PoolSpec {
            match_labels: BTreeMap::from([(
                "infergate.dev/inference-pool-absent".to_owned(),
                self.name.clone(),
            )]),
            target_ports: vec![8000],
            app_protocol: "http".to_owned(),
        };
        pool_config(&self.name, &self.namespace, &spec, &[])
    }

    /// Keeps the plane in step: reloads when the pool's spec or its rewrites change, clears
    /// the members when the pool goes, and refreshes them on every pod change.
    pub fn run(self: &Arc<Self>, plane: PlaneHandle) -> JoinHandle<()> {
        let pods = self.pods.attach(plane.clone());
        let me = Arc::clone(self);
        tokio::spawn(async move {
            let _pods = crate::cluster::AbortOnDrop(pods);
            loop {
                let now = me.inputs();
                let last = me
                    .built
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                if last.as_ref() != Some(&now) {
                    match me.config_from(now) {
                        Some(config) => match plane.reload(config) {
                            Ok(()) => {
                                tracing::info!(pool = %me.name, "InferencePool changed: reloaded")
                            }
                            Err(e) => {
                                tracing::error!(pool = %me.name, error = %e, "InferencePool change refused; the running config stays")
                            }
                        },
                        None => {
                            // The pool is gone: no endpoints until it is back.
                            *me.spec.lock().unwrap_or_else(PoisonError::into_inner) = None;
                            if let Err(e) = plane.refresh_members() {
                                tracing::error!(error = %e, "clearing the pool failed");
                            }
                        }
                    }
                }
                me.changed.notified().await;
            }
        })
    }
}

impl MemberSource for InferencePoolSource {
    fn members(&self, _pool: &PoolConfig) -> Vec<EndpointSpec> {
        let spec = self
            .spec
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match spec {
            None => Vec::new(),
            Some(spec) => {
                let selector = LabelSelector {
                    match_labels: spec.match_labels,
                    match_expressions: Vec::new(),
                };
                self.pods.members_matching(&selector, &spec.target_ports)
            }
        }
    }

    fn health(&self) -> SourceHealth {
        let pods = MemberSource::health(&*self.pods);
        let known = self
            .spec
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        let synced = pods.synced && self.pool.health.synced() && known;
        let mut problems: Vec<String> = Vec::new();
        if !known {
            problems.push(format!(
                "InferencePool {}/{} not found",
                self.namespace, self.name
            ));
        }
        for p in [pods.problem, self.pool.health.problem()] {
            if !p.is_empty() {
                problems.push(p);
            }
        }
        for w in self.rewrites.iter().chain(&self.objectives) {
            let p = w.health.problem();
            if !p.is_empty() {
                problems.push(p);
            }
        }
        SourceHealth {
            synced,
            problem: problems.join("; "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(spec: Value) -> DynamicObject {
        let mut o = DynamicObject::new(
            "llama",
            &ApiResource {
                group: "inference.networking.k8s.io".into(),
                version: "v1".into(),
                api_version: "inference.networking.k8s.io/v1".into(),
                kind: "InferencePool".into(),
                plural: "inferencepools".into(),
            },
        );
        o.data = json!({"spec": spec});
        o
    }

    #[test]
    fn a_pool_gives_its_selector_and_ports_in_order() {
        let p = read_pool(&pool(json!({"selector": {"matchLabels": {"app": "vllm"}}, "targetPorts": [{"number": 8001}, {"number": 8000}]})))
            .expect("valid")
            .expect("present");
        assert_eq!(p.target_ports, [8001, 8000]);
        assert_eq!(p.match_labels["app"], "vllm");
        assert_eq!(p.app_protocol, "http");
        let c = pool_config("llama", "ns", &p, &[]).expect("config");
        assert_eq!(c.pools.len(), 1);
        assert_eq!(c.pools[0].target_port.value, 8001);
        assert!(
            c.lookup_model("any-model").is_none(),
            "the pool is the default backend, not a model"
        );
    }

    #[test]
    fn a_bad_pool_names_the_field() {
        let e = read_pool(&pool(
            json!({"selector": {"matchLabels": {"app": "vllm"}}, "targetPorts": [{"number": 0}]}),
        ))
        .expect_err("refused");
        assert!(e.contains("spec.targetPorts[0].number"), "{e}");
        let e = read_pool(&pool(json!({"targetPorts": [{"number": 8000}]}))).expect_err("refused");
        assert!(e.contains("spec.selector.matchLabels"), "{e}");
    }

    #[test]
    fn a_pool_being_deleted_has_no_spec() {
        let mut p = pool(
            json!({"selector": {"matchLabels": {"app": "vllm"}}, "targetPorts": [{"number": 8000}]}),
        );
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert_eq!(read_pool(&p), Ok(None));
    }

    #[test]
    fn objectives_of_the_pool_give_their_priority_by_name() {
        let obj = |name: &str, pool: &str, priority: Option<i64>| {
            let ar = optional_resource("llm-d.ai", "InferenceObjective", "inferenceobjectives");
            let mut o = DynamicObject::new(name, &ar);
            o.data = json!({"spec": {"poolRef": {"name": pool}, "priority": priority}});
            Arc::new(o)
        };
        let got = read_objectives(
            &[
                obj("batch", "llama", Some(-1)),
                obj("chat", "llama", None),
                obj("x", "qwen", Some(5)),
            ],
            "llama",
        );
        assert_eq!(
            got,
            BTreeMap::from([("batch".to_owned(), -1), ("chat".to_owned(), 0)])
        );
    }

    #[test]
    fn only_the_pools_own_rewrites_are_kept_oldest_first() {
        let rw = |name: &str, pool: &str, second: i64| {
            let mut o = DynamicObject::new(
                name,
                &optional_resource(
                    "llm-d.ai",
                    "InferenceModelRewrite",
                    "inferencemodelrewrites",
                ),
            );
            o.metadata.creation_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::from_second(second).expect("time"),
                ));
            o.data = json!({"spec": {"poolRef": {"name": pool}, "rules": [{"matches": [{"model": {"value": "a"}}], "targets": [{"modelRewrite": "b", "weight": 1}]}]}});
            Arc::new(o)
        };
        let rules = read_rewrites(
            &[
                rw("newer", "llama", 20),
                rw("other", "qwen", 1),
                rw("older", "llama", 10),
            ],
            "llama",
        );
        let names: Vec<&str> = rules.iter().filter_map(|r| r["name"].as_str()).collect();
        assert_eq!(names, ["older[0]", "newer[0]"]);
    }
}
