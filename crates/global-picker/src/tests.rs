use std::time::Duration;

use infergate_config::global::load_global_from_str;
use infergate_picker::AttemptOutcome;
use infergate_rng::SplitMix64;

use crate::*;

fn settings(extra: &str) -> TierSettings {
    let yaml = format!(
        r#"
apiVersion: infergate.dev/v1alpha1
kind: GlobalGatewayConfig
spec:
  region: east
  regionLatencies: [{{from: east, to: west, latency: 80ms}}, {{from: east, to: south, latency: 40ms}}]
  members:
    - {{name: a, url: "http://a:1", adminUrl: "http://a:2", region: east}}
    - {{name: b, url: "http://b:1", adminUrl: "http://b:2", region: west}}
    - {{name: c, url: "http://c:1", adminUrl: "http://c:2", region: south}}
{extra}"#
    );
    TierSettings::from_resolved(&load_global_from_str(&yaml).expect("config loads"))
}

fn s(secs: f64) -> Duration {
    Duration::from_secs_f64(secs)
}

fn pool(model: &str, kv_headroom: f64, queue: u64, saturation: f64) -> PoolStatus {
    PoolStatus {
        name: "p".into(),
        models: vec![model.into()],
        adapters: vec!["sql-lora".into()],
        ready_endpoints: 4,
        endpoints: 4,
        kv_headroom,
        queue_depth: queue,
        error_rate: 0.0,
        ttft_p99_seconds: Some(0.5),
        saturation,
        routing: Some("scheduler Default, engine Vllm, weights queue 1".into()),
    }
}

fn doc(seq: u64, pools: Vec<PoolStatus>) -> MemberStatus {
    MemberStatus {
        api_version: "infergate.dev/v1alpha1".into(),
        kind: MEMBER_STATUS_KIND.into(),
        sequence: seq,
        clock_unix_ms: 0,
        pools,
    }
}

fn member(name: &str, region: &str, cost: f64) -> Member {
    Member {
        name: name.into(),
        region: region.into(),
        cost_rank: cost,
        weight: 1.0,
        state: MemberState::new(),
    }
}

fn req(model: &str) -> Request<'_> {
    Request {
        model,
        caller_region: None,
    }
}

fn order(members: &[Member], r: Request<'_>, now: Duration, st: &TierSettings) -> Vec<String> {
    let mut rng = SplitMix64::new(7);
    rank(members, r, now, st, &mut rng)
        .expect("ranked")
        .iter()
        .map(|x| members[x.member].name.clone())
        .collect()
}

#[test]
fn a_status_that_stops_advancing_makes_the_member_stale_after_three_pulls() {
    let st = settings("");
    let mut m = MemberState::new();
    assert_eq!(m.availability(s(0.0)), Availability::Unknown);
    m.on_pull(doc(1, vec![pool("m", 0.5, 0, 0.1)]), s(0.0), &st);
    assert_eq!(
        m.availability(s(0.0)),
        Availability::Available,
        "first pull: at once"
    );
    for i in 1..=2 {
        m.on_pull(doc(1, vec![pool("m", 0.5, 0, 0.1)]), s(f64::from(i)), &st);
        assert_eq!(m.availability(s(f64::from(i))), Availability::Available);
    }
    m.on_pull(doc(1, vec![pool("m", 0.5, 0, 0.1)]), s(3.0), &st);
    assert_eq!(
        m.availability(s(3.0)),
        Availability::Stale,
        "frozen sequence"
    );
    // Returning takes two good pulls, then ramps from 10 %.
    m.on_pull(doc(2, vec![pool("m", 0.5, 0, 0.1)]), s(4.0), &st);
    assert_eq!(m.availability(s(4.0)), Availability::Stale);
    m.on_pull(doc(3, vec![pool("m", 0.5, 0, 0.1)]), s(5.0), &st);
    assert_eq!(m.availability(s(5.0)), Availability::Available);
    assert_eq!(m.ramp_weight(s(5.0), &st), 0.1);
    assert!(
        (m.ramp_weight(s(20.0), &st) - 0.5).abs() < 1e-9,
        "linear over 30 s"
    );
    assert_eq!(m.ramp_weight(s(35.0), &st), 1.0);
}

