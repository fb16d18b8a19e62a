//! TLS on the inference listener, with rustls: the certificate and key files of
//! `tls: {certFile, keyFile}`, or, for `tls: {}`, a self-signed certificate made at start-up
//! whose SHA-256 fingerprint the gateway prints so a client can pin it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use infergate_config::gateway::TlsMode;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use crate::error::GatewayError;

/// Names a self-signed certificate is made for.
const SELF_SIGNED_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The listener's TLS.
#[derive(Clone)]
pub struct Tls {
    /// Accepts TLS connections.
    pub acceptor: TlsAcceptor,
    /// The leaf certificate served.
    pub certificate: CertificateDer<'static>,
    /// Its SHA-256 fingerprint, `AB:CD:…`.
    pub fingerprint: String,
    /// Made at start-up (`tls: {}`) rather than read from files.
    pub self_signed: bool,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("fingerprint", &self.fingerprint)
            .field("self_signed", &self.self_signed)
            .finish_non_exhaustive()
    }
}

/// The TLS of `mode`, `None` for plain HTTP. Relative file paths are read from `config_dir`.
pub fn configure(mode: &TlsMode, config_dir: Option<&Path>) -> Result<Option<Tls>, GatewayError> {
    let (certs, key, self_signed) = match mode {
        TlsMode::Plain => return Ok(None),
        TlsMode::Acm { .. } => {
            return Err(GatewayError::unsupported(
                "spec.tls.acmArn",
                "an ACM certificate is served by the load balancer, not by a standalone gateway; use certFile and keyFile",
            ))
        }
        TlsMode::Files {
            cert_file,
            key_file,
        } => {
            let (cert_path, key_path) = (resolve(cert_file, config_dir), resolve(key_file, config_dir));
            let certs = CertificateDer::pem_file_iter(&cert_path)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    GatewayError::Tls(format!("spec.tls.certFile {}: {e}", cert_path.display()))
                })?;
            if certs.is_empty() {
                return Err(GatewayError::Tls(format!(
                    "spec.tls.certFile {}: no certificate in the file",
                    cert_path.display()
                )));
            }
            let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| {
                GatewayError::Tls(format!("spec.tls.keyFile {}: {e}", key_path.display()))
            })?;
            (certs, key, false)
        }
        TlsMode::SelfSigned => {
            let names: Vec<String> = SELF_SIGNED_NAMES.iter().map(|n| (*n).to_owned()).collect();
            let made = rcgen::generate_simple_self_signed(names)
                .map_err(|e| GatewayError::Tls(format!("making a self-signed certificate: {e}")))?;
            let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
            (vec![made.cert.der().clone()], key, true)
        }
    };
    let certificate = certs[0].clone();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| GatewayError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| GatewayError::Tls(format!("certificate and key: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Some(Tls {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        fingerprint: fingerprint(&certificate),
        certificate,
        self_signed,
    }))
}

fn resolve(path: &str, dir: Option<&Path>) -> PathBuf {
    match dir {
        Some(d) if Path::new(path).is_relative() => d.join(path),
        _ => PathBuf::from(path),
    }
}

/// SHA-256 of a DER certificate, as colon-separated hex pairs (what `openssl x509 -fingerprint
/// -sha256` prints).
pub fn fingerprint(der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    digest
        .as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_is_made_with_a_fingerprint_and_missing_files_name_the_field() {
        let tls = configure(&TlsMode::SelfSigned, None).unwrap().unwrap();
        assert!(tls.self_signed);
        assert_eq!(tls.fingerprint.len(), 32 * 3 - 1);
        assert_eq!(tls.fingerprint, fingerprint(&tls.certificate));
        let err = configure(
            &TlsMode::Files {
                cert_file: "/nonexistent/cert.pem".into(),
                key_file: "/nonexistent/key.pem".into(),
            },
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("spec.tls.certFile"), "{err}");
        assert!(configure(&TlsMode::Plain, None).unwrap().is_none());
    }
}
