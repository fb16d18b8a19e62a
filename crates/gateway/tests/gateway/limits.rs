//! The listener's limits against the clients that defeated an earlier version: connections
//! that send nothing, an HTTP/2 preface and then nothing, a trickled head, a trickled body,
//! bodies that would pass the buffer budget, and requests HTTP itself forbids. Each test holds
//! the attack open while a normal client is served, and reads the limit's metric.

use super::common::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hyper::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A connection to `gw` from the loopback address `127.0.0.<last>`: every source the tests
/// need without leaving the machine.
async fn connect_from(last: u8, gw: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from(([127, 0, 0, last], 0)))
        .unwrap();
    tokio::time::timeout(CALL_LIMIT, socket.connect(gw))
        .await
        .unwrap()
        .unwrap()
}

/// Whether the gateway closed `s`: a read sees the end (or a reset) within `within`.
async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match tokio::time::timeout(within, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// One raw HTTP/1.1 exchange: writes `request`, reads until the peer closes or `limit` passes.
async fn raw(gw: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(gw).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn closed(metrics: &str, reason: &str) -> f64 {
    metric_sum(
        metrics,
        &format!("infergate_client_connections_closed_total{{reason=\"{reason}\"}}"),
    )
}

/// A normal chat request, timed.
async fn served_within(gw: &TestGateway, limit: Duration) {
    let t0 = Instant::now();
    let (s, _, b) = gw
        .post("/v1/chat/completions", &chat(LLAMA, "hi", json!({})))
        .await;
    let took = t0.elapsed();
    assert_eq!(s, StatusCode::OK, "{b:?}");
    assert!(
        took < limit,
        "a normal request took {took:?} under the attack"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_silent_connections_from_one_address_leaves_room_and_is_timed_out() {
    let r = Replica::start(instant()).await;
    let gw = TestGateway::ready(&llama_yaml(
        r.addr,
        "  listen:\n    connections: {maxConnections: 40, perSourceShare: 0.5, firstByteTimeout: 1s}\n",
    ))
    .await;
    // 60 connections that never send a byte, from one address: 20 are held, 40 refused.
    let mut silent = Vec::new();
    for _ in 0..60 {
        silent.push(connect_from(2, gw.addr).await);
    }
    served_within(&gw, Duration::from_secs(1)).await;
    // Every silent connection is closed: refused at once, or at the first-byte deadline.
    for s in &mut silent {
        assert!(closed_within(s, Duration::from_secs(4)).await);
    }
    let m = gw.metric_text().await;
    assert_eq!(closed(&m, "refused_per_source"), 40.0, "{m}");
    assert_eq!(closed(&m, "first_byte_timeout"), 20.0, "{m}");
    assert_eq!(metric_sum(&m, "infergate_client_connections_limit"), 40.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_limit_an_idle_connection_yields_to_a_new_client() {
    let r = Replica::start(instant()).await;
    let gw = TestGateway::ready(&llama_yaml(
        r.addr,
        "  listen:\n    connections: {maxConnections: 10, perSourceShare: 1}\n",
    ))
    .await;
    // Ten silent connections from ten addresses fill the listener (the first-byte timeout,
    // 10 s by default, has not run out).
    let mut silent = Vec::new();
    for last in 2..12 {
        silent.push(connect_from(last, gw.addr).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    served_within(&gw, Duration::from_secs(1)).await;
    let m = gw.metric_text().await;
    assert!(closed(&m, "evicted_idle") >= 1.0, "{m}");
    let mut evicted = 0;
    for s in &mut silent {
        if closed_within(s, Duration::from_millis(200)).await {
            evicted += 1;
        }
    }
    assert!(
        evicted >= 1,
        "the client's connections took the slots of idle ones"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_preface_then_silence_is_closed_at_the_idle_timeout() {
    let r = Replica::start(instant()).await;
    let gw = TestGateway::ready(&llama_yaml(
        r.addr,
        "  listen:\n    connections: {idleTimeout: 1s}\n",
    ))
    .await;
    let mut s = connect_from(2, gw.addr).await;
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let t0 = Instant::now();
    assert!(closed_within(&mut s, Duration::from_secs(4)).await);
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t0.elapsed()
    );
    let m = gw.metric_text().await;
    assert_eq!(closed(&m, "idle_timeout"), 1.0, "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_head_is_cut_at_the_header_timeout() {
    let r = Replica::start(instant()).await;
    let gw = TestGateway::ready(&llama_yaml(
        r.addr,
        "  listen:\n    connections: {headerTimeout: 1s, idleTimeout: 30s}\n",
    ))
    .await;
    let mut s = connect_from(2, gw.addr).await;
    let head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nX-a: ";
    let t0 = Instant::now();
    let mut cut = false;
    // One byte every 200 ms: each arrives well within any per-read timeout, the head never ends.
    for byte in head.iter().cycle().take(40) {
        if s.write_all(&[*byte]).await.is_err() {
            cut = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(cut || closed_within(&mut s, Duration::from_secs(2)).await);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let m = gw.metric_text().await;
    assert_eq!(closed(&m, "header_timeout"), 1.0, "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_body_gets_408_at_the_body_timeout() {
    let r = Replica::start(instant()).await;
    let gw = TestGateway::ready(&llama_yaml(
        r.addr,
        "  listen:\n    connections: {bodyTimeout: 1s}\n",
    ))
    .await;
    let mut s = connect_from(2, gw.addr).await;
    s.write_all(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":",
    )
    .await
    .unwrap();
    let t0 = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    // Keep trickling while waiting for the answer.
    while t0.elapsed() < Duration::from_secs(4) {
        if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await
        {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
            break;
        }
        let _ = s.write_all(b" ").await;
    }
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("body_timeout"), "{text}");
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "{took:?}"
    );
    let m = gw.metric_text().await;
    assert_eq!(
        metric_sum(
            &m,
            "infergate_request_body_refusals_total{reason=\"timeout\"}"
        ),
        1.0,
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_past_the_buffer_budget_get_503_and_the_budget_comes_back() {
    let r = Replica::start(instant()).await;
    let yaml = llama_yaml(r.addr, "").replace(
        "  bbr: {enabled: true}\n",
        "  bbr: {enabled: true, maxRequestBodyBytes: 1000, maxBufferedBodyBytes: 1000}\n",
    );
    let gw = TestGateway::ready(&yaml).await;
    // One client holds 700 bytes of an unfinished body.
    let mut holder = connect_from(2, gw.addr).await;
    let mut partial = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n".to_vec();
    partial.extend(std::iter::repeat_n(b' ', 700));
    holder.write_all(&partial).await.unwrap();
    eventually("the held bytes are counted", || async {
        metric_sum(
            &gw.metric_text().await,
            "infergate_request_body_bytes_buffered",
        ) == 700.0
    })
    .await;
    // Another's 600-byte body does not fit beside it.
    let padded = format!(
        "{{\"model\":\"{LLAMA}\",\"messages\":[{{\"role\":\"user\",\"content\":\"{}\"}}]}}",
        "x".repeat(520)
    );
    let (s, h, b) = gw
        .post_with("/v1/chat/completions", padded.clone(), &[])
        .await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{b:?}");
    assert_eq!(h["retry-after"], "1");
    assert_eq!(error_of(&b)["code"], "body_budget_exhausted");
    // When the holder goes, its bytes are given back and the same body is served.
    drop(holder);
    eventually("the budget is given back", || async {
        metric_sum(
            &gw.metric_text().await,
            "infergate_request_body_bytes_buffered",
        ) == 0.0
    })
    .await;
    let (s, _, b) = gw.post_with("/v1/chat/completions", padded, &[]).await;
    assert_eq!(s, StatusCode::OK, "{b:?}");
    let m = gw.metric_text().await;
    assert_eq!(
        metric_sum(
            &m,
            "infergate_request_body_refusals_total{reason=\"budget\"}"
        ),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_1_1_without_exactly_one_host_is_400_and_1_0_without_one_is_served() {
    let r = Replica::start(instant()).await;
    let gw = TestGateway::ready(&llama_yaml(r.addr, "")).await;
    let body = chat(LLAMA, "hi", json!({})).to_string();
    let request = |version: &str, hosts: &str| {
        format!(
            "POST /v1/chat/completions {version}\r\n{hosts}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let none = raw(gw.addr, request("HTTP/1.1", "").as_bytes()).await;
    assert!(none.starts_with("HTTP/1.1 400"), "{none}");
    assert!(none.contains("bad_host"), "{none}");
    let two = raw(
        gw.addr,
        request("HTTP/1.1", "Host: a\r\nHost: b\r\n").as_bytes(),
    )
    .await;
    assert!(two.starts_with("HTTP/1.1 400"), "{two}");
    let one = raw(gw.addr, request("HTTP/1.1", "Host: gw\r\n").as_bytes()).await;
    assert!(one.starts_with("HTTP/1.1 200"), "{one}");
    let old = raw(gw.addr, request("HTTP/1.0", "").as_bytes()).await;
    assert!(
        old.starts_with("HTTP/1.0 200") || old.starts_with("HTTP/1.1 200"),
        "{old}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_100_continue_is_answered_by_the_gateway_and_not_forwarded() {
    let up = Scripted::start(Script {
        metrics: Script::idle_metrics(),
        content_type: "application/json",
        chunks: vec!["{\"id\":\"x\",\"choices\":[]}"],
        gap: Duration::ZERO,
        held: None,
    })
    .await;
    let gw = TestGateway::ready(&llama_yaml(up.addr, "")).await;
    let body = chat(LLAMA, "hi", json!({})).to_string();
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    s.write_all(
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    // The client waits for the go-ahead before sending its body, as curl does.
    let mut buf = [0u8; 256];
    let n = tokio::time::timeout(CALL_LIMIT, s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let interim = String::from_utf8_lossy(&buf[..n]);
    assert!(interim.starts_with("HTTP/1.1 100 Continue"), "{interim}");
    s.write_all(body.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(CALL_LIMIT, s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("200 OK"), "{text}");
    let forwarded = up
        .seen
        .lock()
        .unwrap()
        .last()
        .cloned()
        .expect("the upstream got the request");
    assert!(!forwarded.contains_key("expect"), "{forwarded:?}");

    let other = raw(
        gw.addr,
        format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: {}\r\nExpect: 200-ok\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await;
    assert!(other.starts_with("HTTP/1.1 417"), "{other}");
}
