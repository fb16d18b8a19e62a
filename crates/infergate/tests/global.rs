//! `infergate global` over real member gateways on loopback: each member an `infergate serve`
//! in front of a simulated replica, the tier pulling their `/status/member`. Routing by model
//! and region, the member status as the tier reports it, and a member killed under steady load:
//! how soon no new request reaches it, and that no request that had not started fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    get, global_ready, instant_replica, last_attempt_after, metric, post, serve_ready, Load,
    Running, Sent, TempDir,
};

/// A member: its replica, its gateway, the gateway's data and admin ports.
struct Member {
    _replica: Running,
    gateway: Running,
    port: u16,
    admin: u16,
}

fn member(dir: &TempDir, name: &str, model: &str) -> Member {
    member_with(dir, name, model, "")
}

/// A member whose pool's scheduler has `scheduler_extra` (YAML indented 6).
fn member_with(dir: &TempDir, name: &str, model: &str, scheduler_extra: &str) -> Member {
    let (replica, replica_port) = instant_replica(model);
    let file = dir.path().join(format!("{name}.yaml"));
    std::fs::write(
        &file,
        common::one_pool_config(model, replica_port, "", scheduler_extra),
    )
    .unwrap();
    let (gateway, port, admin) = serve_ready(&file, |_| {});
    Member {
        _replica: replica,
        gateway,
        port,
        admin,
    }
}

fn global_config(members: &[(&str, &Member, &str)], extra: &str) -> String {
    let members: Vec<(&str, String, String, &str)> = members
        .iter()
        .map(|(name, m, region)| {
            (
                *name,
                format!("127.0.0.1:{}", m.port),
                format!("127.0.0.1:{}", m.admin),
                *region,
            )
        })
        .collect();
    common::global_config(&members, extra)
}

fn chat(model: &str) -> String {
    format!(
        r#"{{"model": "{model}", "max_tokens": 3, "messages": [{{"role": "user", "content": "hi"}}]}}"#
    )
}

