//! vLLM's `--scheduling-policy priority`: the waiting queue in (priority, arrival) order, the
//! least urgent running request preempted first, and urgent requests that preempt their way in;
//! FCFS refuses priorities and keeps today's order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use infergate_engine::{
    Engine, EngineConfig, Event, EventKind, NewRequest, Profile, RequestId, SchedulingPolicy,
    SubmitError,
};
use std::time::Duration;

fn request(len: u32, base: u32, output: u32, priority: i32) -> NewRequest {
    let prompt: Vec<u32> = (0..len).map(|t| base + t).collect();
    NewRequest {
        priority,
        ..NewRequest::from_tokens(&prompt, output)
    }
}

fn engine(policy: SchedulingPolicy, tweak: impl FnOnce(&mut EngineConfig)) -> Engine {
    let mut c = EngineConfig::new(Profile::lookup("llama-3.1-8b", "h100", 1).unwrap());
    c.scheduling_policy = policy;
    c.jitter_sigma = 0.0;
    tweak(&mut c);
    Engine::new(c)
}

fn first_token(events: &[Event], id: RequestId) -> Option<Duration> {
    events
        .iter()
        .find(|e| e.id == id && matches!(e.kind, EventKind::Token { index: 0 }))
        .map(|e| e.at)
}

fn preempted(events: &[Event]) -> Vec<RequestId> {
    events
        .iter()
        .filter(|e| e.kind == EventKind::Preempted)
        .map(|e| e.id)
        .collect()
}

#[test]
fn fcfs_refuses_a_priority_with_vllms_message_and_priority_accepts_it() {
    let mut fcfs = engine(SchedulingPolicy::Fcfs, |_| {});
    let err = fcfs
        .submit(Duration::ZERO, request(32, 0, 4, 1))
        .unwrap_err();
    assert_eq!(err, SubmitError::PriorityNotEnabled(1));
    assert_eq!(
        err.to_string(),
        "Got priority 1 but Priority scheduling is not enabled."
    );
    assert!(fcfs.submit(Duration::ZERO, request(32, 0, 4, 0)).is_ok());
    let mut priority = engine(SchedulingPolicy::Priority, |_| {});
    assert!(priority
        .submit(Duration::ZERO, request(32, 0, 4, -3))
        .is_ok());
    assert_eq!("priority".parse(), Ok(SchedulingPolicy::Priority));
    assert!("lifo".parse::<SchedulingPolicy>().is_err());
}

/// One request at a time (`max_num_seqs` 1), short answers: the queue order is the order of
/// first tokens. A Critical-like request (priority 0) arrives behind a queue of eight
/// Sheddable-like ones (priority 2) while the first of them runs.
fn queue_behind_a_full_batch(
    policy: SchedulingPolicy,
) -> (Vec<Option<Duration>>, Option<Duration>) {
    let mut e = engine(policy, |c| {
        c.max_num_seqs = 1;
        c.max_num_batched_tokens = 2048;
    });
    let low = if policy == SchedulingPolicy::Priority {
        2
    } else {
        0
    };
    let mut events = Vec::new();
    let sheddable: Vec<RequestId> = (0..8)
        .map(|i| {
            e.submit(Duration::ZERO, request(256, i * 1_000, 8, low))
                .unwrap()
        })
        .collect();
    e.advance(Duration::from_millis(25), &mut events);
    let critical = e
        .submit(Duration::from_millis(25), request(256, 99_000, 8, 0))
        .unwrap();
    e.advance(Duration::from_secs(60), &mut events);
    assert!(e.is_idle());
    (
        sheddable
            .iter()
            .map(|&id| first_token(&events, id))
            .collect(),
        first_token(&events, critical),
    )
}

#[test]
fn with_priority_scheduling_an_urgent_request_overtakes_a_queue_of_less_urgent_ones() {
    let (sheddable, critical) = queue_behind_a_full_batch(SchedulingPolicy::Priority);
    let critical = critical.unwrap();
    // Only the one already running when the urgent request arrived comes first (it keeps its
    // batch slot: nothing is preempted for a waiting request); the seven queued ones wait.
    let before = sheddable.iter().filter(|t| t.unwrap() < critical).count();
    assert_eq!(before, 1, "{sheddable:?} vs {critical:?}");
}

