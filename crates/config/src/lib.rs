//! infergate's configuration files: one struct per file format, defaults in one place, and
//! validation whose errors name the field and the reason.

pub mod fleet;

pub use fleet::{FleetError, FleetFile, SimEndpoint};
