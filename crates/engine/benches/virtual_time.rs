//! How fast the engine runs in virtual time: simulated seconds per CPU second.
//!
//! `saturated_8b_h100_60s`: one Llama-3.1-8B/H100 replica offered 254 req/s of the KubeCon
//! shared-prefix workload (above its ~175 req/s capacity) for 60 simulated seconds.
//! `fleet_64_replicas_10s`: 64 such replicas, each offered the same overload, for 10 simulated
//! seconds. `saturated_8b_h100_conversation_60s`: one replica offered 40 req/s of
//! conversation-shaped requests (above its capacity) for 60 simulated seconds. Divide the
//! simulated seconds by the reported time for the speed-up over real time.

#![allow(clippy::expect_used)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use infergate_engine::drive::{run, Arrival};
use infergate_engine::{Engine, EngineConfig, Event, NewRequest, Profile};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

fn arrivals(rate: f64, seconds: f64) -> Vec<Arrival> {
    let count = (rate * seconds) as u32;
    (0..count)
        .map(|i| {
            let (group, question) = (i % 10, (i / 10) % 10);
            let mut prompt: Vec<u32> = (0..128).map(|t| 1_000 + group * 1_000 + t).collect();
            prompt.extend((0..64).map(|t| 100_000 + group * 10_000 + question * 100 + t));
            Arrival {
                at: Duration::from_secs_f64(f64::from(i) / rate),
                request: NewRequest::from_tokens(&prompt, 64),
            }
        })
        .collect()
}

/// Conversation-shaped traffic: prompt and output lengths lognormal with the Azure 2023
/// conversation trace's means (1,155 and 211 tokens), sent at `rate`.
fn conversation_arrivals(rate: f64, seconds: f64) -> Vec<Arrival> {
    let mut rng = infergate_rng::SplitMix64::new(5);
    let count = (rate * seconds) as u32;
    (0..count)
        .map(|i| {
            let prompt_len = (1_155.0 * rng.lognormal_factor(0.8)).clamp(16.0, 14_000.0) as u32;
            let output = (211.0 * rng.lognormal_factor(0.9)).clamp(1.0, 1_000.0) as u32;
            let prompt: Vec<u32> = (0..prompt_len).map(|t| i * 20_000 + t).collect();
            Arrival {
                at: Duration::from_secs_f64(f64::from(i) / rate),
                request: NewRequest::from_tokens(&prompt, output),
            }
        })
        .collect()
}

/// Requests of a run that finished.
fn finished(record: &infergate_engine::drive::RunRecord) -> usize {
    record
        .requests
        .iter()
        .filter(|r| r.finished.is_some())
        .count()
}

fn engine() -> Engine {
    let mut config =
        EngineConfig::new(Profile::lookup("llama-3.1-8b", "h100", 1).expect("profile"));
    config.max_num_seqs = 128;
    Engine::new(config)
}

/// Runs `replicas` engines side by side, each offered `rate`, in one virtual-time event loop.
fn fleet(replicas: usize, rate: f64, seconds: f64) -> usize {
    let mut engines: Vec<Engine> = (0..replicas).map(|_| engine()).collect();
    let work = arrivals(rate, seconds);
    let mut heap: BinaryHeap<Reverse<(Duration, usize, usize)>> = BinaryHeap::new();
    // Each replica gets the same arrival sequence; the heap orders every arrival and wakeup.
    for r in 0..replicas {
        heap.push(Reverse((work[0].at, r, 0)));
    }
    let mut events: Vec<Event> = Vec::new();
    let mut finished = 0;
    let until = Duration::from_secs_f64(seconds);
    let mut wake_pushed: Vec<Option<Duration>> = vec![None; replicas];
    while let Some(Reverse((now, r, next))) = heap.pop() {
        if now > until {
            break;
        }
        if next != usize::MAX {
            let _ = engines[r].submit(now, work[next].request.clone());
            if next + 1 < work.len() {
                heap.push(Reverse((work[next + 1].at, r, next + 1)));
            }
        } else {
            wake_pushed[r] = None;
            events.clear();
            engines[r].advance(now, &mut events);
            finished += events
                .iter()
                .filter(|e| matches!(e.kind, infergate_engine::EventKind::Finished { .. }))
                .count();
        }
        if let Some(wake) = engines[r].next_wakeup() {
            if wake_pushed[r] != Some(wake) {
                wake_pushed[r] = Some(wake);
                heap.push(Reverse((wake, r, usize::MAX)));
            }
        }
    }
    finished
}

fn virtual_time(c: &mut Criterion) {
    let mut group = c.benchmark_group("virtual_time");
    group.sample_size(10);
    let shared_prefix = arrivals(254.0, 60.0);
    group.bench_function("saturated_8b_h100_60s", |b| {
        b.iter_batched(
            || shared_prefix.clone(),
            |work| {
                let mut e = engine();
                let record = run(&mut e, work, 448, Duration::from_secs(60));
                assert!(finished(&record) > 5_000);
            },
            BatchSize::LargeInput,
        )
    });
    let conversation = conversation_arrivals(40.0, 60.0);
    group.bench_function("saturated_8b_h100_conversation_60s", |b| {
        b.iter_batched(
            || conversation.clone(),
            |work| {
                let profile = Profile::lookup("llama-3.1-8b", "h100", 1).expect("profile");
                let mut e = Engine::new(EngineConfig::new(profile));
                let record = run(&mut e, work, 1_024, Duration::from_secs(60));
                assert!(finished(&record) > 500);
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("fleet_64_replicas_10s", |b| {
        b.iter(|| assert!(fleet(64, 254.0, 10.0) > 64 * 1_000));
    });
    group.finish();
}

criterion_group!(benches, virtual_time);
criterion_main!(benches);
