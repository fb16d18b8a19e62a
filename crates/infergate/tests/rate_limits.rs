//! Rate limits shared by two `infergate serve` processes through one real `redis-server`, in
//! front of a simulated replica (`instant` profile):
//! - hammered through both gateways at once, a tenant is admitted no more than its limit allows
//!   over the whole run, and the refusals are 429 with Retry-After and the dropped reason;
//! - tokens per minute are settled with the usage the model server reports, not the estimate;
//! - when Redis dies, a fail-open gateway admits and a fail-closed one answers 503, both say so
//!   in their logs and metrics, and both recover when Redis is back.
//!
//! Needs `redis-server` on the PATH (or its path in `REDIS_SERVER`); without it these tests
//! fail, naming what to install.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{
    instant_replica, redis_server_on_free_port, wait_for, Answer, RedisServer, Running, TempDir,
};

fn sim() -> (Running, u16) {
    instant_replica("llama")
}

/// A gateway and where it listens; its log goes to `log`.
struct Gateway {
    _child: Running,
    port: u16,
    admin: u16,
    log: PathBuf,
}

fn gateway(dir: &Path, name: &str, replica: u16, limits: &str) -> Gateway {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &file,
        common::one_pool_config("llama", replica, &format!("  rateLimits:\n{limits}"), ""),
    )
    .unwrap();
    let log = dir.join(format!("{name}.log"));
    let (child, port, admin) = common::serve_ready(&file, |c| {
        c.stderr(std::fs::File::create(&log).unwrap());
    });
    Gateway {
        _child: child,
        port,
        admin,
        log,
    }
}

impl Gateway {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn metric(&self, series: &str) -> f64 {
        common::metric(self.admin, series)
    }

    /// Waits until the gateway counts on Redis: its start-up probe of the store has finished,
    /// either way, and a request of `tenant` was admitted on Redis's word. On a loaded machine
    /// the first calls (connect, load the script) can miss the store timeout and fail open;
    /// that must not be mistaken for what a test counts afterwards.
    fn wait_counting_on_redis(&self, tenant: &str) {
        wait_for("the gateway's start-up probe of Redis", || {
            let log = self.log();
            log.contains("Redis answers") || log.contains("rate-limit store failed")
        });
        let admitted = format!(
            r#"infergate_rate_limit_decisions_total{{tenant="{tenant}",outcome="admitted"}}"#
        );
        wait_for("the gateway to count on Redis", || {
            assert_eq!(chat(self.port, tenant).status, 200, "{}", self.log());
            self.metric(&admitted) >= 1.0
        });
    }
}

/// Prompt plus completion tokens from the `usage` of `answer`.
fn tokens_used(answer: &Answer) -> u64 {
    let v: serde_json::Value = serde_json::from_str(&answer.body).unwrap();
    v["usage"]["prompt_tokens"].as_u64().unwrap()
        + v["usage"]["completion_tokens"].as_u64().unwrap()
}

/// The chat messages every request sends, and the gateway's estimate of its prompt: a quarter
/// of the bytes of the `messages` JSON, rounded up.
const MESSAGES: &str = r#"[{"role":"user","content":"hello there my friend"}]"#;
const MAX_TOKENS: u64 = 5;

