//! The engine behaves like vLLM under pressure: preemption when KV runs out, adapters that wait
//! for a slot, gauges and counters that move the way vLLM's do, and determinism for a seed.

#![allow(clippy::unwrap_used)]

use infergate_engine::drive::{run, run_sending_until, Arrival};
use infergate_engine::{
    Engine, EngineConfig, Event, EventKind, FinishReason, NewRequest, Profile, RequestId,
};
use std::time::Duration;

fn request(len: u32, base: u32, output: u32, adapter: Option<&str>) -> NewRequest {
    let prompt: Vec<u32> = (0..len).map(|t| base + t).collect();
    NewRequest {
        adapter: adapter.map(str::to_owned),
        ..NewRequest::from_tokens(&prompt, output)
    }
}

fn config() -> EngineConfig {
    EngineConfig::new(Profile::lookup("llama-3.1-8b", "h100", 1).unwrap())
}

#[test]
fn preemption_happens_and_is_counted_when_kv_runs_out() {
    let mut c = config();
    // 64 blocks = 1,024 tokens of KV; eight requests that each grow to 256 tokens cannot all fit.
    c.num_gpu_blocks = 64;
    c.max_model_len = 1024;
    c.report_every_token = true;
    let mut e = Engine::new(c);
    let arrivals: Vec<Arrival> = (0..8)
        .map(|i| Arrival {
            at: Duration::ZERO,
            request: request(64, i * 1_000, 192, None),
        })
        .collect();
    let record = run(&mut e, arrivals, 8, Duration::from_secs(600));
    assert!(e.counters().preemptions > 0);
    let preempted: u32 = record.requests.iter().map(|r| r.preemptions).sum();
    assert_eq!(u64::from(preempted), e.counters().preemptions);
    // Nothing is lost: every request still finishes with all its tokens.
    assert!(record
        .requests
        .iter()
        .all(|r| r.output_tokens == 192 && r.finished.is_some()));
    assert!(e.is_idle());
}

#[test]
fn a_request_waits_while_every_lora_slot_is_busy() {
    let mut c = config();
    c.max_loras = 2;
    c.max_cpu_loras = 4;
    let mut e = Engine::new(c);
    for name in ["a", "b", "c"] {
        assert!(e.register_adapter(name));
    }
    let mut events: Vec<Event> = Vec::new();
    let t0 = Duration::ZERO;
    let long_a = e.submit(t0, request(32, 0, 400, Some("a"))).unwrap();
    let long_b = e.submit(t0, request(32, 10_000, 400, Some("b"))).unwrap();
    let short_c = e.submit(t0, request(32, 20_000, 4, Some("c"))).unwrap();
    e.advance(Duration::from_millis(200), &mut events);
    let gauges = e.gauges();
    assert_eq!(gauges.running_adapters, vec!["a", "b"]);
    assert_eq!(gauges.waiting_adapters, vec!["c"]);
    assert!(!events.iter().any(|ev| ev.id == short_c));
    // Once a slot frees, `c` is loaded and runs.
    e.advance(Duration::from_secs(30), &mut events);
    let finished = |id| {
        events
            .iter()
            .any(|ev| ev.id == id && matches!(ev.kind, EventKind::Finished { .. }))
    };
    assert!(finished(long_a) && finished(long_b) && finished(short_c));
    assert_eq!(e.counters().lora_loads, 3, "each adapter loaded once");
}

#[test]
fn gauges_and_counters_move_like_vllms_under_load() {
    let mut c = config();
    c.max_num_seqs = 16;
    let mut e = Engine::new(c);
    let mut events = Vec::new();
    for i in 0..40 {
        e.submit(Duration::ZERO, request(512, i * 10_000, 64, None))
            .unwrap();
    }
    e.advance(Duration::from_millis(200), &mut events);
    let busy = e.gauges();
    assert_eq!(busy.running, 16, "running is capped by max_num_seqs");
    assert_eq!(busy.waiting, 24);
    assert!(busy.kv_usage > 0.0);
    e.advance(Duration::from_secs(60), &mut events);
    let idle = e.gauges();
    assert_eq!((idle.running, idle.waiting), (0, 0));
    assert_eq!(idle.kv_usage, 0.0, "finished requests release their blocks");
    let counters = e.counters();
    assert_eq!(counters.prompt_tokens, 40 * 512);
    assert_eq!(counters.generation_tokens, 40 * 64);
    assert_eq!(counters.finished_length, 40);
    assert_eq!(counters.ttft.count(), 40);
    assert_eq!(counters.itl.count(), 40 * 63);
    assert_eq!(counters.e2e.count(), 40);
}

