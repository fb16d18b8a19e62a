//! The ConfigMaps of the config's namespace, watched live, for the two things a config takes
//! from them:
//!
//! - LoRA adapter maps: ConfigMaps labelled `inference.networking.k8s.io/bbr-managed: "true"`
//!   (`data.baseModel`, `data.adapters` as a YAML list). A map that loses the label or is
//!   deleted takes its adapters with it;
//! - a scheduler's `configMapRef`: an EndpointPickerConfig under a key of a named ConfigMap.
//!
//! One watch of the namespace serves both (the label is checked here, as upstream BBR checks
//! the old and the new object of an update).

use std::sync::Arc;
use std::time::Duration;

use infergate_config::gateway::ConfigMapAdapterMap;
use infergate_control::policy::PickerConfigSource;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::Notify;

use crate::watch::Watched;

/// The label that marks an adapter map.
pub const BBR_MANAGED: &str = "inference.networking.k8s.io/bbr-managed";

/// The ConfigMaps of one namespace, watched.
#[derive(Debug)]
pub struct ConfigMaps {
    maps: Watched<ConfigMap>,
    changed: Arc<Notify>,
}

/// One ConfigMap read as an adapter map; the error names the map and the field.
pub fn read_map(cm: &ConfigMap) -> Result<Vec<ConfigMapAdapterMap>, String> {
    // Only what a ConfigMap file holds: the API server's own metadata is not part of the map.
    let doc = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": cm.metadata.name,
            "namespace": cm.metadata.namespace,
            "labels": cm.metadata.labels,
        },
        "data": cm.data,
    });
    let name = cm.metadata.name.as_deref().unwrap_or_default();
    ConfigMapAdapterMap::parse_all(&doc.to_string()).map_err(|e| format!("ConfigMap {name}: {e}"))
}

fn is_adapter_map(cm: &ConfigMap) -> bool {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(BBR_MANAGED))
        .is_some_and(|v| v == "true")
}

impl ConfigMaps {
    /// Starts watching the ConfigMaps of `namespace`. Must run inside a tokio runtime.
    pub fn start(client: Client, namespace: &str) -> Arc<Self> {
        let api: Api<ConfigMap> = Api::namespaced(client, namespace);
        let changed = Arc::new(Notify::new());
        let maps = Watched::start(api, watcher::Config::default(), "configmaps", &changed);
        Arc::new(Self { maps, changed })
    }

    /// Waits up to `within` for the first list.
    pub async fn wait_synced(&self, within: Duration) -> bool {
        self.maps.health.wait_synced(within).await
    }

    /// Woken after every change to a ConfigMap.
    pub fn changed(&self) -> &Arc<Notify> {
        &self.changed
    }

    /// Every map, in name order, and the maps that could not be read (each skipped, with the
    /// reason), so one bad map does not take the others' adapters away.
    pub fn maps(&self) -> (Vec<ConfigMapAdapterMap>, Vec<String>) {
        let mut cms: Vec<_> = self
            .maps
            .store
            .state()
            .into_iter()
            .filter(|c| is_adapter_map(c))
            .collect();
        cms.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut maps = Vec::new();
        let mut bad = Vec::new();
        for cm in cms {
            match read_map(&cm) {
                Ok(m) => maps.extend(m),
                Err(e) => bad.push(e),
            }
        }
        (maps, bad)
    }
}

impl PickerConfigSource for ConfigMaps {
    fn picker_config(&self, name: &str, key: &str) -> Result<String, String> {
        let cm = self
            .maps
            .store
            .state()
            .into_iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .ok_or_else(|| format!("ConfigMap {name} not found"))?;
        cm.data
            .as_ref()
            .and_then(|d| d.get(key))
            .cloned()
            .ok_or_else(|| format!("ConfigMap {name} has no key {key}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn cm(adapters: &str) -> ConfigMap {
        ConfigMap {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("llama-adapters".into()),
                labels: Some(BTreeMap::from([(BBR_MANAGED.into(), "true".into())])),
                // What the API server adds must not matter.
                resource_version: Some("42".into()),
                uid: Some("u".into()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([
                ("baseModel".into(), " llama-3.1-70b ".into()),
                ("adapters".into(), adapters.into()),
            ])),
            ..Default::default()
        }
    }

    #[test]
    fn a_labelled_map_reads_its_base_model_and_adapters() {
        let maps = read_map(&cm("- sql-lora\n- chat-lora\n")).expect("reads");
        assert_eq!(maps.len(), 1);
        assert_eq!(maps[0].name, "llama-adapters");
        assert_eq!(maps[0].map.base_model, "llama-3.1-70b");
        assert_eq!(maps[0].map.adapters, ["sql-lora", "chat-lora"]);
    }

    #[test]
    fn a_bad_adapters_list_names_the_map() {
        let e = read_map(&cm("{not: [a list")).expect_err("refused");
        assert!(e.contains("llama-adapters"), "{e}");
    }
}