fn chat(port: u16, tenant: &str) -> Answer {
    let body = format!(r#"{{"model":"llama","max_tokens":{MAX_TOKENS},"messages":{MESSAGES}}}"#);
    common::post(
        port,
        "/v1/chat/completions",
        &[("x-gateway-inference-fairness-id", tenant)],
        &body,
        Duration::from_secs(10),
    )
}

/// Requests per second of tenant `rps`.
const RPS: u64 = 5;
/// Tokens per minute of tenant `tpm`.
const TPM: u64 = 200;

#[test]
fn two_gateways_on_one_redis_never_exceed_the_tenants_limits() {
    let (_redis, redis_port) = redis_server_on_free_port();
    let (_sim, replica) = sim();
    let dir = TempDir::new("rate-limits");
    // A generous store timeout: a loaded CI machine must not turn a slow answer into a
    // fail-open admission, which would break the count below for the wrong reason.
    let limits = format!(
        "    store: redis://127.0.0.1:{redis_port}
    storeTimeout: 2s
    tenants:
      - {{tenant: rps, requestsPerSecond: {RPS}}}
      - {{tenant: tpm, tokensPerMinute: {TPM}}}
      - {{tenant: warm-up, requestsPerSecond: 1000}}
"
    );
    let gateways = Arc::new([
        gateway(dir.path(), "a", replica, &limits),
        gateway(dir.path(), "b", replica, &limits),
    ]);
    for g in gateways.iter() {
        g.wait_counting_on_redis("warm-up");
    }
    let store_errors_before: Vec<f64> = gateways
        .iter()
        .map(|g| g.metric("infergate_rate_limit_store_errors_total"))
        .collect();

    // Requests per second: two clients on each gateway, sending again as soon as they are
    // admitted and 5 ms after a refusal (far faster than 5 a second, without flooding a small
    // CI machine).
    let run = Duration::from_secs(3);
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let gateways = Arc::clone(&gateways);
            thread::spawn(move || {
                let port = gateways[i % 2].port;
                let start = Instant::now();
                let mut answers = Vec::new();
                while start.elapsed() < run {
                    let a = chat(port, "rps");
                    if a.status == 429 {
                        thread::sleep(Duration::from_millis(5));
                    }
                    answers.push((i % 2, a));
                }
                answers
            })
        })
        .collect();
    let answers: Vec<(usize, Answer)> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    let admitted: Vec<&Answer> = answers
        .iter()
        .map(|(_, a)| a)
        .filter(|a| a.status == 200)
        .collect();
    for (_, a) in &answers {
        match a.status {
            200 => {}
            429 => {
                assert_eq!(
                    a.header("x-llm-d-request-dropped-reason"),
                    Some("rejected-rate-limited")
                );
                let secs: u64 = a.header("retry-after").unwrap().parse().unwrap();
                assert_eq!(secs, 1, "a 5/s bucket refills a request within a second");
            }
            other => panic!("status {other}: {}", a.body),
        }
    }
    // Every decision was Redis's: none failed open.
    for (g, before) in gateways.iter().zip(&store_errors_before) {
        assert_eq!(
            g.metric("infergate_rate_limit_store_errors_total"),
            *before,
            "{}",
            g.log()
        );
    }
    let (bound, window_ms) = common::admitted_bound(&admitted, RPS);
    let n = admitted.len() as u64;
    eprintln!(
        "requests/s: {n} admitted of {} over {window_ms} ms by two gateways; the limit allows {bound}",
        answers.len()
    );
    assert!(
        n <= bound,
        "{n} admitted over {window_ms} ms by two gateways; the limit allows {bound}"
    );
    // Both gateways took part, and the limiter is not refusing everything: hammered for the
    // whole run, the tenant gets at least half of what it may.
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
            "gateway {g}: {mine} admitted, {refused} refused"
        );
    }
    assert!(
        n * 2 >= bound,
        "only {n} admitted; the limit allows {bound}"
    );
    let counted: f64 = gateways
        .iter()
        .map(|g| {
            g.metric(r#"infergate_rate_limit_decisions_total{tenant="rps",outcome="admitted"}"#)
        })
        .sum();
    assert_eq!(counted as u64, n);

    // Tokens per minute, settled with real usage: requests alternate between the gateways,
    // one at a time, each settled before the next is sent.
    let prompt_estimate = (MESSAGES.len() as u64).div_ceil(4);
    let estimate = prompt_estimate + MAX_TOKENS;
    let t0 = common::redis::time_ms(redis_port);
    let start = Instant::now();
    let mut used = Vec::new();
    let refusal = loop {
        assert!(used.len() < 40, "never refused");
        let a = chat(gateways[used.len() % 2].port, "tpm");
        if a.status != 200 {
            break a;
        }
        used.push(tokens_used(&a));
        // The settlement runs in the background once the answer's body has passed; wait until
        // it has landed. Settled, the bucket holds the usage so far less what drained since
        // the first request, at most TPM token-ms a ms since `t0`; still holding this request's
        // estimate, it falls short of that by the usage's excess over the estimate (asserted
        // below; 22 tokens with this replica) less what drained between `t0` and the first
        // request (a token in 300 ms).
        let so_far: u64 = used.iter().sum();
        wait_for("the usage to be settled in Redis", || {
            let (level, at) = common::redis_token_bucket(redis_port, "tpm");
            level + at.saturating_sub(t0) * TPM >= so_far * 60_000
        });
    };
    let elapsed_ms = start.elapsed().as_millis() as u64 + 1;
    // What Redis drained meanwhile, in tokens (rounded up): it only ever makes room.
    let drained = (elapsed_ms * TPM).div_ceil(60_000);
    let spent: u64 = used.iter().sum();
    eprintln!(
        "tokens/min: {} admitted using {used:?} tokens (estimate {estimate} each) before a 429",
        used.len()
    );
    assert_eq!(refusal.status, 429, "{}", refusal.body);
    assert_eq!(
        refusal.header("x-llm-d-request-dropped-reason"),
        Some("rejected-rate-limited")
    );
    // The real usage is above the estimate (the replica counts its chat template), so a
    // gateway that kept estimates would admit more than the settled usage allows.
    assert!(
        used.iter().all(|&u| u > estimate),
        "usage {used:?}, estimate {estimate}"
    );
    // Each admitted request fitted on the usage settled before it; the refused one did not.
    let mut before = 0;
    for &u in &used {
        assert!(
            before + estimate <= TPM + drained,
            "admitted over the limit: {used:?}"
        );
        before += u;
    }
    assert!(spent + estimate > TPM, "refused within the limit: {used:?}");
    // Redis holds the settled usage, less what drained.
    let (level, _) = common::redis_token_bucket(redis_port, "tpm");
    assert!(
        level <= spent * 60_000 && level + elapsed_ms * TPM >= spent * 60_000,
        "level {level} units for {spent} tokens spent over {elapsed_ms} ms"
    );
    // Retry-After: the excess over the limit drains at TPM a minute.
    let secs: u64 = refusal.header("retry-after").unwrap().parse().unwrap();
    let longest = ((spent + estimate - TPM) * 60).div_ceil(TPM);
    assert!(
        (1..=longest).contains(&secs),
        "Retry-After {secs}, at most {longest}"
    );
}