#[test]
fn a_repeated_prompt_hits_the_prefix_cache_and_reports_cached_tokens() {
    let mut e = Engine::new(config());
    let mut events = Vec::new();
    e.submit(Duration::ZERO, request(1_000, 0, 8, None))
        .unwrap();
    e.advance(Duration::from_secs(5), &mut events);
    e.submit(Duration::from_secs(5), request(1_000, 0, 8, None))
        .unwrap();
    e.advance(Duration::from_secs(10), &mut events);
    let cached: Vec<u32> = events
        .iter()
        .filter_map(|ev| match ev.kind {
            EventKind::Finished { usage, .. } => Some(usage.cached_tokens),
            _ => None,
        })
        .collect();
    // 1,000 tokens = 62 full blocks and a partial one; all 62 hit the second time.
    assert_eq!(cached, vec![0, 992]);
    assert_eq!(e.counters().prefix_cache_hits, 992);
}

#[test]
fn aborting_frees_everything() {
    let mut e = Engine::new(config());
    let mut events = Vec::new();
    let id = e
        .submit(Duration::ZERO, request(2_000, 0, 500, None))
        .unwrap();
    e.advance(Duration::from_millis(100), &mut events);
    assert!(e.kv_usage() > 0.0);
    assert!(e.abort(id));
    e.advance(Duration::from_millis(200), &mut events);
    assert!(events.iter().any(|ev| ev.id == id
        && matches!(
            ev.kind,
            EventKind::Finished {
                reason: FinishReason::Abort,
                ..
            }
        )));
    assert_eq!(e.kv_usage(), 0.0);
    assert!(e.is_idle());
    assert_eq!(e.counters().finished_abort, 1);
}

#[test]
fn a_prompt_longer_than_max_model_len_is_refused_with_vllms_message() {
    let mut c = config();
    c.max_model_len = 512;
    let mut e = Engine::new(c);
    let err = e
        .submit(Duration::ZERO, request(500, 0, 64, None))
        .unwrap_err();
    assert!(err.to_string().starts_with(
        "This model's maximum context length is 512 tokens. However, you requested 564 tokens"
    ));
}

#[test]
fn the_same_seed_replays_the_same_run_and_another_seed_does_not() {
    let once = |seed| {
        let mut c = config();
        c.seed = seed;
        let mut e = Engine::new(c);
        let arrivals: Vec<Arrival> = (0..50)
            .map(|i| Arrival {
                at: Duration::from_millis(i * 7),
                request: request(300, i as u32 * 1_000, 50, None),
            })
            .collect();
        run(&mut e, arrivals, 64, Duration::from_secs(100)).requests
    };
    assert_eq!(once(1), once(1));
    assert_ne!(once(1), once(2));
}

/// Token times of `id` in `events`.
fn token_times(events: &[Event], id: RequestId) -> Vec<Duration> {
    events
        .iter()
        .filter(|ev| ev.id == id && matches!(ev.kind, EventKind::Token { .. }))
        .map(|ev| ev.at)
        .collect()
}

