//! `infergate serve --from-cluster NAME`: the config is the `InferenceGatewayConfig` NAME, its
//! pods and adapter maps are watched, every change to either is a reload exactly like a file
//! reload (the running config stays on refusal), and the elected replica writes the status.

use std::sync::Arc;
use std::time::Duration;

use infergate_config::gateway::{
    ConfigMapAdapterMap, PickerSource, ResolvedDiscovery, ResolvedGateway,
};
use infergate_control::discovery::MemberSource;
use infergate_control::policy::PickerConfigSource;
use infergate_control::PlaneHandle;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use tokio::task::JoinHandle;

use crate::configmaps::ConfigMaps;
use crate::lease::Election;
use crate::members::PodDiscovery;
use crate::resource::{self, GatewayResource};
use crate::status::{self, Observed, SchedulerObserved};

/// How often the status is compared with what the gateway observes (it is written only when
/// it differs).
pub const STATUS_EVERY: Duration = Duration::from_secs(2);
/// How long start-up waits for a watch's first list before it goes on (readiness waits
/// longer: it stays false until discovery has listed).
const FIRST_LIST_WAIT: Duration = Duration::from_secs(30);

/// What `--from-cluster` was asked for.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// The resource's name.
    pub name: String,
    /// Its namespace; `None`: the client's default (the pod's own in a cluster).
    pub namespace: Option<String>,
    /// Its API group; `None`: the first of [`resource::GROUPS`] that has it.
    pub group: Option<String>,
    /// This replica, in the lease and in Events (the pod's name in a cluster).
    pub identity: String,
}

/// A gateway whose config lives in the cluster.
#[derive(Debug)]
pub struct Cluster {
    resource: GatewayResource,
    /// The namespace's ConfigMaps: adapter maps and picker configs.
    config_maps: Arc<ConfigMaps>,
    pods: Option<Arc<PodDiscovery>>,
    election: Arc<Election>,
    /// The generation of the config serving now.
    serving: Option<i64>,
    /// What was last read, and why it was refused (if it was).
    last: Option<(Seen, Option<String>)>,
    identity: String,
}

/// What a config was read from: the resource's generation, the adapter maps, and the picker
/// configs it names (each as `name/key=` what was found).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    generation: i64,
    maps: Vec<ConfigMapAdapterMap>,
    pickers: Vec<String>,
}

/// A kube client from the ambient kubeconfig (`KUBECONFIG`, `~/.kube/config`) or, in a pod,
/// its service account.
pub async fn client() -> Result<Client, kube::Error> {
    Client::try_default().await
}

/// The namespace pods are watched in: `spec.discovery.kubernetes.namespace`, else the
/// config's own (`metadata.namespace`), else `fallback`.
pub fn pod_namespace(config: &ResolvedGateway, fallback: &str) -> Option<String> {
    match &config.discovery {
        ResolvedDiscovery::Static => None,
        ResolvedDiscovery::Kubernetes { namespace } => Some(
            namespace
                .value
                .clone()
                .unwrap_or_else(|| fallback.to_owned()),
        ),
    }
}

/// Starts pod discovery for a config that asks for it, waiting (a while) for the first list.
pub async fn start_pods(
    client: &Client,
    config: &ResolvedGateway,
    fallback_namespace: &str,
) -> Option<Arc<PodDiscovery>> {
    let namespace = pod_namespace(config, fallback_namespace)?;
    let pods = PodDiscovery::start(client.clone(), &namespace);
    if !pods.wait_synced(FIRST_LIST_WAIT).await {
        tracing::warn!(namespace, "pods not listed yet; not ready until they are");
    }
    Some(pods)
}

fn now() -> String {
    Timestamp::from_second(Timestamp::now().as_second())
        .map(|t| t.to_string())
        .unwrap_or_default()
}

