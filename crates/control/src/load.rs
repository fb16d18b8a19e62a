//! Config files: read, validated, resolved, and refused where the running gateway cannot
//! honour a field (naming it), so no knob that is set is silently ignored.

use std::path::Path;

use infergate_config::gateway::{RateLimitStore, ResolvedGateway, TlsMode};

use crate::error::GatewayError;

/// Reads, validates and resolves a config file.
pub fn load_config(path: &Path) -> Result<ResolvedGateway, GatewayError> {
    let bytes = read_file(path)?;
    parse_config(&bytes, path)
}

pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, GatewayError> {
    std::fs::read(path).map_err(|e| GatewayError::io(format!("reading {}", path.display()), e))
}

pub(crate) fn parse_config(bytes: &[u8], path: &Path) -> Result<ResolvedGateway, GatewayError> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        GatewayError::io(
            format!("reading {}", path.display()),
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })?;
    let config = infergate_config::gateway::load_from_str(text)?;
    Ok(config.resolve()?)
}

/// Refuses what the standalone gateway cannot honour yet, naming the field, and returns the
/// warnings for what it honours only in part.
pub fn check_supported(config: &ResolvedGateway) -> Result<Vec<String>, GatewayError> {
    if let Some(RateLimitStore::Redis { url }) = config.rate_limits.as_ref().map(|r| &r.store.value)
    {
        crate::limits::target::Target::parse(url)
            .map_err(|e| GatewayError::unsupported("spec.rateLimits.store", e))?;
    }
    if matches!(config.tls, TlsMode::Acm { .. }) {
        return Err(GatewayError::unsupported(
            "spec.tls.acmArn",
            "an ACM certificate is served by the load balancer, not by a standalone gateway; use certFile and keyFile",
        ));
    }
    // Kubernetes discovery needs a member source, which the plane checks when it builds the
    // pools (`Routes::build`). spec.flowControl and spec.tenancy are honoured in full (see `admission`), spec.rewrites
    // too (see `routes::rewrites`), and spec.rateLimits (see `limits`).
    Ok(Vec::new())
}
