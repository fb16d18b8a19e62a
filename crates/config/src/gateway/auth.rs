//! `spec.auth`: JWT authentication on every inference route (health routes stay open).

use serde::Deserialize;

/// `spec.auth`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Auth {
    /// JWT bearer tokens.
    pub jwt: Jwt,
}

/// `spec.auth.jwt`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Jwt {
    /// The token issuer and what its tokens must carry.
    pub provider: JwtProvider,
}

/// `spec.auth.jwt.provider`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JwtProvider {
    /// Unique name of the provider.
    pub name: String,
    /// The `iss` every token must carry.
    pub issuer: String,
    /// Signing keys from a URL (upstream); exclusive with `localJWKS`.
    #[serde(default, rename = "remoteJWKS")]
    pub remote_jwks: Option<RemoteJwks>,
    /// Signing keys from a file (standalone); exclusive with `remoteJWKS`.
    #[serde(default, rename = "localJWKS")]
    pub local_jwks: Option<LocalJwks>,
    /// Accepted `aud` values, at most 8.
    #[serde(default)]
    pub audiences: Vec<String>,
    /// Claims a token must carry, at most 16; default-deny.
    #[serde(default)]
    pub required_claims: Vec<RequiredClaim>,
}

/// `remoteJWKS`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RemoteJwks {
    /// `https://…` (or `http://…`, for a local issuer) JWKS document.
    pub uri: String,
}

/// `localJWKS`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LocalJwks {
    /// Path of a JWKS document.
    pub file: String,
}

/// One `requiredClaims` entry: the claim must exist and (String) equal one of `values`, or
/// (StringArray) contain one of them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RequiredClaim {
    /// Claim name.
    pub name: String,
    /// How the claim is compared.
    pub value_type: ClaimValueType,
    /// Accepted values, 1..128, each 1..1024 characters.
    pub values: Vec<String>,
}

/// `requiredClaims[].valueType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum ClaimValueType {
    /// A string claim equal to one of the values.
    String,
    /// An array claim containing one of the values.
    StringArray,
}