impl Cluster {
    /// Finds the resource (waiting while it does not exist), watches it and the adapter maps of
    /// its namespace, waits for a generation that is accepted (publishing each refusal as an
    /// Event meanwhile; the status is written once serving, by [`Cluster::run`]), and starts
    /// pod discovery for it. Returns the first config to serve.
    pub async fn open(
        client: Client,
        options: ClusterOptions,
    ) -> Result<(Self, ResolvedGateway), kube::Error> {
        let namespace = options
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned());
        let resource = GatewayResource::find(
            client.clone(),
            &options.name,
            &namespace,
            options.group.as_deref(),
            &options.identity,
        )
        .await;
        let config_maps = ConfigMaps::start(client.clone(), &namespace);
        resource.wait_synced(FIRST_LIST_WAIT).await;
        config_maps.wait_synced(FIRST_LIST_WAIT).await;
        let lease = format!("infergate-{}", options.name);
        let election = Arc::new(Election::start(
            client.clone(),
            &namespace,
            &lease,
            &options.identity,
        ));
        let mut cluster = Self {
            resource,
            config_maps,
            pods: None,
            election,
            serving: None,
            last: None,
            identity: options.identity,
        };
        let config = loop {
            if let Some(config) = cluster.read_new().await {
                break config;
            }
            // Nothing is read again until the resource or a ConfigMap changes.
            tokio::select! {
                () = cluster.resource.changed().notified() => {}
                () = cluster.config_maps.changed().notified() => {}
            }
        };
        cluster.pods = start_pods(&client, &config, &namespace).await;
        Ok((cluster, config))
    }

    /// The status writer's election, to release its lease on shutdown.
    pub fn election(&self) -> Arc<Election> {
        Arc::clone(&self.election)
    }

    /// Where a scheduler's `configMapRef` is read: the namespace's ConfigMaps.
    pub fn picker_configs(&self) -> Arc<dyn PickerConfigSource> {
        Arc::clone(&self.config_maps) as Arc<dyn PickerConfigSource>
    }

    /// Where the serving config's pools get their members (`None` with static endpoints).
    pub fn members(&self) -> Option<Arc<dyn MemberSource>> {
        self.pods
            .as_ref()
            .map(|p| Arc::clone(p) as Arc<dyn MemberSource>)
    }

    /// The generation last read, when it (or an adapter map, or a picker config it names)
    /// differs from what was read before: its config when it is accepted; `None` when nothing
    /// changed or it was refused (then the refusal is recorded and published as an Event).
    async fn read_new(&mut self) -> Option<ResolvedGateway> {
        let obj = self.resource.current()?;
        let generation = obj.metadata.generation.unwrap_or(0);
        let (maps, bad_maps) = self.config_maps.maps();
        let resolved = resource::resolve(&obj, self.resource.api_version(), &maps);
        // The picker configs the config names, so an edit to one is a reload too.
        let pickers: Vec<String> = resolved
            .as_ref()
            .map(|c| {
                c.pools
                    .iter()
                    .filter_map(|p| match &p.picker {
                        PickerSource::ConfigMap { name, key } => Some(format!(
                            "{name}/{}={:?}",
                            key.value,
                            self.config_maps.picker_config(name, &key.value)
                        )),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let key = Seen {
            generation,
            maps: maps.clone(),
            pickers,
        };
        if self.last.as_ref().is_some_and(|(k, _)| *k == key) {
            return None;
        }
        for bad in &bad_maps {
            tracing::warn!(problem = %bad, "adapter map skipped");
        }
        let result = resolved.and_then(|c| {
            // The pod watch is started for one namespace and moves only with a restart.
            match (&self.pods, pod_namespace(&c, self.resource.namespace())) {
                (Some(p), Some(ns)) if ns != p.namespace() => Err(format!(
                    "spec.discovery.kubernetes.namespace: pods are watched in {} until a restart; {ns} would take one",
                    p.namespace()
                )),
                (None, Some(_)) if self.serving.is_some() => Err(
                    "spec.discovery: a switch from static endpoints to Kubernetes discovery takes a restart".to_owned(),
                ),
                _ => Ok(c),
            }
        });
        match result {
            Ok(config) => {
                self.last = Some((key, None));
                Some(config)
            }
            Err(why) => {
                tracing::error!(generation, error = %why, "InferenceGatewayConfig refused; the running config stays");
                self.resource.warn(&obj, "ConfigRejected", &why).await;
                self.last = Some((key, Some(why)));
                None
            }
        }
    }

    /// Marks the config last read as the one serving (the caller started or reloaded with it).
    fn accept(&mut self) {
        if let Some((seen, None)) = &self.last {
            self.serving = Some(seen.generation);
        }
    }

    /// What the status says now.
    fn observe(&self, plane: &PlaneHandle) -> Observed {
        let routes = plane.routes();
        let schedulers = routes
            .pools
            .iter()
            .map(|p| {
                let snap = p.snapshot();
                let specs = snap.pool.specs();
                SchedulerObserved {
                    name: p.name.clone(),
                    model_name: p.model_name.clone(),
                    endpoints: specs.len(),
                    scraped: specs
                        .iter()
                        .filter(|s| snap.pool.metrics(s.id).is_some())
                        .count(),
                }
            })
            .collect();
        let health = self.pods.as_ref().map(|p| p.health());
        Observed {
            generation: self.last.as_ref().map_or(0, |(seen, _)| seen.generation),
            serving_generation: self.serving,
            rejection: self.last.as_ref().and_then(|(_, why)| why.clone()),
            discovery_synced: health.as_ref().is_none_or(|h| h.synced),
            discovery_problem: health.map(|h| h.problem).unwrap_or_default(),
            schedulers,
            writer: self.identity.clone(),
        }
    }

    /// Keeps the gateway in step with the cluster until the task is aborted: reloads on each
    /// new generation or adapter-map change, and (on the elected replica) writes the status
    /// whenever it differs from what is written.
    pub fn run(mut self, plane: PlaneHandle) -> JoinHandle<()> {
        self.accept();
        let watching = self.pods.as_ref().map(|p| p.attach(plane.clone()));
        tokio::spawn(async move {
            let _watching = watching.map(AbortOnDrop);
            // Read again only after a change; the other ticks only compare the status.
            let mut changed = true;
            loop {
                let read = if changed { self.read_new().await } else { None };
                if let Some(config) = read {
                    match plane.reload(config) {
                        Ok(()) => {
                            self.accept();
                            tracing::info!("InferenceGatewayConfig changed: reloaded");
                        }
                        Err(e) => {
                            let why = e.to_string();
                            tracing::error!(error = %why, "InferenceGatewayConfig refused; the running config stays");
                            if let Some(obj) = self.resource.current() {
                                self.resource.warn(&obj, "ConfigRejected", &why).await;
                            }
                            if let Some(last) = self.last.as_mut() {
                                last.1 = Some(why);
                            }
                        }
                    }
                }
                if self.election.is_leader() {
                    let observed = self.observe(&plane);
                    let written = self.resource.written_status();
                    let new = status::status(&observed, &written, &now());
                    if !status::same(&new, &written) {
                        if let Err(e) = self.resource.write_status(&new).await {
                            tracing::warn!(error = %e, "could not write the InferenceGatewayConfig status");
                        }
                    }
                }
                changed = tokio::select! {
                    () = self.resource.changed().notified() => true,
                    () = self.config_maps.changed().notified() => true,
                    () = tokio::time::sleep(STATUS_EVERY) => false,
                };
            }
        })
    }
}

/// Aborts a task when dropped.
pub(crate) struct AbortOnDrop(pub(crate) JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
