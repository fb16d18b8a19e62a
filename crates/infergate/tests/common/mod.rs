//! What every end-to-end test of the binary needs: the binary, free ports, children that die
//! with the test, plain HTTP/1.1 over loopback, and waiting with a deadline.

#![allow(dead_code, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

#[allow(unused_imports)] // not every test binary signs tokens
pub use infergate_test_support::jwt;
// The gateway's tests start Redis this way too; one file, so both stay careful alike.
#[path = "../../../control/tests/support/redis_server.rs"]
mod redis_server_support;

pub use redis_server_support::RedisServer;

/// The `infergate` binary under test.
pub fn infergate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_infergate"))
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process, killed and reaped when dropped.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 request with a JSON body (empty for none) to `addr` ("ip:port"); the whole raw
/// response, or `None` if the connection failed or timed out.
pub fn http(addr: &str, method: &str, path: &str, body: &str, timeout: Duration) -> Option<String> {
    http_with(addr, method, path, &[], body, timeout)
}

/// [`http`] with extra request `headers`.
pub fn http_with(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    timeout: Duration,
) -> Option<String> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    Some(out)
}

/// `GET path` on a loopback port.
pub fn get(port: u16, path: &str) -> Option<String> {
    http(
        &format!("127.0.0.1:{port}"),
        "GET",
        path,
        "",
        Duration::from_secs(5),
    )
}

/// Polls `ok` every 50 ms for up to 30 s; panics naming `what` if it never holds.
pub fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for {what}");
}

/// An `infergate sim` replica of the `instant` profile serving `model` on a free port, its
/// output discarded; started again on a fresh port if it exits first ([`start_on_free_ports`]).
/// Returns once `/health` answers 200: the process and its port.
pub fn instant_replica(model: &str) -> (Running, u16) {
    instant_replica_with(model, &[])
}

/// [`instant_replica`] with more `infergate sim` flags (LoRA slots and adapters, say).
pub fn instant_replica_with(model: &str, flags: &[&str]) -> (Running, u16) {
    let spawn = |[port]: [u16; 1]| {
        infergate()
            .args(["sim", "--model", "instant", "--served-model-name", model])
            .args(["--port", &port.to_string()])
            .args(flags)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let healthy =
        |[port]: [u16; 1]| get(port, "/health").is_some_and(|r| r.starts_with("HTTP/1.1 200"));
    let (sim, [port]) = start_on_free_ports("an instant replica", spawn, healthy);
    (sim, port)
}

/// A raw HTTP/1.1 response split into its status, its headers (names lower-cased, values
/// trimmed, in order) and its body as sent (still chunked if it was).
pub fn split_response(raw: &str) -> (u16, Vec<(String, String)>, &str) {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {raw}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body)
}

/// A real `redis-server` on a free loopback port of its own (see [`RedisServer::on_free_port`]),
/// and that port.
pub fn redis_server_on_free_port() -> (RedisServer, u16) {
    let server = RedisServer::on_free_port();
    let port = server.port();
    (server, port)
}

/// A real `redis-server` on loopback `port` (one this test has just freed, say to restart its
/// server); fails if another process answers there.
pub fn redis_server(port: u16) -> RedisServer {
    RedisServer::on_port(port).unwrap_or_else(|| {
        panic!("redis-server could not take port {port}: another process has it")
    })
}

/// One command to the Redis on loopback `port`; its raw RESP reply.
pub fn redis_command(port: u16, args: &[&str]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut cmd = format!("*{}\r\n", args.len());
    for a in args {
        cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(cmd.as_bytes()).unwrap();
    let mut buf = [0u8; 512];
    let n = loop {
        match s.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            n => break n.unwrap(),
        }
    };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The bulk strings of a RESP reply, in order (a nil or missing one is left out).
fn redis_strings(reply: &str) -> Vec<&str> {
    reply
        .split("\r\n")
        .filter(|l| !l.is_empty() && !l.starts_with(['*', '$']))
        .collect()
}

/// `tenant`'s tokens-per-minute bucket in the Redis on `port`, as last stored: its level in
/// token-milliseconds per minute (a token is 60,000) and the time of that level in ms on
/// Redis's clock; (0, 0) when the bucket does not exist. Redis drains a bucket only when it is
/// next used, so the level is the one of the last take or settlement.
pub fn redis_token_bucket(port: u16, tenant: &str) -> (u64, u64) {
    let key = format!("infergate:ratelimit:tokens:{tenant}");
    let reply = redis_command(port, &["HMGET", &key, "l", "a"]);
    let fields: Vec<u64> = redis_strings(&reply)
        .iter()
        .filter_map(|v| v.parse().ok())
        .collect();
    match fields[..] {
        [level, at] => (level, at),
        _ => (0, 0),
    }
}

/// Redis's clock in whole milliseconds, as its rate-limit script reads it.
pub fn redis_time_ms(port: u16) -> u64 {
    let reply = redis_command(port, &["TIME"]);
    let parts: Vec<u64> = redis_strings(&reply)
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    parts[0] * 1000 + parts[1] / 1000
}

/// A process started by `spawn` on `N` fresh free loopback ports, once `ready` holds for them:
/// the process and its ports.
///
/// A port is free when chosen but taken only when the process binds it; on a busy machine
/// another process (or an outgoing connection) can take it in between, and the process then
/// exits at once, the address being in use. That is the test machine's race, not the program's
/// fault, so a process that exits before it is ready is started again on fresh ports, three
/// times at most. Each start waits up to 30 s.
pub fn start_on_free_ports<const N: usize>(
    what: &str,
    mut spawn: impl FnMut([u16; N]) -> Child,
    mut ready: impl FnMut([u16; N]) -> bool,
) -> (Running, [u16; N]) {
    let mut exits = Vec::new();
    while exits.len() < 3 {
        let ports = std::array::from_fn(|_| free_port());
        let mut child = Running(spawn(ports));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if ready(ports) {
                return (child, ports);
            }
            if let Some(status) = child.0.try_wait().unwrap() {
                exits.push(status);
                break;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("{what}: the process exited before it was ready, on three sets of ports: {exits:?}");
}

/// `infergate serve --config file` on two free loopback ports, its stdout and stderr discarded
/// unless `customize` (which may also add arguments or environment) redirects them; started
/// again on fresh ports if it exits first ([`start_on_free_ports`]). Returns once `/readyz`
/// answers 200: the process, the listener's port and the admin port.
pub fn serve_ready(
    file: &std::path::Path,
    mut customize: impl FnMut(&mut Command),
) -> (Running, u16, u16) {
    let spawn = |[port, admin]: [u16; 2]| {
        let mut command = infergate();
        command
            .args(["serve", "--config"])
            .arg(file)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        customize(&mut command);
        command.spawn().unwrap()
    };
    let ready =
        |[_, admin]: [u16; 2]| get(admin, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200"));
    let (gateway, [port, admin]) = start_on_free_ports("the gateway's /readyz", spawn, ready);
    (gateway, port, admin)
}

/// The sum of every sample on the admin port's `/metrics` whose line starts with `series` (a
/// name, or a name with some of its labels); 0 when none does.
pub fn metric(admin: u16, series: &str) -> f64 {
    let text = get(admin, "/metrics").unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with(series))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
