//! The `InferenceGatewayConfig` custom resource: found under either API group, watched by
//! name, turned into the same config a file gives, its status written and its refusals
//! published as Kubernetes Events.

use std::sync::Arc;
use std::time::Duration;

use infergate_config::gateway::{self, ConfigMapAdapterMap, ResolvedGateway};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::watch::Watched;

/// The two API groups read as one schema: the seed's (SageMaker HyperPod's) first.
pub const GROUPS: [&str; 2] = ["inference.sagemaker.aws.amazon.com", "infergate.dev"];
/// The one version of both.
pub const VERSION: &str = "v1alpha1";
/// The kind.
pub const KIND: &str = "InferenceGatewayConfig";
/// The plural.
pub const PLURAL: &str = "inferencegatewayconfigs";

/// The resource of `group`.
pub fn api_resource(group: &str) -> ApiResource {
    ApiResource {
        group: group.to_owned(),
        version: VERSION.to_owned(),
        api_version: format!("{group}/{VERSION}"),
        kind: KIND.to_owned(),
        plural: PLURAL.to_owned(),
    }
}

/// The config an object holds, as a document `infergate_config` reads: only the fields a
/// config file has (the API server's own metadata is dropped), so a resource and a file with
/// one spec are one config, refused with the same field-named errors.
pub fn config_document(obj: &DynamicObject, api_version: &str) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": KIND,
        "metadata": {
            "name": obj.metadata.name,
            "namespace": obj.metadata.namespace,
        },
        "spec": obj.data.get("spec").cloned().unwrap_or(Value::Null),
    })
}

/// Reads, validates and resolves the config an object holds, with the adapter maps of the
/// watched ConfigMaps; the error names the field.
pub fn resolve(
    obj: &DynamicObject,
    api_version: &str,
    maps: &[ConfigMapAdapterMap],
) -> Result<ResolvedGateway, String> {
    let text = config_document(obj, api_version).to_string();
    let config = gateway::load_from_str(&text).map_err(|e| e.to_string())?;
    gateway::resolve_with_config_maps(&config, maps).map_err(|e| e.to_string())
}

/// One `InferenceGatewayConfig`, watched by name.
pub struct GatewayResource {
    api: Api<DynamicObject>,
    resource: ApiResource,
    name: String,
    namespace: String,
    watched: Watched<DynamicObject>,
    changed: Arc<Notify>,
    recorder: Recorder,
}

impl std::fmt::Debug for GatewayResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayResource")
            .field("api_version", &self.resource.api_version)
            .field("name", &self.name)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// How often a missing resource is looked for again.
const FIND_EVERY: Duration = Duration::from_secs(2);

impl GatewayResource {
    /// Finds NAME in `namespace` under `group` (or, without one, under the first of
    /// [`GROUPS`] that has it), waiting while it does not exist yet (a chart may install the
    /// gateway before its config), and starts watching it. `reporter` names this replica in
    /// the Events it publishes.
    pub async fn find(
        client: Client,
        name: &str,
        namespace: &str,
        group: Option<&str>,
        reporter: &str,
    ) -> Self {
        let groups: Vec<&str> = match group {
            Some(g) => vec![g],
            None => GROUPS.to_vec(),
        };
        let mut waited = 0u32;
        let resource = loop {
            let mut found = None;
            let mut why = Vec::new();
            for g in &groups {
                let ar = api_resource(g);
                let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
                match api.get_opt(name).await {
                    Ok(Some(_)) => {
                        found = Some(ar);
                        break;
                    }
                    Ok(None) => why.push(format!("not found under {g}")),
                    // A group whose CRD is not installed answers 404 too; anything else is
                    // worth saying.
                    Err(e) => why.push(format!("{g}: {e}")),
                }
            }
            if let Some(ar) = found {
                break ar;
            }
            if waited.is_multiple_of(5) {
                tracing::warn!(
                    name,
                    namespace,
                    problem = %why.join("; "),
                    "waiting for the InferenceGatewayConfig to exist"
                );
            }
            waited += 1;
            tokio::time::sleep(FIND_EVERY).await;
        };
        tracing::info!(name, namespace, group = %resource.group, "reading InferenceGatewayConfig from the cluster");
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        let changed = Arc::new(Notify::new());
        let by_name = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let watched = Watched::start_with(api.clone(), resource.clone(), by_name, PLURAL, &changed);
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: "infergate".to_owned(),
                instance: Some(reporter.to_owned()),
            },
        );
        Self {
            api,
            resource,
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            watched,
            changed,
            recorder,
        }
    }

    /// The resource's `apiVersion`.
    pub fn api_version(&self) -> &str {
        &self.resource.api_version
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The object as last seen; `None` before the first list or after it was deleted.
    pub fn current(&self) -> Option<Arc<DynamicObject>> {
        self.watched.store.state().into_iter().next()
    }

    /// Woken after every change to the object.
    pub fn changed(&self) -> &Arc<Notify> {
        &self.changed
    }

    /// Waits up to `within` for the first list.
    pub async fn wait_synced(&self, within: Duration) -> bool {
        self.watched.health.wait_synced(within).await
    }

    /// Writes `status` through the status subresource.
    pub async fn write_status(&self, status: &Value) -> Result<(), kube::Error> {
        let patch = json!({"status": status});
        self.api
            .patch_status(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }

    /// The status as written now (`Null` when none).
    pub fn written_status(&self) -> Value {
        self.current()
            .and_then(|o| o.data.get("status").cloned())
            .unwrap_or(Value::Null)
    }

    /// Publishes a Warning Event on the object: `reason` in PascalCase, `note` for people.
    pub async fn warn(&self, obj: &DynamicObject, reason: &str, note: &str) {
        let reference = ObjectReference {
            api_version: Some(self.resource.api_version.clone()),
            kind: Some(KIND.to_owned()),
            name: obj.metadata.name.clone(),
            namespace: obj.metadata.namespace.clone(),
            uid: obj.metadata.uid.clone(),
            resource_version: obj.metadata.resource_version.clone(),
            field_path: None,
        };
        let event = Event {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            // The API caps a note at 1 kB.
            note: Some(note.chars().take(1000).collect()),
            action: "Reload".to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(error = %e, reason, "could not publish a Kubernetes Event");
        }
    }
}