#[test]
fn when_redis_dies_fail_open_admits_and_fail_closed_refuses_and_both_recover() {
    let (redis_proc, redis_port) = redis_server_on_free_port();
    let (_sim, replica) = sim();
    let dir = TempDir::new("rate-limits-down");
    let limits = |on_error: &str| {
        format!(
            "    store: redis://127.0.0.1:{redis_port}
    storeTimeout: 2s
    onStoreError: {on_error}
    default: {{requestsPerSecond: 1000}}
"
        )
    };
    let open = gateway(dir.path(), "open", replica, &limits("failOpen"));
    let closed = gateway(dir.path(), "closed", replica, &limits("failClosed"));
    let decisions = |g: &Gateway, outcome: &str| {
        g.metric(&format!(
            r#"infergate_rate_limit_decisions_total{{tenant="*",outcome="{outcome}"}}"#
        ))
    };
    // Both count on Redis before it dies. On a loaded machine a gateway's first call (connect
    // and load the script) can miss the store timeout and fail open; that is the behaviour
    // under test below, so it must not be mistaken for one of the five failures counted there.
    for g in [&open, &closed] {
        wait_for("the gateway to count on Redis", || {
            assert_eq!(chat(g.port, "t").status, 200, "{}", g.log());
            decisions(g, "admitted") >= 1.0
        });
    }
    let failed_open_before = decisions(&open, "failed_open");
    let failed_closed_before = decisions(&closed, "failed_closed");

    drop(redis_proc);
    for _ in 0..5 {
        assert_eq!(chat(open.port, "t").status, 200);
        let refused = chat(closed.port, "t");
        assert_eq!(refused.status, 503, "{}", refused.body);
        assert_eq!(refused.header("retry-after"), Some("1"));
        assert_eq!(
            refused.header("x-llm-d-request-dropped-reason"),
            Some("rejected-rate-limit-unavailable")
        );
    }
    assert_eq!(
        decisions(&open, "failed_open") - failed_open_before,
        5.0,
        "{}",
        open.log()
    );
    assert_eq!(
        decisions(&closed, "failed_closed") - failed_closed_before,
        5.0,
        "{}",
        closed.log()
    );
    for g in [&open, &closed] {
        assert!(g.metric("infergate_rate_limit_store_errors_total") >= 5.0);
    }
    assert!(
        open.log().contains("admitting requests without limits"),
        "{}",
        open.log()
    );
    assert!(
        closed.log().contains("refusing limited requests with 503"),
        "{}",
        closed.log()
    );

    // Redis comes back on the same port: both gateways reconnect and count again.
    let _redis = RedisServer::taking(redis_port);
    wait_for("both gateways to count again", || {
        // Within half a second of a failure a gateway does not ask Redis again.
        assert_eq!(chat(open.port, "t").status, 200);
        chat(closed.port, "t").status == 200 && open.log().contains("answers again")
    });
    assert!(closed.log().contains("answers again"), "{}", closed.log());
    assert!(decisions(&open, "admitted") >= 2.0 && decisions(&closed, "admitted") >= 2.0);
}