#[test]
fn the_tier_routes_by_model_and_region_and_reports_its_members() {
    let dir = TempDir::new("global-routing");
    let east = member(&dir, "east", "llama");
    let west = member(&dir, "west", "llama");
    let other = member(&dir, "other", "qwen");
    let file = dir.path().join("global.yaml");
    std::fs::write(
        &file,
        global_config(
            &[
                ("east-a", &east, "east"),
                ("west-a", &west, "west"),
                ("west-q", &other, "west"),
            ],
            "",
        ),
    )
    .unwrap();
    let check = common::infergate()
        .args(["check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{printed}");
    assert!(printed.contains("GlobalGatewayConfig test"), "{printed}");
    assert!(printed.contains("east <-> west: 70ms"), "{printed}");

    let (_tier, port, admin) = global_ready(&file);
    // Every member is read within a pull or two.
    common::wait_for("every member available", || {
        get(admin, "/status/global")
            .is_some_and(|s| s.matches("\"state\":\"available\"").count() == 3)
    });
    let a = post(
        port,
        "/v1/chat/completions",
        &[],
        &chat("llama"),
        Duration::from_secs(10),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        a.header("x-infergate-member"),
        Some("east-a"),
        "nearest of equals"
    );
    let a = post(
        port,
        "/v1/chat/completions",
        &[("x-infergate-region", "west")],
        &chat("llama"),
        Duration::from_secs(10),
    );
    assert_eq!(
        a.header("x-infergate-member"),
        Some("west-a"),
        "the caller's region"
    );
    let q = post(
        port,
        "/v1/chat/completions",
        &[],
        &chat("qwen"),
        Duration::from_secs(10),
    );
    assert_eq!(
        q.header("x-infergate-member"),
        Some("west-q"),
        "only it serves qwen"
    );
    let none = post(
        port,
        "/v1/chat/completions",
        &[],
        &chat("nope"),
        Duration::from_secs(10),
    );
    assert_eq!(none.status, 404, "{}", none.body);
    assert!(
        none.body.contains("no member gateway serves model `nope`"),
        "{}",
        none.body
    );
    let models = get(port, "/v1/models").unwrap();
    assert!(
        models.contains("\"llama\"") && models.contains("\"qwen\""),
        "{models}"
    );

    let status = get(admin, "/status/global").unwrap();
    assert!(status.contains("\"readyEndpoints\":1"), "{status}");
    assert!(status.contains("\"drift\":[]"), "{status}");
    let pulled = common::infergate()
        .args(["check", "--pull-members", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&pulled.stdout);
    assert!(pulled.status.success(), "{printed}");
    assert!(printed.contains("no drift"), "{printed}");
    assert_eq!(printed.matches("  read: sequence").count(), 3, "{printed}");
    assert!(metric(admin, "infergate_global_member_up{member=\"east-a\"}") == 1.0);
    assert!(
        metric(
            admin,
            "infergate_global_member_requests_total{member=\"east-a\"}"
        ) >= 1.0
    );
    assert!(metric(admin, "infergate_global_requests_total{code=\"404\"}") == 1.0);
    drop((east, west, other));
}

#[test]
fn a_member_killed_under_load_loses_its_traffic_within_five_seconds_and_nothing_fails() {
    let dir = TempDir::new("global-failover");
    let mut east = member(&dir, "east", "llama");
    let west = member(&dir, "west", "llama");
    let file = dir.path().join("global.yaml");
    std::fs::write(
        &file,
        global_config(&[("east-a", &east, "east"), ("west-a", &west, "west")], ""),
    )
    .unwrap();
    let (_tier, port, admin) = global_ready(&file);
    common::wait_members_available(admin, 2);

    // Two clients, each sending one request after another (two in flight at most: the near
    // member keeps the load, its queue term never falling by more than proximity is worth).
    let load = Load::start(port);
    // A member's traffic grows by at most a quarter per status interval while it has headroom
    // (docs/global.md, "Headroom"): from the start the load is spread by load, the nearest
    // member's share growing each second until, by the sixth, it takes it all.
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(8));
    let steady: Vec<Sent> = load
        .sent()
        .into_iter()
        .filter(|s| s.at >= started + Duration::from_secs(6))
        .collect();
    assert!(
        steady.len() > 20,
        "the load runs: {} requests in 2 s",
        steady.len()
    );
    assert!(
        steady.iter().all(|s| s.member.as_deref() == Some("east-a")),
        "the nearest member takes the load while it is healthy: {steady:?}"
    );

    // Kill east's gateway outright, then watch the attempts the tier sends it.
    east.gateway.0.kill().unwrap();
    let killed = Instant::now();
    let moved_after = last_attempt_after(admin, &["east-a"], killed, Duration::from_secs(8));
    let log = load.finish();
    let after: Vec<&Sent> = log.iter().filter(|s| s.at >= killed).collect();
    let failed: Vec<&&Sent> = after.iter().filter(|s| s.status != 200).collect();
    eprintln!(
        "failover: last attempt at the killed member {:.2} s after the kill; {} requests after \
         it, {} failed; {} failovers, {} ejections",
        moved_after.as_secs_f64(),
        after.len(),
        failed.len(),
        metric(
            admin,
            "infergate_global_member_failovers_total{member=\"east-a\"}"
        ),
        metric(
            admin,
            "infergate_global_member_ejections_total{member=\"east-a\"}"
        ),
    );
    assert!(
        moved_after <= Duration::from_secs(5),
        "attempts reached the dead member {moved_after:?} after the kill"
    );
    assert!(
        failed.is_empty(),
        "requests failed after the kill: {failed:?}"
    );
    assert!(after.len() > 50, "the load went on: {}", after.len());
    assert!(
        after
            .iter()
            .rev()
            .take(10)
            .all(|s| s.member.as_deref() == Some("west-a")),
        "the survivor serves"
    );
    let status = get(admin, "/status/global").unwrap();
    assert!(
        status.contains("\"state\":\"stale\"") || status.contains("\"state\":\"ejected\""),
        "{status}"
    );
}

/// Requests per second of tenant `rps` at the global tier.
const RPS: u64 = 5;

#[test]
fn two_tier_replicas_on_one_redis_hold_a_tenants_limit_together() {
    let (_redis, redis_port) = common::redis_server_on_free_port();
    let dir = TempDir::new("global-limits");
    let east = member(&dir, "east", "llama");
    let limits = format!(
        "  rateLimits:\n    store: redis://127.0.0.1:{redis_port}\n    storeTimeout: 2s\n    tenants:\n      - {{tenant: rps, requestsPerSecond: {RPS}}}\n      - {{tenant: warm-up, requestsPerSecond: 1000}}\n"
    );
    let file = dir.path().join("global.yaml");
    // One region here: no latencies to name.
    let yaml = global_config(&[("east-a", &east, "east")], &limits).replace(
        "  regionLatencies: [{from: east, to: west, latency: 70ms}]\n",
        "",
    );
    std::fs::write(&file, yaml).unwrap();
    let printed = String::from_utf8_lossy(
        &common::infergate()
            .args(["check", "--config"])
            .arg(&file)
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    assert!(
        printed.contains(&format!("store redis://127.0.0.1:{redis_port}")),
        "{printed}"
    );
    let tiers = [global_ready(&file), global_ready(&file)];
    let ports: Vec<u16> = tiers.iter().map(|(_, p, _)| *p).collect();
    let admins: Vec<u16> = tiers.iter().map(|(_, _, a)| *a).collect();
    let ask = |port: u16, tenant: &str| {
        post(
            port,
            "/v1/chat/completions",
            &[("x-gateway-inference-fairness-id", tenant)],
            &chat("llama"),
            Duration::from_secs(10),
        )
    };
    // Both replicas count on Redis before the run.
    for (&port, &admin) in ports.iter().zip(&admins) {
        common::wait_for("the tier to count on Redis", || {
            assert_eq!(ask(port, "warm-up").status, 200);
            metric(
                admin,
                "infergate_rate_limit_decisions_total{tenant=\"warm-up\",outcome=\"admitted\"}",
            ) >= 1.0
        });
    }
    let run = Duration::from_secs(3);
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let port = ports[i % 2];
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut answers = Vec::new();
                while start.elapsed() < run {
                    let a = post(
                        port,
                        "/v1/chat/completions",
                        &[("x-gateway-inference-fairness-id", "rps")],
                        &chat("llama"),
                        Duration::from_secs(10),
                    );
                    if a.status == 429 {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    answers.push((i % 2, a));
                }
                answers
            })
        })
        .collect();
    let answers: Vec<(usize, common::Answer)> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    for (_, a) in &answers {
        match a.status {
            200 => {}
            429 => {
                assert_eq!(
                    a.header("x-llm-d-request-dropped-reason"),
                    Some("rejected-rate-limited")
                );
                assert_eq!(a.header("retry-after"), Some("1"));
            }
            other => panic!("status {other}: {}", a.body),
        }
    }
    let admitted: Vec<&common::Answer> = answers
        .iter()
        .map(|(_, a)| a)
        .filter(|a| a.status == 200)
        .collect();
    let (bound, window_ms) = common::admitted_bound(&admitted, RPS);
    let n = admitted.len() as u64;
    eprintln!(
        "global limits: {n} admitted of {} over {window_ms} ms by two tier replicas; the limit \
         allows {bound}",
        answers.len()
    );
    assert!(n <= bound, "{n} admitted; the limit allows {bound}");
    assert!(
        n * 2 >= bound,
        "{n} admitted; the limiter refuses too much ({bound})"
    );
    for g in 0..2 {
        let mine = answers
            .iter()
            .filter(|(i, a)| *i == g && a.status == 200)
            .count();
        let refused = answers
            .iter()
            .filter(|(i, a)| *i == g && a.status == 429)
            .count();
        assert!(
            mine > 0 && refused > 0,
            "replica {g}: {mine} admitted, {refused} refused"
        );
    }
    for &admin in &admins {
        assert_eq!(
            metric(admin, "infergate_rate_limit_store_errors_total"),
            0.0
        );
    }
}

