//! Request smuggling and bad input, from raw sockets: a catalogue of ambiguous framings (both
//! `Content-Length` and `Transfer-Encoding`, doubled or malformed lengths, obfuscated
//! encodings, folded headers, bad chunks, bare line ends) each carrying a second request marked
//! `x-smuggled`, and a catalogue of bodies the gateway cannot route by (fields it does not read,
//! such as a negative `max_tokens`, are the model server's to refuse). For every case: the
//! gateway refuses it with 400 (or, for a length beside a final `chunked`, reads it by the
//! encoding alone and closes the connection after, as RFC 9112 says), nothing smuggled or bad
//! reaches the upstream, and a normal request is served after each.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::*;

/// The request a case tries to slip past the gateway.
const SMUGGLED: &str =
    "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nx-smuggled: 1\r\nContent-Type: application/json\r\nContent-Length: 63\r\n\r\n{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"smuggled\"}]}";

fn chat_body() -> String {
    chat(LLAMA, "hi", json!({"max_tokens": 2})).to_string()
}

/// The framing cases: each the head's framing lines and the body bytes that follow them.
fn framings() -> Vec<(&'static str, String, String)> {
    let body = chat_body();
    let n = body.len();
    let chunked = |b: &str| format!("{:x}\r\n{b}\r\n0\r\n\r\n", b.len());
    vec![
        (
            "CL.TE: a length that ends inside the chunked body",
            format!("Content-Length: {}\r\nTransfer-Encoding: chunked\r\n", 5),
            format!("{}{SMUGGLED}", chunked(&body)),
        ),
        (
            "TE.CL: chunked with a length that covers the smuggled request",
            format!(
                "Transfer-Encoding: chunked\r\nContent-Length: {}\r\n",
                n + SMUGGLED.len()
            ),
            format!("{}{SMUGGLED}", chunked(&body)),
        ),
        (
            "two different Content-Lengths",
            format!("Content-Length: {n}\r\nContent-Length: {}\r\n", n + 10),
            format!("{body}{SMUGGLED}"),
        ),
        (
            "one Content-Length with two values",
            format!("Content-Length: {n}, {}\r\n", n + 10),
            format!("{body}{SMUGGLED}"),
        ),
        (
            "a signed Content-Length",
            format!("Content-Length: +{n}\r\n"),
            format!("{body}{SMUGGLED}"),
        ),
        (
            "a hexadecimal Content-Length",
            format!("Content-Length: 0x{n:x}\r\n"),
            format!("{body}{SMUGGLED}"),
        ),
        (
            "a Content-Length past u64",
            "Content-Length: 99999999999999999999999\r\n".to_owned(),
            format!("{body}{SMUGGLED}"),
        ),
        (
            "a space before the colon",
            format!("Content-Length : {n}\r\n"),
            format!("{body}{SMUGGLED}"),
        ),
        (
            "Transfer-Encoding: xchunked",
            "Transfer-Encoding: xchunked\r\n".to_owned(),
            format!("{}{SMUGGLED}", chunked(&body)),
        ),
        (
            "Transfer-Encoding: chunked, identity",
            "Transfer-Encoding: chunked, identity\r\n".to_owned(),
            format!("{}{SMUGGLED}", chunked(&body)),
        ),
        (
            "Transfer-Encoding: identity, chunked with a length",
            format!("Transfer-Encoding: identity, chunked\r\nContent-Length: {n}\r\n"),
            format!("{}{SMUGGLED}", chunked(&body)),
        ),
        (
            "two Transfer-Encoding headers",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n".to_owned(),
            format!("{}{SMUGGLED}", chunked(&body)),
        ),
        (
            "a folded Transfer-Encoding (obs-fold)",
            "Transfer-Encoding:\r\n chunked\r\n".to_owned(),
            format!("{}{SMUGGLED}", chunked(&body)),
        ),
        (
            "a folded Content-Length (obs-fold)",
            format!("Content-Length:\r\n {n}\r\n"),
            format!("{body}{SMUGGLED}"),
        ),
        (
            "a chunk size in 0x form",
            "Transfer-Encoding: chunked\r\n".to_owned(),
            format!("0x{:x}\r\n{body}\r\n0\r\n\r\n{SMUGGLED}", n),
        ),
        (
            "a chunk size with a negative sign",
            "Transfer-Encoding: chunked\r\n".to_owned(),
            format!("-{:x}\r\n{body}\r\n0\r\n\r\n{SMUGGLED}", n),
        ),
        (
            "a chunk longer than its size",
            "Transfer-Encoding: chunked\r\n".to_owned(),
            format!("5\r\n{body}\r\n0\r\n\r\n{SMUGGLED}"),
        ),
        (
            "a chunk size past u64",
            "Transfer-Encoding: chunked\r\n".to_owned(),
            format!("fffffffffffffffffffff\r\n{body}\r\n0\r\n\r\n{SMUGGLED}"),
        ),
        (
            "a bare LF after the chunk size",
            "Transfer-Encoding: chunked\r\n".to_owned(),
            format!("{:x}\n{body}\r\n0\r\n\r\n{SMUGGLED}", n),
        ),
        (
            "a NUL in a header value",
            format!("Content-Length: {n}\r\nX-Note: a\0b\r\n"),
            format!("{body}{SMUGGLED}"),
        ),
        (
            "a bare CR inside a header value",
            format!("Content-Length: {n}\r\nX-Note: a\rb\r\n"),
            format!("{body}{SMUGGLED}"),
        ),
        (
            "Transfer-Encoding on HTTP/1.0 (sent as 1.1 here) with a length of 0",
            "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n".to_owned(),
            format!("{}{SMUGGLED}", chunked(&body)),
        ),
    ]
}

