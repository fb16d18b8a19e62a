//! Configuration types for the picker, in the two formats users already write: HyperPod's
//! scheduler `weights` and the Gateway API Inference Extension's `EndpointPickerConfig`. Both
//! convert into one [`crate::Profile`]. Reading the files is the config crate's job; these types
//! only derive `Deserialize` (camelCase, unknown fields rejected) and convert.

mod epp;
mod params;
mod render;
mod weights;

pub use epp::{EndpointPickerConfig, PluginRef, PluginSpec, SchedulingProfileSpec};
pub use params::ParamValue;
pub use render::RenderError;
pub use weights::Weights;