#[test]
fn members_that_define_a_model_differently_are_reported_as_drift() {
    let dir = TempDir::new("global-drift");
    let east = member(&dir, "east", "llama");
    let west = member_with(&dir, "west", "llama", "      weights: {queue: 3}\n");
    let file = dir.path().join("global.yaml");
    std::fs::write(
        &file,
        global_config(&[("east-a", &east, "east"), ("west-a", &west, "west")], ""),
    )
    .unwrap();
    let (_tier, _port, admin) = global_ready(&file);
    common::wait_for("both members read", || {
        get(admin, "/status/global")
            .is_some_and(|s| s.matches("\"state\":\"available\"").count() == 2)
    });
    let status = get(admin, "/status/global").unwrap();
    assert!(status.contains("model `llama` differs"), "{status}");
    assert!(status.contains("queue 3"), "{status}");
    assert_eq!(
        metric(admin, "infergate_global_model_drift{model=\"llama\"}"),
        1.0
    );
    let pulled = common::infergate()
        .args(["check", "--pull-members", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&pulled.stdout);
    assert!(!pulled.status.success(), "drift is an error: {printed}");
    assert!(
        printed.contains("drift: model `llama` differs"),
        "{printed}"
    );
    assert!(
        String::from_utf8_lossy(&pulled.stderr).contains("1 model(s) defined differently"),
        "{}",
        String::from_utf8_lossy(&pulled.stderr)
    );
}

#[test]
fn a_member_answering_429_is_left_alone_for_its_retry_after_and_the_others_take_the_load() {
    let dir = TempDir::new("global-429");
    // East refuses all but 2 requests a second (its own rate limit: 429 with Retry-After 1).
    let (replica, replica_port) = instant_replica("llama");
    let east_file = dir.path().join("east.yaml");
    std::fs::write(
        &east_file,
        common::one_pool_config(
            "llama",
            replica_port,
            "  rateLimits:\n    default: {requestsPerSecond: 2}\n",
            "",
        ),
    )
    .unwrap();
    let (east_gateway, east_port, east_admin) = serve_ready(&east_file, |_| {});
    let east = Member {
        _replica: replica,
        gateway: east_gateway,
        port: east_port,
        admin: east_admin,
    };
    let west = member(&dir, "west", "llama");
    let file = dir.path().join("global.yaml");
    std::fs::write(
        &file,
        global_config(&[("east-a", &east, "east"), ("west-a", &west, "west")], ""),
    )
    .unwrap();
    let (_tier, port, admin) = global_ready(&file);
    common::wait_members_available(admin, 2);
    // One client, one request after another, for 4 s, as one tenant.
    let start = Instant::now();
    let mut answers = Vec::new();
    while start.elapsed() < Duration::from_secs(4) {
        answers.push(post(
            port,
            "/v1/chat/completions",
            &[("x-gateway-inference-fairness-id", "t")],
            &chat("llama"),
            Duration::from_secs(10),
        ));
        std::thread::sleep(Duration::from_millis(10));
    }
    let by = |member: &str, status: u16| {
        answers
            .iter()
            .filter(|a| a.status == status && a.header("x-infergate-member") == Some(member))
            .count()
    };
    let (east_ok, east_429, west_ok) = (by("east-a", 200), by("east-a", 429), by("west-a", 200));
    eprintln!(
        "429 storm: {} requests; east answered {east_ok} and refused {east_429}, west answered \
         {west_ok}",
        answers.len()
    );
    assert_eq!(east_ok + east_429 + west_ok, answers.len(), "nothing else");
    // East refuses with Retry-After 1, and the tier passes that on rather than spraying the
    // request over every member; it then sends east nothing for that second: at most one
    // refusal per second of the run (plus the one in flight when a second ends).
    assert!(east_429 >= 1, "east's limit was reached");
    assert!(
        east_429 <= 6,
        "{east_429} refusals in 4 s: east was not left alone"
    );
    for a in answers.iter().filter(|a| a.status == 429) {
        assert_eq!(a.header("retry-after"), Some("1"));
    }
    assert!(
        west_ok * 2 > answers.len(),
        "the other member took most of the load: {west_ok} of {}",
        answers.len()
    );
    drop(east);
}

#[test]
fn when_redis_dies_a_fail_open_tier_admits_a_fail_closed_one_refuses_and_both_recover() {
    let (redis, redis_port) = common::redis_server_on_free_port();
    let dir = TempDir::new("global-redis-down");
    let east = member(&dir, "east", "llama");
    let tier = |on_error: &str| {
        let file = dir.path().join(format!("global-{on_error}.yaml"));
        let limits = format!(
            "  rateLimits:\n    store: redis://127.0.0.1:{redis_port}\n    storeTimeout: 2s\n    onStoreError: {on_error}\n    default: {{requestsPerSecond: 1000}}\n"
        );
        let yaml = global_config(&[("east-a", &east, "east")], &limits).replace(
            "  regionLatencies: [{from: east, to: west, latency: 70ms}]\n",
            "",
        );
        std::fs::write(&file, yaml).unwrap();
        global_ready(&file)
    };
    let (_open, open_port, open_admin) = tier("failOpen");
    let (_closed, closed_port, closed_admin) = tier("failClosed");
    let ask = |port: u16| {
        post(
            port,
            "/v1/chat/completions",
            &[("x-gateway-inference-fairness-id", "t")],
            &chat("llama"),
            Duration::from_secs(10),
        )
    };
    let decisions = |admin: u16, outcome: &str| {
        metric(
            admin,
            &format!("infergate_rate_limit_decisions_total{{tenant=\"*\",outcome=\"{outcome}\"}}"),
        )
    };
    for (port, admin) in [(open_port, open_admin), (closed_port, closed_admin)] {
        common::wait_for("the tier to count on Redis", || {
            assert_eq!(ask(port).status, 200);
            decisions(admin, "admitted") >= 1.0
        });
    }
    drop(redis);
    for _ in 0..5 {
        assert_eq!(ask(open_port).status, 200, "fail open admits");
        let refused = ask(closed_port);
        assert_eq!(refused.status, 503, "{}", refused.body);
        assert_eq!(
            refused.header("x-llm-d-request-dropped-reason"),
            Some("rejected-rate-limit-unavailable")
        );
    }
    assert!(decisions(open_admin, "failed_open") >= 5.0);
    assert!(decisions(closed_admin, "failed_closed") >= 5.0);
    // Redis back on the same port: both count again.
    let _redis = common::RedisServer::taking(redis_port);
    common::wait_for("both tiers to count again", || {
        assert_eq!(ask(open_port).status, 200);
        ask(closed_port).status == 200
    });
    assert!(decisions(closed_admin, "admitted") >= 2.0);
}

#[test]
fn a_member_behind_tls_is_reached_with_its_ca_and_refused_without_it() {
    let dir = TempDir::new("global-tls");
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    let (replica, replica_port) = instant_replica("llama");
    let member_file = dir.path().join("east.yaml");
    std::fs::write(
        &member_file,
        common::one_pool_config(
            "llama",
            replica_port,
            &format!(
                "  tls: {{certFile: {}, keyFile: {}}}\n",
                cert.display(),
                key.display()
            ),
            "",
        ),
    )
    .unwrap();
    let (gateway, member_port, member_admin) = serve_ready(&member_file, |_| {});
    let _member = (replica, gateway);
    let tier_config = |tls: &str| {
        format!(
            "apiVersion: infergate.dev/v1alpha1\nkind: GlobalGatewayConfig\nspec:\n  members:\n    - {{name: east-a, url: \"https://127.0.0.1:{member_port}\", adminUrl: \"http://127.0.0.1:{member_admin}\", region: east{tls}}}\n"
        )
    };
    // Trusting the member's certificate, checked for the name it carries.
    let trusted = dir.path().join("trusted.yaml");
    std::fs::write(
        &trusted,
        tier_config(&format!(
            ", tls: {{caFile: {}, serverName: localhost}}",
            cert.display()
        )),
    )
    .unwrap();
    let (_tier, port, _admin) = global_ready(&trusted);
    let a = post(
        port,
        "/v1/chat/completions",
        &[],
        &chat("llama"),
        Duration::from_secs(10),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.header("x-infergate-member"), Some("east-a"));
    // Without the CA (the platform's roots do not hold a self-signed certificate): refused.
    let untrusted = dir.path().join("untrusted.yaml");
    std::fs::write(&untrusted, tier_config("")).unwrap();
    let (_tier, port, _admin) = global_ready(&untrusted);
    let refused = post(
        port,
        "/v1/chat/completions",
        &[],
        &chat("llama"),
        Duration::from_secs(10),
    );
    assert_eq!(refused.status, 502, "{}", refused.body);
    assert!(refused.body.contains("members_failed"), "{}", refused.body);
}

/// A relay in front of a member's admin listener: it passes every request through until
/// frozen, then answers each with the last response it passed. To the tier this is the
/// member's control plane stopping while its listeners still answer — the status document
/// keeps coming, its sequence no longer moving — with the member itself untouched.
struct StatusRelay {
    port: u16,
    frozen: Arc<AtomicBool>,
}

impl StatusRelay {
    fn start(admin: u16) -> StatusRelay {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&frozen);
        std::thread::spawn(move || {
            use std::io::{BufRead, BufReader, Write};
            let mut last = String::new();
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let path = line.split(' ').nth(1).unwrap_or("/").to_owned();
                // The rest of the head: a pull has no body.
                loop {
                    let mut header = String::new();
                    match reader.read_line(&mut header) {
                        Ok(n) if n > 2 => {}
                        _ => break,
                    }
                }
                if !flag.load(Ordering::Relaxed) {
                    if let Some(raw) = get(admin, &path) {
                        last = raw;
                    }
                }
                let _ = stream.write_all(last.as_bytes());
            }
        });
        StatusRelay { port, frozen }
    }
}