#[test]
fn failed_pulls_count_as_misses_and_a_good_one_resets_them() {
    let st = settings("");
    let mut m = MemberState::new();
    m.on_pull(doc(1, vec![pool("m", 0.5, 0, 0.1)]), s(0.0), &st);
    m.on_pull_failed(&st);
    m.on_pull_failed(&st);
    m.on_pull(doc(2, vec![pool("m", 0.5, 0, 0.1)]), s(3.0), &st);
    m.on_pull_failed(&st);
    m.on_pull_failed(&st);
    assert_eq!(
        m.availability(s(5.0)),
        Availability::Available,
        "misses were reset"
    );
    m.on_pull_failed(&st);
    assert_eq!(m.availability(s(6.0)), Availability::Stale);
}

#[test]
fn aggression_makes_the_ramp_rise_faster_at_first() {
    let st = settings("  slowStart: {window: 10s, aggression: 2, minWeightPercent: 5}\n");
    let mut m = MemberState::new();
    m.on_pull(doc(1, vec![]), s(0.0), &st);
    for _ in 0..3 {
        m.on_pull_failed(&st);
    }
    m.on_pull(doc(2, vec![]), s(4.0), &st);
    m.on_pull(doc(3, vec![]), s(5.0), &st);
    // (2.5 / 10)^(1/2) = 0.5
    assert!((m.ramp_weight(s(7.5), &st) - 0.5).abs() < 1e-9);
    assert_eq!(
        m.ramp_weight(s(5.0), &st),
        0.05,
        "the floor in the first moments"
    );
}

#[test]
fn consecutive_failures_eject_and_the_member_ramps_back_after() {
    let st = settings("  outlierDetection: {consecutiveFailures: 3, baseEjectionTime: 10s}\n");
    let mut m = MemberState::new();
    m.on_pull(doc(1, vec![pool("m", 0.5, 0, 0.1)]), s(0.0), &st);
    let mut ejected = None;
    for _ in 0..3 {
        ejected = m.on_attempt(AttemptOutcome::Failed, s(1.0), &st.outlier, || true);
    }
    assert_eq!(ejected, Some(s(10.0)));
    assert_eq!(m.availability(s(5.0)), Availability::Ejected);
    assert_eq!(m.availability(s(11.0)), Availability::Available);
    assert!(
        m.ramp_weight(s(11.0), &st) < 0.2,
        "ramping after the ejection"
    );
    // No room: not ejected.
    let mut other = MemberState::new();
    other.on_pull(doc(1, vec![]), s(0.0), &st);
    for _ in 0..5 {
        assert_eq!(
            other.on_attempt(AttemptOutcome::Failed, s(1.0), &st.outlier, || false),
            None
        );
    }
}

#[test]
fn the_emptiest_nearest_member_wins_and_the_model_decides_who_serves() {
    let st = settings("");
    let mut ms = vec![
        member("a", "east", 0.0),
        member("b", "west", 0.0),
        member("c", "south", 0.0),
    ];
    ms[0]
        .state
        .on_pull(doc(1, vec![pool("m", 0.3, 6, 0.5)]), s(0.0), &st);
    ms[1]
        .state
        .on_pull(doc(1, vec![pool("m", 0.9, 0, 0.1)]), s(0.0), &st);
    ms[2]
        .state
        .on_pull(doc(1, vec![pool("other", 0.9, 0, 0.1)]), s(0.0), &st);
    assert_eq!(order(&ms, req("m"), s(0.1), &st), ["b", "a"]);
    // The adapter is served too; an unknown model is a 404.
    assert_eq!(order(&ms, req("sql-lora"), s(0.1), &st).len(), 3);
    let mut rng = SplitMix64::new(1);
    assert_eq!(
        rank(&ms, req("nope"), s(0.1), &st, &mut rng),
        Err(Refusal::UnknownModel)
    );
    // Equal load: the caller's region decides.
    ms[0]
        .state
        .on_pull(doc(2, vec![pool("m", 0.9, 0, 0.1)]), s(1.0), &st);
    let east = Request {
        model: "m",
        caller_region: Some("east"),
    };
    assert_eq!(order(&ms, east, s(1.1), &st), ["a", "b"]);
    let west = Request {
        model: "m",
        caller_region: Some("west"),
    };
    assert_eq!(order(&ms, west, s(1.1), &st), ["b", "a"]);
}

