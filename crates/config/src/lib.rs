//! infergate's configuration files: one struct per file format, defaults in one place, and
//! validation whose errors name the field and the reason. Pure: callers read the files.

pub mod fleet;
pub mod gateway;
pub mod global;
pub mod picker;

pub use fleet::{FleetError, FleetFile, SimEndpoint};
pub use gateway::{
    load_from_str as load_gateway_config, resolve as resolve_gateway, GatewayConfigError,
    InferenceGatewayConfig, ResolvedGateway,
};
pub use picker::{EndpointPickerConfig, PickerConfigError};