#[test]
fn under_fcfs_the_same_request_waits_for_the_whole_queue() {
    let (sheddable, critical) = queue_behind_a_full_batch(SchedulingPolicy::Fcfs);
    let critical = critical.unwrap();
    assert!(sheddable.iter().all(|t| t.unwrap() < critical));
}

/// A batch of two slots full of long low-priority answers, then an urgent request.
fn full_batch_then_urgent(
    policy: SchedulingPolicy,
    priorities: [i32; 2],
    urgent: i32,
) -> (Vec<Event>, [RequestId; 2], RequestId) {
    let mut e = engine(policy, |c| {
        c.max_num_seqs = 2;
        c.max_num_batched_tokens = 2048;
        c.report_every_token = true;
    });
    let mut events = Vec::new();
    let a = e
        .submit(Duration::ZERO, request(64, 0, 2_000, priorities[0]))
        .unwrap();
    let b = e
        .submit(
            Duration::from_millis(1),
            request(64, 5_000, 2_000, priorities[1]),
        )
        .unwrap();
    e.advance(Duration::from_millis(200), &mut events);
    assert_eq!(e.num_running(), 2);
    let c = e
        .submit(Duration::from_millis(200), request(64, 9_000, 4, urgent))
        .unwrap();
    e.advance(Duration::from_secs(120), &mut events);
    assert!(e.is_idle());
    (events, [a, b], c)
}

#[test]
fn a_waiting_request_never_preempts_a_running_one_however_urgent() {
    // vLLM V1: admission stops at a request that does not fit; only running requests that run out
    // of blocks are preempted. The urgent request waits for a batch slot under either policy.
    for (policy, running) in [
        (SchedulingPolicy::Priority, [2, 2]),
        (SchedulingPolicy::Priority, [1, 1]),
        (SchedulingPolicy::Fcfs, [0, 0]),
    ] {
        let (events, _, c) = full_batch_then_urgent(policy, running, 0);
        assert!(preempted(&events).is_empty(), "{policy:?} {running:?}");
        let ttft = first_token(&events, c).unwrap() - Duration::from_millis(200);
        assert!(
            ttft > Duration::from_secs(5),
            "{policy:?} {running:?}: {ttft:?}"
        );
    }
}

#[test]
fn when_kv_runs_out_the_least_urgent_request_is_preempted_not_the_newest() {
    // 40 blocks = 640 tokens of KV: two requests growing from 64 to 464 tokens cannot both fit.
    // The urgent one is admitted last, so FCFS would preempt it; priority preempts the other.
    let run = |policy: SchedulingPolicy, low: i32| {
        let mut e = engine(policy, |c| {
            c.num_gpu_blocks = 40;
            c.max_model_len = 640;
        });
        let mut events = Vec::new();
        let relaxed = e.submit(Duration::ZERO, request(64, 0, 400, low)).unwrap();
        let urgent = e
            .submit(Duration::from_millis(1), request(64, 5_000, 400, 0))
            .unwrap();
        e.advance(Duration::from_secs(120), &mut events);
        assert!(e.is_idle());
        (preempted(&events), relaxed, urgent)
    };
    let (victims, relaxed, _) = run(SchedulingPolicy::Priority, 5);
    assert!(!victims.is_empty());
    assert!(victims.iter().all(|&v| v == relaxed), "{victims:?}");
    let (victims, _, urgent) = run(SchedulingPolicy::Fcfs, 0);
    assert!(victims.contains(&urgent), "{victims:?}");
    // Equal priorities: the later arrival is the victim, as under FCFS.
    let (victims, _, later) = run(SchedulingPolicy::Priority, 0);
    assert!(!victims.is_empty());
    assert!(victims.iter().all(|&v| v == later), "{victims:?}");
}
