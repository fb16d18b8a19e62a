//! What every end-to-end test of the binary needs: the binary, and its replicas and gateway
//! started on free ports; the rest (ports, children, raw HTTP, waiting, Redis, JWTs) comes from
//! the test-support crate.

#![allow(dead_code, clippy::unwrap_used)]

use std::process::Command;
use std::time::{Duration, Instant};

#[allow(unused_imports)] // not every test binary signs tokens
pub use infergate_test_support::jwt;
#[allow(unused_imports)] // nor uses each of these
pub use infergate_test_support::{
    dir::TempDir,
    http::{get, http, http_with, split_response},
    ports::free_port,
    process::{start_on_free_ports, terminate, Running},
    redis::{self, RedisServer},
    wait::wait_for,
};

/// The `infergate` binary under test.
pub fn infergate() -> Command {
    Command::new(env!("CARGO_BIN_EXE_infergate"))
}

/// Runs `cmd` to its end and returns what it printed; panics with its output and errors if it
/// failed.
pub fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// A gateway config of one pool, `llama`, for `model` on the replica at loopback `replica`:
/// `spec_extra` is YAML added under `spec:` before the schedulers (indented 2),
/// `scheduler_extra` YAML added to the pool's scheduler (indented 6).
pub fn one_pool_config(
    model: &str,
    replica: u16,
    spec_extra: &str,
    scheduler_extra: &str,
) -> String {
    format!(
        "apiVersion: infergate.dev/v1alpha1
kind: InferenceGatewayConfig
spec:
  bbr: {{enabled: true}}
{spec_extra}  schedulers:
    - name: llama
      modelName: {model}
      modelSelector: {{matchLabels: {{app: llama}}}}
{scheduler_extra}  endpoints:
    - address: 127.0.0.1:{replica}
      labels: {{app: llama}}
"
    )
}

/// An `infergate sim` replica of the `instant` profile serving `model` on a free port, its
/// output discarded; started again on a fresh port if it exits first ([`start_on_free_ports`]).
/// Returns once `/health` answers 200: the process and its port.
pub fn instant_replica(model: &str) -> (Running, u16) {
    instant_replica_with(model, &[])
}

/// [`instant_replica`] with more `infergate sim` flags (LoRA slots and adapters, say).
pub fn instant_replica_with(model: &str, flags: &[&str]) -> (Running, u16) {
    let mut args = vec!["--model", "instant", "--served-model-name", model];
    args.extend_from_slice(flags);
    sim_replica(&args)
}

