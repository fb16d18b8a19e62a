//! Errors, each naming the endpoint, field, plugin or line at fault.

use crate::endpoint::EndpointId;

/// A pool snapshot could not be built or updated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// Two endpoints share an id.
    #[error("duplicate endpoint id {0}")]
    DuplicateId(EndpointId),
    /// Two endpoints share an address.
    #[error("duplicate endpoint address {0:?}")]
    DuplicateAddress(String),
    /// The endpoint is not a member of the pool.
    #[error("{0} is not in the pool")]
    UnknownEndpoint(EndpointId),
}

/// No endpoint could be picked, or a dispatch named an endpoint the pool does not have.
///
/// "No capacity" is never retryable at the gateway: it maps to 503.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickError {
    /// The pool has no endpoints.
    #[error("the pool has no endpoints")]
    EmptyPool,
    /// The request's endpoint subset names no endpoint of the pool.
    #[error("none of the {requested} endpoints in the request's subset is in the pool")]
    SubsetNotInPool {
        /// How many addresses the subset named.
        requested: usize,
    },
    /// A filter removed every endpoint and could not fail open.
    #[error("filter {filter} left no endpoint")]
    Filtered {
        /// The filter's name.
        filter: &'static str,
    },
    /// The endpoint is not a member of the pool.
    #[error("{0} is not in the pool")]
    UnknownEndpoint(EndpointId),
}

/// A picker configuration could not be turned into a profile.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A plugin `type` infergate does not implement.
    #[error("plugin {name:?}: unknown plugin type {plugin_type:?}")]
    UnknownPluginType {
        /// The plugin's name.
        name: String,
        /// The unknown type.
        plugin_type: String,
    },
    /// A parameter the plugin does not take (it would otherwise be silently ignored).
    #[error("plugin {plugin:?}: unknown parameter {parameter:?}")]
    UnknownParameter {
        /// The plugin's name.
        plugin: String,
        /// The unknown parameter.
        parameter: String,
    },
    /// A parameter with a value the plugin cannot use.
    #[error("plugin {plugin:?}: parameter {parameter:?}: {reason}")]
    InvalidParameter {
        /// The plugin's name.
        plugin: String,
        /// The parameter.
        parameter: String,
        /// Why the value is rejected.
        reason: String,
    },
    /// Two plugins share a name.
    #[error("plugin name {0:?} is used twice")]
    DuplicatePluginName(String),
    /// A scheduling profile refers to a plugin that is not declared.
    #[error("schedulingProfiles[{profile:?}]: pluginRef {plugin_ref:?} names no plugin")]
    UnknownPluginRef {
        /// The profile's name.
        profile: String,
        /// The dangling reference.
        plugin_ref: String,
    },
    /// A weight was given to a plugin that is not a scorer.
    #[error("schedulingProfiles[{profile:?}]: {plugin_ref:?} is not a scorer and takes no weight")]
    WeightOnNonScorer {
        /// The profile's name.
        profile: String,
        /// The plugin reference.
        plugin_ref: String,
    },
    /// A weight that is negative or not finite.
    #[error("{field}: weight must be a finite non-negative number, got {value}")]
    InvalidWeight {
        /// Where the weight was set.
        field: String,
        /// The value.
        value: f64,
    },
    /// More than one picker in a profile.
    #[error("schedulingProfiles[{0:?}]: more than one picker")]
    SeveralPickers(String),
    /// The config has no scheduling profile, or several and none is named `default`.
    #[error("schedulingProfiles: {0}")]
    Profiles(String),
    /// A field with a value that cannot be used.
    #[error("{field}: {reason}")]
    InvalidField {
        /// The field.
        field: String,
        /// Why the value is rejected.
        reason: String,
    },
    /// A policy name infergate does not know.
    #[error("unknown policy {0:?} (known: round-robin, random, least-request, gie-default, sglang-cache-aware, dynamo-kv, infergate)")]
    UnknownPolicy(String),
    /// An engine type infergate does not know.
    #[error(
        "unknown engine type {0:?} (known: vllm, sglang, tgi, trtllm-serve, triton-tensorrt-llm)"
    )]
    UnknownEngine(String),
}

/// A metrics exposition could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The body is larger than the configured limit.
    #[error("metrics body of {len} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// Body length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The body is not UTF-8.
    #[error("metrics body is not UTF-8 (at byte {0})")]
    NotUtf8(usize),
    /// More samples than the configured limit.
    #[error("more than {0} samples")]
    TooManySamples(usize),
    /// A malformed line.
    #[error("line {line}: {reason}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: &'static str,
    },
}
