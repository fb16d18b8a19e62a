//! The `InferenceGatewayConfig` resource: the upstream HyperPod schema and infergate's
//! standalone extensions, as written. Defaults are applied by resolution, not here, so a
//! report can tell what was written from what was defaulted.

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::fmt;

use super::auth::Auth;
use super::deploy::PodDefaults;
use super::lora::LoraAdapterMap;
pub use super::meta::ObjectMeta;
use super::scheduler::SchedulerSpec;
use super::traffic::{FlowControl, ModelRewrite, RateLimits, Tenancy};

/// infergate's own `apiVersion`.
pub const API_VERSION: &str = "infergate.dev/v1alpha1";
/// HyperPod's `apiVersion`, read as the same schema.
pub const SAGEMAKER_API_VERSION: &str = "inference.sagemaker.aws.amazon.com/v1alpha1";
/// The `kind`.
pub const KIND: &str = "InferenceGatewayConfig";

/// An `InferenceGatewayConfig` document.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InferenceGatewayConfig {
    /// Which of the two accepted `apiVersion`s.
    pub api_version: ApiVersion,
    /// Always `InferenceGatewayConfig`.
    pub kind: Kind,
    /// Name, namespace, labels.
    #[serde(default)]
    pub metadata: Option<ObjectMeta>,
    /// The gateway.
    pub spec: GatewaySpec,
}

/// The accepted `apiVersion`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ApiVersion {
    /// `infergate.dev/v1alpha1`.
    #[serde(rename = "infergate.dev/v1alpha1")]
    Infergate,
    /// `inference.sagemaker.aws.amazon.com/v1alpha1`.
    #[serde(rename = "inference.sagemaker.aws.amazon.com/v1alpha1")]
    SageMaker,
}

impl ApiVersion {
    /// As written.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::Infergate => API_VERSION,
            ApiVersion::SageMaker => SAGEMAKER_API_VERSION,
        }
    }
}

/// The only `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Kind {
    /// `InferenceGatewayConfig`.
    InferenceGatewayConfig,
}

/// `spec`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GatewaySpec {
    /// The body-based router; left out, [`Bbr::default`] (enabled, every field at its default).
    #[serde(default)]
    pub bbr: Bbr,
    /// TLS on the listener; absent means plain HTTP.
    #[serde(default)]
    pub tls: Option<Tls>,
    /// JWT authentication; absent means none.
    #[serde(default)]
    pub auth: Option<Auth>,
    /// Metrics export.
    #[serde(default)]
    pub observability: Option<Observability>,
    /// Pod settings of the BBR and Endpoint Picker pods (deployment only).
    #[serde(default)]
    pub pod_defaults: Option<PodDefaults>,
    /// One model pool each, 1..100.
    pub schedulers: Vec<SchedulerSpec>,

    /// Standalone: where to listen.
    #[serde(default)]
    pub listen: Option<Listen>,
    /// Standalone: the static endpoints `modelSelector`s select from.
    #[serde(default)]
    pub endpoints: Option<Vec<EndpointSpec>>,
    /// Standalone: where endpoints come from.
    #[serde(default)]
    pub discovery: Option<Discovery>,
    /// Standalone: adapter → base-model maps.
    #[serde(default)]
    pub lora_adapter_maps: Vec<LoraAdapterMap>,
    /// Standalone: where tenant and criticality come from.
    #[serde(default)]
    pub tenancy: Option<Tenancy>,
    /// Standalone: admission control.
    #[serde(default)]
    pub flow_control: Option<FlowControl>,
    /// Standalone: per-tenant rate limits.
    #[serde(default)]
    pub rate_limits: Option<RateLimits>,
    /// Standalone: InferenceModelRewrite rules (canary splits).
    #[serde(default)]
    pub rewrites: Vec<ModelRewrite>,
}

/// `spec.bbr`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Bbr {
    /// Body-based routing on; must be true with more than one scheduler. Required in a written
    /// `bbr` block, as upstream's schema has it; a config without the block gets
    /// [`super::defaults::BBR_ENABLED`].
    pub enabled: bool,
    /// Largest body read (413 above), at most [`super::defaults::MAX_REQUEST_BODY_BYTES`]
    /// (default [`super::defaults::DEFAULT_REQUEST_BODY_BYTES`]).
    #[serde(default)]
    pub max_request_body_bytes: Option<u64>,
    /// Request body bytes the HTTP front buffers at once, over every request.
    #[serde(default)]
    pub max_buffered_body_bytes: Option<u64>,
    /// Where a request naming no served model goes; otherwise 404.
    #[serde(default)]
    pub default_backend: Option<DefaultBackend>,
    /// BBR replicas, at least 1 (deployment only).
    #[serde(default)]
    pub replicas: Option<u32>,
}

