//! Kubernetes object metadata, shared by every resource these files hold: the
//! `InferenceGatewayConfig` itself and the LoRA adapter ConfigMaps.

use serde::Deserialize;
use std::collections::BTreeMap;

/// The parts of Kubernetes `ObjectMeta` a config file or an exported object carries.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Object name.
    #[serde(default)]
    pub name: Option<String>,
    /// Namespace (Kubernetes discovery looks for pods here by default).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Set by the API server; accepted so exported objects load.
    #[serde(default)]
    pub uid: Option<String>,
    /// Set by the API server.
    #[serde(default)]
    pub resource_version: Option<String>,
    /// Set by the API server.
    #[serde(default)]
    pub generation: Option<i64>,
    /// Set by the API server.
    #[serde(default)]
    pub creation_timestamp: Option<String>,
}
