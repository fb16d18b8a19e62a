//! Rewrites and rate limits in the exchange: the rewritten body goes upstream with its length,
//! the answer names the client's model again, and a tenant over its limit gets the standalone
//! gateway's 429. (Tokens are checked end to end through Envoy, where the keys are made.)

use super::response::response_headers;
use super::*;
use crate::protocol::Direction;

/// Every request for `llama` goes to `mistral`.
const REWRITE: &str = "  rewrites:
    - matches: [{model: {value: llama}}]
      targets: [{modelRewrite: mistral, weight: 1}]
";

fn removed(m: &ProcessingResponse) -> Vec<String> {
    mutation(m)
        .map(|hm| hm.remove_headers.clone())
        .unwrap_or_default()
}

fn immediate_header(answers: &[ProcessingResponse], name: &str) -> Option<String> {
    let Some(Response::ImmediateResponse(i)) = &answers[0].response else {
        panic!("not an immediate response: {answers:?}")
    };
    let set = &i.headers.as_ref()?.set_headers;
    set.iter()
        .filter_map(|o| o.header.as_ref())
        .find(|h| h.key.eq_ignore_ascii_case(name))
        .map(|h| String::from_utf8_lossy(&h.raw_value).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_request_goes_upstream_naming_the_target_and_its_answer_names_the_clients_model(
) {
    let (_plane, p) = start(&format!("{}{REWRITE}", config(true, TWO_POOLS)));
    let mut ex = Exchange::new(Arc::clone(&p));
    let sent = chat("llama", 100_000);
    let answers = post(&mut ex, &sent, Vec::new());
    assert_eq!(destination(&answers), MISTRAL);
    let headers = set_headers(&answers[0]);
    assert_eq!(get(&headers, protocol::MODEL_NAME), Some("mistral"));
    let upstream: Vec<u8> = answers[1..]
        .iter()
        .flat_map(|m| streamed(m).0.to_vec())
        .collect();
    let expected =
        String::from_utf8(sent)
            .unwrap()
            .replacen(r#""model":"llama""#, r#""model":"mistral""#, 1);
    assert_eq!(upstream, expected.as_bytes(), "only the model changed");
    assert!(answers.len() > 2, "a large body still goes back in chunks");
    assert_eq!(
        get(&headers, "content-length"),
        Some(expected.len().to_string().as_str()),
        "the length is the rewritten body's"
    );

    // The answer: its length no longer holds, and its model is the client's, even with the
    // name split across chunks.
    let answers = ex
        .on_message(response_headers("200", "application/json", None, false))
        .unwrap();
    assert_eq!(removed(&answers[0]), vec!["content-length".to_owned()]);
    let mut client = Vec::new();
    for (chunk, eos) in [
        (&br#"{"id":"1","model":"mis"#[..], false),
        (&br#"tral","choices":[]}"#[..], true),
    ] {
        for m in ex
            .on_message(body(chunk, eos, Direction::Response))
            .unwrap()
        {
            client.extend_from_slice(streamed(&m).0);
        }
    }
    assert_eq!(client, br#"{"id":"1","model":"llama","choices":[]}"#);
    assert!(ex.is_done());
    let metrics = p.handle.metrics().encode();
    let line = r#"infergate_rewrites_total{model="llama",target="mistral"} 1"#;
    assert!(metrics.contains(line), "{line} not in\n{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rewrite_header_pins_the_target_and_stops_at_infergate() {
    let (_plane, p) = start(&config(true, TWO_POOLS));
    let mut ex = Exchange::new(Arc::clone(&p));
    let h = request_headers(
        "POST",
        "/v1/chat/completions",
        &[("x-gateway-model-name-rewrite", "mistral")],
        false,
    );
    assert!(ex.on_message(h).unwrap().is_empty());
    let answers = ex
        .on_message(body(&chat("llama", 5), true, Direction::Request))
        .unwrap();
    assert_eq!(destination(&answers), MISTRAL);
    assert_eq!(
        removed(&answers[0]),
        vec!["x-gateway-model-name-rewrite".to_owned()]
    );
    assert!(String::from_utf8_lossy(streamed(&answers[1]).0).contains(r#""model":"mistral""#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_stream_names_the_clients_model_in_every_event_and_before_trailers() {
    let (_plane, p) = start(&format!("{}{REWRITE}", config(true, TWO_POOLS)));
    let mut ex = Exchange::new(Arc::clone(&p));
    post(&mut ex, &chat("llama", 10), Vec::new());
    let answers = ex
        .on_message(response_headers("200", "text/event-stream", None, false))
        .unwrap();
    assert_eq!(removed(&answers[0]), vec!["content-length".to_owned()]);
    let mut client = Vec::new();
    for chunk in [
        &b"data: {\"model\":\"mistral\",\"choices\":[]}\n\ndata: {\"mod"[..],
        &b"el\":\"mistral\",\"choices\":[]}\n\ndata: {\"model\":\"mist"[..],
    ] {
        for m in ex
            .on_message(body(chunk, false, Direction::Response))
            .unwrap()
        {
            client.extend_from_slice(streamed(&m).0);
        }
    }
    // The stream breaks off inside a name and trailers follow: the held bytes go out first,
    // unchanged, then the trailers answer.
    let trailers = ProcessingRequest {
        request: Some(Msg::ResponseTrailers(HttpTrailers::default())),
        ..ProcessingRequest::default()
    };
    let answers = ex.on_message(trailers).unwrap();
    assert!(matches!(
        answers.last().unwrap().response,
        Some(Response::ResponseTrailers(_))
    ));
    for m in &answers[..answers.len() - 1] {
        client.extend_from_slice(streamed(m).0);
    }
    assert_eq!(
        String::from_utf8(client).unwrap(),
        "data: {\"model\":\"llama\",\"choices\":[]}\n\ndata: {\"model\":\"llama\",\"choices\":[]}\n\ndata: {\"model\":\"mist"
    );
    assert!(ex.is_done());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_over_its_rate_limit_gets_429_with_retry_after_and_others_go_on() {
    let limits = "  rateLimits:
    default: {requestsPerSecond: 2}
";
    let (_plane, p) = start(&format!("{}{limits}", config(true, TWO_POOLS)));
    let tenant = |who: &str| {
        let h = request_headers(
            "POST",
            "/v1/chat/completions",
            &[("x-gateway-inference-fairness-id", who)],
            false,
        );
        let mut ex = Exchange::new(Arc::clone(&p));
        assert!(ex.on_message(h).unwrap().is_empty());
        ex.on_message(body(&chat("llama", 5), true, Direction::Request))
            .unwrap()
    };
    // The bucket holds a second's worth: two go, the third is refused.
    for _ in 0..2 {
        assert_eq!(destination(&tenant("team-a")).split(',').count(), 3);
    }
    let refused = tenant("team-a");
    assert_eq!(immediate_status(&refused), 429);
    let retry: u64 = immediate_header(&refused, "retry-after")
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry), "Retry-After {retry}");
    assert_eq!(
        immediate_header(&refused, "x-llm-d-request-dropped-reason").as_deref(),
        Some("rejected-rate-limited")
    );
    // Another tenant has its own bucket.
    assert!(!destination(&tenant("team-b")).is_empty());
}

/// A pool with `forwardPriority` tells its model servers the band, as the standalone gateway
/// does: the body sent upstream carries vLLM's `priority`, and its length is the new body's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_with_forward_priority_sends_the_band_upstream_as_the_bodys_priority() {
    let pools = TWO_POOLS.replacen(
        "routeTimeout: 5s}",
        "routeTimeout: 5s, forwardPriority: true}",
        1,
    );
    let (_plane, p) = start(&config(true, &pools));
    for (band, priority) in [("Critical", -1), ("Sheddable", 1)] {
        let mut ex = Exchange::new(Arc::clone(&p));
        let sent = chat("llama", 1_000);
        let len = sent.len().to_string();
        let headers = request_headers(
            "POST",
            "/v1/chat/completions",
            &[
                ("content-length", &len),
                ("x-gateway-inference-objective", band),
            ],
            false,
        );
        assert!(ex.on_message(headers).unwrap().is_empty());
        let answers = ex
            .on_message(body(&sent, true, Direction::Request))
            .unwrap();
        let upstream: Vec<u8> = answers[1..]
            .iter()
            .flat_map(|m| streamed(m).0.to_vec())
            .collect();
        let json: serde_json::Value = serde_json::from_slice(&upstream).unwrap();
        assert_eq!(json["priority"], priority, "{band}");
        assert_eq!(json["model"], "llama");
        let length = upstream.len().to_string();
        assert_eq!(
            get(&set_headers(&answers[0]), "content-length"),
            Some(length.as_str())
        );
    }
}
