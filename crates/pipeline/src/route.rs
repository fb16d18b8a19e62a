//! Route: the model a request names (after its rewrite) → the pool that serves it, with the
//! adapter and base model the upstream headers carry; 404 when no pool serves it and no
//! default backend is set. The table itself is the control plane's
//! ([`infergate_control::routes::Routes`], built once per config).

use infergate_api_error::ApiError;
use infergate_control::routes::{Routes, Target};

/// Where a request for `model` goes.
pub fn route(routes: &Routes, model: &str) -> Result<Target, ApiError> {
    routes.route(model).ok_or_else(ApiError::unknown_model)
}
