//! Auth, the request's first step: with `spec.auth`, every `/v1` route needs a valid JWT
//! bearer token (the admin listener's health and metrics routes stay open). It runs before
//! the body is read, so an anonymous client cannot make the gateway buffer one.
//!
//! The token is verified by the control plane's [`Auth`] against its signing keys; a refusal
//! becomes 401 or 403 with `WWW-Authenticate`, or 503 while no key set has loaded yet. The
//! `Authorization` header is removed here, so the model servers never see it (as Envoy's
//! `jwt_authn` does by default) and nothing after this step (the proxy, a log) holds it.

use std::sync::Arc;

use hyper::header::AUTHORIZATION;
use hyper::HeaderMap;
use infergate_auth::Verified;
use infergate_control::keys::Auth;

use infergate_api_error::ApiError;

/// With auth on: verifies the request's token and removes the `Authorization` header, so
/// nothing after this step (the proxy, a log) holds the token. `None` with auth off.
pub async fn authenticate(
    auth: Option<Arc<Auth>>,
    headers: &mut HeaderMap,
) -> Result<Option<Verified>, ApiError> {
    let Some(auth) = auth else {
        return Ok(None);
    };
    let verified = auth.verify(headers).await;
    headers.remove(AUTHORIZATION);
    verified.map(Some)
}

/// Verifies the token in `credentials` (the request's `Authorization` values alone) with
/// `auth`: the future a front that cannot hold the request's headers waits on.
pub async fn verify(auth: Arc<Auth>, credentials: HeaderMap) -> Result<Verified, ApiError> {
    auth.verify(&credentials).await
}

/// The `Authorization` values of `headers`, and nothing else of the request.
pub fn credentials(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for v in headers.get_all(AUTHORIZATION) {
        out.append(AUTHORIZATION, v.clone());
    }
    out
}
