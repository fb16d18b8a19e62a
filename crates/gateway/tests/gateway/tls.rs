//! HTTPS on the inference listener: a certificate from files, or one made at start-up.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use serde_json::json;
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_rustls::TlsConnector;

use crate::common::*;

/// A chat request over HTTPS to `gw`, trusting only `cert`; also returns the ALPN protocol.
async fn https_chat(gw: &TestGateway, cert: CertificateDer<'static>) -> (StatusCode, Bytes) {
    let mut roots = RootCertStore::empty();
    roots.add(cert).unwrap();
    let config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let connector = TlsConnector::from(Arc::new(config));
    timeout(CALL_LIMIT, async {
        let tcp = TcpStream::connect(gw.addr).await.unwrap();
        let tls = connector
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let body = chat(LLAMA, "secret", json!({"max_tokens": 2})).to_string();
        let req = Request::post("/v1/chat/completions")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let resp = sender.send_request(req).await.unwrap();
        let status = resp.status();
        (status, resp.into_body().collect().await.unwrap().to_bytes())
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_from_cert_and_key_files_serves_https() {
    let r = Replica::start(instant()).await;
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let dir = TempDir::new("tls");
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    let extra = format!(
        "  tls: {{certFile: {}, keyFile: {}}}\n",
        cert.display(),
        key.display()
    );
    let gw = TestGateway::ready(&llama_yaml(r.addr, &extra)).await;
    let tls = gw.tls.clone().expect("serving TLS");
    assert!(!tls.self_signed);
    assert_eq!(
        tls.fingerprint,
        infergate_control::tls::fingerprint(made.cert.der())
    );
    let (s, b) = https_chat(&gw, made.cert.der().clone()).await;
    assert_eq!(s, StatusCode::OK, "{b:?}");
    // Plain HTTP on the TLS port gets nowhere.
    let plain = tokio::time::timeout(std::time::Duration::from_secs(5), send_plain_probe(gw.addr))
        .await
        .unwrap();
    assert!(!plain.starts_with("HTTP/1.1 200"), "{plain}");
}

async fn send_plain_probe(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = TcpStream::connect(addr).await.unwrap();
    let _ = s
        .write_all(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_tls_block_serves_a_self_signed_certificate_with_its_fingerprint() {
    let r = Replica::start(instant()).await;
    let gw = TestGateway::ready(&llama_yaml(r.addr, "  tls: {}\n")).await;
    let tls = gw.tls.clone().expect("serving TLS");
    assert!(tls.self_signed);
    assert_eq!(
        tls.fingerprint,
        infergate_control::tls::fingerprint(&tls.certificate)
    );
    let (s, b) = https_chat(&gw, tls.certificate.clone()).await;
    assert_eq!(s, StatusCode::OK, "{b:?}");
}
