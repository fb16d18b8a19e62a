//! `infergate serve` with JWT auth as a user runs it: keys served by an issuer over loopback
//! HTTP (`remoteJWKS`), 401/403/200 through the gateway, a flood of made-up `kid`s that does
//! not hammer the issuer, a key rotated in without a restart, and no token in the logs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::jwt::{auth_spec, claims, jwks, Key, MIN_GAP};
use common::{instant_replica, TempDir};
use serde_json::Value;

/// A JWKS issuer on a loopback port: serves the current document, counts the fetches.
struct Issuer {
    port: u16,
    document: Arc<Mutex<String>>,
    hits: Arc<AtomicUsize>,
}

impl Issuer {
    fn start(document: String) -> Issuer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let document = Arc::new(Mutex::new(document));
        let hits = Arc::new(AtomicUsize::new(0));
        let (doc, count) = (Arc::clone(&document), Arc::clone(&hits));
        // Lives as long as the test process; one connection at a time is plenty.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.push(byte[0]);
                }
                count.fetch_add(1, Ordering::SeqCst);
                let body = doc.lock().unwrap().clone();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/jwk-set+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Issuer {
            port,
            document,
            hits,
        }
    }

    fn publish(&self, keys: &[Value]) {
        *self.document.lock().unwrap() = jwks(keys);
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A chat request with an optional bearer token; the raw response.
fn chat(port: u16, token: Option<&str>) -> String {
    let body =
        r#"{"model": "llama", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}"#;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
}

fn status(resp: &str) -> &str {
    resp.get(9..12).unwrap_or("")
}

#[test]
fn serve_checks_jwts_against_a_remote_jwks_and_takes_a_rotated_key_without_restart() {
    let (k1, k2) = (Key::p256(), Key::ed25519());
    let issuer = Issuer::start(String::new());
    issuer.publish(&[k1.jwk("k1")]);

    let (_sim, replica) = instant_replica("llama");
    let dir = TempDir::new("auth");
    let file = dir.path().join("gateway.yaml");
    std::fs::write(
        &file,
        common::one_pool_config(
            "llama",
            replica,
            &auth_spec(&format!(
                "remoteJWKS: {{uri: 'http://127.0.0.1:{}/.well-known/jwks.json'}}",
                issuer.port
            )),
            "",
        ),
    )
    .unwrap();
    let log = dir.path().join("gateway.log");
    // Every log line the gateway can write, so that none can hide a token. Ready means scraped
    // and keys loaded.
    let (gateway, port, admin) = common::serve_ready(&file, |c| {
        c.env("RUST_LOG", "trace")
            .stderr(std::fs::File::create(&log).unwrap());
    });
    assert_eq!(issuer.hits(), 1, "one fetch at start-up");
    let mut tokens = Vec::new();

    // No token: 401 with a bare challenge; health stays open.
    let r = chat(port, None);
    assert_eq!(status(&r), "401", "{r}");
    assert!(
        r.to_ascii_lowercase()
            .contains("www-authenticate: bearer realm=\"test-idp\"\r\n"),
        "{r}"
    );
    assert!(common::get(admin, "/healthz")
        .unwrap()
        .starts_with("HTTP/1.1 200"));

    // Signed by a stranger under a known kid: 401 invalid_token.
    let forged = Key::p256().token("k1", &claims(&["ml"], 600));
    let r = chat(port, Some(&forged));
    assert_eq!(status(&r), "401", "{r}");
    assert!(r.contains("error=\"invalid_token\""), "{r}");
    tokens.push(forged);

    // Expired: 401.
    let expired = k1.token("k1", &claims(&["ml"], -3600));
    let r = chat(port, Some(&expired));
    assert_eq!(status(&r), "401", "{r}");
    assert!(r.contains("the token has expired"), "{r}");
    tokens.push(expired);

    // Valid, but not in the required group: 403 insufficient_scope.
    let outsider = k1.token("k1", &claims(&["ops"], 600));
    let r = chat(port, Some(&outsider));
    assert_eq!(status(&r), "403", "{r}");
    assert!(r.contains("error=\"insufficient_scope\""), "{r}");
    assert!(r.contains("\"code\":\"insufficient_scope\""), "{r}");
    tokens.push(outsider);

    // Valid: served.
    let member = k1.token("k1", &claims(&["ml"], 600));
    let r = chat(port, Some(&member));
    assert_eq!(status(&r), "200", "{r}");
    tokens.push(member);

    // A flood of made-up kids: all 401, at most one fetch however many arrive.
    let before = issuer.hits();
    let flood_started = Instant::now();
    for i in 0..50 {
        let t = k1.token(&format!("made-up-{i}"), &claims(&["ml"], 600));
        assert_eq!(status(&chat(port, Some(&t))), "401");
        tokens.push(t);
    }
    assert!(
        flood_started.elapsed() < MIN_GAP,
        "the flood must fit in one gap to prove the limit"
    );
    assert!(
        issuer.hits() - before <= 1,
        "{} fetches for one flood",
        issuer.hits() - before
    );

    // Rotation: the issuer adds k2 and signs with it; once the gap has passed since any fetch,
    // the first k2 token makes the gateway fetch again and is accepted — no restart.
    issuer.publish(&[k1.jwk("k1"), k2.jwk("k2")]);
    std::thread::sleep(MIN_GAP + Duration::from_millis(500));
    let before = issuer.hits();
    let rotated = k2.token("k2", &claims(&["ml"], 600));
    let r = chat(port, Some(&rotated));
    assert_eq!(status(&r), "200", "{r}");
    assert_eq!(issuer.hits(), before + 1, "one fetch brought the new key");
    tokens.push(rotated);
    let r = chat(port, Some(&k1.token("k1", &claims(&["ml"], 600))));
    assert_eq!(
        status(&r),
        "200",
        "the old key still verifies while it is published: {r}"
    );

    drop(gateway);
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(
        log.contains("signing keys loaded"),
        "the log was captured:\n{log}"
    );
    for t in &tokens {
        let signature = t.rsplit('.').next().unwrap();
        assert!(!log.contains(signature), "a token reached the log:\n{log}");
    }
}
