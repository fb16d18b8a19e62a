//! The key store against real files and loopback issuers.

use super::*;

#[tokio::test]
async fn a_jwks_file_that_cannot_be_used_fails_start_up_naming_the_field() {
    let metrics = Arc::new(Metrics::new());
    let missing = KeySource::File("/nonexistent/jwks.json".into());
    let err = KeyStore::start(missing, fast(Duration::ZERO), Arc::clone(&metrics), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("spec.auth.jwt.provider.localJWKS.file: reading /nonexistent/jwks.json"),
        "{err}"
    );
    let dir = TempDir::new("auth-bad");
    let file = dir.path().join("jwks.json");
    std::fs::write(&file, r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#).unwrap();
    let err = KeyStore::start(KeySource::File(file), fast(Duration::ZERO), metrics, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no usable signing key"), "{err}");
}

#[tokio::test]
async fn a_key_rotated_into_the_file_is_accepted_without_a_restart() {
    let dir = TempDir::new("auth-file");
    let file = dir.path().join("jwks.json");
    let (old, new) = (Key::ed25519(), Key::ed25519());
    std::fs::write(&file, jwks(&[old.jwk("old")])).unwrap();
    let metrics = Arc::new(Metrics::new());
    let store = KeyStore::start(
        KeySource::File(file.clone()),
        fast(Duration::ZERO),
        Arc::clone(&metrics),
        None,
    )
    .unwrap();
    let auth = auth(store, &metrics);
    assert!(auth
        .verify(&bearer(&old.token("old", &idp_claims())))
        .await
        .is_ok());

    std::fs::write(&file, jwks(&[new.jwk("new")])).unwrap();
    let v = auth.verify(&bearer(&new.token("new", &idp_claims()))).await;
    assert!(v.is_ok(), "{v:?}");
    // The old key left the set, so its tokens are refused now.
    let e = auth
        .verify(&bearer(&old.token("old", &idp_claims())))
        .await
        .unwrap_err();
    assert_eq!(e.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        loads(&metrics, "ok"),
        3,
        "start, then one load per unknown kid"
    );
    assert_eq!(metrics.jwks_keys.get(), 1);
}

#[tokio::test]
async fn a_flood_of_unknown_kids_starts_at_most_one_fetch_per_gap() {
    let key = Key::ed25519();
    let issuer = Issuer::start(jwks(&[key.jwk("k")]), Duration::ZERO).await;
    let metrics = Arc::new(Metrics::new());
    let store = loaded(issuer.uri(), fast(Duration::from_secs(3600)), &metrics).await;
    let auth = Arc::new(auth(store, &metrics));
    let mut tasks = Vec::new();
    for i in 0..50 {
        let (auth, token) = (
            Arc::clone(&auth),
            key.token(&format!("made-up-{i}"), &idp_claims()),
        );
        tasks.push(tokio::spawn(async move {
            auth.verify(&bearer(&token)).await.unwrap_err()
        }));
    }
    for t in tasks {
        let e = t.await.unwrap();
        assert_eq!(e.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(e.code(), "invalid_token");
    }
    assert_eq!(issuer.hits(), 1, "only the start-up fetch");
    assert!(auth
        .verify(&bearer(&key.token("k", &idp_claims())))
        .await
        .is_ok());
}

#[tokio::test]
async fn requests_that_meet_an_unknown_kid_together_share_one_fetch() {
    let (old, new) = (Key::ed25519(), Key::ed25519());
    let issuer = Issuer::start(jwks(&[old.jwk("old")]), Duration::from_millis(300)).await;
    let metrics = Arc::new(Metrics::new());
    let store = loaded(issuer.uri(), fast(Duration::ZERO), &metrics).await;
    issuer.serve(StatusCode::OK, jwks(&[old.jwk("old"), new.jwk("new")]));
    let auth = Arc::new(auth(store, &metrics));
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (auth, token) = (Arc::clone(&auth), new.token("new", &idp_claims()));
        tasks.push(tokio::spawn(
            async move { auth.verify(&bearer(&token)).await },
        ));
    }
    for t in tasks {
        assert!(t.await.unwrap().is_ok());
    }
    assert_eq!(
        issuer.hits(),
        2,
        "the start-up fetch and one shared refetch"
    );
}

#[tokio::test]
async fn a_failed_fetch_keeps_the_last_good_keys_and_is_counted() {
    let key = Key::ed25519();
    let issuer = Issuer::start(jwks(&[key.jwk("k")]), Duration::ZERO).await;
    let metrics = Arc::new(Metrics::new());
    let store = loaded(issuer.uri(), fast(Duration::ZERO), &metrics).await;
    let auth = auth(store, &metrics);
    for (status, body) in [
        (StatusCode::INTERNAL_SERVER_ERROR, jwks(&[])),
        (StatusCode::OK, "<html>maintenance</html>".to_owned()),
        (StatusCode::OK, jwks(&[])),
    ] {
        issuer.serve(status, body);
        // An unknown kid makes the store refetch; the fetch fails.
        let e = auth
            .verify(&bearer(&key.token("other", &idp_claims())))
            .await
            .unwrap_err();
        assert_eq!(e.status(), StatusCode::UNAUTHORIZED);
        assert!(auth
            .verify(&bearer(&key.token("k", &idp_claims())))
            .await
            .is_ok());
    }
    assert_eq!(loads(&metrics, "ok"), 1);
    assert_eq!(loads(&metrics, "error"), 3);
    assert_eq!(metrics.jwks_keys.get(), 1);
    assert!(metrics
        .encode()
        .contains("infergate_jwks_loads_total{outcome=\"error\"} 3"));
}

#[tokio::test]
async fn rotation_is_picked_up_by_the_periodic_refresh() {
    let (old, new) = (Key::ed25519(), Key::ed25519());
    let issuer = Issuer::start(jwks(&[old.jwk("old")]), Duration::ZERO).await;
    let metrics = Arc::new(Metrics::new());
    let refresh = JwksRefresh {
        remote_interval: Duration::from_millis(50),
        ..fast(Duration::from_secs(3600))
    };
    let store = loaded(issuer.uri(), refresh, &metrics).await;
    issuer.serve(StatusCode::OK, jwks(&[new.jwk("new")]));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while store
        .current()
        .is_some_and(|k| k.keys().iter().all(|k| k.kid() != Some("new")))
    {
        assert!(tokio::time::Instant::now() < deadline, "never refreshed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The gap forbids an on-demand fetch, so only the periodic one can have brought it.
    let auth = auth(store, &metrics);
    assert!(auth
        .verify(&bearer(&new.token("new", &idp_claims())))
        .await
        .is_ok());
}

#[tokio::test]
async fn without_any_key_set_a_token_gets_503_and_no_token_gets_401() {
    let dead = KeySource::Remote("http://127.0.0.1:9/jwks.json".parse().unwrap());
    let metrics = Arc::new(Metrics::new());
    let store = KeyStore::start(dead, fast(Duration::ZERO), Arc::clone(&metrics), None).unwrap();
    assert!(!store.wait_loaded(Duration::from_secs(5)).await);
    let auth = auth(store, &metrics);
    let e = auth
        .verify(&bearer(&Key::ed25519().token("k", &idp_claims())))
        .await
        .unwrap_err();
    assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
    let e = auth.verify(&HeaderMap::new()).await.unwrap_err();
    assert_eq!(e.status(), StatusCode::UNAUTHORIZED);
    let resp = e.into_response();
    assert_eq!(resp.headers()[WWW_AUTHENTICATE], "Bearer realm=\"idp\"");
    assert!(loads(&metrics, "error") >= 1);
}

#[tokio::test]
async fn keys_are_fetched_over_https_against_the_given_roots() {
    let key = Key::ed25519();
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = made.cert.der().clone();
    let private = rustls::pki_types::PrivateKeyDer::Pkcs8(made.signing_key.serialize_der().into());
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.clone()], private)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = jwks(&[key.jwk("k")]);
    let server = tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, body) = (acceptor.clone(), body.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = service_fn(move |_req| {
                    let body = body.clone();
                    async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body)))) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    let uri: hyper::Uri = format!("https://localhost:{port}/jwks").parse().unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let trusted = fetch::client_tls(roots).unwrap();
    let metrics = Arc::new(Metrics::new());
    let store = KeyStore::start(
        KeySource::Remote(uri.clone()),
        fast(Duration::ZERO),
        Arc::clone(&metrics),
        Some(trusted),
    )
    .unwrap();
    assert!(store.wait_loaded(Duration::from_secs(5)).await);
    let auth = auth(store, &metrics);
    assert!(auth
        .verify(&bearer(&key.token("k", &idp_claims())))
        .await
        .is_ok());

    // A server the roots do not vouch for is refused.
    let stranger = fetch::client_tls(rustls::RootCertStore::empty()).unwrap();
    let err = fetch::get(&uri, Some(&stranger), Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(err.starts_with("TLS with localhost"), "{err}");
    server.abort();
}
