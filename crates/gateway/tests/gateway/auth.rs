//! JWT auth in front of the pools: 401/403 with their challenges, open admin routes, the token
//! kept from the upstream, and reloads that change the policy but keep the keys.

use hyper::{Method, StatusCode};
use infergate_test_support::jwt::{idp_claims, jwks, Key};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

use crate::common::*;

/// [`idp_claims`] of a member of `groups`.
fn claims(groups: &[&str]) -> Value {
    let mut c = idp_claims();
    c["groups"] = json!(groups);
    c
}

fn auth_yaml(jwks: &std::path::Path, groups: &str) -> String {
    format!(
        "  auth:\n    jwt:\n      provider:\n        name: idp\n        issuer: https://idp\n        localJWKS: {{file: {}}}\n        audiences: [gw]\n        requiredClaims:\n          - {{name: groups, valueType: StringArray, values: [{groups}]}}\n",
        jwks.display()
    )
}

/// A directory holding `key` as `k1` in `jwks.json`, and that file.
fn jwks_file(name: &str, key: &Key) -> (TempDir, PathBuf) {
    let dir = TempDir::new(&format!("gw-auth-{name}"));
    let file = dir.path().join("jwks.json");
    std::fs::write(&file, jwks(&[key.jwk("k1")])).unwrap();
    (dir, file)
}

async fn upstream() -> Scripted {
    Scripted::start(Script {
        metrics: Script::idle_metrics(),
        content_type: "application/json",
        chunks: vec![r#"{"id":"c","object":"chat.completion","choices":[]}"#],
        gap: Duration::ZERO,
        held: None,
    })
    .await
}

async fn chat_as(gw: &TestGateway, token: Option<&str>) -> (StatusCode, hyper::HeaderMap, Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    let (s, h, b) = gw
        .post_with(
            "/v1/chat/completions",
            chat("m", "hi", json!({})).to_string(),
            &headers,
        )
        .await;
    let v = serde_json::from_slice(&b).unwrap_or(Value::Null);
    (s, h, v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_v1_route_needs_a_valid_token_and_the_upstream_never_sees_it() {
    let key = Key::ed25519();
    let (_dir, file) = jwks_file("routes", &key);
    let up = upstream().await;
    let yaml = config_yaml(
        &[PoolDef::new("p", "m", vec![up.addr])],
        &auth_yaml(&file, "ml"),
    );
    let gw = TestGateway::ready(&yaml).await;

    let (s, h, v) = chat_as(&gw, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    assert_eq!(h["www-authenticate"], "Bearer realm=\"idp\"");
    assert_eq!(v["error"]["code"], "missing_token");

    let stranger = Key::ed25519().token("k1", &claims(&["ml"]));
    let (s, h, v) = chat_as(&gw, Some(&stranger)).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    assert!(
        h["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("error=\"invalid_token\""),
        "{h:?}"
    );
    assert_eq!(v["error"]["type"], "authentication_error");

    let outsider = key.token("k1", &claims(&["ops"]));
    let (s, h, v) = chat_as(&gw, Some(&outsider)).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{v}");
    assert!(h["www-authenticate"]
        .to_str()
        .unwrap()
        .contains("error=\"insufficient_scope\""));
    assert_eq!(v["error"]["code"], "insufficient_scope");
    assert!(
        up.seen.lock().unwrap().is_empty(),
        "refused requests never reach the pool"
    );

    let member = key.token("k1", &claims(&["ops", "ml"]));
    let (s, _, v) = chat_as(&gw, Some(&member)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let seen = up.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert!(
        !seen[0].contains_key("authorization"),
        "the token went upstream: {:?}",
        seen[0]
    );

    // The other /v1 routes are closed too; the admin routes stay open.
    let (s, _) = send(gw.addr, Method::GET, "/v1/models", None, &[]).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = send(gw.addr, Method::GET, "/v1/unknown", None, &[]).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let bearer = format!("Bearer {member}");
    let (s, body) = send(
        gw.addr,
        Method::GET,
        "/v1/models",
        None,
        &[("authorization", &bearer)],
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body:?}");
    for path in ["/healthz", "/readyz"] {
        assert_eq!(gw.admin_get(path).await.0, StatusCode::OK, "{path}");
    }
    let metrics = gw.metric_text().await;
    assert_eq!(
        metric_sum(
            &metrics,
            "infergate_auth_refusals_total{code=\"missing_token\"}"
        ),
        3.0
    );
    assert_eq!(
        metric_sum(
            &metrics,
            "infergate_auth_refusals_total{code=\"invalid_token\"}"
        ),
        1.0
    );
    assert_eq!(
        metric_sum(
            &metrics,
            "infergate_auth_refusals_total{code=\"insufficient_scope\"}"
        ),
        1.0
    );
    assert_eq!(metric_sum(&metrics, "infergate_jwks_keys"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_changes_the_policy_keeps_the_keys_and_can_turn_auth_off() {
    let key = Key::ed25519();
    let (_dir, file) = jwks_file("reload", &key);
    let up = upstream().await;
    let pools = [PoolDef::new("p", "m", vec![up.addr])];
    let gw = TestGateway::ready(&config_yaml(&pools, &auth_yaml(&file, "ml"))).await;
    let ml = key.token("k1", &claims(&["ml"]));
    assert_eq!(chat_as(&gw, Some(&ml)).await.0, StatusCode::OK);
    let loads_before = metric_sum(&gw.metric_text().await, "infergate_jwks_loads_total");

    gw.handle
        .reload(resolve(&config_yaml(&pools, &auth_yaml(&file, "ops"))))
        .unwrap();
    assert_eq!(chat_as(&gw, Some(&ml)).await.0, StatusCode::FORBIDDEN);
    let ops = key.token("k1", &claims(&["ops"]));
    assert_eq!(chat_as(&gw, Some(&ops)).await.0, StatusCode::OK);
    assert_eq!(
        metric_sum(&gw.metric_text().await, "infergate_jwks_loads_total"),
        loads_before,
        "the same key source is not loaded again by a reload"
    );

    // A reload naming a key file that cannot be used is refused; the running auth stays.
    let missing = file.with_file_name("missing.json");
    let err = gw
        .handle
        .reload(resolve(&config_yaml(&pools, &auth_yaml(&missing, "ops"))))
        .unwrap_err();
    assert!(err.to_string().contains("localJWKS.file"), "{err}");
    assert_eq!(chat_as(&gw, None).await.0, StatusCode::UNAUTHORIZED);

    gw.handle.reload(resolve(&config_yaml(&pools, ""))).unwrap();
    assert_eq!(chat_as(&gw, None).await.0, StatusCode::OK);
}
