//! Deployment knobs: pod settings, environment and replica counts that the Kubernetes
//! deployment honours. A standalone gateway accepts them and reports them (never ignores them
//! silently). Only the fields upstream documents are accepted.

use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// `spec.podDefaults` (and per scheduler): settings of the BBR and Endpoint Picker pods.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodDefaults {
    /// Container resources.
    #[serde(default)]
    pub resources: Option<ResourceRequirements>,
    /// Node selector.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// A Kubernetes `Affinity`, passed through as written and validated by the API server.
    #[serde(default)]
    pub affinity: Option<serde_norway::Value>,
    /// Pod labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Pod annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Container environment.
    #[serde(default)]
    pub env: Vec<EnvVar>,
    /// Container environment sources.
    #[serde(default)]
    pub env_from: Vec<EnvFromSource>,
}

/// Kubernetes `ResourceRequirements`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceRequirements {
    /// Limits, e.g. `cpu: "1"`, `memory: 1Gi`.
    #[serde(default)]
    pub limits: BTreeMap<String, Quantity>,
    /// Requests.
    #[serde(default)]
    pub requests: BTreeMap<String, Quantity>,
}

/// A Kubernetes quantity (`500m`, `1Gi`, `2`), kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity(pub String);

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Int(i64),
            Float(f64),
        }
        Ok(Quantity(match Raw::deserialize(d)? {
            Raw::Text(s) => s,
            Raw::Int(i) => i.to_string(),
            Raw::Float(f) => f.to_string(),
        }))
    }
}

/// Kubernetes `Toleration`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Toleration {
    /// Taint key.
    #[serde(default)]
    pub key: Option<String>,
    /// `Exists` or `Equal`.
    #[serde(default)]
    pub operator: Option<String>,
    /// Taint value.
    #[serde(default)]
    pub value: Option<String>,
    /// Taint effect.
    #[serde(default)]
    pub effect: Option<String>,
    /// For `NoExecute`.
    #[serde(default)]
    pub toleration_seconds: Option<i64>,
}

/// Kubernetes `EnvVar`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EnvVar {
    /// Variable name.
    pub name: String,
    /// Literal value.
    #[serde(default)]
    pub value: Option<String>,
    /// A Kubernetes `EnvVarSource`, passed through as written.
    #[serde(default)]
    pub value_from: Option<serde_norway::Value>,
}

/// Kubernetes `EnvFromSource`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EnvFromSource {
    /// Prefix added to every variable.
    #[serde(default)]
    pub prefix: Option<String>,
    /// A ConfigMap's keys.
    #[serde(default)]
    pub config_map_ref: Option<NamedRef>,
    /// A Secret's keys.
    #[serde(default)]
    pub secret_ref: Option<NamedRef>,
}

/// A reference by name to a ConfigMap or Secret.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamedRef {
    /// The object's name.
    pub name: String,
    /// Whether it may be missing.
    #[serde(default)]
    pub optional: Option<bool>,
}
