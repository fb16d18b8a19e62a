//! One GET of a JWKS URL: plain HTTP/1.1 (an issuer on the same host or network) or HTTPS
//! through rustls, checked against the platform's trust store. A fetch runs every few
//! minutes, so it opens its own connection and closes it; there is no pool to keep warm.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::header::{ACCEPT, HOST, USER_AGENT};
use hyper::http::uri::Scheme;
use hyper::{Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Largest JWKS document read; a real one is a few KiB.
pub const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// A rustls client trusting the platform's certificate store (where an organisation's own
/// CA, which often signs an internal issuer, is installed).
pub fn native_tls() -> Result<Arc<ClientConfig>, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(format!(
            "no trusted CA certificate found in the platform store ({} error(s))",
            found.errors.len()
        ));
    }
    client_tls(roots)
}

/// A rustls client trusting `roots`.
pub fn client_tls(roots: rustls::RootCertStore) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// GETs `uri` within `timeout`: a `200` body of at most [`MAX_JWKS_BYTES`], or why not.
/// `tls` is needed for an `https` URL.
pub async fn get(
    uri: &Uri,
    tls: Option<&Arc<ClientConfig>>,
    timeout: Duration,
) -> Result<Bytes, String> {
    tokio::time::timeout(timeout, attempt(uri, tls))
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
}

async fn attempt(uri: &Uri, tls: Option<&Arc<ClientConfig>>) -> Result<Bytes, String> {
    let host = uri.host().ok_or("the URL names no host")?;
    // `Uri::host` keeps an IPv6 literal's brackets; sockets and TLS names want it bare.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let https = uri.scheme() == Some(&Scheme::HTTPS);
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tcp = TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    if !https {
        return exchange(TokioIo::new(tcp), uri).await;
    }
    let tls = tls.ok_or("an https URL needs TLS, which is not set up")?;
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| format!("`{host}` is not a TLS server name: {e}"))?;
    let stream = TlsConnector::from(Arc::clone(tls))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS with {host}:{port}: {e}"))?;
    exchange(TokioIo::new(stream), uri).await
}

async fn exchange<T>(io: T, uri: &Uri) -> Result<Bytes, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    // The connection is driven by its own task until the response is read, then cut.
    let conn = tokio::spawn(conn);
    let result = async {
        let authority = uri.authority().map_or("", |a| a.as_str());
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let req = Request::get(path)
            .header(HOST, authority)
            .header(ACCEPT, "application/jwk-set+json, application/json")
            .header(USER_AGENT, concat!("infergate/", env!("CARGO_PKG_VERSION")))
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("building the request: {e}"))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| format!("sending the request: {e}"))?;
        if resp.status() != StatusCode::OK {
            return Err(format!("answered {}", resp.status()));
        }
        Limited::new(resp.into_body(), MAX_JWKS_BYTES)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .map_err(|e| format!("reading the body (at most {MAX_JWKS_BYTES} bytes): {e}"))
    }
    .await;
    conn.abort();
    result
}
