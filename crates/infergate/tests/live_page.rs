//! The admin listener's live page in a real browser: headless Chromium (Debian's `chromium`),
//! driven over the WebDriver protocol by Debian's `chromium-driver`, opens `infergate demo`'s
//! page; it must show every endpoint of the demo fleet, then, without a reload, the decisions
//! and in-flight requests of traffic started after it loaded. A screenshot of it is written to
//! `target/live-page.png` for a person to look at.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// One WebDriver call: `method path` with a JSON `body`; the answer's `value`. Its own client
/// because ChromeDriver refuses a request whose `Host` is not the loopback address it serves.
fn webdriver(port: u16, method: &str, path: &str, body: &Value) -> Value {
    use std::io::{Read, Write};

    // A GET or DELETE carries no body.
    let body = if method == "POST" {
        body.to_string()
    } else {
        String::new()
    };
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // ChromeDriver keeps the connection open whatever the request says: read the head, then
    // exactly the body its Content-Length announces.
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let (head_len, body_len) = loop {
        let n = stream
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("chromedriver, {method} {path}: {e}"));
        assert!(n > 0, "chromedriver closed the connection: {method} {path}");
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or_else(|| panic!("no Content-Length: {head}"));
            break (end + 4, length);
        }
    };
    while raw.len() < head_len + body_len {
        let n = stream
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("chromedriver, {method} {path}: {e}"));
        assert!(
            n > 0,
            "chromedriver closed the connection mid-body: {method} {path}"
        );
        raw.extend_from_slice(&buf[..n]);
    }
    let body = &raw[head_len..head_len + body_len];
    let v: Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&raw)));
    v["value"].clone()
}

/// Runs `script` in the page and returns what it returns.
fn run_script(port: u16, session: &str, script: &str) -> Value {
    webdriver(
        port,
        "POST",
        &format!("/session/{session}/execute/sync"),
        &json!({"script": script, "args": []}),
    )
}

/// Polls `script` until `ok` accepts what it returns, for up to 30 s; the last value.
fn wait_for_script(port: u16, session: &str, script: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = run_script(port, session, script);
        if ok(&v) || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn the_live_page_shows_every_endpoint_of_the_demo_and_updates_when_load_starts() {
    let (_demo, gateway, admin) = common::demo_ready(5);
    let spawn = |[port]: [u16; 1]| {
        Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian's `chromium-driver` package) must be installed")
    };
    let ready = |[port]: [u16; 1]| {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && webdriver(port, "GET", "/status", &json!({}))["ready"] == true
    };
    let (_driver, [driver]) = common::start_on_free_ports("chromedriver's /status", spawn, ready);
    let profile = common::TempDir::new("chromium-profile");
    let session = webdriver(
        driver,
        "POST",
        "/session",
        &json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000",
                     format!("--user-data-dir={}", profile.path().display())],
        }}}}),
    );
    let id = session["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session: {session}"))
        .to_owned();
    webdriver(
        driver,
        "POST",
        &format!("/session/{id}/url"),
        &json!({"url": format!("http://127.0.0.1:{admin}/")}),
    );

    // Every endpoint of the demo (4 Llama, 2 Qwen), in its pool's table, with its signals.
    let endpoints = wait_for_script(
        driver,
        &id,
        "return Array.from(document.querySelectorAll('[data-pool] [data-endpoint]')).map(r => r.closest('[data-pool]').dataset.pool + ' ' + r.dataset.endpoint)",
        |v| v.as_array().is_some_and(|a| a.len() == 6),
    );
    let endpoints: Vec<String> = endpoints
        .as_array()
        .unwrap_or_else(|| panic!("{endpoints}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(endpoints.len(), 6, "{endpoints:?}");
    assert_eq!(
        endpoints
            .iter()
            .filter(|e| e.starts_with("llama-8b "))
            .count(),
        4
    );
    assert_eq!(
        endpoints
            .iter()
            .filter(|e| e.starts_with("qwen3-32b "))
            .count(),
        2
    );
    let decisions = run_script(
        driver,
        &id,
        "return document.querySelectorAll('[data-decision]').length",
    );
    assert_eq!(decisions, 0, "no request has been sent yet");
    let status = run_script(
        driver,
        &id,
        "return document.getElementById('status').textContent",
    );
    assert!(status.as_str().unwrap().contains("2 pools"), "{status}");

    // Load starts; the page, not reloaded, shows its decisions and requests in flight.
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..3)
        .map(|i| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let model = if i == 2 { "sql-lora" } else { "meta-llama/Llama-3.1-8B-Instruct" };
                let body = format!(
                    r#"{{"model": "{model}", "stream": true, "max_tokens": 400, "messages": [{{"role": "user", "content": "Tell me a long story."}}]}}"#
                );
                while !stop.load(Ordering::Relaxed) {
                    common::http(
                        &format!("127.0.0.1:{gateway}"),
                        "POST",
                        "/v1/chat/completions",
                        &body,
                        Duration::from_secs(60),
                    );
                }
            })
        })
        .collect();
    let seen = wait_for_script(
        driver,
        &id,
        "return {decisions: document.querySelectorAll('[data-decision]').length, in_flight: Array.from(document.querySelectorAll('[data-in-flight]')).map(c => Number(c.textContent)).reduce((a, b) => a + b, 0)}",
        |v| v["decisions"].as_u64() > Some(0) && v["in_flight"].as_u64() > Some(0),
    );
    let shot = webdriver(
        driver,
        "GET",
        &format!("/session/{id}/screenshot"),
        &json!({}),
    );
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().unwrap();
    }
    assert!(
        seen["decisions"].as_u64() > Some(0) && seen["in_flight"].as_u64() > Some(0),
        "the page did not show the load: {seen}"
    );
    let png = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        shot.as_str().unwrap(),
    )
    .unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/live-page.png");
    std::fs::write(&out, png).unwrap();
    webdriver(driver, "DELETE", &format!("/session/{id}"), &json!({}));
}