/// An `infergate sim` replica with `args` (everything but `--port`) on a free port, its output
/// discarded; started again on a fresh port if it exits first ([`start_on_free_ports`]).
/// Returns once `/health` answers 200: the process and its port.
pub fn sim_replica(args: &[&str]) -> (Running, u16) {
    let spawn = |[port]: [u16; 1]| {
        infergate()
            .arg("sim")
            .args(args)
            .args(["--port", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let healthy =
        |[port]: [u16; 1]| get(port, "/health").is_some_and(|r| r.starts_with("HTTP/1.1 200"));
    let (sim, [port]) = start_on_free_ports("an infergate sim replica", spawn, healthy);
    (sim, port)
}

/// A real `redis-server` on a free loopback port of its own (see [`RedisServer::on_free_port`]),
/// and that port.
pub fn redis_server_on_free_port() -> (RedisServer, u16) {
    let server = RedisServer::on_free_port();
    let port = server.port();
    (server, port)
}

/// `infergate sim --fleet` over the fleet file `fleet(ports)` (written to `file`) on `N` free
/// ports, its output discarded; started again on fresh ports if it exits first
/// ([`start_on_free_ports`]). Returns once every replica's `/health` answers 200: the process and
/// the ports.
pub fn sim_fleet<const N: usize>(
    file: &std::path::Path,
    mut fleet: impl FnMut([u16; N]) -> String,
) -> (Running, [u16; N]) {
    let spawn = |ports: [u16; N]| {
        std::fs::write(file, fleet(ports)).unwrap();
        infergate()
            .args(["sim", "--fleet"])
            .arg(file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let healthy = |ports: [u16; N]| {
        ports
            .iter()
            .all(|&p| get(p, "/health").is_some_and(|r| r.starts_with("HTTP/1.1 200")))
    };
    start_on_free_ports("every replica of the fleet", spawn, healthy)
}

/// A raw HTTP/1.1 answer taken apart, and when its request was sent and answered.
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The headers, names lower-cased, values trimmed, in order.
    pub headers: Vec<(String, String)>,
    /// The body as sent (still chunked if it was).
    pub body: String,
    /// When the request was about to be sent.
    pub sent: Instant,
    /// When the whole answer had been read.
    pub answered: Instant,
}

impl Answer {
    /// The first header named `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// From sent to answered.
    pub fn took(&self) -> Duration {
        self.answered - self.sent
    }
}

/// The most requests a bucket of `rps` requests per second may have admitted among
/// `admitted` (answers it let through), and the window that bound is over, in ms.
///
/// The store admitted each request between its sending and its answer, so on the store's
/// clock the admissions span at most from the first one's sending to the last one's answer.
/// Over that window the bucket admits at most one second's burst plus the refill. The window is
/// measured here on the monotonic clock; Redis's is the wall clock in whole milliseconds, so it
/// may read 1 ms more, and NTP may slew it by up to 500 ppm. No other tolerance.
pub fn admitted_bound(admitted: &[&Answer], rps: u64) -> (u64, u64) {
    let first = admitted.iter().map(|a| a.sent).min().unwrap();
    let last = admitted.iter().map(|a| a.answered).max().unwrap();
    let measured_ms = (last - first).as_millis() as u64;
    let window_ms = measured_ms + 1 + measured_ms.div_ceil(2_000);
    (rps + rps * window_ms / 1000, window_ms)
}

/// `POST path` of the JSON `body` with extra `headers` to loopback `port`, given `timeout`;
/// panics if no answer comes.
pub fn post(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    timeout: Duration,
) -> Answer {
    let sent = Instant::now();
    let raw = http_with(
        &format!("127.0.0.1:{port}"),
        "POST",
        path,
        headers,
        body,
        timeout,
    )
    .expect("the gateway answers");
    let answered = Instant::now();
    let (status, headers, body) = split_response(&raw);
    Answer {
        status,
        headers,
        body: body.to_owned(),
        sent,
        answered,
    }
}

/// `tenant`'s tokens-per-minute bucket in the Redis on `port`, as last stored: its level in
/// token-milliseconds per minute (a token is 60,000) and the time of that level in ms on
/// Redis's clock; (0, 0) when the bucket does not exist. Redis drains a bucket only when it is
/// next used, so the level is the one of the last take or settlement.
pub fn redis_token_bucket(port: u16, tenant: &str) -> (u64, u64) {
    let key = format!("infergate:ratelimit:tokens:{tenant}");
    let reply = redis::command(port, &["HMGET", &key, "l", "a"]);
    let fields: Vec<u64> = redis::strings(&reply)
        .iter()
        .filter_map(|v| v.parse().ok())
        .collect();
    match fields[..] {
        [level, at] => (level, at),
        _ => (0, 0),
    }
}

/// `infergate ARGS --listen … --admin-listen …` on two free loopback ports, output discarded
/// unless `customize` (which may also add arguments or environment) redirects it; started again
/// on fresh ports if it exits first ([`start_on_free_ports`]). Returns once `/readyz` answers
/// 200: the process, the listener's port and the admin port.
fn ready_on_free_ports(
    what: &str,
    args: &[&str],
    mut customize: impl FnMut(&mut Command),
) -> (Running, u16, u16) {
    let spawn = |[port, admin]: [u16; 2]| {
        let mut command = infergate();
        command
            .args(args)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        customize(&mut command);
        command.spawn().unwrap()
    };
    let ready =
        |[_, admin]: [u16; 2]| get(admin, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200"));
    let (process, [port, admin]) = start_on_free_ports(what, spawn, ready);
    (process, port, admin)
}

/// `infergate serve --config file` ([`ready_on_free_ports`]), `customize`d.
pub fn serve_ready(
    file: &std::path::Path,
    customize: impl FnMut(&mut Command),
) -> (Running, u16, u16) {
    let file = file.to_str().unwrap();
    ready_on_free_ports(
        "the gateway's /readyz",
        &["serve", "--config", file],
        customize,
    )
}

/// A `GlobalGatewayConfig` named `test`, the tier in region `east` and `west` 70 ms away, with
/// `members` as (name, data `host:port`, admin `host:port`, region) over plain HTTP, and
/// `extra` YAML added under `spec:` (indented 2).
pub fn global_config(members: &[(&str, String, String, &str)], extra: &str) -> String {
    let mut yaml = String::from(
        "apiVersion: infergate.dev/v1alpha1\nkind: GlobalGatewayConfig\nmetadata: {name: test}\nspec:\n  region: east\n  regionLatencies: [{from: east, to: west, latency: 70ms}]\n  members:\n",
    );
    for (name, data, admin, region) in members {
        yaml.push_str(&format!(
            "    - {{name: {name}, url: \"http://{data}\", adminUrl: \"http://{admin}\", region: {region}}}\n"
        ));
    }
    yaml.push_str(extra);
    yaml
}

/// `infergate global --config file` ([`ready_on_free_ports`]): ready once a member's status was
/// read.
pub fn global_ready(file: &std::path::Path) -> (Running, u16, u16) {
    let file = file.to_str().unwrap();
    ready_on_free_ports(
        "the global tier's /readyz",
        &["global", "--config", file],
        |_| {},
    )
}

/// Waits until the global tier on `admin` counts `n` members available.
pub fn wait_members_available(admin: u16, n: usize) {
    wait_for("the members available", || {
        get(admin, "/status/global")
            .is_some_and(|s| s.matches("\"state\":\"available\"").count() == n)
    });
}

/// `infergate demo` ([`ready_on_free_ports`]), its simulated fleet `time_scale` times faster
/// than real time; ready once every replica was scraped.
pub fn demo_ready(time_scale: u32) -> (Running, u16, u16) {
    let scale = time_scale.to_string();
    ready_on_free_ports(
        "the demo's /readyz",
        &["demo", "--time-scale", &scale],
        |_| {},
    )
}

/// The sum of every sample on the admin port's `/metrics` whose line starts with `series` (a
/// name, or a name with some of its labels); 0 when none does.
pub fn metric(admin: u16, series: &str) -> f64 {
    infergate_test_support::http::metric_sum(&get(admin, "/metrics").unwrap_or_default(), series)
}

/// An `infergate sim` replica of the `instant` profile serving `model` at `ip:port` (any
/// loopback address: pods of a Kubernetes test listen on 127.0.0.x), with more `flags`;
/// returns once `/health` answers 200.
pub fn replica_on(ip: &str, port: u16, model: &str, flags: &[&str]) -> Running {
    let child = infergate()
        .args([
            "sim",
            "--model",
            "instant",
            "--host",
            ip,
            "--port",
            &port.to_string(),
        ])
        .args(["--served-model-name", model])
        .args(flags)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let running = Running(child);
    wait_for(&format!("the replica at {ip}:{port}"), || {
        http(
            &format!("{ip}:{port}"),
            "GET",
            "/health",
            "",
            Duration::from_secs(2),
        )
        .is_some_and(|r| r.starts_with("HTTP/1.1 200"))
    });
    running
}

/// `infergate serve ARGS` against a Kubernetes API server (`kubeconfig`), as the replica
/// `identity` (its `POD_NAME`), on two free loopback ports, its output in `log`; started again
/// on fresh ports if it exits first. Returns once `/readyz` answers 200: the process, the
/// listener's port and the admin port.
pub fn serve_in_cluster(
    args: &[&str],
    kubeconfig: &std::path::Path,
    identity: &str,
    log: &std::path::Path,
) -> (Running, u16, u16) {
    let spawn = |[port, admin]: [u16; 2]| {
        let file = std::fs::File::create(log).unwrap();
        infergate()
            .arg("serve")
            .args(args)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", identity)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap()
    };
    let ready =
        |[_, admin]: [u16; 2]| get(admin, "/readyz").is_some_and(|r| r.starts_with("HTTP/1.1 200"));
    let (gateway, [port, admin]) = start_on_free_ports("the gateway's /readyz", spawn, ready);
    (gateway, port, admin)
}

/// The chat request the global tier's load tests send: model `llama`, three tokens.
pub const GLOBAL_CHAT: &str =
    r#"{"model": "llama", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}"#;

/// One request of a steady load on the global tier: when it was sent, how long it took, who
/// answered, with what.
#[derive(Debug, Clone)]
pub struct Sent {
    pub at: Instant,
    pub took: Duration,
    pub status: u16,
    pub member: Option<String>,
}

/// Two clients sending [`GLOBAL_CHAT`] to the global tier one request after another (20 ms
/// apart) until stopped.
pub struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    log: std::sync::Arc<std::sync::Mutex<Vec<Sent>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    pub fn start(port: u16) -> Load {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        let stop = Arc::new(AtomicBool::new(false));
        let log: Arc<Mutex<Vec<Sent>>> = Arc::default();
        let threads = (0..2)
            .map(|_| {
                let (stop, log) = (Arc::clone(&stop), Arc::clone(&log));
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let a = post(
                            port,
                            "/v1/chat/completions",
                            &[],
                            GLOBAL_CHAT,
                            Duration::from_secs(30),
                        );
                        log.lock().unwrap().push(Sent {
                            at: a.sent,
                            took: a.took(),
                            status: a.status,
                            member: a.header("x-infergate-member").map(str::to_owned),
                        });
                        std::thread::sleep(Duration::from_millis(20));
                    }
                })
            })
            .collect();
        Load { stop, log, threads }
    }

    /// The requests answered so far.
    pub fn sent(&self) -> Vec<Sent> {
        self.log.lock().unwrap().clone()
    }

    /// Stops the clients; every request they sent.
    pub fn finish(self) -> Vec<Sent> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        let log = self.log.lock().unwrap().clone();
        log
    }
}

/// Watches the attempts the global tier on `admin` sends `members` for `watch`: how long after
/// `fault` the last one was sent (to 50 ms).
pub fn last_attempt_after(
    admin: u16,
    members: &[&str],
    fault: Instant,
    watch: Duration,
) -> Duration {
    let count = || -> f64 {
        members
            .iter()
            .map(|m| {
                metric(
                    admin,
                    &format!("infergate_global_member_requests_total{{member=\"{m}\"}}"),
                )
            })
            .sum()
    };
    let mut last = count();
    let mut changed = fault;
    while fault.elapsed() < watch {
        std::thread::sleep(Duration::from_millis(50));
        let now = count();
        if now != last {
            last = now;
            changed = Instant::now();
        }
    }
    changed - fault
}