#[test]
fn a_v0_prefill_step_runs_alone_and_the_decoders_wait_for_it() {
    // A decodes; B's 2,000-token prompt arrives. V1 computes B's prompt in a step that also
    // advances A; V0 (no chunked prefill) runs B's prompt alone, so A gets no token at the end
    // of that step, and its tokens still all come.
    for v0 in [false, true] {
        let mut c = config();
        c.report_every_token = true;
        c.enable_prefix_caching = false;
        if v0 {
            c.enable_chunked_prefill = false;
            c.prefill_steps_alone = true;
            c.max_num_batched_tokens = c.max_model_len.max(2_048);
        }
        let mut e = Engine::new(c);
        let mut events: Vec<Event> = Vec::new();
        let a = e.submit(Duration::ZERO, request(64, 0, 50, None)).unwrap();
        e.advance(Duration::from_millis(100), &mut events);
        assert!(
            token_times(&events, a).len() > 2,
            "A decodes before B arrives"
        );
        let b = e
            .submit(Duration::from_millis(100), request(2_000, 10_000, 5, None))
            .unwrap();
        e.advance(Duration::from_secs(10), &mut events);
        let (ta, tb) = (token_times(&events, a), token_times(&events, b));
        assert_eq!((ta.len(), tb.len()), (50, 5), "v0 {v0}: every token comes");
        let b_first = tb[0];
        assert_eq!(
            ta.contains(&b_first),
            !v0,
            "v0 {v0}: A's token at the end of B's prefill step"
        );
        assert!(e.is_idle());
    }
}

#[test]
fn a_client_bounded_by_time_sends_nothing_after_it_and_waits_for_what_it_sent() {
    let mut e = Engine::new(config());
    let arrivals: Vec<Arrival> = (0..400)
        .map(|i| Arrival {
            at: Duration::ZERO,
            request: request(256, i * 1_000, 64, None),
        })
        .collect();
    let stop = Duration::from_secs(2);
    let record = run_sending_until(&mut e, arrivals, 4, stop, Duration::from_secs(600));
    let finished: Vec<_> = record
        .requests
        .iter()
        .filter(|r| r.finished.is_some())
        .collect();
    // Four at a time for two seconds: more than a round, far fewer than the list.
    assert!(
        finished.len() > 4 && finished.len() < 400,
        "{}",
        finished.len()
    );
    // What was sent was sent before the stop and finished in full, some of it after the stop.
    assert!(finished
        .iter()
        .all(|r| r.sent < stop && r.output_tokens == 64));
    assert!(record.end > stop);
    // What was not sent never started.
    assert!(record
        .requests
        .iter()
        .filter(|r| r.finished.is_none())
        .all(|r| r.first_token.is_none()));
    assert!(e.is_idle());
}

#[test]
fn a_forecast_first_token_is_the_one_the_request_then_gets_and_leaves_the_engine_as_it_was() {
    // A busy engine under KV pressure, so the forecast must run preemptions and finishes at
    // each request's true output length to be right; every token reported, as the bench runs
    // its engines, while the forecast reports first tokens only.
    let mut c = config();
    c.num_gpu_blocks = 96;
    c.max_model_len = 1024;
    c.report_every_token = true;
    let mut e = Engine::new(c);
    let mut events = Vec::new();
    for i in 0..6 {
        e.submit(Duration::ZERO, request(200, i * 1_000, 150 + 40 * i, None))
            .unwrap();
    }
    let now = Duration::from_millis(120);
    e.advance(now, &mut events);
    let gauges = e.gauges();
    let late = request(300, 90_000, 8, None);
    let forecast = e
        .forecast_first_token(now, late.clone(), Duration::from_secs(600))
        .expect("a first token");
    assert_eq!(e.gauges(), gauges, "the forecast ran on a copy");
    // Nothing but a first token too early to come: no forecast.
    assert_eq!(
        e.forecast_first_token(now, late.clone(), forecast - Duration::from_nanos(1)),
        None
    );

    let id = e.submit(now, late).unwrap();
    events.clear();
    let mut first = None;
    while let Some(at) = e.next_wakeup() {
        e.advance(at, &mut events);
        first = first.or_else(|| {
            events
                .iter()
                .find(|ev| ev.id == id && ev.kind == EventKind::Token { index: 0 })
                .map(|ev| ev.at)
        });
    }
    assert!(
        e.counters().preemptions > 0,
        "the run was under KV pressure"
    );
    assert_eq!(first, Some(forecast));
    // Long enough to depend on the requests ahead: not the request's prefill alone.
    assert!(forecast > now + Duration::from_millis(100), "{forecast:?}");
}