#[test]
fn requests_sent_since_the_status_spread_the_load() {
    let st = settings("");
    let mut ms = vec![member("a", "east", 0.0), member("b", "east", 0.0)];
    ms[0]
        .state
        .on_pull(doc(1, vec![pool("m", 0.5, 0, 0.2)]), s(0.0), &st);
    ms[1]
        .state
        .on_pull(doc(1, vec![pool("m", 0.5, 1, 0.2)]), s(0.0), &st);
    let mut sent = [0u32; 2];
    let mut rng = SplitMix64::new(3);
    for _ in 0..40 {
        let first = rank(&ms, req("m"), s(0.5), &st, &mut rng).expect("ranked")[0].member;
        let _ = ms[first].state.on_sent();
        sent[first] += 1;
    }
    assert!(sent[0] >= 19 && sent[1] >= 19, "{sent:?}");
    // Without headroom (both past spillAt), the least loaded goes first, and requests that
    // ended no longer count: the member that finished its work wins again.
    let mut ms = vec![member("a", "east", 0.0), member("b", "east", 0.0)];
    ms[0]
        .state
        .on_pull(doc(1, vec![pool("m", 0.5, 0, 0.85)]), s(0.0), &st);
    ms[1]
        .state
        .on_pull(doc(1, vec![pool("m", 0.5, 1, 0.85)]), s(0.0), &st);
    let in_flight: Vec<u64> = (0..10).map(|_| ms[0].state.on_sent()).collect();
    assert_eq!(
        order(&ms, req("m"), s(0.5), &st),
        ["b", "a"],
        "a holds ten more"
    );
    for g in in_flight {
        ms[0].state.on_done(g);
    }
    assert_eq!(order(&ms, req("m"), s(0.5), &st), ["a", "b"], "a's ended");
    // One sent under an older status is not taken off the newer status's credit.
    let old = ms[0].state.on_sent();
    ms[0]
        .state
        .on_pull(doc(2, vec![pool("m", 0.5, 1, 0.2)]), s(1.0), &st);
    let _ = ms[0].state.on_sent();
    ms[0].state.on_done(old);
    assert_eq!(ms[0].state.in_flight_since_status(), 1);
}

#[test]
fn traffic_fills_the_cheapest_member_then_spills_before_anyone_queues() {
    let st = settings("");
    let mut ms = vec![member("cheap", "west", 1.0), member("dear", "east", 3.0)];
    ms[0]
        .state
        .on_pull(doc(1, vec![pool("m", 0.4, 0, 0.5)]), s(0.0), &st);
    ms[1]
        .state
        .on_pull(doc(1, vec![pool("m", 0.9, 0, 0.1)]), s(0.0), &st);
    // The dear member scores better (emptier, nearer), but the cheap one has headroom.
    assert_eq!(order(&ms, req("m"), s(0.1), &st), ["cheap", "dear"]);
    // Past spillAt (0.8) the cheap one has none: the dear one goes first.
    ms[0]
        .state
        .on_pull(doc(2, vec![pool("m", 0.1, 2, 0.85)]), s(1.0), &st);
    assert_eq!(order(&ms, req("m"), s(1.1), &st), ["dear", "cheap"]);
    // Requests sent since the status count against the headroom too: nothing was sent in
    // the interval before, so the cheap member may take two per ready endpoint in this one,
    // spread over it, plus a burst of as many — 8.8 by 0.1 s, 14 by 0.75 s.
    ms[0]
        .state
        .on_pull(doc(3, vec![pool("m", 0.4, 0, 0.5)]), s(2.0), &st);
    for _ in 0..13 {
        let _ = ms[0].state.on_sent();
    }
    assert_eq!(order(&ms, req("m"), s(2.1), &st), ["dear", "cheap"]);
    assert_eq!(order(&ms, req("m"), s(2.76), &st), ["cheap", "dear"]);
}

