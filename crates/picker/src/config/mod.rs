//! The picker's side of the two configuration formats users already write: HyperPod's
//! scheduler `weights` and the Gateway API Inference Extension's `EndpointPickerConfig`. Both
//! formats, their defaults and their parsing live in the config crate; here each becomes one
//! [`crate::Profile`] ([`ScorerWeights`], [`PickerConfig`]). The types are re-exported where
//! the picker's callers have always found them.

mod epp;
mod params;
mod render;
mod weights;

pub use epp::PickerConfig;
pub use infergate_config::gateway::Weights;
pub use infergate_config::picker::{
    EndpointPickerConfig, ParamValue, PluginRef, PluginSpec, SchedulingProfileSpec,
};
pub use render::RenderError;
pub use weights::ScorerWeights;
