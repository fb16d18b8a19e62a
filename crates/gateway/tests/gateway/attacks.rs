//! The slow-HTTP attacks of `slowhttptest` (Debian's package; CI installs it) against the
//! listener, each held for several seconds from 127.0.0.1 while a normal client on another
//! loopback address (127.0.0.2) sends a chat request every 250 ms: every one of those must be
//! answered within a second, and the bytes the gateway buffers must stay within its budget.

use super::common::*;
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

/// One chat request from 127.0.0.2 over a fresh connection; its status line and how long the
/// whole exchange took.
async fn probe(gw: SocketAddr) -> (String, Duration) {
    let t0 = Instant::now();
    let body = chat(LLAMA, "hi", json!({})).to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let exchange = async {
        let socket = TcpSocket::new_v4().ok()?;
        socket.bind(SocketAddr::from(([127, 0, 0, 2], 0))).ok()?;
        let mut s = socket.connect(gw).await.ok()?;
        s.write_all(request.as_bytes()).await.ok()?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.ok()?;
        let text = String::from_utf8_lossy(&out).into_owned();
        Some(text.lines().next().unwrap_or("").to_owned())
    };
    let status = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| "no answer".to_owned());
    (status, t0.elapsed())
}

/// Runs `slowhttptest` with `mode_args` for `seconds` against `url`, probing meanwhile; returns
/// the probes' results.
async fn under_attack(
    gw: &TestGateway,
    url: &str,
    mode_args: &[&str],
    seconds: u64,
) -> Vec<(String, Duration)> {
    let mut attack = tokio::process::Command::new("slowhttptest")
        .args(mode_args)
        .args(["-c", "400", "-r", "400", "-i", "1", "-p", "2"])
        .args(["-l", &seconds.to_string(), "-u", url])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("slowhttptest is installed (apt install slowhttptest; .ci/run does)");
    // Let it open its connections first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut probes = Vec::new();
    let end = Instant::now() + Duration::from_secs(seconds.saturating_sub(3));
    while Instant::now() < end {
        probes.push(probe(gw.addr).await);
        let buffered = metric_sum(
            &gw.metric_text().await,
            "infergate_request_body_bytes_buffered",
        );
        assert!(buffered <= 1_048_576.0, "buffered {buffered} bytes");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let _ = attack.kill().await;
    probes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_slow_body_and_slow_read_leave_a_normal_client_served_within_a_second() {
    let r = Replica::start(instant()).await;
    let yaml = llama_yaml(
        r.addr,
        "  listen:\n    connections: {maxConnections: 300, headerTimeout: 3s, bodyTimeout: 3s, sendTimeout: 3s}\n",
    )
    .replace(
        "  bbr: {enabled: true}\n",
        "  bbr: {enabled: true, maxRequestBodyBytes: 65536, maxBufferedBodyBytes: 1048576}\n",
    );
    let gw = TestGateway::ready(&yaml).await;
    let chat_url = format!("http://{}/v1/chat/completions", gw.addr);
    let models_url = format!("http://{}/v1/models", gw.addr);
    for (name, url, args) in [
        ("slowloris", &chat_url, vec!["-H", "-t", "POST"]),
        ("slow body", &chat_url, vec!["-B", "-s", "65536"]),
        (
            "slow read",
            &models_url,
            vec![
                "-X", "-k", "50", "-n", "2", "-z", "32", "-w", "16", "-y", "32",
            ],
        ),
    ] {
        let probes = under_attack(&gw, url, &args, 10).await;
        assert!(probes.len() >= 5, "{name}: {probes:?}");
        for (status, took) in &probes {
            assert!(
                status.starts_with("HTTP/1.1 200"),
                "{name}: {status} ({took:?})"
            );
            assert!(
                *took < Duration::from_secs(1),
                "{name}: a probe took {took:?}"
            );
        }
    }
    let m = gw.metric_text().await;
    // The attacks really held connections and were cut by the limits, not ignored.
    let closed = |reason: &str| {
        metric_sum(
            &m,
            &format!("infergate_client_connections_closed_total{{reason=\"{reason}\"}}"),
        )
    };
    assert!(closed("refused_per_source") > 0.0, "{m}");
    assert!(closed("header_timeout") > 0.0, "{m}");
    assert!(
        metric_sum(
            &m,
            "infergate_request_body_refusals_total{reason=\"timeout\"}"
        ) > 0.0,
        "{m}"
    );
}