#[test]
fn a_member_with_headroom_takes_a_quarter_more_each_status_spread_over_it() {
    let st = settings("");
    let mut ms = vec![member("a", "east", 0.0)];
    let headroom = |ms: &[Member], at: f64| {
        let mut rng = SplitMix64::new(1);
        rank(ms, req("m"), s(at), &st, &mut rng).expect("ranked")[0].headroom
    };
    ms[0]
        .state
        .on_pull(doc(1, vec![pool("m", 0.9, 0, 0.1)]), s(0.0), &st);
    // Nothing sent before: two per ready endpoint (8) over the 1 s interval, 4 by half of it,
    // and a burst of 8.
    for _ in 0..11 {
        let _ = ms[0].state.on_sent();
    }
    assert!(headroom(&ms, 0.5), "11 of 12");
    let _ = ms[0].state.on_sent();
    assert!(!headroom(&ms, 0.5), "12 of 12");
    assert!(headroom(&ms, 0.75), "12 of 14");
    for _ in 0..8 {
        let _ = ms[0].state.on_sent();
    }
    // 20 sent in that interval: a quarter more (25) over the next, 12.5 by half of it, + 8.
    ms[0]
        .state
        .on_pull(doc(2, vec![pool("m", 0.9, 0, 0.1)]), s(1.0), &st);
    assert_eq!(ms[0].state.sends(), (0, 20));
    for _ in 0..20 {
        let _ = ms[0].state.on_sent();
    }
    assert!(headroom(&ms, 1.5), "20 of 20.5");
    let _ = ms[0].state.on_sent();
    assert!(!headroom(&ms, 1.5), "21 of 20.5");
    // The first request after a status always may go.
    ms[0]
        .state
        .on_pull(doc(3, vec![pool("m", 0.9, 0, 0.1)]), s(2.0), &st);
    assert!(headroom(&ms, 2.0));
    // A status saying the member is past spillAt, or has requests waiting beyond one per
    // endpoint, takes its headroom whatever was sent.
    ms[0]
        .state
        .on_pull(doc(4, vec![pool("m", 0.9, 5, 0.1)]), s(3.0), &st);
    assert!(!headroom(&ms, 3.5), "five waiting on four endpoints");
    ms[0]
        .state
        .on_pull(doc(5, vec![pool("m", 0.9, 0, 0.8)]), s(4.0), &st);
    assert!(!headroom(&ms, 4.5), "at spillAt");
}

#[test]
fn saturated_members_go_last_and_all_saturated_is_a_429() {
    let st = settings("");
    let mut ms = vec![member("a", "east", 0.0), member("b", "east", 0.0)];
    ms[0]
        .state
        .on_pull(doc(1, vec![pool("m", 0.0, 40, 1.2)]), s(0.0), &st);
    ms[1]
        .state
        .on_pull(doc(1, vec![pool("m", 0.5, 0, 0.3)]), s(0.0), &st);
    // Still tried, last: left out on a status a second old, it would take nothing until its
    // next one while the others took everything.
    assert_eq!(order(&ms, req("m"), s(0.1), &st), ["b", "a"]);
    ms[1].state.on_throttled(s(0.1), s(2.0));
    let mut rng = SplitMix64::new(1);
    assert_eq!(
        rank(&ms, req("m"), s(0.5), &st, &mut rng),
        Err(Refusal::AllSaturated {
            retry_after: s(1.6)
        })
    );
    assert_eq!(
        order(&ms, req("m"), s(2.2), &st),
        ["b", "a"],
        "the wait is over"
    );
}

#[test]
fn stale_and_ejected_members_leave_and_with_none_left_nothing_is_dispatched() {
    let st = settings("");
    let mut ms = vec![member("a", "east", 0.0), member("b", "east", 0.0)];
    let mut rng = SplitMix64::new(1);
    assert_eq!(
        rank(&ms, req("m"), s(0.0), &st, &mut rng),
        Err(Refusal::NoneAvailable),
        "before any pull"
    );
    ms[0]
        .state
        .on_pull(doc(1, vec![pool("m", 0.5, 0, 0.3)]), s(0.0), &st);
    ms[1]
        .state
        .on_pull(doc(1, vec![pool("m", 0.9, 0, 0.1)]), s(0.0), &st);
    for _ in 0..3 {
        ms[1].state.on_pull_failed(&st);
    }
    assert_eq!(order(&ms, req("m"), s(3.0), &st), ["a"]);
    assert!(!room_to_eject(&ms, s(3.0)), "the last candidate stays");
    for _ in 0..3 {
        ms[0].state.on_pull_failed(&st);
    }
    assert_eq!(
        rank(&ms, req("m"), s(6.0), &st, &mut rng),
        Err(Refusal::NoneAvailable)
    );
}