impl Default for Bbr {
    /// What a config without `spec.bbr` gets: routing by the body's model, every limit at its
    /// default.
    fn default() -> Bbr {
        Bbr {
            enabled: super::defaults::BBR_ENABLED,
            max_request_body_bytes: None,
            max_buffered_body_bytes: None,
            default_backend: None,
            replicas: None,
        }
    }
}

/// `spec.bbr.defaultBackend`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DefaultBackend {
    /// A scheduler's name (that pool), or else a host name (a Service in Kubernetes).
    pub name: String,
    /// Port (default [`super::defaults::DEFAULT_BACKEND_PORT`]).
    #[serde(default)]
    pub port: Option<u32>,
}

/// `spec.tls`: `{}` (a certificate made for us), `{acmArn}` (upstream), or `{certFile, keyFile}`
/// (standalone).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Tls {
    /// An ACM certificate for the load balancer (deployment only); empty means none.
    #[serde(default)]
    pub acm_arn: Option<String>,
    /// PEM certificate chain.
    #[serde(default)]
    pub cert_file: Option<String>,
    /// PEM private key.
    #[serde(default)]
    pub key_file: Option<String>,
}

/// `spec.observability`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Observability {
    /// Metrics.
    #[serde(default)]
    pub metrics: Option<MetricsSpec>,
}

/// `spec.observability.metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MetricsSpec {
    /// Export Prometheus metrics (default [`super::defaults::METRICS_ENABLED`]).
    #[serde(default)]
    pub enabled: Option<bool>,
}

/// `spec.listen`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Listen {
    /// Inference listener, `ip:port` (default [`super::defaults::LISTEN_ADDRESS`]).
    #[serde(default)]
    pub address: Option<String>,
    /// Admin listener: metrics, health, dashboard (default
    /// [`super::defaults::ADMIN_ADDRESS`]).
    #[serde(default)]
    pub admin_address: Option<String>,
    /// Client connection limits and timeouts of the inference listener.
    #[serde(default)]
    pub connections: Option<super::connections::ConnectionLimits>,
}

/// `spec.endpoints[]`: the same `{address, labels}` shape as the simulated fleet file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EndpointSpec {
    /// `host:port`, or `host` to take each pool's `targetPort`.
    pub address: String,
    /// Labels `modelSelector`s match.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// `spec.discovery`: `static`, `kubernetes`, or `{kubernetes: {namespace}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discovery {
    /// `spec.endpoints`.
    Static,
    /// Pods from the Kubernetes API.
    Kubernetes {
        /// Namespace to watch; default the resource's own.
        namespace: Option<String>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KubernetesDiscovery {
    #[serde(default)]
    namespace: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StaticDiscovery {}

impl<'de> Deserialize<'de> for Discovery {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        const VARIANTS: &[&str] = &["static", "kubernetes"];
        impl<'de> Visitor<'de> for V {
            type Value = Discovery;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`static`, `kubernetes` or `{kubernetes: {namespace: NAME}}`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Discovery, E> {
                match v {
                    "static" => Ok(Discovery::Static),
                    "kubernetes" => Ok(Discovery::Kubernetes { namespace: None }),
                    other => Err(E::unknown_variant(other, VARIANTS)),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Discovery, A::Error> {
                let key: String = map
                    .next_key()?
                    .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let found = match key.as_str() {
                    "static" => {
                        map.next_value::<StaticDiscovery>()?;
                        Discovery::Static
                    }
                    "kubernetes" => Discovery::Kubernetes {
                        namespace: map.next_value::<KubernetesDiscovery>()?.namespace,
                    },
                    other => return Err(de::Error::unknown_variant(other, VARIANTS)),
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "`{extra}`: give one of `static` or `kubernetes`, not both"
                    )));
                }
                Ok(found)
            }
        }
        d.deserialize_any(V)
    }
}