#[test]
fn a_member_whose_status_freezes_while_it_serves_loses_its_traffic_and_nothing_fails() {
    let dir = TempDir::new("global-frozen");
    let east = member(&dir, "east", "llama");
    let west = member(&dir, "west", "llama");
    let relay = StatusRelay::start(east.admin);
    let file = dir.path().join("global.yaml");
    std::fs::write(
        &file,
        common::global_config(
            &[
                (
                    "east-a",
                    format!("127.0.0.1:{}", east.port),
                    format!("127.0.0.1:{}", relay.port),
                    "east",
                ),
                (
                    "west-a",
                    format!("127.0.0.1:{}", west.port),
                    format!("127.0.0.1:{}", west.admin),
                    "west",
                ),
            ],
            "",
        ),
    )
    .unwrap();
    let (_tier, port, admin) = global_ready(&file);
    common::wait_members_available(admin, 2);
    let load = Load::start(port);
    // The nearest member's share grows to all of it (docs/global.md, "Headroom").
    std::thread::sleep(Duration::from_secs(8));
    relay.frozen.store(true, Ordering::Relaxed);
    let frozen = Instant::now();
    let moved_after = last_attempt_after(admin, &["east-a"], frozen, Duration::from_secs(8));
    let status = get(admin, "/status/global").unwrap();
    let log = load.finish();
    let before: Vec<&Sent> = log
        .iter()
        .filter(|s| s.at < frozen && s.at + Duration::from_secs(2) >= frozen)
        .collect();
    let after: Vec<&Sent> = log.iter().filter(|s| s.at >= frozen).collect();
    let failed: Vec<&&Sent> = after.iter().filter(|s| s.status != 200).collect();
    eprintln!(
        "frozen status: last request to the frozen member {:.2} s after the freeze; {} requests \
         after it, {} failed",
        moved_after.as_secs_f64(),
        after.len(),
        failed.len()
    );
    assert!(
        before.iter().all(|s| s.member.as_deref() == Some("east-a")),
        "the nearest member had the load: {before:?}"
    );
    // Its first pull with the same sequence is a miss, and a member whose last pull missed is
    // tried after every other: the traffic moves within one pull interval (1 s, jittered by a
    // tenth); three such pulls make it stale.
    assert!(
        moved_after <= Duration::from_millis(1_500),
        "requests reached the frozen member {moved_after:?} after the freeze"
    );
    // It kept serving until then, so nothing failed.
    assert!(failed.is_empty(), "{failed:?}");
    assert!(status.contains("\"state\":\"stale\""), "{status}");
    assert!(
        after
            .iter()
            .rev()
            .take(10)
            .all(|s| s.member.as_deref() == Some("west-a")),
        "the other member serves"
    );
}