#[test]
fn a_ramping_member_wins_first_place_in_proportion_to_its_weight() {
    let st = settings("  slowStart: {window: 100s}\n");
    let mut ms = vec![member("back", "east", 0.0), member("steady", "east", 0.0)];
    ms[0]
        .state
        .on_pull(doc(1, vec![pool("m", 0.9, 0, 0.1)]), s(0.0), &st);
    ms[1]
        .state
        .on_pull(doc(1, vec![pool("m", 0.5, 0, 0.1)]), s(0.0), &st);
    for _ in 0..3 {
        ms[0].state.on_pull_failed(&st);
    }
    ms[0]
        .state
        .on_pull(doc(2, vec![pool("m", 0.9, 0, 0.1)]), s(9.0), &st);
    ms[0]
        .state
        .on_pull(doc(3, vec![pool("m", 0.9, 0, 0.1)]), s(10.0), &st);
    // 30 s after its return: weight 0.3.
    let mut rng = SplitMix64::new(11);
    let firsts = (0..2000)
        .filter(|_| rank(&ms, req("m"), s(40.0), &st, &mut rng).expect("ranked")[0].member == 0)
        .count();
    assert!((500..700).contains(&firsts), "{firsts} of 2000");
}

#[test]
fn a_document_with_bad_figures_is_refused() {
    let mut d = doc(1, vec![pool("m", 0.5, 0, 0.1)]);
    let text = serde_json::to_vec(&d).expect("serialises");
    assert_eq!(MemberStatus::parse(&text).expect("parses"), d);
    d.pools[0].saturation = -1.0;
    let bad = serde_json::to_vec(&d).expect("serialises");
    assert!(MemberStatus::parse(&bad).is_err());
    assert!(MemberStatus::parse(b"{}").is_err());
}

#[test]
fn a_member_whose_last_pull_missed_goes_after_the_others() {
    let st = settings("");
    let mut ms = vec![member("near", "east", 0.0), member("far", "west", 0.0)];
    ms[0]
        .state
        .on_pull(doc(1, vec![pool("m", 0.9, 0, 0.1)]), s(0.0), &st);
    ms[1]
        .state
        .on_pull(doc(1, vec![pool("m", 0.5, 0, 0.1)]), s(0.0), &st);
    assert_eq!(order(&ms, req("m"), s(0.5), &st), ["near", "far"]);
    ms[0].state.on_pull_failed(&st);
    assert_eq!(order(&ms, req("m"), s(1.5), &st), ["far", "near"]);
    ms[0]
        .state
        .on_pull(doc(2, vec![pool("m", 0.9, 0, 0.1)]), s(2.0), &st);
    assert_eq!(order(&ms, req("m"), s(2.5), &st), ["near", "far"]);
}

#[test]
fn members_that_define_a_model_differently_are_reported_and_the_rest_is_not() {
    let same = doc(1, vec![pool("m", 0.5, 0, 0.1)]);
    let mut other_weights = doc(1, vec![pool("m", 0.9, 7, 0.8)]);
    assert!(
        drift([("a", &same), ("b", &other_weights)]).is_empty(),
        "load differs on purpose"
    );
    other_weights.pools[0].routing = Some("scheduler Default, engine Vllm, weights queue 3".into());
    let mut no_adapter = doc(1, vec![pool("m", 0.5, 0, 0.1)]);
    no_adapter.pools[0].adapters.clear();
    let found = drift([("a", &same), ("b", &other_weights), ("c", &no_adapter)]);
    let models: Vec<&str> = found.iter().map(|d| d.model.as_str()).collect();
    // The adapter is served by a and b only (c has none), and they pick differently.
    assert_eq!(models, ["m", "sql-lora"]);
    assert_eq!(found[0].variants.len(), 3);
    assert_eq!(found[1].variants.len(), 2);
    let line = found[0].describe();
    assert!(
        line.contains("weights queue 3") && line.contains("adapters []"),
        "{line}"
    );
    // Defined alike, the adapter is no drift.
    let found = drift([("a", &same), ("c", &same)]);
    assert!(found.is_empty(), "{found:?}");
}