/// Cases whose request carries a length and ends its `Transfer-Encoding` with `chunked`: RFC
/// 9112 reads those by the encoding alone.
fn framed_by_transfer_encoding(case: &str) -> bool {
    case.starts_with("CL.TE")
        || case.starts_with("TE.CL")
        || case.starts_with("Transfer-Encoding: identity, chunked")
        || case.starts_with("Transfer-Encoding on HTTP/1.0")
}

/// Sends `bytes` on a fresh connection and reads what comes back until the gateway closes it or
/// 2 s pass; the status lines of the responses in it.
async fn exchange(gw: &TestGateway, bytes: &[u8]) -> Vec<String> {
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out)
        .lines()
        .filter(|l| l.starts_with("HTTP/1."))
        .map(str::to_owned)
        .collect()
}

async fn a_normal_request_is_served(gw: &TestGateway, after: &str) {
    let (status, _, _) = gw
        .post(
            "/v1/chat/completions",
            &chat(LLAMA, "after", json!({"max_tokens": 2})),
        )
        .await;
    assert_eq!(status, hyper::StatusCode::OK, "after {after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_framing_smuggles_a_second_request_to_the_upstream() {
    let up = Scripted::start(Script {
        metrics: Script::idle_metrics(),
        content_type: "application/json",
        chunks: vec![r#"{"id":"x","object":"chat.completion","choices":[]}"#],
        gap: Duration::ZERO,
        held: None,
    })
    .await;
    let gw = TestGateway::ready(&llama_yaml(up.addr, "")).await;
    let mut seen = Vec::new();
    for (case, framing, rest) in framings() {
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n{framing}\r\n"
        );
        let before = up.seen.lock().unwrap().len();
        let statuses = exchange(&gw, format!("{head}{rest}").as_bytes()).await;
        let forwarded = up.seen.lock().unwrap().len() - before;
        let smuggled = up
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|h| h.contains_key("x-smuggled"))
            .count();
        seen.push((case, statuses, forwarded, smuggled));
        a_normal_request_is_served(&gw, case).await;
    }
    let table: Vec<String> = seen
        .iter()
        .map(|(case, statuses, forwarded, _)| {
            format!("{case}: {statuses:?}, {forwarded} forwarded")
        })
        .collect();
    eprintln!("{}", table.join("\n"));
    for (case, statuses, forwarded, smuggled) in &seen {
        assert_eq!(
            *smuggled, 0,
            "{case}: a request was smuggled ({statuses:?})"
        );
        // One answer at most: a second would be the smuggled request, read as the next one.
        assert!(statuses.len() <= 1, "{case}: answered {statuses:?}");
        if framed_by_transfer_encoding(case) {
            // Content-Length and a final `chunked` at once: read by Transfer-Encoding alone,
            // sent upstream once with the gateway's own length, the connection then closed
            // (RFC 9112, section 6.3).
            assert!(*forwarded <= 1, "{case}: forwarded {forwarded} times");
        } else {
            // Every other framing is malformed: refused, never guessed at.
            assert_eq!(*forwarded, 0, "{case}: forwarded ({statuses:?})");
            assert!(
                statuses.iter().all(|s| s.contains(" 400 ")),
                "{case}: answered {statuses:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_get_4xx_with_an_openai_error_and_never_reach_the_upstream() {
    let up = Scripted::start(Script {
        metrics: Script::idle_metrics(),
        content_type: "application/json",
        chunks: vec![r#"{"id":"x","object":"chat.completion","choices":[]}"#],
        gap: Duration::ZERO,
        held: None,
    })
    .await;
    let gw = TestGateway::ready(&llama_yaml(up.addr, "")).await;
    let deep_array = format!(
        "{{\"model\":\"{LLAMA}\",\"messages\":{}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let deep_object = format!(
        "{{\"model\":\"{LLAMA}\",\"x\":{}1{}}}",
        "{\"a\":".repeat(50_000),
        "}".repeat(50_000)
    );
    let long_model = format!("{{\"model\":\"{}\",\"messages\":[]}}", "m".repeat(1 << 20));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", b"".to_vec()),
        ("not JSON", b"hello".to_vec()),
        ("truncated JSON", br#"{"model":"#.to_vec()),
        ("a JSON array", b"[1,2,3]".to_vec()),
        ("a JSON string", br#""model""#.to_vec()),
        ("null", b"null".to_vec()),
        (
            "no model",
            br#"{"messages":[{"role":"user","content":"hi"}]}"#.to_vec(),
        ),
        ("model a number", br#"{"model":7,"messages":[]}"#.to_vec()),
        ("model null", br#"{"model":null,"messages":[]}"#.to_vec()),
        (
            "model an object",
            br#"{"model":{"a":1},"messages":[]}"#.to_vec(),
        ),
        ("model empty", br#"{"model":"","messages":[]}"#.to_vec()),
        (
            "an unknown model",
            br#"{"model":"no-such-model","messages":[]}"#.to_vec(),
        ),
        (
            "a model with a NUL",
            b"{\"model\":\"meta\\u0000llama\",\"messages\":[]}".to_vec(),
        ),
        (
            "invalid UTF-8",
            b"{\"model\":\"\xff\xfe\",\"messages\":[]}".to_vec(),
        ),
        (
            "a lone surrogate escape",
            br#"{"model":"\ud800","messages":[]}"#.to_vec(),
        ),
        (
            "trailing bytes",
            format!("{{\"model\":\"{LLAMA}\",\"messages\":[]}} x").into_bytes(),
        ),
        (
            "two documents",
            format!("{{\"model\":\"{LLAMA}\"}}{{\"model\":\"{LLAMA}\"}}").into_bytes(),
        ),
        (
            "duplicate model keys naming two models",
            format!("{{\"model\":\"{LLAMA}\",\"model\":\"other\"}}").into_bytes(),
        ),
        (
            "stream a string",
            format!("{{\"model\":\"{LLAMA}\",\"stream\":\"yes\"}}").into_bytes(),
        ),
        ("a 1 MiB model name", long_model.into_bytes()),
    ];
    // Bodies whose oddity is in what the gateway passes on unread: it must survive them (no
    // stack overflow on deep nesting) and leave them to the model server.
    let passed_on: Vec<(&str, Vec<u8>)> = vec![
        ("messages nested 100,000 deep", deep_array.into_bytes()),
        ("an object nested 50,000 deep", deep_object.into_bytes()),
        (
            "max_tokens negative",
            format!("{{\"model\":\"{LLAMA}\",\"messages\":[],\"max_tokens\":-1}}").into_bytes(),
        ),
        (
            "max_tokens past u64",
            format!("{{\"model\":\"{LLAMA}\",\"messages\":[],\"max_tokens\":1e400}}").into_bytes(),
        ),
    ];
    for (case, body) in &passed_on {
        let (status, _, answer) = send_full(
            gw.addr,
            hyper::Method::POST,
            "/v1/chat/completions",
            Some(String::from_utf8_lossy(body).into_owned()),
            &[],
        )
        .await;
        assert!(
            status.is_success() || status.is_client_error(),
            "{case}: {status} {}",
            String::from_utf8_lossy(&answer)
        );
        a_normal_request_is_served(&gw, case).await;
    }
    let mut statuses = Vec::new();
    for (case, body) in &cases {
        let before = up.seen.lock().unwrap().len();
        let (status, _, answer) = send_full(
            gw.addr,
            hyper::Method::POST,
            "/v1/chat/completions",
            Some(String::from_utf8_lossy(body).into_owned()),
            &[],
        )
        .await;
        // Some bodies are not UTF-8: send those as bytes.
        let (status, answer) = if std::str::from_utf8(body).is_err() {
            let (s, b) = infergate_test_support::client::send(
                gw.addr,
                hyper::Method::POST,
                "/v1/chat/completions",
                Some(body.clone()),
            )
            .await
            .unwrap();
            (s, b)
        } else {
            (status, answer)
        };
        assert!(
            status.is_client_error(),
            "{case}: {status} {}",
            String::from_utf8_lossy(&answer)
        );
        let error: serde_json::Value = serde_json::from_slice(&answer)
            .unwrap_or_else(|e| panic!("{case}: the answer is not JSON ({e}): {answer:?}"));
        assert!(
            error["error"]["message"].is_string(),
            "{case}: not an OpenAI error: {error}"
        );
        assert_eq!(
            up.seen.lock().unwrap().len(),
            before,
            "{case}: the bad body reached the upstream"
        );
        statuses.push(format!("{case}: {status}"));
    }
    eprintln!("{}", statuses.join("\n"));
    a_normal_request_is_served(&gw, "the bad bodies").await;
}
