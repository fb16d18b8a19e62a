//! `InferenceGatewayConfig`: the gateway's configuration file (standalone and extproc modes) and
//! Kubernetes resource.
//!
//! Its `spec` is HyperPod's schema (so a config written for HyperPod loads as it is, under
//! either `apiVersion`), plus infergate's standalone fields: `listen`, static `endpoints`,
//! `discovery`, `loraAdapterMaps`, `tenancy`, `flowControl`, `rateLimits` and `rewrites`.
//!
//! - [`load_from_str`] parses (unknown fields are errors naming them) and validates (each rule
//!   an error naming the field's path and the reason).
//! - [`resolve`] applies every default from [`defaults`], marking which values are defaults,
//!   builds one [`Pool`] per scheduler with the static endpoints its `modelSelector` matches,
//!   merges the LoRA adapter maps, and precomputes the model → pool routes that
//!   [`ResolvedGateway::lookup_model`] reads per request.
//! - `Display` on [`ResolvedGateway`] is what `infergate check --config F` prints.
//!
//! Converting weights or an `EndpointPickerConfig` (its format is [`crate::picker`]) into a
//! picker profile is the picker's business; this crate keeps them as written, validated, with
//! the defaults applied.

mod address;
mod auth;
mod connections;
pub mod defaults;
mod deploy;
mod duration;
mod error;
mod lora;
mod meta;
mod outlier;
mod report;
mod resolve;
mod scheduler;
mod selector;
mod setting;
mod timeouts;
mod traffic;
mod types;
mod validate;

#[cfg(test)]
mod tests;

pub use address::{EndpointAddress, Host};
pub use auth::{Auth, ClaimValueType, Jwt, JwtProvider, LocalJwks, RemoteJwks, RequiredClaim};
pub use connections::{ConnectionLimits, ResolvedConnections};
pub use deploy::{
    EnvFromSource, EnvVar, NamedRef, PodDefaults, Quantity, ResourceRequirements, Toleration,
};
pub use duration::GatewayDuration;
pub use error::GatewayConfigError;
pub use lora::{AdapterEntry, AdapterTable, ConfigMapAdapterMap, LoraAdapterMap};
pub use outlier::ResolvedOutlierDetection;
pub(crate) use report::{fmt_rate_limits, fmt_tenancy};
pub use resolve::{
    resolve, resolve_with_config_maps, DefaultBackend, DeploymentKnob, EffectiveWeights, Identity,
    ModelRoute, PickerSource, Pool, PoolEndpoint, ResolvedBand, ResolvedBbr, ResolvedDiscovery,
    ResolvedFlowControl, ResolvedGateway, ResolvedOverload, ResolvedRateLimits, ResolvedRewrite,
    ResolvedSaturation, ResolvedTenancy, SessionKey, TlsMode,
};
pub use scheduler::{
    AppProtocol, ConfigMapRef, EngineType, FirstByteTimeout, OutlierDetection, SchedulerKind,
    SchedulerSpec, Weights,
};
pub(crate) use selector::{is_dns_label, is_dns_subdomain};
pub use selector::{LabelRequirement, LabelSelector, SelectorOperator};
pub use setting::Setting;
pub use timeouts::ResolvedTimeouts;
pub use traffic::{
    Band, BandSpec, Fairness, FlowControl, IdentitySource, MatchType, ModelMatch, ModelRewrite,
    OverloadSensor, OverloadSpec, RateLimit, RateLimitStore, RateLimits, RewriteMatch,
    RewriteTarget, Saturation, Stickiness, StoreFailure, Tenancy, TenantRateLimit,
};
pub use types::{
    ApiVersion, Bbr, DefaultBackend as DefaultBackendSpec, Discovery, EndpointSpec, GatewaySpec,
    InferenceGatewayConfig, Kind, Listen, MetricsSpec, ObjectMeta, Observability, Tls, API_VERSION,
    KIND, SAGEMAKER_API_VERSION,
};
pub(crate) use validate::check_identity_and_limits;

/// Parses and validates an `InferenceGatewayConfig` document.
pub fn load_from_str(yaml: &str) -> Result<InferenceGatewayConfig, GatewayConfigError> {
    let config: InferenceGatewayConfig = serde_norway::from_str(yaml)?;
    validate::validate(&config)?;
    Ok(config)
}

impl InferenceGatewayConfig {
    /// Checks every rule (what [`load_from_str`] does after parsing).
    pub fn validate(&self) -> Result<(), GatewayConfigError> {
        validate::validate(self)
    }

    /// [`resolve`].
    pub fn resolve(&self) -> Result<ResolvedGateway, GatewayConfigError> {
        resolve(self)
    }
}
