//! `infergate serve` confined to 600 file descriptors (`prlimit`, util-linux), as an outside
//! test ran it: 650 connections that never send a byte, then `slowhttptest` (Debian's package)
//! opening 700 slowloris connections. Before the listener's limits, either made every probe
//! fail for as long as the attack lasted. Now a normal client on another loopback address must
//! be answered within a second throughout, and the admin listener's probe too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{infergate, instant_replica, metric, Running, TempDir};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A chat request over a fresh connection from 127.0.0.2: its status line, and how long it took.
fn probe(port: u16) -> (String, Duration) {
    let t0 = Instant::now();
    let body =
        r#"{"model": "llama", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let exchange = || -> std::io::Result<String> {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
        socket.bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into())?;
        socket.connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], port)).into(),
            Duration::from_secs(5),
        )?;
        let mut s: TcpStream = socket.into();
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(request.as_bytes())?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out.lines().next().unwrap_or("").to_owned())
    };
    let status = exchange().unwrap_or_else(|e| format!("failed: {e}"));
    (status, t0.elapsed())
}

fn assert_served(what: &str, port: u16, admin: u16) {
    let (status, took) = probe(port);
    assert!(status.starts_with("HTTP/1.1 200"), "{what}: {status}");
    assert!(took < Duration::from_secs(1), "{what}: took {took:?}");
    let ready = common::get(admin, "/readyz").unwrap_or_default();
    assert!(ready.starts_with("HTTP/1.1 200"), "{what}: readyz {ready}");
}

#[test]
fn with_600_descriptors_silent_and_slowloris_floods_leave_clients_and_probes_served() {
    let (_sim, replica) = instant_replica("llama");
    let dir = TempDir::new("descriptors");
    let file = dir.path().join("gateway.yaml");
    std::fs::write(&file, common::one_pool_config("llama", replica, "", "")).unwrap();
    // Started again on fresh ports if another process took one first.
    let spawn = |[port, admin]: [u16; 2]| {
        Command::new("prlimit")
            .arg("--nofile=600:600")
            .arg(infergate().get_program())
            .args(["serve", "--config"])
            .arg(&file)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prlimit (util-linux) starts the gateway with 600 descriptors")
    };
    let ready = |[_, admin]: [u16; 2]| {
        common::get(admin, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
    };
    let (_gateway, [port, admin]) = common::start_on_free_ports("serve's /readyz", spawn, ready);

    // (600 − 256 reserved) / 2 descriptors a proxied connection.
    assert_eq!(metric(admin, "infergate_client_connections_limit"), 172.0);
    assert_served("before any attack", port, admin);

    let silent: Vec<TcpStream> = (0..650)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    for i in 0..5 {
        assert_served(
            &format!("650 silent connections open, probe {i}"),
            port,
            admin,
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        metric(
            admin,
            "infergate_client_connections_closed_total{reason=\"refused_per_source\"}"
        ) > 400.0
    );
    drop(silent);

    let mut attack = Running(
        Command::new("slowhttptest")
            .args([
                "-H", "-c", "700", "-r", "700", "-i", "1", "-l", "12", "-p", "2",
            ])
            .args([
                "-u",
                &format!("http://127.0.0.1:{port}/v1/chat/completions"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("slowhttptest is installed (apt install slowhttptest; .ci/run does)"),
    );
    std::thread::sleep(Duration::from_secs(2));
    let end = Instant::now() + Duration::from_secs(8);
    let mut probes = 0;
    while Instant::now() < end {
        assert_served(&format!("slowloris, probe {probes}"), port, admin);
        probes += 1;
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(probes >= 10, "{probes} probes");
    assert!(
        attack.0.try_wait().unwrap().is_none(),
        "the attack ran throughout"
    );
    assert_eq!(metric(admin, "infergate_accept_errors_total"), 0.0);
}
